//! Quality of inference (QoI) against the control: the share of fixtures
//! on which the arm's transcript is no worse than the control's.
//!
//! The measure follows the one WhisperKit's evaluations publish for a
//! compressed model against its reference model ("QoI: the share of clips
//! whose WER is no worse than the reference's"). Here a fixture counts
//! when both arms scored it with the same normalisation and the same
//! normalised reference; it is *no worse* when the arm's edits are at
//! most the control's. Over the same reference words, fewer or equal edits
//! is exactly a WER no greater, compared as integers so no rounding
//! decides a tie. A slice without reference words (silence, noise) has no
//! WER; its edits are the words the model made up, so it counts too: no
//! worse means no more invented words than the control.
//!
//! An arm whose outputs equal the control's has the same edits on every
//! fixture, so its QoI is 1 by construction.

use serde::{Deserialize, Serialize};

use super::{Normalisation, SliceWer, WerReport};

/// The arm against its control, fixture by fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QoiReport {
    /// The control arm's id.
    pub control: String,
    /// How both arms' references and transcripts were normalised.
    pub normalisation: Normalisation,
    /// Fixtures both arms scored against the same normalised reference.
    pub fixtures: u32,
    /// Of those, the fixtures on which the arm's edits are at most the control's.
    pub no_worse: u32,
    /// `no_worse / fixtures`; `None` without a fixture in common.
    pub qoi: Option<f64>,
    /// The same per category, in order of first appearance in the arm's slices.
    pub categories: Vec<CategoryQoi>,
    /// The fixtures on which the arm did worse than the control, in the
    /// arm's slice order.
    pub worse: Vec<WorseFixture>,
    /// Fixtures left out, with the reason: scored by one arm only, or
    /// against different normalised references.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// QoI of one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CategoryQoi {
    /// The category, as the fixture manifest names it.
    pub category: String,
    /// Fixtures of the category both arms scored.
    pub fixtures: u32,
    /// Of those, the fixtures on which the arm was no worse.
    pub no_worse: u32,
    /// `no_worse / fixtures`; `None` without a fixture.
    pub qoi: Option<f64>,
}

/// A fixture on which the arm made more edits than the control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorseFixture {
    /// The fixture's id.
    pub fixture_id: String,
    /// Its category.
    pub category: String,
    /// The arm's edits (substitutions + deletions + insertions).
    pub edits: u64,
    /// The control's edits.
    pub control_edits: u64,
    /// The arm's WER; `None` without reference words.
    pub wer: Option<f64>,
    /// The control's WER; `None` without reference words.
    pub control_wer: Option<f64>,
}

/// Why QoI cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QoiError {
    /// The two reports normalised differently, so their edits differ in kind.
    #[error(
        "the arm's WER uses {arm:?} normalisation and the control's {control:?}: \
         QoI compares fixtures scored the same way only"
    )]
    Normalisation {
        /// The arm's normalisation.
        arm: Normalisation,
        /// The control's normalisation.
        control: Normalisation,
    },
}

fn share(no_worse: u32, fixtures: u32) -> Option<f64> {
    (fixtures > 0).then(|| f64::from(no_worse) / f64::from(fixtures))
}

