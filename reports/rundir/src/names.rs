//! Every file and folder name inside a run directory, in one place.
//!
//! Raw files are written by the harness while the run happens and sealed at
//! the source ([`crate::raw_seal`]); derived files are rebuilt from the raw
//! ones by `memqual report` at any time.

/// `protocol.toml`: the protocol exactly as run.
pub const PROTOCOL: &str = "protocol.toml";
/// `run.json`: version, protocol digest, platform, arm order.
pub const RUN: &str = "run.json";
/// `host.json`: host and runtime identity.
pub const HOST: &str = "host.json";
/// `admission.json`: quiet-host thresholds, observations, verdicts.
pub const ADMISSION: &str = "admission.json";
/// `soak-history.json`: the recent nights a soak read from its database.
pub const SOAK_HISTORY: &str = "soak-history.json";
/// `raw-seal.json`: the digests of every raw file, recorded as each arm ended.
pub const RAW_SEAL: &str = "raw-seal.json";

/// `receipt.json` (derived, sealed).
pub const RECEIPT: &str = "receipt.json";
/// `receipt.json.minisig`: an optional minisign signature of the receipt.
pub const SIGNATURE: &str = "receipt.json.minisig";
/// `manifest.json`: every other file with its size and SHA-256 (derived).
pub const MANIFEST: &str = "manifest.json";
/// `report.html` (derived).
pub const REPORT_HTML: &str = "report.html";
/// `summary.md` (derived).
pub const SUMMARY: &str = "summary.md";
/// `phases.csv` (derived).
pub const PHASES: &str = "phases.csv";
/// `trace.json` (derived).
pub const TRACE: &str = "trace.json";
/// `calibration.json` (derived; `memqual calibrate` runs only).
pub const CALIBRATION: &str = "calibration.json";

/// Per arm (derived, sealed): every phase marker's row when the arm has more
/// than the receipt keeps (a long soak); the receipt keeps the rows a
/// reviewer needs and this file's digest.
pub const PHASE_ROWS: &str = "phase-rows.jsonl";

/// `arms/`: one folder per arm, named by its id.
pub const ARMS: &str = "arms";
/// Per arm: the spec sent to the worker.
pub const SPEC: &str = "spec.json";
/// Per arm: the worker's `hello`.
pub const HELLO: &str = "hello.json";
/// Per arm: the whisper worker's runtime identity and topology.
pub const RUNTIME: &str = "runtime.json";
/// Per arm (a worker that asks Core ML): the encoder's compute plan, sent
/// after `teardown_done`.
pub const COREML_PLACEMENT: &str = "coreml-placement.json";
/// Per arm: how the arm ended.
pub const ARM: &str = "arm.json";
/// Per arm: one phase marker per line.
pub const MARKERS: &str = "markers.jsonl";
/// Per arm: one result per measured request.
pub const RESULTS: &str = "results.jsonl";
/// Per arm (soaks with a settle period): the worker's `settled` readings.
pub const SETTLED: &str = "settled.jsonl";
/// Per arm: the external series, one row per tick.
pub const SERIES: &str = "series.csv";
/// Per arm: the worker's `log` and `error` messages.
pub const WORKER_LOG: &str = "worker.log";
/// Per arm: the worker's own standard output.
pub const STDOUT: &str = "stdout.txt";
/// Per arm: the worker's own standard error.
pub const STDERR: &str = "stderr.txt";
/// Per arm: the worker's scratch folder, removed when the arm ends.
pub const SCRATCH: &str = "scratch";
/// Per arm: raw tool outputs, `<seq>-<phase>-<tool>.txt`.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// Per arm: one record per snapshot trigger.
pub const SNAPSHOTS: &str = "snapshots.jsonl";
/// Per arm: the snapshot and census settings.
pub const PROBES: &str = "probes.json";
/// Per arm: the process census.
pub const CENSUS: &str = "census.jsonl";
/// Per arm (soaks): memqual watching itself, one line per reading of the
/// orchestrator's resident memory and CPU time and the external sampler's
/// CPU time. Its last line comes after the arm was sealed, so the soak
/// seals it again before the receipt is assembled.
pub const HARNESS: &str = "harness.jsonl";
/// Per arm (soaks): the soak settings and what was collected.
pub const SOAK: &str = "soak.json";
/// Per arm (overhead gate): the ABBA block run, `overhead/`.
pub const OVERHEAD_DIR: &str = "overhead";
/// Per arm (overhead gate): the block-run summary.
pub const OVERHEAD: &str = "overhead.json";
/// In `overhead/`: when the sampler was switched on or off, after which
/// request.
pub const OVERHEAD_SWITCHES: &str = "switches.json";
/// Per arm (allocation attribution): the heap profiles, one per profiled
/// marker (`<seq>-<phase>.heap`, written by jemalloc in the worker), and
/// their symbols.
pub const HEAP_DIR: &str = "heap";
/// In `heap/`: every address of the profiles, resolved by the harness.
pub const HEAP_SYMBOLS: &str = "symbols.json";

