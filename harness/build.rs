//! Build-time facts for `memqual version --verbose` and `run.json`: the git
//! commit memqual is built from, the target and the profile.
//!
//! The commit is `git rev-parse HEAD` in the source tree, or
//! `MEMQUAL_BUILD_COMMIT` when set (a source tarball has no git), else
//! `unknown`. The script runs again when HEAD moves.
//!
//! Also the runtime a derived artifact is made for (`memqual artifact
//! derive` names it in its receipt): the patched worker's package
//! (runners/patched), the whisper-rs-sys its lock file pins, the runners
//! features it switches on, and memqual's patch set file by file with the
//! set's digest, read by the same code as the workers' own report
//! (runners/runtime_source.rs).

#[path = "../runners/runtime_source.rs"]
mod runtime_source;

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Ask cargo to run this script again when `git_path` (a path git names
/// relative to `dir`) changes; nothing for a path that does not exist, since
/// cargo would then run the script on every build.
fn watch(dir: &Path, git_path: &str) {
    if let Some(p) = git(dir, &["rev-parse", "--git-path", git_path]) {
        let p = PathBuf::from(p);
        let p = if p.is_absolute() { p } else { dir.join(p) };
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=MEMQUAL_BUILD_COMMIT");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let commit = std::env::var("MEMQUAL_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&dir, &["rev-parse", "HEAD"]));
    if commit.is_some() {
        watch(&dir, "HEAD");
        if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
            watch(&dir, &branch);
        }
        watch(&dir, "packed-refs");
    }
    println!(
        "cargo:rustc-env=MEMQUAL_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo:rustc-env=MEMQUAL_BUILD_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=MEMQUAL_BUILD_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_default()
    );
    compatible_runtime(&dir.join("../runners"));
}

/// The patched worker's runtime, as `MEMQUAL_COMPAT_*` variables.
fn compatible_runtime(runners: &Path) {
    let manifest = runners.join("patched/Cargo.toml");
    let lock = runners.join("patched/Cargo.lock");
    let patches = runners.join("whisper-patch");
    for p in [
        &manifest,
        &lock,
        &patches,
        &runners.join("runtime_source.rs"),
    ] {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let package: toml::Table = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let name = package
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or_default();
    // The runners features the patched package always switches on.
    let features: Vec<&str> = package
        .get("dependencies")
        .and_then(|d| d.get("runners"))
        .and_then(|r| r.get("features"))
        .and_then(|f| f.as_array())
        .map(|f| f.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let (version, checksum) = runtime_source::locked(
        &std::fs::read_to_string(&lock).unwrap_or_default(),
        "whisper-rs-sys",
    );
    let (files, digest) = runtime_source::patch_set(&patches);
    for (var, value) in [
        ("PACKAGE", name.to_string()),
        ("FEATURES", features.join(",")),
        ("WHISPER_RS_SYS_VERSION", version),
        ("WHISPER_RS_SYS_CHECKSUM", checksum),
        ("PATCH_FILES", runtime_source::joined(&files)),
        ("PATCH_DIGEST", digest),
    ] {
        println!("cargo:rustc-env=MEMQUAL_COMPAT_{var}={value}");
    }
}
