//! Fleet runs: `memqual run --shard I/N` (a deterministic share of the arm
//! matrix, so a CI job matrix can split a protocol across machines) and
//! `memqual merge RUN_DIR… --out DIR` (one sealed fleet report over runs
//! whose seals, and signatures with `--pubkey`, hold).
//!
//! The shard rule: arm k of the protocol (counted from 0, in protocol
//! order) belongs to shard k mod N + 1. A shard runs the arms it owns plus
//! every control they need, transitively (companions), in protocol order:
//! a comparison is only meaningful on one host, so the control travels with
//! the candidate. A control owned by another shard is then measured twice;
//! the fleet report shows the owning shard's measurement.

use crate::exit::{self, Failure, failed, harness, usage};
use crate::{ci_formats, console};
use ::fleet::fleet::{self, FleetInput};
use anyhow::{Context, anyhow};
use protocol::LoadedProtocol;
use reports::record::{ShardInfo, files};
use run_dir::names::fleet as names;
use run_dir::{Access, Rel, RunDir, RunDirError, limits};
use std::path::{Path, PathBuf};

/// The most shards a protocol may be split into.
pub const MAX_SHARDS: u32 = 1000;

/// `--shard I/N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard's number, 1-based (`I`).
    pub index: u32,
    /// How many shards the protocol is split into (`N`).
    pub count: u32,
}

