//! The `stability` section of an arm's receipt: the soak verdict, from the
//! arm's markers, results, settled snapshots and series rows as values
//! (`reports::stability` reads them from the run directory).
//!
//! A soak writes `arms/<id>/soak.json` ([`SoakSettings`]) before its worker
//! starts; an arm with that file gets a [`Stability`] in the receipt. The
//! worker's series are its own footprint and resident at every
//! `request_end` marker; the system series are the external sampler's row
//! at or just before each `request_end` (as-of join), so every series is
//! indexed by request. Where the soak asked for a settle period, the
//! worker's `settled` snapshots (`settled.jsonl`) make two more worker
//! series, judged like the others. A `stability` gate reads
//! [`Stability::stable`].
//!
//! A lifecycle soak ([`SoakMode::Lifecycle`]) frees and loads the context
//! again every cycle inside one worker; its `release` markers, taken after
//! the free, are the post-teardown floors ([`LifecycleFloors`]). Those
//! floors, one point per cycle, are what decides the worker's verdict: the
//! `request_end` series are shown but not judged, because each cycle's
//! fresh context lands its buffers differently and that placement is not
//! growth.

use crate::growth::{self, Classification, GrowthSettings, Point, SeriesGrowth};
use crate::stats;
use sampler::{Marker, Phase, SeriesRow, TaskMemory};
use serde::{Deserialize, Serialize};
use worker_contract::{RequestResult, Settled};

/// What a soak judges with, as the protocol's `[soak]` table set it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoakSettings {
    /// Thresholds for the worker's own series.
    pub growth: GrowthSettings,
    /// The growth threshold for system series (bytes per request).
    pub system_slope_bytes_per_request: f64,
    /// The settle period after each `request_end` (0: none).
    #[serde(default)]
    pub settle_ms: u64,
    /// A lifecycle soak's cycles and floor threshold; `None` for a request soak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleSettings>,
}

/// How a soak exercises the worker (the protocol's `[soak] mode`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SoakMode {
    /// One load, many requests; growth judged at each `request_end`.
    #[default]
    Requests,
    /// Load → state → K requests → state and context freed, `cycles` times
    /// in one worker; growth judged on the floor after each teardown.
    Lifecycle,
}

impl SoakMode {
    /// The name a protocol and the receipt use (`requests`, `lifecycle`).
    pub fn name(self) -> &'static str {
        match self {
            SoakMode::Requests => "requests",
            SoakMode::Lifecycle => "lifecycle",
        }
    }
}

/// A lifecycle soak's plan and threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LifecycleSettings {
    /// Cycles planned (`[soak] cycles`).
    pub cycles: u64,
    /// Measured requests per cycle (`[soak] cycle_requests`, else the arm's own cycle).
    pub requests_per_cycle: u64,
    /// Cycles at the start whose floors are not judged.
    pub warmup_cycles: u64,
    /// A floor slope whose whole interval exceeds this (bytes per cycle) is growth.
    pub slope_bytes_per_cycle: f64,
}

/// The floor after one cycle's teardown: the worker's own snapshot in its
/// `release` marker, taken once the states and context were freed (and, in
/// the whisper worker, free heap handed back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CycleFloor {
    /// The cycle, from 0.
    pub cycle: u64,
    /// The last measured request of the cycle; `None` when no request ended before it.
    pub last_request: Option<u64>,
    /// Monotonic ns of the `release` marker.
    pub t_ns: u64,
    /// Resident bytes after the teardown.
    pub resident_bytes: u64,
    /// Footprint bytes after the teardown; `None` where the platform has no footprint.
    pub footprint_bytes: Option<u64>,
}

