use super::*;
use crate::admission::{AdmissionCheck, AdmissionRecord, AdmissionThresholds, HostObservation};
use crate::gate_spec::OverheadToggle;
use crate::overhead::{BlockPlan, OverheadRecord};
use crate::receipt::{ArmReceipt, PhaseRow, Receipt, SeriesSummary};
use crate::record::{ArmStatus, RunInfo};
use crate::speech::{ControlResults, QualityReport, SpeechLatency, SpeechReceipt};
use ::quality::{Reference, Transcription};
use sampler::{Phase, TaskMemory};

const MIB: u64 = 1 << 20;

fn row(phase: Phase, seq: u64, resident: u64, peak: u64) -> PhaseRow {
    PhaseRow::of(
        phase,
        seq,
        TaskMemory {
            resident_bytes: resident,
            resident_peak_bytes: Some(peak),
            ..TaskMemory::default()
        },
    )
}

fn transcription(fixture: &str, repetition: u32, tokens: &[i32], text: &str) -> Transcription {
    Transcription {
        fixture_id: fixture.into(),
        repetition,
        token_ids: tokens.to_vec(),
        eot: true,
        stop_reason: "eot".into(),
        text: text.into(),
    }
}

fn references() -> Vec<Reference> {
    vec![
        Reference {
            fixture_id: "n1".into(),
            category: "names".into(),
            text: "sarah johnson called".into(),
        },
        Reference {
            fixture_id: "c1".into(),
            category: "clean".into(),
            text: "one two three four".into(),
        },
    ]
}

/// A completed arm: every phase, `state_ready` peak `state_peak_mib`,
/// steady latency p95/max, the given outputs, 100 samples, none skipped.
fn arm(id: &str, state_peak_mib: u64, steady: (f64, u64), outputs: &[Transcription]) -> ArmReceipt {
    let phases = Phase::ALL
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let peak = if *p == Phase::StateReady {
                state_peak_mib * MIB
            } else {
                10 * MIB
            };
            row(*p, i as u64, 10 * MIB, peak)
        })
        .collect();
    ArmReceipt {
        series: SeriesSummary {
            samples: 100,
            ..SeriesSummary::default()
        },
        speech: Some(SpeechReceipt {
            runtime: None,
            latency: SpeechLatency {
                cold_load_ns: None,
                state_init_ns: None,
                warmup_ns: None,
                first_request_ns: None,
                steady_count: 3,
                steady_p50_ns: None,
                steady_p95_ns: Some(steady.0),
                steady_max_ns: Some(steady.1),
                steady_rtf: None,
                stop_to_final: None,
            },
            transcripts: vec![],
            throughput: None,
            quality: QualityReport::build(outputs, &references()),
            converted_inputs: vec![],
            cancellation: None,
        }),
        ..ArmReceipt::completed(id, phases, outputs.len() as u64)
    }
}

fn good_outputs() -> Vec<Transcription> {
    let mut out = Vec::new();
    for rep in 0..2 {
        out.push(transcription(
            "n1",
            rep,
            &[1, 2, 3],
            "Sarah Johnson called.",
        ));
        out.push(transcription("c1", rep, &[4, 5], "One two three four."));
    }
    out
}

/// A receipt of `control` and `candidate` (compared with `control`), with
/// the given gates on the candidate and an admitted host.
fn receipt(control: ArmReceipt, candidate: ArmReceipt, gates: ArmGates) -> Receipt {
    let run = RunInfo {
        protocol_name: "p".into(),
        protocol_path: "p.toml".into(),
        page_size_bytes: 4096,
        arms: vec![control.id.clone(), candidate.id.clone()],
        controls: [(candidate.id.clone(), control.id.clone())].into(),
        gates: [(candidate.id.clone(), gates)].into(),
        ..RunInfo::default()
    };
    let admission = AdmissionRecord {
        thresholds: AdmissionThresholds::default(),
        forced: false,
        checks: [None, Some(control.id.clone()), Some(candidate.id.clone())]
            .into_iter()
            .map(|before_arm| AdmissionCheck {
                before_arm,
                started_utc: "now".into(),
                window_ms: 10,
                observed: HostObservation::default(),
                admitted: true,
                reasons: vec![],
            })
            .collect(),
    };
    Receipt {
        format_version: crate::RECEIPT_FORMAT_VERSION.into(),
        identity: None,
        integrity: crate::receipt::Integrity::default(),
        run,
        arms: vec![control, candidate],
        comparisons: vec![],
        admission: Some(admission),
        gates: None,
        seal: None,
    }
}

fn with_parity(
    mut r: Receipt,
    control_out: &[Transcription],
    arm_out: &[Transcription],
) -> Receipt {
    let results = ControlResults {
        arm: arm_out.to_vec(),
        control: control_out.to_vec(),
    };
    r.comparisons = vec![crate::assemble::speech::compare(
        &r.arms[1], &r.arms[0], &results,
    )];
    r
}

fn gates(specs: Vec<GateSpec>) -> ArmGates {
    ArmGates {
        promote: true,
        expect: Expect::Pass,
        gates: specs,
    }
}

fn memory_gate(phase: Phase) -> MemoryGate {
    MemoryGate {
        phase,
        field: MemoryField::Peak,
        min_reduction: None,
        control_factor: None,
        ceiling_mib: None,
        with_encoder_process: false,
        allowance_mib: None,
    }
}

fn judge(r: &Receipt) -> GateReport {
    evaluate(r).expect("gates declared")
}

fn candidate(report: &GateReport) -> &ArmVerdict {
    report.arms.iter().find(|a| a.arm == "cand").unwrap()
}

#[test]
fn memory_ceiling_from_the_control_catches_an_extra_state() {
    let out = good_outputs();
    let gate = GateSpec::Memory(MemoryGate {
        control_factor: Some(1.05),
        ..memory_gate(Phase::StateReady)
    });
    // 100 MiB control, 120 MiB candidate: limit 105 MiB.
    let r = receipt(
        arm("ctl", 100, (1e6, 2_000_000), &out),
        arm("cand", 120, (1e6, 2_000_000), &out),
        gates(vec![gate.clone()]),
    );
    let rep = judge(&r);
    let g = &candidate(&rep).gates[0];
    assert_eq!(g.outcome, Outcome::Fail);
    let c = &g.checks[0];
    assert_eq!(c.name, "state_ready resident_peak_bytes");
    assert_eq!(c.measured, Some((120 * MIB) as f64));
    assert_eq!(c.control, Some((100 * MIB) as f64));
    assert_eq!(c.threshold, Some(100.0 * 1.05 * MIB as f64));
    assert_eq!(
        c.evidence[0].pointer,
        "/arms/1/phases/2/memory/resident_peak_bytes"
    );
    assert_eq!(
        c.evidence[1].pointer,
        "/arms/0/phases/2/memory/resident_peak_bytes"
    );
    assert_eq!(candidate(&rep).verdict, Outcome::Fail);
    assert_eq!(rep.verdict, Outcome::Fail);

    // 104 MiB is within the 5 % ceiling.
    let r = receipt(
        arm("ctl", 100, (1e6, 2_000_000), &out),
        arm("cand", 104, (1e6, 2_000_000), &out),
        gates(vec![gate]),
    );
    assert_eq!(candidate(&judge(&r)).gates[0].outcome, Outcome::Pass);
}

