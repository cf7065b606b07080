//! An environment map: light arriving from infinitely far away, a different radiance in every
//! direction, read from a latitude-longitude (equirectangular) image of linear radiance, an
//! OpenEXR or Radiance HDR file (`render --env-map`).
//!
//! # Directions
//!
//! The map's top row looks up (+Y), its bottom row down, and its columns go once around the
//! up axis: its centre is towards -Z, where the default camera looks (from +Z), with +X to
//! the right of it, so that the map appears unmirrored behind a scene seen from the front.
//! A unit direction `d` reads the texel at
//! ```text
//! theta = acos(d.y)                                (0 up, pi down)
//! phi   = atan2(d.x, -d.z)                         (0 towards -Z, pi/2 towards +X)
//! u     = frac(1/2 + phi / 2 pi - rotation / 360)  v = theta / pi
//! ```
//! and the radiance there is interpolated bilinearly between the four nearest texel centres
//! (as pbrt-v4, Mitsuba and Cycles filter their maps by default): columns wrap round the
//! seam at `u = 0`, rows clamp at the poles, and a texel's own value is met exactly at its
//! centre. Without the interpolation a map 1024 texels round, seen 1920 pixels wide across 40
//! degrees, would show each texel as a block of some 17 pixels. `--env-rotate DEG` turns the
//! map about the up axis: what the unrotated map shows in a direction is seen `DEG` degrees
//! further round, from -Z towards +X.
//!
//! # Importance sampling
//!
//! Next-event estimation picks a direction with a density proportional to the luminance the
//! map sends from it, up to the interpolation (pbrt's piecewise-constant 2D distribution):
//! the cell `(i, j)` of the `(u, v)` square around texel `(i, j)` is picked with probability
//! `p_ij = w_ij / sum w`, where `w_ij = a_ij sin(theta_j)` is the mean `a_ij` of the
//! interpolated luminance over the cell times the solid angle of its patch up to a constant
//! (`theta_j` at the row's centre), by its row (the marginal) then its column (the
//! conditional); a uniform point of the cell is then mapped to the sphere. The mean over a
//! cell of the bilinear interpolation is exactly a 3x3 filter of the texels' luminance, with
//! weights `1/8, 3/4, 1/8` along each axis (wrapped and clamped as the lookup is), so it is
//! positive wherever the interpolated light is: a direction with light always has a
//! density. The density of a direction is
//! ```text
//! pdf(d) = p_ij W H / (2 pi^2 sin(theta))
//! ```
//! with `(i, j)` the cell `d` falls in. Within a cell the radiance varies (linearly between
//! texel centres) while the density is constant, so `L(d) / pdf(d)` is no longer constant
//! over a cell as it was when each texel was looked up alone, but the MIS weights at a BSDF
//! sample's escape use this same density, and every estimate stays unbiased. A cell whose
//! 3x3 neighbourhood is black is never sampled; no light comes from it.
//!
//! # MIS compensation
//!
//! The path tracer always combines this sampling with BSDF sampling under MIS, and BSDF
//! sampling alone already does well where the map is dim and even. So each cell's mean is
//! lowered by the map's average luminance over the sphere (clamped at zero) before it
//! becomes a weight: light sampling spends its samples on what stands out, the sun, and the
//! dim sky is left to the BSDF samples (Karlik et al., "MIS compensation", SIGGRAPH Asia
//! 2019; pbrt-v4's image infinite light does the same). Light sampling alone then no longer
//! covers the whole map, but the two strategies together do (a cell without density gets
//! MIS weight 1 on the BSDF's side), so the estimate is unbiased. A map with nothing above
//! its average (a uniform one) is sampled whole. On `gen sky`'s sky with a 0.75-degree sun,
//! the variance per sample falls by half or more (`examples/env_map_sampling.rs`).

// Tests are written `!(x > 0.0)` on purpose: a NaN must fail them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use std::f32::consts::PI;
use std::path::Path;
use std::sync::Arc;

use glam::Vec3;
use thiserror::Error;

use crate::fnv::Fnv;
use crate::render::luminance;

/// Why an environment map was refused. Each names the file.
#[derive(Debug, Error)]
pub enum EnvironmentMapError {
    #[error("environment map {path}: {reason}")]
    Unusable { path: String, reason: String },
    #[error("environment map {path}: reading it: {source}")]
    Read {
        path: String,
        source: image::ImageError,
    },
}

/// A latitude-longitude map of radiance, ready for lookups and importance sampling. Built once
/// per render and shared ([`Arc`]) by every thread and every clone of the scene.
#[derive(Clone)]
pub struct EnvironmentMap {
    /// The file it was read from (or a name, for one made in memory), for messages and keys.
    pub path: String,
    pub width: u32,
    pub height: u32,
    /// Rows top (up, +Y) to bottom, linear radiance.
    texels: Vec<Vec3>,
    /// `--env-rotate`, in degrees, and as a fraction of a turn.
    pub rotation_deg: f32,
    rotation_turns: f32,
    /// [`crate::fnv`] of the size and the texels: the render key and the cluster fingerprint
    /// carry it, so that crops or resume files of renders under other maps never mix.
    pub content: u64,
    /// `row_cdf[j]`: the probability of a row `<= j`; the last entry is 1. Empty when the map
    /// is black (nothing to sample).
    row_cdf: Vec<f32>,
    /// Per row, `col_cdf[j W + i]`: the probability of a column `<= i` given row `j`.
    col_cdf: Vec<f32>,
    /// `p_ij W H`: the density, over the `(u, v)` square, of the texel's cell.
    uv_pdf: Vec<f32>,
}

