//! The bounds several protocol tables share and those of command-line
//! numbers (a key only one table has keeps its bound in that table's
//! module; the worker spec's own bounds live in `worker_contract::bounds`),
//! the clap parsers
//! that enforce them on flags, and the checked time arithmetic the run path
//! uses, so a value that slipped past a check still cannot overflow.

use std::time::{Duration, Instant};
use worker_contract::bounds::IntBound;

/// External sampler period: 1 ms to 1 minute (a slower series sees nothing
/// the phase markers do not).
pub const PERIOD_MS: IntBound = IntBound::new(1, 60_000, "milliseconds, at most 1 minute");

/// An arm's timeout: 1 s to 7 days.
pub const TIMEOUT_S: IntBound = IntBound::new(1, 7 * 24 * 3600, "seconds, at most 7 days");

/// `memqual soak --duration`: 1 s to 7 days (nightly soaks run 8 h).
pub const SOAK_DURATION_S: IntBound = IntBound::new(1, 7 * 24 * 3600, "at most 7 days (168h)");

/// `memqual soak --requests`: 1 to 10 million.
pub const SOAK_REQUESTS: IntBound = IntBound::new(1, 10_000_000, "at most 10 million");

/// A soak's timeout is its duration plus this much for the last request.
pub const SOAK_GRACE: Duration = Duration::from_secs(600);

/// Every n-th request's markers: 1 to 10 million.
pub const EVERY_N_REQUESTS: IntBound = IntBound::new(1, 10_000_000, "at most 10 million");

/// `memqual artifact estimate --beams`: whisper.cpp runs at most 8 decoders.
pub const BEAMS: IntBound = IntBound::new(1, 8, "whisper.cpp's decoder limit");

/// `memqual artifact estimate --audio-ctx`, `--text-ctx` and `--max-batch`:
/// the same bounds as a patched arm's `state_bounds`.
pub use worker_contract::bounds::{AUDIO_POSITIONS, TEXT_POSITIONS};

/// `memqual import --page-size`: a power of two from 1 KiB to 1 GiB.
pub const PAGE_SIZE: IntBound = IntBound::new(1024, 1 << 30, "bytes, a power of two");

/// The instant `timeout` from now, or — should it not fit the clock — a
/// day from now, or now: a deadline never panics and never lies in a wrapped past.
pub fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(24 * 3600)))
        .unwrap_or(now)
}

/// A clap parser for an integer flag that must lie in `bound`.
pub fn int_flag(bound: IntBound) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |text: &str| {
        let v: u64 = text
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not a whole number ({bound})"))?;
        if (bound.min..=bound.max).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is out of range: {bound}"))
        }
    }
}

/// `--page-size`: in range and a power of two.
pub fn page_size_flag(text: &str) -> Result<u64, String> {
    let v = int_flag(PAGE_SIZE)(text)?;
    if v.is_power_of_two() {
        Ok(v)
    } else {
        Err(format!("{v} is not a power of two ({PAGE_SIZE})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_name_the_allowed_range() {
        let requests = int_flag(SOAK_REQUESTS);
        assert_eq!(requests("2000"), Ok(2000));
        assert_eq!(
            requests("0").unwrap_err(),
            "0 is out of range: allowed 1..=10000000 (at most 10 million)"
        );
        assert!(
            requests("18446744073709551616")
                .unwrap_err()
                .contains("is not a whole number (allowed 1..=10000000")
        );
        assert!(requests("-1").is_err());
        assert_eq!(page_size_flag("16384"), Ok(16384));
        assert!(page_size_flag("4097").unwrap_err().contains("power of two"));
        assert!(page_size_flag("0").unwrap_err().contains("out of range"));
        assert!(page_size_flag(&u64::MAX.to_string()).is_err());
    }

    #[test]
    fn deadlines_never_overflow() {
        let before = Instant::now();
        assert!(deadline_after(Duration::from_secs(5)) >= before + Duration::from_secs(5));
        let far = deadline_after(Duration::MAX);
        assert!(
            far > before,
            "a deadline that does not fit is not in the past"
        );
        assert!(deadline_after(Duration::from_secs(u64::MAX)) >= before);
    }
}
