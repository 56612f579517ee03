//! `validity`: the measurement itself is sound (complete, sampled on time, admitted host).

use super::context::{Context, at_most, check};
use super::evaluate::Judge;
use super::{Check, Evidence, Outcome};
use crate::gate_spec::ValidityGate;
use crate::record::{ArmStatus, files};
use sampler::Phase;

impl Judge for ValidityGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        validity(ctx, self)
    }
}

fn validity(ctx: &Context, g: &ValidityGate) -> Vec<Check> {
    let a = ctx.arm.arm;
    let mut checks = Vec::new();

    let mut c = check("arm completed", "bool");
    c.evidence.push(ctx.arm.at("/status"));
    c.threshold = Some(1.0);
    let completed = a.status == ArmStatus::Completed;
    c.measured = Some(f64::from(u8::from(completed)));
    c.outcome = if completed {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c.note = match a.status {
        ArmStatus::Completed => "exit 0, every phase, bye".into(),
        ArmStatus::Failed => format!("failed: {}", a.failure.join("; ")),
        ArmStatus::NotRunnable => format!("not runnable: {}", a.failure.join("; ")),
    };
    checks.push(c);

    let missing: Vec<String> = Phase::ALL
        .iter()
        .filter(|p| !a.phases.iter().any(|r| r.phase == **p))
        .map(|p| p.to_string())
        .collect();
    let mut c = at_most(
        check("every phase present", "count"),
        missing.len() as f64,
        0.0,
    );
    c.evidence.push(ctx.arm.at("/phases"));
    c.note = if missing.is_empty() {
        "all 8 phases".into()
    } else {
        format!("missing: {}", missing.join(", "))
    };
    checks.push(c);

    let mut c = check("measured requests", "count");
    c.evidence.push(ctx.arm.at("/requests"));
    c.threshold = Some(1.0);
    c.measured = Some(a.requests as f64);
    c.outcome = if a.requests >= 1 {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c.note = "at least one".into();
    checks.push(c);

    let due = a.series.samples + a.series.skipped_ticks;
    let mut c = check("skipped ticks / ticks due", "ratio");
    c.evidence.push(ctx.arm.at("/series/skipped_ticks"));
    if due == 0 {
        c.outcome = Outcome::Fail;
        c.threshold = Some(g.max_skipped_fraction);
        c.note = "the external sampler recorded nothing".into();
    } else {
        c = at_most(
            c,
            a.series.skipped_ticks as f64 / due as f64,
            g.max_skipped_fraction,
        );
        c.note = format!("{} of {due} ticks skipped", a.series.skipped_ticks);
    }
    checks.push(c);

    let sys = &a.series.system;
    if let (Some(i), Some(o)) = (sys.pswpin_delta, sys.pswpout_delta) {
        let mut c = at_most(
            check("pages swapped in or out during the arm", "count"),
            (i.max(0) + o.max(0)) as f64,
            0.0,
        );
        c.evidence = vec![
            ctx.arm.at("/series/system/pswpin_delta"),
            ctx.arm.at("/series/system/pswpout_delta"),
        ];
        c.note = "system-wide pswpin + pswpout across the arm".into();
        checks.push(c);
    }

    let mut c = check("host admitted before the arm", "bool");
    c.threshold = Some(1.0);
    match &ctx.receipt.admission {
        None => c.note = "the run has no admission record".into(),
        Some(record) => {
            let index = record
                .checks
                .iter()
                .position(|k| k.before_arm.as_deref() == Some(a.id.as_str()));
            c.evidence.push(Evidence {
                file: files::ADMISSION.to_string(),
                pointer: index.map_or("/checks".into(), |i| format!("/checks/{i}")),
            });
            match record.refusals_for(&a.id) {
                None => c.note = "no admission check before this arm".into(),
                Some(reasons) if reasons.is_empty() => {
                    c.measured = Some(1.0);
                    c.outcome = Outcome::Pass;
                    c.note = "quiet host".into();
                }
                Some(reasons) => {
                    c.measured = Some(0.0);
                    c.outcome = Outcome::Fail;
                    c.note = format!(
                        "measured on a refused host (--force): {}",
                        reasons.join("; ")
                    );
                }
            }
        }
    }
    checks.push(c);
    checks
}
