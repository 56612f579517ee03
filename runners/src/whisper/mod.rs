//! The whisper.cpp worker (`memqual-whisper`): one arm of real inference.
//!
//! Phases, each closed by a marker: `process_start` → model load
//! (`model_loaded`) → working state plus extras and the Core ML sidecar
//! (`state_ready`, then one `runtime` message) → warmup requests on the first
//! fixture (`warmup_done`) → measured requests (`request_begin` /
//! `request_end` around the `whisper_full` call, then a `result`) → idle
//! (`idle_end`) → explicit teardown of states and context (`teardown_done`).
//!
//! Every input is checked before whisper.cpp sees it: the spec, the required
//! capabilities, the model (a strict parse of the whole GGML container and its
//! digest) and the fixtures' digests and format.

pub mod engine;
pub mod inputs;
pub mod logcapture;
pub mod transcript;

use crate::session::WorkerSession;
use anyhow::{Context, bail};
use engine::{Engine, RunSettings};
use sampler::{Phase, clock};
use std::path::{Path, PathBuf};
use worker_contract::{
    ArmSpec, CoremlIdentity, Encoder, LogLevel, ModelIdentity, ModelLayout, RequestResult,
    ResultBody, RuntimeReport, Topology, WhisperSpec,
};

pub const WORKER_NAME: &str = "memqual-whisper";

/// What this build can do. An arm's `requires` must be a subset.
pub fn capabilities() -> Vec<&'static str> {
    let mut caps = vec![
        "whisper.cpp",
        "initializer:no_state",
        "initializer:default",
        "extra_states",
        "decoding:greedy",
        "decoding:beam",
        "encoder:native",
        "model_prevalidation:strict_ggml",
    ];
    if cfg!(feature = "coreml") {
        caps.push("encoder:coreml");
    }
    if cfg!(feature = "metal") {
        caps.push("backend:metal");
    }
    if cfg!(feature = "cuda") {
        caps.push("backend:cuda");
    }
    caps
}

/// An arm this worker must not run; the binary exits with
/// [`worker_contract::EXIT_NOT_RUNNABLE`].
#[derive(Debug, thiserror::Error)]
#[error("not runnable: {0}")]
pub struct NotRunnable(pub String);

/// Refuse an arm that needs a capability this build lacks.
pub fn check_runnable(spec: &WhisperSpec) -> Result<(), NotRunnable> {
    let caps = capabilities();
    let missing: Vec<&str> = spec
        .requires
        .iter()
        .map(String::as_str)
        .filter(|r| !caps.contains(r))
        .collect();
    if !missing.is_empty() {
        return Err(NotRunnable(format!(
            "this {WORKER_NAME} lacks {} (it has: {})",
            missing.join(", "),
            caps.join(", ")
        )));
    }
    if spec.encoder == Encoder::Coreml && !caps.contains(&"encoder:coreml") {
        return Err(NotRunnable(format!(
            "encoder = \"coreml\" needs a {WORKER_NAME} built with the `coreml` feature (macOS)"
        )));
    }
    Ok(())
}

/// Forward captured whisper.cpp lines to the harness and keep them for the topology.
fn forward_log(session: &mut WorkerSession, kept: &mut Vec<String>) -> anyhow::Result<()> {
    for (level, line) in logcapture::drain() {
        session.log(level, format!("whisper.cpp: {line}"))?;
        kept.push(line);
    }
    Ok(())
}

/// The model path whisper.cpp is given. With an explicit Core ML sidecar the
/// model and the sidecar are linked side by side in scratch, named so that
/// whisper.cpp's own naming rule finds that sidecar.
fn model_path_for_runtime(spec: &WhisperSpec, scratch: &Path) -> anyhow::Result<PathBuf> {
    let Some(sidecar) = &spec.model.coreml_sidecar else {
        return Ok(spec.model.path.clone());
    };
    if !sidecar.is_dir() {
        bail!(
            "Core ML sidecar {} is not a directory (a compiled `.mlmodelc` is one)",
            sidecar.display()
        );
    }
    let dir = scratch.join("coreml");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let model = std::fs::canonicalize(&spec.model.path)
        .with_context(|| format!("model {}", spec.model.path.display()))?;
    let sidecar = std::fs::canonicalize(sidecar)?;
    let linked_model = dir.join("model.bin");
    let linked_sidecar = dir.join("model-encoder.mlmodelc");
    std::os::unix::fs::symlink(&model, &linked_model)
        .with_context(|| format!("linking {}", linked_model.display()))?;
    std::os::unix::fs::symlink(&sidecar, &linked_sidecar)
        .with_context(|| format!("linking {}", linked_sidecar.display()))?;
    Ok(linked_model)
}

