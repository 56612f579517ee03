//! The negative-control corpus (seed 003 §7): one defective copy of a good
//! model per case, each with the rejection the strict parser must give, in a
//! manifest. Cases are built by splicing byte ranges of the source, so they
//! stream and never hold a whole model in memory.

use crate::digest::sha256_file;
use crate::{Expect, GgmlWriter, Inventory, ParseError, TensorClass, TensorRecord, inspect};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Version of the manifest format.
pub const MANIFEST_VERSION: u32 = 1;

/// The rejection a case must produce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRejection {
    /// [`crate::Defect::code`].
    pub defect: String,
    /// `ParseError::offset`: byte offset of the wrong field or record.
    pub offset: u64,
    /// `ParseError::record`: 0-based tensor record index, when inside one.
    pub record: Option<usize>,
    /// `ParseError::tensor`: the record's name, once read.
    pub tensor: Option<String>,
}

/// One corpus file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusCase {
    /// Case name (`duplicate-decoder-record`); the file is `<case>.bin`.
    pub case: String,
    /// File name inside the corpus directory.
    pub file: String,
    /// What was done to the source, in words.
    pub description: String,
    /// The inventory the file is checked against.
    pub expect: Expect,
    /// What the parser must say about the file.
    pub rejection: ExpectedRejection,
    /// File length in bytes.
    pub bytes: u64,
    /// SHA-256 of the file, lower-case hex.
    pub sha256: String,
}

/// `manifest.json` of a corpus directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusManifest {
    /// `MANIFEST_VERSION` at the time of writing.
    pub manifest_version: u32,
    /// Length of the model the cases were cut from, in bytes.
    pub source_bytes: u64,
    /// SHA-256 of that model, lower-case hex.
    pub source_sha256: String,
    /// Every case, in build order.
    pub cases: Vec<CorpusCase>,
}

/// Why a corpus could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The source is not a strictly valid full model.
    #[error("source {path}: {source}")]
    Source {
        /// The source model's path.
        path: PathBuf,
        /// Why the parser rejected it.
        source: ParseError,
    },
    /// The source lacks a record some case needs, or a case was not rejected as
    /// planned; the text says which.
    #[error("{0}")]
    Unsuitable(String),
    /// Reading the source or writing a case file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory being read or written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A piece of a case file: a range of the source, or new bytes.
enum Piece {
    Source(u64, u64),
    Bytes(Vec<u8>),
}

struct Plan {
    case: &'static str,
    description: String,
    expect: Expect,
    pieces: Vec<Piece>,
    rejection: ExpectedRejection,
}

fn reject(
    defect: &str,
    offset: u64,
    record: Option<&TensorRecord>,
    index: Option<usize>,
) -> ExpectedRejection {
    ExpectedRejection {
        defect: defect.into(),
        offset,
        record: index.or(record.map(|r| r.index)),
        tensor: record.map(|r| r.name.clone()),
    }
}

fn header_bytes(name: &str, type_id: i32, ne: &[u64]) -> Vec<u8> {
    let mut w = GgmlWriter::new(Vec::new());
    // Writing into memory cannot fail; dims come from a parsed file.
    let _ = w.record_header(name, type_id, ne);
    w.into_inner()
}

/// The source with record `r` replaced by `pieces`.
fn replace(inv: &Inventory, r: &TensorRecord, with: Vec<Piece>) -> Vec<Piece> {
    let mut out = vec![Piece::Source(0, r.record_offset)];
    out.extend(with);
    out.push(Piece::Source(r.end(), inv.file_len - r.end()));
    out
}

