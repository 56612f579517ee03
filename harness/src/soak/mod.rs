//! `memqual soak`: one arm, many requests, judged for growth.
//!
//! The arm runs through the ordinary dispatcher (same worker, same 50 ms
//! series, same run directory). Beside it the [`watch`] thread draws the
//! progress bar, takes slow snapshots and reads memqual's own process into
//! `harness.jsonl` ([`self_watch`]). Afterwards `soak.json` is
//! written into the arm directory and the receipt is re-assembled, so its
//! `stability` section holds the analysis of whatever was collected —
//! also after Ctrl-C.

pub mod nightly;
pub(crate) mod self_watch;
pub(crate) mod watch;

use crate::progress::mib;
use crate::run::{self, RunResult};
use analysis::stability::SoakMode;
use anyhow::{Context, bail};
use protocol::limits::SOAK_GRACE;
use protocol::{LoadedProtocol, SoakDecl};
use run_dir::{Rel, RunDir};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use watch::{WatchReport, progress_bar};
use worker_contract::WorkerSpec;

/// How long a soak runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// As the protocol says.
    AsDeclared,
    /// Exactly this many measured requests (`--requests`).
    Requests(u64),
    /// Measured requests until this much time has passed (`--duration`);
    /// whisper arms only.
    Duration(Duration),
}

pub use crate::duration::parse_duration;

/// Keep the soaked arm only, with the requested length; returns the cycle length.
/// `physical_memory` (the host's RAM, when known) bounds what a calibration
/// arm's patterns may hold once `--requests` has set its length.
pub fn prepare(
    loaded: &mut LoadedProtocol,
    decl: &SoakDecl,
    length: Length,
    physical_memory: Option<u64>,
) -> anyhow::Result<u64> {
    let index = match &decl.arm {
        Some(id) => loaded
            .arms
            .iter()
            .position(|a| &a.id == id)
            .with_context(|| format!("[soak] arm = `{id}` is not an arm of the protocol"))?,
        None => 0,
    };
    let mut arm = loaded.arms.swap_remove(index);
    arm.control = None;
    arm.settle_ms = decl.settle_ms;
    // A lifecycle soak's length is its cycles × the requests in each.
    let natural = match &arm.worker {
        WorkerSpec::Calibrate(_) => 1,
        WorkerSpec::Whisper(w) => w.fixtures.len().max(1) as u64,
    };
    let length = match (decl.lifecycle_requests(natural), length) {
        (None, length) => length,
        (Some(total), Length::AsDeclared) => Length::Requests(total),
        (Some(_), _) => bail!(
            "a lifecycle soak runs [soak] cycles: use --cycles instead of --requests or --duration"
        ),
    };
    if decl.mode == SoakMode::Lifecycle {
        if let WorkerSpec::Whisper(w) = &arm.worker {
            if w.runtime == worker_contract::Runtime::Ctranslate2 {
                bail!(
                    "arm {}: a lifecycle soak needs a whisper.cpp worker; memqual-ct2 does not \
                     free and load its model between requests",
                    arm.id
                );
            }
            if !w.idle_policy.is_resident() {
                bail!(
                    "arm {}: a lifecycle soak frees and loads the context itself; remove \
                     idle_policy = \"{}\" from [arm.whisper]",
                    arm.id,
                    w.idle_policy.name()
                );
            }
        }
        arm.lifecycle = Some(worker_contract::Lifecycle {
            requests_per_cycle: decl.cycle_requests.unwrap_or(natural).max(1),
        });
    }
    let cycle = match &mut arm.worker {
        WorkerSpec::Calibrate(cal) => {
            match length {
                Length::AsDeclared => {}
                Length::Requests(n) => cal.requests = n,
                Length::Duration(_) => bail!(
                    "calibration arms soak by request count: use --requests instead of --duration"
                ),
            }
            cal.validate()
                .map_err(|e| anyhow::anyhow!("arm {}: calibrate.{e}", arm.id))?;
            if cal.teardown_leak.is_some() && arm.lifecycle.is_none() {
                bail!(
                    "arm {}: calibrate.teardown_leak keeps memory at each lifecycle teardown; \
                     it needs [soak] mode = \"lifecycle\" (or --cycles)",
                    arm.id
                );
            }
            if let Some(ram) = physical_memory {
                cal.check_fits(ram)
                    .map_err(|e| anyhow::anyhow!("arm {}: {e}", arm.id))?;
            }
            1
        }
        WorkerSpec::Whisper(w) => {
            // A long-form arm has one input: each request is a cycle.
            let per_cycle = w.fixtures.len().max(1) as u64;
            match length {
                Length::AsDeclared => {}
                Length::Requests(n) => {
                    w.repetitions = u32::try_from(n.div_ceil(per_cycle)).unwrap_or(u32::MAX);
                    w.max_requests = Some(n);
                }
                Length::Duration(d) => {
                    w.repetitions = u32::MAX;
                    w.max_duration_s = Some(d.as_secs());
                    // The last request may start just before the end: leave
                    // it room (saturating, though the duration is bounded).
                    arm.timeout = arm.timeout.max(d.saturating_add(SOAK_GRACE));
                }
            }
            w.validate()
                .map_err(|e| anyhow::anyhow!("arm {}: whisper: {e}", arm.id))?;
            per_cycle
        }
    };
    let cycle = arm.lifecycle.map_or(cycle, |l| l.requests_per_cycle);
    loaded.arms = vec![arm];
    Ok(cycle)
}

