//! `report.html` over a small committed run directory (a real tiny.en run
//! with a control and a gated candidate; see `tests/runs/README.md`):
//! the receipt is assembled from the raw files, the page rendered, and its
//! normalised form compared with `tests/golden/quickstart-mini.html`.
//! Re-bless with `MEMQUAL_BLESS=1 cargo test -p render --test it page`.

use render::html::{PageData, render};
use run_dir::{Access, RunDir};
use std::path::{Path, PathBuf};

fn committed_run() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/runs/quickstart-mini")
}

fn page() -> (reports::Receipt, String) {
    let run = RunDir::open(&committed_run(), Access::Read).expect("the committed run opens");
    let receipt = reports::assemble(&run).expect("the receipt assembles from the raw files");
    let data = PageData::read(&run, &receipt).expect("series and latencies read");
    let html = render(&receipt, &data);
    (receipt, html)
}

/// Each inline SVG replaced by what it draws: its element counts and its
/// texts, in order. The coordinates plotters writes are left out, so the
/// golden file changes when the page says something else, not when a
/// plotting library moves a pixel.
fn normalise(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 4);
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find("</svg>") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let svg = &rest[start..start + len];
        out.push_str(&summarise_svg(svg));
        rest = &rest[start + len + "</svg>".len()..];
    }
    out.push_str(rest);
    // One tag per line keeps the golden file's diffs readable.
    out.replace("><", ">\n<")
}

fn summarise_svg(svg: &str) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for element in [
        "rect", "circle", "polyline", "path", "line", "polygon", "text",
    ] {
        let n = svg.matches(&format!("<{element} ")).count()
            + svg.matches(&format!("<{element}>")).count();
        if n > 0 {
            counts.insert(element, n);
        }
    }
    let texts: Vec<String> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect();
    let red = svg.matches("stroke=\"#C80000\"").count();
    format!(
        "<svg-summary elements=\"{counts:?}\" threshold-strokes=\"{red}\">{}</svg-summary>",
        texts.join(" | ")
    )
}

#[test]
fn the_page_matches_its_golden_file() {
    let (_, html) = page();
    let normalised = normalise(&html);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/quickstart-mini.html");
    if std::env::var_os("MEMQUAL_BLESS").is_some() {
        std::fs::write(&golden, &normalised).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    if expected != normalised {
        let first = expected
            .lines()
            .zip(normalised.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(normalised.lines().count()));
        panic!(
            "report.html differs from {} from line {}:\n  golden: {:?}\n  now:    {:?}\n\
             If the change is intended, re-bless: MEMQUAL_BLESS=1 cargo test -p render --test it page",
            golden.display(),
            first + 1,
            expected.lines().nth(first),
            normalised.lines().nth(first)
        );
    }
}

#[test]
fn the_failing_gate_its_limit_and_its_cause_come_first() {
    let (receipt, html) = page();
    let gates = receipt.gates.as_ref().expect("the run has gates");
    let memory = gates.arms[0]
        .gates
        .iter()
        .find(|g| g.kind == "memory")
        .expect("a memory gate");
    let check = &memory.checks[0];
    let (measured, control, limit) = (
        check.measured.unwrap(),
        check.control.unwrap(),
        check.threshold.unwrap(),
    );
    // The extra state costs well over the 5 % the gate allows.
    assert!(measured > limit, "{measured} ≤ {limit}");
    assert_eq!(limit, control * 1.05);
    let mib = |b: f64| b / 1048576.0;
    let headline = format!(
        "is {:.1} MiB, {:+.1} MiB ({:+.1} %) against control fp16-one-state",
        mib(measured),
        mib(measured - control),
        (measured - control) / control * 100.0
    );
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} is not on the page"))
    };
    let comparison = at("<section id=\"comparison\">");
    assert!(at("<section id=\"verdict\">") < comparison);
    assert!(
        comparison < at(&headline),
        "the headline is in the comparison"
    );
    let limit_label = format!("limit {:.1} MiB", mib(limit));
    assert!(at(&limit_label) < at("<section id=\"checks\">"));
    // Why: the logged state buffers, from the receipt's comparison.
    let logged = receipt.comparisons[0].logged_state_bytes_delta.unwrap() as f64;
    assert!(
        logged > 100.0 * 1048576.0,
        "one tiny.en state logs > 100 MiB"
    );
    assert!(at(&format!("whisper.cpp logged {:+.1} MiB", mib(logged))) < at("id=\"matrix\""));
    // The differing topology key is shown; the raw runtime rows are folded.
    let diff = &html[at("<div id=\"identity-diff\">")..];
    assert!(diff.contains("runtime.state_count"), "state_count differs");
    assert!(html.contains("<details class=\"runtime\">"));
}

