//! The whisper worker's arm spec and per-request result.
//!
//! The harness resolves everything before it starts the worker: the model
//! file and its expected digest, and every fixture's WAV path and digest. The
//! worker checks both digests itself, so a spec never runs on a file it did
//! not name.

use crate::bounds::{
    AUDIO_CTX, AUDIO_POSITIONS, BEAM_SIZE, BEST_OF, ENCODER_TIMEOUT_S, EXTRA_STATES, FieldError,
    MAX_TOKENS, MILLIS, REQUESTS, SOAK_SECONDS, TEXT_POSITIONS, WARMUP, WHISPER_THREADS,
};
use crate::{IdlePolicy, RequestMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How the worker builds its inference state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Initializer {
    /// `whisper_init_with_params_no_state`, then exactly one explicit state.
    NoState,
    /// `whisper_init_with_params`: the context's built-in state does the work.
    Default,
}

/// Which encoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Encoder {
    /// whisper.cpp's own encoder on the selected backend (CPU, Metal, CUDA).
    Native,
    /// The Core ML sidecar (`<model>-encoder.mlmodelc`); the arm fails unless it engaged.
    Coreml,
    /// memqual's patched whisper.cpp (`runtime = "whisper_cpp_patched"`): the
    /// model loads without its native encoder, whose tensors are validated
    /// and discarded, and a second process runs the encoder of
    /// `external_encoder.model` (Linux's stand-in for Core ML).
    ExternalProcess,
}

/// Test only: a deliberate defect of the external encoder process, for the
/// tests that prove the worker fails closed (never set in a measurement).
/// Either a defect of its replies (a string: `"fail"`, `"wrong_shape"`,
/// `"short_buffer"`, `"small_tensor"`) or a misbehaving process (a table:
/// `{ at = "mid_reply", do = "signal", signal = "KILL" }`, see
/// [`ProcessFault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum EncoderFault {
    /// A defect of its replies.
    Reply(ReplyFault),
    /// The process dies, hangs or talks garbage at a phase of its life.
    Process(ProcessFault),
}

// A string is a reply defect, a table a process fault; each keeps its own
// precise error (an untagged enum would only say that nothing matched).
impl<'de> Deserialize<'de> for EncoderFault {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, IntoDeserializer};
        struct Either;
        impl<'de> de::Visitor<'de> for Either {
            type Value = EncoderFault;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a reply defect (\"fail\", \"wrong_shape\", \"short_buffer\", \"small_tensor\") \
                     or a process fault table ({ at = ..., do = ... })",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EncoderFault, E> {
                ReplyFault::deserialize(v.into_deserializer()).map(EncoderFault::Reply)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<EncoderFault, A::Error> {
                ProcessFault::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(EncoderFault::Process)
            }
        }
        d.deserialize_any(Either)
    }
}

/// Test only: a defect of the external encoder's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFault {
    /// The encoder reports a failure.
    Fail,
    /// The output's dimensions are swapped.
    WrongShape,
    /// The reply announces the whole output and sends half of it.
    ShortBuffer,
    /// A consistent reply for one encoder position fewer than asked.
    SmallTensor,
}

/// Test only: the external encoder process misbehaving. `do` says what it
/// does; `signal`, `exit` and `hang` act at the phase `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProcessFault {
    /// Raise `signal` on itself (its default action restored, no core dump).
    Signal {
        /// When.
        at: EncoderPhase,
        /// Which signal.
        signal: FaultSignal,
    },
    /// Exit at once (`_exit`) with `code`.
    Exit {
        /// When.
        at: EncoderPhase,
        /// The exit status.
        code: u8,
    },
    /// Stop responding: the process stays alive and never answers again.
    Hang {
        /// When.
        at: EncoderPhase,
    },
    /// Send a malformed ready line instead of its own.
    BadReady {
        /// Which.
        ready: BadReady,
    },
    /// Send a malformed header instead of its first reply.
    BadHeader {
        /// Which.
        header: BadHeader,
    },
}

/// Test only: a phase of the external encoder process's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EncoderPhase {
    /// Its start line read, before it opens its model.
    ProcessStart,
    /// Its model loaded, before its state is made.
    ModelLoaded,
    /// Its state made, before it sends its ready line.
    StateReady,
    /// Its ready line sent, waiting for the first window.
    Ready,
    /// The first window read, while its native encoder runs (no reply byte
    /// leaves before the fault acts).
    MidEncode,
    /// The first reply's header and half its data sent.
    MidReply,
}

/// Test only: a signal the external encoder process raises on itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum FaultSignal {
    /// SIGKILL.
    #[serde(alias = "SIGKILL")]
    Kill,
    /// SIGTERM.
    #[serde(alias = "SIGTERM")]
    Term,
    /// SIGINT.
    #[serde(alias = "SIGINT")]
    Int,
    /// SIGHUP.
    #[serde(alias = "SIGHUP")]
    Hup,
    /// SIGABRT.
    #[serde(alias = "SIGABRT")]
    Abrt,
    /// SIGSEGV.
    #[serde(alias = "SIGSEGV")]
    Segv,
    /// SIGBUS.
    #[serde(alias = "SIGBUS")]
    Bus,
}

/// Test only: a malformed ready line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BadReady {
    /// A line that is not JSON.
    NotJson,
    /// Its ready line with a field the worker does not know.
    UnknownField,
    /// A field of the wrong type (the digest a number).
    WrongType,
    /// No model digest (`{"error":null}`).
    MissingDigest,
    /// Another model's digest.
    WrongDigest,
    /// Half its ready line, then its output closed (the process lives on).
    Truncated,
}

/// Test only: a malformed header in place of the first reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BadHeader {
    /// 88 bytes that are not a reply header.
    Garbage,
    /// A header announcing u64::MAX bytes of data.
    Huge,
    /// Half a header, then its output closed (the process lives on).
    Truncated,
}

