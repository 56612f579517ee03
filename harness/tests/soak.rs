//! Calibration of the growth detector through `memqual soak` and the
//! calibration worker's known patterns, a soak stopped by SIGINT, and the
//! history across soaks.

mod common;

use analysis::growth::Classification;
use analysis::stability::Stability;
use common::*;
use sampler::Phase;
use std::path::{Path, PathBuf};

const KIB: f64 = 1024.0;

/// A one-arm calibration protocol with a `[soak]` table at defaults.
/// Every soak judges host-wide series (shared memory, swap): a sibling test
/// growing shared memory (the `shm_file` soak) would be seen by every soak
/// running beside it in this process. So these tests run one at a time.
fn one_soak_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn protocol(tmp: &Path, calibrate: &str) -> PathBuf {
    protocol_with(tmp, calibrate, "", "")
}

/// As [`protocol`], with lines added to the arm (e.g. gates, before its
/// `[arm.calibrate]` table) and to `[soak]`. Admission admits any host:
/// these tests judge growth, not how busy the test machine is.
fn protocol_with(tmp: &Path, calibrate: &str, arm: &str, soak: &str) -> PathBuf {
    // These soaks last seconds: the system files are read every tick, not
    // once a second, so a system series has enough points to judge.
    let system = "system_period_ms = 50\n";
    write_protocol(
        tmp,
        &format!(
            "[sampling]\nperiod_ms = 50\n{system}[[arm]]\nid = \"cal\"\n{arm}\n[arm.calibrate]\nwarmup = 0\nidle_ms = 0\n{calibrate}\n[soak]\nsnapshot_interval_s = 1\n{soak}\n{LENIENT_ADMISSION}"
        ),
    )
}

struct Soak {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    history: PathBuf,
    stability: Stability,
    code: Option<i32>,
    stdout: String,
}

fn soak(calibrate: &str, requests: u64) -> Soak {
    let tmp = tempfile::tempdir().unwrap();
    let p = protocol(tmp.path(), calibrate);
    let dir = tmp.path().join("run");
    let history = tmp.path().join("history.sqlite");
    let out = memqual_soak(&p, requests, &dir, Some(&history));
    let r = receipt(&dir);
    let stability = r.arms[0]
        .stability
        .clone()
        .unwrap_or_else(|| panic!("no stability: {}", stderr(&out)));
    Soak {
        _tmp: tmp,
        dir,
        history,
        stability,
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn series<'a>(s: &'a Stability, name: &str) -> &'a analysis::growth::SeriesGrowth {
    s.worker_series
        .iter()
        .chain(&s.system_series)
        .find(|g| g.series == name)
        .unwrap_or_else(|| panic!("no series {name}"))
}

#[test]
fn a_64_kib_leak_over_2000_requests_is_linear_growth_at_its_slope() {
    let _serial = one_soak_at_a_time();
    let s = soak("request_ms = 1\nleak = { mib_per_request = 0.0625 }", 2000);
    assert_eq!(s.stability.requests, 2000);
    assert_eq!(s.stability.worker, Classification::LinearGrowth);
    for name in ["worker_footprint", "worker_resident"] {
        let g = series(&s.stability, name);
        assert_eq!(
            g.classification,
            Classification::LinearGrowth,
            "{name}: {}",
            g.reason
        );
        let slope = g.bytes_per_request.unwrap();
        assert!(
            (slope.estimate / (64.0 * KIB) - 1.0).abs() <= 0.10,
            "{name}: {slope:?}"
        );
        assert!(
            slope.low <= 64.0 * KIB * 1.1 && slope.high >= 64.0 * KIB * 0.9,
            "{slope:?}"
        );
    }
    assert_eq!(s.stability.stable, Some(false));
    assert_eq!(s.code, Some(1), "a growing worker fails the soak");
    assert!(s.stdout.contains("linear_growth"), "{}", s.stdout);
}

