//! Gates as a protocol declares them (`[[arm.gate]]`), and their validation.

use sampler::Phase;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use worker_contract::FieldError;
use worker_contract::bounds::{FloatBound, IntBound};

/// One gate: `kind` selects the check, the other keys are its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GateSpec {
    /// A phase's memory field against the control or an absolute ceiling.
    Memory(MemoryGate),
    /// Steady p95 and max latency against the control.
    Latency(LatencyGate),
    /// Exact outputs against the control, and determinism across repetitions.
    Parity(ParityGate),
    /// WER per category against the control; named categories exactly equal.
    Quality(QualityGate),
    /// The arm (declared `expect = "fail"`) must fail, for the named reason.
    FailClosed(FailClosedGate),
    /// The measurement itself is sound.
    Validity(ValidityGate),
    /// The external sampler does not change what it measures.
    Overhead(OverheadGate),
    /// A soak found the arm's memory bounded, the worker's and the system's.
    Stability(StabilityGate),
    /// An idle-residency policy lowers idle RAM against the control while
    /// stop-to-final latency stays under a ceiling.
    IdleResidency(IdleResidencyGate),
    /// Decode tokens per second and real-time factor against absolute bounds.
    Throughput(ThroughputGate),
}

/// Which memory value of a phase marker a memory gate reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryField {
    /// The platform's phase peak: `footprint_peak_bytes` where the platform
    /// reports a footprint peak (macOS), else `resident_peak_bytes` (Linux
    /// VmHWM, reset at every marker). The result names the field used.
    #[default]
    Peak,
    /// `resident_bytes` at the marker: Linux `VmRSS`, macOS `ri_resident_size`.
    ResidentBytes,
    /// `resident_peak_bytes`: Linux `VmHWM` since the last peak reset; absent on macOS.
    ResidentPeakBytes,
    /// `footprint_bytes`: Linux `RssAnon + RssShmem + VmSwap`, macOS `ri_phys_footprint`.
    FootprintBytes,
    /// `footprint_peak_bytes`: macOS `ri_lifetime_max_phys_footprint`; absent on Linux.
    FootprintPeakBytes,
    /// `compressed_bytes`: compressed memory of the worker, where a platform reports it.
    CompressedBytes,
    /// `swap_bytes`: Linux `VmSwap`; absent on macOS.
    SwapBytes,
    /// `virtual_bytes`: Linux `VmSize`; absent on macOS.
    VirtualBytes,
    /// `rss_anon_bytes`: Linux `RssAnon`.
    RssAnonBytes,
    /// `rss_file_bytes`: Linux `RssFile`.
    RssFileBytes,
    /// `rss_shmem_bytes`: Linux `RssShmem`.
    RssShmemBytes,
    /// `device_bytes`: the GPU memory the driver attributes to the worker
    /// (NVML), read at the marker by a worker that decodes on a GPU; absent
    /// elsewhere.
    DeviceBytes,
}

/// `phase`'s `field` (the largest over every marker of that phase) must be
/// at most one threshold, set by exactly one of the three keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGate {
    /// The phase whose marker is read (e.g. `state_ready`).
    #[schemars(with = "String")]
    pub phase: Phase,
    /// Which memory value of the marker is read; default `peak`.
    #[serde(default)]
    pub field: MemoryField,
    /// Threshold = control × (1 − min_reduction); 0 ≤ min_reduction < 1.
    #[schemars(range(min = MIN_REDUCTION.min), extend("exclusiveMaximum" = MIN_REDUCTION.max))]
    pub min_reduction: Option<f64>,
    /// Threshold = control × control_factor (a ceiling set from the control).
    #[schemars(range(max = CONTROL_FACTOR.max), extend("exclusiveMinimum" = CONTROL_FACTOR.min))]
    pub control_factor: Option<f64>,
    /// An absolute threshold in MiB; needs no control.
    #[schemars(range(max = CEILING_MIB.max), extend("exclusiveMinimum" = CEILING_MIB.min))]
    pub ceiling_mib: Option<f64>,
    /// Judge the pair: the worker's value plus its external encoder
    /// process's own at the same step (`model_loaded` or `state_ready`;
    /// field `resident_bytes`, `footprint_bytes` or `virtual_bytes`), against
    /// the control's pair. Where the control runs no encoder process, the
    /// threshold also allows this arm's encoder process its `process_start`
    /// baseline: what any second process costs before it holds anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_encoder_process: bool,
    /// With `with_encoder_process`: MiB the pair may hold beyond the
    /// threshold, for what a second runtime costs past its start-up baseline
    /// (its own context, graph metadata). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1024.0))]
    pub allowance_mib: Option<f64>,
}

