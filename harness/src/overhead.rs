//! The overhead gate's block run: after an arm's measured run, the same
//! worker spec runs once more, asked for enough requests to fill
//! `quads` ABBA quads of `block_requests` requests each. The external sampler
//! starts on (block 0 is A) and the marker hook switches it off and on at
//! request boundaries (A B B A, A B B A, …), logging each switch, so sampled
//! and unsampled requests alternate within seconds in one worker process.
//! Written into `arms/<id>/overhead/`; the summary into `arms/<id>/overhead.json`.

use anyhow::Context;
use arm_runner::arm;
use arm_runner::block_toggle::BlockToggle;
use protocol::Arm;
use reports::gate_spec::OverheadGate;
use reports::overhead::{
    BlockPlan, OVERHEAD_DIR, OVERHEAD_FILE, OverheadRecord, RequestWindow, SWITCHES_FILE,
};
use reports::record::ArmStatus;
use reports::record::files;
use run_dir::{Rel, RunDir};
use sampler::{Marker, Phase};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use worker_contract::{RequestResult, WorkerSpec};

/// The arm's `overhead` gate, if it declares one.
pub fn declared(arm: &Arm) -> Option<&OverheadGate> {
    arm.gates.gates.iter().find_map(|g| g.as_overhead())
}

/// The arm with its worker asked for `n` measured requests, and a timeout
/// scaled from the arm's own by the request count.
fn with_requests(arm: &Arm, n: u64) -> Arm {
    let mut a = arm.clone();
    let own = match &mut a.worker {
        WorkerSpec::Calibrate(c) => {
            let own = c.requests;
            c.requests = n;
            own
        }
        WorkerSpec::Whisper(w) => {
            let per = w.fixtures.len().max(1) as u64;
            let own = w.max_requests.unwrap_or(per * u64::from(w.repetitions));
            w.repetitions = u32::try_from(n.div_ceil(per)).unwrap_or(u32::MAX);
            w.max_requests = Some(n);
            w.max_duration_s = None;
            own
        }
    };
    let scale = u32::try_from(n.div_ceil(own.max(1)).max(1)).unwrap_or(u32::MAX);
    a.timeout = arm.timeout.saturating_mul(scale);
    a
}

