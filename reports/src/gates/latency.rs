//! `latency`: request latency percentiles against a bound or the control.

use super::context::{Context, Located, at_most, check, not_evaluated};
use super::evaluate::Judge;
use super::{Check, Evidence};
use crate::gate_spec::LatencyGate;

impl Judge for LatencyGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        latency(ctx, self)
    }
}

/// Steady p95 and max: whisper arms' steady requests (the first measured
/// request apart), else all measured requests.
fn latency_values(arm: Located) -> Option<[(f64, Evidence); 2]> {
    if let Some(s) = &arm.arm.speech {
        return Some([
            (
                s.latency.steady_p95_ns?,
                arm.at("/speech/latency/steady_p95_ns"),
            ),
            (
                s.latency.steady_max_ns? as f64,
                arm.at("/speech/latency/steady_max_ns"),
            ),
        ]);
    }
    let l = arm.arm.latency.as_ref()?;
    Some([
        (l.p95_ns, arm.at("/latency/p95_ns")),
        (l.max_ns as f64, arm.at("/latency/max_ns")),
    ])
}

fn latency(ctx: &Context, g: &LatencyGate) -> Vec<Check> {
    let names = ["steady p95 latency", "steady max latency"];
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let (Some(arm), Some(ctl)) = (latency_values(ctx.arm), latency_values(*control)) else {
        return vec![not_evaluated(
            "steady latency",
            "ns",
            "the arm or its control has no steady requests (at least two measured requests are needed)",
        )];
    };
    arm.into_iter()
        .zip(ctl)
        .zip(names)
        .map(|(((m, me), (cv, ce)), name)| {
            let mut c = check(name, "ns");
            c.control = Some(cv);
            c.evidence = vec![me, ce];
            let mut c = at_most(c, m, cv * (1.0 + g.tolerance));
            c.note = format!("control × (1 + {})", g.tolerance);
            c
        })
        .collect()
}
