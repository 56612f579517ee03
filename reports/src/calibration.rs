//! Expected vs measured for the calibration worker's known patterns.
//!
//! Each check turns one pattern of an arm's spec into the quantity the
//! harness must reproduce, with the tolerance the skeleton issue sets
//! (±5 % of the pattern's size unless stated). Patterns are meant to run one
//! per arm; `plateau` and `file_map` add up when combined.

use crate::receipt::ArmReceipt;
use crate::record::ArmStatus;
use crate::stats;
use sampler::Phase;
use serde::{Deserialize, Serialize};
use worker_contract::{CalibrationSpec, MIB, WorkerSpec};

/// Relative tolerance for sizes the worker allocates and touches.
pub const SIZE_TOLERANCE: f64 = 0.05;
/// Untouched reservations may add page tables and guard pages, never this much.
pub const RESERVE_RESIDENT_CEILING_MIB: f64 = 16.0;
/// Slack for file-backed and anonymous attribution of a mapped file.
pub const FILE_MAP_SLACK_MIB: f64 = 8.0;

/// One expected-vs-measured line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationCheck {
    pub arm: String,
    pub pattern: String,
    pub quantity: String,
    pub rule: String,
    pub expected_mib: f64,
    pub measured_mib: Option<f64>,
    pub pass: bool,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

fn growth(
    arm: &ArmReceipt,
    from: Phase,
    to: Phase,
    field: fn(&sampler::TaskMemory) -> Option<u64>,
) -> Option<f64> {
    let a = field(&arm.phase(from, None)?.memory)?;
    let b = field(&arm.phase(to, None)?.memory)?;
    Some(mib(b) - mib(a))
}

struct Checks<'a> {
    arm: &'a str,
    out: Vec<CalibrationCheck>,
}

impl Checks<'_> {
    fn push(
        &mut self,
        pattern: &str,
        quantity: &str,
        rule: String,
        expected: f64,
        measured: Option<f64>,
        pass: impl Fn(f64) -> bool,
    ) {
        self.out.push(CalibrationCheck {
            arm: self.arm.to_string(),
            pattern: pattern.into(),
            quantity: quantity.into(),
            rule,
            expected_mib: expected,
            measured_mib: measured,
            pass: measured.is_some_and(pass),
        });
    }

    fn within(&mut self, pattern: &str, quantity: &str, expected: f64, measured: Option<f64>) {
        let tol = expected.abs() * SIZE_TOLERANCE;
        self.push(
            pattern,
            quantity,
            format!("within ±{:.0} %", SIZE_TOLERANCE * 100.0),
            expected,
            measured,
            |m| (m - expected).abs() <= tol,
        );
    }
}

/// Check one calibration arm against its spec; empty for other workers.
pub fn check_arm(arm: &ArmReceipt) -> Vec<CalibrationCheck> {
    let Some(spec) = &arm.spec else {
        return Vec::new();
    };
    let WorkerSpec::Calibrate(cal) = &spec.worker;
    let mut c = Checks {
        arm: &arm.id,
        out: Vec::new(),
    };
    c.push(
        "arm",
        "worker ran every phase",
        "status completed".into(),
        0.0,
        Some(0.0),
        |_| arm.status == ArmStatus::Completed,
    );
    check_load(&mut c, arm, cal);
    check_leak(&mut c, arm, cal);
    check_spike(&mut c, arm, cal);
    c.out
}

