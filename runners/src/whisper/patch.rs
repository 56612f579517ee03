//! memqual's patch set over whisper.cpp 1.8.3 (`runners/whisper-patch`),
//! seen from the worker: its C API, the check that the linked library carries
//! exactly the set this worker was built for, and the process-wide
//! configuration each context load takes (whisper.cpp reads it when the
//! context is created; see `whisper-memqual.h`).
//!
//! Compiled only with the `whisper-patch` feature, in the patched worker's own
//! build (`runners/patched`); the stock worker never references these symbols.

use super::engine::Engine;
use super::external_encoder::EncoderSlot;
use crate::session::WorkerSession;
use anyhow::Context;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;
use whisper_rs::whisper_rs_sys as sys;
use worker_contract::{Encoder, LogLevel, WhisperSpec};

/// The patched worker's name (`hello`, stderr prefix, executable).
pub const WORKER_NAME: &str = "memqual-whisper-patched";

/// The digest of the patch set this worker was compiled with (runners/build.rs).
pub const BUILT_FOR_DIGEST: &str = env!("MEMQUAL_WHISPER_PATCH_DIGEST");

/// `whisper_memqual_load_mode`.
const LOAD_FULL: i32 = 0;
const LOAD_EXTERNAL_ENCODER_ONLY: i32 = 1;
const LOAD_ENCODER_ONLY: i32 = 2;
/// `whisper_memqual_encoder`.
const ENCODER_CALLBACK: i32 = 0;
const ENCODER_COREML: i32 = 1;

/// `struct whisper_memqual_tensor`: what an external encoder hands back.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemqualTensor {
    /// `WHISPER_MEMQUAL_TENSOR_F32` (0) is the only type the patch accepts.
    pub type_: i32,
    /// Number of dimensions.
    pub n_dims: i32,
    /// Elements per dimension, innermost first.
    pub ne: [i64; 4],
    /// Byte strides.
    pub nb: [i64; 4],
    /// The data, valid until the next call.
    pub data: *const c_void,
    /// Bytes at `data`.
    pub nbytes: usize,
}

/// `whisper_memqual_encode_fn`.
pub type EncodeFn = unsafe extern "C" fn(
    user_data: *mut c_void,
    mel: *const f32,
    n_mel: c_int,
    n_frames: c_int,
    n_ctx: c_int,
    n_state: c_int,
    n_threads: c_int,
    out: *mut MemqualTensor,
) -> c_int;

/// `struct whisper_memqual_config`.
#[repr(C)]
struct MemqualConfig {
    load_mode: i32,
    encode: Option<EncodeFn>,
    encode_user_data: *mut c_void,
    max_audio_ctx: i32,
    max_batch: i32,
    encoder: i32,
    coreml_compute_units: i32,
}

unsafe extern "C" {
    fn whisper_memqual_configure(config: *const MemqualConfig) -> c_int;
    fn whisper_memqual_skipped_bytes(ctx: *mut sys::whisper_context) -> i64;
    fn whisper_memqual_skipped_tensors(ctx: *mut sys::whisper_context) -> c_int;
    fn whisper_memqual_encode_mel(
        ctx: *mut sys::whisper_context,
        state: *mut sys::whisper_state,
        mel: *const f32,
        n_mel: c_int,
        n_frames: c_int,
        n_ctx: c_int,
        n_threads: c_int,
        out: *mut f32,
        out_len: usize,
    ) -> c_int;
    fn whisper_memqual_runtime_init() -> c_int;
    fn whisper_memqual_capabilities() -> *const c_char;
    fn whisper_memqual_patch_digest() -> *const c_char;
}

/// A static C string from the library.
fn library_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: both functions return pointers to string literals compiled into
    // the library: NUL-terminated and alive for the whole process.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// Start whisper.cpp's runtime (backend registry, CPU backend) before any
/// model, so that a process can measure what it costs with no weights.
/// Returns the number of CPU devices started.
pub fn runtime_init() -> Result<u32, String> {
    // SAFETY: no arguments; ggml's registry and CPU backend start idempotently.
    let started = unsafe { whisper_memqual_runtime_init() };
    u32::try_from(started)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("whisper.cpp's CPU backend did not start ({started} devices)"))
}

/// The digest of the patch set the linked whisper.cpp was built with.
pub fn linked_digest() -> &'static str {
    // SAFETY: no arguments; returns a static string.
    library_str(unsafe { whisper_memqual_patch_digest() })
}

/// What the linked library adds, as capabilities.
pub fn linked_capabilities() -> &'static [&'static str] {
    static CAPS: OnceLock<Vec<&'static str>> = OnceLock::new();
    CAPS.get_or_init(|| {
        // SAFETY: no arguments; returns a static string.
        library_str(unsafe { whisper_memqual_capabilities() })
            .split(',')
            .filter(|c| !c.is_empty())
            .collect()
    })
}

