//! `footprint PID…`: per process, the headline footprint, the category
//! table (dirty / clean / reclaimable memory and regions by category, with
//! its TOTAL row), the memory it shares with other processes and the
//! auxiliary data (`phys_footprint`, `phys_footprint_peak`). Units are
//! binary (`KB` = 1024).
//!
//! The category table's columns are read from its header: `Dirty`, `Clean`,
//! `Reclaimable`, `Regions` and `Category` always, `(Swapped)` and `(Wired)`
//! when the tool was asked for them (`--swapped`, `--wired`, `-w`); a column
//! the header lacks is `None`, never 0.
//!
//! With more than one process the tool de-duplicates memory mapped by
//! several of them: inside a process's block, `Shared with NAME [PID]:`
//! heads the memory that process shares with the ones named; after the
//! processes, a `Shared with A [1], B [2]:` block that opens with a `=` rule
//! (or names the process just printed) is memory of the whole group. The
//! output ends with `Summary Footprint:`, the footprint of all of them with
//! shared memory counted once, optionally followed by its own category table
//! and auxiliary data.

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, ParseOptions, Parsed, Size};
use serde::{Deserialize, Serialize};

/// A parsed `footprint PID…` capture: one block per process, then the group's shared
/// blocks and summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Footprint {
    /// One block per process, in the order printed.
    pub processes: Vec<ProcessFootprint>,
    /// `Shared with …:` blocks of the whole group, printed after the processes.
    pub shared: Vec<SharedBlock>,
    /// Present when the capture covers several processes.
    pub summary: Option<SummaryFootprint>,
}

/// The multi-process block: `Summary Footprint: N UNIT` and what follows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummaryFootprint {
    /// 1-based line of `Summary Footprint:`.
    pub line: usize,
    /// De-duplicated: less than the sum of the processes when they share memory.
    pub footprint: Size,
    /// The summary's category table, when printed.
    pub table: Option<CategoryTable>,
    /// The summary's `Auxiliary data:` lines.
    pub auxiliary: Vec<AuxEntry>,
}

/// One process's block, opened by `NAME [PID]: 64-bit    Footprint: N UNIT (P bytes per page)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessFootprint {
    /// 1-based line of the block's opening line.
    pub line: usize,
    /// The process name as printed.
    pub name: String,
    /// The process id.
    pub pid: i32,
    /// `64-bit`.
    pub arch: String,
    /// The headline `Footprint:`; it can differ from `phys_footprint` below.
    pub footprint: Size,
    /// Page size of the process in bytes (`P bytes per page`).
    pub page_size: u64,
    /// The process's own memory by category; `None` with `--noCategories`.
    pub table: Option<CategoryTable>,
    /// `Shared with …:` blocks inside this process's block.
    pub shared: Vec<SharedBlock>,
    /// `Auxiliary data:` lines, e.g. `phys_footprint`, `phys_footprint_peak`.
    pub auxiliary: Vec<AuxEntry>,
}

/// `Shared with NAME [PID], …:` and the category table under it, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SharedBlock {
    /// 1-based line of the `Shared with` line.
    pub line: usize,
    /// The processes named, in the order printed.
    pub with: Vec<ProcessRef>,
    /// The memory shared with them by category, when a table follows.
    pub table: Option<CategoryTable>,
}

/// A process named in a `Shared with` line: `NAME [PID]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessRef {
    /// The process name as printed.
    pub name: String,
    /// The process id.
    pub pid: i32,
}

/// `Dirty … Regions Category`, its rows and the TOTAL row under the closing rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CategoryTable {
    /// The header's line.
    pub line: usize,
    /// The header's column names as printed, `Category` last.
    pub columns: Vec<String>,
    /// The category rows, in the order printed.
    pub rows: Vec<CategoryRow>,
    /// The `TOTAL` row; `None` when the table has none.
    pub total: Option<CategoryRow>,
}