/// Parse the model strictly (every record, every payload length, no trailing
/// bytes) before whisper.cpp sees it: its loader accepts truncated and padded
/// files and aborts the process on some malformed records.
fn prevalidate_model(spec: &WhisperSpec) -> anyhow::Result<ModelIdentity> {
    let path = &spec.model.path;
    if !path.is_file() {
        bail!("model {}: cannot open: no such file", path.display());
    }
    if !spec.model.prevalidate {
        // Negative controls only: a plain digest and whatever header there is.
        use std::io::Read;
        let (sha256, bytes) = inputs::sha256_file(path)?;
        let mut head = Vec::with_capacity(48);
        std::fs::File::open(path)
            .and_then(|f| f.take(48).read_to_end(&mut head))
            .with_context(|| format!("model {}", path.display()))?;
        let field = |i: usize| {
            head.get(4 * i..4 * i + 4)
                .map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        return Ok(ModelIdentity {
            path: path.display().to_string(),
            bytes,
            sha256,
            n_vocab: field(1),
            n_audio_layer: field(5),
            n_text_layer: field(9),
            ftype: field(11),
        });
    }
    let expect = match spec.model.layout {
        ModelLayout::Full => ggml_container::Expect::Full,
        ModelLayout::DecoderOnly => ggml_container::Expect::DecoderOnly,
    };
    let inventory = ggml_container::inspect(path, expect)
        .map_err(|e| anyhow::anyhow!("model {} rejected before loading: {e}", path.display()))?;
    if let Some(expected) = &spec.model.sha256
        && &inventory.file_sha256 != expected
    {
        bail!(
            "model {} has SHA-256 {}, the arm expects {expected}",
            path.display(),
            inventory.file_sha256
        );
    }
    let h = &inventory.hparams;
    Ok(ModelIdentity {
        path: path.display().to_string(),
        bytes: inventory.file_len,
        sha256: inventory.file_sha256.clone(),
        ftype: h.ftype,
        n_vocab: h.n_vocab,
        n_audio_layer: h.n_audio_layer,
        n_text_layer: h.n_text_layer,
    })
}

/// The sidecar whisper.cpp actually opened (its log names it), digested as a tree.
fn coreml_identity(topology: &Topology) -> anyhow::Result<CoremlIdentity> {
    let logged = topology
        .states
        .first()
        .and_then(|s| s.coreml_path.clone())
        .context("whisper.cpp did not log which Core ML model it loaded")?;
    let resolved =
        std::fs::canonicalize(&logged).with_context(|| format!("Core ML model {logged}"))?;
    let tree = sampler::captures::tree_digest(&resolved)
        .with_context(|| format!("digesting the Core ML model {}", resolved.display()))?;
    Ok(CoremlIdentity {
        path: logged,
        resolved_path: resolved.display().to_string(),
        compute_units: "MLComputeUnitsAll (whisper.cpp default)".into(),
        tree_sha256: tree.sha256,
        files: tree.files,
        bytes: tree.file_bytes,
    })
}

fn executable_digest() -> (String, Option<String>) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(WORKER_NAME));
    let digest = inputs::sha256_file(&exe).ok().map(|(d, _)| d);
    (exe.display().to_string(), digest)
}

