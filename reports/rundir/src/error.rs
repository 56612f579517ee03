//! What can go wrong with a run directory, each naming the file.

use std::path::PathBuf;

/// A run-directory failure. Every variant names the file (root joined with
/// the relative path) so a user sees exactly what to look at.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    // The I/O error is part of the message, not a chained source: printed
    // with its causes (`{:#}`) it would otherwise appear twice.
    #[error("cannot {op} {path}: {error}")]
    Io {
        op: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path} is a symbolic link; memqual never follows links inside a run directory")]
    Symlink { path: PathBuf },
    #[error("{path} is a {kind}, not a regular file; memqual reads only regular files")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is a {kind}, not a folder")]
    NotDir { path: PathBuf, kind: &'static str },
    #[error("{path} is {size} bytes, more than the {limit} bytes memqual reads from such a file")]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{path}:{line}: a line longer than {limit} bytes")]
    LineTooLong {
        path: PathBuf,
        line: u64,
        limit: u64,
    },
    #[error("{path}:{line}: {reason}")]
    Record {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error(transparent)]
    BadPath(#[from] crate::rel::BadPath),
    #[error("{path}: {error}")]
    BadArmId {
        path: PathBuf,
        error: crate::rel::BadArmId,
    },
    #[error(
        "run directory {path} is in use by another memqual process (a run still writing it, or a report); \
         wait for it to finish or choose another directory"
    )]
    Busy { path: PathBuf },
    #[error(
        "run directory {path} already exists and is not empty; choose another --out so no earlier run is overwritten"
    )]
    NotEmpty { path: PathBuf },
    #[error(
        "run directory {path} was claimed by another memqual run at the same moment; choose another --out"
    )]
    Claimed { path: PathBuf },
    #[error("{path} is opened read-only here")]
    ReadOnly { path: PathBuf },
    #[error("{path}: an earlier write failed ({first}); nothing more is written to it")]
    Poisoned { path: PathBuf, first: String },
    #[error("cannot serialize {what}: {reason}")]
    Serialize { what: String, reason: String },
}

impl RunDirError {
    /// True when the error is "no such file" (a file that was never written).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RunDirError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound)
    }

    /// True when a write failed because the device is full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, RunDirError::Io { error, .. } if error.raw_os_error() == Some(nix::libc::ENOSPC))
    }
}
