//! The receipt's record of a whisper arm's `cancel`: whether the request was
//! aborted, how long the abort took (signal to `whisper_full`'s return, as
//! the worker measured it), and the worker's memory at the next marker
//! (the request's `request_end`) against its level at `request_begin`.

use sampler::{Marker, Phase};
use serde::{Deserialize, Serialize};
use worker_contract::{CancelSpec, RequestResult, ResultBody};

/// What the arm's `cancel` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CancellationReport {
    /// The request the spec asked to abort.
    pub request: u64,
    /// When, after the request started, the abort was signalled (ms).
    pub after_ms: u64,
    /// True when whisper.cpp stopped at an abort check; false when the
    /// request finished first (its transcript is then an ordinary result),
    /// or never ran.
    pub cancelled: bool,
    /// The fixture the request was transcribing; `None` when no result arrived.
    pub fixture_id: Option<String>,
    /// From the abort signal to `whisper_full`'s return, in ns.
    pub abort_latency_ns: Option<u64>,
    /// `whisper_full`'s return code for the aborted call.
    pub code: Option<i32>,
    /// The request's whole time, start to return, in ns.
    pub request_ns: Option<u64>,
    /// Resident bytes at the request's `request_begin` marker (the pre-request level).
    pub resident_before_bytes: Option<u64>,
    /// Resident bytes at the next marker after the abort (`request_end`).
    pub resident_after_bytes: Option<u64>,
    /// `resident_after_bytes - resident_before_bytes`.
    pub resident_delta_bytes: Option<i64>,
    /// Footprint at `request_end` minus at `request_begin`, where the platform gives it.
    pub footprint_delta_bytes: Option<i64>,
}

fn delta(after: u64, before: u64) -> i64 {
    i64::try_from(after)
        .unwrap_or(i64::MAX)
        .saturating_sub(i64::try_from(before).unwrap_or(i64::MAX))
}

/// The report for `cancel`, from the arm's results and markers.
pub fn assemble(
    cancel: &CancelSpec,
    results: &[RequestResult],
    markers: &[Marker],
) -> CancellationReport {
    let marker = |phase: Phase| {
        markers
            .iter()
            .find(|m| m.phase == phase && m.request_id == Some(cancel.request))
    };
    let (begin, end) = (marker(Phase::RequestBegin), marker(Phase::RequestEnd));
    let result = results.iter().find(|r| r.request_id == cancel.request);
    let (cancelled, fixture_id, abort_latency_ns, code) = match result.map(|r| &r.body) {
        Some(ResultBody::Cancelled(c)) => (
            true,
            Some(c.fixture_id.clone()),
            Some(c.abort_latency_ns),
            Some(c.code),
        ),
        Some(ResultBody::Transcription(t)) => (false, Some(t.fixture_id.clone()), None, None),
        _ => (false, None, None, None),
    };
    let footprint_delta_bytes = match (
        begin.and_then(|m| m.memory.footprint_bytes),
        end.and_then(|m| m.memory.footprint_bytes),
    ) {
        (Some(b), Some(a)) => Some(delta(a, b)),
        _ => None,
    };
    CancellationReport {
        request: cancel.request,
        after_ms: cancel.after_ms,
        cancelled,
        fixture_id,
        abort_latency_ns,
        code,
        request_ns: result.map(|r| r.latency_ns),
        resident_before_bytes: begin.map(|m| m.memory.resident_bytes),
        resident_after_bytes: end.map(|m| m.memory.resident_bytes),
        resident_delta_bytes: begin
            .zip(end)
            .map(|(b, a)| delta(a.memory.resident_bytes, b.memory.resident_bytes)),
        footprint_delta_bytes,
    }
}
