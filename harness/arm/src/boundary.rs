//! Runs slow observations (tool snapshots, the process census) beside an
//! arm on a thread of their own, triggered by phase markers and optionally
//! by a cadence, one at a time.
//!
//! The message reader must never wait for them: it hands markers over a
//! bounded channel without blocking. A trigger that arrives while the
//! previous observation is still running is recorded as skipped, never
//! queued behind it, so a slow tool cannot pile up work or shift later
//! observations away from their phases.
//!
//! Request markers can be thinned before they are handed over
//! ([`MarkerFilter`]): a soak of thousands of requests would otherwise mean
//! thousands of observations.

use protocol::marker_filter::MarkerFilter;
use reports::snapshots::Trigger;
use run_dir::{Appender, Rel, RunDir};
use sampler::{Marker, Phase, clock};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// An observation the worker thread runs; it writes its own records.
pub(crate) trait Job: Send + 'static {
    /// Observe now for `trigger`, which arrived at `due_ns`.
    fn take(&mut self, seq: u64, trigger: Trigger, due_ns: u64);
    /// Record that `triggers` triggers (the first `trigger`, at `due_ns`)
    /// found observation `busy_with` still running.
    fn skip(&mut self, seq: u64, trigger: Trigger, due_ns: u64, busy_with: u64, triggers: u64);
    /// Failures to write the records, for the arm's failure list.
    fn errors(self) -> Vec<String>;
}

/// An append-only JSON-lines file in the run directory, a whole record per
/// write. The first failure is kept for the arm's failure list; after it
/// nothing more is written (see [`run_dir::Appender`]).
pub(crate) struct RecordSink {
    out: Appender,
    errors: Vec<String>,
}

impl RecordSink {
    pub(crate) fn open(run: &RunDir, rel: &Rel) -> Result<Self, run_dir::RunDirError> {
        Ok(RecordSink {
            out: run.appender(rel)?,
            errors: Vec::new(),
        })
    }

    pub(crate) fn append(&mut self, record: &impl Serialize) {
        if let Err(e) = self.out.append_json(record)
            && self.errors.is_empty()
        {
            self.errors
                .push(format!("{e} (later records of this file are missing)"));
        }
    }

    pub(crate) fn errors(self) -> Vec<String> {
        self.errors
    }
}

/// Markers waiting for the worker thread; beyond this the reader drops them
/// (and they are counted) rather than wait.
const PENDING_MARKERS: usize = 256;

pub(crate) struct BoundaryWorker {
    tx: SyncSender<(Marker, u64)>,
    dropped: Arc<AtomicU64>,
    filter: MarkerFilter,
    latest: LatestPhase,
    handle: JoinHandle<Vec<String>>,
}

/// A [`MarkerFilter`] applied to the marker stream in order.
#[derive(Debug, Clone)]
struct MarkerGate {
    filter: MarkerFilter,
    requests_seen: u64,
    /// Whether the open request's markers pass.
    request_passes: bool,
}

impl MarkerGate {
    fn new(filter: MarkerFilter) -> Self {
        MarkerGate {
            filter,
            requests_seen: 0,
            request_passes: false,
        }
    }

    fn passes(&mut self, phase: Phase) -> bool {
        match phase {
            Phase::RequestBegin => {
                let nth = self.requests_seen;
                self.requests_seen += 1;
                self.request_passes = self
                    .filter
                    .every_n_requests
                    .is_some_and(|n| nth.is_multiple_of(n.max(1)));
                self.filter.at_phases && self.request_passes
            }
            Phase::RequestEnd => self.filter.at_phases && self.request_passes,
            _ => self.filter.at_phases,
        }
    }
}

/// The latest phase any marker announced, shared with the worker thread so
/// cadence ticks name it even when its marker was not handed over.
#[derive(Clone, Default)]
struct LatestPhase(Arc<AtomicU8>);

impl LatestPhase {
    fn set(&self, phase: Phase) {
        let index = Phase::EVERY.iter().position(|p| *p == phase).unwrap_or(0);
        self.0.store(index as u8 + 1, Ordering::Relaxed);
    }

    fn get(&self) -> Option<Phase> {
        let stored = usize::from(self.0.load(Ordering::Relaxed));
        stored
            .checked_sub(1)
            .and_then(|i| Phase::EVERY.get(i).copied())
    }
}

