//! SHA-256 digests and canonical JSON (RFC 8785, JSON Canonicalization
//! Scheme, through `serde_json_canonicalizer`), so an independent tool can
//! recompute every digest memqual seals.
//!
//! RFC 8785 writes numbers as IEEE-754 doubles: an integer above 2^53 (a
//! monotonic timestamp on a host up for more than 104 days) is written as the
//! nearest double. Canonicalizing is idempotent, so sealing and verifying
//! agree; the receipt documents this rounding.

use sha2::{Digest, Sha256};
use std::io::Read;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 of everything `reader` yields, with the byte count.
pub fn sha256_reader(mut reader: impl Read) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((total, hex(&hasher.finalize())))
}

/// The RFC 8785 canonical form of `value`.
pub fn canonical_json<T: serde::Serialize>(value: &T) -> Result<String, String> {
    serde_json_canonicalizer::to_string(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_reader(&b"abc"[..]).unwrap(),
            (
                3,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into()
            )
        );
    }

    /// The example of RFC 8785 section 3.2.2 and its canonical output.
    #[test]
    fn rfc8785_example_canonicalizes_as_the_rfc_says() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let value: serde_json::Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            canonical_json(&value).unwrap(),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\
             \"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"
        );
    }

    /// Keys sort by UTF-16 code units (RFC 8785 3.2.3), not by UTF-8 bytes.
    #[test]
    fn keys_sort_by_utf16_code_units() {
        let value = serde_json::json!({"\u{e000}": 1, "\u{1f600}": 2, "a": 3});
        // U+1F600 is the surrogate pair D83D DE00, which sorts before U+E000.
        assert_eq!(
            canonical_json(&value).unwrap(),
            "{\"a\":3,\"\u{1f600}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn canonical_form_is_a_fixed_point() {
        let value = serde_json::json!({"t_ns": 9_007_199_254_740_993u64, "x": 0.1, "n": [1, 2.5]});
        let once = canonical_json(&value).unwrap();
        let back: serde_json::Value = serde_json::from_str(&once).unwrap();
        assert_eq!(canonical_json(&back).unwrap(), once);
    }
}
