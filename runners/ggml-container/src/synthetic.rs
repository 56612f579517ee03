//! Deterministic synthetic GGML Whisper models: the real container layout and
//! the full expected inventory, with seeded pseudo-random weights, for tests
//! of load paths and of memory at real shapes. [`Preset`] names the shapes:
//! the small `loadable` model and the real hyperparameters of Whisper base,
//! large-v3 and large-v3-turbo.
//!
//! Models are written streaming (a bounded chunk at a time, whatever the
//! model's size) following a [`Layout`] computed first from the header, so
//! the layout is the writer's own inventory: every record starts at the
//! offset it lists, or the write fails.
//!
//! The real-shape presets steer the decoder to end at once
//! ([`SyntheticSpec::steer_to_eot`]): random weights would otherwise decode
//! random tokens until whisper.cpp's token limit, at every temperature of its
//! fallback, which at large-v3's size takes minutes per window.

use crate::digest::BackgroundSha256;
use crate::expect::ExpectedInventory;
use crate::inventory::ClassTotals;
use crate::mel::{N_FFT, mel_filters};
use crate::order::record_order;
use crate::types::{Expect, Ftype, GgmlType, Hparams, TensorClass};
use crate::write::GgmlWriter;
use half::f16;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Shape and seed of a synthetic model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticSpec {
    /// Header `n_vocab`: the vocabulary size the model declares.
    pub n_vocab: i32,
    /// Encoder context in frames.
    pub n_audio_ctx: i32,
    /// Decoder context in tokens.
    pub n_text_ctx: i32,
    /// Audio and text state width (the same, as in every Whisper model).
    pub n_state: i32,
    /// Attention heads, in encoder and decoder alike.
    pub n_head: i32,
    /// Encoder layers.
    pub n_audio_layer: i32,
    /// Decoder layers.
    pub n_text_layer: i32,
    /// Mel bins; the mel filter block gets a real bank of this many rows.
    pub n_mels: i32,
    /// F16 or F32 (the generator does not quantize).
    pub weight_type: GgmlType,
    /// Tokens written to the vocabulary block; whisper.cpp synthesizes the
    /// rest. For a whisper.cpp-sized vocabulary (`n_vocab` 51864 or more) at
    /// least 256 (whisper.cpp looks up the token `" "`) and at most
    /// [`regular_tokens`] (more would name special-token ids).
    pub vocab_tokens: u32,
    /// Seed of the weights; the same spec always gives the same bytes.
    pub seed: u64,
    /// Make stock whisper.cpp's greedy decoder emit one word token and then
    /// `<|endoftext|>`, whatever the audio: `decoder.ln` becomes a constant
    /// (weight 0, bias 1), so every logit is the sum of its token-embedding
    /// row; the `<|endoftext|>` row sums to [`EOT_LOGIT`], the row of
    /// [`WORD_TOKEN`] to [`WORD_LOGIT`] (whisper.cpp suppresses
    /// `<|endoftext|>` as the first token), every other row is random with
    /// sums of a few units. Needs a whisper.cpp-sized vocabulary holding
    /// [`WORD_TOKEN`]. Off: every weight is random.
    #[serde(default)]
    pub steer_to_eot: bool,
}

/// The vocabulary id of the word the steered decoder emits first.
pub const WORD_TOKEN: u32 = 256;

/// The bytes of [`WORD_TOKEN`] in a synthetic vocabulary.
pub const WORD_TOKEN_TEXT: &str = " synthetic";

/// The logit of `<|endoftext|>` in a steered model (any audio).
pub const EOT_LOGIT: f32 = 40.0;

/// The logit of [`WORD_TOKEN`] in a steered model: above every random token,
/// below `<|endoftext|>`.
pub const WORD_LOGIT: f32 = 30.0;

/// The smallest `n_vocab` of a real Whisper vocabulary (English-only).
pub const WHISPER_N_VOCAB: i32 = 51864;

/// Regular (byte-pair) tokens of a Whisper vocabulary, the ids before
/// `<|endoftext|>`: 50,256 English-only, 50,257 multilingual
/// (`n_vocab >= 51865`, whose id 50,256 is an empty token). whisper.cpp
/// synthesizes every id from `<|endoftext|>` on.
pub fn regular_tokens(n_vocab: i32) -> u32 {
    if n_vocab >= 51865 { 50_257 } else { 50_256 }
}

/// The id whisper.cpp gives `<|endoftext|>` for `n_vocab`: 50,256, or
/// 50,257 in a multilingual vocabulary.
pub fn eot_token(n_vocab: i32) -> u32 {
    regular_tokens(n_vocab)
}

