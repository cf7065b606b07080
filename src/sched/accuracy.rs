//! How well predicted tile costs match measured tile times: the paper's section 3.2.
//!
//! The prediction is in arbitrary units, so it is first scaled by the least-squares factor
//! `k = sum(p m) / sum(p^2)` that best maps predictions `p` onto measurements `m`. Each tile's
//! error is then `(m - k p) / m`, in percent of the measured time: positive when the tile was
//! under-estimated, negative when over-estimated (the sign convention of the paper's Figure
//! 6). Ranking quality, which is all that `sorted` needs, is Spearman's rank correlation.

use std::fmt::Write;

/// Width of a histogram bin, in percent.
pub const BIN_PERCENT: f64 = 5.0;
/// Bins cover -50%..+50%; errors beyond land in the outermost bins.
pub const HISTOGRAM_HALF_RANGE: f64 = 50.0;

#[derive(Clone, Debug, PartialEq)]
pub struct Accuracy {
    pub tiles: usize,
    /// Spearman's rank correlation of prediction and measurement (NaN when either is constant).
    pub spearman: f64,
    /// The least-squares scale from prediction units to seconds.
    pub scale: f64,
    /// Share of tiles whose scaled prediction is within +-5% of the measurement.
    pub within_5_percent: f64,
    /// Share of tiles under-estimated (error > 0).
    pub under_estimated: f64,
    /// Counts per bin: bin `i` covers `[-50 + 5 i, -45 + 5 i)` percent; the first and last
    /// also take everything beyond.
    pub histogram: Vec<usize>,
}

/// Ranks (1-based), ties given their average rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa * sbb).sqrt()
}

/// Spearman's rank correlation (Pearson's over average ranks, so ties are handled).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    if a.len() < 2 {
        return f64::NAN;
    }
    pearson(&ranks(a), &ranks(b))
}

/// Compares predicted costs with measured seconds, tile by tile.
pub fn compare(predicted: &[f64], measured: &[f64]) -> Accuracy {
    assert_eq!(predicted.len(), measured.len());
    let pm: f64 = predicted.iter().zip(measured).map(|(p, m)| p * m).sum();
    let pp: f64 = predicted.iter().map(|p| p * p).sum();
    let scale = if pp > 0.0 { pm / pp } else { 0.0 };
    let bins = (2.0 * HISTOGRAM_HALF_RANGE / BIN_PERCENT) as usize;
    let mut histogram = vec![0usize; bins];
    let (mut within, mut under, mut counted) = (0usize, 0usize, 0usize);
    for (p, m) in predicted.iter().zip(measured) {
        if *m <= 0.0 {
            continue;
        }
        counted += 1;
        let err = 100.0 * (m - scale * p) / m;
        if err.abs() <= 5.0 {
            within += 1;
        }
        if err > 0.0 {
            under += 1;
        }
        let bin = ((err + HISTOGRAM_HALF_RANGE) / BIN_PERCENT).floor();
        histogram[bin.clamp(0.0, (bins - 1) as f64) as usize] += 1;
    }
    let share = |n: usize| {
        if counted > 0 {
            n as f64 / counted as f64
        } else {
            0.0
        }
    };
    Accuracy {
        tiles: predicted.len(),
        spearman: spearman(predicted, measured),
        scale,
        within_5_percent: share(within),
        under_estimated: share(under),
        histogram,
    }
}

impl Accuracy {
    /// The error histogram as text bars (the paper's Figure 6).
    pub fn histogram_text(&self) -> String {
        let max = self.histogram.iter().copied().max().unwrap_or(0).max(1);
        let last = self.histogram.len().saturating_sub(1);
        let mut s = String::new();
        for (i, &c) in self.histogram.iter().enumerate() {
            let lo = -HISTOGRAM_HALF_RANGE + i as f64 * BIN_PERCENT;
            let label = if i == 0 {
                format!("   < {:>+4.0}%", lo + BIN_PERCENT)
            } else if i == last {
                format!("  >= {lo:>+4.0}%")
            } else {
                format!("{lo:>+4.0}..{:>+4.0}%", lo + BIN_PERCENT)
            };
            let bar = "#".repeat((c * 40).div_ceil(max));
            let _ = writeln!(s, "    {label} {c:>5} {bar}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_and_reversed_data() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&a, &[10.0, 20.0, 25.0, 100.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        // Ties get average ranks: ranks of b are 1.5, 1.5, 3, 4.
        let r = spearman(&a, &[1.0, 1.0, 2.0, 3.0]);
        assert!(r > 0.9 && r < 1.0, "{r}");
    }

    #[test]
    fn scaled_exact_predictions_are_all_within_five_percent() {
        let p = [1.0, 2.0, 3.0];
        let m = [0.5, 1.0, 1.5];
        let a = compare(&p, &m);
        assert!((a.scale - 0.5).abs() < 1e-12);
        assert_eq!(a.within_5_percent, 1.0);
        assert_eq!(a.histogram.iter().sum::<usize>(), 3);
        // Errors of 0 land in the bin starting at 0%.
        assert_eq!(a.histogram[10], 3);
    }

    #[test]
    fn under_estimates_are_positive_errors() {
        // Scale fits 1:1 on the big tiles; the small tile is badly under-estimated.
        let a = compare(&[100.0, 100.0, 1.0], &[100.0, 100.0, 3.0]);
        assert!((a.under_estimated - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(*a.histogram.last().unwrap(), 1, "{:?}", a.histogram);
    }
}
