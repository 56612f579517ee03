//! Reads a worker's fd-3 messages, checks them against the contract, and
//! appends them to the arm's files as they arrive.

use crate::probes::MarkerHook;
use reports::record::files;
use run_dir::{Appender, Rel, RunDir, RunDirError};
use sampler::PhaseTracker;
use std::io::{BufRead, BufReader};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use worker_contract::{CONTRACT_VERSION, WorkerMessage, decode_line};

/// How an arm's failure begins when its worker speaks another contract
/// version: a worker from another commit, which this memqual cannot judge
/// (`run --bisect-exit` skips it).
pub const CONTRACT_MISMATCH: &str = "worker speaks contract version";

/// What the watcher hears while the worker runs.
pub enum Event {
    /// The worker exited (or waiting for it failed).
    Exited(std::io::Result<std::process::ExitStatus>),
    /// A contract violation, or the arm's files could not be written: the
    /// watcher stops the worker at once.
    Violation,
}

/// What the reader saw, once the channel closed.
#[derive(Debug, Default)]
pub struct ReaderReport {
    /// The worker's `hello`, once one in this memqual's contract version arrived.
    pub hello: Option<worker_contract::Hello>,
    /// The worker ended its protocol with `bye`.
    pub bye: bool,
    /// The worker sent its `runtime` report (written to `runtime.json`).
    pub runtime: bool,
    /// The worker sent Core ML's placement (`coreml-placement.json`).
    pub placement: bool,
    /// Accepted phase markers.
    pub markers: u64,
    /// Accepted `result` messages.
    pub results: u64,
    /// `settled` snapshots (soak arms with a settle period).
    pub settled: u64,
    /// Messages of the worker's `error` reports, in order.
    pub worker_errors: Vec<String>,
    /// Contract violations, each with the line number on the channel.
    pub violations: Vec<String>,
    /// Failures to write the arm's files.
    pub harness_errors: Vec<String>,
    /// Every phase of the contract was marked, in order.
    pub phases_complete: bool,
    /// The last phase accepted; `None` before the first marker.
    pub last_phase: Option<String>,
    /// The phase(s) the contract expected next, as "`a` or `b`" (empty when
    /// complete).
    pub expected_next: String,
}

/// The message reader's thread, started on a worker's fd-3 pipe.
pub struct ChannelReader {
    handle: JoinHandle<ReaderReport>,
}

/// Append-only sinks for the arm's message files, a whole line per write.
struct Sinks {
    markers: Appender,
    results: Appender,
    log: Appender,
    /// Opened at the first `settled` message: arms without a settle period
    /// get no file.
    settled: Option<Appender>,
}

impl Sinks {
    fn open(run: &RunDir, dir: &Rel) -> Result<Sinks, RunDirError> {
        Ok(Sinks {
            markers: run.appender(&dir.join(files::MARKERS))?,
            results: run.appender(&dir.join(files::RESULTS))?,
            log: run.appender(&dir.join(files::WORKER_LOG))?,
            settled: None,
        })
    }
}

fn append_log(out: &mut Appender, level: &str, message: &str) -> Result<(), RunDirError> {
    // One line per message: a newline inside it would forge a log line.
    let message = message.replace(['\n', '\r'], " ");
    let line = format!("{} {level} {message}", sampler::clock::monotonic_ns());
    out.append(line.as_bytes())
}

struct State {
    run: RunDir,
    dir: Rel,
    report: ReaderReport,
    tracker: PhaseTracker,
    events: Sender<Event>,
    /// Sees every accepted marker (tool snapshots, census).
    on_marker: Option<MarkerHook>,
}

impl State {
    fn violation(&mut self, line_no: u64, reason: String) {
        self.report
            .violations
            .push(format!("message line {line_no}: {reason}"));
        let _ = self.events.send(Event::Violation);
    }

