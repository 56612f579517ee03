//! The sampler-overhead block run of an arm: one worker process whose
//! requests run in blocks, the external sampler on in some (A) and paused in
//! others (B), in ABBA order, so host drift cancels within seconds rather
//! than between runs minutes apart.
//!
//! The harness writes the block run into `arms/<id>/overhead/` (its own
//! markers, results and series, plus [`SWITCHES_FILE`], when the sampler was
//! switched) and the summary [`OverheadRecord`] into `arms/<id>/overhead.json`;
//! the receipt carries the summary and the `overhead` gate judges its interval.
//!
//! The estimate: each request's latency is divided by the median latency of
//! its fixture in the run (so blocks with different fixture mixes compare),
//! each ABBA quad gives A's mean over B's, and the Hodges–Lehmann estimate
//! of the log quad ratios with its exact Wilcoxon signed-rank interval gives
//! the ratio and its confidence interval. Requests the sampler was switched
//! during (after the grace of [`SWITCH_GRACE_NS`] or 1 %), and the first
//! measured request (cold), are left out.

use crate::gate_spec::OverheadToggle;
use crate::record::{ArmOutcome, ArmStatus};
use analysis::stats::{self, signed_rank_interval};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use worker_contract::{RequestResult, ResultBody};

/// The summary file, under `arms/<id>/`.
pub use run_dir::names::OVERHEAD as OVERHEAD_FILE;
/// The folder of the block run, under `arms/<id>/`.
pub use run_dir::names::OVERHEAD_DIR;

/// The block run's switch log, under `arms/<id>/overhead/`.
pub use run_dir::names::OVERHEAD_SWITCHES as SWITCHES_FILE;

/// A switch this soon after a request began (or within its first 1 %, if
/// longer) counts as before it. The harness switches when it reads the
/// previous request's `request_end`, and a worker with nothing to do in
/// between has usually begun the next request by then: microseconds on a
/// quiet host, up to ~20 ms on a loaded one. At most 1 % of a request then
/// runs on the wrong side, and the sampler's cost over that part (~0.25 % of a
/// core) moves the ratio by under 0.003 %; dropping those requests instead
/// would lose a request per block on a loaded host.
pub const SWITCH_GRACE_NS: u64 = 2_000_000;

/// The grace for a request from `begin_ns` to `end_ns`.
fn grace_ns(begin_ns: u64, end_ns: u64) -> u64 {
    SWITCH_GRACE_NS.max(end_ns.saturating_sub(begin_ns) / 100)
}

/// Confidence of the ratio's interval.
pub const CONFIDENCE: f64 = 0.95;

/// Whether block `index` (from 0) is sampled: ABBA, ABBA, …
pub fn block_sampled(index: u64) -> bool {
    worker_contract::abba_block_a(index)
}

/// The sampler was switched on (`sampled`) or off at `at_ns` (monotonic clock),
/// after the harness read `after_request`'s `request_end`; block `block` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Switch {
    /// Monotonic time of the switch, in ns.
    pub at_ns: u64,
    /// The request whose end triggered it.
    pub after_request: u64,
    /// The block that starts (from 0; block 0 starts with the run, sampled).
    pub block: u64,
    /// Whether the sampler runs in that block.
    pub sampled: bool,
}

/// One measured request's window, from its `request_begin` and `request_end` markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestWindow {
    /// The request's id.
    pub request_id: u64,
    /// `request_begin` time, ns.
    pub begin_ns: u64,
    /// `request_end` time, ns.
    pub end_ns: u64,
    /// The worker's CPU clocks at `request_begin` and at `request_end`
    /// (`None` from a worker that does not report them).
    pub cpu: Option<(sampler::MarkerCpu, sampler::MarkerCpu)>,
}

