//! The text formats of a receipt: `summary.md` (verdict and key numbers,
//! ready to paste into a review), `phases.csv` (every arm's phase table)
//! and `trace.json` (Chrome trace events: memory counters from the series,
//! slices for phases and requests; Perfetto opens it). Pure functions of
//! what they are given; [`crate::export`] puts them behind its trait and
//! writes them.

use reports::ReportError;
use reports::receipt::{ArmReceipt, Receipt};
use sampler::Phase;
use std::fmt::Write;

/// File names of the derived reports (they live in [`run_dir::names`]).
pub mod names {
    pub use run_dir::names::{PHASES, SUMMARY, TRACE};
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn ms(ns: Option<f64>) -> String {
    ns.map_or("–".into(), |n| format!("{:.1}", n / 1e6))
}

/// `summary.md`.
pub fn summary_markdown(r: &Receipt) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# memqual run `{}`\n", r.run.protocol_name);
    match &r.gates {
        Some(g) => {
            let _ = writeln!(
                out,
                "**Verdict: {}** (over {})\n",
                g.verdict.as_str(),
                g.judged_arms.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, "**Verdict: none** (no arm declares gates)\n");
        }
    }
    if !r.integrity.complete {
        let _ = writeln!(
            out,
            "**INCOMPLETE:** this receipt does not rest on raw data sealed by the run alone:\n"
        );
        for note in &r.integrity.notes {
            let _ = writeln!(out, "- {note}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "Started {} on {} (memqual {}), protocol digest `{}`.\n",
        r.run.started_utc, r.run.platform, r.run.memqual_version, r.run.protocol_sha256
    );
    let _ = writeln!(
        out,
        "| arm | status | state_ready peak MiB | max resident MiB | steady p50 / p95 / max ms | requests |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for a in &r.arms {
        let (p50, p95, max) = match &a.speech {
            Some(s) => (
                s.latency.steady_p50_ns,
                s.latency.steady_p95_ns,
                s.latency.steady_max_ns.map(|n| n as f64),
            ),
            None => match &a.latency {
                Some(l) => (Some(l.p50_ns), Some(l.p95_ns), Some(l.max_ns as f64)),
                None => (None, None, None),
            },
        };
        let _ = writeln!(
            out,
            "| {} | {:?} | {} | {} | {} / {} / {} | {} |",
            a.id,
            a.status,
            mib(a.state_ready_peak()),
            mib(a.series.max_resident_bytes),
            ms(p50),
            ms(p95),
            ms(max),
            a.requests
        );
    }
    for a in &r.arms {
        if let Some(c) = &a.memory_ceiling {
            let _ = writeln!(out, "\n`{}`: {}.", a.id, reports::ceiling::line(c));
        }
    }
    let residencies: Vec<(&str, &analysis::residency::ResidencyReceipt)> = r
        .arms
        .iter()
        .filter_map(|a| a.residency.as_ref().map(|s| (a.id.as_str(), s)))
        .collect();
    out.push_str(&analysis::residency::markdown(&residencies));
    let attributed: Vec<(&str, &reports::attribution::AttributionReceipt)> = r
        .arms
        .iter()
        .map(|a| (a.id.as_str(), &a.attribution))
        .collect();
    out.push_str(&reports::attribution::markdown(&attributed));
    let qois: Vec<(&str, &quality::QoiReport)> = r
        .arms
        .iter()
        .filter_map(|a| Some((a.id.as_str(), a.speech.as_ref()?.quality.qoi.as_ref()?)))
        .collect();
    out.push_str(&quality::qoi_text::markdown(&qois));
    let throughputs: Vec<(&str, &analysis::throughput::Throughput)> = r
        .arms
        .iter()
        .filter_map(|a| Some((a.id.as_str(), a.speech.as_ref()?.throughput.as_ref()?)))
        .collect();
    out.push_str(&analysis::throughput::markdown(&throughputs));
    let soaks: Vec<(&str, &analysis::stability::Stability)> = r
        .arms
        .iter()
        .filter_map(|a| Some((a.id.as_str(), a.stability.as_ref()?)))
        .collect();
    out.push_str(&analysis::stability::markdown(&soaks));
    out.push_str(&reports::harness_self::markdown(
        r.arms
            .iter()
            .filter_map(|a| Some((a.id.as_str(), a.harness_self.as_ref()?))),
    ));
    if let Some(g) = &r.gates {
        let _ = writeln!(out, "\n## Gates\n");
        let _ = writeln!(
            out,
            "| arm | gate | outcome | check | measured | threshold | control |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for a in &g.arms {
            for gate in &a.gates {
                for c in &gate.checks {
                    let num = |v: Option<f64>| match (v, c.unit.as_str()) {
                        (None, _) => "–".to_string(),
                        (Some(v), "bytes") => format!("{:.2} MiB", v / 1048576.0),
                        (Some(v), "ns") => format!("{:.1} ms", v / 1e6),
                        (Some(v), _) => format!("{v}"),
                    };
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} ({}) | {} | {} | {} |",
                        a.arm,
                        gate.kind,
                        c.outcome.as_str(),
                        c.name,
                        c.note.replace('|', "/"),
                        num(c.measured),
                        num(c.threshold),
                        num(c.control)
                    );
                }
            }
            let _ = writeln!(
                out,
                "| **{}** | | **{}** | arm verdict | | | |",
                a.arm,
                a.verdict.as_str()
            );
        }
    }
    let blocked: Vec<&ArmReceipt> = r.arms.iter().filter(|a| a.overhead.is_some()).collect();
    if !blocked.is_empty() {
        let _ = writeln!(out, "\n## Sampler overhead (ABBA blocks in one worker)\n");
        let _ = writeln!(
            out,
            "| arm | quads | sampled / unsampled latency | 95 % interval | requests kept A / B / left out |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for a in blocked {
            let Some(o) = &a.overhead else { continue };
            let f4 = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.4}"));
            let toggled = match o.plan.toggles {
                reports::gate_spec::OverheadToggle::Sampler => String::new(),
                t => format!(" ({} on / off)", t.label()),
            };
            let _ = writeln!(
                out,
                "| {}{toggled} | {} of {} | {} | {}..{} | {} / {} / {} |",
                a.id,
                o.quad_ratios.len(),
                o.plan.quads,
                o.ratio.map_or_else(
                    || format!("none: {}", o.problems.join("; ").replace('|', "/")),
                    |r| format!("{r:.4}")
                ),
                f4(o.ratio_lower),
                f4(o.ratio_upper),
                o.sampled_requests,
                o.unsampled_requests,
                o.dropped_requests
            );
        }
    }
    cancellations_and_conversions(&mut out, r);
    if let Some(adm) = &r.admission {
        let refused = adm.checks.iter().filter(|c| !c.admitted).count();
        let _ = writeln!(
            out,
            "\nAdmission: {} checks, {refused} refused{}.",
            adm.checks.len(),
            if adm.forced { " (--force)" } else { "" }
        );
    }
    if let Some(seal) = &r.seal {
        let _ = writeln!(
            out,
            "\nSealed: manifest `{}`, receipt `{}`.",
            seal.manifest_sha256, seal.receipt_sha256
        );
    }
    out
}

