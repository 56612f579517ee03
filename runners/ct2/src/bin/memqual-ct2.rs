//! `memqual-ct2`: the CTranslate2 worker. Started by `memqual run` for an
//! arm with `runtime = "ctranslate2"`; reads its arm spec on stdin and writes
//! contract messages to fd 3, exactly as `memqual-whisper` does. Every error
//! goes to memqual over fd 3 (when it is open) and to stderr, and sets the
//! exit code. `memqual-ct2 --capabilities` prints what this build can do.

use runners::last_words::{fail, print_stdout, say};
use runners::session::WorkerSession;
use runners::whisper::require_capabilities;
use runners_ct2::run::{CT2RS_VERSION, WORKER_NAME, capabilities, run};
use std::process::ExitCode;
use worker_contract::{EXIT_NOT_RUNNABLE, Runtime, WorkerSpec, read_spec};

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--capabilities") {
        let caps = serde_json::json!({
            "worker": WORKER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "ct2rs": CT2RS_VERSION,
            "features": [],
            "capabilities": capabilities(),
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
    let spec = read_spec(std::io::stdin());
    let caps = capabilities();
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
            "this worker runs CTranslate2 arms, not {:?}",
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    };
    if ws.runtime != Runtime::Ctranslate2 {
        return fail(
            WORKER_NAME,
            &mut session,
            "this worker runs runtime = \"ctranslate2\" arms",
            2,
        );
    }
    if let Err(e) = ws.validate() {
        return fail(
            WORKER_NAME,
            &mut session,
            &format!("invalid whisper spec: {e}"),
            2,
        );
    }
    if let Err(e) = require_capabilities(WORKER_NAME, &ws.requires, &caps) {
        return fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        );
    }
    match run(&spec, ws, &mut session) {
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
