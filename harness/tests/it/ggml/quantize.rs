//! ggml's quantizer through whisper-rs (ggml-container's feature `quantize`,
//! which the harness enables).

use crate::common::model;
use ggml_container::quantize::quantize;
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Expect, GgmlType, inspect};

/// Quantize the cached F16 `name` to Q5_0 and check the reference file.
fn reference_q5_0(name: &str, bytes: u64, sha256: &str, quantized: usize) {
    let src = model(name);
    let dir = tempfile::tempdir().unwrap();
    let summary = quantize(&src, &dir.path().join("q5_0.bin"), GgmlType::Q5_0).unwrap();
    assert_eq!(
        (summary.output.file_len, summary.output.file_sha256.as_str()),
        (bytes, sha256)
    );
    assert_eq!(
        (summary.ftype.raw, summary.quantized_tensors),
        (2008, quantized)
    );
    // Conv weights stay F16; everything else not quantized is F32.
    let inv = &summary.output;
    assert_eq!(inv.count_of(GgmlType::Q5_0), quantized);
    assert_eq!(inv.count_of(GgmlType::F16), 2);
    assert_eq!(
        inv.count_of(GgmlType::F32),
        inv.tensors.len() - quantized - 2
    );
}

#[test]
fn tiny_en_q5_0_equals_the_reference_file() {
    let sha = "1ff1e7c8ed918010d9a7ae317f8891f8d7f02e7a6db13af61f5d67cb985012f6";
    reference_q5_0("tiny.en", 29_889_210, sha, 65);
}

#[test]
fn base_q5_0_equals_the_reference_file() {
    let sha = "18bddf7ad73d2e40de5c2c992e8471adf9a9c46bacc9e1fbadbc7e165c3c8f8a";
    reference_q5_0("base", 55_295_433, sha, 97);
}

#[test]
fn every_target_type_gives_a_strictly_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f16.bin");
    write_file(&SyntheticSpec::miniature(), &src).unwrap();
    let source = inspect(&src, Expect::Full).unwrap();
    for (target, block_bytes) in [
        (GgmlType::Q4_0, 18),
        (GgmlType::Q5_0, 22),
        (GgmlType::Q5_1, 24),
        (GgmlType::Q8_0, 34),
    ] {
        let out = dir.path().join(format!("{target}.bin"));
        let s = quantize(&src, &out, target).unwrap();
        let inv = inspect(&out, Expect::Full).unwrap();
        assert_eq!(inv, s.output);
        assert_eq!(inv.ftype.weight_type, target);
        assert_eq!(inv.ftype.quantization_version, 2);
        // 16 matrices + token embedding quantized; 2 conv weights stay F16.
        assert_eq!((inv.count_of(target), inv.count_of(GgmlType::F16)), (17, 2));
        assert_eq!(inv.prefix_sha256.len(), 64);
        let te = inv
            .tensors
            .iter()
            .find(|t| t.name == "decoder.token_embedding.weight")
            .unwrap();
        // ne [32, 64]: one block per row, 64 rows.
        assert_eq!(te.payload_len, block_bytes * 64);
        // Same records in the same order; mel and vocabulary untouched.
        let names = |i: &ggml_container::Inventory| {
            i.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&inv), names(&source));
        assert_eq!(inv.prefix_len, source.prefix_len);
    }
    // A quantized source is refused.
    let q = dir.path().join("q5_0.bin");
    assert!(quantize(&q, &dir.path().join("again.bin"), GgmlType::Q8_0).is_err());
    assert!(quantize(&src, &dir.path().join("x.bin"), GgmlType::F16).is_err());
}

/// The ladder's stage 3: a decoder-only derivative quantized stays
/// decoder-only, and each of its tensors is exactly the whole-model
/// quantization's (the quantizer works per tensor, so dropping the encoder
/// changes no decoder byte).
#[test]
fn a_decoder_only_artifact_quantizes_to_the_whole_models_decoder_tensors() {
    use ggml_container::derive::derive_decoder;
    use ggml_container::quantize::quantize_as;
    let src = model("tiny.en");
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("decoder-f16.bin");
    derive_decoder(&src, &stripped, &harness::artifact::provenance::current()).unwrap();
    // Without the flag the stripped file is refused: it is not a full model.
    assert!(quantize(&stripped, &dir.path().join("refused.bin"), GgmlType::Q5_0).is_err());
    let decoder = quantize_as(
        &stripped,
        &dir.path().join("decoder-q5_0.bin"),
        GgmlType::Q5_0,
        Expect::DecoderOnly,
    )
    .unwrap();
    assert_eq!(decoder.output.expect, Expect::DecoderOnly);
    assert_eq!(decoder.quantized_tensors, 41);
    let whole = quantize(&src, &dir.path().join("q5_0.bin"), GgmlType::Q5_0).unwrap();
    for t in &decoder.output.tensors {
        let same = whole
            .output
            .tensors
            .iter()
            .find(|w| w.name == t.name)
            .unwrap();
        assert_eq!(
            (t.ggml_type, &t.payload_sha256),
            (same.ggml_type, &same.payload_sha256),
            "{}",
            t.name
        );
    }
    assert_eq!(
        decoder.output.tensors.len() + 67,
        whole.output.tensors.len()
    );
}
