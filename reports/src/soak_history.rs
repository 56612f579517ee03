//! The soak's past nights, as `memqual soak` hands them to the report:
//! `soak-history.json` in the run directory (written from the history
//! database at the end of a soak, sealed with the rest), and the chart of
//! slope and peak per night that `report.html` draws from it.
//!
//! `reports` has no database: the rows arrive as the typed [`SoakHistory`].

use crate::ReportError;
use plotters::prelude::*;
use run_dir::{Rel, RunDir};
use serde::{Deserialize, Serialize};

/// The file in the run directory.
pub use run_dir::names::SOAK_HISTORY as FILE;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 240;
const KIB: f64 = 1024.0;
const MIB: f64 = 1048576.0;
/// The current night, regressions, and every other night.
const CURRENT: RGBColor = RGBColor(0, 90, 200);
const REGRESSION: RGBColor = RGBColor(200, 0, 0);
const PAST: RGBColor = RGBColor(120, 120, 120);

/// One soak's summary: a row of the history database (`memqual history`)
/// and a point on the report's charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Night {
    /// When the soak started: UTC, RFC 3339.
    pub started_utc: String,
    /// The soak's run directory, as the soak wrote it.
    pub run_dir: String,
    /// The protocol's `name`.
    pub protocol: String,
    /// The soak arm's id.
    pub arm: String,
    /// SHA-256 of the model the worker loaded; `None` for arms without a speech runtime.
    pub artifact_sha256: Option<String>,
    /// Runtime, its version and the worker's SHA-256 (`-` when unknown), space-separated; `None` without a speech runtime.
    pub runtime: Option<String>,
    /// The host's name, when the OS reports one.
    pub host: Option<String>,
    /// Requests the soak measured.
    pub requests: u64,
    /// The worker's growth classification: `plateau`, `step`, `linear_growth` or `inconclusive`.
    pub classification: String,
    /// The worker's headline slope (bytes per request) and its interval.
    pub slope_bytes_per_request: Option<f64>,
    /// Lower end of the slope's bootstrap interval, bytes per request.
    pub slope_low: Option<f64>,
    /// Upper end of the slope's bootstrap interval, bytes per request.
    pub slope_high: Option<f64>,
    /// Peak footprint in bytes, else peak resident bytes where the platform has no footprint.
    pub peak_footprint_bytes: Option<u64>,
    /// 95th percentile request latency in ns.
    pub p95_latency_ns: Option<f64>,
    /// True when a system series grew while the worker stayed flat.
    pub system_growth: bool,
    /// Why this night is worse than the recent ones (empty: no regression).
    pub regressions: Vec<String>,
}

/// The nights of one protocol and arm, oldest first, the current one last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakHistory {
    /// The protocol's `name`.
    pub protocol: String,
    /// The soak arm's id.
    pub arm: String,
    /// Oldest first; the last is the soak this file belongs to.
    pub nights: Vec<Night>,
}

/// `soak-history.json` of a run directory; `None` when the soak kept no history.
pub fn read(run: &RunDir) -> Result<Option<SoakHistory>, ReportError> {
    Ok(run.read_json(&Rel::file(FILE))?)
}

fn colour(n: &Night, current: bool) -> RGBColor {
    if !n.regressions.is_empty() {
        REGRESSION
    } else if current {
        CURRENT
    } else {
        PAST
    }
}

/// One night on a panel: index (x), value, interval, colour, current.
type Mark = (usize, f64, Option<(f64, f64)>, RGBColor, bool);

