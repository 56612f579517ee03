//! The process census: every process's memory before an arm and at each of
//! its phase boundaries (`census.jsonl`), and in the receipt the processes
//! whose memory moved by more than the protocol's threshold during the arm.
//!
//! Work an arm causes may happen in processes that are not its children
//! (Core ML's compiler and model services). No process is named here: any
//! process that moved is listed, and a movement is attributed to the arm
//! only against a matched control arm, as the difference between the two
//! arms' movements of processes with the same name.

use crate::ReportError;
use crate::snapshots::{PROBES, ProbeSettings, Trigger};
use run_dir::{Rel, RunDir};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use run_dir::names::CENSUS;

/// One line of `census.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CensusRecord {
    /// 0, 1, 2, … per arm, taken and skipped alike.
    pub seq: u64,
    /// What started the census (before the arm, a phase marker, or a cadence tick).
    pub trigger: Trigger,
    /// When the trigger arrived (shared monotonic clock, ns).
    pub due_ns: u64,
    /// `None` when the trigger found the previous census still running.
    pub taken: Option<CensusTaken>,
}

/// A census that was taken: every process the OS listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CensusTaken {
    /// Monotonic time (ns) the census started.
    pub started_ns: u64,
    /// How long listing every process took, in ns.
    pub wall_ns: u64,
    /// Every process seen, the harness and the worker included.
    pub processes: Vec<ProcessMemory>,
}

/// One process as the census saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessMemory {
    /// The process id.
    pub pid: u32,
    /// Seconds since the epoch; with the pid, the process's identity.
    pub start_time_s: u64,
    /// The process name as the OS reports it.
    pub name: String,
    /// Resident memory (RSS on Linux, resident size on macOS) in bytes.
    pub memory_bytes: u64,
    /// Virtual size in bytes, as the OS reports it.
    pub virtual_bytes: u64,
}

/// The census of one arm in the receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CensusReceipt {
    /// Processes whose memory moved by more than this many bytes are listed (the protocol's census threshold).
    pub threshold_bytes: u64,
    /// Censuses taken.
    pub censuses: u64,
    /// Triggers that found the previous census still running.
    pub skipped: u64,
    /// Processes seen at least once (the harness and the worker excluded).
    pub processes_seen: u64,
    /// Processes whose memory moved beyond the threshold, largest movement first.
    pub movers: Vec<Mover>,
    /// The arm's own external encoder process (patched whisper.cpp,
    /// `encoder = "external_process"`), left out of `movers`: its memory
    /// belongs to the arm, beside the worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_encoder: Option<EncoderProcessMemory>,
}

/// The external encoder process's memory as the census saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EncoderProcessMemory {
    /// Its process id (from the worker's runtime report).
    pub pid: u32,
    /// Largest memory seen in any census, in bytes.
    pub max_bytes: u64,
    /// Per phase of the worker's markers, in the order first seen: the
    /// largest memory any census at that phase saw.
    pub by_phase: Vec<PhaseMemory>,
}

/// One phase's memory of a process in the census.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseMemory {
    /// The worker's phase whose marker triggered the census.
    pub phase: sampler::Phase,
    /// Resident memory in bytes (largest over that phase's censuses).
    pub bytes: u64,
}

/// The external encoder process `pid` in `records`: `None` when no census saw it.
pub fn encoder_process(records: &[CensusRecord], pid: u32) -> Option<EncoderProcessMemory> {
    let mut by_phase: Vec<PhaseMemory> = Vec::new();
    let mut max_bytes = None;
    for rec in records {
        let Some(taken) = &rec.taken else { continue };
        let Some(p) = taken.processes.iter().find(|p| p.pid == pid) else {
            continue;
        };
        max_bytes = Some(max_bytes.unwrap_or(0).max(p.memory_bytes));
        if let Trigger::Phase { phase, .. } = rec.trigger {
            match by_phase.iter_mut().find(|m| m.phase == phase) {
                Some(m) => m.bytes = m.bytes.max(p.memory_bytes),
                None => by_phase.push(PhaseMemory {
                    phase,
                    bytes: p.memory_bytes,
                }),
            }
        }
    }
    Some(EncoderProcessMemory {
        pid,
        max_bytes: max_bytes?,
        by_phase,
    })
}

