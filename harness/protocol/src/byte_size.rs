//! Sizes written as text in a protocol (`memory_ceiling = "1.5 GiB"`): a
//! decimal number and a unit, parsed exactly (integer arithmetic, no float
//! rounding) and refused with a reason when they are not a usable size.

/// The units a size may use, with their factors: binary (IEC) and decimal (SI).
const UNITS: &[(&str, u128)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

/// The units, as a message lists them.
pub const UNIT_LIST: &str = "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB";

/// Digits after the decimal point a size may have: enough for any byte
/// count a ceiling needs, few enough that the arithmetic cannot overflow.
const MAX_FRACTION_DIGITS: usize = 9;

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// A leading minus sign.
    #[error("is negative: a size is a positive number and a unit, e.g. \"1.5 GiB\"")]
    Negative,
    /// No number where one should start, or a malformed one.
    #[error("is not a size: write a number and a unit, e.g. \"1.5 GiB\" (units: {UNIT_LIST})")]
    NotANumber,
    /// A number with no unit after it.
    #[error("has no unit: write one of {UNIT_LIST} after the number, e.g. \"1.5 GiB\"")]
    NoUnit,
    /// A unit that is not one of [`UNIT_LIST`].
    #[error("has an unknown unit `{0}`: use one of {UNIT_LIST} (spelled as written here)")]
    UnknownUnit(String),
    /// More digits after the decimal point than [`MAX_FRACTION_DIGITS`].
    #[error(
        "has {0} digits after the decimal point; at most {MAX_FRACTION_DIGITS} are allowed (e.g. \"1.5 GiB\")"
    )]
    TooPrecise(usize),
    /// More bytes than 64 bits hold.
    #[error("is more bytes than 64 bits hold")]
    Overflow,
}

/// Parse `text` as a size in bytes: an unsigned decimal number (at most
/// nine digits after the point), optional spaces, and a unit from
/// [`UNIT_LIST`]. A fraction of a byte is dropped.
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(SizeError::Negative);
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || fraction.contains('.') || (number.contains('.') && fraction.is_empty()) {
        return Err(SizeError::NotANumber);
    }
    if fraction.len() > MAX_FRACTION_DIGITS {
        return Err(SizeError::TooPrecise(fraction.len()));
    }
    let unit = unit.trim_start();
    if unit.is_empty() {
        return Err(SizeError::NoUnit);
    }
    let factor = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, f)| *f)
        .ok_or_else(|| SizeError::UnknownUnit(unit.to_string()))?;
    // Digits only, so a parse failure can only be too many of them.
    let whole: u128 = whole.parse().map_err(|_| SizeError::Overflow)?;
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| SizeError::NotANumber)?
    };
    let bytes = whole
        .checked_mul(factor)
        .and_then(|w| w.checked_add(fraction * factor / scale))
        .ok_or(SizeError::Overflow)?;
    u64::try_from(bytes).map_err(|_| SizeError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_exactly_in_every_unit() {
        for (text, bytes) in [
            ("1.5 GiB", 1_610_612_736),
            ("1.5GiB", 1_610_612_736),
            ("  64 MiB ", 64 << 20),
            ("1048576 B", 1 << 20),
            ("2 KiB", 2048),
            ("1 TiB", 1 << 40),
            ("2 GB", 2_000_000_000),
            ("1.25 MB", 1_250_000),
            ("3 KB", 3000),
            ("1 TB", 1_000_000_000_000),
            // A fraction of a byte is dropped.
            ("0.1 KiB", 102),
            ("17179869183 GiB", 18_446_744_072_635_809_792),
        ] {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn what_is_not_a_size_is_refused_with_its_reason() {
        for (text, err) in [
            ("-1 GiB", SizeError::Negative),
            ("-0 B", SizeError::Negative),
            ("lots", SizeError::NotANumber),
            ("", SizeError::NotANumber),
            (".5 GiB", SizeError::NotANumber),
            ("1. GiB", SizeError::NotANumber),
            ("1.2.3 GiB", SizeError::NotANumber),
            ("1.0000000001 GiB", SizeError::TooPrecise(10)),
            ("+1 GiB", SizeError::NotANumber),
            ("1e9 B", SizeError::UnknownUnit("e9 B".into())),
            ("1024", SizeError::NoUnit),
            ("12 parsecs", SizeError::UnknownUnit("parsecs".into())),
            ("1 gib", SizeError::UnknownUnit("gib".into())),
            ("1 GiB extra", SizeError::UnknownUnit("GiB extra".into())),
            ("16 EiB", SizeError::UnknownUnit("EiB".into())),
            ("17179869184 GiB", SizeError::Overflow),
            (
                "99999999999999999999999999999999999999999 B",
                SizeError::Overflow,
            ),
            ("18446744073709551616 B", SizeError::Overflow),
        ] {
            assert_eq!(parse_bytes(text), Err(err), "{text:?}");
        }
        assert_eq!(parse_bytes("18446744073709551615 B"), Ok(u64::MAX));
    }
}
