//! A deterministic SHA-256 of a directory tree, for the identity of a
//! compiled Core ML model (`.mlmodelc`), which is a directory, not a file.
//!
//! The hashed byte stream is, exactly:
//!
//! 1. the 16 bytes `memqual-tree-v1\n`;
//! 2. for every entry below the root (the root itself is not an entry), in
//!    ascending byte order of its relative path (components joined by `/`):
//!    - one kind byte: `d` directory, `f` regular file, `l` symbolic link;
//!    - the relative path's length as a little-endian u64, then its bytes;
//!    - for `f`: the content length as a little-endian u64, then the content;
//!    - for `l`: the link target's length as a little-endian u64, then the
//!      target as stored (links are never followed);
//!    - for `d`: nothing more (so empty directories count).
//!
//! Permissions, owners and times are not hashed: copying a model changes
//! them without changing the model. Any other kind of file (FIFO, socket,
//! device) is refused, as is a root that is not a directory.

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The identity of a directory tree (a compiled Core ML model): its digest and what it holds.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct TreeDigest {
    /// Lower-case hex SHA-256 of the stream described in the module docs.
    pub sha256: String,
    /// Regular files in the tree.
    pub files: u64,
    /// Directories below the root (the root itself not counted).
    pub directories: u64,
    /// Symbolic links in the tree (hashed as links, never followed).
    pub symlinks: u64,
    /// Sum of the regular files' sizes.
    pub file_bytes: u64,
}

