//! The whisper.cpp worker (`memqual-whisper`): one arm of real inference.
//!
//! Phases, each closed by a marker: `process_start` → model load
//! (`model_loaded`) → working state plus extras and the Core ML sidecar
//! (`state_ready`, then one `runtime` message) → warmup requests on the first
//! fixture (`warmup_done`) → measured requests (`request_begin` /
//! `request_end` around the `whisper_full` call, then a `result`) → idle
//! (`idle_end`) → explicit teardown of states and context (`teardown_done`).
//! Under an idle policy ([`residency`]), and after every cycle of a
//! lifecycle soak (the spec's `lifecycle`), `release` markers come between
//! requests and a `reload` inside the request that follows; in real-time
//! mode ([`delivery`]) a request's audio arrives in chunks ([`request`]).
//!
//! Every input is checked before whisper.cpp sees it, and what is checked is
//! what is used: the spec, the required capabilities, the model (opened once;
//! a strict parse of the whole GGML container and its digest from that open
//! file, which whisper.cpp then reads through the worker's loader, hashed
//! again as it is consumed — see [`model`] and [`loader`]), the fixtures
//! (each read once, digested and decoded from the same bytes) and the Core
//! ML sidecar ([`coreml`]).

pub mod cancel;
pub mod coreml;
pub mod delivery;
pub mod engine;
#[cfg(feature = "whisper-patch")]
pub mod external_encoder;
pub mod gpu;
pub mod inputs;
pub mod loader;
pub mod logcapture;
pub mod model;
#[cfg(feature = "whisper-patch")]
pub mod patch;
#[cfg(feature = "whisper-patch")]
mod patched;
pub mod placement;
pub mod request;
pub mod residency;
pub mod transcript;

use crate::session::WorkerSession;
use anyhow::Context;
use engine::{Engine, RunSettings};
use sampler::{Phase, clock};
use std::path::PathBuf;
use worker_contract::{
    ArmSpec, CancelledRequest, Encoder, LogLevel, RequestResult, ResultBody, RuntimeReport,
    Topology, WhisperSpec,
};

/// Worker name sent in `hello` and used as the prefix of its stderr lines.
#[cfg(not(feature = "whisper-patch"))]
pub const WORKER_NAME: &str = "memqual-whisper";
/// Worker name sent in `hello` and used as the prefix of its stderr lines.
#[cfg(feature = "whisper-patch")]
pub const WORKER_NAME: &str = patch::WORKER_NAME;

/// The runtime this build serves: stock whisper.cpp, or memqual's patched one.
const RUNTIME: worker_contract::Runtime = if cfg!(feature = "whisper-patch") {
    worker_contract::Runtime::WhisperCppPatched
} else {
    worker_contract::Runtime::WhisperCpp
};

