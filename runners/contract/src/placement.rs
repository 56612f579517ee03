//! Where Core ML plans to run the encoder's operations, as a receipt states
//! it: Core ML's compute plan summarised per device, or why it is not
//! attributable. Placement is read from `MLComputePlan` (macOS 14.4 and
//! later), never inferred from timing.
//!
//! The compute plan loads the compiled model once more, so the patched
//! worker asks for it only after `teardown_done` (a [`crate::WorkerMessage::Placement`]),
//! and its runtime report, sent at `state_ready`, says [`CoremlPlacement::AfterTeardown`].

use serde::{Deserialize, Deserializer, Serialize};

/// Where the encoder's operations run, or why that is not known.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CoremlPlacement {
    /// Core ML's compute plan, summarised.
    Planned(PlannedPlacement),
    /// The worker asks Core ML after `teardown_done`; the run directory's
    /// `coreml-placement.json` holds the answer, and the receipt takes it
    /// from there.
    AfterTeardown,
    /// No plan: why (the build does not ask, the system is older than macOS
    /// 14.4, Core ML failed or gave a plan that contradicts itself).
    NotAttributable {
        /// What kept the placement from being read.
        reason: String,
    },
}

impl CoremlPlacement {
    /// A placement that is not attributable, for `reason`.
    pub fn not_attributable(reason: impl Into<String>) -> Self {
        Self::NotAttributable {
            reason: reason.into(),
        }
    }

    /// One line for a log or summary: the plan's [`PlannedPlacement::line`],
    /// the promise, or the reason.
    pub fn line(&self) -> String {
        match self {
            Self::Planned(p) => p.line(),
            Self::AfterTeardown => "asked after teardown_done".into(),
            Self::NotAttributable { reason } => reason.clone(),
        }
    }
}

/// Receipts before format 4.9 stated placement as one sentence; such a
/// sentence reads as not attributable, with the sentence as the reason.
impl<'de> Deserialize<'de> for CoremlPlacement {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(tag = "status", rename_all = "snake_case")]
        enum Tagged {
            Planned(PlannedPlacement),
            AfterTeardown,
            NotAttributable { reason: String },
        }
        // Through a value, so that a malformed object reports the tagged
        // form's own error (the field, the unknown status) rather than an
        // untagged enum's "did not match any variant".
        let tagged = match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(reason) => return Ok(Self::NotAttributable { reason }),
            value => Tagged::deserialize(value).map_err(serde::de::Error::custom)?,
        };
        Ok(match tagged {
            Tagged::Planned(p) => Self::Planned(p),
            Tagged::AfterTeardown => Self::AfterTeardown,
            Tagged::NotAttributable { reason } => Self::NotAttributable { reason },
        })
    }
}

/// Core ML's compute plan for the compiled encoder, with the compute units
/// the arm configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannedPlacement {
    /// Where it came from: `MLComputePlan`.
    pub source: String,
    /// The compute units the plan was made for, in Core ML's words.
    pub compute_units: String,
    /// `ml_program` (operations, with cost estimates) or `neural_network`
    /// (layers, without).
    pub structure: String,
    /// Every operation or layer the plan lists.
    pub operations: u64,
    /// Operations Core ML plans no device for (constants, folded at load).
    pub without_usage: u64,
    /// Operations by the device Core ML prefers for them.
    pub preferred: DeviceCounts,
    /// Operations each device could run.
    pub supported: DeviceCounts,
    /// Operations with an estimated cost.
    pub costed: u64,
    /// The estimated cost by preferred device, as shares of the whole model's
    /// (they add up to at most 1); all 0 for a neural network.
    pub cost_share: DeviceShares,
    /// Each operator (or layer type) by preferred device, first seen first.
    pub kinds: Vec<OperationKind>,
    /// Operations of kinds past the summary's table of 32 (not in `kinds`).
    pub kinds_dropped: u64,
}

