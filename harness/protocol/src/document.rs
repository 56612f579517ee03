//! Protocol files: TOML, strict (unknown keys are errors), validated before
//! any worker starts. Errors name `file:line:col` and the key.

mod placeholders;
mod soak;

pub use soak::{CYCLES, SoakDecl};

use crate::census::CensusPlan;
use crate::limits::TIMEOUT_S;
use crate::sampling::{Defaults, Sampling};
use crate::snapshots::SnapshotPlan;
use crate::spans::Spans;
use crate::whisper_arm::{FixtureCatalog, ModelCatalog, ModelRef, WhisperArmDecl};
use reports::admission::AdmissionThresholds;
use reports::gates::{ArmGates, Expect, GateSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use worker_contract::{CalibrationSpec, FieldError, WorkerSpec};

/// The protocol format version this memqual reads.
pub const PROTOCOL_SCHEMA_VERSION: u32 = 1;

/// A memqual protocol file: the arms to run, how they are sampled and judged.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Protocol format version; must equal the version this memqual reads (1).
    pub schema_version: u32,
    /// Protocol name, recorded in the run record and printed when the run starts.
    #[schemars(with = "String")]
    pub name: toml::Spanned<String>,
    /// Free-form description, printed when the run starts.
    #[serde(default)]
    pub description: String,
    /// External sampler settings for every arm (an arm may override them).
    #[serde(default)]
    pub sampling: Sampling,
    /// Defaults every arm inherits.
    #[serde(default)]
    pub defaults: Defaults,
    /// Named strings that `${name}` in model paths refers to, and that a
    /// value written as exactly `"${name}"` anywhere outside `[params]`
    /// stands for (a number or boolean when the string reads as one);
    /// `--param name=value` overrides.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Quiet-host admission thresholds and window.
    #[serde(default)]
    pub admission: AdmissionThresholds,
    /// The arms (`[[arm]]`), run in this order.
    #[serde(rename = "arm", default)]
    pub arms: Vec<ArmDecl>,
    /// Tool snapshots at phase boundaries, and an optional cadence.
    #[serde(default)]
    pub snapshots: SnapshotPlan,
    /// The process census and its threshold.
    #[serde(default)]
    pub census: CensusPlan,
    /// How `memqual soak` judges growth (thresholds, warm-up, history).
    pub soak: Option<SoakDecl>,
}

/// One arm as declared: exactly one worker table (`calibrate` or `whisper`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArmDecl {
    /// Arm id: 1 to 64 letters, digits, '.', '_' or '-', not starting with '.';
    /// unique in the protocol.
    #[schemars(with = "String")]
    pub id: toml::Spanned<String>,
    /// Free-form description, printed when the arm starts.
    #[serde(default)]
    pub description: String,
    /// Seconds this arm may run before its worker's process group is killed
    /// (default: `defaults.arm_timeout_s`).
    #[schemars(range(min = crate::limits::TIMEOUT_S.min, max = crate::limits::TIMEOUT_S.max))]
    pub timeout_s: Option<u64>,
    /// Sampler settings for this arm (default: the protocol's `sampling`).
    pub sampling: Option<Sampling>,
    /// The arm this one is compared with (parity, gates).
    #[schemars(with = "Option<String>")]
    pub control: Option<toml::Spanned<String>>,
    /// The run verdict is the conjunction over the arms marked `promote`
    /// (over every arm with gates when none is).
    #[serde(default)]
    pub promote: bool,
    /// `fail`: the arm must fail closed (needs a `fail_closed` gate).
    #[serde(default)]
    pub expect: Expect,
    /// A device memory ceiling for the worker, as a number and a unit:
    /// `"1.5 GiB"` (units B, KiB, MiB, GiB, TiB and decimal KB, MB, GB,
    /// TB; at least 1 MiB and at most this host's physical memory). The
    /// external sampler's watchdog kills the worker's process group at the
    /// first tick, or the first phase marker, whose kernel peak (Linux
    /// `VmHWM`, macOS the footprint peak) is above it, and the arm fails
    /// naming the ceiling, the peak and the phase. An arm meant to be killed
    /// declares `expect = "fail"` and a `fail_closed` gate.
    #[schemars(
        with = "Option<String>",
        regex(pattern = r"^\s*[0-9]+(\.[0-9]{1,9})?\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\s*$")
    )]
    pub memory_ceiling: Option<toml::Spanned<String>>,
    /// `"allocations"`: attribute the worker's heap to allocation sites per
    /// phase (Linux: jemalloc's sampling heap profiler, preloaded; macOS:
    /// `MallocStackLogging=lite` and `malloc_history`). Default `"off"`.
    /// The profiler changes the worker's allocator, so an arm with it and
    /// an arm without it are never each other's control. `memqual run
    /// --attribution` turns it on for every arm. See docs/attribution.md.
    #[schemars(with = "Option<reports::attribution::AttributionMode>")]
    pub attribution: Option<toml::Spanned<reports::attribution::AttributionMode>>,
    /// Gates (`[[arm.gate]]`), judged conjunctively.
    #[serde(rename = "gate", default)]
    #[schemars(with = "Vec<GateSpec>")]
    pub gates: Vec<toml::Spanned<GateSpec>>,
    /// A calibration arm: known allocations run by `memqual-calibrate`.
    pub calibrate: Option<CalibrationSpec>,
    /// A whisper arm: real inference run by `memqual-whisper`.
    pub whisper: Option<WhisperArmDecl>,
}

/// A validated arm, ready to run.
#[derive(Debug, Clone)]
pub struct Arm {
    /// Arm id, unique in the protocol.
    pub id: String,
    /// Free-form description from the protocol.
    pub description: String,
    /// How long the arm may run before its worker's process group is killed.
    pub timeout: Duration,
    /// External sampler tick period.
    pub period: Duration,
    /// How often the sampler reads the system files (at least `period`).
    pub system_period: Duration,
    /// What the worker runs, sent to it as its arm spec.
    pub worker: WorkerSpec,
    /// Id of the arm this one is compared with (parity, gates); always another
    /// arm of the same protocol.
    pub control: Option<String>,
    /// The model a whisper arm loads, as named (a named model may need building first).
    pub model: Option<ModelRef>,
    /// Tool snapshots at phase boundaries (the protocol's `[snapshots]`).
    pub snapshots: SnapshotPlan,
    /// The process census and its threshold (the protocol's `[census]`).
    pub census: CensusPlan,
    /// Declared gates, `promote` and `expect`.
    pub gates: ArmGates,
    /// Wait after each `request_end` before a `settled` snapshot (soak only).
    pub settle_ms: u64,
    /// A soaked arm's analysis settings, written as its `soak.json` before it runs.
    pub soak: Option<analysis::stability::SoakSettings>,
    /// A lifecycle soak's cycle, sent to the worker in its spec (soak only).
    pub lifecycle: Option<worker_contract::Lifecycle>,
    /// The worker's memory ceiling in bytes (`memory_ceiling`), enforced by
    /// the external sampler's watchdog; `None`: no ceiling.
    pub memory_ceiling: Option<u64>,
    /// Whether the worker's allocations are attributed to sites (`attribution`).
    pub attribution: reports::attribution::AttributionMode,
}

/// A protocol that parsed and validated, with its source text kept verbatim.
#[derive(Debug, Clone)]
pub struct LoadedProtocol {
    /// The protocol file as given (used in messages and reports).
    pub path: PathBuf,
    /// Protocol name.
    pub name: String,
    /// Free-form protocol description.
    pub description: String,
    /// The protocol's source text, verbatim, for the run record.
    pub text: String,
    /// Parameters after `--param` overrides.
    pub params: BTreeMap<String, String>,
    /// Quiet-host admission thresholds and window.
    pub admission: AdmissionThresholds,
    /// Validated arms, in protocol order.
    pub arms: Vec<Arm>,
    /// The `[soak]` table, if any (`memqual soak` uses defaults without it).
    pub soak: Option<SoakDecl>,
    /// Set by `--shard I/N`: `arms` then holds that share (the harness's `fleet` module).
    pub shard: Option<reports::record::ShardInfo>,
}

