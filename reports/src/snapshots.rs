//! Tool snapshots taken beside an arm (smaps_rollup and cgroup files on
//! Linux; `vmmap -summary`, `footprint`, `vm_stat`, `memory_pressure` on
//! macOS): the records the harness appends to `snapshots.jsonl`, and their
//! summary in the receipt.
//!
//! A snapshot is triggered by a phase marker or by the protocol's cadence.
//! The harness runs one at a time; a trigger that arrives while one is still
//! running is recorded as skipped, never queued. Each tool run keeps its own
//! wall time and exit status, because a tool that suspends its target
//! (`vmmap`) stretches any request whose latency window overlaps it.

use crate::ReportError;
use run_dir::{Rel, RunDir};
use sampler::captures::Capture;
use sampler::{Marker, Phase};
use serde::{Deserialize, Serialize};
use worker_contract::RequestResult;

/// Per arm: the folder of raw tool outputs, the records, and the settings.
pub use run_dir::names::{PROBES, SNAPSHOTS, SNAPSHOTS_DIR};

/// A snapshot cadence faster than this perturbs the worker enough to be
/// flagged in the receipt (`vmmap` alone can take hundreds of milliseconds).
pub const PERTURBING_BELOW_MS: u64 = 1000;

/// What the harness was asked to observe beside the arm (`probes.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeSettings {
    /// Take a snapshot at every phase marker.
    pub snapshots_at_phases: bool,
    /// Also take one every this many milliseconds; `None`: no cadence.
    pub snapshot_every_ms: Option<u64>,
    /// Census: processes whose memory moved more than this are listed.
    pub census_threshold_bytes: Option<u64>,
    /// The harness's own pid and the worker's, left out of the census.
    pub harness_pid: u32,
    /// The worker's pid, the process the snapshots observe.
    pub worker_pid: u32,
}

impl ProbeSettings {
    /// Why the cadence perturbs the worker, when it does.
    pub fn perturbation(&self) -> Option<String> {
        let ms = self.snapshot_every_ms?;
        (ms < PERTURBING_BELOW_MS).then(|| {
            format!(
                "snapshot cadence {ms} ms is faster than {PERTURBING_BELOW_MS} ms: the tools' own cost perturbs the worker's memory and latency"
            )
        })
    }
}

/// What started a snapshot (or a census).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// Before the worker received its spec.
    BeforeArm,
    /// A phase marker of the worker.
    Phase {
        /// The marker's phase.
        phase: Phase,
        /// The marker's sequence number within the arm.
        marker_seq: u64,
        /// The request the marker belongs to (request phases only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<u64>,
    },
    /// A cadence tick; the last phase seen before it, if any.
    Cadence {
        /// The last phase marker seen before the tick; `None` before the first.
        after_phase: Option<Phase>,
    },
}

impl Trigger {
    /// The trigger for worker marker `m`.
    pub fn from_marker(m: &Marker) -> Self {
        Trigger::Phase {
            phase: m.phase,
            marker_seq: m.seq,
            request_id: m.request_id,
        }
    }

    /// The short name used in raw file names.
    pub fn label(&self) -> &'static str {
        match self {
            Trigger::BeforeArm => "before_arm",
            Trigger::Phase { phase, .. } => phase.as_str(),
            Trigger::Cadence { .. } => "cadence",
        }
    }
}

/// One line of `snapshots.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotRecord {
    /// 0, 1, 2, … per arm, taken and skipped alike.
    pub seq: u64,
    /// What started the snapshot.
    pub trigger: Trigger,
    /// When the trigger arrived (shared monotonic clock).
    pub due_ns: u64,
    /// Whether it was taken (with each tool run) or skipped.
    pub outcome: SnapshotOutcome,
}

/// Whether a snapshot was taken, and what ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SnapshotOutcome {
    /// The snapshot ran its tools.
    Taken {
        /// Monotonic time (ns) the snapshot started.
        started_ns: u64,
        /// Monotonic time (ns) the snapshot ended, after its last tool.
        ended_ns: u64,
        /// Each tool run or file read, in order.
        tools: Vec<ToolRun>,
    },
    /// The trigger arrived while snapshot `busy_with` was still running;
    /// `triggers` counts the triggers folded into this record (cadence
    /// ticks missed in a row are one record).
    Skipped {
        /// `seq` of the snapshot that was still running.
        busy_with: u64,
        /// Triggers folded into this record.
        triggers: u64,
    },
}

