//! The skeleton's acceptance: `memqual calibrate` on the embedded protocol,
//! with every number re-derived here from the run directory's raw files.

use crate::common::*;
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use sampler::Phase;
use std::path::PathBuf;
use std::sync::OnceLock;
use worker_contract::{CalibrationResult, ResultBody};

type CalibrationRun = (PathBuf, reports::Receipt, serde_json::Value);

/// One calibration run shared by the tests of this file. A failed run stays
/// failed: every test that needs it reports the same failure, and none runs
/// calibrate again behind the first one's back.
fn run() -> &'static CalibrationRun {
    static RUN: OnceLock<Result<CalibrationRun, String>> = OnceLock::new();
    let run = RUN.get_or_init(|| {
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?.keep();
        let out = tmp.join("run");
        let result = memqual(&[
            "calibrate",
            "--json",
            "--force",
            "--out",
            out.to_str().unwrap(),
        ]);
        // stdout first: the failing checks, before the long progress log.
        if result.status.code() != Some(0) {
            return Err(format!(
                "calibrate exited {:?}\nstdout: {}\nstderr: {}",
                result.status.code(),
                String::from_utf8_lossy(&result.stdout),
                stderr(&result)
            ));
        }
        let json: serde_json::Value =
            serde_json::from_slice(&result.stdout).map_err(|e| e.to_string())?;
        Ok((out.clone(), receipt(&out), json))
    });
    run.as_ref().unwrap_or_else(|e| panic!("{e}"))
}

fn arm(id: &str) -> &'static ArmReceipt {
    let r = &run().1;
    let a = r
        .arms
        .iter()
        .find(|a| a.id == id)
        .unwrap_or_else(|| panic!("no arm {id}"));
    assert_eq!(a.status, ArmStatus::Completed, "{id}: {:?}", a.failure);
    a
}

fn resident(a: &ArmReceipt, phase: Phase, request: Option<u64>) -> f64 {
    a.phase(phase, request).unwrap().memory.resident_bytes as f64
}

fn within(measured: f64, expected: f64, rel: f64) -> bool {
    (measured - expected).abs() <= expected * rel
}

#[test]
fn calibrate_reports_every_check_passed_and_writes_it_down() {
    let (dir, _, json) = run();
    assert_eq!(json["passed"], true);
    let checks = json["checks"].as_array().unwrap();
    assert!(checks.len() >= 18, "{}", checks.len());
    assert!(dir.join("calibration.json").exists());
    assert_eq!(run().1.arms.len(), 7);
}

#[test]
fn plateau_256_shows_between_process_start_and_state_ready() {
    let a = arm("plateau-256");
    let growth = resident(a, Phase::StateReady, None) - resident(a, Phase::ProcessStart, None);
    assert!(within(growth, 256.0 * MIB, 0.05), "{} MiB", growth / MIB);
}

#[test]
fn leak_slope_is_8_mib_per_request() {
    let (dir, _, _) = run();
    // Straight from markers.jsonl: least squares of resident at request_end vs request id.
    let pts: Vec<(f64, f64)> = markers(&dir.join("arms/leak-8x20"))
        .into_iter()
        .filter(|m| m.phase == Phase::RequestEnd)
        .map(|m| (m.request_id.unwrap() as f64, m.memory.resident_bytes as f64))
        .collect();
    assert_eq!(pts.len(), 20);
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    assert!(
        within(slope, 8.0 * MIB, 0.05),
        "{} MiB/request",
        slope / MIB
    );
}

#[test]
fn spike_300_for_400ms_is_seen_by_the_series_and_the_phase_peak() {
    let (dir, _, _) = run();
    let a = arm("spike-300-400ms");
    let begin = a.phase(Phase::RequestBegin, Some(1)).unwrap();
    let end = a.phase(Phase::RequestEnd, Some(1)).unwrap();
    let base = begin.memory.resident_bytes as f64;
    let series_max = series(&dir.join("arms/spike-300-400ms"))
        .iter()
        .filter(|r| r.t_ns > begin.t_ns && r.t_ns <= end.t_ns)
        .filter_map(|r| r.resident_bytes)
        .max()
        .unwrap() as f64;
    assert!(
        within(series_max - base, 300.0 * MIB, 0.05),
        "series {} MiB",
        (series_max - base) / MIB
    );
    let kernel = end.memory.resident_peak_bytes.unwrap() as f64;
    assert!(
        within(kernel - base, 300.0 * MIB, 0.05),
        "kernel {} MiB",
        (kernel - base) / MIB
    );
    // No assertion on the flag here: the series catches the plateau of the
    // spike, but Linux's per-CPU RSS counters may put the kernel peak a few
    // pages above any sampled value; the flag's exact rule is tested below.
}