/// The arm's steady p95 and max latency ≤ control × (1 + tolerance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LatencyGate {
    /// Allowed slowdown as a fraction of the control, e.g. 0.05 for 5 %.
    #[schemars(range(min = TOLERANCE.min, max = TOLERANCE.max))]
    pub tolerance: f64,
}

/// Exact token IDs, EOT, stop reason and text bytes per fixture equal to the
/// control's, and both arms deterministic across repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParityGate {}

/// Per category, WER ≤ the control's + `wer_delta`; QoI (the share of
/// fixtures on which the arm's WER is no greater than the control's) ≥
/// `min_qoi`; in `exact_categories` every slice's normalised words equal the
/// control's. At least one of `wer_delta` and `min_qoi` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QualityGate {
    /// Absolute WER allowance per category, e.g. 0.01 for one point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = WER_DELTA.min, max = WER_DELTA.max))]
    pub wer_delta: Option<f64>,
    /// Lowest QoI over every fixture both arms scored, e.g. 0.95: at most
    /// one fixture in twenty may come out worse than the control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_QOI.min, max = MIN_QOI.max))]
    pub min_qoi: Option<f64>,
    /// Categories whose every slice must have exactly the control's normalised words.
    #[serde(default)]
    pub exact_categories: Vec<String>,
}

/// The arm must end failed or not runnable, with a failure reason that
/// contains `reason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailClosedGate {
    /// Text the arm's failure reasons must contain.
    pub reason: String,
}

/// The measurement is sound: the arm completed, every phase is present, at
/// least one request was measured, skipped ticks stay within the allowance,
/// and the host was admitted before the arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidityGate {
    /// Skipped ticks over ticks due (samples + skipped); default 0.01.
    #[serde(default = "default_skipped_fraction")]
    #[schemars(range(min = SKIPPED_FRACTION.min, max = SKIPPED_FRACTION.max))]
    pub max_skipped_fraction: f64,
}

fn default_skipped_fraction() -> f64 {
    0.01
}

impl Default for ValidityGate {
    fn default() -> Self {
        ValidityGate {
            max_skipped_fraction: default_skipped_fraction(),
        }
    }
}

/// Latency with the sampler over latency without it ≤ 1 + tolerance. The
/// harness runs the arm once more as one worker whose requests come in
/// blocks of `block_requests`, the external sampler on (A) and paused (B) in
/// ABBA order for `quads` quads; the gate passes only when the upper end of
/// the ratio's 95 % interval is within the tolerance, fails when the lower
/// end is above it, and is not evaluated in between.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverheadGate {
    /// Allowed slowdown, e.g. 0.02 for 2 % (the default).
    #[serde(default = "default_overhead_tolerance")]
    #[schemars(range(min = TOLERANCE.min, max = TOLERANCE.max))]
    pub tolerance: f64,
    /// ABBA quads of blocks (default 48; at least 6 give a 95 % interval).
    #[serde(default = "default_overhead_quads")]
    #[schemars(range(min = OVERHEAD_QUADS.min, max = OVERHEAD_QUADS.max))]
    pub quads: u32,
    /// The budget: while the interval straddles 1 + `tolerance`, the block
    /// run adds another `quads` quads (a fresh worker each round), until it
    /// decides or this many quads have run. Default: `quads` (one round).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = OVERHEAD_MAX_QUADS.min, max = OVERHEAD_MAX_QUADS.max))]
    pub max_quads: Option<u32>,
    /// Measured requests per block (default 1: consecutive requests' latencies
    /// drift together, so the finest pairing cancels the most host drift).
    #[serde(default = "default_block_requests")]
    #[schemars(range(min = BLOCK_REQUESTS.min, max = BLOCK_REQUESTS.max))]
    pub block_requests: u32,
    /// Test only: CPU microseconds the sampler burns per sampled tick on top
    /// of its reads, to prove the gate catches a costly sampler (default 0).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    #[schemars(range(min = INJECTED_BUSY_US.min, max = INJECTED_BUSY_US.max))]
    pub inject_busy_us: u64,
    /// What the A and B blocks differ by: the external sampler (the
    /// default), or allocation attribution's sampling (jemalloc's
    /// `prof.active`, switched by the worker; the sampler runs in both).
    #[serde(default, skip_serializing_if = "OverheadToggle::is_sampler")]
    pub toggles: OverheadToggle,
}

