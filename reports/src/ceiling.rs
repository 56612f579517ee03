//! An arm's device memory ceiling (`memory_ceiling`) as enforced: the
//! limit, who enforced it and how, and the crossing that ended the worker,
//! if one did. The harness writes it into `arm.json`; the receipt carries
//! it per arm.

use sampler::Phase;
use serde::{Deserialize, Serialize};

/// What enforced the ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CeilingEnforcer {
    /// The external sampler's watchdog: it compares every tick's kernel peak
    /// (and every phase marker's) with the ceiling and kills the worker's
    /// process group at the first one above it.
    Watchdog,
}

/// An arm's ceiling and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryCeilingRecord {
    /// The ceiling in bytes, as the protocol set it.
    pub bytes: u64,
    /// What enforced it.
    pub enforcer: CeilingEnforcer,
    /// The kernel peak compared with it: `VmHWM` (Linux) or `footprint peak`
    /// (macOS, `ri_lifetime_max_phys_footprint`).
    pub field: String,
    /// The sampler's tick period in ns: the watchdog looks once per period.
    pub period_ns: u64,
    /// What the enforcement guarantees, and what it cannot see, in words.
    pub guarantee: String,
    /// The first reading above the ceiling; `None` when the worker never
    /// crossed it.
    pub crossing: Option<CeilingCrossing>,
}

/// Which reading saw the crossing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrossingSeenBy {
    /// A tick of the external sampler (a row of `series.csv`).
    Tick,
    /// A phase marker's own reading, taken just before it reset the peak.
    Marker,
}

/// The first reading whose kernel peak was above the ceiling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CeilingCrossing {
    /// Monotonic time (ns) of the reading: the row's `t_ns` or the marker's.
    pub at_ns: u64,
    /// Which reading it was.
    pub seen_by: CrossingSeenBy,
    /// The tick index of the `series.csv` row, for a tick.
    pub tick: Option<u64>,
    /// The marker's sequence number, for a marker.
    pub marker_seq: Option<u64>,
    /// The kernel peak read, in bytes (above the ceiling).
    pub peak_bytes: u64,
    /// The resident bytes read with it; `None` when not read.
    pub resident_bytes: Option<u64>,
    /// The phase the crossing fell in, named as the phase table names it:
    /// by the marker that ends it. A tick between requests, where either of
    /// two markers may come next, names both (`request_begin or idle_end`).
    pub phase: String,
    /// The last phase the worker had marked before the reading; `None`
    /// before its first marker.
    pub after_phase: Option<Phase>,
}

/// The record in one line, as `summary.md` and `report.html` show it.
pub fn line(r: &MemoryCeilingRecord) -> String {
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20));
    let how = format!(
        "memory ceiling {} (watchdog on {} every {} ms)",
        mib(r.bytes),
        r.field,
        r.period_ns as f64 / 1e6
    );
    match &r.crossing {
        None => format!("{how}: not crossed"),
        Some(c) => format!(
            "{how}: crossed at {} in phase `{}`; the worker's process group was killed",
            mib(c.peak_bytes),
            c.phase
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_the_ceiling_and_whether_it_was_crossed() {
        let mut r = MemoryCeilingRecord {
            bytes: 32 << 20,
            enforcer: CeilingEnforcer::Watchdog,
            field: "VmHWM".into(),
            period_ns: 50_000_000,
            guarantee: String::new(),
            crossing: None,
        };
        assert_eq!(
            line(&r),
            "memory ceiling 32.0 MiB (watchdog on VmHWM every 50 ms): not crossed"
        );
        r.crossing = Some(CeilingCrossing {
            at_ns: 1,
            seen_by: CrossingSeenBy::Tick,
            tick: Some(3),
            marker_seq: None,
            peak_bytes: 3 << 24,
            resident_bytes: None,
            phase: "model_loaded".into(),
            after_phase: Some(Phase::ProcessStart),
        });
        assert_eq!(
            line(&r),
            "memory ceiling 32.0 MiB (watchdog on VmHWM every 50 ms): crossed at 48.0 MiB in \
             phase `model_loaded`; the worker's process group was killed"
        );
        // `crossing: null` is written, not left out: "never crossed" is a finding.
        let v = serde_json::to_value(MemoryCeilingRecord {
            crossing: None,
            ..r
        })
        .unwrap();
        assert_eq!(v["crossing"], serde_json::Value::Null);
        assert_eq!(v["enforcer"], "watchdog");
    }
}
