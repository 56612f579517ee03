//! The soak's watcher: tails the arm's `markers.jsonl` for the progress
//! bar (requests, elapsed, footprint, a running slope over the last
//! requests) and takes slow snapshots of the worker (`smaps_rollup` +
//! `meminfo` on Linux, `vmmap -summary` on macOS) at a fixed interval and
//! once at `idle_end`, and reads memqual's own process at its cadence
//! ([`SelfWatch`]). Its memory stays bounded however long the soak runs.

use super::self_watch::SelfWatch;
use crate::progress::{MarkerTail, humanize, mib};
use analysis::growth;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reports::record::files;
use run_dir::{Rel, RunDir};
use sampler::{Marker, Phase};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Requests kept for the running slope.
const RUNNING_WINDOW: usize = 128;

/// What the progress line shows; bounded whatever the soak's length.
#[derive(Debug, Default)]
pub struct Progress {
    /// Measured requests finished (`request_end` markers seen).
    pub requests: u64,
    /// Footprint in bytes at the last `request_end` (resident bytes where
    /// footprint is unavailable); `None` before the first.
    pub footprint_bytes: Option<u64>,
    /// True once the `idle_end` marker was seen.
    pub idle_seen: bool,
    recent: VecDeque<(f64, f64)>,
}

impl Progress {
    /// Take one marker into account: `request_end` counts a request and its
    /// footprint, `idle_end` sets `idle_seen`; other phases are ignored.
    pub fn ingest(&mut self, m: &Marker) {
        match m.phase {
            Phase::RequestEnd => {
                self.requests += 1;
                let bytes = m.memory.footprint_bytes.unwrap_or(m.memory.resident_bytes);
                self.footprint_bytes = Some(bytes);
                if self.recent.len() == RUNNING_WINDOW {
                    self.recent.pop_front();
                }
                let x = m.request_id.unwrap_or(self.requests) as f64;
                self.recent.push_back((x, bytes as f64));
            }
            Phase::IdleEnd => self.idle_seen = true,
            _ => {}
        }
    }

    /// Theil–Sen over the last requests, bytes per request.
    pub fn running_slope(&self) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self.recent.iter().copied().collect();
        growth::theil_sen(&pts)
    }

    /// Points held for the running slope (at most 128).
    #[cfg(test)]
    pub fn retained(&self) -> usize {
        self.recent.len()
    }
}

