use std::path::PathBuf;

/// Why a sample could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// A file could not be read (on Linux a missing `/proc` file).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file that failed.
        path: PathBuf,
        /// The I/O error the read returned.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its contents were not what the sampler expects.
    #[error("cannot parse {path}: {reason}")]
    Parse {
        /// The file whose contents were wrong.
        path: PathBuf,
        /// What was wrong with them.
        reason: String,
    },
    /// The process to sample does not exist any more or has exited (a zombie).
    #[error("process {pid} is gone")]
    ProcessGone {
        /// The process id that was asked for.
        pid: i32,
    },
    /// A system call failed or returned something unusable.
    #[error("{call} failed: {reason}")]
    Os {
        /// The call that failed, e.g. `task_info(TASK_VM_INFO)` or `sysctlbyname`.
        call: &'static str,
        /// The error code or message it returned.
        reason: String,
    },
    /// This platform has no sampler (neither Linux nor macOS).
    #[error("memory sampling is not implemented on this platform")]
    Unsupported,
}
