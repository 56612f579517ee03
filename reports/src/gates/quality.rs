//! `quality`: word error rate per category against the control.

use super::Check;
use super::context::{Context, Located, at_most, check, not_evaluated};
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
        let mut c = at_most(c, aval, cval + g.wer_delta + 1e-12);
        c.threshold = Some(cval + g.wer_delta);
        c.note = format!("control + {}", g.wer_delta);
        checks.push(c);
    }
    for category in &g.exact_categories {
        let name = format!("`{category}` words exactly as the control");
        let slices = |w: &crate::quality::WerReport| {
            w.slices
                .iter()
                .enumerate()
                .filter(|(_, s)| &s.category == category)
                .map(|(i, s)| (s.fixture_id.clone(), (i, s.hypothesis_normalised.clone())))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let (a, c) = (slices(&aw), slices(&cw));
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
    if checks.is_empty() {
        checks.push(not_evaluated(
            "WER per category",
            "ratio",
            "no category with reference words",
        ));
    }
    checks
}
