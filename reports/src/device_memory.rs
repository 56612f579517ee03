//! Where a GPU arm's memory went: host resident memory beside device memory
//! (the driver's per-process figure, NVML) at the worker's own markers.
//!
//! A worker that decodes on a GPU reads its device memory at every marker,
//! and makes its GPU context before the first one, so `process_start` holds
//! the context's cost (device and host) before any model, as the GPU
//! calibration worker's baseline does. What each later phase added is then
//! split between the host and the device: a model whose weights went to
//! the device shows it at `model_loaded`. An arm whose markers carry no
//! device reading has no accounting (`None`), never zeros.
//!
//! The types only, below the receipt that holds them; the accounting is
//! built from the phase table by `crate::assemble::device_memory`.

use sampler::Phase;
use serde::{Deserialize, Serialize};

/// One phase's memory on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DevicePhase {
    /// The phase (its first marker; request phases: the last request's).
    #[schemars(with = "String")]
    pub phase: Phase,
    /// The worker's resident memory at the marker, in bytes.
    pub resident_bytes: u64,
    /// The device memory the driver attributed to the worker at the marker.
    pub device_bytes: u64,
    /// Largest device memory attributed to the worker by the series rows
    /// between the previous marker and this one; absent without device columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_max_device_bytes: Option<u64>,
}

/// What a phase added, split between the host and the device (signed:
/// a phase may free memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Split {
    /// Change in resident memory, in bytes.
    pub host_bytes: i64,
    /// Change in device memory, in bytes.
    pub device_bytes: i64,
}

/// A GPU arm's host and device memory by phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceAccounting {
    /// `process_start`: the GPU context and the driver, before the model.
    pub baseline: DevicePhase,
    /// What loading the model added (`process_start` → `model_loaded`):
    /// where the weights went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Split>,
    /// What creating the working state added (`model_loaded` → `state_ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Split>,
    /// Largest device memory at any marker, in bytes.
    pub peak_device_bytes: u64,
    /// Each phase with a device reading, in the order first seen.
    pub phases: Vec<DevicePhase>,
}