/// A fleet directory (`memqual merge … --out DIR`): one report over several
/// sealed runs. It is created and claimed like a run directory (so it holds
/// an empty `arms/`), but is not one: it has no raw data.
pub mod fleet {
    /// The fleet report (JSON), sealing `manifest.json`.
    pub const REPORT: &str = "fleet.json";
    /// The fleet report in Markdown.
    pub const MARKDOWN: &str = "fleet.md";
    /// The fleet report as one offline HTML page.
    pub const HTML: &str = "fleet.html";
    /// `runs/<n>/receipt.json` (and its signature): each merged run's receipt.
    pub const RUNS: &str = "runs";
}

/// A bisect directory (`memqual bisect … --out DIR`): one run directory per
/// probe and the summary. Like a fleet directory it is claimed as a run
/// directory (an empty `arms/`) but is not one.
pub mod bisect {
    /// The bisect summary (JSON).
    pub const SUMMARY: &str = "bisect.json";
    /// The bisect summary as a Markdown table.
    pub const MARKDOWN: &str = "bisect.md";
    /// `probes/<position>-<param>-<value>/`: each probe's run directory.
    pub const PROBES: &str = "probes";
}

/// Files `memqual report` rebuilds; everything else in a run directory is raw.
pub const DERIVED: &[&str] = &[
    RECEIPT,
    MANIFEST,
    REPORT_HTML,
    SUMMARY,
    PHASES,
    TRACE,
    CALIBRATION,
];

/// Whether `rel` (a `/`-separated path inside the run directory) is a file
/// `memqual report` rebuilds, or the signature added after sealing.
pub fn is_derived(rel: &str) -> bool {
    DERIVED.contains(&rel) || rel == SIGNATURE || is_arm_derived(rel)
}

/// `arms/<id>/phase-rows.jsonl`: the one derived file inside an arm folder.
fn is_arm_derived(rel: &str) -> bool {
    let mut parts = rel.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(ARMS), Some(id), Some(PHASE_ROWS), None) if !id.is_empty()
    )
}

/// Every name this module defines, for the test that docs/run-directory.md's table lists them all.
pub const ALL: &[&str] = &[
    PROTOCOL,
    RUN,
    HOST,
    ADMISSION,
    SOAK_HISTORY,
    RAW_SEAL,
    RECEIPT,
    SIGNATURE,
    MANIFEST,
    REPORT_HTML,
    SUMMARY,
    PHASES,
    TRACE,
    CALIBRATION,
    PHASE_ROWS,
    ARMS,
    SPEC,
    HELLO,
    RUNTIME,
    COREML_PLACEMENT,
    ARM,
    MARKERS,
    RESULTS,
    SETTLED,
    SERIES,
    WORKER_LOG,
    STDOUT,
    STDERR,
    SCRATCH,
    SNAPSHOTS_DIR,
    SNAPSHOTS,
    PROBES,
    CENSUS,
    HARNESS,
    SOAK,
    OVERHEAD_DIR,
    OVERHEAD,
    OVERHEAD_SWITCHES,
    HEAP_DIR,
    HEAP_SYMBOLS,
];
