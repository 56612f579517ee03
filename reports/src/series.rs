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

/// The idle windows' footprints of `markers` from the series file at
/// `rel`, streamed (none when the file is absent).
pub fn idle_footprints(
    run: &RunDir,
    rel: &run_dir::Rel,
    markers: &[sampler::Marker],
) -> Result<analysis::residency::IdleFootprints, ReportError> {
    let mut pools = analysis::residency::IdleFootprints::new(markers);
    for_each_row(run, rel, |row| pools.row((row.t_ns, row.footprint_bytes)))?;
    Ok(pools)
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

/// An arm's series as the page and the trace draw it: every row while the
/// series is short, a min/max envelope of it once it is long.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrawnSeries {
    /// The drawn points, in time order.
    pub points: Vec<SeriesPoint>,
    /// Rows the series had.
    pub rows: u64,
    /// `None` when every row is drawn; else the width (ns) of the buckets
    /// each reduced to its rows of least and greatest resident and
    /// footprint bytes.
    pub bucket_ns: Option<u64>,
}

/// Arm id → its drawn series.
pub type SeriesPoints = std::collections::BTreeMap<String, DrawnSeries>;

/// Rows drawn as they are; a longer series becomes an envelope.
pub const DRAWN_ROWS: usize = 8192;
/// Buckets an envelope keeps at most (each at most four rows): a day of
/// 50 ms ticks and ten minutes of them take the same memory.
pub const ENVELOPE_BUCKETS: usize = 4096;

/// One bucket of an envelope: the rows that hold its extremes.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    index: u64,
    min_resident: Option<SeriesPoint>,
    max_resident: Option<SeriesPoint>,
    min_footprint: Option<SeriesPoint>,
    max_footprint: Option<SeriesPoint>,
}

impl Bucket {
    fn new(index: u64) -> Self {
        Bucket {
            index,
            min_resident: None,
            max_resident: None,
            min_footprint: None,
            max_footprint: None,
        }
    }

    /// Fold `p` in; on a tie the earlier row stays.
    fn take(&mut self, p: SeriesPoint) {
        let keep = |slot: &mut Option<SeriesPoint>, value: fn(&SeriesPoint) -> Option<u64>, max| {
            let Some(v) = value(&p) else { return };
            let better = match slot.as_ref().and_then(value) {
                None => true,
                Some(old) if max => v > old,
                Some(old) => v < old,
            };
            if better {
                *slot = Some(p);
            }
        };
        keep(&mut self.min_resident, |p| p.resident_bytes, false);
        keep(&mut self.max_resident, |p| p.resident_bytes, true);
        keep(&mut self.min_footprint, |p| p.footprint_bytes, false);
        keep(&mut self.max_footprint, |p| p.footprint_bytes, true);
    }

    fn points(&self) -> impl Iterator<Item = SeriesPoint> {
        [
            self.min_resident,
            self.max_resident,
            self.min_footprint,
            self.max_footprint,
        ]
        .into_iter()
        .flatten()
    }
}

/// Builds a [`DrawnSeries`] from rows pushed in time order, in memory that
/// does not grow with the series: the first [`DRAWN_ROWS`] rows are kept as
/// they are; past them, rows fall into at most [`ENVELOPE_BUCKETS`] buckets
/// of equal time, each keeping only the rows of its least and greatest
/// resident and footprint bytes. A bucket that would be the
/// `ENVELOPE_BUCKETS + 1`-th doubles the width and merges neighbours. Every
/// maximum and minimum of the series, a one-tick spike included, is a
/// bucket's extreme and so is drawn at its own time and value.
#[derive(Debug, Default)]
pub struct EnvelopeBuilder {
    raw: Vec<SeriesPoint>,
    buckets: Vec<Bucket>,
    t0_ns: u64,
    width_ns: u64,
    rows: u64,
}