/// Per whisper arm: what its `cancel` did, and which inputs were converted.
fn cancellations_and_conversions(out: &mut String, r: &Receipt) {
    for a in &r.arms {
        let Some(speech) = &a.speech else { continue };
        if let Some(c) = &speech.cancellation {
            let what = if c.cancelled {
                format!(
                    "cancelled: the abort took {} ms (signal to whisper_full's return, code {}), \
                     resident {} MiB at request_end against request_begin",
                    ms(c.abort_latency_ns.map(|n| n as f64)),
                    c.code.map_or("–".to_string(), |c| c.to_string()),
                    c.resident_delta_bytes.map_or("–".to_string(), |d| format!(
                        "{:+.2}",
                        d as f64 / 1048576.0
                    ))
                )
            } else {
                "not cancelled: the request finished before whisper.cpp saw the abort".to_string()
            };
            let _ = writeln!(
                out,
                "\nArm `{}`: cancel of request {} at {} ms: {what}.",
                a.id, c.request, c.after_ms
            );
        }
        if !speech.converted_inputs.is_empty() {
            let list: Vec<String> = speech
                .converted_inputs
                .iter()
                .map(|c| {
                    format!(
                        "`{}` ({} Hz, {} ch)",
                        c.fixture_id, c.from.sample_rate_hz, c.from.channels
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "\nArm `{}`: {} inputs resampled to 16 kHz mono: {}.",
                a.id,
                list.len(),
                list.join(", ")
            );
        }
    }
}

/// `phases.csv`: one row per marker of every arm.
pub fn phases_csv(r: &Receipt) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let invalid = |e: csv::Error| ReportError::Invalid {
        path: names::PHASES.into(),
        reason: e.to_string(),
    };
    w.write_record([
        "arm",
        "phase",
        "seq",
        "request_id",
        "t_ns",
        "resident_bytes",
        "resident_peak_bytes",
        "footprint_bytes",
        "footprint_peak_bytes",
        "series_max_resident_bytes",
        "peak_between_samples",
    ])
    .map_err(invalid)?;
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    for a in &r.arms {
        for p in &a.phases {
            w.write_record([
                a.id.clone(),
                p.phase.to_string(),
                p.seq.to_string(),
                opt(p.request_id),
                p.t_ns.to_string(),
                p.memory.resident_bytes.to_string(),
                opt(p.memory.resident_peak_bytes),
                opt(p.memory.footprint_bytes),
                opt(p.memory.footprint_peak_bytes),
                opt(p.series_max_resident_bytes),
                p.peak_between_samples
                    .map_or(String::new(), |b| b.to_string()),
            ])
            .map_err(invalid)?;
        }
    }
    let bytes = w.into_inner().map_err(|e| ReportError::Invalid {
        path: names::PHASES.into(),
        reason: e.to_string(),
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `trace.json` in the Chrome trace-event format: one process per arm,
/// counters `resident` and `footprint` (MiB) from its series (`series`, arm
/// id → rows), a slice per phase (from the previous marker to this one) and
/// per request. A counter is a step function in the trace viewers, so a row
/// that repeats the previous values adds nothing and is left out (the last
/// row with values always stays, so each line runs to its end); `series.csv` keeps every
/// row. An 8-hour soak's plateau is mostly such rows.
pub fn trace_json(
    r: &Receipt,
    series: &reports::series::SeriesPoints,
) -> Result<String, ReportError> {
    use serde_json::json;
    let mut events = Vec::new();
    for (i, a) in r.arms.iter().enumerate() {
        let pid = i + 1;
        events.push(TraceEvent::Other(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": a.id}}),
        ));
        let rows = series.get(&a.id).map_or(&[][..], |d| d.points.as_slice());
        let drawn = |row: &reports::series::SeriesPoint| (row.resident_bytes, row.footprint_bytes);
        let last = rows.iter().rposition(|row| drawn(row) != (None, None));
        let mut shown = None;
        for (k, row) in rows.iter().enumerate() {
            let values = drawn(row);
            if values == (None, None) || (shown == Some(values) && Some(k) != last) {
                continue;
            }
            shown = Some(values);
            let mib = |v: Option<u64>| v.map(|b| b as f64 / 1048576.0);
            events.push(TraceEvent::Counter(Counter {
                args: CounterArgs {
                    footprint: mib(row.footprint_bytes),
                    resident: mib(row.resident_bytes),
                },
                name: "memory MiB",
                ph: "C",
                pid,
                tid: 0,
                ts: row.t_ns as f64 / 1000.0,
            }));
        }
        let mut begin: Option<u64> = None;
        for (k, p) in a.phases.iter().enumerate() {
            // After rows a long soak's receipt left to phase-rows.jsonl, the
            // slice starts at the marker before (the window's start).
            let start = match k.checked_sub(1).map(|j| &a.phases[j]) {
                None => p.t_ns,
                Some(prev) if prev.seq + 1 == p.seq => prev.t_ns,
                Some(_) => p.window_start_ns.unwrap_or(p.t_ns),
            };
            events.push(TraceEvent::Other(
                json!({"ph": "X", "name": p.phase.to_string(), "cat": "phase",
                               "pid": pid, "tid": 1, "ts": start as f64 / 1000.0,
                               "dur": p.t_ns.saturating_sub(start) as f64 / 1000.0,
                               "args": {"resident_bytes": p.memory.resident_bytes,
                                        "resident_peak_bytes": p.memory.resident_peak_bytes}}),
            ));
            match p.phase {
                Phase::RequestBegin => begin = Some(p.t_ns),
                Phase::RequestEnd => {
                    if let Some(b) = begin.take() {
                        events.push(TraceEvent::Other(json!({"ph": "X", "name": format!("request {}", p.request_id.unwrap_or(0)),
                                           "cat": "request", "pid": pid, "tid": 2,
                                           "ts": b as f64 / 1000.0,
                                           "dur": p.t_ns.saturating_sub(b) as f64 / 1000.0})));
                    }
                }
                _ => {}
            }
        }
    }
    let trace = Trace {
        display_time_unit: "ms",
        other_data: json!({"protocol": r.run.protocol_name,
                           "verdict": r.gates.as_ref().map(|g| g.verdict.as_str())}),
        trace_events: events,
    };
    serde_json::to_string(&trace).map_err(|e| ReportError::Invalid {
        path: names::TRACE.into(),
        reason: format!("cannot serialize the trace: {e}"),
    })
}

/// `trace.json`, its keys in the order `serde_json::Value` writes them
/// (sorted), so the typed events write the same text as before.
#[derive(serde::Serialize)]
struct Trace {
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "otherData")]
    other_data: serde_json::Value,
    #[serde(rename = "traceEvents")]
    trace_events: Vec<TraceEvent>,
}

/// A series counter is typed (a soak has hundreds of thousands: a
/// `serde_json::Value` map each cost about a kilobyte); the few others are values.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum TraceEvent {
    Counter(Counter),
    Other(serde_json::Value),
}

#[derive(serde::Serialize)]
struct Counter {
    args: CounterArgs,
    name: &'static str,
    ph: &'static str,
    pid: usize,
    tid: u32,
    ts: f64,
}

#[derive(serde::Serialize)]
struct CounterArgs {
    #[serde(skip_serializing_if = "Option::is_none")]
    footprint: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resident: Option<f64>,
}
