//! The bisect summary: a typed record (`bisect.json`) and its Markdown
//! table (`bisect.md`, also what `memqual bisect` prints), both pure
//! functions of the probes.

use crate::probe_verdict::Judged;
use reports::Receipt;
use reports::gates::Outcome;
use reports::record::ArmStatus;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// The format version of `bisect.json`.
pub const FORMAT_VERSION: &str = "1.0";

/// `bisect.json`: what was probed and where the verdict flips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectSummary {
    /// [`FORMAT_VERSION`].
    pub format_version: String,
    /// The protocol file, as given.
    pub protocol: String,
    /// The protocol's name.
    pub protocol_name: String,
    /// The bisected parameter.
    pub param: String,
    /// Its values, in the order given.
    pub values: Vec<String>,
    /// Every probe, in the order run.
    pub probes: Vec<Probe>,
    /// How many probes could not be judged (skipped).
    pub skipped: usize,
    /// Where the search ended.
    pub result: BisectResult,
    /// The gate checks whose outcome differs between the last value that
    /// agrees with the first and the first that differs (empty unless
    /// `result` is `found`).
    pub flipped: Vec<Flip>,
}

/// One run of the protocol with one value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The value's position in the list, from 1.
    pub position: usize,
    /// The parameter's value.
    pub value: String,
    /// The probe's run directory (`None`: the probe could not start, e.g.
    /// its named model could not be built).
    pub run_dir: Option<String>,
    /// The run verdict from its receipt (`None`: no gates, or no receipt).
    pub verdict: Option<Outcome>,
    /// Pass, fail or skip, as `memqual run --bisect-exit` would say.
    pub judged: Judged,
    /// Whether it agrees with the first value's judgement (`None`: skipped,
    /// or the first value itself could not be judged).
    pub same_as_first: Option<bool>,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BisectResult {
    /// The first value whose judgement differs from the first value's.
    Found {
        /// The first differing value.
        first_differing: String,
        /// Its position in the list, from 1.
        position: usize,
        /// The last value before it that agrees with the first.
        last_same: String,
    },
    /// The last value agrees with the first: nothing to find.
    NoFlip,
    /// The first value could not be judged, so nothing can differ from it.
    ReferenceSkipped,
    /// Skipped probes hide the flip: it is at one of these values (if the
    /// last value was skipped too, perhaps at none).
    Ambiguous {
        /// The values the first differing one may be.
        candidates: Vec<String>,
    },
    /// Interrupted before the search ended.
    Interrupted,
}

/// One gate check that changed outcome across the flip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    /// The arm.
    pub arm: String,
    /// The gate kind (`completion` for a protocol without gates: whether
    /// the arm completed).
    pub gate: String,
    /// The check's name, e.g. `state_ready resident_bytes`.
    pub check: String,
    /// The unit of `threshold` and the measured values.
    pub unit: String,
    /// The threshold at the first differing value.
    pub threshold: Option<f64>,
    /// The measured value at the last agreeing value.
    pub before: Option<f64>,
    /// The measured value at the first differing value.
    pub after: Option<f64>,
    /// The check's outcome at the last agreeing value.
    pub before_outcome: Outcome,
    /// The check's outcome at the first differing value.
    pub after_outcome: Outcome,
}

/// The gate checks whose outcome differs between `before` and `after`
/// (matched by arm, gate position and check name); for runs without gates,
/// the arms whose completion differs.
pub fn flips(before: &Receipt, after: &Receipt) -> Vec<Flip> {
    let mut out = Vec::new();
    if let (Some(b), Some(a)) = (&before.gates, &after.gates) {
        for arm in &a.arms {
            let Some(arm_b) = b.arms.iter().find(|x| x.arm == arm.arm) else {
                continue;
            };
            for (gate, gate_b) in arm.gates.iter().zip(&arm_b.gates) {
                for check in &gate.checks {
                    let Some(check_b) = gate_b.checks.iter().find(|c| c.name == check.name) else {
                        continue;
                    };
                    if check.outcome != check_b.outcome {
                        out.push(Flip {
                            arm: arm.arm.clone(),
                            gate: gate.kind.clone(),
                            check: check.name.clone(),
                            unit: check.unit.clone(),
                            threshold: check.threshold,
                            before: check_b.measured,
                            after: check.measured,
                            before_outcome: check_b.outcome,
                            after_outcome: check.outcome,
                        });
                    }
                }
            }
        }
        return out;
    }
    let completed = |r: &Receipt, id: &str| {
        r.arms
            .iter()
            .find(|a| a.id == id)
            .is_some_and(|a| a.status == ArmStatus::Completed)
    };
    let outcome = |done: bool| if done { Outcome::Pass } else { Outcome::Fail };
    for arm in &after.run.arms {
        let (b, a) = (completed(before, arm), completed(after, arm));
        if a != b {
            out.push(Flip {
                arm: arm.clone(),
                gate: "completion".into(),
                check: "arm completed".into(),
                unit: "bool".into(),
                threshold: Some(1.0),
                before: Some(f64::from(u8::from(b))),
                after: Some(f64::from(u8::from(a))),
                before_outcome: outcome(b),
                after_outcome: outcome(a),
            });
        }
    }
    out
}

