//! The one rule for every file a command writes outside its own run
//! directory (`ladder-chart --out`; `--junit` and `--export-bmf`): checked
//! before anything runs or is read.
//!
//! - Never through a symbolic link: replacing the file a link points at
//!   (and its mode) is writing somewhere the user never named. A link to a
//!   device or FIFO (`/dev/stdout`) is a stream, written to and never
//!   replaced, so it stays allowed.

use crate::exit::{Failure, usage};
use anyhow::anyhow;
use std::path::Path;

/// Refuse `path` (given as `flag`, e.g. `--junit`) when it is a symbolic
/// link to anything but a device, FIFO or socket.
pub fn refuse_link(path: &Path, flag: &str) -> Result<(), Failure> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_symlink() {
        return Ok(());
    }
    match std::fs::metadata(path) {
        Ok(target) if !target.is_file() && !target.is_dir() => Ok(()),
        _ => {
            let to = std::fs::read_link(path)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default();
            Err(usage(anyhow!(
                "{flag} {} is a symbolic link{to}: memqual never writes through a link, which \
                 would replace the file it points at. Give the real path, or remove the link; \
                 nothing was written",
                path.display()
            )))
        }
    }
}

/// The rules for a file a command writes (a page, a CI file).
pub fn check_file(path: &Path, flag: &str) -> Result<(), Failure> {
    refuse_link(path, flag)
}
