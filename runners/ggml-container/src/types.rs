//! The container's scalar vocabulary: hyperparameters, ftype, ggml tensor types,
//! model family. Numbers follow whisper.cpp 1.8.3 `whisper_model_load` and
//! ggml's type traits (see `../shared/reference/whisper-model-formats.md` §3).

use serde::{Deserialize, Serialize};
use std::fmt;

/// `"ggml"` read as a little-endian u32 (`GGML_FILE_MAGIC`).
pub const GGML_MAGIC: u32 = 0x6767_6d6c;

/// ggml's `GGML_QNT_VERSION`: quantized files store `ftype + 2 * 1000`.
pub const QUANTIZATION_VERSION: i32 = 2;

/// ggml's `GGML_QNT_VERSION_FACTOR`.
pub const QUANTIZATION_VERSION_FACTOR: i32 = 1000;

/// Byte length of the magic plus the eleven i32 hyperparameters.
pub const HEADER_LEN: u64 = 48;

/// Upper bound for any dimension-like hyperparameter; real Whisper models stay
/// far below it and it keeps every size computation well inside u64.
pub const MAX_DIM: i32 = 1 << 20;

/// Upper bound for the layer counts (Whisper large has 32). It bounds the
/// expected inventory a header can make the parser build.
pub const MAX_LAYERS: i32 = 256;

/// The eleven i32 hyperparameters in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hparams {
    /// Vocabulary size in tokens (51864 for English-only models; 51865 or more
    /// is multilingual).
    pub n_vocab: i32,
    /// Encoder context in frames after the convolutions (1500 for 30 s).
    pub n_audio_ctx: i32,
    /// Encoder width: the hidden size of every encoder layer (384 in tiny).
    pub n_audio_state: i32,
    /// Attention heads per encoder layer.
    pub n_audio_head: i32,
    /// Encoder layers; it decides the `ModelFamily`.
    pub n_audio_layer: i32,
    /// Decoder context in tokens (448).
    pub n_text_ctx: i32,
    /// Decoder width: the hidden size of every decoder layer.
    pub n_text_state: i32,
    /// Attention heads per decoder layer.
    pub n_text_head: i32,
    /// Decoder layers.
    pub n_text_layer: i32,
    /// Mel bins per frame (80; 128 for large-v3); also the rows of the mel
    /// filter block.
    pub n_mels: i32,
    /// The stored file type, decoded by `Ftype::decode`.
    pub ftype: i32,
}

impl Hparams {
    /// Build from the eleven values in file order.
    pub fn from_array(v: [i32; 11]) -> Self {
        Self {
            n_vocab: v[0],
            n_audio_ctx: v[1],
            n_audio_state: v[2],
            n_audio_head: v[3],
            n_audio_layer: v[4],
            n_text_ctx: v[5],
            n_text_state: v[6],
            n_text_head: v[7],
            n_text_layer: v[8],
            n_mels: v[9],
            ftype: v[10],
        }
    }

    /// The eleven values in file order.
    pub fn to_array(&self) -> [i32; 11] {
        [
            self.n_vocab,
            self.n_audio_ctx,
            self.n_audio_state,
            self.n_audio_head,
            self.n_audio_layer,
            self.n_text_ctx,
            self.n_text_state,
            self.n_text_head,
            self.n_text_layer,
            self.n_mels,
            self.ftype,
        ]
    }

    /// The first field outside its range (`1..=MAX_DIM`, layers
    /// `1..=MAX_LAYERS`), as (name, value).
    pub fn out_of_range_field(&self) -> Option<(&'static str, i32)> {
        const NAMES: [&str; 10] = [
            "n_vocab",
            "n_audio_ctx",
            "n_audio_state",
            "n_audio_head",
            "n_audio_layer",
            "n_text_ctx",
            "n_text_state",
            "n_text_head",
            "n_text_layer",
            "n_mels",
        ];
        NAMES
            .iter()
            .zip(self.to_array())
            .find(|(n, v)| {
                let max = if n.ends_with("_layer") {
                    MAX_LAYERS
                } else {
                    MAX_DIM
                };
                !(1..=max).contains(v)
            })
            .map(|(n, v)| (*n, v))
    }

