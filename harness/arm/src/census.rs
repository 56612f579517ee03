//! The process census: every process's memory (via `sysinfo`) before the
//! arm and at each phase boundary, appended to `census.jsonl`. Which
//! processes moved, and whether that can be attributed, is the receipt's
//! business (`reports::census`).

use crate::boundary::{Job, RecordSink};
use reports::census::{CENSUS, CensusRecord, CensusTaken, ProcessMemory};
use reports::snapshots::Trigger;
use run_dir::{Rel, RunDir};
use sampler::clock;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};

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
}
