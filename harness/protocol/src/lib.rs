//! The memqual protocol file, whole: every key's type, default, bound, the
//! span an error about it points at, its JSON Schema entry and its
//! documentation live in this crate, next to the check that refuses it.
//!
//! Contract: [`parse`] and [`load`] take TOML text (strict: an unknown key is
//! an error) and return a [`LoadedProtocol`] whose every number is in range
//! and whose every arm resolved to a worker spec, or a [`ProtocolError`]
//! located at `file:line:col` and naming the key. Nothing here starts a
//! process, reads a model or writes a file; the harness runs what this
//! crate accepted. [`json_schema`] is generated from the same types, so the
//! committed `protocols/protocol.schema.json` cannot drift from the loader.

#![warn(missing_docs)]

mod document;

pub mod byte_size;
pub mod census;
pub mod limits;
pub mod marker_filter;
pub mod params;
pub mod realtime_arm;
pub mod sampling;
pub mod snapshots;
pub mod spans;
pub mod user_corpus;
pub mod whisper_arm;

pub use document::*;

/// serde's default for the `true`-by-default switches.
fn yes() -> bool {
    true
}

/// The committed speech fixtures as a catalog (tests only: memqual's own
/// loader adds the context a user needs when they cannot be opened).
#[cfg(test)]
pub(crate) fn committed_fixtures() -> whisper_arm::FixtureCatalog {
    let fixtures = speech_fixtures::Fixtures::open_default().expect("the committed fixtures open");
    whisper_arm::FixtureCatalog::of(&fixtures)
}
