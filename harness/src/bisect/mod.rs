//! `memqual bisect PROTOCOL --param NAME=V1,…,Vn`: the first value of one
//! parameter whose verdict differs from the first value's, in O(log n)
//! runs of the protocol.
//!
//! Every value is loaded before anything runs, so a value the protocol
//! refuses stops the bisection before its first probe. Each probe is an
//! ordinary run into `probes/<position>-<param>-<value>/` of the bisect
//! directory; a probe that cannot be judged (see [`crate::probe_verdict`])
//! is a skip, and the search ([`search`]) probes a neighbour instead. The
//! summary (`bisect.json`, `bisect.md`; [`summary`]) is written when the
//! search ends, and also when it is interrupted.

pub mod search;
pub mod summary;

use crate::exit::{self, Failure, harness, usage};
use crate::probe_verdict::{self, Judged};
use crate::run;
use crate::session::{self, INTERRUPTED, SessionOptions};
use anyhow::{Context, anyhow};
use protocol::LoadedProtocol;
use run_dir::names::bisect as names;
use run_dir::{Rel, RunDir};
use search::{Ending, Said, Search};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use summary::{BisectResult, BisectSummary, Probe};

/// The text `memqual bisect --help` ends with.
pub const HELP: &str = "Exit status: 0 the first differing value was found; 1 it was not \
(the last value is judged like the first, the first could not be judged, or skipped probes \
leave the flip between several values: bisect.md says which); 2 usage or protocol error \
(a bad list, an undeclared parameter, a value the protocol refuses), nothing run; 3 memqual \
itself failed; 130 interrupted (the summary of the probes so far is still written).";

/// The values of `NAME=V1,…,Vn`, checked: at least two, none empty, none twice.
pub fn parse_values(list: &str) -> Result<Vec<String>, String> {
    let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().all(String::is_empty) {
        return Err(
            "the list of values is empty: give at least two, e.g. --param size=8,16,24".into(),
        );
    }
    if let Some(i) = values.iter().position(String::is_empty) {
        return Err(format!(
            "value {} of {list:?} is empty: separate the values with single commas",
            i + 1
        ));
    }
    if values.len() < 2 {
        return Err(format!(
            "only one value ({}): a bisection needs at least two, the first (the reference) and others to compare with it",
            values[0]
        ));
    }
    for (i, v) in values.iter().enumerate() {
        if let Some(j) = values[..i].iter().position(|w| w == v) {
            return Err(format!(
                "value `{v}` is given twice (positions {} and {}): each value is probed at most once, so the list must not repeat one",
                j + 1,
                i + 1
            ));
        }
    }
    Ok(values)
}

/// A name for a probe's run directory: letters, digits, `.`, `_` and `-`
/// kept, anything else `_`, at most 48 characters.
fn path_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect()
}

