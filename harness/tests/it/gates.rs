//! Gates, admission and the seal end to end, on the calibration worker
//! (known allocations, fast): the real `memqual` binary.

use crate::common::*;
use reports::gates::Outcome;

/// A 16 MiB candidate against an 8 MiB control (memory gate FAIL), and an
/// arm that must fail closed with SIGABRT (PASS) — the one promoted.
const GATED: &str = r#"
[[arm]]
id = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 8 }

[[arm]]
id = "bigger"
control = "base"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
plateau = { mib = 40 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
control_factor = 1.5

[[arm]]
id = "crashes"
promote = true
expect = "fail"
[arm.calibrate]
requests = 2
request_ms = 1
idle_ms = 1
crash_at = 0

[[arm.gate]]
kind = "fail_closed"
reason = "SIGABRT"
"#;

#[test]
fn gates_judge_each_arm_and_the_promoted_arm_decides_the_run() {
    let r = run_protocol_body("run", &format!("{GATED}{LENIENT_ADMISSION}"), &["--json"]);
    // The promoted arm failed closed as expected: the run verdict is PASS.
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let gates = receipt.gates.as_ref().unwrap();
    assert_eq!(gates.verdict, Outcome::Pass);
    assert_eq!(gates.judged_arms, ["crashes"]);
    let bigger = gates.arms.iter().find(|a| a.arm == "bigger").unwrap();
    assert_eq!(bigger.verdict, Outcome::Fail);
    let mem = &bigger.gates[0].checks[0];
    assert_eq!(mem.outcome, Outcome::Fail);
    // 40 MiB held against 8 MiB: far above 1.5 × the control.
    let (m, c) = (mem.measured.unwrap(), mem.control.unwrap());
    assert!(m - c > 31.0 * MIB && m - c < 33.0 * MIB, "{m} vs {c}");
    assert_eq!(mem.threshold, Some(c * 1.5));
    assert_eq!(bigger.gates[1].kind, "validity");
    assert_eq!(
        bigger.gates[1].outcome,
        Outcome::Pass,
        "{:#?}",
        bigger.gates[1]
    );
    let crashes = gates.arms.iter().find(|a| a.arm == "crashes").unwrap();
    assert_eq!(
        crashes.gates.len(),
        1,
        "no validity gate for an arm expected to fail"
    );
    assert_eq!(crashes.verdict, Outcome::Pass);
    let summary: serde_json::Value = serde_json::from_slice(&r.out.stdout).unwrap();
    assert_eq!(summary["verdict"], "PASS");
    // The human summary shows the gates too.
    let human = memqual(&["verify", r.dir.to_str().unwrap()]);
    assert_eq!(
        human.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );
}

#[test]
fn a_refused_host_stops_the_run_with_exit_3_unless_forced() {
    // 1 TiB available: the largest threshold allowed, more than any test host has.
    let impossible =
        "\n[admission]\nwindow_ms = 50\nmin_available_mib = 1048576\nmax_load_per_core = 1000.0\n";
    let body = format!("{GATED}{impossible}");
    let tmp = tempfile::tempdir().unwrap();
    let proto = write_protocol(tmp.path(), &body);
    let dir = tmp.path().join("run");
    let out = memqual(&[
        "run",
        proto.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the host is not quiet: available memory"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("< 1048576 MiB"), "{}", stderr(&out));
    let record: reports::admission::AdmissionRecord =
        serde_json::from_str(&std::fs::read_to_string(dir.join("admission.json")).unwrap())
            .unwrap();
    assert_eq!(record.checks.len(), 1);
    assert!(!record.checks[0].admitted);
    assert_eq!(record.checks[0].window_ms, 50);
    assert!(!dir.join("arms/base").exists(), "no arm ran");

    // --force: every arm runs, and every arm judged for validity fails it,
    // saying why. The promoted arm only has to fail closed, which a busy host
    // does not change, so the run verdict stays PASS.
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let admission = receipt.admission.as_ref().unwrap();
    assert!(admission.forced);
    assert_eq!(
        admission.checks.len(),
        4,
        "before the run and before each arm"
    );
    let gates = receipt.gates.as_ref().unwrap();
    let bigger = gates.arms.iter().find(|a| a.arm == "bigger").unwrap();
    let host = bigger.gates[1]
        .checks
        .iter()
        .find(|c| c.name == "host admitted before the arm")
        .unwrap();
    assert_eq!(host.outcome, Outcome::Fail);
    assert!(
        host.note.contains("before arm bigger: available memory"),
        "{}",
        host.note
    );
    assert_eq!(bigger.verdict, Outcome::Fail);
}

#[test]
fn verify_names_every_file_with_a_flipped_byte() {
    let r = run_protocol_body(
        "run",
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 1\nrequest_ms = 1\nidle_ms = 1\n",
        &["--json"],
    );
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let d = r.dir.to_str().unwrap();
    assert_eq!(memqual(&["verify", d]).status.code(), Some(0));
    let mut files = Vec::new();
    let mut stack = vec![r.dir.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 12, "{files:?}");
    for path in &files {
        let original = std::fs::read(path).unwrap();
        if original.is_empty() {
            continue; // e.g. an empty stdout.txt: no byte to flip
        }
        let mut flipped = original.clone();
        let at = original.len() / 2;
        flipped[at] ^= 0x20;
        std::fs::write(path, &flipped).unwrap();
        let out = memqual(&["verify", d]);
        let rel = path.strip_prefix(&r.dir).unwrap().to_str().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{rel}: {stdout}");
        assert!(stdout.contains(&format!(" {rel}:")), "{rel}: {stdout}");
        std::fs::write(path, &original).unwrap();
    }
    assert_eq!(memqual(&["verify", d]).status.code(), Some(0));
}
