//! The calibration worker binary, driven directly over the worker contract.

use command_fds::{CommandFdExt, FdMapping};
use sampler::{Phase, PhaseTracker};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use worker_contract::{
    ArmSpec, CONTRACT_VERSION, CalibrationSpec, LIFELINE_FD, MESSAGE_FD, Plateau, ResultBody,
    WorkerMessage, WorkerSpec, decode_line,
};

const EXE: &str = env!("CARGO_BIN_EXE_memqual-calibrate");

fn spec(dir: &std::path::Path, cal: CalibrationSpec) -> ArmSpec {
    ArmSpec {
        contract_version: CONTRACT_VERSION,
        arm_id: "t".into(),
        scratch_dir: dir.to_path_buf(),
        sampler: None,
        settle_ms: 0,
        lifecycle: None,
        attribution: None,
        worker: WorkerSpec::Calibrate(cal),
    }
}

/// A worker started as the harness starts one: messages on fd 3, the
/// lifeline's read end on fd 4 (this test holds its write end).
struct Started {
    child: std::process::Child,
    messages: BufReader<std::io::PipeReader>,
    lifeline: std::io::PipeWriter,
}

fn start_worker(spec: &ArmSpec) -> Started {
    start_worker_with(spec, &[])
}

/// [`start_worker`] with `env` added to the worker's environment.
fn start_worker_with(spec: &ArmSpec, env: &[(&str, &std::ffi::OsStr)]) -> Started {
    let mut cmd = Command::new(EXE);
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    cmd.envs(env.iter().copied());
    let (reader, lifeline) = crate::channels::attach(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(spec).unwrap())
        .unwrap();
    Started {
        child,
        messages: BufReader::new(reader),
        lifeline,
    }
}

/// Run the worker with `spec`, return its messages and exit status.
fn run_worker(spec: &ArmSpec) -> (Vec<WorkerMessage>, std::process::ExitStatus) {
    let Started {
        mut child,
        messages,
        lifeline,
    } = start_worker(spec);
    let msgs = messages
        .lines()
        .map(|l| decode_line(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    drop(lifeline);
    (msgs, status)
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

/// Start the worker with only the given fd mappings and a valid spec;
/// return its exit code and stderr.
fn refused_with(mappings: Vec<FdMapping>) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(EXE);
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    cmd.fd_mappings(mappings).unwrap();
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let json = serde_json::to_vec(&spec(dir.path(), CalibrationSpec::default())).unwrap();
    child.stdin.take().unwrap().write_all(&json).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn without_fd3_the_worker_says_why_and_exits_2() {
    let (lifeline_reader, _lifeline) = std::io::pipe().unwrap();
    let (code, err) = refused_with(vec![FdMapping {
        parent_fd: lifeline_reader.into(),
        child_fd: LIFELINE_FD,
    }]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("message channel /dev/fd/3"), "{err}");
}

#[test]
fn without_a_lifeline_on_fd4_the_worker_says_why_and_exits_2() {
    let (_messages, writer) = std::io::pipe().unwrap();
    let (code, err) = refused_with(vec![FdMapping {
        parent_fd: writer.into(),
        child_fd: MESSAGE_FD,
    }]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot open the lifeline /dev/fd/4"), "{err}");

    // A regular file on fd 4 is no lifeline either.
    let file = tempfile::tempfile().unwrap();
    let (_messages, writer) = std::io::pipe().unwrap();
    let (code, err) = refused_with(vec![
        FdMapping {
            parent_fd: writer.into(),
            child_fd: MESSAGE_FD,
        },
        FdMapping {
            parent_fd: file.into(),
            child_fd: LIFELINE_FD,
        },
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("the lifeline /dev/fd/4 is not a pipe"),
        "{err}"
    );
}

/// Wait for `child` to exit, polling, for at most `limit`; kill it after.
fn exit_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn closing_the_lifeline_kills_the_worker_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A 10-minute idle: the worker writes nothing more until it ends, so
    // only the lifeline can end it early.
    let cal = CalibrationSpec {
        requests: 1,
        warmup: 0,
        request_ms: 1,
        idle_ms: 600_000,
        ..CalibrationSpec::default()
    };
    let Started {
        mut child,
        mut messages,
        lifeline,
    } = start_worker(&spec(dir.path(), cal));
    // Read up to request_end: the worker is now in its idle.
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            messages.read_line(&mut line).unwrap() > 0,
            "fd 3 closed early"
        );
        if let WorkerMessage::Marker(m) = decode_line(line.trim_end()).unwrap()
            && m.phase == Phase::RequestEnd
        {
            break;
        }
    }
    drop(lifeline);
    // Generous: the worker only has to wake from a read and kill itself.
    let status = exit_within(&mut child, Duration::from_secs(60))
        .expect("the worker outlived its lifeline by a minute");
    assert_eq!(
        status.signal(),
        Some(nix::sys::signal::Signal::SIGKILL as i32),
        "{status:?}"
    );
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

/// A calibration spec that asks for jemalloc heap profiles into `heap`.
fn profiled(dir: &std::path::Path, heap: &std::path::Path) -> ArmSpec {
    let cal = CalibrationSpec {
        requests: 1,
        warmup: 0,
        request_ms: 1,
        idle_ms: 1,
        heap_plateau: Some(Plateau { mib: 4 }),
        ..CalibrationSpec::default()
    };
    ArmSpec {
        attribution: Some(worker_contract::HeapProfiling::Jemalloc {
            dir: heap.to_path_buf(),
            lg_prof_sample: worker_contract::LG_PROF_SAMPLE,
            toggle_every: None,
        }),
        ..spec(dir, cal)
    }
}

#[test]
fn metal_patterns_off_a_mac_are_not_runnable_naming_metal_before_any_marker() {
    let dir = tempfile::tempdir().unwrap();
    let patterns = [
        serde_json::json!({"metal_plateau": {"mib": 64}}),
        serde_json::json!({"metal_leak": {"mib_per_request": 8.0}}),
        serde_json::json!({"metal_spike": {"mib": 64, "hold_ms": 10, "request": 1}}),
        serde_json::json!({"metal_autorelease": {"command_buffers_per_request": 100}}),
    ];
    for pattern in patterns {
        let cal: CalibrationSpec = serde_json::from_value(pattern.clone()).unwrap();
        let (msgs, status) = run_worker(&spec(dir.path(), cal));
        assert_eq!(
            status.code(),
            Some(worker_contract::EXIT_NOT_RUNNABLE),
            "{pattern}"
        );
        assert!(
            !msgs.iter().any(|m| matches!(m, WorkerMessage::Marker(_))),
            "{pattern}: a marker before the refusal"
        );
        let error = msgs
            .iter()
            .find_map(|m| match m {
                WorkerMessage::Error(e) => Some(e.message.clone()),
                _ => None,
            })
            .expect("an error message");
        assert_eq!(
            error,
            "the metal_* calibration patterns need Metal, which only macOS has; \
             run this protocol on a Mac with a worker built with `metal`",
            "{pattern}"
        );
    }
}

#[test]
fn a_worker_without_jemalloc_refuses_an_attributed_arm_as_not_runnable() {
    let dir = tempfile::tempdir().unwrap();
    let (msgs, status) = run_worker(&profiled(dir.path(), dir.path()));
    assert_eq!(status.code(), Some(worker_contract::EXIT_NOT_RUNNABLE));
    assert!(!msgs.iter().any(|m| matches!(m, WorkerMessage::Marker(_))));
    let error = msgs
        .iter()
        .find_map(|m| match m {
            WorkerMessage::Error(e) => Some(e.message.clone()),
            _ => None,
        })
        .expect("an error message");
    assert!(error.contains("mallctl"), "{error}");
    assert!(error.contains("libjemalloc2"), "{error}");
}

/// libjemalloc.so.2 where Debian's libjemalloc2 puts it (or `ldconfig -p` says).
fn jemalloc() -> std::path::PathBuf {
    let listed = Command::new("ldconfig")
        .arg("-p")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains("libjemalloc.so.2") && l.contains("64"))
                .find_map(|l| Some(l.split_once("=> ")?.1.trim().to_string()))
        });
    listed
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs libjemalloc2 (Debian: apt-get install libjemalloc2), or leave \
                 it ignored (run without --ignored)"
            )
        })
}