impl PlannedPlacement {
    /// The kinds with at least one operation off the Neural Engine, with how
    /// many: what keeps an encoder from running wholly there.
    pub fn off_neural_engine(&self) -> Vec<(&str, u64)> {
        self.kinds
            .iter()
            .map(|k| {
                (
                    k.op.as_str(),
                    k.preferred.total() - k.preferred.neural_engine,
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// One line for a summary: operations by device and the cost shares.
    pub fn line(&self) -> String {
        let p = &self.preferred;
        let mut line = format!(
            "{} of {} operations planned for the Neural Engine, {} GPU, {} CPU, {} unknown ({} without a device), {}",
            p.neural_engine,
            self.operations,
            p.gpu,
            p.cpu,
            p.unknown,
            self.without_usage,
            self.compute_units
        );
        if self.costed > 0 {
            let c = &self.cost_share;
            line.push_str(&format!(
                "; estimated cost {:.1} % Neural Engine, {:.1} % GPU, {:.1} % CPU",
                c.neural_engine * 100.0,
                c.gpu * 100.0,
                c.cpu * 100.0
            ));
        }
        line
    }
}

/// A count per compute device.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct DeviceCounts {
    /// The CPU.
    pub cpu: u64,
    /// The GPU.
    pub gpu: u64,
    /// The Neural Engine.
    pub neural_engine: u64,
    /// A device class memqual does not know.
    pub unknown: u64,
}

impl DeviceCounts {
    /// The sum over every device.
    pub fn total(&self) -> u64 {
        self.cpu + self.gpu + self.neural_engine + self.unknown
    }
}

/// A share per compute device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceShares {
    /// The CPU.
    pub cpu: f64,
    /// The GPU.
    pub gpu: f64,
    /// The Neural Engine.
    pub neural_engine: f64,
    /// A device class memqual does not know.
    pub unknown: f64,
}

/// One operator (or layer type) and where its operations are planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationKind {
    /// The operator's name (`ios17.conv`, `linear`), cut to 63 bytes.
    pub op: String,
    /// Its operations by preferred device.
    pub preferred: DeviceCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_placement_has_a_line_for_the_log() {
        assert_eq!(
            CoremlPlacement::not_attributable("MLComputePlan needs macOS 14.4").line(),
            "MLComputePlan needs macOS 14.4"
        );
        assert_eq!(
            CoremlPlacement::AfterTeardown.line(),
            "asked after teardown_done"
        );
    }

    #[test]
    fn a_sentence_from_an_older_receipt_reads_as_not_attributable() {
        let old: CoremlPlacement =
            serde_json::from_str(r#""not attributable: the worker does not query MLComputePlan""#)
                .unwrap();
        assert_eq!(
            old,
            CoremlPlacement::not_attributable(
                "not attributable: the worker does not query MLComputePlan"
            )
        );
        for p in [
            CoremlPlacement::AfterTeardown,
            CoremlPlacement::not_attributable("MLComputePlan needs macOS 14.4 or iOS 17.4"),
        ] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<CoremlPlacement>(&json).unwrap(), p);
        }
        assert_eq!(
            serde_json::to_string(&CoremlPlacement::AfterTeardown).unwrap(),
            r#"{"status":"after_teardown"}"#
        );
        // A malformed object names what is wrong with it.
        let err = |json: &str| {
            serde_json::from_str::<CoremlPlacement>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(
            err(r#"{"status":"guessed"}"#).contains("unknown variant `guessed`"),
            "{}",
            err(r#"{"status":"guessed"}"#)
        );
        assert!(err(r#"{"status":"not_attributable"}"#).contains("missing field `reason`"));
        assert!(serde_json::from_str::<CoremlPlacement>("3").is_err());
    }

    #[test]
    fn the_kinds_off_the_neural_engine_are_named_with_their_counts() {
        let counts = |cpu, gpu, neural_engine| DeviceCounts {
            cpu,
            gpu,
            neural_engine,
            unknown: 0,
        };
        let plan = PlannedPlacement {
            source: "MLComputePlan".into(),
            compute_units: "MLComputeUnitsAll".into(),
            structure: "ml_program".into(),
            operations: 12,
            without_usage: 2,
            preferred: counts(3, 0, 7),
            supported: counts(10, 10, 8),
            costed: 10,
            cost_share: DeviceShares {
                cpu: 0.25,
                gpu: 0.0,
                neural_engine: 0.75,
                unknown: 0.0,
            },
            kinds: vec![
                OperationKind {
                    op: "ios17.conv".into(),
                    preferred: counts(0, 0, 2),
                },
                OperationKind {
                    op: "ios17.gelu".into(),
                    preferred: counts(3, 0, 5),
                },
            ],
            kinds_dropped: 0,
        };
        assert_eq!(plan.off_neural_engine(), [("ios17.gelu", 3)]);
        assert_eq!(
            plan.line(),
            "7 of 12 operations planned for the Neural Engine, 0 GPU, 3 CPU, 0 unknown (2 without a \
             device), MLComputeUnitsAll; estimated cost 75.0 % Neural Engine, 0.0 % GPU, 25.0 % CPU"
        );
        let json = serde_json::to_value(CoremlPlacement::Planned(plan.clone())).unwrap();
        assert_eq!(json["status"], "planned");
        assert_eq!(json["preferred"]["neural_engine"], 7);
        assert_eq!(
            serde_json::from_value::<CoremlPlacement>(json).unwrap(),
            CoremlPlacement::Planned(plan)
        );
    }
}
