//! A Core ML package whose specification is arbitrary bytes: a package laid
//! out like the committed miniature encoder (its Manifest.json, a weight
//! file of its size) around `Data/com.apple.CoreML/model.mlmodel` = the
//! input, read by `coreml_package::read_model` and, when it reads, checked
//! against tiny.en's encoder dimensions.
//!
//! A `CoremlError` is a correct answer; a panic, a hang or an allocation
//! sized by a field rather than by the input is a finding.

#![no_main]

use coreml_package::read_model;
use coreml_package::whisper::{EncoderDims, check_encoder};
use libfuzzer_sys::fuzz_target;

const MANIFEST: &str = include_str!("../../tests/coreml/miniature-encoder.mlpackage/Manifest.json");
const WEIGHTS_LEN: usize = 34_624;

fuzz_target!(|data: &[u8]| {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    };
    let Ok(dir) = base else { return };
    let package = dir.path().join("fuzz.mlpackage");
    let model_dir = package.join("Data/com.apple.CoreML");
    if std::fs::create_dir_all(model_dir.join("weights")).is_err()
        || std::fs::write(package.join("Manifest.json"), MANIFEST).is_err()
        || std::fs::write(model_dir.join("model.mlmodel"), data).is_err()
        || std::fs::write(model_dir.join("weights/weight.bin"), vec![0u8; WEIGHTS_LEN]).is_err()
    {
        return;
    }
    if let Ok(report) = read_model(&package) {
        let dims = EncoderDims {
            n_mels: 80,
            n_audio_ctx: 1500,
            n_audio_state: 384,
        };
        let _ = check_encoder(&report, &dims);
        let _ = serde_json::to_string(&report);
    }
});
