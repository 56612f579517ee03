//! The patched worker's arm set-up: the engine hooks its runs take, the load
//! plan fixed before the first load, and the start of the external encoder
//! after the decoder's context.
//!
//! Compiled only with the `whisper-patch` feature. It sits above the three
//! modules it joins: the engine ([`super::engine`], which owns the context
//! and calls out only through its hooks), the patch set's C API
//! ([`super::patch`]) and the external encoder ([`super::external_encoder`]).

use super::engine::{Engine, Hooks};
use super::external_encoder::{EncoderFailureHook, EncoderProcess, EncoderSlot, EncoderStart};
use super::patch::{LoadPlan, LoadPlanHook, linked_capabilities, linked_digest, set_plan, skipped};
use crate::session::WorkerSession;
use anyhow::Context;
use worker_contract::{Encoder, LogLevel, WhisperSpec};

/// The patched worker's engine hooks: the load plan before every load, the
/// external encoder's error after a failed request.
pub(super) const HOOKS: Hooks = Hooks(&[&LoadPlanHook, &EncoderFailureHook]);

/// The patched build's load plan for this arm (set before the first load).
pub(super) fn plan_load(spec: &WhisperSpec) -> anyhow::Result<Option<&'static EncoderSlot>> {
    let slot = (spec.encoder == Encoder::ExternalProcess).then(EncoderSlot::leak);
    let bounds = spec.state_bounds;
    // Core ML stands in for the external encoder when the arm requires the
    // loader with encoder = "coreml" (check_runnable made sure the build can).
    let coreml_encoder_only = spec.encoder == Encoder::Coreml
        && spec
            .requires
            .iter()
            .any(|r| r == "loader:external_encoder_only");
    set_plan(LoadPlan {
        external_encoder: slot.map(EncoderSlot::encode_hook),
        max_audio_ctx: bounds.map_or(0, |b| b.max_audio_ctx),
        max_batch: bounds.map_or(0, |b| b.max_batch),
        coreml_encoder_only,
        coreml_compute_units: spec.coreml_compute_units.unwrap_or_default(),
        encoder_only: false,
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    Ok(slot)
}

/// Start the encoder process (when the arm has one) and say what the patch did.
pub(super) fn start_external_encoder(
    spec: &WhisperSpec,
    slot: Option<&'static EncoderSlot>,
    engine: &Engine,
    session: &mut WorkerSession,
) -> anyhow::Result<(
    serde_json::Value,
    Option<worker_contract::ExternalEncoderProcess>,
)> {
    let (ctx, _) = engine.raw();
    // SAFETY: the engine's context is live.
    let (skipped_tensors, skipped_bytes) = unsafe { skipped(ctx) };
    // What the patch did; the state's prediction is in the settings of
    // every whisper.cpp worker (`predicted_state`).
    let bounds = spec.state_bounds;
    let mut report = serde_json::json!({
        "patch_digest": linked_digest(),
        "capabilities": linked_capabilities(),
        "encoder_tensors_discarded": skipped_tensors,
        "encoder_bytes_discarded": skipped_bytes,
        "state_bounds": bounds,
    });
    if let (Some(slot), Some(external)) = (slot, &spec.external_encoder) {
        let exe = std::env::current_exe().context("cannot find this worker's executable")?;
        let start = EncoderStart {
            model: external.model.clone(),
            // An encoder-only process is sized like the worker's bound.
            max_audio_ctx: match external.model.layout {
                worker_contract::ModelLayout::EncoderOnly => bounds.map_or(0, |b| b.max_audio_ctx),
                _ => 0,
            },
            fault: external.fault,
        };
        let starting = EncoderProcess::spawn(&exe, &start, external.timeout())?;
        let pid = starting.pid();
        session.log(
            LogLevel::Info,
            format!(
                "external encoder: started process {pid} (`{} --external-encoder`); it has {} s \
                 for its ready line and for each reply",
                exe.display(),
                external.timeout().as_secs()
            ),
        )?;
        // A process that never becomes ready fails the arm here, at load.
        let process = starting
            .ready(external.model.sha256.as_deref())
            .map_err(|e| anyhow::anyhow!(e))?;
        slot.fill(process);
        let identity = slot
            .identity()
            .context("the external encoder stopped as it started")?;
        session.log(
            LogLevel::Info,
            format!(
                "external encoder: process {pid} runs the native encoder of {} ({skipped_tensors} \
                 encoder tensors, {skipped_bytes} bytes, validated and discarded here)",
                external.model.path.display(),
            ),
        )?;
        report["external_encoder_fault"] = serde_json::json!(external.fault);
        return Ok((
            report,
            Some(worker_contract::ExternalEncoderProcess {
                pid,
                model: external.model.path.clone(),
                model_sha256: identity.model_sha256,
                layout: external.model.layout,
                max_audio_ctx: start.max_audio_ctx,
                memory: identity.memory,
                topology: identity.topology,
            }),
        ));
    }
    Ok((report, None))
}
