//! The pipeline `run`, `calibrate` and `soak` share: load the protocol,
//! build the named models it needs, claim the run directory with Ctrl-C
//! handled, run, and turn the result into an exit code. Also `memqual run`
//! itself, which is only that pipeline plus its summary.

use crate::exit::{self, Failure, harness, usage};
use crate::{catalogs, ci_formats, fixtures, fleet, host, run, summary};
use anyhow::Context;
use protocol::whisper_arm;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The quickstart protocol, embedded so `memqual run` works from anywhere.
pub const QUICKSTART: &str = include_str!("../../protocols/quickstart.toml");

/// The options every measuring command shares (the command line's common
/// flags, without clap).
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The run directory to create (default: under `runs/`).
    pub out: Option<PathBuf>,
    /// Print a machine-readable summary instead of the table.
    pub json: bool,
    /// Where the worker executables are.
    pub worker_dir: Option<PathBuf>,
    /// Run on a host quiet-host admission refuses.
    pub force: bool,
    /// JUnit / Bencher files to write as well.
    pub ci: ci_formats::CiOutputs,
    /// This host's name in fleet reports.
    pub host_label: Option<String>,
}

impl SessionOptions {
    /// The options of one run: these session options plus whether to draw the
    /// per-arm progress display.
    pub fn run_options(&self, progress: bool) -> run::RunOptions {
        run::RunOptions {
            force: self.force,
            host_label: self.host_label.clone(),
            progress,
        }
    }
}

/// Set on the first SIGINT/SIGTERM; a second one exits at once.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Install the SIGINT/SIGTERM handler: the first signal sets `INTERRUPTED`
/// (the run stops its worker and writes the receipt), a second exits 130 at
/// once. Fails (exit 3) when the handler cannot be installed.
pub fn install_interrupt_handler() -> Result<(), Failure> {
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            // Second signal: the user insists. Workers die with us (parent-death signal).
            exit::now(exit::INTERRUPTED);
        }
        note!("memqual: interrupted: stopping the worker and writing the receipt (again to quit at once)");
    })
    .context("cannot install the Ctrl-C handler")
    .map_err(harness)
}

/// Parse a protocol file (or the embedded `(name, text)`) against the real catalogs.
pub fn load_protocol(
    path: Option<&Path>,
    embedded: (&str, &str),
    params: &[(String, String)],
) -> Result<protocol::LoadedProtocol, Failure> {
    // A name given twice would silently keep the last value.
    for (i, (name, value)) in params.iter().enumerate() {
        if let Some((_, first)) = params[..i].iter().find(|(n, _)| n == name) {
            return Err(usage(anyhow::anyhow!(
                "--param {} is given twice ({:?}, then {:?}): give each parameter once",
                name.escape_debug(),
                first,
                value
            )));
        }
    }
    // A protocol without whisper arms (calibration) never opens the speech
    // fixtures: it is parsed against an empty catalog first, and only a
    // protocol that has whisper arms is parsed again against the real one.
    let parse = |fixtures: &whisper_arm::FixtureCatalog| {
        let mut ctx = protocol::ParseContext {
            overrides: params.iter().cloned().collect(),
            base_dir: PathBuf::from("."),
            fixtures,
            models: &catalogs::ModelCache,
            physical_memory: host::physical_memory_bytes(),
        };
        match path {
            Some(p) => protocol::load(p, &mut ctx),
            None => protocol::parse(embedded.0, embedded.1, &ctx).map_err(Into::into),
        }
    };
    if let Ok(loaded) = parse(&whisper_arm::FixtureCatalog::default())
        && loaded.arms.iter().all(|a| a.model.is_none())
    {
        return Ok(loaded);
    }
    let fixtures = catalogs::fixture_catalog().map_err(harness)?;
    parse(&fixtures).map_err(usage)
}

/// Build every named model the protocol needs that is not cached yet.
pub fn ensure_models(loaded: &protocol::LoadedProtocol) -> Result<(), Failure> {
    let mut done: Vec<&str> = Vec::new();
    for arm in &loaded.arms {
        if let Some(whisper_arm::ModelRef::Named(name)) = &arm.model
            && !done.contains(&name.as_str())
        {
            let ensured = if name == crate::ct2_fixture::TINY_EN_CT2 {
                crate::fixtures::cache_dir()
                    .and_then(|c| crate::ct2_fixture::ensure(&c, fixtures::Progress::Stderr))
                    .map(drop)
            } else {
                fixtures::ensure_model(name, fixtures::Progress::Stderr).map(drop)
            };
            ensured
                .with_context(|| format!("arm {} needs model {name}", arm.id))
                .map_err(harness)?;
            done.push(name);
        }
    }
    Ok(())
}

