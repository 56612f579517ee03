//! The speech side of a whisper arm's receipt: runtime identity and topology,
//! cold load and first request apart from steady latency, exact transcripts
//! per request, quality against the references, and the comparison with the
//! arm's control (exact parity, memory by phase against logged buffers).

use analysis::stats;
use quality::{self, Reference, Transcription};
use sampler::Phase;
use serde::{Deserialize, Serialize};
use worker_contract::{
    FixtureInput, RequestResult, ResultBody, RuntimeReport, TranscriptionResult,
};

/// One measured request's exact output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TranscriptRow {
    /// The request's id, as in `results.jsonl`.
    pub request_id: u64,
    /// The request's latency in ns, as the worker measured it.
    pub latency_ns: u64,
    /// The transcription as the worker returned it (its fields appear inline).
    #[serde(flatten)]
    pub result: TranscriptionResult,
}

/// Latency with the cold parts apart from the steady requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeechLatency {
    /// Context load (`whisper_init_*`), from the runtime report.
    pub cold_load_ns: Option<u64>,
    /// Creating every state (working + extras).
    pub state_init_ns: Option<u64>,
    /// From `state_ready` to `warmup_done`: all warmup requests.
    pub warmup_ns: Option<u64>,
    /// The first measured request (`whisper_full`, stop to final text).
    pub first_request_ns: Option<u64>,
    /// Every measured request after the first.
    pub steady_count: u64,
    /// Median latency of the steady requests, in ns; `None` without any.
    pub steady_p50_ns: Option<f64>,
    /// 95th percentile latency of the steady requests, in ns.
    pub steady_p95_ns: Option<f64>,
    /// Longest latency of a steady request, in ns.
    pub steady_max_ns: Option<u64>,
    /// Real-time factor of the steady requests: processing time / audio time.
    pub steady_rtf: Option<f64>,
    /// From the end of each request's audio to its final text, over every
    /// measured request (reloads included); the latencies above are the
    /// decode alone. Absent for results without a timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_to_final: Option<analysis::residency::StopToFinal>,
}

/// Everything speech-specific about one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeechReceipt {
    /// Runtime identity and topology (typed in `worker-contract`).
    pub runtime: Option<RuntimeReport>,
    /// Cold load and first request apart from the steady requests.
    pub latency: SpeechLatency,
    /// Every measured request's output, in request order.
    pub transcripts: Vec<TranscriptRow>,
    /// Encode time, tokens per second, first-token time, real-time factor
    /// and temperature fallbacks: the first request apart from the warm
    /// ones. `None` without a transcription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<analysis::throughput::Throughput>,
    /// WER, determinism and silence false alarms against the references.
    pub quality: QualityReport,
    /// Inputs the worker converted to 16 kHz mono (a user's fixture set), with
    /// the layout each had.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub converted_inputs: Vec<ConvertedInput>,
    /// What the arm's `cancel` did; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<analysis::cancel::CancellationReport>,
}

/// One input decoded, downmixed and resampled by the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConvertedInput {
    /// The fixture's id.
    pub fixture_id: String,
    /// Its layout before conversion.
    pub from: worker_contract::Conversion,
}

/// WER (numbers normalised) per slice and category, determinism across
/// repetitions, and false alarms on slices without speech.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QualityReport {
    /// WER per slice and category; `None` when it could not be computed (see `errors`).
    pub wer: Option<quality::WerReport>,
    /// Whether repetitions of a fixture gave the same output; `None` when it could not be computed.
    pub determinism: Option<quality::DeterminismReport>,
    /// Words produced on slices without speech; `None` when it could not be computed.
    pub silence: Option<quality::SilenceReport>,
    /// Quality of inference against the arm's control: the share of
    /// fixtures on which this arm's WER is no greater than the control's.
    /// `None` for an arm without a control, or when it could not be computed
    /// (see `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qoi: Option<quality::QoiReport>,
    /// Why a measure could not be computed (e.g. a result without a reference).
    pub errors: Vec<String>,
}

impl QualityReport {
    /// Measure `results` against `references`; a measure that cannot be computed is `None`, with the reason in `errors`.
    pub fn build(results: &[Transcription], references: &[Reference]) -> QualityReport {
        let mut errors = Vec::new();
        fn keep<T>(errors: &mut Vec<String>, r: Result<T, quality::QualityError>) -> Option<T> {
            r.map_err(|e| errors.push(e.to_string())).ok()
        }
        let wer = keep(
            &mut errors,
            quality::wer_report(references, results, quality::Normalisation::Standard),
        );
        let determinism = keep(&mut errors, quality::determinism(results));
        let silence = keep(
            &mut errors,
            quality::silence_false_alarms(references, results),
        );
        QualityReport {
            wer,
            determinism,
            silence,
            qoi: None,
            errors,
        }
    }

    /// Add QoI against `control` (the control arm `control_id`'s quality);
    /// where it cannot be computed, say why in `errors`.
    pub fn add_qoi(&mut self, control_id: &str, control: &QualityReport) {
        let (Some(arm), Some(ctl)) = (&self.wer, &control.wer) else {
            self.errors.push(format!(
                "QoI: the arm or its control `{control_id}` has no WER report"
            ));
            return;
        };
        match quality::qoi(control_id, arm, ctl) {
            Ok(q) => self.qoi = Some(q),
            Err(e) => self.errors.push(format!("QoI: {e}")),
        }
    }
}

