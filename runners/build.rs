//! The runtime's build identity, for the workers' runtime reports:
//! whisper-rs-sys's and ct2rs's versions and registry checksums from the
//! lock file this build resolved (the main workspace's, or runners/patched's
//! for the patched worker, which has no ct2rs), and with the `whisper-patch` feature the SHA-256 of each
//! file of memqual's patch set (runners/whisper-patch) and the set's digest,
//! computed exactly as its CMake step computes it, so the worker can refuse
//! a library patched with another set.

use sha2::{Digest, Sha256};
use std::path::Path;

/// The patches, then the sources copied as they are: apply.cmake's order.
const PATCHES: [&str; 5] = [
    "0001-external-encoder-only.patch",
    "0002-bounded-state.patch",
    "0003-coreml-fail-closed.patch",
    "0004-encoder-only-process.patch",
    "whisper-memqual-output.h",
];

fn main() {
    println!("cargo:rerun-if-changed=whisper-patch");
    let patched = std::env::var_os("CARGO_FEATURE_WHISPER_PATCH").is_some();
    let lock = if patched {
        "patched/Cargo.lock"
    } else {
        "../Cargo.lock"
    };
    println!("cargo:rerun-if-changed={lock}");
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    for (package, var) in [
        ("whisper-rs-sys", "MEMQUAL_WHISPER_RS_SYS"),
        ("ct2rs", "MEMQUAL_CT2RS"),
    ] {
        let (version, checksum) = locked(&text, package);
        println!("cargo:rustc-env={var}_VERSION={version}");
        println!("cargo:rustc-env={var}_CHECKSUM={checksum}");
    }
    if !patched {
        return;
    }
    let dir = Path::new("whisper-patch");
    let mut manifest = String::new();
    let mut files = Vec::new();
    for name in PATCHES {
        let path = dir.join(name);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let sha = format!("{:x}", Sha256::digest(&bytes));
        manifest.push_str(&format!("{sha}  {name}\n"));
        files.push(format!("{name}={sha}"));
    }
    let digest = format!("{:x}", Sha256::digest(manifest.as_bytes()));
    println!("cargo:rustc-env=MEMQUAL_WHISPER_PATCH_DIGEST={digest}");
    println!(
        "cargo:rustc-env=MEMQUAL_WHISPER_PATCH_FILES={}",
        files.join(";")
    );
}

/// `package`'s version and checksum in the lock file's text; empty when the
/// lock file or the package is absent (a build outside both workspaces),
/// which the report then says.
fn locked(lock: &str, package: &str) -> (String, String) {
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
