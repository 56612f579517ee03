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
    /// The sampler's whole CPU time when this sample started: its tick
    /// thread's (every earlier tick's reads) plus its row writer's (the rows
    /// written so far). The difference between two rows is what sampling
    /// cost over that span. 0 in series written before it was recorded.
    #[serde(default)]
    pub sampler_cpu_ns: u64,

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
    /// macOS bytes the compressor holds, counted uncompressed
    /// (`total_uncompressed_pages_in_compressor * page size`, the `Pages stored in
    /// compressor` of `vm_stat`; revision 1 or later); `None` on Linux.
    #[serde(default)]
    pub sys_compressor_stored_bytes: Option<u64>,
    /// Linux `Unevictable` in bytes (pages reclaim cannot touch: mlocked,
    /// ramfs, pinned); `None` on macOS, whose nearest count is `sys_wired_bytes`.
    #[serde(default)]
    pub sys_unevictable_bytes: Option<u64>,
    /// Linux `Mlocked` in bytes; `None` on macOS.
    #[serde(default)]
    pub sys_mlocked_bytes: Option<u64>,
    /// Linux `Zswap` in bytes: the compressed pool's own size; `None` where the
    /// kernel has no zswap (no `Zswap:` line) and on macOS.
    #[serde(default)]
    pub sys_zswap_bytes: Option<u64>,
    /// Linux `Zswapped` in bytes: what the zswap pool holds, counted
    /// uncompressed; `None` where the kernel has no zswap and on macOS.
    #[serde(default)]
    pub sys_zswapped_bytes: Option<u64>,
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
    /// When this row's system fields were really sampled. Equal to `t_ns`
    /// when fresh; earlier when they repeat an older reading: the sampler
    /// reads the system files once per system period (1 s by default; the
    /// process files every tick), and on macOS XNU also serves most
    /// `host_statistics64` reads within each second from a cache. Those
    /// fields have the system period's resolution, not the tick's. `None` in
    /// series written before the system period existed (Linux then read
    /// them every tick).
    #[serde(default)]
    pub sys_vm_sampled_ns: Option<u64>,

    // Covariates (`covariates`): the host's thermal and power state, read
    // with the system fields and repeated between readings like them.
    /// Linux: the hottest `/sys/class/thermal` zone, millidegrees Celsius;
    /// `None` where no zone is readable (many VMs) and on macOS.
    #[serde(default)]
    pub cov_thermal_max_millicelsius: Option<i64>,
    /// Linux: that zone's `type` (e.g. `x86_pkg_temp`).
    #[serde(default)]
    pub cov_thermal_zone: Option<String>,
    /// Linux: the lowest `scaling_cur_freq` of any CPU, kHz; `None` without cpufreq.
    #[serde(default)]
    pub cov_cpu_freq_min_khz: Option<u64>,
    /// Linux: the highest `scaling_cur_freq` of any CPU, kHz.
    #[serde(default)]
    pub cov_cpu_freq_max_khz: Option<u64>,
    /// macOS: the thermal pressure level (notify(3)
    /// `com.apple.system.thermalpressurelevel`: 0 nominal … 4 sleeping).
    #[serde(default)]
    pub cov_thermal_pressure: Option<u64>,
    /// macOS: the power source `pmset -g batt` names (`AC Power`, `Battery Power`, `UPS Power`).
    #[serde(default)]
    pub cov_power_source: Option<String>,
    /// macOS: low-power mode of the source in use (`pmset -g custom`);
    /// `None` where the Mac has no such setting.
    #[serde(default)]
    pub cov_low_power_mode: Option<bool>,

    // Accelerator (NVIDIA, through NVML): columns only where a device was
    // found when the sampler started, so a host without one writes none.
    /// Device memory the driver attributes to the target process, summed over devices.
    #[serde(default, skip_serializing_if = "DeviceCell::is_absent")]
    pub gpu_worker_bytes: DeviceCell,
    /// Device memory in use on every device (all processes and the driver's own).
    #[serde(default, skip_serializing_if = "DeviceCell::is_absent")]
    pub gpu_used_bytes: DeviceCell,
    /// Device memory installed on every device.
    #[serde(default, skip_serializing_if = "DeviceCell::is_absent")]
    pub gpu_total_bytes: DeviceCell,
    /// Device memory the driver attributes to every other process it lists.
    #[serde(default, skip_serializing_if = "DeviceCell::is_absent")]
    pub gpu_others_bytes: DeviceCell,
}

