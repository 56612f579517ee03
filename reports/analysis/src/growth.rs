//! Memory growth across many requests: plateau, step, linear growth or
//! inconclusive, and whether system memory grows while the worker stays flat.
//!
//! Pure functions over `(request, time, bytes)` points. The statistics are
//! written here rather than taken from a crate: the estimator (Theil–Sen:
//! the median of all pairwise slopes) and a percentile bootstrap over it are
//! a few dozen lines, and the available crates either lack Theil–Sen or pull
//! in a full linear-algebra stack. The bootstrap draws from `rand_xorshift`
//! seeded from the settings, so the same points always give the same
//! interval.
//!
//! How a series is judged (every threshold comes from [`GrowthSettings`]):
//! 1. Requests before `warmup_requests` are dropped.
//! 2. The rest is cut into bins of `cycle_requests` (or more, so there are at
//!    most [`MAX_BINS`]); each bin keeps its minimum. A sawtooth workload
//!    (buffers grow and shrink inside a cycle) is judged by its floor.
//! 3. Theil–Sen slope per request and per hour over all bins, and over the
//!    last `tail_fraction` of them, each with a bootstrap interval.
//! 4. `linear_growth` when the tail's interval lies wholly above
//!    `linear_slope_bytes_per_request`; otherwise, when the tail's interval
//!    lies wholly below it, `step` if two to `max_steps` level jumps of at
//!    least `step_min_bytes` are found, else `plateau`; anything else
//!    (too few points, an interval straddling the threshold, more jumps than
//!    `max_steps`) is `inconclusive`, with the reason.

use rand_core::{Rng, SeedableRng};
use rand_xorshift::XorShiftRng;
use serde::{Deserialize, Serialize};

/// Bins kept at most: bounds the pairwise work (bins² per estimate).
pub const MAX_BINS: usize = 256;

const NS_PER_HOUR: f64 = 3_600.0 * 1e9;

/// The thresholds a protocol's `[soak]` table sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrowthSettings {
    /// Requests at the start that are not judged (lazy allocation, caches filling).
    pub warmup_requests: u64,
    /// Requests per workload cycle (e.g. the number of fixtures cycled); the
    /// minimum of each cycle is what is judged.
    pub cycle_requests: u64,
    /// Fewer analysed bins than this is `inconclusive`.
    pub min_points: usize,
    /// Fraction (0–1] of the analysed bins, at the end, whose slope decides
    /// whether growth still goes on.
    pub tail_fraction: f64,
    /// A slope whose whole interval exceeds this (bytes per request) is growth.
    pub linear_slope_bytes_per_request: f64,
    /// A level jump at least this large counts as a step.
    pub step_min_bytes: f64,
    /// More steps than this with a flat tail is `inconclusive` (run longer).
    pub max_steps: usize,
    /// Bootstrap resamples for the interval.
    pub bootstrap_resamples: usize,
    /// Two-sided confidence of the interval (e.g. 0.95).
    pub confidence: f64,
    /// Seed of the bootstrap's generator.
    pub seed: u64,
}

impl Default for GrowthSettings {
    fn default() -> Self {
        GrowthSettings {
            warmup_requests: 10,
            cycle_requests: 1,
            min_points: 20,
            tail_fraction: 0.5,
            linear_slope_bytes_per_request: 4096.0,
            step_min_bytes: 2.0 * 1024.0 * 1024.0,
            max_steps: 4,
            bootstrap_resamples: 200,
            confidence: 0.95,
            seed: 0x6d65_6d71_7561_6c00,
        }
    }
}

/// One observation: the memory value after request `request`, at monotonic `t_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Point {
    /// The request the value was read after.
    pub request: u64,
    /// Monotonic time (ns) of the reading.
    pub t_ns: u64,
    /// The memory value in bytes.
    pub bytes: f64,
}

