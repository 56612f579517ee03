//! The comparison section's pictures, as plotters SVG: peak per phase with
//! the gate's threshold, every arm's memory curve on one y axis aligned by
//! phase, and the latency ECDFs overlaid on one x axis.
//!
//! Every arm keeps one colour on every picture ([`Palette`]); the
//! threshold is always red.

use super::arm_chart::{Point, envelope};
use super::compare::{LatencyMark, MIB, MemoryFigure, PHASE_GROUPS};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use reports::receipt::{ArmReceipt, Receipt};
use sampler::Phase;

/// Full-width pictures: the page scales them down to its column.
pub const WIDTH: u32 = 1280;
const GATE_HEIGHT: u32 = 300;
const CURVES_HEIGHT: u32 = 340;
const ECDF_HEIGHT: u32 = 300;
/// The gate's limit, on every picture.
pub const THRESHOLD: RGBColor = RGBColor(200, 0, 0);
const SEPARATOR: RGBColor = RGBColor(200, 200, 200);
const CONTROLS: [RGBColor; 3] = [
    RGBColor(100, 100, 100),
    RGBColor(60, 60, 60),
    RGBColor(150, 150, 150),
];
const CANDIDATES: [RGBColor; 6] = [
    RGBColor(0, 90, 200),
    RGBColor(220, 120, 0),
    RGBColor(0, 150, 80),
    RGBColor(150, 40, 170),
    RGBColor(0, 160, 180),
    RGBColor(170, 110, 40),
];

/// One colour per arm for the whole page: controls in greys, the other
/// arms in distinct hues, in run order.
#[derive(Debug, Clone)]
pub struct Palette(Vec<(String, RGBColor)>);

impl Palette {
    /// Colours for every arm of `r`: controls in greys, the others in distinct hues, in run order.
    pub fn new(r: &Receipt) -> Palette {
        let (mut c, mut k) = (0, 0);
        Palette(
            r.arms
                .iter()
                .map(|a| {
                    let colour = if r.run.controls.values().any(|id| id == &a.id) {
                        c += 1;
                        CONTROLS[(c - 1) % CONTROLS.len()]
                    } else {
                        k += 1;
                        CANDIDATES[(k - 1) % CANDIDATES.len()]
                    };
                    (a.id.clone(), colour)
                })
                .collect(),
        )
    }

    /// The colour of `arm`; black for an arm the palette does not know.
    pub fn colour(&self, arm: &str) -> RGBColor {
        self.0
            .iter()
            .find(|(id, _)| id == arm)
            .map_or(BLACK, |(_, c)| *c)
    }

