//! What one finished run tells a bisection: good, bad, or skip.
//!
//! `memqual run --bisect-exit` turns it into `git bisect run`'s exit codes
//! and `memqual bisect` compares its probes by it, so the two never
//! disagree about a run. A run is *skipped*, never called good or bad, when
//! its measurement cannot be trusted or its gates could not decide: an arm
//! was NOT_RUNNABLE or its worker speaks another contract version (a worker
//! built at another commit), admission refused the host (even under
//! `--force`), or
//! the only gates left undecided are the ones judged by an interval
//! (`overhead`, `stability`), whose inconclusive result is noise, not a
//! verdict.

use arm_runner::reader::CONTRACT_MISMATCH;
use reports::Receipt;
use reports::gates::Outcome;
use reports::record::ArmStatus;
use serde::{Deserialize, Serialize};

/// `git bisect run`: the commit is good.
pub const GOOD: u8 = 0;
/// `git bisect run`: the commit is bad.
pub const BAD: u8 = 1;
/// `git bisect run`: the commit cannot be tested; git picks a neighbour.
pub const SKIP: u8 = 125;

/// The text `memqual run --help` shows for `--bisect-exit`.
pub const HELP: &str = "With --bisect-exit the exit status is git bisect run's: 0 the verdict \
is PASS; 1 it is FAIL (or a gate could not be evaluated for want of a value); 125 the run cannot \
tell (an arm NOT_RUNNABLE or whose worker speaks another contract version, the host refused by admission even with --force, an overhead or \
stability gate whose interval is inconclusive, the protocol refused, or memqual could not run an \
arm); 130 interrupted, which stops the bisection.";

/// A run as a bisection sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "class", content = "reason", rename_all = "snake_case")]
pub enum Judged {
    /// The run passed (see [`crate::session::run_passed`]).
    Pass,
    /// The run did not pass, and it could tell.
    Fail,
    /// The run cannot decide: why.
    Skip(String),
}

impl Judged {
    /// `git bisect run`'s exit code for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Judged::Pass => GOOD,
            Judged::Fail => BAD,
            Judged::Skip(_) => SKIP,
        }
    }

    /// `PASS`, `FAIL` or `SKIP`.
    pub fn label(&self) -> &'static str {
        match self {
            Judged::Pass => "PASS",
            Judged::Fail => "FAIL",
            Judged::Skip(_) => "SKIP",
        }
    }
}

/// Gate kinds judged by an interval, whose NOT_EVALUATED means "cannot
/// tell yet" rather than "a value is missing".
const INTERVAL_GATES: &[&str] = &["overhead", "stability"];

