//! The calibration worker: the real worker's phases around known allocations.
//!
//! Under a lifecycle (the spec's `lifecycle`) the `plateau` plays the
//! context: freed after every cycle (a `release` marker) and written again
//! in the next request (a `reload` marker); `teardown_leak` keeps a known
//! block at each of those teardowns.

use crate::calibrate_gpu::{DeviceBlock, Gpu};
use crate::calibrate_metal::{Autorelease, Metal, MetalBlock};
use crate::session::WorkerSession;
use anyhow::{Context, bail};
use memmap2::{Mmap, MmapMut, MmapOptions};
use sampler::{Phase, clock};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use worker_contract::bounds::mib_to_bytes;
use worker_contract::{
    ArmSpec, CalibrationResult, CalibrationSpec, LogLevel, MIB, Misbehaviour, RequestResult,
    ResultBody, SamplerSchedule, Spike,
};

/// Worker name sent in `hello` and used as the prefix of its stderr lines.
pub const WORKER_NAME: &str = "memqual-calibrate";
/// Calibration patterns and controls this worker implements, sent in `hello`;
/// an arm's `requires` must be a subset of them.
pub const CAPABILITIES: [&str; 21] = [
    "plateau",
    "heap_plateau",
    "locked",
    "leak",
    "teardown_leak",
    "growth_until_request",
    "steps",
    "shm_file",
    "spike",
    "reserve",
    "file_map",
    "crash_at",
    "misbehave",
    "busy_threads",
    "gpu_plateau",
    "gpu_leak",
    "gpu_spike",
    "metal_plateau",
    "metal_leak",
    "metal_spike",
    "metal_autorelease",
];

/// Anonymous memory with every page written, so all of it is resident and dirty.
pub struct TouchedBlock {
    map: MmapMut,
}

impl TouchedBlock {
    /// Maps `bytes` (at least one byte) of anonymous memory and writes one byte on
    /// every page. Fails when the size does not fit in `usize` or `mmap` fails.
    pub fn new(bytes: u64) -> anyhow::Result<Self> {
        let len = usize::try_from(bytes.max(1)).context("block size does not fit in memory")?;
        let mut map = MmapOptions::new()
            .len(len)
            .map_anon()
            .with_context(|| format!("mmap of {bytes} anonymous bytes"))?;
        let page = sampler::page_size_bytes() as usize;
        for offset in (0..len).step_by(page) {
            map[offset] = 0xA5;
        }
        Ok(TouchedBlock { map })
    }

    /// [`TouchedBlock::new`], then locked in memory (`mlock`) until dropped.
    pub fn locked(bytes: u64) -> anyhow::Result<Self> {
        let block = Self::new(bytes)?;
        block.map.lock().with_context(|| {
            format!(
                "locking {bytes} bytes in memory (mlock); without privilege the limit is \
                 `ulimit -l` (RLIMIT_MEMLOCK)"
            )
        })?;
        Ok(block)
    }

    /// Mapped length in bytes (the requested size, at least 1).
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// True for a zero-length map (never the case: `new` maps at least one byte).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Address space reserved and never touched (`MAP_NORESERVE`, so no commit charge).
pub struct Reservation {
    _map: MmapMut,
}

impl Reservation {
    /// Reserves `bytes` of anonymous address space without touching it. Fails
    /// when the size does not fit in `usize` or `mmap` fails.
    pub fn new(bytes: u64) -> anyhow::Result<Self> {
        let len = usize::try_from(bytes).context("reservation does not fit")?;
        let map = MmapOptions::new()
            .len(len)
            .no_reserve_swap()
            .map_anon()
            .with_context(|| format!("reserving {bytes} bytes of address space"))?;
        Ok(Reservation { _map: map })
    }
}

/// A file written to scratch, mapped read-only and read page by page:
/// clean, file-backed, resident memory.
pub struct MappedFile {
    map: Mmap,
    path: PathBuf,
}

impl MappedFile {
    /// Writes `bytes` of a fixed pattern to `calibration-file-map.bin` in `dir`,
    /// maps it read-only and reads one byte per page so it is resident; the file
    /// is removed on drop. Fails when the file cannot be written, opened or mapped.
    pub fn new(dir: &Path, bytes: u64) -> anyhow::Result<Self> {
        let path = dir.join("calibration-file-map.bin");
        let mut file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let chunk = vec![0x5Au8; MIB as usize];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(MIB) as usize;
            file.write_all(&chunk[..n])
                .with_context(|| format!("writing {}", path.display()))?;
            left -= n as u64;
        }
        // Free the write buffer before mapping so it is no transient peak of its own.
        drop(chunk);
        file.sync_all().ok();
        let file = std::fs::File::open(&path)?;
        // SAFETY: the file is private to this worker's scratch directory and
        // nothing truncates it while the map lives (memmap2's contract).
        let map =
            unsafe { Mmap::map(&file) }.with_context(|| format!("mapping {}", path.display()))?;
        let page = sampler::page_size_bytes() as usize;
        let mut sum = 0u64;
        for offset in (0..map.len()).step_by(page) {
            sum = sum.wrapping_add(u64::from(map[offset]));
        }
        std::hint::black_box(sum);
        Ok(MappedFile { map, path })
    }

