//! The dispatcher: one run directory, arms strictly one at a time, progress
//! on stderr, the receipt at the end.

use crate::worker_dir::WorkerDir;
use crate::{admission, host};
use anyhow::Context;
use arm_runner::arm;
use protocol::LoadedProtocol;
use reports::admission::AdmissionRecord;
use reports::record::{ArmOutcome, ArmStatus, RunInfo, files};
use reports::series::SeriesPoints;
use run_dir::{Rel, RunDir};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a run's directory goes.
#[derive(Debug, Clone)]
pub enum OutDir {
    /// `--out DIR`: exactly this directory (it must not exist, or be empty).
    Exact(PathBuf),
    /// The default `runs/<UTC time>-<protocol>`, with `-2`, `-3`, … when taken.
    Default(PathBuf),
}

impl OutDir {
    /// `--out`, or the default under `runs/` for `protocol`.
    pub fn resolve(out: Option<PathBuf>, protocol: &str) -> OutDir {
        match out {
            Some(dir) => OutDir::Exact(dir),
            None => {
                let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
                OutDir::Default(PathBuf::from("runs").join(format!("{stamp}-{protocol}")))
            }
        }
    }

    /// The path asked for (the default's base, before `-2`, `-3`, …).
    pub fn path(&self) -> &std::path::Path {
        match self {
            OutDir::Exact(dir) | OutDir::Default(dir) => dir,
        }
    }