/// A process whose memory moved by more than the threshold during the arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mover {
    /// The process id.
    pub pid: u32,
    /// The process name as the OS reports it.
    pub name: String,
    /// Before the arm; `None` when the process appeared during it (counted from 0).
    pub baseline_bytes: Option<u64>,
    /// Largest memory seen in any census, in bytes.
    pub max_bytes: u64,
    /// At the last census that saw it.
    pub last_bytes: u64,
    /// The largest change from the baseline, signed.
    pub moved_bytes: i64,
    /// Whether the movement can be put down to the arm, against a matched control.
    pub attribution: Attribution,
}

/// Whether a mover's movement can be put down to the arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attribution {
    /// No matched control arm: the movement may have any cause.
    NotAttributable {
        /// Why not, in words.
        reason: String,
    },
    /// The control arm's movement of processes with the same name, and
    /// this arm's movement minus it.
    Paired {
        /// The control arm id.
        control_arm: String,
        /// The control's largest movement among processes of the same name, signed bytes (0 when none moved).
        control_moved_bytes: i64,
        /// This arm's movement minus the control's, signed bytes.
        paired_delta_bytes: i64,
    },
}

fn no_control() -> Attribution {
    Attribution::NotAttributable {
        reason: "not attributable: no matched control arm".into(),
    }
}

/// Signed value with the larger magnitude (the first on ties).
fn larger_move(a: i64, b: i64) -> i64 {
    if b.unsigned_abs() > a.unsigned_abs() {
        b
    } else {
        a
    }
}

/// The movers among `records`: each process's largest change from its
/// before-arm memory over the phase censuses, when beyond `threshold`.
/// `exclude` holds the harness's and the worker's pids.
pub fn movers(records: &[CensusRecord], threshold: u64, exclude: &[u32]) -> (Vec<Mover>, u64) {
    let mut baseline: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    // (pid, start) → (name, max, last, moved)
    let mut seen: BTreeMap<(u32, u64), (String, u64, u64, i64)> = BTreeMap::new();
    for rec in records {
        let Some(taken) = &rec.taken else { continue };
        for p in taken.processes.iter().filter(|p| !exclude.contains(&p.pid)) {
            let key = (p.pid, p.start_time_s);
            if rec.trigger == Trigger::BeforeArm {
                baseline.insert(key, p.memory_bytes);
            }
            let base = baseline.get(&key).copied().unwrap_or(0);
            let change = p.memory_bytes as i64 - base as i64;
            let entry = seen.entry(key).or_insert_with(|| (p.name.clone(), 0, 0, 0));
            entry.1 = entry.1.max(p.memory_bytes);
            entry.2 = p.memory_bytes;
            entry.3 = larger_move(entry.3, change);
        }
    }
    let total = seen.len() as u64;
    let mut out: Vec<Mover> = seen
        .into_iter()
        .filter(|(_, (_, _, _, moved))| moved.unsigned_abs() > threshold)
        .map(|((pid, start), (name, max, last, moved))| Mover {
            pid,
            name,
            baseline_bytes: baseline.get(&(pid, start)).copied(),
            max_bytes: max,
            last_bytes: last,
            moved_bytes: moved,
            attribution: no_control(),
        })
        .collect();
    out.sort_by(|a, b| {
        b.moved_bytes
            .unsigned_abs()
            .cmp(&a.moved_bytes.unsigned_abs())
            .then(a.pid.cmp(&b.pid))
    });
    (out, total)
}

/// Every process's largest signed change in `records`, by name (the
/// largest in magnitude among processes sharing a name).
fn moves_by_name(records: &[CensusRecord], exclude: &[u32]) -> BTreeMap<String, i64> {
    let (all, _) = movers(records, 0, exclude);
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for m in all {
        let e = out.entry(m.name).or_insert(0);
        *e = larger_move(*e, m.moved_bytes);
    }
    out
}

