//! Linux readers: `/proc/self|<pid>/status|statm`, `/proc/meminfo`,
//! `/proc/vmstat`, `/proc/pressure/memory` (all through `procfs`), and the
//! `clear_refs` high-water-mark reset (proc.rst: writing 5 resets VmHWM).

use crate::procfile::{self, ProcFile, ReadBuf};
use crate::{SamplerError, SeriesRow, TaskMemory};
use procfs::process::{Process, Status};
use std::path::PathBuf;

/// Platform name written into records (`PLATFORM`).
pub const NAME: &str = "linux";

/// This boot's identity: `/proc/sys/kernel/random/boot_id`, new on every boot.
pub fn boot_session_id() -> Option<String> {
    std::fs::read("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|b| crate::host::c_string(&b))
}

/// Hardware model from DMI (x86) or the device tree (ARM), boot time from
/// `/proc/stat`. Linux has no unprivileged thermal state comparable to
/// macOS's, so it stays `None`.
pub fn host_identity() -> crate::host::HostIdentity {
    use crate::host;
    let mut notes = Vec::new();
    let hardware_model = ["/sys/class/dmi/id/product_name", "/proc/device-tree/model"]
        .iter()
        .find_map(|p| std::fs::read(p).ok().and_then(|b| host::c_string(&b)));
    if hardware_model.is_none() {
        notes.push("no DMI product name or device-tree model readable".into());
    }
    let boot_time_unix_s = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| host::proc_stat_btime(&t));
    if boot_time_unix_s.is_none() {
        notes.push("no btime line in /proc/stat".into());
    }
    notes.push("thermal state: not read on Linux".into());
    host::HostIdentity {
        hardware_model,
        boot_time_unix_s,
        thermal_state: None,
        notes,
    }
}

const KIB: u64 = 1024;

/// memqual's Linux footprint analogue: anonymous + shmem resident + swapped.
fn footprint(anon: Option<u64>, shmem: Option<u64>, swap: Option<u64>) -> Option<u64> {
    Some(anon? + shmem? + swap.unwrap_or(0))
}

fn proc_err(path: impl Into<PathBuf>, e: procfs::ProcError) -> SamplerError {
    let path = path.into();
    match e {
        procfs::ProcError::NotFound(_) => SamplerError::Read {
            path,
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        },
        other => SamplerError::Parse {
            path,
            reason: other.to_string(),
        },
    }
}

/// Status fields in bytes; `None` when a field is absent (a zombie has no mm).
struct StatusBytes {
    rss: Option<u64>,
    hwm: Option<u64>,
    anon: Option<u64>,
    file: Option<u64>,
    shmem: Option<u64>,
    swap: Option<u64>,
    size: Option<u64>,
}

impl StatusBytes {
    fn from(s: &Status) -> Self {
        let b = |v: Option<u64>| v.map(|kib| kib * KIB);
        StatusBytes {
            rss: b(s.vmrss),
            hwm: b(s.vmhwm),
            anon: b(s.rssanon),
            file: b(s.rssfile),
            shmem: b(s.rssshmem),
            swap: b(s.vmswap),
            size: b(s.vmsize),
        }
    }

    fn footprint(&self) -> Option<u64> {
        footprint(self.anon, self.shmem, self.swap)
    }
}

/// Read the calling process's memory from `/proc/self/status` (does not reset the peak).
/// Fails when the file cannot be read or parsed or has no `VmRSS` line.
pub fn snapshot_self() -> Result<TaskMemory, SamplerError> {
    let path = "/proc/self/status";
    let me = Process::myself().map_err(|e| proc_err(path, e))?;
    let s = StatusBytes::from(&me.status().map_err(|e| proc_err(path, e))?);
    let resident_bytes = s.rss.ok_or_else(|| SamplerError::Parse {
        path: path.into(),
        reason: "no VmRSS line".into(),
    })?;
    Ok(TaskMemory {
        resident_bytes,
        resident_peak_bytes: s.hwm,
        footprint_bytes: s.footprint(),
        footprint_peak_bytes: None,
        compressed_bytes: None,
        swap_bytes: s.swap,
        virtual_bytes: s.size.unwrap_or(0),
        rss_anon_bytes: s.anon,
        rss_file_bytes: s.file,
        rss_shmem_bytes: s.shmem,
        peak_reset: None,
        device_bytes: None,
    })
}

