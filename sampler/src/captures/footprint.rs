//! `footprint PID…`: per process, the headline footprint, the dirty / clean /
//! reclaimable table by category, its TOTAL row and the auxiliary data
//! (`phys_footprint`, `phys_footprint_peak`). Units are binary (`KB` = 1024).
//!
//! With more than one process the tool ends with `Summary Footprint:`, the
//! footprint of all of them with shared memory counted once, optionally
//! followed by its own category table and auxiliary data.

use super::lines::{Lines, fatal, parse_u64};
use super::{CaptureError, ParseOptions, Parsed, Size};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Footprint {
    pub processes: Vec<ProcessFootprint>,
    /// Present when the capture covers several processes.
    pub summary: Option<SummaryFootprint>,
}

/// The multi-process block: `Summary Footprint: N UNIT` and what follows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummaryFootprint {
    pub line: usize,
    /// De-duplicated: less than the sum of the processes when they share memory.
    pub footprint: Size,
    pub categories: Vec<CategoryRow>,
    pub total: Option<CategoryRow>,
    pub auxiliary: Vec<AuxEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessFootprint {
    pub line: usize,
    pub name: String,
    pub pid: i32,
    /// `64-bit`.
    pub arch: String,
    /// The headline `Footprint:`; it can differ from `phys_footprint` below.
    pub footprint: Size,
    pub page_size: u64,
    pub categories: Vec<CategoryRow>,
    pub total: Option<CategoryRow>,
    /// `Auxiliary data:` lines, e.g. `phys_footprint`, `phys_footprint_peak`.
    pub auxiliary: Vec<AuxEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CategoryRow {
    pub line: usize,
    pub category: String,
    pub dirty: Size,
    pub clean: Size,
    pub reclaimable: Size,
    pub regions: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuxEntry {
    pub line: usize,
    pub name: String,
    pub size: Size,
}

impl ProcessFootprint {
    pub fn auxiliary(&self, name: &str) -> Option<&Size> {
        self.auxiliary
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.size)
    }

    pub fn phys_footprint(&self) -> Option<u64> {
        self.auxiliary("phys_footprint").map(|s| s.bytes)
    }

    pub fn phys_footprint_peak(&self) -> Option<u64> {
        self.auxiliary("phys_footprint_peak").map(|s| s.bytes)
    }
}

#[derive(PartialEq)]
enum Part {
    Start,
    Table,
    Total,
    Auxiliary,
}

/// Where table rows and auxiliary lines go: the latest process, or the summary.
struct Block<'a> {
    categories: &'a mut Vec<CategoryRow>,
    total: &'a mut Option<CategoryRow>,
    auxiliary: &'a mut Vec<AuxEntry>,
}

pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<Footprint>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut processes: Vec<ProcessFootprint> = Vec::new();
    let mut summary: Option<SummaryFootprint> = None;
    let mut part = Part::Start;
    while let Some((no, line)) = lines.next_line() {
        let t = line.trim();
        if t.is_empty() || t.chars().all(|c| c == '=') || t.starts_with("Found process ") {
            continue;
        }
        if let Some(p) = process_header(no, t) {
            if summary.is_some() {
                return Err(fatal(no, line, "a process after 'Summary Footprint:'"));
            }
            processes.push(p);
            part = Part::Start;
            continue;
        }
        if let Some(rest) = t.strip_prefix("Summary Footprint: ") {
            if processes.is_empty() || summary.is_some() {
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
            summary = Some(SummaryFootprint {
                line: no,
                footprint,
                categories: Vec::new(),
                total: None,
                auxiliary: Vec::new(),
            });
            part = Part::Start;
            continue;
        }
        let block = match (summary.as_mut(), processes.last_mut()) {
            (Some(s), _) => Block {
                categories: &mut s.categories,
                total: &mut s.total,
                auxiliary: &mut s.auxiliary,
            },
            (None, Some(p)) => Block {
                categories: &mut p.categories,
                total: &mut p.total,
                auxiliary: &mut p.auxiliary,
            },
            (None, None) => {
                lines.unknown(no, line, "expected 'NAME [PID]: … Footprint: …' first")?;
                continue;
            }
        };
        if t.split_whitespace()
            .eq(["Dirty", "Clean", "Reclaimable", "Regions", "Category"])
        {
            part = Part::Table;
            continue;
        }
        if t.split_whitespace().all(|w| w == "---") {
            if part == Part::Table && !block.categories.is_empty() {
                part = Part::Total;
            }
            continue;
        }
        if t == "Auxiliary data:" {
            part = Part::Auxiliary;
            continue;
        }
        match part {
            Part::Table | Part::Total => match category_row(no, t) {
                Some(row) if part == Part::Total => {
                    if block.total.replace(row).is_some() {
                        return Err(fatal(no, line, "a second TOTAL row"));
                    }
                }
                Some(row) => block.categories.push(row),
                None => lines.unknown(no, line, "expected 'SIZE SIZE SIZE REGIONS CATEGORY'")?,
            },
            Part::Auxiliary => match aux_line(no, t) {
                Some(a) => block.auxiliary.push(a),
                None => lines.unknown(no, line, "expected 'name: N UNIT'")?,
            },
            Part::Start => lines.unknown(no, line, "not a footprint line")?,
        }
    }
    if processes.is_empty() {
        return Err(CaptureError::whole(
            "no 'NAME [PID]: … Footprint: N UNIT' line",
        ));
    }
    Ok(lines.finish(Footprint { processes, summary }))
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
        categories: Vec::new(),
        total: None,
        auxiliary: Vec::new(),
    })
}

/// ` 240 KB        0 B          0 B          8    MALLOC metadata`
fn category_row(no: usize, t: &str) -> Option<CategoryRow> {
    let mut words = t.split_whitespace();
    let mut size = || {
        let number = words.next()?;
        Size::parse_number_unit(number, words.next()?)
    };
    let (dirty, clean, reclaimable) = (size()?, size()?, size()?);
    let regions = parse_u64(words.next()?)?;
    let category: Vec<&str> = words.collect();
    if category.is_empty() {
        return None;
    }
    Some(CategoryRow {
        line: no,
        category: category.join(" "),
        dirty,
        clean,
        reclaimable,
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