/// What sampling itself cost in CPU over the kept sampled (A) requests,
/// each from its own thread's clock: the exact witness beside the latency
/// interval. The latency ratio asks whether sampling slows the worker; this
/// says how much CPU it took to find out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SamplingCpu {
    /// Kept sampled requests the sums cover.
    pub requests: u64,
    /// The external sampler thread's CPU within those requests' windows
    /// (the series' `sampler_cpu_ns`, to within one tick at each end), ns.
    pub sampler_ns: u64,
    /// The worker's marker path (its markers' `cpu.marker_path_ns`) within
    /// them, ns.
    pub marker_path_ns: u64,
    /// The worker's whole CPU (its markers' `cpu.process_ns`) within them, ns.
    pub worker_ns: u64,
    /// (sampler + marker path) / worker.
    pub ratio: f64,
}

impl SamplingCpu {
    /// The sums over `windows` against the sampler's `rows` (in time order);
    /// `None` when a window lacks the worker's clocks, the series predates
    /// `sampler_cpu_ns`, or the worker used no CPU.
    pub fn over(windows: &[&RequestWindow], rows: &[sampler::SeriesRow]) -> Option<SamplingCpu> {
        if rows.iter().all(|r| r.sampler_cpu_ns == 0) {
            return None;
        }
        // The sampler thread's clock at time t: the first row at or after t
        // recorded it before its own reads; after the last row, that row's
        // reads are added.
        let clock_at = |t: u64| {
            let i = rows.partition_point(|r| r.t_ns < t);
            match rows.get(i) {
                Some(r) => r.sampler_cpu_ns,
                None => rows
                    .last()
                    .map_or(0, |r| r.sampler_cpu_ns.saturating_add(r.cost_cpu_ns)),
            }
        };
        let (mut sampler_ns, mut marker_path_ns, mut worker_ns) = (0u64, 0u64, 0u64);
        for w in windows {
            let (begin, end) = w.cpu?;
            sampler_ns += clock_at(w.end_ns).saturating_sub(clock_at(w.begin_ns));
            marker_path_ns += end.marker_path_ns.saturating_sub(begin.marker_path_ns);
            worker_ns += end.process_ns.saturating_sub(begin.process_ns);
        }
        (worker_ns > 0).then(|| SamplingCpu {
            requests: windows.len() as u64,
            sampler_ns,
            marker_path_ns,
            worker_ns,
            ratio: (sampler_ns + marker_path_ns) as f64 / worker_ns as f64,
        })
    }
}

/// How the block run was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockPlan {
    /// ABBA quads asked for.
    pub quads: u32,
    /// Measured requests per block.
    pub block_requests: u32,
    /// Test-only CPU time burnt per sampled tick, in µs (0 in a real run).
    pub injected_busy_us: u64,
    /// What A blocks have on and B blocks off (the sampler when absent).
    #[serde(default, skip_serializing_if = "OverheadToggle::is_sampler")]
    pub toggles: OverheadToggle,
}

impl BlockPlan {
    /// Measured requests the worker is asked for: every block, plus one
    /// (the first, cold request, left out).
    pub fn requests(&self) -> u64 {
        u64::from(self.quads) * 4 * u64::from(self.block_requests) + 1
    }
}

/// The block run of one arm and the ratio it gives (`arms/<id>/overhead.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverheadRecord {
    /// The layout asked for.
    pub plan: BlockPlan,
    /// The block run's folder, relative to the arm's folder.
    pub dir: String,
    /// How the block run ended.
    pub status: ArmStatus,
    /// Every reason it failed, in order; empty when it completed.
    pub failure: Vec<String>,
    /// Measured requests that ran.
    pub requests: u64,
    /// Requests kept in sampled blocks.
    pub sampled_requests: u64,
    /// Requests kept in unsampled blocks.
    pub unsampled_requests: u64,
    /// Requests left out: the first (cold) and any the sampler was switched during.
    pub dropped_requests: u64,
    /// Per complete ABBA quad: mean normalised latency in A over that in B.
    pub quad_ratios: Vec<f64>,
    /// Hodges–Lehmann estimate of the sampled / unsampled latency ratio.
    pub ratio: Option<f64>,
    /// Lower end of the ratio's `confidence` interval (exact signed-rank).
    pub ratio_lower: Option<f64>,
    /// Upper end of the interval.
    pub ratio_upper: Option<f64>,
    /// The interval's confidence (0.95).
    pub confidence: f64,
    /// Why the ratio or its interval is missing; empty when both are there.
    pub problems: Vec<String>,
    /// Sampling's own CPU over the kept sampled requests; `None` from a
    /// worker or series without the CPU clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<SamplingCpu>,
    /// Every round, when the block run took more than one to decide (the
    /// first is `dir`); empty for a single round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<OverheadRound>,
    /// The quads the rounds could use (`max_quads`); `None` in records
    /// written before rounds existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_quads: Option<u32>,
}

