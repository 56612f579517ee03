//! Core ML encoders built from a GGML model's own encoder tensors:
//! `memqual fixtures model tiny.en-coreml` (tiny.en's encoder, dense and
//! palettized, each pinned by its tree digest) and `memqual fixtures
//! coreml-encoder MODEL OUT` (any GGML F16/F32 model, unpinned).
//!
//! The builder is the project's script `fixtures/coreml/build_encoder.py`
//! (embedded in the binary), run in a virtual environment memqual creates in
//! its cache (`<cache>/coreml/venv-<digest of the requirements>`) with the
//! exact packages of `fixtures/coreml/requirements.txt`, installed from PyPI
//! with pip, like `.cargo/cmake` installs CMake. A package is built into a
//! fresh folder beside the cache's models, read back (`coreml-package`),
//! digested, checked against its pin and only then renamed into place.

use crate::wheels::Progress;
use anyhow::{Context, bail};
use coreml_package::read_model;
use sampler::captures::tree_digest;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The builder script, as committed.
pub const SCRIPT: &str = include_str!("../../fixtures/coreml/build_encoder.py");
/// The exact packages it runs with.
pub const REQUIREMENTS: &str = include_str!("../../fixtures/coreml/requirements.txt");

/// The name `memqual fixtures model` takes.
pub const TINY_EN_COREML: &str = "tiny.en-coreml";

/// One pinned variant of tiny.en's encoder.
struct Variant {
    /// `dense` or `palettized-6bit`.
    name: &'static str,
    /// The package's folder name in `<cache>/models/`.
    dir: &'static str,
    palettize_bits: Option<u8>,
    /// The `memqual-tree-v1` digest of the package.
    tree_sha256: &'static str,
}

// Digests: built on x86-64 Linux, CPython 3.11, with requirements.txt's
// packages, from tiny.en's pinned GGML F16 file.
const TINY_EN_VARIANTS: [Variant; 2] = [
    Variant {
        name: "dense",
        dir: "ggml-tiny.en-encoder.mlpackage",
        palettize_bits: None,
        tree_sha256: "476b97a8126b54de6c963bd15af3e021b3a8a4a201e7fecf7a23186479ca5171",
    },
    Variant {
        name: "palettized-6bit",
        dir: "ggml-tiny.en-encoder-pal6.mlpackage",
        palettize_bits: Some(6),
        tree_sha256: "53d63c7b2b127ed031438a146a4f7daa515c1597da7857ad9f01f933f1c80a73",
    },
];

/// One built encoder package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderPackage {
    /// `dense` or `palettized-6bit` (`custom` for `coreml-encoder`).
    pub variant: String,
    /// The `.mlpackage` directory.
    pub path: PathBuf,
    /// Its `memqual-tree-v1` SHA-256 (what `memqual artifact inspect` prints).
    pub tree_sha256: String,
    /// Bytes of its files.
    pub bytes: u64,
    /// Index width of the palettized weights, if palettized.
    pub palettize_bits: Option<u8>,
    /// Encoder positions it was built for, when fewer than the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_ctx: Option<u32>,
}

/// What `memqual fixtures model tiny.en-coreml` laid out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoremlEncoders {
    /// `tiny.en-coreml`.
    pub model: String,
    /// The GGML model the encoder weights come from.
    pub source: PathBuf,
    /// Its SHA-256 (the pinned tiny.en digest).
    pub source_sha256: String,
    /// The packages, dense first.
    pub packages: Vec<EncoderPackage>,
    /// The Python packages the builder ran with (requirements.txt's pins).
    pub python_packages: Vec<String>,
}

