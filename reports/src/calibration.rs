//! Expected vs measured for the calibration worker's known patterns.
//!
//! Each check turns one pattern of an arm's spec into the quantity the
//! harness must reproduce, with the tolerance the skeleton issue sets
//! (±5 % of the pattern's size unless stated). Patterns are meant to run one
//! per arm; `plateau` and `file_map` add up when combined.

use crate::receipt::{ArmReceipt, PhaseRow};
use crate::record::ArmStatus;
use analysis::stats;
use sampler::{Phase, TaskMemory};
use serde::{Deserialize, Serialize};
use worker_contract::{CalibrationSpec, MIB, Spike, WorkerSpec};

/// Relative tolerance for sizes the worker allocates and touches.
pub const SIZE_TOLERANCE: f64 = 0.05;
/// Untouched reservations may add page tables and guard pages, never this much.
pub const RESERVE_RESIDENT_CEILING_MIB: f64 = 16.0;
/// Slack for file-backed and anonymous attribution of a mapped file.
pub const FILE_MAP_SLACK_MIB: f64 = 8.0;

/// One expected-vs-measured line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationCheck {
    /// The calibration arm id.
    pub arm: String,
    /// The calibration pattern checked (`arm`, `file_map`, `reserve`, `spike`, …).
    pub pattern: String,
    /// What is measured, in words (e.g. `anonymous growth beyond the plateau`).
    pub quantity: String,
    /// The rule the measurement is held to, in words (e.g. `within ±5 %`, `yes`).
    pub rule: String,
    /// `MiB`, `MiB/request`, or `yes/no` (1 = yes) for conditions.
    pub unit: String,
    /// The value the pattern should produce, in `unit`.
    pub expected: f64,
    /// The value measured, in `unit`; `None` when the receipt lacks it (the check fails).
    pub measured: Option<f64>,
    /// True when the measured value meets the rule.
    pub pass: bool,
}

