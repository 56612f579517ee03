//! The memory-ceiling watchdog (`memory_ceiling`): it sees every row of the
//! external sampler and every phase marker, and kills the worker's process
//! group at the first whose kernel peak is above the ceiling, on the thread
//! that read it. It records that first crossing once; the executor turns it
//! into the arm's failure and its `memory_ceiling` record.
//!
//! Why the peak and not the current size: the peak is the kernel's own
//! high-water mark, so memory held only between two ticks is still in it at
//! the next one. Why markers too: on Linux a marker resets `VmHWM`
//! (`clear_refs`) right after reading it, so a crossing after the last tick
//! and before that reset is in the marker's reading and in no tick's.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use reports::ceiling::{CeilingCrossing, CeilingEnforcer, CrossingSeenBy, MemoryCeilingRecord};
use sampler::{Marker, PhaseTracker, SeriesRow};
use std::sync::Mutex;

/// The kernel peak the watchdog compares, per platform.
#[cfg(target_os = "macos")]
mod peak {
    use sampler::{SeriesRow, TaskMemory};

    /// The field's name in the record.
    pub const FIELD: &str = "footprint peak";

    /// `ri_lifetime_max_phys_footprint`: never reset.
    pub fn of_row(row: &SeriesRow) -> Option<u64> {
        row.footprint_peak_bytes
    }

    /// The same peak in a marker's own reading.
    pub fn of_marker(m: &TaskMemory) -> Option<u64> {
        m.footprint_peak_bytes
    }

    /// What enforcement on this peak guarantees.
    pub fn guarantee(period_ms: f64) -> String {
        format!(
            "The footprint peak (ri_lifetime_max_phys_footprint) is the kernel's lifetime maximum \
             of the worker's footprint and is never reset, so the first tick after a crossing, \
             however brief, reads it: the worker's process group is killed within one sampler \
             period ({period_ms} ms) of the crossing, plus that tick's lateness. Ticks paused by \
             the overhead gate's block run read nothing; a crossing there is seen at the next \
             marker or the first tick after the pause."
        )
    }
}

/// The kernel peak the watchdog compares, per platform.
#[cfg(not(target_os = "macos"))]
mod peak {
    use sampler::{SeriesRow, TaskMemory};

    /// The field's name in the record.
    pub const FIELD: &str = "VmHWM";

    /// `VmHWM`: the resident high-water mark since the last marker's reset.
    pub fn of_row(row: &SeriesRow) -> Option<u64> {
        row.resident_peak_bytes
    }

    /// The same peak in a marker's own reading, taken before its reset.
    pub fn of_marker(m: &TaskMemory) -> Option<u64> {
        m.resident_peak_bytes
    }

    /// What enforcement on this peak guarantees.
    pub fn guarantee(period_ms: f64) -> String {
        format!(
            "VmHWM is the kernel's high-water mark of the worker's resident set, kept until a \
             phase marker resets it (clear_refs), so a crossing however brief stays in it: the \
             first tick after the crossing reads it, and a marker that resets it first carries \
             it in its own reading, taken before the reset and checked as the marker arrives. \
             The worker's process group is killed at whichever comes first, within one sampler \
             period ({period_ms} ms) of the crossing, plus that tick's lateness. Not seen: pages \
             another worker thread touches in the microseconds between a marker's reading and \
             its reset, and pages the kernel reclaims on its own between two readings (the mark \
             is raised when the worker unmaps memory, not when reclaim takes it). Ticks paused \
             by the overhead gate's block run read nothing; a crossing there is seen at the \
             next marker."
        )
    }
}

/// One arm's watchdog, shared by the sampler thread and the message reader.
#[derive(Debug)]
pub struct Watchdog {
    ceiling_bytes: u64,
    /// The worker, which leads its own process group.
    pid: u32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The markers seen so far, to name the phase a tick falls in.
    phases: PhaseTracker,
    crossing: Option<CeilingCrossing>,
}