/// A lifecycle soak's floors and their judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LifecycleFloors {
    /// Cycles planned.
    pub cycles_planned: u64,
    /// Cycles that reached their teardown (`release` markers seen).
    pub cycles_completed: u64,
    /// Measured requests per cycle.
    pub requests_per_cycle: u64,
    /// Cycles not judged at the start.
    pub warmup_cycles: u64,
    /// The threshold, bytes per cycle.
    pub slope_bytes_per_cycle: f64,
    /// Every cycle's floor, in order.
    pub floors: Vec<CycleFloor>,
    /// `floor_footprint` (where the platform has it) and `floor_resident`,
    /// one point per cycle: their x axis is the cycle, so the figures named
    /// `*_per_request` (slope, tail slope, interval) are bytes per cycle and
    /// `steps_at_request` holds cycles.
    pub floor_series: Vec<SeriesGrowth>,
}
/// The soak verdict of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stability {
    /// The thresholds the soak was judged with (the protocol's `[soak]` table).
    pub settings: SoakSettings,
    /// `requests` or `lifecycle`.
    #[serde(default)]
    pub mode: SoakMode,
    /// A lifecycle soak's post-teardown floors, which decide
    /// [`Stability::worker`]; `None` for a request soak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleFloors>,
    /// The host's thermal and power state over the soak, and whether it
    /// changed (a confound of the verdict); `None` without series rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covariates: Option<crate::covariates::SoakCovariates>,
    /// `request_end` markers seen.
    pub requests: u64,
    /// The worst of the worker's judged series: `worker_series` and
    /// `settled_series`, or in a lifecycle soak the floor series and
    /// `settled_series`.
    pub worker: Classification,
    /// `worker_footprint` (where the platform has it) and `worker_resident`.
    pub worker_series: Vec<SeriesGrowth>,
    /// The same, `settle_ms` after each `request_end` (`settled_footprint`,
    /// `settled_resident`); empty without a settle period. They count
    /// toward [`Stability::worker`].
    #[serde(default)]
    pub settled_series: Vec<SeriesGrowth>,
    /// System series that count for the verdict: wired, compressor, swap
    /// used, shared memory (tmpfs / shm) — whichever the platform reports.
    pub system_series: Vec<SeriesGrowth>,
    /// Host memory in use (total − available): shown, not judged, because
    /// every other process on the host moves it.
    pub host_used: Option<SeriesGrowth>,
    /// System series that grow linearly while the worker's own memory is
    /// bounded (the pattern a resident-only soak calls healthy).
    pub system_growth_while_worker_flat: Vec<String>,
    /// Device (GPU) memory at each request end, from the series' NVML
    /// columns: `gpu_worker` (what the driver attributes to the worker,
    /// judged with the worker's threshold) and `gpu_used` (the whole device,
    /// judged with the system threshold). Where the series has no
    /// `gpu_worker` column but the worker read its own device memory at its
    /// markers (Metal's `currentAllocatedSize`, which no other process can
    /// read), that reading at each `request_end` is `worker_device`, judged
    /// with the worker's threshold. Empty without any device reading.
    /// They count for the verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_series: Vec<SeriesGrowth>,
    /// Device series that grow linearly while the worker's own host memory
    /// (resident, footprint) is bounded: the seed-001 pattern, accelerator
    /// memory that an RSS-only soak calls healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_growth_while_resident_flat: Vec<String>,
    /// Largest footprint in bytes at any `request_end` marker; `None` where the platform has no footprint.
    pub peak_footprint_bytes: Option<u64>,
    /// Largest resident bytes at any `request_end` marker.
    pub peak_resident_bytes: Option<u64>,
    /// 95th percentile request latency in ns.
    pub p95_latency_ns: Option<f64>,
    /// `Some(true)`: bounded worker and no system growth; `Some(false)`:
    /// growth found; `None`: inconclusive, which is never a pass.
    pub stable: Option<bool>,
}

impl Stability {
    /// The worker's own series that decide its verdict beside the settled
    /// ones: the lifecycle floors in a lifecycle soak, else the
    /// `request_end` series.
    pub fn judged_worker_series(&self) -> std::slice::Iter<'_, SeriesGrowth> {
        match &self.lifecycle {
            Some(l) => l.floor_series.iter(),
            None => self.worker_series.iter(),
        }
    }
}

/// The verdict in words: stable, not stable, or inconclusive.
pub fn verdict_text(stable: Option<bool>) -> &'static str {
    match stable {
        Some(true) => "stable",
        Some(false) => "NOT stable",
        None => "inconclusive (not a pass)",
    }
}

/// `MiB` with one decimal, for floors.
fn mib1(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1_048_576.0)
}