/// A named synthetic shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// [`SyntheticSpec::loadable`]: 64 wide, one layer each, English-only,
    /// about 7.5 MB; random weights.
    Loadable,
    /// Whisper base's hyperparameters (multilingual, 512 wide, 6 + 6
    /// layers, 80 mels), F16, about 148 MB; steered to end.
    Base,
    /// Whisper large-v3's (1280 wide, 32 + 32 layers, 128 mels, 51,866
    /// tokens), F16, about 3.1 GB; steered to end.
    LargeV3,
    /// Whisper large-v3-turbo's: large-v3 with 4 decoder layers, F16, about
    /// 1.6 GB; steered to end.
    LargeV3Turbo,
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 4] = [
        Preset::Loadable,
        Preset::Base,
        Preset::LargeV3Turbo,
        Preset::LargeV3,
    ];

    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Loadable => "loadable",
            Preset::Base => "base",
            Preset::LargeV3 => "large-v3",
            Preset::LargeV3Turbo => "large-v3-turbo",
        }
    }

    /// The preset of a command-line name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The spec of this preset with weights from `seed`.
    pub fn spec(self, seed: u64) -> SyntheticSpec {
        let whisper =
            |n_vocab, n_state, n_head, n_audio_layer, n_text_layer, n_mels| SyntheticSpec {
                n_vocab,
                n_audio_ctx: 1500,
                n_text_ctx: 448,
                n_state,
                n_head,
                n_audio_layer,
                n_text_layer,
                n_mels,
                weight_type: GgmlType::F16,
                vocab_tokens: regular_tokens(n_vocab),
                seed,
                steer_to_eot: true,
            };
        match self {
            Preset::Loadable => SyntheticSpec {
                seed,
                ..SyntheticSpec::loadable()
            },
            Preset::Base => whisper(51865, 512, 8, 6, 6, 80),
            Preset::LargeV3 => whisper(51866, 1280, 20, 32, 32, 128),
            Preset::LargeV3Turbo => whisper(51866, 1280, 20, 32, 4, 128),
        }
    }
}

impl SyntheticSpec {
    /// Dimensions stock whisper.cpp accepts (English vocabulary, real
    /// contexts and mel count) with a 64-wide state, one head, one layer each.
    pub fn loadable() -> Self {
        Self {
            n_vocab: 51864,
            n_audio_ctx: 1500,
            n_text_ctx: 448,
            n_state: 64,
            n_head: 1,
            n_audio_layer: 1,
            n_text_layer: 1,
            n_mels: 80,
            weight_type: GgmlType::F16,
            vocab_tokens: 256,
            seed: 1,
            steer_to_eot: false,
        }
    }

    /// A few-kilobyte model for parser tests (not meant for whisper.cpp).
    pub fn miniature() -> Self {
        Self {
            n_vocab: 64,
            n_audio_ctx: 8,
            n_text_ctx: 8,
            n_state: 32,
            n_head: 1,
            n_audio_layer: 1,
            n_text_layer: 1,
            n_mels: 4,
            weight_type: GgmlType::F16,
            vocab_tokens: 16,
            seed: 7,
            steer_to_eot: false,
        }
    }

    /// The header the model is written with (ftype from `weight_type`).
    pub fn hparams(&self) -> Hparams {
        Hparams {
            n_vocab: self.n_vocab,
            n_audio_ctx: self.n_audio_ctx,
            n_audio_state: self.n_state,
            n_audio_head: self.n_head,
            n_audio_layer: self.n_audio_layer,
            n_text_ctx: self.n_text_ctx,
            n_text_state: self.n_state,
            n_text_head: self.n_head,
            n_text_layer: self.n_text_layer,
            n_mels: self.n_mels,
            ftype: Ftype::for_weight_type(self.weight_type).raw,
        }
    }

    /// Whether the header declares a multilingual vocabulary.
    fn multilingual(&self) -> bool {
        self.hparams().multilingual()
    }

    /// The bytes of vocabulary token `id`: the byte itself below 256 (so
    /// `" "` exists), the multilingual vocabulary's empty id 50,256,
    /// [`WORD_TOKEN_TEXT`], else `tok<id>` (every token distinct).
    pub fn token(&self, id: u32) -> Vec<u8> {
        match u8::try_from(id) {
            Ok(b) => vec![b],
            Err(_) if self.multilingual() && id == 50_256 => Vec::new(),
            Err(_) if id == WORD_TOKEN => WORD_TOKEN_TEXT.as_bytes().to_vec(),
            Err(_) => format!("tok{id}").into_bytes(),
        }
    }

