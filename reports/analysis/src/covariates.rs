//! The soak's covariates in the receipt: what the host's thermal and power
//! state did during the soak (the series' `cov_*` columns, read once per
//! system period), and whether it changed enough to confound the growth
//! verdict. A soak that began on AC power and ended on battery, or whose
//! machine throttled half-way, measured two different hosts; its verdict
//! stands, but the receipt says so beside it.
//!
//! A change is a confound when the thermal pressure level (macOS), the power
//! source or low-power mode (macOS) takes more than one value, or when the
//! hottest thermal zone (Linux) spans [`THERMAL_SWING_CELSIUS`] or more.
//! The CPU frequency is recorded and drawn but not judged: governors move it
//! with load all the time.

use sampler::SeriesRow;
use serde::{Deserialize, Serialize};

/// A swing of the hottest zone at least this large (°C) over the soak is a
/// confound: enough to move a passively cooled machine into throttling.
pub const THERMAL_SWING_CELSIUS: f64 = 10.0;

/// Chart points kept at most (the readings are thinned evenly beyond it).
pub const MAX_SAMPLES: usize = 480;

/// One covariate reading, for the chart row under the memory series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CovariateSample {
    /// Monotonic ns of the reading.
    pub t_ns: u64,
    /// Linux: the hottest zone, °C.
    pub thermal_celsius: Option<f64>,
    /// Linux: the highest current CPU frequency, kHz.
    pub cpu_freq_max_khz: Option<u64>,
    /// macOS: the thermal pressure level.
    pub thermal_pressure: Option<u64>,
    /// macOS: true on battery (any source other than `AC Power`).
    pub on_battery: Option<bool>,
}

/// A numeric covariate over the soak: where it started and ended, its range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Range {
    /// At the first reading.
    pub first: f64,
    /// Smallest reading.
    pub min: f64,
    /// Largest reading.
    pub max: f64,
    /// At the last reading.
    pub last: f64,
}

impl Range {
    fn push(range: &mut Option<Range>, v: f64) {
        match range {
            None => {
                *range = Some(Range {
                    first: v,
                    min: v,
                    max: v,
                    last: v,
                })
            }
            Some(r) => {
                r.min = r.min.min(v);
                r.max = r.max.max(v);
                r.last = v;
            }
        }
    }
}

/// The soak's covariates and the confounds they make.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoakCovariates {
    /// System readings seen (each covariate is read with the system files).
    pub readings: u64,
    /// Linux: the hottest thermal zone, °C; `None`: unreadable on this host.
    pub thermal_celsius: Option<Range>,
    /// Linux: the zones that were hottest at some reading.
    pub thermal_zones: Vec<String>,
    /// Linux: the highest current CPU frequency, kHz; `None`: unreadable.
    pub cpu_freq_max_khz: Option<Range>,
    /// macOS: the thermal pressure levels seen, in order of first appearance.
    pub thermal_pressure_levels: Vec<u64>,
    /// macOS: the power sources seen, in order of first appearance.
    pub power_sources: Vec<String>,
    /// macOS: the low-power modes seen, in order of first appearance.
    pub low_power_modes: Vec<bool>,
    /// Covariates no reading had: `unreadable` on this host.
    pub unreadable: Vec<String>,
    /// What changed during the soak, in words; each one confounds the
    /// verdict. Empty: nothing that was readable changed.
    pub confounds: Vec<String>,
    /// The readings for the chart, at most [`MAX_SAMPLES`], in time order.
    pub samples: Vec<CovariateSample>,
}

impl SoakCovariates {
    /// The line a reader sees beside the verdict.
    pub fn line(&self) -> String {
        let unreadable = if self.unreadable.is_empty() {
            String::new()
        } else {
            format!(" (unreadable here: {})", self.unreadable.join(", "))
        };
        if self.confounds.is_empty() {
            format!(
                "covariates: no thermal or power change over {} readings{unreadable}",
                self.readings
            )
        } else {
            format!(
                "CONFOUND: {} during the soak{unreadable}",
                self.confounds.join("; ")
            )
        }
    }
}

fn push_distinct<T: PartialEq>(seen: &mut Vec<T>, v: T) {
    if !seen.contains(&v) {
        seen.push(v);
    }
}

