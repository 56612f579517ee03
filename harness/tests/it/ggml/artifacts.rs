//! Decoder-only derivation, its receipt, and the negative-control corpus.

use crate::common::model;
use ggml_container::corpus::{build_corpus, rejection_of};
use ggml_container::derive::{Derivation, derive, derive_decoder, receipt_path, verify_derivation};
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Defect, Expect, TensorClass, inspect};
use harness::artifact::provenance::current;
use std::path::Path;

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

/// Derive, verify, then check that flipping bytes of OUT or the receipt fails.
fn derive_and_verify(
    src: &Path,
    dir: &Path,
    flips: &[f64],
) -> ggml_container::derive::DerivationReceipt {
    let out = dir.join("decoder-only.bin");
    let receipt = derive_decoder(src, &out, &current()).unwrap();
    let source = inspect(src, Expect::Full).unwrap();
    let stripped = inspect(&out, Expect::DecoderOnly).unwrap();
    assert_eq!(
        stripped.file_len,
        source.prefix_len + source.totals.decoder.record_bytes
    );
    assert_eq!(receipt.output.bytes, stripped.file_len);
    assert_eq!(receipt.output.sha256, stripped.file_sha256);
    assert_eq!(receipt.prefix.sha256, source.prefix_sha256);
    assert_eq!(
        receipt.totals.removed_record_bytes,
        source.totals.native_encoder.record_bytes
    );
    assert_eq!(
        receipt.totals.retained_payload_bytes,
        source.totals.decoder.payload_bytes
    );
    let rpath = receipt_path(&out);
    assert_eq!(verify_derivation(src, &out, &rpath).unwrap(), receipt);

    for &fraction in flips {
        for target in [&out, &rpath] {
            let len = std::fs::metadata(target).unwrap().len() as usize;
            let at = ((len as f64 * fraction) as usize).min(len - 1);
            flip(target, at);
            assert!(
                verify_derivation(src, &out, &rpath).is_err(),
                "flipping byte {at} of {} went unnoticed",
                target.display()
            );
            flip(target, at);
        }
    }
    assert!(verify_derivation(src, &out, &rpath).is_ok());
    receipt
}

#[test]
fn synthetic_derivation_is_lossless_and_every_byte_is_bound() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.bin");
    write_file(&SyntheticSpec::miniature(), &src).unwrap();
    // 256 positions spread over the output and over the receipt.
    let flips: Vec<f64> = (0..256).map(|i| i as f64 / 256.0).collect();
    let receipt = derive_and_verify(&src, dir.path(), &flips);
    assert_eq!((receipt.retained.len(), receipt.removed.len()), (28, 22));
    assert_eq!(receipt.source_inventory.len(), 50);
    assert!(
        receipt
            .removed
            .iter()
            .all(|r| r.facts.name.starts_with("encoder."))
    );
    assert!(
        receipt
            .retained
            .iter()
            .enumerate()
            .all(|(i, r)| r.output_index == i)
    );
}

#[test]
fn tiny_en_derivation() {
    let src = model("tiny.en");
    let dir = tempfile::tempdir().unwrap();
    let receipt = derive_and_verify(&src, dir.path(), &[0.0, 0.001, 0.007, 0.3, 0.999]);
    assert_eq!((receipt.retained.len(), receipt.removed.len()), (100, 67));
    assert_eq!(
        (receipt.prefix.bytes, receipt.source.bytes),
        (586_218, 77_704_698)
    );
    assert_eq!(
        receipt.output.bytes,
        586_218 + receipt.totals.retained_record_bytes
    );
    // Stripped output = full file minus every encoder record byte.
    assert_eq!(
        receipt.output.bytes,
        77_704_698 - receipt.totals.removed_record_bytes
    );
}

#[test]
fn derivation_refuses_a_defective_source_and_keeps_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.bin");
    write_file(&SyntheticSpec::miniature(), &src).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    bytes.push(0);
    std::fs::write(&src, bytes).unwrap();
    let out = dir.path().join("out.bin");
    let err = derive_decoder(&src, &out, &current()).unwrap_err();
    assert!(err.to_string().contains("trailing_bytes"), "{err}");
    assert!(!out.exists());
}

#[test]
fn corpus_cases_are_rejected_for_their_named_reason() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.bin");
    write_file(&SyntheticSpec::miniature(), &src).unwrap();
    let corpus = dir.path().join("corpus");
    let manifest = build_corpus(&src, &corpus).unwrap();
    let cases: Vec<&str> = manifest.cases.iter().map(|c| c.case.as_str()).collect();
    assert_eq!(
        cases,
        [
            "missing-decoder-record",
            "duplicate-decoder-record",
            "encoder-record-in-stripped",
            "wrong-tensor-type",
            "wrong-dims",
            "wrong-payload-length",
            "truncated-final-payload",
            "header-only",
            "trailing-bytes",
            "renamed-tensor",
            "negative-name-length",
            "bad-magic",
            "vocab-count-beyond-file",
        ]
    );
    // The manifest on disk is the one returned, and every file is rejected
    // exactly as it says, independently of the builder's own check.
    let text = std::fs::read_to_string(corpus.join("manifest.json")).unwrap();
    let on_disk: ggml_container::corpus::CorpusManifest = serde_json::from_str(&text).unwrap();
    assert_eq!(on_disk, manifest);
    for case in &manifest.cases {
        let e = inspect(&corpus.join(&case.file), case.expect).unwrap_err();
        assert_eq!(rejection_of(&e), case.rejection, "{}", case.case);
    }
    let by = |name: &str| manifest.cases.iter().find(|c| c.case == name).unwrap();
    assert_eq!(by("header-only").bytes, 48);
    assert_eq!(by("trailing-bytes").bytes, manifest.source_bytes + 1);
    assert_eq!(by("encoder-record-in-stripped").expect, Expect::DecoderOnly);
    assert_eq!(
        by("encoder-record-in-stripped").rejection.tensor.as_deref(),
        Some("encoder.conv1.bias")
    );
    let source = inspect(&src, Expect::Full).unwrap();
    let decoders = source
        .tensors
        .iter()
        .filter(|t| t.class == TensorClass::Decoder)
        .count();
    assert_eq!(
        by("encoder-record-in-stripped").rejection.record,
        Some(decoders)
    );
}

