//! Judging each declared gate against a receipt.

use super::spec::{
    ArmGates, Expect, FailClosedGate, GateSpec, LatencyGate, MemoryField, MemoryGate, OverheadGate,
    QualityGate, ValidityGate,
};
use super::{ArmVerdict, Check, Evidence, GateReport, GateResult, JudgedArms, Outcome};
use crate::receipt::{ArmReceipt, Receipt};
use crate::record::{ArmStatus, files};
use sampler::{Phase, TaskMemory};

const MIB: f64 = 1048576.0;

/// An arm of the receipt with its index (for evidence pointers).
#[derive(Clone, Copy)]
struct Located<'a> {
    index: usize,
    arm: &'a ArmReceipt,
}

impl<'a> Located<'a> {
    fn at(&self, path: &str) -> Evidence {
        Evidence {
            file: files::RECEIPT.to_string(),
            pointer: format!("/arms/{}{path}", self.index),
        }
    }
}

/// What every gate may look at.
struct Context<'a> {
    receipt: &'a Receipt,
    arm: Located<'a>,
    /// `Err` says why the control cannot be used (absent, failed, none named).
    control: Result<Located<'a>, String>,
}

fn check(name: impl Into<String>, unit: &str) -> Check {
    Check {
        name: name.into(),
        outcome: Outcome::NotEvaluated,
        threshold: None,
        measured: None,
        control: None,
        unit: unit.to_string(),
        evidence: Vec::new(),
        note: String::new(),
    }
}

fn not_evaluated(name: impl Into<String>, unit: &str, why: impl Into<String>) -> Check {
    Check {
        note: why.into(),
        ..check(name, unit)
    }
}

/// PASS when `measured ≤ threshold`.
fn at_most(mut c: Check, measured: f64, threshold: f64) -> Check {
    c.measured = Some(measured);
    c.threshold = Some(threshold);
    c.outcome = if measured <= threshold {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c
}

fn find_arm<'a>(receipt: &'a Receipt, id: &str) -> Option<Located<'a>> {
    receipt
        .arms
        .iter()
        .enumerate()
        .find(|(_, a)| a.id == id)
        .map(|(index, arm)| Located { index, arm })
}

fn resolve_control<'a>(receipt: &'a Receipt, arm: &str) -> Result<Located<'a>, String> {
    let Some(id) = receipt.run.controls.get(arm) else {
        return Err("the arm names no control".into());
    };
    let control = find_arm(receipt, id)
        .ok_or_else(|| format!("control arm `{id}` has no measurements (it never ran)"))?;
    if control.arm.status != ArmStatus::Completed {
        return Err(format!(
            "control arm `{id}` did not complete ({}): it cannot serve as a baseline",
            control.arm.failure.join("; ")
        ));
    }
    Ok(control)
}

/// Judge every declared gate of the receipt; `None` when no arm has gates.
pub fn evaluate(receipt: &Receipt) -> Option<GateReport> {
    let declared: Vec<(&String, &ArmGates)> = receipt
        .run
        .arms
        .iter()
        .filter_map(|id| {
            let (id, g) = receipt.run.gates.get_key_value(id)?;
            (!g.gates.is_empty()).then_some((id, g))
        })
        .collect();
    if declared.is_empty() {
        return None;
    }
    let arms: Vec<ArmVerdict> = declared
        .iter()
        .map(|(id, gates)| arm_verdict(receipt, id, gates))
        .collect();
    let promoted: Vec<&ArmVerdict> = arms.iter().filter(|a| a.promote).collect();
    let (judged, judged_arms) = if promoted.is_empty() {
        (JudgedArms::AllGated, arms.iter().collect::<Vec<_>>())
    } else {
        (JudgedArms::Promoted, promoted)
    };
    let verdict = Outcome::all(judged_arms.iter().map(|a| a.verdict));
    let judged_arms = judged_arms.iter().map(|a| a.arm.clone()).collect();
    Some(GateReport {
        arms,
        judged,
        judged_arms,
        verdict,
    })
}

