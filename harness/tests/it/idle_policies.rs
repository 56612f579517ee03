//! Real-time requests and the three idle-residency policies end to end: the
//! real `memqual` binary running `memqual-whisper` on the real tiny.en
//! model, one arm per policy, requests delivered at real-time pace after
//! idle gaps. What is asserted is order and memory, never speed: the phase
//! sequence each policy must produce, stop-to-final timings consistent with
//! the delivery, the footprint given back at every release, identical
//! transcripts under every policy, and the idle_residency gate's checks.

use crate::common::*;
use reports::gates::Outcome;
use reports::receipt::ArmReceipt;
use sampler::Phase;

const MIB: f64 = 1048576.0;

/// tiny.en's F16 weights are about 74 MiB and one state about 23 MiB; a
/// release must give back at least this much footprint at its marker. Wide
/// on purpose: allocator slack and the audio buffers stay.
const RELEASE_MIN_DROP_MIB: f64 = 50.0;

fn arm<'a>(receipt: &'a reports::Receipt, id: &str) -> &'a ArmReceipt {
    receipt.arms.iter().find(|a| a.id == id).unwrap()
}

/// The arm's markers as (phase, request id).
fn sequence(a: &ArmReceipt) -> Vec<(Phase, Option<u64>)> {
    a.phases.iter().map(|p| (p.phase, p.request_id)).collect()
}

fn arm_body(id: &str, policy: &str, gate: &str) -> String {
    format!(
        r#"
[[arm]]
id = "{id}"
{control}
[arm.whisper]
model = "tiny.en"
fixtures = ["s3"]
repetitions = 2
warmup = 1
idle_s = 0.2
temperature_fallback = false
request_mode = "realtime"
chunk_ms = 100
gaps_s = [0.2, 4.0]
{policy}
{gate}
"#,
        control = if id == "resident" {
            ""
        } else {
            "control = \"resident\""
        }
    )
}

