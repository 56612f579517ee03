//! The protocol loader on arbitrary text: TOML parsing, parameter
//! expansion, every range check and cross-reference, against the real
//! fixture catalog (the committed manifest) and the real model cache
//! (names resolve to paths; nothing is built or read), then the soak
//! preparation `memqual soak` applies to a loaded protocol.
//!
//! A loader error is a correct answer; a panic, a hang or unbounded memory
//! is a finding.

#![no_main]

use harness::soak;
use libfuzzer_sys::fuzz_target;
use protocol::ParseContext;
use protocol::whisper_arm::FixtureCatalog;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The RAM calibration arms are checked against: fixed (8 GiB), so that a
/// finding reproduces on any machine.
const RAM: u64 = 8 << 30;

fn fixtures() -> &'static FixtureCatalog {
    static CATALOG: OnceLock<FixtureCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        harness::catalogs::fixture_catalog()
            .unwrap_or_else(|e| panic!("the committed speech fixtures manifest must load: {e:#}"))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = ParseContext {
        overrides: BTreeMap::new(),
        base_dir: PathBuf::from("."),
        fixtures: fixtures(),
        models: &harness::catalogs::ModelCache,
        physical_memory: Some(RAM),
    };
    let Ok(mut loaded) = protocol::parse("fuzz.toml", text, &ctx) else {
        return;
    };
    let decl = loaded.soak.clone().unwrap_or_default();
    let _ = soak::prepare(&mut loaded, &decl, soak::Length::AsDeclared, Some(RAM));
});
