//! The ladder chart: per arm (a ladder's stage), the worker's memory and
//! its external encoder process's memory at `model_loaded`, `state_ready`
//! and the request peak, stacked, so a reader sees what moved out of the
//! worker and what the two processes hold together.
//!
//! [`LadderPanel`] is the typed extraction (pure functions over the
//! receipt); [`chart_svg`] draws it with plotters as the other charts of
//! the page do; [`figure`] adds the table of the numbers beneath;
//! [`section`] is `report.html`'s section (only when an arm had an external
//! encoder process); [`page`] puts several runs' panels side by side
//! (`memqual ladder-chart`).
//!
//! What the numbers are:
//! - worker at `model_loaded` / `state_ready`: the marker's resident bytes
//!   (in process, at the marker);
//! - worker request peak: the largest kernel resident peak over the
//!   request markers (`request_begin`, `request_end`, `reload`), the marker's
//!   resident bytes where the kernel gave no peak;
//! - encoder process at `model_loaded` / `state_ready`: its own resident
//!   bytes at the same step of its start, as it measured them
//!   (`speech.runtime.external_encoder.memory`; it starts after the worker's
//!   `model_loaded`, so no census at that marker can see it), else the
//!   census at the worker's marker (`census.external_encoder.by_phase`); for
//!   the request column the largest census at any request marker. The census
//!   reads another process at the marker; no kernel peak is kept for it.

use super::compare::MIB;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use reports::receipt::{ArmReceipt, Receipt};
use sampler::Phase;

/// The worker's colour on every ladder chart.
const WORKER: RGBColor = RGBColor(0, 90, 200);
/// The external encoder process's colour.
const ENCODER: RGBColor = RGBColor(220, 120, 0);
const HEIGHT: u32 = 360;
/// Horizontal room per arm (three bars and the gap), in pixels.
const PER_ARM: u32 = 190;

/// The three columns of each arm's group of bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LadderPhase {
    /// At the `model_loaded` marker.
    ModelLoaded,
    /// At the `state_ready` marker.
    StateReady,
    /// The largest over the measured requests.
    RequestPeak,
}

impl LadderPhase {
    /// The three columns, in the order drawn.
    pub const ALL: [LadderPhase; 3] = [
        LadderPhase::ModelLoaded,
        LadderPhase::StateReady,
        LadderPhase::RequestPeak,
    ];

    /// The column's name in tables and captions.
    pub fn name(self) -> &'static str {
        match self {
            LadderPhase::ModelLoaded => "model_loaded",
            LadderPhase::StateReady => "state_ready",
            LadderPhase::RequestPeak => "request peak",
        }
    }

    /// The short label under each bar.
    fn short(self) -> &'static str {
        match self {
            LadderPhase::ModelLoaded => "loaded",
            LadderPhase::StateReady => "state",
            LadderPhase::RequestPeak => "peak",
        }
    }
}

/// True for the markers that belong to a measured request.
fn in_request(phase: Phase) -> bool {
    phase.is_request() || phase == Phase::Reload
}

/// One column of an arm: the worker's bytes and its encoder process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseStack {
    /// Which column.
    pub phase: LadderPhase,
    /// The worker's resident bytes (see the module docs); `None` when the
    /// arm has no marker of the phase.
    pub worker_bytes: Option<u64>,
    /// The external encoder process's resident bytes at the phase's
    /// markers; `None` when the arm had no such process or no census saw it
    /// at the phase.
    pub encoder_bytes: Option<u64>,
}

/// One arm: its three columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LadderBar {
    /// The arm id, as the protocol names it.
    pub arm: String,
    /// The external encoder process's pid, when the arm had one that the
    /// census saw (`census.external_encoder`).
    pub encoder_pid: Option<u32>,
    /// `model_loaded`, `state_ready` and the request peak, in that order.
    pub phases: [PhaseStack; 3],
}