#[test]
fn memory_min_reduction_and_absolute_ceiling() {
    let out = good_outputs();
    let reduce = |r: f64| {
        GateSpec::Memory(MemoryGate {
            min_reduction: Some(r),
            ..memory_gate(Phase::StateReady)
        })
    };
    let ceiling = |mib: f64| {
        GateSpec::Memory(MemoryGate {
            ceiling_mib: Some(mib),
            ..memory_gate(Phase::StateReady)
        })
    };
    // 80 MiB against 100 MiB: a 20 % reduction.
    let r = receipt(
        arm("ctl", 100, (1e6, 1), &out),
        arm("cand", 80, (1e6, 1), &out),
        gates(vec![
            reduce(0.2),
            reduce(0.25),
            ceiling(80.0),
            ceiling(79.5),
        ]),
    );
    let rep = judge(&r);
    let outcomes: Vec<Outcome> = candidate(&rep).gates[..4]
        .iter()
        .map(|g| g.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [Outcome::Pass, Outcome::Fail, Outcome::Pass, Outcome::Fail]
    );
    assert_eq!(
        candidate(&rep).gates[1].checks[0].threshold,
        Some(75.0 * MIB as f64)
    );
    assert!(candidate(&rep).gates[2].checks[0].control.is_none());
}

#[test]
fn a_device_memory_gate_reads_the_markers_device_bytes_and_is_not_evaluated_without_them() {
    let out = good_outputs();
    let gate = GateSpec::Memory(MemoryGate {
        field: MemoryField::DeviceBytes,
        min_reduction: Some(0.03),
        ..memory_gate(Phase::ModelLoaded)
    });
    let with_device = |id: &str, device_mib: u64| {
        let mut a = arm(id, 100, (1e6, 1), &out);
        for p in &mut a.phases {
            p.memory.device_bytes = Some(device_mib * MIB);
        }
        a
    };
    // 660 MiB against 700 MiB on the device: 5.7 % less, limit 679 MiB.
    let r = receipt(
        with_device("ctl", 700),
        with_device("cand", 660),
        gates(vec![gate.clone()]),
    );
    let rep = judge(&r);
    let c = &candidate(&rep).gates[0];
    assert_eq!(c.outcome, Outcome::Pass);
    assert_eq!(c.checks[0].name, "model_loaded device_bytes");
    assert_eq!(c.checks[0].measured, Some((660 * MIB) as f64));
    assert_eq!(
        c.checks[0].evidence[0].pointer,
        "/arms/1/phases/1/memory/device_bytes"
    );
    // 690 MiB is not 3 % less.
    let r = receipt(
        with_device("ctl", 700),
        with_device("cand", 690),
        gates(vec![gate.clone()]),
    );
    assert_eq!(candidate(&judge(&r)).gates[0].outcome, Outcome::Fail);
    // A CPU arm's markers carry no device reading: never judged as zero.
    let r = receipt(
        with_device("ctl", 700),
        arm("cand", 100, (1e6, 1), &out),
        gates(vec![gate]),
    );
    let rep = judge(&r);
    let c = &candidate(&rep).gates[0];
    assert_eq!(c.outcome, Outcome::NotEvaluated);
    assert!(
        c.checks[0].note.contains("device_bytes"),
        "{}",
        c.checks[0].note
    );
}

#[test]
fn a_gate_without_its_control_run_is_not_evaluated_and_the_arm_cannot_pass() {
    let out = good_outputs();
    let gate = GateSpec::Memory(MemoryGate {
        control_factor: Some(1.05),
        ..memory_gate(Phase::StateReady)
    });
    let mut r = receipt(
        arm("ctl", 100, (1e6, 1), &out),
        arm("cand", 90, (1e6, 1), &out),
        gates(vec![gate]),
    );
    r.arms.remove(0); // the control never ran
    r.admission.as_mut().unwrap().checks.remove(1);
    let rep = judge(&r);
    let c = candidate(&rep);
    assert_eq!(c.gates[0].outcome, Outcome::NotEvaluated);
    assert!(
        c.gates[0].checks[0]
            .note
            .contains("control arm `ctl` has no measurements")
    );
    // The default validity gate passes; the arm still cannot pass.
    assert_eq!(c.gates[1].kind, "validity");
    assert!(!c.gates[1].declared);
    assert_eq!(c.gates[1].outcome, Outcome::Pass);
    assert_eq!(c.verdict, Outcome::NotEvaluated);
    assert_eq!(rep.verdict, Outcome::NotEvaluated);

    // A control that failed is no baseline either.
    let mut r = receipt(
        arm("ctl", 100, (1e6, 1), &out),
        arm("cand", 90, (1e6, 1), &out),
        gates(vec![GateSpec::Latency(LatencyGate { tolerance: 0.1 })]),
    );
    r.arms[0].status = ArmStatus::Failed;
    r.arms[0].failure = vec!["worker killed by SIGKILL".into()];
    let rep = judge(&r);
    assert_eq!(candidate(&rep).gates[0].outcome, Outcome::NotEvaluated);
    assert!(candidate(&rep).gates[0].checks[0].note.contains("SIGKILL"));
}

#[test]
fn latency_p95_and_max_against_the_control() {
    let out = good_outputs();
    let g = gates(vec![GateSpec::Latency(LatencyGate { tolerance: 0.10 })]);
    // p95 within 10 %, max 12 % over: the max check fails.
    let r = receipt(
        arm("ctl", 100, (100e6, 200_000_000), &out),
        arm("cand", 100, (109e6, 224_000_000), &out),
        g,
    );
    let rep = judge(&r);
    let checks = &candidate(&rep).gates[0].checks;
    assert_eq!(checks[0].outcome, Outcome::Pass);
    assert!((checks[0].threshold.unwrap() - 110e6).abs() < 1e-3);
    assert_eq!(checks[1].outcome, Outcome::Fail);
    assert_eq!(checks[1].measured, Some(224e6));
    assert_eq!(
        checks[1].evidence[1].pointer,
        "/arms/0/speech/latency/steady_max_ns"
    );
    assert_eq!(candidate(&rep).gates[0].outcome, Outcome::Fail);
}