/// Run the worker with `spec` under jemalloc with `malloc_conf`: its
/// fd-3 lines and exit status.
fn run_preloaded(spec: &ArmSpec, malloc_conf: &str) -> (Vec<String>, std::process::ExitStatus) {
    let library = jemalloc();
    let Started {
        mut child,
        messages,
        lifeline,
    } = start_worker_with(
        spec,
        &[
            ("LD_PRELOAD", library.as_os_str()),
            ("MALLOC_CONF", malloc_conf.as_ref()),
        ],
    );
    let lines = messages.lines().map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    drop(lifeline);
    (lines, status)
}

const PROFILING: &str = "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:14";

#[test]
#[ignore = "needs libjemalloc2 (Debian package libjemalloc2): profiles that cannot be written are logged, the arm still runs"]
fn profiles_that_cannot_be_written_are_warnings_and_the_arm_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let spec = profiled(dir.path(), &dir.path().join("no/such/folder"));
    let (lines, status) = run_preloaded(&spec, PROFILING);
    assert!(status.success());
    let msgs: Vec<WorkerMessage> = lines.iter().map(|l| decode_line(l).unwrap()).collect();
    let markers = msgs
        .iter()
        .filter(|m| matches!(m, WorkerMessage::Marker(_)))
        .count();
    let warnings: Vec<&str> = msgs
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Log(l) if l.message.contains("could not write the heap profile") => {
                Some(l.message.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), markers, "{warnings:?}");
    assert!(
        warnings[0].contains("0000-process_start.heap"),
        "{}",
        warnings[0]
    );

    // Under the same jemalloc, a folder that exists gets one profile per marker.
    let heap = dir.path().join("heap");
    std::fs::create_dir(&heap).unwrap();
    let (_, status) = run_preloaded(&profiled(dir.path(), &heap), PROFILING);
    assert!(status.success());
    assert_eq!(std::fs::read_dir(&heap).unwrap().count(), markers);

    // Another sampling interval than the spec's is refused.
    let (lines, status) =
        run_preloaded(&profiled(dir.path(), &heap), "prof:true,lg_prof_sample:19");
    assert_eq!(status.code(), Some(worker_contract::EXIT_NOT_RUNNABLE));
    assert!(lines.iter().any(|l| l.contains("2^19")), "{lines:?}");
}
