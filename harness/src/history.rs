//! Soak history across nights: one SQLite row per soak (rusqlite with the
//! bundled SQLite, so no system library is needed), the trend per arm, and
//! the regression check against the recent nights.

use anyhow::Context;
use reports::receipt::ArmReceipt;
use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};

/// Default database: `runs/soak-history.sqlite`, beside the run directories.
pub fn default_path() -> PathBuf {
    PathBuf::from("runs").join("soak-history.sqlite")
}

pub use reports::soak_history::Night;

/// The summary of a soak arm from its receipt; `None` without a stability section.
pub fn night(receipt: &reports::Receipt, arm: &ArmReceipt, run_dir: &Path) -> Option<Night> {
    let s = arm.stability.as_ref()?;
    // The worker's headline series: footprint where the platform has it.
    let head = s.worker_series.first()?;
    let runtime = arm.speech.as_ref().and_then(|sp| sp.runtime.as_ref());
    Some(Night {
        started_utc: receipt.run.started_utc.clone(),
        run_dir: run_dir.display().to_string(),
        protocol: receipt.run.protocol_name.clone(),
        arm: arm.id.clone(),
        artifact_sha256: runtime.map(|r| r.model.sha256.clone()),
        runtime: runtime.map(|r| {
            format!(
                "{} {} {}",
                r.runtime,
                r.runtime_version,
                r.worker_sha256.as_deref().unwrap_or("-")
            )
        }),
        host: receipt.run.hostname.clone(),
        requests: s.requests,
        classification: s.worker.name().to_string(),
        slope_bytes_per_request: head.bytes_per_request.map(|b| b.estimate),
        slope_low: head.bytes_per_request.map(|b| b.low),
        slope_high: head.bytes_per_request.map(|b| b.high),
        peak_footprint_bytes: s.peak_footprint_bytes.or(s.peak_resident_bytes),
        p95_latency_ns: s.p95_latency_ns,
        system_growth: !s.system_growth_while_worker_flat.is_empty(),
        regressions: Vec::new(),
    })
}

fn open(path: &Path) -> anyhow::Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let db = Connection::open(path)
        .with_context(|| format!("cannot open the soak history {}", path.display()))?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS soak (
            id INTEGER PRIMARY KEY,
            started_utc TEXT NOT NULL, run_dir TEXT NOT NULL,
            protocol TEXT NOT NULL, arm TEXT NOT NULL,
            artifact_sha256 TEXT, runtime TEXT, host TEXT,
            requests INTEGER NOT NULL, classification TEXT NOT NULL,
            slope REAL, slope_low REAL, slope_high REAL,
            peak_footprint_bytes INTEGER, p95_latency_ns REAL,
            system_growth INTEGER NOT NULL, regressions TEXT NOT NULL
        );",
    )
    .with_context(|| format!("{} is not a memqual soak history", path.display()))?;
    Ok(db)
}

/// Open an existing history read-only; `None` when there is none yet.
fn open_read_only(path: &Path) -> anyhow::Result<Option<Connection>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        Ok(m) if !m.is_file() => {
            anyhow::bail!(
                "{} is not a regular file, so it is not a soak history",
                path.display()
            )
        }
        Ok(_) => {}
    }
    let db = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open the soak history {}", path.display()))?;
    let has_table: bool = db
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'soak')",
            [],
            |r| r.get(0),
        )
        .with_context(|| format!("{} is not a memqual soak history", path.display()))?;
    if !has_table {
        anyhow::bail!(
            "{} is not a memqual soak history (no soak table)",
            path.display()
        );
    }
    Ok(Some(db))
}

/// The nights of an existing history, for `memqual history`: a history
/// that does not exist is an error (a typo must not look like "no nights").
pub fn load_existing(path: &Path, arm: Option<&str>) -> anyhow::Result<Vec<Night>> {
    if open_read_only(path)?.is_none() {
        anyhow::bail!(
            "no soak history at {}: `memqual soak` creates it (default {}); give --history FILE \
             to read another",
            path.display(),
            default_path().display()
        );
    }
    load(path, arm, None)
}

