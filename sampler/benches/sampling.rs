//! Sampler cost: one in-process snapshot (what every marker pays inside the
//! worker) and one external tick (per-process + system), the sampler's
//! whole per-period work. Issue target on Linux: a tick ≤ 50 µs of CPU.

use criterion::{Criterion, criterion_group, criterion_main};
use sampler::{MarkerRecorder, Phase, ProcessProbe, SeriesRow, SystemProbe, snapshot_self};
use std::hint::black_box;

fn in_process(c: &mut Criterion) {
    c.bench_function("snapshot_self", |b| {
        b.iter(|| black_box(snapshot_self().unwrap()))
    });
    let mut rec = MarkerRecorder::new();
    c.bench_function("marker (snapshot + peak reset)", |b| {
        b.iter(|| black_box(rec.mark(Phase::ProcessStart, None).unwrap()))
    });
}

fn external(c: &mut Criterion) {
    let pid = std::process::id() as i32;
    let mut probe = ProcessProbe::new(pid).unwrap();
    let mut system = SystemProbe::new();
    c.bench_function("tick: process", |b| {
        b.iter(|| {
            let mut row = SeriesRow::default();
            probe.sample(&mut row).unwrap();
            black_box(row)
        })
    });
    c.bench_function("tick: system", |b| {
        b.iter(|| {
            let mut row = SeriesRow::default();
            let _ = system.sample(&mut row);
            black_box(row)
        })
    });
    c.bench_function("tick: process + system", |b| {
        b.iter(|| {
            let mut row = SeriesRow::default();
            probe.sample(&mut row).unwrap();
            let _ = system.sample(&mut row);
            black_box(row)
        })
    });
}

criterion_group!(benches, in_process, external);
criterion_main!(benches);
