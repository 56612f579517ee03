//! The model file, opened once: checked from that open file, then handed to
//! whisper.cpp as the same open file ([`super::loader`]), so the bytes
//! whisper.cpp loads are the bytes that were checked.
//!
//! [`VerifiedModel::open`] refuses anything but a regular file (a FIFO or a
//! device is refused without blocking), then reads the whole file through
//! the strict GGML parse (or, for negative controls with `prevalidate =
//! false`, a plain digest), all from the one handle. Renaming another file
//! over the path afterwards changes nothing the worker reads; changing the
//! file in place is caught when the loaded bytes' digest is compared with
//! the checked one ([`VerifiedModel::confirm_loaded`]).

use super::loader::Consumed;
use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::os::unix::fs::FileExt;
use worker_contract::{ModelIdentity, ModelInput, ModelLayout};

/// The open model file and what its check found.
#[derive(Debug)]
pub struct VerifiedModel {
    file: File,
    /// Path, size, SHA-256 and parsed layout of the checked file, as reported to
    /// the harness.
    pub identity: ModelIdentity,
    /// The header the strict parse read (`None` for a negative control
    /// loaded without it).
    pub hparams: Option<ggml_container::Hparams>,
}

/// The loaded bytes are not the checked bytes.
#[derive(Debug, thiserror::Error)]
#[error(
    "model {path}: whisper.cpp loaded {loaded_bytes} bytes with SHA-256 {loaded_sha256}, \
     but the checked file had {bytes} bytes with SHA-256 {sha256}: the file changed between \
     the check and the load{reason}; nothing was run on it"
)]
pub struct NotTheCheckedBytes {
    /// Model path as given in the arm spec.
    pub path: String,
    /// Size in bytes of the checked file.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the checked file.
    pub sha256: String,
    /// Bytes whisper.cpp consumed through the loader.
    pub loaded_bytes: u64,
    /// Lowercase hex SHA-256 of the bytes whisper.cpp consumed.
    pub loaded_sha256: String,
    /// `" (read error: …)"` when a read error cut the load short.
    pub reason: String,
}

impl VerifiedModel {
    /// Open the model at `input.path` and check it from that handle.
    pub fn open(input: &ModelInput) -> anyhow::Result<Self> {
        let path = &input.path;
        // The error names the file and why (absent, a FIFO, …).
        let (mut file, len) = run_dir::input::open(path).context("model")?;
        let (identity, hparams) = if input.prevalidate {
            let (identity, hparams) = strict_identity(&mut file, len, input)?;
            (identity, Some(hparams))
        } else {
            (plain_identity(&mut file, input)?, None)
        };
        if let Some(expected) = &input.sha256
            && &identity.sha256 != expected
        {
            bail!(
                "model {} has SHA-256 {}, the arm expects {expected}",
                path.display(),
                identity.sha256
            );
        }
        Ok(VerifiedModel {
            file,
            identity,
            hparams,
        })
    }

    /// The open file whisper.cpp reads.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Compare what whisper.cpp consumed with what was checked.
    pub fn confirm_loaded(&self, consumed: &Consumed) -> Result<(), NotTheCheckedBytes> {
        let id = &self.identity;
        if consumed.error.is_none() && consumed.bytes == id.bytes && consumed.sha256 == id.sha256 {
            return Ok(());
        }
        Err(NotTheCheckedBytes {
            path: id.path.clone(),
            bytes: id.bytes,
            sha256: id.sha256.clone(),
            loaded_bytes: consumed.bytes,
            loaded_sha256: consumed.sha256.clone(),
            reason: consumed
                .error
                .as_ref()
                .map(|e| format!(" (read error: {e})"))
                .unwrap_or_default(),
        })
    }
}

/// The strict parse of every record: whisper.cpp's loader accepts truncated
/// and padded files and aborts the process on some malformed records.
fn strict_identity(
    file: &mut File,
    len: u64,
    input: &ModelInput,
) -> anyhow::Result<(ModelIdentity, ggml_container::Hparams)> {
    let path = &input.path;
    let expect = match input.layout {
        ModelLayout::Full => ggml_container::Expect::Full,
        ModelLayout::DecoderOnly => ggml_container::Expect::DecoderOnly,
        ModelLayout::EncoderOnly => ggml_container::Expect::EncoderOnly,
    };
    file.rewind()
        .with_context(|| format!("model {}", path.display()))?;
    let inventory =
        ggml_container::inspect_reader(BufReader::with_capacity(1 << 20, &*file), len, expect)
            .map_err(|e| {
                anyhow::anyhow!("model {} rejected before loading: {e}", path.display())
            })?;
    let h = &inventory.hparams;
    let identity = ModelIdentity {
        path: path.display().to_string(),
        bytes: inventory.file_len,
        sha256: inventory.file_sha256.clone(),
        ftype: h.ftype,
        n_vocab: h.n_vocab,
        n_audio_layer: h.n_audio_layer,
        n_text_layer: h.n_text_layer,
    };
    Ok((identity, *h))
}

/// Negative controls only: a plain digest and whatever header there is.
fn plain_identity(file: &mut File, input: &ModelInput) -> anyhow::Result<ModelIdentity> {
    let path = &input.path;
    let context = || format!("model {}", path.display());
    file.rewind().with_context(context)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).with_context(context)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
    }
    let mut head = [0u8; 48];
    let got = read_at_most(file, &mut head).with_context(context)?;
    let field = |i: usize| {
        head[..got]
            .get(4 * i..4 * i + 4)
            .map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    Ok(ModelIdentity {
        path: path.display().to_string(),
        bytes,
        sha256: ggml_container::digest::hex(&hash.finalize()),
        n_vocab: field(1),
        n_audio_layer: field(5),
        n_text_layer: field(9),
        ftype: field(11),
    })
}

/// Fill `buf` from offset 0 as far as the file allows.
fn read_at_most(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml_container::synthetic::{self, SyntheticSpec};

    fn input(path: &std::path::Path, prevalidate: bool) -> ModelInput {
        ModelInput {
            path: path.to_path_buf(),
            sha256: None,
            layout: ModelLayout::Full,
            prevalidate,
            coreml_sidecar: None,
            source: worker_contract::ModelSource::default(),
        }
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("model.bin");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for prevalidate in [true, false] {
            let err = VerifiedModel::open(&input(&fifo, prevalidate)).unwrap_err();
            assert!(
                format!("{err:#}").contains("is a FIFO (named pipe), not a regular file"),
                "{err:#}"
            );
            let err = VerifiedModel::open(&input(std::path::Path::new("/dev/zero"), prevalidate))
                .unwrap_err();
            assert!(format!("{err:#}").contains("a character device"), "{err:#}");
        }
    }

    #[test]
    fn both_checks_give_the_file_digest_and_the_expected_digest_is_enforced() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m.bin");
        let bytes = synthetic::to_bytes(&SyntheticSpec::loadable()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let digest = ggml_container::digest::sha256_hex(&bytes);
        for prevalidate in [true, false] {
            let m = VerifiedModel::open(&input(&path, prevalidate)).unwrap();
            assert_eq!(m.identity.sha256, digest);
            assert_eq!(m.identity.bytes, bytes.len() as u64);
            assert_eq!(
                m.identity.n_audio_layer,
                SyntheticSpec::loadable().hparams().n_audio_layer
            );
            let mut wrong = input(&path, prevalidate);
            wrong.sha256 = Some("0".repeat(64));
            let err = VerifiedModel::open(&wrong).unwrap_err().to_string();
            assert!(
                err.contains(&format!("has SHA-256 {digest}, the arm expects 000")),
                "{err}"
            );
        }
    }
}
