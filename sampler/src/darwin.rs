//! The pure part of the macOS sampler: structure revisions, decoders and the
//! rules for which kernel fields may be trusted.
//!
//! This module has no platform calls. It builds on every platform so its
//! rules are unit-tested on Linux; the macOS module copies the kernel's
//! structs into the plain types here and lets them fill the records.
//! Facts follow XNU `xnu-11417.101.15` (see the memqual API reference notes).

use crate::darwin_abi::{Fact, Facts, FieldLayout};
use crate::{SamplerError, SeriesRow, TaskMemory};
use std::ffi::CStr;

// `task_info(TASK_VM_INFO)` counts, in `natural_t` (4-byte) units
// (XNU osfmk/mach/task_info.h). The kernel fills the highest revision the
// caller's count allows and returns that revision's count.

/// rev0: up to `compressed_lifetime`.
pub const TASK_VM_INFO_REV0_COUNT: u32 = 36;
/// rev1 adds `phys_footprint`.
pub const TASK_VM_INFO_REV1_COUNT: u32 = 38;
/// rev2 adds `min_address`, `max_address`.
pub const TASK_VM_INFO_REV2_COUNT: u32 = 42;
/// rev3 adds `ledger_phys_footprint_peak` and the other ledgers.
pub const TASK_VM_INFO_REV3_COUNT: u32 = 84;
/// rev4 adds `limit_bytes_remaining`.
pub const TASK_VM_INFO_REV4_COUNT: u32 = 86;
/// rev5 adds `decompressions`.
pub const TASK_VM_INFO_REV5_COUNT: u32 = 87;
/// rev6 adds `ledger_swapins`.
pub const TASK_VM_INFO_REV6_COUNT: u32 = 89;
/// rev7 adds the neural no-footprint total and peak; `sizeof(task_vm_info) / 4`.
pub const TASK_VM_INFO_REV7_COUNT: u32 = 93;

// `host_statistics64(HOST_VM_INFO64)` counts (osfmk/mach/host_info.h).

/// rev0: up to `speculative_count`.
pub const HOST_VM_INFO64_REV0_COUNT: u32 = 24;
/// rev1 adds (de)compressions, swapins/outs, `compressor_page_count`, ...
pub const HOST_VM_INFO64_REV1_COUNT: u32 = 38;
/// rev2 adds `swapped_count` (kernels newer than xnu-11417).
pub const HOST_VM_INFO64_REV2_COUNT: u32 = 40;

/// `kern.memorystatus_vm_pressure_level` values (`NOTE_MEMORYSTATUS_PRESSURE_*`).
pub const PRESSURE_NORMAL: i32 = 1;
/// `NOTE_MEMORYSTATUS_PRESSURE_WARN`: memory is getting scarce.
pub const PRESSURE_WARN: i32 = 2;
/// `NOTE_MEMORYSTATUS_PRESSURE_CRITICAL`: memory is critically scarce.
pub const PRESSURE_CRITICAL: i32 = 4;

/// The system memory pressure level the kernel dispatches to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressureLevel {
    /// Level 1: no memory pressure.
    Normal,
    /// Internally either "warning" or "urgent".
    Warn,
    /// Level 4: critical memory pressure.
    Critical,
}

impl PressureLevel {
    /// Decode the sysctl's integer; `None` for a value the kernel does not define.
    pub fn from_sysctl(v: i32) -> Option<Self> {
        match v {
            PRESSURE_NORMAL => Some(Self::Normal),
            PRESSURE_WARN => Some(Self::Warn),
            PRESSURE_CRITICAL => Some(Self::Critical),
            _ => None,
        }
    }

    /// The sysctl's integer for this level (1, 2 or 4).
    pub fn as_sysctl(self) -> i32 {
        match self {
            Self::Normal => PRESSURE_NORMAL,
            Self::Warn => PRESSURE_WARN,
            Self::Critical => PRESSURE_CRITICAL,
        }
    }

    /// The level's lower-case name (`normal`, `warn`, `critical`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Warn => "warn",
            Self::Critical => "critical",
        }
    }

    /// The name of a raw sysctl value; an undefined one keeps its number.
    pub fn describe(v: i32) -> String {
        Self::from_sysctl(v).map_or_else(|| format!("level {v}"), |l| l.as_str().into())
    }
}

/// The notify(3) name the thermal pressure level is published under
/// (`kOSThermalNotificationPressureLevelName`, libkern/OSThermalNotification.h).
pub const THERMAL_PRESSURE_NOTIFICATION: &str = "com.apple.system.thermalpressurelevel";

