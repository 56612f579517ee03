//! Platforms memqual does not sample: every call fails clearly.

use crate::{SamplerError, SeriesRow, TaskMemory};

pub const NAME: &str = "unsupported";

pub fn snapshot_self() -> Result<TaskMemory, SamplerError> {
    Err(SamplerError::Unsupported)
}

pub fn reset_peak_self() -> Option<bool> {
    None
}

pub fn host_identity() -> crate::host::HostIdentity {
    crate::host::HostIdentity {
        notes: vec!["host identity is not read on this platform".into()],
        ..Default::default()
    }
}

pub struct ProcessProbe;

impl ProcessProbe {
    pub fn new(_pid: i32) -> Result<Self, SamplerError> {
        Err(SamplerError::Unsupported)
    }
    pub fn sample(&mut self, _row: &mut SeriesRow) -> Result<(), SamplerError> {
        Err(SamplerError::Unsupported)
    }
}

#[derive(Default)]
pub struct SystemProbe;

impl SystemProbe {
    pub fn new() -> Self {
        SystemProbe
    }
    pub fn sample(&mut self, _row: &mut SeriesRow) -> Result<(), SamplerError> {
        Err(SamplerError::Unsupported)
    }
}