/// Parse `I/N` with 1 ≤ I ≤ N ≤ [`MAX_SHARDS`].
pub fn parse_shard(text: &str) -> Result<Shard, String> {
    let (i, n) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not I/N (e.g. 2/4: the second of four shards)"))?;
    let num = |s: &str, what: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{text}`: {what} `{s}` is not a whole number"))
    };
    let (index, count) = (num(i, "I")?, num(n, "N")?);
    if count == 0 || count > MAX_SHARDS {
        return Err(format!(
            "`{text}`: N is out of range: allowed 1..={MAX_SHARDS}"
        ));
    }
    if index == 0 || index > count {
        return Err(format!("`{text}`: I is out of range: allowed 1..={count}"));
    }
    Ok(Shard { index, count })
}

/// Keep only `shard`'s arms (and their controls) in `loaded`, recording the
/// share in it (and so in `run.json`). A shard with no arm is an error: the
/// job matrix has more shards than the protocol has arms.
pub fn select(loaded: &mut LoadedProtocol, shard: Shard) -> anyhow::Result<()> {
    let all: Vec<String> = loaded.arms.iter().map(|a| a.id.clone()).collect();
    let owned: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(k, _)| (*k as u64 % u64::from(shard.count)) + 1 == u64::from(shard.index))
        .map(|(_, id)| id.clone())
        .collect();
    if owned.is_empty() {
        anyhow::bail!(
            "shard {}/{} has no arm: the protocol has {} arm(s), so use at most {} shard(s)",
            shard.index,
            shard.count,
            all.len(),
            all.len()
        );
    }
    // Controls, transitively (the protocol has no cycles: the loader checks
    // that each control is another arm; a cycle would only stop this loop
    // once every arm is kept).
    let mut keep: Vec<String> = owned.clone();
    let mut i = 0;
    while i < keep.len() {
        let control = loaded
            .arms
            .iter()
            .find(|a| a.id == keep[i])
            .and_then(|a| a.control.clone());
        if let Some(c) = control
            && !keep.contains(&c)
        {
            keep.push(c);
        }
        i += 1;
    }
    let companions: Vec<String> = all
        .iter()
        .filter(|id| keep.contains(id) && !owned.contains(id))
        .cloned()
        .collect();
    loaded.arms.retain(|a| keep.contains(&a.id));
    loaded.shard = Some(ShardInfo {
        index: shard.index,
        count: shard.count,
        protocol_arms: all,
        owned,
        companions,
    });
    Ok(())
}

/// Open a run to merge, read only; a path that is no directory is a usage error.
fn open(dir: &Path) -> Result<RunDir, Failure> {
    if !dir.is_dir() {
        return Err(usage(anyhow!(
            "{} is not a directory: give run directories (each holds receipt.json)",
            dir.display()
        )));
    }
    RunDir::open(dir, Access::Read).map_err(|e| match e {
        RunDirError::Busy { .. } => harness(e),
        other => usage(other),
    })
}

/// One run checked for the merge: its seal (and signature) must hold.
fn checked(
    dir: &Path,
    key: Option<&reports::sign::PublicKey>,
) -> Result<Result<(RunDir, FleetInput), String>, Failure> {
    let run = open(dir)?;
    let v = reports::seal::verify(&run, key);
    if !v.holds() {
        let list: Vec<String> = v
            .problems
            .iter()
            .take(10)
            .map(|p| format!("    {} {}: {}", p.kind.to_uppercase(), p.path, p.detail))
            .collect();
        let more = v.problems.len().saturating_sub(10);
        return Ok(Err(format!(
            "{}: seal BROKEN ({} problem(s)){}\n{}{}",
            dir.display(),
            v.problems.len(),
            if key.is_some() {
                ", signature checked with the given key"
            } else {
                ""
            },
            list.join("\n"),
            if more > 0 {
                format!(
                    "\n    … and {more} more (`memqual verify {}`)",
                    dir.display()
                )
            } else {
                String::new()
            }
        )));
    }
    let receipt: reports::Receipt = run
        .read_json_limited(&Rel::file(files::RECEIPT), limits::RECEIPT)
        .map_err(usage)?
        .ok_or_else(|| usage(anyhow!("{} has no receipt.json", dir.display())))?;
    let input = FleetInput {
        dir: dir.display().to_string(),
        receipt,
        signature_key_id: v.signature.filter(|s| s.valid).map(|s| s.key_id),
    };
    Ok(Ok((run, input)))
}

/// `memqual merge RUN_DIR… --out DIR [--pubkey FILE] [--json]`.
pub fn merge(
    dirs: &[PathBuf],
    out: &Path,
    pubkey: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    let key = pubkey
        .map(reports::sign::read_public_key)
        .transpose()
        .map_err(usage)?;
    let mut inputs = Vec::new();
    let mut opened = Vec::new();
    let mut broken = Vec::new();
    let same = |a: &PathBuf, b: &PathBuf| {
        a == b
            || matches!(
                (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                (Ok(x), Ok(y)) if x == y
            )
    };
    for (i, dir) in dirs.iter().enumerate() {
        if dirs[..i].iter().any(|d| same(d, dir)) {
            return Err(usage(anyhow!(
                "{} is given more than once: each run is merged once",
                dir.display()
            )));
        }
    }
    // The fleet directory may not go inside a run (or another fleet): that
    // directory's seal would break. The one rule of `out_path`, which
    // `run`, `soak`, `calibrate`, `bisect` and `ladder-chart` share.
    crate::out_path::refuse_inside_run(out, "--out")?;
    for dir in dirs {
        match checked(dir, key.as_ref())? {
            Ok((run, input)) => {
                opened.push(run);
                inputs.push(input);
            }
            Err(why) => broken.push(why),
        }
    }
    if !broken.is_empty() {
        return Err(failed(anyhow!(
            "not merged: {} of {} run(s) do not verify, so no fleet report was written:\n{}",
            broken.len(),
            dirs.len(),
            broken.join("\n")
        )));
    }
    let now = chrono::Utc::now().to_rfc3339();
    let mut report = fleet::build(&inputs, &now).map_err(usage)?;
    let fleet_dir = RunDir::create(out).map_err(exit::creating_run_dir)?;
    write(&fleet_dir, &opened, &mut report)
        .with_context(|| format!("cannot write the fleet report into {}", out.display()))
        .map_err(harness)?;
    drop(opened);
    let markdown = fleet::markdown(&report);
    ci_formats::append_step_summary(&markdown);
    if json {
        console::print_json(&report)?;
    } else {
        console::outln(format_args!("{markdown}"));
        console::outln(format_args!(
            "fleet report: {} (fleet.json, fleet.md, fleet.html; sealed: `memqual verify {}`)",
            out.display(),
            out.display()
        ));
    }
    Ok(if report.verdict == reports::gates::Outcome::Pass {
        exit::PASS
    } else {
        exit::ARM_FAILED
    })
}

/// Copy each run's receipt (and signature), write the reports, seal.
fn write(dir: &RunDir, runs: &[RunDir], report: &mut fleet::FleetReport) -> anyhow::Result<()> {
    let base = Rel::file(names::RUNS);
    dir.create_dir(&base)?;
    for (i, run) in runs.iter().enumerate() {
        let folder = base.join(&(i + 1).to_string());
        dir.create_dir(&folder)?;
        for name in [files::RECEIPT, files::SIGNATURE] {
            if let Some(bytes) = run.read_bytes(&Rel::file(name), limits::RECEIPT)? {
                dir.write_bytes(&folder.join(name), &bytes)?;
            }
        }
    }
    dir.write_bytes(
        &Rel::file(names::MARKDOWN),
        fleet::markdown(report).as_bytes(),
    )?;
    dir.write_bytes(
        &Rel::file(names::HTML),
        render::fleet_html::page(report).as_bytes(),
    )?;
    fleet::seal(dir, report)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arms a ← b ← c (each the control of the next) and d.
    fn chain() -> LoadedProtocol {
        let arm = |id: &str, control: Option<&str>| {
            format!(
                "[[arm]]\nid = \"{id}\"\n{}[arm.calibrate]\nplateau = {{ mib = 1 }}\n",
                control.map_or(String::new(), |c| format!("control = \"{c}\"\n"))
            )
        };
        let text = format!(
            "schema_version = 1\nname = \"t\"\n{}{}{}{}",
            arm("a", None),
            arm("b", Some("a")),
            arm("c", Some("b")),
            arm("d", None)
        );
        protocol::parse_without_catalogs(&text).unwrap()
    }

    fn ids(p: &LoadedProtocol) -> Vec<&str> {
        p.arms.iter().map(|a| a.id.as_str()).collect()
    }

    #[test]
    fn a_shard_takes_every_nth_arm_and_the_controls_it_needs_transitively() {
        let mut one = chain();
        select(&mut one, Shard { index: 1, count: 2 }).unwrap();
        // Owns a and c; c needs b, b needs a (owned already).
        assert_eq!(ids(&one), ["a", "b", "c"]);
        let s = one.shard.as_ref().unwrap();
        assert_eq!(
            (s.owned.clone(), s.companions.clone()),
            (vec!["a".into(), "c".into()], vec!["b".to_string()])
        );
        assert_eq!(s.protocol_arms, ["a", "b", "c", "d"]);
        let mut two = chain();
        select(&mut two, Shard { index: 2, count: 2 }).unwrap();
        assert_eq!(ids(&two), ["a", "b", "d"]);
        assert_eq!(two.shard.as_ref().unwrap().companions, ["a"]);
        // Every arm is owned by exactly one shard, whatever N.
        for n in 1..=4 {
            let mut owners = std::collections::BTreeMap::new();
            for i in 1..=n {
                let mut p = chain();
                select(&mut p, Shard { index: i, count: n }).unwrap();
                for id in &p.shard.as_ref().unwrap().owned {
                    *owners.entry(id.clone()).or_insert(0) += 1;
                }
            }
            assert_eq!(owners.len(), 4, "N = {n}");
            assert!(owners.values().all(|&k| k == 1), "N = {n}: {owners:?}");
        }
        let mut five = chain();
        let e = select(&mut five, Shard { index: 5, count: 5 }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "shard 5/5 has no arm: the protocol has 4 arm(s), so use at most 4 shard(s)"
        );
    }

    #[test]
    fn shards_parse_with_their_ranges() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(parse_shard(" 1 / 1 "), Ok(Shard { index: 1, count: 1 }));
        for (bad, says) in [
            ("0/4", "I is out of range: allowed 1..=4"),
            ("5/4", "I is out of range: allowed 1..=4"),
            ("1/0", "N is out of range"),
            ("1/1001", "N is out of range: allowed 1..=1000"),
            ("1", "is not I/N"),
            ("a/2", "I `a` is not a whole number"),
            ("1/99999999999999999999", "is not a whole number"),
            ("-1/2", "is not a whole number"),
        ] {
            let e = parse_shard(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