/// What parsing needs from outside the file: parameter overrides, the
/// directory relative paths start from, and the fixture and model catalogs.
pub struct ParseContext<'a> {
    /// `--param name=value` overrides of the protocol's `params`.
    pub overrides: BTreeMap<String, String>,
    /// Directory relative paths in the protocol start from (the protocol file's
    /// directory when loaded with `load`).
    pub base_dir: PathBuf,
    /// Fixtures a whisper arm may name.
    pub fixtures: &'a FixtureCatalog,
    /// Named models a whisper arm may refer to.
    pub models: &'a dyn ModelCatalog,
    /// This host's RAM: a calibration arm whose patterns would hold more is
    /// refused (`None`: unknown, not checked).
    pub physical_memory: Option<u64>,
}

/// Parse `text` with no fixtures, no named models and the host's RAM
/// unknown: the context unit tests outside this crate need.
pub fn parse_without_catalogs(text: &str) -> Result<LoadedProtocol, ProtocolError> {
    let ctx = ParseContext {
        overrides: BTreeMap::new(),
        base_dir: PathBuf::from("."),
        fixtures: &FixtureCatalog::default(),
        models: &crate::whisper_arm::NoModels,
        physical_memory: None,
    };
    parse("p.toml", text, &ctx)
}

/// A protocol that cannot be run, located in its file.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ProtocolError {
    /// The protocol file as named in messages.
    pub file: String,
    /// 1-based line of the key the error is about (or of the nearest enclosing
    /// table written in the file).
    pub line: usize,
    /// 1-based column on that line.
    pub col: usize,
    /// What is wrong and, where possible, what to do.
    pub message: String,
}

/// Why a protocol could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read: absent, not a regular file, too large or not
    /// UTF-8.
    #[error("cannot read the protocol: {0}")]
    Read(#[from] run_dir::RunDirError),
    /// The file was read but does not parse or validate.
    #[error(transparent)]
    Invalid(#[from] ProtocolError),
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, col)
}

fn error_at(file: &str, text: &str, span: Option<Range<usize>>, message: String) -> ProtocolError {
    let (line, col) = span.map_or((1, 1), |s| line_col(text, s.start));
    ProtocolError {
        file: file.to_string(),
        line,
        col,
        message,
    }
}

const ID_CHARS: &str = "letters, digits, '.', '_' and '-'";

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `prefix.key`, or whichever of the two is not empty.
fn join(prefix: &str, key: &str) -> String {
    match (prefix.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}.{key}"),
    }
}

