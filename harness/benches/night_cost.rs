//! What a night costs memqual itself: `report`, `verify`, `compare`,
//! `merge` and `history` on generated soak runs of growing length, each
//! timed as the real `memqual` binary with its peak resident size (the
//! child's `ru_maxrss`) and the size of what it wrote.
//!
//! ```sh
//! cargo bench -p harness --bench night_cost                  # 1 h, 4 h, 24 h
//! cargo bench -p harness --bench night_cost -- --hours 1,4   # a shorter table
//! ```
//!
//! The runs come from `memqual fixtures soak-run` (50 ms rows, two requests
//! a minute, a 300 MiB one-tick spike half-way), in a temporary folder
//! removed afterwards (`--keep DIR` keeps them). The figures belong in
//! docs/measurement.md, never in a pass/fail test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const MEMQUAL: &str = env!("CARGO_BIN_EXE_memqual");

/// One command's cost.
struct Cost {
    wall_s: f64,
    max_rss_kib: i64,
}

/// Run `memqual args` to its end; its wall time and peak resident size.
fn measure(args: &[&str], expect_success: bool) -> Cost {
    // Into a file, not a pipe: nobody reads it while the command runs.
    let log = tempfile::tempfile().expect("a log file");
    let start = Instant::now();
    // Reaped by `wait4` below, which alone also gives the child's rusage.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(MEMQUAL)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(log.try_clone().expect("the log file"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start memqual {args:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; both pointers are
    // to live locals of the right types.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 on memqual {args:?} failed");
    let wall_s = start.elapsed().as_secs_f64();
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if !ok {
        let mut said = String::new();
        let _ = std::io::Read::read_to_string(&mut &log, &mut said);
        assert!(!expect_success, "memqual {args:?} failed: {said}");
        eprintln!("memqual {args:?} exited {status}: {}", said.trim_end());
    }
    Cost {
        wall_s,
        max_rss_kib: usage.ru_maxrss,
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn tree_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return size(path);
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Data rows of a CSV file, read in small pieces: this process must stay
/// smaller than any command it measures, since a child's `ru_maxrss`
/// counts the parent's pages it shared until `exec`.
fn count_rows(path: &Path) -> usize {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return 0;
    };
    let (mut buf, mut lines) = (vec![0u8; 1 << 16], 0usize);
    while let Ok(n @ 1..) = file.read(&mut buf) {
        lines += buf[..n].iter().filter(|c| **c == b'\n').count();
    }
    lines.saturating_sub(1)
}

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let hours: Vec<u64> = value("--hours")
        .unwrap_or_else(|| "1,4,24".into())
        .split(',')
        .map(|h| h.trim().parse().expect("--hours: whole hours, e.g. 1,4,24"))
        .collect();
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let root: PathBuf = value("--keep").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&root).expect("the output folder");
    println!(
        "| run | rows | command | wall s | peak RSS MiB | output |\n|---|---|---|---|---|---|"
    );
    for h in hours {
        let duration = format!("{h}h");
        let dir = root.join(format!("night-{h}h"));
        // A second host's night of the same protocol (merge), and a
        // leaking night (compare, history).
        let second = root.join(format!("night-{h}h-seed2"));
        let other = root.join(format!("night-{h}h-leak"));
        let history = root.join(format!("history-{h}h.sqlite"));
        let (d, s, o, hist) = (
            dir.to_str().unwrap(),
            second.to_str().unwrap(),
            other.to_str().unwrap(),
            history.to_str().unwrap(),
        );
        let generate = |dir: &str, extra: &[&str]| {
            let mut args = vec!["fixtures", "soak-run", dir, "--duration", &duration];
            args.extend_from_slice(extra);
            measure(&args, true)
        };
        let generated = generate(d, &["--raw-only"]);
        generate(s, &["--seed", "2"]);
        generate(
            o,
            &[
                "--seed",
                "3",
                "--leak-kib-per-request",
                "4",
                "--history",
                hist,
            ],
        );
        let series = dir.join("arms/generated/series.csv");
        let rows = count_rows(&series);
        let row = |what: &str, c: &Cost, output: String| {
            println!(
                "| {h} h | {rows} | {what} | {:.2} | {:.1} | {output} |",
                c.wall_s,
                c.max_rss_kib as f64 / 1024.0
            );
        };
        row(
            "fixtures soak-run (raw)",
            &generated,
            format!("series.csv {}", mb(size(&series))),
        );
        let report = measure(&["report", d], false);
        row(
            "report",
            &report,
            format!(
                "receipt.json {}, report.html {}, trace.json {}, phase-rows.jsonl {}, summary.md {}",
                mb(size(&dir.join("receipt.json"))),
                mb(size(&dir.join("report.html"))),
                mb(size(&dir.join("trace.json"))),
                mb(size(&dir.join("arms/generated/phase-rows.jsonl"))),
                mb(size(&dir.join("summary.md"))),
            ),
        );
        let run_bytes = tree_size(&dir);
        let verify = measure(&["verify", d], true);
        row(
            "verify",
            &verify,
            format!(
                "{} read at {:.0} MB/s",
                mb(run_bytes),
                run_bytes as f64 / 1e6 / verify.wall_s
            ),
        );
        let compare = measure(&["compare", d, o], false);
        row("compare", &compare, "stdout".into());
        let merged = root.join(format!("merged-{h}h"));
        let merge = measure(&["merge", d, s, "--out", merged.to_str().unwrap()], false);
        row(
            "merge (2 runs)",
            &merge,
            format!("fleet folder {}", mb(tree_size(&merged))),
        );
        let history_cost = measure(&["history", "--history", hist], true);
        row(
            "history",
            &history_cost,
            format!("{} (1 night)", mb(size(&history))),
        );
    }
}
