//! A whisper arm's state, three ways: what `memqual artifact estimate`
//! predicts for its caches and logits reserve (the worker's runtime report
//! carries it), what whisper.cpp logged while creating the state, and what
//! the worker (and its external encoder process) measured between
//! `model_loaded` and `state_ready`.
//!
//! whisper.cpp clears its kv caches when it creates them, so they are
//! resident at `state_ready`; the logits reserve and the compute buffers are
//! only reserved there (virtual) until a request writes them. Each side is
//! therefore judged twice: resident against the caches, virtual against
//! caches + logits reserve + compute buffers. A measured figure more than
//! [`MISMATCH`] away from the expected one is listed as a finding, never
//! absorbed by a tolerance.

use sampler::TaskMemory;
use serde::{Deserialize, Serialize};
use worker_contract::{RuntimeReport, StateBuffers};

/// The relative difference beyond which a measured figure is a finding.
pub const MISMATCH: f64 = 0.05;

/// Predicted, logged and measured state of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateAccounting {
    /// The decoding worker's state.
    pub worker: StateSide,
    /// The external encoder process's state, where the arm has one that
    /// measured itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder_process: Option<StateSide>,
    /// Every measured figure more than 5 % from its expectation, in words.
    pub findings: Vec<String>,
    /// What this arm's state saves against its control's: predicted (the
    /// estimates' difference) beside measured (the growths' difference),
    /// worker and encoder process together. Overheads the estimate does not
    /// model (graph metadata, allocator arenas) are the same on both sides
    /// and cancel here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_control: Option<StateSaving>,
}

/// A state's saving against the control's, both processes summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateSaving {
    /// The control arm.
    pub control: String,
    /// Predicted resident saving: the caches' difference.
    pub predicted_resident_bytes: i64,
    /// Measured resident saving: the control's growth minus this arm's.
    pub measured_resident_bytes: i64,
    /// Measured footprint saving, where both report a footprint.
    pub measured_footprint_bytes: Option<i64>,
    /// Predicted virtual saving: caches, logits reserve and logged compute buffers.
    pub predicted_virtual_bytes: i64,
    /// Measured virtual saving.
    pub measured_virtual_bytes: i64,
    /// measured ÷ predicted − 1, resident (`None` when nothing was predicted).
    pub resident_mismatch: Option<f64>,
    /// measured ÷ predicted − 1, virtual.
    pub virtual_mismatch: Option<f64>,
}

impl StateSaving {
    /// The saving's mismatches beyond [`MISMATCH`], in words.
    pub fn findings(&self) -> Vec<String> {
        [
            (
                "resident",
                self.resident_mismatch,
                self.measured_resident_bytes,
                self.predicted_resident_bytes,
            ),
            (
                "virtual",
                self.virtual_mismatch,
                self.measured_virtual_bytes,
                self.predicted_virtual_bytes,
            ),
        ]
        .into_iter()
        .filter_map(|(what, mismatch, measured, predicted)| {
            let x = mismatch.filter(|x| x.abs() > MISMATCH)?;
            Some(format!(
                "against {}: the state saves {:.2} MB {what}, {:+.1} % from the {:.2} MB predicted",
                self.control,
                measured as f64 / 1e6,
                x * 100.0,
                predicted as f64 / 1e6
            ))
        })
        .collect()
    }
}

/// What `arm`'s state saves against `ctl`'s (the control `control`).
pub fn saving(control: &str, ctl: &StateAccounting, arm: &StateAccounting) -> StateSaving {
    let sum = |a: &StateAccounting, f: fn(&StateSide) -> i64| {
        f(&a.worker) + a.encoder_process.as_ref().map_or(0, f)
    };
    let footprint = |a: &StateAccounting| -> Option<i64> {
        let encoder = match &a.encoder_process {
            Some(e) => e.measured_footprint_bytes?,
            None => 0,
        };
        Some(a.worker.measured_footprint_bytes? + encoder)
    };
    let predicted_resident = sum(ctl, |s| s.expected_resident_bytes as i64)
        - sum(arm, |s| s.expected_resident_bytes as i64);
    let measured_resident =
        sum(ctl, |s| s.measured_resident_bytes) - sum(arm, |s| s.measured_resident_bytes);
    let predicted_virtual = sum(ctl, |s| s.expected_virtual_bytes as i64)
        - sum(arm, |s| s.expected_virtual_bytes as i64);
    let measured_virtual =
        sum(ctl, |s| s.measured_virtual_bytes) - sum(arm, |s| s.measured_virtual_bytes);
    let mismatch = |measured: i64, predicted: i64| {
        (predicted != 0).then(|| measured as f64 / predicted as f64 - 1.0)
    };
    StateSaving {
        control: control.to_string(),
        predicted_resident_bytes: predicted_resident,
        measured_resident_bytes: measured_resident,
        measured_footprint_bytes: footprint(ctl).zip(footprint(arm)).map(|(c, a)| c - a),
        predicted_virtual_bytes: predicted_virtual,
        measured_virtual_bytes: measured_virtual,
        resident_mismatch: mismatch(measured_resident, predicted_resident),
        virtual_mismatch: mismatch(measured_virtual, predicted_virtual),
    }
}

