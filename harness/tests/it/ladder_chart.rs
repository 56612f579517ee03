//! `memqual ladder-chart`: the page over sealed runs, and its refusals.
//!
//! The run is the committed `reports/tests/runs/quickstart-mini` (a real
//! tiny.en run, raw files only) copied and sealed by `memqual report`, so
//! no worker runs here.

use crate::common::{MEMQUAL, copy_tree, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ladder_chart(args: &[&str]) -> Output {
    Command::new(MEMQUAL)
        .arg("ladder-chart")
        .args(args)
        .output()
        .expect("memqual runs")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The committed quickstart-mini run, copied into `tmp` and sealed with
/// its receipt rebuilt by `memqual report`.
fn sealed_run(tmp: &Path, name: &str) -> PathBuf {
    let committed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/tests/runs/quickstart-mini");
    let dir = tmp.join(name);
    copy_tree(&committed, &dir);
    let out = Command::new(MEMQUAL)
        .args(["report", path(&dir)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "report: {}", stderr(&out));
    assert!(dir.join("receipt.json").is_file());
    dir
}

#[test]
fn ladder_chart_draws_each_run_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let run = sealed_run(tmp.path(), "mini");
    let page = tmp.path().join("ladder.html");

    // Two panels (the same run twice), each naming the run's arms.
    let out = ladder_chart(&["--out", path(&page), path(&run), path(&run)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("class=\"ladder-panel\"").count(), 2);
    assert_eq!(html.matches("<svg").count(), 2);
    for name in ["quickstart-mini", "fp16-one-state", "fp16-extra-state"] {
        assert!(html.contains(name), "{name}");
    }
    assert!(html.contains("model_loaded") && html.contains("request peak"));
    assert!(html.contains("No arm had an external encoder process"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 run(s), 4 arm(s)"), "{stdout}");

    // An existing --out is kept without --force, replaced with it.
    std::fs::write(&page, "keep me").unwrap();
    let out = ladder_chart(&["--out", path(&page), path(&run)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already exists; pass --force"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "keep me");
    let out = ladder_chart(&["--out", path(&page), "--force", path(&run)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&page)
            .unwrap()
            .matches("class=\"ladder-panel\"")
            .count(),
        1
    );

    // --out a folder, even with --force.
    let out = ladder_chart(&["--out", path(tmp.path()), "--force", path(&run)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is a folder"), "{}", stderr(&out));

    // No run at all.
    let fresh = tmp.path().join("fresh.html");
    let out = ladder_chart(&["--out", path(&fresh)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("RUN_DIR"), "{}", stderr(&out));

    // A folder without receipt.json: named, nothing written.
    let empty = tmp.path().join("not-a-run");
    std::fs::create_dir(&empty).unwrap();
    let out = ladder_chart(&["--out", path(&fresh), path(&run), path(&empty)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{} has no receipt.json", empty.display())),
        "{}",
        stderr(&out)
    );
    assert!(!fresh.exists());

    // A receipt that does not parse: the file and serde's reason.
    let invalid = tmp.path().join("invalid");
    std::fs::create_dir(&invalid).unwrap();
    std::fs::write(
        invalid.join("receipt.json"),
        "{\"format_version\": \"4.2\"}",
    )
    .unwrap();
    let out = ladder_chart(&["--out", path(&fresh), path(&invalid)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}", invalid.join("receipt.json").display())),
        "{err}"
    );
    assert!(err.contains("missing field `run`"), "{err}");
    assert!(!fresh.exists());

    // A run whose seal no longer holds: exit 1, named, nothing written.
    let summary = run.join("summary.md");
    let mut text = std::fs::read_to_string(&summary).unwrap();
    text.push_str("\nedited after sealing\n");
    std::fs::write(&summary, text).unwrap();
    let out = ladder_chart(&["--out", path(&fresh), path(&run)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("does not hold") && err.contains("summary.md"),
        "{err}"
    );
    assert!(!fresh.exists());
}

#[test]
fn ladder_chart_help_says_what_it_draws() {
    let out = Command::new(MEMQUAL)
        .args(["ladder-chart", "--help"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for words in [
        "external encoder process",
        "model_loaded",
        "state_ready",
        "--force",
    ] {
        assert!(help.contains(words), "{words}: {help}");
    }
}
