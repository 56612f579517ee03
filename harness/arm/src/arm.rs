//! The executor: runs one arm's worker, watches it, times it out, and
//! streams everything it says into the arm's directory. It never prints.

use crate::block_toggle::BlockToggle;
use crate::probes::MarkerHook;
use crate::probes::Probes;
use crate::reader::{ChannelReader, Event, ReaderReport};
use crate::watchdog::Watchdog;
use command_fds::{CommandFdExt, FdMapping};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use protocol::Arm;
use reports::attribution::AttributionMode;
use reports::record::{ArmOutcome, ArmStatus, ExitInfo, files};
use run_dir::{CsvAppender, Rel, RunDir, RunDirError};
use sampler::{ExternalSampler, SamplerConfig, clock};
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use worker_contract::{
    ArmSpec, CONTRACT_VERSION, EXIT_NOT_RUNNABLE, HeapProfiling, LG_PROF_SAMPLE, MESSAGE_FD,
    SamplerSchedule,
};

/// Harness-side failures that stop an arm before its worker could run.
#[derive(Debug, thiserror::Error)]
pub enum ArmSetupError {
    /// The arm's folder in the run directory could not be created or written.
    #[error(transparent)]
    Create(#[from] RunDirError),
    /// The worker could not be started: creating its message pipe or
    /// lifeline, or spawning `exe`, failed.
    #[error("cannot start worker {exe}: {source}")]
    Spawn {
        /// Path of the worker executable.
        exe: PathBuf,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },
    /// The arm sets `memory_ceiling` but is run without the external
    /// sampler, whose watchdog enforces it.
    #[error(
        "arm {arm}: memory_ceiling needs the external sampler's watchdog, and this run of the \
         arm has no sampler; the worker was not started"
    )]
    CeilingUnwatched {
        /// The arm id.
        arm: String,
    },
}

fn describe_exit(status: &ExitStatus) -> ExitInfo {
    let signal = status.signal();
    ExitInfo {
        code: status.code(),
        signal,
        signal_name: signal
            .and_then(|s| Signal::try_from(s).ok())
            .map(|s| s.as_str().to_string()),
    }
}

/// Kill the worker's whole process group (it leads its own group).
fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // ESRCH (already gone) is the expected case after a normal exit.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// How often the watcher checks for an interrupt while the worker runs.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// What watches the worker besides its own markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// The measured run: external sampler, tool snapshots and census.
    Full,
    /// The external sampler only (the overhead block run).
    SamplerOnly,
    /// Nothing outside the worker (no series file).
    MarkersOnly,
}

/// Run `arm` with the worker at `exe`, writing into its folder `dir` of
/// `run` (which exists). When `interrupted` becomes true (Ctrl-C), the worker
/// is killed and the arm ends as failed with everything observed so far.
pub fn execute(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    interrupted: &AtomicBool,
) -> Result<ArmOutcome, ArmSetupError> {
    execute_observed(arm, exe, run, dir, interrupted, Observation::Full)
}

/// [`execute`], watched only as `observation` says.
pub fn execute_observed(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    interrupted: &AtomicBool,
    observation: Observation,
) -> Result<ArmOutcome, ArmSetupError> {
    execute_with(arm, exe, run, dir, interrupted, observation, None)
}

/// The overhead gate's block run: the sampler only, switched on and off
/// between blocks of requests by `toggle`'s marker hook.
pub fn execute_blocks(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    interrupted: &AtomicBool,
    toggle: &BlockToggle,
) -> Result<ArmOutcome, ArmSetupError> {
    execute_with(
        arm,
        exe,
        run,
        dir,
        interrupted,
        Observation::SamplerOnly,
        Some(toggle),
    )
}

