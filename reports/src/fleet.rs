//! A fleet report: several sealed runs of one protocol, from several hosts
//! (or shards of one), merged into one table (`memqual merge`).
//!
//! - Hosts are keyed by their label (`--host-label`, recorded in
//!   `host.json`), else their hostname ([`crate::host::HostIdentity::key`]).
//! - One cell per host × arm: the arm's status, verdict, failed gates and
//!   key metrics ([`crate::compare::KEY_METRICS`]). When several runs of a
//!   host measured the same arm, the run that owns the arm (not the one that
//!   ran it as a shard's companion control) is shown, else the first given;
//!   the others are kept in `cells` and named in `notes`.
//! - The spread of each key metric of each arm across hosts (min, median,
//!   max, and which host had the extremes).
//! - The hosts and arms that fail: a gated arm whose verdict is not PASS, an
//!   ungated arm that did not complete.
//! - The fleet verdict: PASS only if every run's own verdict is (a run
//!   without gates: every arm completed).
//!
//! The directory holds `fleet.json` (this report), `fleet.md`,
//! `fleet.html`, each merged run's receipt (`runs/<n>/receipt.json`) and
//! `manifest.json`; `fleet.json` is canonical JSON (RFC 8785) and seals the
//! manifest the way a receipt does ([`seal`], [`verify`]).

use crate::compare::KEY_METRICS;
use crate::gates::Outcome;
use crate::receipt::{ArmReceipt, Receipt};
use crate::record::{ArmStatus, ShardInfo, files};
use crate::seal::{self, Problems, SealError, Verification, canonical};
use run_dir::digest::sha256_hex;
use run_dir::names::fleet as names;
use run_dir::{Rel, RunDir, limits};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the fleet report format, `major.minor`.
pub const FLEET_FORMAT_VERSION: &str = "1.0";

/// One run given to the merge, its seal already verified.
#[derive(Debug, Clone)]
pub struct FleetInput {
    /// The run directory as given on the command line.
    pub dir: String,
    /// The run's receipt (`receipt.json`), with its seal.
    pub receipt: Receipt,
    /// The key id of a signature that was checked with `--pubkey`.
    pub signature_key_id: Option<String>,
}

/// A merged run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRun {
    /// 1-based, in the order given; its receipt is `runs/<index>/receipt.json`.
    pub index: usize,
    /// The run directory as given on the command line.
    pub dir: String,
    /// The host key: the host's label (`--host-label`), else its hostname, else `unknown host`.
    pub host: String,
    /// The host's name from `host.json`; `None` when the run has no identity or the OS reports none.
    pub hostname: Option<String>,
    /// The hardware model from `host.json`, when readable.
    pub hardware_model: Option<String>,
    /// OS name and version from `host.json`, joined by a space, when readable.
    pub os: Option<String>,
    /// The share of the protocol this run held (`--shard I/N`); `None` for a whole run.
    pub shard: Option<ShardInfo>,
    /// When the run started: UTC, RFC 3339 (from `run.json`).
    pub started_utc: String,
    /// The memqual version that made the run.
    pub memqual_version: String,
    /// The git commit memqual was built from, when known.
    pub memqual_commit: Option<String>,
    /// The run's `receipt_sha256` from its seal.
    pub receipt_sha256: String,
    /// The run's `manifest_sha256` from its seal.
    pub manifest_sha256: String,
    /// The key id of the run's signature when it was checked with `--pubkey`; `None` otherwise.
    pub signature_key_id: Option<String>,
    /// The run's own verdict (`None`: no gates).
    pub verdict: Option<Outcome>,
    /// Ids of the arms the run measured, in run order.
    pub arms: Vec<String>,
}

