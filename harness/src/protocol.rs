//! Protocol files: TOML, strict (unknown keys are errors), validated before
//! any worker starts. Errors name `file:line:col` and the key.

use crate::census::CensusPlan;
use crate::snapshots::SnapshotPlan;
use crate::whisper_arm::{FixtureCatalog, ModelCatalog, ModelRef, WhisperArmDecl};
use reports::admission::AdmissionThresholds;
use reports::gates::{ArmGates, Expect, GateSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use worker_contract::{CalibrationSpec, WorkerSpec};

/// The protocol format version this memqual reads.
pub const PROTOCOL_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    pub schema_version: u32,
    #[schemars(with = "String")]
    pub name: toml::Spanned<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub sampling: Sampling,
    #[serde(default)]
    pub defaults: Defaults,
    /// Named strings that `${name}` in model paths refers to; `--param name=value` overrides.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Quiet-host admission thresholds and window.
    #[serde(default)]
    pub admission: AdmissionThresholds,
    #[serde(rename = "arm", default)]
    pub arms: Vec<ArmDecl>,
    /// Tool snapshots at phase boundaries, and an optional cadence.
    #[serde(default)]
    pub snapshots: SnapshotPlan,
    /// The process census and its threshold.
    #[serde(default)]
    pub census: CensusPlan,
    /// How `memqual soak` judges growth (thresholds, warm-up, history).
    pub soak: Option<crate::soak::SoakDecl>,
}

/// External sampler settings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Tick period in milliseconds (default 50).
    #[serde(default = "default_period_ms")]
    pub period_ms: u64,
}

fn default_period_ms() -> u64 {
    50
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            period_ms: default_period_ms(),
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Seconds an arm may run before its worker's process group is killed (default 300).
    #[serde(default = "default_timeout_s")]
    pub arm_timeout_s: u64,
}

fn default_timeout_s() -> u64 {
    300
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            arm_timeout_s: default_timeout_s(),
        }
    }
}

/// One arm as declared: exactly one worker table (`calibrate` or `whisper`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArmDecl {
    #[schemars(with = "String")]
    pub id: toml::Spanned<String>,
    #[serde(default)]
    pub description: String,
    pub timeout_s: Option<u64>,
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
    /// Gates (`[[arm.gate]]`), judged conjunctively.
    #[serde(rename = "gate", default)]
    #[schemars(with = "Vec<GateSpec>")]
    pub gates: Vec<toml::Spanned<GateSpec>>,
    pub calibrate: Option<CalibrationSpec>,
    pub whisper: Option<WhisperArmDecl>,
}

/// A validated arm, ready to run.
#[derive(Debug, Clone)]
pub struct Arm {
    pub id: String,
    pub description: String,
    pub timeout: Duration,
    pub period: Duration,
    pub worker: WorkerSpec,
    pub control: Option<String>,
    /// The model a whisper arm loads, as named (a named model may need building first).
    pub model: Option<ModelRef>,
    pub snapshots: SnapshotPlan,
    pub census: CensusPlan,
    /// Declared gates, `promote` and `expect`.
    pub gates: ArmGates,
    /// Wait after each `request_end` before a `settled` snapshot (soak only).
    pub settle_ms: u64,
    /// A soaked arm's analysis settings, written as its `soak.json` before it runs.
    pub soak: Option<reports::stability::SoakSettings>,
}

/// A protocol that parsed and validated, with its source text kept verbatim.
#[derive(Debug, Clone)]
pub struct LoadedProtocol {
    pub path: PathBuf,
    pub name: String,
    pub description: String,
    pub text: String,
    /// Parameters after `--param` overrides.
    pub params: BTreeMap<String, String>,
    pub admission: AdmissionThresholds,
    pub arms: Vec<Arm>,
    /// The `[soak]` table, if any (`memqual soak` uses defaults without it).
    pub soak: Option<crate::soak::SoakDecl>,
}

/// What parsing needs from outside the file: parameter overrides, the
/// directory relative paths start from, and the fixture and model catalogs.
pub struct ParseContext<'a> {
    pub overrides: BTreeMap<String, String>,
    pub base_dir: PathBuf,
    pub fixtures: &'a FixtureCatalog,
    pub models: &'a dyn ModelCatalog,
}