impl EnvironmentMap {
    /// Reads an OpenEXR (`.exr`) or Radiance HDR (`.hdr`) file. Refused, naming the file:
    /// other formats (an 8-bit image holds display values, not radiance), an empty image, and
    /// a texel that is negative, not finite, or beyond [`super::MAX_RADIANCE`].
    pub fn open(path: &Path, rotation_deg: f32) -> Result<EnvironmentMap, EnvironmentMapError> {
        let name = path.display().to_string();
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if ext != "exr" && ext != "hdr" {
            return Err(EnvironmentMapError::Unusable {
                path: name,
                reason: "expected linear radiance, an OpenEXR (.exr) or Radiance HDR (.hdr) \
                         file (an 8-bit image holds display values, not light)"
                    .into(),
            });
        }
        let image = image::open(path).map_err(|source| EnvironmentMapError::Read {
            path: name.clone(),
            source,
        })?;
        let rgb = image.into_rgb32f();
        let (width, height) = rgb.dimensions();
        let texels = rgb.pixels().map(|p| Vec3::from(p.0)).collect();
        EnvironmentMap::from_texels(&name, width, height, texels, rotation_deg)
    }

    /// A map from texels in memory (rows top to bottom), checked as [`EnvironmentMap::open`]
    /// checks a file's.
    pub fn from_texels(
        path: &str,
        width: u32,
        height: u32,
        texels: Vec<Vec3>,
        rotation_deg: f32,
    ) -> Result<EnvironmentMap, EnvironmentMapError> {
        let unusable = |reason: String| EnvironmentMapError::Unusable {
            path: path.to_string(),
            reason,
        };
        if width == 0 || height == 0 || texels.len() as u64 != u64::from(width) * u64::from(height)
        {
            return Err(unusable(format!(
                "{width}x{height} with {} texels: an environment map needs at least one",
                texels.len()
            )));
        }
        if !rotation_deg.is_finite() {
            return Err(unusable(format!(
                "rotation {rotation_deg} degrees: expected a finite angle"
            )));
        }
        if let Some((k, t)) = texels.iter().enumerate().find(|(_, t)| {
            !t.is_finite() || t.min_element() < 0.0 || t.max_element() > super::MAX_RADIANCE
        }) {
            let (x, y) = (k as u32 % width, k as u32 / width);
            return Err(unusable(format!(
                "texel ({x}, {y}) is ({}, {}, {}): a radiance must be finite, not negative and \
                 at most {:e}",
                t.x,
                t.y,
                t.z,
                super::MAX_RADIANCE
            )));
        }
        let mut h = Fnv::default();
        h.field(&[width.to_le_bytes(), height.to_le_bytes()].concat());
        h.field(bytemuck::cast_slice(&texels));
        let content = h.finish();
        let (row_cdf, col_cdf, uv_pdf) =
            distribution(width as usize, height as usize, &texels, true);
        Ok(EnvironmentMap {
            path: path.to_string(),
            width,
            height,
            texels,
            rotation_deg,
            rotation_turns: rotation_deg / 360.0,
            content,
            row_cdf,
            col_cdf,
            uv_pdf,
        })
    }

    /// The map with every texel multiplied by `scale` (`--env-scale`; the map itself for 1):
    /// the sampling tables and the content hash follow the new texels, so a render's key
    /// tells scaled maps apart. Refused, naming the file and the scale, when the scale is not
    /// positive and finite or a scaled texel passes [`super::MAX_RADIANCE`].
    pub fn scaled(self, scale: f32) -> Result<EnvironmentMap, EnvironmentMapError> {
        if scale == 1.0 {
            return Ok(self);
        }
        if !(scale > 0.0 && scale.is_finite()) {
            return Err(EnvironmentMapError::Unusable {
                path: self.path,
                reason: format!("scale {scale}: expected a positive, finite factor"),
            });
        }
        let texels = self.texels.iter().map(|t| *t * scale).collect();
        EnvironmentMap::from_texels(
            &self.path,
            self.width,
            self.height,
            texels,
            self.rotation_deg,
        )
        .map_err(|e| match e {
            EnvironmentMapError::Unusable { path, reason } => EnvironmentMapError::Unusable {
                path,
                reason: format!("scaled by {scale}: {reason}"),
            },
            other => other,
        })
    }