#[test]
fn parity_needs_exact_outputs_and_determinism() {
    let out = good_outputs();
    let g = || gates(vec![GateSpec::Parity(ParityGate {})]);
    let r = with_parity(
        receipt(
            arm("ctl", 1, (1.0, 1), &out),
            arm("cand", 1, (1.0, 1), &out),
            g(),
        ),
        &out,
        &out,
    );
    let rep = judge(&r);
    let gate = &candidate(&rep).gates[0];
    assert_eq!(gate.outcome, Outcome::Pass, "{gate:?}");
    assert_eq!(gate.checks.len(), 3);
    assert_eq!(gate.checks[0].evidence[0].pointer, "/comparisons/0/parity");
    assert_eq!(candidate(&rep).verdict, Outcome::Pass);
    assert_eq!(rep.verdict, Outcome::Pass);

    // One token differs in the candidate's first repetition of n1.
    let mut changed = out.clone();
    changed[0].token_ids[2] = 99;
    let r = with_parity(
        receipt(
            arm("ctl", 1, (1.0, 1), &out),
            arm("cand", 1, (1.0, 1), &changed),
            g(),
        ),
        &out,
        &changed,
    );
    let rep = judge(&r);
    let gate = &candidate(&rep).gates[0];
    assert_eq!(gate.checks[0].outcome, Outcome::Fail);
    assert_eq!(gate.checks[0].measured, Some(1.0));
    assert!(
        gate.checks[0].note.contains("`n1`"),
        "{}",
        gate.checks[0].note
    );
    // ...and so the candidate's repetitions differ too.
    assert_eq!(gate.checks[1].outcome, Outcome::Fail);
    assert_eq!(gate.checks[2].outcome, Outcome::Pass);

    // One repetition only: determinism cannot be shown.
    let once: Vec<Transcription> = out.iter().filter(|t| t.repetition == 0).cloned().collect();
    let r = with_parity(
        receipt(
            arm("ctl", 1, (1.0, 1), &once),
            arm("cand", 1, (1.0, 1), &once),
            g(),
        ),
        &once,
        &once,
    );
    let rep = judge(&r);
    assert_eq!(candidate(&rep).gates[0].checks[0].outcome, Outcome::Pass);
    assert_eq!(candidate(&rep).gates[0].outcome, Outcome::NotEvaluated);
    assert_eq!(candidate(&rep).verdict, Outcome::NotEvaluated);
}

#[test]
fn quality_allows_a_wer_delta_but_named_categories_must_match() {
    let out = good_outputs();
    // The candidate drops one of four clean words (WER 0.25) and keeps names.
    let mut worse = out.clone();
    for t in worse.iter_mut().filter(|t| t.fixture_id == "c1") {
        t.text = "One two three.".into();
    }
    let g = |delta: f64| {
        gates(vec![GateSpec::Quality(QualityGate {
            wer_delta: Some(delta),
            min_qoi: None,
            exact_categories: vec!["names".into()],
        })])
    };
    let r = receipt(
        arm("ctl", 1, (1.0, 1), &out),
        arm("cand", 1, (1.0, 1), &worse),
        g(0.25),
    );
    let rep = judge(&r);
    let gate = &candidate(&rep).gates[0];
    let clean = gate
        .checks
        .iter()
        .find(|c| c.name == "WER `clean`")
        .unwrap();
    assert_eq!((clean.measured, clean.control), (Some(0.25), Some(0.0)));
    assert_eq!(clean.outcome, Outcome::Pass);
    let names = gate
        .checks
        .iter()
        .find(|c| c.name == "`names` words exactly as the control")
        .unwrap();
    assert_eq!(names.outcome, Outcome::Pass);
    assert_eq!(gate.outcome, Outcome::Pass);

    let r = receipt(
        arm("ctl", 1, (1.0, 1), &out),
        arm("cand", 1, (1.0, 1), &worse),
        g(0.2),
    );
    assert_eq!(candidate(&judge(&r)).gates[0].outcome, Outcome::Fail);

    // A name spelled differently fails the exact category whatever the delta.
    let mut renamed = out.clone();
    for t in renamed.iter_mut().filter(|t| t.fixture_id == "n1") {
        t.text = "Sara Johnson called.".into();
    }
    let r = receipt(
        arm("ctl", 1, (1.0, 1), &out),
        arm("cand", 1, (1.0, 1), &renamed),
        g(1.0),
    );
    let rep = judge(&r);
    let names = candidate(&rep).gates[0]
        .checks
        .iter()
        .find(|c| c.name == "`names` words exactly as the control")
        .unwrap();
    assert_eq!((names.outcome, names.measured), (Outcome::Fail, Some(1.0)));
}

#[test]
fn fail_closed_needs_the_named_reason() {
    let out = good_outputs();
    let g = || ArmGates {
        promote: false,
        expect: Expect::Fail,
        gates: vec![GateSpec::FailClosed(FailClosedGate {
            reason: "Core ML model did not load".into(),
        })],
    };
    let judge_with = |status: ArmStatus, failure: &str| {
        let mut cand = arm("cand", 1, (1.0, 1), &out);
        cand.status = status;
        cand.failure = vec![failure.to_string()];
        let rep = judge(&receipt(arm("ctl", 1, (1.0, 1), &out), cand, g()));
        let a = candidate(&rep).clone();
        // No default validity gate for an arm expected to fail.
        assert_eq!(a.gates.len(), 1);
        a.verdict
    };
    assert_eq!(
        judge_with(
            ArmStatus::Failed,
            "encoder: Core ML model did not load (fell back)"
        ),
        Outcome::Pass
    );
    assert_eq!(
        judge_with(ArmStatus::Failed, "worker killed by SIGSEGV"),
        Outcome::Fail
    );
    assert_eq!(judge_with(ArmStatus::Completed, ""), Outcome::Fail);
}

