//! The `memqual` process's exit codes (documented in `--help` and the README).
//!
//! Every exit goes through this module: `main` returns the code of a
//! [`Failure`], of a verdict or of [`command_line`]; only [`now`] ends the
//! process from elsewhere (the signal handler's second signal).

/// The run verdict is PASS: every judged arm passed every gate (without
/// gates: every arm completed; for `calibrate`: every check passed).
pub const PASS: u8 = 0;
/// A gate failed or could not be evaluated, so the verdict is not PASS
/// (without gates: an arm failed; `calibrate`: a check failed).
pub const ARM_FAILED: u8 = 1;
/// Bad command line or protocol: nothing was run.
pub const USAGE: u8 = 2;
/// memqual itself failed (could not write the run directory, spawn, …), or
/// quiet-host admission refused the host without `--force`.
pub const HARNESS: u8 = 3;

/// Interrupted (SIGINT or SIGTERM): the receipt holds what was collected.
pub const INTERRUPTED: u8 = 130;

/// A failure with the exit code it maps to.
pub struct Failure {
    /// The process exit code: `USAGE`, `HARNESS`, `ARM_FAILED`, …
    pub code: u8,
    /// What failed, printed with its context chain.
    pub error: anyhow::Error,
}

/// A usage or input error (exit 2).
pub fn usage(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: USAGE,
        error: error.into(),
    }
}

/// memqual itself failed (exit 3).
pub fn harness(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: HARNESS,
        error: error.into(),
    }
}

/// A run directory that could not be created: the user's to fix (exit 2)
/// when the folder is taken (not empty, a link, busy, claimed), memqual's
/// otherwise (exit 3).
pub fn creating_run_dir(error: run_dir::RunDirError) -> Failure {
    use run_dir::RunDirError as E;
    match error {
        E::NotEmpty { .. } | E::OutLink { .. } | E::Busy { .. } | E::Claimed { .. } => usage(error),
        other => harness(other),
    }
}

/// A check did not hold (exit 1), with the reason.
pub fn failed(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: ARM_FAILED,
        error: error.into(),
    }
}

/// The code for a command line clap did not accept, or for `--help` and
/// `--version`, which clap reports the same way: `USAGE` (clap's own 2)
/// when it printed an error, `PASS` when it printed what was asked.
pub fn command_line(error: &clap::Error) -> u8 {
    if error.use_stderr() { USAGE } else { PASS }
}

/// End the process at once with `code`, from where `main` cannot return it
/// (a signal handler).
pub fn now(code: u8) -> ! {
    std::process::exit(i32::from(code))
}

/// The text `--help` shows.
pub const HELP: &str = "Exit status: 0 the run verdict is PASS (every judged arm passed \
every gate; a protocol without gates: every arm completed; calibrate: every check passed); \
1 a gate failed or could not be evaluated (without gates: an arm failed; calibrate: a check \
failed); 2 usage or protocol error, nothing run; 3 memqual itself failed, or the host was not \
quiet (admission refused it; --force runs anyway and the arms fail validity); 130 interrupted \
(Ctrl-C or SIGTERM: the worker is killed and the receipt still written from what was collected; \
a second Ctrl-C quits at once).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_command_line_is_a_usage_error_and_help_is_a_pass() {
        let cli = || clap::Command::new("memqual").version("1");
        for (args, code) in [
            (&["memqual", "--no-such-flag"][..], USAGE),
            (&["memqual", "--help"][..], PASS),
            (&["memqual", "--version"][..], PASS),
        ] {
            let error = cli().try_get_matches_from(args).expect_err("clap stops");
            assert_eq!(command_line(&error), code, "{args:?}");
            assert_eq!(i32::from(code), error.exit_code(), "clap's own code");
        }
    }

    /// No file of the harness ends the process but this one.
    #[test]
    fn only_this_module_calls_process_exit() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        let mut folders = vec![src.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") && path != src.join("exit.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let calls = ["process::exit(", ".exit()"];
                    if calls.iter().any(|c| text.contains(c)) {
                        found.push(path);
                    }
                }
            }
        }
        assert!(found.is_empty(), "exit outside exit.rs: {found:?}");
    }
}