#[test]
fn encoder_only_derivation_copies_every_encoder_tensor_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.bin");
    write_file(&SyntheticSpec::loadable(), &src).unwrap();
    let out = dir.path().join("encoder-only.bin");
    let receipt = derive(&src, &out, Derivation::EncoderOnly, &current()).unwrap();
    let source = inspect(&src, Expect::Full).unwrap();
    let derived = inspect(&out, Expect::EncoderOnly).unwrap();
    assert_eq!(derived.expect, Expect::EncoderOnly);
    assert_eq!(derived.hparams, source.hparams);
    // Every encoder tensor, compared by its bytes in both files (not by digest).
    let (src_bytes, out_bytes) = (std::fs::read(&src).unwrap(), std::fs::read(&out).unwrap());
    assert_eq!(
        &out_bytes[..derived.prefix_len as usize],
        &src_bytes[..source.prefix_len as usize]
    );
    let encoder: Vec<_> = source
        .tensors
        .iter()
        .filter(|t| t.class == TensorClass::NativeEncoder)
        .collect();
    assert_eq!(encoder.len(), 7 + 15); // one encoder layer
    assert_eq!(derived.tensors.len(), encoder.len());
    for (s, o) in encoder.iter().zip(&derived.tensors) {
        assert_eq!((&o.name, o.ggml_type, &o.ne), (&s.name, s.ggml_type, &s.ne));
        assert_eq!(
            &out_bytes[o.payload_offset as usize..o.end() as usize],
            &src_bytes[s.payload_offset as usize..s.end() as usize],
            "{}",
            s.name
        );
    }
    assert!(
        derived
            .tensors
            .iter()
            .all(|t| t.class == TensorClass::NativeEncoder)
    );
    assert_eq!(
        derived.file_len,
        source.prefix_len + source.totals.native_encoder.record_bytes
    );
    // The receipt: what went is the whole decoder, token embedding included.
    assert_eq!(receipt.derivation, Derivation::EncoderOnly.sentence());
    assert_eq!(
        receipt.totals.removed_records,
        source.totals.decoder.records
    );
    assert_eq!(
        receipt.totals.removed_payload_bytes,
        source.totals.decoder.payload_bytes
    );
    assert!(
        receipt
            .removed
            .iter()
            .any(|r| r.facts.name == "decoder.token_embedding.weight")
    );
    assert_eq!(receipt.output.sha256, derived.file_sha256);
    let rpath = receipt_path(&out);
    assert_eq!(verify_derivation(&src, &out, &rpath).unwrap(), receipt);
    for fraction in [0.0, 0.01, 0.5, 0.999] {
        for target in [&out, &rpath] {
            let len = std::fs::metadata(target).unwrap().len() as usize;
            let at = ((len as f64 * fraction) as usize).min(len - 1);
            flip(target, at);
            assert!(verify_derivation(&src, &out, &rpath).is_err(), "byte {at}");
            flip(target, at);
        }
    }
}

#[test]
fn an_encoder_only_file_is_refused_under_any_other_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.bin");
    write_file(&SyntheticSpec::miniature(), &src).unwrap();
    let enc = dir.path().join("encoder-only.bin");
    let dec = dir.path().join("decoder-only.bin");
    derive(&src, &enc, Derivation::EncoderOnly, &current()).unwrap();
    derive(&src, &dec, Derivation::DecoderOnly, &current()).unwrap();
    // As a full model: every decoder tensor is missing.
    let e = inspect(&enc, Expect::Full).unwrap_err();
    let Defect::MissingTensors { names } = &e.defect else {
        panic!("{e}");
    };
    assert_eq!(names.len(), 28);
    assert!(names.iter().all(|n| n.starts_with("decoder.")));
    assert!(names.contains(&"decoder.token_embedding.weight".to_string()));
    // As decoder-only: its first record is an encoder tensor, unknown there.
    let e = inspect(&enc, Expect::DecoderOnly).unwrap_err();
    assert_eq!(e.defect, Defect::UnknownTensor);
    assert_eq!(e.record, Some(0));
    // A decoder-only file and a full one are not encoder-only.
    let e = inspect(&dec, Expect::EncoderOnly).unwrap_err();
    assert_eq!((e.defect, e.record), (Defect::UnknownTensor, Some(0)));
    assert!(inspect(&src, Expect::EncoderOnly).is_err());
    // A receipt verifies only the kind it names.
    let err = verify_derivation(&src, &dec, &receipt_path(&enc)).unwrap_err();
    assert!(err.to_string().contains("encoder-only"), "{err}");
}
