//! `quality`: word error rate per category against the control, and QoI
//! (the share of fixtures no worse than the control's).

use super::Check;
use super::context::{Context, Located, at_least, at_most, check, not_evaluated};
use super::evaluate::Judge;
use crate::gate_spec::QualityGate;

impl Judge for QualityGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        quality(ctx, self)
    }
}

fn quality(ctx: &Context, g: &QualityGate) -> Vec<Check> {
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let wer = |a: &Located| {
        a.arm
            .speech
            .as_ref()
            .and_then(|s| s.quality.wer.as_ref())
            .cloned()
    };
    let (Some(aw), Some(cw)) = (wer(&ctx.arm), wer(control)) else {
        return vec![not_evaluated(
            "WER per category",
            "ratio",
            "the arm or its control has no WER report",
        )];
    };
    let mut checks = Vec::new();
    if let Some(min) = g.min_qoi {
        checks.push(qoi(ctx, min));
    }
    let Some(wer_delta) = g.wer_delta else {
        checks.extend(exact(ctx, control, g, &aw, &cw));
        return checks;
    };
    for (ci, cc) in cw.categories.iter().enumerate() {
        let Some(cval) = cc.wer else { continue }; // no reference words (silence)
        let name = format!("WER `{}`", cc.category);
        let Some((ai, ac)) = aw
            .categories
            .iter()
            .enumerate()
            .find(|(_, a)| a.category == cc.category)
        else {
            checks.push(not_evaluated(
                name,
                "ratio",
                "the arm has no slice of this category",
            ));
            continue;
        };
        let Some(aval) = ac.wer else {
            checks.push(not_evaluated(
                name,
                "ratio",
                "the arm's slices have no words",
            ));
            continue;
        };
        let mut c = check(name, "ratio");
        c.control = Some(cval);
        c.evidence = vec![
            ctx.arm
                .at(&format!("/speech/quality/wer/categories/{ai}/wer")),
            control.at(&format!("/speech/quality/wer/categories/{ci}/wer")),
        ];
        // Edits are integers over the same words: compare with a hair of slack
        // for the float sum only.
        let mut c = at_most(c, aval, cval + wer_delta + 1e-12);
        c.threshold = Some(cval + wer_delta);
        c.note = format!("control + {wer_delta}");
        checks.push(c);
    }
    checks.extend(exact(ctx, control, g, &aw, &cw));
    if checks.is_empty() {
        checks.push(not_evaluated(
            "WER per category",
            "ratio",
            "no category with reference words",
        ));
    }
    checks
}

/// QoI over every fixture both arms scored, at least `min`.
fn qoi(ctx: &Context, min: f64) -> Check {
    let name = "QoI: share of fixtures no worse than the control";
    let Some(q) = ctx
        .arm
        .arm
        .speech
        .as_ref()
        .and_then(|s| s.quality.qoi.as_ref())
    else {
        return not_evaluated(
            name,
            "ratio",
            "the arm has no QoI against its control (see its quality errors)",
        );
    };
    let Some(value) = q.qoi else {
        return not_evaluated(name, "ratio", "the arms scored no fixture in common");
    };
    let mut c = at_least(check(name, "ratio"), value, min);
    c.evidence = vec![ctx.arm.at("/speech/quality/qoi/qoi")];
    let worse: Vec<&str> = q.worse.iter().map(|w| w.fixture_id.as_str()).collect();
    c.note = format!(
        "{} of {} fixtures no worse; worse: {}",
        q.no_worse,
        q.fixtures,
        if worse.is_empty() {
            "none".to_string()
        } else {
            worse.join(", ")
        }
    );
    c
}

/// The `exact_categories` checks: every slice's normalised words as the control's.
fn exact(
    ctx: &Context,
    control: &Located,
    g: &QualityGate,
    aw: &::quality::WerReport,
    cw: &::quality::WerReport,
) -> Vec<Check> {
    let mut checks = Vec::new();
    for category in &g.exact_categories {
        let name = format!("`{category}` words exactly as the control");
        let slices = |w: &::quality::WerReport| {
            w.slices
                .iter()
                .enumerate()
                .filter(|(_, s)| &s.category == category)
                .map(|(i, s)| (s.fixture_id.clone(), (i, s.hypothesis_normalised.clone())))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let (a, c) = (slices(aw), slices(cw));
        if c.is_empty() {
            checks.push(not_evaluated(
                name,
                "count",
                "the control has no slice of this category",
            ));
            continue;
        }
        let differing: Vec<&String> = c
            .iter()
            .filter(|(id, (_, words))| a.get(*id).map(|(_, w)| w) != Some(words))
            .map(|(id, _)| id)
            .collect();
        let mut chk = at_most(check(name, "count"), differing.len() as f64, 0.0);
        chk.evidence = vec![ctx.arm.at("/speech/quality/wer/slices")];
        chk.evidence.push(control.at("/speech/quality/wer/slices"));
        chk.note = if differing.is_empty() {
            format!("{} slices equal after normalisation", c.len())
        } else {
            format!("slices that differ or are missing: {differing:?}")
        };
        checks.push(chk);
    }
    checks
}