/// The calibration results of one arm's requests, straight from results.jsonl.
fn calibration_results(arm_dir: &std::path::Path) -> Vec<(u64, CalibrationResult)> {
    results(arm_dir)
        .into_iter()
        .map(|r| match r.body {
            ResultBody::Calibration(c) => (r.request_id, c),
            other => panic!("not a calibration result: {other:?}"),
        })
        .collect()
}

#[test]
fn spike_200_for_10ms_is_caught_only_by_the_kernel_peak() {
    let (dir, _, _) = run();
    let arm_dir = dir.join("arms/spike-200-between");
    let a = arm("spike-200-between");
    // Attempts from request 1 on, until one lies between two ticks: every
    // attempt but the last overlapped the next tick and says so in the log.
    let attempts: Vec<(u64, CalibrationResult)> = calibration_results(&arm_dir)
        .into_iter()
        .filter(|(_, c)| c.spike_bytes > 0)
        .collect();
    let (last, earlier) = attempts.split_last().expect("at least one spike attempt");
    assert_eq!(attempts[0].0, 1, "the first attempt is spike.request");
    assert!(
        earlier
            .iter()
            .all(|(_, c)| c.spike_between_ticks == Some(false))
    );
    assert_eq!(last.1.spike_between_ticks, Some(true), "{attempts:?}");
    let log = std::fs::read_to_string(arm_dir.join("worker.log")).unwrap();
    assert_eq!(
        log.matches("spike.between_ticks:").count(),
        earlier.len(),
        "{log}"
    );

    let request = last.0;
    let begin = a.phase(Phase::RequestBegin, Some(request)).unwrap();
    let end = a.phase(Phase::RequestEnd, Some(request)).unwrap();
    let base = begin.memory.resident_bytes as f64;
    let kernel = end.memory.resident_peak_bytes.unwrap() as f64;
    assert!(
        within(kernel - base, 200.0 * MIB, 0.05),
        "kernel {} MiB",
        (kernel - base) / MIB
    );
    let rows = series(&arm_dir);
    // No sampler read began while the block existed (reads start at t_ns).
    let (started, freed) = (
        last.1.spike_started_ns.unwrap(),
        last.1.spike_freed_ns.unwrap(),
    );
    assert!(
        rows.iter()
            .all(|r| r.t_ns + r.cost_ns < started || r.t_ns > freed),
        "a read overlapped the judged spike"
    );
    let in_phase: Vec<u64> = rows
        .iter()
        .filter(|r| r.t_ns > begin.t_ns && r.t_ns <= end.t_ns)
        .filter_map(|r| r.resident_bytes)
        .collect();
    assert!(
        !in_phase.is_empty(),
        "the 4.1 s request spans ticks of the 2 s sampler"
    );
    let series_max = *in_phase.iter().max().unwrap() as f64;
    assert!(
        series_max < kernel - 100.0 * MIB,
        "series saw {} MiB of the spike",
        (series_max - base) / MIB
    );
    assert_eq!(end.peak_between_samples, Some(true));
    assert!(a.peak_between_samples);
}

#[test]
fn the_flag_is_set_exactly_when_the_kernel_peak_exceeds_every_observation() {
    // Recompute every phase's window maximum from series.csv and the markers,
    // independently of the reports crate, and compare with the flag both ways.
    let (dir, receipt, _) = run();
    let page = receipt.run.page_size_bytes;
    let mut flagged = 0;
    for a in &receipt.arms {
        let arm_dir = dir.join("arms").join(&a.id);
        let marks = markers(&arm_dir);
        let rows = series(&arm_dir);
        assert_eq!(marks.len(), a.phases.len());
        for (i, m) in marks.iter().enumerate() {
            let start = if i == 0 { 0 } else { marks[i - 1].t_ns };
            let mut seen = rows
                .iter()
                .filter(|r| r.t_ns > start && r.t_ns <= m.t_ns)
                .filter_map(|r| r.resident_bytes)
                .max()
                .unwrap_or(0)
                .max(m.memory.resident_bytes);
            if i > 0 {
                seen = seen.max(marks[i - 1].memory.resident_bytes);
            }
            let peak = m.memory.resident_peak_bytes.unwrap();
            let expected = peak > seen + page;
            assert_eq!(
                a.phases[i].peak_between_samples,
                Some(expected),
                "{} phase {} seq {}",
                a.id,
                m.phase,
                m.seq
            );
            flagged += usize::from(expected);
        }
    }
    assert!(flagged >= 1, "the between-ticks spike must be flagged");
}

