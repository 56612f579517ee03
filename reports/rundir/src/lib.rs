//! The memqual run directory, owned by one type.
//!
//! [`RunDir`] is the only way memqual reads or writes a run directory. Its
//! contract:
//! - every name comes from [`names`], every path is a [`Rel`] (plain names,
//!   no `..`, not absolute), and arm ids are single plain names
//!   ([`rel::check_arm_id`]), so nothing inside a run reaches outside it;
//! - paths are resolved component by component from the open directory with
//!   `O_NOFOLLOW`: a symbolic link anywhere inside is an error, never followed;
//! - only regular files are read (FIFOs and devices are refused at once,
//!   without blocking), and every read is bounded ([`limits`]) or streamed;
//! - JSON records are written atomically (temporary file, fsync, rename), so
//!   a reader sees the old record or the new one; appended files (JSON lines,
//!   CSV) are written a whole line per write and stop at the first failure;
//! - a torn last line (a write cut short) is dropped when read and recorded
//!   as a [`Recovery`];
//! - one run owns its directory: [`RunDir::create`] claims it atomically and
//!   holds an exclusive lock until dropped; readers take a shared lock, so a
//!   report never reads a run that is still being written.
//!
//! Also here: the digests and canonical JSON every seal uses ([`digest`]),
//! the source seal of raw files ([`raw_seal`]), and bounded reads of input
//! files named on the command line ([`input`]).

// Every public item says what it is: this crate is the one way into a run
// directory, for the harness, the reports and other tools.
#![warn(missing_docs)]

pub mod digest;
mod error;
mod fsio;
pub mod input;
pub mod limits;
pub mod names;
pub mod raw_seal;
mod read;
pub mod rel;
mod walk;
mod write;

pub use error::RunDirError;
pub use fsio::Kind;
pub use rel::{Rel, check_arm_id};
pub use walk::{Irregular, Walk, WalkedFile};
pub use write::{Appender, CsvAppender};

use fsio::OpenError;
use nix::fcntl::{Flock, FlockArg};
use serde::de::DeserializeOwned;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A torn last line dropped while reading.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Recovery {
    /// The file, relative to the run directory.
    pub path: String,
    /// Bytes after the last complete line, not read.
    pub dropped_bytes: u64,
}

/// How a run directory is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The run that writes it (exclusive, created by [`RunDir::create`]).
    Owner,
    /// `memqual report`: rebuilds derived files (exclusive).
    Rebuild,
    /// `verify`, `compare`, reading only (shared).
    Read,
}

struct Inner {
    root: PathBuf,
    fd: Flock<OwnedFd>,
    access: Access,
    recoveries: Mutex<Vec<Recovery>>,
}

/// An open run directory; cheap to clone and share between threads.
#[derive(Clone)]
pub struct RunDir {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RunDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDir")
            .field("root", &self.inner.root)
            .field("access", &self.inner.access)
            .finish()
    }
}

fn lock(fd: OwnedFd, access: Access, root: &Path) -> Result<Flock<OwnedFd>, RunDirError> {
    let arg = match access {
        Access::Read => FlockArg::LockSharedNonblock,
        Access::Owner | Access::Rebuild => FlockArg::LockExclusiveNonblock,
    };
    Flock::lock(fd, arg).map_err(|(_, errno)| {
        if errno == nix::errno::Errno::EWOULDBLOCK {
            RunDirError::Busy {
                path: root.to_path_buf(),
            }
        } else {
            RunDirError::Io {
                op: "lock",
                path: root.to_path_buf(),
                error: errno.into(),
            }
        }
    })
}

