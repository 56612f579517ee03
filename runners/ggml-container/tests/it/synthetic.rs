//! Synthetic models at real Whisper shapes: determinism, the streamed
//! writer's layout against the strict parser, and large-v3-turbo's header,
//! inventory and state arithmetic (from the layout: writing 1.6 GB in a test
//! would take the disk and a minute for what the base test already proves,
//! that the writer puts every record where its layout says).

use ggml_container::digest::sha256_file;
use ggml_container::estimate::{EstimateOptions, estimate};
use ggml_container::synthetic::{Preset, SyntheticSpec, to_bytes, write_new_file};
use ggml_container::{Expect, GgmlType, TensorClass, inspect};

#[test]
fn the_same_preset_and_seed_give_the_same_digest_and_another_seed_another() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, seed: u64| {
        let path = dir.path().join(name);
        let mut last = 0;
        let written = write_new_file(&Preset::Loadable.spec(seed), &path, &mut |n| {
            assert!(n >= last, "progress went back from {last} to {n}");
            last = n;
        })
        .unwrap();
        assert_eq!(last, written.bytes);
        // The digest hashed while writing is the file's.
        assert_eq!(written.sha256, sha256_file(&path).unwrap());
        assert_eq!(written.bytes, std::fs::metadata(&path).unwrap().len());
        written
    };
    let (a, b, other) = (write("a.bin", 1), write("b.bin", 1), write("c.bin", 2));
    assert_eq!(a, b);
    assert_ne!(a.sha256, other.sha256);
    assert_eq!(a.bytes, other.bytes);
    // The default preset is `SyntheticSpec::loadable()`, byte for byte.
    assert_eq!(
        std::fs::read(dir.path().join("a.bin")).unwrap(),
        to_bytes(&SyntheticSpec::loadable()).unwrap()
    );
    // A new file never replaces one.
    let again = write_new_file(
        &Preset::Loadable.spec(1),
        &dir.path().join("a.bin"),
        &mut |_| {},
    );
    assert!(again.is_err());
}

#[test]
fn a_steered_model_differs_from_a_random_one_only_in_its_steered_tensors() {
    let random = SyntheticSpec {
        vocab_tokens: 50_256,
        ..SyntheticSpec::loadable()
    };
    let steered = SyntheticSpec {
        steer_to_eot: true,
        ..random
    };
    let parse = |spec: &SyntheticSpec| {
        let bytes = to_bytes(spec).unwrap();
        let inv = ggml_container::inspect_reader(
            std::io::Cursor::new(&bytes),
            bytes.len() as u64,
            Expect::Full,
        )
        .unwrap();
        (bytes, inv)
    };
    let ((_, a), (bytes, b)) = (parse(&random), parse(&steered));
    let changed: Vec<&str> = a
        .tensors
        .iter()
        .zip(&b.tensors)
        .filter(|(x, y)| x.payload_sha256 != y.payload_sha256)
        .map(|(x, _)| x.name.as_str())
        .collect();
    assert_eq!(
        changed,
        [
            "decoder.token_embedding.weight",
            "decoder.ln.weight",
            "decoder.ln.bias"
        ]
    );
    // The rows whisper.cpp's logits come from: <|endoftext|> (50,256 in an
    // English-only vocabulary) sums to 40, token 256 to 30.
    let emb = b
        .tensors
        .iter()
        .find(|t| t.name == "decoder.token_embedding.weight")
        .unwrap();
    let row_sum = |row: usize| -> f32 {
        let at = emb.payload_offset as usize + row * 64 * 2;
        bytes[at..at + 128]
            .chunks(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .sum()
    };
    assert_eq!(row_sum(50_256), 40.0);
    assert_eq!(row_sum(256), 30.0);
    assert!(row_sum(257).abs() < 10.0);
    // The word token's bytes are in the vocabulary block.
    let word = b" synthetic";
    let vocab = &bytes[b.vocab.offset as usize..b.vocab.end as usize];
    assert!(vocab.windows(word.len()).any(|w| w == word));
    assert_eq!(b.vocab.count, 50_256);
}

#[test]
fn the_base_preset_as_written_parses_to_exactly_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.bin");
    let spec = Preset::Base.spec(1);
    let layout = spec.layout().unwrap();
    let written = write_new_file(&spec, &path, &mut |_| {}).unwrap();
    let inv = inspect(&path, Expect::Full).unwrap();
    assert_eq!(
        inv.hparams.to_array(),
        [51865, 1500, 512, 8, 6, 448, 512, 8, 6, 80, 1]
    );
    assert!(inv.multilingual);
    // 50,257 regular tokens, the empty id 50,256 included; whisper.cpp adds the rest.
    assert_eq!(inv.vocab.count, 50_257);
    assert_eq!(
        (inv.file_len, inv.file_sha256.as_str()),
        (written.bytes, written.sha256.as_str())
    );
    assert_eq!(inv.file_len, layout.file_len);
    assert_eq!(inv.prefix_len, layout.prefix_len);
    assert_eq!(inv.tensors.len(), 245); // as the converted base model
    assert_eq!(inv.tensors.len(), layout.records.len());
    for (t, r) in inv.tensors.iter().zip(&layout.records) {
        assert_eq!(
            (
                &t.name,
                t.ggml_type,
                &t.ne,
                t.record_offset,
                t.payload_len,
                t.class
            ),
            (
                &r.name,
                r.ggml_type,
                &r.ne,
                r.record_offset,
                r.payload_len,
                r.class
            )
        );
    }
    assert_eq!(inv.totals, layout.totals());
    assert_eq!(
        (inv.count_of(GgmlType::F32), inv.count_of(GgmlType::F16)),
        (146, 99)
    );
}