/// How long the worker waits for the external encoder process's ready line,
/// and for each reply, when `external_encoder.timeout_s` is not set.
pub const EXTERNAL_ENCODER_TIMEOUT_S: u64 = 120;

/// The external encoder process of an `encoder = "external_process"` arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalEncoderInput {
    /// The full model (encoder tensors included) whose native encoder it runs.
    pub model: ModelInput,
    /// Seconds the worker waits for the process's ready line (its model
    /// loaded) and for each reply (the window sent and the output back)
    /// before it kills the process and fails the arm (default
    /// [`EXTERNAL_ENCODER_TIMEOUT_S`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Test only: a deliberate defect of the process or its replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<EncoderFault>,
}

impl ExternalEncoderInput {
    /// How long the worker waits for the process's ready line and each reply.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_s.unwrap_or(EXTERNAL_ENCODER_TIMEOUT_S))
    }
}

/// `MLModelConfiguration.computeUnits` for the Core ML encoder (patched
/// runtime; stock whisper.cpp 1.8.3 hard-codes `all`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CoremlComputeUnits {
    /// `MLComputeUnitsAll`: Core ML picks among CPU, GPU and Neural Engine.
    #[default]
    All,
    /// `MLComputeUnitsCPUAndNeuralEngine` (macOS 13 and later).
    CpuAndNe,
    /// `MLComputeUnitsCPUAndGPU`.
    CpuAndGpu,
    /// `MLComputeUnitsCPUOnly`.
    CpuOnly,
}

impl CoremlComputeUnits {
    /// Core ML's own name.
    pub fn coreml_name(self) -> &'static str {
        match self {
            Self::All => "MLComputeUnitsAll",
            Self::CpuAndNe => "MLComputeUnitsCPUAndNeuralEngine",
            Self::CpuAndGpu => "MLComputeUnitsCPUAndGPU",
            Self::CpuOnly => "MLComputeUnitsCPUOnly",
        }
    }

    /// `enum whisper_memqual_coreml_units` of the patch set.
    pub fn patch_code(self) -> i32 {
        match self {
            Self::All => 0,
            Self::CpuOnly => 1,
            Self::CpuAndGpu => 2,
            Self::CpuAndNe => 3,
        }
    }
}

/// Bounds a patched worker's state is sized for, each checked on every
/// request: an input beyond one fails, never truncated or overrun.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateBounds {
    /// Encoder positions the cross-attention and pad caches hold (1 to the
    /// model's 1500; the caches round it up to a multiple of 256).
    #[schemars(range(min = crate::bounds::AUDIO_POSITIONS.min, max = crate::bounds::AUDIO_POSITIONS.max))]
    pub max_audio_ctx: u32,
    /// Tokens per decoder batch the logits buffer and decoder work buffers
    /// hold (1 to the model's 448): the prompt and, per step, one per decoder.
    #[schemars(range(min = crate::bounds::TEXT_POSITIONS.min, max = crate::bounds::TEXT_POSITIONS.max))]
    pub max_batch: u32,
}

/// Greedy or beam-search decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "strategy", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decoding {
    /// Greedy sampling (`WHISPER_SAMPLING_GREEDY`).
    Greedy {
        /// Candidates sampled at each fallback temperature above 0, the best
        /// kept (temperature 0 decodes one); whisper.cpp allocates this many
        /// decoders. 1 to 8, default 1.
        #[serde(default = "one")]
        #[schemars(range(min = BEST_OF.min, max = BEST_OF.max))]
        best_of: u32,
    },
    /// Beam search (`WHISPER_SAMPLING_BEAM_SEARCH`).
    Beam {
        /// Beams kept per step at temperature 0 (2 to 8); whisper.cpp runs
        /// one decoder per beam.
        #[schemars(range(min = BEAM_SIZE.min, max = BEAM_SIZE.max))]
        beam_size: u32,
    },
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

impl Default for Decoding {
    fn default() -> Self {
        Decoding::Greedy { best_of: 1 }
    }
}

/// Which tensors the model file must hold: what the strict pre-load parse
/// checks before whisper.cpp sees the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelLayout {
    /// Every encoder and decoder tensor stock whisper.cpp declares.
    #[default]
    Full,
    /// Every decoder tensor and no native-encoder tensor (a derived artifact).
    DecoderOnly,
    /// Every native-encoder tensor and no decoder tensor (`memqual artifact
    /// derive --encoder-only`): only an external encoder process loads it.
    EncoderOnly,
}

/// The model file an arm loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelInput {
    /// The GGML model file, resolved by the harness: a named model's cache
    /// path, or the protocol's path (a relative one joined to the
    /// protocol's folder).
    pub path: PathBuf,
    /// Expected SHA-256 (lowercase hex); the worker refuses any other file.
    pub sha256: Option<String>,
    /// Which tensors the strict pre-load parse expects (default `full`).
    #[serde(default)]
    pub layout: ModelLayout,
    /// Parse the whole file strictly before whisper.cpp loads it (default).
    /// `false` only for negative controls that record what the stock loader
    /// does with a defective file; the worker is a child process, so a crash
    /// ends that arm alone.
    #[serde(default = "yes")]
    pub prevalidate: bool,
    /// The Core ML sidecar directory to use; when unset, whisper.cpp's own
    /// rule (model name without `.bin` and `-qX_Y`, plus `-encoder.mlmodelc`).
    #[serde(default)]
    pub coreml_sidecar: Option<PathBuf>,
    /// Where the file came from, beside its digest: the pinned wheels memqual
    /// built it from, the origin the protocol declared (`model_source`), or
    /// why neither is known. The worker does not read it; the receipt binds it.
    #[serde(default)]
    pub source: ModelSource,
}