    /// A map of one radiance everywhere (tests; equal to a uniform `--env` of that radiance).
    pub fn uniform(radiance: Vec3) -> Result<Arc<EnvironmentMap>, EnvironmentMapError> {
        EnvironmentMap::from_texels("uniform", 1, 1, vec![radiance], 0.0).map(Arc::new)
    }

    /// The map sampled in proportion to the cells' whole means, without the MIS compensation
    /// (see the module comment): for comparisons (`examples/env_map_sampling.rs`); renders use
    /// the compensated tables.
    pub fn without_compensation(mut self) -> EnvironmentMap {
        let (row_cdf, col_cdf, uv_pdf) = distribution(
            self.width as usize,
            self.height as usize,
            &self.texels,
            false,
        );
        self.row_cdf = row_cdf;
        self.col_cdf = col_cdf;
        self.uv_pdf = uv_pdf;
        self
    }

    /// The texels, rows top (up) to bottom: what the GPU backend uploads.
    pub fn texels(&self) -> &[Vec3] {
        &self.texels
    }

    /// `rotation_deg / 360`, as [`EnvironmentMap::uv_of`] subtracts it (the GPU reads it).
    pub fn rotation_turns(&self) -> f32 {
        self.rotation_turns
    }

    /// The sampling tables as the GPU backend uploads them: the row CDF (`height` entries),
    /// the per-row column CDFs (`width x height`) and each texel's `(u, v)` density
    /// (`width x height`); all empty for a black map.
    pub fn sampling_tables(&self) -> (&[f32], &[f32], &[f32]) {
        (&self.row_cdf, &self.col_cdf, &self.uv_pdf)
    }

    /// Whether next-event estimation can sample it: false for a black map.
    pub fn is_sampleable(&self) -> bool {
        !self.row_cdf.is_empty()
    }

    /// The index of the cell (and texel) of the `(u, v)` square that `(u, v)` falls in:
    /// what the sampling tables are indexed by.
    fn cell_index(&self, u: f32, v: f32) -> usize {
        let w = self.width as usize;
        let h = self.height as usize;
        let i = ((u * w as f32) as usize).min(w - 1);
        let j = ((v * h as f32) as usize).min(h - 1);
        j * w + i
    }

    /// The radiance at `(u, v)`, interpolated bilinearly between the four nearest texel
    /// centres (texel `(i, j)`'s centre is at `((i + 1/2) / W, (j + 1/2) / H)`): columns wrap
    /// round the seam, rows clamp at the poles. Written `a + (b - a) f`, so that where the
    /// four texels are equal the result is exactly their value. The device code
    /// (`ptx/pathtrace.cu`, `env_bilinear`) computes the same operations in the same order.
    pub fn bilinear(&self, u: f32, v: f32) -> Vec3 {
        let (w, h) = (self.width, self.height);
        let x = u * w as f32 - 0.5;
        let y = v * h as f32 - 0.5;
        let (x0, y0) = (x.floor(), y.floor());
        let (fx, fy) = (x - x0, y - y0);
        // x0 is in [-1, W - 1] for u in [0, 1): -1 is the last column, across the seam.
        let i0 = if x0 < 0.0 {
            w - 1
        } else {
            (x0 as u32).min(w - 1)
        };
        let i1 = if i0 + 1 >= w { 0 } else { i0 + 1 };
        // y0 is in [-1, H - 1] for v in [0, 1]: above the first row's centre and below the
        // last's the rows clamp. (`as u32` takes NaN to 0.)
        let j0 = if y0 < 0.0 { 0 } else { (y0 as u32).min(h - 1) };
        let j1 = if y0 < 0.0 { 0 } else { (j0 + 1).min(h - 1) };
        let t = |i: u32, j: u32| self.texels[(j * w + i) as usize];
        let top = t(i0, j0) + (t(i1, j0) - t(i0, j0)) * fx;
        let bottom = t(i0, j1) + (t(i1, j1) - t(i0, j1)) * fx;
        top + (bottom - top) * fy
    }

    /// `(u, v)` in `[0, 1)` x `[0, 1]` of a unit direction (see the module comment).
    pub fn uv_of(&self, d: Vec3) -> (f32, f32) {
        let theta = d.y.clamp(-1.0, 1.0).acos();
        let phi = d.x.atan2(-d.z);
        let u = 0.5 + phi / (2.0 * PI) - self.rotation_turns;
        let u = u - u.floor();
        // `u - floor(u)` of a tiny negative `u` rounds to 1.
        let u = if u < 1.0 { u } else { 0.0 };
        (u, theta / PI)
    }

    /// The unit direction of `(u, v)`: the inverse of [`EnvironmentMap::uv_of`].
    pub fn direction_of(&self, u: f32, v: f32) -> Vec3 {
        lat_long_direction(u, v, self.rotation_turns)
    }

    /// The radiance arriving from the unit direction `d` (travelling along `-d`).
    pub fn radiance(&self, d: Vec3) -> Vec3 {
        self.lookup(d).0
    }