/// `summary.md`'s soak section: per soaked arm its mode, length, verdict,
/// judged series and, for a lifecycle soak, every cycle's floor.
pub fn markdown(with: &[(&str, &Stability)]) -> String {
    use std::fmt::Write;
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "\n## Soak\n");
    let _ = writeln!(
        out,
        "| arm | mode | requests | cycles | worker | verdict |\n|---|---|---|---|---|---|"
    );
    for (id, s) in with {
        let cycles = match &s.lifecycle {
            Some(l) => format!(
                "{} of {} ({} requests each)",
                l.cycles_completed, l.cycles_planned, l.requests_per_cycle
            ),
            None => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {id} | {} | {} | {cycles} | {} | {} |",
            s.mode.name(),
            s.requests,
            s.worker.name(),
            verdict_text(s.stable)
        );
    }
    for (id, s) in with {
        if let Some(c) = &s.covariates {
            let _ = writeln!(out, "\n`{id}`: {}.", c.line());
        }
    }
    for (id, s) in with {
        let Some(l) = &s.lifecycle else { continue };
        let _ = writeln!(
            out,
            "\n`{id}`: floor after each teardown, judged per cycle (first {} cycles not judged; threshold {:.1} KiB/cycle):\n",
            l.warmup_cycles,
            l.slope_bytes_per_cycle / 1024.0
        );
        let _ = writeln!(
            out,
            "| series | classification | slope KiB/cycle [interval] | reason |\n|---|---|---|---|"
        );
        for g in &l.floor_series {
            let slope = g
                .bytes_per_request
                .map_or("–".into(), |b| kib_with_interval(&b, ""));
            let _ = writeln!(
                out,
                "| {} | {} | {slope} | {} |",
                g.series,
                g.classification.name(),
                g.reason.replace('|', "/")
            );
        }
        let resident: Vec<String> = l.floors.iter().map(|f| mib1(f.resident_bytes)).collect();
        let _ = writeln!(
            out,
            "\nResident MiB per cycle, cycle 0 first: {}.",
            resident.join(", ")
        );
        let footprint: Vec<String> = l
            .floors
            .iter()
            .filter_map(|f| f.footprint_bytes.map(mib1))
            .collect();
        if !footprint.is_empty() {
            let _ = writeln!(
                out,
                "\nFootprint MiB per cycle, cycle 0 first: {}.",
                footprint.join(", ")
            );
        }
    }
    out
}

/// The soak verdict from the worker's worst classification and the judged
/// system series: any growth is `Some(false)`; otherwise anything
/// inconclusive is `None` (never a pass); else `Some(true)`.
pub fn verdict(worker: Classification, system_series: &[SeriesGrowth]) -> Option<bool> {
    let system_has = |c| system_series.iter().any(|s| s.classification == c);
    if worker == Classification::LinearGrowth || system_has(Classification::LinearGrowth) {
        Some(false)
    } else if worker == Classification::Inconclusive || system_has(Classification::Inconclusive) {
        None
    } else {
        Some(true)
    }
}

type Pick = fn(&SeriesRow) -> Option<u64>;

/// The judged system series and where each comes from.
const SYSTEM: [(&str, Pick); 4] = [
    ("sys_wired", |r| r.sys_wired_bytes),
    ("sys_compressor", |r| r.sys_compressor_bytes),
    ("sys_swap_used", |r| r.sys_swap_used_bytes),
    ("sys_shmem", |r| r.sys_shmem_bytes),
];

fn host_used(r: &SeriesRow) -> Option<u64> {
    Some(r.sys_total_bytes?.saturating_sub(r.sys_available_bytes?))
}

/// The device series, after the system ones and `host_used` in the picks.
const DEVICE: [(&str, Pick); 2] = [
    ("gpu_worker", |r| r.gpu_worker_bytes.bytes()),
    ("gpu_used", |r| r.gpu_used_bytes.bytes()),
];

/// The system value of each series at each request end: the last series
/// row at or before the end (an as-of join), fed one row at a time so that
/// memory grows with requests, not with ticks. The series are the system
/// ones (wired, compressor, swap used, shmem), then `host_used`, then the
/// device ones (the worker's GPU memory, the device's in use).
pub struct SystemJoin {
    ends: Vec<(u64, u64)>,
    picks: Vec<Pick>,
    out: Vec<Vec<Point>>,
    last: Option<SeriesRow>,
    next: usize,
    covariates: crate::covariates::Accumulator,
}

impl SystemJoin {
    /// A join against the `request_end` markers among `markers` (in order):
    /// the index every series of the soak is judged on.
    pub fn new(markers: &[Marker]) -> Self {
        let ends = markers
            .iter()
            .filter(|m| m.phase == Phase::RequestEnd)
            .map(|m| (m.request_id.unwrap_or(m.seq), m.t_ns))
            .collect();
        SystemJoin::at(ends)
    }

    /// A join against `ends`, `(request, t_ns)` in time order.
    fn at(ends: Vec<(u64, u64)>) -> Self {
        let picks: Vec<Pick> = SYSTEM
            .iter()
            .map(|s| s.1)
            .chain([host_used as Pick])
            .chain(DEVICE.iter().map(|d| d.1))
            .collect();
        let out = vec![Vec::with_capacity(ends.len()); picks.len()];
        SystemJoin {
            ends,
            picks,
            out,
            last: None,
            next: 0,
            covariates: crate::covariates::Accumulator::default(),
        }
    }

    /// The next series row, in time order.
    pub fn row(&mut self, row: SeriesRow) {
        self.covariates.row(&row);
        match self.last.take() {
            // Request ends before this row take the previous row's values.
            Some(prev) => self.emit(&prev, Some(row.t_ns)),
            // Request ends before the first row have no system value.
            None => {
                while self.next < self.ends.len() && self.ends[self.next].1 < row.t_ns {
                    self.next += 1;
                }
            }
        }
        self.last = Some(row);
    }