/// QoI of `arm` against `control` (both from [`super::wer_report`]);
/// `control_id` names the control in the report.
pub fn qoi(control_id: &str, arm: &WerReport, control: &WerReport) -> Result<QoiReport, QoiError> {
    if arm.normalisation != control.normalisation {
        return Err(QoiError::Normalisation {
            arm: arm.normalisation,
            control: control.normalisation,
        });
    }
    let control_slice =
        |id: &str| -> Option<&SliceWer> { control.slices.iter().find(|s| s.fixture_id == id) };
    let mut report = QoiReport {
        control: control_id.to_string(),
        normalisation: arm.normalisation,
        fixtures: 0,
        no_worse: 0,
        qoi: None,
        categories: Vec::new(),
        worse: Vec::new(),
        left_out: Vec::new(),
    };
    for a in &arm.slices {
        let Some(c) = control_slice(&a.fixture_id) else {
            report
                .left_out
                .push(format!("{}: the control did not score it", a.fixture_id));
            continue;
        };
        if a.reference_normalised != c.reference_normalised {
            report.left_out.push(format!(
                "{}: the arms scored it against different references",
                a.fixture_id
            ));
            continue;
        }
        let no_worse = a.counts.edits() <= c.counts.edits();
        let category = match report
            .categories
            .iter_mut()
            .position(|k| k.category == a.category)
        {
            Some(i) => &mut report.categories[i],
            None => {
                report.categories.push(CategoryQoi {
                    category: a.category.clone(),
                    fixtures: 0,
                    no_worse: 0,
                    qoi: None,
                });
                let last = report.categories.len() - 1;
                &mut report.categories[last]
            }
        };
        category.fixtures += 1;
        category.no_worse += u32::from(no_worse);
        category.qoi = share(category.no_worse, category.fixtures);
        report.fixtures += 1;
        report.no_worse += u32::from(no_worse);
        if !no_worse {
            report.worse.push(WorseFixture {
                fixture_id: a.fixture_id.clone(),
                category: a.category.clone(),
                edits: a.counts.edits(),
                control_edits: c.counts.edits(),
                wer: a.wer,
                control_wer: c.wer,
            });
        }
    }
    for c in &control.slices {
        if !arm.slices.iter().any(|a| a.fixture_id == c.fixture_id) {
            report
                .left_out
                .push(format!("{}: the arm did not score it", c.fixture_id));
        }
    }
    report.qoi = share(report.no_worse, report.fixtures);
    Ok(report)
}

/// QoI as one line of text: `0.875 (7 of 8)`; `–` without a fixture.
pub fn share_text(qoi: Option<f64>, no_worse: u32, fixtures: u32) -> String {
    qoi.map_or("–".into(), |q| {
        format!("{q:.3} ({no_worse} of {fixtures})")
    })
}