impl LadderBar {
    /// The arm's columns from its receipt.
    pub fn of(arm: &ArmReceipt) -> LadderBar {
        let encoder = arm
            .census
            .as_ref()
            .and_then(|c| c.external_encoder.as_ref());
        let encoder_at = |wanted: &dyn Fn(Phase) -> bool| {
            encoder.and_then(|e| {
                e.by_phase
                    .iter()
                    .filter(|m| wanted(m.phase))
                    .map(|m| m.bytes)
                    .max()
            })
        };
        let own = arm
            .speech
            .as_ref()
            .and_then(|s| s.runtime.as_ref())
            .and_then(|r| r.external_encoder.as_ref())
            .and_then(|e| e.memory.as_ref());
        let resident_at = |phase: Phase| arm.phase(phase, None).map(|p| p.memory.resident_bytes);
        let request_peak = arm
            .phases
            .iter()
            .filter(|p| in_request(p.phase))
            .map(|p| {
                p.memory
                    .resident_peak_bytes
                    .unwrap_or(p.memory.resident_bytes)
            })
            .max();
        let stack = |phase: LadderPhase| {
            let (worker_bytes, encoder_bytes) = match phase {
                LadderPhase::ModelLoaded => (
                    resident_at(Phase::ModelLoaded),
                    own.map(|m| m.model_loaded.resident_bytes)
                        .or_else(|| encoder_at(&|p| p == Phase::ModelLoaded)),
                ),
                LadderPhase::StateReady => (
                    resident_at(Phase::StateReady),
                    own.map(|m| m.state_ready.resident_bytes)
                        .or_else(|| encoder_at(&|p| p == Phase::StateReady)),
                ),
                LadderPhase::RequestPeak => (request_peak, encoder_at(&in_request)),
            };
            PhaseStack {
                phase,
                worker_bytes,
                encoder_bytes,
            }
        };
        LadderBar {
            arm: arm.id.clone(),
            encoder_pid: encoder.map(|e| e.pid),
            phases: LadderPhase::ALL.map(stack),
        }
    }

    /// True when the arm had an external encoder process the census saw.
    pub fn has_encoder(&self) -> bool {
        self.encoder_pid.is_some()
    }

    /// What the worker and its encoder process hold together in `phase`:
    /// the worker alone for an arm without an encoder process; `None` when
    /// a part is missing (no marker, or the process unseen at the phase).
    pub fn total_bytes(&self, phase: LadderPhase) -> Option<u64> {
        let stack = self.phases.iter().find(|s| s.phase == phase)?;
        let worker = stack.worker_bytes?;
        match (self.has_encoder(), stack.encoder_bytes) {
            (false, _) => Some(worker),
            (true, Some(encoder)) => Some(worker + encoder),
            (true, None) => None,
        }
    }
}

/// One run's chart: a title and one group of bars per arm, in run order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LadderPanel {
    /// The run's name: its protocol, and its model when the receipt says.
    pub title: String,
    /// Where it came from and its parameters, one line; empty when none.
    pub detail: String,
    /// One per arm, in run order.
    pub arms: Vec<LadderBar>,
}

impl LadderPanel {
    /// Every arm of `r`, titled `title`.
    pub fn of(title: impl Into<String>, r: &Receipt) -> LadderPanel {
        LadderPanel {
            title: title.into(),
            detail: String::new(),
            arms: r.arms.iter().map(LadderBar::of).collect(),
        }
    }

    /// A run's panel for `memqual ladder-chart`, titled by [`run_title`];
    /// `dir` is the run directory as given, shown in the detail line.
    pub fn of_run(r: &Receipt, dir: &str) -> LadderPanel {
        let params: Vec<String> = r
            .run
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut detail = dir.to_string();
        if !params.is_empty() {
            detail.push_str(" · ");
            detail.push_str(&params.join(", "));
        }
        LadderPanel {
            detail,
            ..LadderPanel::of(run_title(r, dir), r)
        }
    }

    /// True when any arm had an external encoder process.
    pub fn has_encoder(&self) -> bool {
        self.arms.iter().any(LadderBar::has_encoder)
    }
}

