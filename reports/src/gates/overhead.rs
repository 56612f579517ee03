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
    let name = format!(
        "latency with {} / without it (ABBA blocks, 95 % interval)",
        g.toggles.label()
    );
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
    let rounds = match (record.rounds.len(), record.budget_quads) {
        (n, Some(budget)) if n > 1 => format!(" in {n} rounds (budget {budget})"),
        _ => String::new(),
    };
    let cpu = record.cpu.map_or(String::new(), |c| {
        format!(
            "; sampling's own CPU {:.3} % of the worker's (sampler {:.1} ms + marker path {:.1} ms over {:.1} s in {} sampled requests)",
            c.ratio * 100.0,
            c.sampler_ns as f64 / 1e6,
            c.marker_path_ns as f64 / 1e6,
            c.worker_ns as f64 / 1e9,
            c.requests
        )
    });
    let interval = format!(
        "ratio {ratio:.4}, {:.0} % interval {lower:.4}..{upper:.4} over {quads} ABBA quads{rounds}",
        record.confidence * 100.0
    );
    let spent = record
        .budget_quads
        .filter(|b| record.plan.quads >= *b && record.rounds.len() > 1);
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
    } else if let Some(budget) = spent {
        (
            Outcome::NotEvaluated,
            format!(
                "{interval}: still straddles 1 + {} with the budget of {budget} quads spent (width {:.4}); a larger max_quads or a quieter host narrows it",
                g.tolerance,
                upper - lower
            ),
        )
    } else {
        (
            Outcome::NotEvaluated,
            format!(
                "{interval}: straddles 1 + {}, so the run cannot tell (a max_quads budget adds rounds until it can; a quieter host narrows it)",
                g.tolerance
            ),
        )
    };
    c.note.push_str(&cpu);
    c
}
