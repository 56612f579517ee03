//! whisper.cpp 1.8.3's contract with its Core ML encoder
//! (`src/coreml/whisper-encoder.mm`, `whisper-encoder-impl.m`): one input
//! `logmel_data`, Float32 `[1, n_mels, n_ctx]` where `n_ctx` is the mel
//! window (twice the audio positions: 3,000 frames for 1,500), and one
//! output `output`, Float32, copied without a check into the encoder's
//! `[n_audio_ctx, n_audio_state]` result, so its shape must be
//! `[1, n_audio_ctx, n_audio_state]` exactly.

use crate::report::{Feature, ModelReport};
use serde::{Deserialize, Serialize};

/// The input whisper.cpp binds.
pub const INPUT: &str = "logmel_data";
/// The output whisper.cpp reads.
pub const OUTPUT: &str = "output";

/// The dimensions of the GGML model an encoder must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderDims {
    /// Mel bins (80 for tiny.en).
    pub n_mels: i64,
    /// Audio positions (1500); the mel window is twice that.
    pub n_audio_ctx: i64,
    /// Encoder width (384 for tiny.en).
    pub n_audio_state: i64,
}

impl EncoderDims {
    /// `[1, n_mels, 2 n_audio_ctx]`.
    pub fn input_shape(&self) -> Vec<i64> {
        vec![1, self.n_mels, 2 * self.n_audio_ctx]
    }

    /// `[1, n_audio_ctx, n_audio_state]`.
    pub fn output_shape(&self) -> Vec<i64> {
        vec![1, self.n_audio_ctx, self.n_audio_state]
    }
}

/// One way the model differs from what whisper.cpp needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// What was checked (`input logmel_data shape`).
    pub what: String,
    /// What whisper.cpp needs.
    pub expected: String,
    /// What the model has.
    pub found: String,
}

fn shape(s: &[i64]) -> String {
    let parts: Vec<String> = s.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn check(features: &[Feature], name: &str, role: &str, want: &[i64], out: &mut Vec<Mismatch>) {
    let Some(f) = features.iter().find(|f| f.name == name) else {
        let names: Vec<&str> = features.iter().map(|f| f.name.as_str()).collect();
        out.push(Mismatch {
            what: format!("{role} {name}"),
            expected: format!("an {role} named {name}"),
            found: if names.is_empty() {
                format!("no {role}s")
            } else {
                format!("{role}s {}", names.join(", "))
            },
        });
        return;
    };
    if f.kind != "multiArray" {
        out.push(Mismatch {
            what: format!("{role} {name} kind"),
            expected: "multiArray".into(),
            found: f.kind.clone(),
        });
    }
    if f.data_type.as_deref() != Some("Float32") {
        out.push(Mismatch {
            what: format!("{role} {name} data type"),
            expected: "Float32".into(),
            found: f.data_type.clone().unwrap_or_else(|| "none".into()),
        });
    }
    if f.shape != want {
        out.push(Mismatch {
            what: format!("{role} {name} shape"),
            expected: shape(want),
            found: shape(&f.shape),
        });
    }
    if f.flexible_shape {
        out.push(Mismatch {
            what: format!("{role} {name} shape flexibility"),
            expected: "a fixed shape".into(),
            found: "a flexible shape".into(),
        });
    }
}

/// The first mismatch as one line, `what: expected X, found Y`, saying how
/// many more there are; `None` when there are none.
pub fn first_mismatch(mismatches: &[Mismatch]) -> Option<String> {
    let first = mismatches.first()?;
    let more = match mismatches.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "{}: expected {}, found {}{more}",
        first.what, first.expected, first.found
    ))
}

/// Every way `report` differs from the encoder whisper.cpp needs for a
/// model of `dims`, input first; empty when it fits.
pub fn check_encoder(report: &ModelReport, dims: &EncoderDims) -> Vec<Mismatch> {
    let mut out = Vec::new();
    check(
        &report.inputs,
        INPUT,
        "input",
        &dims.input_shape(),
        &mut out,
    );
    check(
        &report.outputs,
        OUTPUT,
        "output",
        &dims.output_shape(),
        &mut out,
    );
    out
}
