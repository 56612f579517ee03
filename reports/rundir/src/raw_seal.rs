//! The source seal: digests of every raw file, recorded by the harness as
//! each arm ends (and as each top-level raw file is written), in
//! `raw-seal.json`. `memqual report` rebuilds only derived files and first
//! checks every raw file against this seal; a change is refused unless the
//! user asks to reseal, which keeps what the seal said before.

use crate::{RunDir, RunDirError, limits, names, rel::Rel};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of `raw-seal.json`.
pub const FORMAT_VERSION: &str = "1.0";

/// Who recorded a file's digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SealedBy {
    /// The run, as the file was completed.
    Run,
    /// `memqual report`, for a file the run never sealed (the harness was
    /// killed mid-arm, or the disk filled before the seal was written).
    Report,
    /// `memqual report --reseal`, accepting a changed file.
    Reseal,
}

/// One sealed raw file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SealedFile {
    /// The path relative to the run directory (`arms/<id>/markers.jsonl`).
    pub path: String,
    /// Its size when sealed.
    pub bytes: u64,
    /// Its SHA-256 when sealed, lowercase hex.
    pub sha256: String,
    /// Who recorded the digest.
    pub sealed_by: SealedBy,
}

/// A file's state at a reseal: `None` when it was absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// The path relative to the run directory.
    pub path: String,
    /// What the seal held before (`None`: the file was not sealed).
    pub before: Option<FileDigest>,
    /// What the file holds now (`None`: it is gone).
    pub after: Option<FileDigest>,
}

/// Size and SHA-256 of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileDigest {
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// One `memqual report --reseal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Reseal {
    /// When the reseal was made (RFC 3339, UTC).
    pub at_utc: String,
    /// The memqual version that made it.
    pub memqual_version: String,
    /// Every file it accepted as changed, added or removed.
    pub changes: Vec<Change>,
    /// True when `raw-seal.json` was gone: the seal was rebuilt from the
    /// files as found, and nothing the run recorded could be checked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seal_was_missing: bool,
}

/// `raw-seal.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RawSeal {
    /// `major.minor` of this file's format.
    pub format_version: String,
    /// Sorted by path.
    pub files: Vec<SealedFile>,
    /// Every reseal, oldest first, with the digests it replaced.
    #[serde(default)]
    pub reseals: Vec<Reseal>,
}

impl Default for RawSeal {
    fn default() -> Self {
        RawSeal {
            format_version: FORMAT_VERSION.to_string(),
            files: Vec::new(),
            reseals: Vec::new(),
        }
    }
}

/// Whether a file (by relative path) is raw: written by the run, sealed at
/// the source. Derived files, the seal itself and the signature are not.
pub fn is_raw(rel: &str) -> bool {
    !names::is_derived(rel) && rel != names::RAW_SEAL
}

/// Whether a raw file the seal does not hold may have been left unsealed by
/// a run that stopped (`report` then seals it as found): a file inside the
/// folder of an arm of `run.json` that the run never sealed, or a top-level
/// file the run writes and seals as it goes. Anything else is an addition.
fn may_be_sealed_late(
    path: &str,
    planned: &std::collections::BTreeSet<String>,
    finished: &std::collections::BTreeSet<&str>,
) -> bool {
    const TOP: &[&str] = &[
        names::PROTOCOL,
        names::RUN,
        names::HOST,
        names::ADMISSION,
        names::SOAK_HISTORY,
    ];
    let mut parts = path.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => TOP.contains(&name),
        (Some(names::ARMS), Some(id), Some(_)) => planned.contains(id) && !finished.contains(id),
        _ => false,
    }
}

/// How the raw files of a run directory compare with their seal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawCheck {
    /// Sealed files whose bytes differ now.
    pub changed: Vec<Change>,
    /// Sealed files that are gone.
    pub missing: Vec<Change>,
    /// Raw files present but never sealed, where a stopped run may have
    /// left them (an arm that never wrote its sealed `arm.json`, or a
    /// top-level file the run writes): `report` seals them as found.
    pub unsealed: Vec<Change>,
    /// Raw files present but never sealed where the run had already
    /// sealed everything (a finished arm's folder, a name the run never
    /// writes): added after the run. Refused like a change.
    pub added: Vec<Change>,
    /// True when the run directory has no `raw-seal.json` at all: every
    /// digest the run recorded is gone, so no raw file can be checked.
    /// Refused like a change.
    pub seal_missing: bool,
    /// Links, FIFOs, devices, … anywhere in the run directory.
    pub irregular: Vec<crate::Irregular>,
}

