//! A whisper soak on the long-form input: the worker composes it from the
//! slices, checks its digest, and runs it as one request. On the real
//! tiny.en model (built into the cache by `memqual soak` when missing).
//!
//! The full 730 s input takes minutes per pass on a 2-core machine, so the
//! test uses a 20 s cut of the same recipe (`long_form_s = 20`); the 730 s
//! input's digest and length are pinned by the harness's unit tests.

use crate::common::*;
use worker_contract::WorkerSpec;

#[test]
fn a_long_form_soak_request_runs_end_to_end_on_tiny_en() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_protocol(
        tmp.path(),
        &format!(
            "[sampling]\nperiod_ms = 50\n[[arm]]\nid = \"long\"\n[arm.whisper]\nmodel = \"tiny.en\"\n\
             long_form = \"soak\"\nlong_form_s = 20\nwarmup = 0\nidle_s = 0.2\n\
             [soak]\nwarmup_requests = 0\nmin_points = 3\nsettle_ms = 50\n{LENIENT_ADMISSION}"
        ),
    );
    let dir = tmp.path().join("run");
    let out = memqual_soak(&p, 1, &dir, None);
    // One request is too few to judge growth: inconclusive, never a pass.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = receipt(&dir);
    let arm = &r.arms[0];
    assert_eq!(
        arm.status,
        reports::record::ArmStatus::Completed,
        "{:?}",
        arm.failure
    );
    let Some(WorkerSpec::Whisper(spec)) = arm.spec.as_ref().map(|s| &s.worker) else {
        panic!("no whisper spec in the receipt");
    };
    assert!(spec.fixtures.is_empty());
    let long = spec.long_form.as_ref().unwrap();
    assert_eq!((long.recipe.as_str(), long.target_s), ("soak", 20));
    assert_eq!(long.duration_ms, 20_000);
    assert_eq!(long.samples_sha256.len(), 64);

    let speech = arm.speech.as_ref().unwrap();
    assert_eq!(speech.transcripts.len(), 1);
    let t = &speech.transcripts[0].result;
    assert_eq!(t.fixture_id, "long_form:soak");
    assert_eq!(t.audio_ms, 20_000);
    assert!(t.eot, "{t:?}");
    // The composed input's reference is known, so WER is computed on it.
    let wer = speech.quality.wer.as_ref().unwrap();
    assert!(
        wer.categories.iter().any(|c| c.category == "long_form"),
        "{wer:?}"
    );

    let s = arm.stability.as_ref().unwrap();
    assert_eq!(s.requests, 1);
    assert_eq!(s.stable, None);
    assert_eq!(s.settled_series.last().unwrap().points, 1);
}
