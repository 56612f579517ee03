//! The runtime's build identity, for the workers' runtime reports:
//! whisper-rs-sys's and ct2rs's versions and registry checksums from the
//! lock file this build resolved (the main workspace's, or runners/patched's
//! for the patched worker, which has no ct2rs), and with the `whisper-patch` feature the SHA-256 of each
//! file of memqual's patch set (runners/whisper-patch) and the set's digest,
//! computed exactly as its CMake step computes it, so the worker can refuse
//! a library patched with another set. The reading itself is
//! runtime_source.rs, which harness/build.rs shares.

#[path = "runtime_source.rs"]
mod runtime_source;

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=whisper-patch");
    println!("cargo:rerun-if-changed=runtime_source.rs");
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
        let (version, checksum) = runtime_source::locked(&text, package);
        println!("cargo:rustc-env={var}_VERSION={version}");
        println!("cargo:rustc-env={var}_CHECKSUM={checksum}");
    }
    if !patched {
        return;
    }
    let (files, digest) = runtime_source::patch_set(Path::new("whisper-patch"));
    println!("cargo:rustc-env=MEMQUAL_WHISPER_PATCH_DIGEST={digest}");
    println!(
        "cargo:rustc-env=MEMQUAL_WHISPER_PATCH_FILES={}",
        runtime_source::joined(&files)
    );
}
