//! The CPU time of this process's own sampler threads (each external
//! sampler's tick thread and its row writer), for a soak's watch on memqual
//! itself.
//!
//! Each thread registers itself as it starts, with its kernel thread id on
//! Linux, and publishes its own CPU clock as it works; when it ends it adds
//! its CPU time to a running total. So [`sampler_threads_cpu`] covers
//! samplers that already stopped (an arm that ended) as well as the live
//! ones, which on Linux are read from outside, in
//! `/proc/self/task/<tid>/stat`.

use crate::clock;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A live sampler thread.
struct Live {
    key: u64,
    /// The kernel's thread id (Linux `gettid`); `None` elsewhere.
    tid: Option<u32>,
    /// The thread's own CPU clock at its latest publication, in ns.
    published_ns: Arc<AtomicU64>,
}

#[derive(Default)]
struct Registry {
    live: Vec<Live>,
    next_key: u64,
    /// CPU time of the sampler threads that ended, in ns.
    ended_ns: u64,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: Vec::new(),
    next_key: 0,
    ended_ns: 0,
});

fn registry() -> MutexGuard<'static, Registry> {
    // The registry holds plain numbers: a panic elsewhere cannot leave it torn.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A sampler thread's membership of the registry. It must be created and
/// dropped on that thread: dropping it adds the calling thread's CPU time
/// to the total (so it is not `Send`).
pub(crate) struct Registration {
    key: u64,
    published_ns: Arc<AtomicU64>,
    _on_this_thread: PhantomData<*const ()>,
}

impl Registration {
    /// Register the calling thread; `published_ns` is where it stores its
    /// own CPU clock as it works (see [`Registration::publish`]).
    pub(crate) fn this_thread(published_ns: Arc<AtomicU64>) -> Registration {
        let tid = own_tid();
        let mut r = registry();
        let key = r.next_key;
        r.next_key += 1;
        r.live.push(Live {
            key,
            tid,
            published_ns: Arc::clone(&published_ns),
        });
        Registration {
            key,
            published_ns,
            _on_this_thread: PhantomData,
        }
    }

    /// Store this thread's CPU clock, `now_ns` (read by the caller, who
    /// usually needs it anyway): what a reader uses where it cannot read the
    /// thread from outside.
    pub(crate) fn publish(&self, now_ns: u64) {
        self.published_ns.store(now_ns, Ordering::Relaxed);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Read and retired under the lock, so a reader sees the thread
        // either live or ended, never both or neither.
        let mut r = registry();
        r.live.retain(|l| l.key != self.key);
        r.ended_ns = r.ended_ns.saturating_add(clock::thread_cpu_ns());
    }
}

/// The CPU time of this process's sampler threads, live and ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SamplerThreadsCpu {
    /// CPU time (user + system) in ns of every sampler thread this process
    /// ran: those that ended (as each read its own clock at its end) and the
    /// live ones (on Linux the larger of the kernel's count in
    /// `/proc/self/task/<tid>/stat` and the thread's latest own reading,
    /// both lower bounds of the truth; elsewhere the latter, at most one
    /// tick old).
    pub cpu_ns: u64,
    /// Kernel thread ids of the live sampler threads (Linux; empty
    /// elsewhere), in the order they started.
    pub live_tids: Vec<u32>,
    /// Live sampler threads.
    pub live: u32,
}

/// Read the CPU time of this process's sampler threads now.
pub fn sampler_threads_cpu() -> SamplerThreadsCpu {
    let r = registry();
    let mut out = SamplerThreadsCpu {
        cpu_ns: r.ended_ns,
        ..SamplerThreadsCpu::default()
    };
    for l in &r.live {
        let published = l.published_ns.load(Ordering::Relaxed);
        let outside = l.tid.and_then(task_cpu_ns).unwrap_or(0);
        out.cpu_ns = out.cpu_ns.saturating_add(published.max(outside));
        out.live_tids.extend(l.tid);
        out.live += 1;
    }
    out
}

#[cfg(target_os = "linux")]
fn own_tid() -> Option<u32> {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).ok()
}

#[cfg(not(target_os = "linux"))]
fn own_tid() -> Option<u32> {
    None
}

/// CPU time of thread `tid` of this process from `/proc/self/task/<tid>/stat`;
/// `None` when it cannot be read (the thread just ended).
#[cfg(target_os = "linux")]
fn task_cpu_ns(tid: u32) -> Option<u64> {
    let text = std::fs::read(format!("/proc/self/task/{tid}/stat")).ok()?;
    let ticks = stat_cpu_ticks(&text)?;
    let per_second = procfs::ticks_per_second().max(1);
    Some(ticks.saturating_mul(1_000_000_000 / per_second))
}

#[cfg(not(target_os = "linux"))]
fn task_cpu_ns(_tid: u32) -> Option<u64> {
    None
}

/// `utime + stime` (in clock ticks) of a `stat` file, as procfs parses it
/// (the command may hold spaces and parentheses).
#[cfg(any(target_os = "linux", test))]
fn stat_cpu_ticks(text: &[u8]) -> Option<u64> {
    use procfs_core::FromRead;
    let stat = procfs_core::process::Stat::from_read(text).ok()?;
    Some(stat.utime.saturating_add(stat.stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_utime_plus_stime_whatever_the_command() {
        // A real thread's stat line (Linux 6.x), its command made awkward.
        let line = "4242 (memqual-s (x) y) S 1 2 3 0 -1 4194368 50 0 0 0 173 29 0 0 -10 0 1 0 \
                    921483 3133440 362 18446744073709551615 94424356986880 94424357006761 \
                    140724911054576 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94424357022768 \
                    94424357024384 94424417046528 140724911061730 140724911061750 \
                    140724911061750 140724911063019 0\n";
        assert_eq!(stat_cpu_ticks(line.as_bytes()), Some(202));
        assert_eq!(stat_cpu_ticks(b"4242 (cut) S 1 2"), None);
        assert_eq!(stat_cpu_ticks(b"no parenthesis"), None);
    }

    #[test]
    fn an_ended_thread_keeps_counting_and_a_live_one_is_listed() {
        let before = sampler_threads_cpu().cpu_ns;
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let reg = Registration::this_thread(Arc::new(AtomicU64::new(0)));
            let until = clock::thread_cpu_ns() + 20_000_000;
            while clock::thread_cpu_ns() < until {
                std::hint::spin_loop();
            }
            reg.publish(clock::thread_cpu_ns());
            ready_tx.send(()).unwrap();
            rx.recv().unwrap();
            drop(reg);
        });
        ready_rx.recv().unwrap();
        let live = sampler_threads_cpu();
        assert!(live.live >= 1);
        if cfg!(target_os = "linux") {
            assert!(!live.live_tids.is_empty());
        }
        assert!(live.cpu_ns >= before + 20_000_000, "{live:?}");
        tx.send(()).unwrap();
        t.join().unwrap();
        // Other tests' samplers may come and go: the total only grows.
        assert!(sampler_threads_cpu().cpu_ns >= before + 20_000_000);
    }
}
