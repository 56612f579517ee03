//! memqual watching itself in a soak: the arm's `harness.jsonl` (one line
//! per reading of the orchestrator's resident memory and CPU time and the
//! external sampler threads' CPU time, written by the soak's watcher) read
//! into the receipt's `harness_self` section.
//!
//! The orchestrator's resident memory is judged like the worker's: a
//! Theil–Sen slope per hour with a seeded bootstrap interval
//! ([`analysis::growth::analyse`], with the soak's own bootstrap settings),
//! one point per reading taken while the soak ran (the start reading, from
//! before the arm, is left out: starting an arm is a step, not growth).
//! The slope needs the soak's `min_points` readings spanning at least
//! [`MIN_SPAN_S`]: a slope per hour from a minute is an extrapolation. The
//! harness `grew` when the whole interval lies above
//! [`GROWTH_THRESHOLD_BYTES_PER_HOUR`]. That never changes the worker's
//! verdict; a `stability` gate fails on it with a check of its own, and
//! `summary.md` and the soak's output say `HARNESS GREW:`.

use crate::ReportError;
use crate::record::files;
use analysis::growth::{GrowthSettings, Point, Slope};
use analysis::stability::Stability;
use run_dir::{Rel, RunDir};
use serde::{Deserialize, Serialize};

/// memqual's own resident memory may grow this much per hour (1 MiB) before
/// a soak says the harness grew: 24 MiB over a 24-hour night, well below
/// what a harness that holds its night in memory adds (hundreds of MiB an
/// hour), and well above the noise of a flat one.
pub const GROWTH_THRESHOLD_BYTES_PER_HOUR: f64 = 1024.0 * 1024.0;

/// The shortest span of readings a slope is given for (10 minutes): over
/// seconds, an allocator's warm-up extrapolates to many MiB an hour.
pub const MIN_SPAN_S: f64 = 600.0;

/// Where in the soak a reading was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleAt {
    /// As the soak started, before admission and the worker.
    Start,
    /// At the soak's cadence while it runs.
    Periodic,
    /// After the arm ended, before the receipt was assembled.
    End,
}

/// One line of `harness.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessSample {
    /// The line's position in the file, from 0.
    pub seq: u64,
    /// Where in the soak it was taken.
    pub at: SampleAt,
    /// Monotonic time (ns) of the reading, the clock of the markers.
    pub t_ns: u64,
    /// The orchestrator's resident bytes (Linux `VmRSS`, macOS the task's
    /// resident size); `None` where it could not be read.
    pub resident_bytes: Option<u64>,
    /// Its resident high-water mark since it started (Linux `VmHWM`, macOS
    /// the task's lifetime peak); `None` where not reported.
    pub resident_peak_bytes: Option<u64>,
    /// CPU time (user + system) of the whole orchestrator process so far, ns.
    pub cpu_ns: Option<u64>,
    /// CPU time of the external sampler's threads so far (tick threads and
    /// row writers, ended and live), ns.
    pub sampler_cpu_ns: Option<u64>,
    /// Kernel thread ids of the sampler threads alive at the reading (Linux).
    #[serde(default)]
    pub sampler_tids: Vec<u32>,
}

/// The receipt's `harness_self` section: memqual's orchestrator and its
/// external sampler over the soak, from `harness.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HarnessSelf {
    /// Readings in `harness.jsonl`.
    pub samples: u64,
    /// Time from the first reading to the last, in seconds.
    pub wall_s: f64,
    /// The orchestrator's resident bytes at the first reading that has one.
    pub first_resident_bytes: Option<u64>,
    /// Its resident bytes at the last reading that has one.
    pub last_resident_bytes: Option<u64>,
    /// The largest resident bytes of any reading.
    pub max_resident_bytes: Option<u64>,
    /// The kernel's resident high-water mark at the last reading that has
    /// one: the largest the orchestrator ever was, between readings too.
    pub peak_resident_bytes: Option<u64>,
    /// Theil–Sen slope of the resident readings in bytes per hour (the
    /// start reading left out), with its bootstrap interval (the soak's
    /// resamples, confidence and seed); `None` with fewer readings than the
    /// soak's `min_points` or spanning less than [`MIN_SPAN_S`].
    pub resident_bytes_per_hour: Option<Slope>,
    /// The slope the interval's lower end must exceed for `grew`
    /// ([`GROWTH_THRESHOLD_BYTES_PER_HOUR`]).
    pub growth_threshold_bytes_per_hour: f64,
    /// True when the orchestrator's resident memory grew: the whole slope
    /// interval lies above the threshold.
    pub grew: bool,
    /// Why `grew` is what it is, in words.
    pub reason: String,
    /// CPU seconds the orchestrator process spent from the first reading to
    /// the last (every thread, the sampler's included).
    pub cpu_s: Option<f64>,
    /// CPU seconds the external sampler's threads spent from the first
    /// reading to the last.
    pub sampler_cpu_s: Option<f64>,
    /// `sampler_cpu_s` over `wall_s`: the share of one core the sampler took.
    pub sampler_cpu_share: Option<f64>,
}