/// The arm's `overhead.json`, if the block run happened.
pub fn assemble(
    run: &run_dir::RunDir,
    arm: &run_dir::Rel,
) -> Result<Option<OverheadRecord>, crate::ReportError> {
    Ok(run.read_json(&arm.join(OVERHEAD_FILE))?)
}

/// Latency of each kept request, by block.
struct Kept {
    block: u64,
    normalised: f64,
}

impl OverheadRecord {
    /// Assign each request to the block it ran in, normalise by fixture,
    /// take the quad ratios and the interval.
    pub fn summarise(
        plan: BlockPlan,
        outcome: &ArmOutcome,
        windows: &[RequestWindow],
        results: &[RequestResult],
        switches: &[Switch],
        rows: &[sampler::SeriesRow],
    ) -> OverheadRecord {
        let mut problems = Vec::new();
        if outcome.status != ArmStatus::Completed {
            problems.push(format!(
                "the block run failed: {}",
                outcome.failure.join("; ")
            ));
        }
        let window: BTreeMap<u64, &RequestWindow> =
            windows.iter().map(|w| (w.request_id, w)).collect();
        // Block in force at time t: the last switch at or before it.
        let block_at = |t: u64| {
            switches
                .iter()
                .take_while(|s| s.at_ns <= t)
                .last()
                .map_or(0, |s| s.block)
        };
        let mut raw: Vec<(u64, String, f64)> = Vec::new();
        let mut sampled_windows: Vec<&RequestWindow> = Vec::new();
        let mut dropped = 0u64;
        for (i, r) in results.iter().enumerate() {
            let Some(w) = window.get(&r.request_id) else {
                dropped += 1;
                continue;
            };
            let settled = w.begin_ns.saturating_add(grace_ns(w.begin_ns, w.end_ns));
            let block = block_at(settled.min(w.end_ns));
            if i == 0 || block != block_at(w.end_ns) {
                dropped += 1;
                continue;
            }
            // A cancelled request's latency is its abort, not a decode.
            let Some(key) = fixture_key(r) else { continue };
            if block_sampled(block) {
                sampled_windows.push(w);
            }
            raw.push((block, key, r.latency_ns as f64));
        }
        let mut by_fixture: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (_, key, latency) in &raw {
            by_fixture.entry(key).or_default().push(*latency);
        }
        let medians: BTreeMap<&str, f64> = by_fixture
            .iter()
            .filter_map(|(k, v)| stats::median(v).map(|m| (*k, m)))
            .collect();
        let kept: Vec<Kept> = raw
            .iter()
            .filter_map(|(block, key, latency)| {
                let m = *medians.get(key.as_str())?;
                (m > 0.0).then(|| Kept {
                    block: *block,
                    normalised: latency / m,
                })
            })
            .collect();
        let sampled = kept.iter().filter(|k| block_sampled(k.block)).count() as u64;
        let quad_ratios = quad_ratios(&kept);
        let (ratio, lower, upper) =
            interval_of(&quad_ratios, &mut problems, kept.len(), results.len());
        OverheadRecord {
            plan,
            dir: OVERHEAD_DIR.to_string(),
            status: outcome.status,
            failure: outcome.failure.clone(),
            requests: results.len() as u64,
            sampled_requests: sampled,
            unsampled_requests: kept.len() as u64 - sampled,
            dropped_requests: dropped,
            quad_ratios,
            ratio,
            ratio_lower: lower,
            ratio_upper: upper,
            confidence: CONFIDENCE,
            problems,
            // The sampler runs in both blocks when attribution is toggled:
            // its CPU is no witness of what differs between them.
            cpu: match plan.toggles {
                OverheadToggle::Sampler => SamplingCpu::over(&sampled_windows, rows),
                OverheadToggle::Attribution => None,
            },
            rounds: Vec::new(),
            budget_quads: None,
        }
    }

