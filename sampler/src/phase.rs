//! The measurement phases and their one legal order (seed 000 §4.3).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in a worker's life at which it records a marker.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Worker started, before anything is loaded.
    ProcessStart,
    /// Model weights loaded (the model-global context exists).
    ModelLoaded,
    /// Per-request state (and any sidecar such as Core ML) created.
    StateReady,
    /// Warmup requests done; first specialization paid.
    WarmupDone,
    /// Immediately before a measured request.
    RequestBegin,
    /// Immediately after a measured request's final result.
    RequestEnd,
    /// An idle-residency policy freed the context and states (between requests).
    Release,
    /// Context and states created again at speech start, inside a request
    /// (after its `request_begin`, while its audio still arrives).
    Reload,
    /// After the idle interval that follows the requests.
    IdleEnd,
    /// After explicit state and context teardown.
    TeardownDone,
}

impl Phase {
    /// Every phase a complete worker emits, in order (requests may repeat);
    /// [`Phase::POLICY`] phases come on top, only under an idle policy.
    pub const ALL: [Phase; 8] = [
        Phase::ProcessStart,
        Phase::ModelLoaded,
        Phase::StateReady,
        Phase::WarmupDone,
        Phase::RequestBegin,
        Phase::RequestEnd,
        Phase::IdleEnd,
        Phase::TeardownDone,
    ];

    /// The phases only an idle-residency policy emits (never required).
    pub const POLICY: [Phase; 2] = [Phase::Release, Phase::Reload];

    /// Every phase there is: [`Phase::ALL`] and [`Phase::POLICY`].
    pub const EVERY: [Phase; 10] = [
        Phase::ProcessStart,
        Phase::ModelLoaded,
        Phase::StateReady,
        Phase::WarmupDone,
        Phase::RequestBegin,
        Phase::RequestEnd,
        Phase::Release,
        Phase::Reload,
        Phase::IdleEnd,
        Phase::TeardownDone,
    ];

