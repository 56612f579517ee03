//! How fresh the system page counters of a series really were.
//!
//! On macOS the series stamps each row with the time its `host_statistics64`
//! counters were actually sampled (`sys_vm_sampled_ns`). XNU serves most
//! reads within a second from a cache, so at a 50 ms cadence many rows repeat
//! an older sample. The receipt states the effective sample count and
//! interval so those fields are never read as 50 ms resolution.

use sampler::SeriesRow;
use serde::{Deserialize, Serialize};

/// How fresh the macOS system page counters of an arm's series really were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemFreshness {
    /// Rows that carry an effective sample time.
    pub rows: u64,
    /// Rows whose page counters were a cached copy of an earlier sample.
    pub cached_rows: u64,
    /// Distinct samples the kernel actually took.
    pub effective_samples: u64,
    /// Median time between distinct samples: the real resolution of the
    /// system page counters in this series.
    pub median_effective_interval_ns: Option<f64>,
}

/// Accumulates [`SystemFreshness`] over a series read once, in order.
#[derive(Debug, Default)]
pub struct FreshnessScan {
    rows: u64,
    cached_rows: u64,
    samples: u64,
    last_sample: Option<u64>,
    /// Time between distinct samples, bounded however long the series.
    intervals: crate::quantiles::Quantiles,
}

impl FreshnessScan {
    /// Take one series row, in order.
    pub fn push(&mut self, row: &SeriesRow) {
        let Some(sampled) = row.sys_vm_sampled_ns else {
            return;
        };
        self.rows += 1;
        if sampled < row.t_ns {
            self.cached_rows += 1;
        }
        if self.last_sample != Some(sampled) {
            if let Some(last) = self.last_sample {
                self.intervals.push(sampled.saturating_sub(last));
            }
            self.samples += 1;
            self.last_sample = Some(sampled);
        }
    }

    /// `None` when no row carried a sample time (Linux: always fresh).
    pub fn finish(self) -> Option<SystemFreshness> {
        if self.rows == 0 {
            return None;
        }
        Some(SystemFreshness {
            rows: self.rows,
            cached_rows: self.cached_rows,
            effective_samples: self.samples,
            median_effective_interval_ns: self.intervals.percentile(50.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_ns: u64, sampled: Option<u64>) -> SeriesRow {
        SeriesRow {
            t_ns,
            sys_vm_sampled_ns: sampled,
            ..SeriesRow::default()
        }
    }

    #[test]
    fn cached_rows_count_once_and_the_interval_is_between_real_samples() {
        let mut scan = FreshnessScan::default();
        // 50 ms ticks; the kernel refreshed at 0, 1.0 s and 2.05 s.
        let ms = 1_000_000;
        let mut fresh = 0;
        for k in 0..45u64 {
            let t = k * 50 * ms;
            if t == 0 || t == 1000 * ms || t == 2050 * ms {
                fresh = t;
            }
            scan.push(&row(t, Some(fresh)));
        }
        let f = scan.finish().unwrap();
        assert_eq!(f.rows, 45);
        assert_eq!(f.effective_samples, 3);
        assert_eq!(f.cached_rows, 42);
        // Intervals 1000 ms and 1050 ms.
        assert_eq!(f.median_effective_interval_ns, Some(1025.0 * ms as f64));
    }

    #[test]
    fn a_series_without_sample_times_has_no_freshness_section() {
        let mut scan = FreshnessScan::default();
        scan.push(&row(1, None));
        assert_eq!(scan.finish(), None);
    }
}