fn arm_verdict(receipt: &Receipt, id: &str, declared: &ArmGates) -> ArmVerdict {
    let mut specs: Vec<(bool, GateSpec)> =
        declared.gates.iter().map(|g| (true, g.clone())).collect();
    let has_validity = specs
        .iter()
        .any(|(_, g)| matches!(g, GateSpec::Validity(_)));
    if declared.expect == Expect::Pass && !has_validity {
        specs.push((false, GateSpec::Validity(ValidityGate::default())));
    }
    let gates: Vec<GateResult> = match find_arm(receipt, id) {
        None => specs
            .into_iter()
            .map(|(declared, spec)| GateResult {
                kind: spec.kind().to_string(),
                declared,
                outcome: Outcome::NotEvaluated,
                checks: vec![not_evaluated(
                    "arm measured",
                    "bool",
                    format!("arm `{id}` never ran (the run stopped before it)"),
                )],
                spec,
            })
            .collect(),
        Some(arm) => {
            let ctx = Context {
                receipt,
                arm,
                control: resolve_control(receipt, id),
            };
            specs
                .into_iter()
                .map(|(declared, spec)| {
                    let checks = gate_checks(&ctx, &spec);
                    GateResult {
                        kind: spec.kind().to_string(),
                        declared,
                        outcome: Outcome::all(checks.iter().map(|c| c.outcome)),
                        checks,
                        spec,
                    }
                })
                .collect()
        }
    };
    ArmVerdict {
        arm: id.to_string(),
        control: receipt.run.controls.get(id).cloned(),
        promote: declared.promote,
        expect: declared.expect,
        verdict: Outcome::all(gates.iter().map(|g| g.outcome)),
        gates,
    }
}

fn gate_checks(ctx: &Context, spec: &GateSpec) -> Vec<Check> {
    if spec.needs_control()
        && let Err(why) = &ctx.control
    {
        return vec![not_evaluated(
            format!("{} against the control", spec.kind()),
            "",
            why.clone(),
        )];
    }
    match spec {
        GateSpec::Memory(g) => vec![memory(ctx, g)],
        GateSpec::Latency(g) => latency(ctx, g),
        GateSpec::Parity(_) => parity(ctx),
        GateSpec::Quality(g) => quality(ctx, g),
        GateSpec::FailClosed(g) => vec![fail_closed(ctx, g)],
        GateSpec::Validity(g) => validity(ctx, g),
        GateSpec::Overhead(g) => vec![overhead(ctx, g)],
        GateSpec::Stability(_) => stability(ctx),
    }
}

/// The field's name as checks and evidence pointers write it.
pub fn field_name(field: MemoryField) -> &'static str {
    match field {
        MemoryField::Peak => "peak",
        MemoryField::ResidentBytes => "resident_bytes",
        MemoryField::ResidentPeakBytes => "resident_peak_bytes",
        MemoryField::FootprintBytes => "footprint_bytes",
        MemoryField::FootprintPeakBytes => "footprint_peak_bytes",
        MemoryField::CompressedBytes => "compressed_bytes",
        MemoryField::SwapBytes => "swap_bytes",
        MemoryField::VirtualBytes => "virtual_bytes",
        MemoryField::RssAnonBytes => "rss_anon_bytes",
        MemoryField::RssFileBytes => "rss_file_bytes",
        MemoryField::RssShmemBytes => "rss_shmem_bytes",
    }
}

/// The value of `field` in one snapshot.
pub fn read_field(m: &TaskMemory, field: MemoryField) -> Option<u64> {
    match field {
        MemoryField::Peak => m.footprint_peak_bytes.or(m.resident_peak_bytes),
        MemoryField::ResidentBytes => Some(m.resident_bytes),
        MemoryField::ResidentPeakBytes => m.resident_peak_bytes,
        MemoryField::FootprintBytes => m.footprint_bytes,
        MemoryField::FootprintPeakBytes => m.footprint_peak_bytes,
        MemoryField::CompressedBytes => m.compressed_bytes,
        MemoryField::SwapBytes => m.swap_bytes,
        MemoryField::VirtualBytes => Some(m.virtual_bytes),
        MemoryField::RssAnonBytes => m.rss_anon_bytes,
        MemoryField::RssFileBytes => m.rss_file_bytes,
        MemoryField::RssShmemBytes => m.rss_shmem_bytes,
    }
}

