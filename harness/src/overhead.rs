//! The overhead gate's twin runs: after an arm's measured run, the same
//! worker spec runs again `pairs` times as an A/B pair, A with the external
//! sampler and B without, alternating (ABAB…), each into
//! `arms/<id>/overhead/<n>-<a|b>/`; then `arms/<id>/overhead.json`.

use crate::arm::{self, Observation};
use crate::protocol::Arm;
use anyhow::Context;
use reports::overhead::{OVERHEAD_DIR, OVERHEAD_FILE, OverheadRecord, Twin, TwinRun};
use reports::record::files;
use run_dir::{Rel, RunDir};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The pairs the arm's `overhead` gate asks for, if it declares one.
pub fn declared_pairs(arm: &Arm) -> Option<u32> {
    arm.gates
        .gates
        .iter()
        .find_map(|g| g.as_overhead())
        .map(|o| o.pairs)
}

/// Run the twins into `arm_dir` and write the summary. An interrupt stops
/// the sequence; the summary then says how many ran.
pub fn run_twins(
    arm: &Arm,
    exe: &Path,
    run: &RunDir,
    arm_dir: &Rel,
    pairs: u32,
    interrupted: &AtomicBool,
) -> anyhow::Result<OverheadRecord> {
    let mut runs = Vec::with_capacity(pairs as usize * 2);
    for order in 0..pairs * 2 {
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        let label = Twin::at(order);
        let twins = arm_dir.join(OVERHEAD_DIR);
        run.create_dir(&twins)?;
        let dir = twins.join(&label.dir_name(order));
        run.create_dir(&dir)?;
        let observation = if label.sampled() {
            Observation::SamplerOnly
        } else {
            Observation::MarkersOnly
        };
        let outcome = arm::execute_observed(arm, exe, run, &dir, interrupted, observation)
            .with_context(|| format!("twin run {} of arm {} could not start", order, arm.id))?;
        run.write_json(&dir.join(files::ARM), &outcome)?;
        let twin = TwinRun::read(run, arm_dir, label, order)
            .with_context(|| format!("cannot read twin run {dir}"))?;
        note!(
            "memqual:   overhead twin {order} ({}): {:?}, steady median {}",
            if label.sampled() {
                "A, sampled"
            } else {
                "B, unsampled"
            },
            twin.status,
            twin.steady_median_ns
                .map_or("n/a".into(), |ns| format!("{:.3} ms", ns / 1e6))
        );
        runs.push(twin);
    }
    let record = OverheadRecord::summarise(pairs, runs);
    run.write_json(&arm_dir.join(OVERHEAD_FILE), &record)?;
    Ok(record)
}
