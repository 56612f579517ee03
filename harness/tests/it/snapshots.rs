//! Tool snapshots at phase boundaries and the process census, through the
//! real `memqual` binary on calibration arms.

use crate::common::*;
use reports::census::Attribution;
use reports::snapshots::{SnapshotOutcome, SnapshotReceipt, ToolRun, Trigger};
use sampler::Phase;
use sampler::captures::Capture;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn snapshot_tools(s: &SnapshotReceipt, marker_seq: u64) -> Option<&[ToolRun]> {
    match &s.for_marker(marker_seq)?.outcome {
        SnapshotOutcome::Taken { tools, .. } => Some(tools),
        SnapshotOutcome::Skipped { .. } => None,
    }
}

fn rss(tools: &[ToolRun]) -> Option<u64> {
    tools.iter().find_map(|t| match &t.parsed {
        Some(Capture::SmapsRollup(s)) => s.rss,
        _ => None,
    })
}

/// Lines in `path`, 0 while it does not exist.
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

const GROWTH_MIB: usize = 128;

/// `tables`, then one arm `plateau` holding 64 MiB over `requests` requests.
fn plateau_arm(tables: &str, requests: u32, request_ms: u32) -> String {
    format!(
        "{tables}\n\n[[arm]]\nid = \"plateau\"\n[arm.calibrate]\n\
         requests = {requests}\nrequest_ms = {request_ms}\nplateau = {{ mib = 64 }}\n"
    )
}

