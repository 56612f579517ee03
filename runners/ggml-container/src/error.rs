//! Why a file was rejected, and where.

use crate::types::GgmlType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A rejected file: the defect, the byte offset it was found at, and the
/// tensor record (index and name) when the defect is inside one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct ParseError {
    pub defect: Defect,
    /// Byte offset of the field or record that is wrong.
    pub offset: u64,
    /// 0-based index of the tensor record, when inside the tensor section.
    pub record: Option<usize>,
    /// The record's tensor name, once read.
    pub tensor: Option<String>,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte offset {}", self.offset)?;
        if let Some(i) = self.record {
            write!(f, ", tensor record {i}")?;
        }
        if let Some(name) = &self.tensor {
            write!(f, " '{name}'")?;
        }
        write!(f, ": {} [{}]", self.defect, self.defect.code())
    }
}

/// The file section a truncation hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Header,
    MelFilters,
    Vocab,
    RecordHeader,
    TensorName,
    Payload,
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Section::Header => "header",
            Section::MelFilters => "mel filters",
            Section::Vocab => "vocabulary",
            Section::RecordHeader => "tensor record header",
            Section::TensorName => "tensor name",
            Section::Payload => "tensor payload",
        })
    }
}

/// What is wrong. [`Defect::code`] is a stable short name for manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Defect {
    #[error("cannot read the file: {message}")]
    Io { message: String },
    #[error("bad magic {found:#010x} (a GGML Whisper model starts with 0x67676d6c, \"ggml\")")]
    BadMagic { found: u32 },
    #[error("the file ends inside the {section}: {needed} bytes needed, {available} left")]
    Truncated {
        section: Section,
        needed: u64,
        available: u64,
    },
    #[error("bad hyperparameters: {reason}")]
    BadHparams { reason: String },
    #[error(
        "mel filter block is {n_mel} x {n_fft}; this header needs {expected_mel} x {expected_fft}"
    )]
    BadMelDims {
        n_mel: i32,
        n_fft: i32,
        expected_mel: i32,
        expected_fft: i32,
    },
    #[error("vocabulary count {count} is impossible: {reason}")]
    BadVocabCount { count: i64, reason: String },
    #[error("token {token} has length {len}, but only {available} bytes are left")]
    BadTokenLength {
        token: u64,
        len: u64,
        available: u64,
    },
    #[error("n_dims {n_dims} is outside 1..=4")]
    BadDimCount { n_dims: i32 },
    #[error("name length {name_len} is outside 1..={max}")]
    BadNameLength { name_len: i32, max: u64 },
    #[error("dimension {axis} is {value}; dimensions must be positive")]
    BadDim { axis: usize, value: i32 },
    #[error("ggml type {type_id} is not one a Whisper model may hold")]
    UnsupportedType { type_id: i32 },
    #[error("tensor name is not one this model declares (whisper.cpp: unknown tensor)")]
    UnknownTensor,
    #[error("duplicate tensor: record {first_record} already holds it")]
    DuplicateTensor { first_record: usize },
    #[error("dims {found:?} differ from the expected {expected:?}")]
    DimsMismatch { expected: Vec<u64>, found: Vec<u64> },
    #[error("stored as {found}, but the loader reads this tensor as {expected}")]
    TypeMismatch { expected: GgmlType, found: GgmlType },
    #[error(
        "payload is {found} bytes, but type x dims gives {expected} (the next record header was found {found} bytes after this payload's start)"
    )]
    PayloadLength { expected: u64, found: u64 },
    #[error("{} expected tensors are missing: {}", names.len(), names.join(", "))]
    MissingTensors { names: Vec<String> },
    #[error("{bytes} trailing bytes after the last expected tensor")]
    TrailingBytes { bytes: u64 },
}

impl Defect {
    /// A stable short name (`duplicate_tensor`), used by corpus manifests.
    pub fn code(&self) -> &'static str {
        match self {
            Defect::Io { .. } => "io",
            Defect::BadMagic { .. } => "bad_magic",
            Defect::Truncated { .. } => "truncated",
            Defect::BadHparams { .. } => "bad_hparams",
            Defect::BadMelDims { .. } => "bad_mel_dims",
            Defect::BadVocabCount { .. } => "bad_vocab_count",
            Defect::BadTokenLength { .. } => "bad_token_length",
            Defect::BadDimCount { .. } => "bad_dim_count",
            Defect::BadNameLength { .. } => "bad_name_length",
            Defect::BadDim { .. } => "bad_dim",
            Defect::UnsupportedType { .. } => "unsupported_type",
            Defect::UnknownTensor => "unknown_tensor",
            Defect::DuplicateTensor { .. } => "duplicate_tensor",
            Defect::DimsMismatch { .. } => "dims_mismatch",
            Defect::TypeMismatch { .. } => "type_mismatch",
            Defect::PayloadLength { .. } => "payload_length",
            Defect::MissingTensors { .. } => "missing_tensors",
            Defect::TrailingBytes { .. } => "trailing_bytes",
        }
    }
}