    /// Model family as whisper.cpp names it from `n_audio_layer`.
    pub fn family(&self) -> ModelFamily {
        ModelFamily::from_audio_layers(self.n_audio_layer)
    }

    /// whisper.cpp treats `n_vocab >= 51865` as multilingual.
    pub fn multilingual(&self) -> bool {
        self.n_vocab >= 51865
    }
}

/// The decoded `ftype` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ftype {
    /// The value as stored.
    pub raw: i32,
    /// `raw % 1000`: ggml's `ggml_ftype`.
    pub base: i32,
    /// `raw / 1000`: the quantization version (only printed by whisper.cpp).
    pub quantization_version: i32,
    /// The type the loader reads 2-D weight matrices as (`wtype`).
    pub weight_type: GgmlType,
}

impl Ftype {
    /// Decode a stored ftype; `None` for negative values and ftypes whose
    /// weight type this crate does not handle.
    pub fn decode(raw: i32) -> Option<Self> {
        if raw < 0 {
            return None;
        }
        let base = raw % QUANTIZATION_VERSION_FACTOR;
        let weight_type = match base {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            7 => GgmlType::Q8_0,
            8 => GgmlType::Q5_0,
            9 => GgmlType::Q5_1,
            _ => return None,
        };
        Some(Self {
            raw,
            base,
            quantization_version: raw / QUANTIZATION_VERSION_FACTOR,
            weight_type,
        })
    }

    /// The ftype a file whose weight matrices are `weight_type` stores:
    /// quantized types carry the quantization version, F32/F16 do not.
    pub fn for_weight_type(weight_type: GgmlType) -> Self {
        let base = match weight_type {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q8_0 => 7,
            GgmlType::Q5_0 => 8,
            GgmlType::Q5_1 => 9,
        };
        let quantization_version = if weight_type.is_quantized() {
            QUANTIZATION_VERSION
        } else {
            0
        };
        Self {
            raw: base + quantization_version * QUANTIZATION_VERSION_FACTOR,
            base,
            quantization_version,
            weight_type,
        }
    }

    /// The type of the convolution weights (`vtype`): F16 unless the file is F32.
    pub fn conv_type(&self) -> GgmlType {
        if self.weight_type == GgmlType::F32 {
            GgmlType::F32
        } else {
            GgmlType::F16
        }
    }
}

/// The ggml tensor types a Whisper GGML file may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE half float.
    F16,
    /// 4-bit, blocks of 32 with one f16 scale (18 bytes).
    Q4_0,
    /// 4-bit, blocks of 32 with an f16 scale and minimum (20 bytes).
    Q4_1,
    /// 5-bit, blocks of 32 with one f16 scale (22 bytes).
    Q5_0,
    /// 5-bit, blocks of 32 with an f16 scale and minimum (24 bytes).
    Q5_1,
    /// 8-bit, blocks of 32 with one f16 scale (34 bytes).
    Q8_0,
}

