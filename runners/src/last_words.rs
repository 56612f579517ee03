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

/// One line `worker: message` on stderr, if stderr takes it.
pub fn say(worker: &str, message: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{worker}: {message}").and_then(|()| err.flush());
}

/// End with `message`: an `error` over the channel, the same line on stderr
/// (both best effort; neither can stop the other), and exit `code`.
pub fn fail(worker: &str, session: &mut WorkerSession, message: &str, code: u8) -> ExitCode {
    if let Err(e) = session.error(message) {
        say(worker, &format!("cannot send the error to memqual: {e:#}"));
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