/// A plateau arm long enough for several phase boundaries; while it runs,
/// this test process grows by [`GROWTH_MIB`] and a `sleep` stays idle.
#[test]
fn snapshots_follow_the_phases_and_the_census_finds_the_process_that_grew() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(
        tmp.path(),
        &plateau_arm(
            &format!("[census]\nthreshold_mib = 32{LENIENT_ADMISSION}"),
            6,
            250,
        ),
    );
    let dir = tmp.path().join("run");
    let mut idle = Command::new("sleep").arg("60").spawn().unwrap();
    let mut child = Command::new(MEMQUAL)
        .args(["run", protocol.to_str().unwrap(), "--out"])
        .arg(&dir)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Grow only once the before-arm census is on disk, so the growth falls
    // inside the arm.
    let census_file = dir.join("arms/plateau/census.jsonl");
    while lines(&census_file) == 0 {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!("memqual ended early: {}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let grown = vec![7u8; GROWTH_MIB << 20];
    let out = child.wait_with_output().unwrap();
    assert_eq!(std::hint::black_box(&grown)[GROWTH_MIB << 19], 7);
    let idle_pid = idle.id();
    let _ = idle.kill();
    let _ = idle.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let arm_dir = dir.join("arms/plateau");
    let receipt = receipt(&dir);
    // The host's boot time is recorded (Linux: /proc/stat's btime).
    let host = receipt.run.host.as_ref().expect("host identity");
    if let Ok(stat) = std::fs::read_to_string("/proc/stat") {
        assert_eq!(
            host.boot_time_unix_s,
            sampler::host::proc_stat_btime(&stat),
            "{host:?}"
        );
        assert!(host.boot_time_unix_s.is_some());
    }
    let arm = &receipt.arms[0];
    let snaps = arm.snapshots.as_ref().expect("a snapshot section");
    assert_eq!(snaps.perturbation, None, "phase boundaries only");
    let markers = markers(&arm_dir);

    // Every marker is accounted for exactly once: taken or skipped.
    for m in &markers {
        let n = snaps
            .records
            .iter()
            .filter(
                |r| matches!(r.trigger, Trigger::Phase { marker_seq, .. } if marker_seq == m.seq),
            )
            .count();
        assert_eq!(n, 1, "marker {} ({})", m.seq, m.phase);
    }
    assert_eq!(
        snaps.taken + snaps.skipped_triggers,
        markers.len() as u64,
        "no cadence: one record per marker"
    );

    // Each snapshot taken keeps its raw smaps_rollup, and while the plateau
    // is held its Rss is the marker's resident figure (same kernel counter,
    // read moments later).
    let mut plateau_checked = 0;
    for m in &markers {
        let Some(tools) = snapshot_tools(snaps, m.seq) else {
            continue;
        };
        let smaps = tools.iter().find(|t| t.tool == "smaps_rollup").unwrap();
        if let Some(why) = &smaps.unavailable {
            // After idle_end the worker only tears down and exits, with no
            // wait in between: a snapshot triggered by either of its last two
            // markers may run after the exit (on a busy host it often does).
            // Every earlier marker finds the worker alive.
            assert!(
                matches!(m.phase, Phase::IdleEnd | Phase::TeardownDone),
                "{}: {why}",
                m.phase
            );
            assert!(
                why.ends_with("smaps_rollup is absent")
                    || why.ends_with("smaps_rollup is empty (the process has exited)")
                    || why.ends_with("cannot be read: the process has exited"),
                "{why}"
            );
            continue;
        }
        let raw = smaps.raw_file.as_deref().unwrap();
        assert!(
            raw.starts_with("snapshots/")
                && raw.ends_with(&format!("-{}-smaps_rollup.txt", m.phase)),
            "{raw}"
        );
        assert!(arm_dir.join(raw).is_file());
        assert_eq!(smaps.exit_code, None);
        assert!(!smaps.suspends_target);
        let cgroup = tools.iter().filter(|t| t.tool != "smaps_rollup");
        for c in cgroup {
            assert!(
                c.parsed.is_some() || c.unavailable.is_some(),
                "a cgroup file is parsed or says why not: {c:?}"
            );
        }
        let holding = matches!(
            m.phase,
            Phase::ModelLoaded | Phase::StateReady | Phase::WarmupDone | Phase::RequestEnd
        );
        if holding {
            let rss = rss(tools).unwrap() as f64;
            let marker = m.memory.resident_bytes as f64;
            assert!(
                (rss - marker).abs() <= marker * 0.02,
                "{}: smaps Rss {rss} vs marker {marker}",
                m.phase
            );
            assert!(rss >= 64.0 * MIB, "{}: {rss}", m.phase);
            plateau_checked += 1;
        }
    }
    assert!(plateau_checked >= 3, "{plateau_checked} plateau snapshots");

    // The census: this process grew by GROWTH_MIB during the arm and is
    // listed, without a control, as not attributable; the idle sleep is not.
    let census = arm.census.as_ref().expect("a census section");
    assert_eq!(census.threshold_bytes, 32 << 20);
    let me = census
        .movers
        .iter()
        .find(|m| m.pid == std::process::id())
        .unwrap_or_else(|| panic!("this test process is not among {:?}", census.movers));
    assert!(
        me.moved_bytes as f64 >= GROWTH_MIB as f64 * MIB * 0.95,
        "moved {} MiB",
        me.moved_bytes as f64 / MIB
    );
    assert!(matches!(
        me.attribution,
        Attribution::NotAttributable { .. }
    ));
    assert!(census.movers.iter().all(|m| m.pid != idle_pid));
    let worker_pid = arm.worker.as_ref().unwrap().pid;
    assert!(
        census.movers.iter().all(|m| m.pid != worker_pid),
        "the worker itself is measured by the series, not the census"
    );
}

#[test]
fn a_cadence_too_fast_for_the_tools_records_skipped_snapshots_and_perturbation() {
    let run = run_protocol_body(
        "run",
        &plateau_arm(
            "[snapshots]\nevery_ms = 1\n[census]\nenabled = false",
            3,
            100,
        ),
        &[],
    );
    assert_eq!(run.out.status.code(), Some(0), "{}", stderr(&run.out));
    let receipt = receipt(&run.dir);
    let arm = &receipt.arms[0];
    assert!(arm.census.is_none());
    assert!(!run.dir.join("arms/plateau/census.jsonl").exists());
    let snaps = arm.snapshots.as_ref().unwrap();
    assert!(
        snaps
            .perturbation
            .as_deref()
            .unwrap()
            .starts_with("snapshot cadence 1 ms"),
        "{:?}",
        snaps.perturbation
    );
    // Reading a 64 MiB process's smaps_rollup takes longer than 1 ms, so
    // ticks fall due while a snapshot runs; each such run of ticks is one
    // skipped record naming the snapshot that was still running.
    assert!(snaps.skipped_triggers > 0, "{:?}", snaps);
    let mut cadence_taken = 0;
    for r in &snaps.records {
        match &r.outcome {
            SnapshotOutcome::Skipped {
                busy_with,
                triggers,
            } => {
                assert!(*triggers >= 1);
                let busy = snaps.records.iter().find(|b| b.seq == *busy_with).unwrap();
                assert!(busy.seq < r.seq);
                assert!(matches!(busy.outcome, SnapshotOutcome::Taken { .. }));
            }
            SnapshotOutcome::Taken { .. } => {
                cadence_taken += u64::from(matches!(r.trigger, Trigger::Cadence { .. }))
            }
        }
    }
    assert!(cadence_taken > 0);
    // Records are numbered in order without gaps.
    let seqs: Vec<u64> = snaps.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

/// The phases of every census record of a soak of `requests` calibration
/// requests, with `tables` added to the protocol.
fn soak_census(tables: &str, requests: u64) -> (Vec<String>, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_protocol(
        tmp.path(),
        &format!(
            "[sampling]\nperiod_ms = 50\n{tables}{LENIENT_ADMISSION}\n[[arm]]\nid = \"cal\"\n[arm.calibrate]\n\
             warmup = 0\nidle_ms = 0\nrequest_ms = 1\nplateau = {{ mib = 8 }}\n[soak]\nsnapshot_interval_s = 0\n"
        ),
    );
    let dir = tmp.path().join("run");
    let history = tmp.path().join("history.sqlite");
    let out = memqual_soak(&p, requests, &dir, Some(&history));
    let arm = dir.join("arms/cal");
    let text = std::fs::read_to_string(arm.join("census.jsonl"))
        .unwrap_or_else(|e| panic!("no census.jsonl ({e}): {}", stderr(&out)));
    let labels = text
        .lines()
        .map(|l| {
            let r: reports::census::CensusRecord = serde_json::from_str(l).unwrap();
            r.trigger.label().to_string()
        })
        .collect();
    (labels, lines(&arm.join("snapshots.jsonl")))
}

#[test]
fn a_soak_without_request_markers_takes_a_census_per_phase_not_per_request() {
    let phases = [
        "before_arm",
        "process_start",
        "model_loaded",
        "state_ready",
        "warmup_done",
        "idle_end",
        "teardown_done",
    ];
    let off = "[snapshots]\nat_request_markers = false\n[census]\nat_request_markers = false\n";
    let (census, snapshots) = soak_census(off, 300);
    assert_eq!(census, phases, "300 requests, no census at their markers");
    assert_eq!(snapshots, phases.len() - 1, "one snapshot record per phase");

    // Every 100th request: requests 1, 101 and 201, two markers each.
    let thinned = "[snapshots]\nat_request_markers = false\n[census]\nevery_n_requests = 100\n";
    let (census, snapshots) = soak_census(thinned, 300);
    let requests = census.iter().filter(|l| l.starts_with("request_")).count();
    assert_eq!((census.len(), requests), (phases.len() + 6, 6));
    assert_eq!(snapshots, phases.len() - 1);
}
