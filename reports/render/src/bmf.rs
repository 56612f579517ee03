//! A run's metrics in Bencher Metric Format (`--export-bmf FILE`), for
//! tracking them across commits with Bencher or any tool that reads BMF.
//!
//! BMF is a JSON object: benchmark name → measure → metric, a metric being
//! `value` with optional `lower_value` and `upper_value` (Bencher's
//! documentation, "Bencher Metric Format"). Here the benchmark is
//! `memqual/<protocol>/<arm>` and the measures are, each where measured:
//!
//! | measure | unit | value (lower, upper) |
//! |---|---|---|
//! | `<phase>-peak-bytes` | bytes | the kernel peak (footprint where reported, else resident) at `state_ready` and at every phase a memory gate names |
//! | `max-resident-bytes`, `max-footprint-bytes` | bytes | the external series' maxima |
//! | `memory-ceiling-bytes`, `memory-ceiling-crossing-peak-bytes` | bytes | arms with a `memory_ceiling`: the limit, and the kernel peak that crossed it (only when one did) |
//! | `latency-p50-ns`, `latency-p95-ns`, `latency-max-ns` | ns | steady requests (whisper), every measured request (calibration) |
//! | `cold-load-ns`, `first-request-ns` | ns | whisper arms |
//! | `wer-<category>` | fraction | whisper arms with references |
//! | `qoi` | fraction | arms with a control: the share of fixtures no worse than the control's |
//! | `<cold\|warm>-tokens-per-s`, `…-real-time-factor`, `…-encode-p50-ns`, `…-first-token-p50-ns`, `…-fallbacks` | tokens/s, ratio, ns, count | whisper arms: the first measured request, and the warm ones after it (a figure the runtime does not expose is left out) |
//! | `sampler-overhead-ratio` | ratio | sampled / unsampled latency, ABBA blocks (95 % interval) |
//! | `attribution-overhead-ratio` | ratio | the same with jemalloc's sampling on / off (`toggles = "attribution"`) |
//! | `soak-<series>-slope-bytes-per-request`, `…-per-hour` | bytes | Theil–Sen slope (its bootstrap interval) |
//! | `soak-peak-footprint-bytes`, `soak-peak-resident-bytes`, `soak-p95-latency-ns` | | soaks |
//!
//! Measure names are kebab case, at most 64 characters (Bencher's limit).
//! Values that are not finite are left out: JSON cannot carry them.

use analysis::growth::Slope;
use reports::gates::GateSpec;
use reports::receipt::{ArmReceipt, Receipt};
use sampler::Phase;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One metric: a value and, optionally, the interval around it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The measured value, in the measure's unit.
    pub value: f64,
    /// Lower end of the interval around `value`; left out when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_value: Option<f64>,
    /// Upper end of the interval around `value`; left out when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_value: Option<f64>,
}

/// Benchmark → measure → metric.
pub type Bmf = BTreeMap<String, BTreeMap<String, Metric>>;

/// Bencher's limit on a measure's name or slug.
pub const MAX_MEASURE_LEN: usize = 64;

fn kebab(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_string()
}

struct Measures(BTreeMap<String, Metric>);

impl Measures {
    fn put(&mut self, name: &str, value: Option<f64>) {
        self.interval(name, value, None, None);
    }

    fn interval(&mut self, name: &str, value: Option<f64>, low: Option<f64>, high: Option<f64>) {
        let Some(value) = value.filter(|v| v.is_finite()) else {
            return;
        };
        let mut name = kebab(name);
        name.truncate(MAX_MEASURE_LEN);
        self.0.insert(
            name,
            Metric {
                value,
                lower_value: low.filter(|v| v.is_finite()),
                upper_value: high.filter(|v| v.is_finite()),
            },
        );
    }

    fn slope(&mut self, name: &str, slope: Option<&Slope>) {
        if let Some(s) = slope {
            self.interval(name, Some(s.estimate), Some(s.low), Some(s.high));
        }
    }
}

/// The phases whose peak is exported: `state_ready`, and every phase a
/// memory gate of the run names.
fn gated_phases(r: &Receipt) -> Vec<Phase> {
    let mut phases = vec![Phase::StateReady];
    for gates in r.run.gates.values() {
        for g in &gates.gates {
            if let GateSpec::Memory(m) = g
                && !phases.contains(&m.phase)
            {
                phases.push(m.phase);
            }
        }
    }
    phases
}

