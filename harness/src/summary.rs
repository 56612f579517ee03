//! What `memqual run` prints: a machine-readable summary (`--json`) and a
//! short human table. Both are pure functions of the receipt.

use reports::Receipt;
use reports::gates::{GateReport, Outcome};
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use reports::speech::ControlComparison;
use sampler::Phase;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// The `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The receipt format this summary was made from.
    /// Version of the receipt format this summary was made from.
    pub receipt_format_version: String,
    /// The run directory, as given or created.
    pub run_dir: String,
    /// True when every arm of the protocol ran and completed.
    pub all_completed: bool,
    /// One entry per arm, in protocol order.
    pub arms: Vec<ArmSummary>,
    /// Each arm against its control.
    pub comparisons: Vec<ComparisonSummary>,
    /// The run verdict over the judged arms; `None` when no arm declares gates.
    pub verdict: Option<Outcome>,
    /// Ids of the arms the verdict is taken over: those marked `promote`, else
    /// every arm with gates.
    pub judged_arms: Vec<String>,
    /// Per arm with gates: each gate's outcome.
    pub gates: Vec<ArmGatesSummary>,
}

/// One arm's declared gates and their outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmGatesSummary {
    /// Arm id.
    pub arm: String,
    /// Whether the protocol marks this arm `promote` (its verdict counts toward
    /// the run verdict).
    pub promote: bool,
    /// The arm's verdict over all its gates (conjunctive).
    pub verdict: Outcome,
    /// Each declared gate, in declaration order.
    pub gates: Vec<GateLine>,
}

/// One gate: its kind, outcome, and the first check that did not pass (or the last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateLine {
    /// Gate kind, as declared in the protocol.
    pub kind: String,
    /// This gate's outcome.
    pub outcome: Outcome,
    /// `name: note` of the first check that did not pass, else of the last
    /// check; empty when the gate has no checks.
    pub detail: String,
}

fn gate_lines(report: &GateReport) -> Vec<ArmGatesSummary> {
    report
        .arms
        .iter()
        .map(|a| ArmGatesSummary {
            arm: a.arm.clone(),
            promote: a.promote,
            verdict: a.verdict,
            gates: a
                .gates
                .iter()
                .map(|g| {
                    let shown = g
                        .checks
                        .iter()
                        .find(|c| c.outcome != Outcome::Pass)
                        .or(g.checks.last());
                    GateLine {
                        kind: g.kind.clone(),
                        outcome: g.outcome,
                        detail: shown.map_or(String::new(), |c| format!("{}: {}", c.name, c.note)),
                    }
                })
                .collect(),
        })
        .collect()
}

/// Whisper arms: latency with the cold parts apart, WER, determinism.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeechSummary {
    /// Context load time in ns (`whisper_init_*`); `None` without a runtime report.
    pub cold_load_ns: Option<u64>,
    /// Time of the first measured request in ns, kept apart from the steady ones.
    pub first_request_ns: Option<u64>,
    /// Median time in ns of the measured requests after the first; `None` when
    /// there are none.
    pub steady_p50_ns: Option<f64>,
    /// 95th percentile time in ns of the measured requests after the first.
    pub steady_p95_ns: Option<f64>,
    /// Longest time in ns of the measured requests after the first.
    pub steady_max_ns: Option<u64>,
    /// (category, WER) with numbers normalised; `None` for categories without words.
    pub wer_by_category: Vec<(String, Option<f64>)>,
    /// Whether every repetition of each fixture produced the same output;
    /// `None` when determinism was not evaluated.
    pub deterministic: Option<bool>,
    /// Transcripts with words on slices without speech; `None` when no such
    /// slice was run.
    pub silence_false_alarms: Option<usize>,
    /// States alive at `state_ready` (working plus extras), from the runtime
    /// report; `None` without one.
    pub state_count: Option<u32>,
}