#[test]
fn validity_fails_an_unsound_measurement() {
    let out = good_outputs();
    let g = || {
        gates(vec![GateSpec::Validity(ValidityGate {
            max_skipped_fraction: 0.01,
        })])
    };
    let mut cand = arm("cand", 1, (1.0, 1), &out);
    cand.phases.retain(|p| p.phase != Phase::IdleEnd);
    cand.series.samples = 98;
    cand.series.skipped_ticks = 2;
    let mut r = receipt(arm("ctl", 1, (1.0, 1), &out), cand, g());
    let refused = r.admission.as_mut().unwrap().checks.last_mut().unwrap();
    refused.admitted = false;
    refused.reasons = vec!["load average 3.10 per core > 1.5".into()];
    let rep = judge(&r);
    let gate = &candidate(&rep).gates[0];
    let by_name = |n: &str| gate.checks.iter().find(|c| c.name == n).unwrap();
    assert_eq!(by_name("arm completed").outcome, Outcome::Pass);
    assert_eq!(by_name("every phase present").outcome, Outcome::Fail);
    assert_eq!(by_name("every phase present").note, "missing: idle_end");
    let skipped = by_name("skipped ticks / ticks due");
    assert_eq!(
        (skipped.outcome, skipped.measured),
        (Outcome::Fail, Some(0.02))
    );
    let host = by_name("host admitted before the arm");
    assert_eq!(host.outcome, Outcome::Fail);
    assert!(
        host.note.contains("before arm cand: load average 3.10"),
        "{}",
        host.note
    );
    assert_eq!(host.evidence[0].file, "admission.json");
    assert_eq!(host.evidence[0].pointer, "/checks/2");
    assert_eq!(candidate(&rep).verdict, Outcome::Fail);

    // A not-runnable arm is invalid.
    let mut cand = arm("cand", 1, (1.0, 1), &out);
    cand.status = ArmStatus::NotRunnable;
    cand.failure = vec!["worker lacks loader:external_encoder_only".into()];
    let rep = judge(&receipt(arm("ctl", 1, (1.0, 1), &out), cand, g()));
    let c = &candidate(&rep).gates[0].checks[0];
    assert_eq!(c.outcome, Outcome::Fail);
    assert!(c.note.starts_with("not runnable: worker lacks"));
}

/// A block run's summary with this interval (12 quads).
fn block_record(lower: f64, ratio: f64, upper: f64) -> OverheadRecord {
    OverheadRecord {
        plan: BlockPlan {
            quads: 12,
            block_requests: 3,
            injected_busy_us: 0,
            toggles: OverheadToggle::Sampler,
        },
        dir: "overhead".into(),
        status: ArmStatus::Completed,
        failure: vec![],
        requests: 145,
        sampled_requests: 70,
        unsampled_requests: 70,
        dropped_requests: 5,
        quad_ratios: vec![ratio; 12],
        ratio: Some(ratio),
        ratio_lower: Some(lower),
        ratio_upper: Some(upper),
        confidence: 0.95,
        problems: vec![],
        cpu: None,
        rounds: vec![],
        budget_quads: None,
    }
}

fn overhead_check(record: Option<OverheadRecord>, tolerance: f64) -> (Outcome, Check) {
    let out = good_outputs();
    let mut cand = arm("cand", 1, (1.0, 1), &out);
    cand.overhead = record;
    let r = receipt(
        arm("ctl", 1, (1.0, 1), &out),
        cand,
        gates(vec![GateSpec::Overhead(OverheadGate {
            tolerance,
            ..OverheadGate::default()
        })]),
    );
    let rep = judge(&r);
    let v = candidate(&rep);
    assert_eq!(v.gates[1].outcome, Outcome::Pass, "validity");
    (v.verdict, v.gates[0].checks[0].clone())
}

#[test]
fn overhead_passes_on_the_upper_end_fails_on_the_lower_and_else_cannot_tell() {
    let record = block_record(1.002, 1.005, 1.008);
    let (verdict, c) = overhead_check(Some(record.clone()), 0.01);
    assert_eq!((verdict, c.outcome), (Outcome::Pass, Outcome::Pass));
    assert_eq!(c.measured, Some(1.005));
    assert_eq!(c.threshold, Some(1.01));
    assert_eq!(c.evidence[0].file, "arms/cand/overhead.json");
    assert_eq!(c.evidence[0].pointer, "/ratio_upper");
    assert!(
        c.note
            .contains("interval 1.0020..1.0080 over 12 ABBA quads"),
        "{}",
        c.note
    );

    // The upper end above the limit, the lower below: never a pass.
    let (verdict, c) = overhead_check(Some(record.clone()), 0.005);
    assert_eq!(
        (verdict, c.outcome),
        (Outcome::NotEvaluated, Outcome::NotEvaluated)
    );
    assert!(c.note.contains("straddles 1 + 0.005"), "{}", c.note);

    let (verdict, c) = overhead_check(Some(block_record(1.03, 1.04, 1.05)), 0.01);
    assert_eq!((verdict, c.outcome), (Outcome::Fail, Outcome::Fail));
    assert!(c.note.contains("lower end above 1 + 0.01"), "{}", c.note);

    // Rounds that spent the budget still straddling: not evaluated, with the
    // quads used and the width reached; the CPU witness beside it.
    let mut spent = record.clone();
    spent.plan.quads = 24;
    spent.budget_quads = Some(24);
    spent.rounds = (1..=3)
        .map(|n| crate::overhead::OverheadRound {
            dir: format!("overhead/round-{n}"),
            quads: 8,
            status: ArmStatus::Completed,
            requests: 33,
            complete_quads: 4,
        })
        .collect();
    spent.cpu = Some(crate::overhead::SamplingCpu {
        requests: 48,
        sampler_ns: 7_200_000,
        marker_path_ns: 2_400_000,
        worker_ns: 3_840_000_000,
        ratio: 0.0025,
    });
    let (verdict, c) = overhead_check(Some(spent), 0.005);
    assert_eq!(verdict, Outcome::NotEvaluated);
    assert!(
        c.note
            .contains("over 12 ABBA quads in 3 rounds (budget 24)")
            && c.note.contains("budget of 24 quads spent (width 0.0060)"),
        "{}",
        c.note
    );
    assert!(
        c.note.ends_with(
            "sampling's own CPU 0.250 % of the worker's (sampler 7.2 ms + marker path 2.4 ms over 3.8 s in 48 sampled requests)"
        ),
        "{}",
        c.note
    );
}

#[test]
fn overhead_without_block_data_is_not_evaluated_and_says_why() {
    let (verdict, c) = overhead_check(None, 0.02);
    assert_eq!(verdict, Outcome::NotEvaluated);
    assert_eq!(c.outcome, Outcome::NotEvaluated);
    assert!(
        c.note.starts_with("no arms/cand/overhead.json"),
        "{}",
        c.note
    );

    let mut record = block_record(1.0, 1.0, 1.0);
    record.ratio_lower = None;
    record.ratio_upper = None;
    record.problems = vec!["4 complete ABBA quads are too few for a 95 % interval".into()];
    let (verdict, c) = overhead_check(Some(record), 0.02);
    assert_eq!(verdict, Outcome::NotEvaluated);
    assert_eq!(
        c.note,
        "4 complete ABBA quads are too few for a 95 % interval"
    );

    // A failed block run is never judged on the requests it did run.
    let mut record = block_record(1.0, 1.0, 1.001);
    record.status = ArmStatus::Failed;
    record.problems = vec!["the block run failed: worker killed by signal SIGKILL (9)".into()];
    let (verdict, c) = overhead_check(Some(record), 0.02);
    assert_eq!(verdict, Outcome::NotEvaluated);
    assert!(
        c.note
            .ends_with("the block run failed: worker killed by signal SIGKILL (9)")
    );
}

