//! The patch set's portable headers, tested through both compilations: the
//! encoder-output checks and the Core ML placement summary.

mod output;
mod placement;
