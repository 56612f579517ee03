//! Bounds on the numbers a spec carries, and the error that names the key
//! out of range. The harness checks a protocol against these when it loads
//! it (and locates the key in the file); the worker checks its spec again,
//! so no arithmetic on a spec's numbers can overflow even if a caller
//! skipped a check.

use std::fmt;

/// A value that cannot be used, with the key it was read from.
///
/// `key` is a dotted path relative to the table that was checked
/// (`plateau.mib`, `steps.at_requests[2]`); `message` is the whole sentence
/// and starts with that key, so it can be shown as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldError {
    /// Dotted path of the offending key (`steps.at_requests[2]`); empty
    /// when the error is about the checked table as a whole.
    pub key: String,
    /// The complete sentence shown to the user, starting with `key`.
    pub message: String,
}

impl FieldError {
    /// An error about `key` with the whole sentence `message`, which
    /// [`Self::under`] expects to start with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The same error seen from the enclosing table: `plateau.mib` checked
    /// under `calibrate` becomes `calibrate.plateau.mib`, in the key and
    /// at the start of the message. An error about the table as a whole
    /// (empty key) becomes one about `table`.
    pub fn under(self, table: &str) -> Self {
        if self.key.is_empty() {
            return FieldError {
                key: table.to_string(),
                message: format!("{table}: {}", self.message),
            };
        }
        FieldError {
            key: format!("{table}.{}", self.key),
            message: format!("{table}.{}", self.message),
        }
    }
}

/// The inclusive range an integer key may take, and what it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntBound {
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value.
    pub max: u64,
    /// Unit and reason, shown after the range (`MiB, at most 1 TiB`).
    pub why: &'static str,
}

impl IntBound {
    /// `min..=max`, with `why` shown after the range in errors (may be empty).
    pub const fn new(min: u64, max: u64, why: &'static str) -> Self {
        IntBound { min, max, why }
    }

    /// `key = v` if it lies in the range, else an error naming both.
    pub fn check(&self, key: &str, v: u64) -> Result<u64, FieldError> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(FieldError::new(
                key,
                format!("{key} = {v} is out of range: {self}"),
            ))
        }
    }
}

impl fmt::Display for IntBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "allowed {}..={}", self.min, self.max)?;
        if !self.why.is_empty() {
            write!(f, " ({})", self.why)?;
        }
        Ok(())
    }
}

/// The range a float key may take; NaN and infinities are always refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatBound {
    /// Lower end (excluded when `min_open`).
    pub min: f64,
    /// Upper end (excluded when `max_open`).
    pub max: f64,
    /// Whether `min` itself is excluded (`(0, 1]`).
    pub min_open: bool,
    /// Whether `max` itself is excluded (`[0, 1)`).
    pub max_open: bool,
    /// Unit and reason, shown after the range (`MiB, at most 1 TiB per request`).
    pub why: &'static str,
}

impl FloatBound {
    /// `[min, max]`.
    pub const fn closed(min: f64, max: f64, why: &'static str) -> Self {
        FloatBound {
            min,
            max,
            min_open: false,
            max_open: false,
            why,
        }
    }

    /// `(min, max]`: for values that must be positive.
    pub const fn above(min: f64, max: f64, why: &'static str) -> Self {
        FloatBound {
            min,
            max,
            min_open: true,
            max_open: false,
            why,
        }
    }

    /// `[min, max)`.
    pub const fn below(min: f64, max: f64, why: &'static str) -> Self {
        FloatBound {
            min,
            max,
            min_open: false,
            max_open: true,
            why,
        }
    }

    /// `(min, max)`.
    pub const fn open(min: f64, max: f64, why: &'static str) -> Self {
        FloatBound {
            min,
            max,
            min_open: true,
            max_open: true,
            why,
        }
    }

    /// Whether `v` is finite and lies in the range, open ends excluded.
    pub fn contains(&self, v: f64) -> bool {
        let low = if self.min_open {
            v > self.min
        } else {
            v >= self.min
        };
        let high = if self.max_open {
            v < self.max
        } else {
            v <= self.max
        };
        v.is_finite() && low && high
    }

    /// `v` if [`Self::contains`] it, else an error naming `key`, the value and the range.
    pub fn check(&self, key: &str, v: f64) -> Result<f64, FieldError> {
        if self.contains(v) {
            Ok(v)
        } else {
            Err(FieldError::new(
                key,
                format!("{key} = {v} is out of range: {self}"),
            ))
        }
    }
}

impl fmt::Display for FloatBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "allowed a finite number in {}{}, {}{}",
            if self.min_open { '(' } else { '[' },
            self.min,
            self.max,
            if self.max_open { ')' } else { ']' }
        )?;
        if !self.why.is_empty() {
            write!(f, " ({})", self.why)?;
        }
        Ok(())
    }
}

/// Sizes in MiB: at most 1 TiB each (beyond any host memqual qualifies for;
/// in bytes it stays far below `u64::MAX`, so size arithmetic cannot wrap).
pub const MIB_SIZE: IntBound = IntBound::new(0, 1 << 20, "MiB, at most 1 TiB");

/// Measured requests of one arm: a day of 10 ms requests is 8.6 million.
pub const REQUESTS: IntBound = IntBound::new(0, 10_000_000, "at most 10 million");

/// Warmup requests.
pub const WARMUP: IntBound = IntBound::new(0, 10_000, "at most 10000");

