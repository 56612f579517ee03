//! Memory sampling for memqual.
//!
//! This crate measures; it never decides. It provides:
//! - [`TaskMemory`]: a snapshot of the *calling* process's memory, read in
//!   process (Linux `/proc/self/status`, macOS `task_info(TASK_VM_INFO)`).
//!   A peak the kernel does not report is `None`, never a copy of a current value.
//! - [`Phase`], [`Marker`] and [`MarkerRecorder`]: phase-tagged snapshots with a
//!   sequence number and a timestamp on the shared monotonic clock ([`clock`]).
//!   On Linux the recorder resets the resident high-water mark after each
//!   snapshot so every phase carries its own kernel peak.
//! - [`PhaseTracker`]: the one definition of the legal phase order.
//! - [`ExternalSampler`]: a fixed-cadence thread that samples another process
//!   and the system against deadlines, recording its own lateness and skipped
//!   ticks, and hands each [`SeriesRow`] to a sink as it is taken.
//! - [`device`]: accelerator (NVIDIA GPU) memory through NVML loaded at run
//!   time, for the series' device columns ([`DeviceCell`]: absent without a
//!   device, never zero) and, on request, for the markers.
//! - [`metal`]: Metal's device memory (`MTLDevice.currentAllocatedSize`),
//!   read in process for the markers on macOS with the `metal` feature, and
//!   the device's working-set limit and unified memory for the series.
//!
//! It does not spawn workers, write run directories or judge results; those
//! belong to the harness and the reports crate.
//!
//! Platform code lives in one small module per platform (`linux`, `macos`);
//! everything else is platform independent.

// Every public item says what it means: the harness, reports and JSON schemas read these docs.
#![warn(missing_docs)]

/// Parsers for captured tool output (vmmap, vm_stat, /proc, cgroup files, …) and the `.mlmodelc` tree digest.
pub mod captures;
pub mod clock;
/// The soak's covariates (thermal state, CPU frequency, power source) read with the system files.
pub mod covariates;
/// Pure macOS decoding and field rules, built everywhere so they are tested on Linux.
pub mod darwin;
/// Apple's headers' facts and the build-time check of the Rust side against them.
pub mod darwin_abi;
/// Accelerator device memory through NVML loaded at run time.
pub mod device;
mod error;
mod external;
/// The raw-read floor a Linux tick is benchmarked against.
#[cfg(target_os = "linux")]
pub mod floor;
/// Host identity (hardware model, boot time, thermal state) and its pure decoders.
pub mod host;
mod marker;
mod memory;
/// Metal's device memory, read in process (macOS, `metal` feature).
pub mod metal;
mod phase;
/// The Linux external sampler's kept-open `/proc` files.
#[cfg(target_os = "linux")]
mod procfile;
mod series;
/// The system's held-memory levels (wired, compressor; unevictable, mlocked, zswap).
pub mod system_levels;
/// The CPU time of this process's own sampler threads, live and ended.
pub mod threads;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod platform;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod platform;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[path = "unsupported.rs"]
mod platform;

pub use device::DeviceSource;
pub use error::SamplerError;
pub use external::{DEFAULT_SYSTEM_PERIOD, ExternalSampler, SamplerConfig, SamplerStats};
pub use marker::{Marker, MarkerCpu, MarkerRecorder};
pub use memory::TaskMemory;
pub use phase::{Phase, PhaseError, PhaseTracker};
/// Read the calling process's memory ([`TaskMemory`]). Does not reset any peak.
pub use platform::snapshot_self;
#[cfg(target_os = "macos")]
pub use platform::thermal_pressure_state;
pub use platform::{ProcessProbe, SystemProbe, boot_session_id, host_identity};
pub use series::{DeviceCell, SeriesRow};
pub use system_levels::SystemLevels;

/// Serializes unit tests that measure this test process's own memory: the
/// test harness runs tests on parallel threads of one process. Those tests
/// read `/proc/self`, so they (and this lock) are Linux-only.
#[cfg(all(test, target_os = "linux"))]
pub(crate) static OWN_MEMORY_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Name of the platform this build samples, as written into records.
pub const PLATFORM: &str = platform::NAME;

/// The page size of this host in bytes (used to judge "more than one page").
pub fn page_size_bytes() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(4096)
}
