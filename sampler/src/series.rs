//! One row of the external fixed-cadence series.

use serde::{Deserialize, Serialize};

/// One tick of the external sampler: timing, the target process, the system.
///
/// A flat record so it streams straight to CSV. Each field is `None` when the
/// platform does not provide it or the read failed; units are in the names.
/// Process fields follow the normalized core of [`crate::TaskMemory`]; native
/// fields keep the platform's names (`rss_*`, `statm_*`, `sys_pgpg*` on Linux;
/// `wired_bytes`, `sys_pageins` on macOS).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesRow {
    /// Tick index k: the tick was due at `epoch + k * period`.
    pub tick: u64,
    /// Monotonic time in ns the tick was due: `epoch + tick * period`.
    pub deadline_ns: u64,
    /// Monotonic time the sample was started.
    pub t_ns: u64,
    /// `t_ns - deadline_ns`.
    pub lateness_ns: u64,
    /// Ticks skipped just before this one because the sampler fell a whole period behind.
    pub skipped_before: u64,
    /// Wall time spent taking this sample (process + system).
    pub cost_ns: u64,
    /// CPU time the sampler thread spent taking this sample.
    pub cost_cpu_ns: u64,

    // Target process.
    /// Resident bytes of the target: Linux `VmRSS`, macOS `ri_resident_size`.
    pub resident_bytes: Option<u64>,
    /// Linux `VmHWM` of the target in bytes (since its last peak reset); `None` on macOS.
    pub resident_peak_bytes: Option<u64>,
    /// Footprint bytes of the target: Linux `RssAnon + RssShmem + VmSwap`, macOS `ri_phys_footprint`.
    pub footprint_bytes: Option<u64>,
    /// macOS `ri_lifetime_max_phys_footprint` in bytes (`None` when the kernel reports 0);
    /// `None` on Linux.
    pub footprint_peak_bytes: Option<u64>,
    /// Compressed bytes of the target; neither platform's probe reads it, so it is `None`.
    pub compressed_bytes: Option<u64>,
    /// Linux `VmSwap` of the target in bytes; `None` on macOS.
    pub swap_bytes: Option<u64>,
    /// Linux `VmSize` of the target in bytes; `None` on macOS.
    pub virtual_bytes: Option<u64>,
    /// macOS `ri_wired_size` of the target in bytes; `None` on Linux.
    pub wired_bytes: Option<u64>,
    /// Linux `RssAnon` of the target in bytes.
    pub rss_anon_bytes: Option<u64>,
    /// Linux `RssFile` of the target in bytes.
    pub rss_file_bytes: Option<u64>,
    /// Linux `RssShmem` of the target in bytes.
    pub rss_shmem_bytes: Option<u64>,
    /// Resident pages of the target: the second field of Linux `/proc/<pid>/statm`.
    pub statm_resident_pages: Option<u64>,
    /// Shared (file-backed and shmem) resident pages of the target: the third field of Linux
    /// `/proc/<pid>/statm`.
    pub statm_shared_pages: Option<u64>,

    // System.
    /// Physical memory in bytes: Linux `MemTotal`, macOS `hw.memsize`.
    pub sys_total_bytes: Option<u64>,
    /// Linux `MemAvailable` in bytes (the kernel's estimate of memory available without
    /// swapping); `None` on macOS.
    pub sys_available_bytes: Option<u64>,
    /// Free bytes: Linux `MemFree`; macOS `(free_count - speculative_count) * page size`,
    /// the `Pages free` that `vm_stat` prints.
    pub sys_free_bytes: Option<u64>,
    /// Linux `Cached` (page cache) in bytes; `None` on macOS.
    pub sys_cached_bytes: Option<u64>,
    /// Linux `Shmem` (shared memory and tmpfs) in bytes; `None` on macOS.
    pub sys_shmem_bytes: Option<u64>,
    /// macOS wired bytes (`wire_count * page size`); `None` on Linux.
    pub sys_wired_bytes: Option<u64>,
    /// macOS bytes of pages the compressor occupies (`compressor_page_count * page size`,
    /// `vm_statistics64` revision 1 or later); `None` on Linux.
    pub sys_compressor_bytes: Option<u64>,
    /// Swap space in bytes: Linux `SwapTotal`, macOS `vm.swapusage` total.
    pub sys_swap_total_bytes: Option<u64>,
    /// Swap in use in bytes: Linux `SwapTotal - SwapFree`, macOS `vm.swapusage` used.
    pub sys_swap_used_bytes: Option<u64>,
    /// Linux `/proc/vmstat` counters (pgpgin/pgpgout are KiB, pswpin/pswpout pages).
    pub sys_pgpgin: Option<u64>,
    /// Linux `pgpgout`: KiB paged out to block devices since boot.
    pub sys_pgpgout: Option<u64>,
    /// Linux `pswpin`: pages swapped in since boot.
    pub sys_pswpin: Option<u64>,
    /// Linux `pswpout`: pages swapped out since boot.
    pub sys_pswpout: Option<u64>,
    /// macOS `vm_statistics64` counters, in pages.
    pub sys_pageins: Option<u64>,
    /// macOS `pageouts` since boot, in pages.
    pub sys_pageouts: Option<u64>,
    /// macOS `swapins` since boot, in pages (revision 1 or later).
    pub sys_swapins: Option<u64>,
    /// macOS `swapouts` since boot, in pages (revision 1 or later).
    pub sys_swapouts: Option<u64>,
    /// Linux PSI `/proc/pressure/memory`.
    pub sys_psi_some_avg10: Option<f64>,
    /// Linux PSI `some total=`: microseconds since boot in which at least one task stalled on memory.
    pub sys_psi_some_total_us: Option<u64>,
    /// Linux PSI `full avg10=`: percentage of the last 10 s in which all non-idle tasks stalled on memory.
    pub sys_psi_full_avg10: Option<f64>,
    /// Linux PSI `full total=`: microseconds since boot in which all non-idle tasks stalled on memory.
    pub sys_psi_full_total_us: Option<u64>,
    /// macOS `kern.memorystatus_vm_pressure_level` (1 normal, 2 warn, 4 critical).
    pub sys_pressure_level: Option<i32>,
    /// macOS: when the `host_statistics64` page counters of this row were
    /// really sampled. Equal to `t_ns` when fresh; earlier when XNU served a
    /// cached copy (it does for most reads within each second), so those
    /// fields have about 1 s resolution, not the tick's. `None` where the
    /// counters are always fresh (Linux).
    #[serde(default)]
    pub sys_vm_sampled_ns: Option<u64>,
}
