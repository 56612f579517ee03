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
    Pass,
    Fail,
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
    pub file: String,
    pub pointer: String,
}

/// One comparison inside a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    /// What is compared, e.g. "state_ready resident_peak_bytes".
    pub name: String,
    pub outcome: Outcome,
    /// The limit the measured value is held to (unit in `unit`).
    pub threshold: Option<f64>,
    pub measured: Option<f64>,
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
    pub kind: String,
    /// False for the `validity` gate added by default.
    pub declared: bool,
    pub spec: GateSpec,
    pub outcome: Outcome,
    pub checks: Vec<Check>,
}

/// One arm's gates and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArmVerdict {
    pub arm: String,
    pub control: Option<String>,
    pub promote: bool,
    pub expect: Expect,
    pub gates: Vec<GateResult>,
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
    pub arms: Vec<ArmVerdict>,
    pub judged: JudgedArms,
    pub judged_arms: Vec<String>,
    pub verdict: Outcome,
}
