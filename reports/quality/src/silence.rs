//! False alarms: words transcribed where nothing was said.

use serde::{Deserialize, Serialize};

use super::{Normalisation, QualityError, Reference, Transcription, normalise};

/// One transcript with words on a slice without speech.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FalseAlarm {
    /// The slice transcribed.
    pub fixture_id: String,
    /// The slice's category.
    pub category: String,
    /// Which repetition of the fixture.
    pub repetition: u32,
    /// The text as produced.
    pub text: String,
    /// The words left after standard normalisation, joined by spaces.
    pub normalised: String,
}

/// False alarms of one arm on its silence and noise slices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SilenceReport {
    /// Results (every repetition) on slices without speech.
    pub results_checked: usize,
    /// Each result with words on such a slice.
    pub false_alarms: Vec<FalseAlarm>,
}

/// Counts every result, repetitions included, that has words after
/// [`Normalisation::Standard`] on a slice whose reference has none (the
/// fixtures' silence and noise categories). Results on speech slices are
/// ignored; a result without a reference is an error.
pub fn silence_false_alarms(
    references: &[Reference],
    results: &[Transcription],
) -> Result<SilenceReport, QualityError> {
    let by_id = super::references_by_id(references)?;
    // Rejects duplicate (fixture, repetition) pairs like the other measures.
    super::group(results)?;
    let mut report = SilenceReport {
        results_checked: 0,
        false_alarms: Vec::new(),
    };
    for result in results {
        let reference =
            by_id
                .get(result.fixture_id.as_str())
                .ok_or_else(|| QualityError::NoReference {
                    fixture_id: result.fixture_id.clone(),
                })?;
        if !normalise(&reference.text, Normalisation::Standard).is_empty() {
            continue;
        }
        report.results_checked += 1;
        let words = normalise(&result.text, Normalisation::Standard);
        if !words.is_empty() {
            report.false_alarms.push(FalseAlarm {
                fixture_id: result.fixture_id.clone(),
                category: reference.category.clone(),
                repetition: result.repetition,
                text: result.text.clone(),
                normalised: words.join(" "),
            });
        }
    }
    Ok(report)
}
