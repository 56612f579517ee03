//! Fail closed: crashes, timeouts, contract violations and bad protocols.

use crate::common::*;
use reports::record::{ArmOutcome, ArmStatus};
use sampler::Phase;
use std::time::Instant;

fn outcome(run: &std::path::Path, arm: &str) -> ArmOutcome {
    let text = std::fs::read_to_string(run.join("arms").join(arm).join("arm.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_worker_that_dies_mid_request_fails_its_arm_keeps_its_data_and_the_next_arm_runs() {
    let r = run_protocol_body(
        "run",
        r#"
[[arm]]
id = "crash"
[arm.calibrate]
requests = 3
request_ms = 200
crash_at = 1
plateau = { mib = 32 }

[[arm]]
id = "after"
[arm.calibrate]
requests = 1
"#,
        &["--json"],
    );
    let (run, out) = (r.dir.clone(), r.out.clone());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    let crash = outcome(&run, "crash");
    assert_eq!(crash.status, ArmStatus::Failed);
    let exit = crash.exit.as_ref().unwrap();
    assert_eq!(exit.signal_name.as_deref(), Some("SIGABRT"));
    assert_eq!(exit.code, None);
    assert!(
        crash
            .failure
            .iter()
            .any(|f| f.contains("killed by signal SIGABRT (6)")),
        "{:?}",
        crash.failure
    );
    assert!(
        crash
            .failure
            .iter()
            .any(|f| f.contains("phases incomplete: last phase request_begin")),
        "{:?}",
        crash.failure
    );
    assert!(!crash.bye);

    // Everything up to the death is on disk.
    let marks = markers(&run.join("arms/crash"));
    let last = marks.last().unwrap();
    assert_eq!(
        (last.phase, last.request_id),
        (Phase::RequestBegin, Some(1))
    );
    assert_eq!(marks.len(), 7);
    let rows = series(&run.join("arms/crash"));
    assert!(
        rows.iter().filter(|r| r.resident_bytes.is_some()).count() >= 4,
        "{} rows",
        rows.len()
    );
    let results = std::fs::read_to_string(run.join("arms/crash/results.jsonl")).unwrap();
    assert_eq!(results.lines().count(), 1);

    assert_eq!(outcome(&run, "after").status, ArmStatus::Completed);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["all_completed"], false);
    assert_eq!(summary["arms"][0]["status"], "failed");
    assert_eq!(summary["arms"][1]["status"], "completed");
    let receipt = receipt(&run);
    assert_eq!(receipt.arms[0].status, ArmStatus::Failed);
    assert_eq!(receipt.arms[0].phases.len(), 7);
}

#[test]
fn a_typo_in_a_key_fails_before_any_worker_starts() {
    let r = run_protocol_body(
        "run",
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nplatue = { mib = 8 }\n",
        &[],
    );
    let (run, out) = (r.dir.clone(), r.out.clone());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let location = format!("{}:7:1:", r.protocol.display());
    assert!(err.contains(&location), "{err}");
    assert!(err.contains("unknown field `platue`"), "{err}");
    assert!(!run.exists(), "nothing may run on a bad protocol");
}

#[test]
fn contract_violations_fail_the_arm_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for kind in ["bad_json", "unknown_message", "out_of_order", "no_bye"] {
        body += &format!(
            "\n[[arm]]\nid = \"{kind}\"\n[arm.calibrate]\nrequests = 1\nrequest_ms = 1\nidle_ms = 1\nmisbehave = \"{kind}\"\n"
        );
    }
    let proto = write_protocol(tmp.path(), &body);
    let run = tmp.path().join("run");
    let out = memqual(&[
        "run",
        proto.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let expect = [
        (
            "bad_json",
            "worker broke the contract: message line 5: not valid JSON",
        ),
        ("unknown_message", "unknown message type `telemetry`"),
        (
            "out_of_order",
            "phase `warmup_done` out of order: expected `state_ready`",
        ),
        ("no_bye", "worker exited without `bye`"),
    ];
    for (arm, reason) in expect {
        let o = outcome(&run, arm);
        assert_eq!(o.status, ArmStatus::Failed, "{arm}");
        assert!(
            o.failure.iter().any(|f| f.contains(reason)),
            "{arm}: {:?}",
            o.failure
        );
    }
    // A worker that finished everything but bye still has all its phases.
    assert!(outcome(&run, "no_bye").exit.unwrap().code == Some(0));
    assert_eq!(markers(&run.join("arms/no_bye")).len(), 8);
}

#[test]
fn a_hung_worker_is_killed_at_its_timeout_and_recorded() {
    let started = Instant::now();
    let r = run_protocol_body(
        "run",
        "\n[[arm]]\nid = \"hang\"\ntimeout_s = 1\n[arm.calibrate]\nrequests = 1\nidle_ms = 60000\n",
        &[],
    );
    let (run, out) = (r.dir.clone(), r.out.clone());
    // Generous: the point is that it did not wait the 60 s idle.
    assert!(started.elapsed().as_secs() < 30);
    assert_eq!(out.status.code(), Some(1));
    let o = outcome(&run, "hang");
    assert!(o.timed_out);
    assert_eq!(o.exit.unwrap().signal_name.as_deref(), Some("SIGKILL"));
    assert!(
        o.failure[0].contains("timed out after 1 s"),
        "{:?}",
        o.failure
    );
    assert_eq!(
        markers(&run.join("arms/hang")).last().unwrap().phase,
        Phase::RequestEnd
    );
}

#[test]
fn a_missing_worker_is_a_harness_error_and_an_existing_run_dir_is_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let proto = write_protocol(tmp.path(), "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\n");
    let out = std::process::Command::new(MEMQUAL)
        .args([
            "run",
            proto.to_str().unwrap(),
            "--out",
            tmp.path().join("r").to_str().unwrap(),
        ])
        .env("MEMQUAL_WORKER_DIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("worker executable memqual-calibrate not found"),
        "{}",
        stderr(&out)
    );

    let out = memqual(&[
        "run",
        proto.to_str().unwrap(),
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    // A non-empty --out is the user's to fix: a usage error, nothing run.
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("already exists and is not empty"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn calibrate_fails_when_a_pattern_is_not_reproduced() {
    // A worker that dies before its leak is measured cannot reproduce the slope.
    let r = run_protocol_body(
        "calibrate",
        "\n[[arm]]\nid = \"leak-dies\"\n[arm.calibrate]\nrequests = 4\nrequest_ms = 1\ncrash_at = 1\nleak = { mib_per_request = 4.0 }\n",
        &["--json"],
    );
    let (run, out) = (r.dir.clone(), r.out.clone());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], false);
    let checks = report["checks"].as_array().unwrap();
    let by_quantity = |q: &str| {
        checks
            .iter()
            .find(|c| c["quantity"].as_str().unwrap().starts_with(q))
            .unwrap()
    };
    assert_eq!(by_quantity("worker completed")["pass"], false);
    // One request_end before the crash: no slope can be fitted.
    assert_eq!(
        by_quantity("slope of resident")["measured"],
        serde_json::Value::Null
    );
    assert_eq!(by_quantity("slope of resident")["pass"], false);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("calibration.json")).unwrap())
            .unwrap();
    assert_eq!(written, report);
}

#[test]
fn a_between_ticks_spike_that_never_fits_is_tried_in_every_later_request_and_fails() {
    // Held 500 ms against a 50 ms period: no attempt can lie between two
    // ticks, so the worker tries requests 1, 2 and 3, says so each time, and
    // the check judged on the last attempt fails: the series saw that spike.
    let r = run_protocol_body(
        "calibrate",
        "\n[[arm]]\nid = \"never-fits\"\nsampling = { period_ms = 50 }\n[arm.calibrate]\n\
         requests = 4\nrequest_ms = 100\n\
         spike = { mib = 16, hold_ms = 500, request = 1, between_ticks = true }\n",
        &["--json"],
    );
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let attempts: Vec<(u64, Option<bool>)> = results(&r.dir.join("arms/never-fits"))
        .into_iter()
        .filter_map(|res| match res.body {
            worker_contract::ResultBody::Calibration(c) if c.spike_bytes > 0 => {
                Some((res.request_id, c.spike_between_ticks))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        attempts,
        [(1, Some(false)), (2, Some(false)), (3, Some(false))]
    );
    let log = std::fs::read_to_string(r.dir.join("arms/never-fits/worker.log")).unwrap();
    assert_eq!(log.matches("spike.between_ticks:").count(), 3, "{log}");
    let report: serde_json::Value = serde_json::from_slice(&r.out.stdout).unwrap();
    let missed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["quantity"]
                .as_str()
                .unwrap()
                .contains("must miss the spike")
        })
        .unwrap();
    assert_eq!(missed["pass"], false);
    let seen = missed["measured"].as_f64().unwrap();
    assert!((15.0..=17.0).contains(&seen), "{seen} MiB");
}

/// Wait until `path` has at least `lines` lines (the arm got that far).
fn wait_for_lines(path: &std::path::Path, lines: usize) {
    let start = Instant::now();
    while std::fs::read_to_string(path).map_or(0, |t| t.lines().count()) < lines {
        assert!(
            start.elapsed().as_secs() < 60,
            "{} never reached {lines} lines",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The start time of live process `pid`; `None` once it is gone or a
/// zombie. Linux: from `/proc/<pid>/stat` (clock ticks after boot), so a
/// reused pid shows as another process; zombies count as gone, because a
/// container's PID 1 may never reap the orphan.
#[cfg(target_os = "linux")]
fn alive_since(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    (fields[0] != "Z").then(|| fields[19].parse().ok())?
}

/// Elsewhere (macOS): whether signal 0 reaches it (launchd reaps orphans).
#[cfg(not(target_os = "linux"))]
fn alive_since(pid: u64) -> Option<u64> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
    nix::sys::signal::kill(pid, None).ok().map(|()| 0)
}

/// Dead: gone, a zombie, or its pid now belongs to another process.
fn process_is_dead(pid: u64, started: u64) -> bool {
    alive_since(pid) != Some(started)
}

/// Poll until `pid`, started at `started`, is dead; the deadline is
/// generous (the check is whether it dies, not how fast).
fn wait_dead(pid: u64, started: u64) -> bool {
    let start = Instant::now();
    while start.elapsed().as_secs() < 60 {
        if process_is_dead(pid, started) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// The pipe `pid` holds on descriptor `fd` (`pipe:[inode]`) and whether
/// it holds it for writing.
#[cfg(target_os = "linux")]
fn pipe_of(pid: u64, fd: &str) -> Option<(String, bool)> {
    let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let target = target.to_string_lossy().into_owned();
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
    let flags = u32::from_str_radix(flags.trim(), 8).ok()?;
    target
        .starts_with("pipe:")
        .then_some((target, flags & 0o3 != 0))
}

/// Every (descriptor, writes) of `pid` on the pipe `inode`.
#[cfg(target_os = "linux")]
fn ends_of(pid: u64, inode: &str) -> Vec<(String, bool)> {
    let mut ends: Vec<(String, bool)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let fd = e.ok()?.file_name().to_string_lossy().into_owned();
            let (pipe, writes) = pipe_of(pid, &fd)?;
            (pipe == inode).then_some((fd, writes))
        })
        .collect();
    ends.sort();
    ends
}

/// The long arm idles for 10 minutes, far past every deadline below, so a
/// worker that dies within one was killed, not done.
const LONG_IDLE: &str = "\n[[arm]]\nid = \"long\"\n[arm.calibrate]\nrequests = 1\nidle_ms = 600000\nplateau = { mib = 16 }\n\n[[arm]]\nid = \"never\"\n[arm.calibrate]\n";

fn spawn_long_run(tmp: &std::path::Path) -> (std::process::Child, std::path::PathBuf) {
    let proto = write_protocol(tmp, LONG_IDLE);
    let run = tmp.join("run");
    let child = spawn_memqual(&[
        "run",
        proto.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--json",
        "--force",
    ]);
    // process_start … request_end: the worker is now in its long idle.
    wait_for_lines(&run.join("arms/long/markers.jsonl"), 6);
    (child, run)
}

/// The long arm's worker: its pid and start time (it is in its idle, alive).
fn worker_pid(run: &std::path::Path) -> (u64, u64) {
    let hello: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("arms/long/hello.json")).unwrap())
            .unwrap();
    let pid = hello["pid"].as_u64().unwrap();
    let started = alive_since(pid).expect("the worker is alive in its idle");
    (pid, started)
}

#[test]
fn ctrl_c_kills_the_worker_stops_the_run_and_still_writes_the_receipt() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, run) = spawn_long_run(tmp.path());
    let (worker, started) = worker_pid(&run);
    let out = interrupt(child);
    assert!(
        wait_dead(worker, started),
        "worker {worker} survived the interrupt"
    );
    let o = outcome(&run, "long");
    assert_eq!(o.status, ArmStatus::Failed);
    assert!(o.failure[0].starts_with("interrupted"), "{:?}", o.failure);
    assert!(
        !run.join("arms/never").exists(),
        "no arm starts after an interrupt"
    );
    let r = receipt(&run);
    assert_eq!(r.arms.len(), 1);
    assert_eq!(r.arms[0].phases.len(), 6);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["all_completed"], false);
}

