//! Allocation attribution: which allocation sites hold and grow the
//! worker's memory in each phase (the arm's `attribution = "allocations"`).
//!
//! Linux: jemalloc's sampling heap profiler writes one profile per profiled
//! marker ([`worker_contract::profiles_marker`])
//! into the arm's `heap/` folder ([`heap_profile`]); the harness resolves
//! their addresses into `heap/symbols.json` ([`symbols`]) while the
//! binaries that ran are still there. macOS: `malloc_history -allBySize`
//! captures at the same markers ([`malloc_history`]). Here each phase's profile
//! is set against the one before it: the sites holding the most live bytes
//! at the phase's end, the sites that allocated the most within it, each
//! with its share of the phase's growth as the kernel measured it (the
//! marker's resident memory), and the gap between the two: memory that
//! malloc never saw (mmap'd model files, GPU drivers, thread stacks).

pub mod heap_profile;
pub mod malloc_history;
mod markdown;
pub mod sites;
pub mod symbols;

use crate::ReportError;
use run_dir::{Rel, RunDir};
use sampler::Phase;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sites::SiteTable;
use worker_contract::{ArmSpec, HeapProfiling};

pub use markdown::markdown;

/// Sites listed per phase and per ordering.
pub const TOP_SITES: usize = 10;

/// The arm's `heap/` folder: one profile per profiled marker and `symbols.json`.
pub const HEAP_DIR: &str = run_dir::names::HEAP_DIR;
/// `heap/symbols.json`: the profiles' addresses resolved by the harness.
pub const SYMBOLS: &str = run_dir::names::HEAP_SYMBOLS;

/// Whether allocations were attributed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttributionMode {
    /// No allocator profiler (the default): the worker runs on its own allocator.
    #[default]
    Off,
    /// An allocator profiler watches the worker, and its heap is attributed
    /// to allocation sites per phase.
    Allocations,
}

/// One arm's allocation attribution. With `mode = "off"` nothing else is
/// present: the arm ran as it always does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttributionReceipt {
    /// Off, or allocations attributed.
    pub mode: AttributionMode,
    /// The profiler: `jemalloc` (Linux) or `malloc_stack_logging` (macOS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiler: Option<String>,
    /// jemalloc's `lg_prof_sample`: one sample per 2^N bytes allocated, on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lg_prof_sample: Option<u8>,
    /// The mean sampling interval in bytes (2^`lg_prof_sample`), as the profiles say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval_bytes: Option<u64>,
    /// What the profiler costs the arm, as far as it is known (see docs/attribution.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// jemalloc's sampling cost as the arm's overhead gate measured it
    /// (`toggles = "attribution"`); `None` when it was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_cost: Option<MeasuredCost>,
    /// Per profiled phase (every phase outside requests, and the first
    /// measured request's two; `worker_contract::profiles_marker`), in
    /// marker order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseAttribution>,
    /// Profiles missing or unreadable, symbols unresolved: each says which and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The latency cost of jemalloc's sampling, from an overhead block run that
/// switched `prof.active` on (A) and off (B) between requests of one
/// profiled worker. The allocator swap itself (jemalloc for the system's)
/// is in both blocks and so not in this ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasuredCost {
    /// Hodges–Lehmann latency ratio, sampling on over off.
    pub ratio: f64,
    /// Lower end of its interval.
    pub ratio_lower: f64,
    /// Upper end of its interval.
    pub ratio_upper: f64,
    /// The interval's confidence.
    pub confidence: f64,
    /// Complete ABBA quads behind it.
    pub quads: u64,
    /// The block run's summary, relative to the run directory.
    pub evidence: String,
}

/// One phase: what malloc saw against what the kernel measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseAttribution {
    /// The phase the marker closes.
    #[schemars(with = "String")]
    pub phase: Phase,
    /// The marker's sequence number.
    pub seq: u64,
    /// The request of a request phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<u64>,
    /// The profile taken right after the marker (`heap/<seq>-<phase>.heap`).
    pub profile: String,
    /// Live heap bytes at the marker, unbiased from the samples.
    pub malloc_live_bytes: u64,
    /// Their change since the previous profile (the phase's malloc growth).
    pub malloc_growth_bytes: i64,
    /// Heap bytes allocated within the phase, freed or not (jemalloc's
    /// cumulative counts, `prof_accum`); `None` where the profiler keeps
    /// live allocations only (macOS), where positive growth stands for it.
    pub malloc_allocated_bytes: Option<u64>,
    /// The worker's resident memory at this marker minus at the previous
    /// profiled one, as the kernel measured it; `None` for the first.
    pub measured_growth_bytes: Option<i64>,
    /// `measured_growth_bytes - malloc_growth_bytes`. Positive: growth
    /// malloc never saw (mapped files, driver memory, stacks) or heap
    /// allocated earlier and touched in this phase; negative: heap
    /// allocated in this phase whose pages are not resident yet.
    pub unattributed_gap_bytes: Option<i64>,
    /// The sites holding the most live bytes at the marker.
    pub retained: Vec<Site>,
    /// The sites that allocated the most within the phase.
    pub allocated: Vec<Site>,
}