fn execute_with(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    interrupted: &AtomicBool,
    observation: Observation,
    toggle: Option<&BlockToggle>,
) -> Result<ArmOutcome, ArmSetupError> {
    // A ceiling nothing watches would be a promise nobody keeps.
    if arm.memory_ceiling.is_some() && observation == Observation::MarkersOnly {
        return Err(ArmSetupError::CeilingUnwatched {
            arm: arm.id.clone(),
        });
    }
    let scratch = dir.join(files::SCRATCH);
    run.create_dir(&scratch)?;
    // The worker opens its scratch folder itself, from its own working directory.
    let scratch_path =
        std::path::absolute(run.display(&scratch)).map_err(|source| RunDirError::Io {
            op: "resolve",
            path: run.display(&scratch),
            error: source,
        })?;
    let toggle_every = toggle.and_then(BlockToggle::worker_toggles_every);
    let spec_with = |sampler, attribution| ArmSpec {
        contract_version: CONTRACT_VERSION,
        arm_id: arm.id.clone(),
        scratch_dir: scratch_path.clone(),
        sampler,
        settle_ms: arm.settle_ms,
        lifecycle: arm.lifecycle,
        attribution,
        worker: arm.worker.clone(),
    };
    let profiled = match arm.attribution {
        AttributionMode::Off => None,
        AttributionMode::Allocations => match profile(run, dir, toggle_every)? {
            (_, Ok(p)) => Some(p),
            // Never run unattributed what asked to be attributed: the spec
            // it would have run with is kept, so the receipt says what was asked.
            (heap, Err(why)) => {
                let spec = spec_with(
                    None,
                    Some(HeapProfiling::Jemalloc {
                        dir: heap,
                        lg_prof_sample: LG_PROF_SAMPLE,
                        toggle_every,
                    }),
                );
                let mut failure = vec![why];
                if let Err(e) = run.write_json(&dir.join(files::SPEC), &spec) {
                    failure.push(e.to_string());
                }
                return Ok(not_runnable(arm, exe, run, &scratch, failure));
            }
        },
    };
    let (mut cmd, pipe_reader) = worker_command(exe, run, dir, profiled.as_ref())?;
    // Everything that can fail before the worker exists fails here, so no
    // error path below can leave a spawned worker behind.
    let series = match observation {
        Observation::MarkersOnly => None,
        _ => Some(CsvAppender::new(run.appender(&dir.join(files::SERIES))?)),
    };
    let started_ns = clock::monotonic_ns();
    let spawned = cmd.spawn();
    // The command holds the parent's copy of the pipe's write end: drop it so
    // the reader sees end-of-file when the worker (and its children) exit.
    drop(cmd);
    let mut child = spawned.map_err(|source| ArmSetupError::Spawn {
        exe: exe.to_path_buf(),
        source,
    })?;
    let pid = child.id();
    let watchdog = arm
        .memory_ceiling
        .map(|bytes| Arc::new(Watchdog::new(bytes, pid)));
    let mut failure: Vec<String> = Vec::new();
    let probes = if observation == Observation::Full {
        let (probes, errors) = Probes::start(arm, pid, run, dir);
        failure.extend(errors);
        Some(probes)
    } else {
        None
    };

    let (sampler, schedule) =
        start_series(arm, pid, toggle, watchdog.as_ref(), series, &mut failure);
    let spec = spec_with(schedule, profiled.as_ref().map(|p| p.spec.clone()));
    send_spec(run, dir, &mut child, &spec, &mut failure);

    let (tx, rx) = mpsc::channel::<Event>();
    let reader = ChannelReader::start_observed(
        pipe_reader,
        run,
        dir,
        tx.clone(),
        watched(
            watchdog.clone(),
            malloc_history_hook(
                profiled.as_ref(),
                pid,
                run,
                dir,
                toggle
                    .map(BlockToggle::hook)
                    .or_else(|| probes.as_ref().and_then(Probes::hook)),
            ),
        ),
    );
    let waiter_tx = tx;
    std::thread::spawn(move || {
        let _ = waiter_tx.send(Event::Exited(child.wait()));
    });
    let (status, stops) = wait_for_exit(&rx, arm, pid, interrupted, &mut failure);
    // Never leave a straggler alive into the next arm.
    kill_group(pid);
    let ended = Ended {
        pid,
        started_ns,
        ended_ns: clock::monotonic_ns(),
        status,
        stops,
        sampler: sampler.and_then(Result::ok).map(ExternalSampler::stop),
        report: reader.join(),
        probes,
        watchdog,
        profiled: profiled.is_some(),
    };
    Ok(conclude(arm, exe, run, dir, &scratch, ended, failure))
}

/// What the harness knows once the worker has exited and its watchers
/// have stopped.
struct Ended {
    pid: u32,
    started_ns: u64,
    ended_ns: u64,
    status: std::io::Result<ExitStatus>,
    stops: Stops,
    sampler: Option<sampler::SamplerStats>,
    report: ReaderReport,
    probes: Option<Probes>,
    watchdog: Option<Arc<Watchdog>>,
    profiled: bool,
}