/// A run's title: the protocol name with its `model` parameter, or else
/// the model file of its first arm that names one; the directory name when
/// the receipt names no protocol.
pub fn run_title(r: &Receipt, dir: &str) -> String {
    let name = if r.run.protocol_name.is_empty() {
        std::path::Path::new(dir)
            .file_name()
            .map_or_else(|| dir.to_string(), |n| n.to_string_lossy().into_owned())
    } else {
        r.run.protocol_name.clone()
    };
    let model = r
        .run
        .params
        .get("model")
        .map(|m| format!("model={m}"))
        .or_else(|| r.arms.iter().find_map(model_file));
    match model {
        Some(m) => format!("{name} ({m})"),
        None => name,
    }
}

/// The file name of the model an arm's spec loads (`worker.model.path`),
/// read from the spec as JSON so that any worker kind that names one counts.
fn model_file(arm: &ArmReceipt) -> Option<String> {
    let spec = serde_json::to_value(arm.spec.as_ref()?).ok()?;
    let path = spec.pointer("/worker/model/path")?.as_str()?;
    std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// True when any arm of `r` had an external encoder process the census saw.
pub fn has_external_encoder(r: &Receipt) -> bool {
    r.arms.iter().any(|a| {
        a.census
            .as_ref()
            .is_some_and(|c| c.external_encoder.is_some())
    })
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn text_style(size: u32, colour: RGBColor, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&colour)
        .pos(Pos::new(HPos::Center, v))
}

fn mib_f(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

/// The panel's chart as an SVG string: per arm three bars (`model_loaded`,
/// `state_ready`, request peak), each the worker (blue) with its encoder
/// process (orange) stacked on top, the sum above; MiB on the y axis.
/// Every text is escaped by plotters' SVG backend.
pub fn chart_svg(panel: &LadderPanel) -> Result<String, String> {
    let n = panel.arms.len().max(1);
    let width = (140 + PER_ARM * n as u32).clamp(480, 1600);
    let y1 = panel
        .arms
        .iter()
        .flat_map(|a| {
            a.phases
                .iter()
                .map(|s| mib_f(s.worker_bytes.unwrap_or(0)) + mib_f(s.encoder_bytes.unwrap_or(0)))
        })
        .fold(1.0f64, f64::max)
        * 1.3;
    // Bars: per arm 0.8 of its unit, split in three.
    let slot = 0.8 / 3.0;
    let left = |arm: usize, column: usize| arm as f64 + 0.1 + column as f64 * slot + slot * 0.08;
    let bar_width = slot * 0.84;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n as f64, 0f64..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(0)
            .disable_x_mesh()
            .y_desc("MiB")
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        let worker_rects: Vec<Rectangle<(f64, f64)>> = panel
            .arms
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                a.phases.iter().enumerate().filter_map(move |(k, s)| {
                    let w = mib_f(s.worker_bytes?);
                    Some(Rectangle::new(
                        [(left(i, k), 0.0), (left(i, k) + bar_width, w)],
                        WORKER.filled(),
                    ))
                })
            })
            .collect();
        chart
            .draw_series(worker_rects)
            .map_err(err)?
            .label("worker")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], WORKER.filled()));
        if panel.has_encoder() {
            let encoder_rects: Vec<Rectangle<(f64, f64)>> = panel
                .arms
                .iter()
                .enumerate()
                .flat_map(|(i, a)| {
                    a.phases.iter().enumerate().filter_map(move |(k, s)| {
                        let base = mib_f(s.worker_bytes.unwrap_or(0));
                        let e = mib_f(s.encoder_bytes?);
                        Some(Rectangle::new(
                            [(left(i, k), base), (left(i, k) + bar_width, base + e)],
                            ENCODER.filled(),
                        ))
                    })
                })
                .collect();
            chart
                .draw_series(encoder_rects)
                .map_err(err)?
                .label("external encoder process")
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], ENCODER.filled()));
        }
        for (i, a) in panel.arms.iter().enumerate() {
            for (k, s) in a.phases.iter().enumerate() {
                let cx = left(i, k) + bar_width / 2.0;
                let top = mib_f(s.worker_bytes.unwrap_or(0)) + mib_f(s.encoder_bytes.unwrap_or(0));
                if let Some(total) = a.total_bytes(s.phase) {
                    let (px, py) = chart.backend_coord(&(cx, top));
                    root.draw(&Text::new(
                        format!("{:.1}", mib_f(total)),
                        (px, py - 2),
                        text_style(10, BLACK, VPos::Bottom),
                    ))
                    .map_err(err)?;
                }
                let (px, py) = chart.backend_coord(&(cx, 0.0));
                root.draw(&Text::new(
                    s.phase.short(),
                    (px, py + 4),
                    text_style(10, RGBColor(90, 90, 90), VPos::Top),
                ))
                .map_err(err)?;
            }
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                a.arm.clone(),
                (px, py + 20),
                text_style(12, BLACK, VPos::Top),
            ))
            .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Bytes as MiB with two decimals; `–` when absent.
