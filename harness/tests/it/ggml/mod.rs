//! ggml-container's library on the real tiny.en and base models: the
//! CTranslate2 converter, decoder-only derivation and its corpus, ggml's
//! quantizer, and what stock whisper.cpp loads. They live here, not in
//! ggml-container, because the harness builds those models when the cache
//! lacks them ([`crate::common::model`]); ggml-container's own tests use
//! synthetic models only.

mod artifacts;
mod quantize;
mod real_models;
mod stock_loader;