/// One arm against its declared control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonSummary {
    /// Arm id.
    pub arm: String,
    /// Id of the control arm it is compared with.
    pub control: String,
    /// True when both ran the same fixtures and every output matched exactly;
    /// `None` when the outputs could not be compared.
    pub parity_exact: Option<bool>,
    /// Resident bytes at the `state_ready` marker, arm minus control; `None`
    /// when either lacks that marker.
    pub state_ready_resident_delta_bytes: Option<i64>,
    /// Sum of every state's kv and compute buffers as whisper.cpp logged them,
    /// in bytes, arm minus control; `None` when either log lacks them.
    pub logged_state_bytes_delta: Option<i64>,
    /// Agreement: fixtures whose outputs are identical, of those both ran;
    /// `None` when the outputs could not be compared.
    pub identical_fixtures: Option<(usize, usize)>,
    /// The first fixture (by id) whose token streams differ, and where:
    /// `<fixture> at token <i>: <control id> vs <arm id>`.
    pub first_token_difference: Option<String>,
}

/// One arm's outcome and memory figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    /// Arm id.
    pub id: String,
    /// Whether the arm completed, failed or could not run.
    pub status: ArmStatus,
    /// Every reason the arm failed, in the order they were noticed.
    pub failure: Vec<String>,
    /// Memory at each phase marker, in order.
    pub phases: Vec<PhaseMemory>,
    /// Rows in the arm's external sampler series.
    pub series_samples: u64,
    /// Median interval between sampler ticks in ns.
    pub median_tick_interval_ns: Option<f64>,
    /// 99th percentile of how late sampler ticks fired, in ns.
    pub p99_lateness_ns: Option<f64>,
    /// 99.9th percentile of it, in ns.
    pub p999_lateness_ns: Option<f64>,
    /// The latest tick, in ns.
    pub max_lateness_ns: Option<u64>,
    /// Sampler ticks skipped because the sampler fell a whole period behind.
    pub skipped_ticks: u64,
    /// Largest resident set size in bytes the series saw.
    pub max_sampled_resident_bytes: Option<u64>,
    /// Largest footprint in bytes the series saw; `None` where footprint is
    /// unavailable.
    pub max_sampled_footprint_bytes: Option<u64>,
    /// True when any phase's kernel peak exceeded everything observed in that
    /// phase by more than a page: a transient no sample caught.
    pub peak_between_samples: bool,
    /// Speech figures; `None` for non-whisper arms.
    pub speech: Option<SpeechSummary>,
    /// The largest memory the census saw of the arm's external encoder
    /// process (patched whisper.cpp), apart from the worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_encoder_max_bytes: Option<u64>,
}

/// The memory snapshot taken at one phase marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseMemory {
    /// The phase the marker closes.
    pub phase: Phase,
    /// Measured request the marker belongs to; `None` outside requests.
    pub request_id: Option<u64>,
    /// Resident set size in bytes (Linux `VmRSS`, macOS `resident_size`).
    pub resident_bytes: u64,
    /// Kernel peak resident size in bytes (Linux `VmHWM` since the previous
    /// marker; macOS lifetime peak); `None` when not reported.
    pub resident_peak_bytes: Option<u64>,
    /// Footprint in bytes (macOS `phys_footprint`; Linux `RssAnon + RssShmem +
    /// VmSwap`); `None` when unavailable.
    pub footprint_bytes: Option<u64>,
    /// Lifetime footprint peak in bytes (macOS only; `None` on Linux).
    pub footprint_peak_bytes: Option<u64>,
    /// True when the kernel peak exceeded every observation in the phase's
    /// window by more than a page; `None` when there is no kernel peak.
    pub peak_between_samples: Option<bool>,
}

