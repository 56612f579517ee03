//! Reading an arm's `series.csv` back (the external sampler's rows), for
//! the pages and the trace that draw it.
//!
//! The drawings need three columns of rows a soak writes by the hundred
//! thousand (576,000 for 8 h at 50 ms), so [`for_each_point`] streams them
//! through one reused record and parses only those columns: collecting every
//! row as a [`SeriesRow`] cost over a kilobyte a row and most of `memqual
//! report`'s time.

use crate::ReportError;
use crate::record::files;
use run_dir::RunDir;
use sampler::SeriesRow;

/// Every row of an arm's `series.csv` (none when the file is absent).
pub fn series_rows(run: &RunDir, arm: &str) -> Result<Vec<SeriesRow>, ReportError> {
    rows_at(run, &run.arm(arm)?.join(files::SERIES))
}

/// Every row of the series file at `rel` (none when it is absent).
pub fn rows_at(run: &RunDir, rel: &run_dir::Rel) -> Result<Vec<SeriesRow>, ReportError> {
    let mut rows = Vec::new();
    for_each_row(run, rel, |row| rows.push(row))?;
    Ok(rows)
}

/// Call `f` with each row of the series file at `rel`, in order, without
/// holding them (nothing when the file is absent). A row that does not
/// parse is an error naming its line.
pub fn for_each_row(
    run: &RunDir,
    rel: &run_dir::Rel,
    mut f: impl FnMut(SeriesRow),
) -> Result<(), ReportError> {
    let Some(mut reader) = run.csv_reader(rel)? else {
        return Ok(());
    };
    for (line, row) in reader.deserialize::<SeriesRow>().enumerate() {
        f(row.map_err(|e| ReportError::Record {
            path: run.display(rel),
            line: line as u64 + 2,
            reason: e.to_string(),
        })?);
    }
    Ok(())
}

/// Time and footprint of every row of the series file at `rel`, as the
/// residency section reads them (none when the file is absent).
pub fn footprint_rows(
    run: &RunDir,
    rel: &run_dir::Rel,
) -> Result<Vec<analysis::residency::FootprintRow>, ReportError> {
    let mut rows = Vec::new();
    for_each_row(run, rel, |row| rows.push((row.t_ns, row.footprint_bytes)))?;
    Ok(rows)
}

/// One row's drawn values: its time and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesPoint {
    /// Monotonic time of the tick, ns.
    pub t_ns: u64,
    /// `resident_bytes`, when the row has it.
    pub resident_bytes: Option<u64>,
    /// `footprint_bytes`, when the row has it.
    pub footprint_bytes: Option<u64>,
}

/// Arm id → its series' drawn points, in order.
pub type SeriesPoints = std::collections::BTreeMap<String, Vec<SeriesPoint>>;

/// Every arm's drawn points, read once for the page and the trace together.
pub fn points_by_arm(
    run: &RunDir,
    arms: impl IntoIterator<Item = impl AsRef<str>>,
) -> Result<SeriesPoints, ReportError> {
    let mut out = SeriesPoints::new();
    for arm in arms {
        let mut points = Vec::new();
        for_each_point(run, arm.as_ref(), |p| points.push(p))?;
        out.insert(arm.as_ref().to_string(), points);
    }
    Ok(out)
}

/// Call `f` with each row's [`SeriesPoint`], in order, reading the file once
/// with one reused record (nothing when the file is absent). A row whose
/// value is not a number is an error naming its line.
pub fn for_each_point(
    run: &RunDir,
    arm: &str,
    mut f: impl FnMut(SeriesPoint),
) -> Result<(), ReportError> {
    let rel = run.arm(arm)?.join(files::SERIES);
    let Some(mut reader) = run.csv_reader(&rel)? else {
        return Ok(());
    };
    let bad = |line: u64, reason: String| ReportError::Record {
        path: run.display(&rel),
        line,
        reason,
    };
    let headers = reader
        .byte_headers()
        .map_err(|e| bad(1, e.to_string()))?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h == name.as_bytes());
    let t_col = column("t_ns").ok_or_else(|| bad(1, "no t_ns column".into()))?;
    let (rss_col, fp_col) = (column("resident_bytes"), column("footprint_bytes"));
    let mut record = csv::ByteRecord::new();
    let mut line = 1u64;
    loop {
        line += 1;
        match reader.read_byte_record(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(bad(line, e.to_string())),
        }
        let number = |col: Option<usize>, name: &str| -> Result<Option<u64>, ReportError> {
            match col.and_then(|c| record.get(c)) {
                None | Some(b"") => Ok(None),
                Some(v) => std::str::from_utf8(v)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .map(Some)
                    .ok_or_else(|| {
                        bad(
                            line,
                            format!("{name}: not a number: {:?}", String::from_utf8_lossy(v)),
                        )
                    }),
            }
        };
        let t_ns = number(Some(t_col), "t_ns")?.ok_or_else(|| bad(line, "t_ns is empty".into()))?;
        f(SeriesPoint {
            t_ns,
            resident_bytes: number(rss_col, "resident_bytes")?,
            footprint_bytes: number(fp_col, "footprint_bytes")?,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_stream_the_drawn_columns_and_name_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        let rows = [
            SeriesRow {
                t_ns: 10,
                resident_bytes: Some(4096),
                footprint_bytes: Some(1024),
                ..SeriesRow::default()
            },
            SeriesRow {
                t_ns: 20,
                resident_bytes: None,
                ..SeriesRow::default()
            },
        ];
        let arm = run.arm("a").unwrap();
        run.create_dir(&arm).unwrap();
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &rows {
            w.serialize(r).unwrap();
        }
        let text = w.into_inner().unwrap();
        run.write_bytes(&arm.join(files::SERIES), &text).unwrap();
        let mut got = Vec::new();
        for_each_point(&run, "a", |p| got.push(p)).unwrap();
        assert_eq!(
            got,
            [
                SeriesPoint {
                    t_ns: 10,
                    resident_bytes: Some(4096),
                    footprint_bytes: Some(1024)
                },
                SeriesPoint {
                    t_ns: 20,
                    resident_bytes: None,
                    footprint_bytes: None
                },
            ]
        );
        // The same rows as the full reader sees them.
        let full = series_rows(&run, "a").unwrap();
        assert_eq!(full.len(), 2);
        assert_eq!(full[0].resident_bytes, got[0].resident_bytes);

        let mut bad = String::from_utf8(text).unwrap();
        bad = bad.replacen(",4096,", ",4x96,", 1);
        run.write_bytes(&arm.join(files::SERIES), bad.as_bytes())
            .unwrap();
        let err = for_each_point(&run, "a", |_| {}).unwrap_err().to_string();
        assert!(err.contains("4x96") && err.contains('2'), "{err}");
    }
}