#[test]
fn overhead_quads_are_at_least_six() {
    let few = GateSpec::Overhead(OverheadGate {
        quads: 5,
        ..OverheadGate::default()
    });
    assert!(
        few.validate().unwrap_err().message.contains("quads = 5"),
        "{:?}",
        few.validate()
    );
    assert_eq!(
        OverheadGate::default(),
        OverheadGate {
            tolerance: 0.02,
            quads: 48,
            max_quads: None,
            block_requests: 1,
            inject_busy_us: 0,
            toggles: OverheadToggle::Sampler,
        }
    );
}

#[test]
fn the_run_verdict_is_over_promoted_arms_else_every_gated_arm() {
    let out = good_outputs();
    let failing = GateSpec::Memory(MemoryGate {
        ceiling_mib: Some(1.0),
        ..memory_gate(Phase::StateReady)
    });
    let mut r = receipt(
        arm("ctl", 100, (1.0, 1), &out),
        arm("cand", 50, (1.0, 1), &out),
        ArmGates {
            promote: false,
            ..gates(vec![failing.clone()])
        },
    );
    // The control passes its own absolute ceiling and is the one promoted.
    r.run.gates.insert(
        "ctl".into(),
        gates(vec![GateSpec::Memory(MemoryGate {
            ceiling_mib: Some(200.0),
            ..memory_gate(Phase::StateReady)
        })]),
    );
    let rep = judge(&r);
    assert_eq!(rep.judged, JudgedArms::Promoted);
    assert_eq!(rep.judged_arms, ["ctl"]);
    assert_eq!(rep.verdict, Outcome::Pass);
    assert_eq!(candidate(&rep).verdict, Outcome::Fail);

    r.run.gates.get_mut("ctl").unwrap().promote = false;
    let rep = judge(&r);
    assert_eq!(rep.judged, JudgedArms::AllGated);
    assert_eq!(rep.judged_arms, ["ctl", "cand"]);
    assert_eq!(rep.verdict, Outcome::Fail);

    r.run.gates.clear();
    assert!(evaluate(&r).is_none(), "no gates, no verdict");
}

#[test]
fn declarations_are_checked() {
    let mut m = memory_gate(Phase::StateReady);
    assert!(
        GateSpec::Memory(m.clone()).validate().is_err(),
        "no threshold"
    );
    m.min_reduction = Some(1.0);
    let err = GateSpec::Memory(m.clone()).validate().unwrap_err();
    assert_eq!(err.key, "min_reduction");
    assert!(err.message.contains("[0, 1)"), "{err}");
    m.min_reduction = Some(0.1);
    m.ceiling_mib = Some(10.0);
    assert!(
        GateSpec::Memory(m.clone())
            .validate()
            .unwrap_err()
            .message
            .contains("exactly one")
    );
    m.min_reduction = None;
    let ceiling = GateSpec::Memory(m.clone());
    assert!(!ceiling.needs_control());
    // Every number has a range; NaN and infinities never pass.
    for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e300] {
        m.ceiling_mib = Some(bad);
        let err = GateSpec::Memory(m.clone()).validate().unwrap_err();
        assert_eq!(err.key, "ceiling_mib", "{bad}");
        assert!(err.message.contains("out of range: allowed"), "{err}");
    }
    let quads = GateSpec::Overhead(OverheadGate {
        quads: u32::MAX,
        ..OverheadGate::default()
    });
    assert_eq!(quads.validate().unwrap_err().key, "quads");
    // A budget below the first round, or beyond the bound, names its key.
    for max in [7, 2_001] {
        let budget = GateSpec::Overhead(OverheadGate {
            quads: 8,
            max_quads: Some(max),
            ..OverheadGate::default()
        });
        assert_eq!(budget.validate().unwrap_err().key, "max_quads", "{max}");
    }
    // Toggling attribution leaves the sampler on in both blocks, so a cost
    // injected into the sampler would be in both: refused, naming the key.
    let injected = GateSpec::Overhead(OverheadGate {
        inject_busy_us: 4000,
        toggles: OverheadToggle::Attribution,
        ..OverheadGate::default()
    });
    let err = injected.validate().unwrap_err();
    assert_eq!(err.key, "inject_busy_us");
    assert!(err.message.contains("toggles = \"attribution\""), "{err:?}");
    let tolerance = GateSpec::Latency(LatencyGate {
        tolerance: f64::NAN,
    });
    assert_eq!(tolerance.validate().unwrap_err().key, "tolerance");
    let parity = ArmGates {
        gates: vec![GateSpec::Parity(ParityGate {})],
        ..ArmGates::default()
    };
    assert!(parity.validate(false).unwrap_err().contains("control = "));
    assert!(parity.validate(true).is_ok());
    let expect_fail = ArmGates {
        expect: Expect::Fail,
        ..ArmGates::default()
    };
    assert!(
        expect_fail
            .validate(false)
            .unwrap_err()
            .contains("fail_closed")
    );
}

/// A soak section: worker resident from `worker(i)`, shared memory from
/// `shmem(i)`, 300 requests, judged with the default thresholds.
fn soaked(
    worker: impl Fn(u64) -> f64,
    shmem: impl Fn(u64) -> f64,
) -> analysis::stability::Stability {
    use analysis::growth::{self, GrowthSettings, Point};
    let settings = analysis::stability::SoakSettings {
        growth: GrowthSettings::default(),
        system_slope_bytes_per_request: 16_384.0,
        settle_ms: 0,
        lifecycle: None,
    };
    let points = |f: &dyn Fn(u64) -> f64| -> Vec<Point> {
        (0..300)
            .map(|i| Point {
                request: i,
                t_ns: i * 1_000_000_000,
                bytes: f(i),
            })
            .collect()
    };
    let w = growth::analyse("worker_resident", &points(&worker), &settings.growth);
    let sys_settings = GrowthSettings {
        linear_slope_bytes_per_request: settings.system_slope_bytes_per_request,
        ..settings.growth.clone()
    };
    let s = growth::analyse("sys_shmem", &points(&shmem), &sys_settings);
    let worker_class = w.classification;
    let flagged = growth::system_grows_while_worker_flat(worker_class, std::slice::from_ref(&s));
    let stable = analysis::stability::verdict(worker_class, std::slice::from_ref(&s));
    analysis::stability::Stability {
        settings,
        mode: analysis::stability::SoakMode::Requests,
        lifecycle: None,
        covariates: None,
        requests: 300,
        worker: worker_class,
        worker_series: vec![w],
        settled_series: vec![],
        system_series: vec![s],
        host_used: None,
        system_growth_while_worker_flat: flagged,
        device_series: Vec::new(),
        device_growth_while_resident_flat: Vec::new(),
        peak_footprint_bytes: None,
        peak_resident_bytes: None,
        p95_latency_ns: None,
        stable,
    }
}

