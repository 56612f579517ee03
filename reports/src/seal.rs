//! Sealing a run directory, and checking a seal.
//!
//! What is hashed (SHA-256 throughout, canonical JSON per RFC 8785 — see
//! [`run_dir::digest`]):
//! - `raw-seal.json` holds the digest of every raw file, recorded by the run
//!   as each arm ended ([`run_dir::raw_seal`]); `memqual report` refuses to
//!   rebuild over a raw file that no longer matches it.
//! - `manifest.json` lists every regular file of the run directory except
//!   `receipt.json`, `manifest.json` and the signature, by relative path
//!   (`/` separators, sorted by bytes), with its size and digest. A link, a
//!   FIFO or a device anywhere in the run directory makes sealing fail.
//! - The receipt's `seal.manifest_sha256` is the digest of the bytes of
//!   `manifest.json`; `seal.receipt_sha256` is the digest of the canonical
//!   receipt with that field set to `""`; `receipt.json` holds exactly the
//!   canonical receipt.
//! - `receipt.json.minisig`, when present, is a minisign (Ed25519) signature
//!   of the bytes of `receipt.json` (see [`crate::sign`]).
//!
//! Without a signature the seal detects accidents, not forgery: anyone who
//! can write the directory can recompute every digest.

use crate::receipt::Receipt;
pub use crate::receipt::Seal;
use crate::record::files;
use run_dir::digest::{canonical_json, sha256_hex};
use run_dir::{Rel, RunDir, RunDirError, limits};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the manifest format (2: RFC 8785 canonical JSON).
pub const MANIFEST_FORMAT_VERSION: &str = "2.0";

/// One file of the run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestEntry {
    /// The file's path relative to the run directory, `/`-separated.
    pub path: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    /// `major.minor`: the `MANIFEST_FORMAT_VERSION` it was written with.
    pub format_version: String,
    /// Every file of the directory except the sealed document, the manifest and the signature, in path order.
    pub files: Vec<ManifestEntry>,
}

/// Why a run directory could not be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Reading or writing the run directory failed.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// A document could not be turned into canonical JSON.
    #[error("cannot serialize the {what}: {reason}")]
    Serialize {
        /// Which document (`receipt`, `manifest`, …).
        what: &'static str,
        /// The serializer's message.
        reason: String,
    },
    /// The directory holds something other than a regular file or folder.
    #[error(
        "{path} is a {what}; a run directory holds only regular files and folders. \
         Remove it (it is not part of the run) and try again"
    )]
    Irregular {
        /// The entry's path (the run directory joined with its relative path).
        path: String,
        /// What kind of entry it is, in words.
        what: String,
    },
}

/// Files the manifest leaves out: the sealed document (`receipt.json`, or a
/// fleet's `fleet.json`) and the manifest seal each other; the signature is
/// added after sealing.
fn unlisted(rel: &str, sealed: &str) -> bool {
    rel == sealed || rel == files::MANIFEST || rel == files::SIGNATURE
}

/// `value` as RFC 8785 canonical JSON; `what` names it in the error.
pub fn canonical<T: Serialize>(what: &'static str, value: &T) -> Result<String, SealError> {
    canonical_json(value).map_err(|reason| SealError::Serialize { what, reason })
}

/// The run directory's manifest: every listed file's size and SHA-256 (see
/// the module documentation).
///
/// A raw file still the size `raw-seal.json` recorded takes that digest
/// instead of being hashed again: `report` has just checked every raw file
/// against the raw seal (refusing a change unless resealed), and a run seals
/// each arm's files as the arm ends, so a second hash of the same bytes (the
/// bulk of a soak's directory) would only repeat it. Should such a file have
/// changed in between, the manifest keeps the digest the run sealed and
/// `verify`, which hashes every file, reports the change.
pub fn manifest(run: &RunDir) -> Result<Manifest, SealError> {
    let raw = run.raw_seal()?;
    let known: BTreeMap<&str, (u64, &str)> = raw
        .files
        .iter()
        .map(|f| (f.path.as_str(), (f.bytes, f.sha256.as_str())))
        .collect();
    manifest_of(run, files::RECEIPT, &known)
}

