//! File-descriptor level operations relative to an open directory: every
//! path component is opened with `O_NOFOLLOW`, every file is checked with
//! `fstat` to be regular before a byte is read, and FIFOs or devices are
//! opened non-blocking so that refusing them never hangs.

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a directory entry is, without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// A named pipe: opening it to read could block forever.
    Fifo,
    /// A character device such as `/dev/zero`: endless or side-effecting.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// Any type the kernel reports that is none of the above.
    Other,
}

impl Kind {
    /// The kind `fstat`/`lstat` reported in `st_mode`.
    pub fn from_stat(st: &FileStat) -> Kind {
        let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        match fmt {
            f if f == SFlag::S_IFREG => Kind::File,
            f if f == SFlag::S_IFDIR => Kind::Dir,
            f if f == SFlag::S_IFLNK => Kind::Symlink,
            f if f == SFlag::S_IFIFO => Kind::Fifo,
            f if f == SFlag::S_IFCHR => Kind::CharDevice,
            f if f == SFlag::S_IFBLK => Kind::BlockDevice,
            f if f == SFlag::S_IFSOCK => Kind::Socket,
            _ => Kind::Other,
        }
    }

    /// The kind in words, as error messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "regular file",
            Kind::Dir => "directory",
            Kind::Symlink => "symbolic link",
            Kind::Fifo => "FIFO (named pipe)",
            Kind::CharDevice => "character device",
            Kind::BlockDevice => "block device",
            Kind::Socket => "socket",
            Kind::Other => "special file",
        }
    }
}

/// Why an open of a regular file was refused.
#[derive(Debug)]
pub enum OpenError {
    Io(io::Error),
    Symlink,
    NotRegular(Kind),
}