fn stability_verdict(stability: Option<analysis::stability::Stability>) -> GateResult {
    let out = good_outputs();
    let mut cand = arm("cand", 1, (1.0, 1), &out);
    cand.stability = stability;
    let r = receipt(
        arm("ctl", 1, (1.0, 1), &out),
        cand,
        gates(vec![GateSpec::Stability(StabilityGate {})]),
    );
    let rep = judge(&r);
    let v = candidate(&rep);
    assert_eq!(v.gates[1].kind, "validity");
    v.gates[0].clone()
}

#[test]
fn stability_passes_a_plateau_and_fails_a_leak() {
    let flat = |_| 40.0 * MIB as f64;
    let g = stability_verdict(Some(soaked(flat, flat)));
    assert_eq!(g.kind, "stability");
    assert_eq!(g.outcome, Outcome::Pass);
    let verdict = g.checks.last().unwrap();
    assert_eq!(verdict.name, "soak verdict");
    assert_eq!(verdict.measured, Some(1.0));
    assert_eq!(verdict.evidence[0].pointer, "/arms/1/stability/stable");

    // 64 KiB per request: the worker grows.
    let leak = |i| 40.0 * MIB as f64 + i as f64 * 65_536.0;
    let g = stability_verdict(Some(soaked(leak, flat)));
    assert_eq!(g.outcome, Outcome::Fail);
    let worker = &g.checks[0];
    assert_eq!(worker.name, "worker_resident growth");
    assert_eq!(worker.outcome, Outcome::Fail);
    assert_eq!(worker.measured, Some(65_536.0));
    assert_eq!(worker.threshold, Some(4096.0));
    assert_eq!(
        worker.evidence[0].pointer,
        "/arms/1/stability/worker_series/0"
    );
    let verdict = g.checks.last().unwrap();
    assert_eq!(verdict.outcome, Outcome::Fail);
    assert!(
        verdict.note.starts_with(
            "not stable: worker linear_growth; growing: worker_resident tail slope 64.00 KiB/request [64.00, 64.00]"
        ),
        "{}",
        verdict.note
    );
}

#[test]
fn stability_checks_the_settled_series_beside_the_request_end_ones() {
    use analysis::growth::{self, Point};
    let flat = |_| 40.0 * MIB as f64;
    let mut soak = soaked(flat, flat);
    // Memory that stays after each request's settle period: 64 KiB per request.
    let points: Vec<Point> = (0..300)
        .map(|i| Point {
            request: i,
            t_ns: i * 1_000_000_000,
            bytes: 40.0 * MIB as f64 + i as f64 * 65_536.0,
        })
        .collect();
    let settled = growth::analyse("settled_resident", &points, &soak.settings.growth);
    soak.worker = growth::worst(&[&soak.worker_series[0], &settled]);
    soak.settled_series = vec![settled];
    soak.stable = analysis::stability::verdict(soak.worker, &soak.system_series);
    let g = stability_verdict(Some(soak));
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.checks[0].outcome, Outcome::Pass, "request_end is flat");
    let settled = &g.checks[1];
    assert_eq!(settled.name, "settled_resident growth");
    assert_eq!(settled.outcome, Outcome::Fail);
    assert_eq!(settled.measured, Some(65_536.0));
    assert_eq!(
        settled.evidence[0].pointer,
        "/arms/1/stability/settled_series/0"
    );
    let verdict = g.checks.last().unwrap();
    assert!(
        verdict.note.contains("growing: settled_resident"),
        "{}",
        verdict.note
    );
}

#[test]
fn stability_fails_system_growth_under_a_flat_worker() {
    let flat = |_| 40.0 * MIB as f64;
    // 256 KiB of shared memory per request while the worker stays put: seed 001.
    let shm = |i| i as f64 * 262_144.0;
    let g = stability_verdict(Some(soaked(flat, shm)));
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.checks[0].outcome, Outcome::Pass, "the worker is flat");
    let sys = &g.checks[1];
    assert_eq!(sys.name, "sys_shmem growth");
    assert_eq!(sys.outcome, Outcome::Fail);
    assert_eq!(sys.threshold, Some(16_384.0));
    assert!(sys.note.starts_with("system memory grows while the worker"));
    assert_eq!(g.checks[2].outcome, Outcome::Fail);
}

#[test]
fn stability_is_not_evaluated_without_a_soak_or_when_inconclusive() {
    let g = stability_verdict(None);
    assert_eq!(g.outcome, Outcome::NotEvaluated);
    assert!(g.checks[0].note.contains("not soaked"));

    // A slope of exactly the threshold: its interval straddles it.
    let flat = |_| 40.0 * MIB as f64;
    let edge = |i| 40.0 * MIB as f64 + i as f64 * 4096.0 + if i % 2 == 0 { 0.0 } else { 8192.0 };
    let s = soaked(edge, flat);
    assert_eq!(s.stable, None);
    let g = stability_verdict(Some(s));
    assert_eq!(g.outcome, Outcome::NotEvaluated);
    let verdict = g.checks.last().unwrap();
    assert_eq!(verdict.outcome, Outcome::NotEvaluated);
    assert!(
        verdict
            .note
            .starts_with("inconclusive (worker inconclusive)")
    );
}

fn with_residency(mut a: ArmReceipt, idle_mib: f64, stop_to_final_ms: Option<f64>) -> ArmReceipt {
    let stop_to_final = stop_to_final_ms.map(|ms| analysis::residency::StopToFinal {
        count: 3,
        p50_ns: ms * 0.5e6,
        p95_ns: ms * 1e6,
        max_ns: (ms * 1.2e6) as u64,
    });
    a.residency = Some(analysis::residency::ResidencyReceipt {
        policy: "load_on_speech".into(),
        unload_after_idle_ms: None,
        request_mode: "realtime".into(),
        chunk_ms: Some(100),
        releases: 3,
        reloads: 3,
        stop_to_final,
        idle_mean_footprint_bytes: Some(idle_mib * MIB as f64),
        idle_min_footprint_bytes: Some((idle_mib * MIB as f64) as u64),
        peak_footprint_bytes: None,
        peak_resident_bytes: None,
        by_gap: vec![],
        windows: vec![],
        release_drops: vec![],
        requests: vec![],
    });
    a
}

