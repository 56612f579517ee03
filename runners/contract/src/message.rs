//! Messages a worker writes to fd 3, one JSON object per line.

use crate::{CoremlPlacement, RequestTiming, RuntimeReport, TranscriptionResult};
use sampler::{Marker, TaskMemory};
use serde::{Deserialize, Serialize};

/// One line on the worker's message channel, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    /// The first message: the worker's name, version, pid and capabilities.
    Hello(Hello),
    /// A phase boundary with the worker's own memory snapshot at that moment.
    Marker(Marker),
    /// A line for the arm's `worker.log` (whisper.cpp's own log lines included).
    Log(LogMessage),
    /// The outcome of one measured request, after its `request_end` marker.
    Result(RequestResult),
    /// A failure the worker reports before it exits non-zero.
    Error(WorkerError),
    /// The whisper worker's runtime identity and topology, once, after `state_ready`.
    Runtime(Box<RuntimeReport>),
    /// The worker's memory `settle_ms` after a `request_end` (soak only).
    Settled(Settled),
    /// Where Core ML plans to run the encoder: at most once, after
    /// `teardown_done` and before `bye` (the plan loads the model again).
    Placement(CoremlPlacement),
    /// The last message, after `teardown_done`: the worker finished its protocol.
    Bye(Bye),
}

impl WorkerMessage {
    /// The `type` tags the contract knows.
    pub const TYPES: [&'static str; 9] = [
        "hello",
        "marker",
        "log",
        "result",
        "error",
        "runtime",
        "settled",
        "placement",
        "bye",
    ];

    /// The message's `type` tag on the wire (one of [`Self::TYPES`]).
    pub fn type_name(&self) -> &'static str {
        match self {
            WorkerMessage::Hello(_) => "hello",
            WorkerMessage::Marker(_) => "marker",
            WorkerMessage::Log(_) => "log",
            WorkerMessage::Result(_) => "result",
            WorkerMessage::Error(_) => "error",
            WorkerMessage::Runtime(_) => "runtime",
            WorkerMessage::Settled(_) => "settled",
            WorkerMessage::Placement(_) => "placement",
            WorkerMessage::Bye(_) => "bye",
        }
    }
}

/// The first message: who the worker is and what it can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hello {
    /// The contract version the worker speaks; the harness rejects any other.
    pub contract_version: u32,
    /// The worker executable's name (`memqual-calibrate`, `memqual-whisper`).
    pub worker: String,
    /// The worker's package version (`CARGO_PKG_VERSION`, memqual's workspace version).
    pub version: String,
    /// The worker's process id.
    pub pid: u32,
    /// Platform the worker samples on (`linux`, `macos`).
    pub platform: String,
    /// What this worker build can run (`plateau`, `decoding:beam`,
    /// `encoder:coreml`, ...); a whisper arm's `requires` must be among them.
    pub capabilities: Vec<String>,
}

/// Severity of a `log` message; the harness writes it upper-cased
/// (`WARN`) after the timestamp of the line in the arm's `worker.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Detail for debugging (whisper.cpp's debug and trace lines land here).
    Debug,
    /// Progress worth keeping (warmup timings, what was loaded).
    Info,
    /// Something that may weaken the measurement (a spike that overlapped
    /// a sampler tick) or a warning of whisper.cpp's.
    Warn,
    /// An error line (whisper.cpp's, for instance); the arm's failure is
    /// reported with an `error` message, not a log line.
    Error,
}

/// A free-form line for the arm's `worker.log`; it does not change the
/// arm's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogMessage {
    /// How severe the line is.
    pub level: LogLevel,
    /// The text; the harness writes it as one line (newlines become spaces).
    pub message: String,
}

/// The outcome of one measured request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestResult {
    /// The 0-based measured request, as on its `request_begin` / `request_end` markers.
    pub request_id: u64,
    /// Wall time of the request's work in nanoseconds.
    pub latency_ns: u64,
    /// What the request produced, by worker kind.
    pub body: ResultBody,
    /// Whisper requests: speech start, stop, final text and any reload, so
    /// stop-to-final latency stands apart from `latency_ns` (the compute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<RequestTiming>,
}