/// The whole worker: `--capabilities`, the patched build's
/// `--external-encoder` process, or one arm read from the harness.
pub fn worker_main() -> std::process::ExitCode {
    use crate::last_words::{fail, finish, open_session, print_capabilities};
    use worker_contract::{EXIT_NOT_RUNNABLE, WorkerSpec};
    let first = std::env::args().nth(1);
    // A library patched with another set than this worker's says nothing true.
    #[cfg(feature = "whisper-patch")]
    if let Err(e) = patch::check_linked() {
        eprintln!("{WORKER_NAME}: {e}");
        return std::process::ExitCode::from(2);
    }
    if first.as_deref() == Some("--capabilities") {
        #[allow(unused_mut)]
        let mut json = serde_json::json!({
            "worker": WORKER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "whisper_cpp": engine::runtime_version(),
            "features": features(),
            "capabilities": capabilities(),
            // What ggml finds on this host: a GPU build lists its GPUs only
            // where the driver sees them.
            "devices": gpu::backend_devices(),
        });
        // What the patch set adds, and which set it is.
        #[cfg(feature = "whisper-patch")]
        {
            json["whisper_cpp_patch"] = serde_json::json!({
                "digest": patch::linked_digest(),
                "adds": patch::linked_capabilities(),
            });
        }
        return print_capabilities(WORKER_NAME, &json);
    }
    #[cfg(feature = "whisper-patch")]
    if first.as_deref() == Some("--external-encoder") {
        logcapture::install();
        return std::process::ExitCode::from(external_encoder::serve());
    }
    // Before anything else, so whisper.cpp's first line is captured too.
    logcapture::install();
    let (mut session, spec) = match open_session(WORKER_NAME, &capabilities()) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let WorkerSpec::Whisper(ws) = &spec.worker else {
        let message = format!(
            "this worker runs whisper arms, not {:?}",
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    };
    if let Err(e) = ws.validate() {
        return fail(
            WORKER_NAME,
            &mut session,
            &format!("invalid whisper spec: {e}"),
            2,
        );
    }
    if ws.runtime != RUNTIME {
        let message = format!(
            "{WORKER_NAME} runs runtime {RUNTIME:?}, not {:?} (that is {})",
            ws.runtime,
            spec.worker.executable_name()
        );
        return fail(WORKER_NAME, &mut session, &message, 2);
    }
    if let Err(e) = check_runnable(ws) {
        return fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        );
    }
    if ws.use_gpu
        && let Some(backend) = gpu::gpu_backend()
        && let Err(e) = gpu::check_gpu_present(WORKER_NAME, backend, &gpu::backend_devices())
    {
        return fail(
            WORKER_NAME,
            &mut session,
            &e.to_string(),
            EXIT_NOT_RUNNABLE as u8,
        );
    }
    if let Some(l) = spec.lifecycle {
        let refused = match l.validate() {
            Err(e) => Some(format!("invalid lifecycle: {e}")),
            Ok(()) if !ws.idle_policy.is_resident() => Some(format!(
                "a lifecycle frees and loads the context itself; idle_policy {} would do it too",
                ws.idle_policy.name()
            )),
            Ok(()) => None,
        };
        if let Some(message) = refused {
            return fail(WORKER_NAME, &mut session, &message, 2);
        }
    }
    let result = run(&spec, ws, &mut session);
    if result.is_err() {
        // whisper.cpp's last lines say why (a loader refusal, an external
        // encoder's defect): they go out before the error does.
        let _ = forward_log(&mut session, &mut Vec::new());
    }
    finish(WORKER_NAME, session, result)
}

use worker_contract::capabilities::{NotRunnable, capabilities_of, check_runnable_with};

/// What this build can do. An arm's `requires` must be a subset.
pub fn capabilities() -> Vec<&'static str> {
    #[cfg(feature = "whisper-patch")]
    let linked = patch::linked_capabilities();
    #[cfg(not(feature = "whisper-patch"))]
    let linked: &[&str] = &[];
    capabilities_of(&features(), linked)
}