/// What an overhead gate's block run switches on in A blocks and off in B.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverheadToggle {
    /// The external sampler (paused in B).
    #[default]
    Sampler,
    /// jemalloc's sampling heap profiler (`prof.active` off in B), in an arm
    /// with `attribution = "allocations"`. What it measures is the sampling's
    /// cost; the allocator swap itself (jemalloc for the system's) is in
    /// both blocks and not in the ratio.
    Attribution,
}

impl OverheadToggle {
    pub(crate) fn is_sampler(&self) -> bool {
        *self == OverheadToggle::Sampler
    }

    /// What is on in A blocks and off in B, as the gate's check names it.
    pub fn label(self) -> &'static str {
        match self {
            OverheadToggle::Sampler => "the sampler",
            OverheadToggle::Attribution => "jemalloc's allocation sampling",
        }
    }

    /// The heading of the block run's section in reports.
    pub fn title(self) -> &'static str {
        match self {
            OverheadToggle::Sampler => "Sampler overhead (ABBA blocks in one worker)",
            OverheadToggle::Attribution => {
                "Attribution overhead: jemalloc's sampling on / off (ABBA blocks in one worker)"
            }
        }
    }
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

fn default_overhead_tolerance() -> f64 {
    0.02
}

fn default_overhead_quads() -> u32 {
    48
}

fn default_block_requests() -> u32 {
    1
}

impl Default for OverheadGate {
    fn default() -> Self {
        OverheadGate {
            tolerance: default_overhead_tolerance(),
            quads: default_overhead_quads(),
            max_quads: None,
            block_requests: default_block_requests(),
            inject_busy_us: 0,
            toggles: OverheadToggle::Sampler,
        }
    }
}

/// The soak verdict (`stability` section of the receipt) is stable: no
/// worker series and no system series grows. Inconclusive or absent (the
/// arm was not soaked) is NOT_EVALUATED, never a pass. The thresholds are
/// the protocol's `[soak]` table, recorded in the section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StabilityGate {}

/// The arm's mean idle footprint ≤ the control's × (1 − `min_reduction`),
/// and its stop-to-final p95 ≤ `stop_to_final_ceiling_ms` (reloads
/// included). Both read the receipt's `residency` section; an arm without
/// one is NOT_EVALUATED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdleResidencyGate {
    /// Required idle-RAM reduction as a fraction of the control, `[0, 1)`.
    #[schemars(range(min = MIN_REDUCTION.min), extend("exclusiveMaximum" = MIN_REDUCTION.max))]
    pub min_reduction: f64,
    /// Stop-to-final p95 ceiling in milliseconds.
    #[schemars(range(max = STOP_TO_FINAL_MS.max), extend("exclusiveMinimum" = STOP_TO_FINAL_MS.min))]
    pub stop_to_final_ceiling_ms: f64,
}