    /// Mapped length in bytes (the file's size).
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// True when the mapped file is empty (`bytes` was 0).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A shared-memory file with no path, grown every request and never kept
/// mapped: its pages are shared memory charged to the system, not to this
/// process's resident set. Having no path, it lives exactly as long as the
/// worker and cannot be placed anywhere by a protocol.
struct ShmGrowth {
    file: std::fs::File,
    chunk_bytes: u64,
    grown: u64,
}

impl ShmGrowth {
    /// `requests` chunks of `chunk_bytes` at most (macOS sizes the object once).
    fn new(chunk_bytes: u64, requests: u64) -> anyhow::Result<Self> {
        let total = chunk_bytes
            .checked_mul(requests)
            .context("shm_file: kib_per_request × requests does not fit in 64 bits")?;
        Ok(ShmGrowth {
            file: shm::anonymous(total)?,
            chunk_bytes,
            grown: 0,
        })
    }

    fn grow(&mut self) -> anyhow::Result<()> {
        shm::append(&mut self.file, self.grown, self.chunk_bytes)
            .context("growing the shm_file pattern's shared memory")?;
        self.grown = self.grown.saturating_add(self.chunk_bytes);
        Ok(())
    }
}

/// Linux: `memfd_create` is a tmpfs file without a name (shmem-accounted,
/// like a file in `/dev/shm`); `write` appends pages without mapping them.
#[cfg(target_os = "linux")]
mod shm {
    use anyhow::Context;
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::fs::File;
    use std::io::Write;

    pub fn anonymous(_total: u64) -> anyhow::Result<File> {
        let fd = memfd_create("memqual-calibrate-shm", MFdFlags::MFD_CLOEXEC)
            .context("memfd_create for the shm_file pattern")?;
        Ok(File::from(fd))
    }

