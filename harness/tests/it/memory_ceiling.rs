//! `memory_ceiling`: the sampler's watchdog kills a calibration worker whose
//! kernel peak crosses its ceiling, in the phase that crosses it, and the
//! crossing it records is the one in the kernel's own readings on disk
//! (`series.csv` rows, `markers.jsonl`), written by other code.

use crate::common::*;
use reports::ceiling::{CeilingCrossing, CeilingEnforcer, CrossingSeenBy};
use reports::gates::Outcome;
use reports::receipt::ArmReceipt;
use reports::record::{ArmOutcome, ArmStatus};
use sampler::Phase;
use std::path::PathBuf;
use std::sync::OnceLock;

const CEILING_32: u64 = 32 << 20;

/// `over`: 64 MiB held from `model_loaded` against a 32 MiB ceiling, an
/// expected kill (its warm-up request alone would take 1 s, so the kill
/// lands long before the worker could finish). `under`: the same plateau under 256 MiB. `spike`: 64 MiB
/// for 1 ms between two ticks 1 s apart, against 32 MiB. `survives`: an
/// expected kill that never comes (8 MiB under 256 MiB).
const PROTOCOL: &str = r#"
[sampling]
period_ms = 50

[[arm]]
id = "over"
promote = true
expect = "fail"
memory_ceiling = "32 MiB"
[arm.calibrate]
requests = 2
request_ms = 1000
idle_ms = 1
plateau = { mib = 64 }

[[arm.gate]]
kind = "fail_closed"
reason = "memory ceiling"

[[arm]]
id = "under"
promote = true
memory_ceiling = "256 MiB"
[arm.calibrate]
requests = 2
request_ms = 20
idle_ms = 1
plateau = { mib = 64 }

[[arm.gate]]
kind = "memory"
phase = "state_ready"
field = "resident_bytes"
ceiling_mib = 256

[[arm]]
id = "spike"
memory_ceiling = "32 MiB"
sampling = { period_ms = 1000 }
[arm.calibrate]
requests = 1
request_ms = 1600
idle_ms = 1
spike = { mib = 64, hold_ms = 1, request = 0, between_ticks = true }

[[arm]]
id = "survives"
expect = "fail"
memory_ceiling = "256 MiB"
[arm.calibrate]
requests = 2
request_ms = 20
idle_ms = 1
plateau = { mib = 8 }

[[arm.gate]]
kind = "fail_closed"
reason = "memory ceiling"
"#;

struct Run {
    dir: PathBuf,
    /// The run's `--junit` and `--export-bmf` files.
    junit: PathBuf,
    bmf: PathBuf,
    code: Option<i32>,
    stderr: String,
    receipt: reports::Receipt,
}

/// One run of [`PROTOCOL`] shared by the tests of this file.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let ci = tempfile::tempdir().unwrap().keep();
        let (junit, bmf) = (ci.join("junit.xml"), ci.join("bmf.json"));
        let r = run_protocol_body(
            "run",
            &format!("{PROTOCOL}{LENIENT_ADMISSION}"),
            &[
                "--junit",
                junit.to_str().unwrap(),
                "--export-bmf",
                bmf.to_str().unwrap(),
            ],
        );
        let dir = r.tmp.keep().join("run");
        Run {
            junit,
            bmf,
            receipt: receipt(&dir),
            code: r.out.status.code(),
            stderr: stderr(&r.out),
            dir,
        }
    })
}

fn arm(id: &str) -> &'static ArmReceipt {
    run().receipt.arms.iter().find(|a| a.id == id).unwrap()
}

