//! Lossless derivatives that keep one tensor class (seed 003 §3): copy the
//! prefix and every record of the kept class byte for byte, omit every record
//! of the other, convert nothing; reparse the output independently; bind
//! source, output and both inventories in a sealed [`DerivationReceipt`].
//!
//! [`Derivation::DecoderOnly`] keeps the decoder (what an external encoder
//! needs in the worker); [`Derivation::EncoderOnly`] keeps the native
//! encoder. Both keep the whole prefix: the header describes the whole model
//! and the container has no form without its vocabulary block, so an
//! encoder-only file still carries the vocabulary, unused.
//!
//! Since receipt version 2 a receipt also names what it rests on (seed 003
//! §3.2): the tool that derived it ([`Tool`]), the focused tests that verify
//! derivations ([`TestSource`]), the runtime the derivative is made for
//! ([`CompatibleRuntime`]) and the shared libraries the tool ran with
//! ([`BinaryClosure`]). The caller records them at derive time
//! ([`Provenance`]); no file can recompute them, so verification checks them
//! through the seal alone.

use crate::digest::sha256_hex;
use crate::{Expect, GgmlType, Inventory, ParseError, TensorClass, TensorRecord, inspect};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Version of the receipt format. 2: the receipt names the tool, its
/// focused tests, the compatible runtime and the binary closure; version 1
/// receipts (without them) are refused by [`verify_derivation`].
pub const RECEIPT_VERSION: u32 = 2;

/// Which class a derivation keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Derivation {
    /// Keep every decoder record, omit every native-encoder record.
    DecoderOnly,
    /// Keep every native-encoder record, omit every decoder record (the
    /// token embedding included).
    EncoderOnly,
}

impl Derivation {
    /// The class whose records are copied.
    pub fn kept(self) -> TensorClass {
        match self {
            Derivation::DecoderOnly => TensorClass::Decoder,
            Derivation::EncoderOnly => TensorClass::NativeEncoder,
        }
    }

    /// The inventory the output is checked against.
    pub fn expect(self) -> Expect {
        match self {
            Derivation::DecoderOnly => Expect::DecoderOnly,
            Derivation::EncoderOnly => Expect::EncoderOnly,
        }
    }

    /// The receipt's `derivation` sentence: fixed per kind, so a receipt
    /// names its kind.
    pub fn sentence(self) -> &'static str {
        match self {
            Derivation::DecoderOnly => {
                "decoder-only: prefix and decoder records copied byte for byte, native-encoder records omitted"
            }
            Derivation::EncoderOnly => {
                "encoder-only: prefix (header, mel filters and the vocabulary the container requires, unused by an encoder) and native-encoder records copied byte for byte, decoder records (token embedding included) omitted"
            }
        }
    }

    /// The kind whose sentence `sentence` is.
    pub fn from_sentence(sentence: &str) -> Option<Self> {
        [Derivation::DecoderOnly, Derivation::EncoderOnly]
            .into_iter()
            .find(|d| d.sentence() == sentence)
    }

    fn name(self) -> &'static str {
        match self {
            Derivation::DecoderOnly => "decoder-only",
            Derivation::EncoderOnly => "encoder-only",
        }
    }
}

/// A file by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Length in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, lower-case hex.
    pub sha256: String,
}

/// What the receipt binds of every record, wherever it is listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFacts {
    /// Tensor name.
    pub name: String,
    /// Stored ggml type.
    pub ggml_type: GgmlType,
    /// Dims in ggml order.
    pub ne: Vec<u64>,
    /// Whole record in bytes: header, dims, name and payload.
    pub record_bytes: u64,
    /// Payload alone, in bytes.
    pub payload_bytes: u64,
    /// SHA-256 of the payload, lower-case hex.
    pub payload_sha256: String,
}

impl From<&TensorRecord> for RecordFacts {
    fn from(t: &TensorRecord) -> Self {
        Self {
            name: t.name.clone(),
            ggml_type: t.ggml_type,
            ne: t.ne.clone(),
            record_bytes: t.record_len(),
            payload_bytes: t.payload_len,
            payload_sha256: t.payload_sha256.clone(),
        }
    }
}

