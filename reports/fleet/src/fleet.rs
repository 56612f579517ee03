//! A fleet report: several sealed runs of one protocol, from several hosts
//! (or shards of one), merged into one table (`memqual merge`).
//!
//! - Hosts are keyed by their label (`--host-label`, recorded in
//!   `host.json`), else their hostname ([`reports::host::HostIdentity::key`]).
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
//! - The boots of each host ([`HostBoots`]): its runs grouped by the boot
//!   they were measured in (`host.json`'s boot id), in the order they
//!   started. A host whose runs span several boots was rebooted between
//!   them, which a reviewer must see: a note names the two runs. Runs
//!   without a boot id form an "unknown boot", and a note says so.
//!
//! The directory holds `fleet.json` (this report), `fleet.md`,
//! `fleet.html`, each merged run's receipt (`runs/<n>/receipt.json`) and
//! `manifest.json`; `fleet.json` is canonical JSON (RFC 8785) and seals the
//! manifest the way a receipt does ([`seal`], [`verify`]).

use crate::compare::KEY_METRICS;
use reports::gates::Outcome;
use reports::receipt::{ArmReceipt, Receipt};
use reports::record::{ArmStatus, ShardInfo, files};
use reports::seal::{self, Problems, SealError, Verification, canonical};
use run_dir::digest::sha256_hex;
use run_dir::names::fleet as names;
use run_dir::{Rel, RunDir, limits};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the fleet report format, `major.minor`. 1.1: each run's
/// `boot_id` and the `boots` section (absent from 1.0 reports, which still
/// read and verify).
pub const FLEET_FORMAT_VERSION: &str = "1.1";

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
    /// The boot the run was measured in (`host.json`'s `boot_id`); absent
    /// when the receipt records none (its identity or the OS did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
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
    /// Shown in the host × arm table: every run that owned the arm on the
    /// host (two runs of one host are both shown, never one hidden behind
    /// the other), or the first companion where no run owned it.
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

/// One boot of a host and the runs measured in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boot {
    /// The boot id the runs recorded; `None`: the "unknown boot" of the
    /// host's runs that recorded none.
    pub boot_id: Option<String>,
    /// [`FleetRun::index`] of each run measured in this boot, in the order
    /// they started.
    pub runs: Vec<usize>,
}

/// A host's runs grouped by boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostBoots {
    /// The host key (see [`FleetRun::host`]).
    pub host: String,
    /// Its boots, in the order their first run started.
    pub boots: Vec<Boot>,
}

impl HostBoots {
    /// Whether the host's runs span more than one known boot.
    pub fn rebooted(&self) -> bool {
        self.boots.iter().filter(|b| b.boot_id.is_some()).count() > 1
    }
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
    /// Per host (in `hosts` order), its runs grouped by boot (empty only in
    /// reports older than format 1.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boots: Vec<HostBoots>,
    /// Arms of the protocol no run measured, duplicates, mixed versions,
    /// reboots between runs of a host, runs of an unknown boot.
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

    /// Every cell the table shows for `host` × `arm`, in run order: more
    /// than one when several runs of one host measured the arm.
    pub fn cells_at(&self, host: &str, arm: &str) -> Vec<&Cell> {
        self.cells
            .iter()
            .filter(|c| c.shown && c.host == host && c.arm == arm)
            .collect()
    }
}

