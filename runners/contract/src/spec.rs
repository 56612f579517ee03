use crate::{CalibrationSpec, WhisperSpec};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a worker needs to run one arm, sent as JSON on stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArmSpec {
    /// The `CONTRACT_VERSION` the harness speaks; a worker refuses any other.
    pub contract_version: u32,
    /// The arm's `id` from the protocol.
    pub arm_id: String,
    /// A directory the worker may write to (temporary files); the harness creates it.
    pub scratch_dir: PathBuf,
    /// The external sampler's schedule, when one runs, on the shared monotonic clock.
    #[serde(default)]
    pub sampler: Option<SamplerSchedule>,
    /// Milliseconds to wait after each `request_end` before a `settled`
    /// snapshot (0: no settle, no `settled` messages). Set by `memqual soak`.
    #[serde(default)]
    pub settle_ms: u64,
    /// A lifecycle soak's cycle (set by `memqual soak` under `[soak] mode =
    /// "lifecycle"`): the worker frees its states and context after every
    /// `requests_per_cycle` measured requests (a `release` marker, taken
    /// after the free) and loads them again in the request that follows (a
    /// `reload` marker). `None`: the context lives from load to teardown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Allocation attribution (the arm's `attribution = "allocations"`):
    /// the heap profiler watching the worker and where its profiles go.
    /// `None`: no profiler, nothing dumped. A worker that cannot serve it
    /// (no `mallctl`, profiling off) refuses the arm as not runnable; an
    /// older worker refuses the unknown field rather than misreading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::HeapProfiling>,
    /// Which worker runs the arm (`kind`) and that worker's options.
    pub worker: WorkerSpec,
}

/// One lifecycle cycle, as the worker runs it: context load → state →
/// `requests_per_cycle` requests → state and context freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    /// Measured requests between a load and the release that ends the cycle.
    #[schemars(range(min = crate::bounds::CYCLE_REQUESTS.min, max = crate::bounds::CYCLE_REQUESTS.max))]
    pub requests_per_cycle: u64,
}

impl Lifecycle {
    /// Whether the cycle ends with measured request `request_id` (0-based).
    pub fn ends_cycle(&self, request_id: u64) -> bool {
        request_id
            .saturating_add(1)
            .is_multiple_of(self.requests_per_cycle.max(1))
    }

    /// Check the cycle's length; the error names the key.
    pub fn validate(&self) -> Result<(), crate::FieldError> {
        crate::bounds::CYCLE_REQUESTS
            .check("lifecycle.requests_per_cycle", self.requests_per_cycle)
            .map(|_| ())
    }
}

/// When the external sampler's ticks are due: `epoch_ns + k * period_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SamplerSchedule {
    /// Monotonic time of tick 0, in nanoseconds (`CLOCK_MONOTONIC`, the
    /// clock of the markers).
    pub epoch_ns: u64,
    /// Nanoseconds between ticks (the arm's sampling period).
    pub period_ns: u64,
}

impl SamplerSchedule {
    /// The first tick deadline strictly after `t_ns` (saturating at the end
    /// of the clock; a zero period counts as 1 ns rather than dividing by zero).
    pub fn next_tick_after(&self, t_ns: u64) -> u64 {
        if t_ns < self.epoch_ns {
            return self.epoch_ns;
        }
        let period = self.period_ns.max(1);
        let k = (t_ns - self.epoch_ns) / period + 1;
        self.epoch_ns.saturating_add(k.saturating_mul(period))
    }
}

/// The worker-specific part of an arm, tagged by worker kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
// One spec per arm, made once and sent once: its size never matters, and
// boxing the calibration spec would only add indirection at every use.
#[allow(clippy::large_enum_variant)]
pub enum WorkerSpec {
    // In the schema a variant's doc replaces its payload's: say both.
    /// A calibration arm, run by `memqual-calibrate`: the same phases as a
    /// real worker, with allocations whose sizes are known, so the harness
    /// can prove what it measures.
    Calibrate(CalibrationSpec),
    /// A whisper arm, run by `memqual-whisper`: real inference with
    /// whisper.cpp, everything the arm runs with.
    Whisper(Box<WhisperSpec>),
}

impl WorkerSpec {
    /// The executable that runs this kind of arm.
    pub fn executable_name(&self) -> &'static str {
        match self {
            WorkerSpec::Calibrate(_) => "memqual-calibrate",
            WorkerSpec::Whisper(w) => match w.runtime {
                crate::Runtime::WhisperCpp => "memqual-whisper",
                crate::Runtime::Ctranslate2 => "memqual-ct2",
                crate::Runtime::WhisperCppPatched => "memqual-whisper-patched",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_ends_after_every_kth_request() {
        let three = Lifecycle {
            requests_per_cycle: 3,
        };
        let ends: Vec<u64> = (0..9).filter(|r| three.ends_cycle(*r)).collect();
        assert_eq!(ends, [2, 5, 8]);
        let one = Lifecycle {
            requests_per_cycle: 1,
        };
        assert!((0..4).all(|r| one.ends_cycle(r)));
        let two = Lifecycle {
            requests_per_cycle: 2,
        };
        // Wrapping would make u64::MAX + 1 zero, which every cycle divides.
        assert!(!two.ends_cycle(u64::MAX), "saturates, never wraps to 0");
        let zero = Lifecycle {
            requests_per_cycle: 0,
        };
        assert_eq!(
            zero.validate().unwrap_err().key,
            "lifecycle.requests_per_cycle"
        );
    }

    #[test]
    fn next_tick_is_strictly_after() {
        let s = SamplerSchedule {
            epoch_ns: 1_000,
            period_ns: 100,
        };
        assert_eq!(s.next_tick_after(0), 1_000);
        assert_eq!(s.next_tick_after(1_000), 1_100);
        assert_eq!(s.next_tick_after(1_099), 1_100);
        assert_eq!(s.next_tick_after(1_100), 1_200);
        let zero = SamplerSchedule {
            epoch_ns: 1,
            period_ns: 0,
        };
        assert_eq!(zero.next_tick_after(5), 6);
        let huge = SamplerSchedule {
            epoch_ns: u64::MAX - 10,
            period_ns: u64::MAX / 2,
        };
        assert_eq!(huge.next_tick_after(u64::MAX - 1), u64::MAX);
    }
}
