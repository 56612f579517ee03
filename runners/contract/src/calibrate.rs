//! The calibration worker's arm options: known allocation patterns.

use crate::bounds::{
    FieldError, FloatBound, IntBound, MIB_SIZE, MILLIS, REQUESTS, THREADS, WARMUP,
};
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
    #[schemars(range(min = crate::bounds::REQUESTS.min, max = crate::bounds::REQUESTS.max))]
    pub requests: u64,
    /// Warmup requests before `warmup_done` (no pattern runs in them).
    #[serde(default = "default_warmup")]
    #[schemars(range(min = crate::bounds::WARMUP.min, max = crate::bounds::WARMUP.max))]
    pub warmup: u64,
    /// Simulated work per request, in milliseconds.
    #[serde(default = "default_request_ms")]
    #[schemars(range(min = crate::bounds::MILLIS.min, max = crate::bounds::MILLIS.max))]
    pub request_ms: u64,
    /// The idle interval before `idle_end`, in milliseconds.
    #[serde(default = "default_idle_ms")]
    #[schemars(range(min = crate::bounds::MILLIS.min, max = crate::bounds::MILLIS.max))]
    pub idle_ms: u64,
    /// Threads that spin during each request's work (CPU load), besides the main one.
    #[serde(default)]
    #[schemars(range(min = crate::bounds::THREADS.min, max = crate::bounds::THREADS.max))]
    pub busy_threads: u32,
    /// Hold this much from `model_loaded` on.
    pub plateau: Option<Plateau>,
    /// Hold this much on the heap from `state_ready` on: one `Vec` of
    /// bytes allocated through the global allocator (malloc) by the named
    /// function `calibration_heap_plateau`, every page written. The mmap
    /// `plateau` is invisible to an allocator profiler; this one is what
    /// allocation attribution must find, with its function and its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_plateau: Option<Plateau>,
    /// Grow by this much per measured request, never freed.
    pub leak: Option<Leak>,
    /// With `leak`: the leak stops after this many measured requests (a plateau).
    #[serde(default)]
    #[schemars(range(min = crate::bounds::REQUESTS.min, max = crate::bounds::REQUESTS.max))]
    pub growth_until_request: Option<u64>,
    /// Hold one more block at each listed measured request (allocator caching).
    pub steps: Option<Box<Steps>>,
    /// Keep a block at every lifecycle teardown: each time the "context"
    /// (the `plateau`) is freed at the end of a cycle, a new block of this
    /// size is written and never freed, so the post-teardown floor rises by
    /// it once per cycle. Needs a lifecycle soak (`[soak] mode =
    /// "lifecycle"`); the worker refuses it otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown_leak: Option<TeardownLeak>,
    /// Append to an anonymous shared-memory file per request with `write`
    /// (never mapped): system memory grows while the worker's resident stays flat.
    pub shm_file: Option<Box<ShmFile>>,
    /// Allocate and free a block inside one request.
    pub spike: Option<Spike>,
    /// Reserve address space without touching it, from `model_loaded` on.
    pub reserve: Option<Reserve>,
    /// Hold this much written and locked in memory (`mlock`) from
    /// `model_loaded` until teardown: the system's held memory (Linux
    /// `Mlocked` and `Unevictable`, macOS wired) rises by it. Without
    /// privilege the lock is bounded by `ulimit -l`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked: Option<Plateau>,
    /// Map a file and read every page (clean, file-backed, resident), from `model_loaded` on.
    pub file_map: Option<FileMap>,
    /// Abort (SIGABRT) in the middle of this measured request.
    #[schemars(range(min = crate::bounds::REQUESTS.min, max = crate::bounds::REQUESTS.max))]
    pub crash_at: Option<u64>,
    /// Break the worker contract on purpose, to prove the harness fails closed.
    pub misbehave: Option<Misbehaviour>,
    /// Device (GPU) memory held from `model_loaded` on: one `cuMemAlloc`,
    /// every byte written. Needs an NVIDIA driver where the worker runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_plateau: Option<Plateau>,
    /// Device memory allocated, written and never freed at each measured request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_leak: Option<Leak>,
    /// A device block allocated, written and freed inside one request
    /// (`between_ticks` is not supported for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_spike: Option<Spike>,
    /// Metal memory held from `model_loaded` on: one shared-storage
    /// `MTLBuffer` of this size, every byte written. Needs a Mac and a
    /// worker built with `metal`; elsewhere the arm is NOT_RUNNABLE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal_plateau: Option<Plateau>,
    /// A shared-storage `MTLBuffer` allocated, written and never freed at
    /// each measured request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal_leak: Option<Leak>,
    /// A shared-storage `MTLBuffer` allocated, written and freed inside one
    /// request (`between_ticks` is not supported for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal_spike: Option<Spike>,
    /// Seed 001's mechanism: a plain thread with no autorelease pool
    /// creates command buffers and compute encoders, each committed and
    /// autoreleased into the thread's pool, which never drains while the
    /// thread lives. Nothing of known size is allocated: the soak's
    /// verdict, not a figure, is what it checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal_autorelease: Option<MetalAutorelease>,
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
            heap_plateau: None,
            leak: None,
            growth_until_request: None,
            steps: None,
            teardown_leak: None,
            shm_file: None,
            spike: None,
            reserve: None,
            locked: None,
            file_map: None,
            crash_at: None,
            misbehave: None,
            gpu_plateau: None,
            gpu_leak: None,
            gpu_spike: None,
            metal_plateau: None,
            metal_leak: None,
            metal_spike: None,
            metal_autorelease: None,
        }
    }
}