fn pins() -> Vec<String> {
    REQUIREMENTS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Holds `<cache>/coreml/.lock` exclusively while it lives: one memqual at a
/// time creates the environment or builds into the cache (parallel tests
/// and commands would otherwise remove each other's half-made venv).
pub struct CacheLock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

/// Wait for the Core ML cache lock.
pub fn lock_cache(cache: &Path) -> anyhow::Result<CacheLock> {
    let dir = cache.join("coreml");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map(CacheLock)
        .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The builder's environment in the cache, created once per requirements
/// set: the venv is built in place and marked complete last, so an
/// interrupted install is redone; under the cache lock.
pub fn ensure_venv(cache: &Path, progress: Progress) -> anyhow::Result<PathBuf> {
    let _lock = lock_cache(cache)?;
    venv_locked(cache, progress)
}

fn venv_locked(cache: &Path, progress: Progress) -> anyhow::Result<PathBuf> {
    let tag = hex(&Sha256::digest(REQUIREMENTS.as_bytes())[..6]);
    let dir = cache.join("coreml").join(format!("venv-{tag}"));
    let python = dir.join("bin").join("python");
    let done = dir.join(".complete");
    if done.is_file() && python.exists() {
        return Ok(python);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove the incomplete {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let spinner = progress.spinner(format!(
        "installing coremltools and numpy from PyPI into {} (once)",
        dir.display()
    ));
    // CPython 3.11 made the pins; coremltools 9.0 has wheels for 3.10 to
    // 3.13, and numpy 2.4 needs 3.11 or later.
    let mut made = None;
    for candidate in ["python3.11", "python3.12", "python3.13", "python3"] {
        match Command::new(candidate)
            .arg("-m")
            .arg("venv")
            .arg(&dir)
            .output()
        {
            Ok(out) if out.status.success() => {
                made = Some(candidate);
                break;
            }
            _ => continue,
        }
    }
    let Some(interpreter) = made else {
        spinner.finish_and_clear();
        bail!(
            "cannot create a Python virtual environment in {}: install Python 3.11 to 3.13 with its venv module \
             (Debian: apt install python3-venv; macOS: xcode-select --install) and retry",
            dir.display()
        );
    };
    let requirements = dir.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)
        .with_context(|| format!("cannot write {}", requirements.display()))?;
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "-r",
        ])
        .arg(&requirements)
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    spinner.finish_and_clear();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(4).collect();
        bail!(
            "pip could not install the Core ML builder's packages ({}) with {interpreter} into {} \
             (no network, or no wheel for this Python?): {}",
            pins().join(" "),
            dir.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    std::fs::write(&done, b"").with_context(|| format!("cannot write {}", done.display()))?;
    progress.say(&format!(
        "Core ML builder environment ready: {}",
        dir.display()
    ));
    Ok(python)
}

/// Run the builder: `model` (GGML) into `out` (a `.mlpackage` that must not exist).
fn run_builder(
    python: &Path,
    work: &Path,
    model: &Path,
    out: &Path,
    shape: Shape,
    source_sha256: &str,
) -> anyhow::Result<()> {
    let script = work.join("build_encoder.py");
    std::fs::write(&script, SCRIPT)
        .with_context(|| format!("cannot write {}", script.display()))?;
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(model)
        .arg(out)
        .arg("--source-sha256")
        .arg(source_sha256);
    if let Some(bits) = shape.palettize_bits {
        cmd.arg("--palettize-bits").arg(bits.to_string());
    }
    if let Some(n) = shape.audio_ctx {
        cmd.arg("--audio-ctx").arg(n.to_string());
    }
    let output = cmd
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.starts_with("Failed to load _ML"))
            .rev()
            .take(6)
            .collect();
        bail!(
            "building the Core ML encoder of {} failed ({}): {}",
            model.display(),
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(())
}

/// Build one package into a fresh folder under `parent`, read it back and
/// digest it: (the folder holding it, the package inside, its digest, bytes).
fn build_checked(
    python: &Path,
    parent: &Path,
    model: &Path,
    name: &str,
    shape: Shape,
    source_sha256: &str,
) -> anyhow::Result<(tempfile::TempDir, PathBuf, String, u64)> {
    let bits = shape.palettize_bits;
    let work = tempfile::Builder::new()
        .prefix(".coreml-build-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a build folder in {}", parent.display()))?;
    let package = work.path().join(name);
    run_builder(python, work.path(), model, &package, shape, source_sha256)?;
    let report = read_model(&package)
        .with_context(|| format!("the built package {} does not read back", package.display()))?;
    let tree =
        tree_digest(&package).with_context(|| format!("cannot digest {}", package.display()))?;
    if report.weights.as_ref().map(|w| w.is_palettized()) != Some(bits.is_some()) {
        bail!(
            "the built package {} is {}palettized, but {}",
            package.display(),
            if bits.is_some() { "not " } else { "" },
            if bits.is_some() {
                "palettizing was asked for"
            } else {
                "it should be dense"
            }
        );
    }
    Ok((work, package, tree.sha256, tree.file_bytes))
}

/// What a package is built as, beyond the model's own encoder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Palettize the weights to 2^N-entry tables.
    pub palettize_bits: Option<u8>,
    /// Encoder positions (whisper.cpp's `audio_ctx`), else the model's.
    pub audio_ctx: Option<u32>,
}

/// The verified GGML model an encoder is built from.
pub struct Source<'a> {
    /// The GGML file.
    pub path: &'a Path,
    /// Its verified SHA-256.
    pub sha256: &'a str,
}

