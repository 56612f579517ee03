//! Walks a capture line by line and applies the strict/lenient rule in one place.

use super::{CaptureError, ParseOptions, Parsed, SkippedLine};

pub(crate) struct Lines<'a> {
    lines: Vec<&'a str>,
    pos: usize,
    lenient: bool,
    skipped: Vec<SkippedLine>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a str, opts: ParseOptions) -> Self {
        let mut lines: Vec<&str> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        // The newline that ends the last line does not start another one.
        if lines.last() == Some(&"") {
            lines.pop();
        }
        Lines {
            lines,
            pos: 0,
            lenient: opts.lenient,
            skipped: Vec::new(),
        }
    }

    /// The next line and its 1-based number, without consuming it.
    pub(crate) fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.pos).map(|l| (self.pos + 1, *l))
    }

    pub(crate) fn next_line(&mut self) -> Option<(usize, &'a str)> {
        let line = self.peek()?;
        self.pos += 1;
        Some(line)
    }

    /// A line the parser does not understand: an error, or skipped when lenient.
    pub(crate) fn unknown(
        &mut self,
        line: usize,
        text: &str,
        reason: impl Into<String>,
    ) -> Result<(), CaptureError> {
        let reason = reason.into();
        if self.lenient {
            self.skipped.push(SkippedLine {
                line,
                text: text.to_string(),
                reason,
            });
            Ok(())
        } else {
            Err(CaptureError::Line {
                line,
                text: text.to_string(),
                reason,
            })
        }
    }

    pub(crate) fn finish<T>(self, value: T) -> Parsed<T> {
        Parsed {
            value,
            skipped: self.skipped,
        }
    }
}

/// An error for a line, whatever the leniency (the capture cannot go on).
pub(crate) fn fatal(line: usize, text: &str, reason: impl Into<String>) -> CaptureError {
    CaptureError::Line {
        line,
        text: text.to_string(),
        reason: reason.into(),
    }
}

/// Parse a run of ASCII digits as u64 (no sign, no spaces).
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}
