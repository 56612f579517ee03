//! Decode throughput and temperature fallbacks of a whisper arm's requests:
//! encode time, tokens per second, first-token time and real-time factor,
//! the first measured request apart from the warm ones after it.
//!
//! Each request's figures come from the worker (`decode` in
//! `results.jsonl`, [`worker_contract::DecodeTimings`]); this module only
//! sums and summarises them. A figure some request of a group lacks is
//! `None` for the group (never a sum over part of it), and its name is
//! listed in [`Throughput::unavailable`].
//!
//! These are the figures WhisperKit's regression tests record beside WER:
//! tokens per second, real-time factor, first-token time and fallback
//! counts. A drop in tokens per second on the same model usually means the
//! work ran on a slower unit than configured (a GPU or Neural Engine build
//! that fell back to the CPU), which the `throughput` gate names.

use crate::stats;
use serde::{Deserialize, Serialize};
use worker_contract::{RequestResult, TranscriptionResult};

/// Throughput of the first measured request and of the warm ones after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Throughput {
    /// The first measured request. It follows the arm's warmup requests
    /// (`warmup` in the spec); with none it is the context's first decode.
    pub cold: Option<ThroughputFigures>,
    /// Every measured request after the first; `None` with only one.
    pub warm: Option<ThroughputFigures>,
    /// Figures the runtime does not expose (e.g. `encode_ns` from
    /// CTranslate2, whose `generate` encodes and decodes in one call):
    /// shown as unavailable, never as 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// One group of requests' figures. Times are summed over the group, so
/// the rates are totals over totals (a long request weighs more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputFigures {
    /// Requests in the group.
    pub requests: u64,
    /// Audio they transcribed, in ms.
    pub audio_ms: u64,
    /// Their processing time (each request's `latency_ns`: the decode call
    /// and reading the result back), in ns.
    pub processing_ns: u64,
    /// `processing_ns / audio`: below 1 is faster than real time.
    pub real_time_factor: Option<f64>,
    /// Median encode time per request (encoder pass plus prompt), in ns.
    pub encode_p50_ns: Option<f64>,
    /// Median time from the call to the first token's logits, in ns.
    pub first_token_p50_ns: Option<f64>,
    /// Tokens decoded over the group.
    pub tokens_decoded: Option<u64>,
    /// Decode time over the group (the call minus log-mel and encode), in ns.
    pub decode_ns: Option<u64>,
    /// `tokens_decoded / decode_ns`, per second.
    pub tokens_per_s: Option<f64>,
    /// Temperature fallbacks over the group (whisper.cpp's `n_fail_p`).
    pub fallbacks: Option<u64>,
    /// Requests with at least one fallback.
    pub requests_with_fallback: Option<u64>,
}

/// Every figure that may be unavailable, by its field name.
const OPTIONAL: [&str; 5] = [
    "encode_ns",
    "first_token_ns",
    "tokens_decoded",
    "decode_ns",
    "fallbacks",
];

impl ThroughputFigures {
    /// The figures of `requests`; `None` for an empty group.
    pub fn of(requests: &[(&RequestResult, &TranscriptionResult)]) -> Option<ThroughputFigures> {
        if requests.is_empty() {
            return None;
        }
        // Saturating: the values come from results.jsonl, read as found.
        let audio_ms = requests
            .iter()
            .fold(0u64, |s, (_, t)| s.saturating_add(t.audio_ms));
        let processing_ns = requests
            .iter()
            .fold(0u64, |s, (r, _)| s.saturating_add(r.latency_ns));
        // A figure of every request, or `None` if any lacks it.
        fn every<T>(
            requests: &[(&RequestResult, &TranscriptionResult)],
            f: impl Fn(&worker_contract::DecodeTimings) -> Option<T>,
        ) -> Option<Vec<T>> {
            requests
                .iter()
                .map(|(_, t)| t.decode.as_ref().and_then(&f))
                .collect()
        }
        let sum = |v: Vec<u64>| v.into_iter().fold(0u64, u64::saturating_add);
        let median = |v: Vec<u64>| {
            let v: Vec<f64> = v.into_iter().map(|x| x as f64).collect();
            stats::percentile(&v, 50.0)
        };
        let tokens_decoded = every(requests, |d| Some(d.tokens_decoded)).map(sum);
        let decode_ns = every(requests, |d| d.decode_ns).map(sum);
        let fallbacks = every(requests, |d| d.fallbacks);
        Some(ThroughputFigures {
            requests: requests.len() as u64,
            audio_ms,
            processing_ns,
            real_time_factor: (audio_ms > 0)
                .then(|| processing_ns as f64 / (audio_ms as f64 * 1e6)),
            encode_p50_ns: every(requests, |d| d.encode_ns).and_then(median),
            first_token_p50_ns: every(requests, |d| d.first_token_ns).and_then(median),
            tokens_decoded,
            decode_ns,
            tokens_per_s: match (tokens_decoded, decode_ns) {
                (Some(t), Some(ns)) if ns > 0 => Some(t as f64 / (ns as f64 / 1e9)),
                _ => None,
            },
            requests_with_fallback: fallbacks
                .as_ref()
                .map(|f| f.iter().filter(|n| **n > 0).count() as u64),
            fallbacks: fallbacks.map(|f| f.into_iter().map(u64::from).sum()),
        })
    }
}

