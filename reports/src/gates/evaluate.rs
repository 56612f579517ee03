//! Judging each declared gate against a receipt: the verdict of every
//! gated arm and of the run. Each gate kind judges itself ([`Judge`], one
//! file per kind); this module only dispatches and combines.

use super::context::{Context, find_arm, not_evaluated, resolve_control};
use super::{ArmVerdict, Check, GateReport, GateResult, JudgedArms, Outcome};
use crate::gate_spec::{ArmGates, Expect, GateSpec, ValidityGate};
use crate::receipt::Receipt;

/// One gate kind's evaluation: its checks of the arm in `ctx`.
pub(super) trait Judge {
    fn checks(&self, ctx: &Context) -> Vec<Check>;
}

/// Judge every declared gate of the receipt; `None` when no arm has gates.
pub fn evaluate(receipt: &Receipt) -> Option<GateReport> {
    let declared: Vec<(&String, &ArmGates)> = receipt
        .run
        .arms
        .iter()
        .filter_map(|id| {
            let (id, g) = receipt.run.gates.get_key_value(id)?;
            (!g.gates.is_empty()).then_some((id, g))
        })
        .collect();
    if declared.is_empty() {
        return None;
    }
    let arms: Vec<ArmVerdict> = declared
        .iter()
        .map(|(id, gates)| arm_verdict(receipt, id, gates))
        .collect();
    let promoted: Vec<&ArmVerdict> = arms.iter().filter(|a| a.promote).collect();
    let (judged, judged_arms) = if promoted.is_empty() {
        (JudgedArms::AllGated, arms.iter().collect::<Vec<_>>())
    } else {
        (JudgedArms::Promoted, promoted)
    };
    let verdict = Outcome::all(judged_arms.iter().map(|a| a.verdict));
    let judged_arms = judged_arms.iter().map(|a| a.arm.clone()).collect();
    Some(GateReport {
        arms,
        judged,
        judged_arms,
        verdict,
    })
}

fn arm_verdict(receipt: &Receipt, id: &str, declared: &ArmGates) -> ArmVerdict {
    let mut specs: Vec<(bool, GateSpec)> =
        declared.gates.iter().map(|g| (true, g.clone())).collect();
    let has_validity = specs
        .iter()
        .any(|(_, g)| matches!(g, GateSpec::Validity(_)));
    if declared.expect == Expect::Pass && !has_validity {
        specs.push((false, GateSpec::Validity(ValidityGate::default())));
    }
    let gates: Vec<GateResult> = match find_arm(receipt, id) {
        None => specs
            .into_iter()
            .map(|(declared, spec)| GateResult {
                kind: spec.kind().to_string(),
                declared,
                outcome: Outcome::NotEvaluated,
                checks: vec![not_evaluated(
                    "arm measured",
                    "bool",
                    format!("arm `{id}` never ran (the run stopped before it)"),
                )],
                spec,
            })
            .collect(),
        Some(arm) => {
            let ctx = Context {
                receipt,
                arm,
                control: resolve_control(receipt, id),
            };
            specs
                .into_iter()
                .map(|(declared, spec)| {
                    let checks = gate_checks(&ctx, &spec);
                    GateResult {
                        kind: spec.kind().to_string(),
                        declared,
                        outcome: Outcome::all(checks.iter().map(|c| c.outcome)),
                        checks,
                        spec,
                    }
                })
                .collect()
        }
    };
    ArmVerdict {
        arm: id.to_string(),
        control: receipt.run.controls.get(id).cloned(),
        promote: declared.promote,
        expect: declared.expect,
        verdict: Outcome::all(gates.iter().map(|g| g.outcome)),
        gates,
    }
}

fn gate_checks(ctx: &Context, spec: &GateSpec) -> Vec<Check> {
    if spec.needs_control()
        && let Err(why) = &ctx.control
    {
        return vec![not_evaluated(
            format!("{} against the control", spec.kind()),
            "",
            why.clone(),
        )];
    }
    match spec {
        GateSpec::Memory(g) => g.checks(ctx),
        GateSpec::Latency(g) => g.checks(ctx),
        GateSpec::Parity(g) => g.checks(ctx),
        GateSpec::Quality(g) => g.checks(ctx),
        GateSpec::FailClosed(g) => g.checks(ctx),
        GateSpec::Validity(g) => g.checks(ctx),
        GateSpec::Overhead(g) => g.checks(ctx),
        GateSpec::Stability(g) => g.checks(ctx),
        GateSpec::IdleResidency(g) => g.checks(ctx),
        GateSpec::Throughput(g) => g.checks(ctx),
    }
}
