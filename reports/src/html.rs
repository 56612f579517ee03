//! `report.html`: one self-contained page a reviewer decides from, readable
//! offline (inline CSS and SVG, no script, no external asset). The verdict
//! table comes first; then per arm a memory-over-time chart (plotters SVG)
//! with phase bands, the external series and the in-process markers on one
//! axis and each phase's kernel peak; peaks by phase against the control;
//! latency with its distribution (see [`crate::latency_chart`]) and the
//! sampler-overhead twin runs; the first differing token against the control; WER by category;
//! identity and topology tables. A soak arm adds its growth table and, with
//! `soak-history.json`, the charts of slope and peak over past soaks.
//!
//! Long series are drawn from a min/max envelope per pixel bucket
//! ([`envelope`]), which keeps every bucket's extremes and so every local
//! peak; the receipt and `series.csv` keep the raw data.

use crate::ReportError;
use crate::gates::Outcome;
use crate::receipt::{ArmReceipt, Receipt};
use crate::soak_history::SoakHistory;
use crate::stability::Stability;
use plotters::prelude::*;
use run_dir::{Rel, RunDir};
use sampler::Phase;
use std::collections::BTreeMap;
use std::fmt::Write;

pub use run_dir::names::REPORT_HTML as FILE;

/// Chart width in pixels; also the number of envelope buckets.
const WIDTH: u32 = 960;
const HEIGHT: u32 = 320;
const MIB: f64 = 1048576.0;

/// One external sample: seconds since the arm's first row, resident and
/// footprint in MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t_s: f64,
    pub resident_mib: Option<f64>,
    pub footprint_mib: Option<f64>,
}

/// Reduce `points` (sorted by x) to at most two per bucket of equal x
/// width: the bucket's minimum and maximum, in time order. Every point that
/// is its bucket's maximum survives, so no local peak is lost to drawing.
pub fn envelope(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if points.len() <= 2 * buckets || buckets == 0 {
        return points.to_vec();
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let width = ((x1 - x0) / buckets as f64).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut start = 0;
    while start < points.len() {
        let bucket = (((points[start].0 - x0) / width) as usize).min(buckets - 1);
        let mut end = start;
        while end < points.len()
            && (((points[end].0 - x0) / width) as usize).min(buckets - 1) == bucket
        {
            end += 1;
        }
        let slice = &points[start..end];
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in slice.iter().enumerate() {
            if p.1 < slice[lo].1 {
                lo = i;
            }
            if p.1 > slice[hi].1 {
                hi = i;
            }
        }
        out.push(slice[lo.min(hi)]);
        if lo != hi {
            out.push(slice[lo.max(hi)]);
        }
        start = end;
    }
    out
}

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn outcome_cell(o: Outcome) -> String {
    let class = match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::NotEvaluated => "ne",
    };
    format!("<td class=\"{class}\">{}</td>", o.as_str())
}

fn mib(v: Option<u64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1}", b as f64 / MIB))
}

/// Read an arm's series for drawing, with the time of its first row.
pub fn read_series(run: &RunDir, arm: &str) -> Result<(Option<u64>, Vec<Point>), ReportError> {
    let rows = crate::render::series_rows(run, arm)?;
    let t0 = rows.first().map(|r| r.t_ns);
    let points = rows
        .iter()
        .map(|row| Point {
            t_s: row.t_ns.saturating_sub(t0.unwrap_or(0)) as f64 / 1e9,
            resident_mib: row.resident_bytes.map(|b| b as f64 / MIB),
            footprint_mib: row.footprint_bytes.map(|b| b as f64 / MIB),
        })
        .collect();
    Ok((t0, points))
}

/// An arm's measured request latencies, in order (`results.jsonl`).
pub fn read_latencies(run: &RunDir, arm: &str) -> Result<Vec<u64>, ReportError> {
    let mut out = Vec::new();
    run.for_each_jsonl(
        &run.arm(arm)?.join(crate::record::files::RESULTS),
        |_, r: worker_contract::RequestResult| {
            out.push(r.latency_ns);
            Ok(())
        },
    )?;
    Ok(out)
}