/// At most this many `steps.at_requests` (each is one more held block).
pub const MAX_STEPS: usize = 10_000;

/// `metal_autorelease.command_buffers_per_request`: 1 to 100000.
pub const AUTORELEASE_PER_REQUEST: IntBound =
    IntBound::new(1, 100_000, "command buffers per request, at most 100000");

/// `shm_file.kib_per_request`: 1 KiB to 1 GiB per request.
pub const SHM_KIB_PER_REQUEST: IntBound = IntBound::new(1, 1 << 20, "KiB, at most 1 GiB");

impl CalibrationSpec {
    /// Reject values out of range and combinations that cannot run; the
    /// error names the key (relative to the `calibrate` table).
    pub fn validate(&self) -> Result<(), FieldError> {
        REQUESTS.check("requests", self.requests)?;
        WARMUP.check("warmup", self.warmup)?;
        MILLIS.check("request_ms", self.request_ms)?;
        MILLIS.check("idle_ms", self.idle_ms)?;
        THREADS.check("busy_threads", u64::from(self.busy_threads))?;
        if let Some(p) = &self.plateau {
            MIB_SIZE.check("plateau.mib", p.mib)?;
        }
        if let Some(p) = &self.heap_plateau {
            MIB_SIZE.check("heap_plateau.mib", p.mib)?;
        }
        if let Some(l) = &self.locked {
            MIB_SIZE.check("locked.mib", l.mib)?;
        }
        if let Some(l) = &self.leak {
            LEAK_MIB_PER_REQUEST.check("leak.mib_per_request", l.mib_per_request)?;
        }
        if let Some(l) = &self.teardown_leak {
            LEAK_MIB_PER_REQUEST.check("teardown_leak.mib_per_cycle", l.mib_per_cycle)?;
        }
        match (self.growth_until_request, &self.leak) {
            (Some(_), None) => {
                return Err(FieldError::new(
                    "growth_until_request",
                    "growth_until_request needs leak",
                ));
            }
            (Some(n), Some(_)) => {
                REQUESTS.check("growth_until_request", n)?;
            }
            _ => {}
        }
        if let Some(s) = &self.steps {
            MIB_SIZE.check("steps.mib", s.mib)?;
            if s.at_requests.len() > MAX_STEPS {
                return Err(FieldError::new(
                    "steps.at_requests",
                    format!(
                        "steps.at_requests lists {} requests: at most {MAX_STEPS}",
                        s.at_requests.len()
                    ),
                ));
            }
            if let Some((i, r)) = s
                .at_requests
                .iter()
                .enumerate()
                .find(|(_, r)| **r >= self.requests)
            {
                return Err(FieldError::new(
                    format!("steps.at_requests[{i}]"),
                    format!(
                        "steps.at_requests has {r} but the arm has only {} requests",
                        self.requests
                    ),
                ));
            }
        }
        if let Some(f) = &self.shm_file {
            SHM_KIB_PER_REQUEST.check("shm_file.kib_per_request", f.kib_per_request)?;
            if let Some(dir) = &f.dir {
                return Err(FieldError::new(
                    "shm_file.dir",
                    format!(
                        "shm_file.dir = {:?} is no longer accepted: the pattern's shared memory \
                         has no path (memfd), so nothing is written outside the run directory; \
                         remove the key",
                        dir.display().to_string()
                    ),
                ));
            }
        }
        if let Some(s) = &self.spike {
            MIB_SIZE.check("spike.mib", s.mib)?;
            MILLIS.check("spike.hold_ms", s.hold_ms)?;
            if s.request >= self.requests {
                return Err(FieldError::new(
                    "spike.request",
                    format!(
                        "spike.request = {} but the arm has only {} requests (indices 0..{})",
                        s.request, self.requests, self.requests
                    ),
                ));
            }
        }
        if let Some(r) = &self.reserve {
            MIB_SIZE.check("reserve.mib", r.mib)?;
        }
        if let Some(f) = &self.file_map {
            MIB_SIZE.check("file_map.mib", f.mib)?;
        }
        if let Some(p) = &self.gpu_plateau {
            MIB_SIZE.check("gpu_plateau.mib", p.mib)?;
        }
        if let Some(l) = &self.gpu_leak {
            LEAK_MIB_PER_REQUEST.check("gpu_leak.mib_per_request", l.mib_per_request)?;
        }
        if let Some(s) = &self.gpu_spike {
            MIB_SIZE.check("gpu_spike.mib", s.mib)?;
            MILLIS.check("gpu_spike.hold_ms", s.hold_ms)?;
            if s.request >= self.requests {
                return Err(FieldError::new(
                    "gpu_spike.request",
                    format!(
                        "gpu_spike.request = {} but the arm has only {} requests (indices 0..{})",
                        s.request, self.requests, self.requests
                    ),
                ));
            }
            if s.between_ticks {
                return Err(FieldError::new(
                    "gpu_spike.between_ticks",
                    "gpu_spike.between_ticks is not supported: the device has no kernel peak \
                     to catch a spike between ticks; remove the key",
                ));
            }
        }
        if let Some(p) = &self.metal_plateau {
            MIB_SIZE.check("metal_plateau.mib", p.mib)?;
        }
        if let Some(l) = &self.metal_leak {
            LEAK_MIB_PER_REQUEST.check("metal_leak.mib_per_request", l.mib_per_request)?;
        }
        if let Some(s) = &self.metal_spike {
            MIB_SIZE.check("metal_spike.mib", s.mib)?;
            MILLIS.check("metal_spike.hold_ms", s.hold_ms)?;
            if s.request >= self.requests {
                return Err(FieldError::new(
                    "metal_spike.request",
                    format!(
                        "metal_spike.request = {} but the arm has only {} requests (indices 0..{})",
                        s.request, self.requests, self.requests
                    ),
                ));
            }
            if s.between_ticks {
                return Err(FieldError::new(
                    "metal_spike.between_ticks",
                    "metal_spike.between_ticks is not supported: Metal's reading has no kernel \
                     peak to catch a spike between ticks; remove the key",
                ));
            }
        }
        if let Some(a) = &self.metal_autorelease {
            AUTORELEASE_PER_REQUEST.check(
                "metal_autorelease.command_buffers_per_request",
                a.command_buffers_per_request,
            )?;
        }
        if let Some(c) = self.crash_at
            && c >= self.requests
        {
            return Err(FieldError::new(
                "crash_at",
                format!(
                    "crash_at = {c} but the arm has only {} requests",
                    self.requests
                ),
            ));
        }
        Ok(())
    }

