//! Everything `memqual` prints goes through here: results to stdout,
//! progress and warnings to stderr. A closed pipe (`memqual … | head`) or a
//! full disk never panics the harness in the middle of a run: output that
//! cannot be written is dropped, and the run's files are what count.

use crate::exit::{Failure, harness};
use anyhow::Context;
use std::io::Write;

/// Write to stdout; errors (a closed pipe) are ignored.
pub fn out(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stdout().lock().write_fmt(args);
}

/// A line to stdout; errors are ignored.
pub fn outln(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"));
}

/// A line to stderr; errors are ignored.
pub fn note(args: std::fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `value` as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .context("serializing the summary")
        .map_err(harness)?;
    outln(format_args!("{text}"));
    Ok(())
}

/// `print!` that never panics.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::console::out(format_args!($($arg)*)) };
}

/// `println!` that never panics.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => { $crate::console::outln(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => { $crate::console::note(format_args!($($arg)*)) };
}
