//! The page's templates (maud): every text and attribute value is escaped
//! by the template engine; the only unescaped inserts are the stylesheet
//! (`assets/report.css`) and the SVG that plotters draws, each marked
//! `PreEscaped` here and in [`super::ladder_chart`] only.
//!
//! Order: verdict, the comparison section, the worker and its encoder
//! process by phase (only with an external encoder process), the checks
//! with their evidence,
//! each arm's details, the run's identity.

use super::PageData;
use super::compare::{self, Cell, GateCard, MIB, MatrixRow, MemoryFigure, StateCost, Unit};
use super::compare_charts::{self, ArmCurve, ArmLatency, Palette};
use analysis::stability::Stability;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use reports::gates::{Check, Outcome};
use reports::receipt::{ArmReceipt, Receipt};
use reports::soak_history::SoakHistory;
use sampler::Phase;
use std::collections::BTreeMap;

fn class(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::NotEvaluated => "ne",
    }
}

fn outcome_cell(o: Outcome) -> Markup {
    html! { td class=(class(o)) { (o.as_str()) } }
}

fn pill(o: Outcome) -> Markup {
    html! { span class={ "pill " (class(o)) } { (o.as_str()) } }
}

fn swatch(palette: &Palette, arm: &str) -> Markup {
    html! { span.swatch style={ "background:" (palette.hex(arm)) } {} }
}

fn mib(v: Option<u64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1}", b as f64 / MIB))
}

/// A SVG string plotters drew, or why it is missing.
fn svg(result: Result<String, String>, what: &str) -> Markup {
    match result {
        Ok(svg) => html! { (PreEscaped(svg)) },
        Err(e) => html! { p { (what) " not drawn: " (e) } },
    }
}

/// The whole page.
pub fn page(r: &Receipt, data: &PageData) -> Markup {
    let palette = Palette::new(r);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "memqual " (r.run.protocol_name) }
                style { (PreEscaped(super::STYLE)) }
            }
            body {
                h1 { "memqual run " code { (r.run.protocol_name) } }
                p.meta {
                    (r.run.started_utc) " · " (r.run.platform) " · memqual " (r.run.memqual_version)
                    " · " (r.arms.len()) " arm" @if r.arms.len() != 1 { "s" }
                }
                @if !r.integrity.complete {
                    section #integrity {
                        p class="verdict fail" {
                            "INCOMPLETE: this receipt does not rest on raw data sealed by the run alone"
                        }
                        ul { @for note in &r.integrity.notes { li { (note) } } }
                    }
                }
                section #verdict { (verdict(r)) }
                (comparison(r, data, &palette))
                (super::ladder_chart::section(r))
                (checks(r))
                @for arm in &r.arms {
                    (arm_details(r, arm, data))
                }
                (identity(r))
            }
        }
    }
}

fn verdict(r: &Receipt) -> Markup {
    let Some(g) = &r.gates else {
        return html! { p { "No arm declares gates: no verdict." } };
    };
    let mut kinds: Vec<&str> = Vec::new();
    for a in &g.arms {
        for gate in &a.gates {
            if !kinds.contains(&gate.kind.as_str()) {
                kinds.push(&gate.kind);
            }
        }
    }
    html! {
        p class={ "verdict " (class(g.verdict)) } {
            "Run verdict: " (g.verdict.as_str()) " (over " (g.judged_arms.join(", ")) ")"
        }
        table.gates {
            tr {
                th { "arm" } th { "control" } th { "promote" }
                @for k in &kinds { th { (k) } }
                th { "arm verdict" }
            }
            @for a in &g.arms {
                tr {
                    td { (a.arm) }
                    td { (a.control.as_deref().unwrap_or("")) }
                    td { @if a.promote { "yes" } }
                    @for k in &kinds {
                        @match a.gates.iter().find(|gate| gate.kind == *k) {
                            Some(gate) => (outcome_cell(gate.outcome)),
                            None => td {},
                        }
                    }
                    (outcome_cell(a.verdict))
                }
            }
        }
    }
}

