//! What the comparison section shows, computed from the receipt before any
//! HTML is written: the arm matrix with Δ against each arm's control, the
//! gate pictures' data (peak per phase against the threshold, latency
//! limits), the failing gates in one sentence each, whisper.cpp's logged
//! state buffers against the resident memory measured, and the identity and
//! topology keys that differ between arms.

use reports::gates::{GateResult, GateSpec, Outcome, memory_field_name, memory_field_value};
use reports::receipt::{ArmReceipt, Receipt};
use reports::record::ArmStatus;
use sampler::Phase;
use std::collections::BTreeMap;

/// Bytes in one MiB (2^20), for writing byte values in MiB.
pub const MIB: f64 = 1048576.0;

/// The arm `arm` is compared with, when it names one that has measurements.
pub fn control_of<'a>(r: &'a Receipt, arm: &str) -> Option<&'a ArmReceipt> {
    let id = r.run.controls.get(arm)?;
    r.arms.iter().find(|a| &a.id == id)
}

/// A value and its difference from the control's (absolute and in %).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cell {
    /// The arm's value, in the column's unit before scaling (bytes, ns or a ratio); `None` when the arm has none.
    pub value: Option<f64>,
    /// `value - control`; `None` when either is missing.
    pub delta: Option<f64>,
    /// `delta` as a percentage of the control's value; `None` when the control is 0 or missing.
    pub pct: Option<f64>,
}

impl Cell {
    fn new(value: Option<f64>, control: Option<f64>) -> Cell {
        let delta = value.zip(control).map(|(v, c)| v - c);
        let pct = delta
            .zip(control)
            .and_then(|(d, c)| (c != 0.0).then(|| d / c * 100.0));
        Cell { value, delta, pct }
    }
}

/// How a column's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, written in MiB.
    Mib,
    /// Nanoseconds, written in ms.
    Ms,
    /// A ratio, written in %.
    Percent,
}

/// One key metric of the matrix.
pub struct Column {
    /// The column heading.
    pub name: &'static str,
    /// How the column's values are written.
    pub unit: Unit,
    value: fn(&ArmReceipt) -> Option<f64>,
}

/// The phase peak a memory gate reads by default (`field = "peak"`): the
/// footprint peak where the platform reports one, else the resident peak.
pub fn peak_of(arm: &ArmReceipt, phase: Phase) -> Option<u64> {
    arm.phases
        .iter()
        .filter(|p| p.phase == phase)
        .filter_map(|p| {
            p.memory
                .footprint_peak_bytes
                .or(p.memory.resident_peak_bytes)
        })
        .max()
}

/// Every state's logged kv and compute buffers, summed.
pub fn logged_state_bytes(arm: &ArmReceipt) -> Option<u64> {
    let rt = arm.speech.as_ref()?.runtime.as_ref()?;
    // A runtime that logs no states (CTranslate2) has no logged figure, not 0.
    (!rt.topology.states.is_empty()).then(|| {
        rt.topology
            .states
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.total_bytes()))
    })
}

fn steady_p50(a: &ArmReceipt) -> Option<f64> {
    match &a.speech {
        Some(s) => s.latency.steady_p50_ns,
        None => a.latency.as_ref().map(|l| l.p50_ns),
    }
}

fn steady_p95(a: &ArmReceipt) -> Option<f64> {
    match &a.speech {
        Some(s) => s.latency.steady_p95_ns,
        None => a.latency.as_ref().map(|l| l.p95_ns),
    }
}

/// WER over every category with reference words: edits / words.
pub fn overall_wer(a: &ArmReceipt) -> Option<f64> {
    let w = a.speech.as_ref()?.quality.wer.as_ref()?;
    let (edits, words) =
        w.categories
            .iter()
            .filter(|c| c.wer.is_some())
            .fold((0u64, 0u64), |(e, n), c| {
                (
                    e.saturating_add(c.counts.edits()),
                    n.saturating_add(c.counts.reference_words),
                )
            });
    (words > 0).then(|| edits as f64 / words as f64)
}

