//! Sizes as the tools print them: a decimal number and a unit suffix.

use serde::{Deserialize, Serialize};

/// A size in bytes and the token it was read from. `bytes` is the printed
/// number times its unit, rounded to the nearest byte; the tool may itself
/// have rounded (vmmap prints one decimal), which is why `raw` is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Size {
    /// The size in bytes: the printed number times its unit, rounded to the nearest byte.
    pub bytes: u64,
    /// The token exactly as the tool printed it (e.g. `100.3M`, `832 KB`).
    pub raw: String,
}

/// What the unit letters multiply by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeUnits {
    /// K = 1024 (vmmap, footprint).
    Binary,
    /// K = 1000 (the wide counters of `vm_stat N`).
    Decimal,
}

impl SizeUnits {
    fn multiplier(self, letter: char) -> Option<u128> {
        let exp = match letter {
            'K' => 1,
            'M' => 2,
            'G' => 3,
            'T' => 4,
            'P' => 5,
            _ => return None,
        };
        let base: u128 = match self {
            SizeUnits::Binary => 1024,
            SizeUnits::Decimal => 1000,
        };
        Some(base.pow(exp))
    }
}

impl Size {
    /// `824`, `8192K`, `100.3M`, `1.4T`: a number with an optional one-letter
    /// unit; no unit means bytes.
    pub fn parse_suffixed(token: &str, units: SizeUnits) -> Option<Size> {
        let (number, mult) = match token.chars().last() {
            Some(c) if c.is_ascii_alphabetic() => (&token[..token.len() - 1], units.multiplier(c)?),
            _ => (token, 1),
        };
        Some(Size {
            bytes: scale(number, mult)?,
            raw: token.to_string(),
        })
    }

    /// `832` `KB` (footprint): a number and a separate binary unit word.
    pub fn parse_number_unit(number: &str, unit: &str) -> Option<Size> {
        let mult = match unit {
            "B" => 1,
            "KB" => 1 << 10,
            "MB" => 1 << 20,
            "GB" => 1 << 30,
            "TB" => 1 << 40,
            _ => return None,
        };
        Some(Size {
            bytes: scale(number, mult)?,
            raw: format!("{number} {unit}"),
        })
    }
}

/// `number` (digits, optionally `.` digits) times `mult`, rounded half up,
/// in exact integer arithmetic.
pub(crate) fn scale(number: &str, mult: u128) -> Option<u64> {
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    // 20 integer digits already exceed u64; 9 fraction digits are far past
    // anything a tool prints and keep the arithmetic inside u128.
    if int.is_empty() || int.len() > 20 || frac.len() > 9 || !digits(int) || !digits(frac) {
        return None;
    }
    if number.contains('.') && frac.is_empty() {
        return None;
    }
    let denom = 10u128.pow(frac.len() as u32);
    let whole: u128 = int.parse().ok()?;
    let part: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let scaled = whole
        .checked_mul(denom)?
        .checked_add(part)?
        .checked_mul(mult)?;
    let rounded = scaled.checked_add(denom / 2)? / denom;
    u64::try_from(rounded).ok()
}
