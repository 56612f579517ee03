//! whisper.cpp through `whisper_rs::whisper_rs_sys`: with [`super::loader`],
//! the worker's only unsafe code besides `crate::heap_dump`'s `mallctl` calls
//! (allocation attribution).
//!
//! Why raw calls instead of whisper-rs's safe `WhisperContext`: the safe type
//! always initialises without a state and keeps the parameter struct private,
//! but the `default` initializer must use the context's built-in state
//! (`whisper_init_with_params` + `whisper_full`), and both initializers must
//! run with byte-identical parameters. One small wrapper serves both. The
//! model is never opened by path here: whisper.cpp reads the worker's
//! verified open file through the custom loader, and the context is kept
//! only if the bytes it consumed are the verified bytes. Teardown is
//! explicit ([`Engine::teardown`]) so the worker can mark `teardown_done`
//! after everything is freed; `Drop` is the backstop.
//!
//! The engine owns the context and knows nothing of the patched build: what
//! that build adds around a load and a failed request (its load plan, its
//! external encoder's error) reaches the engine as [`EngineHook`]s in
//! [`RunSettings::hooks`], implemented by `super::patch` and
//! `super::external_encoder`. The dependency runs one way, from them to here.

use super::loader::FileLoader;
use super::model::{NotTheCheckedBytes, VerifiedModel};
use std::ffi::{CStr, CString, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use whisper_rs::whisper_rs_sys as sys;
use worker_contract::{DecodeTimings, Decoding, Initializer, StateCreation};

/// This process's footprint now; `None` where the platform reports none.
fn footprint_now() -> Option<u64> {
    sampler::snapshot_self()
        .ok()
        .and_then(|m| m.footprint_bytes)
}

/// What a build adds around the context's life, called by the engine at two
/// points. Both default to doing nothing: the stock worker has no hooks.
pub trait EngineHook: Sync {
    /// Right before every context load (`whisper_init_*`); an error refuses
    /// the load.
    fn before_load(&self) -> Result<(), String> {
        Ok(())
    }

    /// Why `whisper_full` failed, when the hook knows better than its code.
    fn explain_failure(&self) -> Option<String> {
        None
    }
}

/// The hooks a run's engine calls, in order; none in the stock worker.
#[derive(Clone, Copy)]
pub struct Hooks(pub &'static [&'static dyn EngineHook]);

impl Hooks {
    /// No hooks: whisper.cpp as it is.
    pub const NONE: Hooks = Hooks(&[]);
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hooks({})", self.0.len())
    }
}

/// Settings for context creation and every `whisper_full` call.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSettings {
    /// `whisper_full` threads (`n_threads`).
    pub threads: u32,
    /// Sampling strategy: greedy with `best_of`, or beam search with `beam_size`.
    pub decoding: Decoding,
    /// Language code passed to whisper.cpp (e.g. `en`); must contain no NUL byte.
    pub language: String,
    /// Decode without timestamp tokens (`no_timestamps`).
    pub no_timestamps: bool,
    /// Encoder context length (`audio_ctx`); 0 keeps the model's.
    pub audio_ctx: u32,
    /// Upper bound on tokens per segment (`max_tokens`); 0 leaves whisper.cpp's.
    pub max_tokens: u32,
    /// Keep whisper.cpp's temperature fallback; false sets `temperature_inc` to 0.
    pub temperature_fallback: bool,
    /// Let whisper.cpp use a GPU backend when the build has one (context
    /// parameter `use_gpu`).
    pub use_gpu: bool,
    /// Flash attention (context parameter `flash_attn`).
    pub flash_attn: bool,
    /// Called around every load and failed request (not a setting: never
    /// serialized).
    #[serde(skip)]
    pub hooks: Hooks,
}

impl RunSettings {
    /// One CPU thread, greedy, English, no timestamps, no fallback, the
    /// model's own contexts: what the encoder process and the tests use.
    pub fn plain() -> RunSettings {
        RunSettings {
            threads: 1,
            decoding: Decoding::Greedy { best_of: 1 },
            language: "en".into(),
            no_timestamps: true,
            audio_ctx: 0,
            max_tokens: 0,
            temperature_fallback: false,
            use_gpu: false,
            flash_attn: false,
            hooks: Hooks::NONE,
        }
    }
}

