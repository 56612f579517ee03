//! memqual's patch set over whisper.cpp 1.8.3 (`runners/whisper-patch`),
//! seen from the worker: its C API, the check that the linked library carries
//! exactly the set this worker was built for, and the process-wide
//! configuration each context load takes (whisper.cpp reads it when the
//! context is created; see `whisper-memqual.h`).
//!
//! Compiled only with the `whisper-patch` feature, in the patched worker's own
//! build (`runners/patched`); the stock worker never references these symbols.
//!
//! Below the external encoder and the arm's set-up (`super::patched`): this
//! module knows the C API, not who encodes; the engine reaches it only
//! through [`LoadPlanHook`].

use super::engine::EngineHook;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;
use whisper_rs::whisper_rs_sys as sys;

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

/// An encoder whisper.cpp calls in place of its own: the callback and the
/// `'static` data it is handed back on every call (the external encoder's
/// slot, `super::external_encoder::EncoderSlot::encode_hook`).
#[derive(Clone, Copy)]
pub struct EncodeHook {
    /// `whisper_memqual_encode_fn`.
    pub encode: EncodeFn,
    /// What `encode` receives as `user_data`.
    pub user_data: &'static dyn Sync,
}

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
    fn whisper_memqual_coreml_placement(
        path_mlmodelc: *const c_char,
        compute_units: i32,
        out: *mut encoder_output_check::placement::RawPlacement,
        error: *mut c_char,
        error_len: usize,
    ) -> c_int;
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
    /// Validate and discard the encoder's tensors; the encoder runs where
    /// this hook sends each window (the external encoder's process).
    pub external_encoder: Option<EncodeHook>,
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
        encode: plan.external_encoder.map(|hook| hook.encode),
        encode_user_data: plan.external_encoder.map_or(std::ptr::null_mut(), |hook| {
            std::ptr::from_ref(hook.user_data).cast_mut().cast()
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

/// The engine's hook that hands whisper.cpp this process's [`LoadPlan`]
/// before every load.
pub struct LoadPlanHook;

impl EngineHook for LoadPlanHook {
    fn before_load(&self) -> Result<(), String> {
        configure_next_load()
    }
}

/// What Core ML's compute plan says of the compiled model at `mlmodelc` with
/// `units` (patch 0006): the library's summary, or its status (1: no plan on
/// this system, -1: it failed) with what it wrote of why. It loads the model
/// once more: call it only after the measured phases.
pub fn coreml_placement(
    mlmodelc: &std::path::Path,
    units: worker_contract::CoremlComputeUnits,
) -> Result<encoder_output_check::placement::RawPlacement, (i32, String)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(mlmodelc.as_os_str().as_bytes())
        .map_err(|_| (-1, format!("{} holds a NUL byte", mlmodelc.display())))?;
    let mut out = encoder_output_check::placement::RawPlacement::zeroed();
    let mut error = vec![0 as c_char; 1024];
    // SAFETY: `path` is NUL-terminated; `out` is a writable struct of the
    // header's layout (checked by encoder-output-check's tests); `error` holds
    // the length passed.
    let rc = unsafe {
        whisper_memqual_coreml_placement(
            path.as_ptr(),
            units.patch_code(),
            &mut out,
            error.as_mut_ptr(),
            error.len(),
        )
    };
    if rc == 0 {
        return Ok(out);
    }
    Err((rc, encoder_output_check::header_text(&error)))
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