#[test]
fn reserve_1g_grows_virtual_not_resident() {
    let a = arm("reserve-1g");
    let start = &a.phase(Phase::ProcessStart, None).unwrap().memory;
    let ready = &a.phase(Phase::StateReady, None).unwrap().memory;
    assert!(ready.virtual_bytes - start.virtual_bytes >= 1 << 30);
    assert!((ready.resident_bytes as f64 - start.resident_bytes as f64) < 16.0 * MIB);
}

#[test]
fn locked_6_moves_the_systems_held_memory_in_its_own_phases() {
    use analysis::held_memory::Figure;
    let a = arm("locked-6");
    let change = |phase| {
        let row = a.phase(phase, None).unwrap();
        row.system
            .as_ref()
            .unwrap_or_else(|| panic!("{phase:?}: no system change"))
            .mlocked_bytes
            .unwrap() as f64
    };
    // Exact reads by the markers around each phase; ±5 % absorbs any other
    // process locking memory meanwhile (nothing else here does).
    assert!(within(change(Phase::ModelLoaded), 6.0 * MIB, 0.05));
    assert!(within(-change(Phase::TeardownDone), 6.0 * MIB, 0.05));
    assert!(change(Phase::StateReady).abs() < 0.3 * MIB);
    // The first marker has nothing before it.
    assert_eq!(a.phases[0].system, None);
    // The arm's figures: Linux counts are numbers, macOS ones say why not.
    let held = &a.series.system.held;
    assert!(matches!(held.mlocked_bytes, Figure::Bytes(_)), "{held:?}");
    assert_eq!(
        held.wired_bytes,
        Figure::Unavailable(
            "unavailable: Linux keeps no wired count (macOS host_statistics64 only)".into()
        )
    );
}

#[test]
fn file_map_128_is_file_backed_resident() {
    let a = arm("file-map-128");
    let start = &a.phase(Phase::ProcessStart, None).unwrap().memory;
    let ready = &a.phase(Phase::StateReady, None).unwrap().memory;
    let d = |f: fn(&sampler::TaskMemory) -> Option<u64>| {
        f(ready).unwrap() as f64 - f(start).unwrap() as f64
    };
    assert!(within(d(|m| Some(m.resident_bytes)), 128.0 * MIB, 0.05));
    assert!(d(|m| m.rss_file_bytes) >= 120.0 * MIB);
    assert!(d(|m| m.rss_anon_bytes) < 8.0 * MIB);
}

#[test]
fn every_arm_reports_its_cadence_and_resets_its_peaks() {
    for a in &run().1.arms {
        let s = &a.series;
        assert!(s.samples >= 2, "{}", a.id);
        let period = s.period_ns.unwrap() as f64;
        // Reported, not asserted tightly: the median interval is the period
        // within a generous 20 % (deadline scheduling keeps it exact on an idle host).
        assert!(
            within(s.median_interval_ns.unwrap(), period, 0.2),
            "{}: {:?}",
            a.id,
            s.median_interval_ns
        );
        assert!(s.p99_lateness_ns.is_some());
        assert!(s.system.min_available_bytes.is_some());
        assert!(
            a.phases.iter().all(|p| p.memory.peak_reset == Some(true)),
            "{}",
            a.id
        );
        assert_eq!(a.phases.first().unwrap().phase, Phase::ProcessStart);
        assert_eq!(a.phases.last().unwrap().phase, Phase::TeardownDone);
    }
}

/// The series has device columns exactly when the host has the NVIDIA
/// driver. Without it (CI, every machine here) no arm's series has any
/// (never zeros), and the receipt says once per arm why. With it (the H200
/// runs: docs/gpu.md), every arm has them and the receipt names NVML's
/// devices. Either way the test runs and asserts the host's case.
#[test]
fn the_series_has_device_columns_exactly_when_the_host_has_an_nvidia_driver() {
    let has_driver = std::path::Path::new("/proc/driver/nvidia").exists();
    let (dir, receipt, _) = run();
    for a in &receipt.arms {
        let series =
            std::fs::read_to_string(dir.join("arms").join(&a.id).join("series.csv")).unwrap();
        let header = series.lines().next().unwrap();
        let said = a.series.accelerator.as_deref().unwrap_or_default();
        if has_driver {
            assert!(header.contains("gpu_worker_bytes"), "{}: {header}", a.id);
            assert!(said.starts_with("NVML (driver"), "{}: {said:?}", a.id);
            continue;
        }
        assert!(!header.contains("gpu_"), "{}: {header}", a.id);
        assert!(
            said.starts_with("no accelerator: NVML"),
            "{}: {said:?}",
            a.id
        );
        assert_eq!(a.series.device, None, "{}", a.id);
        assert!(
            a.phases
                .iter()
                .all(|p| p.series_max_gpu_worker_bytes.is_none())
        );
        assert!(a.phases.iter().all(|p| p.memory.device_bytes.is_none()));
    }
}

