//! The calibration worker's device-memory patterns (`gpu_plateau`,
//! `gpu_leak`, `gpu_spike`): plain `cuMemAlloc` blocks on device 0, every
//! byte written with `cuMemsetD8`, through the CUDA driver API loaded at run
//! time (`cudarc` with dynamic loading, so building needs no CUDA toolkit).
//!
//! Plain allocations, never managed memory: the device's memory is what the
//! patterns claim, and managed memory could be paged to the host.

#[cfg(target_os = "linux")]
pub use cuda::{DeviceBlock, Gpu};
#[cfg(not(target_os = "linux"))]
pub use unsupported::{DeviceBlock, Gpu};

#[cfg(target_os = "linux")]
mod cuda {
    use anyhow::{Context, bail};
    use cudarc::driver::{CudaContext, result, sys};
    use std::sync::Arc;

    /// The CUDA context of device 0, created once for the arm. Creating it
    /// costs device memory of its own (hundreds of MiB on a Hopper card), so the
    /// worker opens it before its first marker: every pattern is measured
    /// above it.
    pub struct Gpu {
        ctx: Arc<CudaContext>,
    }

    impl Gpu {
        /// Loads the CUDA driver and creates a context on device 0. Fails, in
        /// words, where the driver library or a device is missing.
        pub fn open() -> anyhow::Result<Gpu> {
            // SAFETY: only tries to load the driver library by its usual names
            // and drops what it loaded; no CUDA function is called.
            if !unsafe { sys::is_culib_present() } {
                bail!(
                    "the gpu_* calibration patterns need the NVIDIA CUDA driver (libcuda.so.1), \
                 which this host does not have; run this protocol on a host with an NVIDIA GPU"
                );
            }
            let ctx = CudaContext::new(0).context(
                "creating a CUDA context on device 0 for the gpu_* patterns (is a GPU visible?)",
            )?;
            Ok(Gpu { ctx })
        }

        /// The device's name, for the worker's log.
        pub fn name(&self) -> String {
            self.ctx.name().unwrap_or_else(|e| format!("unknown ({e})"))
        }

        /// Allocates `bytes` (at least one) of device memory and writes every byte.
        pub fn block(&self, bytes: u64) -> anyhow::Result<DeviceBlock> {
            let len = usize::try_from(bytes.max(1)).context("device block size does not fit")?;
            self.ctx
                .bind_to_thread()
                .context("binding the CUDA context")?;
            // SAFETY: the context is current on this thread (bound above) and
            // outlives the block, which holds an Arc of it.
            let ptr = unsafe { result::malloc_sync(len) }
                .with_context(|| format!("cuMemAlloc of {bytes} device bytes"))?;
            let block = DeviceBlock {
                ptr,
                len,
                ctx: Arc::clone(&self.ctx),
            };
            // SAFETY: `ptr` is a live allocation of exactly `len` bytes in the
            // current context; the memset is synchronous, so it completes here.
            unsafe { result::memset_d8_sync(ptr, 0xA5, len) }
                .with_context(|| format!("cuMemsetD8 over {bytes} device bytes"))?;
            Ok(block)
        }
    }

    /// Device memory allocated with `cuMemAlloc` and written; freed on drop.
    pub struct DeviceBlock {
        ptr: sys::CUdeviceptr,
        len: usize,
        ctx: Arc<CudaContext>,
    }

    impl DeviceBlock {
        /// Allocated length in bytes.
        pub fn len(&self) -> u64 {
            self.len as u64
        }

        /// Never true: a block holds at least one byte.
        pub fn is_empty(&self) -> bool {
            self.len == 0
        }
    }

    impl Drop for DeviceBlock {
        fn drop(&mut self) {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: `ptr` came from `cuMemAlloc` in this context, which is
                // current and alive (held by the Arc), and is freed exactly once.
                let _ = unsafe { result::free_sync(self.ptr) };
            }
        }
    }
}

/// Elsewhere (macOS has no CUDA driver) the patterns refuse to start.
#[cfg(not(target_os = "linux"))]
mod unsupported {
    /// No CUDA here: [`Gpu::open`] always fails.
    pub struct Gpu;

    impl Gpu {
        /// Always fails: the gpu_* patterns need Linux and the NVIDIA driver.
        pub fn open() -> anyhow::Result<Gpu> {
            anyhow::bail!("the gpu_* calibration patterns need Linux with the NVIDIA CUDA driver")
        }

        /// Never called: `open` always fails.
        pub fn name(&self) -> String {
            String::new()
        }

        /// Never called: `open` always fails.
        pub fn block(&self, _bytes: u64) -> anyhow::Result<DeviceBlock> {
            anyhow::bail!("no CUDA driver on this platform")
        }
    }

    /// Never made on this platform.
    pub struct DeviceBlock;
}