    /// The most memory the arm's patterns touch at once, in bytes: the
    /// plateau, the heap plateau, the locked block, every leaked and stepped block, the spike, the mapped file
    /// and the shared-memory file at the last request (reserved address
    /// space is never touched). Wide enough that no valid spec overflows it.
    pub fn peak_touched_bytes(&self) -> u128 {
        // The gpu_* patterns hold device memory, not host RAM: not counted here.
        let mib = |m: u64| u128::from(m) * u128::from(crate::MIB);
        let requests = u128::from(self.requests);
        let leaking = self
            .growth_until_request
            .map_or(requests, |n| requests.min(u128::from(n)));
        let leak = self.leak.map_or(0, |l| {
            // Finite and at most 1 TiB once validated: the cast cannot saturate.
            (l.mib_per_request * crate::MIB as f64).ceil() as u128
        });
        // A cycle has at least one request, so cycles ≤ requests.
        let teardown = self.teardown_leak.map_or(0, |l| {
            (l.mib_per_cycle * crate::MIB as f64).ceil() as u128 * requests
        });
        let steps = self.steps.as_ref().map_or(0, |s| {
            let mut distinct = s.at_requests.clone();
            distinct.sort_unstable();
            distinct.dedup();
            mib(s.mib) * distinct.len() as u128
        });
        let shm = self
            .shm_file
            .as_ref()
            .map_or(0, |f| u128::from(f.kib_per_request) * 1024 * requests);
        self.plateau.map_or(0, |p| mib(p.mib))
            + self.heap_plateau.map_or(0, |p| mib(p.mib))
            + self.locked.map_or(0, |l| mib(l.mib))
            + leak * leaking
            + teardown
            + steps
            + self.spike.map_or(0, |s| mib(s.mib))
            + self.file_map.map_or(0, |f| mib(f.mib))
            + shm
    }