fn comparison(r: &Receipt, data: &PageData, palette: &Palette) -> Markup {
    let matrix = compare::matrix(r);
    let pictures = compare::gate_pictures(r);
    let headlines = compare::headlines(r);
    let costs = compare::state_costs(r);
    let diff = compare::identity_diff(r);
    let curves: Vec<ArmCurve> = r
        .arms
        .iter()
        .filter_map(|a| {
            let (t0_ns, points) = data.series.get(&a.id)?;
            Some(ArmCurve {
                arm: a,
                t0_ns: *t0_ns,
                points,
            })
        })
        .collect();
    let latency_of = |id: &str| -> Option<ArmLatency> {
        let arm = r.arms.iter().find(|a| a.id == id)?;
        Some(ArmLatency {
            arm: &arm.id,
            latencies_ns: data.latencies_ns.get(id).map_or(&[], |v| v.as_slice()),
            cold_load_ns: arm.speech.as_ref().and_then(|s| s.latency.cold_load_ns),
        })
    };
    let gated_latency: Vec<&str> = pictures
        .latency
        .iter()
        .flat_map(|(c, marks)| {
            std::iter::once(c.as_str()).chain(marks.iter().map(|m| m.arm.as_str()))
        })
        .collect();
    let all_latency: Vec<ArmLatency> = r.arms.iter().filter_map(|a| latency_of(&a.id)).collect();
    html! {
        section #comparison {
            h2 { "Comparison" }
            @if !headlines.is_empty() {
                ul.headlines {
                    @for h in &headlines {
                        li {
                            (pill(h.outcome)) " " code { (h.arm) } " " b { (h.gate) " gate" } ": " (h.text)
                            @if let Some(why) = &h.why { br; span.why { (why) } }
                        }
                    }
                }
            }
            (matrix_table(&matrix, palette))
            @for (i, f) in pictures.memory.iter().enumerate() {
                (memory_figure(i, f, palette))
            }
            @for c in &costs { (state_cost(c, palette)) }
            @for (control, marks) in &pictures.latency {
                @let arms: Vec<ArmLatency> = std::iter::once(control.as_str())
                    .chain(marks.iter().map(|m| m.arm.as_str()))
                    .filter_map(&latency_of)
                    .collect();
                figure.gate data-gate="latency" id={ "gate-latency-" (control) } {
                    @match compare_charts::latency_ecdf(&arms, marks, palette) {
                        Ok(Some(s)) => (PreEscaped(s)),
                        Ok(None) => p { "No steady requests to draw." },
                        Err(e) => p { "latency chart not drawn: " (e) },
                    }
                    figcaption {
                        "Latency gate against " code { (control) } ": steady latencies as ECDFs; the red lines are each arm's limits (control × (1 + tolerance)). "
                        @for m in marks {
                            (pill(m.outcome)) " " code { (m.arm) } " "
                            @for (name, measured, limit) in &m.limits {
                                (name) " " (ms(*measured)) " ms (limit " (ms(*limit)) " ms) "
                            }
                        }
                    }
                }
            }
            @if !pictures.cards.is_empty() {
                div.cards {
                    @for c in &pictures.cards { (card(c, palette)) }
                }
            }
            @if !curves.is_empty() {
                figure #memory-aligned {
                    (svg(compare_charts::aligned_memory(&curves, palette), "memory chart"))
                    figcaption {
                        "Resident memory of every arm on one axis, time aligned by phase: each phase gets the same width whatever it lasted (the requests three times that), so a 42 ms phase is as readable as a 40 s one. Dots: the in-process value at each marker; short bars: the kernel peak of the phase."
                    }
                    (phase_durations(&curves, palette))
                }
            }
            @if all_latency.iter().any(|a| a.latencies_ns.len() > 1)
                && all_latency.iter().any(|a| !gated_latency.contains(&a.arm))
            {
                figure #latency-ecdf {
                    @match compare_charts::latency_ecdf(&all_latency, &[], palette) {
                        Ok(Some(s)) => (PreEscaped(s)),
                        Ok(None) => {},
                        Err(e) => p { "latency chart not drawn: " (e) },
                    }
                    figcaption { "Steady request latency of every arm as an ECDF on one x axis; below, apart, each arm's first request (×) and cold load (▲)." }
                }
            }
            (identity_diff(&diff, palette))
        }
    }
}

fn ms(ns: Option<f64>) -> String {
    ns.map_or("–".into(), |v| format!("{:.1}", v / 1e6))
}

fn value_text(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Mib => format!("{:.1}", v / MIB),
        Unit::Ms => format!("{:.1}", v / 1e6),
        Unit::Percent => format!("{:.1} %", v * 100.0),
    }
}