    /// Whether the interval decides against `limit` (1 + tolerance): its
    /// upper end within it, or its lower end above it.
    pub fn decided(&self, limit: f64) -> bool {
        self.problems.is_empty()
            && (self.ratio_upper.is_some_and(|u| u <= limit)
                || self.ratio_lower.is_some_and(|l| l > limit))
    }

    /// The rounds of one block run, each with its folder, pooled: their
    /// quads (each normalised within its own round) give one interval, and
    /// `budget_quads` says how many quads the rounds could have used.
    pub fn pool(rounds: Vec<(String, OverheadRecord)>, budget_quads: u32) -> OverheadRecord {
        let mut it = rounds.iter();
        let Some((first_dir, first)) = it.next() else {
            let mut problems = Vec::new();
            let (ratio, ratio_lower, ratio_upper) = interval_of(&[], &mut problems, 0, 0);
            return OverheadRecord {
                plan: BlockPlan {
                    quads: 0,
                    block_requests: 1,
                    injected_busy_us: 0,
                    toggles: OverheadToggle::Sampler,
                },
                dir: OVERHEAD_DIR.to_string(),
                status: ArmStatus::Failed,
                failure: vec!["no round of the block run ran".into()],
                requests: 0,
                sampled_requests: 0,
                unsampled_requests: 0,
                dropped_requests: 0,
                quad_ratios: Vec::new(),
                ratio,
                ratio_lower,
                ratio_upper,
                confidence: CONFIDENCE,
                problems,
                cpu: None,
                rounds: Vec::new(),
                budget_quads: Some(budget_quads),
            };
        };
        let mut pooled = first.clone();
        pooled.dir = first_dir.clone();
        for (_, r) in it {
            pooled.plan.quads += r.plan.quads;
            if pooled.status == ArmStatus::Completed {
                pooled.status = r.status;
            }
            pooled.failure.extend(r.failure.iter().cloned());
            pooled.requests += r.requests;
            pooled.sampled_requests += r.sampled_requests;
            pooled.unsampled_requests += r.unsampled_requests;
            pooled.dropped_requests += r.dropped_requests;
            pooled.quad_ratios.extend(r.quad_ratios.iter().copied());
            pooled.cpu = match (pooled.cpu, r.cpu) {
                (Some(a), Some(b)) => {
                    let sum = |x: u64, y: u64| x.saturating_add(y);
                    let (s, m, w) = (
                        sum(a.sampler_ns, b.sampler_ns),
                        sum(a.marker_path_ns, b.marker_path_ns),
                        sum(a.worker_ns, b.worker_ns),
                    );
                    Some(SamplingCpu {
                        requests: a.requests + b.requests,
                        sampler_ns: s,
                        marker_path_ns: m,
                        worker_ns: w,
                        ratio: (s + m) as f64 / w.max(1) as f64,
                    })
                }
                _ => None,
            };
        }
        let mut problems: Vec<String> = rounds
            .iter()
            .filter(|(_, r)| r.status != ArmStatus::Completed)
            .map(|(dir, r)| format!("the block run failed in {dir}: {}", r.failure.join("; ")))
            .collect();
        let kept = (pooled.sampled_requests + pooled.unsampled_requests) as usize;
        (pooled.ratio, pooled.ratio_lower, pooled.ratio_upper) = interval_of(
            &pooled.quad_ratios,
            &mut problems,
            kept,
            pooled.requests as usize,
        );
        pooled.problems = problems;
        pooled.rounds = rounds
            .iter()
            .filter(|_| rounds.len() > 1)
            .map(|(dir, r)| OverheadRound {
                dir: dir.clone(),
                quads: r.plan.quads,
                status: r.status,
                requests: r.requests,
                complete_quads: r.quad_ratios.len() as u64,
            })
            .collect();
        pooled.budget_quads = Some(budget_quads);
        pooled
    }
}

