//! Linux `/proc` files: `<pid>/status`, `<pid>/statm`, `<pid>/smaps_rollup`,
//! `meminfo`, `vmstat` and `pressure/*` (PSI, also a cgroup's
//! `memory.pressure`).
//!
//! Each file is first checked line by line here (that gives line numbers,
//! the lenient mode, and keeps input that could trip `procfs` arithmetic or
//! slicing away from it); the accepted lines are then handed to `procfs-core`,
//! the parsing half of the `procfs` crate, whose types define the typed
//! fields. `kB` values are converted to bytes.

use super::lines::{Lines, parse_u64};
use super::{CaptureError, ParseOptions, Parsed, size};
use procfs_core::{FromBufRead, FromRead};
use serde::{Deserialize, Serialize};

/// A `Key: value` line as printed; `bytes` when the value is `N kB`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyLine {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The key as printed (e.g. `VmRSS`).
    pub name: String,
    /// The value as printed, trimmed (e.g. `1234 kB`, `S (sleeping)`).
    pub raw: String,
    /// The value in bytes when it is `N kB` (KiB); `None` for any other value.
    pub bytes: Option<u64>,
}

/// `N kB` fits in bytes only up to this many KiB (procfs multiplies by 1024).
const MAX_KIB: u64 = u64::MAX / 1024;

/// `procfs` refused the accepted lines. Its "internal error" means a line it
/// needs is missing or unreadable: the capture's fault, not a procfs bug, so
/// its request to report a bug is not shown.
fn procfs_err(what: &str, e: procfs_core::ProcError) -> CaptureError {
    match e {
        procfs_core::ProcError::InternalError(internal) => {
            let why = internal
                .msg
                .trim_start_matches("Internal Unwrap Error: ")
                .trim();
            CaptureError::whole(if why == "NoneError" {
                format!("{what}: not a complete {what} capture: a line it requires is missing")
            } else {
                format!("{what}: not a complete {what} capture: {why}")
            })
        }
        other => CaptureError::whole(format!("{what}: {other}")),
    }
}

fn kib_to_bytes(kib: Option<u64>) -> Option<u64> {
    kib.and_then(|k| k.checked_mul(1024))
}

/// Check `Key:<space>value` lines; returns the lines and the accepted text.
fn key_lines(
    lines: &mut Lines<'_>,
    key_ok: impl Fn(&str) -> bool,
    value_ok: impl Fn(&str) -> bool,
) -> Result<(Vec<KeyLine>, String), CaptureError> {
    let mut out = Vec::new();
    let mut accepted = String::new();
    while let Some((no, line)) = lines.next_line() {
        if line.is_empty() {
            continue;
        }
        let parsed = line.split_once(':').and_then(|(name, raw)| {
            let raw = raw.trim();
            (key_ok(name) && value_ok(raw)).then_some((name, raw))
        });
        let Some((name, raw)) = parsed else {
            lines.unknown(no, line, "expected 'Key: value'")?;
            continue;
        };
        let bytes = raw
            .strip_suffix(" kB")
            .and_then(parse_u64)
            .filter(|k| *k <= MAX_KIB)
            .map(|k| k * 1024);
        out.push(KeyLine {
            line: no,
            name: name.to_string(),
            raw: raw.to_string(),
            bytes,
        });
        accepted.push_str(line);
        accepted.push('\n');
    }
    Ok((out, accepted))
}

fn proc_key(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(' || c == ')')
}

/// A number, optionally followed by ` kB`, small enough for procfs to scale.
fn kb_value(raw: &str) -> bool {
    let digits = raw.strip_suffix(" kB").unwrap_or(raw);
    parse_u64(digits).is_some_and(|v| v <= MAX_KIB)
}

// ---- /proc/<pid>/status ------------------------------------------------------

