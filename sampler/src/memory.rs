//! In-process memory snapshot of the calling process.

use serde::{Deserialize, Serialize};

/// The calling process's memory at one instant.
///
/// The normalized core has one documented definition per platform:
///
/// | field | Linux | macOS |
/// |---|---|---|
/// | `resident_bytes` | `VmRSS` | `task_vm_info.resident_size` |
/// | `resident_peak_bytes` | `VmHWM` (since the last reset, so per phase) | `resident_size_peak` (lifetime) |
/// | `footprint_bytes` | `RssAnon + RssShmem + VmSwap` (dirty memory that cannot be dropped without writing it somewhere) | `phys_footprint` |
/// | `footprint_peak_bytes` | `None`: Linux keeps no such peak | `ledger_phys_footprint_peak` when the kernel returns REV3 and the value is > 0, else `None` |
/// | `compressed_bytes` | `None` | `compressed` |
/// | `swap_bytes` | `VmSwap` | `None` |
///
/// Native Linux fields (`rss_*`) stay under their own names; they are `None` on macOS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskMemory {
    /// Resident set size in bytes now: Linux `VmRSS`, macOS `task_vm_info.resident_size`.
    pub resident_bytes: u64,
    /// Highest resident set size in bytes: Linux `VmHWM` since the last peak reset (so per
    /// phase when markers reset it), macOS `resident_size_peak` over the process's lifetime.
    /// `None` when the kernel did not report it.
    pub resident_peak_bytes: Option<u64>,
    /// Dirty memory in bytes that cannot be dropped without writing it somewhere: macOS
    /// `phys_footprint`; Linux `RssAnon + RssShmem + VmSwap`. `None` when those lines are missing.
    pub footprint_bytes: Option<u64>,
    /// Lifetime peak of the footprint in bytes: macOS `ledger_phys_footprint_peak` when the
    /// kernel filled `task_vm_info` revision 3 and the value is positive. Always `None` on Linux,
    /// which keeps no such peak.
    pub footprint_peak_bytes: Option<u64>,
    /// Bytes held compressed by the macOS compressor (`task_vm_info.compressed`); `None` on Linux.
    pub compressed_bytes: Option<u64>,
    /// Bytes swapped out (Linux `VmSwap`); `None` on macOS and when the line is missing.
    pub swap_bytes: Option<u64>,
    /// Virtual address space size in bytes: Linux `VmSize` (0 when the line is missing), macOS
    /// `task_vm_info.virtual_size`.
    pub virtual_bytes: u64,
    /// Resident anonymous memory in bytes (Linux `RssAnon`); `None` on macOS.
    pub rss_anon_bytes: Option<u64>,
    /// Resident file-backed memory in bytes (Linux `RssFile`); `None` on macOS.
    pub rss_file_bytes: Option<u64>,
    /// Resident shared memory in bytes (Linux `RssShmem`: shmem, tmpfs, shared anonymous
    /// mappings); `None` on macOS.
    pub rss_shmem_bytes: Option<u64>,
    /// Linux: whether the high-water mark was reset right after this snapshot,
    /// so the next snapshot's peak covers only the next phase. `None` where
    /// no reset is attempted (macOS peaks are lifetime values).
    pub peak_reset: Option<bool>,
    /// Accelerator memory the NVIDIA driver attributes to this process (NVML,
    /// summed over devices), when the worker asked its markers to read it and
    /// a device is there; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use crate::snapshot_self;

    #[test]
    fn linux_snapshot_has_consistent_fields() {
        let _lock = crate::OWN_MEMORY_TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let m = snapshot_self().unwrap();
        assert!(m.resident_bytes > 0);
        assert!(m.virtual_bytes >= m.resident_bytes);
        let parts =
            m.rss_anon_bytes.unwrap() + m.rss_file_bytes.unwrap() + m.rss_shmem_bytes.unwrap();
        // VmRSS is defined as the sum of the three (proc.rst); they are read in one pass.
        assert_eq!(parts, m.resident_bytes);
        assert!(m.resident_peak_bytes.unwrap() >= m.resident_bytes);
        assert_eq!(m.footprint_peak_bytes, None, "Linux has no footprint peak");
        assert_eq!(m.compressed_bytes, None);
        assert_eq!(m.peak_reset, None, "a bare snapshot never resets");
    }
}
