use std::path::PathBuf;

/// Why a run directory could not be turned into a receipt.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Record {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error(transparent)]
    RunDir(#[from] run_dir::RunDirError),
}
