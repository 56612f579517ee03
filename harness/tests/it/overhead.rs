//! The overhead gate end to end on the calibration worker: one block run in
//! which the external sampler is switched on and off between blocks of
//! requests (ABBA), and the ratio with its interval.

use crate::common::*;
use reports::gates::Outcome;
use reports::overhead::{OverheadRecord, Switch, block_sampled};
use sampler::Phase;

/// Six quads of three 60 ms requests (long enough that a lagging reader
/// cannot lose a whole side of a quad to switches). The tolerance is huge on purpose: this test
/// checks the blocks, the switching and the wiring, not how fast a busy
/// 2-core test machine happens to be (timing belongs in benches). The
/// injected cost makes every sampled tick burn 2 ms of CPU, which the rows'
/// own CPU cost must show.
const BLOCKED: &str = r#"
[sampling]
period_ms = 10

[[arm]]
id = "cal"
[arm.calibrate]
requests = 4
request_ms = 60
idle_ms = 1

[[arm.gate]]
kind = "overhead"
tolerance = 100.0
quads = 6
block_requests = 3
inject_busy_us = 2000

# The 10 ms sampler skips a tick now and then on a loaded 2-core machine,
# which the default validity gate (at most 1 % skipped) would fail; this
# test is about the block run, so validity allows any skipping here.
[[arm.gate]]
kind = "validity"
max_skipped_fraction = 1.0
"#;

#[test]
fn the_block_run_switches_the_sampler_abba_between_requests_and_gives_an_interval() {
    let r = run_protocol_body("run", &format!("{BLOCKED}{LENIENT_ADMISSION}"), &[]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let arm_dir = r.dir.join("arms/cal");
    let record: OverheadRecord =
        serde_json::from_slice(&std::fs::read(arm_dir.join("overhead.json")).unwrap()).unwrap();
    let blocks = arm_dir.join("overhead");
    // 6 quads × 4 blocks × 3 requests, plus the cold first one.
    assert_eq!(record.requests, 73, "{record:?}");
    assert_eq!(
        record.sampled_requests + record.unsampled_requests + record.dropped_requests,
        73
    );
    assert!(record.dropped_requests >= 1, "the cold request is left out");

    // A switch after every third request from request 3 on, ABBA.
    let switches: Vec<Switch> =
        serde_json::from_slice(&std::fs::read(blocks.join("switches.json")).unwrap()).unwrap();
    assert_eq!(switches.len(), 24, "{switches:?}");
    for (i, s) in switches.iter().enumerate() {
        let block = i as u64 + 1;
        assert_eq!((s.after_request, s.block), (3 * block, block));
        assert_eq!(s.sampled, block_sampled(block));
    }
    // Rows only while sampling: none starts inside a B block (a tick that
    // was already running when the switch came may end just after it).
    let rows = series(&blocks);
    assert!(rows.len() > 5, "the A blocks were sampled");
    let mut in_b = 0;
    for row in &rows {
        let block = switches
            .iter()
            .take_while(|s| s.at_ns <= row.t_ns)
            .last()
            .map_or(0, |s| s.block);
        if !block_sampled(block) {
            in_b += 1;
        }
        // The injected 2 ms is thread CPU time, so this holds under any load.
        assert!(row.cost_cpu_ns >= 2_000_000, "{row:?}");
    }
    assert!(
        in_b <= 12,
        "{in_b} rows in unsampled blocks (at most one per switch to B)"
    );
    let marks = markers(&blocks);
    assert_eq!(
        marks
            .iter()
            .filter(|m| m.phase == Phase::RequestEnd)
            .count(),
        73
    );
    assert!(
        !blocks.join("probes.json").exists(),
        "no probes in the block run"
    );

    assert_eq!(record.quad_ratios.len(), 6, "{record:?}");
    let (lo, ratio, hi) = (
        record.ratio_lower.unwrap(),
        record.ratio.unwrap(),
        record.ratio_upper.unwrap(),
    );
    assert!(lo <= ratio && ratio <= hi && lo > 0.0, "{lo} {ratio} {hi}");
    assert_eq!(record.plan.injected_busy_us, 2000);

    // The CPU witness: every kept sampled request saw at least one tick,
    // each of which burnt 2 ms of the sampler thread's CPU; the marker path
    // ran twice per request inside the worker's own CPU.
    let cpu = record.cpu.expect("the CPU witness");
    assert_eq!(cpu.requests, record.sampled_requests);
    assert!(cpu.sampler_ns >= 2_000_000 * cpu.requests, "{cpu:?}");
    assert!(
        cpu.marker_path_ns > 0 && cpu.marker_path_ns < cpu.worker_ns,
        "{cpu:?}"
    );
    let expect = (cpu.sampler_ns + cpu.marker_path_ns) as f64 / cpu.worker_ns as f64;
    assert!((cpu.ratio - expect).abs() < 1e-12);
    // One round decided it (the budget defaults to `quads`).
    assert!(record.rounds.is_empty() && record.budget_quads == Some(6));

    let receipt = receipt(&r.dir);
    assert_eq!(receipt.arms[0].overhead.as_ref(), Some(&record));
    let gates = receipt.gates.unwrap();
    let gate = &gates.arms[0].gates[0];
    assert_eq!(gate.kind, "overhead");
    let check = &gate.checks[0];
    assert_eq!(check.measured, Some(ratio));
    assert_eq!(check.threshold, Some(101.0));
    assert_eq!(check.outcome, Outcome::Pass, "{check:?}");
    // The evidence pointer resolves to the interval's upper end.
    let ev = &check.evidence[0];
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.dir.join(&ev.file)).unwrap()).unwrap();
    assert_eq!(file.pointer(&ev.pointer).and_then(|v| v.as_f64()), Some(hi));

    let html = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(
        html.contains("Sampler overhead (ABBA blocks"),
        "the report shows the blocks"
    );
    assert!(
        html.contains("Injected cost"),
        "and says the cost was injected"
    );
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("Sampler overhead (ABBA blocks"),
        "{summary}"
    );
}