impl EnvelopeBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take the next row.
    pub fn push(&mut self, p: SeriesPoint) {
        self.rows += 1;
        if self.width_ns == 0 {
            self.raw.push(p);
            if self.raw.len() > DRAWN_ROWS {
                self.start_buckets();
            }
            return;
        }
        self.bucket(p);
    }

    /// The first rows did not fit as they are: bucket them, with a width
    /// that leaves room for the series to go on as long again.
    fn start_buckets(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        self.t0_ns = raw.first().map_or(0, |p| p.t_ns);
        let span = raw.last().map_or(0, |p| p.t_ns).saturating_sub(self.t0_ns);
        self.width_ns = (span / (ENVELOPE_BUCKETS as u64 / 4)).max(1);
        for p in raw {
            self.bucket(p);
        }
    }

    fn bucket(&mut self, p: SeriesPoint) {
        let mut index = p.t_ns.saturating_sub(self.t0_ns) / self.width_ns;
        if self.buckets.last().is_none_or(|b| b.index != index) {
            if self.buckets.len() == ENVELOPE_BUCKETS {
                self.coarsen();
                index = p.t_ns.saturating_sub(self.t0_ns) / self.width_ns;
            }
            if self.buckets.last().is_none_or(|b| b.index != index) {
                self.buckets.push(Bucket::new(index));
            }
        }
        if let Some(b) = self.buckets.last_mut() {
            b.take(p);
        }
    }

    /// Double the width: neighbouring buckets become one.
    fn coarsen(&mut self) {
        self.width_ns = self.width_ns.saturating_mul(2);
        let mut merged: Vec<Bucket> = Vec::with_capacity(self.buckets.len());
        for b in self.buckets.drain(..) {
            let index = b.index / 2;
            match merged.last_mut() {
                Some(m) if m.index == index => b.points().for_each(|p| m.take(p)),
                _ => {
                    let mut m = Bucket::new(index);
                    b.points().for_each(|p| m.take(p));
                    merged.push(m);
                }
            }
        }
        self.buckets = merged;
    }

    /// The drawn series.
    pub fn finish(self) -> DrawnSeries {
        if self.width_ns == 0 {
            return DrawnSeries {
                points: self.raw,
                rows: self.rows,
                bucket_ns: None,
            };
        }
        let mut points = Vec::with_capacity(self.buckets.len() * 2);
        for b in &self.buckets {
            let start = points.len();
            points.extend(b.points());
            points[start..].sort_by_key(|p: &SeriesPoint| p.t_ns);
        }
        points.dedup();
        DrawnSeries {
            points,
            rows: self.rows,
            bucket_ns: Some(self.width_ns),
        }
    }
}

/// Every arm's drawn series, read once for the page and the trace together.
pub fn points_by_arm(
    run: &RunDir,
    arms: impl IntoIterator<Item = impl AsRef<str>>,
) -> Result<SeriesPoints, ReportError> {
    let mut out = SeriesPoints::new();
    for arm in arms {
        let mut envelope = EnvelopeBuilder::new();
        for_each_point(run, arm.as_ref(), |p| envelope.push(p))?;
        out.insert(arm.as_ref().to_string(), envelope.finish());
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

    /// A day of 50 ms ticks with a one-tick spike and a one-tick trough,
    /// against the full series it was built from.
    #[test]
    fn the_envelope_keeps_the_extremes_of_the_full_series_in_bounded_points() {
        const TICKS: u64 = 1_728_000;
        let (spike, trough) = (864_011u64, 1_000_003u64);
        let point = |tick: u64| {
            let wobble = (tick.wrapping_mul(2_654_435_761) % 7) * 4096;
            let resident = match tick {
                t if t == spike => 700 << 20,
                t if t == trough => 1 << 20,
                _ => (300 << 20) + wobble,
            };
            SeriesPoint {
                t_ns: 1_000_000_000 + tick * 50_000_000,
                resident_bytes: Some(resident),
                footprint_bytes: Some(resident / 2),
            }
        };
        let mut envelope = EnvelopeBuilder::new();
        let (mut max, mut min) = (point(0), point(0));
        for tick in 0..TICKS {
            let p = point(tick);
            if p.resident_bytes > max.resident_bytes {
                max = p;
            }
            if p.resident_bytes < min.resident_bytes {
                min = p;
            }
            envelope.push(p);
        }
        let drawn = envelope.finish();
        assert_eq!(drawn.rows, TICKS);
        assert!(
            drawn.points.len() <= 4 * ENVELOPE_BUCKETS,
            "{}",
            drawn.points.len()
        );
        assert!(drawn.bucket_ns.is_some_and(|w| w >= 50_000_000));
        // The full series' maximum and minimum, each at its own time: the
        // planted spike and trough.
        assert_eq!(max, point(spike));
        assert_eq!(min, point(trough));
        assert!(drawn.points.contains(&max), "the spike is drawn");
        assert!(drawn.points.contains(&min), "the trough is drawn");
        let peak = drawn.points.iter().filter_map(|p| p.resident_bytes).max();
        assert_eq!(peak, max.resident_bytes);
        assert!(
            drawn.points.windows(2).all(|w| w[0].t_ns < w[1].t_ns),
            "time order"
        );
        // Every drawn point is a row of the series, unchanged.
        for p in drawn.points.iter().step_by(97) {
            let tick = (p.t_ns - 1_000_000_000) / 50_000_000;
            assert_eq!(*p, point(tick));
        }
        // A short series is drawn row for row.
        let mut short = EnvelopeBuilder::new();
        (0..100).for_each(|t| short.push(point(t)));
        let short = short.finish();
        assert_eq!(short.points, (0..100).map(point).collect::<Vec<_>>());
        assert_eq!(short.bucket_ns, None);
    }

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