impl SeriesRow {
    /// Copy every system field (`sys_*`, the sample time included) of
    /// `from`: a tick between system readings repeats the last one.
    pub fn copy_system_from(&mut self, from: &SeriesRow) {
        self.sys_total_bytes = from.sys_total_bytes;
        self.sys_available_bytes = from.sys_available_bytes;
        self.sys_free_bytes = from.sys_free_bytes;
        self.sys_cached_bytes = from.sys_cached_bytes;
        self.sys_shmem_bytes = from.sys_shmem_bytes;
        self.sys_wired_bytes = from.sys_wired_bytes;
        self.sys_compressor_bytes = from.sys_compressor_bytes;
        self.sys_compressor_stored_bytes = from.sys_compressor_stored_bytes;
        self.sys_unevictable_bytes = from.sys_unevictable_bytes;
        self.sys_mlocked_bytes = from.sys_mlocked_bytes;
        self.sys_zswap_bytes = from.sys_zswap_bytes;
        self.sys_zswapped_bytes = from.sys_zswapped_bytes;
        self.sys_swap_total_bytes = from.sys_swap_total_bytes;
        self.sys_swap_used_bytes = from.sys_swap_used_bytes;
        self.sys_pgpgin = from.sys_pgpgin;
        self.sys_pgpgout = from.sys_pgpgout;
        self.sys_pswpin = from.sys_pswpin;
        self.sys_pswpout = from.sys_pswpout;
        self.sys_pageins = from.sys_pageins;
        self.sys_pageouts = from.sys_pageouts;
        self.sys_swapins = from.sys_swapins;
        self.sys_swapouts = from.sys_swapouts;
        self.sys_psi_some_avg10 = from.sys_psi_some_avg10;
        self.sys_psi_some_total_us = from.sys_psi_some_total_us;
        self.sys_psi_full_avg10 = from.sys_psi_full_avg10;
        self.sys_psi_full_total_us = from.sys_psi_full_total_us;
        self.sys_pressure_level = from.sys_pressure_level;
        self.sys_vm_sampled_ns = from.sys_vm_sampled_ns;
        self.cov_thermal_max_millicelsius = from.cov_thermal_max_millicelsius;
        self.cov_thermal_zone.clone_from(&from.cov_thermal_zone);
        self.cov_cpu_freq_min_khz = from.cov_cpu_freq_min_khz;
        self.cov_cpu_freq_max_khz = from.cov_cpu_freq_max_khz;
        self.cov_thermal_pressure = from.cov_thermal_pressure;
        self.cov_power_source.clone_from(&from.cov_power_source);
        self.cov_low_power_mode = from.cov_low_power_mode;
    }
}

/// One device-memory cell of a series row: no column at all (no device on
/// this host), an empty cell (the device was there but this tick's read
/// failed), or bytes. Keeping "no device" apart from "not read" is what lets
/// a host without a GPU write no device columns instead of zeros, while a
/// file with them keeps every row the same width.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeviceCell {
    /// No device on this host: the column is not written.
    #[default]
    Absent,
    /// A device is there, but this tick could not read it: an empty cell.
    Unread,
    /// Bytes read this tick.
    Bytes(u64),
}

impl DeviceCell {
    /// True when the column is not written.
    pub fn is_absent(&self) -> bool {
        matches!(self, DeviceCell::Absent)
    }

    /// The bytes, when read.
    pub fn bytes(&self) -> Option<u64> {
        match self {
            DeviceCell::Bytes(b) => Some(*b),
            _ => None,
        }
    }
}

impl From<Option<u64>> for DeviceCell {
    fn from(v: Option<u64>) -> Self {
        v.map_or(DeviceCell::Unread, DeviceCell::Bytes)
    }
}

impl Serialize for DeviceCell {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.bytes().serialize(s)
    }
}

impl<'de> Deserialize<'de> for DeviceCell {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_of(rows: &[SeriesRow]) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in rows {
            w.serialize(r).unwrap();
        }
        String::from_utf8(w.into_inner().unwrap()).unwrap()
    }

    #[test]
    fn a_row_between_system_readings_repeats_every_system_field() {
        // Every `sys_` column set to 7, whatever its type: a field added
        // without being copied fails here.
        let mut json = serde_json::to_value(SeriesRow::default()).unwrap();
        let map = json.as_object_mut().unwrap();
        let keys: Vec<String> = map
            .keys()
            .filter(|k| k.starts_with("sys_"))
            .cloned()
            .collect();
        assert!(keys.len() >= 28, "{keys:?}");
        for k in &keys {
            map.insert(k.clone(), serde_json::json!(7));
        }
        let system: SeriesRow = serde_json::from_value(json).unwrap();
        let mut row = SeriesRow {
            tick: 3,
            resident_bytes: Some(9),
            ..SeriesRow::default()
        };
        row.copy_system_from(&system);
        let got = serde_json::to_value(&row).unwrap();
        for k in &keys {
            assert_eq!(got[k.as_str()].as_f64(), Some(7.0), "{k} not copied");
        }
        assert_eq!((row.tick, row.resident_bytes), (3, Some(9)));
    }

    #[test]
    fn no_device_writes_no_device_columns() {
        let text = csv_of(&[SeriesRow::default(), SeriesRow::default()]);
        let header = text.lines().next().unwrap();
        assert!(!header.contains("gpu_"), "{header}");
        let back: Vec<SeriesRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back[0].gpu_worker_bytes, DeviceCell::Absent);
    }

    #[test]
    fn an_unread_tick_keeps_the_row_width_and_reads_back_empty() {
        let read = SeriesRow {
            gpu_worker_bytes: DeviceCell::Bytes(4_936_695_808),
            gpu_used_bytes: DeviceCell::Bytes(5_000_000_000),
            gpu_total_bytes: DeviceCell::Bytes(150_754_820_096),
            gpu_others_bytes: DeviceCell::Bytes(0),
            ..SeriesRow::default()
        };
        let unread = SeriesRow {
            gpu_worker_bytes: DeviceCell::Unread,
            gpu_used_bytes: DeviceCell::Unread,
            gpu_total_bytes: DeviceCell::Unread,
            gpu_others_bytes: DeviceCell::Unread,
            ..SeriesRow::default()
        };
        let text = csv_of(&[read.clone(), unread.clone()]);
        let widths: Vec<usize> = text.lines().map(|l| l.split(',').count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
        let back: Vec<SeriesRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, vec![read, unread]);
    }
}