/// One process's state: its parts, then the totals judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateSide {
    /// Each cache and reserve, predicted beside logged.
    pub parts: Vec<StatePart>,
    /// The compute buffers whisper.cpp logged, summed (conv, encode, cross, decode).
    pub compute_logged_bytes: u64,
    /// Expected resident growth: the predicted caches (logged where no
    /// prediction was reported).
    pub expected_resident_bytes: u64,
    /// Measured resident growth, `state_ready` − `model_loaded`.
    pub measured_resident_bytes: i64,
    /// Measured footprint growth (`RssAnon + RssShmem + VmSwap`, macOS
    /// `phys_footprint`), where reported.
    pub measured_footprint_bytes: Option<i64>,
    /// Expected virtual growth: the caches, the logits reserve and the compute buffers.
    pub expected_virtual_bytes: u64,
    /// Measured virtual growth, `state_ready` − `model_loaded`.
    pub measured_virtual_bytes: i64,
    /// measured ÷ expected − 1, resident (`None` when nothing was expected).
    pub resident_mismatch: Option<f64>,
    /// measured ÷ expected − 1, virtual.
    pub virtual_mismatch: Option<f64>,
}

/// One cache or reserve of a state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatePart {
    /// `kv_self`, `kv_cross`, `kv_pad` or `logits_reserve`.
    pub name: String,
    /// What the estimate predicts (`None` where the worker reported no prediction).
    pub predicted_bytes: Option<u64>,
    /// What whisper.cpp logged (`None` where it logs nothing: the logits reserve).
    pub logged_bytes: Option<u64>,
    /// Whether it is resident at `state_ready` (caches: cleared at creation)
    /// or only reserved (the logits reserve).
    pub resident_at_state_ready: bool,
}

/// The prediction a worker reported: its settings' `predicted_state`, else
/// (a patched worker from before every worker reported it) the patch report's.
fn prediction(runtime: &RuntimeReport) -> Option<&serde_json::Value> {
    let s = &runtime.settings;
    s.get("predicted_state")
        .or_else(|| s.get("memqual_patch")?.get("predicted_state"))
        .filter(|v| v.is_object())
}

fn bytes(v: Option<&serde_json::Value>, key: &str) -> Option<u64> {
    v?.get(key)?.as_u64()
}