    /// Why the spec cannot be written as a model whisper.cpp reads as intended.
    fn check(&self) -> Result<(), SyntheticError> {
        let refuse = |reason: String| Err(SyntheticError::Spec { reason });
        if !matches!(self.weight_type, GgmlType::F16 | GgmlType::F32) {
            return refuse(format!("weight type {} is not F16/F32", self.weight_type));
        }
        if self.n_vocab >= WHISPER_N_VOCAB {
            let regular = regular_tokens(self.n_vocab);
            if self.vocab_tokens > regular {
                return refuse(format!(
                    "{} vocabulary tokens for n_vocab {}: at most {regular} regular tokens precede <|endoftext|>",
                    self.vocab_tokens, self.n_vocab
                ));
            }
            if self.vocab_tokens < 256 {
                return refuse(format!(
                    "{} vocabulary tokens: whisper.cpp needs the single-byte tokens (it looks up \" \")",
                    self.vocab_tokens
                ));
            }
        }
        if self.steer_to_eot && (self.n_vocab < WHISPER_N_VOCAB || self.vocab_tokens <= WORD_TOKEN)
        {
            return refuse(format!(
                "steering to <|endoftext|> needs a whisper.cpp vocabulary (n_vocab >= {WHISPER_N_VOCAB}) holding token {WORD_TOKEN}"
            ));
        }
        Ok(())
    }

    /// The file this spec writes, record by record, without writing it.
    pub fn layout(&self) -> Result<Layout, SyntheticError> {
        self.check()?;
        let hparams = self.hparams();
        let expected = ExpectedInventory::new(&hparams, Expect::Full)
            .map_err(|reason| SyntheticError::Spec { reason })?;
        let n_mels = u64::try_from(self.n_mels).unwrap_or(0);
        let mel_len = 8 + n_mels * (N_FFT as u64 / 2 + 1) * 4;
        let vocab_len: u64 = 4
            + (0..self.vocab_tokens)
                .map(|id| 4 + self.token(id).len() as u64)
                .sum::<u64>();
        let prefix_len = crate::types::HEADER_LEN + mel_len + vocab_len;
        let mut at = prefix_len;
        let mut records = Vec::with_capacity(expected.len());
        // Real files' record order (the loader accepts any).
        for name in record_order(&hparams) {
            let t = expected.get(&name).ok_or_else(|| SyntheticError::Spec {
                reason: format!("{name} is not expected"),
            })?;
            let payload_len = t.payload_len().ok_or_else(|| SyntheticError::Spec {
                reason: format!("{name}: dims {:?} do not fit {}", t.ne, t.ggml_type),
            })?;
            let record = PlannedRecord {
                name: t.name.clone(),
                ggml_type: t.ggml_type,
                ne: t.ne.clone(),
                class: t.class,
                record_offset: at,
                payload_len,
            };
            at += record.record_len();
            records.push(record);
        }
        Ok(Layout {
            hparams,
            prefix_len,
            records,
            file_len: at,
        })
    }
}

/// One record a synthetic model holds, where the writer puts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedRecord {
    /// Tensor name.
    pub name: String,
    /// Stored ggml type.
    pub ggml_type: GgmlType,
    /// Dims in ggml order.
    pub ne: Vec<u64>,
    /// Encoder or decoder.
    pub class: TensorClass,
    /// Byte offset of the record's `n_dims` field.
    pub record_offset: u64,
    /// Payload bytes.
    pub payload_len: u64,
}

/// Everything a synthetic model's file holds but the bytes of its weights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The header.
    pub hparams: Hparams,
    /// Header + mel filters + vocabulary, in bytes.
    pub prefix_len: u64,
    /// The records in file order (whisper's converter order).
    pub records: Vec<PlannedRecord>,
    /// The file's length in bytes.
    pub file_len: u64,
}

impl PlannedRecord {
    /// Whole record in bytes: header, dims, name and payload.
    pub fn record_len(&self) -> u64 {
        12 + 4 * self.ne.len() as u64 + self.name.len() as u64 + self.payload_len
    }
}

impl Layout {
    /// Records and bytes per class, as [`crate::inspect`] totals the file.
    pub fn totals(&self) -> ClassTotals {
        let mut totals = ClassTotals::default();
        for r in &self.records {
            totals.add(r.class, r.payload_len, r.record_len());
        }
        totals
    }
}

