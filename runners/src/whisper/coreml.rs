//! The Core ML encoder sidecar (`*-encoder.mlmodelc`): which tree, where
//! whisper.cpp will look for it, and its digest before and after loading.
//!
//! whisper.cpp 1.8.3 finds the sidecar from the model's path
//! (`whisper_get_coreml_path_encoder(ctx->path_model)` in
//! `whisper_init_state`), and Core ML opens that tree by path itself. The
//! worker loads the model through its own loader (see [`super::loader`]),
//! which leaves `path_model` empty; whisper.cpp's rule then yields the
//! relative path `-encoder.mlmodelc`. So the worker resolves the sidecar once
//! (the arm's `coreml_sidecar`, or whisper.cpp's rule applied to the model
//! path, [`sidecar_beside`]), links it as `<scratch>/coreml/-encoder.mlmodelc`
//! and creates the states with that folder as the working directory
//! ([`Sidecar::enter`]). The tree is digested before the load and again after
//! the states exist; the arm fails unless both digests agree. Before any of
//! that, its feature descriptions are checked against the GGML model's
//! dimensions (`coreml_package::whisper::check_encoder`): a sidecar built for
//! another model, or for other encoder positions, is refused before anything
//! loads.
//!
//! Everything here is plain Unix and tested on Linux; only a `coreml` build
//! (macOS) ever takes this path at run time.

use anyhow::{Context, bail};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use worker_contract::{CoremlIdentity, Topology};

/// The name whisper.cpp derives from an empty model path.
pub const LINK_NAME: &str = "-encoder.mlmodelc";

/// whisper.cpp's `whisper_get_coreml_path_encoder`: drop everything from the
/// path's last `.`, then a trailing `-qX_Y`, and append `-encoder.mlmodelc`.
/// Like whisper.cpp it works on the whole path string, not the file name.
pub fn sidecar_beside(model: &Path) -> PathBuf {
    let mut path = model.as_os_str().as_bytes().to_vec();
    if let Some(dot) = path.iter().rposition(|&b| b == b'.') {
        path.truncate(dot);
    }
    if let Some(dash) = path.iter().rposition(|&b| b == b'-') {
        let tail = &path[dash..];
        if tail.len() == 5 && tail[1] == b'q' && tail[3] == b'_' {
            path.truncate(dash);
        }
    }
    path.extend_from_slice(LINK_NAME.as_bytes());
    PathBuf::from(OsString::from_vec(path))
}

/// How the worker set up Core ML, for the receipt.
#[derive(Debug, Clone, Copy)]
pub struct CoremlSetup {
    /// What the model is loaded with.
    pub compute_units: worker_contract::CoremlComputeUnits,
    /// Chosen by the arm (patched runtime) rather than whisper.cpp's default.
    pub from_arm: bool,
    /// whisper.cpp may run its native encoder when Core ML fails to load.
    pub fallback_allowed: bool,
    /// Every prediction's output is checked before it is copied.
    pub output_checked: bool,
    /// The build asks Core ML for its compute plan after `teardown_done`
    /// ([`super::placement`]).
    pub asks_placement: bool,
}

/// The sidecar resolved, linked into scratch and digested before the load.
#[derive(Debug)]
pub struct Sidecar {
    /// `<scratch>/coreml`: the working directory while states are created.
    dir: PathBuf,
    /// The real tree (canonical path).
    resolved: PathBuf,
    before: sampler::captures::TreeDigest,
}

