//! `memqual fixtures coreml-compile PACKAGE OUT_DIR`: compile a Core ML
//! `.mlpackage` with Xcode's `xcrun coremlcompiler compile`, time it, and
//! record the time beside the compiled model (`<name>.mlmodelc.compile.json`,
//! outside the `.mlmodelc` so its tree digest is the compiler's alone).
//!
//! Only macOS has the compiler; elsewhere the command fails naming what is
//! missing. The recording around the compiler is platform-neutral and tested
//! on Linux with a stand-in `xcrun` on `PATH`.

use anyhow::{Context, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one compile did, as written beside the compiled model.
#[derive(Debug, Serialize)]
pub struct CompileRecord {
    /// Version of this record's layout.
    pub schema_version: u32,
    /// The `.mlpackage` compiled.
    pub package: PathBuf,
    /// Its tree digest (sampler's tree digest) before the compile.
    pub package_tree_sha256: String,
    /// The `.mlmodelc` the compiler wrote.
    pub compiled: PathBuf,
    /// Its tree digest, which a worker's receipt records for the sidecar.
    pub compiled_tree_sha256: String,
    /// The command run, arguments included.
    pub command: Vec<String>,
    /// Wall time of the compiler, in ns.
    pub wall_ns: u64,
    /// When the compile finished (UTC, RFC 3339).
    pub finished_at: String,
}

/// The record's file for a compiled model: `<dir>/<name>.mlmodelc.compile.json`.
pub fn record_path(compiled: &Path) -> PathBuf {
    let mut name = compiled.file_name().unwrap_or_default().to_os_string();
    name.push(".compile.json");
    compiled.with_file_name(name)
}

/// Compile `package` into `out_dir` with `xcrun coremlcompiler compile`,
/// then write and return the record. Refuses a package that is not an
/// `.mlpackage` directory, a missing `out_dir`, and a compiled model or
/// record already there (nothing is overwritten).
pub fn compile(package: &Path, out_dir: &Path) -> anyhow::Result<(CompileRecord, PathBuf)> {
    let is_package = package.extension().is_some_and(|e| e == "mlpackage");
    if !is_package || !package.is_dir() {
        bail!(
            "{}: not an .mlpackage directory (`memqual fixtures coreml-encoder` builds one)",
            package.display()
        );
    }
    if !out_dir.is_dir() {
        bail!(
            "{}: not an existing folder to compile into",
            out_dir.display()
        );
    }
    // The compiler names its output after the package: a.b.mlpackage -> a.b.mlmodelc.
    let mut name = package.file_stem().unwrap_or_default().to_os_string();
    name.push(".mlmodelc");
    let compiled = out_dir.join(name);
    let record_file = record_path(&compiled);
    for existing in [&compiled, &record_file] {
        if existing.symlink_metadata().is_ok() {
            bail!(
                "{}: already exists; remove it to compile again",
                existing.display()
            );
        }
    }
    let package_tree = sampler::captures::tree_digest(package)
        .with_context(|| format!("digesting {}", package.display()))?;
    let command = ["xcrun", "coremlcompiler", "compile"]
        .iter()
        .map(|s| s.to_string())
        .chain([package, out_dir].map(|p| p.display().to_string()))
        .collect::<Vec<_>>();
    let started = std::time::Instant::now();
    let output = Command::new(&command[0])
        .args(&command[1..])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "xcrun not found: Core ML models compile only on macOS with Xcode's \
                 command-line tools (xcode-select --install)"
            ),
            _ => anyhow::Error::new(e).context("starting xcrun coremlcompiler"),
        })?;
    let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        bail!(
            "`{}` failed ({}){}",
            command.join(" "),
            output.status,
            last.map(|l| format!(": {l}")).unwrap_or_default()
        );
    }
    if !compiled.is_dir() {
        bail!(
            "`{}` exited 0 but wrote no {}",
            command.join(" "),
            compiled.display()
        );
    }
    let compiled_tree = sampler::captures::tree_digest(&compiled)
        .with_context(|| format!("digesting {}", compiled.display()))?;
    let record = CompileRecord {
        schema_version: 1,
        package: package.to_path_buf(),
        package_tree_sha256: package_tree.sha256,
        compiled,
        compiled_tree_sha256: compiled_tree.sha256,
        command,
        wall_ns,
        finished_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    };
    let text = serde_json::to_string_pretty(&record)? + "\n";
    std::fs::write(&record_file, text)
        .with_context(|| format!("writing {}", record_file.display()))?;
    Ok((record, record_file))
}