impl RunDir {
    /// Create and claim a new run directory at `path`: it must not exist or
    /// be empty, and may not be a symbolic link (even to an empty folder:
    /// [`RunDirError::OutLink`]). Claiming is atomic (an exclusive lock, then creating
    /// `arms/`, which only one process can do), so of two runs started into
    /// the same directory at once exactly one proceeds.
    pub fn create(path: &Path) -> Result<RunDir, RunDirError> {
        let io = |op, source| RunDirError::Io {
            op,
            path: path.to_path_buf(),
            error: source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| io("create", e))?;
        }
        match std::fs::create_dir(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("create", e)),
        }
        let fd = fsio::open_new_root(path).map_err(|e| match e {
            OpenError::Symlink => RunDirError::OutLink {
                path: path.to_path_buf(),
            },
            OpenError::Io(e) => io("open", e),
            OpenError::NotRegular(kind) => RunDirError::NotDir {
                path: path.to_path_buf(),
                kind: kind.describe(),
            },
        })?;
        let fd = lock(fd, Access::Owner, path)?;
        let entries = fsio::list(fd.as_fd()).map_err(|e| io("read", e))?;
        if !entries.is_empty() {
            return Err(RunDirError::NotEmpty {
                path: path.to_path_buf(),
            });
        }
        match fsio::mkdir(fd.as_fd(), names::ARMS, false) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(RunDirError::Claimed {
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(io("create", e)),
        }
        Ok(Self::from_parts(path, fd, Access::Owner))
    }

    /// Create a new run directory at `base`, or `base-2`, `base-3`, … when
    /// taken (the default `runs/<time>-<protocol>`).
    pub fn create_unique(base: &Path) -> Result<RunDir, RunDirError> {
        let mut candidate = base.to_path_buf();
        for n in 2..10_000u32 {
            match RunDir::create(&candidate) {
                Err(RunDirError::NotEmpty { .. } | RunDirError::Busy { .. })
                | Err(RunDirError::Claimed { .. }) => {
                    candidate = PathBuf::from(format!("{}-{n}", base.display()));
                }
                other => return other,
            }
        }
        RunDir::create(&candidate)
    }

    /// Open an existing run directory for reading or rebuilding.
    pub fn open(path: &Path, access: Access) -> Result<RunDir, RunDirError> {
        let fd = fsio::open_root(path).map_err(|source| RunDirError::Io {
            op: "open",
            path: path.to_path_buf(),
            error: source,
        })?;
        let fd = lock(fd, access, path)?;
        Ok(Self::from_parts(path, fd, access))
    }

    fn from_parts(path: &Path, fd: Flock<OwnedFd>, access: Access) -> RunDir {
        RunDir {
            inner: Arc::new(Inner {
                root: path.to_path_buf(),
                fd,
                access,
                recoveries: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The path the directory was opened by.
    pub fn path(&self) -> &Path {
        &self.inner.root
    }

    /// The user-facing path of `rel` (for messages, and for the worker's
    /// scratch folder, which the worker opens itself).
    pub fn display(&self, rel: &Rel) -> PathBuf {
        rel.components()
            .iter()
            .fold(self.inner.root.clone(), |p, c| p.join(c))
    }

    /// `arms/<id>` for an arm id read from anywhere (checked).
    pub fn arm(&self, id: &str) -> Result<Rel, RunDirError> {
        rel::arm_dir(id).map_err(|source| RunDirError::BadArmId {
            path: self.display(&Rel::file(names::RUN)),
            error: source,
        })
    }

    fn check_writable(&self, rel: &Rel) -> Result<(), RunDirError> {
        if self.inner.access == Access::Read {
            return Err(RunDirError::ReadOnly {
                path: self.display(rel),
            });
        }
        Ok(())
    }

    fn open_error(&self, rel: &Rel, op: &'static str, e: OpenError) -> RunDirError {
        let path = self.display(rel);
        match e {
            OpenError::Io(source) => RunDirError::Io {
                op,
                path,
                error: source,
            },
            OpenError::Symlink => RunDirError::Symlink { path },
            OpenError::NotRegular(Kind::Symlink) => RunDirError::Symlink { path },
            OpenError::NotRegular(kind) => RunDirError::NotRegular {
                path,
                kind: kind.describe(),
            },
        }
    }

    /// Open the directory `dir` (every component, no links).
    fn dir_fd(&self, dir: &Rel) -> Result<OwnedFd, RunDirError> {
        let mut fd = self
            .inner
            .fd
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| RunDirError::Io {
                op: "open",
                path: self.inner.root.clone(),
                error: source,
            })?;
        let mut walked = Rel::root();
        for part in dir.components() {
            walked = walked.join(part);
            fd = fsio::open_dir(fd.as_fd(), part)
                .map_err(|e| self.open_error(&walked, "open", e))?;
        }
        Ok(fd)
    }

    /// Split `rel` into its open parent directory and its last name.
    fn parent_and_name<'r>(&self, rel: &'r Rel) -> Result<(OwnedFd, &'r str), RunDirError> {
        let name = rel.name().ok_or_else(|| RunDirError::Io {
            op: "open",
            path: self.display(rel),
            error: std::io::Error::other("the run directory itself is not a file"),
        })?;
        Ok((self.dir_fd(&rel.parent())?, name))
    }

    /// What `rel` is (links not followed), or `None` if absent. A link in a
    /// parent folder is an error.
    pub fn kind(&self, rel: &Rel) -> Result<Option<Kind>, RunDirError> {
        if rel.is_root() {
            return Ok(Some(Kind::Dir));
        }
        let (dir, name) = match self.parent_and_name(rel) {
            Ok(x) => x,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        fsio::kind_at(dir.as_fd(), name).map_err(|source| RunDirError::Io {
            op: "inspect",
            path: self.display(rel),
            error: source,
        })
    }

    /// Whether `rel` exists as a regular file (a link or FIFO there is an error).
    pub fn has_file(&self, rel: &Rel) -> Result<bool, RunDirError> {
        self.has(rel, Kind::File)
    }

    /// Whether `rel` exists as a directory (a link there is an error).
    pub fn has_dir(&self, rel: &Rel) -> Result<bool, RunDirError> {
        self.has(rel, Kind::Dir)
    }

    /// Whether `rel` exists as `want`; anything else there is an error.
    fn has(&self, rel: &Rel, want: Kind) -> Result<bool, RunDirError> {
        match self.kind(rel)? {
            None => Ok(false),
            Some(k) if k == want => Ok(true),
            Some(Kind::Symlink) => Err(RunDirError::Symlink {
                path: self.display(rel),
            }),
            Some(k) if want == Kind::Dir => Err(RunDirError::NotDir {
                path: self.display(rel),
                kind: k.describe(),
            }),
            Some(k) => Err(RunDirError::NotRegular {
                path: self.display(rel),
                kind: k.describe(),
            }),
        }
    }

    /// Open a regular file for reading: (file, size).
    fn open_file(&self, rel: &Rel) -> Result<(std::fs::File, u64), RunDirError> {
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::open_regular(dir.as_fd(), name, false).map_err(|e| self.open_error(rel, "read", e))
    }

    /// The whole of a regular file, at most `limit` bytes; `None` if absent.
    pub fn read_bytes(&self, rel: &Rel, limit: u64) -> Result<Option<Vec<u8>>, RunDirError> {
        let (file, size) = match self.open_file(rel) {
            Ok(x) => x,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        match read::read_bounded(file, size, limit) {
            Ok(Ok(bytes)) => Ok(Some(bytes)),
            Ok(Err(size)) => Err(RunDirError::TooLarge {
                path: self.display(rel),
                size,
                limit,
            }),
            Err(source) => Err(RunDirError::Io {
                op: "read",
                path: self.display(rel),
                error: source,
            }),
        }
    }

    /// A JSON record; `None` if the file is absent.
    pub fn read_json<T: DeserializeOwned>(&self, rel: &Rel) -> Result<Option<T>, RunDirError> {
        self.read_json_limited(rel, limits::JSON_RECORD)
    }

    /// A JSON record of at most `limit` bytes; `None` if absent.
    pub fn read_json_limited<T: DeserializeOwned>(
        &self,
        rel: &Rel,
        limit: u64,
    ) -> Result<Option<T>, RunDirError> {
        let Some(bytes) = self.read_bytes(rel, limit)? else {
            return Ok(None);
        };
        if bytes.is_empty() {
            return Err(RunDirError::Record {
                path: self.display(rel),
                line: 1,
                reason: "the file is empty".into(),
            });
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RunDirError::Record {
                path: self.display(rel),
                // serde_json gives line 0 to an error a type raises about
                // the value as a whole (after parsing it): that value is
                // the file's, which starts on line 1.
                line: (e.line() as u64).max(1),
                reason: e.to_string(),
            })
    }

    /// A text file read whole (at most [`limits::TEXT`]); `None` if absent.
    pub fn read_text(&self, rel: &Rel) -> Result<Option<String>, RunDirError> {
        Ok(self
            .read_bytes(rel, limits::TEXT)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Open a file another thread of this process is still appending to
    /// (for a progress display): regular, no links; the caller bounds what
    /// it reads. `None` if absent.
    pub fn open_growing(&self, rel: &Rel) -> Result<Option<std::fs::File>, RunDirError> {
        match self.open_file(rel) {
            Ok((file, _)) => Ok(Some(file)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Open a line-oriented file: its complete lines only (a torn last line
    /// is recorded as a [`Recovery`]); `None` if absent.
    fn open_lines(&self, rel: &Rel) -> Result<Option<(std::fs::File, u64)>, RunDirError> {
        let (file, size) = match self.open_file(rel) {
            Ok(x) => x,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let complete =
            read::complete_prefix_len(&file, size).map_err(|source| RunDirError::Io {
                op: "read",
                path: self.display(rel),
                error: source,
            })?;
        if complete < size {
            self.record_recovery(rel, size - complete);
        }
        Ok(Some((file, complete)))
    }

    fn record_recovery(&self, rel: &Rel, dropped_bytes: u64) {
        let path = rel.to_string();
        let mut list = self
            .inner
            .recoveries
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !list.iter().any(|r| r.path == path) {
            list.push(Recovery {
                path,
                dropped_bytes,
            });
        }
    }

    /// Every torn line dropped so far, by file.
    pub fn recoveries(&self) -> Vec<Recovery> {
        let mut list = self
            .inner
            .recoveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        list.sort_by(|a, b| a.path.cmp(&b.path));
        list
    }

    /// Visit every complete line of a JSON-lines file, parsed; blank lines
    /// are skipped. An absent file has no lines.
    pub fn for_each_jsonl<T: DeserializeOwned>(
        &self,
        rel: &Rel,
        mut visit: impl FnMut(u64, T) -> Result<(), RunDirError>,
    ) -> Result<(), RunDirError> {
        let Some((file, complete)) = self.open_lines(rel)? else {
            return Ok(());
        };
        let mut lines = read::Lines::new(file, complete, limits::LINE);
        let mut buf = Vec::new();
        while let Some(next) = lines.next_line(&mut buf) {
            let line = match next {
                Ok(n) => n,
                Err(read::LineError::TooLong { line }) => {
                    return Err(RunDirError::LineTooLong {
                        path: self.display(rel),
                        line,
                        limit: limits::LINE,
                    });
                }
                Err(read::LineError::Io(source)) => {
                    return Err(RunDirError::Io {
                        op: "read",
                        path: self.display(rel),
                        error: source,
                    });
                }
            };
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value = serde_json::from_slice(&buf).map_err(|e| RunDirError::Record {
                path: self.display(rel),
                line,
                reason: e.to_string(),
            })?;
            visit(line, value)?;
        }
        Ok(())
    }

    /// Every record of a JSON-lines file.
    pub fn read_jsonl<T: DeserializeOwned>(&self, rel: &Rel) -> Result<Vec<T>, RunDirError> {
        let mut out = Vec::new();
        self.for_each_jsonl(rel, |_, v| {
            out.push(v);
            Ok(())
        })?;
        Ok(out)
    }

    /// A CSV reader over the complete lines of `rel` (each at most
    /// [`limits::LINE`] bytes); `None` if absent. Row `i` (0-based, after the
    /// header) is line `i + 2` of the file.
    pub fn csv_reader(
        &self,
        rel: &Rel,
    ) -> Result<Option<csv::Reader<impl std::io::Read + use<>>>, RunDirError> {
        let Some((file, complete)) = self.open_lines(rel)? else {
            return Ok(None);
        };
        Ok(Some(csv::Reader::from_reader(
            read::BoundedLineReader::new(file, complete, limits::LINE),
        )))
    }

    /// SHA-256 and size of a regular file, streamed.
    pub fn digest(&self, rel: &Rel) -> Result<(u64, String), RunDirError> {
        let (file, _) = self.open_file(rel)?;
        digest::sha256_reader(file).map_err(|source| RunDirError::Io {
            op: "read",
            path: self.display(rel),
            error: source,
        })
    }

    /// Every file and folder under `dir`, links and special files reported
    /// apart (see [`Walk`]).
    pub fn walk(&self, dir: &Rel) -> Result<Walk, RunDirError> {
        walk::walk(self, dir)
    }

    /// Make the folder `rel` (its parent must exist); an existing folder is fine.
    pub fn create_dir(&self, rel: &Rel) -> Result<(), RunDirError> {
        self.check_writable(rel)?;
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::mkdir(dir.as_fd(), name, true).map_err(|source| RunDirError::Io {
            op: "create",
            path: self.display(rel),
            error: source,
        })
    }

    /// Replace `rel` with `bytes` atomically.
    pub fn write_bytes(&self, rel: &Rel, bytes: &[u8]) -> Result<(), RunDirError> {
        self.check_writable(rel)?;
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::write_atomic(dir.as_fd(), name, bytes).map_err(|source| RunDirError::Io {
            op: "write",
            path: self.display(rel),
            error: source,
        })
    }

    /// Whether this handle may write (opened to create, run or rebuild).
    pub fn is_writable(&self) -> bool {
        self.inner.access != Access::Read
    }

    /// Replace `rel` atomically with what `fill` writes, streamed (never
    /// held whole in memory).
    pub fn write_with(
        &self,
        rel: &Rel,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), RunDirError> {
        self.check_writable(rel)?;
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::write_atomic_with(dir.as_fd(), name, fill).map_err(|source| RunDirError::Io {
            op: "write",
            path: self.display(rel),
            error: source,
        })
    }

    /// Replace `rel` with `value` as pretty JSON (and a final newline), atomically.
    pub fn write_json(&self, rel: &Rel, value: &impl serde::Serialize) -> Result<(), RunDirError> {
        let mut text = serde_json::to_vec_pretty(value).map_err(|e| RunDirError::Serialize {
            what: rel.to_string(),
            reason: e.to_string(),
        })?;
        text.push(b'\n');
        self.write_bytes(rel, &text)
    }

    /// Create `rel` as a new, empty regular file for a child process to
    /// write (a worker's stdout and stderr). It must not exist yet.
    pub fn create_file(&self, rel: &Rel) -> Result<std::fs::File, RunDirError> {
        self.check_writable(rel)?;
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::create_new(dir.as_fd(), name, true).map_err(|source| RunDirError::Io {
            op: "create",
            path: self.display(rel),
            error: source,
        })
    }

    /// A new append-only line file at `rel` (it must not exist yet).
    pub fn appender(&self, rel: &Rel) -> Result<Appender, RunDirError> {
        let file = self.create_file(rel)?;
        Ok(Appender::new(file, self.display(rel)))
    }

    /// Remove the folder `rel` and everything in it, never following a link.
    pub fn remove_tree(&self, rel: &Rel) -> Result<(), RunDirError> {
        self.check_writable(rel)?;
        let (dir, name) = self.parent_and_name(rel)?;
        fsio::remove_tree(dir.as_fd(), name).map_err(|source| RunDirError::Io {
            op: "remove",
            path: self.display(rel),
            error: source,
        })
    }
}