/// The matrix's columns, in order; a column no arm has a value for is dropped.
pub const COLUMNS: [Column; 8] = [
    Column {
        name: "state_ready peak",
        unit: Unit::Mib,
        value: |a| peak_of(a, Phase::StateReady).map(|b| b as f64),
    },
    Column {
        name: "max resident (series)",
        unit: Unit::Mib,
        value: |a| a.series.max_resident_bytes.map(|b| b as f64),
    },
    Column {
        name: "logged state buffers",
        unit: Unit::Mib,
        value: |a| logged_state_bytes(a).map(|b| b as f64),
    },
    Column {
        name: "cold load",
        unit: Unit::Ms,
        value: |a| a.speech.as_ref()?.latency.cold_load_ns.map(|v| v as f64),
    },
    Column {
        name: "first request",
        unit: Unit::Ms,
        value: |a| match &a.speech {
            Some(s) => s.latency.first_request_ns.map(|v| v as f64),
            None => a.latency.as_ref().map(|l| l.first_ns as f64),
        },
    },
    Column {
        name: "steady p50",
        unit: Unit::Ms,
        value: steady_p50,
    },
    Column {
        name: "steady p95",
        unit: Unit::Ms,
        value: steady_p95,
    },
    Column {
        name: "WER",
        unit: Unit::Percent,
        value: overall_wer,
    },
];

/// One arm in the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow {
    /// The arm id.
    pub arm: String,
    /// The arm it is compared with, when it names one.
    pub control: Option<String>,
    /// Another arm names this one as its control.
    pub is_control: bool,
    /// How the arm ended.
    pub status: ArmStatus,
    /// The arm verdict, for arms with gates.
    pub verdict: Option<Outcome>,
    /// Outputs against the control: `exact`, `N of M differ`, or why not compared.
    pub outputs: Option<String>,
    /// One cell per column of [`Matrix::columns`], in order.
    pub cells: Vec<Cell>,
}

/// Arms as rows, key metrics as columns, Δ against each arm's control.
pub struct Matrix {
    /// The key metrics at least one arm has a value for, in [`COLUMNS`] order.
    pub columns: Vec<&'static Column>,
    /// One row per arm, in receipt order.
    pub rows: Vec<MatrixRow>,
}

/// The arm matrix of `r`: each arm's key metrics with Δ against its control.
pub fn matrix(r: &Receipt) -> Matrix {
    let columns: Vec<&'static Column> = COLUMNS
        .iter()
        .filter(|c| r.arms.iter().any(|a| (c.value)(a).is_some()))
        .collect();
    let rows = r
        .arms
        .iter()
        .map(|a| {
            let control = control_of(r, &a.id);
            let cells = columns
                .iter()
                .map(|c| Cell::new((c.value)(a), control.and_then(|k| (c.value)(k))))
                .collect();
            MatrixRow {
                arm: a.id.clone(),
                control: r.run.controls.get(&a.id).cloned(),
                is_control: r.run.controls.values().any(|c| c == &a.id),
                status: a.status,
                verdict: r
                    .gates
                    .as_ref()
                    .and_then(|g| g.arms.iter().find(|v| v.arm == a.id))
                    .map(|v| v.verdict),
                outputs: outputs_text(r, &a.id),
                cells,
            }
        })
        .collect();
    Matrix { columns, rows }
}

fn outputs_text(r: &Receipt, arm: &str) -> Option<String> {
    let cmp = r.comparisons.iter().find(|c| c.arm == arm)?;
    Some(match &cmp.parity {
        Err(e) => format!("not compared: {e}"),
        // Neither arm transcribed anything (calibration arms): nothing to say.
        Ok(p) if p.fixtures_compared == 0 && p.only_in_a.is_empty() && p.only_in_b.is_empty() => {
            return None;
        }
        Ok(p) if p.fixtures_compared == 0 => "no fixture in common".into(),
        Ok(p) if p.is_exact() => format!("exact ({} fixtures)", p.fixtures_compared),
        Ok(p) => format!(
            "{} of {} differ",
            p.mismatches.len() + p.only_in_a.len() + p.only_in_b.len(),
            p.fixtures_compared
        ),
    })
}

/// The phases on a peak-per-phase picture; the request phases are one group.
pub const PHASE_GROUPS: [(&str, &[Phase]); 7] = [
    ("process_start", &[Phase::ProcessStart]),
    ("model_loaded", &[Phase::ModelLoaded]),
    ("state_ready", &[Phase::StateReady]),
    ("warmup_done", &[Phase::WarmupDone]),
    ("requests", &[Phase::RequestBegin, Phase::RequestEnd]),
    ("idle_end", &[Phase::IdleEnd]),
    ("teardown_done", &[Phase::TeardownDone]),
];

