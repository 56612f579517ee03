//! Platforms memqual does not sample: every call fails clearly.

use crate::{SamplerError, SeriesRow, TaskMemory};

/// Platform name written into records (`PLATFORM`).
pub const NAME: &str = "unsupported";

/// Always fails with `Unsupported`.
pub fn snapshot_self() -> Result<TaskMemory, SamplerError> {
    Err(SamplerError::Unsupported)
}

/// No peak to reset: always `None`.
pub fn reset_peak_self() -> Option<bool> {
    None
}

/// No boot identity on this platform.
pub fn boot_session_id() -> Option<String> {
    None
}

/// An identity with every field `None` and a note saying why.
pub fn host_identity() -> crate::host::HostIdentity {
    crate::host::HostIdentity {
        notes: vec!["host identity is not read on this platform".into()],
        ..Default::default()
    }
}

/// A process probe that cannot be created on this platform.
pub struct ProcessProbe;

impl ProcessProbe {
    /// Always fails with `Unsupported`.
    pub fn new(_pid: i32) -> Result<Self, SamplerError> {
        Err(SamplerError::Unsupported)
    }
    /// Always fails with `Unsupported`.
    pub fn sample(&mut self, _row: &mut SeriesRow) -> Result<(), SamplerError> {
        Err(SamplerError::Unsupported)
    }
}

/// A system probe whose every sample fails with `Unsupported`.
#[derive(Default)]
pub struct SystemProbe;

impl SystemProbe {
    /// The probe; creating it cannot fail.
    pub fn new() -> Self {
        SystemProbe
    }
    /// Always fails with `Unsupported`, leaving `row` untouched.
    pub fn sample(&mut self, _row: &mut SeriesRow) -> Result<(), SamplerError> {
        Err(SamplerError::Unsupported)
    }
}
