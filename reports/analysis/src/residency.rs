//! Real-time requests and idle residency of a whisper arm, rebuilt from its
//! markers, results and series: stop-to-final latency (the stop is the
//! audio's end, the final is the text) apart from compute, the footprint in
//! the idle windows between requests, the peak, what each `release` gave
//! back, and per idle gap the latency of the request that followed it.
//!
//! An idle window runs from a `warmup_done` or `request_end` marker to the
//! next `request_begin` or `idle_end`; its footprint is the external
//! series' `footprint_bytes` on the rows inside it.

use crate::stats;
use sampler::{Marker, Phase};
use serde::{Deserialize, Serialize};
use worker_contract::{IdlePolicy, RequestMode, RequestResult, WhisperSpec, gap_before};

/// Stop-to-final latency over a set of requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StopToFinal {
    /// Requests with a timing.
    pub count: u64,
    /// Median, in ns.
    pub p50_ns: f64,
    /// 95th percentile, in ns.
    pub p95_ns: f64,
    /// Longest, in ns.
    pub max_ns: u64,
}

impl StopToFinal {
    /// Over the `stop_to_final_ns` of `results` that carry a timing; `None` without any.
    pub fn of<'a>(results: impl IntoIterator<Item = &'a RequestResult>) -> Option<StopToFinal> {
        let values: Vec<u64> = results
            .into_iter()
            .filter_map(|r| r.timing.as_ref().map(|t| t.stop_to_final_ns))
            .collect();
        let as_f: Vec<f64> = values.iter().map(|v| *v as f64).collect();
        Some(StopToFinal {
            count: values.len() as u64,
            p50_ns: stats::percentile(&as_f, 50.0)?,
            p95_ns: stats::percentile(&as_f, 95.0)?,
            max_ns: *values.iter().max()?,
        })
    }
}

/// One idle window between requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleWindow {
    /// The marker that opened it (`warmup_done` or `request_end`).
    #[schemars(with = "String")]
    pub after: Phase,
    /// The request that follows it; `None` for the idle before `idle_end`.
    pub before_request: Option<u64>,
    /// The planned idle: the gap before that request, or the arm's `idle_ms`.
    pub gap_ms: u64,
    /// Monotonic ns of the opening marker.
    pub start_ns: u64,
    /// Monotonic ns of the closing marker.
    pub end_ns: u64,
    /// Series rows inside the window that report a footprint.
    pub samples: u64,
    /// Mean footprint over those rows.
    pub mean_footprint_bytes: Option<f64>,
    /// Smallest footprint over those rows.
    pub min_footprint_bytes: Option<u64>,
    /// Whether a `release` marker lies inside the window.
    pub released: bool,
}

/// What one `release` gave back: its marker against the marker before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReleaseDrop {
    /// The `release` marker's sequence number.
    pub seq: u64,
    /// Footprint at the marker before (`warmup_done`, `request_end`).
    pub before_footprint_bytes: Option<u64>,
    /// Footprint at the `release` marker (after the free and the heap trim).
    pub after_footprint_bytes: Option<u64>,
    /// before − after; positive when memory went back.
    pub dropped_bytes: Option<i64>,
}

/// Requests that followed one idle gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GapRow {
    /// The gap before each of these requests, in ms.
    pub gap_ms: u64,
    /// Stop-to-final latency of the requests right after this gap.
    pub stop_to_final: Option<StopToFinal>,
    /// Of them, how many reloaded at speech start.
    pub reloads: u64,
    /// Mean footprint over the windows of this gap (rows pooled).
    pub idle_mean_footprint_bytes: Option<f64>,
    /// Smallest footprint in those windows.
    pub idle_min_footprint_bytes: Option<u64>,
}

/// One request's timing, flattened for tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RequestTimingRow {
    /// The request's id.
    pub request_id: u64,
    /// The gap before it, in ms.
    pub gap_ms: u64,
    /// From the first audio to the stop, in ns (the audio's real-time length, or 0 for a file).
    pub delivery_ns: u64,
    /// The decode, in ns (`latency_ns`).
    pub compute_ns: u64,
    /// From the stop to the final text, in ns.
    pub stop_to_final_ns: u64,
    /// The reload at speech start, when there was one.
    pub reload_ns: Option<u64>,
}