/// The memory chart of one arm as an SVG string. `t0_ns` is the time of
/// the first series row (markers are placed relative to it).
pub fn memory_chart(arm: &ArmReceipt, series: &[Point], t0_ns: u64) -> Result<String, String> {
    let resident: Vec<(f64, f64)> = series
        .iter()
        .filter_map(|p| Some((p.t_s, p.resident_mib?)))
        .collect();
    let footprint: Vec<(f64, f64)> = series
        .iter()
        .filter_map(|p| Some((p.t_s, p.footprint_mib?)))
        .collect();
    let marker_t = |t: u64| (t as f64 - t0_ns as f64) / 1e9;
    let markers: Vec<(f64, f64)> = arm
        .phases
        .iter()
        .map(|p| (marker_t(p.t_ns), p.memory.resident_bytes as f64 / MIB))
        .collect();
    let peaks: Vec<(f64, f64, f64)> = arm
        .phases
        .iter()
        .filter_map(|p| {
            let peak = p
                .memory
                .footprint_peak_bytes
                .or(p.memory.resident_peak_bytes)?;
            let start = p.window_start_ns.unwrap_or(t0_ns);
            Some((marker_t(start), marker_t(p.t_ns), peak as f64 / MIB))
        })
        .collect();
    let all_x = resident
        .iter()
        .chain(&footprint)
        .chain(&markers)
        .map(|p| p.0);
    let (mut x0, mut x1) = (0f64, 1e-3f64);
    for x in all_x {
        x0 = x0.min(x);
        x1 = x1.max(x);
    }
    let y1 = resident
        .iter()
        .chain(&footprint)
        .chain(&markers)
        .map(|p| p.1)
        .chain(peaks.iter().map(|p| p.2))
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(x0..x1, 0f64..y1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("s")
            .y_desc("MiB")
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        // Phase bands: alternating shades between consecutive markers.
        for (i, w) in arm.phases.windows(2).enumerate() {
            if w[1].phase.is_request() && w[1].phase == Phase::RequestBegin {
                continue;
            }
            let shade = if i % 2 == 0 {
                RGBColor(235, 242, 250)
            } else {
                RGBColor(248, 244, 232)
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(marker_t(w[0].t_ns), 0.0), (marker_t(w[1].t_ns), y1)],
                    shade.filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        let env = |pts: &[(f64, f64)]| envelope(pts, WIDTH as usize);
        chart
            .draw_series(LineSeries::new(env(&resident), BLUE.stroke_width(1)))
            .map_err(|e| e.to_string())?
            .label("resident (external series)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
        if !footprint.is_empty() {
            chart
                .draw_series(LineSeries::new(env(&footprint), GREEN.stroke_width(1)))
                .map_err(|e| e.to_string())?
                .label("footprint (external series)")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], GREEN));
        }
        chart
            .draw_series(
                markers
                    .iter()
                    .map(|p| Circle::new(*p, 3, RGBColor(200, 60, 0).filled())),
            )
            .map_err(|e| e.to_string())?
            .label("resident at markers (in process)")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, RGBColor(200, 60, 0).filled()));
        chart
            .draw_series(
                peaks
                    .iter()
                    .map(|(a, b, y)| PathElement::new([(*a, *y), (*b, *y)], RED.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?
            .label("kernel peak of the phase")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn verdict_table(out: &mut String, r: &Receipt) {
    let Some(g) = &r.gates else {
        out.push_str("<p>No arm declares gates: no verdict.</p>\n");
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"verdict {}\">Run verdict: {} (over {})</p>",
        match g.verdict {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::NotEvaluated => "ne",
        },
        g.verdict.as_str(),
        esc(&g.judged_arms.join(", "))
    );
    let mut kinds: Vec<&str> = Vec::new();
    for a in &g.arms {
        for gate in &a.gates {
            if !kinds.contains(&gate.kind.as_str()) {
                kinds.push(&gate.kind);
            }
        }
    }
    out.push_str("<table><tr><th>arm</th><th>promote</th>");
    for k in &kinds {
        let _ = write!(out, "<th>{}</th>", esc(k));
    }
    out.push_str("<th>arm verdict</th></tr>\n");
    for a in &g.arms {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td>",
            esc(&a.arm),
            if a.promote { "yes" } else { "" }
        );
        for k in &kinds {
            match a.gates.iter().find(|gate| gate.kind == *k) {
                Some(gate) => out.push_str(&outcome_cell(gate.outcome)),
                None => out.push_str("<td></td>"),
            }
        }
        out.push_str(&outcome_cell(a.verdict));
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n<table><tr><th>arm</th><th>gate</th><th>check</th><th>outcome</th><th>measured</th><th>threshold</th><th>control</th><th>evidence</th><th>note</th></tr>\n");
    for a in &g.arms {
        for gate in &a.gates {
            for c in &gate.checks {
                let num = |v: Option<f64>| match (v, c.unit.as_str()) {
                    (None, _) => "–".to_string(),
                    (Some(v), "bytes") => format!("{:.2} MiB", v / MIB),
                    (Some(v), "ns") => format!("{:.1} ms", v / 1e6),
                    (Some(v), _) => format!("{v}"),
                };
                let evidence: Vec<String> = c
                    .evidence
                    .iter()
                    .map(|e| format!("{}#{}", e.file, e.pointer))
                    .collect();
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                    esc(&a.arm),
                    esc(&gate.kind),
                    esc(&c.name),
                    outcome_cell(c.outcome),
                    num(c.measured),
                    num(c.threshold),
                    num(c.control),
                    esc(&evidence.join(" ")),
                    esc(&c.note)
                );
            }
        }
    }
    out.push_str("</table>\n");
}

fn peak_of(arm: &ArmReceipt, phase: Phase) -> Option<u64> {
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

fn peaks_against_control(out: &mut String, r: &Receipt, arm: &ArmReceipt) {
    let control = r
        .run
        .controls
        .get(&arm.id)
        .and_then(|c| r.arms.iter().find(|a| &a.id == c));
    let _ = write!(
        out,
        "<table><tr><th>phase</th><th>peak MiB</th><th>control{} MiB</th><th>Δ MiB</th></tr>",
        control.map_or(String::new(), |c| format!(" ({})", esc(&c.id)))
    );
    for phase in Phase::ALL {
        let a = peak_of(arm, phase);
        let c = control.and_then(|c| peak_of(c, phase));
        let d = match (a, c) {
            (Some(a), Some(c)) => format!("{:+.1}", (a as f64 - c as f64) / MIB),
            _ => "–".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{phase}</td><td>{}</td><td>{}</td><td>{d}</td></tr>",
            mib(a),
            mib(c)
        );
    }
    out.push_str("</table>\n");
}

fn latency_table(out: &mut String, arm: &ArmReceipt) {
    let Some(s) = &arm.speech else {
        if let Some(l) = &arm.latency {
            let _ = writeln!(
                out,
                "<p>Latency over {} requests: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms.</p>",
                l.count,
                l.p50_ns / 1e6,
                l.p95_ns / 1e6,
                l.max_ns as f64 / 1e6
            );
        }
        return;
    };
    let l = &s.latency;
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1}", v / 1e6));
    let _ = writeln!(
        out,
        "<table><tr><th>cold load</th><th>first request</th><th>steady n</th><th>p50</th><th>p95</th><th>max</th><th>RTF</th></tr>\
         <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        ms(l.cold_load_ns.map(|v| v as f64)),
        ms(l.first_request_ns.map(|v| v as f64)),
        l.steady_count,
        ms(l.steady_p50_ns),
        ms(l.steady_p95_ns),
        ms(l.steady_max_ns.map(|v| v as f64)),
        l.steady_rtf.map_or("–".into(), |v| format!("{v:.3}"))
    );
    // Every request, sorted: the distribution in full.
    let mut all: Vec<f64> = s
        .transcripts
        .iter()
        .map(|t| t.latency_ns as f64 / 1e6)
        .collect();
    all.sort_by(f64::total_cmp);
    let shown: Vec<String> = all.iter().map(|v| format!("{v:.1}")).collect();
    let _ = writeln!(
        out,
        "<p>All request latencies, ms (sorted): {}</p>",
        shown.join(", ")
    );
}

fn transcript_diff(out: &mut String, r: &Receipt, arm: &ArmReceipt) {
    let Some(control) = r
        .run
        .controls
        .get(&arm.id)
        .and_then(|c| r.arms.iter().find(|a| &a.id == c))
    else {
        return;
    };
    let (Some(a), Some(c)) = (&arm.speech, &control.speech) else {
        return;
    };
    let first = |rows: &[crate::speech::TranscriptRow]| {
        let mut by: BTreeMap<String, crate::speech::TranscriptRow> = BTreeMap::new();
        for t in rows {
            let keep = by
                .get(&t.result.fixture_id)
                .is_none_or(|k| t.result.repetition < k.result.repetition);
            if keep {
                by.insert(t.result.fixture_id.clone(), t.clone());
            }
        }
        by
    };
    let (ar, cr) = (first(&a.transcripts), first(&c.transcripts));
    let mut differing = 0;
    for (id, t) in &ar {
        let Some(ct) = cr.get(id) else { continue };
        let at = t
            .result
            .tokens
            .iter()
            .zip(&ct.result.tokens)
            .position(|(x, y)| x != y)
            .or((t.result.tokens.len() != ct.result.tokens.len())
                .then(|| t.result.tokens.len().min(ct.result.tokens.len())));
        let Some(at) = at else {
            if t.result.text != ct.result.text
                || t.result.eot != ct.result.eot
                || t.result.stop_reason != ct.result.stop_reason
            {
                differing += 1;
                let _ = writeln!(
                    out,
                    "<p>{}: same tokens, different text or end: <code>{}</code> vs <code>{}</code></p>",
                    esc(id),
                    esc(&t.result.text),
                    esc(&ct.result.text)
                );
            }
            continue;
        };
        differing += 1;
        let render = |tokens: &[i32]| {
            tokens
                .iter()
                .enumerate()
                .map(|(i, tok)| {
                    if i == at {
                        format!("<mark>{tok}</mark>")
                    } else {
                        tok.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            out,
            "<p>{}: first differing token at position {at}</p><p class=\"tok\">arm: {}<br>control: {}</p>\
             <p>arm text: {}<br>control text: {}</p>",
            esc(id),
            render(&t.result.tokens),
            render(&ct.result.tokens),
            esc(&t.result.text),
            esc(&ct.result.text)
        );
    }
    if differing == 0 {
        let _ = writeln!(
            out,
            "<p>Transcripts: every fixture's tokens, end and text equal the control's ({}).</p>",
            esc(&control.id)
        );
    }
}

fn wer_table(out: &mut String, arm: &ArmReceipt) {
    let Some(w) = arm.speech.as_ref().and_then(|s| s.quality.wer.as_ref()) else {
        return;
    };
    out.push_str(
        "<table><tr><th>category</th><th>slices</th><th>reference words</th><th>WER</th></tr>",
    );
    for c in &w.categories {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.category),
            c.slices,
            c.counts.reference_words,
            c.wer.map_or("–".into(), |v| format!("{:.1} %", v * 100.0))
        );
    }
    out.push_str("</table>\n");
}

/// Flatten a JSON value into `path = value` rows.
fn kv_rows(out: &mut String, prefix: &str, v: &serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                kv_rows(
                    out,
                    &format!("{prefix}{}{k}", if prefix.is_empty() { "" } else { "." }),
                    v,
                );
            }
        }
        serde_json::Value::Array(items) if items.len() > 16 => {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>[{} items]</td></tr>",
                esc(prefix),
                items.len()
            );
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                kv_rows(out, &format!("{prefix}[{i}]"), v);
            }
        }
        scalar => {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(prefix),
                esc(&scalar.to_string())
            );
        }
    }
}

