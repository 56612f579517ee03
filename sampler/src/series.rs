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
    pub resident_bytes: Option<u64>,
    pub resident_peak_bytes: Option<u64>,
    pub footprint_bytes: Option<u64>,
    pub footprint_peak_bytes: Option<u64>,
    pub compressed_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub wired_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub statm_resident_pages: Option<u64>,
    pub statm_shared_pages: Option<u64>,

    // System.
    pub sys_total_bytes: Option<u64>,
    pub sys_available_bytes: Option<u64>,
    pub sys_free_bytes: Option<u64>,
    pub sys_cached_bytes: Option<u64>,
    pub sys_shmem_bytes: Option<u64>,
    pub sys_wired_bytes: Option<u64>,
    pub sys_compressor_bytes: Option<u64>,
    pub sys_swap_total_bytes: Option<u64>,
    pub sys_swap_used_bytes: Option<u64>,
    /// Linux `/proc/vmstat` counters (pgpgin/pgpgout are KiB, pswpin/pswpout pages).
    pub sys_pgpgin: Option<u64>,
    pub sys_pgpgout: Option<u64>,
    pub sys_pswpin: Option<u64>,
    pub sys_pswpout: Option<u64>,
    /// macOS `vm_statistics64` counters, in pages.
    pub sys_pageins: Option<u64>,
    pub sys_pageouts: Option<u64>,
    pub sys_swapins: Option<u64>,
    pub sys_swapouts: Option<u64>,
    /// Linux PSI `/proc/pressure/memory`.
    pub sys_psi_some_avg10: Option<f64>,
    pub sys_psi_some_total_us: Option<u64>,
    pub sys_psi_full_avg10: Option<f64>,
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