/// Why a synthetic model could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// The spec describes no model whisper.cpp reads as intended.
    #[error("synthetic model spec refused: {reason}")]
    Spec {
        /// What is wrong with it.
        reason: String,
    },
    /// The writer left the layout (a bug, not an input problem).
    #[error("synthetic writer at byte {written}, its layout says {planned} ({what})")]
    OffLayout {
        /// What was about to be written.
        what: String,
        /// Bytes written so far.
        written: u64,
        /// Where the layout puts it.
        planned: u64,
    },
    /// Writing failed.
    #[error("writing the synthetic model: {0}")]
    Io(#[from] io::Error),
    /// Writing or placing the output file failed.
    #[error("{path}: {source}")]
    File {
        /// The file (the output, or its temporary copy).
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The SHA-256 thread failed.
    #[error("the hashing thread failed")]
    Hashing,
}

/// splitmix64: tiny, seedable, good enough for test weights.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-0.1, 0.1).
    fn weight(&mut self) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        (unit - 0.5) * 0.2
    }
}

/// What fills one tensor: random weights, with steered rows or constants.
enum Fill {
    Random,
    Constant(f32),
    /// Random, except whole rows (of `width` elements) set to a value.
    Rows {
        width: u64,
        rows: [(u64, f32); 2],
    },
}

impl Fill {
    fn of(spec: &SyntheticSpec, name: &str) -> Fill {
        if !spec.steer_to_eot {
            return Fill::Random;
        }
        let width = u64::try_from(spec.n_state).unwrap_or(1).max(1);
        match name {
            "decoder.ln.weight" => Fill::Constant(0.0),
            "decoder.ln.bias" => Fill::Constant(1.0),
            "decoder.token_embedding.weight" => Fill::Rows {
                width,
                rows: [
                    (u64::from(eot_token(spec.n_vocab)), EOT_LOGIT / width as f32),
                    (u64::from(WORD_TOKEN), WORD_LOGIT / width as f32),
                ],
            },
            _ => Fill::Random,
        }
    }

    /// Element `index`'s value; the generator draws one random number per
    /// element whatever the fill, so steering moves no other weight.
    fn value(&self, index: u64, random: f32) -> f32 {
        match self {
            Fill::Random => random,
            Fill::Constant(v) => *v,
            Fill::Rows { width, rows } => {
                let row = index / width;
                rows.iter()
                    .find(|(r, _)| *r == row)
                    .map_or(random, |(_, v)| *v)
            }
        }
    }
}

/// Elements generated per write: a bounded buffer, whatever the tensor.
const CHUNK_ELEMENTS: u64 = 1 << 16;

/// Write the model described by `spec` to `out`; returns the bytes written.
pub fn generate<W: Write>(spec: &SyntheticSpec, out: W) -> Result<u64, SyntheticError> {
    generate_with_progress(spec, out, &mut |_| {})
}