/// Why runs cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No run was given.
    #[error("no run to merge")]
    Empty,
    /// One run given twice, under two paths (a copy, say).
    #[error(
        "{second} is run {first_index} ({first}) again: {why}. Each run is merged once; \
         leave one of them out"
    )]
    Duplicate {
        /// The run given first.
        first: String,
        /// Its position among the runs given, from 1.
        first_index: usize,
        /// The run given again.
        second: String,
        /// What they share, in words.
        why: String,
    },
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
        // One run given twice under two paths (a copy, a link): its sealed
        // receipt, or the run it records (start time, host, protocol,
        // shard), is the same.
        for (earlier, e) in inputs[..i].iter().enumerate() {
            let same_receipt = e
                .receipt
                .seal
                .as_ref()
                .is_some_and(|s| s.receipt_sha256 == seal.receipt_sha256);
            let same_run = e.receipt.run.started_utc == r.run.started_utc
                && host_of(&e.receipt) == host_of(r)
                && e.receipt.run.shard == r.run.shard;
            if same_receipt || same_run {
                return Err(MergeError::Duplicate {
                    first: e.dir.clone(),
                    first_index: earlier + 1,
                    second: input.dir.clone(),
                    why: if same_receipt {
                        format!("the same sealed receipt (sha256 {})", seal.receipt_sha256)
                    } else {
                        format!(
                            "the same run: started {} on host {}",
                            r.run.started_utc,
                            host_of(r)
                        )
                    },
                });
            }
        }
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
            boot_id: identity.and_then(|h| h.boot_id.clone()),
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
    // The shown cells per host × arm: every run that owned the arm there
    // (two runs of one host are two measurements, and a failing one may not
    // hide behind a passing one), else the first companion measurement.
    for host in &hosts {
        for arm in &arms {
            let here: Vec<usize> = (0..cells.len())
                .filter(|&i| &cells[i].host == host && &cells[i].arm == arm)
                .collect();
            let owned: Vec<usize> = here
                .iter()
                .copied()
                .filter(|&i| !cells[i].companion)
                .collect();
            let show: Vec<usize> = if owned.is_empty() {
                here.first().copied().into_iter().collect()
            } else {
                owned
            };
            for &i in &show {
                cells[i].shown = true;
            }
            if here.len() > 1 {
                let runs = |list: &[usize]| -> String {
                    list.iter()
                        .map(|&i| format!("run {}", cells[i].run))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                notes.push(format!(
                    "host {host}, arm {arm}: measured by {}; the table shows {}",
                    runs(&here),
                    runs(&show)
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
    let boots = boots_of(&hosts, &runs, &mut notes);
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
            let mut measured_on: Vec<&str> = values.iter().map(|v| v.1).collect();
            measured_on.sort_unstable();
            measured_on.dedup();
            spread.push(Spread {
                arm: arm.clone(),
                metric: m.name.to_string(),
                unit: m.unit.to_string(),
                hosts: measured_on.len(),
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
        boots,
        notes,
        verdict,
        seal: None,
    })
}

/// The name of a boot in tables and notes.
pub fn boot_name(boot_id: Option<&str>) -> &str {
    boot_id.unwrap_or("unknown boot")
}

/// Each host's runs grouped by boot, in the order the runs started (their
/// RFC 3339 UTC start times, then the order given); a note for each reboot
/// between two consecutive runs of a host that recorded a boot id, and for
/// the runs that recorded none.
fn boots_of(hosts: &[String], runs: &[FleetRun], notes: &mut Vec<String>) -> Vec<HostBoots> {
    let started = |r: &FleetRun| {
        chrono::DateTime::parse_from_rfc3339(&r.started_utc)
            .map(|t| t.timestamp_nanos_opt().unwrap_or(i64::MAX))
            .ok()
    };
    let mut out = Vec::new();
    for host in hosts {
        let mut mine: Vec<&FleetRun> = runs.iter().filter(|r| &r.host == host).collect();
        // Unparsable start times sort last, in the order given.
        mine.sort_by_key(|r| (started(r).is_none(), started(r), r.index));
        let mut boots: Vec<Boot> = Vec::new();
        for r in &mine {
            match boots.iter_mut().find(|b| b.boot_id == r.boot_id) {
                Some(b) => b.runs.push(r.index),
                None => boots.push(Boot {
                    boot_id: r.boot_id.clone(),
                    runs: vec![r.index],
                }),
            }
        }
        // Between consecutive runs of known boots (a run of an unknown
        // boot between them does not hide the reboot).
        let known: Vec<&FleetRun> = mine
            .iter()
            .copied()
            .filter(|r| r.boot_id.is_some())
            .collect();
        for pair in known.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if let (Some(x), Some(y)) = (&a.boot_id, &b.boot_id)
                && x != y
            {
                notes.push(format!(
                    "host {host} rebooted between run {} and run {} (boot {x}, then boot {y}): \
                     their measurements come from different boots",
                    a.index, b.index
                ));
            }
        }
        if let Some(unknown) = boots.iter().find(|b| b.boot_id.is_none()) {
            let list: Vec<String> = unknown.runs.iter().map(|i| format!("run {i}")).collect();
            notes.push(format!(
                "host {host}: {} recorded no boot id, grouped as unknown boot: \
                 a reboot before or between them cannot be ruled out",
                list.join(", ")
            ));
        }
        out.push(HostBoots {
            host: host.clone(),
            boots,
        });
    }
    out
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
                let here = f.cells_at(host, a);
                match here.as_slice() {
                    [] => "–".to_string(),
                    [c] => md(&cell_text(c)),
                    many => many
                        .iter()
                        .map(|c| format!("run {}: {}", c.run, md(&cell_text(c))))
                        .collect::<Vec<_>>()
                        .join(" <br> "),
                }
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
    if !f.boots.is_empty() {
        let _ = writeln!(out, "\n## Boots\n");
        let _ = writeln!(out, "| host | boot | runs |");
        let _ = writeln!(out, "|---|---|---|");
        for h in &f.boots {
            for b in &h.boots {
                let runs: Vec<String> = b.runs.iter().map(usize::to_string).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    md(&h.host),
                    md(boot_name(b.boot_id.as_deref())),
                    runs.join(", ")
                );
            }
        }
        let rebooted: Vec<&str> = f
            .boots
            .iter()
            .filter(|h| h.rebooted())
            .map(|h| h.host.as_str())
            .collect();
        if !rebooted.is_empty() {
            let _ = writeln!(
                out,
                "\n**Rebooted between runs:** {} (see Notes).",
                md(&rebooted.join(", "))
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use reports::host::{HostIdentity, Identity};
    use reports::receipt::Seal;

    const BOOT_A: &str = "6f1d7c1e-0000-4000-8000-00000000000a";
    const BOOT_B: &str = "6f1d7c1e-0000-4000-8000-00000000000b";

    /// A sealed run of protocol `p` on host `label`, started at `started`.
    fn run(dir: &str, label: &str, boot: Option<&str>, started: &str) -> FleetInput {
        let mut r = reports::Receipt::unmeasured();
        r.run.protocol_name = "p".into();
        r.run.protocol_sha256 = "00".repeat(32);
        r.run.started_utc = started.into();
        r.identity = Some(Identity {
            host: HostIdentity {
                label: Some(label.into()),
                boot_id: boot.map(str::to_string),
                ..HostIdentity::default()
            },
            ..Identity::default()
        });
        r.seal = Some(Seal {
            algorithm: "sha256".into(),
            canonicalization: "RFC 8785".into(),
            manifest_sha256: "11".repeat(32),
            receipt_sha256: dir.repeat(2),
        });
        FleetInput {
            dir: dir.into(),
            receipt: r,
            signature_key_id: None,
        }
    }

    #[test]
    fn runs_of_one_host_are_grouped_by_boot_and_a_reboot_is_named() {
        let inputs = [
            run("r1", "lab", Some(BOOT_A), "2025-03-01T10:00:00+00:00"),
            run("r2", "lab", Some(BOOT_A), "2025-03-01T10:05:00+00:00"),
            run("r3", "lab", Some(BOOT_B), "2025-03-01T11:00:00+00:00"),
        ];
        let f = build(&inputs, "2025-03-01T12:00:00+00:00").unwrap();
        assert_eq!(f.format_version, "1.1");
        let ids: Vec<Option<&str>> = f.runs.iter().map(|r| r.boot_id.as_deref()).collect();
        assert_eq!(ids, [Some(BOOT_A), Some(BOOT_A), Some(BOOT_B)]);
        assert_eq!(
            f.boots,
            [HostBoots {
                host: "lab".into(),
                boots: vec![
                    Boot {
                        boot_id: Some(BOOT_A.into()),
                        runs: vec![1, 2],
                    },
                    Boot {
                        boot_id: Some(BOOT_B.into()),
                        runs: vec![3],
                    },
                ],
            }]
        );
        assert!(f.boots[0].rebooted());
        let reboots: Vec<&String> = f.notes.iter().filter(|n| n.contains("rebooted")).collect();
        assert_eq!(reboots.len(), 1, "{:?}", f.notes);
        assert!(
            reboots[0].starts_with("host lab rebooted between run 2 and run 3"),
            "{}",
            reboots[0]
        );
        let md = markdown(&f);
        assert!(md.contains(&format!("| lab | {BOOT_A} | 1, 2 |")), "{md}");
        assert!(md.contains(&format!("| lab | {BOOT_B} | 3 |")), "{md}");
        assert!(md.contains("**Rebooted between runs:** lab"), "{md}");
    }

    #[test]
    fn boots_follow_start_times_and_unknown_boots_are_said() {
        // Given out of order: run 1 started last. One run has no boot id.
        let inputs = [
            run("r1", "lab", Some(BOOT_B), "2025-03-01T11:00:00+00:00"),
            run("r2", "lab", Some(BOOT_A), "2025-03-01T10:00:00+00:00"),
            run("r3", "lab", None, "2025-03-01T10:30:00+00:00"),
            run("r4", "other", Some(BOOT_A), "2025-03-01T10:00:00+00:00"),
        ];
        let f = build(&inputs, "now").unwrap();
        let lab = &f.boots[0];
        let order: Vec<(Option<&str>, &[usize])> = lab
            .boots
            .iter()
            .map(|b| (b.boot_id.as_deref(), b.runs.as_slice()))
            .collect();
        assert_eq!(
            order,
            [
                (Some(BOOT_A), &[2][..]),
                (None, &[3][..]),
                (Some(BOOT_B), &[1][..])
            ]
        );
        // Started 2 (A), 3 (unknown), 1 (B): the reboot is between runs 2
        // and 1, and run 3 is said to be of an unknown boot.
        let reboots: Vec<&String> = f.notes.iter().filter(|n| n.contains("rebooted")).collect();
        assert_eq!(reboots.len(), 1, "{:?}", f.notes);
        assert!(
            reboots[0].starts_with("host lab rebooted between run 2 and run 1"),
            "{}",
            reboots[0]
        );
        assert!(
            f.notes.iter().any(|n| n
                == "host lab: run 3 recorded no boot id, grouped as unknown boot: \
                    a reboot before or between them cannot be ruled out"),
            "{:?}",
            f.notes
        );
        assert!(lab.rebooted());
        let other = &f.boots[1];
        assert_eq!((other.host.as_str(), other.boots.len()), ("other", 1));
        assert!(!other.rebooted());
        assert!(markdown(&f).contains("| lab | unknown boot | 3 |"));
    }

    #[test]
    fn a_format_1_0_report_reads_and_writes_back_unchanged() {
        let f = build(
            &[run("r1", "lab", None, "2025-03-01T10:00:00+00:00")],
            "now",
        )
        .unwrap();
        let mut value = serde_json::to_value(&f).unwrap();
        value["format_version"] = "1.0".into();
        value.as_object_mut().unwrap().remove("boots");
        let text = canonical("fleet report", &value).unwrap();
        let read: FleetReport = serde_json::from_str(&text).unwrap();
        assert!(read.boots.is_empty() && read.runs[0].boot_id.is_none());
        assert_eq!(canonical("fleet report", &read).unwrap(), text);
    }
}