fn identity_tables(out: &mut String, r: &Receipt) {
    out.push_str("<h2>Identity</h2><table><tr><th>field</th><th>value</th></tr>");
    if let Ok(v) = serde_json::to_value(&r.identity) {
        kv_rows(out, "", &v);
    }
    if let Ok(v) = serde_json::to_value(&r.run) {
        kv_rows(out, "run", &v);
    }
    out.push_str("</table>\n");
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 6px;font-size:13px;text-align:left}\
td.pass{background:#d6f5d6}td.fail{background:#f8d0d0}td.ne{background:#f3ecc8}\
p.verdict{font-size:20px;font-weight:bold}p.verdict.pass{color:#176b17}p.verdict.fail{color:#a01010}p.verdict.ne{color:#8a6d00}\
p.tok{font-family:monospace;font-size:12px}mark{background:#ffb347}code{font-size:12px}";

/// The latency distribution of an arm, in a figure the tests can find.
fn latency_figure(out: &mut String, arm: &ArmReceipt, latencies_ns: &[u64]) {
    match crate::latency_chart::chart(latencies_ns) {
        Ok(Some((svg, marks))) => {
            let _ = writeln!(
                out,
                "<figure class=\"latency\" id=\"latency-{}\">{svg}<figcaption>{} steady requests{} · \
                 p50 {:.1} ms · p95 {:.1} ms · max {:.1} ms · first request (×) {:.1} ms</figcaption></figure>",
                esc(&arm.id),
                marks.steady,
                if marks.dots < marks.steady {
                    format!(" (drawn as {} quantiles)", marks.dots)
                } else {
                    String::new()
                },
                marks.p50_ms,
                marks.p95_ms,
                marks.max_ms,
                latencies_ns.first().map_or(0.0, |&ns| ns as f64 / 1e6)
            );
        }
        Ok(None) => {}
        Err(e) => {
            let _ = writeln!(out, "<p>latency chart not drawn: {}</p>", esc(&e));
        }
    }
}

/// The overhead twin runs in order, and the ratio they give.
fn overhead_table(out: &mut String, arm: &ArmReceipt) {
    let Some(o) = &arm.overhead else { return };
    out.push_str("<h3>Sampler overhead (twin runs)</h3>\n");
    out.push_str(
        "<table><tr><th>#</th><th>twin</th><th>status</th><th>requests</th><th>steady median ms</th><th>steady p95 ms</th></tr>",
    );
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.3}", v / 1e6));
    for t in &o.runs {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t.order,
            if t.label.sampled() {
                "A (sampled)"
            } else {
                "B (unsampled)"
            },
            t.status,
            t.requests,
            ms(t.steady_median_ns),
            ms(t.steady_p95_ns)
        );
    }
    out.push_str("</table>\n");
    let ratios: Vec<String> = o.pair_ratios.iter().map(|r| format!("{r:.4}")).collect();
    let _ = match o.ratio {
        Some(r) => writeln!(
            out,
            "<p>Sampled / unsampled steady median: <b>{r:.4}</b> (median of {} pairs; spread {:.4}..{:.4}; pairs: {}).</p>",
            o.pair_ratios.len(),
            o.ratio_min.unwrap_or(r),
            o.ratio_max.unwrap_or(r),
            ratios.join(", ")
        ),
        None => writeln!(
            out,
            "<p class=\"fail\">No ratio: {}</p>",
            esc(&o.problems.join("; "))
        ),
    };
}

/// A soak arm's growth table (request_end, settled and system series) and,
/// when the soak kept a history, the charts of slope and peak per night.
fn soak_section(out: &mut String, s: &Stability, history: Option<&SoakHistory>) {
    let verdict = match s.stable {
        Some(true) => "stable",
        Some(false) => "NOT stable",
        None => "inconclusive (not a pass)",
    };
    let _ = writeln!(
        out,
        "<h3>Soak</h3><p>{} requests · worker {} · {verdict}</p>",
        s.requests,
        s.worker.name()
    );
    out.push_str(
        "<table><tr><th>series</th><th>classification</th><th>tail KiB/request [interval]</th><th>reason</th></tr>",
    );
    for g in s
        .worker_series
        .iter()
        .chain(&s.settled_series)
        .chain(&s.system_series)
    {
        let slope = g.tail_bytes_per_request.map_or("–".into(), |t| {
            format!(
                "{:.2} [{:.2}, {:.2}]",
                t.estimate / 1024.0,
                t.low / 1024.0,
                t.high / 1024.0
            )
        });
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{slope}</td><td>{}</td></tr>",
            esc(&g.series),
            g.classification.name(),
            esc(&g.reason)
        );
    }
    out.push_str("</table>\n");
    let Some(h) = history else { return };
    let _ = writeln!(
        out,
        "<h3>Soak history</h3><p>{} soaks of <code>{}</code> arm <code>{}</code>, oldest first; \
         this run large and blue, regressions red.</p>",
        h.nights.len(),
        esc(&h.protocol),
        esc(&h.arm)
    );
    match crate::soak_history::charts(h) {
        Ok(svgs) => {
            for (name, svg) in ["slope", "peak"].iter().zip(svgs) {
                let _ = writeln!(out, "<div id=\"soak-history-{name}\">{svg}</div>");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "<p>history chart not drawn: {}</p>", esc(&e));
        }
    }
    for n in h.nights.iter().filter(|n| !n.regressions.is_empty()) {
        let _ = writeln!(
            out,
            "<p class=\"fail\">regression {}: {}</p>",
            esc(&n.started_utc),
            esc(&n.regressions.join("; "))
        );
    }
}

