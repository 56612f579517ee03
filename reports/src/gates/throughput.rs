//! `throughput`: decode tokens per second and real-time factor against
//! absolute bounds, on the warm requests (the first request where it is
//! the only one).
//!
//! A failure names the likely cause: the same model decoding slower than
//! its bound usually ran on a slower unit than configured (WhisperKit's
//! regression tests read 4 tokens/s or less as a silent fall back to the
//! CPU). An arm that decodes nothing fails: a throughput bound there is a
//! protocol mistake, never a pass.

use super::context::{Context, at_least, at_most, check, not_evaluated};
use super::evaluate::Judge;
use super::{Check, Outcome};
use crate::gate_spec::ThroughputGate;

impl Judge for ThroughputGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        throughput(ctx, self)
    }
}

/// What the arm was configured to run on, for the failure message.
fn configured(ctx: &Context) -> String {
    let Some(worker_contract::WorkerSpec::Whisper(w)) =
        ctx.arm.arm.spec.as_ref().map(|s| &s.worker)
    else {
        return "the configured unit".into();
    };
    let unit = if w.use_gpu {
        "a GPU backend"
    } else {
        "the CPU"
    };
    let encoder = serde_json::to_value(w.encoder)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{unit}, {} threads, encoder `{encoder}`", w.threads)
}

fn failed(key: &str, why: String) -> Check {
    Check {
        outcome: Outcome::Fail,
        note: why,
        ..check(key, "")
    }
}

fn throughput(ctx: &Context, g: &ThroughputGate) -> Vec<Check> {
    let keys = [
        g.min_tokens_per_s.map(|_| "min_tokens_per_s"),
        g.max_real_time_factor.map(|_| "max_real_time_factor"),
    ];
    let Some(t) = ctx
        .arm
        .arm
        .speech
        .as_ref()
        .and_then(|s| s.throughput.as_ref())
    else {
        // Fail closed: nothing decoded, nothing to judge (a calibration
        // arm, or a whisper arm without one transcription).
        return keys
            .into_iter()
            .flatten()
            .map(|key| {
                failed(
                    key,
                    format!(
                        "{key}: arm `{}` decoded nothing (no transcription), so its \
                         throughput cannot be judged",
                        ctx.arm.arm.id
                    ),
                )
            })
            .collect();
    };
    let Some((group, f)) = t.judged() else {
        return vec![failed("throughput", "no request was measured".into())];
    };
    let cause = || {
        format!(
            "; the likely cause is a slower compute unit than the one configured ({}): \
             a silent fall back to the CPU, fewer cores than threads, or a throttled host",
            configured(ctx)
        )
    };
    // A judged bound: its receipt field as evidence, its note, and on a
    // failure the likely cause.
    let judged = |mut c: Check, field: &str, note: String| {
        c.evidence = vec![ctx.arm.at(&format!("/speech/throughput/{group}/{field}"))];
        c.note = note;
        if c.outcome == Outcome::Fail {
            c.note.push_str(&cause());
        }
        c
    };
    let mut checks = Vec::new();
    if let Some(min) = g.min_tokens_per_s {
        let name = format!("{group} decode tokens per second");
        match f.tokens_per_s {
            Some(v) => checks.push(judged(
                at_least(check(name, "tokens/s"), v, min),
                "tokens_per_s",
                format!(
                    "{} tokens in {:.1} ms of decoding over {} requests",
                    f.tokens_decoded.unwrap_or(0),
                    f.decode_ns.unwrap_or(0) as f64 / 1e6,
                    f.requests
                ),
            )),
            // The runtime does not expose decode time: not judged, so the
            // arm cannot pass on it.
            None => checks.push(not_evaluated(
                name,
                "tokens/s",
                format!(
                    "min_tokens_per_s: decode tokens per second is unavailable for arm `{}` \
                     (its runtime does not expose {}), so the bound cannot be judged",
                    ctx.arm.arm.id,
                    if t.unavailable.is_empty() {
                        "decode time".to_string()
                    } else {
                        t.unavailable.join(", ")
                    }
                ),
            )),
        }
    }
    if let Some(max) = g.max_real_time_factor {
        let name = format!("{group} real-time factor");
        match f.real_time_factor {
            Some(v) => checks.push(judged(
                at_most(check(name, "ratio"), v, max),
                "real_time_factor",
                format!(
                    "{:.1} ms of processing for {} ms of audio over {} requests",
                    f.processing_ns as f64 / 1e6,
                    f.audio_ms,
                    f.requests
                ),
            )),
            None => checks.push(not_evaluated(
                name,
                "ratio",
                "max_real_time_factor: the requests carry no audio duration",
            )),
        }
    }
    checks
}
