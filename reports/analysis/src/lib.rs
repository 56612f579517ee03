//! The statistics beneath a memqual receipt, as pure functions over values
//! the receipt already holds: nothing here reads a file, knows a run
//! directory or judges a gate.
//!
//! - [`stats`]: median, percentile, least squares, the Hodges–Lehmann
//!   estimate with its exact signed-rank interval.
//! - [`growth`]: growth across many requests — Theil–Sen slopes with
//!   bootstrap intervals, minima per cycle, plateau / step / linear growth /
//!   inconclusive, and system growth while the worker stays flat.
//! - [`covariates`]: what the host's thermal and power state did during a
//!   soak, and whether it changed enough to confound the growth verdict.
//! - [`freshness`]: the real resolution of macOS system page counters that
//!   XNU serves from a cache.
//! - [`throughput`]: decode throughput and fallbacks from whisper.cpp's
//!   per-request timings.
//! - [`stability`]: a soak arm's verdict — its own series (at request end,
//!   after each settle period, after each lifecycle teardown) and the
//!   system's, joined to its request ends — and its Markdown.
//! - [`residency`]: real-time requests and idle residency: stop-to-final
//!   latency, the footprint between requests, what each `release` gave back.
//! - [`cancel`]: what a whisper arm's `cancel` did: the abort, its time,
//!   the memory after it.
//! - [`state_accounting`]: a whisper arm's state predicted, logged and
//!   measured.
//! - [`quantiles`]: percentiles of a long stream in bounded memory (exact
//!   up to 65,536 values, within 0.05 % past that).
//! - [`held_memory`]: what the system holds outside every process's own
//!   accounting (wired, compressor, unevictable, mlocked, zswap), per phase
//!   and per arm.

pub mod cancel;
pub mod covariates;
pub mod freshness;
pub mod growth;
pub mod held_memory;
pub mod quantiles;
pub mod residency;
pub mod stability;
pub mod state_accounting;
pub mod stats;
pub mod throughput;
