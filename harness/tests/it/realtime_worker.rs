//! `memqual-whisper` alone on the real tiny.en model under the
//! `load_on_speech` policy in file mode: the worker's own messages show
//! the release after warmup and after each final, the reload inside each
//! request, the footprint given back, and a timing whose stop-to-final
//! covers the reload and the decode. On the real tiny.en (built into the
//! cache when it lacks it), so it lives with the harness's tests.

use crate::common::{tiny_en, worker_dir};
use command_fds::{CommandFdExt, FdMapping};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use worker_contract::{
    ArmSpec, CONTRACT_VERSION, MESSAGE_FD, WorkerMessage, WorkerSpec, decode_line,
};

/// See `harness/tests/it/idle_policies.rs`: tiny.en's weights and one state
/// are about 97 MiB; a release must give back at least this much.
const RELEASE_MIN_DROP_BYTES: u64 = 50 << 20;

fn fixture(id: &str) -> serde_json::Value {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/audio"))
        .join(format!("{id}.wav"));
    let bytes = std::fs::read(&path).unwrap();
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    serde_json::json!({"id": id, "category": "negation", "path": path, "sha256": sha})
}

#[test]
fn load_on_speech_releases_between_requests_and_reloads_inside_them() {
    let whisper = serde_json::from_value(serde_json::json!({
        "model": {"path": tiny_en(), "sha256": null},
        "threads": 2, "decoding": {"strategy": "greedy"}, "language": "en",
        "no_timestamps": true, "flash_attn": false, "use_gpu": false, "audio_ctx": 0,
        "temperature_fallback": false,
        "initializer": "no_state", "extra_states": 0, "warmup": 0,
        "fixtures": [fixture("s3")], "repetitions": 2, "idle_ms": 0, "encoder": "native",
        "idle_policy": {"policy": "load_on_speech"}
    }))
    .unwrap();
    let spec = serde_json::to_vec(&ArmSpec {
        contract_version: CONTRACT_VERSION,
        arm_id: "lazy".into(),
        scratch_dir: std::env::temp_dir(),
        sampler: None,
        settle_ms: 0,
        lifecycle: None,
        attribution: None,
        worker: WorkerSpec::Whisper(Box::new(whisper)),
    })
    .unwrap();
    let mut cmd = Command::new(worker_dir().join("memqual-whisper"));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Messages on fd 3; the lifeline on fd 4 is the harness's own, held
    // for the life of this test process, as memqual holds it.
    let (reader, writer) = std::io::pipe().unwrap();
    cmd.fd_mappings(vec![
        FdMapping {
            parent_fd: writer.into(),
            child_fd: MESSAGE_FD,
        },
        arm_runner::lifeline::fd_mapping().unwrap(),
    ])
    .unwrap();
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    child.stdin.take().unwrap().write_all(&spec).unwrap();
    let msgs: Vec<WorkerMessage> = BufReader::new(reader)
        .lines()
        .map(|l| decode_line(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{msgs:?}");

    let markers: Vec<_> = msgs
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Marker(m) => Some(m),
            _ => None,
        })
        .collect();
    let phases: Vec<String> = markers.iter().map(|m| m.phase.to_string()).collect();
    assert_eq!(
        phases,
        [
            "process_start",
            "model_loaded",
            "state_ready",
            "warmup_done",
            "release",
            "request_begin",
            "reload",
            "request_end",
            "release",
            "request_begin",
            "reload",
            "request_end",
            "release",
            "idle_end",
            "teardown_done"
        ]
    );
    for (i, m) in markers.iter().enumerate() {
        if m.phase == sampler::Phase::Release {
            let before = markers[i - 1].memory.footprint_bytes.unwrap();
            let after = m.memory.footprint_bytes.unwrap();
            assert!(
                before >= after + RELEASE_MIN_DROP_BYTES,
                "release at seq {}: {before} -> {after} bytes",
                m.seq
            );
        }
    }
    let results: Vec<_> = msgs
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Result(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    for r in results {
        let t = r.timing.as_ref().expect("whisper results carry a timing");
        assert_eq!((t.mode.as_str(), t.chunks, t.chunk_ms), ("file", 1, 0));
        // A file has ended when the request begins: the user waits for the
        // reload and the decode.
        assert_eq!(t.audio_end_ns, t.speech_start_ns);
        let reload = t.reload_ns.expect("load_on_speech reloads every request");
        assert!(t.stop_to_final_ns >= reload + r.latency_ns, "{t:?}");
        assert_eq!(t.final_ns - t.audio_end_ns, t.stop_to_final_ns);
        let begin = markers
            .iter()
            .find(|m| m.phase == sampler::Phase::RequestBegin && m.request_id == Some(r.request_id))
            .unwrap();
        assert!(begin.t_ns <= t.speech_start_ns);
    }
}
