//! JUnit XML of a run (`--junit FILE`), for the test views of CI systems.
//!
//! One test suite per arm with gates (`<protocol>.<arm>`), one test case per
//! gate check: PASS is a success, FAIL a failure (message: the check's note;
//! text: measured, threshold and control with their evidence pointers),
//! NOT_EVALUATED is skipped. A gate without any check is one skipped case.
//! Without gates, one case per arm: completed, or a failure with its reasons.
//! Calibration checks and a soak's growth judgement get suites of their own.
//! Each whisper arm's QoI and decode throughput (cold and warm) are
//! properties: of the arm's suite, or `<arm>.<figure>` on the suite without
//! gates; a figure the runtime does not expose reads `unavailable`.
//! Every suite lists every case, also of arms the run verdict is not taken
//! over (property `judged`); the exit code follows the run verdict.
//!
//! Written with `quick-junit` (nextest's serializer).

use analysis::growth::Classification;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use reports::calibration::CalibrationCheck;
use reports::gates::{ArmVerdict, Check, GateReport, Outcome};
use reports::receipt::{ArmReceipt, Receipt};
use reports::record::ArmStatus;

fn number(v: Option<f64>, unit: &str) -> String {
    match (v, unit) {
        (None, _) => "–".to_string(),
        (Some(v), "bytes") => format!("{:.2} MiB ({v} bytes)", v / 1_048_576.0),
        (Some(v), "ns") => format!("{:.3} ms", v / 1e6),
        (Some(v), u) => format!("{v} {u}"),
    }
}

fn check_text(c: &Check) -> String {
    let mut text = format!(
        "measured {}; threshold {}; control {}",
        number(c.measured, &c.unit),
        number(c.threshold, &c.unit),
        number(c.control, &c.unit)
    );
    for e in &c.evidence {
        text.push_str(&format!("\nevidence: {}#{}", e.file, e.pointer));
    }
    text
}

fn failure(kind: &str, message: &str, text: String) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status
        .set_type(kind.to_string())
        .set_message(message.to_string())
        .set_description(text);
    status
}

fn skipped(message: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::skipped();
    status.set_message(message.to_string());
    status
}

fn case(name: String, classname: &str, status: TestCaseStatus) -> TestCase {
    let mut case = TestCase::new(name, status);
    case.set_classname(classname.to_string());
    case
}

fn gate_suite(protocol: &str, report: &GateReport, a: &ArmVerdict) -> TestSuite {
    let suite_name = format!("{protocol}.{}", a.arm);
    let mut suite = TestSuite::new(suite_name.clone());
    suite.add_properties([
        Property::new("verdict", a.verdict.as_str()),
        Property::new("promote", a.promote.to_string()),
        Property::new("judged", report.judged_arms.contains(&a.arm).to_string()),
        Property::new("control", a.control.clone().unwrap_or_default()),
    ]);
    for gate in &a.gates {
        let classname = format!("{suite_name}.{}", gate.kind);
        if gate.checks.is_empty() {
            suite.add_test_case(case(
                gate.kind.clone(),
                &classname,
                skipped("NOT_EVALUATED: the gate has no check that could be made"),
            ));
        }
        for c in &gate.checks {
            let status = match c.outcome {
                Outcome::Pass => TestCaseStatus::success(),
                Outcome::Fail => failure(&gate.kind, &c.note, check_text(c)),
                Outcome::NotEvaluated => skipped(&format!("NOT_EVALUATED: {}", c.note)),
            };
            let mut tc = case(format!("{}: {}", gate.kind, c.name), &classname, status);
            if c.outcome == Outcome::Pass {
                tc.set_system_out(check_text(c));
            }
            suite.add_test_case(tc);
        }
    }
    suite
}

/// An arm's memory ceiling, QoI and throughput figures as (name, value) pairs.
fn figures(arm: &ArmReceipt) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = arm
        .memory_ceiling
        .iter()
        .map(|c| ("memory_ceiling".to_string(), reports::ceiling::line(c)))
        .collect();
    let Some(s) = &arm.speech else {
        return out;
    };
    if let Some(q) = &s.quality.qoi {
        out.push((
            "qoi".to_string(),
            quality::qoi_text::share_text(q.qoi, q.no_worse, q.fixtures),
        ));
        out.push(("qoi.worse".to_string(), quality::qoi_text::worse_text(q)));
    }
    if let Some(t) = &s.throughput {
        for row in analysis::throughput::rows(t) {
            let [group, rest @ ..] = row;
            for (head, value) in analysis::throughput::HEADS[1..].iter().zip(rest) {
                out.push((format!("{group}.{head}"), value));
            }
        }
    }
    out
}

