//! `ps -o pid=,rss=,vsz=[,command=]` (no header: the columns are in that
//! order) or any `ps -o …` with its header line (columns named by it, the
//! command column last). RSS and VSZ are KiB on macOS and Linux.

use super::lines::{Lines, parse_u64};
use super::{CaptureError, ParseOptions, Parsed};
use serde::{Deserialize, Serialize};

/// A parsed `ps -o …` capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ps {
    /// Column names, upper case (`PID`, `RSS`, `VSZ`, …).
    pub columns: Vec<String>,
    /// One row per process line, in order.
    pub rows: Vec<PsRow>,
}

/// One process line of `ps`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PsRow {
    /// 1-based line of the row.
    pub line: usize,
    /// The `PID` column.
    pub pid: i32,
    /// The `RSS` column (KiB) in bytes; `None` when there is no such column.
    pub rss_bytes: Option<u64>,
    /// The `VSZ` column (KiB) in bytes; `None` when there is no such column.
    pub vsz_bytes: Option<u64>,
    /// The command column (`COMMAND`, `COMM`, `ARGS` or `CMD`, always last), its words
    /// joined by single spaces; `None` without one.
    pub command: Option<String>,
    /// Every column's text as printed, in column order.
    pub fields: Vec<String>,
}

const COMMAND_COLUMNS: [&str; 4] = ["COMMAND", "COMM", "ARGS", "CMD"];

/// Parse a `ps` capture, with or without its header line. Fails on a row that does not
/// match the columns (unless lenient) and when there is no row.
pub fn parse(text: &str, opts: ParseOptions) -> Result<Parsed<Ps>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut columns: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    while let Some((no, line)) = lines.next_line() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = words.first() else {
            continue;
        };
        if columns.is_none() && rows.is_empty() && first.eq_ignore_ascii_case("PID") {
            columns = Some(words.iter().map(|w| w.to_ascii_uppercase()).collect());
            continue;
        }
        let cols = columns.get_or_insert_with(|| {
            let mut c = vec!["PID".to_string(), "RSS".to_string(), "VSZ".to_string()];
            if words.len() > 3 {
                c.push("COMMAND".to_string());
            }
            c
        });
        match row(no, &words, cols) {
            Some(r) => rows.push(r),
            None => lines.unknown(no, line, "row does not match the columns PID RSS VSZ …")?,
        }
    }
    if rows.is_empty() {
        return Err(CaptureError::whole("no process rows"));
    }
    Ok(lines.finish(Ps {
        columns: columns.unwrap_or_default(),
        rows,
    }))
}

fn row(no: usize, words: &[&str], columns: &[String]) -> Option<PsRow> {
    let has_command = columns
        .last()
        .is_some_and(|c| COMMAND_COLUMNS.contains(&c.as_str()));
    let fixed = columns.len() - usize::from(has_command);
    if words.len() < columns.len() || (!has_command && words.len() != columns.len()) {
        return None;
    }
    let mut fields: Vec<String> = words[..fixed].iter().map(|w| w.to_string()).collect();
    let command = has_command.then(|| words[fixed..].join(" "));
    fields.extend(command.clone());
    let get = |name: &str| columns.iter().position(|c| c == name).map(|i| words[i]);
    let kib = |name: &str| -> Option<Option<u64>> {
        match get(name) {
            None => Some(None),
            Some(w) => Some(Some(parse_u64(w)?.checked_mul(1024)?)),
        }
    };
    Some(PsRow {
        line: no,
        pid: get("PID")?.parse().ok().filter(|p: &i32| *p >= 0)?,
        rss_bytes: kib("RSS")?,
        vsz_bytes: kib("VSZ")?,
        command,
        fields,
    })
}