/// Run every arm; a host that admission refused (without `--force`) is a
/// harness failure naming why.
pub fn run_protocol(
    loaded: &protocol::LoadedProtocol,
    opts: &SessionOptions,
) -> Result<run::RunResult, Failure> {
    let (executables, dir) = prepare_run(loaded, opts)?;
    let result = run::run(
        loaded,
        dir,
        &executables,
        &INTERRUPTED,
        &opts.run_options(true),
    )
    .map_err(harness)?;
    if let Some(reasons) = &result.refused {
        return Err(harness(anyhow::anyhow!(
            "the host is not quiet: {}. Nothing more was run; the observations are in {}. \
             Wait for the host to settle, or pass --force (arms measured on a refused host \
             fail their validity gate)",
            reasons.join("; "),
            result.dir.join(reports::record::files::ADMISSION).display()
        )));
    }
    Ok(result)
}

/// The workers and the new run directory (claimed), with Ctrl-C handled
/// from here on.
pub fn prepare_run(
    loaded: &protocol::LoadedProtocol,
    opts: &SessionOptions,
) -> Result<(Vec<PathBuf>, run_dir::RunDir), Failure> {
    let workers =
        crate::worker_dir::WorkerDir::resolve(opts.worker_dir.clone()).map_err(harness)?;
    let executables = run::executables(loaded, &workers).map_err(harness)?;
    let out = run::OutDir::resolve(opts.out.clone(), &loaded.name);
    check_outputs(&out, opts)?;
    let dir = out.create().map_err(crate::exit::creating_run_dir)?;
    install_interrupt_handler()?;
    Ok((executables, dir))
}

/// Every path a run writes besides its run directory's insides, checked
/// before the directory is created (the one rule of [`crate::out_path`]):
/// the run directory never inside another run, the CI files never through
/// a link nor inside a run.
pub fn check_outputs(out: &run::OutDir, opts: &SessionOptions) -> Result<(), Failure> {
    crate::out_path::refuse_inside_run(out.path(), "--out")?;
    if let Some(junit) = &opts.ci.junit {
        crate::out_path::check_file(junit, "--junit")?;
    }
    if let Some(bmf) = &opts.ci.bmf {
        crate::out_path::check_file(bmf, "--export-bmf")?;
    }
    Ok(())
}

/// The exit code of a run: interrupted beats everything else.
pub fn run_exit(result: &run::RunResult, passed: bool) -> u8 {
    if result.interrupted {
        exit::INTERRUPTED
    } else if passed {
        exit::PASS
    } else {
        exit::ARM_FAILED
    }
}

/// Whether a run passed: its gate verdict when any arm declares gates,
/// else whether every arm completed.
pub fn run_passed(result: &run::RunResult) -> bool {
    match &result.receipt.gates {
        Some(g) => g.verdict == reports::gates::Outcome::Pass,
        None => result.all_completed(),
    }
}

/// `memqual run`: the protocol (default: the embedded quickstart), or
/// shard `shard` of it, then the summary and the CI files. With
/// `bisect_exit` the exit code is `git bisect run`'s
/// ([`crate::probe_verdict`]): every failure to run becomes a skip (125),
/// so a commit that cannot be measured is never called good or bad. With
/// `attribution` every arm's heap is attributed (`--attribution`).
pub fn run_command(
    path: Option<&Path>,
    params: &[(String, String)],
    shard: Option<fleet::Shard>,
    opts: &SessionOptions,
    (bisect_exit, attribution): (bool, bool),
) -> Result<u8, Failure> {
    let ran = run_and_summarize(path, params, shard, opts, attribution);
    if !bisect_exit {
        return ran.map(|(code, _)| code);
    }
    match ran {
        Ok((code, _)) if code == exit::INTERRUPTED => Ok(code),
        Ok((_, judged)) => {
            if let crate::probe_verdict::Judged::Skip(why) = &judged {
                note!("memqual: --bisect-exit: this run cannot tell ({why}): exit 125, skip");
            }
            Ok(judged.exit_code())
        }
        Err(f) if f.code == exit::INTERRUPTED => Err(f),
        Err(f) => {
            note!(
                "memqual: error: {}",
                worker_contract::error_text(f.error.as_ref())
            );
            note!("memqual: --bisect-exit: nothing could be judged: exit 125, skip");
            Ok(crate::probe_verdict::SKIP)
        }
    }
}

fn run_and_summarize(
    path: Option<&Path>,
    params: &[(String, String)],
    shard: Option<fleet::Shard>,
    opts: &SessionOptions,
    attribution: bool,
) -> Result<(u8, crate::probe_verdict::Judged), Failure> {
    let mut loaded = load_protocol(
        path,
        ("<embedded protocols/quickstart.toml>", QUICKSTART),
        params,
    )?;
    if attribution {
        protocol::attribute_all(&mut loaded);
    }
    if let Some(shard) = shard {
        fleet::select(&mut loaded, shard).map_err(usage)?;
    }
    ensure_models(&loaded)?;
    let result = run_protocol(&loaded, opts)?;
    let all = result.all_completed();
    let summary = summary::run_summary(&result.dir, &result.receipt, all);
    if opts.json {
        crate::console::print_json(&summary)?;
    } else {
        out!("{}", summary::human(&summary));
    }
    ci_formats::emit(&opts.ci, &result.receipt, &[], &[])?;
    ci_formats::step_summary_of(&result.run);
    let passed = run_passed(&result);
    let judged = crate::probe_verdict::judge(&result.receipt, passed);
    Ok((run_exit(&result, passed), judged))
}
