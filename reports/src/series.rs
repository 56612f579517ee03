//! Reading an arm's `series.csv` back (the external sampler's rows), for
//! the pages and the trace that draw it.

use crate::ReportError;
use crate::record::files;
use run_dir::RunDir;
use sampler::SeriesRow;

/// Every row of an arm's `series.csv` (none when the file is absent).
pub fn series_rows(run: &RunDir, arm: &str) -> Result<Vec<SeriesRow>, ReportError> {
    let rel = run.arm(arm)?.join(files::SERIES);
    let Some(mut reader) = run.csv_reader(&rel)? else {
        return Ok(Vec::new());
    };
    reader
        .deserialize::<SeriesRow>()
        .enumerate()
        .map(|(line, row)| {
            row.map_err(|e| ReportError::Record {
                path: run.display(&rel),
                line: line as u64 + 2,
                reason: e.to_string(),
            })
        })
        .collect()
}