/// A parsed `/proc/<pid>/status`. Sizes are in bytes (the file prints KiB); a size is
/// `None` when its line is missing (a kernel thread or zombie has no `Vm*` lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcStatus {
    /// Every `Key: value` line, in file order.
    pub entries: Vec<KeyLine>,
    /// `Name`: the command name.
    pub name: String,
    /// `Pid`.
    pub pid: i32,
    /// `State`, as printed (e.g. `S (sleeping)`).
    pub state: String,
    /// `Threads`: the number of threads.
    pub threads: u64,
    /// `VmPeak`: peak virtual memory size.
    pub vm_peak: Option<u64>,
    /// `VmSize`: virtual memory size.
    pub vm_size: Option<u64>,
    /// `VmLck`: locked memory.
    pub vm_lck: Option<u64>,
    /// `VmPin`: pinned memory.
    pub vm_pin: Option<u64>,
    /// Peak resident set size (resettable with `clear_refs`).
    pub vm_hwm: Option<u64>,
    /// `VmRSS`: resident set size (`RssAnon + RssFile + RssShmem`).
    pub vm_rss: Option<u64>,
    /// `RssAnon`: resident anonymous memory.
    pub rss_anon: Option<u64>,
    /// `RssFile`: resident file mappings.
    pub rss_file: Option<u64>,
    /// `RssShmem`: resident shared memory (shmem, tmpfs, shared anonymous mappings).
    pub rss_shmem: Option<u64>,
    /// `VmData`: size of the data segments (private, writable mappings).
    pub vm_data: Option<u64>,
    /// `VmStk`: size of the stack.
    pub vm_stk: Option<u64>,
    /// `VmExe`: size of the text segment.
    pub vm_exe: Option<u64>,
    /// `VmLib`: size of shared library code.
    pub vm_lib: Option<u64>,
    /// `VmPTE`: size of the page tables.
    pub vm_pte: Option<u64>,
    /// `VmSwap`: anonymous memory swapped out (shmem swap not included).
    pub vm_swap: Option<u64>,
}

/// Parse `/proc/<pid>/status`. Fails on a line that is not `Key: value` (unless lenient),
/// on a `Vm*` value that is not `N kB`, and when `procfs` rejects the accepted lines
/// (e.g. no `Name`, `Pid` or `State`).
pub fn parse_status(text: &str, opts: ParseOptions) -> Result<Parsed<ProcStatus>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    // Values are free text (`S (sleeping)`, tab-separated ids); no ':' inside.
    let value_ok = |v: &str| !v.contains(':') && v.chars().all(|c| !c.is_control() || c == '\t');
    let (entries, accepted) = key_lines(&mut lines, proc_key, value_ok)?;
    for e in &entries {
        if e.name.starts_with("Vm") && e.bytes.is_none() && !e.raw.is_empty() {
            return Err(CaptureError::Line {
                line: e.line,
                text: e.raw.clone(),
                reason: format!("{} is not 'N kB'", e.name),
            });
        }
    }
    let s = procfs_core::process::Status::from_buf_read(accepted.as_bytes())
        .map_err(|e| procfs_err("status", e))?;
    let b = kib_to_bytes;
    Ok(lines.finish(ProcStatus {
        entries,
        name: s.name,
        pid: s.pid,
        state: s.state,
        threads: s.threads,
        vm_peak: b(s.vmpeak),
        vm_size: b(s.vmsize),
        vm_lck: b(s.vmlck),
        vm_pin: b(s.vmpin),
        vm_hwm: b(s.vmhwm),
        vm_rss: b(s.vmrss),
        rss_anon: b(s.rssanon),
        rss_file: b(s.rssfile),
        rss_shmem: b(s.rssshmem),
        vm_data: b(s.vmdata),
        vm_stk: b(s.vmstk),
        vm_exe: b(s.vmexe),
        vm_lib: b(s.vmlib),
        vm_pte: b(s.vmpte),
        vm_swap: b(s.vmswap),
    }))
}

// ---- /proc/<pid>/statm -------------------------------------------------------