/// An arm against its control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ControlComparison {
    /// The arm id.
    pub arm: String,
    /// Its control arm's id.
    pub control: String,
    /// `Err` when the outputs cannot be compared (duplicate results).
    pub parity: Result<quality::ParityReport, String>,
    /// Per phase (first marker of each non-request phase): arm minus control.
    pub phase_deltas: Vec<PhaseDelta>,
    /// Sum of every state's logged kv + compute buffers: arm minus control.
    pub logged_state_bytes_delta: Option<i64>,
    /// Logged model buffers: arm minus control.
    pub logged_model_bytes_delta: Option<i64>,
}

/// One phase's memory, arm minus control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseDelta {
    /// The phase compared (its first marker in each arm).
    #[schemars(with = "String")]
    pub phase: Phase,
    /// Resident bytes at the marker: arm minus control.
    pub resident_delta_bytes: i64,
    /// Resident peak bytes at the marker: arm minus control; `None` where either lacks it.
    pub resident_peak_delta_bytes: Option<i64>,
    /// Footprint bytes at the marker: arm minus control; `None` where either lacks it.
    pub footprint_delta_bytes: Option<i64>,
}

/// The transcription results of an arm, in request order.
pub fn transcriptions(results: &[RequestResult]) -> Vec<(&RequestResult, &TranscriptionResult)> {
    results
        .iter()
        .filter_map(|r| match &r.body {
            ResultBody::Transcription(t) => Some((r, &**t)),
            _ => None,
        })
        .collect()
}

/// Assemble the speech part of an arm; `None` for arms that are not whisper
/// arms. `warmup_ns` is the time from `state_ready` to `warmup_done`.
pub fn assemble(
    results: &[RequestResult],
    runtime: Option<RuntimeReport>,
    fixtures: &[FixtureInput],
    warmup_ns: Option<u64>,
) -> Option<SpeechReceipt> {
    let done = transcriptions(results);
    if done.is_empty() && runtime.is_none() {
        return None;
    }
    let steady: Vec<&(&RequestResult, &TranscriptionResult)> = done.iter().skip(1).collect();
    let steady_ns: Vec<f64> = steady.iter().map(|(r, _)| r.latency_ns as f64).collect();
    // Saturating: the values come from results.jsonl, which a report reads
    // as found; an absurd one must not wrap or panic.
    let steady_audio_ns: u64 = steady.iter().fold(0u64, |sum, (_, t)| {
        sum.saturating_add(t.audio_ms.saturating_mul(1_000_000))
    });
    let steady_proc_ns: u64 = steady
        .iter()
        .fold(0u64, |sum, (r, _)| sum.saturating_add(r.latency_ns));
    let latency = SpeechLatency {
        cold_load_ns: runtime.as_ref().map(|r| r.load_ns),
        state_init_ns: runtime.as_ref().map(|r| r.state_ns),
        warmup_ns,
        first_request_ns: done.first().map(|(r, _)| r.latency_ns),
        steady_count: steady.len() as u64,
        steady_p50_ns: stats::percentile(&steady_ns, 50.0),
        steady_p95_ns: stats::percentile(&steady_ns, 95.0),
        steady_max_ns: steady.iter().map(|(r, _)| r.latency_ns).max(),
        steady_rtf: (steady_audio_ns > 0).then(|| steady_proc_ns as f64 / steady_audio_ns as f64),
        stop_to_final: analysis::residency::StopToFinal::of(done.iter().map(|(r, _)| *r)),
    };
    let transcripts = done
        .iter()
        .map(|(r, t)| TranscriptRow {
            request_id: r.request_id,
            latency_ns: r.latency_ns,
            result: (*t).clone(),
        })
        .collect();
    let outputs: Vec<Transcription> = done.iter().map(|(_, t)| to_quality(t)).collect();
    let quality = QualityReport::build(&outputs, &references(fixtures));
    let converted_inputs = fixtures
        .iter()
        .filter_map(|f| {
            f.conversion.map(|from| ConvertedInput {
                fixture_id: f.id.clone(),
                from,
            })
        })
        .collect();
    Some(SpeechReceipt {
        runtime,
        latency,
        throughput: analysis::throughput::Throughput::of(&done),
        transcripts,
        quality,
        converted_inputs,
        cancellation: None,
    })
}

/// The quality module's view of one result.
pub fn to_quality(t: &TranscriptionResult) -> Transcription {
    Transcription {
        fixture_id: t.fixture_id.clone(),
        repetition: t.repetition,
        token_ids: t.tokens.clone(),
        eot: t.eot,
        stop_reason: serde_json::to_value(t.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        // Invalid UTF-8 is compared by its exact bytes, never by a lossy rendering.
        text: match &t.text_bytes_hex {
            Some(hex) => format!("<bytes {hex}>"),
            None => t.text.clone(),
        },
    }
}

fn references(fixtures: &[FixtureInput]) -> Vec<Reference> {
    fixtures
        .iter()
        .map(|f| Reference {
            fixture_id: f.id.clone(),
            category: f.category.clone(),
            text: f.reference.clone(),
        })
        .collect()
}

/// Both arms' outputs in the quality module's form.
pub struct ControlResults {
    /// The arm's transcriptions.
    pub arm: Vec<Transcription>,
    /// The control's transcriptions.
    pub control: Vec<Transcription>,
}
