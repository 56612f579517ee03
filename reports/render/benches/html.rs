//! `report.html` for a 30-minute calibration-like arm sampled at 50 ms
//! (36,000 rows per series): time to render, and the page's size (printed).
//! Issue target: ≤ 2 s and ≤ 3 MB.

use criterion::{Criterion, criterion_group, criterion_main};
use render::html::{PageData, Point, render};
use reports::receipt::{ArmReceipt, PhaseRow, Receipt, SeriesSummary};
use reports::record::RunInfo;
use sampler::{Phase, TaskMemory};
use std::collections::BTreeMap;
use std::hint::black_box;

const ROWS: u64 = 36_000;
const PERIOD_NS: u64 = 50_000_000;
const MIB: u64 = 1 << 20;

fn phase_row(phase: Phase, seq: u64, request_id: Option<u64>, t_ns: u64, mib: u64) -> PhaseRow {
    PhaseRow {
        phase,
        seq,
        request_id,
        t_ns,
        memory: TaskMemory {
            resident_bytes: mib * MIB,
            resident_peak_bytes: Some((mib + 3) * MIB),
            ..TaskMemory::default()
        },
        window_start_ns: seq
            .checked_sub(1)
            .map(|_| t_ns.saturating_sub(PERIOD_NS * 10)),
        samples: 10,
        series_max_resident_bytes: Some(mib * MIB),
        series_max_footprint_bytes: None,
        observed_max_resident_bytes: mib * MIB,
        observed_max_footprint_bytes: None,
        peak_between_samples: Some(false),
        series_max_gpu_worker_bytes: None,
        system: None,
    }
}

/// An arm with 100 requests spread over the 30 minutes and a slow leak.
fn arm() -> (ArmReceipt, Vec<Point>) {
    let end = ROWS * PERIOD_NS;
    let mut phases = vec![
        phase_row(Phase::ProcessStart, 0, None, 0, 5),
        phase_row(Phase::ModelLoaded, 1, None, PERIOD_NS * 20, 250),
        phase_row(Phase::StateReady, 2, None, PERIOD_NS * 40, 270),
        phase_row(Phase::WarmupDone, 3, None, PERIOD_NS * 60, 280),
    ];
    let span = (end - PERIOD_NS * 200) / 100;
    for r in 0..100u64 {
        let t = PERIOD_NS * 100 + r * span;
        let seq = phases.len() as u64;
        phases.push(phase_row(Phase::RequestBegin, seq, Some(r), t, 280 + r));
        phases.push(phase_row(
            Phase::RequestEnd,
            seq + 1,
            Some(r),
            t + span / 2,
            281 + r,
        ));
    }
    let seq = phases.len() as u64;
    phases.push(phase_row(
        Phase::IdleEnd,
        seq,
        None,
        end - PERIOD_NS * 50,
        380,
    ));
    phases.push(phase_row(Phase::TeardownDone, seq + 1, None, end, 6));
    let points = (0..ROWS)
        .map(|i| {
            let base = 280.0 + i as f64 / ROWS as f64 * 100.0;
            let wiggle = ((i * 7919) % 97) as f64 / 10.0;
            Point {
                t_s: (i * PERIOD_NS) as f64 / 1e9,
                resident_mib: Some(base + wiggle),
                footprint_mib: Some(base - 20.0 + wiggle),
            }
        })
        .collect();
    let arm = ArmReceipt {
        series: SeriesSummary {
            samples: ROWS,
            ..SeriesSummary::default()
        },
        ..ArmReceipt::completed("calibration-30min", phases, 100)
    };
    (arm, points)
}

fn receipt(arm: ArmReceipt) -> Receipt {
    Receipt {
        format_version: reports::RECEIPT_FORMAT_VERSION.into(),
        identity: None,
        integrity: reports::receipt::Integrity::default(),
        run: RunInfo {
            protocol_name: "bench".into(),
            protocol_path: "bench.toml".into(),
            page_size_bytes: 4096,
            arms: vec![arm.id.clone()],
            ..RunInfo::default()
        },
        arms: vec![arm],
        comparisons: vec![],
        admission: None,
        gates: None,
        seal: None,
    }
}

fn html(c: &mut Criterion) {
    let (arm, points) = arm();
    let r = receipt(arm);
    let series: BTreeMap<String, (u64, Vec<Point>)> = [(r.arms[0].id.clone(), (0, points))].into();
    // 100 requests of 1.0–1.99 s.
    let latencies: BTreeMap<String, Vec<u64>> = [(
        r.arms[0].id.clone(),
        (0..100u64)
            .map(|i| 1_000_000_000 + i * 10_000_000)
            .collect(),
    )]
    .into();
    let data = PageData {
        series,
        reduced: BTreeMap::new(),
        latencies_ns: latencies,
        history: None,
    };
    let page = render(&r, &data);
    eprintln!(
        "report.html for {ROWS} samples per series: {} bytes ({:.2} MB)",
        page.len(),
        page.len() as f64 / 1e6
    );
    let mut group = c.benchmark_group("report.html");
    group.sample_size(10);
    group.bench_function("render 36,000-sample series", |b| {
        b.iter(|| black_box(render(&r, &data)))
    });
    group.finish();
}

criterion_group!(benches, html);
criterion_main!(benches);
