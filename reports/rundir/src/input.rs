//! Files named on the command line (a protocol, a captured tool output, a
//! receipt to compare): links are followed, since the user chose the path,
//! but only a regular file is read, without blocking on a FIFO, and never
//! more than a limit. Files a manifest names inside its folder
//! ([`read_beneath`]) are read without following any link below that folder.

use crate::RunDirError;
use crate::fsio::{self, OpenError};
use std::path::Path;

fn open_error(path: &Path, e: OpenError) -> RunDirError {
    let path = path.to_path_buf();
    match e {
        OpenError::Io(source) => RunDirError::Io {
            op: "read",
            path,
            error: source,
        },
        OpenError::Symlink => RunDirError::Symlink { path },
        OpenError::NotRegular(kind) => RunDirError::NotRegular {
            path,
            kind: kind.describe(),
        },
    }
}

/// Open `path` for reading if it is a regular file: (file, size).
pub fn open(path: &Path) -> Result<(std::fs::File, u64), RunDirError> {
    fsio::open_regular(nix::fcntl::AT_FDCWD, path, true).map_err(|e| open_error(path, e))
}

/// The whole of the regular file `path`, at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, RunDirError> {
    let (file, size) = open(path)?;
    read_opened(path, file, size, limit)
}

/// The whole of the regular file `dir/<components joined by />`, at most
/// `limit` bytes. `dir` is the user's choice (links in it are followed);
/// below it every component is opened with `O_NOFOLLOW`, so a symbolic link
/// anywhere under `dir` is refused ([`RunDirError::Symlink`], naming the
/// link), as are FIFOs, devices and folders where the file should be.
pub fn read_beneath(dir: &Path, components: &[&str], limit: u64) -> Result<Vec<u8>, RunDirError> {
    let full = components.iter().fold(dir.to_path_buf(), |p, c| p.join(c));
    let Some((name, parents)) = components.split_last() else {
        return Err(open_error(&full, OpenError::NotRegular(crate::Kind::Dir)));
    };
    let mut fd = crate::fsio::open_root(dir).map_err(|error| RunDirError::Io {
        op: "open",
        path: dir.to_path_buf(),
        error,
    })?;
    let mut at = dir.to_path_buf();
    for parent in parents {
        at.push(parent);
        fd = match fsio::open_dir(std::os::fd::AsFd::as_fd(&fd), parent) {
            Ok(next) => next,
            Err(OpenError::NotRegular(kind)) => {
                return Err(RunDirError::NotDir {
                    path: at,
                    kind: kind.describe(),
                });
            }
            Err(e) => return Err(open_error(&at, e)),
        };
    }
    let (file, size) = fsio::open_regular(std::os::fd::AsFd::as_fd(&fd), *name, false)
        .map_err(|e| open_error(&full, e))?;
    read_opened(&full, file, size, limit)
}

fn read_opened(
    path: &Path,
    file: std::fs::File,
    size: u64,
    limit: u64,
) -> Result<Vec<u8>, RunDirError> {
    match crate::read::read_bounded(file, size, limit) {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(size)) => Err(RunDirError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
        }),
        Err(source) => Err(RunDirError::Io {
            op: "read",
            path: path.to_path_buf(),
            error: source,
        }),
    }
}

/// The regular file `path` as UTF-8 text, at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, RunDirError> {
    let bytes = read(path, limit)?;
    String::from_utf8(bytes).map_err(|e| RunDirError::Record {
        path: path.to_path_buf(),
        line: 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64,
        reason: "not valid UTF-8".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read(dir.path(), 10).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }

    #[test]
    fn links_to_regular_files_are_followed_and_sizes_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.toml");
        std::fs::write(&file, "0123456789").unwrap();
        let link = dir.path().join("l.toml");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read(&link, 10).unwrap(), b"0123456789");
        let e = read(&link, 9).unwrap_err();
        assert!(
            matches!(
                e,
                RunDirError::TooLarge {
                    size: 10,
                    limit: 9,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn read_beneath_follows_no_link_below_its_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/f.wav"), "0123").unwrap();
        assert_eq!(read_beneath(&dir, &["a", "f.wav"], 10).unwrap(), b"0123");
        // The folder itself may be reached through a link (the user named it).
        let via = tmp.path().join("via");
        std::os::unix::fs::symlink(&dir, &via).unwrap();
        assert_eq!(read_beneath(&via, &["a", "f.wav"], 10).unwrap(), b"0123");
        // A linked file, and a linked folder on the way, are refused by name.
        std::os::unix::fs::symlink(dir.join("a/f.wav"), dir.join("a/l.wav")).unwrap();
        let e = read_beneath(&dir, &["a", "l.wav"], 10).unwrap_err();
        assert!(
            matches!(&e, RunDirError::Symlink { path } if path.ends_with("a/l.wav")),
            "{e}"
        );
        std::os::unix::fs::symlink(dir.join("a"), dir.join("b")).unwrap();
        let e = read_beneath(&dir, &["b", "f.wav"], 10).unwrap_err();
        assert!(
            matches!(&e, RunDirError::Symlink { path } if path.ends_with("set/b")),
            "{e}"
        );
        let fifo = dir.join("a/p.wav");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_beneath(&dir, &["a", "p.wav"], 10).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_beneath(&dir, &["a", "f.wav"], 3).unwrap_err();
        assert!(matches!(e, RunDirError::TooLarge { size: 4, .. }), "{e}");
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"a\nb\n\xff").unwrap();
        let e = read_text(&file, 100).unwrap_err();
        assert!(e.to_string().ends_with(":3: not valid UTF-8"), "{e}");
    }
}