/// Gathers the covariates row by row (the series is streamed once, by the
/// stability analysis).
#[derive(Debug, Default)]
pub struct Accumulator {
    out: SoakCovariates,
    last_reading_ns: Option<u64>,
    /// Every `stride`-th reading, at most `2 × MAX_SAMPLES` of them: an
    /// hour-long soak must not hold a sample per reading while it is read.
    samples: Vec<CovariateSample>,
    stride: u64,
}

impl Accumulator {
    /// Take one series row; rows that repeat an earlier system reading are skipped.
    pub fn row(&mut self, r: &SeriesRow) {
        let read_at = r.sys_vm_sampled_ns.unwrap_or(r.t_ns);
        if self.last_reading_ns == Some(read_at) {
            return;
        }
        self.last_reading_ns = Some(read_at);
        let o = &mut self.out;
        o.readings += 1;
        let celsius = r.cov_thermal_max_millicelsius.map(|m| m as f64 / 1000.0);
        if let Some(c) = celsius {
            Range::push(&mut o.thermal_celsius, c);
        }
        if let Some(z) = &r.cov_thermal_zone {
            push_distinct(&mut o.thermal_zones, z.clone());
        }
        if let Some(f) = r.cov_cpu_freq_max_khz {
            Range::push(&mut o.cpu_freq_max_khz, f as f64);
        }
        if let Some(l) = r.cov_thermal_pressure {
            push_distinct(&mut o.thermal_pressure_levels, l);
        }
        if let Some(s) = &r.cov_power_source {
            push_distinct(&mut o.power_sources, s.clone());
        }
        if let Some(m) = r.cov_low_power_mode {
            push_distinct(&mut o.low_power_modes, m);
        }
        if !(o.readings - 1).is_multiple_of(self.stride.max(1)) {
            return;
        }
        self.samples.push(CovariateSample {
            t_ns: read_at,
            thermal_celsius: celsius,
            cpu_freq_max_khz: r.cov_cpu_freq_max_khz,
            thermal_pressure: r.cov_thermal_pressure,
            on_battery: r.cov_power_source.as_deref().map(|s| s != "AC Power"),
        });
        // Full: keep every other sample and take every other reading from
        // now on, so the kept ones stay evenly spaced.
        if self.samples.len() >= 2 * MAX_SAMPLES {
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = self.stride.max(1) * 2;
        }
    }

