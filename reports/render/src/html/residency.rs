//! The report page's real-time and idle-residency table of one arm:
//! stop-to-final latency apart from compute, idle RAM per gap, the peak,
//! and what each release gave back.

use analysis::residency::StopToFinal;
use maud::{Markup, html};
use reports::receipt::ArmReceipt;

fn mib(v: Option<f64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1}", b / 1048576.0))
}

fn stf(s: &Option<StopToFinal>) -> String {
    match s {
        Some(s) => format!(
            "{:.1} / {:.1} / {:.1}",
            s.p50_ns / 1e6,
            s.p95_ns / 1e6,
            s.max_ns as f64 / 1e6
        ),
        None => "–".into(),
    }
}

/// The section, or nothing for an arm without a residency record.
pub fn section(arm: &ArmReceipt) -> Markup {
    let Some(r) = &arm.residency else {
        return html! {};
    };
    let drops: Vec<String> = r
        .release_drops
        .iter()
        .map(|d| mib(d.dropped_bytes.map(|v| v as f64)))
        .collect();
    html! {
        h3 { "Real-time requests and idle residency" }
        p {
            "Policy " code { (r.policy) }
            @if let Some(ms) = r.unload_after_idle_ms { " (" (ms as f64 / 1000.0) " s)" }
            ", requests " code { (r.request_mode) }
            @if let Some(c) = r.chunk_ms { " in " (c) " ms chunks" }
            ". Stop-to-final runs from the end of the audio to the final text, reloads included; "
            "the latency above is the decode alone. "
            (r.releases) " releases, " (r.reloads) " reloads; peak footprint "
            (mib(r.peak_footprint_bytes.map(|v| v as f64))) " MiB."
        }
        table.residency id={ "residency-" (arm.id) } {
            tr {
                th { "gap" } th { "requests" } th { "reloads" }
                th { "idle mean MiB" } th { "idle min MiB" }
                th { "stop-to-final p50 / p95 / max ms" }
            }
            tr {
                td { "all" } td { (r.requests.len()) } td { (r.reloads) }
                td { (mib(r.idle_mean_footprint_bytes)) }
                td { (mib(r.idle_min_footprint_bytes.map(|v| v as f64))) }
                td { (stf(&r.stop_to_final)) }
            }
            @for g in &r.by_gap {
                tr {
                    td { (g.gap_ms as f64 / 1000.0) " s" }
                    td { (g.stop_to_final.as_ref().map_or(0, |s| s.count)) }
                    td { (g.reloads) }
                    td { (mib(g.idle_mean_footprint_bytes)) }
                    td { (mib(g.idle_min_footprint_bytes.map(|v| v as f64))) }
                    td { (stf(&g.stop_to_final)) }
                }
            }
        }
        @if !drops.is_empty() {
            p { "Footprint given back at each release, MiB: " (drops.join(", ")) }
        }
    }
}
