//! Metal's device memory (Apple GPUs), read in process through the
//! bindings generated from Apple's headers (`objc2-metal`).
//!
//! `MTLDevice.currentAllocatedSize` is the memory the process's device
//! object holds for all of its resources. No other process can read it, so
//! it is a marker reading only (`device_bytes` at every marker of a worker
//! that asks for device memory), never a series column: the external
//! sampler says so in the series' `accelerator` line and records what it
//! can read from its own device object, the working-set limit
//! (`recommendedMaxWorkingSetSize`) and unified memory (`hasUnifiedMemory`),
//! as [`MetalDevice`]. On Apple Silicon a shared-storage buffer is the
//! process's own memory, so the series' footprint is the external check of
//! a Metal allocation.
//!
//! Only the reading itself needs a Mac (and the `metal` feature); the words
//! and the choice between them are plain functions, tested everywhere.
//! Elsewhere [`MetalProbe`] cannot be made (it is an empty enum) and
//! [`MetalProbe::open`] says why, as `no accelerator: …`, the words an NVML
//! reading that cannot be made uses.

use serde::{Deserialize, Serialize};

/// The Metal device the process sees (`MTLCreateSystemDefaultDevice`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MetalDevice {
    /// `MTLDevice.name` (e.g. `Apple M2 Pro`).
    pub name: String,
    /// `MTLDevice.hasUnifiedMemory`: the GPU shares the host's memory, so
    /// device memory is also the process's footprint.
    pub unified_memory: bool,
    /// `MTLDevice.recommendedMaxWorkingSetSize`: about how much the device
    /// can hold before performance suffers, in bytes.
    pub working_set_limit_bytes: u64,
}

/// The series' `accelerator` line for a Metal device: what was read, and
/// where the per-process figure is.
pub fn describe(d: &MetalDevice) -> String {
    format!(
        "Metal: {} ({}, working-set limit {} MiB); the worker's own Metal memory \
         (MTLDevice.currentAllocatedSize) is read at its markers, no other process \
         can read it, so the series has no device columns",
        d.name,
        if d.unified_memory {
            "unified memory"
        } else {
            "discrete memory"
        },
        d.working_set_limit_bytes >> 20
    )
}

/// Why Metal cannot be read by this build on this platform, or `None`
/// where it can be tried (macOS with the `metal` feature).
pub const fn unavailable_here() -> Option<&'static str> {
    if !cfg!(target_os = "macos") {
        Some("no accelerator: Metal device memory is read on macOS only")
    } else if !cfg!(feature = "metal") {
        Some("no accelerator: Metal device memory needs a build with the `metal` feature")
    } else {
        None
    }
}

/// What the markers of a process that asked for device memory carry: the
/// reading, or, when there is none, `None` (the receipt then has no device
/// accounting, never zeros).
pub fn own_allocated_bytes() -> Option<u64> {
    use std::sync::OnceLock;
    static PROBE: OnceLock<Option<MetalProbe>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| MetalProbe::open().ok()).as_ref()?;
    Some(probe.allocated_bytes())
}

#[cfg(all(target_os = "macos", feature = "metal"))]
mod apple {
    use super::MetalDevice;
    use objc2::rc::Retained;
    use objc2::runtime::ProtocolObject;
    use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice};

    /// The process's default Metal device, created once.
    pub struct MetalProbe {
        device: Retained<ProtocolObject<dyn MTLDevice>>,
    }

    impl MetalProbe {
        /// `MTLCreateSystemDefaultDevice`; `Err` in words when there is none.
        pub fn open() -> Result<MetalProbe, String> {
            MTLCreateSystemDefaultDevice()
                .map(|device| MetalProbe { device })
                .ok_or_else(|| {
                    "no accelerator: MTLCreateSystemDefaultDevice returned no device".to_string()
                })
        }

        /// `currentAllocatedSize`: the device memory this process holds, in bytes.
        pub fn allocated_bytes(&self) -> u64 {
            self.device.currentAllocatedSize() as u64
        }

        /// The device's name, working-set limit and unified memory.
        pub fn device(&self) -> MetalDevice {
            MetalDevice {
                name: self.device.name().to_string(),
                unified_memory: self.device.hasUnifiedMemory(),
                working_set_limit_bytes: self.device.recommendedMaxWorkingSetSize(),
            }
        }
    }
}

#[cfg(not(all(target_os = "macos", feature = "metal")))]
mod apple {
    use super::MetalDevice;

    /// No Metal reading in this build: never made.
    pub enum MetalProbe {}

    impl MetalProbe {
        /// Always `Err`, saying why ([`super::unavailable_here`]).
        pub fn open() -> Result<MetalProbe, String> {
            Err(super::unavailable_here()
                .unwrap_or("no accelerator: Metal is not read by this build")
                .to_string())
        }

        /// Cannot be called: no probe exists.
        pub fn allocated_bytes(&self) -> u64 {
            match *self {}
        }

        /// Cannot be called: no probe exists.
        pub fn device(&self) -> MetalDevice {
            match *self {}
        }
    }
}

pub use apple::MetalProbe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accelerator_line_names_the_device_its_limit_and_where_the_reading_is() {
        let d = MetalDevice {
            name: "Apple M2 Pro".into(),
            unified_memory: true,
            working_set_limit_bytes: 22_906_503_168,
        };
        let line = describe(&d);
        assert!(
            line.starts_with("Metal: Apple M2 Pro (unified memory, working-set limit 21845 MiB)"),
            "{line}"
        );
        assert!(line.contains("currentAllocatedSize"), "{line}");
        let discrete = describe(&MetalDevice {
            unified_memory: false,
            ..d
        });
        assert!(discrete.contains("(discrete memory,"), "{discrete}");
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn off_a_mac_metal_is_no_accelerator_in_words_and_markers_get_no_reading() {
        let why = MetalProbe::open().err().expect("no Metal off a Mac");
        assert_eq!(
            why,
            "no accelerator: Metal device memory is read on macOS only"
        );
        assert_eq!(own_allocated_bytes(), None);
    }
}
