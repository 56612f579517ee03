//! `memqual ladder-chart --out FILE.html RUN_DIR…`: one page with a panel
//! per run, side by side, each drawing per arm the worker's memory and its
//! external encoder process's memory at `model_loaded`, `state_ready` and
//! the request peak, stacked ([`render::html::ladder_chart`]).
//!
//! Every run's receipt is read and its seal verified as `memqual compare`
//! reads them ([`review::read_receipt`]); a run whose seal does not hold is
//! named and nothing is written. The page is written atomically (a
//! temporary file beside it, renamed over it: [`ci_formats::write_file`]).

use crate::exit::{self, Failure, failed, harness, usage};
use crate::{ci_formats, review};
use anyhow::anyhow;
use render::html::ladder_chart::{LadderPanel, page};
use std::path::{Path, PathBuf};

/// The most problems named per run whose seal does not hold.
const PROBLEMS_SHOWN: usize = 10;

/// Refuse an `--out` that is a folder, or that exists without `--force`,
/// or whose folder does not exist: before any run is read.
fn check_out(out: &Path, force: bool) -> Result<(), Failure> {
    // Never through a link, never inside a run: `--force` replaces a file,
    // not what a link points at.
    crate::out_path::check_file(out, "--out")?;
    match std::fs::symlink_metadata(out) {
        Ok(_) if out.is_dir() => Err(usage(anyhow!(
            "--out {} is a folder: give the HTML file to write (e.g. {}/ladder.html)",
            out.display(),
            out.display()
        ))),
        Ok(_) if !force => Err(usage(anyhow!(
            "--out {} already exists; pass --force to replace it",
            out.display()
        ))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if parent.is_dir() {
                Ok(())
            } else {
                Err(usage(anyhow!(
                    "--out {}: the folder {} does not exist",
                    out.display(),
                    parent.display()
                )))
            }
        }
        Err(e) => Err(usage(anyhow!("--out {}: {e}", out.display()))),
    }
}

/// One run's panel: its receipt read (a missing or invalid `receipt.json`
/// is named, exit 2) and its seal verified (a broken seal is named, exit 1).
fn panel(dir: &Path) -> Result<LadderPanel, Failure> {
    let (receipt, seal) = review::read_receipt(dir)?;
    if !seal.holds() {
        let mut list: Vec<String> = seal
            .problems
            .iter()
            .take(PROBLEMS_SHOWN)
            .map(|p| format!("  {} {}: {}", p.kind.to_uppercase(), p.path, p.detail))
            .collect();
        if seal.problems.len() > PROBLEMS_SHOWN {
            list.push(format!(
                "  … and {} more",
                seal.problems.len() - PROBLEMS_SHOWN
            ));
        }
        return Err(failed(anyhow!(
            "the seal of {} does not hold, so its figures may not be the ones measured; \
             nothing was written (`memqual verify {}` names each problem):\n{}",
            dir.display(),
            dir.display(),
            list.join("\n")
        )));
    }
    Ok(LadderPanel::of_run(&receipt, &dir.display().to_string()))
}

/// `memqual ladder-chart --out FILE.html [--force] RUN_DIR…`.
pub fn command(run_dirs: &[PathBuf], out: &Path, force: bool) -> Result<u8, Failure> {
    if run_dirs.is_empty() {
        return Err(usage(anyhow!(
            "no run directory given: name one or more (each holds receipt.json)"
        )));
    }
    check_out(out, force)?;
    let panels = run_dirs
        .iter()
        .map(|dir| panel(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let html = page(&panels);
    ci_formats::write_file(out, html.as_bytes()).map_err(harness)?;
    let encoders = panels.iter().filter(|p| p.has_encoder()).count();
    outln!(
        "{}: {} run(s), {} arm(s); {} run(s) with an external encoder process",
        out.display(),
        panels.len(),
        panels.iter().map(|p| p.arms.len()).sum::<usize>(),
        encoders
    );
    Ok(exit::PASS)
}