/// The manifest of a directory whose sealed document is `sealed`, taking
/// the digests in `known` (path → size, SHA-256) for files of that size.
pub fn manifest_of(
    run: &RunDir,
    sealed: &str,
    known: &BTreeMap<&str, (u64, &str)>,
) -> Result<Manifest, SealError> {
    let walk = run.walk(&Rel::root())?;
    if let Some(bad) = walk.irregular.first() {
        return Err(SealError::Irregular {
            path: run
                .display(&Rel::root())
                .join(&bad.path)
                .display()
                .to_string(),
            what: bad.what.clone(),
        });
    }
    let mut entries = Vec::with_capacity(walk.files.len());
    for file in walk.files {
        let path = file.rel.to_string();
        if unlisted(&path, sealed) {
            continue;
        }
        let (bytes, sha256) = match known.get(path.as_str()) {
            Some(&(bytes, sha256)) if bytes == file.size => (bytes, sha256.to_string()),
            _ => run.digest(&file.rel)?,
        };
        entries.push(ManifestEntry {
            path,
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
    let mut value = serde_json::to_value(receipt).map_err(|e| SealError::Serialize {
        what: "receipt",
        reason: e.to_string(),
    })?;
    if let Some(seal) = value.get_mut("seal").and_then(|s| s.as_object_mut()) {
        seal.insert(
            "receipt_sha256".into(),
            serde_json::Value::String(String::new()),
        );
    }
    Ok(sha256_hex(canonical("receipt", &value)?.as_bytes()))
}

/// Seal `receipt` over the run directory: write `manifest.json`, fill the
/// seal, write `receipt.json` as canonical JSON (each atomically). Call it
/// again after adding a file to the run directory. A signature made before
/// no longer matches and is removed.
pub fn seal(run: &RunDir, receipt: &mut Receipt) -> Result<(), SealError> {
    if run.has_file(&Rel::file(files::SIGNATURE))? {
        run.remove_tree(&Rel::file(files::SIGNATURE))?;
    }
    let manifest = manifest(run)?;
    let manifest_text = canonical("manifest", &manifest)?;
    run.write_bytes(&Rel::file(files::MANIFEST), manifest_text.as_bytes())?;
    receipt.seal = Some(Seal {
        algorithm: "sha256".into(),
        canonicalization: "RFC 8785".into(),
        manifest_sha256: sha256_hex(manifest_text.as_bytes()),
        receipt_sha256: String::new(),
    });
    let digest = receipt_digest(receipt)?;
    if let Some(seal) = receipt.seal.as_mut() {
        seal.receipt_sha256 = digest;
    }
    let text = canonical("receipt", receipt)?;
    // What is written must read back to the same canonical text, or verify
    // could never succeed (a number RFC 8785 cannot carry, say).
    let back: Receipt = serde_json::from_str(&text).map_err(|e| SealError::Serialize {
        what: "receipt",
        reason: format!("the canonical receipt does not read back: {e}"),
    })?;
    if canonical("receipt", &back)? != text || receipt_digest(&back)? != receipt_digest(receipt)? {
        return Err(SealError::Serialize {
            what: "receipt",
            reason: "the canonical receipt does not read back to itself".into(),
        });
    }
    run.write_bytes(&Rel::file(files::RECEIPT), text.as_bytes())?;
    Ok(())
}

/// What `verify` found wrong with one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The file, relative to the run (or fleet) directory.
    pub path: String,
    /// `changed`, `missing`, `added`, `invalid` (unreadable or not
    /// canonical), `irregular` (a link, FIFO or device), `resealed` (raw data
    /// accepted by `report --reseal` after the run) or `signature`.
    pub kind: String,
    /// What was found, in words (e.g. the digests that differ).
    pub detail: String,
}

/// The result of `verify`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// Empty when the seal holds.
    pub problems: Vec<Problem>,
    /// Files the manifest lists (all checked).
    pub files_checked: u64,
    /// Whether a signature was checked and held (`None`: no signature checked).
    pub signature: Option<crate::sign::SignatureCheck>,
    /// The receipt's integrity notes when it is marked incomplete (a run
    /// that stopped, files sealed by `report` rather than the run, a
    /// reseal); empty for a complete run. The seal may hold all the same.
    #[serde(default)]
    pub incomplete: Vec<String>,
}

impl Verification {
    /// True when no problem was found.
    pub fn holds(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The problems a verification found so far, in the order found.
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// One more problem: the file, its kind, what is wrong.
    pub fn add(&mut self, path: &str, kind: &str, detail: impl Into<String>) {
        self.0.push(Problem {
            path: path.to_string(),
            kind: kind.to_string(),
            detail: detail.into(),
        });
    }
}

/// Read and check the receipt: canonical bytes and its own digest. Returns
/// it (and the manifest digest it seals) when it could be read.
fn check_receipt(run: &RunDir, problems: &mut Problems) -> Option<(Receipt, Vec<u8>)> {
    let rel = Rel::file(files::RECEIPT);
    let bytes = match run.read_bytes(&rel, limits::RECEIPT) {
        Ok(Some(b)) => b,
        Ok(None) => {
            problems.add(
                files::RECEIPT,
                "missing",
                "no receipt: the run was never sealed",
            );
            return None;
        }
        Err(e) => {
            problems.add(files::RECEIPT, "invalid", e.to_string());
            return None;
        }
    };
    let receipt: Receipt = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            problems.add(files::RECEIPT, "invalid", format!("not a receipt: {e}"));
            return None;
        }
    };
    // The bytes must be exactly the canonical form of the typed receipt: a
    // renamed key (`"exit":null` → `"exiu":null`) parses to the same value
    // and digest, but not to the same bytes.
    let canonical_bytes = canonical_json(&receipt).ok();
    if canonical_bytes.as_deref().map(str::as_bytes) != Some(&bytes[..]) {
        problems.add(
            files::RECEIPT,
            "changed",
            "its bytes are not the canonical (RFC 8785) form the seal wrote",
        );
    }
    match &receipt.seal {
        None => problems.add(files::RECEIPT, "invalid", "the receipt is not sealed"),
        Some(seal) => match receipt_digest(&receipt) {
            Ok(d) if d == seal.receipt_sha256 => {}
            Ok(d) => problems.add(
                files::RECEIPT,
                "changed",
                format!("its digest is {d}, the seal says {}", seal.receipt_sha256),
            ),
            Err(e) => problems.add(files::RECEIPT, "invalid", e.to_string()),
        },
    }
    Some((receipt, bytes))
}