fn delta_markup(c: &Cell, unit: Unit) -> Markup {
    let Some(d) = c.delta else { return html! {} };
    let text = match unit {
        Unit::Mib => format!("{:+.1}", d / MIB),
        Unit::Ms => format!("{:+.1}", d / 1e6),
        Unit::Percent => format!("{:+.1} pt", d * 100.0),
    };
    let pct = match (unit, c.pct) {
        (Unit::Percent, _) | (_, None) => String::new(),
        (_, Some(p)) => format!(" ({p:+.1} %)"),
    };
    let direction = if d > 0.0 {
        "up"
    } else if d < 0.0 {
        "down"
    } else {
        ""
    };
    html! { br; span class={ "delta " (direction) } { "Δ " (text) (pct) } }
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Mib => "MiB",
        Unit::Ms => "ms",
        Unit::Percent => "",
    }
}

fn matrix_table(m: &compare::Matrix, palette: &Palette) -> Markup {
    let has_verdict = m.rows.iter().any(|r| r.verdict.is_some());
    let has_outputs = m.rows.iter().any(|r| r.outputs.is_some());
    let role = |row: &MatrixRow| -> Markup {
        match (&row.control, row.is_control) {
            (Some(c), _) => html! { "vs " code { (c) } },
            (None, true) => html! { "control" },
            (None, false) => html! {},
        }
    };
    html! {
        table #matrix {
            tr {
                th { "arm" } th { "role" } th { "status" }
                @if has_verdict { th { "verdict" } }
                @for c in &m.columns {
                    th.num { (c.name) @if !unit_name(c.unit).is_empty() { " " (unit_name(c.unit)) } }
                }
                @if has_outputs { th { "outputs vs control" } }
            }
            @for row in &m.rows {
                tr {
                    td { (swatch(palette, &row.arm)) code { (row.arm) } }
                    td { (role(row)) }
                    td { (format!("{:?}", row.status)) }
                    @if has_verdict {
                        @match row.verdict {
                            Some(v) => (outcome_cell(v)),
                            None => td {},
                        }
                    }
                    @for (c, cell) in m.columns.iter().zip(&row.cells) {
                        td.num {
                            @match cell.value {
                                Some(v) => (value_text(v, c.unit)),
                                None => "–",
                            }
                            (delta_markup(cell, c.unit))
                        }
                    }
                    @if has_outputs { td { (row.outputs.as_deref().unwrap_or("")) } }
                }
            }
        }
    }
}

fn memory_figure(i: usize, f: &MemoryFigure, palette: &Palette) -> Markup {
    html! {
        figure.gate data-gate="memory" id={ "gate-memory-" (i) } {
            (svg(compare_charts::peak_by_phase(f, palette), "peak-per-phase chart"))
            figcaption {
                "Memory gate: " code { (f.phase) } " " code { (f.field) } " per phase"
                @if let Some(c) = &f.control { ", control " code { (c) } " (grey) against each gated arm" }
                ". The gated phase is shaded; the red line is the limit."
            }
            table.gate-marks {
                tr {
                    th { "arm" } th { "outcome" } th.num { "measured MiB" } th.num { "control MiB" }
                    th.num { "Δ MiB" } th.num { "Δ %" } th.num { "limit MiB" } th.num { "allowed Δ %" }
                    th.num { "measured − limit MiB" } th { "how the limit is set" }
                }
                @for m in &f.marks {
                    @let d = m.delta();
                    tr {
                        td { (swatch(palette, &m.arm)) code { (m.arm) } }
                        (outcome_cell(m.outcome))
                        td.num { (opt_mib(m.measured)) }
                        td.num { (opt_mib(m.control)) }
                        td.num { (d.delta.map_or("–".into(), |v| format!("{:+.1}", v / MIB))) }
                        td.num { (d.pct.map_or("–".into(), |v| format!("{v:+.1}"))) }
                        td.num { (opt_mib(m.threshold)) }
                        td.num { (m.allowed_pct().map_or("–".into(), |v| format!("{v:+.1}"))) }
                        td.num { (m.margin().map_or("–".into(), |v| format!("{:+.1}", v / MIB))) }
                        td { (m.note) }
                    }
                }
            }
        }
    }
}

fn opt_mib(v: Option<f64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1}", b / MIB))
}

