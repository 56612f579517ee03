//! What the overhead gate's block run shares between its external sampler
//! and its marker hook: the pause flag, the test-only injected cost, and the
//! log of switches. Its own module so that the arm runner and the overhead
//! gate both use it without importing each other.

use crate::probes::MarkerHook;
use reports::gate_spec::OverheadToggle;
use reports::overhead::{BlockPlan, Switch, block_sampled};
use sampler::{Marker, Phase, clock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the block run's sampler and marker hook share.
pub struct BlockToggle {
    /// Set while the sampler is paused (the B blocks); never set when the
    /// blocks toggle attribution, which the worker switches itself.
    pub pause: Arc<AtomicBool>,
    /// What A blocks have on and B blocks off.
    toggles: OverheadToggle,
    /// Test-only CPU the sampler burns per sampled tick.
    pub busy_per_tick: Duration,
    switches: Arc<Mutex<Vec<Switch>>>,
    block_requests: u64,
}

impl BlockToggle {
    pub(crate) fn new(plan: &BlockPlan) -> Self {
        BlockToggle {
            pause: Arc::new(AtomicBool::new(false)),
            busy_per_tick: Duration::from_micros(plan.injected_busy_us),
            toggles: plan.toggles,
            switches: Arc::default(),
            block_requests: u64::from(plan.block_requests.max(1)),
        }
    }

    /// The worker's own block length, when it switches jemalloc's sampling
    /// itself (`toggles = "attribution"`).
    pub(crate) fn worker_toggles_every(&self) -> Option<u32> {
        (self.toggles == OverheadToggle::Attribution)
            .then(|| u32::try_from(self.block_requests).unwrap_or(u32::MAX))
    }

    /// The reader's hook: at the `request_end` of every `block_requests`-th
    /// request after the first (cold) one, start the next block (and pause
    /// or resume the sampler, when it is what the blocks toggle).
    pub(crate) fn hook(&self) -> MarkerHook {
        let pauses_sampler = self.toggles == OverheadToggle::Sampler;
        let pause = Arc::clone(&self.pause);
        let switches = Arc::clone(&self.switches);
        let per = self.block_requests;
        Box::new(move |m: &Marker| {
            if m.phase != Phase::RequestEnd {
                return;
            }
            let Some((id, block)) = m.request_id.and_then(|id| {
                worker_contract::block_starting_after(id, per).map(|block| (id, block))
            }) else {
                return;
            };
            let sampled = block_sampled(block);
            if pauses_sampler {
                pause.store(!sampled, Ordering::Relaxed);
            }
            switches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Switch {
                    at_ns: clock::monotonic_ns(),
                    after_request: id,
                    block,
                    sampled,
                });
        })
    }

    pub(crate) fn switches(&self) -> Vec<Switch> {
        self.switches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
