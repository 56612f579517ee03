//! The protocol's `[census]` table: whether the process census runs, its
//! threshold and at which request markers. The census itself is the
//! harness's.

use crate::marker_filter::MarkerFilter;
use schemars::JsonSchema;
use serde::Deserialize;
use worker_contract::bounds::FloatBound;

/// Census threshold in MiB: 0 to 1 TiB.
pub const THRESHOLD_MIB: FloatBound = FloatBound::closed(0.0, 1_048_576.0, "MiB, at most 1 TiB");

/// The protocol's `[census]` table.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CensusPlan {
    /// Take the census (default true).
    #[serde(default = "crate::yes")]
    pub enabled: bool,
    /// List processes whose memory moved by more than this during the arm
    /// (MiB, default 16).
    #[serde(default = "default_threshold_mib")]
    #[schemars(range(min = THRESHOLD_MIB.min, max = THRESHOLD_MIB.max))]
    pub threshold_mib: f64,
    /// Also at the `request_begin` / `request_end` markers (default true).
    /// Soaks set it false: a census per request marker walks every process
    /// thousands of times.
    #[serde(default = "crate::yes")]
    pub at_request_markers: bool,
    /// With `at_request_markers`, only at the markers of every n-th measured
    /// request (the 1st, the n+1-th, …; default 1: each).
    #[schemars(range(min = crate::limits::EVERY_N_REQUESTS.min, max = crate::limits::EVERY_N_REQUESTS.max))]
    pub every_n_requests: Option<u64>,
}

fn default_threshold_mib() -> f64 {
    16.0
}

impl Default for CensusPlan {
    fn default() -> Self {
        CensusPlan {
            enabled: true,
            threshold_mib: default_threshold_mib(),
            at_request_markers: true,
            every_n_requests: None,
        }
    }
}

impl CensusPlan {
    /// Every key in range; the error's key is the full path (`census.threshold_mib`).
    pub fn validate(&self) -> Result<(), worker_contract::FieldError> {
        THRESHOLD_MIB.check("census.threshold_mib", self.threshold_mib)?;
        self.filter().map(|_| ())
    }

    fn filter(&self) -> Result<MarkerFilter, worker_contract::FieldError> {
        MarkerFilter::from_plan(
            "census",
            true,
            self.at_request_markers,
            self.every_n_requests,
        )
    }

    /// The markers that trigger a census (a validated plan's).
    pub fn marker_filter(&self) -> MarkerFilter {
        self.filter().unwrap_or(MarkerFilter::ALL)
    }

    /// `threshold_mib` in bytes, rounded to the nearest byte.
    pub fn threshold_bytes(&self) -> u64 {
        (self.threshold_mib * 1048576.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_is_validated_and_converted_to_bytes() {
        let plan = CensusPlan {
            threshold_mib: 1.5,
            ..CensusPlan::default()
        };
        assert_eq!(plan.threshold_bytes(), 1572864);
        assert!(plan.validate().is_ok());
        let bad = CensusPlan {
            threshold_mib: -1.0,
            ..plan
        };
        let err = bad.validate().unwrap_err();
        assert_eq!(err.key, "census.threshold_mib");
        assert!(
            err.message.contains("threshold_mib = -1 is out of range"),
            "{err}"
        );
    }

    #[test]
    fn request_markers_are_each_by_default_and_thinned_or_dropped_on_request() {
        let each = CensusPlan::default().marker_filter();
        assert_eq!(each.every_n_requests, Some(1));
        let tenth = CensusPlan {
            every_n_requests: Some(10),
            ..CensusPlan::default()
        };
        assert_eq!(tenth.marker_filter().every_n_requests, Some(10));
        let none = CensusPlan {
            at_request_markers: false,
            ..CensusPlan::default()
        };
        assert_eq!(none.marker_filter().every_n_requests, None);
        assert!(none.marker_filter().at_phases);
        let zero = CensusPlan {
            every_n_requests: Some(0),
            ..CensusPlan::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().message,
            "census.every_n_requests = 0 is out of range: allowed 1..=10000000 (at most 10 million)"
        );
        let contradiction = CensusPlan {
            every_n_requests: Some(5),
            ..none
        };
        assert_eq!(
            contradiction.validate().unwrap_err().message,
            "census.every_n_requests = 5 needs at_request_markers = true"
        );
    }
}