/// Each measured request's window from the block run's markers.
fn windows(markers: &[Marker]) -> Vec<RequestWindow> {
    let mut begin: BTreeMap<u64, (u64, Option<sampler::MarkerCpu>)> = BTreeMap::new();
    let mut out = Vec::new();
    for m in markers {
        match (m.phase, m.request_id) {
            (Phase::RequestBegin, Some(id)) => {
                begin.insert(id, (m.t_ns, m.cpu));
            }
            (Phase::RequestEnd, Some(id)) => {
                if let Some((b, cpu)) = begin.remove(&id) {
                    out.push(RequestWindow {
                        request_id: id,
                        begin_ns: b,
                        end_ns: m.t_ns,
                        cpu: cpu.zip(m.cpu),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Run the block run into `arm_dir/overhead/` and write the summary. While
/// the pooled interval straddles 1 + tolerance and `max_quads` allows, it
/// runs another round of `quads` quads with a fresh worker, into
/// `overhead/round-<n>/`. An interrupt stops the worker; the summary then
/// says the run failed. With `progress` (the arm's place in the run), the
/// block run's requests are shown as the arm's are: it takes as long as the
/// arm itself, or longer.
pub fn run_blocks(
    arm: &Arm,
    gate: &OverheadGate,
    exe: &Path,
    run: &RunDir,
    arm_dir: &Rel,
    interrupted: &AtomicBool,
    progress: Option<(usize, usize)>,
) -> anyhow::Result<OverheadRecord> {
    let budget = gate.max_quads.unwrap_or(gate.quads).max(gate.quads);
    let limit = 1.0 + gate.tolerance;
    let top = arm_dir.join(OVERHEAD_DIR);
    let mut rounds: Vec<(String, OverheadRecord)> = Vec::new();
    let mut used = 0u32;
    loop {
        let quads = gate.quads.min(budget - used);
        let (dir, name) = match rounds.len() {
            0 => (top.clone(), OVERHEAD_DIR.to_string()),
            n => {
                let name = format!("round-{}", n + 1);
                (top.join(&name), format!("{OVERHEAD_DIR}/{name}"))
            }
        };
        let plan = BlockPlan {
            quads,
            block_requests: gate.block_requests,
            injected_busy_us: gate.inject_busy_us,
            toggles: gate.toggles,
        };
        let record = run_round(arm, plan, exe, run, &dir, interrupted, progress)?;
        used += quads;
        let failed = record.status != ArmStatus::Completed;
        rounds.push((name, record));
        let pooled = OverheadRecord::pool(rounds.clone(), budget);
        if failed
            || pooled.decided(limit)
            || used >= budget
            || interrupted.load(std::sync::atomic::Ordering::Relaxed)
        {
            run.write_json(&arm_dir.join(OVERHEAD_FILE), &pooled)?;
            return Ok(pooled);
        }
        crate::console::note(format_args!(
            "memqual: overhead gate of arm {}: {} quads straddle 1 + {} (interval {:.4}..{:.4}); another {} quads (budget {budget})",
            arm.id,
            pooled.quad_ratios.len(),
            gate.tolerance,
            pooled.ratio_lower.unwrap_or(f64::NAN),
            pooled.ratio_upper.unwrap_or(f64::NAN),
            gate.quads.min(budget - used),
        ));
    }
}

/// One round of the block run into `dir`: its worker, switches and summary.
fn run_round(
    arm: &Arm,
    plan: BlockPlan,
    exe: &Path,
    run: &RunDir,
    dir: &Rel,
    interrupted: &AtomicBool,
    progress: Option<(usize, usize)>,
) -> anyhow::Result<OverheadRecord> {
    let blocked = with_requests(arm, plan.requests());
    let dir = dir.clone();
    run.create_dir(&dir)?;
    let toggle = BlockToggle::new(&plan);
    let watcher =
        progress.map(|place| crate::progress::ArmProgress::start(run, &dir, &blocked, place));
    let executed = arm::execute_blocks(&blocked, exe, run, &dir, interrupted, &toggle);
    if let Some(w) = watcher {
        w.finish();
    }
    let outcome = executed
        .with_context(|| format!("the overhead block run of arm {} could not start", arm.id))?;
    run.write_json(&dir.join(files::ARM), &outcome)?;
    let switches = toggle.switches();
    run.write_json(&dir.join(SWITCHES_FILE), &switches)?;
    let markers: Vec<Marker> = run
        .read_jsonl(&dir.join(files::MARKERS))
        .with_context(|| format!("cannot read the block run's markers in {dir}"))?;
    let results: Vec<RequestResult> = run
        .read_jsonl(&dir.join(files::RESULTS))
        .with_context(|| format!("cannot read the block run's results in {dir}"))?;
    let rows = reports::series::rows_at(run, &dir.join(files::SERIES))
        .with_context(|| format!("cannot read the block run's series in {dir}"))?;
    Ok(OverheadRecord::summarise(
        plan,
        &outcome,
        &windows(&markers),
        &results,
        &switches,
        &rows,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(phase: Phase, id: Option<u64>, t: u64) -> Marker {
        let mut m: Marker = serde_json::from_value(serde_json::json!({
            "phase": "request_begin", "seq": 0, "request_id": null, "t_ns": 0,
            "memory": {"resident_bytes": 1, "virtual_bytes": 1}
        }))
        .unwrap();
        m.phase = phase;
        m.request_id = id;
        m.t_ns = t;
        m
    }

    #[test]
    fn windows_pair_begin_and_end_markers_by_request() {
        let m = vec![
            marker(Phase::RequestBegin, Some(0), 10),
            marker(Phase::RequestEnd, Some(0), 20),
            marker(Phase::RequestBegin, Some(1), 30),
        ];
        assert_eq!(
            windows(&m),
            [RequestWindow {
                request_id: 0,
                begin_ns: 10,
                end_ns: 20,
                cpu: None,
            }]
        );
    }
}