/// Refuse to run when the linked library was patched with another set than
/// the one this worker was compiled for (a stale build of whisper-rs-sys),
/// or says it adds other capabilities than this build expects.
pub fn check_linked() -> Result<(), String> {
    let linked = linked_digest();
    if linked != BUILT_FOR_DIGEST {
        return Err(format!(
            "the linked whisper.cpp carries patch set {linked:?}, but this worker was built for \
             {BUILT_FOR_DIGEST}: run `cargo clean -p whisper-rs-sys` in runners/patched and build again"
        ));
    }
    let expected = if cfg!(feature = "coreml") {
        worker_contract::capabilities::PATCH_CAPABILITIES_COREML
    } else {
        worker_contract::capabilities::PATCH_CAPABILITIES
    };
    if linked_capabilities() != expected {
        return Err(format!(
            "the linked whisper.cpp adds {:?}, but this worker expects {expected:?} \
             (a library built with{} Core ML)",
            linked_capabilities(),
            if cfg!(feature = "coreml") { "" } else { "out" }
        ));
    }
    Ok(())
}

/// How the contexts of this arm load: set once per worker process, before
/// the first load; every load (a reload under an idle policy too) takes it.
#[derive(Clone, Copy)]
pub struct LoadPlan {
    /// Validate and discard the encoder's tensors; the encoder runs in
    /// [`EncoderSlot`]'s process.
    pub external_encoder: Option<&'static EncoderSlot>,
    /// Cross/pad caches for this many encoder positions (0: stock).
    pub max_audio_ctx: u32,
    /// Logits and decoder buffers for this many tokens per batch (0: stock).
    pub max_batch: u32,
    /// Load without the native encoder; Core ML encodes (a Core ML build).
    pub coreml_encoder_only: bool,
    /// `MLModelConfiguration.computeUnits` for the Core ML model.
    pub coreml_compute_units: worker_contract::CoremlComputeUnits,
    /// The encoder process's load: an encoder-only file, and a state with
    /// the encoder's caches and buffers alone.
    pub encoder_only: bool,
}

static PLAN: OnceLock<LoadPlan> = OnceLock::new();

/// Fix this process's [`LoadPlan`]; a second one is refused.
pub fn set_plan(plan: LoadPlan) -> Result<(), String> {
    PLAN.set(plan)
        .map_err(|_| "the load plan is set once per worker".to_string())
}

/// Hand the plan to whisper.cpp for the next context (called right before
/// each `whisper_init_*`). Without a plan the context loads as stock.
pub fn configure_next_load() -> Result<(), String> {
    const STOCK: LoadPlan = LoadPlan {
        external_encoder: None,
        max_audio_ctx: 0,
        max_batch: 0,
        coreml_encoder_only: false,
        coreml_compute_units: worker_contract::CoremlComputeUnits::All,
        encoder_only: false,
    };
    let plan = PLAN.get().unwrap_or(&STOCK);
    let config = MemqualConfig {
        load_mode: if plan.encoder_only {
            LOAD_ENCODER_ONLY
        } else if plan.external_encoder.is_some() || plan.coreml_encoder_only {
            LOAD_EXTERNAL_ENCODER_ONLY
        } else {
            LOAD_FULL
        },
        encoder: if plan.coreml_encoder_only {
            ENCODER_COREML
        } else {
            ENCODER_CALLBACK
        },
        coreml_compute_units: plan.coreml_compute_units.patch_code(),
        encode: plan
            .external_encoder
            .map(|_| super::external_encoder::encode_callback as EncodeFn),
        encode_user_data: plan.external_encoder.map_or(std::ptr::null_mut(), |slot| {
            std::ptr::from_ref(slot).cast_mut().cast()
        }),
        max_audio_ctx: i32::try_from(plan.max_audio_ctx).map_err(|e| e.to_string())?,
        max_batch: i32::try_from(plan.max_batch).map_err(|e| e.to_string())?,
    };
    // SAFETY: `config` is a valid struct for the call; whisper.cpp copies it.
    // The user-data pointer is to a `'static` slot, alive for the process.
    let rc = unsafe { whisper_memqual_configure(&config) };
    if rc != 0 {
        return Err(format!(
            "whisper.cpp refused the load plan ({rc}; see its log)"
        ));
    }
    Ok(())
}

/// What external-encoder-only loading discarded from `ctx`: (tensors, bytes).
///
/// # Safety
/// `ctx` must be a live context.
pub unsafe fn skipped(ctx: *mut sys::whisper_context) -> (u32, u64) {
    // SAFETY: the caller guarantees a live context.
    let (n, bytes) = unsafe {
        (
            whisper_memqual_skipped_tensors(ctx),
            whisper_memqual_skipped_bytes(ctx),
        )
    };
    (n.max(0) as u32, bytes.max(0) as u64)
}

