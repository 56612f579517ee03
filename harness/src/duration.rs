//! Durations as the command line writes them (`8h`, `90m`, `2h30m`), for
//! `memqual soak --duration` and `memqual fixtures soak-run`: a leaf, so
//! both commands parse alike without one depending on the other.

use protocol::limits::SOAK_DURATION_S;
use std::time::Duration;

/// `8h`, `30m`, `90s`, `2h30m` → a duration of 1 s to 7 days
/// ([`SOAK_DURATION_S`]); every step is checked, so no input can overflow.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    // Shown escaped: a control character is never printed to the terminal.
    let text = raw.escape_debug().to_string();
    let too_long = || format!("`{text}` is out of range: {SOAK_DURATION_S}");
    let mut total = 0u64;
    let mut digits = String::new();
    for c in raw.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            // A malformed number is the number's fault, not the unit's.
            '.' | ',' => {
                return Err(format!(
                    "`{text}`: whole numbers only (write 90m, not 1.5h)"
                ));
            }
            'd' if !digits.is_empty() => {
                return Err(format!("`{text}`: no days; write hours (24h for 1d)"));
            }
            _ if digits.is_empty() && total == 0 => {
                return Err(format!(
                    "`{text}` is not a duration: a number, then h, m or s (e.g. 8h, 90m, 2h30m)"
                ));
            }
            _ => {
                return Err(format!(
                    "`{text}`: unknown unit `{}` (use h, m, s, e.g. 8h or 90m)",
                    c.escape_debug()
                ));
            }
        };
        if digits.is_empty() {
            return Err(format!("`{text}`: a number must come before `{c}`"));
        }
        // Digits only, so a parse failure can only mean too many of them.
        let n: u64 = digits.parse().map_err(|_| too_long())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_long)?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("`{text}`: give a unit (h, m or s) after {digits}"));
    }
    if total == 0 {
        return Err(format!("`{text}` is no time at all"));
    }
    if total > SOAK_DURATION_S.max {
        return Err(too_long());
    }
    Ok(Duration::from_secs(total))
}
