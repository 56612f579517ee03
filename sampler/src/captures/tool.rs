//! The tools by name, and one entry point that parses any of them.

use super::{CaptureError, ParseOptions, Parsed};
use super::{cgroup, footprint, memory_pressure, proc_files, ps, time_l, vm_stat, vmmap};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A tool (or file) whose output memqual can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `vmmap -summary PID` (macOS).
    VmmapSummary,
    /// `vm_stat` or `vm_stat N` (macOS).
    VmStat,
    /// `memory_pressure` (macOS).
    MemoryPressure,
    /// `footprint PID…` (macOS).
    Footprint,
    /// `/usr/bin/time -l` (macOS).
    TimeL,
    /// `ps -o pid=,rss=,vsz=…` (macOS and Linux).
    Ps,
    /// Linux `/proc/<pid>/status`.
    ProcStatus,
    /// Linux `/proc/<pid>/statm`.
    ProcStatm,
    /// Linux `/proc/<pid>/smaps_rollup`.
    SmapsRollup,
    /// Linux `/proc/meminfo`.
    Meminfo,
    /// Linux `/proc/vmstat`.
    Vmstat,
    /// Linux PSI: `/proc/pressure/memory` or a cgroup's `memory.pressure`.
    Pressure,
    /// cgroup v2 `memory.stat`.
    CgroupMemoryStat,
    /// cgroup v2 `memory.events`.
    CgroupMemoryEvents,
    /// cgroup v2 `memory.peak`.
    CgroupMemoryPeak,
}

/// Names accepted on the command line; the first of each is canonical.
const NAMES: [(Tool, &[&str]); 15] = [
    (
        Tool::VmmapSummary,
        &["vmmap", "vmmap-summary", "vmmap_summary"],
    ),
    (Tool::VmStat, &["vm_stat"]),
    (Tool::MemoryPressure, &["memory_pressure"]),
    (Tool::Footprint, &["footprint"]),
    (Tool::TimeL, &["time", "time-l", "time_l", "/usr/bin/time"]),
    (Tool::Ps, &["ps"]),
    (Tool::ProcStatus, &["status", "/proc/pid/status"]),
    (Tool::ProcStatm, &["statm", "/proc/pid/statm"]),
    (
        Tool::SmapsRollup,
        &["smaps_rollup", "/proc/pid/smaps_rollup"],
    ),
    (Tool::Meminfo, &["meminfo", "/proc/meminfo"]),
    (Tool::Vmstat, &["vmstat", "/proc/vmstat"]),
    (
        Tool::Pressure,
        &["pressure", "/proc/pressure/memory", "memory.pressure"],
    ),
    (Tool::CgroupMemoryStat, &["memory.stat"]),
    (Tool::CgroupMemoryEvents, &["memory.events"]),
    (Tool::CgroupMemoryPeak, &["memory.peak"]),
];

impl Tool {
    /// Every tool, in the order `--help` and error messages list them.
    pub const ALL: [Tool; 15] = [
        Tool::VmmapSummary,
        Tool::VmStat,
        Tool::MemoryPressure,
        Tool::Footprint,
        Tool::TimeL,
        Tool::Ps,
        Tool::ProcStatus,
        Tool::ProcStatm,
        Tool::SmapsRollup,
        Tool::Meminfo,
        Tool::Vmstat,
        Tool::Pressure,
        Tool::CgroupMemoryStat,
        Tool::CgroupMemoryEvents,
        Tool::CgroupMemoryPeak,
    ];

    /// Every name accepted on the command line, the canonical one first.
    pub fn names(self) -> &'static [&'static str] {
        NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or(&[], |(_, names)| names)
    }

    /// The canonical command-line name (e.g. `vmmap`, `memory.stat`).
    pub fn name(self) -> &'static str {
        self.names().first().copied().unwrap_or("?")
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tool name that no `Tool` accepts; the message lists the known names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool {0:?}; known: {known}", known = known_names())]
pub struct UnknownTool(pub String);

fn known_names() -> String {
    Tool::ALL.map(Tool::name).join(", ")
}

