//! Quiet-host admission: watch the host for a window and admit it only if
//! it is quiet (load, available memory, swap activity, memory pressure,
//! thermal). Linux readings come from `procfs`; temperatures from `sysinfo`.
//! macOS readings come from the sampler's system probe (swap-ins/outs from
//! `host_statistics64`, `vm.swapusage`, `kern.memorystatus_vm_pressure_level`),
//! the thermal pressure level from libnotify, load and available memory
//! from `sysinfo`.

use reports::admission::{AdmissionCheck, AdmissionThresholds, HostObservation};
use sampler::darwin::{PressureLevel, ThermalPressure};
use std::time::{Duration, Instant};

/// Overrides the protocol's window (milliseconds), so tests can keep it short.
pub const WINDOW_ENV: &str = "MEMQUAL_ADMISSION_WINDOW_MS";

/// Samples taken across one window (the first at its start, the last at its end).
const SAMPLES_PER_WINDOW: u32 = 5;

/// The window to use: the environment override, else the protocol's.
pub fn window(thresholds: &AdmissionThresholds) -> Duration {
    let ms = std::env::var(WINDOW_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| reports::admission::WINDOW_MS.check(WINDOW_ENV, *ms).is_ok())
        .unwrap_or(thresholds.window_ms);
    Duration::from_millis(ms)
}

/// One instant's readings.
#[derive(Debug, Default, Clone)]
struct Reading {
    load_1m: Option<f64>,
    available_bytes: Option<u64>,
    pswpin: Option<u64>,
    pswpout: Option<u64>,
    psi_some_avg10: Option<f64>,
    pressure_level: Option<i32>,
    swap_used_bytes: Option<u64>,
    thermal_pressure: Option<u64>,
}

/// Adds `what: e` to the not-reported list once per window.
fn note_once(not_reported: &mut Vec<String>, what: &str, e: &dyn std::fmt::Display) {
    let line = format!("{what}: {e}");
    if !not_reported.contains(&line) {
        not_reported.push(line);
    }
}

#[cfg(target_os = "linux")]
fn read(not_reported: &mut Vec<String>) -> Reading {
    use procfs::Current;
    let mut note = |what: &str, e: &dyn std::fmt::Display| note_once(not_reported, what, e);
    let mut r = Reading::default();
    match procfs::LoadAverage::current() {
        Ok(l) => r.load_1m = Some(f64::from(l.one)),
        Err(e) => note("load average", &e),
    }
    match procfs::Meminfo::current() {
        Ok(m) => match m.mem_available {
            Some(a) => r.available_bytes = Some(a),
            None => note(
                "available memory",
                &"MemAvailable missing from /proc/meminfo",
            ),
        },
        Err(e) => note("available memory", &e),
    }
    match procfs::vmstat() {
        Ok(v) => {
            r.pswpin = v.get("pswpin").map(|x| *x as u64);
            r.pswpout = v.get("pswpout").map(|x| *x as u64);
        }
        Err(e) => note("swap activity", &e),
    }
    match procfs::MemoryPressure::current() {
        Ok(p) => r.psi_some_avg10 = Some(f64::from(p.some.avg10)),
        Err(e) => note("memory pressure (PSI)", &e),
    }
    r
}

