//! What stock whisper.cpp 1.8.3 (through whisper-rs) does with our files, for
//! the cases that cannot crash the test process. The cases where the stock
//! loader aborts, segfaults, exhausts memory or reads uninitialised values
//! (negative name length, wrong payload length, vocabulary count beyond the
//! file, header only) belong in a child process: the whisper worker's tests.

use crate::common::model;
use ggml_container::corpus::build_corpus;
use ggml_container::derive::derive_decoder;
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Expect, inspect};
use std::path::Path;
use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

/// Whether whisper.cpp loads `path` and creates a state for it.
fn stock_loads(path: &Path) -> bool {
    let params = WhisperContextParameters::default();
    match WhisperContext::new_with_params(path.to_str().unwrap(), params) {
        Ok(ctx) => ctx.create_state().is_ok(),
        Err(_) => false,
    }
}

#[test]
fn the_loadable_synthetic_model_loads_and_its_stripped_form_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("synthetic.bin");
    write_file(&SyntheticSpec::loadable(), &model).unwrap();
    assert!(stock_loads(&model));
    let stripped = dir.path().join("decoder-only.bin");
    derive_decoder(&model, &stripped, &harness::artifact::provenance::current()).unwrap();
    assert!(inspect(&stripped, Expect::DecoderOnly).is_ok());
    // Stock whisper.cpp declares the encoder tensors and counts them missing.
    assert!(!stock_loads(&stripped));
}

#[test]
fn stock_whisper_cpp_accepts_defects_the_strict_parser_rejects() {
    let src = model("tiny.en");
    let dir = tempfile::tempdir().unwrap();
    let manifest = build_corpus(&src, dir.path()).unwrap();
    let stock = |case: &str| {
        let c = manifest.cases.iter().find(|c| c.case == case).unwrap();
        assert!(inspect(&dir.path().join(&c.file), c.expect).is_err());
        stock_loads(&dir.path().join(&c.file))
    };
    // Loaded without complaint although the file is not what it claims.
    assert!(stock("trailing-bytes"));
    assert!(stock("truncated-final-payload"));
    // Not here: `header-only`. whisper.cpp then reads the mel and vocabulary
    // sizes past end of file into uninitialised integers, so the outcome is
    // undefined: one build loaded it, a debug build threw a C++ exception and
    // aborted the test process. Only a child process may try it.
    // Rejected cleanly (whisper-rs InitError).
    for case in [
        "missing-decoder-record",
        "duplicate-decoder-record",
        "encoder-record-in-stripped",
        "wrong-tensor-type",
        "wrong-dims",
        "renamed-tensor",
        "bad-magic",
    ] {
        assert!(!stock(case), "{case}");
    }
}

/// The steering of the real-shape presets, on a 64-wide model: stock
/// whisper.cpp's greedy decoder says the word token and ends, at the first
/// temperature, whatever the audio.
#[test]
fn a_steered_synthetic_model_says_one_word_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("steered.bin");
    let spec = SyntheticSpec {
        vocab_tokens: 50_256,
        steer_to_eot: true,
        ..SyntheticSpec::loadable()
    };
    write_file(&spec, &model).unwrap();
    let params = WhisperContextParameters::default();
    let ctx = WhisperContext::new_with_params(model.to_str().unwrap(), params).unwrap();
    let mut state = ctx.create_state().unwrap();
    // 2 s of a 440 Hz tone at 16 kHz.
    let samples: Vec<f32> = (0..32_000)
        .map(|i| (i as f32 * 440.0 * std::f32::consts::TAU / 16_000.0).sin() * 0.1)
        .collect();
    let mut full = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
    full.set_n_threads(2);
    full.set_print_progress(false);
    full.set_print_realtime(false);
    full.set_print_timestamps(false);
    state.full(full, &samples).unwrap();
    assert_eq!(state.full_n_segments(), 1);
    let segment = state.get_segment(0).unwrap();
    assert_eq!(segment.to_str_lossy().unwrap(), " synthetic");
    let eot = ggml_container::synthetic::eot_token(spec.n_vocab) as i32;
    let text_tokens: Vec<i32> = (0..segment.n_tokens())
        .filter_map(|i| segment.get_token(i).map(|t| t.token_id()))
        .filter(|&id| id < eot)
        .collect();
    assert_eq!(text_tokens, [ggml_container::synthetic::WORD_TOKEN as i32]);
}