/// What one `whisper_full` produced, read back before the next call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTranscript {
    /// Token ids per segment.
    pub segments: Vec<Vec<i32>>,
    /// Concatenated segment text as whisper.cpp returned it; raw bytes, since it
    /// need not be valid UTF-8.
    pub text: Vec<u8>,
    /// Where the call's time went and its temperature fallbacks, as the
    /// callbacks saw them; `None` from a runtime that does not observe it.
    pub decode: Option<DecodeTimings>,
}

/// Why loading the model, creating a state or running a request failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The language setting contains a NUL byte, so it cannot be passed to C.
    #[error("language {0:?} contains a NUL byte")]
    BadLanguage(String),
    /// whisper.cpp returned no context: it rejected the model.
    #[error(
        "whisper.cpp could not load the model {path} (it read {read} of its {bytes} bytes; \
         see the whisper.cpp log lines above)"
    )]
    Load {
        /// Model path as given in the arm spec.
        path: String,
        /// Bytes whisper.cpp consumed through the loader before giving up.
        read: u64,
        /// Length in bytes of the checked model file.
        bytes: u64,
    },
    /// whisper.cpp loaded the model, but not the bytes that were checked.
    #[error(transparent)]
    NotTheCheckedBytes(#[from] NotTheCheckedBytes),
    /// `whisper_init_state` failed for the state at this index (0 is the
    /// working state, then the extras).
    #[error("whisper.cpp could not create state {0} (see the whisper.cpp log lines above)")]
    State(usize),
    /// The request had no samples.
    #[error("no audio samples")]
    NoSamples,
    /// More samples than fit in a C `int`.
    #[error("too many samples for whisper.cpp ({0})")]
    TooLong(usize),
    /// `whisper_full` returned this non-zero code.
    #[error("whisper_full failed with code {0}")]
    Full(c_int),
    /// `whisper_full` failed and a hook said why (the patched worker's
    /// external encoder).
    #[error("whisper_full failed with code {0}: {1}")]
    Explained(c_int, String),
    /// A hook refused the load (the patched worker's load plan).
    #[error("{0}")]
    Refused(String),
}

/// A loaded context and its states. Not `Send`: it stays on the worker thread.
pub struct Engine {
    ctx: *mut sys::whisper_context,
    /// The working state (`None` for the `default` initializer, which uses the
    /// context's own) followed by the extras.
    working: Option<*mut sys::whisper_state>,
    extras: Vec<*mut sys::whisper_state>,
    language: CString,
    settings: RunSettings,
    /// Time the loader spent hashing during the load.
    hash_ns: u64,
}

impl Engine {
    /// Load the verified model with `initializer`'s entry point, reading it
    /// from the verified open file. Fails (freeing the context) unless
    /// whisper.cpp consumed exactly the verified bytes.
    pub fn load(
        model: &VerifiedModel,
        initializer: Initializer,
        settings: RunSettings,
    ) -> Result<Engine, EngineError> {
        let language = CString::new(settings.language.as_str())
            .map_err(|_| EngineError::BadLanguage(settings.language.clone()))?;
        // SAFETY: returns a plain struct by value; no pointers are involved.
        let mut cparams = unsafe { sys::whisper_context_default_params() };
        cparams.use_gpu = settings.use_gpu;
        cparams.flash_attn = settings.flash_attn;
        // The patched build hands whisper.cpp this arm's load plan before every load.
        for hook in settings.hooks.0 {
            hook.before_load().map_err(EngineError::Refused)?;
        }
        let mut loader = FileLoader::new(model.file());
        let mut callbacks = loader.callbacks();
        // SAFETY: `callbacks` points at `loader`, which stays in place and
        // alive for the whole call (whisper.cpp uses the loader only inside
        // it and calls `close` before returning); the params struct is passed
        // by value. A null return means failure.
        let ctx = unsafe {
            match initializer {
                Initializer::NoState => {
                    sys::whisper_init_with_params_no_state(&mut callbacks, cparams)
                }
                Initializer::Default => sys::whisper_init_with_params(&mut callbacks, cparams),
            }
        };
        let consumed = loader.finish();
        let mut engine = Engine {
            ctx,
            working: None,
            extras: Vec::new(),
            language,
            settings,
            hash_ns: consumed.hash_ns,
        };
        if ctx.is_null() {
            return Err(EngineError::Load {
                path: model.identity.path.clone(),
                read: consumed.bytes,
                bytes: model.identity.bytes,
            });
        }
        if let Err(e) = model.confirm_loaded(&consumed) {
            engine.free_all();
            return Err(e.into());
        }
        Ok(engine)
    }

