//! Helpers for integration tests that run the real `memqual` binary.
#![allow(dead_code)]

use reports::Receipt;
use run_dir::{Access, Rel, RunDir, names};
use sampler::{Marker, SeriesRow};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod prerequisites;
#[allow(unused_imports)]
pub use prerequisites::{model, model_record, model_wheel, system_jemalloc, system_tool};

/// The real tiny.en F16 model, built into the cache when it lacks it.
pub fn tiny_en() -> PathBuf {
    model("tiny.en")
}

pub const MEMQUAL: &str = env!("CARGO_BIN_EXE_memqual");
pub const MIB: f64 = 1048576.0;

/// The folder with the worker binaries: cargo builds every workspace binary
/// into the same target folder as `memqual`.
pub fn worker_dir() -> PathBuf {
    let dir = Path::new(MEMQUAL).parent().unwrap().to_path_buf();
    assert!(
        dir.join("memqual-calibrate").exists(),
        "memqual-calibrate is not built in {}: run the workspace tests (`cargo test --workspace`)",
        dir.display()
    );
    dir
}

/// Admission thresholds that admit any host (for tests whose gates must
/// not depend on how busy the test machine is); append to a protocol body.
pub const LENIENT_ADMISSION: &str = "\n[admission]\nwindow_ms = 50\nmax_load_per_core = 1000.0\n\
min_available_mib = 0\nmax_psi_some_avg10 = 100.0\nmax_thermal_celsius = 1000.0\n";

/// `memqual soak PROTOCOL --requests N --out DIR`, appending to `history`
/// (`None`: `--no-history`).
pub fn memqual_soak(protocol: &Path, requests: u64, dir: &Path, history: Option<&Path>) -> Output {
    let n = requests.to_string();
    let mut args = vec![
        "soak",
        protocol.to_str().unwrap(),
        "--requests",
        &n,
        "--out",
        dir.to_str().unwrap(),
    ];
    match history {
        Some(h) => args.extend(["--history", h.to_str().unwrap()]),
        None => args.push("--no-history"),
    }
    memqual(&args)
}

/// Runs `memqual` with the test workers and a 50 ms admission window.
pub fn memqual(args: &[&str]) -> Output {
    Command::new(MEMQUAL)
        .args(args)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
        .output()
        .expect("memqual runs")
}

/// Start `memqual` with `args`, stdout and stderr piped, workers found.
pub fn spawn_memqual(args: &[&str]) -> std::process::Child {
    Command::new(MEMQUAL)
        .args(args)
        .env("MEMQUAL_WORKER_DIR", worker_dir())
        .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("memqual starts")
}

/// Send SIGINT to a running `memqual`, wait, and check it exited 130.
pub fn interrupt(child: std::process::Child) -> Output {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    out
}

pub fn write_protocol(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("protocol.toml");
    std::fs::write(
        &path,
        format!("schema_version = 1\nname = \"test\"\n{body}"),
    )
    .unwrap();
    path
}

/// A finished run directory, opened for reading as memqual opens it.
pub fn open_run(run_dir: &Path) -> RunDir {
    RunDir::open(run_dir, Access::Read).unwrap()
}

/// A folder inside a run (`<run>/arms/<id>`, `<run>/arms/<id>/overhead/0-a`)
/// as its run directory (the nearest folder holding `run.json`) and the
/// folder's path inside it.
fn open_arm(arm_dir: &Path) -> (RunDir, Rel) {
    let root = arm_dir
        .ancestors()
        .find(|p| p.join(names::RUN).is_file())
        .unwrap_or_else(|| panic!("{} is not inside a run directory", arm_dir.display()));
    let inside = arm_dir.strip_prefix(root).unwrap().to_str().unwrap();
    (open_run(root), Rel::parse(inside).unwrap())
}

/// The run's receipt, after checking it against the schema and the seal.
pub fn receipt(run_dir: &Path) -> Receipt {
    validate_receipt(run_dir);
    open_run(run_dir)
        .read_json_limited(&Rel::file(names::RECEIPT), run_dir::limits::RECEIPT)
        .unwrap()
        .expect("the run has a receipt")
}