/// One tool (or file) read for a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRun {
    /// The parser's tool name (`smaps_rollup`, `memory.stat`, `vmmap`, …).
    pub tool: String,
    /// The command line run, or the file read.
    pub source: String,
    /// The raw output, relative to the arm's folder.
    pub raw_file: Option<String>,
    /// Monotonic time (ns) the tool started.
    pub started_ns: u64,
    /// The tool's own wall time (for `vmmap`, the time the worker was suspended).
    pub wall_ns: u64,
    /// Commands only; `None` for files, and for a command killed by a signal.
    pub exit_code: Option<i32>,
    /// The tool stops the worker while it runs.
    pub suspends_target: bool,
    /// Why there is no output (file absent, cgroup v1, tool missing, refused).
    pub unavailable: Option<String>,
    /// The parsed capture, tagged by tool.
    pub parsed: Option<Capture>,
    /// Why the output could not be parsed; `None` when it was, or when there was nothing to parse.
    pub parse_error: Option<String>,
}

/// The snapshots of one arm in the receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotReceipt {
    /// What the harness was asked to observe (`probes.json`).
    pub settings: ProbeSettings,
    /// Set when the cadence is fast enough to perturb the worker.
    pub perturbation: Option<String>,
    /// Snapshots taken.
    pub taken: u64,
    /// Triggers that found a snapshot still running.
    pub skipped_triggers: u64,
    /// Wall time of a whole snapshot (all its tools).
    pub mean_wall_ns: Option<f64>,
    /// Longest wall time of a whole snapshot, in ns.
    pub max_wall_ns: Option<u64>,
    /// Every record, in order, with each tool's parse.
    pub records: Vec<SnapshotRecord>,
    /// Requests whose latency window overlaps a tool run.
    pub overlapping_requests: Vec<RequestOverlap>,
}

impl SnapshotReceipt {
    /// The snapshot taken for marker `marker_seq`, if one was.
    pub fn for_marker(&self, marker_seq: u64) -> Option<&SnapshotRecord> {
        self.records.iter().find(|r| {
            matches!(r.trigger, Trigger::Phase { marker_seq: s, .. } if s == marker_seq)
                && matches!(r.outcome, SnapshotOutcome::Taken { .. })
        })
    }
}

/// A request's latency figure taken across a snapshot tool's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RequestOverlap {
    /// The request whose latency window overlaps the tool run.
    pub request_id: u64,
    /// The snapshot the tool ran for (`SnapshotRecord::seq`).
    pub snapshot_seq: u64,
    /// The tool's name (as in `ToolRun::tool`).
    pub tool: String,
    /// True when the tool stops the worker while it runs, so the request's latency includes the pause.
    pub suspends_target: bool,
    /// How long the tool run and the request window overlap, in ns.
    pub overlap_ns: u64,
}

/// Each request's window `[request_begin, request_end]` from the markers.
fn request_windows(markers: &[Marker]) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for begin in markers.iter().filter(|m| m.phase == Phase::RequestBegin) {
        let Some(id) = begin.request_id else { continue };
        if let Some(end) = markers
            .iter()
            .find(|m| m.phase == Phase::RequestEnd && m.request_id == Some(id))
        {
            out.push((id, begin.t_ns, end.t_ns));
        }
    }
    out
}

/// Every (request, tool run) pair whose time windows intersect. Only
/// requests that produced a result carry a latency figure.
pub fn overlaps(
    records: &[SnapshotRecord],
    markers: &[Marker],
    results: &[RequestResult],
) -> Vec<RequestOverlap> {
    let windows = request_windows(markers);
    let mut out = Vec::new();
    for (id, begin, end) in windows {
        if !results.iter().any(|r| r.request_id == id) {
            continue;
        }
        for rec in records {
            let SnapshotOutcome::Taken { tools, .. } = &rec.outcome else {
                continue;
            };
            for t in tools.iter().filter(|t| t.unavailable.is_none()) {
                let t_end = t.started_ns.saturating_add(t.wall_ns);
                let overlap = end.min(t_end).saturating_sub(begin.max(t.started_ns));
                if overlap > 0 {
                    out.push(RequestOverlap {
                        request_id: id,
                        snapshot_seq: rec.seq,
                        tool: t.tool.clone(),
                        suspends_target: t.suspends_target,
                        overlap_ns: overlap,
                    });
                }
            }
        }
    }
    out
}

