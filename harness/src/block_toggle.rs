//! What the overhead gate's block run shares between its external sampler
//! and its marker hook: the pause flag, the test-only injected cost, and the
//! log of switches. Its own module so that the arm runner and the overhead
//! gate both use it without importing each other.

use crate::probes::MarkerHook;
use reports::overhead::{BlockPlan, Switch, block_sampled};
use sampler::{Marker, Phase, clock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the block run's sampler and marker hook share.
pub struct BlockToggle {
    /// Set while the sampler is paused (the B blocks).
    pub pause: Arc<AtomicBool>,
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
            switches: Arc::default(),
            block_requests: u64::from(plan.block_requests.max(1)),
        }
    }

    /// The reader's hook: at the `request_end` of every `block_requests`-th
    /// request after the first (cold) one, start the next block.
    pub(crate) fn hook(&self) -> MarkerHook {
        let pause = Arc::clone(&self.pause);
        let switches = Arc::clone(&self.switches);
        let per = self.block_requests;
        Box::new(move |m: &Marker| {
            if m.phase != Phase::RequestEnd {
                return;
            }
            let Some(id) = m.request_id.filter(|id| *id >= 1 && id % per == 0) else {
                return;
            };
            let block = id / per;
            let sampled = block_sampled(block);
            pause.store(!sampled, Ordering::Relaxed);
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
