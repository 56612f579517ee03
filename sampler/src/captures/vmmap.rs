//! `vmmap -summary PID`: the report header (with the physical footprint and
//! its peak), the summary lines, the region table and the malloc zone table.
//!
//! Table columns are read from the `=====` separator under the two header
//! lines: each group of `=` is one column, values are right-aligned to the
//! group's end, and the column's name is the header text above it. So a macOS
//! version that adds or drops a column is read without code changes.

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, ParseOptions, Parsed, Size, SizeUnits};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmmapSummary {
    /// `Key: value` lines of the report header, in order.
    pub header: Vec<HeaderField>,
    pub physical_footprint: Option<Size>,
    pub physical_footprint_peak: Option<Size>,
    /// `ReadOnly portion of Libraries: …` and `Writable regions: …`, verbatim.
    pub summary_lines: Vec<HeaderField>,
    /// The table headed `REGION TYPE`.
    pub regions: Option<Table>,
    /// The table headed `MALLOC ZONE`.
    pub malloc_zones: Option<Table>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeaderField {
    pub line: usize,
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Table {
    /// `REGION TYPE` or `MALLOC ZONE`.
    pub name_header: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// The rows under the closing separator (`TOTAL`, `TOTAL, minus reserved VM space`).
    pub totals: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Column {
    /// The two header lines joined, e.g. `DIRTY SIZE`, `REGION COUNT`, `% FRAG`.
    pub name: String,
    pub kind: ColumnKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ColumnKind {
    Bytes,
    Count,
    Percent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    pub line: usize,
    pub name: String,
    /// One per column: bytes, a count or a percentage, per the column's kind.
    pub cells: Vec<Cell>,
    /// Text after the last column, e.g. `see MALLOC ZONE table below`.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub value: u64,
    pub raw: String,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    pub fn total(&self, name: &str) -> Option<&Row> {
        self.totals.iter().find(|r| r.name == name)
    }

    /// The value of `column` in `row`.
    pub fn value(&self, row: &Row, column: &str) -> Option<u64> {
        row.cells.get(self.column(column)?).map(|c| c.value)
    }
}

const FOOTPRINT: &str = "Physical footprint";
const FOOTPRINT_PEAK: &str = "Physical footprint (peak)";
const SUMMARY_LABELS: [&str; 2] = ["ReadOnly portion of Libraries", "Writable regions"];
/// Lines of the full report that `-summary` may also print.
const REPORT_LINES: [&str; 5] = [
    "Virtual Memory Map of process",
    "Output report format:",
    "VM page size:",
    "Collected with",
    "==== Summary for process",
];

pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<VmmapSummary>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut out = VmmapSummary {
        header: Vec::new(),
        physical_footprint: None,
        physical_footprint_peak: None,
        summary_lines: Vec::new(),
        regions: None,
        malloc_zones: None,
    };
    let mut in_header = true;
    while let Some((no, line)) = lines.next_line() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with("VIRTUAL") {
            let table = match parse_table(&mut lines, no, line)? {
                Some(t) => t,
                None => continue,
            };
            let slot = match table.name_header.as_str() {
                "REGION TYPE" => &mut out.regions,
                "MALLOC ZONE" => &mut out.malloc_zones,
                other => {
                    let reason =
                        format!("a table headed {other:?}, not REGION TYPE or MALLOC ZONE");
                    lines.unknown(no, line, reason)?;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(fatal(no, line, "a second table of the same kind"));
            }
            *slot = Some(table);
            continue;
        }
        if in_header && trimmed == "----" {
            in_header = false;
            continue;
        }
        if let Some((key, value)) = key_value(line) {
            if SUMMARY_LABELS.contains(&key) {
                out.summary_lines.push(field(no, key, value));
                continue;
            }
            if in_header {
                match key {
                    FOOTPRINT | FOOTPRINT_PEAK => {
                        let size = Size::parse_suffixed(value, SizeUnits::Binary)
                            .ok_or_else(|| fatal(no, line, "footprint is not a size"))?;
                        let slot = if key == FOOTPRINT {
                            &mut out.physical_footprint
                        } else {
                            &mut out.physical_footprint_peak
                        };
                        *slot = Some(size);
                    }
                    _ => {}
                }
                out.header.push(field(no, key, value));
                continue;
            }
        }
        if REPORT_LINES.iter().any(|p| trimmed.starts_with(p)) {
            out.header.push(field(no, trimmed, ""));
            continue;
        }
        lines.unknown(no, line, "not a vmmap -summary line")?;
    }
    Ok(lines.finish(out))
}

fn field(line: usize, key: &str, value: &str) -> HeaderField {
    HeaderField {
        line,
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// `Key:   value` with the key starting at column 0.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let plain = |c: char| c.is_ascii_alphanumeric() || " ()/_-".contains(c);
    if key.is_empty() || key.starts_with(' ') || !key.chars().all(plain) {
        return None;
    }
    Some((key, value.trim()))
}

/// Where one column ends (exclusive) in the separator line.
struct Span {
    end: usize,
}

/// The groups of `=` in a separator line.
fn spans(sep: &str) -> Vec<Span> {
    let bytes = sep.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' {
            while i < bytes.len() && bytes[i] == b'=' {
                i += 1;
            }
            out.push(Span { end: i });
        } else {
            i += 1;
        }
    }
    out
}

fn is_separator(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == '=' || c == ' ') && line.starts_with('=')
}

/// Header text above a column: from the previous column's end to this one's.
fn header_text(line: &str, from: usize, to: usize) -> &str {
    let to = to.min(line.len());
    line.get(from.min(to)..to).map(str::trim).unwrap_or("")
}

/// Parse a table starting at its first header line. Returns `None` when a
/// lenient parse skipped a malformed header.
fn parse_table(
    lines: &mut Lines<'_>,
    no: usize,
    head1: &str,
) -> Result<Option<Table>, CaptureError> {
    let Some((no2, head2)) = lines.next_line() else {
        return Err(fatal(no, head1, "table header without its second line"));
    };
    let Some((no3, sep)) = lines.next_line() else {
        return Err(fatal(no2, head2, "table header without its separator"));
    };
    let groups = spans(sep);
    if !is_separator(sep) || groups.len() < 2 || !head1.is_ascii() || !head2.is_ascii() {
        lines.unknown(
            no3,
            sep,
            "expected the ===== separator under a table header",
        )?;
        return Ok(None);
    }
    let name_header = header_text(head2, 0, groups[0].end);
    let columns: Vec<Column> = groups
        .windows(2)
        .map(|w| {
            let (prev, span) = (&w[0], &w[1]);
            let words: Vec<&str> = [head1, head2]
                .iter()
                .map(|h| header_text(h, prev.end, span.end))
                .filter(|t| !t.is_empty())
                .collect();
            let name = words.join(" ");
            let kind = if name.starts_with('%') {
                ColumnKind::Percent
            } else if name.ends_with("COUNT") {
                ColumnKind::Count
            } else {
                ColumnKind::Bytes
            };
            Column { name, kind }
        })
        .collect();
    let value_spans = &groups[1..];
    let mut table = Table {
        name_header: name_header.to_string(),
        columns,
        rows: Vec::new(),
        totals: Vec::new(),
    };
    let mut in_totals = false;
    while let Some((row_no, line)) = lines.peek() {
        if line.trim().is_empty() {
            break;
        }
        lines.next_line();
        if is_separator(line) {
            if in_totals {
                lines.unknown(row_no, line, "a third separator in one table")?;
            }
            in_totals = true;
            continue;
        }
        match parse_row(line, row_no, value_spans, &table.columns) {
            Some(row) if in_totals => table.totals.push(row),
            Some(row) => table.rows.push(row),
            None => lines.unknown(row_no, line, "row does not fit the table's columns")?,
        }
    }
    Ok(Some(table))
}

/// A row whose values end exactly where their columns end.
fn parse_row(line: &str, no: usize, spans: &[Span], columns: &[Column]) -> Option<Row> {
    let bytes = line.as_bytes();
    let mut cells = Vec::with_capacity(spans.len());
    let mut first_start = None;
    let mut prev_end = 0;
    for (span, column) in spans.iter().zip(columns) {
        let end = span.end;
        if end > bytes.len() || bytes[end - 1] == b' ' || bytes.get(end).is_some_and(|b| *b != b' ')
        {
            return None;
        }
        let start = line[..end].rfind(' ').map_or(0, |i| i + 1);
        if start == 0 || (prev_end != 0 && start <= prev_end) {
            return None;
        }
        let token = line.get(start..end)?;
        let value = match column.kind {
            ColumnKind::Bytes => Size::parse_suffixed(token, SizeUnits::Binary)?.bytes,
            ColumnKind::Count => parse_u64(token)?,
            ColumnKind::Percent => parse_u64(token.strip_suffix('%')?)?,
        };
        cells.push(Cell {
            value,
            raw: token.to_string(),
        });
        first_start.get_or_insert(start);
        prev_end = end;
    }
    let name = line.get(..first_start?)?.trim_end();
    if name.is_empty() {
        return None;
    }
    let detail = line
        .get(prev_end..)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    Some(Row {
        line: no,
        name: name.to_string(),
        cells,
        detail: detail.map(str::to_string),
    })
}