/// Worker-specific result payload, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResultBody {
    /// From `memqual-calibrate`: the bytes its patterns held.
    Calibration(CalibrationResult),
    /// From `memqual-whisper`: the transcript and its tokens (boxed: every
    /// result of a soak is held while its receipt is assembled, and inline
    /// the transcript made each calibration result four times its size).
    Transcription(Box<TranscriptionResult>),
    /// From `memqual-whisper`: a request aborted by the spec's `cancel`.
    Cancelled(crate::CancelledRequest),
}

/// What the calibration worker held and did during one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationResult {
    /// Bytes the worker holds (touched) at the end of the request, excluding the spike.
    pub held_bytes: u64,
    /// Bytes leaked by this request.
    pub leaked_bytes: u64,
    /// Bytes of the spike in this request (0 if none).
    pub spike_bytes: u64,
    /// Monotonic time the spike's block was fully resident, and when it was freed.
    pub spike_resident_ns: Option<u64>,
    /// Monotonic time the spike's block was freed (unmapped); `None` when
    /// no spike ran in this request.
    pub spike_freed_ns: Option<u64>,
    /// Monotonic time the spike's block began to be mapped and touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spike_started_ns: Option<u64>,
    /// `spike.between_ticks` only: whether the spike was freed before the
    /// next external-sampler tick was due (it lay between two ticks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spike_between_ticks: Option<bool>,
}

impl CalibrationResult {
    /// A request that held `held_bytes` and had leaked `leaked_bytes` so
    /// far, with no spike.
    pub fn holding(held_bytes: u64, leaked_bytes: u64) -> Self {
        CalibrationResult {
            held_bytes,
            leaked_bytes,
            spike_bytes: 0,
            spike_resident_ns: None,
            spike_freed_ns: None,
            spike_started_ns: None,
            spike_between_ticks: None,
        }
    }
}

/// A snapshot of the worker's own memory after the settle period that
/// follows request `request_id`'s `request_end` (no peak is reset: the next
/// `request_begin` marker's peak still covers the wait).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// The measured request whose `request_end` the wait followed.
    pub request_id: u64,
    /// The wait the arm spec asked for.
    pub settle_ms: u64,
    /// Monotonic time of the snapshot (the clock of the markers).
    pub t_ns: u64,
    /// The worker's own memory at `t_ns`, read as for a marker.
    pub memory: TaskMemory,
}

/// A failure the worker reports before it exits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerError {
    /// What failed, with its causes; the harness adds it to the arm's failure reasons.
    pub message: String,
}

/// The last message of a worker that finished its protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bye {
    /// How many measured requests the worker ran.
    pub requests: u64,
}

/// Why a line from a worker could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The line is not JSON at all.
    #[error("not valid JSON ({reason}): {excerpt}")]
    BadJson {
        /// serde_json's message, with the line's column.
        reason: String,
        /// The line, cut to its first 160 bytes (on a char boundary, `…`
        /// appended) when it is longer.
        excerpt: String,
    },
    /// JSON without a string `type` field (not an object, no `type`, or a
    /// `type` that is not a string).
    #[error("no string `type` field: {excerpt}")]
    MissingType {
        /// The line, cut to its first 160 bytes (on a char boundary, `…`
        /// appended) when it is longer.
        excerpt: String,
    },
    /// A `type` that is not one of [`WorkerMessage::TYPES`].
    #[error(
        "unknown message type `{type_name}` (known: hello, marker, log, result, error, runtime, settled, bye)"
    )]
    UnknownType {
        /// The `type` the line carried.
        type_name: String,
    },
    /// A known `type` whose fields do not fit it (one missing, or of the wrong type).
    #[error("malformed `{type_name}` message ({reason}): {excerpt}")]
    Malformed {
        /// The line's (known) `type`.
        type_name: String,
        /// serde_json's message: which field is missing or wrong.
        reason: String,
        /// The line, cut to its first 160 bytes (on a char boundary, `…`
        /// appended) when it is longer.
        excerpt: String,
    },
}

