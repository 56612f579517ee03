//! `stability`: the soak found no growth in the worker or the system.

use super::context::{Context, check, not_evaluated};
use super::evaluate::Judge;
use super::{Check, Outcome};
use crate::gate_spec::StabilityGate;

impl Judge for StabilityGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        stability(ctx)
    }
}

/// `0.00 KiB/request [low, high]` of a slope, or why there is none.
fn slope_text(s: &analysis::growth::SeriesGrowth) -> String {
    match s.tail_bytes_per_request {
        Some(t) => format!(
            "tail slope {:.2} KiB/request [{:.2}, {:.2}]",
            t.estimate / 1024.0,
            t.low / 1024.0,
            t.high / 1024.0
        ),
        None => "no slope".into(),
    }
}

/// One series' classification as a check: bounded passes, growth fails,
/// inconclusive cannot be evaluated.
fn series_check(
    ctx: &Context,
    pointer: &str,
    s: &analysis::growth::SeriesGrowth,
    threshold: f64,
) -> Check {
    series_check_per(ctx, pointer, s, threshold, "request")
}

/// [`series_check`] for a series whose x axis counts `unit`s (requests,
/// or a lifecycle soak's cycles).
fn series_check_per(
    ctx: &Context,
    pointer: &str,
    s: &analysis::growth::SeriesGrowth,
    threshold: f64,
    unit: &str,
) -> Check {
    use analysis::growth::Classification;
    let mut c = check(format!("{} growth", s.series), "bytes");
    c.threshold = Some(threshold);
    c.measured = s.tail_bytes_per_request.map(|t| t.estimate);
    c.evidence.push(ctx.arm.at(pointer));
    c.outcome = match s.classification {
        Classification::Plateau | Classification::Step => Outcome::Pass,
        Classification::LinearGrowth => Outcome::Fail,
        Classification::Inconclusive => Outcome::NotEvaluated,
    };
    c.note = format!(
        "{} ({}; threshold in bytes per {unit}): {}",
        s.classification.name(),
        slope_text(s).replace("KiB/request", &format!("KiB/{unit}")),
        s.reason
    );
    c
}

/// memqual's own resident memory over the soak (`harness_self`): fails
/// when it grew (the lower end of its slope interval per hour above the
/// threshold), whatever the worker did, since a harness that grows makes
/// the memory pressure it is there to measure. It leaves the soak verdict
/// alone. No check when the soak was too short for a slope: the gate then
/// judges the worker as before.
fn harness_check(ctx: &Context) -> Option<Check> {
    let h = ctx.arm.arm.harness_self.as_ref()?;
    let slope = h.resident_bytes_per_hour?;
    let mut c = check("harness_resident growth", "bytes");
    c.threshold = Some(h.growth_threshold_bytes_per_hour);
    c.measured = Some(slope.low);
    c.evidence.push(ctx.arm.at("/harness_self"));
    c.outcome = if h.grew { Outcome::Fail } else { Outcome::Pass };
    c.note = format!(
        "memqual's own resident memory, bytes per hour (the slope interval's low end against the threshold): {}",
        h.reason
    );
    Some(c)
}

/// The soak verdict: every judged series bounded, and `stable` true.
fn stability(ctx: &Context) -> Vec<Check> {
    let Some(s) = &ctx.arm.arm.stability else {
        return vec![not_evaluated(
            "soak verdict",
            "bool",
            "the arm has no stability section: it was not soaked (run it with `memqual soak`)",
        )];
    };
    let worker_threshold = s.settings.growth.linear_slope_bytes_per_request;
    let system_threshold = s.settings.system_slope_bytes_per_request;
    // The settled series count toward the worker verdict, so each gets a
    // check of its own beside the request_end series.
    let worker_checks = |field: &str, series: &[analysis::growth::SeriesGrowth]| -> Vec<Check> {
        series
            .iter()
            .enumerate()
            .map(|(i, g)| {
                series_check(ctx, &format!("/stability/{field}/{i}"), g, worker_threshold)
            })
            .collect()
    };
    // A lifecycle soak judges the worker on its post-teardown floors, per
    // cycle; its request_end series are shown, not judged.
    let mut checks = match &s.lifecycle {
        Some(l) => l
            .floor_series
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let p = format!("/stability/lifecycle/floor_series/{i}");
                series_check_per(ctx, &p, g, l.slope_bytes_per_cycle, "cycle")
            })
            .collect(),
        None => worker_checks("worker_series", &s.worker_series),
    };
    checks.extend(worker_checks("settled_series", &s.settled_series));
    checks.extend(s.system_series.iter().enumerate().map(|(i, g)| {
        let p = format!("/stability/system_series/{i}");
        let mut c = series_check(ctx, &p, g, system_threshold);
        if s.system_growth_while_worker_flat.contains(&g.series) {
            c.note = format!(
                "system memory grows while the worker's own memory is bounded (what a \
                 resident-only soak calls healthy): {}",
                c.note
            );
        }
        c
    }));
    checks.extend(s.device_series.iter().enumerate().map(|(i, g)| {
        let p = format!("/stability/device_series/{i}");
        let threshold = if g.series == "gpu_worker" {
            worker_threshold
        } else {
            system_threshold
        };
        let mut c = series_check(ctx, &p, g, threshold);
        if s.device_growth_while_resident_flat.contains(&g.series) {
            c.note = format!(
                "device (GPU) memory grows while the worker's resident memory is flat \
                 (accelerator memory an RSS-only soak calls healthy): {}",
                c.note
            );
        }
        c
    }));
    checks.extend(harness_check(ctx));
    let mut c = check("soak verdict", "bool");
    c.threshold = Some(1.0);
    c.evidence.push(ctx.arm.at("/stability/stable"));
    let worker = s.worker.name();
    match s.stable {
        Some(true) => {
            c.outcome = Outcome::Pass;
            c.measured = Some(1.0);
            c.note = format!("stable: worker {worker}, no system series grows");
        }
        Some(false) => {
            c.outcome = Outcome::Fail;
            c.measured = Some(0.0);
            let growing: Vec<String> = s
                .judged_worker_series()
                .chain(&s.settled_series)
                .chain(&s.system_series)
                .chain(&s.device_series)
                .filter(|g| g.classification == analysis::growth::Classification::LinearGrowth)
                .map(|g| format!("{} {}", g.series, slope_text(g)))
                .collect();
            c.note = format!(
                "not stable: worker {worker}; growing: {}",
                growing.join("; ")
            );
            if !s.device_growth_while_resident_flat.is_empty() {
                c.note.push_str(&format!(
                    "; device memory grows while resident is flat: {}",
                    s.device_growth_while_resident_flat.join(", ")
                ));
            }
        }
        None => {
            c.note = format!(
                "inconclusive (worker {worker}): too few requests or too noisy to tell; \
                 run the soak longer — an inconclusive soak never passes"
            );
        }
    }
    checks.push(c);
    checks
}
