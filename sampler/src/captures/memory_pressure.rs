//! `memory_pressure` (and `memory_pressure -Q`): the machine's size, the page
//! counts by section, and `System-wide memory free percentage`, which is the
//! kernel's `kern.memorystatus_level`.

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, ParseOptions, Parsed};
use serde::{Deserialize, Serialize};

/// A parsed `memory_pressure` capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryPressure {
    /// `hw.memsize` in bytes.
    pub total_bytes: u64,
    /// Physical memory in pages, from `The system has N (P pages with a page size of S).`
    pub total_pages: u64,
    /// Page size in bytes, from the same line.
    pub page_size: u64,
    /// Every `Label: N` line with the section it sits in.
    pub entries: Vec<PressureEntry>,
    /// `System-wide memory free percentage` (0-100, `kern.memorystatus_level`); `None`
    /// when not printed.
    pub free_percentage: Option<u8>,
    /// The page gauges converted to bytes.
    pub bytes: PressureBytes,
}

/// One `Label: N` line under a section heading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PressureEntry {
    /// 1-based line of the entry.
    pub line: usize,
    /// `Stats`, `Swap I/O`, `Page Q counts`, `Compressor Stats`, `File I/O`.
    pub section: String,
    /// The label as printed (e.g. `Pages free`).
    pub name: String,
    /// The number as printed (pages for `Pages …` labels, otherwise a count).
    pub value: u64,
}

/// The page gauges converted to bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PressureBytes {
    /// `Pages free` in bytes. Each field is `None` when its line is missing or the
    /// product overflows.
    pub free: Option<u64>,
    /// `Pages purgeable` in bytes.
    pub purgeable: Option<u64>,
    /// `Pages active` in bytes.
    pub active: Option<u64>,
    /// `Pages inactive` in bytes.
    pub inactive: Option<u64>,
    /// `Pages speculative` in bytes.
    pub speculative: Option<u64>,
    /// `Pages throttled` in bytes.
    pub throttled: Option<u64>,
    /// `Pages wired down` in bytes.
    pub wired_down: Option<u64>,
    /// `Pages used by compressor` in bytes.
    pub used_by_compressor: Option<u64>,
}

impl MemoryPressure {
    /// The number of the first entry labelled `name`, in any section.
    pub fn value(&self, name: &str) -> Option<u64> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value)
    }
}

const PERCENT: &str = "System-wide memory free percentage:";

/// Parse a `memory_pressure` capture. Fails on a line it does not understand (unless
/// lenient), on a second machine-size line, and when there is no machine-size line.
pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<MemoryPressure>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut size: Option<(u64, u64, u64)> = None;
    let mut section = String::new();
    let mut entries = Vec::new();
    let mut free_percentage = None;
    while let Some((no, line)) = lines.next_line() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(s) = machine_size(t) {
            if size.replace(s).is_some() {
                return Err(fatal(no, line, "a second 'The system has' line"));
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix(PERCENT) {
            let pct = rest.trim().strip_suffix('%').and_then(parse_u64);
            match pct.and_then(|p| u8::try_from(p).ok()).filter(|p| *p <= 100) {
                Some(p) => free_percentage = Some(p),
                None => lines.unknown(no, line, "free percentage is not 0-100%")?,
            }
            continue;
        }
        if let Some(name) = t.strip_suffix(':')
            && is_label(name)
        {
            section = name.to_string();
            continue;
        }
        match t.rsplit_once(':') {
            Some((name, value)) if is_label(name) && !section.is_empty() => {
                match parse_u64(value.trim()) {
                    Some(value) => entries.push(PressureEntry {
                        line: no,
                        section: section.clone(),
                        name: name.to_string(),
                        value,
                    }),
                    None => lines.unknown(no, line, "value is not a whole number")?,
                }
            }
            _ => lines.unknown(no, line, "not a memory_pressure line")?,
        }
    }
    let (total_bytes, total_pages, page_size) = size.ok_or_else(|| {
        CaptureError::whole("no 'The system has N (P pages with a page size of S).' line")
    })?;
    let page = |name: &str| {
        entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.checked_mul(page_size))
    };
    let bytes = PressureBytes {
        free: page("Pages free"),
        purgeable: page("Pages purgeable"),
        active: page("Pages active"),
        inactive: page("Pages inactive"),
        speculative: page("Pages speculative"),
        throttled: page("Pages throttled"),
        wired_down: page("Pages wired down"),
        used_by_compressor: page("Pages used by compressor"),
    };
    Ok(lines.finish(MemoryPressure {
        total_bytes,
        total_pages,
        page_size,
        entries,
        free_percentage,
        bytes,
    }))
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " /-".contains(c))
}

/// `The system has 34359738368 (2097152 pages with a page size of 16384).`
fn machine_size(t: &str) -> Option<(u64, u64, u64)> {
    let rest = t.strip_prefix("The system has ")?;
    let (bytes, rest) = rest.split_once(" (")?;
    let (pages, rest) = rest.split_once(" pages with a page size of ")?;
    let page = rest.strip_suffix(").")?;
    Some((parse_u64(bytes)?, parse_u64(pages)?, parse_u64(page)?))
}
