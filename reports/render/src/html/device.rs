//! The report page's device-memory table of a GPU arm: host resident and
//! device memory at each phase, the GPU context's baseline, and where the
//! model and the state went.

use maud::{Markup, html};
use reports::device_memory::Split;
use reports::receipt::ArmReceipt;

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}

fn signed_mib(bytes: i64) -> String {
    format!("{:+.1}", bytes as f64 / 1048576.0)
}

fn split(what: &str, s: &Split) -> Markup {
    html! {
        li { (what) ": " (signed_mib(s.device_bytes)) " MiB on the device, "
             (signed_mib(s.host_bytes)) " MiB resident on the host" }
    }
}

/// The section, or nothing for an arm whose markers read no device memory.
pub fn section(arm: &ArmReceipt) -> Markup {
    let Some(d) = &arm.device_memory else {
        return html! {};
    };
    html! {
        h3 { "Host and device memory by phase" }
        p {
            "Before the model (" code { "process_start" } ", the GPU context made first): "
            (mib(d.baseline.device_bytes)) " MiB on the device, "
            (mib(d.baseline.resident_bytes)) " MiB resident. Peak on the device at a marker: "
            (mib(d.peak_device_bytes)) " MiB."
        }
        ul {
            @if let Some(m) = &d.model { (split("Loading the model added", m)) }
            @if let Some(s) = &d.state { (split("Creating the state added", s)) }
        }
        table {
            tr { th { "phase" } th { "resident MiB" } th { "device MiB" } th { "series max device MiB" } }
            @for p in &d.phases {
                tr {
                    td { (p.phase) } td { (mib(p.resident_bytes)) } td { (mib(p.device_bytes)) }
                    td { (p.series_max_device_bytes.map_or("–".into(), mib)) }
                }
            }
        }
    }
}
