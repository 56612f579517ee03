//! One arm of a memqual run, from the worker's start to its last byte on
//! disk. The harness hands it a resolved [`protocol::Arm`], the worker
//! executable and the arm's folder in the run directory; it returns what it
//! saw ([`reports::record::ArmOutcome`]) and never prints to stdout.
//!
//! - [`arm`]: the executor — starts the worker with its fd-3 channel and
//!   fd-4 lifeline, runs the external sampler beside it, enforces the time
//!   limit and the memory ceiling, and writes the arm's files as data
//!   arrives; a block run for the overhead gate is one worker in ABBA blocks.
//! - [`reader`]: the worker's messages, checked against the contract and
//!   appended as they arrive.
//! - [`watchdog`]: the memory-ceiling watchdog.
//! - [`lifeline`]: the pipe whose end-of-file tells every worker that memqual
//!   is gone.
//! - [`block_toggle`]: what the overhead block run's sampler and marker
//!   hook share (the pause flag, the switches).
//! - [`attribution`]: allocation profiling on the harness's side (jemalloc
//!   or `MallocStackLogging`) and the profiles' symbols.
//! - the slow observations beside the worker — tool snapshots and the
//!   process census at phase boundaries, on a thread of their own — are
//!   private modules (`probes`, `boundary`, `snapshots`, `census`).
//!
//! Warnings that are not the arm's failure (a symbol table or a scratch
//! folder that could not be written or removed) go to stderr through
//! [`warn`], which never panics on a closed stream.

// Every public item says what it means (units, sources, failure cases).
#![warn(missing_docs)]

pub mod arm;
pub mod attribution;
pub mod block_toggle;
mod boundary;
mod census;
pub mod lifeline;
mod probes;
pub mod reader;
mod snapshots;
pub mod watchdog;

/// `eprintln!` that never panics: a warning the arm's record does not hold.
pub fn warn(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}