/// Everything a finished (or interrupted) soak produced.
pub struct SoakResult {
    /// The run's result: its directory, receipt and whether it was interrupted.
    pub run: RunResult,
    /// Id of the soaked arm.
    pub arm_id: String,
    /// What the watcher did (slow snapshots taken, and their errors).
    pub watch: WatchReport,
}

/// Run the (already prepared) single-arm protocol as a soak into `dir`.
/// Fails when the protocol has no arm or the run itself fails (run
/// directory, spawning the worker); `total` is the expected request count
/// for the progress bar (`None`: open-ended).
// The run's inputs, kept apart so the call site reads like `memqual run`'s.
#[allow(clippy::too_many_arguments)]
pub fn run_soak(
    loaded: &LoadedProtocol,
    decl: &SoakDecl,
    total: Option<u64>,
    run: RunDir,
    executables: &[PathBuf],
    interrupted: &AtomicBool,
    opts: &run::RunOptions,
) -> anyhow::Result<SoakResult> {
    let arm_id = loaded
        .arms
        .first()
        .map(|a| a.id.clone())
        .context("the soak has no arm")?;
    let arm_dir = run.arm(&arm_id)?;
    let stop = Arc::new(AtomicBool::new(false));
    let interval =
        (decl.snapshot_interval_s > 0).then(|| Duration::from_secs(decl.snapshot_interval_s));
    // The start reading of memqual itself, before admission and the worker.
    let own = self_watch::SelfWatch::start(&arm_dir, self_watch::period(interval));
    let mut watcher = Some({
        let (run, arm_dir, stop) = (run.clone(), arm_dir.clone(), Arc::clone(&stop));
        let bar = progress_bar(total);
        std::thread::spawn(move || watch::watch(&run, &arm_dir, total, interval, own, stop, bar))
    });
    let mut watch = WatchReport::default();
    let own_file = arm_dir.join(reports::record::files::HARNESS);
    // Once the arms are over: the watcher takes its end reading and stops;
    // `harness.jsonl` grew after the arm's seal, so it is sealed again.
    let mut stop_watching = |run: &RunDir| -> anyhow::Result<()> {
        let Some(handle) = watcher.take() else {
            return Ok(());
        };
        stop.store(true, Ordering::SeqCst);
        watch = handle.join().unwrap_or_default();
        run.seal_raw(std::slice::from_ref(&own_file))?;
        Ok(())
    };
    let held = run.clone();
    let result = run::run_with(
        loaded,
        run,
        executables,
        interrupted,
        opts,
        &mut stop_watching,
    );
    if result.is_err() {
        // The run failed before its receipt: stop the watcher all the same
        // (the run's own error is the one to report).
        let _ = stop_watching(&held);
    }
    Ok(SoakResult {
        run: result?,
        arm_id,
        watch,
    })
}

/// Put the history chart's rows (`soak-history.json`) into the run
/// directory, then render the reports and seal the run again.
pub fn attach_history(
    run: &RunDir,
    history: &reports::soak_history::SoakHistory,
) -> anyhow::Result<reports::Receipt> {
    let rel = Rel::file(reports::soak_history::FILE);
    run.write_json(&rel, history)?;
    // Read from the history database at the soak's end: raw, sealed now.
    run.seal_raw(&[rel])?;
    run::finish(run)
}

