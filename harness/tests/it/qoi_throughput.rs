//! QoI against the control and decode throughput, on the real binary:
//! tiny.en Q4_0 against its F16 original on a few speech fixtures. The QoI
//! figure is recounted here from the per-fixture edits in the receipt; the
//! throughput figures from the per-request timings; a `throughput` gate on
//! a calibration arm is refused before anything runs.

use crate::common::*;
use reports::gates::Outcome;
use reports::record::ArmStatus;
use std::collections::BTreeMap;

/// Two worse-prone fixtures and two easy ones, all short (3 to 8 s): on
/// tiny.en, Q4_0 changes the words of some and not of others.
const FIXTURES: &str = r#"["s3", "numbers-01", "clean-01", "noise-01"]"#;

/// Every QoI level four fixtures can give: each gate's `min_qoi` is one of
/// them, so the figure decides which pass and which fail.
const QOI_LEVELS: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

#[test]
fn tiny_en_q4_0_against_f16_qoi_is_a_hand_count_and_the_gates_follow_it() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = tiny_en();
    let q4 = tmp.path().join("tiny.en-q4_0.bin");
    let out = memqual(&[
        "artifact",
        "quantize",
        tiny.to_str().unwrap(),
        q4.to_str().unwrap(),
        "--type",
        "q4_0",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let arm = |id: &str, model: &str| {
        format!(
            "[[arm]]\nid = \"{id}\"\n{control}[arm.whisper]\nmodel = \"{model}\"\n\
             fixtures = {FIXTURES}\nthreads = 2\nrepetitions = 1\nwarmup = 0\nidle_s = 0\n",
            control = if id == "f16" {
                ""
            } else {
                "control = \"f16\"\n"
            }
        )
    };
    let mut body = arm("f16", tiny.to_str().unwrap());
    body.push_str(&arm("q4_0", q4.to_str().unwrap()));
    for level in QOI_LEVELS {
        body.push_str(&format!(
            "[[arm.gate]]\nkind = \"quality\"\nmin_qoi = {level:?}\n"
        ));
    }
    // Loose: any decode at all passes. Impossible: nothing decodes a million
    // tokens a second, nor a second of audio in a microsecond.
    body.push_str(
        "[[arm.gate]]\nkind = \"throughput\"\nmin_tokens_per_s = 0.01\nmax_real_time_factor = 1000.0\n\
         [[arm.gate]]\nkind = \"throughput\"\nmin_tokens_per_s = 1000000.0\nmax_real_time_factor = 0.000001\n",
    );
    let r = run_protocol_body("run", &body, &["--json"]);
    // Gates fail (the impossible ones, the QoI levels above the figure, and
    // validity under --force on a busy host), so the run exits 1.
    assert_eq!(r.out.status.code(), Some(1), "{}", stderr(&r.out));
    let receipt = receipt(&r.dir);
    let (f16, q) = (&receipt.arms[0], &receipt.arms[1]);
    assert_eq!(f16.status, ArmStatus::Completed, "{:?}", f16.failure);
    assert_eq!(q.status, ArmStatus::Completed, "{:?}", q.failure);

    // QoI by hand: per fixture, the candidate's edits against the control's,
    // from each arm's own WER slices.
    let edits = |a: &reports::receipt::ArmReceipt| -> BTreeMap<String, (String, u64)> {
        let w = a.speech.as_ref().unwrap().quality.wer.as_ref().unwrap();
        w.slices
            .iter()
            .map(|s| {
                let c = s.counts;
                (
                    s.fixture_id.clone(),
                    (
                        s.category.clone(),
                        c.substitutions + c.deletions + c.insertions,
                    ),
                )
            })
            .collect()
    };
    let (arm_edits, control_edits) = (edits(q), edits(f16));
    assert_eq!(arm_edits.len(), 4);
    let mut worse_by_hand: Vec<&str> = arm_edits
        .iter()
        .filter(|(id, (_, e))| *e > control_edits[*id].1)
        .map(|(id, _)| id.as_str())
        .collect();
    worse_by_hand.sort();
    let no_worse_by_hand = 4 - worse_by_hand.len();
    let figure = no_worse_by_hand as f64 / 4.0;

    let qoi = q.speech.as_ref().unwrap().quality.qoi.as_ref().unwrap();
    assert_eq!(qoi.control, "f16");
    assert_eq!((qoi.no_worse as usize, qoi.fixtures), (no_worse_by_hand, 4));
    assert_eq!(qoi.qoi, Some(figure));
    let mut named: Vec<&str> = qoi.worse.iter().map(|w| w.fixture_id.as_str()).collect();
    named.sort();
    assert_eq!(named, worse_by_hand);
    // A real, non-trivial figure: Q4_0 is worse somewhere and not everywhere.
    assert!(
        0.0 < figure && figure < 1.0,
        "QoI {figure}: {worse_by_hand:?}"
    );
    // Per category, the same count restricted to the category.
    for c in &qoi.categories {
        let (n, ok) = arm_edits
            .iter()
            .filter(|(_, (cat, _))| cat == &c.category)
            .fold((0, 0), |(n, ok), (id, (_, e))| {
                (n + 1, ok + u32::from(*e <= control_edits[id].1))
            });
        assert_eq!((c.fixtures, c.no_worse), (n, ok), "{}", c.category);
    }
    // The control has no control: no QoI there.
    assert!(f16.speech.as_ref().unwrap().quality.qoi.is_none());

    let verdict = receipt
        .gates
        .as_ref()
        .unwrap()
        .arms
        .iter()
        .find(|a| a.arm == "q4_0")
        .unwrap();
    let quality: Vec<(f64, Outcome)> = verdict
        .gates
        .iter()
        .filter(|g| g.kind == "quality")
        .map(|g| {
            let c = &g.checks[0];
            (c.threshold.unwrap(), c.outcome)
        })
        .collect();
    assert_eq!(quality.len(), QOI_LEVELS.len());
    for (threshold, outcome) in quality {
        let expected = if threshold <= figure {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        assert_eq!(outcome, expected, "min_qoi = {threshold} against {figure}");
    }

    // Throughput: the warm figures recounted from each request's timings.
    let speech = q.speech.as_ref().unwrap();
    let t = speech.throughput.as_ref().unwrap();
    assert!(t.unavailable.is_empty(), "{:?}", t.unavailable);
    let warm = t.warm.as_ref().unwrap();
    assert_eq!((t.cold.as_ref().unwrap().requests, warm.requests), (1, 3));
    let rows = &speech.transcripts[1..];
    let decode = |r: &reports::speech::TranscriptRow| r.result.decode.unwrap();
    let tokens: u64 = rows.iter().map(|r| decode(r).tokens_decoded).sum();
    let decode_ns: u64 = rows.iter().map(|r| decode(r).decode_ns.unwrap()).sum();
    let latency_ns: u64 = rows.iter().map(|r| r.latency_ns).sum();
    let audio_ms: u64 = rows.iter().map(|r| r.result.audio_ms).sum();
    assert_eq!(
        warm.tokens_per_s,
        Some(tokens as f64 / (decode_ns as f64 / 1e9))
    );
    assert_eq!(
        warm.real_time_factor,
        Some(latency_ns as f64 / (audio_ms as f64 * 1e6))
    );
    for r in &speech.transcripts {
        let d = decode(r);
        // One 30 s window per short fixture, and at least as many decoded
        // tokens as the output has after the prompt.
        assert_eq!(d.windows, 1, "{}", r.result.fixture_id);
        assert!(d.tokens_decoded >= 1, "{}", r.result.fixture_id);
        assert!(d.fallbacks.is_some());
        // The parts fit inside the call, and the call inside the request.
        let (enc, first, dec) = (
            d.encode_ns.unwrap(),
            d.first_token_ns.unwrap(),
            d.decode_ns.unwrap(),
        );
        assert!(enc <= first && first <= d.full_ns && enc + dec <= d.full_ns);
        assert!(d.full_ns <= r.latency_ns);
    }
    let throughput: Vec<Vec<Outcome>> = verdict
        .gates
        .iter()
        .filter(|g| g.kind == "throughput")
        .map(|g| g.checks.iter().map(|c| c.outcome).collect())
        .collect();
    assert_eq!(
        throughput,
        [
            vec![Outcome::Pass, Outcome::Pass],
            vec![Outcome::Fail, Outcome::Fail]
        ]
    );
    let impossible = &verdict
        .gates
        .iter()
        .filter(|g| g.kind == "throughput")
        .nth(1)
        .unwrap()
        .checks[0];
    assert!(
        impossible.note.contains(
            "the likely cause is a slower compute unit than the one configured (the CPU, 2 threads"
        ),
        "{}",
        impossible.note
    );

    // The outputs: summary.md, report.html, JUnit and BMF carry both.
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    let share = format!("{figure:.3} ({no_worse_by_hand} of 4)");
    assert!(
        summary.contains(&format!("| q4_0 | f16 | {share} |")),
        "{summary}"
    );
    assert!(
        summary.contains("## Decode throughput and fallbacks"),
        "{summary}"
    );
    let html = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(html.contains(&share) && html.contains("decode tokens/s"));
    for name in &worse_by_hand {
        assert!(summary.contains(name) && html.contains(name), "{name}");
    }
}

#[test]
fn a_throughput_gate_on_a_calibration_arm_is_refused_naming_the_gate() {
    let body = "[[arm]]\nid = \"cal\"\n[arm.calibrate]\nplateau = { mib = 1 }\n\
                [[arm.gate]]\nkind = \"throughput\"\nmin_tokens_per_s = 5.0\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
    let err = stderr(&r.out);
    assert!(
        err.contains("arm `cal`: gate `throughput` (gate[0]) judges decoded speech"),
        "{err}"
    );
    assert!(!r.dir.exists(), "nothing ran");
    // Out-of-range keys are refused by name.
    for (gate, key) in [
        ("kind = \"quality\"\nmin_qoi = 1.5", "min_qoi"),
        (
            "kind = \"throughput\"\nmin_tokens_per_s = 0.0",
            "min_tokens_per_s",
        ),
        (
            "kind = \"throughput\"\nmax_real_time_factor = -1.0",
            "max_real_time_factor",
        ),
    ] {
        let body = format!(
            "[[arm]]\nid = \"c\"\n[arm.calibrate]\n[[arm]]\nid = \"w\"\ncontrol = \"c\"\n\
             [arm.whisper]\nmodel = \"tiny.en\"\nfixtures = [\"s1\"]\n[[arm.gate]]\n{gate}\n"
        );
        let r = run_protocol_body("run", &body, &[]);
        assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
        let err = stderr(&r.out);
        assert!(
            err.contains(&format!("gate[0].{key}")) || err.contains(&format!("{key} = ")),
            "{err}"
        );
    }
}