#[test]
fn growth_that_stops_after_50_requests_is_a_plateau() {
    let _serial = one_soak_at_a_time();
    let s = soak(
        "request_ms = 1\nleak = { mib_per_request = 0.0625 }\ngrowth_until_request = 50",
        2000,
    );
    let g = series(&s.stability, "worker_footprint");
    assert_eq!(s.stability.worker, Classification::Plateau, "{}", g.reason);
    // The 50 × 64 KiB really happened: first to last footprint after the warm-up.
    let grown = g.last_bytes.unwrap() - g.first_bytes.unwrap();
    assert!((grown - 40.0 * 64.0 * KIB).abs() < 256.0 * KIB, "{grown}");
}

#[test]
fn two_steps_then_flat_is_a_step() {
    let _serial = one_soak_at_a_time();
    let s = soak(
        "requests = 2000\nrequest_ms = 1\nsteps = { mib = 16, at_requests = [500, 1100] }",
        2000,
    );
    let g = series(&s.stability, "worker_footprint");
    assert_eq!(s.stability.worker, Classification::Step, "{}", g.reason);
    assert_eq!(g.steps_at_request.len(), 2, "{:?}", g.steps_at_request);
    // Found within one bin (8 requests) of where the blocks were taken.
    assert!(
        g.steps_at_request[0].abs_diff(500) <= 8,
        "{:?}",
        g.steps_at_request
    );
    assert!(
        g.steps_at_request[1].abs_diff(1100) <= 8,
        "{:?}",
        g.steps_at_request
    );
    assert_eq!(s.stability.stable, Some(true));
}

#[test]
fn a_growing_shm_file_fires_the_system_verdict_while_the_worker_stays_flat() {
    let _serial = one_soak_at_a_time();
    // 256 KiB per request written to /dev/shm, never mapped: 150 MiB in total.
    let s = soak("request_ms = 5\nshm_file = { kib_per_request = 256 }", 600);
    let worker = series(&s.stability, "worker_resident");
    assert_eq!(
        worker.classification,
        Classification::Plateau,
        "{}",
        worker.reason
    );
    assert_eq!(s.stability.worker, Classification::Plateau);
    let shm = series(&s.stability, "sys_shmem");
    assert_eq!(
        shm.classification,
        Classification::LinearGrowth,
        "{}",
        shm.reason
    );
    let slope = shm.bytes_per_request.unwrap().estimate;
    assert!((slope / (256.0 * KIB) - 1.0).abs() < 0.25, "{slope}");
    assert_eq!(
        s.stability.system_growth_while_worker_flat,
        vec!["sys_shmem".to_string()]
    );
    assert_eq!(s.stability.stable, Some(false));
    assert!(
        s.stdout
            .contains("SYSTEM MEMORY GROWS WHILE THE WORKER IS FLAT")
    );
    // The file is gone after teardown.
    assert!(
        !std::fs::read_dir("/dev/shm").unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with("memqual-calibrate-")
            && e.path().metadata().is_ok_and(|m| m.len() >= 150 << 20)),
        "shm file left behind"
    );
    // Slow snapshots: periodic ones and the one at idle_end, raw text.
    let snaps: Vec<String> = std::fs::read_dir(s.dir.join("arms/cal/snapshots"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        snaps.iter().any(|n| n.ends_with("-periodic.smaps_rollup")),
        "{snaps:?}"
    );
    let rollup = snaps.iter().find(|n| n.ends_with(".smaps_rollup")).unwrap();
    let text = std::fs::read_to_string(s.dir.join("arms/cal/snapshots").join(rollup)).unwrap();
    assert!(text.contains("Rss:"), "{text}");
}