impl RawCheck {
    /// True when every raw file matches the seal (files a stopped run left
    /// unsealed aside).
    pub fn holds(&self) -> bool {
        self.changed.is_empty()
            && self.missing.is_empty()
            && self.added.is_empty()
            && !self.seal_missing
    }
}

impl RunDir {
    /// `raw-seal.json`, or an empty seal when there is none yet.
    pub fn raw_seal(&self) -> Result<RawSeal, RunDirError> {
        Ok(self
            .read_json_limited(&Rel::file(names::RAW_SEAL), limits::SEAL_RECORD)?
            .unwrap_or_default())
    }

    fn write_raw_seal(&self, seal: &RawSeal) -> Result<(), RunDirError> {
        let text =
            crate::digest::canonical_json(seal).map_err(|reason| RunDirError::Serialize {
                what: names::RAW_SEAL.into(),
                reason,
            })?;
        self.write_bytes(&Rel::file(names::RAW_SEAL), text.as_bytes())
    }

    /// Seal the raw files at `scope` (files, or folders walked whole) as
    /// they are now, adding to or replacing what the seal held for them.
    /// The run calls it for each top-level raw file it writes and for each
    /// arm's folder when the arm ends.
    pub fn seal_raw(&self, scope: &[Rel]) -> Result<(), RunDirError> {
        let mut seal = self.raw_seal()?;
        let mut by_path: BTreeMap<String, SealedFile> =
            seal.files.drain(..).map(|f| (f.path.clone(), f)).collect();
        for rel in scope {
            let files = match self.kind(rel)? {
                Some(crate::Kind::Dir) => {
                    self.walk(rel)?.files.into_iter().map(|f| f.rel).collect()
                }
                Some(_) => vec![rel.clone()],
                None => Vec::new(),
            };
            for file in files {
                let path = file.to_string();
                if !is_raw(&path) {
                    continue;
                }
                let (bytes, sha256) = self.digest(&file)?;
                by_path.insert(
                    path.clone(),
                    SealedFile {
                        path,
                        bytes,
                        sha256,
                        sealed_by: SealedBy::Run,
                    },
                );
            }
        }
        seal.files = by_path.into_values().collect();
        self.write_raw_seal(&seal)
    }

    /// Compare every raw file with the seal. Linear in the number of files.
    pub fn check_raw(&self) -> Result<RawCheck, RunDirError> {
        let found =
            self.read_json_limited::<RawSeal>(&Rel::file(names::RAW_SEAL), limits::SEAL_RECORD)?;
        let seal_missing = found.is_none();
        let seal = found.unwrap_or_default();
        let walk = self.walk(&Rel::root())?;
        let mut sealed: BTreeMap<&str, &SealedFile> =
            seal.files.iter().map(|f| (f.path.as_str(), f)).collect();
        // Arms whose folder the run sealed as the arm ended (`arm.json` is
        // written just before): nothing new may appear in them.
        let finished: std::collections::BTreeSet<&str> = seal
            .files
            .iter()
            .filter_map(|f| {
                let mut parts = f.path.split('/');
                match (parts.next(), parts.next(), parts.next(), parts.next()) {
                    (Some(names::ARMS), Some(id), Some(names::ARM), None) => Some(id),
                    _ => None,
                }
            })
            .collect();
        // The arms the run set out to run (run.json, written and sealed
        // first): only their folders may hold files a stopped run left
        // unsealed. A folder for any other id was added after the run.
        let planned: std::collections::BTreeSet<String> = self
            .read_json_limited::<serde_json::Value>(&Rel::file(names::RUN), limits::JSON_RECORD)
            .ok()
            .flatten()
            .and_then(|v| {
                v.get("arms").and_then(|a| a.as_array()).map(|a| {
                    a.iter()
                        .filter_map(|id| id.as_str().map(str::to_string))
                        .collect()
                })
            })
            .unwrap_or_default();
        let mut check = RawCheck {
            irregular: walk.irregular,
            seal_missing,
            ..RawCheck::default()
        };
        for file in &walk.files {
            let path = file.rel.to_string();
            if !is_raw(&path) {
                continue;
            }
            let (bytes, sha256) = self.digest(&file.rel)?;
            let now = FileDigest { bytes, sha256 };
            match sealed.remove(path.as_str()) {
                Some(s) if s.sha256 == now.sha256 && s.bytes == now.bytes => {}
                Some(s) => check.changed.push(Change {
                    path,
                    before: Some(FileDigest {
                        bytes: s.bytes,
                        sha256: s.sha256.clone(),
                    }),
                    after: Some(now),
                }),
                None => {
                    let late = !seal_missing && may_be_sealed_late(&path, &planned, &finished);
                    let change = Change {
                        path,
                        before: None,
                        after: Some(now),
                    };
                    if late {
                        check.unsealed.push(change);
                    } else {
                        check.added.push(change);
                    }
                }
            }
        }
        check.missing = sealed
            .into_values()
            .map(|s| Change {
                path: s.path.clone(),
                before: Some(FileDigest {
                    bytes: s.bytes,
                    sha256: s.sha256.clone(),
                }),
                after: None,
            })
            .collect();
        Ok(check)
    }