/// Seven page counts; bytes only when the capture's page size is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcStatm {
    /// Field 1, `size`: total program size (`VmSize`) in pages.
    pub size_pages: u64,
    /// Field 2, `resident`: resident pages (`VmRSS`).
    pub resident_pages: u64,
    /// RssFile + RssShmem.
    pub shared_pages: u64,
    /// Field 4, `text`: pages of code.
    pub text_pages: u64,
    /// Field 6, `data`: pages of data and stack.
    pub data_pages: u64,
    /// The page size in bytes, from `ParseOptions::page_size`; `None` when not given.
    pub page_size: Option<u64>,
    /// `resident_pages * page_size`; `None` without a page size.
    pub resident_bytes: Option<u64>,
    /// `size_pages * page_size`; `None` without a page size.
    pub size_bytes: Option<u64>,
}

/// Parse `/proc/<pid>/statm`: exactly one line of seven numbers. Any other line is
/// unknown (unless lenient); no such line is an error.
pub fn parse_statm(text: &str, opts: ParseOptions) -> Result<Parsed<ProcStatm>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut found = None;
    while let Some((no, line)) = lines.next_line() {
        if line.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if found.is_none() && words.len() == 7 && words.iter().all(|w| parse_u64(w).is_some()) {
            found = Some(words.join(" "));
        } else {
            lines.unknown(no, line, "expected one line of seven page counts")?;
        }
    }
    let text = found.ok_or_else(|| CaptureError::whole("no line of seven page counts"))?;
    let m = procfs_core::process::StatM::from_read(text.as_bytes())
        .map_err(|e| procfs_err("statm", e))?;
    let bytes = |pages: u64| opts.page_size.and_then(|p| pages.checked_mul(p));
    Ok(lines.finish(ProcStatm {
        size_pages: m.size,
        resident_pages: m.resident,
        shared_pages: m.shared,
        text_pages: m.text,
        data_pages: m.data,
        page_size: opts.page_size,
        resident_bytes: bytes(m.resident),
        size_bytes: bytes(m.size),
    }))
}

// ---- /proc/<pid>/smaps_rollup ------------------------------------------------

/// A parsed `/proc/<pid>/smaps_rollup`: the process's mappings summed. Sizes are in
/// bytes (the file prints KiB); each is `None` when its line is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SmapsRollup {
    /// The pseudo-mapping line ending in `[rollup]`.
    pub header: String,
    /// Every `Key: N kB` line, in file order.
    pub entries: Vec<KeyLine>,
    /// `Rss`: resident memory.
    pub rss: Option<u64>,
    /// `Pss`: proportional set size, each shared page divided by the number of processes mapping it.
    pub pss: Option<u64>,
    /// `Pss_Dirty`: the dirty part of `Pss`.
    pub pss_dirty: Option<u64>,
    /// `Pss_Anon`: the anonymous part of `Pss`.
    pub pss_anon: Option<u64>,
    /// `Pss_File`: the file-backed part of `Pss`.
    pub pss_file: Option<u64>,
    /// `Pss_Shmem`: the shmem part of `Pss`.
    pub pss_shmem: Option<u64>,
    /// `Private_Clean`: clean pages mapped only by this process.
    pub private_clean: Option<u64>,
    /// `Private_Dirty`: dirty pages mapped only by this process.
    pub private_dirty: Option<u64>,
    /// `Anonymous`: anonymous memory.
    pub anonymous: Option<u64>,
    /// `Swap`: anonymous memory swapped out.
    pub swap: Option<u64>,
    /// `SwapPss`: proportional share of the swapped-out memory.
    pub swap_pss: Option<u64>,
}