fn state_cost(c: &StateCost, palette: &Palette) -> Markup {
    let rows = [
        (
            "logged by whisper.cpp (kv + compute buffers)",
            "logged",
            c.logged_delta,
        ),
        (
            "resident at state_ready (measured)",
            "resident",
            c.resident_delta,
        ),
        (
            "state_ready phase peak (measured)",
            "resident",
            c.peak_delta,
        ),
    ];
    let scale = rows
        .iter()
        .filter_map(|(_, _, v)| v.map(|v| v.unsigned_abs()))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    html! {
        figure.state-cost id={ "state-cost-" (c.arm) } {
            h3 {
                "Logged versus measured state cost: " (swatch(palette, &c.arm)) code { (c.arm) }
                " (" (c.arm_states) " state" @if c.arm_states != 1 { "s" } ") against "
                (swatch(palette, &c.control)) code { (c.control) } " (" (c.control_states) ")"
            }
            table {
                tr { th { "arm − control" } th.num { "MiB" } th {} }
                @for (name, kind, v) in &rows {
                    tr {
                        td { (name) }
                        td.num { (v.map_or("–".into(), |v| format!("{:+.1}", v as f64 / MIB))) }
                        td {
                            @if let Some(v) = v {
                                span class={ "bar " (kind) }
                                    style={ "width:" (format!("{:.0}", v.unsigned_abs() as f64 / scale * 320.0)) "px" } {}
                            }
                        }
                    }
                }
            }
            details {
                summary { "Each logged buffer, summed over states (MiB)" }
                table {
                    tr { th { "buffer" } th.num { (c.control) } th.num { (c.arm) } th.num { "Δ" } }
                    @for (name, a, k) in &c.buffers {
                        tr {
                            td { (name) }
                            td.num { (format!("{:.1}", *k as f64 / MIB)) }
                            td.num { (format!("{:.1}", *a as f64 / MIB)) }
                            td.num { (format!("{:+.1}", (*a as f64 - *k as f64) / MIB)) }
                        }
                    }
                }
            }
        }
    }
}

fn num(v: Option<f64>, unit: &str) -> String {
    match (v, unit) {
        (None, _) => "–".to_string(),
        (Some(v), "bytes") => format!("{:.2} MiB", v / MIB),
        (Some(v), "ns") => format!("{:.1} ms", v / 1e6),
        (Some(v), "ratio") => format!("{v:.4}"),
        (Some(v), _) => format!("{v}"),
    }
}

fn card(c: &GateCard, palette: &Palette) -> Markup {
    html! {
        div.card data-gate=(c.gate.kind) {
            h4 { (pill(c.gate.outcome)) " " (swatch(palette, &c.arm)) code { (c.arm) } " " (c.gate.kind) }
            table {
                @for k in &c.gate.checks {
                    tr {
                        td { (k.name) }
                        (outcome_cell(k.outcome))
                        td.num { (num(k.measured, &k.unit)) }
                        td.num { @if k.threshold.is_some() { "limit " (num(k.threshold, &k.unit)) } }
                    }
                }
            }
        }
    }
}

fn phase_durations(curves: &[ArmCurve], palette: &Palette) -> Markup {
    html! {
        table.durations {
            tr {
                th { "arm" }
                @for (name, _) in &compare_charts::SLOTS { th.num { (name) } }
            }
            @for c in curves {
                @let b = compare_charts::boundaries(c.arm, c.t0_ns, c.points);
                tr {
                    td { (swatch(palette, &c.arm.id)) code { (c.arm.id) } }
                    @for w in b.windows(2) { td.num { (duration(w[1] - w[0])) } }
                }
            }
        }
    }
}

fn duration(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn identity_diff(d: &compare::IdentityDiff, palette: &Palette) -> Markup {
    if d.arms.len() < 2 {
        return html! {};
    }
    html! {
        div #identity-diff {
            h3 { "Identity and topology: the keys that differ between arms" }
            @if d.differing.is_empty() {
                p { "Every arm has the same identity and topology." }
            } @else {
                table {
                    tr {
                        th { "key" }
                        @for a in &d.arms { th { (swatch(palette, a)) code { (a) } } }
                    }
                    @for (key, values) in &d.differing {
                        tr {
                            td { code { (key) } }
                            @for v in values { td { (v.as_deref().unwrap_or("–")) } }
                        }
                    }
                }
            }
            details {
                summary { (d.same.len()) " keys the same in every arm" }
                table {
                    @for (key, v) in &d.same { tr { td { code { (key) } } td { (v) } } }
                }
            }
        }
    }
}

fn evidence_link(file: &str, pointer: &str) -> Markup {
    html! { a href={ (file) "#" (pointer) } { code { (file) "#" (pointer) } } " " }
}

fn check_row(arm: &str, gate: &str, c: &Check) -> Markup {
    html! {
        tr {
            td { (arm) } td { (gate) } td { (c.name) }
            (outcome_cell(c.outcome))
            td { (num(c.measured, &c.unit)) }
            td { (num(c.threshold, &c.unit)) }
            td { (num(c.control, &c.unit)) }
            td { @for e in &c.evidence { (evidence_link(&e.file, &e.pointer)) } }
            td { (c.note) }
        }
    }
}

