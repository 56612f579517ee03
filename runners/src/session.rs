//! The worker side of one arm: every message goes through here.

use anyhow::Context;
use sampler::{MarkerRecorder, Phase};
use worker_contract::{
    Bye, CONTRACT_VERSION, Channel, Hello, Lifeline, LogLevel, LogMessage, RequestResult,
    RuntimeReport, Settled, WorkerError, WorkerMessage, open_descriptors,
};

/// Never outlive the harness. A worker leads its own process group (so the
/// harness can kill it whole), which also hides it from the terminal's
/// Ctrl-C; so when the harness dies, even by SIGKILL, the lifeline on fd 4
/// closes and the worker kills itself at once, wherever it is (inside
/// whisper.cpp included), running no destructors: there is nobody left to
/// report to, and its memory must not linger into whatever runs next.
fn die_with_harness(lifeline: Lifeline) -> anyhow::Result<()> {
    lifeline
        .watch(|| {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            // SIGKILL cannot be caught or ignored; should raise itself fail,
            // end the process without running anything else.
            std::process::abort();
        })
        .context("cannot start the lifeline thread")?;
    Ok(())
}

/// A worker's open session with the harness.
pub struct WorkerSession {
    channel: Channel,
    markers: MarkerRecorder,
    heap: Option<crate::heap_dump::HeapDumper>,
}

impl WorkerSession {
    /// Hold the lifeline (fd 4), open fd 3 and introduce the worker.
    pub fn open(worker: &str, capabilities: &[&str]) -> anyhow::Result<Self> {
        let (mut channel, lifeline) = open_descriptors()?;
        die_with_harness(lifeline)?;
        channel.send(&WorkerMessage::Hello(Hello {
            contract_version: CONTRACT_VERSION,
            worker: worker.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            platform: sampler::PLATFORM.to_string(),
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
        }))?;
        Ok(WorkerSession {
            channel,
            markers: MarkerRecorder::new(),
            heap: None,
        })
    }

    /// Record this process's own device (GPU) memory in every marker from
    /// now on (NVML; `None` in the markers where no device is readable).
    pub fn read_device_memory(&mut self) {
        self.markers.read_device_memory();
    }

    /// Take a jemalloc heap profile right after each profiled marker from now on
    /// (allocation attribution); fails when the process cannot give one.
    pub fn profile_heap(
        &mut self,
        profiling: &worker_contract::HeapProfiling,
    ) -> Result<(), crate::heap_dump::NotAttributable> {
        match profiling {
            worker_contract::HeapProfiling::Jemalloc {
                dir,
                lg_prof_sample,
                toggle_every,
            } => {
                self.heap = Some(crate::heap_dump::HeapDumper::open(
                    dir,
                    *lg_prof_sample,
                    *toggle_every,
                )?);
            }
            // macOS: the harness captures malloc_history from outside.
            worker_contract::HeapProfiling::MallocStackLogging => {}
        }
        Ok(())
    }

    /// Snapshot this process and send the marker; then, under allocation
    /// attribution, write the heap profile of the phase it closes (every
    /// phase outside requests and the first measured request's two; a
    /// profile that cannot be written is logged as a warning and is missing
    /// from the run, which the receipt reports for that phase).
    pub fn mark(&mut self, phase: Phase, request_id: Option<u64>) -> anyhow::Result<()> {
        let marker = self.markers.mark(phase, request_id)?;
        let seq = marker.seq;
        self.channel.send(&WorkerMessage::Marker(marker))?;
        if let Some(heap) = &self.heap
            && worker_contract::profiles_marker(phase, request_id)
            && let Err(e) = heap.dump(seq, phase.as_str())
        {
            self.log(LogLevel::Warn, e)?;
        }
        self.toggle_heap_sampling(phase, request_id)
    }

    /// In an overhead block run that toggles attribution: after the
    /// `request_end` that closes a block, switch jemalloc's sampling for the
    /// next one (on in A blocks, off in B), before the next request begins.
    fn toggle_heap_sampling(
        &mut self,
        phase: Phase,
        request_id: Option<u64>,
    ) -> anyhow::Result<()> {
        let (Some(heap), Phase::RequestEnd, Some(id)) = (&self.heap, phase, request_id) else {
            return Ok(());
        };
        let Some(every) = heap.toggle_every else {
            return Ok(());
        };
        let Some(block) = worker_contract::block_starting_after(id, u64::from(every)) else {
            return Ok(());
        };
        let active = worker_contract::abba_block_a(block);
        heap.set_sampling(active)
            .map_err(|e| anyhow::anyhow!("block {block} after request {id}: {e}"))?;
        self.log(
            LogLevel::Debug,
            format!(
                "jemalloc sampling {} for block {block} after request {id}",
                if active { "on" } else { "off" }
            ),
        )
    }

    /// After request `request_id`'s `request_end`: wait `settle_ms`, then
    /// snapshot this process (no peak reset) and send `settled`. Nothing
    /// when `settle_ms` is 0.
    pub fn settle(&mut self, request_id: u64, settle_ms: u64) -> anyhow::Result<()> {
        if settle_ms == 0 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(settle_ms));
        let t_ns = sampler::clock::monotonic_ns();
        let memory = sampler::snapshot_self()?;
        self.channel.send(&WorkerMessage::Settled(Settled {
            request_id,
            settle_ms,
            t_ns,
            memory,
        }))?;
        Ok(())
    }

    /// Send a free-form `log` line for the arm's `worker.log`. Fails when fd 3
    /// cannot be written (the harness has gone).
    pub fn log(&mut self, level: LogLevel, message: impl Into<String>) -> anyhow::Result<()> {
        self.channel.send(&WorkerMessage::Log(LogMessage {
            level,
            message: message.into(),
        }))?;
        Ok(())
    }

    /// Send one measured request's `result`. Fails when fd 3 cannot be written.
    pub fn result(&mut self, result: RequestResult) -> anyhow::Result<()> {
        self.channel.send(&WorkerMessage::Result(result))?;
        Ok(())
    }

    /// Send the `runtime` report (once, after `state_ready`). Fails when fd 3
    /// cannot be written.
    pub fn runtime(&mut self, report: RuntimeReport) -> anyhow::Result<()> {
        self.channel
            .send(&WorkerMessage::Runtime(Box::new(report)))?;
        Ok(())
    }

    /// Send the `placement` message: Core ML's compute plan, after
    /// `teardown_done`. Fails when fd 3 cannot be written.
    pub fn placement(&mut self, placement: worker_contract::CoremlPlacement) -> anyhow::Result<()> {
        self.channel.send(&WorkerMessage::Placement(placement))?;
        Ok(())
    }

    /// Send an `error` message: the failure the worker reports before exiting.
    /// Fails when fd 3 cannot be written.
    pub fn error(&mut self, message: impl Into<String>) -> anyhow::Result<()> {
        self.channel.send(&WorkerMessage::Error(WorkerError {
            message: message.into(),
        }))?;
        Ok(())
    }

    /// End the session with `bye`, giving how many measured requests ran.
    /// Consumes the session; fails when fd 3 cannot be written.
    pub fn bye(mut self, requests: u64) -> anyhow::Result<()> {
        self.channel.send(&WorkerMessage::Bye(Bye { requests }))?;
        Ok(())
    }

    /// The raw channel, for deliberate contract violations in calibration.
    pub fn channel_mut(&mut self) -> &mut Channel {
        &mut self.channel
    }
}