/// The arm's decode throughput (warm requests; the first request where it
/// is the only one) within absolute bounds. At least one key is set. A
/// tokens-per-second bound on an arm that decodes nothing (a calibration
/// arm), or whose runtime does not expose decode time, cannot be judged and
/// never passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThroughputGate {
    /// Lowest decode tokens per second (tokens decoded / decode time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = TOKENS_PER_S.max), extend("exclusiveMinimum" = TOKENS_PER_S.min))]
    pub min_tokens_per_s: Option<f64>,
    /// Highest real-time factor (processing time / audio duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = REAL_TIME_FACTOR.max), extend("exclusiveMinimum" = REAL_TIME_FACTOR.min))]
    pub max_real_time_factor: Option<f64>,
}

/// What an arm is expected to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Complete and be measured (the normal case).
    #[default]
    Pass,
    /// Fail closed (e.g. a missing Core ML sidecar); needs a `fail_closed` gate.
    Fail,
}

/// An arm's gate declaration, as recorded in `run.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArmGates {
    /// The run verdict is the conjunction over promoted arms.
    #[serde(default)]
    pub promote: bool,
    /// What the arm is expected to do; default `pass`.
    #[serde(default)]
    pub expect: Expect,
    /// The gates declared for the arm, in protocol order.
    #[serde(default)]
    pub gates: Vec<GateSpec>,
}

