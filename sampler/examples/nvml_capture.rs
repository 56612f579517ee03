//! Prints what NVML reports for every device (memory and the processes the
//! driver lists, with their device memory) as JSON, and the reduction for
//! one pid: the capture the device-memory tests replay.
//!
//! `cargo run --release -p sampler --example nvml_capture -- [PID] [READS]`
//!
//! With READS, it also times that many further reads (what one sampler
//! tick adds) and prints their median and 99th percentile on stderr.

use sampler::device::{DeviceProbe, DeviceSource, summarise};

fn main() {
    let pid: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(std::process::id);
    let probe = match DeviceProbe::open(&DeviceSource::Auto) {
        Ok(p) => p,
        Err(why) => {
            eprintln!("nvml_capture: {why}");
            std::process::exit(1);
        }
    };
    let t0 = std::time::Instant::now();
    let devices = match probe.read() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("nvml_capture: {e}");
            std::process::exit(1);
        }
    };
    let read_us = t0.elapsed().as_secs_f64() * 1e6;
    let json = serde_json::to_string_pretty(&devices).unwrap_or_default();
    println!("{json}");
    let reads: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut us: Vec<f64> = Vec::with_capacity(reads);
    for _ in 0..reads {
        let t = std::time::Instant::now();
        if probe.read().is_err() {
            break;
        }
        us.push(t.elapsed().as_secs_f64() * 1e6);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    us.sort_by(f64::total_cmp);
    if let (Some(median), Some(p99)) = (us.get(us.len() / 2), us.get(us.len() * 99 / 100)) {
        eprintln!(
            "{} further reads: median {median:.0} µs, p99 {p99:.0} µs",
            us.len()
        );
    }
    let r = summarise(pid, &devices);
    eprintln!(
        "driver {} · one read {read_us:.0} µs · pid {pid}: worker {:?} B, used {} B, total {} B, others {} B",
        probe.driver(),
        r.worker_bytes,
        r.used_bytes,
        r.total_bytes,
        r.others_bytes
    );
}
