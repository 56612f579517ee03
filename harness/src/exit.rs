//! The `memqual` process's exit codes (documented in `--help` and the README).

/// Every arm completed (and, for `calibrate`, every check passed).
pub const PASS: u8 = 0;
/// At least one arm failed (or a calibration check failed).
pub const ARM_FAILED: u8 = 1;
/// Bad command line or protocol: nothing was run.
pub const USAGE: u8 = 2;
/// memqual itself failed (could not write the run directory, spawn, …).
pub const HARNESS: u8 = 3;

/// Interrupted (SIGINT or SIGTERM): the receipt holds what was collected.
pub const INTERRUPTED: u8 = 130;

/// The text `--help` shows.
pub const HELP: &str = "Exit status: 0 every arm completed (calibrate: every check passed); \
1 an arm failed (calibrate: a check failed); 2 usage or protocol error, nothing run; \
3 memqual itself failed; 130 interrupted (Ctrl-C or SIGTERM: the worker is killed and \
the receipt still written from what was collected; a second Ctrl-C quits at once).";