/// One row of a category table: the sizes of one memory category.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CategoryRow {
    /// 1-based line of the row.
    pub line: usize,
    /// The category as printed (e.g. `MALLOC_SMALL`, `mapped file`); `TOTAL` for the total row.
    pub category: String,
    /// `Dirty`: memory that counts toward the footprint.
    pub dirty: Size,
    /// `(Swapped)`: swapped or compressed memory, a part of `dirty`.
    pub swapped: Option<Size>,
    /// `Clean`: memory that can be dropped and read back from its file.
    pub clean: Size,
    /// `Reclaimable`: memory the process marked reusable or purgeable.
    pub reclaimable: Size,
    /// `(Wired)`.
    pub wired: Option<Size>,
    /// `Regions`: the number of VM regions in the category.
    pub regions: u64,
}

/// An `Auxiliary data:` line: `name: N UNIT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuxEntry {
    /// 1-based line of the entry.
    pub line: usize,
    /// The name as printed (e.g. `phys_footprint`, `phys_footprint_peak`).
    pub name: String,
    /// The size printed after it.
    pub size: Size,
}

impl ProcessFootprint {
    /// The size of the auxiliary entry `name`; `None` when the block has none.
    pub fn auxiliary(&self, name: &str) -> Option<&Size> {
        self.auxiliary
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.size)
    }

    /// The auxiliary `phys_footprint` in bytes (the kernel's `phys_footprint`), if printed.
    pub fn phys_footprint(&self) -> Option<u64> {
        self.auxiliary("phys_footprint").map(|s| s.bytes)
    }

    /// The auxiliary `phys_footprint_peak` in bytes (the lifetime peak), if printed.
    pub fn phys_footprint_peak(&self) -> Option<u64> {
        self.auxiliary("phys_footprint_peak").map(|s| s.bytes)
    }
}

impl CategoryTable {
    /// The first row whose category is `category`.
    pub fn row(&self, category: &str) -> Option<&CategoryRow> {
        self.rows.iter().find(|r| r.category == category)
    }
}

/// A category table column, as the header names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Dirty,
    Swapped,
    Clean,
    Reclaimable,
    Wired,
    Regions,
}

const COLUMNS: [(&str, Col); 6] = [
    ("Dirty", Col::Dirty),
    ("(Swapped)", Col::Swapped),
    ("Clean", Col::Clean),
    ("Reclaimable", Col::Reclaimable),
    ("(Wired)", Col::Wired),
    ("Regions", Col::Regions),
];
const REQUIRED: [Col; 4] = [Col::Dirty, Col::Clean, Col::Reclaimable, Col::Regions];
/// The units of `-f formatted` and `-f bytes` (`Size::parse_number_unit`).
const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
const KNOWN: &str = "Dirty, (Swapped), Clean, Reclaimable, (Wired), Regions, Category";

/// Which block a table or `Shared with` line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Process(usize),
    /// A shared block inside process `.0`, index `.1`.
    ProcessShared(usize, usize),
    GroupShared(usize),
    Summary,
}

/// What the previous non-blank line was, to tell a `=` rule that opens a
/// block from the one that closes a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Other,
    Header,
    OpeningRule,
}

/// The category table being read: its columns and how many `---` rules so far.
struct OpenTable {
    columns: Vec<Col>,
    rules: u8,
}

