//! The worker's inputs, checked before whisper.cpp sees them: the model's
//! digest and the fixtures' digests and audio format (16 kHz mono 16-bit,
//! read by the fixtures crate).

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use worker_contract::{FixtureInput, LongFormInput};

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
    let digest = hasher.finalize();
    Ok((digest.iter().map(|b| format!("{b:02x}")).collect(), total))
}

/// One fixture's samples, ready for whisper.cpp (16 kHz mono f32 in [-1, 1)).
pub struct Audio {
    pub id: String,
    pub samples: Vec<f32>,
}

impl Audio {
    pub fn duration_ms(&self) -> u64 {
        self.samples.len() as u64 * 1000 / 16_000
    }
}

/// Verify a fixture's digest and format, then decode it.
pub fn load_fixture(fixture: &FixtureInput) -> anyhow::Result<Audio> {
    let path = &fixture.path;
    let (sha, _) = sha256_file(path).with_context(|| format!("fixture {}", fixture.id))?;
    if sha != fixture.sha256 {
        bail!(
            "fixture {} ({}) has SHA-256 {sha}, the manifest says {}: the file changed",
            fixture.id,
            path.display(),
            fixture.sha256
        );
    }
    let samples = speech_fixtures::wav::read_f32(path)
        .with_context(|| format!("fixture {} ({})", fixture.id, path.display()))?;
    if samples.is_empty() {
        bail!("fixture {} ({}) has no samples", fixture.id, path.display());
    }
    Ok(Audio {
        id: fixture.id.clone(),
        samples,
    })
}

/// Compose the long-form input from the verified slices and check it is
/// the one the harness described (same samples digest).
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