/// One arm's value of a memory field in every phase group (bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmPeaks {
    /// The arm id.
    pub arm: String,
    /// The arm's largest value of the field per group of [`PHASE_GROUPS`], in bytes; `None` where no marker of the group has it.
    pub per_group: Vec<Option<f64>>,
}

/// One gated arm on a memory picture: its check, Δ and Δ% against the
/// control, and how far it is from the limit.
#[derive(Debug, Clone, PartialEq)]
pub struct GateMark {
    /// The arm id.
    pub arm: String,
    /// The gate's outcome.
    pub outcome: Outcome,
    /// What the gate's first check measured (bytes).
    pub measured: Option<f64>,
    /// The control's value that check compared with (bytes); `None` for an absolute ceiling.
    pub control: Option<f64>,
    /// The limit the check applied (bytes).
    pub threshold: Option<f64>,
    /// How the threshold was set (the check's note).
    pub note: String,
}

impl GateMark {
    /// The measured value with its Δ and Δ% against the control.
    pub fn delta(&self) -> Cell {
        Cell::new(self.measured, self.control)
    }

    /// measured − threshold: positive is over the limit.
    pub fn margin(&self) -> Option<f64> {
        Some(self.measured? - self.threshold?)
    }

    /// The threshold as a percentage of the control (a `control_factor` of
    /// 1.05 is +5 %).
    pub fn allowed_pct(&self) -> Option<f64> {
        let (t, c) = (self.threshold?, self.control?);
        (c != 0.0).then(|| (t - c) / c * 100.0)
    }
}

/// A memory gate's picture: one phase and field, the control (if any) and
/// every arm gated on them against it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFigure {
    /// The gated phase.
    pub phase: Phase,
    /// The field read, as the check names it (`resident_peak_bytes`, …).
    pub field: String,
    /// The control arm the gates compare with; `None` for absolute ceilings.
    pub control: Option<String>,
    /// The control first, then each gated arm.
    pub arms: Vec<ArmPeaks>,
    /// One mark per gated arm, in the order judged.
    pub marks: Vec<GateMark>,
}

impl MemoryFigure {
    /// The index of the gated phase in [`PHASE_GROUPS`].
    pub fn group(&self) -> usize {
        PHASE_GROUPS
            .iter()
            .position(|(_, phases)| phases.contains(&self.phase))
            .unwrap_or(0)
    }
}

fn arm_peaks(arm: &ArmReceipt, field: reports::gates::MemoryField) -> ArmPeaks {
    ArmPeaks {
        arm: arm.id.clone(),
        per_group: PHASE_GROUPS
            .iter()
            .map(|(_, phases)| {
                arm.phases
                    .iter()
                    .filter(|p| phases.contains(&p.phase))
                    .filter_map(|p| memory_field_value(&p.memory, field))
                    .max()
                    .map(|b| b as f64)
            })
            .collect(),
    }
}

/// A latency gate's limits for one arm (ns).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMark {
    /// The arm id.
    pub arm: String,
    /// The gate's outcome.
    pub outcome: Outcome,
    /// (check name, measured, threshold), e.g. steady p95 and steady max.
    pub limits: Vec<(String, Option<f64>, Option<f64>)>,
}

/// Every gate that is not drawn as a memory or latency picture, with its
/// checks (shown as a compact card).
#[derive(Debug, Clone, PartialEq)]
pub struct GateCard<'a> {
    /// The arm id.
    pub arm: String,
    /// The gate's result, with its spec and checks.
    pub gate: &'a GateResult,
}

/// All gate pictures of a run, failing gates first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatePictures<'a> {
    /// Memory gates, grouped by phase, field and control.
    pub memory: Vec<MemoryFigure>,
    /// Control id → the arms whose latency gate compares with it.
    pub latency: Vec<(String, Vec<LatencyMark>)>,
    /// Gates drawn as cards, failing first.
    pub cards: Vec<GateCard<'a>>,
}

fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Fail => 0,
        Outcome::NotEvaluated => 1,
        Outcome::Pass => 2,
    }
}

