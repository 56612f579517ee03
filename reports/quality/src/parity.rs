//! Exact output comparison: between two arms (parity) and between the
//! repetitions of one fixture within an arm (determinism).

use serde::{Deserialize, Serialize};

use super::{QualityError, Transcription, group, representatives};

/// Bytes of each text shown from the first differing offset.
const TEXT_EXCERPT_BYTES: usize = 32;

/// One field that differs, with its first differing position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "field", rename_all = "snake_case")]
pub enum Difference {
    /// First index where the token sequences differ; when one is a prefix of
    /// the other, the shorter length (and `None` on that side).
    TokenIds {
        /// First differing index, or the shorter length when one is a prefix.
        index: usize,
        /// Arm a's token id there; `None` when its sequence ended.
        a: Option<i32>,
        /// Arm b's token id there; `None` when its sequence ended.
        b: Option<i32>,
        /// Tokens in a's output.
        a_count: usize,
        /// Tokens in b's output.
        b_count: usize,
    },
    /// Whether the output ended with the end-of-text token differs.
    Eot {
        /// Whether a's output ended with end-of-text.
        a: bool,
        /// Whether b's output ended with end-of-text.
        b: bool,
    },
    /// The worker's stop reason differs.
    StopReason {
        /// a's stop reason.
        a: String,
        /// b's stop reason.
        b: String,
    },
    /// First differing byte of the UTF-8 texts, with up to 32 bytes of each
    /// from there (lossily decoded: the offset may split a character).
    Text {
        /// Offset of the first differing byte.
        byte_offset: usize,
        /// Up to 32 bytes of a's text from that offset.
        a_from: String,
        /// Up to 32 bytes of b's text from that offset.
        b_from: String,
    },
}

/// Every field in which `a` and `b` differ, in the order token IDs, EOT,
/// stop reason, text; empty when they are identical. The fixture id and
/// repetition are not compared.
pub fn differences(a: &Transcription, b: &Transcription) -> Vec<Difference> {
    let mut out = Vec::new();
    if let Some(index) = first_mismatch(&a.token_ids, &b.token_ids) {
        out.push(Difference::TokenIds {
            index,
            a: a.token_ids.get(index).copied(),
            b: b.token_ids.get(index).copied(),
            a_count: a.token_ids.len(),
            b_count: b.token_ids.len(),
        });
    }
    if a.eot != b.eot {
        out.push(Difference::Eot { a: a.eot, b: b.eot });
    }
    if a.stop_reason != b.stop_reason {
        out.push(Difference::StopReason {
            a: a.stop_reason.clone(),
            b: b.stop_reason.clone(),
        });
    }
    if let Some(byte_offset) = first_mismatch(a.text.as_bytes(), b.text.as_bytes()) {
        out.push(Difference::Text {
            byte_offset,
            a_from: excerpt(&a.text, byte_offset),
            b_from: excerpt(&b.text, byte_offset),
        });
    }
    out
}

fn first_mismatch<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(index) => Some(index),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

fn excerpt(text: &str, byte_offset: usize) -> String {
    let bytes = text.as_bytes();
    let start = byte_offset.min(bytes.len());
    let end = (start + TEXT_EXCERPT_BYTES).min(bytes.len());
    String::from_utf8_lossy(&bytes[start..end]).into_owned()
}

/// Two outputs of one fixture that should be identical and are not: from
/// two arms (parity: `repetition_a` from arm a, `repetition_b` from arm b),
/// or from one arm (determinism: `repetition_a` is the fixture's lowest
/// repetition, the baseline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputMismatch {
    /// The fixture both outputs are of.
    pub fixture_id: String,
    /// The repetition of the first output (arm a, or the baseline).
    pub repetition_a: u32,
    /// The repetition of the second output (arm b, or the differing repetition).
    pub repetition_b: u32,
    /// `differences[0]` is the first differing field.
    pub differences: Vec<Difference>,
}

impl OutputMismatch {
    /// `None` when `a` and `b` are identical.
    fn between(fixture_id: &str, a: &Transcription, b: &Transcription) -> Option<OutputMismatch> {
        let differences = differences(a, b);
        (!differences.is_empty()).then(|| OutputMismatch {
            fixture_id: fixture_id.to_string(),
            repetition_a: a.repetition,
            repetition_b: b.repetition,
            differences,
        })
    }
}

/// Exact parity of two arms, fixture by fixture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ParityReport {
    /// Fixtures both arms ran.
    pub fixtures_compared: usize,
    /// Fixtures whose outputs differ, in fixture id order.
    pub mismatches: Vec<OutputMismatch>,
    /// Fixtures only one arm ran (parity cannot be shown for them).
    pub only_in_a: Vec<String>,
    /// Fixtures only arm b ran.
    pub only_in_b: Vec<String>,
}

impl ParityReport {
    /// Both arms ran the same fixtures and every output matched exactly.
    pub fn is_exact(&self) -> bool {
        self.mismatches.is_empty() && self.only_in_a.is_empty() && self.only_in_b.is_empty()
    }
}

/// Compares arm `a` with arm `b` per fixture, each represented by its lowest
/// repetition ([`determinism`] checks the other repetitions against it).
pub fn parity(a: &[Transcription], b: &[Transcription]) -> Result<ParityReport, QualityError> {
    let a = representatives(a)?;
    let b = representatives(b)?;
    let mut report = ParityReport {
        fixtures_compared: 0,
        mismatches: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: b
            .keys()
            .filter(|id| !a.contains_key(*id))
            .map(|id| id.to_string())
            .collect(),
    };
    for (id, left) in &a {
        let Some(right) = b.get(id) else {
            report.only_in_a.push(id.to_string());
            continue;
        };
        report.fixtures_compared += 1;
        report
            .mismatches
            .extend(OutputMismatch::between(id, left, right));
    }
    Ok(report)
}

/// Whether one arm produced identical output for every repetition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeterminismReport {
    /// Fixtures the arm ran.
    pub fixtures: usize,
    /// Transcription results the arm returned, repetitions included.
    pub results: usize,
    /// Fixtures run only once: no evidence either way.
    pub single_repetition: Vec<String>,
    /// Each repetition that differs from its fixture's baseline.
    pub failures: Vec<OutputMismatch>,
}

impl DeterminismReport {
    /// True when no repetition differs from its fixture's baseline.
    pub fn is_deterministic(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Compares every repetition of each fixture with the fixture's lowest one.
pub fn determinism(results: &[Transcription]) -> Result<DeterminismReport, QualityError> {
    let grouped = group(results)?;
    let mut report = DeterminismReport {
        fixtures: grouped.len(),
        results: results.len(),
        single_repetition: Vec::new(),
        failures: Vec::new(),
    };
    for (id, repetitions) in &grouped {
        let mut in_order = repetitions.values();
        let Some(baseline) = in_order.next() else {
            continue;
        };
        if repetitions.len() == 1 {
            report.single_repetition.push(id.to_string());
        }
        report
            .failures
            .extend(in_order.filter_map(|other| OutputMismatch::between(id, baseline, other)));
    }
    Ok(report)
}
