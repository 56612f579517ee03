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
}
