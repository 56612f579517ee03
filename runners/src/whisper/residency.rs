//! The idle-residency policies (seed 000 §5.7) as worker behaviour: what is
//! loaded between requests, when it is released and when it comes back.
//!
//! - `resident`: the engine loaded at start stays until teardown.
//! - `load_on_speech`: released right after warmup and after every final
//!   text; loaded again when speech starts (inside the request, while the
//!   audio still arrives).
//! - `unload_after_idle`: released once `after_ms` passed since the last
//!   final text (or warmup) without speech; loaded again at the next speech
//!   start.
//!
//! A release frees every state and the context ([`Engine::teardown`]) and
//! then, on glibc, hands free heap pages back to the kernel
//! (`malloc_trim`): freed memory that stays in the process's heap still
//! counts in its footprint, and a product that releases to save idle RAM
//! would do the same. A reload is the same verified load as the first one
//! (the model file stays open, its bytes are hashed again as whisper.cpp
//! reads them), then the same states.

use super::coreml::Sidecar;
use super::engine::{Engine, RunSettings};
use super::model::VerifiedModel;
use sampler::clock;
use worker_contract::{IdlePolicy, Initializer};

/// Everything a (re)load needs.
pub struct LoadRecipe<'a> {
    /// The checked model, still open.
    pub model: &'a VerifiedModel,
    /// The Core ML sidecar, when the arm uses one.
    pub sidecar: Option<&'a Sidecar>,
    /// How states are built.
    pub initializer: Initializer,
    /// States beyond the working one.
    pub extra_states: u32,
    /// Context and request settings.
    pub settings: RunSettings,
}

impl LoadRecipe<'_> {
    fn within<T>(&self, f: impl FnOnce() -> T) -> anyhow::Result<T> {
        match self.sidecar {
            Some(s) => s.enter(f),
            None => Ok(f()),
        }
    }

    /// Load the context and create its states, as at start.
    pub fn load(&self) -> anyhow::Result<Engine> {
        let mut engine =
            self.within(|| Engine::load(self.model, self.initializer, self.settings.clone()))??;
        self.within(|| engine.create_states(self.initializer, self.extra_states))??;
        Ok(engine)
    }
}

/// The engine as the policy holds it.
pub struct Residency {
    engine: Option<Engine>,
    policy: IdlePolicy,
    /// When speech last ended (the last final text, or warmup's end).
    last_speech_end_ns: u64,
}

/// What [`Residency::idle_until`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleStep {
    /// Nothing to release before the deadline: slept through.
    Slept,
    /// The policy's time ran out: the engine was released at this moment.
    Released,
}

impl Residency {
    /// Hold `engine`, loaded at start, under `policy`.
    pub fn new(engine: Engine, policy: IdlePolicy) -> Self {
        Residency {
            engine: Some(engine),
            policy,
            last_speech_end_ns: clock::monotonic_ns(),
        }
    }

    /// The loaded engine, if any.
    pub fn engine(&mut self) -> Option<&mut Engine> {
        self.engine.as_mut()
    }

    /// True when the context and states are loaded.
    pub fn is_loaded(&self) -> bool {
        self.engine.is_some()
    }

    /// Speech ended now (warmup done, or a final text): restart the idle clock.
    pub fn speech_ended(&mut self) {
        self.last_speech_end_ns = clock::monotonic_ns();
    }

    /// Whether the policy releases as soon as speech ends.
    pub fn releases_after_final(&self) -> bool {
        self.policy == IdlePolicy::LoadOnSpeech && self.engine.is_some()
    }

    /// Free the states and context, then return free heap to the kernel.
    pub fn release(&mut self) {
        if let Some(engine) = self.engine.take() {
            engine.teardown();
        }
        trim_heap();
    }

    /// Put a freshly loaded engine back (a reload).
    pub fn restore(&mut self, engine: Engine) {
        self.engine = Some(engine);
    }

    /// Wait until `deadline_ns`. Under `unload_after_idle`, if the idle
    /// time runs out first, stop at that moment and say so (the caller marks
    /// `release`, then calls again to sleep out the rest).
    pub fn idle_until(&mut self, deadline_ns: u64) -> IdleStep {
        if let (IdlePolicy::UnloadAfterIdle { after_ms }, true) = (self.policy, self.is_loaded()) {
            let release_at = self
                .last_speech_end_ns
                .saturating_add(after_ms.saturating_mul(1_000_000));
            if release_at <= deadline_ns {
                sleep_until(release_at);
                self.release();
                return IdleStep::Released;
            }
        }
        sleep_until(deadline_ns);
        IdleStep::Slept
    }

    /// Tear down whatever is loaded (the end of the arm).
    pub fn teardown(mut self) {
        if let Some(engine) = self.engine.take() {
            engine.teardown();
        }
    }
}

fn sleep_until(t_ns: u64) {
    let now = clock::monotonic_ns();
    if t_ns > now {
        std::thread::sleep(std::time::Duration::from_nanos(t_ns - now));
    }
}

/// Give free heap pages back to the kernel. glibc keeps freed chunks in its
/// arenas (only the top of the main heap is trimmed on its own), so without
/// this a release lowers the footprint by whatever was mmapped alone.
pub(super) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas; 0 keeps no pad.
    unsafe {
        libc::malloc_trim(0);
    }
}