/// The gate pictures of `r`'s gates, failing gates first; empty when the run has no gates.
pub fn gate_pictures(r: &Receipt) -> GatePictures<'_> {
    let mut out = GatePictures::default();
    let Some(report) = &r.gates else { return out };
    for v in &report.arms {
        let Some(arm) = r.arms.iter().find(|a| a.id == v.arm) else {
            continue;
        };
        for gate in &v.gates {
            match &gate.spec {
                GateSpec::Memory(g) => {
                    let field = reports::gates::resolve_memory_field(arm, g.phase, g.field);
                    let field_name = memory_field_name(field).to_string();
                    let control = v.control.clone().filter(|_| g.ceiling_mib.is_none());
                    let check = gate.checks.first();
                    let mark = GateMark {
                        arm: arm.id.clone(),
                        outcome: gate.outcome,
                        measured: check.and_then(|c| c.measured),
                        control: check.and_then(|c| c.control),
                        threshold: check.and_then(|c| c.threshold),
                        note: check.map(|c| c.note.clone()).unwrap_or_default(),
                    };
                    let found = out.memory.iter_mut().find(|f| {
                        f.phase == g.phase && f.field == field_name && f.control == control
                    });
                    match found {
                        Some(f) => {
                            f.arms.push(arm_peaks(arm, field));
                            f.marks.push(mark);
                        }
                        None => {
                            let mut arms = Vec::new();
                            if let Some(c) = control
                                .as_ref()
                                .and_then(|c| r.arms.iter().find(|a| &a.id == c))
                            {
                                arms.push(arm_peaks(c, field));
                            }
                            arms.push(arm_peaks(arm, field));
                            out.memory.push(MemoryFigure {
                                phase: g.phase,
                                field: field_name,
                                control,
                                arms,
                                marks: vec![mark],
                            });
                        }
                    }
                }
                GateSpec::Latency(_) if v.control.is_some() => {
                    let control = v.control.clone().unwrap_or_default();
                    let mark = LatencyMark {
                        arm: arm.id.clone(),
                        outcome: gate.outcome,
                        limits: gate
                            .checks
                            .iter()
                            .map(|c| (c.name.clone(), c.measured, c.threshold))
                            .collect(),
                    };
                    match out.latency.iter_mut().find(|(c, _)| *c == control) {
                        Some((_, marks)) => marks.push(mark),
                        None => out.latency.push((control, vec![mark])),
                    }
                }
                _ => out.cards.push(GateCard {
                    arm: arm.id.clone(),
                    gate,
                }),
            }
        }
    }
    let worst = |marks: &mut dyn Iterator<Item = Outcome>| marks.map(rank).min().unwrap_or(2);
    out.memory
        .sort_by_key(|f| worst(&mut f.marks.iter().map(|m| m.outcome)));
    out.latency
        .sort_by_key(|(_, m)| worst(&mut m.iter().map(|m| m.outcome)));
    out.cards.sort_by_key(|c| rank(c.gate.outcome));
    out
}

/// whisper.cpp's logged state buffers against what became resident, for an
/// arm and its control.
#[derive(Debug, Clone, PartialEq)]
pub struct StateCost {
    /// The arm id.
    pub arm: String,
    /// The control arm id.
    pub control: String,
    /// States the arm's runtime logged.
    pub arm_states: usize,
    /// States the control's runtime logged.
    pub control_states: usize,
    /// Logged kv + compute buffers of every state: arm − control.
    pub logged_delta: Option<i64>,
    /// Resident at the `state_ready` marker: arm − control.
    pub resident_delta: Option<i64>,
    /// The `state_ready` phase peak: arm − control.
    pub peak_delta: Option<i64>,
    /// Per logged buffer (`kv self`, `compute (encode)`, …): arm and control
    /// bytes, summed over states.
    pub buffers: Vec<(String, u64, u64)>,
}

fn buffers(arm: &ArmReceipt) -> Option<Vec<(String, u64)>> {
    let rt = arm.speech.as_ref()?.runtime.as_ref()?;
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut add = |name: String, bytes: u64| match out.iter_mut().find(|(n, _)| *n == name) {
        Some((_, b)) => *b = b.saturating_add(bytes),
        None => out.push((name, bytes)),
    };
    for s in &rt.topology.states {
        for (name, size) in [
            ("kv self", s.kv_self),
            ("kv cross", s.kv_cross),
            ("kv pad", s.kv_pad),
        ] {
            if let Some(size) = size {
                add(name.to_string(), size.bytes);
            }
        }
        for (graph, size) in &s.compute {
            add(format!("compute ({graph})"), size.bytes);
        }
    }
    Some(out)
}