/// Read the arm's `harness.jsonl` (streamed: one point per reading is
/// kept) and judge it with the soak's growth settings (`stability`, or the
/// defaults without one). `None` when the arm has no such file (it was not
/// soaked, or was soaked before memqual watched itself).
pub fn assemble(
    run: &RunDir,
    arm: &Rel,
    stability: Option<&Stability>,
) -> Result<Option<HarnessSelf>, ReportError> {
    let rel = arm.join(files::HARNESS);
    if !run.has_file(&rel)? {
        return Ok(None);
    }
    let mut readings = Readings::default();
    run.for_each_jsonl(&rel, |_, s: HarnessSample| {
        readings.add(&s);
        Ok(())
    })?;
    let settings = stability.map_or_else(GrowthSettings::default, |s| s.settings.growth.clone());
    Ok(Some(readings.judge(&settings)))
}

/// What is kept of the readings while the file streams by.
#[derive(Default)]
struct Readings {
    samples: u64,
    first: Option<HarnessSample>,
    last: Option<HarnessSample>,
    /// First, last and largest resident bytes of any reading.
    first_resident: Option<u64>,
    last_resident: Option<u64>,
    max_resident: Option<u64>,
    /// The readings the slope is judged on (all but the start).
    judged: Vec<Point>,
    peak: Option<u64>,
}

impl Readings {
    fn add(&mut self, s: &HarnessSample) {
        self.samples += 1;
        if let Some(bytes) = s.resident_bytes {
            self.first_resident = self.first_resident.or(Some(bytes));
            self.last_resident = Some(bytes);
            self.max_resident = self.max_resident.max(Some(bytes));
            if s.at != SampleAt::Start {
                self.judged.push(Point {
                    request: self.samples - 1,
                    t_ns: s.t_ns,
                    bytes: bytes as f64,
                });
            }
        }
        self.peak = s.resident_peak_bytes.or(self.peak);
        if self.first.is_none() {
            self.first = Some(s.clone());
        }
        self.last = Some(s.clone());
    }

    fn judge(self, settings: &GrowthSettings) -> HarnessSelf {
        let wall_ns = match (&self.first, &self.last) {
            (Some(a), Some(b)) => b.t_ns.saturating_sub(a.t_ns),
            _ => 0,
        };
        let spent = |of: fn(&HarnessSample) -> Option<u64>| -> Option<f64> {
            let (a, b) = (of(self.first.as_ref()?)?, of(self.last.as_ref()?)?);
            Some(b.saturating_sub(a) as f64 / 1e9)
        };
        let sampler_cpu_s = spent(|s| s.sampler_cpu_ns);
        // Each reading is a point of its own (its index stands for the
        // request): no warm-up beyond the start reading, no cycles.
        let growth = GrowthSettings {
            warmup_requests: 0,
            cycle_requests: 1,
            ..settings.clone()
        };
        let n = self.judged.len();
        let span_s = match (self.judged.first(), self.judged.last()) {
            (Some(a), Some(b)) => b.t_ns.saturating_sub(a.t_ns) as f64 / 1e9,
            _ => 0.0,
        };
        let min_points = growth.min_points.max(3);
        let slope = if n < min_points || span_s < MIN_SPAN_S {
            None
        } else {
            analysis::growth::analyse("harness_resident", &self.judged, &growth).bytes_per_hour
        };
        let threshold = GROWTH_THRESHOLD_BYTES_PER_HOUR;
        let grew = slope.is_some_and(|s| s.low > threshold);
        let mib = |b: f64| format!("{:.2} MiB", b / 1_048_576.0);
        let reason = match slope {
            None => format!(
                "{n} resident readings over {span_s:.0} s after the start: a slope needs at least \
                 {min_points} over at least {MIN_SPAN_S:.0} s"
            ),
            Some(s) => format!(
                "{} per hour [{}, {}] over {n} readings: the interval's low end is {} the {} per hour threshold",
                mib(s.estimate),
                mib(s.low),
                mib(s.high),
                if grew { "above" } else { "not above" },
                mib(threshold)
            ),
        };
        HarnessSelf {
            samples: self.samples,
            wall_s: wall_ns as f64 / 1e9,
            first_resident_bytes: self.first_resident,
            last_resident_bytes: self.last_resident,
            max_resident_bytes: self.max_resident,
            peak_resident_bytes: self.peak,
            resident_bytes_per_hour: slope,
            growth_threshold_bytes_per_hour: threshold,
            grew,
            reason,
            cpu_s: spent(|s| s.cpu_ns),
            sampler_cpu_s,
            sampler_cpu_share: sampler_cpu_s
                .filter(|_| wall_ns > 0)
                .map(|s| s / (wall_ns as f64 / 1e9)),
        }
    }
}

