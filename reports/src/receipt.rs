//! The receipt: what a run measured, rebuilt from its run directory.

use crate::ReportError;
use crate::admission::AdmissionRecord;
use crate::record::{ArmStatus, ExitInfo, RunInfo, files};
use crate::speech::{ControlComparison, SpeechReceipt};
use crate::verdict::GateReport;
use run_dir::RunDir;
use sampler::{Phase, TaskMemory};
use serde::{Deserialize, Serialize};
use worker_contract::ArmSpec;

/// A run's receipt (`receipt.json`): everything measured, the gates and
/// verdicts, and the seal (see [`crate::seal`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Receipt {
    /// `major.minor`: the `RECEIPT_FORMAT_VERSION` it was written with.
    pub format_version: String,
    pub run: RunInfo,
    pub arms: Vec<ArmReceipt>,
    /// Each arm that names a control, compared with it.
    pub comparisons: Vec<ControlComparison>,
    /// Host and memqual identity (`host.json`), when the run has one.
    pub identity: Option<crate::host::Identity>,
    /// Quiet-host admission (`admission.json`), when the run has one.
    pub admission: Option<AdmissionRecord>,
    /// The declared gates and verdicts; `None` when no arm declares a gate.
    pub gates: Option<GateReport>,
    /// How complete the run directory was, what was recovered from it, and
    /// whether raw data was resealed.
    pub integrity: Integrity,
    /// Digests of the manifest and of this receipt; `None` until sealed.
    pub seal: Option<Seal>,
}

/// One arm's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmReceipt {
    pub id: String,
    pub status: ArmStatus,
    pub failure: Vec<String>,
    pub exit: Option<ExitInfo>,
    pub timed_out: bool,
    /// The worker's `hello`, as sent.
    pub worker: Option<worker_contract::Hello>,
    /// The arm spec sent to the worker (typed in `worker-contract`).
    pub spec: Option<ArmSpec>,
    pub phases: Vec<PhaseRow>,
    pub series: SeriesSummary,
    pub requests: u64,
    pub latency: Option<LatencySummary>,
    /// True when any phase's kernel peak was missed by every observation.
    pub peak_between_samples: bool,
    /// Whisper arms: runtime, latency apart, transcripts, quality.
    pub speech: Option<SpeechReceipt>,
    /// Tool snapshots at phase boundaries (and at the protocol's cadence).
    #[serde(default)]
    pub snapshots: Option<crate::snapshots::SnapshotReceipt>,
    /// Processes beside the worker whose memory moved during the arm.
    #[serde(default)]
    pub census: Option<crate::census::CensusReceipt>,
    /// Soak arms (those with `soak.json`): growth classification and verdict.
    #[serde(default)]
    pub stability: Option<crate::stability::Stability>,
    /// Twin runs with and without the external sampler, for arms that
    /// declare an `overhead` gate.
    #[serde(default)]
    pub overhead: Option<crate::overhead::OverheadRecord>,
}

impl ArmReceipt {
    /// The first marker of `phase` (for request phases: of that request).
    pub fn phase(&self, phase: Phase, request_id: Option<u64>) -> Option<&PhaseRow> {
        self.phases
            .iter()
            .find(|p| p.phase == phase && (request_id.is_none() || p.request_id == request_id))
    }
}

/// One marker with what the external series saw in the phase it closes.
///
/// The phase's *window* runs from the last marker that reset the kernel peak
/// (Linux resets at every marker, so it is the previous marker) to this one;
/// without a reset (macOS lifetime peaks) it runs from the start of the arm.
/// `observed_max_resident_bytes` is the largest resident value seen in the
/// window by the series or by the markers bounding it. `peak_between_samples`
/// is set exactly when the kernel's peak exceeds that by more than one page
/// (or the footprint peak exceeds the observed footprint likewise): a
/// transient that no sampler caught. `None` when there is no kernel peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseRow {
    #[schemars(with = "String")]
    pub phase: Phase,
    pub seq: u64,
    pub request_id: Option<u64>,
    pub t_ns: u64,
    /// The marker's snapshot (typed in `sampler`; unavailable values are null).
    pub memory: TaskMemory,
    pub window_start_ns: Option<u64>,
    /// Series rows inside the window.
    pub samples: u64,
    pub series_max_resident_bytes: Option<u64>,
    pub series_max_footprint_bytes: Option<u64>,
    pub observed_max_resident_bytes: u64,
    pub observed_max_footprint_bytes: Option<u64>,
    pub peak_between_samples: Option<bool>,
}

