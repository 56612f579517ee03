//! Build-time facts for `memqual version --verbose` and `run.json`: the git
//! commit memqual is built from, the target and the profile.
//!
//! The commit is `git rev-parse HEAD` in the source tree, or
//! `MEMQUAL_BUILD_COMMIT` when set (a source tarball has no git), else
//! `unknown`. The script runs again when HEAD moves.

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
}