fn arm_summary(a: &ArmReceipt) -> ArmSummary {
    ArmSummary {
        id: a.id.clone(),
        status: a.status,
        failure: a.failure.clone(),
        phases: a
            .phases
            .iter()
            .map(|p| PhaseMemory {
                phase: p.phase,
                request_id: p.request_id,
                resident_bytes: p.memory.resident_bytes,
                resident_peak_bytes: p.memory.resident_peak_bytes,
                footprint_bytes: p.memory.footprint_bytes,
                footprint_peak_bytes: p.memory.footprint_peak_bytes,
                peak_between_samples: p.peak_between_samples,
            })
            .collect(),
        series_samples: a.series.samples,
        median_tick_interval_ns: a.series.median_interval_ns,
        p99_lateness_ns: a.series.p99_lateness_ns,
        p999_lateness_ns: a.series.p999_lateness_ns,
        max_lateness_ns: a.series.max_lateness_ns,
        skipped_ticks: a.series.skipped_ticks,
        max_sampled_resident_bytes: a.series.max_resident_bytes,
        max_sampled_footprint_bytes: a.series.max_footprint_bytes,
        peak_between_samples: a.peak_between_samples,
        external_encoder_max_bytes: a
            .census
            .as_ref()
            .and_then(|c| c.external_encoder.as_ref())
            .map(|e| e.max_bytes),
        speech: a.speech.as_ref().map(|s| SpeechSummary {
            cold_load_ns: s.latency.cold_load_ns,
            first_request_ns: s.latency.first_request_ns,
            steady_p50_ns: s.latency.steady_p50_ns,
            steady_p95_ns: s.latency.steady_p95_ns,
            steady_max_ns: s.latency.steady_max_ns,
            wer_by_category: s
                .quality
                .wer
                .as_ref()
                .map(|w| {
                    w.categories
                        .iter()
                        .map(|c| (c.category.clone(), c.wer))
                        .collect()
                })
                .unwrap_or_default(),
            deterministic: s.quality.determinism.as_ref().map(|d| d.is_deterministic()),
            silence_false_alarms: s.quality.silence.as_ref().map(|x| x.false_alarms.len()),
            state_count: s.runtime.as_ref().map(|r| r.state_count),
        }),
    }
}

fn comparison_summary(c: &ControlComparison) -> ComparisonSummary {
    ComparisonSummary {
        arm: c.arm.clone(),
        control: c.control.clone(),
        parity_exact: c.parity.as_ref().ok().map(|p| p.is_exact()),
        state_ready_resident_delta_bytes: c
            .phase_deltas
            .iter()
            .find(|d| d.phase == Phase::StateReady)
            .map(|d| d.resident_delta_bytes),
        logged_state_bytes_delta: c.logged_state_bytes_delta,
        identical_fixtures: c.parity.as_ref().ok().map(|p| {
            (
                p.fixtures_compared.saturating_sub(p.mismatches.len()),
                p.fixtures_compared,
            )
        }),
        first_token_difference: c.parity.as_ref().ok().and_then(first_token_difference),
    }
}

fn first_token_difference(p: &quality::ParityReport) -> Option<String> {
    let token = |t: Option<i32>| t.map_or("end".to_string(), |t| t.to_string());
    p.mismatches.iter().find_map(|m| {
        m.differences.iter().find_map(|d| match d {
            quality::Difference::TokenIds { index, a, b, .. } => Some(format!(
                "{} at token {index}: {} vs {}",
                m.fixture_id,
                token(*a),
                token(*b)
            )),
            _ => None,
        })
    })
}

