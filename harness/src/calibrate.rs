//! `memqual calibrate`: run the calibration protocol and say, per pattern,
//! whether the samplers reproduced the known allocations.

use crate::ci_formats;
use crate::exit::{Failure, harness};
use crate::session::{self, SessionOptions};
use anyhow::Context;
use reports::Receipt;
use reports::calibration::{CalibrationCheck, check_arm};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// The protocol `memqual calibrate` runs when none is given.
pub const EMBEDDED_PROTOCOL: &str = include_str!("../../protocols/calibration.toml");

/// `calibration.json` in the run directory and the `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationReport {
    /// The run directory the checks were made on.
    pub run_dir: String,
    /// True when there is at least one check and every check passed.
    pub passed: bool,
    /// One check per pattern quantity of every calibration arm, in arm order.
    pub checks: Vec<CalibrationCheck>,
}

/// `memqual calibrate`: run the calibration protocol (default: the
/// embedded one), write `calibration.json` into the run and seal it again,
/// print the checks and exit by them.
pub fn command(path: Option<&Path>, opts: &SessionOptions) -> Result<u8, Failure> {
    let loaded = session::load_protocol(
        path,
        ("<embedded protocols/calibration.toml>", EMBEDDED_PROTOCOL),
        &[],
    )?;
    let mut result = session::run_protocol(&loaded, opts)?;
    let report = evaluate(&result.dir.display().to_string(), &result.receipt);
    // calibration.json is derived from the receipt (report rebuilds
    // it): write it, then seal again so it is bound.
    result
        .run
        .write_json(
            &run_dir::Rel::file(reports::record::files::CALIBRATION),
            &report,
        )
        .map_err(harness)?;
    reports::seal::seal(&result.run, &mut result.receipt)
        .context("cannot reseal the run directory")
        .map_err(harness)?;
    if opts.json {
        crate::console::print_json(&report)?;
    } else {
        out!("{}", human(&report));
    }
    ci_formats::emit(&opts.ci, &result.receipt, &report.checks, &[])?;
    ci_formats::step_summary_of(&result.run);
    Ok(session::run_exit(&result, report.passed))
}

/// Check every calibration arm of `receipt` against its known allocations.
/// A pure function of the receipt; `run_dir` is only recorded.
pub fn evaluate(run_dir: &str, receipt: &Receipt) -> CalibrationReport {
    let checks: Vec<CalibrationCheck> = receipt.arms.iter().flat_map(check_arm).collect();
    CalibrationReport {
        run_dir: run_dir.to_string(),
        passed: !checks.is_empty() && checks.iter().all(|c| c.pass),
        checks,
    }
}

/// The checks as a table for people, one line each, then the overall result.
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