/// Run the arm; returns the number of measured requests.
pub fn run(arm: &ArmSpec, spec: &WhisperSpec, session: &mut WorkerSession) -> anyhow::Result<u64> {
    let mut log_lines = Vec::new();
    session.mark(Phase::ProcessStart, None)?;

    // Inputs first: nothing reaches whisper.cpp unchecked.
    let identity = prevalidate_model(spec)?;
    let audio = match &spec.long_form {
        Some(long) => vec![inputs::compose_long_form(long)?],
        None => spec
            .fixtures
            .iter()
            .map(inputs::load_fixture)
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let runtime_model = model_path_for_runtime(spec, &arm.scratch_dir)?;

    let settings = RunSettings {
        threads: spec.threads,
        decoding: spec.decoding,
        language: spec.language.clone(),
        no_timestamps: spec.no_timestamps,
        audio_ctx: spec.audio_ctx,
        max_tokens: spec.max_tokens,
        temperature_fallback: spec.temperature_fallback,
        use_gpu: spec.use_gpu,
        flash_attn: spec.flash_attn,
    };
    let settings_json = serde_json::to_value(&settings)?;
    let t0 = clock::monotonic_ns();
    let loaded = Engine::load(&runtime_model, spec.initializer, settings);
    let load_ns = clock::monotonic_ns() - t0;
    forward_log(session, &mut log_lines)?;
    let mut engine = loaded?;
    session.mark(Phase::ModelLoaded, None)?;

    let t0 = clock::monotonic_ns();
    let created = engine.create_states(spec.initializer, spec.extra_states);
    let state_ns = clock::monotonic_ns() - t0;
    forward_log(session, &mut log_lines)?;
    created?;
    let topology = Topology::from_log(log_lines.iter().map(String::as_str));
    let coreml = if spec.encoder == Encoder::Coreml {
        topology
            .coreml_engaged()
            .map_err(|e| anyhow::anyhow!("Core ML requested but not engaged: {e}"))?;
        Some(coreml_identity(&topology)?)
    } else {
        None
    };
    let (worker_executable, worker_sha256) = executable_digest();
    let report = RuntimeReport {
        runtime: "whisper.cpp".into(),
        runtime_version: engine::runtime_version(),
        system_info: engine::system_info(),
        worker_executable,
        worker_sha256,
        model: identity,
        coreml,
        state_count: engine.state_count(spec.initializer),
        initializer: spec.initializer,
        settings: settings_json,
        topology,
        load_ns,
        state_ns,
    };
    session.mark(Phase::StateReady, None)?;
    session.runtime(report)?;

    let specials = transcript::Specials {
        eot: engine.token_eot(),
        beg: engine.token_beg(),
    };
    for i in 0..spec.warmup {
        let first = &audio[0];
        let t0 = clock::monotonic_ns();
        engine
            .transcribe(&first.samples)
            .with_context(|| format!("warmup request {i} on fixture {}", first.id))?;
        let took = clock::monotonic_ns() - t0;
        forward_log(session, &mut log_lines)?;
        session.log(
            LogLevel::Info,
            format!("warmup {i} on {}: {:.1} ms", first.id, took as f64 / 1e6),
        )?;
    }
    session.mark(Phase::WarmupDone, None)?;

    let mut request_id = 0u64;
    let deadline = spec
        .max_duration_s
        .map(|s| clock::monotonic_ns().saturating_add(s.saturating_mul(1_000_000_000)));
    'requests: for repetition in 0..spec.repetitions {
        for clip in &audio {
            // Soak limits: a request count, or a duration.
            if spec.max_requests.is_some_and(|n| request_id >= n)
                || deadline.is_some_and(|d| clock::monotonic_ns() >= d)
            {
                break 'requests;
            }
            session.mark(Phase::RequestBegin, Some(request_id))?;
            let t0 = clock::monotonic_ns();
            let raw = engine.transcribe(&clip.samples);
            let latency_ns = clock::monotonic_ns() - t0;
            let raw = raw.with_context(|| format!("request {request_id} on {}", clip.id))?;
            session.mark(Phase::RequestEnd, Some(request_id))?;
            let body = transcript::result(raw, &clip.id, repetition, clip.duration_ms(), specials);
            session.result(RequestResult {
                request_id,
                latency_ns,
                body: ResultBody::Transcription(body),
            })?;
            forward_log(session, &mut log_lines)?;
            session.settle(request_id, arm.settle_ms)?;
            request_id += 1;
        }
    }

    std::thread::sleep(std::time::Duration::from_millis(spec.idle_ms));
    session.mark(Phase::IdleEnd, None)?;
    engine.teardown();
    forward_log(session, &mut log_lines)?;
    session.mark(Phase::TeardownDone, None)?;
    Ok(request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coreml_identity_digests_the_tree_whisper_cpp_opened_through_links() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("real-encoder.mlmodelc");
        std::fs::create_dir_all(tree.join("weights")).unwrap();
        std::fs::write(tree.join("model.mil"), b"program").unwrap();
        std::fs::write(tree.join("weights/weight.bin"), [7u8; 100]).unwrap();
        let link = tmp.path().join("model-encoder.mlmodelc");
        std::os::unix::fs::symlink(&tree, &link).unwrap();
        let log = format!(
            "whisper_init_state: loading Core ML model from '{}'\nwhisper_init_state: Core ML model loaded",
            link.display()
        );
        let id = coreml_identity(&Topology::from_log(log.lines())).unwrap();
        assert_eq!(id.path, link.display().to_string());
        assert_eq!(
            id.resolved_path,
            std::fs::canonicalize(&tree).unwrap().display().to_string()
        );
        assert_eq!((id.files, id.bytes), (2, 107));
        let direct = sampler::captures::tree_digest(&tree).unwrap();
        assert_eq!(id.tree_sha256, direct.sha256);
    }

    #[test]
    fn requires_beyond_the_build_make_the_arm_not_runnable() {
        let spec: WhisperSpec = serde_json::from_value(serde_json::json!({
            "model": {"path": "m.bin", "sha256": null},
            "threads": 1, "decoding": {"strategy": "greedy"}, "language": "en",
            "no_timestamps": true, "flash_attn": false, "use_gpu": false, "audio_ctx": 0,
            "max_tokens": 0,
            "initializer": "no_state", "extra_states": 0, "warmup": 0,
            "fixtures": [], "repetitions": 1, "idle_ms": 0, "encoder": "native",
            "requires": ["loader:external_encoder_only", "extra_states"]
        }))
        .unwrap();
        let err = check_runnable(&spec).unwrap_err().to_string();
        assert!(err.starts_with("not runnable: "), "{err}");
        assert!(
            err.contains("lacks loader:external_encoder_only ("),
            "{err}"
        );
        assert!(!err.contains("lacks loader:external_encoder_only, extra_states"));
    }
}
