//! `overhead`: the sampler's own cost, from the ABBA block run.

use super::context::{Context, check};
use super::evaluate::Judge;
use super::{Check, Evidence, Outcome};
use crate::gate_spec::OverheadGate;
use crate::record::files;

impl Judge for OverheadGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        vec![overhead(ctx, self)]
    }
}

/// Latency with the sampler over latency without it, from the ABBA block
/// run (`arms/<id>/overhead.json`): PASS only when the interval's upper end
/// is within the limit, FAIL when its lower end is above it, otherwise NOT
/// EVALUATED with the interval.
fn overhead(ctx: &Context, g: &OverheadGate) -> Check {
    let name = "latency with the sampler / without it (ABBA blocks, 95 % interval)";
    let limit = 1.0 + g.tolerance;
    let mut c = check(name, "ratio");
    c.threshold = Some(limit);
    let id = &ctx.arm.arm.id;
    let file = format!("{}/{id}/{}", files::ARMS, crate::overhead::OVERHEAD_FILE);
    let Some(record) = &ctx.arm.arm.overhead else {
        c.note = format!(
            "no {file}: the block run did not happen (the arm did not complete, or the run stopped before it)"
        );
        return c;
    };
    c.evidence.push(Evidence {
        file,
        pointer: "/ratio_upper".into(),
    });
    c.measured = record.ratio;
    let quads = record.quad_ratios.len();
    let (Some(ratio), Some(lower), Some(upper)) =
        (record.ratio, record.ratio_lower, record.ratio_upper)
    else {
        c.note = if record.problems.is_empty() {
            "the block run gave no interval".into()
        } else {
            record.problems.join("; ")
        };
        return c;
    };
    let interval = format!(
        "ratio {ratio:.4}, {:.0} % interval {lower:.4}..{upper:.4} over {quads} ABBA quads",
        record.confidence * 100.0
    );
    (c.outcome, c.note) = if !record.problems.is_empty() {
        (
            Outcome::NotEvaluated,
            format!("{interval}; {}", record.problems.join("; ")),
        )
    } else if upper <= limit {
        (
            Outcome::Pass,
            format!("{interval}; upper end within 1 + {}", g.tolerance),
        )
    } else if lower > limit {
        (
            Outcome::Fail,
            format!("{interval}; lower end above 1 + {}", g.tolerance),
        )
    } else {
        (
            Outcome::NotEvaluated,
            format!(
                "{interval}: straddles 1 + {}, so the run cannot tell (more quads or a quieter host narrow it)",
                g.tolerance
            ),
        )
    };
    c
}
