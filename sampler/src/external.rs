//! The external fixed-cadence sampler.
//!
//! Tick k is due at `epoch + k·period` (deadline scheduling, never
//! `sleep(period)` in a loop, so work and wake-up jitter do not accumulate).
//! A tick taken a whole period or more after its deadline advances the
//! schedule and counts the ticks it skipped; every row records its lateness.

use crate::device::{DeviceProbe, DeviceSource};
use crate::{DeviceCell, ProcessProbe, SamplerError, SeriesRow, SystemProbe, clock};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// What to sample and how often.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Process to sample.
    pub pid: i32,
    /// Time between tick deadlines (a zero period is treated as 1 ns).
    pub period: Duration,
    /// Time between readings of the system files (meminfo, vmstat, PSI; on
    /// macOS the host's counters): the first tick reads them, then the first
    /// tick at least this long after the last reading; the ticks between
    /// repeat that reading, stamped with its time (`sys_vm_sampled_ns`).
    /// The process files are read every tick. At most `period` means every tick.
    pub system_period: Duration,
    /// While this flag is set, ticks come due on schedule but read nothing and
    /// write no row (counted in `paused_ticks`): the overhead gate's unsampled
    /// blocks, inside one worker run. `None`: never paused.
    pub pause: Option<Arc<AtomicBool>>,
    /// Test-only injected cost: CPU time each sampled tick burns on top of its
    /// reads, to prove the overhead gate catches a sampler that costs more.
    /// Zero in every real run.
    pub busy_per_tick: Duration,
    /// Where device (GPU) memory comes from; without a device the rows get no device columns.
    pub device: DeviceSource,
}

impl SamplerConfig {
    /// Sample `pid` every `period` and the system every second (or every
    /// tick, if that is longer), never paused, no injected cost, device
    /// memory wherever NVML finds a GPU.
    pub fn new(pid: i32, period: Duration) -> Self {
        SamplerConfig {
            pid,
            period,
            system_period: period.max(DEFAULT_SYSTEM_PERIOD),
            pause: None,
            busy_per_tick: Duration::ZERO,
            device: DeviceSource::Auto,
        }
    }
}

/// How often the system files are read by default: the cadence of seed
/// 000's `vm_stat 1` beside a 50-100 ms process sampler. System levels move
/// slowly, and each marker reads `/proc/meminfo` itself at the phase.
pub const DEFAULT_SYSTEM_PERIOD: Duration = Duration::from_secs(1);

/// Spin on the CPU for `d` of this thread's CPU time (the injected cost).
fn burn_cpu(d: Duration) {
    let until =
        clock::thread_cpu_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    while clock::thread_cpu_ns() < until {
        std::hint::spin_loop();
    }
}

/// What the sampler observed about itself, returned by [`ExternalSampler::stop`]
/// and kept in each arm's record.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SamplerStats {
    /// Monotonic time in ns of tick 0.
    pub epoch_ns: u64,
    /// Tick period in ns actually used (the configured period, at least 1).
    pub period_ns: u64,
    /// Time between readings of the system files, in ns (0 in records
    /// written before it existed, when every tick read them).
    #[serde(default)]
    pub system_period_ns: u64,
    /// Rows taken, including those the sink refused.
    pub rows: u64,
    /// Ticks skipped because the sampler fell a whole period behind (the sum of every
    /// row's `skipped_before`).
    pub skipped_ticks: u64,
    /// Ticks at which the target process could not be read.
    pub process_errors: u64,
    /// Ticks at which a system reading failed; the row keeps the fields that were read.
    pub system_errors: u64,
    /// Rows the sink refused (e.g. a full disk).
    pub sink_errors: u64,
    /// Ticks that came due while the sampler was paused (no read, no row).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused_ticks: u64,
    /// Message of the first process, system or sink error; `None` when there was none.
    pub first_error: Option<String>,
    /// The accelerator, said once: the devices read (NVML, driver, names and
    /// sizes), or why there are no device columns (`no accelerator: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<String>,
    /// The Metal device the sampler's own process sees (macOS with the
    /// `metal` feature): its working-set limit and unified memory. `None`
    /// elsewhere, or where no device was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal: Option<crate::metal::MetalDevice>,
    /// Ticks at which a device reading failed (the row's device cells are empty).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device_errors: u64,
    /// The sampler thread's nice value when it was raised above the
    /// worker's (Linux, where the process may: `CAP_SYS_NICE` or root), so
    /// that a tick coming due preempts the worker's threads instead of
    /// waiting behind them; `None` where it runs at the default priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
}

