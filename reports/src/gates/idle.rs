//! `idle_residency`: an idle policy must lower idle RAM against the control
//! by `min_reduction` while stop-to-final p95 stays under a ceiling.

use super::Check;
use super::context::{Context, MIB, at_most, check, not_evaluated};
use super::evaluate::Judge;
use crate::gate_spec::IdleResidencyGate;

impl Judge for IdleResidencyGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        vec![idle_ram(ctx, self), stop_to_final(ctx, self)]
    }
}

fn idle_ram(ctx: &Context, g: &IdleResidencyGate) -> Check {
    let name = "idle mean footprint";
    let Ok(control) = &ctx.control else {
        return not_evaluated(name, "bytes", "no usable control");
    };
    let arm = ctx
        .arm
        .arm
        .residency
        .as_ref()
        .and_then(|r| r.idle_mean_footprint_bytes);
    let ctl = control
        .arm
        .residency
        .as_ref()
        .and_then(|r| r.idle_mean_footprint_bytes);
    let (Some(m), Some(cv)) = (arm, ctl) else {
        return not_evaluated(
            name,
            "bytes",
            "the arm or its control has no idle footprint (no residency section, or no series rows with a footprint between requests)",
        );
    };
    let mut c = check(name, "bytes");
    c.control = Some(cv);
    c.evidence = vec![
        ctx.arm.at("/residency/idle_mean_footprint_bytes"),
        control.at("/residency/idle_mean_footprint_bytes"),
    ];
    let mut c = at_most(c, m, cv * (1.0 - g.min_reduction));
    c.note = format!(
        "control × (1 − {}); {:.1} MiB less than the control",
        g.min_reduction,
        (cv - m) / MIB
    );
    c
}

fn stop_to_final(ctx: &Context, g: &IdleResidencyGate) -> Check {
    let name = "stop-to-final p95";
    let Some(s) = ctx
        .arm
        .arm
        .residency
        .as_ref()
        .and_then(|r| r.stop_to_final.as_ref())
    else {
        return not_evaluated(
            name,
            "ns",
            "the arm has no request timings (no residency section, or no measured request)",
        );
    };
    let mut c = check(name, "ns");
    c.evidence = vec![ctx.arm.at("/residency/stop_to_final/p95_ns")];
    let mut c = at_most(c, s.p95_ns, g.stop_to_final_ceiling_ms * 1e6);
    c.note = format!(
        "ceiling {} ms, reloads included; max {:.1} ms",
        g.stop_to_final_ceiling_ms,
        s.max_ns as f64 / 1e6
    );
    c
}