/// Read the manifest and check it against the seal's digest of it.
pub fn check_manifest(
    run: &RunDir,
    sealed: Option<&str>,
    problems: &mut Problems,
) -> Option<Manifest> {
    let bytes = match run.read_bytes(&Rel::file(files::MANIFEST), limits::SEAL_RECORD) {
        Ok(Some(b)) => b,
        Ok(None) => {
            problems.add(files::MANIFEST, "missing", "no manifest");
            return None;
        }
        Err(e) => {
            problems.add(files::MANIFEST, "invalid", e.to_string());
            return None;
        }
    };
    let digest = sha256_hex(&bytes);
    if let Some(expected) = sealed
        && digest != expected
    {
        problems.add(
            files::MANIFEST,
            "changed",
            format!("its digest is {digest}, the seal says {expected}"),
        );
    }
    match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(m) => Some(m),
        Err(e) => {
            problems.add(files::MANIFEST, "invalid", format!("not a manifest: {e}"));
            None
        }
    }
}

/// Check the seal of the run in `run`: the receipt's own digest, the
/// manifest's digest, every file against the manifest, nothing irregular or
/// unlisted, raw files against their source seal, and (with `pubkey`, or
/// when a signature is present) the signature. Linear in the number of files.
pub fn verify(run: &RunDir, pubkey: Option<&minisign::PublicKey>) -> Verification {
    let mut problems = Problems(Vec::new());
    let receipt = check_receipt(run, &mut problems);
    let sealed = receipt
        .as_ref()
        .and_then(|(r, _)| r.seal.as_ref())
        .map(|s| s.manifest_sha256.clone());
    let mut verification = Verification::default();
    let manifest = check_manifest(run, sealed.as_deref(), &mut problems);
    if let Some(manifest) = &manifest {
        check_files(run, manifest, files::RECEIPT, &mut problems);
        verification.files_checked = manifest.files.len() as u64;
    }
    check_raw_seal(run, manifest.as_ref(), &mut problems);
    if let Some((r, _)) = &receipt {
        check_phase_rows(run, r, &mut problems);
        if !r.integrity.complete {
            verification.incomplete = r.integrity.notes.clone();
        }
    }
    if let Some((_, bytes)) = &receipt {
        verification.signature = crate::sign::check(run, bytes, pubkey, |path, detail| {
            problems.add(path, "signature", detail)
        });
    }
    verification.problems = problems.0;
    verification
}

