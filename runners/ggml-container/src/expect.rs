//! The frozen tensor inventory whisper.cpp 1.8.3 declares for given
//! hyperparameters: every name, its dims (ggml order) and the type the loader
//! reads it as. Listed in the loader's own declaration order.

use crate::types::{Expect, Ftype, GgmlType, Hparams, TensorClass};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One tensor the loader expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedTensor {
    /// Tensor name as whisper.cpp looks it up (`decoder.blocks.0.attn.query.weight`).
    pub name: String,
    /// Dims in ggml order (the numpy shape reversed).
    pub ne: Vec<u64>,
    /// The type the loader reads it as: F32 for vectors and positional
    /// embeddings, the ftype's conv type for convolutions, its weight type for
    /// matrices.
    pub ggml_type: GgmlType,
    /// Encoder or decoder, by the name's prefix.
    pub class: TensorClass,
}

impl ExpectedTensor {
    /// Payload bytes; `None` if the dims do not fit the type's blocks.
    pub fn payload_len(&self) -> Option<u64> {
        self.ggml_type.payload_len(&self.ne)
    }
}

/// The expected tensors for one header, with a name index.
#[derive(Debug, Clone)]
pub struct ExpectedInventory {
    /// In the loader's declaration order: encoder first, then decoder (each
    /// where the expectation holds it).
    pub tensors: Vec<ExpectedTensor>,
    by_name: HashMap<String, usize>,
}

impl ExpectedInventory {
    /// The inventory for `hparams` under `expect`. Fails (with a reason) when the
    /// header cannot describe a loadable model: a dimension out of range, an
    /// unhandled ftype, or a weight dim that is not a whole number of blocks.
    pub fn new(hparams: &Hparams, expect: Expect) -> Result<Self, String> {
        if let Some((field, value)) = hparams.out_of_range_field() {
            return Err(format!("{field} = {value} is out of range"));
        }
        let ftype = Ftype::decode(hparams.ftype)
            .ok_or_else(|| format!("ftype {} is not a handled ggml ftype", hparams.ftype))?;
        let mut tensors = Vec::new();
        if expect.has_encoder() {
            encoder_tensors(hparams, &ftype, &mut tensors);
        }
        if expect.has_decoder() {
            decoder_tensors(hparams, &ftype, &mut tensors);
        }
        for t in &tensors {
            if t.payload_len().is_none() {
                return Err(format!(
                    "{} with dims {:?} is not a whole number of {} blocks",
                    t.name, t.ne, t.ggml_type
                ));
            }
        }
        let by_name = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Self { tensors, by_name })
    }

    /// Index into [`Self::tensors`] of a name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The expected tensor of that name, if the loader declares one.
    pub fn get(&self, name: &str) -> Option<&ExpectedTensor> {
        self.position(name).map(|i| &self.tensors[i])
    }

    /// Number of expected tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether no tensor is expected (never true for an inventory `new` built).
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// The class a tensor name belongs to by its prefix, if any.
pub fn class_of(name: &str) -> Option<TensorClass> {
    if name.starts_with("encoder.") {
        Some(TensorClass::NativeEncoder)
    } else if name.starts_with("decoder.") {
        Some(TensorClass::Decoder)
    } else {
        None
    }
}

struct Builder<'a> {
    out: &'a mut Vec<ExpectedTensor>,
    class: TensorClass,
}

impl Builder<'_> {
    fn push(&mut self, name: String, ne: &[i32], ggml_type: GgmlType) {
        // Dims were range-checked (1..=MAX_DIM, times at most 4), so they are positive.
        let ne = ne.iter().map(|&d| u64::from(d.unsigned_abs())).collect();
        self.out.push(ExpectedTensor {
            name,
            ne,
            ggml_type,
            class: self.class,
        });
    }

    /// A 1-D F32 vector (biases, layer norms).
    fn vector(&mut self, name: String, n: i32) {
        self.push(name, &[n], GgmlType::F32);
    }

    /// A LayerNorm's weight and bias.
    fn norm(&mut self, prefix: &str, n: i32) {
        self.vector(format!("{prefix}.weight"), n);
        self.vector(format!("{prefix}.bias"), n);
    }

    /// A linear layer; whisper has no bias on the key projections.
    fn linear(&mut self, prefix: &str, n_in: i32, n_out: i32, wtype: GgmlType, bias: bool) {
        self.push(format!("{prefix}.weight"), &[n_in, n_out], wtype);
        if bias {
            self.vector(format!("{prefix}.bias"), n_out);
        }
    }

    /// One transformer block; `cross` adds the decoder's cross-attention.
    fn block(&mut self, prefix: &str, n: i32, wtype: GgmlType, cross: bool) {
        let mlp = n.saturating_mul(4);
        self.norm(&format!("{prefix}.mlp_ln"), n);
        self.linear(&format!("{prefix}.mlp.0"), n, mlp, wtype, true);
        self.linear(&format!("{prefix}.mlp.2"), mlp, n, wtype, true);
        let attns: &[&str] = if cross {
            &["attn", "cross_attn"]
        } else {
            &["attn"]
        };
        for attn in attns {
            self.norm(&format!("{prefix}.{attn}_ln"), n);
            self.linear(&format!("{prefix}.{attn}.query"), n, n, wtype, true);
            self.linear(&format!("{prefix}.{attn}.key"), n, n, wtype, false);
            self.linear(&format!("{prefix}.{attn}.value"), n, n, wtype, true);
            self.linear(&format!("{prefix}.{attn}.out"), n, n, wtype, true);
        }
    }
}

