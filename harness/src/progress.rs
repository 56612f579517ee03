//! `memqual run`'s progress on stderr while an arm runs: arm k/n, the phase
//! the worker last marked, measured requests done (of how many), elapsed
//! time and the footprint at the last marker (resident where the platform
//! has no footprint).
//!
//! On a terminal it is an indicatif bar, coloured unless `NO_COLOR` is set.
//! Otherwise (CI logs, pipes) it is plain lines: one per phase marker, at
//! most one every [`LINE_INTERVAL`] for requests, and the last state when
//! the arm ends. A thread tails the arm's `markers.jsonl` (every marker is
//! read, however short its phase), so nothing here touches the worker.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use protocol::Arm;
use reports::record::files;
use run_dir::{Rel, RunDir};
use sampler::{Marker, Phase};
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use worker_contract::WorkerSpec;

/// Plain mode: the most often a request line is printed.
pub const LINE_INTERVAL: Duration = Duration::from_secs(10);
/// How often the markers are read.
const POLL: Duration = Duration::from_millis(200);

/// Measured requests the arm will make, when known in advance (a soak by
/// duration is not).
pub fn expected_requests(arm: &Arm) -> Option<u64> {
    match &arm.worker {
        WorkerSpec::Calibrate(c) => Some(c.requests),
        WorkerSpec::Whisper(w) => {
            if w.max_duration_s.is_some() {
                return None;
            }
            let inputs = if w.long_form.is_some() {
                1
            } else {
                w.fixtures.len() as u64
            };
            let all = inputs.saturating_mul(u64::from(w.repetitions));
            Some(w.max_requests.map_or(all, |m| m.min(all)))
        }
    }
}

/// Whether `NO_COLOR` asks for no colour (set and not empty, per no-color.org).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// What the arm has done so far.
#[derive(Debug, Clone, PartialEq)]
struct State {
    phase: Option<Phase>,
    requests: u64,
    footprint: Option<u64>,
}

impl State {
    fn ingest(&mut self, m: &Marker) {
        self.phase = Some(m.phase);
        if m.phase == Phase::RequestEnd {
            self.requests += 1;
        }
        self.footprint = Some(m.memory.footprint_bytes.unwrap_or(m.memory.resident_bytes));
    }
}

/// One line of progress (plain mode), also the bar's message.
fn describe(state: &State, total: Option<u64>, elapsed: Duration) -> String {
    format!(
        "{} · {} requests · {} · footprint {}",
        state.phase.map_or("starting", Phase::as_str),
        match total {
            Some(t) => format!("{}/{t}", state.requests),
            None => state.requests.to_string(),
        },
        humanize(elapsed),
        state.footprint.map_or("–".into(), |b| mib(b as f64)),
    )
}

enum Sink {
    Bar(ProgressBar),
    Lines {
        prefix: String,
        last: Option<(Instant, State)>,
    },
}

impl Sink {
    fn new(prefix: String, total: Option<u64>) -> Sink {
        if !std::io::stderr().is_terminal() {
            return Sink::Lines { prefix, last: None };
        }
        let (bar, pre) = if no_color() {
            ("{bar:24}", "{prefix}")
        } else {
            ("{bar:24.cyan/blue}", "{prefix:.bold}")
        };
        let style = match total {
            Some(_) => ProgressStyle::with_template(&format!("{pre} {bar} {{msg}}")),
            None => ProgressStyle::with_template(&format!("{pre} {{spinner}} {{msg}}")),
        }
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let b = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        b.set_style(style);
        b.set_prefix(prefix);
        b.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        Sink::Bar(b)
    }

    fn show(&mut self, state: &State, total: Option<u64>, elapsed: Duration, phase_changed: bool) {
        match self {
            Sink::Bar(b) => {
                b.set_position(state.requests);
                b.set_message(describe(state, total, elapsed));
            }
            Sink::Lines { prefix, last } => {
                let due = last
                    .as_ref()
                    .is_none_or(|(t, _)| t.elapsed() >= LINE_INTERVAL);
                if phase_changed || due {
                    note!("{prefix}: {}", describe(state, total, elapsed));
                    *last = Some((Instant::now(), state.clone()));
                }
            }
        }
    }

