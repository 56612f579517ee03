//! How a worker ends: its error goes over the message channel (fd 3) first,
//! then to stderr, and its exit code carries the rest.
//!
//! Nothing here can panic on I/O: `eprintln!` panics when stderr cannot be
//! written (the worker's stderr is a file in the run directory, so a full
//! disk is enough), which would lose the exit code and the message. Writes
//! to stderr are best effort; the channel is what the harness relies on.

use crate::session::WorkerSession;
use std::io::Write;
use std::process::ExitCode;
use worker_contract::error_text;

/// One line `worker: message` on stderr, if stderr takes it.
pub fn say(worker: &str, message: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{worker}: {message}").and_then(|()| err.flush());
}

/// End with `message`: an `error` over the channel, the same line on stderr
/// (both best effort; neither can stop the other), and exit `code`.
pub fn fail(worker: &str, session: &mut WorkerSession, message: &str, code: u8) -> ExitCode {
    if let Err(e) = session.error(message) {
        say(
            worker,
            &format!(
                "cannot send the error to memqual: {}",
                error_text(e.as_ref())
            ),
        );
    }
    say(worker, message);
    ExitCode::from(code)
}

/// Print `text` and a newline on stdout; an error (stdout full or closed)
/// is returned, not a panic.
pub fn print_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// `--capabilities`: print `caps` (JSON) on stdout; exit 1 if it cannot.
pub fn print_capabilities(worker: &str, caps: &serde_json::Value) -> ExitCode {
    match print_stdout(&caps.to_string()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(
                worker,
                &format!("cannot write the capabilities to stdout: {e}"),
            );
            ExitCode::from(1)
        }
    }
}

/// A worker's start: read the arm spec on stdin and open the channel; under
/// allocation attribution, open the heap profiler (not runnable without it). The
/// channel opens even for a bad spec, so that memqual hears why; without a
/// channel the error goes to stderr only. `Err` is the exit code to end with.
pub fn open_session(
    worker: &str,
    caps: &[&str],
) -> Result<(WorkerSession, worker_contract::ArmSpec), ExitCode> {
    let spec = worker_contract::read_spec(std::io::stdin());
    let mut session = match WorkerSession::open(worker, caps) {
        Ok(s) => s,
        Err(e) => {
            if let Err(spec_error) = &spec {
                say(worker, spec_error);
            }
            say(worker, &error_text(e.as_ref()));
            return Err(ExitCode::from(2));
        }
    };
    match spec {
        Ok(spec) => match spec.attribution.as_ref().map(|a| session.profile_heap(a)) {
            // Attribution asked for and impossible: never run unattributed.
            Some(Err(e)) => Err(fail(
                worker,
                &mut session,
                &e.to_string(),
                worker_contract::EXIT_NOT_RUNNABLE as u8,
            )),
            _ => Ok((session, spec)),
        },
        Err(e) => Err(fail(worker, &mut session, &e, 2)),
    }
}

/// A worker's end: `bye` with the request count after a run that
/// succeeded, the run's error otherwise.
pub fn finish(worker: &str, mut session: WorkerSession, run: anyhow::Result<u64>) -> ExitCode {
    match run {
        Ok(requests) => match session.bye(requests) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say(
                    worker,
                    &format!("cannot send bye: {}", error_text(e.as_ref())),
                );
                ExitCode::from(1)
            }
        },
        Err(e) => fail(worker, &mut session, &error_text(e.as_ref()), 1),
    }
}