/// `peak` resolves to the footprint peak where the arm's markers carry one.
pub fn resolve_field(arm: &ArmReceipt, phase: Phase, field: MemoryField) -> MemoryField {
    if field != MemoryField::Peak {
        return field;
    }
    let footprint = arm
        .phases
        .iter()
        .any(|p| p.phase == phase && p.memory.footprint_peak_bytes.is_some());
    if footprint {
        MemoryField::FootprintPeakBytes
    } else {
        MemoryField::ResidentPeakBytes
    }
}

/// The largest value of `field` over the markers of `phase`, with its row index.
fn phase_value(arm: &ArmReceipt, phase: Phase, field: MemoryField) -> Option<(usize, u64)> {
    arm.phases
        .iter()
        .enumerate()
        .filter(|(_, p)| p.phase == phase)
        .filter_map(|(i, p)| Some((i, read_field(&p.memory, field)?)))
        .max_by_key(|(i, v)| (*v, std::cmp::Reverse(*i)))
}

fn memory(ctx: &Context, g: &MemoryGate) -> Check {
    let field = resolve_field(ctx.arm.arm, g.phase, g.field);
    let name = format!("{} {}", g.phase, field_name(field));
    let mut c = check(name, "bytes");
    let Some((row, measured)) = phase_value(ctx.arm.arm, g.phase, field) else {
        c.note = format!(
            "the arm has no `{}` marker with {} (phase not reached, or the platform does not report the field)",
            g.phase,
            field_name(field)
        );
        return c;
    };
    c.evidence.push(
        ctx.arm
            .at(&format!("/phases/{row}/memory/{}", field_name(field))),
    );
    c.measured = Some(measured as f64);
    let (threshold, how) = if let Some(mib) = g.ceiling_mib {
        (mib * MIB, format!("absolute ceiling {mib} MiB"))
    } else {
        let Ok(control) = &ctx.control else {
            return c; // needs_control() already reported why
        };
        let Some((crow, cval)) = phase_value(control.arm, g.phase, field) else {
            c.note = format!(
                "control arm `{}` has no `{}` marker with {}",
                control.arm.id,
                g.phase,
                field_name(field)
            );
            return c;
        };
        c.control = Some(cval as f64);
        c.evidence
            .push(control.at(&format!("/phases/{crow}/memory/{}", field_name(field))));
        match (g.min_reduction, g.control_factor) {
            (Some(r), _) => (
                cval as f64 * (1.0 - r),
                format!("control × (1 − {r}): at least {:.1} % smaller", r * 100.0),
            ),
            (None, Some(f)) => (cval as f64 * f, format!("control × {f}")),
            (None, None) => return c,
        }
    };
    let mut c = at_most(c, measured as f64, threshold);
    c.note = format!(
        "{how}; measured {:.2} MiB, limit {:.2} MiB",
        measured as f64 / MIB,
        threshold / MIB
    );
    c
}

/// Steady p95 and max: whisper arms' steady requests (the first measured
/// request apart), else all measured requests.
fn latency_values(arm: Located) -> Option<[(f64, Evidence); 2]> {
    if let Some(s) = &arm.arm.speech {
        return Some([
            (
                s.latency.steady_p95_ns?,
                arm.at("/speech/latency/steady_p95_ns"),
            ),
            (
                s.latency.steady_max_ns? as f64,
                arm.at("/speech/latency/steady_max_ns"),
            ),
        ]);
    }
    let l = arm.arm.latency.as_ref()?;
    Some([
        (l.p95_ns, arm.at("/latency/p95_ns")),
        (l.max_ns as f64, arm.at("/latency/max_ns")),
    ])
}

fn latency(ctx: &Context, g: &LatencyGate) -> Vec<Check> {
    let names = ["steady p95 latency", "steady max latency"];
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let (Some(arm), Some(ctl)) = (latency_values(ctx.arm), latency_values(*control)) else {
        return vec![not_evaluated(
            "steady latency",
            "ns",
            "the arm or its control has no steady requests (at least two measured requests are needed)",
        )];
    };
    arm.into_iter()
        .zip(ctl)
        .zip(names)
        .map(|(((m, me), (cv, ce)), name)| {
            let mut c = check(name, "ns");
            c.control = Some(cv);
            c.evidence = vec![me, ce];
            let mut c = at_most(c, m, cv * (1.0 + g.tolerance));
            c.note = format!("control × (1 + {})", g.tolerance);
            c
        })
        .collect()
}