/// The series' `accelerator` line: NVML's devices where it opened, else
/// the Metal device (or why Metal gave none) where it was asked for, else
/// why NVML could not open.
fn accelerator_line(
    nvml: &Result<DeviceProbe, String>,
    metal: Option<&Result<crate::metal::MetalDevice, String>>,
) -> String {
    match (nvml, metal) {
        (Ok(d), _) => d.description(),
        (Err(_), Some(Ok(m))) => crate::metal::describe(m),
        (Err(_), Some(Err(why))) => why.clone(),
        (Err(why), None) => why.clone(),
    }
}

/// The nice value the sampler thread asks for.
#[cfg(target_os = "linux")]
const SAMPLER_NICE: i32 = -10;

/// Raise the calling thread's priority to [`SAMPLER_NICE`]; the value set,
/// or `None` when the process may not.
#[cfg(target_os = "linux")]
fn raise_own_priority() -> Option<i32> {
    // SAFETY: gettid takes no arguments; setpriority with PRIO_PROCESS and a
    // thread id changes that thread alone (Linux threads are scheduled
    // entities of their own) and only reads its arguments.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, SAMPLER_NICE)
    };
    (rc == 0).then_some(SAMPLER_NICE)
}

#[cfg(not(target_os = "linux"))]
fn raise_own_priority() -> Option<i32> {
    None
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Rows the queue to the row writer holds before a tick waits for it: 51 s
/// of a 50 ms series (each row is about 1.6 KiB in the queue).
pub const ROW_QUEUE: usize = 1024;

/// The thread that hands rows to the sink, off the tick's path.
struct RowWriter {
    rows: mpsc::SyncSender<SeriesRow>,
    /// The writer thread's CPU clock after its latest row.
    cpu_ns: Arc<AtomicU64>,
    handle: JoinHandle<Written>,
}

/// What the row writer saw: the rows the sink refused and the first reason.
#[derive(Default)]
struct Written {
    errors: u64,
    first_error: Option<String>,
}

impl RowWriter {
    fn spawn<F>(pid: i32, mut sink: F) -> Result<RowWriter, SamplerError>
    where
        F: FnMut(&SeriesRow) -> std::io::Result<()> + Send + 'static,
    {
        let (rows, queue) = mpsc::sync_channel::<SeriesRow>(ROW_QUEUE);
        let cpu_ns = Arc::new(AtomicU64::new(0));
        let cpu = Arc::clone(&cpu_ns);
        let handle = std::thread::Builder::new()
            .name(format!("memqual-rows-{pid}"))
            .spawn(move || {
                let _counted = crate::threads::Registration::this_thread(Arc::clone(&cpu));
                let mut written = Written::default();
                // Ends when the tick thread drops its sender, after the last row.
                for row in queue {
                    if let Err(e) = sink(&row) {
                        written.errors += 1;
                        written.first_error.get_or_insert_with(|| e.to_string());
                    }
                    cpu.store(clock::thread_cpu_ns(), Ordering::Relaxed);
                }
                written
            })
            .map_err(|e| SamplerError::Os {
                call: "spawn the series row writer",
                reason: e.to_string(),
            })?;
        Ok(RowWriter {
            rows,
            cpu_ns,
            handle,
        })
    }

    /// Wait until every queued row reached the sink. The tick thread holds
    /// the only other sender, so it must have ended first.
    fn finish(self) -> Written {
        drop(self.rows);
        self.handle.join().unwrap_or_else(|_| Written {
            errors: 1,
            first_error: Some("the row writer's thread panicked".into()),
        })
    }
}

impl SamplerStats {
    fn note(&mut self, e: impl std::fmt::Display) {
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// A running sampler thread. Dropping it without [`stop`](Self::stop) also stops it.
pub struct ExternalSampler {
    stop_tx: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<SamplerStats>>,
    writer: Option<RowWriter>,
    epoch_ns: u64,
    period_ns: u64,
}

impl ExternalSampler {
    /// Start sampling `cfg.pid` and the system; each row goes to `sink` on
    /// the row writer's thread. The first tick is due immediately.
    pub fn start<F>(cfg: SamplerConfig, sink: F) -> Result<Self, SamplerError>
    where
        F: FnMut(&SeriesRow) -> std::io::Result<()> + Send + 'static,
    {
        Self::start_observed(cfg, |_| {}, sink)
    }

    /// [`start`](Self::start), and `on_tick` sees each row on the tick's own
    /// thread as soon as it is taken, before the row is queued for `sink`:
    /// for what must not wait for the disk (the memory-ceiling watchdog).
    /// It delays the next tick by its own time, so it must be short.
    ///
    /// `sink` runs on a thread of its own because a write can block far
    /// longer than a period (the filesystem's journal, writeback throttling):
    /// on the tick's thread it made the next tick late, and a whole period
    /// late is a skipped tick. The queue holds [`ROW_QUEUE`] rows; only a
    /// disk that many periods behind makes the tick wait (counted as lateness
    /// and skipped ticks, never a dropped row). The writer's CPU time is
    /// added to every row's `sampler_cpu_ns`, so the witness stays whole.
    pub fn start_observed<O, F>(
        cfg: SamplerConfig,
        mut on_tick: O,
        sink: F,
    ) -> Result<Self, SamplerError>
    where
        O: FnMut(&SeriesRow) + Send + 'static,
        F: FnMut(&SeriesRow) -> std::io::Result<()> + Send + 'static,
    {
        let period_ns = u64::try_from(cfg.period.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let system_period_ns = u64::try_from(cfg.system_period.as_nanos()).unwrap_or(u64::MAX);
        let mut probe = ProcessProbe::new(cfg.pid)?;
        // NVML is opened before tick 0 so its start-up is no tick's cost.
        let device = DeviceProbe::open(&cfg.device);
        // Metal's device is asked for only where NVML gave none (a Mac).
        let metal = match (&device, &cfg.device) {
            (Err(_), DeviceSource::Auto) if crate::metal::unavailable_here().is_none() => {
                Some(crate::metal::MetalProbe::open().map(|p| p.device()))
            }
            _ => None,
        };
        let accelerator = Some(accelerator_line(&device, metal.as_ref()));
        let metal = metal.and_then(Result::ok);
        let device = device.ok();
        let device_pid = u32::try_from(cfg.pid).unwrap_or(0);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let writer = RowWriter::spawn(cfg.pid, sink)?;
        let (rows_tx, writer_cpu_ns) = (writer.rows.clone(), Arc::clone(&writer.cpu_ns));
        let epoch_ns = clock::monotonic_ns();
        let handle = std::thread::Builder::new()
            .name(format!("memqual-sampler-{}", cfg.pid))
            .spawn(move || {
                // memqual's own cost, for a soak's watch on itself.
                let counted = crate::threads::Registration::this_thread(Arc::default());
                let mut system = SystemProbe::new();
                let mut covariates = crate::covariates::CovariateProbe::new();
                let mut stats = SamplerStats {
                    nice: raise_own_priority(),
                    epoch_ns,
                    period_ns,
                    system_period_ns: system_period_ns.max(period_ns),
                    accelerator,
                    metal,
                    ..SamplerStats::default()
                };
                let mut tick: u64 = 0;
                // The last system reading, repeated by the ticks until the next.
                let mut system_row: Option<SeriesRow> = None;
                loop {
                    // Saturating: a period near u64::MAX must not wrap into the past.
                    let mut deadline = epoch_ns.saturating_add(tick.saturating_mul(period_ns));
                    let now = clock::monotonic_ns();
                    let stop = if now < deadline {
                        stop_rx.recv_timeout(Duration::from_nanos(deadline - now))
                    } else {
                        stop_rx.try_recv().map_err(|e| match e {
                            mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                            mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                        })
                    };
                    if !matches!(stop, Err(RecvTimeoutError::Timeout)) {
                        break;
                    }
                    if cfg
                        .pause
                        .as_ref()
                        .is_some_and(|p| p.load(Ordering::Relaxed))
                    {
                        stats.paused_ticks += 1;
                        // Resume on the schedule: a pause is not lateness.
                        let now = clock::monotonic_ns();
                        tick = tick
                            .max(now.saturating_sub(epoch_ns) / period_ns)
                            .saturating_add(1);
                        continue;
                    }
                    let t_ns = clock::monotonic_ns();
                    let cpu_start = clock::thread_cpu_ns();
                    let behind = t_ns.saturating_sub(deadline) / period_ns;
                    if behind > 0 {
                        tick = tick.saturating_add(behind);
                        deadline = epoch_ns.saturating_add(tick.saturating_mul(period_ns));
                        stats.skipped_ticks += behind;
                    }
                    let mut row = SeriesRow {
                        tick,
                        deadline_ns: deadline,
                        sampler_cpu_ns: cpu_start
                            .saturating_add(writer_cpu_ns.load(Ordering::Relaxed)),
                        t_ns,
                        lateness_ns: t_ns.saturating_sub(deadline),
                        skipped_before: behind,
                        ..SeriesRow::default()
                    };
                    if let Err(e) = probe.sample(&mut row) {
                        stats.process_errors += 1;
                        stats.note(e);
                    }
                    let due = system_row.as_ref().is_none_or(|last| {
                        let read_at = last.sys_vm_sampled_ns.unwrap_or(0);
                        // Half a period early counts as on time: ticks start
                        // a little late, and must not push the reading a
                        // whole tick further each second.
                        t_ns.saturating_add(period_ns / 2)
                            >= read_at.saturating_add(system_period_ns)
                    });
                    match &system_row {
                        Some(last) if !due => row.copy_system_from(last),
                        _ => {
                            if let Err(e) = system.sample(&mut row) {
                                stats.system_errors += 1;
                                stats.note(e);
                            }
                            // Unreadable covariates stay empty; never an error.
                            covariates.sample(&mut row);
                            // macOS stamps a cached copy's own time; fresh
                            // reads are stamped now.
                            row.sys_vm_sampled_ns = row.sys_vm_sampled_ns.or(Some(t_ns));
                            let mut kept = SeriesRow::default();
                            kept.copy_system_from(&row);
                            system_row = Some(kept);
                        }
                    }
                    if let Some(device) = &device {
                        match device.sample(device_pid) {
                            Ok(d) => {
                                row.gpu_worker_bytes = d.worker_bytes.into();
                                row.gpu_used_bytes = DeviceCell::Bytes(d.used_bytes);
                                row.gpu_total_bytes = DeviceCell::Bytes(d.total_bytes);
                                row.gpu_others_bytes = DeviceCell::Bytes(d.others_bytes);
                            }
                            Err(e) => {
                                row.gpu_worker_bytes = DeviceCell::Unread;
                                row.gpu_used_bytes = DeviceCell::Unread;
                                row.gpu_total_bytes = DeviceCell::Unread;
                                row.gpu_others_bytes = DeviceCell::Unread;
                                stats.device_errors += 1;
                                stats.note(e);
                            }
                        }
                    }
                    if !cfg.busy_per_tick.is_zero() {
                        burn_cpu(cfg.busy_per_tick);
                    }
                    row.cost_ns = clock::monotonic_ns().saturating_sub(t_ns);
                    let cpu_end = clock::thread_cpu_ns();
                    counted.publish(cpu_end);
                    row.cost_cpu_ns = cpu_end.saturating_sub(cpu_start);
                    on_tick(&row);
                    stats.rows += 1;
                    tick += 1;
                    // Blocks only when the writer is ROW_QUEUE rows behind;
                    // fails only if the writer thread is gone (it panicked).
                    if rows_tx.send(row).is_err() {
                        stats.sink_errors += 1;
                        stats.note("writing a series row: the row writer's thread ended");
                    }
                }
                stats
            })
            .map_err(|e| SamplerError::Os {
                call: "spawn sampler thread",
                reason: e.to_string(),
            })?;
        Ok(ExternalSampler {
            stop_tx: Some(stop_tx),
            handle: Some(handle),
            writer: Some(writer),
            epoch_ns,
            period_ns,
        })
    }

    /// Monotonic time of tick 0.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// Tick period in nanoseconds (the configured period, at least 1).
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Stop after the tick in progress (if any) and return the sampler's statistics.
    pub fn stop(mut self) -> SamplerStats {
        self.shutdown()
    }

    /// Stops the ticks, then waits for the writer to drain the queue: every
    /// row taken is in the sink (or counted as a sink error) on return.
    fn shutdown(&mut self) -> SamplerStats {
        drop(self.stop_tx.take());
        let mut stats = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if let Some(writer) = self.writer.take() {
            let written = writer.finish();
            stats.sink_errors += written.errors;
            if let Some(e) = written.first_error {
                stats.note(format!("writing a series row: {e}"));
            }
        }
        stats
    }
}

impl Drop for ExternalSampler {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.shutdown();
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_accelerator_line_is_nvml_else_metal_else_why_neither() {
        let no_nvml: Result<DeviceProbe, String> =
            Err("no accelerator: NVML from /x/libnvidia-ml.so.1: not found".into());
        assert_eq!(
            accelerator_line(&no_nvml, None),
            "no accelerator: NVML from /x/libnvidia-ml.so.1: not found"
        );
        let m4 = crate::metal::MetalDevice {
            name: "Apple M4".into(),
            unified_memory: true,
            working_set_limit_bytes: 12 << 30,
        };
        assert!(
            accelerator_line(&no_nvml, Some(&Ok(m4)))
                .starts_with("Metal: Apple M4 (unified memory, working-set limit 12288 MiB);")
        );
        let none = Err("no accelerator: MTLCreateSystemDefaultDevice returned no device".into());
        assert_eq!(
            accelerator_line(&no_nvml, Some(&none)),
            "no accelerator: MTLCreateSystemDefaultDevice returned no device"
        );
    }

    #[test]
    fn the_sampler_thread_runs_above_the_workers_priority_where_it_may() {
        let target = std::process::id() as i32;
        let sampler = ExternalSampler::start(
            SamplerConfig::new(target, Duration::from_millis(10)),
            |_| Ok(()),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // The kernel's own view of the thread: field 19 of its stat is nice.
        let name = format!("memqual-sampler-{target}");
        let nice = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| {
                let dir = t.ok()?.path();
                let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
                // comm is cut at 15 bytes.
                name.starts_with(comm.trim()).then_some(())?;
                let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
                let after = &stat[stat.rfind(')')? + 2..];
                after.split(' ').nth(16)?.parse::<i32>().ok()
            })
            .next()
            .expect("the sampler thread");
        let stats = sampler.stop();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!((nice, stats.nice), (SAMPLER_NICE, Some(SAMPLER_NICE)));
        } else {
            assert_eq!(stats.nice.unwrap_or(0), nice);
        }
    }

    #[test]
    fn the_system_files_are_read_once_per_system_period_and_repeated_between() {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let sink_rows = Arc::clone(&rows);
        let sampler = ExternalSampler::start(
            SamplerConfig {
                device: DeviceSource::Library("/nonexistent/libnvidia-ml.so.1".into()),
                system_period: Duration::from_millis(100),
                ..SamplerConfig::new(std::process::id() as i32, Duration::from_millis(10))
            },
            move |r| {
                sink_rows.lock().unwrap().push(r.clone());
                Ok(())
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(450));
        let stats = sampler.stop();
        assert_eq!(stats.system_period_ns, 100_000_000);
        let rows = rows.lock().unwrap();
        let fresh: Vec<&SeriesRow> = rows
            .iter()
            .filter(|r| r.sys_vm_sampled_ns == Some(r.t_ns))
            .collect();
        // The first tick reads them; then one reading per 100 ms (a loaded
        // host may delay ticks, never add readings).
        assert!(fresh[0].tick == rows[0].tick, "{:?}", rows[0]);
        assert!(
            (2..=6).contains(&fresh.len()),
            "{} readings in {} rows",
            fresh.len(),
            rows.len()
        );
        for w in fresh.windows(2) {
            assert!(
                w[1].t_ns - w[0].t_ns >= 95_000_000,
                "{:?} then {:?}",
                w[0].t_ns,
                w[1].t_ns
            );
        }
        // Every other row repeats the reading before it, stamped with its time.
        let mut last = None;
        for r in rows.iter() {
            if r.sys_vm_sampled_ns == Some(r.t_ns) {
                last = Some(r);
            } else {
                let l = last.expect("a reading before");
                assert_eq!(r.sys_vm_sampled_ns, Some(l.t_ns));
                assert_eq!(r.sys_available_bytes, l.sys_available_bytes);
                assert!(r.resident_bytes.is_some(), "the process is read every tick");
            }
        }
    }

    #[test]
    fn ticks_follow_deadlines_and_rows_reach_the_sink() {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let sink_rows = Arc::clone(&rows);
        let sampler = ExternalSampler::start(
            SamplerConfig {
                device: DeviceSource::Library("/nonexistent/libnvidia-ml.so.1".into()),
                ..SamplerConfig::new(std::process::id() as i32, Duration::from_millis(10))
            },
            move |r| {
                sink_rows.lock().unwrap().push(r.clone());
                Ok(())
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let stats = sampler.stop();
        let rows = rows.lock().unwrap();
        assert_eq!(stats.rows as usize, rows.len());
        assert!(
            rows.len() >= 5,
            "only {} rows in 200 ms at 10 ms",
            rows.len()
        );
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(
                r.deadline_ns,
                stats.epoch_ns + r.tick * stats.period_ns,
                "row {i}"
            );
            assert!(r.t_ns >= r.deadline_ns);
            assert_eq!(r.lateness_ns, r.t_ns - r.deadline_ns);
            assert!(r.resident_bytes.unwrap() > 0);
            assert!(r.sys_total_bytes.is_some());
            // No accelerator: no device cells at all, never zeros.
            assert!(r.gpu_worker_bytes.is_absent() && r.gpu_used_bytes.is_absent());
        }
        let said = stats.accelerator.as_deref().unwrap_or_default();
        assert!(
            said.starts_with("no accelerator: NVML from /nonexistent"),
            "{said}"
        );
        // Tick indices strictly increase and account for every skip.
        for w in rows.windows(2) {
            assert_eq!(w[1].tick, w[0].tick + 1 + w[1].skipped_before);
        }
        assert_eq!(stats.process_errors, 0);
    }

    #[test]
    fn a_paused_sampler_reads_nothing_and_resumes_on_schedule() {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let sink_rows = Arc::clone(&rows);
        let pause = Arc::new(AtomicBool::new(true));
        let mut cfg = SamplerConfig::new(std::process::id() as i32, Duration::from_millis(5));
        cfg.pause = Some(Arc::clone(&pause));
        let sampler = ExternalSampler::start(cfg, move |r| {
            sink_rows.lock().unwrap().push(r.clone());
            Ok(())
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(60));
        assert!(rows.lock().unwrap().is_empty(), "no row while paused");
        pause.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(60));
        let stats = sampler.stop();
        let rows = rows.lock().unwrap();
        assert!(stats.paused_ticks >= 1 && !rows.is_empty(), "{stats:?}");
        assert_eq!(stats.rows as usize, rows.len());
        // The pause is not lateness: resumed ticks are not counted as skipped.
        assert_eq!(rows[0].skipped_before, 0, "{:?}", rows[0]);
    }

    #[test]
    fn an_injected_cost_burns_the_stated_cpu_per_tick() {
        let mut cfg = SamplerConfig::new(std::process::id() as i32, Duration::from_millis(20));
        cfg.busy_per_tick = Duration::from_millis(3);
        let rows = Arc::new(Mutex::new(Vec::new()));
        let sink_rows = Arc::clone(&rows);
        let sampler = ExternalSampler::start(cfg, move |r| {
            sink_rows.lock().unwrap().push(r.clone());
            Ok(())
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(70));
        sampler.stop();
        // CPU time is the thread's own, so this holds however loaded the host is.
        for r in rows.lock().unwrap().iter() {
            assert!(r.cost_cpu_ns >= 3_000_000, "{}", r.cost_cpu_ns);
        }
    }

    #[test]
    fn a_stalled_disk_delays_no_tick_and_loses_no_row() {
        // The sink's first write hangs until released, as a write behind a
        // journal commit can. Ticks must go on meanwhile (seen on the tick
        // thread), and every row reaches the sink, in order, once it returns.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink_rows = Arc::clone(&written);
        let (seen_tx, seen_rx) = mpsc::channel::<u64>();
        let sampler = ExternalSampler::start_observed(
            SamplerConfig {
                device: DeviceSource::Off,
                ..SamplerConfig::new(std::process::id() as i32, Duration::from_millis(5))
            },
            move |r| {
                let _ = seen_tx.send(r.tick);
            },
            move |r| {
                if r.tick == 0 {
                    let _ = release_rx.recv();
                }
                sink_rows.lock().unwrap().push(r.tick);
                Ok(())
            },
        )
        .unwrap();
        // Five ticks taken while the first row's write is still stuck.
        for _ in 0..5 {
            seen_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        assert!(written.lock().unwrap().is_empty());
        release_tx.send(()).unwrap();
        let stats = sampler.stop();
        let written = written.lock().unwrap();
        assert!(stats.rows >= 5, "{stats:?}");
        assert_eq!(written.len() as u64, stats.rows);
        assert!(written.windows(2).all(|w| w[0] < w[1]), "{written:?}");
        assert_eq!(stats.sink_errors, 0);
    }

    #[test]
    fn the_row_writers_cpu_is_counted_as_the_samplers() {
        let writer = RowWriter::spawn(0, |_| {
            burn_cpu(Duration::from_millis(5));
            Ok(())
        })
        .unwrap();
        let cpu = Arc::clone(&writer.cpu_ns);
        for tick in 0..3 {
            writer
                .rows
                .send(SeriesRow {
                    tick,
                    ..SeriesRow::default()
                })
                .unwrap();
        }
        let written = writer.finish();
        assert_eq!(written.errors, 0);
        // The writer's own thread clock: three 5 ms burns at least.
        assert!(cpu.load(Ordering::Relaxed) >= 15_000_000);
    }

    #[test]
    fn a_sink_error_is_counted_not_fatal() {
        let sampler = ExternalSampler::start(
            SamplerConfig {
                device: DeviceSource::Off,
                ..SamplerConfig::new(std::process::id() as i32, Duration::from_millis(5))
            },
            |_| Err(std::io::Error::other("disk full")),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let stats = sampler.stop();
        assert!(stats.rows >= 1);
        assert_eq!(stats.sink_errors, stats.rows);
        assert!(stats.first_error.unwrap().contains("disk full"));
    }
}
