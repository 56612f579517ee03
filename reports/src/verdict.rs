//! What judging gates produces: each check with its threshold, measured and
//! control values and evidence, each gate's and arm's outcome, and the run
//! verdict. The receipt holds these; [`crate::gates`] computes them.

use crate::gate_spec::{Expect, GateSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// PASS, FAIL or NOT_EVALUATED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// At least one check failed.
    Fail,
    /// A check could not be evaluated (a value or the control is missing), or there was nothing to check.
    NotEvaluated,
}

impl Outcome {
    /// FAIL if any is FAIL; NOT_EVALUATED if any is or there are none; else PASS.
    pub fn all(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
        let mut any = false;
        let mut not_evaluated = false;
        for o in outcomes {
            any = true;
            match o {
                Outcome::Fail => return Outcome::Fail,
                Outcome::NotEvaluated => not_evaluated = true,
                Outcome::Pass => {}
            }
        }
        if !any || not_evaluated {
            Outcome::NotEvaluated
        } else {
            Outcome::Pass
        }
    }

    /// The outcome as written in reports: `PASS`, `FAIL` or `NOT_EVALUATED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::NotEvaluated => "NOT_EVALUATED",
        }
    }
}

/// Where a value lives: a file of the run directory and a JSON Pointer
/// (RFC 6901) into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// The file, relative to the run directory (e.g. `receipt.json`).
    pub file: String,
    /// The JSON Pointer to the value inside that file.
    pub pointer: String,
}

/// One comparison inside a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    /// What is compared, e.g. "state_ready resident_peak_bytes".
    pub name: String,
    /// Whether the measured value held to the threshold.
    pub outcome: Outcome,
    /// The limit the measured value is held to (unit in `unit`).
    pub threshold: Option<f64>,
    /// The arm's value (unit in `unit`); `None` when it was not measured.
    pub measured: Option<f64>,
    /// The control arm's value, for checks against a control; `None` otherwise.
    pub control: Option<f64>,
    /// `bytes`, `ns`, `ratio`, `count`, `bool` (1 true, 0 false).
    pub unit: String,
    /// The measured value first, then the control's.
    pub evidence: Vec<Evidence>,
    /// How the threshold was set, or why the check failed or was not evaluated.
    pub note: String,
}

/// One gate's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateResult {
    /// The gate kind as the protocol names it (`memory`, `latency`, …).
    pub kind: String,
    /// False for the `validity` gate added by default.
    pub declared: bool,
    /// The gate's parameters, as declared.
    pub spec: GateSpec,
    /// All checks combined: FAIL if any fails, NOT_EVALUATED if any is or there are none, else PASS.
    pub outcome: Outcome,
    /// Each comparison the gate made, in order.
    pub checks: Vec<Check>,
}

/// One arm's gates and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArmVerdict {
    /// The arm id.
    pub arm: String,
    /// The control arm the gates compare with, when the arm names one.
    pub control: Option<String>,
    /// True when the arm is marked `promote = true`.
    pub promote: bool,
    /// What the arm is expected to do (complete, or fail closed).
    pub expect: Expect,
    /// Each gate's result: the declared ones, then the default `validity` gate where it applies.
    pub gates: Vec<GateResult>,
    /// The arm's verdict: all its gates combined.
    pub verdict: Outcome,
}

/// Which arms the run verdict is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JudgedArms {
    /// The arms marked `promote = true`.
    Promoted,
    /// No arm is marked: every arm with gates.
    AllGated,
}

/// Every arm's gates, and the run's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateReport {
    /// Every arm with gates, in run order.
    pub arms: Vec<ArmVerdict>,
    /// Which arms the run verdict is taken over.
    pub judged: JudgedArms,
    /// The ids of those arms.
    pub judged_arms: Vec<String>,
    /// The run verdict: the judged arms' verdicts combined.
    pub verdict: Outcome,
}
