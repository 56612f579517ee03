use std::path::PathBuf;

/// Why a sample could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("process {pid} is gone")]
    ProcessGone { pid: i32 },
    #[error("{call} failed: {reason}")]
    Os { call: &'static str, reason: String },
    #[error("memory sampling is not implemented on this platform")]
    Unsupported,
}