/// The arm's real-time and idle-residency results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResidencyReceipt {
    /// `resident`, `load_on_speech` or `unload_after_idle`.
    pub policy: String,
    /// `unload_after_idle`'s time without speech before the release, in ms.
    pub unload_after_idle_ms: Option<u64>,
    /// `file` or `realtime`.
    pub request_mode: String,
    /// Real-time chunk length in ms.
    pub chunk_ms: Option<u32>,
    /// `release` markers.
    pub releases: u64,
    /// `reload` markers.
    pub reloads: u64,
    /// Stop-to-final latency over every measured request.
    pub stop_to_final: Option<StopToFinal>,
    /// Mean footprint over every idle window's rows (pooled).
    pub idle_mean_footprint_bytes: Option<f64>,
    /// Smallest footprint in any idle window.
    pub idle_min_footprint_bytes: Option<u64>,
    /// Largest footprint seen in the arm (series rows and markers).
    pub peak_footprint_bytes: Option<u64>,
    /// Largest kernel resident peak at any marker (Linux `VmHWM`).
    pub peak_resident_bytes: Option<u64>,
    /// Per gap length, in the order first met.
    pub by_gap: Vec<GapRow>,
    /// Every idle window, in order.
    pub windows: Vec<IdleWindow>,
    /// Every release, in order.
    pub release_drops: Vec<ReleaseDrop>,
    /// Every measured request's timing.
    pub requests: Vec<RequestTimingRow>,
}

/// Whether an arm runs with anything this section reports on.
pub fn applies(spec: &WhisperSpec) -> bool {
    !spec.request_mode.is_file() || !spec.idle_policy.is_resident() || !spec.gaps_ms.is_empty()
}

/// One series row as this module reads it: time and footprint.
pub type FootprintRow = (u64, Option<u64>);

#[derive(Default)]
struct Pool {
    n: u64,
    sum: f64,
    min: Option<u64>,
}

impl Pool {
    fn add(&mut self, v: u64) {
        self.n += 1;
        self.sum += v as f64;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
    }
    fn merge(&mut self, o: &Pool) {
        self.n += o.n;
        self.sum += o.sum;
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Each idle window as the marker indices `(open, close)` that bound it: a
/// `warmup_done` or `request_end`, and the next `request_begin` or
/// `idle_end` after it.
fn idle_windows(markers: &[Marker]) -> Vec<(usize, usize)> {
    markers
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.phase, Phase::WarmupDone | Phase::RequestEnd))
        .filter_map(|(i, _)| {
            let close = markers[i + 1..]
                .iter()
                .position(|c| matches!(c.phase, Phase::RequestBegin | Phase::IdleEnd))?;
            Some((i, i + 1 + close))
        })
        .collect()
}

/// The footprint of the series rows inside each idle window and the
/// series' largest footprint, gathered one row at a time as the series
/// streams by (so a night's series is never held).
pub struct IdleFootprints {
    /// Each window's `(start, end]` in ns, in order of start (and so of end:
    /// each closes at the first close after its opening).
    bounds: Vec<(u64, u64)>,
    pools: Vec<Pool>,
    /// The first window that may still take a row.
    next: usize,
    peak: Option<u64>,
}

impl IdleFootprints {
    /// Empty pools for the idle windows of `markers` (in order).
    pub fn new(markers: &[Marker]) -> Self {
        let bounds: Vec<(u64, u64)> = idle_windows(markers)
            .into_iter()
            .map(|(i, j)| (markers[i].t_ns, markers[j].t_ns))
            .collect();
        let pools = bounds.iter().map(|_| Pool::default()).collect();
        Self {
            bounds,
            pools,
            next: 0,
            peak: None,
        }
    }

    /// Take one series row (rows in time order).
    pub fn row(&mut self, (t_ns, footprint): FootprintRow) {
        let Some(f) = footprint else { return };
        self.peak = Some(self.peak.map_or(f, |p| p.max(f)));
        while self
            .bounds
            .get(self.next)
            .is_some_and(|(_, end)| *end < t_ns)
        {
            self.next += 1;
        }
        for (k, (start, end)) in self.bounds.iter().enumerate().skip(self.next) {
            if *start >= t_ns {
                break;
            }
            if t_ns <= *end {
                self.pools[k].add(f);
            }
        }
    }
}

