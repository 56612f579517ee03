//! The harness's integration tests, one binary (linking once instead of once
//! per file): each module runs the real `memqual` binary, and the workers
//! beside it, on real fixtures. Two suites stay binaries of their own,
//! because they need the process or the host to themselves:
//! `tests/soak.rs` judges host-wide series (shared memory, swap) that the
//! tests here move, and `tests/soak_memory.rs` measures this process's own
//! peak resident size.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod artifact;
mod artifacts_in_worker;
mod attribution;
mod bisect;
mod bounds;
mod browser;
mod calibration;
mod cancel;
mod ci;
mod cmake_bootstrap;
mod coreml;
mod ct2;
mod evidence;
mod failures;
mod fixtures;
mod gates;
mod generated_soak;
mod ggml;
mod idle_policies;
mod import;
mod integrity;
mod ladder;
mod ladder_chart;
mod lifecycle;
mod loaded_bytes;
mod long_form;
mod memory_ceiling;
mod module_deps;
mod module_graph;
mod overhead;
mod prerequisites;
mod qoi_throughput;
mod realtime_worker;
mod snapshots;
mod user_corpus;
mod whisper;
