//! One block per speech arm saying how each request was asked for: voice
//! activity detection, the decoding policy, the request mode and the idle
//! policy. Two receipts whose memory differs because one decoded with beams,
//! streamed its audio or unloaded between requests say so here, side by side,
//! instead of leaving it to a reading of the spec.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use worker_contract::{ArmSpec, Decoding, IdlePolicy, RequestMode, Runtime, WorkerSpec};

/// Whether speech was detected before decoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VadPolicy {
    /// Off for every memqual arm: each request decodes its whole input.
    pub enabled: bool,
    /// How that is so for this runtime.
    pub how: String,
}

/// How an arm's requests were asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RequestPolicy {
    /// Voice activity detection.
    pub vad: VadPolicy,
    /// Greedy (with its best-of) or beam search (with its beam size).
    pub decoding: Decoding,
    /// Retries at higher temperatures when a decode is judged failed.
    pub temperature_fallback: bool,
    /// Timestamp tokens decoded (`no_timestamps = false`).
    pub timestamps: bool,
    /// Tokens per segment at most; `None` leaves the runtime's own limit.
    pub max_tokens: Option<u32>,
    /// The spoken language passed to the runtime.
    pub language: String,
    /// Encoder positions per window; `None` is the model's own (1500).
    pub audio_ctx: Option<u32>,
    /// The whole input at once, or delivered in real time in chunks.
    pub request_mode: RequestMode,
    /// Whether the model stays loaded between requests.
    pub idle_policy: IdlePolicy,
    /// Threads per request.
    pub threads: u32,
}

/// The policy of a speech arm's spec; `None` for other arms.
pub fn of(spec: &ArmSpec) -> Option<RequestPolicy> {
    let WorkerSpec::Whisper(w) = &spec.worker else {
        return None;
    };
    let how = match w.runtime {
        Runtime::WhisperCpp | Runtime::WhisperCppPatched => {
            "whisper.cpp's VAD is off: the worker sets whisper_full_params.vad = false"
        }
        Runtime::Ctranslate2 => "CTranslate2's Whisper generate has no VAD; none runs before it",
    };
    Some(RequestPolicy {
        vad: VadPolicy {
            enabled: false,
            how: how.into(),
        },
        decoding: w.decoding,
        temperature_fallback: w.temperature_fallback,
        timestamps: !w.no_timestamps,
        max_tokens: (w.max_tokens > 0).then_some(w.max_tokens),
        language: w.language.clone(),
        audio_ctx: (w.audio_ctx > 0).then_some(w.audio_ctx),
        request_mode: w.request_mode,
        idle_policy: w.idle_policy,
        threads: w.threads,
    })
}