    /// `#rrggbb`, for the page's swatches.
    pub fn hex(&self, arm: &str) -> String {
        let RGBColor(r, g, b) = self.colour(arm);
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The legend in the upper left, then the figure written out.
fn finish<'a, CT: plotters::coord::CoordTranslate>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn label_style(size: u32, colour: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&colour)
        .pos(Pos::new(h, v))
}

/// Peak per phase for the control and each gated arm, the gated phase
/// shaded, the limit drawn across it, and each arm's Δ above its bar.
pub fn peak_by_phase(fig: &MemoryFigure, palette: &Palette) -> Result<String, String> {
    let groups = PHASE_GROUPS.len();
    let gated = fig.group();
    let y1 = fig
        .arms
        .iter()
        .flat_map(|a| a.per_group.iter().flatten())
        .copied()
        .chain(fig.marks.iter().filter_map(|m| m.threshold))
        .fold(MIB, f64::max)
        / MIB
        * 1.22;
    let n = fig.arms.len().max(1) as f64;
    let width = 0.8 / n;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, GATE_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(26)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..groups as f64, 0f64..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(0)
            .disable_x_mesh()
            .y_desc(format!("{} MiB", fig.field))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        let g = gated as f64;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(g, 0.0), (g + 1.0, y1)],
                RGBColor(255, 236, 236).filled(),
            )))
            .map_err(err)?;
        for (k, arm) in fig.arms.iter().enumerate() {
            let colour = palette.colour(&arm.arm);
            let x = |group: usize| group as f64 + 0.1 + k as f64 * width;
            chart
                .draw_series(arm.per_group.iter().enumerate().filter_map(|(i, v)| {
                    let v = (*v)? / MIB;
                    Some(Rectangle::new(
                        [(x(i), 0.0), (x(i) + width * 0.92, v)],
                        colour.filled(),
                    ))
                }))
                .map_err(err)?
                .label(arm.arm.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        for mark in &fig.marks {
            let Some(t) = mark.threshold else { continue };
            let t = t / MIB;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(g + 0.02, t), (g + 0.98, t)],
                    THRESHOLD.stroke_width(3),
                )))
                .map_err(err)?;
            let who = if fig.marks.len() > 1 {
                format!(" ({})", mark.arm)
            } else {
                String::new()
            };
            let (px, py) = chart.backend_coord(&(g + 0.98, t));
            root.draw(&Text::new(
                format!("limit {t:.1} MiB{who}"),
                (px + 4, py),
                label_style(12, THRESHOLD, HPos::Left, VPos::Center),
            ))
            .map_err(err)?;
        }
        // Δ and Δ% above each gated arm's bar in the gated phase.
        for mark in &fig.marks {
            let Some(k) = fig.arms.iter().position(|a| a.arm == mark.arm) else {
                continue;
            };
            let d = mark.delta();
            let (Some(v), Some(delta)) = (mark.measured, d.delta) else {
                continue;
            };
            let cx = g + 0.1 + (k as f64 + 0.46) * width;
            let (px, py) = chart.backend_coord(&(cx, v / MIB));
            let colour = palette.colour(&mark.arm);
            let lines = [
                format!("{:+.1} MiB", delta / MIB),
                d.pct.map_or(String::new(), |p| format!("{p:+.1} %")),
            ];
            for (i, line) in lines.iter().enumerate() {
                root.draw(&Text::new(
                    line.clone(),
                    (px, py - 4 - (1 - i as i32) * 14),
                    label_style(12, colour, HPos::Center, VPos::Bottom),
                ))
                .map_err(err)?;
            }
        }
        for (i, (name, _)) in PHASE_GROUPS.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            let colour = if i == gated { THRESHOLD } else { BLACK };
            root.draw(&Text::new(
                *name,
                (px, py + 6),
                label_style(13, colour, HPos::Center, VPos::Top),
            ))
            .map_err(err)?;
        }
        finish(&root, &mut chart)?;
    }
    Ok(svg)
}

/// The slots of the phase-aligned time axis, each named by the marker that
/// closes it, with its share of the width: every phase gets the same room
/// whatever it lasted, the requests three times that.
pub const SLOTS: [(&str, f64); 8] = [
    ("process_start", 0.6),
    ("model_loaded", 1.0),
    ("state_ready", 1.0),
    ("warmup_done", 1.0),
    ("requests", 3.0),
    ("idle_end", 1.0),
    ("teardown_done", 1.0),
    ("exit", 0.6),
];

/// The slot boundaries of one arm, in seconds since its first series row:
/// series start, each closing marker, series end. A missing marker (an arm
/// that stopped early) repeats the boundary before it.
pub fn boundaries(arm: &ArmReceipt, t0_ns: u64, points: &[Point]) -> [f64; 9] {
    let t = |ns: u64| (ns as f64 - t0_ns as f64) / 1e9;
    let first = |phase: Phase| {
        arm.phases
            .iter()
            .find(|p| p.phase == phase)
            .map(|p| t(p.t_ns))
    };
    let last_request = arm
        .phases
        .iter()
        .rev()
        .find(|p| p.phase == Phase::RequestEnd)
        .map(|p| t(p.t_ns));
    let start = points
        .first()
        .map_or(0.0, |p| p.t_s)
        .min(arm.phases.first().map_or(0.0, |p| t(p.t_ns)));
    let end = points
        .last()
        .map_or(0.0, |p| p.t_s)
        .max(arm.phases.last().map_or(0.0, |p| t(p.t_ns)));
    let raw = [
        Some(start),
        first(Phase::ProcessStart),
        first(Phase::ModelLoaded),
        first(Phase::StateReady),
        first(Phase::WarmupDone),
        last_request.or(first(Phase::WarmupDone)),
        first(Phase::IdleEnd),
        first(Phase::TeardownDone),
        Some(end),
    ];
    let mut b = [start; 9];
    for i in 1..9 {
        b[i] = raw[i].unwrap_or(b[i - 1]).max(b[i - 1]);
    }
    b
}

