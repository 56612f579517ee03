//! Which capabilities a worker build has and whether an arm can run on it:
//! the names a protocol's `requires` uses, what memqual's whisper.cpp patch
//! set adds (with and without Core ML), and the check every whisper.cpp
//! worker applies before it runs an arm. Here, not in the workers, so the
//! harness's tests can ask what a build on another host would say.

use crate::{Encoder, WhisperSpec};

/// What the patch set's `whisper_memqual_capabilities()` returns in a build
/// without Core ML (runners/whisper-patch; the patched worker refuses a
/// library that says otherwise, and a test reads it from the patch).
pub const PATCH_CAPABILITIES: &[&str] = &[
    "loader:external_encoder_only",
    "encoder:external_process",
    "state:bounded_cross_cache",
    "state:bounded_batch",
    "loader:encoder_only",
];

/// What it returns in a Core ML build (`WHISPER_COREML`): the fail-closed
/// Core ML encoder, external-encoder-only loading with it, the arm's
/// compute units, and the compute plan's placement (0006).
pub const PATCH_CAPABILITIES_COREML: &[&str] = &[
    "loader:external_encoder_only",
    "encoder:external_process",
    "state:bounded_cross_cache",
    "state:bounded_batch",
    "loader:encoder_only",
    "encoder:coreml_fail_closed",
    "loader:external_encoder_only_coreml",
    "coreml:compute_units",
    "coreml:placement",
];