/// The `--json` summary of a finished run in `dir`: pure function of its
/// receipt; `all_completed` is passed in by the caller.
pub fn run_summary(dir: &Path, receipt: &Receipt, all_completed: bool) -> RunSummary {
    RunSummary {
        receipt_format_version: reports::RECEIPT_FORMAT_VERSION.to_string(),
        run_dir: dir.display().to_string(),
        all_completed,
        arms: receipt.arms.iter().map(arm_summary).collect(),
        comparisons: receipt.comparisons.iter().map(comparison_summary).collect(),
        verdict: receipt.gates.as_ref().map(|g| g.verdict),
        judged_arms: receipt
            .gates
            .as_ref()
            .map_or(Vec::new(), |g| g.judged_arms.clone()),
        gates: receipt.gates.as_ref().map_or(Vec::new(), gate_lines),
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn ms(ns: Option<f64>) -> String {
    ns.map_or("-".into(), |n| format!("{:.1}", n / 1e6))
}

/// A short table for people: one line per arm.
pub fn human(summary: &RunSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<9} {:>7} {:>9} {:>9} {:>12} {:>13}  notes",
        "arm", "status", "samples", "tick ms", "p99 late", "max RSS MiB", "max foot MiB"
    );
    for a in &summary.arms {
        let status = match a.status {
            ArmStatus::Completed => "completed",
            ArmStatus::Failed => "FAILED",
            ArmStatus::NotRunnable => "NOT_RUN",
        };
        let mut notes = Vec::new();
        if a.peak_between_samples {
            notes.push("peak between samples".to_string());
        }
        if a.skipped_ticks > 0 {
            notes.push(format!("{} skipped ticks", a.skipped_ticks));
        }
        if let Some(bytes) = a.external_encoder_max_bytes {
            notes.push(format!(
                "external encoder process {:.1} MiB",
                bytes as f64 / 1048576.0
            ));
        }
        notes.extend(a.failure.iter().cloned());
        let _ = writeln!(
            out,
            "{:<24} {:<9} {:>7} {:>9} {:>9} {:>12} {:>13}  {}",
            a.id,
            status,
            a.series_samples,
            ms(a.median_tick_interval_ns),
            ms(a.p99_lateness_ns),
            mib(a.max_sampled_resident_bytes),
            mib(a.max_sampled_footprint_bytes),
            notes.join("; ")
        );
    }
    for a in &summary.arms {
        let Some(sp) = &a.speech else { continue };
        let wer: Vec<String> = sp
            .wer_by_category
            .iter()
            .filter_map(|(c, w)| w.map(|w| format!("{c} {:.1}%", w * 100.0)))
            .collect();
        let _ = writeln!(
            out,
            "{}: load {} ms, first request {} ms, steady p50/p95/max {}/{}/{} ms; WER {}; {}; silence false alarms {}",
            a.id,
            ms(sp.cold_load_ns.map(|n| n as f64)),
            ms(sp.first_request_ns.map(|n| n as f64)),
            ms(sp.steady_p50_ns),
            ms(sp.steady_p95_ns),
            ms(sp.steady_max_ns.map(|n| n as f64)),
            if wer.is_empty() {
                "-".into()
            } else {
                wer.join(", ")
            },
            match sp.deterministic {
                Some(true) => "repetitions identical",
                Some(false) => "REPETITIONS DIFFER",
                None => "determinism not evaluated",
            },
            sp.silence_false_alarms
                .map_or("-".into(), |n| n.to_string()),
        );
    }
    for c in &summary.comparisons {
        let delta =
            |b: Option<i64>| b.map_or("-".into(), |b| format!("{:+.1}", b as f64 / 1048576.0));
        let agreement = match (c.identical_fixtures, &c.first_token_difference) {
            (Some((same, of)), Some(first)) => {
                format!("; {same} of {of} fixtures identical, first token difference {first}")
            }
            (Some((same, of)), None) => format!("; {same} of {of} fixtures identical"),
            (None, _) => String::new(),
        };
        let logged = match c.logged_state_bytes_delta {
            Some(_) => format!(
                " (whisper.cpp logged {} MiB of state buffers)",
                delta(c.logged_state_bytes_delta)
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{} vs {}: parity {}{agreement}; state_ready resident {} MiB{logged}",
            c.arm,
            c.control,
            match c.parity_exact {
                Some(true) => "exact",
                Some(false) => "DIFFERS",
                None => "not evaluated",
            },
            delta(c.state_ready_resident_delta_bytes),
        );
    }
    for a in &summary.gates {
        let _ = writeln!(
            out,
            "gates {}{}: {}",
            a.arm,
            if a.promote { " (promote)" } else { "" },
            a.verdict.as_str()
        );
        for g in &a.gates {
            let _ = writeln!(
                out,
                "  {:<12} {:<13} {}",
                g.kind,
                g.outcome.as_str(),
                g.detail
            );
        }
    }
    if let Some(v) = summary.verdict {
        let _ = writeln!(
            out,
            "verdict: {} (over {})",
            v.as_str(),
            summary.judged_arms.join(", ")
        );
    }
    let _ = writeln!(out, "receipt: {}/receipt.json", summary.run_dir);
    out
}
