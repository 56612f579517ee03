//! `verify` is linear in the number and size of a run's files: it reads
//! each sealed byte once, plus the seal's own small documents, and no more
//! per file. Counted, not timed: the calling thread's `rchar` and `syscr`
//! (`/proc/thread-self/io`, which count every byte and call `read` returns
//! whatever the host's load), around an in-process `verify` of the
//! committed real run padded with more and bigger raw files.

use crate::copy_tree;
use run_dir::{Access, Rel, RunDir};
use std::path::{Path, PathBuf};

/// The committed run with `files` more raw files of `bytes` each, reported
/// and sealed as `memqual report` does; with the bytes the manifest lists.
fn sealed_run(files: usize, bytes: usize) -> (tempfile::TempDir, PathBuf, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/runs/quickstart-mini"),
        &dir,
    );
    let run = RunDir::open(&dir, Access::Rebuild).unwrap();
    let pad = Rel::parse("arms/fp16-one-state/padding").unwrap();
    // An empty folder that is not part of the run's layout is named by
    // verify (issue 59): the folder is made only when it holds files.
    if files > 0 {
        run.create_dir(&pad).unwrap();
    }
    for i in 0..files {
        let line = format!("padding file {i}\n");
        let body = line.repeat(bytes / line.len() + 1);
        run.write_bytes(&pad.join(&format!("{i:05}.txt")), &body.as_bytes()[..bytes])
            .unwrap();
    }
    let check = run.check_raw().unwrap();
    run.update_raw_seal(&check, None).unwrap();
    let mut receipt = reports::assemble(&run).unwrap();
    render::export::write_all(&run, &receipt).unwrap();
    reports::seal::seal(&run, &mut receipt).unwrap();
    let listed = reports::seal::manifest(&run)
        .unwrap()
        .files
        .iter()
        .map(|f| f.bytes)
        .sum();
    (tmp, dir, listed)
}

/// (`rchar`, `syscr`) of this thread so far.
fn thread_io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    (field("rchar:"), field("syscr:"))
}

/// Bytes and read calls one `verify` of `dir` makes.
fn verify_cost(dir: &Path) -> (u64, u64) {
    let run = RunDir::open(dir, Access::Read).unwrap();
    let before = thread_io();
    let v = reports::seal::verify(&run, None);
    let after = thread_io();
    assert!(v.holds(), "{:?}", v.problems);
    (after.0 - before.0, after.1 - before.1)
}

#[test]
fn verify_reads_each_sealed_byte_once_however_many_and_large_the_files() {
    let runs = [(0, 0), (400, 1024), (400, 64 * 1024), (1600, 1024)];
    let mut seen = Vec::new();
    for (files, bytes) in runs {
        let (_tmp, dir, listed) = sealed_run(files, bytes);
        let (read, calls) = verify_cost(&dir);
        eprintln!("{files} files of {bytes} B: {listed} listed, {read} read in {calls} calls");
        seen.push((files, bytes, listed, read, calls));
    }
    let (_, _, base_listed, base_read, base_calls) = seen[0];
    // Beyond the listed files, verify reads the seal's documents (the
    // manifest, receipt and raw seal, some twice: parsed, then hashed) and
    // a run directory's walk. That overhead may grow with the manifest (a
    // line per file) but not with the files' sizes.
    let overhead = base_read - base_listed;
    assert!(
        base_read >= base_listed && overhead < base_listed,
        "base: {base_read} read for {base_listed} listed"
    );
    for &(files, bytes, listed, read, calls) in &seen[1..] {
        let more_bytes = listed - base_listed;
        let more_read = read - base_read;
        // Every added byte read once: at least once, and less than twice
        // (the manifest's and raw seal's lines for the added files, about
        // 250 bytes each, are the rest).
        let per_file_docs = 4 * 250 * files as u64;
        assert!(
            more_read >= more_bytes && more_read <= more_bytes + per_file_docs,
            "{files} × {bytes} B: {more_read} more bytes read for {more_bytes} more listed"
        );
        // Read calls: one per 64 KiB buffer of each file, plus the call that
        // sees its end, and a few per file for the documents.
        let per_file_calls = (bytes as u64).div_ceil(64 * 1024) + 4;
        assert!(
            calls - base_calls <= files as u64 * per_file_calls,
            "{files} × {bytes} B: {} more read calls",
            calls - base_calls
        );
    }
}