/// Parse and validate protocol text; `file` is used only in messages.
/// Every number is range-checked here, and every error is located at the
/// key it is about (or at the nearest enclosing table written in the file).
pub fn parse(file: &str, text: &str, ctx: &ParseContext) -> Result<LoadedProtocol, ProtocolError> {
    // Parameters first: whole-value placeholders need them before the
    // typed parse can read the values they stand for.
    let declared: ParamsOnly = toml::from_str(text)
        .map_err(|e| error_at(file, text, e.span(), e.message().trim().to_string()))?;
    let params = resolve_params(file, text, &declared.params, ctx, &Spans::parse(text))?;
    let rewritten = placeholders::rewrite(text, &params).map_err(|u| {
        let name = u.name;
        error_at(
            file,
            text,
            Some(u.span),
            format!(
                "`${{{name}}}` names a parameter that is not set: declare it under [params] or pass --param {name}=…"
            ),
        )
    })?;
    // Errors are located in the text as written, not as rewritten.
    let located = |span: Option<Range<usize>>, message: String| {
        error_at(file, text, span.map(|s| rewritten.original(s)), message)
    };
    let raw: Protocol = toml::from_str(&rewritten.text)
        .map_err(|e| located(e.span(), e.message().trim().to_string()))?;
    let spans = Spans::parse(&rewritten.text);
    let at = |span: Range<usize>, message: String| located(Some(span), message);
    // An error about the key at `path` (dotted, from the document root).
    let at_key = |path: &str, message: String| located(spans.value(path), message);
    // A checked table's error, its key relative to `table`.
    let in_table = |table: &str, e: FieldError| {
        let e = e.under(table);
        at_key(&e.key, e.message)
    };
    if raw.schema_version != PROTOCOL_SCHEMA_VERSION {
        return Err(at_key(
            "schema_version",
            format!(
                "schema_version = {} is not supported; this memqual reads version {PROTOCOL_SCHEMA_VERSION}",
                raw.schema_version
            ),
        ));
    }
    if !valid_id(raw.name.get_ref()) {
        return Err(at(
            raw.name.span(),
            format!("name must use only {ID_CHARS} (1–64 characters)"),
        ));
    }
    if raw.arms.is_empty() {
        return Err(located(None, "the protocol declares no [[arm]]".into()));
    }
    for checked in [
        raw.sampling.validate(),
        raw.defaults.validate(),
        raw.snapshots.validate(),
        raw.census.validate(),
    ] {
        checked.map_err(|e| at_key(&e.key, e.message))?;
    }
    raw.admission
        .validate()
        .map_err(|e| in_table("admission", e))?;
    let mut seen = std::collections::HashSet::new();
    let mut arms = Vec::with_capacity(raw.arms.len());
    let mut controls = Vec::with_capacity(raw.arms.len());
    let mut attribution_spans = Vec::with_capacity(raw.arms.len());
    for (index, decl) in raw.arms.into_iter().enumerate() {
        let span = decl.id.span();
        let id = decl.id.into_inner();
        if !valid_id(&id) {
            return Err(at(
                span,
                format!("arm id `{id}` must use only {ID_CHARS} (1–64 characters)"),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(at(span, format!("arm id `{id}` is declared twice")));
        }
        let here = format!("arm[{index}]");
        // An error about key `key` of this arm, said of the arm.
        let in_arm = |key: &str, message: String| {
            at_key(&join(&here, key), format!("arm `{id}`: {message}"))
        };
        let control_span = decl.control.as_ref().map(|c| c.span());
        attribution_spans.push(
            decl.attribution
                .as_ref()
                .map_or_else(|| span.clone(), |a| a.span()),
        );
        let sampling = decl.sampling.unwrap_or(raw.sampling);
        sampling.validate().map_err(|e| in_arm(&e.key, e.message))?;
        let (worker, model) = match (decl.calibrate, decl.whisper) {
            (Some(cal), None) => {
                let checked = cal.validate().and_then(|()| match ctx.physical_memory {
                    Some(ram) => cal.check_fits(ram),
                    None => Ok(()),
                });
                checked.map_err(|e| {
                    let e = e.under("calibrate");
                    in_arm(&e.key, e.message)
                })?;
                (WorkerSpec::Calibrate(cal), None)
            }
            (None, Some(w)) => {
                let (spec, model) = crate::whisper_arm::resolve(
                    &w,
                    &params,
                    &ctx.base_dir,
                    ctx.fixtures,
                    ctx.models,
                )
                .map_err(|e| in_arm(&join("whisper", &e.key), format!("whisper: {}", e.message)))?;
                (WorkerSpec::Whisper(Box::new(spec)), Some(model))
            }
            (Some(_), Some(_)) => {
                return Err(at(
                    span,
                    format!("arm `{id}` has both [arm.calibrate] and [arm.whisper]: keep one"),
                ));
            }
            (None, None) => {
                return Err(at(
                    span,
                    format!("arm `{id}` has no worker table: add [arm.whisper] or [arm.calibrate]"),
                ));
            }
        };
        let timeout_s = match decl.timeout_s {
            Some(t) => TIMEOUT_S
                .check("timeout_s", t)
                .map_err(|e| in_arm(&e.key, e.message))?,
            None => raw.defaults.arm_timeout_s,
        };
        let mut gate_spans = Vec::with_capacity(decl.gates.len());
        let mut gates = Vec::with_capacity(decl.gates.len());
        for g in decl.gates {
            gate_spans.push(g.span());
            gates.push(g.into_inner());
        }
        let gates = ArmGates {
            promote: decl.promote,
            expect: decl.expect,
            gates,
        };
        for (g, gate) in gates.gates.iter().enumerate() {
            gate.validate().map_err(|e| {
                in_arm(
                    &join(&format!("gate[{g}]"), &e.key),
                    format!("gate `{}`: {}", gate.kind(), e.message),
                )
            })?;
        }
        gates.validate(decl.control.is_some()).map_err(|e| {
            at(
                gate_spans.first().cloned().unwrap_or(span.clone()),
                format!("arm `{id}`: {e}"),
            )
        })?;
        // Fail closed before anything runs: a calibration worker decodes
        // nothing, so a bound on decoding could never be judged.
        if matches!(worker, WorkerSpec::Calibrate(_))
            && let Some((g, gate)) = gates
                .gates
                .iter()
                .enumerate()
                .find(|(_, g)| g.needs_decoding())
        {
            return Err(at(
                gate_spans[g].clone(),
                format!(
                    "arm `{id}`: gate `{}` (gate[{g}]) judges decoded speech, and a calibration \
                     arm decodes nothing: move the gate to a whisper arm",
                    gate.kind()
                ),
            ));
        }
        let memory_ceiling = decl
            .memory_ceiling
            .as_ref()
            .map(|c| memory_ceiling(c.get_ref(), ctx.physical_memory))
            .transpose()
            .map_err(|message| in_arm("memory_ceiling", message))?;
        arms.push(Arm {
            id,
            description: decl.description,
            timeout: Duration::from_secs(timeout_s),
            period: Duration::from_millis(sampling.period_ms),
            system_period: Duration::from_millis(sampling.system_period_ms.max(sampling.period_ms)),
            worker,
            control: decl.control.map(|c| c.into_inner()),
            model,
            snapshots: raw.snapshots,
            census: raw.census,
            gates,
            settle_ms: 0,
            soak: None,
            lifecycle: None,
            memory_ceiling,
            attribution: decl
                .attribution
                .map(toml::Spanned::into_inner)
                .unwrap_or_default(),
        });
        controls.push(control_span);
    }
    for (arm, span) in arms.iter().zip(controls) {
        if let Some(control) = &arm.control
            && (control == &arm.id || !arms.iter().any(|a| &a.id == control))
        {
            return Err(at(
                span.unwrap_or(0..0),
                format!(
                    "arm `{}`: control `{control}` is not another arm of this protocol",
                    arm.id
                ),
            ));
        }
    }
    for (arm, span) in arms.iter().zip(attribution_spans) {
        if let Some(message) =
            attribution_against_control(arm, &arms).or_else(|| attribution_overhead_unprofiled(arm))
        {
            return Err(at(span, message));
        }
    }
    if let Some(soak) = &raw.soak {
        soak.validate().map_err(|e| in_table("soak", e))?;
    }
    Ok(LoadedProtocol {
        path: PathBuf::from(file),
        name: raw.name.into_inner(),
        description: raw.description,
        text: text.to_string(),
        params,
        admission: raw.admission,
        arms,
        soak: raw.soak,
        shard: None,
    })
}

/// Why `arm` cannot be compared with its control: one is profiled and the
/// other is not. A profiled worker runs on another allocator (jemalloc,
/// or macOS's logging zone), so its memory and latency are not the
/// control's kind of figure, in either direction.
pub fn attribution_against_control(arm: &Arm, arms: &[Arm]) -> Option<String> {
    let control = arms.iter().find(|a| Some(&a.id) == arm.control.as_ref())?;
    (control.attribution != arm.attribution).then(|| {
        let says = |a: &Arm| match a.attribution {
            reports::attribution::AttributionMode::Off => "off",
            reports::attribution::AttributionMode::Allocations => "\"allocations\"",
        };
        format!(
            "arm `{}`: attribution = {} but its control `{}` has attribution = {}: a profiled \
             worker runs on another allocator, so the two cannot be compared; give both the \
             same attribution (or run `memqual run --attribution`, which profiles every arm)",
            arm.id,
            says(arm),
            control.id,
            says(control)
        )
    })
}

/// Why `arm`'s overhead gate cannot toggle attribution: the arm is not profiled.
fn attribution_overhead_unprofiled(arm: &Arm) -> Option<String> {
    let toggles = arm
        .gates
        .gates
        .iter()
        .find_map(|g| g.as_overhead())?
        .toggles;
    (toggles == reports::gate_spec::OverheadToggle::Attribution
        && arm.attribution == reports::attribution::AttributionMode::Off)
        .then(|| {
            format!(
                "arm `{}`: its overhead gate has toggles = \"attribution\", which switches \
                 jemalloc's sampling between requests, but the arm is not profiled; add \
                 attribution = \"allocations\" to the arm",
                arm.id
            )
        })
}

/// Turn allocation attribution on for every arm (`memqual run --attribution`).
pub fn attribute_all(protocol: &mut LoadedProtocol) {
    for arm in &mut protocol.arms {
        arm.attribution = reports::attribution::AttributionMode::Allocations;
    }
}

/// The `[params]` table alone, read before the rest of the protocol.
#[derive(Deserialize)]
struct ParamsOnly {
    #[serde(default)]
    params: BTreeMap<String, String>,
}

/// The parameters `text` declares under `[params]` (none when it does not
/// parse: loading it says why).
pub fn declared_params(text: &str) -> std::collections::BTreeSet<String> {
    toml::from_str::<ParamsOnly>(text)
        .map(|p| p.params.into_keys().collect())
        .unwrap_or_default()
}

/// The smallest ceiling accepted: no worker starts in less, so a lower one
/// could only ever kill it.
pub const MIN_MEMORY_CEILING: u64 = 1 << 20;

/// `memory_ceiling` in bytes, or the message refusing it: not a size, zero,
/// below [`MIN_MEMORY_CEILING`], or above `physical_memory` (where known).
fn memory_ceiling(text: &str, physical_memory: Option<u64>) -> Result<u64, String> {
    let said = |why: String| format!("memory_ceiling = {text:?} {why}");
    let bytes = crate::byte_size::parse_bytes(text).map_err(|e| said(e.to_string()))?;
    if bytes == 0 {
        return Err(said(
            "is zero: give the most memory the worker may hold, e.g. \"1.5 GiB\"".into(),
        ));
    }
    if bytes < MIN_MEMORY_CEILING {
        return Err(said(format!(
            "({bytes} bytes) is below 1 MiB, the smallest ceiling: no worker starts in less"
        )));
    }
    match physical_memory {
        Some(ram) if bytes > ram => Err(said(format!(
            "({bytes} bytes) is above this host's physical memory ({} MiB, MemTotal): it can \
             never be crossed on this host; lower it or drop the key",
            ram >> 20
        ))),
        _ => Ok(bytes),
    }
}

/// `[params]` with the `--param` overrides, expanded. Messages name each
/// parameter with where it is declared (`file:line:col`, or `--param NAME`),
/// and the error is located at the parameter it is about.
fn resolve_params(
    file: &str,
    text: &str,
    declared: &BTreeMap<String, String>,
    ctx: &ParseContext,
    spans: &Spans,
) -> Result<BTreeMap<String, String>, ProtocolError> {
    // An override of a name the file never declares is refused first: it
    // would be set and never used, and the default measured in its place.
    for name in ctx.overrides.keys() {
        if let Some(message) = crate::params::undeclared(name, file, declared.keys()) {
            return Err(error_at(file, text, spans.value("params"), message));
        }
    }
    let mut values = declared.clone();
    values.extend(ctx.overrides.clone());
    let declared_at = |name: &str| {
        spans
            .key("params", name)
            .filter(|_| !ctx.overrides.contains_key(name))
    };
    let origin = |name: &str| match declared_at(name) {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!("{file}:{line}:{col}")
        }
        None => format!("--param {name}"),
    };
    crate::params::resolve(&crate::params::Declared {
        values: &values,
        origin: &origin,
    })
    .map_err(|e| {
        let span = declared_at(&e.name).or_else(|| spans.value("params"));
        error_at(file, text, span, e.message)
    })
}

/// The JSON Schema of the protocol format (committed as
/// `protocols/protocol.schema.json` for editors that complete TOML by schema).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Protocol);
    serde_json::to_string_pretty(&schema).expect("a schema always serializes") + "\n"
}