/// What a whisper.cpp worker built with cargo `features` (`metal`,
/// `coreml`, `cuda`) can do, when its linked library adds `linked` (the
/// patch set's capabilities; empty for stock whisper.cpp).
pub fn capabilities_of(features: &[&str], linked: &[&'static str]) -> Vec<&'static str> {
    let mut caps = vec![
        "whisper.cpp",
        "initializer:no_state",
        "initializer:default",
        "extra_states",
        "decoding:greedy",
        "decoding:beam",
        "encoder:native",
        "model_prevalidation:strict_ggml",
        "request_mode:realtime",
        "idle_policy:load_on_speech",
        "idle_policy:unload_after_idle",
        "cancel",
        "input:convert",
    ];
    for (feature, cap) in [
        ("coreml", "encoder:coreml"),
        ("metal", "backend:metal"),
        ("cuda", "backend:cuda"),
    ] {
        if features.contains(&feature) {
            caps.push(cap);
        }
    }
    // Exactly what the linked, patched library says it adds.
    caps.extend_from_slice(linked);
    caps
}

/// An arm this worker must not run; the binary exits with
/// [`crate::EXIT_NOT_RUNNABLE`].
#[derive(Debug, thiserror::Error)]
#[error("not runnable: {0}")]
pub struct NotRunnable(pub String);

/// Refuse an arm whose `requires` names a capability outside `caps`, the
/// capabilities of `worker` (any worker binary: whisper.cpp's or CTranslate2's).
pub fn require_capabilities(
    worker: &str,
    requires: &[String],
    caps: &[&str],
) -> Result<(), NotRunnable> {
    let missing: Vec<&str> = requires
        .iter()
        .map(String::as_str)
        .filter(|r| !caps.contains(r))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(NotRunnable(format!(
        "this {worker} lacks {} (it has: {})",
        missing.join(", "),
        caps.join(", ")
    )))
}

/// The capabilities that mean the build has a GPU backend `use_gpu` reaches.
const GPU_BACKENDS: [&str; 2] = ["backend:cuda", "backend:metal"];

/// Refuse an arm that `worker`, with capabilities `caps`, cannot run as
/// declared: each refusal names what is missing.
pub fn check_runnable_with(
    worker: &str,
    spec: &WhisperSpec,
    caps: &[&str],
) -> Result<(), NotRunnable> {
    require_capabilities(worker, &spec.requires, caps)?;
    if spec.encoder == Encoder::Coreml && !caps.contains(&"encoder:coreml") {
        return Err(NotRunnable(format!(
            "encoder = \"coreml\" needs a {worker} built with the `coreml` feature (macOS; it lacks encoder:coreml)"
        )));
    }
    // whisper.cpp without a GPU backend takes `use_gpu` and runs on the CPU
    // without a word: such an arm would measure the CPU under a GPU's name.
    if spec.use_gpu && !caps.iter().any(|c| GPU_BACKENDS.contains(c)) {
        return Err(NotRunnable(format!(
            "use_gpu = true needs a {worker} built with a GPU backend (backend:cuda or \
             backend:metal); this build has none, and whisper.cpp would run the arm on the CPU \
             without saying so"
        )));
    }
    if spec.coreml_compute_units.is_some() && !caps.contains(&"coreml:compute_units") {
        return Err(NotRunnable(format!(
            "coreml_compute_units needs memqual's patched whisper.cpp built with Core ML \
             (coreml:compute_units); this {worker} lacks it"
        )));
    }
    // A capability the arm requires must be one it uses, never a label on
    // something else: the patch's loader serves an external encoder (its
    // process, or Core ML in a Core ML build), and the bounded caches need
    // their bounds.
    let requires = |cap: &str| spec.requires.iter().any(|r| r == cap);
    if requires("loader:external_encoder_only") {
        match spec.encoder {
            Encoder::ExternalProcess => {}
            Encoder::Coreml if caps.contains(&"loader:external_encoder_only_coreml") => {}
            Encoder::Coreml => {
                return Err(NotRunnable(format!(
                    "external-encoder-only loading with encoder = \"coreml\" needs memqual's \
                     patched whisper.cpp built with Core ML (loader:external_encoder_only_coreml); \
                     this {worker} lacks it"
                )));
            }
            Encoder::Native => {
                return Err(NotRunnable(
                    "external-encoder-only loading runs with encoder = \"external_process\" or \
                     \"coreml\"; a native-encoder arm has no encoder to hand the work to"
                        .into(),
                ));
            }
        }
    }
    if (requires("state:bounded_cross_cache") || requires("state:bounded_batch"))
        && spec.state_bounds.is_none()
    {
        return Err(NotRunnable(
            "a bounded state is required but the arm sets no state_bounds".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capability strings `whisper_memqual_capabilities()` returns, read
    /// from the last patch of the set that rewrites it (0002 adds the CPU
    /// list; 0003 splits it by `WHISPER_USE_COREML`; 0004 adds encoder-only
    /// loading; 0006 placement).
    fn patch_capability_lists() -> (Vec<String>, Vec<String>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../whisper-patch");
        let signature = "const char * whisper_memqual_capabilities(void) {";
        let patch = [
            "0006-coreml-placement.patch",
            "0004-encoder-only-process.patch",
            "0003-coreml-fail-closed.patch",
        ]
        .iter()
        .map(|name| std::fs::read_to_string(dir.join(name)).unwrap())
        .find(|text| text.contains(signature))
        .expect("a patch rewrites whisper_memqual_capabilities");
        let body = patch.split(signature).nth(1).expect("the function's hunk");
        // The function as patched: added and unchanged lines, not removed ones.
        let added: Vec<&str> = body
            .lines()
            .take_while(|l| !l.starts_with(" }") && !l.starts_with("+}"))
            .filter(|l| !l.starts_with('-'))
            .collect();
        let strings = |lines: &[&str]| -> String {
            lines
                .iter()
                .flat_map(|l| l.split('"').skip(1).step_by(2))
                .collect()
        };
        let split = added
            .iter()
            .position(|l| l.contains("#else"))
            .expect("a Core ML and a plain list");
        let list = |s: String| s.split(',').map(str::to_string).collect::<Vec<_>>();
        (
            list(strings(&added[split..])),
            list(strings(&added[..split])),
        )
    }

    #[test]
    fn the_patch_capability_constants_are_what_the_patch_returns() {
        let (plain, coreml) = patch_capability_lists();
        assert_eq!(plain, PATCH_CAPABILITIES);
        assert_eq!(coreml, PATCH_CAPABILITIES_COREML);
    }

    fn spec(encoder: &str, requires: &[&str], units: Option<&str>) -> WhisperSpec {
        let mut json = serde_json::json!({
            "model": {"path": "m.bin", "sha256": null},
            "threads": 1, "decoding": {"strategy": "greedy"}, "language": "en",
            "no_timestamps": true, "flash_attn": false, "use_gpu": true, "audio_ctx": 0,
            "max_tokens": 0,
            "initializer": "no_state", "extra_states": 0, "warmup": 0,
            "fixtures": [], "repetitions": 1, "idle_ms": 0, "encoder": encoder,
            "requires": requires, "runtime": "whisper_cpp_patched"
        });
        if let Some(u) = units {
            json["coreml_compute_units"] = serde_json::json!(u);
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_gpu_arm_needs_a_gpu_backend_and_a_cpu_arm_runs_anywhere() {
        let gpu = spec("native", &[], None);
        assert!(gpu.use_gpu);
        let cpu_only = capabilities_of(&[], &[]);
        let err = check_runnable_with("memqual-whisper", &gpu, &cpu_only)
            .unwrap_err()
            .0;
        assert!(
            err.starts_with(
                "use_gpu = true needs a memqual-whisper built with a GPU backend (backend:cuda or \
                 backend:metal)"
            ),
            "{err}"
        );
        for backend in ["cuda", "metal"] {
            let caps = capabilities_of(&[backend], &[]);
            assert!(check_runnable_with("w", &gpu, &caps).is_ok(), "{backend}");
        }
        let mut cpu = gpu;
        cpu.use_gpu = false;
        assert!(check_runnable_with("w", &cpu, &cpu_only).is_ok());
    }

    #[test]
    fn external_encoder_only_loading_with_core_ml_needs_the_patched_core_ml_build() {
        let mac_patched = capabilities_of(&["metal", "coreml"], PATCH_CAPABILITIES_COREML);
        let mac_stock = capabilities_of(&["metal", "coreml"], &[]);
        let linux_patched = capabilities_of(&[], PATCH_CAPABILITIES);
        let stage2 = spec(
            "coreml",
            &[
                "encoder:coreml",
                "backend:metal",
                "loader:external_encoder_only",
            ],
            Some("cpu_and_ne"),
        );
        assert!(check_runnable_with("w", &stage2, &mac_patched).is_ok());
        let err = check_runnable_with("w", &stage2, &mac_stock).unwrap_err().0;
        assert!(
            err.starts_with("this w lacks loader:external_encoder_only ("),
            "{err}"
        );
        let err = check_runnable_with("w", &stage2, &linux_patched)
            .unwrap_err()
            .0;
        assert!(
            err.starts_with("this w lacks encoder:coreml, backend:metal ("),
            "{err}"
        );
        // A patched build without Core ML that claimed the loader still refuses
        // it for Core ML, naming the capability it lacks.
        // (Its decoder on the CPU: the build has no GPU backend.)
        let mut cpu_loader = spec("coreml", &["loader:external_encoder_only"], None);
        cpu_loader.use_gpu = false;
        let caps = capabilities_of(&["coreml"], PATCH_CAPABILITIES);
        let err = check_runnable_with("w", &cpu_loader, &caps).unwrap_err().0;
        assert!(
            err.contains("(loader:external_encoder_only_coreml)"),
            "{err}"
        );
        // Compute units are the patched Core ML build's.
        let units = spec("coreml", &[], Some("cpu_only"));
        let err = check_runnable_with("w", &units, &mac_stock).unwrap_err().0;
        assert!(err.contains("(coreml:compute_units)"), "{err}");
        assert!(check_runnable_with("w", &units, &mac_patched).is_ok());
    }
}