fn determinism_check(who: &str, arm: Located) -> Check {
    let name = format!("determinism across repetitions ({who} `{}`)", arm.arm.id);
    let Some(d) = arm
        .arm
        .speech
        .as_ref()
        .and_then(|s| s.quality.determinism.as_ref())
    else {
        return not_evaluated(name, "count", "no transcripts to compare");
    };
    if d.fixtures == 0 || d.single_repetition.len() == d.fixtures {
        return not_evaluated(
            name,
            "count",
            "every fixture ran once: determinism needs repetitions ≥ 2",
        );
    }
    let mut c = at_most(check(name, "count"), d.failures.len() as f64, 0.0);
    c.evidence
        .push(arm.at("/speech/quality/determinism/failures"));
    c.note = match d.failures.first() {
        Some(f) => format!(
            "fixture `{}` repetition {} differs from repetition {}",
            f.fixture_id, f.repetition_b, f.repetition_a
        ),
        None => format!("{} fixtures, every repetition identical", d.fixtures),
    };
    c
}

fn parity(ctx: &Context) -> Vec<Check> {
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let name = format!("exact outputs against `{}`", control.arm.id);
    let found = ctx
        .receipt
        .comparisons
        .iter()
        .enumerate()
        .find(|(_, c)| c.arm == ctx.arm.arm.id && c.control == control.arm.id);
    let exact = match found {
        None => not_evaluated(
            &name,
            "count",
            "the receipt has no comparison with the control",
        ),
        Some((_, cmp)) => match &cmp.parity {
            Err(e) => not_evaluated(&name, "count", format!("outputs cannot be compared: {e}")),
            Ok(p) if p.fixtures_compared == 0 => {
                not_evaluated(&name, "count", "no fixture was run by both arms")
            }
            Ok(p) => {
                let differing = p.mismatches.len() + p.only_in_a.len() + p.only_in_b.len();
                let mut c = at_most(check(&name, "count"), differing as f64, 0.0);
                c.evidence.push(Evidence {
                    file: files::RECEIPT.to_string(),
                    pointer: format!("/comparisons/{}/parity", found.map_or(0, |f| f.0)),
                });
                c.note = match p.mismatches.first() {
                    Some(m) => format!(
                        "{} of {} fixtures differ; first: `{}`, {:?}",
                        p.mismatches.len(),
                        p.fixtures_compared,
                        m.fixture_id,
                        m.differences.first()
                    ),
                    None if differing > 0 => format!(
                        "fixtures run by one arm only: {:?} / {:?}",
                        p.only_in_a, p.only_in_b
                    ),
                    None => format!(
                        "{} fixtures: token IDs, EOT, stop reason and text bytes equal",
                        p.fixtures_compared
                    ),
                };
                c
            }
        },
    };
    vec![
        exact,
        determinism_check("arm", ctx.arm),
        determinism_check("control", *control),
    ]
}