/// Parse `/proc/<pid>/smaps_rollup`. Fails when there is no `… [rollup]` header line,
/// on a line that is not `Key: N kB` (unless lenient), and when `procfs` rejects the text.
pub fn parse_smaps_rollup(
    text: &str,
    opts: ParseOptions,
) -> Result<Parsed<SmapsRollup>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let header = loop {
        let Some((no, line)) = lines.next_line() else {
            return Err(CaptureError::whole("no '… [rollup]' header line"));
        };
        if rollup_header(line) {
            break line.to_string();
        }
        lines.unknown(
            no,
            line,
            "expected the 'start-end perms offset dev inode [rollup]' line",
        )?;
    };
    let key_ok = |k: &str| proc_key(k) && k.starts_with(|c: char| c.is_ascii_uppercase());
    let (entries, accepted) = key_lines(&mut lines, key_ok, kb_value)?;
    let text = format!("{header}\n{accepted}");
    let rollup = procfs_core::process::SmapsRollup::from_buf_read(text.as_bytes())
        .map_err(|e| procfs_err("smaps_rollup", e))?;
    let map = rollup
        .memory_map_rollup
        .0
        .first()
        .map(|m| m.extension.map.clone())
        .unwrap_or_default();
    let get = |k: &str| map.get(k).copied();
    Ok(lines.finish(SmapsRollup {
        header,
        rss: get("Rss"),
        pss: get("Pss"),
        pss_dirty: get("Pss_Dirty"),
        pss_anon: get("Pss_Anon"),
        pss_file: get("Pss_File"),
        pss_shmem: get("Pss_Shmem"),
        private_clean: get("Private_Clean"),
        private_dirty: get("Private_Dirty"),
        anonymous: get("Anonymous"),
        swap: get("Swap"),
        swap_pss: get("SwapPss"),
        entries,
    }))
}

/// `55d0c0000000-7ffd00000000 ---p 00000000 00:00 0      [rollup]`
fn rollup_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    let pair = |s: &str, sep: char| s.split_once(sep).is_some_and(|(a, b)| hex(a) && hex(b));
    matches!(words.as_slice(), [addr, perms, offset, dev, inode, "[rollup]"]
        if pair(addr, '-') && perms.len() == 4 && perms.is_ascii() && hex(offset)
            && pair(dev, ':') && parse_u64(inode).is_some())
        && line.starts_with(|c: char| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

// ---- /proc/meminfo -----------------------------------------------------------

/// A parsed `/proc/meminfo`. Sizes are in bytes (the file prints KiB); the lines every
/// kernel prints are required, the `Option` ones are `None` when missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Meminfo {
    /// Every `Key: value` line, in file order.
    pub entries: Vec<KeyLine>,
    /// `MemTotal`: usable physical memory.
    pub mem_total: u64,
    /// `MemFree`: memory not used at all.
    pub mem_free: u64,
    /// `MemAvailable`: the kernel's estimate of memory available to start new work without
    /// swapping (Linux 3.14 and later).
    pub mem_available: Option<u64>,
    /// `Buffers`: block device buffers.
    pub buffers: u64,
    /// `Cached`: page cache (shmem included, swap cache not).
    pub cached: u64,
    /// `SwapCached`: memory swapped out and back in that is still in the swap file.
    pub swap_cached: u64,
    /// `Active`: memory used recently.
    pub active: u64,
    /// `Inactive`: memory used less recently, more eligible for reclaim.
    pub inactive: u64,
    /// `SwapTotal`: swap space.
    pub swap_total: u64,
    /// `SwapFree`: unused swap space.
    pub swap_free: u64,
    /// `Dirty`: memory waiting to be written back to disk.
    pub dirty: u64,
    /// `AnonPages`: anonymous pages mapped into user page tables.
    pub anon_pages: Option<u64>,
    /// `Mapped`: files mapped into memory (e.g. libraries).
    pub mapped: u64,
    /// `Shmem`: shared memory and tmpfs.
    pub shmem: Option<u64>,
    /// `Slab`: kernel slab memory.
    pub slab: u64,
    /// `Committed_AS`: memory currently committed (allocated, whether or not used).
    pub committed_as: u64,
}

/// The `/proc/meminfo` keys every Linux kernel since 2.6 prints, which
/// `procfs` requires; the others (`MemAvailable`, `AnonPages`, `Shmem`, …)
/// are optional.
pub const MEMINFO_REQUIRED: [&str; 17] = [
    "MemTotal",
    "MemFree",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "SwapTotal",
    "SwapFree",
    "Dirty",
    "Writeback",
    "Mapped",
    "Slab",
    "Committed_AS",
    "VmallocTotal",
    "VmallocUsed",
    "VmallocChunk",
];

