//! `memqual soak`: one arm, many requests, judged for growth.
//!
//! The arm runs through the ordinary dispatcher (same worker, same 50 ms
//! series, same run directory). Beside it the [`watch`] thread draws the
//! progress bar and takes slow snapshots. Afterwards `soak.json` is
//! written into the arm directory and the receipt is re-assembled, so its
//! `stability` section holds the analysis of whatever was collected —
//! also after Ctrl-C.

mod watch;

use crate::protocol::LoadedProtocol;
use crate::run::{self, RunResult};
use anyhow::{Context, bail};
use reports::growth::GrowthSettings;
use reports::stability::SoakSettings;
use run_dir::{Rel, RunDir};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use watch::{WatchReport, mib, progress_bar};
use worker_contract::WorkerSpec;

/// The protocol's `[soak]` table. Every key has a default.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SoakDecl {
    /// The arm to soak (default: the first arm).
    pub arm: Option<String>,
    /// Requests not judged at the start.
    pub warmup_requests: u64,
    /// Requests per workload cycle; default: the arm's fixture count (whisper) or 1.
    pub cycle_requests: Option<u64>,
    /// Fewer analysed bins than this is inconclusive.
    pub min_points: usize,
    /// Fraction of the analysed bins, at the end, whose slope decides growth.
    pub tail_fraction: f64,
    /// Worker growth threshold, KiB per request.
    pub max_slope_kib_per_request: f64,
    /// System growth threshold (wired, compressor, swap, shmem), KiB per request.
    pub system_max_slope_kib_per_request: f64,
    /// A level jump at least this large (MiB) is a step.
    pub step_min_mib: f64,
    /// More steps than this is inconclusive.
    pub max_steps: usize,
    pub bootstrap_resamples: usize,
    pub confidence: f64,
    pub seed: u64,
    /// Seconds between slow snapshots of the worker (0: only at `idle_end`).
    pub snapshot_interval_s: u64,
    /// Milliseconds the worker waits after each `request_end` before a
    /// second (`settled`) snapshot, judged as series of their own (0: off).
    pub settle_ms: u64,
    /// Past soaks of the same protocol and arm a new one is compared with.
    pub regression_window: usize,
    /// Regression: slope above the window's median by more than this (KiB per request).
    pub regression_slope_kib_per_request: f64,
    /// Regression: peak footprint above the window's median by more than this percentage.
    pub regression_peak_pct: f64,
}

impl Default for SoakDecl {
    fn default() -> Self {
        let g = GrowthSettings::default();
        SoakDecl {
            arm: None,
            warmup_requests: g.warmup_requests,
            cycle_requests: None,
            min_points: g.min_points,
            tail_fraction: g.tail_fraction,
            max_slope_kib_per_request: g.linear_slope_bytes_per_request / 1024.0,
            system_max_slope_kib_per_request: 16.0,
            step_min_mib: g.step_min_bytes / (1024.0 * 1024.0),
            max_steps: g.max_steps,
            bootstrap_resamples: g.bootstrap_resamples,
            confidence: g.confidence,
            seed: g.seed,
            snapshot_interval_s: 60,
            settle_ms: 0,
            regression_window: 7,
            regression_slope_kib_per_request: 4.0,
            regression_peak_pct: 10.0,
        }
    }
}

impl SoakDecl {
    /// Reject settings the analysis cannot use, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("max_slope_kib_per_request", self.max_slope_kib_per_request),
            (
                "system_max_slope_kib_per_request",
                self.system_max_slope_kib_per_request,
            ),
            ("step_min_mib", self.step_min_mib),
            (
                "regression_slope_kib_per_request",
                self.regression_slope_kib_per_request,
            ),
            ("regression_peak_pct", self.regression_peak_pct),
        ];
        for (key, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{key} = {v}: must be a positive number"));
            }
        }
        if !(self.tail_fraction > 0.0 && self.tail_fraction <= 1.0) {
            return Err(format!(
                "tail_fraction = {}: must be in (0, 1]",
                self.tail_fraction
            ));
        }
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return Err(format!(
                "confidence = {}: must be in (0.5, 1)",
                self.confidence
            ));
        }
        if self.bootstrap_resamples < 20 {
            return Err(format!(
                "bootstrap_resamples = {}: at least 20",
                self.bootstrap_resamples
            ));
        }
        if self.min_points < 3 {
            return Err(format!("min_points = {}: at least 3", self.min_points));
        }
        if self.cycle_requests == Some(0) {
            return Err("cycle_requests must be at least 1".into());
        }
        if self.regression_window == 0 {
            return Err("regression_window must be at least 1".into());
        }
        Ok(())
    }

    /// The analysis settings for an arm whose natural cycle is `cycle`.
    pub fn settings(&self, cycle: u64) -> SoakSettings {
        SoakSettings {
            growth: GrowthSettings {
                warmup_requests: self.warmup_requests,
                cycle_requests: self.cycle_requests.unwrap_or(cycle).max(1),
                min_points: self.min_points,
                tail_fraction: self.tail_fraction,
                linear_slope_bytes_per_request: self.max_slope_kib_per_request * 1024.0,
                step_min_bytes: self.step_min_mib * 1024.0 * 1024.0,
                max_steps: self.max_steps,
                bootstrap_resamples: self.bootstrap_resamples,
                confidence: self.confidence,
                seed: self.seed,
            },
            system_slope_bytes_per_request: self.system_max_slope_kib_per_request * 1024.0,
            settle_ms: self.settle_ms,
        }
    }
}