fn idle_gate(min_reduction: f64, ceiling_ms: f64) -> GateSpec {
    GateSpec::IdleResidency(IdleResidencyGate {
        min_reduction,
        stop_to_final_ceiling_ms: ceiling_ms,
    })
}

fn idle_checks(control_idle: f64, arm_idle: f64, stf: Option<f64>, gate: GateSpec) -> GateResult {
    let control = with_residency(
        arm("ctl", 100, (10.0, 12), &good_outputs()),
        control_idle,
        Some(400.0),
    );
    let cand = with_residency(arm("cand", 100, (10.0, 12), &good_outputs()), arm_idle, stf);
    let r = receipt(control, cand, gates(vec![gate]));
    let report = evaluate(&r).unwrap();
    report.arms[0]
        .gates
        .iter()
        .find(|g| g.kind == "idle_residency")
        .unwrap()
        .clone()
}

#[test]
fn idle_residency_passes_with_less_idle_ram_under_the_ceiling() {
    // 160 MiB idle resident against 40 MiB released: a 75 % cut.
    let g = idle_checks(160.0, 40.0, Some(900.0), idle_gate(0.5, 1000.0));
    assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
    assert_eq!(g.checks[0].name, "idle mean footprint");
    assert_eq!(g.checks[0].threshold, Some(80.0 * MIB as f64));
    assert_eq!(g.checks[0].measured, Some(40.0 * MIB as f64));
    assert_eq!(
        g.checks[0].evidence[0].pointer,
        "/arms/1/residency/idle_mean_footprint_bytes"
    );
    assert_eq!(g.checks[1].measured, Some(900e6));
    assert_eq!(g.checks[1].threshold, Some(1000e6));
}

#[test]
fn idle_residency_fails_on_too_little_saving_or_a_slow_final() {
    let g = idle_checks(160.0, 100.0, Some(900.0), idle_gate(0.5, 1000.0));
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.checks[0].outcome, Outcome::Fail);
    assert_eq!(g.checks[1].outcome, Outcome::Pass);
    let g = idle_checks(160.0, 40.0, Some(1500.0), idle_gate(0.5, 1000.0));
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.checks[0].outcome, Outcome::Pass);
    assert_eq!(g.checks[1].outcome, Outcome::Fail);
}

#[test]
fn idle_residency_without_timings_or_a_residency_section_is_not_evaluated() {
    let g = idle_checks(160.0, 40.0, None, idle_gate(0.5, 1000.0));
    assert_eq!(g.outcome, Outcome::NotEvaluated);
    assert!(g.checks[1].note.contains("no request timings"), "{g:?}");
    let control = arm("ctl", 100, (10.0, 12), &good_outputs());
    let cand = with_residency(
        arm("cand", 100, (10.0, 12), &good_outputs()),
        40.0,
        Some(10.0),
    );
    let r = receipt(control, cand, gates(vec![idle_gate(0.5, 1000.0)]));
    let report = evaluate(&r).unwrap();
    let g = &report.arms[0].gates[0];
    assert_eq!(g.checks[0].outcome, Outcome::NotEvaluated);
    assert!(g.checks[0].note.contains("no idle footprint"));
    assert_eq!(report.arms[0].verdict, Outcome::NotEvaluated);
}

#[test]
fn idle_residency_parameters_are_bounded() {
    for (gate, key) in [
        (idle_gate(1.0, 100.0), "min_reduction"),
        (idle_gate(0.5, 0.0), "stop_to_final_ceiling_ms"),
        (idle_gate(0.5, f64::NAN), "stop_to_final_ceiling_ms"),
    ] {
        assert_eq!(gate.validate().unwrap_err().key, key);
    }
    assert!(gates(vec![idle_gate(0.5, 100.0)]).validate(false).is_err());
}

/// A runtime report whose external encoder process measured itself at
/// `process_start`, `model_loaded` and `state_ready` (footprint, MiB).
fn with_encoder_process(mut a: ArmReceipt, footprint_mib: [u64; 3]) -> ArmReceipt {
    let step = |mib: u64| serde_json::json!({"resident_bytes": (mib + 8) * MIB, "footprint_bytes": mib * MIB, "virtual_bytes": 4 * mib * MIB});
    let runtime: worker_contract::RuntimeReport = serde_json::from_value(serde_json::json!({
        "runtime": "whisper.cpp", "runtime_version": "1.8.3", "system_info": "",
        "worker_executable": "w", "worker_sha256": null,
        "model": {"path": "m", "bytes": 1, "sha256": "00", "ftype": 1, "n_vocab": 1,
                  "n_audio_layer": 1, "n_text_layer": 1},
        "coreml": null, "state_count": 1, "initializer": "no_state", "settings": {},
        "topology": worker_contract::Topology::from_log(std::iter::empty::<&str>()),
        "load_ns": 0, "state_ns": 0,
        "external_encoder": {"pid": 7, "model": "e.bin", "model_sha256": "00",
            "layout": "encoder_only", "max_audio_ctx": 0,
            "memory": {"process_start": step(footprint_mib[0]),
                       "model_loaded": step(footprint_mib[1]),
                       "state_ready": step(footprint_mib[2])}}
    }))
    .expect("a runtime report");
    a.speech.as_mut().unwrap().runtime = Some(runtime);
    a
}

/// `footprint_bytes` at `model_loaded` of every row of `a` set to `mib`.
fn footprint_at(mut a: ArmReceipt, phase: Phase, mib: u64) -> ArmReceipt {
    for row in a.phases.iter_mut().filter(|r| r.phase == phase) {
        row.memory.footprint_bytes = Some(mib * MIB);
    }
    a
}