fn outcome(id: &str) -> ArmOutcome {
    let text = std::fs::read_to_string(run().dir.join("arms").join(id).join("arm.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn crossing(id: &str) -> &'static CeilingCrossing {
    let record = arm(id).memory_ceiling.as_ref().expect("a ceiling record");
    record
        .crossing
        .as_ref()
        .unwrap_or_else(|| panic!("{id} never crossed: {:?}", arm(id).failure))
}

/// The kernel's own reading that the crossing names, from the arm's raw
/// files: the `series.csv` row of its tick, or the marker it was seen in.
fn kernel_peak_at(id: &str, c: &CeilingCrossing) -> (u64, Option<u64>) {
    let dir = run().dir.join("arms").join(id);
    match c.seen_by {
        CrossingSeenBy::Tick => {
            let rows = series(&dir);
            let row = rows.iter().find(|r| Some(r.tick) == c.tick).unwrap();
            assert_eq!(row.t_ns, c.at_ns);
            (row.resident_peak_bytes.unwrap(), row.resident_bytes)
        }
        CrossingSeenBy::Marker => {
            let marks = markers(&dir);
            let m = marks.iter().find(|m| Some(m.seq) == c.marker_seq).unwrap();
            assert_eq!(m.t_ns, c.at_ns);
            (
                m.memory.resident_peak_bytes.unwrap(),
                Some(m.memory.resident_bytes),
            )
        }
    }
}

#[test]
fn a_plateau_above_the_ceiling_is_killed_in_the_phase_that_crosses_it() {
    let a = arm("over");
    assert_eq!(a.status, ArmStatus::Failed, "{}", run().stderr);
    let record = a.memory_ceiling.as_ref().unwrap();
    assert_eq!(
        (record.bytes, record.enforcer, record.field.as_str()),
        (CEILING_32, CeilingEnforcer::Watchdog, "VmHWM")
    );
    assert_eq!(record.period_ns, 50_000_000);
    let c = crossing("over");
    // The plateau is touched between `process_start` and `model_loaded`.
    assert_eq!(c.phase, "model_loaded", "{c:?}");
    assert!(c.peak_bytes > CEILING_32, "{c:?}");
    // At most the plateau and the worker's own start-up memory.
    assert!(c.peak_bytes < (64 + 32) << 20, "{c:?}");
    // The same figure as the kernel's reading on disk.
    assert_eq!(kernel_peak_at("over", c), (c.peak_bytes, c.resident_bytes));
    // Killed, not ended: SIGKILL, and the requests it had left never finished.
    let marks = markers(&run().dir.join("arms/over"));
    assert!(
        !marks.iter().any(|m| m.phase == Phase::WarmupDone),
        "{marks:?}"
    );
    let o = outcome("over");
    assert_eq!(o.exit.unwrap().signal_name.as_deref(), Some("SIGKILL"));
    assert!(
        a.failure[0].starts_with(&format!(
            "memory ceiling 32.0 MiB (33554432 bytes) crossed: VmHWM read {:.1} MiB ({} bytes) ",
            c.peak_bytes as f64 / 1048576.0,
            c.peak_bytes
        )),
        "{:?}",
        a.failure
    );
    assert!(
        a.failure[0].ends_with(
            ", in phase `model_loaded` (last marked: `process_start`); the worker's process \
             group was killed within one sampler period of the crossing"
        ),
        "{:?}",
        a.failure
    );
    // Our own kill is not reported as a death by signal.
    assert!(
        !a.failure.iter().any(|f| f.contains("killed by signal")),
        "{:?}",
        a.failure
    );
}

#[test]
fn a_ceiling_above_the_plateau_completes_with_no_crossing() {
    let a = arm("under");
    assert_eq!(a.status, ArmStatus::Completed, "{:?}", a.failure);
    let record = a.memory_ceiling.as_ref().unwrap();
    assert_eq!(record.bytes, 256 << 20);
    assert_eq!(record.crossing, None);
    // The kernel's peak reached the plateau and stayed under the ceiling.
    let dir = run().dir.join("arms/under");
    let peak = series(&dir)
        .iter()
        .filter_map(|r| r.resident_peak_bytes)
        .chain(
            markers(&dir)
                .iter()
                .filter_map(|m| m.memory.resident_peak_bytes),
        )
        .max()
        .unwrap();
    assert!((64 << 20..256 << 20).contains(&peak), "{peak}");
    let gates = run().receipt.gates.as_ref().unwrap();
    let under = gates.arms.iter().find(|g| g.arm == "under").unwrap();
    assert_eq!(under.verdict, Outcome::Pass, "{under:#?}");
}

#[test]
fn a_spike_between_two_ticks_is_caught_through_the_peak() {
    let a = arm("spike");
    assert_eq!(a.status, ArmStatus::Failed);
    let c = crossing("spike");
    assert!(
        c.peak_bytes > CEILING_32 && c.peak_bytes < 96 << 20,
        "{c:?}"
    );
    // Inside request 0: the phase `request_end` closes.
    assert_eq!(c.phase, "request_end", "{c:?}");
    assert_eq!(c.after_phase, Some(Phase::RequestBegin), "{c:?}");
    assert_eq!(kernel_peak_at("spike", c), (c.peak_bytes, c.resident_bytes));
    // No tick saw the spike resident: only the kernel's peak held it.
    let rows = series(&run().dir.join("arms/spike"));
    let max_resident = rows.iter().filter_map(|r| r.resident_bytes).max().unwrap();
    assert!(
        max_resident < CEILING_32,
        "{max_resident} resident at a tick"
    );
}

#[test]
fn an_expected_kill_passes_when_killed_and_fails_when_the_worker_survives() {
    let r = run();
    let gates = r.receipt.gates.as_ref().unwrap();
    let verdict = |id: &str| {
        let g = gates.arms.iter().find(|g| g.arm == id).unwrap();
        (g.verdict, g.gates[0].checks[0].note.clone())
    };
    let (over, note) = verdict("over");
    assert_eq!(over, Outcome::Pass, "{note}");
    assert!(
        note.starts_with("failed: memory ceiling 32.0 MiB"),
        "{note}"
    );
    let (survives, note) = verdict("survives");
    assert_eq!(survives, Outcome::Fail);
    assert_eq!(note, "the arm completed: it did not fail closed");
    assert_eq!(
        arm("survives").memory_ceiling.as_ref().unwrap().crossing,
        None
    );
    // The promoted arms (`over` killed as expected, `under` within) pass the run.
    assert_eq!(gates.verdict, Outcome::Pass);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The summary and the page say it in one line per arm.
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(
        summary.contains(
            "`under`: memory ceiling 256.0 MiB (watchdog on VmHWM every 50 ms): not crossed."
        ),
        "{summary}"
    );
    assert!(
        summary.contains(
            "`over`: memory ceiling 32.0 MiB (watchdog on VmHWM every 50 ms): crossed at"
        ),
        "{summary}"
    );
    let page = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(
        page.contains("memory ceiling 32.0 MiB (watchdog on VmHWM every 1000 ms): crossed at"),
        "the spike arm's line"
    );
}

#[test]
fn an_impossible_ceiling_is_refused_before_anything_runs() {
    let mem_total_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    for (value, reason) in [
        (
            "-1 GiB",
            "is negative: a size is a positive number and a unit, e.g. \"1.5 GiB\"".to_string(),
        ),
        (
            "0 B",
            "is zero: give the most memory the worker may hold, e.g. \"1.5 GiB\"".to_string(),
        ),
        (
            "12 parsecs",
            "has an unknown unit `parsecs`: use one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB (spelled as written here)".to_string(),
        ),
        (
            "1024 TiB",
            format!(
                "(1125899906842624 bytes) is above this host's physical memory ({} MiB, MemTotal): it can never be crossed on this host; lower it or drop the key",
                mem_total_kib >> 10
            ),
        ),
    ] {
        let r = run_protocol_body(
            "run",
            &format!("\n[[arm]]\nid = \"a\"\nmemory_ceiling = \"{value}\"\n[arm.calibrate]\nrequests = 1\n"),
            &[],
        );
        assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
        let expected = format!(
            "memqual: error: {}:6:18: arm `a`: memory_ceiling = \"{value}\" {reason}",
            r.protocol.display()
        );
        let err = stderr(&r.out);
        assert_eq!(err.lines().next(), Some(expected.as_str()), "{err}");
        assert!(!r.dir.exists(), "nothing may run on a bad protocol");
    }
}

#[test]
fn junit_and_bmf_carry_the_ceiling_and_its_crossing() {
    let c = crossing("over");
    let junit = std::fs::read_to_string(&run().junit).unwrap();
    let line = format!(
        "memory ceiling 32.0 MiB (watchdog on VmHWM every 50 ms): crossed at {:.1} MiB in phase `model_loaded`",
        c.peak_bytes as f64 / 1048576.0
    );
    assert!(
        junit.contains(&format!(r#"<property name="memory_ceiling" value="{line}"#)),
        "{junit}"
    );
    let bmf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&run().bmf).unwrap()).unwrap();
    let over = &bmf["memqual/test/over"];
    assert_eq!(over["memory-ceiling-bytes"]["value"], CEILING_32 as f64);
    assert_eq!(
        over["memory-ceiling-crossing-peak-bytes"]["value"],
        c.peak_bytes as f64
    );
    // Not crossed: the limit, and no crossing figure.
    let under = &bmf["memqual/test/under"];
    assert_eq!(
        under["memory-ceiling-bytes"]["value"],
        (256u64 << 20) as f64
    );
    assert!(
        under.get("memory-ceiling-crossing-peak-bytes").is_none(),
        "{under}"
    );
}