/// The series of one arm in figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesSummary {
    pub samples: u64,
    pub period_ns: Option<u64>,
    pub median_interval_ns: Option<f64>,
    pub p99_lateness_ns: Option<f64>,
    pub max_lateness_ns: Option<u64>,
    pub skipped_ticks: u64,
    /// Wall time per tick spent sampling.
    pub mean_cost_ns: Option<f64>,
    pub max_cost_ns: Option<u64>,
    /// CPU time per tick the sampler thread spent: the sampler's own overhead.
    pub mean_cost_cpu_ns: Option<f64>,
    /// Rows where the worker could not be read (it had exited or not started).
    pub rows_without_process: u64,
    pub max_resident_bytes: Option<u64>,
    pub max_footprint_bytes: Option<u64>,
    pub max_virtual_bytes: Option<u64>,
    pub system: SystemDeltas,
    /// macOS: the real resolution of the system page counters.
    #[serde(default)]
    pub system_freshness: Option<crate::freshness::SystemFreshness>,
}

/// System-wide change across the arm (last row minus first row), and extremes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemDeltas {
    pub swap_used_delta_bytes: Option<i64>,
    pub pgpgin_delta: Option<i64>,
    pub pgpgout_delta: Option<i64>,
    pub pswpin_delta: Option<i64>,
    pub pswpout_delta: Option<i64>,
    pub pageins_delta: Option<i64>,
    pub pageouts_delta: Option<i64>,
    pub psi_some_total_delta_us: Option<i64>,
    pub psi_full_total_delta_us: Option<i64>,
    pub max_psi_some_avg10: Option<f64>,
    pub min_available_bytes: Option<u64>,
    pub max_pressure_level: Option<i32>,
}

/// Latency over the measured requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    pub count: u64,
    pub first_ns: u64,
    pub p50_ns: f64,
    pub p95_ns: f64,
    pub max_ns: u64,
}

/// How complete and how intact the run directory was when this receipt was
/// assembled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Integrity {
    /// True when every arm of the run ended with its `arm.json`, no torn
    /// line was dropped, every raw file was sealed by the run itself and
    /// nothing was resealed.
    pub complete: bool,
    /// Why the receipt is incomplete, one sentence each.
    pub notes: Vec<String>,
    /// Torn last lines (writes cut short, e.g. by a full disk) dropped.
    pub recovered: Vec<run_dir::Recovery>,
    /// Raw files the run never sealed (it was stopped before) that
    /// `memqual report` sealed as it found them.
    pub sealed_by_report: Vec<String>,
    /// Each `memqual report --reseal`, with the digests it replaced.
    pub reseals: Vec<run_dir::raw_seal::Reseal>,
}

impl Integrity {
    pub(crate) fn assess(
        dir: &RunDir,
        run: &RunInfo,
        arms: &[ArmReceipt],
    ) -> Result<Integrity, ReportError> {
        let seal = dir.raw_seal()?;
        let mut notes = Vec::new();
        for id in &run.arms {
            if !arms.iter().any(|a| &a.id == id) {
                notes.push(format!("arm {id} never started"));
            } else if !dir.has_file(&dir.arm(id)?.join(files::ARM))? {
                notes.push(format!(
                    "arm {id} has no {}: the run stopped during it",
                    files::ARM
                ));
            }
        }
        let recovered = dir.recoveries();
        for r in &recovered {
            notes.push(format!(
                "{}: a torn last line ({} bytes) was dropped",
                r.path, r.dropped_bytes
            ));
        }
        let sealed_by_report: Vec<String> = seal
            .files
            .iter()
            .filter(|f| f.sealed_by == run_dir::raw_seal::SealedBy::Report)
            .map(|f| f.path.clone())
            .collect();
        if !sealed_by_report.is_empty() {
            notes.push(format!(
                "{} raw file(s) were sealed by `memqual report`, not by the run",
                sealed_by_report.len()
            ));
        }
        for r in &seal.reseals {
            notes.push(format!(
                "raw data was resealed at {} ({} file(s) changed after the run)",
                r.at_utc,
                r.changes.len()
            ));
        }
        Ok(Integrity {
            complete: notes.is_empty(),
            notes,
            recovered,
            sealed_by_report,
            reseals: seal.reseals,
        })
    }
}

/// The receipt's seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Seal {
    /// `sha256`.
    pub algorithm: String,
    /// `RFC 8785`: how `manifest.json` and the receipt are canonicalized.
    pub canonicalization: String,
    /// SHA-256 of the bytes of `manifest.json`.
    pub manifest_sha256: String,
    /// SHA-256 of the canonical receipt with this field empty.
    pub receipt_sha256: String,
}
