//! The accelerator a `use_gpu` arm decodes on, as ggml sees it.
//!
//! whisper.cpp given `use_gpu` with no usable GPU device runs on the CPU
//! without a word, so this build's devices are read from ggml's own backend
//! registry (the list whisper.cpp picks from) and an arm is refused when no
//! GPU device is there ([`check_gpu_present`]). `--capabilities` lists the
//! devices.
//!
//! On CUDA the context is created before `process_start` ([`CudaContext`]),
//! as the GPU calibration worker does: the primary context, which the CUDA
//! runtime under ggml shares, so its device memory and the driver's host
//! memory are the arm's baseline and `model_loaded` adds only the model.

use serde::Serialize;
use std::ffi::CStr;
use whisper_rs::whisper_rs_sys as sys;
use worker_contract::capabilities::NotRunnable;

/// One device in ggml's backend registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendDevice {
    /// ggml's name (`CPU`, `CUDA0`, `Metal`).
    pub name: String,
    /// What the backend says it is (the GPU's marketing name on CUDA).
    pub description: String,
    /// `cpu`, `gpu`, `igpu` or `accel`.
    pub kind: &'static str,
}

fn text(ptr: *const std::os::raw::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: ggml returns NUL-terminated strings it owns for the life of the
    // registry (the process); checked non-null above.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

fn kind_name(kind: sys::ggml_backend_dev_type) -> &'static str {
    match kind {
        sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_CPU => "cpu",
        sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_GPU => "gpu",
        sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_IGPU => "igpu",
        _ => "accel",
    }
}

/// Every device ggml registered in this build (the CPU always; a CUDA
/// build's GPUs only where the driver finds them).
pub fn backend_devices() -> Vec<BackendDevice> {
    // SAFETY: ggml's registry is built on first use and lives for the
    // process; each index below its count names a device it owns.
    let count = unsafe { sys::ggml_backend_dev_count() };
    (0..count)
        .filter_map(|i| {
            // SAFETY: `i` is below the registry's count (above).
            let dev = unsafe { sys::ggml_backend_dev_get(i) };
            if dev.is_null() {
                return None;
            }
            // SAFETY: `dev` is a registered device (non-null, above).
            let (name, description, kind) = unsafe {
                (
                    sys::ggml_backend_dev_name(dev),
                    sys::ggml_backend_dev_description(dev),
                    sys::ggml_backend_dev_type(dev),
                )
            };
            Some(BackendDevice {
                name: text(name),
                description: text(description),
                kind: kind_name(kind),
            })
        })
        .collect()
}

/// Refuse a `use_gpu` arm when `devices` has no GPU: whisper.cpp would run it
/// on the CPU. `backend` names the build's GPU backend for the message.
pub fn check_gpu_present(
    worker: &str,
    backend: &str,
    devices: &[BackendDevice],
) -> Result<(), NotRunnable> {
    if devices.iter().any(|d| d.kind == "gpu" || d.kind == "igpu") {
        return Ok(());
    }
    let found: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    Err(NotRunnable(format!(
        "use_gpu = true: this {worker} is built with {backend}, but ggml finds no GPU device on \
         this host (it has: {}); whisper.cpp would run the arm on the CPU without saying so. \
         Run it where the GPU and its driver are",
        if found.is_empty() {
            "none".to_string()
        } else {
            found.join(", ")
        }
    )))
}

/// The build's GPU backend, as a word for messages (`None` on a CPU build).
pub fn gpu_backend() -> Option<&'static str> {
    if cfg!(feature = "cuda") {
        Some("CUDA")
    } else if cfg!(feature = "metal") {
        Some("Metal")
    } else {
        None
    }
}

/// The CUDA primary context, held from before `process_start` to the end of
/// the arm.
#[cfg(all(feature = "cuda", target_os = "linux"))]
pub struct CudaContext(#[allow(dead_code)] std::sync::Arc<cudarc::driver::CudaContext>);

#[cfg(all(feature = "cuda", target_os = "linux"))]
impl CudaContext {
    /// Retain device 0's primary context (the one ggml's CUDA runtime uses).
    pub fn retain() -> anyhow::Result<Self> {
        use anyhow::Context;
        cudarc::driver::CudaContext::new(0)
            .map(CudaContext)
            .context("creating the CUDA context on device 0 before process_start")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, kind: &'static str) -> BackendDevice {
        BackendDevice {
            name: name.into(),
            description: String::new(),
            kind,
        }
    }

    #[test]
    fn a_cpu_only_registry_refuses_a_gpu_arm_naming_what_it_found() {
        let e = check_gpu_present("memqual-whisper", "CUDA", &[device("CPU", "cpu")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("built with CUDA"), "{e}");
        assert!(e.contains("(it has: CPU)"), "{e}");
        assert!(e.contains("on the CPU without saying so"), "{e}");
    }

    #[test]
    fn a_registered_gpu_is_enough() {
        let devices = [device("CPU", "cpu"), device("CUDA0", "gpu")];
        assert!(check_gpu_present("w", "CUDA", &devices).is_ok());
        assert!(check_gpu_present("w", "Metal", &[device("MTL0", "igpu")]).is_ok());
        let empty = check_gpu_present("w", "CUDA", &[]).unwrap_err().to_string();
        assert!(empty.contains("(it has: none)"), "{empty}");
    }

    #[test]
    fn this_builds_registry_has_the_cpu() {
        let devices = backend_devices();
        assert!(
            devices.iter().any(|d| d.kind == "cpu" && d.name == "CPU"),
            "{devices:?}"
        );
        if gpu_backend().is_none() {
            assert!(devices.iter().all(|d| d.kind == "cpu"), "{devices:?}");
        }
    }
}
