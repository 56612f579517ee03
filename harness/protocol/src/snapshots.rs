//! The protocol's `[snapshots]` table: at which markers and on which
//! cadence the harness snapshots the worker with the platform's tools.

use crate::marker_filter::MarkerFilter;
use schemars::JsonSchema;
use serde::Deserialize;
use worker_contract::bounds::IntBound;

/// Snapshot cadence: 1 ms to a day.
pub const EVERY_MS: IntBound = IntBound::new(1, 86_400_000, "milliseconds, at most 1 day");

/// The protocol's `[snapshots]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotPlan {
    /// Take a snapshot at every phase marker (default true).
    #[serde(default = "crate::yes")]
    pub at_phases: bool,
    /// With `at_phases`, also at the `request_begin` / `request_end` markers
    /// (default true). Soaks set it false: one snapshot per request marker
    /// is thousands of tool runs.
    #[serde(default = "crate::yes")]
    pub at_request_markers: bool,
    /// With `at_request_markers`, only at the markers of every n-th measured
    /// request (the 1st, the n+1-th, …; default 1: each).
    #[schemars(range(min = crate::limits::EVERY_N_REQUESTS.min, max = crate::limits::EVERY_N_REQUESTS.max))]
    pub every_n_requests: Option<u64>,
    /// Also take one every this many milliseconds. Soaks use a slow cadence;
    /// under 1000 ms the receipt flags the perturbation.
    #[schemars(range(min = EVERY_MS.min, max = EVERY_MS.max))]
    pub every_ms: Option<u64>,
}

impl Default for SnapshotPlan {
    fn default() -> Self {
        SnapshotPlan {
            at_phases: true,
            at_request_markers: true,
            every_n_requests: None,
            every_ms: None,
        }
    }
}

impl SnapshotPlan {
    /// Every key in range; the error's key is the full path (`snapshots.every_ms`).
    pub fn validate(&self) -> Result<(), worker_contract::FieldError> {
        if let Some(ms) = self.every_ms {
            EVERY_MS.check("snapshots.every_ms", ms)?;
        }
        self.filter().map(|_| ())
    }

    fn filter(&self) -> Result<MarkerFilter, worker_contract::FieldError> {
        MarkerFilter::from_plan(
            "snapshots",
            self.at_phases,
            self.at_request_markers,
            self.every_n_requests,
        )
    }

    /// The markers that trigger a snapshot (a validated plan's).
    pub fn marker_filter(&self) -> MarkerFilter {
        self.filter().unwrap_or(MarkerFilter::ALL)
    }

    /// True when any snapshot is taken: at phase markers or on a cadence.
    pub fn enabled(&self) -> bool {
        self.at_phases || self.every_ms.is_some()
    }
}
