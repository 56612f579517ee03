//! `vmmap -summary PID`: the report header (with the physical footprint and
//! its peak), the summary lines, the region table and the malloc zone table.
//!
//! Table columns are read from the `=====` separator under the header: each
//! group of `=` is one column, values are right-aligned to the group's end,
//! and the column's name is the header text above it. Newer macOS prints two
//! header lines (`VIRTUAL RESIDENT …` over `REGION TYPE  SIZE SIZE …`); older
//! ones print one (`REGION TYPE  VIRTUAL RESIDENT`), and without root only
//! `VIRTUAL` and `REGION COUNT`. A version that adds or drops a column is read
//! without code changes; a column the table lacks is simply absent, never 0.
//! The one blank cell the tool prints, a percentage it cannot compute (the
//! `% FULL` of an empty malloc zone), is `None`.

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, ParseOptions, Parsed, Size, SizeUnits};
use serde::{Deserialize, Serialize};

/// A parsed `vmmap -summary PID` capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmmapSummary {
    /// `Key: value` lines of the report header, in order.
    pub header: Vec<HeaderField>,
    /// `Physical footprint:` of the header; `None` when not printed.
    pub physical_footprint: Option<Size>,
    /// `Physical footprint (peak):` of the header (the lifetime peak); `None` when not printed.
    pub physical_footprint_peak: Option<Size>,
    /// `ReadOnly portion of Libraries: …` and `Writable regions: …`, verbatim.
    pub summary_lines: Vec<HeaderField>,
    /// The table headed `REGION TYPE`.
    pub regions: Option<Table>,
    /// The table headed `MALLOC ZONE`.
    pub malloc_zones: Option<Table>,
}

/// A `Key: value` line as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeaderField {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The text before the first `:`.
    pub key: String,
    /// The text after it, trimmed.
    pub value: String,
}

/// A vmmap table: its columns, named rows and total rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Table {
    /// `REGION TYPE` or `MALLOC ZONE`.
    pub name_header: String,
    /// The value columns, left to right (the name column not included).
    pub columns: Vec<Column>,
    /// The rows above the closing separator, in order.
    pub rows: Vec<Row>,
    /// The rows under the closing separator (`TOTAL`, `TOTAL, minus reserved VM space`).
    pub totals: Vec<Row>,
}

/// One value column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Column {
    /// The header text above the column, lines joined: `DIRTY SIZE`,
    /// `REGION COUNT`, `% FRAG`; on older macOS `VIRTUAL`, `RESIDENT`, `% FULL`.
    pub name: String,
    /// How its cells are read, from its name.
    pub kind: ColumnKind,
    /// What the column measures, when its name is one this parser knows.
    pub measure: Option<Measure>,
}

/// How a column's cells are read: decided by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ColumnKind {
    /// Sizes such as `824`, `8192K`, `100.3M` (binary units), read as bytes.
    Bytes,
    /// Whole numbers: a column whose name ends in `COUNT`.
    Count,
    /// Percentages such as `12%`: a column whose name starts with `%`.
    Percent,
}

/// A quantity whatever the macOS version calls its column (`RESIDENT` in
/// older tables, `RESIDENT SIZE` in newer ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// `VIRTUAL` / `VIRTUAL SIZE`: address space mapped.
    Virtual,
    /// `RESIDENT` / `RESIDENT SIZE`: resident memory.
    Resident,
    /// `DIRTY` / `DIRTY SIZE`: dirty memory.
    Dirty,
    /// `SWAPPED` / `SWAPPED SIZE`: memory compressed or swapped out.
    Swapped,
    /// `VOLATILE` / `VOLATILE SIZE`: purgeable memory marked volatile.
    Volatile,
    /// `NONVOL` / `NONVOL SIZE`: purgeable memory marked non-volatile.
    Nonvolatile,
    /// `EMPTY SIZE`: purgeable memory that has been emptied.
    Empty,
    /// `REGION COUNT`: the number of VM regions.
    RegionCount,
    /// `ALLOCATION COUNT`: the number of malloc allocations in a zone.
    AllocationCount,
    /// `BYTES ALLOCATED`: bytes the program has allocated in a zone.
    BytesAllocated,
    /// `DIRTY+SWAP FRAG SIZE`: dirty or swapped zone memory not holding allocations.
    DirtySwapFrag,
    /// `% FRAG`.
    FragPercent,
    /// `% FULL`, the older tables' counterpart of `% FRAG`.
    FullPercent,
}

