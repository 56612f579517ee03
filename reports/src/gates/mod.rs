//! Gates: the promotion decision, as pure functions over a receipt.
//!
//! A protocol declares gates per arm ([`ArmGates`], recorded in `run.json`);
//! [`evaluate`] judges each against the receipt's measurements. Every gate
//! is made of checks; each check carries its threshold, the measured value,
//! the control's value and evidence pointers (`receipt.json` + a JSON
//! Pointer to the field), and is PASS, FAIL or NOT_EVALUATED.
//!
//! Rules:
//! - A gate fails if any check fails; it is NOT_EVALUATED if no check
//!   failed but one could not be evaluated (or it has no check); else PASS.
//! - Every arm with gates that is expected to pass also gets a `validity`
//!   gate with default parameters unless it declares one: a measurement is
//!   never judged without being shown sound.
//! - An arm is PASS only if every gate passed and at least one gate was
//!   evaluated; FAIL if any gate failed; else NOT_EVALUATED (it cannot pass).
//! - The run verdict is the conjunction over the arms marked `promote`;
//!   when none is marked, over every arm with gates. It is PASS only if
//!   every one of those arms is PASS.

mod context;
mod evaluate;
mod fail_closed;
mod idle;
mod latency;
pub(crate) mod memory;
mod overhead;
mod parity;
mod quality;
mod stability;
mod throughput;
mod validity;

pub use crate::gate_spec::StabilityGate;
pub use crate::gate_spec::{
    ArmGates, Expect, FailClosedGate, GateSpec, IdleResidencyGate, LatencyGate, MemoryField,
    MemoryGate, OverheadGate, ParityGate, QualityGate, ThroughputGate, ValidityGate,
};
pub use crate::verdict::{
    ArmVerdict, Check, Evidence, GateReport, GateResult, JudgedArms, Outcome,
};
pub use evaluate::evaluate;
/// What a memory gate reads, for pages that draw it: the field's name, its
/// value in a snapshot, and `peak` resolved for an arm's phase.
pub use memory::{
    field_name as memory_field_name, read_field as memory_field_value,
    resolve_field as resolve_memory_field,
};

#[cfg(test)]
mod tests;