/// Parse a `footprint` capture. Fails on a line it does not understand (unless
/// lenient), on a malformed block structure (e.g. a second TOTAL row), and when no
/// process block is found.
pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<Footprint>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut out = Footprint {
        processes: Vec::new(),
        shared: Vec::new(),
        summary: None,
    };
    let mut target: Option<Target> = None;
    let mut open: Option<OpenTable> = None;
    let mut in_auxiliary = false;
    let mut prev = Prev::Other;
    while let Some((no, line)) = lines.next_line() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let was = std::mem::replace(&mut prev, Prev::Other);
        if t.chars().all(|c| c == '=') {
            prev = if was == Prev::Header {
                Prev::Other
            } else {
                Prev::OpeningRule
            };
            continue;
        }
        if t.starts_with("Found process ") {
            continue;
        }
        if let Some(p) = process_header(no, t) {
            if out.summary.is_some() {
                return Err(fatal(no, line, "a process after 'Summary Footprint:'"));
            }
            out.processes.push(p);
            target = Some(Target::Process(out.processes.len() - 1));
            (open, in_auxiliary, prev) = (None, false, Prev::Header);
            continue;
        }
        if let Some(rest) = t.strip_prefix("Summary Footprint: ") {
            if out.processes.is_empty() || out.summary.is_some() {
                return Err(fatal(
                    no,
                    line,
                    "'Summary Footprint:' must follow the processes, once",
                ));
            }
            let Some(footprint) = rest
                .split_once(' ')
                .and_then(|(n, u)| Size::parse_number_unit(n, u))
            else {
                return Err(fatal(no, line, "expected 'Summary Footprint: N UNIT'"));
            };
            out.summary = Some(SummaryFootprint {
                line: no,
                footprint,
                table: None,
                auxiliary: Vec::new(),
            });
            target = Some(Target::Summary);
            (open, in_auxiliary, prev) = (None, false, Prev::Header);
            continue;
        }
        if let Some(list) = t.strip_prefix("Shared with ") {
            let with = match shared_with(list) {
                Ok(with) => with,
                Err(reason) => {
                    lines.unknown(no, line, reason)?;
                    continue;
                }
            };
            let block = SharedBlock {
                line: no,
                with,
                table: None,
            };
            let current = match target {
                Some(Target::Process(p) | Target::ProcessShared(p, _)) => Some(p),
                _ => None,
            };
            let names_current =
                current.is_some_and(|p| block.with.iter().any(|w| w.pid == out.processes[p].pid));
            target = Some(match current {
                Some(p) if was != Prev::OpeningRule && !names_current => {
                    let shared = &mut out.processes[p].shared;
                    shared.push(block);
                    Target::ProcessShared(p, shared.len() - 1)
                }
                _ => {
                    out.shared.push(block);
                    prev = Prev::Header;
                    Target::GroupShared(out.shared.len() - 1)
                }
            });
            (open, in_auxiliary) = (None, false);
            continue;
        }
        let Some(at) = target else {
            lines.unknown(no, line, "expected 'NAME [PID]: … Footprint: …' first")?;
            continue;
        };
        if let Some(header) = category_header(t) {
            let columns = match header {
                Ok(columns) => columns,
                Err(reason) => {
                    lines.unknown(no, line, reason)?;
                    continue;
                }
            };
            let Some(slot) = table_slot(&mut out, at) else {
                continue;
            };
            if slot.is_some() {
                return Err(fatal(no, line, "a second category table in one block"));
            }
            *slot = Some(CategoryTable {
                line: no,
                columns: t.split_whitespace().map(str::to_string).collect(),
                rows: Vec::new(),
                total: None,
            });
            (open, in_auxiliary) = (Some(OpenTable { columns, rules: 0 }), false);
            continue;
        }
        if t == "Auxiliary data:" {
            // Auxiliary data belongs to the process (after its shared blocks) or the summary.
            target = match at {
                Target::ProcessShared(p, _) => Some(Target::Process(p)),
                Target::GroupShared(_) => {
                    lines.unknown(
                        no,
                        line,
                        "'Auxiliary data:' belongs to a process or the summary, not to memory shared by the group",
                    )?;
                    continue;
                }
                other => Some(other),
            };
            (open, in_auxiliary) = (None, true);
            continue;
        }
        if in_auxiliary {
            match aux_line(no, t) {
                Some(a) => match at {
                    Target::Process(p) => out.processes[p].auxiliary.push(a),
                    Target::Summary => {
                        if let Some(s) = out.summary.as_mut() {
                            s.auxiliary.push(a);
                        }
                    }
                    // Not reached: "Auxiliary data:" moved the target off these.
                    Target::ProcessShared(..) | Target::GroupShared(_) => {}
                },
                None => lines.unknown(no, line, "expected 'name: N UNIT'")?,
            }
            continue;
        }
        let Some(table) = open.as_mut() else {
            lines.unknown(no, line, "not a footprint line")?;
            continue;
        };
        if t.split_whitespace().all(|w| w == "---") {
            table.rules += 1;
            if table.rules > 2 {
                lines.unknown(no, line, "a third --- rule in one category table")?;
            }
            continue;
        }
        let row = match table.rules {
            0 => Err("a category row before the --- rule under the header".to_string()),
            _ => category_row(no, t, &table.columns),
        };
        let row = match row {
            Ok(row) => row,
            Err(reason) => {
                lines.unknown(no, line, reason)?;
                continue;
            }
        };
        let closing = table.rules >= 2;
        let Some(Some(cats)) = table_slot(&mut out, at) else {
            continue;
        };
        if !closing {
            cats.rows.push(row);
        } else if row.category != "TOTAL" {
            lines.unknown(
                no,
                line,
                "expected the TOTAL row under the closing --- rule",
            )?;
        } else if cats.total.replace(row).is_some() {
            return Err(fatal(no, line, "a second TOTAL row"));
        }
    }
    if out.processes.is_empty() {
        return Err(CaptureError::whole(
            "no 'NAME [PID]: … Footprint: N UNIT' line",
        ));
    }
    Ok(lines.finish(out))
}