/// The arm's outcome from what `ended` saw, every failure found so far
/// (`failure`) and those found now: series rows not written, a crossed
/// memory ceiling, the worker's own account judged against its exit.
fn conclude(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    scratch: &Rel,
    ended: Ended,
    mut failure: Vec<String>,
) -> ArmOutcome {
    let Ended {
        pid,
        started_ns,
        ended_ns,
        status,
        stops,
        sampler,
        report,
        probes,
        watchdog,
        profiled,
    } = ended;
    if let Some(s) = &sampler
        && s.sink_errors > 0
    {
        failure.push(format!(
            "{} series rows could not be written: {}",
            s.sink_errors,
            s.first_error.as_deref().unwrap_or("unknown error")
        ));
    }
    if let Some(probes) = probes {
        failure.extend(probes.finish());
    }
    let exit = match &status {
        Ok(s) => Some(describe_exit(s)),
        Err(e) => {
            failure.push(format!("could not wait for the worker: {e}"));
            None
        }
    };
    let period_ns = sampler.as_ref().map_or(
        u64::try_from(arm.period.as_nanos()).unwrap_or(u64::MAX),
        |s| s.period_ns,
    );
    let memory_ceiling = watchdog.map(|w| w.record(period_ns));
    let crossing = memory_ceiling
        .as_ref()
        .and_then(|r| Some((r.bytes, r.crossing.as_ref()?)));
    if let Some((bytes, crossing)) = crossing {
        failure.push(crate::watchdog::failure(bytes, crossing));
    }
    judge(
        &mut failure,
        exit.as_ref(),
        &report,
        stops.any() || crossing.is_some(),
    );
    tidy_up(run, dir, scratch, profiled, &report, &mut failure);
    ArmOutcome {
        id: arm.id.clone(),
        status: status_of(&failure, exit.as_ref(), &report),
        failure,
        worker_executable: exe.display().to_string(),
        worker_pid: Some(pid),
        hello: report.hello,
        exit,
        timed_out: stops.timed_out,
        timeout_s: arm.timeout.as_secs(),
        bye: report.bye,
        markers: report.markers,
        results: report.results,
        worker_errors: report.worker_errors,
        started_ns,
        ended_ns,
        sampler,
        memory_ceiling,
    }
}

/// Start the external sampler on the worker `pid`, writing `series` (none:
/// nothing outside the worker watches it), before the worker has its spec:
/// the worker is blocked on stdin until then, so no phase can be missed.
/// Returns it with the schedule the worker is told. A sampler that cannot
/// start is a failure, and with a memory ceiling the worker is killed
/// before it runs.
fn start_series(
    arm: &Arm,
    pid: u32,
    toggle: Option<&BlockToggle>,
    watchdog: Option<&Arc<Watchdog>>,
    series: Option<CsvAppender>,
    failure: &mut Vec<String>,
) -> (
    Option<Result<ExternalSampler, sampler::SamplerError>>,
    Option<SamplerSchedule>,
) {
    let sampler = series.map(|series| {
        start_sampler(
            pid,
            (arm.period, arm.system_period),
            toggle,
            watchdog.cloned(),
            series,
        )
    });
    let schedule = match &sampler {
        Some(Ok(s)) => Some(SamplerSchedule {
            epoch_ns: s.epoch_ns(),
            period_ns: s.period_ns(),
        }),
        Some(Err(e)) => {
            failure.push(format!("external sampler could not start: {e}"));
            if watchdog.is_some() {
                // Unwatched, the ceiling would not hold: stop before the spec is sent.
                failure.push(
                    "memory ceiling not enforced without the external sampler; the worker's \
                     process group was killed before it ran"
                        .into(),
                );
                kill_group(pid);
            }
            None
        }
        None => None,
    };
    (sampler, schedule)
}

