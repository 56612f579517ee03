//! The lifecycle soak on the real binary: `memqual soak` with `[soak] mode
//! = "lifecycle"` (or `--cycles`) runs load → state → K requests → state
//! and context freed, many times in one calibration worker, and judges the
//! floor after each teardown. The expected figures are the calibration
//! worker's known bytes: what `teardown_leak` keeps per cycle, and the
//! `plateau` that every cycle frees.

use crate::common::*;
use analysis::growth::Classification;
use analysis::stability::{LifecycleFloors, SoakMode, Stability};
use sampler::Phase;
use std::path::PathBuf;

struct Lifecycle {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    stability: Stability,
    code: Option<i32>,
    stdout: String,
}

/// `memqual soak --cycles CYCLES` of a calibration arm with `calibrate`
/// lines, two requests per cycle, the floors judged from the third cycle on.
fn lifecycle(calibrate: &str, cycles: u64) -> Lifecycle {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(
        tmp.path(),
        &format!(
            "[[arm]]\nid = \"cal\"\n[arm.calibrate]\nwarmup = 0\nidle_ms = 0\nrequest_ms = 1\n\
             {calibrate}\n[soak]\ncycle_requests = 2\nwarmup_cycles = 2\nmin_points = 5\n\
             snapshot_interval_s = 0\n{LENIENT_ADMISSION}"
        ),
    );
    let dir = tmp.path().join("run");
    let n = cycles.to_string();
    let out = memqual(&[
        "soak",
        protocol.to_str().unwrap(),
        "--cycles",
        &n,
        "--out",
        dir.to_str().unwrap(),
        "--no-history",
    ]);
    let r = receipt(&dir);
    let stability = r.arms[0]
        .stability
        .clone()
        .unwrap_or_else(|| panic!("no stability: {}", stderr(&out)));
    Lifecycle {
        _tmp: tmp,
        dir,
        stability,
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn floors(s: &Stability) -> &LifecycleFloors {
    assert_eq!(s.mode, SoakMode::Lifecycle);
    s.lifecycle.as_ref().expect("a lifecycle section")
}

fn floor_resident(s: &Stability) -> &analysis::growth::SeriesGrowth {
    floors(s)
        .floor_series
        .iter()
        .find(|g| g.series == "floor_resident")
        .expect("floor_resident")
}

#[test]
fn a_block_kept_at_every_teardown_is_linear_growth_at_its_size_per_cycle() {
    // 3 MiB kept per teardown under a 24 MiB "context" freed every cycle.
    const KEPT: f64 = 3.0 * MIB;
    let run = lifecycle(
        "plateau = { mib = 24 }\nteardown_leak = { mib_per_cycle = 3 }",
        12,
    );
    let l = floors(&run.stability);
    assert_eq!((l.cycles_planned, l.cycles_completed), (12, 12));
    assert_eq!(l.requests_per_cycle, 2);
    assert_eq!(run.stability.requests, 24);
    let markers = markers(&run.dir.join("arms/cal"));
    let count = |p: Phase| markers.iter().filter(|m| m.phase == p).count();
    assert_eq!(
        (count(Phase::Release), count(Phase::Reload)),
        (12, 11),
        "a release per cycle, a reload in every cycle after the first"
    );
    let g = floor_resident(&run.stability);
    assert_eq!(
        g.classification,
        Classification::LinearGrowth,
        "{}",
        g.reason
    );
    let slope = g.bytes_per_request.expect("a slope per cycle");
    assert!(
        (slope.estimate / KEPT - 1.0).abs() <= 0.05,
        "{slope:?} against {KEPT} bytes per cycle"
    );
    // The floors themselves step by the kept block, cycle after cycle.
    let first = l.floors[2].resident_bytes as f64;
    let last = l.floors[11].resident_bytes as f64;
    assert!(
        ((last - first) / (9.0 * KEPT) - 1.0).abs() <= 0.05,
        "{first} → {last}"
    );
    assert_eq!(run.stability.worker, Classification::LinearGrowth);
    assert_eq!(run.stability.stable, Some(false));
    assert_eq!(run.code, Some(1), "a growing floor fails the soak");
    assert!(
        run.stdout
            .contains("lifecycle: 12 of 12 cycles of 2 requests"),
        "{}",
        run.stdout
    );

    validate_receipt(&run.dir);
    let summary = std::fs::read_to_string(run.dir.join("summary.md")).unwrap();
    assert!(
        summary.contains(
            "| cal | lifecycle | 24 | 12 of 12 (2 requests each) | linear_growth | NOT stable |"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("| floor_resident | linear_growth |"),
        "{summary}"
    );
    assert!(
        summary.contains("Resident MiB per cycle, cycle 0 first: "),
        "{summary}"
    );
    let html = std::fs::read_to_string(run.dir.join("report.html")).unwrap();
    assert!(html.contains("Floor after each cycle's teardown (12 cycles)"));
    // The covariates were read with the system files and said beside the verdict.
    let c = run.stability.covariates.as_ref().expect("covariates");
    assert!(c.readings > 0);
    assert!(summary.contains(&c.line()), "{summary}");
    assert!(html.contains(&c.line().replace('\'', "&#39;")) || html.contains(&c.line()));
}

#[test]
fn a_context_freed_whole_every_cycle_is_a_plateau() {
    let run = lifecycle("plateau = { mib = 24 }", 12);
    let l = floors(&run.stability);
    assert_eq!(l.cycles_completed, 12);
    let g = floor_resident(&run.stability);
    assert_eq!(g.classification, Classification::Plateau, "{}", g.reason);
    assert_eq!(run.stability.worker, Classification::Plateau);
    // Freed means the 24 MiB is gone at every floor: each floor sits far
    // below the loaded level of the request before it.
    let markers = markers(&run.dir.join("arms/cal"));
    let loaded = markers
        .iter()
        .filter(|m| m.phase == Phase::RequestEnd)
        .map(|m| m.memory.resident_bytes)
        .min()
        .unwrap();
    for f in &l.floors {
        assert!(
            loaded as f64 - f.resident_bytes as f64 >= 23.0 * MIB,
            "cycle {}: floor {} against loaded {loaded}",
            f.cycle,
            f.resident_bytes
        );
    }
}

#[test]
fn a_teardown_leak_outside_a_lifecycle_soak_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(
        tmp.path(),
        &format!(
            "[[arm]]\nid = \"cal\"\n[arm.calibrate]\nteardown_leak = {{ mib_per_cycle = 1 }}\n{LENIENT_ADMISSION}"
        ),
    );
    let dir = tmp.path().join("run");
    let out = memqual_soak(&protocol, 4, &dir, None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("teardown_leak keeps memory at each lifecycle teardown"),
        "{err}"
    );
    assert!(!dir.exists());
}