impl From<Errno> for OpenError {
    fn from(e: Errno) -> Self {
        OpenError::Io(e.into())
    }
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Whether `errno` from an `O_NOFOLLOW` open means "the last name is a link".
/// Linux says ELOOP; macOS and the BSDs say ELOOP too, and EMLINK on some.
fn is_link_errno(e: Errno) -> bool {
    e == Errno::ELOOP || e == Errno::EMLINK
}

/// Open the directory `name` inside `dir`, refusing a symbolic link.
pub fn open_dir(dir: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, OpenError> {
    match openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(e) if is_link_errno(e) => Err(OpenError::Symlink),
        Err(Errno::ENOTDIR) => {
            let kind = kind_at(dir, name).map_err(OpenError::Io)?;
            match kind {
                Some(Kind::Symlink) => Err(OpenError::Symlink),
                Some(k) => Err(OpenError::NotRegular(k)),
                None => Err(OpenError::Io(Errno::ENOENT.into())),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Open the root of a run directory (the path the user named; links in it
/// are the user's choice).
pub fn open_root(path: &std::path::Path) -> io::Result<OwnedFd> {
    Ok(openat(
        nix::fcntl::AT_FDCWD,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// Open the folder a new run directory goes into, refusing a symbolic link
/// as its last component (links higher up the path are the user's choice).
pub fn open_new_root(path: &std::path::Path) -> Result<OwnedFd, OpenError> {
    match openat(nix::fcntl::AT_FDCWD, path, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(e) if is_link_errno(e) => Err(OpenError::Symlink),
        Err(Errno::ENOTDIR) => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Err(OpenError::Symlink),
            _ => Err(OpenError::Io(Errno::ENOTDIR.into())),
        },
        Err(e) => Err(e.into()),
    }
}

/// Open a regular file for reading: `O_NONBLOCK` so a FIFO cannot block the
/// open, `fstat` so only a regular file is read. Returns the file and its size.
pub fn open_regular<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    name: &P,
    follow: bool,
) -> Result<(File, u64), OpenError> {
    let mut flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) if !follow && is_link_errno(e) => return Err(OpenError::Symlink),
        Err(e) => return Err(e.into()),
    };
    checked_regular(fd)
}

/// `fstat` an open descriptor, insist on a regular file, clear `O_NONBLOCK`.
pub fn checked_regular(fd: OwnedFd) -> Result<(File, u64), OpenError> {
    let st = fstat(&fd)?;
    let kind = Kind::from_stat(&st);
    if kind != Kind::File {
        return Err(OpenError::NotRegular(kind));
    }
    let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok((File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
}

/// What `name` inside `dir` is, without following a link; `None` if absent.
pub fn kind_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<Option<Kind>> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Kind::from_stat(&st))),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Create a new file (it must not exist, not even as a dangling link).
pub fn create_new(dir: BorrowedFd<'_>, name: &str, append: bool) -> io::Result<File> {
    let mut flags = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_EXCL
        | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | OFlag::O_NOCTTY;
    if append {
        flags |= OFlag::O_APPEND;
    }
    let fd = openat(dir, name, flags, Mode::from_bits_truncate(0o644))?;
    Ok(File::from(fd))
}

/// Make a directory; an existing one is fine only if `exist_ok` and it is a
/// real directory, not a link to one.
pub fn mkdir(dir: BorrowedFd<'_>, name: &str, exist_ok: bool) -> io::Result<()> {
    match mkdirat(dir, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) if exist_ok => match kind_at(dir, name)? {
            Some(Kind::Dir) => Ok(()),
            _ => Err(Errno::EEXIST.into()),
        },
        Err(e) => Err(e.into()),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replace `name` in `dir` with `bytes` atomically: a new temporary file in
/// the same directory, written, synced, renamed over `name` (a link there is
/// replaced, never followed), then the directory synced. A reader sees the
/// old file or the new one, never a part.
pub fn write_atomic(dir: BorrowedFd<'_>, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(dir, name, |out| out.write_all(bytes))
}

/// [`write_atomic`] of what `fill` writes, streamed through a buffer, so a
/// large file is never held whole in memory.
pub fn write_atomic_with(
    dir: BorrowedFd<'_>,
    name: &str,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{name}.{}.{n}.tmp", std::process::id());
    let result = (|| {
        let mut out = io::BufWriter::new(create_new(dir, &temp, false)?);
        fill(&mut out)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        if kind_at(dir, name)? == Some(Kind::Dir) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{name} is a directory"),
            ));
        }
        renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            // Durability of the rename; a failure here loses nothing written.
            let _ = nix::unistd::fsync(dir);
            Ok(())
        }
        Err(e) => {
            let _ = unlinkat(dir, temp.as_str(), UnlinkatFlags::NoRemoveDir);
            Err(e)
        }
    }
}

/// Every entry of `dir` with its kind (links not followed), sorted by name
/// bytes. Names that are not UTF-8 are returned lossily with `valid = false`.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<Entry>> {
    let mut handle = nix::dir::Dir::openat(dir, ".", DIR_FLAGS, Mode::empty())?;
    let mut out = Vec::new();
    for entry in handle.iter() {
        let entry = entry?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        let (name, utf8) = match std::str::from_utf8(raw) {
            Ok(s) => (s.to_string(), true),
            Err(_) => (String::from_utf8_lossy(raw).into_owned(), false),
        };
        let st = fstatat(dir, entry.file_name(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        out.push(Entry {
            name,
            utf8,
            kind: Kind::from_stat(&st),
            size: u64::try_from(st.st_size).unwrap_or(0),
        });
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// One directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub utf8: bool,
    pub kind: Kind,
    pub size: u64,
}

/// Remove `name` in `dir` and everything under it, never following a link
/// (a link is removed, not its target).
pub fn remove_tree(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    match kind_at(dir, name)? {
        None => Ok(()),
        Some(Kind::Dir) => {
            let sub = match open_dir(dir, name) {
                Ok(fd) => fd,
                Err(OpenError::Io(e)) => return Err(e),
                Err(_) => {
                    return Err(io::Error::other(format!(
                        "{name} changed while removing it"
                    )));
                }
            };
            for entry in list(sub.as_fd())? {
                if !entry.utf8 {
                    return Err(io::Error::other(format!(
                        "{name} holds a name that is not UTF-8; remove it by hand"
                    )));
                }
                remove_tree(sub.as_fd(), &entry.name)?;
            }
            Ok(unlinkat(dir, name, UnlinkatFlags::RemoveDir)?)
        }
        Some(_) => Ok(unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?),
    }
}
