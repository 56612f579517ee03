//! `parity`: the arm transcribes exactly as its control (and deterministically).

use super::context::{Context, Located, at_most, check, not_evaluated};
use super::evaluate::Judge;
use super::{Check, Evidence};
use crate::gate_spec::ParityGate;
use crate::record::files;

impl Judge for ParityGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        parity(ctx)
    }
}

fn determinism_check(who: &str, arm: Located) -> Check {
    let name = format!("determinism across repetitions ({who} `{}`)", arm.arm.id);
    let Some(d) = arm
        .arm
        .speech
        .as_ref()
        .and_then(|s| s.quality.determinism.as_ref())
    else {
        return not_evaluated(name, "count", "no transcripts to compare");
    };
    if d.fixtures == 0 || d.single_repetition.len() == d.fixtures {
        return not_evaluated(
            name,
            "count",
            "every fixture ran once: determinism needs repetitions ≥ 2",
        );
    }
    let mut c = at_most(check(name, "count"), d.failures.len() as f64, 0.0);
    c.evidence
        .push(arm.at("/speech/quality/determinism/failures"));
    c.note = match d.failures.first() {
        Some(f) => format!(
            "fixture `{}` repetition {} differs from repetition {}",
            f.fixture_id, f.repetition_b, f.repetition_a
        ),
        None => format!("{} fixtures, every repetition identical", d.fixtures),
    };
    c
}

fn parity(ctx: &Context) -> Vec<Check> {
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let name = format!("exact outputs against `{}`", control.arm.id);
    let found = ctx
        .receipt
        .comparisons
        .iter()
        .enumerate()
        .find(|(_, c)| c.arm == ctx.arm.arm.id && c.control == control.arm.id);
    let exact = match found {
        None => not_evaluated(
            &name,
            "count",
            "the receipt has no comparison with the control",
        ),
        Some((_, cmp)) => match &cmp.parity {
            Err(e) => not_evaluated(&name, "count", format!("outputs cannot be compared: {e}")),
            Ok(p) if p.fixtures_compared == 0 => {
                not_evaluated(&name, "count", "no fixture was run by both arms")
            }
            Ok(p) => {
                let differing = p.mismatches.len() + p.only_in_a.len() + p.only_in_b.len();
                let mut c = at_most(check(&name, "count"), differing as f64, 0.0);
                c.evidence.push(Evidence {
                    file: files::RECEIPT.to_string(),
                    pointer: format!("/comparisons/{}/parity", found.map_or(0, |f| f.0)),
                });
                c.note = match p.mismatches.first() {
                    Some(m) => format!(
                        "{} of {} fixtures differ; first: `{}`, {:?}",
                        p.mismatches.len(),
                        p.fixtures_compared,
                        m.fixture_id,
                        m.differences.first()
                    ),
                    None if differing > 0 => format!(
                        "fixtures run by one arm only: {:?} / {:?}",
                        p.only_in_a, p.only_in_b
                    ),
                    None => format!(
                        "{} fixtures: token IDs, EOT, stop reason and text bytes equal",
                        p.fixtures_compared
                    ),
                };
                c
            }
        },
    };
    vec![
        exact,
        determinism_check("arm", ctx.arm),
        determinism_check("control", *control),
    ]
}