/// Reset `VmHWM` to the current RSS by writing 5 to `/proc/self/clear_refs`: `Some(true)`
/// when the write succeeded, `Some(false)` when it failed.
pub fn reset_peak_self() -> Option<bool> {
    Some(std::fs::write("/proc/self/clear_refs", b"5").is_ok())
}

/// Reads one process's memory each tick from kept-open `status` and `statm`.
pub struct ProcessProbe {
    pid: i32,
    status: ProcFile,
    statm: ProcFile,
    buf: ReadBuf,
}

const STATUS_KEYS: [&[u8]; 7] = [
    b"VmRSS",
    b"VmHWM",
    b"RssAnon",
    b"RssFile",
    b"RssShmem",
    b"VmSwap",
    b"VmSize",
];

/// The process tick, as a pointer to the code [`procfile::prefetch_code`] warms.
type SampleFn = fn(&mut ProcessProbe, &mut SeriesRow) -> Result<(), SamplerError>;

/// How much of its code the process tick prefetches: its size in a release
/// build (`nm -S` of the tick_floor bench: 3.0 KiB), rounded up so that a
/// somewhat larger build is still covered; a span past the end only warms
/// whatever code follows. The system tick prefetches nothing: warming its
/// code (and `read`'s and `fill_meminfo`'s) moved its 1.10 not at all.
const PROCESS_TICK_CODE: usize = 4 << 10;

impl ProcessProbe {
    /// Open `/proc/<pid>/status` and `statm` once, to be re-read every tick; `ProcessGone`
    /// when they cannot be opened.
    pub fn new(pid: i32) -> Result<Self, SamplerError> {
        let gone = |_| SamplerError::ProcessGone { pid };
        let [status, statm] = Self::files(pid);
        Ok(ProcessProbe {
            pid,
            status: ProcFile::open(status).map_err(gone)?,
            statm: ProcFile::open(statm).map_err(gone)?,
            buf: ReadBuf::default(),
        })
    }

    /// The files a tick reads for process `pid`, in the order it reads them.
    pub fn files(pid: i32) -> [String; 2] {
        [format!("/proc/{pid}/status"), format!("/proc/{pid}/statm")]
    }

    /// Fill the process fields of `row`; leaves them `None` and returns an
    /// error when the process is gone or has no memory any more (a zombie).
    // Never inlined: the code it prefetches must be the code that runs.
    #[inline(never)]
    pub fn sample(&mut self, row: &mut SeriesRow) -> Result<(), SamplerError> {
        let code: SampleFn = Self::sample;
        procfile::prefetch_code(code as *const u8, PROCESS_TICK_CODE);
        let pid = self.pid;
        let gone = |_| SamplerError::ProcessGone { pid };
        let mut v = [None; STATUS_KEYS.len()];
        procfile::scan_keys(
            self.status.read(&mut self.buf).map_err(gone)?,
            b':',
            &STATUS_KEYS,
            &mut v,
        );
        let [rss, hwm, anon, file, shmem, swap, size] = v.map(|kib| kib.map(|k| k * KIB));
        // A zombie still has a status file, but no memory lines. (Built
        // only when needed: `ok_or` would build the error and run its drop
        // glue every tick, one more function met cold after each gap.)
        let Some(rss) = rss else {
            return Err(SamplerError::ProcessGone { pid });
        };
        let statm = self.statm.read(&mut self.buf).map_err(gone)?;
        let [_size, resident, shared] = procfile::leading_fields(statm);
        row.resident_bytes = Some(rss);
        row.resident_peak_bytes = hwm;
        row.footprint_bytes = footprint(anon, shmem, swap);
        row.swap_bytes = swap;
        row.virtual_bytes = size;
        row.rss_anon_bytes = anon;
        row.rss_file_bytes = file;
        row.rss_shmem_bytes = shmem;
        row.statm_resident_pages = resident;
        row.statm_shared_pages = shared;
        Ok(())
    }
}