    /// The live context and working state, for the patch's own calls.
    #[cfg(feature = "whisper-patch")]
    pub(crate) fn raw(&self) -> (*mut sys::whisper_context, Option<*mut sys::whisper_state>) {
        (self.ctx, self.working)
    }

    /// The loaded model's hyperparameters, as whisper.cpp read them.
    pub fn hparams(&self) -> ggml_container::Hparams {
        // SAFETY: ctx is live; each call reads one integer.
        let v = unsafe {
            [
                sys::whisper_model_n_vocab(self.ctx),
                sys::whisper_model_n_audio_ctx(self.ctx),
                sys::whisper_model_n_audio_state(self.ctx),
                sys::whisper_model_n_audio_head(self.ctx),
                sys::whisper_model_n_audio_layer(self.ctx),
                sys::whisper_model_n_text_ctx(self.ctx),
                sys::whisper_model_n_text_state(self.ctx),
                sys::whisper_model_n_text_head(self.ctx),
                sys::whisper_model_n_text_layer(self.ctx),
                sys::whisper_model_n_mels(self.ctx),
                sys::whisper_model_ftype(self.ctx),
            ]
        };
        ggml_container::Hparams::from_array(v)
    }

    /// Time spent hashing the model bytes during [`Engine::load`]: the
    /// worker's check, not whisper.cpp's work.
    pub fn load_hash_ns(&self) -> u64 {
        self.hash_ns
    }

    fn new_state(&self, index: usize) -> Result<*mut sys::whisper_state, EngineError> {
        // SAFETY: `self.ctx` is a live context (non-null since `load`).
        let state = unsafe { sys::whisper_init_state(self.ctx) };
        if state.is_null() {
            Err(EngineError::State(index))
        } else {
            Ok(state)
        }
    }

    /// Create the working state (for `no_state`) and `extra` more states;
    /// returns each one's creation, timed and measured.
    pub fn create_states(
        &mut self,
        initializer: Initializer,
        extra: u32,
    ) -> Result<Vec<StateCreation>, EngineError> {
        let mut made = Vec::new();
        // One footprint reading per boundary: a state's "after" is the next
        // one's "before" (nothing runs between them), so the measured path
        // reads /proc once per state, not twice.
        let mut footprint = footprint_now();
        if initializer == Initializer::NoState && self.working.is_none() {
            let (state, creation) = self.timed_state(0, &mut footprint)?;
            self.working = Some(state);
            made.push(creation);
        }
        for i in 0..extra as usize {
            let (state, creation) = self.timed_state(i + 1, &mut footprint)?;
            self.extras.push(state);
            made.push(creation);
        }
        Ok(made)
    }

    /// Create state `index`; `footprint` is the reading before it and
    /// becomes the one after.
    fn timed_state(
        &self,
        index: usize,
        footprint: &mut Option<u64>,
    ) -> Result<(*mut sys::whisper_state, StateCreation), EngineError> {
        let t0 = sampler::clock::monotonic_ns();
        let state = self.new_state(index)?;
        let create_ns = sampler::clock::monotonic_ns() - t0;
        let before = std::mem::replace(footprint, footprint_now());
        let creation = StateCreation {
            index: index as u32,
            create_ns,
            footprint_before_bytes: before,
            footprint_after_bytes: *footprint,
        };
        Ok((state, creation))
    }