    fn handle(&mut self, line_no: u64, line: &str, sinks: &mut Sinks) -> Result<(), RunDirError> {
        let msg = match decode_line(line) {
            Ok(m) => m,
            Err(e) => {
                self.violation(line_no, e.to_string());
                return Ok(());
            }
        };
        if self.report.bye {
            self.violation(line_no, format!("`{}` after `bye`", msg.type_name()));
            return Ok(());
        }
        if self.report.hello.is_none() && !matches!(msg, WorkerMessage::Hello(_)) {
            self.violation(
                line_no,
                format!("first message is `{}`, expected `hello`", msg.type_name()),
            );
            return Ok(());
        }
        match msg {
            WorkerMessage::Hello(h) => {
                if self.report.hello.is_some() {
                    self.violation(line_no, "a second `hello`".into());
                } else if h.contract_version != CONTRACT_VERSION {
                    self.violation(
                        line_no,
                        format!(
                            "{CONTRACT_MISMATCH} {}, memqual speaks {CONTRACT_VERSION}",
                            h.contract_version
                        ),
                    );
                } else {
                    self.run.write_json(&self.dir.join(files::HELLO), &h)?;
                    self.report.hello = Some(h.clone());
                }
            }
            WorkerMessage::Marker(m) => match self.tracker.accept(m.seq, m.phase, m.request_id) {
                Ok(()) => {
                    self.report.markers += 1;
                    sinks.markers.append_json(&m)?;
                    if let Some(hook) = &mut self.on_marker {
                        hook(&m);
                    }
                }
                Err(e) => self.violation(line_no, e.to_string()),
            },
            WorkerMessage::Result(r) => {
                if self
                    .tracker
                    .last_request()
                    .is_none_or(|last| r.request_id > last)
                {
                    self.violation(
                        line_no,
                        format!("result for request {} that never began", r.request_id),
                    );
                } else {
                    self.report.results += 1;
                    sinks.results.append_json(&r)?;
                }
            }
            WorkerMessage::Log(l) => {
                let level = serde_json::to_value(l.level)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_uppercase))
                    .unwrap_or_default();
                append_log(&mut sinks.log, &level, &l.message)?;
            }
            WorkerMessage::Runtime(r) => {
                if self.report.runtime {
                    self.violation(line_no, "a second `runtime` report".into());
                } else {
                    self.run.write_json(&self.dir.join(files::RUNTIME), &r)?;
                    self.report.runtime = true;
                }
            }
            WorkerMessage::Settled(s) => {
                // Only between a request's end and the next begin, for that request.
                let after_end = self.tracker.last_phase() == Some(sampler::Phase::RequestEnd);
                if !after_end || self.tracker.last_request() != Some(s.request_id) {
                    self.violation(
                        line_no,
                        format!(
                            "`settled` for request {} is not right after that request's `request_end`",
                            s.request_id
                        ),
                    );
                } else {
                    self.report.settled += 1;
                    let out = match &mut sinks.settled {
                        Some(out) => out,
                        None => sinks
                            .settled
                            .insert(self.run.appender(&self.dir.join(files::SETTLED))?),
                    };
                    out.append_json(&s)?;
                }
            }
            WorkerMessage::Placement(p) => {
                // The compute plan loads the model again: only once the
                // measured phases are over, once.
                if !self.tracker.is_complete() {
                    self.violation(line_no, "`placement` before `teardown_done`".into());
                } else if matches!(p, worker_contract::CoremlPlacement::AfterTeardown) {
                    self.violation(
                        line_no,
                        "`placement` says `after_teardown`, which only a runtime report may".into(),
                    );
                } else if self.report.placement {
                    self.violation(line_no, "a second `placement`".into());
                } else {
                    self.run
                        .write_json(&self.dir.join(files::COREML_PLACEMENT), &p)?;
                    self.report.placement = true;
                }
            }
            WorkerMessage::Error(e) => {
                append_log(&mut sinks.log, "ERROR", &e.message)?;
                self.report.worker_errors.push(e.message);
            }
            WorkerMessage::Bye(_) => {
                if !self.tracker.is_complete() {
                    self.violation(line_no, "`bye` before `teardown_done`".into());
                }
                self.report.bye = true;
            }
        }
        Ok(())
    }
}

/// The longest message line a worker may send; a result carrying every
/// token of a long-form request stays far below it. A longer line is a
/// contract violation, dropped without being held in memory.
const MAX_MESSAGE_BYTES: u64 = run_dir::limits::LINE;

/// What one read from the channel gave.
enum Message {
    /// A line (without its limit exceeded) is in the buffer.
    Line,
    /// A line longer than [`MAX_MESSAGE_BYTES`], skipped to its end.
    TooLong,
    /// The channel closed.
    End,
}

fn read_message(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Message> {
    buf.clear();
    let n = std::io::Read::take(&mut *reader, MAX_MESSAGE_BYTES + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Message::End);
    }
    if buf.len() as u64 > MAX_MESSAGE_BYTES && buf.last() != Some(&b'\n') {
        buf.clear();
        reader.skip_until(b'\n')?;
        return Ok(Message::TooLong);
    }
    Ok(Message::Line)
}

