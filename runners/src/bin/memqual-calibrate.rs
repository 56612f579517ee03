//! `memqual-calibrate`: the calibration worker. Started by `memqual run`;
//! reads its arm spec on stdin and writes contract messages to fd 3. Every
//! error goes to memqual over fd 3 (when it is open) and to stderr, and
//! sets the exit code; a failed write to stderr never ends the worker.

use runners::calibrate::{self, CAPABILITIES, WORKER_NAME};
use runners::calibrate_metal::NoMetal;
use runners::last_words::{fail, finish, open_session};
use std::process::ExitCode;
use worker_contract::{EXIT_NOT_RUNNABLE, Misbehaviour, WorkerSpec};

fn main() -> ExitCode {
    let (mut session, spec) = match open_session(WORKER_NAME, &CAPABILITIES) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let WorkerSpec::Calibrate(cal) = &spec.worker else {
        let message = format!(
            "this worker runs calibration arms; {} runs this one",
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    };
    match calibrate::run(&spec, cal, &mut session) {
        // The misbehaviour under test: a worker that ends without `bye`.
        Ok(_) if cal.misbehave == Some(Misbehaviour::NoBye) => ExitCode::SUCCESS,
        // No Metal here: refused before the first marker, so NOT_RUNNABLE.
        Err(e) if e.is::<NoMetal>() => fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        ),
        result => finish(WORKER_NAME, session, result),
    }
}
