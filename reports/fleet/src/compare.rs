//! Two runs side by side (`memqual compare A B`): each arm's key metrics,
//! A → B with the difference, and the regressions beyond a limit.
//!
//! The key metrics are the ones a promotion turns on, all "lower is better":
//! the kernel peak at `state_ready`, the largest resident size the external
//! series saw, and the steady p95 latency. The same list is the fleet
//! report's columns ([`crate::fleet`]).
//!
//! Figures are only as good as the seal over them: `memqual compare`
//! verifies each run's seal first ([`reports::seal::verify`]) and records the
//! result with [`Comparison::mark_seals`], so a run whose seal is broken is
//! named and its figures are marked unverified.

use reports::gates::Outcome;
use reports::receipt::{ArmReceipt, Receipt};
use serde::{Deserialize, Serialize};

/// One key metric: its name (as in `--json`) and unit.
#[derive(Debug, Clone, Copy)]
pub struct KeyMetric {
    /// The metric's name, as in `--json` output and fleet reports.
    pub name: &'static str,
    /// `bytes` or `ns`.
    pub unit: &'static str,
    /// What a reader sees in tables.
    pub label: &'static str,
    value: fn(&ArmReceipt) -> Option<f64>,
}

impl KeyMetric {
    /// This metric of `arm`, when it was measured.
    pub fn of(&self, arm: &ArmReceipt) -> Option<f64> {
        (self.value)(arm).filter(|v| v.is_finite())
    }
}

fn steady_p95(a: &ArmReceipt) -> Option<f64> {
    match &a.speech {
        Some(s) => s.latency.steady_p95_ns,
        None => a.latency.as_ref().map(|l| l.p95_ns),
    }
}

/// Every key metric, in table order.
pub const KEY_METRICS: [KeyMetric; 3] = [
    KeyMetric {
        name: "state_ready_peak_bytes",
        unit: "bytes",
        label: "state_ready peak",
        value: |a| a.state_ready_peak().map(|v| v as f64),
    },
    KeyMetric {
        name: "max_resident_bytes",
        unit: "bytes",
        label: "max resident",
        value: |a| a.series.max_resident_bytes.map(|v| v as f64),
    },
    KeyMetric {
        name: "steady_p95_ns",
        unit: "ns",
        label: "steady p95",
        value: steady_p95,
    },
];

/// A run as `compare` names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRef {
    /// The run directory as given on the command line.
    pub dir: String,
    /// The protocol's `name`.
    pub protocol: String,
    /// When the run started: UTC, RFC 3339.
    pub started_utc: String,
    /// The run verdict; `None` when no arm declares gates.
    pub verdict: Option<Outcome>,
    /// The run's seal, verified before its figures were compared; `None`
    /// when it was not checked (then its figures are not verified either).
    pub seal: Option<SealStatus>,
}

/// Whether a run's seal held when `compare` read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealStatus {
    /// True when the seal holds (as `memqual verify` would say): the run's
    /// figures are the ones it sealed. False: they are unverified.
    pub verified: bool,
    /// What the check found wrong (empty when verified), as `memqual verify
    /// --json` lists it.
    pub problems: Vec<reports::seal::Problem>,
}

impl From<&reports::seal::Verification> for SealStatus {
    fn from(v: &reports::seal::Verification) -> Self {
        SealStatus {
            verified: v.holds(),
            problems: v.problems.clone(),
        }
    }
}

impl RunRef {
    /// True when this run's seal was checked and holds.
    pub fn verified(&self) -> bool {
        self.seal.as_ref().is_some_and(|s| s.verified)
    }
}

/// One key metric of one arm, A → B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    /// The key metric's name.
    pub metric: String,
    /// The metric's unit: `bytes` or `ns`.
    pub unit: String,
    /// The value in run A; `None` when A did not measure it.
    pub a: Option<f64>,
    /// The value in run B; `None` when B did not measure it.
    pub b: Option<f64>,
    /// B − A.
    pub delta: Option<f64>,
    /// (B − A) / A × 100; `None` without both values or when A is 0.
    pub delta_pct: Option<f64>,
    /// Beyond `--max-regression` (or measured in A and missing in B).
    pub regression: bool,
}

/// One arm id of either run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmComparison {
    /// The arm id.
    pub arm: String,
    /// True when run A has this arm.
    pub in_a: bool,
    /// True when run B has this arm.
    pub in_b: bool,
    /// The arm's verdict in run A; `None` without gates there.
    pub verdict_a: Option<Outcome>,
    /// The arm's verdict in run B; `None` without gates there.
    pub verdict_b: Option<Outcome>,
    /// Every key metric, A → B, in table order.
    pub metrics: Vec<MetricDelta>,
}

/// A key metric that got worse than the limit allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// The arm id.
    pub arm: String,
    /// The key metric's name.
    pub metric: String,
    /// The value in run A.
    pub a: f64,
    /// The value in run B; `None` when B did not measure it.
    pub b: Option<f64>,
    /// (B − A) / A × 100; `None` without B or when A is 0.
    pub delta_pct: Option<f64>,
    /// Why, in words.
    pub reason: String,
}

