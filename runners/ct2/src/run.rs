//! One CTranslate2 arm, phase by phase, as the whisper.cpp worker runs one:
//! `process_start` → inputs checked, model loaded from the checked bytes
//! (`model_loaded`) → `state_ready` and the runtime report (CTranslate2 keeps
//! no state between requests; its per-request buffers are the working
//! memory) → warmup on the first input (`warmup_done`) → measured requests
//! (`request_begin` / `request_end`, then a `result`) → idle (`idle_end`) →
//! the model dropped (`teardown_done`).

use crate::engine::{Engine, Settings};
use anyhow::Context;
use ct2_convert::dir::{CheckedDir, TINY_EN_FILES, validate};
use runners::session::WorkerSession;
use runners::whisper::transcript::{self, Specials};
use runners::whisper::{executable_digest, inputs, soak_deadline, soak_limit_reached};
use sampler::{Phase, clock};
use std::path::Path;
use worker_contract::{
    ArmSpec, Decoding, LogLevel, ModelIdentity, RequestResult, ResultBody, RuntimeReport, Topology,
    WhisperSpec,
};

/// Worker name sent in `hello` and used as the prefix of its stderr lines.
pub const WORKER_NAME: &str = "memqual-ct2";

/// The ct2rs release this worker is built against (it bundles CTranslate2
/// 4.x), as the lock file pins it.
pub const CT2RS_VERSION: &str = runners::locked::CT2RS.0;

/// What this build can do; an arm's `requires` must be a subset.
pub fn capabilities() -> Vec<&'static str> {
    let mut caps = vec![
        "ctranslate2",
        "decoding:greedy",
        "decoding:beam",
        "model_prevalidation:pinned_ct2_dir",
        "input:convert",
    ];
    if cfg!(feature = "cuda") {
        caps.push("backend:cuda");
    }
    caps
}

/// Refuse a GPU arm this build cannot run: CTranslate2 would otherwise
/// fail deep in its loader, or a CPU run would pass for a GPU one.
pub fn check_device(spec: &WhisperSpec) -> Result<(), worker_contract::capabilities::NotRunnable> {
    if spec.use_gpu && !cfg!(feature = "cuda") {
        return Err(worker_contract::capabilities::NotRunnable(
            "use_gpu = true needs a memqual-ct2 built with the cuda feature \
             (cargo build --release -p runners-ct2 --features cuda, with the CUDA toolkit); \
             this one computes on the CPU only"
                .into(),
        ));
    }
    Ok(())
}

/// The model directory, checked against its pins, and its files' bytes read
/// in the same pass: what CTranslate2 loads is what was checked.
struct CheckedModel {
    dir: CheckedDir,
    bytes: Vec<(String, Vec<u8>)>,
}

fn check_model(spec: &WhisperSpec) -> anyhow::Result<CheckedModel> {
    let path = &spec.model.path;
    let dir = validate(path, TINY_EN_FILES)
        .with_context(|| format!("model directory {}", path.display()))?;
    if let Some(expected) = &spec.model.sha256
        && *expected != dir.sha256()
    {
        anyhow::bail!(
            "model directory {}: its file set has SHA-256 {}, the arm expects {expected}",
            path.display(),
            dir.sha256()
        );
    }
    let mut bytes = Vec::with_capacity(dir.files.len());
    for f in &dir.files {
        let content = read_checked(&path.join(&f.name), &f.sha256)?;
        bytes.push((f.name.clone(), content));
    }
    Ok(CheckedModel { dir, bytes })
}

/// Read a file whole and require the digest it was checked with: a file
/// swapped between the check and this read is refused.
fn read_checked(path: &Path, sha256: &str) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut content = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut content)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let got = ggml_container::digest::sha256_hex(&content);
    if got != sha256 {
        anyhow::bail!(
            "{} changed after it was checked (SHA-256 {got}, checked {sha256})",
            path.display()
        );
    }
    Ok(content)
}

