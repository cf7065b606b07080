//! A guided spatial denoiser: the edge-avoiding à-trous wavelet filter (Dammertz et al. 2010,
//! "Edge-Avoiding À-Trous Wavelet Transform for fast Global Illumination Filtering"), with
//! the variance-driven luminance weight and the albedo demodulation of SVGF (Schied et al.
//! 2017) in their one-frame form.
//!
//! It needs no library and no GPU: the noisy image and the guide layers `render --aov
//! albedo,normal` writes beside it (`src/cpu/aov.rs`). It is a filter, not a learned
//! denoiser: at a few samples per pixel Open Image Denoise or the OptiX denoiser, fed the same
//! layers, keep more detail. What it does well is what a cross-bilateral filter can: smooth
//! the noise of lighting over surfaces of one orientation, keeping the edges the guide layers
//! show.
//!
//! # The filter
//!
//! 1. *Demodulation.* Each channel of the image is divided by the pixel's albedo (where the
//!    albedo is above [`ALBEDO_FLOOR`]; elsewhere the channel is filtered as it is), so that
//!    what is filtered is the light arriving, not the texture: textures come back, sharp, when
//!    the result is multiplied by the same albedo. The division and the multiplication use
//!    the same numbers, so a pixel the filter leaves alone comes back bit for bit.
//! 2. *Fireflies.* A pixel whose light is more than [`DenoiseOptions::firefly_ratio`] (2)
//!    times that of the brightest of its 8 neighbours on the same surface is a firefly, a
//!    rare bright path: averaging cannot hide it (the luminance weight below keeps it apart,
//!    as it keeps any edge), so it is scaled down to that ratio first. The light taken off
//!    goes to those neighbours in equal shares, each only up to the firefly's scaled value
//!    (channel by channel); the rest, what a bright firefly has beyond that, is lost, which
//!    darkens an image at a few samples per pixel slightly (the figures in docs/guide/output-and-layers.md). A pixel
//!    with fewer than 3 such neighbours (a thin line's end, a corner) is left alone.
//! 3. *Variance.* The light's luminance varies from pixel to pixel by noise and by edges; the
//!    filter needs the noise's size. With one image and no per-sample statistics it is
//!    estimated from the pixel's 7x7 neighbourhood on the same surface, as SVGF does in its
//!    first frame, but robustly (the median difference of neighbouring pixels), so that an
//!    edge through the window is not taken for noise.
//! 4. *Five (by default) à-trous passes*: pass `i` averages a 5x5 B3-spline kernel whose taps
//!    lie `2^i` pixels apart (so five passes reach 62 pixels either side, at 25 taps a pixel
//!    each), each tap weighted further by
//!    - the normals: `max(0, cos)^128` (another orientation is another surface);
//!    - the albedos: `exp(-|a_p - a_q|^2 / 0.1^2)` (another material, most likely another
//!      object; without depth this is what keeps a white block apart from the white floor
//!      where their normals agree and their lighting does not);
//!    - the luminance of the light: `exp(-|l_p - l_q| / (2 sigma_p))`, `sigma_p` the standard
//!      deviation the variance predicts (3x3-blurred), so that a difference the noise cannot
//!      explain (a shadow's edge) is kept. In the first pass, whose input is the noisy light
//!      itself, `l_p` and `l_q` are the luminances 3x3-blurred over the same surface: with
//!      the raw ones, a pixel that a rare bright path made bright differs from every
//!      neighbour by more than the noise "explains", so it gets little weight in their
//!      averages and keeps its own, while its dark neighbours average with each other: the
//!      image darkens (the 4-spp Cornell box's mean by 2%), and every lone noisy pixel
//!      counts as an edge. SVGF's 4 standard deviations suit raw differences; the blurred
//!      ones are smaller (a 3x3 binomial blur leaves 0.375 of independent noise), hence 2,
//!      which measured best on the guide's two scenes from 1.5 to 4.
//!
//!    The variance is carried through the passes as that of a weighted mean (`sum w^2 var /
//!    (sum w)^2`), so later passes, whose input is smoother, stop at smaller differences.
//! 5. *Pixels that see nothing* (a zero normal: the background, the environment) are copied
//!    as they are and take no part in their neighbours' averages.
//!
//! Every tap's weight is at most its kernel weight and the centre's is its own, so every
//! pass's output is a convex combination of its inputs: a constant image is a fixed point,
//! nothing goes negative, and nothing brighter than the brightest input appears.

use glam::Vec3;
use rayon::prelude::*;

use crate::colour::luminance;

/// Albedo channels at or below this are not divided by: their light is filtered as the
/// image's colour (a black surface's colour is its own noise-free zero, or whatever a mirror
/// chain brought, which is no lighting to demodulate).
pub const ALBEDO_FLOOR: f32 = 1e-3;

/// A normal this short or shorter (squared length) is "no surface here".
const NO_SURFACE: f32 = 1e-6;

/// The 1D B3-spline kernel of the à-trous passes.
const KERNEL: [f32; 5] = [1.0 / 16.0, 1.0 / 4.0, 3.0 / 8.0, 1.0 / 4.0, 1.0 / 16.0];

