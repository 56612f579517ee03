//! The order of a model's records as the reference conversion writes them,
//! so that a conversion's digests reproduce; the CTranslate2 converter
//! (crate `ct2-convert`) and the synthetic models write in it.

use crate::types::Hparams;

/// The order the records are written in: the reference conversion's, so
/// that its digests reproduce. Per block: self-attention (norm, q, k, v, out),
/// then cross-attention in the decoder, then the MLP; the final norm last.
pub fn record_order(h: &Hparams) -> Vec<String> {
    fn norm(out: &mut Vec<String>, p: &str) {
        out.push(format!("{p}.weight"));
        out.push(format!("{p}.bias"));
    }
    fn attention(out: &mut Vec<String>, p: &str) {
        norm(out, &format!("{p}_ln"));
        for (part, bias) in [
            ("query", true),
            ("key", false),
            ("value", true),
            ("out", true),
        ] {
            out.push(format!("{p}.{part}.weight"));
            if bias {
                out.push(format!("{p}.{part}.bias"));
            }
        }
    }
    fn mlp(out: &mut Vec<String>, p: &str) {
        norm(out, &format!("{p}.mlp_ln"));
        for part in ["mlp.0", "mlp.2"] {
            out.push(format!("{p}.{part}.weight"));
            out.push(format!("{p}.{part}.bias"));
        }
    }
    let mut out: Vec<String> = [
        "encoder.positional_embedding",
        "encoder.conv1.weight",
        "encoder.conv1.bias",
        "encoder.conv2.weight",
        "encoder.conv2.bias",
    ]
    .map(String::from)
    .into();
    for i in 0..h.n_audio_layer {
        let p = format!("encoder.blocks.{i}");
        attention(&mut out, &format!("{p}.attn"));
        mlp(&mut out, &p);
    }
    norm(&mut out, "encoder.ln_post");
    out.push("decoder.positional_embedding".into());
    out.push("decoder.token_embedding.weight".into());
    for i in 0..h.n_text_layer {
        let p = format!("decoder.blocks.{i}");
        attention(&mut out, &format!("{p}.attn"));
        attention(&mut out, &format!("{p}.cross_attn"));
        mlp(&mut out, &p);
    }
    norm(&mut out, "decoder.ln");
    out
}