/// The model as the receipt's runtime section names it: the file set's
/// digest and size, and the shape `model.bin` declares. `model.bin`'s bytes
/// are parsed in place and handed back: a copy would add the whole file to
/// the memory measured before `model_loaded`.
fn identity(spec: &WhisperSpec, model: &mut CheckedModel) -> anyhow::Result<ModelIdentity> {
    let vocabulary = model
        .bytes
        .iter()
        .find(|(n, _)| n == "vocabulary.txt")
        .map_or(0, |(_, b)| {
            b.split(|&c| c == b'\n').filter(|l| !l.is_empty()).count()
        });
    let bin = model
        .bytes
        .iter_mut()
        .find(|(n, _)| n == "model.bin")
        .map(|(_, b)| b)
        .context("no model.bin")?;
    let parsed = ct2_convert::Ct2Model::from_bytes(std::mem::take(bin))?;
    let layers = |prefix: &str| {
        parsed
            .variables
            .iter()
            .filter_map(|v| {
                v.name
                    .strip_prefix(prefix)?
                    .split('/')
                    .next()?
                    .parse::<i32>()
                    .ok()
            })
            .max()
            .map_or(0, |m| m + 1)
    };
    let half = parsed
        .variables
        .iter()
        .any(|v| v.dtype == ct2_convert::Ct2Dtype::F16);
    let (n_audio_layer, n_text_layer) = (layers("encoder/layer_"), layers("decoder/layer_"));
    *bin = parsed.into_bytes();
    Ok(ModelIdentity {
        path: spec.model.path.display().to_string(),
        bytes: model.dir.bytes(),
        sha256: model.dir.sha256(),
        // GGML's ftype numbering: 1 = mostly F16, 0 = F32.
        ftype: i32::from(half),
        n_vocab: i32::try_from(vocabulary).unwrap_or(i32::MAX),
        n_audio_layer,
        n_text_layer,
    })
}

fn settings(spec: &WhisperSpec) -> Settings {
    Settings {
        compute_type: spec
            .ctranslate2
            .unwrap_or_default()
            .compute_type
            .name()
            .to_string(),
        intra_threads: spec.threads as usize,
        beam_size: match spec.decoding {
            Decoding::Greedy { .. } => 1,
            Decoding::Beam { beam_size } => beam_size as usize,
        },
        // Whisper's text context is 448 tokens; the prompt takes two.
        max_length: match spec.max_tokens {
            0 => 446,
            n => n as usize,
        },
        use_gpu: spec.use_gpu,
    }
}

