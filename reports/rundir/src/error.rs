//! What can go wrong with a run directory, each naming the file.

use std::path::PathBuf;

/// A run-directory failure. Every variant names the file (root joined with
/// the relative path) so a user sees exactly what to look at.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    // The I/O error is part of the message, not a chained source: printed
    // with its causes (`{:#}`) it would otherwise appear twice.
    /// An operating-system call on the file failed.
    #[error("cannot {op} {path}: {error}")]
    Io {
        /// What was attempted ("open", "read", "rename", …).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// A link where a file or folder was expected; never followed.
    #[error("{path} is a symbolic link; memqual never follows links inside a run directory")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A FIFO, device, socket or folder where a regular file was expected.
    #[error("{path} is a {kind}, not a regular file; memqual reads only regular files")]
    NotRegular {
        /// The entry.
        path: PathBuf,
        /// What it is instead ([`crate::Kind::describe`]).
        kind: &'static str,
    },
    /// Something other than a folder where a folder was expected.
    #[error("{path} is a {kind}, not a folder")]
    NotDir {
        /// The entry.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// A file over the read bound of its kind ([`crate::limits`]).
    #[error("{path} is {size} bytes, more than the {limit} bytes memqual reads from such a file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The bound, in bytes.
        limit: u64,
    },
    /// A JSON-lines or CSV line over the per-line bound.
    #[error("{path}:{line}: a line longer than {limit} bytes")]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: u64,
        /// The bound, in bytes.
        limit: u64,
    },
    /// A record that does not parse as its type.
    #[error("{path}:{line}: {reason}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The line number, from 1 (1 for a whole-file JSON record).
        line: u64,
        /// The parser's message.
        reason: String,
    },
    /// A relative path that is not plain ([`crate::Rel`]).
    #[error(transparent)]
    BadPath(#[from] crate::rel::BadPath),
    /// An arm id, read from the named file, that is not one plain name.
    #[error("{path}: {error}")]
    BadArmId {
        /// The file the id was read from.
        path: PathBuf,
        /// Why the id is refused.
        error: crate::rel::BadArmId,
    },
    /// The directory's lock is held by another memqual process.
    #[error(
        "run directory {path} is in use by another memqual process (a run still writing it, or a report); \
         wait for it to finish or choose another directory"
    )]
    Busy {
        /// The run directory.
        path: PathBuf,
    },
    /// `create` on a directory that holds files already.
    #[error(
        "run directory {path} already exists and is not empty; choose another --out so no earlier run is overwritten"
    )]
    NotEmpty {
        /// The run directory.
        path: PathBuf,
    },
    /// `create` on a symbolic link (to a folder or not): a new run or fleet
    /// directory is never written through a link.
    #[error(
        "{path} is a symbolic link; memqual never writes a run or fleet directory through a link: \
         give the folder it points to, or a new path, as --out"
    )]
    OutLink {
        /// The link.
        path: PathBuf,
    },
    /// Another run created `arms/` first.
    #[error(
        "run directory {path} was claimed by another memqual run at the same moment; choose another --out"
    )]
    Claimed {
        /// The run directory.
        path: PathBuf,
    },
    /// A write through a run directory opened for reading.
    #[error("{path} is opened read-only here")]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// An append after an earlier append to the file failed.
    #[error("{path}: an earlier write failed ({first}); nothing more is written to it")]
    Poisoned {
        /// The file.
        path: PathBuf,
        /// The first failure.
        first: String,
    },
    /// A value that serde could not serialize.
    #[error("cannot serialize {what}: {reason}")]
    Serialize {
        /// What was being written.
        what: String,
        /// serde's message.
        reason: String,
    },
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