/// One source record as the receipt lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// 0-based position among the source's records.
    pub index: usize,
    /// Native encoder or decoder (which is retained depends on the derivation).
    pub class: TensorClass,
    /// Byte offset of the record in the source.
    pub record_offset: u64,
    /// Name, type, dims, sizes and payload digest.
    #[serde(flatten)]
    pub facts: RecordFacts,
}

/// A record copied into the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainedRecord {
    /// 0-based position among the source's records.
    pub source_index: usize,
    /// 0-based position among the output's records.
    pub output_index: usize,
    /// Byte offset of the record in the source.
    pub source_record_offset: u64,
    /// Byte offset of the record in the output.
    pub output_record_offset: u64,
    /// Name, type, dims, sizes and payload digest (equal in both files).
    #[serde(flatten)]
    pub facts: RecordFacts,
}

/// A record left out of the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedRecord {
    /// 0-based position among the source's records.
    pub source_index: usize,
    /// Byte offset of the record in the source.
    pub source_record_offset: u64,
    /// Name, type, dims, sizes and payload digest.
    #[serde(flatten)]
    pub facts: RecordFacts,
}

/// Byte totals of what stayed and what went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivationTotals {
    /// Records copied (every record of the kept class).
    pub retained_records: usize,
    /// Their payload bytes.
    pub retained_payload_bytes: u64,
    /// Their whole-record bytes.
    pub retained_record_bytes: u64,
    /// Records left out (every record of the other class).
    pub removed_records: usize,
    /// Their payload bytes.
    pub removed_payload_bytes: u64,
    /// Their whole-record bytes.
    pub removed_record_bytes: u64,
}

/// The program that made the derivative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// Its name (`memqual`).
    pub name: String,
    /// Its version (the Cargo package version).
    pub version: String,
    /// The git commit it was built from; `None` when the build did not know it.
    pub commit: Option<String>,
    /// The path of the executable that ran (empty when the OS did not say).
    pub executable: String,
    /// SHA-256 of that executable file, lower-case hex; `None` when it could
    /// not be read.
    pub executable_sha256: Option<String>,
}

/// A source file of the focused tests that verify derivations, as built into
/// the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSource {
    /// Its path in the repository, e.g. `harness/tests/it/artifact.rs`.
    pub path: String,
    /// What its tests cover, in words.
    pub covers: String,
    /// Its length in bytes.
    pub bytes: u64,
    /// SHA-256 of its content, lower-case hex.
    pub sha256: String,
}

/// One file of memqual's whisper.cpp patch set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchDigest {
    /// Its name in `runners/whisper-patch/`.
    pub name: String,
    /// SHA-256 of its content, lower-case hex.
    pub sha256: String,
}

/// The runtime a derivative is made for: the patched whisper.cpp worker
/// (stock whisper.cpp refuses both kinds), as the tool's build pinned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompatibleRuntime {
    /// The package that builds it (`memqual-whisper-patched`).
    pub package: String,
    /// The crate that vendors whisper.cpp's sources (`whisper-rs-sys`).
    pub source_crate: String,
    /// Its version in that package's lock file (empty when the build had none).
    pub source_crate_version: String,
    /// Its registry checksum in that lock file (empty when the build had none).
    pub source_checksum: String,
    /// The `runners` features the package switches on (`whisper-patch`);
    /// accelerators (`metal`, `coreml`) are the builder's choice on top.
    pub features: Vec<String>,
    /// memqual's patch set, file by file in the order applied.
    pub patches: Vec<PatchDigest>,
    /// The set's digest: SHA-256 of the lines `<sha256>  <name>\n`, the
    /// value the patched library reports and the worker checks.
    pub patch_set_digest: String,
}

/// A file's content, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum LibraryContent {
    /// Read and hashed.
    Hashed {
        /// Length in bytes.
        bytes: u64,
        /// SHA-256 of the content, lower-case hex.
        sha256: String,
    },
    /// Not read: the reason (e.g. the file at that path is no longer the one
    /// mapped, or the library lives in macOS's dyld shared cache only).
    Unreadable {
        /// Why, in words.
        reason: String,
    },
}

