//! Every output a memqual receipt is rendered into, and nothing else.
//!
//! Each format implements [`export::Exporter`]: it turns a
//! [`reports::Receipt`] (with what it draws beside it, read once by the
//! caller) into text and never opens a file; none assembles, judges or
//! seals. The receipt is the one source: what is here changes how a run
//! looks, never what it says.
//!
//! - [`export`]: the trait and one implementation per format.
//! - [`html`]: `report.html`, self-contained, comparison first: maud
//!   templates (escaped) with plotters SVG charts and `assets/report.css`.
//! - [`latency_chart`]: the per-arm latency distribution (strip plot).
//! - [`outputs`]: `summary.md`, `phases.csv`, `trace.json` (Chrome trace),
//!   each behind its exporter in [`export`], whose [`export::write_all`]
//!   writes every derived file of a run.
//! - [`junit`]: JUnit XML (one test case per gate check).
//! - [`bmf`]: the run's metrics in Bencher Metric Format.
//! - [`fleet_html`]: the page of a fleet report ([`fleet::fleet`]).

// Every public item says what it means: the harness and the CI formats rely on these docs.
#![warn(missing_docs)]

pub mod bmf;
pub mod export;
pub mod fleet_html;
pub mod html;
pub mod junit;
pub mod latency_chart;
pub mod outputs;