    /// States alive now, the context's built-in one included.
    pub fn state_count(&self, initializer: Initializer) -> u32 {
        let builtin = u32::from(initializer == Initializer::Default);
        builtin + u32::from(self.working.is_some()) + self.extras.len() as u32
    }

    fn full_params(&self) -> sys::whisper_full_params {
        let strategy = match self.settings.decoding {
            Decoding::Greedy { .. } => sys::whisper_sampling_strategy_WHISPER_SAMPLING_GREEDY,
            Decoding::Beam { .. } => sys::whisper_sampling_strategy_WHISPER_SAMPLING_BEAM_SEARCH,
        };
        // SAFETY: returns a plain struct by value.
        let mut p = unsafe { sys::whisper_full_default_params(strategy) };
        match self.settings.decoding {
            Decoding::Greedy { best_of } => p.greedy.best_of = best_of as c_int,
            Decoding::Beam { beam_size } => p.beam_search.beam_size = beam_size as c_int,
        }
        p.n_threads = self.settings.threads as c_int;
        p.language = self.language.as_ptr();
        p.no_timestamps = self.settings.no_timestamps;
        p.audio_ctx = self.settings.audio_ctx as c_int;
        p.max_tokens = self.settings.max_tokens as c_int;
        if !self.settings.temperature_fallback {
            // whisper.cpp only retries at higher temperatures when this is positive.
            p.temperature_inc = 0.0;
        }
        // Every request decodes its whole input: no VAD, as the receipt's
        // request policy records.
        p.vad = false;
        // The worker reports through its channel; whisper.cpp must not print to stdout.
        p.print_progress = false;
        p.print_realtime = false;
        p.print_timestamps = false;
        p.print_special = false;
        p
    }

    /// Run one request to its final text and read the result back.
    pub fn transcribe(&mut self, samples: &[f32]) -> Result<RawTranscript, EngineError> {
        self.run_full(samples, None)
    }

    /// [`Engine::transcribe`] with whisper.cpp's abort callback polling
    /// `abort`: once it is set, `whisper_full` returns at its next check
    /// (after an encoder or decoder pass) with [`EngineError::Full`].
    pub fn transcribe_abortable(
        &mut self,
        samples: &[f32],
        abort: &AtomicBool,
    ) -> Result<RawTranscript, EngineError> {
        self.run_full(samples, Some(abort))
    }

    fn run_full(
        &mut self,
        samples: &[f32],
        abort: Option<&AtomicBool>,
    ) -> Result<RawTranscript, EngineError> {
        if samples.is_empty() {
            return Err(EngineError::NoSamples);
        }
        let n = c_int::try_from(samples.len()).map_err(|_| EngineError::TooLong(samples.len()))?;
        let mut params = self.full_params();
        let probe = Probe::default();
        // Observation only: neither callback changes what whisper.cpp decodes
        // (the logits are read, never written; the encoder callback never
        // asks to stop).
        params.encoder_begin_callback = Some(encoder_began);
        params.encoder_begin_callback_user_data = std::ptr::from_ref(&probe).cast_mut().cast();
        params.logits_filter_callback = Some(logits_seen);
        params.logits_filter_callback_user_data = std::ptr::from_ref(&probe).cast_mut().cast();
        if let Some(flag) = abort {
            params.abort_callback = Some(abort_requested);
            params.abort_callback_user_data = std::ptr::from_ref(flag).cast_mut().cast::<c_void>();
        }
        let start_ns = sampler::clock::monotonic_ns();
        // SAFETY: ctx (and state, when used) are live; `samples` is valid for `n`
        // floats for the whole call; `params.language` points into `self.language`,
        // the abort callback's data into the caller's `AtomicBool` and the
        // probe callbacks' into `probe`, all of which outlive the call.
        let code = unsafe {
            match self.working {
                Some(state) => {
                    sys::whisper_full_with_state(self.ctx, state, params, samples.as_ptr(), n)
                }
                None => sys::whisper_full(self.ctx, params, samples.as_ptr(), n),
            }
        };
        if code != 0 {
            if let Some(why) = self
                .settings
                .hooks
                .0
                .iter()
                .find_map(|h| h.explain_failure())
            {
                return Err(EngineError::Explained(code, why));
            }
            return Err(EngineError::Full(code));
        }
        let end_ns = sampler::clock::monotonic_ns();
        let mut out = self.read_result();
        out.decode = Some(probe.timings(start_ns, end_ns));
        Ok(out)
    }