fn plans(inv: &Inventory) -> Result<Vec<Plan>, CorpusError> {
    let decoder: Vec<&TensorRecord> = inv
        .tensors
        .iter()
        .filter(|t| t.class == TensorClass::Decoder)
        .collect();
    let find = |pred: &dyn Fn(&TensorRecord) -> bool, what: &str| {
        decoder
            .iter()
            .copied()
            .find(|t| pred(t))
            .ok_or_else(|| CorpusError::Unsuitable(format!("the source has no {what}")))
    };
    // A decoder record followed by another record, for in-place edits.
    let mid = *decoder
        .get(decoder.len() / 2)
        .ok_or_else(|| CorpusError::Unsuitable("the source has no decoder records".into()))?;
    let vector = find(
        &|t| t.ne.len() == 1 && t.class == TensorClass::Decoder,
        "1-D decoder tensor",
    )?;
    let matrix = find(
        &|t| t.ne.len() == 2 && t.ne[0] != t.ne[1] && t.name.contains("mlp.0"),
        "decoder MLP weight",
    )?;
    let encoder_bias = inv
        .tensors
        .iter()
        .find(|t| t.name == "encoder.conv1.bias")
        .ok_or_else(|| CorpusError::Unsuitable("the source has no encoder.conv1.bias".into()))?;
    let last = inv
        .tensors
        .last()
        .ok_or_else(|| CorpusError::Unsuitable("the source has no tensors".into()))?;
    let len = inv.file_len;
    let mut plans = Vec::new();

    plans.push(Plan {
        case: "missing-decoder-record",
        description: format!("{} removed", mid.name),
        expect: Expect::Full,
        pieces: replace(inv, mid, vec![]),
        rejection: ExpectedRejection {
            defect: "missing_tensors".into(),
            offset: len - mid.record_len(),
            record: None,
            tensor: None,
        },
    });
    plans.push(Plan {
        case: "duplicate-decoder-record",
        description: format!("{} repeated right after itself", mid.name),
        expect: Expect::Full,
        pieces: vec![
            Piece::Source(0, mid.end()),
            Piece::Source(mid.record_offset, mid.record_len()),
            Piece::Source(mid.end(), len - mid.end()),
        ],
        rejection: reject(
            "duplicate_tensor",
            mid.end(),
            Some(mid),
            Some(mid.index + 1),
        ),
    });
    // The stripped artifact (prefix + decoder records) plus one encoder record.
    let mut stripped = vec![Piece::Source(0, inv.prefix_len)];
    let mut stripped_len = inv.prefix_len;
    for t in &decoder {
        stripped.push(Piece::Source(t.record_offset, t.record_len()));
        stripped_len += t.record_len();
    }
    stripped.push(Piece::Source(
        encoder_bias.record_offset,
        encoder_bias.record_len(),
    ));
    plans.push(Plan {
        case: "encoder-record-in-stripped",
        description: format!("decoder-only artifact with {} appended", encoder_bias.name),
        expect: Expect::DecoderOnly,
        pieces: stripped,
        rejection: ExpectedRejection {
            defect: "unknown_tensor".into(),
            offset: stripped_len,
            record: Some(decoder.len()),
            tensor: Some(encoder_bias.name.clone()),
        },
    });
    let half = vec![0u8; (vector.payload_len / 2) as usize];
    plans.push(Plan {
        case: "wrong-tensor-type",
        description: format!("{} stored as F16 (the loader reads F32)", vector.name),
        expect: Expect::Full,
        pieces: replace(
            inv,
            vector,
            vec![Piece::Bytes(
                [header_bytes(&vector.name, 1, &vector.ne), half].concat(),
            )],
        ),
        rejection: reject("type_mismatch", vector.record_offset, Some(vector), None),
    });
    let transposed = [matrix.ne[1], matrix.ne[0]];
    plans.push(Plan {
        case: "wrong-dims",
        description: format!(
            "{} with dims {:?} instead of {:?}",
            matrix.name, transposed, matrix.ne
        ),
        expect: Expect::Full,
        pieces: replace(
            inv,
            matrix,
            vec![
                Piece::Bytes(header_bytes(
                    &matrix.name,
                    matrix.ggml_type.id(),
                    &transposed,
                )),
                Piece::Source(matrix.payload_offset, matrix.payload_len),
            ],
        ),
        rejection: reject("dims_mismatch", matrix.record_offset, Some(matrix), None),
    });
    plans.push(Plan {
        case: "wrong-payload-length",
        description: format!("{}'s payload 2 bytes short", mid.name),
        expect: Expect::Full,
        pieces: vec![
            Piece::Source(0, mid.end() - 2),
            Piece::Source(mid.end(), len - mid.end()),
        ],
        rejection: reject("payload_length", mid.payload_offset, Some(mid), None),
    });
    plans.push(Plan {
        case: "truncated-final-payload",
        description: format!(
            "one byte short: {}'s payload ends early (whisper.cpp does not notice)",
            last.name
        ),
        expect: Expect::Full,
        pieces: vec![Piece::Source(0, len - 1)],
        rejection: reject("truncated", last.payload_offset, Some(last), None),
    });
    plans.push(Plan {
        case: "header-only",
        description: "the 48-byte header and nothing else".into(),
        expect: Expect::Full,
        pieces: vec![Piece::Source(0, crate::HEADER_LEN)],
        rejection: reject("truncated", crate::HEADER_LEN, None, None),
    });
    plans.push(Plan {
        case: "trailing-bytes",
        description: "one zero byte after the last record".into(),
        expect: Expect::Full,
        pieces: vec![Piece::Source(0, len), Piece::Bytes(vec![0])],
        rejection: reject("trailing_bytes", len, None, None),
    });
    let mut renamed = mid.name.clone().into_bytes();
    if let Some(c) = renamed.last_mut() {
        *c = if *c == b'X' { b'Y' } else { b'X' };
    }
    let renamed = String::from_utf8_lossy(&renamed).into_owned();
    plans.push(Plan {
        case: "renamed-tensor",
        description: format!("{} renamed to {renamed}", mid.name),
        expect: Expect::Full,
        pieces: replace(
            inv,
            mid,
            vec![
                Piece::Bytes(header_bytes(&renamed, mid.ggml_type.id(), &mid.ne)),
                Piece::Source(mid.payload_offset, mid.payload_len),
            ],
        ),
        rejection: ExpectedRejection {
            defect: "unknown_tensor".into(),
            offset: mid.record_offset,
            record: Some(mid.index),
            tensor: Some(renamed.clone()),
        },
    });
    plans.push(Plan {
        case: "negative-name-length",
        description: format!("{}'s name length set to -1", mid.name),
        expect: Expect::Full,
        pieces: vec![
            Piece::Source(0, mid.record_offset + 4),
            Piece::Bytes((-1i32).to_le_bytes().to_vec()),
            Piece::Source(mid.record_offset + 8, len - mid.record_offset - 8),
        ],
        rejection: reject("bad_name_length", mid.record_offset, None, Some(mid.index)),
    });
    plans.push(Plan {
        case: "bad-magic",
        description: "magic \"GGML\" instead of \"lmgg\"".into(),
        expect: Expect::Full,
        pieces: vec![Piece::Bytes(b"GGML".to_vec()), Piece::Source(4, len - 4)],
        rejection: reject("bad_magic", 0, None, None),
    });
    plans.push(Plan {
        case: "vocab-count-beyond-file",
        description: "vocabulary count i32::MAX".into(),
        expect: Expect::Full,
        pieces: vec![
            Piece::Source(0, inv.vocab.offset),
            Piece::Bytes(i32::MAX.to_le_bytes().to_vec()),
            Piece::Source(inv.vocab.offset + 4, len - inv.vocab.offset - 4),
        ],
        rejection: reject("bad_vocab_count", inv.vocab.offset, None, None),
    });
    Ok(plans)
}

