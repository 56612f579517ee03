//! How requests arrive and what the worker keeps loaded between them: the
//! request mode (a whole file, or audio at real-time pace in chunks), the
//! idle-residency policy, the idle gaps before requests, and the timing of
//! one request from the first audio to the final text.

use crate::bounds::{CHUNK_MS, FieldError, GAPS, MILLIS};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a request's audio reaches the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum RequestMode {
    /// The whole fixture at once (the default): the audio has already ended
    /// when the request begins.
    #[default]
    File,
    /// The fixture's audio delivered at real-time pace in chunks, as a person
    /// speaking: chunk k becomes available `(k + 1) × chunk_ms` after speech
    /// starts. The worker buffers the chunks and runs `whisper_full` on the
    /// whole buffer once the last chunk arrived (whisper.cpp decodes whole
    /// windows, not a stream), so decoding starts at the stop.
    Realtime {
        /// Milliseconds of audio per chunk (10 to 1000).
        #[schemars(range(min = CHUNK_MS.min, max = CHUNK_MS.max))]
        chunk_ms: u32,
    },
}

impl RequestMode {
    /// True for the default, whole-file mode.
    pub fn is_file(&self) -> bool {
        *self == RequestMode::File
    }

    /// The mode's name as a protocol writes it (`file`, `realtime`).
    pub fn name(&self) -> &'static str {
        match self {
            RequestMode::File => "file",
            RequestMode::Realtime { .. } => "realtime",
        }
    }
}

/// What the worker keeps loaded while no one speaks (seed 000 §5.7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum IdlePolicy {
    /// Load once and keep the context and states until teardown (the default).
    #[default]
    Resident,
    /// Nothing loaded while idle: after warmup, and after each request's
    /// final text, the context and states are freed (`release`); they are
    /// created again when speech starts, while the audio still arrives
    /// (`reload`, inside the request).
    LoadOnSpeech,
    /// Stay loaded; free the context and states once `after_ms` passed
    /// without speech (`release`), and create them again at the next
    /// speech start (`reload`).
    UnloadAfterIdle {
        /// Milliseconds without speech before the release (at most an hour).
        #[schemars(range(min = MILLIS.min, max = MILLIS.max))]
        after_ms: u64,
    },
}

impl IdlePolicy {
    /// True for the default, `resident`.
    pub fn is_resident(&self) -> bool {
        *self == IdlePolicy::Resident
    }

    /// The policy's name as a protocol writes it.
    pub fn name(&self) -> &'static str {
        match self {
            IdlePolicy::Resident => "resident",
            IdlePolicy::LoadOnSpeech => "load_on_speech",
            IdlePolicy::UnloadAfterIdle { .. } => "unload_after_idle",
        }
    }
}

/// Check the real-time options of a whisper spec; the error names the key
/// as a protocol's `[arm.whisper]` spells it.
pub fn validate(
    mode: &RequestMode,
    policy: &IdlePolicy,
    gaps_ms: &[u64],
) -> Result<(), FieldError> {
    if let RequestMode::Realtime { chunk_ms } = mode {
        CHUNK_MS.check("chunk_ms", u64::from(*chunk_ms))?;
    }
    if let IdlePolicy::UnloadAfterIdle { after_ms } = policy {
        MILLIS.check("idle_policy.after_ms", *after_ms)?;
    }
    GAPS.check("gaps_ms", gaps_ms.len() as u64)?;
    for (i, g) in gaps_ms.iter().enumerate() {
        MILLIS.check(&format!("gaps_ms[{i}]"), *g)?;
    }
    Ok(())
}

/// The idle gap before measured request `request_id` under the cycled
/// schedule `gaps_ms` (0 without a schedule).
pub fn gap_before(gaps_ms: &[u64], request_id: u64) -> u64 {
    if gaps_ms.is_empty() {
        return 0;
    }
    gaps_ms[(request_id % gaps_ms.len() as u64) as usize]
}

/// When one request's audio started and ended and when its final text came,
/// on the markers' monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestTiming {
    /// `file` or `realtime`.
    pub mode: String,
    /// Milliseconds per chunk (real-time mode; 0 for a file).
    pub chunk_ms: u32,
    /// Chunks delivered (1 for a file).
    pub chunks: u32,
    /// The idle gap before the request, in ms (the arm's `gaps` schedule).
    pub gap_ms: u64,
    /// Speech start: the request's first audio (its `request_begin`).
    pub speech_start_ns: u64,
    /// The stop: when the last chunk was delivered (for a file, the speech start).
    pub audio_end_ns: u64,
    /// The final text was read back.
    pub final_ns: u64,
    /// From the stop to the final text: what the user waits for. It includes
    /// whatever of a reload was not done by the stop.
    pub stop_to_final_ns: u64,
    /// Creating the context and states again at speech start (`reload`);
    /// `None` when they were loaded already.
    pub reload_ns: Option<u64>,
}