fn checks(r: &Receipt) -> Markup {
    let Some(g) = &r.gates else { return html! {} };
    html! {
        section #checks {
            h2 { "Checks and evidence" }
            table {
                tr {
                    th { "arm" } th { "gate" } th { "check" } th { "outcome" } th { "measured" }
                    th { "threshold" } th { "control" } th { "evidence" } th { "note" }
                }
                @for a in &g.arms {
                    @for gate in &a.gates {
                        @for c in &gate.checks { (check_row(&a.arm, &gate.kind, c)) }
                    }
                }
            }
        }
    }
}

fn peaks_against_control(r: &Receipt, arm: &ArmReceipt) -> Markup {
    let control = compare::control_of(r, &arm.id);
    html! {
        table {
            tr {
                th { "phase" } th { "peak MiB" }
                th { "control" @if let Some(c) = control { " (" (c.id) ")" } " MiB" }
                th { "Δ MiB" }
            }
            @for phase in Phase::ALL {
                @let a = compare::peak_of(arm, phase);
                @let c = control.and_then(|c| compare::peak_of(c, phase));
                tr {
                    td { (phase) } td { (mib(a)) } td { (mib(c)) }
                    td {
                        @match (a, c) {
                            (Some(a), Some(c)) => (format!("{:+.1}", (a as f64 - c as f64) / MIB)),
                            _ => "–",
                        }
                    }
                }
            }
        }
    }
}

fn latency_table(arm: &ArmReceipt) -> Markup {
    let Some(s) = &arm.speech else {
        return match &arm.latency {
            Some(l) => html! {
                p { (format!(
                    "Latency over {} requests: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms.",
                    l.count, l.p50_ns / 1e6, l.p95_ns / 1e6, l.max_ns as f64 / 1e6
                )) }
            },
            None => html! {},
        };
    };
    let l = &s.latency;
    let mut all: Vec<f64> = s
        .transcripts
        .iter()
        .map(|t| t.latency_ns as f64 / 1e6)
        .collect();
    all.sort_by(f64::total_cmp);
    let shown: Vec<String> = all.iter().map(|v| format!("{v:.1}")).collect();
    html! {
        table {
            tr {
                th { "cold load" } th { "first request" } th { "steady n" } th { "p50" }
                th { "p95" } th { "max" } th { "RTF" }
            }
            tr {
                td { (ms(l.cold_load_ns.map(|v| v as f64))) }
                td { (ms(l.first_request_ns.map(|v| v as f64))) }
                td { (l.steady_count) }
                td { (ms(l.steady_p50_ns)) }
                td { (ms(l.steady_p95_ns)) }
                td { (ms(l.steady_max_ns.map(|v| v as f64))) }
                td { (l.steady_rtf.map_or("–".into(), |v| format!("{v:.3}"))) }
            }
        }
        p { "All request latencies, ms (sorted): " (shown.join(", ")) }
    }
}

/// The latency distribution of an arm, in a figure the tests can find.
fn latency_figure(arm: &ArmReceipt, latencies_ns: &[u64]) -> Markup {
    match crate::latency_chart::chart(latencies_ns) {
        Ok(Some((svg, marks))) => html! {
            figure.latency id={ "latency-" (arm.id) } {
                (PreEscaped(svg))
                figcaption {
                    (marks.steady) " steady requests"
                    @if marks.dots < marks.steady { " (drawn as " (marks.dots) " quantiles)" }
                    (format!(
                        " · p50 {:.1} ms · p95 {:.1} ms · max {:.1} ms · first request (×) {:.1} ms",
                        marks.p50_ms, marks.p95_ms, marks.max_ms,
                        latencies_ns.first().map_or(0.0, |&ns| ns as f64 / 1e6)
                    ))
                }
            }
        },
        Ok(None) => html! {},
        Err(e) => html! { p { "latency chart not drawn: " (e) } },
    }
}

