//! Sealing a run directory, and checking a seal.
//!
//! What is hashed (SHA-256 throughout):
//! - `manifest.json` lists every regular file of the run directory except
//!   `receipt.json` and `manifest.json` itself, by relative path (`/`
//!   separators, sorted by bytes), with its size and the digest of its bytes.
//!   The manifest is written as canonical JSON.
//! - The receipt's `seal.manifest_sha256` is the digest of the bytes of
//!   `manifest.json`.
//! - The receipt's `seal.receipt_sha256` is the digest of the canonical
//!   JSON of the receipt with `seal.receipt_sha256` set to the empty string.
//! - `receipt.json` holds exactly the canonical JSON of the sealed receipt.
//!
//! Canonical JSON: UTF-8, no insignificant whitespace, object keys sorted by
//! their UTF-8 bytes, strings and numbers as `serde_json` writes them (the
//! shortest text that reads back to the same value). Any object key order
//! or spacing a parser accepts therefore hashes the same only if the values
//! are the same.

use crate::receipt::Receipt;
use crate::record::files;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// Version of the manifest format.
pub const MANIFEST_FORMAT_VERSION: &str = "1.0";

/// The receipt's seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Seal {
    pub algorithm: String,
    /// SHA-256 of the bytes of `manifest.json`.
    pub manifest_sha256: String,
    /// SHA-256 of the canonical receipt with this field empty.
    pub receipt_sha256: String,
}

/// One file of the run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestEntry {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    pub format_version: String,
    pub files: Vec<ManifestEntry>,
}