    /// The solid-angle density with which [`EnvironmentMap::sample`] picks `d` (unit): zero
    /// for a black map, in a cell whose 3x3 neighbourhood of texels is black, and exactly at
    /// the poles.
    pub fn pdf(&self, d: Vec3) -> f32 {
        self.lookup(d).1
    }

    /// [`EnvironmentMap::radiance`] and [`EnvironmentMap::pdf`] of one direction, its `(u, v)`
    /// found once (the path tracer needs both wherever it needs one).
    pub fn lookup(&self, d: Vec3) -> (Vec3, f32) {
        let (u, v) = self.uv_of(d);
        let radiance = self.bilinear(u, v);
        if !self.is_sampleable() {
            return (radiance, 0.0);
        }
        // sin(theta) from x and z, not sqrt(1 - y^2): within about 2e-4 radians of a pole y
        // rounds to +-1 in f32, and directions sampled there would get no density.
        let sin_theta = (d.x * d.x + d.z * d.z).sqrt();
        if !(sin_theta > 0.0) {
            return (radiance, 0.0);
        }
        let k = self.cell_index(u, v);
        (radiance, self.uv_pdf[k] / (2.0 * PI * PI * sin_theta))
    }

    /// A direction drawn with density [`EnvironmentMap::pdf`] from two uniform numbers, or
    /// `None` for a black map.
    pub fn sample(&self, u1: f32, u2: f32) -> Option<Vec3> {
        if !self.is_sampleable() {
            return None;
        }
        let w = self.width as usize;
        let (j, fv) = pick(&self.row_cdf, u1);
        let (i, fu) = pick(&self.col_cdf[j * w..(j + 1) * w], u2);
        let u = (i as f32 + fu) / self.width as f32;
        let v = (j as f32 + fv) / self.height as f32;
        Some(self.direction_of(u, v))
    }
}

/// The unit direction of the point `(u, v)` of a latitude-longitude map turned by
/// `rotation_turns` of a turn (see the module comment).
pub fn lat_long_direction(u: f32, v: f32, rotation_turns: f32) -> Vec3 {
    let phi = 2.0 * PI * (u - 0.5 + rotation_turns);
    let theta = PI * v;
    let (st, ct) = theta.sin_cos();
    let (sp, cp) = phi.sin_cos();
    Vec3::new(st * sp, ct, -st * cp)
}

/// The file, size, rotation and content hash: what identifies the map (not its texels).
impl std::fmt::Debug for EnvironmentMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvironmentMap")
            .field("path", &self.path)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("rotation_deg", &self.rotation_deg)
            .field("content", &format_args!("{:016x}", self.content))
            .finish()
    }
}

/// The entry of a CDF whose interval holds `u` (the first with `u < cdf[k]`), and where in
/// that interval `u` lies, in `[0, 1)`: the continuous offset within the texel.
fn pick(cdf: &[f32], u: f32) -> (usize, f32) {
    let k = cdf.partition_point(|&c| c <= u).min(cdf.len() - 1);
    let lo = if k == 0 { 0.0 } else { cdf[k - 1] };
    let width = cdf[k] - lo;
    let f = if width > 0.0 { (u - lo) / width } else { 0.5 };
    (k, f.clamp(0.0, 1.0 - f32::EPSILON / 2.0))
}

/// The mean of the bilinearly interpolated luminance over each texel's cell (see the module
/// comment), in f64: the 3x3 filter `1/8, 3/4, 1/8` along each axis, columns wrapped and
/// rows clamped as [`EnvironmentMap::bilinear`] does.
fn cell_means(w: usize, h: usize, texels: &[Vec3]) -> Vec<f64> {
    const TAPS: [(isize, f64); 3] = [(-1, 0.125), (0, 0.75), (1, 0.125)];
    let lum: Vec<f64> = texels
        .iter()
        .map(|t| f64::from(luminance(*t)).max(0.0))
        .collect();
    // Along the rows first (wrapped), then down the columns (clamped).
    let mut across = vec![0.0f64; w * h];
    for j in 0..h {
        for i in 0..w {
            across[j * w + i] = TAPS
                .iter()
                .map(|&(d, k)| k * lum[j * w + (i as isize + d).rem_euclid(w as isize) as usize])
                .sum();
        }
    }
    let mut means = vec![0.0f64; w * h];
    for j in 0..h {
        for i in 0..w {
            means[j * w + i] = TAPS
                .iter()
                .map(|&(d, k)| {
                    k * across[(j as isize + d).clamp(0, h as isize - 1) as usize * w + i]
                })
                .sum();
        }
    }
    means
}

/// Each cell's sampling weight, `a_ij sin(theta_j)`: `a_ij` the cell's mean luminance
/// ([`cell_means`]), less the map's average luminance over the sphere when `compensate`
/// (clamped at zero; the whole means where nothing is above the average, a uniform map).
fn sampling_weights(w: usize, h: usize, texels: &[Vec3], compensate: bool) -> Vec<f64> {
    let sin_row = |k: usize| (PI as f64 * ((k / w) as f64 + 0.5) / h as f64).sin();
    let mut means = cell_means(w, h, texels);
    if compensate {
        let solid_angle: f64 = (0..w * h).map(sin_row).sum();
        let average = means
            .iter()
            .enumerate()
            .map(|(k, m)| m * sin_row(k))
            .sum::<f64>()
            / solid_angle;
        let above: Vec<f64> = means.iter().map(|m| (m - average).max(0.0)).collect();
        if above.iter().any(|&a| a > 0.0) {
            means = above;
        }
    }
    means
        .into_iter()
        .enumerate()
        .map(|(k, mean)| mean * sin_row(k))
        .collect()
}

