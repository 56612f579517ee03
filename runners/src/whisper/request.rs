//! One measured request under the arm's request mode and idle policy: the
//! idle gap before it (with any release the policy makes there), speech
//! start, the audio as a file or at real-time pace, a reload that overlaps
//! the arriving audio when the policy released the engine, the decode, and
//! the timing that separates stop-to-final latency from compute.

use super::cancel;
use super::delivery;
use super::residency::{IdleStep, LoadRecipe, Residency};
use crate::session::WorkerSession;
use anyhow::Context;
use sampler::{Phase, clock};
use worker_contract::{RequestMode, RequestTiming};

/// Idle until `deadline_ns`, marking `release` whenever the policy releases.
pub fn idle(
    session: &mut WorkerSession,
    residency: &mut Residency,
    deadline_ns: u64,
) -> anyhow::Result<()> {
    while residency.idle_until(deadline_ns) == IdleStep::Released {
        session.mark(Phase::Release, None)?;
    }
    Ok(())
}

/// After a final text (or warmup): restart the idle clock, and release at
/// once under `load_on_speech`.
pub fn speech_ended(session: &mut WorkerSession, residency: &mut Residency) -> anyhow::Result<()> {
    residency.speech_ended();
    if residency.releases_after_final() {
        residency.release();
        session.mark(Phase::Release, None)?;
    }
    Ok(())
}

/// How one request is to run: how its audio arrives, the idle gap before
/// it (recorded in its timing) and, for the arm's cancelled request, when
/// to abort it.
pub struct Plan {
    /// A whole file or real-time chunks.
    pub mode: RequestMode,
    /// The idle gap before this request, in ms.
    pub gap_ms: u64,
    /// Abort the decode this many ms after it starts (the spec's `cancel`).
    pub cancel_after_ms: Option<u64>,
}

/// What one request produced.
pub struct Outcome {
    /// whisper.cpp's output, or the abort that stopped it.
    pub decoded: cancel::Outcome,
    /// The decode alone (`whisper_full` and reading the result back), in ns.
    pub compute_ns: u64,
    /// Speech start, stop, final and any reload.
    pub timing: RequestTiming,
}

/// Run one request whose `request_begin` was just marked: deliver `samples`
/// as `mode` says, reload meanwhile if the engine is released (marking
/// `reload`), then decode once the audio ended (aborting it as `plan` says).
pub fn run(
    session: &mut WorkerSession,
    residency: &mut Residency,
    recipe: &LoadRecipe,
    plan: Plan,
    samples: &[f32],
    log_lines: &mut Vec<String>,
) -> anyhow::Result<Outcome> {
    let Plan {
        mode,
        gap_ms,
        cancel_after_ms,
    } = plan;
    let speech_start_ns = clock::monotonic_ns();
    let mut reload = |session: &mut WorkerSession, residency: &mut Residency| {
        if residency.is_loaded() {
            return anyhow::Ok(None);
        }
        let t0 = clock::monotonic_ns();
        let loaded = recipe.load();
        let took = clock::monotonic_ns().saturating_sub(t0);
        super::forward_log(session, log_lines)?;
        residency.restore(loaded.context("reload at speech start")?);
        session.mark(Phase::Reload, None)?;
        Ok(Some(took))
    };
    let (buffer, chunks, chunk_ms, audio_end_ns, reload_ns);
    match mode {
        RequestMode::File => {
            reload_ns = reload(session, residency)?;
            buffer = None;
            chunks = 1;
            chunk_ms = 0;
            audio_end_ns = speech_start_ns;
        }
        RequestMode::Realtime { chunk_ms: ms } => {
            let (delivered, reloaded) =
                delivery::deliver(samples, ms, speech_start_ns, || reload(session, residency));
            reload_ns = reloaded?;
            let delivered = delivered?;
            chunks = delivered.chunks;
            chunk_ms = ms;
            audio_end_ns = delivered.audio_end_ns;
            buffer = Some(delivered.samples);
        }
    }
    let engine = residency
        .engine()
        .context("no engine loaded at the request (an idle policy bug)")?;
    let audio = buffer.as_deref().unwrap_or(samples);
    let t0 = clock::monotonic_ns();
    let decoded = match cancel_after_ms {
        Some(after_ms) => cancel::run(engine, audio, after_ms),
        None => engine.transcribe(audio).map(cancel::Outcome::Finished),
    };
    let final_ns = clock::monotonic_ns();
    let decoded = decoded?;
    Ok(Outcome {
        decoded,
        compute_ns: final_ns.saturating_sub(t0),
        timing: RequestTiming {
            mode: mode.name().to_string(),
            chunk_ms,
            chunks,
            gap_ms,
            speech_start_ns,
            audio_end_ns,
            final_ns,
            stop_to_final_ns: final_ns.saturating_sub(audio_end_ns),
            reload_ns,
        },
    })
}