impl Watchdog {
    /// A watchdog holding the worker `pid` (its process group) to `ceiling_bytes`.
    pub fn new(ceiling_bytes: u64, pid: u32) -> Self {
        Watchdog {
            ceiling_bytes,
            pid,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the state half-written: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sampler row: kill at the first whose peak is above the ceiling.
    pub fn on_row(&self, row: &SeriesRow) {
        let Some(peak) = peak::of_row(row).filter(|p| *p > self.ceiling_bytes) else {
            return;
        };
        let mut state = self.state();
        let expected = state.phases.expected();
        let phase = if expected.is_empty() {
            state
                .phases
                .last_phase()
                .map_or_else(String::new, |p| format!("after {p}"))
        } else {
            expected
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let crossing = CeilingCrossing {
            at_ns: row.t_ns,
            seen_by: CrossingSeenBy::Tick,
            tick: Some(row.tick),
            marker_seq: None,
            peak_bytes: peak,
            resident_bytes: row.resident_bytes,
            phase,
            after_phase: state.phases.last_phase(),
        };
        self.cross(&mut state, crossing);
    }

    /// A phase marker the reader accepted: kill if its own peak reading is
    /// above the ceiling, then remember its phase.
    pub fn on_marker(&self, m: &Marker) {
        let mut state = self.state();
        if let Some(peak) = peak::of_marker(&m.memory).filter(|p| *p > self.ceiling_bytes) {
            let crossing = CeilingCrossing {
                at_ns: m.t_ns,
                seen_by: CrossingSeenBy::Marker,
                tick: None,
                marker_seq: Some(m.seq),
                peak_bytes: peak,
                resident_bytes: Some(m.memory.resident_bytes),
                phase: m.phase.as_str().to_string(),
                after_phase: state.phases.last_phase(),
            };
            self.cross(&mut state, crossing);
        }
        // The reader accepted it against the same order, so this cannot fail.
        let _ = state.phases.accept(m.seq, m.phase, m.request_id);
    }

    /// The first crossing kills the group and is kept; later ones are not.
    fn cross(&self, state: &mut State, crossing: CeilingCrossing) {
        if state.crossing.is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.pid) {
            // ESRCH (the worker already ended) leaves nothing to kill.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        state.crossing = Some(crossing);
    }

    /// The first crossing, if there was one.
    pub fn crossing(&self) -> Option<CeilingCrossing> {
        self.state().crossing.clone()
    }

    /// The arm's record: the ceiling, how it was enforced at `period_ns`,
    /// and the crossing.
    pub fn record(&self, period_ns: u64) -> MemoryCeilingRecord {
        MemoryCeilingRecord {
            bytes: self.ceiling_bytes,
            enforcer: CeilingEnforcer::Watchdog,
            field: peak::FIELD.to_string(),
            period_ns,
            guarantee: peak::guarantee(period_ns as f64 / 1e6),
            crossing: self.crossing(),
        }
    }
}

/// The arm's failure for `crossing` of a ceiling of `ceiling_bytes`.
pub fn failure(ceiling_bytes: u64, crossing: &CeilingCrossing) -> String {
    let seen = match (crossing.seen_by, crossing.tick, crossing.marker_seq) {
        (CrossingSeenBy::Tick, Some(t), _) => format!("at tick {t}"),
        (CrossingSeenBy::Marker, _, Some(s)) => format!("in marker {s}'s reading"),
        _ => "at a reading".to_string(),
    };
    let last = crossing
        .after_phase
        .map_or_else(|| "none yet".to_string(), |p| format!("`{p}`"));
    format!(
        "memory ceiling {} ({} bytes) crossed: {} read {} ({} bytes) {seen}, in phase `{}` \
         (last marked: {last}); the worker's process group was killed within one sampler \
         period of the crossing",
        mib(ceiling_bytes),
        ceiling_bytes,
        peak::FIELD,
        mib(crossing.peak_bytes),
        crossing.peak_bytes,
        crossing.phase,
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::Phase;

    fn marker(phase: Phase, seq: u64, peak: u64) -> Marker {
        let mut m: Marker = serde_json::from_value(serde_json::json!({
            "phase": "process_start", "seq": 0, "request_id": null, "t_ns": 7,
            "memory": {"resident_bytes": 5, "virtual_bytes": 9}
        }))
        .expect("a marker");
        m.phase = phase;
        m.seq = seq;
        m.memory.resident_peak_bytes = Some(peak);
        m.memory.footprint_peak_bytes = Some(peak);
        m
    }

    fn row(tick: u64, peak: u64) -> SeriesRow {
        SeriesRow {
            tick,
            t_ns: 100 + tick,
            resident_bytes: Some(peak / 2),
            resident_peak_bytes: Some(peak),
            footprint_peak_bytes: Some(peak),
            ..SeriesRow::default()
        }
    }

    // The pid is one that cannot exist (above pid_max), so the kill finds
    // nothing: the test checks what is recorded.
    const NO_PID: u32 = 0x7fff_fff0;

    #[test]
    fn the_first_tick_above_the_ceiling_is_recorded_once_with_the_phase_it_fell_in() {
        let w = Watchdog::new(1000, NO_PID);
        w.on_marker(&marker(Phase::ProcessStart, 0, 10));
        w.on_row(&row(1, 1000));
        assert_eq!(w.crossing(), None, "at the ceiling is not above it");
        w.on_row(&row(2, 1001));
        w.on_row(&row(3, 5000));
        w.on_marker(&marker(Phase::ModelLoaded, 1, 9000));
        let c = w.crossing().expect("crossed");
        assert_eq!(
            (c.seen_by, c.tick, c.peak_bytes, c.resident_bytes, c.at_ns),
            (CrossingSeenBy::Tick, Some(2), 1001, Some(500), 102)
        );
        assert_eq!(c.phase, "model_loaded");
        assert_eq!(c.after_phase, Some(Phase::ProcessStart));
        let r = w.record(50_000_000);
        assert_eq!((r.bytes, r.period_ns), (1000, 50_000_000));
        assert!(r.guarantee.contains("(50 ms)"), "{}", r.guarantee);
        assert_eq!(
            failure(1000, &c),
            format!(
                "memory ceiling 0.0 MiB (1000 bytes) crossed: {} read 0.0 MiB (1001 bytes) at \
                 tick 2, in phase `model_loaded` (last marked: `process_start`); the worker's \
                 process group was killed within one sampler period of the crossing",
                peak::FIELD
            )
        );
    }

    #[test]
    fn a_marker_whose_own_reading_crossed_is_caught_and_names_its_phase() {
        let w = Watchdog::new(1000, NO_PID);
        w.on_marker(&marker(Phase::ProcessStart, 0, 10));
        w.on_row(&row(1, 900));
        w.on_marker(&marker(Phase::ModelLoaded, 1, 2000));
        let c = w.crossing().expect("crossed");
        assert_eq!(
            (c.seen_by, c.marker_seq, c.peak_bytes, c.phase.as_str()),
            (CrossingSeenBy::Marker, Some(1), 2000, "model_loaded")
        );
        assert_eq!(c.after_phase, Some(Phase::ProcessStart));
    }

    #[test]
    fn a_tick_between_requests_names_every_phase_that_may_come_next() {
        let w = Watchdog::new(1000, NO_PID);
        for (seq, p) in [
            Phase::ProcessStart,
            Phase::ModelLoaded,
            Phase::StateReady,
            Phase::WarmupDone,
        ]
        .into_iter()
        .enumerate()
        {
            w.on_marker(&marker(p, seq as u64, 10));
        }
        w.on_row(&row(9, 2000));
        let c = w.crossing().expect("crossed");
        assert!(c.phase.contains(" or "), "{}", c.phase);
        assert!(c.phase.contains("request_begin"), "{}", c.phase);
    }

    #[test]
    fn an_unread_peak_never_crosses() {
        let w = Watchdog::new(1000, NO_PID);
        w.on_row(&SeriesRow {
            resident_bytes: Some(1 << 40),
            ..SeriesRow::default()
        });
        assert_eq!(w.crossing(), None);
    }
}
