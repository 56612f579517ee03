//! Receipt assembly: reads a run directory through [`RunDir`] and builds the
//! [`Receipt`] — per arm the phase table from markers and series, latency,
//! speech results and comparisons, snapshots, census, stability, overhead —
//! then judges the declared gates. The receipt's types live in
//! [`crate::receipt`]; everything that reads raw data to fill them lives here.

mod device_memory;
mod placement;
pub mod speech;

use crate::receipt::*;
use crate::record::{ArmOutcome, ArmStatus, RunInfo, files};
use crate::series::{EnvelopeBuilder, SeriesPoint, SeriesPoints};
use crate::speech::ControlResults;
use crate::{RECEIPT_FORMAT_VERSION, ReportError};
use analysis::held_memory::{HeldMemoryDeltas, PhaseHeldDeltas};
use analysis::stats;
use run_dir::{Rel, RunDir};
use sampler::{Marker, Phase, SeriesRow, SystemLevels};
use worker_contract::{ArmSpec, RequestResult, RuntimeReport, WorkerSpec};

/// Per-interval maxima of the series between consecutive markers.
#[derive(Debug, Clone, Default)]
struct Interval {
    samples: u64,
    max_resident: Option<u64>,
    max_footprint: Option<u64>,
    max_gpu_worker: Option<u64>,
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn delta(first: Option<u64>, last: Option<u64>) -> Option<i64> {
    Some(last? as i64 - first? as i64)
}

/// Stream `series.csv` once: the summary, maxima per marker interval
/// (interval i is `(t[i-1], t[i]]`; interval 0 is everything up to marker 0),
/// and each row's drawn values into `points` (for the page and the trace,
/// so they need not read the file again).
fn scan_series(
    run: &RunDir,
    rel: &Rel,
    markers: &[Marker],
    period_ns: Option<u64>,
    points: &mut EnvelopeBuilder,
) -> Result<(SeriesSummary, Vec<Interval>), ReportError> {
    let mut intervals = vec![Interval::default(); markers.len()];
    let mut summary = SeriesSummary {
        period_ns,
        ..SeriesSummary::default()
    };
    let Some(mut reader) = run.csv_reader(rel)? else {
        return Ok((summary, intervals));
    };
    // Bounded however long the series: exact up to 65,536 rows.
    let mut intervals_ns = analysis::quantiles::Quantiles::new();
    let mut lateness = analysis::quantiles::Quantiles::new();
    let mut cost_sum = 0f64;
    let mut cpu_sum = 0f64;
    let (mut first, mut prev): (Option<SeriesRow>, Option<SeriesRow>) = (None, None);
    let mut next_marker = 0usize;
    let mut freshness = analysis::freshness::FreshnessScan::default();
    // One reused byte record: a soak's series is hundreds of thousands of
    // rows, and a fresh record (validated as UTF-8) per row was most of the
    // parse.
    let bad = |line: u64, e: csv::Error| ReportError::Record {
        path: run.display(rel),
        line,
        reason: e.to_string(),
    };
    let headers = reader.byte_headers().map_err(|e| bad(1, e))?.clone();
    let mut record = csv::ByteRecord::new();
    for line in 2u64.. {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(bad(line, e)),
        }
        let row: SeriesRow = record
            .deserialize(Some(&headers))
            .map_err(|e| bad(line, e))?;
        points.push(SeriesPoint {
            t_ns: row.t_ns,
            resident_bytes: row.resident_bytes,
            footprint_bytes: row.footprint_bytes,
        });
        while next_marker < markers.len() && markers[next_marker].t_ns < row.t_ns {
            next_marker += 1;
        }
        if let Some(iv) = intervals.get_mut(next_marker)
            && row.resident_bytes.is_some()
        {
            iv.samples += 1;
            iv.max_resident = max_opt(iv.max_resident, row.resident_bytes);
            iv.max_footprint = max_opt(iv.max_footprint, row.footprint_bytes);
            iv.max_gpu_worker = max_opt(iv.max_gpu_worker, row.gpu_worker_bytes.bytes());
        }
        device_row(&mut summary.device, &row);
        summary.samples += 1;
        freshness.push(&row);
        if row.resident_bytes.is_none() {
            summary.rows_without_process += 1;
        }
        summary.skipped_ticks += row.skipped_before;
        summary.max_resident_bytes = max_opt(summary.max_resident_bytes, row.resident_bytes);
        summary.max_footprint_bytes = max_opt(summary.max_footprint_bytes, row.footprint_bytes);
        summary.max_virtual_bytes = max_opt(summary.max_virtual_bytes, row.virtual_bytes);
        summary.max_lateness_ns = max_opt(summary.max_lateness_ns, Some(row.lateness_ns));
        summary.max_cost_ns = max_opt(summary.max_cost_ns, Some(row.cost_ns));
        cost_sum += row.cost_ns as f64;
        cpu_sum += row.cost_cpu_ns as f64;
        lateness.push(row.lateness_ns);
        let sys = &mut summary.system;
        sys.min_available_bytes = match (sys.min_available_bytes, row.sys_available_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(v) = row.sys_psi_some_avg10 {
            sys.max_psi_some_avg10 = Some(sys.max_psi_some_avg10.map_or(v, |m: f64| m.max(v)));
        }
        sys.max_pressure_level = sys.max_pressure_level.max(row.sys_pressure_level);
        if let Some(p) = &prev {
            intervals_ns.push(row.t_ns.saturating_sub(p.t_ns));
        }
        if first.is_none() {
            first = Some(row.clone());
        }
        prev = Some(row);
    }
    if let (Some(f), Some(l)) = (&first, &prev) {
        let sys = &mut summary.system;
        sys.swap_used_delta_bytes = delta(f.sys_swap_used_bytes, l.sys_swap_used_bytes);
        sys.pgpgin_delta = delta(f.sys_pgpgin, l.sys_pgpgin);
        sys.pgpgout_delta = delta(f.sys_pgpgout, l.sys_pgpgout);
        sys.pswpin_delta = delta(f.sys_pswpin, l.sys_pswpin);
        sys.pswpout_delta = delta(f.sys_pswpout, l.sys_pswpout);
        sys.pageins_delta = delta(f.sys_pageins, l.sys_pageins);
        sys.pageouts_delta = delta(f.sys_pageouts, l.sys_pageouts);
        sys.psi_some_total_delta_us = delta(f.sys_psi_some_total_us, l.sys_psi_some_total_us);
        sys.psi_full_total_delta_us = delta(f.sys_psi_full_total_us, l.sys_psi_full_total_us);
    }
    let levels = |r: &Option<SeriesRow>| r.as_ref().map(SystemLevels::from_row).unwrap_or_default();
    summary.system.held = HeldMemoryDeltas::between(&levels(&first), &levels(&prev));
    summary.median_interval_ns = intervals_ns.percentile(50.0);
    summary.system_freshness = freshness.finish();
    summary.p99_lateness_ns = lateness.percentile(99.0);
    summary.p999_lateness_ns = lateness.percentile(99.9);
    summary.percentiles_relative_error = (!lateness.is_exact() || !intervals_ns.is_exact())
        .then_some(analysis::quantiles::Quantiles::RELATIVE_ERROR);
    if summary.samples > 0 {
        summary.mean_cost_ns = Some(cost_sum / summary.samples as f64);
        summary.mean_cost_cpu_ns = Some(cpu_sum / summary.samples as f64);
    }
    Ok((summary, intervals))
}

/// Fold one row's device cells into the arm's device summary: nothing for a
/// row without device columns, so a host without a GPU gets no summary.
fn device_row(device: &mut Option<crate::receipt::DeviceSeriesSummary>, row: &SeriesRow) {
    if row.gpu_used_bytes.is_absent() {
        return;
    }
    let d = device.get_or_insert_with(Default::default);
    let Some(used) = row.gpu_used_bytes.bytes() else {
        d.rows_unread += 1;
        return;
    };
    d.rows_read += 1;
    let worker = row.gpu_worker_bytes.bytes();
    if d.first_worker_bytes.is_none() {
        d.first_worker_bytes = worker;
    }
    if worker.is_some() {
        d.last_worker_bytes = worker;
    }
    d.max_worker_bytes = max_opt(d.max_worker_bytes, worker);
    d.max_used_bytes = max_opt(d.max_used_bytes, Some(used));
    d.total_bytes = max_opt(d.total_bytes, row.gpu_total_bytes.bytes());
    d.max_others_bytes = max_opt(d.max_others_bytes, row.gpu_others_bytes.bytes());
}

/// Build the phase table: each marker with the series maxima of its window.
/// One row a marker, made as they are taken (a long soak's rows are never
/// all held).
fn phase_rows<'a>(
    markers: &'a [Marker],
    intervals: &'a [Interval],
    page_bytes: u64,
) -> impl Iterator<Item = PhaseRow> + 'a {
    // Index of the marker whose reset opened the current window, if any.
    let mut window_opened_by: Option<usize> = None;
    let mut acc = Interval::default();
    markers.iter().enumerate().map(move |(i, m)| {
        let iv = &intervals[i];
        acc.samples += iv.samples;
        acc.max_resident = max_opt(acc.max_resident, iv.max_resident);
        acc.max_footprint = max_opt(acc.max_footprint, iv.max_footprint);
        acc.max_gpu_worker = max_opt(acc.max_gpu_worker, iv.max_gpu_worker);

        let opener = window_opened_by.map(|j| &markers[j]);
        let observed_resident = [
            acc.max_resident,
            opener.map(|o| o.memory.resident_bytes),
            Some(m.memory.resident_bytes),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(m.memory.resident_bytes);
        let observed_footprint = [
            acc.max_footprint,
            opener.and_then(|o| o.memory.footprint_bytes),
            m.memory.footprint_bytes,
        ]
        .into_iter()
        .flatten()
        .max();
        let resident_missed = m
            .memory
            .resident_peak_bytes
            .map(|peak| peak > observed_resident + page_bytes);
        let footprint_missed = match (m.memory.footprint_peak_bytes, observed_footprint) {
            (Some(peak), Some(seen)) => Some(peak > seen + page_bytes),
            _ => None,
        };
        let flag = match (resident_missed, footprint_missed) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
        };
        let row = PhaseRow {
            phase: m.phase,
            seq: m.seq,
            request_id: m.request_id,
            t_ns: m.t_ns,
            memory: m.memory.clone(),
            window_start_ns: opener.map(|o| o.t_ns),
            samples: acc.samples,
            series_max_resident_bytes: acc.max_resident,
            series_max_footprint_bytes: acc.max_footprint,
            observed_max_resident_bytes: observed_resident,
            observed_max_footprint_bytes: observed_footprint,
            peak_between_samples: flag,
            series_max_gpu_worker_bytes: acc.max_gpu_worker,
            system: i
                .checked_sub(1)
                .and_then(|j| markers[j].system.as_ref().zip(m.system.as_ref()))
                .and_then(|(before, after)| PhaseHeldDeltas::between(before, after)),
        };
        if m.memory.peak_reset == Some(true) {
            window_opened_by = Some(i);
            acc = Interval::default();
        }
        row
    })
}

