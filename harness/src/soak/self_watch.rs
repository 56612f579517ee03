//! The soak watching memqual itself: the orchestrator's resident memory and
//! CPU time and the external sampler threads' CPU time, read as the soak
//! starts, at its cadence and at its end, each appended to the arm's
//! `harness.jsonl` as it is taken (only the start reading waits, for the
//! arm's folder to exist). The receipt's `harness_self` section judges them
//! (`reports::harness_self`).

use reports::harness_self::{HarnessSample, SampleAt};
use reports::record::files;
use run_dir::{Appender, Rel, RunDir};
use std::time::{Duration, Instant};

/// Time between readings when the soak takes no periodic snapshots.
pub(crate) const FALLBACK_PERIOD: Duration = Duration::from_secs(10);

/// The longest time between readings, whatever the snapshot interval (up
/// to a day): a slope needs points, and a reading costs a few file reads.
pub(crate) const MAX_PERIOD: Duration = Duration::from_secs(60);

/// The time between readings for a soak whose slow snapshots come every
/// `snapshot_interval` (`None`: only at `idle_end`).
pub(crate) fn period(snapshot_interval: Option<Duration>) -> Duration {
    snapshot_interval.map_or(FALLBACK_PERIOD, |i| i.min(MAX_PERIOD))
}

/// Read memqual's own process now (`seq` is set when it is written).
fn read(at: SampleAt) -> HarnessSample {
    // Linux: /proc/self/status; macOS: task_info of our own task.
    let memory = sampler::snapshot_self().ok();
    let threads = sampler::threads::sampler_threads_cpu();
    let cpu_ns = sampler::clock::process_cpu_ns();
    HarnessSample {
        seq: 0,
        at,
        t_ns: sampler::clock::monotonic_ns(),
        resident_bytes: memory.as_ref().map(|m| m.resident_bytes),
        resident_peak_bytes: memory.and_then(|m| m.resident_peak_bytes),
        // The clock reads 0 only where it is unavailable.
        cpu_ns: (cpu_ns > 0).then_some(cpu_ns),
        sampler_cpu_ns: Some(threads.cpu_ns),
        sampler_tids: threads.live_tids,
    }
}

/// The readings of one soak, and where they go.
pub(crate) struct SelfWatch {
    file: Rel,
    arm_dir: Rel,
    out: Option<Appender>,
    /// The start reading, until the arm's folder exists (after admission).
    pending: Option<HarnessSample>,
    last: Instant,
    period: Duration,
    /// Readings written.
    pub samples: u64,
    /// Why the file could not be written; nothing more is tried after it.
    pub error: Option<String>,
}

impl SelfWatch {
    /// Take the start reading now, for `arm_dir`'s `harness.jsonl`; the
    /// next readings come every `period`.
    pub(crate) fn start(arm_dir: &Rel, period: Duration) -> SelfWatch {
        SelfWatch {
            file: arm_dir.join(files::HARNESS),
            arm_dir: arm_dir.clone(),
            out: None,
            pending: Some(read(SampleAt::Start)),
            last: Instant::now(),
            period,
            samples: 0,
            error: None,
        }
    }

    /// Take a periodic reading if one is due (and write the start one as
    /// soon as the arm's folder exists).
    pub(crate) fn poll(&mut self, run: &RunDir) {
        if self.last.elapsed() >= self.period {
            self.last = Instant::now();
            self.write(run, read(SampleAt::Periodic));
        } else if self.pending.is_some() {
            self.flush_pending(run);
        }
    }

    /// Take the end reading (the arm is over).
    pub(crate) fn end(&mut self, run: &RunDir) {
        self.write(run, read(SampleAt::End));
    }

    /// Open the file once the arm's folder exists and write the start
    /// reading; false while there is nowhere to write yet.
    fn flush_pending(&mut self, run: &RunDir) -> bool {
        if self.out.is_none() {
            if self.error.is_some() {
                return false;
            }
            match run.has_dir(&self.arm_dir) {
                Ok(true) => {}
                // Admission has not let the arm start yet (or never will).
                Ok(false) => return false,
                Err(e) => {
                    self.error = Some(e.to_string());
                    return false;
                }
            }
            match run.appender(&self.file) {
                Ok(out) => self.out = Some(out),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return false;
                }
            }
        }
        if let Some(start) = self.pending.take() {
            self.append(start);
        }
        self.out.is_some()
    }

    /// Write `sample`; dropped when there is nowhere to write it (before the
    /// arm's folder exists, or after a write failed).
    fn write(&mut self, run: &RunDir, sample: HarnessSample) {
        if self.flush_pending(run) {
            self.append(sample);
        }
    }

    fn append(&mut self, mut sample: HarnessSample) {
        let Some(out) = self.out.as_mut() else { return };
        sample.seq = self.samples;
        match out.append_json(&sample) {
            Ok(()) => self.samples += 1,
            Err(e) => {
                // A full disk stops the run anyway; one reason is enough.
                self.error = Some(e.to_string());
                self.out = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_wait_for_the_arm_folder_and_go_out_one_line_each() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let arm = run.arm("a").unwrap();
        let mut watch = SelfWatch::start(&arm, Duration::ZERO);
        watch.poll(&run);
        assert_eq!(watch.samples, 0, "no arm folder yet: only the start waits");
        run.create_dir(&arm).unwrap();
        watch.poll(&run);
        watch.end(&run);
        assert_eq!(watch.error, None);
        assert_eq!(watch.samples, 3);
        let lines: Vec<HarnessSample> = run.read_jsonl(&arm.join(files::HARNESS)).unwrap();
        let at: Vec<SampleAt> = lines.iter().map(|s| s.at).collect();
        assert_eq!(at, [SampleAt::Start, SampleAt::Periodic, SampleAt::End]);
        assert_eq!(lines.iter().map(|s| s.seq).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(lines.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        if cfg!(target_os = "linux") {
            assert!(
                lines
                    .iter()
                    .all(|s| s.resident_bytes.is_some_and(|b| b > 0))
            );
            assert!(lines.iter().all(|s| s.cpu_ns.is_some()));
        }
    }

    #[test]
    fn the_period_follows_the_snapshot_interval_within_bounds() {
        assert_eq!(period(None), FALLBACK_PERIOD);
        assert_eq!(period(Some(Duration::from_secs(5))), Duration::from_secs(5));
        assert_eq!(period(Some(Duration::from_secs(86_400))), MAX_PERIOD);
    }
}