/// Parse `/proc/meminfo`. Fails on a line that is not `Key: N [kB]` (unless
/// lenient), and names every key of [`MEMINFO_REQUIRED`] that is missing.
pub fn parse_meminfo(text: &str, opts: ParseOptions) -> Result<Parsed<Meminfo>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let (entries, accepted) = key_lines(&mut lines, proc_key, kb_value)?;
    let missing: Vec<&str> = MEMINFO_REQUIRED
        .iter()
        .copied()
        .filter(|k| !entries.iter().any(|e| e.name == *k))
        .collect();
    if !missing.is_empty() {
        return Err(CaptureError::whole(format!(
            "meminfo: missing the required key{} {} (every Linux kernel prints {}; \
             the capture is cut short or not /proc/meminfo)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        )));
    }
    let m = procfs_core::Meminfo::from_buf_read(accepted.as_bytes())
        .map_err(|e| procfs_err("meminfo", e))?;
    Ok(lines.finish(Meminfo {
        entries,
        mem_total: m.mem_total,
        mem_free: m.mem_free,
        mem_available: m.mem_available,
        buffers: m.buffers,
        cached: m.cached,
        swap_cached: m.swap_cached,
        active: m.active,
        inactive: m.inactive,
        swap_total: m.swap_total,
        swap_free: m.swap_free,
        dirty: m.dirty,
        anon_pages: m.anon_pages,
        mapped: m.mapped,
        shmem: m.shmem,
        slab: m.slab,
        committed_as: m.committed_as,
    }))
}

// ---- /proc/vmstat ------------------------------------------------------------

/// Counters and gauges in pages or events, by their kernel names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Vmstat {
    /// Every `name N` line, in file order.
    pub entries: Vec<SignedEntry>,
    /// `nr_free_pages`: free pages now (a gauge). Each typed field is `None` when its line is missing.
    pub nr_free_pages: Option<i64>,
    /// `pgfault`: page faults since boot.
    pub pgfault: Option<i64>,
    /// `pgmajfault`: major page faults (needing I/O) since boot.
    pub pgmajfault: Option<i64>,
    /// `pswpin`: pages swapped in since boot.
    pub pswpin: Option<i64>,
    /// `pswpout`: pages swapped out since boot.
    pub pswpout: Option<i64>,
    /// `oom_kill`: processes killed by the OOM killer since boot.
    pub oom_kill: Option<i64>,
}

/// A `name N` line of `/proc/vmstat`; some gauges can be negative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignedEntry {
    /// 1-based line number in the capture.
    pub line: usize,
    /// The kernel's name for the counter.
    pub name: String,
    /// The value as printed (pages or events).
    pub value: i64,
}

/// Parse `/proc/vmstat`. Fails on a line that is not `name N` (unless lenient), when
/// there is no such line, and when `procfs` rejects the accepted lines.
pub fn parse_vmstat(text: &str, opts: ParseOptions) -> Result<Parsed<Vmstat>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut entries = Vec::new();
    let mut accepted = String::new();
    while let Some((no, line)) = lines.next_line() {
        let parsed = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [name, value] if proc_key(name) => signed(value).map(|v| (*name, v)),
            _ => None,
        };
        match parsed {
            Some((name, value)) => {
                entries.push(SignedEntry {
                    line: no,
                    name: name.to_string(),
                    value,
                });
                accepted.push_str(&format!("{name} {value}\n"));
            }
            None if line.trim().is_empty() => {}
            None => lines.unknown(no, line, "expected 'name N'")?,
        }
    }
    if entries.is_empty() {
        return Err(CaptureError::whole("no 'name N' lines"));
    }
    let v = procfs_core::VmStat::from_buf_read(accepted.as_bytes())
        .map_err(|e| procfs_err("vmstat", e))?;
    let get = |k: &str| v.0.get(k).copied();
    Ok(lines.finish(Vmstat {
        nr_free_pages: get("nr_free_pages"),
        pgfault: get("pgfault"),
        pgmajfault: get("pgmajfault"),
        pswpin: get("pswpin"),
        pswpout: get("pswpout"),
        oom_kill: get("oom_kill"),
        entries,
    }))
}

