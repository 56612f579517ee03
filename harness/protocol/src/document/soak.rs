//! The protocol's `[soak]` table: its keys, defaults and bounds, and the
//! analysis settings it gives. Owned by the protocol format (the soak
//! command reads it, the loader validates it).

use analysis::growth::GrowthSettings;
use analysis::stability::{LifecycleSettings, SoakMode, SoakSettings};
use schemars::JsonSchema;
use serde::Deserialize;
use worker_contract::FieldError;
use worker_contract::bounds::{FloatBound, IntBound};

/// The protocol's `[soak]` table. Every key has a default.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SoakDecl {
    /// The arm to soak (default: the first arm).
    pub arm: Option<String>,
    /// `requests` (the default): one load, many requests, growth judged at
    /// each `request_end`. `lifecycle`: `cycles` times inside one worker,
    /// context load → state → `cycle_requests` requests → state and context
    /// freed, growth judged on the floor after each teardown.
    pub mode: SoakMode,
    /// Lifecycle cycles (required with `mode = "lifecycle"`, refused without it).
    #[schemars(range(min = CYCLES.min, max = CYCLES.max))]
    pub cycles: Option<u64>,
    /// Lifecycle: cycles at the start whose floors are not judged (the first
    /// loads fill process-wide caches once).
    #[schemars(range(min = WARMUP_CYCLES.min, max = WARMUP_CYCLES.max))]
    pub warmup_cycles: u64,
    /// Lifecycle: growth threshold of the post-teardown floor, KiB per cycle.
    #[schemars(range(max = SLOPE_KIB.max), extend("exclusiveMinimum" = SLOPE_KIB.min))]
    pub max_slope_kib_per_cycle: f64,
    /// Requests not judged at the start.
    #[schemars(range(min = SOAK_REQUEST_COUNT.min, max = SOAK_REQUEST_COUNT.max))]
    pub warmup_requests: u64,
    /// Requests per workload cycle; default: the arm's fixture count (whisper) or 1.
    #[schemars(range(min = CYCLE_REQUESTS.min, max = CYCLE_REQUESTS.max))]
    pub cycle_requests: Option<u64>,
    /// Fewer analysed bins than this is inconclusive.
    #[schemars(range(min = MIN_POINTS.min, max = MIN_POINTS.max))]
    pub min_points: usize,
    /// Fraction of the analysed bins, at the end, whose slope decides growth.
    #[schemars(range(max = TAIL_FRACTION.max), extend("exclusiveMinimum" = TAIL_FRACTION.min))]
    pub tail_fraction: f64,
    /// Worker growth threshold, KiB per request.
    #[schemars(range(max = SLOPE_KIB.max), extend("exclusiveMinimum" = SLOPE_KIB.min))]
    pub max_slope_kib_per_request: f64,
    /// System growth threshold (wired, compressor, swap, shmem), KiB per request.
    #[schemars(range(max = SLOPE_KIB.max), extend("exclusiveMinimum" = SLOPE_KIB.min))]
    pub system_max_slope_kib_per_request: f64,
    /// A level jump at least this large (MiB) is a step.
    #[schemars(range(max = STEP_MIN_MIB.max), extend("exclusiveMinimum" = STEP_MIN_MIB.min))]
    pub step_min_mib: f64,
    /// More steps than this is inconclusive.
    #[schemars(range(min = MAX_STEPS.min, max = MAX_STEPS.max))]
    pub max_steps: usize,
    /// Bootstrap resamples for the slope's confidence interval.
    #[schemars(range(min = BOOTSTRAP.min, max = BOOTSTRAP.max))]
    pub bootstrap_resamples: usize,
    /// Two-sided confidence of the slope's interval, strictly between 0.5 and 1
    /// (e.g. 0.95).
    #[schemars(extend("exclusiveMinimum" = CONFIDENCE.min, "exclusiveMaximum" = CONFIDENCE.max))]
    pub confidence: f64,
    /// Seed of the bootstrap's random generator, so the analysis is repeatable.
    pub seed: u64,
    /// Seconds between slow snapshots of the worker (0: only at `idle_end`).
    #[schemars(range(min = SNAPSHOT_INTERVAL_S.min, max = SNAPSHOT_INTERVAL_S.max))]
    pub snapshot_interval_s: u64,
    /// Milliseconds the worker waits after each `request_end` before a
    /// second (`settled`) snapshot, judged as series of their own (0: off).
    #[schemars(range(min = SETTLE_MS.min, max = SETTLE_MS.max))]
    pub settle_ms: u64,
    /// Past soaks of the same protocol and arm a new one is compared with.
    #[schemars(range(min = REGRESSION_WINDOW.min, max = REGRESSION_WINDOW.max))]
    pub regression_window: usize,
    /// Regression: slope above the window's median by more than this (KiB per request).
    #[schemars(range(max = SLOPE_KIB.max), extend("exclusiveMinimum" = SLOPE_KIB.min))]
    pub regression_slope_kib_per_request: f64,
    /// Regression: peak footprint above the window's median by more than this percentage.
    #[schemars(range(max = PEAK_PCT.max), extend("exclusiveMinimum" = PEAK_PCT.min))]
    pub regression_peak_pct: f64,
}

