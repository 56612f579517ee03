//! `memqual-calibrate`: the calibration worker. Started by `memqual run`;
//! reads its arm spec on stdin and writes contract messages to fd 3.

use runners::calibrate::{self, CAPABILITIES, WORKER_NAME};
use runners::session::WorkerSession;
use std::process::ExitCode;
use worker_contract::{Misbehaviour, WorkerSpec, read_spec};

fn main() -> ExitCode {
    let spec = match read_spec(std::io::stdin()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{WORKER_NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut session = match WorkerSession::open(WORKER_NAME, &CAPABILITIES) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{WORKER_NAME}: {e:#}");
            return ExitCode::from(2);
        }
    };
    let WorkerSpec::Calibrate(cal) = &spec.worker else {
        let message = format!(
            "this worker runs calibration arms; {} runs this one",
            spec.worker.executable_name()
        );
        eprintln!("{WORKER_NAME}: {message}");
        let _ = session.error(message);
        return ExitCode::from(2);
    };
    match calibrate::run(&spec, cal, &mut session) {
        Ok(requests) => {
            if cal.misbehave == Some(Misbehaviour::NoBye) {
                return ExitCode::SUCCESS;
            }
            match session.bye(requests) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{WORKER_NAME}: cannot send bye: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            let message = format!("{e:#}");
            eprintln!("{WORKER_NAME}: {message}");
            let _ = session.error(message);
            ExitCode::from(1)
        }
    }
}
