//! No parser panics: random text, every real capture truncated anywhere, and
//! captures with a character replaced or a line inserted, strict and lenient.
//! Plus the errors a truncated or garbled capture gives, and two properties
//! of the table parsers on the real captures: a blanked vmmap cell is `None`
//! under a percentage and an error naming its column anywhere else, and a
//! `(Swapped)` column added to a footprint table reads back exactly.

use proptest::prelude::*;
use sampler::captures::vmmap::{self, ColumnKind};
use sampler::captures::{CaptureError, ParseOptions, Tool, footprint, parse};
use std::path::PathBuf;

fn fixtures() -> Vec<(Tool, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures");
    let mut out = Vec::new();
    for tool in Tool::ALL {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(tool.name()))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        paths.sort();
        for p in paths {
            out.push((tool, std::fs::read_to_string(p).unwrap()));
        }
    }
    out
}

/// Parse both ways; the point is that this returns at all.
fn both(tool: Tool, text: &str) {
    let _ = parse(tool, text, ParseOptions::strict());
    let _ = parse(tool, text, ParseOptions::lenient());
    let with_page = ParseOptions {
        lenient: true,
        page_size: Some(u64::MAX),
    };
    let _ = parse(tool, text, with_page);
}

fn char_floor(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn tool_strategy() -> impl Strategy<Value = Tool> {
    proptest::sample::select(Tool::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(tool in tool_strategy(), text in "\\PC{0,300}") {
        both(tool, &text);
    }

    #[test]
    fn random_lines_of_tool_words_never_panic(
        tool in tool_strategy(),
        lines in proptest::collection::vec(
            "(Pages free|some|full|VmRSS|Rss|MemTotal|TOTAL|===|---|free|PID|Physical footprint|anon)?[ :=.\\t0-9KMGB%a-z\\[\\]()-]{0,40}",
            0..12,
        ),
    ) {
        both(tool, &lines.join("\n"));
    }

    #[test]
    fn truncated_captures_never_panic(pick in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let all = fixtures();
        let (tool, text) = pick.get(&all);
        let end = char_floor(text, cut.index(text.len() + 1));
        both(*tool, &text[..end]);
        both(*tool, &text[end..]);
    }

    #[test]
    fn garbled_captures_never_panic(
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        with in any::<char>(),
        line in "\\PC{0,60}",
    ) {
        let all = fixtures();
        let (tool, text) = pick.get(&all);
        let i = char_floor(text, at.index(text.len() + 1));
        let mut replaced = text.clone();
        if i < text.len() {
            let next = i + text[i..].chars().next().map_or(0, char::len_utf8);
            replaced.replace_range(i..next, &with.to_string());
        }
        both(*tool, &replaced);
        let mut inserted = text.clone();
        inserted.insert_str(i, &format!("\n{line}\n"));
        both(*tool, &inserted);
    }
}

fn tool_fixtures(tool: Tool) -> Vec<String> {
    fixtures()
        .into_iter()
        .filter(|(t, _)| *t == tool)
        .map(|(_, s)| s)
        .collect()
}

/// Every (table, row, column) of a parsed vmmap capture, rows and totals.
fn vmmap_cells(v: &vmmap::VmmapSummary) -> Vec<(bool, usize, usize)> {
    let mut out = Vec::new();
    for (zones, table) in [(false, &v.regions), (true, &v.malloc_zones)] {
        let Some(t) = table else { continue };
        for (r, row) in t.rows.iter().chain(&t.totals).enumerate() {
            for (c, cell) in row.cells.iter().enumerate() {
                if cell.is_some() {
                    out.push((zones, r, c));
                }
            }
        }
    }
    out
}

/// Where each whitespace-separated word of `line` starts and ends.
fn word_spans(line: &str) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, ch) in line.char_indices().chain([(line.len(), ' ')]) {
        match (ch.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Where the second word of a footprint table row ends.
fn second_word_end(line: &str) -> Option<usize> {
    word_spans(line).get(1).map(|&(_, end)| end)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_blanked_vmmap_cell_is_none_only_under_a_percentage(
        pick in any::<prop::sample::Index>(),
        cell in any::<prop::sample::Index>(),
        percentages_only in any::<bool>(),
    ) {
        let all = tool_fixtures(Tool::VmmapSummary);
        let text = pick.get(&all);
        let parsed = vmmap::parse(text, ParseOptions::strict()).unwrap().value;
        let table_of = |zones: bool| if zones { parsed.malloc_zones.as_ref() } else { parsed.regions.as_ref() };
        // Percentages are a few cells among hundreds: pick among them half the time.
        let all_cells = vmmap_cells(&parsed);
        let percent: Vec<_> = all_cells
            .iter()
            .copied()
            .filter(|&(z, _, c)| table_of(z).unwrap().columns[c].kind == ColumnKind::Percent)
            .collect();
        let cells = if percentages_only && !percent.is_empty() { percent } else { all_cells };
        let &(zones, r, c) = cell.get(&cells);
        let table = table_of(zones).unwrap();
        let row = table.rows.iter().chain(&table.totals).nth(r).unwrap();
        let raw = &row.cells[c].as_ref().unwrap().raw;
        // Blank the token in place: same length, same line.
        let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        let line = &mut lines[row.line - 1];
        let words = word_spans(line);
        let present = row.cells.iter().filter(|x| x.is_some()).count();
        let index = row.cells[..=c].iter().filter(|x| x.is_some()).count() - 1;
        let detail_words = row.detail.as_deref().map_or(0, |d| d.split_whitespace().count());
        let first_value = words.len() - detail_words - present;
        let (start, end) = words[first_value + index];
        prop_assert_eq!(&line[start..end], raw.as_str());
        line.replace_range(start..end, &" ".repeat(end - start));
        let blanked = lines.join("\n");
        let result = vmmap::parse(&blanked, ParseOptions::strict());
        if table.columns[c].kind == ColumnKind::Percent {
            let mut want = parsed.clone();
            let t = if zones { want.malloc_zones.as_mut() } else { want.regions.as_mut() }.unwrap();
            let rows = t.rows.len();
            let target = if r < rows { &mut t.rows[r] } else { &mut t.totals[r - rows] };
            target.cells[c] = None;
            prop_assert_eq!(result.unwrap().value, want);
        } else {
            match result {
                Err(CaptureError::Line { line, reason, .. }) => {
                    prop_assert_eq!(line, row.line);
                    prop_assert!(reason.contains(&format!("{:?}", table.columns[c].name)), "{}", reason);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }

    #[test]
    fn an_added_swapped_column_reads_back(
        pick in any::<prop::sample::Index>(),
        kib in proptest::collection::vec(0u32..100_000, 64),
    ) {
        let all: Vec<String> = tool_fixtures(Tool::Footprint)
            .into_iter()
            .filter(|s| s.contains("Category"))
            .collect();
        let text = pick.get(&all);
        let before = footprint::parse(text, ParseOptions::strict()).unwrap().value;
        let mut added = Vec::new();
        let mut in_table = false;
        let mut out = Vec::new();
        for line in text.split('\n') {
            let t = line.trim();
            if t.starts_with("Dirty") && t.ends_with("Category") {
                in_table = true;
                out.push(line.replacen("Dirty", "Dirty  (Swapped)", 1));
            } else if in_table && !t.is_empty() && t.split_whitespace().all(|w| w == "---") {
                out.push(format!("{line}    ---"));
            } else if in_table && !t.is_empty() {
                let n = kib[added.len() % kib.len()];
                let at = second_word_end(line).unwrap();
                out.push(format!("{} {n} KB{}", &line[..at], &line[at..]));
                added.push(u64::from(n) * 1024);
            } else {
                in_table = false;
                out.push(line.to_string());
            }
        }
        let after = footprint::parse(&out.join("\n"), ParseOptions::strict()).unwrap().value;
        let mut read = Vec::new();
        let mut unswapped = after.clone();
        for p in &mut unswapped.processes {
            let t = p.table.as_mut().unwrap();
            t.columns.remove(1);
            for row in t.rows.iter_mut().chain(t.total.as_mut()) {
                read.push(row.swapped.take().unwrap().bytes);
            }
        }
        prop_assert_eq!(read, added);
        prop_assert_eq!(unswapped, before);
    }
}

#[test]
fn a_truncated_row_is_an_error_naming_its_line() {
    let all = fixtures();
    let (_, vmmap) = all
        .iter()
        .find(|(t, s)| *t == Tool::VmmapSummary && s.contains("IOSurface"))
        .unwrap();
    let cut = vmmap.find("IOSurface  ").unwrap() + 20;
    let line_no = vmmap[..cut].lines().count();
    let err = parse(Tool::VmmapSummary, &vmmap[..cut], ParseOptions::strict()).unwrap_err();
    match err {
        CaptureError::Line {
            line, ref reason, ..
        } => {
            assert_eq!(line, line_no);
            assert!(
                reason
                    .starts_with("no value under column \"VIRTUAL SIZE\": the row ends at byte 9"),
                "{reason}"
            );
        }
        other => panic!("{other}"),
    }
    // Lenient: the cut row is listed, everything before it kept.
    let ok = parse(Tool::VmmapSummary, &vmmap[..cut], ParseOptions::lenient()).unwrap();
    assert_eq!(ok.skipped.len(), 1);
    assert_eq!(ok.skipped[0].line, line_no);
}

#[test]
fn garbled_values_are_errors_not_zeros() {
    let meminfo = "MemTotal:       24683652 kB\nMemFree:        lots kB\n";
    let err = parse(Tool::Meminfo, meminfo, ParseOptions::strict()).unwrap_err();
    assert!(matches!(err, CaptureError::Line { line: 2, .. }), "{err}");
    let status_overflow = "Name:\tx\nVmRSS:\t99999999999999999999 kB\n";
    let err = parse(Tool::ProcStatus, status_overflow, ParseOptions::strict()).unwrap_err();
    assert!(matches!(err, CaptureError::Line { line: 2, .. }), "{err}");
    let psi = "some avg10=0.00 avg60=0.00 avg300=0.00\n";
    let err = parse(Tool::Pressure, psi, ParseOptions::strict()).unwrap_err();
    assert!(
        err.to_string().starts_with("line 1: expected 'avg10="),
        "{err}"
    );
    let empty = parse(Tool::VmStat, "", ParseOptions::lenient()).unwrap_err();
    assert!(empty.to_string().contains("banner"), "{empty}");
    let truncated_pressure = "The system has 17179869184 (4194304 pages with a page";
    let err = parse(
        Tool::MemoryPressure,
        truncated_pressure,
        ParseOptions::strict(),
    )
    .unwrap_err();
    assert!(matches!(err, CaptureError::Line { line: 1, .. }), "{err}");
}