/// Per category, `category 0.500 (1 of 2)`, joined by `; `.
pub fn categories_text(q: &QoiReport) -> String {
    q.categories
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c.category,
                share_text(c.qoi, c.no_worse, c.fixtures)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The worse fixtures with both edit counts: `n3 (2 vs 1 edits)`, or `none`.
pub fn worse_text(q: &QoiReport) -> String {
    if q.worse.is_empty() {
        return "none".into();
    }
    q.worse
        .iter()
        .map(|w| {
            format!(
                "{} ({} vs {} edits)",
                w.fixture_id, w.edits, w.control_edits
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `summary.md` section: each arm's QoI against its control.
pub fn markdown(with: &[(&str, &QoiReport)]) -> String {
    use std::fmt::Write;
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "\n## Quality of inference (QoI) against the control\n");
    let _ = writeln!(
        out,
        "QoI is the share of fixtures on which the arm's WER is no greater than its control's (same fixtures, same normalisation; on slices without speech, no more invented words).\n"
    );
    let _ = writeln!(
        out,
        "| arm | control | QoI | per category | worse fixtures |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (id, q) in with {
        let _ = writeln!(
            out,
            "| {id} | {} | {} | {} | {} |",
            q.control,
            share_text(q.qoi, q.no_worse, q.fixtures),
            categories_text(q),
            worse_text(q)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reference, Transcription, wer_report};

    fn reference(id: &str, category: &str, text: &str) -> Reference {
        Reference {
            fixture_id: id.into(),
            category: category.into(),
            text: text.into(),
        }
    }

    fn said(id: &str, text: &str) -> Transcription {
        Transcription {
            fixture_id: id.into(),
            repetition: 0,
            token_ids: Vec::new(),
            eot: true,
            stop_reason: "eot".into(),
            text: text.into(),
        }
    }

    fn refs() -> Vec<Reference> {
        vec![
            reference("a", "plain", "the cat sat on the mat"),
            reference("b", "plain", "one two three"),
            reference("c", "numbers", "forty two"),
            reference("d", "noise", ""),
        ]
    }

    fn report(outputs: &[(&str, &str)]) -> WerReport {
        let results: Vec<Transcription> = outputs.iter().map(|(id, t)| said(id, t)).collect();
        wer_report(&refs(), &results, Normalisation::Standard).unwrap()
    }

    #[test]
    fn hand_counted_shares_and_the_worse_fixtures_by_name() {
        // Control: a has 1 edit (dog), b 0, c 0, d 0 (silence kept silent).
        let control = report(&[
            ("a", "The dog sat on the mat."),
            ("b", "One, two, three."),
            ("c", "42"),
            ("d", ""),
        ]);
        // Arm: a 1 edit (a different word: still no worse), b 1 edit
        // (worse), c 0 (equal), d 1 invented word (worse).
        let arm = report(&[
            ("a", "The cat sat on the hat."),
            ("b", "One, two, tree."),
            ("c", "forty-two"),
            ("d", "Thank you."),
        ]);
        let q = qoi("ctl", &arm, &control).unwrap();
        // By hand: a no worse, b worse, c no worse, d worse → 2 of 4.
        assert_eq!((q.no_worse, q.fixtures), (2, 4));
        assert_eq!(q.qoi, Some(0.5));
        let names: Vec<&str> = q.worse.iter().map(|w| w.fixture_id.as_str()).collect();
        assert_eq!(names, ["b", "d"]);
        assert_eq!((q.worse[0].edits, q.worse[0].control_edits), (1, 0));
        assert_eq!(q.worse[0].wer, Some(1.0 / 3.0));
        // "thank you" on silence: two invented words, no WER.
        assert_eq!((q.worse[1].edits, q.worse[1].wer), (2, None));
        let per: Vec<(&str, u32, u32)> = q
            .categories
            .iter()
            .map(|c| (c.category.as_str(), c.no_worse, c.fixtures))
            .collect();
        assert_eq!(per, [("plain", 1, 2), ("numbers", 1, 1), ("noise", 0, 1)]);
        assert!(q.left_out.is_empty());
    }

    #[test]
    fn identical_outputs_score_one_and_better_outputs_count_as_no_worse() {
        let outputs = [("a", "the dog sat"), ("b", "one two"), ("c", "42")];
        let control = report(&outputs);
        let same = qoi("ctl", &report(&outputs), &control).unwrap();
        assert_eq!(same.qoi, Some(1.0));
        assert!(same.worse.is_empty());
        let better = report(&[
            ("a", "the cat sat on the mat"),
            ("b", "one two three"),
            ("c", "42"),
        ]);
        assert_eq!(qoi("ctl", &better, &control).unwrap().qoi, Some(1.0));
    }

    #[test]
    fn fixtures_one_arm_lacks_are_left_out_by_name() {
        let control = report(&[("a", "the cat sat on the mat"), ("b", "one two three")]);
        let arm = report(&[("a", "the cat sat on the mat"), ("c", "41")]);
        let q = qoi("ctl", &arm, &control).unwrap();
        assert_eq!((q.no_worse, q.fixtures), (1, 1));
        assert_eq!(
            q.left_out,
            [
                "c: the control did not score it",
                "b: the arm did not score it"
            ]
        );
        let none = qoi("ctl", &report(&[("c", "x")]), &report(&[("a", "x")])).unwrap();
        assert_eq!((none.fixtures, none.qoi), (0, None));
    }

    #[test]
    fn different_normalisations_are_refused() {
        let control = report(&[("c", "42")]);
        let results = [said("c", "42")];
        let raw = wer_report(&refs(), &results, Normalisation::KeepDigits).unwrap();
        let err = qoi("ctl", &raw, &control).unwrap_err();
        assert!(err.to_string().contains("KeepDigits"), "{err}");
    }
}
