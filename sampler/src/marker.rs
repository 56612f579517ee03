//! Phase markers: a phase-tagged, sequenced, timestamped snapshot.

use crate::{Phase, SamplerError, TaskMemory, clock, platform};
use serde::{Deserialize, Serialize};

/// One phase marker as a worker emits it and the harness stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// The phase this marker records.
    pub phase: Phase,
    /// 0, 1, 2, … in emission order.
    pub seq: u64,
    /// The request a `request_begin`/`request_end` marker belongs to; `None` for every other phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<u64>,
    /// [`clock::monotonic_ns`] when the snapshot was taken.
    pub t_ns: u64,
    /// The calling process's memory at `t_ns`, with `peak_reset` saying whether the peak
    /// was reset after it.
    pub memory: TaskMemory,
    /// The system's held-memory levels at `t_ns`, so each phase's change in
    /// them is exact; `None` from a worker that predates them or where the
    /// read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<crate::SystemLevels>,
    /// The worker's CPU clocks at `t_ns`; `None` from a worker that
    /// predates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<MarkerCpu>,
}

/// CPU time at a marker, cumulative since the process started: what the
/// overhead gate sets the sampling's own CPU against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerCpu {
    /// Every thread of the process (`CLOCK_PROCESS_CPUTIME_ID`), in ns.
    pub process_ns: u64,
    /// The marker path's own share of it: the thread CPU time spent inside
    /// [`MarkerRecorder::mark`] (its snapshot, peak reset and level reads)
    /// over every marker so far, this one's reads included.
    pub marker_path_ns: u64,
}

/// Emits markers for the calling process: snapshot first, then reset the
/// kernel peak (where the platform allows it) so the next marker's peak
/// belongs to the next phase alone.
#[derive(Debug, Default)]
pub struct MarkerRecorder {
    next_seq: u64,
    device: bool,
    /// Thread CPU time spent inside `mark` so far.
    path_cpu_ns: u64,
}

impl MarkerRecorder {
    /// A recorder whose first marker gets sequence number 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also record the process's own device memory (NVML) in every marker
    /// from now on. Opt-in: loading NVML adds to the process's own memory,
    /// so only workers that use a device ask for it.
    pub fn read_device_memory(&mut self) {
        self.device = true;
    }

    /// Take a marker for `phase`.
    pub fn mark(&mut self, phase: Phase, request_id: Option<u64>) -> Result<Marker, SamplerError> {
        let cpu_start = clock::thread_cpu_ns();
        let t_ns = clock::monotonic_ns();
        let mut snapshot = platform::snapshot_self()?;
        snapshot.peak_reset = platform::reset_peak_self();
        if self.device {
            snapshot.device_bytes = crate::device::own_device_bytes();
        }
        let system = crate::system_levels::read_now();
        self.path_cpu_ns += clock::thread_cpu_ns().saturating_sub(cpu_start);
        let marker = Marker {
            phase,
            seq: self.next_seq,
            request_id,
            t_ns,
            memory: snapshot,
            system,
            cpu: Some(MarkerCpu {
                process_ns: clock::process_cpu_ns(),
                marker_path_ns: self.path_cpu_ns,
            }),
        };
        self.next_seq += 1;
        Ok(marker)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn recorder_resets_the_peak_between_markers() {
        let _lock = crate::OWN_MEMORY_TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut rec = MarkerRecorder::new();
        let first = rec.mark(Phase::ProcessStart, None).unwrap();
        assert_eq!(first.seq, 0);
        assert_eq!(first.memory.peak_reset, Some(true));

        // Touch 64 MiB, free it (returned to the OS by munmap), then mark.
        let len = 64 << 20;
        {
            let mut block = vec![0u8; len];
            for i in (0..len).step_by(4096) {
                block[i] = 1;
            }
            std::hint::black_box(&block);
        }
        let second = rec.mark(Phase::ModelLoaded, None).unwrap();
        let peak = second.memory.resident_peak_bytes.unwrap();
        assert!(
            peak >= second.memory.resident_bytes + (60 << 20),
            "peak {peak} should hold the freed 64 MiB above current {}",
            second.memory.resident_bytes
        );
        // After the reset the next phase starts from the current value again.
        let third = rec.mark(Phase::StateReady, None).unwrap();
        assert!(third.memory.resident_peak_bytes.unwrap() < peak - (32 << 20));
        assert_eq!(third.seq, 2);
        assert!(third.t_ns >= second.t_ns);
        // Touching 64 MiB took CPU between the first two markers; the marker
        // path's own share only grows, and is part of the process's.
        let (c1, c2, c3) = (first.cpu.unwrap(), second.cpu.unwrap(), third.cpu.unwrap());
        assert!(c2.process_ns - c1.process_ns > c2.marker_path_ns - c1.marker_path_ns);
        assert!(c1.marker_path_ns > 0 && c3.marker_path_ns > c2.marker_path_ns);
        assert!(c3.marker_path_ns < c3.process_ns);
        let json = serde_json::to_string(&third).unwrap();
        let back: Marker = serde_json::from_str(&json).unwrap();
        assert_eq!(back, third);
    }
}
