//! ggml's quantizer through whisper-rs (feature `quantize`).
#![cfg(feature = "quantize")]

use ggml_container::quantize::quantize;
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Expect, GgmlType, inspect};
use std::path::PathBuf;

fn cached_model(name: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("MEMQUAL_CACHE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("memqual")))?;
    Some(cache.join("models").join(format!("ggml-{name}-f16.bin"))).filter(|p| p.exists())
}

#[test]
fn tiny_en_q5_0_equals_the_reference_file() {
    let Some(src) = cached_model("tiny.en") else {
        eprintln!("skipped: run `memqual fixtures model tiny.en`");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q5_0.bin");
    let summary = quantize(&src, &out, GgmlType::Q5_0).unwrap();
    assert_eq!(summary.output.file_len, 29_889_210);
    assert_eq!(
        summary.output.file_sha256,
        "1ff1e7c8ed918010d9a7ae317f8891f8d7f02e7a6db13af61f5d67cb985012f6"
    );
    assert_eq!((summary.ftype.raw, summary.quantized_tensors), (2008, 65));
    let inv = &summary.output;
    assert_eq!(inv.count_of(GgmlType::F32), 100);
    assert_eq!(inv.count_of(GgmlType::F16), 2);
    assert_eq!(inv.count_of(GgmlType::Q5_0), 65);
}

#[test]
fn base_q5_0_equals_the_reference_file() {
    let Some(src) = cached_model("base") else {
        eprintln!("skipped: run `memqual fixtures model base`");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q5_0.bin");
    let summary = quantize(&src, &out, GgmlType::Q5_0).unwrap();
    assert_eq!(summary.output.file_len, 55_295_433);
    assert_eq!(
        summary.output.file_sha256,
        "18bddf7ad73d2e40de5c2c992e8471adf9a9c46bacc9e1fbadbc7e165c3c8f8a"
    );
    assert_eq!(summary.output.count_of(GgmlType::Q5_0), 97);
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