impl Throughput {
    /// The throughput of an arm's transcriptions, in request order; `None`
    /// without any.
    pub fn of(done: &[(&RequestResult, &TranscriptionResult)]) -> Option<Throughput> {
        let cold = ThroughputFigures::of(done.get(..1)?)?;
        let warm = ThroughputFigures::of(&done[1..]);
        let unavailable = OPTIONAL
            .iter()
            .filter(|name| {
                done.iter().any(|(_, t)| {
                    t.decode.as_ref().is_none_or(|d| match **name {
                        "encode_ns" => d.encode_ns.is_none(),
                        "first_token_ns" => d.first_token_ns.is_none(),
                        "decode_ns" => d.decode_ns.is_none(),
                        "fallbacks" => d.fallbacks.is_none(),
                        _ => false,
                    })
                })
            })
            .map(|n| n.to_string())
            .collect();
        Some(Throughput {
            cold: Some(cold),
            warm,
            unavailable,
        })
    }

    /// The warm requests' figures, else the first request's: what a gate
    /// judges (the steady state where there is one).
    pub fn judged(&self) -> Option<(&'static str, &ThroughputFigures)> {
        match (&self.warm, &self.cold) {
            (Some(w), _) => Some(("warm", w)),
            (None, Some(c)) => Some(("cold", c)),
            (None, None) => None,
        }
    }
}

/// A figure as text: `–` where the group has no value of a figure the
/// runtime does give, `unavailable` where the runtime does not.
pub fn cell(value: Option<String>, figure: &str, t: &Throughput) -> String {
    match value {
        Some(v) => v,
        None if t.unavailable.iter().any(|u| u == figure) => "unavailable".into(),
        None => "–".into(),
    }
}

/// One row per group (`cold`, `warm`) of an arm: the group, requests,
/// encode p50 ms, first-token p50 ms, tokens/s, real-time factor, fallbacks
/// (requests with one). Shared by `summary.md` and `report.html`.
pub fn rows(t: &Throughput) -> Vec<[String; 7]> {
    let ms = |ns: Option<f64>| ns.map(|n| format!("{:.1}", n / 1e6));
    [("cold", &t.cold), ("warm", &t.warm)]
        .into_iter()
        .filter_map(|(name, f)| f.as_ref().map(|f| (name, f)))
        .map(|(name, f)| {
            [
                name.to_string(),
                f.requests.to_string(),
                cell(ms(f.encode_p50_ns), "encode_ns", t),
                cell(ms(f.first_token_p50_ns), "first_token_ns", t),
                cell(f.tokens_per_s.map(|v| format!("{v:.1}")), "decode_ns", t),
                cell(f.real_time_factor.map(|v| format!("{v:.3}")), "", t),
                cell(
                    f.fallbacks.map(|n| {
                        format!("{n} ({} requests)", f.requests_with_fallback.unwrap_or(0))
                    }),
                    "fallbacks",
                    t,
                ),
            ]
        })
        .collect()
}

/// The column heads of [`rows`].
pub const HEADS: [&str; 7] = [
    "request",
    "count",
    "encode p50 ms",
    "first token p50 ms",
    "decode tokens/s",
    "real-time factor",
    "fallbacks",
];

