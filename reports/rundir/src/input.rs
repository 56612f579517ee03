//! Files named on the command line (a protocol, a captured tool output, a
//! receipt to compare): links are followed, since the user chose the path,
//! but only a regular file is read, without blocking on a FIFO, and never
//! more than a limit.

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
    fn invalid_utf8_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"a\nb\n\xff").unwrap();
        let e = read_text(&file, 100).unwrap_err();
        assert!(e.to_string().ends_with(":3: not valid UTF-8"), "{e}");
    }
}