/// Why a run directory could not be sealed or checked.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serialize the {what}: {reason}")]
    Serialize { what: &'static str, reason: String },
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn file_sha256(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((total, hex(&hasher.finalize())))
}

/// Write `value` as canonical JSON (see the module documentation).
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&map[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn to_value<T: Serialize>(what: &'static str, t: &T) -> Result<serde_json::Value, SealError> {
    serde_json::to_value(t).map_err(|e| SealError::Serialize {
        what,
        reason: e.to_string(),
    })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SealError + '_ {
    move |source| SealError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Every regular file under `dir` except the receipt and the manifest,
/// as sorted relative paths.
fn list_files(dir: &Path) -> Result<Vec<String>, SealError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(io(&d))? {
            let entry = entry.map_err(io(&d))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                if rel != files::RECEIPT && rel != files::MANIFEST {
                    out.push(rel);
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Hash every file of the run directory.
pub fn manifest(dir: &Path) -> Result<Manifest, SealError> {
    let mut entries = Vec::new();
    for rel in list_files(dir)? {
        let path = dir.join(&rel);
        let (bytes, sha256) = file_sha256(&path).map_err(io(&path))?;
        entries.push(ManifestEntry {
            path: rel,
            bytes,
            sha256,
        });
    }
    Ok(Manifest {
        format_version: MANIFEST_FORMAT_VERSION.to_string(),
        files: entries,
    })
}

/// The digest the receipt's own seal field must hold.
pub fn receipt_digest(receipt: &Receipt) -> Result<String, SealError> {
    let mut value = to_value("receipt", receipt)?;
    if let Some(seal) = value.get_mut("seal").and_then(|s| s.as_object_mut()) {
        seal.insert(
            "receipt_sha256".into(),
            serde_json::Value::String(String::new()),
        );
    }
    Ok(sha256_hex(canonical_json(&value).as_bytes()))
}

/// Seal `receipt` over the run directory: write `manifest.json`, fill the
/// seal, write `receipt.json` as canonical JSON. Call it again after adding
/// a file to the run directory.
pub fn seal(dir: &Path, receipt: &mut Receipt) -> Result<(), SealError> {
    let manifest = manifest(dir)?;
    let manifest_text = canonical_json(&to_value("manifest", &manifest)?);
    let manifest_path = dir.join(files::MANIFEST);
    std::fs::write(&manifest_path, &manifest_text).map_err(io(&manifest_path))?;
    receipt.seal = Some(Seal {
        algorithm: "sha256".into(),
        manifest_sha256: sha256_hex(manifest_text.as_bytes()),
        receipt_sha256: String::new(),
    });
    let digest = receipt_digest(receipt)?;
    if let Some(seal) = receipt.seal.as_mut() {
        seal.receipt_sha256 = digest;
    }
    let text = canonical_json(&to_value("receipt", receipt)?);
    let receipt_path = dir.join(files::RECEIPT);
    std::fs::write(&receipt_path, text).map_err(io(&receipt_path))
}

/// What `verify` found wrong with one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub path: String,
    /// `changed`, `missing`, `added`, or `invalid` (unreadable or not canonical).
    pub kind: String,
    pub detail: String,
}

/// Check the seal of the run in `dir`; an empty list means it holds.
pub fn verify(dir: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut problem = |path: &str, kind: &str, detail: String| {
        problems.push(Problem {
            path: path.to_string(),
            kind: kind.to_string(),
            detail,
        })
    };
    let receipt_path = dir.join(files::RECEIPT);
    let receipt: Option<(Receipt, String)> = match std::fs::read_to_string(&receipt_path) {
        Err(e) => {
            problem(files::RECEIPT, "missing", e.to_string());
            None
        }
        Ok(text) => match serde_json::from_str::<Receipt>(&text) {
            Err(e) => {
                problem(files::RECEIPT, "invalid", format!("not a receipt: {e}"));
                None
            }
            Ok(r) => Some((r, text)),
        },
    };
    let mut manifest_digest = None;
    if let Some((receipt, text)) = &receipt {
        // The digest covers the parsed value; the bytes must also be exactly
        // the canonical form the seal wrote (`1e5` and `1E5` parse alike).
        if let Ok(value) = serde_json::to_value(receipt)
            && canonical_json(&value) != *text
        {
            problem(
                files::RECEIPT,
                "changed",
                "its bytes are not the canonical form the seal wrote".into(),
            );
        }
        match &receipt.seal {
            None => problem(
                files::RECEIPT,
                "invalid",
                "the receipt is not sealed".into(),
            ),
            Some(seal) => {
                manifest_digest = Some(seal.manifest_sha256.clone());
                match receipt_digest(receipt) {
                    Ok(d) if d == seal.receipt_sha256 => {}
                    Ok(d) => problem(
                        files::RECEIPT,
                        "changed",
                        format!("its digest is {d}, the seal says {}", seal.receipt_sha256),
                    ),
                    Err(e) => problem(files::RECEIPT, "invalid", e.to_string()),
                }
                let canonical =
                    serde_json::from_str::<serde_json::Value>(text).map(|v| canonical_json(&v));
                if canonical.as_deref().ok() != Some(text.as_str()) {
                    problem(
                        files::RECEIPT,
                        "changed",
                        "its bytes are not the canonical JSON of its content".into(),
                    );
                }
            }
        }
    }
    let manifest_path = dir.join(files::MANIFEST);
    let manifest: Option<Manifest> = match std::fs::read(&manifest_path) {
        Err(e) => {
            problem(files::MANIFEST, "missing", e.to_string());
            None
        }
        Ok(bytes) => {
            let digest = sha256_hex(&bytes);
            if let Some(expected) = &manifest_digest
                && &digest != expected
            {
                problem(
                    files::MANIFEST,
                    "changed",
                    format!("its digest is {digest}, the receipt's seal says {expected}"),
                );
            }
            match serde_json::from_slice::<Manifest>(&bytes) {
                Ok(m) => Some(m),
                Err(e) => {
                    problem(files::MANIFEST, "invalid", format!("not a manifest: {e}"));
                    None
                }
            }
        }
    };
    let Some(manifest) = manifest else {
        return problems;
    };
    for entry in &manifest.files {
        let path = dir.join(&entry.path);
        match file_sha256(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problem(&entry.path, "missing", "listed in the manifest".into())
            }
            Err(e) => problem(&entry.path, "invalid", e.to_string()),
            Ok((bytes, sha)) if sha != entry.sha256 => problem(
                &entry.path,
                "changed",
                format!(
                    "{bytes} bytes with digest {sha}; the manifest says {} bytes with {}",
                    entry.bytes, entry.sha256
                ),
            ),
            Ok(_) => {}
        }
    }
    match list_files(dir) {
        Ok(present) => {
            for rel in present {
                if !manifest.files.iter().any(|e| e.path == rel) {
                    problem(&rel, "added", "not in the manifest".into());
                }
            }
        }
        Err(e) => problem(".", "invalid", e.to_string()),
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{ "b": [1, 2.5, {"z": null, "a": "x\"y"}], "a": true }"#)
                .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":true,"b":[1,2.5,{"a":"x\"y","z":null}]}"#
        );
    }

    #[test]
    fn floats_read_back_to_the_same_canonical_text() {
        // Needs serde_json's `float_roundtrip`: without it some of these
        // parse one ulp off and a sealed receipt no longer verifies.
        for text in [
            "0.30000000000000004",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
            "5e-324",
            "0.1234567890123456789",
            "9007199254740993.0",
        ] {
            let v: f64 = text.parse().unwrap();
            let written = serde_json::Value::from(v).to_string();
            let back: serde_json::Value = serde_json::from_str(&written).unwrap();
            assert_eq!(canonical_json(&back), written, "{text}");
            assert_eq!(back.as_f64(), Some(v), "{text}");
        }
    }

    #[test]
    fn sha256_of_a_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
