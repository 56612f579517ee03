//! The contract between the memqual harness and its workers, in one place.
//!
//! A worker is a child process. The harness writes one [`ArmSpec`] as JSON to
//! the worker's stdin and closes it; the worker writes [`WorkerMessage`]s as
//! JSON lines to file descriptor 3 ([`Channel`]) — `hello` first, then
//! `marker`, `log`, `result`, `error`, (whisper worker) `runtime` and (soak
//! arms with a settle period) `settled` messages, and `bye` last. Worker
//! stdout and stderr are free-form and only captured. On fd 4 the worker
//! gets the read end of its [`Lifeline`], a pipe whose write end only the
//! harness holds: end-of-file there means the harness is gone, and the
//! worker ends itself.
//!
//! [`decode_line`] is the harness's strict reader: bad JSON and unknown message
//! types are distinct, typed errors. The phase order itself is checked by
//! [`sampler::PhaseTracker`]. Everything here carries [`CONTRACT_VERSION`];
//! a worker refuses a spec of another version.
//!
//! Not here: how a worker measures (the `sampler` crate) or what the harness
//! does with the messages (the `harness` crate).

// Every public item says what it is: both sides of the worker boundary build
// on these types, and their docs become the JSON schemas' descriptions.
#![warn(missing_docs)]

mod attribution;
pub mod bounds;
mod calibrate;
pub mod capabilities;
mod channel;
mod error_text;
mod lifeline;
mod message;
mod placement;
mod realtime;
mod runtime;
mod spec;
mod whisper;

pub use attribution::{
    HeapProfiling, LG_PROF_SAMPLE, abba_block_a, block_starting_after, heap_profile_name,
    profiles_marker,
};
pub use bounds::FieldError;
pub use calibrate::{
    CalibrationSpec, FileMap, Leak, MetalAutorelease, Misbehaviour, Plateau, Reserve, ShmFile,
    Spike, Steps, TeardownLeak,
};
pub use channel::{Channel, open_descriptors, read_spec};
pub use error_text::error_text;
pub use lifeline::Lifeline;
pub use message::{
    Bye, CalibrationResult, DecodeError, Hello, LogLevel, LogMessage, RequestResult, ResultBody,
    Settled, WorkerError, WorkerMessage, decode_line,
};
pub use placement::{CoremlPlacement, DeviceCounts, DeviceShares, OperationKind, PlannedPlacement};
pub use realtime::{
    IdlePolicy, RequestMode, RequestTiming, gap_before, validate as validate_realtime,
};
pub use runtime::{
    CoremlIdentity, EncoderMemory, EncoderProcessSteps, ExternalEncoderProcess, LoggedSize,
    ModelIdentity, PatchFile, RuntimeBuild, RuntimeReport, StateBuffers, StateCreation, Topology,
};
pub use spec::{ArmSpec, Lifecycle, SamplerSchedule, WorkerSpec};
pub use whisper::{
    BadHeader, BadReady, CancelSpec, CancelledRequest, Conversion, CoremlComputeUnits,
    Ct2ComputeType, Ct2Options, DecodeTimings, Decoding, EXTERNAL_ENCODER_TIMEOUT_S, Encoder,
    EncoderFault, EncoderPhase, ExternalEncoderInput, FaultSignal, FixtureInput, Initializer,
    LongFormInput, ModelInput, ModelLayout, ModelSource, ProcessFault, ReplyFault, Runtime,
    SourceWheel, StateBounds, StopReason, TranscriptionResult, WhisperSpec, is_sha256_hex,
};

/// Version of the spec and message formats. Bump on any incompatible change.
/// 3: `settled` messages and the spec's `settle_ms` (a soak's settle period).
/// 4: `shm_file` has no `dir` (the worker's shared-memory file has no path);
/// every number of a spec is bounded ([`bounds`]).
/// 5: the lifeline on fd 4 (workers refuse to start without it).
/// 6: whisper specs may carry `request_mode`, `idle_policy` and `gaps_ms`;
/// markers may be `release` and `reload`; results may carry `timing`.
/// 6: a whisper spec's `cancel` and a fixture's `conversion`; the `cancelled` result body.
/// 6: a transcription result's optional `decode` (timings and fallbacks).
/// 6: the `placement` message after `teardown_done` (Core ML's compute plan).
pub const CONTRACT_VERSION: u32 = 6;

/// The file descriptor workers write their messages to.
pub const MESSAGE_FD: i32 = 3;

/// The file descriptor of the worker's [`Lifeline`]: the read end of a pipe
/// whose only write end the harness holds.
pub const LIFELINE_FD: i32 = 4;

/// A worker's exit code for an arm it refuses to run because it lacks a
/// capability the arm requires (reported as NOT_RUNNABLE, never run as something else).
pub const EXIT_NOT_RUNNABLE: i32 = 4;

/// One mebibyte, the unit of the calibration sizes.
pub const MIB: u64 = 1 << 20;
