//! The strict GGML parser (`ggml_container::inspect_reader`) on arbitrary
//! bytes, as a full model and as a decoder-only derivative.
//!
//! A `ParseError` is a correct answer; a panic, a hang or an allocation
//! sized by a header field rather than by the input is a finding.

#![no_main]

use ggml_container::{Expect, inspect_reader};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    for expect in [Expect::Full, Expect::DecoderOnly, Expect::EncoderOnly] {
        let _ = inspect_reader(Cursor::new(data), len, expect);
    }
    // A length that disagrees with the bytes (a file that grew or shrank
    // between stat and read) must be an error too, never a panic.
    let _ = inspect_reader(Cursor::new(data), len.saturating_add(4096), Expect::Full);
    let _ = inspect_reader(Cursor::new(data), len / 2, Expect::Full);
});