#[test]
fn three_policies_on_tiny_en_release_reload_and_keep_their_outputs() {
    let body = [
        arm_body("resident", "", ""),
        arm_body(
            "load-on-speech",
            "idle_policy = \"load_on_speech\"",
            "[[arm.gate]]\nkind = \"idle_residency\"\nmin_reduction = 0.5\nstop_to_final_ceiling_ms = 3600000.0",
        ),
        // Released 2 s after speech: never in the 0.2 s gaps, once in the 4 s gap.
        arm_body(
            "unload-after-idle",
            "idle_policy = \"unload_after_idle\"\nunload_after_idle_s = 2.0",
            "[[arm.gate]]\nkind = \"idle_residency\"\nmin_reduction = 0.95\nstop_to_final_ceiling_ms = 3600000.0",
        ),
    ]
    .concat();
    let r = run_protocol_body("run", &format!("{body}{LENIENT_ADMISSION}"), &["--json"]);
    let receipt = receipt(&r.dir);
    for a in &receipt.arms {
        assert_eq!(
            a.status,
            reports::record::ArmStatus::Completed,
            "{}: {:?}\n{}",
            a.id,
            a.failure,
            stderr(&r.out)
        );
    }
    use Phase::*;
    let start = [
        (ProcessStart, None),
        (ModelLoaded, None),
        (StateReady, None),
        (WarmupDone, None),
    ];
    let end = [(IdleEnd, None), (TeardownDone, None)];
    let expect = |middle: &[(Phase, Option<u64>)]| -> Vec<(Phase, Option<u64>)> {
        start.iter().chain(middle).chain(&end).copied().collect()
    };
    assert_eq!(
        sequence(arm(&receipt, "resident")),
        expect(&[
            (RequestBegin, Some(0)),
            (RequestEnd, Some(0)),
            (RequestBegin, Some(1)),
            (RequestEnd, Some(1)),
        ])
    );
    assert_eq!(
        sequence(arm(&receipt, "load-on-speech")),
        expect(&[
            (Release, None),
            (RequestBegin, Some(0)),
            (Reload, None),
            (RequestEnd, Some(0)),
            (Release, None),
            (RequestBegin, Some(1)),
            (Reload, None),
            (RequestEnd, Some(1)),
            (Release, None),
        ])
    );
    assert_eq!(
        sequence(arm(&receipt, "unload-after-idle")),
        expect(&[
            (RequestBegin, Some(0)),
            (RequestEnd, Some(0)),
            (Release, None),
            (RequestBegin, Some(1)),
            (Reload, None),
            (RequestEnd, Some(1)),
        ])
    );

    for a in &receipt.arms {
        let res = a.residency.as_ref().expect("residency section");
        assert_eq!(res.request_mode, "realtime");
        assert_eq!(res.chunk_ms, Some(100));
        // The same in the arm's one request-policy block, with its idle policy.
        let policy = a.request_policy.as_ref().expect("a request policy");
        assert_eq!(
            policy.request_mode,
            worker_contract::RequestMode::Realtime { chunk_ms: 100 }
        );
        let idle = match a.id.as_str() {
            "resident" => worker_contract::IdlePolicy::Resident,
            "load-on-speech" => worker_contract::IdlePolicy::LoadOnSpeech,
            _ => worker_contract::IdlePolicy::UnloadAfterIdle { after_ms: 2000 },
        };
        assert_eq!(policy.idle_policy, idle, "{}", a.id);
        let speech = a.speech.as_ref().unwrap();
        assert_eq!(
            speech.latency.stop_to_final.as_ref().map(|s| s.count),
            Some(2)
        );
        for (row, t) in res.requests.iter().zip(&speech.transcripts) {
            assert_eq!(row.request_id, t.request_id);
            let audio_ns = t.result.audio_ms * 1_000_000;
            // No chunk is delivered before it was spoken, and decoding
            // starts only after the last one: the stop precedes the final,
            // and the wait after it covers at least the decode.
            assert!(row.delivery_ns >= audio_ns, "{}: {row:?}", a.id);
            assert!(row.stop_to_final_ns >= row.compute_ns, "{}: {row:?}", a.id);
            assert_eq!(row.compute_ns, t.latency_ns);
            let begin = a.phase(RequestBegin, Some(row.request_id)).unwrap().t_ns;
            let end = a.phase(RequestEnd, Some(row.request_id)).unwrap().t_ns;
            assert!(
                end - begin >= row.delivery_ns + row.stop_to_final_ns,
                "{row:?}"
            );
        }
        let gaps: Vec<u64> = res.requests.iter().map(|r| r.gap_ms).collect();
        assert_eq!(gaps, [200, 4000], "{}", a.id);
    }
    let lazy = arm(&receipt, "load-on-speech").residency.as_ref().unwrap();
    assert_eq!((lazy.releases, lazy.reloads), (3, 2));
    assert!(lazy.requests.iter().all(|r| r.reload_ns.is_some()));
    let unload = arm(&receipt, "unload-after-idle")
        .residency
        .as_ref()
        .unwrap();
    let reloaded: Vec<bool> = unload
        .requests
        .iter()
        .map(|r| r.reload_ns.is_some())
        .collect();
    assert_eq!(reloaded, [false, true]);

    // Memory really goes back at every release.
    for id in ["load-on-speech", "unload-after-idle"] {
        let res = arm(&receipt, id).residency.as_ref().unwrap();
        assert!(!res.release_drops.is_empty());
        for d in &res.release_drops {
            let dropped = d.dropped_bytes.expect("Linux reports a footprint") as f64 / MIB;
            eprintln!("{id}: release at seq {} gave back {dropped:.1} MiB", d.seq);
            assert!(dropped >= RELEASE_MIN_DROP_MIB, "{id}: {d:?}");
        }
    }

    // Same words under every policy: a reload decodes as the first load did.
    let tokens = |id: &str| -> Vec<Vec<i32>> {
        arm(&receipt, id)
            .speech
            .as_ref()
            .unwrap()
            .transcripts
            .iter()
            .map(|t| t.result.tokens.clone())
            .collect()
    };
    assert_eq!(tokens("load-on-speech"), tokens("resident"));
    assert_eq!(tokens("unload-after-idle"), tokens("resident"));

    // The gate: load_on_speech halves idle RAM easily; unload_after_idle
    // stays loaded in the short gaps and the first 2 s of the long one, so
    // it cannot save 95 %.
    let gates = receipt.gates.as_ref().unwrap();
    let idle_check = |id: &str| {
        let a = gates.arms.iter().find(|a| a.arm == id).unwrap();
        let g = a.gates.iter().find(|g| g.kind == "idle_residency").unwrap();
        (g.checks[0].clone(), g.checks[1].clone())
    };
    let (ram, stf) = idle_check("load-on-speech");
    assert_eq!(ram.outcome, Outcome::Pass, "{ram:?}");
    assert_eq!(stf.outcome, Outcome::Pass, "{stf:?}");
    assert_eq!(
        ram.measured,
        arm(&receipt, "load-on-speech")
            .residency
            .as_ref()
            .unwrap()
            .idle_mean_footprint_bytes
    );
    let (ram, _) = idle_check("unload-after-idle");
    assert_eq!(ram.outcome, Outcome::Fail, "{ram:?}");
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(summary.contains("## Real-time requests and idle residency"));
    assert!(
        summary.contains(
            "| load-on-speech | load_on_speech | realtime (100 ms chunks) | all | 2 | 2 |"
        ),
        "{summary}"
    );
    let page = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(page.contains("id=\"residency-unload-after-idle\""));
    validate_receipt(&r.dir);
}
