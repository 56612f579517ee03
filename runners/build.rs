//! The runtime's build identity, for the worker's runtime report:
//! whisper-rs-sys's version and registry checksum from the lock file this
//! build resolved (the main workspace's, or runners/patched's for the
//! patched worker), and with the `whisper-patch` feature the SHA-256 of each
//! file of memqual's patch set (runners/whisper-patch) and the set's digest,
//! computed exactly as its CMake step computes it, so the worker can refuse
//! a library patched with another set.

use sha2::{Digest, Sha256};
use std::path::Path;

/// The patches, then the sources copied as they are: apply.cmake's order.
const PATCHES: [&str; 4] = [
    "0001-external-encoder-only.patch",
    "0002-bounded-state.patch",
    "0003-coreml-fail-closed.patch",
    "whisper-memqual-output.h",
];

fn main() {
    println!("cargo:rerun-if-changed=whisper-patch");
    let patched = std::env::var_os("CARGO_FEATURE_WHISPER_PATCH").is_some();
    lock_identity(if patched {
        "patched/Cargo.lock"
    } else {
        "../Cargo.lock"
    });
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

/// whisper-rs-sys's version and checksum in `lock` (relative to this crate);
/// empty when the lock file or the package is absent (a build outside both
/// workspaces), which the report then says.
fn lock_identity(lock: &str) {
    println!("cargo:rerun-if-changed={lock}");
    let (mut version, mut checksum) = (String::new(), String::new());
    if let Ok(text) = std::fs::read_to_string(lock)
        && let Ok(table) = text.parse::<toml::Table>()
        && let Some(packages) = table.get("package").and_then(|p| p.as_array())
        && let Some(sys) = packages
            .iter()
            .find(|p| p.get("name").and_then(|n| n.as_str()) == Some("whisper-rs-sys"))
    {
        let field = |k: &str| {
            sys.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        version = field("version");
        checksum = field("checksum");
    }
    println!("cargo:rustc-env=MEMQUAL_WHISPER_RS_SYS_VERSION={version}");
    println!("cargo:rustc-env=MEMQUAL_WHISPER_RS_SYS_CHECKSUM={checksum}");
}