/// A copied memqual (with its calibration worker beside it) calibrates from
/// an empty directory with the environment cleared: nothing is read from the
/// source tree. The one variable set points the speech fixtures at a folder
/// that does not exist, which calibration must never open.
#[test]
fn a_copied_memqual_calibrates_from_an_empty_directory_with_no_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    for name in ["memqual", "memqual-calibrate"] {
        std::fs::copy(worker_dir().join(name), bin.join(name)).unwrap();
    }
    let protocol = tmp.path().join("p.toml");
    std::fs::write(
        &protocol,
        "schema_version = 1\nname = \"p\"\n[[arm]]\nid = \"plateau-64\"\n\
         [arm.calibrate]\nrequests = 2\nplateau = { mib = 64 }\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin.join("memqual"))
        .args(["calibrate", "--json", "--force", "--protocol"])
        .arg(&protocol)
        .args(["--out", "run"])
        .env_clear()
        .env("MEMQUAL_FIXTURES", tmp.path().join("no-such-fixtures"))
        .current_dir(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["passed"], true, "{json}");
    assert!(empty.join("run").join("receipt.json").is_file());
}

/// A protocol that needs the speech fixtures, pointed at a folder without
/// them, says which folder it read and what that folder must hold.
#[test]
fn missing_fixtures_are_named_with_what_the_folder_must_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-fixtures");
    let out = std::process::Command::new(MEMQUAL)
        .args(["run", "--out"])
        .arg(tmp.path().join("run"))
        .env("MEMQUAL_FIXTURES", &missing)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&missing.join("audio").display().to_string()),
        "{err}"
    );
    assert!(err.contains("holding audio/manifest.toml"), "{err}");
    assert!(!tmp.path().join("run").exists(), "nothing was run");
}

#[test]
fn the_metal_protocols_are_not_runnable_off_a_mac_and_name_metal() {
    let tmp = tempfile::tempdir().unwrap();
    let protocols = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocols");
    let copy = |name: &str| {
        let body = std::fs::read_to_string(protocols.join(format!("{name}.toml"))).unwrap();
        let protocol = tmp.path().join(format!("{name}.toml"));
        std::fs::write(&protocol, body + LENIENT_ADMISSION).unwrap();
        protocol
    };
    let calibration = copy("calibration-metal");
    let soak = copy("soak-metal");
    // The calibration runs all three arms; a soak runs one, chosen by --arm.
    let runs = [
        ("calibrate", None, 3),
        ("soak", Some("metal-autorelease"), 1),
        ("soak", Some("metal-leak-16"), 1),
    ];
    for (i, (command, arm_id, arms)) in runs.into_iter().enumerate() {
        let dir = tmp.path().join(format!("run-{i}"));
        let out = match arm_id {
            None => memqual(&[
                command,
                "--protocol",
                calibration.to_str().unwrap(),
                "--force",
                "--out",
                dir.to_str().unwrap(),
            ]),
            Some(id) => memqual(&[
                command,
                soak.to_str().unwrap(),
                "--arm",
                id,
                "--requests",
                "20",
                "--no-history",
                "--out",
                dir.to_str().unwrap(),
            ]),
        };
        assert_ne!(out.status.code(), Some(0), "{command}: {}", stderr(&out));
        let r = receipt(&dir);
        assert_eq!(r.arms.len(), arms, "{command} {arm_id:?}");
        for a in &r.arms {
            assert_eq!(
                a.status,
                ArmStatus::NotRunnable,
                "{}: {:?}",
                a.id,
                a.failure
            );
            assert!(
                a.failure
                    .iter()
                    .any(|f| f.contains("the metal_* calibration patterns need Metal")),
                "{}: {:?}",
                a.id,
                a.failure
            );
            assert!(a.phases.is_empty(), "{}: a refused arm ran phases", a.id);
        }
        if let Some(id) = arm_id {
            assert_eq!(r.arms[0].id, id);
        }
    }
}
