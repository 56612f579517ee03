//! The one rule for every path a command writes outside its own run
//! directory's insides (`--out` of `run`, `soak`, `calibrate`, `bisect`,
//! `merge` and `ladder-chart`; `--junit` and `--export-bmf`): checked
//! before anything runs or is read.
//!
//! - Never through a symbolic link: replacing the file a link points at
//!   (and its mode) is writing somewhere the user never named. A link to a
//!   device or FIFO (`/dev/stdout`) is a stream, written to and never
//!   replaced, so it stays allowed.
//! - Never inside a run directory (a folder holding `run.json` or
//!   `receipt.json`), a fleet directory (`fleet.json`) or a bisect
//!   directory (`bisect.json`): a new file there breaks its seal.

use crate::exit::{Failure, usage};
use anyhow::anyhow;
use std::path::{Path, PathBuf};

/// The files that make a folder a run, fleet or bisect directory.
const MARKS: &[&str] = &[
    run_dir::names::RUN,
    run_dir::names::RECEIPT,
    run_dir::names::fleet::REPORT,
    run_dir::names::bisect::SUMMARY,
];

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

/// The run (or fleet) directory `path` would be written inside, if any:
/// the nearest existing folder above it and every folder above that.
pub fn enclosing_run(path: &Path) -> Option<PathBuf> {
    let start = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."));
    let existing = start.ancestors().find(|p| {
        std::fs::symlink_metadata(if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        })
        .is_ok()
    })?;
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let real = std::fs::canonicalize(existing).ok()?;
    real.ancestors()
        .find(|dir| {
            MARKS
                .iter()
                .any(|m| std::fs::symlink_metadata(dir.join(m)).is_ok_and(|meta| meta.is_file()))
        })
        .map(Path::to_path_buf)
}

/// Refuse `path` (given as `flag`) when it lies inside a run or fleet
/// directory, whose seal a new file would break.
pub fn refuse_inside_run(path: &Path, flag: &str) -> Result<(), Failure> {
    match enclosing_run(path) {
        Some(run) => Err(usage(anyhow!(
            "{flag} {} is inside the run directory {}, whose seal it would break: choose a \
             folder outside every run; nothing was written",
            path.display(),
            run.display()
        ))),
        None => Ok(()),
    }
}

/// Both rules, for a file a command writes (a page, a CI file).
pub fn check_file(path: &Path, flag: &str) -> Result<(), Failure> {
    refuse_link(path, flag)?;
    refuse_inside_run(path, flag)
}