/// Read the census of one arm; `None` without census settings.
pub fn assemble(
    run: &RunDir,
    arm: &Rel,
) -> Result<Option<(CensusReceipt, ArmCensus)>, ReportError> {
    let Some(settings) = run.read_json::<ProbeSettings>(&arm.join(PROBES))? else {
        return Ok(None);
    };
    let Some(threshold) = settings.census_threshold_bytes else {
        return Ok(None);
    };
    let records: Vec<CensusRecord> = run.read_jsonl(&arm.join(CENSUS))?;
    let runtime: Option<worker_contract::RuntimeReport> =
        run.read_json(&arm.join(crate::record::files::RUNTIME))?;
    let encoder_pid = runtime.and_then(|r| r.external_encoder).map(|e| e.pid);
    let mut exclude = vec![settings.harness_pid, settings.worker_pid];
    exclude.extend(encoder_pid);
    let (movers, processes_seen) = movers(&records, threshold, &exclude);
    let receipt = CensusReceipt {
        threshold_bytes: threshold,
        censuses: records.iter().filter(|r| r.taken.is_some()).count() as u64,
        skipped: records.iter().filter(|r| r.taken.is_none()).count() as u64,
        processes_seen,
        movers,
        external_encoder: encoder_pid.and_then(|pid| encoder_process(&records, pid)),
    };
    Ok(Some((receipt, ArmCensus { records, exclude })))
}

/// The raw census of an arm, kept while pairing arms with their controls.
#[derive(Debug, Clone)]
pub struct ArmCensus {
    records: Vec<CensusRecord>,
    exclude: Vec<u32>,
}