impl CalibrationCheck {
    /// A value as a person reads it in this check's unit.
    pub fn format(&self, value: Option<f64>) -> String {
        match (value, self.unit.as_str()) {
            (None, _) => "-".into(),
            (Some(v), "yes/no") => if v == 1.0 { "yes" } else { "no" }.into(),
            (Some(v), _) => format!("{v:.2}"),
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

fn growth(
    arm: &ArmReceipt,
    from: Phase,
    to: Phase,
    field: fn(&TaskMemory) -> Option<u64>,
) -> Option<f64> {
    let a = field(&arm.phase(from, None)?.memory)?;
    let b = field(&arm.phase(to, None)?.memory)?;
    Some(mib(b) - mib(a))
}

struct Checks<'a> {
    arm: &'a str,
    out: Vec<CalibrationCheck>,
}

/// What a check expects, in which unit, by which rule.
struct Rule {
    text: String,
    unit: &'static str,
    expected: f64,
}

impl Rule {
    fn mib(text: impl Into<String>, expected: f64) -> Self {
        Rule {
            text: text.into(),
            unit: "MiB",
            expected,
        }
    }
}

fn within_text() -> String {
    format!("within ±{:.0} %", SIZE_TOLERANCE * 100.0)
}

impl Checks<'_> {
    fn push(
        &mut self,
        pattern: &str,
        quantity: &str,
        rule: Rule,
        measured: Option<f64>,
        pass: impl Fn(f64) -> bool,
    ) {
        self.out.push(CalibrationCheck {
            arm: self.arm.to_string(),
            pattern: pattern.into(),
            quantity: quantity.into(),
            rule: rule.text,
            unit: rule.unit.into(),
            expected: rule.expected,
            measured,
            pass: measured.is_some_and(pass),
        });
    }

    /// `measured` within ±5 % of `rule.expected`.
    fn within(&mut self, pattern: &str, quantity: &str, rule: Rule, measured: Option<f64>) {
        let (expected, tol) = (rule.expected, rule.expected.abs() * SIZE_TOLERANCE);
        self.push(pattern, quantity, rule, measured, |m| {
            (m - expected).abs() <= tol
        });
    }

    /// A yes/no condition that must hold.
    fn condition(&mut self, pattern: &str, quantity: &str, holds: Option<bool>) {
        let rule = Rule {
            text: "yes".into(),
            unit: "yes/no",
            expected: 1.0,
        };
        self.push(
            pattern,
            quantity,
            rule,
            holds.map(|h| if h { 1.0 } else { 0.0 }),
            |m| m == 1.0,
        );
    }
}

/// Check one calibration arm against its spec; empty for other workers.
pub fn check_arm(arm: &ArmReceipt) -> Vec<CalibrationCheck> {
    let Some(spec) = &arm.spec else {
        return Vec::new();
    };
    let WorkerSpec::Calibrate(cal) = &spec.worker else {
        return Vec::new();
    };
    let mut c = Checks {
        arm: &arm.id,
        out: Vec::new(),
    };
    c.condition(
        "arm",
        "worker completed every phase",
        Some(arm.status == ArmStatus::Completed),
    );
    check_load(&mut c, arm, cal);
    check_locked(&mut c, arm, cal);
    check_leak(&mut c, arm, cal);
    check_spike(&mut c, arm, cal);
    check_gpu(&mut c, arm, cal);
    check_metal(&mut c, arm, cal);
    c.out
}

/// Metal patterns: the markers' own reading (`MTLDevice.currentAllocatedSize`)
/// proves the in-process number; the external series proves the sampler's
/// through the worker's footprint, which on unified memory (Apple Silicon)
/// holds a shared-storage buffer like any other memory of the process.
/// Each within ±5 % of the allocation size; the device object's own
/// memory is below process_start. `metal_autorelease` allocates nothing
/// of known size: its soak's verdict is its check.
fn check_metal(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let device = |m: &TaskMemory| m.device_bytes;
    let footprint_at = |phase: Phase, request: Option<u64>| {
        arm.phase(phase, request)
            .and_then(|p| p.memory.footprint_bytes)
    };
    if let Some(p) = cal.metal_plateau {
        let expected = p.mib as f64;
        c.within(
            "metal_plateau",
            "device growth process_start→state_ready (marker, currentAllocatedSize)",
            Rule::mib(within_text(), expected),
            load_growth(arm, device),
        );
        let held_max = arm
            .phases
            .iter()
            .skip_while(|p| p.phase != Phase::ModelLoaded)
            .take_while(|p| p.phase != Phase::TeardownDone)
            .filter_map(|p| p.series_max_footprint_bytes)
            .max();
        let series = held_max
            .zip(footprint_at(Phase::ProcessStart, None))
            .map(|(max, base)| mib(max) - mib(base));
        c.within(
            "metal_plateau",
            "series footprint maximum model_loaded→idle_end above process_start (unified memory)",
            Rule::mib(within_text(), expected),
            series,
        );
    }
    if let Some(leak) = cal.metal_leak {
        device_leak_slopes(
            c,
            arm,
            ("metal_leak", leak.mib_per_request),
            [
                "slope of device memory at request_end per request (marker, currentAllocatedSize)",
                "slope of the series footprint maximum per request (unified memory)",
            ],
            |p| p.series_max_footprint_bytes,
        );
    }
    if let Some(spike) = cal.metal_spike {
        let expected = spike.mib as f64;
        let seen = arm
            .phase(Phase::RequestEnd, Some(spike.request))
            .and_then(|p| p.series_max_footprint_bytes)
            .zip(footprint_at(Phase::RequestBegin, Some(spike.request)))
            .map(|(max, base)| mib(max) - mib(base));
        c.within(
            "metal_spike",
            "series footprint maximum of the request above request_begin (unified memory)",
            Rule::mib(within_text(), expected),
            seen,
        );
        let after = arm
            .phase(Phase::RequestEnd, Some(spike.request))
            .and_then(|e| e.memory.device_bytes)
            .zip(
                arm.phase(Phase::RequestBegin, Some(spike.request))
                    .and_then(|b| b.memory.device_bytes),
            )
            .map(|(end, base)| mib(end) - mib(base));
        let rule = Rule::mib(format!("< {FILE_MAP_SLACK_MIB} MiB"), 0.0);
        c.push(
            "metal_spike",
            "device memory at request_end above request_begin (freed, marker)",
            rule,
            after,
            |m| m.abs() < FILE_MAP_SLACK_MIB,
        );
    }
}

/// A device leak's two checks against `expected` MiB a request: the slope
/// of the markers' `device_bytes` at each `request_end`, and of `series_max`
/// (the series' maximum in each request's window), each named by its
/// `quantity`.
fn device_leak_slopes(
    c: &mut Checks,
    arm: &ArmReceipt,
    (pattern, expected): (&str, f64),
    quantity: [&str; 2],
    series_max: fn(&PhaseRow) -> Option<u64>,
) {
    let ends = || arm.phases.iter().filter(|p| p.phase == Phase::RequestEnd);
    let slope = |bytes: &dyn Fn(&PhaseRow) -> Option<u64>| {
        let points: Vec<(f64, f64)> = ends()
            .filter_map(|p| Some((p.request_id? as f64, mib(bytes(p)?))))
            .collect();
        stats::ols_slope(&points)
    };
    let measured = [slope(&|p| p.memory.device_bytes), slope(&series_max)];
    for (quantity, measured) in quantity.into_iter().zip(measured) {
        let rule = Rule {
            text: within_text(),
            unit: "MiB/request",
            expected,
        };
        c.within(pattern, quantity, rule, measured);
    }
}

/// Device memory (GPU) patterns: the markers' own NVML reading proves the
/// in-process number and the external series proves the sampler's, each
/// within ±5 % (the context's own device memory is below process_start).
fn check_gpu(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let device = |m: &TaskMemory| m.device_bytes;
    let series_at = |phase: Phase, request: Option<u64>| {
        arm.phase(phase, request)
            .and_then(|p| p.series_max_gpu_worker_bytes)
    };
    if let Some(p) = cal.gpu_plateau {
        let expected = p.mib as f64;
        let marker = load_growth(arm, device);
        c.within(
            "gpu_plateau",
            "device growth process_start→state_ready (marker, NVML per pid)",
            Rule::mib(within_text(), expected),
            marker,
        );
        // The block is held from model_loaded to teardown: every window
        // from model_loaded's to idle_end's sees it.
        let held_max = arm
            .phases
            .iter()
            .skip_while(|p| p.phase != Phase::ModelLoaded)
            .take_while(|p| p.phase != Phase::TeardownDone)
            .filter_map(|p| p.series_max_gpu_worker_bytes)
            .max();
        let series = held_max
            .zip(
                arm.phase(Phase::ProcessStart, None)
                    .and_then(|p| p.memory.device_bytes),
            )
            .map(|(max, base)| mib(max) - mib(base));
        c.within(
            "gpu_plateau",
            "series device maximum model_loaded→idle_end above process_start",
            Rule::mib(within_text(), expected),
            series,
        );
    }
    if let Some(leak) = cal.gpu_leak {
        device_leak_slopes(
            c,
            arm,
            ("gpu_leak", leak.mib_per_request),
            [
                "slope of device memory at request_end per request (marker)",
                "slope of the series device maximum per request",
            ],
            |p| p.series_max_gpu_worker_bytes,
        );
    }
    if let Some(spike) = cal.gpu_spike {
        let expected = spike.mib as f64;
        let base = arm
            .phase(Phase::RequestBegin, Some(spike.request))
            .and_then(|b| b.memory.device_bytes);
        let seen = series_at(Phase::RequestEnd, Some(spike.request))
            .zip(base)
            .map(|(max, base)| mib(max) - mib(base));
        c.within(
            "gpu_spike",
            "series device maximum of the request above request_begin",
            Rule::mib(within_text(), expected),
            seen,
        );
        let after = arm
            .phase(Phase::RequestEnd, Some(spike.request))
            .and_then(|e| e.memory.device_bytes)
            .zip(base)
            .map(|(end, base)| mib(end) - mib(base));
        let rule = Rule::mib(format!("< {FILE_MAP_SLACK_MIB} MiB"), 0.0);
        c.push(
            "gpu_spike",
            "device memory at request_end above request_begin (freed)",
            rule,
            after,
            |m| m.abs() < FILE_MAP_SLACK_MIB,
        );
    }
}

fn load_growth(arm: &ArmReceipt, field: fn(&TaskMemory) -> Option<u64>) -> Option<f64> {
    growth(arm, Phase::ProcessStart, Phase::StateReady, field)
}

fn check_load(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let plateau = cal.plateau.map_or(0, |p| p.mib) as f64;
    let held = plateau + cal.file_map.map_or(0, |f| f.mib) as f64;
    let resident = load_growth(arm, |m| Some(m.resident_bytes));
    if held > 0.0 {
        let pattern = if cal.plateau.is_some() {
            "plateau"
        } else {
            "file_map"
        };
        let quantity = "resident growth process_start→state_ready";
        c.within(pattern, quantity, Rule::mib(within_text(), held), resident);
    }
    if let Some(f) = cal.file_map {
        let expected = f.mib as f64;
        let file = load_growth(arm, |m| m.rss_file_bytes);
        let rule = Rule::mib(format!("≥ expected − {FILE_MAP_SLACK_MIB} MiB"), expected);
        c.push("file_map", "file-backed resident growth", rule, file, |m| {
            m >= expected - FILE_MAP_SLACK_MIB
        });
        let anon = load_growth(arm, |m| m.rss_anon_bytes).map(|g| g - plateau);
        let rule = Rule::mib(format!("< {FILE_MAP_SLACK_MIB} MiB"), 0.0);
        c.push(
            "file_map",
            "anonymous growth beyond the plateau",
            rule,
            anon,
            |m| m < FILE_MAP_SLACK_MIB,
        );
    }
    if let Some(r) = cal.reserve {
        let expected = r.mib as f64;
        let virt = load_growth(arm, |m| Some(m.virtual_bytes));
        let rule = Rule::mib("≥ expected", expected);
        c.push("reserve", "virtual size growth", rule, virt, |m| {
            m >= expected
        });
        let untouched = resident.map(|g| g - held);
        let rule = Rule::mib(format!("< {RESERVE_RESIDENT_CEILING_MIB} MiB"), 0.0);
        c.push(
            "reserve",
            "resident growth beyond touched patterns",
            rule,
            untouched,
            |m| m < RESERVE_RESIDENT_CEILING_MIB,
        );
    }
}

/// A locked block: the system's held memory (Linux `Mlocked`, macOS wired)
/// rises by it in the `model_loaded` phase and falls by it at teardown, read
/// exactly by the two markers around each, within ±5 %.
fn check_locked(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let Some(l) = cal.locked else { return };
    let expected = l.mib as f64;
    let held = |phase| {
        let d = arm.phase(phase, None)?.system.as_ref()?;
        d.mlocked_bytes
            .or(d.wired_bytes)
            .map(|b| b as f64 / MIB as f64)
    };
    let quantity = "system locked (Mlocked; wired on macOS) change in model_loaded";
    c.within(
        "locked",
        quantity,
        Rule::mib(within_text(), expected),
        held(Phase::ModelLoaded),
    );
    let quantity = "system locked change in teardown_done";
    let released = held(Phase::TeardownDone);
    c.within(
        "locked",
        quantity,
        Rule::mib(within_text(), -expected),
        released,
    );
}

fn check_leak(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let Some(leak) = cal.leak else { return };
    let points: Vec<(f64, f64)> = arm
        .phases
        .iter()
        .filter(|p| p.phase == Phase::RequestEnd)
        .filter_map(|p| Some((p.request_id? as f64, mib(p.memory.resident_bytes))))
        .collect();
    let rule = Rule {
        text: within_text(),
        unit: "MiB/request",
        expected: leak.mib_per_request,
    };
    let quantity = "slope of resident at request_end per request";
    c.within("leak", quantity, rule, stats::ols_slope(&points));
}

fn phase_of(phases: &[PhaseRow], phase: Phase, request: u64) -> Option<&PhaseRow> {
    phases
        .iter()
        .find(|p| p.phase == phase && p.request_id == Some(request))
}

/// Kernel peak of request `request`'s phase above its `request_begin`, in MiB.
fn kernel_rise(phases: &[PhaseRow], request: u64) -> Option<f64> {
    let base = phase_of(phases, Phase::RequestBegin, request)?
        .memory
        .resident_bytes;
    let end = phase_of(phases, Phase::RequestEnd, request)?;
    Some(mib(end.memory.resident_peak_bytes?) - mib(base))
}

/// The request whose spike is judged. A plain spike: `spike.request`. A
/// `between_ticks` spike is tried again in later requests while it overlaps
/// a tick (see [`Spike`]), so the last request from `spike.request` on whose
/// kernel peak rose by half the spike or more.
fn judged_spike_request(phases: &[PhaseRow], spike: &Spike) -> u64 {
    if !spike.between_ticks {
        return spike.request;
    }
    let half = spike.mib as f64 / 2.0;
    phases
        .iter()
        .filter(|p| p.phase == Phase::RequestEnd)
        .filter_map(|p| p.request_id)
        .filter(|&r| r >= spike.request && kernel_rise(phases, r).is_some_and(|m| m >= half))
        .max()
        .unwrap_or(spike.request)
}

fn check_spike(c: &mut Checks, arm: &ArmReceipt, cal: &CalibrationSpec) {
    let Some(spike) = cal.spike else { return };
    let expected = spike.mib as f64;
    let request = judged_spike_request(&arm.phases, &spike);
    let begin = arm.phase(Phase::RequestBegin, Some(request));
    let end = arm.phase(Phase::RequestEnd, Some(request));
    let base = begin.map(|b| b.memory.resident_bytes);
    let kernel = kernel_rise(&arm.phases, request);
    let series = end.and_then(|e| Some(mib(e.series_max_resident_bytes?) - mib(base?)));
    let quantity = "kernel peak of the request phase above request_begin";
    c.within(
        "spike",
        quantity,
        Rule::mib(within_text(), expected),
        kernel,
    );
    if spike.between_ticks {
        let quantity = "series maximum above request_begin (must miss the spike)";
        let rule = Rule::mib("< half the spike", expected);
        c.push("spike", quantity, rule, series, |m| m < expected / 2.0);
        let flag = end.and_then(|e| e.peak_between_samples);
        c.condition("spike", "peak_between_samples set", flag);
    } else {
        let quantity = "series maximum above request_begin";
        c.within(
            "spike",
            quantity,
            Rule::mib(within_text(), expected),
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
        for measured in [Some(105.0), Some(105.01), Some(94.99), None] {
            c.within("plateau", "q", Rule::mib(within_text(), 100.0), measured);
        }
        c.condition("spike", "flag", Some(true));
        c.condition("spike", "flag", Some(false));
        c.condition("spike", "flag", None);
        let pass: Vec<bool> = c.out.iter().map(|x| x.pass).collect();
        assert_eq!(pass, [true, false, false, false, true, false, false]);
        assert_eq!(c.out[4].format(c.out[4].measured), "yes");
        assert_eq!(c.out[5].format(c.out[5].measured), "no");
        assert_eq!(c.out[0].format(c.out[0].measured), "105.00");
        assert_eq!(c.out[3].format(c.out[3].measured), "-");
    }

    fn request_rows(request: u64, begin_mib: u64, peak_mib: u64) -> [PhaseRow; 2] {
        let row = |phase, resident: u64, peak: Option<u64>| PhaseRow {
            phase,
            seq: 0,
            request_id: Some(request),
            t_ns: 0,
            memory: TaskMemory {
                resident_bytes: resident * MIB,
                resident_peak_bytes: peak.map(|p| p * MIB),
                ..TaskMemory::default()
            },
            window_start_ns: None,
            samples: 1,
            series_max_resident_bytes: None,
            series_max_footprint_bytes: None,
            observed_max_resident_bytes: resident * MIB,
            observed_max_footprint_bytes: None,
            peak_between_samples: None,
            series_max_gpu_worker_bytes: None,
            system: None,
        };
        [
            row(Phase::RequestBegin, begin_mib, Some(begin_mib)),
            row(Phase::RequestEnd, begin_mib, Some(peak_mib)),
        ]
    }

    /// A Metal arm as a Mac would record it: the device object's 2 MiB at
    /// process_start, a 512 MiB plateau from model_loaded, 32 MiB leaked
    /// per request and a 256 MiB spike inside request 2; the footprint
    /// (unified memory) carries every buffer above a 40 MiB host floor,
    /// and the series saw the spike.
    fn metal_arm(leak_mib: f64) -> ArmReceipt {
        let cal = CalibrationSpec {
            requests: 5,
            metal_plateau: Some(worker_contract::Plateau { mib: 512 }),
            metal_leak: Some(worker_contract::Leak {
                mib_per_request: 32.0,
            }),
            metal_spike: Some(Spike {
                mib: 256,
                hold_ms: 400,
                request: 2,
                between_ticks: false,
            }),
            ..CalibrationSpec::default()
        };
        let row = |phase, request_id, device_mib: f64, series_extra_mib: f64| {
            let device = (device_mib * MIB as f64) as u64;
            let footprint = (40 * MIB) + device;
            PhaseRow {
                phase,
                seq: 0,
                request_id,
                t_ns: 0,
                memory: TaskMemory {
                    resident_bytes: 40 * MIB,
                    footprint_bytes: Some(footprint),
                    device_bytes: Some(device),
                    ..TaskMemory::default()
                },
                window_start_ns: None,
                samples: 1,
                series_max_resident_bytes: None,
                series_max_footprint_bytes: Some(
                    footprint + (series_extra_mib * MIB as f64) as u64,
                ),
                observed_max_resident_bytes: 40 * MIB,
                observed_max_footprint_bytes: None,
                peak_between_samples: None,
                series_max_gpu_worker_bytes: None,
                system: None,
            }
        };
        let mut phases = vec![
            row(Phase::ProcessStart, None, 2.0, 0.0),
            row(Phase::ModelLoaded, None, 514.0, 0.0),
            row(Phase::StateReady, None, 514.0, 0.0),
            row(Phase::WarmupDone, None, 514.0, 0.0),
        ];
        for r in 0..5u64 {
            let before = 514.0 + leak_mib * r as f64;
            let after = before + leak_mib;
            let spike = if r == 2 { 256.0 } else { 0.0 };
            phases.push(row(Phase::RequestBegin, Some(r), before, 0.0));
            phases.push(row(Phase::RequestEnd, Some(r), after, spike));
        }
        let last = 514.0 + leak_mib * 5.0;
        phases.push(row(Phase::IdleEnd, None, last, 0.0));
        phases.push(row(Phase::TeardownDone, None, 2.0, 0.0));
        ArmReceipt {
            spec: Some(worker_contract::ArmSpec {
                contract_version: worker_contract::CONTRACT_VERSION,
                arm_id: "metal".into(),
                scratch_dir: "/tmp".into(),
                sampler: None,
                settle_ms: 0,
                lifecycle: None,
                attribution: None,
                worker: WorkerSpec::Calibrate(cal),
            }),
            ..ArmReceipt::completed("metal", phases, 5)
        }
    }

    #[test]
    fn metal_patterns_are_checked_at_the_markers_and_in_the_series_against_their_sizes() {
        let checks = check_arm(&metal_arm(32.0));
        let metal: Vec<(&str, f64, Option<f64>, bool)> = checks
            .iter()
            .filter(|c| c.pattern.starts_with("metal_"))
            .map(|c| (c.pattern.as_str(), c.expected, c.measured, c.pass))
            .collect();
        assert_eq!(metal.len(), 6, "{checks:#?}");
        let (plateau, leak, spike) = (&metal[0..2], &metal[2..4], &metal[4..6]);
        assert_eq!(plateau[0], ("metal_plateau", 512.0, Some(512.0), true));
        // The series maximum from model_loaded on is request 2's: the
        // plateau, three leaked buffers and the spike above process_start.
        assert_eq!(plateau[1].2, Some(512.0 + 3.0 * 32.0 + 256.0));
        assert!(
            !plateau[1].3,
            "patterns run one per arm; combined, the series sees all"
        );
        assert_eq!(leak[0].0, "metal_leak");
        assert!((leak[0].2.unwrap() - 32.0).abs() < 1e-9 && leak[0].3);
        // The spike sits in the middle request, so the series slope is the leak's.
        assert!((leak[1].2.unwrap() - 32.0).abs() < 1e-9 && leak[1].3);
        assert_eq!(spike[0], ("metal_spike", 256.0, Some(256.0 + 32.0), false));
        assert_eq!(spike[1].0, "metal_spike");
        assert_eq!(
            spike[1].2,
            Some(32.0),
            "the request's leak stays; only the spike is freed"
        );

        // A leak that allocates half of what it claims fails both ways.
        let short = check_arm(&metal_arm(16.0));
        let leak: Vec<bool> = short
            .iter()
            .filter(|c| c.pattern == "metal_leak")
            .map(|c| c.pass)
            .collect();
        assert_eq!(leak, [false, false]);
    }

    #[test]
    fn a_between_ticks_spike_is_judged_on_its_last_attempt() {
        let spike = |between_ticks| Spike {
            mib: 200,
            hold_ms: 10,
            request: 1,
            between_ticks,
        };
        // Request 0 has no spike, 1 overlapped a tick, 2 fitted, 3 had none.
        let phases: Vec<PhaseRow> = [(0, 6, 6), (1, 6, 207), (2, 6, 206), (3, 6, 7)]
            .into_iter()
            .flat_map(|(r, begin, peak)| request_rows(r, begin, peak))
            .collect();
        assert_eq!(judged_spike_request(&phases, &spike(true)), 2);
        assert_eq!(kernel_rise(&phases, 2), Some(200.0));
        // A plain spike is judged where the spec puts it, whatever happened later.
        assert_eq!(judged_spike_request(&phases, &spike(false)), 1);
        // A rise below half the spike is no attempt: the first request stays judged.
        let small: Vec<PhaseRow> = [(1, 6, 90), (2, 6, 50)]
            .into_iter()
            .flat_map(|(r, begin, peak)| request_rows(r, begin, peak))
            .collect();
        assert_eq!(judged_spike_request(&small, &spike(true)), 1);
    }
}