/// Why a tree could not be digested.
#[derive(Debug, thiserror::Error)]
pub enum TreeDigestError {
    /// The root is not a directory (a file, or a symbolic link, which is not followed).
    #[error("{path}: not a directory (pass the .mlmodelc directory itself, not a link to it)")]
    NotADirectory {
        /// The root that was given.
        path: PathBuf,
    },
    /// Reading an entry failed.
    #[error("{path}: {source}")]
    Io {
        /// The entry that could not be read.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An entry is a FIFO, socket or device, which is refused.
    #[error("{path}: refusing to hash a special file (not a file, directory or symlink)")]
    SpecialFile {
        /// The special file.
        path: PathBuf,
    },
    /// A file's length changed while it was read.
    #[error("{path}: changed while it was being hashed; hash it again when nothing writes to it")]
    Changed {
        /// The file that changed.
        path: PathBuf,
    },
}

const MAGIC: &[u8; 16] = b"memqual-tree-v1\n";

enum Kind {
    Dir,
    File(u64),
    Link(Vec<u8>),
}

struct Item {
    rel: Vec<u8>,
    path: PathBuf,
    kind: Kind,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TreeDigestError + '_ {
    move |source| TreeDigestError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Digest the tree under `root` (see the module docs for the exact stream).
pub fn tree_digest(root: &Path) -> Result<TreeDigest, TreeDigestError> {
    let meta = fs::symlink_metadata(root).map_err(io(root))?;
    if !meta.is_dir() {
        return Err(TreeDigestError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let mut items = Vec::new();
    collect(root, &[], &mut items)?;
    items.sort_by(|a, b| a.rel.cmp(&b.rel));

    let mut hasher = Sha256::new();
    hasher.update(MAGIC);
    let mut out = TreeDigest {
        sha256: String::new(),
        files: 0,
        directories: 0,
        symlinks: 0,
        file_bytes: 0,
    };
    let len = |n: usize| (n as u64).to_le_bytes();
    for item in &items {
        let tag = match item.kind {
            Kind::Dir => b'd',
            Kind::File(_) => b'f',
            Kind::Link(_) => b'l',
        };
        hasher.update([tag]);
        hasher.update(len(item.rel.len()));
        hasher.update(&item.rel);
        match &item.kind {
            Kind::Dir => out.directories += 1,
            Kind::Link(target) => {
                hasher.update(len(target.len()));
                hasher.update(target);
                out.symlinks += 1;
            }
            Kind::File(size) => {
                hasher.update(size.to_le_bytes());
                hash_file(&item.path, *size, &mut hasher)?;
                out.files += 1;
                out.file_bytes += size;
            }
        }
    }
    out.sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(out)
}

fn collect(dir: &Path, prefix: &[u8], items: &mut Vec<Item>) -> Result<(), TreeDigestError> {
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let mut rel = prefix.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(entry.file_name().as_encoded_bytes());
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            let target = fs::read_link(&path).map_err(io(&path))?;
            Kind::Link(target.as_os_str().as_encoded_bytes().to_vec())
        } else if ft.is_dir() {
            collect(&path, &rel, items)?;
            Kind::Dir
        } else if ft.is_file() {
            Kind::File(meta.len())
        } else {
            return Err(TreeDigestError::SpecialFile { path });
        };
        items.push(Item { rel, path, kind });
    }
    Ok(())
}

/// Hash exactly `size` bytes of the file, failing if it is not that long now.
fn hash_file(path: &Path, size: u64, hasher: &mut Sha256) -> Result<(), TreeDigestError> {
    let mut file = fs::File::open(path).map_err(io(path))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        if seen > size {
            return Err(TreeDigestError::Changed {
                path: path.to_path_buf(),
            });
        }
        hasher.update(&buf[..n]);
    }
    if seen != size {
        return Err(TreeDigestError::Changed {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    type Step = Box<dyn Fn(&Path)>;

    /// A small tree shaped like a compiled model.
    fn model(root: &Path, reversed: bool) {
        let mut steps: Vec<Step> = vec![
            Box::new(|r| write(r, "model.mil", b"program(1.0)\n")),
            Box::new(|r| write(r, "weights/weight.bin", &[0u8, 1, 2, 3, 255])),
            Box::new(|r| write(r, "analytics/coremldata.bin", b"abc")),
            Box::new(|r| write(r, "coremldata.bin", b"")),
            Box::new(|r| fs::create_dir_all(r.join("empty")).unwrap()),
            Box::new(|r| symlink("weights/weight.bin", r.join("alias")).unwrap()),
        ];
        if reversed {
            steps.reverse();
        }
        for s in steps {
            s(root);
        }
    }

    fn digest_of(build: impl Fn(&Path)) -> TreeDigest {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        tree_digest(dir.path()).unwrap()
    }

    #[test]
    fn creation_order_does_not_matter() {
        let a = digest_of(|r| model(r, false));
        let b = digest_of(|r| model(r, true));
        assert_eq!(a, b);
        assert_eq!(
            (a.files, a.directories, a.symlinks, a.file_bytes),
            (4, 3, 1, 21)
        );
    }

    #[test]
    fn the_stream_is_the_documented_one() {
        // One file `a` holding `x`: magic, 'f', len 1, "a", len 1, "x".
        let got = digest_of(|r| write(r, "a", b"x"));
        let mut stream = MAGIC.to_vec();
        stream.push(b'f');
        stream.extend(1u64.to_le_bytes());
        stream.push(b'a');
        stream.extend(1u64.to_le_bytes());
        stream.push(b'x');
        let want: String = Sha256::digest(&stream)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got.sha256, want);
    }

    #[test]
    fn one_byte_or_one_name_changes_it() {
        let base = digest_of(|r| model(r, false)).sha256;
        let byte = digest_of(|r| {
            model(r, false);
            write(r, "weights/weight.bin", &[0u8, 1, 2, 3, 254]);
        });
        let renamed = digest_of(|r| {
            model(r, false);
            fs::rename(r.join("model.mil"), r.join("model.mi1")).unwrap();
        });
        let empty_dir_gone = digest_of(|r| {
            model(r, false);
            fs::remove_dir(r.join("empty")).unwrap();
        });
        assert_ne!(byte.sha256, base);
        assert_ne!(renamed.sha256, base);
        assert_ne!(empty_dir_gone.sha256, base);
    }

    #[test]
    fn links_are_hashed_as_links_not_followed() {
        let base = digest_of(|r| model(r, false));
        let retargeted = digest_of(|r| {
            model(r, false);
            fs::remove_file(r.join("alias")).unwrap();
            symlink("model.mil", r.join("alias")).unwrap();
        });
        assert_ne!(retargeted.sha256, base.sha256);
        // A link to a directory is not descended into.
        let dir_link = digest_of(|r| {
            model(r, false);
            symlink("weights", r.join("w")).unwrap();
        });
        assert_eq!(dir_link.files, base.files);
        assert_eq!(dir_link.symlinks, 2);
    }

    #[test]
    fn special_files_and_non_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        model(dir.path(), false);
        nix::unistd::mkfifo(&dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = tree_digest(dir.path()).unwrap_err();
        assert!(
            matches!(err, TreeDigestError::SpecialFile { ref path } if path.ends_with("pipe")),
            "{err}"
        );
        let file = dir.path().join("model.mil");
        assert!(matches!(
            tree_digest(&file),
            Err(TreeDigestError::NotADirectory { .. })
        ));
        let link = dir.path().join("alias");
        assert!(matches!(
            tree_digest(&link),
            Err(TreeDigestError::NotADirectory { .. })
        ));
        assert!(matches!(
            tree_digest(&dir.path().join("missing")),
            Err(TreeDigestError::Io { .. })
        ));
    }
}
