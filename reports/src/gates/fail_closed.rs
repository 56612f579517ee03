//! `fail_closed`: an arm expected to fail failed the declared way.

use super::context::{Context, check};
use super::evaluate::Judge;
use super::{Check, Outcome};
use crate::gate_spec::FailClosedGate;
use crate::record::ArmStatus;

impl Judge for FailClosedGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        vec![fail_closed(ctx, self)]
    }
}

fn fail_closed(ctx: &Context, g: &FailClosedGate) -> Check {
    let a = ctx.arm.arm;
    let mut c = check(format!("fails closed with \"{}\"", g.reason), "bool");
    c.evidence = vec![ctx.arm.at("/status"), ctx.arm.at("/failure")];
    c.threshold = Some(1.0);
    let named = a.failure.iter().any(|f| f.contains(&g.reason));
    let (outcome, note) = match a.status {
        ArmStatus::Completed => (
            Outcome::Fail,
            "the arm completed: it did not fail closed".to_string(),
        ),
        _ if named => (Outcome::Pass, format!("failed: {}", a.failure.join("; "))),
        _ => (
            Outcome::Fail,
            format!(
                "failed, but not for the named reason: {}",
                a.failure.join("; ")
            ),
        ),
    };
    c.measured = Some(f64::from(u8::from(outcome == Outcome::Pass)));
    c.outcome = outcome;
    c.note = note;
    c
}