/// One allocation site in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Site {
    /// The first frame outside the allocator and the standard containers.
    pub site: String,
    /// The object (executable or library file name) the site is in.
    pub object: Option<String>,
    /// The heaviest stack through the site, from the site outwards (at most 8 frames).
    pub stack: Vec<String>,
    /// Live bytes at the marker (unbiased).
    pub retained_bytes: u64,
    /// Change in live bytes since the previous profile.
    pub growth_bytes: i64,
    /// Bytes allocated within the phase (the cumulative counts' change;
    /// positive growth where the profiler keeps no such counts).
    pub allocated_bytes: u64,
    /// `growth_bytes` over the phase's measured growth (the kernel's);
    /// `None` when that is not positive.
    pub share_of_measured_growth: Option<f64>,
}

/// What attribution needs of one marker: which it is and the worker's
/// resident memory there (from the receipt's phase table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerPoint {
    /// The phase the marker closes.
    pub phase: Phase,
    /// Its sequence number.
    pub seq: u64,
    /// The request of a request phase.
    pub request_id: Option<u64>,
    /// The worker's resident bytes at the marker, as the kernel gave them.
    pub resident_bytes: u64,
}

/// What the receipt says of the cost of profiling.
pub const COST_NOTE: &str = "not measured: the profiler changes the allocator (jemalloc instead \
    of the system's), samples one allocation per 2^lg_prof_sample bytes and writes a profile \
    after each profiled marker, inside the phase that follows; compare with an arm without \
    attribution in a run of its own before trusting this arm's latency or peaks";

/// Take the arm's overhead block run as the measured sampling cost when it
/// toggled attribution and gave an interval; the `cost` statement then says
/// what the figure covers and what it leaves out.
pub fn with_measured_cost(
    receipt: &mut AttributionReceipt,
    overhead: Option<&crate::overhead::OverheadRecord>,
    evidence: String,
) {
    let Some(o) = overhead.filter(|o| {
        receipt.mode == AttributionMode::Allocations
            && o.plan.toggles == crate::gate_spec::OverheadToggle::Attribution
    }) else {
        return;
    };
    let (Some(ratio), Some(ratio_lower), Some(ratio_upper)) =
        (o.ratio, o.ratio_lower, o.ratio_upper)
    else {
        return;
    };
    let quads = o.quad_ratios.len() as u64;
    receipt.cost = Some(format!(
        "sampling measured: latency with jemalloc's sampling on / off {ratio:.4}, {:.0} % interval \
         {ratio_lower:.4}..{ratio_upper:.4} over {quads} ABBA quads in one worker ({evidence}); not \
         in this figure: the allocator swap (jemalloc for the system's, in both blocks) and the \
         profiles written after markers outside requests",
        o.confidence * 100.0
    ));
    receipt.measured_cost = Some(MeasuredCost {
        ratio,
        ratio_lower,
        ratio_upper,
        confidence: o.confidence,
        quads,
        evidence,
    });
}

/// The attribution of the arm in `arm`, from its spec, its markers and its
/// `heap/` folder. Problems with single profiles are recorded, not fatal.
pub fn assemble(
    run: &RunDir,
    arm: &Rel,
    spec: Option<&ArmSpec>,
    phases: &[MarkerPoint],
) -> Result<AttributionReceipt, ReportError> {
    let Some(profiling) = spec.and_then(|s| s.attribution.as_ref()) else {
        return Ok(AttributionReceipt::default());
    };
    let mut receipt = AttributionReceipt {
        mode: AttributionMode::Allocations,
        cost: Some(COST_NOTE.to_string()),
        ..AttributionReceipt::default()
    };
    let heap = arm.join(HEAP_DIR);
    let tables = match profiling {
        HeapProfiling::Jemalloc { lg_prof_sample, .. } => {
            receipt.profiler = Some("jemalloc".into());
            receipt.lg_prof_sample = Some(*lg_prof_sample);
            sites::jemalloc_tables(run, &heap, &mut receipt)?
        }
        HeapProfiling::MallocStackLogging => {
            receipt.profiler = Some("malloc_stack_logging".into());
            sites::malloc_history_tables(run, &heap, &mut receipt.problems)?
        }
    };
    receipt.phases = compare_phases(phases, &tables, &mut receipt.problems);
    Ok(receipt)
}

