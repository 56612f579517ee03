//! `vm_stat` (one snapshot of labelled page counts) and `vm_stat N` (a table
//! whose first row is totals since boot and whose later rows hold deltas for
//! the event counters and absolute values for the page gauges).

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, Entry, ParseOptions, Parsed, entry, size};
use serde::{Deserialize, Serialize};

/// Either form, told apart by the line after the banner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum VmStatCapture {
    /// Plain `vm_stat`: one snapshot.
    Snapshot(VmStat),
    /// `vm_stat N`: a row every N seconds.
    Interval(VmStatInterval),
}

/// A parsed plain `vm_stat`: labelled page counts and event counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmStat {
    /// Page size in bytes, from the banner `(page size of N bytes)`.
    pub page_size: u64,
    /// Every `label: N.` line, labels as printed (quotes removed).
    pub entries: Vec<Entry>,
    /// The page gauges converted to bytes.
    pub bytes: VmStatBytes,
}

/// The page gauges of a snapshot converted to bytes (`pages * page_size`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmStatBytes {
    /// `Pages free` (the tool already subtracts speculative pages).
    pub free: Option<u64>,
    /// `Pages active` in bytes. Each field is `None` when its line is missing or the
    /// product overflows.
    pub active: Option<u64>,
    /// `Pages inactive` in bytes.
    pub inactive: Option<u64>,
    /// `Pages speculative` in bytes.
    pub speculative: Option<u64>,
    /// `Pages throttled` in bytes.
    pub throttled: Option<u64>,
    /// `Pages wired down` in bytes.
    pub wired_down: Option<u64>,
    /// `Pages purgeable` in bytes.
    pub purgeable: Option<u64>,
    /// `File-backed pages` in bytes.
    pub file_backed: Option<u64>,
    /// `Anonymous pages` in bytes.
    pub anonymous: Option<u64>,
    /// `Pages stored in compressor`: the uncompressed size of what the compressor holds.
    pub stored_in_compressor: Option<u64>,
    /// `Pages occupied by compressor`: the memory the compressor itself uses.
    pub occupied_by_compressor: Option<u64>,
}

/// A parsed `vm_stat N`: the column header and one sample per row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmStatInterval {
    /// Page size in bytes, from the banner.
    pub page_size: u64,
    /// The columns as the header names them, in order.
    pub columns: Vec<IntervalColumn>,
    /// One sample per row, in order; repeated banners and headers are dropped.
    pub samples: Vec<IntervalSample>,
}

/// One column of `vm_stat N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalColumn {
    /// The header's abbreviation (e.g. `free`, `pageins`, `cmprssor`).
    pub name: String,
    /// Whether the column is a gauge or a counter.
    pub role: ColumnRole,
}

/// How to read a column's values across rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ColumnRole {
    /// Pages in a state now: absolute in every row.
    Gauge,
    /// Events: totals since boot in the first row, deltas afterwards.
    Counter,
    /// A column this parser does not classify.
    Unknown,
}

/// One row of `vm_stat N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalSample {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The first row: counters are totals since boot, not deltas.
    pub since_boot: bool,
    /// One cell per column, in column order.
    pub cells: Vec<IntervalCell>,
}

/// One cell of a `vm_stat N` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalCell {
    /// Pages or events. For a `K`/`M`/`G` value the tool divided by 1000 and
    /// truncated, so this is the lower bound and `approximate` is set.
    pub value: u64,
    /// The token as printed (e.g. `130912`, `5220K`).
    pub raw: String,
    /// Whether the tool abbreviated the value with `K`, `M` or `G` (so `value` is a lower bound).
    pub approximate: bool,
    /// `value * page_size` for gauge columns.
    pub bytes: Option<u64>,
}

impl VmStatInterval {
    /// The index of the column named `name`, for `IntervalSample::cells`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

const BANNER: &str = "Mach Virtual Memory Statistics:";
const COUNTERS: [&str; 11] = [
    "faults", "copy", "0fill", "reactive", "purged", "dcomprs", "comprs", "pageins", "pageout",
    "swapins", "swapouts",
];
const GAUGES: [&str; 14] = [
    "free",
    "active",
    "specul",
    "spec",
    "inactive",
    "throttle",
    "wired",
    "wire",
    "prgable",
    "file-backed",
    "anonymous",
    "cmprssed",
    "cmprssor",
    "purgeable",
];

/// Parse either form.
pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<VmStatCapture>, CaptureError> {
    let interval = text
        .lines()
        .skip_while(|l| !l.starts_with(BANNER))
        .nth(1)
        .is_some_and(|l| !l.contains(':') && l.trim_start().starts_with("free"));
    Ok(if interval {
        let p = parse_interval(text, opts)?;
        Parsed {
            value: VmStatCapture::Interval(p.value),
            skipped: p.skipped,
        }
    } else {
        let p = parse_snapshot(text, opts)?;
        Parsed {
            value: VmStatCapture::Snapshot(p.value),
            skipped: p.skipped,
        }
    })
}

/// `(page size of 16384 bytes)` or `(page size of 4096 bytes, cache hits 0%)`.
fn banner_page_size(line: &str) -> Option<u64> {
    let rest = line.strip_prefix(BANNER)?.trim();
    let rest = rest.strip_prefix("(page size of ")?;
    let (digits, _) = rest.split_once(" bytes")?;
    parse_u64(digits).filter(|p| *p > 0)
}

/// Read banner lines until the first one; anything before it is unknown.
fn read_banner(lines: &mut Lines<'_>) -> Result<u64, CaptureError> {
    while let Some((no, line)) = lines.next_line() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(p) = banner_page_size(line) {
            return Ok(p);
        }
        if line.starts_with(BANNER) {
            return Err(fatal(no, line, "banner without a page size"));
        }
        lines.unknown(
            no,
            line,
            "expected the 'Mach Virtual Memory Statistics' banner",
        )?;
    }
    Err(CaptureError::whole(
        "no 'Mach Virtual Memory Statistics: (page size of N bytes)' banner",
    ))
}