    /// The phase's snake_case name, as serialized and displayed.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ProcessStart => "process_start",
            Phase::ModelLoaded => "model_loaded",
            Phase::StateReady => "state_ready",
            Phase::WarmupDone => "warmup_done",
            Phase::RequestBegin => "request_begin",
            Phase::RequestEnd => "request_end",
            Phase::Release => "release",
            Phase::Reload => "reload",
            Phase::IdleEnd => "idle_end",
            Phase::TeardownDone => "teardown_done",
        }
    }

    /// Whether markers of this phase carry a request id.
    pub fn is_request(self) -> bool {
        matches!(self, Phase::RequestBegin | Phase::RequestEnd)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A marker that breaks the phase contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhaseError {
    /// The marker's sequence number is not the next one.
    #[error("marker seq {got} out of sequence: expected seq {expected}")]
    Sequence {
        /// The sequence number the next marker must carry.
        expected: u64,
        /// The sequence number it carried.
        got: u64,
    },
    /// The phase may not follow the previous one.
    #[error("phase `{got}` out of order: expected {expected}")]
    Order {
        /// The phases allowed here, as text (or "nothing after teardown_done").
        expected: String,
        /// The phase the marker carried.
        got: Phase,
    },
    /// A request phase came without a request id.
    #[error("phase `{phase}` needs a request id")]
    MissingRequestId {
        /// `request_begin` or `request_end`.
        phase: Phase,
    },
    /// A phase outside a request carried a request id.
    #[error("phase `{phase}` must not carry a request id (got {request_id})")]
    UnexpectedRequestId {
        /// The phase, which is not a request phase.
        phase: Phase,
        /// The request id it carried.
        request_id: u64,
    },
    /// A `request_end` names a different request than the open `request_begin`.
    #[error("request_end for request {got} but request {open} is open")]
    RequestMismatch {
        /// The id of the open request.
        open: u64,
        /// The id the `request_end` carried.
        got: u64,
    },
    /// A `request_begin` id is not greater than the previous request's.
    #[error("request id {got} does not increase (previous request was {previous})")]
    RequestIdNotIncreasing {
        /// The id of the previous `request_begin`.
        previous: u64,
        /// The id this `request_begin` carried.
        got: u64,
    },
}

/// Checks markers against the phase order:
/// `process_start, model_loaded, state_ready, warmup_done,
/// (request_begin, request_end)*, idle_end, teardown_done`,
/// with sequence numbers 0, 1, 2, … and increasing request ids. Under an
/// idle policy a `release` may follow `warmup_done` or a `request_end`
/// (once: nothing is released twice), and after a release the next request
/// must `reload` between its `request_begin` and `request_end`.
#[derive(Debug, Clone, Default)]
pub struct PhaseTracker {
    next_seq: u64,
    last: Option<Phase>,
    open_request: Option<u64>,
    last_request: Option<u64>,
    requests_done: u64,
    /// A `release` came and no `reload` since: the context is gone.
    released: bool,
    releases: u64,
    reloads: u64,
}

impl PhaseTracker {
    /// A tracker expecting `process_start` with sequence number 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The phases allowed after the last accepted one.
    pub fn expected(&self) -> &'static [Phase] {
        match self.last {
            None => &[Phase::ProcessStart],
            Some(Phase::ProcessStart) => &[Phase::ModelLoaded],
            Some(Phase::ModelLoaded) => &[Phase::StateReady],
            Some(Phase::StateReady) => &[Phase::WarmupDone],
            Some(Phase::WarmupDone) | Some(Phase::RequestEnd) if !self.released => {
                &[Phase::RequestBegin, Phase::Release, Phase::IdleEnd]
            }
            Some(Phase::WarmupDone) | Some(Phase::RequestEnd) | Some(Phase::Release) => {
                &[Phase::RequestBegin, Phase::IdleEnd]
            }
            Some(Phase::RequestBegin) if self.released => &[Phase::Reload],
            Some(Phase::RequestBegin) | Some(Phase::Reload) => &[Phase::RequestEnd],
            Some(Phase::IdleEnd) => &[Phase::TeardownDone],
            Some(Phase::TeardownDone) => &[],
        }
    }

    /// Accept the next marker or say exactly what is wrong with it.
    pub fn accept(
        &mut self,
        seq: u64,
        phase: Phase,
        request_id: Option<u64>,
    ) -> Result<(), PhaseError> {
        if seq != self.next_seq {
            return Err(PhaseError::Sequence {
                expected: self.next_seq,
                got: seq,
            });
        }
        let expected = self.expected();
        if !expected.contains(&phase) {
            let expected = if expected.is_empty() {
                "nothing after teardown_done".to_string()
            } else {
                expected
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            };
            return Err(PhaseError::Order {
                expected,
                got: phase,
            });
        }
        match (phase.is_request(), request_id) {
            (true, None) => return Err(PhaseError::MissingRequestId { phase }),
            (false, Some(id)) => {
                return Err(PhaseError::UnexpectedRequestId {
                    phase,
                    request_id: id,
                });
            }
            _ => {}
        }
        if let Some(id) = request_id {
            if phase == Phase::RequestBegin {
                if let Some(previous) = self.last_request
                    && id <= previous
                {
                    return Err(PhaseError::RequestIdNotIncreasing { previous, got: id });
                }
                self.open_request = Some(id);
                self.last_request = Some(id);
            } else {
                let open = self.open_request.unwrap_or(id);
                if open != id {
                    return Err(PhaseError::RequestMismatch { open, got: id });
                }
                self.open_request = None;
                self.requests_done += 1;
            }
        }
        match phase {
            Phase::Release => {
                self.released = true;
                self.releases += 1;
            }
            Phase::Reload => {
                self.released = false;
                self.reloads += 1;
            }
            _ => {}
        }
        self.last = Some(phase);
        self.next_seq += 1;
        Ok(())
    }

    /// `release` markers accepted so far.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// `reload` markers accepted so far.
    pub fn reloads(&self) -> u64 {
        self.reloads
    }

    /// True between a `release` and the next `reload`.
    pub fn is_released(&self) -> bool {
        self.released
    }

    /// True once `teardown_done` has been accepted.
    pub fn is_complete(&self) -> bool {
        self.last == Some(Phase::TeardownDone)
    }

    /// The last accepted phase; `None` before the first marker.
    pub fn last_phase(&self) -> Option<Phase> {
        self.last
    }

    /// Requests closed by an accepted `request_end`.
    pub fn requests_done(&self) -> u64 {
        self.requests_done
    }

    /// The id of the request begun but not yet ended; `None` between requests.
    pub fn open_request(&self) -> Option<u64> {
        self.open_request
    }

    /// The id of the most recent `request_begin`, if any.
    pub fn last_request(&self) -> Option<u64> {
        self.last_request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut PhaseTracker, seq: u64, p: Phase, r: Option<u64>) -> Result<(), PhaseError> {
        t.accept(seq, p, r)
    }

    #[test]
    fn full_sequence_with_two_requests_is_accepted() {
        let mut t = PhaseTracker::new();
        let seq = [
            (Phase::ProcessStart, None),
            (Phase::ModelLoaded, None),
            (Phase::StateReady, None),
            (Phase::WarmupDone, None),
            (Phase::RequestBegin, Some(0)),
            (Phase::RequestEnd, Some(0)),
            (Phase::RequestBegin, Some(1)),
            (Phase::RequestEnd, Some(1)),
            (Phase::IdleEnd, None),
            (Phase::TeardownDone, None),
        ];
        for (i, (p, r)) in seq.into_iter().enumerate() {
            feed(&mut t, i as u64, p, r).unwrap();
        }
        assert!(t.is_complete());
        assert_eq!(t.requests_done(), 2);
        assert_eq!(t.expected(), &[] as &[Phase]);
    }

    #[test]
    fn skipped_phase_is_rejected_with_the_expected_one_named() {
        let mut t = PhaseTracker::new();
        feed(&mut t, 0, Phase::ProcessStart, None).unwrap();
        let err = feed(&mut t, 1, Phase::StateReady, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "phase `state_ready` out of order: expected `model_loaded`"
        );
        assert!(!t.is_complete());
    }

    #[test]
    fn sequence_gap_is_rejected() {
        let mut t = PhaseTracker::new();
        feed(&mut t, 0, Phase::ProcessStart, None).unwrap();
        assert_eq!(
            feed(&mut t, 2, Phase::ModelLoaded, None).unwrap_err(),
            PhaseError::Sequence {
                expected: 1,
                got: 2
            }
        );
    }

    #[test]
    fn request_ids_must_pair_and_increase() {
        let mut t = PhaseTracker::new();
        for (i, p) in [
            Phase::ProcessStart,
            Phase::ModelLoaded,
            Phase::StateReady,
            Phase::WarmupDone,
        ]
        .into_iter()
        .enumerate()
        {
            feed(&mut t, i as u64, p, None).unwrap();
        }
        assert_eq!(
            feed(&mut t, 4, Phase::RequestBegin, None).unwrap_err(),
            PhaseError::MissingRequestId {
                phase: Phase::RequestBegin
            }
        );
        feed(&mut t, 4, Phase::RequestBegin, Some(5)).unwrap();
        assert_eq!(t.open_request(), Some(5));
        assert_eq!(
            feed(&mut t, 5, Phase::RequestEnd, Some(6)).unwrap_err(),
            PhaseError::RequestMismatch { open: 5, got: 6 }
        );
        feed(&mut t, 5, Phase::RequestEnd, Some(5)).unwrap();
        assert_eq!(
            feed(&mut t, 6, Phase::RequestBegin, Some(5)).unwrap_err(),
            PhaseError::RequestIdNotIncreasing {
                previous: 5,
                got: 5
            }
        );
        assert_eq!(
            feed(&mut t, 6, Phase::IdleEnd, Some(1)).unwrap_err(),
            PhaseError::UnexpectedRequestId {
                phase: Phase::IdleEnd,
                request_id: 1
            }
        );
    }

    #[test]
    fn nothing_is_accepted_after_teardown() {
        let mut t = PhaseTracker::new();
        let phases = [
            Phase::ProcessStart,
            Phase::ModelLoaded,
            Phase::StateReady,
            Phase::WarmupDone,
            Phase::IdleEnd,
            Phase::TeardownDone,
        ];
        for (i, p) in phases.into_iter().enumerate() {
            feed(&mut t, i as u64, p, None).unwrap();
        }
        let err = feed(&mut t, 6, Phase::ProcessStart, None).unwrap_err();
        assert!(
            err.to_string().contains("nothing after teardown_done"),
            "{err}"
        );
    }

    fn accept_all(t: &mut PhaseTracker, phases: &[(Phase, Option<u64>)]) -> Result<(), PhaseError> {
        for (p, r) in phases {
            let seq = t.next_seq;
            t.accept(seq, *p, *r)?;
        }
        Ok(())
    }

    const START: [(Phase, Option<u64>); 4] = [
        (Phase::ProcessStart, None),
        (Phase::ModelLoaded, None),
        (Phase::StateReady, None),
        (Phase::WarmupDone, None),
    ];

    #[test]
    fn a_release_must_be_followed_by_a_reload_inside_the_next_request() {
        // load_on_speech: release after warmup and after every final.
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        accept_all(
            &mut t,
            &[
                (Phase::Release, None),
                (Phase::RequestBegin, Some(0)),
                (Phase::Reload, None),
                (Phase::RequestEnd, Some(0)),
                (Phase::Release, None),
                (Phase::IdleEnd, None),
                (Phase::TeardownDone, None),
            ],
        )
        .unwrap();
        assert_eq!((t.releases(), t.reloads()), (2, 1));
        assert!(t.is_complete());

        // A request after a release that skips the reload is refused.
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        accept_all(
            &mut t,
            &[(Phase::Release, None), (Phase::RequestBegin, Some(0))],
        )
        .unwrap();
        let err = accept_all(&mut t, &[(Phase::RequestEnd, Some(0))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "phase `request_end` out of order: expected `reload`"
        );

        // Nothing is released twice, and nothing reloads what is loaded.
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        accept_all(&mut t, &[(Phase::Release, None)]).unwrap();
        assert!(accept_all(&mut t, &[(Phase::Release, None)]).is_err());
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        accept_all(&mut t, &[(Phase::RequestBegin, Some(0))]).unwrap();
        let err = accept_all(&mut t, &[(Phase::Reload, None)]).unwrap_err();
        assert!(err.to_string().contains("expected `request_end`"), "{err}");
        // Neither comes with a request id.
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        assert!(accept_all(&mut t, &[(Phase::Release, Some(0))]).is_err());
    }

    #[test]
    fn unload_after_idle_releases_only_between_requests() {
        let mut t = PhaseTracker::new();
        accept_all(&mut t, &START).unwrap();
        accept_all(
            &mut t,
            &[
                (Phase::RequestBegin, Some(0)),
                (Phase::RequestEnd, Some(0)),
                // A short gap: still loaded.
                (Phase::RequestBegin, Some(1)),
                (Phase::RequestEnd, Some(1)),
                // A long gap: released, reloaded at speech start.
                (Phase::Release, None),
                (Phase::RequestBegin, Some(2)),
                (Phase::Reload, None),
                (Phase::RequestEnd, Some(2)),
                (Phase::IdleEnd, None),
            ],
        )
        .unwrap();
        // Never after idle_end.
        assert!(accept_all(&mut t, &[(Phase::Release, None)]).is_err());
    }

    #[test]
    fn phase_names_round_trip_through_serde() {
        for p in Phase::EVERY {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            let back: Phase = serde_json::from_str(&json).unwrap();
            assert_eq!(back, p);
        }
    }
}
