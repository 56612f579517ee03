//! The model's tree, listed once before anything is read: only folders and
//! regular files are accepted (a symbolic link, FIFO, socket or device
//! anywhere is refused, never followed or opened), names must be UTF-8, and
//! the tree is bounded in entries and depth.

use crate::error::CoremlError;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Most entries a model tree may hold (a compiled model has a few dozen).
pub const MAX_ENTRIES: usize = 100_000;
/// Deepest folder nesting accepted below the root.
pub const MAX_DEPTH: usize = 32;

/// One regular file of the tree.
#[derive(Debug, Clone)]
pub struct TreeFile {
    /// Its path below the root, components joined by `/`.
    pub rel: String,
    /// Its size in bytes when listed.
    pub bytes: u64,
}

/// The listed tree.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// Regular files, in ascending order of `rel`.
    pub files: Vec<TreeFile>,
    /// Folders below the root.
    pub directories: u64,
}

impl Tree {
    /// Sum of the files' sizes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The file at `rel`, if the tree has it.
    pub fn file(&self, rel: &str) -> Option<&TreeFile> {
        self.files
            .binary_search_by(|f| f.rel.as_str().cmp(rel))
            .ok()
            .map(|i| &self.files[i])
    }
}

/// List the tree under `root`, which must be a directory.
pub fn walk(root: &Path) -> Result<Tree, CoremlError> {
    let meta = fs::metadata(root).map_err(|source| CoremlError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(CoremlError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let mut tree = Tree::default();
    let mut entries = 0usize;
    visit(root, "", 0, &mut tree, &mut entries)?;
    tree.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(tree)
}

fn visit(
    dir: &Path,
    prefix: &str,
    depth: usize,
    tree: &mut Tree,
    entries: &mut usize,
) -> Result<(), CoremlError> {
    if depth > MAX_DEPTH {
        return Err(CoremlError::TooLarge {
            path: dir.to_path_buf(),
            reason: format!("folders nested deeper than {MAX_DEPTH} levels"),
        });
    }
    let io = |path: &Path| {
        let path: PathBuf = path.to_path_buf();
        move |source| CoremlError::Io { path, source }
    };
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        *entries += 1;
        if *entries > MAX_ENTRIES {
            return Err(CoremlError::TooLarge {
                path: dir.to_path_buf(),
                reason: format!("more than {MAX_ENTRIES} files and folders"),
            });
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(CoremlError::BadName { path });
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        // Not following links: the entry itself.
        let ft = fs::symlink_metadata(&path).map_err(io(&path))?.file_type();
        if ft.is_symlink() {
            return Err(CoremlError::Symlink { path });
        } else if ft.is_dir() {
            tree.directories += 1;
            visit(&path, &rel, depth + 1, tree, entries)?;
        } else if ft.is_file() {
            let bytes = fs::symlink_metadata(&path).map_err(io(&path))?.len();
            tree.files.push(TreeFile { rel, bytes });
        } else {
            let kind = if ft.is_fifo() {
                "FIFO"
            } else if ft.is_socket() {
                "socket"
            } else if ft.is_char_device() {
                "character device"
            } else if ft.is_block_device() {
                "block device"
            } else {
                "special file"
            };
            return Err(CoremlError::Special { path, kind });
        }
    }
    Ok(())
}