/// Read and validate a protocol file; relative paths in it start from its directory.
pub fn load(path: &Path, ctx: &mut ParseContext) -> Result<LoadedProtocol, LoadError> {
    // A regular file of bounded size only: a FIFO or /dev/zero is refused at once.
    let text = run_dir::input::read_text(path, run_dir::limits::PROTOCOL)?;
    ctx.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(parse(&path.display().to_string(), &text, ctx)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::whisper_arm::NoModels;

    /// The RAM the tests' protocols are checked against: 8 GiB.
    const TEST_RAM: u64 = 8 << 30;

    /// Parse with no fixtures and no named models: enough for calibration arms.
    fn parse_t(text: &str) -> Result<LoadedProtocol, ProtocolError> {
        let ctx = ParseContext {
            overrides: BTreeMap::new(),
            base_dir: PathBuf::from("."),
            fixtures: &FixtureCatalog::default(),
            models: &NoModels,
            physical_memory: Some(TEST_RAM),
        };
        parse("p.toml", text, &ctx)
    }

    const GOOD: &str = r#"schema_version = 1
name = "t"

[[arm]]
id = "a"
[arm.calibrate]
plateau = { mib = 8 }
"#;

    #[test]
    fn a_minimal_protocol_loads_with_defaults() {
        let p = parse_t(GOOD).unwrap();
        assert_eq!(p.name, "t");
        assert_eq!(p.arms.len(), 1);
        assert_eq!(p.arms[0].period, Duration::from_millis(50));
        assert_eq!(p.arms[0].timeout, Duration::from_secs(300));
        let WorkerSpec::Calibrate(c) = &p.arms[0].worker else {
            panic!("a calibrate arm")
        };
        assert_eq!(c.plateau.unwrap().mib, 8);
        assert_eq!(c.requests, 3);
    }

    #[test]
    fn a_typo_names_file_line_col_and_key() {
        let text = GOOD.replace("plateau = { mib = 8 }", "platue = { mib = 8 }");
        let err = parse_t(&text).unwrap_err();
        assert_eq!((err.line, err.col), (7, 1), "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with("p.toml:7:1: "), "{msg}");
        assert!(msg.contains("unknown field `platue`"), "{msg}");
    }

    #[test]
    fn a_typo_inside_an_inline_table_is_located() {
        let text = GOOD.replace("{ mib = 8 }", "{ mb = 8 }");
        let err = parse_t(&text).unwrap_err();
        assert_eq!(err.line, 7, "{err}");
        assert!(err.message.contains("unknown field `mb`"), "{err}");
    }

    #[test]
    fn semantic_errors_point_at_the_arm_or_the_key() {
        let dup = format!("{GOOD}\n[[arm]]\nid = \"a\"\n[arm.calibrate]\n");
        let err = parse_t(&dup).unwrap_err();
        assert_eq!(err.line, 10);
        assert!(err.message.contains("declared twice"), "{err}");

        let bad_spike = GOOD.replace(
            "plateau = { mib = 8 }",
            "spike = { mib = 8, hold_ms = 1, request = 9 }",
        );
        let err = parse_t(&bad_spike).unwrap_err();
        assert_eq!((err.line, err.col), (7, 43), "at the value: {err}");
        assert!(err.message.contains("calibrate.spike.request = 9"), "{err}");

        let no_worker = GOOD.replace("[arm.calibrate]\nplateau = { mib = 8 }\n", "");
        assert!(
            parse_t(&no_worker)
                .unwrap_err()
                .message
                .contains("no worker table")
        );

        let bad_id = GOOD.replace("id = \"a\"", "id = \"../x\"");
        assert!(
            parse_t(&bad_id)
                .unwrap_err()
                .message
                .contains("must use only")
        );

        let v2 = GOOD.replace("schema_version = 1", "schema_version = 2");
        let err = parse_t(&v2).unwrap_err();
        assert_eq!((err.line, err.col), (1, 18));
    }

    #[test]
    fn attribution_is_off_by_default_and_never_crosses_a_control() {
        let p = parse_t(GOOD).unwrap();
        assert_eq!(
            p.arms[0].attribution,
            reports::attribution::AttributionMode::Off
        );
        let on = GOOD.replace(
            "id = \"a\"\n",
            "id = \"a\"\nattribution = \"allocations\"\n",
        );
        let p = parse_t(&on).unwrap();
        assert_eq!(
            p.arms[0].attribution,
            reports::attribution::AttributionMode::Allocations
        );
        let typo = GOOD.replace("id = \"a\"\n", "id = \"a\"\nattribution = \"sites\"\n");
        let err = parse_t(&typo).unwrap_err();
        assert_eq!(err.line, 6, "{err}");
        assert!(err.message.contains("allocations"), "{err}");
        // A profiled control for an arm without it, and the other way round.
        let pair = |a_on: &str, b_on: &str| {
            format!(
                "schema_version = 1\nname = \"t\"\n\
                 [[arm]]\nid = \"a\"\n{a_on}[arm.calibrate]\nplateau = {{ mib = 8 }}\n\
                 [[arm]]\nid = \"b\"\ncontrol = \"a\"\n{b_on}[arm.calibrate]\nplateau = {{ mib = 8 }}\n"
            )
        };
        let on_line = "attribution = \"allocations\"\n";
        for (a_on, b_on, line) in [(on_line, "", 9), ("", on_line, 10)] {
            let text = pair(a_on, b_on);
            let err = parse_t(&text).unwrap_err();
            assert!(err.message.contains("cannot be compared"), "{err}\n{text}");
            assert!(err.message.starts_with("arm `b`"), "{err}");
            // Located at b's key when it has one, else at b's id.
            assert_eq!(err.line, line, "{err}\n{text}");
        }
        let both = format!(
            "{on}\n[[arm]]\nid = \"b\"\ncontrol = \"a\"\nattribution = \"allocations\"\n[arm.calibrate]\nplateau = {{ mib = 8 }}\n"
        );
        assert!(parse_t(&both).is_ok());
        // --attribution profiles every arm, so pairs stay alike.
        let mut p = parse_t(&format!(
            "{GOOD}\n[[arm]]\nid = \"b\"\ncontrol = \"a\"\n[arm.calibrate]\nplateau = {{ mib = 8 }}\n"
        ))
        .unwrap();
        attribute_all(&mut p);
        assert!(
            p.arms
                .iter()
                .all(|a| attribution_against_control(a, &p.arms).is_none())
        );
        assert!(
            p.arms
                .iter()
                .all(|a| a.attribution == reports::attribution::AttributionMode::Allocations)
        );
    }

    #[test]
    fn an_overhead_gate_toggles_attribution_only_in_a_profiled_arm() {
        let arm = |attribution: &str| {
            format!(
                "schema_version = 1\nname = \"t\"\n\
                 [[arm]]\nid = \"a\"\n{attribution}[arm.calibrate]\nrequests = 8\n\
                 [[arm.gate]]\nkind = \"overhead\"\ntoggles = \"attribution\"\nquads = 6\n"
            )
        };
        let err = parse_t(&arm("")).unwrap_err();
        assert!(
            err.message.contains("add attribution = \"allocations\""),
            "{err}"
        );
        assert_eq!(err.line, 4, "at the arm's id: {err}");
        let p = parse_t(&arm("attribution = \"allocations\"\n")).unwrap();
        let gate = p.arms[0].gates.gates[0].as_overhead().unwrap();
        assert_eq!(
            gate.toggles,
            reports::gate_spec::OverheadToggle::Attribution
        );
        // A misspelt toggle names the ones there are.
        let err = parse_t(
            &arm("attribution = \"allocations\"\n")
                .replace("toggles = \"attribution\"", "toggles = \"heap\""),
        )
        .unwrap_err();
        assert!(
            err.message.contains("sampler") && err.message.contains("attribution"),
            "{err}"
        );
    }

    const COMMITTED_SCHEMA: &str = include_str!("../../../protocols/protocol.schema.json");

    #[test]
    fn committed_schema_is_generated_from_the_types() {
        // Regenerate with: MEMQUAL_BLESS=1 cargo test -p protocol committed_schema
        let generated = json_schema();
        if std::env::var_os("MEMQUAL_BLESS").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../protocols/protocol.schema.json"
            );
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert_eq!(
            COMMITTED_SCHEMA, generated,
            "protocols/protocol.schema.json is stale: run MEMQUAL_BLESS=1 cargo test -p protocol committed_schema"
        );
    }

    #[test]
    fn an_unreadable_protocol_says_why_once() {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = FixtureCatalog::default();
        let mut ctx = ParseContext {
            overrides: BTreeMap::new(),
            base_dir: PathBuf::new(),
            fixtures: &fixtures,
            models: &NoModels,
            physical_memory: None,
        };
        let err = load(dir.path(), &mut ctx).unwrap_err();
        assert!(matches!(err, LoadError::Read(_)), "{err}");
        // As memqual prints it: the message and its causes.
        let text = worker_contract::error_text(&err);
        assert_eq!(text.matches("is a directory").count(), 1, "{text}");
        assert!(text.starts_with("cannot read the protocol: "), "{text}");
    }

    #[test]
    fn every_committed_protocol_matches_the_schema() {
        let schema: serde_json::Value = serde_json::from_str(COMMITTED_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../protocols");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            // That each one also loads, with memqual's real fixture and model
            // catalogs, is checked where those live (harness/src/catalogs.rs).
            let text = std::fs::read_to_string(&path).unwrap();
            let value: serde_json::Value = toml::from_str(&text).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            seen += 1;
        }
        assert!(seen >= 1);
        // The schema is strict like the loader: a typo fails it too, and so
        // does a number out of its range.
        let typo: serde_json::Value = toml::from_str(&GOOD.replace("plateau", "platue")).unwrap();
        assert!(!validator.is_valid(&typo));
        for bad in ["plateau = { mib = 17592186044416 }", "requests = 10000001"] {
            let text = GOOD.replace("plateau = { mib = 8 }", bad);
            let value: serde_json::Value = toml::from_str(&text).unwrap();
            assert!(!validator.is_valid(&value), "{text}");
        }
    }

    const GATED: &str = r#"schema_version = 1
name = "t"

[[arm]]
id = "base"
[arm.calibrate]
plateau = { mib = 8 }

[[arm]]
id = "cand"
control = "base"
promote = true
[arm.calibrate]
plateau = { mib = 8 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
min_reduction = 0.1

[[arm.gate]]
kind = "parity"
"#;

    #[test]
    fn gates_load_with_their_parameters() {
        use reports::gates::{MemoryField, MemoryGate};
        let p = parse_t(GATED).unwrap();
        let g = &p.arms[1].gates;
        assert!(g.promote);
        assert_eq!(g.gates.len(), 2);
        assert_eq!(
            g.gates[0],
            GateSpec::Memory(MemoryGate {
                phase: sampler::Phase::StateReady,
                field: MemoryField::ResidentBytes,
                min_reduction: Some(0.1),
                control_factor: None,
                ceiling_mib: None,
                with_encoder_process: false,
                allowance_mib: None,
            })
        );
        assert!(p.arms[0].gates.gates.is_empty());
    }

    #[test]
    fn gate_errors_name_the_line_of_the_gate() {
        // A typo in a gate key.
        let err =
            parse_t(&GATED.replace("min_reduction = 0.1", "min_reduktion = 0.1")).unwrap_err();
        assert!(
            err.message.contains("unknown field `min_reduktion`"),
            "{err}"
        );
        assert!((16..=20).contains(&err.line), "{err}");
        // An unknown kind.
        let err = parse_t(&GATED.replace("kind = \"parity\"", "kind = \"parrot\"")).unwrap_err();
        assert!(err.message.contains("parrot"), "{err}");
        assert_eq!(err.line, 23, "{err}");
        // A bad value, located at the value.
        let err =
            parse_t(&GATED.replace("min_reduction = 0.1", "min_reduction = 1.5")).unwrap_err();
        assert!(
            err.message
                .contains("arm `cand`: gate `memory`: min_reduction = 1.5"),
            "{err}"
        );
        assert_eq!((err.line, err.col), (20, 17), "{err}");
        // A comparing gate without a control.
        let err = parse_t(&GATED.replace("control = \"base\"\n", "")).unwrap_err();
        assert!(err.message.contains("add `control = "), "{err}");
        // expect = "fail" without a fail_closed gate.
        let err = parse_t(&GATED.replace("promote = true", "expect = \"fail\"")).unwrap_err();
        assert!(err.message.contains("needs a `fail_closed` gate"), "{err}");
    }

    #[test]
    fn overhead_gates_default_to_twelve_quads_and_refuse_too_few() {
        use reports::gates::OverheadGate;
        let with = |extra: &str| {
            GATED.replace(
                "kind = \"parity\"",
                &format!("kind = \"parity\"\n\n[[arm.gate]]\nkind = \"overhead\"\n{extra}"),
            )
        };
        for (extra, expected) in [
            ("", OverheadGate::default()),
            (
                "quads = 8\nmax_quads = 24\nblock_requests = 2\ntolerance = 0.05\ninject_busy_us = 4000",
                OverheadGate {
                    tolerance: 0.05,
                    quads: 8,
                    max_quads: Some(24),
                    block_requests: 2,
                    inject_busy_us: 4000,
                    toggles: reports::gate_spec::OverheadToggle::Sampler,
                },
            ),
        ] {
            let p = parse_t(&with(extra)).unwrap();
            assert_eq!(
                p.arms[1].gates.gates[2],
                GateSpec::Overhead(expected),
                "{extra}"
            );
        }
        let err = parse_t(&with("quads = 5")).unwrap_err();
        assert!(
            err.message.contains(
                "arm `cand`: gate `overhead`: quads = 5 is out of range: allowed 6..=100 (fewer than 6 quads cannot give a 95 % interval)"
            ),
            "{err}"
        );
        assert_eq!((err.line, err.col), (27, 9), "{err}");
        // The twin design's key is gone, not silently ignored.
        let err = parse_t(&with("pairs = 2")).unwrap_err();
        assert!(err.message.contains("unknown field `pairs`"), "{err}");
    }

    #[test]
    fn admission_thresholds_are_checked() {
        let p = parse_t(&format!("{GOOD}\n[admission]\nwindow_ms = 200\n")).unwrap();
        assert_eq!(p.admission.window_ms, 200);
        assert_eq!(p.admission.max_load_per_core, 1.5, "defaults fill the rest");
        let err = parse_t(&format!("{GOOD}\n[admission]\nwindow_ms = 0\n")).unwrap_err();
        assert_eq!((err.line, err.col), (10, 13), "{err}");
        let err = parse_t(&format!("{GOOD}\n[admission]\nwindow = 1\n")).unwrap_err();
        assert!(err.message.contains("unknown field `window`"), "{err}");
    }

    /// A calibration arm `a` whose table holds `body` (the table starts on line 6).
    fn cal(top: &str, body: &str) -> String {
        format!(
            "schema_version = 1\nname = \"t\"\n{top}\n[[arm]]\nid = \"a\"\n[arm.calibrate]\n{body}\n"
        )
    }

    /// A whisper arm `w` whose table holds `body`, after a `[params]` table.
    fn whisper(params: &str, body: &str) -> String {
        format!(
            "schema_version = 1\nname = \"t\"\n[params]\n{params}\n[[arm]]\nid = \"w\"\n[arm.whisper]\n{body}\n"
        )
    }

    #[test]
    fn every_bad_number_is_refused_at_its_file_line_col_with_the_allowed_range() {
        let doubling: String = std::iter::once("p00 = \"xx\"".to_string())
            .chain((1..=40).map(|i| format!("p{i:02} = \"${{p{:02}}}${{p{:02}}}\"", i - 1, i - 1)))
            .collect::<Vec<_>>()
            .join("\n");
        let cases: Vec<(String, &str)> = vec![
            (
                cal("", "timeout_s = 1\n").replace(
                    "[arm.calibrate]\ntimeout_s = 1",
                    "timeout_s = 10000000000000000000\n[arm.calibrate]",
                ),
                "p.toml:6:13: arm `a`: timeout_s = 10000000000000000000 is out of range: allowed 1..=604800 (seconds, at most 7 days)",
            ),
            (
                cal("[defaults]\narm_timeout_s = 0", ""),
                "p.toml:4:17: defaults.arm_timeout_s = 0 is out of range: allowed 1..=604800 (seconds, at most 7 days)",
            ),
            (
                cal("[sampling]\nperiod_ms = 0", ""),
                "p.toml:4:13: sampling.period_ms = 0 is out of range: allowed 1..=60000 (milliseconds, at most 1 minute)",
            ),
            (
                cal("", "").replace(
                    "id = \"a\"",
                    "id = \"a\"\nsampling = { period_ms = 18446744073709551615 }",
                ),
                "p.toml:6:26: arm `a`: sampling.period_ms = 18446744073709551615 is out of range: allowed 1..=60000 (milliseconds, at most 1 minute)",
            ),
            (
                cal("", "plateau = { mib = 17592186044416 }"),
                "p.toml:7:19: arm `a`: calibrate.plateau.mib = 17592186044416 is out of range: allowed 0..=1048576 (MiB, at most 1 TiB)",
            ),
            (
                cal("", "leak = { mib_per_request = nan }"),
                "p.toml:7:28: arm `a`: calibrate.leak.mib_per_request = NaN is out of range: allowed a finite number in (0, 1048576] (MiB, at most 1 TiB per request)",
            ),
            (
                cal("", "leak = { mib_per_request = inf }"),
                "p.toml:7:28: arm `a`: calibrate.leak.mib_per_request = inf is out of range: allowed a finite number in (0, 1048576] (MiB, at most 1 TiB per request)",
            ),
            (
                cal("", "reserve = { mib = 2000000 }"),
                "p.toml:7:19: arm `a`: calibrate.reserve.mib = 2000000 is out of range: allowed 0..=1048576 (MiB, at most 1 TiB)",
            ),
            (
                cal("", "spike = { mib = 1, hold_ms = 99999999999 }"),
                "p.toml:7:30: arm `a`: calibrate.spike.hold_ms = 99999999999 is out of range: allowed 0..=3600000 (milliseconds, at most 1 hour)",
            ),
            (
                cal(
                    "",
                    "requests = 4\nsteps = { mib = 1, at_requests = [1, 2, 4] }",
                ),
                "p.toml:8:41: arm `a`: calibrate.steps.at_requests has 4 but the arm has only 4 requests",
            ),
            (
                cal("", "requests = 10000001"),
                "p.toml:7:12: arm `a`: calibrate.requests = 10000001 is out of range: allowed 0..=10000000 (at most 10 million)",
            ),
            (
                cal("", "busy_threads = 100000"),
                "p.toml:7:16: arm `a`: calibrate.busy_threads = 100000 is out of range: allowed 0..=256 (at most 256)",
            ),
            (
                cal("", "shm_file = { kib_per_request = 4, dir = \"/tmp\" }"),
                "p.toml:7:41: arm `a`: calibrate.shm_file.dir = \"/tmp\" is no longer accepted: the pattern's shared memory has no path (memfd), so nothing is written outside the run directory; remove the key",
            ),
            (
                cal(
                    "",
                    "requests = 1\nplateau = { mib = 6000 }\nleak = { mib_per_request = 3000.0 }",
                ),
                "p.toml:6:1: arm `a`: calibrate: the patterns would hold 9000 MiB at their peak, more than this host's physical memory (8192 MiB): make them smaller or use fewer requests",
            ),
            (
                cal("[snapshots]\nevery_ms = 0", ""),
                "p.toml:4:12: snapshots.every_ms = 0 is out of range: allowed 1..=86400000 (milliseconds, at most 1 day)",
            ),
            (
                cal("[census]\nthreshold_mib = nan", ""),
                "p.toml:4:17: census.threshold_mib = NaN is out of range: allowed a finite number in [0, 1048576] (MiB, at most 1 TiB)",
            ),
            (
                cal("[admission]\nmax_psi_some_avg10 = 101.0", ""),
                "p.toml:4:22: admission.max_psi_some_avg10 = 101 is out of range: allowed a finite number in [0, 100] (percent)",
            ),
            (
                cal("", "") + "[[arm.gate]]\nkind = \"validity\"\nmax_skipped_fraction = inf\n",
                "p.toml:10:24: arm `a`: gate `validity`: max_skipped_fraction = inf is out of range: allowed a finite number in [0, 1] (a fraction of the ticks due)",
            ),
            (
                cal("", "") + "[[arm.gate]]\nkind = \"overhead\"\nquads = 1000000\n",
                "p.toml:10:9: arm `a`: gate `overhead`: quads = 1000000 is out of range: allowed 6..=100 (fewer than 6 quads cannot give a 95 % interval)",
            ),
            (
                cal("[soak]\nbootstrap_resamples = 1000000000", ""),
                "p.toml:4:23: soak.bootstrap_resamples = 1000000000 is out of range: allowed 20..=10000 (each is a Theil–Sen fit)",
            ),
            (
                cal("[soak]\nsettle_ms = 18446744073709551615", ""),
                "p.toml:4:13: soak.settle_ms = 18446744073709551615 is out of range: allowed 0..=600000 (milliseconds, at most 10 minutes)",
            ),
            (
                whisper("", "model = \"m.bin\"\nextra_states = 100000"),
                "p.toml:9:16: arm `w`: whisper: extra_states = 100000 is out of range: allowed 0..=16 (each state costs its own kv caches and compute buffers)",
            ),
            (
                whisper("", "model = \"m.bin\"\nidle_s = nan"),
                "p.toml:9:10: arm `w`: whisper: idle_s = NaN is out of range: allowed a finite number in [0, 3600] (seconds, at most 1 hour)",
            ),
            (
                whisper("", "model = \"m.bin\"\nthreads = 4294967295"),
                "p.toml:9:11: arm `w`: whisper: threads = 4294967295 is out of range: allowed 1..=256 (at most 256)",
            ),
            (
                whisper(
                    "",
                    "model = \"m.bin\"\ndecoding = { strategy = \"beam\", beam_size = 64 }",
                ),
                "p.toml:9:45: arm `w`: whisper: decoding.beam_size = 64 is out of range: allowed 2..=8 (whisper.cpp's decoder limit)",
            ),
            (
                whisper("", "model = \"m.bin\"\naudio_ctx = 100000"),
                "p.toml:9:13: arm `w`: whisper: audio_ctx = 100000 is out of range: allowed 0..=1500 (0 = the model's; Whisper's encoder context is 1500)",
            ),
            (
                whisper("", "model = \"m.bin\"\nrepetitions = 0"),
                "p.toml:9:15: arm `w`: whisper: repetitions = 0 is out of range: allowed 1..=100000 (at most 100000)",
            ),
            (
                whisper("m = \"${m}\"", "model = \"${m}/x.bin\""),
                "p.toml:4:1: param `m` (p.toml:4:1) refers to itself: `${m}` can never be expanded",
            ),
            (
                whisper("a = \"${b}\"\nb = \"${a}\"", "model = \"${a}/x.bin\""),
                "p.toml:4:1: params refer to each other in a cycle: `a` (p.toml:4:1) → `b` (p.toml:5:1) → `a`",
            ),
            (
                whisper(&doubling, "model = \"${p40}/x.bin\""),
                "p.toml:16:1: param `p12` (p.toml:16:1) expands to more than 4096 bytes",
            ),
            (
                whisper("d = \"$\"", "model = \"${d}{m}/x.bin\""),
                "p.toml:8:9: arm `w`: whisper: model expands to \"${m}/x.bin\", which still holds `${`: parameters are expanded once",
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(text, expected)| match parse_t(text) {
                Ok(_) => Some(format!("accepted:\n{text}")),
                Err(e) if &e.to_string() != expected => {
                    Some(format!("{text}\n  got:      {e}\n  expected: {expected}"))
                }
                Err(_) => None,
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    }

    /// The calibration arm `a` with `memory_ceiling = <value>` on line 6.
    fn ceiling(value: &str) -> String {
        cal("", "plateau = { mib = 8 }").replace(
            "id = \"a\"",
            &format!("id = \"a\"\nmemory_ceiling = {value}"),
        )
    }

    #[test]
    fn a_memory_ceiling_loads_as_bytes() {
        for (value, bytes) in [
            ("\"1.5 GiB\"", Some(1_610_612_736)),
            ("\"1 MiB\"", Some(1 << 20)),
            ("\"8 GiB\"", Some(TEST_RAM)),
            ("\"200MB\"", Some(200_000_000)),
        ] {
            let p = parse_t(&ceiling(value)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.arms[0].memory_ceiling, bytes, "{value}");
        }
        assert_eq!(parse_t(GOOD).unwrap().arms[0].memory_ceiling, None);
    }

    #[test]
    fn a_bad_memory_ceiling_is_refused_at_its_value_with_the_reason() {
        let units = crate::byte_size::UNIT_LIST;
        let cases = [
            (
                "\"-1 GiB\"",
                "memory_ceiling = \"-1 GiB\" is negative: a size is a positive number and a unit, e.g. \"1.5 GiB\"".to_string(),
            ),
            (
                "\"0 MiB\"",
                "memory_ceiling = \"0 MiB\" is zero: give the most memory the worker may hold, e.g. \"1.5 GiB\"".to_string(),
            ),
            (
                "\"1023 KiB\"",
                "memory_ceiling = \"1023 KiB\" (1047552 bytes) is below 1 MiB, the smallest ceiling: no worker starts in less".to_string(),
            ),
            (
                "\"12 parsecs\"",
                format!("memory_ceiling = \"12 parsecs\" has an unknown unit `parsecs`: use one of {units} (spelled as written here)"),
            ),
            (
                "\"lots\"",
                format!("memory_ceiling = \"lots\" is not a size: write a number and a unit, e.g. \"1.5 GiB\" (units: {units})"),
            ),
            (
                "\"1024\"",
                format!("memory_ceiling = \"1024\" has no unit: write one of {units} after the number, e.g. \"1.5 GiB\""),
            ),
            (
                "\"18446744073709551616 B\"",
                "memory_ceiling = \"18446744073709551616 B\" is more bytes than 64 bits hold".to_string(),
            ),
            (
                "\"9 GiB\"",
                "memory_ceiling = \"9 GiB\" (9663676416 bytes) is above this host's physical memory (8192 MiB, MemTotal): it can never be crossed on this host; lower it or drop the key".to_string(),
            ),
        ];
        for (value, reason) in cases {
            let err = parse_t(&ceiling(value)).expect_err(value);
            assert_eq!(err.to_string(), format!("p.toml:6:18: arm `a`: {reason}"));
        }
        // A number where a string belongs is refused by the TOML reader, located too.
        let err = parse_t(&ceiling("1024")).unwrap_err();
        assert_eq!(err.line, 6, "{err}");
        assert!(err.message.contains("expected a string"), "{err}");
    }

    #[test]
    fn a_param_cycle_through_an_override_names_the_flag() {
        let text = whisper("a = \"${b}\"\nb = \"x\"", "model = \"${a}/x.bin\"");
        let ctx = ParseContext {
            overrides: BTreeMap::from([("b".to_string(), "${a}".to_string())]),
            base_dir: PathBuf::from("."),
            fixtures: &FixtureCatalog::default(),
            models: &NoModels,
            physical_memory: Some(TEST_RAM),
        };
        let err = parse("p.toml", &text, &ctx).unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.toml:4:1: params refer to each other in a cycle: `a` (p.toml:4:1) → `b` (--param b) → `a`"
        );
    }

    #[test]
    fn a_whole_value_placeholder_is_the_parameter_typed() {
        let text = "schema_version = 1\nname = \"t\"\n[params]\nsize = \"24\"\nlimit = \"40.5\"\nceiling = \"200 MiB\"\n\
            [[arm]]\nid = \"a\"\nmemory_ceiling = \"${ceiling}\"\n[arm.calibrate]\nplateau = { mib = \"${size}\" }\n\
            [[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nceiling_mib = \"${limit}\"\n";
        let fixtures = FixtureCatalog::default();
        let ctx = |overrides: &[(&str, &str)]| ParseContext {
            overrides: overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            base_dir: PathBuf::from("."),
            fixtures: &fixtures,
            models: &NoModels,
            physical_memory: Some(TEST_RAM),
        };
        let loaded = parse(
            "p.toml",
            text,
            &ctx(&[("ceiling", "300 MiB"), ("size", "48")]),
        )
        .unwrap();
        let arm = &loaded.arms[0];
        let WorkerSpec::Calibrate(cal) = &arm.worker else {
            panic!("a calibration arm")
        };
        assert_eq!(cal.plateau.as_ref().map(|p| p.mib), Some(48));
        assert_eq!(arm.memory_ceiling, Some(300 << 20));
        let GateSpec::Memory(gate) = &arm.gates.gates[0] else {
            panic!("a memory gate")
        };
        assert_eq!(gate.ceiling_mib, Some(40.5));
        // The text is kept as written, the values as resolved.
        assert_eq!(loaded.text, text);
        assert_eq!(loaded.params["size"], "48");

        // A value the key refuses is refused at the placeholder as written,
        // with the message the literal value gets.
        let err = parse(
            "p.toml",
            text,
            &ctx(&[("ceiling", "300 MiB"), ("size", "big")]),
        )
        .unwrap_err();
        assert_eq!((err.line, err.col), (11, 19), "{err}");
        assert!(err.message.contains("expected u64"), "{err}");
        let err = parse(
            "p.toml",
            text,
            &ctx(&[("ceiling", "300 MiB"), ("size", "2097152")]),
        )
        .unwrap_err();
        assert_eq!((err.line, err.col), (11, 19), "{err}");
        assert!(
            err.message
                .contains("plateau.mib = 2097152 is out of range"),
            "{err}"
        );
        // Unset: named, with how to set it. (`--param ceiling=…` alone
        // cannot set it: an override of an undeclared name is refused.)
        let unset = text.replace("ceiling = \"200 MiB\"\n", "");
        let err = parse("p.toml", &unset, &ctx(&[("ceiling", "300 MiB")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.toml:3:1: --param ceiling: `ceiling` is not a parameter of p.toml: it declares \
             limit, size. Declare it under [params] (with a default) and write \"${ceiling}\" \
             where the value goes"
        );
        let err = parse("p.toml", &unset, &ctx(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.toml:8:18: `${ceiling}` names a parameter that is not set: declare it under [params] or pass --param ceiling=…"
        );
    }

    /// Every numeric key, in the table it belongs to (`{v}` is the value).
    const NUMERIC_KEYS: &[(&str, &str)] = &[
        ("[sampling]\nperiod_ms = {v}", ""),
        ("[sampling]\nsystem_period_ms = {v}", ""),
        ("[defaults]\narm_timeout_s = {v}", ""),
        ("[snapshots]\nevery_ms = {v}", ""),
        ("[snapshots]\nevery_n_requests = {v}", ""),
        ("[census]\nthreshold_mib = {v}", ""),
        ("[census]\nevery_n_requests = {v}", ""),
        ("[admission]\nwindow_ms = {v}", ""),
        ("[admission]\nmax_load_per_core = {v}", ""),
        ("[admission]\nmin_available_mib = {v}", ""),
        ("[admission]\nmax_psi_some_avg10 = {v}", ""),
        ("[admission]\nmax_thermal_celsius = {v}", ""),
        ("[soak]\nwarmup_requests = {v}", ""),
        ("[soak]\ncycle_requests = {v}", ""),
        ("[soak]\nmin_points = {v}", ""),
        ("[soak]\ntail_fraction = {v}", ""),
        ("[soak]\nmax_slope_kib_per_request = {v}", ""),
        ("[soak]\nsystem_max_slope_kib_per_request = {v}", ""),
        ("[soak]\nstep_min_mib = {v}", ""),
        ("[soak]\nmax_steps = {v}", ""),
        ("[soak]\nbootstrap_resamples = {v}", ""),
        ("[soak]\nconfidence = {v}", ""),
        ("[soak]\nseed = {v}", ""),
        ("[soak]\nsnapshot_interval_s = {v}", ""),
        ("[soak]\nsettle_ms = {v}", ""),
        ("[soak]\nregression_window = {v}", ""),
        ("[soak]\nregression_slope_kib_per_request = {v}", ""),
        ("[soak]\nregression_peak_pct = {v}", ""),
        ("[soak]\nmode = \"lifecycle\"\ncycles = {v}", ""),
        (
            "[soak]\nmode = \"lifecycle\"\ncycles = 5\nwarmup_cycles = {v}",
            "",
        ),
        ("[soak]\nmax_slope_kib_per_cycle = {v}", ""),
        ("", "teardown_leak = { mib_per_cycle = {v} }"),
        ("", "requests = {v}"),
        ("", "warmup = {v}"),
        ("", "request_ms = {v}"),
        ("", "idle_ms = {v}"),
        ("", "busy_threads = {v}"),
        ("", "plateau = { mib = {v} }"),
        ("", "leak = { mib_per_request = {v} }"),
        (
            "",
            "leak = { mib_per_request = 1.0 }\ngrowth_until_request = {v}",
        ),
        ("", "steps = { mib = {v}, at_requests = [0] }"),
        ("", "steps = { mib = 1, at_requests = [{v}] }"),
        ("", "shm_file = { kib_per_request = {v} }"),
        ("", "spike = { mib = {v}, hold_ms = 1 }"),
        ("", "spike = { mib = 1, hold_ms = {v} }"),
        ("", "spike = { mib = 1, hold_ms = 1, request = {v} }"),
        ("", "reserve = { mib = {v} }"),
        ("", "file_map = { mib = {v} }"),
        ("", "crash_at = {v}"),
    ];

    /// Whisper and gate keys, as lines of an arm (`{v}` is the value).
    const ARM_KEYS: &[&str] = &[
        "timeout_s = {v}",
        "sampling = { period_ms = {v} }",
        "sampling = { system_period_ms = {v} }",
        "[arm.whisper]\nthreads = {v}",
        "[arm.whisper]\naudio_ctx = {v}",
        "[arm.whisper]\nmax_tokens = {v}",
        "[arm.whisper]\nextra_states = {v}",
        "[arm.whisper]\nwarmup = {v}",
        "[arm.whisper]\nrepetitions = {v}",
        "[arm.whisper]\nidle_s = {v}",
        "[arm.whisper]\ndecoding = { strategy = \"greedy\", best_of = {v} }",
        "[arm.whisper]\ndecoding = { strategy = \"beam\", beam_size = {v} }",
        "[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nmin_reduction = {v}",
        "[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\ncontrol_factor = {v}",
        "[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nceiling_mib = {v}",
        "[[arm.gate]]\nkind = \"latency\"\ntolerance = {v}",
        "[[arm.gate]]\nkind = \"quality\"\nwer_delta = {v}",
        "[[arm.gate]]\nkind = \"quality\"\nmin_qoi = {v}",
        "[[arm.gate]]\nkind = \"throughput\"\nmin_tokens_per_s = {v}",
        "[[arm.gate]]\nkind = \"throughput\"\nmax_real_time_factor = {v}",
        "[[arm.gate]]\nkind = \"validity\"\nmax_skipped_fraction = {v}",
        "[[arm.gate]]\nkind = \"overhead\"\ntolerance = {v}",
        "[[arm.gate]]\nkind = \"overhead\"\nquads = {v}",
    ];

    const EXTREMES: &[&str] = &[
        "0",
        "1",
        "-1",
        "3",
        "255",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "1e19",
        "0.5",
        "-0.0",
        "nan",
        "inf",
        "-inf",
        "1e308",
        "1048576",
        "1048577",
    ];

    /// What an accepted protocol must satisfy: every derived quantity the
    /// run computes from it fits, so nothing on the run path can overflow.
    fn assert_bounded(p: &LoadedProtocol, text: &str) {
        for arm in &p.arms {
            assert!(arm.timeout <= Duration::from_secs(604_800), "{text}");
            assert!(arm.period >= Duration::from_millis(1), "{text}");
            assert!(arm.period <= Duration::from_secs(60), "{text}");
            let _ = std::time::Instant::now() + arm.timeout;
            match &arm.worker {
                WorkerSpec::Calibrate(c) => {
                    assert_eq!(c.validate(), Ok(()), "{text}");
                    assert!(c.peak_touched_bytes() <= u128::from(TEST_RAM), "{text}");
                    for mib in [c.plateau.map(|x| x.mib), c.reserve.map(|x| x.mib)] {
                        let m = mib.unwrap_or(0);
                        assert!(
                            worker_contract::bounds::mib_to_bytes("m", m).is_ok(),
                            "{text}"
                        );
                    }
                    let _ = c.request_ms * 1_000_000 + c.idle_ms * 1_000_000;
                }
                WorkerSpec::Whisper(w) => assert_eq!(w.validate(), Ok(()), "{text}"),
            }
            for g in &arm.gates.gates {
                assert_eq!(g.validate(), Ok(()), "{text}");
            }
        }
        if let Some(s) = &p.soak {
            assert_eq!(s.validate(), Ok(()), "{text}");
            let _ = s.settings(5);
        }
    }

    #[test]
    fn extreme_values_in_every_numeric_key_are_refused_or_bounded() {
        let fixtures = crate::committed_fixtures();
        let ctx = ParseContext {
            overrides: BTreeMap::new(),
            base_dir: PathBuf::from("."),
            fixtures: &fixtures,
            models: &NoModels,
            physical_memory: Some(TEST_RAM),
        };
        let schema: serde_json::Value = serde_json::from_str(COMMITTED_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let (mut accepted, mut refused) = (0, 0);
        let mut texts = Vec::new();
        for v in EXTREMES {
            for (top, cal_line) in NUMERIC_KEYS {
                let calibrate = format!("requests = 3\n{}", cal_line.replace("{v}", v));
                texts.push(cal(&top.replace("{v}", v), &calibrate));
            }
            for line in ARM_KEYS {
                let line = line.replace("{v}", v);
                let worker = if line.contains("[arm.whisper]") {
                    format!("{line}\nmodel = \"m.bin\"\nfixtures = [\"all\"]")
                } else {
                    "[arm.whisper]\nmodel = \"m.bin\"\nfixtures = [\"all\"]".to_string()
                };
                let (own, gate) = match line.find("[[arm.gate]]") {
                    Some(_) => (String::new(), line.clone()),
                    None if line.contains("[arm.whisper]") => (String::new(), String::new()),
                    None => (line.clone(), String::new()),
                };
                texts.push(format!(
                    "schema_version = 1\nname = \"t\"\n[[arm]]\nid = \"c\"\n[arm.calibrate]\n\
                     [[arm]]\nid = \"w\"\ncontrol = \"c\"\n{own}\n{worker}\n{gate}\n"
                ));
            }
        }
        for text in &texts {
            // The schema is never stricter than the loader (NaN and
            // infinities have no JSON form and are left to the loader).
            let schema_ok = toml::from_str::<serde_json::Value>(text)
                .ok()
                .map(|v| validator.is_valid(&v));
            match parse("p.toml", text, &ctx) {
                Ok(p) => {
                    assert_bounded(&p, text);
                    assert_ne!(schema_ok, Some(false), "the schema refuses:\n{text}");
                    accepted += 1;
                }
                Err(e) => {
                    assert!(e.line >= 1 && e.col >= 1, "{e}");
                    assert!(!e.message.is_empty());
                    refused += 1;
                }
            }
        }
        // Both outcomes happen: the table is not all one or the other.
        assert_eq!(accepted + refused, texts.len());
        assert!(
            accepted > 100 && refused > 500,
            "{accepted} accepted, {refused} refused"
        );
    }

    #[test]
    fn the_largest_valid_values_load() {
        let text = cal(
            "[sampling]\nperiod_ms = 60000\n[defaults]\narm_timeout_s = 604800",
            "requests = 10000000\nrequest_ms = 3600000\nidle_ms = 3600000\nbusy_threads = 256\nreserve = { mib = 1048576 }",
        );
        let p = parse_t(&text).unwrap();
        assert_eq!(p.arms[0].timeout, Duration::from_secs(604_800));
        assert_eq!(p.arms[0].period, Duration::from_secs(60));
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
