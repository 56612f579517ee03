//! The strict parser on synthetic models: exact inventories, and every kind of
//! defect rejected with the right kind, offset and record.

use ggml_container::synthetic::{SyntheticSpec, to_bytes};
use ggml_container::{
    Defect, Expect, GgmlType, GgmlWriter, Inventory, ParseError, Section, TensorClass, inspect,
    inspect_reader,
};
use std::io::Cursor;

fn parse(bytes: &[u8], expect: Expect) -> Result<Inventory, ParseError> {
    inspect_reader(Cursor::new(bytes), bytes.len() as u64, expect)
}

fn miniature() -> (Vec<u8>, Inventory) {
    let bytes = to_bytes(&SyntheticSpec::miniature()).unwrap();
    let inv = parse(&bytes, Expect::Full).unwrap();
    (bytes, inv)
}

fn record<'a>(inv: &'a Inventory, name: &str) -> &'a ggml_container::TensorRecord {
    inv.tensors.iter().find(|t| t.name == name).unwrap()
}

fn splice(bytes: &[u8], at: u64, remove: u64, insert: &[u8]) -> Vec<u8> {
    let (at, remove) = (at as usize, remove as usize);
    [&bytes[..at], insert, &bytes[at + remove..]].concat()
}

fn rejected(bytes: &[u8], expect: Expect) -> ParseError {
    match parse(bytes, expect) {
        Ok(inv) => panic!("accepted a defective file of {} bytes", inv.file_len),
        Err(e) => e,
    }
}

#[test]
fn synthetic_model_round_trips_with_exact_inventory() {
    let (bytes, inv) = miniature();
    // 1 encoder layer: 7 globals + 15; 1 decoder layer: 4 globals + 24.
    assert_eq!(inv.tensors.len(), 50);
    assert_eq!(inv.totals.native_encoder.records, 22);
    assert_eq!(inv.totals.decoder.records, 28);
    // F16: 2 conv weights + 6 encoder and 10 decoder matrices + token embedding.
    assert_eq!(inv.count_of(GgmlType::F16), 19);
    assert_eq!(inv.count_of(GgmlType::F32), 31);
    // header 48 + mel (8 + 4 x 201 x 4) + vocab (4 + 16 x 5).
    assert_eq!(inv.mel.end, 48 + 8 + 4 * 201 * 4);
    assert_eq!(inv.prefix_len, inv.mel.end + 4 + 16 * 5);
    assert_eq!(inv.file_len, bytes.len() as u64);
    let total: u64 = inv.tensors.iter().map(|t| t.record_len()).sum();
    assert_eq!(inv.prefix_len + total, inv.file_len);
    assert_eq!(
        inv.totals.native_encoder.record_bytes + inv.totals.decoder.record_bytes,
        total
    );
    // Records are contiguous, in order, and their digests are of their payloads.
    let mut at = inv.prefix_len;
    for (i, t) in inv.tensors.iter().enumerate() {
        assert_eq!((t.index, t.record_offset), (i, at));
        at = t.end();
    }
    let te = record(&inv, "decoder.token_embedding.weight");
    assert_eq!(te.ne, vec![32, 64]);
    assert_eq!(te.payload_len, 32 * 64 * 2);
    let payload = &bytes[te.payload_offset as usize..te.end() as usize];
    assert_eq!(te.payload_sha256, sha256(payload));
    assert_eq!(inv.file_sha256, sha256(&bytes));
    assert_eq!(inv.prefix_sha256, sha256(&bytes[..inv.prefix_len as usize]));
}

#[test]
fn loadable_synthetic_model_is_a_few_megabytes_and_parses_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synthetic.bin");
    let spec = SyntheticSpec::loadable();
    let written = ggml_container::synthetic::write_file(&spec, &path).unwrap();
    let inv = inspect(&path, Expect::Full).unwrap();
    assert_eq!(inv.file_len, written);
    assert!(written < 8 << 20, "{written} bytes");
    assert_eq!(inv.hparams.n_vocab, 51864);
    assert!(!inv.multilingual);
    assert_eq!(inv.tensors.len(), 50);
    // Deterministic: the same spec gives the same bytes.
    assert_eq!(to_bytes(&spec).unwrap(), std::fs::read(&path).unwrap());
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn bad_magic_and_short_headers() {
    let (bytes, _) = miniature();
    let e = rejected(&splice(&bytes, 0, 4, b"GGML"), Expect::Full);
    assert_eq!((e.defect.code(), e.offset), ("bad_magic", 0));
    let e = rejected(&bytes[..30], Expect::Full);
    assert_eq!(
        e.defect,
        Defect::Truncated {
            section: Section::Header,
            needed: 48,
            available: 30
        }
    );
    let e = rejected(&bytes[..48], Expect::Full);
    assert_eq!((e.defect.code(), e.offset), ("truncated", 48));
    let e = rejected(&bytes[..1000], Expect::Full);
    assert!(matches!(
        e.defect,
        Defect::Truncated {
            section: Section::MelFilters,
            ..
        }
    ));
}

