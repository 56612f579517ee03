//! ggml-container's integration tests, one binary (linking once instead of
//! once per file). `tests/hashing_thread.rs` stays a binary of its own: it
//! counts the threads of its process, which the parser tests here start.
//! The tests on the real tiny.en and base models live with the harness's
//! (`harness/tests/it/ggml/`), which builds those models when the cache
//! lacks them: this crate cannot, and a test must never pass by skipping.

mod never_panics;
mod parser;
mod synthetic;
