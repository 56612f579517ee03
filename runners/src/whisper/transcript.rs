//! From whisper.cpp's raw result to the contract's `TranscriptionResult`.
//!
//! whisper.cpp does not report why decoding stopped. What its token stream
//! shows is enough in practice: with `no_timestamps` the sequence is kept up
//! to and including end-of-text; with timestamps it is cut after the last
//! timestamp token, so the end-of-text token never appears.

use super::engine::RawTranscript;
use worker_contract::{StopReason, TranscriptionResult};

/// Special token ids of the loaded vocabulary that the derivation needs.
#[derive(Debug, Clone, Copy)]
pub struct Specials {
    /// End-of-text token id (`whisper_token_eot`).
    pub eot: i32,
    /// `<|0.00|>`: every id above it is a timestamp.
    pub beg: i32,
}

/// Why decoding stopped, judged from the request's last token: `NoSegments`
/// when nothing was produced, `Eot` on end-of-text, `TimestampEnd` on a
/// timestamp token (id at or above `beg`), otherwise `Truncated`.
pub fn stop_reason(tokens: &[i32], segments: usize, specials: Specials) -> StopReason {
    match tokens.last() {
        _ if segments == 0 => StopReason::NoSegments,
        None => StopReason::NoSegments,
        Some(&t) if t == specials.eot => StopReason::Eot,
        Some(&t) if t >= specials.beg => StopReason::TimestampEnd,
        Some(_) => StopReason::Truncated,
    }
}

/// Hex of bytes, lowercase.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The contract's `TranscriptionResult` for one request: every segment's
/// tokens flattened, the stop reason, and the text (lossily decoded when it is
/// not UTF-8, with the raw bytes then kept as hex).
pub fn result(
    raw: RawTranscript,
    fixture_id: &str,
    repetition: u32,
    audio_ms: u64,
    specials: Specials,
) -> TranscriptionResult {
    let tokens: Vec<i32> = raw.segments.iter().flatten().copied().collect();
    let stop_reason = stop_reason(&tokens, raw.segments.len(), specials);
    let (text, text_bytes_hex) = match String::from_utf8(raw.text) {
        Ok(t) => (t, None),
        Err(e) => {
            let bytes = e.into_bytes();
            (
                String::from_utf8_lossy(&bytes).into_owned(),
                Some(hex(&bytes)),
            )
        }
    };
    TranscriptionResult {
        fixture_id: fixture_id.to_string(),
        repetition,
        eot: tokens.contains(&specials.eot),
        stop_reason,
        tokens,
        text,
        text_bytes_hex,
        segments: raw.segments.len() as u32,
        audio_ms,
        decode: raw.decode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EN: Specials = Specials {
        eot: 50256,
        beg: 50363,
    };

    #[test]
    fn stop_reason_follows_the_last_token() {
        assert_eq!(stop_reason(&[], 0, EN), StopReason::NoSegments);
        assert_eq!(stop_reason(&[400, 50256], 1, EN), StopReason::Eot);
        assert_eq!(
            stop_reason(&[50363, 400, 50400], 1, EN),
            StopReason::TimestampEnd
        );
        assert_eq!(stop_reason(&[400, 401], 1, EN), StopReason::Truncated);
    }

    #[test]
    fn invalid_utf8_text_keeps_its_exact_bytes() {
        let raw = RawTranscript {
            segments: vec![vec![10, 50256]],
            text: vec![b' ', 0xe2, 0x82],
            decode: None,
        };
        let r = result(raw, "s1", 0, 1000, EN);
        assert!(r.eot);
        assert_eq!(r.text_bytes_hex.as_deref(), Some("20e282"));
        assert_eq!(r.text_bytes(), vec![b' ', 0xe2, 0x82]);
        let ok = result(
            RawTranscript {
                segments: vec![vec![10]],
                text: b" Hi".to_vec(),
                decode: None,
            },
            "s1",
            1,
            1000,
            EN,
        );
        assert_eq!(ok.text, " Hi");
        assert_eq!(ok.text_bytes_hex, None);
        assert_eq!(ok.stop_reason, StopReason::Truncated);
    }
}