/// The worker's command, not yet spawned: its stdout and stderr files in
/// the arm's folder, its own process group, the message pipe's write end
/// and the lifeline at their descriptors, and the heap profiler's
/// environment when profiled; with the pipe's read end.
fn worker_command(
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    profiled: Option<&crate::attribution::Profiled>,
) -> Result<(Command, std::io::PipeReader), ArmSetupError> {
    let spawn_error = |source| ArmSetupError::Spawn {
        exe: exe.to_path_buf(),
        source,
    };
    let (pipe_reader, pipe_writer) = std::io::pipe().map_err(spawn_error)?;
    let mut cmd = Command::new(exe);
    cmd.stdin(Stdio::piped())
        .stdout(run.create_file(&dir.join(files::STDOUT))?)
        .stderr(run.create_file(&dir.join(files::STDERR))?)
        .process_group(0);
    if let Some(p) = profiled {
        cmd.envs(p.env.iter().map(|(k, v)| (k, v)));
    }
    let lifeline = crate::lifeline::fd_mapping().map_err(spawn_error)?;
    cmd.fd_mappings(vec![
        FdMapping {
            parent_fd: pipe_writer.into(),
            child_fd: MESSAGE_FD,
        },
        lifeline,
    ])
    .map_err(|e| spawn_error(std::io::Error::other(e.to_string())))?;
    Ok((cmd, pipe_reader))
}

/// Keep `spec` in the arm's folder and send it to the worker on its stdin;
/// what fails goes to `failure` (a worker whose stdin closes unsent fails on
/// an empty spec).
fn send_spec(
    run: &RunDir,
    dir: &Rel,
    child: &mut std::process::Child,
    spec: &ArmSpec,
    failure: &mut Vec<String>,
) {
    match serde_json::to_vec_pretty(spec) {
        Ok(spec_json) => {
            if let Err(e) = run.write_bytes(&dir.join(files::SPEC), &spec_json) {
                failure.push(e.to_string());
            }
            if let Some(mut stdin) = child.stdin.take()
                && let Err(e) = stdin.write_all(&spec_json)
            {
                failure.push(format!("could not send the arm spec to the worker: {e}"));
            }
        }
        Err(e) => failure.push(format!("cannot serialize the arm spec: {e}")),
    }
}

/// Why the harness killed the worker before it exited by itself.
#[derive(Debug, Default, Clone, Copy)]
struct Stops {
    timed_out: bool,
    violation: bool,
    interrupt: bool,
}

impl Stops {
    fn any(self) -> bool {
        self.timed_out || self.violation || self.interrupt
    }
}

/// Wait for the worker `pid` to exit, killing its process group on an
/// interrupt, a contract violation or the arm's timeout (each said in
/// `failure`); its exit status, and what stopped it.
fn wait_for_exit(
    rx: &mpsc::Receiver<Event>,
    arm: &Arm,
    pid: u32,
    interrupted: &AtomicBool,
    failure: &mut Vec<String>,
) -> (std::io::Result<ExitStatus>, Stops) {
    let deadline = protocol::limits::deadline_after(arm.timeout);
    let mut stops = Stops::default();
    let status = loop {
        if !stops.interrupt && interrupted.load(Ordering::SeqCst) {
            stops.interrupt = true;
            failure
                .push("interrupted (SIGINT/SIGTERM); the worker's process group was killed".into());
            kill_group(pid);
        }
        let to_deadline = deadline.saturating_duration_since(Instant::now());
        let wait = if stops.timed_out {
            INTERRUPT_POLL
        } else {
            to_deadline.min(INTERRUPT_POLL)
        };
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(status)) => break status,
            Ok(Event::Violation) => {
                // The reader records the reason; a worker that broke the
                // contract cannot be trusted to finish, so stop it now.
                if !stops.violation {
                    stops.violation = true;
                    kill_group(pid);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout)
                if stops.timed_out || Instant::now() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stops.timed_out = true;
                failure.push(format!(
                    "timed out after {} s; the worker's process group was killed",
                    arm.timeout.as_secs()
                ));
                kill_group(pid);
            }
            Err(_) => break Err(std::io::Error::other("lost track of the worker process")),
        }
    };
    (status, stops)
}

/// After the worker: its stderr's last line when it never said hello, the
/// heap profiles' symbols, and its scratch folder removed.
fn tidy_up(
    run: &RunDir,
    dir: &Rel,
    scratch: &Rel,
    profiled: bool,
    report: &ReaderReport,
    failure: &mut Vec<String>,
) {
    // A worker that never started (the loader could not find a library, a
    // binary for another machine) says why only on its stderr.
    if report.hello.is_none()
        && let Ok(Some(bytes)) = run.read_bytes(&dir.join(files::STDERR), STDERR_TAIL_LIMIT)
        && let Some(line) = last_stderr_line(&bytes)
    {
        failure.push(format!("its stderr ends: {line}"));
    }
    if profiled && let Err(e) = crate::attribution::symbolize(run, dir) {
        // The receipt then names sites by object and offset, and says so.
        crate::warn(format_args!(
            "memqual: warning: cannot write the heap profiles' symbols: {e}"
        ));
    }
    if let Err(e) = run.remove_tree(scratch) {
        // Not the worker's failure; the leftovers stay in the run, sealed.
        crate::warn(format_args!(
            "memqual: warning: cannot remove the worker's scratch folder: {e}"
        ));
    }
}