/// Where each slot starts on the aligned axis (and the axis' end).
fn slot_starts() -> [f64; 9] {
    let mut s = [0.0; 9];
    for i in 0..8 {
        s[i + 1] = s[i] + SLOTS[i].1;
    }
    s
}

/// `t` (seconds since the arm's first row) on the aligned axis.
pub fn align(b: &[f64; 9], t: f64) -> f64 {
    let s = slot_starts();
    for i in 0..8 {
        if t <= b[i + 1] || i == 7 {
            let span = b[i + 1] - b[i];
            let within = if span > 0.0 {
                ((t - b[i]) / span).clamp(0.0, 1.0)
            } else {
                1.0
            };
            return s[i] + within * SLOTS[i].1;
        }
    }
    s[8]
}

/// One arm's data for the aligned curves.
pub struct ArmCurve<'a> {
    /// The arm's receipt (markers and phase peaks).
    pub arm: &'a ArmReceipt,
    /// Monotonic time (ns) of the arm's first series row: time zero on its curve.
    pub t0_ns: u64,
    /// The arm's external series.
    pub points: &'a [Point],
}

/// Every arm's resident series on one y axis, time aligned by phase, with
/// the in-process value at each marker and the kernel peak of each phase.
pub fn aligned_memory(curves: &[ArmCurve], palette: &Palette) -> Result<String, String> {
    let starts = slot_starts();
    let x1 = starts[8];
    let y1 = curves
        .iter()
        .flat_map(|c| {
            c.points
                .iter()
                .filter_map(|p| p.resident_mib)
                .chain(c.arm.phases.iter().filter_map(|p| {
                    p.memory
                        .footprint_peak_bytes
                        .or(p.memory.resident_peak_bytes)
                        .map(|b| b as f64 / MIB)
                }))
        })
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CURVES_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(26)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..x1, 0f64..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(0)
            .disable_x_mesh()
            .y_desc("resident MiB")
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                starts[1..8]
                    .iter()
                    .map(|&x| PathElement::new(vec![(x, 0.0), (x, y1)], SEPARATOR.stroke_width(1))),
            )
            .map_err(err)?;
        for c in curves {
            let colour = palette.colour(&c.arm.id);
            let b = boundaries(c.arm, c.t0_ns, c.points);
            let line: Vec<(f64, f64)> = c
                .points
                .iter()
                .filter_map(|p| Some((align(&b, p.t_s), p.resident_mib?)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    envelope(&line, WIDTH as usize),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(c.arm.id.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            let t = |ns: u64| (ns as f64 - c.t0_ns as f64) / 1e9;
            chart
                .draw_series(c.arm.phases.iter().map(|p| {
                    Circle::new(
                        (align(&b, t(p.t_ns)), p.memory.resident_bytes as f64 / MIB),
                        3,
                        colour.filled(),
                    )
                }))
                .map_err(err)?;
            // The kernel peak of each slot: one short bar per slot.
            let peaks = (0..8).filter_map(|slot| {
                let phases: &[Phase] = match slot {
                    0 => &[Phase::ProcessStart],
                    1 => &[Phase::ModelLoaded],
                    2 => &[Phase::StateReady],
                    3 => &[Phase::WarmupDone],
                    4 => &[Phase::RequestBegin, Phase::RequestEnd],
                    5 => &[Phase::IdleEnd],
                    6 => &[Phase::TeardownDone],
                    _ => &[],
                };
                let peak = c
                    .arm
                    .phases
                    .iter()
                    .filter(|p| phases.contains(&p.phase))
                    .filter_map(|p| {
                        p.memory
                            .footprint_peak_bytes
                            .or(p.memory.resident_peak_bytes)
                    })
                    .max()?;
                let y = peak as f64 / MIB;
                let pad = SLOTS[slot].1 * 0.08;
                Some(PathElement::new(
                    vec![(starts[slot] + pad, y), (starts[slot + 1] - pad, y)],
                    colour.mix(0.55).stroke_width(4),
                ))
            });
            chart.draw_series(peaks).map_err(err)?;
        }
        for (i, (name, _)) in SLOTS.iter().enumerate() {
            let (px, py) = chart.backend_coord(&((starts[i] + starts[i + 1]) / 2.0, 0.0));
            root.draw(&Text::new(
                *name,
                (px, py + 6),
                label_style(13, BLACK, HPos::Center, VPos::Top),
            ))
            .map_err(err)?;
        }
        finish(&root, &mut chart)?;
    }
    Ok(svg)
}

/// At most this many steps per ECDF: larger samples are drawn at evenly
/// spaced quantiles (the extremes kept).
pub const MAX_STEPS: usize = 1000;

/// One arm's latencies for the ECDF.
pub struct ArmLatency<'a> {
    /// The arm id.
    pub arm: &'a str,
    /// Measured requests in order: the first is drawn apart.
    pub latencies_ns: &'a [u64],
    /// Context load time in ns, when the runtime reported it.
    pub cold_load_ns: Option<u64>,
}

