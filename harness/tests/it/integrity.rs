//! The run directory under attack (issue 13's findings, each reproduced on
//! the real `memqual` binary): reports that would reseal edited data, links
//! and special files, two runs into one directory, a full disk, a killed
//! harness, closed pipes and a mistyped history.

use crate::common::*;
use reports::Receipt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QUICK: &str =
    "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 1\nrequest_ms = 1\nidle_ms = 1\n";

/// A control holding 16 MiB and a candidate holding 64 MiB whose memory
/// gate allows 5 % above the control at `state_ready`: the verdict is FAIL.
const GATED: &str = "
[[arm]]
id = \"control\"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 16 }

[[arm]]
id = \"candidate\"
control = \"control\"
promote = true
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 64 }
[[arm.gate]]
kind = \"memory\"
phase = \"state_ready\"
field = \"peak\"
control_factor = 1.05
";

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `memqual ARGS`, killed if it runs longer than `limit`: `None` then.
fn memqual_within(args: &[&str], limit: Duration) -> Option<std::process::Output> {
    let mut child = Command::new(MEMQUAL)
        .args(args)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn verdict(r: &Receipt) -> &'static str {
    r.gates.as_ref().map_or("none", |g| g.verdict.as_str())
}

#[test]
fn report_refuses_an_edited_raw_file_and_a_reseal_stays_visible() {
    let r = run_protocol_body("run", &format!("{GATED}{LENIENT_ADMISSION}"), &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", text(&r.out));
    assert_eq!(verdict(&receipt(&r.dir)), "FAIL");

    // Finding 1: make the candidate's state_ready peak the control's.
    let control = std::fs::read(r.dir.join("arms/control/markers.jsonl")).unwrap();
    std::fs::write(r.dir.join("arms/candidate/markers.jsonl"), control).unwrap();
    let out = memqual(&["report", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("CHANGED arms/candidate/markers.jsonl"),
        "{said}"
    );
    assert!(said.contains("--reseal"), "{said}");
    let out = memqual(&["verify", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("CHANGED arms/candidate/markers.jsonl"),
        "{}",
        text(&out)
    );

    // Accepted on purpose: the receipt and verify both say so.
    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("RESEALED"), "{}", text(&out));
    let out = memqual(&["verify", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("RESEALED raw-seal.json"),
        "{}",
        text(&out)
    );
    let run = open_run(&r.dir);
    let receipt: Receipt = run
        .read_json_limited(
            &run_dir::Rel::file("receipt.json"),
            run_dir::limits::RECEIPT,
        )
        .unwrap()
        .unwrap();
    assert!(!receipt.integrity.complete);
    let changes = &receipt.integrity.reseals[0].changes;
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].path, "arms/candidate/markers.jsonl");
}

#[test]
fn report_never_writes_through_a_link_and_verify_names_every_link() {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    // Finding 2: summary.md replaced by a link to a file outside the run.
    let victim = r.tmp.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::remove_file(r.dir.join("summary.md")).unwrap();
    std::os::unix::fs::symlink(&victim, r.dir.join("summary.md")).unwrap();
    let out = memqual(&["report", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("summary.md is a symbolic link"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    std::fs::remove_file(r.dir.join("summary.md")).unwrap();

    // Finding 3: an arm folder replaced by a link to a copy of itself.
    let moved = r.tmp.path().join("moved-arm");
    std::fs::rename(r.dir.join("arms/a"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, r.dir.join("arms/a")).unwrap();
    let out = memqual(&["verify", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("IRREGULAR arms/a"), "{said}");
    assert!(said.contains("MISSING arms/a/markers.jsonl"), "{said}");
    let out = memqual(&["report", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("arms/a is a symbolic link"),
        "{}",
        text(&out)
    );
}

#[test]
fn verify_never_follows_a_manifest_path_out_of_the_run() {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    // A manifest listing `../outside`, re-sealed so that its digest matches:
    // only the path itself can be wrong.
    std::fs::write(r.tmp.path().join("outside"), "x").unwrap();
    let run = open_run(&r.dir);
    let mut manifest: reports::seal::Manifest = run
        .read_json(&run_dir::Rel::file("manifest.json"))
        .unwrap()
        .unwrap();
    manifest.files.push(reports::seal::ManifestEntry {
        path: "../outside".into(),
        bytes: 1,
        sha256: run_dir::digest::sha256_hex(b"x"),
    });
    let text_m = run_dir::digest::canonical_json(&manifest).unwrap();
    let mut receipt: Receipt = run
        .read_json_limited(
            &run_dir::Rel::file("receipt.json"),
            run_dir::limits::RECEIPT,
        )
        .unwrap()
        .unwrap();
    drop(run);
    let seal = receipt.seal.as_mut().unwrap();
    seal.manifest_sha256 = run_dir::digest::sha256_hex(text_m.as_bytes());
    seal.receipt_sha256 = String::new();
    let digest = reports::seal::receipt_digest(&receipt).unwrap();
    receipt.seal.as_mut().unwrap().receipt_sha256 = digest;
    std::fs::write(r.dir.join("manifest.json"), &text_m).unwrap();
    std::fs::write(
        r.dir.join("receipt.json"),
        run_dir::digest::canonical_json(&receipt).unwrap(),
    )
    .unwrap();
    let out = memqual(&["verify", "--json", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["path"], "../outside");
    assert_eq!(problems[0]["kind"], "invalid");
}

#[test]
fn an_arm_id_from_run_json_is_never_used_as_a_path() {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    let run_json = r.dir.join("run.json");
    let mut info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    info["arms"] = serde_json::json!(["a", "../../escape"]);
    std::fs::write(&run_json, info.to_string()).unwrap();
    let out = memqual(&["report", "--reseal", path(&r.dir)]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("arm id `../../escape`"),
        "{}",
        text(&out)
    );
}

#[test]
fn of_two_runs_into_one_directory_exactly_one_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), QUICK);
    for trial in 0..5 {
        let out_dir = tmp.path().join(format!("out-{trial}"));
        let args = ["run", path(&protocol), "--out", path(&out_dir), "--force"];
        let children: Vec<_> = (0..2).map(|_| spawn_memqual(&args)).collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        let winners = codes.iter().filter(|c| **c == Some(0)).count();
        assert_eq!(winners, 1, "trial {trial}: {codes:?}");
        let loser = outs.iter().find(|o| o.status.code() != Some(0)).unwrap();
        assert_eq!(loser.status.code(), Some(2), "{}", text(loser));
        let said = text(loser);
        assert!(
            said.contains("in use by another memqual process")
                || said.contains("already exists and is not empty")
                || said.contains("claimed by another memqual run"),
            "{said}"
        );
        validate_receipt(&out_dir);
    }
}

/// A tmpfs of `kib` KiB at a fresh mount point (root only: the test that
/// calls this is ignored unless asked for, and fails here without root).
fn small_tmpfs(tmp: &Path, kib: u64) -> PathBuf {
    let dir = tmp.join("small-disk");
    std::fs::create_dir(&dir).unwrap();
    let out = Command::new(system_tool("mount", "mount"))
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={kib}k"),
            "tmpfs",
            path(&dir),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "this test mounts a tmpfs, which needs root: {}",
        text(&out)
    );
    dir
}

fn grow_tmpfs(dir: &Path, kib: u64) {
    let ok = Command::new("mount")
        .args(["-o", &format!("remount,size={kib}k"), path(dir)])
        .status()
        .unwrap()
        .success();
    assert!(ok, "remount {}", dir.display());
}

struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
#[ignore = "needs root (mount): fills a 160 KiB tmpfs"]
fn a_full_disk_stops_the_run_with_a_clear_error_and_report_recovers_it() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = small_tmpfs(tmp.path(), 160);
    let _unmount = Unmount(disk.clone());
    // A fast series, tool snapshots and a census at every marker fill 160 KiB
    // within the arm.
    let body = "\n[sampling]\nperiod_ms = 5\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 20\nrequest_ms = 20\nidle_ms = 3000\n";
    let protocol = write_protocol(tmp.path(), body);
    let run = disk.join("run");
    let out = memqual(&["run", path(&protocol), "--out", path(&run), "--force"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    assert!(said.contains("No space left on device"), "{said}");
    assert!(
        said.contains(&format!("memqual report {}", run.display())),
        "{said}"
    );

    // With room again, everything written is still readable.
    grow_tmpfs(&disk, 64 * 1024);
    let out = memqual(&["report", path(&run)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("marked incomplete"), "{}", text(&out));
    let r = receipt(&run);
    assert!(!r.integrity.complete, "{:?}", r.integrity);
    assert!(!r.integrity.notes.is_empty());
    assert_eq!(r.arms.len(), 1);
    assert!(
        !r.arms[0].phases.is_empty(),
        "the markers that arrived are kept"
    );
}

#[test]
fn a_killed_harness_leaves_a_run_that_report_seals_as_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "\n[[arm]]\nid = \"long\"\n[arm.calibrate]\nrequests = 1\nidle_ms = 60000\n";
    let protocol = write_protocol(tmp.path(), body);
    let run = tmp.path().join("run");
    let mut child = spawn_memqual(&["run", path(&protocol), "--out", path(&run), "--force"]);
    let markers = run.join("arms/long/markers.jsonl");
    let start = Instant::now();
    while std::fs::read_to_string(&markers)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 6
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the arm never reached its idle"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = memqual(&["report", path(&run)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = receipt(&run);
    assert!(!r.integrity.complete);
    assert!(
        r.integrity
            .sealed_by_report
            .contains(&"arms/long/markers.jsonl".to_string()),
        "{:?}",
        r.integrity
    );
    assert!(
        r.integrity
            .notes
            .iter()
            .any(|n| n == "arm long has no arm.json: the run stopped during it"),
        "{:?}",
        r.integrity.notes
    );
    // The late seal holds from now on: a later edit is refused.
    std::fs::write(&markers, "").unwrap();
    assert_eq!(memqual(&["report", path(&run)]).status.code(), Some(1));
}

#[test]
fn special_files_and_huge_files_are_refused_at_once() {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    let fifo = r.tmp.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let limit = Duration::from_secs(30);
    let refuse = |args: &[&str], expect: &str| {
        let out = memqual_within(args, limit)
            .unwrap_or_else(|| panic!("memqual {args:?} hung past {limit:?}"));
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert_ne!(
            out.status.code(),
            Some(101),
            "{args:?} panicked: {}",
            text(&out)
        );
        assert!(text(&out).contains(expect), "{args:?}: {}", text(&out));
    };
    refuse(&["run", path(&fifo)], "FIFO");
    refuse(&["run", "/dev/zero"], "character device");
    refuse(&["import", "meminfo", path(&fifo)], "FIFO");
    refuse(&["import", "meminfo", "/dev/zero"], "character device");
    refuse(&["artifact", "inspect", path(&fifo)], "FIFO");

    // A FIFO inside the run directory: verify and report name it and stop.
    let arm_fifo = r.dir.join("arms/a/extra");
    nix::unistd::mkfifo(&arm_fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    refuse(&["verify", path(&r.dir)], "IRREGULAR arms/a/extra");
    refuse(&["report", path(&r.dir)], "arms/a/extra is a FIFO");
    std::fs::remove_file(&arm_fifo).unwrap();
    // /dev/zero where a listed file was.
    let results = r.dir.join("arms/a/results.jsonl");
    let saved = std::fs::read(&results).unwrap();
    std::fs::remove_file(&results).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &results).unwrap();
    refuse(&["verify", path(&r.dir)], "IRREGULAR arms/a/results.jsonl");
    std::fs::remove_file(&results).unwrap();
    std::fs::write(&results, saved).unwrap();

    // A 1 GiB receipt (sparse: no disk used) is refused, not loaded.
    let receipt = r.dir.join("receipt.json");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&receipt)
        .unwrap();
    f.set_len(1 << 30).unwrap();
    refuse(&["verify", path(&r.dir)], "more than the");
    refuse(&["compare", path(&r.dir), path(&r.dir)], "more than the");
}

#[test]
fn a_closed_pipe_ends_memqual_quietly() {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    let verify = ["verify", "--json", path(&r.dir)];
    let compare = ["compare", path(&r.dir), path(&r.dir)];
    for args in [
        &["schema", "--receipt"][..],
        &["schema"][..],
        &verify[..],
        &compare[..],
    ] {
        let mut child = Command::new(MEMQUAL)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before memqual writes: `memqual … | head -0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {said}");
    }
}

#[test]
fn history_refuses_a_database_that_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("soak-histroy.sqlite");
    let out = memqual(&["history", "--history", path(&typo)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no soak history at"), "{}", text(&out));
    assert!(
        !typo.exists(),
        "history created a database it was asked to read"
    );
}

/// Every file and folder name the run directory type owns appears in the
/// run-directory table of docs/run-directory.md, and every name the table
/// gives is one of them.
#[test]
fn the_documented_run_directory_table_matches_the_run_directory_type() {
    let doc = include_str!("../../../docs/run-directory.md");
    let mut in_table = std::collections::BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        // `\|` is a pipe inside a cell, not a column break.
        let line = line.replace("\\|", "");
        let cell = line.split('|').nth(1).unwrap();
        for quoted in cell.split('`').skip(1).step_by(2) {
            for part in quoted.split(['/', ',', ' ']) {
                let name = part.trim();
                if !name.is_empty() && !name.starts_with('<') && !name.contains('*') {
                    in_table.insert(name.to_string());
                }
            }
        }
    }
    for name in run_dir::names::ALL {
        assert!(
            in_table.contains(*name),
            "{name} is not in the run-directory table of docs/run-directory.md"
        );
    }
    for name in &in_table {
        assert!(
            run_dir::names::ALL.contains(&name.as_str()),
            "docs/run-directory.md's table names {name}, which run_dir::names does not define"
        );
    }
}

/// A finished [`QUICK`] run and a fresh key pair (secret, public) beside it.
fn quick_run_and_key_pair() -> (ProtocolRun, PathBuf, PathBuf) {
    let r = run_protocol_body("run", QUICK, &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", text(&r.out));
    let (secret, public) = (r.tmp.path().join("k.key"), r.tmp.path().join("k.pub"));
    let out = memqual(&[
        "keygen",
        "--secret",
        path(&secret),
        "--public",
        path(&public),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    (r, secret, public)
}

/// minisign itself verifies what `memqual sign` signed.
#[test]
#[ignore = "needs minisign (Debian package minisign): cross-checks memqual's signatures"]
fn minisign_itself_verifies_a_signed_receipt() {
    let minisign = system_tool("minisign", "minisign");
    let (r, secret, public) = quick_run_and_key_pair();
    let out = memqual(&["sign", path(&r.dir), "--key", path(&secret)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = Command::new(minisign)
        .args([
            "-Vm",
            path(&r.dir.join("receipt.json")),
            "-p",
            path(&public),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "minisign: {}", text(&out));
}

#[test]
fn a_signed_run_verifies_with_its_key_and_fails_with_another_or_when_forged() {
    let (r, secret, public) = quick_run_and_key_pair();
    // Unsigned: the seal holds, and verify says what it cannot prove.
    let out = memqual(&["verify", path(&r.dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("detects accidental changes, not forgery"),
        "{}",
        text(&out)
    );

    let out = memqual(&["sign", path(&r.dir), "--key", path(&secret)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = memqual(&["verify", path(&r.dir), "--pubkey", path(&public)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("signature valid"), "{}", text(&out));

    // Another key does not verify; a forged receipt breaks the signature.
    let (other_secret, other_public) = (r.tmp.path().join("o.key"), r.tmp.path().join("o.pub"));
    memqual(&[
        "keygen",
        "--secret",
        path(&other_secret),
        "--public",
        path(&other_public),
    ]);
    let out = memqual(&["verify", path(&r.dir), "--pubkey", path(&other_public)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("SIGNATURE receipt.json.minisig"),
        "{}",
        text(&out)
    );
    // Forgery: change a raw file and recompute every digest the way an
    // adversary would (report --reseal); the signature no longer matches,
    // because sealing again removes it.
    std::fs::write(r.dir.join("arms/a/worker.log"), "forged\n").unwrap();
    assert_eq!(
        memqual(&["report", "--reseal", path(&r.dir)]).status.code(),
        Some(0)
    );
    let out = memqual(&["verify", path(&r.dir), "--pubkey", path(&public)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("no signature, but a public key was given"),
        "{said}"
    );
    // Signing refuses a broken seal.
    std::fs::write(r.dir.join("arms/a/worker.log"), "again\n").unwrap();
    let out = memqual(&["sign", path(&r.dir), "--key", path(&secret)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not hold, so it is not signed"),
        "{}",
        text(&out)
    );
}

/// `keygen` checks both paths before writing either, and never leaves half a
/// key pair: not when the public key exists, is a link, names the secret's
/// path, or cannot be created (its folder is missing).
#[test]
fn keygen_refuses_before_writing_and_never_leaves_half_a_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("k.key");
    let keygen = |public: &Path| {
        let out = memqual(&[
            "keygen",
            "--secret",
            path(&secret),
            "--public",
            path(public),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(!secret.exists(), "a secret key was left: {}", text(&out));
        assert!(std::fs::symlink_metadata(&secret).is_err());
        text(&out)
    };

    // The public key exists: refused by name, the old key untouched.
    let existing = tmp.path().join("old.pub");
    std::fs::write(&existing, "old public key\n").unwrap();
    let said = keygen(&existing);
    assert!(
        said.contains(&format!("{}: already exists", existing.display())),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&existing).unwrap(),
        "old public key\n"
    );

    // A dangling link where the public key would go: not written through.
    let link = tmp.path().join("link.pub");
    let target = tmp.path().join("target.pub");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let said = keygen(&link);
    assert!(said.contains("link.pub: already exists"), "{said}");
    assert!(!target.exists());

    // The same path twice.
    let said = keygen(&secret);
    assert!(said.contains("name the same file"), "{said}");

    // The second write fails (no such folder): the first is removed.
    let said = keygen(&tmp.path().join("missing/k.pub"));
    assert!(said.contains("k.pub: cannot create"), "{said}");

    // A link where the secret key would go is refused too.
    let secret_link = tmp.path().join("s.key");
    std::os::unix::fs::symlink(tmp.path().join("stolen.key"), &secret_link).unwrap();
    let out = memqual(&[
        "keygen",
        "--secret",
        path(&secret_link),
        "--public",
        path(&tmp.path().join("s.pub")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!tmp.path().join("stolen.key").exists());
    assert!(!tmp.path().join("s.pub").exists());

    // Two fresh paths: both written, the secret key private.
    let public = tmp.path().join("k.pub");
    let out = memqual(&[
        "keygen",
        "--secret",
        path(&secret),
        "--public",
        path(&public),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        std::fs::read_to_string(&public)
            .unwrap()
            .starts_with("untrusted comment: minisign public key")
    );
}
