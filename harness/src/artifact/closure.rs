//! The shared libraries this memqual process has loaded, each hashed: the
//! binary closure a derivation receipt names (seed 003 §3.2).
//!
//! Linux: the file-backed mappings of `/proc/self/maps` (proc(5)) whose
//! name is a shared object (`*.so`, `*.so.*`), each read through one open
//! handle whose inode must be the one mapped (a library replaced on disk
//! since it was loaded is said to be, not hashed). macOS: dyld's list of
//! loaded images (`_dyld_image_count`, `_dyld_get_image_name`, dyld.h);
//! system libraries live in the dyld shared cache, not as files, and are
//! named without a digest. Elsewhere the closure is `unavailable`, with the
//! reason: never an empty list that looks like a finding.

use ggml_container::derive::BinaryClosure;
#[cfg(any(target_os = "linux", target_os = "macos"))]
use ggml_container::derive::{LibraryContent, SharedLibrary};
#[cfg(any(target_os = "linux", target_os = "macos"))]
use std::path::Path;

/// This process's shared libraries, or why they cannot be listed.
pub fn binary_closure() -> BinaryClosure {
    os::binary_closure()
}

/// `path`'s length and SHA-256 through one open handle; with `inode`, only
/// if the file opened is the one the loader mapped.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn content(path: &Path, inode: Option<u64>) -> LibraryContent {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let read = || -> std::io::Result<LibraryContent> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if let Some(mapped) = inode.filter(|&i| i != meta.ino()) {
            return Ok(LibraryContent::Unreadable {
                reason: format!(
                    "the file at this path (inode {}) is not the one mapped (inode {mapped}): replaced since it was loaded",
                    meta.ino()
                ),
            });
        }
        let mut hasher = Sha256::new();
        let bytes = std::io::copy(&mut file, &mut hasher)?;
        Ok(LibraryContent::Hashed {
            bytes,
            sha256: format!("{:x}", hasher.finalize()),
        })
    };
    read().unwrap_or_else(|e| LibraryContent::Unreadable {
        reason: format!("cannot read it: {e}"),
    })
}

/// Whether a file name is a shared object's: `libc.so.6`, `libfoo.so`.
#[cfg(any(target_os = "linux", test))]
fn is_shared_object(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so") || name.contains(".so.")
}

/// A shared object mapped into the process, as `/proc/self/maps` lists it.
#[cfg(any(target_os = "linux", test))]
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Mapped {
    path: String,
    inode: u64,
    deleted: bool,
}

