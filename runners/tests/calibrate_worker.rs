//! The calibration worker binary, driven directly over the worker contract.

use command_fds::{CommandFdExt, FdMapping};
use sampler::{Phase, PhaseTracker};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use worker_contract::{
    ArmSpec, CONTRACT_VERSION, CalibrationSpec, MESSAGE_FD, Plateau, ResultBody, WorkerMessage,
    WorkerSpec, decode_line,
};

const EXE: &str = env!("CARGO_BIN_EXE_memqual-calibrate");

fn spec(dir: &std::path::Path, cal: CalibrationSpec) -> ArmSpec {
    ArmSpec {
        contract_version: CONTRACT_VERSION,
        arm_id: "t".into(),
        scratch_dir: dir.to_path_buf(),
        sampler: None,
        settle_ms: 0,
        worker: WorkerSpec::Calibrate(cal),
    }
}

/// Run the worker with `spec`, return its messages and exit status.
fn run_worker(spec: &ArmSpec) -> (Vec<WorkerMessage>, std::process::ExitStatus) {
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = Command::new(EXE);
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    cmd.fd_mappings(vec![FdMapping {
        parent_fd: writer.into(),
        child_fd: MESSAGE_FD,
    }])
    .unwrap();
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(spec).unwrap())
        .unwrap();
    let msgs = BufReader::new(reader)
        .lines()
        .map(|l| decode_line(&l.unwrap()).unwrap())
        .collect();
    (msgs, child.wait().unwrap())
}

#[test]
fn a_plain_arm_speaks_the_whole_contract_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let cal = CalibrationSpec {
        requests: 2,
        warmup: 1,
        request_ms: 1,
        idle_ms: 1,
        plateau: Some(Plateau { mib: 16 }),
        ..CalibrationSpec::default()
    };
    let (msgs, status) = run_worker(&spec(dir.path(), cal));
    assert!(status.success());
    let WorkerMessage::Hello(hello) = &msgs[0] else {
        panic!("first message {:?}", msgs[0]);
    };
    assert_eq!(hello.worker, "memqual-calibrate");
    assert_eq!(hello.contract_version, CONTRACT_VERSION);
    assert!(hello.capabilities.iter().any(|c| c == "spike"));
    assert!(matches!(msgs.last(), Some(WorkerMessage::Bye(b)) if b.requests == 2));

    let mut tracker = PhaseTracker::new();
    let mut results = 0;
    for m in &msgs {
        match m {
            WorkerMessage::Marker(mk) => tracker.accept(mk.seq, mk.phase, mk.request_id).unwrap(),
            WorkerMessage::Result(r) => {
                let ResultBody::Calibration(c) = &r.body else {
                    panic!("calibration result expected")
                };
                assert_eq!(c.held_bytes, 16 << 20);
                results += 1;
            }
            _ => {}
        }
    }
    assert!(tracker.is_complete());
    assert_eq!(results, 2);
    // The plateau is visible between process_start and state_ready.
    let marker = |p: Phase| {
        msgs.iter()
            .find_map(|m| match m {
                WorkerMessage::Marker(mk) if mk.phase == p => Some(mk.memory.resident_bytes),
                _ => None,
            })
            .unwrap()
    };
    let growth = marker(Phase::StateReady) as f64 - marker(Phase::ProcessStart) as f64;
    assert!(
        (growth / (16u64 << 20) as f64 - 1.0).abs() < 0.1,
        "{growth}"
    );
}

#[test]
fn without_fd3_the_worker_says_why_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(EXE)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let json = serde_json::to_vec(&spec(dir.path(), CalibrationSpec::default())).unwrap();
    child.stdin.take().unwrap().write_all(&json).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("message channel /dev/fd/3"), "{err}");
}

#[test]
fn a_bad_spec_is_refused_before_anything_runs() {
    let mut child = Command::new(EXE)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"contract_version\": 1, \"arm_id\": 3}")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("arm spec on stdin is invalid"));
}