/// One [`StateCost`] per comparison whose arms both logged their topology.
pub fn state_costs(r: &Receipt) -> Vec<StateCost> {
    r.comparisons
        .iter()
        .filter_map(|cmp| {
            let arm = r.arms.iter().find(|a| a.id == cmp.arm)?;
            let control = r.arms.iter().find(|a| a.id == cmp.control)?;
            let (ab, cb) = (buffers(arm)?, buffers(control)?);
            let mut rows: Vec<(String, u64, u64)> = cb
                .iter()
                .map(|(n, c)| {
                    let a = ab.iter().find(|(m, _)| m == n).map_or(0, |(_, b)| *b);
                    (n.clone(), a, *c)
                })
                .collect();
            for (n, a) in &ab {
                if !rows.iter().any(|(m, _, _)| m == n) {
                    rows.push((n.clone(), *a, 0));
                }
            }
            let ready = cmp
                .phase_deltas
                .iter()
                .find(|d| d.phase == Phase::StateReady);
            let states = |a: &ArmReceipt| {
                a.speech
                    .as_ref()
                    .and_then(|s| s.runtime.as_ref())
                    .map_or(0, |rt| rt.topology.states.len())
            };
            Some(StateCost {
                arm: arm.id.clone(),
                control: control.id.clone(),
                arm_states: states(arm),
                control_states: states(control),
                logged_delta: cmp.logged_state_bytes_delta,
                resident_delta: ready.map(|d| d.resident_delta_bytes),
                peak_delta: ready.and_then(|d| d.resident_peak_delta_bytes),
                buffers: rows,
            })
        })
        .collect()
}

/// A failing (or unevaluated) gate of a judged arm, in one sentence, and
/// the reason the receipt gives for it where it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// The check's outcome (fail or not evaluated).
    pub outcome: Outcome,
    /// The arm id.
    pub arm: String,
    /// The gate kind (`memory`, `latency`, …).
    pub gate: String,
    /// The check, what it measured against what limit.
    pub text: String,
    /// Why, from whisper.cpp's logged state buffers (memory gates at `state_ready` only); `None` otherwise.
    pub why: Option<String>,
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / MIB)
}

fn signed_mib(b: f64) -> String {
    format!("{:+.1} MiB", b / MIB)
}

/// The gates that keep the run from passing, each in one sentence.
pub fn headlines(r: &Receipt) -> Vec<Headline> {
    let Some(report) = &r.gates else {
        return Vec::new();
    };
    let costs = state_costs(r);
    let mut out = Vec::new();
    for v in report
        .arms
        .iter()
        .filter(|v| report.judged_arms.contains(&v.arm))
    {
        for gate in v.gates.iter().filter(|g| g.outcome != Outcome::Pass) {
            for c in gate.checks.iter().filter(|c| c.outcome != Outcome::Pass) {
                let text = match (&gate.spec, c.measured, c.threshold) {
                    (GateSpec::Memory(_), Some(m), Some(t)) => {
                        let against = match (c.control, &v.control) {
                            (Some(k), Some(id)) if k != 0.0 => format!(
                                ", {} ({:+.1} %) against control {id} ({})",
                                signed_mib(m - k),
                                (m - k) / k * 100.0,
                                mib(k)
                            ),
                            _ => String::new(),
                        };
                        let verb = if m > t { "over" } else { "under" };
                        format!(
                            "{} is {}{against}; the limit is {} — {verb} it by {}.",
                            c.name,
                            mib(m),
                            mib(t),
                            mib((m - t).abs())
                        )
                    }
                    _ => format!("{} — {}", c.name, c.note),
                };
                let why = match &gate.spec {
                    GateSpec::Memory(g) if g.phase == Phase::StateReady => {
                        costs.iter().find(|s| s.arm == v.arm).and_then(why_text)
                    }
                    _ => None,
                };
                out.push(Headline {
                    outcome: c.outcome,
                    arm: v.arm.clone(),
                    gate: gate.kind.clone(),
                    text,
                    why,
                });
            }
        }
    }
    out
}

fn why_text(s: &StateCost) -> Option<String> {
    let logged = s.logged_delta? as f64;
    let resident = s.resident_delta.map(|d| d as f64);
    Some(format!(
        "Why: whisper.cpp logged {} of state buffers (kv + compute; {} state{} against {}){}.",
        signed_mib(logged),
        s.arm_states,
        if s.arm_states == 1 { "" } else { "s" },
        s.control_states,
        resident.map_or(String::new(), |r| format!(
            "; {} of it became resident at state_ready",
            signed_mib(r)
        ))
    ))
}