/// [`generate`], calling `progress` with the bytes written so far after
/// each bounded chunk.
pub fn generate_with_progress<W: Write>(
    spec: &SyntheticSpec,
    out: W,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, SyntheticError> {
    let layout = spec.layout()?;
    let hparams = spec.hparams();
    let mut rng = Rng(spec.seed);
    let mut w = GgmlWriter::new(out);
    w.header(&hparams)?;
    let n_mels = usize::try_from(spec.n_mels).unwrap_or(0);
    w.mel_filters(spec.n_mels, (N_FFT / 2 + 1) as i32, &mel_filters(n_mels))?;
    let tokens: Vec<Vec<u8>> = (0..spec.vocab_tokens).map(|id| spec.token(id)).collect();
    w.vocab(&tokens)?;
    drop(tokens);
    let on_layout = |w: &GgmlWriter<W>, what: &str, planned: u64| {
        if w.written() == planned {
            Ok(())
        } else {
            Err(SyntheticError::OffLayout {
                what: what.to_string(),
                written: w.written(),
                planned,
            })
        }
    };
    on_layout(&w, "the first record", layout.prefix_len)?;
    progress(w.written());
    let mut buf = Vec::new();
    for r in &layout.records {
        on_layout(&w, &r.name, r.record_offset)?;
        w.record_header(&r.name, r.ggml_type.id(), &r.ne)?;
        let fill = Fill::of(spec, &r.name);
        let elements: u64 = r.ne.iter().product();
        let mut done = 0;
        while done < elements {
            let n = CHUNK_ELEMENTS.min(elements - done);
            buf.clear();
            for i in done..done + n {
                let v = fill.value(i, rng.weight());
                match r.ggml_type {
                    GgmlType::F16 => buf.extend_from_slice(&f16::from_f32(v).to_le_bytes()),
                    _ => buf.extend_from_slice(&v.to_le_bytes()),
                }
            }
            w.raw(&buf)?;
            done += n;
            progress(w.written());
        }
    }
    on_layout(&w, "the end of the file", layout.file_len)?;
    w.flush()?;
    Ok(w.written())
}

/// Generate into a new file at `path` (replacing one that exists).
pub fn write_file(spec: &SyntheticSpec, path: &Path) -> Result<u64, SyntheticError> {
    let file = std::fs::File::create(path).map_err(|source| SyntheticError::File {
        path: path.to_path_buf(),
        source,
    })?;
    generate(spec, io::BufWriter::with_capacity(1 << 20, file))
}

/// Generate into memory.
pub fn to_bytes(spec: &SyntheticSpec) -> Result<Vec<u8>, SyntheticError> {
    let mut out = Vec::new();
    generate(spec, &mut out)?;
    Ok(out)
}

/// A written model: its length and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    /// Bytes written.
    pub bytes: u64,
    /// SHA-256 of the file, lower-case hex (hashed as written, on a second thread).
    pub sha256: String,
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hash: BackgroundSha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Write the model to `path`, which must not exist: into a temporary file
/// beside it, synced, then renamed into place, so `path` appears only whole.
/// `progress` gets the bytes written so far (of [`Layout::file_len`]).
pub fn write_new_file(
    spec: &SyntheticSpec,
    path: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Written, SyntheticError> {
    let file_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SyntheticError::File { path, source }
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(file_error(dir))?;
    let file = tmp.as_file().try_clone().map_err(file_error(tmp.path()))?;
    let mut sink = Hashing {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        hash: BackgroundSha256::new(),
    };
    let bytes = generate_with_progress(spec, &mut sink, progress)?;
    let Hashing { inner, hash } = sink;
    inner
        .into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .map_err(file_error(tmp.path()))?;
    let sha256 = hash.finish().ok_or(SyntheticError::Hashing)?;
    tmp.persist_noclobber(path)
        .map_err(|e| SyntheticError::File {
            path: path.to_path_buf(),
            source: e.error,
        })?;
    Ok(Written { bytes, sha256 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_whisper_vocabularies() {
        for preset in [Preset::Base, Preset::LargeV3, Preset::LargeV3Turbo] {
            let spec = preset.spec(1);
            assert!(spec.multilingual(), "{preset:?}");
            assert_eq!(spec.vocab_tokens, 50_257);
            assert_eq!(spec.token(50_256), Vec::<u8>::new());
            assert_eq!(spec.token(32), b" ".to_vec());
            assert_eq!(spec.token(WORD_TOKEN), b" synthetic".to_vec());
            assert_eq!(eot_token(spec.n_vocab), 50_257);
            assert!(spec.check().is_ok());
        }
        let en = SyntheticSpec::loadable();
        assert_eq!(
            (regular_tokens(en.n_vocab), eot_token(en.n_vocab)),
            (50_256, 50_256)
        );
        assert_eq!(
            Preset::from_name("large-v3-turbo"),
            Some(Preset::LargeV3Turbo)
        );
        assert_eq!(Preset::from_name("turbo"), None);
    }

    #[test]
    fn vocabularies_that_would_mislead_whisper_cpp_are_refused() {
        let too_many = SyntheticSpec {
            vocab_tokens: 50_257,
            ..SyntheticSpec::loadable()
        };
        assert!(matches!(too_many.check(), Err(SyntheticError::Spec { .. })));
        let no_space = SyntheticSpec {
            vocab_tokens: 32,
            ..SyntheticSpec::loadable()
        };
        assert!(no_space.check().is_err());
        let steered_without_word = SyntheticSpec {
            steer_to_eot: true,
            ..SyntheticSpec::loadable()
        };
        assert!(steered_without_word.check().is_err());
    }

    #[test]
    fn steered_rows_and_constants() {
        let spec = Preset::Base.spec(1);
        let ln_w = Fill::of(&spec, "decoder.ln.weight");
        assert_eq!(ln_w.value(3, 0.07), 0.0);
        let emb = Fill::of(&spec, "decoder.token_embedding.weight");
        // Row 50,257 (EOT) of 512-wide rows: its elements sum to EOT_LOGIT.
        assert_eq!(emb.value(50_257 * 512, 0.07) * 512.0, EOT_LOGIT);
        assert_eq!(emb.value(256 * 512 + 511, 0.07) * 512.0, WORD_LOGIT);
        assert_eq!(emb.value(257 * 512, 0.07), 0.07);
        assert_eq!(
            Fill::of(&spec, "encoder.ln_post.weight").value(0, 0.07),
            0.07
        );
    }
}
