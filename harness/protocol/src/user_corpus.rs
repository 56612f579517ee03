//! `[arm.whisper] fixture_set`: a user's own corpus as the fixtures an arm
//! can name. Every file is checked against the set's manifest here (digest,
//! layout, frame count) before a run directory exists; files that are not
//! 16 kHz mono 16-bit are marked for conversion by the worker, or refused
//! when the arm asks for `strict_input`.

use speech_fixtures::fixture_set::FixtureSet;
use std::path::Path;
use worker_contract::{Conversion, FixtureInput};

/// The fixtures of the set whose manifest is `manifest`, each file checked.
pub fn fixtures(manifest: &Path, strict_input: bool) -> Result<Vec<FixtureInput>, String> {
    let set = FixtureSet::open(manifest).map_err(|e| format!("fixture_set: {e}"))?;
    let mut slices = Vec::with_capacity(set.manifest.fixtures.len());
    for entry in &set.manifest.fixtures {
        let path = set.path_of(entry);
        let bytes = set
            .check_entry(entry)
            .map_err(|e| format!("fixture_set `{}`: {e}", entry.id))?;
        let format = entry.format();
        // The plain 44-byte 16 kHz mono layout is read as it stands;
        // anything else goes through the worker's decoder and resampler.
        let plain =
            format.is_whisper_native() && speech_fixtures::wav::check_layout(&path, &bytes).is_ok();
        let conversion = if plain {
            None
        } else if strict_input {
            return Err(format!(
                "fixture_set `{}` ({}) is {format}, and strict_input = true accepts only \
                 16 kHz mono 16-bit PCM WAV with a plain header: convert the file (e.g. \
                 `sox IN -r 16000 -c 1 -b 16 OUT.wav`) and write the manifest again, or drop \
                 strict_input to let memqual resample it",
                entry.id,
                path.display()
            ));
        } else {
            Some(Conversion {
                sample_rate_hz: format.sample_rate_hz,
                channels: format.channels,
                bits_per_sample: format.bits_per_sample,
                float: format.float,
            })
        };
        slices.push(FixtureInput {
            id: entry.id.clone(),
            category: entry.category.clone(),
            path,
            sha256: entry.sha256.clone(),
            reference: entry.reference.clone(),
            conversion,
        });
    }
    Ok(slices)
}