/// Payload bytes of a Whisper model's tensors, from the architecture: per
/// encoder block 12 n² F16 weights and 12 n F32 vectors, per decoder block
/// 16 n² and 17 n; positional embeddings F32, token embedding and conv
/// weights F16, conv biases and the final norms F32.
fn whisper_tensor_bytes(
    n_vocab: u64,
    n: u64,
    mels: u64,
    enc_layers: u64,
    dec_layers: u64,
) -> (u64, u64) {
    let encoder = 1500 * n * 4 // positional embedding
        + 3 * mels * n * 2 + n * 4 // conv1
        + 3 * n * n * 2 + n * 4 // conv2
        + 2 * n * 4 // ln_post
        + enc_layers * (12 * n * n * 2 + 12 * n * 4);
    let decoder = 448 * n * 4 // positional embedding
        + n_vocab * n * 2 // token embedding
        + 2 * n * 4 // ln
        + dec_layers * (16 * n * n * 2 + 17 * n * 4);
    (encoder, decoder)
}

#[test]
fn large_v3_turbo_has_the_published_shape_and_tensor_bytes() {
    let layout = Preset::LargeV3Turbo.spec(1).layout().unwrap();
    assert_eq!(
        layout.hparams.to_array(),
        [51866, 1500, 1280, 20, 32, 448, 1280, 20, 4, 128, 1]
    );
    // 7 encoder globals + 15 per encoder block, 4 decoder globals + 24 per decoder block.
    assert_eq!(layout.records.len(), 7 + 15 * 32 + 4 + 24 * 4);
    let (encoder, decoder) = whisper_tensor_bytes(51866, 1280, 128, 32, 4);
    assert_eq!(layout.totals().native_encoder.payload_bytes, encoder);
    assert_eq!(layout.totals().decoder.payload_bytes, decoder);
    assert_eq!(encoder + decoder, 1_623_915_520);
    let names: Vec<&str> = layout.records.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"decoder.blocks.3.cross_attn.value.weight"));
    assert!(!names.contains(&"decoder.blocks.4.attn.query.weight"));
    // The prefix: header, 128 x 201 f32 mel filters, the 50,257-token vocabulary.
    let vocab: u64 = 4
        + 256 * 5
        + (256..50_257u64)
            .map(|id| match id {
                256 => 4 + " synthetic".len() as u64,
                50_256 => 4,
                _ => 4 + 3 + id.to_string().len() as u64,
            })
            .sum::<u64>();
    assert_eq!(layout.prefix_len, 48 + 8 + 128 * 201 * 4 + vocab);
    // The state whisper.cpp 1.8.3 sizes for it: n_vocab x n_text_ctx f32 logits.
    let e = estimate(
        &layout.hparams,
        Some(&layout.totals()),
        EstimateOptions::default(),
    );
    assert_eq!(e.logits_reserve_bytes, 51_866 * 448 * 4);
    assert_eq!(e.logits_reserve_bytes, 92_943_872);
    assert_eq!(e.native_encoder_weight_bytes, Some(encoder));
    assert_eq!(e.decoder_weight_bytes, Some(decoder));
}

#[test]
fn large_v3_differs_from_turbo_only_in_decoder_layers() {
    let v3 = Preset::LargeV3.spec(1).layout().unwrap();
    let turbo = Preset::LargeV3Turbo.spec(1).layout().unwrap();
    let mut h = v3.hparams;
    assert_eq!(h.n_text_layer, 32);
    h.n_text_layer = 4;
    assert_eq!(h, turbo.hparams);
    let (encoder, decoder) = whisper_tensor_bytes(51866, 1280, 128, 32, 32);
    assert_eq!(v3.totals().native_encoder.payload_bytes, encoder);
    assert_eq!(v3.totals().decoder.payload_bytes, decoder);
    assert_eq!(encoder + decoder, 3_094_359_040);
    assert_eq!(
        v3.records
            .iter()
            .filter(|r| r.class == TensorClass::Decoder)
            .count(),
        4 + 24 * 32
    );
    let base = Preset::Base.spec(1).layout().unwrap();
    let (encoder, decoder) = whisper_tensor_bytes(51865, 512, 80, 6, 6);
    assert_eq!(
        base.totals().native_encoder.payload_bytes + base.totals().decoder.payload_bytes,
        encoder + decoder
    );
}