/// A protocol that cannot be run, located in its file.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ProtocolError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the protocol: {0}")]
    Read(#[from] run_dir::RunDirError),
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

/// Parse and validate protocol text; `file` is used only in messages.
pub fn parse(file: &str, text: &str, ctx: &ParseContext) -> Result<LoadedProtocol, ProtocolError> {
    let raw: Protocol = toml::from_str(text)
        .map_err(|e| error_at(file, text, e.span(), e.message().trim().to_string()))?;
    let at = |span: Range<usize>, message: String| error_at(file, text, Some(span), message);
    if raw.schema_version != PROTOCOL_SCHEMA_VERSION {
        return Err(error_at(
            file,
            text,
            text.find("schema_version").map(|s| s..s),
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
        return Err(error_at(
            file,
            text,
            None,
            "the protocol declares no [[arm]]".into(),
        ));
    }
    let check_period = |s: &Sampling, span: Range<usize>| {
        if s.period_ms == 0 {
            Err(at(span, "sampling.period_ms must be at least 1".into()))
        } else {
            Ok(())
        }
    };
    check_period(&raw.sampling, 0..0)?;
    for (table, checked) in [
        ("[snapshots]", raw.snapshots.validate()),
        ("[census]", raw.census.validate()),
    ] {
        checked.map_err(|e| error_at(file, text, text.find(table).map(|s| s..s), e))?;
    }
    check_admission(&raw.admission)
        .map_err(|e| error_at(file, text, text.find("[admission]").map(|s| s..s), e))?;
    let mut seen = std::collections::HashSet::new();
    let mut arms = Vec::with_capacity(raw.arms.len());
    let mut controls = Vec::with_capacity(raw.arms.len());
    let mut params = raw.params.clone();
    params.extend(ctx.overrides.clone());
    let params = crate::whisper_arm::resolve_params(&params)
        .map_err(|e| error_at(file, text, text.find("[params]").map(|s| s..s), e))?;
    for decl in raw.arms {
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
        let control_span = decl.control.as_ref().map(|c| c.span());
        let sampling = decl.sampling.unwrap_or(raw.sampling);
        check_period(&sampling, span.clone())?;
        let (worker, model) = match (decl.calibrate, decl.whisper) {
            (Some(cal), None) => {
                cal.validate()
                    .map_err(|e| at(span.clone(), format!("arm `{id}`: calibrate.{e}")))?;
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
                .map_err(|e| at(span.clone(), format!("arm `{id}`: whisper: {e}")))?;
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
        let timeout_s = decl.timeout_s.unwrap_or(raw.defaults.arm_timeout_s);
        if timeout_s == 0 {
            return Err(at(
                span,
                format!("arm `{id}`: timeout_s must be at least 1"),
            ));
        }
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
        for (gate, gspan) in gates.gates.iter().zip(&gate_spans) {
            gate.validate().map_err(|e| {
                at(
                    gspan.clone(),
                    format!("arm `{id}`: gate `{}`: {e}", gate.kind()),
                )
            })?;
        }
        gates.validate(decl.control.is_some()).map_err(|e| {
            at(
                gate_spans.first().cloned().unwrap_or(span.clone()),
                format!("arm `{id}`: {e}"),
            )
        })?;
        arms.push(Arm {
            id,
            description: decl.description,
            timeout: Duration::from_secs(timeout_s),
            period: Duration::from_millis(sampling.period_ms),
            worker,
            control: decl.control.map(|c| c.into_inner()),
            model,
            snapshots: raw.snapshots,
            census: raw.census,
            gates,
            settle_ms: 0,
            soak: None,
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
    if let Some(soak) = &raw.soak {
        soak.validate().map_err(|e| {
            error_at(
                file,
                text,
                text.find("[soak]").map(|s| s..s),
                format!("soak.{e}"),
            )
        })?;
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
    })
}

fn check_admission(a: &AdmissionThresholds) -> Result<(), String> {
    let finite = |key: &str, v: f64| {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(format!("admission.{key} = {v} must be a finite number ≥ 0"))
        }
    };
    finite("max_load_per_core", a.max_load_per_core)?;
    finite("max_psi_some_avg10", a.max_psi_some_avg10)?;
    finite("max_thermal_celsius", a.max_thermal_celsius)?;
    if a.window_ms == 0 || a.window_ms > 600_000 {
        return Err(format!(
            "admission.window_ms = {} must be between 1 and 600000",
            a.window_ms
        ));
    }
    Ok(())
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

    struct NoModels;
    impl ModelCatalog for NoModels {
        fn locate(&self, _: &str) -> Option<(PathBuf, String)> {
            None
        }
        fn names(&self) -> Vec<String> {
            Vec::new()
        }
    }

    /// Parse with no fixtures and no named models: enough for calibration arms.
    fn parse_t(text: &str) -> Result<LoadedProtocol, ProtocolError> {
        let ctx = ParseContext {
            overrides: BTreeMap::new(),
            base_dir: PathBuf::from("."),
            fixtures: &FixtureCatalog::default(),
            models: &NoModels,
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
    fn semantic_errors_point_at_the_arm() {
        let dup = format!("{GOOD}\n[[arm]]\nid = \"a\"\n[arm.calibrate]\n");
        let err = parse_t(&dup).unwrap_err();
        assert_eq!(err.line, 10);
        assert!(err.message.contains("declared twice"), "{err}");

        let bad_spike = GOOD.replace(
            "plateau = { mib = 8 }",
            "spike = { mib = 8, hold_ms = 1, request = 9 }",
        );
        let err = parse_t(&bad_spike).unwrap_err();
        assert_eq!(err.line, 5);
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
        assert_eq!((err.line, err.col), (1, 1));
    }

    const COMMITTED_SCHEMA: &str = include_str!("../../protocols/protocol.schema.json");

    #[test]
    fn committed_schema_is_generated_from_the_types() {
        // Regenerate with: MEMQUAL_BLESS=1 cargo test -p harness committed_schema
        let generated = json_schema();
        if std::env::var_os("MEMQUAL_BLESS").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../protocols/protocol.schema.json"
            );
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert_eq!(
            COMMITTED_SCHEMA, generated,
            "protocols/protocol.schema.json is stale: run MEMQUAL_BLESS=1 cargo test -p harness committed_schema"
        );
    }

    #[test]
    fn every_committed_protocol_loads_and_matches_the_schema() {
        let schema: serde_json::Value = serde_json::from_str(COMMITTED_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../protocols");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let fixtures = crate::catalogs::fixture_catalog().unwrap();
            let mut ctx = ParseContext {
                overrides: BTreeMap::new(),
                base_dir: PathBuf::new(),
                fixtures: &fixtures,
                models: &crate::catalogs::ModelCache,
            };
            load(&path, &mut ctx).unwrap_or_else(|e| panic!("{e}"));
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
        // The schema is strict like the loader: a typo fails it too.
        let typo: serde_json::Value = toml::from_str(&GOOD.replace("plateau", "platue")).unwrap();
        assert!(!validator.is_valid(&typo));
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
        // A bad value, located at the gate's table.
        let err =
            parse_t(&GATED.replace("min_reduction = 0.1", "min_reduction = 1.5")).unwrap_err();
        assert!(
            err.message
                .contains("arm `cand`: gate `memory`: min_reduction = 1.5"),
            "{err}"
        );
        assert_eq!(err.line, 16, "{err}");
        // A comparing gate without a control.
        let err = parse_t(&GATED.replace("control = \"base\"\n", "")).unwrap_err();
        assert!(err.message.contains("add `control = "), "{err}");
        // expect = "fail" without a fail_closed gate.
        let err = parse_t(&GATED.replace("promote = true", "expect = \"fail\"")).unwrap_err();
        assert!(err.message.contains("needs a `fail_closed` gate"), "{err}");
    }

    #[test]
    fn overhead_gates_default_to_two_pairs_and_refuse_zero() {
        use reports::gates::OverheadGate;
        let with = |extra: &str| {
            GATED.replace(
                "kind = \"parity\"",
                &format!("kind = \"parity\"\n\n[[arm.gate]]\nkind = \"overhead\"\n{extra}"),
            )
        };
        for (extra, tolerance, pairs) in [("", 0.02, 2), ("pairs = 3\ntolerance = 0.05", 0.05, 3)] {
            let p = parse_t(&with(extra)).unwrap();
            let expected = GateSpec::Overhead(OverheadGate { tolerance, pairs });
            assert_eq!(p.arms[1].gates.gates[2], expected, "{extra}");
        }
        let err = parse_t(&with("pairs = 0")).unwrap_err();
        assert!(
            err.message
                .contains("arm `cand`: gate `overhead`: pairs = 0: at least one A/B pair"),
            "{err}"
        );
        assert_eq!((err.line, err.col), (25, 1), "{err}");
        let err = parse_t(&with("pair = 2")).unwrap_err();
        assert!(err.message.contains("unknown field `pair`"), "{err}");
    }

    #[test]
    fn admission_thresholds_are_checked() {
        let p = parse_t(&format!("{GOOD}\n[admission]\nwindow_ms = 200\n")).unwrap();
        assert_eq!(p.admission.window_ms, 200);
        assert_eq!(p.admission.max_load_per_core, 1.5, "defaults fill the rest");
        let err = parse_t(&format!("{GOOD}\n[admission]\nwindow_ms = 0\n")).unwrap_err();
        assert_eq!(err.line, 9, "{err}");
        let err = parse_t(&format!("{GOOD}\n[admission]\nwindow = 1\n")).unwrap_err();
        assert!(err.message.contains("unknown field `window`"), "{err}");
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