/// Build the corpus of `src` (a complete F16/F32/quantized model) into `dir`
/// and write `dir/manifest.json`. Each case is checked against the parser
/// before the manifest is written; a case the parser does not reject as
/// planned is an error.
pub fn build_corpus(src: &Path, dir: &Path) -> Result<CorpusManifest, CorpusError> {
    let inv = inspect(src, Expect::Full).map_err(|source| CorpusError::Source {
        path: src.to_path_buf(),
        source,
    })?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CorpusError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut input = BufReader::with_capacity(1 << 20, File::open(src).map_err(io(src))?);
    let mut cases = Vec::new();
    for plan in plans(&inv)? {
        let file = format!("{}.bin", plan.case);
        let path = dir.join(&file);
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io(&path))?);
        for piece in &plan.pieces {
            match piece {
                Piece::Bytes(b) => out.write_all(b).map_err(io(&path))?,
                Piece::Source(offset, n) => {
                    input.seek(SeekFrom::Start(*offset)).map_err(io(src))?;
                    std::io::copy(&mut (&mut input).take(*n), &mut out).map_err(io(&path))?;
                }
            }
        }
        out.flush().map_err(io(&path))?;
        drop(out);
        let got = inspect(&path, plan.expect);
        let matches = match &got {
            Err(e) => rejection_of(e) == plan.rejection,
            Ok(_) => false,
        };
        if !matches {
            return Err(CorpusError::Unsuitable(format!(
                "case {} was meant to be rejected as {:?}, the parser says {:?}",
                plan.case,
                plan.rejection,
                got.map(|_| "accepted").map_err(|e| e.to_string())
            )));
        }
        cases.push(CorpusCase {
            case: plan.case.into(),
            file,
            description: plan.description,
            expect: plan.expect,
            rejection: plan.rejection,
            bytes: std::fs::metadata(&path).map_err(io(&path))?.len(),
            sha256: sha256_file(&path).map_err(io(&path))?,
        });
    }
    let manifest = CorpusManifest {
        manifest_version: MANIFEST_VERSION,
        source_bytes: inv.file_len,
        source_sha256: inv.file_sha256,
        cases,
    };
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    std::fs::write(&path, text).map_err(io(&path))?;
    Ok(manifest)
}

/// The manifest form of a parse error.
pub fn rejection_of(e: &ParseError) -> ExpectedRejection {
    ExpectedRejection {
        defect: e.defect.code().into(),
        offset: e.offset,
        record: e.record,
        tensor: e.tensor.clone(),
    }
}
