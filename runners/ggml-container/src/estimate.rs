//! Predicted state allocations of whisper.cpp 1.8.3 for a model (seed 000 §3),
//! so a receipt can put predicted, logged and measured sizes side by side.
//!
//! `whisper_init_state` allocates FP16 K and V caches with context lengths
//! rounded up to multiples of 256: self-attention over the text context
//! (n_text_layer layers of n_text_state), cross-attention over the audio
//! context (n_text_layer layers), and a one-layer pad cache of n_audio_state
//! over the audio context. It reserves `n_vocab * n_text_ctx` f32 logits.
//! With more than one decoder (beam search / best-of) the self cache is
//! reallocated `n_decoders + 2` times larger and never shrunk.

use crate::{ClassTotals, Hparams};
use serde::{Deserialize, Serialize};

/// whisper.cpp's `GGML_PAD(x, 256)` for cache lengths.
pub const CACHE_PAD: u64 = 256;

/// Bytes per K/V element (the state's `itype` is F16).
const KV_ELEMENT_BYTES: u64 = 2;

/// What-if overrides of the state's shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EstimateOptions {
    /// Audio positions the state is sized for (default: n_audio_ctx).
    pub audio_ctx: Option<u64>,
    /// Text positions the state is sized for (default: n_text_ctx).
    pub text_ctx: Option<u64>,
    /// Concurrent decoders (beam size or best-of); default 1.
    pub decoders: Option<u64>,
    /// Tokens per decoder batch the logits capacity is sized for (memqual's
    /// bounded state); default: `text_ctx`, as stock whisper.cpp reserves.
    #[serde(default)]
    pub max_batch: Option<u64>,
}

/// Predicted allocations, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEstimate {
    /// Audio positions used: the option, else the header's `n_audio_ctx`.
    pub audio_ctx: u64,
    /// Text positions used: the option, else the header's `n_text_ctx`.
    pub text_ctx: u64,
    /// `audio_ctx` rounded up to a multiple of `CACHE_PAD`.
    pub padded_audio_ctx: u64,
    /// `text_ctx` rounded up to a multiple of `CACHE_PAD`.
    pub padded_text_ctx: u64,
    /// Concurrent decoders used (at least 1).
    pub decoders: u64,
    /// How many single-decoder self caches the self cache holds: `decoders + 2`
    /// with more than one decoder, else 1.
    pub kv_self_factor: u64,
    /// Self-attention K and V cache: 2 x `n_text_layer` x `padded_text_ctx` x
    /// `n_text_state` x 2 bytes, times `kv_self_factor`.
    pub kv_self_bytes: u64,
    /// Cross-attention K and V cache: 2 x `n_text_layer` x `padded_audio_ctx` x
    /// `n_text_state` x 2 bytes.
    pub kv_cross_bytes: u64,
    /// The one-layer pad cache: 2 x `padded_audio_ctx` x `n_audio_state` x 2 bytes.
    pub kv_pad_bytes: u64,
    /// Self + cross + pad caches.
    pub kv_total_bytes: u64,
    /// Tokens the logits capacity holds: `max_batch`, else `text_ctx`.
    pub logits_batch: u64,
    /// The f32 logits buffer, `n_vocab` x `logits_batch` x 4 bytes. Reserved
    /// capacity; not necessarily touched (seed 000 §3.3).
    pub logits_reserve_bytes: u64,
    /// Native-encoder weight payload bytes, when the file was parsed (`None`
    /// when only a header was given).
    pub native_encoder_weight_bytes: Option<u64>,
    /// Decoder weight payload bytes, when the file was parsed.
    pub decoder_weight_bytes: Option<u64>,
}

/// Round `x` up to a multiple of [`CACHE_PAD`] (saturating at `u64::MAX`).
pub fn pad(x: u64) -> u64 {
    x.div_ceil(CACHE_PAD).saturating_mul(CACHE_PAD)
}