/// Past nights, oldest first, optionally of one arm (and protocol); none
/// when the history does not exist yet. Read-only.
pub fn load(path: &Path, arm: Option<&str>, protocol: Option<&str>) -> anyhow::Result<Vec<Night>> {
    let Some(db) = open_read_only(path)? else {
        return Ok(Vec::new());
    };
    let mut stmt = db.prepare(
        "SELECT started_utc, run_dir, protocol, arm, artifact_sha256, runtime, host, requests,
                classification, slope, slope_low, slope_high, peak_footprint_bytes,
                p95_latency_ns, system_growth, regressions
         FROM soak WHERE (?1 IS NULL OR arm = ?1) AND (?2 IS NULL OR protocol = ?2) ORDER BY id",
    )?;
    let rows = stmt.query_map(params![arm, protocol], |r| {
        let regressions: String = r.get(15)?;
        Ok(Night {
            started_utc: r.get(0)?,
            run_dir: r.get(1)?,
            protocol: r.get(2)?,
            arm: r.get(3)?,
            artifact_sha256: r.get(4)?,
            runtime: r.get(5)?,
            host: r.get(6)?,
            requests: r.get::<_, i64>(7)?.max(0) as u64,
            classification: r.get(8)?,
            slope_bytes_per_request: r.get(9)?,
            slope_low: r.get(10)?,
            slope_high: r.get(11)?,
            peak_footprint_bytes: r.get::<_, Option<i64>>(12)?.map(|v| v.max(0) as u64),
            p95_latency_ns: r.get(13)?,
            system_growth: r.get::<_, i64>(14)? != 0,
            regressions: regressions
                .split('\n')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        })
    })?;
    rows.collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", path.display()))
}

/// Append one night.
pub fn append(path: &Path, n: &Night) -> anyhow::Result<()> {
    let db = open(path)?;
    db.execute(
        "INSERT INTO soak (started_utc, run_dir, protocol, arm, artifact_sha256, runtime, host,
            requests, classification, slope, slope_low, slope_high, peak_footprint_bytes,
            p95_latency_ns, system_growth, regressions)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            n.started_utc,
            n.run_dir,
            n.protocol,
            n.arm,
            n.artifact_sha256,
            n.runtime,
            n.host,
            i64::try_from(n.requests).unwrap_or(i64::MAX),
            n.classification,
            n.slope_bytes_per_request,
            n.slope_low,
            n.slope_high,
            n.peak_footprint_bytes
                .map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
            n.p95_latency_ns,
            i64::from(n.system_growth),
            n.regressions.join("\n"),
        ],
    )
    .with_context(|| format!("cannot append to {}", path.display()))?;
    Ok(())
}

/// Most past soaks the report's history chart shows.
pub const CHART_NIGHTS: usize = 30;

/// The report's history: the last [`CHART_NIGHTS`] past soaks (of the
/// protocol and arm `past` was loaded for) and `current`, last.
pub fn chart(past: &[Night], current: &Night) -> reports::soak_history::SoakHistory {
    let from = past.len().saturating_sub(CHART_NIGHTS);
    reports::soak_history::SoakHistory {
        protocol: current.protocol.clone(),
        arm: current.arm.clone(),
        nights: past[from..]
            .iter()
            .cloned()
            .chain(std::iter::once(current.clone()))
            .collect(),
    }
}

fn median(v: Vec<f64>) -> Option<f64> {
    analysis::stats::median(&v)
}

/// Thresholds of the regression check (from the protocol's `[soak]` table).
#[derive(Debug, Clone, Copy)]
pub struct RegressionRule {
    /// How many of the most recent past nights (same protocol and arm) a
    /// night is compared with.
    pub window: usize,
    /// A slope above the window's median by more than this many bytes per
    /// request is a regression.
    pub slope_bytes_per_request: f64,
    /// A peak footprint above the window's median by more than this percentage
    /// is a regression.
    pub peak_pct: f64,
}

/// Why `night` is worse than the median of the last `window` nights before it.
pub fn regressions(past: &[Night], night: &Night, rule: RegressionRule) -> Vec<String> {
    let recent: Vec<&Night> = past.iter().rev().take(rule.window).collect();
    let mut out = Vec::new();
    if recent.is_empty() {
        return out;
    }
    let slopes = recent
        .iter()
        .filter_map(|n| n.slope_bytes_per_request)
        .collect();
    if let (Some(base), Some(now)) = (median(slopes), night.slope_bytes_per_request)
        && now > base + rule.slope_bytes_per_request
    {
        out.push(format!(
            "slope {:.2} KiB/request against a median of {:.2} over the last {} night(s)",
            now / 1024.0,
            base / 1024.0,
            recent.len()
        ));
    }
    let peaks = recent
        .iter()
        .filter_map(|n| n.peak_footprint_bytes.map(|p| p as f64))
        .collect();
    if let (Some(base), Some(now)) = (median(peaks), night.peak_footprint_bytes)
        && now as f64 > base * (1.0 + rule.peak_pct / 100.0)
    {
        out.push(format!(
            "peak {:.1} MiB against a median of {:.1} MiB over the last {} night(s) (+{:.1} %)",
            now as f64 / 1_048_576.0,
            base / 1_048_576.0,
            recent.len(),
            (now as f64 / base - 1.0) * 100.0
        ));
    }
    let was_flat = recent
        .iter()
        .all(|n| n.classification == "plateau" || n.classification == "step");
    if was_flat && night.classification == "linear_growth" {
        out.push("linear growth after nights that were all bounded".into());
    }
    out
}

