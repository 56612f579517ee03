//! Accelerator (NVIDIA GPU) device memory, read through NVML loaded at run
//! time, and the pure reduction of the driver's per-device lists to the
//! four numbers a series row keeps.
//!
//! The library is opened with `dlopen` (the `nvml-wrapper` crate), so the
//! build needs no CUDA toolkit and a host without the NVIDIA driver simply
//! has no device: [`DeviceProbe::open`] says why, once, and the series gets
//! no device columns (never zeros).

use serde::{Deserialize, Serialize};

/// The NVIDIA driver's management library, as the driver installs it.
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// Where the external sampler takes device memory from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceSource {
    /// NVML from the driver's usual library name, if it loads.
    #[default]
    Auto,
    /// No device reading at all (the series gets no device columns).
    Off,
    /// NVML from this library path (tests point it at a missing file).
    Library(std::path::PathBuf),
}

/// One process the driver lists on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceProcess {
    /// Process id as the driver reports it.
    pub pid: u32,
    /// Device memory the driver attributes to it, in bytes; `None` when the
    /// driver reports it as not available.
    pub used_bytes: Option<u64>,
}

/// One device's memory as NVML reports it (`nvmlDeviceGetMemoryInfo` and the
/// compute and graphics process lists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// NVML device index.
    pub index: u32,
    /// Device name (e.g. `NVIDIA H200`).
    pub name: String,
    /// Device memory in use, in bytes (every process and the driver's own).
    pub used_bytes: u64,
    /// Device memory installed, in bytes.
    pub total_bytes: u64,
    /// Processes with a context on the device (compute and graphics; a
    /// process in both lists appears twice).
    pub processes: Vec<DeviceProcess>,
}

/// The four device numbers of one tick, summed over every device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceReading {
    /// Device memory the driver attributes to the sampled process; `Some(0)`
    /// when no device lists it (it holds no context), `None` when a device
    /// lists it without a value.
    pub worker_bytes: Option<u64>,
    /// Device memory in use on all devices.
    pub used_bytes: u64,
    /// Device memory installed on all devices.
    pub total_bytes: u64,
    /// Device memory the driver attributes to every other listed process
    /// (those it gives a value for).
    pub others_bytes: u64,
}

