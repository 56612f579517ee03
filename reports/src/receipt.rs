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
    /// What the run was: memqual version, protocol, host, arms (`run.json`).
    pub run: RunInfo,
    /// Per arm, in run order, what it measured.
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
    /// The arm id, as the protocol names it.
    pub id: String,
    /// How the arm ended; `failed` when its `arm.json` is missing.
    pub status: ArmStatus,
    /// Every reason the arm failed, in the order noticed; empty when it completed.
    pub failure: Vec<String>,
    /// How the worker process ended; `None` when unknown.
    pub exit: Option<ExitInfo>,
    /// True when the harness killed the worker for running past its time limit.
    pub timed_out: bool,
    /// The arm's device memory ceiling as enforced, with the crossing that
    /// ended the worker (`null` when it stayed below); absent when the arm
    /// sets no ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_ceiling: Option<crate::ceiling::MemoryCeilingRecord>,
    /// The worker's `hello`, as sent.
    pub worker: Option<worker_contract::Hello>,
    /// The arm spec sent to the worker (typed in `worker-contract`).
    pub spec: Option<ArmSpec>,
    /// The phase table: one row per marker, in order.
    pub phases: Vec<PhaseRow>,
    /// Where every phase row went when the arm has more than the receipt
    /// keeps (a long soak: `phases` then holds the rows of once-only
    /// phases, the first and last requests and every request holding a
    /// phase's maximum); absent when `phases` holds every row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_rows: Option<PhaseRowsFile>,
    /// The external series (`series.csv`) of the arm in figures.
    pub series: SeriesSummary,
    /// Request results the worker sent (`results.jsonl` lines).
    pub requests: u64,
    /// Latency over those requests; `None` when there were none.
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
    pub stability: Option<analysis::stability::Stability>,
    /// Twin runs with and without the external sampler, for arms that
    /// declare an `overhead` gate.
    #[serde(default)]
    pub overhead: Option<crate::overhead::OverheadRecord>,
    /// Whisper arms with real-time requests, an idle policy or idle gaps:
    /// stop-to-final latency, idle RAM, releases and reloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residency: Option<analysis::residency::ResidencyReceipt>,
    /// How a speech arm's requests were asked for: VAD, decoding, request
    /// mode and idle policy in one block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_policy: Option<crate::request_policy::RequestPolicy>,
    /// A whisper arm's state predicted (estimate), logged (whisper.cpp) and
    /// measured (`model_loaded` to `state_ready`), worker and encoder process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_accounting: Option<analysis::state_accounting::StateAccounting>,
    /// A GPU arm's host and device memory by phase: the GPU context's cost
    /// before the model, and where the model and state went. Absent where
    /// the worker read no device memory at its markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory: Option<crate::device_memory::DeviceAccounting>,
    /// Allocation attribution: `{"mode": "off"}` unless the arm asked for
    /// it (`attribution = "allocations"`); then the sites per phase.
    #[serde(default)]
    pub attribution: crate::attribution::AttributionReceipt,
    /// Soaks: memqual's own orchestrator and external sampler over the
    /// soak (`harness.jsonl`): resident memory, its slope per hour, CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_self: Option<crate::harness_self::HarnessSelf>,
}

impl Receipt {
    /// A receipt of this format with nothing measured: no arms, no gates,
    /// no seal (what tests and tools fill in field by field).
    pub fn unmeasured() -> Self {
        Receipt {
            format_version: crate::RECEIPT_FORMAT_VERSION.into(),
            run: RunInfo::default(),
            arms: Vec::new(),
            comparisons: Vec::new(),
            identity: None,
            admission: None,
            integrity: Integrity::default(),
            gates: None,
            seal: None,
        }
    }
}

impl ArmReceipt {
    /// The first marker of `phase` (for request phases: of that request).
    pub fn phase(&self, phase: Phase, request_id: Option<u64>) -> Option<&PhaseRow> {
        self.phases
            .iter()
            .find(|p| p.phase == phase && (request_id.is_none() || p.request_id == request_id))
    }