fn latency(results: &[RequestResult]) -> Option<LatencySummary> {
    let first = results.first()?;
    let values: Vec<f64> = results.iter().map(|r| r.latency_ns as f64).collect();
    Some(LatencySummary {
        count: results.len() as u64,
        first_ns: first.latency_ns,
        p50_ns: stats::percentile(&values, 50.0)?,
        p95_ns: stats::percentile(&values, 95.0)?,
        max_ns: results.iter().map(|r| r.latency_ns).max()?,
    })
}

/// Assemble one arm from its folder `arm` (`arms/<id>/`).
/// One arm's receipt from its folder `arm`; its series' drawn values go to
/// `points`.
pub fn assemble_arm(
    run: &RunDir,
    arm: &Rel,
    id: &str,
    page_bytes: u64,
    points: &mut EnvelopeBuilder,
) -> Result<ArmReceipt, ReportError> {
    let outcome: Option<ArmOutcome> = run.read_json(&arm.join(files::ARM))?;
    let spec: Option<ArmSpec> = run.read_json(&arm.join(files::SPEC))?;
    let markers: Vec<Marker> = run.read_jsonl(&arm.join(files::MARKERS))?;
    let results: Vec<RequestResult> = run.read_jsonl(&arm.join(files::RESULTS))?;
    let period_ns = outcome
        .as_ref()
        .and_then(|o| o.sampler.as_ref())
        .map(|s| s.period_ns);
    let (mut series, intervals) =
        scan_series(run, &arm.join(files::SERIES), &markers, period_ns, points)?;
    series.accelerator = outcome
        .as_ref()
        .and_then(|o| o.sampler.as_ref())
        .and_then(|s| s.accelerator.clone());
    series.metal = outcome
        .as_ref()
        .and_then(|o| o.sampler.as_ref())
        .and_then(|s| s.metal.clone());
    series.system_period_ns = outcome
        .as_ref()
        .and_then(|o| o.sampler.as_ref())
        .map(|s| s.system_period_ns)
        .filter(|ns| *ns > 0);
    // A long soak's request rows go to their own file as they are made; the
    // receipt keeps what a reviewer and the gates need (each phase's first,
    // latest and largest rows, which is all the figures below read), and
    // the file's digest.
    let (phases, phase_rows) =
        crate::phase_rows::split(run, id, phase_rows(&markers, &intervals, page_bytes))?;
    drop(intervals);
    let mut runtime: Option<RuntimeReport> = run.read_json(&arm.join(files::RUNTIME))?;
    if let Some(coreml) = runtime.as_mut().and_then(|r| r.coreml.as_mut()) {
        coreml.placement = placement::settled(run, arm, &coreml.placement)?;
    }
    let fixtures = match spec.as_ref().map(|s| &s.worker) {
        Some(WorkerSpec::Whisper(w)) => w
            .fixtures
            .iter()
            .cloned()
            .chain(w.long_form.as_ref().map(|l| l.as_fixture()))
            .collect(),
        _ => Vec::new(),
    };
    let phase_t = |phase: Phase| phases.iter().find(|p| p.phase == phase).map(|p| p.t_ns);
    let warmup_ns = match (phase_t(Phase::StateReady), phase_t(Phase::WarmupDone)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let mut speech = crate::speech::assemble(&results, runtime, &fixtures, warmup_ns);
    if let (Some(speech), Some(WorkerSpec::Whisper(w))) =
        (speech.as_mut(), spec.as_ref().map(|s| &s.worker))
        && let Some(cancel) = &w.cancel
    {
        speech.cancellation = Some(analysis::cancel::assemble(cancel, &results, &markers));
    }
    let residency = match spec.as_ref().map(|s| &s.worker) {
        Some(WorkerSpec::Whisper(w)) if analysis::residency::applies(w) => {
            let series = crate::series::idle_footprints(run, &arm.join(files::SERIES), &markers)?;
            Some(analysis::residency::build(w, &markers, &results, series))
        }
        _ => None,
    };
    let stability = match run.read_json(&arm.join(files::SOAK))? {
        Some(settings) => Some(crate::stability::analyse_arm(
            run, arm, &markers, &results, &settings,
        )?),
        None => None,
    };
    let harness_self = crate::harness_self::assemble(run, arm, stability.as_ref())?;
    let peak_between_samples = phases.iter().any(|p| p.peak_between_samples == Some(true));
    let snapshots = crate::snapshots::assemble(run, arm, &markers, &results)?;
    let census = crate::census::assemble(run, arm)?.map(|(receipt, _)| receipt);
    let overhead = crate::overhead::assemble(run, arm)?;
    let memory_ceiling = outcome.as_ref().and_then(|o| o.memory_ceiling.clone());
    let (status, failure, exit, timed_out, worker) = match outcome {
        Some(o) => (o.status, o.failure, o.exit, o.timed_out, o.hello),
        None => (
            ArmStatus::Failed,
            vec![format!(
                "no {} for this arm: the harness stopped before the arm ended",
                files::ARM
            )],
            None,
            false,
            None,
        ),
    };
    let request_policy = spec.as_ref().and_then(crate::request_policy::of);
    let first = |phase: sampler::Phase| phases.iter().find(|p| p.phase == phase).map(|p| &p.memory);
    let state_accounting = analysis::state_accounting::build(
        first(sampler::Phase::ModelLoaded),
        first(sampler::Phase::StateReady),
        speech.as_ref().and_then(|s| s.runtime.as_ref()),
        matches!(spec.as_ref().map(|s| &s.worker), Some(WorkerSpec::Whisper(w)) if w.state_bounds.is_some()),
    );
    let device_memory = device_memory::build(&phases);
    // Every marker, not the receipt's rows: attribution sets profiles
    // against each listed phase. Only an arm that profiled needs them.
    let points: Vec<crate::attribution::MarkerPoint> = match spec.as_ref() {
        Some(s) if s.attribution.is_some() => markers
            .iter()
            .map(|m| crate::attribution::MarkerPoint {
                phase: m.phase,
                seq: m.seq,
                request_id: m.request_id,
                resident_bytes: m.memory.resident_bytes,
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut attribution = crate::attribution::assemble(run, arm, spec.as_ref(), &points)?;
    crate::attribution::with_measured_cost(
        &mut attribution,
        overhead.as_ref(),
        format!("{arm}/{}", crate::overhead::OVERHEAD_FILE),
    );
    Ok(ArmReceipt {
        id: id.to_string(),
        status,
        failure,
        exit,
        timed_out,
        memory_ceiling,
        worker,
        spec,
        requests: results.len() as u64,
        latency: latency(&results),
        phases,
        phase_rows,
        series,
        peak_between_samples,
        speech,
        snapshots,
        census,
        stability,
        overhead,
        residency,
        request_policy,
        state_accounting,
        device_memory,
        attribution,
        harness_self,
    })
}

/// Assemble the receipt of the run in `dir`.
pub fn assemble(dir: &RunDir) -> Result<Receipt, ReportError> {
    assemble_with_series(dir).map(|(receipt, _)| receipt)
}

/// Assess the receipt's integrity (and so its gates) again, after the raw
/// seal changed under an assembled receipt: `report` assembles while it
/// checks the raw data, then records what the check found in the seal.
pub fn reassess_integrity(dir: &RunDir, receipt: &mut Receipt) -> Result<(), ReportError> {
    reassess_integrity_over(dir, dir.raw_seal()?, receipt)
}

/// [`reassess_integrity`] over a raw seal not written yet: `report` writes
/// its new `raw-seal.json` only after the run is re-derived from it.
pub fn reassess_integrity_over(
    dir: &RunDir,
    seal: run_dir::raw_seal::RawSeal,
    receipt: &mut Receipt,
) -> Result<(), ReportError> {
    receipt.integrity = Integrity::assess_over(dir, &receipt.run, &receipt.arms, seal)?;
    receipt.gates = crate::gates::evaluate(receipt);
    Ok(())
}

/// [`assemble`], with every arm's series as the page and the trace draw it,
/// from the same single read of each `series.csv` (a soak's is most of its
/// run directory).
pub fn assemble_with_series(dir: &RunDir) -> Result<(Receipt, SeriesPoints), ReportError> {
    let run: RunInfo =
        dir.read_json(&Rel::file(files::RUN))?
            .ok_or_else(|| {
                ReportError::Invalid {
            path: dir.display(&Rel::file(files::RUN)),
            reason:
                "missing: this is not a memqual run directory, or the run stopped before it began"
                    .into(),
        }
            })?;
    let mut arms = Vec::new();
    let mut series = SeriesPoints::new();
    for id in &run.arms {
        let arm = dir.arm(id)?;
        if !dir.has_dir(&arm)? {
            continue; // never started (the run stopped before it)
        }
        let mut points = EnvelopeBuilder::new();
        arms.push(assemble_arm(
            dir,
            &arm,
            id,
            run.page_size_bytes,
            &mut points,
        )?);
        series.insert(id.clone(), points.finish());
    }
    let mut comparisons = Vec::new();
    for (id, control) in &run.controls {
        let (Some(a), Some(c)) = (
            arms.iter().find(|a| &a.id == id),
            arms.iter().find(|a| &a.id == control),
        ) else {
            continue; // one of them never ran
        };
        let outputs = |arm: &str| -> Result<Vec<_>, ReportError> {
            let results: Vec<RequestResult> =
                dir.read_jsonl(&dir.arm(arm)?.join(files::RESULTS))?;
            Ok(crate::speech::transcriptions(&results)
                .into_iter()
                .map(|(_, t)| crate::speech::to_quality(t))
                .collect())
        };
        let results = ControlResults {
            arm: outputs(id)?,
            control: outputs(control)?,
        };
        comparisons.push(speech::compare(a, c, &results));
        let control_quality = c.speech.as_ref().map(|s| s.quality.clone());
        let saving = match (&a.state_accounting, &c.state_accounting) {
            (Some(arm), Some(ctl)) => Some(analysis::state_accounting::saving(control, ctl, arm)),
            _ => None,
        };
        if let (Some(arm), Some(saving)) = (arms.iter_mut().find(|a| &a.id == id), saving)
            && let Some(accounting) = &mut arm.state_accounting
        {
            accounting.findings.extend(saving.findings());
            accounting.against_control = Some(saving);
        }
        if let (Some(arm), Some(ctl)) = (arms.iter_mut().find(|a| &a.id == id), control_quality)
            && let Some(speech) = &mut arm.speech
        {
            speech.quality.add_qoi(control, &ctl);
        }
        let control_census = crate::census::assemble(dir, &dir.arm(control)?)?;
        if let (Some(arm), Some((_, raw))) = (arms.iter_mut().find(|a| &a.id == id), control_census)
            && let Some(census) = &mut arm.census
        {
            crate::census::pair(census, control, &raw);
        }
    }
    let admission = dir.read_json(&Rel::file(files::ADMISSION))?;
    let identity = dir.read_json(&Rel::file(files::HOST))?;
    let integrity = Integrity::assess(dir, &run, &arms)?;
    let mut receipt = Receipt {
        format_version: RECEIPT_FORMAT_VERSION.to_string(),
        identity,
        integrity,
        run,
        arms,
        comparisons,
        admission,
        gates: None,
        seal: None,
    };
    receipt.gates = crate::gates::evaluate(&receipt);
    Ok((receipt, series))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ExitInfo;
    use sampler::TaskMemory;

    fn marker(seq: u64, phase: Phase, t_ns: u64, resident: u64, peak: u64) -> Marker {
        Marker {
            phase,
            seq,
            request_id: phase.is_request().then_some(0),
            t_ns,
            memory: TaskMemory {
                resident_bytes: resident,
                resident_peak_bytes: Some(peak),
                peak_reset: Some(true),
                ..TaskMemory::default()
            },
            system: None,
            cpu: None,
        }
    }

    fn interval(samples: u64, max: Option<u64>) -> Interval {
        Interval {
            samples,
            max_resident: max,
            max_footprint: None,
            max_gpu_worker: None,
        }
    }

    #[test]
    fn flag_is_set_exactly_when_the_peak_exceeds_observations_by_more_than_a_page() {
        let page = 4096;
        let mib = 1 << 20;
        let markers = vec![
            marker(0, Phase::RequestBegin, 100, 10 * mib, 10 * mib),
            // Spike of 200 MiB between samples; samples saw only 12 MiB.
            marker(1, Phase::RequestEnd, 200, 10 * mib, 210 * mib),
            // Peak exactly one page above what was seen: not flagged.
            marker(2, Phase::IdleEnd, 300, 10 * mib, 12 * mib + page),
            // One byte more than a page: flagged.
            marker(3, Phase::TeardownDone, 400, 10 * mib, 12 * mib + page + 1),
        ];
        let intervals = vec![
            interval(0, None),
            interval(3, Some(12 * mib)),
            interval(2, Some(12 * mib)),
            interval(1, Some(12 * mib)),
        ];
        let rows = phase_rows(&markers, &intervals, page).collect::<Vec<_>>();
        assert_eq!(rows[0].peak_between_samples, Some(false));
        assert_eq!(rows[1].peak_between_samples, Some(true));
        assert_eq!(rows[1].observed_max_resident_bytes, 12 * mib);
        assert_eq!(rows[1].window_start_ns, Some(100));
        assert_eq!(rows[2].peak_between_samples, Some(false));
        assert_eq!(rows[3].peak_between_samples, Some(true));
    }

    #[test]
    fn boundary_markers_count_as_observations() {
        // A phase that frees memory right after it starts: the peak is the
        // opening marker's own value, which was observed, so no flag.
        let mib = 1 << 20;
        let markers = vec![
            marker(0, Phase::IdleEnd, 100, 300 * mib, 300 * mib),
            marker(1, Phase::TeardownDone, 200, 5 * mib, 300 * mib),
        ];
        let intervals = vec![interval(0, None), interval(1, Some(5 * mib))];
        let rows = phase_rows(&markers, &intervals, 4096).collect::<Vec<_>>();
        assert_eq!(rows[1].peak_between_samples, Some(false));
    }

    #[test]
    fn without_resets_the_window_is_the_whole_arm() {
        let mib = 1 << 20;
        let mut m0 = marker(0, Phase::ProcessStart, 100, 10 * mib, 10 * mib);
        let mut m1 = marker(1, Phase::ModelLoaded, 200, 50 * mib, 80 * mib);
        m0.memory.peak_reset = None;
        m1.memory.peak_reset = None;
        let intervals = vec![interval(1, Some(80 * mib)), interval(1, Some(50 * mib))];
        let rows = phase_rows(&[m0, m1], &intervals, 4096).collect::<Vec<_>>();
        // The lifetime peak of 80 MiB was seen in the first interval.
        assert_eq!(rows[1].window_start_ns, None);
        assert_eq!(rows[1].samples, 2);
        assert_eq!(rows[1].peak_between_samples, Some(false));
    }

    #[test]
    fn no_kernel_peak_means_no_verdict() {
        let mut m = marker(0, Phase::ProcessStart, 1, 1, 1);
        m.memory.resident_peak_bytes = None;
        let rows = phase_rows(&[m], &[interval(0, None)], 4096).collect::<Vec<_>>();
        assert_eq!(rows[0].peak_between_samples, None);
    }

    /// A new run directory in a temporary folder (kept alive by the first).
    pub(crate) fn test_run() -> (tempfile::TempDir, RunDir) {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        (tmp, run)
    }

    fn write_run(run: &RunDir, rows: &[SeriesRow], markers: &[Marker], with_outcome: bool) {
        let info = RunInfo {
            protocol_name: "p".into(),
            protocol_path: "p.toml".into(),
            page_size_bytes: 4096,
            arms: vec!["a".into(), "never-ran".into()],
            ..RunInfo::default()
        };
        run.write_json(&Rel::file(files::RUN), &info).unwrap();
        let arm = run.arm("a").unwrap();
        run.create_dir(&arm).unwrap();
        let mut series = run_dir::CsvAppender::new(run.appender(&arm.join(files::SERIES)).unwrap());
        for r in rows {
            series.append(r).unwrap();
        }
        let mut out = run.appender(&arm.join(files::MARKERS)).unwrap();
        for m in markers {
            out.append_json(m).unwrap();
        }
        let mut out = run.appender(&arm.join(files::RESULTS)).unwrap();
        for l in [10u64, 30, 20] {
            out.append_json(&serde_json::json!({"request_id": 0, "latency_ns": l * 1_000_000,
                "body": {"kind": "calibration", "held_bytes": 0, "leaked_bytes": 0, "spike_bytes": 0,
                         "spike_resident_ns": null, "spike_freed_ns": null}}))
                .unwrap();
        }
        if with_outcome {
            let outcome = ArmOutcome {
                id: "a".into(),
                status: ArmStatus::Completed,
                failure: vec![],
                worker_executable: "w".into(),
                worker_pid: Some(1),
                hello: None,
                exit: Some(ExitInfo {
                    code: Some(0),
                    signal: None,
                    signal_name: None,
                }),
                timed_out: false,
                timeout_s: 1,
                bye: true,
                markers: markers.len() as u64,
                results: 3,
                worker_errors: vec![],
                started_ns: 0,
                ended_ns: 1,
                sampler: Some(sampler::SamplerStats {
                    period_ns: 50,
                    ..Default::default()
                }),
                memory_ceiling: None,
            };
            run.write_json(&arm.join(files::ARM), &outcome).unwrap();
        }
        run.seal_raw(&[Rel::file(files::RUN), arm]).unwrap();
    }

    fn row(
        tick: u64,
        t_ns: u64,
        lateness_ns: u64,
        resident: u64,
        swap_used: u64,
        pgpgout: u64,
    ) -> SeriesRow {
        SeriesRow {
            tick,
            t_ns,
            deadline_ns: t_ns - lateness_ns,
            lateness_ns,
            cost_ns: 10,
            cost_cpu_ns: 4,
            resident_bytes: Some(resident),
            sys_swap_used_bytes: Some(swap_used),
            sys_pgpgout: Some(pgpgout),
            sys_available_bytes: Some(1000 - resident),
            ..SeriesRow::default()
        }
    }

    #[test]
    fn a_run_directory_assembles_into_summary_and_phase_windows() {
        let (_tmp, run) = test_run();
        // Ticks every 50 ns; tick 3 skipped one period.
        let mut rows = vec![
            row(0, 100, 0, 10, 0, 7),
            row(1, 150, 2, 40, 0, 7),
            row(3, 250, 4, 90, 8, 9),
            row(4, 300, 6, 20, 16, 12),
        ];
        rows[2].skipped_before = 1;
        let markers = vec![
            marker(0, Phase::ProcessStart, 120, 10, 10),
            marker(1, Phase::ModelLoaded, 260, 20, 95),
        ];
        write_run(&run, &rows, &markers, true);
        let r = assemble(&run).unwrap();
        assert_eq!(
            r.arms.len(),
            1,
            "an arm that never started has no directory and no entry"
        );
        let a = &r.arms[0];
        let s = &a.series;
        assert_eq!(s.samples, 4);
        assert_eq!(s.skipped_ticks, 1);
        assert_eq!(s.median_interval_ns, Some(50.0));
        assert_eq!(s.max_lateness_ns, Some(6));
        // Lateness 0, 2, 4, 6: the 99.9th percentile sits 0.997 of the way
        // from 4 to 6.
        assert!((s.p999_lateness_ns.unwrap() - 5.994).abs() < 1e-9);
        assert_eq!(s.max_resident_bytes, Some(90));
        assert_eq!(s.mean_cost_cpu_ns, Some(4.0));
        assert_eq!(s.period_ns, Some(50));
        assert_eq!(s.system.swap_used_delta_bytes, Some(16));
        assert_eq!(s.system.pgpgout_delta, Some(5));
        assert_eq!(s.system.min_available_bytes, Some(910));
        // Window of model_loaded: rows with 120 < t <= 260 (40 and 90).
        let loaded = a.phase(Phase::ModelLoaded, None).unwrap();
        assert_eq!(loaded.samples, 2);
        assert_eq!(loaded.series_max_resident_bytes, Some(90));
        assert_eq!(
            loaded.peak_between_samples,
            Some(false),
            "95 is within a page of 90"
        );
        // process_start's window: the one row before it.
        assert_eq!(a.phases[0].samples, 1);
        let lat = a.latency.as_ref().unwrap();
        assert_eq!(
            (lat.count, lat.first_ns, lat.max_ns),
            (3, 10_000_000, 30_000_000)
        );
        assert_eq!(lat.p50_ns, 20_000_000.0);
    }

    #[test]
    fn an_arm_without_its_record_is_failed_with_the_reason() {
        let (_tmp, run) = test_run();
        write_run(
            &run,
            &[row(0, 100, 0, 1, 0, 0)],
            &[marker(0, Phase::ProcessStart, 120, 1, 1)],
            false,
        );
        let r = assemble(&run).unwrap();
        assert!(!r.integrity.complete);
        assert_eq!(
            r.integrity.notes,
            [
                "arm a has no arm.json: the run stopped during it",
                "arm never-ran never started"
            ]
        );
        assert_eq!(r.arms[0].status, ArmStatus::Failed);
        assert!(r.arms[0].failure[0].contains("harness stopped before the arm ended"));
        assert_eq!(
            r.arms[0].phases.len(),
            1,
            "the markers that arrived are kept"
        );
    }

    const COMMITTED_SCHEMA: &str = include_str!("../../receipt.schema.json");

    #[test]
    fn committed_receipt_schema_is_generated_from_the_types() {
        // Regenerate with: MEMQUAL_BLESS=1 cargo test -p reports committed_receipt_schema
        let generated = crate::receipt_schema();
        if std::env::var_os("MEMQUAL_BLESS").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/receipt.schema.json");
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert_eq!(
            COMMITTED_SCHEMA, generated,
            "reports/receipt.schema.json is stale: run MEMQUAL_BLESS=1 cargo test -p reports committed_receipt_schema"
        );
    }

    #[test]
    fn a_sealed_run_verifies_and_any_flipped_byte_names_its_file() {
        let (_tmp, run) = test_run();
        let rows = [row(0, 100, 0, 10, 0, 7), row(1, 150, 2, 40, 0, 7)];
        write_run(
            &run,
            &rows,
            &[marker(0, Phase::ProcessStart, 120, 1, 1)],
            true,
        );
        let mut r = assemble(&run).unwrap();
        assert!(!r.integrity.complete, "never-ran never started");
        crate::seal::seal(&run, &mut r).unwrap();
        let verify = || crate::seal::verify(&run, None).problems;
        assert_eq!(verify(), []);
        // The sealed receipt matches the committed schema.
        let schema: serde_json::Value = serde_json::from_str(COMMITTED_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let text = std::fs::read_to_string(run.path().join(files::RECEIPT)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");

        let manifest: crate::seal::Manifest =
            serde_json::from_slice(&std::fs::read(run.path().join(files::MANIFEST)).unwrap())
                .unwrap();
        let listed: Vec<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            listed,
            [
                "arms/a/arm.json",
                "arms/a/markers.jsonl",
                "arms/a/results.jsonl",
                "arms/a/series.csv",
                "raw-seal.json",
                "run.json"
            ]
        );
        let mut every = listed.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        every.extend([files::RECEIPT.to_string(), files::MANIFEST.to_string()]);
        for rel in &every {
            let path = run.path().join(rel);
            let original = std::fs::read(&path).unwrap();
            for offset in [0, original.len() / 2, original.len() - 1] {
                let mut flipped = original.clone();
                flipped[offset] ^= 0x01;
                std::fs::write(&path, &flipped).unwrap();
                let problems = verify();
                assert!(
                    problems.iter().any(|p| &p.path == rel),
                    "{rel} byte {offset}: {problems:?}"
                );
            }
            std::fs::write(&path, &original).unwrap();
        }
        assert_eq!(verify(), []);
        // Missing and added files are named too.
        let series = run.path().join("arms/a/series.csv");
        std::fs::rename(&series, run.path().join("arms/a/extra.csv")).unwrap();
        let named: Vec<(String, String)> = verify().into_iter().map(|p| (p.path, p.kind)).collect();
        assert_eq!(
            named,
            [
                ("arms/a/extra.csv".to_string(), "added".to_string()),
                ("arms/a/series.csv".to_string(), "missing".to_string()),
            ]
        );
        // A link or a FIFO where a file was is named as irregular.
        std::fs::rename(run.path().join("arms/a/extra.csv"), &series).unwrap();
        std::fs::remove_file(run.path().join("arms/a/results.jsonl")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", run.path().join("arms/a/results.jsonl"))
            .unwrap();
        let named: Vec<(String, String)> = verify().into_iter().map(|p| (p.path, p.kind)).collect();
        assert!(
            named.contains(&("arms/a/results.jsonl".to_string(), "irregular".to_string())),
            "{named:?}"
        );
    }

    #[test]
    fn a_corrupt_marker_line_is_named_by_file_and_line() {
        let (_tmp, run) = test_run();
        write_run(&run, &[], &[marker(0, Phase::ProcessStart, 1, 1, 1)], true);
        let path = run.path().join("arms/a").join(files::MARKERS);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{oops\n");
        std::fs::write(&path, text).unwrap();
        let err = assemble(&run).unwrap_err().to_string();
        assert!(err.contains("markers.jsonl:2:"), "{err}");
    }
}