fn excerpt(line: &str) -> String {
    const MAX: usize = 160;
    if line.len() <= MAX {
        return line.to_string();
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// Decode one line strictly: JSON, a known `type`, and that type's fields.
pub fn decode_line(line: &str) -> Result<WorkerMessage, DecodeError> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| DecodeError::BadJson {
            reason: e.to_string(),
            excerpt: excerpt(line),
        })?;
    let type_name = value
        .get("type")
        .and_then(|t| t.as_str())
        .ok_or_else(|| DecodeError::MissingType {
            excerpt: excerpt(line),
        })?
        .to_string();
    if !WorkerMessage::TYPES.contains(&type_name.as_str()) {
        return Err(DecodeError::UnknownType { type_name });
    }
    serde_json::from_value(value).map_err(|e| DecodeError::Malformed {
        type_name,
        reason: e.to_string(),
        excerpt: excerpt(line),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_and_is_tagged() {
        let msgs = vec![
            WorkerMessage::Hello(Hello {
                contract_version: 1,
                worker: "memqual-calibrate".into(),
                version: "0.1.0".into(),
                pid: 42,
                platform: "linux".into(),
                capabilities: vec!["plateau".into()],
            }),
            WorkerMessage::Log(LogMessage {
                level: LogLevel::Warn,
                message: "hi".into(),
            }),
            WorkerMessage::Result(RequestResult {
                request_id: 3,
                latency_ns: 10,
                body: ResultBody::Calibration(CalibrationResult::holding(1, 2)),
                timing: None,
            }),
            WorkerMessage::Result(RequestResult {
                request_id: 4,
                latency_ns: 10,
                body: ResultBody::Calibration(CalibrationResult::holding(1, 2)),
                timing: Some(crate::RequestTiming {
                    mode: "realtime".into(),
                    chunk_ms: 100,
                    chunks: 12,
                    gap_ms: 2000,
                    speech_start_ns: 1,
                    audio_end_ns: 1_200_000_001,
                    final_ns: 1_300_000_001,
                    stop_to_final_ns: 100_000_000,
                    reload_ns: Some(90_000_000),
                }),
            }),
            WorkerMessage::Error(WorkerError {
                message: "x".into(),
            }),
            WorkerMessage::Settled(Settled {
                request_id: 3,
                settle_ms: 500,
                t_ns: 77,
                memory: TaskMemory {
                    resident_bytes: 4096,
                    ..TaskMemory::default()
                },
            }),
            WorkerMessage::Bye(Bye { requests: 3 }),
        ];
        for m in msgs {
            let line = serde_json::to_string(&m).unwrap();
            assert!(
                line.starts_with(&format!("{{\"type\":\"{}\"", m.type_name())),
                "{line}"
            );
            assert_eq!(decode_line(&line).unwrap(), m);
        }
    }

    #[test]
    fn bad_json_unknown_type_and_malformed_are_distinct() {
        assert!(matches!(
            decode_line("{not json"),
            Err(DecodeError::BadJson { .. })
        ));
        assert!(matches!(
            decode_line("{\"kind\":\"hello\"}"),
            Err(DecodeError::MissingType { .. })
        ));
        assert_eq!(
            decode_line("{\"type\":\"telemetry\"}").unwrap_err(),
            DecodeError::UnknownType {
                type_name: "telemetry".into()
            }
        );
        let err = decode_line("{\"type\":\"bye\"}").unwrap_err();
        assert!(
            matches!(&err, DecodeError::Malformed { type_name, reason, .. } if type_name == "bye" && reason.contains("requests")),
            "{err:?}"
        );
    }

    #[test]
    fn long_lines_are_cut_in_errors_on_a_char_boundary() {
        let line = format!("{{\"type\":\"bye\",\"x\":\"{}\"", "é".repeat(200));
        let err = decode_line(&line).unwrap_err().to_string();
        assert!(err.ends_with('…'), "{err}");
        assert!(err.len() < 400);
    }
}
