//! The worker's audio inputs, checked before whisper.cpp sees them: each
//! fixture is read once (a regular file, at most
//! [`speech_fixtures::MAX_WAV_BYTES`]), and its digest and audio
//! format (16 kHz mono 16-bit) are checked on the very bytes that are then
//! decoded. The long-form input is composed from slices read the same way.

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use worker_contract::{Conversion, FixtureInput, LongFormInput};

/// SHA-256 of a file, streamed, with its length.
pub fn sha256_file(path: &Path) -> anyhow::Result<(String, u64)> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((ggml_container::digest::hex(&hasher.finalize()), total))
}

/// One fixture's samples, ready for whisper.cpp (16 kHz mono f32 in [-1, 1)).
pub struct Audio {
    /// Fixture id from the arm spec.
    pub id: String,
    /// Mono samples at 16 kHz, scaled to [-1, 1).
    pub samples: Vec<f32>,
}

impl Audio {
    /// Audio length in milliseconds, from the sample count at 16 kHz (rounded down).
    pub fn duration_ms(&self) -> u64 {
        self.samples.len() as u64 * 1000 / 16_000
    }
}

/// Read a fixture once, verify its digest, then decode those same bytes.
pub fn load_fixture(fixture: &FixtureInput) -> anyhow::Result<Audio> {
    let path = &fixture.path;
    let bytes = run_dir::input::read(path, speech_fixtures::MAX_WAV_BYTES)
        .with_context(|| format!("fixture {} ({})", fixture.id, path.display()))?;
    let sha = ggml_container::digest::sha256_hex(&bytes);
    if sha != fixture.sha256 {
        bail!(
            "fixture {} ({}) has SHA-256 {sha}, the manifest says {}: the file changed",
            fixture.id,
            path.display(),
            fixture.sha256
        );
    }
    if let Some(conversion) = &fixture.conversion {
        return convert(fixture, conversion, &bytes);
    }
    let samples = speech_fixtures::wav::decode_i16(path, &bytes)
        .with_context(|| format!("fixture {} ({})", fixture.id, path.display()))?;
    if samples.is_empty() {
        bail!("fixture {} ({}) has no samples", fixture.id, path.display());
    }
    Ok(Audio {
        id: fixture.id.clone(),
        samples: speech_fixtures::wav::to_f32(&samples),
    })
}

/// A fixture of another layout (a user's corpus): decode, average the
/// channels and resample to 16 kHz, after checking the file is the layout
/// the harness found.
fn convert(fixture: &FixtureInput, conversion: &Conversion, bytes: &[u8]) -> anyhow::Result<Audio> {
    let path = &fixture.path;
    let (samples, format) = speech_fixtures::convert::to_whisper_input(path, bytes)
        .with_context(|| format!("fixture {}", fixture.id))?;
    let declared = speech_fixtures::convert::SourceFormat {
        sample_rate_hz: conversion.sample_rate_hz,
        channels: conversion.channels,
        bits_per_sample: conversion.bits_per_sample,
        float: conversion.float,
    };
    if format != declared {
        bail!(
            "fixture {} ({}) is {format}, the spec says {declared}",
            fixture.id,
            path.display()
        );
    }
    Ok(Audio {
        id: fixture.id.clone(),
        samples,
    })
}

/// Compose the long-form input from the verified slices (each read once,
/// digest and layout checked on the bytes decoded) and check it is the one
/// the harness described (same samples digest, computed on the samples used).
pub fn compose_long_form(long: &LongFormInput) -> anyhow::Result<Audio> {
    let id = long.id();
    let fixtures = speech_fixtures::Fixtures::open(&long.fixtures_dir)
        .with_context(|| format!("{id}: fixtures folder {}", long.fixtures_dir.display()))?;
    let recipe =
        speech_fixtures::LongFormRecipe::named(&long.recipe, &fixtures, Some(long.target_s))
            .with_context(|| format!("{id}: this worker knows no such recipe"))?;
    let composed = recipe
        .compose(&fixtures)
        .with_context(|| format!("{id}: composing from {}", long.fixtures_dir.display()))?;
    let sha = composed.samples_sha256();
    if sha != long.samples_sha256 {
        bail!(
            "{id} composed to samples SHA-256 {sha}, the spec says {}: the slices or the recipe changed",
            long.samples_sha256
        );
    }
    Ok(Audio {
        id,
        samples: composed.to_f32(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &Path, sha256: &str) -> FixtureInput {
        FixtureInput {
            id: "f".into(),
            category: "clean".into(),
            path: path.to_path_buf(),
            sha256: sha256.into(),
            reference: String::new(),
            conversion: None,
        }
    }

    #[test]
    fn a_fixture_is_decoded_from_the_bytes_whose_digest_matched() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f.wav");
        speech_fixtures::wav::write_i16(&path, &[0, 16384, -32768]).unwrap();
        let sha = ggml_container::digest::sha256_hex(&std::fs::read(&path).unwrap());
        let audio = load_fixture(&fixture(&path, &sha)).unwrap();
        assert_eq!(audio.samples, [0.0, 0.5, -1.0]);
        let err = load_fixture(&fixture(&path, &"0".repeat(64)))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("has SHA-256 {sha}, the manifest says 000")),
            "{err}"
        );
    }

    #[test]
    fn a_converted_fixture_is_checked_then_downmixed_and_resampled() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f.wav");
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 48_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&path, spec).unwrap();
        for _ in 0..48_000 {
            w.write_sample(8192i16).unwrap();
            w.write_sample(0i16).unwrap();
        }
        w.finalize().unwrap();
        let sha = ggml_container::digest::sha256_hex(&std::fs::read(&path).unwrap());
        let mut f = fixture(&path, &sha);
        let declared = Conversion {
            sample_rate_hz: 48_000,
            channels: 2,
            bits_per_sample: 16,
            float: false,
        };
        f.conversion = Some(declared);
        let audio = load_fixture(&f).unwrap();
        // One second at 16 kHz; the two channels average to 0.125.
        assert_eq!(audio.samples.len(), 16_000);
        assert!(
            (audio.samples[8000] - 0.125).abs() < 1e-3,
            "{}",
            audio.samples[8000]
        );
        // A file of another layout than the harness found is refused.
        f.conversion = Some(Conversion {
            sample_rate_hz: 44_100,
            ..declared
        });
        let err = format!("{:#}", load_fixture(&f).err().unwrap());
        assert!(
            err.contains("is 48000 Hz, 2 channels, 16-bit PCM, the spec says 44100 Hz"),
            "{err}"
        );
        // And its digest is checked first, as for any fixture.
        f.sha256 = "0".repeat(64);
        let err = format!("{:#}", load_fixture(&f).err().unwrap());
        assert!(err.contains("the manifest says 000"), "{err}");
    }

    #[test]
    fn a_fifo_or_an_oversized_fixture_is_refused_without_reading_it() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo.wav");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = format!("{:#}", load_fixture(&fixture(&fifo, "")).err().unwrap());
        assert!(err.contains("is a FIFO"), "{err}");
        let huge = tmp.path().join("huge.wav");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(speech_fixtures::MAX_WAV_BYTES + 1)
            .unwrap();
        let err = format!("{:#}", load_fixture(&fixture(&huge, "")).err().unwrap());
        assert!(
            err.contains("more than the 67108864 bytes memqual reads"),
            "{err}"
        );
    }
}