    /// Record in the seal what `check` found: unsealed files are sealed as
    /// found by `report`; with `reseal`, changed and missing files are
    /// accepted too and the reseal (with the digests it replaces) is kept.
    /// Writes it at once: [`RunDir::plan_raw_seal`] and
    /// [`RunDir::commit_raw_seal`] apart let a caller write it only once
    /// the run has been re-derived from it.
    pub fn update_raw_seal(
        &self,
        check: &RawCheck,
        reseal: Option<(&str, &str)>,
    ) -> Result<RawSeal, RunDirError> {
        let (seal, write) = self.plan_raw_seal(check, reseal)?;
        if write {
            self.commit_raw_seal(&seal)?;
        }
        Ok(seal)
    }

    /// The seal [`RunDir::update_raw_seal`] would write, and whether it
    /// differs from `raw-seal.json`; nothing is written.
    pub fn plan_raw_seal(
        &self,
        check: &RawCheck,
        reseal: Option<(&str, &str)>,
    ) -> Result<(RawSeal, bool), RunDirError> {
        let mut seal = self.raw_seal()?;
        let mut by_path: BTreeMap<String, SealedFile> =
            seal.files.drain(..).map(|f| (f.path.clone(), f)).collect();
        let mut put = |c: &Change, by: SealedBy| match &c.after {
            Some(d) => {
                by_path.insert(
                    c.path.clone(),
                    SealedFile {
                        path: c.path.clone(),
                        bytes: d.bytes,
                        sha256: d.sha256.clone(),
                        sealed_by: by,
                    },
                );
            }
            None => {
                by_path.remove(&c.path);
            }
        };
        for c in &check.unsealed {
            put(c, SealedBy::Report);
        }
        if let Some((at_utc, version)) = reseal {
            let changes: Vec<Change> = check
                .changed
                .iter()
                .chain(&check.missing)
                .chain(&check.added)
                .cloned()
                .collect();
            for c in &changes {
                put(c, SealedBy::Reseal);
            }
            if !changes.is_empty() || check.seal_missing {
                seal.reseals.push(Reseal {
                    at_utc: at_utc.to_string(),
                    memqual_version: version.to_string(),
                    changes,
                    seal_was_missing: check.seal_missing,
                });
            }
        }
        seal.files = by_path.into_values().collect();
        Ok((seal, !check.unsealed.is_empty() || reseal.is_some()))
    }

    /// Replace `raw-seal.json` with `seal`, atomically (a temporary file
    /// renamed over it): a reader sees the old seal or the new one.
    pub fn commit_raw_seal(&self, seal: &RawSeal) -> Result<(), RunDirError> {
        self.write_raw_seal(seal)
    }
}
