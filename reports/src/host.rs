//! Host and runtime identity (`host.json`): which machine and which memqual
//! took the measurements. The harness fills it in; the receipt binds it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The machine a run was measured on. `None` where the platform did not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostIdentity {
    /// The label given with `--host-label` (or `MEMQUAL_HOST_LABEL`): the
    /// host's name in a fleet report, e.g. the CI runner image.
    #[serde(default)]
    pub label: Option<String>,
    /// The host's name, as the OS reports it.
    pub hostname: Option<String>,
    /// e.g. "Debian GNU/Linux".
    pub os_name: Option<String>,
    /// The OS version (long form where the OS gives one).
    pub os_version: Option<String>,
    /// The kernel version.
    pub kernel: Option<String>,
    /// The CPU architecture, e.g. `x86_64` or `arm64`.
    pub arch: String,
    /// DMI product name (Linux) or `hw.model` (macOS).
    pub hardware_model: Option<String>,
    /// The first CPU's brand string, e.g. the processor model.
    pub cpu_brand: Option<String>,
    /// Logical CPUs the OS lists.
    pub logical_cpus: u64,
    /// Physical cores, when the OS reports them.
    pub physical_cores: Option<u64>,
    /// Physical memory in bytes.
    pub ram_bytes: u64,
    /// This boot's identity, new on every boot: Linux
    /// `/proc/sys/kernel/random/boot_id`, macOS `kern.bootsessionuuid`.
    /// Runs of one boot share it; a reboot between two runs shows.
    pub boot_id: Option<String>,
    /// Seconds since the epoch at boot.
    pub boot_time_unix_s: u64,
}

impl HostIdentity {
    /// The host's key in a fleet report: its label when one was given, else
    /// its hostname, else its boot id.
    pub fn key(&self) -> String {
        self.label
            .clone()
            .or_else(|| self.hostname.clone())
            .or_else(|| self.boot_id.clone())
            .unwrap_or_else(|| "unknown host".to_string())
    }
}

/// The memqual that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeIdentity {
    /// The memqual version (Cargo package version).
    pub memqual_version: String,
    /// Path of the `memqual` executable that ran (empty when unknown).
    pub executable: String,
    /// SHA-256 of the `memqual` executable file.
    pub executable_sha256: Option<String>,
}

/// `host.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Identity {
    /// The machine.
    pub host: HostIdentity,
    /// The memqual that ran.
    pub runtime: RuntimeIdentity,
}
