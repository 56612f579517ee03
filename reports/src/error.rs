use std::path::PathBuf;

/// Why a run directory could not be turned into a receipt.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file of the run directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// One record (a CSV row or JSON line) could not be parsed.
    #[error("{path}:{line}: {reason}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the record (a CSV's header is line 1).
        line: u64,
        /// The parser's message.
        reason: String,
    },
    /// A file's content is not what it should be, or an output (CSV, JUnit
    /// XML) could not be written.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file, or the name of the output.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The run directory itself refused the access (see `run_dir::RunDirError`).
    #[error(transparent)]
    RunDir(#[from] run_dir::RunDirError),
}