/// `OSThermalPressureLevel` as macOS numbers it (libkern/OSThermalNotification.h,
/// the `TARGET_OS_OSX` branch: 0 to 4; iOS spaces its levels by 10 instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThermalPressure {
    /// Level 0 (`kOSThermalPressureLevelNominal`): no thermal pressure.
    Nominal = 0,
    /// Level 1 (`kOSThermalPressureLevelModerate`).
    Moderate = 1,
    /// Level 2 (`kOSThermalPressureLevelHeavy`).
    Heavy = 2,
    /// Level 3 (`kOSThermalPressureLevelTrapping`).
    Trapping = 3,
    /// Level 4 (`kOSThermalPressureLevelSleeping`), the highest macOS defines.
    Sleeping = 4,
}

impl ThermalPressure {
    const ALL: [ThermalPressure; 5] = [
        Self::Nominal,
        Self::Moderate,
        Self::Heavy,
        Self::Trapping,
        Self::Sleeping,
    ];

    /// Decode the notification state; `None` for a value macOS does not define.
    pub fn from_state(v: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_state() == v)
    }

    /// The notification state of this level.
    pub const fn as_state(self) -> u64 {
        self as u64
    }

    /// The level's lower-case name (`nominal` … `sleeping`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nominal => "nominal",
            Self::Moderate => "moderate",
            Self::Heavy => "heavy",
            Self::Trapping => "trapping",
            Self::Sleeping => "sleeping",
        }
    }

    /// The name of a raw state; an undefined one keeps its number.
    pub fn describe(v: u64) -> String {
        Self::from_state(v).map_or_else(|| format!("level {v}"), |l| l.as_str().into())
    }
}

// sysctl names (sys/sysctl.h's name tables) and the sizes of their values.

/// `hw.memsize`: physical memory, a `CTLTYPE_QUAD` (u64).
pub const SYSCTL_HW_MEMSIZE: &CStr = c"hw.memsize";
/// Size in bytes of the `hw.memsize` value.
pub const HW_MEMSIZE_SIZE: usize = 8;
/// `hw.model`: a string such as `Mac14,2`.
pub const SYSCTL_HW_MODEL: &CStr = c"hw.model";
/// `kern.boottime`: a `struct timeval` ([`crate::host::TIMEVAL_SIZE`]).
pub const SYSCTL_KERN_BOOTTIME: &CStr = c"kern.boottime";
/// `vm.swapusage`: a `struct xsw_usage` ([`XSW_USAGE_SIZE`]).
pub const SYSCTL_VM_SWAPUSAGE: &CStr = c"vm.swapusage";
/// The boot session's UUID, a string that changes on every boot. Registered
/// by the kernel at run time, so no header names it and it is not in the facts.
pub const SYSCTL_BOOT_SESSION: &CStr = c"kern.bootsessionuuid";
/// The pressure level ([`PressureLevel`]), an `int`. Registered by the
/// kernel at run time, so no header names it and it is not in the facts.
pub const SYSCTL_PRESSURE_LEVEL: &CStr = c"kern.memorystatus_vm_pressure_level";
/// Size in bytes of the pressure level value (an `int`).
pub const PRESSURE_LEVEL_SIZE: usize = 4;

/// Size of `struct xsw_usage` (the `vm.swapusage` sysctl).
pub const XSW_USAGE_SIZE: usize = 32;

// The fields of `struct xsw_usage` (sys/sysctl.h), as decoded here.
const fn field(offset: usize, size: usize, signed: bool) -> FieldLayout {
    FieldLayout {
        offset,
        size,
        signed,
    }
}
/// `xsu_total`: a u64 at offset 0.
pub const XSU_TOTAL: FieldLayout = field(0, 8, false);
/// `xsu_avail`: a u64 at offset 8.
pub const XSU_AVAIL: FieldLayout = field(8, 8, false);
/// `xsu_used`: a u64 at offset 16.
pub const XSU_USED: FieldLayout = field(16, 8, false);
/// `xsu_pagesize`: a u32 at offset 24.
pub const XSU_PAGESIZE: FieldLayout = field(24, 4, false);
/// `boolean_t` (an `int`).
pub const XSU_ENCRYPTED: FieldLayout = field(28, 4, true);

/// `struct xsw_usage` (XNU bsd/sys/sysctl.h): swap totals in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XswUsage {
    /// Swap space in bytes (`xsu_total`).
    pub total: u64,
    /// Free swap space in bytes (`xsu_avail`).
    pub avail: u64,
    /// The kernel computes this as `total - avail`.
    pub used: u64,
    /// Page size of the swap files in bytes (`xsu_pagesize`).
    pub pagesize: u32,
    /// `boolean_t`, kept raw.
    pub encrypted: i32,
}

