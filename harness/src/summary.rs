//! What `memqual run` prints: a machine-readable summary (`--json`) and a
//! short human table. Both are pure functions of the receipt.

use reports::Receipt;
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use sampler::Phase;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// The `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub schema_version: u32,
    pub run_dir: String,
    pub all_completed: bool,
    pub arms: Vec<ArmSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    pub id: String,
    pub status: ArmStatus,
    pub failure: Vec<String>,
    pub phases: Vec<PhaseMemory>,
    pub series_samples: u64,
    pub median_tick_interval_ns: Option<f64>,
    pub p99_lateness_ns: Option<f64>,
    pub skipped_ticks: u64,
    pub max_sampled_resident_bytes: Option<u64>,
    pub max_sampled_footprint_bytes: Option<u64>,
    pub peak_between_samples: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseMemory {
    pub phase: Phase,
    pub request_id: Option<u64>,
    pub resident_bytes: u64,
    pub resident_peak_bytes: Option<u64>,
    pub footprint_bytes: Option<u64>,
    pub footprint_peak_bytes: Option<u64>,
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
        skipped_ticks: a.series.skipped_ticks,
        max_sampled_resident_bytes: a.series.max_resident_bytes,
        max_sampled_footprint_bytes: a.series.max_footprint_bytes,
        peak_between_samples: a.peak_between_samples,
    }
}

pub fn run_summary(dir: &Path, receipt: &Receipt, all_completed: bool) -> RunSummary {
    RunSummary {
        schema_version: reports::RECEIPT_SCHEMA_VERSION,
        run_dir: dir.display().to_string(),
        all_completed,
        arms: receipt.arms.iter().map(arm_summary).collect(),
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
    let _ = writeln!(out, "receipt: {}/receipt.json", summary.run_dir);
    out
}
