//! `memqual-whisper`: the whisper.cpp worker. Started by `memqual run`; reads
//! its arm spec on stdin and writes contract messages to fd 3. Every error
//! goes to memqual over fd 3 (when it is open) and to stderr, and sets the
//! exit code; a failed write to stderr or stdout never ends the worker.
//! `memqual-whisper --capabilities` prints what this build can do, as JSON:
//! its version, whisper.cpp's, the backend features and the capabilities.

use runners::last_words::{fail, print_stdout, say};
use runners::session::WorkerSession;
use runners::whisper::{self, WORKER_NAME};
use std::process::ExitCode;
use worker_contract::{EXIT_NOT_RUNNABLE, WorkerSpec, read_spec};

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--capabilities") {
        let caps = serde_json::json!({
            "worker": WORKER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "whisper_cpp": whisper::engine::runtime_version(),
            "features": whisper::features(),
            "capabilities": whisper::capabilities(),
        });
        return match print_stdout(&caps.to_string()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say(
                    WORKER_NAME,
                    &format!("cannot write the capabilities to stdout: {e}"),
                );
                ExitCode::from(1)
            }
        };
    }
    // Before anything else, so whisper.cpp's first line is captured too.
    whisper::logcapture::install();
    let spec = read_spec(std::io::stdin());
    let caps = whisper::capabilities();
    // The channel opens even for a bad spec, so that memqual hears why.
    let mut session = match WorkerSession::open(WORKER_NAME, &caps) {
        Ok(s) => s,
        Err(e) => {
            if let Err(spec_error) = &spec {
                say(WORKER_NAME, spec_error);
            }
            say(WORKER_NAME, &format!("{e:#}"));
            return ExitCode::from(2);
        }
    };
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return fail(WORKER_NAME, &mut session, &e, 2),
    };
    let WorkerSpec::Whisper(ws) = &spec.worker else {
        let message = format!(
            "this worker runs whisper arms, not {:?}",
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    };
    if let Err(e) = ws.validate() {
        return fail(
            WORKER_NAME,
            &mut session,
            &format!("invalid whisper spec: {e}"),
            2,
        );
    }
    if let Err(e) = whisper::check_runnable(ws) {
        return fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        );
    }
    match whisper::run(&spec, ws, &mut session) {
        Ok(requests) => match session.bye(requests) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say(WORKER_NAME, &format!("cannot send bye: {e:#}"));
                ExitCode::from(1)
            }
        },
        Err(e) => fail(WORKER_NAME, &mut session, &format!("{e:#}"), 1),
    }
}