fn mib_cell(v: Option<u64>) -> String {
    v.map_or("–".into(), |b| format!("{:.2}", mib_f(b)))
}

/// The chart with its caption and, beneath, the numbers (MiB, two
/// decimals) and each column's sum.
pub fn figure(panel: &LadderPanel) -> Markup {
    if panel.arms.is_empty() {
        return html! { p { "No arm was measured: nothing to draw." } };
    }
    let encoder = panel.has_encoder();
    html! {
        figure.ladder {
            @match chart_svg(panel) {
                Ok(svg) => (PreEscaped(svg)),
                Err(e) => p { "ladder chart not drawn: " (e) },
            }
            figcaption {
                "Per arm, three bars: resident memory at " code { "model_loaded" } ", at "
                code { "state_ready" } ", and the request peak. Blue: the worker (at the marker; "
                "for the requests its kernel resident peak)."
                @if encoder {
                    " Orange, stacked on top: the arm's external encoder process, as it measured "
                    "itself at the same step of its start (else the census at the worker's "
                    "marker; for the requests the largest census reading at a request marker, "
                    "not a kernel peak). The number above each bar is the sum; resident memory "
                    "counts the pages of the executable both processes map once in each, so the "
                    "pair gates judge footprint instead."
                } @else {
                    " No arm had an external encoder process: the worker alone."
                }
            }
            div style="overflow-x:auto" {
                table.ladder {
                    tr {
                        th { "arm" } th { "phase" } th.num { "worker MiB" }
                        @if encoder { th.num { "encoder process MiB" } th.num { "sum MiB" } }
                    }
                    @for a in &panel.arms {
                        @for (k, s) in a.phases.iter().enumerate() {
                            tr {
                                @if k == 0 {
                                    td rowspan=(a.phases.len()) {
                                        code { (a.arm) }
                                        @if let Some(pid) = a.encoder_pid { br; "encoder pid " (pid) }
                                    }
                                }
                                td { (s.phase.name()) }
                                td.num { (mib_cell(s.worker_bytes)) }
                                @if encoder {
                                    td.num { (mib_cell(s.encoder_bytes)) }
                                    td.num { b { (mib_cell(a.total_bytes(s.phase))) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `report.html`'s section "Worker and encoder process by phase": the chart
/// of every arm, or nothing when no arm had an external encoder process.
pub fn section(r: &Receipt) -> Markup {
    if !has_external_encoder(r) {
        return html! {};
    }
    let panel = LadderPanel::of(r.run.protocol_name.clone(), r);
    html! {
        section #encoder-process {
            h2 { "Worker and encoder process by phase" }
            (figure(&panel))
        }
    }
}

const PAGE_STYLE: &str = ".ladder-row { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }\n\
body { max-width: none; }\n\
.ladder-panel { flex: 1 1 0; min-width: 560px; }\n\
.ladder-panel h2 { margin-top: 4px; }\n";

/// A page with one panel per run, side by side (`memqual ladder-chart`);
/// self-contained, every value escaped.
pub fn page(panels: &[LadderPanel]) -> String {
    let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "memqual ladder: " (titles.join(" · ")) }
                style { (PreEscaped(super::STYLE)) (PreEscaped(PAGE_STYLE)) }
            }
            body {
                h1 { "Worker and encoder process by phase" }
                p.meta {
                    (panels.len()) " run" @if panels.len() != 1 { "s" }
                    ", each arm's worker and external encoder process at model_loaded, state_ready and the request peak (resident MiB)."
                }
                div.ladder-row {
                    @for p in panels {
                        div.ladder-panel {
                            h2 { (p.title) }
                            @if !p.detail.is_empty() { p.meta { (p.detail) } }
                            (figure(p))
                        }
                    }
                }
            }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::census::{CensusReceipt, EncoderProcessMemory, PhaseMemory};
    use reports::receipt::PhaseRow;
    use sampler::TaskMemory;

    const MIB_U: u64 = 1 << 20;

    /// Bytes of `mib` MiB, rounded to a byte.
    fn mib(mib: f64) -> u64 {
        (mib * MIB).round() as u64
    }

    fn row(phase: Phase, seq: u64, resident: u64, peak: Option<u64>) -> PhaseRow {
        PhaseRow::of(
            phase,
            seq,
            TaskMemory {
                resident_bytes: resident,
                resident_peak_bytes: peak,
                ..TaskMemory::default()
            },
        )
    }

    fn arm(id: &str, phases: Vec<PhaseRow>, encoder: Option<EncoderProcessMemory>) -> ArmReceipt {
        ArmReceipt {
            census: encoder.map(|e| CensusReceipt {
                threshold_bytes: 16 * MIB_U,
                censuses: 8,
                skipped: 0,
                processes_seen: 100,
                movers: vec![],
                external_encoder: Some(e),
            }),
            ..ArmReceipt::completed(id, phases, 2)
        }
    }

    /// A worker with the given MiB at model_loaded and state_ready, and two
    /// requests whose kernel peaks are `peaks` (MiB).
    fn worker_phases(loaded: f64, state: f64, peaks: [f64; 2]) -> Vec<PhaseRow> {
        vec![
            row(Phase::ProcessStart, 0, mib(5.0), Some(mib(5.0))),
            row(Phase::ModelLoaded, 1, mib(loaded), Some(mib(loaded + 2.0))),
            row(Phase::StateReady, 2, mib(state), Some(mib(state + 3.0))),
            row(Phase::WarmupDone, 3, mib(state), Some(mib(500.0))),
            row(Phase::RequestBegin, 4, mib(state), Some(mib(state))),
            row(Phase::RequestEnd, 5, mib(state), Some(mib(peaks[0]))),
            row(Phase::RequestBegin, 6, mib(state), Some(mib(state))),
            row(Phase::RequestEnd, 7, mib(state), Some(mib(peaks[1]))),
            row(Phase::TeardownDone, 8, mib(3.0), Some(mib(900.0))),
        ]
    }

    fn encoder(pid: u32, by_phase: &[(Phase, f64)]) -> EncoderProcessMemory {
        EncoderProcessMemory {
            pid,
            max_bytes: by_phase.iter().map(|(_, m)| mib(*m)).max().unwrap_or(0),
            by_phase: by_phase
                .iter()
                .map(|(phase, m)| PhaseMemory {
                    phase: *phase,
                    bytes: mib(*m),
                })
                .collect(),
        }
    }

    fn receipt(arms: Vec<ArmReceipt>) -> Receipt {
        let mut r = reports::Receipt::unmeasured();
        r.run.protocol_name = "tiny-ladder".into();
        r.run.arms = arms.iter().map(|a| a.id.clone()).collect();
        r.arms = arms;
        r
    }

    /// Stage 0 (stock, no encoder process) and stage 2 (external encoder).
    fn ladder() -> Receipt {
        receipt(vec![
            arm("stage0", worker_phases(99.6, 123.5, [230.0, 235.4]), None),
            arm(
                "stage2-external-encoder",
                worker_phases(83.4, 104.7, [126.1, 120.0]),
                Some(encoder(
                    4242,
                    &[
                        (Phase::ProcessStart, 2.0),
                        (Phase::ModelLoaded, 40.0),
                        (Phase::StateReady, 113.5),
                        (Phase::WarmupDone, 221.4),
                        (Phase::RequestBegin, 150.0),
                        (Phase::RequestEnd, 221.0),
                        (Phase::TeardownDone, 1.0),
                    ],
                )),
            ),
        ])
    }

    #[test]
    fn the_worker_and_its_encoder_process_are_read_per_phase_and_summed() {
        let panel = LadderPanel::of("tiny-ladder", &ladder());
        let stage2 = &panel.arms[1];
        assert_eq!(stage2.arm, "stage2-external-encoder");
        assert_eq!(stage2.encoder_pid, Some(4242));
        let [loaded, state, peak] = stage2.phases;
        // model_loaded: worker 83.4 MiB at the marker, encoder 40 MiB.
        assert_eq!(
            loaded,
            PhaseStack {
                phase: LadderPhase::ModelLoaded,
                worker_bytes: Some(mib(83.4)),
                encoder_bytes: Some(mib(40.0)),
            }
        );
        assert_eq!(
            stage2.total_bytes(LadderPhase::ModelLoaded),
            Some(mib(83.4) + 40 * MIB_U)
        );
        assert_eq!(
            mib_cell(stage2.total_bytes(LadderPhase::ModelLoaded)),
            "123.40"
        );
        // state_ready: the marker's resident, not its peak.
        assert_eq!(state.worker_bytes, Some(mib(104.7)));
        assert_eq!(state.encoder_bytes, Some(mib(113.5)));
        assert_eq!(
            mib_cell(stage2.total_bytes(LadderPhase::StateReady)),
            "218.20"
        );
        // The request peak: the largest kernel peak over request markers
        // (not warmup's or teardown's), and the encoder's largest reading
        // at a request marker.
        assert_eq!(peak.worker_bytes, Some(mib(126.1)));
        assert_eq!(peak.encoder_bytes, Some(mib(221.0)));
        assert_eq!(
            mib_cell(stage2.total_bytes(LadderPhase::RequestPeak)),
            "347.10"
        );
    }

    #[test]
    fn an_arm_without_an_encoder_process_is_the_worker_alone() {
        let panel = LadderPanel::of("tiny-ladder", &ladder());
        let stage0 = &panel.arms[0];
        assert!(!stage0.has_encoder());
        assert!(stage0.phases.iter().all(|s| s.encoder_bytes.is_none()));
        assert_eq!(
            stage0.phases.map(|s| s.worker_bytes),
            [Some(mib(99.6)), Some(mib(123.5)), Some(mib(235.4))]
        );
        assert_eq!(
            stage0.total_bytes(LadderPhase::StateReady),
            Some(mib(123.5))
        );
        assert!(panel.has_encoder(), "stage 2 has one");
        assert!(has_external_encoder(&ladder()));
    }

    #[test]
    fn missing_markers_and_unseen_phases_leave_gaps_not_zeros() {
        // An arm that stopped after model_loaded, with its encoder process
        // seen only at process_start; and a request marker without a kernel peak.
        let stopped = arm(
            "stopped",
            vec![
                row(Phase::ProcessStart, 0, mib(5.0), None),
                row(Phase::ModelLoaded, 1, mib(50.0), None),
            ],
            Some(encoder(7, &[(Phase::ProcessStart, 2.0)])),
        );
        let no_peak = arm(
            "no-peak",
            vec![
                row(Phase::StateReady, 0, mib(60.0), None),
                row(Phase::RequestEnd, 1, mib(70.0), None),
            ],
            None,
        );
        let panel = LadderPanel::of("x", &receipt(vec![stopped, no_peak]));
        let s = &panel.arms[0];
        assert_eq!(s.phases[0].worker_bytes, Some(mib(50.0)));
        assert_eq!(s.phases[0].encoder_bytes, None);
        assert_eq!(
            s.total_bytes(LadderPhase::ModelLoaded),
            None,
            "the encoder part is unknown"
        );
        assert_eq!(s.phases[1].worker_bytes, None);
        assert_eq!(s.phases[2].worker_bytes, None);
        let n = &panel.arms[1];
        assert_eq!(
            n.phases[2].worker_bytes,
            Some(mib(70.0)),
            "resident where no peak"
        );
        assert_eq!(n.total_bytes(LadderPhase::RequestPeak), Some(mib(70.0)));
    }

    #[test]
    fn the_chart_names_every_arm_and_escapes_them() {
        let mut r = ladder();
        r.arms[0].id = "stage<0>&".into();
        let panel = LadderPanel::of("t", &r);
        let svg = chart_svg(&panel).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("stage2-external-encoder"));
        assert!(svg.contains("stage&lt;0&gt;&amp;"), "escaped");
        assert!(!svg.contains("stage<0>"), "never raw");
        // Stacked: 6 worker bars (2 arms × 3) and 3 encoder bars, in their colours.
        assert_eq!(
            svg.matches("fill=\"#005AC8\"").count(),
            6 + 1,
            "bars + legend"
        );
        assert_eq!(
            svg.matches("fill=\"#DC7800\"").count(),
            3 + 1,
            "bars + legend"
        );
        assert!(svg.contains("123.4"), "the sum above model_loaded");
        assert!(svg.contains("MiB"));
        assert!(svg.contains("external encoder process"), "legend");
    }

    #[test]
    fn the_figure_tables_the_numbers_and_escapes_arm_ids() {
        let mut r = ladder();
        r.arms[0].id = "<script>x".into();
        let html = figure(&LadderPanel::of("t", &r)).into_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;x"));
        for cell in ["83.40", "40.00", "123.40", "218.20", "347.10", "4242"] {
            assert!(html.contains(cell), "{cell}: {html}");
        }
    }

    #[test]
    fn report_html_has_the_section_only_with_an_encoder_process() {
        let r = ladder();
        let with = section(&r).into_string();
        assert!(with.contains("Worker and encoder process by phase"));
        assert!(with.contains("<svg"));
        let mut without = r.clone();
        without.arms.truncate(1);
        assert_eq!(section(&without).into_string(), "");
        // In the page: once, after the comparison, before the arms' details.
        let page = crate::html::render(&r, &crate::html::PageData::default());
        let at = |needle: &str| page.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert_eq!(
            page.matches("Worker and encoder process by phase").count(),
            1
        );
        assert!(at("id=\"comparison\"") < at("id=\"encoder-process\""));
        assert!(at("id=\"encoder-process\"") < at("id=\"arm-stage0\""));
        let page = crate::html::render(&without, &crate::html::PageData::default());
        assert!(!page.contains("encoder-process"));
    }

    #[test]
    fn a_run_is_titled_by_protocol_and_model() {
        let mut r = ladder();
        assert_eq!(run_title(&r, "runs/a"), "tiny-ladder");
        r.run.params.insert("model".into(), "base".into());
        r.run.params.insert("models".into(), "m".into());
        assert_eq!(run_title(&r, "runs/a"), "tiny-ladder (model=base)");
        let panel = LadderPanel::of_run(&r, "runs/a");
        assert_eq!(panel.detail, "runs/a · model=base, models=m");
        r.run.protocol_name.clear();
        r.run.params.clear();
        assert_eq!(run_title(&r, "runs/2026-base"), "2026-base");
    }

    #[test]
    fn the_page_puts_panels_side_by_side() {
        let r = ladder();
        let mut base = r.clone();
        base.run.params.insert("model".into(), "base".into());
        let panels = [
            LadderPanel::of_run(&r, "runs/tiny"),
            LadderPanel::of_run(&base, "runs/<base>"),
        ];
        let html = page(&panels);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("class=\"ladder-panel\"").count(), 2);
        assert_eq!(html.matches("<svg").count(), 2);
        assert!(html.contains("tiny-ladder (model=base)"));
        assert!(html.contains("runs/&lt;base&gt;"));
        assert!(!html.contains("runs/<base>"));
    }
}
