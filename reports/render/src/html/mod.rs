//! `report.html`: one self-contained page a reviewer decides from, readable
//! offline (inline CSS and SVG, no script, no external asset).
//!
//! The page is an output layer: [`render`] takes the receipt and the
//! run-directory data it draws ([`PageData`], read through
//! [`run_dir::RunDir`] by [`PageData::read`]) and nothing else. HTML comes
//! from maud templates ([`sections`]), which escape every value; the CSS
//! is `reports/render/assets/report.css`, inlined.
//!
//! Layout, top to bottom:
//! - the verdict: the run verdict and each gated arm's gates;
//! - the comparison ([`compare`], [`compare_charts`]): the failing gates in
//!   one sentence each (Δ, Δ %, limit, and whisper.cpp's logged buffers as
//!   the reason), the arm matrix (arms as rows, key metrics as columns, Δ
//!   against each arm's control), one picture per gate (peak per phase with
//!   the limit drawn; latency ECDFs with the limits), logged against
//!   measured state cost, every arm's memory curve on one axis aligned by
//!   phase, the latency ECDFs overlaid, and the identity and topology keys
//!   that differ between arms;
//! - when an arm had an external encoder process, the worker and that
//!   process by phase, stacked ([`ladder_chart`]);
//! - every check with its evidence links;
//! - per arm: its memory chart, soak growth and history, peaks by phase,
//!   latency and its distribution, overhead blocks, transcript differences,
//!   WER, and its raw runtime fields (folded);
//! - the run's identity (folded).
//!
//! Long series are drawn from a min/max envelope per pixel bucket
//! ([`envelope`]), which keeps every bucket's extremes and so every local
//! peak; the receipt and `series.csv` keep the raw data.

/// `assets/report.css`: the report page's style, which the ladder page
/// inlines too.
const STYLE: &str = include_str!("../../assets/report.css");

mod arm_chart;
mod attribution;
pub mod compare;
pub mod compare_charts;
mod coreml;
mod device;
pub mod ladder_chart;
mod residency;
mod sections;

pub use arm_chart::{Point, envelope, memory_chart};

use reports::ReportError;
use reports::receipt::Receipt;
use reports::series::SeriesPoint;
use reports::soak_history::SoakHistory;
use run_dir::RunDir;
use std::collections::BTreeMap;

pub use run_dir::names::REPORT_HTML as FILE;

const MIB: f64 = 1048576.0;

/// What the page draws from the run directory beside the receipt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageData {
    /// Arm id → the time of its first series row (markers are placed
    /// relative to it) and its series.
    pub series: BTreeMap<String, (u64, Vec<Point>)>,
    /// Arm id → (rows in `series.csv`, bucket width in ns) for a series
    /// drawn from its min/max envelope; absent when every row is drawn.
    pub reduced: BTreeMap<String, (u64, u64)>,
    /// Arm id → its measured request latencies, in order.
    pub latencies_ns: BTreeMap<String, Vec<u64>>,
    /// A soak's past nights (`soak-history.json`), when it kept them.
    pub history: Option<SoakHistory>,
}

impl PageData {
    /// Every arm's series and latencies, and the soak history.
    pub fn read(run: &RunDir, r: &Receipt) -> Result<PageData, ReportError> {
        let series = reports::series::points_by_arm(run, r.arms.iter().map(|a| a.id.as_str()))?;
        PageData::read_with(run, r, &series)
    }

    /// The same, with each arm's series already read (`report` reads it once
    /// for the page and the trace).
    pub fn read_with(
        run: &RunDir,
        r: &Receipt,
        series: &reports::series::SeriesPoints,
    ) -> Result<PageData, ReportError> {
        let mut data = PageData::default();
        for arm in &r.arms {
            let drawn = series.get(&arm.id);
            let raw = drawn.map_or(&[][..], |d| d.points.as_slice());
            if let Some((rows, bucket_ns)) = drawn.and_then(|d| Some((d.rows, d.bucket_ns?))) {
                data.reduced.insert(arm.id.clone(), (rows, bucket_ns));
            }
            let (t0, points) = page_points(raw);
            data.series
                .insert(arm.id.clone(), (t0.unwrap_or(0), points));
            data.latencies_ns
                .insert(arm.id.clone(), read_latencies(run, &arm.id)?);
        }
        data.history = reports::soak_history::read(run)?;
        Ok(data)
    }
}

/// Series rows as the page draws them: seconds from the first row, MiB.
fn page_points(raw: &[SeriesPoint]) -> (Option<u64>, Vec<Point>) {
    let t0 = raw.first().map(|p| p.t_ns);
    let start = t0.unwrap_or(0);
    let points = raw
        .iter()
        .map(|row| Point {
            t_s: row.t_ns.saturating_sub(start) as f64 / 1e9,
            resident_mib: row.resident_bytes.map(|b| b as f64 / MIB),
            footprint_mib: row.footprint_bytes.map(|b| b as f64 / MIB),
        })
        .collect();
    (t0, points)
}

/// An arm's measured request latencies, in order (`results.jsonl`).
pub fn read_latencies(run: &RunDir, arm: &str) -> Result<Vec<u64>, ReportError> {
    let mut out = Vec::new();
    run.for_each_jsonl(
        &run.arm(arm)?.join(reports::record::files::RESULTS),
        |_, r: worker_contract::RequestResult| {
            out.push(r.latency_ns);
            Ok(())
        },
    )?;
    Ok(out)
}

/// The page, from the receipt and the data read from its run directory.
pub fn render(r: &Receipt, data: &PageData) -> String {
    sections::page(r, data).into_string()
}