    fn read_result(&self) -> RawTranscript {
        let mut out = RawTranscript {
            segments: Vec::new(),
            text: Vec::new(),
            decode: None,
        };
        // SAFETY: for the whole block, ctx/state are live and hold the result of the
        // last `whisper_full`; indices stay within the counts whisper.cpp reports;
        // segment text pointers are NUL-terminated and valid until the next call,
        // and are copied out immediately.
        unsafe {
            let n_segments = match self.working {
                Some(s) => sys::whisper_full_n_segments_from_state(s),
                None => sys::whisper_full_n_segments(self.ctx),
            };
            for seg in 0..n_segments {
                let (n_tokens, text) = match self.working {
                    Some(s) => (
                        sys::whisper_full_n_tokens_from_state(s, seg),
                        sys::whisper_full_get_segment_text_from_state(s, seg),
                    ),
                    None => (
                        sys::whisper_full_n_tokens(self.ctx, seg),
                        sys::whisper_full_get_segment_text(self.ctx, seg),
                    ),
                };
                let tokens = (0..n_tokens)
                    .map(|i| match self.working {
                        Some(s) => sys::whisper_full_get_token_id_from_state(s, seg, i),
                        None => sys::whisper_full_get_token_id(self.ctx, seg, i),
                    })
                    .collect();
                out.segments.push(tokens);
                if !text.is_null() {
                    out.text.extend_from_slice(CStr::from_ptr(text).to_bytes());
                }
            }
        }
        out
    }

    /// Id of the end-of-text token in the loaded vocabulary (`whisper_token_eot`).
    pub fn token_eot(&self) -> i32 {
        // SAFETY: ctx is live.
        unsafe { sys::whisper_token_eot(self.ctx) }
    }

    /// Id of the first timestamp token, `<|0.00|>` (`whisper_token_beg`); ids
    /// at or above it are timestamps.
    pub fn token_beg(&self) -> i32 {
        // SAFETY: ctx is live.
        unsafe { sys::whisper_token_beg(self.ctx) }
    }

    /// Free every state, then the context.
    pub fn teardown(mut self) {
        self.free_all();
    }

    fn free_all(&mut self) {
        for state in self.extras.drain(..).chain(self.working.take()) {
            // SAFETY: each state came from `whisper_init_state` and is freed once
            // (drained/taken out of `self` first).
            unsafe { sys::whisper_free_state(state) };
        }
        if !self.ctx.is_null() {
            // SAFETY: the context came from a `whisper_init_*` call and is freed
            // once; freeing it also frees its built-in state, if any.
            unsafe { sys::whisper_free(self.ctx) };
            self.ctx = std::ptr::null_mut();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.free_all();
    }
}

/// whisper.cpp's abort callback: `data` is the `AtomicBool` passed to
/// [`Engine::transcribe_abortable`]; true asks whisper.cpp to stop.
unsafe extern "C" fn abort_requested(data: *mut c_void) -> bool {
    // SAFETY: whisper.cpp passes back the pointer `run_full` set, to an
    // `AtomicBool` borrowed for the whole `whisper_full` call.
    let flag = unsafe { &*data.cast::<AtomicBool>() };
    flag.load(Ordering::SeqCst)
}

/// What `whisper_full`'s callbacks saw of one call, in monotonic ns (0 =
/// not yet). Atomics: with several decoders whisper.cpp computes their
/// logits on several threads at once.
#[derive(Default)]
struct Probe {
    /// Encoder windows begun.
    windows: AtomicU32,
    /// The first window's encoder start (log-mel ends there).
    first_encoder_ns: AtomicU64,
    /// The current window's encoder start, taken by its first logits.
    window_begin_ns: AtomicU64,
    /// Encoder start to first logits, summed over windows.
    encode_ns: AtomicU64,
    /// The call's first logits.
    first_logits_ns: AtomicU64,
    /// Logits computed for sampling.
    steps: AtomicU64,
    /// Decoding passes: logits for an empty sequence start each one.
    passes: AtomicU32,
}

impl Probe {
    fn encoder_began(&self, now_ns: u64) {
        self.windows.fetch_add(1, Ordering::Relaxed);
        let _ =
            self.first_encoder_ns
                .compare_exchange(0, now_ns, Ordering::Relaxed, Ordering::Relaxed);
        self.window_begin_ns.store(now_ns, Ordering::Relaxed);
    }

