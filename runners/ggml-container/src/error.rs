//! Why a file was rejected, and where.

use crate::types::GgmlType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A rejected file: the defect, the byte offset it was found at, and the
/// tensor record (index and name) when the defect is inside one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct ParseError {
    /// What is wrong with the file.
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
    /// The 48-byte header: magic and the eleven hyperparameters.
    Header,
    /// The mel filter block: `n_mel`, `n_fft` and the `n_mel * n_fft` f32 filters.
    MelFilters,
    /// The vocabulary block: the token count and the length-prefixed tokens.
    Vocab,
    /// A tensor record's `n_dims`, name length, type id and dims.
    RecordHeader,
    /// A tensor record's name bytes.
    TensorName,
    /// A tensor record's data, after its name.
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
    /// The file could not be opened or read (an I/O error other than running
    /// out of bytes), or the hashing thread failed.
    #[error("cannot read the file: {message}")]
    Io {
        /// The operating system's error text.
        message: String,
    },
    /// The first four bytes are not `GGML_MAGIC`: not a GGML Whisper model.
    #[error("bad magic {found:#010x} (a GGML Whisper model starts with 0x67676d6c, \"ggml\")")]
    BadMagic {
        /// The first four bytes, read as a little-endian u32.
        found: u32,
    },
    /// The file ends before a field of `section` is complete.
    #[error("the file ends inside the {section}: {needed} bytes needed, {available} left")]
    Truncated {
        /// The section being read when the bytes ran out.
        section: Section,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file (0 when the file shrank while being read).
        available: u64,
    },
    /// A hyperparameter is out of range, the ftype is not one this crate
    /// handles, or a weight dim is not a whole number of its type's blocks.
    #[error("bad hyperparameters: {reason}")]
    BadHparams {
        /// Which field is wrong and why, for a person to read.
        reason: String,
    },
    /// The mel filter block's dims differ from `n_mels` x `MEL_N_FFT`.
    #[error(
        "mel filter block is {n_mel} x {n_fft}; this header needs {expected_mel} x {expected_fft}"
    )]
    BadMelDims {
        /// Rows, from the block's `n_mel` field.
        n_mel: i32,
        /// Columns, from the block's `n_fft` field.
        n_fft: i32,
        /// The header's `n_mels`.
        expected_mel: i32,
        /// `MEL_N_FFT` (201).
        expected_fft: i32,
    },
    /// The vocabulary's token count is negative, above `n_vocab`, or more
    /// than the rest of the file could hold (each token takes 4 bytes at least).
    #[error("vocabulary count {count} is impossible: {reason}")]
    BadVocabCount {
        /// The count as stored.
        count: i64,
        /// Which bound it breaks, for a person to read.
        reason: String,
    },
    /// A token's stored length runs past the end of the file.
    #[error("token {token} has length {len}, but only {available} bytes are left")]
    BadTokenLength {
        /// 0-based index of the token in the vocabulary.
        token: u64,
        /// The token's stored byte length.
        len: u64,
        /// Bytes left in the file after the length field.
        available: u64,
    },
    /// A tensor record's `n_dims` is not 1 to 4.
    #[error("n_dims {n_dims} is outside 1..=4")]
    BadDimCount {
        /// `n_dims` as stored.
        n_dims: i32,
    },
    /// A tensor record's name length is not 1 to `MAX_NAME_LEN` bytes.
    #[error("name length {name_len} is outside 1..={max}")]
    BadNameLength {
        /// The name length as stored.
        name_len: i32,
        /// `MAX_NAME_LEN`.
        max: u64,
    },
    /// A tensor dimension is zero or negative. Also reported (axis 0, value 0)
    /// when an expected tensor's type x dims gives no payload length.
    #[error("dimension {axis} is {value}; dimensions must be positive")]
    BadDim {
        /// 0-based axis, in ggml order.
        axis: usize,
        /// The dimension as stored.
        value: i32,
    },
    /// A record's ggml type id is none of `GgmlType`'s.
    #[error("ggml type {type_id} is not one a Whisper model may hold")]
    UnsupportedType {
        /// The type id as stored (ggml's `enum ggml_type`).
        type_id: i32,
    },
    /// The record's name (in `ParseError::tensor`) is not in the inventory
    /// expected for this header and `Expect`.
    #[error("tensor name is not one this model declares (whisper.cpp: unknown tensor)")]
    UnknownTensor,
    /// A second record with a name already seen.
    #[error("duplicate tensor: record {first_record} already holds it")]
    DuplicateTensor {
        /// 0-based index of the record that first held the name.
        first_record: usize,
    },
    /// A known tensor's dims differ from those the loader expects.
    #[error("dims {found:?} differ from the expected {expected:?}")]
    DimsMismatch {
        /// The loader's dims, in ggml order.
        expected: Vec<u64>,
        /// The stored dims, in ggml order.
        found: Vec<u64>,
    },
    /// A known tensor is stored in a ggml type other than the one whisper.cpp
    /// reads it as for this ftype.
    #[error("stored as {found}, but the loader reads this tensor as {expected}")]
    TypeMismatch {
        /// The type the loader reads.
        expected: GgmlType,
        /// The type stored in the record.
        found: GgmlType,
    },
    /// A payload is longer or shorter than its type x dims: the next valid
    /// record header was found elsewhere. Reported on the record whose
    /// payload is wrong, not on the garbage that follows it.
    #[error(
        "payload is {found} bytes, but type x dims gives {expected} (the next record header was found {found} bytes after this payload's start)"
    )]
    PayloadLength {
        /// Payload bytes that type x dims gives.
        expected: u64,
        /// Bytes from the payload's start to the next valid record header.
        found: u64,
    },
    /// The file ends before every expected tensor was seen.
    #[error("{} expected tensors are missing: {}", names.len(), names.join(", "))]
    MissingTensors {
        /// The missing names, in the loader's declaration order.
        names: Vec<String>,
    },
    /// Bytes follow the last expected tensor.
    #[error("{bytes} trailing bytes after the last expected tensor")]
    TrailingBytes {
        /// How many: from the first unaccounted byte to the end of the file.
        bytes: u64,
    },
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
