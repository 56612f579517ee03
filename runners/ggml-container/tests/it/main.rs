//! ggml-container's integration tests, one binary (linking once instead of
//! once per file). `tests/hashing_thread.rs` stays a binary of its own: it
//! counts the threads of its process, which the parser tests here start.

mod artifacts;
mod never_panics;
mod parser;
mod quantize;
mod real_models;
mod stock_loader;
mod synthetic;