impl Sidecar {
    /// Resolve `explicit` (or whisper.cpp's rule for `model`), check it fits
    /// `fit` (the model's dimensions, with the arm's encoder positions), link
    /// it into `scratch/coreml` and digest it.
    pub fn prepare(
        model: &Path,
        explicit: Option<&Path>,
        scratch: &Path,
        fit: Option<&coreml_package::whisper::EncoderDims>,
    ) -> anyhow::Result<Self> {
        let named = explicit.map_or_else(|| sidecar_beside(model), Path::to_path_buf);
        if !named.is_dir() {
            bail!(
                "Core ML sidecar {} is not a directory (a compiled `.mlmodelc` is one{})",
                named.display(),
                if explicit.is_none() {
                    "; whisper.cpp looks for it beside the model, or set coreml_sidecar"
                } else {
                    ""
                }
            );
        }
        let resolved = std::fs::canonicalize(&named)
            .with_context(|| format!("Core ML sidecar {}", named.display()))?;
        if let Some(dims) = fit {
            check_fits(&named, &resolved, model, dims)?;
        }
        let dir = scratch.join("coreml");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let link = dir.join(LINK_NAME);
        std::os::unix::fs::symlink(&resolved, &link)
            .with_context(|| format!("linking {}", link.display()))?;
        let before = sampler::captures::tree_digest(&resolved)
            .with_context(|| format!("digesting the Core ML model {}", resolved.display()))?;
        Ok(Sidecar {
            dir,
            resolved,
            before,
        })
    }

    /// Run `f` (whisper.cpp's state creation) with the sidecar's folder as
    /// the working directory, so the relative `-encoder.mlmodelc` whisper.cpp
    /// derives names the linked tree; the previous directory is restored.
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> anyhow::Result<T> {
        let previous = std::fs::File::open(".").context("opening the working directory")?;
        nix::unistd::chdir(&self.dir)
            .with_context(|| format!("entering {}", self.dir.display()))?;
        let out = f();
        nix::unistd::fchdir(&previous).context("returning to the working directory")?;
        Ok(out)
    }

    /// The real tree (every link resolved), as Core ML's compute plan opens it.
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// The sidecar whisper.cpp logged opening, checked to be the linked tree
    /// with the same digest as before the load.
    pub fn identity(
        &self,
        topology: &Topology,
        setup: &CoremlSetup,
    ) -> anyhow::Result<CoremlIdentity> {
        let logged = topology
            .states
            .first()
            .and_then(|s| s.coreml_path.clone())
            .context("whisper.cpp did not log which Core ML model it loaded")?;
        // A relative path is relative to the folder the states were created in.
        let opened = self.dir.join(&logged);
        let resolved = std::fs::canonicalize(&opened)
            .with_context(|| format!("Core ML model {}", opened.display()))?;
        if resolved != self.resolved {
            bail!(
                "whisper.cpp opened the Core ML model {} ({}), not the sidecar the arm names ({})",
                opened.display(),
                resolved.display(),
                self.resolved.display()
            );
        }
        let after = sampler::captures::tree_digest(&resolved)
            .with_context(|| format!("digesting the Core ML model {}", resolved.display()))?;
        if after.sha256 != self.before.sha256 {
            bail!(
                "the Core ML model {} changed while whisper.cpp loaded it (tree SHA-256 {} before, {} after)",
                resolved.display(),
                self.before.sha256,
                after.sha256
            );
        }
        Ok(CoremlIdentity {
            path: opened.display().to_string(),
            resolved_path: resolved.display().to_string(),
            compute_units: setup.compute_units.coreml_name().into(),
            compute_units_from_arm: setup.from_arm,
            fallback_allowed: setup.fallback_allowed,
            output_checked: setup.output_checked,
            placement: super::placement::at_state_ready(setup.asks_placement),
            tree_sha256: after.sha256,
            files: after.files,
            bytes: after.file_bytes,
        })
    }
}

