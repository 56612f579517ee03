//! whisper.cpp's and ggml's log, captured through whisper-rs's logging hooks
//! (`log_backend`) into a buffer the worker drains at each phase: the lines go
//! to the harness as `log` messages and feed the topology parser.

use std::sync::Mutex;
use worker_contract::LogLevel;

static LINES: Mutex<Vec<(LogLevel, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let level = match record.level() {
            log::Level::Error => LogLevel::Error,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Info => LogLevel::Info,
            log::Level::Debug | log::Level::Trace => LogLevel::Debug,
        };
        let text = record.args().to_string();
        if text.is_empty() {
            return;
        }
        // A poisoned lock only means another thread panicked mid-push; keep logging.
        let mut lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
        lines.extend(text.lines().map(|l| (level, l.to_string())));
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

/// Route whisper.cpp's and ggml's log into the capture buffer. Call once, first.
pub fn install() {
    // Fails only if a logger is already set, which in this binary means `install` ran.
    if log::set_logger(&CAPTURE).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
    whisper_rs::install_logging_hooks();
}

/// Take every line captured since the last call.
pub fn drain() -> Vec<(LogLevel, String)> {
    std::mem::take(&mut *LINES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Add one of the worker's own error lines beside whisper.cpp's (from code
/// whisper.cpp calls back, which has no session to write to).
pub fn note(line: &str) {
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((LogLevel::Error, line.to_string()));
}
