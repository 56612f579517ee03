//! The spec's `cancel`: abort one measured request mid-decode through
//! whisper.cpp's abort callback, and time how long the abort took (from the
//! signal to `whisper_full`'s return).
//!
//! The signal comes from a timer thread `after_ms` after the request
//! starts; `after_ms = 0` sets it before `whisper_full` starts, so that case
//! has no race at all. The timer is told to stand down as soon as
//! `whisper_full` returns, so it never fires into a later request.

use super::engine::{Engine, EngineError, RawTranscript};
use sampler::clock;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How a request with a cancel ended.
#[derive(Debug)]
pub enum Outcome {
    /// `whisper_full` stopped at an abort check.
    Aborted {
        /// From the abort signal to `whisper_full`'s return, in nanoseconds.
        abort_latency_ns: u64,
        /// `whisper_full`'s return code.
        code: i32,
    },
    /// The request finished before the signal (or past whisper.cpp's last
    /// abort check): an ordinary transcript.
    Finished(RawTranscript),
}

/// The abort flag and when it was raised (monotonic ns; 0 = not raised).
#[derive(Default)]
struct Signal {
    raised: AtomicBool,
    at_ns: AtomicU64,
}

impl Signal {
    fn raise(&self) {
        // Time first: whoever sees the flag must also see the time.
        self.at_ns.store(clock::monotonic_ns(), Ordering::SeqCst);
        self.raised.store(true, Ordering::SeqCst);
    }
}

/// Run one request on `engine` and signal the abort `after_ms` after it starts.
pub fn run(engine: &mut Engine, samples: &[f32], after_ms: u64) -> Result<Outcome, EngineError> {
    let signal = Arc::new(Signal::default());
    let (stand_down, wait) = mpsc::channel::<()>();
    let timer = if after_ms == 0 {
        signal.raise();
        None
    } else {
        let signal = Arc::clone(&signal);
        Some(std::thread::spawn(move || {
            // A message or a dropped sender means the request is over.
            if let Err(mpsc::RecvTimeoutError::Timeout) =
                wait.recv_timeout(Duration::from_millis(after_ms))
            {
                signal.raise();
            }
        }))
    };
    let result = engine.transcribe_abortable(samples, &signal.raised);
    let returned_ns = clock::monotonic_ns();
    drop(stand_down);
    if let Some(timer) = timer {
        // The thread only waits and stores; it cannot panic.
        let _ = timer.join();
    }
    match result {
        Ok(raw) => Ok(Outcome::Finished(raw)),
        Err(EngineError::Full(code)) if signal.raised.load(Ordering::SeqCst) => {
            Ok(Outcome::Aborted {
                abort_latency_ns: returned_ns.saturating_sub(signal.at_ns.load(Ordering::SeqCst)),
                code,
            })
        }
        Err(e) => Err(e),
    }
}