/// Judge a sealed run's receipt; `passed` is the run's own pass/fail.
pub fn judge(receipt: &Receipt, passed: bool) -> Judged {
    let not_runnable: Vec<String> = receipt
        .arms
        .iter()
        .filter(|a| {
            a.status == ArmStatus::NotRunnable
                || a.failure.iter().any(|f| f.contains(CONTRACT_MISMATCH))
        })
        .map(|a| format!("arm {} could not run: {}", a.id, a.failure.join("; ")))
        .collect();
    if !not_runnable.is_empty() {
        return Judged::Skip(not_runnable.join("; "));
    }
    if let Some(admission) = &receipt.admission {
        let refused: Vec<String> = admission
            .checks
            .iter()
            .filter(|c| !c.admitted)
            .flat_map(|c| c.reasons.iter().cloned())
            .collect();
        if !refused.is_empty() {
            return Judged::Skip(format!(
                "admission refused the host: {}",
                refused.join("; ")
            ));
        }
    }
    if let Some(gates) = &receipt.gates
        && gates.verdict == Outcome::NotEvaluated
    {
        let judged = gates
            .arms
            .iter()
            .filter(|a| gates.judged_arms.contains(&a.arm));
        let undecided: Vec<_> = judged
            .flat_map(|a| a.gates.iter().map(move |g| (a, g)))
            .filter(|(_, g)| g.outcome == Outcome::NotEvaluated)
            .collect();
        if !undecided.is_empty()
            && undecided
                .iter()
                .all(|(_, g)| INTERVAL_GATES.contains(&g.kind.as_str()))
        {
            let why: Vec<String> = undecided
                .iter()
                .map(|(a, g)| {
                    let note = g
                        .checks
                        .iter()
                        .find(|c| c.outcome == Outcome::NotEvaluated)
                        .map_or("", |c| c.note.as_str());
                    format!("arm {} gate {} is inconclusive: {note}", a.arm, g.kind)
                })
                .collect();
            return Judged::Skip(why.join("; "));
        }
    }
    if passed { Judged::Pass } else { Judged::Fail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::gates::{ArmVerdict, Expect, GateReport, GateResult, GateSpec, JudgedArms};

    fn gate(kind: &str, outcome: Outcome) -> GateResult {
        let spec: GateSpec = match kind {
            "overhead" => serde_json::from_str(r#"{"kind":"overhead"}"#),
            "stability" => serde_json::from_str(r#"{"kind":"stability"}"#),
            _ => {
                serde_json::from_str(r#"{"kind":"memory","phase":"state_ready","ceiling_mib":64}"#)
            }
        }
        .expect("a gate spec");
        GateResult {
            kind: spec.kind().to_string(),
            declared: true,
            spec,
            outcome,
            checks: vec![reports::gates::Check {
                name: format!("{kind} check"),
                outcome,
                threshold: None,
                measured: None,
                control: None,
                unit: "ratio".into(),
                evidence: Vec::new(),
                note: format!("{kind} note"),
            }],
        }
    }

    /// A receipt whose one judged arm has `gates`, and whose verdict they make.
    fn receipt(gates: Vec<GateResult>) -> Receipt {
        let verdict = Outcome::all(gates.iter().map(|g| g.outcome));
        Receipt {
            format_version: reports::RECEIPT_FORMAT_VERSION.into(),
            run: reports::record::RunInfo::default(),
            arms: Vec::new(),
            comparisons: Vec::new(),
            identity: None,
            admission: None,
            integrity: reports::receipt::Integrity::default(),
            gates: Some(GateReport {
                arms: vec![ArmVerdict {
                    arm: "a".into(),
                    control: None,
                    promote: false,
                    expect: Expect::default(),
                    gates,
                    verdict,
                }],
                judged: JudgedArms::AllGated,
                judged_arms: vec!["a".into()],
                verdict,
            }),
            seal: None,
        }
    }

    #[test]
    fn an_inconclusive_interval_is_a_skip_and_a_missing_value_is_not() {
        let r = receipt(vec![
            gate("memory", Outcome::Pass),
            gate("overhead", Outcome::NotEvaluated),
        ]);
        assert_eq!(
            judge(&r, false),
            Judged::Skip("arm a gate overhead is inconclusive: overhead note".into())
        );
        assert_eq!(judge(&r, false).exit_code(), SKIP);
        let r = receipt(vec![gate("stability", Outcome::NotEvaluated)]);
        assert!(matches!(judge(&r, false), Judged::Skip(_)));
        // A memory gate without its value is not noise: the run failed.
        let r = receipt(vec![
            gate("memory", Outcome::NotEvaluated),
            gate("overhead", Outcome::NotEvaluated),
        ]);
        assert_eq!(judge(&r, false), Judged::Fail);
        // A failing gate decides, whatever the interval says.
        let r = receipt(vec![
            gate("memory", Outcome::Fail),
            gate("overhead", Outcome::NotEvaluated),
        ]);
        assert_eq!(judge(&r, false).exit_code(), BAD);
        let r = receipt(vec![gate("overhead", Outcome::Pass)]);
        assert_eq!(judge(&r, true).exit_code(), GOOD);
    }
}