#[test]
fn values_are_escaped_by_the_templates() {
    let (mut receipt, _) = page();
    receipt.run.protocol_name = "<script>alert(1)</script>".into();
    receipt.arms[0].failure = vec!["a \"quoted\" & <b>bold</b> reason".into()];
    let html = render(&receipt, &PageData::default());
    assert!(!html.contains("<script>"), "no raw script tag");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("a &quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt; reason"));
}

#[test]
fn the_matrix_and_the_identity_diff_name_the_one_real_difference() {
    use render::html::compare;
    let (receipt, _) = page();
    let m = compare::matrix(&receipt);
    let names: Vec<&str> = m.columns.iter().map(|c| c.name).collect();
    let peak = names.iter().position(|n| *n == "state_ready peak").unwrap();
    let logged = names
        .iter()
        .position(|n| *n == "logged state buffers")
        .unwrap();
    let [control, candidate] = &m.rows[..] else {
        panic!("two arms: {:?}", m.rows)
    };
    assert!(control.is_control && control.control.is_none());
    assert_eq!(candidate.control.as_deref(), Some("fp16-one-state"));
    let check = &receipt.gates.as_ref().unwrap().arms[0].gates[0].checks[0];
    let cell = candidate.cells[peak];
    assert_eq!(cell.value, check.measured);
    assert_eq!(control.cells[peak].value, check.control);
    assert_eq!(
        cell.delta,
        Some(check.measured.unwrap() - check.control.unwrap())
    );
    assert!(control.cells[peak].delta.is_none(), "no Δ for the control");
    // The extra state doubles the logged state buffers.
    assert_eq!(candidate.cells[logged].pct.map(|p| p.round()), Some(100.0));
    let diff = compare::identity_diff(&receipt);
    let keys: Vec<&str> = diff.differing.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "runtime.state_count",
            "runtime.topology.states[1]",
            "spec.worker.extra_states"
        ]
    );
    assert_eq!(
        diff.differing[0].1,
        [Some("1".to_string()), Some("2".to_string())]
    );
    assert!(
        diff.same
            .iter()
            .any(|(k, _)| k == "runtime.topology.states[0]")
    );
}

#[test]
fn an_arm_that_stopped_early_still_renders() {
    // The candidate ran nothing: no markers, no series, no results.
    let run = RunDir::open(&committed_run(), Access::Read).unwrap();
    let mut receipt = reports::assemble(&run).unwrap();
    let mut data = PageData::read(&run, &receipt).unwrap();
    let arm = &mut receipt.arms[1];
    arm.phases.clear();
    arm.speech = None;
    arm.status = reports::record::ArmStatus::Failed;
    data.series.insert(arm.id.clone(), (0, Vec::new()));
    data.latencies_ns.insert(arm.id.clone(), Vec::new());
    receipt.gates = reports::gates::evaluate(&receipt);
    let html = render(&receipt, &data);
    assert!(html.contains("<section id=\"comparison\">"));
    assert!(
        html.contains("id=\"memory-aligned\""),
        "the control's curve is still drawn"
    );
    assert!(html.contains("NOT_EVALUATED"), "{}", &html[..2000]);
}
