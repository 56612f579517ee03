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
use std::fmt::Write;
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
        out!("{}", human(&out));
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

fn feature_line(f: &coreml_package::Feature) -> String {
    let dims: Vec<String> = f.shape.iter().map(i64::to_string).collect();
    format!(
        "{} ({}, {}, [{}]{})",
        f.name,
        f.kind,
        f.data_type.as_deref().unwrap_or("no data type"),
        dims.join(", "),
        if f.flexible_shape { ", flexible" } else { "" }
    )
}

/// `memqual artifact inspect` of a Core ML model.
fn human(i: &CoremlInspection) -> String {
    let m = &i.model;
    let mut s = String::new();
    let format = match m.format {
        coreml_package::Format::Mlpackage => "Core ML package (.mlpackage)",
        coreml_package::Format::Mlmodelc => "compiled Core ML model (.mlmodelc)",
    };
    let _ = writeln!(s, "{}: {format}", m.path.display());
    let _ = writeln!(
        s,
        "  tree: SHA-256 {} (memqual-tree-v1; {} files, {} folders)",
        i.tree.sha256, i.tree.files, i.tree.directories
    );
    let _ = writeln!(
        s,
        "  package size: {}",
        m.package_bytes
            .map_or("- (a compiled model)".into(), |b| format!(
                "{} bytes ({})",
                super::human::grouped(b),
                super::human::mb(b)
            ))
    );
    let _ = writeln!(
        s,
        "  compiled size: {}",
        m.compiled_bytes.map_or("not compiled".into(), |b| format!(
            "{} bytes ({})",
            super::human::grouped(b),
            super::human::mb(b)
        ))
    );
    let _ = writeln!(
        s,
        "  spec version: {}; model type: {}; opset: {}",
        m.spec_version.map_or("unknown".into(), |v| v.to_string()),
        m.model_type.as_deref().unwrap_or("unknown"),
        m.opset.as_deref().unwrap_or("unknown")
    );
    for f in &m.inputs {
        let _ = writeln!(s, "  input:  {}", feature_line(f));
    }
    for f in &m.outputs {
        let _ = writeln!(s, "  output: {}", feature_line(f));
    }
    match &m.weights {
        None => {
            let _ = writeln!(s, "  weights: not readable");
        }
        Some(w) => {
            let depth = w
                .bit_depth()
                .map_or("none found".into(), |b| format!("{b}-bit"));
            let _ = writeln!(
                s,
                "  weights: {} ({})",
                depth,
                if w.is_palettized() {
                    "palettized"
                } else {
                    "dense"
                }
            );
            for p in &w.palettized {
                let _ = writeln!(
                    s,
                    "    palettized {}-bit (a {}-entry table): {} tensors, {} weights",
                    p.bits,
                    1u64 << p.bits.min(63),
                    p.tensors,
                    super::human::grouped(p.elements)
                );
            }
            for d in &w.dense {
                let _ = writeln!(
                    s,
                    "    dense {}: {} tensors, {} weights",
                    d.data_type,
                    d.tensors,
                    super::human::grouped(d.elements)
                );
            }
            for (op, n) in &w.other_compressed {
                let _ = writeln!(s, "    {op}: {n} tensors");
            }
        }
    }
    if !m.operations.is_empty() {
        let ops: Vec<String> = m
            .operations
            .iter()
            .map(|(op, n)| format!("{op} {n}"))
            .collect();
        let _ = writeln!(s, "  operations: {}", ops.join(", "));
    }
    for n in &m.not_read {
        let _ = writeln!(s, "  not read: {} ({})", n.file, n.reason);
    }
    if let Some(a) = &i.against {
        let _ = writeln!(
            s,
            "  against {}: n_mels {}, n_audio_ctx {}, n_audio_state {}: {}",
            a.model.display(),
            a.dims.n_mels,
            a.dims.n_audio_ctx,
            a.dims.n_audio_state,
            if a.fits {
                "fits (input and output shapes as whisper.cpp binds them)"
            } else {
                "does not fit"
            }
        );
        for m in &a.mismatches {
            let _ = writeln!(
                s,
                "    {}: expected {}, found {}",
                m.what, m.expected, m.found
            );
        }
    }
    s
}