/// Refuse a sidecar whose feature descriptions do not serve `dims`.
fn check_fits(
    named: &Path,
    resolved: &Path,
    model: &Path,
    dims: &coreml_package::whisper::EncoderDims,
) -> anyhow::Result<()> {
    let report = coreml_package::read_model(resolved).map_err(|e| {
        anyhow::anyhow!(
            "Core ML sidecar {} cannot be checked against model {} before loading: {e}",
            named.display(),
            model.display()
        )
    })?;
    let mismatches = coreml_package::whisper::check_encoder(&report, dims);
    if let Some(first) = coreml_package::whisper::first_mismatch(&mismatches) {
        bail!(
            "Core ML sidecar {} does not fit model {} (n_mels {}, {} encoder positions, n_audio_state {}): \
             {first}; nothing was loaded",
            named.display(),
            model.display(),
            dims.n_mels,
            dims.n_audio_ctx,
            dims.n_audio_state,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coreml_package::whisper::EncoderDims;

    #[test]
    fn whisper_cpp_naming_rule() {
        let beside = |p: &str| sidecar_beside(Path::new(p)).display().to_string();
        assert_eq!(
            beside("/m/ggml-base.en.bin"),
            "/m/ggml-base.en-encoder.mlmodelc"
        );
        assert_eq!(
            beside("/m/ggml-base.en-q5_0.bin"),
            "/m/ggml-base.en-encoder.mlmodelc"
        );
        assert_eq!(
            beside("/m/ggml-tiny-q8_0.bin"),
            "/m/ggml-tiny-encoder.mlmodelc"
        );
        // Not a quantization suffix: kept.
        assert_eq!(
            beside("/m/ggml-tiny-f16.bin"),
            "/m/ggml-tiny-f16-encoder.mlmodelc"
        );
        // whisper.cpp cuts at the last '.' of the whole path, even in a folder name.
        assert_eq!(beside("/v1.2/model"), "/v1-encoder.mlmodelc");
        // What an empty path_model (the loader entry point) gives.
        assert_eq!(beside(""), LINK_NAME);
    }

    const STOCK: CoremlSetup = CoremlSetup {
        compute_units: worker_contract::CoremlComputeUnits::All,
        from_arm: false,
        fallback_allowed: true,
        output_checked: false,
        asks_placement: false,
    };

    fn tree(root: &Path) -> PathBuf {
        let tree = root.join("real-encoder.mlmodelc");
        std::fs::create_dir_all(tree.join("weights")).unwrap();
        std::fs::write(tree.join("model.mil"), b"program").unwrap();
        std::fs::write(tree.join("weights/weight.bin"), [7u8; 100]).unwrap();
        tree
    }

    fn logged(path: &str) -> Topology {
        let log = format!(
            "whisper_init_state: loading Core ML model from '{path}'\nwhisper_init_state: Core ML model loaded"
        );
        Topology::from_log(log.lines())
    }

    #[test]
    fn the_relative_path_whisper_cpp_derives_names_the_linked_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tree(tmp.path());
        let scratch = tmp.path().join("scratch");
        let sidecar =
            Sidecar::prepare(Path::new("/nowhere/m.bin"), Some(&tree), &scratch, None).unwrap();
        // Inside `enter`, the relative name opens the tree; outside, it does not.
        let seen = sidecar
            .enter(|| std::fs::read(Path::new(LINK_NAME).join("model.mil")))
            .unwrap()
            .unwrap();
        assert_eq!(seen, b"program");
        assert!(!Path::new(LINK_NAME).exists());
        let id = sidecar.identity(&logged(LINK_NAME), &STOCK).unwrap();
        assert_eq!(
            id.path,
            scratch.join("coreml").join(LINK_NAME).display().to_string()
        );
        assert_eq!(
            id.resolved_path,
            std::fs::canonicalize(&tree).unwrap().display().to_string()
        );
        assert_eq!((id.files, id.bytes), (2, 107));
        let direct = sampler::captures::tree_digest(&tree).unwrap();
        assert_eq!(id.tree_sha256, direct.sha256);
    }

    #[test]
    fn a_tree_changed_during_the_load_fails_the_arm() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tree(tmp.path());
        let sidecar = Sidecar::prepare(
            Path::new("/nowhere/m.bin"),
            Some(&tree),
            &tmp.path().join("s"),
            None,
        )
        .unwrap();
        std::fs::write(tree.join("weights/weight.bin"), [8u8; 100]).unwrap();
        let err = sidecar
            .identity(&logged(LINK_NAME), &STOCK)
            .unwrap_err()
            .to_string();
        assert!(err.contains("changed while whisper.cpp loaded it"), "{err}");
    }

    #[test]
    fn another_tree_than_the_named_one_fails_the_arm() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tree(tmp.path());
        let other = tmp.path().join("other-encoder.mlmodelc");
        std::fs::create_dir_all(&other).unwrap();
        let sidecar = Sidecar::prepare(
            Path::new("/nowhere/m.bin"),
            Some(&tree),
            &tmp.path().join("s"),
            None,
        )
        .unwrap();
        let err = sidecar
            .identity(&logged(other.to_str().unwrap()), &STOCK)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not the sidecar the arm names"), "{err}");
    }

    #[test]
    fn a_missing_sidecar_beside_the_model_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("ggml-tiny.en-q5_0.bin");
        let err = Sidecar::prepare(&model, None, &tmp.path().join("s"), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ggml-tiny.en-encoder.mlmodelc is not a directory"),
            "{err}"
        );
        assert!(err.contains("beside the model"), "{err}");
    }

    /// The committed miniature encoder (4 mels, 8 positions, 32 wide), built
    /// by fixtures/coreml/build_encoder.py.
    fn miniature() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../harness/tests/coreml/miniature-encoder.mlpackage")
    }

    fn dims(n_mels: i64, n_audio_ctx: i64, n_audio_state: i64) -> EncoderDims {
        EncoderDims {
            n_mels,
            n_audio_ctx,
            n_audio_state,
        }
    }

    #[test]
    fn a_sidecar_that_fits_the_model_is_linked_and_its_setup_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let scratch = tmp.path().join("s");
        let sidecar = Sidecar::prepare(
            Path::new("/m/ggml-mini.bin"),
            Some(&miniature()),
            &scratch,
            Some(&dims(4, 8, 32)),
        )
        .unwrap();
        let setup = CoremlSetup {
            compute_units: worker_contract::CoremlComputeUnits::CpuAndNe,
            from_arm: true,
            fallback_allowed: false,
            output_checked: true,
            asks_placement: true,
        };
        let id = sidecar.identity(&logged(LINK_NAME), &setup).unwrap();
        assert_eq!(id.compute_units, "MLComputeUnitsCPUAndNeuralEngine");
        assert!(id.compute_units_from_arm && id.output_checked && !id.fallback_allowed);
        assert_eq!(
            id.placement,
            worker_contract::CoremlPlacement::AfterTeardown
        );
        let stock = sidecar.identity(&logged(LINK_NAME), &STOCK).unwrap();
        assert_eq!(
            stock.placement,
            worker_contract::CoremlPlacement::not_attributable(
                super::super::placement::NOT_QUERIED
            )
        );
    }

    #[test]
    fn a_sidecar_for_other_dimensions_is_refused_before_anything_loads() {
        let tmp = tempfile::tempdir().unwrap();
        let scratch = tmp.path().join("s");
        // Another model's width, then a state bounded to fewer positions.
        for (fit, says) in [
            (
                dims(4, 8, 384),
                "output output shape: expected [1, 8, 384], found [1, 8, 32]",
            ),
            (
                dims(4, 6, 32),
                "input logmel_data shape: expected [1, 4, 12], found [1, 4, 16] (and 1 more)",
            ),
        ] {
            let err = Sidecar::prepare(
                Path::new("/m/ggml-mini.bin"),
                Some(&miniature()),
                &scratch,
                Some(&fit),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(says), "{err}");
            assert!(err.contains("nothing was loaded"), "{err}");
            // Refused before the link whisper.cpp would open.
            assert!(!scratch.join("coreml").join(LINK_NAME).exists());
        }
    }

    #[test]
    fn a_sidecar_that_cannot_be_read_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tree(tmp.path());
        let err = Sidecar::prepare(
            Path::new("/m/ggml-mini.bin"),
            Some(&tree),
            &tmp.path().join("s"),
            Some(&dims(4, 8, 32)),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cannot be checked against model /m/ggml-mini.bin"),
            "{err}"
        );
    }
}