/// The [`TOP_SITES`] sites with the most `bytes` (none with zero), most
/// first, ties by name.
fn top(sites: &[Site], bytes: fn(&Site) -> u64) -> Vec<Site> {
    let mut out: Vec<Site> = sites.iter().filter(|s| bytes(s) > 0).cloned().collect();
    out.sort_by(|a, b| bytes(b).cmp(&bytes(a)).then(a.site.cmp(&b.site)));
    out.truncate(TOP_SITES);
    out
}

/// Each listed phase against the profile before it.
fn compare_phases(
    phases: &[MarkerPoint],
    tables: &std::collections::BTreeMap<u64, SiteTable>,
    problems: &mut Vec<String>,
) -> Vec<PhaseAttribution> {
    let resident = |seq: u64| {
        phases
            .iter()
            .find(|p| p.seq == seq)
            .map(|p| p.resident_bytes)
    };
    let mut out = Vec::new();
    for row in phases
        .iter()
        .filter(|r| worker_contract::profiles_marker(r.phase, r.request_id))
    {
        let Some(now) = tables.get(&row.seq) else {
            problems.push(format!(
                "no readable heap profile for marker {} ({}): the worker's log says why one is \
                 missing, the problems above why one could not be read",
                row.seq,
                row.phase.as_str()
            ));
            continue;
        };
        let before = tables.range(..row.seq).next_back();
        let measured = before.and_then(|(seq, _)| {
            let then = resident(*seq)?;
            Some(row.resident_bytes as i64 - then as i64)
        });
        let empty = SiteTable::default();
        let prev = before.map_or(&empty, |(_, t)| t);
        let all = now.against(prev, measured);
        let malloc_growth = now.live_bytes() - prev.live_bytes();
        let allocated = now
            .has_accumulated
            .then(|| (now.accumulated_bytes() - prev.accumulated_bytes()).max(0.0) as u64);
        let retained = top(&all, |s| s.retained_bytes);
        let grown = top(&all, |s| s.allocated_bytes);
        out.push(PhaseAttribution {
            phase: row.phase,
            seq: row.seq,
            request_id: row.request_id,
            profile: now.file.clone(),
            malloc_live_bytes: now.live_bytes().max(0.0).round() as u64,
            malloc_growth_bytes: malloc_growth.round() as i64,
            malloc_allocated_bytes: allocated,
            measured_growth_bytes: measured,
            unattributed_gap_bytes: measured.map(|m| m - malloc_growth.round() as i64),
            retained,
            allocated: grown,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sites::SiteCounts;
    use super::*;

    fn table(file: &str, sites: &[(&str, f64, f64)]) -> SiteTable {
        SiteTable {
            file: file.into(),
            has_accumulated: true,
            sites: sites
                .iter()
                .map(|(name, live, accum)| {
                    let counts = SiteCounts {
                        live_bytes: *live,
                        accum_bytes: *accum,
                        ..SiteCounts::default()
                    };
                    (name.to_string(), counts)
                })
                .collect(),
        }
    }

    fn row(phase: Phase, seq: u64, resident: u64) -> MarkerPoint {
        MarkerPoint {
            phase,
            seq,
            request_id: phase.is_request().then_some(0),
            resident_bytes: resident,
        }
    }

    #[test]
    fn a_phase_is_set_against_the_profile_before_it() {
        let tables = [
            (
                0,
                table("heap/0000-model_loaded.heap", &[("a", 100.0, 100.0)]),
            ),
            (
                1,
                table(
                    "heap/0001-state_ready.heap",
                    // a grew by 50 and allocated 150; b came and went; c is new.
                    &[("a", 150.0, 250.0), ("b", 0.0, 1000.0), ("c", 50.0, 50.0)],
                ),
            ),
        ]
        .into_iter()
        .collect();
        let phases = [
            row(Phase::ModelLoaded, 0, 1000),
            row(Phase::StateReady, 1, 1300),
            row(Phase::WarmupDone, 2, 1300),
        ];
        let mut problems = Vec::new();
        let out = compare_phases(&phases, &tables, &mut problems);
        assert_eq!(
            problems,
            [
                "no readable heap profile for marker 2 (warmup_done): the worker's log says why \
              one is missing, the problems above why one could not be read"
            ]
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].measured_growth_bytes, None,
            "nothing before the first"
        );
        let state = &out[1];
        assert_eq!(state.profile, "heap/0001-state_ready.heap");
        assert_eq!(state.malloc_live_bytes, 200);
        assert_eq!(state.malloc_growth_bytes, 100);
        assert_eq!(state.malloc_allocated_bytes, Some(1200));
        assert_eq!(state.measured_growth_bytes, Some(300));
        assert_eq!(state.unattributed_gap_bytes, Some(200));
        let names = |l: &[Site]| l.iter().map(|s| s.site.clone()).collect::<Vec<_>>();
        assert_eq!(names(&state.retained), ["a", "c"]);
        assert_eq!(names(&state.allocated), ["b", "a", "c"]);
        let a = &state.retained[0];
        assert_eq!(
            (a.retained_bytes, a.growth_bytes, a.allocated_bytes),
            (150, 50, 150)
        );
        assert_eq!(a.share_of_measured_growth, Some(50.0 / 300.0));
        assert_eq!(state.allocated[0].growth_bytes, 0);
    }

    fn block_run(toggles: crate::gate_spec::OverheadToggle) -> crate::overhead::OverheadRecord {
        crate::overhead::OverheadRecord {
            plan: crate::overhead::BlockPlan {
                quads: 6,
                block_requests: 1,
                injected_busy_us: 0,
                toggles,
            },
            dir: "overhead".into(),
            status: crate::record::ArmStatus::Completed,
            failure: vec![],
            requests: 25,
            sampled_requests: 12,
            unsampled_requests: 12,
            dropped_requests: 1,
            quad_ratios: vec![1.01; 6],
            ratio: Some(1.012),
            ratio_lower: Some(1.004),
            ratio_upper: Some(1.019),
            confidence: 0.95,
            problems: vec![],
            cpu: None,
            rounds: vec![],
            budget_quads: Some(6),
        }
    }

    #[test]
    fn only_a_block_run_that_toggled_attribution_measures_its_cost() {
        use crate::gate_spec::OverheadToggle;
        let on = || AttributionReceipt {
            mode: AttributionMode::Allocations,
            cost: Some(COST_NOTE.into()),
            ..AttributionReceipt::default()
        };
        let evidence = || "arms/a/overhead.json".to_string();
        // The sampler's block run says nothing of jemalloc's sampling.
        let mut r = on();
        with_measured_cost(
            &mut r,
            Some(&block_run(OverheadToggle::Sampler)),
            evidence(),
        );
        assert_eq!(
            (r.measured_cost, r.cost.as_deref()),
            (None, Some(COST_NOTE))
        );
        // An unprofiled arm has no cost to state.
        let mut off = AttributionReceipt::default();
        with_measured_cost(
            &mut off,
            Some(&block_run(OverheadToggle::Attribution)),
            evidence(),
        );
        assert_eq!(off, AttributionReceipt::default());
        // No interval, no figure.
        let mut open = block_run(OverheadToggle::Attribution);
        open.ratio_upper = None;
        let mut r = on();
        with_measured_cost(&mut r, Some(&open), evidence());
        assert!(r.measured_cost.is_none());
        let mut r = on();
        with_measured_cost(
            &mut r,
            Some(&block_run(OverheadToggle::Attribution)),
            evidence(),
        );
        let cost = r.measured_cost.expect("measured");
        assert_eq!(
            (cost.ratio, cost.ratio_lower, cost.ratio_upper, cost.quads),
            (1.012, 1.004, 1.019, 6)
        );
        assert_eq!(cost.evidence, "arms/a/overhead.json");
        let said = r.cost.unwrap();
        assert!(said.starts_with("sampling measured: latency with jemalloc's sampling on / off 1.0120, 95 % interval 1.0040..1.0190 over 6 ABBA quads"), "{said}");
        assert!(said.contains("allocator swap"), "{said}");
    }

    #[test]
    fn off_is_one_field() {
        let off = serde_json::to_string(&AttributionReceipt::default()).unwrap();
        assert_eq!(off, r#"{"mode":"off"}"#);
    }
}