/// The table slot of the block `at`; `None` only for a summary not yet read.
fn table_slot(out: &mut Footprint, at: Target) -> Option<&mut Option<CategoryTable>> {
    Some(match at {
        Target::Process(p) => &mut out.processes[p].table,
        Target::ProcessShared(p, s) => &mut out.processes[p].shared[s].table,
        Target::GroupShared(s) => &mut out.shared[s].table,
        Target::Summary => &mut out.summary.as_mut()?.table,
    })
}

/// `sleep [39461]: 64-bit    Footprint: 832 KB (16384 bytes per page)`
fn process_header(no: usize, t: &str) -> Option<ProcessFootprint> {
    let (left, right) = t.split_once("]: ")?;
    let (name, pid) = left.rsplit_once(" [")?;
    let (arch, rest) = right.split_once("Footprint: ")?;
    let (amount, page) = rest.split_once(" (")?;
    let page = page.strip_suffix(" bytes per page)")?;
    let (number, unit) = amount.split_once(' ')?;
    Some(ProcessFootprint {
        line: no,
        name: name.to_string(),
        pid: pid.parse().ok()?,
        arch: arch.trim().to_string(),
        footprint: Size::parse_number_unit(number, unit)?,
        page_size: parse_u64(page)?,
        table: None,
        shared: Vec::new(),
        auxiliary: Vec::new(),
    })
}

/// `zsh [25484]:` or `UnrealEditor [11916], zsh [25484]:` (after `Shared with `).
fn shared_with(list: &str) -> Result<Vec<ProcessRef>, String> {
    let want = "expected 'Shared with NAME [PID], …:'";
    let list = list
        .strip_suffix("]:")
        .ok_or_else(|| format!("{want}: no ']:' at the end"))?;
    list.split("], ")
        .map(|one| {
            let (name, pid) = one
                .rsplit_once(" [")
                .ok_or_else(|| format!("{want}: no ' [PID]' in {one:?}"))?;
            let pid = parse_u64(pid)
                .and_then(|p| i32::try_from(p).ok())
                .ok_or_else(|| format!("{want}: {pid:?} is not a pid"))?;
            if name.is_empty() {
                return Err(format!("{want}: a pid without a name"));
            }
            Ok(ProcessRef {
                name: name.to_string(),
                pid,
            })
        })
        .collect()
}

