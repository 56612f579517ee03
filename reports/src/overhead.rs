//! The sampler-overhead twin runs of an arm: the same worker run again,
//! alternating with the external sampler (A) and without it (B), so the
//! latency ratio A/B shows what the sampler costs the thing it measures.
//!
//! The harness writes each twin run into `arms/<id>/overhead/<n>-<a|b>/`
//! and the summary [`OverheadRecord`] into `arms/<id>/overhead.json`; the
//! receipt carries that summary and the `overhead` gate judges its ratio.

use crate::ReportError;
use crate::record::{ArmOutcome, ArmStatus, files};
use crate::stats;
use run_dir::{Rel, RunDir};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use worker_contract::RequestResult;

/// The summary file, under `arms/<id>/`.
pub use run_dir::names::OVERHEAD as OVERHEAD_FILE;
/// The folder of the twin runs, under `arms/<id>/`.
pub use run_dir::names::OVERHEAD_DIR;

/// Which side of a pair a twin run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Twin {
    /// With the external sampler, exactly as the measured run.
    A,
    /// Without the external sampler (in-process markers only).
    B,
}

impl Twin {
    /// A at even positions, B at odd: ABAB…
    pub fn at(order: u32) -> Twin {
        if order.is_multiple_of(2) {
            Twin::A
        } else {
            Twin::B
        }
    }

    /// True for twin A, the run with the external sampler.
    pub fn sampled(self) -> bool {
        self == Twin::A
    }

    /// The twin run's folder name: `<order>-a` or `<order>-b`.
    pub fn dir_name(self, order: u32) -> String {
        let letter = match self {
            Twin::A => 'a',
            Twin::B => 'b',
        };
        format!("{order}-{letter}")
    }
}

/// One twin run in figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TwinRun {
    /// Which twin: A sampled, B not.
    pub label: Twin,
    /// Position in the ABAB sequence, from 0.
    pub order: u32,
    /// The run's folder, relative to the arm's folder.
    pub dir: String,
    /// How the twin run ended.
    pub status: ArmStatus,
    /// Every reason it failed, in order; empty when it completed.
    pub failure: Vec<String>,
    /// Measured requests (the first one included).
    pub requests: u64,
    /// Measured requests after the first, whose latency is compared.
    pub steady_requests: u64,
    /// Median latency of the steady requests, in ns; `None` without any.
    pub steady_median_ns: Option<f64>,
    /// 95th percentile latency of the steady requests, in ns.
    pub steady_p95_ns: Option<f64>,
}

impl TwinRun {
    /// Figures from the run's outcome and request results. The first
    /// measured request is left out (it carries cold costs), as for the
    /// steady latency of whisper arms.
    pub fn from_results(
        label: Twin,
        order: u32,
        outcome: &ArmOutcome,
        results: &[RequestResult],
    ) -> TwinRun {
        let steady: Vec<f64> = results
            .iter()
            .skip(1)
            .map(|r| r.latency_ns as f64)
            .collect();
        TwinRun {
            label,
            order,
            dir: format!("{OVERHEAD_DIR}/{}", label.dir_name(order)),
            status: outcome.status,
            failure: outcome.failure.clone(),
            requests: results.len() as u64,
            steady_requests: steady.len() as u64,
            steady_median_ns: stats::median(&steady),
            steady_p95_ns: stats::percentile(&steady, 95.0),
        }
    }

    /// Read a finished twin run from `<arm>/overhead/<its dir>/`.
    pub fn read(run: &RunDir, arm: &Rel, label: Twin, order: u32) -> Result<TwinRun, ReportError> {
        let dir = arm.join(OVERHEAD_DIR).join(&label.dir_name(order));
        let arm_file = dir.join(files::ARM);
        let outcome: ArmOutcome =
            run.read_json(&arm_file)?
                .ok_or_else(|| ReportError::Invalid {
                    path: run.display(&arm_file),
                    reason: "missing: the twin run never ended".into(),
                })?;
        let results: Vec<RequestResult> = run.read_jsonl(&dir.join(files::RESULTS))?;
        Ok(TwinRun::from_results(label, order, &outcome, &results))
    }
}

/// The twin runs of one arm and the latency ratio they give
/// (`arms/<id>/overhead.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverheadRecord {
    /// A/B pairs declared.
    pub pairs: u32,
    /// Every twin run that ran, in order.
    pub runs: Vec<TwinRun>,
    /// Per complete pair: A's steady median / B's steady median.
    pub pair_ratios: Vec<f64>,
    /// Median of `pair_ratios`; `None` unless every declared pair gave one.
    pub ratio: Option<f64>,
    /// Spread of the per-pair ratios.
    pub ratio_min: Option<f64>,
    /// Largest per-pair ratio.
    pub ratio_max: Option<f64>,
    /// Why the ratio is missing (failed or missing twin runs); empty when it is not.
    pub problems: Vec<String>,
}

