//! Allocation attribution's two readers on arbitrary text: jemalloc's heap
//! profile (`heap_v2`) and `malloc_history -allBySize` output, the first
//! byte choosing which (lossy UTF-8, as the receipt reads them). A parsed
//! heap profile is also unbiased stack by stack and its addresses looked up
//! in its own maps, as the receipt does.
//!
//! An error is a correct answer; a panic or a hang is a finding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use reports::attribution::{heap_profile, malloc_history};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if which % 2 == 0 {
        if let Ok(p) = heap_profile::parse(&text, "fuzz.heap") {
            for stack in &p.stacks {
                let _ = stack.counts.live(p.period);
                let _ = stack.counts.accumulated(p.period);
                for a in &stack.frames {
                    let _ = p.mapping(*a);
                }
            }
        }
    } else {
        let _ = malloc_history::parse(&text, "fuzz.txt");
    }
});