/// A model file's origin (its revision), as the harness knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ModelSource {
    /// Built by memqual from pinned PyPI wheels (`memqual fixtures model NAME`),
    /// in concatenation order.
    PinnedWheels {
        /// The named model (`tiny.en`, `base`).
        model: String,
        /// The wheels, each with its pinned SHA-256.
        wheels: Vec<SourceWheel>,
    },
    /// The origin the protocol declared with `model_source`, verbatim (e.g. a
    /// repository, revision and file name).
    Declared {
        /// The declaration.
        text: String,
    },
    /// Nobody said: `unavailable: <reason>`.
    Unavailable {
        /// Why the origin is not known.
        reason: String,
    },
}

impl Default for ModelSource {
    fn default() -> Self {
        ModelSource::Unavailable {
            reason: "unavailable: not recorded by the harness that wrote this spec".into(),
        }
    }
}

/// A PyPI wheel a model was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceWheel {
    /// PyPI package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// Wheel file name, as in `<cache>/wheels/`.
    pub file: String,
    /// Pinned SHA-256 of the wheel file (lowercase hex).
    pub sha256: String,
}

/// One speech fixture, resolved from the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureInput {
    /// The fixture's id in the speech manifest; results carry it as `fixture_id`.
    pub id: String,
    /// The manifest's category (`clean`, `names`, `numbers`, `silence`, ...),
    /// by which quality is reported.
    pub category: String,
    /// The WAV file (16 kHz mono 16-bit PCM).
    pub path: PathBuf,
    /// SHA-256 of the WAV file's bytes (lowercase hex); the worker refuses a
    /// file with any other digest.
    pub sha256: String,
    /// The reference transcript, carried so the run directory alone can score WER.
    #[serde(default)]
    pub reference: String,
    /// Set when the file is not 16 kHz mono 16-bit: the source format the
    /// harness found, which the worker checks and converts (downmix, then
    /// resample to 16 kHz) after the digest matched. Unset: the file must
    /// be 16 kHz mono 16-bit as it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<Conversion>,
}

/// The source format of a fixture the worker converts to Whisper's input
/// (16 kHz mono) before the request; recorded so a receipt shows which
/// inputs were converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Conversion {
    /// The file's sample rate in Hz.
    pub sample_rate_hz: u32,
    /// The file's channel count (averaged to one).
    pub channels: u16,
    /// The file's bits per sample (integer PCM 8/16/24/32 or 32-bit float).
    pub bits_per_sample: u16,
    /// IEEE float samples (else signed integer PCM).
    #[serde(default)]
    pub float: bool,
}

/// Abort one measured request mid-decode through whisper.cpp's abort
/// callback (`[arm.whisper] cancel = { request = K, after_ms = T }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelSpec {
    /// The measured request (0-based request id) to abort.
    pub request: u64,
    /// Milliseconds after the request starts at which the abort is signalled;
    /// 0 signals it before `whisper_full` starts (the abort then lands at
    /// whisper.cpp's first check, after the first encoder pass).
    #[schemars(range(min = MILLIS.min, max = MILLIS.max))]
    pub after_ms: u64,
}

/// A request aborted through whisper.cpp's abort callback: no transcript,
/// only what the abort cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CancelledRequest {
    /// The fixture the request was transcribing.
    pub fixture_id: String,
    /// 0-based repetition of this fixture.
    pub repetition: u32,
    /// The spec's `after_ms`: when, after the request started, the abort was signalled.
    pub after_ms: u64,
    /// From the abort signal to `whisper_full`'s return, in nanoseconds.
    pub abort_latency_ns: u64,
    /// `whisper_full`'s return code (non-zero: it stopped at an abort check).
    pub code: i32,
    /// Audio length in milliseconds.
    pub audio_ms: u64,
}

/// One long input the worker composes itself from the committed slices
/// (never a file on disk), e.g. the 730 s soak input of seed 001.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LongFormInput {
    /// The recipe's name (`soak`).
    pub recipe: String,
    /// The length the recipe is filled (and padded) to, in seconds.
    pub target_s: u32,
    /// The speech fixtures folder (its manifest and slices).
    pub fixtures_dir: PathBuf,
    /// SHA-256 of the composed samples (little-endian i16, no header): the
    /// worker refuses to run on anything else.
    pub samples_sha256: String,
    /// Length of the composed audio in milliseconds (16 kHz samples).
    pub duration_ms: u64,
    /// Slices placed in it.
    pub pieces: u32,
    /// The placed slices' references, joined (for WER).
    pub reference: String,
}

impl LongFormInput {
    /// The id its requests carry as `fixture_id`.
    pub fn id(&self) -> String {
        format!("long_form:{}", self.recipe)
    }

    /// The input as a fixture entry (category `long_form`), for reports
    /// that look fixtures up by id; `path` is the fixtures folder.
    pub fn as_fixture(&self) -> FixtureInput {
        FixtureInput {
            id: self.id(),
            category: "long_form".into(),
            path: self.fixtures_dir.clone(),
            sha256: self.samples_sha256.clone(),
            reference: self.reference.clone(),
            conversion: None,
        }
    }
}

/// The inference runtime a whisper arm runs on.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// whisper.cpp through whisper-rs (`memqual-whisper`), a GGML model file.
    #[default]
    WhisperCpp,
    /// CTranslate2 through ct2rs (`memqual-ct2`), a CTranslate2 model directory.
    Ctranslate2,
    /// whisper.cpp with memqual's patch set (`memqual-whisper-patched`, built
    /// in `runners/patched`): external-encoder-only loading and bounded state.
    WhisperCppPatched,
}

impl Runtime {
    /// True for the default, whisper.cpp (left out when serialized).
    pub fn is_whisper_cpp(&self) -> bool {
        *self == Runtime::WhisperCpp
    }
}