    pub fn append(file: &mut File, _offset: u64, bytes: u64) -> anyhow::Result<()> {
        const CHUNK: usize = 1 << 20;
        let block = vec![0x3Cu8; CHUNK];
        let mut left = bytes;
        while left > 0 {
            let n = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

/// macOS: a POSIX shared-memory object unlinked at once (so it has no name
/// left), sized once — XNU lets a shm object be sized only once — and
/// written through a short-lived mapping of the pages a request adds, so
/// they stay with the object and not in this process's mappings.
#[cfg(target_os = "macos")]
mod shm {
    use anyhow::Context;
    use memmap2::MmapOptions;
    use nix::fcntl::OFlag;
    use nix::sys::mman::{shm_open, shm_unlink};
    use nix::sys::stat::Mode;
    use std::fs::File;

    pub fn anonymous(total: u64) -> anyhow::Result<File> {
        // PSHMNAMLEN is 31: keep the name short and unique to this process.
        let name = format!("/mqcal-{}", std::process::id());
        let fd = shm_open(
            name.as_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .with_context(|| format!("shm_open {name}"))?;
        shm_unlink(name.as_str()).with_context(|| format!("shm_unlink {name}"))?;
        let file = File::from(fd);
        file.set_len(total.max(1))
            .context("sizing the shm_file object")?;
        Ok(file)
    }

    pub fn append(file: &mut File, offset: u64, bytes: u64) -> anyhow::Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let page = sampler::page_size_bytes();
        let start = offset / page * page;
        let end = offset
            .checked_add(bytes)
            .context("shm_file offset overflows")?;
        let len = usize::try_from(end - start).context("shm_file chunk does not fit")?;
        // SAFETY: the object is private to this process (its name is gone)
        // and nothing resizes it while the map lives.
        let mut map = unsafe { MmapOptions::new().offset(start).len(len).map_mut(&*file) }
            .context("mapping the shm_file object")?;
        let first = usize::try_from(offset - start).unwrap_or(0);
        for i in (first..len).step_by(page as usize) {
            map[i] = 0x3C;
        }
        Ok(())
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod shm {
    pub fn anonymous(_total: u64) -> anyhow::Result<std::fs::File> {
        anyhow::bail!("the shm_file pattern needs Linux (memfd) or macOS (POSIX shared memory)")
    }

    pub fn append(_: &mut std::fs::File, _: u64, _: u64) -> anyhow::Result<()> {
        anyhow::bail!("the shm_file pattern needs Linux or macOS")
    }
}

/// Spinning threads that keep cores busy while they live.
struct BusyThreads {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl BusyThreads {
    fn start(n: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        BusyThreads { stop, handles }
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn sleep_until(t_ns: u64) {
    let now = clock::monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

/// `ms` milliseconds after `t_ns` (saturating: never wraps into the past).
fn after_ms(t_ns: u64, ms: u64) -> u64 {
    t_ns.saturating_add(ms.saturating_mul(1_000_000))
}

fn leak_bytes_per_request(spec: &CalibrationSpec) -> u64 {
    spec.leak.map_or(0, |l| whole_pages(l.mib_per_request))
}

/// `mib` rounded up to whole pages, in bytes.
fn whole_pages(mib: f64) -> u64 {
    let page = sampler::page_size_bytes();
    // Validated finite and at most 1 TiB, so the cast is exact enough and
    // the rounding cannot overflow.
    let bytes = (mib * MIB as f64).ceil() as u64;
    bytes.div_ceil(page).saturating_mul(page)
}

/// The `heap_plateau`: `bytes` on the heap, allocated here through the
/// global allocator (malloc) and every page written. Never inlined, so a
/// heap profile's stack names this function as the allocating site.
#[inline(never)]
pub fn calibration_heap_plateau(bytes: u64) -> anyhow::Result<Vec<u8>> {
    let len = usize::try_from(bytes).context("heap_plateau does not fit in memory")?;
    let mut block: Vec<u8> = Vec::new();
    block
        .try_reserve_exact(len)
        .with_context(|| format!("allocating {bytes} bytes on the heap"))?;
    block.resize(len, 0);
    let page = sampler::page_size_bytes() as usize;
    for offset in (0..len).step_by(page.max(1)) {
        block[offset] = 0xA5;
    }
    // Keep the writes: the block is read nowhere else.
    std::hint::black_box(&mut block);
    Ok(block)
}

/// Everything the arm holds between `model_loaded` and teardown.
#[derive(Default)]
struct Held {
    plateau: Option<TouchedBlock>,
    _heap_plateau: Option<Vec<u8>>,
    _locked: Option<TouchedBlock>,
    _reserve: Option<Reservation>,
    _file: Option<MappedFile>,
    leaked: Vec<TouchedBlock>,
    shm: Option<ShmGrowth>,
    _gpu_plateau: Option<DeviceBlock>,
    gpu_leaked: Vec<DeviceBlock>,
    _metal_plateau: Option<MetalBlock>,
    metal_leaked: Vec<MetalBlock>,
}

impl Held {
    fn touched_bytes(&self) -> u64 {
        self.plateau.as_ref().map_or(0, TouchedBlock::len)
            + self.leaked.iter().map(TouchedBlock::len).sum::<u64>()
    }
}

/// Run one calibration arm to the end (or to its planned crash).
pub fn run(
    spec: &ArmSpec,
    cal: &CalibrationSpec,
    session: &mut WorkerSession,
) -> anyhow::Result<u64> {
    if let Err(e) = cal.validate() {
        bail!("invalid calibration spec: {e}");
    }
    // Validated sizes are at most 1 TiB, so these conversions cannot fail;
    // they are checked anyway so a missed validation cannot wrap a size.
    let plateau = cal
        .plateau
        .map(|p| mib_to_bytes("plateau.mib", p.mib))
        .transpose()?;
    let heap_plateau = cal
        .heap_plateau
        .map(|p| mib_to_bytes("heap_plateau.mib", p.mib))
        .transpose()?;
    let reserve = cal
        .reserve
        .map(|r| mib_to_bytes("reserve.mib", r.mib))
        .transpose()?;
    let locked = cal
        .locked
        .map(|l| mib_to_bytes("locked.mib", l.mib))
        .transpose()?;
    let file_map = cal
        .file_map
        .map(|f| mib_to_bytes("file_map.mib", f.mib))
        .transpose()?;
    let step_bytes = cal
        .steps
        .as_ref()
        .map(|s| mib_to_bytes("steps.mib", s.mib))
        .transpose()?;
    let spike_bytes = cal
        .spike
        .map(|s| mib_to_bytes("spike.mib", s.mib))
        .transpose()?;
    let shm_chunk = cal
        .shm_file
        .as_ref()
        .map(|f| {
            f.kib_per_request
                .checked_mul(1024)
                .context("shm_file.kib_per_request does not fit in 64 bits of bytes")
        })
        .transpose()?;
    if let Some(l) = spec.lifecycle {
        l.validate()
            .map_err(|e| anyhow::anyhow!("invalid lifecycle: {e}"))?;
    }
    let teardown_leak = match (cal.teardown_leak, spec.lifecycle) {
        (Some(l), Some(_)) => whole_pages(l.mib_per_cycle),
        (Some(_), None) => bail!(
            "teardown_leak keeps memory at each lifecycle teardown, but the arm has no \
             lifecycle (memqual soak with [soak] mode = \"lifecycle\")"
        ),
        (None, _) => 0,
    };
    if cal.spike.is_some_and(|s| s.between_ticks) && spec.sampler.is_none() {
        bail!("spike.between_ticks needs the external sampler's schedule, but the arm has none");
    }
    // The CUDA context costs device memory of its own: created before the
    // first marker, so every gpu_* pattern is measured above it.
    let gpu = if cal.uses_device() {
        let gpu = Gpu::open()?;
        session.read_device_memory();
        session.log(
            LogLevel::Info,
            format!("gpu_* patterns on device 0: {}", gpu.name()),
        )?;
        Some(gpu)
    } else {
        None
    };
    let gpu_block = |mib: f64| -> anyhow::Result<DeviceBlock> {
        let Some(gpu) = &gpu else {
            bail!("a gpu_* pattern ran without a CUDA context");
        };
        // Validated finite and at most 1 TiB: the cast is exact enough.
        gpu.block((mib * MIB as f64).ceil() as u64)
    };
    // Metal's device object likewise, before the first marker; without
    // Metal the arm is not runnable (NoMetal, before any marker).
    let metal = if cal.uses_metal() {
        let metal = Metal::open()?;
        session.read_device_memory();
        // The markers' own reading of the device, opened here, not in the
        // first marker.
        let _ = sampler::metal::own_allocated_bytes();
        session.log(
            LogLevel::Info,
            format!("metal_* patterns on {}", metal.name()),
        )?;
        Some(metal)
    } else {
        None
    };
    let metal_block = |mib: f64| -> anyhow::Result<MetalBlock> {
        let Some(metal) = &metal else {
            bail!("a metal_* pattern ran without a Metal device");
        };
        // Validated finite and at most 1 TiB: the cast is exact enough.
        metal.block((mib * MIB as f64).ceil() as u64)
    };
    let autorelease = match (&metal, cal.metal_autorelease) {
        (Some(metal), Some(_)) => Some(Autorelease::start(metal)?),
        _ => None,
    };
    session.mark(Phase::ProcessStart, None)?;

    // "Load": everything the model-global context would hold.
    let mut held = Held {
        plateau: plateau.map(TouchedBlock::new).transpose()?,
        _heap_plateau: None,
        _locked: locked.map(TouchedBlock::locked).transpose()?,
        _reserve: reserve.map(Reservation::new).transpose()?,
        _file: file_map
            .map(|bytes| MappedFile::new(&spec.scratch_dir, bytes))
            .transpose()?,
        leaked: Vec::new(),
        shm: shm_chunk
            .map(|chunk| ShmGrowth::new(chunk, cal.requests))
            .transpose()?,
        _gpu_plateau: cal
            .gpu_plateau
            .map(|p| gpu_block(p.mib as f64))
            .transpose()?,
        gpu_leaked: Vec::new(),
        _metal_plateau: cal
            .metal_plateau
            .map(|p| metal_block(p.mib as f64))
            .transpose()?,
        metal_leaked: Vec::new(),
    };
    session.mark(Phase::ModelLoaded, None)?;
    // "State": the heap block, from a function allocation attribution can name.
    held._heap_plateau = heap_plateau.map(calibration_heap_plateau).transpose()?;

    if cal.misbehave == Some(Misbehaviour::OutOfOrder) {
        session.mark(Phase::WarmupDone, None)?;
    } else {
        session.mark(Phase::StateReady, None)?;
    }
    match cal.misbehave {
        Some(Misbehaviour::BadJson) => {
            session.channel_mut().send_raw("{\"type\": \"log\", oops")?
        }
        Some(Misbehaviour::UnknownMessage) => session
            .channel_mut()
            .send_raw("{\"type\":\"telemetry\",\"value\":1}")?,
        _ => {}
    }

    for _ in 0..cal.warmup {
        std::thread::sleep(Duration::from_millis(cal.request_ms));
    }
    session.mark(Phase::WarmupDone, None)?;

    let leak_bytes = leak_bytes_per_request(cal);
    // Up to 10000 listed requests, looked up once per request.
    let step_requests: std::collections::BTreeSet<u64> = cal
        .steps
        .as_ref()
        .map(|s| s.at_requests.iter().copied().collect())
        .unwrap_or_default();
    let busy = (cal.busy_threads > 0).then(|| BusyThreads::start(cal.busy_threads));
    let mut spike_attempts = SpikeAttempts::default();
    let mut released = false;
    for request_id in 0..cal.requests {
        session.mark(Phase::RequestBegin, Some(request_id))?;
        let started = clock::monotonic_ns();
        if released {
            // The next cycle's "context load".
            held.plateau = plateau.map(TouchedBlock::new).transpose()?;
            session.mark(Phase::Reload, None)?;
            released = false;
        }
        let leaking = cal
            .growth_until_request
            .is_none_or(|stop| request_id < stop);
        if leak_bytes > 0 && leaking {
            held.leaked.push(TouchedBlock::new(leak_bytes)?);
        }
        if let Some(bytes) = step_bytes
            && step_requests.contains(&request_id)
        {
            held.leaked.push(TouchedBlock::new(bytes)?);
        }
        if let Some(shm) = held.shm.as_mut() {
            shm.grow()?;
        }
        if let Some(leak) = cal.gpu_leak
            && leaking
        {
            held.gpu_leaked.push(gpu_block(leak.mib_per_request)?);
        }
        if let Some(spike) = cal.gpu_spike.filter(|s| s.request == request_id) {
            let block = gpu_block(spike.mib as f64)?;
            std::thread::sleep(Duration::from_millis(spike.hold_ms));
            drop(block);
        }
        if let Some(leak) = cal.metal_leak
            && leaking
        {
            held.metal_leaked.push(metal_block(leak.mib_per_request)?);
        }
        if let Some(spike) = cal.metal_spike.filter(|s| s.request == request_id) {
            let block = metal_block(spike.mib as f64)?;
            std::thread::sleep(Duration::from_millis(spike.hold_ms));
            drop(block);
        }
        if let (Some(a), Some(pattern)) = (&autorelease, cal.metal_autorelease) {
            a.request(pattern.command_buffers_per_request)?;
        }
        let mut result = CalibrationResult {
            held_bytes: 0,
            leaked_bytes: if leaking { leak_bytes } else { 0 },
            spike_bytes: 0,
            spike_resident_ns: None,
            spike_freed_ns: None,
            spike_started_ns: None,
            spike_between_ticks: None,
        };
        if let (Some(spike), Some(bytes)) = (cal.spike, spike_bytes)
            && spike_attempts.due(&spike, request_id)
        {
            let align = spike.between_ticks.then_some(spec.sampler).flatten();
            run_spike(bytes, spike.hold_ms, align, &mut result, session)?;
            spike_attempts.record(&result);
        }
        if cal.crash_at == Some(request_id) {
            session.log(
                LogLevel::Info,
                format!("crash_at: aborting inside request {request_id}"),
            )?;
            std::process::abort();
        }
        sleep_until(after_ms(started, cal.request_ms));
        let latency_ns = clock::monotonic_ns() - started;
        result.held_bytes = held.touched_bytes();
        session.mark(Phase::RequestEnd, Some(request_id))?;
        session.result(RequestResult {
            request_id,
            latency_ns,
            body: ResultBody::Calibration(result),
            timing: None,
        })?;
        session.settle(request_id, spec.settle_ms)?;
        if spec.lifecycle.is_some_and(|l| l.ends_cycle(request_id)) {
            // Teardown: the "context" goes; the teardown leak stays, touched.
            held.plateau = None;
            if teardown_leak > 0 {
                held.leaked.push(TouchedBlock::new(teardown_leak)?);
            }
            session.mark(Phase::Release, None)?;
            released = true;
        }
    }
    drop(busy);

    std::thread::sleep(Duration::from_millis(cal.idle_ms));
    session.mark(Phase::IdleEnd, None)?;
    drop(held);
    drop(gpu);
    drop(autorelease);
    drop(metal);
    session.mark(Phase::TeardownDone, None)?;
    Ok(cal.requests)
}

/// Which requests spike. A plain spike runs once, in `spike.request`. A
/// `between_ticks` spike that still overlapped the next tick (the block took
/// longer to build than the gap) proves nothing about the series, so it runs
/// again in the next request, each in its own peak window, until one lies
/// between two ticks or the requests run out; the checks judge the last.
#[derive(Default)]
struct SpikeAttempts {
    fitted: bool,
}

impl SpikeAttempts {
    fn due(&self, spike: &Spike, request_id: u64) -> bool {
        if spike.between_ticks {
            request_id >= spike.request && !self.fitted
        } else {
            request_id == spike.request
        }
    }

    fn record(&mut self, result: &CalibrationResult) {
        self.fitted |= result.spike_between_ticks == Some(true);
    }
}

fn run_spike(
    bytes: u64,
    hold_ms: u64,
    align: Option<SamplerSchedule>,
    result: &mut CalibrationResult,
    session: &mut WorkerSession,
) -> anyhow::Result<()> {
    // Start a quarter of a period after a tick, so the spike sits between
    // ticks. The sampler's read for that tick starts late and takes time on a
    // loaded host: a tenth of a period (100 ms at 1 s) was seen overlapped by
    // it; a quarter leaves it more room and the block three quarters.
    let next_tick = align.map(|s| {
        let tick = s.next_tick_after(clock::monotonic_ns());
        sleep_until(tick.saturating_add(s.period_ns / 4));
        tick.saturating_add(s.period_ns)
    });
    result.spike_started_ns = Some(clock::monotonic_ns());
    let block = TouchedBlock::new(bytes)?;
    result.spike_resident_ns = Some(clock::monotonic_ns());
    std::thread::sleep(Duration::from_millis(hold_ms));
    drop(block);
    let freed = clock::monotonic_ns();
    result.spike_freed_ns = Some(freed);
    result.spike_bytes = bytes;
    if let Some(deadline) = next_tick {
        result.spike_between_ticks = Some(freed < deadline);
        if freed >= deadline {
            session.log(
                LogLevel::Warn,
                format!(
                    "spike.between_ticks: the spike ended {} µs after the next tick was due \
                     (building the block took {} ms); trying again in the next request, \
                     if any (a longer sampling period leaves the spike more room)",
                    (freed - deadline) / 1000,
                    (result.spike_resident_ns.unwrap_or(freed)
                        - result.spike_started_ns.unwrap_or(freed))
                        / 1_000_000
                ),
            )?;
        }
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn touched_block_is_resident_and_reservation_is_not() {
        let _lock = crate::memory_test_lock();
        let before = sampler::snapshot_self().unwrap();
        let block = TouchedBlock::new(64 * MIB).unwrap();
        let reserve = Reservation::new(512 * MIB).unwrap();
        let after = sampler::snapshot_self().unwrap();
        let rss_growth = after.resident_bytes as i64 - before.resident_bytes as i64;
        assert!(
            (rss_growth - (64 * MIB) as i64).abs() < (4 * MIB) as i64,
            "{rss_growth}"
        );
        // 576 MiB mapped; other test threads ending meanwhile unmap their
        // stacks (a few MiB each), hence the margin.
        let virtual_growth = after.virtual_bytes as i64 - before.virtual_bytes as i64;
        assert!(
            virtual_growth >= (576 - 32) * MIB as i64,
            "{virtual_growth}"
        );
        drop((block, reserve));
    }

    #[test]
    fn mapped_file_is_file_backed() {
        let _lock = crate::memory_test_lock();
        let dir = tempfile::tempdir().unwrap();
        let before = sampler::snapshot_self().unwrap();
        let f = MappedFile::new(dir.path(), 32 * MIB).unwrap();
        let after = sampler::snapshot_self().unwrap();
        assert_eq!(f.len(), 32 * MIB);
        let file_growth = after.rss_file_bytes.unwrap() - before.rss_file_bytes.unwrap();
        assert!(file_growth >= 30 * MIB, "{file_growth}");
        let path = dir.path().join("calibration-file-map.bin");
        assert!(path.exists());
        drop(f);
        assert!(!path.exists(), "scratch file removed at teardown");
    }

    #[test]
    fn shm_growth_has_no_path_and_stays_out_of_the_resident_set() {
        use std::os::fd::AsRawFd;
        let _lock = crate::memory_test_lock();
        let before = sampler::snapshot_self().unwrap();
        let mut shm = ShmGrowth::new(4 * MIB, 8).unwrap();
        for _ in 0..4 {
            shm.grow().unwrap();
        }
        let after = sampler::snapshot_self().unwrap();
        assert_eq!(shm.file.metadata().unwrap().len(), 16 * MIB);
        // An anonymous memfd: nothing on any file system a protocol could name.
        let link = std::fs::read_link(format!("/proc/self/fd/{}", shm.file.as_raw_fd())).unwrap();
        assert!(
            link.to_string_lossy()
                .starts_with("/memfd:memqual-calibrate-shm"),
            "{}",
            link.display()
        );
        // Written, never mapped: the 16 MiB are not this process's shmem.
        let shmem_growth =
            after.rss_shmem_bytes.unwrap() as i64 - before.rss_shmem_bytes.unwrap() as i64;
        assert!(shmem_growth < (2 * MIB) as i64, "{shmem_growth}");
        // The object's size is checked arithmetic too.
        assert!(ShmGrowth::new(u64::MAX, 2).is_err());
    }

    #[test]
    fn deadlines_saturate() {
        assert_eq!(after_ms(5, 2), 2_000_005);
        assert_eq!(after_ms(u64::MAX - 1, 1), u64::MAX);
        assert_eq!(after_ms(1, u64::MAX), u64::MAX);
    }

    #[test]
    fn leak_rounds_up_to_pages() {
        let spec = CalibrationSpec {
            leak: Some(worker_contract::Leak {
                mib_per_request: 0.0625,
            }),
            ..CalibrationSpec::default()
        };
        assert_eq!(leak_bytes_per_request(&spec), 64 * 1024);
        let spec = CalibrationSpec {
            leak: Some(worker_contract::Leak {
                mib_per_request: 1e-6,
            }),
            ..CalibrationSpec::default()
        };
        assert_eq!(leak_bytes_per_request(&spec), sampler::page_size_bytes());
    }
}