/// Each long arm's `phase-rows.jsonl` against the digest its receipt holds
/// (the manifest lists it too; this names what the receipt rests on).
fn check_phase_rows(run: &RunDir, receipt: &Receipt, problems: &mut Problems) {
    for file in receipt.arms.iter().filter_map(|a| a.phase_rows.as_ref()) {
        let found = Rel::parse(&file.path)
            .map_err(|e| e.to_string())
            .and_then(|rel| run.digest(&rel).map_err(|e| e.to_string()));
        match found {
            Ok((_, sha)) if sha == file.sha256 => {}
            Ok((bytes, sha)) => problems.add(
                &file.path,
                "changed",
                format!(
                    "{bytes} bytes with digest {sha}; the receipt's phase_rows says {}",
                    file.sha256
                ),
            ),
            Err(e) => problems.add(&file.path, "invalid", e),
        }
    }
}

/// Every listed file against its digest; anything present but unlisted or
/// irregular is a problem. `sealed` is the document that seals the manifest.
pub fn check_files(run: &RunDir, manifest: &Manifest, sealed: &str, problems: &mut Problems) {
    let mut listed: BTreeMap<&str, &ManifestEntry> = BTreeMap::new();
    for entry in &manifest.files {
        match Rel::parse(&entry.path) {
            Ok(_) if unlisted(&entry.path, sealed) => problems.add(
                &entry.path,
                "invalid",
                "the manifest may not list this file",
            ),
            Ok(_) => {
                if listed.insert(&entry.path, entry).is_some() {
                    problems.add(&entry.path, "invalid", "listed twice in the manifest");
                }
            }
            Err(e) => problems.add(&entry.path, "invalid", e.to_string()),
        }
    }
    let walk = match run.walk(&Rel::root()) {
        Ok(w) => w,
        Err(e) => {
            problems.add(".", "invalid", e.to_string());
            return;
        }
    };
    for bad in &walk.irregular {
        problems.add(
            &bad.path,
            "irregular",
            format!(
                "a {}; a sealed run holds only regular files and folders",
                bad.what
            ),
        );
        listed.remove(bad.path.as_str());
    }
    for file in &walk.files {
        let path = file.rel.to_string();
        if unlisted(&path, sealed) {
            continue;
        }
        let Some(entry) = listed.remove(path.as_str()) else {
            problems.add(&path, "added", "not in the manifest");
            continue;
        };
        match run.digest(&file.rel) {
            Ok((bytes, sha)) if sha == entry.sha256 && bytes == entry.bytes => {}
            Ok((bytes, sha)) => problems.add(
                &path,
                "changed",
                format!(
                    "{bytes} bytes with digest {sha}; the manifest says {} bytes with {}",
                    entry.bytes, entry.sha256
                ),
            ),
            Err(e) => problems.add(&path, "invalid", e.to_string()),
        }
    }
    for path in listed.into_keys() {
        problems.add(path, "missing", "listed in the manifest");
    }
    // A folder is part of the run when it holds a file somewhere below it,
    // or is one the run's layout makes and may leave empty (an arm that
    // wrote nothing yet, its snapshots/ before the first snapshot). Any
    // other folder, however deep, was added after the run.
    let mut holding: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for file in &walk.files {
        let parts = file.rel.components();
        for k in 1..parts.len() {
            holding.insert(parts[..k].join("/"));
        }
    }
    let mut added: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for dir in &walk.dirs {
        let path = dir.to_string();
        // One problem per added tree: the folders below it are named by it.
        let parts = dir.components();
        if (1..parts.len()).any(|k| added.contains(&parts[..k].join("/"))) {
            continue;
        }
        if !holding.contains(&path) && !layout_folder(parts) {
            added.insert(path.clone());
            problems.add(
                &path,
                "added",
                "a folder that holds no file of the run and is not one the run makes",
            );
        }
    }
}

