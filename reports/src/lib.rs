//! Turns a memqual run directory into a receipt, and judges calibration arms.
//!
//! Everything here is rebuilt from the run directory alone: `run.json`, and
//! per arm `spec.json`, `arm.json`, `markers.jsonl`, `series.csv` and
//! `results.jsonl`. The harness writes those files (with the record types of
//! [`record`]) as data arrives; this crate only reads them.
//!
//! - [`record`]: the run- and arm-level records the harness writes.
//! - [`receipt`]: the [`Receipt`] types — per arm the phase table (current
//!   and peak of every field, `None` where unavailable), the series summary
//!   (cadence, lateness, skipped ticks, maxima, system deltas) and the
//!   `peak_between_samples` flag; [`assemble`](mod@assemble) fills them from
//!   the run directory.
//! - [`series`]: an arm's `series.csv` read streaming; the page's and the
//!   trace's min/max envelope of it, bounded however long the night.
//! - [`phase_rows`]: a long soak's phase rows beyond what the receipt keeps,
//!   in their own sealed file whose digest the receipt holds.
//! - [`calibration`]: expected vs measured for the calibration worker's
//!   known patterns.
//! - [`speech`]: whisper arms — runtime identity and topology, cold load
//!   and first request apart from steady latency, exact transcripts, quality
//!   against the references, and parity with a control arm.
//! - transcript quality (WER per slice and category with a documented
//!   normalisation, exact parity between arms, determinism across
//!   repetitions, silence false alarms) is the [`quality`] crate's.
//! - the statistics beneath the receipt (median and percentile, Theil–Sen
//!   growth with bootstrap intervals, the soak's verdict and covariates, the
//!   real resolution of cached counters, decode throughput, residency and
//!   idle windows, a cancelled request's record, the state accounting, held
//!   system memory) are the [`analysis`] crate's, computed from values this
//!   crate reads.
//!
//! - [`snapshots`]: tool snapshots (smaps_rollup, cgroup files, vmmap, …)
//!   at phase boundaries, their cost, and requests whose latency they overlap.
//! - [`census`]: processes beside the worker whose memory moved during an
//!   arm, attributed only against a matched control arm.
//! - [`stability`]: a soak arm's verdict read from its run directory (the
//!   receipt's `stability` section, which a `stability` gate reads); the
//!   verdict itself is `analysis::stability`'s.
//! - [`soak_history`]: past soaks of the same protocol and arm, as the
//!   soak hands them to the report (`soak-history.json`), and their chart.
//! - [`gate_spec`]: gates as a protocol declares them; [`verdict`]: what
//!   judging them produces (checks, outcomes, verdicts).
//! - [`gates`]: the declared gates judged against the receipt, each with
//!   threshold, measured and control values and evidence pointers; the
//!   arm and run verdicts.
//! - [`overhead`]: an arm's block run, one worker with the external sampler
//!   on and paused in ABBA blocks, and the latency ratio and interval the
//!   `overhead` gate judges.
//! - [`admission`]: the quiet-host admission record.
//! - [`host`]: host and runtime identity (`host.json`).
//! - [`seal`]: the manifest of every file, the receipt's own digest, and
//!   `verify`; [`sign`]: minisign signatures of the receipt.
//! - every output format (`report.html`, `summary.md`, `phases.csv`,
//!   `trace.json`, JUnit, BMF, the fleet page) is the `render` crate's;
//!   runs compared and merged across hosts are the `fleet` crate's.
//!
//! Every file is read through [`run_dir::RunDir`], which owns the run
//! directory's names, refuses links and special files, and bounds reads.

// Every public item says what it means: the receipt schema, the harness and report readers rely on these docs.
#![warn(missing_docs)]

pub mod admission;
pub mod assemble;
pub mod attribution;
pub mod calibration;
pub mod ceiling;
pub mod census;
pub mod device_memory;
mod error;
pub mod gate_spec;
pub mod gates;
pub mod harness_self;
pub mod host;
pub mod overhead;
pub mod phase_rows;
pub mod receipt;
pub mod record;
pub mod request_policy;
pub mod seal;
pub mod series;
pub mod sign;
pub mod snapshots;
pub mod soak_history;
pub mod speech;
pub mod stability;
pub mod verdict;

pub use assemble::{assemble, assemble_with_series, reassess_integrity, reassess_integrity_over};
pub use error::ReportError;
pub use quality::{QualityError, Reference, Transcription};
pub use receipt::Receipt;

/// Version of the receipt format, `major.minor`: the major changes when a
/// field changes meaning or disappears, the minor when fields are added.
pub const RECEIPT_FORMAT_VERSION: &str = "4.10";

/// The JSON Schema of `receipt.json`, generated from the types (committed as
/// `reports/receipt.schema.json`).
pub fn receipt_schema() -> String {
    let schema = schemars::schema_for!(Receipt);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// Test helpers: run directories built through [`run_dir::RunDir`], as the
/// harness builds them.
#[cfg(test)]
pub(crate) mod testing {
    use run_dir::{CsvAppender, Rel, RunDir};

    /// A new run directory in a temporary folder (kept alive by the first).
    pub fn run() -> (tempfile::TempDir, RunDir) {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        (tmp, run)
    }

    /// `arms/<id>`, created.
    pub fn arm(run: &RunDir, id: &str) -> Rel {
        let rel = run.arm(id).unwrap();
        run.create_dir(&rel).unwrap();
        rel
    }

    /// A JSON-lines file of `items`.
    pub fn jsonl<T: serde::Serialize>(run: &RunDir, rel: &Rel, items: impl IntoIterator<Item = T>) {
        let mut out = run.appender(rel).unwrap();
        for item in items {
            out.append_json(&item).unwrap();
        }
    }

    /// A receipt with nothing measured, for sealing tests.
    pub fn receipt() -> crate::Receipt {
        crate::Receipt::unmeasured()
    }

    /// A CSV file of `rows`, with its header.
    pub fn csv<T: serde::Serialize>(run: &RunDir, rel: &Rel, rows: impl IntoIterator<Item = T>) {
        let mut out = CsvAppender::new(run.appender(rel).unwrap());
        for row in rows {
            out.append(&row).unwrap();
        }
    }
}