#[test]
fn sigint_after_n_requests_leaves_the_analysis_of_those_n() {
    let _serial = one_soak_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let p = protocol(
        tmp.path(),
        "request_ms = 5\nleak = { mib_per_request = 0.0625 }",
    );
    let dir = tmp.path().join("run");
    let history = tmp.path().join("h.sqlite");
    let child = spawn_memqual(&[
        "soak",
        p.to_str().unwrap(),
        "--requests",
        "100000",
        "--out",
        dir.to_str().unwrap(),
        "--history",
        history.to_str().unwrap(),
        "--json",
    ]);
    let markers_path = dir.join("arms/cal/markers.jsonl");
    let ends = |path: &Path| {
        std::fs::read_to_string(path)
            .map(|t| t.matches("\"request_end\"").count())
            .unwrap_or(0)
    };
    for _ in 0..600 {
        if ends(&markers_path) >= 300 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = interrupt(child);
    let n = markers(&dir.join("arms/cal"))
        .iter()
        .filter(|m| m.phase == Phase::RequestEnd)
        .count();
    assert!(n >= 300, "{n}");
    let s = receipt(&dir).arms[0].stability.clone().unwrap();
    assert_eq!(s.requests, n as u64);
    let g = series(&s, "worker_resident");
    assert_eq!(g.points, n);
    assert_eq!(
        g.classification,
        Classification::LinearGrowth,
        "{}",
        g.reason
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(json["stability"]["requests"], n as u64);
    // An interrupted soak stays out of the nightly history: none was created,
    // and `history` says so instead of creating one.
    assert!(!history.exists());
    let h = memqual(&["history", "--history", history.to_str().unwrap()]);
    assert_eq!(h.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&h.stderr).contains("no soak history at"),
        "{}",
        String::from_utf8_lossy(&h.stderr)
    );
}

#[test]
fn history_flags_a_night_whose_peak_jumps() {
    let _serial = one_soak_at_a_time();
    let small = soak("request_ms = 1\nplateau = { mib = 8 }", 120);
    assert_eq!(small.stability.worker, Classification::Plateau);
    assert_eq!(small.code, Some(0), "{}", small.stdout);
    // Same protocol and arm, a much bigger plateau, into the same history.
    let tmp = small.dir.parent().unwrap();
    let p = protocol(tmp, "request_ms = 1\nplateau = { mib = 64 }");
    let dir = tmp.join("run2");
    let out = memqual_soak(&p, 120, &dir, Some(&small.history));
    assert_eq!(out.status.code(), Some(1), "a regression fails the soak");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("REGRESSION against recent nights: peak"),
        "{text}"
    );
    let h = memqual(&[
        "history",
        "--arm",
        "cal",
        "--history",
        small.history.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&h.stdout);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(!rows[0].contains("REGRESSION"), "{table}");
    assert!(rows[1].contains("REGRESSION: peak"), "{table}");
}

/// A 60-request soak of a calibration arm that declares the `stability`
/// gate, with `soak` lines added to `[soak]`; no history.
fn gated_soak(calibrate: &str, soak: &str) -> (tempfile::TempDir, PathBuf, Option<i32>) {
    let tmp = tempfile::tempdir().unwrap();
    let p = protocol_with(
        tmp.path(),
        calibrate,
        "[[arm.gate]]\nkind = \"stability\"",
        soak,
    );
    let dir = tmp.path().join("run");
    let out = memqual_soak(&p, 60, &dir, None);
    assert!(dir.join("receipt.json").exists(), "{}", stderr(&out));
    (tmp, dir, out.status.code())
}

#[test]
fn a_settle_period_adds_settled_series_and_the_stability_gate_fails_a_leak() {
    let _serial = one_soak_at_a_time();
    let (_tmp, dir, code) = gated_soak(
        "request_ms = 1\nleak = { mib_per_request = 0.0625 }",
        "settle_ms = 20",
    );
    assert_eq!(code, Some(1));
    let settled = std::fs::read_to_string(dir.join("arms/cal/settled.jsonl")).unwrap();
    assert_eq!(settled.lines().count(), 60);
    let r = receipt(&dir);
    let s = r.arms[0].stability.clone().unwrap();
    assert_eq!(s.settings.settle_ms, 20);
    let names: Vec<&str> = s.settled_series.iter().map(|g| g.series.as_str()).collect();
    assert!(names.ends_with(&["settled_resident"]), "{names:?}");
    for g in &s.settled_series {
        assert_eq!(g.points, 60, "{}", g.series);
        assert_eq!(g.analysed_points, 50, "{}: 10 warm-up requests", g.series);
        assert_eq!(
            g.classification,
            Classification::LinearGrowth,
            "{}: {}",
            g.series,
            g.reason
        );
    }
    let gates = r.gates.unwrap();
    let stability = &gates.arms[0].gates[0];
    assert_eq!(stability.kind, "stability");
    assert_eq!(stability.outcome, reports::gates::Outcome::Fail);
    assert_eq!(gates.verdict, reports::gates::Outcome::Fail);
}

#[test]
fn without_a_settle_period_there_is_no_settled_series_and_a_plateau_passes_the_gate() {
    let _serial = one_soak_at_a_time();
    let (_tmp, dir, code) = gated_soak("request_ms = 1\nplateau = { mib = 8 }", "");
    assert_eq!(code, Some(0));
    assert!(!dir.join("arms/cal/settled.jsonl").exists());
    let r = receipt(&dir);
    assert!(
        r.arms[0]
            .stability
            .as_ref()
            .unwrap()
            .settled_series
            .is_empty()
    );
    let gates = r.gates.unwrap();
    assert_eq!(gates.arms[0].gates[0].kind, "stability");
    assert_eq!(
        gates.arms[0].gates[0].outcome,
        reports::gates::Outcome::Pass
    );
    assert_eq!(gates.verdict, reports::gates::Outcome::Pass);
}

#[test]
fn a_soak_records_memqual_itself_beside_the_worker() {
    let _serial = one_soak_at_a_time();
    let s = soak("request_ms = 1\nplateau = { mib = 8 }", 40);
    // Readings at the start and the end at least, whatever the pace.
    let text = std::fs::read_to_string(s.dir.join("arms/cal/harness.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "{text}");
    assert!(lines[0].contains("\"at\":\"start\""), "{text}");
    assert!(lines[lines.len() - 1].contains("\"at\":\"end\""), "{text}");
    // Sealed with the run, though written after the arm's seal: `receipt`
    // verifies the seal.
    let r = receipt(&s.dir);
    let own = r.arms[0]
        .harness_self
        .as_ref()
        .unwrap_or_else(|| panic!("no harness_self: {}", s.stdout));
    assert_eq!(own.samples, lines.len() as u64);
    assert!(own.samples >= 2, "{own:?}");
    assert!(own.sampler_cpu_s.is_some_and(|c| c > 0.0), "{own:?}");
    assert!(own.cpu_s.is_some(), "{own:?}");
    if cfg!(target_os = "linux") {
        assert!(own.max_resident_bytes.is_some_and(|b| b > 0), "{own:?}");
    }
    assert!(
        s.stdout.contains("memqual itself: resident"),
        "{}",
        s.stdout
    );
    let summary = std::fs::read_to_string(s.dir.join("summary.md")).unwrap();
    assert!(summary.contains("## memqual itself"), "{summary}");
}

#[test]
fn the_report_charts_this_soak_among_the_past_ones() {
    let _serial = one_soak_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let p = protocol(tmp.path(), "request_ms = 1\nplateau = { mib = 8 }");
    let history = tmp.path().join("h.sqlite");
    let run = |name: &str| {
        let dir = tmp.path().join(name);
        let out = memqual_soak(&p, 40, &dir, Some(&history));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stderr(&out),
            String::from_utf8_lossy(&out.stdout)
        );
        dir
    };
    for night in ["n1", "n2", "n3"] {
        run(night);
    }
    let dir = run("n4");
    let text = std::fs::read_to_string(dir.join("soak-history.json")).unwrap();
    let h: reports::soak_history::SoakHistory = serde_json::from_str(&text).unwrap();
    assert_eq!(h.nights.len(), 4);
    // Oldest first, this soak last: the chart highlights the last night.
    let dirs: Vec<&str> = h.nights.iter().map(|n| n.run_dir.as_str()).collect();
    for (d, want) in dirs.iter().zip(["n1", "n2", "n3", "n4"]) {
        assert!(d.ends_with(want), "{dirs:?}");
    }

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for panel in ["slope", "peak"] {
        let start = html
            .find(&format!("<div id=\"soak-history-{panel}\">"))
            .unwrap_or_else(|| panic!("no {panel} chart"));
        let svg = &html[start..start + html[start..].find("</div>").unwrap()];
        assert_eq!(
            svg.matches("<circle").count(),
            4,
            "{panel}: one point per soak"
        );
        assert_eq!(
            svg.matches("fill=\"#005AC8\"").count(),
            1,
            "{panel}: this soak highlighted"
        );
    }
    // Sealed with the rest: the receipt validates against its seal.
    receipt(&dir);
}
