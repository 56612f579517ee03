//! `memqual-calibrate`: the calibration worker. Started by `memqual run`;
//! reads its arm spec on stdin and writes contract messages to fd 3. Every
//! error goes to memqual over fd 3 (when it is open) and to stderr, and
//! sets the exit code; a failed write to stderr never ends the worker.

use runners::calibrate::{self, CAPABILITIES, WORKER_NAME};
use runners::last_words::{fail, say};
use runners::session::WorkerSession;
use std::process::ExitCode;
use worker_contract::{Misbehaviour, WorkerSpec, read_spec};

fn main() -> ExitCode {
    let spec = read_spec(std::io::stdin());
    // The channel opens even for a bad spec, so that memqual hears why.
    let mut session = match WorkerSession::open(WORKER_NAME, &CAPABILITIES) {
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
    let WorkerSpec::Calibrate(cal) = &spec.worker else {
        let message = format!(
            "this worker runs calibration arms; {} runs this one",
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    };
    match calibrate::run(&spec, cal, &mut session) {
        Ok(requests) => {
            if cal.misbehave == Some(Misbehaviour::NoBye) {
                return ExitCode::SUCCESS;
            }
            match session.bye(requests) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    say(WORKER_NAME, &format!("cannot send bye: {e:#}"));
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => fail(WORKER_NAME, &mut session, &format!("{e:#}"), 1),
    }
}