    fn logits(&self, now_ns: u64, n_tokens: c_int) {
        let begin = self.window_begin_ns.swap(0, Ordering::Relaxed);
        if begin != 0 {
            self.encode_ns
                .fetch_add(now_ns.saturating_sub(begin), Ordering::Relaxed);
        }
        let _ =
            self.first_logits_ns
                .compare_exchange(0, now_ns, Ordering::Relaxed, Ordering::Relaxed);
        self.steps.fetch_add(1, Ordering::Relaxed);
        if n_tokens == 0 {
            self.passes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The figures of a call that ran from `start_ns` to `end_ns`.
    fn timings(&self, start_ns: u64, end_ns: u64) -> DecodeTimings {
        let windows = self.windows.load(Ordering::Relaxed);
        let first_encoder = self.first_encoder_ns.load(Ordering::Relaxed);
        let first_logits = self.first_logits_ns.load(Ordering::Relaxed);
        let passes = self.passes.load(Ordering::Relaxed);
        let full_ns = end_ns.saturating_sub(start_ns);
        // No window (audio under 100 ms) or no logits: nothing was encoded
        // and decoded, so there is no split to report.
        let ran = windows > 0 && first_encoder != 0 && first_logits != 0;
        let encode_ns = ran.then(|| self.encode_ns.load(Ordering::Relaxed));
        let mel_ns = first_encoder.saturating_sub(start_ns);
        DecodeTimings {
            full_ns,
            windows,
            encode_ns,
            first_token_ns: ran.then(|| first_logits.saturating_sub(start_ns)),
            tokens_decoded: self.steps.load(Ordering::Relaxed),
            decode_ns: encode_ns.map(|e| full_ns.saturating_sub(mel_ns).saturating_sub(e)),
            // Every window decodes at least once; fewer passes than windows
            // means the count cannot be trusted.
            fallbacks: (ran && passes >= windows).then(|| passes - windows),
        }
    }
}

/// whisper.cpp's `encoder_begin_callback`: `data` is the [`Probe`] of the
/// running call. Always true: carry on.
unsafe extern "C" fn encoder_began(
    _ctx: *mut sys::whisper_context,
    _state: *mut sys::whisper_state,
    data: *mut c_void,
) -> bool {
    // SAFETY: whisper.cpp passes back the pointer `run_full` set, to a
    // `Probe` borrowed for the whole `whisper_full` call; it is only read
    // through atomics.
    let probe = unsafe { &*data.cast::<Probe>() };
    probe.encoder_began(sampler::clock::monotonic_ns());
    true
}

/// whisper.cpp's `logits_filter_callback`, called once per decoder per
/// sampled token with that decoder's sequence so far (`n_tokens`). The
/// logits are left as they are.
unsafe extern "C" fn logits_seen(
    _ctx: *mut sys::whisper_context,
    _state: *mut sys::whisper_state,
    _tokens: *const sys::whisper_token_data,
    n_tokens: c_int,
    _logits: *mut f32,
    data: *mut c_void,
) {
    // SAFETY: as in `encoder_began`: the call's `Probe`, shared through atomics
    // by the threads whisper.cpp computes several decoders' logits on.
    let probe = unsafe { &*data.cast::<Probe>() };
    probe.logits(sampler::clock::monotonic_ns(), n_tokens);
}

/// whisper.cpp's version string.
pub fn runtime_version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::whisper_version()) }
        .to_string_lossy()
        .into_owned()
}

