//! Known answers: the tiny.en transcripts of the four reference sentences
//! and the WERs measured for them (shared/reference/whisper-model-formats.md
//! §9), plus hand-built parity, determinism and silence cases.

use super::*;

const S1: &str = "Hello, my name is Sarah Johnson and I work at the hospital.";
const S2: &str = "The meeting starts at three thirty and we expect forty two people.";
const S3: &str = "I do not think we should approve the budget this year.";
const S4: &str = "Please send the report to Michael before Friday morning.";

fn reference(id: &str, category: &str, text: &str) -> Reference {
    Reference {
        fixture_id: id.into(),
        category: category.into(),
        text: text.into(),
    }
}

fn sentence_references() -> Vec<Reference> {
    vec![
        reference("s1", "names", S1),
        reference("s2", "numbers", S2),
        reference("s3", "negation", S3),
        reference("s4", "names", S4),
        reference("s1-s4", "full_span", &[S1, S2, S3, S4].join(" ")),
    ]
}

fn result(id: &str, repetition: u32, text: &str) -> Transcription {
    Transcription {
        fixture_id: id.into(),
        repetition,
        token_ids: vec![50257, 50362, 15496, 11, 616, 50256],
        eot: true,
        stop_reason: "eot".into(),
        text: text.into(),
    }
}

/// tiny.en F16 on the separate clips.
fn tiny_f16_clips() -> Vec<Transcription> {
    vec![
        result(
            "s1",
            0,
            " Hello, my name is Sarah Johnson and I work at the past, did all.",
        ),
        result(
            "s2",
            0,
            " The meetings start at 3.30 and we expect 42 people.",
        ),
        result("s3", 0, &format!(" {S3}")),
        result("s4", 0, &format!(" {S4}")),
    ]
}

/// tiny.en Q5_0 on the separate clips: s1 differs from F16.
fn tiny_q5_clips() -> Vec<Transcription> {
    let mut clips = tiny_f16_clips();
    clips[0].text = " Hello, my name is Sarah Johnson, and I work at the past.".into();
    clips
}

/// tiny.en on the concatenation: everything right except "meetings start"
/// and the digits; Q5_0 adds two commas.
fn tiny_concatenated(q5: bool) -> Transcription {
    let comma = if q5 { "," } else { "" };
    result(
        "s1-s4",
        0,
        &format!(
            " Hello, my name is Sarah Johnson{comma} and I work at the hospital. The meetings \
             start at 3.30{comma} and we expect 42 people. {S3} {S4}"
        ),
    )
}

fn score(results: &[Transcription], normalisation: Normalisation) -> WerReport {
    wer_report(&sentence_references(), results, normalisation).unwrap()
}

fn total(report: &WerReport) -> (u64, u64) {
    let edits = report.slices.iter().map(|s| s.counts.edits()).sum();
    let words = report.slices.iter().map(|s| s.counts.reference_words).sum();
    (edits, words)
}

#[test]
fn tiny_f16_concatenated_is_2_of_44_with_numbers_normalised() {
    let report = score(&[tiny_concatenated(false)], Normalisation::Standard);
    assert_eq!(report.slices.len(), 1);
    let slice = &report.slices[0];
    assert_eq!(slice.fixture_id, "s1-s4");
    assert_eq!(
        slice.counts,
        EditCounts {
            substitutions: 2,
            deletions: 0,
            insertions: 0,
            reference_words: 44
        }
    );
    assert_eq!(slice.wer, Some(2.0 / 44.0));
    assert_eq!(report.categories.len(), 1);
    assert_eq!(report.categories[0].category, "full_span");
    assert_eq!(report.categories[0].wer, Some(2.0 / 44.0));
}

#[test]
fn tiny_f16_concatenated_is_6_of_44_with_digits_kept() {
    let report = score(&[tiny_concatenated(false)], Normalisation::KeepDigits);
    assert_eq!(total(&report), (6, 44));
}

#[test]
fn tiny_f16_clips_are_5_and_9_of_44() {
    let normalised = score(&tiny_f16_clips(), Normalisation::Standard);
    assert_eq!(total(&normalised), (5, 44));
    let raw = score(&tiny_f16_clips(), Normalisation::KeepDigits);
    assert_eq!(total(&raw), (9, 44));

    // "the hospital" → "the past, did all": one substitution, two insertions.
    let s1 = &normalised.slices[0];
    assert_eq!(
        (
            s1.counts.substitutions,
            s1.counts.deletions,
            s1.counts.insertions
        ),
        (1, 0, 2)
    );
    assert_eq!(
        normalised.slices[1].hypothesis_normalised,
        "the meetings start at three thirty and we expect forty two people"
    );
}

