//! The report page's allocation attribution of one arm: per phase, the
//! sites holding the most heap at its end and those that allocated the
//! most within it, against the growth the kernel measured.

use maud::{Markup, html};
use reports::attribution::{AttributionMode, PhaseAttribution, Site};
use reports::receipt::ArmReceipt;

fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / 1048576.0)
}

fn signed_mib(bytes: Option<i64>) -> String {
    bytes.map_or("–".into(), |b| format!("{:+.2}", b as f64 / 1048576.0))
}

fn share(s: &Site) -> String {
    s.share_of_measured_growth
        .map_or("–".into(), |v| format!("{:.1} %", v * 100.0))
}

fn sites(title: &str, list: &[Site], bytes: fn(&Site) -> u64) -> Markup {
    html! {
        @if !list.is_empty() {
            tr { th colspan="5" { (title) } }
            @for s in list {
                tr {
                    td { code title=(s.stack.join("\n")) { (s.site) } }
                    td { (s.object.as_deref().unwrap_or("")) }
                    td.num { (mib(bytes(s) as f64)) }
                    td.num { (signed_mib(Some(s.growth_bytes))) }
                    td.num { (share(s)) }
                }
            }
        }
    }
}

fn phase(p: &PhaseAttribution) -> Markup {
    html! {
        h4 {
            code { (p.phase.as_str()) }
            @if let Some(r) = p.request_id { " (request " (r) ")" }
            " — measured " (signed_mib(p.measured_growth_bytes)) " MiB, malloc "
            (signed_mib(Some(p.malloc_growth_bytes))) " MiB, kernel − malloc "
            (signed_mib(p.unattributed_gap_bytes)) " MiB"
        }
        table.attribution {
            tr {
                th { "site" } th { "object" } th { "MiB" } th { "growth MiB" }
                th { "share of measured growth" }
            }
            (sites("retained at the phase end", &p.retained, |s| s.retained_bytes))
            (sites("allocated within the phase", &p.allocated, |s| s.allocated_bytes))
        }
    }
}

/// The section, or nothing for an arm without attribution.
pub fn section(arm: &ArmReceipt) -> Markup {
    let a = &arm.attribution;
    if a.mode == AttributionMode::Off {
        return html! {};
    }
    html! {
        h3 { "Allocation attribution" }
        p {
            "Profiler " code { (a.profiler.as_deref().unwrap_or("?")) }
            @if let Some(b) = a.sample_interval_bytes { ", one sample per " (b) " bytes on average" }
            ". Bytes are unbiased from the samples. \"Kernel − malloc\" is the phase's resident "
            "growth less its heap growth: memory malloc never saw (mapped files such as a GGML "
            "model, driver and GPU memory, thread stacks) when positive; heap allocated but not "
            "yet touched when negative (its pages count in the phase that touches them). "
            "Hover a site for its stack."
        }
        @if let Some(c) = &a.cost { p.meta { "Cost: " (c) } }
        @for p in &a.problems { p.fail { (p) } }
        @for p in &a.phases { (phase(p)) }
    }
}
