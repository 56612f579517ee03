//! The statistics beneath a memqual receipt, as pure functions over values
//! the receipt already holds: nothing here reads a file, knows a run
//! directory or judges a gate.
//!
//! - [`stats`]: median, percentile, least squares.
//! - [`growth`]: growth across many requests — Theil–Sen slopes with
//!   bootstrap intervals, minima per cycle, plateau / step / linear growth /
//!   inconclusive, and system growth while the worker stays flat.
//! - [`covariates`]: what the host's thermal and power state did during a
//!   soak, and whether it changed enough to confound the growth verdict.
//! - [`freshness`]: the real resolution of macOS system page counters that
//!   XNU serves from a cache.
//! - [`throughput`]: decode throughput and fallbacks from whisper.cpp's
//!   per-request timings.

pub mod covariates;
pub mod freshness;
pub mod growth;
pub mod stats;
pub mod throughput;