/// Completed without a failure; not runnable when the worker refused
/// before doing anything (it lacks what the arm needs); failed otherwise.
fn status_of(failure: &[String], exit: Option<&ExitInfo>, report: &ReaderReport) -> ArmStatus {
    if failure.is_empty() {
        ArmStatus::Completed
    } else if exit.is_some_and(|e| e.code == Some(EXIT_NOT_RUNNABLE)) && report.markers == 0 {
        ArmStatus::NotRunnable
    } else {
        ArmStatus::Failed
    }
}

/// The arm's `heap/` folder, made, and how its worker is profiled; the
/// inner `Err` says why it cannot be (jemalloc missing).
fn profile(
    run: &RunDir,
    dir: &Rel,
    toggle_every: Option<u32>,
) -> Result<(PathBuf, Result<crate::attribution::Profiled, String>), ArmSetupError> {
    let heap = crate::attribution::heap_dir(dir);
    run.create_dir(&heap)?;
    let path = std::path::absolute(run.display(&heap)).map_err(|source| RunDirError::Io {
        op: "resolve",
        path: run.display(&heap),
        error: source,
    })?;
    let profiled = crate::attribution::profiled(&path, toggle_every);
    Ok((path, profiled))
}

/// The outcome of an arm refused before its worker started: what it asked
/// for cannot be had on this host (`why`).
fn not_runnable(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    scratch: &Rel,
    why: Vec<String>,
) -> ArmOutcome {
    let _ = run.remove_tree(scratch);
    let now = clock::monotonic_ns();
    ArmOutcome {
        id: arm.id.clone(),
        status: ArmStatus::NotRunnable,
        failure: why.clone(),
        worker_executable: exe.display().to_string(),
        worker_pid: None,
        hello: None,
        exit: None,
        timed_out: false,
        timeout_s: arm.timeout.as_secs(),
        bye: false,
        markers: 0,
        results: 0,
        worker_errors: why,
        started_ns: now,
        ended_ns: now,
        sampler: None,
        memory_ceiling: None,
    }
}

/// macOS: `malloc_history PID -allBySize` at every profiled marker, kept as
/// `heap/<seq>-<phase>.malloc_history.txt`, before `hook` runs. Elsewhere,
/// and without attribution, `hook` alone.
fn malloc_history_hook(
    profiled: Option<&crate::attribution::Profiled>,
    pid: u32,
    run: &RunDir,
    dir: &Rel,
    hook: Option<MarkerHook>,
) -> Option<MarkerHook> {
    #[cfg(target_os = "macos")]
    if let Some(crate::attribution::Profiled {
        spec: worker_contract::HeapProfiling::MallocStackLogging,
        ..
    }) = profiled
    {
        let (run, heap) = (run.clone(), crate::attribution::heap_dir(dir));
        let mut hook = hook;
        return Some(Box::new(move |m| {
            if worker_contract::profiles_marker(m.phase, m.request_id) {
                crate::attribution::capture_malloc_history(&run, &heap, pid, m);
            }
            if let Some(h) = &mut hook {
                h(m);
            }
        }));
    }
    let _ = (profiled, pid, run, dir);
    hook
}

/// The reader's marker hook with the watchdog in front of it: a marker's own
/// peak reading is checked before anything else sees the marker.
fn watched(watchdog: Option<Arc<Watchdog>>, hook: Option<MarkerHook>) -> Option<MarkerHook> {
    let Some(watchdog) = watchdog else {
        return hook;
    };
    let mut hook = hook;
    Some(Box::new(move |m| {
        watchdog.on_marker(m);
        if let Some(h) = &mut hook {
            h(m);
        }
    }))
}