    /// The summary, with its confounds and a thinned chart series.
    pub fn finish(self) -> SoakCovariates {
        let mut o = self.out;
        let step = self.samples.len().div_ceil(MAX_SAMPLES).max(1);
        o.samples = self.samples.into_iter().step_by(step).collect();
        // Which platform wrote the series shows in what it read: a macOS
        // soak is not told that it lacks Linux's thermal zones.
        let mac = !(o.thermal_pressure_levels.is_empty()
            && o.power_sources.is_empty()
            && o.low_power_modes.is_empty());
        let names: Vec<(&str, bool)> = if mac {
            vec![
                ("thermal pressure", o.thermal_pressure_levels.is_empty()),
                ("power source", o.power_sources.is_empty()),
                ("low-power mode", o.low_power_modes.is_empty()),
            ]
        } else {
            vec![
                ("thermal zone", o.thermal_celsius.is_none()),
                ("CPU frequency", o.cpu_freq_max_khz.is_none()),
            ]
        };
        o.unreadable = names
            .iter()
            .filter(|(_, missing)| *missing)
            .map(|(n, _)| n.to_string())
            .collect();
        if let Some(t) = o.thermal_celsius
            && t.max - t.min >= THERMAL_SWING_CELSIUS
        {
            o.confounds.push(format!(
                "the hottest thermal zone moved {:.1} °C (from {:.1} to {:.1} °C, first {:.1}, last {:.1})",
                t.max - t.min,
                t.min,
                t.max,
                t.first,
                t.last
            ));
        }
        if o.thermal_pressure_levels.len() > 1 {
            let levels: Vec<String> = o
                .thermal_pressure_levels
                .iter()
                .map(|l| sampler::darwin::ThermalPressure::describe(*l))
                .collect();
            o.confounds
                .push(format!("thermal pressure changed ({})", levels.join(" → ")));
        }
        if o.power_sources.len() > 1 {
            o.confounds.push(format!(
                "the power source changed ({})",
                o.power_sources.join(" → ")
            ));
        }
        if o.low_power_modes.len() > 1 {
            o.confounds.push("low-power mode was switched".into());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t: u64) -> SeriesRow {
        SeriesRow {
            t_ns: t,
            sys_vm_sampled_ns: Some(t),
            ..SeriesRow::default()
        }
    }

    #[test]
    fn a_long_soak_keeps_few_evenly_spaced_samples_while_it_is_read() {
        let mut a = Accumulator::default();
        let n = 100_000u64;
        for t in 0..n {
            a.row(&reading(t));
            assert!(a.samples.len() < 2 * MAX_SAMPLES, "at {t}");
        }
        let c = a.finish();
        assert_eq!(c.readings, n);
        assert!(
            (MAX_SAMPLES / 2..=MAX_SAMPLES).contains(&c.samples.len()),
            "{}",
            c.samples.len()
        );
        assert_eq!(c.samples[0].t_ns, 0);
        let gaps: Vec<u64> = c
            .samples
            .windows(2)
            .map(|w| w[1].t_ns - w[0].t_ns)
            .collect();
        assert!(gaps.iter().all(|g| *g == gaps[0]), "uneven: {gaps:?}");
    }

    #[test]
    fn a_power_source_that_changes_is_a_confound() {
        let mut a = Accumulator::default();
        for (t, source) in [(1, "AC Power"), (2, "AC Power"), (3, "Battery Power")] {
            a.row(&SeriesRow {
                cov_power_source: Some(source.into()),
                cov_thermal_pressure: Some(0),
                ..reading(t)
            });
        }
        let c = a.finish();
        assert_eq!(c.readings, 3);
        assert_eq!(c.power_sources, ["AC Power", "Battery Power"]);
        assert_eq!(
            c.confounds,
            ["the power source changed (AC Power → Battery Power)"]
        );
        assert!(c.line().starts_with("CONFOUND: the power source changed"));
        assert_eq!(c.samples[2].on_battery, Some(true));
    }

    #[test]
    fn a_thermal_swing_counts_from_ten_degrees_and_repeats_are_one_reading() {
        let zone = |t: u64, mc: i64| SeriesRow {
            cov_thermal_max_millicelsius: Some(mc),
            cov_thermal_zone: Some("x86_pkg_temp".into()),
            cov_cpu_freq_max_khz: Some(2_000_000 + t),
            ..reading(t)
        };
        let mut a = Accumulator::default();
        a.row(&zone(1, 45_000));
        // A tick between readings repeats the last one: not a new reading.
        let mut repeat = zone(1, 45_000);
        repeat.t_ns = 2;
        a.row(&repeat);
        a.row(&zone(3, 54_900));
        let calm = a.finish();
        assert_eq!(calm.readings, 2);
        assert!(calm.confounds.is_empty(), "{:?}", calm.confounds);
        let mut a = Accumulator::default();
        a.row(&zone(1, 45_000));
        a.row(&zone(2, 55_000));
        a.row(&zone(3, 50_000));
        let hot = a.finish();
        let t = hot.thermal_celsius.unwrap();
        assert_eq!((t.first, t.min, t.max, t.last), (45.0, 45.0, 55.0, 50.0));
        assert_eq!(hot.confounds.len(), 1);
        assert!(
            hot.confounds[0].contains("moved 10.0 °C"),
            "{:?}",
            hot.confounds
        );
    }

    #[test]
    fn nothing_readable_is_said_to_be_unreadable_and_no_confound() {
        let mut a = Accumulator::default();
        for t in 0..2000 {
            a.row(&reading(t));
        }
        let c = a.finish();
        assert_eq!(c.readings, 2000);
        assert!(c.confounds.is_empty());
        assert!(!c.unreadable.is_empty());
        assert!(c.line().contains("unreadable here"), "{}", c.line());
        assert!(c.samples.len() <= MAX_SAMPLES);
    }
}