    /// Every request end not yet given a value, up to (not at) `upto_t`,
    /// takes `row`'s.
    fn emit(&mut self, row: &SeriesRow, upto_t: Option<u64>) {
        while self.next < self.ends.len() && upto_t.is_none_or(|t| self.ends[self.next].1 < t) {
            let (request, t_ns) = self.ends[self.next];
            for (pick, points) in self.picks.iter().zip(self.out.iter_mut()) {
                if let Some(v) = pick(row) {
                    points.push(Point {
                        request,
                        t_ns,
                        bytes: v as f64,
                    });
                }
            }
            self.next += 1;
        }
    }

    /// The points of each series, and the covariates of every row seen.
    pub fn finish(mut self) -> (Vec<Vec<Point>>, crate::covariates::Accumulator) {
        if let Some(prev) = self.last.take() {
            self.emit(&prev, None);
        }
        (self.out, self.covariates)
    }
}

/// `<prefix>_footprint` (where the platform has it) and `<prefix>_resident`
/// over the worker's own snapshots `(request, t_ns, memory)`, judged.
fn own_series(
    prefix: &str,
    snapshots: &[(u64, u64, &TaskMemory)],
    settings: &GrowthSettings,
) -> Vec<SeriesGrowth> {
    let point = |&(request, t_ns, _): &(u64, u64, &TaskMemory), bytes: u64| Point {
        request,
        t_ns,
        bytes: bytes as f64,
    };
    let footprint: Vec<Point> = snapshots
        .iter()
        .filter_map(|s| Some(point(s, s.2.footprint_bytes?)))
        .collect();
    let resident: Vec<Point> = snapshots
        .iter()
        .map(|s| point(s, s.2.resident_bytes))
        .collect();
    let mut out = Vec::new();
    if !footprint.is_empty() {
        out.push(growth::analyse(
            &format!("{prefix}_footprint"),
            &footprint,
            settings,
        ));
    }
    out.push(growth::analyse(
        &format!("{prefix}_resident"),
        &resident,
        settings,
    ));
    out
}

/// The worker's series after each settle period; empty without `settled`
/// snapshots.
pub fn settled_growth(settled: &[Settled], settings: &GrowthSettings) -> Vec<SeriesGrowth> {
    if settled.is_empty() {
        return Vec::new();
    }
    let snapshots: Vec<(u64, u64, &TaskMemory)> = settled
        .iter()
        .map(|s| (s.request_id, s.t_ns, &s.memory))
        .collect();
    own_series("settled", &snapshots, settings)
}

/// The floor after every cycle's teardown (each `release` marker), judged
/// per cycle with the lifecycle threshold and the soak's other settings.
pub fn lifecycle_floors(
    markers: &[Marker],
    l: &LifecycleSettings,
    growth: &GrowthSettings,
) -> LifecycleFloors {
    let mut last_request = None;
    let mut floors = Vec::new();
    for m in markers {
        match m.phase {
            Phase::RequestEnd => last_request = m.request_id,
            Phase::Release => floors.push(CycleFloor {
                cycle: floors.len() as u64,
                last_request,
                t_ns: m.t_ns,
                resident_bytes: m.memory.resident_bytes,
                footprint_bytes: m.memory.footprint_bytes,
            }),
            _ => {}
        }
    }
    // One point per cycle: each is its own bin, and the warm-up counts cycles.
    let per_cycle = GrowthSettings {
        warmup_requests: l.warmup_cycles,
        cycle_requests: 1,
        linear_slope_bytes_per_request: l.slope_bytes_per_cycle,
        ..growth.clone()
    };
    let snapshots: Vec<(u64, u64, TaskMemory)> = floors
        .iter()
        .map(|f| {
            let memory = TaskMemory {
                resident_bytes: f.resident_bytes,
                footprint_bytes: f.footprint_bytes,
                ..TaskMemory::default()
            };
            (f.cycle, f.t_ns, memory)
        })
        .collect();
    let refs: Vec<(u64, u64, &TaskMemory)> =
        snapshots.iter().map(|(c, t, m)| (*c, *t, m)).collect();
    let mut floor_series = own_series("floor", &refs, &per_cycle);
    // The analysis words its reasons per request; these points are cycles.
    for g in &mut floor_series {
        g.reason = g
            .reason
            .replace("B/request", "B/cycle")
            .replace("-request warm-up", "-cycle warm-up")
            .replace("(cycles of 1 requests)", "(one point per cycle)");
    }
    LifecycleFloors {
        cycles_planned: l.cycles,
        cycles_completed: floors.len() as u64,
        requests_per_cycle: l.requests_per_cycle,
        warmup_cycles: l.warmup_cycles,
        slope_bytes_per_cycle: l.slope_bytes_per_cycle,
        floor_series,
        floors,
    }
}

