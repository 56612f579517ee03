//! The latency distribution of one arm as an inline SVG strip plot: one dot
//! per steady request on its own row, the first measured request (cold
//! costs) on a row apart, and vertical marks at the steady p50, p95 and max.

use analysis::stats;
use plotters::prelude::*;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 180;
/// More steady requests than this are drawn as this many evenly spaced
/// quantiles (the minimum and maximum always among them), to bound the SVG.
pub const MAX_DOTS: usize = 2000;

const STEADY_ROW: f64 = 1.0;
const FIRST_ROW: f64 = 2.0;

/// What the chart shows, for the caption and for tests.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMarks {
    /// Steady requests measured, and the dots drawn for them.
    pub steady: usize,
    /// Dots drawn: `steady`, or `MAX_DOTS` evenly spaced quantiles when more.
    pub dots: usize,
    /// Median steady latency in ms.
    pub p50_ms: f64,
    /// 95th percentile steady latency in ms.
    pub p95_ms: f64,
    /// Longest steady latency in ms.
    pub max_ms: f64,
}

/// `values` sorted, thinned to at most `n` evenly spaced ranks.
fn thin(mut values: Vec<f64>, n: usize) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    if values.len() <= n || n < 2 {
        return values;
    }
    let last = values.len() - 1;
    (0..n)
        .map(|i| values[(i * last + (n - 1) / 2) / (n - 1)])
        .collect()
}

/// A small deterministic vertical offset, so equal latencies stay visible.
fn jitter(i: usize) -> f64 {
    ((i * 7919) % 21) as f64 / 20.0 * 0.5 - 0.25
}

/// The chart for `latencies_ns` (measured requests in order); `None` when
/// there is no steady request (fewer than two measured requests).
pub fn chart(latencies_ns: &[u64]) -> Result<Option<(String, LatencyMarks)>, String> {
    let Some((first, rest)) = latencies_ns.split_first() else {
        return Ok(None);
    };
    let steady: Vec<f64> = rest.iter().map(|&ns| ns as f64 / 1e6).collect();
    let (Some(p50), Some(p95)) = (
        stats::percentile(&steady, 50.0),
        stats::percentile(&steady, 95.0),
    ) else {
        return Ok(None);
    };
    let max = steady.iter().copied().fold(f64::MIN, f64::max);
    let first = *first as f64 / 1e6;
    let dots = thin(steady.clone(), MAX_DOTS);
    let marks = LatencyMarks {
        steady: steady.len(),
        dots: dots.len(),
        p50_ms: p50,
        p95_ms: p95,
        max_ms: max,
    };
    let lo = dots.first().copied().unwrap_or(0.0).min(first);
    let hi = max.max(first);
    let pad = ((hi - lo) * 0.05).max(hi * 0.01).max(1e-3);
    let (x0, x1) = ((lo - pad).max(0.0), hi + pad);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(10)
            .build_cartesian_2d(x0..x1, 0.4f64..2.6f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("ms")
            .y_labels(0)
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        for (label, y) in [("steady", STEADY_ROW + 0.3), ("first", FIRST_ROW + 0.3)] {
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x0 + (x1 - x0) * 0.005, y),
                    ("sans-serif", 12).into_font(),
                )))
                .map_err(|e| e.to_string())?;
        }
        for (label, x, color) in [
            ("p50", p50, RGBColor(0, 110, 0)),
            ("p95", p95, RGBColor(200, 120, 0)),
            ("max", max, RGBColor(190, 0, 0)),
        ] {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    [(x, 0.45), (x, 1.45)],
                    color.stroke_width(2),
                )))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x, 1.6),
                    ("sans-serif", 12).into_font().color(&color),
                )))
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series(dots.iter().enumerate().map(|(i, &x)| {
                Circle::new(
                    (x, STEADY_ROW + jitter(i)),
                    3,
                    RGBColor(30, 80, 180).mix(0.6).filled(),
                )
            }))
            .map_err(|e| e.to_string())?;
        // The first request: a cross, so it never counts as a steady dot.
        chart
            .draw_series(std::iter::once(Cross::new(
                (first, FIRST_ROW),
                5,
                BLACK.stroke_width(2),
            )))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(Some((svg, marks)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_dot_per_steady_request_the_first_apart_and_three_marks() {
        let ns: Vec<u64> = [900.0, 10.0, 30.0, 20.0, 40.0]
            .iter()
            .map(|ms| (ms * 1e6) as u64)
            .collect();
        let (svg, marks) = chart(&ns).unwrap().unwrap();
        assert_eq!(svg.matches("<circle").count(), 4);
        assert_eq!(
            marks,
            LatencyMarks {
                steady: 4,
                dots: 4,
                p50_ms: 25.0,
                p95_ms: 38.5,
                max_ms: 40.0
            }
        );
        for label in ["p50", "p95", "max", "first", "steady"] {
            let text = format!(">\n{label}\n</text>");
            assert_eq!(svg.matches(&text).count(), 1, "{label}");
        }
    }

    #[test]
    fn many_requests_are_thinned_to_quantiles_keeping_the_extremes() {
        let values: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let t = thin(values, MAX_DOTS);
        assert_eq!(t.len(), MAX_DOTS);
        assert_eq!((t[0], t[MAX_DOTS - 1]), (0.0, 9999.0));
        let ns: Vec<u64> = (0..10_001).map(|i| 1_000_000 + i * 1000).collect();
        let (svg, marks) = chart(&ns).unwrap().unwrap();
        assert_eq!((marks.steady, marks.dots), (10_000, MAX_DOTS));
        assert_eq!(svg.matches("<circle").count(), MAX_DOTS);
    }

    #[test]
    fn no_steady_request_no_chart() {
        assert!(chart(&[]).unwrap().is_none());
        assert!(chart(&[5_000_000]).unwrap().is_none());
    }
}
