//! Are two renders of one image the same estimator? Three tests on per-pixel sample
//! statistics, for comparing backends (the GPU against the CPU reference) or a change against
//! the code before it.
//!
//! Each render is summarised by [`PixelStats`]: per pixel, the number of samples and the sums
//! of the samples and of their squares (per channel), from which each pixel's mean `m_p` and
//! unbiased variance `s_p^2` follow. Each test works per colour channel and splits its
//! false-alarm rate `alpha` over the three (Bonferroni), so it fails when any channel's
//! statistic exceeds the critical value for `alpha / 3`:
//!
//! - [`paired_mean_test`], for renders that used the same random numbers (same seed on both
//!   backends): the per-pixel differences `d_p = m_a,p - m_b,p` are independent across pixels
//!   (a pixel's samples depend on its own key only), so their mean `D` has standard error
//!   `sqrt(sum_p (d_p - D)^2 / (P (P - 1)))`, estimated from their spread, whatever the
//!   correlation between the two renders within a pixel. Where the renders replay the same
//!   paths the differences are tiny and a small bias stands out. `z = D / se`, two-sided.
//! - [`global_mean_test`]: the image means `M = (1/P) sum_p m_p`, with variance
//!   `(1/P^2) sum_p s_p^2 / n_p` each, `z = (M_a - M_b) / sqrt(v_a + v_b)`, two-sided. Exact
//!   for independent renders (different seeds); conservative for paired ones (their positive
//!   correlation makes the true variance of the difference smaller).
//! - [`block_chi_square_test`]: the image cut into `block x block` tiles; per tile the same
//!   z as the global test (for paired renders, the paired test's z within the tile), and
//!   `X = sum_tiles z^2`, which is chi-square with as many degrees of freedom as tiles under
//!   the hypothesis (the tiles are independent); the critical value is the Wilson-Hilferty
//!   approximation of the upper `alpha / 3` quantile. It sees a bias confined to part of the
//!   image that the global mean dilutes.
//!
//! Every test allows a relative difference of `tolerance` before it counts one: it tests the
//! hypothesis `|bias| <= tolerance` rather than `bias = 0`, with `|D|` replaced by
//! `max(0, |D| - tolerance |M|)` (per tile for the chi-square test, which makes `X` at most
//! chi-square under the hypothesis). Paired renders of two backends differ by float rounding
//! (another `powf`, fused multiply-adds, the hardware's triangle test) by about 1e-6 of the
//! image, systematically within a pixel; without a tolerance the paired tests, whose power is
//! enormous, would flag that. [`DEFAULT_TOLERANCE`] is 1e-3: a thousand times that, a tenth of
//! the 1% a comparison is asked to see.
//!
//! Each result also gives the smallest *relative* bias of the whole image (render b =
//! `(1 + bias)` render a) that the test detects with probability 0.999: `(k + 3.09) se / |M|`
//! plus the tolerance, with `k` the critical z (for the chi-square test, the bias whose noncentrality
//! `bias^2 sum_tiles (m_tile / se_tile)^2` moves the statistic's mean `dof + lambda` past the
//! critical value plus 3.09 of its standard deviation `sqrt(2 dof + 4 lambda)`). A comparison
//! meant to see a 1% bias asserts that figure, so an undersized one fails instead of passing
//! for want of samples.

use glam::DVec3;

/// How a comparison is run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompareOptions {
    /// The renders used the same random numbers (same seed): run the paired tests.
    pub paired: bool,
    /// Tile side of the chi-square test, in pixels.
    pub block: u32,
    /// False-alarm rate of each test (split over the three channels).
    pub alpha: f64,
    /// Relative difference allowed before a difference counts (see the module comment).
    pub tolerance: f64,
}

/// See the module comment.
pub const DEFAULT_TOLERANCE: f64 = 1e-3;

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            paired: false,
            block: 8,
            alpha: 1e-3,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