    /// The kernel peak at `state_ready`: footprint where reported, else resident.
    pub fn state_ready_peak(&self) -> Option<u64> {
        let m = &self.phase(Phase::StateReady, None)?.memory;
        m.footprint_peak_bytes.or(m.resident_peak_bytes)
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
    /// The phase this marker closes.
    #[schemars(with = "String")]
    pub phase: Phase,
    /// The marker's sequence number within the arm.
    pub seq: u64,
    /// The request the marker belongs to (request phases); `None` otherwise.
    pub request_id: Option<u64>,
    /// Monotonic time (ns) of the marker.
    pub t_ns: u64,
    /// The marker's snapshot (typed in `sampler`; unavailable values are null).
    pub memory: TaskMemory,
    /// Monotonic time (ns) of the marker that opened the window (the last peak reset); `None` when the window runs from the start of the arm.
    pub window_start_ns: Option<u64>,
    /// Series rows inside the window.
    pub samples: u64,
    /// Largest resident bytes in the series rows of the window; `None` without rows.
    pub series_max_resident_bytes: Option<u64>,
    /// Largest footprint bytes in the series rows of the window; `None` without rows or where the platform has no footprint.
    pub series_max_footprint_bytes: Option<u64>,
    /// Largest resident bytes seen in the window by the series or by the markers bounding it.
    pub observed_max_resident_bytes: u64,
    /// Largest footprint bytes seen likewise; `None` where no footprint was observed.
    pub observed_max_footprint_bytes: Option<u64>,
    /// True when the kernel peak exceeds what was observed by more than one page; `None` when there is no kernel peak.
    pub peak_between_samples: Option<bool>,
    /// Largest device (GPU) memory the driver attributed to the worker in the
    /// series rows of the window; absent where the series has no device columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_max_gpu_worker_bytes: Option<u64>,
    /// The change in the system's held memory since the marker before
    /// (exact: both markers read it); absent for the first marker and where
    /// the worker recorded none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<analysis::held_memory::PhaseHeldDeltas>,
}

impl ArmReceipt {
    /// A completed arm built by hand (tests, charts of hand-made receipts):
    /// `phases`, `requests` requests, nothing else.
    pub fn completed(id: &str, phases: Vec<PhaseRow>, requests: u64) -> ArmReceipt {
        ArmReceipt {
            id: id.into(),
            status: ArmStatus::Completed,
            failure: vec![],
            exit: None,
            timed_out: false,
            memory_ceiling: None,
            worker: None,
            spec: None,
            phases,
            phase_rows: None,
            series: SeriesSummary::default(),
            requests,
            latency: None,
            peak_between_samples: false,
            speech: None,
            snapshots: None,
            census: None,
            stability: None,
            overhead: None,
            residency: None,
            request_policy: None,
            state_accounting: None,
            device_memory: None,
            attribution: Default::default(),
            harness_self: None,
        }
    }
}

impl PhaseRow {
    /// A marker row built by hand: `memory` at `phase` (request phases:
    /// request 0), one sample, no series.
    pub fn of(phase: Phase, seq: u64, memory: TaskMemory) -> PhaseRow {
        PhaseRow {
            phase,
            seq,
            request_id: phase.is_request().then_some(0),
            t_ns: seq * 10,
            observed_max_resident_bytes: memory.resident_bytes,
            memory,
            window_start_ns: None,
            samples: 1,
            series_max_resident_bytes: None,
            series_max_footprint_bytes: None,
            observed_max_footprint_bytes: None,
            peak_between_samples: None,
            series_max_gpu_worker_bytes: None,
            system: None,
        }
    }
}

/// Where a long arm's every phase row went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseRowsFile {
    /// The file, relative to the run directory (`arms/<id>/phase-rows.jsonl`).
    pub path: String,
    /// Rows in the file: one per marker, in order.
    pub rows: u64,
    /// Rows the receipt's `phases` keeps.
    pub kept: u64,
    /// SHA-256 (hex) of the file's bytes.
    pub sha256: String,
}

/// The series of one arm in figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesSummary {
    /// Rows in `series.csv`.
    pub samples: u64,
    /// The sampler's period in ns (from `arm.json`); `None` when the sampler did not run or the arm has no `arm.json`.
    pub period_ns: Option<u64>,
    /// How often it read the system files, in ns (from `arm.json`); `None`
    /// in runs from before it existed, when every tick read them. The
    /// process files are read every `period_ns`.
    #[serde(default)]
    pub system_period_ns: Option<u64>,
    /// Median time between consecutive rows, in ns; `None` with fewer than two rows.
    pub median_interval_ns: Option<f64>,
    /// 99th percentile of the rows' lateness (start minus due time), in ns.
    pub p99_lateness_ns: Option<f64>,
    /// 99.9th percentile of the rows' lateness, in ns: one tick in a
    /// thousand, about one a minute at 50 ms.
    #[serde(default)]
    pub p999_lateness_ns: Option<f64>,
    /// `None` when the interval and lateness percentiles are exact (up to
    /// 65,536 rows); past that they come from a bounded histogram and are
    /// within this fraction of the exact ones (a night's rows are not held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles_relative_error: Option<f64>,
    /// Largest lateness of any row, in ns.
    pub max_lateness_ns: Option<u64>,
    /// Ticks the sampler skipped because it fell a whole period behind, summed over rows.
    pub skipped_ticks: u64,
    /// Wall time per tick spent sampling.
    pub mean_cost_ns: Option<f64>,
    /// Longest wall time one tick spent sampling, in ns.
    pub max_cost_ns: Option<u64>,
    /// CPU time per tick the sampler thread spent: the sampler's own overhead.
    pub mean_cost_cpu_ns: Option<f64>,
    /// Rows where the worker could not be read (it had exited or not started).
    pub rows_without_process: u64,
    /// Largest resident bytes of the worker in the series.
    pub max_resident_bytes: Option<u64>,
    /// Largest footprint bytes of the worker in the series; `None` where the platform has no footprint.
    pub max_footprint_bytes: Option<u64>,
    /// Largest virtual size in bytes (Linux `VmSize`); `None` on macOS.
    pub max_virtual_bytes: Option<u64>,
    /// System-wide change across the arm, and extremes.
    pub system: SystemDeltas,
    /// macOS: the real resolution of the system page counters.
    #[serde(default)]
    pub system_freshness: Option<analysis::freshness::SystemFreshness>,
    /// The accelerator, said once per arm by the external sampler: the
    /// devices it read through NVML, or why the series has no device
    /// columns (`no accelerator: …`). Absent in runs made before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<String>,
    /// The Metal device the external sampler's process saw (macOS, built
    /// with `metal`): its name, working-set limit and unified memory. The
    /// worker's own Metal memory is in its markers' `device_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal: Option<sampler::metal::MetalDevice>,
    /// Device (GPU) memory over the series; absent without device columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSeriesSummary>,
}

