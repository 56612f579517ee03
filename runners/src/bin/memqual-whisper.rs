//! `memqual-whisper`: the whisper.cpp worker. Started by `memqual run`; reads
//! its arm spec on stdin and writes contract messages to fd 3. Every error
//! goes to memqual over fd 3 (when it is open) and to stderr, and sets the
//! exit code; a failed write to stderr or stdout never ends the worker.
//! `memqual-whisper --capabilities` prints what this build can do, as JSON:
//! its version, whisper.cpp's, the backend features and the capabilities.

use runners::last_words::{fail, finish, open_session, print_capabilities};
use runners::whisper::{self, WORKER_NAME};
use std::process::ExitCode;
use worker_contract::{EXIT_NOT_RUNNABLE, WorkerSpec};

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--capabilities") {
        let json = serde_json::json!({
            "worker": WORKER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "whisper_cpp": whisper::engine::runtime_version(),
            "features": whisper::features(),
            "capabilities": whisper::capabilities(),
        });
        return print_capabilities(WORKER_NAME, &json);
    }
    // Before anything else, so whisper.cpp's first line is captured too.
    whisper::logcapture::install();
    let (mut session, spec) = match open_session(WORKER_NAME, &whisper::capabilities()) {
        Ok(opened) => opened,
        Err(code) => return code,
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
    let result = whisper::run(&spec, ws, &mut session);
    finish(WORKER_NAME, session, result)
}