impl HarnessSelf {
    /// The section in one line: resident first → last (max), the slope, CPU.
    pub fn line(&self) -> String {
        let mib =
            |b: Option<u64>| b.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1_048_576.0));
        let slope = self.resident_bytes_per_hour.map_or_else(
            || "no slope".to_string(),
            |s| {
                format!(
                    "{:+.2} MiB/h [{:.2}, {:.2}]",
                    s.estimate / 1_048_576.0,
                    s.low / 1_048_576.0,
                    s.high / 1_048_576.0
                )
            },
        );
        let secs = |s: Option<f64>| s.map_or("–".into(), |s| format!("{s:.1} s"));
        format!(
            "memqual itself: resident {} → {} MiB (max {}), {slope}, over {} readings; CPU {}, sampler {}{}",
            mib(self.first_resident_bytes),
            mib(self.last_resident_bytes),
            mib(self.max_resident_bytes),
            self.samples,
            secs(self.cpu_s),
            secs(self.sampler_cpu_s),
            self.sampler_cpu_share.map_or(String::new(), |f| format!(
                " ({:.2} % of wall time)",
                f * 100.0
            ))
        )
    }

    /// `HARNESS GREW: …` when the orchestrator's resident memory grew.
    pub fn grew_line(&self) -> Option<String> {
        self.grew.then(|| {
            format!(
                "HARNESS GREW: memqual's own resident memory grows {} (the worker's verdict stands)",
                self.reason
            )
        })
    }
}

