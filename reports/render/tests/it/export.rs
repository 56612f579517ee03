//! Every format behind the one `Exporter` trait: `write_all` writes, for a
//! copy of the committed real run, exactly the text each exporter returns
//! for its receipt, under the exporter's file name; the exporters given the
//! same inputs after the run directory is gone return the same text (they
//! read no file).

use crate::copy_tree;
use render::export::{Bmf, Exporter, JUnit, PhasesCsv, ReportHtml, SummaryMarkdown, TraceJson};
use render::html::PageData;
use reports::series::points_by_arm;
use run_dir::{Access, RunDir};
use std::path::Path;

#[test]
fn write_all_writes_what_each_exporter_returns_and_no_exporter_reads_a_file() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/runs/quickstart-mini");
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("run");
    copy_tree(&committed, &copy);
    for name in ["summary.md", "phases.csv", "trace.json", "report.html"] {
        let _ = std::fs::remove_file(copy.join(name));
    }
    let run = RunDir::open(&copy, Access::Rebuild).expect("the copied run opens");
    let receipt = reports::assemble(&run).expect("the receipt assembles");
    let series = points_by_arm(&run, receipt.arms.iter().map(|a| a.id.as_str())).unwrap();
    let data = PageData::read_with(&run, &receipt, &series).unwrap();
    render::export::write_all(&run, &receipt).unwrap();
    drop(run);
    let written: Vec<(String, Vec<u8>)> = ["summary.md", "phases.csv", "trace.json", "report.html"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(copy.join(n)).unwrap()))
        .collect();
    // The exporters run with the run directory gone.
    std::fs::remove_dir_all(&copy).unwrap();
    let formats: [&dyn Exporter; 4] = [
        &SummaryMarkdown,
        &PhasesCsv,
        &TraceJson { series: &series },
        &ReportHtml { data: &data },
    ];
    for (format, (name, bytes)) in formats.iter().zip(&written) {
        assert_eq!(format.file_name(), name);
        let text = format.export(&receipt).unwrap();
        assert!(text.len() > 100, "{name}: {} bytes", text.len());
        assert!(
            text.as_bytes() == bytes.as_slice(),
            "{name} differs from its exporter's text"
        );
    }
    let junit = JUnit {
        calibration: &[],
        soak_regressions: &[],
    }
    .export(&receipt)
    .unwrap();
    assert!(junit.starts_with("<?xml"), "{junit}");
    let judged = &receipt
        .gates
        .as_ref()
        .expect("the run is gated")
        .judged_arms;
    assert!(!judged.is_empty());
    for arm in judged {
        let suite = format!("<testsuite name=\"quickstart-mini.{arm}\"");
        assert!(junit.contains(&suite), "no JUnit suite for {arm}: {junit}");
    }
    let bmf: serde_json::Value = serde_json::from_str(&Bmf.export(&receipt).unwrap()).unwrap();
    for arm in &receipt.arms {
        let key = format!("memqual/quickstart-mini/{}", arm.id);
        let peak = bmf[&key]["state-ready-peak-bytes"]["value"].as_f64();
        assert_eq!(
            peak,
            arm.state_ready_peak().map(|b| b as f64),
            "{key}: {bmf}"
        );
    }
}
