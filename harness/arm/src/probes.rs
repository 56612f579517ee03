//! Starts an arm's slow observations (tool snapshots and the process
//! census) beside the worker, feeds them the phase markers, and stops them.

use crate::boundary::{BoundarySender, BoundaryWorker, Job};
use crate::census::Census;
use crate::snapshots::Snapshotter;
use protocol::Arm;
use reports::snapshots::{PROBES, ProbeSettings, Trigger};
use run_dir::{Rel, RunDir};
use sampler::{Marker, clock};
use std::time::Duration;

pub(crate) struct Probes {
    snapshots: Option<BoundaryWorker>,
    census: Option<BoundaryWorker>,
}

/// Called by the message reader for every accepted marker; never blocks.
pub(crate) type MarkerHook = Box<dyn FnMut(&Marker) + Send>;

impl Probes {
    /// Write `probes.json`, take the before-arm census (the worker, spawned
    /// but waiting for its spec, has done nothing yet) and start the
    /// threads. Failures are returned for the arm's failure list.
    pub(crate) fn start(
        arm: &Arm,
        worker_pid: u32,
        run: &RunDir,
        dir: &Rel,
    ) -> (Probes, Vec<String>) {
        let mut errors = Vec::new();
        let settings = ProbeSettings {
            snapshots_at_phases: arm.snapshots.at_phases,
            snapshot_every_ms: arm.snapshots.every_ms,
            census_threshold_bytes: arm.census.enabled.then(|| arm.census.threshold_bytes()),
            harness_pid: std::process::id(),
            worker_pid,
        };
        if let Err(e) = run.write_json(&dir.join(PROBES), &settings) {
            errors.push(e.to_string());
        }
        let snapshots = if arm.snapshots.enabled() {
            match Snapshotter::create(worker_pid, run, dir) {
                Ok(s) => Some(BoundaryWorker::start(
                    s,
                    0,
                    arm.snapshots.marker_filter(),
                    arm.snapshots.every_ms.map(Duration::from_millis),
                )),
                Err(e) => {
                    errors.push(format!("snapshots cannot start: {e}"));
                    None
                }
            }
        } else {
            None
        };
        let census = if arm.census.enabled {
            match Census::create(run, dir) {
                Ok(mut c) => {
                    c.take(0, Trigger::BeforeArm, clock::monotonic_ns());
                    Some(BoundaryWorker::start(
                        c,
                        1,
                        arm.census.marker_filter(),
                        None,
                    ))
                }
                Err(e) => {
                    errors.push(format!("the census cannot start: {e}"));
                    None
                }
            }
        } else {
            None
        };
        (Probes { snapshots, census }, errors)
    }

    /// The reader's hook: hands each marker to both threads.
    pub(crate) fn hook(&self) -> Option<MarkerHook> {
        let mut senders: Vec<BoundarySender> = [&self.snapshots, &self.census]
            .into_iter()
            .flatten()
            .map(BoundaryWorker::sender)
            .collect();
        if senders.is_empty() {
            return None;
        }
        Some(Box::new(move |m: &Marker| {
            for s in &mut senders {
                s.send(m);
            }
        }))
    }

    /// Wait for the observations in flight (call after the reader is joined,
    /// so no marker is still on its way); their errors.
    pub(crate) fn finish(self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(s) = self.snapshots {
            errors.extend(s.finish("snapshot"));
        }
        if let Some(c) = self.census {
            errors.extend(c.finish("census"));
        }
        errors
    }
}
