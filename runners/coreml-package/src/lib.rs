//! Reading a Core ML model as whisper.cpp's encoder sidecar: a portable
//! package (`.mlpackage`) or a compiled model (`.mlmodelc`).
//!
//! Contract:
//! - [`read_model`] lists the tree first and refuses a symbolic link, FIFO,
//!   socket or device anywhere in it (never followed, never opened), a name
//!   that is not UTF-8, and a tree larger than [`walk::MAX_ENTRIES`] or
//!   deeper than [`walk::MAX_DEPTH`]. Every file it reads is read whole,
//!   bounded (a file over its limit is an error naming it).
//! - A `.mlpackage` is read through `Manifest.json` to its root model,
//!   decoded as Core ML's `Model.proto` with only the fields memqual needs
//!   ([`proto`]); a truncated or damaged file, a model without a
//!   description, or a weight file the program names but the package lacks
//!   (or is too short for) is an error naming the file.
//! - A `.mlmodelc` is read where it is text (`metadata.json`, `model.mil`);
//!   what is not read is listed in the report with the reason.
//! - [`whisper::check_encoder`] compares the features with what whisper.cpp
//!   1.8.3 binds for a GGML model's dimensions.
//!
//! Not here: digests of the tree (the `sampler` crate's tree digest, which
//! the whisper worker records too), the GGML model (`ggml-container`), and
//! running or compiling a model, which takes a Mac.

#![warn(missing_docs)]

mod error;
mod mlmodelc;
mod mlpackage;
mod program;
pub mod proto;
mod report;
pub mod walk;
pub mod whisper;

pub use error::CoremlError;
pub use report::{
    DenseWeights, Feature, Format, ModelReport, NotRead, PalettizedWeights, WeightStorage,
};
use std::path::Path;

/// Read the Core ML model at `path` (a `.mlpackage` or `.mlmodelc`
/// directory; a link to one is resolved first, links inside are refused).
/// Which form it is comes from its contents: `Manifest.json` makes a
/// package, `coremldata.bin` a compiled model.
pub fn read_model(path: &Path) -> Result<ModelReport, CoremlError> {
    let root = std::fs::canonicalize(path).map_err(|source| CoremlError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let tree = walk::walk(&root)?;
    if tree.file(mlpackage::MANIFEST).is_some() {
        mlpackage::read(&root, &tree)
    } else if tree.file(mlmodelc::COREMLDATA).is_some() {
        mlmodelc::read(&root, &tree)
    } else {
        Err(CoremlError::UnknownLayout { path: root })
    }
}