const MEMINFO_KEYS: [&[u8]; 11] = [
    b"MemTotal",
    b"MemAvailable",
    b"MemFree",
    b"Cached",
    b"Shmem",
    b"SwapTotal",
    b"SwapFree",
    b"Unevictable",
    b"Mlocked",
    b"Zswap",
    b"Zswapped",
];
const VMSTAT_KEYS: [&[u8]; 4] = [b"pgpgin", b"pgpgout", b"pswpin", b"pswpout"];

const MEMINFO: &str = "/proc/meminfo";
const VMSTAT: &str = "/proc/vmstat";
const PRESSURE: &str = "/proc/pressure/memory";

/// The files a system tick reads, in the order it reads them (PSI may be absent).
pub const SYSTEM_FILES: [&str; 3] = [MEMINFO, VMSTAT, PRESSURE];

/// The current text of a kept-open file; a file that could not be opened is an error.
fn read<'a>(
    file: &Option<ProcFile>,
    path: &str,
    buf: &'a mut ReadBuf,
) -> Result<&'a [u8], SamplerError> {
    let err = |source| SamplerError::Read {
        path: path.into(),
        source,
    };
    match file {
        Some(f) => f.read(buf).map_err(err),
        None => Err(err(std::io::Error::from(std::io::ErrorKind::NotFound))),
    }
}

/// The `/proc/meminfo` fields of a series row, from the file's text.
fn fill_meminfo(text: &[u8], row: &mut SeriesRow) {
    let mut v = [None; MEMINFO_KEYS.len()];
    procfile::scan_keys(text, b':', &MEMINFO_KEYS, &mut v);
    let [
        total,
        available,
        free,
        cached,
        shmem,
        swap_total,
        swap_free,
        unevictable,
        mlocked,
        zswap,
        zswapped,
    ] = v.map(|kib| kib.map(|k| k * KIB));
    row.sys_total_bytes = total;
    row.sys_available_bytes = available;
    row.sys_free_bytes = free;
    row.sys_cached_bytes = cached;
    row.sys_shmem_bytes = shmem;
    row.sys_swap_total_bytes = swap_total;
    row.sys_unevictable_bytes = unevictable;
    row.sys_mlocked_bytes = mlocked;
    row.sys_zswap_bytes = zswap;
    row.sys_zswapped_bytes = zswapped;
    row.sys_swap_used_bytes = swap_total.zip(swap_free).map(|(t, f)| t.saturating_sub(f));
}

/// `/proc/meminfo` alone, read once into a fresh row: what a marker needs
/// of the system (its held-memory counts), without the tick's other files.
pub fn meminfo_row() -> Result<SeriesRow, SamplerError> {
    let text = std::fs::read(MEMINFO).map_err(|source| SamplerError::Read {
        path: MEMINFO.into(),
        source,
    })?;
    let mut row = SeriesRow::default();
    fill_meminfo(&text, &mut row);
    Ok(row)
}

/// Reads system-wide memory each tick from kept-open `/proc` files.
pub struct SystemProbe {
    meminfo: Option<ProcFile>,
    vmstat: Option<ProcFile>,
    pressure: Option<ProcFile>,
    buf: ReadBuf,
}

impl Default for SystemProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemProbe {
    /// Open `/proc/meminfo`, `/proc/vmstat` and `/proc/pressure/memory`; a file that cannot
    /// be opened is reported by each `sample` (missing PSI is not an error).
    pub fn new() -> Self {
        SystemProbe {
            meminfo: ProcFile::open(MEMINFO).ok(),
            vmstat: ProcFile::open(VMSTAT).ok(),
            pressure: ProcFile::open(PRESSURE).ok(),
            buf: ReadBuf::default(),
        }
    }