/// Build the accounting of an arm from the worker's memory at its first
/// `model_loaded` and `state_ready` markers and its runtime report
/// (`worker_bounded`: the arm sets `state_bounds`); `None` for an arm that
/// never reached `state_ready` or reported no runtime.
pub fn build(
    model_loaded: Option<&TaskMemory>,
    state_ready: Option<&TaskMemory>,
    runtime: Option<&RuntimeReport>,
    worker_bounded: bool,
) -> Option<StateAccounting> {
    let (runtime, loaded, ready) = (runtime?, model_loaded?, state_ready?);
    let logged = runtime.topology.states.first();
    let predicted = prediction(runtime);
    let external = runtime.external_encoder.as_ref();
    // A worker whose encoder runs elsewhere allocates no pad cache (patch 0004).
    let worker_pad = external.is_none();
    let mut parts = vec![
        part(
            "kv_self",
            bytes(predicted, "kv_self_bytes"),
            logged.and_then(|s| s.kv_self.map(|l| l.bytes)),
            true,
        ),
        part(
            "kv_cross",
            bytes(predicted, "kv_cross_bytes"),
            logged.and_then(|s| s.kv_cross.map(|l| l.bytes)),
            true,
        ),
    ];
    if worker_pad {
        parts.push(part(
            "kv_pad",
            bytes(predicted, "kv_pad_bytes"),
            logged.and_then(|s| s.kv_pad.map(|l| l.bytes)),
            true,
        ));
    }
    parts.push(part(
        "logits_reserve",
        bytes(predicted, "logits_reserve_bytes"),
        None,
        false,
    ));
    let measured = |from: &TaskMemory, to: &TaskMemory| Measured {
        resident: to.resident_bytes as i64 - from.resident_bytes as i64,
        footprint: match (from.footprint_bytes, to.footprint_bytes) {
            (Some(a), Some(b)) => Some(b as i64 - a as i64),
            _ => None,
        },
        virt: to.virtual_bytes as i64 - from.virtual_bytes as i64,
    };
    let worker = side(parts, compute_sum(logged), measured(loaded, ready));
    let encoder_process = external.and_then(|e| {
        let steps = e.memory.as_ref()?;
        let logged = e.topology.as_ref().and_then(|t| t.states.first());
        // The worker's prediction holds for the process's pad cache when both
        // are sized alike: both unbounded, or the process given the worker's
        // bound. A full-model process beside a bounded worker keeps the
        // model's 1500 positions: only its log says what it holds.
        let alike = !worker_bounded || e.max_audio_ctx > 0;
        // A full-model process (layout `full`) also holds the decoder's
        // caches it never uses: its log says how much.
        let mut parts: Vec<StatePart> = logged
            .into_iter()
            .flat_map(|s| [("kv_self", s.kv_self), ("kv_cross", s.kv_cross)])
            .filter_map(|(name, size)| Some(part(name, None, Some(size?.bytes), true)))
            .collect();
        parts.push(part(
            "kv_pad",
            bytes(predicted, "kv_pad_bytes").filter(|_| alike),
            logged.and_then(|s| s.kv_pad.map(|l| l.bytes)),
            true,
        ));
        let m = |s: &worker_contract::EncoderMemory| TaskMemory {
            resident_bytes: s.resident_bytes,
            footprint_bytes: s.footprint_bytes,
            virtual_bytes: s.virtual_bytes,
            ..TaskMemory::default()
        };
        Some(side(
            parts,
            compute_sum(logged),
            measured(&m(&steps.model_loaded), &m(&steps.state_ready)),
        ))
    });
    let mut findings = Vec::new();
    for (who, s) in std::iter::once(("worker", &worker))
        .chain(encoder_process.iter().map(|s| ("encoder process", s)))
    {
        for (what, mismatch, measured, expected) in [
            (
                "resident",
                s.resident_mismatch,
                s.measured_resident_bytes,
                s.expected_resident_bytes,
            ),
            (
                "virtual",
                s.virtual_mismatch,
                s.measured_virtual_bytes,
                s.expected_virtual_bytes,
            ),
        ] {
            if let Some(x) = mismatch.filter(|x| x.abs() > MISMATCH) {
                findings.push(format!(
                    "{who}: {what} grew {:.2} MB from model_loaded to state_ready, {:+.1} % from the {:.2} MB expected",
                    measured as f64 / 1e6,
                    x * 100.0,
                    expected as f64 / 1e6
                ));
            }
        }
    }
    Some(StateAccounting {
        worker,
        encoder_process,
        findings,
        against_control: None,
    })
}

struct Measured {
    resident: i64,
    footprint: Option<i64>,
    virt: i64,
}

fn part(name: &str, predicted: Option<u64>, logged: Option<u64>, resident: bool) -> StatePart {
    StatePart {
        name: name.into(),
        predicted_bytes: predicted,
        logged_bytes: logged,
        resident_at_state_ready: resident,
    }
}

fn compute_sum(logged: Option<&StateBuffers>) -> u64 {
    logged.map_or(0, |s| s.compute.iter().map(|(_, l)| l.bytes).sum())
}