/// Column names as vmmap prints them, old and new, and what they measure.
const MEASURES: [(&str, Measure); 19] = [
    ("VIRTUAL", Measure::Virtual),
    ("VIRTUAL SIZE", Measure::Virtual),
    ("RESIDENT", Measure::Resident),
    ("RESIDENT SIZE", Measure::Resident),
    ("DIRTY", Measure::Dirty),
    ("DIRTY SIZE", Measure::Dirty),
    ("SWAPPED", Measure::Swapped),
    ("SWAPPED SIZE", Measure::Swapped),
    ("VOLATILE", Measure::Volatile),
    ("VOLATILE SIZE", Measure::Volatile),
    ("NONVOL", Measure::Nonvolatile),
    ("NONVOL SIZE", Measure::Nonvolatile),
    ("EMPTY SIZE", Measure::Empty),
    ("REGION COUNT", Measure::RegionCount),
    ("ALLOCATION COUNT", Measure::AllocationCount),
    ("BYTES ALLOCATED", Measure::BytesAllocated),
    ("DIRTY+SWAP FRAG SIZE", Measure::DirtySwapFrag),
    ("% FRAG", Measure::FragPercent),
    ("% FULL", Measure::FullPercent),
];

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The row's name (region type or malloc zone, e.g. `MALLOC_SMALL`, `TOTAL`).
    pub name: String,
    /// One per column: bytes, a count or a percentage, per the column's kind.
    /// `None` where the tool left the cell blank.
    pub cells: Vec<Option<Cell>>,
    /// Text after the last column, e.g. `see MALLOC ZONE table below`.
    pub detail: Option<String>,
}

/// One non-blank cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    /// Bytes, a count or a percentage, per the column's kind (sizes rounded to the nearest byte).
    pub value: u64,
    /// The token as printed (e.g. `100.3M`, `12%`).
    pub raw: String,
}

impl Table {
    /// The index of the column named exactly `name`, for `Row::cells`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The column that measures `measure`, whatever this table calls it.
    pub fn column_of(&self, measure: Measure) -> Option<usize> {
        self.columns.iter().position(|c| c.measure == Some(measure))
    }

    /// The first row named `name` above the closing separator.
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The first total row named `name` (e.g. `TOTAL`).
    pub fn total(&self, name: &str) -> Option<&Row> {
        self.totals.iter().find(|r| r.name == name)
    }

    /// The value of `column` in `row`; `None` if the table has no such
    /// column or the cell is blank.
    pub fn value(&self, row: &Row, column: &str) -> Option<u64> {
        cell_value(row, self.column(column)?)
    }

    /// The value `row` holds for `measure`; `None` if this table has no
    /// column for it (older tables lack most) or the cell is blank.
    pub fn measured(&self, row: &Row, measure: Measure) -> Option<u64> {
        cell_value(row, self.column_of(measure)?)
    }
}

