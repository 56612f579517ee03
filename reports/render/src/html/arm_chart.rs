//! One arm's memory over time (the per-arm details below the comparison):
//! phase bands, the external series, the in-process markers and each
//! phase's kernel peak on one axis, with [`envelope`] bounding long series.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use reports::receipt::ArmReceipt;
use sampler::Phase;

/// Chart width in pixels; also the number of envelope buckets.
const WIDTH: u32 = 960;
const HEIGHT: u32 = 320;
/// Height of the covariate row under the memory chart.
const COVARIATE_HEIGHT: u32 = 120;
const MIB: f64 = 1048576.0;

/// One external sample: seconds since the arm's first row, resident and
/// footprint in MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Seconds since the arm's first series row.
    pub t_s: f64,
    /// Resident memory in MiB; `None` where the row has none.
    pub resident_mib: Option<f64>,
    /// Footprint in MiB; `None` where the platform has no footprint.
    pub footprint_mib: Option<f64>,
}

/// Reduce `points` (sorted by x) to at most two per bucket of equal x
/// width: the bucket's minimum and maximum, in time order. Every point that
/// is its bucket's maximum survives, so no local peak is lost to drawing.
pub fn envelope(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if points.len() <= 2 * buckets || buckets == 0 {
        return points.to_vec();
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let width = ((x1 - x0) / buckets as f64).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut start = 0;
    while start < points.len() {
        let bucket = (((points[start].0 - x0) / width) as usize).min(buckets - 1);
        let mut end = start;
        while end < points.len()
            && (((points[end].0 - x0) / width) as usize).min(buckets - 1) == bucket
        {
            end += 1;
        }
        let slice = &points[start..end];
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in slice.iter().enumerate() {
            if p.1 < slice[lo].1 {
                lo = i;
            }
            if p.1 > slice[hi].1 {
                hi = i;
            }
        }
        out.push(slice[lo.min(hi)]);
        if lo != hi {
            out.push(slice[lo.max(hi)]);
        }
        start = end;
    }
    out
}

/// The time axis of an arm's charts (seconds from the first series row):
/// every series point and every marker, so the memory chart and the
/// covariate row under it share it.
fn x_range(arm: &ArmReceipt, series: &[Point], t0_ns: u64) -> (f64, f64) {
    let markers = arm
        .phases
        .iter()
        .map(|p| (p.t_ns as f64 - t0_ns as f64) / 1e9);
    let points = series
        .iter()
        .filter(|p| p.resident_mib.is_some() || p.footprint_mib.is_some())
        .map(|p| p.t_s);
    let (mut x0, mut x1) = (0f64, 1e-3f64);
    for x in points.chain(markers) {
        x0 = x0.min(x);
        x1 = x1.max(x);
    }
    (x0, x1)
}

/// One covariate's value in a reading, for the chart.
type Reading = fn(&analysis::covariates::CovariateSample) -> Option<f64>;

/// The soak's covariate as a row under the memory chart, on its time axis:
/// the hottest thermal zone (°C) where readable, else the thermal pressure
/// level, else the highest CPU frequency (MHz); readings on battery are
/// marked in red. `Ok(None)` when no covariate was readable.
pub fn covariate_row(
    arm: &ArmReceipt,
    covariates: &analysis::covariates::SoakCovariates,
    series: &[Point],
    t0_ns: u64,
) -> Result<Option<String>, String> {
    let t = |ns: u64| (ns as f64 - t0_ns as f64) / 1e9;
    let samples = &covariates.samples;
    let pick: [(&str, Reading); 3] = [
        ("hottest zone °C", |c| c.thermal_celsius),
        ("thermal pressure", |c| c.thermal_pressure.map(|l| l as f64)),
        ("CPU MHz (highest)", |c| {
            c.cpu_freq_max_khz.map(|k| k as f64 / 1000.0)
        }),
    ];
    let Some((label, f)) = pick
        .into_iter()
        .find(|(_, f)| samples.iter().any(|c| f(c).is_some()))
    else {
        return Ok(None);
    };
    let line: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|c| Some((t(c.t_ns), f(c)?)))
        .collect();
    let battery: Vec<(f64, f64)> = samples
        .iter()
        .filter(|c| c.on_battery == Some(true))
        .filter_map(|c| Some((t(c.t_ns), f(c)?)))
        .collect();
    let (x0, x1) = x_range(arm, series, t0_ns);
    let (lo, hi) = line.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    let pad = ((hi - lo) * 0.1).max(1.0);
    let svg = framed(
        COVARIATE_HEIGHT,
        (x0..x1, (lo - pad)..(hi + pad)),
        label,
        Some(3),
        |chart| {
            chart
                .draw_series(LineSeries::new(
                    line,
                    RGBColor(120, 60, 160).stroke_width(1),
                ))
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RGBColor(120, 60, 160)));
            if !battery.is_empty() {
                chart
                    .draw_series(battery.iter().map(|p| Circle::new(*p, 2, RED.filled())))
                    .map_err(|e| e.to_string())?
                    .label("on battery")
                    .legend(|(x, y)| Circle::new((x + 8, y), 2, RED.filled()));
            }
            Ok(())
        },
    )?;
    Ok(Some(svg))
}