impl GateSpec {
    /// The gate's kind as written in the protocol.
    pub fn kind(&self) -> &'static str {
        match self {
            GateSpec::Memory(_) => "memory",
            GateSpec::Latency(_) => "latency",
            GateSpec::Parity(_) => "parity",
            GateSpec::Quality(_) => "quality",
            GateSpec::FailClosed(_) => "fail_closed",
            GateSpec::Validity(_) => "validity",
            GateSpec::Overhead(_) => "overhead",
            GateSpec::Stability(_) => "stability",
            GateSpec::IdleResidency(_) => "idle_residency",
            GateSpec::Throughput(_) => "throughput",
        }
    }

    /// Whether the gate compares the arm with its control.
    pub fn needs_control(&self) -> bool {
        match self {
            GateSpec::Memory(m) => m.ceiling_mib.is_none(),
            GateSpec::Latency(_)
            | GateSpec::Parity(_)
            | GateSpec::Quality(_)
            | GateSpec::IdleResidency(_) => true,
            GateSpec::FailClosed(_) | GateSpec::Validity(_) | GateSpec::Overhead(_) => false,
            GateSpec::Stability(_) | GateSpec::Throughput(_) => false,
        }
    }

    /// Whether the gate judges decoded speech, so an arm that decodes
    /// nothing (a calibration arm) cannot carry it.
    pub fn needs_decoding(&self) -> bool {
        matches!(self, GateSpec::Throughput(_))
    }

    /// The overhead gate, if this is one (the harness runs its block run).
    pub fn as_overhead(&self) -> Option<&OverheadGate> {
        match self {
            GateSpec::Overhead(o) => Some(o),
            _ => None,
        }
    }

    /// Check the parameters; the error names the key (relative to the
    /// gate's table), its value and the allowed range.
    pub fn validate(&self) -> Result<(), FieldError> {
        match self {
            GateSpec::Memory(m) => {
                let set = [
                    m.min_reduction.is_some(),
                    m.control_factor.is_some(),
                    m.ceiling_mib.is_some(),
                ];
                if set.iter().filter(|s| **s).count() != 1 {
                    return Err(FieldError::new(
                        "",
                        "a memory gate needs exactly one of min_reduction, control_factor, ceiling_mib",
                    ));
                }
                if let Some(r) = m.min_reduction {
                    MIN_REDUCTION.check("min_reduction", r)?;
                }
                if let Some(f) = m.control_factor {
                    CONTROL_FACTOR.check("control_factor", f)?;
                }
                if let Some(c) = m.ceiling_mib {
                    CEILING_MIB.check("ceiling_mib", c)?;
                }
                if m.with_encoder_process {
                    encoder_pairing(m.phase, m.field)
                        .map_err(|e| FieldError::new("with_encoder_process", e))?;
                }
                if let Some(a) = m.allowance_mib {
                    if !m.with_encoder_process {
                        return Err(FieldError::new(
                            "allowance_mib",
                            "allowance_mib goes with with_encoder_process = true",
                        ));
                    }
                    if !(0.0..=1024.0).contains(&a) {
                        return Err(FieldError::new(
                            "allowance_mib",
                            format!("allowance_mib = {a} is outside 0..=1024"),
                        ));
                    }
                }
                Ok(())
            }
            GateSpec::Latency(l) => TOLERANCE.check("tolerance", l.tolerance).map(|_| ()),
            GateSpec::Quality(q) => {
                if q.wer_delta.is_none() && q.min_qoi.is_none() {
                    return Err(FieldError::new(
                        "",
                        "a quality gate needs wer_delta, min_qoi or both",
                    ));
                }
                if let Some(d) = q.wer_delta {
                    WER_DELTA.check("wer_delta", d)?;
                }
                if let Some(m) = q.min_qoi {
                    MIN_QOI.check("min_qoi", m)?;
                }
                if let Some(i) = q.exact_categories.iter().position(|c| c.trim().is_empty()) {
                    return Err(FieldError::new(
                        format!("exact_categories[{i}]"),
                        "exact_categories holds an empty name",
                    ));
                }
                Ok(())
            }
            GateSpec::FailClosed(f) => {
                if f.reason.trim().is_empty() {
                    Err(FieldError::new(
                        "reason",
                        "reason must name the expected failure (a substring of it)",
                    ))
                } else {
                    Ok(())
                }
            }
            GateSpec::Validity(v) => SKIPPED_FRACTION
                .check("max_skipped_fraction", v.max_skipped_fraction)
                .map(|_| ()),
            GateSpec::Overhead(o) => {
                TOLERANCE.check("tolerance", o.tolerance)?;
                OVERHEAD_QUADS.check("quads", u64::from(o.quads))?;
                if let Some(max) = o.max_quads {
                    OVERHEAD_MAX_QUADS.check("max_quads", u64::from(max))?;
                    if max < o.quads {
                        return Err(FieldError::new(
                            "max_quads",
                            format!("max_quads = {max} is below quads = {}", o.quads),
                        ));
                    }
                }
                BLOCK_REQUESTS.check("block_requests", u64::from(o.block_requests))?;
                INJECTED_BUSY_US.check("inject_busy_us", o.inject_busy_us)?;
                if o.toggles == OverheadToggle::Attribution && o.inject_busy_us > 0 {
                    return Err(FieldError::new(
                        "inject_busy_us",
                        "inject_busy_us burns CPU in the external sampler, which runs in both \
                         blocks when toggles = \"attribution\"; drop one of them"
                            .to_string(),
                    ));
                }
                Ok(())
            }
            GateSpec::Parity(_) => Ok(()),
            GateSpec::Stability(_) => Ok(()),
            GateSpec::IdleResidency(g) => {
                MIN_REDUCTION.check("min_reduction", g.min_reduction)?;
                STOP_TO_FINAL_MS.check("stop_to_final_ceiling_ms", g.stop_to_final_ceiling_ms)?;
                Ok(())
            }
            GateSpec::Throughput(t) => {
                if t.min_tokens_per_s.is_none() && t.max_real_time_factor.is_none() {
                    return Err(FieldError::new(
                        "",
                        "a throughput gate needs min_tokens_per_s, max_real_time_factor or both",
                    ));
                }
                if let Some(v) = t.min_tokens_per_s {
                    TOKENS_PER_S.check("min_tokens_per_s", v)?;
                }
                if let Some(v) = t.max_real_time_factor {
                    REAL_TIME_FACTOR.check("max_real_time_factor", v)?;
                }
                Ok(())
            }
        }
    }
}