/// One round of a block run that took several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverheadRound {
    /// Its folder, relative to the arm's folder.
    pub dir: String,
    /// ABBA quads it asked for.
    pub quads: u32,
    /// How its worker ended.
    pub status: ArmStatus,
    /// Measured requests that ran.
    pub requests: u64,
    /// Complete quads it gave.
    pub complete_quads: u64,
}

/// The Hodges-Lehmann ratio over `quad_ratios` and its interval, pushing to
/// `problems` why either is missing (`kept` of `results` requests were kept).
fn interval_of(
    quad_ratios: &[f64],
    problems: &mut Vec<String>,
    kept: usize,
    results: usize,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let interval = signed_rank_interval(
        &quad_ratios.iter().map(|r| r.ln()).collect::<Vec<_>>(),
        CONFIDENCE,
    );
    match interval {
        Some(iv) => {
            if iv.lower.is_none() {
                problems.push(format!(
                    "{} complete ABBA quads are too few for a {:.0} % interval (at least 6 are needed)",
                    quad_ratios.len(),
                    CONFIDENCE * 100.0
                ));
            }
            (
                Some(iv.estimate.exp()),
                iv.lower.map(f64::exp),
                iv.upper.map(f64::exp),
            )
        }
        None => {
            problems.push(format!(
                "no complete ABBA quad: {kept} requests kept of {results} (a quad needs a kept request in its A and its B blocks)"
            ));
            (None, None, None)
        }
    }
}

/// Requests compare within their fixture: whisper requests by fixture id,
/// calibration requests all alike; a cancelled request compares with none.
fn fixture_key(r: &RequestResult) -> Option<String> {
    match &r.body {
        ResultBody::Transcription(t) => Some(t.fixture_id.clone()),
        ResultBody::Calibration(_) => Some(String::new()),
        ResultBody::Cancelled(_) => None,
    }
}

