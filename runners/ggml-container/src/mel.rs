//! The mel filter bank stored in every Whisper GGML file: librosa's
//! `filters.mel(sr=16000, n_fft=400, n_mels)` with its defaults (Slaney mel
//! scale, Slaney area normalisation, fmin 0, fmax sr/2), computed in f64 and
//! stored as f32 (reference file §5).

/// Sample rate Whisper models are trained on.
pub const SAMPLE_RATE: f64 = 16_000.0;
/// STFT window length; the bank has `N_FFT / 2 + 1` columns.
pub const N_FFT: usize = 400;

// Slaney's scale: linear below 1 kHz, logarithmic above.
const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

fn hz_to_mel(hz: f64) -> f64 {
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step()
    } else {
        hz / F_SP
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// numpy's `linspace(start, stop, num)`: `i * step + start`, last element exactly `stop`.
fn linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    let step = (stop - start) / (num - 1) as f64;
    let mut v: Vec<f64> = (0..num).map(|i| i as f64 * step + start).collect();
    if let Some(last) = v.last_mut() {
        *last = stop;
    }
    v
}

/// The `n_mels x (N_FFT/2 + 1)` bank, row-major (`data[mel * 201 + bin]`).
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    let n_bins = N_FFT / 2 + 1;
    let nyquist = SAMPLE_RATE / 2.0;
    let fft_freqs = linspace(0.0, nyquist, n_bins);
    let mel_f: Vec<f64> = linspace(hz_to_mel(0.0), hz_to_mel(nyquist), n_mels + 2)
        .into_iter()
        .map(mel_to_hz)
        .collect();
    let mut out = Vec::with_capacity(n_mels * n_bins);
    for i in 0..n_mels {
        let (lo, mid, hi) = (mel_f[i], mel_f[i + 1], mel_f[i + 2]);
        let enorm = 2.0 / (hi - lo);
        for &f in &fft_freqs {
            let lower = -(lo - f) / (mid - lo);
            let upper = (hi - f) / (hi - mid);
            // Clamp negatives to zero but keep a -0.0 (the first filter's lower
            // slope at 0 Hz is -0.0): the reference conversion's file has it,
            // and f64::min/max leave the sign of zero unspecified.
            let m = if upper < lower { upper } else { lower };
            let w = if m < 0.0 { 0.0 } else { m };
            out.push((w * enorm) as f32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank_has_whisper_shape_and_peak() {
        let bank = mel_filters(80);
        assert_eq!(bank.len(), 80 * 201);
        let max = bank.iter().copied().fold(0.0f32, f32::max);
        // openai-whisper's mel_filters.npz peaks at 0.02588 (reference §5).
        assert!((max - 0.02588).abs() < 5e-6, "max {max}");
        // Bin 0 (DC) is 0 Hz and belongs to no filter except the first's edge.
        assert_eq!(bank[201], 0.0);
        // The first filter starts at 0 Hz with -0.0, as in the reference file.
        assert_eq!(bank[0].to_bits(), 0x8000_0000);
    }
}
