//! Where the worker executables are: `--worker-dir`, `MEMQUAL_WORKER_DIR`,
//! or next to `memqual` itself. Below both the dispatcher and `version`.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// The whisper.cpp worker linked against memqual's patch set.
const PATCHED_WORKER: &str = "memqual-whisper-patched";

/// Where worker executables are found.
#[derive(Debug, Clone)]
pub struct WorkerDir(pub PathBuf);

impl WorkerDir {
    /// `--worker-dir`, else `MEMQUAL_WORKER_DIR`, else the directory of `memqual` itself.
    pub fn resolve(flag: Option<PathBuf>) -> anyhow::Result<Self> {
        if let Some(dir) =
            flag.or_else(|| std::env::var_os("MEMQUAL_WORKER_DIR").map(PathBuf::from))
        {
            return Ok(WorkerDir(dir));
        }
        let exe = std::env::current_exe().context("cannot find memqual's own executable")?;
        Ok(WorkerDir(
            exe.parent().map(Path::to_path_buf).unwrap_or_default(),
        ))
    }

    /// The path of worker `name` in this directory. Fails, saying how to build
    /// or point at it, when no regular file is there.
    pub fn executable(&self, name: &str) -> anyhow::Result<PathBuf> {
        let mut path = self.0.join(name);
        if !path.is_file()
            && name == PATCHED_WORKER
            && let Some(beside) = self.patched_build()
        {
            path = beside;
        }
        if !path.is_file() {
            // The CTranslate2 worker is its own package, left out of the quickstart's build.
            let build = match name {
                "memqual-ct2" => "cargo build --release -p runners-ct2",
                PATCHED_WORKER => "cd runners/patched && cargo build --release",
                _ => "cargo build --release --workspace --exclude runners-ct2",
            };
            bail!(
                "worker executable {name} not found in {}: build it (`{build}`) \
                 or point --worker-dir / MEMQUAL_WORKER_DIR at the folder that holds it",
                self.0.display()
            );
        }
        Ok(path)
    }

    /// The patched worker builds in its own workspace, into
    /// `target/patched/<profile>/`: from `target/<profile>/` that is
    /// `../patched/<profile>/`.
    fn patched_build(&self) -> Option<PathBuf> {
        let profile = self.0.file_name()?;
        let target = self.0.parent()?;
        let candidate = target.join("patched").join(profile).join(PATCHED_WORKER);
        candidate.is_file().then_some(candidate)
    }
}
