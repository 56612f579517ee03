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
    /// The shared state of a block run laid out as `plan`.
    pub fn new(plan: &BlockPlan) -> Self {
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

    /// Every switch between blocks so far, in order.
    pub fn switches(&self) -> Vec<Switch> {
        self.switches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker of `phase` for request `id`: all the hook reads.
    fn marker(phase: Phase, id: u64) -> Marker {
        Marker {
            phase,
            seq: 0,
            request_id: Some(id),
            t_ns: id * 10,
            memory: sampler::TaskMemory::default(),
            system: None,
            cpu: None,
        }
    }

    #[test]
    fn the_hook_switches_abba_after_every_block_of_requests() {
        let toggle = BlockToggle::new(&BlockPlan {
            quads: 6,
            block_requests: 2,
            injected_busy_us: 0,
            toggles: OverheadToggle::Sampler,
        });
        let mut hook = toggle.hook();
        let mut paused = Vec::new();
        for id in 0..=10u64 {
            hook(&marker(Phase::RequestBegin, id));
            hook(&marker(Phase::RequestEnd, id));
            paused.push(toggle.pause.load(Ordering::Relaxed));
        }
        // Request 0 is cold; blocks of 2 from request 1: A(1,2) B(3,4) B(5,6) A(7,8) A(9,10) B…
        assert_eq!(
            paused,
            [
                false, false, true, true, true, true, false, false, false, false, true
            ]
        );
        let s = toggle.switches();
        let blocks: Vec<(u64, u64, bool)> = s
            .iter()
            .map(|s| (s.after_request, s.block, s.sampled))
            .collect();
        assert_eq!(
            blocks,
            [
                (2, 1, false),
                (4, 2, false),
                (6, 3, true),
                (8, 4, true),
                (10, 5, false)
            ]
        );
    }

    #[test]
    fn toggling_attribution_logs_the_blocks_but_never_pauses_the_sampler() {
        let toggle = BlockToggle::new(&BlockPlan {
            quads: 6,
            block_requests: 2,
            injected_busy_us: 0,
            toggles: OverheadToggle::Attribution,
        });
        assert_eq!(toggle.worker_toggles_every(), Some(2));
        let mut hook = toggle.hook();
        for id in 0..=10u64 {
            hook(&marker(Phase::RequestEnd, id));
            assert!(!toggle.pause.load(Ordering::Relaxed), "request {id}");
        }
        let sampled: Vec<bool> = toggle.switches().iter().map(|s| s.sampled).collect();
        assert_eq!(sampled, [false, false, true, true, false]);
    }
}