/// Build the section from the arm's spec, markers (in order), results and
/// the series' idle footprints.
pub fn build(
    spec: &WhisperSpec,
    markers: &[Marker],
    results: &[RequestResult],
    series: IdleFootprints,
) -> ResidencyReceipt {
    let mut windows = Vec::new();
    let pools = series.pools;
    for ((i, j), pool) in idle_windows(markers).into_iter().zip(&pools) {
        let (m, close) = (&markers[i], &markers[j]);
        let before_request = (close.phase == Phase::RequestBegin)
            .then_some(close.request_id)
            .flatten();
        windows.push(IdleWindow {
            after: m.phase,
            before_request,
            gap_ms: match before_request {
                Some(id) => gap_before(&spec.gaps_ms, id),
                None => spec.idle_ms,
            },
            start_ns: m.t_ns,
            end_ns: close.t_ns,
            samples: pool.n,
            mean_footprint_bytes: pool.mean(),
            min_footprint_bytes: pool.min,
            released: markers[i + 1..j].iter().any(|x| x.phase == Phase::Release),
        });
    }
    let mut all = Pool::default();
    pools.iter().for_each(|p| all.merge(p));

    let release_drops = markers
        .iter()
        .enumerate()
        .filter(|(_, m)| m.phase == Phase::Release)
        .map(|(i, m)| {
            let before = i
                .checked_sub(1)
                .and_then(|p| markers[p].memory.footprint_bytes);
            let after = m.memory.footprint_bytes;
            ReleaseDrop {
                seq: m.seq,
                before_footprint_bytes: before,
                after_footprint_bytes: after,
                dropped_bytes: match (before, after) {
                    (Some(b), Some(a)) => Some(b as i64 - a as i64),
                    _ => None,
                },
            }
        })
        .collect();

    let mut by_gap: Vec<GapRow> = Vec::new();
    let mut gaps: Vec<u64> = Vec::new();
    for r in results {
        if let Some(t) = &r.timing
            && !gaps.contains(&t.gap_ms)
        {
            gaps.push(t.gap_ms);
        }
    }
    for gap in gaps {
        let these: Vec<&RequestResult> = results
            .iter()
            .filter(|r| r.timing.as_ref().is_some_and(|t| t.gap_ms == gap))
            .collect();
        let mut pool = Pool::default();
        for (w, p) in windows.iter().zip(&pools) {
            if w.before_request.is_some() && w.gap_ms == gap {
                pool.merge(p);
            }
        }
        by_gap.push(GapRow {
            gap_ms: gap,
            stop_to_final: StopToFinal::of(these.iter().copied()),
            reloads: these
                .iter()
                .filter(|r| r.timing.as_ref().is_some_and(|t| t.reload_ns.is_some()))
                .count() as u64,
            idle_mean_footprint_bytes: pool.mean(),
            idle_min_footprint_bytes: pool.min,
        });
    }

    let marker_footprints = markers
        .iter()
        .flat_map(|m| [m.memory.footprint_bytes, m.memory.footprint_peak_bytes]);
    let peak_footprint_bytes = marker_footprints.chain([series.peak]).flatten().max();
    let peak_resident_bytes = markers
        .iter()
        .filter_map(|m| m.memory.resident_peak_bytes)
        .max();

    let requests = results
        .iter()
        .filter_map(|r| {
            let t = r.timing.as_ref()?;
            Some(RequestTimingRow {
                request_id: r.request_id,
                gap_ms: t.gap_ms,
                delivery_ns: t.audio_end_ns.saturating_sub(t.speech_start_ns),
                compute_ns: r.latency_ns,
                stop_to_final_ns: t.stop_to_final_ns,
                reload_ns: t.reload_ns,
            })
        })
        .collect();

    ResidencyReceipt {
        policy: spec.idle_policy.name().to_string(),
        unload_after_idle_ms: match spec.idle_policy {
            IdlePolicy::UnloadAfterIdle { after_ms } => Some(after_ms),
            _ => None,
        },
        request_mode: spec.request_mode.name().to_string(),
        chunk_ms: match spec.request_mode {
            RequestMode::Realtime { chunk_ms } => Some(chunk_ms),
            RequestMode::File => None,
        },
        releases: markers.iter().filter(|m| m.phase == Phase::Release).count() as u64,
        reloads: markers.iter().filter(|m| m.phase == Phase::Reload).count() as u64,
        stop_to_final: StopToFinal::of(results),
        idle_mean_footprint_bytes: all.mean(),
        idle_min_footprint_bytes: all.min,
        peak_footprint_bytes,
        peak_resident_bytes,
        by_gap,
        windows,
        release_drops,
        requests,
    }
}

