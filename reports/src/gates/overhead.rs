//! `overhead`: the sampler's own cost, from the twin runs.

use super::context::{Context, at_most, check};
use super::evaluate::Judge;
use super::{Check, Evidence};
use crate::gate_spec::OverheadGate;
use crate::record::files;

impl Judge for OverheadGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        vec![overhead(ctx, self)]
    }
}

/// Steady median latency with the sampler over without it, from the twin
/// runs (`arms/<id>/overhead.json`).
fn overhead(ctx: &Context, g: &OverheadGate) -> Check {
    let name = "steady median latency with the sampler / without it";
    let mut c = check(name, "ratio");
    c.threshold = Some(1.0 + g.tolerance);
    let id = &ctx.arm.arm.id;
    let file = format!("{}/{id}/{}", files::ARMS, crate::overhead::OVERHEAD_FILE);
    let Some(record) = &ctx.arm.arm.overhead else {
        c.note = format!(
            "no {file}: the twin runs did not happen (the arm did not complete, or the run stopped before them)"
        );
        return c;
    };
    c.evidence.push(Evidence {
        file,
        pointer: "/ratio".into(),
    });
    let Some(ratio) = record.ratio else {
        c.note = if record.problems.is_empty() {
            "the twin runs gave no ratio".into()
        } else {
            record.problems.join("; ")
        };
        return c;
    };
    let mut c = at_most(c, ratio, 1.0 + g.tolerance);
    c.note = format!(
        "median over {} A/B pairs (spread {:.4}..{:.4}); limit 1 + {}",
        record.pair_ratios.len(),
        record.ratio_min.unwrap_or(ratio),
        record.ratio_max.unwrap_or(ratio),
        g.tolerance
    );
    c
}