/// The accelerated backends this build has (cargo features `metal`,
/// `coreml`, `cuda`); empty for the CPU-only default.
pub fn features() -> Vec<&'static str> {
    [
        ("metal", cfg!(feature = "metal")),
        ("coreml", cfg!(feature = "coreml")),
        ("cuda", cfg!(feature = "cuda")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// The monotonic time after which a soak starts no measured request
/// (`max_duration_s` from `now_ns`, the end of warmup).
pub fn soak_deadline(spec: &WhisperSpec, now_ns: u64) -> Option<u64> {
    spec.max_duration_s
        .map(|s| now_ns.saturating_add(s.saturating_mul(1_000_000_000)))
}

/// Whether a soak's limits (a request count or the deadline) stop the arm
/// before measured request `request_id`.
pub fn soak_limit_reached(spec: &WhisperSpec, request_id: u64, deadline: Option<u64>) -> bool {
    spec.max_requests.is_some_and(|n| request_id >= n)
        || deadline.is_some_and(|d| clock::monotonic_ns() >= d)
}

/// Refuse an arm that needs a capability this build lacks.
pub fn check_runnable(spec: &WhisperSpec) -> Result<(), NotRunnable> {
    check_runnable_with(WORKER_NAME, spec, &capabilities())
}

/// This build's runtime identity (runners/build.rs read the lock file and
/// the patch set; the digest is the linked library's own).
pub fn runtime_build() -> worker_contract::RuntimeBuild {
    #[cfg(feature = "whisper-patch")]
    let (patches, digest) = (
        env!("MEMQUAL_WHISPER_PATCH_FILES")
            .split(';')
            .filter_map(|f| f.split_once('='))
            .map(|(name, sha256)| worker_contract::PatchFile {
                name: name.into(),
                sha256: sha256.into(),
            })
            .collect(),
        Some(patch::linked_digest().to_string()),
    );
    #[cfg(not(feature = "whisper-patch"))]
    let (patches, digest) = (Vec::new(), None);
    worker_contract::RuntimeBuild {
        source_crate: "whisper-rs-sys".into(),
        source_crate_version: crate::locked::WHISPER_RS_SYS.0.into(),
        source_checksum: crate::locked::WHISPER_RS_SYS.1.into(),
        features: features().into_iter().map(str::to_string).collect(),
        patches,
        patch_set_digest: digest,
        coreml_fallback_allowed: cfg!(feature = "coreml").then(|| !coreml_fails_closed()),
    }
}

/// The dimensions a Core ML sidecar must serve: the model's mels and width,
/// and the encoder positions this arm runs (`audio_ctx`, else a bounded
/// state's, else the model's). `None` for a model loaded without its strict
/// parse (a negative control), whose header was not read.
fn coreml_fit(
    spec: &WhisperSpec,
    hparams: Option<&ggml_container::Hparams>,
) -> Option<coreml_package::whisper::EncoderDims> {
    let h = hparams?;
    let positions = match (spec.audio_ctx, spec.state_bounds) {
        (0, Some(bounds)) => i64::from(bounds.max_audio_ctx),
        (0, None) => i64::from(h.n_audio_ctx),
        (ctx, _) => i64::from(ctx),
    };
    Some(coreml_package::whisper::EncoderDims {
        n_mels: i64::from(h.n_mels),
        n_audio_ctx: positions,
        n_audio_state: i64::from(h.n_audio_state),
    })
}

/// Whether this build's Core ML encoder is the patch set's: every output
/// checked, no fallback (compiled out). Stock whisper-rs-sys defines
/// `WHISPER_COREML_ALLOW_FALLBACK` and copies outputs unchecked.
fn coreml_fails_closed() -> bool {
    capabilities().contains(&"encoder:coreml_fail_closed")
}

/// How this build sets Core ML up for `spec`.
fn coreml_setup(spec: &WhisperSpec) -> coreml::CoremlSetup {
    let fail_closed = coreml_fails_closed();
    coreml::CoremlSetup {
        compute_units: spec.coreml_compute_units.unwrap_or_default(),
        from_arm: spec.coreml_compute_units.is_some(),
        fallback_allowed: !fail_closed,
        output_checked: fail_closed,
        asks_placement: placement::asks(&capabilities()),
    }
}

/// Forward captured whisper.cpp lines to the harness and keep them for the topology.
pub(crate) fn forward_log(
    session: &mut WorkerSession,
    kept: &mut Vec<String>,
) -> anyhow::Result<()> {
    for (level, line) in logcapture::drain() {
        session.log(level, format!("whisper.cpp: {line}"))?;
        kept.push(line);
    }
    Ok(())
}

/// Environment variable of the test hook [`pause_after_checks`].
pub const PAUSE_HOOK_ENV: &str = "MEMQUAL_TEST_PAUSE_AFTER_CHECKS";

/// Test hook: when [`PAUSE_HOOK_ENV`] names a file (a FIFO made by the
/// test), say so over the channel, then read that file to its end before
/// anything reaches whisper.cpp. A test swaps the inputs meanwhile and
/// proves the worker still loads only the checked bytes. The hook only
/// waits; whoever sets a worker's environment controls the worker anyway.
fn pause_after_checks(session: &mut WorkerSession) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os(PAUSE_HOOK_ENV) else {
        return Ok(());
    };
    let path = PathBuf::from(path);
    session.log(
        LogLevel::Info,
        format!(
            "{PAUSE_HOOK_ENV}: inputs checked; waiting for the end of {}",
            path.display()
        ),
    )?;
    let mut sink = Vec::new();
    std::io::Read::read_to_end(
        &mut std::fs::File::open(&path)
            .with_context(|| format!("{PAUSE_HOOK_ENV}: {}", path.display()))?,
        &mut sink,
    )
    .with_context(|| format!("{PAUSE_HOOK_ENV}: reading {}", path.display()))?;
    Ok(())
}

/// Run `f` in the Core ML sidecar's folder when there is one: whisper.cpp
/// finds the sidecar relative to the working directory when it loads
/// through the worker's loader (see [`coreml`]).
fn within<T>(sidecar: Option<&coreml::Sidecar>, f: impl FnOnce() -> T) -> anyhow::Result<T> {
    match sidecar {
        Some(s) => s.enter(f),
        None => Ok(f()),
    }
}

/// The running worker's executable and its SHA-256, for the runtime report
/// (`worker` stands in for the path where the OS cannot name it).
pub fn executable_digest(worker: &str) -> (String, Option<String>) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(worker));
    let digest = inputs::sha256_file(&exe).ok().map(|(d, _)| d);
    (exe.display().to_string(), digest)
}