/// Build the receipt section from the arm's folder; `None` when the arm
/// took no snapshots (no `probes.json`: an older run, or probes off).
pub fn assemble(
    run: &RunDir,
    arm: &Rel,
    markers: &[Marker],
    results: &[RequestResult],
) -> Result<Option<SnapshotReceipt>, ReportError> {
    let Some(settings) = run.read_json::<ProbeSettings>(&arm.join(PROBES))? else {
        return Ok(None);
    };
    let records: Vec<SnapshotRecord> = run.read_jsonl(&arm.join(SNAPSHOTS))?;
    let mut walls = Vec::new();
    let mut skipped_triggers = 0;
    for r in &records {
        match &r.outcome {
            SnapshotOutcome::Taken {
                started_ns,
                ended_ns,
                ..
            } => walls.push(ended_ns.saturating_sub(*started_ns)),
            SnapshotOutcome::Skipped { triggers, .. } => skipped_triggers += triggers,
        }
    }
    let mean_wall_ns =
        (!walls.is_empty()).then(|| walls.iter().sum::<u64>() as f64 / walls.len() as f64);
    Ok(Some(SnapshotReceipt {
        perturbation: settings.perturbation(),
        settings,
        taken: walls.len() as u64,
        skipped_triggers,
        mean_wall_ns,
        max_wall_ns: walls.iter().copied().max(),
        overlapping_requests: overlaps(&records, markers, results),
        records,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::TaskMemory;

    fn marker(seq: u64, phase: Phase, request_id: Option<u64>, t_ns: u64) -> Marker {
        Marker {
            phase,
            seq,
            request_id,
            t_ns,
            memory: TaskMemory::default(),
            system: None,
            cpu: None,
        }
    }

    fn tool(name: &str, started_ns: u64, wall_ns: u64, suspends: bool) -> ToolRun {
        ToolRun {
            tool: name.into(),
            source: name.into(),
            raw_file: None,
            started_ns,
            wall_ns,
            exit_code: Some(0),
            suspends_target: suspends,
            unavailable: None,
            parsed: None,
            parse_error: None,
        }
    }

    fn taken(seq: u64, tools: Vec<ToolRun>) -> SnapshotRecord {
        SnapshotRecord {
            seq,
            trigger: Trigger::Cadence { after_phase: None },
            due_ns: 0,
            outcome: SnapshotOutcome::Taken {
                started_ns: 0,
                ended_ns: 0,
                tools,
            },
        }
    }

    fn result(request_id: u64) -> RequestResult {
        serde_json::from_value(serde_json::json!({
            "request_id": request_id, "latency_ns": 5,
            "body": {"kind": "calibration", "held_bytes": 0, "leaked_bytes": 0,
                     "spike_bytes": 0, "spike_resident_ns": null, "spike_freed_ns": null}
        }))
        .unwrap()
    }

    #[test]
    fn a_tool_run_inside_a_request_window_is_an_overlap_of_its_exact_length() {
        let markers = vec![
            marker(0, Phase::RequestBegin, Some(0), 1_000),
            marker(1, Phase::RequestEnd, Some(0), 2_000),
            marker(2, Phase::RequestBegin, Some(1), 3_000),
            marker(3, Phase::RequestEnd, Some(1), 4_000),
        ];
        let records = vec![
            // Starts before request 0 and runs 300 ns into it.
            taken(0, vec![tool("vmmap", 700, 600, true)]),
            // Entirely between the two requests: no overlap.
            taken(1, vec![tool("vm_stat", 2_100, 800, false)]),
            // Runs past the end of request 1.
            taken(2, vec![tool("smaps_rollup", 3_900, 500, false)]),
        ];
        let got = overlaps(&records, &markers, &[result(0), result(1)]);
        assert_eq!(
            got,
            vec![
                RequestOverlap {
                    request_id: 0,
                    snapshot_seq: 0,
                    tool: "vmmap".into(),
                    suspends_target: true,
                    overlap_ns: 300,
                },
                RequestOverlap {
                    request_id: 1,
                    snapshot_seq: 2,
                    tool: "smaps_rollup".into(),
                    suspends_target: false,
                    overlap_ns: 100,
                },
            ]
        );
        // A request without a result has no latency figure to flag.
        assert_eq!(overlaps(&records, &markers, &[result(1)]).len(), 1);
    }

    #[test]
    fn only_a_cadence_under_the_limit_is_a_perturbation() {
        let mut s = ProbeSettings {
            snapshots_at_phases: true,
            snapshot_every_ms: None,
            census_threshold_bytes: None,
            harness_pid: 1,
            worker_pid: 2,
        };
        assert_eq!(s.perturbation(), None);
        s.snapshot_every_ms = Some(PERTURBING_BELOW_MS);
        assert_eq!(s.perturbation(), None);
        s.snapshot_every_ms = Some(PERTURBING_BELOW_MS - 1);
        assert!(
            s.perturbation()
                .unwrap()
                .starts_with("snapshot cadence 999 ms")
        );
    }

    #[test]
    fn records_round_trip_through_json() {
        let rec = SnapshotRecord {
            seq: 3,
            trigger: Trigger::Phase {
                phase: Phase::ModelLoaded,
                marker_seq: 1,
                request_id: None,
            },
            due_ns: 10,
            outcome: SnapshotOutcome::Skipped {
                busy_with: 2,
                triggers: 1,
            },
        };
        let text = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            text,
            r#"{"seq":3,"trigger":{"kind":"phase","phase":"model_loaded","marker_seq":1},"due_ns":10,"outcome":{"status":"skipped","busy_with":2,"triggers":1}}"#
        );
        assert_eq!(serde_json::from_str::<SnapshotRecord>(&text).unwrap(), rec);
    }
}