/// Identity and topology keys of every arm: those that differ between
/// arms, and those every arm shares.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IdentityDiff {
    /// Arm ids, in receipt order; the order of each value list in `differing`.
    pub arms: Vec<String>,
    /// Key → each arm's value (`None`: the arm lacks the key).
    pub differing: Vec<(String, Vec<Option<String>>)>,
    /// Key → the value every arm shares.
    pub same: Vec<(String, String)>,
}

/// Keys that are measurements or per-run noise, not identity.
const NOT_IDENTITY: [&str; 8] = [
    "spec.arm_id",
    "spec.scratch_dir",
    "spec.sampler",
    "worker.pid",
    "runtime.load_ns",
    "runtime.state_ns",
    "runtime.topology.lines",
    // Summarised, one row per state (see `state_summary`).
    "runtime.topology.states",
];

/// One logged state's buffers in one line (MiB), and its Core ML outcome.
fn state_summary(s: &worker_contract::StateBuffers) -> String {
    let mut parts: Vec<String> = [
        ("kv self", s.kv_self),
        ("kv cross", s.kv_cross),
        ("kv pad", s.kv_pad),
    ]
    .iter()
    .filter_map(|(n, v)| Some(format!("{n} {:.1}", v.as_ref()?.bytes as f64 / MIB)))
    .collect();
    parts.extend(
        s.compute
            .iter()
            .map(|(g, v)| format!("compute ({g}) {:.1}", v.bytes as f64 / MIB)),
    );
    let coreml = match (&s.coreml_path, s.coreml_loaded, s.coreml_failed) {
        (None, _, _) => String::new(),
        (Some(p), true, _) => format!("; Core ML loaded from {p}"),
        (Some(p), false, true) => format!("; Core ML failed ({p})"),
        (Some(p), false, false) => format!("; Core ML tried ({p})"),
    };
    format!(
        "{} = {:.1} MiB{coreml}",
        parts.join(" + "),
        s.total_bytes() as f64 / MIB
    )
}

/// Flatten a JSON value into `path → value`, leaving out the `exclude`d
/// paths; arrays over 16 items become a count.
pub fn flatten(
    prefix: &str,
    v: &serde_json::Value,
    exclude: &[&str],
    out: &mut BTreeMap<String, String>,
) {
    if exclude
        .iter()
        .any(|k| prefix == *k || prefix.starts_with(&format!("{k}.")))
    {
        return;
    }
    // A logged size is written twice (`mb` as logged, `bytes`): keep `bytes`.
    if !exclude.is_empty() && prefix.ends_with(".mb") {
        return;
    }
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, exclude, out);
            }
        }
        serde_json::Value::Array(items) if items.len() > 16 => {
            out.insert(prefix.to_string(), format!("[{} items]", items.len()));
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, exclude, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        scalar => {
            out.insert(prefix.to_string(), scalar.to_string());
        }
    }
}

fn identity_of(a: &ArmReceipt) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let parts = [
        ("spec", serde_json::to_value(&a.spec)),
        ("worker", serde_json::to_value(&a.worker)),
        (
            "runtime",
            serde_json::to_value(a.speech.as_ref().and_then(|s| s.runtime.as_ref())),
        ),
    ];
    for (name, v) in parts {
        if let Ok(v) = v
            && !v.is_null()
        {
            flatten(name, &v, &NOT_IDENTITY, &mut out);
        }
    }
    if let Some(rt) = a.speech.as_ref().and_then(|s| s.runtime.as_ref()) {
        for (i, state) in rt.topology.states.iter().enumerate() {
            out.insert(
                format!("runtime.topology.states[{i}]"),
                state_summary(state),
            );
        }
    }
    out
}

/// The identity and topology keys of `r`'s arms (spec, hello, runtime), split into those that differ and those all arms share.
pub fn identity_diff(r: &Receipt) -> IdentityDiff {
    let per_arm: Vec<BTreeMap<String, String>> = r.arms.iter().map(identity_of).collect();
    let mut keys: Vec<&String> = per_arm.iter().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut diff = IdentityDiff {
        arms: r.arms.iter().map(|a| a.id.clone()).collect(),
        ..IdentityDiff::default()
    };
    for key in keys {
        let values: Vec<Option<String>> = per_arm.iter().map(|m| m.get(key).cloned()).collect();
        match values.first() {
            Some(Some(first)) if values.iter().all(|v| v.as_ref() == Some(first)) => {
                diff.same.push((key.clone(), first.clone()))
            }
            _ => diff.differing.push((key.clone(), values)),
        }
    }
    diff
}