/// How sharply the filter stops at edges.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenoiseOptions {
    /// À-trous passes: `n` passes reach `2^(n+1) - 2` pixels either side.
    pub iterations: u32,
    /// The power of the normals' cosine (SVGF's 128): an integer, so that it is a few
    /// multiplications, not a `powf` per tap (a large share of the time: figures in
    /// docs/guide/output-and-layers.md).
    pub normal_power: i32,
    /// The albedo difference, RGB distance, at which a neighbour's weight falls to `1/e`.
    pub sigma_albedo: f32,
    /// The luminance difference, in standard deviations of the noise, at which a
    /// neighbour's weight falls to `1/e` (2: SVGF's 4 is for raw differences, and the first
    /// pass compares blurred ones; see the module comment).
    pub sigma_luminance: f32,
    /// A pixel whose light's luminance is more than this many times that of the brightest of
    /// its 8 neighbours on the same surface is a firefly, and is scaled down to this many
    /// times it, its neighbours taking what fits of the light taken off (`None`: fireflies
    /// are kept).
    pub firefly_ratio: Option<f32>,
}

impl Default for DenoiseOptions {
    fn default() -> Self {
        DenoiseOptions {
            iterations: 5,
            normal_power: 128,
            sigma_albedo: 0.1,
            sigma_luminance: 2.0,
            firefly_ratio: Some(2.0),
        }
    }
}

impl DenoiseOptions {
    /// Whether the filter can use these numbers: [`denoise`] refuses others, and a caller
    /// with files to read can ask first. The errors name the `gasworks denoise` flags.
    pub fn check(&self) -> Result<(), DenoiseError> {
        if !(1..=10).contains(&self.iterations) {
            return Err(DenoiseError::Iterations(self.iterations));
        }
        for (flag, value) in [
            ("sigma-luminance", self.sigma_luminance),
            ("sigma-albedo", self.sigma_albedo),
        ] {
            // Zero or below would divide by zero or turn the weights around; NaN and
            // infinity weigh every neighbour alike or none.
            if !(value.is_finite() && value > 0.0) {
                return Err(DenoiseError::NotPositive { flag, value });
            }
        }
        // Below 1, a pixel only a little brighter than its neighbours would be scaled down
        // too: not fireflies but the image's own contrast.
        if let Some(r) = self.firefly_ratio {
            if !(r.is_finite() && r >= 1.0) {
                return Err(DenoiseError::FireflyRatio(r));
            }
        }
        // A negative power would make the weight grow as the normals part.
        if self.normal_power < 0 {
            return Err(DenoiseError::NormalPower(self.normal_power));
        }
        Ok(())
    }

    /// The item a denoised image's render key gains: crops denoised otherwise (or not at all)
    /// are other pixels, and do not merge with it. (`prefiltered` names the first pass's
    /// luminance weight, so that crops an older gasworks denoised with the same numbers but
    /// raw luminances do not merge with these either.)
    pub fn key_item(&self) -> String {
        // "shared": the light taken off a firefly goes to its neighbours; crops denoised by
        // builds that dropped it carry no such word, and so do not merge with these.
        let fireflies = match self.firefly_ratio {
            Some(r) => format!("{r:?} shared"),
            None => "kept".into(),
        };
        format!(
            "denoised atrous iterations {} normal {} albedo {:?} luminance {:?} prefiltered fireflies {fireflies}",
            self.iterations, self.normal_power, self.sigma_albedo, self.sigma_luminance
        )
    }
}

/// Why an image cannot be denoised.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum DenoiseError {
    #[error("the {layer} layer has {got} pixels where the image has {want} ({width}x{height})")]
    SizeMismatch {
        layer: &'static str,
        got: usize,
        want: usize,
        width: u32,
        height: u32,
    },
    #[error("the {layer} layer's pixel ({x}, {y}) is not finite ({value:?})")]
    NotFinite {
        layer: &'static str,
        x: u32,
        y: u32,
        value: [f32; 3],
    },
    #[error("the {layer} layer's pixel ({x}, {y}) is negative ({value:?}): it is not radiance or albedo")]
    Negative {
        layer: &'static str,
        x: u32,
        y: u32,
        value: [f32; 3],
    },
    #[error("--iterations {0}: give 1 to 10 passes (10 reach 2046 pixels either side)")]
    Iterations(u32),
    #[error("--{flag} {value}: give a positive number")]
    NotPositive { flag: &'static str, value: f32 },
    #[error(
        "--firefly-ratio {0}: give a ratio of at least 1 (2: a pixel more than twice as \
         bright as every neighbour), or --keep-fireflies"
    )]
    FireflyRatio(f32),
    #[error("the normals' power {0}: give 0 (normals ignored) or more")]
    NormalPower(i32),
}