impl GgmlType {
    /// All handled types.
    pub const ALL: [GgmlType; 7] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
    ];

    /// From ggml's `enum ggml_type` value; `None` for anything else.
    pub fn from_id(id: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// ggml's `enum ggml_type` value.
    pub fn id(self) -> i32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
        }
    }

    /// Elements per block (`blck_size`).
    pub fn block_size(self) -> u64 {
        match self {
            GgmlType::F32 | GgmlType::F16 => 1,
            _ => 32,
        }
    }

    /// Bytes per block (`type_size`), from ggml-common.h's block structs.
    pub fn type_size(self) -> u64 {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
        }
    }

    /// Whether the type stores blocks of 32 elements (every Q type).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Lower-case name as ggml prints it (`q5_0`).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
        }
    }

    /// Payload bytes of a contiguous tensor with dims `ne` (ggml order), or
    /// `None` when `ne[0]` is not a whole number of blocks or the size overflows.
    pub fn payload_len(self, ne: &[u64]) -> Option<u64> {
        let (first, rest) = ne.split_first()?;
        if first % self.block_size() != 0 {
            return None;
        }
        let row = (first / self.block_size()).checked_mul(self.type_size())?;
        rest.iter().try_fold(row, |acc, &d| acc.checked_mul(d))
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Model family from `n_audio_layer`, as whisper.cpp reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFamily {
    /// 4 encoder layers.
    Tiny,
    /// 6 encoder layers.
    Base,
    /// 12 encoder layers.
    Small,
    /// 24 encoder layers.
    Medium,
    /// 32 encoder layers (large, large-v2, large-v3 and turbo alike).
    Large,
    /// Any other layer count.
    /// whisper.cpp still loads it (as `MODEL_UNKNOWN`).
    Unknown,
}

impl ModelFamily {
    /// The family whisper.cpp names for an `n_audio_layer`; `Unknown` for any
    /// count it does not name.
    pub fn from_audio_layers(n_audio_layer: i32) -> Self {
        match n_audio_layer {
            4 => ModelFamily::Tiny,
            6 => ModelFamily::Base,
            12 => ModelFamily::Small,
            24 => ModelFamily::Medium,
            32 => ModelFamily::Large,
            _ => ModelFamily::Unknown,
        }
    }
}

/// Whether a tensor belongs to the native encoder or to the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorClass {
    /// Names under `encoder.`: convolutions, positional embedding, encoder
    /// blocks and `ln_post`.
    NativeEncoder,
    /// Names under `decoder.`: token and positional embeddings, decoder blocks
    /// and `ln`.
    Decoder,
}

/// Which tensors a file must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Everything stock whisper.cpp 1.8.3 declares: encoder and decoder.
    #[default]
    Full,
    /// Every decoder tensor and no native-encoder tensor (seed 003 §2.2).
    DecoderOnly,
    /// Every native-encoder tensor and no decoder tensor (the token
    /// embedding included); header, mel filters and vocabulary as in the
    /// full model (the container has no form without a vocabulary block).
    /// Stock whisper.cpp refuses such a file: it counts the decoder missing.
    EncoderOnly,
}

impl Expect {
    /// Whether the inventory holds the native-encoder tensors.
    pub fn has_encoder(self) -> bool {
        self != Expect::DecoderOnly
    }

    /// Whether the inventory holds the decoder tensors.
    pub fn has_decoder(self) -> bool {
        self != Expect::EncoderOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftype_decodes_the_quantization_version() {
        let q5 = Ftype::decode(2008).unwrap();
        assert_eq!((q5.base, q5.quantization_version), (8, 2));
        assert_eq!(q5.weight_type, GgmlType::Q5_0);
        assert_eq!(q5.conv_type(), GgmlType::F16);
        assert_eq!(Ftype::for_weight_type(GgmlType::Q5_0), q5);
        assert_eq!(Ftype::for_weight_type(GgmlType::F16).raw, 1);
        assert_eq!(Ftype::decode(0).unwrap().conv_type(), GgmlType::F32);
        assert_eq!(Ftype::decode(4), None);
        assert_eq!(Ftype::decode(-1), None);
    }

    #[test]
    fn payload_lengths_follow_block_layout() {
        assert_eq!(
            GgmlType::Q5_0.payload_len(&[384, 384]),
            Some(384 / 32 * 22 * 384)
        );
        assert_eq!(
            GgmlType::F16.payload_len(&[3, 80, 384]),
            Some(3 * 80 * 384 * 2)
        );
        assert_eq!(GgmlType::Q8_0.payload_len(&[33]), None);
        assert_eq!(GgmlType::F32.payload_len(&[u64::MAX, 2]), None);
        assert_eq!(GgmlType::from_id(6), Some(GgmlType::Q5_0));
        assert_eq!(GgmlType::from_id(4), None);
    }
}
