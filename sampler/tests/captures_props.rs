//! No parser panics: random text, every real capture truncated anywhere, and
//! captures with a character replaced or a line inserted, strict and lenient.
//! Plus the errors a truncated or garbled capture gives.

use proptest::prelude::*;
use sampler::captures::{CaptureError, ParseOptions, Tool, parse};
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
            assert_eq!(reason, "row does not fit the table's columns");
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
