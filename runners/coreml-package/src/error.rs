//! Why a Core ML model could not be read. Every variant names the file.

use std::path::PathBuf;

/// A Core ML model that memqual refuses to read, or could not read.
#[derive(Debug, thiserror::Error)]
pub enum CoremlError {
    /// The path is not a directory (a `.mlpackage` and a `.mlmodelc` are both directories).
    #[error("{path}: not a directory: a Core ML model is a .mlpackage or .mlmodelc directory")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// Neither a package (no `Manifest.json`) nor a compiled model (no `coremldata.bin`).
    #[error(
        "{path}: neither a .mlpackage (Manifest.json) nor a compiled .mlmodelc (coremldata.bin)"
    )]
    UnknownLayout {
        /// The directory given.
        path: PathBuf,
    },
    /// A symbolic link inside the model: never followed, always refused.
    #[error("{path}: a symbolic link inside the model; refusing it (copy the model without links)")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A FIFO, socket or device inside the model.
    #[error("{path}: a {kind} inside the model; only regular files and folders are read")]
    Special {
        /// The entry.
        path: PathBuf,
        /// What it is (`FIFO`, `socket`, `character device`, `block device`).
        kind: &'static str,
    },
    /// An entry whose name is not UTF-8 (Core ML writes none).
    #[error("{path}: a name that is not UTF-8")]
    BadName {
        /// The entry.
        path: PathBuf,
    },
    /// More entries, or deeper nesting, than any Core ML model has.
    #[error("{path}: {reason}; not read")]
    TooLarge {
        /// The directory where the limit was met.
        path: PathBuf,
        /// Which limit.
        reason: String,
    },
    /// Listing a folder failed.
    #[error("{path}: {source}")]
    Io {
        /// The folder or entry.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Reading a file failed or was refused (too large, not a regular file).
    #[error(transparent)]
    Read(#[from] run_dir::RunDirError),
    /// A file's contents are not what Core ML writes there.
    #[error("{path}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, in words.
        reason: String,
    },
}

impl CoremlError {
    pub(crate) fn malformed(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        CoremlError::Malformed {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