    /// True when any pattern holds device (GPU) memory through CUDA.
    pub fn uses_device(&self) -> bool {
        self.gpu_plateau.is_some() || self.gpu_leak.is_some() || self.gpu_spike.is_some()
    }

    /// True when any pattern needs Metal (the `metal_*` patterns).
    pub fn uses_metal(&self) -> bool {
        self.metal_plateau.is_some()
            || self.metal_leak.is_some()
            || self.metal_spike.is_some()
            || self.metal_autorelease.is_some()
    }

    /// Refuse an arm whose patterns would touch more than `physical_bytes`
    /// (the host's RAM): it could only swap or be killed, never be measured.
    pub fn check_fits(&self, physical_bytes: u64) -> Result<(), FieldError> {
        let peak = self.peak_touched_bytes();
        if peak > u128::from(physical_bytes) {
            let mib = |b: u128| b / u128::from(crate::MIB);
            return Err(FieldError::new(
                "",
                format!(
                    "the patterns would hold {} MiB at their peak, more than this host's \
                     physical memory ({} MiB): make them smaller or use fewer requests",
                    mib(peak),
                    mib(u128::from(physical_bytes))
                ),
            ));
        }
        Ok(())
    }
}

/// `leak.mib_per_request`: positive, at most 1 TiB per request.
pub const LEAK_MIB_PER_REQUEST: FloatBound =
    FloatBound::above(0.0, (1u64 << 20) as f64, "MiB, at most 1 TiB per request");

/// Step growth: one more block of `mib` taken at each listed measured
/// request and held until teardown, the way an allocator's cache keeps what
/// it once needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Steps {
    /// Size of each block in MiB (every page touched).
    #[schemars(range(min = crate::bounds::MIB_SIZE.min, max = crate::bounds::MIB_SIZE.max))]
    pub mib: u64,
    /// Measured requests (0-based) at which one more block is taken and kept.
    #[schemars(length(max = MAX_STEPS))]
    pub at_requests: Vec<u64>,
}

/// Shared memory that grows per request without ever being mapped: it
/// counts against the system's memory, not the worker's resident set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShmFile {
    /// KiB appended per measured request (1 to 1048576). The file has no
    /// path: Linux `memfd_create`, macOS an unlinked POSIX shared-memory object.
    #[schemars(range(min = SHM_KIB_PER_REQUEST.min, max = SHM_KIB_PER_REQUEST.max))]
    pub kib_per_request: u64,
    /// Gone since contract 4 (the file has no path). Still read, so run
    /// directories written before then can be rebuilt; `validate` refuses
    /// a spec or protocol that sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub dir: Option<std::path::PathBuf>,
}

/// A block held from `model_loaded` until teardown, like a loaded model's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plateau {
    /// Size in MiB; every page is written, so all of it is resident and dirty.
    #[schemars(range(min = crate::bounds::MIB_SIZE.min, max = crate::bounds::MIB_SIZE.max))]
    pub mib: u64,
}

/// Seed 001's autorelease pile-up (see [`CalibrationSpec::metal_autorelease`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetalAutorelease {
    /// Command buffers (each with one compute encoder, ended and
    /// committed) the poolless thread creates per measured request.
    #[schemars(range(min = AUTORELEASE_PER_REQUEST.min, max = AUTORELEASE_PER_REQUEST.max))]
    pub command_buffers_per_request: u64,
}

/// A leak: a new block every measured request, never freed (until
/// `growth_until_request`, when set).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Leak {
    /// MiB leaked per measured request. Fractions are allowed (0.0625 =
    /// 64 KiB); rounded up to whole pages.
    #[schemars(range(max = LEAK_MIB_PER_REQUEST.max), extend("exclusiveMinimum" = LEAK_MIB_PER_REQUEST.min))]
    pub mib_per_request: f64,
}

