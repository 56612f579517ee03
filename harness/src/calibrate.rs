//! `memqual calibrate`: run the calibration protocol and say, per pattern,
//! whether the samplers reproduced the known allocations.

use reports::Receipt;
use reports::calibration::{CalibrationCheck, check_arm};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// The protocol `memqual calibrate` runs when none is given.
pub const EMBEDDED_PROTOCOL: &str = include_str!("../../protocols/calibration.toml");

/// `calibration.json` in the run directory and the `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationReport {
    pub run_dir: String,
    pub passed: bool,
    pub checks: Vec<CalibrationCheck>,
}

pub fn evaluate(run_dir: &str, receipt: &Receipt) -> CalibrationReport {
    let checks: Vec<CalibrationCheck> = receipt.arms.iter().flat_map(check_arm).collect();
    CalibrationReport {
        run_dir: run_dir.to_string(),
        passed: !checks.is_empty() && checks.iter().all(|c| c.pass),
        checks,
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

pub fn human(report: &CalibrationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:<9} {:<52} {:>10} {:>10}  {:<22} result",
        "arm", "pattern", "quantity", "expected", "measured", "rule"
    );
    for c in &report.checks {
        let _ = writeln!(
            out,
            "{:<20} {:<9} {:<52} {:>10} {:>10}  {:<22} {}",
            c.arm,
            c.pattern,
            c.quantity,
            format!("{:.2}", c.expected_mib),
            num(c.measured_mib),
            c.rule,
            if c.pass { "PASS" } else { "FAIL" }
        );
    }
    let _ = writeln!(out, "(sizes in MiB; slope in MiB per request)");
    let _ = writeln!(
        out,
        "calibration {}: {} of {} checks passed",
        if report.passed { "PASSED" } else { "FAILED" },
        report.checks.iter().filter(|c| c.pass).count(),
        report.checks.len()
    );
    out
}
