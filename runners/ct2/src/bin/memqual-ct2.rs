//! `memqual-ct2`: the CTranslate2 worker. Started by `memqual run` for an
//! arm with `runtime = "ctranslate2"`; reads its arm spec on stdin and writes
//! contract messages to fd 3, exactly as `memqual-whisper` does. Every error
//! goes to memqual over fd 3 (when it is open) and to stderr, and sets the
//! exit code. `memqual-ct2 --capabilities` prints what this build can do.

use runners::last_words::{fail, finish, open_session, print_capabilities};
use runners_ct2::run::{CT2RS_VERSION, WORKER_NAME, capabilities, check_device, run};
use std::process::ExitCode;
use worker_contract::capabilities::require_capabilities;
use worker_contract::{EXIT_NOT_RUNNABLE, Runtime, WorkerSpec};

fn main() -> ExitCode {
    let caps = capabilities();
    if std::env::args().nth(1).as_deref() == Some("--capabilities") {
        let json = serde_json::json!({
            "worker": WORKER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "ct2rs": CT2RS_VERSION,
            "features": if cfg!(feature = "cuda") { vec!["cuda"] } else { vec![] },
            "capabilities": caps,
        });
        return print_capabilities(WORKER_NAME, &json);
    }
    let (mut session, spec) = match open_session(WORKER_NAME, &caps) {
        Ok(opened) => opened,
        Err(code) => return code,
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
    if let Err(e) =
        require_capabilities(WORKER_NAME, &ws.requires, &caps).and_then(|()| check_device(ws))
    {
        return fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        );
    }
    let result = run(&spec, ws, &mut session);
    finish(WORKER_NAME, session, result)
}