/// A over B per quad (blocks 4q..4q+3), for quads with kept requests on both sides.
fn quad_ratios(kept: &[Kept]) -> Vec<f64> {
    let mut quads: BTreeMap<u64, [(f64, u32); 2]> = BTreeMap::new();
    for k in kept {
        let side = &mut quads.entry(k.block / 4).or_default()[usize::from(!block_sampled(k.block))];
        side.0 += k.normalised;
        side.1 += 1;
    }
    quads
        .values()
        .filter(|[a, b]| a.1 > 0 && b.1 > 0)
        .map(|[a, b]| (a.0 / f64::from(a.1)) / (b.0 / f64::from(b.1)))
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use worker_contract::CalibrationResult;

    fn result(id: u64, ms: f64) -> RequestResult {
        RequestResult {
            request_id: id,
            latency_ns: (ms * 1e6) as u64,
            body: ResultBody::Calibration(CalibrationResult::holding(0, 0)),
            timing: None,
        }
    }

    fn outcome() -> ArmOutcome {
        serde_json::from_value(serde_json::json!({
            "id": "a", "status": "completed", "failure": [], "worker_executable": "w",
            "worker_pid": 1, "hello": null, "exit": null, "timed_out": false, "timeout_s": 1,
            "bye": true, "markers": 0, "results": 4, "worker_errors": [],
            "started_ns": 0, "ended_ns": 1, "sampler": null
        }))
        .unwrap()
    }

    /// `quads` ABBA quads of `per` requests each, 100 ms apart; sampled
    /// requests take `a_ms`, others `b_ms`; the switch after each block
    /// lands between requests, except that the one before block `late.0`
    /// lands `late.1` ms into the next request.
    fn block_run(
        quads: u64,
        per: u64,
        a_ms: impl Fn(u64) -> f64,
        b_ms: f64,
        late: Option<(u64, u64)>,
    ) -> (Vec<RequestWindow>, Vec<RequestResult>, Vec<Switch>) {
        let (mut w, mut r, mut s) = (vec![], vec![], vec![]);
        // Request 0 is the cold one, before block 0's requests.
        let n = 1 + quads * 4 * per;
        for id in 0..n {
            let begin = id * 100_000_000;
            let block = id.saturating_sub(1) / per;
            let ms = if block_sampled(block) { a_ms(id) } else { b_ms };
            // Each request takes 80 ms of the worker's CPU, 50 µs of it in
            // its two markers.
            let cpu = |ns: u64, path: u64| sampler::MarkerCpu {
                process_ns: ns,
                marker_path_ns: path,
            };
            w.push(RequestWindow {
                request_id: id,
                begin_ns: begin,
                end_ns: begin + 50_000_000,
                cpu: Some((
                    cpu(id * 80_000_000, id * 50_000),
                    cpu((id + 1) * 80_000_000, (id + 1) * 50_000),
                )),
            });
            r.push(result(id, ms));
            if id >= 1 && id % per == 0 && id + 1 < n {
                let next = block + 1;
                let at = if let Some((_, ms)) = late.filter(|l| l.0 == next) {
                    begin + 100_000_000 + ms * 1_000_000
                } else {
                    begin + 60_000_000
                };
                s.push(Switch {
                    at_ns: at,
                    after_request: id,
                    block: next,
                    sampled: block_sampled(next),
                });
            }
        }
        (w, r, s)
    }

    const PLAN: BlockPlan = BlockPlan {
        quads: 8,
        block_requests: 3,
        injected_busy_us: 0,
        toggles: OverheadToggle::Sampler,
    };

    #[test]
    fn blocks_alternate_abba() {
        let s: Vec<bool> = (0..8).map(block_sampled).collect();
        assert_eq!(s, [true, false, false, true, true, false, false, true]);
        assert_eq!(PLAN.requests(), 97);
    }

    #[test]
    fn a_real_three_percent_cost_is_estimated_inside_a_tight_interval() {
        // A costs 3 % more, with a little per-request wobble.
        let (w, r, s) = block_run(8, 3, |id| 103.0 + (id % 3) as f64 * 0.1, 100.0, None);
        let rec = OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &[]);
        assert!(rec.problems.is_empty(), "{:?}", rec.problems);
        assert_eq!(rec.quad_ratios.len(), 8);
        assert_eq!((rec.requests, rec.dropped_requests), (97, 1));
        assert_eq!((rec.sampled_requests, rec.unsampled_requests), (48, 48));
        let (lo, r, hi) = (
            rec.ratio_lower.unwrap(),
            rec.ratio.unwrap(),
            rec.ratio_upper.unwrap(),
        );
        assert!(lo <= r && r <= hi);
        assert!(lo > 1.025 && hi < 1.035, "{lo} {r} {hi}");
    }

    #[test]
    fn the_cpu_witness_sums_each_threads_clock_over_the_kept_sampled_requests() {
        let (w, r, s) = block_run(8, 3, |_| 100.0, 100.0, None);
        // A tick 1 ms after every 50 ms, its thread clock 150 µs further on
        // each time: one tick falls in each 50 ms request.
        let rows: Vec<sampler::SeriesRow> = (0..200u64)
            .map(|k| sampler::SeriesRow {
                tick: k,
                t_ns: k * 50_000_000 + 1_000_000,
                sampler_cpu_ns: k * 150_000,
                cost_cpu_ns: 140_000,
                ..Default::default()
            })
            .collect();
        let rec = OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &rows);
        let cpu = rec.cpu.expect("a witness");
        // 48 kept sampled requests (the cold one is left out).
        assert_eq!(cpu.requests, 48);
        assert_eq!(cpu.sampler_ns, 48 * 150_000);
        assert_eq!(cpu.marker_path_ns, 48 * 50_000);
        assert_eq!(cpu.worker_ns, 48 * 80_000_000);
        assert!((cpu.ratio - 200_000.0 / 80_000_000.0).abs() < 1e-12);
        // A series from before the clock was recorded gives no witness.
        let old: Vec<sampler::SeriesRow> = rows
            .iter()
            .map(|r| sampler::SeriesRow {
                sampler_cpu_ns: 0,
                ..r.clone()
            })
            .collect();
        assert!(
            OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &old)
                .cpu
                .is_none()
        );
    }

    #[test]
    fn rounds_pool_their_quads_into_one_interval_that_decides() {
        // A costs 1 %: four quads alone cannot give an interval, two rounds
        // of four pool into eight that can, and decide against 1.02.
        let plan = BlockPlan { quads: 4, ..PLAN };
        let round = |shift: f64| {
            let (w, r, s) = block_run(
                4,
                3,
                |id| 101.0 + shift + (id % 3) as f64 * 0.1,
                100.0,
                None,
            );
            OverheadRecord::summarise(plan, &outcome(), &w, &r, &s, &[])
        };
        let first = round(0.0);
        assert!(!first.decided(1.02), "{:?}", first.problems);
        let pooled = OverheadRecord::pool(
            vec![
                ("overhead".into(), first.clone()),
                ("overhead/round-2".into(), round(0.05)),
            ],
            12,
        );
        assert!(pooled.problems.is_empty(), "{:?}", pooled.problems);
        assert_eq!(pooled.quad_ratios.len(), 8);
        assert_eq!(pooled.plan.quads, 8);
        assert_eq!(pooled.requests, 2 * first.requests);
        assert_eq!(pooled.budget_quads, Some(12));
        let dirs: Vec<&str> = pooled.rounds.iter().map(|r| r.dir.as_str()).collect();
        assert_eq!(dirs, ["overhead", "overhead/round-2"]);
        // Interval 1.0110..1.0115: within 1.02, above 1.005, straddling 1.0112.
        assert!(pooled.decided(1.02) && pooled.decided(1.005) && !pooled.decided(1.0112));
        assert!(pooled.ratio_lower.unwrap() > 1.005 && pooled.ratio_upper.unwrap() < 1.015);
        // One round pooled alone is that round, with its budget.
        let alone = OverheadRecord::pool(vec![("overhead".into(), first.clone())], 4);
        assert!(alone.rounds.is_empty());
        assert_eq!(alone.quad_ratios, first.quad_ratios);
    }

    #[test]
    fn a_request_the_sampler_was_switched_during_is_left_out() {
        let (w, r, s) = block_run(8, 3, |_| 100.0, 100.0, Some((5, 20)));
        let rec = OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &[]);
        // The cold request and the one the late switch fell into.
        assert_eq!(rec.dropped_requests, 2);
        assert_eq!(rec.ratio, Some(1.0));
        // A switch within the grace after a request began counts as before it.
        let (w, r, s) = block_run(8, 3, |_| 100.0, 100.0, Some((5, 1)));
        let rec = OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &[]);
        assert_eq!(rec.dropped_requests, 1);
        assert_eq!(rec.sampled_requests + rec.unsampled_requests, 96);
        // The grace is 1 % of a long request: 20 ms into a 5 s one.
        assert_eq!(grace_ns(0, 5_000_000_000), 50_000_000);
        assert_eq!(grace_ns(0, 50_000_000), SWITCH_GRACE_NS);
    }

    #[test]
    fn too_few_quads_give_a_ratio_without_an_interval_and_say_so() {
        let (w, r, s) = block_run(3, 2, |_| 101.0, 100.0, None);
        let rec = OverheadRecord::summarise(PLAN, &outcome(), &w, &r, &s, &[]);
        assert_eq!(rec.quad_ratios.len(), 3);
        assert!(rec.ratio.is_some() && rec.ratio_upper.is_none());
        assert!(
            rec.problems[0].contains("3 complete ABBA quads are too few"),
            "{:?}",
            rec.problems
        );
    }

    #[test]
    fn a_failed_run_or_no_switch_gives_no_quad() {
        let mut o = outcome();
        o.status = ArmStatus::Failed;
        o.failure = vec!["worker exited with code 3".into()];
        let (w, r, _) = block_run(2, 2, |_| 100.0, 100.0, None);
        let rec = OverheadRecord::summarise(PLAN, &o, &w, &r, &[], &[]);
        assert_eq!(rec.ratio, None);
        assert_eq!(
            rec.problems[0],
            "the block run failed: worker exited with code 3"
        );
        assert!(rec.problems[1].starts_with("no complete ABBA quad"));
    }
}