#[cfg(target_os = "macos")]
fn read(not_reported: &mut Vec<String>) -> Reading {
    let mut system = sysinfo::System::new();
    system.refresh_memory();
    let mut row = sampler::SeriesRow {
        t_ns: sampler::clock::monotonic_ns(),
        ..sampler::SeriesRow::default()
    };
    // A failed read leaves its fields `None`; the others are still filled.
    if let Err(e) = sampler::SystemProbe::new().sample(&mut row) {
        note_once(not_reported, "system memory", &e);
    }
    let thermal_pressure = sampler::thermal_pressure_state()
        .map_err(|e| note_once(not_reported, "thermal pressure", &e))
        .ok();
    Reading {
        load_1m: Some(sysinfo::System::load_average().one),
        available_bytes: Some(system.available_memory()),
        pswpin: row.sys_swapins,
        pswpout: row.sys_swapouts,
        psi_some_avg10: None,
        pressure_level: row.sys_pressure_level,
        swap_used_bytes: row.sys_swap_used_bytes,
        thermal_pressure,
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn read(not_reported: &mut Vec<String>) -> Reading {
    note_once(
        not_reported,
        "host readings",
        &"admission observes Linux and macOS only",
    );
    Reading::default()
}

/// The hottest temperature sensor, if the platform reports any.
fn thermal(obs: &mut HostObservation) {
    let components = sysinfo::Components::new_with_refreshed_list();
    let mut hottest: Option<(f64, String)> = None;
    for c in components.list() {
        let Some(t) = c.temperature().filter(|t| t.is_finite()) else {
            continue;
        };
        obs.thermal_zones_read += 1;
        if hottest.as_ref().is_none_or(|(h, _)| f64::from(t) > *h) {
            hottest = Some((f64::from(t), c.label().to_string()));
        }
    }
    match hottest {
        Some((t, zone)) => {
            obs.max_thermal_celsius = Some(t);
            obs.thermal_zone = Some(zone);
        }
        None => obs
            .not_reported
            .push("thermal: no temperature sensor reported".into()),
    }
}

fn max_f(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// Watch the host for `window` and summarise what it showed.
pub fn observe(window: Duration) -> HostObservation {
    let mut obs = HostObservation {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        ..HostObservation::default()
    };
    let start = Instant::now();
    let first = read(&mut obs.not_reported);
    let mut last = first.clone();
    for k in 1..=SAMPLES_PER_WINDOW {
        let due = start + window * k / SAMPLES_PER_WINDOW;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = read(&mut obs.not_reported);
        obs.load_avg_1m = max_f(obs.load_avg_1m, now.load_1m);
        obs.psi_some_avg10 = max_f(obs.psi_some_avg10, now.psi_some_avg10);
        obs.memory_pressure_level = obs.memory_pressure_level.max(now.pressure_level);
        obs.thermal_pressure_level = obs.thermal_pressure_level.max(now.thermal_pressure);
        obs.min_available_bytes = match (obs.min_available_bytes, now.available_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        last = now;
    }
    obs.load_avg_1m = max_f(obs.load_avg_1m, first.load_1m);
    obs.psi_some_avg10 = max_f(obs.psi_some_avg10, first.psi_some_avg10);
    obs.memory_pressure_level = obs.memory_pressure_level.max(first.pressure_level);
    obs.thermal_pressure_level = obs.thermal_pressure_level.max(first.thermal_pressure);
    obs.swap_used_bytes = last.swap_used_bytes;
    obs.swap_in_pages = last
        .pswpin
        .zip(first.pswpin)
        .map(|(l, f)| l.saturating_sub(f));
    obs.swap_out_pages = last
        .pswpout
        .zip(first.pswpout)
        .map(|(l, f)| l.saturating_sub(f));
    thermal(&mut obs);
    obs
}

/// The reasons `obs` is not quiet under `t` (empty: admitted). A reading
/// the platform does not report cannot refuse the host; it is listed in
/// `not_reported`.
pub fn judge(obs: &HostObservation, t: &AdmissionThresholds) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(load) = obs.load_avg_1m {
        let per_core = load / obs.cores.max(1) as f64;
        if per_core > t.max_load_per_core {
            reasons.push(format!(
                "load average {load:.2} over {} cores = {per_core:.2} per core > {}",
                obs.cores, t.max_load_per_core
            ));
        }
    }
    if let Some(avail) = obs.min_available_bytes
        && avail < t.min_available_mib.saturating_mul(1024 * 1024)
    {
        reasons.push(format!(
            "available memory {} MiB < {} MiB",
            avail / (1024 * 1024),
            t.min_available_mib
        ));
    }
    for (what, pages) in [("in", obs.swap_in_pages), ("out", obs.swap_out_pages)] {
        if let Some(p) = pages.filter(|p| *p > 0) {
            reasons.push(format!("{p} pages swapped {what} during the window"));
        }
    }
    if let Some(psi) = obs.psi_some_avg10
        && psi > t.max_psi_some_avg10
    {
        reasons.push(format!(
            "memory pressure PSI some avg10 {psi:.2} > {}",
            t.max_psi_some_avg10
        ));
    }
    if let Some(level) = obs.memory_pressure_level
        && PressureLevel::from_sysctl(level) != Some(PressureLevel::Normal)
    {
        reasons.push(format!(
            "memory pressure {} (kern.memorystatus_vm_pressure_level {level})",
            PressureLevel::describe(level)
        ));
    }
    if let Some(level) = obs.thermal_pressure_level
        && ThermalPressure::from_state(level) != Some(ThermalPressure::Nominal)
    {
        reasons.push(format!(
            "thermal pressure {} (level {level})",
            ThermalPressure::describe(level)
        ));
    }
    if let Some(c) = obs.max_thermal_celsius
        && c > t.max_thermal_celsius
    {
        reasons.push(format!(
            "thermal {} at {c:.1} °C > {} °C",
            obs.thermal_zone.as_deref().unwrap_or("?"),
            t.max_thermal_celsius
        ));
    }
    reasons
}

/// Observe and decide, for the stage before `before_arm` (`None`: the run).
pub fn check(before_arm: Option<&str>, t: &AdmissionThresholds) -> AdmissionCheck {
    let window = window(t);
    let started_utc = chrono::Utc::now().to_rfc3339();
    let observed = observe(window);
    let reasons = judge(&observed, t);
    AdmissionCheck {
        before_arm: before_arm.map(str::to_string),
        started_utc,
        window_ms: window.as_millis() as u64,
        admitted: reasons.is_empty(),
        reasons,
        observed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet() -> HostObservation {
        HostObservation {
            cores: 2,
            load_avg_1m: Some(1.0),
            min_available_bytes: Some(4096 * 1024 * 1024),
            swap_in_pages: Some(0),
            swap_out_pages: Some(0),
            psi_some_avg10: Some(0.0),
            max_thermal_celsius: Some(50.0),
            thermal_zone: Some("cpu".into()),
            thermal_zones_read: 1,
            not_reported: vec![],
            ..HostObservation::default()
        }
    }

    #[test]
    fn a_quiet_host_is_admitted_and_each_excess_is_named() {
        let t = AdmissionThresholds::default();
        assert!(judge(&quiet(), &t).is_empty());
        let busy = HostObservation {
            load_avg_1m: Some(6.2),
            min_available_bytes: Some(512 * 1024 * 1024),
            swap_in_pages: Some(12),
            psi_some_avg10: Some(25.5),
            max_thermal_celsius: Some(95.0),
            ..quiet()
        };
        assert_eq!(
            judge(&busy, &t),
            [
                "load average 6.20 over 2 cores = 3.10 per core > 1.5",
                "available memory 512 MiB < 1024 MiB",
                "12 pages swapped in during the window",
                "memory pressure PSI some avg10 25.50 > 10",
                "thermal cpu at 95.0 °C > 90 °C",
            ]
        );
    }

    #[test]
    fn readings_not_reported_cannot_refuse() {
        let t = AdmissionThresholds::default();
        let blank = HostObservation {
            cores: 2,
            ..HostObservation::default()
        };
        assert!(judge(&blank, &t).is_empty());
    }

    #[test]
    fn macos_pressure_and_thermal_levels_refuse_unless_normal_and_nominal() {
        let t = AdmissionThresholds::default();
        let calm = HostObservation {
            memory_pressure_level: Some(1),
            thermal_pressure_level: Some(0),
            swap_used_bytes: Some(3 << 30),
            ..quiet()
        };
        // Swap merely in use is not activity: only swap-ins/outs refuse.
        assert!(judge(&calm, &t).is_empty());
        let strained = HostObservation {
            memory_pressure_level: Some(2),
            thermal_pressure_level: Some(1),
            ..calm.clone()
        };
        assert_eq!(
            judge(&strained, &t),
            [
                "memory pressure warn (kern.memorystatus_vm_pressure_level 2)",
                "thermal pressure moderate (level 1)",
            ]
        );
        // A level the headers do not define is not taken for normal.
        let unknown = HostObservation {
            memory_pressure_level: Some(3),
            thermal_pressure_level: Some(10),
            ..calm
        };
        assert_eq!(
            judge(&unknown, &t),
            [
                "memory pressure level 3 (kern.memorystatus_vm_pressure_level 3)",
                "thermal pressure level 10 (level 10)",
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_short_window_observes_this_host() {
        let obs = observe(Duration::from_millis(20));
        assert!(obs.cores >= 1);
        assert!(obs.load_avg_1m.is_some());
        assert!(obs.min_available_bytes.unwrap() > 0);
        assert!(obs.swap_in_pages.is_some() && obs.swap_out_pages.is_some());
    }
}