/// Device (GPU) memory over an arm's series, summed over devices (NVML).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceSeriesSummary {
    /// Rows whose device cells were read.
    pub rows_read: u64,
    /// Rows whose device read failed (empty cells).
    pub rows_unread: u64,
    /// The worker's device memory in the first row read, in bytes.
    pub first_worker_bytes: Option<u64>,
    /// Largest device memory the driver attributed to the worker, in bytes.
    pub max_worker_bytes: Option<u64>,
    /// The worker's device memory in the last row read, in bytes.
    pub last_worker_bytes: Option<u64>,
    /// Largest device memory in use on the devices (every process), in bytes.
    pub max_used_bytes: Option<u64>,
    /// Device memory installed, in bytes.
    pub total_bytes: Option<u64>,
    /// Largest device memory attributed to other processes, in bytes.
    pub max_others_bytes: Option<u64>,
}

/// System-wide change across the arm (last row minus first row), and extremes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemDeltas {
    /// Change in swap in use, in bytes.
    pub swap_used_delta_bytes: Option<i64>,
    /// Change in Linux `pgpgin` (KiB paged in from block devices).
    pub pgpgin_delta: Option<i64>,
    /// Change in Linux `pgpgout` (KiB paged out to block devices).
    pub pgpgout_delta: Option<i64>,
    /// Change in Linux `pswpin` (pages swapped in).
    pub pswpin_delta: Option<i64>,
    /// Change in Linux `pswpout` (pages swapped out).
    pub pswpout_delta: Option<i64>,
    /// Change in macOS `pageins` (pages).
    pub pageins_delta: Option<i64>,
    /// Change in macOS `pageouts` (pages).
    pub pageouts_delta: Option<i64>,
    /// Change in Linux PSI memory `some total`, in microseconds.
    pub psi_some_total_delta_us: Option<i64>,
    /// Change in Linux PSI memory `full total`, in microseconds.
    pub psi_full_total_delta_us: Option<i64>,
    /// Highest Linux PSI memory `some avg10` seen (percent of the last 10 s).
    pub max_psi_some_avg10: Option<f64>,
    /// Lowest Linux `MemAvailable` seen, in bytes.
    pub min_available_bytes: Option<u64>,
    /// Highest macOS memory pressure level seen (1 normal, 2 warn, 4 critical).
    pub max_pressure_level: Option<i32>,
    /// Change in what the system holds outside any process's accounting
    /// (wired and compressor on macOS; unevictable, mlocked, zswap on Linux),
    /// each a figure or `unavailable: <reason>`.
    #[serde(default)]
    pub held: analysis::held_memory::HeldMemoryDeltas,
}

/// Latency over the measured requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    /// Requests measured.
    pub count: u64,
    /// Latency of the first request in ns (it includes cold costs).
    pub first_ns: u64,
    /// Median latency in ns.
    pub p50_ns: f64,
    /// 95th percentile latency in ns.
    pub p95_ns: f64,
    /// Longest latency in ns.
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
        Self::assess_over(dir, run, arms, dir.raw_seal()?)
    }

    /// [`Integrity::assess`] over `seal`, which may not be written yet
    /// (`report` writes a new raw seal only once the run is re-derived).
    pub(crate) fn assess_over(
        dir: &RunDir,
        run: &RunInfo,
        arms: &[ArmReceipt],
        seal: run_dir::raw_seal::RawSeal,
    ) -> Result<Integrity, ReportError> {
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
            notes.push(if r.seal_was_missing {
                format!(
                    "raw-seal.json was missing: `memqual report --reseal` rebuilt it at {} from \
                     {} raw file(s) as found, none of them checked against what the run recorded",
                    r.at_utc,
                    r.changes.len()
                )
            } else {
                format!(
                    "raw data was resealed at {} ({} file(s) changed after the run)",
                    r.at_utc,
                    r.changes.len()
                )
            });
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
