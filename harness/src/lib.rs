//! The memqual harness as a library: protocol loading, host admission, the
//! orchestrator (the run's arms in order, each run by the `arm-runner`
//! crate), the GGML artifact tools and the commands on finished runs. The
//! `memqual` binary (src/main.rs) is only its command line; the library
//! exists so that the fuzz targets (harness/fuzz) can reach the same
//! protocol loader and commands the binary uses (the worker-message reader
//! they fuzz is `arm_runner::reader`).

// Printing goes through `console` (never panics on a closed pipe).
#![deny(clippy::print_stdout, clippy::print_stderr)]
// Every public item says what it means (units, sources, failure cases): issue 17.
#![warn(missing_docs)]

// First, so that its macros reach every module below.
#[macro_use]
pub mod console;
mod admission;
pub mod artifact;
pub mod bisect;
pub mod calibrate;
pub mod catalogs;
pub mod ci_formats;
pub mod compare;
/// `memqual fixtures coreml-compile`: the Core ML compiler, timed and recorded.
pub mod coreml_compile;
pub mod coreml_fixture;
pub mod ct2_fixture;
pub mod duration;
pub mod exit;
pub mod fixtures;
pub mod fleet;
pub mod history;
pub mod host;
pub mod import;
pub mod ladder_chart;
pub mod manual;
pub mod out_path;
mod overhead;
pub mod probe_verdict;
pub mod progress;
pub mod review;
pub mod run;
pub mod session;
pub mod soak;
pub mod soak_fixture;
pub mod summary;
pub mod version;
mod wheels;
pub mod worker_dir;
