//! What a successful parse returns: the file's full, ordered description.

use crate::types::{Expect, Ftype, GgmlType, Hparams, ModelFamily, TensorClass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One tensor record as found in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorRecord {
    /// 0-based position among the file's tensor records.
    pub index: usize,
    /// Tensor name as stored (valid UTF-8; it matched an expected name).
    pub name: String,
    /// Stored ggml type (equal to the expected one).
    pub ggml_type: GgmlType,
    /// Dims in ggml order.
    pub ne: Vec<u64>,
    /// Offset of the record's `n_dims` field.
    pub record_offset: u64,
    /// Byte offset of the first payload byte, right after the name.
    pub payload_offset: u64,
    /// Payload length in bytes (type x dims).
    pub payload_len: u64,
    /// SHA-256 of the payload, lower-case hex.
    pub payload_sha256: String,
    /// Encoder or decoder, by the name's prefix.
    pub class: TensorClass,
}

impl TensorRecord {
    /// Physical bytes of the record: header, dims, name and payload.
    pub fn record_len(&self) -> u64 {
        self.payload_offset + self.payload_len - self.record_offset
    }

    /// One past the record's last byte.
    pub fn end(&self) -> u64 {
        self.payload_offset + self.payload_len
    }
}

/// The mel filter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MelInfo {
    /// Filter rows (equal to the header's `n_mels`).
    pub n_mel: i32,
    /// Filter columns (always `MEL_N_FFT`, 201).
    pub n_fft: i32,
    /// Offset of the block's `n_mel` field.
    pub offset: u64,
    /// One past the block's last byte.
    pub end: u64,
}

/// The vocabulary block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VocabInfo {
    /// Tokens stored (whisper.cpp synthesizes the rest up to `n_vocab`).
    pub count: u64,
    /// Offset of the count field.
    pub offset: u64,
    /// One past the block's last byte (= the prefix length).
    pub end: u64,
    /// Longest stored token, in bytes.
    pub max_token_len: u64,
}

/// Records and bytes of one tensor class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTotal {
    /// Tensor records of the class.
    pub records: usize,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Payload plus record headers and names.
    pub record_bytes: u64,
}

/// Totals per class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTotals {
    /// Records under `encoder.`.
    pub native_encoder: ClassTotal,
    /// Records under `decoder.`.
    pub decoder: ClassTotal,
}

impl ClassTotals {
    /// Sum `records` per class.
    pub fn of(records: &[TensorRecord]) -> Self {
        let mut totals = Self::default();
        for r in records {
            totals.add(r.class, r.payload_len, r.record_len());
        }
        totals
    }

    /// Count one record of `class` with its payload and whole-record bytes.
    pub fn add(&mut self, class: TensorClass, payload_bytes: u64, record_bytes: u64) {
        let t = match class {
            TensorClass::NativeEncoder => &mut self.native_encoder,
            TensorClass::Decoder => &mut self.decoder,
        };
        t.records += 1;
        t.payload_bytes += payload_bytes;
        t.record_bytes += record_bytes;
    }
}

/// A strictly parsed GGML Whisper model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    /// The magic as read (always `GGML_MAGIC`).
    pub magic: u32,
    /// The eleven header hyperparameters.
    pub hparams: Hparams,
    /// The decoded `hparams.ftype`.
    pub ftype: Ftype,
    /// Family from `n_audio_layer`.
    pub family: ModelFamily,
    /// Whether `n_vocab >= 51865`, as whisper.cpp decides it.
    pub multilingual: bool,
    /// The inventory the file was checked against.
    pub expect: Expect,
    /// Where the mel filter block lies.
    pub mel: MelInfo,
    /// Where the vocabulary block lies and what it holds.
    pub vocab: VocabInfo,
    /// Header + mel filters + vocabulary, in bytes.
    pub prefix_len: u64,
    /// SHA-256 of the first `prefix_len` bytes, lower-case hex.
    pub prefix_sha256: String,
    /// Records in file order.
    pub tensors: Vec<TensorRecord>,
    /// Records and bytes per tensor class.
    pub totals: ClassTotals,
    /// Records per ggml type.
    pub type_counts: BTreeMap<GgmlType, usize>,
    /// File length in bytes.
    pub file_len: u64,
    /// SHA-256 of the whole file, lower-case hex.
    pub file_sha256: String,
}

impl Inventory {
    /// Records stored as `ggml_type` (0 if none).
    pub fn count_of(&self, ggml_type: GgmlType) -> usize {
        self.type_counts.get(&ggml_type).copied().unwrap_or(0)
    }
}
