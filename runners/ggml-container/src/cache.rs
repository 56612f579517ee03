//! Where memqual keeps fetched wheels and built models: `$MEMQUAL_CACHE`, else
//! the user cache directory + `/memqual`; wheels in `wheels/`, models in
//! `models/ggml-<name>-f16.bin`. Shared by `memqual fixtures`, tests and benches.

use std::path::PathBuf;

/// The cache root, if one can be named on this system.
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("MEMQUAL_CACHE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("memqual")))
}

/// The path of model `name`'s F16 file under `cache`.
pub fn model_path(cache: &std::path::Path, name: &str) -> PathBuf {
    cache.join("models").join(format!("ggml-{name}-f16.bin"))
}

/// The cached F16 model `name` (e.g. `tiny.en`), if it is there.
pub fn cached_model(name: &str) -> Option<PathBuf> {
    Some(model_path(&cache_dir()?, name)).filter(|p| p.exists())
}

/// A cached wheel file, if it is there.
pub fn cached_wheel(file: &str) -> Option<PathBuf> {
    Some(cache_dir()?.join("wheels").join(file)).filter(|p| p.exists())
}