fn signed(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    parse_u64(digits)?;
    s.parse().ok()
}

// ---- /proc/pressure/* and <cgroup>/memory.pressure ---------------------------

/// A parsed PSI file (`/proc/pressure/*` or a cgroup's `memory.pressure`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pressure {
    /// The `some` line: time in which at least one task stalled; `None` when missing.
    pub some: Option<PressureRecord>,
    /// Absent for CPU on older kernels.
    pub full: Option<PressureRecord>,
}

/// One PSI line. The averages are percentages of wall time as printed
/// (two decimals) and in hundredths; `total_us` is the stall time in µs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PressureRecord {
    /// 1-based line number in the capture.
    pub line: usize,
    /// `avg10` as printed: percentage of the last 10 s.
    pub avg10: String,
    /// `avg60` as printed: percentage of the last 60 s.
    pub avg60: String,
    /// `avg300` as printed: percentage of the last 300 s.
    pub avg300: String,
    /// `avg10` in hundredths of a percent (`1.50` is 150).
    pub avg10_hundredths: u64,
    /// `avg60` in hundredths of a percent.
    pub avg60_hundredths: u64,
    /// `avg300` in hundredths of a percent.
    pub avg300_hundredths: u64,
    /// `total`: stall time since boot (or since the cgroup was created), in microseconds.
    pub total_us: u64,
}

/// Parse a PSI file. Fails on a line that is not a well-formed `some`/`full` record or
/// repeats one (unless lenient) and when there is neither.
pub fn parse_pressure(text: &str, opts: ParseOptions) -> Result<Parsed<Pressure>, CaptureError> {
    let mut lines = Lines::new(text, opts);
    let mut out = Pressure {
        some: None,
        full: None,
    };
    while let Some((no, line)) = lines.next_line() {
        if line.trim().is_empty() {
            continue;
        }
        let slot = if line.starts_with("some ") {
            &mut out.some
        } else if line.starts_with("full ") {
            &mut out.full
        } else {
            lines.unknown(no, line, "expected a 'some' or 'full' line")?;
            continue;
        };
        // procfs checks the record's shape (all four fields); the exact
        // decimal values come from the text itself.
        let record = procfs_core::parse_pressure_record(line)
            .ok()
            .and_then(|_| psi_record(no, line));
        match record {
            Some(r) if slot.is_none() => *slot = Some(r),
            Some(_) => lines.unknown(no, line, "a second line of this kind")?,
            None => lines.unknown(no, line, "expected 'avg10=… avg60=… avg300=… total=…'")?,
        }
    }
    if out.some.is_none() && out.full.is_none() {
        return Err(CaptureError::whole("no 'some' or 'full' line"));
    }
    Ok(lines.finish(out))
}

fn psi_record(no: usize, line: &str) -> Option<PressureRecord> {
    let mut fields = line.split_whitespace().skip(1);
    let mut take = |key: &str| {
        let (k, v) = fields.next()?.split_once('=')?;
        (k == key).then(|| v.to_string())
    };
    let (avg10, avg60, avg300, total) = (
        take("avg10")?,
        take("avg60")?,
        take("avg300")?,
        take("total")?,
    );
    if fields.next().is_some() {
        return None;
    }
    let hundredths = |s: &str| size::scale(s, 100);
    Some(PressureRecord {
        line: no,
        avg10_hundredths: hundredths(&avg10)?,
        avg60_hundredths: hundredths(&avg60)?,
        avg300_hundredths: hundredths(&avg300)?,
        avg10,
        avg60,
        avg300,
        total_us: parse_u64(&total)?,
    })
}
