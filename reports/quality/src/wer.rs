//! Word error rate: word-level Levenshtein with the edit kinds counted.

use serde::{Deserialize, Serialize};

use super::{Normalisation, QualityError, Reference, Transcription, normalise, representatives};

/// Edits that turn the reference words into the hypothesis words.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct EditCounts {
    /// Reference words replaced by another word.
    pub substitutions: u64,
    /// Reference words missing from the hypothesis.
    pub deletions: u64,
    /// Hypothesis words not in the reference.
    pub insertions: u64,
    /// Words in the normalised reference.
    pub reference_words: u64,
}

impl EditCounts {
    /// Substitutions + deletions + insertions.
    pub fn edits(&self) -> u64 {
        self.substitutions + self.deletions + self.insertions
    }

    /// Edits over reference words; `None` without reference words.
    pub fn wer(&self) -> Option<f64> {
        (self.reference_words > 0).then(|| self.edits() as f64 / self.reference_words as f64)
    }

    fn add(&mut self, other: &EditCounts) {
        self.substitutions += other.substitutions;
        self.deletions += other.deletions;
        self.insertions += other.insertions;
        self.reference_words += other.reference_words;
    }
}

/// The fewest edits from `reference` to `hypothesis`, split by kind. Where
/// several alignments need equally few edits, every DP cell breaks the tie
/// the same way (match or substitution, then deletion, then insertion), so
/// the split is deterministic.
pub fn word_edits<R: AsRef<str>, H: AsRef<str>>(reference: &[R], hypothesis: &[H]) -> EditCounts {
    // One DP row of best-so-far counts; row i aligns reference[..i].
    let mut previous: Vec<EditCounts> = (0..=hypothesis.len() as u64)
        .map(|j| EditCounts {
            insertions: j,
            ..EditCounts::default()
        })
        .collect();
    for (i, ref_word) in reference.iter().enumerate() {
        let mut current = Vec::with_capacity(previous.len());
        current.push(EditCounts {
            deletions: i as u64 + 1,
            ..EditCounts::default()
        });
        for (j, hyp_word) in hypothesis.iter().enumerate() {
            let mut diagonal = previous[j];
            if ref_word.as_ref() != hyp_word.as_ref() {
                diagonal.substitutions += 1;
            }
            let mut up = previous[j + 1];
            up.deletions += 1;
            let mut left = current[j];
            left.insertions += 1;
            let best = [diagonal, up, left]
                .into_iter()
                .min_by_key(EditCounts::edits)
                .unwrap_or(diagonal);
            current.push(best);
        }
        previous = current;
    }
    let mut counts = previous[hypothesis.len()];
    counts.reference_words = reference.len() as u64;
    counts
}

/// WER of one fixture's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SliceWer {
    /// The fixture scored.
    pub fixture_id: String,
    /// The fixture's category (from the fixture manifest).
    pub category: String,
    /// The repetition scored (the lowest; determinism covers the others).
    pub repetition: u32,
    /// The reference after normalisation, words joined by spaces.
    pub reference_normalised: String,
    /// The transcript after normalisation, words joined by spaces.
    pub hypothesis_normalised: String,
    /// Edits from the reference to the transcript.
    pub counts: EditCounts,
    /// `None` for a slice without reference words (silence, noise).
    pub wer: Option<f64>,
}

/// Sum of edits over sum of reference words for one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CategoryWer {
    /// The category, as the fixture manifest names it.
    pub category: String,
    /// Slices of the category the arm ran.
    pub slices: u32,
    /// Edits summed over those slices.
    pub counts: EditCounts,
    /// Edits over reference words; `None` when the category has no reference words.
    pub wer: Option<f64>,
}

/// WER per slice and per category for one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WerReport {
    /// How reference and transcript were normalised before scoring.
    pub normalisation: Normalisation,
    /// In the order of `references`; fixtures the arm did not run are absent.
    pub slices: Vec<SliceWer>,
    /// In order of first appearance in `slices`.
    pub categories: Vec<CategoryWer>,
}

/// Scores one arm's results against the references. A result whose fixture
/// has no reference is an error; a reference without a result is skipped.
pub fn wer_report(
    references: &[Reference],
    results: &[Transcription],
    normalisation: Normalisation,
) -> Result<WerReport, QualityError> {
    let chosen = representatives(results)?;
    let by_id = super::references_by_id(references)?;
    if let Some(unknown) = chosen.keys().find(|id| !by_id.contains_key(*id)) {
        return Err(QualityError::NoReference {
            fixture_id: (*unknown).to_string(),
        });
    }

    let mut slices = Vec::new();
    let mut categories: Vec<CategoryWer> = Vec::new();
    for reference in references {
        let Some(result) = chosen.get(reference.fixture_id.as_str()) else {
            continue;
        };
        let ref_words = normalise(&reference.text, normalisation);
        let hyp_words = normalise(&result.text, normalisation);
        let counts = word_edits(&ref_words, &hyp_words);
        let category = match categories
            .iter_mut()
            .find(|c| c.category == reference.category)
        {
            Some(category) => category,
            None => {
                categories.push(CategoryWer {
                    category: reference.category.clone(),
                    slices: 0,
                    counts: EditCounts::default(),
                    wer: None,
                });
                let last = categories.len() - 1;
                &mut categories[last]
            }
        };
        category.slices += 1;
        category.counts.add(&counts);
        category.wer = category.counts.wer();
        slices.push(SliceWer {
            fixture_id: reference.fixture_id.clone(),
            category: reference.category.clone(),
            repetition: result.repetition,
            reference_normalised: ref_words.join(" "),
            hypothesis_normalised: hyp_words.join(" "),
            counts,
            wer: counts.wer(),
        });
    }
    Ok(WerReport {
        normalisation,
        slices,
        categories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }

    fn edits(reference: &str, hypothesis: &str) -> (u64, u64, u64) {
        let c = word_edits(&words(reference), &words(hypothesis));
        (c.substitutions, c.deletions, c.insertions)
    }

    #[test]
    fn hand_counted_edits() {
        assert_eq!(edits("a b c", "a b c"), (0, 0, 0));
        assert_eq!(edits("a b c", "a x c"), (1, 0, 0));
        assert_eq!(edits("a b c", "a c"), (0, 1, 0));
        assert_eq!(edits("a b c", "a b c d"), (0, 0, 1));
        assert_eq!(edits("a b c", ""), (0, 3, 0));
        assert_eq!(edits("", "a b"), (0, 0, 2));
        // "the hospital" heard as "the past did all": one substitution, two insertions.
        assert_eq!(edits("at the hospital", "at the past did all"), (1, 0, 2));
        // A shifted word costs a deletion and an insertion, not two substitutions
        // plus one more: 2 edits.
        assert_eq!(edits("a b c d", "b c d e"), (0, 1, 1));
        // Equal cost either way: the substitution is preferred.
        assert_eq!(edits("a b", "c"), (1, 1, 0));
    }

    #[test]
    fn the_rate_is_edits_over_reference_words() {
        let c = word_edits(&words("one two three four"), &words("one too three"));
        assert_eq!(c.edits(), 2);
        assert_eq!(c.reference_words, 4);
        assert_eq!(c.wer(), Some(0.5));
        assert_eq!(word_edits::<&str, &str>(&[], &["x"]).wer(), None);
    }
}