/// Parse plain `vm_stat`. Fails without the banner, on a line that is not `label: N.`
/// (unless lenient), and when there is no such line.
pub fn parse_snapshot(text: &str, opts: ParseOptions) -> Result<Parsed<VmStat>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let page_size = read_banner(&mut lines)?;
    let mut entries = Vec::new();
    while let Some((no, line)) = lines.next_line() {
        if line.trim().is_empty() {
            continue;
        }
        match snapshot_line(line) {
            Some((name, value)) => entries.push(Entry {
                line: no,
                name: name.to_string(),
                value,
            }),
            None => lines.unknown(no, line, "expected 'label: N.'")?,
        }
    }
    if entries.is_empty() {
        return Err(CaptureError::whole(
            "vm_stat banner but no 'label: N.' lines",
        ));
    }
    let b = |name: &str| entry(&entries, name).and_then(|p| p.checked_mul(page_size));
    let bytes = VmStatBytes {
        free: b("Pages free"),
        active: b("Pages active"),
        inactive: b("Pages inactive"),
        speculative: b("Pages speculative"),
        throttled: b("Pages throttled"),
        wired_down: b("Pages wired down"),
        purgeable: b("Pages purgeable"),
        file_backed: b("File-backed pages"),
        anonymous: b("Anonymous pages"),
        stored_in_compressor: b("Pages stored in compressor"),
        occupied_by_compressor: b("Pages occupied by compressor"),
    };
    Ok(lines.finish(VmStat {
        page_size,
        entries,
        bytes,
    }))
}

/// `Pages free:     130912.` or `"Translation faults":   5220385534.`
fn snapshot_line(line: &str) -> Option<(&str, u64)> {
    let (label, value) = line.rsplit_once(':')?;
    let label = label.trim();
    let label = label
        .strip_prefix('"')
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or(label);
    let value = parse_u64(value.trim().strip_suffix('.')?)?;
    let ok = !label.is_empty() && label.chars().all(|c| c.is_ascii_graphic() || c == ' ');
    ok.then_some((label, value))
}

/// Parse `vm_stat N`. Fails without the banner or the column header, when a repeated
/// header differs from the first, and on a row that does not match the header (unless lenient).
pub fn parse_interval(
    text: &str,
    opts: ParseOptions,
) -> Result<Parsed<VmStatInterval>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let page_size = read_banner(&mut lines)?;
    let Some((no, head)) = lines.next_line() else {
        return Err(CaptureError::whole(
            "vm_stat banner without its column header",
        ));
    };
    let names: Vec<&str> = head.split_whitespace().collect();
    if names.first() != Some(&"free") {
        return Err(fatal(
            no,
            head,
            "expected the column header starting with 'free'",
        ));
    }
    let columns: Vec<IntervalColumn> = names
        .iter()
        .map(|n| IntervalColumn {
            name: n.to_string(),
            role: if COUNTERS.contains(n) {
                ColumnRole::Counter
            } else if GAUGES.contains(n) {
                ColumnRole::Gauge
            } else {
                ColumnRole::Unknown
            },
        })
        .collect();
    let mut samples: Vec<IntervalSample> = Vec::new();
    while let Some((no, line)) = lines.next_line() {
        if line.trim().is_empty() {
            continue;
        }
        // The banner and header repeat every screenful.
        if banner_page_size(line) == Some(page_size) {
            match lines.next_line() {
                Some((_, h)) if h.split_whitespace().eq(names.iter().copied()) => continue,
                Some((hno, h)) => {
                    return Err(fatal(hno, h, "repeated header differs from the first"));
                }
                None => break,
            }
        }
        match interval_row(line, &columns, page_size) {
            Some(cells) => samples.push(IntervalSample {
                line: no,
                since_boot: samples.is_empty(),
                cells,
            }),
            None => lines.unknown(no, line, "row does not match the column header")?,
        }
    }
    Ok(lines.finish(VmStatInterval {
        page_size,
        columns,
        samples,
    }))
}

fn interval_row(
    line: &str,
    columns: &[IntervalColumn],
    page_size: u64,
) -> Option<Vec<IntervalCell>> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() != columns.len() {
        return None;
    }
    tokens
        .iter()
        .zip(columns)
        .map(|(tok, col)| {
            let (value, approximate) = match tok.char_indices().last() {
                Some((i, u @ ('K' | 'M' | 'G'))) => {
                    let exp = match u {
                        'K' => 1,
                        'M' => 2,
                        _ => 3,
                    };
                    (size::scale(&tok[..i], 1000u128.pow(exp))?, true)
                }
                _ => (parse_u64(tok)?, false),
            };
            let bytes = (col.role == ColumnRole::Gauge)
                .then(|| value.checked_mul(page_size))
                .flatten();
            Some(IntervalCell {
                value,
                raw: tok.to_string(),
                approximate,
                bytes,
            })
        })
        .collect()
}
