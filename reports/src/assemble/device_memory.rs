//! An arm's device-memory accounting ([`DeviceAccounting`]), built from its
//! phase table: each phase's first device reading (a request phase's
//! latest), the baseline at `process_start` and what the model and the state
//! added on each side.

use crate::device_memory::{DeviceAccounting, DevicePhase, Split};
use crate::receipt::PhaseRow;
use sampler::Phase;

fn row(p: &PhaseRow) -> Option<DevicePhase> {
    Some(DevicePhase {
        phase: p.phase,
        resident_bytes: p.memory.resident_bytes,
        device_bytes: p.memory.device_bytes?,
        series_max_device_bytes: p.series_max_gpu_worker_bytes,
    })
}

fn delta(from: &DevicePhase, to: &DevicePhase) -> Split {
    let signed = |a: u64, b: u64| {
        i64::try_from(b).unwrap_or(i64::MAX) - i64::try_from(a).unwrap_or(i64::MAX)
    };
    Split {
        host_bytes: signed(from.resident_bytes, to.resident_bytes),
        device_bytes: signed(from.device_bytes, to.device_bytes),
    }
}

/// The accounting of an arm's markers; `None` unless `process_start`
/// carries a device reading.
pub fn build(phases: &[PhaseRow]) -> Option<DeviceAccounting> {
    let mut seen: Vec<DevicePhase> = Vec::new();
    for p in phases {
        let Some(r) = row(p) else { continue };
        match seen.iter_mut().find(|s| s.phase == r.phase) {
            // Request phases repeat: keep the latest, the steady state.
            Some(s) if p.request_id.is_some() => *s = r,
            Some(_) => {}
            None => seen.push(r),
        }
    }
    let find = |phase: Phase| seen.iter().find(|s| s.phase == phase);
    let baseline = find(Phase::ProcessStart)?.clone();
    let model = find(Phase::ModelLoaded).map(|m| delta(&baseline, m));
    let state = find(Phase::ModelLoaded)
        .zip(find(Phase::StateReady))
        .map(|(m, s)| delta(m, s));
    let peak_device_bytes = phases
        .iter()
        .filter_map(|p| p.memory.device_bytes)
        .max()
        .unwrap_or(0);
    Some(DeviceAccounting {
        baseline,
        model,
        state,
        peak_device_bytes,
        phases: seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;

    fn marker(
        phase: Phase,
        request_id: Option<u64>,
        resident: u64,
        device: Option<u64>,
    ) -> PhaseRow {
        let mut row: PhaseRow = serde_json::from_value(serde_json::json!({
            "phase": phase.to_string(), "seq": 0, "request_id": request_id, "t_ns": 0,
            "memory": serde_json::to_value(TaskMemory::default()).unwrap(),
            "window_start_ns": null, "samples": 0, "series_max_resident_bytes": null,
            "series_max_footprint_bytes": null, "observed_max_resident_bytes": 0,
            "observed_max_footprint_bytes": null, "peak_between_samples": null
        }))
        .expect("a phase row");
        row.memory.resident_bytes = resident;
        row.memory.device_bytes = device;
        row
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_model_and_state_are_split_between_host_and_device() {
        // The H200 figures' shape: a 586 MiB context, weights on the device.
        let phases = [
            marker(Phase::ProcessStart, None, 300 * MIB, Some(586 * MIB)),
            marker(Phase::ModelLoaded, None, 310 * MIB, Some(688 * MIB)),
            marker(Phase::StateReady, None, 312 * MIB, Some(832 * MIB)),
            marker(Phase::RequestEnd, Some(0), 330 * MIB, Some(900 * MIB)),
            marker(Phase::RequestEnd, Some(1), 331 * MIB, Some(880 * MIB)),
        ];
        let a = build(&phases).expect("device readings");
        assert_eq!(a.baseline.device_bytes, 586 * MIB);
        assert_eq!(
            a.model,
            Some(Split {
                host_bytes: (10 * MIB) as i64,
                device_bytes: (102 * MIB) as i64
            })
        );
        assert_eq!(
            a.state,
            Some(Split {
                host_bytes: (2 * MIB) as i64,
                device_bytes: (144 * MIB) as i64
            })
        );
        assert_eq!(a.peak_device_bytes, 900 * MIB);
        // One row per phase; the request phase keeps the last request's.
        assert_eq!(a.phases.len(), 4);
        assert_eq!(a.phases[3].device_bytes, 880 * MIB);
    }

    #[test]
    fn no_device_reading_means_no_accounting_and_a_freed_phase_is_negative() {
        let cpu = [marker(Phase::ProcessStart, None, MIB, None)];
        assert_eq!(build(&cpu), None);
        let freed = [
            marker(Phase::ProcessStart, None, 3 * MIB, Some(5 * MIB)),
            marker(Phase::ModelLoaded, None, 2 * MIB, Some(4 * MIB)),
        ];
        let a = build(&freed).expect("device readings");
        assert_eq!(
            a.model,
            Some(Split {
                host_bytes: -(MIB as i64),
                device_bytes: -(MIB as i64)
            })
        );
        assert_eq!(a.state, None);
    }
}
