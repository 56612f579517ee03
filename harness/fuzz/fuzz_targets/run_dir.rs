//! The run-directory reader: the fuzz input becomes the files of a fresh
//! run directory, then everything memqual does with a finished run runs on
//! it: `verify` (as found), the raw-seal check, `compare`'s receipt read,
//! `report` (refusing changed raw data, then again with `--reseal`), and
//! `verify` of what `report` sealed, which must hold.
//!
//! Input format: files separated by NUL bytes; each file is its path inside
//! the run directory (plain names joined by `/`), a newline, then its
//! contents. Contents `@fifo` make a FIFO, `@link TARGET` a symbolic link
//! (TARGET relative without `..`, or `/dev/zero`), so hostile directories
//! are covered too. Example: `run.json\n{...}\0arms/a/markers.jsonl\n{...}`.
//!
//! An error is a correct answer; a panic, a hang (a FIFO or /dev/zero
//! read), unbounded memory or a seal that `report` wrote and `verify` then
//! rejects is a finding.

#![no_main]

#[path = "scratch.rs"]
mod scratch;
use libfuzzer_sys::fuzz_target;
use run_dir::{Access, RunDir};
use scratch::scratch;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAX_FILES: usize = 64;
const MAX_DEPTH: usize = 6;

/// `path` as plain components, or `None` (such a file is not written).
fn plain_path(path: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(path).ok()?;
    let parts: Vec<&str> = text.split('/').collect();
    let plain = |p: &&str| {
        !p.is_empty()
            && *p != "."
            && *p != ".."
            && p.len() <= 64
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    (parts.len() <= MAX_DEPTH && parts.iter().all(plain)).then(|| parts.iter().collect())
}

/// A link target that cannot lead outside the temporary directory.
fn safe_target(target: &[u8]) -> Option<PathBuf> {
    if target == b"/dev/zero" {
        return Some(PathBuf::from("/dev/zero"));
    }
    let text = std::str::from_utf8(target).ok()?;
    let inside = !text.is_empty()
        && !text.starts_with('/')
        && text.split('/').all(|p| p != "..")
        && !text.contains('\0');
    inside.then(|| PathBuf::from(text))
}

/// Write the input's files under `root`; files that cannot be made (a path
/// that is taken already, or collides with a folder) are skipped.
fn materialize(root: &Path, data: &[u8]) {
    for chunk in data.split(|&b| b == 0).take(MAX_FILES) {
        let Some(newline) = chunk.iter().position(|&b| b == b'\n') else {
            continue;
        };
        let (path, contents) = (&chunk[..newline], &chunk[newline + 1..]);
        let Some(rel) = plain_path(path) else {
            continue;
        };
        let at = root.join(rel);
        if let Some(parent) = at.parent()
            && std::fs::create_dir_all(parent).is_err()
        {
            continue;
        }
        if contents == b"@fifo" {
            let _ = nix::unistd::mkfifo(&at, nix::sys::stat::Mode::S_IRWXU);
        } else if let Some(target) = contents.strip_prefix(b"@link ") {
            if let Some(target) = safe_target(target) {
                let _ = std::os::unix::fs::symlink(target, &at);
            }
        } else {
            // A new file only: writing over an earlier chunk's FIFO would
            // block here, and over its link would write elsewhere.
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&at)
                .and_then(|mut f| f.write_all(contents));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let tmp = scratch();
    let root = tmp.path().join("run");
    if std::fs::create_dir(&root).is_err() {
        return;
    }
    materialize(&root, data);

    // As found: verify, the raw-seal check, a bounded read of the receipt.
    if let Ok(run) = RunDir::open(&root, Access::Read) {
        let _ = reports::seal::verify(&run, None);
        let _ = run.check_raw();
        let _ = run.recoveries();
    }
    if let Ok((receipt, _seal)) = harness::review::read_receipt(&root) {
        let c = fleet::compare::compare(("a", &receipt), ("b", &receipt), Some(0.0));
        let _ = harness::compare::human(&c);
        assert!(
            c.regressions.is_empty(),
            "a receipt regressed against itself: {:?}",
            c.regressions
        );
    }

    // `memqual report`, then `report --reseal` when it refused.
    let reported = harness::review::report(&root, false).is_ok()
        || harness::review::report(&root, true).is_ok();
    if !reported {
        return;
    }
    let run = RunDir::open(&root, Access::Read)
        .unwrap_or_else(|e| panic!("the run report just sealed does not open: {e}"));
    let verification = reports::seal::verify(&run, None);
    // A reseal is reported by design, and a signature over the old
    // receipt no longer matches the rebuilt one; nothing else may fail.
    let broken: Vec<_> = verification
        .problems
        .iter()
        .filter(|p| p.kind != "resealed" && p.kind != "signature")
        .collect();
    assert!(
        broken.is_empty(),
        "report sealed the run, then verify found: {broken:#?}"
    );
});