/// Render the page from a receipt, each arm's series (and the time of its
/// first row, to place the markers), its measured request latencies and,
/// for a soak that kept a history, its past nights (`soak-history.json`).
pub fn render(
    r: &Receipt,
    series: &BTreeMap<String, (u64, Vec<Point>)>,
    latencies_ns: &BTreeMap<String, Vec<u64>>,
    history: Option<&SoakHistory>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>memqual {}</title><style>{STYLE}</style></head><body>",
        esc(&r.run.protocol_name)
    );
    let _ = writeln!(
        out,
        "<h1>memqual run <code>{}</code></h1><p>{} · {} · memqual {}</p>",
        esc(&r.run.protocol_name),
        esc(&r.run.started_utc),
        esc(&r.run.platform),
        esc(&r.run.memqual_version)
    );
    out.push_str("<h2>Verdict</h2>\n");
    verdict_table(&mut out, r);
    for arm in &r.arms {
        let _ = writeln!(
            out,
            "<h2>Arm <code>{}</code>: {:?}</h2>",
            esc(&arm.id),
            arm.status
        );
        for f in &arm.failure {
            let _ = writeln!(out, "<p class=\"fail\">{}</p>", esc(f));
        }
        if let Some((t0, points)) = series.get(&arm.id) {
            match memory_chart(arm, points, *t0) {
                Ok(svg) => out.push_str(&svg),
                Err(e) => {
                    let _ = writeln!(out, "<p>chart not drawn: {}</p>", esc(&e));
                }
            }
        }
        if let Some(s) = &arm.stability {
            soak_section(&mut out, s, history.filter(|h| h.arm == arm.id));
        }
        out.push_str("<h3>Peak by phase</h3>\n");
        peaks_against_control(&mut out, r, arm);
        out.push_str("<h3>Latency</h3>\n");
        latency_table(&mut out, arm);
        if let Some(l) = latencies_ns.get(&arm.id) {
            latency_figure(&mut out, arm, l);
        }
        overhead_table(&mut out, arm);
        transcript_diff(&mut out, r, arm);
        wer_table(&mut out, arm);
        if let Some(rt) = arm.speech.as_ref().and_then(|s| s.runtime.as_ref())
            && let Ok(v) = serde_json::to_value(rt)
        {
            out.push_str(
                "<h3>Runtime and topology</h3><table><tr><th>field</th><th>value</th></tr>",
            );
            kv_rows(&mut out, "", &v);
            out.push_str("</table>\n");
        }
    }
    identity_tables(&mut out, r);
    out.push_str("</body></html>\n");
    out
}