/// `Dirty  (Swapped)  Clean  Reclaimable  (Wired)  Regions  Category`: the
/// columns, or why the header is wrong; `None` if `t` is not a header.
fn category_header(t: &str) -> Option<Result<Vec<Col>, String>> {
    let words: Vec<&str> = t.split_whitespace().collect();
    let (&"Dirty", [middle @ .., "Category"]) = (words.first()?, &words[1..]) else {
        return None;
    };
    let mut columns = vec![Col::Dirty];
    for w in middle {
        let Some(&(_, col)) = COLUMNS.iter().find(|(n, _)| n == w) else {
            return Some(Err(format!(
                "unknown column {w:?} in the category table header (known: {KNOWN})"
            )));
        };
        if columns.contains(&col) {
            return Some(Err(format!(
                "column {w:?} twice in the category table header"
            )));
        }
        columns.push(col);
    }
    if let Some(missing) = REQUIRED.iter().find(|c| !columns.contains(c)) {
        let name = COLUMNS
            .iter()
            .find(|(_, c)| c == missing)
            .map_or("?", |(n, _)| n);
        return Some(Err(format!(
            "the category table header has no {name} column"
        )));
    }
    Some(Ok(columns))
}

/// The first whitespace-separated word of `s` and the text after it.
fn next_word(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if s.is_empty() {
        return None;
    }
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    Some((&s[..end], &s[end..]))
}

/// ` 240 KB        0 B          0 B          8    MALLOC metadata`: one
/// value per column in the header's order, then the category.
fn category_row(no: usize, t: &str, columns: &[Col]) -> Result<CategoryRow, String> {
    let mut rest = t;
    let mut sizes: Vec<(Col, Size)> = Vec::new();
    let mut regions = None;
    for &col in columns {
        let name = COLUMNS
            .iter()
            .find(|(_, c)| *c == col)
            .map_or("?", |(n, _)| n);
        if col == Col::Regions {
            let (word, after) = next_word(rest).ok_or(format!("no value under {name}"))?;
            regions = Some(parse_u64(word).ok_or(format!("{word:?} under {name} is not a count"))?);
            rest = after;
            continue;
        }
        let (number, after) = next_word(rest).ok_or(format!("no value under {name}"))?;
        let (unit, after) =
            next_word(after).ok_or(format!("no unit after {number:?} under {name}"))?;
        let size = Size::parse_number_unit(number, unit).ok_or(format!(
            "{number:?} {unit:?} under {name} is not a size (N B, KB, MB, GB or TB)"
        ))?;
        sizes.push((col, size));
        rest = after;
    }
    let category = rest.trim();
    if category.is_empty() {
        return Err("a row without its category".to_string());
    }
    // A unit or a number where the category starts: the row has more values
    // than the header has columns (a column missing from the header).
    let first = category.split_whitespace().next().unwrap_or("");
    if UNITS.contains(&first) || parse_u64(first).is_some() {
        return Err(format!(
            "more values than the header's {} columns (category would start with {first:?})",
            columns.len() + 1
        ));
    }
    let mut take = |col: Col| {
        sizes
            .iter()
            .position(|(c, _)| *c == col)
            .map(|i| sizes.remove(i).1)
    };
    let (dirty, clean, reclaimable) = (take(Col::Dirty), take(Col::Clean), take(Col::Reclaimable));
    let (Some(dirty), Some(clean), Some(reclaimable), Some(regions)) =
        (dirty, clean, reclaimable, regions)
    else {
        // category_header guarantees these columns.
        return Err("a category table without its required columns".to_string());
    };
    Ok(CategoryRow {
        line: no,
        category: category.to_string(),
        dirty,
        swapped: take(Col::Swapped),
        clean,
        reclaimable,
        wired: take(Col::Wired),
        regions,
    })
}

/// `phys_footprint: 848 KB`
fn aux_line(no: usize, t: &str) -> Option<AuxEntry> {
    let (name, value) = t.split_once(':')?;
    let (number, unit) = value.trim().split_once(' ')?;
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some(())?;
    Some(AuxEntry {
        line: no,
        name: name.to_string(),
        size: Size::parse_number_unit(number, unit.trim())?,
    })
}