/// Judge a soak arm with `settings` from its markers (in order), results,
/// `settled` snapshots (none without a settle period) and the series rows
/// joined to its request ends (`system`, made by [`SystemJoin::new`] from
/// the same markers).
pub fn analyse(
    markers: &[Marker],
    results: &[RequestResult],
    settled: &[Settled],
    system: SystemJoin,
    settings: &SoakSettings,
) -> Stability {
    let ends: Vec<&Marker> = markers
        .iter()
        .filter(|m| m.phase == Phase::RequestEnd)
        .collect();
    let snapshots: Vec<(u64, u64, &TaskMemory)> = ends
        .iter()
        .map(|m| (m.request_id.unwrap_or(m.seq), m.t_ns, &m.memory))
        .collect();
    let worker_series = own_series("worker", &snapshots, &settings.growth);
    let settled_series = settled_growth(settled, &settings.growth);
    let lifecycle = settings
        .lifecycle
        .as_ref()
        .map(|l| lifecycle_floors(markers, l, &settings.growth));
    let judged_own = match &lifecycle {
        Some(l) => &l.floor_series,
        None => &worker_series,
    };
    let worker = growth::worst(&judged_own.iter().chain(&settled_series).collect::<Vec<_>>());

    let (mut sys, covariates) = system.finish();
    let covariates = covariates.finish();
    let system_settings = GrowthSettings {
        linear_slope_bytes_per_request: settings.system_slope_bytes_per_request,
        ..settings.growth.clone()
    };
    let device_points = sys.split_off(SYSTEM.len() + 1);
    let host = sys.pop().filter(|p| !p.is_empty());
    let system_series: Vec<SeriesGrowth> = SYSTEM
        .iter()
        .zip(&sys)
        .filter(|(_, p)| !p.is_empty())
        .map(|((name, _), p)| growth::analyse(name, p, &system_settings))
        .collect();
    let host_used = host.map(|p| growth::analyse("host_used", &p, &system_settings));
    let device_series: Vec<SeriesGrowth> = DEVICE
        .iter()
        .zip(&device_points)
        .filter(|(_, p)| !p.is_empty())
        .map(|((name, _), p)| {
            let settings = if *name == "gpu_worker" {
                &settings.growth
            } else {
                &system_settings
            };
            growth::analyse(name, p, settings)
        })
        .collect();
    let device_series = with_marker_device(device_series, &ends, &settings.growth);
    let flagged = growth::system_grows_while_worker_flat(worker, &system_series);
    let device_flagged = growth::system_grows_while_worker_flat(worker, &device_series);
    let judged: Vec<SeriesGrowth> = system_series
        .iter()
        .chain(&device_series)
        .cloned()
        .collect();
    let stable = verdict(worker, &judged);
    let latencies: Vec<f64> = results.iter().map(|r| r.latency_ns as f64).collect();
    Stability {
        settings: settings.clone(),
        mode: if lifecycle.is_some() {
            SoakMode::Lifecycle
        } else {
            SoakMode::Requests
        },
        lifecycle,
        covariates: (covariates.readings > 0).then_some(covariates),
        requests: ends.len() as u64,
        worker,
        worker_series,
        settled_series,
        system_series,
        host_used,
        system_growth_while_worker_flat: flagged,
        device_series,
        device_growth_while_resident_flat: device_flagged,
        peak_footprint_bytes: ends.iter().filter_map(|m| m.memory.footprint_bytes).max(),
        peak_resident_bytes: ends.iter().map(|m| m.memory.resident_bytes).max(),
        p95_latency_ns: stats::percentile(&latencies, 95.0),
        stable,
    }
}

/// `device` with the worker's own device reading at its `request_end`
/// markers in front, as `worker_device`, where the series gave no
/// `gpu_worker` (Metal is read only inside the worker) and the markers
/// carry one.
fn with_marker_device(
    mut device: Vec<SeriesGrowth>,
    ends: &[&Marker],
    settings: &GrowthSettings,
) -> Vec<SeriesGrowth> {
    if device.iter().any(|g| g.series == DEVICE[0].0) {
        return device;
    }
    let points: Vec<Point> = ends
        .iter()
        .filter_map(|m| {
            Some(Point {
                request: m.request_id.unwrap_or(m.seq),
                t_ns: m.t_ns,
                bytes: m.memory.device_bytes? as f64,
            })
        })
        .collect();
    if !points.is_empty() {
        device.insert(0, growth::analyse("worker_device", &points, settings));
    }
    device
}