/// One arm as one run measured it on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The host key (see `FleetRun::host`).
    pub host: String,
    /// The arm id.
    pub arm: String,
    /// [`FleetRun::index`].
    pub run: usize,
    /// Run there only as a control an owned arm of the shard needed.
    pub companion: bool,
    /// The cell the table shows for this host × arm.
    pub shown: bool,
    /// How the arm ended on this host.
    pub status: ArmStatus,
    /// `None`: the arm declares no gates.
    pub verdict: Option<Outcome>,
    /// Gates that did not pass, with the first check that did not.
    pub failed_gates: Vec<String>,
    /// Key metric → value (bytes or ns, see [`KEY_METRICS`]).
    pub metrics: BTreeMap<String, f64>,
    /// True when this cell fails: a gated arm whose verdict is not PASS, or an ungated arm that did not complete.
    pub fails: bool,
}

/// One key metric of one arm across hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The arm id.
    pub arm: String,
    /// The key metric's name (as in `memqual compare --json`).
    pub metric: String,
    /// The metric's unit: `bytes` or `ns`.
    pub unit: String,
    /// Hosts that measured it.
    pub hosts: usize,
    /// Smallest value across hosts.
    pub min: f64,
    /// Median across hosts (the mean of the middle two for an even count).
    pub median: f64,
    /// Largest value across hosts.
    pub max: f64,
    /// The host that had the smallest value (the first in sort order on a tie).
    pub min_host: String,
    /// The host that had the largest value.
    pub max_host: String,
}

/// A host with the arms that fail on it, or an arm with the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failing {
    /// The host key (in `failing_hosts`) or the arm id (in `failing_arms`).
    pub name: String,
    /// The arms that fail on that host, or the hosts on which that arm fails.
    pub on: Vec<String>,
}

/// `fleet.json`'s seal: the manifest's digest and this report's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSeal {
    /// `sha256`.
    pub algorithm: String,
    /// `RFC 8785`: how `manifest.json` and the report are canonicalized.
    pub canonicalization: String,
    /// SHA-256 of the bytes of the fleet directory's `manifest.json`.
    pub manifest_sha256: String,
    /// SHA-256 of the canonical report with this field empty.
    pub fleet_sha256: String,
}

/// `fleet.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// `major.minor`: the `FLEET_FORMAT_VERSION` it was written with.
    pub format_version: String,
    /// When the merge was made: UTC, RFC 3339.
    pub created_utc: String,
    /// The memqual that merged.
    pub memqual_version: String,
    /// The protocol's `name`, as the first run recorded it.
    pub protocol_name: String,
    /// SHA-256 of the protocol text; every merged run has the same.
    pub protocol_sha256: String,
    /// The merged runs, in the order given.
    pub runs: Vec<FleetRun>,
    /// Host keys, in the order first seen.
    pub hosts: Vec<String>,
    /// Arm ids, in protocol order.
    pub arms: Vec<String>,
    /// Every host × arm measurement; several per pair when several runs measured it (see `Cell::shown`).
    pub cells: Vec<Cell>,
    /// Per arm and key metric, the spread across hosts of the shown cells.
    pub spread: Vec<Spread>,
    /// Hosts with at least one failing shown cell, each with those arms.
    pub failing_hosts: Vec<Failing>,
    /// Arms failing on at least one host, each with those hosts.
    pub failing_arms: Vec<Failing>,
    /// Arms of the protocol no run measured, duplicates, mixed versions.
    pub notes: Vec<String>,
    /// The fleet verdict: PASS only if every run passed (a run without gates: every arm completed).
    pub verdict: Outcome,
    /// Digests of the manifest and of this report; `None` until sealed.
    pub seal: Option<FleetSeal>,
}

impl FleetReport {
    /// The cell the table shows for `host` × `arm`.
    pub fn cell(&self, host: &str, arm: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.shown && c.host == host && c.arm == arm)
    }
}

/// Why runs cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No run was given.
    #[error("no run to merge")]
    Empty,
    /// Runs of different protocols (or the same one, changed): the message
    /// names both runs, protocols and digests.
    #[error("{0}: a fleet report compares one protocol across hosts")]
    MixedProtocols(String),
    /// A run has no seal in its receipt; `memqual report` seals it.
    #[error("{dir} is not sealed: run `memqual report {dir}` first")]
    Unsealed {
        /// The run directory as given.
        dir: String,
    },
}

