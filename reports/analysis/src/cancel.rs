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

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;
    use worker_contract::CancelledRequest;

    fn marker(phase: Phase, seq: u64, resident: u64, footprint: Option<u64>) -> Marker {
        Marker {
            phase,
            seq,
            request_id: Some(0),
            t_ns: seq * 1000,
            memory: TaskMemory {
                resident_bytes: resident,
                footprint_bytes: footprint,
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    #[test]
    fn an_aborted_request_reports_its_latency_and_the_memory_it_left() {
        let cancel = CancelSpec {
            request: 0,
            after_ms: 5,
        };
        let markers = [
            marker(Phase::RequestBegin, 4, 100 << 20, Some(90 << 20)),
            marker(Phase::RequestEnd, 5, 96 << 20, None),
        ];
        let results = [RequestResult {
            request_id: 0,
            latency_ns: 7_000_000,
            body: ResultBody::Cancelled(CancelledRequest {
                fixture_id: "s1".into(),
                repetition: 0,
                after_ms: 5,
                abort_latency_ns: 2_000_000,
                code: -6,
                audio_ms: 4000,
            }),
            timing: None,
        }];
        let r = assemble(&cancel, &results, &markers);
        assert!(r.cancelled);
        assert_eq!(r.fixture_id.as_deref(), Some("s1"));
        assert_eq!(
            (r.abort_latency_ns, r.code, r.request_ns),
            (Some(2_000_000), Some(-6), Some(7_000_000))
        );
        assert_eq!(r.resident_delta_bytes, Some(-(4 << 20)));
        // The footprint is compared only where both markers have it.
        assert_eq!(r.footprint_delta_bytes, None);

        // Nothing arrived for the request: nothing is claimed.
        let r = assemble(&cancel, &[], &markers[..1]);
        assert!(!r.cancelled);
        assert_eq!((r.fixture_id, r.resident_delta_bytes), (None, None));
    }
}
