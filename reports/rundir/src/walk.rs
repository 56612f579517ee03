//! Listing a run directory for sealing and verifying: every regular file
//! with its relative path and size, and apart from them everything that
//! must not be there (links, FIFOs, devices, sockets, names that are not
//! UTF-8). Linear in the number of entries; nothing is followed.

use crate::{Kind, Rel, RunDir, RunDirError};

/// A regular file found by [`RunDir::walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkedFile {
    /// Its path relative to the run directory.
    pub rel: Rel,
    /// Its size in bytes, from `fstat` at the walk.
    pub size: u64,
}

/// Something in a run directory that is neither a regular file nor a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Irregular {
    /// The relative path (lossy where the name is not UTF-8).
    pub path: String,
    /// What it is: "symbolic link", "FIFO (named pipe)", …, or
    /// "a name that is not UTF-8".
    pub what: String,
}

/// The result of walking a folder of a run directory.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Regular files, sorted by path bytes.
    pub files: Vec<WalkedFile>,
    /// Links, FIFOs, devices, sockets and names that are not UTF-8: listed,
    /// never entered or read.
    pub irregular: Vec<Irregular>,
}

pub(crate) fn walk(run: &RunDir, top: &Rel) -> Result<Walk, RunDirError> {
    let mut out = Walk::default();
    let mut stack = vec![top.clone()];
    while let Some(dir) = stack.pop() {
        for entry in run.list(&dir)? {
            if !entry.utf8 {
                out.irregular.push(Irregular {
                    path: format!("{dir}/{}", entry.name),
                    what: "a name that is not UTF-8".into(),
                });
                continue;
            }
            let rel = dir.join(&entry.name);
            match entry.kind {
                Kind::File => out.files.push(WalkedFile {
                    rel,
                    size: entry.size,
                }),
                Kind::Dir => stack.push(rel),
                other => out.irregular.push(Irregular {
                    path: rel.to_string(),
                    what: other.describe().to_string(),
                }),
            }
        }
    }
    // `String` orders by bytes; the key is built once per file.
    out.files.sort_by_cached_key(|f| f.rel.to_string());
    out.irregular.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