/// The overhead block run: requests kept per side, the quad ratios and the interval.
fn overhead_table(arm: &ArmReceipt) -> Markup {
    let Some(o) = &arm.overhead else {
        return html! {};
    };
    let f4 = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4}"));
    let ratios: Vec<String> = o.quad_ratios.iter().map(|r| format!("{r:.4}")).collect();
    html! {
        h3 { (o.plan.toggles.title()) }
        table {
            tr {
                th { "status" } th { "requests" } th { "sampled" } th { "unsampled" }
                th { "left out" } th { "quads" } th { "ratio" } th { "95 % interval" }
            }
            tr {
                td { (format!("{:?}", o.status)) }
                td { (o.requests) }
                td { (o.sampled_requests) }
                td { (o.unsampled_requests) }
                td { (o.dropped_requests) }
                td { (o.quad_ratios.len()) " of " (o.plan.quads) }
                td { b { (f4(o.ratio)) } }
                td { (f4(o.ratio_lower)) ".." (f4(o.ratio_upper)) }
            }
        }
        @if o.plan.injected_busy_us > 0 {
            p.fail { (format!("Injected cost: the sampler burnt {} µs of CPU per sampled tick (a gate test, not a measurement).", o.plan.injected_busy_us)) }
        }
        @if o.rounds.len() > 1 {
            p { (format!("{} rounds, a fresh worker each, until the interval decided or the budget of {} quads ran out: ", o.rounds.len(), o.budget_quads.unwrap_or(o.plan.quads)))
                (o.rounds.iter().map(|r| format!("{} ({} quads)", r.dir, r.complete_quads)).collect::<Vec<_>>().join(", ")) }
        }
        @if let Some(c) = &o.cpu {
            p { (format!(
                "Sampling's own CPU, from each thread's clock over the {} kept sampled requests: sampler thread {:.1} ms + marker path {:.1} ms against the worker's {:.2} s, {:.3} %.",
                c.requests, c.sampler_ns as f64 / 1e6, c.marker_path_ns as f64 / 1e6, c.worker_ns as f64 / 1e9, c.ratio * 100.0
            )) }
        }
        p { "Quad ratios (A over B, latency normalised by fixture): " (ratios.join(", ")) }
        @if !o.problems.is_empty() {
            p.fail { "Problems: " (o.problems.join("; ")) }
        }
    }
}

/// A lifecycle soak's cycles, its judged floor series and every floor.
fn lifecycle_floors(l: &analysis::stability::LifecycleFloors) -> Markup {
    let mib = |b: u64| format!("{:.1}", b as f64 / 1_048_576.0);
    html! {
        p {
            (l.cycles_completed) " of " (l.cycles_planned) " cycles (load → state → "
            (l.requests_per_cycle) " requests → state and context freed), judged on the floor after each teardown; "
            "the first " (l.warmup_cycles) " not judged, threshold "
            (format!("{:.1}", l.slope_bytes_per_cycle / 1024.0)) " KiB/cycle. The request_end series below are shown, not judged."
        }
        table {
            tr { th { "floor series" } th { "classification" } th { "slope KiB/cycle [interval]" } th { "reason" } }
            @for g in &l.floor_series {
                tr {
                    td { (g.series) }
                    td { (g.classification.name()) }
                    td {
                        @match g.bytes_per_request {
                            Some(t) => (format!("{:.1} [{:.1}, {:.1}]", t.estimate / 1024.0, t.low / 1024.0, t.high / 1024.0)),
                            None => "–",
                        }
                    }
                    td { (g.reason) }
                }
            }
        }
        details {
            summary { "Floor after each cycle's teardown (" (l.floors.len()) " cycles)" }
            table {
                tr { th { "cycle" } th { "last request" } th { "resident MiB" } th { "footprint MiB" } }
                @for f in &l.floors {
                    tr {
                        td { (f.cycle) }
                        td { (f.last_request.map_or("–".into(), |r| r.to_string())) }
                        td { (mib(f.resident_bytes)) }
                        td { (f.footprint_bytes.map_or("–".into(), mib)) }
                    }
                }
            }
        }
    }
}

/// A soak arm's growth table and, with a history, slope and peak per night.
fn soak_section(s: &Stability, history: Option<&SoakHistory>) -> Markup {
    let verdict = analysis::stability::verdict_text(s.stable);
    html! {
        h3 { "Soak" }
        p { "mode " code { (s.mode.name()) } " · " (s.requests) " requests · worker " (s.worker.name()) " · " (verdict) }
        @if let Some(c) = &s.covariates {
            @if c.confounds.is_empty() { p { (c.line()) } } @else { p.fail { (c.line()) } }
        }
        @if let Some(l) = &s.lifecycle {
            (lifecycle_floors(l))
        }
        table {
            tr { th { "series" } th { "classification" } th { "tail KiB/request [interval]" } th { "reason" } }
            @for g in s.worker_series.iter().chain(&s.settled_series).chain(&s.system_series) {
                tr {
                    td { (g.series) }
                    td { (g.classification.name()) }
                    td {
                        @match g.tail_bytes_per_request {
                            Some(t) => (format!("{:.2} [{:.2}, {:.2}]", t.estimate / 1024.0, t.low / 1024.0, t.high / 1024.0)),
                            None => "–",
                        }
                    }
                    td { (g.reason) }
                }
            }
        }
        @if let Some(h) = history {
            h3 { "Soak history" }
            p {
                (h.nights.len()) " soaks of " code { (h.protocol) } " arm " code { (h.arm) }
                ", oldest first; this run large and blue, regressions red."
            }
            @match reports::soak_history::charts(h) {
                Ok(svgs) => {
                    @for (name, s) in ["slope", "peak"].iter().zip(svgs) {
                        div id={ "soak-history-" (name) } { (PreEscaped(s)) }
                    }
                }
                Err(e) => p { "history chart not drawn: " (e) },
            }
            @for n in h.nights.iter().filter(|n| !n.regressions.is_empty()) {
                p.fail { "regression " (n.started_utc) ": " (n.regressions.join("; ")) }
            }
        }
    }
}

