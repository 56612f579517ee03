//! The calibration worker's Metal patterns (`metal_plateau`, `metal_leak`,
//! `metal_spike`, `metal_autorelease`), through the bindings generated from
//! Apple's headers (`objc2-metal`); macOS with the `metal` feature only.
//!
//! A block is one `MTLBuffer` of the asked size in shared storage (on Apple
//! Silicon the CPU and the GPU see the same pages), every byte written by
//! the CPU, so the device's `currentAllocatedSize` and the process's
//! footprint both rise by it. `metal_autorelease` is seed 001's mechanism:
//! a plain thread, which has no autorelease pool of its own, creates
//! command buffers and compute encoders, and each is autoreleased into the
//! thread's implicit pool, which drains only when the thread ends.
//!
//! Elsewhere [`Metal::open`] fails with [`NoMetal`], which the worker turns
//! into NOT_RUNNABLE before its first marker.

/// Why the `metal_*` patterns cannot run here.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoMetal(pub String);

#[cfg(all(target_os = "macos", feature = "metal"))]
pub use apple::{Autorelease, Metal, MetalBlock};
#[cfg(not(all(target_os = "macos", feature = "metal")))]
pub use unsupported::{Autorelease, Metal, MetalBlock};

#[cfg(all(target_os = "macos", feature = "metal"))]
mod apple {
    use super::NoMetal;
    use anyhow::{Context, bail};
    use objc2::rc::Retained;
    use objc2::runtime::ProtocolObject;
    use objc2_metal::{
        MTLBuffer, MTLCommandBuffer, MTLCommandEncoder, MTLCommandQueue,
        MTLCreateSystemDefaultDevice, MTLDevice, MTLResourceOptions,
    };
    use std::sync::mpsc;

    /// The process's default Metal device, opened before the first marker
    /// (the device object and the framework cost memory of their own).
    pub struct Metal {
        device: Retained<ProtocolObject<dyn MTLDevice>>,
    }

    impl Metal {
        /// `MTLCreateSystemDefaultDevice`; [`NoMetal`] when there is none.
        pub fn open() -> Result<Metal, NoMetal> {
            MTLCreateSystemDefaultDevice()
                .map(|device| Metal { device })
                .ok_or_else(|| {
                    NoMetal(
                        "the metal_* calibration patterns need a Metal device, and \
                         MTLCreateSystemDefaultDevice returned none"
                            .into(),
                    )
                })
        }

        /// The device's name, for the worker's log.
        pub fn name(&self) -> String {
            self.device.name().to_string()
        }

        /// A shared-storage buffer of `bytes` (at least one), every byte written.
        pub fn block(&self, bytes: u64) -> anyhow::Result<MetalBlock> {
            let len = usize::try_from(bytes.max(1)).context("Metal buffer size does not fit")?;
            let options = MTLResourceOptions::StorageModeShared
                | MTLResourceOptions::CPUCacheModeDefaultCache;
            let Some(buffer) = self.device.newBufferWithLength_options(len, options) else {
                bail!("newBufferWithLength:options: refused {bytes} bytes");
            };
            if buffer.length() < len {
                bail!(
                    "newBufferWithLength:options: gave {} bytes for {len}",
                    buffer.length()
                );
            }
            // SAFETY: `contents` of a shared-storage buffer is CPU-visible
            // memory of `length()` ≥ `len` bytes, alive while `buffer` is;
            // no GPU work uses the buffer, so the CPU may write all of it.
            unsafe { std::ptr::write_bytes(buffer.contents().as_ptr().cast::<u8>(), 0xA5, len) };
            Ok(MetalBlock { _buffer: buffer })
        }
    }

    /// One written `MTLBuffer`; released on drop.
    pub struct MetalBlock {
        _buffer: Retained<ProtocolObject<dyn MTLBuffer>>,
    }