impl OverheadRecord {
    /// Pair the runs (0 with 1, 2 with 3, …) and take the ratios.
    pub fn summarise(pairs: u32, runs: Vec<TwinRun>) -> OverheadRecord {
        let mut problems = Vec::new();
        let expected = pairs as usize * 2;
        if runs.len() < expected {
            problems.push(format!(
                "only {} of {expected} twin runs ran (the run was interrupted or a twin could not start)",
                runs.len()
            ));
        }
        for r in &runs {
            if r.status != ArmStatus::Completed {
                problems.push(format!(
                    "twin run {} ({}) failed: {}",
                    r.order,
                    r.dir,
                    r.failure.join("; ")
                ));
            } else if r.steady_median_ns.is_none_or(|m| m <= 0.0) {
                problems.push(format!(
                    "twin run {} ({}) has no steady request (at least two measured requests are needed)",
                    r.order, r.dir
                ));
            }
        }
        let pair_ratios: Vec<f64> = runs
            .chunks_exact(2)
            .filter_map(|pair| match pair {
                [a, b] if a.label == Twin::A && b.label == Twin::B => {
                    let (a, b) = (a.steady_median_ns?, b.steady_median_ns?);
                    (b > 0.0).then_some(a / b)
                }
                _ => None,
            })
            .collect();
        let complete = problems.is_empty() && pair_ratios.len() == pairs as usize;
        let min = pair_ratios.iter().copied().reduce(f64::min);
        let max = pair_ratios.iter().copied().reduce(f64::max);
        OverheadRecord {
            pairs,
            ratio: if complete {
                stats::median(&pair_ratios)
            } else {
                None
            },
            ratio_min: min,
            ratio_max: max,
            pair_ratios,
            runs,
            problems,
        }
    }
}

/// The arm's `overhead.json`, if the twin runs happened.
pub fn assemble(run: &RunDir, arm: &Rel) -> Result<Option<OverheadRecord>, ReportError> {
    Ok(run.read_json(&arm.join(OVERHEAD_FILE))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: Twin, order: u32, median_ms: Option<f64>) -> TwinRun {
        TwinRun {
            label,
            order,
            dir: format!("overhead/{}", label.dir_name(order)),
            status: ArmStatus::Completed,
            failure: vec![],
            requests: 3,
            steady_requests: 2,
            steady_median_ns: median_ms.map(|m| m * 1e6),
            steady_p95_ns: median_ms.map(|m| m * 1e6),
        }
    }

    #[test]
    fn ratio_is_the_median_of_pair_ratios_and_the_spread_their_range() {
        let runs = vec![
            run(Twin::A, 0, Some(102.0)),
            run(Twin::B, 1, Some(100.0)),
            run(Twin::A, 2, Some(99.0)),
            run(Twin::B, 3, Some(100.0)),
            run(Twin::A, 4, Some(110.0)),
            run(Twin::B, 5, Some(100.0)),
        ];
        let r = OverheadRecord::summarise(3, runs);
        assert_eq!(r.pair_ratios, [1.02, 0.99, 1.1]);
        assert_eq!(r.ratio, Some(1.02));
        assert_eq!((r.ratio_min, r.ratio_max), (Some(0.99), Some(1.1)));
        assert!(r.problems.is_empty());
    }

    #[test]
    fn a_failed_or_missing_twin_leaves_no_ratio_and_says_why() {
        let mut b = run(Twin::B, 1, Some(100.0));
        b.status = ArmStatus::Failed;
        b.failure = vec!["worker exited with code 3".into()];
        let r = OverheadRecord::summarise(2, vec![run(Twin::A, 0, Some(100.0)), b]);
        assert_eq!(r.ratio, None);
        assert_eq!(
            r.problems,
            [
                "only 2 of 4 twin runs ran (the run was interrupted or a twin could not start)",
                "twin run 1 (overhead/1-b) failed: worker exited with code 3",
            ]
        );

        let r =
            OverheadRecord::summarise(1, vec![run(Twin::A, 0, Some(100.0)), run(Twin::B, 1, None)]);
        assert_eq!(r.ratio, None);
        assert!(r.problems[0].contains("1-b) has no steady request"));
    }

    #[test]
    fn steady_latency_leaves_the_first_request_out() {
        let outcome: ArmOutcome = serde_json::from_value(serde_json::json!({
            "id": "a", "status": "completed", "failure": [], "worker_executable": "w",
            "worker_pid": 1, "hello": null, "exit": null, "timed_out": false, "timeout_s": 1,
            "bye": true, "markers": 0, "results": 4, "worker_errors": [],
            "started_ns": 0, "ended_ns": 1, "sampler": null
        }))
        .unwrap();
        let results: Vec<RequestResult> = [900u64, 10, 30, 20]
            .iter()
            .enumerate()
            .map(|(i, ms)| {
                serde_json::from_value(serde_json::json!({
                    "request_id": i, "latency_ns": ms * 1_000_000,
                    "body": {"kind": "calibration", "held_bytes": 0, "leaked_bytes": 0,
                             "spike_bytes": 0, "spike_resident_ns": null, "spike_freed_ns": null}
                }))
                .unwrap()
            })
            .collect();
        let r = TwinRun::from_results(Twin::B, 3, &outcome, &results);
        assert_eq!(r.dir, "overhead/3-b");
        assert_eq!((r.requests, r.steady_requests), (4, 3));
        assert_eq!(r.steady_median_ns, Some(20e6));
        assert_eq!(r.steady_p95_ns, Some(29e6));
    }

    #[test]
    fn twins_alternate_starting_with_the_sampled_one() {
        let labels: Vec<Twin> = (0..4).map(Twin::at).collect();
        assert_eq!(labels, [Twin::A, Twin::B, Twin::A, Twin::B]);
        assert!(Twin::A.sampled() && !Twin::B.sampled());
    }
}