fn check_load(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let resident = |m: &sampler::TaskMemory| Some(m.resident_bytes);
    let held = cal.plateau.map_or(0, |p| p.mib) + cal.file_map.map_or(0, |f| f.mib);
    let res_growth = growth(arm, Phase::ProcessStart, Phase::StateReady, resident);
    if held > 0 {
        let pattern = if cal.plateau.is_some() {
            "plateau"
        } else {
            "file_map"
        };
        c.within(
            pattern,
            "resident growth process_start→state_ready",
            held as f64,
            res_growth,
        );
    }
    if let Some(f) = cal.file_map {
        let expected = f.mib as f64;
        let file = growth(arm, Phase::ProcessStart, Phase::StateReady, |m| {
            m.rss_file_bytes
        });
        c.push(
            "file_map",
            "file-backed resident growth",
            format!("≥ expected − {FILE_MAP_SLACK_MIB} MiB"),
            expected,
            file,
            |m| m >= expected - FILE_MAP_SLACK_MIB,
        );
        let plateau = cal.plateau.map_or(0, |p| p.mib) as f64;
        let anon = growth(arm, Phase::ProcessStart, Phase::StateReady, |m| {
            m.rss_anon_bytes
        })
        .map(|g| g - plateau);
        c.push(
            "file_map",
            "anonymous growth beyond the plateau",
            format!("< {FILE_MAP_SLACK_MIB} MiB"),
            0.0,
            anon,
            |m| m < FILE_MAP_SLACK_MIB,
        );
    }
    if let Some(r) = cal.reserve {
        let expected = r.mib as f64;
        let virt = growth(arm, Phase::ProcessStart, Phase::StateReady, |m| {
            Some(m.virtual_bytes)
        });
        c.push(
            "reserve",
            "virtual size growth",
            "≥ expected".into(),
            expected,
            virt,
            |m| m >= expected,
        );
        let untouched = res_growth.map(|g| g - held as f64);
        c.push(
            "reserve",
            "resident growth beyond touched patterns",
            format!("< {RESERVE_RESIDENT_CEILING_MIB} MiB"),
            0.0,
            untouched,
            |m| m < RESERVE_RESIDENT_CEILING_MIB,
        );
    }
}

fn check_leak(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let Some(leak) = cal.leak else { return };
    let points: Vec<(f64, f64)> = arm
        .phases
        .iter()
        .filter(|p| p.phase == Phase::RequestEnd)
        .filter_map(|p| Some((p.request_id? as f64, mib(p.memory.resident_bytes))))
        .collect();
    c.within(
        "leak",
        "slope of resident at request_end per request",
        leak.mib_per_request,
        stats::ols_slope(&points),
    );
}

fn check_spike(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let Some(spike) = cal.spike else { return };
    let expected = spike.mib as f64;
    let begin = arm.phase(Phase::RequestBegin, Some(spike.request));
    let end = arm.phase(Phase::RequestEnd, Some(spike.request));
    let base = begin.map(|b| b.memory.resident_bytes);
    let kernel = end.and_then(|e| Some(mib(e.memory.resident_peak_bytes?) - mib(base?)));
    let series = end.and_then(|e| Some(mib(e.series_max_resident_bytes?) - mib(base?)));
    c.within(
        "spike",
        "kernel peak of the request phase above request_begin",
        expected,
        kernel,
    );
    if spike.between_ticks {
        c.push(
            "spike",
            "series maximum above request_begin (must miss the spike)",
            "< half the spike".into(),
            expected,
            series,
            |m| m < expected / 2.0,
        );
        let flagged = end.and_then(|e| e.peak_between_samples);
        c.push(
            "spike",
            "peak_between_samples flag",
            "set".into(),
            1.0,
            flagged.map(|f| if f { 1.0 } else { 0.0 }),
            |m| m == 1.0,
        );
    } else {
        c.within(
            "spike",
            "series maximum above request_begin",
            expected,
            series,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_is_inclusive_and_missing_measurement_fails() {
        let mut c = Checks {
            arm: "a",
            out: Vec::new(),
        };
        c.within("plateau", "q", 100.0, Some(105.0));
        c.within("plateau", "q", 100.0, Some(105.01));
        c.within("plateau", "q", 100.0, Some(94.99));
        c.within("plateau", "q", 100.0, None);
        let pass: Vec<bool> = c.out.iter().map(|x| x.pass).collect();
        assert_eq!(pass, [true, false, false, false]);
    }
}