/// Without gates: did each arm complete?
fn status_suite(protocol: &str, arms: &[ArmReceipt], order: &[String]) -> TestSuite {
    let name = format!("{protocol}.arms");
    let mut suite = TestSuite::new(name.clone());
    for id in order {
        let status = match arms.iter().find(|a| &a.id == id) {
            None => failure("not_started", "the arm never started", String::new()),
            Some(a) => match a.status {
                ArmStatus::Completed => TestCaseStatus::success(),
                ArmStatus::Failed => failure("failed", &a.failure.join("; "), String::new()),
                ArmStatus::NotRunnable => failure(
                    "not_runnable",
                    &format!("not runnable: {}", a.failure.join("; ")),
                    String::new(),
                ),
            },
        };
        suite.add_test_case(case(format!("{id}: completed"), &name, status));
    }
    suite
}

fn calibration_suite(protocol: &str, checks: &[CalibrationCheck]) -> TestSuite {
    let name = format!("{protocol}.calibration");
    let mut suite = TestSuite::new(name.clone());
    for c in checks {
        let text = format!(
            "expected {} {}, measured {} ({})",
            c.format(Some(c.expected)),
            c.unit,
            c.format(c.measured),
            c.rule
        );
        let status = if c.pass {
            TestCaseStatus::success()
        } else {
            failure("calibration", &text, String::new())
        };
        let mut tc = case(
            format!("{} {}: {}", c.arm, c.pattern, c.quantity),
            &format!("{name}.{}", c.arm),
            status,
        );
        tc.set_system_out(text);
        suite.add_test_case(tc);
    }
    suite
}

/// A soak's growth judgement: the verdict, and each judged series.
fn soak_suite(protocol: &str, arm: &ArmReceipt, regressions: &[String]) -> Option<TestSuite> {
    let s = arm.stability.as_ref()?;
    let name = format!("{protocol}.{}.soak", arm.id);
    let mut suite = TestSuite::new(name.clone());
    let verdict = match s.stable {
        Some(true) => TestCaseStatus::success(),
        Some(false) => failure(
            "stability",
            &format!("memory grows: worker {}", s.worker.name()),
            String::new(),
        ),
        None => failure(
            "stability",
            "inconclusive: too few points or too noisy (never a pass)",
            String::new(),
        ),
    };
    suite.add_test_case(case("stability".into(), &name, verdict));
    for g in s
        .judged_worker_series()
        .chain(&s.settled_series)
        .chain(&s.system_series)
    {
        let status = match g.classification {
            Classification::LinearGrowth => failure("growth", &g.reason, String::new()),
            Classification::Inconclusive => skipped(&format!("inconclusive: {}", g.reason)),
            Classification::Plateau | Classification::Step => TestCaseStatus::success(),
        };
        let mut tc = case(format!("growth: {}", g.series), &name, status);
        tc.set_system_out(format!("{}: {}", g.classification.name(), g.reason));
        suite.add_test_case(tc);
    }
    let history = if regressions.is_empty() {
        TestCaseStatus::success()
    } else {
        failure("regression", &regressions.join("; "), String::new())
    };
    suite.add_test_case(case("history: no regression".into(), &name, history));
    Some(suite)
}

/// The JUnit report of `receipt`, with a calibration run's checks and a
/// soak's regressions against past nights (empty when not applicable).
pub fn report(
    receipt: &Receipt,
    calibration: &[CalibrationCheck],
    soak_regressions: &[String],
) -> Report {
    let protocol = receipt.run.protocol_name.as_str();
    let mut suites = Vec::new();
    match &receipt.gates {
        Some(g) => suites.extend(g.arms.iter().map(|a| {
            let mut suite = gate_suite(protocol, g, a);
            if let Some(arm) = receipt.arms.iter().find(|r| r.id == a.arm) {
                suite.add_properties(figures(arm).into_iter().map(|(k, v)| Property::new(k, v)));
            }
            suite
        })),
        None => {
            let mut suite = status_suite(protocol, &receipt.arms, &receipt.run.arms);
            for arm in &receipt.arms {
                suite.add_properties(
                    figures(arm)
                        .into_iter()
                        .map(|(k, v)| Property::new(format!("{}.{k}", arm.id), v)),
                );
            }
            suites.push(suite);
        }
    }
    if !calibration.is_empty() {
        suites.push(calibration_suite(protocol, calibration));
    }
    suites.extend(
        receipt
            .arms
            .iter()
            .filter_map(|arm| soak_suite(protocol, arm, soak_regressions)),
    );
    // On each suite: the JUnit schema has no timestamp on <testsuites>.
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&receipt.run.started_utc) {
        for s in &mut suites {
            s.set_timestamp(t);
        }
    }
    let mut report = Report::new(format!("memqual {protocol}"));
    report.add_test_suites(suites);
    report
}

/// [`report`] as XML text.
pub fn to_xml(report: &Report) -> Result<String, reports::ReportError> {
    report
        .to_string()
        .map_err(|e| reports::ReportError::Invalid {
            path: "junit".into(),
            reason: e.to_string(),
        })
}
