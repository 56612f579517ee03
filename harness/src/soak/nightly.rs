//! `memqual soak` as a command: prepare and run the soak, then the nightly
//! policy — compare with the recent nights in the history (regressions),
//! append this night, chart it, print, write the CI files — and the exit
//! decision (completed, stable, not regressed, declared gates passed).

use super::{Length, human, prepare, run_soak};
use crate::exit::{Failure, harness, usage};
use crate::session::{self, INTERRUPTED, SessionOptions};
use crate::{ci_formats, history, host};
use std::path::{Path, PathBuf};

/// What `memqual soak` was asked for, beside the common options.
#[derive(Debug, Clone)]
pub struct SoakRequest {
    /// The protocol file to soak.
    pub protocol: PathBuf,
    /// How long to soak: as declared, `--requests N` or `--duration D`.
    pub length: Length,
    /// `--cycles N`: a lifecycle soak of N cycles, overriding `[soak] mode` and `cycles`.
    pub cycles: Option<u64>,
    /// Overrides `[soak] arm`.
    pub arm: Option<String>,
    /// The history to compare with and append to (`None`: `--no-history`).
    pub history: Option<PathBuf>,
    /// `--param name=value` overrides, in command-line order.
    pub params: Vec<(String, String)>,
}

/// Run `memqual soak` to its exit code: 0 when the arm completed, is stable,
/// did not regress against the history and passed its declared gates; 1 when
/// not; 130 when interrupted. `Err` for a usage (2) or harness (3) failure.
pub fn command(req: &SoakRequest, opts: &SessionOptions) -> Result<u8, Failure> {
    let mut loaded = session::load_protocol(Some(&req.protocol), ("", ""), &req.params)?;
    let mut decl = loaded.soak.clone().unwrap_or_default();
    if req.arm.is_some() {
        decl.arm = req.arm.clone();
    }
    if let Some(n) = req.cycles {
        decl.mode = analysis::stability::SoakMode::Lifecycle;
        decl.cycles = Some(n);
        decl.validate()
            .map_err(|e| usage(anyhow::anyhow!("--cycles {n}: soak.{e}")))?;
    }
    let cycle = prepare(
        &mut loaded,
        &decl,
        req.length,
        host::physical_memory_bytes(),
    )
    .map_err(usage)?;
    session::ensure_models(&loaded)?;
    // The soaked arm writes its settings as soak.json, sealed with its data.
    if let Some(arm) = loaded.arms.first_mut() {
        arm.soak = Some(decl.settings(cycle));
    }
    let total = match req.length {
        Length::Requests(n) => Some(n),
        _ => decl.lifecycle_requests(cycle),
    };
    let (executables, dir) = session::prepare_run(&loaded, opts)?;
    let mut result = run_soak(
        &loaded,
        &decl,
        total,
        dir,
        &executables,
        &INTERRUPTED,
        &opts.run_options(false),
    )
    .map_err(harness)?;
    if let Some(reasons) = &result.run.refused {
        return Err(harness(anyhow::anyhow!(
            "the host is not quiet: {}. The soak did not run; pass --force to run anyway",
            reasons.join("; ")
        )));
    }
    let mut night = result
        .run
        .receipt
        .arms
        .first()
        .and_then(|a| history::night(&result.run.receipt, a, &result.run.dir));
    // An interrupted soak is analysed but kept out of the nightly trend.
    if let (Some(path), Some(n), false) = (&req.history, night.as_mut(), result.run.interrupted) {
        let rule = history::RegressionRule {
            window: decl.regression_window,
            slope_bytes_per_request: decl.regression_slope_kib_per_request * 1024.0,
            peak_pct: decl.regression_peak_pct,
        };
        result.run.receipt = record_night(path, n, rule, &result.run.run)?;
    }
    let arm = result.run.receipt.arms.first();
    if opts.json {
        crate::console::print_json(&serde_json::json!({
            "run_dir": result.run.dir,
            "interrupted": result.run.interrupted,
            "arm": result.arm_id,
            "stability": arm.and_then(|a| a.stability.as_ref()),
            "harness_self": arm.and_then(|a| a.harness_self.as_ref()),
            "history": night,
            "snapshots": result.watch.snapshots,
            "snapshot_errors": result.watch.snapshot_errors,
        }))?;
    } else {
        out!("{}", human(&result));
        if let Some(n) = night.as_ref().filter(|n| !n.regressions.is_empty()) {
            outln!(
                "  REGRESSION against recent nights: {}",
                n.regressions.join("; ")
            );
        }
    }
    let stable = arm
        .and_then(|a| a.stability.as_ref())
        .and_then(|s| s.stable)
        .unwrap_or(false);
    let regressions = night.as_ref().map_or(&[][..], |n| &n.regressions[..]);
    ci_formats::emit(&opts.ci, &result.run.receipt, &[], regressions)?;
    ci_formats::step_summary_of(&result.run.run);
    let regressed = night.is_some_and(|n| !n.regressions.is_empty());
    // Declared gates (e.g. `stability`) must pass too.
    let gates_pass = result
        .run
        .receipt
        .gates
        .as_ref()
        .is_none_or(|g| g.verdict == reports::gates::Outcome::Pass);
    Ok(session::run_exit(
        &result.run,
        result.run.all_completed() && stable && !regressed && gates_pass,
    ))
}

/// Judge `night` against the recent nights of its protocol and arm in the
/// history at `path`, append it, and return the receipt re-assembled with
/// the history chart.
fn record_night(
    path: &Path,
    night: &mut history::Night,
    rule: history::RegressionRule,
    run: &run_dir::RunDir,
) -> Result<reports::Receipt, Failure> {
    let past = history::load(path, Some(&night.arm), Some(&night.protocol)).map_err(harness)?;
    night.regressions = history::regressions(&past, night, rule);
    history::append(path, night).map_err(harness)?;
    // The report charts this soak among the past ones.
    super::attach_history(run, &history::chart(&past, night)).map_err(harness)
}