fn mib(v: Option<f64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1}", b / 1048576.0))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |ns| format!("{:.1}", ns / 1e6))
}

/// The summary's section: per arm and gap, idle RAM, peak and
/// stop-to-final; empty when no arm has a residency section. `with` holds
/// each arm's id and section (taking these rather than the receipt keeps
/// this module below `receipt`, which holds its types).
pub fn markdown(with: &[(&str, &ResidencyReceipt)]) -> String {
    use std::fmt::Write;
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "\n## Real-time requests and idle residency\n");
    let _ = writeln!(
        out,
        "Stop-to-final runs from the end of a request's audio to its final text (reloads included); compute latency above is the decode alone. Idle RAM is the series' footprint between requests.\n"
    );
    let _ = writeln!(
        out,
        "| arm | policy | mode | gap | requests | reloads | idle mean / min MiB | peak MiB | stop-to-final p50 / p95 / max ms |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for (id, r) in with {
        let policy = match r.unload_after_idle_ms {
            Some(ms) => format!("{} ({} s)", r.policy, ms as f64 / 1000.0),
            None => r.policy.clone(),
        };
        let mode = match r.chunk_ms {
            Some(c) => format!("{} ({c} ms chunks)", r.request_mode),
            None => r.request_mode.clone(),
        };
        let stf = |s: &Option<StopToFinal>| match s {
            Some(s) => format!(
                "{} / {} / {}",
                ms(Some(s.p50_ns)),
                ms(Some(s.p95_ns)),
                ms(Some(s.max_ns as f64))
            ),
            None => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {id} | {policy} | {mode} | all | {} | {} | {} / {} | {} | {} |",
            r.requests.len(),
            r.reloads,
            mib(r.idle_mean_footprint_bytes),
            mib(r.idle_min_footprint_bytes.map(|v| v as f64)),
            mib(r.peak_footprint_bytes.map(|v| v as f64)),
            stf(&r.stop_to_final)
        );
        for g in &r.by_gap {
            let _ = writeln!(
                out,
                "| {id} | | | {} s | {} | {} | {} / {} | | {} |",
                g.gap_ms as f64 / 1000.0,
                g.stop_to_final.as_ref().map_or(0, |s| s.count),
                g.reloads,
                mib(g.idle_mean_footprint_bytes),
                mib(g.idle_min_footprint_bytes.map(|v| v as f64)),
                stf(&g.stop_to_final)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;
    use worker_contract::{CalibrationResult, RequestTiming, ResultBody};

    const MIB: u64 = 1 << 20;

    fn marker(seq: u64, phase: Phase, request_id: Option<u64>, t_ns: u64, fp_mib: u64) -> Marker {
        Marker {
            phase,
            seq,
            request_id,
            t_ns,
            memory: TaskMemory {
                footprint_bytes: Some(fp_mib * MIB),
                resident_peak_bytes: Some(fp_mib * MIB + MIB),
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    fn result(request_id: u64, gap_ms: u64, stop_to_final_ns: u64, reload: bool) -> RequestResult {
        RequestResult {
            request_id,
            latency_ns: 50,
            body: ResultBody::Calibration(CalibrationResult {
                held_bytes: 0,
                leaked_bytes: 0,
                spike_bytes: 0,
                spike_resident_ns: None,
                spike_freed_ns: None,
                spike_started_ns: None,
                spike_between_ticks: None,
            }),
            timing: Some(RequestTiming {
                mode: "realtime".into(),
                chunk_ms: 100,
                chunks: 10,
                gap_ms,
                speech_start_ns: 0,
                audio_end_ns: 1_000,
                final_ns: 1_000 + stop_to_final_ns,
                stop_to_final_ns,
                reload_ns: reload.then_some(30),
            }),
        }
    }

    fn spec() -> WhisperSpec {
        serde_json::from_value(serde_json::json!({
            "model": {"path": "m.bin", "sha256": null},
            "threads": 1, "decoding": {"strategy": "greedy"}, "language": "en",
            "no_timestamps": true, "flash_attn": false, "use_gpu": false, "audio_ctx": 0,
            "initializer": "no_state", "extra_states": 0, "warmup": 1,
            "fixtures": [], "repetitions": 1, "idle_ms": 500, "encoder": "native",
            "request_mode": {"mode": "realtime", "chunk_ms": 100},
            "idle_policy": {"policy": "load_on_speech"},
            "gaps_ms": [1000, 3000]
        }))
        .unwrap()
    }

    #[test]
    fn idle_windows_pool_the_footprint_between_requests() {
        use Phase::*;
        // load_on_speech: 100 MiB loaded, 20 MiB released.
        let markers = vec![
            marker(0, WarmupDone, None, 1_000, 100),
            marker(1, Release, None, 1_100, 20),
            marker(2, RequestBegin, Some(0), 2_000, 20),
            marker(3, Reload, None, 2_200, 100),
            marker(4, RequestEnd, Some(0), 2_500, 110),
            marker(5, Release, None, 2_600, 20),
            marker(6, RequestBegin, Some(1), 5_500, 20),
            marker(7, Reload, None, 5_700, 100),
            marker(8, RequestEnd, Some(1), 6_000, 110),
            marker(9, Release, None, 6_100, 20),
            marker(10, IdleEnd, None, 6_500, 20),
        ];
        // A row every 100 ns: 100 MiB before each release, 20 after, 130 while decoding.
        let rows: Vec<FootprintRow> = (10..=65)
            .map(|k| {
                let t = k * 100;
                let fp = match t {
                    t if t <= 1_100 => 100,
                    t if t <= 2_000 => 20,
                    t if t <= 2_500 => 130,
                    t if t <= 2_600 => 100,
                    t if t <= 5_500 => 20,
                    t if t <= 6_000 => 130,
                    t if t <= 6_100 => 100,
                    _ => 20,
                };
                (t, Some(fp * MIB))
            })
            .collect();
        let results = vec![result(0, 1000, 400, true), result(1, 3000, 300, true)];
        let mut series = IdleFootprints::new(&markers);
        rows.iter().for_each(|r| series.row(*r));
        let r = build(&spec(), &markers, &results, series);
        assert_eq!(
            (r.policy.as_str(), r.request_mode.as_str()),
            ("load_on_speech", "realtime")
        );
        assert_eq!((r.releases, r.reloads, r.chunk_ms), (3, 2, Some(100)));
        assert_eq!(r.windows.len(), 3);
        // Window 1 (warmup_done, request 0]: rows 1100..2000, one at 100 MiB then nine at 20.
        let w = &r.windows[0];
        assert_eq!(
            (w.before_request, w.gap_ms, w.samples, w.released),
            (Some(0), 1000, 10, true)
        );
        assert_eq!(
            w.mean_footprint_bytes,
            Some((100.0 + 9.0 * 20.0) / 10.0 * MIB as f64)
        );
        assert_eq!(w.min_footprint_bytes, Some(20 * MIB));
        // The last window closes at idle_end with the arm's idle_ms.
        assert_eq!(
            (r.windows[2].before_request, r.windows[2].gap_ms),
            (None, 500)
        );
        // Pooled: 10 + 30 + 5 rows; 3 at 100 MiB, the rest at 20.
        let pooled = (3.0 * 100.0 + 42.0 * 20.0) / 45.0 * MIB as f64;
        assert!((r.idle_mean_footprint_bytes.unwrap() - pooled).abs() < 1.0);
        assert_eq!(r.idle_min_footprint_bytes, Some(20 * MIB));
        assert_eq!(r.peak_footprint_bytes, Some(130 * MIB));
        assert_eq!(r.peak_resident_bytes, Some(111 * MIB));
        // Each release gave back 80 or 90 MiB.
        let drops: Vec<Option<i64>> = r.release_drops.iter().map(|d| d.dropped_bytes).collect();
        assert_eq!(
            drops,
            vec![
                Some(80 * MIB as i64),
                Some(90 * MIB as i64),
                Some(90 * MIB as i64)
            ]
        );
        // Per gap, in the order met, with the request that followed it.
        let gaps: Vec<(u64, u64, f64)> = r
            .by_gap
            .iter()
            .map(|g| {
                (
                    g.gap_ms,
                    g.reloads,
                    g.stop_to_final.as_ref().unwrap().p50_ns,
                )
            })
            .collect();
        assert_eq!(gaps, vec![(1000, 1, 400.0), (3000, 1, 300.0)]);
        let s = r.stop_to_final.unwrap();
        assert_eq!((s.count, s.max_ns), (2, 400));
        assert_eq!(r.requests[1].delivery_ns, 1_000);
        assert!(markdown(&[]).is_empty());
    }
}