fn cell_value(row: &Row, index: usize) -> Option<u64> {
    row.cells.get(index)?.as_ref().map(|c| c.value)
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
/// The first column's header, which names a table.
const TABLE_NAMES: [&str; 2] = ["REGION TYPE", "MALLOC ZONE"];

/// Parse a `vmmap -summary` capture. Fails on a line it does not understand (unless
/// lenient), on a second table of one kind, and on a malformed table or footprint line.
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
        if let Some(headers) = table_header(&mut lines, no, line)? {
            let table = match parse_table(&mut lines, &headers)? {
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
    // Every vmmap -summary prints a footprint or a table (OS X 10.10 only
    // the tables): without any, nothing was measured.
    if out.physical_footprint.is_none() && out.regions.is_none() && out.malloc_zones.is_none() {
        return Err(CaptureError::whole(
            "no 'Physical footprint:' line and no REGION TYPE or MALLOC ZONE table: \
             not vmmap -summary output",
        ));
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

/// If a table starts at `line`, its header lines (consumed; the separator
/// under them is left for [`parse_table`]). Two-line headers start with the
/// `VIRTUAL` line; a one-line header is the table's name followed directly by
/// the separator.
fn table_header<'a>(
    lines: &mut Lines<'a>,
    no: usize,
    line: &'a str,
) -> Result<Option<Vec<(usize, &'a str)>>, CaptureError> {
    let trimmed = line.trim();
    if trimmed.starts_with("VIRTUAL") {
        let Some(second) = lines.next_line() else {
            return Err(fatal(no, line, "table header without its second line"));
        };
        return Ok(Some(vec![(no, line), second]));
    }
    let named = TABLE_NAMES.iter().any(|n| line.starts_with(n));
    if named && lines.peek().is_some_and(|(_, next)| is_separator(next)) {
        return Ok(Some(vec![(no, line)]));
    }
    Ok(None)
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

fn column(name: String) -> Column {
    let kind = if name.starts_with('%') {
        ColumnKind::Percent
    } else if name.ends_with("COUNT") {
        ColumnKind::Count
    } else {
        ColumnKind::Bytes
    };
    let measure = MEASURES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m);
    Column {
        name,
        kind,
        measure,
    }
}

/// Parse a table from its separator on, given its header lines. Returns
/// `None` when a lenient parse skipped a malformed header.
fn parse_table(
    lines: &mut Lines<'_>,
    headers: &[(usize, &str)],
) -> Result<Option<Table>, CaptureError> {
    let Some(&(last_no, last)) = headers.last() else {
        return Ok(None);
    };
    let Some((sep_no, sep)) = lines.next_line() else {
        return Err(fatal(last_no, last, "table header without its separator"));
    };
    let groups = spans(sep);
    let ascii = headers.iter().all(|(_, h)| h.is_ascii());
    if !is_separator(sep) || groups.len() < 2 || !ascii {
        lines.unknown(
            sep_no,
            sep,
            "expected the ===== separator under a table header",
        )?;
        return Ok(None);
    }
    let name_header = header_text(last, 0, groups[0].end);
    let columns: Vec<Column> = groups
        .windows(2)
        .map(|w| {
            let (prev, span) = (&w[0], &w[1]);
            let words: Vec<&str> = headers
                .iter()
                .map(|(_, h)| header_text(h, prev.end, span.end))
                .filter(|t| !t.is_empty())
                .collect();
            column(words.join(" "))
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
            Ok(row) if in_totals => table.totals.push(row),
            Ok(row) => table.rows.push(row),
            Err(reason) => lines.unknown(row_no, line, reason)?,
        }
    }
    Ok(Some(table))
}

/// A row whose values end exactly where their columns end. Only a
/// percentage may be blank. The error says which column did not fit.
fn parse_row(line: &str, no: usize, spans: &[Span], columns: &[Column]) -> Result<Row, String> {
    let bytes = line.as_bytes();
    let mut cells = Vec::with_capacity(spans.len());
    let mut first_start = None;
    let mut prev_end = 0;
    for (span, column) in spans.iter().zip(columns) {
        let end = span.end;
        let name = &column.name;
        // The field between the previous column's end and this one's.
        let field = line.get(prev_end.min(line.len())..end.min(line.len()));
        if field.is_some_and(|f| f.trim().is_empty()) {
            if column.kind != ColumnKind::Percent {
                return Err(format!("no value under column {name:?}"));
            }
            cells.push(None);
            prev_end = end;
            continue;
        }
        let row_end = line.trim_end().len();
        if end > row_end {
            // Text after the previous column is a value ending short of the
            // edge; after the name (first column) or nothing, a missing value.
            let short = prev_end != 0 && row_end > prev_end;
            let what = if short {
                format!("the value under column {name:?} ends at byte {row_end}")
            } else {
                format!("no value under column {name:?}: the row ends at byte {row_end}")
            };
            return Err(format!("{what}, before the column's edge at byte {end}"));
        }
        if bytes[end - 1] == b' ' || bytes.get(end).is_some_and(|b| *b != b' ') {
            return Err(format!(
                "the value under column {name:?} does not end at the column's edge (byte {end})"
            ));
        }
        let start = line[..end].rfind(' ').map_or(0, |i| i + 1);
        if start == 0 || (prev_end != 0 && start <= prev_end) {
            return Err(format!(
                "the value under column {name:?} runs into the column before it"
            ));
        }
        let token = line
            .get(start..end)
            .ok_or_else(|| format!("column {name:?} splits a character"))?;
        let value = match column.kind {
            ColumnKind::Bytes => Size::parse_suffixed(token, SizeUnits::Binary).map(|s| s.bytes),
            ColumnKind::Count => parse_u64(token),
            ColumnKind::Percent => token.strip_suffix('%').and_then(parse_u64),
        };
        let Some(value) = value else {
            let want = match column.kind {
                ColumnKind::Bytes => "a size (824, 8192K, 100.3M)",
                ColumnKind::Count => "a count",
                ColumnKind::Percent => "a percentage (12%)",
            };
            return Err(format!("{token:?} under column {name:?} is not {want}"));
        };
        cells.push(Some(Cell {
            value,
            raw: token.to_string(),
        }));
        first_start.get_or_insert(start);
        prev_end = end;
    }
    let first_start = first_start.ok_or("a row without any value")?;
    let name = line.get(..first_start).unwrap_or("").trim_end();
    if name.is_empty() {
        return Err("a row without a name before its first value".to_string());
    }
    let detail = line
        .get(prev_end.min(line.len())..)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    Ok(Row {
        line: no,
        name: name.to_string(),
        cells,
        detail: detail.map(str::to_string),
    })
}
