//! `trace.json` over the committed real run (`tests/runs/quickstart-mini`):
//! the counters it keeps, read as the step functions the trace viewers draw,
//! give every series row's values at that row's time, although repeated
//! rows are left out.

use reports::series::{SeriesPoint, points_by_arm};
use run_dir::{Access, RunDir};
use std::path::Path;

const MIB: f64 = 1048576.0;

#[test]
fn the_trace_counters_step_through_every_series_row() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/runs/quickstart-mini");
    let run = RunDir::open(&dir, Access::Read).expect("the committed run opens");
    let receipt = reports::assemble(&run).expect("the receipt assembles");
    let series = points_by_arm(&run, receipt.arms.iter().map(|a| a.id.as_str())).unwrap();
    let text = render::outputs::trace_json(&receipt, &series).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();

    let mut repeats = 0;
    for (i, arm) in receipt.arms.iter().enumerate() {
        let rows: &[SeriesPoint] = &series[&arm.id].points;
        assert!(rows.len() > 10, "{}: {} rows", arm.id, rows.len());
        let counters: Vec<(f64, Option<f64>, Option<f64>)> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == i + 1)
            .map(|e| {
                (
                    e["ts"].as_f64().unwrap(),
                    e["args"]["resident"].as_f64(),
                    e["args"]["footprint"].as_f64(),
                )
            })
            .collect();
        for (k, row) in rows.iter().enumerate() {
            if row.resident_bytes.is_none() && row.footprint_bytes.is_none() {
                continue;
            }
            if k > 0
                && (rows[k - 1].resident_bytes, rows[k - 1].footprint_bytes)
                    == (row.resident_bytes, row.footprint_bytes)
            {
                repeats += 1;
            }
            let ts = row.t_ns as f64 / 1000.0;
            let step = counters
                .iter()
                .rev()
                .find(|c| c.0 <= ts)
                .unwrap_or_else(|| panic!("{}: no counter by row {k}", arm.id));
            let mib = |v: Option<u64>| v.map(|b| b as f64 / MIB);
            assert_eq!(
                (step.1, step.2),
                (mib(row.resident_bytes), mib(row.footprint_bytes)),
                "{}: row {k} at {ts} µs",
                arm.id
            );
        }
        // The last row with values is kept, so each counter runs to its end.
        let last = rows
            .iter()
            .rev()
            .find(|r| r.resident_bytes.is_some() || r.footprint_bytes.is_some())
            .unwrap();
        assert_eq!(counters.last().unwrap().0, last.t_ns as f64 / 1000.0);
        assert!(counters.len() < rows.len(), "{}: nothing left out", arm.id);
        // Phases and requests are slices beside the counters.
        let slices = |cat: &str| {
            events
                .iter()
                .filter(|e| e["cat"] == cat && e["pid"] == i + 1)
                .count()
        };
        assert_eq!(slices("phase"), arm.phases.len());
        assert_eq!(slices("request"), 2, "{}: s3 twice", arm.id);
    }
    assert!(repeats > 0, "the run has repeated rows to leave out");
}