/// A shared library the tool had loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedLibrary {
    /// Its path, as the loader names it.
    pub path: String,
    /// Its content's digest, or why there is none.
    pub content: LibraryContent,
}

/// The shared libraries the tool ran with, or why they are not known. An
/// empty `libraries` list under `recorded` means none was loaded (a static
/// build), never "not looked".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum BinaryClosure {
    /// Read from the running process.
    Recorded {
        /// Where the list came from (e.g. `/proc/self/maps`).
        method: String,
        /// Every shared object loaded, sorted by path, the executable itself
        /// excepted (it is [`Tool::executable`]).
        libraries: Vec<SharedLibrary>,
    },
    /// Not available on this platform or not readable.
    Unavailable {
        /// Why, in words.
        reason: String,
    },
}

/// What a derivation rests on besides its two files, recorded by the
/// caller when it derives: the receipt binds it under its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The tool and version in one phrase (e.g. `memqual 0.1.0`).
    pub made_by: String,
    /// The tool, with its executable's digest.
    pub tool: Tool,
    /// The focused tests that verify derivations.
    pub verified_by: Vec<TestSource>,
    /// The runtime the derivative is made for.
    pub runtime: CompatibleRuntime,
    /// The shared libraries the tool ran with.
    pub binary_closure: BinaryClosure,
}

/// Everything seed 003 §3.2 asks a derivation to bind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DerivationReceipt {
    /// `RECEIPT_VERSION` at the time of writing.
    pub receipt_version: u32,
    /// The tool and version that made the derivative (e.g. `memqual 0.1.0`).
    pub made_by: String,
    /// The tool that made it: version, commit, executable and its digest.
    pub tool: Tool,
    /// The focused tests that verify derivations, with their digests as
    /// built into the tool.
    pub verified_by: Vec<TestSource>,
    /// The runtime the derivative is made for: its source, patch set and
    /// build options.
    pub runtime: CompatibleRuntime,
    /// The shared libraries the tool ran with, each with its digest.
    pub binary_closure: BinaryClosure,
    /// What the derivation did, in words: [`Derivation::sentence`], one
    /// fixed sentence per kind.
    pub derivation: String,
    /// The full model the derivative was made from.
    pub source: FileIdentity,
    /// Header + mel filters + vocabulary, identical in source and output.
    pub prefix: FileIdentity,
    /// Every source record, in file order.
    pub source_inventory: Vec<SourceRecord>,
    /// The records copied (decoder, or native encoder), in file order.
    pub retained: Vec<RetainedRecord>,
    /// The records left out (the other class), in file order.
    pub removed: Vec<RemovedRecord>,
    /// The output; its length is exactly prefix + retained record bytes.
    pub output: FileIdentity,
    /// Record and byte counts of `retained` and `removed`.
    pub totals: DerivationTotals,
    /// SHA-256 of the canonical JSON of this receipt with this field empty.
    pub receipt_sha256: String,
}

/// Why a derivation or its verification failed.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    /// The source is not a strictly valid full model.
    #[error("source {path}: {source}")]
    Source {
        /// The source model's path.
        path: PathBuf,
        /// Why the parser rejected it.
        source: ParseError,
    },
    /// The output as written does not parse as the derivation's kind.
    #[error("the written output {path} does not parse as {}: {source}", .kind.name())]
    Output {
        /// The output's final path (also while its temporary copy is checked).
        path: PathBuf,
        /// The kind it was checked as.
        kind: Derivation,
        /// Why the parser rejected it.
        source: ParseError,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory (for the output, possibly its temporary file).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The output is not the source's prefix and decoder records in order, or a
    /// receipt does not match the files; one entry per discrepancy.
    #[error("the output differs from the plan: {}", .0.join("; "))]
    Differs(Vec<String>),
    /// The receipt file is not a receipt, not in canonical form, or its seal
    /// is wrong.
    #[error("receipt {path}: {reason}")]
    Receipt {
        /// The receipt file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DeriveError + '_ {
    move |source| DeriveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn inspect_source(src: &Path) -> Result<Inventory, DeriveError> {
    inspect(src, Expect::Full).map_err(|source| DeriveError::Source {
        path: src.to_path_buf(),
        source,
    })
}

/// Parse `file` as a `kind` artifact; errors name `shown` (the final path).
fn inspect_output(file: &Path, shown: &Path, kind: Derivation) -> Result<Inventory, DeriveError> {
    inspect(file, kind.expect()).map_err(|source| DeriveError::Output {
        path: shown.to_path_buf(),
        kind,
        source,
    })
}

/// Where the receipt of `out` goes: `<out>.derivation.json`.
pub fn receipt_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".derivation.json");
    PathBuf::from(name)
}