fn side(parts: Vec<StatePart>, compute_logged_bytes: u64, m: Measured) -> StateSide {
    let expected = |p: &StatePart| p.predicted_bytes.or(p.logged_bytes).unwrap_or(0);
    let resident: u64 = parts
        .iter()
        .filter(|p| p.resident_at_state_ready)
        .map(expected)
        .sum();
    let reserved: u64 = parts.iter().map(expected).sum::<u64>() + compute_logged_bytes;
    let mismatch = |measured: i64, expected: u64| {
        (expected > 0).then(|| measured as f64 / expected as f64 - 1.0)
    };
    StateSide {
        parts,
        compute_logged_bytes,
        expected_resident_bytes: resident,
        measured_resident_bytes: m.resident,
        measured_footprint_bytes: m.footprint,
        expected_virtual_bytes: reserved,
        measured_virtual_bytes: m.virt,
        resident_mismatch: mismatch(m.resident, resident),
        virtual_mismatch: mismatch(m.virt, reserved),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What whisper.cpp 1.8.3 logged creating tiny.en's state on CPU.
    const TINY_STATE_LOG: &[&str] = &[
        "whisper_init_state: kv self size  =    3.15 MB",
        "whisper_init_state: kv cross size =    9.44 MB",
        "whisper_init_state: kv pad  size  =    2.36 MB",
        "whisper_init_state: compute buffer (conv)   =   13.21 MB",
        "whisper_init_state: compute buffer (encode) =   64.81 MB",
        "whisper_init_state: compute buffer (cross)  =    3.89 MB",
        "whisper_init_state: compute buffer (decode) =   95.91 MB",
    ];

    /// `memqual artifact estimate ggml-tiny.en-f16.bin --json`'s state.
    fn tiny_estimate() -> serde_json::Value {
        serde_json::json!({
            "kv_self_bytes": 3_145_728u64, "kv_cross_bytes": 9_437_184u64,
            "kv_pad_bytes": 2_359_296u64, "logits_reserve_bytes": 92_940_288u64,
        })
    }

    fn runtime(log: &[&str], predicted: serde_json::Value) -> RuntimeReport {
        serde_json::from_value(serde_json::json!({
            "runtime": "whisper.cpp", "runtime_version": "1.8.3", "system_info": "",
            "worker_executable": "w", "worker_sha256": null,
            "model": {"path": "m", "bytes": 1, "sha256": "00", "ftype": 1, "n_vocab": 51864,
                      "n_audio_layer": 4, "n_text_layer": 4},
            "coreml": null, "state_count": 1, "initializer": "no_state",
            "settings": {"predicted_state": predicted},
            "topology": worker_contract::Topology::from_log(log.iter().copied()),
            "load_ns": 0, "state_ns": 0,
        }))
        .expect("a runtime report")
    }

    /// The worker's memory at `model_loaded` and `state_ready` (resident,
    /// virtual); its footprint 8 MB below resident (the executable's pages).
    fn steps(loaded: (u64, u64), ready: (u64, u64)) -> [TaskMemory; 2] {
        [loaded, ready].map(|(resident, virt)| TaskMemory {
            resident_bytes: resident,
            footprint_bytes: Some(resident - 8_000_000),
            virtual_bytes: virt,
            ..TaskMemory::default()
        })
    }

    fn account(steps: [TaskMemory; 2], runtime: &RuntimeReport) -> StateAccounting {
        build(Some(&steps[0]), Some(&steps[1]), Some(runtime), false).unwrap()
    }

    #[test]
    fn the_stock_tiny_state_is_predicted_logged_and_measured_side_by_side() {
        // Resident and virtual at model_loaded and state_ready, as stock
        // whisper.cpp measured them on tiny.en here.
        let a = account(
            steps((96_174_080, 1_140_776_960), (121_245_696, 1_776_742_400)),
            &runtime(TINY_STATE_LOG, tiny_estimate()),
        );
        let names: Vec<_> = a.worker.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["kv_self", "kv_cross", "kv_pad", "logits_reserve"]);
        assert_eq!(a.worker.parts[1].predicted_bytes, Some(9_437_184));
        assert_eq!(a.worker.parts[1].logged_bytes, Some(9_440_000));
        assert_eq!(a.worker.parts[3].logged_bytes, None);
        assert!(!a.worker.parts[3].resident_at_state_ready);
        assert_eq!(a.worker.compute_logged_bytes, 177_820_000);
        assert_eq!(a.worker.expected_resident_bytes, 14_942_208);
        assert_eq!(
            a.worker.expected_virtual_bytes,
            14_942_208 + 92_940_288 + 177_820_000
        );
        assert_eq!(a.worker.measured_resident_bytes, 25_071_616);
        assert_eq!(a.worker.measured_footprint_bytes, Some(25_071_616));
        // 10 MB more than the caches: whisper.cpp's graph metadata, which the
        // estimate does not model, is a finding, not a tolerance.
        let x = a.worker.resident_mismatch.unwrap();
        assert!((x - 0.6779).abs() < 1e-3, "{x}");
        assert!(
            a.findings[0].starts_with("worker: resident grew 25.07 MB"),
            "{:?}",
            a.findings
        );
        assert!(a.encoder_process.is_none());
    }

    #[test]
    fn a_bounded_state_saves_what_the_estimate_predicts_or_says_by_how_much_it_does_not() {
        let stock = runtime(TINY_STATE_LOG, tiny_estimate());
        // Cross and pad caches for 768 positions, logits for 8 tokens.
        let bounded_log: Vec<&str> = TINY_STATE_LOG
            .iter()
            .map(|l| match l {
                l if l.contains("kv cross") => "whisper_init_state: kv cross size =    4.72 MB",
                l if l.contains("kv pad") => "whisper_init_state: kv pad  size  =    1.18 MB",
                l => l,
            })
            .collect();
        let bounded = runtime(
            &bounded_log,
            serde_json::json!({
                "kv_self_bytes": 3_145_728u64, "kv_cross_bytes": 4_718_592u64,
                "kv_pad_bytes": 1_179_648u64, "logits_reserve_bytes": 1_659_264u64,
            }),
        );
        let ctl = account(
            steps((96_000_000, 1_000_000_000), (121_000_000, 1_600_000_000)),
            &stock,
        );
        let predicted_resident = (9_437_184 + 2_359_296) - (4_718_592 + 1_179_648);
        // Measured 1 % under the prediction: no finding.
        let arm = account(
            steps(
                (96_000_000, 1_000_000_000),
                (121_000_000 - predicted_resident * 99 / 100, 1_507_000_000),
            ),
            &bounded,
        );
        let s = saving("stage3", &ctl, &arm);
        assert_eq!(s.predicted_resident_bytes, predicted_resident as i64);
        assert_eq!(
            s.measured_resident_bytes,
            (predicted_resident * 99 / 100) as i64
        );
        assert_eq!(
            s.predicted_virtual_bytes,
            predicted_resident as i64 + (92_940_288 - 1_659_264)
        );
        assert!(
            s.findings().iter().all(|f| !f.contains("resident")),
            "{:?}",
            s.findings()
        );
        // Measured 20 % under: named, with both figures.
        let arm = account(
            steps(
                (96_000_000, 1_000_000_000),
                (121_000_000 - predicted_resident * 8 / 10, 1_507_000_000),
            ),
            &bounded,
        );
        let f = saving("stage3", &ctl, &arm).findings();
        assert!(
            f.iter().any(|f| f.starts_with("against stage3: the state saves 4.72 MB resident, -20.0 %")),
            "{f:?}"
        );
    }

    #[test]
    fn an_encoder_process_is_accounted_beside_the_worker_without_a_pad_cache_in_the_worker() {
        let mut rt = runtime(TINY_STATE_LOG, tiny_estimate());
        let encoder_log = [
            "whisper_init_state: kv pad  size  =    2.36 MB",
            "whisper_init_state: compute buffer (conv)   =   13.21 MB",
            "whisper_init_state: compute buffer (encode) =   64.81 MB",
        ];
        let step = |resident: u64, virt: u64| worker_contract::EncoderMemory {
            resident_bytes: resident,
            footprint_bytes: Some(resident - 7_000_000),
            virtual_bytes: virt,
        };
        rt.external_encoder = Some(worker_contract::ExternalEncoderProcess {
            pid: 9,
            model: "enc.bin".into(),
            model_sha256: "00".into(),
            layout: worker_contract::ModelLayout::EncoderOnly,
            max_audio_ctx: 0,
            memory: Some(worker_contract::EncoderProcessSteps {
                process_start: step(7_400_000, 25_000_000),
                runtime_ready: None,
                model_loaded: step(27_600_000, 113_000_000),
                state_ready: step(34_400_000, 367_000_000),
            }),
            topology: Some(worker_contract::Topology::from_log(
                encoder_log.iter().copied(),
            )),
        });
        let a = account(
            steps((79_000_000, 1_000_000_000), (99_000_000, 1_400_000_000)),
            &rt,
        );
        assert!(a.worker.parts.iter().all(|p| p.name != "kv_pad"));
        let e = a.encoder_process.unwrap();
        assert_eq!(e.parts.len(), 1, "an encoder-only state: {:?}", e.parts);
        assert_eq!(e.parts[0].name, "kv_pad");
        assert_eq!(e.parts[0].logged_bytes, Some(2_360_000));
        assert_eq!(e.compute_logged_bytes, 78_020_000);
        assert_eq!(e.measured_resident_bytes, 6_800_000);
        assert_eq!(e.measured_footprint_bytes, Some(6_800_000));
        assert_eq!(e.parts[0].predicted_bytes, Some(2_359_296));
        // Beside a bounded worker, this unbounded full-model process keeps
        // the model's positions: the worker's prediction does not hold for it.
        let steps = steps((79_000_000, 1_000_000_000), (99_000_000, 1_400_000_000));
        let bounded = build(Some(&steps[0]), Some(&steps[1]), Some(&rt), true).unwrap();
        let e = bounded.encoder_process.unwrap();
        assert_eq!(e.parts[0].predicted_bytes, None);
        assert_eq!(e.expected_resident_bytes, 2_360_000);
    }
}