#[test]
fn a_killed_harness_takes_its_worker_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, run) = spawn_long_run(tmp.path());
    let (worker, started) = worker_pid(&run);
    // The lifeline: the worker reads fd 4; memqual alone holds the pipe's
    // write end (the worker holds none, or it would keep itself alive).
    #[cfg(target_os = "linux")]
    {
        let (lifeline, writes) = pipe_of(worker, "4").expect("the worker holds a pipe on fd 4");
        assert!(!writes, "fd 4 is the lifeline's read end");
        let worker_ends = ends_of(worker, &lifeline);
        assert!(
            worker_ends.iter().all(|(_, writes)| !writes),
            "the worker holds read ends only: {worker_ends:?}"
        );
        let harness_ends = ends_of(u64::from(child.id()), &lifeline);
        assert_eq!(
            harness_ends.iter().filter(|(_, writes)| *writes).count(),
            1,
            "memqual holds the write end: {harness_ends:?}"
        );
    }
    // The worker is in its long idle, writing nothing: only the lifeline can
    // end it now. SIGKILL memqual (not its worker) and reap it.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_dead(worker, started),
        "worker {worker} outlived a SIGKILLed harness"
    );
    // What was observed before the harness died is still on disk.
    assert_eq!(markers(&run.join("arms/long")).len(), 6);
    assert!(!series(&run.join("arms/long")).is_empty());
}

#[test]
fn a_worker_that_cannot_start_is_failed_with_the_last_line_of_its_stderr() {
    // What the dynamic loader prints when a CUDA worker runs where the CUDA
    // libraries are not: the worker never says hello, and only its stderr
    // says why.
    let workers = tempfile::tempdir().unwrap();
    let fake = workers.path().join("memqual-calibrate");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'memqual-calibrate: error while loading shared libraries: \
         libcublas.so.13: cannot open shared object file: No such file or directory' >&2\nexit 127\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = run_protocol_body(
        "run",
        "[[arm]]\nid = \"nostart\"\n[arm.calibrate]\nrequests = 1\n",
        &["--worker-dir", workers.path().to_str().unwrap()],
    );
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let o = outcome(&r.dir, "nostart");
    assert_eq!(o.status, ArmStatus::Failed);
    assert_eq!(o.exit.as_ref().unwrap().code, Some(127));
    assert!(
        o.failure.iter().any(|f| f
            == "its stderr ends: memqual-calibrate: error while loading shared libraries: \
                libcublas.so.13: cannot open shared object file: No such file or directory"),
        "{:?}",
        o.failure
    );
}
