//! Core ML encoders: `memqual fixtures model tiny.en-coreml` and `fixtures
//! coreml-encoder` (the builder script in memqual's Python environment,
//! created from PyPI the first time), and `memqual artifact inspect` of a
//! `.mlpackage`: what it reads from the real packages, `--against` a GGML
//! model, and the refusal of damaged packages.
//!
//! The damaged packages are made from the committed miniature encoder
//! `harness/tests/coreml/miniature-encoder.mlpackage` (the script's output
//! for `SyntheticSpec::miniature()`, 4 mels, 8 positions, 32 wide), so
//! those tests need no network; `committed_miniature_is_what_the_script_builds`
//! checks it against a fresh build (`MEMQUAL_BLESS=1` rewrites it).

use crate::common::{copy_tree, memqual, model_record, stderr};
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Expect, TensorClass, inspect};
use harness::artifact::coreml::CoremlInspection;
use harness::coreml_fixture::{CoremlEncoders, EncoderPackage};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn committed_miniature() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/coreml/miniature-encoder.mlpackage")
}

fn inspect_cmd(args: &[&str]) -> Output {
    memqual(&[&["artifact", "inspect"][..], args].concat())
}

fn inspection(out: &Output) -> CoremlInspection {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not an inspection ({e}): {}; stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

/// tiny.en's encoder packages, built into the cache when it lacks them
/// (pip installs the builder's pinned packages the first time).
fn tiny_en_encoders() -> CoremlEncoders {
    serde_json::from_value(model_record("tiny.en-coreml")).unwrap()
}

/// A synthetic GGML model of `spec` in `dir`.
fn synthetic(dir: &Path, spec: &SyntheticSpec) -> PathBuf {
    let path = dir.join("synthetic.bin");
    write_file(spec, &path).unwrap();
    path
}

/// `memqual fixtures coreml-encoder MODEL OUT [--palettize-bits N]`.
fn build(model: &Path, out: &Path, bits: Option<&str>) -> EncoderPackage {
    let mut args = vec!["fixtures", "coreml-encoder", s(model), s(out), "--json"];
    if let Some(b) = bits {
        args.extend(["--palettize-bits", b]);
    }
    let run = memqual(&args);
    assert!(run.status.success(), "{args:?}: {}", stderr(&run));
    serde_json::from_slice(&run.stdout).unwrap()
}

/// Every native-encoder weight of a GGML model (elements).
fn encoder_elements(model: &Path) -> u64 {
    inspect(model, Expect::Full)
        .unwrap()
        .tensors
        .iter()
        .filter(|t| t.class == TensorClass::NativeEncoder)
        .map(|t| t.ne.iter().product::<u64>())
        .sum()
}

#[test]
fn tiny_en_packages_have_whisper_cpp_features_all_encoder_weights_and_their_pins() {
    let built = tiny_en_encoders();
    let ggml = &built.source;
    let h = inspect(ggml, Expect::Full).unwrap().hparams;
    let weights = encoder_elements(ggml);
    // Weight matrices: the positional embedding, two convolutions, and six
    // per block (query, key, value, out, two MLP layers).
    let matrices = 3 + 6 * u64::try_from(h.n_audio_layer).unwrap();
    assert_eq!(built.packages.len(), 2);
    let mut sizes = Vec::new();
    for p in &built.packages {
        let out = inspect_cmd(&[s(&p.path), "--against", s(ggml), "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let i = inspection(&out);
        assert!(i.accepted);
        assert_eq!(i.tree.sha256, p.tree_sha256, "{}", p.variant);
        assert_eq!(i.model.package_bytes, Some(p.bytes));
        assert_eq!(i.model.compiled_bytes, None);
        assert_eq!(i.model.spec_version, Some(7), "macOS 13's specification");
        assert_eq!(i.model.model_type.as_deref(), Some("mlProgram"));
        assert_eq!(i.model.opset.as_deref(), Some("CoreML6"));
        let (input, output) = (&i.model.inputs, &i.model.outputs);
        assert_eq!((input.len(), output.len()), (1, 1));
        assert_eq!(input[0].name, "logmel_data");
        assert_eq!(input[0].data_type.as_deref(), Some("Float32"));
        let (mels, ctx, state) = (
            i64::from(h.n_mels),
            i64::from(h.n_audio_ctx),
            i64::from(h.n_audio_state),
        );
        assert_eq!(input[0].shape, vec![1, mels, 2 * ctx]);
        assert_eq!(output[0].name, "output");
        assert_eq!(output[0].data_type.as_deref(), Some("Float32"));
        assert_eq!(output[0].shape, vec![1, ctx, state]);
        let against = i.against.as_ref().unwrap();
        assert!(against.fits && against.mismatches.is_empty());
        // One softmax and four linear layers' worth per block, as built.
        let layers = u64::try_from(h.n_audio_layer).unwrap();
        assert_eq!(i.model.operations.get("softmax"), Some(&layers));
        assert_eq!(i.model.operations.get("linear"), Some(&(6 * layers)));
        assert_eq!(i.model.operations.get("conv"), Some(&2));
        assert_eq!(
            i.model.metadata.get("memqual.source_sha256"),
            Some(&built.source_sha256)
        );
        let w = i.model.weights.as_ref().unwrap();
        let dense: u64 = w.dense.iter().map(|d| d.elements).sum();
        let palettized: u64 = w.palettized.iter().map(|p| p.elements).sum();
        // Whisper's key projections have no bias; Core ML's `linear` has
        // one, a zero vector that Core ML Tools stores once for all blocks.
        assert_eq!(
            dense + palettized,
            weights + u64::try_from(h.n_audio_state).unwrap(),
            "{}: every encoder weight of the GGML file is in the package",
            p.variant
        );
        assert!(w.dense.iter().all(|d| d.data_type == "fp16"));
        match p.palettize_bits {
            None => {
                assert!(!w.is_palettized());
                assert_eq!(w.bit_depth(), Some(16));
            }
            Some(bits) => {
                assert_eq!(w.palettized.len(), 1);
                assert_eq!(w.palettized[0].bits, u32::from(bits));
                assert_eq!(w.palettized[0].tensors, matrices);
                assert_eq!(w.bit_depth(), Some(u32::from(bits)));
                assert_eq!(
                    i.model.operations.get("constexpr_lut_to_dense"),
                    Some(&matrices)
                );
            }
        }
        let human = inspect_cmd(&[s(&p.path)]);
        assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
        let text = String::from_utf8_lossy(&human.stdout);
        assert!(text.contains(&p.tree_sha256), "{text}");
        assert!(text.contains("compiled size: not compiled"), "{text}");
        sizes.push(p.bytes);
    }
    // 6-bit indices instead of 16-bit weights: well under half the bytes.
    assert!(sizes[1] * 2 < sizes[0], "{sizes:?}");
}

/// `fixtures/coreml/check_encoder.py GGML PACKAGE WAV` in the builder's
/// environment: the package's program evaluated with numpy against
/// Whisper's encoder computed from the GGML weights.
fn check_encoder(ggml: &Path, package: &Path) -> serde_json::Value {
    let cache = harness::fixtures::cache_dir().unwrap();
    let python =
        harness::coreml_fixture::ensure_venv(&cache, harness::fixtures::Progress::Quiet).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(python)
        .arg(root.join("fixtures/coreml/check_encoder.py"))
        .arg(ggml)
        .arg(package)
        .arg(root.join("fixtures/audio/clean-01.wav"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"))
}

#[test]
fn tiny_en_packages_compute_the_encoder_of_the_ggml_weights() {
    let built = tiny_en_encoders();
    for p in &built.packages {
        let r = check_encoder(&built.source, &p.path);
        assert_eq!(r["shape"], serde_json::json!([1, 1500, 384]));
        // The reference ends in a LayerNorm: rows near mean 0, spread 1.
        let std = r["reference_std"].as_f64().unwrap();
        assert!((0.5..2.0).contains(&std), "{r}");
        let rel = r["relative_rms"].as_f64().unwrap();
        let cos = r["cosine"].as_f64().unwrap();
        match p.palettize_bits {
            // Only float16 rounding of biases and input between them.
            None => assert!(rel < 1e-3 && cos > 0.9999, "{}: {r}", p.variant),
            // 6-bit tables: a few percent, the palettization's own error.
            Some(_) => assert!(rel < 0.15 && cos > 0.99, "{}: {r}", p.variant),
        }
    }
}

#[test]
fn an_encoder_built_for_fewer_positions_has_their_window_and_refuses_the_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let mini = synthetic(dir.path(), &SyntheticSpec::miniature());
    let out = dir.path().join("mini-6-encoder.mlpackage");
    let args = [
        "fixtures",
        "coreml-encoder",
        s(&mini),
        s(&out),
        "--audio-ctx",
        "6",
        "--json",
    ];
    let run = memqual(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let built: EncoderPackage = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(built.audio_ctx, Some(6));
    let i = inspection(&inspect_cmd(&[s(&out), "--json"]));
    let shape_of = |features: &[coreml_package::Feature], name: &str| {
        features
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .shape
            .clone()
    };
    // 6 positions: a 12-frame window of the miniature's 4 mels, 32 wide.
    assert_eq!(shape_of(&i.model.inputs, "logmel_data"), vec![1, 4, 12]);
    assert_eq!(shape_of(&i.model.outputs, "output"), vec![1, 6, 32]);
    // Against the model's own 8 positions it does not fit, naming the window.
    let against = inspect_cmd(&[s(&out), "--against", s(&mini)]);
    assert_eq!(against.status.code(), Some(1));
    assert!(
        stderr(&against).contains("input logmel_data shape: expected [1, 4, 16], found [1, 4, 12]"),
        "{}",
        stderr(&against)
    );
    // More positions than the model has are refused before Python runs.
    let too_many = dir.path().join("mini-9-encoder.mlpackage");
    let run = memqual(&[
        "fixtures",
        "coreml-encoder",
        s(&mini),
        s(&too_many),
        "--audio-ctx",
        "9",
    ]);
    assert!(!run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("--audio-ctx 9: ")
            && stderr(&run).contains("has 8 encoder positions"),
        "{}",
        stderr(&run)
    );
    assert!(!too_many.exists());
}

#[test]
fn against_names_the_first_mismatch_and_accepts_the_model_it_was_built_for() {
    let dir = tempfile::tempdir().unwrap();
    let mini = synthetic(dir.path(), &SyntheticSpec::miniature());
    let tiny = &tiny_en_encoders().source;
    let package = committed_miniature();
    // Built for the miniature's 4 mels, 8 positions, 32 wide: tiny.en's
    // 80 x 3000 window is the first thing it lacks.
    let out = inspect_cmd(&[s(&package), "--against", s(tiny)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "does not fit {}: input logmel_data shape: expected [1, 80, 3000], found [1, 4, 16] (and 1 more)",
            s(tiny)
        )),
        "{}",
        stderr(&out)
    );
    let json = inspect_cmd(&[s(&package), "--against", s(tiny), "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let i = inspection(&json);
    assert!(!i.accepted);
    let m = &i.against.unwrap().mismatches;
    assert_eq!(m.len(), 2);
    assert_eq!(m[1].what, "output output shape");
    assert_eq!(
        (m[1].expected.as_str(), m[1].found.as_str()),
        ("[1, 1500, 384]", "[1, 8, 32]")
    );
    // The same package against the model it was built from fits.
    let ok = inspect_cmd(&[s(&package), "--against", s(&mini)]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // And tiny.en's encoder does not fit the miniature.
    let dense = &tiny_en_encoders().packages[0].path;
    let out = inspect_cmd(&[s(dense), "--against", s(&mini)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("input logmel_data shape: expected [1, 4, 16], found [1, 80, 3000]"),
        "{}",
        stderr(&out)
    );
    // --against is for Core ML models only.
    let out = inspect_cmd(&[s(&mini), "--against", s(tiny)]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("--against checks a Core ML model"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_second_build_gives_the_same_tree_digest() {
    let dir = tempfile::tempdir().unwrap();
    let mini = synthetic(dir.path(), &SyntheticSpec::miniature());
    // The miniature's tensors are all under the palettizer's 10,000-weight
    // threshold; the loadable synthetic model (64 wide) has larger ones.
    let wide_dir = tempfile::tempdir().unwrap();
    let wide = synthetic(wide_dir.path(), &SyntheticSpec::loadable());
    for (model, bits) in [(&mini, None), (&wide, Some("6"))] {
        let a = build(model, &dir.path().join("a.mlpackage"), bits);
        let b = build(model, &dir.path().join("b.mlpackage"), bits);
        assert_eq!(a.tree_sha256, b.tree_sha256, "{bits:?}");
        let i = inspection(&inspect_cmd(&[s(&a.path), "--json"]));
        assert_eq!(i.tree.sha256, a.tree_sha256);
        assert_eq!(
            i.model.weights.unwrap().is_palettized(),
            bits.is_some(),
            "{bits:?}"
        );
        std::fs::remove_dir_all(&a.path).unwrap();
        std::fs::remove_dir_all(&b.path).unwrap();
    }
    // An existing output is refused.
    let taken = dir.path().join("taken.mlpackage");
    std::fs::create_dir(&taken).unwrap();
    let out = memqual(&["fixtures", "coreml-encoder", s(&mini), s(&taken)]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
}

#[test]
fn committed_miniature_is_what_the_script_builds() {
    let dir = tempfile::tempdir().unwrap();
    let mini = synthetic(dir.path(), &SyntheticSpec::miniature());
    let fresh = build(&mini, &dir.path().join("miniature-encoder.mlpackage"), None);
    let committed = committed_miniature();
    if std::env::var_os("MEMQUAL_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&committed);
        copy_tree(&fresh.path, &committed);
    }
    let i = inspection(&inspect_cmd(&[s(&committed), "--json"]));
    assert_eq!(
        i.tree.sha256, fresh.tree_sha256,
        "the committed miniature differs from the script's build: re-bless with \
         MEMQUAL_BLESS=1 cargo test -p harness --test it coreml::committed_miniature"
    );
    assert!(i.tree.file_bytes < 200_000);
}

/// A writable copy of the committed miniature.
fn damaged_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("damaged.mlpackage");
    copy_tree(&committed_miniature(), &copy);
    copy
}

const SPEC: &str = "Data/com.apple.CoreML/model.mlmodel";
const WEIGHTS: &str = "Data/com.apple.CoreML/weights/weight.bin";

/// Inspect a damaged package: exit 1, the reason (naming the file) on stderr
/// and in the JSON.
fn refused(package: &Path, wanted: &[&str]) {
    for json in [false, true] {
        let mut args = vec![s(package)];
        if json {
            args.push("--json");
        }
        let out = inspect_cmd(&args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        for w in wanted {
            assert!(stderr(&out).contains(w), "wanted {w:?} in {}", stderr(&out));
        }
        if json {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["accepted"], false);
            assert!(v["rejection"].as_str().unwrap().contains(wanted[0]));
        }
    }
}

#[test]
fn the_committed_miniature_reads_and_damaged_copies_are_refused_naming_the_file() {
    let ok = inspect_cmd(&[s(&committed_miniature()), "--json"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let i = inspection(&ok);
    assert_eq!(i.model.inputs[0].shape, vec![1, 4, 16]);
    assert_eq!(i.model.outputs[0].shape, vec![1, 8, 32]);

    let dir = tempfile::tempdir().unwrap();
    let fresh = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        damaged_copy(&d)
    };

    let p = fresh("no-manifest");
    std::fs::remove_file(p.join("Manifest.json")).unwrap();
    refused(&p, &["neither a .mlpackage (Manifest.json)"]);

    let p = fresh("truncated-spec");
    let spec = std::fs::read(p.join(SPEC)).unwrap();
    std::fs::write(p.join(SPEC), &spec[..spec.len() / 2]).unwrap();
    refused(&p, &["model.mlmodel", "truncated or damaged"]);

    let p = fresh("truncated-weights");
    let w = std::fs::read(p.join(WEIGHTS)).unwrap();
    std::fs::write(p.join(WEIGHTS), &w[..64]).unwrap();
    refused(
        &p,
        &[
            "weight.bin",
            "64 bytes, but the program reads a weight at offset",
        ],
    );

    let p = fresh("no-weights");
    std::fs::remove_file(p.join(WEIGHTS)).unwrap();
    refused(&p, &["weight.bin is missing from the package"]);

    let p = fresh("manifest-escapes");
    let m = std::fs::read_to_string(p.join("Manifest.json")).unwrap();
    std::fs::write(
        p.join("Manifest.json"),
        m.replace("com.apple.CoreML/model.mlmodel", "../../outside.mlmodel"),
    )
    .unwrap();
    refused(&p, &["leaves the package's Data folder"]);

    let p = fresh("manifest-not-json");
    std::fs::write(p.join("Manifest.json"), b"{\"fileFormatVersion\": ").unwrap();
    refused(&p, &["Manifest.json", "not a package manifest"]);

    let p = fresh("symlink");
    std::os::unix::fs::symlink("/etc/passwd", p.join("Data/extra")).unwrap();
    refused(&p, &["Data/extra", "symbolic link"]);

    let p = fresh("fifo");
    nix::unistd::mkfifo(
        &p.join("Data/com.apple.CoreML/pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    refused(&p, &["pipe", "FIFO"]);

    // A specification larger than the reader's bound is refused before it is read.
    let p = fresh("huge-spec");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(p.join(SPEC))
        .unwrap();
    f.set_len(300 << 20).unwrap();
    refused(&p, &["model.mlmodel", "more than the"]);

    // Neither a package nor a compiled model.
    let empty = dir.path().join("empty.mlpackage");
    std::fs::create_dir(&empty).unwrap();
    refused(&empty, &["neither a .mlpackage"]);
}

#[test]
fn a_compiled_model_is_read_where_it_is_text_and_says_what_it_did_not_read() {
    // The layout `xcrun coremlcompiler compile` writes, with a metadata.json
    // holding only the keys memqual reads (no compiled model can be made
    // without a Mac; the file's layout is Apple's, see docs/macos.md).
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("ggml-tiny.en-encoder.mlmodelc");
    std::fs::create_dir_all(c.join("weights")).unwrap();
    std::fs::write(c.join("coremldata.bin"), b"\x00\x01").unwrap();
    std::fs::write(c.join("weights/weight.bin"), vec![0u8; 4096]).unwrap();
    std::fs::write(
        c.join("metadata.json"),
        r#"[{"specificationVersion": 7,
             "modelType": {"name": "MLModelType_mlProgram"},
             "inputSchema": [{"name": "logmel_data", "type": "MultiArray", "dataType": "Float32",
                              "shape": "[1, 80, 3000]", "hasShapeFlexibility": "0"}],
             "outputSchema": [{"name": "output", "type": "MultiArray", "dataType": "Float32",
                               "shape": "[1, 1500, 384]", "hasShapeFlexibility": "0"}],
             "mlProgramOperationTypeHistogram": {"Ios16.constexprLutToDense": 27, "Ios16.conv": 2}}]"#,
    )
    .unwrap();
    let out = inspect_cmd(&[s(&c), "--against", s(&tiny_en_encoders().source), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let i = inspection(&out);
    assert_eq!(i.model.package_bytes, None);
    assert_eq!(i.model.compiled_bytes, Some(i.tree.file_bytes));
    assert_eq!(i.model.spec_version, Some(7));
    assert_eq!(i.model.model_type.as_deref(), Some("mlProgram"));
    assert_eq!(i.model.operations.get("Ios16.conv"), Some(&2));
    let not_read: Vec<&str> = i.model.not_read.iter().map(|n| n.file.as_str()).collect();
    assert_eq!(not_read, ["coremldata.bin", "weights/weight.bin"]);
    let human = inspect_cmd(&[s(&c)]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("package size: - (a compiled model)"),
        "{text}"
    );
    assert!(
        text.contains("not read: coremldata.bin (Core ML's compiled description"),
        "{text}"
    );
    // A schema shape that is not a list is refused, naming the file.
    std::fs::write(
        c.join("metadata.json"),
        r#"[{"inputSchema": [{"name": "logmel_data", "shape": "1 x 80"}]}]"#,
    )
    .unwrap();
    refused(&c, &["metadata.json", "shape \"1 x 80\""]);
}

/// `memqual fixtures coreml-compile PACKAGE OUT` with `PATH` set to `path`.
fn compile_with_path(path: &Path, package: &Path, out: &Path) -> Output {
    Command::new(crate::common::MEMQUAL)
        .args(["fixtures", "coreml-compile", s(package), s(out), "--json"])
        .env("PATH", path)
        .output()
        .expect("memqual runs")
}

/// A stand-in for Xcode's `xcrun` in `dir`: for `coremlcompiler compile PKG
/// OUT` it writes OUT/<name>.mlmodelc as the real compiler names it, or,
/// when `fail` is set, says why on stderr and exits 3.
fn stand_in_xcrun(dir: &Path, fail: bool) {
    let body = if fail {
        "echo 'coremlcompiler: error: model is invalid' >&2\nexit 3\n".to_string()
    } else {
        "[ \"$1 $2\" = 'coremlcompiler compile' ] || exit 9\n\
         name=$(basename \"$3\" .mlpackage)\n\
         mkdir \"$4/$name.mlmodelc\" && printf 'compiled %s' \"$name\" > \"$4/$name.mlmodelc/model.mil\"\n"
            .to_string()
    };
    let script = dir.join("xcrun");
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The compile is timed and recorded beside the compiled model with both
/// tree digests; a failing compiler, a missing one, a second compile into
/// the same place and a package that is not one are each refused by name.
#[test]
fn coreml_compile_records_the_compilers_time_and_both_digests() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("ggml-mini.en-encoder.mlpackage");
    copy_tree(&committed_miniature(), &package);
    let (bin, out) = (dir.path().join("bin"), dir.path().join("out"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // The shell the stand-in needs, and nothing called xcrun but it.
    let path =
        std::env::join_paths([bin.as_path(), Path::new("/bin"), Path::new("/usr/bin")]).unwrap();
    let path = Path::new(&path);

    stand_in_xcrun(&bin, false);
    let run = compile_with_path(path, &package, &out);
    assert!(run.status.success(), "{}", stderr(&run));
    let printed: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    // Named as whisper.cpp looks for it: the package's name, dots kept.
    let compiled = out.join("ggml-mini.en-encoder.mlmodelc");
    assert_eq!(
        std::fs::read_to_string(compiled.join("model.mil")).unwrap(),
        "compiled ggml-mini.en-encoder"
    );
    let record_file = out.join("ggml-mini.en-encoder.mlmodelc.compile.json");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_file).unwrap()).unwrap();
    assert_eq!(record, printed);
    let digest = |p: &Path| sampler::captures::tree_digest(p).unwrap().sha256;
    assert_eq!(record["compiled_tree_sha256"], digest(&compiled));
    assert_eq!(record["package_tree_sha256"], digest(&package));
    assert_eq!(record["compiled"], s(&compiled));
    assert_eq!(record["command"][0], "xcrun");
    assert_eq!(record["command"][3], s(&package));
    assert!(record["wall_ns"].as_u64().unwrap() > 0);

    // Nothing is overwritten.
    let again = compile_with_path(path, &package, &out);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    // A failing compiler: its exit and last stderr line, and no record.
    std::fs::remove_dir_all(&compiled).unwrap();
    std::fs::remove_file(&record_file).unwrap();
    stand_in_xcrun(&bin, true);
    let failed = compile_with_path(path, &package, &out);
    assert!(!failed.status.success());
    let text = stderr(&failed);
    assert!(
        text.contains("exit status: 3") && text.contains("model is invalid"),
        "{text}"
    );
    assert!(!record_file.exists());

    // No compiler at all (any host but a Mac with Xcode's tools).
    std::fs::remove_file(bin.join("xcrun")).unwrap();
    let missing = compile_with_path(path, &package, &out);
    assert!(
        stderr(&missing).contains("only on macOS"),
        "{}",
        stderr(&missing)
    );

    // Not a package.
    let not = compile_with_path(path, &out, &out);
    assert!(
        stderr(&not).contains("not an .mlpackage directory"),
        "{}",
        stderr(&not)
    );
}