/// How long a soak runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// As the protocol says.
    AsDeclared,
    Requests(u64),
    Duration(Duration),
}

/// `8h`, `30m`, `90s`, `2h30m` → a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = 0u64;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => {
                return Err(format!(
                    "`{text}`: unknown unit `{c}` (use h, m, s, e.g. 8h or 90m)"
                ));
            }
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("`{text}`: a number must come before `{c}`"))?;
        total = total.saturating_add(n.saturating_mul(unit));
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("`{text}`: give a unit (h, m or s) after {digits}"));
    }
    if total == 0 {
        return Err(format!("`{text}` is no time at all"));
    }
    Ok(Duration::from_secs(total))
}

/// Keep the soaked arm only, with the requested length; returns the cycle length.
pub fn prepare(
    loaded: &mut LoadedProtocol,
    decl: &SoakDecl,
    length: Length,
) -> anyhow::Result<u64> {
    let index = match &decl.arm {
        Some(id) => loaded
            .arms
            .iter()
            .position(|a| &a.id == id)
            .with_context(|| format!("[soak] arm = `{id}` is not an arm of the protocol"))?,
        None => 0,
    };
    let mut arm = loaded.arms.swap_remove(index);
    arm.control = None;
    arm.settle_ms = decl.settle_ms;
    let cycle = match &mut arm.worker {
        WorkerSpec::Calibrate(cal) => {
            match length {
                Length::AsDeclared => {}
                Length::Requests(n) => cal.requests = n,
                Length::Duration(_) => bail!(
                    "calibration arms soak by request count: use --requests instead of --duration"
                ),
            }
            cal.validate()
                .map_err(|e| anyhow::anyhow!("arm {}: {e}", arm.id))?;
            1
        }
        WorkerSpec::Whisper(w) => {
            // A long-form arm has one input: each request is a cycle.
            let per_cycle = w.fixtures.len().max(1) as u64;
            match length {
                Length::AsDeclared => {}
                Length::Requests(n) => {
                    w.repetitions = u32::try_from(n.div_ceil(per_cycle)).unwrap_or(u32::MAX);
                    w.max_requests = Some(n);
                }
                Length::Duration(d) => {
                    w.repetitions = u32::MAX;
                    w.max_duration_s = Some(d.as_secs());
                    // The last request may start just before the end: leave it room.
                    arm.timeout = arm.timeout.max(d + Duration::from_secs(600));
                }
            }
            per_cycle
        }
    };
    loaded.arms = vec![arm];
    Ok(cycle)
}

/// Everything a finished (or interrupted) soak produced.
pub struct SoakResult {
    pub run: RunResult,
    pub arm_id: String,
    pub watch: WatchReport,
}