/// Reduce the devices' lists to one reading for `pid`. A pid listed twice on
/// one device (compute and graphics) counts once, with its larger value.
pub fn summarise(pid: u32, devices: &[DeviceMemory]) -> DeviceReading {
    let mut reading = DeviceReading {
        worker_bytes: Some(0),
        ..DeviceReading::default()
    };
    for device in devices {
        reading.used_bytes = reading.used_bytes.saturating_add(device.used_bytes);
        reading.total_bytes = reading.total_bytes.saturating_add(device.total_bytes);
        let mut per_pid: std::collections::BTreeMap<u32, Option<u64>> = Default::default();
        for p in &device.processes {
            let slot = per_pid.entry(p.pid).or_insert(p.used_bytes);
            *slot = match (*slot, p.used_bytes) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        for (listed, used) in per_pid {
            if listed == pid {
                reading.worker_bytes = match (reading.worker_bytes, used) {
                    (Some(sum), Some(v)) => Some(sum.saturating_add(v)),
                    _ => None,
                };
            } else if let Some(v) = used {
                reading.others_bytes = reading.others_bytes.saturating_add(v);
            }
        }
    }
    reading
}

/// Why no device is read, or which devices are.
pub fn describe(devices: &[DeviceMemory], driver: &str) -> String {
    let names: Vec<String> = devices
        .iter()
        .map(|d| format!("{} {} ({} MiB)", d.index, d.name, d.total_bytes >> 20))
        .collect();
    format!(
        "NVML (driver {driver}): {} device(s): {}",
        devices.len(),
        names.join(", ")
    )
}

#[cfg(target_os = "linux")]
mod nvml {
    use super::{DeviceMemory, DeviceProcess, DeviceSource, NVML_LIBRARY};
    use nvml_wrapper::Nvml;
    use nvml_wrapper::enums::device::UsedGpuMemory;
    use nvml_wrapper::struct_wrappers::device::ProcessInfo;

    /// NVML, opened once, with the device count it reported.
    pub struct DeviceProbe {
        nvml: Nvml,
        count: u32,
        driver: String,
    }

    impl DeviceProbe {
        /// Open NVML from `source`; `Err` says, in words, why there is no
        /// device to read (no library, no driver, no device, turned off).
        pub fn open(source: &DeviceSource) -> Result<DeviceProbe, String> {
            let path = match source {
                DeviceSource::Off => return Err("device reading turned off".into()),
                DeviceSource::Auto => std::path::PathBuf::from(NVML_LIBRARY),
                DeviceSource::Library(p) => p.clone(),
            };
            let nvml = Nvml::builder()
                .lib_path(path.as_os_str())
                .init()
                .map_err(|e| format!("no accelerator: NVML from {}: {e}", path.display()))?;
            let count = nvml
                .device_count()
                .map_err(|e| format!("no accelerator: NVML device count: {e}"))?;
            if count == 0 {
                return Err("no accelerator: NVML lists no device".into());
            }
            let driver = nvml
                .sys_driver_version()
                .unwrap_or_else(|e| format!("unknown: {e}"));
            Ok(DeviceProbe {
                nvml,
                count,
                driver,
            })
        }

        /// The driver version NVML reports.
        pub fn driver(&self) -> &str {
            &self.driver
        }

        /// Read every device's memory and process lists.
        pub fn read(&self) -> Result<Vec<DeviceMemory>, String> {
            (0..self.count).map(|i| self.read_one(i)).collect()
        }

        fn read_one(&self, index: u32) -> Result<DeviceMemory, String> {
            let device = self
                .nvml
                .device_by_index(index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            let memory = device
                .memory_info()
                .map_err(|e| format!("NVML device {index} memory info: {e}"))?;
            let compute = device
                .running_compute_processes()
                .map_err(|e| format!("NVML device {index} compute processes: {e}"))?;
            // Graphics contexts are rare on a compute card and some drivers
            // refuse the query; a refusal leaves only the compute list.
            let graphics = device.running_graphics_processes().unwrap_or_default();
            let processes = compute
                .iter()
                .chain(&graphics)
                .map(|p: &ProcessInfo| DeviceProcess {
                    pid: p.pid,
                    used_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    },
                })
                .collect();
            Ok(DeviceMemory {
                index,
                name: device.name().unwrap_or_else(|_| "unknown".into()),
                used_bytes: memory.used,
                total_bytes: memory.total,
                processes,
            })
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod nvml {
    use super::{DeviceMemory, DeviceSource};

    /// No NVML reader on this platform (macOS has no NVIDIA driver).
    pub struct DeviceProbe;

    impl DeviceProbe {
        /// Always `Err`: only Linux reads NVIDIA device memory.
        pub fn open(_source: &DeviceSource) -> Result<DeviceProbe, String> {
            Err("no accelerator: NVML device memory is read on Linux only".into())
        }

        /// Never called: `open` always fails here.
        pub fn driver(&self) -> &str {
            ""
        }

        /// Never called: `open` always fails here.
        pub fn read(&self) -> Result<Vec<DeviceMemory>, String> {
            Ok(Vec::new())
        }
    }
}

pub use nvml::DeviceProbe;

impl DeviceProbe {
    /// The device numbers for `pid`, summed over every device.
    pub fn sample(&self, pid: u32) -> Result<DeviceReading, String> {
        Ok(summarise(pid, &self.read()?))
    }

    /// A one-line description of the devices read (for the receipt).
    pub fn description(&self) -> String {
        match self.read() {
            Ok(devices) => describe(&devices, self.driver()),
            Err(e) => format!("NVML (driver {}): {e}", self.driver()),
        }
    }
}

/// The calling process's own device memory, for in-process markers: on
/// macOS Metal's `currentAllocatedSize` ([`crate::metal`]), elsewhere NVML;
/// either opened once per process on first use; `None` without a device.
#[cfg(target_os = "macos")]
pub fn own_device_bytes() -> Option<u64> {
    crate::metal::own_allocated_bytes()
}

/// The calling process's own device memory, for in-process markers: on
/// macOS Metal's `currentAllocatedSize` ([`crate::metal`]), elsewhere NVML;
/// either opened once per process on first use; `None` without a device.
#[cfg(not(target_os = "macos"))]
pub fn own_device_bytes() -> Option<u64> {
    use std::sync::OnceLock;
    static PROBE: OnceLock<Option<DeviceProbe>> = OnceLock::new();
    let probe = PROBE
        .get_or_init(|| DeviceProbe::open(&DeviceSource::Auto).ok())
        .as_ref()?;
    probe.sample(std::process::id()).ok()?.worker_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(used: u64, procs: &[(u32, Option<u64>)]) -> DeviceMemory {
        DeviceMemory {
            index: 0,
            name: "test".into(),
            used_bytes: used,
            total_bytes: 1000,
            processes: procs
                .iter()
                .map(|&(pid, used_bytes)| DeviceProcess { pid, used_bytes })
                .collect(),
        }
    }

    #[test]
    fn a_pid_listed_twice_counts_once_and_others_are_summed() {
        let d = [
            device(600, &[(7, Some(300)), (7, Some(200)), (9, Some(100))]),
            device(50, &[(9, None), (11, Some(40))]),
        ];
        let r = summarise(7, &d);
        assert_eq!(r.worker_bytes, Some(300));
        assert_eq!(r.used_bytes, 650);
        assert_eq!(r.total_bytes, 2000);
        assert_eq!(r.others_bytes, 140);
    }

    #[test]
    fn an_unlisted_pid_holds_nothing_and_an_unreported_value_is_none() {
        assert_eq!(
            summarise(5, &[device(10, &[(6, Some(3))])]).worker_bytes,
            Some(0)
        );
        assert_eq!(summarise(6, &[device(10, &[(6, None)])]).worker_bytes, None);
    }

    #[test]
    fn a_missing_library_is_no_accelerator_said_in_words() {
        let missing = DeviceSource::Library("/nonexistent/libnvidia-ml.so.1".into());
        let err = DeviceProbe::open(&missing).err().unwrap();
        assert!(err.starts_with("no accelerator"), "{err}");
        assert!(DeviceProbe::open(&DeviceSource::Off).is_err());
    }
}