/// The drawing area both charts share.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// An SVG chart `height` pixels tall over `(x, y)`, in the page's frame
/// (margins, seconds on x, `y_desc` on y, `y_labels` labels where given, the
/// legend box); `draw` adds the series.
fn framed(
    height: u32,
    (x, y): (std::ops::Range<f64>, std::ops::Range<f64>),
    y_desc: &str,
    y_labels: Option<usize>,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(x, y)
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("s").y_desc(y_desc).light_line_style(WHITE);
        if let Some(n) = y_labels {
            mesh.y_labels(n);
        }
        mesh.draw().map_err(|e| e.to_string())?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The memory chart of one arm as an SVG string. `t0_ns` is the time of
/// the first series row (markers are placed relative to it).
pub fn memory_chart(arm: &ArmReceipt, series: &[Point], t0_ns: u64) -> Result<String, String> {
    let resident: Vec<(f64, f64)> = series
        .iter()
        .filter_map(|p| Some((p.t_s, p.resident_mib?)))
        .collect();
    let footprint: Vec<(f64, f64)> = series
        .iter()
        .filter_map(|p| Some((p.t_s, p.footprint_mib?)))
        .collect();
    let marker_t = |t: u64| (t as f64 - t0_ns as f64) / 1e9;
    let markers: Vec<(f64, f64)> = arm
        .phases
        .iter()
        .map(|p| (marker_t(p.t_ns), p.memory.resident_bytes as f64 / MIB))
        .collect();
    let peaks: Vec<(f64, f64, f64)> = arm
        .phases
        .iter()
        .filter_map(|p| {
            let peak = p
                .memory
                .footprint_peak_bytes
                .or(p.memory.resident_peak_bytes)?;
            let start = p.window_start_ns.unwrap_or(t0_ns);
            Some((marker_t(start), marker_t(p.t_ns), peak as f64 / MIB))
        })
        .collect();
    let (x0, x1) = x_range(arm, series, t0_ns);
    let y1 = resident
        .iter()
        .chain(&footprint)
        .chain(&markers)
        .map(|p| p.1)
        .chain(peaks.iter().map(|p| p.2))
        .fold(1.0f64, f64::max)
        * 1.1;
    framed(HEIGHT, (x0..x1, 0f64..y1), "MiB", None, |chart| {
        // Phase bands: alternating shades between consecutive markers.
        for (i, w) in arm.phases.windows(2).enumerate() {
            if w[1].phase.is_request() && w[1].phase == Phase::RequestBegin {
                continue;
            }
            let shade = if i % 2 == 0 {
                RGBColor(235, 242, 250)
            } else {
                RGBColor(248, 244, 232)
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(marker_t(w[0].t_ns), 0.0), (marker_t(w[1].t_ns), y1)],
                    shade.filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        let env = |pts: &[(f64, f64)]| envelope(pts, WIDTH as usize);
        chart
            .draw_series(LineSeries::new(env(&resident), BLUE.stroke_width(1)))
            .map_err(|e| e.to_string())?
            .label("resident (external series)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
        if !footprint.is_empty() {
            chart
                .draw_series(LineSeries::new(env(&footprint), GREEN.stroke_width(1)))
                .map_err(|e| e.to_string())?
                .label("footprint (external series)")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], GREEN));
        }
        chart
            .draw_series(
                markers
                    .iter()
                    .map(|p| Circle::new(*p, 3, RGBColor(200, 60, 0).filled())),
            )
            .map_err(|e| e.to_string())?
            .label("resident at markers (in process)")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, RGBColor(200, 60, 0).filled()));
        chart
            .draw_series(
                peaks
                    .iter()
                    .map(|(a, b, y)| PathElement::new([(*a, *y), (*b, *y)], RED.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?
            .label("kernel peak of the phase")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.stroke_width(2)));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_keeps_every_bucket_extreme_and_bounds_the_size() {
        // 36,000 samples of a flat line with one single-sample spike.
        let mut pts: Vec<(f64, f64)> = (0..36_000).map(|i| (i as f64 * 0.05, 100.0)).collect();
        pts[12_345].1 = 400.0;
        pts[30_000].1 = 20.0;
        let env = envelope(&pts, 960);
        assert!(env.len() <= 2 * 960, "{}", env.len());
        assert!(env.contains(&(12_345.0 * 0.05, 400.0)), "the peak survives");
        assert!(
            env.contains(&(30_000.0 * 0.05, 20.0)),
            "the trough survives"
        );
        assert!(env.windows(2).all(|w| w[0].0 <= w[1].0), "time order kept");
        // Short series are drawn as they are.
        assert_eq!(envelope(&pts[..100], 960), pts[..100].to_vec());
    }
}