/// `memqual history`: the nights in `path` (only `arm`'s), as a table or JSON.
pub fn command(path: &Path, arm: Option<&str>, json: bool) -> Result<u8, crate::exit::Failure> {
    let nights = load_existing(path, arm).map_err(crate::exit::usage)?;
    if json {
        crate::console::print_json(&nights)?;
    } else {
        out!("{}", human(&nights));
    }
    Ok(crate::exit::PASS)
}

/// The trend as a table, oldest first.
pub fn human(nights: &[Night]) -> String {
    if nights.is_empty() {
        return "no soaks recorded\n".into();
    }
    let mut out = format!(
        "{:<26} {:<22} {:>7} {:<13} {:>26} {:>10} {:>9}  flags\n",
        "started (UTC)", "arm", "reqs", "class", "slope KiB/req [interval]", "peak MiB", "p95 ms"
    );
    let kib = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.2}", v / 1024.0));
    for n in nights {
        let slope = format!(
            "{} [{}, {}]",
            kib(n.slope_bytes_per_request),
            kib(n.slope_low),
            kib(n.slope_high)
        );
        let mut flags = Vec::new();
        if n.system_growth {
            flags.push("SYSTEM-GROWTH".to_string());
        }
        if !n.regressions.is_empty() {
            flags.push(format!("REGRESSION: {}", n.regressions.join("; ")));
        }
        out.push_str(&format!(
            "{:<26} {:<22} {:>7} {:<13} {:>26} {:>10} {:>9}  {}\n",
            n.started_utc.get(..25).unwrap_or(&n.started_utc),
            n.arm,
            n.requests,
            n.classification,
            slope,
            n.peak_footprint_bytes
                .map_or("–".into(), |p| format!("{:.1}", p as f64 / 1_048_576.0)),
            n.p95_latency_ns
                .map_or("–".into(), |l| format!("{:.1}", l / 1e6)),
            flags.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(slope_kib: f64, peak_mib: u64, class: &str) -> Night {
        Night {
            started_utc: "2026-11-29T02:00:00+00:00".into(),
            run_dir: "runs/x".into(),
            protocol: "soak".into(),
            arm: "tiny".into(),
            artifact_sha256: Some("ab".into()),
            runtime: None,
            host: Some("h".into()),
            requests: 300,
            classification: class.into(),
            slope_bytes_per_request: Some(slope_kib * 1024.0),
            slope_low: Some(0.0),
            slope_high: Some(1.0),
            peak_footprint_bytes: Some(peak_mib << 20),
            p95_latency_ns: Some(5e8),
            system_growth: false,
            regressions: vec![],
        }
    }

    const RULE: RegressionRule = RegressionRule {
        window: 3,
        slope_bytes_per_request: 4096.0,
        peak_pct: 10.0,
    };

    #[test]
    fn a_night_is_compared_with_the_median_of_the_recent_window() {
        // The first night (slope 50) is outside the window of three.
        let past = vec![
            n(50.0, 100, "linear_growth"),
            n(0.0, 100, "plateau"),
            n(1.0, 104, "plateau"),
            n(0.5, 98, "step"),
        ];
        assert!(regressions(&past, &n(4.4, 109, "plateau"), RULE).is_empty());
        let r = regressions(&past, &n(4.6, 111, "linear_growth"), RULE);
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(
            r[0].starts_with("slope 4.60 KiB/request against a median of 0.50"),
            "{}",
            r[0]
        );
        assert!(r[1].contains("+11.0 %"), "{}", r[1]);
        assert!(regressions(&[], &n(99.0, 999, "linear_growth"), RULE).is_empty());
    }

    #[test]
    fn nights_round_trip_through_sqlite_in_order_and_by_arm() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("deep/h.sqlite");
        let mut a = n(1.0, 100, "plateau");
        a.regressions = vec!["one".into(), "two".into()];
        let mut b = n(2.0, 200, "step");
        b.arm = "other".into();
        b.artifact_sha256 = None;
        append(&db, &a).unwrap();
        append(&db, &b).unwrap();
        assert_eq!(load(&db, None, None).unwrap(), vec![a.clone(), b.clone()]);
        assert_eq!(load(&db, Some("other"), None).unwrap(), vec![b]);
        assert_eq!(load(&db, Some("tiny"), Some("nope")).unwrap(), vec![]);
        let table = human(&[a]);
        assert!(table.contains("REGRESSION: one; two"), "{table}");
        assert!(table.contains("1.00 [0.00, 0.00]"), "{table}");
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("h.sqlite");
        std::fs::write(&path, "not a database, just text that is long enough").unwrap();
        let err = format!("{:#}", load(&path, None, None).unwrap_err());
        assert!(err.contains("h.sqlite"), "{err}");
    }
}