/// Whether a folder (by its path's names) is one a run, fleet or bisect
/// directory makes and may leave empty.
fn layout_folder(parts: &[String]) -> bool {
    use run_dir::names;
    const MAY_BE_EMPTY: &[&str] = &[
        names::SNAPSHOTS_DIR,
        names::HEAP_DIR,
        names::SCRATCH,
        names::OVERHEAD_DIR,
    ];
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        [top] => [names::ARMS, names::fleet::RUNS, names::bisect::PROBES].contains(top),
        [names::ARMS, _] => true,
        [names::ARMS, _, sub] => MAY_BE_EMPTY.contains(sub),
        [names::ARMS, _, names::OVERHEAD_DIR, _] => true,
        [names::ARMS, _, names::OVERHEAD_DIR, _, sub] => MAY_BE_EMPTY.contains(sub),
        _ => false,
    }
}

/// Raw files as the manifest lists them against the source seal; every
/// reseal is reported, since it accepted data changed after the run.
fn check_raw_seal(run: &RunDir, manifest: Option<&Manifest>, problems: &mut Problems) {
    let seal = match run.raw_seal() {
        Ok(s) => s,
        Err(e) => {
            problems.add(files::RAW_SEAL, "invalid", e.to_string());
            return;
        }
    };
    for reseal in &seal.reseals {
        let paths: Vec<&str> = reseal.changes.iter().map(|c| c.path.as_str()).collect();
        if reseal.seal_was_missing {
            problems.add(
                files::RAW_SEAL,
                "resealed",
                format!(
                    "raw-seal.json was missing and was rebuilt by `memqual report --reseal` at {} \
                     from the {} raw file(s) as found: nothing the run recorded could be checked",
                    reseal.at_utc,
                    paths.len()
                ),
            );
            continue;
        }
        problems.add(
            files::RAW_SEAL,
            "resealed",
            format!(
                "raw data changed after the run and was accepted by `memqual report --reseal` at {}: {}",
                reseal.at_utc,
                paths.join(", ")
            ),
        );
    }
    let Some(manifest) = manifest else { return };
    let listed: BTreeMap<&str, &ManifestEntry> = manifest
        .files
        .iter()
        .map(|e| (e.path.as_str(), e))
        .collect();
    for sealed in &seal.files {
        match listed.get(sealed.path.as_str()) {
            Some(e) if e.sha256 == sealed.sha256 => {}
            Some(_) => problems.add(
                &sealed.path,
                "changed",
                "differs from the digest the run recorded in raw-seal.json",
            ),
            None => problems.add(
                &sealed.path,
                "missing",
                "sealed by the run (raw-seal.json) but not in the manifest",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A sealed run directory holding `n` small files.
    fn sealed_with(n: usize) -> (tempfile::TempDir, RunDir) {
        let (tmp, run) = crate::testing::run();
        let arm = crate::testing::arm(&run, "a");
        // Plain writes: thousands of fsyncs would make the fixture, not
        // verify, the slow part.
        let dir = run.display(&arm);
        for i in 0..n {
            std::fs::write(dir.join(format!("f{i:06}")), b"x").unwrap();
        }
        let mut receipt = crate::testing::receipt();
        seal(&run, &mut receipt).unwrap();
        (tmp, run)
    }

    fn best_of_three(run: &RunDir) -> f64 {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                assert!(verify(run, None).holds());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Finding 10: matching each present file against the manifest by a
    /// linear search made verify quadratic (5.9 s for 40,000 files). With
    /// 8× the files a linear verify takes about 8× as long and a quadratic
    /// one 64×; the bound of 24× leaves a 3× margin for a busy host.
    #[test]
    fn verify_time_grows_linearly_with_the_number_of_files() {
        let (_a, small) = sealed_with(1_500);
        let (_b, big) = sealed_with(12_000);
        let (t_small, t_big) = (best_of_three(&small), best_of_three(&big));
        assert!(
            t_big < 24.0 * t_small,
            "1,500 files: {t_small:.4} s; 12,000 files: {t_big:.4} s"
        );
    }
}