/// A block kept at each lifecycle teardown (see
/// [`CalibrationSpec::teardown_leak`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeardownLeak {
    /// MiB kept per cycle, every page written. Fractions are allowed;
    /// rounded up to whole pages.
    #[schemars(range(max = LEAK_MIB_PER_REQUEST.max), extend("exclusiveMinimum" = LEAK_MIB_PER_REQUEST.min))]
    pub mib_per_cycle: f64,
}

/// A short-lived peak: a block allocated, touched, held for `hold_ms` and
/// freed inside one measured request, so only a peak (or a sample taken
/// while it was held) shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spike {
    /// Size of the block in MiB (every page touched).
    #[schemars(range(min = crate::bounds::MIB_SIZE.min, max = crate::bounds::MIB_SIZE.max))]
    pub mib: u64,
    /// How long the block is held after it is fully touched, in milliseconds.
    #[schemars(range(min = crate::bounds::MILLIS.min, max = crate::bounds::MILLIS.max))]
    pub hold_ms: u64,
    /// Which measured request spikes (0-based).
    #[serde(default)]
    #[schemars(range(min = crate::bounds::REQUESTS.min, max = crate::bounds::REQUESTS.max))]
    pub request: u64,
    /// Start the spike just after an external-sampler tick, so that it lies
    /// wholly between two ticks: the case only the kernel peak can catch.
    /// Needs a sampling period well above the spike's duration. A spike that
    /// still overlapped the next tick is logged and tried again in the next
    /// request, until one lies between two ticks or the requests run out;
    /// `request` is the first attempt, and the checks judge the last.
    #[serde(default)]
    pub between_ticks: bool,
}

/// Address space reserved and never touched: it counts in the virtual
/// size only, never as resident or footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reserve {
    /// Size of the reservation in MiB.
    #[schemars(range(min = crate::bounds::MIB_SIZE.min, max = crate::bounds::MIB_SIZE.max))]
    pub mib: u64,
}