#[test]
fn categories_sum_edits_over_reference_words() {
    let report = score(&tiny_f16_clips(), Normalisation::Standard);
    let by_name: Vec<(&str, u32, u64, u64)> = report
        .categories
        .iter()
        .map(|c| {
            (
                c.category.as_str(),
                c.slices,
                c.counts.edits(),
                c.counts.reference_words,
            )
        })
        .collect();
    // names = s1 (12 words, 3 edits) + s4 (9 words, 0 edits).
    assert_eq!(
        by_name,
        vec![
            ("names", 2, 3, 21),
            ("numbers", 1, 2, 12),
            ("negation", 1, 0, 11)
        ]
    );
    assert_eq!(report.categories[0].wer, Some(3.0 / 21.0));
}

#[test]
fn tiny_q5_is_3_and_7_of_44_per_clip_and_2_of_44_concatenated() {
    let clips = tiny_q5_clips();
    assert_eq!(total(&score(&clips, Normalisation::Standard)), (3, 44));
    assert_eq!(total(&score(&clips, Normalisation::KeepDigits)), (7, 44));
    let all = [tiny_concatenated(true)];
    assert_eq!(total(&score(&all, Normalisation::Standard)), (2, 44));
    assert_eq!(total(&score(&all, Normalisation::KeepDigits)), (6, 44));
}

#[test]
fn wer_uses_the_lowest_repetition_and_refuses_unknown_fixtures() {
    let references = sentence_references();
    let mut results = vec![result("s3", 4, " I do think so."), result("s3", 1, S3)];
    let report = wer_report(&references, &results, Normalisation::Standard).unwrap();
    assert_eq!(report.slices[0].repetition, 1);
    assert_eq!(report.slices[0].counts.edits(), 0);

    results.push(result("s9", 0, "hello"));
    assert_eq!(
        wer_report(&references, &results, Normalisation::Standard),
        Err(QualityError::NoReference {
            fixture_id: "s9".into()
        })
    );
    let mut doubled = references.clone();
    doubled.push(reference("s2", "numbers", S2));
    assert_eq!(
        wer_report(&doubled, &[], Normalisation::Standard),
        Err(QualityError::DuplicateReference {
            fixture_id: "s2".into()
        })
    );
}

#[test]
fn identical_arms_are_in_exact_parity() {
    let report = parity(&tiny_f16_clips(), &tiny_f16_clips()).unwrap();
    assert!(report.is_exact());
    assert_eq!(report.fixtures_compared, 4);
}

#[test]
fn parity_names_each_differing_field_and_its_first_position() {
    let a = tiny_f16_clips();
    let mut b = tiny_q5_clips();
    // s1: a token differs at index 4, the text at byte 32 ("," vs " and").
    b[0].token_ids[4] = 11;
    // s2: one token more, no EOT, another stop reason.
    b[1].token_ids.push(13);
    b[1].eot = false;
    b[1].stop_reason = "max_tokens".into();
    b.remove(3);

    let report = parity(&a, &b).unwrap();
    assert!(!report.is_exact());
    assert_eq!(report.fixtures_compared, 3);
    assert_eq!(report.only_in_a, vec!["s4".to_string()]);
    assert!(report.only_in_b.is_empty());
    assert_eq!(report.mismatches.len(), 2);

    let s1 = &report.mismatches[0];
    assert_eq!(s1.fixture_id, "s1");
    assert_eq!(
        s1.differences,
        vec![
            Difference::TokenIds {
                index: 4,
                a: Some(616),
                b: Some(11),
                a_count: 6,
                b_count: 6
            },
            Difference::Text {
                byte_offset: 32,
                a_from: " and I work at the past, did all".into(),
                b_from: ", and I work at the past.".into()
            },
        ]
    );

    let s2 = &report.mismatches[1];
    assert_eq!(
        s2.differences,
        vec![
            Difference::TokenIds {
                index: 6,
                a: None,
                b: Some(13),
                a_count: 6,
                b_count: 7
            },
            Difference::Eot { a: true, b: false },
            Difference::StopReason {
                a: "eot".into(),
                b: "max_tokens".into()
            },
        ]
    );
}

