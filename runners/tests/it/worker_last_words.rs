//! Both workers with stdout and stderr on a full disk (`/dev/full`: every
//! write fails with ENOSPC, as the run directory's stderr file does when the
//! disk fills): the error still reaches memqual over fd 3, the exit code is
//! the worker's own, and nothing panics (a panic would exit 101).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use worker_contract::{
    ArmSpec, CONTRACT_VERSION, CalibrationSpec, WorkerMessage, WorkerSpec, decode_line,
};

const CALIBRATE: &str = env!("CARGO_BIN_EXE_memqual-calibrate");
const WHISPER: &str = env!("CARGO_BIN_EXE_memqual-whisper");

fn full_disk() -> Stdio {
    File::options()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

/// Run `exe` with `stdin` as its spec, stdout and stderr on `/dev/full`.
fn run_on_full_disk(exe: &str, stdin: &[u8]) -> (Vec<WorkerMessage>, Option<i32>) {
    let mut cmd = Command::new(exe);
    cmd.stdin(Stdio::piped())
        .stdout(full_disk())
        .stderr(full_disk());
    // The worker's lifeline: this test holds the write end until the worker ends.
    let (reader, _lifeline) = crate::channels::attach(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let msgs = BufReader::new(reader)
        .lines()
        .map(|l| decode_line(&l.unwrap()).unwrap())
        .collect();
    (msgs, child.wait().unwrap().code())
}

fn errors(msgs: &[WorkerMessage]) -> Vec<&str> {
    msgs.iter()
        .filter_map(|m| match m {
            WorkerMessage::Error(e) => Some(e.message.as_str()),
            _ => None,
        })
        .collect()
}

fn spec(worker: WorkerSpec) -> Vec<u8> {
    serde_json::to_vec(&ArmSpec {
        contract_version: CONTRACT_VERSION,
        arm_id: "t".into(),
        scratch_dir: std::env::temp_dir(),
        sampler: None,
        settle_ms: 0,
        lifecycle: None,
        attribution: None,
        worker,
    })
    .unwrap()
}

#[test]
fn calibrate_a_failing_arm_reports_over_fd3_and_exits_1() {
    let cal = CalibrationSpec {
        requests: 2,
        crash_at: Some(5),
        ..CalibrationSpec::default()
    };
    let (msgs, code) = run_on_full_disk(CALIBRATE, &spec(WorkerSpec::Calibrate(cal)));
    assert_eq!(code, Some(1));
    assert!(matches!(msgs[0], WorkerMessage::Hello(_)), "{msgs:?}");
    assert_eq!(
        errors(&msgs),
        ["invalid calibration spec: crash_at = 5 but the arm has only 2 requests"]
    );
}

#[test]
fn calibrate_a_bad_spec_reports_over_fd3_and_exits_2() {
    let (msgs, code) = run_on_full_disk(CALIBRATE, b"{\"contract_version\": 3, \"arm_id\": 3}");
    assert_eq!(code, Some(2));
    assert!(matches!(msgs[0], WorkerMessage::Hello(_)), "{msgs:?}");
    let errors = errors(&msgs);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("the arm spec on stdin is invalid: "),
        "{errors:?}"
    );
}

#[test]
fn whisper_a_missing_model_reports_over_fd3_and_exits_1() {
    let missing = std::env::temp_dir().join("memqual-no-such-model.bin");
    let whisper = serde_json::from_value(serde_json::json!({
        "model": {"path": missing, "sha256": null},
        "threads": 1, "decoding": {"strategy": "greedy"}, "language": "en",
        "no_timestamps": true, "flash_attn": false, "use_gpu": false, "audio_ctx": 0,
        "initializer": "no_state", "extra_states": 0, "warmup": 0,
        "fixtures": [{"id": "f", "category": "clean", "path": "/nowhere.wav", "sha256": "00"}],
        "repetitions": 1, "idle_ms": 0, "encoder": "native"
    }))
    .unwrap();
    let (msgs, code) = run_on_full_disk(WHISPER, &spec(WorkerSpec::Whisper(whisper)));
    assert_eq!(code, Some(1));
    assert_eq!(
        errors(&msgs),
        [format!(
            "model: cannot read {}: No such file or directory (os error 2)",
            missing.display()
        )]
    );
}

#[test]
fn whisper_capabilities_on_a_full_stdout_exit_1_without_a_panic() {
    let status = Command::new(WHISPER)
        .arg("--capabilities")
        .stdout(full_disk())
        .stderr(full_disk())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}
