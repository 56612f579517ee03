//! Text to comparable words (the rules are in the `quality` module docs).

use serde::{Deserialize, Serialize};

use super::numbers::spell_numbers;

/// Which normalisation a comparison used.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Normalisation {
    /// Lowercase, bracketed annotations dropped, numbers spelled out,
    /// punctuation stripped. What every gate uses.
    #[default]
    Standard,
    /// As `Standard` but digits are left as written ("3.30" → "330"): the
    /// "raw" WER of the reference measurements, for comparison only.
    KeepDigits,
}

/// `text` as lowercase words without punctuation (see [`Normalisation`]).
pub fn normalise(text: &str, normalisation: Normalisation) -> Vec<String> {
    let lower = drop_annotations(&text.to_lowercase());
    let spelled = match normalisation {
        Normalisation::Standard => spell_numbers(&lower),
        Normalisation::KeepDigits => lower,
    };
    let mut plain = String::with_capacity(spelled.len());
    for c in spelled.chars() {
        if c.is_alphanumeric() {
            plain.push(c);
        } else if !joins_word(c) {
            plain.push(' ');
        }
    }
    plain.split_whitespace().map(str::to_string).collect()
}

/// Characters removed without a break: apostrophes ("don't" → "dont") and
/// periods ("p.m." → "pm").
fn joins_word(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{02bc}' | '.')
}

/// Removes "[BLANK_AUDIO]", "(music)" and the like: Whisper's non-speech
/// annotations. An opening bracket without its closing one is kept (and
/// later stripped as punctuation).
fn drop_annotations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(['[', '(']) {
        let close = if rest[open..].starts_with('[') {
            ']'
        } else {
            ')'
        };
        match rest[open..].find(close) {
            Some(len) => {
                out.push_str(&rest[..open]);
                out.push(' ');
                rest = &rest[open + len + 1..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard(text: &str) -> String {
        normalise(text, Normalisation::Standard).join(" ")
    }

    #[test]
    fn case_punctuation_and_whitespace() {
        assert_eq!(
            standard("  Hello, my name is Sarah   Johnson!\n"),
            "hello my name is sarah johnson"
        );
        assert_eq!(standard("Don't stop—ever!"), "dont stop ever");
        assert_eq!(
            standard("Forty-two; “quoted” text…"),
            "forty two quoted text"
        );
        assert_eq!(standard("at 3 p.m. sharp"), "at three pm sharp");
        assert_eq!(standard("O'Clock ÉTÉ"), "oclock été");
    }

    #[test]
    fn numbers_compare_equal_to_their_words() {
        assert_eq!(
            standard("The meetings start at 3.30, and we expect 42 people."),
            "the meetings start at three thirty and we expect forty two people"
        );
        assert_eq!(
            standard("We expect forty-two people at three-thirty."),
            "we expect forty two people at three thirty"
        );
        assert_eq!(standard("on the 21st"), standard("on the twenty first"));
        assert_eq!(
            standard("fell to 2.5%"),
            standard("fell to two point five percent")
        );
        assert_eq!(standard("10 o'clock"), standard("10:00"));
        // The numbers fixtures as Whisper would print them.
        assert_eq!(
            standard("Flight 207 lands at 9:15 on the 21st of May."),
            standard("Flight two hundred seven lands at nine fifteen on the twenty first of May.")
        );
        assert_eq!(
            standard("Sales rose by 15%, while the error rate fell to 2.5%."),
            standard(
                "Sales rose by fifteen percent, while the error rate fell to two point five percent."
            )
        );
    }

    #[test]
    fn annotations_are_not_words() {
        assert_eq!(standard(" [BLANK_AUDIO]"), "");
        assert_eq!(standard("(music) Thank you. [Applause]"), "thank you");
        assert_eq!(standard("a [b"), "a b");
        assert_eq!(standard("♪ ♪"), "");
    }

    #[test]
    fn keep_digits_leaves_numbers_as_written() {
        assert_eq!(
            normalise("at 3.30 and 42 people", Normalisation::KeepDigits).join(" "),
            "at 330 and 42 people"
        );
    }
}