/// The upper 0.001 quantile of the standard normal: `z` added to the critical value for a
/// detection probability of 0.999.
pub const POWER_Z: f64 = 3.090_232_306_167_813;

/// Per-pixel sample counts, sums and sums of squares of one render, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelStats {
    pub width: u32,
    pub height: u32,
    pub count: Vec<u32>,
    pub sum: Vec<DVec3>,
    pub sum2: Vec<DVec3>,
}

impl PixelStats {
    pub fn new(width: u32, height: u32) -> PixelStats {
        let px = width as usize * height as usize;
        PixelStats {
            width,
            height,
            count: vec![0; px],
            sum: vec![DVec3::ZERO; px],
            sum2: vec![DVec3::ZERO; px],
        }
    }

    pub fn pixel_count(&self) -> usize {
        self.count.len()
    }

    /// Adds one sample of pixel `p` (row-major index).
    pub fn add(&mut self, p: usize, l: DVec3) {
        self.count[p] += 1;
        self.sum[p] += l;
        self.sum2[p] += l * l;
    }

    pub fn mean(&self, p: usize) -> DVec3 {
        self.sum[p] / f64::from(self.count[p].max(1))
    }

    /// Unbiased sample variance of pixel `p`'s samples (0 with fewer than two).
    pub fn variance(&self, p: usize) -> DVec3 {
        let n = f64::from(self.count[p]);
        if n < 2.0 {
            return DVec3::ZERO;
        }
        ((self.sum2[p] - self.sum[p] * self.sum[p] / n) / (n - 1.0)).max(DVec3::ZERO)
    }

    /// The mean of the pixels' means.
    pub fn image_mean(&self) -> DVec3 {
        self.mean_over(0..self.pixel_count())
    }

    /// The mean of the given pixels' means and its estimated variance
    /// `(1/P^2) sum_p s_p^2 / n_p`.
    fn mean_and_variance(&self, pixels: impl Iterator<Item = usize> + Clone) -> (DVec3, DVec3) {
        let p = pixels.clone().count() as f64;
        let mean = pixels.clone().map(|i| self.mean(i)).sum::<DVec3>() / p;
        let var = pixels
            .map(|i| self.variance(i) / f64::from(self.count[i].max(1)))
            .sum::<DVec3>()
            / (p * p);
        (mean, var)
    }

    fn mean_over(&self, pixels: std::ops::Range<usize>) -> DVec3 {
        self.mean_and_variance(pixels).0
    }

    /// Every sample multiplied by `factor` (a synthetic bias, for testing comparisons).
    pub fn scaled(&self, factor: f64) -> PixelStats {
        PixelStats {
            sum: self.sum.iter().map(|s| *s * factor).collect(),
            sum2: self.sum2.iter().map(|s| *s * factor * factor).collect(),
            ..self.clone()
        }
    }
}

/// The outcome of one test (its worst channel).
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    pub name: &'static str,
    /// |z| for the z tests, X for the chi-square test (worst channel).
    pub statistic: f64,
    /// The value the statistic must not exceed.
    pub critical: f64,
    /// Degrees of freedom (chi-square), or 1.
    pub dof: usize,
    /// The smallest image-wide relative bias this test detects with probability 0.999
    /// (largest over the channels).
    pub detectable_bias: f64,
    pub passed: bool,
    /// One line for logs: the statistic per channel and the bound.
    pub summary: String,
}

fn assert_same_size(a: &PixelStats, b: &PixelStats) {
    assert_eq!(
        (a.width, a.height),
        (b.width, b.height),
        "the renders differ in size"
    );
}

/// `k` with `P(|Z| > k) = p` for a standard normal `Z`.
pub fn two_sided_normal_quantile(p: f64) -> f64 {
    upper_normal_quantile(p / 2.0)
}

