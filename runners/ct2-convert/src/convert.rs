//! CTranslate2 Whisper → whisper.cpp GGML (F16 weights), following the name
//! mapping of reference file §4: fused QKV / KV split by rows, the all-zero key
//! biases dropped, conv biases as `[1, n]`, 1-D vectors and positional
//! embeddings widened to F32. Tensor payloads are exact copies or slices.

use crate::{Ct2Dtype, Ct2Model, Ct2Variable, VocabError, decode_vocabulary};
use ggml_container::mel::{N_FFT, mel_filters};
use ggml_container::numbers::{f16_le_to_f32, f32_le_to_f32, f32_to_f16_le, f32_to_le};
use ggml_container::{
    Expect, ExpectedInventory, ExpectedTensor, Ftype, GgmlType, GgmlWriter, Hparams, record_order,
};
use serde::Serialize;
use std::io::Write;

/// The number of mel bins every Whisper model's GGML header records.
const MEL_BINS: i32 = (N_FFT / 2 + 1) as i32;

/// Why a CTranslate2 model could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A variable the name mapping needs is absent (the text names it), or a
    /// GGML tensor has no CT2 source.
    #[error("CT2 model lacks variable {0}")]
    Missing(String),
    /// A variable is unusable: wrong shape or dtype, rows out of range, or a
    /// non-zero key-bias slot whisper.cpp cannot hold.
    #[error("CT2 variable {name}: {reason}")]
    Variable {
        /// The CT2 variable's name (or the GGML tensor's, for a cast it cannot make).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The header read from the variables' shapes describes no loadable model.
    #[error("the CT2 model's shapes give an impossible header: {0}")]
    Header(String),
    /// `vocabulary.txt` could not be decoded.
    #[error(transparent)]
    Vocab(#[from] VocabError),
    /// Writing the output failed.
    #[error("writing the GGML file: {0}")]
    Io(#[from] std::io::Error),
}

/// What a conversion wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ConvertSummary {
    /// The header written (F16 ftype).
    pub hparams: Hparams,
    /// Tensor records written: the full expected inventory.
    pub tensors: usize,
    /// Tokens written to the vocabulary block (those before `<|endoftext|>`).
    pub vocab_tokens: usize,
    /// Bytes written in all.
    pub bytes: u64,
}

/// Where a GGML tensor's numbers come from: a CT2 variable, optionally only
/// rows `rows.0..rows.1` of its first axis.
struct Source<'a> {
    var: &'a Ct2Variable,
    rows: Option<(usize, usize)>,
}

/// Convert `model` plus its `vocabulary.txt` into a GGML F16 file on `out`.
pub fn convert_to_ggml<W: Write>(
    model: &Ct2Model,
    vocabulary: &[u8],
    out: W,
) -> Result<ConvertSummary, ConvertError> {
    let hparams = hparams_of(model)?;
    let expected = ExpectedInventory::new(&hparams, Expect::Full).map_err(ConvertError::Header)?;
    let tokens = decode_vocabulary(vocabulary)?;
    let n_mels = hparams.n_mels;
    let mel = mel_filters(usize::try_from(n_mels).unwrap_or(0));

    let mut w = GgmlWriter::new(out);
    w.header(&hparams)?;
    w.mel_filters(n_mels, MEL_BINS, &mel)?;
    w.vocab(&tokens)?;
    let n = usize::try_from(hparams.n_audio_state).unwrap_or(0);
    check_key_biases_zero(model, &hparams, n)?;
    for name in record_order(&hparams) {
        let t = expected
            .get(&name)
            .ok_or_else(|| ConvertError::Header(format!("{name} is not an expected tensor")))?;
        let source = source_of(model, &t.name, n)?;
        let payload = payload(model, &source, t)?;
        w.tensor(&t.name, t.ggml_type, &t.ne, &payload)?;
    }
    w.flush()?;
    Ok(ConvertSummary {
        hparams,
        tensors: expected.len(),
        vocab_tokens: tokens.len(),
        bytes: w.written(),
    })
}

fn var<'a>(model: &'a Ct2Model, name: &str) -> Result<&'a Ct2Variable, ConvertError> {
    model
        .variable(name)
        .ok_or_else(|| ConvertError::Missing(name.to_string()))
}