/// The `summary.md` section: each whisper arm's cold and warm figures.
pub fn markdown(with: &[(&str, &Throughput)]) -> String {
    use std::fmt::Write;
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "\n## Decode throughput and fallbacks\n");
    let _ = writeln!(
        out,
        "Cold is the first measured request, warm every one after it. Encode is the encoder pass and the prompt; tokens/s is tokens decoded over decode time; real-time factor is processing time over audio time; fallbacks are temperature fallbacks (whisper.cpp's `n_fail_p`).\n"
    );
    let _ = writeln!(out, "| arm | {} |", HEADS.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(HEADS.len()));
    for (id, t) in with {
        for row in rows(t) {
            let _ = writeln!(out, "| {id} | {} |", row.join(" | "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use worker_contract::{DecodeTimings, ResultBody, StopReason};

    fn request(
        id: u64,
        latency_ns: u64,
        audio_ms: u64,
        decode: Option<DecodeTimings>,
    ) -> (RequestResult, TranscriptionResult) {
        let t = TranscriptionResult {
            fixture_id: format!("f{id}"),
            repetition: 0,
            tokens: vec![],
            eot: true,
            stop_reason: StopReason::Eot,
            text: String::new(),
            text_bytes_hex: None,
            segments: 1,
            audio_ms,
            decode,
        };
        let r = RequestResult {
            request_id: id,
            latency_ns,
            body: ResultBody::Transcription(Box::new(t.clone())),
            timing: None,
        };
        (r, t)
    }

    fn timings(encode_ms: u64, tokens: u64, decode_ms: u64, fallbacks: u32) -> DecodeTimings {
        DecodeTimings {
            full_ns: (encode_ms + decode_ms) * 1_000_000,
            windows: 1,
            encode_ns: Some(encode_ms * 1_000_000),
            first_token_ns: Some((encode_ms + 1) * 1_000_000),
            tokens_decoded: tokens,
            decode_ns: Some(decode_ms * 1_000_000),
            fallbacks: Some(fallbacks),
        }
    }

    #[test]
    fn the_first_request_stands_apart_and_rates_are_totals_over_totals() {
        let owned = [
            request(0, 900_000_000, 3_000, Some(timings(500, 10, 250, 0))),
            request(1, 300_000_000, 2_000, Some(timings(100, 20, 100, 1))),
            request(2, 500_000_000, 4_000, Some(timings(300, 40, 300, 0))),
        ];
        let done: Vec<_> = owned.iter().map(|(r, t)| (r, t)).collect();
        let t = Throughput::of(&done).unwrap();
        let cold = t.cold.unwrap();
        assert_eq!(cold.requests, 1);
        // 10 tokens in 250 ms; 900 ms for 3 s of audio.
        assert_eq!(cold.tokens_per_s, Some(40.0));
        assert_eq!(cold.real_time_factor, Some(0.3));
        assert_eq!(cold.encode_p50_ns, Some(500e6));
        let warm = t.warm.unwrap();
        // 60 tokens in 400 ms = 150/s; 800 ms for 6 s of audio.
        assert_eq!(
            (warm.tokens_decoded, warm.decode_ns),
            (Some(60), Some(400_000_000))
        );
        assert_eq!(warm.tokens_per_s, Some(150.0));
        assert!((warm.real_time_factor.unwrap() - 0.8 / 6.0).abs() < 1e-12);
        assert_eq!(warm.encode_p50_ns, Some(200e6));
        assert_eq!(
            (warm.fallbacks, warm.requests_with_fallback),
            (Some(1), Some(1))
        );
        assert!(t.unavailable.is_empty());
    }

    #[test]
    fn a_figure_one_request_lacks_is_unavailable_for_its_group() {
        let mut partial = timings(100, 20, 100, 0);
        partial.encode_ns = None;
        partial.decode_ns = None;
        partial.fallbacks = None;
        let owned = [
            request(0, 1, 1_000, Some(timings(100, 20, 100, 0))),
            request(1, 1, 1_000, Some(partial)),
            request(2, 1, 1_000, Some(timings(100, 20, 100, 0))),
        ];
        let done: Vec<_> = owned.iter().map(|(r, t)| (r, t)).collect();
        let t = Throughput::of(&done).unwrap();
        let warm = t.warm.unwrap();
        assert_eq!(warm.tokens_decoded, Some(40));
        assert_eq!((warm.decode_ns, warm.tokens_per_s), (None, None));
        assert_eq!((warm.encode_p50_ns, warm.fallbacks), (None, None));
        assert_eq!(t.unavailable, ["encode_ns", "decode_ns", "fallbacks"]);
        // A worker that reports no decode at all: only the rates from time and audio.
        let owned = [request(0, 500_000_000, 1_000, None)];
        let done: Vec<_> = owned.iter().map(|(r, t)| (r, t)).collect();
        let t = Throughput::of(&done).unwrap();
        assert!(t.warm.is_none());
        assert_eq!(t.cold.as_ref().unwrap().real_time_factor, Some(0.5));
        assert_eq!(t.cold.unwrap().tokens_per_s, None);
        assert_eq!(t.unavailable, OPTIONAL);
    }
}