fn encoder_tensors(h: &Hparams, ftype: &Ftype, out: &mut Vec<ExpectedTensor>) {
    let n = h.n_audio_state;
    let mut b = Builder {
        out,
        class: TensorClass::NativeEncoder,
    };
    b.push(
        "encoder.positional_embedding".into(),
        &[n, h.n_audio_ctx],
        GgmlType::F32,
    );
    b.push(
        "encoder.conv1.weight".into(),
        &[3, h.n_mels, n],
        ftype.conv_type(),
    );
    b.push("encoder.conv1.bias".into(), &[1, n], GgmlType::F32);
    b.push("encoder.conv2.weight".into(), &[3, n, n], ftype.conv_type());
    b.push("encoder.conv2.bias".into(), &[1, n], GgmlType::F32);
    b.norm("encoder.ln_post", n);
    for i in 0..h.n_audio_layer {
        b.block(&format!("encoder.blocks.{i}"), n, ftype.weight_type, false);
    }
}

fn decoder_tensors(h: &Hparams, ftype: &Ftype, out: &mut Vec<ExpectedTensor>) {
    let n = h.n_text_state;
    let mut b = Builder {
        out,
        class: TensorClass::Decoder,
    };
    b.push(
        "decoder.positional_embedding".into(),
        &[n, h.n_text_ctx],
        GgmlType::F32,
    );
    b.push(
        "decoder.token_embedding.weight".into(),
        &[n, h.n_vocab],
        ftype.weight_type,
    );
    b.norm("decoder.ln", n);
    for i in 0..h.n_text_layer {
        b.block(&format!("decoder.blocks.{i}"), n, ftype.weight_type, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_en(ftype: i32) -> Hparams {
        Hparams::from_array([51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, ftype])
    }

    #[test]
    fn tiny_en_counts_match_whisper_cpp() {
        let inv = ExpectedInventory::new(&tiny_en(1), Expect::Full).unwrap();
        assert_eq!(inv.len(), 167);
        let enc = inv
            .tensors
            .iter()
            .filter(|t| t.class == TensorClass::NativeEncoder)
            .count();
        assert_eq!(enc, 67);
        let f32s = inv
            .tensors
            .iter()
            .filter(|t| t.ggml_type == GgmlType::F32)
            .count();
        assert_eq!(f32s, 100);
        let dec = ExpectedInventory::new(&tiny_en(1), Expect::DecoderOnly).unwrap();
        assert_eq!(dec.len(), 100);
        assert!(dec.tensors.iter().all(|t| t.name.starts_with("decoder.")));
        let enc = ExpectedInventory::new(&tiny_en(1), Expect::EncoderOnly).unwrap();
        assert_eq!(enc.len(), 67);
        assert!(enc.tensors.iter().all(|t| t.name.starts_with("encoder.")));
        assert!(enc.get("decoder.token_embedding.weight").is_none());
    }

    #[test]
    fn q5_0_keeps_conv_f16_and_vectors_f32() {
        let inv = ExpectedInventory::new(&tiny_en(2008), Expect::Full).unwrap();
        let ty = |n: &str| inv.get(n).unwrap().ggml_type;
        assert_eq!(ty("encoder.conv1.weight"), GgmlType::F16);
        assert_eq!(ty("encoder.conv2.bias"), GgmlType::F32);
        assert_eq!(ty("decoder.token_embedding.weight"), GgmlType::Q5_0);
        assert_eq!(ty("decoder.blocks.3.cross_attn.key.weight"), GgmlType::Q5_0);
        assert_eq!(inv.get("encoder.conv1.bias").unwrap().ne, vec![1, 384]);
        assert_eq!(
            inv.get("encoder.blocks.0.mlp.0.weight").unwrap().ne,
            vec![384, 1536]
        );
        assert!(inv.get("encoder.blocks.0.attn.key.bias").is_none());
    }

    #[test]
    fn bad_headers_are_refused() {
        let mut h = tiny_en(1);
        h.n_audio_state = 0;
        assert!(ExpectedInventory::new(&h, Expect::Full).is_err());
        let mut h = tiny_en(1);
        h.n_text_layer = 100_000; // would declare 2.4 million tensors
        assert_eq!(
            ExpectedInventory::new(&h, Expect::Full).unwrap_err(),
            "n_text_layer = 100000 is out of range"
        );
        let mut h = tiny_en(2008);
        h.n_text_state = 40; // not a multiple of the 32-element Q5_0 block
        assert!(ExpectedInventory::new(&h, Expect::Full).is_err());
        assert!(ExpectedInventory::new(&tiny_en(5), Expect::Full).is_err());
    }
}
