//! The one clock shared by the worker's markers and the harness's sampler.
//!
//! `CLOCK_MONOTONIC` is system-wide on Linux and macOS, so timestamps taken in
//! two processes on one host are directly comparable.

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on `clock`. These clocks cannot fail for a valid id on Linux
/// or macOS; fall back to 0 rather than panic so a sampler never aborts a run.
fn read_ns(clock: ClockId) -> u64 {
    clock_gettime(clock)
        .map(|ts| ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Nanoseconds on the host's monotonic clock.
pub fn monotonic_ns() -> u64 {
    read_ns(ClockId::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds (0 if unavailable).
pub fn thread_cpu_ns() -> u64 {
    read_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by every thread of the calling process, in nanoseconds
/// (0 if unavailable).
pub fn process_cpu_ns() -> u64 {
    read_ns(ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_never_goes_backwards() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0);
        assert!(b >= a);
    }

    #[test]
    fn the_process_cpu_clock_counts_this_threads_spin() {
        let (p0, t0) = (process_cpu_ns(), thread_cpu_ns());
        let until = t0 + 20_000_000;
        while thread_cpu_ns() < until {
            std::hint::spin_loop();
        }
        // The process's clock includes this thread's 20 ms (other test
        // threads only add to it).
        assert!(process_cpu_ns() - p0 >= 20_000_000);
    }
}