    fn finish(self, state: &State, total: Option<u64>, elapsed: Duration) {
        match self {
            Sink::Bar(b) => {
                b.set_position(state.requests);
                b.finish_with_message(describe(state, total, elapsed));
            }
            Sink::Lines { prefix, last } => {
                if last.is_none_or(|(_, s)| &s != state) {
                    note!("{prefix}: {}", describe(state, total, elapsed));
                }
            }
        }
    }
}

/// The watcher of one arm; [`ArmProgress::finish`] once the arm ended.
pub struct ArmProgress {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl ArmProgress {
    /// Start showing arm `k` of `n`, which writes into `arm_dir`.
    pub fn start(run: &RunDir, arm_dir: &Rel, arm: &Arm, (k, n): (usize, usize)) -> ArmProgress {
        let stop = Arc::new(AtomicBool::new(false));
        let total = expected_requests(arm);
        let prefix = format!("memqual: [{k}/{n}] arm {}", arm.id);
        let (run, markers, flag) = (run.clone(), arm_dir.join(files::MARKERS), Arc::clone(&stop));
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            let mut sink = Sink::new(prefix, total);
            let mut tail = MarkerTail::default();
            let mut state = State {
                phase: None,
                requests: 0,
                footprint: None,
            };
            loop {
                // Read the flag first: markers written before it was set are
                // all read by this last pass.
                let stopping = flag.load(Ordering::SeqCst);
                let mut changed = false;
                for m in tail.poll(&run, &markers) {
                    state.ingest(&m);
                    let is_request = matches!(m.phase, Phase::RequestBegin | Phase::RequestEnd);
                    if !is_request {
                        sink.show(&state, total, started.elapsed(), true);
                    } else {
                        changed = true;
                    }
                }
                if changed || matches!(sink, Sink::Bar(_)) {
                    sink.show(&state, total, started.elapsed(), false);
                }
                if stopping {
                    sink.finish(&state, total, started.elapsed());
                    return;
                }
                std::thread::sleep(POLL);
            }
        });
        ArmProgress { stop, handle }
    }

    /// Stop after a last read of the markers; the last state is shown.
    pub fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.handle.join();
    }
}

/// A `markers.jsonl` read as it grows: complete lines only, each bounded.
#[derive(Default)]
pub struct MarkerTail {
    reader: Option<BufReader<std::fs::File>>,
    partial: Vec<u8>,
}

impl MarkerTail {
    /// New complete markers since the last call (none while the file is missing).
    pub fn poll(&mut self, run: &RunDir, rel: &Rel) -> Vec<Marker> {
        if self.reader.is_none() {
            match run.open_growing(rel) {
                Ok(Some(f)) => self.reader = Some(BufReader::new(f)),
                _ => return Vec::new(),
            }
        }
        let mut out = Vec::new();
        let Some(reader) = self.reader.as_mut() else {
            return out;
        };
        loop {
            let mut line = Vec::new();
            let limit = run_dir::limits::LINE.saturating_sub(self.partial.len() as u64);
            match reader.by_ref().take(limit + 1).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if !line.ends_with(b"\n") => {
                    // Half a line: keep it until the rest arrives (a line
                    // beyond the limit is dropped, not kept growing).
                    self.partial.extend_from_slice(&line);
                    if self.partial.len() as u64 > run_dir::limits::LINE {
                        self.partial.clear();
                    }
                    break;
                }
                Ok(_) => {
                    let mut full = std::mem::take(&mut self.partial);
                    full.extend_from_slice(&line);
                    if let Ok(m) = serde_json::from_slice::<Marker>(&full) {
                        out.push(m);
                    }
                }
            }
        }
        out
    }
}

/// Bytes as MiB, one decimal.
pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1_048_576.0)
}

/// A duration as h:mm:ss.
pub fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;

    #[test]
    fn a_line_names_phase_requests_time_and_footprint() {
        let mut s = State {
            phase: None,
            requests: 0,
            footprint: None,
        };
        assert_eq!(
            describe(&s, Some(4), Duration::from_secs(3)),
            "starting · 0/4 requests · 0:00:03 · footprint –"
        );
        s.ingest(&Marker {
            phase: Phase::RequestEnd,
            seq: 5,
            request_id: Some(1),
            t_ns: 1,
            memory: TaskMemory {
                resident_bytes: 3 << 20,
                footprint_bytes: Some(2 << 20),
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        });
        assert_eq!(
            describe(&s, None, Duration::from_secs(3661)),
            "request_end · 1 requests · 1:01:01 · footprint 2.0 MiB"
        );
    }
}