impl XswUsage {
    /// Decode the bytes the sysctl returns (every Darwin target is
    /// little-endian). Any length but [`XSW_USAGE_SIZE`] is `None`.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != XSW_USAGE_SIZE {
            return None;
        }
        let u64_at = |f: FieldLayout| Some(u64::from_le_bytes(f.bytes(b)?.try_into().ok()?));
        let u32_at = |f: FieldLayout| Some(u32::from_le_bytes(f.bytes(b)?.try_into().ok()?));
        Some(XswUsage {
            total: u64_at(XSU_TOTAL)?,
            avail: u64_at(XSU_AVAIL)?,
            used: u64_at(XSU_USED)?,
            pagesize: u32_at(XSU_PAGESIZE)?,
            encrypted: i32::from_le_bytes(XSU_ENCRYPTED.bytes(b)?.try_into().ok()?),
        })
    }

    /// The sysctl's bytes for this value (little-endian), the inverse of `from_bytes`.
    pub fn to_bytes(&self) -> [u8; XSW_USAGE_SIZE] {
        let mut b = [0u8; XSW_USAGE_SIZE];
        let mut put = |f: FieldLayout, v: &[u8]| b[f.offset..f.offset + f.size].copy_from_slice(v);
        put(XSU_TOTAL, &self.total.to_le_bytes());
        put(XSU_AVAIL, &self.avail.to_le_bytes());
        put(XSU_USED, &self.used.to_le_bytes());
        put(XSU_PAGESIZE, &self.pagesize.to_le_bytes());
        put(XSU_ENCRYPTED, &self.encrypted.to_le_bytes());
        b
    }
}

/// The lifetime footprint peak from `task_vm_info`: only when the kernel
/// filled rev3 (`count >= 84`) and the ledger value is positive. Never a
/// substitute such as the current footprint.
pub fn footprint_peak(count: u32, ledger_peak: i64) -> Option<u64> {
    if count >= TASK_VM_INFO_REV3_COUNT && ledger_peak > 0 {
        u64::try_from(ledger_peak).ok()
    } else {
        None
    }
}

/// `Pages free` as `vm_stat` prints it: `free_count` includes speculative pages.
pub fn vm_free_bytes(free: u32, speculative: u32, page: u64) -> u64 {
    pages_to_bytes(free.saturating_sub(speculative), page)
}

/// `pages * page` bytes, saturating at `u64::MAX`.
pub fn pages_to_bytes(pages: u32, page: u64) -> u64 {
    u64::from(pages).saturating_mul(page)
}

/// A counter where 0 means "not recorded" (e.g. `ri_lifetime_max_phys_footprint`).
pub fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// The `task_vm_info` fields memqual reads, plus the count the kernel returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskVm {
    /// The count (in `natural_t` words) the kernel returned: which revision it filled.
    pub count: u32,
    /// Virtual address space size in bytes.
    pub virtual_size: u64,
    /// Resident size in bytes.
    pub resident_size: u64,
    /// Lifetime peak resident size in bytes.
    pub resident_size_peak: u64,
    /// Bytes held compressed by the compressor.
    pub compressed: u64,
    /// Physical footprint in bytes (revision 1 and later).
    pub phys_footprint: u64,
    /// Lifetime peak of the footprint ledger in bytes (revision 3 and later; signed as in the header).
    pub ledger_phys_footprint_peak: i64,
}

impl TaskVm {
    /// The normalized snapshot. Fails when the kernel filled less than rev1,
    /// because then `phys_footprint` is not there.
    pub fn task_memory(&self) -> Result<TaskMemory, SamplerError> {
        if self.count < TASK_VM_INFO_REV1_COUNT {
            return Err(SamplerError::Os {
                call: "task_info(TASK_VM_INFO)",
                reason: format!(
                    "kernel returned count {}, below rev1 ({TASK_VM_INFO_REV1_COUNT}): no phys_footprint",
                    self.count
                ),
            });
        }
        Ok(TaskMemory {
            resident_bytes: self.resident_size,
            resident_peak_bytes: Some(self.resident_size_peak),
            footprint_bytes: Some(self.phys_footprint),
            footprint_peak_bytes: footprint_peak(self.count, self.ledger_phys_footprint_peak),
            compressed_bytes: Some(self.compressed),
            swap_bytes: None,
            virtual_bytes: self.virtual_size,
            rss_anon_bytes: None,
            rss_file_bytes: None,
            rss_shmem_bytes: None,
            peak_reset: None,
            device_bytes: None,
        })
    }
}

/// The `rusage_info_v4` memory fields (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RusageMemory {
    /// `ri_phys_footprint`: current physical footprint; 0 once the process has exited.
    pub phys_footprint: u64,
    /// `ri_resident_size`: current resident size.
    pub resident_size: u64,
    /// `ri_wired_size`: current wired memory.
    pub wired_size: u64,
    /// `ri_lifetime_max_phys_footprint`: lifetime footprint peak; 0 when not recorded.
    pub lifetime_max_phys_footprint: u64,
}