/// Derive the decoder-only file `out` from `src` and write its receipt next
/// to it. `out` appears only once it has been reparsed and matches the plan.
pub fn derive_decoder(
    src: &Path,
    out: &Path,
    provenance: &Provenance,
) -> Result<DerivationReceipt, DeriveError> {
    derive(src, out, Derivation::DecoderOnly, provenance)
}

/// Derive the `kind` file `out` from `src` and write its receipt next to it.
/// `out` appears only once it has been reparsed and matches the plan.
pub fn derive(
    src: &Path,
    out: &Path,
    kind: Derivation,
    provenance: &Provenance,
) -> Result<DerivationReceipt, DeriveError> {
    let source = inspect_source(src)?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    copy_plan(src, &source, kind.kept(), tmp.as_file()).map_err(io(tmp.path()))?;
    let output = inspect_output(tmp.path(), out, kind)?;
    let differences = differences_of(&source, &output, kind);
    if !differences.is_empty() {
        return Err(DeriveError::Differs(differences));
    }
    let receipt = build_receipt_of(&source, &output, kind, provenance);
    tmp.persist(out).map_err(|e| DeriveError::Io {
        path: out.to_path_buf(),
        source: e.error,
    })?;
    let path = receipt_path(out);
    std::fs::write(&path, canonical_json(&receipt)).map_err(io(&path))?;
    Ok(receipt)
}

/// Copy the prefix and each record of `kept`, in source order, in bounded chunks.
fn copy_plan(src: &Path, inv: &Inventory, kept: TensorClass, out: &File) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(1 << 20, File::open(src)?);
    let mut output = BufWriter::with_capacity(1 << 20, out);
    let mut ranges = vec![(0, inv.prefix_len)];
    ranges.extend(
        inv.tensors
            .iter()
            .filter(|t| t.class == kept)
            .map(|t| (t.record_offset, t.record_len())),
    );
    for (offset, len) in ranges {
        input.seek(SeekFrom::Start(offset))?;
        let copied = std::io::copy(&mut (&mut input).take(len), &mut output)?;
        if copied != len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the source changed while copying: {copied} of {len} bytes at {offset}"),
            ));
        }
    }
    output.flush()?;
    out.sync_all()
}

/// How `output` departs from "the prefix and the decoder records of `source`, in order".
pub fn differences(source: &Inventory, output: &Inventory) -> Vec<String> {
    differences_of(source, output, Derivation::DecoderOnly)
}

/// How `output` departs from "the prefix and the records `kind` keeps of
/// `source`, in order".
pub fn differences_of(source: &Inventory, output: &Inventory, kind: Derivation) -> Vec<String> {
    let kept_name = match kind {
        Derivation::DecoderOnly => "decoder",
        Derivation::EncoderOnly => "native-encoder",
    };
    let mut out = Vec::new();
    if (output.prefix_len, &output.prefix_sha256) != (source.prefix_len, &source.prefix_sha256) {
        out.push(format!(
            "prefix is {} bytes with SHA-256 {}, the source's is {} bytes with {}",
            output.prefix_len, output.prefix_sha256, source.prefix_len, source.prefix_sha256
        ));
    }
    let kept: Vec<&TensorRecord> = source
        .tensors
        .iter()
        .filter(|t| t.class == kind.kept())
        .collect();
    if output.tensors.len() != kept.len() {
        out.push(format!(
            "{} records, the source has {} {kept_name} records",
            output.tensors.len(),
            kept.len()
        ));
    }
    let mut at = source.prefix_len;
    for (o, s) in output.tensors.iter().zip(&kept) {
        let same = (
            &o.name,
            o.ggml_type,
            &o.ne,
            o.payload_len,
            &o.payload_sha256,
        ) == (
            &s.name,
            s.ggml_type,
            &s.ne,
            s.payload_len,
            &s.payload_sha256,
        );
        if !same || o.record_offset != at || o.record_len() != s.record_len() {
            out.push(format!(
                "output record {} ({} at {}) is not source record {} ({} at {})",
                o.index, o.name, o.record_offset, s.index, s.name, s.record_offset
            ));
        }
        at += s.record_len();
    }
    if output.file_len != at {
        out.push(format!(
            "output is {} bytes, prefix + {kept_name} records are {at}",
            output.file_len
        ));
    }
    out
}