/// The soak's figures in a few lines.
pub fn human(result: &SoakResult) -> String {
    let mut out = String::new();
    let Some(arm) = result.run.receipt.arms.first() else {
        return "memqual soak: the arm never started\n".into();
    };
    out.push_str(&format!(
        "soak {} · arm {} · {:?}{}\n",
        result.run.dir.display(),
        arm.id,
        arm.status,
        if result.run.interrupted {
            " (interrupted: analysis of what was collected)"
        } else {
            ""
        }
    ));
    let Some(s) = &arm.stability else {
        out.push_str("no stability analysis (the arm directory is missing)\n");
        return out;
    };
    if let Some(l) = &s.lifecycle {
        out.push_str(&format!(
            "lifecycle: {} of {} cycles of {} requests, judged on the floor after each teardown\n",
            l.cycles_completed, l.cycles_planned, l.requests_per_cycle
        ));
        for g in &l.floor_series {
            let slope = g.bytes_per_request.map_or("–".into(), |b| {
                analysis::stability::kib_with_interval(&b, " KiB/cycle")
            });
            out.push_str(&format!(
                "  {:<18} {:<13} {slope} · {}\n",
                g.series,
                g.classification.name(),
                g.reason
            ));
        }
    }
    out.push_str(&format!(
        "{} requests · worker {} · stable {}\n",
        s.requests,
        s.worker.name(),
        match s.stable {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "inconclusive (not a pass)",
        }
    ));
    for g in s
        .worker_series
        .iter()
        .chain(&s.settled_series)
        .chain(&s.system_series)
        .chain(&s.device_series)
        .chain(&s.host_used)
    {
        let slope = g.bytes_per_request.map_or("–".into(), |b| {
            format!(
                "{:.2} KiB/req [{:.2}, {:.2}]",
                b.estimate / 1024.0,
                b.low / 1024.0,
                b.high / 1024.0
            )
        });
        let per_hour = g
            .bytes_per_hour
            .map_or("–".into(), |h| format!("{} /h", mib(h.estimate)));
        out.push_str(&format!(
            "  {:<18} {:<13} {slope} · {per_hour} · {}\n",
            g.series,
            g.classification.name(),
            g.reason
        ));
    }
    if let Some(c) = &s.covariates {
        out.push_str(&format!("  {}\n", c.line()));
    }
    if !s.system_growth_while_worker_flat.is_empty() {
        out.push_str(&format!(
            "  SYSTEM MEMORY GROWS WHILE THE WORKER IS FLAT: {}\n",
            s.system_growth_while_worker_flat.join(", ")
        ));
    }
    if !s.device_growth_while_resident_flat.is_empty() {
        out.push_str(&format!(
            "  DEVICE MEMORY GROWS WHILE RESIDENT IS FLAT: {}\n",
            s.device_growth_while_resident_flat.join(", ")
        ));
    }
    if let Some(p) = s.peak_footprint_bytes {
        out.push_str(&format!("  peak footprint {}", mib(p as f64)));
    }
    if let Some(l) = s.p95_latency_ns {
        out.push_str(&format!(" · p95 latency {:.1} ms", l / 1e6));
    }
    out.push_str(&format!(" · {} snapshots\n", result.watch.snapshots));
    if let Some(h) = &arm.harness_self {
        out.push_str(&format!("  {}\n", h.line()));
        // Flush left, like summary.md's: memqual's own health, not the worker's.
        if let Some(grew) = h.grew_line() {
            out.push_str(&format!("{grew}\n"));
        }
    }
    if let Some(e) = &result.watch.harness_error {
        out.push_str(&format!("  memqual itself not recorded: {e}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(28_800)));
        assert_eq!(parse_duration("2h30m"), Ok(Duration::from_secs(9_000)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("8").unwrap_err().contains("give a unit"));
        assert!(
            parse_duration("8d")
                .unwrap_err()
                .contains("no days; write hours")
        );
        assert!(
            parse_duration("8w")
                .unwrap_err()
                .contains("unknown unit `w`")
        );
        // A malformed number is named as such, not blamed on a unit.
        assert!(
            parse_duration("abc")
                .unwrap_err()
                .contains("`abc` is not a duration: a number, then h, m or s")
        );
        assert!(
            parse_duration("1.5h")
                .unwrap_err()
                .contains("whole numbers only")
        );
        // A control character is shown escaped, never raw.
        let err = parse_duration("8\u{7}x").unwrap_err();
        assert!(!err.contains('\u{7}') && err.contains("\\u{7}"), "{err}");
        assert!(parse_duration("0h").is_err());
        assert!(
            parse_duration("h")
                .unwrap_err()
                .contains("a number must come before `h`")
        );
    }

    #[test]
    fn durations_are_bounded_and_never_overflow() {
        assert_eq!(parse_duration("168h"), Ok(Duration::from_secs(604_800)));
        let over = "`168h1s` is out of range: allowed 1..=604800 (at most 7 days (168h))";
        assert_eq!(parse_duration("168h1s").unwrap_err(), over);
        for text in [
            "18446744073709551615s",
            "18446744073709551616s",
            "5124095576030432h",
            "99999999999999999999999999h",
            "18446744073709551615s18446744073709551615s",
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(
                err.contains("is out of range: allowed 1..=604800"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn soak_table_errors_name_the_key() {
        let bad = SoakDecl {
            tail_fraction: 0.0,
            ..SoakDecl::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "tail_fraction");
        let bad = SoakDecl {
            max_slope_kib_per_request: -1.0,
            ..SoakDecl::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .message
                .starts_with("max_slope_kib_per_request = -1 is out of range")
        );
        for (bad, key) in [
            (
                SoakDecl {
                    bootstrap_resamples: usize::MAX,
                    ..SoakDecl::default()
                },
                "bootstrap_resamples",
            ),
            (
                SoakDecl {
                    settle_ms: u64::MAX,
                    ..SoakDecl::default()
                },
                "settle_ms",
            ),
            (
                SoakDecl {
                    confidence: f64::NAN,
                    ..SoakDecl::default()
                },
                "confidence",
            ),
            (
                SoakDecl {
                    snapshot_interval_s: u64::MAX,
                    ..SoakDecl::default()
                },
                "snapshot_interval_s",
            ),
        ] {
            assert_eq!(bad.validate().unwrap_err().key, key);
        }
        assert_eq!(SoakDecl::default().validate(), Ok(()));
        let s = SoakDecl::default().settings(9);
        assert_eq!(s.growth.cycle_requests, 9);
        assert_eq!(s.growth.linear_slope_bytes_per_request, 4096.0);
    }
}