/// Run the native encoder of `ctx`/`state` on one mel window into `out`
/// (the encoder process's side).
///
/// # Safety
/// `ctx` and `state` must be live, `state` created from `ctx`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn encode_mel(
    ctx: *mut sys::whisper_context,
    state: *mut sys::whisper_state,
    mel: &[f32],
    n_mel: i32,
    n_frames: i32,
    n_ctx: i32,
    n_threads: i32,
    out: &mut [f32],
) -> Result<(), i32> {
    if (n_mel as i64) * (n_frames as i64) != mel.len() as i64 {
        return Err(-10);
    }
    // SAFETY: the caller guarantees live ctx/state; `mel` holds n_mel*n_frames
    // floats (checked above) and `out` is valid for `out.len()` floats, which
    // whisper.cpp checks against the shape before writing.
    let rc = unsafe {
        whisper_memqual_encode_mel(
            ctx,
            state,
            mel.as_ptr(),
            n_mel,
            n_frames,
            n_ctx,
            n_threads,
            out.as_mut_ptr(),
            out.len(),
        )
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

/// The patched build's load plan for this arm (set before the first load).
pub(super) fn plan_load(
    spec: &WhisperSpec,
) -> anyhow::Result<Option<&'static super::external_encoder::EncoderSlot>> {
    let slot =
        (spec.encoder == Encoder::ExternalProcess).then(super::external_encoder::EncoderSlot::leak);
    let bounds = spec.state_bounds;
    // Core ML stands in for the external encoder when the arm requires the
    // loader with encoder = "coreml" (check_runnable made sure the build can).
    let coreml_encoder_only = spec.encoder == Encoder::Coreml
        && spec
            .requires
            .iter()
            .any(|r| r == "loader:external_encoder_only");
    set_plan(LoadPlan {
        external_encoder: slot,
        max_audio_ctx: bounds.map_or(0, |b| b.max_audio_ctx),
        max_batch: bounds.map_or(0, |b| b.max_batch),
        coreml_encoder_only,
        coreml_compute_units: spec.coreml_compute_units.unwrap_or_default(),
        encoder_only: false,
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    Ok(slot)
}

/// Start the encoder process (when the arm has one) and say what the patch did.
pub(super) fn start_external_encoder(
    spec: &WhisperSpec,
    slot: Option<&'static super::external_encoder::EncoderSlot>,
    engine: &Engine,
    session: &mut WorkerSession,
) -> anyhow::Result<(
    serde_json::Value,
    Option<worker_contract::ExternalEncoderProcess>,
)> {
    let (ctx, _) = engine.raw();
    // SAFETY: the engine's context is live.
    let (skipped_tensors, skipped_bytes) = unsafe { skipped(ctx) };
    // What the patch did; the state's prediction is in the settings of
    // every whisper.cpp worker (`predicted_state`).
    let bounds = spec.state_bounds;
    let mut report = serde_json::json!({
        "patch_digest": linked_digest(),
        "capabilities": linked_capabilities(),
        "encoder_tensors_discarded": skipped_tensors,
        "encoder_bytes_discarded": skipped_bytes,
        "state_bounds": bounds,
    });
    if let (Some(slot), Some(external)) = (slot, &spec.external_encoder) {
        let exe = std::env::current_exe().context("cannot find this worker's executable")?;
        let start = super::external_encoder::EncoderStart {
            model: external.model.clone(),
            // An encoder-only process is sized like the worker's bound.
            max_audio_ctx: match external.model.layout {
                worker_contract::ModelLayout::EncoderOnly => bounds.map_or(0, |b| b.max_audio_ctx),
                _ => 0,
            },
            fault: external.fault,
        };
        let starting =
            super::external_encoder::EncoderProcess::spawn(&exe, &start, external.timeout())?;
        let pid = starting.pid();
        session.log(
            LogLevel::Info,
            format!(
                "external encoder: started process {pid} (`{} --external-encoder`); it has {} s \
                 for its ready line and for each reply",
                exe.display(),
                external.timeout().as_secs()
            ),
        )?;
        // A process that never becomes ready fails the arm here, at load.
        let process = starting
            .ready(external.model.sha256.as_deref())
            .map_err(|e| anyhow::anyhow!(e))?;
        slot.fill(process);
        let identity = slot
            .identity()
            .context("the external encoder stopped as it started")?;
        session.log(
            LogLevel::Info,
            format!(
                "external encoder: process {pid} runs the native encoder of {} ({skipped_tensors} \
                 encoder tensors, {skipped_bytes} bytes, validated and discarded here)",
                external.model.path.display(),
            ),
        )?;
        report["external_encoder_fault"] = serde_json::json!(external.fault);
        return Ok((
            report,
            Some(worker_contract::ExternalEncoderProcess {
                pid,
                model: external.model.path.clone(),
                model_sha256: identity.model_sha256,
                layout: external.model.layout,
                max_audio_ctx: start.max_audio_ctx,
                memory: identity.memory,
                topology: identity.topology,
            }),
        ));
    }
    Ok((report, None))
}