#[test]
fn the_worker_and_its_encoder_process_are_judged_as_a_pair() {
    let out = good_outputs();
    let gate = GateSpec::Memory(MemoryGate {
        field: MemoryField::FootprintBytes,
        control_factor: Some(1.0),
        with_encoder_process: true,
        ..memory_gate(Phase::ModelLoaded)
    });
    // Stock holds 100 MiB; the split worker 60 and its encoder process 41
    // (1 MiB baseline + 40): 101 MiB ≤ 100 + 1.
    let stock = footprint_at(
        arm("ctl", 100, (1e6, 2_000_000), &out),
        Phase::ModelLoaded,
        100,
    );
    let split = |encoder_loaded: u64| {
        with_encoder_process(
            footprint_at(
                arm("cand", 100, (1e6, 2_000_000), &out),
                Phase::ModelLoaded,
                60,
            ),
            [1, encoder_loaded, encoder_loaded + 5],
        )
    };
    let r = receipt(stock.clone(), split(41), gates(vec![gate.clone()]));
    let rep = judge(&r);
    let c = &candidate(&rep).gates[0].checks[0];
    assert_eq!(c.outcome, Outcome::Pass, "{c:?}");
    assert_eq!(
        c.name,
        "model_loaded footprint_bytes with the encoder process"
    );
    assert_eq!(c.measured, Some((101 * MIB) as f64));
    assert_eq!(c.control, Some((100 * MIB) as f64));
    assert_eq!(c.threshold, Some((101 * MIB) as f64));
    assert_eq!(
        c.evidence[1].pointer,
        "/arms/1/speech/runtime/external_encoder/memory/model_loaded/footprint_bytes"
    );
    assert!(
        c.note.ends_with(
            "(the control's worker × 1 + this arm's encoder process at process_start (1.00 MiB))"
        ),
        "{}",
        c.note
    );

    // A duplicate the split adds (2 MiB) fails it.
    let r = receipt(stock.clone(), split(43), gates(vec![gate.clone()]));
    assert_eq!(candidate(&judge(&r)).gates[0].outcome, Outcome::Fail);

    // Where the process recorded its runtime_ready step (its runtime started,
    // no weight read: 3 MiB), that is its baseline: 60 + 43 ≤ 100 + 3.
    let mut ready = split(43);
    let steps = ready.speech.as_mut().unwrap().runtime.as_mut().unwrap();
    let steps = steps
        .external_encoder
        .as_mut()
        .unwrap()
        .memory
        .as_mut()
        .unwrap();
    steps.runtime_ready = Some(worker_contract::EncoderMemory {
        resident_bytes: 11 * MIB,
        footprint_bytes: Some(3 * MIB),
        virtual_bytes: 12 * MIB,
    });
    let r = receipt(stock.clone(), ready, gates(vec![gate.clone()]));
    let rep = judge(&r);
    let c = &candidate(&rep).gates[0].checks[0];
    assert_eq!(c.outcome, Outcome::Pass, "{c:?}");
    assert_eq!(c.threshold, Some((103 * MIB) as f64));
    assert!(
        c.note
            .ends_with("encoder process at runtime_ready (3.00 MiB))"),
        "{}",
        c.note
    );

    // An arm without an encoder process is not judged as a pair.
    let plain = footprint_at(
        arm("cand", 100, (1e6, 2_000_000), &out),
        Phase::ModelLoaded,
        60,
    );
    let r = receipt(stock, plain, gates(vec![gate]));
    let rep = judge(&r);
    let c = &candidate(&rep).gates[0].checks[0];
    assert_eq!(c.outcome, Outcome::NotEvaluated);
    assert!(c.note.contains("no external encoder process"), "{}", c.note);
}

#[test]
fn a_pair_gate_names_what_the_encoder_process_cannot_report() {
    let bad_phase = GateSpec::Memory(MemoryGate {
        field: MemoryField::FootprintBytes,
        control_factor: Some(1.0),
        with_encoder_process: true,
        ..memory_gate(Phase::RequestEnd)
    });
    let err = bad_phase.validate().unwrap_err().to_string();
    assert!(err.contains("not at request_end"), "{err}");
    let bad_field = GateSpec::Memory(MemoryGate {
        field: MemoryField::Peak,
        control_factor: Some(1.0),
        with_encoder_process: true,
        ..memory_gate(Phase::StateReady)
    });
    let err = bad_field.validate().unwrap_err().to_string();
    assert!(err.contains("not peak"), "{err}");
}

#[test]
fn stability_fails_a_harness_that_grew_and_leaves_the_soak_verdict_alone() {
    let flat = |_| 40.0 * MIB as f64;
    let out = good_outputs();
    let judged = |low: Option<f64>| {
        let mut cand = arm("cand", 1, (1.0, 1), &out);
        cand.stability = Some(soaked(flat, flat));
        cand.harness_self = low.map(harness_growing_at_least);
        let r = receipt(
            arm("ctl", 1, (1.0, 1), &out),
            cand,
            gates(vec![GateSpec::Stability(StabilityGate {})]),
        );
        candidate(&judge(&r)).gates[0].clone()
    };
    // 4 MiB an hour at the least: memqual itself grew.
    let g = judged(Some(4.0 * MIB as f64));
    assert_eq!(g.outcome, Outcome::Fail);
    let c = g
        .checks
        .iter()
        .find(|c| c.name == "harness_resident growth")
        .unwrap();
    assert_eq!(c.outcome, Outcome::Fail);
    assert_eq!(c.measured, Some(4.0 * MIB as f64));
    assert_eq!(c.evidence[0].pointer, "/arms/1/harness_self");
    let verdict = g.checks.last().unwrap();
    assert_eq!(verdict.name, "soak verdict");
    assert_eq!(verdict.outcome, Outcome::Pass, "the worker is judged alone");
    // Below the threshold it passes; without a slope there is no check.
    assert_eq!(judged(Some(0.0)).outcome, Outcome::Pass);
    let short = judged(None);
    assert_eq!(short.outcome, Outcome::Pass);
    assert!(
        short
            .checks
            .iter()
            .all(|c| c.name != "harness_resident growth")
    );
}

/// A `harness_self` section whose slope interval starts at `low` bytes per
/// hour (as the assembly judges it: grew when above the threshold).
fn harness_growing_at_least(low: f64) -> crate::harness_self::HarnessSelf {
    use crate::harness_self::{GROWTH_THRESHOLD_BYTES_PER_HOUR, HarnessSelf};
    HarnessSelf {
        samples: 120,
        wall_s: 7200.0,
        first_resident_bytes: Some(20 * MIB),
        last_resident_bytes: Some(30 * MIB),
        max_resident_bytes: Some(30 * MIB),
        peak_resident_bytes: Some(31 * MIB),
        resident_bytes_per_hour: Some(analysis::growth::Slope {
            estimate: low + 1024.0,
            low,
            high: low + 2048.0,
        }),
        growth_threshold_bytes_per_hour: GROWTH_THRESHOLD_BYTES_PER_HOUR,
        grew: low > GROWTH_THRESHOLD_BYTES_PER_HOUR,
        reason: "hand-made".into(),
        cpu_s: Some(12.0),
        sampler_cpu_s: Some(3.0),
        sampler_cpu_share: Some(3.0 / 7200.0),
    }
}
