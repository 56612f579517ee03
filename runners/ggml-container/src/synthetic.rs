//! Deterministic synthetic GGML Whisper models: the real container layout and
//! the full expected inventory, with seeded pseudo-random weights and small
//! made-up dimensions, for fast tests of load paths.

use crate::ct2::record_order;
use crate::expect::ExpectedInventory;
use crate::mel::{N_FFT, mel_filters};
use crate::types::{Expect, Ftype, GgmlType, Hparams};
use crate::write::GgmlWriter;
use half::f16;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::Path;

/// Shape and seed of a synthetic model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticSpec {
    /// Header `n_vocab`: the vocabulary size the model declares.
    pub n_vocab: i32,
    /// Encoder context in frames.
    pub n_audio_ctx: i32,
    /// Decoder context in tokens.
    pub n_text_ctx: i32,
    /// Audio and text state width (the same, as in every Whisper model).
    pub n_state: i32,
    /// Attention heads, in encoder and decoder alike.
    pub n_head: i32,
    /// Encoder layers.
    pub n_audio_layer: i32,
    /// Decoder layers.
    pub n_text_layer: i32,
    /// Mel bins; the mel filter block gets a real bank of this many rows.
    pub n_mels: i32,
    /// F16 or F32 (the generator does not quantize).
    pub weight_type: GgmlType,
    /// Tokens written to the vocabulary block; whisper.cpp synthesizes the rest.
    pub vocab_tokens: u32,
    /// Seed of the weights; the same spec always gives the same bytes.
    pub seed: u64,
}

impl SyntheticSpec {
    /// Dimensions stock whisper.cpp accepts (English vocabulary, real
    /// contexts and mel count) with a 64-wide state, one head, one layer each.
    pub fn loadable() -> Self {
        Self {
            n_vocab: 51864,
            n_audio_ctx: 1500,
            n_text_ctx: 448,
            n_state: 64,
            n_head: 1,
            n_audio_layer: 1,
            n_text_layer: 1,
            n_mels: 80,
            weight_type: GgmlType::F16,
            vocab_tokens: 256,
            seed: 1,
        }
    }

    /// A few-kilobyte model for parser tests (not meant for whisper.cpp).
    pub fn miniature() -> Self {
        Self {
            n_vocab: 64,
            n_audio_ctx: 8,
            n_text_ctx: 8,
            n_state: 32,
            n_head: 1,
            n_audio_layer: 1,
            n_text_layer: 1,
            n_mels: 4,
            weight_type: GgmlType::F16,
            vocab_tokens: 16,
            seed: 7,
        }
    }

    /// The header the model is written with (ftype from `weight_type`).
    pub fn hparams(&self) -> Hparams {
        Hparams {
            n_vocab: self.n_vocab,
            n_audio_ctx: self.n_audio_ctx,
            n_audio_state: self.n_state,
            n_audio_head: self.n_head,
            n_audio_layer: self.n_audio_layer,
            n_text_ctx: self.n_text_ctx,
            n_text_state: self.n_state,
            n_text_head: self.n_head,
            n_text_layer: self.n_text_layer,
            n_mels: self.n_mels,
            ftype: Ftype::for_weight_type(self.weight_type).raw,
        }
    }
}

/// splitmix64: tiny, seedable, good enough for test weights.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-0.1, 0.1).
    fn weight(&mut self) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        (unit - 0.5) * 0.2
    }
}

/// Write the model described by `spec` to `out`; returns the bytes written.
pub fn generate<W: Write>(spec: &SyntheticSpec, out: W) -> io::Result<u64> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if !matches!(spec.weight_type, GgmlType::F16 | GgmlType::F32) {
        return Err(invalid(format!(
            "weight type {} is not F16/F32",
            spec.weight_type
        )));
    }
    let hparams = spec.hparams();
    let expected = ExpectedInventory::new(&hparams, Expect::Full).map_err(invalid)?;
    let mut rng = Rng(spec.seed);
    let mut w = GgmlWriter::new(out);
    w.header(&hparams)?;
    let n_mels = usize::try_from(spec.n_mels).unwrap_or(0);
    w.mel_filters(spec.n_mels, (N_FFT / 2 + 1) as i32, &mel_filters(n_mels))?;
    let tokens: Vec<Vec<u8>> = (0..spec.vocab_tokens)
        .map(|i| match u8::try_from(i) {
            Ok(b) => vec![b],
            Err(_) => format!("tok{i}").into_bytes(),
        })
        .collect();
    w.vocab(&tokens)?;
    // Real files' record order (the loader accepts any).
    for name in record_order(&hparams) {
        let t = expected
            .get(&name)
            .ok_or_else(|| invalid(format!("{name} is not expected")))?;
        let elements: u64 = t.ne.iter().product();
        let mut payload = Vec::with_capacity((elements * t.ggml_type.type_size()) as usize);
        for _ in 0..elements {
            let v = rng.weight();
            match t.ggml_type {
                GgmlType::F16 => payload.extend_from_slice(&f16::from_f32(v).to_le_bytes()),
                _ => payload.extend_from_slice(&v.to_le_bytes()),
            }
        }
        w.tensor(&t.name, t.ggml_type, &t.ne, &payload)?;
    }
    w.flush()?;
    Ok(w.written())
}

/// Generate into a new file at `path`.
pub fn write_file(spec: &SyntheticSpec, path: &Path) -> io::Result<u64> {
    let file = std::fs::File::create(path)?;
    generate(spec, io::BufWriter::new(file))
}

/// Generate into memory.
pub fn to_bytes(spec: &SyntheticSpec) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    generate(spec, &mut out)?;
    Ok(out)
}
