//! The catalogs protocols name things from: speech fixtures (the committed
//! manifest) and named models (memqual's model cache).

use crate::fixtures::ModelName;
use anyhow::Context;
use clap::ValueEnum;
use protocol::whisper_arm::{FixtureCatalog, ModelCatalog};
use std::path::PathBuf;

/// Every slice of the fixtures manifest (`MEMQUAL_FIXTURES` or the committed folder).
pub fn fixture_catalog() -> anyhow::Result<FixtureCatalog> {
    let fixtures = speech_fixtures::Fixtures::open_default().with_context(|| {
        format!(
            "cannot open the speech fixtures in {} (set MEMQUAL_FIXTURES to a folder \
                 holding audio/manifest.toml, or unset it to use the fixtures built into memqual)",
            speech_fixtures::audio_dir().display()
        )
    })?;
    Ok(FixtureCatalog::of(&fixtures))
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

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::{ParseContext, load};
    use std::collections::BTreeMap;

    #[test]
    fn every_committed_protocol_loads_with_the_real_catalogs() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../protocols");
        let fixtures = fixture_catalog().unwrap();
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let mut ctx = ParseContext {
                overrides: BTreeMap::new(),
                base_dir: PathBuf::new(),
                fixtures: &fixtures,
                models: &ModelCache,
                physical_memory: crate::host::physical_memory_bytes(),
            };
            load(&path, &mut ctx).unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
        assert!(seen >= 10, "only {seen} protocols in {dir}");
    }
}
