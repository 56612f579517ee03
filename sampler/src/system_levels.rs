//! The system's held-memory levels at one instant: the counts that no
//! process's own accounting shows (wired and compressor pages on macOS,
//! unevictable, mlocked and zswap pages on Linux). A marker carries them so
//! each phase's change is exact, not rounded to the series' period.

use crate::SeriesRow;
use serde::{Deserialize, Serialize};

/// Held-memory levels in bytes. A field the platform does not have (or this
/// kernel does not report) is `None`, never zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemLevels {
    /// macOS `wire_count` × page size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wired_bytes: Option<u64>,
    /// macOS `compressor_page_count` × page size: what the compressor occupies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressor_bytes: Option<u64>,
    /// macOS `total_uncompressed_pages_in_compressor` × page size: what it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressor_stored_bytes: Option<u64>,
    /// Linux `Unevictable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unevictable_bytes: Option<u64>,
    /// Linux `Mlocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlocked_bytes: Option<u64>,
    /// Linux `Zswap` (the pool's compressed size), where the kernel has zswap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zswap_bytes: Option<u64>,
    /// Linux `Zswapped` (what the pool holds, uncompressed), where the kernel has zswap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zswapped_bytes: Option<u64>,
}

impl SystemLevels {
    /// The levels a series row recorded.
    pub fn from_row(row: &SeriesRow) -> Self {
        SystemLevels {
            wired_bytes: row.sys_wired_bytes,
            compressor_bytes: row.sys_compressor_bytes,
            compressor_stored_bytes: row.sys_compressor_stored_bytes,
            unevictable_bytes: row.sys_unevictable_bytes,
            mlocked_bytes: row.sys_mlocked_bytes,
            zswap_bytes: row.sys_zswap_bytes,
            zswapped_bytes: row.sys_zswapped_bytes,
        }
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        *self == SystemLevels::default()
    }
}

/// The levels now, read the way the external sampler's system probe reads
/// them (`/proc/meminfo`; `host_statistics64`). `None` when the read failed
/// or the platform has none of them.
pub fn read_now() -> Option<SystemLevels> {
    // Linux: `/proc/meminfo` alone; the tick's vmstat and PSI reads would be
    // wasted on the worker's measured path.
    #[cfg(target_os = "linux")]
    let row = crate::platform::meminfo_row().ok()?;
    #[cfg(not(target_os = "linux"))]
    let row = {
        let mut row = SeriesRow::default();
        // A failed part of the read leaves its fields None; what was read counts.
        let _ = crate::SystemProbe::new().sample(&mut row);
        row
    };
    let levels = SystemLevels::from_row(&row);
    (!levels.is_empty()).then_some(levels)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn linux_levels_come_from_meminfo_and_follow_an_mlock() {
        use procfs::Current;
        let reference = procfs::Meminfo::current().unwrap();
        let before = read_now().expect("Linux reports Unevictable and Mlocked");
        // Which lines exist is a property of the kernel: compare presence with procfs.
        assert_eq!(
            before.unevictable_bytes.is_some(),
            reference.unevictable.is_some()
        );
        assert_eq!(before.mlocked_bytes.is_some(), reference.mlocked.is_some());
        assert_eq!(before.zswap_bytes.is_some(), reference.z_swap.is_some());
        assert_eq!(
            before.zswapped_bytes.is_some(),
            reference.z_swapped.is_some()
        );
        assert_eq!(before.wired_bytes, None, "Linux has no wired count");

        // Lock 16 MiB of this process's own memory: Mlocked and Unevictable
        // rise by it. 4 MiB of margin absorbs other processes' locking in the
        // microseconds between the reads (nothing else here locks memory).
        const LEN: usize = 16 << 20;
        let buf = vec![1u8; LEN];
        // SAFETY: `buf` is a live allocation of LEN bytes for both calls.
        let locked = unsafe { libc::mlock(buf.as_ptr().cast(), LEN) };
        assert_eq!(locked, 0, "mlock: {}", std::io::Error::last_os_error());
        let during = read_now().unwrap();
        // SAFETY: as above.
        unsafe { libc::munlock(buf.as_ptr().cast(), LEN) };
        let after = read_now().unwrap();
        let rise = |a: Option<u64>, b: Option<u64>| b.unwrap() as i64 - a.unwrap() as i64;
        let margin = 4 << 20;
        let up = rise(before.mlocked_bytes, during.mlocked_bytes);
        assert!((up - LEN as i64).abs() <= margin, "mlocked rose by {up}");
        let down = rise(during.mlocked_bytes, after.mlocked_bytes);
        assert!(
            (down + LEN as i64).abs() <= margin,
            "mlocked fell by {down}"
        );
        let up = rise(before.unevictable_bytes, during.unevictable_bytes);
        assert!(
            (up - LEN as i64).abs() <= margin,
            "unevictable rose by {up}"
        );
    }
}