impl ChannelReader {
    /// Read `pipe` until end-of-file on a thread of its own.
    #[allow(dead_code)] // kept for callers without probes
    pub fn start(
        pipe: std::io::PipeReader,
        run: &RunDir,
        dir: &Rel,
        events: Sender<Event>,
    ) -> Self {
        Self::start_observed(pipe, run, dir, events, None)
    }

    /// As [`Self::start`], with `on_marker` called for every accepted marker.
    pub(crate) fn start_observed(
        pipe: std::io::PipeReader,
        run: &RunDir,
        dir: &Rel,
        events: Sender<Event>,
        on_marker: Option<MarkerHook>,
    ) -> Self {
        let (run, dir) = (run.clone(), dir.clone());
        let handle = std::thread::spawn(move || {
            let mut state = State {
                run: run.clone(),
                dir: dir.clone(),
                report: ReaderReport::default(),
                tracker: PhaseTracker::new(),
                events,
                on_marker,
            };
            let mut sinks = match Sinks::open(&run, &dir) {
                Ok(s) => s,
                Err(e) => {
                    state
                        .report
                        .harness_errors
                        .push(format!("cannot open the arm's message files: {e}"));
                    // Drain the pipe so the worker never blocks on it.
                    let _ = std::io::copy(&mut BufReader::new(pipe), &mut std::io::sink());
                    return state.report;
                }
            };
            let mut reader = BufReader::new(pipe);
            let mut buf = Vec::new();
            let mut line_no = 0u64;
            let mut sinks_broken = false;
            loop {
                let read = read_message(&mut reader, &mut buf);
                if !matches!(read, Ok(Message::End)) {
                    line_no += 1;
                }
                match read {
                    Ok(Message::End) => break,
                    Ok(Message::Line) => {}
                    Ok(Message::TooLong) => {
                        state.violation(
                            line_no,
                            format!("longer than {MAX_MESSAGE_BYTES} bytes; the line was dropped"),
                        );
                        continue;
                    }
                    Err(e) => {
                        state
                            .report
                            .harness_errors
                            .push(format!("reading the worker's messages: {e}"));
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim_end_matches(['\n', '\r']);
                if line.is_empty() || sinks_broken {
                    // Keep draining so a worker never blocks on a full pipe.
                    continue;
                }
                if let Err(e) = state.handle(line_no, line, &mut sinks) {
                    state
                        .report
                        .harness_errors
                        .push(format!("writing the arm's files: {e}"));
                    sinks_broken = true;
                    // A run directory that cannot be written cannot record
                    // the arm: stop the worker rather than run it blind.
                    let _ = state.events.send(Event::Violation);
                }
            }
            let t = &state.tracker;
            state.report.phases_complete = t.is_complete();
            state.report.last_phase = t.last_phase().map(|p| p.to_string());
            state.report.expected_next = t
                .expected()
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(" or ");
            state.report
        });
        ChannelReader { handle }
    }

    /// Wait for the reader to finish (the channel closed) and return what it
    /// saw; a panicked reader thread becomes a harness error in the report.
    pub fn join(self) -> ReaderReport {
        self.handle.join().unwrap_or_else(|_| ReaderReport {
            harness_errors: vec!["the message reader thread panicked".into()],
            ..ReaderReport::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Feed `lines` through a fresh reader state; return its report.
    /// The arm folder the reader wrote, kept alive with its temporary root.
    struct ArmFolder {
        _tmp: tempfile::TempDir,
        path: std::path::PathBuf,
    }

    impl ArmFolder {
        fn path(&self) -> &std::path::Path {
            &self.path
        }
    }

    fn feed(lines: &[String]) -> (ReaderReport, ArmFolder) {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let dir = run.arm("a").unwrap();
        run.create_dir(&dir).unwrap();
        let (tx, _rx) = mpsc::channel();
        let mut state = State {
            run: run.clone(),
            dir: dir.clone(),
            report: ReaderReport::default(),
            tracker: PhaseTracker::new(),
            events: tx,
            on_marker: None,
        };
        let mut sinks = Sinks::open(&run, &dir).unwrap();
        for (i, l) in lines.iter().enumerate() {
            state.handle(i as u64 + 1, l, &mut sinks).unwrap();
        }
        let path = run.display(&dir);
        (state.report, ArmFolder { _tmp: tmp, path })
    }

    fn hello(version: u32) -> String {
        format!(
            r#"{{"type":"hello","contract_version":{version},"worker":"w","version":"0","pid":1,"platform":"linux","capabilities":[]}}"#
        )
    }

    fn marker(seq: u64, phase: &str, request: Option<u64>) -> String {
        let req = request.map_or(String::new(), |r| format!(r#","request_id":{r}"#));
        format!(
            r#"{{"type":"marker","phase":"{phase}","seq":{seq}{req},"t_ns":1,"memory":{{"resident_bytes":1,"resident_peak_bytes":null,"footprint_bytes":null,"footprint_peak_bytes":null,"compressed_bytes":null,"swap_bytes":null,"virtual_bytes":1,"rss_anon_bytes":null,"rss_file_bytes":null,"rss_shmem_bytes":null,"peak_reset":null}}}}"#
        )
    }

    fn result(request: u64) -> String {
        format!(
            r#"{{"type":"result","request_id":{request},"latency_ns":5,"body":{{"kind":"calibration","held_bytes":0,"leaked_bytes":0,"spike_bytes":0,"spike_resident_ns":null,"spike_freed_ns":null}}}}"#
        )
    }

    fn full_run() -> Vec<String> {
        let mut v = vec![hello(CONTRACT_VERSION)];
        for (i, p) in [
            "process_start",
            "model_loaded",
            "state_ready",
            "warmup_done",
        ]
        .iter()
        .enumerate()
        {
            v.push(marker(i as u64, p, None));
        }
        v.push(marker(4, "request_begin", Some(0)));
        v.push(marker(5, "request_end", Some(0)));
        v.push(result(0));
        v.push(marker(6, "idle_end", None));
        v.push(marker(7, "teardown_done", None));
        v.push(r#"{"type":"bye","requests":1}"#.into());
        v
    }

    #[test]
    fn a_clean_run_is_recorded_without_violations() {
        let (r, dir) = feed(&full_run());
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert!(r.bye);
        assert_eq!((r.markers, r.results), (8, 1));
        assert!(dir.path().join(files::HELLO).exists());
        let markers = std::fs::read_to_string(dir.path().join(files::MARKERS)).unwrap();
        assert_eq!(markers.lines().count(), 8);
    }

    fn settled(request: u64) -> String {
        format!(
            r#"{{"type":"settled","request_id":{request},"settle_ms":200,"t_ns":9,"memory":{{"resident_bytes":4096,"virtual_bytes":8192}}}}"#
        )
    }

    #[test]
    fn settled_snapshots_follow_their_request_end() {
        let mut lines = full_run();
        lines.insert(8, settled(0)); // after request_end 0 and its result
        let (r, dir) = feed(&lines);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.settled, 1);
        let text = std::fs::read_to_string(dir.path().join(files::SETTLED)).unwrap();
        let s: worker_contract::Settled = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            (s.request_id, s.settle_ms, s.memory.resident_bytes),
            (0, 200, 4096)
        );

        // Before the request ended, or naming another request: refused.
        let mut lines = full_run();
        lines.insert(6, settled(0)); // between request_begin and request_end
        lines.insert(9, settled(1));
        let (r, dir) = feed(&lines);
        assert_eq!(
            r.violations,
            [
                "message line 7: `settled` for request 0 is not right after that request's `request_end`",
                "message line 10: `settled` for request 1 is not right after that request's `request_end`",
            ]
        );
        assert!(!dir.path().join(files::SETTLED).exists());
        // Arms without a settle period get no file.
        let (_, dir) = feed(&full_run());
        assert!(!dir.path().join(files::SETTLED).exists());
    }

    #[test]
    fn hello_must_come_first_once_and_in_our_version() {
        let mut lines = full_run();
        lines.swap(0, 1);
        let (r, _d) = feed(&lines);
        assert_eq!(
            r.violations[0],
            "message line 1: first message is `marker`, expected `hello`"
        );

        let mut lines = full_run();
        lines[0] = hello(CONTRACT_VERSION + 1);
        let (r, _d) = feed(&lines);
        let expected = format!(
            "contract version {}, memqual speaks {CONTRACT_VERSION}",
            CONTRACT_VERSION + 1
        );
        assert!(r.violations[0].contains(&expected), "{:?}", r.violations);

        let mut lines = full_run();
        lines.insert(1, hello(CONTRACT_VERSION));
        let (r, _d) = feed(&lines);
        assert_eq!(r.violations, ["message line 2: a second `hello`"]);
    }

    #[test]
    fn nothing_may_follow_bye_and_bye_needs_teardown() {
        let mut lines = full_run();
        lines.push(r#"{"type":"log","level":"info","message":"late"}"#.into());
        let (r, _d) = feed(&lines);
        assert_eq!(r.violations, ["message line 12: `log` after `bye`"]);

        let mut lines = full_run();
        lines.remove(9); // teardown_done
        let (r, _d) = feed(&lines);
        assert_eq!(
            r.violations,
            ["message line 10: `bye` before `teardown_done`"]
        );
    }

    #[test]
    fn placement_comes_once_after_teardown_and_is_written_for_the_receipt() {
        let planned = r#"{"type":"placement","status":"not_attributable","reason":"not attributable: MLComputePlan needs macOS 14.4 or iOS 17.4"}"#;
        let mut lines = full_run();
        lines.insert(10, planned.into()); // after teardown_done, before bye
        let (r, dir) = feed(&lines);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert!(r.placement);
        let text = std::fs::read_to_string(dir.path().join(files::COREML_PLACEMENT)).unwrap();
        let p: worker_contract::CoremlPlacement = serde_json::from_str(&text).unwrap();
        assert_eq!(
            p,
            worker_contract::CoremlPlacement::not_attributable(
                "not attributable: MLComputePlan needs macOS 14.4 or iOS 17.4"
            )
        );

        // Inside the measured phases, twice, or the runtime report's promise: refused.
        let mut lines = full_run();
        lines.insert(8, planned.into()); // after request 0's result, before idle_end
        lines.insert(11, planned.into());
        lines.insert(12, planned.into());
        lines.insert(
            13,
            r#"{"type":"placement","status":"after_teardown"}"#.into(),
        );
        let (r, dir) = feed(&lines);
        assert_eq!(
            r.violations,
            [
                "message line 9: `placement` before `teardown_done`",
                "message line 13: a second `placement`",
                "message line 14: `placement` says `after_teardown`, which only a runtime report may",
            ]
        );
        assert!(dir.path().join(files::COREML_PLACEMENT).exists());
    }

    #[test]
    fn a_result_for_a_request_that_never_began_is_refused() {
        let mut lines = full_run();
        lines[7] = result(3);
        let (r, dir) = feed(&lines);
        assert_eq!(
            r.violations,
            ["message line 8: result for request 3 that never began"]
        );
        assert_eq!(r.results, 0);
        let results = std::fs::read_to_string(dir.path().join(files::RESULTS)).unwrap();
        assert!(results.is_empty(), "a refused result is not recorded");
    }

    #[test]
    fn a_message_line_beyond_the_limit_is_skipped_without_being_held() {
        let big = vec![b'x'; MAX_MESSAGE_BYTES as usize + 10];
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend_from_slice(&big);
        input.extend_from_slice(b"\nnext\n");
        let mut reader = std::io::BufReader::new(&input[..]);
        let mut buf = Vec::new();
        assert!(matches!(
            read_message(&mut reader, &mut buf),
            Ok(Message::Line)
        ));
        assert_eq!(buf, b"{\"a\":1}\n");
        assert!(matches!(
            read_message(&mut reader, &mut buf),
            Ok(Message::TooLong)
        ));
        assert!(buf.capacity() as u64 <= 2 * (MAX_MESSAGE_BYTES + 1));
        assert!(matches!(
            read_message(&mut reader, &mut buf),
            Ok(Message::Line)
        ));
        assert_eq!(buf, b"next\n");
        assert!(matches!(
            read_message(&mut reader, &mut buf),
            Ok(Message::End)
        ));
    }

    #[test]
    fn logs_and_errors_reach_worker_log() {
        let mut lines = full_run();
        lines.insert(
            1,
            r#"{"type":"log","level":"warn","message":"careful"}"#.into(),
        );
        lines.insert(2, r#"{"type":"error","message":"model missing"}"#.into());
        let (r, dir) = feed(&lines);
        assert_eq!(r.worker_errors, ["model missing"]);
        let log = std::fs::read_to_string(dir.path().join(files::WORKER_LOG)).unwrap();
        assert!(
            log.lines().next().unwrap().ends_with(" WARN careful"),
            "{log}"
        );
        assert!(
            log.lines()
                .nth(1)
                .unwrap()
                .ends_with(" ERROR model missing"),
            "{log}"
        );
    }
}