/// Each fixture's first repetition against the control's: the first
/// differing token, or that they are equal.
fn transcript_diff(r: &Receipt, arm: &ArmReceipt) -> Markup {
    let Some(control) = compare::control_of(r, &arm.id) else {
        return html! {};
    };
    let (Some(a), Some(c)) = (&arm.speech, &control.speech) else {
        return html! {};
    };
    let first = |rows: &[reports::speech::TranscriptRow]| {
        let mut by: BTreeMap<String, reports::speech::TranscriptRow> = BTreeMap::new();
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
    let tokens = |tokens: &[i32], at: usize| {
        html! {
            @for (i, tok) in tokens.iter().enumerate() {
                @if i > 0 { " " }
                @if i == at { mark { (tok) } } @else { (tok) }
            }
        }
    };
    let mut differing = 0;
    let rows: Vec<Markup> = ar
        .iter()
        .filter_map(|(id, t)| {
            let ct = cr.get(id)?;
            let at = t
                .result
                .tokens
                .iter()
                .zip(&ct.result.tokens)
                .position(|(x, y)| x != y)
                .or((t.result.tokens.len() != ct.result.tokens.len())
                    .then(|| t.result.tokens.len().min(ct.result.tokens.len())));
            match at {
                None if t.result.text != ct.result.text
                    || t.result.eot != ct.result.eot
                    || t.result.stop_reason != ct.result.stop_reason =>
                {
                    differing += 1;
                    Some(html! {
                        p { (id) ": same tokens, different text or end: " code { (t.result.text) } " vs " code { (ct.result.text) } }
                    })
                }
                None => None,
                Some(at) => {
                    differing += 1;
                    Some(html! {
                        p { (id) ": first differing token at position " (at) }
                        p.tok { "arm: " (tokens(&t.result.tokens, at)) br; "control: " (tokens(&ct.result.tokens, at)) }
                        p { "arm text: " (t.result.text) br; "control text: " (ct.result.text) }
                    })
                }
            }
        })
        .collect();
    html! {
        @for row in &rows { (row) }
        @if differing == 0 {
            p { "Transcripts: every fixture's tokens, end and text equal the control's (" (control.id) ")." }
        }
    }
}

fn wer_table(arm: &ArmReceipt) -> Markup {
    let Some(w) = arm.speech.as_ref().and_then(|s| s.quality.wer.as_ref()) else {
        return html! {};
    };
    html! {
        table {
            tr { th { "category" } th { "slices" } th { "reference words" } th { "WER" } }
            @for c in &w.categories {
                tr {
                    td { (c.category) }
                    td { (c.slices) }
                    td { (c.counts.reference_words) }
                    td { (c.wer.map_or("–".into(), |v| format!("{:.1} %", v * 100.0))) }
                }
            }
        }
    }
}

/// QoI against the control: overall, per category, and the fixtures that got worse.
fn qoi_table(arm: &ArmReceipt) -> Markup {
    use quality::qoi_text::{categories_text, share_text, worse_text};
    let Some(q) = arm.speech.as_ref().and_then(|s| s.quality.qoi.as_ref()) else {
        return html! {};
    };
    html! {
        table.qoi {
            tr { th { "QoI against " code { (q.control) } } th { "per category" } th { "worse fixtures" } }
            tr {
                td { (share_text(q.qoi, q.no_worse, q.fixtures)) }
                td { (categories_text(q)) }
                td { (worse_text(q)) }
            }
        }
    }
}

/// Decode throughput and fallbacks, the first request apart from the warm ones.
fn throughput_table(arm: &ArmReceipt) -> Markup {
    let Some(t) = arm.speech.as_ref().and_then(|s| s.throughput.as_ref()) else {
        return html! {};
    };
    html! {
        h3 { "Decode throughput and fallbacks" }
        table.throughput {
            tr { @for h in analysis::throughput::HEADS { th { (h) } } }
            @for row in analysis::throughput::rows(t) {
                tr { @for cell in &row { td { (cell) } } }
            }
        }
    }
}

/// `path = value` rows of a JSON value (arrays over 16 items as a count).
fn kv_rows(prefix: &str, v: &serde_json::Value) -> Markup {
    let mut rows = BTreeMap::new();
    compare::flatten(prefix, v, &[], &mut rows);
    html! {
        @for (k, v) in &rows { tr { td { (k) } td { (v) } } }
    }
}

/// Where a long series was reduced for drawing, and what was kept exactly.
fn reduction_note(arm: &ArmReceipt, rows: u64, bucket_ns: u64) -> Markup {
    let mib = |b: Option<u64>| b.map_or("–".to_string(), |b| format!("{:.1}", b as f64 / MIB));
    html! {
        p.reduced {
            "Reduced for drawing: the " (rows) " rows of " code { "series.csv" }
            " are drawn as a min/max envelope of " (format!("{:.3}", bucket_ns as f64 / 1e9))
            " s buckets. Each bucket keeps its rows of least and greatest resident and footprint, at their own times, so the series maximum ("
            (mib(arm.series.max_resident_bytes)) " MiB resident, " (mib(arm.series.max_footprint_bytes))
            " MiB footprint) and any one-tick spike are drawn exactly; every phase's kernel peak is drawn from its marker. "
            code { "series.csv" } " keeps every row."
        }
    }
}

fn arm_details(r: &Receipt, arm: &ArmReceipt, data: &PageData) -> Markup {
    html! {
        section.arm id={ "arm-" (arm.id) } {
            h2 { "Arm " code { (arm.id) } ": " (format!("{:?}", arm.status)) }
            @for f in &arm.failure { p.fail { (f) } }
            @if let Some(c) = &arm.memory_ceiling { p.ceiling { (reports::ceiling::line(c)) } }
            @if let Some((t0, points)) = data.series.get(&arm.id) {
                (svg(super::arm_chart::memory_chart(arm, points, *t0), "chart"))
                @if let Some((rows, bucket_ns)) = data.reduced.get(&arm.id) {
                    (reduction_note(arm, *rows, *bucket_ns))
                }
                @if let Some(c) = arm.stability.as_ref().and_then(|s| s.covariates.as_ref()) {
                    @match super::arm_chart::covariate_row(arm, c, points, *t0) {
                        Ok(Some(row)) => div.chart.covariate { (PreEscaped(row)) },
                        Ok(None) => p.covariate { "Covariate row: nothing readable on this host (" (c.unreadable.join(", ")) ")." },
                        Err(e) => p { "covariate row not drawn: " (e) },
                    }
                }
            }
            @if let Some(s) = &arm.stability {
                (soak_section(s, data.history.as_ref().filter(|h| h.arm == arm.id)))
            }
            h3 { "Peak by phase" }
            (peaks_against_control(r, arm))
            h3 { "Latency" }
            (latency_table(arm))
            @if let Some(l) = data.latencies_ns.get(&arm.id) { (latency_figure(arm, l)) }
            (throughput_table(arm))
            (super::residency::section(arm))
            (super::device::section(arm))
            (super::attribution::section(arm))
            (overhead_table(arm))
            (transcript_diff(r, arm))
            (wer_table(arm))
            (qoi_table(arm))
            @if let Some(rt) = arm.speech.as_ref().and_then(|s| s.runtime.as_ref()) {
                @if let Some(c) = &rt.coreml {
                    (super::coreml::placement(&c.placement))
                }
                @if let Ok(v) = serde_json::to_value(rt) {
                    details.runtime {
                        summary { "Runtime and topology (every field)" }
                        table { tr { th { "field" } th { "value" } } (kv_rows("", &v)) }
                    }
                }
            }
        }
    }
}

fn identity(r: &Receipt) -> Markup {
    html! {
        section #identity {
            h2 { "Identity" }
            details {
                summary { "Run, host and memqual identity (every field)" }
                table {
                    tr { th { "field" } th { "value" } }
                    @if let Ok(v) = serde_json::to_value(&r.identity) { (kv_rows("", &v)) }
                    @if let Ok(v) = serde_json::to_value(&r.run) { (kv_rows("run", &v)) }
                }
            }
        }
    }
}