/// Copy the worker's slow-snapshot sources into `dir` as raw text.
fn snapshot(run: &RunDir, dir: &Rel, pid: u32, n: u32, label: &str) -> Result<(), String> {
    run.create_dir(dir).map_err(|e| e.to_string())?;
    let stem = format!("{n:04}-{label}");
    let sources: Vec<(String, Result<String, String>)> = if cfg!(target_os = "linux") {
        [
            (format!("/proc/{pid}/smaps_rollup"), "smaps_rollup"),
            ("/proc/meminfo".to_string(), "meminfo"),
        ]
        .into_iter()
        .map(|(src, ext)| {
            (
                format!("{stem}.{ext}"),
                std::fs::read_to_string(&src).map_err(|e| format!("{src}: {e}")),
            )
        })
        .collect()
    } else {
        let out = std::process::Command::new("vmmap")
            .args(["-summary", &pid.to_string()])
            .output()
            .map_err(|e| format!("vmmap: {e}"))
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        vec![(format!("{stem}.vmmap-summary"), out)]
    };
    for (name, text) in sources {
        let text = text?;
        run.write_bytes(&dir.join(&name), text.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn worker_pid(run: &RunDir, arm_dir: &Rel) -> Option<u32> {
    let hello: worker_contract::Hello = run.read_json(&arm_dir.join(files::HELLO)).ok()??;
    Some(hello.pid)
}

/// What the watcher did, for the arm's record.
#[derive(Debug, Default)]
pub struct WatchReport {
    /// Slow snapshots written.
    pub snapshots: u32,
    /// Why a snapshot could not be taken, one line each.
    pub snapshot_errors: Vec<String>,
    /// Readings of memqual itself written to `harness.jsonl`.
    pub harness_samples: u64,
    /// Why `harness.jsonl` could not be written (nothing more was tried).
    pub harness_error: Option<String>,
}

/// Tail the arm, draw progress, take snapshots and read memqual itself
/// (`own`, whose end reading is taken on the way out), until `stop`.
pub fn watch(
    run: &RunDir,
    arm_dir: &Rel,
    total: Option<u64>,
    interval: Option<Duration>,
    mut own: SelfWatch,
    stop: Arc<AtomicBool>,
    bar: ProgressBar,
) -> WatchReport {
    let markers = arm_dir.join(files::MARKERS);
    let snapshots = arm_dir.join(files::SNAPSHOTS_DIR);
    let mut tail = MarkerTail::default();
    let mut progress = Progress::default();
    let mut report = WatchReport::default();
    let mut last_snapshot: Option<Instant> = None;
    let mut pid = None;
    let start = Instant::now();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        own.poll(run);
        let was_idle = progress.idle_seen;
        for m in tail.poll(run, &markers) {
            progress.ingest(&m);
        }
        pid = pid.or_else(|| worker_pid(run, arm_dir));
        if let Some(pid) = pid {
            let due = interval.is_some_and(|i| last_snapshot.is_none_or(|t| t.elapsed() >= i));
            let at_idle = progress.idle_seen && !was_idle;
            if due || at_idle {
                let label = if at_idle { "idle_end" } else { "periodic" };
                match snapshot(run, &snapshots, pid, report.snapshots, label) {
                    Ok(()) => report.snapshots += 1,
                    // A worker that already exited has no smaps_rollup: note, go on.
                    Err(e) if report.snapshot_errors.len() < 20 => report.snapshot_errors.push(e),
                    Err(_) => {}
                }
                last_snapshot = Some(Instant::now());
            }
        }
        bar.set_position(progress.requests);
        bar.set_message(format!(
            "{} · footprint {} · slope {}",
            humanize(start.elapsed()),
            progress
                .footprint_bytes
                .map_or("–".into(), |b| mib(b as f64)),
            progress
                .running_slope()
                .map_or("–".into(), |s| format!("{:.1} KiB/req", s / 1024.0)),
        ));
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    if total.is_some() {
        bar.abandon();
    } else {
        bar.finish_and_clear();
    }
    own.end(run);
    report.harness_samples = own.samples;
    report.harness_error = own.error;
    report
}

/// The soak's progress bar on stderr (2 Hz): a bar toward `total` requests,
/// or a spinner when the soak is open-ended.
pub fn progress_bar(total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} requests · {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {pos} requests · {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(2));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;
    use std::io::Write;

    fn end(id: u64, bytes: u64) -> Marker {
        Marker {
            phase: Phase::RequestEnd,
            seq: id,
            request_id: Some(id),
            t_ns: id,
            memory: TaskMemory {
                resident_bytes: bytes,
                footprint_bytes: Some(bytes),
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    #[test]
    fn the_tail_waits_for_the_rest_of_a_half_written_line() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let rel = Rel::file("markers.jsonl");
        let path = run.display(&rel);
        let mut tail = MarkerTail::default();
        assert!(tail.poll(&run, &rel).is_empty(), "no file yet");
        let line = serde_json::to_string(&end(7, 100)).unwrap();
        let (a, b) = line.split_at(20);
        let mut f = std::fs::File::create(&path).unwrap();
        write!(f, "{}\n{a}", serde_json::to_string(&end(6, 90)).unwrap()).unwrap();
        f.flush().unwrap();
        let first = tail.poll(&run, &rel);
        assert_eq!(first.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![6]);
        writeln!(f, "{b}").unwrap();
        f.flush().unwrap();
        assert_eq!(tail.poll(&run, &rel), vec![end(7, 100)]);
    }

    #[test]
    fn progress_keeps_a_bounded_window_and_its_slope() {
        let mut p = Progress::default();
        for i in 0..10_000u64 {
            p.ingest(&end(i, 1_000_000 + 4096 * i));
        }
        assert_eq!(p.requests, 10_000);
        assert_eq!(p.retained(), RUNNING_WINDOW);
        assert_eq!(p.running_slope(), Some(4096.0));
        assert_eq!(p.footprint_bytes, Some(1_000_000 + 4096 * 9_999));
    }
}