impl FromStr for Tool {
    type Err = UnknownTool;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NAMES
            .iter()
            .find(|(_, names)| names.contains(&s))
            .map(|(t, _)| *t)
            .ok_or_else(|| UnknownTool(s.to_string()))
    }
}

/// Any parsed capture, tagged with its tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "tool", content = "result", rename_all = "snake_case")]
pub enum Capture {
    /// Parsed `vmmap -summary` output.
    VmmapSummary(vmmap::VmmapSummary),
    /// Parsed `vm_stat` or `vm_stat N` output.
    VmStat(vm_stat::VmStatCapture),
    /// Parsed `memory_pressure` output.
    MemoryPressure(memory_pressure::MemoryPressure),
    /// Parsed `footprint` output.
    Footprint(footprint::Footprint),
    /// Parsed `/usr/bin/time -l` output.
    TimeL(time_l::TimeL),
    /// Parsed `ps` output.
    Ps(ps::Ps),
    /// Parsed `/proc/<pid>/status`.
    ProcStatus(proc_files::ProcStatus),
    /// Parsed `/proc/<pid>/statm`.
    ProcStatm(proc_files::ProcStatm),
    /// Parsed `/proc/<pid>/smaps_rollup`.
    SmapsRollup(proc_files::SmapsRollup),
    /// Parsed `/proc/meminfo`.
    Meminfo(proc_files::Meminfo),
    /// Parsed `/proc/vmstat`.
    Vmstat(proc_files::Vmstat),
    /// Parsed PSI memory pressure.
    Pressure(proc_files::Pressure),
    /// Parsed cgroup `memory.stat`.
    CgroupMemoryStat(cgroup::MemoryStat),
    /// Parsed cgroup `memory.events`.
    CgroupMemoryEvents(cgroup::MemoryEvents),
    /// Parsed cgroup `memory.peak`.
    CgroupMemoryPeak(cgroup::MemoryPeak),
}

fn wrap<T>(p: Parsed<T>, f: impl FnOnce(T) -> Capture) -> Parsed<Capture> {
    Parsed {
        value: f(p.value),
        skipped: p.skipped,
    }
}

/// Parse `text` as the output of `tool`.
pub fn parse(tool: Tool, text: &str, opts: ParseOptions) -> Result<Parsed<Capture>, CaptureError> {
    Ok(match tool {
        Tool::VmmapSummary => wrap(vmmap::parse(text, opts)?, Capture::VmmapSummary),
        Tool::VmStat => wrap(vm_stat::parse(text, opts)?, Capture::VmStat),
        Tool::MemoryPressure => wrap(memory_pressure::parse(text, opts)?, Capture::MemoryPressure),
        Tool::Footprint => wrap(footprint::parse(text, opts)?, Capture::Footprint),
        Tool::TimeL => wrap(time_l::parse(text, opts)?, Capture::TimeL),
        Tool::Ps => wrap(ps::parse(text, opts)?, Capture::Ps),
        Tool::ProcStatus => wrap(proc_files::parse_status(text, opts)?, Capture::ProcStatus),
        Tool::ProcStatm => wrap(proc_files::parse_statm(text, opts)?, Capture::ProcStatm),
        Tool::SmapsRollup => wrap(
            proc_files::parse_smaps_rollup(text, opts)?,
            Capture::SmapsRollup,
        ),
        Tool::Meminfo => wrap(proc_files::parse_meminfo(text, opts)?, Capture::Meminfo),
        Tool::Vmstat => wrap(proc_files::parse_vmstat(text, opts)?, Capture::Vmstat),
        Tool::Pressure => wrap(proc_files::parse_pressure(text, opts)?, Capture::Pressure),
        Tool::CgroupMemoryStat => wrap(
            cgroup::parse_memory_stat(text, opts)?,
            Capture::CgroupMemoryStat,
        ),
        Tool::CgroupMemoryEvents => wrap(
            cgroup::parse_memory_events(text, opts)?,
            Capture::CgroupMemoryEvents,
        ),
        Tool::CgroupMemoryPeak => wrap(
            cgroup::parse_memory_peak(text, opts)?,
            Capture::CgroupMemoryPeak,
        ),
    })
}