/// Denoises `color` (`width x height` linear RGB, row-major) guided by the `albedo` and
/// `normal` layers of the same pixels. See the module comment.
pub fn denoise(
    color: &[[f32; 3]],
    albedo: &[[f32; 3]],
    normal: &[[f32; 3]],
    width: u32,
    height: u32,
    options: &DenoiseOptions,
) -> Result<Vec<[f32; 3]>, DenoiseError> {
    options.check()?;
    let n = width as usize * height as usize;
    for (layer, pixels) in [("colour", color), ("albedo", albedo), ("normal", normal)] {
        check_layer(layer, pixels, n, width, height)?;
    }
    let w = width as usize;
    let h = height as usize;

    // 1. Demodulation: the light, and the factor that brings the colour back.
    let factor: Vec<[f32; 3]> = albedo
        .iter()
        .map(|a| a.map(|c| if c > ALBEDO_FLOOR { c } else { 1.0 }))
        .collect();
    let mut light: Vec<[f32; 3]> = color
        .iter()
        .zip(&factor)
        .map(|(c, f)| [c[0] / f[0], c[1] / f[1], c[2] / f[2]])
        .collect();
    let unit_normal: Vec<Option<[f32; 3]>> = normal.iter().map(|&n| unit(n)).collect();
    let guide = Guide {
        w,
        h,
        normal: &unit_normal,
        albedo,
        options,
    };

    // 2. Fireflies: a lone pixel far brighter than every neighbour on its surface.
    if let Some(ratio) = options.firefly_ratio {
        light = guide.clamp_fireflies(&light, ratio);
    }

    // 3. The variance of the light's luminance, from each pixel's neighbourhood.
    let mut variance = guide.spatial_variance(&light);

    // 4. The passes.
    for i in 0..options.iterations {
        let (next_light, next_variance) = guide.atrous_pass(&light, &variance, 1 << i);
        light = next_light;
        variance = next_variance;
    }

    // 5. Remodulate; pixels that see no surface are the input's.
    Ok((0..n)
        .map(|p| match unit_normal[p] {
            Some(_) => {
                let (l, f) = (light[p], factor[p]);
                [l[0] * f[0], l[1] * f[1], l[2] * f[2]]
            }
            None => color[p],
        })
        .collect())
}

fn check_layer(
    layer: &'static str,
    pixels: &[[f32; 3]],
    n: usize,
    width: u32,
    height: u32,
) -> Result<(), DenoiseError> {
    if pixels.len() != n {
        return Err(DenoiseError::SizeMismatch {
            layer,
            got: pixels.len(),
            want: n,
            width,
            height,
        });
    }
    let at = |i: usize| ((i % width as usize) as u32, (i / width as usize) as u32);
    if let Some(i) = pixels.iter().position(|p| p.iter().any(|c| !c.is_finite())) {
        let (x, y) = at(i);
        return Err(DenoiseError::NotFinite {
            layer,
            x,
            y,
            value: pixels[i],
        });
    }
    // Normals are signed; radiance and albedo are not.
    if layer != "normal" {
        if let Some(i) = pixels.iter().position(|p| p.iter().any(|&c| c < 0.0)) {
            let (x, y) = at(i);
            return Err(DenoiseError::Negative {
                layer,
                x,
                y,
                value: pixels[i],
            });
        }
    }
    Ok(())
}

fn unit(n: [f32; 3]) -> Option<[f32; 3]> {
    let len2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    (len2 > NO_SURFACE).then(|| {
        let inv = len2.sqrt().recip();
        [n[0] * inv, n[1] * inv, n[2] * inv]
    })
}

fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// The median of `v` (reordered; the upper middle of an even count). `v` is not empty.
fn median_of(v: &mut [f32]) -> f32 {
    let mid = v.len() / 2;
    *v.select_nth_unstable_by(mid, f32::total_cmp).1
}

/// A pixel [`Guide::clamp_fireflies`] scales down.
#[derive(Clone, Copy, Debug)]
struct Firefly {
    /// What its light is multiplied by.
    scale: f32,
    /// Its neighbours on the same surface, which share the light taken off.
    neighbours: u32,
}

/// The layers that steer the weights, which stay the same through the passes.
struct Guide<'a> {
    w: usize,
    h: usize,
    /// Unit normals; `None` where no surface is seen.
    normal: &'a [Option<[f32; 3]>],
    albedo: &'a [[f32; 3]],
    options: &'a DenoiseOptions,
}

