//! One trait every receipt format implements, after hyperfine's `Exporter`:
//! a format is a value holding what it draws besides the receipt (the
//! series for the trace, the page's data for `report.html`, the calibration
//! checks for JUnit), and [`Exporter::export`] turns a [`Receipt`] into the
//! format's text without touching a file. Reading the run directory is the
//! caller's one step before ([`write_all`] does it for a run's own files); writing is the caller's one step after.

use crate::html::PageData;
use reports::ReportError;
use reports::calibration::CalibrationCheck;
use reports::receipt::Receipt;
use reports::series::SeriesPoints;
use run_dir::{Rel, RunDir};

/// A format a receipt is rendered into.
pub trait Exporter {
    /// The file it is written to in a run directory, or the format's name
    /// where the user picks the path (`--junit`, `--bmf`).
    fn file_name(&self) -> &'static str;

    /// The format's text for `receipt`; an error only where the format
    /// cannot represent what it was given.
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError>;
}

/// `summary.md`: the verdict and key numbers, ready to paste into a review.
pub struct SummaryMarkdown;

impl Exporter for SummaryMarkdown {
    fn file_name(&self) -> &'static str {
        crate::outputs::names::SUMMARY
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        Ok(crate::outputs::summary_markdown(receipt))
    }
}

/// `phases.csv`: every arm's phase table.
pub struct PhasesCsv;

impl Exporter for PhasesCsv {
    fn file_name(&self) -> &'static str {
        crate::outputs::names::PHASES
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        crate::outputs::phases_csv(receipt)
    }
}

/// `trace.json` (Chrome trace events) over each arm's series.
pub struct TraceJson<'a> {
    /// Arm id → its series rows, read once by the caller.
    pub series: &'a SeriesPoints,
}

impl Exporter for TraceJson<'_> {
    fn file_name(&self) -> &'static str {
        crate::outputs::names::TRACE
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        crate::outputs::trace_json(receipt, self.series)
    }
}

/// `report.html`, self-contained.
pub struct ReportHtml<'a> {
    /// The series, latencies and history the page draws.
    pub data: &'a PageData,
}

impl Exporter for ReportHtml<'_> {
    fn file_name(&self) -> &'static str {
        crate::html::FILE
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        Ok(crate::html::render(receipt, self.data))
    }
}

/// JUnit XML: one test case per gate check, calibration check and soak
/// regression.
pub struct JUnit<'a> {
    /// The calibration arms' checks against their known allocations.
    pub calibration: &'a [CalibrationCheck],
    /// A nightly soak's regressions against its history.
    pub soak_regressions: &'a [String],
}

impl Exporter for JUnit<'_> {
    fn file_name(&self) -> &'static str {
        "JUnit XML"
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        let report = crate::junit::report(receipt, self.calibration, self.soak_regressions);
        crate::junit::to_xml(&report)
    }
}

/// The run's metrics in Bencher Metric Format (pretty JSON).
pub struct Bmf;

impl Exporter for Bmf {
    fn file_name(&self) -> &'static str {
        "Bencher Metric Format"
    }
    fn export(&self, receipt: &Receipt) -> Result<String, ReportError> {
        serde_json::to_string_pretty(&crate::bmf::build(receipt)).map_err(|e| {
            ReportError::Invalid {
                path: "bmf".into(),
                reason: format!("cannot serialize the BMF metrics: {e}"),
            }
        })
    }
}

/// Write every derived report into the run directory, each atomically.
pub fn write_all(run: &RunDir, r: &Receipt) -> Result<(), ReportError> {
    let series = reports::series::points_by_arm(run, r.arms.iter().map(|a| a.id.as_str()))?;
    write_all_with(run, r, &series)
}

/// [`write_all`] with each arm's series already read
/// ([`reports::assemble_with_series`]).
pub fn write_all_with(run: &RunDir, r: &Receipt, series: &SeriesPoints) -> Result<(), ReportError> {
    let data = crate::html::PageData::read_with(run, r, series)?;
    let formats: [&dyn Exporter; 4] = [
        &SummaryMarkdown,
        &PhasesCsv,
        &TraceJson { series },
        &ReportHtml { data: &data },
    ];
    for format in formats {
        let text = format.export(r)?;
        run.write_bytes(&Rel::file(format.file_name()), text.as_bytes())?;
    }
    Ok(())
}
