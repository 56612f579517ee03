//! whisper.cpp's legacy GGML model container, in one place.
//!
//! Contract:
//! - [`inspect`] parses a model strictly and in one streaming pass (bounded
//!   memory, hashing as it reads) against the tensor inventory whisper.cpp
//!   1.8.3 expects for the file's own header ([`ExpectedInventory`]), in
//!   [`Expect::Full`], [`Expect::DecoderOnly`] or [`Expect::EncoderOnly`]
//!   form. It accepts a file only if every byte is accounted for: known
//!   names, no duplicates, none missing, dims and ggml types exactly as the
//!   loader reads them, whole payloads, no trailing bytes. Anything else is a [`ParseError`] naming the [`Defect`],
//!   the byte offset and the record. It never panics, whatever the input.
//! - [`GgmlWriter`] lays out header, mel filters, vocabulary and records.
//! - [`record_order`] is the reference conversion's record order, which the
//!   CTranslate2 converter (crate `ct2-convert`) and [`synthetic`] write in;
//!   [`synthetic`] writes deterministic models, small or at real Whisper
//!   shapes (streaming, steered to end decoding at once).
//! - Artifact tools: [`derive`] (lossless decoder-only or encoder-only
//!   derivatives with a sealed receipt), [`corpus`] (negative controls with
//!   the rejection each must get), [`estimate`] (whisper.cpp's state
//!   arithmetic) and, with the `quantize` feature, [`quantize`] (ggml's
//!   quantizer via whisper-rs).
//!
//! Not here: running whisper.cpp or any CLI; the `memqual` binary and the
//! whisper worker build on this crate. The worker's pre-validation is
//! `inspect(path, Expect::Full)` (or `DecoderOnly` for stripped artifacts).

// Every public item says what it is: the worker, the CLI and the tools read
// models only through this crate, and its types end up in receipts.
#![warn(missing_docs)]

pub mod cache;
pub mod corpus;
pub mod derive;
pub mod digest;
mod error;
pub mod estimate;
mod expect;
mod inventory;
pub mod mel;
pub mod numbers;
mod order;
mod parse;
#[cfg(feature = "quantize")]
pub mod quantize;
pub mod synthetic;
mod types;
mod write;

pub use error::{Defect, ParseError, Section};
pub use expect::{ExpectedInventory, ExpectedTensor, class_of};
pub use inventory::{ClassTotal, ClassTotals, Inventory, MelInfo, TensorRecord, VocabInfo};
pub use order::record_order;
pub use parse::{MAX_NAME_LEN, MEL_N_FFT, inspect, inspect_reader};
pub use types::{
    Expect, Ftype, GGML_MAGIC, GgmlType, HEADER_LEN, Hparams, MAX_DIM, MAX_LAYERS, ModelFamily,
    QUANTIZATION_VERSION, QUANTIZATION_VERSION_FACTOR, TensorClass,
};
pub use write::GgmlWriter;
