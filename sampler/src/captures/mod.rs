//! Parsers for the text that memory tools print, kept as captures.
//!
//! Pure and platform independent: each parser takes the captured text and
//! returns a typed, serde-ready result with sizes in bytes (the raw token is
//! kept wherever the tool rounded). A line a parser does not understand is an
//! error naming its 1-based line number; with [`ParseOptions::lenient`] it is
//! listed in [`Parsed::skipped`] instead. No parser panics on any input.
//!
//! Native field names are kept as the tool prints them; the typed fields are
//! conveniences over them.

pub mod cgroup;
pub mod footprint;
mod lines;
pub mod memory_pressure;
pub mod proc_files;
pub mod ps;
mod size;
pub mod time_l;
mod tool;
mod tree_digest;
pub mod vm_stat;
pub mod vmmap;

pub use size::{Size, SizeUnits};
pub use tool::{Capture, Tool, UnknownTool, parse};
pub use tree_digest::{TreeDigest, TreeDigestError, tree_digest};

use serde::{Deserialize, Serialize};

/// How strictly to read a capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// List lines the parser does not understand instead of failing on them.
    pub lenient: bool,
    /// The page size of the machine a page-counted capture (`statm`) came
    /// from; the file itself does not say it.
    pub page_size: Option<u64>,
}

impl ParseOptions {
    /// Fail on the first line the parser does not understand (the default).
    pub fn strict() -> Self {
        Self::default()
    }

    /// List lines the parser does not understand in `Parsed::skipped` and go on.
    pub fn lenient() -> Self {
        ParseOptions {
            lenient: true,
            ..Self::default()
        }
    }
}

/// A parse result and the lines a lenient parse passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Parsed<T> {
    /// What the parser read.
    pub value: T,
    /// Lines a lenient parse passed over, in order; always empty for a strict parse.
    pub skipped: Vec<SkippedLine>,
}

/// A line a lenient parse did not understand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedLine {
    /// 1-based.
    pub line: usize,
    /// The line as captured, without its line ending.
    pub text: String,
    /// Why the parser did not understand it.
    pub reason: String,
}

/// Why a capture could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    #[error(
        "line {line}: {reason}: {:?} (fix the line, or pass --lenient to skip it)",
        clipped(text)
    )]
    /// One line is not understood (or, even when lenient, stops the parse).
    Line {
        /// 1-based line number in the capture.
        line: usize,
        /// The line as captured.
        text: String,
        /// What the parser expected instead.
        reason: String,
    },
    /// The capture as a whole is unusable (e.g. empty, or a required line is missing).
    #[error("{reason}")]
    Whole {
        /// What is wrong with the capture.
        reason: String,
    },
}

/// A line as an error shows it: whole up to 200 characters, then cut with
/// `…`, so that a multi-megabyte line does not flood the terminal.
fn clipped(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

impl CaptureError {
    pub(crate) fn whole(reason: impl Into<String>) -> Self {
        CaptureError::Whole {
            reason: reason.into(),
        }
    }
}

/// A `name value` pair as the tool printed it, with its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The name as the tool printed it.
    pub name: String,
    /// The number as printed, in the unit of the file or tool it came from (bytes, pages or a count).
    pub value: u64,
}

/// The value of `name` among `entries` (the first occurrence).
pub fn entry(entries: &[Entry], name: &str) -> Option<u64> {
    entries.iter().find(|e| e.name == name).map(|e| e.value)
}

#[cfg(test)]
mod tests;