fn dim(model: &Ct2Model, name: &str, axis: usize) -> Result<i32, ConvertError> {
    let v = var(model, name)?;
    v.shape
        .get(axis)
        .and_then(|&d| i32::try_from(d).ok())
        .ok_or_else(|| ConvertError::Variable {
            name: name.into(),
            reason: format!("shape {:?} has no axis {axis}", v.shape),
        })
}

fn scalar_i16(model: &Ct2Model, name: &str) -> Result<i32, ConvertError> {
    let v = var(model, name)?;
    match (v.dtype, model.data(v)) {
        (Ct2Dtype::I16, [a, b]) => Ok(i32::from(i16::from_le_bytes([*a, *b]))),
        _ => Err(ConvertError::Variable {
            name: name.into(),
            reason: "expected an int16 scalar".into(),
        }),
    }
}

fn layer_count(model: &Ct2Model, side: &str) -> i32 {
    let prefix = format!("{side}/layer_");
    let mut count = 0;
    while model
        .variable(&format!("{prefix}{count}/ffn/layer_norm/gamma"))
        .is_some()
    {
        count += 1;
    }
    count
}

/// The header as whisper.cpp expects it, from shapes and the head counts.
fn hparams_of(model: &Ct2Model) -> Result<Hparams, ConvertError> {
    Ok(Hparams {
        n_vocab: dim(model, "decoder/embeddings/weight", 0)?,
        n_audio_ctx: dim(model, "encoder/position_encodings/encodings", 0)?,
        n_audio_state: dim(model, "encoder/position_encodings/encodings", 1)?,
        n_audio_head: scalar_i16(model, "encoder/num_heads")?,
        n_audio_layer: layer_count(model, "encoder"),
        n_text_ctx: dim(model, "decoder/position_encodings/encodings", 0)?,
        n_text_state: dim(model, "decoder/position_encodings/encodings", 1)?,
        n_text_head: scalar_i16(model, "decoder/num_heads")?,
        n_text_layer: layer_count(model, "decoder"),
        n_mels: dim(model, "encoder/conv1/weight", 1)?,
        ftype: Ftype::for_weight_type(GgmlType::F16).raw,
    })
}

/// CT2 stores zeros in the fused key-bias slots; whisper.cpp has no key bias,
/// so dropping them must lose nothing.
fn check_key_biases_zero(model: &Ct2Model, h: &Hparams, n: usize) -> Result<(), ConvertError> {
    // (variable, key slot): fused QKV has K second, fused KV has it first.
    let mut slots = Vec::new();
    for i in 0..h.n_audio_layer {
        slots.push((format!("encoder/layer_{i}/self_attention/linear_0/bias"), 1));
    }
    for i in 0..h.n_text_layer {
        slots.push((format!("decoder/layer_{i}/self_attention/linear_0/bias"), 1));
        slots.push((format!("decoder/layer_{i}/attention/linear_1/bias"), 0));
    }
    for (name, slot) in slots {
        let v = var(model, &name)?;
        let values = to_f32(
            model,
            &Source {
                var: v,
                rows: Some((slot * n, (slot + 1) * n)),
            },
        )?;
        if values.iter().any(|&x| x != 0.0) {
            return Err(ConvertError::Variable {
                name,
                reason: "the key-bias slot is not zero; whisper.cpp cannot hold it".into(),
            });
        }
    }
    Ok(())
}

