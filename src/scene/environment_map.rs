//! An environment map: light arriving from infinitely far away, a different radiance in every
//! direction, read from a latitude-longitude (equirectangular) image of linear radiance, an
//! OpenEXR or Radiance HDR file (`render --env-map`).
//!
//! # Directions
//!
//! The map's top row looks up (+Y), its bottom row down, and its columns go once around the
//! up axis: its centre is towards -Z, where the default camera looks (from +Z), with +X to
//! the right of it, so that the map appears unmirrored behind a scene seen from the front.
//! A unit direction `d` reads the map at
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
//! Next-event estimation picks a direction with a density proportional to the interpolated
//! luminance, exactly (pbrt's piecewise 2D distribution, with bilinear patches for pieces):
//! - the `(u, v)` square is cut into *patches* between texel centres: `W` columns (the last
//!   across the seam) by `H + 1` rows, the first and last of them half rows between a pole
//!   and the first (last) row's centres. Over a patch the interpolation is one bilinear
//!   function of its four corner texels (at the poles, two texels repeated);
//! - a patch is picked with probability `p = w / sum w`, its weight `w` the mean of its
//!   corners' luminance (the bilinear function's mean) times its height and `sin(theta)` at
//!   its middle (its solid angle up to a constant), by its row (the marginal) then its
//!   column (the conditional);
//! - the point in the patch is drawn from the bilinear function itself (pbrt-v4's
//!   `SampleBilinear`: the row offset by its marginal, a linear density, then the column
//!   offset given it), and mapped to the sphere.
//!
//! The density of a direction `d` in patch `(c, r)` at offsets `(s, t)` is then
//! ```text
//! pdf(d) = k_rc b(s, t) / (2 pi^2 sin(theta)),   k_rc = p_rc W H / (height_r mean_rc)
//! ```
//! with `b` the bilinear function of the corners' luminance: `L(d) / pdf(d)` varies only by
//! the colour against the luminance and by `sin(theta)` against the patch middle's, so a
//! small sun, interpolated over a few texels, is sampled as well as if it were one constant
//! texel. The MIS weights at a BSDF sample's escape use this same density.
//!
//! # MIS compensation
//!
//! The path tracer always combines this sampling with BSDF sampling under MIS, and BSDF
//! sampling alone already does well where the map is dim and even. So the luminance the
//! patches are weighted and sampled by is each texel's less the map's average luminance over
//! the sphere (clamped at zero): light sampling spends its samples on what stands out, the
//! sun, and the dim sky is left to the BSDF samples (Karlik et al., "MIS compensation",
//! SIGGRAPH Asia 2019; pbrt-v4's image infinite light does the same). Light sampling alone
//! then no longer covers the whole map, but the two strategies together do (a direction
//! without light-sampling density gets MIS weight 1 on the BSDF's side), so the estimate is
//! unbiased. A map with nothing above its average (a uniform one) is sampled whole.
//! `examples/env_map_sampling.rs` measures what each step buys.

// Tests are written `!(x > 0.0)` on purpose: a NaN must fail them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use std::f32::consts::PI;
use std::path::Path;
use std::sync::Arc;

use glam::Vec3;
use thiserror::Error;

use crate::colour::luminance;
use crate::fnv::Fnv;

