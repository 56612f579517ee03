//! Small pure statistics over measured values.

/// Median of `values` (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// Linear-interpolated percentile `p` (0–100) of `values`; `None` when empty
/// or when any value is NaN.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (values.len() - 1) as f64;
    let lo = rank.floor() as usize;
    // Selection, not a sort: a soak's half a million ticks are summarised
    // several times. The value above `lo` is the least of the rest.
    let mut v = values.to_vec();
    let (_, at_lo, above) = v.select_nth_unstable_by(lo, |a, b| a.total_cmp(b));
    let at_lo = *at_lo;
    let at_hi = if rank.ceil() as usize == lo {
        at_lo
    } else {
        above
            .iter()
            .copied()
            .min_by(|a, b| a.total_cmp(b))
            .unwrap_or(at_lo)
    };
    Some(at_lo + (at_hi - at_lo) * (rank - lo as f64))
}

/// Ordinary least-squares slope of `y` against `x`; `None` for fewer than two
/// points or when all `x` are equal.
pub fn ols_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

/// A location estimate and its two-sided interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Hodges–Lehmann estimate: the median of the Walsh averages.
    pub estimate: f64,
    /// Lower bound; `None` when too few values for the confidence asked.
    pub lower: Option<f64>,
    /// Upper bound; `None` when too few values.
    pub upper: Option<f64>,
}

/// Hodges–Lehmann estimate of the centre of `d` (paired differences) and its
/// exact Wilcoxon signed-rank interval at `confidence`: the k-th smallest and
/// k-th largest Walsh average, k the largest with P(W ≤ k − 1) ≤ (1 − confidence) / 2.
/// `None` for no values.
pub fn signed_rank_interval(d: &[f64], confidence: f64) -> Option<Interval> {
    let n = d.len();
    if n == 0 {
        return None;
    }
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    walsh.sort_by(f64::total_cmp);
    let estimate = median(&walsh)?;
    // counts[w] = number of sign assignments with W+ = w, over 2^n.
    let m = walsh.len();
    let mut counts = vec![0f64; m + 1];
    counts[0] = 1.0;
    for rank in 1..=n {
        for w in (rank..=m).rev() {
            counts[w] += counts[w - rank];
        }
    }
    let total = 2f64.powi(i32::try_from(n).unwrap_or(i32::MAX));
    let alpha_half = (1.0 - confidence) / 2.0;
    let mut cumulative = 0.0;
    let mut k = 0;
    for c in &counts {
        cumulative += c;
        if cumulative / total > alpha_half {
            break;
        }
        k += 1;
    }
    let (lower, upper) = if k == 0 {
        (None, None)
    } else {
        (Some(walsh[k - 1]), Some(walsh[m - k]))
    };
    Some(Interval {
        estimate,
        lower,
        upper,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&v), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((percentile(&hundred, 99.0).unwrap() - 99.01).abs() < 1e-9);
    }

    #[test]
    fn selected_percentiles_are_the_sorted_ones() {
        // The interpolation between the sorted neighbours, by a full sort.
        let by_sort = |values: &[f64], p: f64| {
            let mut s = values.to_vec();
            s.sort_by(|a, b| a.total_cmp(b));
            let rank = p / 100.0 * (s.len() - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (rank - lo as f64)
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [1usize, 2, 3, 7, 100, 1001] {
            // Values with repeats and a wide spread (xorshift).
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x % 997) as f64 - 400.0) * 1.5
                })
                .collect();
            for p in [0.0, 1.0, 25.0, 50.0, 95.0, 99.0, 99.9, 100.0] {
                assert_eq!(
                    percentile(&values, p),
                    Some(by_sort(&values, p)),
                    "n {n} p {p}"
                );
            }
        }
    }

    #[test]
    fn slope_of_a_line_is_exact() {
        let pts: Vec<(f64, f64)> = (0..20).map(|i| (i as f64, 3.0 * i as f64 + 7.0)).collect();
        assert!((ols_slope(&pts).unwrap() - 3.0).abs() < 1e-12);
        assert_eq!(ols_slope(&pts[..1]), None);
        assert_eq!(ols_slope(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }

    #[test]
    fn signed_rank_interval_matches_the_exact_tables() {
        // n = 6 at 95 %: P(W <= 0) = 1/64 <= 0.025 < 2/64, so the bounds are
        // the smallest and largest Walsh averages, i.e. min and max.
        let d = [0.3, -0.1, 0.2, 0.5, 0.1, 0.4];
        let iv = signed_rank_interval(&d, 0.95).unwrap();
        assert_eq!((iv.lower, iv.upper), (Some(-0.1), Some(0.5)));
        // n = 5 cannot reach 95 % (P(W <= 0) = 1/32 > 0.025).
        assert_eq!(signed_rank_interval(&d[..5], 0.95).unwrap().lower, None);
        // n = 10 at 95 %: the critical value is 8 (Wilcoxon tables), so the
        // bounds are the 9th smallest and 9th largest of the 55 averages.
        let d: Vec<f64> = (1..=10).map(f64::from).collect();
        let iv = signed_rank_interval(&d, 0.95).unwrap();
        assert_eq!(iv.estimate, 5.5);
        assert_eq!((iv.lower, iv.upper), (Some(3.0), Some(8.0)));
    }
}