/// `summary.md`'s section on memqual itself: one line per soaked arm (id
/// and section), and a `HARNESS GREW:` line for each whose orchestrator
/// grew. Empty without any.
pub fn markdown<'a>(arms: impl IntoIterator<Item = (&'a str, &'a HarnessSelf)>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (id, h) in arms {
        if out.is_empty() {
            let _ = writeln!(out, "\n## memqual itself\n");
        }
        let _ = writeln!(out, "`{id}`: {}.\n", h.line());
        if let Some(grew) = h.grew_line() {
            let _ = writeln!(out, "{grew}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const MINUTE_NS: u64 = 60_000_000_000;

    /// `harness.jsonl` as the watcher writes it, by hand: a start line, a
    /// reading a minute for `minutes` minutes, an end line; resident
    /// `resident(i)` at line i, CPU growing a second a minute (the sampler
    /// a tenth of that).
    fn lines(minutes: u64, resident: impl Fn(u64) -> u64) -> String {
        (0..=minutes)
            .map(|i| {
                let at = match i {
                    0 => "start",
                    i if i == minutes => "end",
                    _ => "periodic",
                };
                format!(
                    "{{\"seq\":{i},\"at\":\"{at}\",\"t_ns\":{},\"resident_bytes\":{},\"resident_peak_bytes\":{},\"cpu_ns\":{},\"sampler_cpu_ns\":{},\"sampler_tids\":[4242]}}\n",
                    1_000 + i * MINUTE_NS,
                    resident(i),
                    resident(i) + MIB,
                    5_000_000_000 + i * 1_000_000_000,
                    i * 100_000_000
                )
            })
            .collect()
    }

    fn assembled(text: &str) -> HarnessSelf {
        let (_tmp, run) = crate::testing::run();
        let arm = crate::testing::arm(&run, "a");
        run.write_bytes(&arm.join(files::HARNESS), text.as_bytes())
            .unwrap();
        assemble(&run, &arm, None).unwrap().unwrap()
    }

    #[test]
    fn harness_self_of_a_flat_orchestrator_did_not_grow() {
        // 60 readings over an hour, flat at 20 MiB with a page of jitter.
        let h = assembled(&lines(60, |i| 20 * MIB + (i % 3) * 4096));
        assert_eq!(h.samples, 61);
        assert_eq!(h.first_resident_bytes, Some(20 * MIB));
        assert_eq!(h.max_resident_bytes, Some(20 * MIB + 8192));
        assert_eq!(h.peak_resident_bytes, Some(21 * MIB));
        let slope = h.resident_bytes_per_hour.expect("a slope over 61 readings");
        assert!(slope.low <= GROWTH_THRESHOLD_BYTES_PER_HOUR, "{slope:?}");
        assert!(slope.estimate.abs() < 64.0 * 1024.0, "{slope:?}");
        assert!(!h.grew, "{}", h.reason);
        assert!(h.grew_line().is_none());
        assert_eq!(h.wall_s, 3600.0);
        assert_eq!(h.cpu_s, Some(60.0));
        assert_eq!(h.sampler_cpu_s, Some(6.0));
        assert!((h.sampler_cpu_share.unwrap() - 6.0 / 3600.0).abs() < 1e-12);
    }

    #[test]
    fn harness_self_of_a_growing_orchestrator_grew_at_its_slope() {
        // 7.5 MiB an hour (an eighth of a MiB a minute, 2 pages of jitter).
        let planted = 7.5 * MIB as f64;
        let h = assembled(&lines(90, |i| 20 * MIB + i * MIB / 8 + (i % 2) * 8192));
        let slope = h.resident_bytes_per_hour.unwrap();
        assert!(
            (slope.estimate - planted).abs() < 0.1 * planted,
            "{slope:?} against {planted}"
        );
        assert!(slope.low > GROWTH_THRESHOLD_BYTES_PER_HOUR, "{slope:?}");
        assert!(h.grew, "{}", h.reason);
        let line = h.grew_line().unwrap();
        assert!(line.starts_with("HARNESS GREW: "), "{line}");
        let md = markdown([("soaked", &h)]);
        assert!(md.contains("\nHARNESS GREW: "), "{md}");
    }

    #[test]
    fn harness_self_of_a_short_soak_has_its_figures_but_no_slope() {
        let h = assembled(&lines(2, |_| 20 * MIB));
        assert_eq!(h.samples, 3);
        assert_eq!(h.resident_bytes_per_hour, None);
        assert!(!h.grew);
        assert!(
            h.reason.starts_with("2 resident readings over 60 s"),
            "{}",
            h.reason
        );
        assert_eq!(h.sampler_cpu_s, Some(0.2));
        // Many readings, a second apart, growing fast: too short a span
        // to say per hour.
        let fast: String = (0..300u64)
            .map(|i| {
                format!(
                    "{{\"seq\":{i},\"at\":\"periodic\",\"t_ns\":{},\"resident_bytes\":{},\"resident_peak_bytes\":null,\"cpu_ns\":null,\"sampler_cpu_ns\":null}}\n",
                    i * 1_000_000_000,
                    20 * MIB + i * 4096
                )
            })
            .collect();
        let h = assembled(&fast);
        assert_eq!(h.resident_bytes_per_hour, None);
        assert!(!h.grew);
        assert!(h.reason.contains("over 299 s"), "{}", h.reason);
        assert_eq!(h.max_resident_bytes, Some(20 * MIB + 299 * 4096));
        assert_eq!((h.cpu_s, h.sampler_cpu_share), (None, None));
    }

    #[test]
    fn harness_self_leaves_the_start_reading_out_of_the_slope() {
        // The arm's start adds 8 MiB after the start reading; flat after.
        let h = assembled(&lines(60, |i| if i == 0 { 12 * MIB } else { 20 * MIB }));
        assert_eq!(h.first_resident_bytes, Some(12 * MIB));
        assert_eq!(h.resident_bytes_per_hour.unwrap().high, 0.0);
        assert!(h.reason.contains("over 60 readings"), "{}", h.reason);
        assert!(!h.grew, "{}", h.reason);
    }

    #[test]
    fn harness_self_is_absent_without_the_file_and_names_a_broken_line() {
        let (_tmp, run) = crate::testing::run();
        let arm = crate::testing::arm(&run, "a");
        assert_eq!(assemble(&run, &arm, None).unwrap(), None);
        let text = format!("{}{{\"seq\": \"x\"}}\n", lines(1, |_| MIB));
        run.write_bytes(&arm.join(files::HARNESS), text.as_bytes())
            .unwrap();
        let err = assemble(&run, &arm, None).unwrap_err().to_string();
        assert!(err.contains("harness.jsonl:3"), "{err}");
    }
}
