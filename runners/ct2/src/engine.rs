//! CTranslate2's Whisper through ct2rs: loaded from the bytes the worker
//! checked (a `ModelMemoryReader`, so nothing is read from disk after the
//! check), fed Whisper-exact features ([`crate::features`]), decoding one
//! 30 s window after another, returning every token id.

use crate::features::{WINDOW_FRAMES, log_mel_windows};
use anyhow::{Context, bail};
use ct2rs::sys::{self, ComputeType, Config, Device, ModelMemoryReader, StorageView};
use runners::whisper::engine::RawTranscript;

/// The id of `<|endoftext|>` in Whisper's English vocabulary; regular tokens sit below it.
pub const EOT: usize = 50_256;

/// How CTranslate2 runs the model: what changes its memory and speed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `float32`, `int8`, `int8_float32`, `int16`, `float16`, `int8_float16`, `default`, `auto`.
    pub compute_type: String,
    /// Threads of the one replica (CTranslate2's `intra_threads`; 0 = its default).
    pub intra_threads: usize,
    /// Beam width (1 = greedy).
    pub beam_size: usize,
    /// Most tokens generated per 30 s window.
    pub max_length: usize,
    /// Run on CUDA device 0 (a `cuda` build only) instead of the CPU.
    pub use_gpu: bool,
}

/// `compute_type` by its CTranslate2 name.
pub fn compute_type(name: &str) -> anyhow::Result<ComputeType> {
    Ok(match name {
        "default" => ComputeType::DEFAULT,
        "auto" => ComputeType::AUTO,
        "float32" => ComputeType::FLOAT32,
        "int8" => ComputeType::INT8,
        "int8_float32" => ComputeType::INT8_FLOAT32,
        "int8_float16" => ComputeType::INT8_FLOAT16,
        "int16" => ComputeType::INT16,
        "float16" => ComputeType::FLOAT16,
        other => bail!(
            "compute_type {other:?} is not one of default, auto, float32, int8, int8_float32, \
             int8_float16, int16, float16"
        ),
    })
}

/// A loaded model.
pub struct Engine {
    whisper: sys::Whisper,
    vocabulary: Vec<Vec<u8>>,
    n_mels: usize,
    options: sys::WhisperOptions,
    prompt: Vec<String>,
}

impl Engine {
    /// Load from the checked files' bytes (`name`, content); `vocabulary`
    /// is `vocabulary.txt`'s bytes.
    pub fn load(files: &[(&str, &[u8])], settings: &Settings) -> anyhow::Result<Self> {
        let vocabulary_txt = files
            .iter()
            .find(|(n, _)| *n == "vocabulary.txt")
            .map(|(_, b)| *b)
            .context("the model directory has no vocabulary.txt")?;
        let vocabulary =
            ct2_convert::decode_vocabulary(vocabulary_txt).context("vocabulary.txt")?;
        let mut reader = ModelMemoryReader::new("tiny.en-ct2")?;
        for (name, bytes) in files {
            reader.register_file(name, bytes);
        }
        let config = Config {
            device: if settings.use_gpu {
                Device::CUDA
            } else {
                Device::CPU
            },
            compute_type: compute_type(&settings.compute_type)?,
            num_threads_per_replica: settings.intra_threads,
            ..Config::default()
        };
        let whisper = sys::Whisper::new_from_memory(&mut reader, config).map_err(|e| {
            // CTranslate2's own message can be empty; say what this build computes.
            anyhow::anyhow!(
                "CTranslate2 refused the model with compute_type {} ({}): on a CPU it computes \
                 float32, int8 and int8_float32 (ruy on Linux); int16 needs Intel MKL or oneDNN, \
                 float16 and int8_float16 a CUDA device",
                settings.compute_type,
                match e.to_string() {
                    m if m.trim().is_empty() => "no reason given".to_string(),
                    m => m,
                }
            )
        })?;
        drop(reader);
        if whisper.is_multilingual() {
            bail!(
                "only English-only Whisper models are supported so far (the prompt has no language token)"
            );
        }
        let options = sys::WhisperOptions {
            beam_size: settings.beam_size,
            max_length: settings.max_length,
            // Greedy and deterministic: no sampling, one hypothesis.
            sampling_topk: 1,
            num_hypotheses: 1,
            ..sys::WhisperOptions::default()
        };
        Ok(Engine {
            n_mels: whisper.n_mels(),
            whisper,
            vocabulary,
            options,
            prompt: vec!["<|startoftranscript|>".into(), "<|notimestamps|>".into()],
        })
    }

    /// Transcribe 16 kHz mono samples in [-1, 1], one 30 s window after
    /// another: each window is a segment of generated ids, with `EOT`
    /// appended where the window ended on it (CTranslate2 drops the end
    /// token; a sequence shorter than the limit stopped on it), as
    /// whisper.cpp's token stream has it.
    ///
    /// Of the decode figures, CTranslate2's `generate` gives only the whole
    /// call and the ids: it encodes and decodes inside one call, calls back
    /// per token only in its streaming mode, and has no temperature
    /// fallback; encode time, first-token time, decode time and fallbacks
    /// are `None` (unavailable).
    pub fn transcribe(&self, audio: &[f32]) -> anyhow::Result<RawTranscript> {
        let start_ns = sampler::clock::monotonic_ns();
        let (mut features, _) = log_mel_windows(audio, self.n_mels);
        let per_window = self.n_mels * WINDOW_FRAMES;
        let mut out = RawTranscript {
            segments: Vec::new(),
            text: Vec::new(),
            decode: None,
        };
        let mut tokens_decoded = 0u64;
        for window in features.chunks_mut(per_window) {
            let view = StorageView::new(&[1, self.n_mels, WINDOW_FRAMES], window, Device::CPU)?;
            let result =
                self.whisper
                    .generate(&view, std::slice::from_ref(&self.prompt), &self.options)?;
            let ids = result
                .into_iter()
                .next()
                .and_then(|r| r.sequences_ids.into_iter().next())
                .context("CTranslate2 returned no sequence")?;
            tokens_decoded = tokens_decoded.saturating_add(ids.len() as u64);
            let mut segment = Vec::with_capacity(ids.len() + 1);
            for &id in &ids {
                if let Some(bytes) = self.vocabulary.get(id).filter(|_| id < EOT) {
                    out.text.extend_from_slice(bytes);
                }
                segment.push(i32::try_from(id).context("token id past i32")?);
            }
            if ids.len() < self.options.max_length {
                segment.push(EOT as i32);
            }
            out.segments.push(segment);
        }
        out.decode = Some(worker_contract::DecodeTimings {
            full_ns: sampler::clock::monotonic_ns().saturating_sub(start_ns),
            windows: out.segments.len() as u32,
            encode_ns: None,
            first_token_ns: None,
            tokens_decoded,
            decode_ns: None,
            fallbacks: None,
        });
        Ok(out)
    }
}