impl RusageMemory {
    /// A process that has exited (a zombie) reports `ri_phys_footprint = 0`;
    /// a live process always has some footprint.
    pub fn exited(&self) -> bool {
        self.phys_footprint == 0
    }

    /// Fill the process fields `proc_pid_rusage` provides; the others stay
    /// untouched. An exited process fills nothing and is `ProcessGone`.
    pub fn fill(&self, pid: i32, row: &mut SeriesRow) -> Result<(), SamplerError> {
        if self.exited() {
            return Err(SamplerError::ProcessGone { pid });
        }
        row.footprint_bytes = Some(self.phys_footprint);
        row.resident_bytes = Some(self.resident_size);
        row.footprint_peak_bytes = nonzero(self.lifetime_max_phys_footprint);
        row.wired_bytes = Some(self.wired_size);
        Ok(())
    }
}

/// The `vm_statistics64` fields memqual reads, plus the count the kernel returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmStats {
    /// The count (in `integer_t` words) the kernel returned: which revision it filled.
    pub count: u32,
    /// Free pages, speculative pages included.
    pub free_count: u32,
    /// Speculative pages (read ahead, not yet used).
    pub speculative_count: u32,
    /// Wired pages.
    pub wire_count: u32,
    /// Pages paged in since boot.
    pub pageins: u64,
    /// Pages paged out since boot.
    pub pageouts: u64,
    /// rev1 and later.
    pub compressor_page_count: u32,
    /// Pages swapped in since boot (revision 1 and later).
    pub swapins: u64,
    /// Pages swapped out since boot (revision 1 and later).
    pub swapouts: u64,
    /// What the compressor holds, in uncompressed pages (revision 1 and later).
    pub total_uncompressed_pages_in_compressor: u64,
}

impl VmStats {
    /// Fill the system page fields; rev1 fields only when the kernel filled rev1.
    pub fn fill(&self, page: u64, row: &mut SeriesRow) -> Result<(), SamplerError> {
        if self.count < HOST_VM_INFO64_REV0_COUNT {
            return Err(SamplerError::Os {
                call: "host_statistics64(HOST_VM_INFO64)",
                reason: format!(
                    "kernel returned count {}, below rev0 ({HOST_VM_INFO64_REV0_COUNT})",
                    self.count
                ),
            });
        }
        row.sys_free_bytes = Some(vm_free_bytes(self.free_count, self.speculative_count, page));
        row.sys_wired_bytes = Some(pages_to_bytes(self.wire_count, page));
        row.sys_pageins = Some(self.pageins);
        row.sys_pageouts = Some(self.pageouts);
        if self.count >= HOST_VM_INFO64_REV1_COUNT {
            row.sys_compressor_bytes = Some(pages_to_bytes(self.compressor_page_count, page));
            row.sys_compressor_stored_bytes = Some(
                self.total_uncompressed_pages_in_compressor
                    .saturating_mul(page),
            );
            row.sys_swapins = Some(self.swapins);
            row.sys_swapouts = Some(self.swapouts);
        }
        Ok(())
    }
}

/// When the `host_statistics64` page counters of each tick were really
/// sampled. XNU serves callers that are not platform binaries a cached copy
/// for most calls within each second; a read byte-identical to the previous
/// one is that cache, so its effective time is the last fresh read's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freshness {
    last_fresh_ns: Option<u64>,
    /// Reads that repeated the previous one.
    pub cached_repeats: u64,
}

impl Freshness {
    /// A read at `t_ns`, `repeated` when identical to the previous read;
    /// returns the time its values were actually sampled.
    pub fn observe(&mut self, t_ns: u64, repeated: bool) -> u64 {
        match (repeated, self.last_fresh_ns) {
            (true, Some(fresh)) => {
                self.cached_repeats += 1;
                fresh
            }
            _ => {
                self.last_fresh_ns = Some(t_ns);
                t_ns
            }
        }
    }
}

/// How often XNU refreshes `host_statistics64` for a caller that is not a
/// platform binary: it serves a per-flavor cache within each 1 s window, so a
/// call less than this long after the last one would mostly repeat it.
pub const HOST_STATISTICS_REFRESH_NS: u64 = 1_000_000_000;

/// A reading taken at most once per `interval_ns`: a tick in between reuses
/// the last value, and [`Freshness`] counts it as a cached repeat, so the
/// series records exactly what a kernel-cached read would have recorded while
/// the tick makes no call the kernel would answer from its cache anyway.
#[derive(Debug, Clone)]
pub struct RateLimited<T> {
    interval_ns: u64,
    /// Time of the last successful call and its value.
    last: Option<(u64, T)>,
    /// Effective sample times and cached repeats (reused values and
    /// kernel-cached calls alike).
    pub freshness: Freshness,
    /// Calls actually made (successful or not).
    pub calls: u64,
}

