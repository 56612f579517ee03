//! The catalogs protocols name things from: speech fixtures (the committed
//! manifest) and named models (memqual's model cache).

use crate::fixtures::ModelName;
use crate::whisper_arm::{FixtureCatalog, ModelCatalog};
use anyhow::Context;
use clap::ValueEnum;
use std::path::PathBuf;
use worker_contract::FixtureInput;

/// Every slice of the fixtures manifest (`MEMQUAL_FIXTURES` or the committed folder).
pub fn fixture_catalog() -> anyhow::Result<FixtureCatalog> {
    let fixtures = speech_fixtures::Fixtures::open_default().with_context(|| {
        format!(
            "cannot open the speech fixtures in {} (set MEMQUAL_FIXTURES to a folder \
                 holding audio/manifest.toml, or unset it to use the fixtures built into memqual)",
            speech_fixtures::audio_dir().display()
        )
    })?;
    let slices = fixtures
        .slices()
        .iter()
        .map(|s| FixtureInput {
            id: s.id.clone(),
            category: s.category.as_str().to_string(),
            path: fixtures.path_of(s),
            sha256: s.sha256.clone(),
            reference: s.reference.clone(),
            conversion: None,
        })
        .collect();
    Ok(FixtureCatalog {
        slices,
        dir: Some(fixtures.dir.clone()),
    })
}

/// Named models in memqual's cache.
pub struct ModelCache;

impl ModelCatalog for ModelCache {
    fn locate(&self, name: &str) -> Option<(PathBuf, String)> {
        let cache = crate::fixtures::cache_dir().ok()?;
        if name == crate::ct2_fixture::TINY_EN_CT2 {
            use ct2_convert::dir::{TINY_EN_FILES, pinned_set_sha256};
            return Some((
                crate::ct2_fixture::model_dir(&cache),
                pinned_set_sha256(TINY_EN_FILES),
            ));
        }
        let model = ModelName::parse(name)?;
        Some((
            ggml_container::cache::model_path(&cache, model.name()),
            model.sha256().to_string(),
        ))
    }

    fn source(&self, name: &str) -> Option<worker_contract::ModelSource> {
        let wheels = if name == crate::ct2_fixture::TINY_EN_CT2 {
            crate::ct2_fixture::source_wheels()
        } else {
            ModelName::parse(name)?.source_wheels()
        };
        Some(worker_contract::ModelSource::PinnedWheels {
            model: name.to_string(),
            wheels,
        })
    }

    fn names(&self) -> Vec<String> {
        ModelName::value_variants()
            .iter()
            .filter_map(|m| m.to_possible_value().map(|v| v.get_name().to_string()))
            .chain([crate::ct2_fixture::TINY_EN_CT2.to_string()])
            .collect()
    }
}