fn identity(inv: &Inventory) -> FileIdentity {
    FileIdentity {
        bytes: inv.file_len,
        sha256: inv.file_sha256.clone(),
    }
}

/// The receipt of a decoder-only derivation whose two files parsed as
/// `source` and `output`.
pub fn build_receipt(
    source: &Inventory,
    output: &Inventory,
    provenance: &Provenance,
) -> DerivationReceipt {
    build_receipt_of(source, output, Derivation::DecoderOnly, provenance)
}

/// The receipt of a `kind` derivation whose two files parsed as `source`
/// and `output`.
pub fn build_receipt_of(
    source: &Inventory,
    output: &Inventory,
    kind: Derivation,
    provenance: &Provenance,
) -> DerivationReceipt {
    let source_inventory = source
        .tensors
        .iter()
        .map(|t| SourceRecord {
            index: t.index,
            class: t.class,
            record_offset: t.record_offset,
            facts: t.into(),
        })
        .collect();
    let retained: Vec<RetainedRecord> = source
        .tensors
        .iter()
        .filter(|t| t.class == kind.kept())
        .zip(&output.tensors)
        .map(|(s, o)| RetainedRecord {
            source_index: s.index,
            output_index: o.index,
            source_record_offset: s.record_offset,
            output_record_offset: o.record_offset,
            facts: s.into(),
        })
        .collect();
    let removed: Vec<RemovedRecord> = source
        .tensors
        .iter()
        .filter(|t| t.class != kind.kept())
        .map(|t| RemovedRecord {
            source_index: t.index,
            source_record_offset: t.record_offset,
            facts: t.into(),
        })
        .collect();
    let totals = DerivationTotals {
        retained_records: retained.len(),
        retained_payload_bytes: retained.iter().map(|r| r.facts.payload_bytes).sum(),
        retained_record_bytes: retained.iter().map(|r| r.facts.record_bytes).sum(),
        removed_records: removed.len(),
        removed_payload_bytes: removed.iter().map(|r| r.facts.payload_bytes).sum(),
        removed_record_bytes: removed.iter().map(|r| r.facts.record_bytes).sum(),
    };
    let mut receipt = DerivationReceipt {
        receipt_version: RECEIPT_VERSION,
        made_by: provenance.made_by.clone(),
        tool: provenance.tool.clone(),
        verified_by: provenance.verified_by.clone(),
        runtime: provenance.runtime.clone(),
        binary_closure: provenance.binary_closure.clone(),
        derivation: kind.sentence().into(),
        source: identity(source),
        prefix: FileIdentity {
            bytes: source.prefix_len,
            sha256: source.prefix_sha256.clone(),
        },
        source_inventory,
        retained,
        removed,
        output: identity(output),
        totals,
        receipt_sha256: String::new(),
    };
    receipt.receipt_sha256 = seal(&receipt);
    receipt
}

/// The digest a receipt must carry: over its canonical JSON with the seal empty.
fn seal(receipt: &DerivationReceipt) -> String {
    let unsealed = DerivationReceipt {
        receipt_sha256: String::new(),
        ..receipt.clone()
    };
    sha256_hex(canonical_json(&unsealed).as_bytes())
}

/// The one byte form a receipt file has: pretty JSON and a final newline.
pub fn canonical_json(receipt: &DerivationReceipt) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(receipt).unwrap_or_default() + "\n"
}

