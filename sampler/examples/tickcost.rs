//! Tick cost as the external sampler pays it: thread CPU time of one
//! per-process and one system sample, taken after an idle gap like the real
//! cadence (criterion's back-to-back loop measures warm caches only).
//!
//! `cargo run --release -p sampler --example tickcost -- [PID] [GAP_MS] [TICKS]`

use sampler::{ProcessProbe, SeriesRow, SystemProbe, clock};
use std::time::Duration;

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn median_us(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e3
}

fn main() -> Result<(), sampler::SamplerError> {
    let pid: i32 = arg(1, std::process::id() as i32);
    let gap_ms: u64 = arg(2, 50);
    let ticks: usize = arg(3, 200).max(1);
    let mut process = ProcessProbe::new(pid)?;
    let mut system = SystemProbe::new();
    let (mut p, mut s) = (Vec::with_capacity(ticks), Vec::with_capacity(ticks));
    for _ in 0..ticks {
        std::thread::sleep(Duration::from_millis(gap_ms));
        let mut row = SeriesRow::default();
        let a = clock::thread_cpu_ns();
        process.sample(&mut row)?;
        let b = clock::thread_cpu_ns();
        let _ = system.sample(&mut row);
        let c = clock::thread_cpu_ns();
        p.push(b - a);
        s.push(c - b);
    }
    let total: Vec<u64> = p.iter().zip(&s).map(|(a, b)| a + b).collect();
    println!(
        "pid {pid}, {ticks} ticks {gap_ms} ms apart, median CPU per tick: process {:.1} µs, system {:.1} µs, total {:.1} µs",
        median_us(p),
        median_us(s),
        median_us(total)
    );
    Ok(())
}