    /// Fill the system fields of `row`. A file that cannot be read leaves
    /// its fields `None` and is reported in the error; the others are still read.
    pub fn sample(&mut self, row: &mut SeriesRow) -> Result<(), SamplerError> {
        let mut first_err = None;
        match read(&self.meminfo, MEMINFO, &mut self.buf) {
            Ok(text) => fill_meminfo(text, row),
            Err(e) => first_err = first_err.or(Some(e)),
        }
        match read(&self.vmstat, VMSTAT, &mut self.buf) {
            Ok(text) => {
                let mut v = [None; VMSTAT_KEYS.len()];
                procfile::scan_keys(text, b' ', &VMSTAT_KEYS, &mut v);
                [
                    row.sys_pgpgin,
                    row.sys_pgpgout,
                    row.sys_pswpin,
                    row.sys_pswpout,
                ] = v;
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
        // Absent on kernels built without PSI: its fields stay None, no error.
        if self.pressure.is_some() {
            match read(&self.pressure, PRESSURE, &mut self.buf) {
                Ok(text) => {
                    let (some, full) = procfile::parse_psi(text);
                    row.sys_psi_some_avg10 = some.map(|p| p.avg10);
                    row.sys_psi_some_total_us = some.map(|p| p.total_us);
                    row.sys_psi_full_avg10 = full.map(|p| p.avg10);
                    row.sys_psi_full_total_us = full.map(|p| p.total_us);
                }
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_session_is_the_kernels_boot_id() {
        let id = boot_session_id().expect("Linux has a boot id");
        // A UUID: 8-4-4-4-12 hex digits, as the kernel writes it.
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(
            id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
            "{id}"
        );
        let raw = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert_eq!(raw.trim_end(), id);
    }

    #[test]
    fn probe_reads_own_process_like_the_snapshot() {
        let mut probe = ProcessProbe::new(std::process::id() as i32).unwrap();
        let mut row = SeriesRow::default();
        probe.sample(&mut row).unwrap();
        let snap = snapshot_self().unwrap();
        let rss = row.resident_bytes.unwrap();
        // Same process, two reads microseconds apart: within 4 MiB.
        assert!(
            rss.abs_diff(snap.resident_bytes) < 4 << 20,
            "{rss} vs {}",
            snap.resident_bytes
        );
        // statm's resident is in pages and counts the same thing as VmRSS.
        let page = crate::page_size_bytes();
        let statm_rss = row.statm_resident_pages.unwrap() * page;
        assert!(statm_rss.abs_diff(rss) < 4 << 20);
    }

    #[test]
    fn system_probe_reads_meminfo_vmstat_and_psi() {
        let mut row = SeriesRow::default();
        let mut sys = SystemProbe::new();
        let res = sys.sample(&mut row);
        let total = row.sys_total_bytes.unwrap();
        assert!(total > 256 << 20);
        assert!(row.sys_available_bytes.unwrap() <= total);
        assert!(row.sys_pgpgin.is_some() && row.sys_pswpout.is_some());
        if std::path::Path::new("/proc/pressure/memory").exists() {
            res.unwrap();
            assert!(row.sys_psi_some_total_us.is_some());
        }
        // procfs, read independently, is the reference for the hand-written scan.
        use procfs::Current;
        let reference = procfs::Meminfo::current().unwrap();
        assert_eq!(total, reference.mem_total);
        assert_eq!(row.sys_swap_total_bytes, Some(reference.swap_total));
        let vm = procfs::vmstat().unwrap();
        let pgpgin = u64::try_from(vm["pgpgin"]).unwrap();
        assert!(pgpgin >= row.sys_pgpgin.unwrap(), "counters only grow");
    }

    #[test]
    fn a_zombie_has_a_status_file_but_reads_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Opened while it runs or once it has exited: a zombie keeps its /proc entry.
        let mut probe = ProcessProbe::new(pid).unwrap();
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            stat.rsplit(") ").next().and_then(|s| s.chars().next())
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while state() != Some('Z') {
            assert!(std::time::Instant::now() < deadline, "{pid} never exited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut row = SeriesRow::default();
        let err = probe.sample(&mut row).unwrap_err();
        assert!(
            matches!(err, SamplerError::ProcessGone { pid: p } if p == pid),
            "{err}"
        );
        assert_eq!(row.resident_bytes, None);
        child.wait().unwrap();
    }

    #[test]
    fn probe_of_a_missing_pid_says_gone() {
        // PID_MAX_LIMIT is 2^22 on 64-bit Linux, so this pid cannot exist.
        let err = ProcessProbe::new(i32::MAX).err().unwrap();
        assert!(matches!(err, SamplerError::ProcessGone { .. }));
    }
}
