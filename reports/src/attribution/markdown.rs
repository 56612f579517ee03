//! The allocation attribution section of `summary.md`.

use super::{AttributionMode, AttributionReceipt};
use std::fmt::Write;

/// Sites per phase in the summary (the receipt and the page list more).
const SUMMARY_SITES: usize = 5;

fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / 1048576.0)
}

fn signed(bytes: Option<i64>) -> String {
    bytes.map_or("–".into(), |b| format!("{:+.2}", b as f64 / 1048576.0))
}

/// The section over the arms with attribution on; empty when none has it.
pub fn markdown(arms: &[(&str, &AttributionReceipt)]) -> String {
    let mut out = String::new();
    for (id, a) in arms.iter().filter(|(_, a)| a.mode != AttributionMode::Off) {
        if out.is_empty() {
            let _ = writeln!(out, "\n## Allocation attribution\n");
            let _ = writeln!(
                out,
                "Heap bytes by allocation site, unbiased from the profiler's samples. \"kernel − malloc\" is the phase's resident growth less its heap growth: memory malloc never saw (mapped model files, driver memory, stacks) when positive, heap allocated but not yet touched when negative.\n"
            );
        }
        let _ = writeln!(
            out,
            "`{id}`: {}, one sample per {} bytes on average.\n",
            a.profiler.as_deref().unwrap_or("?"),
            a.sample_interval_bytes
                .map_or("?".to_string(), |b| b.to_string())
        );
        for problem in &a.problems {
            let _ = writeln!(out, "- {problem}");
        }
        if !a.problems.is_empty() {
            out.push('\n');
        }
        for p in &a.phases {
            let _ = writeln!(
                out,
                "**{}**{}: measured {} MiB, malloc {} MiB, kernel − malloc {} MiB\n",
                p.phase.as_str(),
                p.request_id
                    .map_or(String::new(), |r| format!(" (request {r})")),
                signed(p.measured_growth_bytes),
                signed(Some(p.malloc_growth_bytes)),
                signed(p.unattributed_gap_bytes)
            );
            let _ = writeln!(
                out,
                "| site retained at the phase end | MiB | growth MiB | share of measured growth |"
            );
            let _ = writeln!(out, "|---|---|---|---|");
            for s in p.retained.iter().take(SUMMARY_SITES) {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} |",
                    s.site.replace('|', "\\|"),
                    mib(s.retained_bytes as f64),
                    signed(Some(s.growth_bytes)),
                    s.share_of_measured_growth
                        .map_or("–".into(), |v| format!("{:.1} %", v * 100.0))
                );
            }
            out.push('\n');
        }
    }
    out
}
