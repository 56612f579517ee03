//! The dispatcher: one run directory, arms strictly one at a time, progress
//! on stderr, the receipt at the end.

use crate::protocol::LoadedProtocol;
use crate::{admission, arm, host};
use anyhow::{Context, bail};
use reports::admission::AdmissionRecord;
use reports::record::{ArmOutcome, ArmStatus, RunInfo, files};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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

    pub fn executable(&self, name: &str) -> anyhow::Result<PathBuf> {
        let path = self.0.join(name);
        if !path.is_file() {
            bail!(
                "worker executable {name} not found in {}: build the workspace (`cargo build --release --workspace`) \
                 or point --worker-dir / MEMQUAL_WORKER_DIR at the folder that holds it",
                self.0.display()
            );
        }
        Ok(path)
    }
}

/// The default run directory: `runs/<UTC timestamp>-<protocol>`, made unique.
pub fn default_run_dir(protocol: &str) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = PathBuf::from("runs").join(format!("{stamp}-{protocol}"));
    let mut dir = base.clone();
    let mut n = 2;
    while dir.exists() {
        dir = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    dir
}

/// Create the run directory; refuse one that already holds files.
fn prepare_run_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "run directory {} already exists and is not empty; choose another --out so no earlier run is overwritten",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir.join(files::ARMS))
        .with_context(|| format!("cannot create run directory {}", dir.display()))
}

pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("serializing a record")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn run_info(protocol: &LoadedProtocol) -> RunInfo {
    let uname = nix::sys::utsname::uname().ok();
    RunInfo {
        memqual_version: env!("CARGO_PKG_VERSION").to_string(),
        protocol_name: protocol.name.clone(),
        protocol_path: protocol.path.display().to_string(),
        protocol_sha256: sha256_hex(protocol.text.as_bytes()),
        started_utc: chrono::Utc::now().to_rfc3339(),
        platform: sampler::PLATFORM.to_string(),
        page_size_bytes: sampler::page_size_bytes(),
        hostname: nix::unistd::gethostname()
            .ok()
            .map(|h| h.to_string_lossy().into_owned()),
        kernel: uname.map(|u| {
            format!(
                "{} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy()
            )
        }),
        arms: protocol.arms.iter().map(|a| a.id.clone()).collect(),
        controls: protocol
            .arms
            .iter()
            .filter_map(|a| Some((a.id.clone(), a.control.clone()?)))
            .collect(),
        params: protocol.params.clone(),
        host: Some(sampler::host_identity()),
        gates: protocol
            .arms
            .iter()
            .filter(|a| !a.gates.gates.is_empty())
            .map(|a| (a.id.clone(), a.gates.clone()))
            .collect(),
    }
}

/// The result of a whole run.
pub struct RunResult {
    pub dir: PathBuf,
    pub receipt: reports::Receipt,
    pub interrupted: bool,
    /// The host was refused (without `--force`) and the run stopped: why.
    pub refused: Option<Vec<String>>,
}

/// Observe the host before `before_arm` (`None`: the run), append the check
/// to the record and rewrite `admission.json`. Returns the refusal reasons
/// (empty when admitted).
fn admit(
    dir: &Path,
    record: &mut AdmissionRecord,
    before_arm: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let check = admission::check(before_arm, &record.thresholds);
    let when = before_arm.map_or("before the run".to_string(), |a| format!("before arm {a}"));
    if check.admitted {
        eprintln!(
            "memqual: host admitted {when} ({} ms window)",
            check.window_ms
        );
    } else {
        eprintln!(
            "memqual: host REFUSED {when}: {}{}",
            check.reasons.join("; "),
            if record.forced {
                " (--force: going on; the arm fails its validity gate)"
            } else {
                ""
            }
        );
    }
    let reasons = check.reasons.clone();
    record.checks.push(check);
    write_json(&dir.join(files::ADMISSION), record)?;
    Ok(reasons)
}

impl RunResult {
    pub fn all_completed(&self) -> bool {
        self.receipt.arms.len() == self.receipt.run.arms.len()
            && self
                .receipt
                .arms
                .iter()
                .all(|a| a.status == ArmStatus::Completed)
    }
}

