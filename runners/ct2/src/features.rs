//! Whisper's log-mel input features, computed as the reference implementation
//! does (openai/whisper `log_mel_spectrogram`): a centred STFT (400-point
//! periodic Hann window, hop 160, reflect padding, last frame dropped), the
//! power spectrum through the 80-band Slaney mel bank, `log10` clamped at
//! 1e-10, floored at the whole input's maximum minus 8, then `(x + 4) / 4`.
//!
//! ct2rs' own pipeline floors each frame at that frame's maximum and leaves
//! frames past the audio at zero, which is not what Whisper was trained on;
//! the worker computes the features here and hands CTranslate2 the tensor.

use rustfft::{FftPlanner, num_complex::Complex};

/// Samples per second.
pub const SAMPLE_RATE: usize = 16_000;
/// FFT length and window.
pub const N_FFT: usize = 400;
/// Hop between frames.
pub const HOP: usize = 160;
/// Samples in one 30 s window.
pub const WINDOW_SAMPLES: usize = 30 * SAMPLE_RATE;
/// Frames in one 30 s window.
pub const WINDOW_FRAMES: usize = WINDOW_SAMPLES / HOP;

/// Features of `audio` (16 kHz mono in [-1, 1]) as whole 30 s windows:
/// `windows` × `n_mels` × 3,000, row-major, ready for a `[windows, n_mels,
/// 3000]` tensor. The audio is padded with 30 s of silence as Whisper pads
/// it; the last window is the one holding the audio's end.
pub fn log_mel_windows(audio: &[f32], n_mels: usize) -> (Vec<f32>, usize) {
    let windows = audio.len().div_ceil(WINDOW_SAMPLES).max(1);
    let frames = windows * WINDOW_FRAMES;
    let filters = ggml_container::mel::mel_filters(n_mels);
    let bins = N_FFT / 2 + 1;
    let window: Vec<f32> = (0..N_FFT)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / N_FFT as f32).cos())
        .collect();
    let fft = FftPlanner::<f32>::new().plan_fft_forward(N_FFT);
    let mut buf = vec![Complex::new(0.0, 0.0); N_FFT];
    let mut power = vec![0f32; bins];
    let mut out = vec![0f32; n_mels * frames];
    let mut max = f32::NEG_INFINITY;
    for frame in 0..frames {
        let centre = (frame * HOP) as isize;
        for (k, slot) in buf.iter_mut().enumerate() {
            let at = centre + k as isize - (N_FFT / 2) as isize;
            *slot = Complex::new(sample(audio, at) * window[k], 0.0);
        }
        fft.process(&mut buf);
        for (p, c) in power.iter_mut().zip(&buf) {
            *p = c.norm_sqr();
        }
        for m in 0..n_mels {
            let row = &filters[m * bins..(m + 1) * bins];
            let energy: f32 = row.iter().zip(&power).map(|(f, p)| f * p).sum();
            let v = energy.max(1e-10).log10();
            max = max.max(v);
            out[m * frames + frame] = v;
        }
    }
    let floor = max - 8.0;
    for v in &mut out {
        *v = (v.max(floor) + 4.0) / 4.0;
    }
    // [n_mels, frames] → [windows, n_mels, WINDOW_FRAMES].
    let mut windowed = Vec::with_capacity(out.len());
    for w in 0..windows {
        for m in 0..n_mels {
            let start = m * frames + w * WINDOW_FRAMES;
            windowed.extend_from_slice(&out[start..start + WINDOW_FRAMES]);
        }
    }
    (windowed, windows)
}

/// The padded signal at `at`: reflected before the start (torch's
/// `center=True`), the audio, then Whisper's silence.
fn sample(audio: &[f32], at: isize) -> f32 {
    let i = if at < 0 { -at } else { at } as usize;
    audio.get(i).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_the_floor_everywhere() {
        let (f, windows) = log_mel_windows(&vec![0.0; 16_000], 80);
        assert_eq!(windows, 1);
        assert_eq!(f.len(), 80 * WINDOW_FRAMES);
        // log10(1e-10) = -10 everywhere: the floor is -18, so (-10 + 4) / 4.
        assert!(f.iter().all(|&v| (v - (-1.5)).abs() < 1e-6));
    }

    #[test]
    fn a_tone_lights_its_band_and_the_range_is_8_decades() {
        let tone: Vec<f32> = (0..WINDOW_SAMPLES + 1)
            .map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 16_000.0).sin() * 0.5)
            .collect();
        let (f, windows) = log_mel_windows(&tone, 80);
        assert_eq!(windows, 2, "one sample past 30 s opens a second window");
        let frame = 1500;
        let column: Vec<f32> = (0..80).map(|m| f[m * WINDOW_FRAMES + frame]).collect();
        let (band, top) = column
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |a, (m, &v)| if v > a.1 { (m, v) } else { a });
        // 1 kHz sits at mel ≈ 15 on Slaney's scale: band 25 or so of 80 up to 8 kHz.
        assert!((20..=30).contains(&band), "{band}");
        // The floor is the whole input's maximum minus 8 decades: (8) / 4 = 2.
        let min = f.iter().copied().fold(f32::MAX, f32::min);
        let max = f.iter().copied().fold(f32::MIN, f32::max);
        assert!((max - min - 2.0).abs() < 1e-5, "{max} {min}");
        assert!(
            max - top < 0.01,
            "the steady tone is at the top in mid-input: {top} {max}"
        );
    }
}