/// Waits and simulated work in milliseconds: at most an hour each.
pub const MILLIS: IntBound = IntBound::new(0, 3_600_000, "milliseconds, at most 1 hour");

/// Extra threads of a worker.
pub const THREADS: IntBound = IntBound::new(0, 256, "at most 256");

/// Threads per request: at least one; more than 256 is no CPU memqual runs on.
pub const WHISPER_THREADS: IntBound = IntBound::new(1, 256, "at most 256");

/// Encoder positions: every Whisper model's encoder context is 1500 (30 s);
/// 0 keeps the model's.
pub const AUDIO_CTX: IntBound = IntBound::new(
    0,
    1500,
    "0 = the model's; Whisper's encoder context is 1500",
);

/// Encoder positions a state or an estimate is sized for: 1 to Whisper's 1500
/// (`state_bounds.max_audio_ctx`, `memqual artifact estimate --audio-ctx`).
pub const AUDIO_POSITIONS: IntBound = IntBound::new(1, 1500, "Whisper's encoder context");

/// Text positions or tokens per batch a state or an estimate is sized for: 1
/// to Whisper's 448 (`state_bounds.max_batch`, `--text-ctx`, `--max-batch`).
pub const TEXT_POSITIONS: IntBound = IntBound::new(1, 448, "Whisper's text context");

/// Tokens per segment: Whisper's text context is 448 tokens; 0 = no limit.
pub const MAX_TOKENS: IntBound =
    IntBound::new(0, 448, "0 = no limit; Whisper's text context is 448");

/// States beyond the working one. Each holds its own kv caches and compute
/// buffers (tiny.en about 23 MiB, large models hundreds of MiB), so a
/// larger count only grows until the host kills the worker; 16 already
/// shows the per-state slope.
pub const EXTRA_STATES: IntBound = IntBound::new(
    0,
    16,
    "each state costs its own kv caches and compute buffers",
);

/// Greedy `best_of`: whisper.cpp runs at most 8 decoders.
pub const BEST_OF: IntBound = IntBound::new(1, 8, "whisper.cpp's decoder limit");

/// Beam search `beam_size`: 2 to whisper.cpp's 8 decoders.
pub const BEAM_SIZE: IntBound = IntBound::new(2, 8, "whisper.cpp's decoder limit");

/// A soak's `max_duration_s`: at most 7 days.
pub const SOAK_SECONDS: IntBound = IntBound::new(1, 7 * 24 * 3600, "seconds, at most 7 days");

/// `external_encoder.timeout_s`: how long the worker waits for the encoder
/// process's ready line and each reply; at most an hour (an arm's own
/// timeout bounds it anyway).
pub const ENCODER_TIMEOUT_S: IntBound = IntBound::new(1, 3600, "seconds, at most 1 hour");

/// A lifecycle soak's `requests_per_cycle` (the protocol's `[soak]
/// cycle_requests`): at least one request between a load and its release.
pub const CYCLE_REQUESTS: IntBound = IntBound::new(1, 10_000_000, "at most 10 million");

/// A real-time request's chunk: 10 ms (a tenth of a typical capture
/// buffer) to 1 s; smaller chunks only add wake-ups, larger ones stop being
/// "as a person speaks".
pub const CHUNK_MS: IntBound = IntBound::new(10, 1000, "milliseconds per chunk");

/// Entries of an arm's `gaps_ms` schedule (it is cycled, so a few suffice).
pub const GAPS: IntBound = IntBound::new(0, 64, "entries; the schedule is cycled");

/// Converts `mib` to bytes, refusing what does not fit a `u64`.
pub fn mib_to_bytes(key: &str, mib: u64) -> Result<u64, FieldError> {
    mib.checked_mul(crate::MIB).ok_or_else(|| {
        FieldError::new(
            key,
            format!("{key} = {mib} MiB does not fit in 64 bits of bytes"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_bounds_name_key_value_and_range() {
        assert_eq!(MIB_SIZE.check("plateau.mib", 256), Ok(256));
        let e = MIB_SIZE
            .check("plateau.mib", 17_592_186_044_416)
            .unwrap_err();
        assert_eq!(e.key, "plateau.mib");
        assert_eq!(
            e.message,
            "plateau.mib = 17592186044416 is out of range: allowed 0..=1048576 (MiB, at most 1 TiB)"
        );
        let e = e.under("calibrate");
        assert_eq!(e.key, "calibrate.plateau.mib");
        assert!(e.message.starts_with("calibrate.plateau.mib = "), "{e}");
    }

    #[test]
    fn float_bounds_refuse_nan_infinity_and_open_ends() {
        let b = FloatBound::above(0.0, 1.0, "");
        assert!(b.contains(1.0) && b.contains(0.5));
        for v in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(!b.contains(v), "{v}");
        }
        assert_eq!(
            b.check("tail_fraction", 0.0).unwrap_err().message,
            "tail_fraction = 0 is out of range: allowed a finite number in (0, 1]"
        );
        assert!(!FloatBound::below(0.0, 1.0, "").contains(1.0));
        assert!(FloatBound::closed(0.0, 1.0, "").contains(1.0));
    }

    #[test]
    fn mib_conversion_is_checked() {
        assert_eq!(mib_to_bytes("m", 2), Ok(2 << 20));
        assert_eq!(mib_to_bytes("m", MIB_SIZE.max), Ok(1 << 40));
        assert!(mib_to_bytes("m", 17_592_186_044_416).is_err());
    }
}