fn positive(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The state arithmetic for `h` (and the weights, if `totals` is given).
pub fn estimate(h: &Hparams, totals: Option<&ClassTotals>, opts: EstimateOptions) -> StateEstimate {
    let audio_ctx = opts.audio_ctx.unwrap_or(positive(h.n_audio_ctx));
    let text_ctx = opts.text_ctx.unwrap_or(positive(h.n_text_ctx));
    let decoders = opts.decoders.unwrap_or(1).max(1);
    let logits_batch = opts.max_batch.unwrap_or(text_ctx);
    let kv_self_factor = if decoders > 1 {
        decoders.saturating_add(2)
    } else {
        1
    };
    let (padded_audio_ctx, padded_text_ctx) = (pad(audio_ctx), pad(text_ctx));
    // K and V, each layers x positions x width elements. Saturating: the
    // header's numbers come from a file and the options from a command line;
    // a size that does not fit 64 bits shows as u64::MAX, never wrapped small.
    let kv = |layers: u64, positions: u64, width: u64| {
        [layers, positions, width, KV_ELEMENT_BYTES]
            .iter()
            .fold(2u64, |acc, x| acc.saturating_mul(*x))
    };
    let kv_self_bytes = kv(
        positive(h.n_text_layer),
        padded_text_ctx,
        positive(h.n_text_state),
    )
    .saturating_mul(kv_self_factor);
    let kv_cross_bytes = kv(
        positive(h.n_text_layer),
        padded_audio_ctx,
        positive(h.n_text_state),
    );
    let kv_pad_bytes = kv(1, padded_audio_ctx, positive(h.n_audio_state));
    StateEstimate {
        audio_ctx,
        text_ctx,
        padded_audio_ctx,
        padded_text_ctx,
        decoders,
        kv_self_factor,
        kv_self_bytes,
        kv_cross_bytes,
        kv_pad_bytes,
        kv_total_bytes: kv_self_bytes
            .saturating_add(kv_cross_bytes)
            .saturating_add(kv_pad_bytes),
        logits_batch,
        logits_reserve_bytes: positive(h.n_vocab)
            .saturating_mul(logits_batch)
            .saturating_mul(4),
        native_encoder_weight_bytes: totals.map(|t| t.native_encoder.payload_bytes),
        decoder_weight_bytes: totals.map(|t| t.decoder.payload_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn large_v3_turbo() -> Hparams {
        // openai/whisper-large-v3-turbo's published dimensions (seed 000 §3.1).
        Hparams::from_array([51866, 1500, 1280, 20, 32, 448, 1280, 20, 4, 128, 1])
    }

    #[test]
    fn large_v3_turbo_reserves_and_pads_as_seed_000_says() {
        let e = estimate(&large_v3_turbo(), None, EstimateOptions::default());
        assert_eq!(e.logits_reserve_bytes, 92_943_872);
        assert_eq!((e.padded_text_ctx, e.padded_audio_ctx), (512, 1536));
        assert_eq!(e.kv_self_bytes, 2 * 4 * 512 * 1280 * 2);
        assert_eq!(e.kv_cross_bytes, 2 * 4 * 1536 * 1280 * 2);
        assert_eq!(e.kv_pad_bytes, 2 * 1536 * 1280 * 2);
        assert_eq!(e.native_encoder_weight_bytes, None);
    }

    #[test]
    fn bounded_audio_context_and_beams() {
        // 600 positions round to 768 (seed 000 §3.2).
        let opts = EstimateOptions {
            max_batch: None,
            audio_ctx: Some(600),
            decoders: Some(5),
            ..Default::default()
        };
        let e = estimate(&large_v3_turbo(), None, opts);
        assert_eq!(e.padded_audio_ctx, 768);
        assert_eq!(e.kv_self_factor, 7);
        assert_eq!(e.kv_self_bytes, 7 * 2 * 4 * 512 * 1280 * 2);
        assert_eq!(e.kv_cross_bytes, 2 * 4 * 768 * 1280 * 2);
    }

    #[test]
    fn huge_numbers_saturate_instead_of_wrapping() {
        let h = Hparams::from_array([i32::MAX; 11]);
        let opts = EstimateOptions {
            max_batch: None,
            audio_ctx: Some(u64::MAX),
            text_ctx: Some(u64::MAX),
            decoders: Some(u64::MAX),
        };
        let e = estimate(&h, None, opts);
        assert_eq!(e.kv_self_bytes, u64::MAX);
        assert_eq!(e.kv_total_bytes, u64::MAX);
        assert_eq!(e.logits_reserve_bytes, u64::MAX);
        assert_eq!(pad(u64::MAX), u64::MAX);
    }

    #[test]
    fn tiny_en_matches_the_sizes_whisper_cpp_logs() {
        // whisper_init_state on tiny.en: kv self 3.15 MB, cross 9.44 MB, pad 2.36 MB (1e6 bytes).
        let h = Hparams::from_array([51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1]);
        let e = estimate(&h, None, EstimateOptions::default());
        assert_eq!(e.kv_self_bytes, 3_145_728);
        assert_eq!(e.kv_cross_bytes, 9_437_184);
        assert_eq!(e.kv_pad_bytes, 2_359_296);
        let mb = |b: u64| format!("{:.2}", b as f64 / 1e6);
        assert_eq!(
            (
                mb(e.kv_self_bytes),
                mb(e.kv_cross_bytes),
                mb(e.kv_pad_bytes)
            ),
            ("3.15".into(), "9.44".into(), "2.36".into())
        );
    }
}