/// What kind of growth a series shows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// Grew once (or not at all), then flat.
    Plateau,
    /// A few level jumps, then flat: allocator caching.
    Step,
    /// Not enough evidence either way; never a pass.
    Inconclusive,
    /// Still growing at the end, faster than the threshold.
    LinearGrowth,
}

impl Classification {
    /// The name used in receipts and tables (`linear_growth`, …).
    pub fn name(self) -> &'static str {
        match self {
            Classification::Plateau => "plateau",
            Classification::Step => "step",
            Classification::Inconclusive => "inconclusive",
            Classification::LinearGrowth => "linear_growth",
        }
    }

    /// True for `plateau` and `step`: bounded memory.
    pub fn is_flat(self) -> bool {
        matches!(self, Classification::Plateau | Classification::Step)
    }
}

/// A slope with its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slope {
    /// The Theil–Sen slope.
    pub estimate: f64,
    /// Lower end of the bootstrap interval.
    pub low: f64,
    /// Upper end of the bootstrap interval.
    pub high: f64,
}

/// The judgement of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesGrowth {
    /// What was measured, e.g. `worker_footprint`, `sys_shmem`.
    pub series: String,
    /// Plateau, step, linear growth or inconclusive.
    pub classification: Classification,
    /// Why, in words (the numbers that decided it).
    pub reason: String,
    /// Points given, and points left after the warm-up.
    pub points: usize,
    /// Points left after the warm-up requests were dropped.
    pub analysed_points: usize,
    /// Bins judged (minima per cycle).
    pub bins: usize,
    /// Slope over all bins, bytes per request; `None` when too few bins.
    pub bytes_per_request: Option<Slope>,
    /// Slope over all bins, bytes per hour; `None` when too few bins.
    pub bytes_per_hour: Option<Slope>,
    /// Slope over the last `tail_fraction` of the bins, bytes per request; it decides growth.
    pub tail_bytes_per_request: Option<Slope>,
    /// Requests at which a level jump was found.
    pub steps_at_request: Vec<u64>,
    /// Bytes at the first analysed point; `None` without any.
    pub first_bytes: Option<f64>,
    /// Bytes at the last analysed point.
    pub last_bytes: Option<f64>,
    /// Largest bytes of any analysed point.
    pub max_bytes: Option<f64>,
}

/// Theil–Sen slope: the median of the slopes of every pair with distinct `x`.
/// `None` when no such pair exists.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(points.len() * points.len().saturating_sub(1) / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            let dx = b.0 - a.0;
            if dx != 0.0 {
                slopes.push((b.1 - a.1) / dx);
            }
        }
    }
    median_in_place(&mut slopes)
}

