//! Allocation attribution as the worker receives it: which allocator
//! profiler watches it and where its profiles go.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// jemalloc's `lg_prof_sample` memqual sets: one sample per 2^14 bytes
/// allocated on average (16 KiB), so a block of a few hundred KiB or more
/// is almost surely sampled and small churn costs little.
pub const LG_PROF_SAMPLE: u8 = 14;

/// How the worker's allocations are attributed to sites, when they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "profiler", rename_all = "snake_case", deny_unknown_fields)]
pub enum HeapProfiling {
    /// Linux: jemalloc's sampling heap profiler, preloaded by the harness.
    /// After each phase marker the worker asks it (`mallctl("prof.dump")`)
    /// for a heap profile, `<seq>-<phase>.heap` in `dir`.
    Jemalloc {
        /// The folder the profiles go to (the arm's `heap/`), absolute.
        dir: PathBuf,
        /// The `lg_prof_sample` the harness gave jemalloc: the mean
        /// sampling interval is 2^N bytes. The worker checks jemalloc runs
        /// with it.
        #[schemars(range(min = 0, max = 62))]
        lg_prof_sample: u8,
        /// Set only in an overhead gate's block run with `toggles =
        /// "attribution"`: after the `request_end` that closes each block of
        /// this many requests, the worker switches jemalloc's sampling
        /// (`prof.active`) on for A blocks and off for B ones
        /// ([`block_starting_after`], [`abba_block_a`]), so one worker's
        /// requests compare sampled against unsampled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1))]
        toggle_every: Option<u32>,
    },
    /// macOS: the worker runs under `MallocStackLogging=lite`, and the
    /// harness captures `malloc_history PID -allBySize` at each marker;
    /// the worker does nothing itself.
    MallocStackLogging,
}

/// Whether the worker profiles its heap right after the marker of `phase`
/// (of request `request_id`): every phase outside requests, and the first
/// measured request's two. The receipt attributes the same phases; a
/// soak's every request would otherwise write thousands of profiles.
pub fn profiles_marker(phase: sampler::Phase, request_id: Option<u64>) -> bool {
    !phase.is_request() || request_id == Some(0)
}

/// The ABBA block that starts after request `request_id` ends, in blocks of
/// `block_requests` measured requests after the first (cold) one: blocks
/// start after requests `n`, `2n`, `3n`, …; `None` after any other request.
/// The harness's overhead block run and the worker both switch here.
pub fn block_starting_after(request_id: u64, block_requests: u64) -> Option<u64> {
    let per = block_requests.max(1);
    (request_id >= 1 && request_id.is_multiple_of(per)).then_some(request_id / per)
}

/// Whether ABBA block `index` (from 0) is an A block: A B B A, A B B A, …
pub fn abba_block_a(index: u64) -> bool {
    matches!(index % 4, 0 | 3)
}

/// The file name of the heap profile taken right after marker `seq` of
/// `phase`: `0002-state_ready.heap`.
pub fn heap_profile_name(seq: u64, phase: &str) -> String {
    format!("{seq:04}-{phase}.heap")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_reads_back_and_names_sort_by_sequence() {
        let spec = HeapProfiling::Jemalloc {
            dir: "/r/arms/a/heap".into(),
            lg_prof_sample: LG_PROF_SAMPLE,
            toggle_every: None,
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            json,
            r#"{"profiler":"jemalloc","dir":"/r/arms/a/heap","lg_prof_sample":14}"#
        );
        assert_eq!(serde_json::from_str::<HeapProfiling>(&json).unwrap(), spec);
        assert_eq!(heap_profile_name(2, "state_ready"), "0002-state_ready.heap");
        assert!(heap_profile_name(9, "x") < heap_profile_name(10, "a"));
        use sampler::Phase;
        assert!(profiles_marker(Phase::StateReady, None));
        assert!(profiles_marker(Phase::RequestEnd, Some(0)));
        assert!(!profiles_marker(Phase::RequestBegin, Some(1)));
    }

    #[test]
    fn blocks_start_after_every_nth_request_in_abba_order() {
        let starts: Vec<(u64, u64)> = (0..=9)
            .filter_map(|id| block_starting_after(id, 3).map(|b| (id, b)))
            .collect();
        // Request 0 is cold: block 0 is requests 1..=3, block 1 starts after 3.
        assert_eq!(starts, [(3, 1), (6, 2), (9, 3)]);
        assert_eq!(block_starting_after(0, 1), None);
        assert_eq!(block_starting_after(5, 0), Some(5), "0 counts as 1");
        let order: Vec<bool> = (0..8).map(abba_block_a).collect();
        assert_eq!(order, [true, false, false, true, true, false, false, true]);
        let toggled = HeapProfiling::Jemalloc {
            dir: "/r/h".into(),
            lg_prof_sample: 14,
            toggle_every: Some(2),
        };
        let json = serde_json::to_string(&toggled).unwrap();
        assert!(json.ends_with(r#""toggle_every":2}"#), "{json}");
        assert_eq!(
            serde_json::from_str::<HeapProfiling>(&json).unwrap(),
            toggled
        );
    }
}
