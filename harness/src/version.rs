//! `memqual version [--verbose] [--json]`: which memqual this is — its
//! version, the git commit it was built from, its target — and what its
//! workers can do: the whisper.cpp version and the backends (metal, coreml,
//! cuda) the whisper worker was built with, as the worker itself reports
//! them (`memqual-whisper --capabilities`), since those are the runners
//! crate's features, not memqual's.

use crate::exit::{self, Failure, harness};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// memqual's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit memqual was built from, or `unknown`.
pub const COMMIT: &str = env!("MEMQUAL_GIT_COMMIT");

/// How long a worker may take to describe itself.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a worker says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Worker binary name (`memqual-whisper`, `memqual-calibrate`).
    pub name: String,
    /// Where the binary was looked for: the worker directory joined with its name.
    pub path: String,
    /// True when that path is a regular file.
    pub present: bool,
    /// The worker's own version, when it reports one.
    pub version: Option<String>,
    /// whisper.cpp's version (`whisper_version()`), for the whisper worker.
    pub whisper_cpp: Option<String>,
    /// Backends compiled in: `metal`, `coreml`, `cuda` (empty: CPU only).
    pub features: Vec<String>,
    /// Capabilities the worker reports with `--capabilities` (what an arm's
    /// `requires` may name); empty when it was not asked or could not answer.
    pub capabilities: Vec<String>,
    /// The devices ggml finds where the worker runs (`CUDA0: NVIDIA H200`,
    /// `CPU: …`): a GPU build lists a GPU only where its driver sees one.
    #[serde(default)]
    pub devices: Vec<String>,
    /// Why the worker could not be asked.
    pub problem: Option<String>,
}

/// `memqual version --verbose --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// memqual's version (the crate version).
    pub version: String,
    /// The git commit memqual was built from, or `unknown`.
    pub commit: String,
    /// The Rust target triple memqual was built for.
    pub target: String,
    /// The cargo profile memqual was built with (`debug` or `release`).
    pub profile: String,
    /// The directory the worker binaries are taken from.
    pub worker_dir: String,
    /// Each worker binary memqual runs, and what it says about itself.
    pub workers: Vec<WorkerInfo>,
}

/// `memqual-whisper --capabilities`, as JSON.
#[derive(Debug, Deserialize)]
struct Capabilities {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    whisper_cpp: Option<String>,
    #[serde(default)]
    features: Option<Vec<String>>,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    devices: Vec<Device>,
}

/// One entry of the worker's `devices`: ggml's name and description.
#[derive(Debug, Deserialize)]
struct Device {
    name: String,
    #[serde(default)]
    description: String,
}

/// Run `exe --capabilities`, bounded in time and output.
fn probe(exe: &Path) -> Result<Capabilities, String> {
    let mut child = Command::new(exe)
        .arg("--capabilities")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not answer within {} s",
                    PROBE_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot read its answer: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let text = text.get(..64 * 1024).unwrap_or(&text);
    serde_json::from_str(text.trim()).map_err(|e| format!("its answer is not JSON: {e}"))
}

fn worker(dir: &Path, name: &str, ask: bool) -> WorkerInfo {
    let path = dir.join(name);
    let mut info = WorkerInfo {
        name: name.to_string(),
        path: path.display().to_string(),
        present: path.is_file(),
        version: None,
        whisper_cpp: None,
        features: Vec::new(),
        capabilities: Vec::new(),
        devices: Vec::new(),
        problem: None,
    };
    if !info.present {
        info.problem = Some("not found (build the workspace, or give --worker-dir)".into());
        return info;
    }
    if !ask {
        return info;
    }
    match probe(&path) {
        Ok(c) => {
            // Older workers list backends only as capabilities.
            let features = c.features.unwrap_or_else(|| {
                c.capabilities
                    .iter()
                    .filter_map(|cap| match cap.as_str() {
                        "backend:metal" => Some("metal".to_string()),
                        "encoder:coreml" => Some("coreml".to_string()),
                        "backend:cuda" => Some("cuda".to_string()),
                        _ => None,
                    })
                    .collect()
            });
            info.version = c.version;
            info.whisper_cpp = c.whisper_cpp;
            info.features = features;
            info.capabilities = c.capabilities;
            info.devices = c
                .devices
                .into_iter()
                .map(|d| format!("{}: {}", d.name, d.description))
                .collect();
        }
        Err(e) => info.problem = Some(e),
    }
    info
}

/// Everything `--verbose` shows; the workers are looked for in `worker_dir`.
pub fn info(worker_dir: &Path) -> VersionInfo {
    VersionInfo {
        version: VERSION.to_string(),
        commit: COMMIT.to_string(),
        target: env!("MEMQUAL_BUILD_TARGET").to_string(),
        profile: env!("MEMQUAL_BUILD_PROFILE").to_string(),
        worker_dir: worker_dir.display().to_string(),
        workers: vec![
            worker(worker_dir, "memqual-whisper", true),
            worker(worker_dir, "memqual-calibrate", false),
        ],
    }
}

/// The short line: `memqual 0.1.0`.
pub fn short() -> String {
    format!("memqual {VERSION}")
}

/// `--verbose` for people.
pub fn human(v: &VersionInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "memqual {}", v.version);
    let _ = writeln!(out, "commit: {}", v.commit);
    let _ = writeln!(out, "target: {} ({} build)", v.target, v.profile);
    let _ = writeln!(out, "workers in {}:", v.worker_dir);
    for w in &v.workers {
        let mut parts = Vec::new();
        if let Some(p) = &w.problem {
            parts.push(p.clone());
        } else if !w.present {
            parts.push("not found".into());
        } else {
            parts.push("present".into());
        }
        if let Some(ver) = &w.version {
            parts.push(format!("version {ver}"));
        }
        if let Some(wc) = &w.whisper_cpp {
            parts.push(format!("whisper.cpp {wc}"));
        }
        if w.name == "memqual-whisper" && w.present && w.problem.is_none() {
            parts.push(if w.features.is_empty() {
                "features: none (CPU only)".to_string()
            } else {
                format!("features: {}", w.features.join(", "))
            });
            if !w.devices.is_empty() {
                parts.push(format!("devices: {}", w.devices.join("; ")));
            }
        }
        let _ = writeln!(out, "  {}: {}", w.name, parts.join(", "));
    }
    out
}

/// `memqual version [--verbose] [--json] [--worker-dir DIR]`.
pub fn command(verbose: bool, json: bool, worker_dir: Option<PathBuf>) -> Result<u8, Failure> {
    if !(verbose || json) {
        outln!("{}", short());
        return Ok(exit::PASS);
    }
    let dir = crate::worker_dir::WorkerDir::resolve(worker_dir).map_err(harness)?;
    let v = info(&dir.0);
    if json {
        crate::console::print_json(&v)?;
    } else {
        out!("{}", human(&v));
    }
    Ok(exit::PASS)
}
