//! `memqual-whisper`: the whisper.cpp worker. Started by `memqual run`; reads
//! its arm spec on stdin and writes contract messages to fd 3.
//! `memqual-whisper --capabilities` prints what this build can do, as JSON.

use runners::session::WorkerSession;
use runners::whisper::{self, WORKER_NAME};
use std::process::ExitCode;
use worker_contract::{EXIT_NOT_RUNNABLE, WorkerSpec, read_spec};

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--capabilities") {
        println!(
            "{}",
            serde_json::json!({ "worker": WORKER_NAME, "capabilities": whisper::capabilities() })
        );
        return ExitCode::SUCCESS;
    }
    // Before anything else, so whisper.cpp's first line is captured too.
    whisper::logcapture::install();
    let spec = match read_spec(std::io::stdin()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{WORKER_NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    let caps = whisper::capabilities();
    let mut session = match WorkerSession::open(WORKER_NAME, &caps) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{WORKER_NAME}: {e:#}");
            return ExitCode::from(2);
        }
    };
    let fail = |session: &mut WorkerSession, message: String, code: u8| {
        eprintln!("{WORKER_NAME}: {message}");
        let _ = session.error(message);
        ExitCode::from(code)
    };
    let WorkerSpec::Whisper(ws) = &spec.worker else {
        return fail(
            &mut session,
            format!(
                "this worker runs whisper arms, not {:?}",
                spec.worker.executable_name()
            ),
            2,
        );
    };
    if let Err(e) = ws.validate() {
        return fail(&mut session, format!("invalid whisper spec: {e}"), 2);
    }
    if let Err(e) = whisper::check_runnable(ws) {
        return fail(&mut session, e.to_string(), EXIT_NOT_RUNNABLE as u8);
    }
    match whisper::run(&spec, ws, &mut session) {
        Ok(requests) => match session.bye(requests) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{WORKER_NAME}: cannot send bye: {e:#}");
                ExitCode::from(1)
            }
        },
        Err(e) => fail(&mut session, format!("{e:#}"), 1),
    }
}