/// Attribute `arm`'s movers against its matched control arm's census.
pub fn pair(arm: &mut CensusReceipt, control_arm: &str, control: &ArmCensus) {
    let control_moves = moves_by_name(&control.records, &control.exclude);
    for m in &mut arm.movers {
        let control_moved = control_moves.get(&m.name).copied().unwrap_or(0);
        m.attribution = Attribution::Paired {
            control_arm: control_arm.to_string(),
            control_moved_bytes: control_moved,
            paired_delta_bytes: m.moved_bytes - control_moved,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::Phase;

    const MIB: u64 = 1 << 20;

    fn p(pid: u32, name: &str, mib: u64) -> ProcessMemory {
        ProcessMemory {
            pid,
            start_time_s: 100,
            name: name.into(),
            memory_bytes: mib * MIB,
            virtual_bytes: 0,
        }
    }

    fn rec(seq: u64, trigger: Trigger, processes: Vec<ProcessMemory>) -> CensusRecord {
        CensusRecord {
            seq,
            trigger,
            due_ns: seq,
            taken: Some(CensusTaken {
                started_ns: seq,
                wall_ns: 1,
                processes,
            }),
        }
    }

    fn phase(seq: u64) -> Trigger {
        Trigger::Phase {
            phase: Phase::ModelLoaded,
            marker_seq: seq,
            request_id: None,
        }
    }

    fn arm_records(service_growth: u64) -> Vec<CensusRecord> {
        vec![
            rec(
                0,
                Trigger::BeforeArm,
                vec![
                    p(1, "init", 10),
                    p(50, "modelservice", 40),
                    p(7, "harness", 5),
                ],
            ),
            rec(
                1,
                phase(0),
                vec![
                    p(1, "init", 11),
                    p(50, "modelservice", 40 + service_growth),
                    p(7, "harness", 500),
                    p(60, "compiler", 300),
                ],
            ),
            CensusRecord {
                seq: 2,
                trigger: phase(1),
                due_ns: 2,
                taken: None,
            },
            rec(
                3,
                phase(2),
                vec![p(1, "init", 10), p(50, "modelservice", 45)],
            ),
        ]
    }

    /// The service grew 200 MiB in the arm and 30 MiB in the control `native`.
    fn assert_service_paired(receipt: &CensusReceipt) {
        let service = receipt
            .movers
            .iter()
            .find(|m| m.name == "modelservice")
            .unwrap();
        assert_eq!(
            service.attribution,
            Attribution::Paired {
                control_arm: "native".into(),
                control_moved_bytes: 30 * MIB as i64,
                paired_delta_bytes: 170 * MIB as i64,
            }
        );
    }

    #[test]
    fn movers_are_beyond_the_threshold_with_their_largest_change() {
        let (got, seen) = movers(&arm_records(200), 16 * MIB, &[7]);
        assert_eq!(
            seen, 3,
            "init, modelservice, compiler; the harness excluded"
        );
        assert_eq!(got.len(), 2);
        // The compiler appeared during the arm: counted from zero.
        assert_eq!(
            (got[0].pid, got[0].baseline_bytes, got[0].moved_bytes),
            (60, None, 300 * MIB as i64)
        );
        assert_eq!(
            (
                got[1].name.as_str(),
                got[1].baseline_bytes,
                got[1].max_bytes,
                got[1].last_bytes,
                got[1].moved_bytes
            ),
            (
                "modelservice",
                Some(40 * MIB),
                240 * MIB,
                45 * MIB,
                200 * MIB as i64
            )
        );
        assert_eq!(got[1].attribution, no_control());
    }

    #[test]
    fn the_external_encoder_process_is_reported_per_phase_and_only_when_seen() {
        let records = arm_records(200);
        let got = encoder_process(&records, 60).unwrap();
        assert_eq!(got.pid, 60);
        assert_eq!(got.max_bytes, 300 * MIB);
        assert_eq!(
            got.by_phase,
            vec![PhaseMemory {
                phase: Phase::ModelLoaded,
                bytes: 300 * MIB
            }]
        );
        assert_eq!(encoder_process(&records, 61), None);
        // Left out of the movers when excluded, as `assemble` does with its pid.
        let (m, _) = movers(&records, 16 * MIB, &[7, 60]);
        assert!(m.iter().all(|m| m.pid != 60));
    }

    #[test]
    fn a_control_arm_gives_the_paired_delta_by_process_name() {
        let (movers_, _) = movers(&arm_records(200), 16 * MIB, &[7]);
        let mut receipt = CensusReceipt {
            threshold_bytes: 16 * MIB,
            censuses: 3,
            skipped: 1,
            processes_seen: 3,
            movers: movers_,
            external_encoder: None,
        };
        let control = ArmCensus {
            records: arm_records(30),
            exclude: vec![7],
        };
        pair(&mut receipt, "native", &control);
        assert_service_paired(&receipt);
    }

    #[test]
    fn the_receipt_pairs_an_arm_with_its_control_from_the_run_directory() {
        use crate::record::{RunInfo, files};
        let (_tmp, run) = crate::testing::run();
        let info = RunInfo {
            protocol_name: "p".into(),
            protocol_path: "p.toml".into(),
            page_size_bytes: 4096,
            arms: vec!["coreml".into(), "native".into()],
            controls: [("coreml".to_string(), "native".to_string())].into(),
            ..RunInfo::default()
        };
        run.write_json(&Rel::file(files::RUN), &info).unwrap();
        for (arm, growth) in [("coreml", 200), ("native", 30)] {
            let dir = crate::testing::arm(&run, arm);
            let settings = ProbeSettings {
                snapshots_at_phases: true,
                snapshot_every_ms: None,
                census_threshold_bytes: Some(16 * MIB),
                harness_pid: 7,
                worker_pid: 8,
            };
            run.write_json(&dir.join(PROBES), &settings).unwrap();
            crate::testing::jsonl(&run, &dir.join(CENSUS), arm_records(growth));
        }
        let receipt = crate::assemble(&run).unwrap();
        let coreml = receipt.arms[0].census.as_ref().unwrap();
        assert_eq!((coreml.censuses, coreml.skipped), (3, 1));
        assert_service_paired(coreml);
        // The control itself has no control: its movers stay unattributed.
        let native = receipt.arms[1].census.as_ref().unwrap();
        assert!(native.movers.iter().all(|m| m.attribution == no_control()));
    }
}