/// The reader's side: hands a marker over without blocking.
#[derive(Clone)]
pub(crate) struct BoundarySender {
    tx: SyncSender<(Marker, u64)>,
    dropped: Arc<AtomicU64>,
    gate: MarkerGate,
    latest: LatestPhase,
}

impl BoundarySender {
    pub(crate) fn send(&mut self, marker: &Marker) {
        self.latest.set(marker.phase);
        if !self.gate.passes(marker.phase) {
            return;
        }
        match self.tx.try_send((marker.clone(), clock::monotonic_ns())) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl BoundaryWorker {
    /// Start the thread. Markers the filter holds back only name the phase
    /// a cadence tick follows. `every` adds a cadence.
    pub(crate) fn start<J: Job>(
        job: J,
        first_seq: u64,
        filter: MarkerFilter,
        every: Option<Duration>,
    ) -> Self {
        let (tx, rx) = sync_channel(PENDING_MARKERS);
        let latest = LatestPhase::default();
        let handle = {
            let latest = latest.clone();
            std::thread::spawn(move || {
                let mut job = job;
                run(&mut job, rx, first_seq, &latest, every);
                job.errors()
            })
        };
        BoundaryWorker {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            filter,
            latest,
            handle,
        }
    }

    /// The reader's side; call once (it counts requests for the filter).
    pub(crate) fn sender(&self) -> BoundarySender {
        BoundarySender {
            tx: self.tx.clone(),
            dropped: self.dropped.clone(),
            gate: MarkerGate::new(self.filter),
            latest: self.latest.clone(),
        }
    }

    /// Stop once every marker already sent is handled; the job's errors.
    pub(crate) fn finish(self, what: &str) -> Vec<String> {
        drop(self.tx);
        let mut errors = self
            .handle
            .join()
            .unwrap_or_else(|_| vec![format!("the {what} thread panicked")]);
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            errors.push(format!(
                "{dropped} phase markers reached the {what} thread while its queue of {PENDING_MARKERS} was full and were not observed"
            ));
        }
        errors
    }
}

/// The cadence grid: tick `k` is due at `start + k * period`.
struct Cadence {
    period_ns: u64,
    next_ns: u64,
}

impl Cadence {
    /// Ticks due up to `until_ns` (inclusive) that were missed; moves past them.
    fn missed_until(&mut self, until_ns: u64) -> (u64, u64) {
        let first = self.next_ns;
        let mut n = 0;
        while self.next_ns <= until_ns {
            n += 1;
            self.next_ns += self.period_ns.max(1);
        }
        (n, first)
    }
}

/// Take one observation; its seq and when it ended.
fn observe<J: Job>(job: &mut J, seq: &mut u64, trigger: Trigger, due_ns: u64) -> (u64, u64) {
    let taken = *seq;
    *seq += 1;
    job.take(taken, trigger, due_ns);
    (taken, clock::monotonic_ns())
}

fn run<J: Job>(
    job: &mut J,
    rx: Receiver<(Marker, u64)>,
    first_seq: u64,
    latest: &LatestPhase,
    every: Option<Duration>,
) {
    let mut seq = first_seq;
    let mut cadence = every.map(|p| {
        let period_ns = u64::try_from(p.as_nanos()).unwrap_or(u64::MAX);
        Cadence {
            period_ns,
            next_ns: clock::monotonic_ns().saturating_add(period_ns),
        }
    });
    // The last observation taken and when it ended.
    let mut busy: Option<(u64, u64)> = None;
    loop {
        let received = match &cadence {
            Some(c) => {
                let wait = c.next_ns.saturating_sub(clock::monotonic_ns());
                rx.recv_timeout(Duration::from_nanos(wait))
            }
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let window = match received {
            Ok((marker, arrived_ns)) => {
                let trigger = Trigger::from_marker(&marker);
                match busy {
                    Some((busy_with, ended)) if arrived_ns < ended => {
                        job.skip(seq, trigger, arrived_ns, busy_with, 1);
                        seq += 1;
                        continue;
                    }
                    _ => observe(job, &mut seq, trigger, arrived_ns),
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let Some(c) = &mut cadence else { continue };
                let due = c.next_ns;
                c.next_ns = due.saturating_add(c.period_ns.max(1));
                observe(
                    job,
                    &mut seq,
                    Trigger::Cadence {
                        after_phase: latest.get(),
                    },
                    due,
                )
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        busy = Some(window);
        // Cadence ticks that fell due while that observation ran.
        let (busy_with, ended) = window;
        if let Some(c) = &mut cadence {
            let (missed, first_due) = c.missed_until(ended);
            if missed > 0 {
                let trigger = Trigger::Cadence {
                    after_phase: latest.get(),
                };
                job.skip(seq, trigger, first_due, busy_with, missed);
                seq += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{Sender, channel};

    /// Records every call; `take` blocks until the test releases it.
    struct Gate {
        log: Sender<String>,
        release: Receiver<()>,
    }

    impl Job for Gate {
        fn take(&mut self, seq: u64, trigger: Trigger, _: u64) {
            let _ = self.log.send(format!("take {seq} {}", trigger.label()));
            let _ = self.release.recv();
        }
        fn skip(&mut self, seq: u64, trigger: Trigger, _: u64, busy_with: u64, n: u64) {
            let _ = self.log.send(format!(
                "skip {seq} {} busy_with {busy_with} x{n}",
                trigger.label()
            ));
        }
        fn errors(self) -> Vec<String> {
            Vec::new()
        }
    }

    fn marker(seq: u64, phase: Phase) -> Marker {
        Marker {
            phase,
            seq,
            request_id: None,
            t_ns: 0,
            memory: sampler::TaskMemory::default(),
            system: None,
            cpu: None,
        }
    }

    #[test]
    fn a_marker_arriving_while_an_observation_runs_is_skipped_not_queued() {
        let (log_tx, log) = channel();
        let (release, release_rx) = channel();
        let worker = BoundaryWorker::start(
            Gate {
                log: log_tx,
                release: release_rx,
            },
            1,
            MarkerFilter::ALL,
            None,
        );
        let mut sender = worker.sender();
        sender.send(&marker(0, Phase::ProcessStart));
        // The first observation has started and is held open…
        assert_eq!(log.recv().unwrap(), "take 1 process_start");
        // …so these two arrive while it runs.
        sender.send(&marker(1, Phase::ModelLoaded));
        sender.send(&marker(2, Phase::StateReady));
        release.send(()).unwrap();
        assert_eq!(log.recv().unwrap(), "skip 2 model_loaded busy_with 1 x1");
        assert_eq!(log.recv().unwrap(), "skip 3 state_ready busy_with 1 x1");
        // Once it is idle, the next marker is observed again.
        sender.send(&marker(3, Phase::WarmupDone));
        assert_eq!(log.recv().unwrap(), "take 4 warmup_done");
        release.send(()).unwrap();
        drop(sender);
        assert!(worker.finish("test").is_empty());
        assert!(log.try_recv().is_err(), "nothing else happened");
    }

    #[test]
    fn cadence_ticks_missed_during_an_observation_fold_into_one_record() {
        let mut c = Cadence {
            period_ns: 10,
            next_ns: 100,
        };
        assert_eq!(c.missed_until(99), (0, 100));
        assert_eq!(c.missed_until(135), (4, 100));
        assert_eq!(c.next_ns, 140);
        assert_eq!(c.missed_until(140), (1, 140));
    }

    #[test]
    fn request_markers_pass_for_every_nth_request_or_none() {
        use Phase::*;
        let stream = [
            ProcessStart,
            WarmupDone,
            RequestBegin,
            RequestEnd,
            RequestBegin,
            RequestEnd,
            RequestBegin,
            RequestEnd,
            IdleEnd,
        ];
        let passed = |filter| {
            let mut gate = MarkerGate::new(filter);
            stream
                .iter()
                .map(|p| gate.passes(*p))
                .collect::<Vec<bool>>()
        };
        let (t, f) = (true, false);
        assert_eq!(passed(MarkerFilter::ALL), [t, t, t, t, t, t, t, t, t]);
        let every_2nd = MarkerFilter {
            at_phases: true,
            every_n_requests: Some(2),
        };
        assert_eq!(passed(every_2nd), [t, t, t, t, f, f, t, t, t]);
        let none = MarkerFilter {
            at_phases: true,
            every_n_requests: None,
        };
        assert_eq!(passed(none), [t, t, f, f, f, f, f, f, t]);
        let cadence_only = MarkerFilter {
            at_phases: false,
            every_n_requests: Some(1),
        };
        assert_eq!(passed(cadence_only), [f; 9]);
    }

    #[test]
    fn the_latest_phase_round_trips_for_every_phase() {
        let latest = LatestPhase::default();
        assert_eq!(latest.get(), None);
        for phase in Phase::ALL {
            latest.set(phase);
            assert_eq!(latest.get(), Some(phase));
        }
    }
}