#[test]
fn a_text_difference_inside_a_multibyte_character_reports_its_byte() {
    let a = result("x", 0, "café");
    let b = result("x", 0, "cafè");
    // 'é' is C3 A9 and 'è' is C3 A8: the first differing byte is the second one.
    assert_eq!(
        differences(&a, &b),
        vec![Difference::Text {
            byte_offset: 4,
            a_from: "\u{fffd}".into(),
            b_from: "\u{fffd}".into()
        }]
    );
}

#[test]
fn a_repetition_that_differs_is_a_named_failure() {
    let mut results = vec![
        result("s3", 0, S3),
        result("s3", 1, S3),
        result("s3", 2, S3),
        result("s4", 0, S4),
    ];
    results[2].token_ids[2] = 40;
    results[2].text = "I do think we should approve the budget this year.".into();

    let report = determinism(&results).unwrap();
    assert!(!report.is_deterministic());
    assert_eq!((report.fixtures, report.results), (2, 4));
    assert_eq!(report.single_repetition, vec!["s4".to_string()]);
    assert_eq!(report.failures.len(), 1);
    let failure = &report.failures[0];
    assert_eq!(
        (
            failure.fixture_id.as_str(),
            failure.repetition_a,
            failure.repetition_b
        ),
        ("s3", 0, 2)
    );
    assert_eq!(
        failure.differences[0],
        Difference::TokenIds {
            index: 2,
            a: Some(15496),
            b: Some(40),
            a_count: 6,
            b_count: 6
        }
    );
    assert!(matches!(
        failure.differences[1],
        Difference::Text { byte_offset: 5, .. }
    ));

    results[2] = result("s3", 2, S3);
    assert!(determinism(&results).unwrap().is_deterministic());
}

#[test]
fn a_repeated_repetition_number_is_refused() {
    let results = [result("s3", 1, S3), result("s3", 1, S3)];
    let expected: Result<(), QualityError> = Err(QualityError::DuplicateResult {
        fixture_id: "s3".into(),
        repetition: 1,
    });
    assert_eq!(determinism(&results).map(|_| ()), expected);
    assert_eq!(parity(&results, &[]).map(|_| ()), expected.clone());
    assert_eq!(
        silence_false_alarms(&sentence_references(), &results).map(|_| ()),
        expected
    );
}

#[test]
fn words_on_silence_or_noise_are_false_alarms() {
    let references = vec![
        reference("silence-01", "silence", ""),
        reference("noise-01", "noise", ""),
        reference("s3", "negation", S3),
    ];
    let results = vec![
        result("silence-01", 0, " [BLANK_AUDIO]"),
        result("silence-01", 1, " you"),
        result("noise-01", 0, " Thank you."),
        result("noise-01", 1, ""),
        result("s3", 0, S3),
    ];
    let report = silence_false_alarms(&references, &results).unwrap();
    assert_eq!(report.results_checked, 4);
    assert_eq!(
        report.false_alarms,
        vec![
            FalseAlarm {
                fixture_id: "silence-01".into(),
                category: "silence".into(),
                repetition: 1,
                text: " you".into(),
                normalised: "you".into(),
            },
            FalseAlarm {
                fixture_id: "noise-01".into(),
                category: "noise".into(),
                repetition: 0,
                text: " Thank you.".into(),
                normalised: "thank you".into(),
            },
        ]
    );
}

#[test]
fn silence_slices_have_no_wer_but_count_their_words() {
    let references = [reference("silence-01", "silence", "")];
    let report = wer_report(
        &references,
        &[result("silence-01", 0, " you")],
        Normalisation::Standard,
    )
    .unwrap();
    assert_eq!(report.slices[0].wer, None);
    assert_eq!(report.slices[0].counts.insertions, 1);
    assert_eq!(report.categories[0].wer, None);
}

#[test]
fn reports_serialise_with_field_tags() {
    let report = parity(
        &[result("s1", 0, "a")],
        &[Transcription {
            eot: false,
            ..result("s1", 0, "a")
        }],
    )
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["mismatches"][0]["differences"][0],
        serde_json::json!({"field": "eot", "a": true, "b": false})
    );
    let back: ParityReport = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}