/// Run the arm; returns the number of measured requests.
pub fn run(arm: &ArmSpec, spec: &WhisperSpec, session: &mut WorkerSession) -> anyhow::Result<u64> {
    let mut log_lines = Vec::new();
    // The CUDA context and its device memory are the arm's baseline: made
    // before the first marker, and every marker reads the device (NVML).
    #[cfg(all(feature = "cuda", target_os = "linux"))]
    let _cuda_context = if spec.use_gpu {
        session.read_device_memory();
        Some(gpu::CudaContext::retain()?)
    } else {
        None
    };
    // Metal likewise (macOS, `metal`): the process's default device is made
    // before the first marker, and every marker reads its
    // currentAllocatedSize, which counts whisper.cpp's Metal buffers when
    // ggml-metal uses that same default device.
    #[cfg(all(feature = "metal", target_os = "macos"))]
    if spec.use_gpu {
        session.read_device_memory();
        let _ = sampler::metal::own_allocated_bytes();
    }
    session.mark(Phase::ProcessStart, None)?;

    // Inputs first: nothing reaches whisper.cpp unchecked.
    let model = model::VerifiedModel::open(&spec.model)?;
    let audio = match &spec.long_form {
        Some(long) => vec![inputs::compose_long_form(long)?],
        None => spec
            .fixtures
            .iter()
            .map(inputs::load_fixture)
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let sidecar = match spec.encoder {
        Encoder::Coreml => Some(coreml::Sidecar::prepare(
            &spec.model.path,
            spec.model.coreml_sidecar.as_deref(),
            &arm.scratch_dir,
            coreml_fit(spec, model.hparams.as_ref()).as_ref(),
        )?),
        Encoder::Native | Encoder::ExternalProcess => None,
    };
    #[cfg(feature = "whisper-patch")]
    let encoder_slot = patched::plan_load(spec)?;
    // However the run ends, its encoder process ends with it, reaped.
    #[cfg(feature = "whisper-patch")]
    let _encoder_stops = encoder_slot.map(external_encoder::StopOnDrop);
    pause_after_checks(session)?;

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
        #[cfg(feature = "whisper-patch")]
        hooks: patched::HOOKS,
        #[cfg(not(feature = "whisper-patch"))]
        hooks: engine::Hooks::NONE,
    };
    let mut settings_json = serde_json::to_value(&settings)?;
    // What `memqual artifact estimate` predicts for this arm's state, for the
    // receipt's state accounting beside what whisper.cpp logs and the markers.
    if let Some(h) = model.hparams.as_ref() {
        settings_json["predicted_state"] =
            serde_json::to_value(predicted_state(h, spec.state_bounds))?;
    }
    let recipe = residency::LoadRecipe {
        model: &model,
        sidecar: sidecar.as_ref(),
        initializer: spec.initializer,
        extra_states: spec.extra_states,
        settings: settings.clone(),
    };
    let t0 = clock::monotonic_ns();
    let loaded = within(sidecar.as_ref(), || {
        Engine::load(&model, spec.initializer, settings)
    });
    let elapsed_ns = clock::monotonic_ns() - t0;
    forward_log(session, &mut log_lines)?;
    let mut engine = loaded??;
    // Cold load is whisper.cpp's work; the worker's own hashing is logged apart.
    let load_ns = elapsed_ns.saturating_sub(engine.load_hash_ns());
    session.log(
        LogLevel::Info,
        format!(
            "model: whisper.cpp loaded the checked bytes ({} bytes, SHA-256 {}) from the \
             worker's open file; hashing them took {:.1} ms, not counted in the cold load",
            model.identity.bytes,
            model.identity.sha256,
            engine.load_hash_ns() as f64 / 1e6
        ),
    )?;
    session.mark(Phase::ModelLoaded, None)?;

    // The external encoder is the Core ML load's counterpart: after the
    // decoder's context, before `state_ready`.
    #[cfg(feature = "whisper-patch")]
    let (patch_report, external_encoder) =
        patched::start_external_encoder(spec, encoder_slot, &engine, session)?;
    #[cfg(not(feature = "whisper-patch"))]
    let external_encoder = None;
    #[cfg(feature = "whisper-patch")]
    let settings_json = {
        let mut json = settings_json;
        json["memqual_patch"] = patch_report;
        json
    };

    let t0 = clock::monotonic_ns();
    let created = within(sidecar.as_ref(), || {
        engine.create_states(spec.initializer, spec.extra_states)
    });
    let state_ns = clock::monotonic_ns() - t0;
    forward_log(session, &mut log_lines)?;
    let states = created??;
    let topology = Topology::from_log(log_lines.iter().map(String::as_str));
    let setup = coreml_setup(spec);
    let coreml = match &sidecar {
        Some(sidecar) => {
            topology
                .coreml_engaged()
                .map_err(|e| anyhow::anyhow!("Core ML requested but not engaged: {e}"))?;
            Some(sidecar.identity(&topology, &setup)?)
        }
        None => None,
    };
    let (worker_executable, worker_sha256) = executable_digest(WORKER_NAME);
    let report = RuntimeReport {
        runtime: "whisper.cpp".into(),
        runtime_version: engine::runtime_version(),
        system_info: engine::system_info(),
        worker_executable,
        worker_sha256,
        model: model.identity.clone(),
        coreml,
        state_count: engine.state_count(spec.initializer),
        initializer: spec.initializer,
        settings: settings_json,
        topology,
        load_ns,
        state_ns,
        states,
        external_encoder,
        build: Some(runtime_build()),
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
    // From here the idle policy holds the engine (see `residency`).
    let mut held = residency::Residency::new(engine, spec.idle_policy);
    request::speech_ended(session, &mut held)?;

    let mut request_id = 0u64;
    let deadline = soak_deadline(spec, clock::monotonic_ns());
    'requests: for repetition in 0..spec.repetitions {
        for clip in &audio {
            if soak_limit_reached(spec, request_id, deadline) {
                break 'requests;
            }
            let gap_ms = worker_contract::gap_before(&spec.gaps_ms, request_id);
            if gap_ms > 0 {
                let until = clock::monotonic_ns().saturating_add(gap_ms.saturating_mul(1_000_000));
                request::idle(session, &mut held, until)?;
            }
            session.mark(Phase::RequestBegin, Some(request_id))?;
            let cancel_after_ms = spec
                .cancel
                .filter(|c| c.request == request_id)
                .map(|c| c.after_ms);
            let outcome = request::run(
                session,
                &mut held,
                &recipe,
                request::Plan {
                    mode: spec.request_mode,
                    gap_ms,
                    cancel_after_ms,
                },
                &clip.samples,
                &mut log_lines,
            )
            .with_context(|| format!("request {request_id} on {}", clip.id))?;
            session.mark(Phase::RequestEnd, Some(request_id))?;
            let body = match outcome.decoded {
                cancel::Outcome::Finished(raw) => ResultBody::Transcription(Box::new(
                    transcript::result(raw, &clip.id, repetition, clip.duration_ms(), specials),
                )),
                cancel::Outcome::Aborted {
                    abort_latency_ns,
                    code,
                } => ResultBody::Cancelled(CancelledRequest {
                    fixture_id: clip.id.clone(),
                    repetition,
                    after_ms: cancel_after_ms.unwrap_or(0),
                    abort_latency_ns,
                    code,
                    audio_ms: clip.duration_ms(),
                }),
            };
            if cancel_after_ms.is_some() && matches!(body, ResultBody::Transcription(_)) {
                session.log(
                    LogLevel::Warn,
                    format!(
                        "cancel: request {request_id} finished in {:.1} ms, before whisper.cpp \
                         saw the abort; it is an ordinary result",
                        outcome.compute_ns as f64 / 1e6
                    ),
                )?;
            }
            session.result(RequestResult {
                request_id,
                latency_ns: outcome.compute_ns,
                body,
                timing: Some(outcome.timing),
            })?;
            forward_log(session, &mut log_lines)?;
            session.settle(request_id, arm.settle_ms)?;
            request::speech_ended(session, &mut held)?;
            // A lifecycle cycle ends: free states and context (the marker is
            // the post-teardown floor); the next request loads them again.
            if arm.lifecycle.is_some_and(|l| l.ends_cycle(request_id)) {
                held.release();
                session.mark(Phase::Release, None)?;
            }
            request_id += 1;
        }
    }

    let until = clock::monotonic_ns().saturating_add(spec.idle_ms.saturating_mul(1_000_000));
    request::idle(session, &mut held, until)?;
    session.mark(Phase::IdleEnd, None)?;
    held.teardown();
    #[cfg(feature = "whisper-patch")]
    if let Some(problem) = encoder_slot.and_then(|slot| slot.stop()) {
        session.log(LogLevel::Warn, format!("external encoder: {problem}"))?;
    }
    forward_log(session, &mut log_lines)?;
    session.mark(Phase::TeardownDone, None)?;
    if let Some(sidecar) = &sidecar {
        report_placement(&setup, sidecar, session)?;
    }
    Ok(request_id)
}