impl<T: Clone> RateLimited<T> {
    /// A reading refreshed at most once per `interval_ns`.
    pub fn new(interval_ns: u64) -> Self {
        RateLimited {
            interval_ns,
            last: None,
            freshness: Freshness::default(),
            calls: 0,
        }
    }

    /// The value for a tick at `t_ns` and the time it was really sampled:
    /// `fetch` is called only when no successful call happened in the last
    /// `interval_ns` (a failed call is retried at the next tick); `same` says
    /// whether a fresh value repeats the previous one (the kernel's own cache).
    pub fn read<E>(
        &mut self,
        t_ns: u64,
        fetch: impl FnOnce() -> Result<T, E>,
        same: impl Fn(&T, &T) -> bool,
    ) -> Result<(T, u64), E> {
        if let Some((called_ns, value)) = &self.last
            && t_ns.saturating_sub(*called_ns) < self.interval_ns
        {
            return Ok((value.clone(), self.freshness.observe(t_ns, true)));
        }
        self.calls += 1;
        let value = fetch()?;
        let repeated = self.last.as_ref().is_some_and(|(_, v)| same(v, &value));
        let sampled_ns = self.freshness.observe(t_ns, repeated);
        self.last = Some((t_ns, value.clone()));
        Ok((value, sampled_ns))
    }
}

