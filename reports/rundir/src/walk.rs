//! Listing a run directory for sealing and verifying: every regular file
//! with its relative path and size, and apart from them everything that
//! must not be there (links, FIFOs, devices, sockets, names that are not
//! UTF-8, folders nested deeper than [`MAX_DEPTH`]). Linear in the number
//! of entries, however deep; nothing is followed.

use crate::{Kind, Rel, RunDir, RunDirError, fsio};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

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
    /// Links, FIFOs, devices, sockets, names that are not UTF-8 and folders
    /// nested deeper than [`MAX_DEPTH`]: listed, never entered or read.
    pub irregular: Vec<Irregular>,
    /// Every folder entered (below the one walked), sorted by path.
    pub dirs: Vec<Rel>,
}

/// The deepest folder a walk enters, counted from the run directory (the
/// run directory's own folders are at most 7 deep: a bisect probe's
/// `probes/<p>/arms/<id>/overhead/<block>/snapshots`). A folder deeper
/// than this is listed as irregular and never entered: no run writes one,
/// and an attacker's tree of thousands of nested folders costs nothing.
pub const MAX_DEPTH: usize = 16;

/// What [`walk`] calls a folder nested deeper than [`MAX_DEPTH`].
pub const TOO_DEEP: &str = "folder nested more than 16 levels deep, which no memqual run writes";

/// A folder still to list: its path and how to open it (its parent's open
/// descriptor, shared by its siblings, and its name), so that no folder is
/// ever resolved again from the run directory's root: the walk is linear
/// in the number of entries, however deep, and holds at most one open
/// folder per level.
struct Pending {
    rel: Rel,
    parent: Option<(Rc<OwnedFd>, String)>,
}

pub(crate) fn walk(run: &RunDir, top: &Rel) -> Result<Walk, RunDirError> {
    let mut out = Walk::default();
    let mut stack = vec![Pending {
        rel: top.clone(),
        parent: None,
    }];
    while let Some(Pending { rel: dir, parent }) = stack.pop() {
        let fd = match parent {
            None => run.dir_fd(&dir)?,
            Some((parent, name)) => fsio::open_dir(parent.as_fd(), &name)
                .map_err(|e| run.open_error(&dir, "open", e))?,
        };
        let entries = fsio::list(fd.as_fd()).map_err(|source| RunDirError::Io {
            op: "list",
            path: run.display(&dir),
            error: source,
        })?;
        let fd = Rc::new(fd);
        for entry in entries {
            if !entry.utf8 {
                out.irregular.push(Irregular {
                    path: if dir.is_root() {
                        entry.name.clone()
                    } else {
                        format!("{dir}/{}", entry.name)
                    },
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
                Kind::Dir if rel.components().len() > MAX_DEPTH => {
                    out.irregular.push(Irregular {
                        path: rel.to_string(),
                        what: TOO_DEEP.into(),
                    });
                }
                Kind::Dir => {
                    out.dirs.push(rel.clone());
                    stack.push(Pending {
                        rel,
                        parent: Some((Rc::clone(&fd), entry.name)),
                    });
                }
                other => out.irregular.push(Irregular {
                    path: rel.to_string(),
                    what: other.describe().to_string(),
                }),
            }
        }
    }
    // `String` orders by bytes; the key is built once per file.
    out.files.sort_by_cached_key(|f| f.rel.to_string());
    out.dirs.sort_by_cached_key(|d| d.to_string());
    out.irregular.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
