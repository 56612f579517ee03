//! Transcript quality, as pure functions over one arm's (or two arms')
//! results: WER, exact parity, determinism, silence false alarms.
//!
//! Input: [`Transcription`] (one request's output) and [`Reference`] (a
//! fixture's reference text and category, from the fixture manifest).
//! A fixture may be run several times; a `(fixture, repetition)` pair must
//! appear once. WER and parity use each fixture's lowest repetition;
//! [`determinism`] checks that the other repetitions equal it.
//!
//! # Normalisation ([`normalise`], [`Normalisation::Standard`])
//! Applied to reference and hypothesis alike, in this order:
//! 1. Lowercase.
//! 2. Drop Whisper's non-speech annotations: any `[...]` or `(...)` span
//!    ("[BLANK_AUDIO]", "(music)").
//! 3. Numbers to words. References spell numbers out as spoken ("three
//!    thirty", "forty two"); digits in a hypothesis become the same words:
//!    - integers are American cardinals without "and": "42" → "forty two",
//!      "207" → "two hundred seven", "1,000,000" → "one million" (a comma
//!      before exactly three digits groups thousands). A 4-digit year is
//!      read the same way ("1999" → "one thousand nine hundred ninety
//!      nine"), so references write years that way or avoid them;
//!    - a leading zero ("007") or more than 18 digits: digit by digit;
//!    - `H:MM` with H ≤ 23 and MM < 60 is a clock time; so is `H.MM` with
//!      1 ≤ H ≤ 12, exactly two digits MM < 60 and no `%` — Whisper prints
//!      a spoken "three thirty" as "3.30". A time reads hour words, then
//!      "o'clock" for `00`, "oh" and the digit for `01`–`09`, else the
//!      minute number: "9.15" → "nine fifteen", "9:05" → "nine oh five".
//!      So "3.14" reads "three fourteen"; references spell a two-digit
//!      decimal with "point" only where a time is impossible (hour > 12);
//!    - any other decimal: integer words, "point", one word per digit
//!      ("2.5" → "two point five");
//!    - a `st`/`nd`/`rd`/`th` suffix makes an ordinal ("21st" → "twenty
//!      first", "12th" → "twelfth");
//!    - a trailing `%` adds "percent" ("2.5%" → "two point five percent").
//!
//!    Signs and currency symbols are punctuation: "-5" → "five", "$5" →
//!    "five"; fixtures avoid them.
//! 4. Strip punctuation: apostrophes and periods are removed ("don't" →
//!    "dont", "p.m." → "pm"); every other character that is not a letter or
//!    digit separates words ("forty-two" → "forty two").
//! 5. Split on whitespace.
//!
//! [`Normalisation::KeepDigits`] skips step 3; it reproduces the "raw" WER
//! column of the reference measurements and is never used by a gate.
//!
//! The number rules are hand-written: they encode how Whisper prints
//! spoken numbers, which no number-to-words crate decides.

mod normalise;
mod numbers;
mod parity;
mod qoi;
mod silence;
mod wer;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use normalise::{Normalisation, normalise};
pub use parity::{
    DeterminismReport, Difference, OutputMismatch, ParityReport, determinism, differences, parity,
};
pub use qoi::{CategoryQoi, QoiError, QoiReport, WorseFixture, qoi};
/// QoI as text, for the rendered outputs.
pub mod qoi_text {
    pub use super::qoi::{categories_text, markdown, share_text, worse_text};
}
pub use silence::{FalseAlarm, SilenceReport, silence_false_alarms};
pub use wer::{CategoryWer, EditCounts, SliceWer, WerReport, wer_report, word_edits};

/// One request's output, as the quality measures need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcription {
    /// The fixture the request transcribed.
    pub fixture_id: String,
    /// Which repetition of the fixture (0, 1, …).
    pub repetition: u32,
    /// Every token ID in order, specials included.
    pub token_ids: Vec<i32>,
    /// Whether the decoder produced end-of-text.
    pub eot: bool,
    /// Why the decoder stopped, as the worker reports it.
    pub stop_reason: String,
    /// The transcript text, exactly as produced.
    pub text: String,
}

/// A fixture's reference text. An empty reference (no words after
/// normalisation) marks a slice without speech: silence or noise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// The fixture id, as in the fixture manifest.
    pub fixture_id: String,
    /// The fixture's category as the fixture manifest names it (e.g. `numbers`, `noise`).
    pub category: String,
    /// What was said; empty for a slice without speech.
    pub text: String,
}

/// Input the quality measures cannot score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QualityError {
    /// One (fixture, repetition) has two results.
    #[error(
        "fixture `{fixture_id}` repetition {repetition} has two results; \
         each (fixture, repetition) must appear once"
    )]
    DuplicateResult {
        /// The fixture.
        fixture_id: String,
        /// The repetition that appears twice.
        repetition: u32,
    },
    /// A result's fixture has no reference text.
    #[error(
        "fixture `{fixture_id}` has a result but no reference text; \
         add it to the fixture manifest or leave it out of the arm"
    )]
    NoReference {
        /// The fixture without a reference.
        fixture_id: String,
    },
    /// Two references name the same fixture.
    #[error("fixture `{fixture_id}` has more than one reference")]
    DuplicateReference {
        /// The fixture named twice.
        fixture_id: String,
    },
}

type Grouped<'a> = BTreeMap<&'a str, BTreeMap<u32, &'a Transcription>>;

/// Results by fixture id, then repetition (both ascending).
fn group(results: &[Transcription]) -> Result<Grouped<'_>, QualityError> {
    let mut grouped: Grouped<'_> = BTreeMap::new();
    for result in results {
        let repetitions = grouped.entry(result.fixture_id.as_str()).or_default();
        if repetitions.insert(result.repetition, result).is_some() {
            return Err(QualityError::DuplicateResult {
                fixture_id: result.fixture_id.clone(),
                repetition: result.repetition,
            });
        }
    }
    Ok(grouped)
}

/// Each fixture's lowest repetition.
fn representatives(
    results: &[Transcription],
) -> Result<BTreeMap<&str, &Transcription>, QualityError> {
    Ok(group(results)?
        .into_iter()
        .filter_map(|(id, reps)| reps.into_values().next().map(|first| (id, first)))
        .collect())
}

fn references_by_id(references: &[Reference]) -> Result<BTreeMap<&str, &Reference>, QualityError> {
    let mut by_id = BTreeMap::new();
    for reference in references {
        if by_id
            .insert(reference.fixture_id.as_str(), reference)
            .is_some()
        {
            return Err(QualityError::DuplicateReference {
                fixture_id: reference.fixture_id.clone(),
            });
        }
    }
    Ok(by_id)
}

#[cfg(test)]
mod tests;