/// Run the (already prepared) single-arm protocol as a soak into `dir`.
// The run's inputs, kept apart so the call site reads like `memqual run`'s.
#[allow(clippy::too_many_arguments)]
pub fn run_soak(
    loaded: &LoadedProtocol,
    decl: &SoakDecl,
    total: Option<u64>,
    run: RunDir,
    executables: &[PathBuf],
    interrupted: &AtomicBool,
    force: bool,
) -> anyhow::Result<SoakResult> {
    let arm_id = loaded
        .arms
        .first()
        .map(|a| a.id.clone())
        .context("the soak has no arm")?;
    let arm_dir = run.arm(&arm_id)?;
    let stop = Arc::new(AtomicBool::new(false));
    let interval =
        (decl.snapshot_interval_s > 0).then(|| Duration::from_secs(decl.snapshot_interval_s));
    let watcher = {
        let (run, arm_dir, stop) = (run.clone(), arm_dir.clone(), Arc::clone(&stop));
        let bar = progress_bar(total);
        std::thread::spawn(move || watch::watch(&run, &arm_dir, total, interval, stop, bar))
    };
    let result = run::run(loaded, run, executables, interrupted, force);
    stop.store(true, Ordering::SeqCst);
    let watch = watcher.join().unwrap_or_default();
    Ok(SoakResult {
        run: result?,
        arm_id,
        watch,
    })
}

/// Put the history chart's rows (`soak-history.json`) into the run
/// directory, then render the reports and seal the run again.
pub fn attach_history(
    run: &RunDir,
    history: &reports::soak_history::SoakHistory,
) -> anyhow::Result<reports::Receipt> {
    let rel = Rel::file(reports::soak_history::FILE);
    run.write_json(&rel, history)?;
    // Read from the history database at the soak's end: raw, sealed now.
    run.seal_raw(&[rel])?;
    run::finish(run)
}

/// The soak's figures in a few lines.
pub fn human(result: &SoakResult) -> String {
    let mut out = String::new();
    let Some(arm) = result.run.receipt.arms.first() else {
        return "memqual soak: the arm never started\n".into();
    };
    out.push_str(&format!(
        "soak {} · arm {} · {:?}{}\n",
        result.run.dir.display(),
        arm.id,
        arm.status,
        if result.run.interrupted {
            " (interrupted: analysis of what was collected)"
        } else {
            ""
        }
    ));
    let Some(s) = &arm.stability else {
        out.push_str("no stability analysis (the arm directory is missing)\n");
        return out;
    };
    out.push_str(&format!(
        "{} requests · worker {} · stable {}\n",
        s.requests,
        s.worker.name(),
        match s.stable {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "inconclusive (not a pass)",
        }
    ));
    for g in s
        .worker_series
        .iter()
        .chain(&s.settled_series)
        .chain(&s.system_series)
        .chain(&s.host_used)
    {
        let slope = g.bytes_per_request.map_or("–".into(), |b| {
            format!(
                "{:.2} KiB/req [{:.2}, {:.2}]",
                b.estimate / 1024.0,
                b.low / 1024.0,
                b.high / 1024.0
            )
        });
        let per_hour = g
            .bytes_per_hour
            .map_or("–".into(), |h| format!("{} /h", mib(h.estimate)));
        out.push_str(&format!(
            "  {:<18} {:<13} {slope} · {per_hour} · {}\n",
            g.series,
            g.classification.name(),
            g.reason
        ));
    }
    if !s.system_growth_while_worker_flat.is_empty() {
        out.push_str(&format!(
            "  SYSTEM MEMORY GROWS WHILE THE WORKER IS FLAT: {}\n",
            s.system_growth_while_worker_flat.join(", ")
        ));
    }
    if let Some(p) = s.peak_footprint_bytes {
        out.push_str(&format!("  peak footprint {}", mib(p as f64)));
    }
    if let Some(l) = s.p95_latency_ns {
        out.push_str(&format!(" · p95 latency {:.1} ms", l / 1e6));
    }
    out.push_str(&format!(" · {} snapshots\n", result.watch.snapshots));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(28_800)));
        assert_eq!(parse_duration("2h30m"), Ok(Duration::from_secs(9_000)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("8").unwrap_err().contains("give a unit"));
        assert!(
            parse_duration("8d")
                .unwrap_err()
                .contains("unknown unit `d`")
        );
        assert!(parse_duration("0h").is_err());
    }

    #[test]
    fn soak_table_errors_name_the_key() {
        let bad = SoakDecl {
            tail_fraction: 0.0,
            ..SoakDecl::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("tail_fraction"));
        let bad = SoakDecl {
            max_slope_kib_per_request: -1.0,
            ..SoakDecl::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .starts_with("max_slope_kib_per_request")
        );
        assert_eq!(SoakDecl::default().validate(), Ok(()));
        let s = SoakDecl::default().settings(9);
        assert_eq!(s.growth.cycle_requests, 9);
        assert_eq!(s.growth.linear_slope_bytes_per_request, 4096.0);
    }
}