/// A file written to the arm's scratch directory, mapped read-only and
/// read page by page: clean, file-backed, resident memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileMap {
    /// Size of the file in MiB.
    #[schemars(range(min = crate::bounds::MIB_SIZE.min, max = crate::bounds::MIB_SIZE.max))]
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
        let late = spec(serde_json::json!({"requests": 1000,
            "steps": {"mib": 16, "at_requests": [500, 1100]}}));
        assert_eq!(
            late.validate().unwrap_err(),
            FieldError::new(
                "steps.at_requests[1]",
                "steps.at_requests has 1100 but the arm has only 1000 requests"
            )
        );
        let alone = spec(serde_json::json!({"growth_until_request": 50}));
        assert_eq!(
            alone.validate().unwrap_err().message,
            "growth_until_request needs leak"
        );
        let empty = spec(serde_json::json!({"shm_file": {"kib_per_request": 0}}));
        assert_eq!(
            empty.validate().unwrap_err().message,
            "shm_file.kib_per_request = 0 is out of range: allowed 1..=1048576 (KiB, at most 1 GiB)"
        );
        // Where the memory lives is the worker's choice, never the protocol's;
        // an old record that names a directory still reads.
        let dir = spec(serde_json::json!({"shm_file": {"kib_per_request": 1, "dir": "/tmp"}}));
        let err = dir.validate().unwrap_err();
        assert_eq!(err.key, "shm_file.dir");
        assert!(
            err.message
                .starts_with("shm_file.dir = \"/tmp\" is no longer accepted"),
            "{err}"
        );
        let current = serde_json::to_value(&ok).unwrap();
        assert_eq!(
            current["shm_file"],
            serde_json::json!({"kib_per_request": 256})
        );
    }

    #[test]
    fn metal_patterns_are_bounded_and_name_their_key() {
        let ok = spec(serde_json::json!({"requests": 20,
            "metal_plateau": {"mib": 512},
            "metal_leak": {"mib_per_request": 32.0},
            "metal_spike": {"mib": 1024, "hold_ms": 400, "request": 1},
            "metal_autorelease": {"command_buffers_per_request": 500}}));
        assert_eq!(ok.validate(), Ok(()));
        assert!(ok.uses_metal());
        assert!(!ok.uses_device(), "Metal is not the CUDA device");
        assert!(!CalibrationSpec::default().uses_metal());
        for (json, key) in [
            (
                serde_json::json!({"metal_spike": {"mib": 1, "hold_ms": 1, "request": 3}}),
                "metal_spike.request",
            ),
            (
                serde_json::json!({"metal_spike": {"mib": 1, "hold_ms": 1, "between_ticks": true}}),
                "metal_spike.between_ticks",
            ),
            (
                serde_json::json!({"metal_autorelease": {"command_buffers_per_request": 0}}),
                "metal_autorelease.command_buffers_per_request",
            ),
            (
                serde_json::json!({"metal_leak": {"mib_per_request": 0.0}}),
                "metal_leak.mib_per_request",
            ),
            (
                serde_json::json!({"metal_plateau": {"mib": 17_592_186_044_416u64}}),
                "metal_plateau.mib",
            ),
        ] {
            assert_eq!(
                spec(json.clone()).validate().unwrap_err().key,
                key,
                "{json}"
            );
        }
    }

    #[test]
    fn every_size_and_count_is_bounded() {
        for (json, key) in [
            (
                serde_json::json!({"plateau": {"mib": 17_592_186_044_416u64}}),
                "plateau.mib",
            ),
            (
                serde_json::json!({"reserve": {"mib": 1_048_577}}),
                "reserve.mib",
            ),
            (
                serde_json::json!({"file_map": {"mib": u64::MAX}}),
                "file_map.mib",
            ),
            (
                serde_json::json!({"spike": {"mib": 1u64 << 40, "hold_ms": 1}}),
                "spike.mib",
            ),
            (
                serde_json::json!({"spike": {"mib": 1, "hold_ms": u64::MAX}}),
                "spike.hold_ms",
            ),
            (
                serde_json::json!({"steps": {"mib": 1u64 << 21, "at_requests": []}}),
                "steps.mib",
            ),
            (
                serde_json::json!({"leak": {"mib_per_request": 1e300}}),
                "leak.mib_per_request",
            ),
            (
                serde_json::json!({"leak": {"mib_per_request": 0.0}}),
                "leak.mib_per_request",
            ),
            (
                serde_json::json!({"teardown_leak": {"mib_per_cycle": 0.0}}),
                "teardown_leak.mib_per_cycle",
            ),
            (
                serde_json::json!({"teardown_leak": {"mib_per_cycle": f64::MAX}}),
                "teardown_leak.mib_per_cycle",
            ),
            (serde_json::json!({"requests": 10_000_001}), "requests"),
            (serde_json::json!({"warmup": u64::MAX}), "warmup"),
            (serde_json::json!({"request_ms": 3_600_001}), "request_ms"),
            (serde_json::json!({"idle_ms": u64::MAX}), "idle_ms"),
            (serde_json::json!({"busy_threads": 257}), "busy_threads"),
            (
                serde_json::json!({"leak": {"mib_per_request": 1.0},
                "growth_until_request": u64::MAX}),
                "growth_until_request",
            ),
        ] {
            let err = spec(json.clone()).validate().unwrap_err();
            assert_eq!(err.key, key, "{json}");
            assert!(err.message.starts_with(&format!("{key} = ")), "{err}");
            assert!(err.message.contains("out of range: allowed"), "{err}");
        }
    }

    #[test]
    fn the_peak_is_summed_without_overflow_and_checked_against_ram() {
        let s = spec(serde_json::json!({"requests": 4,
            "plateau": {"mib": 8}, "leak": {"mib_per_request": 2.0},
            "growth_until_request": 3, "steps": {"mib": 1, "at_requests": [1, 1, 2]},
            "spike": {"mib": 16, "hold_ms": 1}, "reserve": {"mib": 1024},
            "file_map": {"mib": 4}, "shm_file": {"kib_per_request": 512},
            "locked": {"mib": 3}}));
        assert_eq!(s.validate(), Ok(()));
        // 8 + 3 + 2×3 + 1×2 + 16 + 4 + 0.5×4 MiB; the reservation is never touched.
        assert_eq!(s.peak_touched_bytes(), 41 * crate::MIB as u128);
        assert_eq!(s.check_fits(41 * crate::MIB), Ok(()));
        let err = s.check_fits(40 * crate::MIB).unwrap_err();
        assert!(err.message.contains("41 MiB at their peak"), "{err}");
        assert_eq!(err.clone().under("calibrate").key, "calibrate");
        assert!(
            err.under("calibrate")
                .message
                .starts_with("calibrate: the patterns")
        );
        // The largest valid leak over the most requests still sums exactly.
        let most = spec(serde_json::json!({"requests": 10_000_000,
            "leak": {"mib_per_request": 1048576.0}}));
        assert_eq!(most.validate(), Ok(()));
        assert_eq!(most.peak_touched_bytes(), (1u128 << 40) * 10_000_000);
        assert!(most.check_fits(1 << 40).is_err());
    }
}