/// CTranslate2's compute type: the precision its weights are held and
/// multiplied in, which sets the model's memory.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Ct2ComputeType {
    /// 32-bit floats (the float16 weights converted at load).
    #[default]
    Float32,
    /// 8-bit integer weights, 32-bit float activations where needed.
    Int8,
    /// 8-bit integer weights with float32 for the other layers.
    Int8Float32,
    /// 16-bit integer weights.
    Int16,
    /// 16-bit floats, where the device computes them efficiently (CTranslate2
    /// refuses it on a CPU that does not).
    Float16,
    /// 8-bit integer weights with float16 for the other layers.
    Int8Float16,
}

impl Ct2ComputeType {
    /// CTranslate2's own name for it.
    pub fn name(self) -> &'static str {
        match self {
            Ct2ComputeType::Float32 => "float32",
            Ct2ComputeType::Int8 => "int8",
            Ct2ComputeType::Int8Float32 => "int8_float32",
            Ct2ComputeType::Int16 => "int16",
            Ct2ComputeType::Float16 => "float16",
            Ct2ComputeType::Int8Float16 => "int8_float16",
        }
    }
}

/// Settings only CTranslate2 has (`runtime = "ctranslate2"`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Ct2Options {
    /// The compute type (default `float32`).
    #[serde(default)]
    pub compute_type: Ct2ComputeType,
}

/// Everything one whisper arm runs with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhisperSpec {
    /// The model file to load, and how to check it.
    pub model: ModelInput,
    /// Threads whisper.cpp uses per request (`n_threads`, 1 to 256).
    pub threads: u32,
    /// Greedy or beam-search decoding.
    pub decoding: Decoding,
    /// Spoken language code passed to whisper.cpp (`en`; at most 8 bytes).
    pub language: String,
    /// Decode without timestamp tokens (whisper.cpp's `no_timestamps`).
    pub no_timestamps: bool,
    /// Use flash attention (context parameter `flash_attn`).
    pub flash_attn: bool,
    /// Let whisper.cpp use a GPU backend (Metal on a Mac, CUDA in a `cuda`
    /// build) when the build has one (context parameter `use_gpu`). A
    /// CTranslate2 arm runs on CUDA device 0, and only in a `cuda` build.
    pub use_gpu: bool,
    /// Encoder context length; 0 keeps the model's.
    pub audio_ctx: u32,
    /// Upper bound on tokens per segment; 0 = whisper.cpp's default (none).
    #[serde(default)]
    pub max_tokens: u32,
    /// whisper.cpp's temperature fallback (default on): a decode judged failed
    /// is retried with sampling, whose RNG state persists across requests.
    #[serde(default = "yes")]
    pub temperature_fallback: bool,
    /// How the worker builds its inference state.
    pub initializer: Initializer,
    /// States created beyond the one that works (the duplicate-state anti-pattern).
    pub extra_states: u32,
    /// Unmeasured requests before `warmup_done` (on the first fixture).
    pub warmup: u32,
    /// The speech fixtures to transcribe, in order (empty with `long_form`).
    pub fixtures: Vec<FixtureInput>,
    /// Instead of `fixtures`: one long input composed by the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_form: Option<LongFormInput>,
    /// Times each fixture is run; request ids count fixtures × repetitions.
    pub repetitions: u32,
    /// Soak: stop after this many measured requests (fixtures cycled in
    /// order); unset runs all fixtures × repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    /// Soak: start no measured request after this many seconds from `warmup_done`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<u64>,
    /// The idle interval after the last request, before `idle_end`, in milliseconds.
    pub idle_ms: u64,
    /// Which encoder runs: native, or the Core ML sidecar.
    pub encoder: Encoder,
    /// Capabilities the arm needs; a worker lacking one refuses the arm.
    #[serde(default)]
    pub requires: Vec<String>,
    /// How each request's audio arrives: a whole file (default) or chunks
    /// at real-time pace.
    #[serde(default, skip_serializing_if = "RequestMode::is_file")]
    pub request_mode: RequestMode,
    /// What stays loaded between requests (default `resident`).
    #[serde(default, skip_serializing_if = "IdlePolicy::is_resident")]
    pub idle_policy: IdlePolicy,
    /// Idle milliseconds before each measured request, cycled (request i
    /// waits `gaps_ms[i % len]`); empty: no gaps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps_ms: Vec<u64>,
    /// Abort one measured request mid-decode (see [`CancelSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelSpec>,
    /// The runtime (default whisper.cpp).
    #[serde(default, skip_serializing_if = "Runtime::is_whisper_cpp")]
    pub runtime: Runtime,
    /// CTranslate2's own settings; set exactly when `runtime` is CTranslate2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctranslate2: Option<Ct2Options>,
    /// The encoder process of `encoder = "external_process"` (patched runtime only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_encoder: Option<ExternalEncoderInput>,
    /// The patched runtime's bounded state; `None` sizes it as stock does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bounds: Option<StateBounds>,
    /// The Core ML encoder's compute units (patched runtime, `encoder =
    /// "coreml"`); `None` is whisper.cpp's own `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coreml_compute_units: Option<CoremlComputeUnits>,
}

