//! `vocabulary.txt` (one GPT-2 byte-level token per line) back to raw token bytes.

use std::collections::HashMap;

/// The line that ends the regular tokens; whisper.cpp synthesizes the specials.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Why a `vocabulary.txt` could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VocabError {
    /// A line is not valid UTF-8.
    #[error("vocabulary.txt line {line}: not UTF-8")]
    NotUtf8 {
        /// 1-based line number.
        line: usize,
    },
    /// A line holds a character outside GPT-2's byte-to-unicode table.
    #[error("vocabulary.txt line {line}: {ch:?} is not a GPT-2 byte-level character")]
    BadChar {
        /// 1-based line number.
        line: usize,
        /// The first character not in the table.
        ch: char,
    },
    /// The file has no `<|endoftext|>` line, so where the regular tokens end is
    /// unknown.
    #[error("vocabulary.txt has no {END_OF_TEXT} line")]
    NoEndOfText,
}

/// GPT-2's `bytes_to_unicode`, inverted: printable Latin-1 bytes stand for
/// themselves, the 68 others were moved to U+0100 onwards in byte order.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let ch = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(0x100 + shifted - 1).unwrap_or(char::REPLACEMENT_CHARACTER)
        };
        map.insert(ch, b);
    }
    map
}

/// The raw bytes of every token before the `<|endoftext|>` line. Lines are
/// split on `\n` only and empty lines are kept: they are tokens too.
pub fn decode_vocabulary(text: &[u8]) -> Result<Vec<Vec<u8>>, VocabError> {
    let map = unicode_to_byte();
    let mut tokens = Vec::new();
    for (line, raw) in text.split(|&b| b == b'\n').enumerate() {
        let s = std::str::from_utf8(raw).map_err(|_| VocabError::NotUtf8 { line: line + 1 })?;
        if s == END_OF_TEXT {
            return Ok(tokens);
        }
        let bytes = s
            .chars()
            .map(|ch| {
                map.get(&ch)
                    .copied()
                    .ok_or(VocabError::BadChar { line: line + 1, ch })
            })
            .collect::<Result<Vec<u8>, _>>()?;
        tokens.push(bytes);
    }
    Err(VocabError::NoEndOfText)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_characters_map_back_to_bytes() {
        let text = "!\nĠthe\n\nĊ\nÃ©\n<|endoftext|>\n<|startoftranscript|>\n";
        let tokens = decode_vocabulary(text.as_bytes()).unwrap();
        assert_eq!(
            tokens,
            vec![
                b"!".to_vec(),
                b" the".to_vec(),
                vec![],
                b"\n".to_vec(),
                "é".as_bytes().to_vec()
            ]
        );
    }

    #[test]
    fn unknown_characters_and_missing_eot_are_errors() {
        assert_eq!(
            decode_vocabulary("a\n€\n".as_bytes()),
            Err(VocabError::BadChar { line: 2, ch: '€' })
        );
        assert_eq!(decode_vocabulary(b"a\nb"), Err(VocabError::NoEndOfText));
        assert_eq!(unicode_to_byte().len(), 256);
    }
}