/// `(x, F(x))` corners of the empirical CDF of `values` (ms), thinned.
pub fn ecdf_steps(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let ranks: Vec<usize> = if n <= MAX_STEPS {
        (0..n).collect()
    } else {
        (0..MAX_STEPS)
            .map(|i| i * (n - 1) / (MAX_STEPS - 1))
            .collect()
    };
    let mut out = Vec::with_capacity(2 * ranks.len());
    let mut before = 0.0;
    for i in ranks {
        let f = (i + 1) as f64 / n as f64;
        out.push((v[i], before));
        out.push((v[i], f));
        before = f;
    }
    out
}

const FIRST_ROW: f64 = -0.12;
const COLD_ROW: f64 = -0.26;

/// Steady latencies as ECDFs on one x axis; below them, apart, each arm's
/// first request (×) and cold load (▲); a latency gate's limits as red
/// vertical lines.
pub fn latency_ecdf(
    arms: &[ArmLatency],
    limits: &[LatencyMark],
    palette: &Palette,
) -> Result<Option<String>, String> {
    let ms = |ns: u64| ns as f64 / 1e6;
    let steady: Vec<Vec<f64>> = arms
        .iter()
        .map(|a| a.latencies_ns.iter().skip(1).map(|&v| ms(v)).collect())
        .collect();
    if steady.iter().all(|s| s.is_empty()) {
        return Ok(None);
    }
    let xs = steady
        .iter()
        .flatten()
        .copied()
        .chain(
            arms.iter()
                .filter_map(|a| a.latencies_ns.first().map(|&v| ms(v))),
        )
        .chain(arms.iter().filter_map(|a| a.cold_load_ns.map(ms)))
        .chain(
            limits
                .iter()
                .flat_map(|l| l.limits.iter().filter_map(|(_, _, t)| t.map(|t| t / 1e6))),
        );
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let pad = ((hi - lo) * 0.04).max(hi.abs() * 0.01).max(1e-3);
    let (x0, x1) = ((lo - pad).max(0.0), hi + pad);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, ECDF_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, -0.34f64..1.04)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("ms")
            .y_desc("fraction of steady requests ≤ x")
            .y_label_formatter(&|y| {
                if *y < -1e-9 {
                    String::new()
                } else {
                    format!("{y:.1}")
                }
            })
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x0, -0.04), (x1, -0.04)],
                SEPARATOR.stroke_width(1),
            )))
            .map_err(err)?;
        // Row names in the y label area, so no marker ever hides under one.
        for (label, y) in [("first ×", FIRST_ROW), ("cold ▲", COLD_ROW)] {
            let (px, py) = chart.backend_coord(&(x0, y));
            root.draw(&Text::new(
                label,
                (px - 6, py),
                label_style(12, BLACK, HPos::Right, VPos::Center),
            ))
            .map_err(err)?;
        }
        for (a, values) in arms.iter().zip(&steady) {
            let colour = palette.colour(a.arm);
            chart
                .draw_series(LineSeries::new(ecdf_steps(values), colour.stroke_width(2)))
                .map_err(err)?
                .label(format!("{} ({} steady)", a.arm, values.len()))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            if let Some(&first) = a.latencies_ns.first() {
                chart
                    .draw_series(std::iter::once(Cross::new(
                        (ms(first), FIRST_ROW),
                        6,
                        colour.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            if let Some(cold) = a.cold_load_ns {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(
                        (ms(cold), COLD_ROW),
                        6,
                        colour.filled(),
                    )))
                    .map_err(err)?;
            }
        }
        let mut k = 0;
        for mark in limits {
            for (name, _, t) in &mark.limits {
                let Some(t) = t.map(|t| t / 1e6) else {
                    continue;
                };
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(t, 0.0), (t, 1.0)],
                        THRESHOLD.stroke_width(2),
                    )))
                    .map_err(err)?;
                // Staggered: limits often lie close together.
                let (px, py) = chart.backend_coord(&(t, 1.0));
                k += 1;
                root.draw(&Text::new(
                    format!(
                        "{} limit ({})",
                        name.trim_start_matches("steady "),
                        mark.arm
                    ),
                    (px - 4, py + 2 + 14 * (k - 1)),
                    label_style(11, THRESHOLD, HPos::Right, VPos::Top),
                ))
                .map_err(err)?;
            }
        }
        finish(&root, &mut chart)?;
    }
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ecdf_rises_by_one_step_per_value_and_ends_at_one() {
        let steps = ecdf_steps(&[30.0, 10.0, 20.0, 40.0]);
        assert_eq!(
            steps,
            [
                (10.0, 0.0),
                (10.0, 0.25),
                (20.0, 0.25),
                (20.0, 0.5),
                (30.0, 0.5),
                (30.0, 0.75),
                (40.0, 0.75),
                (40.0, 1.0)
            ]
        );
        let many: Vec<f64> = (0..10_000).map(f64::from).collect();
        let steps = ecdf_steps(&many);
        assert_eq!(steps.len(), 2 * MAX_STEPS);
        assert_eq!(steps.first(), Some(&(0.0, 0.0)));
        assert_eq!(steps.last(), Some(&(9999.0, 1.0)));
    }

    #[test]
    fn a_42_ms_phase_gets_the_same_room_as_a_40_s_one() {
        // Boundaries: start, process_start, model_loaded, state_ready (42 ms
        // after), warmup_done, last request_end (40 s later), idle, teardown, end.
        let b = [0.0, 0.1, 1.0, 1.042, 2.0, 42.0, 43.0, 43.5, 44.0];
        let s = slot_starts();
        assert_eq!(align(&b, 1.0), s[2], "model_loaded closes its slot");
        assert!(
            (align(&b, 1.021) - (s[2] + 0.5)).abs() < 1e-9,
            "mid state_ready"
        );
        assert_eq!(align(&b, 1.042), s[3]);
        assert!(
            (align(&b, 22.0) - (s[4] + 1.5)).abs() < 1e-9,
            "mid requests"
        );
        assert_eq!(align(&b, 44.0), s[8]);
        assert_eq!(align(&b, 99.0), s[8], "past the end stays at the end");
    }
}
