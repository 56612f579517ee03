//! cgroup v2 memory files: `memory.stat` and `memory.events` (`name N`
//! lines) and `memory.peak` (one number). `procfs` does not cover cgroup
//! files, so these are read here.

use super::lines::{Lines, parse_u64};
use super::{CaptureError, Entry, ParseOptions, Parsed, entry};
use serde::{Deserialize, Serialize};

/// `memory.stat`: sizes in bytes (`anon`, `file`, …) and event counts
/// (`pgfault`, …) under their kernel names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryStat {
    /// Every `name N` line, in file order.
    pub entries: Vec<Entry>,
    /// `anon`: anonymous memory in bytes. Each typed field is `None` when the file has no such line.
    pub anon: Option<u64>,
    /// `file`: page cache in bytes.
    pub file: Option<u64>,
    /// `kernel`: all kernel memory in bytes (newer kernels only).
    pub kernel: Option<u64>,
    /// `kernel_stack`: kernel stacks in bytes.
    pub kernel_stack: Option<u64>,
    /// `pagetables`: page tables in bytes.
    pub pagetables: Option<u64>,
    /// `shmem`: swap-backed file memory (shmem, tmpfs) in bytes.
    pub shmem: Option<u64>,
    /// `file_mapped`: page cache mapped with `mmap`, in bytes.
    pub file_mapped: Option<u64>,
    /// `file_dirty`: page cache not yet written back, in bytes.
    pub file_dirty: Option<u64>,
    /// `swapcached`: memory cached in swap, in bytes.
    pub swapcached: Option<u64>,
    /// `inactive_anon`: anonymous memory on the inactive LRU list, in bytes.
    pub inactive_anon: Option<u64>,
    /// `active_anon`: anonymous memory on the active LRU list, in bytes.
    pub active_anon: Option<u64>,
    /// `inactive_file`: page cache on the inactive LRU list, in bytes.
    pub inactive_file: Option<u64>,
    /// `active_file`: page cache on the active LRU list, in bytes.
    pub active_file: Option<u64>,
    /// `unevictable`: memory that cannot be reclaimed (e.g. `mlock`ed), in bytes.
    pub unevictable: Option<u64>,
    /// `slab`: kernel slab memory in bytes.
    pub slab: Option<u64>,
    /// `pgfault`: page faults so far (a count).
    pub pgfault: Option<u64>,
    /// `pgmajfault`: major page faults so far (a count).
    pub pgmajfault: Option<u64>,
}

/// `memory.events`: how often each limit was hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryEvents {
    /// Every `name N` line, in file order.
    pub entries: Vec<Entry>,
    /// `low`: times the cgroup was reclaimed although under its `memory.low`. Each typed field
    /// is `None` when the file has no such line.
    pub low: Option<u64>,
    /// `high`: times the cgroup went over `memory.high` and was throttled into reclaim.
    pub high: Option<u64>,
    /// `max`: times the cgroup was about to go over `memory.max`.
    pub max: Option<u64>,
    /// `oom`: times an allocation was about to fail at the limit.
    pub oom: Option<u64>,
    /// `oom_kill`: processes the OOM killer killed in the cgroup.
    pub oom_kill: Option<u64>,
    /// Newer kernels only.
    pub oom_group_kill: Option<u64>,
}

/// `memory.peak`: the cgroup's high-water mark in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryPeak {
    /// The value of `memory.peak`, in bytes.
    pub bytes: u64,
}

fn name_value_lines(
    text: &str,
    opts: ParseOptions,
) -> Result<(Lines<'_>, Vec<Entry>), CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut entries = Vec::new();
    while let Some((no, line)) = lines.next_line() {
        let parsed = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [name, value] if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                parse_u64(value).map(|v| (*name, v))
            }
            _ => None,
        };
        match parsed {
            Some((name, value)) => entries.push(Entry {
                line: no,
                name: name.to_string(),
                value,
            }),
            None if line.trim().is_empty() => {}
            None => lines.unknown(no, line, "expected 'name N'")?,
        }
    }
    if entries.is_empty() {
        return Err(CaptureError::whole("no 'name N' lines"));
    }
    Ok((lines, entries))
}

/// Parse `memory.stat`. Fails on a line that is not `name N` (unless lenient) and
/// when there is no such line at all.
pub fn parse_memory_stat(
    text: &str,
    opts: ParseOptions,
) -> Result<Parsed<MemoryStat>, CaptureError> {
    let (lines, entries) = name_value_lines(text, opts)?;
    let e = |n: &str| entry(&entries, n);
    let stat = MemoryStat {
        anon: e("anon"),
        file: e("file"),
        kernel: e("kernel"),
        kernel_stack: e("kernel_stack"),
        pagetables: e("pagetables"),
        shmem: e("shmem"),
        file_mapped: e("file_mapped"),
        file_dirty: e("file_dirty"),
        swapcached: e("swapcached"),
        inactive_anon: e("inactive_anon"),
        active_anon: e("active_anon"),
        inactive_file: e("inactive_file"),
        active_file: e("active_file"),
        unevictable: e("unevictable"),
        slab: e("slab"),
        pgfault: e("pgfault"),
        pgmajfault: e("pgmajfault"),
        entries,
    };
    Ok(lines.finish(stat))
}

/// Parse `memory.events`. Fails on a line that is not `name N` (unless lenient) and
/// when there is no such line at all.
pub fn parse_memory_events(
    text: &str,
    opts: ParseOptions,
) -> Result<Parsed<MemoryEvents>, CaptureError> {
    let (lines, entries) = name_value_lines(text, opts)?;
    let e = |n: &str| entry(&entries, n);
    let events = MemoryEvents {
        low: e("low"),
        high: e("high"),
        max: e("max"),
        oom: e("oom"),
        oom_kill: e("oom_kill"),
        oom_group_kill: e("oom_group_kill"),
        entries,
    };
    Ok(lines.finish(events))
}

/// Parse `memory.peak`: one number of bytes. A second number or any other text is an
/// unknown line; no number at all is an error.
pub fn parse_memory_peak(
    text: &str,
    opts: ParseOptions,
) -> Result<Parsed<MemoryPeak>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut bytes = None;
    while let Some((no, line)) = lines.next_line() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        match parse_u64(t) {
            Some(b) if bytes.is_none() => bytes = Some(b),
            _ => lines.unknown(no, line, "expected one number of bytes")?,
        }
    }
    let bytes = bytes.ok_or_else(|| CaptureError::whole("no number of bytes"))?;
    Ok(lines.finish(MemoryPeak { bytes }))
}
