//! The comparison of a whisper arm with its control, over two assembled
//! arms: exact parity of outputs, memory by phase, and the buffers
//! whisper.cpp logged.

use crate::receipt::{ArmReceipt, PhaseRow};
use crate::speech::{ControlComparison, ControlResults, PhaseDelta};
use sampler::Phase;

fn first_of(arm: &ArmReceipt, phase: Phase) -> Option<&PhaseRow> {
    arm.phases.iter().find(|p| p.phase == phase)
}

fn diff_opt(a: Option<u64>, b: Option<u64>) -> Option<i64> {
    Some(a? as i64 - b? as i64)
}

fn logged_state_bytes(arm: &ArmReceipt) -> Option<u64> {
    let rt = arm.speech.as_ref()?.runtime.as_ref()?;
    // A runtime that logs no states (CTranslate2) has no logged figure, not 0.
    (!rt.topology.states.is_empty()).then(|| {
        rt.topology
            .states
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.total_bytes()))
    })
}

fn logged_model_bytes(arm: &ArmReceipt) -> Option<u64> {
    let rt = arm.speech.as_ref()?.runtime.as_ref()?;
    (!rt.topology.model_buffers.is_empty()).then(|| {
        rt.topology
            .model_buffers
            .iter()
            .fold(0u64, |sum, (_, s)| sum.saturating_add(s.bytes))
    })
}

/// Compare `arm` with `control`: exact parity of outputs and memory by phase.
pub fn compare(
    arm: &ArmReceipt,
    control: &ArmReceipt,
    results: &ControlResults,
) -> ControlComparison {
    let phases = [
        Phase::ProcessStart,
        Phase::ModelLoaded,
        Phase::StateReady,
        Phase::WarmupDone,
        Phase::IdleEnd,
        Phase::TeardownDone,
    ];
    let phase_deltas = phases
        .iter()
        .filter_map(|&phase| {
            let (a, c) = (first_of(arm, phase)?, first_of(control, phase)?);
            Some(PhaseDelta {
                phase,
                resident_delta_bytes: a.memory.resident_bytes as i64
                    - c.memory.resident_bytes as i64,
                resident_peak_delta_bytes: diff_opt(
                    a.memory.resident_peak_bytes,
                    c.memory.resident_peak_bytes,
                ),
                footprint_delta_bytes: diff_opt(a.memory.footprint_bytes, c.memory.footprint_bytes),
            })
        })
        .collect();
    ControlComparison {
        arm: arm.id.clone(),
        control: control.id.clone(),
        parity: quality::parity(&results.control, &results.arm).map_err(|e| e.to_string()),
        phase_deltas,
        logged_state_bytes_delta: diff_opt(logged_state_bytes(arm), logged_state_bytes(control)),
        logged_model_bytes_delta: diff_opt(logged_model_bytes(arm), logged_model_bytes(control)),
    }
}