/// Run the arm; returns the number of measured requests.
pub fn run(arm: &ArmSpec, spec: &WhisperSpec, session: &mut WorkerSession) -> anyhow::Result<u64> {
    // Its model stays loaded from start to teardown: a lifecycle would be
    // silently ignored, so it is refused (the harness refuses it first).
    if arm.lifecycle.is_some() {
        anyhow::bail!(
            "memqual-ct2 does not run a lifecycle (it never frees its model between requests)"
        );
    }
    session.mark(Phase::ProcessStart, None)?;
    // Inputs first: nothing reaches CTranslate2 unchecked.
    let mut model = check_model(spec)?;
    let audio = match &spec.long_form {
        Some(long) => vec![inputs::compose_long_form(long)?],
        None => spec
            .fixtures
            .iter()
            .map(inputs::load_fixture)
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let model_identity = identity(spec, &mut model)?;
    let settings = settings(spec);

    let t0 = clock::monotonic_ns();
    let files: Vec<(&str, &[u8])> = model
        .bytes
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let engine = Engine::load(&files, &settings)?;
    drop(files);
    drop(model.bytes);
    let load_ns = clock::monotonic_ns() - t0;
    session.log(
        LogLevel::Info,
        format!(
            "model: CTranslate2 loaded the checked bytes of {} files ({} bytes, set SHA-256 {}) \
             as {} in {:.1} ms",
            model.dir.files.len(),
            model.dir.bytes(),
            model.dir.sha256(),
            settings.compute_type,
            load_ns as f64 / 1e6
        ),
    )?;
    session.mark(Phase::ModelLoaded, None)?;

    let (worker_executable, worker_sha256) = executable_digest(WORKER_NAME);
    let report = RuntimeReport {
        runtime: "CTranslate2".into(),
        runtime_version: format!("CTranslate2 (bundled by ct2rs {CT2RS_VERSION})"),
        system_info: if settings.use_gpu {
            "CUDA device 0".to_string()
        } else {
            format!(
                "CPU, {} backend",
                if cfg!(target_os = "macos") {
                    "Accelerate"
                } else {
                    "ruy"
                }
            )
        },
        worker_executable,
        worker_sha256,
        model: model_identity,
        coreml: None,
        state_count: 0,
        initializer: spec.initializer,
        settings: serde_json::json!({
            "compute_type": settings.compute_type,
            "intra_threads": settings.intra_threads,
            "inter_threads": 1,
            "beam_size": settings.beam_size,
            "max_length": settings.max_length,
            "device": if settings.use_gpu { "cuda" } else { "cpu" },
            "features": "whisper log-mel (memqual), 80 x 3000 per 30 s window",
            "prompt": ["<|startoftranscript|>", "<|notimestamps|>"],
        }),
        topology: Topology::default(),
        load_ns,
        state_ns: 0,
        states: Vec::new(),
        external_encoder: None,
        build: Some(worker_contract::RuntimeBuild {
            source_crate: "ct2rs".into(),
            source_crate_version: CT2RS_VERSION.into(),
            source_checksum: runners::locked::CT2RS.1.into(),
            features: if cfg!(feature = "cuda") {
                vec!["cuda".into()]
            } else {
                Vec::new()
            },
            patches: Vec::new(),
            patch_set_digest: None,
            coreml_fallback_allowed: None,
        }),
    };
    session.mark(Phase::StateReady, None)?;
    session.runtime(report)?;

    let specials = Specials {
        eot: crate::engine::EOT as i32,
        // English-only vocabulary: `<|0.00|>` is 50363.
        beg: 50_363,
    };
    for i in 0..spec.warmup {
        let first = &audio[0];
        let t0 = clock::monotonic_ns();
        engine
            .transcribe(&first.samples)
            .with_context(|| format!("warmup request {i} on fixture {}", first.id))?;
        session.log(
            LogLevel::Info,
            format!(
                "warmup {i} on {}: {:.1} ms",
                first.id,
                (clock::monotonic_ns() - t0) as f64 / 1e6
            ),
        )?;
    }
    session.mark(Phase::WarmupDone, None)?;

    let mut request_id = 0u64;
    let deadline = soak_deadline(spec, clock::monotonic_ns());
    'requests: for repetition in 0..spec.repetitions {
        for clip in &audio {
            if soak_limit_reached(spec, request_id, deadline) {
                break 'requests;
            }
            session.mark(Phase::RequestBegin, Some(request_id))?;
            let t0 = clock::monotonic_ns();
            let raw = engine
                .transcribe(&clip.samples)
                .with_context(|| format!("request {request_id} on {}", clip.id))?;
            let latency_ns = clock::monotonic_ns() - t0;
            session.mark(Phase::RequestEnd, Some(request_id))?;
            let body = ResultBody::Transcription(Box::new(transcript::result(
                raw,
                &clip.id,
                repetition,
                clip.duration_ms(),
                specials,
            )));
            session.result(RequestResult {
                request_id,
                latency_ns,
                body,
                timing: None,
            })?;
            session.settle(request_id, arm.settle_ms)?;
            request_id += 1;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(spec.idle_ms));
    session.mark(Phase::IdleEnd, None)?;
    drop(engine);
    session.mark(Phase::TeardownDone, None)?;
    Ok(request_id)
}