    /// The poolless thread of `metal_autorelease`: each request sends it a
    /// count; it creates that many command buffers with a compute encoder
    /// each, ends and commits them, and autoreleases both into its
    /// thread's pool, which never drains while the thread lives.
    pub struct Autorelease {
        work: Option<mpsc::Sender<u64>>,
        done: mpsc::Receiver<anyhow::Result<u64>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Autorelease {
        /// Start the thread with its own command queue on `metal`'s device.
        pub fn start(metal: &Metal) -> anyhow::Result<Autorelease> {
            let Some(queue) = metal.device.newCommandQueue() else {
                bail!("newCommandQueue returned no queue");
            };
            let (work, rx) = mpsc::channel::<u64>();
            let (tx, done) = mpsc::channel();
            let thread = std::thread::Builder::new()
                .name("memqual-metal-autorelease".into())
                .spawn(move || {
                    // No autoreleasepool here, on purpose: seed 001.
                    for n in rx {
                        let _ = tx.send(pile_up(&queue, n));
                    }
                })
                .context("starting the metal_autorelease thread")?;
            Ok(Autorelease {
                work: Some(work),
                done,
                thread: Some(thread),
            })
        }

        /// Create `n` command buffers on the thread and wait for it;
        /// returns how many it created (`n`, or an error).
        pub fn request(&self, n: u64) -> anyhow::Result<u64> {
            let Some(work) = &self.work else {
                bail!("the metal_autorelease thread has stopped");
            };
            work.send(n)
                .context("the metal_autorelease thread has ended")?;
            self.done
                .recv()
                .context("the metal_autorelease thread has ended")?
        }
    }

    impl Drop for Autorelease {
        fn drop(&mut self) {
            // The thread ends (and its pool drains) at teardown.
            self.work = None;
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn pile_up(queue: &ProtocolObject<dyn MTLCommandQueue>, n: u64) -> anyhow::Result<u64> {
        for i in 0..n {
            let Some(buffer) = queue.commandBuffer() else {
                bail!("commandBuffer returned none at {i} of {n}");
            };
            let Some(encoder) = buffer.computeCommandEncoder() else {
                bail!("computeCommandEncoder returned none at {i} of {n}");
            };
            encoder.endEncoding();
            buffer.commit();
            // Into the thread's pool, as an Objective-C caller's
            // `[queue commandBuffer]` leaves them: they pile up.
            let _ = Retained::autorelease_ptr(encoder);
            let _ = Retained::autorelease_ptr(buffer);
        }
        Ok(n)
    }
}

#[cfg(not(all(target_os = "macos", feature = "metal")))]
mod unsupported {
    use super::NoMetal;

    /// No Metal in this build: never made.
    pub enum Metal {}

    impl Metal {
        /// Always [`NoMetal`], naming what the patterns need.
        pub fn open() -> Result<Metal, NoMetal> {
            Err(NoMetal(
                if cfg!(target_os = "macos") {
                    "the metal_* calibration patterns need a worker built with the `metal` \
                     feature (cargo build --features runners/metal)"
                } else {
                    "the metal_* calibration patterns need Metal, which only macOS has; \
                     run this protocol on a Mac with a worker built with `metal`"
                }
                .into(),
            ))
        }

        /// Cannot be called: no `Metal` exists.
        pub fn name(&self) -> String {
            match *self {}
        }

        /// Cannot be called: no `Metal` exists.
        pub fn block(&self, _bytes: u64) -> anyhow::Result<MetalBlock> {
            match *self {}
        }
    }

    /// Never made in this build.
    pub enum MetalBlock {}

    /// Never made in this build.
    pub enum Autorelease {}

    // The worker drops these in order, as it drops the real ones.
    impl Drop for Metal {
        fn drop(&mut self) {
            match *self {}
        }
    }

    impl Drop for MetalBlock {
        fn drop(&mut self) {
            match *self {}
        }
    }

    impl Drop for Autorelease {
        fn drop(&mut self) {
            match *self {}
        }
    }

    impl Autorelease {
        /// Cannot be called: no `Metal` exists.
        pub fn start(metal: &Metal) -> anyhow::Result<Autorelease> {
            match *metal {}
        }

        /// Cannot be called: no `Autorelease` exists.
        pub fn request(&self, _n: u64) -> anyhow::Result<u64> {
            match *self {}
        }
    }
}