impl Default for SoakDecl {
    fn default() -> Self {
        let g = GrowthSettings::default();
        SoakDecl {
            arm: None,
            mode: SoakMode::Requests,
            cycles: None,
            warmup_cycles: 2,
            max_slope_kib_per_cycle: 64.0,
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

/// Slope thresholds in KiB per request: positive, at most 1 TiB per request.
const SLOPE_KIB: FloatBound = FloatBound::above(0.0, 1_073_741_824.0, "KiB per request");
/// `cycles`: at least one; a million loads is weeks of work for any model.
pub const CYCLES: IntBound = IntBound::new(1, 1_000_000, "load → requests → teardown cycles");
/// `warmup_cycles`: below `cycles` too (checked apart).
const WARMUP_CYCLES: IntBound = IntBound::new(0, 1_000_000, "cycles");
/// Requests counted by the soak analysis.
const SOAK_REQUEST_COUNT: IntBound = IntBound::new(0, 10_000_000, "at most 10 million");
/// `cycle_requests`.
const CYCLE_REQUESTS: IntBound = IntBound::new(1, 10_000_000, "at most 10 million");
/// `min_points`: at least 3 bins for a slope, at most 100000.
const MIN_POINTS: IntBound = IntBound::new(3, 100_000, "analysed bins");
/// `max_steps`.
const MAX_STEPS: IntBound = IntBound::new(0, 10_000, "level jumps");
/// `bootstrap_resamples`: each resample is a Theil–Sen fit (quadratic in the bins).
const BOOTSTRAP: IntBound = IntBound::new(20, 10_000, "each is a Theil–Sen fit");
/// `snapshot_interval_s`: at most a day (0: only at `idle_end`).
const SNAPSHOT_INTERVAL_S: IntBound = IntBound::new(0, 86_400, "seconds, at most 1 day");
/// `settle_ms`: waited after every request, so at most 10 minutes.
const SETTLE_MS: IntBound = IntBound::new(0, 600_000, "milliseconds, at most 10 minutes");
/// `tail_fraction`: a fraction of the analysed bins, `(0, 1]`.
const TAIL_FRACTION: FloatBound = FloatBound::above(0.0, 1.0, "a fraction of the bins");
/// `step_min_mib`: positive, at most 1 TiB.
const STEP_MIN_MIB: FloatBound = FloatBound::above(0.0, 1_048_576.0, "MiB, at most 1 TiB");
/// `confidence`: of the bootstrap interval, `(0.5, 1)`.
const CONFIDENCE: FloatBound = FloatBound::open(0.5, 1.0, "a confidence level");
/// `regression_peak_pct`: positive, at most 10000 %.
const PEAK_PCT: FloatBound = FloatBound::above(0.0, 10_000.0, "percent");
/// `regression_window`: past nights compared with.
const REGRESSION_WINDOW: IntBound = IntBound::new(1, 365, "nights");

impl SoakDecl {
    /// Reject settings the analysis cannot use; the error names the key
    /// (relative to the `[soak]` table), its value and the allowed range.
    pub fn validate(&self) -> Result<(), FieldError> {
        SOAK_REQUEST_COUNT.check("warmup_requests", self.warmup_requests)?;
        if let Some(c) = self.cycle_requests {
            CYCLE_REQUESTS.check("cycle_requests", c)?;
        }
        MIN_POINTS.check("min_points", self.min_points as u64)?;
        TAIL_FRACTION.check("tail_fraction", self.tail_fraction)?;
        SLOPE_KIB.check("max_slope_kib_per_request", self.max_slope_kib_per_request)?;
        SLOPE_KIB.check(
            "system_max_slope_kib_per_request",
            self.system_max_slope_kib_per_request,
        )?;
        STEP_MIN_MIB.check("step_min_mib", self.step_min_mib)?;
        MAX_STEPS.check("max_steps", self.max_steps as u64)?;
        BOOTSTRAP.check("bootstrap_resamples", self.bootstrap_resamples as u64)?;
        CONFIDENCE.check("confidence", self.confidence)?;
        SNAPSHOT_INTERVAL_S.check("snapshot_interval_s", self.snapshot_interval_s)?;
        SETTLE_MS.check("settle_ms", self.settle_ms)?;
        REGRESSION_WINDOW.check("regression_window", self.regression_window as u64)?;
        SLOPE_KIB.check(
            "regression_slope_kib_per_request",
            self.regression_slope_kib_per_request,
        )?;
        PEAK_PCT.check("regression_peak_pct", self.regression_peak_pct)?;
        WARMUP_CYCLES.check("warmup_cycles", self.warmup_cycles)?;
        SLOPE_KIB.check("max_slope_kib_per_cycle", self.max_slope_kib_per_cycle)?;
        match (self.mode, self.cycles) {
            (SoakMode::Lifecycle, None) => {
                return Err(FieldError::new(
                    "cycles",
                    "cycles is missing: mode = \"lifecycle\" needs it (how many load → \
                     requests → teardown cycles to run, at least 1)",
                ));
            }
            (SoakMode::Lifecycle, Some(n)) => {
                CYCLES.check("cycles", n)?;
                if self.warmup_cycles >= n {
                    return Err(FieldError::new(
                        "warmup_cycles",
                        format!(
                            "warmup_cycles = {} leaves none of the {n} cycles to judge",
                            self.warmup_cycles
                        ),
                    ));
                }
                let per_cycle = self.cycle_requests.unwrap_or(1);
                if n.checked_mul(per_cycle)
                    .is_none_or(|total| total > SOAK_REQUEST_COUNT.max)
                {
                    return Err(FieldError::new(
                        "cycles",
                        format!(
                            "cycles = {n} × cycle_requests = {per_cycle} is more than {} requests",
                            SOAK_REQUEST_COUNT.max
                        ),
                    ));
                }
            }
            (SoakMode::Requests, Some(_)) => {
                return Err(FieldError::new(
                    "cycles",
                    "cycles needs mode = \"lifecycle\"",
                ));
            }
            (SoakMode::Requests, None) => {}
        }
        Ok(())
    }

    /// Measured requests a lifecycle soak runs when a cycle is `cycle`
    /// requests long (`cycle_requests` when set); `None` for a request soak.
    pub fn lifecycle_requests(&self, cycle: u64) -> Option<u64> {
        match (self.mode, self.cycles) {
            (SoakMode::Lifecycle, Some(n)) => {
                Some(n.saturating_mul(self.cycle_requests.unwrap_or(cycle).max(1)))
            }
            _ => None,
        }
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
            lifecycle: match (self.mode, self.cycles) {
                (SoakMode::Lifecycle, Some(cycles)) => Some(LifecycleSettings {
                    cycles,
                    requests_per_cycle: self.cycle_requests.unwrap_or(cycle).max(1),
                    warmup_cycles: self.warmup_cycles,
                    slope_bytes_per_cycle: self.max_slope_kib_per_cycle * 1024.0,
                }),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifecycle_soak_needs_at_least_one_cycle_and_names_the_key() {
        let lifecycle = |cycles| SoakDecl {
            mode: SoakMode::Lifecycle,
            cycles,
            ..SoakDecl::default()
        };
        let zero = lifecycle(Some(0)).validate().unwrap_err();
        assert_eq!(zero.key, "cycles");
        assert!(
            zero.message
                .starts_with("cycles = 0 is out of range: allowed 1..="),
            "{zero}"
        );
        assert_eq!(lifecycle(None).validate().unwrap_err().key, "cycles");
        let requests = SoakDecl {
            cycles: Some(5),
            ..SoakDecl::default()
        };
        assert_eq!(
            requests.validate().unwrap_err().message,
            "cycles needs mode = \"lifecycle\""
        );
        let all_warmup = SoakDecl {
            warmup_cycles: 3,
            ..lifecycle(Some(3))
        };
        assert_eq!(all_warmup.validate().unwrap_err().key, "warmup_cycles");
        let too_many = SoakDecl {
            cycle_requests: Some(10_000_000),
            warmup_cycles: 0,
            ..lifecycle(Some(2))
        };
        assert_eq!(too_many.validate().unwrap_err().key, "cycles");

        let ok = SoakDecl {
            cycle_requests: Some(4),
            max_slope_kib_per_cycle: 8.0,
            ..lifecycle(Some(50))
        };
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(ok.lifecycle_requests(9), Some(200));
        let l = ok.settings(9).lifecycle.unwrap();
        assert_eq!(
            (l.cycles, l.requests_per_cycle, l.warmup_cycles),
            (50, 4, 2)
        );
        assert_eq!(l.slope_bytes_per_cycle, 8192.0);
        // Without cycle_requests a cycle is the arm's own (its fixtures).
        let natural = lifecycle(Some(50));
        assert_eq!(natural.lifecycle_requests(3), Some(150));
        assert_eq!(SoakDecl::default().lifecycle_requests(3), None);
    }
}
