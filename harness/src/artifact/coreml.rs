//! `memqual artifact inspect` of a Core ML model (a `.mlpackage` or
//! `.mlmodelc` directory): the reader is the `coreml-package` crate; this
//! module adds the tree digest (the same `memqual-tree-v1` digest the whisper
//! worker records for the sidecar it loads), the check against a GGML model's
//! dimensions (`--against`), and the output.

use super::{Outcome, print_json};
use anyhow::Context;
use coreml_package::whisper::{EncoderDims, Mismatch, check_encoder};
use coreml_package::{CoremlError, ModelReport, read_model};
use ggml_container::{Expect, inspect};
use sampler::captures::{TreeDigest, tree_digest};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The GGML model a Core ML encoder was checked against.
#[derive(Debug, Serialize, Deserialize)]
pub struct Against {
    /// The GGML file.
    pub model: PathBuf,
    /// Its SHA-256.
    pub sha256: String,
    /// The dimensions the encoder must have.
    pub dims: EncoderDims,
    /// Whether the encoder's features fit (no mismatch).
    pub fits: bool,
    /// Every mismatch, input first.
    pub mismatches: Vec<Mismatch>,
}

/// `--json` output of a Core ML inspection.
#[derive(Debug, Serialize, Deserialize)]
pub struct CoremlInspection {
    /// The model was read (and, with `--against`, fits).
    pub accepted: bool,
    /// What was read.
    #[serde(flatten)]
    pub model: ModelReport,
    /// The tree digest (`memqual-tree-v1`, see docs/commands.md).
    pub tree: TreeDigest,
    /// The check against a GGML model, with `--against`.
    pub against: Option<Against>,
}

/// `--json` output of a refused Core ML model.
#[derive(Debug, Serialize)]
struct Refusal<'a> {
    path: &'a Path,
    accepted: bool,
    rejection: String,
}

/// Whether `path` names a directory (following a link the user gave).
pub fn is_model_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

fn refused(path: &Path, reason: String, json: bool) -> anyhow::Result<Outcome> {
    if json {
        print_json(&Refusal {
            path,
            accepted: false,
            rejection: reason.clone(),
        })?;
    }
    note!("memqual: {} rejected: {reason}", path.display());
    Ok(Outcome::Rejected)
}

/// The encoder dimensions of a GGML model (a decoder-only derivative keeps them too).
fn dims_of(model: &Path) -> anyhow::Result<Result<(EncoderDims, String), String>> {
    run_dir::input::open(model)?;
    let inv = match inspect(model, Expect::Full) {
        Ok(inv) => inv,
        Err(full) => match inspect(model, Expect::DecoderOnly) {
            Ok(inv) => inv,
            Err(_) => return Ok(Err(format!("{} rejected: {full}", model.display()))),
        },
    };
    let h = &inv.hparams;
    Ok(Ok((
        EncoderDims {
            n_mels: i64::from(h.n_mels),
            n_audio_ctx: i64::from(h.n_audio_ctx),
            n_audio_state: i64::from(h.n_audio_state),
        },
        inv.file_sha256,
    )))
}

/// Inspect the Core ML model at `path`, checked against the GGML model
/// `against` when given. A model memqual refuses, or one that does not fit,
/// is a failed check (exit 1); a path that cannot be read at all is
/// memqual's failure.
pub fn main(path: &Path, against: Option<&Path>, json: bool) -> anyhow::Result<Outcome> {
    let model = match read_model(path) {
        Ok(m) => m,
        Err(CoremlError::Io { path: p, source }) if p == path => {
            return Err(source).with_context(|| format!("cannot read {}", path.display()));
        }
        Err(e) => return refused(path, e.to_string(), json),
    };
    let tree = match tree_digest(&model.path) {
        Ok(t) => t,
        Err(e) => return refused(path, e.to_string(), json),
    };
    let against = match against {
        None => None,
        Some(ggml) => match dims_of(ggml)? {
            Ok((dims, sha256)) => {
                let mismatches = check_encoder(&model, &dims);
                Some(Against {
                    model: ggml.to_path_buf(),
                    sha256,
                    dims,
                    fits: mismatches.is_empty(),
                    mismatches,
                })
            }
            Err(reason) => return refused(ggml, reason, json),
        },
    };
    let fits = against.as_ref().is_none_or(|a| a.fits);
    let first = against.as_ref().and_then(|a| {
        coreml_package::whisper::first_mismatch(&a.mismatches).map(|m| (a.model.clone(), m))
    });
    let out = CoremlInspection {
        accepted: fits,
        model,
        tree,
        against,
    };
    if json {
        print_json(&out)?;
    } else {
        out!("{}", super::human::coreml(&out));
    }
    match first {
        None => Ok(Outcome::Passed),
        Some((ggml, mismatch)) => {
            note!(
                "memqual: {} does not fit {}: {mismatch}",
                path.display(),
                ggml.display(),
            );
            Ok(Outcome::Rejected)
        }
    }
}