/// A measured figure in its unit, for people.
fn figure(value: Option<f64>, unit: &str) -> String {
    match value {
        None => "–".into(),
        Some(v) if unit == "bytes" => format!("{:.1} MiB", v / 1048576.0),
        Some(v) if unit == "ns" => format!("{:.2} ms", v / 1e6),
        Some(v) => format!("{v:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string(),
    }
}

/// Table cells may not hold `|` or line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The summary as Markdown: the probes by position, the ending, the flip.
pub fn markdown(s: &BisectSummary) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# memqual bisect: {} over `{}` ({} values)\n",
        cell(&s.protocol_name),
        cell(&s.param),
        s.values.len()
    );
    let _ = writeln!(
        md,
        "| # | {} | probe | run directory | verdict | judged | vs first |",
        cell(&s.param)
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let mut probes: Vec<(usize, &Probe)> = s.probes.iter().enumerate().collect();
    probes.sort_by_key(|(_, p)| p.position);
    for (order, p) in probes {
        let vs = match p.same_as_first {
            Some(true) => "same",
            Some(false) => "differs",
            None => "–",
        };
        let judged = match &p.judged {
            Judged::Skip(why) => format!("SKIP ({})", cell(why)),
            other => other.label().to_string(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {judged} | {vs} |",
            p.position,
            cell(&p.value),
            order + 1,
            p.run_dir.as_deref().map_or("–".to_string(), cell),
            p.verdict.map_or("–", Outcome::as_str),
        );
    }
    let _ = writeln!(
        md,
        "\n{} probe(s) of {} values, {} skipped.\n",
        s.probes.len(),
        s.values.len(),
        s.skipped
    );
    let first = s.values.first().map_or("", String::as_str);
    let last = s.values.last().map_or("", String::as_str);
    let ending = match &s.result {
        BisectResult::Found {
            first_differing,
            position,
            last_same,
        } => format!(
            "**First differing value: `{}`** (position {position}); the last value that agrees with `{}` is `{}`.",
            cell(first_differing),
            cell(first),
            cell(last_same)
        ),
        BisectResult::NoFlip => format!(
            "**No flip**: the last value `{}` is judged like the first `{}`, so the list does not flip (or flips back, which a bisection cannot see).",
            cell(last),
            cell(first)
        ),
        BisectResult::ReferenceSkipped => format!(
            "**No reference**: the first value `{}` could not be judged, so nothing can differ from it.",
            cell(first)
        ),
        BisectResult::Ambiguous { candidates } => format!(
            "**Ambiguous**: skipped probes hide the flip; the first differing value is one of {}.",
            candidates
                .iter()
                .map(|c| format!("`{}`", cell(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        BisectResult::Interrupted => "**Interrupted** before the search ended.".to_string(),
    };
    let _ = writeln!(md, "{ending}");
    if !s.flipped.is_empty() {
        let _ = writeln!(md, "\n| arm | gate | check | before | after | threshold |");
        let _ = writeln!(md, "|---|---|---|---|---|---|");
        for f in &s.flipped {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} ({}) | {} ({}) | {} |",
                cell(&f.arm),
                cell(&f.gate),
                cell(&f.check),
                figure(f.before, &f.unit),
                f.before_outcome.as_str(),
                figure(f.after, &f.unit),
                f.after_outcome.as_str(),
                figure(f.threshold, &f.unit)
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_carry_their_unit_and_cells_stay_cells() {
        assert_eq!(figure(Some(75497472.0), "bytes"), "72.0 MiB");
        assert_eq!(figure(Some(2_500_000.0), "ns"), "2.50 ms");
        assert_eq!(figure(Some(1.0), "bool"), "1");
        assert_eq!(figure(Some(0.125), "ratio"), "0.125");
        assert_eq!(figure(None, "bytes"), "–");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
