//! memqual's workers: child processes that run one arm each and speak the
//! worker contract (`worker-contract`).
//!
//! - [`session::WorkerSession`]: the worker side of a run — hello, phase
//!   markers (through `sampler::MarkerRecorder`), results, errors, bye —
//!   shared by every worker binary.
//! - [`calibrate`]: the calibration worker (`memqual-calibrate`), which
//!   allocates known patterns (plateau, leak, spike, reserve, file map) and
//!   touches every page it claims, so the harness can prove its numbers.
//! - [`calibrate_gpu`]: its device-memory patterns (`gpu_plateau`,
//!   `gpu_leak`, `gpu_spike`) through the CUDA driver loaded at run time.
//! - [`calibrate_metal`]: its Metal patterns (`metal_plateau`, `metal_leak`,
//!   `metal_spike`, `metal_autorelease`), macOS with `metal` only.
//! - [`whisper`]: the whisper.cpp worker (`memqual-whisper`), real inference
//!   through whisper-rs, with whisper.cpp's log parsed into a topology.
//! - [`heap_dump`]: jemalloc heap profiles after the phase markers, when the
//!   arm asks for allocation attribution (not runnable without them).
//! - [`last_words`]: how a worker ends — its error over fd 3 and on stderr,
//!   and its exit code — without ever panicking on a failed write.
//!
//! Workers measure and report; they never judge. Judging is the harness's
//! and the reports crate's job.

// Every public item says what it means (units, sources, failure cases): issue 17.
#![warn(missing_docs)]

pub mod calibrate;
pub mod calibrate_gpu;
pub mod calibrate_metal;
pub mod heap_dump;
pub mod last_words;
pub mod session;
pub mod whisper;

/// The runtimes' sources as the lock file this build resolved pins them
/// (runners/build.rs): version and registry checksum, empty when absent.
pub mod locked {
    /// whisper-rs-sys: whisper.cpp's sources.
    pub const WHISPER_RS_SYS: (&str, &str) = (
        env!("MEMQUAL_WHISPER_RS_SYS_VERSION"),
        env!("MEMQUAL_WHISPER_RS_SYS_CHECKSUM"),
    );
    /// ct2rs: CTranslate2's sources (absent from the patched worker's lock).
    pub const CT2RS: (&str, &str) = (
        env!("MEMQUAL_CT2RS_VERSION"),
        env!("MEMQUAL_CT2RS_CHECKSUM"),
    );
}

/// Tests that measure this process's own memory hold this lock, and so do
/// tests that allocate tens of MiB (a whisper.cpp model load), so that one
/// never moves the other's figures: they share one test process.
#[cfg(test)]
pub(crate) fn memory_test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
