//! Real-time delivery of one request's audio: a feeder thread hands the
//! fixture over in chunks at the pace it was spoken, while the worker thread
//! does whatever speech start asks of it (a reload) and then collects the
//! chunks into the request's buffer.
//!
//! What this is and is not: whisper.cpp's `whisper_full` decodes whole
//! windows, so the worker only buffers while the audio arrives and starts
//! decoding at the stop (the last chunk). The only work that overlaps the
//! audio is a reload under an idle policy. Stop-to-final latency is then
//! the decode plus whatever of the reload outlasted the audio.

use sampler::clock;
use std::sync::mpsc;
use std::time::Duration;

/// Samples per second of every fixture (16 kHz mono).
pub const SAMPLE_RATE_HZ: u64 = 16_000;

/// The request's audio as it arrived.
#[derive(Debug)]
pub struct Delivered {
    /// Every sample, in order, appended chunk by chunk.
    pub samples: Vec<f32>,
    /// Chunks delivered.
    pub chunks: u32,
    /// When the last chunk was handed over (the stop), on the markers' clock.
    pub audio_end_ns: u64,
}

/// The feeder thread vanished before the last chunk (it panicked).
#[derive(Debug, thiserror::Error)]
#[error("real-time delivery ended after {got} of {expected} chunks (the feeder thread failed)")]
pub struct DeliveryBroken {
    /// Chunks received.
    pub got: u32,
    /// Chunks the audio needs.
    pub expected: u32,
}

/// Chunk boundaries (end sample index, due time relative to speech start in
/// ns) for `n` samples in chunks of `chunk_ms`: chunk k is available once
/// its last sample has been spoken; the last chunk may be shorter.
pub fn schedule(n: usize, chunk_ms: u32) -> Vec<(usize, u64)> {
    let per_chunk = (u64::from(chunk_ms.max(1)) * SAMPLE_RATE_HZ / 1000).max(1) as usize;
    let mut out = Vec::with_capacity(n.div_ceil(per_chunk));
    let mut end = 0usize;
    while end < n {
        end = (end + per_chunk).min(n);
        let due_ns = end as u64 * 1_000_000_000 / SAMPLE_RATE_HZ;
        out.push((end, due_ns));
    }
    out
}

/// Deliver `samples` from `speech_start_ns` on at real-time pace in
/// `chunk_ms` chunks, running `meanwhile` on this thread as the audio
/// arrives; returns the buffered audio once its last chunk arrived, and
/// `meanwhile`'s result.
pub fn deliver<T>(
    samples: &[f32],
    chunk_ms: u32,
    speech_start_ns: u64,
    meanwhile: impl FnOnce() -> T,
) -> (Result<Delivered, DeliveryBroken>, T) {
    let plan = schedule(samples.len(), chunk_ms);
    let expected = plan.len() as u32;
    let (tx, rx) = mpsc::channel::<(usize, u64)>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for (end, due) in plan {
                let due_ns = speech_start_ns.saturating_add(due);
                let now = clock::monotonic_ns();
                if due_ns > now {
                    std::thread::sleep(Duration::from_nanos(due_ns - now));
                }
                // The receiver only goes away when the request failed.
                if tx.send((end, clock::monotonic_ns())).is_err() {
                    return;
                }
            }
        });
        let result = meanwhile();
        // The buffer grows as the audio arrives, as a capture buffer would.
        let mut buffer: Vec<f32> = Vec::new();
        let mut got = 0u32;
        let mut audio_end_ns = speech_start_ns;
        for (end, sent_ns) in rx.iter() {
            buffer.extend_from_slice(&samples[buffer.len()..end]);
            got += 1;
            audio_end_ns = sent_ns;
        }
        let delivered = if got == expected {
            Ok(Delivered {
                samples: buffer,
                chunks: got,
                audio_end_ns,
            })
        } else {
            Err(DeliveryBroken { got, expected })
        };
        (delivered, result)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_audio_and_fall_due_as_it_is_spoken() {
        // 1.05 s at 16 kHz in 100 ms chunks: ten full chunks and one of 50 ms.
        let plan = schedule(16_800, 100);
        assert_eq!(plan.len(), 11);
        assert_eq!(plan[0], (1_600, 100_000_000));
        assert_eq!(plan[9], (16_000, 1_000_000_000));
        assert_eq!(plan[10], (16_800, 1_050_000_000));
        assert!(schedule(0, 100).is_empty());
        assert_eq!(schedule(5, 1000), vec![(5, 312_500)]);
    }

    #[test]
    fn delivery_returns_every_sample_no_earlier_than_spoken() {
        let samples: Vec<f32> = (0..4_000).map(|i| i as f32).collect();
        let start = clock::monotonic_ns();
        let (delivered, ran) = deliver(&samples, 50, start, || 7);
        let d = delivered.unwrap();
        assert_eq!(ran, 7);
        assert_eq!(d.samples, samples);
        assert_eq!(d.chunks, 5);
        // 4000 samples are 250 ms of speech: the stop cannot come sooner.
        assert!(d.audio_end_ns >= start + 250_000_000);
    }
}