fn start_sampler(
    pid: u32,
    (period, system_period): (Duration, Duration),
    toggle: Option<&BlockToggle>,
    watchdog: Option<Arc<Watchdog>>,
    mut series: CsvAppender,
) -> Result<ExternalSampler, sampler::SamplerError> {
    let pid = i32::try_from(pid).map_err(|_| sampler::SamplerError::ProcessGone { pid: -1 })?;
    let mut cfg = SamplerConfig::new(pid, period);
    cfg.system_period = system_period;
    if let Some(t) = toggle {
        cfg.pause = Some(std::sync::Arc::clone(&t.pause));
        cfg.busy_per_tick = t.busy_per_tick;
    }
    // The watchdog sees each row on the tick's thread: a kill must not wait
    // for the disk. Rows are written by the sampler's writer thread, one
    // whole row per write: a killed harness loses only rows still queued
    // (none, unless the disk has fallen behind).
    ExternalSampler::start_observed(
        cfg,
        move |row| {
            if let Some(w) = &watchdog {
                w.on_row(row);
            }
        },
        move |row| series.append(row).map_err(std::io::Error::other),
    )
}

/// The most of a worker's stderr read to say why it never started.
const STDERR_TAIL_LIMIT: u64 = 1 << 20;

/// The last non-empty line of a worker's stderr, at most 400 characters.
fn last_stderr_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(match line.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    })
}

/// Everything that makes an arm a failure besides timeouts and violations.
fn judge(
    failure: &mut Vec<String>,
    exit: Option<&ExitInfo>,
    report: &ReaderReport,
    killed_by_us: bool,
) {
    failure.extend(
        report
            .violations
            .iter()
            .map(|v| format!("worker broke the contract: {v}")),
    );
    failure.extend(report.harness_errors.iter().cloned());
    for e in &report.worker_errors {
        failure.push(format!("worker reported an error: {e}"));
    }
    if let Some(exit) = exit
        && !killed_by_us
    {
        match (exit.code, &exit.signal_name, exit.signal) {
            (Some(0), _, _) => {}
            (Some(code), _, _) => failure.push(format!("worker exited with code {code}")),
            (None, Some(name), Some(n)) => {
                failure.push(format!("worker killed by signal {name} ({n})"))
            }
            (None, None, Some(n)) => failure.push(format!("worker killed by signal {n}")),
            _ => failure.push("worker ended without an exit code or signal".into()),
        }
    }
    if report.hello.is_none() && report.violations.is_empty() {
        failure.push("worker never said hello".into());
    }
    if !report.phases_complete {
        failure.push(format!(
            "phases incomplete: last phase {}, next expected {}",
            report.last_phase.as_deref().unwrap_or("none"),
            report.expected_next
        ));
    }
    if !report.bye && report.violations.is_empty() {
        failure.push("worker exited without `bye`".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_stderr_line_says_why_a_worker_never_started() {
        let loader = b"./memqual-whisper: error while loading shared libraries: libcublas.so.13: \
                       cannot open shared object file: No such file or directory\n\n";
        let line = last_stderr_line(loader).unwrap();
        assert!(
            line.ends_with(
                "libcublas.so.13: cannot open shared object file: No such file or directory"
            ),
            "{line}"
        );
        assert_eq!(last_stderr_line(b"\n  \n"), None);
        let long = "x".repeat(1000);
        assert_eq!(
            last_stderr_line(long.as_bytes()).unwrap().chars().count(),
            401
        );
        assert_eq!(
            last_stderr_line(b"first\n\xff last\n").unwrap(),
            "\u{fffd} last"
        );
    }

    #[test]
    fn a_ceiling_without_the_external_sampler_is_refused_before_the_worker_starts() {
        let text = "schema_version = 1\nname = \"t\"\n[[arm]]\nid = \"a\"\n\
                    memory_ceiling = \"64 MiB\"\n[arm.calibrate]\n";
        let protocol = protocol::parse_without_catalogs(text).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let dir = Rel::parse("a").unwrap();
        run.create_dir(&dir).unwrap();
        // A worker that does not exist: the refusal must come before any spawn.
        let err = execute_observed(
            &protocol.arms[0],
            Path::new("/nonexistent/memqual-calibrate"),
            &run,
            &dir,
            &AtomicBool::new(false),
            Observation::MarkersOnly,
        )
        .unwrap_err();
        assert!(
            matches!(err, ArmSetupError::CeilingUnwatched { .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "arm a: memory_ceiling needs the external sampler's watchdog, and this run of the \
             arm has no sampler; the worker was not started"
        );
        assert!(!tmp.path().join("run/a").join(files::SCRATCH).exists());
    }
}