    /// Create and claim the directory (atomically: of two runs into one
    /// directory, one is refused).
    pub fn create(&self) -> Result<RunDir, run_dir::RunDirError> {
        match self {
            OutDir::Exact(dir) => RunDir::create(dir),
            OutDir::Default(base) => RunDir::create_unique(base),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn run_info(protocol: &LoadedProtocol) -> RunInfo {
    let uname = nix::sys::utsname::uname().ok();
    RunInfo {
        memqual_version: env!("CARGO_PKG_VERSION").to_string(),
        memqual_commit: Some(crate::version::COMMIT.to_string()),
        shard: protocol.shard.clone(),
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

/// How a run goes, beyond its protocol.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run on even when quiet-host admission refuses the host.
    pub force: bool,
    /// The host's name in fleet reports (`--host-label`), kept in `host.json`.
    pub host_label: Option<String>,
    /// Show each arm's progress on stderr (off for soaks, which draw their own).
    pub progress: bool,
}

/// The result of a whole run.
pub struct RunResult {
    /// The run directory, still held (locked) by this process.
    pub run: RunDir,
    /// The run directory's path.
    pub dir: PathBuf,
    /// The sealed receipt assembled from the run directory.
    pub receipt: reports::Receipt,
    /// True when a SIGINT/SIGTERM stopped the run early (arms may be missing).
    pub interrupted: bool,
    /// The host was refused (without `--force`) and the run stopped: why.
    pub refused: Option<Vec<String>>,
}

/// Observe the host before `before_arm` (`None`: the run), append the check
/// to the record and rewrite `admission.json` (sealed as it is written).
/// Returns the refusal reasons (empty when admitted).
fn admit(
    run: &RunDir,
    record: &mut AdmissionRecord,
    before_arm: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let check = admission::check(before_arm, &record.thresholds);
    let when = before_arm.map_or("before the run".to_string(), |a| format!("before arm {a}"));
    if check.admitted {
        note!(
            "memqual: host admitted {when} ({} ms window)",
            check.window_ms
        );
    } else {
        note!(
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
    let rel = Rel::file(files::ADMISSION);
    run.write_json(&rel, record)?;
    run.seal_raw(&[rel])?;
    Ok(reasons)
}

impl RunResult {
    /// True when every arm of the protocol ran and completed.
    pub fn all_completed(&self) -> bool {
        self.receipt.arms.len() == self.receipt.run.arms.len()
            && self
                .receipt
                .arms
                .iter()
                .all(|a| a.status == ArmStatus::Completed)
    }
}

/// Assemble the receipt from the run directory, write the derived reports
/// and seal it.
pub fn finish(run: &RunDir) -> anyhow::Result<reports::Receipt> {
    publish(run, assemble(run)?, |_, _| Ok(()))
}

/// The receipt, assembled from the run directory alone, with each arm's
/// series as the reports draw it (read in the same pass).
pub fn assemble(run: &RunDir) -> anyhow::Result<(reports::Receipt, SeriesPoints)> {
    reports::assemble_with_series(run)
        .with_context(|| format!("cannot assemble the receipt of {}", run.path().display()))
}

/// Write the derived reports of the assembled receipt (and `extra` ones),
/// then seal.
pub fn publish(
    run: &RunDir,
    (mut receipt, series): (reports::Receipt, SeriesPoints),
    extra: impl FnOnce(&RunDir, &reports::Receipt) -> Result<(), run_dir::RunDirError>,
) -> anyhow::Result<reports::Receipt> {
    let dir = run.path().display();
    render::export::write_all_with(run, &receipt, &series)
        .with_context(|| format!("cannot write the reports of {dir}"))?;
    extra(run, &receipt).with_context(|| format!("cannot write the reports of {dir}"))?;
    reports::seal::seal(run, &mut receipt)
        .with_context(|| format!("cannot seal the run directory {dir}"))?;
    Ok(receipt)
}

/// Every arm's worker executable, resolved before anything runs: a missing
/// binary is a setup error, found before a run directory exists.
pub fn executables(protocol: &LoadedProtocol, workers: &WorkerDir) -> anyhow::Result<Vec<PathBuf>> {
    protocol
        .arms
        .iter()
        .map(|a| workers.executable(a.worker.executable_name()))
        .collect()
}

/// Run every arm of `protocol` into the new run directory `run` with the
/// workers `executables` (one per arm), one at a time, each after a
/// quiet-host admission check. A refused host stops the run unless
/// `opts.force`. A failure to write the run directory (a full disk) stops
/// the run; what was written stays readable for `memqual report`.
pub fn run(
    protocol: &LoadedProtocol,
    run: RunDir,
    executables: &[PathBuf],
    interrupted: &AtomicBool,
    opts: &RunOptions,
) -> anyhow::Result<RunResult> {
    run_with(protocol, run, executables, interrupted, opts, |_| Ok(()))
}

/// [`run`], with `after_arms` called once the arms are over, before the
/// receipt is assembled: the soak stops its watcher there, so that what
/// the watcher wrote is whole and sealed when the receipt reads it.
pub(crate) fn run_with(
    protocol: &LoadedProtocol,
    run: RunDir,
    executables: &[PathBuf],
    interrupted: &AtomicBool,
    opts: &RunOptions,
    after_arms: impl FnOnce(&RunDir) -> anyhow::Result<()>,
) -> anyhow::Result<RunResult> {
    let dir = run.path().to_path_buf();
    let stopped = || {
        format!(
            "the run stopped; everything written so far is in {}: once the cause is fixed \
             (free space, say), `memqual report {}` builds a receipt marked incomplete",
            dir.display(),
            dir.display()
        )
    };
    let refused = run_arms(protocol, &run, executables, interrupted, opts).with_context(stopped)?;
    after_arms(&run).with_context(stopped)?;
    let receipt = finish(&run).with_context(stopped)?;
    Ok(RunResult {
        run,
        dir,
        receipt,
        interrupted: interrupted.load(Ordering::SeqCst),
        refused,
    })
}

/// Everything before the receipt: the run's records, admission, each arm.
fn run_arms(
    protocol: &LoadedProtocol,
    run: &RunDir,
    executables: &[PathBuf],
    interrupted: &AtomicBool,
    opts: &RunOptions,
) -> anyhow::Result<Option<Vec<String>>> {
    let force = opts.force;
    let started = [
        Rel::file(files::PROTOCOL),
        Rel::file(files::RUN),
        Rel::file(files::HOST),
    ];
    run.write_bytes(&started[0], protocol.text.as_bytes())?;
    run.write_json(&started[1], &run_info(protocol))?;
    run.write_json(&started[2], &host::identity(opts.host_label.as_deref()))?;
    run.seal_raw(&started)?;
    note!(
        "memqual: protocol {} ({}), run directory {}",
        protocol.name,
        protocol.description,
        run.path().display()
    );

    let mut record = AdmissionRecord {
        thresholds: protocol.admission.clone(),
        forced: force,
        checks: Vec::new(),
    };
    let reasons = admit(run, &mut record, None)?;
    if !reasons.is_empty() && !force {
        return Ok(Some(reasons));
    }
    let total = protocol.arms.len();
    for (i, (arm, exe)) in protocol.arms.iter().zip(executables).enumerate() {
        if interrupted.load(Ordering::SeqCst) {
            note!("memqual: interrupted: {} arm(s) not run", total - i);
            break;
        }
        let reasons = admit(run, &mut record, Some(&arm.id))?;
        if !reasons.is_empty() && !force {
            return Ok(Some(reasons));
        }
        let arm_dir = run.arm(&arm.id)?;
        run.create_dir(&arm_dir)?;
        if let Some(settings) = &arm.soak {
            run.write_json(&arm_dir.join(files::SOAK), settings)?;
        }
        note!(
            "memqual: [{}/{total}] arm {}: {} …",
            i + 1,
            arm.id,
            arm.description
        );
        let watcher = opts
            .progress
            .then(|| crate::progress::ArmProgress::start(run, &arm_dir, arm, (i + 1, total)));
        let executed = arm::execute(arm, exe, run, &arm_dir, interrupted);
        if let Some(w) = watcher {
            w.finish();
        }
        let outcome: ArmOutcome =
            executed.with_context(|| format!("arm {} could not be started", arm.id))?;
        run.write_json(&arm_dir.join(files::ARM), &outcome)?;
        report_outcome(i + 1, total, &outcome);
        if let Some(gate) = crate::overhead::declared(arm)
            && outcome.status == ArmStatus::Completed
        {
            note!(
                "memqual: [{}/{total}] arm {}: overhead block run, {} ABBA quads of {} requests, {} on and off …",
                i + 1,
                arm.id,
                gate.quads,
                gate.block_requests,
                gate.toggles.label()
            );
            let place = opts.progress.then_some((i + 1, total));
            let record =
                crate::overhead::run_blocks(arm, gate, exe, run, &arm_dir, interrupted, place)?;
            note!(
                "memqual: [{}/{total}] arm {}: latency with / without {} {}",
                i + 1,
                arm.id,
                gate.toggles.label(),
                match (record.ratio, record.ratio_lower, record.ratio_upper) {
                    (Some(r), Some(lo), Some(hi)) =>
                        format!("{r:.4} (95 % interval {lo:.4}..{hi:.4})"),
                    _ => format!("not measured: {}", record.problems.join("; ")),
                }
            );
        }
        // Sealed at the source: from here on `report` refuses any change.
        run.seal_raw(&[arm_dir])?;
    }
    Ok(None)
}

fn report_outcome(n: usize, total: usize, outcome: &ArmOutcome) {
    let secs = (outcome.ended_ns.saturating_sub(outcome.started_ns)) as f64 / 1e9;
    match outcome.status {
        ArmStatus::Completed => note!(
            "memqual: [{n}/{total}] arm {} completed in {secs:.1} s",
            outcome.id
        ),
        ArmStatus::NotRunnable => note!(
            "memqual: [{n}/{total}] arm {} NOT_RUNNABLE: {}",
            outcome.id,
            outcome.worker_errors.join("; ")
        ),
        ArmStatus::Failed => note!(
            "memqual: [{n}/{total}] arm {} FAILED after {secs:.1} s: {}",
            outcome.id,
            outcome.failure.join("; ")
        ),
    }
}