/// Re-check a derivation of either kind (the receipt's `derivation`
/// sentence names it): the receipt file is in canonical form with a valid
/// seal, and recomputing it from `src` and `out` gives the same receipt.
/// Returns the verified receipt, or every discrepancy found.
pub fn verify_derivation(
    src: &Path,
    out: &Path,
    receipt_file: &Path,
) -> Result<DerivationReceipt, DeriveError> {
    let bad = |reason: String| DeriveError::Receipt {
        path: receipt_file.to_path_buf(),
        reason,
    };
    let text = std::fs::read(receipt_file).map_err(io(receipt_file))?;
    check_version(&text).map_err(bad)?;
    let given: DerivationReceipt =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not a derivation receipt: {e}")))?;
    if canonical_json(&given).as_bytes() != text.as_slice() {
        return Err(bad(
            "not byte-identical to its canonical form: the file was edited".into(),
        ));
    }
    if seal(&given) != given.receipt_sha256 {
        return Err(bad(
            "receipt_sha256 does not match the receipt's content".into()
        ));
    }
    let kind = Derivation::from_sentence(&given.derivation).ok_or_else(|| {
        bad(format!(
            "derivation {:?} is neither kind's sentence",
            given.derivation
        ))
    })?;
    let source = inspect_source(src)?;
    let output = inspect_output(out, out, kind)?;
    let mut problems = differences_of(&source, &output, kind);
    // What the deriving tool recorded about itself cannot be recomputed
    // from the files: the seal checked above binds it.
    let recorded = Provenance {
        made_by: given.made_by.clone(),
        tool: given.tool.clone(),
        verified_by: given.verified_by.clone(),
        runtime: given.runtime.clone(),
        binary_closure: given.binary_closure.clone(),
    };
    let recomputed = build_receipt_of(&source, &output, kind, &recorded);
    if recomputed != given {
        problems.extend(receipt_differences(&recomputed, &given));
    }
    if problems.is_empty() {
        Ok(given)
    } else {
        Err(DeriveError::Differs(problems))
    }
}

/// Refuse a receipt of another version before reading it as this one, with
/// a reason that says what to do.
fn check_version(text: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Versioned {
        receipt_version: u32,
    }
    let v: Versioned =
        serde_json::from_slice(text).map_err(|e| format!("not a derivation receipt: {e}"))?;
    match v.receipt_version {
        RECEIPT_VERSION => Ok(()),
        old if old < RECEIPT_VERSION => Err(format!(
            "receipt_version {old} predates version {RECEIPT_VERSION}, which binds the tool, its focused tests, \
             the compatible runtime and the binary closure; this memqual verifies version {RECEIPT_VERSION} \
             only: derive the artifact again to get a receipt that names them"
        )),
        newer => Err(format!(
            "receipt_version {newer} is newer than this memqual reads ({RECEIPT_VERSION}): \
             verify it with the memqual its `made_by` names"
        )),
    }
}

