//! `/usr/bin/time -l` (and `-lp`) on macOS: the real/user/sys times and the
//! rusage counters. `maximum resident set size` is in bytes on macOS, and
//! `peak memory footprint` is `ri_lifetime_max_phys_footprint`, also bytes.

use super::lines::{Lines, parse_u64};
use super::{CaptureError, Entry, ParseOptions, Parsed, entry, size};
use serde::{Deserialize, Serialize};

/// A parsed `/usr/bin/time -l` capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimeL {
    /// Wall-clock time (`real`); `None` when not printed.
    pub real: Option<Seconds>,
    /// User CPU time (`user`).
    pub user: Option<Seconds>,
    /// System CPU time (`sys`).
    pub sys: Option<Seconds>,
    /// Every `N  label` line, labels as printed.
    pub counters: Vec<Entry>,
    /// `maximum resident set size` in bytes (macOS prints bytes); `None` when not printed.
    pub max_rss_bytes: Option<u64>,
    /// Absent on macOS versions whose `time` does not print it.
    pub peak_memory_footprint_bytes: Option<u64>,
}

/// A time as printed (the decimal mark follows the locale) and in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Seconds {
    /// The number as printed, with `,` or `.` as decimal mark.
    pub raw: String,
    /// The time in microseconds, rounded to the nearest.
    pub micros: u64,
}

impl TimeL {
    /// The value of the first counter labelled `label` (e.g. `page reclaims`).
    pub fn counter(&self, label: &str) -> Option<u64> {
        entry(&self.counters, label)
    }
}

/// Parse a `time -l` or `time -lp` capture. Fails on a line it does not understand
/// (unless lenient) and when there is neither a time line nor a counter.
pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<TimeL>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut out = TimeL {
        real: None,
        user: None,
        sys: None,
        counters: Vec::new(),
        max_rss_bytes: None,
        peak_memory_footprint_bytes: None,
    };
    while let Some((no, line)) = lines.next_line() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            // `0.66 real 0.30 user 0.43 sys`
            [r, "real", u, "user", s, "sys"] => match (seconds(r), seconds(u), seconds(s)) {
                (Some(r), Some(u), Some(s)) => {
                    (out.real, out.user, out.sys) = (Some(r), Some(u), Some(s));
                }
                _ => lines.unknown(no, line, "times are not decimal seconds")?,
            },
            // `-p`: `real 0.66`
            [label @ ("real" | "user" | "sys"), value] => match seconds(value) {
                Some(v) => {
                    let slot = match *label {
                        "real" => &mut out.real,
                        "user" => &mut out.user,
                        _ => &mut out.sys,
                    };
                    *slot = Some(v);
                }
                None => lines.unknown(no, line, "time is not decimal seconds")?,
            },
            [number, label @ ..] if !label.is_empty() && parse_u64(number).is_some() => {
                let label = label.join(" ");
                let ok = label.chars().all(|c| c.is_ascii_lowercase() || c == ' ');
                match parse_u64(number).filter(|_| ok) {
                    Some(value) => out.counters.push(Entry {
                        line: no,
                        name: label,
                        value,
                    }),
                    None => lines.unknown(no, line, "not a 'N  label' counter")?,
                }
            }
            _ => lines.unknown(no, line, "not a time -l line")?,
        }
    }
    if out.real.is_none() && out.counters.is_empty() {
        return Err(CaptureError::whole(
            "no 'real/user/sys' line and no counters",
        ));
    }
    out.max_rss_bytes = out.counter("maximum resident set size");
    out.peak_memory_footprint_bytes = out.counter("peak memory footprint");
    Ok(lines.finish(out))
}

fn seconds(raw: &str) -> Option<Seconds> {
    let micros = size::scale(&raw.replace(',', "."), 1_000_000)?;
    Some(Seconds {
        raw: raw.to_string(),
        micros,
    })
}
