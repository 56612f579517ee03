//! `memqual compare A B [--json] [--max-regression PCT]`: each arm's key
//! metrics A → B ([`fleet::compare`]), as a table or JSON; with
//! `--max-regression`, exit 1 naming every key metric that got worse by
//! more than PCT percent (or was measured in A and is missing in B).
//!
//! Both runs' seals are verified first (as `memqual verify` does): a run
//! whose seal is broken is named, its figures are marked unverified (`?`),
//! and compare exits 1, whatever the figures say.

use crate::exit::{self, Failure};
use crate::{console, review};
use ::fleet::compare::{Comparison, KEY_METRICS};
use std::fmt::Write;
use std::path::Path;

/// The largest `--max-regression` (percent).
pub const MAX_PCT: f64 = 10_000.0;

/// `--max-regression PCT`: a percentage from 0 to 10000.
pub fn parse_pct(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{text}` is not a number (a percentage, e.g. 5 or 2.5)"))?;
    if !(0.0..=MAX_PCT).contains(&v) {
        return Err(format!(
            "`{text}` is out of range: allowed 0..={MAX_PCT} (percent)"
        ));
    }
    Ok(v)
}

/// The mark after a figure from a run whose seal does not hold.
const UNVERIFIED: &str = "?";

fn fmt(v: Option<f64>, unit: &str) -> String {
    match (v, unit) {
        (None, _) => "-".into(),
        (Some(v), "bytes") => format!("{:.1}", v / 1_048_576.0),
        (Some(v), "ns") => format!("{:.1}", v / 1e6),
        (Some(v), _) => format!("{v}"),
    }
}

/// The table for people: per arm, each key metric A → B (B − A).
pub fn human(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {} {} | B: {} {}",
        c.a.protocol, c.a.started_utc, c.b.protocol, c.b.started_utc
    );
    for (name, run) in [("A", &c.a), ("B", &c.b)] {
        match &run.seal {
            Some(seal) if seal.verified => {}
            Some(seal) => {
                let _ = writeln!(
                    out,
                    "run {name} ({}): seal BROKEN ({} problems): its figures are UNVERIFIED (marked {UNVERIFIED})",
                    run.dir,
                    seal.problems.len()
                );
                for p in &seal.problems {
                    let _ = writeln!(out, "  {} {}: {}", p.kind.to_uppercase(), p.path, p.detail);
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "run {name} ({}): seal not checked: its figures are UNVERIFIED (marked {UNVERIFIED})",
                    run.dir
                );
            }
        }
    }
    let mark = |verified: bool| if verified { "" } else { UNVERIFIED };
    let (ma, mb) = (mark(c.a.verified()), mark(c.b.verified()));
    let headers: Vec<String> = KEY_METRICS
        .iter()
        .map(|m| format!("{} {}", m.label, if m.unit == "ns" { "ms" } else { "MiB" }))
        .collect();
    let _ = writeln!(
        out,
        "{:<24} {:>28} {:>28} {:>28} {:>21}",
        "arm", headers[0], headers[1], headers[2], "verdict"
    );
    let v = |o: Option<reports::gates::Outcome>, m: &str| {
        o.map_or("-".to_string(), |o| format!("{}{m}", o.as_str()))
    };
    for a in &c.arms {
        let cells: Vec<String> = a
            .metrics
            .iter()
            .map(|m| {
                let d = m.delta.map_or("-".to_string(), |d| {
                    let scaled = fmt(Some(d), &m.unit);
                    let sign = if d >= 0.0 { "+" } else { "" };
                    format!(
                        "{sign}{scaled}{}",
                        m.delta_pct.map_or(String::new(), |p| format!(", {p:+.1}%"))
                    )
                });
                let side = |x: Option<f64>, mark: &str| match x {
                    Some(_) => format!("{}{mark}", fmt(x, &m.unit)),
                    None => fmt(x, &m.unit),
                };
                format!(
                    "{} → {} ({d}){}",
                    side(m.a, ma),
                    side(m.b, mb),
                    if m.regression { "!" } else { "" }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<24} {:>28} {:>28} {:>28} {:>21}",
            a.arm,
            cells[0],
            cells[1],
            cells[2],
            format!("{} → {}", v(a.verdict_a, ma), v(a.verdict_b, mb)),
        );
    }
    let _ = writeln!(
        out,
        "run verdict: {} → {}",
        v(c.a.verdict, ma),
        v(c.b.verdict, mb)
    );
    if let Some(limit) = c.max_regression_pct {
        if c.regressions.is_empty() {
            let _ = writeln!(out, "no key metric regressed by more than {limit} %");
        }
        for r in &c.regressions {
            let _ = writeln!(out, "REGRESSION {} {}: {}", r.arm, r.metric, r.reason);
        }
    }
    if !c.figures_verified {
        let broken: Vec<&str> = [("A", &c.a), ("B", &c.b)]
            .iter()
            .filter(|(_, r)| !r.verified())
            .map(|(n, _)| *n)
            .collect();
        let _ = writeln!(
            out,
            "UNVERIFIED: the seal of run {} does not hold, so the figures marked {UNVERIFIED} may \
             not be the ones measured (`memqual verify DIR` names each problem)",
            broken.join(" and run ")
        );
    }
    out
}

/// `memqual compare`.
pub fn command(a: &Path, b: &Path, json: bool, max_regression: Option<f64>) -> Result<u8, Failure> {
    let ((ra, seal_a), (rb, seal_b)) = (review::read_receipt(a)?, review::read_receipt(b)?);
    let mut c = ::fleet::compare::compare(
        (&a.display().to_string(), &ra),
        (&b.display().to_string(), &rb),
        max_regression,
    );
    c.mark_seals(&seal_a, &seal_b);
    if json {
        console::print_json(&c)?;
    } else {
        console::out(format_args!("{}", human(&c)));
    }
    let mut code = exit::PASS;
    for (run, seal) in [(a, &seal_a), (b, &seal_b)] {
        if !seal.holds() {
            note!(
                "memqual: the seal of {} is BROKEN ({} problems): its figures are unverified; \
                 `memqual verify {}` names each problem",
                run.display(),
                seal.problems.len(),
                run.display()
            );
            code = exit::ARM_FAILED;
        }
    }
    if !c.regressions.is_empty() {
        let named: Vec<String> = c
            .regressions
            .iter()
            .map(|r| format!("{} {}", r.arm, r.metric))
            .collect();
        note!(
            "memqual: {} key metric(s) regressed beyond {} %: {}",
            c.regressions.len(),
            max_regression.unwrap_or_default(),
            named.join(", ")
        );
        code = exit::ARM_FAILED;
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentages_are_bounded() {
        assert_eq!(super::parse_pct("5"), Ok(5.0));
        assert_eq!(super::parse_pct("2.5%"), Ok(2.5));
        assert!(super::parse_pct("-1").is_err());
        assert!(super::parse_pct("NaN").is_err());
        assert!(super::parse_pct("inf").is_err());
        assert!(super::parse_pct("10001").is_err());
        assert!(
            super::parse_pct("x")
                .unwrap_err()
                .contains("is not a number")
        );
    }
}