/// A sysctl name as a fact's text.
const fn name(c: &'static CStr) -> &'static str {
    match core::str::from_utf8(c.to_bytes()) {
        Ok(s) => s,
        Err(_) => "",
    }
}

/// What this module's (and [`crate::host`]'s) constants and decoders take
/// from Apple's headers, compared with them at build time on every platform
/// (see [`crate::darwin_abi`]).
pub const ABI_FACTS: Facts = &[
    &[
        Fact::number(
            "const.TASK_VM_INFO_REV0_COUNT",
            TASK_VM_INFO_REV0_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV1_COUNT",
            TASK_VM_INFO_REV1_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV2_COUNT",
            TASK_VM_INFO_REV2_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV3_COUNT",
            TASK_VM_INFO_REV3_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV4_COUNT",
            TASK_VM_INFO_REV4_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV5_COUNT",
            TASK_VM_INFO_REV5_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV6_COUNT",
            TASK_VM_INFO_REV6_COUNT as u64,
        ),
        Fact::number(
            "const.TASK_VM_INFO_REV7_COUNT",
            TASK_VM_INFO_REV7_COUNT as u64,
        ),
        Fact::number(
            "const.HOST_VM_INFO64_REV0_COUNT",
            HOST_VM_INFO64_REV0_COUNT as u64,
        ),
        Fact::number(
            "const.HOST_VM_INFO64_REV1_COUNT",
            HOST_VM_INFO64_REV1_COUNT as u64,
        ),
        Fact::number(
            "const.HOST_VM_INFO64_REV2_COUNT",
            HOST_VM_INFO64_REV2_COUNT as u64,
        ),
    ],
    &[
        Fact::number(
            "const.DISPATCH_MEMORYPRESSURE_NORMAL",
            PRESSURE_NORMAL as u64,
        ),
        Fact::number("const.DISPATCH_MEMORYPRESSURE_WARN", PRESSURE_WARN as u64),
        Fact::number(
            "const.DISPATCH_MEMORYPRESSURE_CRITICAL",
            PRESSURE_CRITICAL as u64,
        ),
    ],
    &[
        Fact::number(
            "const.kOSThermalPressureLevelNominal",
            ThermalPressure::Nominal.as_state(),
        ),
        Fact::number(
            "const.kOSThermalPressureLevelModerate",
            ThermalPressure::Moderate.as_state(),
        ),
        Fact::number(
            "const.kOSThermalPressureLevelHeavy",
            ThermalPressure::Heavy.as_state(),
        ),
        Fact::number(
            "const.kOSThermalPressureLevelTrapping",
            ThermalPressure::Trapping.as_state(),
        ),
        Fact::number(
            "const.kOSThermalPressureLevelSleeping",
            ThermalPressure::Sleeping.as_state(),
        ),
    ],
    &[
        Fact::text("sysctl.hw_memsize", name(SYSCTL_HW_MEMSIZE)),
        Fact::number("sysctl.hw_memsize.size", HW_MEMSIZE_SIZE as u64),
        Fact::text("sysctl.hw_model", name(SYSCTL_HW_MODEL)),
        Fact::text("sysctl.kern_boottime", name(SYSCTL_KERN_BOOTTIME)),
        Fact::text("sysctl.vm_swapusage", name(SYSCTL_VM_SWAPUSAGE)),
    ],
    &[Fact::number("xsw_usage.size", XSW_USAGE_SIZE as u64)],
    crate::darwin_abi_layout!("xsw_usage.xsu_total", XSU_TOTAL),
    crate::darwin_abi_layout!("xsw_usage.xsu_avail", XSU_AVAIL),
    crate::darwin_abi_layout!("xsw_usage.xsu_used", XSU_USED),
    crate::darwin_abi_layout!("xsw_usage.xsu_pagesize", XSU_PAGESIZE),
    crate::darwin_abi_layout!("xsw_usage.xsu_encrypted", XSU_ENCRYPTED),
    &[Fact::number(
        "timeval.size",
        crate::host::TIMEVAL_SIZE as u64,
    )],
    crate::darwin_abi_layout!("timeval.tv_sec", crate::host::TIMEVAL_TV_SEC),
];

// These decoding constants agree with Apple's headers on every platform
// (a build error otherwise); macos.rs adds the libc/mach2 layouts.
const _: () = crate::darwin_abi::assert_agrees(&[ABI_FACTS], false);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_peak_needs_rev3_and_a_positive_value() {
        assert_eq!(footprint_peak(83, 5), None);
        assert_eq!(footprint_peak(TASK_VM_INFO_REV2_COUNT, 5), None);
        assert_eq!(footprint_peak(84, 0), None);
        assert_eq!(footprint_peak(84, 5), Some(5));
        assert_eq!(footprint_peak(93, 5), Some(5));
        assert_eq!(footprint_peak(84, -1), None);
        assert_eq!(footprint_peak(93, i64::MIN), None);
        assert_eq!(footprint_peak(93, i64::MAX), Some(i64::MAX as u64));
    }

    #[test]
    fn revision_counts_match_the_header_arithmetic() {
        // task_info.h: each rev is the next one minus the words it added.
        assert_eq!(TASK_VM_INFO_REV6_COUNT, TASK_VM_INFO_REV7_COUNT - 4);
        assert_eq!(TASK_VM_INFO_REV5_COUNT, TASK_VM_INFO_REV6_COUNT - 2);
        assert_eq!(TASK_VM_INFO_REV4_COUNT, TASK_VM_INFO_REV5_COUNT - 1);
        assert_eq!(TASK_VM_INFO_REV3_COUNT, TASK_VM_INFO_REV4_COUNT - 2);
        assert_eq!(TASK_VM_INFO_REV2_COUNT, TASK_VM_INFO_REV3_COUNT - 42);
        assert_eq!(TASK_VM_INFO_REV1_COUNT, TASK_VM_INFO_REV2_COUNT - 4);
        assert_eq!(TASK_VM_INFO_REV0_COUNT, TASK_VM_INFO_REV1_COUNT - 2);
        // sizeof(task_vm_info) = 372 bytes.
        assert_eq!(TASK_VM_INFO_REV7_COUNT * 4, 372);
        // sizeof(vm_statistics64) at rev1 = 152 bytes.
        assert_eq!(HOST_VM_INFO64_REV1_COUNT * 4, 152);
    }

    #[test]
    fn pressure_levels_round_trip_and_reject_unknown_values() {
        for (v, l) in [
            (1, PressureLevel::Normal),
            (2, PressureLevel::Warn),
            (4, PressureLevel::Critical),
        ] {
            assert_eq!(PressureLevel::from_sysctl(v), Some(l));
            assert_eq!(l.as_sysctl(), v);
        }
        for v in [0, 3, 5, -1] {
            assert_eq!(PressureLevel::from_sysctl(v), None);
        }
        assert_eq!(PressureLevel::describe(2), "warn");
        assert_eq!(PressureLevel::describe(3), "level 3");
    }

    #[test]
    fn thermal_pressure_levels_follow_the_macos_header() {
        let named: Vec<String> = (0..=5).map(ThermalPressure::describe).collect();
        assert_eq!(
            named,
            [
                "nominal", "moderate", "heavy", "trapping", "sleeping", "level 5"
            ]
        );
        // The iOS numbering (10, 20, …) is not macOS's.
        assert_eq!(ThermalPressure::from_state(10), None);
        assert_eq!(
            ThermalPressure::from_state(1),
            Some(ThermalPressure::Moderate)
        );
    }

    #[test]
    fn xsw_usage_round_trips_and_rejects_other_lengths() {
        let x = XswUsage {
            total: 12288 << 20,
            avail: 1 << 30,
            used: (12288 << 20) - (1 << 30),
            pagesize: 16384,
            encrypted: 1,
        };
        let b = x.to_bytes();
        assert_eq!(XswUsage::from_bytes(&b), Some(x));
        assert_eq!(XswUsage::from_bytes(&b[..31]), None);
        assert_eq!(XswUsage::from_bytes(&[]), None);
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(XswUsage::from_bytes(&long), None);
    }

    #[test]
    fn xsw_usage_decodes_the_documented_offsets() {
        let mut b = [0u8; 32];
        b[0] = 1; // total
        b[8] = 2; // avail
        b[16] = 3; // used
        b[25] = 0x40; // pagesize 0x4000
        b[28..32].copy_from_slice(&(-1i32).to_le_bytes());
        let x = XswUsage::from_bytes(&b).unwrap();
        assert_eq!(
            (x.total, x.avail, x.used, x.pagesize, x.encrypted),
            (1, 2, 3, 16384, -1)
        );
    }

    #[test]
    fn free_bytes_exclude_speculative_pages() {
        assert_eq!(vm_free_bytes(100, 30, 16384), 70 * 16384);
        assert_eq!(vm_free_bytes(10, 30, 4096), 0, "never underflows");
        assert_eq!(pages_to_bytes(u32::MAX, u64::MAX), u64::MAX, "saturates");
        assert_eq!(nonzero(0), None);
        assert_eq!(nonzero(7), Some(7));
    }

    fn task_vm(count: u32) -> TaskVm {
        TaskVm {
            count,
            virtual_size: 400 << 30,
            resident_size: 30 << 20,
            resident_size_peak: 50 << 20,
            compressed: 1 << 20,
            phys_footprint: 20 << 20,
            ledger_phys_footprint_peak: 40 << 20,
        }
    }

    #[test]
    fn task_vm_below_rev1_is_refused() {
        for count in [0, TASK_VM_INFO_REV0_COUNT, TASK_VM_INFO_REV1_COUNT - 1] {
            assert!(matches!(
                task_vm(count).task_memory(),
                Err(SamplerError::Os { .. })
            ));
        }
    }

    #[test]
    fn task_vm_maps_fields_and_gates_the_peak_on_rev3() {
        let m = task_vm(TASK_VM_INFO_REV2_COUNT).task_memory().unwrap();
        assert_eq!(m.resident_bytes, 30 << 20);
        assert_eq!(m.resident_peak_bytes, Some(50 << 20));
        assert_eq!(m.footprint_bytes, Some(20 << 20));
        assert_eq!(m.footprint_peak_bytes, None, "rev2 has no ledger peak");
        assert_eq!(m.compressed_bytes, Some(1 << 20));
        assert_eq!(m.virtual_bytes, 400 << 30);
        assert_eq!(
            (
                m.swap_bytes,
                m.rss_anon_bytes,
                m.rss_file_bytes,
                m.rss_shmem_bytes
            ),
            (None, None, None, None)
        );
        assert_eq!(m.peak_reset, None);

        let m = task_vm(TASK_VM_INFO_REV3_COUNT).task_memory().unwrap();
        assert_eq!(m.footprint_peak_bytes, Some(40 << 20));
        let zero_peak = TaskVm {
            ledger_phys_footprint_peak: 0,
            ..task_vm(TASK_VM_INFO_REV7_COUNT)
        };
        assert_eq!(
            zero_peak.task_memory().unwrap().footprint_peak_bytes,
            None,
            "not the current value"
        );
    }

    #[test]
    fn rusage_fills_its_fields_and_a_zero_footprint_is_gone() {
        let r = RusageMemory {
            phys_footprint: 20 << 20,
            resident_size: 30 << 20,
            wired_size: 4096,
            lifetime_max_phys_footprint: 40 << 20,
        };
        let mut row = SeriesRow::default();
        r.fill(9, &mut row).unwrap();
        assert_eq!(row.footprint_bytes, Some(20 << 20));
        assert_eq!(row.resident_bytes, Some(30 << 20));
        assert_eq!(row.footprint_peak_bytes, Some(40 << 20));
        assert_eq!(row.wired_bytes, Some(4096));
        assert_eq!(
            (
                row.resident_peak_bytes,
                row.virtual_bytes,
                row.compressed_bytes
            ),
            (None, None, None)
        );

        let mut row = SeriesRow::default();
        RusageMemory {
            lifetime_max_phys_footprint: 0,
            ..r
        }
        .fill(9, &mut row)
        .unwrap();
        assert_eq!(row.footprint_peak_bytes, None);

        let zombie = RusageMemory {
            phys_footprint: 0,
            ..r
        };
        let mut row = SeriesRow::default();
        let err = zombie.fill(9, &mut row).unwrap_err();
        assert!(matches!(err, SamplerError::ProcessGone { pid: 9 }));
        assert_eq!(row, SeriesRow::default(), "a gone process fills nothing");
    }

    fn vm_stats(count: u32) -> VmStats {
        VmStats {
            count,
            free_count: 1000,
            speculative_count: 200,
            wire_count: 300,
            pageins: 11,
            pageouts: 12,
            compressor_page_count: 50,
            swapins: 13,
            swapouts: 14,
            total_uncompressed_pages_in_compressor: 150,
        }
    }

    #[test]
    fn vm_stats_gate_rev1_fields_on_the_returned_count() {
        let page = 16384;
        let mut row = SeriesRow::default();
        vm_stats(HOST_VM_INFO64_REV0_COUNT)
            .fill(page, &mut row)
            .unwrap();
        assert_eq!(row.sys_free_bytes, Some(800 * page));
        assert_eq!(row.sys_wired_bytes, Some(300 * page));
        assert_eq!((row.sys_pageins, row.sys_pageouts), (Some(11), Some(12)));
        assert_eq!(
            (row.sys_compressor_bytes, row.sys_swapins, row.sys_swapouts),
            (None, None, None)
        );
        assert_eq!(row.sys_compressor_stored_bytes, None);

        let mut row = SeriesRow::default();
        vm_stats(HOST_VM_INFO64_REV1_COUNT)
            .fill(page, &mut row)
            .unwrap();
        assert_eq!(row.sys_compressor_bytes, Some(50 * page));
        assert_eq!(row.sys_compressor_stored_bytes, Some(150 * page));
        assert_eq!((row.sys_swapins, row.sys_swapouts), (Some(13), Some(14)));

        let mut row = SeriesRow::default();
        assert!(
            vm_stats(HOST_VM_INFO64_REV0_COUNT - 1)
                .fill(page, &mut row)
                .is_err()
        );
        assert_eq!(row, SeriesRow::default());
    }

    #[test]
    fn host_statistics_is_called_at_most_once_per_refresh_interval() {
        const MS: u64 = 1_000_000;
        let mut vm = RateLimited::<u64>::new(HOST_STATISTICS_REFRESH_NS);
        let mut kernel = 0u64;
        let mut fetch_at = |t: u64, vm: &mut RateLimited<u64>| {
            vm.read(
                t,
                || {
                    kernel += 1;
                    Ok::<_, ()>(kernel * 10)
                },
                |a, b| a == b,
            )
            .unwrap()
        };
        // 50 ms ticks for 3 s from t = 5 s: one call per second, the rest reused.
        let mut rows = Vec::new();
        for k in 0..60 {
            rows.push(fetch_at(5_000 * MS + k * 50 * MS, &mut vm));
        }
        assert_eq!(vm.calls, 3);
        assert_eq!(rows[0], (10, 5_000 * MS));
        assert_eq!(rows[19], (10, 5_000 * MS));
        assert_eq!(rows[20], (20, 6_000 * MS));
        assert_eq!(rows[59], (30, 7_000 * MS));
        assert_eq!(vm.freshness.cached_repeats, 57);
        // A late tick (the sampler skipped) calls at once.
        assert_eq!(fetch_at(9_500 * MS, &mut vm), (40, 9_500 * MS));
        assert_eq!(vm.calls, 4);
    }

    #[test]
    fn a_failed_call_is_retried_and_a_kernel_cached_call_counts_as_a_repeat() {
        let mut vm = RateLimited::<u32>::new(HOST_STATISTICS_REFRESH_NS);
        assert_eq!(
            vm.read(0, || Err::<u32, _>("busy"), |a, b| a == b),
            Err("busy")
        );
        // No value yet: the next tick calls again, even within the interval.
        assert_eq!(vm.read(50, || Ok::<_, ()>(7), |a, b| a == b), Ok((7, 50)));
        assert_eq!(vm.calls, 2);
        // A fresh call returning identical numbers is the kernel's cache.
        let t = 50 + HOST_STATISTICS_REFRESH_NS;
        assert_eq!(vm.read(t, || Ok::<_, ()>(7), |a, b| a == b), Ok((7, 50)));
        assert_eq!(vm.freshness.cached_repeats, 1);
    }

    #[test]
    fn a_repeated_read_carries_the_time_of_the_last_fresh_one() {
        let mut f = Freshness::default();
        // The first read is fresh even if "repeated" (nothing to repeat).
        assert_eq!(f.observe(100, true), 100);
        assert_eq!(f.observe(150, true), 100);
        assert_eq!(f.observe(200, true), 100);
        assert_eq!(f.observe(250, false), 250);
        assert_eq!(f.observe(300, true), 250);
        assert_eq!(f.cached_repeats, 3);
    }
}