fn quality(ctx: &Context, g: &QualityGate) -> Vec<Check> {
    let Ok(control) = &ctx.control else {
        return Vec::new();
    };
    let wer = |a: &Located| {
        a.arm
            .speech
            .as_ref()
            .and_then(|s| s.quality.wer.as_ref())
            .cloned()
    };
    let (Some(aw), Some(cw)) = (wer(&ctx.arm), wer(control)) else {
        return vec![not_evaluated(
            "WER per category",
            "ratio",
            "the arm or its control has no WER report",
        )];
    };
    let mut checks = Vec::new();
    for (ci, cc) in cw.categories.iter().enumerate() {
        let Some(cval) = cc.wer else { continue }; // no reference words (silence)
        let name = format!("WER `{}`", cc.category);
        let Some((ai, ac)) = aw
            .categories
            .iter()
            .enumerate()
            .find(|(_, a)| a.category == cc.category)
        else {
            checks.push(not_evaluated(
                name,
                "ratio",
                "the arm has no slice of this category",
            ));
            continue;
        };
        let Some(aval) = ac.wer else {
            checks.push(not_evaluated(
                name,
                "ratio",
                "the arm's slices have no words",
            ));
            continue;
        };
        let mut c = check(name, "ratio");
        c.control = Some(cval);
        c.evidence = vec![
            ctx.arm
                .at(&format!("/speech/quality/wer/categories/{ai}/wer")),
            control.at(&format!("/speech/quality/wer/categories/{ci}/wer")),
        ];
        // Edits are integers over the same words: compare with a hair of slack
        // for the float sum only.
        let mut c = at_most(c, aval, cval + g.wer_delta + 1e-12);
        c.threshold = Some(cval + g.wer_delta);
        c.note = format!("control + {}", g.wer_delta);
        checks.push(c);
    }
    for category in &g.exact_categories {
        let name = format!("`{category}` words exactly as the control");
        let slices = |w: &crate::quality::WerReport| {
            w.slices
                .iter()
                .enumerate()
                .filter(|(_, s)| &s.category == category)
                .map(|(i, s)| (s.fixture_id.clone(), (i, s.hypothesis_normalised.clone())))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let (a, c) = (slices(&aw), slices(&cw));
        if c.is_empty() {
            checks.push(not_evaluated(
                name,
                "count",
                "the control has no slice of this category",
            ));
            continue;
        }
        let differing: Vec<&String> = c
            .iter()
            .filter(|(id, (_, words))| a.get(*id).map(|(_, w)| w) != Some(words))
            .map(|(id, _)| id)
            .collect();
        let mut chk = at_most(check(name, "count"), differing.len() as f64, 0.0);
        chk.evidence = vec![ctx.arm.at("/speech/quality/wer/slices")];
        chk.evidence.push(control.at("/speech/quality/wer/slices"));
        chk.note = if differing.is_empty() {
            format!("{} slices equal after normalisation", c.len())
        } else {
            format!("slices that differ or are missing: {differing:?}")
        };
        checks.push(chk);
    }
    if checks.is_empty() {
        checks.push(not_evaluated(
            "WER per category",
            "ratio",
            "no category with reference words",
        ));
    }
    checks
}

fn fail_closed(ctx: &Context, g: &FailClosedGate) -> Check {
    let a = ctx.arm.arm;
    let mut c = check(format!("fails closed with \"{}\"", g.reason), "bool");
    c.evidence = vec![ctx.arm.at("/status"), ctx.arm.at("/failure")];
    c.threshold = Some(1.0);
    let named = a.failure.iter().any(|f| f.contains(&g.reason));
    let (outcome, note) = match a.status {
        ArmStatus::Completed => (
            Outcome::Fail,
            "the arm completed: it did not fail closed".to_string(),
        ),
        _ if named => (Outcome::Pass, format!("failed: {}", a.failure.join("; "))),
        _ => (
            Outcome::Fail,
            format!(
                "failed, but not for the named reason: {}",
                a.failure.join("; ")
            ),
        ),
    };
    c.measured = Some(f64::from(u8::from(outcome == Outcome::Pass)));
    c.outcome = outcome;
    c.note = note;
    c
}

fn validity(ctx: &Context, g: &ValidityGate) -> Vec<Check> {
    let a = ctx.arm.arm;
    let mut checks = Vec::new();

    let mut c = check("arm completed", "bool");
    c.evidence.push(ctx.arm.at("/status"));
    c.threshold = Some(1.0);
    let completed = a.status == ArmStatus::Completed;
    c.measured = Some(f64::from(u8::from(completed)));
    c.outcome = if completed {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c.note = match a.status {
        ArmStatus::Completed => "exit 0, every phase, bye".into(),
        ArmStatus::Failed => format!("failed: {}", a.failure.join("; ")),
        ArmStatus::NotRunnable => format!("not runnable: {}", a.failure.join("; ")),
    };
    checks.push(c);

    let missing: Vec<String> = Phase::ALL
        .iter()
        .filter(|p| !a.phases.iter().any(|r| r.phase == **p))
        .map(|p| p.to_string())
        .collect();
    let mut c = at_most(
        check("every phase present", "count"),
        missing.len() as f64,
        0.0,
    );
    c.evidence.push(ctx.arm.at("/phases"));
    c.note = if missing.is_empty() {
        "all 8 phases".into()
    } else {
        format!("missing: {}", missing.join(", "))
    };
    checks.push(c);

    let mut c = check("measured requests", "count");
    c.evidence.push(ctx.arm.at("/requests"));
    c.threshold = Some(1.0);
    c.measured = Some(a.requests as f64);
    c.outcome = if a.requests >= 1 {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c.note = "at least one".into();
    checks.push(c);

    let due = a.series.samples + a.series.skipped_ticks;
    let mut c = check("skipped ticks / ticks due", "ratio");
    c.evidence.push(ctx.arm.at("/series/skipped_ticks"));
    if due == 0 {
        c.outcome = Outcome::Fail;
        c.threshold = Some(g.max_skipped_fraction);
        c.note = "the external sampler recorded nothing".into();
    } else {
        c = at_most(
            c,
            a.series.skipped_ticks as f64 / due as f64,
            g.max_skipped_fraction,
        );
        c.note = format!("{} of {due} ticks skipped", a.series.skipped_ticks);
    }
    checks.push(c);

    let sys = &a.series.system;
    if let (Some(i), Some(o)) = (sys.pswpin_delta, sys.pswpout_delta) {
        let mut c = at_most(
            check("pages swapped in or out during the arm", "count"),
            (i.max(0) + o.max(0)) as f64,
            0.0,
        );
        c.evidence = vec![
            ctx.arm.at("/series/system/pswpin_delta"),
            ctx.arm.at("/series/system/pswpout_delta"),
        ];
        c.note = "system-wide pswpin + pswpout across the arm".into();
        checks.push(c);
    }

    let mut c = check("host admitted before the arm", "bool");
    c.threshold = Some(1.0);
    match &ctx.receipt.admission {
        None => c.note = "the run has no admission record".into(),
        Some(record) => {
            let index = record
                .checks
                .iter()
                .position(|k| k.before_arm.as_deref() == Some(a.id.as_str()));
            c.evidence.push(Evidence {
                file: files::ADMISSION.to_string(),
                pointer: index.map_or("/checks".into(), |i| format!("/checks/{i}")),
            });
            match record.refusals_for(&a.id) {
                None => c.note = "no admission check before this arm".into(),
                Some(reasons) if reasons.is_empty() => {
                    c.measured = Some(1.0);
                    c.outcome = Outcome::Pass;
                    c.note = "quiet host".into();
                }
                Some(reasons) => {
                    c.measured = Some(0.0);
                    c.outcome = Outcome::Fail;
                    c.note = format!(
                        "measured on a refused host (--force): {}",
                        reasons.join("; ")
                    );
                }
            }
        }
    }
    checks.push(c);
    checks
}

/// Steady median latency with the sampler over without it, from the twin
/// runs (`arms/<id>/overhead.json`).
fn overhead(ctx: &Context, g: &OverheadGate) -> Check {
    let name = "steady median latency with the sampler / without it";
    let mut c = check(name, "ratio");
    c.threshold = Some(1.0 + g.tolerance);
    let id = &ctx.arm.arm.id;
    let file = format!("{}/{id}/{}", files::ARMS, crate::overhead::OVERHEAD_FILE);
    let Some(record) = &ctx.arm.arm.overhead else {
        c.note = format!(
            "no {file}: the twin runs did not happen (the arm did not complete, or the run stopped before them)"
        );
        return c;
    };
    c.evidence.push(Evidence {
        file,
        pointer: "/ratio".into(),
    });
    let Some(ratio) = record.ratio else {
        c.note = if record.problems.is_empty() {
            "the twin runs gave no ratio".into()
        } else {
            record.problems.join("; ")
        };
        return c;
    };
    let mut c = at_most(c, ratio, 1.0 + g.tolerance);
    c.note = format!(
        "median over {} A/B pairs (spread {:.4}..{:.4}); limit 1 + {}",
        record.pair_ratios.len(),
        record.ratio_min.unwrap_or(ratio),
        record.ratio_max.unwrap_or(ratio),
        g.tolerance
    );
    c
}

/// `0.00 KiB/request [low, high]` of a slope, or why there is none.
fn slope_text(s: &crate::growth::SeriesGrowth) -> String {
    match s.tail_bytes_per_request {
        Some(t) => format!(
            "tail slope {:.2} KiB/request [{:.2}, {:.2}]",
            t.estimate / 1024.0,
            t.low / 1024.0,
            t.high / 1024.0
        ),
        None => "no slope".into(),
    }
}

/// One series' classification as a check: bounded passes, growth fails,
/// inconclusive cannot be evaluated.
fn series_check(
    ctx: &Context,
    pointer: &str,
    s: &crate::growth::SeriesGrowth,
    threshold: f64,
) -> Check {
    use crate::growth::Classification;
    let mut c = check(format!("{} growth", s.series), "bytes");
    c.threshold = Some(threshold);
    c.measured = s.tail_bytes_per_request.map(|t| t.estimate);
    c.evidence.push(ctx.arm.at(pointer));
    c.outcome = match s.classification {
        Classification::Plateau | Classification::Step => Outcome::Pass,
        Classification::LinearGrowth => Outcome::Fail,
        Classification::Inconclusive => Outcome::NotEvaluated,
    };
    c.note = format!(
        "{} ({}; threshold in bytes per request): {}",
        s.classification.name(),
        slope_text(s),
        s.reason
    );
    c
}

/// The soak verdict: every judged series bounded, and `stable` true.
fn stability(ctx: &Context) -> Vec<Check> {
    let Some(s) = &ctx.arm.arm.stability else {
        return vec![not_evaluated(
            "soak verdict",
            "bool",
            "the arm has no stability section: it was not soaked (run it with `memqual soak`)",
        )];
    };
    let worker_threshold = s.settings.growth.linear_slope_bytes_per_request;
    let system_threshold = s.settings.system_slope_bytes_per_request;
    // The settled series count toward the worker verdict, so each gets a
    // check of its own beside the request_end series.
    let worker_checks = |field: &str, series: &[crate::growth::SeriesGrowth]| -> Vec<Check> {
        series
            .iter()
            .enumerate()
            .map(|(i, g)| {
                series_check(ctx, &format!("/stability/{field}/{i}"), g, worker_threshold)
            })
            .collect()
    };
    let mut checks = worker_checks("worker_series", &s.worker_series);
    checks.extend(worker_checks("settled_series", &s.settled_series));
    checks.extend(s.system_series.iter().enumerate().map(|(i, g)| {
        let p = format!("/stability/system_series/{i}");
        let mut c = series_check(ctx, &p, g, system_threshold);
        if s.system_growth_while_worker_flat.contains(&g.series) {
            c.note = format!(
                "system memory grows while the worker's own memory is bounded (what a \
                 resident-only soak calls healthy): {}",
                c.note
            );
        }
        c
    }));
    let mut c = check("soak verdict", "bool");
    c.threshold = Some(1.0);
    c.evidence.push(ctx.arm.at("/stability/stable"));
    let worker = s.worker.name();
    match s.stable {
        Some(true) => {
            c.outcome = Outcome::Pass;
            c.measured = Some(1.0);
            c.note = format!("stable: worker {worker}, no system series grows");
        }
        Some(false) => {
            c.outcome = Outcome::Fail;
            c.measured = Some(0.0);
            let growing: Vec<String> = s
                .worker_series
                .iter()
                .chain(&s.settled_series)
                .chain(&s.system_series)
                .filter(|g| g.classification == crate::growth::Classification::LinearGrowth)
                .map(|g| format!("{} {}", g.series, slope_text(g)))
                .collect();
            c.note = format!(
                "not stable: worker {worker}; growing: {}",
                growing.join("; ")
            );
        }
        None => {
            c.note = format!(
                "inconclusive (worker {worker}): too few requests or too noisy to tell; \
                 run the soak longer — an inconclusive soak never passes"
            );
        }
    }
    checks.push(c);
    checks
}
