//! `[arm.whisper] cancel`: a request aborted through whisper.cpp's abort
//! callback, on the real tiny.en, leaves nothing behind that changes the
//! next request's output.

use crate::common::*;
use reports::record::ArmStatus;
use worker_contract::{ResultBody, WorkerSpec};

fn arm<'a>(receipt: &'a reports::Receipt, id: &str) -> &'a reports::receipt::ArmReceipt {
    receipt.arms.iter().find(|a| a.id == id).unwrap()
}

/// Token ids of request `id`'s transcript in an arm.
fn tokens(a: &reports::receipt::ArmReceipt, id: u64) -> Vec<i32> {
    let speech = a.speech.as_ref().unwrap();
    let row = speech
        .transcripts
        .iter()
        .find(|t| t.request_id == id)
        .unwrap_or_else(|| panic!("arm {}: no transcript for request {id}", a.id));
    row.result.tokens.clone()
}

#[test]
fn the_request_after_a_cancelled_one_equals_the_clean_run() {
    tiny_en();
    // warmup = 0: the aborted call is the first the state ever runs.
    let arm_body = |id: &str, cancel: &str| {
        format!(
            "[[arm]]\nid = \"{id}\"\n[arm.whisper]\nmodel = \"tiny.en\"\nthreads = 2\nwarmup = 0\n\
             fixtures = [\"s1-s4\", \"s3\", \"clean-01\"]\nidle_s = 0.1\n{cancel}\n"
        )
    };
    let body = [
        arm_body("clean", ""),
        arm_body("cancel-at-start", "cancel = { request = 0, after_ms = 0 }"),
        // Mid-decode on a 15.8 s input; whether the abort lands before the
        // request finishes depends on the machine's speed, so only what
        // follows is asserted.
        arm_body("cancel-mid", "cancel = { request = 0, after_ms = 300 }"),
    ]
    .concat();
    let r = run_protocol_body("run", &body, &["--json"]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    validate_receipt(&r.dir);
    let receipt = receipt(&r.dir);
    let clean = arm(&receipt, "clean");
    assert!(clean.speech.as_ref().unwrap().cancellation.is_none());

    let at_start = arm(&receipt, "cancel-at-start");
    assert_eq!(
        at_start.status,
        ArmStatus::Completed,
        "{:?}",
        at_start.failure
    );
    let report = at_start
        .speech
        .as_ref()
        .unwrap()
        .cancellation
        .clone()
        .unwrap();
    assert!(report.cancelled, "{report:?}");
    assert_eq!(report.fixture_id.as_deref(), Some("s1-s4"));
    // whisper.cpp stops after the first encoder pass: "failed to encode".
    assert_eq!(report.code, Some(-6));
    let abort_ns = report.abort_latency_ns.unwrap();
    assert!(abort_ns > 0 && abort_ns <= report.request_ns.unwrap());
    assert!(report.resident_before_bytes.unwrap() > 0);
    assert_eq!(
        report.resident_delta_bytes.unwrap(),
        report.resident_after_bytes.unwrap() as i64 - report.resident_before_bytes.unwrap() as i64
    );
    // The aborted request has a `cancelled` result and no transcript.
    let results =
        std::fs::read_to_string(r.dir.join("arms/cancel-at-start/results.jsonl")).unwrap();
    let first: worker_contract::RequestResult =
        serde_json::from_str(results.lines().next().unwrap()).unwrap();
    assert!(matches!(first.body, ResultBody::Cancelled(_)), "{first:?}");
    let speech = at_start.speech.as_ref().unwrap();
    assert_eq!(
        speech
            .transcripts
            .iter()
            .map(|t| t.request_id)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    // Parity: the requests after the abort give exactly the clean run's tokens.
    for id in [1, 2] {
        assert_eq!(tokens(at_start, id), tokens(clean, id), "request {id}");
    }
    let Some(WorkerSpec::Whisper(spec)) = at_start.spec.as_ref().map(|s| &s.worker) else {
        panic!("no whisper spec");
    };
    assert_eq!(spec.cancel.map(|c| (c.request, c.after_ms)), Some((0, 0)));

    let mid = arm(&receipt, "cancel-mid");
    assert_eq!(mid.status, ArmStatus::Completed, "{:?}", mid.failure);
    let mid_report = mid.speech.as_ref().unwrap().cancellation.clone().unwrap();
    for id in [1, 2] {
        assert_eq!(tokens(mid, id), tokens(clean, id), "request {id}");
    }
    eprintln!(
        "cancel at 0 ms: abort took {:.1} ms (request {:.1} ms), resident {:+.1} MiB at request_end; \
         cancel at 300 ms: cancelled = {}, abort took {:?} ms, code {:?}, resident {:+.1} MiB",
        abort_ns as f64 / 1e6,
        report.request_ns.unwrap() as f64 / 1e6,
        report.resident_delta_bytes.unwrap() as f64 / MIB,
        mid_report.cancelled,
        mid_report.abort_latency_ns.map(|n| n as f64 / 1e6),
        mid_report.code,
        mid_report.resident_delta_bytes.unwrap_or(0) as f64 / MIB,
    );
}

#[test]
fn a_cancel_past_the_last_request_is_refused_before_the_run() {
    let body = "[[arm]]\nid = \"a\"\n[arm.whisper]\nmodel = \"tiny.en\"\nfixtures = [\"s3\"]\n\
                cancel = { request = 1, after_ms = 0 }\n";
    let r = run_protocol_body("run", body, &[]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
    let err = stderr(&r.out);
    assert!(
        err.contains("cancel.request = 1 is past the last request"),
        "{err}"
    );
    assert!(!r.dir.exists());
}
