//! The whisper.cpp runtime's source identity, for build scripts: a package's
//! version and registry checksum in a lock file, and memqual's patch set
//! (runners/whisper-patch) file by file with the set's digest, computed
//! exactly as its CMake step (apply.cmake) computes it.
//!
//! One file, included with `#[path]` by two build scripts, so that what they
//! record cannot drift apart: runners/build.rs (the workers' runtime reports,
//! `runtime.build` in a receipt) and harness/build.rs (the compatible runtime
//! a derivation receipt names). It is not a module of the `runners` crate:
//! the harness may not depend on the workers (ARCHITECTURE.md).

use sha2::{Digest, Sha256};
use std::path::Path;

/// The patches, then the sources copied as they are: apply.cmake's order.
pub const PATCHES: [&str; 8] = [
    "0001-external-encoder-only.patch",
    "0002-bounded-state.patch",
    "0003-coreml-fail-closed.patch",
    "0004-encoder-only-process.patch",
    "0005-lean-encoder-pair.patch",
    "0006-coreml-placement.patch",
    "whisper-memqual-output.h",
    "whisper-memqual-placement.h",
];

/// `package`'s version and checksum in the lock file's text; empty when the
/// lock file or the package is absent (a build outside both workspaces),
/// which the report then says.
pub fn locked(lock: &str, package: &str) -> (String, String) {
    let Ok(table) = lock.parse::<toml::Table>() else {
        return Default::default();
    };
    let found = table
        .get("package")
        .and_then(|p| p.as_array())
        .and_then(|packages| {
            packages
                .iter()
                .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(package))
        });
    let field = |k: &str| {
        found
            .and_then(|p| p.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    (field("version"), field("checksum"))
}

/// Each file of the patch set in `dir` with its SHA-256 (lowercase hex), in
/// [`PATCHES`] order, and the set's digest: the SHA-256 of the lines
/// `<sha256>  <name>\n`, in that order. A missing file fails the build.
pub fn patch_set(dir: &Path) -> (Vec<(String, String)>, String) {
    let mut manifest = String::new();
    let mut files = Vec::new();
    for name in PATCHES {
        let path = dir.join(name);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let sha = format!("{:x}", Sha256::digest(&bytes));
        manifest.push_str(&format!("{sha}  {name}\n"));
        files.push((name.to_string(), sha));
    }
    let digest = format!("{:x}", Sha256::digest(manifest.as_bytes()));
    (files, digest)
}

/// Files as one environment value: `name=sha256;name=sha256…`.
pub fn joined(files: &[(String, String)]) -> String {
    files
        .iter()
        .map(|(name, sha)| format!("{name}={sha}"))
        .collect::<Vec<_>>()
        .join(";")
}
