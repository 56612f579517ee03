//! What `run`, `soak` and `calibrate` hand to CI besides the run directory:
//! `--junit FILE` (JUnit XML, one test case per gate check),
//! `--export-bmf FILE` (the metrics in Bencher Metric Format) and, when
//! `GITHUB_STEP_SUMMARY` names a file, `summary.md` appended to it.
//!
//! The files are written whatever the verdict (a failing run is when CI
//! needs them most), atomically: a temporary file in the same folder,
//! renamed over the path, so a reader never sees half a file. A device or
//! FIFO at the path (`/dev/null`, `/dev/stdout`) is written to, never
//! replaced (memqual often runs as root in CI).

use crate::exit::{Failure, harness};
use anyhow::{Context, anyhow};
use reports::Receipt;
use reports::calibration::CalibrationCheck;
use run_dir::{Rel, RunDir};
use std::io::Write;
use std::path::{Path, PathBuf};

/// GitHub Actions refuses a step summary over 1 MiB.
pub const STEP_SUMMARY_LIMIT: usize = 1024 * 1024;

/// The CI files one command was asked for.
#[derive(Debug, Clone, Default)]
pub struct CiOutputs {
    /// `--junit FILE`: JUnit XML, one test case per gate check.
    pub junit: Option<PathBuf>,
    /// `--export-bmf FILE`: the metrics in Bencher Metric Format.
    pub bmf: Option<PathBuf>,
}

/// Write `bytes` to `path`: a regular file (or none yet) is replaced
/// atomically; a device, FIFO or terminal (`/dev/null`, `/dev/stdout`,
/// also through a link) is written to, never replaced, and a FIFO nobody
/// reads is an error at once instead of a hang. A link to a regular file,
/// a folder or nothing is refused: memqual never writes through a link
/// (the commands refuse one before they run: [`crate::out_path`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::metadata(path) {
            Ok(t) if !t.is_file() && !t.is_dir() => write_special(path, bytes),
            _ => Err(anyhow!(
                "{} is a symbolic link: memqual never writes through a link, which would \
                 replace the file it points at; give the real path",
                path.display()
            )),
        },
        Ok(m) if m.is_dir() => Err(anyhow!("{} is a folder: give a file path", path.display())),
        Ok(m) if !m.is_file() => write_special(path, bytes),
        Ok(_) => write_atomic(path, bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_atomic(path, bytes),
        Err(e) => Err(anyhow!("cannot write {}: {e}", path.display())),
    }
}

/// A device, FIFO or socket: opened without blocking (a FIFO without a
/// reader fails with ENXIO), then written in blocking mode.
fn write_special(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ENXIO) => anyhow!(
                "cannot write {}: it is a FIFO (or socket) that nothing reads",
                path.display()
            ),
            _ => anyhow!("cannot write {}: {e}", path.display()),
        })?;
    fcntl(&file, FcntlArg::F_SETFL(OFlag::empty()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A temporary file beside `path`, renamed over it.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(anyhow!("{} names no file", path.display()));
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".memqual-")
        .tempfile_in(parent)
        .with_context(|| {
            format!(
                "cannot write {}: cannot create a file in {} (does the folder exist?)",
                path.display(),
                parent.display()
            )
        })?;
    // A temporary file is private (0600); the report is for every reader.
    use std::os::unix::fs::PermissionsExt;
    tmp.write_all(bytes)
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

/// Write what `outputs` asks for, from the sealed `receipt`; calibration
/// checks and a soak's regressions become test cases too.
pub fn emit(
    outputs: &CiOutputs,
    receipt: &Receipt,
    calibration: &[CalibrationCheck],
    soak_regressions: &[String],
) -> Result<(), Failure> {
    use render::export::{Bmf, Exporter, JUnit};
    if let Some(path) = &outputs.junit {
        let junit = JUnit {
            calibration,
            soak_regressions,
        };
        let xml = junit.export(receipt).map_err(harness)?;
        write_file(path, xml.as_bytes()).map_err(harness)?;
        note!("memqual: JUnit report written to {}", path.display());
    }
    if let Some(path) = &outputs.bmf {
        let text = Bmf.export(receipt).map_err(harness)?;
        write_file(path, text.as_bytes()).map_err(harness)?;
        note!(
            "memqual: metrics (Bencher Metric Format) written to {}",
            path.display()
        );
    }
    Ok(())
}

/// Append `markdown` to the file `GITHUB_STEP_SUMMARY` names, if it is set.
/// A summary that cannot be written is a warning, not a failed run: the run
/// directory holds the same text.
pub fn append_step_summary(markdown: &str) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return;
    };
    let path = PathBuf::from(path);
    if let Err(e) = append(&path, step_summary_text(markdown).as_bytes()) {
        note!(
            "memqual: warning: cannot append the summary to GITHUB_STEP_SUMMARY ({}): {}",
            path.display(),
            worker_contract::error_text(e.as_ref())
        );
    }
}

/// What is appended: the Markdown, or a note when GitHub would refuse it.
fn step_summary_text(markdown: &str) -> String {
    if markdown.len() + 1 > STEP_SUMMARY_LIMIT {
        format!(
            "memqual: the summary is {} bytes, over GitHub's {} byte step-summary limit; \
             read it in the run (or fleet) directory.\n",
            markdown.len(),
            STEP_SUMMARY_LIMIT
        )
    } else {
        format!("{markdown}\n")
    }
}

/// Append to a regular file (created if missing); a FIFO or device is
/// refused without blocking.
fn append(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(anyhow!("not a regular file"));
    }
    file.write_all(bytes)?;
    Ok(())
}

/// [`append_step_summary`] with the run's `summary.md`.
pub fn step_summary_of(run: &RunDir) {
    if std::env::var_os("GITHUB_STEP_SUMMARY").is_none() {
        return;
    }
    match run.read_text(&Rel::file(run_dir::names::SUMMARY)) {
        Ok(Some(text)) => append_step_summary(&text),
        Ok(None) => note!("memqual: warning: the run has no summary.md for GITHUB_STEP_SUMMARY"),
        Err(e) => note!("memqual: warning: cannot read summary.md for GITHUB_STEP_SUMMARY: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_over_githubs_limit_becomes_a_note() {
        assert_eq!(step_summary_text("# x"), "# x\n");
        let fits = "a".repeat(STEP_SUMMARY_LIMIT - 1);
        assert_eq!(step_summary_text(&fits).len(), STEP_SUMMARY_LIMIT);
        let big = "a".repeat(STEP_SUMMARY_LIMIT);
        let note = step_summary_text(&big);
        assert!(note.starts_with("memqual: the summary is 1048576 bytes, over GitHub's"));
    }
}