/// One panel: a value per night (index on x), optional error bars.
fn panel(title: &str, unit: &str, values: &[Mark], nights: usize) -> Result<String, String> {
    let (mut y0, mut y1) = (0f64, 0f64);
    for (_, v, bar, _, _) in values {
        let (lo, hi) = bar.unwrap_or((*v, *v));
        y0 = y0.min(lo.min(*v));
        y1 = y1.max(hi.max(*v));
    }
    // At least one unit tall: a healthy history of flat zeros would
    // otherwise get an axis whose every label reads 0.0.
    y1 = y1.max(y0 + 1.0);
    let pad = (y1 - y0) * 0.1;
    let (y0, y1) = (if y0 < 0.0 { y0 - pad } else { 0.0 }, y1 + pad);
    let x1 = nights.max(1) as f64 - 0.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..x1, y0..y1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("soak (oldest first)")
            .y_desc(unit)
            .x_labels(nights.clamp(2, 20))
            .x_label_formatter(&|x| format!("{}", x.round() as i64 + 1))
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        // Error bars: the interval as a vertical line with short caps.
        let cap = 0.08;
        chart
            .draw_series(values.iter().filter_map(|(i, _, bar, c, _)| {
                let (lo, hi) = (*bar)?;
                let x = *i as f64;
                Some(PathElement::new(
                    vec![
                        (x - cap, lo),
                        (x + cap, lo),
                        (x, lo),
                        (x, hi),
                        (x - cap, hi),
                        (x + cap, hi),
                    ],
                    c.stroke_width(2),
                ))
            }))
            .map_err(|e| e.to_string())?;
        // One circle per night: the test counts them.
        chart
            .draw_series(values.iter().map(|(i, v, _, c, current)| {
                Circle::new((*i as f64, *v), if *current { 7 } else { 4 }, c.filled())
            }))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The two charts: slope (KiB per request, interval as error bars) and
/// peak footprint (MiB) per night. The current night is drawn larger and
/// blue, regressions red, earlier nights grey.
pub fn charts(h: &SoakHistory) -> Result<[String; 2], String> {
    let current = h.nights.len().saturating_sub(1);
    let slope: Vec<Mark> = h
        .nights
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let v = n.slope_bytes_per_request? / KIB;
            let bar = n
                .slope_low
                .zip(n.slope_high)
                .map(|(l, h)| (l / KIB, h / KIB));
            Some((i, v, bar, colour(n, i == current), i == current))
        })
        .collect();
    let peak: Vec<Mark> = h
        .nights
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let v = n.peak_footprint_bytes? as f64 / MIB;
            Some((i, v, None, colour(n, i == current), i == current))
        })
        .collect();
    let n = h.nights.len();
    Ok([
        panel(
            "worker slope per request, with interval",
            "KiB/request",
            &slope,
            n,
        )?,
        panel("peak footprint", "MiB", &peak, n)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night(i: u64, slope: Option<f64>, regression: bool) -> Night {
        Night {
            started_utc: format!("2026-11-{:02}T02:00:00+00:00", i + 1),
            run_dir: format!("runs/{i}"),
            protocol: "soak".into(),
            arm: "a".into(),
            artifact_sha256: None,
            runtime: None,
            host: None,
            requests: 300,
            classification: "plateau".into(),
            slope_bytes_per_request: slope,
            slope_low: slope.map(|s| s - 512.0),
            slope_high: slope.map(|s| s + 512.0),
            peak_footprint_bytes: Some((100 + i) << 20),
            p95_latency_ns: None,
            system_growth: false,
            regressions: if regression {
                vec!["peak 104.0 MiB above the median".into()]
            } else {
                vec![]
            },
        }
    }

    fn circles(svg: &str, fill: &str) -> usize {
        svg.split("<circle")
            .skip(1)
            .filter(|c| c.contains(&format!("fill=\"{fill}\"")))
            .count()
    }

    #[test]
    fn every_night_is_a_point_the_current_one_and_regressions_stand_out() {
        let h = SoakHistory {
            protocol: "soak".into(),
            arm: "a".into(),
            nights: vec![
                night(0, Some(100.0), false),
                night(1, None, false),
                night(2, Some(-50.0), false),
                night(3, Some(9000.0), true),
            ],
        };
        let [slope, peak] = charts(&h).unwrap();
        assert_eq!(
            slope.matches("<circle").count(),
            3,
            "a night without a slope has no point"
        );
        assert_eq!(peak.matches("<circle").count(), 4);
        assert_eq!(circles(&peak, "#C80000"), 1, "the regression is red");
        assert_eq!(circles(&peak, "#787878"), 3);
        let h = SoakHistory {
            nights: vec![night(0, Some(1.0), false), night(1, Some(2.0), false)],
            ..h
        };
        let [_, peak] = charts(&h).unwrap();
        assert_eq!(circles(&peak, "#005AC8"), 1, "the current night is blue");
    }

    #[test]
    fn the_file_round_trips_and_is_optional() {
        let (_tmp, run) = crate::testing::run();
        assert_eq!(read(&run).unwrap(), None);
        let h = SoakHistory {
            protocol: "soak".into(),
            arm: "a".into(),
            nights: vec![night(0, Some(1.0), false)],
        };
        run.write_json(&Rel::file(FILE), &h).unwrap();
        assert_eq!(read(&run).unwrap(), Some(h));
        run.write_bytes(&Rel::file(FILE), b"{\"protocol\": 1}")
            .unwrap();
        let err = read(&run).unwrap_err().to_string();
        assert!(err.contains("soak-history.json:1:"), "{err}");
    }
}