#[test]
fn impossible_headers_and_blocks() {
    let (bytes, inv) = miniature();
    // n_audio_state = 0
    let e = rejected(&splice(&bytes, 12, 4, &0i32.to_le_bytes()), Expect::Full);
    assert_eq!(e.defect.code(), "bad_hparams");
    // ftype 5 (no longer a ggml ftype)
    let e = rejected(&splice(&bytes, 44, 4, &5i32.to_le_bytes()), Expect::Full);
    assert_eq!(e.defect.code(), "bad_hparams");
    // mel n_fft 200
    let e = rejected(&splice(&bytes, 52, 4, &200i32.to_le_bytes()), Expect::Full);
    assert_eq!((e.defect.code(), e.offset), ("bad_mel_dims", 48));
    // vocab count far beyond the file, negative, and above n_vocab
    let at = inv.vocab.offset;
    for count in [i32::MAX, -1, 65] {
        let e = rejected(&splice(&bytes, at, 4, &count.to_le_bytes()), Expect::Full);
        assert_eq!((e.defect.code(), e.offset), ("bad_vocab_count", at));
    }
    // first token's length beyond the file
    let e = rejected(
        &splice(&bytes, at + 4, 4, &u32::MAX.to_le_bytes()),
        Expect::Full,
    );
    assert_eq!((e.defect.code(), e.offset), ("bad_token_length", at + 4));
}

#[test]
fn truncated_final_payload_names_the_last_record() {
    let (bytes, inv) = miniature();
    let last = inv.tensors.last().unwrap();
    let e = rejected(&bytes[..bytes.len() - 1], Expect::Full);
    assert_eq!(e.record, Some(last.index));
    assert_eq!(e.tensor.as_deref(), Some(last.name.as_str()));
    assert_eq!(e.offset, last.payload_offset);
    assert_eq!(
        e.defect,
        Defect::Truncated {
            section: Section::Payload,
            needed: last.payload_len,
            available: last.payload_len - 1
        }
    );
    // Cut inside a record header and inside a name.
    let e = rejected(&bytes[..last.record_offset as usize + 5], Expect::Full);
    assert_eq!(
        (e.defect.code(), e.offset),
        ("truncated", last.record_offset)
    );
    let e = rejected(&bytes[..last.record_offset as usize + 22], Expect::Full);
    assert!(matches!(
        e.defect,
        Defect::Truncated {
            section: Section::TensorName,
            ..
        }
    ));
}

#[test]
fn malformed_record_headers() {
    let (bytes, inv) = miniature();
    let r = &inv.tensors[5];
    let at = r.record_offset;
    let e = rejected(&splice(&bytes, at, 4, &7i32.to_le_bytes()), Expect::Full);
    assert_eq!(e.defect, Defect::BadDimCount { n_dims: 7 });
    assert_eq!(e.offset, at);
    let e = rejected(
        &splice(&bytes, at + 4, 4, &(-5i32).to_le_bytes()),
        Expect::Full,
    );
    assert_eq!((e.defect.code(), e.offset), ("bad_name_length", at));
    let e = rejected(
        &splice(&bytes, at + 8, 4, &13i32.to_le_bytes()),
        Expect::Full,
    );
    assert_eq!(e.defect, Defect::UnsupportedType { type_id: 13 });
    assert_eq!(e.record, Some(5));
    let e = rejected(
        &splice(&bytes, at + 12, 4, &(-1i32).to_le_bytes()),
        Expect::Full,
    );
    assert_eq!(e.defect, Defect::BadDim { axis: 0, value: -1 });
}

#[test]
fn unknown_renamed_tensor() {
    let (bytes, inv) = miniature();
    let r = record(&inv, "decoder.ln.bias");
    let name_at = r.payload_offset - r.name.len() as u64;
    let e = rejected(
        &splice(
            &bytes,
            name_at,
            15,
            b"decoder.ln.bias"
                .map(|b| if b == b's' { b'z' } else { b })
                .as_slice(),
        ),
        Expect::Full,
    );
    assert_eq!(e.defect, Defect::UnknownTensor);
    assert_eq!(e.tensor.as_deref(), Some("decoder.ln.biaz"));
    assert_eq!((e.record, e.offset), (Some(r.index), r.record_offset));
}

#[test]
fn duplicate_and_missing_records() {
    let (bytes, inv) = miniature();
    let r = record(&inv, "decoder.blocks.0.attn.key.weight");
    let copy = &bytes[r.record_offset as usize..r.end() as usize];
    let e = rejected(&splice(&bytes, r.end(), 0, copy), Expect::Full);
    assert_eq!(
        e.defect,
        Defect::DuplicateTensor {
            first_record: r.index
        }
    );
    assert_eq!((e.record, e.offset), (Some(r.index + 1), r.end()));

    let without = splice(&bytes, r.record_offset, r.record_len(), &[]);
    let e = rejected(&without, Expect::Full);
    assert_eq!(
        e.defect,
        Defect::MissingTensors {
            names: vec![r.name.clone()]
        }
    );
    assert_eq!(e.offset, without.len() as u64);
}