/// After `teardown_done`, where the build asks: Core ML's compute plan for
/// the sidecar with the arm's compute units (it loads the model once more,
/// so never inside the measured phases), timed and sent to the harness.
fn report_placement(
    setup: &coreml::CoremlSetup,
    sidecar: &coreml::Sidecar,
    session: &mut WorkerSession,
) -> anyhow::Result<()> {
    if !setup.asks_placement {
        return Ok(());
    }
    let t0 = clock::monotonic_ns();
    #[cfg(feature = "whisper-patch")]
    let answer = patch::coreml_placement(sidecar.resolved(), setup.compute_units);
    #[cfg(not(feature = "whisper-patch"))]
    let answer = Err((
        -1,
        format!("{} has no patched library", sidecar.resolved().display()),
    ));
    let placed = placement::from_library(answer, setup.compute_units);
    session.log(
        LogLevel::Info,
        format!(
            "placement: MLComputePlan for {} took {:.1} ms: {}",
            sidecar.resolved().display(),
            (clock::monotonic_ns() - t0) as f64 / 1e6,
            placed.line()
        ),
    )?;
    session.placement(placed)
}

/// What `memqual artifact estimate` predicts for a state sized by `bounds`
/// (the model's maxima without them).
pub(crate) fn predicted_state(
    h: &ggml_container::Hparams,
    bounds: Option<worker_contract::StateBounds>,
) -> ggml_container::estimate::StateEstimate {
    ggml_container::estimate::estimate(
        h,
        None,
        ggml_container::estimate::EstimateOptions {
            audio_ctx: bounds.map(|b| u64::from(b.max_audio_ctx)),
            text_ctx: None,
            decoders: None,
            max_batch: bounds.map(|b| u64::from(b.max_batch)),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