impl Guide<'_> {
    /// How much the surfaces at `p` (normal `np`) and `q` are one surface: the normals'
    /// weight, and the exponent of the albedos' (`None` when `q` sees no surface or faces
    /// away). Apart, so that the à-trous pass takes one `exp` of both its exponents.
    fn surface_terms(&self, np: [f32; 3], p: usize, q: usize) -> Option<(f32, f32)> {
        let nq = self.normal[q]?;
        let cos = dot(np, nq);
        // Unit normals of finite layers: the cosine is finite.
        if cos <= 0.0 {
            return None;
        }
        let (ap, aq) = (self.albedo[p], self.albedo[q]);
        let d = [ap[0] - aq[0], ap[1] - aq[1], ap[2] - aq[2]];
        let sa = self.options.sigma_albedo;
        Some((cos.powi(self.options.normal_power), dot(d, d) / (sa * sa)))
    }

    /// How much the surfaces at `p` and `q` are one surface: the normals' and the albedos'
    /// weights (0 when `q` sees no surface).
    fn geometry_weight(&self, np: [f32; 3], p: usize, q: usize) -> f32 {
        self.surface_terms(np, p, q)
            .map_or(0.0, |(normals, albedo)| normals * (-albedo).exp())
    }

    /// The noise's variance in the light's luminance at each pixel, from the differences of
    /// neighbouring pixels in its 7x7 neighbourhood on the same surface (pairs of horizontal
    /// or vertical neighbours whose [`Guide::geometry_weight`] against the pixel is above
    /// 1/2): the median of `|l_a - l_b|` over those pairs, over 0.954 (for independent normal
    /// noise, the median of the difference of two pixels is 0.954 standard deviations).
    /// SVGF's weighted variance (the mean square deviation from the window's mean) counts the
    /// step of a shadow's edge as noise and then lets the filter cross it; an edge through
    /// the window changes only the few pairs that straddle it, and a median ignores them.
    fn spatial_variance(&self, light: &[[f32; 3]]) -> Vec<f32> {
        let (w, h) = (self.w, self.h);
        let lum: Vec<f32> = light.iter().map(|&c| luminance(Vec3::from(c))).collect();
        let mut out = vec![0f32; w * h];
        out.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
            let mut same = [false; 49];
            let mut diffs = [0f32; 84];
            for (x, v) in row.iter_mut().enumerate() {
                let p = y * w + x;
                let Some(np) = self.normal[p] else { continue };
                let (x0, y0) = (x.saturating_sub(3), y.saturating_sub(3));
                let (x1, y1) = ((x + 4).min(w), (y + 4).min(h));
                let cols = x1 - x0;
                for qy in y0..y1 {
                    for qx in x0..x1 {
                        let q = qy * w + qx;
                        same[(qy - y0) * cols + (qx - x0)] =
                            q == p || self.geometry_weight(np, p, q) > 0.5;
                    }
                }
                let mut n = 0;
                for qy in y0..y1 {
                    for qx in x0..x1 {
                        let i = (qy - y0) * cols + (qx - x0);
                        if !same[i] {
                            continue;
                        }
                        let q = qy * w + qx;
                        if qx + 1 < x1 && same[i + 1] {
                            diffs[n] = (lum[q] - lum[q + 1]).abs();
                            n += 1;
                        }
                        if qy + 1 < y1 && same[i + cols] {
                            diffs[n] = (lum[q] - lum[q + w]).abs();
                            n += 1;
                        }
                    }
                }
                if n > 0 {
                    let sigma = median_of(&mut diffs[..n]) / 0.954;
                    *v = sigma * sigma;
                }
            }
        });
        out
    }

    /// The light with its fireflies scaled down, and what that took off given to their
    /// neighbours as far as it fits: see [`DenoiseOptions::firefly_ratio`].
    fn clamp_fireflies(&self, light: &[[f32; 3]], ratio: f32) -> Vec<[f32; 3]> {
        let (w, h) = (self.w, self.h);
        // 1. Which pixels are fireflies, and by how much they are scaled.
        let mut fireflies = vec![None::<Firefly>; w * h];
        fireflies
            .par_chunks_mut(w)
            .enumerate()
            .for_each(|(y, row)| {
                for (x, f) in row.iter_mut().enumerate() {
                    let p = y * w + x;
                    let Some(np) = self.normal[p] else { continue };
                    let (mut brightest, mut neighbours) = (0f32, 0u32);
                    for q in self.neighbours_3x3(x, y) {
                        if q != p && self.geometry_weight(np, p, q) > 0.5 {
                            brightest = brightest.max(luminance(Vec3::from(light[q])));
                            neighbours += 1;
                        }
                    }
                    let l = luminance(Vec3::from(light[p]));
                    // Three neighbours at least: a pixel of a thin line or a corner is no firefly.
                    if neighbours >= 3 && l > ratio * brightest {
                        *f = Some(Firefly {
                            scale: ratio * brightest / l,
                            neighbours,
                        });
                    }
                }
            });
        // 2. Each pixel scaled by its own factor, plus its shares of its neighbouring
        // fireflies' light: an equal share of what was taken off each, among the neighbours
        // that made it a firefly, but no more than brings the pixel, channel by channel, to
        // the firefly's value once scaled (so that no output leaves the inputs' range).
        // Spreading it all would keep the light whole but ring a bright firefly on a smooth
        // surface with pixels nearly as bright, which the filter then keeps as edges.
        let mut out = light.to_vec();
        out.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
            for (x, c) in row.iter_mut().enumerate() {
                let p = y * w + x;
                if let Some(f) = fireflies[p] {
                    *c = c.map(|v| v * f.scale);
                }
                let Some(_) = self.normal[p] else { continue };
                for q in self.neighbours_3x3(x, y) {
                    let (Some(f), Some(nq)) = (fireflies[q], self.normal[q]) else {
                        continue;
                    };
                    if q == p || self.geometry_weight(nq, q, p) <= 0.5 {
                        continue;
                    }
                    // In each channel, up to the firefly's own value once scaled.
                    let mut share = (1.0 - f.scale) / f.neighbours as f32;
                    for (own, from) in light[p].iter().zip(light[q]) {
                        if from * share > 0.0 {
                            share = share.min((from * f.scale - own).max(0.0) / from);
                        }
                    }
                    for (v, from) in c.iter_mut().zip(light[q]) {
                        *v += from * share;
                    }
                }
            }
        });
        out
    }

    /// The pixels of the 3x3 block around `(x, y)` inside the image, `(x, y)` included.
    fn neighbours_3x3(&self, x: usize, y: usize) -> impl Iterator<Item = usize> + '_ {
        let xs = x.saturating_sub(1)..(x + 2).min(self.w);
        (y.saturating_sub(1)..(y + 2).min(self.h))
            .flat_map(move |qy| xs.clone().map(move |qx| qy * self.w + qx))
    }

    /// The 3x3 binomial average of `value` around `p`, each neighbour `q` weighted further by
    /// `weight(q)` (0 leaves it out), over the neighbours inside the image.
    fn binomial_3x3(
        &self,
        p: usize,
        weight: impl Fn(usize) -> f32,
        value: impl Fn(usize) -> f32,
    ) -> f32 {
        let (x, y) = (p % self.w, p / self.w);
        let k = [0.25f32, 0.5, 0.25];
        let (mut s, mut sw) = (0f32, 0f32);
        for (dy, ky) in k.iter().enumerate() {
            let Some(qy) = (y + dy).checked_sub(1).filter(|&v| v < self.h) else {
                continue;
            };
            for (dx, kx) in k.iter().enumerate() {
                let Some(qx) = (x + dx).checked_sub(1).filter(|&v| v < self.w) else {
                    continue;
                };
                let q = qy * self.w + qx;
                let g = weight(q);
                if g > 0.0 {
                    s += ky * kx * g * value(q);
                    sw += ky * kx * g;
                }
            }
        }
        s / sw
    }

    /// The variance blurred by a 3x3 binomial kernel over the pixels that see a surface: the
    /// luminance weight's scale, steadier than one pixel's estimate.
    fn blurred_variance(&self, variance: &[f32], p: usize) -> f32 {
        let sees_surface = |q: usize| if self.normal[q].is_some() { 1.0 } else { 0.0 };
        self.binomial_3x3(p, sees_surface, |q| variance[q])
    }

    /// The luminance of the light blurred by a 3x3 binomial kernel over the same surface
    /// (each neighbour weighted further by [`Guide::geometry_weight`]), for the first pass's
    /// luminance weight.
    fn prefiltered_luminance(&self, light: &[[f32; 3]]) -> Vec<f32> {
        let lum: Vec<f32> = light.iter().map(|&c| luminance(Vec3::from(c))).collect();
        let mut out = lum.clone();
        out.par_iter_mut().enumerate().for_each(|(p, v)| {
            let Some(np) = self.normal[p] else { return };
            let same_surface = |q: usize| {
                if q == p {
                    1.0
                } else {
                    self.geometry_weight(np, p, q)
                }
            };
            *v = self.binomial_3x3(p, same_surface, |q| lum[q]);
        });
        out
    }

    /// One à-trous pass with taps `step` pixels apart: the filtered light and its variance.
    fn atrous_pass(
        &self,
        light: &[[f32; 3]],
        variance: &[f32],
        step: usize,
    ) -> (Vec<[f32; 3]>, Vec<f32>) {
        let (w, h) = (self.w, self.h);
        let mut out_light = light.to_vec();
        let mut out_var = variance.to_vec();
        // The first pass's input is the noisy light itself: its edge-stopping luminance is
        // prefiltered (see the module comment); the later passes' inputs are smooth already.
        let lum: Vec<f32> = if step == 1 {
            self.prefiltered_luminance(light)
        } else {
            light.iter().map(|&c| luminance(Vec3::from(c))).collect()
        };
        out_light
            .par_chunks_mut(w)
            .zip(out_var.par_chunks_mut(w))
            .enumerate()
            .for_each(|(y, (light_row, var_row))| {
                for x in 0..w {
                    let p = y * w + x;
                    let Some(np) = self.normal[p] else { continue };
                    let lp = lum[p];
                    let sigma = self.options.sigma_luminance
                        * self.blurred_variance(variance, p).sqrt()
                        + 1e-10;
                    let (mut sum, mut sw, mut sv) = ([0f32; 3], 0f32, 0f32);
                    for (ky, &hy) in KERNEL.iter().enumerate() {
                        let qy = y as isize + (ky as isize - 2) * step as isize;
                        if qy < 0 || qy >= h as isize {
                            continue;
                        }
                        for (kx, &hx) in KERNEL.iter().enumerate() {
                            let qx = x as isize + (kx as isize - 2) * step as isize;
                            if qx < 0 || qx >= w as isize {
                                continue;
                            }
                            let q = qy as usize * w + qx as usize;
                            let wq = if q == p {
                                hx * hy
                            } else {
                                let Some((normals, albedo)) = self.surface_terms(np, p, q) else {
                                    continue;
                                };
                                let dl = (lp - lum[q]).abs();
                                hx * hy * normals * (-(albedo + dl / sigma)).exp()
                            };
                            let c = light[q];
                            sum = [sum[0] + wq * c[0], sum[1] + wq * c[1], sum[2] + wq * c[2]];
                            sw += wq;
                            sv += wq * wq * variance[q];
                        }
                    }
                    light_row[x] = sum.map(|s| s / sw);
                    var_row[x] = sv / (sw * sw);
                }
            });
        (out_light, out_var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::stats::rms_difference;

    /// A deterministic generator for the tests' noise (SplitMix64), uniform in [0, 1).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    const W: u32 = 64;
    const H: u32 = 48;

    /// A checkerboard albedo (8-pixel squares of two colours).
    fn checker_albedo() -> Vec<[f32; 3]> {
        (0..W * H)
            .map(|i| {
                let (x, y) = (i % W, i / W);
                if (x / 8 + y / 8) % 2 == 0 {
                    [0.8, 0.3, 0.2]
                } else {
                    [0.2, 0.5, 0.7]
                }
            })
            .collect()
    }

    #[test]
    fn the_key_names_the_firefly_rule() {
        let shared = DenoiseOptions::default().key_item();
        assert!(
            shared.ends_with("prefiltered fireflies 2.0 shared"),
            "{shared}"
        );
        let kept = DenoiseOptions {
            firefly_ratio: None,
            ..DenoiseOptions::default()
        };
        assert!(kept.key_item().ends_with("prefiltered fireflies kept"));
    }

    #[test]
    fn a_noise_free_image_of_textured_surfaces_and_sharp_edges_comes_back_unchanged() {
        // Left half faces +Z, right half +X (a 90-degree edge); the light differs per half
        // and the albedo is a checkerboard: the texture is demodulated away, each half's
        // light is constant, and nothing crosses the edge.
        let albedo = checker_albedo();
        let normal: Vec<[f32; 3]> = (0..W * H)
            .map(|i| {
                if i % W < W / 2 {
                    [0.0, 0.0, 1.0]
                } else {
                    [1.0, 0.0, 0.0]
                }
            })
            .collect();
        let color: Vec<[f32; 3]> = (0..(W * H) as usize)
            .map(|i| {
                let e = if (i as u32) % W < W / 2 { 2.0 } else { 0.25 };
                albedo[i].map(|a| a * e)
            })
            .collect();
        let out = denoise(&color, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        for (i, (o, c)) in out.iter().zip(&color).enumerate() {
            for k in 0..3 {
                assert!(
                    (o[k] - c[k]).abs() <= 1e-5 * c[k],
                    "pixel {i} channel {k}: {} became {}",
                    c[k],
                    o[k]
                );
            }
        }
    }

    #[test]
    fn noise_over_a_texture_falls_to_a_fraction_and_the_texture_stays() {
        // Constant light 1.5 over the checkerboard, each pixel's colour the mean of 4
        // exponential samples (a path tracer's skewed noise at a few samples per pixel).
        let albedo = checker_albedo();
        let normal = vec![[0.0, 1.0, 0.0]; (W * H) as usize];
        let truth: Vec<[f32; 3]> = albedo.iter().map(|a| a.map(|c| c * 1.5)).collect();
        let mut rng = Rng(7);
        let noisy: Vec<[f32; 3]> = truth
            .iter()
            .map(|t| {
                let m: f32 = (0..4).map(|_| -(1.0 - rng.next()).ln()).sum::<f32>() / 4.0;
                t.map(|c| c * m)
            })
            .collect();
        let out = denoise(&noisy, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        let (before, after) = (rms_difference(&noisy, &truth), rms_difference(&out, &truth));
        // The noise's RMS is 0.5 of the signal's; 5 passes average hundreds of pixels. A
        // filter that blurred the texture would leave errors of the squares' contrast (about
        // 0.3 to 0.9 at their edges), far above this bound.
        assert!(
            after < 0.2 * before,
            "RMS error {after:.4} after, {before:.4} before"
        );
        // Nearly unbiased: the luminance weight trusts a neighbour less the further it lies
        // from the pixel, which with right-skewed noise leans towards the mode (below the
        // mean). Here the image's mean falls 1.5% (0.5820 from the noisy 0.5908; with no
        // luminance weight 0.5909). With the first pass's weight on the raw luminances, not
        // the prefiltered ones, and SVGF's 4 standard deviations, it fell 2.6% (0.5755), below
        // this bound.
        let mean = |v: &[[f32; 3]]| v.iter().map(|p| f64::from(p[1])).sum::<f64>() / v.len() as f64;
        let (mn, mo) = (mean(&noisy), mean(&out));
        assert!(
            mo < mn && mo > 0.98 * mn,
            "mean {mo} against the noisy image's {mn}"
        );
    }

    #[test]
    fn pixels_that_see_no_surface_are_copied_and_do_not_leak_into_their_neighbours() {
        let albedo = vec![[0.5; 3]; (W * H) as usize];
        // The top half sees the environment (zero normal, bright); the bottom a floor.
        let normal: Vec<[f32; 3]> = (0..W * H)
            .map(|i| {
                if i / W < H / 2 {
                    [0.0; 3]
                } else {
                    [0.0, 1.0, 0.0]
                }
            })
            .collect();
        let mut rng = Rng(3);
        let color: Vec<[f32; 3]> = (0..W * H)
            .map(|i| {
                if i / W < H / 2 {
                    [50.0 * rng.next(), 10.0, 3.0]
                } else {
                    [0.5, 0.5, 0.5]
                }
            })
            .collect();
        let out = denoise(&color, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        for i in 0..(W * H) as usize {
            if i as u32 / W < H / 2 {
                assert_eq!(out[i], color[i], "background pixel {i}");
            } else {
                for k in 0..3 {
                    assert!(
                        (out[i][k] - 0.5).abs() < 1e-6,
                        "floor pixel {i}: {:?}",
                        out[i]
                    );
                }
            }
        }
    }

    #[test]
    fn a_shadow_edge_the_noise_cannot_explain_is_kept() {
        // One plane, one albedo; light 1 on the left, 0.05 on the right, with small noise.
        let albedo = vec![[0.7; 3]; (W * H) as usize];
        let normal = vec![[0.0, 1.0, 0.0]; (W * H) as usize];
        let mut rng = Rng(11);
        let truth: Vec<[f32; 3]> = (0..W * H)
            .map(|i| [if i % W < W / 2 { 0.7 } else { 0.035 }; 3])
            .collect();
        let noisy: Vec<[f32; 3]> = truth
            .iter()
            .map(|t| t.map(|c| c * (0.9 + 0.2 * rng.next())))
            .collect();
        let out = denoise(&noisy, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        // The pixels beside the edge keep their side's level: a filter that crossed it would
        // put them near the middle, 0.37.
        for y in 0..H {
            for x in [W / 2 - 1, W / 2] {
                let i = (y * W + x) as usize;
                let (o, t) = (out[i][0], truth[i][0]);
                assert!((o - t).abs() < 0.1 * t, "pixel ({x}, {y}): {o}, truth {t}");
            }
        }
        assert!(rms_difference(&out, &truth) < rms_difference(&noisy, &truth));
    }

    #[test]
    fn every_output_lies_within_the_range_of_the_inputs() {
        let mut rng = Rng(5);
        let n = (W * H) as usize;
        let albedo: Vec<[f32; 3]> = (0..n)
            .map(|_| [rng.next(), rng.next(), rng.next()])
            .collect();
        let normal: Vec<[f32; 3]> = (0..n)
            .map(|_| [rng.next() - 0.5, rng.next(), rng.next() - 0.5])
            .collect();
        let color: Vec<[f32; 3]> = (0..n)
            .map(|_| [10.0 * rng.next(), rng.next(), 0.0])
            .collect();
        let out = denoise(&color, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        // The light (colour over albedo) of each output is a convex combination of inputs'.
        let light = |c: [f32; 3], a: [f32; 3]| {
            [0, 1, 2].map(|k| {
                if a[k] > ALBEDO_FLOOR {
                    c[k] / a[k]
                } else {
                    c[k]
                }
            })
        };
        for k in 0..3 {
            let lights: Vec<f32> = (0..n).map(|i| light(color[i], albedo[i])[k]).collect();
            let lo = lights.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = lights.iter().copied().fold(0f32, f32::max);
            for i in 0..n {
                let l = light(out[i], albedo[i])[k];
                assert!(
                    l >= lo * (1.0 - 1e-5) && l <= hi * (1.0 + 1e-5),
                    "{l} outside [{lo}, {hi}]"
                );
            }
        }
    }

    #[test]
    fn a_lone_firefly_is_scaled_down_and_a_thin_bright_line_is_kept() {
        let n = (W * H) as usize;
        let albedo = vec![[0.5; 3]; n];
        let normal = vec![[0.0, 0.0, 1.0]; n];
        let mut color = vec![[0.1f32; 3]; n];
        // A firefly at (10, 10), 500 times its surroundings; a line along row 30, 20 times.
        color[(10 * W + 10) as usize] = [50.0; 3];
        for x in 0..W {
            color[(30 * W + x) as usize] = [2.0; 3];
        }
        let out = denoise(&color, &albedo, &normal, W, H, &DenoiseOptions::default()).unwrap();
        // Scaled to twice its brightest neighbour (0.2), then filtered with its surroundings.
        let f = out[(10 * W + 10) as usize][0];
        assert!((0.1..=0.2).contains(&f), "firefly became {f}");
        // The line's pixels each have two line neighbours as bright: no firefly, and the
        // luminance weight keeps the line apart from the dim rows beside it.
        for x in 0..W {
            let l = out[(30 * W + x) as usize][0];
            assert!((l - 2.0).abs() < 1e-3, "line pixel {x} became {l}");
        }
        // Kept when asked.
        let keep = DenoiseOptions {
            firefly_ratio: None,
            ..DenoiseOptions::default()
        };
        let out = denoise(&color, &albedo, &normal, W, H, &keep).unwrap();
        assert!(out[(10 * W + 10) as usize][0] > 40.0);
    }

    #[test]
    fn a_fireflys_light_goes_to_its_neighbours_as_far_as_they_reach_its_scaled_value() {
        let (w, h) = (8usize, 8usize);
        let normal = vec![Some([0.0, 0.0, 1.0]); w * h];
        let albedo = vec![[0.5; 3]; w * h];
        let options = DenoiseOptions::default();
        let guide = Guide {
            w,
            h,
            normal: &normal,
            albedo: &albedo,
            options: &options,
        };
        let sum = |light: &[[f32; 3]]| -> f64 { light.iter().map(|c| c[1] as f64).sum() };
        // A mild firefly, 5 times its surroundings: scaled to twice them, and the 0.6 taken
        // off fits in its 8 neighbours (0.075 each, up to 0.4): no light is lost.
        let mut light = vec![[0.2f32; 3]; w * h];
        light[3 * w + 3] = [1.0; 3];
        let out = guide.clamp_fireflies(&light, 2.0);
        assert_eq!(out[3 * w + 3], [0.4; 3]);
        assert!(
            (out[2 * w + 2][1] - 0.275).abs() < 1e-6,
            "{:?}",
            out[2 * w + 2]
        );
        assert_eq!(out[5 * w + 5], [0.2; 3], "two pixels away: nothing");
        assert!((sum(&out) - sum(&light)).abs() < 1e-5);
        // A bright one, 500 times: each neighbour reaches the scaled value, the rest is lost.
        light[3 * w + 3] = [100.0; 3];
        let out = guide.clamp_fireflies(&light, 2.0);
        for q in [2 * w + 2, 2 * w + 3, 3 * w + 4, 4 * w + 4] {
            assert!((out[q][1] - 0.4).abs() < 1e-6, "{:?}", out[q]);
        }
        assert!((sum(&out) - (sum(&light) - 100.0 + 0.4 + 8.0 * 0.2)).abs() < 1e-4);
        // Another surface beside it takes nothing.
        let mut normal = normal.clone();
        normal[3 * w + 4] = Some([1.0, 0.0, 0.0]);
        let guide = Guide {
            normal: &normal,
            ..guide
        };
        let out = guide.clamp_fireflies(&light, 2.0);
        assert_eq!(out[3 * w + 4], [0.2; 3]);
    }

    #[test]
    fn bad_layers_are_refused_with_the_layer_and_pixel_named() {
        let n = (W * H) as usize;
        let ok = vec![[0.5f32; 3]; n];
        let o = DenoiseOptions::default();
        let e = denoise(&ok, &ok[..n - 1], &ok, W, H, &o).unwrap_err();
        assert!(
            e.to_string()
                .contains("albedo layer has 3071 pixels where the image has 3072"),
            "{e}"
        );
        let mut bad = ok.clone();
        bad[W as usize + 2] = [0.0, f32::NAN, 0.0];
        let e = denoise(&bad, &ok, &ok, W, H, &o).unwrap_err();
        assert!(
            e.to_string()
                .contains("colour layer's pixel (2, 1) is not finite"),
            "{e}"
        );
        bad[W as usize + 2] = [0.0, -1.0, 0.0];
        let e = denoise(&ok, &bad, &ok, W, H, &o).unwrap_err();
        assert!(
            e.to_string()
                .contains("albedo layer's pixel (2, 1) is negative"),
            "{e}"
        );
        // A negative normal is a normal.
        assert!(denoise(&ok, &ok, &bad, W, H, &o).is_ok());
        // Numbers the filter cannot use are refused, not turned into NaN weights.
        for (bad, says) in [
            (
                DenoiseOptions { iterations: 0, ..o },
                "--iterations 0: give 1 to 10 passes",
            ),
            (
                DenoiseOptions {
                    iterations: 11,
                    ..o
                },
                "--iterations 11",
            ),
            (
                DenoiseOptions {
                    sigma_luminance: 0.0,
                    ..o
                },
                "--sigma-luminance 0: give a positive number",
            ),
            (
                DenoiseOptions {
                    sigma_albedo: f32::NAN,
                    ..o
                },
                "--sigma-albedo NaN: give a positive number",
            ),
            (
                DenoiseOptions {
                    firefly_ratio: Some(0.5),
                    ..o
                },
                "--firefly-ratio 0.5: give a ratio of at least 1",
            ),
            (
                DenoiseOptions {
                    normal_power: -1,
                    ..o
                },
                "normals' power -1",
            ),
        ] {
            let e = denoise(&ok, &ok, &ok, W, H, &bad).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
            // (As text: a NaN in the error is unequal to itself.)
            assert_eq!(bad.check().map_err(|e| e.to_string()), Err(e.to_string()));
        }
        let edges = DenoiseOptions {
            firefly_ratio: Some(1.0),
            normal_power: 0,
            ..o
        };
        assert_eq!(edges.check(), Ok(()));
        assert!(denoise(&ok, &ok, &ok, W, H, &edges).is_ok());
    }
}