impl WhisperSpec {
    /// What only the patched runtime does is refused elsewhere, by key; an
    /// external encoder comes with its process's model, and a bounded state
    /// with bounds inside the model's limits.
    fn validate_patched(&self) -> Result<(), FieldError> {
        let patched = self.runtime == Runtime::WhisperCppPatched;
        let needs_patch = |key: &str| {
            Err(FieldError::new(
                key,
                format!(
                    "{key} needs runtime = \"whisper_cpp_patched\" (memqual's patched whisper.cpp)"
                ),
            ))
        };
        match (
            self.encoder == Encoder::ExternalProcess,
            &self.external_encoder,
        ) {
            (true, _) if !patched => return needs_patch("encoder"),
            (true, None) => {
                return Err(FieldError::new(
                    "external_encoder",
                    "encoder = \"external_process\" needs external_encoder.model, the full model its process runs",
                ));
            }
            (false, Some(_)) => {
                return Err(FieldError::new(
                    "external_encoder",
                    "external_encoder goes with encoder = \"external_process\"",
                ));
            }
            (true, Some(external)) => {
                if let Some(t) = external.timeout_s {
                    ENCODER_TIMEOUT_S.check("external_encoder.timeout_s", t)?;
                }
            }
            _ => {}
        }
        if self.coreml_compute_units.is_some() {
            if !patched {
                return needs_patch("coreml_compute_units");
            }
            if self.encoder != Encoder::Coreml {
                return Err(FieldError::new(
                    "coreml_compute_units",
                    "coreml_compute_units goes with encoder = \"coreml\"",
                ));
            }
        }
        if let Some(bounds) = self.state_bounds {
            if !patched {
                return needs_patch("state_bounds");
            }
            AUDIO_POSITIONS.check(
                "state_bounds.max_audio_ctx",
                u64::from(bounds.max_audio_ctx),
            )?;
            TEXT_POSITIONS.check("state_bounds.max_batch", u64::from(bounds.max_batch))?;
        }
        Ok(())
    }

    /// CTranslate2 settings go with the CTranslate2 runtime, and a
    /// CTranslate2 arm sets nothing the CTranslate2 worker does not do: each
    /// refusal names the key, so no arm silently runs without what it asked.
    fn validate_runtime(&self) -> Result<(), FieldError> {
        self.validate_patched()?;
        if self.runtime != Runtime::Ctranslate2 {
            return match self.ctranslate2 {
                Some(_) => Err(FieldError::new(
                    "ctranslate2",
                    "[arm.whisper.ctranslate2] needs runtime = \"ctranslate2\"",
                )),
                None => Ok(()),
            };
        }
        let refuse = |key: &str, what: &str| {
            Err(FieldError::new(
                key,
                format!("{what} is whisper.cpp's; the CTranslate2 worker does not do it"),
            ))
        };
        if self.encoder != Encoder::Native {
            return refuse("encoder", "a Core ML encoder");
        }
        if self.extra_states > 0 {
            return refuse("extra_states", "extra states");
        }
        if self.flash_attn {
            return refuse("flash_attn", "flash attention");
        }
        if self.audio_ctx != 0 {
            return refuse("audio_ctx", "a shortened encoder context");
        }
        if self.temperature_fallback {
            return refuse("temperature_fallback", "temperature fallback");
        }
        if let Decoding::Greedy { best_of } = self.decoding
            && best_of > 1
        {
            return refuse("decoding.best_of", "best-of sampling");
        }
        if !self.no_timestamps {
            return refuse("no_timestamps", "timestamp decoding");
        }
        if self.language != "en" {
            return Err(FieldError::new(
                "language",
                "the CTranslate2 worker runs English-only models: language must be \"en\"",
            ));
        }
        if !self.request_mode.is_file()
            || !self.idle_policy.is_resident()
            || !self.gaps_ms.is_empty()
        {
            return refuse("request_mode", "real-time delivery, idle policies and gaps");
        }
        if self.cancel.is_some() {
            return refuse("cancel", "cancelling a request");
        }
        if self.model.layout != ModelLayout::Full
            || !self.model.prevalidate
            || self.model.coreml_sidecar.is_some()
        {
            return refuse(
                "model_layout",
                "a GGML layout, skipping prevalidation or a Core ML sidecar",
            );
        }
        Ok(())
    }

