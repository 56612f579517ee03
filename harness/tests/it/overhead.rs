//! The overhead gate end to end on the calibration worker: twin runs with
//! and without the external sampler, alternating, and their ratio.

use crate::common::*;
use reports::gates::Outcome;
use reports::overhead::{OverheadRecord, Twin};

/// Two A/B pairs. The tolerance is huge on purpose: this test checks that
/// the ratio is measured and wired through, not how fast a busy 2-core test
/// machine happens to be (timing belongs in benches).
const TWINNED: &str = r#"
[sampling]
period_ms = 10

[[arm]]
id = "cal"
[arm.calibrate]
requests = 4
request_ms = 10
idle_ms = 1

[[arm.gate]]
kind = "overhead"
tolerance = 100.0
pairs = 2

# The 10 ms sampler skips a tick now and then on a loaded 2-core machine,
# which the default validity gate (at most 1 % skipped) would fail; this
# test is about the twin runs, so validity allows any skipping here.
[[arm.gate]]
kind = "validity"
max_skipped_fraction = 1.0
"#;

#[test]
fn twin_runs_alternate_sampled_and_unsampled_and_give_a_ratio() {
    let r = run_protocol_body("run", &format!("{TWINNED}{LENIENT_ADMISSION}"), &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let arm_dir = r.dir.join("arms/cal");
    let record: OverheadRecord =
        serde_json::from_slice(&std::fs::read(arm_dir.join("overhead.json")).unwrap()).unwrap();
    let order: Vec<(u32, Twin, &str)> = record
        .runs
        .iter()
        .map(|t| (t.order, t.label, t.dir.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (0, Twin::A, "overhead/0-a"),
            (1, Twin::B, "overhead/1-b"),
            (2, Twin::A, "overhead/2-a"),
            (3, Twin::B, "overhead/3-b"),
        ]
    );
    for t in &record.runs {
        assert_eq!((t.requests, t.steady_requests), (4, 3), "{t:?}");
        // Each request sleeps-and-spins 5 ms, so no steady median is below it.
        assert!(t.steady_median_ns.unwrap() >= 10e6, "{t:?}");
        let dir = arm_dir.join(&t.dir);
        assert_eq!(
            dir.join("series.csv").exists(),
            t.label == Twin::A,
            "only the sampled twin has an external series: {}",
            dir.display()
        );
        // Twins carry their own markers and results, and no probes.
        assert_eq!(markers(&dir).len(), markers(&arm_dir).len());
        assert!(!dir.join("probes.json").exists());
    }
    let sampled = series(&arm_dir.join("overhead/0-a"));
    assert!(sampled.len() > 1, "the A twin was sampled");
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(arm_dir.join("overhead/1-b/spec.json")).unwrap())
            .unwrap();
    assert_eq!(
        spec["sampler"],
        serde_json::Value::Null,
        "B has no sampler schedule"
    );

    assert_eq!(record.pair_ratios.len(), 2);
    let ratio = record.ratio.unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{ratio}");
    assert!(record.ratio_min.unwrap() <= ratio && ratio <= record.ratio_max.unwrap());

    let receipt = receipt(&r.dir);
    assert_eq!(receipt.arms[0].overhead.as_ref(), Some(&record));
    let gates = receipt.gates.unwrap();
    let gate = &gates.arms[0].gates[0];
    assert_eq!(gate.kind, "overhead");
    let check = &gate.checks[0];
    assert_eq!(check.measured, Some(ratio));
    assert_eq!(check.threshold, Some(101.0));
    assert_eq!(check.outcome, Outcome::Pass, "{check:?}");
    // The evidence pointer resolves to the measured value.
    let ev = &check.evidence[0];
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.dir.join(&ev.file)).unwrap()).unwrap();
    assert_eq!(
        file.pointer(&ev.pointer).and_then(|v| v.as_f64()),
        Some(ratio)
    );

    let html = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(
        html.contains("Sampler overhead"),
        "the report shows the twins"
    );
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(summary.contains("overhead"), "{summary}");
}