/// `memqual fixtures model tiny.en-coreml`: tiny.en's encoder as Core ML
/// packages (dense and 6-bit palettized) in `<cache>/models/`, each built
/// only if the cached one is absent or does not match its pin. `source` is
/// the cached, verified GGML tiny.en.
pub fn ensure_tiny_en(
    cache: &Path,
    source: &Source<'_>,
    progress: Progress,
) -> anyhow::Result<CoremlEncoders> {
    let _lock = lock_cache(cache)?;
    let models = cache.join("models");
    let mut packages = Vec::new();
    let mut python = None;
    for v in &TINY_EN_VARIANTS {
        let path = models.join(v.dir);
        if std::fs::symlink_metadata(&path).is_ok() {
            match tree_digest(&path) {
                Ok(t) if t.sha256 == v.tree_sha256 => {
                    packages.push(EncoderPackage {
                        variant: v.name.into(),
                        path,
                        tree_sha256: t.sha256,
                        bytes: t.file_bytes,
                        palettize_bits: v.palettize_bits,
                        audio_ctx: None,
                    });
                    continue;
                }
                Ok(t) => progress.say(&format!(
                    "{} has tree digest {}, not {}: rebuilding it",
                    path.display(),
                    t.sha256,
                    v.tree_sha256
                )),
                Err(e) => progress.say(&format!("{}: {e}: rebuilding it", path.display())),
            }
        }
        let py = match &python {
            Some(p) => p,
            None => python.insert(venv_locked(cache, progress)?),
        };
        let spinner = progress.spinner(format!("building tiny.en's Core ML encoder ({})", v.name));
        let built = build_checked(
            py,
            &models,
            source.path,
            v.dir,
            Shape {
                palettize_bits: v.palettize_bits,
                audio_ctx: None,
            },
            source.sha256,
        );
        spinner.finish_and_clear();
        let (work, package, digest, bytes) = built?;
        if digest != v.tree_sha256 {
            bail!(
                "the built {} ({}) has tree digest {digest}, but it is pinned at {}: the builder, its \
                 packages or this platform's numerics differ from the pin's; nothing was written. \
                 `memqual fixtures coreml-encoder {} OUT` builds one without a pin",
                v.dir,
                v.name,
                v.tree_sha256,
                source.path.display()
            );
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))?;
        }
        std::fs::rename(&package, &path)
            .with_context(|| format!("cannot move the package into {}", path.display()))?;
        drop(work);
        progress.say(&format!(
            "built {} ({}), tree digest verified",
            path.display(),
            v.name
        ));
        packages.push(EncoderPackage {
            variant: v.name.into(),
            path,
            tree_sha256: digest,
            bytes,
            palettize_bits: v.palettize_bits,
            audio_ctx: None,
        });
    }
    Ok(CoremlEncoders {
        model: TINY_EN_COREML.into(),
        source: source.path.to_path_buf(),
        source_sha256: source.sha256.to_owned(),
        packages,
        python_packages: pins(),
    })
}

/// `memqual fixtures coreml-encoder MODEL OUT`: the encoder of any GGML
/// F16/F32 model, unpinned (its digest is reported, not checked).
pub fn build_any(
    cache: &Path,
    model: &Path,
    out: &Path,
    shape: Shape,
    progress: Progress,
) -> anyhow::Result<EncoderPackage> {
    let bits = shape.palettize_bits;
    if std::fs::symlink_metadata(out).is_ok() {
        bail!("{} already exists; choose another path", out.display());
    }
    if out.extension().and_then(|e| e.to_str()) != Some("mlpackage") {
        bail!("{}: the output must end in .mlpackage", out.display());
    }
    run_dir::input::open(model)?;
    let inv = ggml_container::inspect(model, ggml_container::Expect::Full)
        .map_err(|e| anyhow::anyhow!("{} rejected: {e}", model.display()))?;
    let positions = inv.hparams.n_audio_ctx;
    if let Some(n) = shape.audio_ctx
        && (n == 0 || i64::from(n) > i64::from(positions))
    {
        bail!(
            "--audio-ctx {n}: {} has {positions} encoder positions; choose 1 to {positions}",
            model.display()
        );
    }
    let python = ensure_venv(cache, progress)?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .context("the output needs a UTF-8 file name")?;
    let spinner = progress.spinner(format!(
        "building the Core ML encoder of {}",
        model.display()
    ));
    let built = build_checked(&python, parent, model, name, shape, &inv.file_sha256);
    spinner.finish_and_clear();
    let (work, package, digest, bytes) = built?;
    std::fs::rename(&package, out)
        .with_context(|| format!("cannot move the package to {}", out.display()))?;
    drop(work);
    Ok(EncoderPackage {
        variant: match bits {
            Some(b) => format!("palettized-{b}bit"),
            None => "dense".into(),
        },
        path: out.to_path_buf(),
        tree_sha256: digest,
        bytes,
        palettize_bits: bits,
        audio_ctx: shape.audio_ctx,
    })
}