    /// Problems that make the spec unrunnable, before anything is loaded;
    /// the error names the key (as a protocol's `[arm.whisper]` spells it).
    pub fn validate(&self) -> Result<(), FieldError> {
        WHISPER_THREADS.check("threads", u64::from(self.threads))?;
        match self.decoding {
            Decoding::Greedy { best_of } => {
                BEST_OF.check("decoding.best_of", u64::from(best_of))?;
            }
            Decoding::Beam { beam_size } => {
                BEAM_SIZE.check("decoding.beam_size", u64::from(beam_size))?;
            }
        }
        AUDIO_CTX.check("audio_ctx", u64::from(self.audio_ctx))?;
        MAX_TOKENS.check("max_tokens", u64::from(self.max_tokens))?;
        EXTRA_STATES.check("extra_states", u64::from(self.extra_states))?;
        WARMUP.check("warmup", u64::from(self.warmup))?;
        MILLIS.check("idle_ms", self.idle_ms)?;
        crate::validate_realtime(&self.request_mode, &self.idle_policy, &self.gaps_ms)?;
        match (&self.long_form, self.fixtures.is_empty()) {
            (None, true) => {
                return Err(FieldError::new(
                    "fixtures",
                    "no fixtures: a whisper arm needs at least one, or a long_form input",
                ));
            }
            (Some(_), false) => {
                return Err(FieldError::new(
                    "long_form",
                    "long_form replaces fixtures: give one or the other",
                ));
            }
            (Some(l), true) if !is_sha256_hex(&l.samples_sha256) => {
                return Err(FieldError::new(
                    "long_form",
                    format!(
                        "long_form samples_sha256 {:?} is not 64 lowercase hex digits",
                        l.samples_sha256
                    ),
                ));
            }
            _ => {}
        }
        if self.repetitions == 0 {
            return Err(FieldError::new(
                "repetitions",
                "repetitions = 0 is out of range: at least 1",
            ));
        }
        if let Some(n) = self.max_requests {
            REQUESTS.check("max_requests", n)?;
        }
        if let Some(s) = self.max_duration_s {
            SOAK_SECONDS.check("max_duration_s", s)?;
        }
        // Without a soak's limit, every fixture runs `repetitions` times.
        let inputs = self.fixtures.len().max(1) as u64;
        let planned = inputs.saturating_mul(u64::from(self.repetitions));
        if self.max_requests.is_none() && self.max_duration_s.is_none() && planned > REQUESTS.max {
            return Err(FieldError::new(
                "repetitions",
                format!(
                    "repetitions = {} over {inputs} inputs is {planned} requests: {}",
                    self.repetitions, REQUESTS
                ),
            ));
        }
        if let Some(cancel) = self.cancel {
            MILLIS.check("cancel.after_ms", cancel.after_ms)?;
            if self.max_requests.is_none()
                && self.max_duration_s.is_none()
                && cancel.request >= planned
            {
                return Err(FieldError::new(
                    "cancel.request",
                    format!(
                        "cancel.request = {} is past the last request ({planned} requests run, ids 0 to {})",
                        cancel.request,
                        planned.saturating_sub(1)
                    ),
                ));
            }
        }
        self.validate_runtime()?;
        if self.language.is_empty() || self.language.len() > 8 {
            return Err(FieldError::new(
                "language",
                format!("language {:?} is not a language code", self.language),
            ));
        }
        if let Some(sha) = &self.model.sha256
            && !is_sha256_hex(sha)
        {
            return Err(FieldError::new(
                "model_sha256",
                format!("model sha256 {sha:?} is not 64 lowercase hex digits"),
            ));
        }
        if self.model.coreml_sidecar.is_some() && self.encoder != Encoder::Coreml {
            return Err(FieldError::new(
                "coreml_sidecar",
                "coreml_sidecar is set but encoder is not \"coreml\"",
            ));
        }
        Ok(())
    }
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why decoding stopped, as far as the token stream shows it: whisper.cpp does
/// not report it, so it is derived (see the worker's `transcript` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The last token is end-of-text.
    Eot,
    /// Timestamp mode: whisper.cpp cuts the sequence at its last timestamp,
    /// dropping the end-of-text token, so the stream ends on a timestamp.
    TimestampEnd,
    /// No segment at all (silence judged as no speech, or nothing decoded).
    NoSegments,
    /// The stream ends on an ordinary text token: a cut (token limit or context).
    Truncated,
}

/// The transcription of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TranscriptionResult {
    /// The transcribed fixture's id (`long_form:<recipe>` for a long input).
    pub fixture_id: String,
    /// 0-based repetition of this fixture.
    pub repetition: u32,
    /// Every token id of every segment, in order, specials included.
    pub tokens: Vec<i32>,
    /// Whether the end-of-text token is among `tokens`.
    pub eot: bool,
    /// Why decoding stopped, derived from the token stream.
    pub stop_reason: StopReason,
    /// The concatenated segment text, when its bytes are valid UTF-8.
    pub text: String,
    /// The text bytes in hex, only when they are not valid UTF-8 (then `text` is lossy).
    pub text_bytes_hex: Option<String>,
    /// Segments whisper.cpp produced.
    pub segments: u32,
    /// Audio length in milliseconds.
    pub audio_ms: u64,
    /// Where the decode's time went, as far as the runtime lets the worker
    /// see it; `None` from a worker that does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<DecodeTimings>,
}

/// Where one request's time went inside the runtime, and its temperature
/// fallbacks. A figure the runtime does not expose is `None` (and reported
/// as unavailable), never 0.
///
/// whisper.cpp (1.8) keeps per-state timings and fallback counts
/// (`t_encode_us`, `n_fail_p`, `n_fail_h`) but exposes them only for the
/// context's built-in state (`whisper_get_timings`, `whisper_print_timings`);
/// the `no_state` initializer decodes on a separate state. So the worker
/// observes every request through `whisper_full`'s public callbacks, the
/// same way under both initializers: `encoder_begin_callback` (before each
/// 30 s window's encoder pass) and `logits_filter_callback` (once per
/// decoder per sampled token, after the decoder pass that produced the
/// logits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DecodeTimings {
    /// The runtime's whole call (`whisper_full`), in ns.
    pub full_ns: u64,
    /// Encoder windows the runtime ran (one per 30 s of audio, more after
    /// a window ends early).
    pub windows: u32,
    /// Summed over windows: from the window's encoder start to the logits
    /// of its first sampled token, in ns. This is the encoder pass plus the
    /// prompt's decoder pass (a few tokens): whisper.cpp calls back nowhere
    /// between the two.
    pub encode_ns: Option<u64>,
    /// From the call to the logits of the first sampled token, in ns: log-mel,
    /// the first encoder pass and the prompt.
    pub first_token_ns: Option<u64>,
    /// Tokens decoded: the logits computed for sampling, over every decoder
    /// and every temperature pass. Greedy at temperature 0, one per output
    /// token after the prompt, end-of-text included; with several decoders
    /// (a temperature above 0 and `best_of` > 1) the first step's logits
    /// serve them all and count once.
    pub tokens_decoded: u64,
    /// The call minus log-mel and `encode_ns`: the decoder passes after each
    /// prompt, and sampling, in ns.
    pub decode_ns: Option<u64>,
    /// Temperature fallbacks: decoding passes beyond the first in each
    /// window. whisper.cpp starts each pass with one sampled token on an empty
    /// sequence, so passes are counted where that happens; this is the count
    /// whisper.cpp keeps as `n_fail_p` (a pass whose best decoder failed).
    pub fallbacks: Option<u32>,
}