fn arm_measures(a: &ArmReceipt, phases: &[Phase]) -> BTreeMap<String, Metric> {
    let mut m = Measures(BTreeMap::new());
    for phase in phases {
        let peak = a.phase(*phase, None).and_then(|p| {
            p.memory
                .footprint_peak_bytes
                .or(p.memory.resident_peak_bytes)
        });
        m.put(&format!("{phase}-peak-bytes"), peak.map(|v| v as f64));
    }
    m.put(
        "max-resident-bytes",
        a.series.max_resident_bytes.map(|v| v as f64),
    );
    m.put(
        "max-footprint-bytes",
        a.series.max_footprint_bytes.map(|v| v as f64),
    );
    if let Some(c) = &a.memory_ceiling {
        m.put("memory-ceiling-bytes", Some(c.bytes as f64));
        m.put(
            "memory-ceiling-crossing-peak-bytes",
            c.crossing.as_ref().map(|x| x.peak_bytes as f64),
        );
    }
    match &a.speech {
        Some(s) => {
            let l = &s.latency;
            m.put("latency-p50-ns", l.steady_p50_ns);
            m.put("latency-p95-ns", l.steady_p95_ns);
            m.put("latency-max-ns", l.steady_max_ns.map(|v| v as f64));
            m.put("cold-load-ns", l.cold_load_ns.map(|v| v as f64));
            m.put("first-request-ns", l.first_request_ns.map(|v| v as f64));
            if let Some(w) = &s.quality.wer {
                for c in &w.categories {
                    m.put(&format!("wer-{}", c.category), c.wer);
                }
            }
            m.put("qoi", s.quality.qoi.as_ref().and_then(|q| q.qoi));
            if let Some(t) = &s.throughput {
                for (group, f) in [("cold", &t.cold), ("warm", &t.warm)] {
                    let Some(f) = f else { continue };
                    m.put(&format!("{group}-tokens-per-s"), f.tokens_per_s);
                    m.put(&format!("{group}-real-time-factor"), f.real_time_factor);
                    m.put(&format!("{group}-encode-p50-ns"), f.encode_p50_ns);
                    m.put(&format!("{group}-first-token-p50-ns"), f.first_token_p50_ns);
                    m.put(&format!("{group}-fallbacks"), f.fallbacks.map(|n| n as f64));
                }
            }
        }
        None => {
            if let Some(l) = &a.latency {
                m.put("latency-p50-ns", Some(l.p50_ns));
                m.put("latency-p95-ns", Some(l.p95_ns));
                m.put("latency-max-ns", Some(l.max_ns as f64));
            }
        }
    }
    if let Some(o) = &a.overhead {
        // A block run that toggled attribution measured jemalloc's
        // sampling, not the sampler: another benchmark, another name.
        let name = match o.plan.toggles {
            reports::gate_spec::OverheadToggle::Sampler => "sampler-overhead-ratio",
            reports::gate_spec::OverheadToggle::Attribution => "attribution-overhead-ratio",
        };
        m.interval(name, o.ratio, o.ratio_lower, o.ratio_upper);
    }
    if let Some(s) = &a.stability {
        for g in s
            .worker_series
            .iter()
            .chain(&s.settled_series)
            .chain(&s.system_series)
        {
            m.slope(
                &format!("soak-{}-slope-bytes-per-request", g.series),
                g.bytes_per_request.as_ref(),
            );
            m.slope(
                &format!("soak-{}-slope-bytes-per-hour", g.series),
                g.bytes_per_hour.as_ref(),
            );
        }
        for g in s.lifecycle.iter().flat_map(|l| &l.floor_series) {
            // One point per cycle: the slope is bytes per cycle.
            m.slope(
                &format!("soak-{}-slope-bytes-per-cycle", g.series),
                g.bytes_per_request.as_ref(),
            );
        }
        m.put(
            "soak-peak-footprint-bytes",
            s.peak_footprint_bytes.map(|v| v as f64),
        );
        m.put(
            "soak-peak-resident-bytes",
            s.peak_resident_bytes.map(|v| v as f64),
        );
        m.put("soak-p95-latency-ns", s.p95_latency_ns);
    }
    m.0
}

/// Every arm's metrics; arms without any measured value are left out.
pub fn build(r: &Receipt) -> Bmf {
    let phases = gated_phases(r);
    r.arms
        .iter()
        .map(|a| {
            (
                format!("memqual/{}/{}", r.run.protocol_name, a.id),
                arm_measures(a, &phases),
            )
        })
        .filter(|(_, m)| !m.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_names_are_kebab_case_and_bounded() {
        assert_eq!(kebab("state_ready-peak-bytes"), "state-ready-peak-bytes");
        assert_eq!(kebab("wer-Names & Numbers"), "wer-names-numbers");
        let mut m = Measures(BTreeMap::new());
        m.put(&"x".repeat(200), Some(1.0));
        m.put("nan", Some(f64::NAN));
        m.interval("ratio", Some(1.0), Some(f64::INFINITY), Some(1.1));
        assert_eq!(m.0.len(), 2);
        assert!(m.0.keys().all(|k| k.len() <= MAX_MEASURE_LEN));
        assert_eq!(
            m.0["ratio"],
            Metric {
                value: 1.0,
                lower_value: None,
                upper_value: Some(1.1)
            }
        );
    }
}