/// Render `report.html` from the run directory.
pub fn write(run: &RunDir, r: &Receipt) -> Result<(), ReportError> {
    let mut series = BTreeMap::new();
    let mut latencies = BTreeMap::new();
    for arm in &r.arms {
        let (t0, points) = read_series(run, &arm.id)?;
        series.insert(arm.id.clone(), (t0.unwrap_or(0), points));
        latencies.insert(arm.id.clone(), read_latencies(run, &arm.id)?);
    }
    let history = crate::soak_history::read(run)?;
    let page = render(r, &series, &latencies, history.as_ref());
    Ok(run.write_bytes(&Rel::file(FILE), page.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_keeps_every_bucket_extreme_and_bounds_the_size() {
        // 36,000 samples of a flat line with one single-sample spike.
        let mut pts: Vec<(f64, f64)> = (0..36_000).map(|i| (i as f64 * 0.05, 100.0)).collect();
        pts[12_345].1 = 400.0;
        pts[30_000].1 = 20.0;
        let env = envelope(&pts, 960);
        assert!(env.len() <= 2 * 960, "{}", env.len());
        assert!(env.contains(&(12_345.0 * 0.05, 400.0)), "the peak survives");
        assert!(
            env.contains(&(30_000.0 * 0.05, 20.0)),
            "the trough survives"
        );
        assert!(env.windows(2).all(|w| w[0].0 <= w[1].0), "time order kept");
        // Short series are drawn as they are.
        assert_eq!(envelope(&pts[..100], 960), pts[..100].to_vec());
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