/// `k` with `P(Z > k) = p` (bisection on the complementary error function).
pub fn upper_normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if 0.5 * erfc(mid / std::f64::consts::SQRT_2) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// erfc(x) (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The upper `p` quantile of chi-square with `dof` degrees of freedom (Wilson-Hilferty).
pub fn chi_square_upper_quantile(dof: usize, p: f64) -> f64 {
    let k = dof.max(1) as f64;
    let z = upper_normal_quantile(p);
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// `d / se`, with `0 / 0 = 0` and `d / 0 = inf`.
fn z_score(d: f64, se: f64) -> f64 {
    if se > 0.0 {
        d / se
    } else if d == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

/// `max(0, |d| - tolerance |m|)`: the part of a difference beyond the tolerance.
fn beyond(d: f64, m: f64, tolerance: f64) -> f64 {
    (d.abs() - tolerance * m.abs()).max(0.0)
}

/// A two-sided z test per channel from differences and standard errors; `scale` is the
/// reference image mean (for the tolerance and the detectable bias).
fn z_test(name: &'static str, d: DVec3, se: DVec3, scale: DVec3, o: &CompareOptions) -> TestResult {
    let k = two_sided_normal_quantile(o.alpha / 3.0);
    let z: [f64; 3] = [0, 1, 2].map(|c| z_score(beyond(d[c], scale[c], o.tolerance), se[c]));
    let detect: [f64; 3] = [0, 1, 2].map(|c| {
        if scale[c].abs() > 0.0 {
            o.tolerance + (k + POWER_Z) * se[c] / scale[c].abs()
        } else {
            0.0
        }
    });
    let worst = z.iter().copied().fold(0.0, f64::max);
    let detectable = detect.iter().copied().fold(0.0, f64::max);
    TestResult {
        name,
        statistic: worst,
        critical: k,
        dof: 1,
        detectable_bias: detectable,
        passed: worst <= k,
        summary: format!(
            "{name}: z = {:.2} {:.2} {:.2} (difference {:.3e} {:.3e} {:.3e} of {:.3e} {:.3e} {:.3e}, se {:.3e} {:.3e} {:.3e}, tolerance {}), bound {k:.2}; detects a {:.3}% bias",
            z[0], z[1], z[2], d.x, d.y, d.z, scale.x, scale.y, scale.z, se.x, se.y, se.z,
            o.tolerance, 100.0 * detectable
        ),
    }
}

/// The paired test of the module comment: for renders made with the same random numbers.
pub fn paired_mean_test(a: &PixelStats, b: &PixelStats, o: &CompareOptions) -> TestResult {
    assert_same_size(a, b);
    let p = a.pixel_count() as f64;
    let d: Vec<DVec3> = (0..a.pixel_count())
        .map(|i| a.mean(i) - b.mean(i))
        .collect();
    let mean = d.iter().sum::<DVec3>() / p;
    let spread = d.iter().map(|x| (*x - mean) * (*x - mean)).sum::<DVec3>();
    let se = (spread / (p * (p - 1.0).max(1.0))).max(DVec3::ZERO);
    let se = DVec3::new(se.x.sqrt(), se.y.sqrt(), se.z.sqrt());
    z_test("paired mean", mean, se, a.image_mean(), o)
}

/// The global-mean test of the module comment.
pub fn global_mean_test(a: &PixelStats, b: &PixelStats, o: &CompareOptions) -> TestResult {
    assert_same_size(a, b);
    let all = 0..a.pixel_count();
    let (ma, va) = a.mean_and_variance(all.clone());
    let (mb, vb) = b.mean_and_variance(all);
    let se = va + vb;
    let se = DVec3::new(se.x.sqrt(), se.y.sqrt(), se.z.sqrt());
    z_test("global mean", ma - mb, se, ma, o)
}

/// The chi-square test over `block x block` tiles of the module comment. With `paired`
/// (renders made with the same random numbers), each tile's z uses the spread of its pixels'
/// differences `d_p` instead of `v_a + v_b` (which overstates the variance of the difference
/// of correlated renders): `t = D_tile / sqrt(sum (d_p - D_tile)^2 / (P (P - 1)))`, Student's t
/// with `P - 1` degrees of freedom, turned into a normal score by Abramowitz and Stegun's
/// 26.7.8, `z = t (1 - 1/(4 nu)) / sqrt(1 + t^2 / (2 nu))`. Tiles of fewer than 8 pixels use
/// `v_a + v_b` either way.
pub fn block_chi_square_test(a: &PixelStats, b: &PixelStats, o: &CompareOptions) -> TestResult {
    assert_same_size(a, b);
    let (w, h) = (a.width as usize, a.height as usize);
    let block = o.block.max(1) as usize;
    let (paired, alpha) = (o.paired, o.alpha);
    let mut x = DVec3::ZERO;
    // Per channel: tiles with a defined z, and sum over tiles of (m_tile / se_tile)^2.
    let mut dof = [0usize; 3];
    let mut signal = DVec3::ZERO;
    for by in (0..h).step_by(block) {
        for bx in (0..w).step_by(block) {
            let pixels = (by..(by + block).min(h))
                .flat_map(move |y| (bx..(bx + block).min(w)).map(move |x| y * w + x));
            let (ma, va) = a.mean_and_variance(pixels.clone());
            let (mb, vb) = b.mean_and_variance(pixels.clone());
            let n = pixels.clone().count();
            let paired_var = (paired && n >= 8).then(|| {
                let d = ma - mb;
                let spread = pixels
                    .map(|i| {
                        let e = a.mean(i) - b.mean(i) - d;
                        e * e
                    })
                    .sum::<DVec3>();
                spread / (n as f64 * (n as f64 - 1.0))
            });
            for c in 0..3 {
                let v = paired_var.map_or(va[c] + vb[c], |v| v[c]);
                let d = beyond(ma[c] - mb[c], ma[c], o.tolerance);
                if v > 0.0 {
                    let mut z = d / v.sqrt();
                    if paired_var.is_some() {
                        let nu = n as f64 - 1.0;
                        z = z * (1.0 - 1.0 / (4.0 * nu)) / (1.0 + z * z / (2.0 * nu)).sqrt();
                    }
                    x[c] += z * z;
                    signal[c] += ma[c] * ma[c] / v;
                    dof[c] += 1;
                } else if d != 0.0 {
                    x[c] = f64::INFINITY;
                }
            }
        }
    }
    let crit: [f64; 3] = dof.map(|k| chi_square_upper_quantile(k, alpha / 3.0));
    // The bias whose noncentrality lambda = bias^2 signal moves dof + lambda past the
    // critical value by POWER_Z standard deviations sqrt(2 dof + 4 lambda): solve for lambda.
    let detect: [f64; 3] =
        [0, 1, 2].map(|c| detectable_bias(signal[c], dof[c], crit[c], o.tolerance));
    let ratio: [f64; 3] = [0, 1, 2].map(|c| x[c] / crit[c]);
    let worst = (0..3)
        .max_by(|&i, &j| ratio[i].total_cmp(&ratio[j]))
        .unwrap_or(0);
    TestResult {
        name: "block chi-square",
        statistic: x[worst],
        critical: crit[worst],
        dof: dof[worst],
        detectable_bias: detect.iter().copied().fold(0.0, f64::max),
        passed: (0..3).all(|c| x[c] <= crit[c]),
        summary: format!(
            "block chi-square ({block}x{block} tiles{}): X = {:.1} {:.1} {:.1} over {} {} {} tiles, bounds {:.1} {:.1} {:.1}; detects a {:.3}% bias",
            if paired { ", paired" } else { "" },
            x.x, x.y, x.z, dof[0], dof[1], dof[2], crit[0], crit[1], crit[2],
            100.0 * detect.iter().copied().fold(0.0, f64::max)
        ),
    }
}

/// The smallest relative bias one channel of [`block_chi_square_test`] detects (with power
/// from [`POWER_Z`]), from the channel's `signal` (sum of m^2 / se^2 over tiles), its `dof`
/// and critical value `crit`, above the `tolerance` it allows; 0 without signal.
fn detectable_bias(signal: f64, dof: usize, crit: f64, tolerance: f64) -> f64 {
    let k = dof as f64;
    if signal <= 0.0 {
        return 0.0;
    }
    // lambda - POWER_Z sqrt(2k + 4 lambda) = crit - k, by bisection (monotone for lambda >= 0).
    let target = crit - k;
    let (mut lo, mut hi) = (0.0f64, 1e12f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid - POWER_Z * (2.0 * k + 4.0 * mid).sqrt() < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    tolerance + (hi / signal).sqrt()
}

/// All three tests (the paired one only for renders that used the same random numbers).
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub paired: Option<TestResult>,
    pub global_mean: TestResult,
    pub chi_square: TestResult,
}

impl Comparison {
    pub fn results(&self) -> impl Iterator<Item = &TestResult> {
        self.paired
            .iter()
            .chain([&self.global_mean, &self.chi_square])
    }

    pub fn passed(&self) -> bool {
        self.results().all(|r| r.passed)
    }

    /// One line per test.
    pub fn summary(&self) -> String {
        self.results()
            .map(|r| format!("{} {}", if r.passed { "pass" } else { "FAIL" }, r.summary))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs the tests (the paired one only for paired renders).
pub fn compare(a: &PixelStats, b: &PixelStats, o: &CompareOptions) -> Comparison {
    Comparison {
        paired: o.paired.then(|| paired_mean_test(a, b, o)),
        global_mean: global_mean_test(a, b, o),
        chi_square: block_chi_square_test(a, b, o),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::sampler::RandomStream;

    #[test]
    fn quantiles_match_tables() {
        assert!((two_sided_normal_quantile(0.05) - 1.959_964).abs() < 1e-4);
        assert!((upper_normal_quantile(0.001) - POWER_Z).abs() < 1e-4);
        assert!((two_sided_normal_quantile(1e-3 / 192.0) - 4.56).abs() < 0.01);
        // chi-square(100) upper 1% is 135.807; Wilson-Hilferty is within 0.1 of it.
        assert!((chi_square_upper_quantile(100, 0.01) - 135.807).abs() < 0.1);
        assert!((chi_square_upper_quantile(10, 0.05) - 18.307).abs() < 0.1);
    }

    /// A standard normal number from two uniforms (Box-Muller).
    fn normal(s: &mut RandomStream) -> f64 {
        let (u1, u2) = (f64::from(s.next_f32()).max(1e-12), f64::from(s.next_f32()));
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Synthetic renders: pixel p's true value `mu_p` (a gradient), samples `mu_p + sigma
    /// e`, with `e` shared between the two renders with weight `rho` (pairing) and its own
    /// noise otherwise; render b scaled by `1 + bias` on the pixels `biased` selects.
    fn synthetic(
        seed: u64,
        rho: f64,
        bias: f64,
        biased: impl Fn(u32, u32) -> bool,
    ) -> (PixelStats, PixelStats) {
        let (w, h, n) = (64u32, 64u32, 64u32);
        let (mut a, mut b) = (PixelStats::new(w, h), PixelStats::new(w, h));
        for p in 0..w * h {
            let (x, y) = (p % w, p / w);
            let mu = DVec3::new(1.0 + x as f64 / 64.0, 0.5 + y as f64 / 128.0, 0.8);
            let factor = if biased(x, y) { 1.0 + bias } else { 1.0 };
            for i in 0..n {
                let mut shared = RandomStream::new(p, i, seed);
                let mut own = RandomStream::new(p, i, seed ^ 0xABCD);
                let common = DVec3::new(
                    normal(&mut shared),
                    normal(&mut shared),
                    normal(&mut shared),
                );
                let ea = DVec3::new(normal(&mut own), normal(&mut own), normal(&mut own));
                let eb = DVec3::new(normal(&mut own), normal(&mut own), normal(&mut own));
                let mix = |e: DVec3| rho * common + (1.0 - rho * rho).sqrt() * e;
                a.add(p as usize, mu + 0.4 * mu * mix(ea));
                b.add(p as usize, (mu + 0.4 * mu * mix(eb)) * factor);
            }
        }
        (a, b)
    }

    /// No bias passes all three tests, paired (rho 0.99) or not; a 1% bias of the whole image
    /// fails the paired tests (which resolve 0.3% here) and the global mean (262k samples of
    /// relative spread 0.4 per render resolve about 0.9%: the figure is checked); a 10% bias
    /// on one 16x16 corner (1/16 of the image, 0.6% of its mean) fails the chi-square test,
    /// and so does a 2% one there when the renders are paired.
    #[test]
    fn synthetic_biases_are_caught_and_equal_estimators_pass() {
        let paired = CompareOptions {
            paired: true,
            ..CompareOptions::default()
        };
        let unpaired = CompareOptions::default();
        let none = |_: u32, _: u32| true;
        for (rho, seed) in [(0.99, 1), (0.0, 2)] {
            let (a, b) = synthetic(seed, rho, 0.0, none);
            let c = compare(&a, &b, &paired);
            eprintln!("rho {rho}, no bias:\n{}", c.summary());
            assert!(c.passed(), "rho {rho}: no bias must pass:\n{}", c.summary());
        }
        let (a, b) = synthetic(3, 0.99, 0.01, none);
        let c = compare(&a, &b, &paired);
        eprintln!("rho 0.99, 1% bias:\n{}", c.summary());
        let test = c.paired.as_ref().unwrap();
        assert!(test.detectable_bias < 0.003, "{}", test.summary);
        assert!(!test.passed, "a 1% bias, paired:\n{}", c.summary());
        assert!(!c.chi_square.passed, "a 1% bias, paired:\n{}", c.summary());

        let (a, b) = synthetic(4, 0.0, 0.01, none);
        let c = compare(&a, &b, &unpaired);
        eprintln!("rho 0, 1% bias:\n{}", c.summary());
        assert!(c.global_mean.detectable_bias < 0.01, "{}", c.summary());
        assert!(!c.global_mean.passed, "a 1% bias:\n{}", c.summary());

        let (a, b) = synthetic(5, 0.0, 0.10, |x, y| x < 16 && y < 16);
        let c = compare(&a, &b, &unpaired);
        eprintln!("rho 0, 10% bias on 1/16 of the image:\n{}", c.summary());
        assert!(!c.chi_square.passed, "a local 10% bias:\n{}", c.summary());
        let (a, b) = synthetic(6, 0.99, 0.02, |x, y| x < 16 && y < 16);
        let c = compare(&a, &b, &paired);
        eprintln!("rho 0.99, 2% bias on 1/16 of the image:\n{}", c.summary());
        assert!(
            !c.chi_square.passed,
            "a local 2% bias, paired:\n{}",
            c.summary()
        );
    }

    #[test]
    fn identical_renders_pass_and_a_difference_without_variance_fails() {
        let mut a = PixelStats::new(4, 4);
        for p in 0..16 {
            for _ in 0..3 {
                a.add(p, DVec3::splat(2.0));
            }
        }
        let exact = CompareOptions {
            paired: true,
            block: 2,
            tolerance: 0.0,
            ..CompareOptions::default()
        };
        let c = compare(&a, &a.clone(), &exact);
        assert!(c.passed(), "{}", c.summary());
        let c = compare(&a, &a.scaled(1.0001), &exact);
        assert!(!c.passed(), "{}", c.summary());
        assert!(c.results().all(|r| !r.passed));
        // Within the tolerance a difference does not count; beyond it, it does.
        let tolerant = CompareOptions {
            tolerance: 1e-3,
            ..exact
        };
        assert!(compare(&a, &a.scaled(1.0005), &tolerant).passed());
        assert!(!compare(&a, &a.scaled(1.002), &tolerant).passed());
    }
}
