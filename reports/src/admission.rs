//! Quiet-host admission records (`admission.json`): the thresholds, what the
//! host showed in each observation window, and the verdict. The harness
//! observes; this module only holds the record and answers for an arm.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use worker_contract::FieldError;
use worker_contract::bounds::{FloatBound, IntBound};

/// Limits a host must stay within to be admitted (the protocol's
/// `[admission]` table; every key is optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionThresholds {
    /// How long the host is watched before the run and before each arm.
    #[schemars(range(min = WINDOW_MS.min, max = WINDOW_MS.max))]
    pub window_ms: u64,
    /// 1-minute load average divided by the core count, at most this.
    #[schemars(range(min = LOAD_PER_CORE.min, max = LOAD_PER_CORE.max))]
    pub max_load_per_core: f64,
    /// Available memory at least this, in MiB.
    #[schemars(range(min = AVAILABLE_MIB.min, max = AVAILABLE_MIB.max))]
    pub min_available_mib: u64,
    /// Memory pressure: PSI `some avg10` (percent) at most this.
    #[schemars(range(min = PSI_PERCENT.min, max = PSI_PERCENT.max))]
    pub max_psi_some_avg10: f64,
    /// Hottest reported thermal zone at most this, in °C.
    #[schemars(range(min = CELSIUS.min, max = CELSIUS.max))]
    pub max_thermal_celsius: f64,
}

impl Default for AdmissionThresholds {
    fn default() -> Self {
        AdmissionThresholds {
            window_ms: 3000,
            max_load_per_core: 1.5,
            min_available_mib: 1024,
            max_psi_some_avg10: 10.0,
            max_thermal_celsius: 90.0,
        }
    }
}

/// `window_ms`: the host is watched for 1 ms to 10 minutes.
pub const WINDOW_MS: IntBound = IntBound::new(1, 600_000, "milliseconds, at most 10 minutes");
/// `max_load_per_core`: a load average per core.
pub const LOAD_PER_CORE: FloatBound = FloatBound::closed(0.0, 1_000_000.0, "load per core");
/// `min_available_mib`: at most 1 TiB.
pub const AVAILABLE_MIB: IntBound = IntBound::new(0, 1 << 20, "MiB, at most 1 TiB");
/// `max_psi_some_avg10`: PSI is a percentage.
pub const PSI_PERCENT: FloatBound = FloatBound::closed(0.0, 100.0, "percent");
/// `max_thermal_celsius`: no sensor reads above 1000 °C.
pub const CELSIUS: FloatBound = FloatBound::closed(0.0, 1000.0, "°C");

impl AdmissionThresholds {
    /// Every threshold in its range; the error names the key (relative to
    /// the `[admission]` table).
    pub fn validate(&self) -> Result<(), FieldError> {
        WINDOW_MS.check("window_ms", self.window_ms)?;
        LOAD_PER_CORE.check("max_load_per_core", self.max_load_per_core)?;
        AVAILABLE_MIB.check("min_available_mib", self.min_available_mib)?;
        PSI_PERCENT.check("max_psi_some_avg10", self.max_psi_some_avg10)?;
        CELSIUS.check("max_thermal_celsius", self.max_thermal_celsius)?;
        Ok(())
    }
}

/// What the host showed over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostObservation {
    /// Logical CPUs usable by the harness; the load average is divided by this.
    pub cores: u64,
    /// Largest 1-minute load average seen in the window.
    pub load_avg_1m: Option<f64>,
    /// Smallest available memory seen in the window.
    pub min_available_bytes: Option<u64>,
    /// Pages swapped in / out during the window (`pswpin`/`pswpout` deltas).
    pub swap_in_pages: Option<u64>,
    /// Pages swapped out during the window (`pswpout` delta).
    pub swap_out_pages: Option<u64>,
    /// Largest PSI memory `some avg10` seen in the window; `None` without PSI.
    pub psi_some_avg10: Option<f64>,
    /// macOS `kern.memorystatus_vm_pressure_level`, the worst seen in the
    /// window (1 normal, 2 warn, 4 critical); `None`: not reported.
    #[serde(default)]
    pub memory_pressure_level: Option<i32>,
    /// macOS swap in use (`vm.swapusage`) at the end of the window.
    #[serde(default)]
    pub swap_used_bytes: Option<u64>,
    /// macOS thermal pressure level (notify(3) name
    /// `com.apple.system.thermalpressurelevel`), the worst seen in the window:
    /// 0 nominal, 1 moderate, 2 heavy, 3 trapping, 4 sleeping.
    #[serde(default)]
    pub thermal_pressure_level: Option<u64>,
    /// Hottest thermal zone at the end of the window; `None`: not reported.
    pub max_thermal_celsius: Option<f64>,
    /// Which zone that was, and how many zones were read.
    pub thermal_zone: Option<String>,
    /// How many thermal zones were read.
    pub thermal_zones_read: u64,
    /// Readings the platform did not give (a reason each).
    pub not_reported: Vec<String>,
}

/// One admission decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdmissionCheck {
    /// `None`: before the first arm; `Some(id)`: right before arm `id`.
    pub before_arm: Option<String>,
    /// When the window started: UTC, RFC 3339.
    pub started_utc: String,
    /// How long the host was watched, in ms.
    pub window_ms: u64,
    /// What the host showed over the window.
    pub observed: HostObservation,
    /// True when every threshold held.
    pub admitted: bool,
    /// Why the host was refused, each with the measured value.
    pub reasons: Vec<String>,
}

/// The whole run's admission (`admission.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdmissionRecord {
    /// The thresholds the host was held to (the protocol's `[admission]` table).
    pub thresholds: AdmissionThresholds,
    /// `--force`: the run went on although the host was refused.
    pub forced: bool,
    /// Every admission decision, in order: before the first arm, then before each arm.
    pub checks: Vec<AdmissionCheck>,
}

impl AdmissionRecord {
    /// Why the measurement of `arm` was taken on an unadmitted host (empty:
    /// the host was admitted before the run and before the arm). `None`
    /// when the record has no check before that arm.
    pub fn refusals_for(&self, arm: &str) -> Option<Vec<String>> {
        let before_arm = self
            .checks
            .iter()
            .find(|c| c.before_arm.as_deref() == Some(arm))?;
        let mut reasons = Vec::new();
        for check in self
            .checks
            .iter()
            .filter(|c| c.before_arm.is_none())
            .chain(std::iter::once(before_arm))
        {
            if !check.admitted {
                let when = check
                    .before_arm
                    .as_deref()
                    .map_or("before the run".to_string(), |a| format!("before arm {a}"));
                reasons.extend(check.reasons.iter().map(|r| format!("{when}: {r}")));
                if check.reasons.is_empty() {
                    reasons.push(format!("{when}: host refused"));
                }
            }
        }
        Some(reasons)
    }
}