/// `whisper_print_system_info()`: the compiled-in CPU features and backends.
pub fn system_info() -> String {
    // SAFETY: returns a pointer to a NUL-terminated string in a static buffer.
    unsafe { CStr::from_ptr(sys::whisper_print_system_info()) }
        .to_string_lossy()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml_container::synthetic::{self, SyntheticSpec};
    use std::os::unix::fs::FileExt;
    use worker_contract::{ModelInput, ModelLayout, ModelSource};

    fn settings() -> RunSettings {
        RunSettings {
            // The patched build's tests load as stock through its plan, as the worker does.
            #[cfg(feature = "whisper-patch")]
            hooks: Hooks(&[&super::super::patch::LoadPlanHook]),
            ..RunSettings::plain()
        }
    }

    fn verified(path: &std::path::Path, prevalidate: bool) -> VerifiedModel {
        VerifiedModel::open(&ModelInput {
            path: path.to_path_buf(),
            sha256: None,
            layout: ModelLayout::Full,
            prevalidate,
            coreml_sidecar: None,
            source: ModelSource::default(),
        })
        .unwrap()
    }

    fn synthetic(seed: u64) -> Vec<u8> {
        synthetic::to_bytes(&SyntheticSpec {
            seed,
            ..SyntheticSpec::loadable()
        })
        .unwrap()
    }

    #[test]
    fn a_file_renamed_over_the_path_after_the_check_is_not_what_loads() {
        let _lock = crate::memory_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("model.bin");
        let (original, other) = (synthetic(1), synthetic(2));
        assert_ne!(original, other);
        std::fs::write(&path, &original).unwrap();
        let model = verified(&path, true);
        let swap = tmp.path().join("other.bin");
        std::fs::write(&swap, &other).unwrap();
        std::fs::rename(&swap, &path).unwrap();
        // whisper.cpp reads the checked file through the worker's handle.
        let engine = Engine::load(&model, Initializer::NoState, settings()).unwrap();
        assert_eq!(
            model.identity.sha256,
            ggml_container::digest::sha256_hex(&original)
        );
        drop(engine);
    }

    #[test]
    fn a_file_changed_in_place_after_the_check_fails_closed() {
        let _lock = crate::memory_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("model.bin");
        let original = synthetic(1);
        std::fs::write(&path, &original).unwrap();
        for (initializer, prevalidate) in [
            (Initializer::NoState, true),
            (Initializer::Default, true),
            (Initializer::NoState, false),
        ] {
            std::fs::write(&path, &original).unwrap();
            let model = verified(&path, prevalidate);
            // The last weight changes; the structure stays valid, so whisper.cpp
            // would load it happily.
            let mut changed = original.clone();
            let last = changed.len() - 1;
            changed[last] ^= 0x01;
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_at(&changed[last..], last as u64).unwrap();
            let err = Engine::load(&model, initializer, settings()).err().unwrap();
            let EngineError::NotTheCheckedBytes(e) = &err else {
                panic!("{err}");
            };
            assert_eq!(e.sha256, ggml_container::digest::sha256_hex(&original));
            assert_eq!(
                e.loaded_sha256,
                ggml_container::digest::sha256_hex(&changed)
            );
            assert_eq!(
                (e.bytes, e.loaded_bytes),
                (original.len() as u64, original.len() as u64)
            );
            assert!(
                err.to_string()
                    .contains("the file changed between the check and the load")
            );
        }
    }

    #[test]
    fn bytes_appended_after_the_check_fail_closed() {
        let _lock = crate::memory_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("model.bin");
        let original = synthetic(1);
        std::fs::write(&path, &original).unwrap();
        let model = verified(&path, true);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_at(&[0u8; 7], original.len() as u64).unwrap();
        let err = Engine::load(&model, Initializer::NoState, settings())
            .err()
            .unwrap();
        let EngineError::NotTheCheckedBytes(e) = &err else {
            panic!("{err}");
        };
        assert_eq!(e.loaded_bytes, original.len() as u64 + 7);
    }
}
