//! The protocol's `[sampling]` and `[defaults]` tables: the external
//! sampler's cadences (an arm may override them with its own `[arm.sampling]`)
//! and what every arm inherits. Each key's default, bound and check are here.

use crate::limits::{PERIOD_MS, TIMEOUT_S};
use schemars::JsonSchema;
use serde::Deserialize;
use worker_contract::FieldError;

/// External sampler settings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Tick period in milliseconds (default 50).
    #[serde(default = "default_period_ms")]
    #[schemars(range(min = PERIOD_MS.min, max = PERIOD_MS.max))]
    pub period_ms: u64,
    /// How often the system files (meminfo, vmstat, PSI; the host's
    /// counters on macOS) are read, in milliseconds (default 1000, or
    /// `period_ms` if longer); the ticks between repeat the last reading.
    /// The worker's own files are read every tick.
    #[serde(default = "default_system_period_ms")]
    #[schemars(range(min = PERIOD_MS.min, max = PERIOD_MS.max))]
    pub system_period_ms: u64,
}

fn default_period_ms() -> u64 {
    50
}

fn default_system_period_ms() -> u64 {
    1000
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            period_ms: default_period_ms(),
            system_period_ms: default_system_period_ms(),
        }
    }
}

/// Settings every arm inherits unless it sets its own.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Seconds an arm may run before its worker's process group is killed (default 300).
    #[serde(default = "default_timeout_s")]
    #[schemars(range(min = TIMEOUT_S.min, max = TIMEOUT_S.max))]
    pub arm_timeout_s: u64,
}

fn default_timeout_s() -> u64 {
    300
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            arm_timeout_s: default_timeout_s(),
        }
    }
}

impl Sampling {
    /// Both cadences in range; the error's key is the full path
    /// (`sampling.period_ms`), also inside an arm.
    pub fn validate(&self) -> Result<(), FieldError> {
        PERIOD_MS.check("sampling.period_ms", self.period_ms)?;
        PERIOD_MS.check("sampling.system_period_ms", self.system_period_ms)?;
        Ok(())
    }
}

impl Defaults {
    /// Every key in range; the error's key is the full path (`defaults.arm_timeout_s`).
    pub fn validate(&self) -> Result<(), FieldError> {
        TIMEOUT_S.check("defaults.arm_timeout_s", self.arm_timeout_s)?;
        Ok(())
    }
}
