//! The calibration worker's arm options: known allocation patterns.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A calibration arm: the same phases as a real worker, with allocations
/// whose sizes are known, so the harness can prove what it measures.
/// Every page a pattern claims to hold is touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalibrationSpec {
    /// Measured requests.
    #[serde(default = "default_requests")]
    pub requests: u64,
    /// Warmup requests before `warmup_done` (no pattern runs in them).
    #[serde(default = "default_warmup")]
    pub warmup: u64,
    /// Simulated work per request, in milliseconds.
    #[serde(default = "default_request_ms")]
    pub request_ms: u64,
    /// The idle interval before `idle_end`, in milliseconds.
    #[serde(default = "default_idle_ms")]
    pub idle_ms: u64,
    /// Threads that spin during each request's work (CPU load), besides the main one.
    #[serde(default)]
    pub busy_threads: u32,
    /// Hold this much from `model_loaded` on.
    pub plateau: Option<Plateau>,
    /// Grow by this much per measured request, never freed.
    pub leak: Option<Leak>,
    /// With `leak`: the leak stops after this many measured requests (a plateau).
    #[serde(default)]
    pub growth_until_request: Option<u64>,
    /// Hold one more block at each listed measured request (allocator caching).
    pub steps: Option<Box<Steps>>,
    /// Append to a file on a tmpfs per request with `write` (never mapped):
    /// system memory grows while the worker's resident stays flat.
    pub shm_file: Option<Box<ShmFile>>,
    /// Allocate and free a block inside one request.
    pub spike: Option<Spike>,
    /// Reserve address space without touching it, from `model_loaded` on.
    pub reserve: Option<Reserve>,
    /// Map a file and read every page (clean, file-backed, resident), from `model_loaded` on.
    pub file_map: Option<FileMap>,
    /// Abort (SIGABRT) in the middle of this measured request.
    pub crash_at: Option<u64>,
    /// Break the worker contract on purpose, to prove the harness fails closed.
    pub misbehave: Option<Misbehaviour>,
}

fn default_requests() -> u64 {
    3
}
fn default_warmup() -> u64 {
    1
}
fn default_request_ms() -> u64 {
    20
}
fn default_idle_ms() -> u64 {
    100
}

impl Default for CalibrationSpec {
    fn default() -> Self {
        CalibrationSpec {
            requests: default_requests(),
            warmup: default_warmup(),
            request_ms: default_request_ms(),
            idle_ms: default_idle_ms(),
            busy_threads: 0,
            plateau: None,
            leak: None,
            growth_until_request: None,
            steps: None,
            shm_file: None,
            spike: None,
            reserve: None,
            file_map: None,
            crash_at: None,
            misbehave: None,
        }
    }
}

impl CalibrationSpec {
    /// Reject combinations that cannot run, with the key that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(s) = &self.spike
            && s.request >= self.requests
        {
            return Err(format!(
                "spike.request = {} but the arm has only {} requests (indices 0..{})",
                s.request, self.requests, self.requests
            ));
        }
        if let Some(c) = self.crash_at
            && c >= self.requests
        {
            return Err(format!(
                "crash_at = {c} but the arm has only {} requests",
                self.requests
            ));
        }
        if let Some(l) = &self.leak
            && !(l.mib_per_request.is_finite() && l.mib_per_request > 0.0)
        {
            return Err(format!(
                "leak.mib_per_request must be a positive number, got {}",
                l.mib_per_request
            ));
        }
        if self.growth_until_request.is_some() && self.leak.is_none() {
            return Err("growth_until_request needs leak".into());
        }
        if let Some(s) = &self.steps
            && let Some(r) = s.at_requests.iter().find(|&&r| r >= self.requests)
        {
            return Err(format!(
                "steps.at_requests has {r} but the arm has only {} requests",
                self.requests
            ));
        }
        if let Some(f) = &self.shm_file
            && f.kib_per_request == 0
        {
            return Err("shm_file.kib_per_request must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Steps {
    pub mib: u64,
    /// Measured requests (0-based) at which one more block is taken and kept.
    pub at_requests: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShmFile {
    pub kib_per_request: u64,
    /// A tmpfs directory (default `/dev/shm`); the file is removed at teardown.
    #[serde(default = "default_shm_dir")]
    pub dir: std::path::PathBuf,
}

fn default_shm_dir() -> std::path::PathBuf {
    "/dev/shm".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plateau {
    pub mib: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Leak {
    /// Fractions are allowed (0.0625 = 64 KiB); rounded up to whole pages.
    pub mib_per_request: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spike {
    pub mib: u64,
    /// How long the block is held after it is fully touched.
    pub hold_ms: u64,
    /// Which measured request spikes (0-based).
    #[serde(default)]
    pub request: u64,
    /// Start the spike just after an external-sampler tick, so that it lies
    /// wholly between two ticks: the case only the kernel peak can catch.
    /// Needs a sampling period well above the spike's duration; the worker
    /// logs a warning when the spike still overlapped the next tick.
    #[serde(default)]
    pub between_ticks: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reserve {
    pub mib: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileMap {
    pub mib: u64,
}

/// Ways the calibration worker can break the contract on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Misbehaviour {
    /// Write a line that is not JSON after `state_ready`.
    BadJson,
    /// Write a message of a type the contract does not have.
    UnknownMessage,
    /// Emit `warmup_done` before `state_ready`.
    OutOfOrder,
    /// Exit 0 without `bye`.
    NoBye,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> CalibrationSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn soak_patterns_are_checked_against_the_request_count() {
        let ok = spec(serde_json::json!({"requests": 2000,
            "steps": {"mib": 16, "at_requests": [500, 1100]},
            "shm_file": {"kib_per_request": 256}}));
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            ok.shm_file.unwrap().dir,
            std::path::PathBuf::from("/dev/shm")
        );
        let late = spec(serde_json::json!({"requests": 1000,
            "steps": {"mib": 16, "at_requests": [500, 1100]}}));
        assert_eq!(
            late.validate().unwrap_err(),
            "steps.at_requests has 1100 but the arm has only 1000 requests"
        );
        let alone = spec(serde_json::json!({"growth_until_request": 50}));
        assert_eq!(
            alone.validate().unwrap_err(),
            "growth_until_request needs leak"
        );
        let empty = spec(serde_json::json!({"shm_file": {"kib_per_request": 0}}));
        assert!(
            empty
                .validate()
                .unwrap_err()
                .starts_with("shm_file.kib_per_request")
        );
    }
}