/// The CT2 source of a whisper.cpp tensor name.
fn source_of<'a>(model: &'a Ct2Model, name: &str, n: usize) -> Result<Source<'a>, ConvertError> {
    let whole = |ct2: &str| -> Result<Source<'a>, ConvertError> {
        Ok(Source {
            var: var(model, ct2)?,
            rows: None,
        })
    };
    let rows = |ct2: String, k: usize| -> Result<Source<'a>, ConvertError> {
        Ok(Source {
            var: var(model, &ct2)?,
            rows: Some((k * n, (k + 1) * n)),
        })
    };
    let unknown = || ConvertError::Missing(format!("(no CT2 source for {name})"));
    if let Some(side) = name.strip_suffix(".positional_embedding") {
        return whole(&format!("{side}/position_encodings/encodings"));
    }
    let (stem, param) = name.rsplit_once('.').ok_or_else(unknown)?;
    let norm_param = if param == "weight" { "gamma" } else { "beta" };
    match stem {
        "encoder.conv1" | "encoder.conv2" => {
            return whole(&format!("encoder/{}/{param}", &stem[8..]));
        }
        "encoder.ln_post" => return whole(&format!("encoder/layer_norm/{norm_param}")),
        "decoder.ln" => return whole(&format!("decoder/layer_norm/{norm_param}")),
        "decoder.token_embedding" => return whole("decoder/embeddings/weight"),
        _ => {}
    }
    // `{side}.blocks.{i}.{part}`
    let mut it = stem.splitn(4, '.');
    let (Some(side), Some("blocks"), Some(i), Some(part)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return Err(unknown());
    };
    let layer = format!("{side}/layer_{i}");
    match part {
        "mlp_ln" => whole(&format!("{layer}/ffn/layer_norm/{norm_param}")),
        "mlp.0" => whole(&format!("{layer}/ffn/linear_0/{param}")),
        "mlp.2" => whole(&format!("{layer}/ffn/linear_1/{param}")),
        "attn_ln" => whole(&format!("{layer}/self_attention/layer_norm/{norm_param}")),
        "attn.query" => rows(format!("{layer}/self_attention/linear_0/{param}"), 0),
        "attn.key" => rows(format!("{layer}/self_attention/linear_0/{param}"), 1),
        "attn.value" => rows(format!("{layer}/self_attention/linear_0/{param}"), 2),
        "attn.out" => whole(&format!("{layer}/self_attention/linear_1/{param}")),
        "cross_attn_ln" => whole(&format!("{layer}/attention/layer_norm/{norm_param}")),
        "cross_attn.query" => whole(&format!("{layer}/attention/linear_0/{param}")),
        "cross_attn.key" => rows(format!("{layer}/attention/linear_1/{param}"), 0),
        "cross_attn.value" => rows(format!("{layer}/attention/linear_1/{param}"), 1),
        "cross_attn.out" => whole(&format!("{layer}/attention/linear_2/{param}")),
        _ => Err(unknown()),
    }
}

/// The raw bytes of a source, rows sliced.
fn source_bytes<'a>(model: &'a Ct2Model, s: &Source<'_>) -> Result<&'a [u8], ConvertError> {
    let data = model.data(s.var);
    let Some((from, to)) = s.rows else {
        return Ok(data);
    };
    let rows = s.var.shape.first().copied().unwrap_or(0) as usize;
    let row_bytes = data.len().checked_div(rows).unwrap_or(0);
    data.get(from * row_bytes..to * row_bytes)
        .ok_or_else(|| ConvertError::Variable {
            name: s.var.name.clone(),
            reason: format!("rows {from}..{to} exceed its {rows} rows"),
        })
}

fn to_f32(model: &Ct2Model, s: &Source<'_>) -> Result<Vec<f32>, ConvertError> {
    let bytes = source_bytes(model, s)?;
    match s.var.dtype {
        Ct2Dtype::F16 => Ok(f16_le_to_f32(bytes)),
        Ct2Dtype::F32 => Ok(f32_le_to_f32(bytes)),
        other => Err(ConvertError::Variable {
            name: s.var.name.clone(),
            reason: format!("{other:?} is not a float type"),
        }),
    }
}

/// The GGML payload: a byte copy when the types agree, else an element-wise cast.
fn payload(model: &Ct2Model, s: &Source<'_>, t: &ExpectedTensor) -> Result<Vec<u8>, ConvertError> {
    let bytes = source_bytes(model, s)?;
    let elements: u64 = t.ne.iter().product();
    let same = matches!(
        (s.var.dtype, t.ggml_type),
        (Ct2Dtype::F16, GgmlType::F16) | (Ct2Dtype::F32, GgmlType::F32)
    );
    let out = if same {
        bytes.to_vec()
    } else {
        let values = to_f32(model, s)?;
        match t.ggml_type {
            GgmlType::F32 => f32_to_le(&values),
            GgmlType::F16 => f32_to_f16_le(&values),
            other => {
                return Err(ConvertError::Variable {
                    name: t.name.clone(),
                    reason: format!("the converter writes F16/F32 only, not {other}"),
                });
            }
        }
    };
    let element_size = t.ggml_type.type_size() as usize;
    if out.len() as u64 != elements * element_size as u64 {
        return Err(ConvertError::Variable {
            name: s.var.name.clone(),
            reason: format!(
                "{} elements, but {} needs {:?} = {elements}",
                out.len() / element_size,
                t.name,
                t.ne
            ),
        });
    }
    Ok(out)
}
