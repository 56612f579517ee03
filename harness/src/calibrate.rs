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

pub fn human(report: &CalibrationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:<9} {:<58} {:>10} {:>10} {:<12} {:<22} result",
        "arm", "pattern", "quantity", "expected", "measured", "unit", "rule"
    );
    for c in &report.checks {
        let _ = writeln!(
            out,
            "{:<20} {:<9} {:<58} {:>10} {:>10} {:<12} {:<22} {}",
            c.arm,
            c.pattern,
            c.quantity,
            c.format(Some(c.expected)),
            c.format(c.measured),
            c.unit,
            c.rule,
            if c.pass { "PASS" } else { "FAIL" }
        );
    }
    let _ = writeln!(
        out,
        "calibration {}: {} of {} checks passed",
        if report.passed { "PASSED" } else { "FAILED" },
        report.checks.iter().filter(|c| c.pass).count(),
        report.checks.len()
    );
    out
}