/// `memqual compare A B [--max-regression PCT] --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The first run given (the baseline).
    pub a: RunRef,
    /// The second run given.
    pub b: RunRef,
    /// The `--max-regression` limit in percent; `None` when not given.
    pub max_regression_pct: Option<f64>,
    /// Every arm id of either run: A's in order, then B's new ones.
    pub arms: Vec<ArmComparison>,
    /// Empty without `--max-regression`.
    pub regressions: Vec<Regression>,
    /// True only when both runs' seals were checked and hold; false marks
    /// every figure of a run whose `seal` is not verified as unverified.
    pub figures_verified: bool,
}

impl Comparison {
    /// Record the seal checks of run A and run B (their figures are
    /// verified only when their seal holds).
    pub fn mark_seals(&mut self, a: &reports::seal::Verification, b: &reports::seal::Verification) {
        self.a.seal = Some(a.into());
        self.b.seal = Some(b.into());
        self.figures_verified = self.a.verified() && self.b.verified();
    }
}

fn run_ref(dir: &str, r: &Receipt) -> RunRef {
    RunRef {
        dir: dir.to_string(),
        protocol: r.run.protocol_name.clone(),
        started_utc: r.run.started_utc.clone(),
        verdict: r.gates.as_ref().map(|g| g.verdict),
        seal: None,
    }
}

fn arm_verdict(r: &Receipt, id: &str) -> Option<Outcome> {
    r.gates
        .as_ref()?
        .arms
        .iter()
        .find(|a| a.arm == id)
        .map(|a| a.verdict)
}

/// Whether B regressed against A by more than `limit_pct` (lower is better
/// for every key metric). Measured in A but not in B counts: B cannot show
/// it did not regress. A value of 0 in A makes any increase a regression.
fn judge(a: Option<f64>, b: Option<f64>, limit_pct: f64) -> Option<String> {
    let a = a?;
    match b {
        None => Some("measured in A, not in B".to_string()),
        Some(b) if a > 0.0 => {
            let pct = (b - a) / a * 100.0;
            (pct > limit_pct).then(|| format!("{pct:+.2} % is beyond the {limit_pct} % allowed"))
        }
        Some(b) => (b > a).then(|| format!("{a} → {b}: any increase from 0 is beyond the limit")),
    }
}

/// Compare every arm id of either run (A's order, then B's new ones).
pub fn compare(
    (dir_a, a): (&str, &Receipt),
    (dir_b, b): (&str, &Receipt),
    max_regression_pct: Option<f64>,
) -> Comparison {
    let mut ids: Vec<&str> = a.arms.iter().map(|x| x.id.as_str()).collect();
    for x in &b.arms {
        if !ids.contains(&x.id.as_str()) {
            ids.push(&x.id);
        }
    }
    let mut regressions = Vec::new();
    let arms = ids
        .into_iter()
        .map(|id| {
            let (xa, xb) = (
                a.arms.iter().find(|x| x.id == id),
                b.arms.iter().find(|x| x.id == id),
            );
            let metrics = KEY_METRICS
                .iter()
                .map(|m| {
                    let (va, vb) = (xa.and_then(|x| m.of(x)), xb.and_then(|x| m.of(x)));
                    let delta = va.zip(vb).map(|(x, y)| y - x);
                    let delta_pct = va
                        .zip(vb)
                        .filter(|(x, _)| *x != 0.0)
                        .map(|(x, y)| (y - x) / x * 100.0);
                    let why = max_regression_pct.and_then(|limit| judge(va, vb, limit));
                    if let (Some(reason), Some(va)) = (&why, va) {
                        regressions.push(Regression {
                            arm: id.to_string(),
                            metric: m.name.to_string(),
                            a: va,
                            b: vb,
                            delta_pct,
                            reason: reason.clone(),
                        });
                    }
                    MetricDelta {
                        metric: m.name.to_string(),
                        unit: m.unit.to_string(),
                        a: va,
                        b: vb,
                        delta,
                        delta_pct,
                        regression: why.is_some(),
                    }
                })
                .collect();
            ArmComparison {
                arm: id.to_string(),
                in_a: xa.is_some(),
                in_b: xb.is_some(),
                verdict_a: arm_verdict(a, id),
                verdict_b: arm_verdict(b, id),
                metrics,
            }
        })
        .collect();
    Comparison {
        a: run_ref(dir_a, a),
        b: run_ref(dir_b, b),
        max_regression_pct,
        arms,
        regressions,
        figures_verified: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regressions_are_judged_lower_is_better_and_fail_closed() {
        assert_eq!(
            judge(Some(100.0), Some(105.0), 5.0),
            None,
            "exactly at the limit"
        );
        assert_eq!(
            judge(Some(100.0), Some(105.5), 5.0).as_deref(),
            Some("+5.50 % is beyond the 5 % allowed")
        );
        assert_eq!(judge(Some(100.0), Some(50.0), 0.0), None, "an improvement");
        assert_eq!(
            judge(Some(100.0), None, 5.0).as_deref(),
            Some("measured in A, not in B")
        );
        assert_eq!(judge(None, Some(1e12), 5.0), None, "no baseline");
        assert!(judge(Some(0.0), Some(1.0), 1000.0).is_some());
        assert_eq!(judge(Some(0.0), Some(0.0), 0.0), None);
    }
}