impl TranscriptionResult {
    /// The exact text bytes whisper.cpp produced.
    pub fn text_bytes(&self) -> Vec<u8> {
        match &self.text_bytes_hex {
            Some(hex) => (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect(),
            None => self.text.as_bytes().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WhisperSpec {
        WhisperSpec {
            model: ModelInput {
                path: "m.bin".into(),
                sha256: None,
                layout: ModelLayout::Full,
                prevalidate: true,
                coreml_sidecar: None,
                source: ModelSource::default(),
            },
            threads: 2,
            decoding: Decoding::default(),
            language: "en".into(),
            no_timestamps: true,
            flash_attn: false,
            use_gpu: false,
            audio_ctx: 0,
            max_tokens: 0,
            temperature_fallback: true,
            max_requests: None,
            max_duration_s: None,
            initializer: Initializer::NoState,
            extra_states: 0,
            warmup: 1,
            fixtures: vec![FixtureInput {
                id: "a".into(),
                category: "clean".into(),
                path: "a.wav".into(),
                sha256: "0".repeat(64),
                reference: "a".into(),
                conversion: None,
            }],
            long_form: None,
            repetitions: 1,
            idle_ms: 0,
            encoder: Encoder::Native,
            requires: vec![],
            request_mode: RequestMode::File,
            idle_policy: IdlePolicy::Resident,
            gaps_ms: vec![],
            cancel: None,
            runtime: Runtime::WhisperCpp,
            ctranslate2: None,
            external_encoder: None,
            state_bounds: None,
            coreml_compute_units: None,
        }
    }

    #[test]
    fn a_ctranslate2_arm_refuses_what_only_whisper_cpp_does_naming_the_key() {
        let ct2 = || WhisperSpec {
            runtime: Runtime::Ctranslate2,
            ctranslate2: Some(Ct2Options::default()),
            temperature_fallback: false,
            ..spec()
        };
        assert_eq!(ct2().validate(), Ok(()));
        let refused = |edit: &dyn Fn(&mut WhisperSpec)| {
            let mut s = ct2();
            edit(&mut s);
            s.validate().unwrap_err().key
        };
        assert_eq!(refused(&|s| s.extra_states = 1), "extra_states");
        assert_eq!(refused(&|s| s.encoder = Encoder::Coreml), "encoder");
        assert_eq!(refused(&|s| s.flash_attn = true), "flash_attn");
        assert_eq!(refused(&|s| s.audio_ctx = 768), "audio_ctx");
        assert_eq!(
            refused(&|s| s.temperature_fallback = true),
            "temperature_fallback"
        );
        assert_eq!(
            refused(&|s| s.decoding = Decoding::Greedy { best_of: 5 }),
            "decoding.best_of"
        );
        assert_eq!(refused(&|s| s.no_timestamps = false), "no_timestamps");
        assert_eq!(refused(&|s| s.language = "de".into()), "language");
        assert_eq!(refused(&|s| s.gaps_ms = vec![100]), "request_mode");
        assert_eq!(refused(&|s| s.model.prevalidate = false), "model_layout");
        // A GPU is the worker's to refuse: only its build knows if it has CUDA.
        let mut gpu = ct2();
        gpu.use_gpu = true;
        assert_eq!(gpu.validate(), Ok(()));
        // Beam search is CTranslate2's too.
        let mut beam = ct2();
        beam.decoding = Decoding::Beam { beam_size: 5 };
        assert_eq!(beam.validate(), Ok(()));
        // Its settings need its runtime.
        let mut stray = spec();
        stray.ctranslate2 = Some(Ct2Options::default());
        assert_eq!(stray.validate().unwrap_err().key, "ctranslate2");
        // The runtime picks the worker.
        let worker = |s: WhisperSpec| crate::WorkerSpec::Whisper(Box::new(s)).executable_name();
        assert_eq!(worker(spec()), "memqual-whisper");
        assert_eq!(worker(ct2()), "memqual-ct2");
    }

    #[test]
    fn validation_names_the_bad_option() {
        assert_eq!(spec().validate(), Ok(()));
        let mut s = spec();
        s.decoding = Decoding::Beam { beam_size: 1 };
        assert!(s.validate().unwrap_err().message.contains("beam_size = 1"));
        let mut s = spec();
        s.fixtures.clear();
        assert!(s.validate().unwrap_err().message.contains("no fixtures"));
        let mut s = spec();
        s.model.sha256 = Some("ABC".into());
        assert!(
            s.validate()
                .unwrap_err()
                .message
                .contains("not 64 lowercase hex")
        );
        let mut s = spec();
        s.model.coreml_sidecar = Some("x.mlmodelc".into());
        assert!(s.validate().unwrap_err().message.contains("encoder is not"));
        let long = LongFormInput {
            recipe: "soak".into(),
            target_s: 730,
            fixtures_dir: "/fx".into(),
            samples_sha256: "c".repeat(64),
            duration_ms: 730_000,
            pieces: 40,
            reference: "a b".into(),
        };
        let mut s = spec();
        s.long_form = Some(long.clone());
        assert!(
            s.validate()
                .unwrap_err()
                .message
                .contains("one or the other")
        );
        s.fixtures.clear();
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(long.as_fixture().id, "long_form:soak");
        s.long_form = Some(LongFormInput {
            samples_sha256: "x".into(),
            ..long
        });
        assert!(s.validate().unwrap_err().message.contains("samples_sha256"));
    }

    #[test]
    fn every_number_is_bounded_and_named() {
        type Break = fn(&mut WhisperSpec);
        let cases: [(&str, Break); 14] = [
            ("chunk_ms", |s| {
                s.request_mode = RequestMode::Realtime { chunk_ms: 5 }
            }),
            ("idle_policy.after_ms", |s| {
                s.idle_policy = IdlePolicy::UnloadAfterIdle { after_ms: u64::MAX }
            }),
            ("gaps_ms", |s| s.gaps_ms = vec![0; 65]),
            ("gaps_ms[1]", |s| s.gaps_ms = vec![0, 3_600_001]),
            ("threads", |s| s.threads = 0),
            ("threads", |s| s.threads = u32::MAX),
            ("decoding.best_of", |s| {
                s.decoding = Decoding::Greedy { best_of: 9 }
            }),
            ("audio_ctx", |s| s.audio_ctx = 1501),
            ("max_tokens", |s| s.max_tokens = u32::MAX),
            ("extra_states", |s| s.extra_states = 100_000),
            ("warmup", |s| s.warmup = u32::MAX),
            ("idle_ms", |s| s.idle_ms = u64::MAX),
            ("max_requests", |s| s.max_requests = Some(u64::MAX)),
            ("max_duration_s", |s| s.max_duration_s = Some(u64::MAX)),
        ];
        for (key, break_it) in cases {
            let mut s = spec();
            break_it(&mut s);
            let err = s.validate().unwrap_err();
            assert_eq!(err.key, key, "{err}");
            assert!(err.message.contains("out of range: allowed"), "{err}");
        }
        let mut s = spec();
        s.extra_states = 16;
        s.audio_ctx = 1500;
        s.max_tokens = 448;
        assert_eq!(s.validate(), Ok(()));
        // A plan of more requests than a run may hold, unless a soak limits it.
        s.repetitions = u32::MAX;
        assert_eq!(s.validate().unwrap_err().key, "repetitions");
        s.max_duration_s = Some(3600);
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn a_cancel_past_the_last_request_is_refused() {
        let mut s = spec();
        s.repetitions = 2;
        s.cancel = Some(CancelSpec {
            request: 1,
            after_ms: 0,
        });
        assert_eq!(s.validate(), Ok(()));
        s.cancel = Some(CancelSpec {
            request: 2,
            after_ms: 0,
        });
        let err = s.validate().unwrap_err();
        assert_eq!(err.key, "cancel.request");
        assert!(err.message.contains("2 requests run, ids 0 to 1"), "{err}");
        s.cancel = Some(CancelSpec {
            request: 0,
            after_ms: u64::MAX,
        });
        assert_eq!(s.validate().unwrap_err().key, "cancel.after_ms");
    }

    #[test]
    fn text_bytes_round_trip_through_hex() {
        let r = TranscriptionResult {
            fixture_id: "a".into(),
            repetition: 0,
            tokens: vec![1, 2],
            eot: true,
            stop_reason: StopReason::Eot,
            text: "\u{fffd}".into(),
            text_bytes_hex: Some("ff41".into()),
            segments: 1,
            audio_ms: 10,
            decode: None,
        };
        assert_eq!(r.text_bytes(), vec![0xff, 0x41]);
    }

    #[test]
    fn an_encoder_fault_is_a_reply_defect_or_a_process_fault_each_with_its_own_error() {
        let parse = |json: &str| serde_json::from_str::<EncoderFault>(json);
        assert_eq!(
            parse(r#""short_buffer""#).unwrap(),
            EncoderFault::Reply(ReplyFault::ShortBuffer)
        );
        assert_eq!(
            parse(r#"{"at": "mid_reply", "do": "signal", "signal": "KILL"}"#).unwrap(),
            EncoderFault::Process(ProcessFault::Signal {
                at: EncoderPhase::MidReply,
                signal: FaultSignal::Kill,
            })
        );
        assert_eq!(
            parse(r#"{"do": "signal", "at": "ready", "signal": "SIGSEGV"}"#).unwrap(),
            EncoderFault::Process(ProcessFault::Signal {
                at: EncoderPhase::Ready,
                signal: FaultSignal::Segv,
            })
        );
        assert_eq!(
            parse(r#"{"do": "bad_header", "header": "huge"}"#).unwrap(),
            EncoderFault::Process(ProcessFault::BadHeader {
                header: BadHeader::Huge
            })
        );
        // Each round-trips as it was written (the receipt keeps the spec).
        for json in [
            r#""fail""#,
            r#"{"do":"exit","at":"model_loaded","code":3}"#,
            r#"{"do":"hang","at":"mid_encode"}"#,
            r#"{"do":"bad_ready","ready":"missing_digest"}"#,
        ] {
            assert_eq!(serde_json::to_string(&parse(json).unwrap()).unwrap(), json);
        }
        for (json, says) in [
            (r#""explode""#, "unknown variant `explode`"),
            (
                r#"{"do": "signal", "at": "ready", "signal": "USR1"}"#,
                "unknown variant `USR1`",
            ),
            (
                r#"{"do": "exit", "at": "later", "code": 3}"#,
                "unknown variant `later`",
            ),
            (r#"{"do": "exit", "at": "ready", "code": 300}"#, "300"),
            (r#"{"do": "hang"}"#, "missing field `at`"),
            (
                r#"{"do": "hang", "at": "ready", "signal": "KILL"}"#,
                "unknown field `signal`",
            ),
            (r#"{"at": "ready"}"#, "missing field `do`"),
            ("3", "a reply defect"),
        ] {
            let err = parse(json).unwrap_err().to_string();
            assert!(err.contains(says), "{json}: {err}");
        }
    }

    #[test]
    fn the_encoder_timeout_is_bounded() {
        let mut s = spec();
        s.runtime = Runtime::WhisperCppPatched;
        s.encoder = Encoder::ExternalProcess;
        let mut external = ExternalEncoderInput {
            model: s.model.clone(),
            timeout_s: None,
            fault: None,
        };
        assert_eq!(
            external.timeout(),
            std::time::Duration::from_secs(EXTERNAL_ENCODER_TIMEOUT_S)
        );
        s.external_encoder = Some(external.clone());
        s.validate().unwrap();
        external.timeout_s = Some(0);
        s.external_encoder = Some(external);
        assert_eq!(s.validate().unwrap_err().key, "external_encoder.timeout_s");
    }
}