/// Run every arm of `protocol` into `dir`, one at a time, each after a
/// quiet-host admission check. A refused host stops the run unless `force`.
pub fn run(
    protocol: &LoadedProtocol,
    dir: &Path,
    workers: &WorkerDir,
    interrupted: &AtomicBool,
    force: bool,
) -> anyhow::Result<RunResult> {
    // Resolve every worker before anything runs: a missing binary is a setup error.
    let executables = protocol
        .arms
        .iter()
        .map(|a| workers.executable(a.worker.executable_name()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    prepare_run_dir(dir)?;
    std::fs::write(dir.join(files::PROTOCOL), &protocol.text)
        .with_context(|| format!("cannot write {}", dir.join(files::PROTOCOL).display()))?;
    write_json(&dir.join(files::RUN), &run_info(protocol))?;
    write_json(&dir.join(files::HOST), &host::identity())?;
    eprintln!(
        "memqual: protocol {} ({}), run directory {}",
        protocol.name,
        protocol.description,
        dir.display()
    );

    let mut record = AdmissionRecord {
        thresholds: protocol.admission.clone(),
        forced: force,
        checks: Vec::new(),
    };
    let mut refused = None;
    let reasons = admit(dir, &mut record, None)?;
    if !reasons.is_empty() && !force {
        refused = Some(reasons);
    }
    let total = protocol.arms.len();
    for (i, (arm, exe)) in protocol.arms.iter().zip(&executables).enumerate() {
        if refused.is_some() {
            break;
        }
        if interrupted.load(Ordering::SeqCst) {
            eprintln!("memqual: interrupted: {} arm(s) not run", total - i);
            break;
        }
        let reasons = admit(dir, &mut record, Some(&arm.id))?;
        if !reasons.is_empty() && !force {
            refused = Some(reasons);
            break;
        }
        let arm_dir = dir.join(files::ARMS).join(&arm.id);
        std::fs::create_dir_all(&arm_dir)
            .with_context(|| format!("cannot create {}", arm_dir.display()))?;
        eprintln!(
            "memqual: [{}/{total}] arm {}: {} …",
            i + 1,
            arm.id,
            arm.description
        );
        let outcome: ArmOutcome = arm::execute(arm, exe, &arm_dir, interrupted)
            .with_context(|| format!("arm {} could not be started", arm.id))?;
        write_json(&arm_dir.join(files::ARM), &outcome)?;
        let secs = (outcome.ended_ns.saturating_sub(outcome.started_ns)) as f64 / 1e9;
        match outcome.status {
            ArmStatus::Completed => eprintln!(
                "memqual: [{}/{total}] arm {} completed in {secs:.1} s",
                i + 1,
                arm.id
            ),
            ArmStatus::NotRunnable => eprintln!(
                "memqual: [{}/{total}] arm {} NOT_RUNNABLE: {}",
                i + 1,
                arm.id,
                outcome.worker_errors.join("; ")
            ),
            ArmStatus::Failed => eprintln!(
                "memqual: [{}/{total}] arm {} FAILED after {secs:.1} s: {}",
                i + 1,
                arm.id,
                outcome.failure.join("; ")
            ),
        }
        if let Some(pairs) = crate::overhead::declared_pairs(arm)
            && outcome.status == ArmStatus::Completed
        {
            eprintln!(
                "memqual: [{}/{total}] arm {}: {pairs} overhead pair(s), sampled and unsampled, alternating …",
                i + 1,
                arm.id
            );
            let record = crate::overhead::run_twins(arm, exe, &arm_dir, pairs, interrupted)?;
            eprintln!(
                "memqual: [{}/{total}] arm {}: sampled / unsampled steady latency {}",
                i + 1,
                arm.id,
                record.ratio.map_or_else(
                    || format!("not measured: {}", record.problems.join("; ")),
                    |r| format!(
                        "{r:.4} (pairs {:.4}..{:.4})",
                        record.ratio_min.unwrap_or(r),
                        record.ratio_max.unwrap_or(r)
                    )
                )
            );
        }
    }
    let mut receipt = reports::assemble(dir)
        .with_context(|| format!("cannot assemble the receipt of {}", dir.display()))?;
    reports::render::write_all(dir, &receipt)
        .with_context(|| format!("cannot write the reports of {}", dir.display()))?;
    reports::seal::seal(dir, &mut receipt)
        .with_context(|| format!("cannot seal the run directory {}", dir.display()))?;
    Ok(RunResult {
        dir: dir.to_path_buf(),
        receipt,
        interrupted: interrupted.load(Ordering::SeqCst),
        refused,
    })
}