fn median_in_place(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let n = values.len();
    let (_, &mut hi, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = values[..n / 2]
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .unwrap_or(hi);
    Some((lo + hi) / 2.0)
}

/// A uniform index below `n` (modulo bias is negligible for n ≪ 2^64).
fn below(rng: &mut XorShiftRng, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// Theil–Sen slopes of `y` against each x-axis in `axes`, with percentile
/// bootstrap intervals (resampling points with replacement, the same
/// resample for every axis).
fn slopes_with_intervals(
    ys: &[f64],
    axes: &[&[f64]],
    settings: &GrowthSettings,
    salt: u64,
) -> Vec<Option<Slope>> {
    let estimate = |axis: &[f64], idx: &mut dyn Iterator<Item = usize>| {
        let pts: Vec<(f64, f64)> = idx.map(|i| (axis[i], ys[i])).collect();
        theil_sen(&pts)
    };
    let n = ys.len();
    let mut rng = XorShiftRng::seed_from_u64(settings.seed ^ salt);
    let mut draws: Vec<Vec<f64>> = vec![Vec::new(); axes.len()];
    for _ in 0..settings.bootstrap_resamples {
        let sample: Vec<usize> = (0..n).map(|_| below(&mut rng, n)).collect();
        for (axis, out) in axes.iter().zip(draws.iter_mut()) {
            if let Some(s) = estimate(axis, &mut sample.iter().copied()) {
                out.push(s);
            }
        }
    }
    let alpha = (1.0 - settings.confidence.clamp(0.0, 1.0)) / 2.0;
    axes.iter()
        .zip(draws)
        .map(|(axis, d)| {
            let est = estimate(axis, &mut (0..n))?;
            let low = crate::stats::percentile(&d, alpha * 100.0).unwrap_or(est);
            let high = crate::stats::percentile(&d, (1.0 - alpha) * 100.0).unwrap_or(est);
            Some(Slope {
                estimate: est,
                low: low.min(est),
                high: high.max(est),
            })
        })
        .collect()
}

/// Minimum of each bin of `width` consecutive points (by request order).
fn bin_minima(points: &[Point], width: usize) -> Vec<Point> {
    points
        .chunks(width.max(1))
        .filter_map(|c| c.iter().copied().min_by(|a, b| a.bytes.total_cmp(&b.bytes)))
        .collect()
}

fn median_of(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    median_in_place(&mut v).unwrap_or(0.0)
}

/// Of a level change seen between two windows, the share one boundary
/// must carry for it to be a jump. A jump lands between two bins (bins
/// keep their minimum, so a jump inside a bin shows at the next boundary):
/// one boundary carries all of it. A ramp spreads its rise evenly over the
/// `w` boundaries between the windows, so one carries about a w-th of it.
const JUMP_SHARE: f64 = 0.6;

/// Level jumps of at least `min_jump` between the medians of the `w` bins
/// before and after a boundary (w = bins/32, at least 2), each counted once,
/// at the largest single-bin rise near it, and only where that one rise
/// carries most of the change ([`JUMP_SHARE`]): memory that climbs by the
/// same small amount every request for a while (a ramp) crosses `min_jump`
/// between windows without ever jumping, and is not a step. Returns the
/// request of the first bin after each jump.
pub fn find_steps(bins: &[Point], min_jump: f64) -> Vec<u64> {
    let w = (bins.len() / 32).max(2);
    if bins.len() < 2 * w {
        return Vec::new();
    }
    let ys: Vec<f64> = bins.iter().map(|p| p.bytes).collect();
    let jump = |i: usize| median_of(&ys[i..i + w]) - median_of(&ys[i - w..i]);
    let mut steps = Vec::new();
    let mut i = w;
    while i + w <= ys.len() {
        let seen = jump(i);
        if seen >= min_jump {
            // The medians first see a jump up to w/2 bins early: place it at
            // the largest bin-to-bin rise among the next w boundaries.
            let end = (i + w + 1).min(ys.len());
            let best = (i..end)
                .max_by(|&a, &b| (ys[a] - ys[a - 1]).total_cmp(&(ys[b] - ys[b - 1])))
                .unwrap_or(i);
            // The whole change across the placed boundary (the windows on
            // either side of it): a jump's is its size; a ramp's is the rise
            // of about w bins, of which one boundary carries a w-th.
            let full = if best + w <= ys.len() {
                jump(best).max(seen)
            } else {
                seen
            };
            let rise = ys[best] - ys[best - 1];
            if rise >= JUMP_SHARE * full {
                steps.push(bins[best].request);
                i = best + w;
                continue;
            }
        }
        i += 1;
    }
    steps
}

/// Judge one series. `points` need not be sorted.
pub fn analyse(series: &str, points: &[Point], settings: &GrowthSettings) -> SeriesGrowth {
    let mut pts: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.request >= settings.warmup_requests && p.bytes.is_finite())
        .collect();
    pts.sort_by_key(|p| (p.request, p.t_ns));
    let cycle = usize::try_from(settings.cycle_requests.max(1)).unwrap_or(usize::MAX);
    let width = cycle.max(pts.len().div_ceil(MAX_BINS));
    let bins = bin_minima(&pts, width);
    let mut out = SeriesGrowth {
        series: series.to_string(),
        classification: Classification::Inconclusive,
        reason: String::new(),
        points: points.len(),
        analysed_points: pts.len(),
        bins: bins.len(),
        bytes_per_request: None,
        bytes_per_hour: None,
        tail_bytes_per_request: None,
        steps_at_request: Vec::new(),
        first_bytes: pts.first().map(|p| p.bytes),
        last_bytes: pts.last().map(|p| p.bytes),
        max_bytes: pts.iter().map(|p| p.bytes).max_by(f64::total_cmp),
    };
    if bins.len() < settings.min_points.max(3) {
        out.reason = format!(
            "{} bins after the {}-request warm-up (cycles of {width} requests); at least {} are needed",
            bins.len(),
            settings.warmup_requests,
            settings.min_points.max(3)
        );
        return out;
    }
    let ys: Vec<f64> = bins.iter().map(|p| p.bytes).collect();
    let req: Vec<f64> = bins.iter().map(|p| p.request as f64).collect();
    let t0 = bins[0].t_ns;
    let hours: Vec<f64> = bins
        .iter()
        .map(|p| p.t_ns.saturating_sub(t0) as f64 / NS_PER_HOUR)
        .collect();
    let all = slopes_with_intervals(&ys, &[&req, &hours], settings, 1);
    out.bytes_per_request = all[0];
    out.bytes_per_hour = all[1];
    let tail_len = ((bins.len() as f64 * settings.tail_fraction.clamp(0.0, 1.0)).ceil() as usize)
        .clamp(3, bins.len());
    let from = bins.len() - tail_len;
    let tail = slopes_with_intervals(&ys[from..], &[&req[from..]], settings, 2)[0];
    out.tail_bytes_per_request = tail;
    out.steps_at_request = find_steps(&bins, settings.step_min_bytes);
    let threshold = settings.linear_slope_bytes_per_request;
    let Some(tail) = tail else {
        out.reason = "no two analysed bins differ in request".into();
        return out;
    };
    let steps = out.steps_at_request.len();
    let (class, reason) = if tail.low > threshold {
        (
            Classification::LinearGrowth,
            format!(
                "the last {tail_len} bins grow {:.0} B/request [{:.0}, {:.0}], wholly above the {threshold:.0} B/request threshold",
                tail.estimate, tail.low, tail.high
            ),
        )
    } else if tail.high >= threshold {
        (
            Classification::Inconclusive,
            format!(
                "the last {tail_len} bins' slope interval [{:.0}, {:.0}] B/request straddles the {threshold:.0} B/request threshold: too noisy or too short",
                tail.low, tail.high
            ),
        )
    } else if steps > settings.max_steps {
        (
            Classification::Inconclusive,
            format!(
                "{steps} level jumps of at least {:.0} B, more than the {} a cache settles in: run longer",
                settings.step_min_bytes, settings.max_steps
            ),
        )
    } else if steps >= 2 {
        (
            Classification::Step,
            format!(
                "{steps} level jumps of at least {:.0} B, then flat (tail slope {:.0} B/request, interval below {threshold:.0})",
                settings.step_min_bytes, tail.estimate
            ),
        )
    } else {
        (
            Classification::Plateau,
            format!(
                "flat at the end (tail slope {:.0} B/request [{:.0}, {:.0}], below {threshold:.0}); {steps} level jump(s)",
                tail.estimate, tail.low, tail.high
            ),
        )
    };
    out.classification = class;
    out.reason = reason;
    out
}

/// The worker's verdict from its own series (footprint and resident): the
/// worst of them, in the order plateau < step < inconclusive < linear growth.
pub fn worst(series: &[&SeriesGrowth]) -> Classification {
    series
        .iter()
        .map(|s| s.classification)
        .max()
        .unwrap_or(Classification::Inconclusive)
}

/// The seed-001 pattern: some system series grows linearly while the
/// worker's own memory is bounded. Returns the names of the growing series
/// (empty: the pattern is absent, or the worker itself grows).
pub fn system_grows_while_worker_flat(
    worker: Classification,
    system: &[SeriesGrowth],
) -> Vec<String> {
    if !worker.is_flat() {
        return Vec::new();
    }
    system
        .iter()
        .filter(|s| s.classification == Classification::LinearGrowth)
        .map(|s| s.series.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: f64 = 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;

    /// Deterministic noise in [-amp, amp].
    fn noise(i: u64, amp: f64) -> f64 {
        let mut r = XorShiftRng::seed_from_u64(i);
        (r.next_u64() as f64 / u64::MAX as f64 * 2.0 - 1.0) * amp
    }

    /// One request every 100 ms.
    fn series(n: u64, f: impl Fn(u64) -> f64) -> Vec<Point> {
        (0..n)
            .map(|i| Point {
                request: i,
                t_ns: i * 100_000_000,
                bytes: f(i),
            })
            .collect()
    }

    fn settings() -> GrowthSettings {
        GrowthSettings::default()
    }

    #[test]
    fn theil_sen_ignores_outliers_and_vertical_pairs() {
        let mut pts: Vec<(f64, f64)> = (0..21).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        pts[3].1 = 1e9;
        pts[17].1 = -1e9;
        pts.push((5.0, 99.0));
        assert_eq!(theil_sen(&pts), Some(2.0));
        assert_eq!(theil_sen(&[(1.0, 1.0), (1.0, 5.0)]), None);
        assert_eq!(theil_sen(&[(0.0, 0.0), (2.0, 1.0)]), Some(0.5));
    }

    #[test]
    fn even_counts_take_the_middle_two() {
        assert_eq!(median_in_place(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median_in_place(&mut []), None);
    }

    #[test]
    fn a_noisy_leak_is_linear_growth_with_its_slope_per_request_and_hour() {
        let pts = series(2000, |i| {
            300.0 * MIB + 64.0 * KIB * i as f64 + noise(i, 512.0 * KIB)
        });
        let g = analyse("worker_footprint", &pts, &settings());
        assert_eq!(
            g.classification,
            Classification::LinearGrowth,
            "{}",
            g.reason
        );
        let s = g.bytes_per_request.unwrap();
        assert!((s.estimate - 64.0 * KIB).abs() < 0.02 * 64.0 * KIB, "{s:?}");
        assert!(s.low <= s.estimate && s.estimate <= s.high);
        assert!(s.low > 60.0 * KIB && s.high < 68.0 * KIB, "{s:?}");
        // 10 requests per second: 36,000 requests per hour.
        let h = g.bytes_per_hour.unwrap();
        assert!(
            (h.estimate / (36_000.0 * 64.0 * KIB) - 1.0).abs() < 0.02,
            "{h:?}"
        );
        assert_eq!(g.analysed_points, 1990);
        assert_eq!(g.bins, 249, "1990 points in bins of 8");
    }

    #[test]
    fn growth_that_stops_after_50_requests_is_a_plateau() {
        let pts = series(2000, |i| 100.0 * MIB + 64.0 * KIB * i.min(50) as f64);
        let g = analyse("worker_resident", &pts, &settings());
        assert_eq!(g.classification, Classification::Plateau, "{}", g.reason);
        assert_eq!(g.bytes_per_request.unwrap().estimate, 0.0);
        assert!(g.steps_at_request.is_empty());
    }

    #[test]
    fn two_jumps_then_flat_is_a_step_found_where_it_happened() {
        let pts = series(2000, |i| {
            let level = if i >= 1000 {
                2.0
            } else if i >= 400 {
                1.0
            } else {
                0.0
            };
            50.0 * MIB + level * 16.0 * MIB + noise(i, 256.0 * KIB)
        });
        let g = analyse("worker_footprint", &pts, &settings());
        assert_eq!(g.classification, Classification::Step, "{}", g.reason);
        assert_eq!(g.steps_at_request.len(), 2, "{:?}", g.steps_at_request);
        // Bins of 8 requests: each jump is located within one bin.
        assert!(
            g.steps_at_request[0].abs_diff(400) <= 8,
            "{:?}",
            g.steps_at_request
        );
        assert!(
            g.steps_at_request[1].abs_diff(1000) <= 8,
            "{:?}",
            g.steps_at_request
        );
    }

    #[test]
    fn a_sawtooth_is_judged_by_its_floor() {
        // Each cycle of 5 requests climbs 40 MiB and falls back; the floor leaks 64 KiB per cycle.
        let pts = series(1500, |i| {
            80.0 * MIB + (i % 5) as f64 * 10.0 * MIB + 64.0 * KIB * (i / 5) as f64
        });
        let s = GrowthSettings {
            cycle_requests: 5,
            linear_slope_bytes_per_request: 1024.0,
            ..settings()
        };
        let g = analyse("worker_footprint", &pts, &s);
        assert_eq!(
            g.classification,
            Classification::LinearGrowth,
            "{}",
            g.reason
        );
        let per_request = g.bytes_per_request.unwrap().estimate;
        assert!(
            (per_request - 64.0 * KIB / 5.0).abs() < 1.0,
            "{per_request}"
        );
    }

    #[test]
    fn too_few_points_or_too_much_noise_is_inconclusive() {
        let short = series(25, |i| i as f64);
        let g = analyse("worker_footprint", &short, &settings());
        assert_eq!(g.classification, Classification::Inconclusive);
        assert!(g.reason.contains("15 bins"), "{}", g.reason);
        // A slope of the threshold's size buried in noise a thousand times larger.
        let noisy = series(300, |i| 4096.0 * i as f64 + noise(i, 64.0 * MIB));
        let g = analyse("worker_footprint", &noisy, &settings());
        assert_eq!(
            g.classification,
            Classification::Inconclusive,
            "{}",
            g.reason
        );
        assert!(g.reason.contains("straddles"), "{}", g.reason);
    }

    #[test]
    fn many_jumps_are_not_called_a_cache() {
        // Seven jumps early on, then flat: too many for a cache to settle in.
        let pts = series(2000, |i| 10.0 * MIB * (i / 100).min(7) as f64);
        let g = analyse("worker_footprint", &pts, &settings());
        assert_eq!(g.steps_at_request.len(), 7, "{:?}", g.steps_at_request);
        assert_eq!(
            g.classification,
            Classification::Inconclusive,
            "{}",
            g.reason
        );
    }

    /// Issue 59, finding 9: generated shapes, each with its own name, and a
    /// jump reported only where the series jumps. A ramp (the same small
    /// rise every request for a while, then none) of any slope and length
    /// that stops in the first half is bounded: a plateau, with no level
    /// jump, however far it climbed; two jumps are a step found where they
    /// are; seven are a staircase too long for a cache; a leak that never
    /// stops is linear growth.
    #[test]
    fn generated_shapes_get_their_own_names_and_jumps_only_where_they_are() {
        for slope_kib in [8.0, 32.0, 64.0, 128.0, 256.0, 1024.0] {
            for (start, len) in [(50, 100), (100, 300), (200, 600), (20, 900)] {
                let pts = series(2000, |i| {
                    let climbed = i.saturating_sub(start).min(len) as f64;
                    100.0 * MIB + slope_kib * KIB * climbed + noise(i, 64.0 * KIB)
                });
                let g = analyse("worker_resident", &pts, &settings());
                let shape = format!("a ramp of {slope_kib} KiB/request from {start} for {len}");
                assert!(
                    g.steps_at_request.is_empty(),
                    "{shape}: jumps at {:?} where there are none",
                    g.steps_at_request
                );
                assert_eq!(
                    g.classification,
                    Classification::Plateau,
                    "{shape}: {}",
                    g.reason
                );
            }
        }
        for (a, b, size_mib) in [(300u64, 1100u64, 4.0), (500, 900, 16.0), (150, 800, 64.0)] {
            let pts = series(2000, |i| {
                let level = u8::from(i >= a) + u8::from(i >= b);
                50.0 * MIB + f64::from(level) * size_mib * MIB + noise(i, 128.0 * KIB)
            });
            let g = analyse("worker_resident", &pts, &settings());
            let shape = format!("jumps of {size_mib} MiB at {a} and {b}");
            assert_eq!(
                g.classification,
                Classification::Step,
                "{shape}: {}",
                g.reason
            );
            assert_eq!(
                g.steps_at_request.len(),
                2,
                "{shape}: {:?}",
                g.steps_at_request
            );
            assert!(
                g.steps_at_request[0].abs_diff(a) <= 16,
                "{shape}: {:?}",
                g.steps_at_request
            );
            assert!(
                g.steps_at_request[1].abs_diff(b) <= 16,
                "{shape}: {:?}",
                g.steps_at_request
            );
        }
        // A ramp between two jumps: the jumps are found, the ramp is not one.
        let pts = series(2000, |i| {
            let ramp = i.saturating_sub(700).min(200) as f64 * 32.0 * KIB;
            50.0 * MIB
                + if i >= 300 { 8.0 * MIB } else { 0.0 }
                + ramp
                + if i >= 1200 { 8.0 * MIB } else { 0.0 }
        });
        let g = analyse("worker_resident", &pts, &settings());
        assert_eq!(g.classification, Classification::Step, "{}", g.reason);
        assert_eq!(g.steps_at_request.len(), 2, "{:?}", g.steps_at_request);
        // A staircase of seven jumps of 6 MiB: inconclusive, each jump found.
        let pts = series(2000, |i| 6.0 * MIB * (i / 100).min(7) as f64);
        let g = analyse("worker_resident", &pts, &settings());
        assert_eq!(g.steps_at_request.len(), 7, "{:?}", g.steps_at_request);
        assert_eq!(
            g.classification,
            Classification::Inconclusive,
            "{}",
            g.reason
        );
        // Slow leaks that never stop, just above the threshold and far above it.
        for slope in [16.0 * KIB, 64.0 * KIB, 512.0 * KIB] {
            let pts = series(2000, |i| {
                80.0 * MIB + slope * i as f64 + noise(i, 64.0 * KIB)
            });
            let g = analyse("worker_resident", &pts, &settings());
            assert_eq!(
                g.classification,
                Classification::LinearGrowth,
                "{slope}: {}",
                g.reason
            );
            assert!(
                g.steps_at_request.is_empty(),
                "{slope}: {:?}",
                g.steps_at_request
            );
        }
    }

    #[test]
    fn the_interval_is_reproducible_from_the_seed() {
        let pts = series(500, |i| 1000.0 * i as f64 + noise(i, 256.0 * KIB));
        let a = analyse("x", &pts, &settings());
        let b = analyse("x", &pts, &settings());
        assert_eq!(a.bytes_per_request, b.bytes_per_request);
        let c = analyse(
            "x",
            &pts,
            &GrowthSettings {
                seed: 1,
                ..settings()
            },
        );
        assert_ne!(
            a.bytes_per_request.unwrap().low,
            c.bytes_per_request.unwrap().low
        );
    }

    #[test]
    fn system_growth_with_a_flat_worker_is_named() {
        let worker = analyse("worker_resident", &series(400, |_| 50.0 * MIB), &settings());
        let shm = analyse(
            "sys_shmem",
            &series(400, |i| 256.0 * KIB * i as f64),
            &settings(),
        );
        let swap = analyse("sys_swap_used", &series(400, |_| 0.0), &settings());
        assert_eq!(worker.classification, Classification::Plateau);
        let system = [shm, swap];
        assert_eq!(
            system_grows_while_worker_flat(worst(&[&worker]), &system),
            vec!["sys_shmem".to_string()]
        );
        assert!(system_grows_while_worker_flat(Classification::LinearGrowth, &system).is_empty());
    }
}