/// The shared objects in a `/proc/PID/maps` text, once each, sorted by path.
/// A line is `address perms offset dev inode [pathname]`; a file-backed
/// pathname starts with `/` (the other fields hold none), and a file
/// unlinked since it was mapped ends with ` (deleted)`.
#[cfg(any(target_os = "linux", test))]
fn shared_objects(maps: &str) -> Vec<Mapped> {
    let mut found = std::collections::BTreeSet::new();
    for line in maps.lines() {
        let (Some(at), Some(inode)) = (
            line.find('/'),
            line.split_ascii_whitespace()
                .nth(4)
                .and_then(|i| i.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let name = &line[at..];
        let (path, deleted) = match name.strip_suffix(" (deleted)") {
            Some(p) => (p, true),
            None => (name, false),
        };
        if inode != 0 && is_shared_object(path) {
            found.insert(Mapped {
                path: path.to_string(),
                inode,
                deleted,
            });
        }
    }
    found.into_iter().collect()
}

#[cfg(target_os = "linux")]
mod os {
    use super::*;

    const MAPS: &str = "/proc/self/maps";

    pub fn binary_closure() -> BinaryClosure {
        let maps = match std::fs::read_to_string(MAPS) {
            Ok(text) => text,
            Err(e) => {
                return BinaryClosure::Unavailable {
                    reason: format!("cannot read {MAPS}: {e}"),
                };
            }
        };
        let libraries = shared_objects(&maps)
            .into_iter()
            .map(|m| SharedLibrary {
                content: if m.deleted {
                    LibraryContent::Unreadable {
                        reason: "deleted or replaced on disk since it was mapped".into(),
                    }
                } else {
                    content(Path::new(&m.path), Some(m.inode))
                },
                path: m.path,
            })
            .collect();
        BinaryClosure::Recorded {
            method: MAPS.into(),
            libraries,
        }
    }
}

#[cfg(target_os = "macos")]
mod os {
    use super::*;
    use std::ffi::{CStr, c_char};

    // dyld's image list (<mach-o/dyld.h>), in libSystem.
    unsafe extern "C" {
        fn _dyld_image_count() -> u32;
        fn _dyld_get_image_name(image_index: u32) -> *const c_char;
    }

    pub fn binary_closure() -> BinaryClosure {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.canonicalize().ok());
        // SAFETY: takes nothing and reads dyld's count of loaded images.
        let count = unsafe { _dyld_image_count() };
        let mut paths = std::collections::BTreeSet::new();
        for index in 0..count {
            // SAFETY: any index may be asked; one past the end (an image
            // unloaded meanwhile) gives NULL, handled below.
            let name = unsafe { _dyld_get_image_name(index) };
            if name.is_null() {
                continue;
            }
            // SAFETY: a non-null name is a NUL-terminated string dyld owns
            // while the image is loaded; it is copied at once.
            let path = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            let is_exe =
                exe.is_some() && Path::new(&path).canonicalize().ok().as_deref() == exe.as_deref();
            if !is_exe {
                paths.insert(path);
            }
        }
        let libraries = paths
            .into_iter()
            .map(|path| SharedLibrary {
                content: if Path::new(&path).is_file() {
                    content(Path::new(&path), None)
                } else {
                    LibraryContent::Unreadable {
                        reason: "not a file on disk: macOS serves system libraries from the dyld shared cache".into(),
                    }
                },
                path,
            })
            .collect();
        BinaryClosure::Recorded {
            method: "dyld: _dyld_image_count, _dyld_get_image_name".into(),
            libraries,
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod os {
    use super::*;

    pub fn binary_closure() -> BinaryClosure {
        BinaryClosure::Unavailable {
            reason: format!(
                "memqual lists loaded libraries on Linux and macOS only, not on {}",
                std::env::consts::OS
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_each_shared_object_once() {
        let maps = "\
55d0c0a00000-55d0c0a20000 r--p 00000000 08:01 1000 /work/target/debug/memqual
7f0000000000-7f0000028000 r--p 00000000 08:01 2001                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000028000-7f00001bd000 r-xp 00028000 08:01 2001                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000201000 rw-p 00000000 00:00 0 
7f0000300000-7f0000301000 r--p 00000000 08:01 2002                       /usr/lib/ld-linux-x86-64.so.2
7f0000400000-7f0000401000 r--p 00000000 08:01 2003                       /tmp/old libfoo.so (deleted)
7f0000500000-7f0000501000 r--p 00000000 08:01 2004                       /usr/share/locale/locale-archive
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
";
        let found = shared_objects(maps);
        let paths: Vec<&str> = found.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/tmp/old libfoo.so",
                "/usr/lib/ld-linux-x86-64.so.2",
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            ]
        );
        assert!(found[0].deleted);
        assert_eq!((found[2].inode, found[2].deleted), (2001, false));
        assert!(!is_shared_object("/work/libsomething.sock"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_libc_hashed() {
        let BinaryClosure::Recorded { libraries, .. } = binary_closure() else {
            panic!("Linux has /proc/self/maps");
        };
        let libc = libraries
            .iter()
            .find(|l| l.path.contains("libc.so"))
            .expect("libc is loaded");
        let bytes = std::fs::read(&libc.path).unwrap();
        assert_eq!(
            libc.content,
            LibraryContent::Hashed {
                bytes: bytes.len() as u64,
                sha256: format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            }
        );
    }
}