/// Which parts of a receipt differ from the recomputed one.
fn receipt_differences(want: &DerivationReceipt, got: &DerivationReceipt) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, same: bool| {
        if !same {
            out.push(format!("receipt {name} differs from the files"));
        }
    };
    field(
        "receipt_version",
        want.receipt_version == got.receipt_version,
    );
    field("derivation", want.derivation == got.derivation);
    field("source", want.source == got.source);
    field("prefix", want.prefix == got.prefix);
    field(
        "source_inventory",
        want.source_inventory == got.source_inventory,
    );
    field("retained", want.retained == got.retained);
    field("removed", want.removed == got.removed);
    field("output", want.output == got.output);
    field("totals", want.totals == got.totals);
    field("receipt_sha256", want.receipt_sha256 == got.receipt_sha256);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{SyntheticSpec, write_file};

    fn provenance() -> Provenance {
        Provenance {
            made_by: "memqual 0.0.0".into(),
            tool: Tool {
                name: "memqual".into(),
                version: "0.0.0".into(),
                commit: None,
                executable: "/bin/memqual".into(),
                executable_sha256: Some("ab".repeat(32)),
            },
            verified_by: vec![TestSource {
                path: "runners/ggml-container/src/derive.rs".into(),
                covers: "unit tests".into(),
                bytes: 1,
                sha256: "cd".repeat(32),
            }],
            runtime: CompatibleRuntime {
                package: "memqual-whisper-patched".into(),
                source_crate: "whisper-rs-sys".into(),
                source_crate_version: "0.15.0".into(),
                source_checksum: "ef".repeat(32),
                features: vec!["whisper-patch".into()],
                patches: vec![PatchDigest {
                    name: "0001.patch".into(),
                    sha256: "01".repeat(32),
                }],
                patch_set_digest: "02".repeat(32),
            },
            binary_closure: BinaryClosure::Unavailable {
                reason: "a test".into(),
            },
        }
    }

    /// A decoder-only derivation of the miniature model in `dir`.
    fn derived(dir: &Path) -> (PathBuf, PathBuf, DerivationReceipt) {
        let src = dir.join("model.bin");
        write_file(&SyntheticSpec::miniature(), &src).unwrap();
        let out = dir.join("decoder.bin");
        let receipt = derive(&src, &out, Derivation::DecoderOnly, &provenance()).unwrap();
        (src, out, receipt)
    }

    #[test]
    fn the_receipt_carries_the_provenance_under_its_seal() {
        let dir = tempfile::tempdir().unwrap();
        let (src, out, receipt) = derived(dir.path());
        assert_eq!(receipt.receipt_version, 2);
        assert_eq!(receipt.tool, provenance().tool);
        assert_eq!(receipt.runtime, provenance().runtime);
        assert_eq!(receipt.verified_by, provenance().verified_by);
        let rpath = receipt_path(&out);
        assert_eq!(verify_derivation(&src, &out, &rpath).unwrap(), receipt);
        // Each block is under the seal: any change to one changes the digest.
        let mut changed = receipt.clone();
        changed.binary_closure = BinaryClosure::Recorded {
            method: "test".into(),
            libraries: vec![],
        };
        assert_ne!(seal(&changed), receipt.receipt_sha256);
        let mut changed = receipt.clone();
        changed.runtime.patch_set_digest = "03".repeat(32);
        assert_ne!(seal(&changed), receipt.receipt_sha256);
        let mut changed = receipt.clone();
        changed.verified_by[0].sha256 = "04".repeat(32);
        assert_ne!(seal(&changed), receipt.receipt_sha256);
    }

    #[test]
    fn closures_say_which_they_are() {
        let unavailable = serde_json::to_value(BinaryClosure::Unavailable {
            reason: "no loader list".into(),
        })
        .unwrap();
        assert_eq!(
            unavailable,
            serde_json::json!({"status": "unavailable", "reason": "no loader list"})
        );
        let recorded = BinaryClosure::Recorded {
            method: "/proc/self/maps".into(),
            libraries: vec![SharedLibrary {
                path: "/lib/libc.so.6".into(),
                content: LibraryContent::Unreadable {
                    reason: "deleted".into(),
                },
            }],
        };
        let text = serde_json::to_string(&recorded).unwrap();
        assert!(text.contains(r#""status":"recorded""#), "{text}");
        assert!(
            text.contains(r#""content":{"status":"unreadable""#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<BinaryClosure>(&text).unwrap(),
            recorded
        );
        // No silent "empty": a closure says which it is.
        assert!(serde_json::from_str::<BinaryClosure>(r#"{"libraries":[]}"#).is_err());
    }

    #[test]
    fn receipts_of_other_versions_are_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let (src, out, _) = derived(dir.path());
        let rpath = receipt_path(&out);
        let text = std::fs::read_to_string(&rpath).unwrap();
        for (version, says) in [
            (1, "receipt_version 1 predates version 2"),
            (3, "receipt_version 3 is newer than this memqual reads (2)"),
        ] {
            let edited = text.replacen(
                "\"receipt_version\": 2",
                &format!("\"receipt_version\": {version}"),
                1,
            );
            assert_ne!(edited, text);
            std::fs::write(&rpath, edited).unwrap();
            let e = verify_derivation(&src, &out, &rpath).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        std::fs::write(&rpath, "[]").unwrap();
        let e = verify_derivation(&src, &out, &rpath).unwrap_err();
        assert!(e.to_string().contains("not a derivation receipt"), "{e}");
    }
}