/// Check `receipt.json` against the committed receipt schema and the seal.
pub fn validate_receipt(run_dir: &Path) {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../reports/receipt.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let run = open_run(run_dir);
    let value: serde_json::Value = run
        .read_json_limited(&Rel::file(names::RECEIPT), run_dir::limits::RECEIPT)
        .unwrap()
        .expect("the run has a receipt");
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "receipt.json against the schema: {errors:?}"
    );
    assert_eq!(
        reports::seal::verify(&run, None).problems,
        [],
        "the seal holds"
    );
}

pub fn markers(arm_dir: &Path) -> Vec<Marker> {
    let (run, arm) = open_arm(arm_dir);
    run.read_jsonl(&arm.join(names::MARKERS)).unwrap()
}

pub fn results(arm_dir: &Path) -> Vec<worker_contract::RequestResult> {
    let (run, arm) = open_arm(arm_dir);
    run.read_jsonl(&arm.join(names::RESULTS)).unwrap()
}

pub fn series(arm_dir: &Path) -> Vec<SeriesRow> {
    let (run, arm) = open_arm(arm_dir);
    run.csv_reader(&arm.join(names::SERIES))
        .unwrap()
        .expect("the arm has a series")
        .deserialize()
        .map(|r| r.unwrap())
        .collect()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A protocol run in a fresh temporary folder.
pub struct ProtocolRun {
    pub tmp: tempfile::TempDir,
    pub protocol: PathBuf,
    pub dir: PathBuf,
    pub out: Output,
}

/// Write `body` as a protocol and run `memqual run` (or `calibrate --protocol`)
/// on it into `<tmp>/run`, with `extra` arguments. `--force` is passed: the
/// test machine is busy, and these runs are judged by their arms, not by
/// admission (tests of gates append [`LENIENT_ADMISSION`] instead).
pub fn run_protocol_body(command: &str, body: &str, extra: &[&str]) -> ProtocolRun {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(tmp.path(), body);
    let dir = tmp.path().join("run");
    let (p, d) = (protocol.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = match command {
        "run" => vec!["run", p],
        "calibrate" => vec!["calibrate", "--protocol", p],
        other => panic!("no such command {other}"),
    };
    args.extend(["--out", d, "--force"]);
    args.extend(extra);
    let out = memqual(&args);
    ProtocolRun {
        tmp,
        protocol,
        dir,
        out,
    }
}

/// The patched whisper.cpp worker, built when missing or stale: `cargo
/// build` in `runners/patched` (its own workspace and `.cargo/config.toml`),
/// into `target/patched/<profile>/`, where `memqual` looks for it. A worker
/// whose linked library carries another patch set refuses `--capabilities`;
/// then whisper-rs-sys is cleaned and built again. Once per test binary;
/// cargo's lock on the target folder serialises concurrent binaries.
pub fn patched_worker() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let memqual_dir = Path::new(MEMQUAL).parent().unwrap();
            let profile = memqual_dir
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let target = memqual_dir.parent().unwrap();
            let exe = target
                .join("patched")
                .join(&profile)
                .join("memqual-whisper-patched");
            let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runners/patched");
            let cargo = |args: &[&str]| -> std::process::Output {
                let mut cmd =
                    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
                cmd.args(args)
                    .arg("--target-dir")
                    .arg(target.join("patched"))
                    .current_dir(&package)
                    .env_remove("CARGO_TARGET_DIR")
                    .env_remove("CARGO_BUILD_TARGET_DIR");
                if profile == "release" {
                    cmd.arg("--release");
                }
                cmd.output().unwrap()
            };
            let must = |args: &[&str]| {
                let out = cargo(args);
                assert!(
                    out.status.success(),
                    "cargo {args:?} in runners/patched failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            };
            // whisper-rs-sys cannot see the patch set change: a library
            // patched with an older set fails to link (a new symbol) or is
            // refused by the worker (its digest), and is rebuilt once.
            let built = cargo(&["build", "--locked"]).status.success()
                && Command::new(&exe)
                    .arg("--capabilities")
                    .output()
                    .unwrap()
                    .status
                    .success();
            if !built {
                must(&["clean", "-p", "whisper-rs-sys"]);
                must(&["build", "--locked"]);
            }
            exe
        })
        .clone()
}

/// `from` copied into `to`, folders and regular files.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
