//! Every output a memqual receipt is rendered into, and nothing else.
//!
//! Each format reads a [`reports::Receipt`] (and, for the pages and the
//! trace, the run-directory data they draw, read through
//! [`run_dir::RunDir`]); none assembles, judges or seals. The receipt is
//! the one source: what is here changes how a run looks, never what it says.
//!
//! - [`html`]: `report.html`, self-contained, comparison first: maud
//!   templates (escaped) with plotters SVG charts and `assets/report.css`.
//! - [`latency_chart`]: the per-arm latency distribution (strip plot).
//! - [`outputs`]: `summary.md`, `phases.csv`, `trace.json` (Chrome trace),
//!   and [`outputs::write_all`], which writes every derived file of a run.
//! - [`junit`]: JUnit XML (one test case per gate check).
//! - [`bmf`]: the run's metrics in Bencher Metric Format.
//! - [`fleet_html`]: the page of a fleet report ([`fleet::fleet`]).

// Every public item says what it means: the harness and the CI formats rely on these docs.
#![warn(missing_docs)]

pub mod bmf;
pub mod fleet_html;
pub mod html;
pub mod junit;
pub mod latency_chart;
pub mod outputs;
