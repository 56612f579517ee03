//! With the `whisper-patch` feature: the digest of memqual's whisper.cpp patch
//! set (runners/whisper-patch), computed exactly as its CMake step computes
//! it, so the worker can refuse a library patched with another set.

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
    if std::env::var_os("CARGO_FEATURE_WHISPER_PATCH").is_none() {
        return;
    }
    let dir = Path::new("whisper-patch");
    let mut manifest = String::new();
    for name in PATCHES {
        let path = dir.join(name);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        manifest.push_str(&format!("{:x}  {name}\n", Sha256::digest(&bytes)));
    }
    let digest = format!("{:x}", Sha256::digest(manifest.as_bytes()));
    println!("cargo:rustc-env=MEMQUAL_WHISPER_PATCH_DIGEST={digest}");
}