/// Rewrite one record with another header (same payload unless given).
fn rewrite(
    bytes: &[u8],
    inv: &Inventory,
    name: &str,
    type_id: i32,
    ne: &[u64],
    payload: Option<&[u8]>,
) -> Vec<u8> {
    let r = record(inv, name);
    let mut w = GgmlWriter::new(Vec::new());
    w.record_header(name, type_id, ne).unwrap();
    w.raw(payload.unwrap_or(&bytes[r.payload_offset as usize..r.end() as usize]))
        .unwrap();
    splice(bytes, r.record_offset, r.record_len(), &w.into_inner())
}

#[test]
fn dims_and_type_the_loader_would_not_read() {
    let (bytes, inv) = miniature();
    // A 1-D conv bias: same element count, fails whisper.cpp's ne[0] check.
    let e = rejected(
        &rewrite(&bytes, &inv, "encoder.conv1.bias", 0, &[32], None),
        Expect::Full,
    );
    assert_eq!(
        e.defect,
        Defect::DimsMismatch {
            expected: vec![1, 32],
            found: vec![32]
        }
    );
    assert_eq!(e.record, Some(record(&inv, "encoder.conv1.bias").index));
    // A bias stored as F16 (half the bytes): the loader reads it as F32.
    let half = vec![0u8; 64];
    let e = rejected(
        &rewrite(&bytes, &inv, "decoder.ln.bias", 1, &[32], Some(&half)),
        Expect::Full,
    );
    assert_eq!(
        e.defect,
        Defect::TypeMismatch {
            expected: GgmlType::F32,
            found: GgmlType::F16
        }
    );
}

#[test]
fn wrong_payload_length_is_named_on_the_record_that_has_it() {
    let (bytes, inv) = miniature();
    let r = &inv.tensors[10];
    for delta in [-2i64, 3] {
        let damaged = if delta < 0 {
            splice(&bytes, r.end() - 2, 2, &[])
        } else {
            splice(&bytes, r.end(), 0, &[0xAB; 3])
        };
        let e = rejected(&damaged, Expect::Full);
        assert_eq!(
            e.defect,
            Defect::PayloadLength {
                expected: r.payload_len,
                found: (r.payload_len as i64 + delta) as u64
            }
        );
        assert_eq!((e.record, e.offset), (Some(10), r.payload_offset));
    }
}

#[test]
fn trailing_bytes_after_a_complete_model() {
    let (bytes, _) = miniature();
    for tail in [&[0u8][..], &[1, 2, 3], &[0xFF; 100]] {
        let e = rejected(&[&bytes[..], tail].concat(), Expect::Full);
        assert_eq!(
            e.defect,
            Defect::TrailingBytes {
                bytes: tail.len() as u64
            }
        );
        assert_eq!(e.offset, bytes.len() as u64);
    }
}

/// The decoder-only form of a model: prefix plus decoder records.
fn decoder_only(bytes: &[u8], inv: &Inventory) -> Vec<u8> {
    let mut out = bytes[..inv.prefix_len as usize].to_vec();
    for t in inv
        .tensors
        .iter()
        .filter(|t| t.class == TensorClass::Decoder)
    {
        out.extend_from_slice(&bytes[t.record_offset as usize..t.end() as usize]);
    }
    out
}

#[test]
fn decoder_only_expectation() {
    let (bytes, inv) = miniature();
    let stripped = decoder_only(&bytes, &inv);
    let dec = parse(&stripped, Expect::DecoderOnly).unwrap();
    assert_eq!(dec.tensors.len(), 28);
    assert_eq!(dec.totals.native_encoder.records, 0);
    assert_eq!(dec.prefix_sha256, inv.prefix_sha256);
    // Stock expectations: the encoder is missing.
    let e = rejected(&stripped, Expect::Full);
    assert!(matches!(e.defect, Defect::MissingTensors { ref names } if names.len() == 22));
    // A full model under DecoderOnly: its first encoder record is unknown.
    let e = rejected(&bytes, Expect::DecoderOnly);
    assert_eq!(e.defect, Defect::UnknownTensor);
    assert_eq!(e.tensor.as_deref(), Some("encoder.positional_embedding"));
    // An encoder record reintroduced at the end of the stripped file.
    let conv = record(&inv, "encoder.conv1.bias");
    let again = [
        &stripped[..],
        &bytes[conv.record_offset as usize..conv.end() as usize],
    ]
    .concat();
    let e = rejected(&again, Expect::DecoderOnly);
    assert_eq!(e.defect, Defect::UnknownTensor);
    assert_eq!((e.record, e.offset), (Some(28), stripped.len() as u64));
}

#[test]
fn missing_file_is_an_io_error() {
    let e = inspect(std::path::Path::new("/nonexistent/model.bin"), Expect::Full).unwrap_err();
    assert_eq!(e.defect.code(), "io");
    assert!(e.to_string().contains("byte offset 0"));
}