/// The marginal (rows) and conditional (columns) CDFs and the `(u, v)` densities of the
/// cells, from [`sampling_weights`] summed in f64. Empty row CDF for a black map.
fn distribution(
    w: usize,
    h: usize,
    texels: &[Vec3],
    compensate: bool,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let weights = sampling_weights(w, h, texels, compensate);
    let total: f64 = weights.iter().sum();
    if !(total > 0.0) {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let mut row_cdf = Vec::with_capacity(h);
    let mut col_cdf = Vec::with_capacity(w * h);
    let mut acc_rows = 0.0f64;
    for row in weights.chunks(w) {
        let row_total: f64 = row.iter().sum();
        acc_rows += row_total;
        row_cdf.push((acc_rows / total) as f32);
        let mut acc = 0.0f64;
        for (i, x) in row.iter().enumerate() {
            acc += x;
            col_cdf.push(if row_total > 0.0 {
                (acc / row_total) as f32
            } else {
                (i + 1) as f32 / w as f32
            });
        }
        if let Some(last) = col_cdf.last_mut() {
            *last = 1.0;
        }
    }
    if let Some(last) = row_cdf.last_mut() {
        *last = 1.0;
    }
    // The density of a texel as the f32 CDFs give it, so that `pdf` agrees with what
    // `sample` does after rounding.
    let uv_pdf = (0..w * h)
        .map(|k| {
            let (i, j) = (k % w, k / w);
            let p_row = row_cdf[j] - if j == 0 { 0.0 } else { row_cdf[j - 1] };
            let c = &col_cdf[j * w..(j + 1) * w];
            let p_col = c[i] - if i == 0 { 0.0 } else { c[i - 1] };
            p_row * p_col * (w * h) as f32
        })
        .collect();
    (row_cdf, col_cdf, uv_pdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator of uniform numbers in [0, 1).
    fn uniform_stream(seed: u64) -> impl FnMut() -> f32 {
        let mut s = seed;
        move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    /// An 8x4 map: a dim sky, a bright texel (a "sun"), black ground rows and one black texel.
    fn sun_map(rotation: f32) -> EnvironmentMap {
        let (w, h) = (8u32, 4u32);
        let mut texels = vec![Vec3::new(0.2, 0.3, 0.5); (w * h) as usize];
        texels[(w + 5) as usize] = Vec3::new(40.0, 35.0, 30.0);
        texels[2] = Vec3::ZERO;
        for t in &mut texels[(2 * w) as usize..] {
            *t = Vec3::ZERO;
        }
        texels[(3 * w + 1) as usize] = Vec3::new(0.1, 0.1, 0.1);
        EnvironmentMap::from_texels("sun", w, h, texels, rotation).unwrap()
    }

    /// Whether two radiances agree to a few ulps (directions go through trigonometry).
    fn close(a: Vec3, b: Vec3) -> bool {
        (a - b).abs().max_element() <= 1e-5 * b.abs().max_element().max(1.0)
    }

    #[test]
    fn the_axes_read_the_texels_the_convention_names() {
        let (w, h) = (4u32, 2u32);
        let texels: Vec<Vec3> = (0..w * h).map(|k| Vec3::splat(k as f32)).collect();
        let m = EnvironmentMap::from_texels("axes", w, h, texels.clone(), 0.0).unwrap();
        // Row 0's centre is 45 degrees above the horizon. The centre (u = 1/2) is towards -Z:
        // column 2's centre is half way from -Z to +X, column 3's from +X to +Z, column 0's
        // from +Z to -X, column 1's from -X to -Z.
        let at = |x: f32, z: f32| Vec3::new(x, 0.5f32.sqrt(), z).normalize();
        let s = 0.5;
        assert!(close(m.radiance(at(s, -s)), Vec3::splat(2.0)));
        assert!(close(m.radiance(at(s, s)), Vec3::splat(3.0)));
        assert!(close(m.radiance(at(-s, s)), Vec3::splat(0.0)));
        assert!(close(m.radiance(at(-s, -s)), Vec3::splat(1.0)));
        // Straight down reads the bottom row, interpolated along it (every column meets at
        // the pole, so which point of the row is arbitrary).
        let down = m.radiance(-Vec3::Y).x;
        assert!((4.0..=7.0).contains(&down), "{down}");
        assert_eq!(m.uv_of(-Vec3::Z), (0.5, 0.5));
        // A quarter turn: what was between -Z and +X is between +X and +Z.
        let turned = EnvironmentMap::from_texels("axes", w, h, texels, 90.0).unwrap();
        assert!(close(turned.radiance(at(s, s)), Vec3::splat(2.0)));
        assert!(close(turned.radiance(at(-s, -s)), Vec3::splat(0.0)));
    }

    /// Bilinear interpolation: each texel's value at its centre, the mean of two neighbours
    /// half way between their centres, across the seam at `u = 0` too, rows clamped at the
    /// poles, and exact constants where the texels are equal.
    #[test]
    fn the_radiance_is_interpolated_between_texel_centres() {
        let (w, h) = (4u32, 3u32);
        let texels: Vec<Vec3> = (0..w * h)
            .map(|k| Vec3::new(k as f32, 10.0 * (k % w) as f32, 1.0))
            .collect();
        let m = EnvironmentMap::from_texels("ramp", w, h, texels.clone(), 0.0).unwrap();
        let centre = |i: u32, j: u32| ((i as f32 + 0.5) / w as f32, (j as f32 + 0.5) / h as f32);
        for j in 0..h {
            for i in 0..w {
                let (u, v) = centre(i, j);
                assert_eq!(m.bilinear(u, v), texels[(j * w + i) as usize], "({i}, {j})");
            }
        }
        // Half way between columns 1 and 2 of row 1; between rows 0 and 1 of column 3.
        assert_eq!(m.bilinear(0.5, 0.5), (texels[5] + texels[6]) * 0.5);
        assert_eq!(m.bilinear(0.875, 1.0 / 3.0), (texels[3] + texels[7]) * 0.5);
        // The seam: u = 0 is half way between the last column and the first.
        assert_eq!(m.bilinear(0.0, 0.5), (texels[7] + texels[4]) * 0.5);
        assert_eq!(
            m.bilinear(0.999_999, 0.5),
            m.bilinear(0.0, 0.5) + (texels[4] - texels[7]) * (0.999_999 * 4.0 - 3.5 - 0.5)
        );
        // The poles: above the first row's centre and below the last's, the row alone.
        assert_eq!(m.bilinear(0.625, 0.0), texels[2]);
        assert_eq!(m.bilinear(0.625, 0.1), texels[2]);
        assert_eq!(m.bilinear(0.625, 1.0), texels[10]);
        // A constant stays exactly constant between centres.
        let flat =
            EnvironmentMap::from_texels("flat", 3, 2, vec![Vec3::splat(0.3); 6], 0.0).unwrap();
        let mut next = uniform_stream(2);
        for _ in 0..1000 {
            assert_eq!(flat.bilinear(next(), next()), Vec3::splat(0.3));
        }
    }

    /// The mean of the interpolated luminance over each cell, by quadrature (64 x 64 points
    /// a cell): what the 3x3 filter of the sampling weights claims to be.
    #[test]
    fn the_sampling_weights_are_the_cells_mean_interpolated_luminance() {
        let m = sun_map(0.0);
        let (w, h) = (m.width as usize, m.height as usize);
        let means = cell_means(w, h, &m.texels);
        let n = 64;
        for j in 0..h {
            for i in 0..w {
                let mut sum = 0.0f64;
                for b in 0..n {
                    for a in 0..n {
                        let u = (i as f32 + (a as f32 + 0.5) / n as f32) / w as f32;
                        let v = (j as f32 + (b as f32 + 0.5) / n as f32) / h as f32;
                        sum += f64::from(luminance(m.bilinear(u, v)));
                    }
                }
                let quad = sum / (n * n) as f64;
                let got = means[j * w + i];
                assert!(
                    (got - quad).abs() <= 1e-5 * quad.max(1.0),
                    "({i}, {j}): {got} vs {quad}"
                );
            }
        }
    }

    #[test]
    fn direction_of_inverts_uv_of() {
        for rotation in [0.0, 37.0, -200.0] {
            let m = sun_map(rotation);
            let mut next = uniform_stream(3);
            for _ in 0..10_000 {
                let (u, v) = (next(), 0.001 + 0.998 * next());
                let d = m.direction_of(u, v);
                assert!((d.length() - 1.0).abs() < 1e-5);
                let (u2, v2) = m.uv_of(d);
                let du = (u2 - u).abs().min(1.0 - (u2 - u).abs());
                assert!(du < 1e-4 && (v2 - v).abs() < 1e-4, "{u},{v} -> {u2},{v2}");
            }
        }
    }

    /// Samples land in each cell with its probability `p_ij` (within 5 standard errors), and
    /// never in one whose neighbourhood is black.
    #[test]
    fn samples_fall_in_each_cell_in_proportion_to_its_weight() {
        for compensated in [true, false] {
            let mut m = sun_map(25.0);
            if !compensated {
                m = m.without_compensation();
            }
            let n = 400_000usize;
            let mut counts = vec![0usize; m.texels.len()];
            let mut next = uniform_stream(11);
            for _ in 0..n {
                let d = m.sample(next(), next()).unwrap();
                let (u, v) = m.uv_of(d);
                counts[m.cell_index(u, v)] += 1;
            }
            let (w, h) = (m.width as usize, m.height as usize);
            let weights = sampling_weights(w, h, &m.texels, compensated);
            let total: f64 = weights.iter().sum();
            for (k, &c) in counts.iter().enumerate() {
                let p = weights[k] / total;
                if p == 0.0 {
                    assert_eq!(c, 0, "cell {k} has no weight and was sampled");
                    continue;
                }
                let se = (p * (1.0 - p) / n as f64).sqrt();
                let got = c as f64 / n as f64;
                assert!(
                    (got - p).abs() < 5.0 * se,
                    "cell {k} (compensated: {compensated}): {got} vs {p} (se {se})"
                );
            }
        }
    }

    /// MIS compensation: the cells whose mean is at or below the map's average luminance are
    /// not sampled, the others in proportion to what they have above it; a uniform map, with
    /// nothing above its average, is sampled whole.
    #[test]
    fn compensation_samples_only_what_is_above_the_average() {
        let m = sun_map(0.0);
        let (w, h) = (m.width as usize, m.height as usize);
        let means = cell_means(w, h, &m.texels);
        let sin_row = |k: usize| (PI as f64 * ((k / w) as f64 + 0.5) / h as f64).sin();
        let average = (0..w * h).map(|k| means[k] * sin_row(k)).sum::<f64>()
            / (0..w * h).map(sin_row).sum::<f64>();
        let weights = sampling_weights(w, h, &m.texels, true);
        let mut sampled = 0;
        for k in 0..w * h {
            let expected = (means[k] - average).max(0.0) * sin_row(k);
            assert!((weights[k] - expected).abs() <= 1e-12, "cell {k}");
            sampled += usize::from(weights[k] > 0.0);
        }
        // The sun's cell and its neighbours' only: the dim sky is left to BSDF sampling.
        assert!((1..=9).contains(&sampled), "{sampled} cells sampled");
        let flat = vec![Vec3::splat(0.5); 8];
        assert_eq!(
            sampling_weights(4, 2, &flat, true),
            sampling_weights(4, 2, &flat, false)
        );
        assert!(sampling_weights(4, 2, &flat, true).iter().all(|&x| x > 0.0));
    }

    /// With compensation light sampling alone misses the dim sky: it is the sum of it and BSDF
    /// sampling under MIS that integrates the map. Here uniform sphere directions stand in for
    /// the BSDF: one sample of each strategy a round, weighted by the balance heuristic, and
    /// the estimate meets the integral by quadrature.
    #[test]
    fn compensated_sampling_under_mis_integrates_the_map() {
        let m = sun_map(0.0);
        let exact = integral_by_quadrature(&m);
        let uniform_pdf = 1.0 / (4.0 * std::f64::consts::PI);
        let n = 200_000;
        let mut next = uniform_stream(17);
        let (mut sum, mut sum2) = (0.0f64, 0.0f64);
        for _ in 0..n {
            let d = m.sample(next(), next()).unwrap();
            let p = f64::from(m.pdf(d));
            let from_light = f64::from(luminance(m.radiance(d))) / (p + uniform_pdf);
            let z = 1.0 - 2.0 * next();
            let r = (1.0 - z * z).max(0.0).sqrt();
            let phi = 2.0 * PI * next();
            let d = Vec3::new(r * phi.cos(), z, r * phi.sin());
            let p = f64::from(m.pdf(d));
            let from_uniform = f64::from(luminance(m.radiance(d))) / (p + uniform_pdf);
            let x = from_light + from_uniform;
            sum += x;
            sum2 += x * x;
        }
        let mean = sum / n as f64;
        let se = ((sum2 / n as f64 - mean * mean).max(0.0) / n as f64).sqrt();
        assert!(
            (mean - exact).abs() < 5.0 * se + 1e-6 * exact,
            "{mean} vs {exact} (se {se})"
        );
        assert!(se < 0.01 * exact, "se {se} of {exact}");
        // Light sampling alone now falls short of the map: the dim sky is missing.
        let m_light: f64 = (0..n)
            .map(|_| {
                let d = m.sample(next(), next()).unwrap();
                f64::from(luminance(m.radiance(d))) / f64::from(m.pdf(d))
            })
            .sum::<f64>()
            / n as f64;
        assert!(m_light < 0.99 * exact, "{m_light} vs {exact}");
    }

    /// The integral of the map's luminance over the sphere, by the midpoint rule on 32 x 32
    /// points a cell (the interpolation is linear between them, the `sin(theta)` of the solid
    /// angle smooth).
    fn integral_by_quadrature(m: &EnvironmentMap) -> f64 {
        let (w, h) = (m.width as usize, m.height as usize);
        let n_quad = 32 * w.max(h);
        let mut exact = 0.0f64;
        for b in 0..n_quad {
            let v = (b as f64 + 0.5) / n_quad as f64;
            let mut row = 0.0f64;
            for a in 0..n_quad {
                let u = (a as f64 + 0.5) / n_quad as f64;
                row += f64::from(luminance(m.bilinear(u as f32, v as f32)));
            }
            // d(omega) = 2 pi^2 sin(pi v) du dv.
            exact += row * (std::f64::consts::PI * v).sin();
        }
        exact * 2.0 * std::f64::consts::PI * std::f64::consts::PI / (n_quad * n_quad) as f64
    }

    /// Without compensation, light sampling alone integrates the map: its estimate agrees
    /// with the quadrature, and the density the sampler reports for its own samples is the
    /// one `pdf` computes.
    #[test]
    fn importance_sampling_integrates_the_map_exactly_in_expectation() {
        let m = sun_map(0.0).without_compensation();
        let exact = integral_by_quadrature(&m);
        let n = 200_000;
        let mut next = uniform_stream(5);
        let (mut sum, mut sum2) = (0.0f64, 0.0f64);
        for _ in 0..n {
            let d = m.sample(next(), next()).unwrap();
            let p = m.pdf(d);
            assert!(p > 0.0, "a sampled direction has density {p}");
            let x = luminance(m.radiance(d)) as f64 / p as f64;
            sum += x;
            sum2 += x * x;
        }
        let mean = sum / n as f64;
        let se = ((sum2 / n as f64 - mean * mean).max(0.0) / n as f64).sqrt();
        assert!(
            (mean - exact).abs() < 5.0 * se + 1e-6 * exact,
            "{mean} vs {exact} (se {se})"
        );
        // The ratio L / pdf varies only by sin(theta) against the row centre's: the standard
        // error is far below what uniform sampling of the sun would give.
        assert!(se < 0.01 * exact, "se {se} of {exact}");
    }

    #[test]
    fn the_density_integrates_to_one_over_the_sphere() {
        let m = sun_map(10.0);
        // Uniform directions: E[pdf / (1 / 4 pi)] = 1.
        let n = 400_000;
        let mut next = uniform_stream(9);
        let mut sum = 0.0f64;
        for _ in 0..n {
            let z = 1.0 - 2.0 * next();
            let r = (1.0 - z * z).max(0.0).sqrt();
            let phi = 2.0 * PI * next();
            let d = Vec3::new(r * phi.cos(), z, r * phi.sin());
            sum += m.pdf(d) as f64 * 4.0 * std::f64::consts::PI;
        }
        let mean = sum / n as f64;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
    }

    #[test]
    fn bad_maps_are_refused_naming_the_file_and_the_texel() {
        let e = EnvironmentMap::from_texels("sky.exr", 2, 1, vec![Vec3::ONE, -Vec3::X], 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sky.exr") && e.contains("texel (1, 0)"), "{e}");
        let e = EnvironmentMap::from_texels("sky.exr", 1, 1, vec![Vec3::NAN], 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("texel (0, 0)"), "{e}");
        let e = EnvironmentMap::from_texels("sky.exr", 0, 0, vec![], 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least one"), "{e}");
        let e = EnvironmentMap::open(Path::new("sky.png"), 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sky.png") && e.contains(".exr"), "{e}");
        let e = EnvironmentMap::open(Path::new("/nonexistent/sky.hdr"), 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/sky.hdr"), "{e}");
        let black = EnvironmentMap::from_texels("black", 2, 2, vec![Vec3::ZERO; 4], 0.0).unwrap();
        assert!(!black.is_sampleable());
        assert_eq!(black.sample(0.5, 0.5), None);
        assert_eq!(black.pdf(Vec3::Y), 0.0);
    }

    #[test]
    fn a_scaled_map_scales_its_texels_and_keeps_its_distribution() {
        let m = sun_map(20.0);
        let content = m.content;
        let same = m.clone().scaled(1.0).unwrap();
        assert_eq!(same.content, content);
        let doubled = m.clone().scaled(2.0).unwrap();
        assert_ne!(doubled.content, content, "the key must tell them apart");
        assert_eq!(doubled.rotation_deg, 20.0);
        for (a, b) in m.texels.iter().zip(&doubled.texels) {
            assert_eq!(*b, *a * 2.0);
        }
        for (a, b) in m.uv_pdf.iter().zip(&doubled.uv_pdf) {
            assert!((a - b).abs() <= 1e-6 * a.abs(), "{a} {b}");
        }
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let e = m.clone().scaled(bad).unwrap_err().to_string();
            assert!(e.contains("sun") && e.contains("scale"), "{e}");
        }
        let e = m.scaled(1e19).unwrap_err().to_string();
        assert!(e.contains("scaled by") && e.contains("texel"), "{e}");
    }

    #[test]
    fn the_content_hash_follows_the_texels_not_the_name() {
        let a = sun_map(0.0);
        let mut texels = a.texels.clone();
        let b =
            EnvironmentMap::from_texels("other", a.width, a.height, texels.clone(), 0.0).unwrap();
        assert_eq!(a.content, b.content);
        texels[7].y += 0.25;
        let c = EnvironmentMap::from_texels("sun", a.width, a.height, texels, 0.0).unwrap();
        assert_ne!(a.content, c.content);
    }
}