/// `memqual bisect`.
pub fn command(
    protocol_path: &Path,
    (name, list): &(String, String),
    opts: &SessionOptions,
) -> Result<u8, Failure> {
    if opts.ci.junit.is_some() || opts.ci.bmf.is_some() {
        return Err(usage(anyhow!(
            "--junit and --export-bmf describe one run: a bisection is many; each probe's run \
             directory has its receipt, and bisect.json the search"
        )));
    }
    let values = parse_values(list).map_err(|m| usage(anyhow!("--param {name}=…: {m}")))?;
    let text = run_dir::input::read_text(protocol_path, run_dir::limits::PROTOCOL)
        .with_context(|| format!("cannot read the protocol {}", protocol_path.display()))
        .map_err(usage)?;
    let declared = protocol::declared_params(&text);
    if let Some(message) =
        protocol::params::undeclared(name, &protocol_path.display().to_string(), &declared)
    {
        return Err(usage(anyhow!(message)));
    }
    // Every value is loaded before anything runs: a value the protocol
    // refuses is found now, not after an hour of probes.
    let n = values.len();
    let mut loaded = Vec::with_capacity(n);
    for (i, value) in values.iter().enumerate() {
        let l = session::load_protocol(
            Some(protocol_path),
            ("", ""),
            &[(name.clone(), value.clone())],
        )
        .map_err(|f| Failure {
            code: f.code,
            error: f.error.context(format!(
                "with --param {name}={value} (value {} of {n})",
                i + 1
            )),
        })?;
        loaded.push(l);
    }
    let workers =
        crate::worker_dir::WorkerDir::resolve(opts.worker_dir.clone()).map_err(harness)?;
    let executables = loaded
        .iter()
        .map(|l| run::executables(l, &workers))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(harness)?;
    let out = match &opts.out {
        Some(dir) => run::OutDir::Exact(dir.clone()),
        None => {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
            run::OutDir::Default(PathBuf::from("runs").join(format!(
                "{stamp}-bisect-{}-{}",
                loaded[0].name,
                path_part(name)
            )))
        }
    };
    crate::out_path::refuse_inside_run(out.path(), "--out")?;
    let dir = out.create().map_err(exit::creating_run_dir)?;
    dir.create_dir(&Rel::file(names::PROBES)).map_err(harness)?;
    session::install_interrupt_handler()?;

    let mut search = Search::new(n);
    let mut probes: Vec<Probe> = Vec::new();
    let mut receipts: Vec<Option<reports::Receipt>> = vec![None; n];
    let width = n.to_string().len();
    while let Some(i) = search.next() {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        note!(
            "memqual: bisect probe {}: {name} = {} (value {} of {n})",
            probes.len() + 1,
            values[i],
            i + 1
        );
        let folder = format!(
            "{:0width$}-{}-{}",
            i + 1,
            path_part(name),
            path_part(&values[i])
        );
        let path = dir.path().join(names::PROBES).join(folder);
        let (judged, verdict, receipt, ran) = probe(&loaded[i], &executables[i], &path, opts)?;
        if ran && INTERRUPTED.load(Ordering::SeqCst) {
            // The run stopped part-way: its verdict says nothing.
            break;
        }
        let reference = probes.first().map(|p: &Probe| &p.judged);
        let said = match (&judged, reference) {
            (Judged::Skip(_), _) => Said::Skip,
            (_, None) => Said::Same,
            (_, Some(Judged::Skip(_))) => Said::Skip,
            (j, Some(r)) if j == r => Said::Same,
            _ => Said::Differs,
        };
        note!(
            "memqual: bisect probe {}: {name} = {}: {}{}",
            probes.len() + 1,
            values[i],
            judged.label(),
            match (&judged, said, i) {
                (Judged::Skip(why), _, _) => format!(" ({why})"),
                (_, _, 0) => " (the reference)".into(),
                (_, Said::Same, _) => ", as the first value".into(),
                _ => ", unlike the first value".into(),
            }
        );
        search.record(i, said);
        probes.push(Probe {
            position: i + 1,
            value: values[i].clone(),
            run_dir: ran.then(|| path.display().to_string()),
            verdict,
            same_as_first: match said {
                Said::Skip => None,
                s => Some(s == Said::Same),
            },
            judged,
        });
        receipts[i] = receipt;
    }
    let (result, flipped) = match search.ending() {
        Ending::Found {
            last_same,
            first_differs,
        } => (
            BisectResult::Found {
                first_differing: values[first_differs].clone(),
                position: first_differs + 1,
                last_same: values[last_same].clone(),
            },
            match (&receipts[last_same], &receipts[first_differs]) {
                (Some(before), Some(after)) => summary::flips(before, after),
                _ => Vec::new(),
            },
        ),
        Ending::NoFlip => (BisectResult::NoFlip, Vec::new()),
        Ending::ReferenceSkipped => (BisectResult::ReferenceSkipped, Vec::new()),
        Ending::Ambiguous { candidates, .. } => (
            BisectResult::Ambiguous {
                candidates: candidates.iter().map(|&c| values[c].clone()).collect(),
            },
            Vec::new(),
        ),
        Ending::Stopped => (BisectResult::Interrupted, Vec::new()),
    };
    let summary = BisectSummary {
        format_version: summary::FORMAT_VERSION.into(),
        protocol: protocol_path.display().to_string(),
        protocol_name: loaded[0].name.clone(),
        param: name.clone(),
        values,
        skipped: probes
            .iter()
            .filter(|p| matches!(p.judged, Judged::Skip(_)))
            .count(),
        probes,
        result,
        flipped,
    };
    let markdown = summary::markdown(&summary);
    write(&dir, &summary, &markdown)
        .with_context(|| {
            format!(
                "cannot write the bisect summary into {}",
                dir.path().display()
            )
        })
        .map_err(harness)?;
    if opts.json {
        crate::console::print_json(&summary)?;
    } else {
        out!("{markdown}");
        outln!(
            "\nbisect summary: {} ({}, {})",
            dir.path().display(),
            names::SUMMARY,
            names::MARKDOWN
        );
    }
    Ok(match summary.result {
        BisectResult::Interrupted => exit::INTERRUPTED,
        BisectResult::Found { .. } => exit::PASS,
        _ => exit::ARM_FAILED,
    })
}

