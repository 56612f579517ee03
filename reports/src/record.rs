//! Records the harness writes into a run directory, and their file names.

use serde::{Deserialize, Serialize};

/// File and folder names inside a run directory (they live in [`run_dir::names`]).
pub use run_dir::names as files;

/// Written once when the run starts (`run.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunInfo {
    pub memqual_version: String,
    /// The git commit memqual was built from (`unknown` outside a checkout).
    #[serde(default)]
    pub memqual_commit: Option<String>,
    pub protocol_name: String,
    /// The protocol file as given on the command line.
    pub protocol_path: String,
    pub protocol_sha256: String,
    pub started_utc: String,
    pub platform: String,
    pub page_size_bytes: u64,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    /// Arm ids in the order they run.
    pub arms: Vec<String>,
    /// Arm id → the control arm it is compared with.
    #[serde(default)]
    pub controls: std::collections::BTreeMap<String, String>,
    /// Protocol parameters after overrides.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
    /// Hardware model, boot time, thermal state, as far as readable.
    #[serde(default)]
    pub host: Option<sampler::host::HostIdentity>,
    /// Arm id → its declared gates (arms without gates are absent).
    #[serde(default)]
    pub gates: std::collections::BTreeMap<String, crate::gate_spec::ArmGates>,
    /// `memqual run --shard I/N`: the share of the protocol's arms this run holds.
    #[serde(default)]
    pub shard: Option<ShardInfo>,
}

/// One share of a protocol's arm matrix (`memqual run --shard I/N`).
///
/// Arm k of the protocol (counted from 0, in protocol order) belongs to
/// shard k mod N + 1. A shard runs the arms it owns and every control they
/// need, transitively (a companion), so each comparison is measured on one
/// host; the protocol order is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardInfo {
    /// 1 to `count`.
    pub index: u32,
    pub count: u32,
    /// Every arm of the protocol, in order, before the shard was taken.
    pub protocol_arms: Vec<String>,
    /// The arms this shard owns.
    pub owned: Vec<String>,
    /// Controls this shard runs only because an owned arm needs them.
    pub companions: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArmStatus {
    /// The worker ran its whole protocol: exit 0, every phase, `bye`.
    Completed,
    /// Anything else; `failure` says what.
    Failed,
    /// The worker refused the arm before doing anything because it lacks a
    /// capability the arm requires; nothing was run in its place.
    NotRunnable,
}

/// How the worker process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub signal_name: Option<String>,
}

/// What the harness saw of one arm (`arms/<id>/arm.json`), written when the arm ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmOutcome {
    pub id: String,
    pub status: ArmStatus,
    /// Every reason the arm failed, in the order they were noticed.
    pub failure: Vec<String>,
    pub worker_executable: String,
    pub worker_pid: Option<u32>,
    pub hello: Option<worker_contract::Hello>,
    pub exit: Option<ExitInfo>,
    pub timed_out: bool,
    pub timeout_s: u64,
    pub bye: bool,
    pub markers: u64,
    pub results: u64,
    pub worker_errors: Vec<String>,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub sampler: Option<sampler::SamplerStats>,
}
