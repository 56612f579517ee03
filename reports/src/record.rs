//! Records the harness writes into a run directory, and their file names.

use serde::{Deserialize, Serialize};

/// File and folder names inside a run directory (they live in [`run_dir::names`]).
pub use run_dir::names as files;

/// Written once when the run starts (`run.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunInfo {
    /// The memqual version (Cargo package version) that ran the protocol.
    pub memqual_version: String,
    /// The git commit memqual was built from (`unknown` outside a checkout).
    #[serde(default)]
    pub memqual_commit: Option<String>,
    /// The protocol's `name`.
    pub protocol_name: String,
    /// The protocol file as given on the command line.
    pub protocol_path: String,
    /// SHA-256 (hex) of the protocol file's text as read.
    pub protocol_sha256: String,
    /// When the run started: UTC, RFC 3339.
    pub started_utc: String,
    /// The platform the run was measured on (`linux`, `macos`, or `unsupported` elsewhere: `sampler::PLATFORM`).
    pub platform: String,
    /// The host's page size in bytes; a peak counts as missed only when it exceeds what was observed by more than this.
    pub page_size_bytes: u64,
    /// The host's name, when the OS reports one.
    pub hostname: Option<String>,
    /// The kernel version, when the OS reports one.
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
    /// How many shards the protocol's arms were split into (the N of `--shard I/N`).
    pub count: u32,
    /// Every arm of the protocol, in order, before the shard was taken.
    pub protocol_arms: Vec<String>,
    /// The arms this shard owns.
    pub owned: Vec<String>,
    /// Controls this shard runs only because an owned arm needs them.
    pub companions: Vec<String>,
}

/// How an arm ended.
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
    /// The worker's exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal number that ended the worker; `None` when it exited.
    pub signal: Option<i32>,
    /// The signal's name (e.g. `SIGKILL`), when a signal ended the worker and the number is known.
    pub signal_name: Option<String>,
}

/// What the harness saw of one arm (`arms/<id>/arm.json`), written when the arm ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmOutcome {
    /// The arm id, as the protocol names it.
    pub id: String,
    /// How the arm ended.
    pub status: ArmStatus,
    /// Every reason the arm failed, in the order they were noticed.
    pub failure: Vec<String>,
    /// The worker executable the harness started (its path as resolved).
    pub worker_executable: String,
    /// The worker's process id; `None` when it never started.
    pub worker_pid: Option<u32>,
    /// The worker's `hello`, as sent; `None` when it sent none.
    pub hello: Option<worker_contract::Hello>,
    /// How the worker process ended; `None` when it did not end (e.g. it could not be waited for).
    pub exit: Option<ExitInfo>,
    /// True when the harness killed the worker for running past `timeout_s`.
    pub timed_out: bool,
    /// The arm's time limit in seconds.
    pub timeout_s: u64,
    /// True when the worker sent `bye` before it ended.
    pub bye: bool,
    /// Phase markers the worker sent.
    pub markers: u64,
    /// Request results the worker sent.
    pub results: u64,
    /// Error messages the worker reported, in the order sent.
    pub worker_errors: Vec<String>,
    /// Monotonic time (ns) the harness started the arm.
    pub started_ns: u64,
    /// Monotonic time (ns) the arm ended; `ended_ns - started_ns` is its duration.
    pub ended_ns: u64,
    /// What the external sampler did during the arm; `None` when it did not run.
    pub sampler: Option<sampler::SamplerStats>,
    /// The arm's `memory_ceiling` as enforced, and its crossing if any;
    /// `None` when the arm sets no ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_ceiling: Option<crate::ceiling::MemoryCeilingRecord>,
}