/// Why an environment map was refused. Each names the file.
#[derive(Debug, Error)]
pub enum EnvironmentMapError {
    #[error("environment map {path}: {reason}")]
    Unusable { path: String, reason: String },
    #[error("environment map {path}: reading it: {reason}")]
    Read { path: String, reason: String },
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
    /// The luminance the MIS compensation takes off every texel's (0 without compensation):
    /// the map's average over the sphere.
    average: f32,
    /// `row_cdf[r]`: the probability of a patch row `<= r` (`H + 1` rows, see the module
    /// comment); the last entry is 1. Empty when the map is black (nothing to sample).
    row_cdf: Vec<f32>,
    /// Per patch row, `col_cdf[r W + c]`: the probability of a patch column `<= c` given row `r`.
    col_cdf: Vec<f32>,
    /// Per patch, the factor `k` of its density over the `(u, v)` square, `k` times the
    /// bilinear interpolation of its corners' compensated luminances.
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
        let image =
            super::image_file::decode(path).map_err(|reason| EnvironmentMapError::Read {
                path: name.clone(),
                reason,
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
        let tables = SamplingTables::new(width, height, &texels, true);
        Ok(EnvironmentMap {
            path: path.to_string(),
            width,
            height,
            texels,
            rotation_deg,
            rotation_turns: rotation_deg / 360.0,
            content,
            average: tables.average,
            row_cdf: tables.row_cdf,
            col_cdf: tables.col_cdf,
            uv_pdf: tables.uv_pdf,
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

    /// The map sampled in proportion to its whole luminance, without the MIS compensation
    /// (see the module comment): for comparisons (`examples/env_map_sampling.rs`); renders use
    /// the compensated tables.
    pub fn without_compensation(mut self) -> EnvironmentMap {
        let tables = SamplingTables::new(self.width, self.height, &self.texels, false);
        self.average = tables.average;
        self.row_cdf = tables.row_cdf;
        self.col_cdf = tables.col_cdf;
        self.uv_pdf = tables.uv_pdf;
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

    /// The sampling tables as the GPU backend uploads them: the patch rows' CDF (`height + 1`
    /// entries), the per-row column CDFs (`width x (height + 1)`) and each patch's density
    /// factor (`width x (height + 1)`); all empty for a black map.
    pub fn sampling_tables(&self) -> (&[f32], &[f32], &[f32]) {
        (&self.row_cdf, &self.col_cdf, &self.uv_pdf)
    }

    /// The luminance the MIS compensation takes off each texel's (the launch parameters
    /// carry it): the map's average, or 0 without compensation.
    pub fn compensation(&self) -> f32 {
        self.average
    }

    /// Whether next-event estimation can sample it: false for a black map.
    pub fn is_sampleable(&self) -> bool {
        !self.row_cdf.is_empty()
    }

    /// Where `(u, v)` falls between the texel centres (texel `(i, j)`'s centre is at
    /// `((i + 1/2) / W, (j + 1/2) / H)`): the four texels around it and its offsets from the
    /// first, columns wrapped round the seam and rows clamped at the poles; and its patch.
    /// The device code (`ptx/pathtrace.cu`, `env_footprint`) computes the same.
    fn footprint(&self, u: f32, v: f32) -> Footprint {
        let (w, h) = (self.width, self.height);
        let x = u * w as f32 - 0.5;
        let y = v * h as f32 - 0.5;
        let (x0, y0) = (x.floor(), y.floor());
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
        Footprint {
            i0,
            i1,
            j0,
            j1,
            fx: x - x0,
            fy: y - y0,
            patch: (if y0 < 0.0 { 0 } else { j0 + 1 }) * w + i0,
        }
    }

    /// The radiance at `(u, v)`, interpolated bilinearly between the four nearest texel
    /// centres ([`EnvironmentMap::footprint`]). Written `a + (b - a) f`, so that where the
    /// four texels are equal the result is exactly their value.
    pub fn bilinear(&self, u: f32, v: f32) -> Vec3 {
        self.interpolate(&self.footprint(u, v))
    }

    /// The radiance at a footprint: the texels interpolated by its offsets.
    fn interpolate(&self, f: &Footprint) -> Vec3 {
        let t = |i: u32, j: u32| self.texels[(j * self.width + i) as usize];
        let top = t(f.i0, f.j0) + (t(f.i1, f.j0) - t(f.i0, f.j0)) * f.fx;
        let bottom = t(f.i0, f.j1) + (t(f.i1, f.j1) - t(f.i0, f.j1)) * f.fx;
        top + (bottom - top) * f.fy
    }

    /// A texel's compensated luminance: what the sampling is proportional to, interpolated.
    fn weight(&self, i: u32, j: u32) -> f32 {
        compensated(self.texels[(j * self.width + i) as usize], self.average)
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
    /// for a black map, where the interpolated compensated luminance is zero, and exactly at
    /// the poles.
    pub fn pdf(&self, d: Vec3) -> f32 {
        self.lookup(d).1
    }

    /// [`EnvironmentMap::radiance`] and [`EnvironmentMap::pdf`] of one direction, its `(u, v)`
    /// found once (the path tracer needs both wherever it needs one).
    pub fn lookup(&self, d: Vec3) -> (Vec3, f32) {
        let (u, v) = self.uv_of(d);
        let f = self.footprint(u, v);
        let radiance = self.interpolate(&f);
        if !self.is_sampleable() {
            return (radiance, 0.0);
        }
        // sin(theta) from x and z, not sqrt(1 - y^2): within about 2e-4 radians of a pole y
        // rounds to +-1 in f32, and directions sampled there would get no density.
        let sin_theta = (d.x * d.x + d.z * d.z).sqrt();
        if !(sin_theta > 0.0) {
            return (radiance, 0.0);
        }
        let (w00, w10) = (self.weight(f.i0, f.j0), self.weight(f.i1, f.j0));
        let (w01, w11) = (self.weight(f.i0, f.j1), self.weight(f.i1, f.j1));
        let w_top = w00 + (w10 - w00) * f.fx;
        let w_bottom = w01 + (w11 - w01) * f.fx;
        let w = w_top + (w_bottom - w_top) * f.fy;
        let pdf_uv = self.uv_pdf[f.patch as usize] * w;
        (radiance, pdf_uv / (2.0 * PI * PI * sin_theta))
    }

    /// A direction drawn with density [`EnvironmentMap::pdf`] from two uniform numbers, or
    /// `None` for a black map.
    pub fn sample(&self, u1: f32, u2: f32) -> Option<Vec3> {
        if !self.is_sampleable() {
            return None;
        }
        let (w, h) = (self.width, self.height);
        let (r, fv) = pick(&self.row_cdf, u1);
        let ws = w as usize;
        let (c, fu) = pick(&self.col_cdf[r * ws..(r + 1) * ws], u2);
        let (r, c) = (r as u32, c as u32);
        let [i0, i1, j0, j1] = patch_corners(r, c, w, h);
        let (w00, w10) = (self.weight(i0, j0), self.weight(i1, j0));
        let (w01, w11) = (self.weight(i0, j1), self.weight(i1, j1));
        // The bilinear patch sampled exactly (pbrt-v4's SampleBilinear): t along the rows by
        // its marginal, then s along the columns given t.
        let t = sample_linear(fv, w00 + w10, w01 + w11);
        let s = sample_linear(fu, w00 + (w01 - w00) * t, w10 + (w11 - w10) * t);
        let x = c as f32 + 0.5 + s;
        let x = if x >= w as f32 { x - w as f32 } else { x };
        // Patch rows 0 and H are the half rows at the poles, between the pole and the first
        // (last) row's centres.
        let y = if r == 0 {
            0.5 * t
        } else if r == h {
            h as f32 - 0.5 + 0.5 * t
        } else {
            r as f32 - 0.5 + t
        };
        Some(self.direction_of(x / w as f32, y / h as f32))
    }
}

/// The texels at the corners of patch `(r, c)` (`r` in `0..=H`, `c` in `0..W`) of a `W x H`
/// map, as `[i0, i1, j0, j1]`: columns `c` and `c + 1` (wrapped round the seam), rows `r - 1`
/// and `r` (clamped at the poles, where a half row's two corners repeat one row).
/// [`EnvironmentMap::footprint`] goes the other way, from a point to its patch.
fn patch_corners(r: u32, c: u32, w: u32, h: u32) -> [u32; 4] {
    let i1 = if c + 1 >= w { 0 } else { c + 1 };
    [c, i1, r.saturating_sub(1), r.min(h - 1)]
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
/// that interval `u` lies, in `[0, 1)`: the number left for the offset within the patch.
fn pick(cdf: &[f32], u: f32) -> (usize, f32) {
    let k = cdf.partition_point(|&c| c <= u).min(cdf.len() - 1);
    let lo = if k == 0 { 0.0 } else { cdf[k - 1] };
    let width = cdf[k] - lo;
    let f = if width > 0.0 { (u - lo) / width } else { 0.5 };
    (k, f.clamp(0.0, 1.0 - f32::EPSILON / 2.0))
}

/// Where a point falls between the texel centres: see [`EnvironmentMap::footprint`].
struct Footprint {
    i0: u32,
    i1: u32,
    j0: u32,
    j1: u32,
    fx: f32,
    fy: f32,
    /// The patch (`r W + c`, `r` in `0..=H`) of the sampling tables.
    patch: u32,
}

/// A texel's luminance less the compensation's average, clamped at zero; in f32, as the
/// device code computes it.
fn compensated(texel: Vec3, average: f32) -> f32 {
    (luminance(texel) - average).max(0.0)
}

/// A number in `[0, 1)` with density proportional to `a (1 - x) + b x` from a uniform `u`
/// (pbrt-v4's SampleLinear: the inverse CDF, in the form that stays exact as `a` nears `b`);
/// `u` itself when both are zero.
fn sample_linear(u: f32, a: f32, b: f32) -> f32 {
    if !(a + b > 0.0) {
        return u;
    }
    if u == 0.0 && a == 0.0 {
        return 0.0;
    }
    let x = u * (a + b) / (a + ((1.0 - u) * a * a + u * b * b).sqrt());
    x.min(1.0 - f32::EPSILON / 2.0)
}

/// The importance-sampling tables of a map (see the module comment).
struct SamplingTables {
    average: f32,
    row_cdf: Vec<f32>,
    col_cdf: Vec<f32>,
    uv_pdf: Vec<f32>,
}

impl SamplingTables {
    /// The patches between texel centres, `W` columns (the last across the seam) by `H + 1`
    /// rows (the first and last half rows at the poles), each weighted by its mean
    /// compensated luminance (the mean of its corners'), its height and `sin(theta)` at its
    /// middle, summed in f64.
    fn new(width: u32, height: u32, texels: &[Vec3], compensate: bool) -> SamplingTables {
        let (w, h) = (width as usize, height as usize);
        let average = if compensate {
            compensation_average(w, h, texels)
        } else {
            0.0
        };
        let lum: Vec<f32> = texels.iter().map(|t| compensated(*t, average)).collect();
        let patches = Patches { lum: &lum, w, h };
        let weights = patches.weights();
        let total: f64 = weights.iter().sum();
        if !(total > 0.0) {
            return SamplingTables {
                average,
                row_cdf: Vec::new(),
                col_cdf: Vec::new(),
                uv_pdf: Vec::new(),
            };
        }
        let (row_cdf, col_cdf) = patch_cdfs(&weights, w, h, total);
        let uv_pdf = patches.uv_pdf(&row_cdf, &col_cdf);
        SamplingTables {
            average,
            row_cdf,
            col_cdf,
            uv_pdf,
        }
    }
}

/// The average luminance of a `w` by `h` map over the sphere (each row weighted by
/// `sin(theta)` at its centre, in f64), or zero where no texel is above it.
fn compensation_average(w: usize, h: usize, texels: &[Vec3]) -> f32 {
    let sin_row = |j: usize| (PI as f64 * (j as f64 + 0.5) / h as f64).sin();
    let (mut sum, mut solid_angle) = (0.0f64, 0.0f64);
    for (k, t) in texels.iter().enumerate() {
        sum += f64::from(luminance(*t)) * sin_row(k / w);
        solid_angle += sin_row(k / w);
    }
    let average = (sum / solid_angle) as f32;
    // Nothing above the average (a uniform map): sampled whole.
    if texels.iter().any(|t| compensated(*t, average) > 0.0) {
        average
    } else {
        0.0
    }
}

/// The compensated luminances of a `w` by `h` map, read as the patches between its texel
/// centres (see [`SamplingTables::new`]).
struct Patches<'a> {
    lum: &'a [f32],
    w: usize,
    h: usize,
}

impl Patches<'_> {
    /// The luminances at the four corners of patch `(r, c)`.
    #[inline]
    fn corners(&self, r: usize, c: usize) -> [f32; 4] {
        let (w, h, lum) = (self.w, self.h, self.lum);
        let [i0, i1, j0, j1] =
            patch_corners(r as u32, c as u32, w as u32, h as u32).map(|k| k as usize);
        [
            lum[j0 * w + i0],
            lum[j0 * w + i1],
            lum[j1 * w + i0],
            lum[j1 * w + i1],
        ]
    }

    /// Each patch's rows: its height in texel rows and the v of its middle.
    #[inline]
    fn row_shape(&self, r: usize) -> (f64, f64) {
        let h = self.h;
        if r == 0 {
            (0.5, 0.25 / h as f64)
        } else if r == h {
            (0.5, (h as f64 - 0.25) / h as f64)
        } else {
            (1.0, r as f64 / h as f64)
        }
    }

    /// Each patch's weight, row by row: its mean corner luminance times its height and
    /// `sin(theta)` at its middle.
    fn weights(&self) -> Vec<f64> {
        let (w, h) = (self.w, self.h);
        let mut weights = vec![0.0f64; w * (h + 1)];
        for r in 0..=h {
            let (height_rows, v_mid) = self.row_shape(r);
            let scale = height_rows * (PI as f64 * v_mid).sin();
            for c in 0..w {
                let mean: f64 = self
                    .corners(r, c)
                    .iter()
                    .map(|&x| f64::from(x))
                    .sum::<f64>()
                    / 4.0;
                weights[r * w + c] = mean * scale;
            }
        }
        weights
    }

    /// Each patch's density over the (u, v) square, given the CDFs made of its weights.
    fn uv_pdf(&self, row_cdf: &[f32], col_cdf: &[f32]) -> Vec<f32> {
        let (w, h) = (self.w, self.h);
        // A patch's density over the (u, v) square is P(patch) times the bilinear patch's
        // density over its own unit square, `interpolated / mean of the corners`, over the
        // patch's area `height_rows / (W H)`: `k = P(patch) W H / (height_rows mean)`, with
        // P(patch) as the f32 CDFs give it and the mean of the f32 corners, so that `pdf`
        // agrees with what `sample` does after rounding.
        (0..w * (h + 1))
            .map(|k| {
                let (c, r) = (k % w, k / w);
                let p_row = row_cdf[r] - if r == 0 { 0.0 } else { row_cdf[r - 1] };
                let cdf = &col_cdf[r * w..(r + 1) * w];
                let p_col = cdf[c] - if c == 0 { 0.0 } else { cdf[c - 1] };
                let [a, b, c2, d] = self.corners(r, c);
                let mean = (a + b + c2 + d) * 0.25;
                let height_rows = self.row_shape(r).0 as f32;
                if mean > 0.0 {
                    p_row * p_col * (w * h) as f32 / (height_rows * mean)
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// The row CDF (one entry per patch row) and the column CDFs (one per row, `w` entries each)
/// of the patch `weights`, which sum to `total`; each ends at exactly 1.
fn patch_cdfs(weights: &[f64], w: usize, h: usize, total: f64) -> (Vec<f32>, Vec<f32>) {
    let mut row_cdf = Vec::with_capacity(h + 1);
    let mut col_cdf = Vec::with_capacity(w * (h + 1));
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
    (row_cdf, col_cdf)
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

    /// The samples' density is the one `pdf` reports: on a grid of 4 x 4 bins a texel, the
    /// share of samples in each bin against the integral of `pdf` over it (8 x 8 points a
    /// bin), within 5 standard errors, with and without compensation. A wrong patch weight,
    /// a wrong offset inside a patch or a wrong factor in `pdf` shows in some bins.
    #[test]
    fn samples_follow_the_density_pdf_reports() {
        for compensated in [true, false] {
            let mut m = sun_map(25.0);
            if !compensated {
                m = m.without_compensation();
            }
            let (nu, nv) = (4 * m.width as usize, 4 * m.height as usize);
            let n = 1_000_000usize;
            let mut counts = vec![0usize; nu * nv];
            let mut next = uniform_stream(11);
            for _ in 0..n {
                let d = m.sample(next(), next()).unwrap();
                assert!(m.pdf(d) > 0.0, "a sample with no density: {d}");
                let (u, v) = m.uv_of(d);
                let (a, b) = (
                    ((u * nu as f32) as usize).min(nu - 1),
                    ((v * nv as f32) as usize).min(nv - 1),
                );
                counts[b * nu + a] += 1;
            }
            let q = 8;
            let mut total = 0.0f64;
            for b in 0..nv {
                for a in 0..nu {
                    let mut p = 0.0f64;
                    for y in 0..q {
                        for x in 0..q {
                            let u = (a as f64 + (x as f64 + 0.5) / q as f64) / nu as f64;
                            let v = (b as f64 + (y as f64 + 0.5) / q as f64) / nv as f64;
                            let d = m.direction_of(u as f32, v as f32);
                            p += f64::from(m.pdf(d)) * (std::f64::consts::PI * v).sin();
                        }
                    }
                    // d(omega) = 2 pi^2 sin(pi v) du dv.
                    let p = p * 2.0 * std::f64::consts::PI * std::f64::consts::PI
                        / (q * q * nu * nv) as f64;
                    total += p;
                    let se = (p * (1.0 - p) / n as f64).sqrt();
                    let got = counts[b * nu + a] as f64 / n as f64;
                    assert!(
                        (got - p).abs() < 5.0 * se + 1e-3 * p + 1e-6,
                        "bin ({a}, {b}), compensated {compensated}: {got} vs {p} (se {se})"
                    );
                }
            }
            assert!(
                (total - 1.0).abs() < 1e-3,
                "the density integrates to {total}"
            );
        }
    }

    /// MIS compensation: the texels' luminance less the map's average over the sphere is what
    /// is sampled. On the sun map only the sun is above the average, so every sample falls
    /// in the patches around it (within a texel of its centre); a uniform map, with nothing
    /// above its average, is sampled whole.
    #[test]
    fn compensation_samples_only_what_is_above_the_average() {
        let m = sun_map(0.0);
        let (w, h) = (m.width as usize, m.height as usize);
        let sin_row = |k: usize| (PI as f64 * ((k / w) as f64 + 0.5) / h as f64).sin();
        let average = (0..w * h)
            .map(|k| f64::from(luminance(m.texels[k])) * sin_row(k))
            .sum::<f64>()
            / (0..w * h).map(sin_row).sum::<f64>();
        assert!((f64::from(m.compensation()) - average).abs() < 1e-6 * average);
        let mut next = uniform_stream(4);
        for _ in 0..100_000 {
            let (u, v) = m.uv_of(m.sample(next(), next()).unwrap());
            // The sun is texel (5, 1): centre (5.5, 1.5) in texel units.
            let (x, y) = (u * w as f32, v * h as f32);
            assert!(
                (x - 5.5).abs() <= 1.0 && (y - 1.5).abs() <= 1.0,
                "({x}, {y})"
            );
        }
        let flat =
            EnvironmentMap::from_texels("flat", 4, 2, vec![Vec3::splat(0.5); 8], 0.0).unwrap();
        assert_eq!(flat.compensation(), 0.0);
        assert!(flat.sampling_tables().2.iter().all(|&k| k > 0.0));
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
        let (mean, se) = mean_and_se(n, || {
            let d = m.sample(next(), next()).unwrap();
            let p = f64::from(m.pdf(d));
            let from_light = f64::from(luminance(m.radiance(d))) / (p + uniform_pdf);
            let z = 1.0 - 2.0 * next();
            let r = (1.0 - z * z).max(0.0).sqrt();
            let phi = 2.0 * PI * next();
            let d = Vec3::new(r * phi.cos(), z, r * phi.sin());
            let p = f64::from(m.pdf(d));
            from_light + f64::from(luminance(m.radiance(d))) / (p + uniform_pdf)
        });
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

    /// The mean of `n` draws of `x` and its standard error.
    fn mean_and_se(n: usize, mut x: impl FnMut() -> f64) -> (f64, f64) {
        let (mut sum, mut sum2) = (0.0f64, 0.0f64);
        for _ in 0..n {
            let v = x();
            sum += v;
            sum2 += v * v;
        }
        let mean = sum / n as f64;
        (
            mean,
            ((sum2 / n as f64 - mean * mean).max(0.0) / n as f64).sqrt(),
        )
    }

    /// The integral of the map's luminance over the sphere, by the midpoint rule on 32 x 32
    /// points a texel (the interpolation is linear between them, the `sin(theta)` of the solid
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
        let mut next = uniform_stream(5);
        let (mean, se) = mean_and_se(200_000, || {
            let d = m.sample(next(), next()).unwrap();
            let p = m.pdf(d);
            assert!(p > 0.0, "a sampled direction has density {p}");
            luminance(m.radiance(d)) as f64 / p as f64
        });
        assert!(
            (mean - exact).abs() < 5.0 * se + 1e-6 * exact,
            "{mean} vs {exact} (se {se})"
        );
        // The luminance over the density varies only by sin(theta) against the patch
        // middle's: the standard error is far below what even constant-density sampling of
        // the patches gives (3e-4 of the value, seen).
        assert!(se < 1e-3 * exact, "se {se} of {exact}");
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
        // The same density: the patches' factors halve as their luminance doubles.
        assert!((doubled.average - 2.0 * m.average).abs() <= 1e-6 * m.average);
        let mut next = uniform_stream(8);
        for _ in 0..1000 {
            let d = m.sample(next(), next()).unwrap();
            let (a, b) = (m.pdf(d), doubled.pdf(d));
            assert!((a - b).abs() <= 1e-5 * a, "{a} {b}");
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