fn host_of(r: &Receipt) -> String {
    match &r.identity {
        Some(i) => i.host.key(),
        None => r
            .run
            .hostname
            .clone()
            .unwrap_or_else(|| "unknown host".to_string()),
    }
}

fn run_passed(r: &Receipt) -> bool {
    match &r.gates {
        Some(g) => g.verdict == Outcome::Pass,
        None => {
            r.arms.len() == r.run.arms.len()
                && r.arms.iter().all(|a| a.status == ArmStatus::Completed)
        }
    }
}

fn cell(host: &str, run: usize, r: &Receipt, a: &ArmReceipt) -> Cell {
    let verdict = r
        .gates
        .as_ref()
        .and_then(|g| g.arms.iter().find(|v| v.arm == a.id));
    let failed_gates = verdict.map_or_else(Vec::new, |v| {
        v.gates
            .iter()
            .filter(|g| g.outcome != Outcome::Pass)
            .map(|g| {
                let first = g.checks.iter().find(|c| c.outcome != Outcome::Pass);
                format!(
                    "{} {}{}",
                    g.kind,
                    g.outcome.as_str(),
                    first.map_or(String::new(), |c| format!(" ({}: {})", c.name, c.note))
                )
            })
            .collect()
    });
    let verdict = verdict.map(|v| v.verdict);
    Cell {
        host: host.to_string(),
        arm: a.id.clone(),
        run,
        companion: r
            .run
            .shard
            .as_ref()
            .is_some_and(|s| s.companions.contains(&a.id)),
        shown: false,
        status: a.status,
        verdict,
        failed_gates,
        metrics: KEY_METRICS
            .iter()
            .filter_map(|m| Some((m.name.to_string(), m.of(a)?)))
            .collect(),
        fails: match verdict {
            Some(v) => v != Outcome::Pass,
            None => a.status != ArmStatus::Completed,
        },
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Push `item` unless present (keeps first-seen order).
fn push_new(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

/// Merge `inputs` (seals already verified) into one report, unsealed.
pub fn build(inputs: &[FleetInput], created_utc: &str) -> Result<FleetReport, MergeError> {
    let first = inputs.first().ok_or(MergeError::Empty)?;
    let mut notes = Vec::new();
    let mut runs = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    let mut arms: Vec<String> = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let r = &input.receipt;
        if r.run.protocol_sha256 != first.receipt.run.protocol_sha256 {
            return Err(MergeError::MixedProtocols(format!(
                "{} ran protocol `{}` with digest {}, but {} ran `{}` with {}",
                input.dir,
                r.run.protocol_name,
                r.run.protocol_sha256,
                first.dir,
                first.receipt.run.protocol_name,
                first.receipt.run.protocol_sha256
            )));
        }
        let seal = r.seal.as_ref().ok_or_else(|| MergeError::Unsealed {
            dir: input.dir.clone(),
        })?;
        let host = host_of(r);
        push_new(&mut hosts, &host);
        let order = r
            .run
            .shard
            .as_ref()
            .map_or(&r.run.arms, |s| &s.protocol_arms);
        for id in order {
            push_new(&mut arms, id);
        }
        let index = i + 1;
        for a in &r.arms {
            push_new(&mut arms, &a.id);
            cells.push(cell(&host, index, r, a));
        }
        let identity = r.identity.as_ref().map(|i| &i.host);
        runs.push(FleetRun {
            index,
            dir: input.dir.clone(),
            host,
            hostname: identity.and_then(|h| h.hostname.clone()),
            hardware_model: identity.and_then(|h| h.hardware_model.clone()),
            os: identity.and_then(|h| {
                let parts: Vec<&str> = [&h.os_name, &h.os_version]
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                (!parts.is_empty()).then(|| parts.join(" "))
            }),
            shard: r.run.shard.clone(),
            started_utc: r.run.started_utc.clone(),
            memqual_version: r.run.memqual_version.clone(),
            memqual_commit: r.run.memqual_commit.clone(),
            receipt_sha256: seal.receipt_sha256.clone(),
            manifest_sha256: seal.manifest_sha256.clone(),
            signature_key_id: input.signature_key_id.clone(),
            verdict: r.gates.as_ref().map(|g| g.verdict),
            arms: r.arms.iter().map(|a| a.id.clone()).collect(),
        });
    }
    // The shown cell per host × arm: an owned one first, else the first given.
    for host in &hosts {
        for arm in &arms {
            let here: Vec<usize> = (0..cells.len())
                .filter(|&i| &cells[i].host == host && &cells[i].arm == arm)
                .collect();
            let pick = here
                .iter()
                .copied()
                .find(|&i| !cells[i].companion)
                .or(here.first().copied());
            if let Some(i) = pick {
                cells[i].shown = true;
            }
            if here.len() > 1 {
                let which: Vec<String> = here
                    .iter()
                    .map(|&i| format!("run {}", cells[i].run))
                    .collect();
                notes.push(format!(
                    "host {host}, arm {arm}: measured by {}; the table shows run {}",
                    which.join(", "),
                    pick.map_or(0, |i| cells[i].run)
                ));
            }
        }
    }
    for arm in &arms {
        if !cells.iter().any(|c| &c.arm == arm) {
            notes.push(format!("arm {arm}: no run measured it"));
        }
    }
    let versions: Vec<String> = {
        let mut v = Vec::new();
        for r in &runs {
            push_new(
                &mut v,
                &format!(
                    "{} ({})",
                    r.memqual_version,
                    r.memqual_commit.as_deref().unwrap_or("commit unknown")
                ),
            );
        }
        v
    };
    if versions.len() > 1 {
        notes.push(format!(
            "the runs were made by different memqual builds: {}",
            versions.join(", ")
        ));
    }
    let shown: Vec<&Cell> = cells.iter().filter(|c| c.shown).collect();
    let mut spread = Vec::new();
    for arm in &arms {
        for m in &KEY_METRICS {
            let mut values: Vec<(f64, &str)> = shown
                .iter()
                .filter(|c| &c.arm == arm)
                .filter_map(|c| Some((*c.metrics.get(m.name)?, c.host.as_str())))
                .collect();
            if values.is_empty() {
                continue;
            }
            values.sort_by(|a, b| a.0.total_cmp(&b.0));
            let sorted: Vec<f64> = values.iter().map(|v| v.0).collect();
            spread.push(Spread {
                arm: arm.clone(),
                metric: m.name.to_string(),
                unit: m.unit.to_string(),
                hosts: values.len(),
                min: sorted[0],
                median: median(&sorted),
                max: sorted[sorted.len() - 1],
                min_host: values[0].1.to_string(),
                max_host: values[values.len() - 1].1.to_string(),
            });
        }
    }
    let mut failing_hosts = Vec::new();
    for host in &hosts {
        let on: Vec<String> = shown
            .iter()
            .filter(|c| &c.host == host && c.fails)
            .map(|c| c.arm.clone())
            .collect();
        if !on.is_empty() {
            failing_hosts.push(Failing {
                name: host.clone(),
                on,
            });
        }
    }
    let mut failing_arms = Vec::new();
    for arm in &arms {
        let on: Vec<String> = shown
            .iter()
            .filter(|c| &c.arm == arm && c.fails)
            .map(|c| c.host.clone())
            .collect();
        if !on.is_empty() {
            failing_arms.push(Failing {
                name: arm.clone(),
                on,
            });
        }
    }
    let verdict = if inputs.iter().all(|i| run_passed(&i.receipt)) {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    Ok(FleetReport {
        format_version: FLEET_FORMAT_VERSION.to_string(),
        created_utc: created_utc.to_string(),
        memqual_version: env!("CARGO_PKG_VERSION").to_string(),
        protocol_name: first.receipt.run.protocol_name.clone(),
        protocol_sha256: first.receipt.run.protocol_sha256.clone(),
        runs,
        hosts,
        arms,
        cells,
        spread,
        failing_hosts,
        failing_arms,
        notes,
        verdict,
        seal: None,
    })
}

/// A value in its unit, for tables.
pub fn format_value(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => format!("{:.1} MiB", v / 1_048_576.0),
        "ns" => format!("{:.1} ms", v / 1e6),
        _ => format!("{v}"),
    }
}

fn verdict_text(c: &Cell) -> &'static str {
    match c.verdict {
        Some(v) => v.as_str(),
        None => match c.status {
            ArmStatus::Completed => "completed",
            ArmStatus::Failed => "FAILED",
            ArmStatus::NotRunnable => "NOT_RUNNABLE",
        },
    }
}

/// A cell in words: verdict, then its key metrics.
pub fn cell_text(c: &Cell) -> String {
    let mut parts = vec![verdict_text(c).to_string()];
    for m in &KEY_METRICS {
        if let Some(v) = c.metrics.get(m.name) {
            parts.push(format!("{} {}", m.label, format_value(*v, m.unit)));
        }
    }
    parts.join(" · ")
}

/// `|` and line breaks would break a Markdown table cell.
fn md(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// `fleet.md`.
pub fn markdown(f: &FleetReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# memqual fleet: `{}`\n\n**Verdict: {}** over {} run(s) on {} host(s).\n",
        md(&f.protocol_name),
        f.verdict.as_str(),
        f.runs.len(),
        f.hosts.len()
    );
    let _ = writeln!(out, "## Host × arm\n");
    let _ = writeln!(
        out,
        "| host | {} |",
        f.arms.iter().map(|a| md(a)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(f.arms.len()));
    for host in &f.hosts {
        let row: Vec<String> = f
            .arms
            .iter()
            .map(|a| {
                f.cell(host, a)
                    .map_or("–".to_string(), |c| md(&cell_text(c)))
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", md(host), row.join(" | "));
    }
    let _ = writeln!(out, "\n## Spread across hosts\n");
    let _ = writeln!(out, "| arm | metric | hosts | min | median | max |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for s in &f.spread {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({}) | {} | {} ({}) |",
            md(&s.arm),
            s.metric,
            s.hosts,
            format_value(s.min, &s.unit),
            md(&s.min_host),
            format_value(s.median, &s.unit),
            format_value(s.max, &s.unit),
            md(&s.max_host)
        );
    }
    let _ = writeln!(out, "\n## What fails\n");
    if f.failing_hosts.is_empty() {
        let _ = writeln!(out, "No host and no arm fails.");
    }
    for h in &f.failing_hosts {
        let _ = writeln!(out, "- host **{}**: {}", md(&h.name), md(&h.on.join(", ")));
    }
    for a in &f.failing_arms {
        let _ = writeln!(
            out,
            "- arm **{}**: on {}",
            md(&a.name),
            md(&a.on.join(", "))
        );
    }
    for c in f
        .cells
        .iter()
        .filter(|c| c.shown && !c.failed_gates.is_empty())
    {
        let _ = writeln!(
            out,
            "- {} on {}: {}",
            md(&c.arm),
            md(&c.host),
            md(&c.failed_gates.join("; "))
        );
    }
    let _ = writeln!(out, "\n## Runs\n");
    let _ = writeln!(
        out,
        "| # | host | shard | verdict | started | receipt sha256 |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in &f.runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | `{}` |",
            r.index,
            md(&r.host),
            r.shard
                .as_ref()
                .map_or("–".to_string(), |s| format!("{}/{}", s.index, s.count)),
            r.verdict.map_or("–", Outcome::as_str),
            md(&r.started_utc),
            r.receipt_sha256
        );
    }
    if !f.notes.is_empty() {
        let _ = writeln!(out, "\n## Notes\n");
        for n in &f.notes {
            let _ = writeln!(out, "- {}", md(n));
        }
    }
    out
}

/// The digest `seal.fleet_sha256` must hold.
pub fn digest(f: &FleetReport) -> Result<String, SealError> {
    let mut value = serde_json::to_value(f).map_err(|e| SealError::Serialize {
        what: "fleet report",
        reason: e.to_string(),
    })?;
    if let Some(seal) = value.get_mut("seal").and_then(|s| s.as_object_mut()) {
        seal.insert(
            "fleet_sha256".into(),
            serde_json::Value::String(String::new()),
        );
    }
    Ok(sha256_hex(canonical("fleet report", &value)?.as_bytes()))
}

/// Write `manifest.json` over the fleet directory, fill the seal, write
/// `fleet.json` as canonical JSON.
pub fn seal(run: &RunDir, f: &mut FleetReport) -> Result<(), SealError> {
    let manifest = seal::manifest_of(run, names::REPORT, &Default::default())?;
    let text = canonical("manifest", &manifest)?;
    run.write_bytes(&Rel::file(files::MANIFEST), text.as_bytes())?;
    f.seal = Some(FleetSeal {
        algorithm: "sha256".into(),
        canonicalization: "RFC 8785".into(),
        manifest_sha256: sha256_hex(text.as_bytes()),
        fleet_sha256: String::new(),
    });
    let d = digest(f)?;
    if let Some(s) = f.seal.as_mut() {
        s.fleet_sha256 = d;
    }
    run.write_bytes(
        &Rel::file(names::REPORT),
        canonical("fleet report", f)?.as_bytes(),
    )?;
    Ok(())
}

/// Whether `run` is a fleet directory (it holds `fleet.json`, no receipt).
pub fn is_fleet(run: &RunDir) -> bool {
    matches!(run.has_file(&Rel::file(names::REPORT)), Ok(true))
        && matches!(run.has_file(&Rel::file(files::RECEIPT)), Ok(false))
}

/// Check a fleet directory's seal: `fleet.json`'s canonical bytes and own
/// digest, the manifest's digest, every file against the manifest.
pub fn verify(run: &RunDir) -> Verification {
    let mut problems = Problems(Vec::new());
    let mut sealed_manifest = None;
    match run.read_bytes(&Rel::file(names::REPORT), limits::JSON_RECORD) {
        Ok(Some(bytes)) => match serde_json::from_slice::<FleetReport>(&bytes) {
            Ok(f) => {
                sealed_manifest = f.seal.as_ref().map(|s| s.manifest_sha256.clone());
                if canonical("fleet report", &f)
                    .ok()
                    .as_deref()
                    .map(str::as_bytes)
                    != Some(&bytes[..])
                {
                    problems.add(
                        names::REPORT,
                        "changed",
                        "its bytes are not the canonical (RFC 8785) form the seal wrote",
                    );
                }
                match (&f.seal, digest(&f)) {
                    (None, _) => problems.add(names::REPORT, "invalid", "not sealed"),
                    (Some(s), Ok(d)) if d == s.fleet_sha256 => {}
                    (Some(s), Ok(d)) => problems.add(
                        names::REPORT,
                        "changed",
                        format!("its digest is {d}, the seal says {}", s.fleet_sha256),
                    ),
                    (Some(_), Err(e)) => problems.add(names::REPORT, "invalid", e.to_string()),
                }
            }
            Err(e) => problems.add(names::REPORT, "invalid", format!("not a fleet report: {e}")),
        },
        Ok(None) => problems.add(names::REPORT, "missing", "no fleet report"),
        Err(e) => problems.add(names::REPORT, "invalid", e.to_string()),
    }
    let mut v = Verification::default();
    if let Some(m) = seal::check_manifest(run, sealed_manifest.as_deref(), &mut problems) {
        seal::check_files(run, &m, names::REPORT, &mut problems);
        v.files_checked = m.files.len() as u64;
    }
    v.problems = problems.0;
    v
}