/// A slope in KiB, then `unit`, then its interval: `12.3 KiB/cycle [11.0, 13.5]`.
pub fn kib_with_interval(b: &growth::Slope, unit: &str) -> String {
    format!(
        "{:.1}{unit} [{:.1}, {:.1}]",
        b.estimate / 1024.0,
        b.low / 1024.0,
        b.high / 1024.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;

    /// [`analyse`] of `markers` with `rows` as the series and `settled` as
    /// the settled snapshots.
    fn analyse_rows(
        markers: &[Marker],
        rows: Vec<SeriesRow>,
        settled: &[Settled],
        settings: &SoakSettings,
    ) -> Stability {
        let mut join = SystemJoin::new(markers);
        for r in rows {
            join.row(r);
        }
        analyse(markers, &[], settled, join, settings)
    }

    fn row(t_ns: u64, shmem: u64) -> SeriesRow {
        SeriesRow {
            t_ns,
            sys_shmem_bytes: Some(shmem),
            sys_total_bytes: Some(1000),
            sys_available_bytes: Some(400),
            ..SeriesRow::default()
        }
    }

    #[test]
    fn each_request_end_takes_the_last_row_at_or_before_it() {
        // Ends at 50 (before any row: none), 100 (exactly row 1), 250, 299, 900.
        let ends = vec![(0, 50), (1, 100), (2, 250), (3, 299), (4, 900)];
        let mut join = SystemJoin::at(ends);
        for r in [row(100, 1), row(200, 2), row(300, 3)] {
            join.row(r);
        }
        let (p, cov) = join.finish();
        assert_eq!(cov.finish().readings, 3, "each row is a fresh reading here");
        let shmem: Vec<(u64, f64)> = p[3].iter().map(|p| (p.request, p.bytes)).collect();
        assert_eq!(shmem, vec![(1, 1.0), (2, 2.0), (3, 2.0), (4, 3.0)]);
        assert!(p[0].is_empty(), "no wired on Linux rows");
        assert_eq!(p[4].len(), 4);
        assert_eq!(p[4][0].bytes, 600.0, "host used = total - available");
    }

    /// Request `i`'s end, with the worker's own memory flat (40 MiB resident).
    fn flat_request_end(i: u64) -> Marker {
        Marker {
            phase: Phase::RequestEnd,
            seq: i,
            request_id: Some(i),
            t_ns: i * 10 + 6,
            memory: TaskMemory {
                resident_bytes: 40 << 20,
                footprint_bytes: Some(30 << 20),
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    /// Default growth settings, system series judged at 16 KiB a request.
    fn system_16k() -> SoakSettings {
        SoakSettings {
            growth: GrowthSettings::default(),
            system_slope_bytes_per_request: 16_384.0,
            settle_ms: 0,
            lifecycle: None,
        }
    }

    #[test]
    fn device_memory_growing_under_a_flat_resident_is_the_seed_pattern() {
        let mut rows = Vec::new();
        let mut markers = Vec::new();
        // 600 MiB of context, then 16 MiB more per request; the device's
        // other users stay put. Resident is flat throughout.
        for i in 0..200u64 {
            rows.push(SeriesRow {
                gpu_worker_bytes: sampler::DeviceCell::Bytes((600 << 20) + i * (16 << 20)),
                gpu_used_bytes: sampler::DeviceCell::Bytes((1200 << 20) + i * (16 << 20)),
                gpu_total_bytes: sampler::DeviceCell::Bytes(150_754_820_096),
                gpu_others_bytes: sampler::DeviceCell::Bytes(0),
                ..row(i * 10 + 5, 1 << 20)
            });
            markers.push(flat_request_end(i));
        }
        let s = analyse_rows(&markers, rows, &[], &system_16k());
        assert_eq!(s.worker, Classification::Plateau);
        assert!(s.system_growth_while_worker_flat.is_empty());
        let names: Vec<(&str, Classification)> = s
            .device_series
            .iter()
            .map(|g| (g.series.as_str(), g.classification))
            .collect();
        assert_eq!(
            names,
            [
                ("gpu_worker", Classification::LinearGrowth),
                ("gpu_used", Classification::LinearGrowth)
            ]
        );
        assert_eq!(
            s.device_series[0].bytes_per_request.unwrap().estimate,
            (16u64 << 20) as f64
        );
        assert_eq!(
            s.device_growth_while_resident_flat,
            ["gpu_worker", "gpu_used"]
        );
        assert_eq!(s.stable, Some(false));
    }

    #[test]
    fn a_marker_device_reading_is_the_device_series_where_the_series_has_none() {
        // Metal: no device columns, but every request_end carries the
        // worker's own currentAllocatedSize, 16 MiB more per request.
        let markers: Vec<Marker> = (0..200u64)
            .map(|i| {
                let mut m = flat_request_end(i);
                m.memory.device_bytes = Some((300 << 20) + i * (16 << 20));
                m
            })
            .collect();
        let rows: Vec<SeriesRow> = (0..200u64).map(|i| row(i * 10 + 5, 1 << 20)).collect();
        let s = analyse_rows(&markers, rows.clone(), &[], &system_16k());
        assert_eq!(s.worker, Classification::Plateau);
        let names: Vec<(&str, Classification)> = s
            .device_series
            .iter()
            .map(|g| (g.series.as_str(), g.classification))
            .collect();
        assert_eq!(names, [("worker_device", Classification::LinearGrowth)]);
        assert_eq!(
            s.device_series[0].bytes_per_request.unwrap().estimate,
            (16u64 << 20) as f64
        );
        assert_eq!(s.device_growth_while_resident_flat, ["worker_device"]);
        assert_eq!(s.stable, Some(false));

        // A flat reading is judged and passes; the verdict stays stable.
        let flat: Vec<Marker> = (0..200u64)
            .map(|i| {
                let mut m = flat_request_end(i);
                m.memory.device_bytes = Some(300 << 20);
                m
            })
            .collect();
        let s = analyse_rows(&flat, rows.clone(), &[], &system_16k());
        assert_eq!(s.device_series.len(), 1);
        assert_eq!(s.device_series[0].classification, Classification::Plateau);
        assert!(s.device_growth_while_resident_flat.is_empty());
        assert_eq!(s.stable, Some(true));

        // Where the series has NVML's gpu_worker, the markers add nothing.
        let nvml: Vec<SeriesRow> = rows
            .into_iter()
            .map(|r| SeriesRow {
                gpu_worker_bytes: sampler::DeviceCell::Bytes(600 << 20),
                gpu_used_bytes: sampler::DeviceCell::Bytes(1200 << 20),
                ..r
            })
            .collect();
        let s = analyse_rows(&markers, nvml, &[], &system_16k());
        let names: Vec<&str> = s.device_series.iter().map(|g| g.series.as_str()).collect();
        assert_eq!(names, ["gpu_worker", "gpu_used"]);
    }

    #[test]
    fn a_flat_worker_with_growing_shmem_is_not_stable() {
        let mut rows = Vec::new();
        let mut markers = Vec::new();
        for i in 0..300u64 {
            rows.push(row(i * 10 + 5, i * 262_144));
            markers.push(flat_request_end(i));
        }
        let s = analyse_rows(&markers, rows, &[], &system_16k());
        assert_eq!(s.requests, 300);
        assert_eq!(s.worker, Classification::Plateau);
        assert_eq!(
            s.system_growth_while_worker_flat,
            vec!["sys_shmem".to_string()]
        );
        assert_eq!(s.stable, Some(false));
        let slope = s.system_series[0].bytes_per_request.unwrap().estimate;
        assert_eq!(slope, 262_144.0);
        assert_eq!(s.peak_footprint_bytes, Some(30 << 20));
    }

    fn end(i: u64, resident: u64) -> Marker {
        Marker {
            phase: Phase::RequestEnd,
            seq: i,
            request_id: Some(i),
            t_ns: i * 1_000_000_000,
            memory: TaskMemory {
                resident_bytes: resident,
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    fn settled(i: u64, resident: u64) -> Settled {
        Settled {
            request_id: i,
            settle_ms: 500,
            t_ns: i * 1_000_000_000 + 500_000_000,
            memory: TaskMemory {
                resident_bytes: resident,
                ..TaskMemory::default()
            },
        }
    }

    fn settings() -> SoakSettings {
        SoakSettings {
            growth: GrowthSettings::default(),
            system_slope_bytes_per_request: 16_384.0,
            settle_ms: 500,
            lifecycle: None,
        }
    }

    #[test]
    fn growth_seen_only_after_the_settle_period_fails_the_worker() {
        // At request_end the worker sits at 60 MiB (buffers still held);
        // once they are released the floor is 40 MiB plus 64 KiB per request.
        let markers: Vec<Marker> = (0..200).map(|i| end(i, 60 << 20)).collect();
        let after: Vec<Settled> = (0..200)
            .map(|i| settled(i, (40 << 20) + i * 65_536))
            .collect();
        let s = analyse_rows(&markers, Vec::new(), &after, &settings());
        assert_eq!(s.worker_series.len(), 1);
        assert_eq!(s.worker_series[0].classification, Classification::Plateau);
        assert_eq!(s.settled_series.len(), 1, "no footprint on these points");
        let g = &s.settled_series[0];
        assert_eq!(g.series, "settled_resident");
        assert_eq!(g.points, 200);
        assert_eq!(g.analysed_points, 190, "warm-up of 10 dropped");
        assert_eq!(g.classification, Classification::LinearGrowth);
        assert_eq!(g.tail_bytes_per_request.unwrap().estimate, 65_536.0);
        assert_eq!(s.worker, Classification::LinearGrowth);
        assert_eq!(s.stable, Some(false));
    }

    #[test]
    fn a_settled_floor_that_stays_flat_keeps_the_arm_stable() {
        let markers: Vec<Marker> = (0..200).map(|i| end(i, 60 << 20)).collect();
        let mut after: Vec<Settled> = (0..200).map(|i| settled(i, 40 << 20)).collect();
        for s in &mut after {
            s.memory.footprint_bytes = Some(30 << 20);
        }
        let s = analyse_rows(&markers, Vec::new(), &after, &settings());
        let names: Vec<&str> = s.settled_series.iter().map(|g| g.series.as_str()).collect();
        assert_eq!(names, ["settled_footprint", "settled_resident"]);
        assert!(
            s.settled_series
                .iter()
                .all(|g| g.classification == Classification::Plateau)
        );
        assert_eq!(s.stable, Some(true));

        // Without settled snapshots (no settle period, or an older run): no series.
        let s = analyse_rows(&markers, Vec::new(), &[], &settings());
        assert!(s.settled_series.is_empty());
        assert_eq!(s.stable, Some(true));
    }

    /// Markers of a lifecycle soak of `cycles` one-request cycles: each
    /// `request_end` at `loaded(c)` resident, each `release` at `floor(c)`.
    fn lifecycle_markers(
        cycles: u64,
        loaded: impl Fn(u64) -> u64,
        floor: impl Fn(u64) -> u64,
    ) -> Vec<Marker> {
        let mut out = Vec::new();
        for c in 0..cycles {
            out.push(end(c, loaded(c)));
            let mut release = end(c, floor(c));
            release.phase = Phase::Release;
            release.request_id = None;
            release.t_ns += 500_000_000;
            out.push(release);
        }
        out
    }

    fn lifecycle_settings(cycles: u64) -> SoakSettings {
        SoakSettings {
            lifecycle: Some(LifecycleSettings {
                cycles,
                requests_per_cycle: 1,
                warmup_cycles: 2,
                slope_bytes_per_cycle: 65_536.0,
            }),
            ..settings()
        }
    }

    #[test]
    fn a_lifecycle_soak_judges_the_floor_after_each_teardown_per_cycle() {
        // 3 MiB kept at every teardown under a loaded level that jumps about
        // by 8 MiB (a fresh context lands elsewhere each cycle).
        let markers = lifecycle_markers(
            30,
            |c| (200 << 20) + (c % 3) * (8 << 20),
            |c| (40 << 20) + c * (3 << 20),
        );
        let s = analyse_rows(&markers, Vec::new(), &[], &lifecycle_settings(30));
        assert_eq!(s.mode, SoakMode::Lifecycle);
        let l = s.lifecycle.as_ref().unwrap();
        assert_eq!((l.cycles_planned, l.cycles_completed), (30, 30));
        assert_eq!(l.floors[4].resident_bytes, (40 << 20) + 4 * (3 << 20));
        assert_eq!(l.floors[4].last_request, Some(4));
        let g = &l.floor_series[0];
        assert_eq!(g.series, "floor_resident");
        assert_eq!(g.analysed_points, 28, "two warm-up cycles dropped");
        assert_eq!(
            g.classification,
            Classification::LinearGrowth,
            "{}",
            g.reason
        );
        assert!(
            g.reason.contains("B/cycle") && !g.reason.contains("request"),
            "{}",
            g.reason
        );
        assert_eq!(g.bytes_per_request.unwrap().estimate, (3u64 << 20) as f64);
        assert_eq!(s.worker, Classification::LinearGrowth);
        assert_eq!(s.stable, Some(false));
    }

    #[test]
    fn a_lifecycle_floor_that_returns_each_cycle_is_a_plateau() {
        let markers = lifecycle_markers(
            30,
            |c| (200 << 20) + (c % 3) * (8 << 20),
            |c| (40 << 20) + (c % 2) * 4096,
        );
        let s = analyse_rows(&markers, Vec::new(), &[], &lifecycle_settings(30));
        let l = s.lifecycle.as_ref().unwrap();
        assert_eq!(l.floor_series[0].classification, Classification::Plateau);
        assert_eq!(s.worker, Classification::Plateau);
        assert_eq!(s.stable, Some(true));
        // A soak cut short is judged on the cycles it finished.
        let s = analyse_rows(&markers[..20], Vec::new(), &[], &lifecycle_settings(30));
        let l = s.lifecycle.unwrap();
        assert_eq!((l.cycles_planned, l.cycles_completed), (30, 10));
        assert_eq!(
            l.floor_series[0].classification,
            Classification::Inconclusive
        );
    }
}