fn write(dir: &RunDir, summary: &BisectSummary, markdown: &str) -> anyhow::Result<()> {
    dir.write_json(&Rel::file(names::SUMMARY), summary)?;
    dir.write_bytes(&Rel::file(names::MARKDOWN), markdown.as_bytes())?;
    Ok(())
}

/// One probe: the protocol with one value into its own run directory at
/// `path`. Returns the judgement, the run verdict, the receipt and whether
/// a run directory was made. A probe that cannot run (its named model
/// cannot be built, memqual fails inside the run) is a skip; only a run
/// directory that cannot be created stops the bisection.
fn probe(
    loaded: &LoadedProtocol,
    executables: &[PathBuf],
    path: &Path,
    opts: &SessionOptions,
) -> Result<
    (
        Judged,
        Option<reports::gates::Outcome>,
        Option<reports::Receipt>,
        bool,
    ),
    Failure,
> {
    if let Err(f) = session::ensure_models(loaded) {
        return Ok((
            Judged::Skip(worker_contract::error_text(f.error.as_ref())),
            None,
            None,
            false,
        ));
    }
    let run = RunDir::create(path)
        .with_context(|| format!("cannot create the probe's run directory {}", path.display()))
        .map_err(harness)?;
    match run::run(
        loaded,
        run,
        executables,
        &INTERRUPTED,
        &opts.run_options(true),
    ) {
        Err(e) => Ok((
            Judged::Skip(worker_contract::error_text(e.as_ref())),
            None,
            None,
            true,
        )),
        Ok(result) => {
            let judged = probe_verdict::judge(&result.receipt, session::run_passed(&result));
            let verdict = result.receipt.gates.as_ref().map(|g| g.verdict);
            Ok((judged, verdict, Some(result.receipt), true))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked_before_anything_runs() {
        assert_eq!(parse_values("8, 16,24").unwrap(), ["8", "16", "24"]);
        assert_eq!(
            parse_values("").unwrap_err(),
            "the list of values is empty: give at least two, e.g. --param size=8,16,24"
        );
        assert!(
            parse_values(" , ")
                .unwrap_err()
                .starts_with("the list of values is empty")
        );
        assert_eq!(
            parse_values("8").unwrap_err(),
            "only one value (8): a bisection needs at least two, the first (the reference) and others to compare with it"
        );
        assert_eq!(
            parse_values("8,,16").unwrap_err(),
            "value 2 of \"8,,16\" is empty: separate the values with single commas"
        );
        assert_eq!(
            parse_values("8,16,8").unwrap_err(),
            "value `8` is given twice (positions 1 and 3): each value is probed at most once, so the list must not repeat one"
        );
    }

    #[test]
    fn probe_folders_are_plain_names() {
        assert_eq!(path_part("200 MiB"), "200_MiB");
        assert_eq!(path_part("../m/q5_0.bin"), ".._m_q5_0.bin");
        assert_eq!(path_part(&"x".repeat(100)).len(), 48);
    }
}
