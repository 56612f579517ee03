//! The process census: every process's memory (via `sysinfo`) before the
//! arm and at each phase boundary, appended to `census.jsonl`. Which
//! processes moved, and whether that can be attributed, is the receipt's
//! business (`reports::census`).

use crate::boundary::{Job, MarkerFilter, RecordSink};
use reports::census::{CENSUS, CensusRecord, CensusTaken, ProcessMemory};
use reports::snapshots::Trigger;
use run_dir::{Rel, RunDir};
use sampler::clock;
use schemars::JsonSchema;
use serde::Deserialize;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};

/// The protocol's `[census]` table.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CensusPlan {
    /// Take the census (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// List processes whose memory moved by more than this during the arm
    /// (MiB, default 16).
    #[serde(default = "default_threshold_mib")]
    #[schemars(range(min = crate::limits::THRESHOLD_MIB.min, max = crate::limits::THRESHOLD_MIB.max))]
    pub threshold_mib: f64,
    /// Also at the `request_begin` / `request_end` markers (default true).
    /// Soaks set it false: a census per request marker walks every process
    /// thousands of times.
    #[serde(default = "yes")]
    pub at_request_markers: bool,
    /// With `at_request_markers`, only at the markers of every n-th measured
    /// request (the 1st, the n+1-th, …; default 1: each).
    #[schemars(range(min = crate::limits::EVERY_N_REQUESTS.min, max = crate::limits::EVERY_N_REQUESTS.max))]
    pub every_n_requests: Option<u64>,
}

fn yes() -> bool {
    true
}

fn default_threshold_mib() -> f64 {
    16.0
}

impl Default for CensusPlan {
    fn default() -> Self {
        CensusPlan {
            enabled: true,
            threshold_mib: default_threshold_mib(),
            at_request_markers: true,
            every_n_requests: None,
        }
    }
}

impl CensusPlan {
    /// Every key in range; the error's key is the full path (`census.threshold_mib`).
    pub fn validate(&self) -> Result<(), worker_contract::FieldError> {
        crate::limits::THRESHOLD_MIB.check("census.threshold_mib", self.threshold_mib)?;
        self.filter().map(|_| ())
    }

    fn filter(&self) -> Result<MarkerFilter, worker_contract::FieldError> {
        MarkerFilter::from_plan(
            "census",
            true,
            self.at_request_markers,
            self.every_n_requests,
        )
    }

    /// The markers that trigger a census (a validated plan's).
    pub(crate) fn marker_filter(&self) -> MarkerFilter {
        self.filter().unwrap_or(MarkerFilter::ALL)
    }

    /// `threshold_mib` in bytes, rounded to the nearest byte.
    pub fn threshold_bytes(&self) -> u64 {
        (self.threshold_mib * 1048576.0).round() as u64
    }
}

/// Takes censuses into an arm folder; keeps one `sysinfo` view across them.
pub(crate) struct Census {
    system: System,
    records: RecordSink,
}

impl Census {
    pub(crate) fn create(run: &RunDir, arm: &Rel) -> Result<Self, run_dir::RunDirError> {
        Ok(Census {
            system: System::new(),
            records: RecordSink::open(run, &arm.join(CENSUS))?,
        })
    }

    /// Every live process's memory, by pid.
    pub(crate) fn observe(&mut self) -> Vec<ProcessMemory> {
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_memory(),
        );
        let mut out: Vec<ProcessMemory> = self
            .system
            .processes()
            .values()
            // Threads show up as processes on Linux; the process holds their memory.
            .filter(|p| p.thread_kind().is_none())
            .map(|p| ProcessMemory {
                pid: p.pid().as_u32(),
                start_time_s: p.start_time(),
                name: p.name().to_string_lossy().into_owned(),
                memory_bytes: p.memory(),
                virtual_bytes: p.virtual_memory(),
            })
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }
}

impl Job for Census {
    fn take(&mut self, seq: u64, trigger: Trigger, due_ns: u64) {
        let started_ns = clock::monotonic_ns();
        let processes = self.observe();
        let record = CensusRecord {
            seq,
            trigger,
            due_ns,
            taken: Some(CensusTaken {
                started_ns,
                wall_ns: clock::monotonic_ns().saturating_sub(started_ns),
                processes,
            }),
        };
        self.records.append(&record);
    }

    fn skip(&mut self, seq: u64, trigger: Trigger, due_ns: u64, _busy_with: u64, _triggers: u64) {
        self.records.append(&CensusRecord {
            seq,
            trigger,
            due_ns,
            taken: None,
        });
    }

    fn errors(self) -> Vec<String> {
        self.records.errors()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_census_sees_this_process_with_its_resident_memory() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let mut census = Census::create(&run, &Rel::root()).unwrap();
        let all = census.observe();
        let me = all
            .iter()
            .find(|p| p.pid == std::process::id())
            .expect("this process is in the census");
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix(" kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            // Same kernel figure, read a moment apart by two readers.
            let diff = me.memory_bytes.abs_diff(kib * 1024);
            assert!(
                diff < 8 << 20,
                "census {} vs VmRSS {kib} kB",
                me.memory_bytes
            );
        }
        // Threads of this test binary are not listed as processes.
        assert_eq!(all.iter().filter(|p| p.pid == me.pid).count(), 1);
    }

    #[test]
    fn a_threshold_is_validated_and_converted_to_bytes() {
        let plan = CensusPlan {
            threshold_mib: 1.5,
            ..CensusPlan::default()
        };
        assert_eq!(plan.threshold_bytes(), 1572864);
        assert!(plan.validate().is_ok());
        let bad = CensusPlan {
            threshold_mib: -1.0,
            ..plan
        };
        let err = bad.validate().unwrap_err();
        assert_eq!(err.key, "census.threshold_mib");
        assert!(
            err.message.contains("threshold_mib = -1 is out of range"),
            "{err}"
        );
    }

    #[test]
    fn request_markers_are_each_by_default_and_thinned_or_dropped_on_request() {
        let each = CensusPlan::default().marker_filter();
        assert_eq!(each.every_n_requests, Some(1));
        let tenth = CensusPlan {
            every_n_requests: Some(10),
            ..CensusPlan::default()
        };
        assert_eq!(tenth.marker_filter().every_n_requests, Some(10));
        let none = CensusPlan {
            at_request_markers: false,
            ..CensusPlan::default()
        };
        assert_eq!(none.marker_filter().every_n_requests, None);
        assert!(none.marker_filter().at_phases);
        let zero = CensusPlan {
            every_n_requests: Some(0),
            ..CensusPlan::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().message,
            "census.every_n_requests = 0 is out of range: allowed 1..=10000000 (at most 10 million)"
        );
        let contradiction = CensusPlan {
            every_n_requests: Some(5),
            ..none
        };
        assert_eq!(
            contradiction.validate().unwrap_err().message,
            "census.every_n_requests = 5 needs at_request_markers = true"
        );
    }
}
