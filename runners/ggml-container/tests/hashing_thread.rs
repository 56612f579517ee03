//! A model the parser rejects leaves no hashing thread behind. Found by the
//! `ggml` fuzz target (harness/fuzz): when a parse stopped at a defect, the
//! file digest's thread was detached and still running after
//! `inspect_reader` returned (LeakSanitizer reported its thread state). Its
//! own test binary, so that no other test's parse runs a thread of the same
//! name meanwhile.

#![cfg(target_os = "linux")]

use ggml_container::synthetic::{SyntheticSpec, to_bytes};
use ggml_container::{Expect, inspect_reader};
use std::io::Cursor;

/// The kernel's `PF_EXITING` task flag: set when a thread starts to exit,
/// before a join on it returns.
const PF_EXITING: u64 = 0x4;

/// Threads of this process named `sha256` (the parser's hashing thread)
/// that are not exiting. A joined thread may linger in /proc for a moment
/// while the kernel tears it down, but always with `PF_EXITING` set.
fn live_hashing_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            // `tid (comm) state ppid pgrp session tty tpgid flags …`
            let Some((head, tail)) = stat.rsplit_once(')') else {
                return false;
            };
            let flags: u64 = tail
                .split_whitespace()
                .nth(6)
                .and_then(|f| f.parse().ok())
                .unwrap_or(0);
            head.ends_with("(sha256") && flags & PF_EXITING == 0
        })
        .count()
}

#[test]
fn a_rejected_model_leaves_no_hashing_thread() {
    // A loadable-size model (7.5 MB) cut in the middle of a tensor.
    let model = to_bytes(&SyntheticSpec::loadable()).unwrap();
    let cut = &model[..model.len() / 2];
    for round in 0..10 {
        let parsed = inspect_reader(Cursor::new(cut), cut.len() as u64, Expect::Full);
        let defect = parsed.expect_err("a truncated model must be rejected");
        assert!(
            defect
                .to_string()
                .contains("the file ends inside the tensor payload"),
            "{defect}"
        );
        assert_eq!(live_hashing_threads(), 0, "round {round}: {defect}");
    }
}