/// `min_reduction`: a fraction of the control, `[0, 1)`.
pub const MIN_REDUCTION: FloatBound = FloatBound::below(0.0, 1.0, "a fraction of the control");
/// `control_factor`: a positive multiple of the control, at most 1000.
pub const CONTROL_FACTOR: FloatBound = FloatBound::above(0.0, 1000.0, "a multiple of the control");
/// `ceiling_mib`: positive, at most 1 TiB.
pub const CEILING_MIB: FloatBound = FloatBound::above(0.0, 1_048_576.0, "MiB, at most 1 TiB");
/// Latency and overhead `tolerance`: a fraction, at most 100 (10000 %).
pub const TOLERANCE: FloatBound = FloatBound::closed(0.0, 100.0, "a fraction: 0.1 is 10 %");
/// `wer_delta`: an absolute WER allowance.
pub const WER_DELTA: FloatBound = FloatBound::closed(0.0, 1.0, "absolute WER, 0.01 is one point");
/// `min_qoi`: a share of fixtures, 0 to 1.
pub const MIN_QOI: FloatBound = FloatBound::closed(0.0, 1.0, "a share of fixtures: 0.95 is 95 %");
/// `min_tokens_per_s`: positive, at most a million.
pub const TOKENS_PER_S: FloatBound =
    FloatBound::above(0.0, 1_000_000.0, "tokens per second, at most 1e6");
/// `max_real_time_factor`: positive, at most 1000 (1000 × slower than real time).
pub const REAL_TIME_FACTOR: FloatBound =
    FloatBound::above(0.0, 1000.0, "processing time over audio time");
/// `max_skipped_fraction`: a fraction of the ticks due.
pub const SKIPPED_FRACTION: FloatBound =
    FloatBound::closed(0.0, 1.0, "a fraction of the ticks due");
/// `stop_to_final_ceiling_ms`: positive, at most an hour.
pub const STOP_TO_FINAL_MS: FloatBound =
    FloatBound::above(0.0, 3_600_000.0, "milliseconds, at most 1 hour");
/// `quads`: ABBA quads of blocks; fewer than 6 cannot give a 95 % interval.
pub const OVERHEAD_QUADS: IntBound =
    IntBound::new(6, 100, "fewer than 6 quads cannot give a 95 % interval");
/// `max_quads`: the budget of ABBA quads over every round.
pub const OVERHEAD_MAX_QUADS: IntBound =
    IntBound::new(6, 2_000, "quads over every round of the block run");
/// `block_requests`: measured requests per block.
pub const BLOCK_REQUESTS: IntBound = IntBound::new(1, 100, "measured requests per block");
/// `inject_busy_us`: test-only CPU per sampled tick, below a 1 s period.
pub const INJECTED_BUSY_US: IntBound =
    IntBound::new(0, 1_000_000, "microseconds of CPU per sampled tick");

impl ArmGates {
    /// Check the declaration as a whole: `expect = "fail"` and a
    /// `fail_closed` gate go together, and gates that compare need a control.
    pub fn validate(&self, has_control: bool) -> Result<(), String> {
        for gate in &self.gates {
            gate.validate()
                .map_err(|e| format!("gate `{}`: {}", gate.kind(), e.message))?;
            if gate.needs_control() && !has_control {
                return Err(format!(
                    "gate `{}` compares with a control: add `control = \"<arm id>\"` to the arm",
                    gate.kind()
                ));
            }
        }
        let fail_closed = self
            .gates
            .iter()
            .any(|g| matches!(g, GateSpec::FailClosed(_)));
        match (self.expect, fail_closed) {
            (Expect::Fail, false) => Err(
                "expect = \"fail\" needs a `fail_closed` gate naming the expected reason".into(),
            ),
            (Expect::Pass, true) => {
                Err("a `fail_closed` gate needs expect = \"fail\" on the arm".into())
            }
            _ => Ok(()),
        }
    }
}

/// A pairing the encoder process's self-report can answer: its three steps
/// carry resident, footprint and virtual bytes.
pub(crate) fn encoder_pairing(phase: Phase, field: MemoryField) -> Result<(), String> {
    if !matches!(phase, Phase::ModelLoaded | Phase::StateReady) {
        return Err(format!(
            "the encoder process reports its memory at model_loaded and state_ready, not at {phase}"
        ));
    }
    if !matches!(
        field,
        MemoryField::ResidentBytes | MemoryField::FootprintBytes | MemoryField::VirtualBytes
    ) {
        return Err(format!(
            "the encoder process reports resident_bytes, footprint_bytes and virtual_bytes, not {}",
            serde_json::to_value(field)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ));
    }
    Ok(())
}
