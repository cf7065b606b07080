//! The cost map: a per-pixel estimate of what path tracing a pixel costs, from a G-buffer
//! (the paper's Algorithm 1, adapted to gasworks' materials and path tracer).
//!
//! For every pixel of the G-buffer:
//! 1. the cost starts at a base cost for the visible material kind (or for a miss, or for a
//!    surface where paths end, such as a black lamp face: that cost is the pixel's whole
//!    cost, with no search);
//! 2. a sampling pattern of [`CostModel::samples`] points is laid in image space from the
//!    pixel along the projection of the direction its secondary rays mostly take: the normal
//!    for Lambertian surfaces, the mirror reflection vector for glossy and mirror ones, and
//!    both the reflection and the refraction vector for glass. The pattern is a cone whose
//!    width is set by the material: as wide as it is long for Lambertian surfaces, narrowed
//!    as `1/sqrt(Ns + 1)` for glossy ones (the width of a Phong lobe), collapsed to a line
//!    for mirrors and glass;
//! 3. each sample counts when the surface it lands on and the pixel's surface face each other
//!    (the secondary ray can hit it and comes from its lit side: line 9 of Algorithm 1), by
//!    that surface's base cost; it counts again when that surface is itself specular and
//!    sends the ray back towards the pixel's side (interreflections: line 11);
//! 4. the samples are gathered by sum (the path tracing variant; the paper takes the maximum
//!    only for Whitted ray tracing, where all samples belong to one ray), each sample of a
//!    wide pattern standing for one secondary ray. A pattern collapsed to a line (mirror,
//!    glass) is a single ray too, so, as in the paper's Whitted case, it is reduced first:
//!    to its nearest facing sample, where that ray stops. Each found surface counts more
//!    when paths go on after it: its contribution is multiplied by `1 + p + p^2 + ...`
//!    (up to the path depth), `p` being the fraction of that surface's own pattern that found
//!    facing geometry, from a first pass over the G-buffer (two passes, no recursion). So a
//!    mirror is expensive where it reflects enclosed geometry (the inside of a shelf), not
//!    merely because its single ray finds something;
//! 5. pixels at depth discontinuities get an edge term (rays of one tile that diverge).
//!
//! The result is in arbitrary "cost units" (1 = one diffuse bounce). Only relative values
//! matter for sorting and splitting tiles; after a first pass the scheduler replaces the
//! scale, tile by tile, with measured times ([`CostMap::corrected`]).

use std::time::Instant;

use glam::{Vec2, Vec3};
use rayon::prelude::*;

use super::raster::GBuffer;
use super::sat::{MapScale, Sat};
use crate::render::Tile;
use crate::scene::{Material, MaterialKind, Scene};
use crate::splitmix::mix64;

/// The constants of the estimate. The defaults are set for gasworks' path tracer (next-event
/// estimation at diffuse and glossy hits, none at specular ones); all costs are relative to
/// one diffuse bounce.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// A primary ray that leaves the scene: one traversal and an environment lookup, no
    /// shading and no shadow ray.
    pub miss: f32,
    /// A Lambertian hit: BRDF sampling plus a light sample and its shadow ray.
    pub diffuse: f32,
    /// A glossy hit: the diffuse work plus the Phong lobe's evaluation and sampling.
    pub glossy: f32,
    /// A mirror hit: one reflected ray, no light sample.
    pub mirror: f32,
    /// A glass hit: Fresnel, a choice of reflection or refraction, no light sample.
    pub glass: f32,
    /// A hit on a surface where paths end ([`Material::ends_paths`]: it reflects nothing,
    /// as most lamps' faces): shading and a light sample whose BSDF is zero (no shadow ray),
    /// and no secondary ray, so no search either. Counted as a diffuse hit, a sponza-like
    /// frame's tiles that see its lamp were estimated as dear as the rest and measured ten
    /// times cheaper.
    pub path_end: f32,
    /// Extra cost of the refracted path through a glass object: it crosses a second
    /// interface (the exit) before it can reach anything else.
    pub refraction_exit: f32,
    /// Pattern samples per pixel and per searched direction.
    pub samples: usize,
    /// Length of the pattern along the projected direction, as a fraction of the cost map's
    /// diagonal: how far in image space a secondary ray is assumed to travel.
    pub search_length: f32,
    /// Half-width of the Lambertian pattern relative to its length (1: a 90 degree cone).
    pub diffuse_spread: f32,
    /// Half-width of the glossy pattern is `glossy_spread / sqrt(Ns + 1)` times its length:
    /// the half-angle at half maximum of `cos^Ns` is about `1.18 / sqrt(Ns)`.
    pub glossy_spread: f32,
    /// Weight of a sample whose surface and the pixel's face each other (times that surface's
    /// base cost).
    pub visible_weight: f32,
    /// Extra weight of a sample whose surface is specular and reflects back to the pixel's
    /// side (times that surface's base cost).
    pub interreflection_weight: f32,
    /// The longest continuation series used for depth: a found surface's contribution is
    /// multiplied by `1 + p + p^2 + ...` (up to `max_depth - 2` powers, at most this many),
    /// with `p` the fraction of that surface's own pattern that found a facing surface.
    pub max_continuation_terms: u32,
    /// Cost added at a depth discontinuity (relative change of depth above
    /// `edge_depth_ratio` against a 4-neighbour, or hit against miss).
    pub edge: f32,
    pub edge_depth_ratio: f32,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            miss: 0.15,
            diffuse: 1.0,
            glossy: 1.25,
            mirror: 0.7,
            glass: 0.8,
            path_end: 0.25,
            refraction_exit: 0.8,
            samples: 16,
            search_length: 0.3,
            diffuse_spread: 1.0,
            glossy_spread: 1.2,
            visible_weight: 1.0,
            interreflection_weight: 1.0,
            max_continuation_terms: 6,
            edge: 0.1,
            edge_depth_ratio: 0.05,
        }
    }
}

impl CostModel {
    /// The base cost of a hit on `m` (line 2 of Algorithm 1; also the weight of a sample that
    /// lands on `m`, line 10).
    pub fn base(&self, m: &Material) -> f32 {
        if m.ends_paths() {
            return self.path_end;
        }
        match m.kind {
            MaterialKind::Diffuse => self.diffuse,
            MaterialKind::Glossy => self.glossy,
            MaterialKind::Mirror => self.mirror,
            MaterialKind::Glass => self.glass,
        }
    }

    /// The pattern's half-width over its length for a material: 0 collapses it to a line.
    fn spread(&self, m: &Material) -> f32 {
        match m.kind {
            MaterialKind::Diffuse => self.diffuse_spread,
            MaterialKind::Glossy => {
                (self.glossy_spread / (m.shininess.max(0.0) + 1.0).sqrt()).min(self.diffuse_spread)
            }
            MaterialKind::Mirror | MaterialKind::Glass => 0.0,
        }
    }
}

fn is_specular(m: &Material) -> bool {
    !matches!(m.kind, MaterialKind::Diffuse) && !m.ends_paths()
}

/// A per-pixel cost estimate at the G-buffer's resolution, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct CostMap {
    pub width: usize,
    pub height: usize,
    pub values: Vec<f32>,
}

/// Timing of the estimate, for the render summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EstimateStats {
    pub seconds: f64,
}

/// The fixed, uniformly spread pattern points in `[0, 1)^2` (the R2 low-discrepancy
/// sequence), before they are scaled, moved and turned for a pixel (Figure 4 (a)).
fn base_pattern(n: usize) -> Vec<Vec2> {
    // 1/phi2 and 1/phi2^2, phi2 being the plastic number.
    const A1: f32 = 0.754_877_7;
    const A2: f32 = 0.569_840_3;
    (0..n)
        .map(|i| {
            let i = i as f32;
            Vec2::new((0.5 + A1 * i).fract(), (0.5 + A2 * i).fract())
        })
        .collect()
}

/// What one direction's search found at a pixel.
#[derive(Clone, Copy, Debug, Default)]
struct Gathered {
    /// Sum of the sample contributions over the pattern, divided by the sample count.
    mean: f32,
    /// Fraction of samples that found a facing surface.
    hit_fraction: f32,
}

struct Estimator<'a> {
    g: &'a GBuffer,
    scene: &'a Scene,
    model: &'a CostModel,
    pattern: Vec<Vec2>,
    /// The pattern length in cost-map pixels.
    length: f32,
    max_depth: u32,
    /// Per pixel, the fraction of its pattern that found a facing surface (from a first
    /// pass): how likely a path continues after bouncing there. `None` in the first pass.
    reach: Option<Vec<f32>>,
}

impl Estimator<'_> {
    fn material(&self, i: usize) -> &Material {
        &self.scene.materials[self.g.material[i] as usize]
    }

    /// Projects the direction `dir` leaving the surface point of pixel `i` into image space:
    /// a unit 2D vector, or `None` when it points (almost) straight along the view axis.
    fn image_direction(&self, i: usize, dir: Vec3) -> Option<Vec2> {
        let p = self.g.position[i];
        let (x0, y0, _) = self.g.frame.project(p)?;
        let step = 0.01 * self.g.depth[i].max(1e-6);
        let (x1, y1, _) = self.g.frame.project(p + dir * step)?;
        let d = Vec2::new(x1 - x0, y1 - y0);
        let len = d.length();
        (len > 1e-6 && len.is_finite()).then(|| d / len)
    }

    /// Lays the pattern from pixel `(px, py)` along `axis` with half-width `spread` (relative
    /// to the distance along the axis: a cone) and gathers the samples by sum. `side` is the
    /// normal of the half-space the secondary rays go into (the normal for reflection, its
    /// opposite for refraction).
    fn search(&self, px: usize, py: usize, axis: Vec2, spread: f32, side: Vec3) -> Gathered {
        let i = py * self.g.width + px;
        let p = self.g.position[i];
        let across = Vec2::new(-axis.y, axis.x);
        // A per-pixel rotation of the point set (Cranley-Patterson), so that neighbouring
        // pixels do not all probe the same offsets.
        let h = mix64(i as u64 ^ 0xC057_3A9A);
        let jitter = Vec2::new(
            (h >> 40) as f32 / (1u64 << 24) as f32,
            ((h >> 16) & 0xFF_FFFF) as f32 / (1u64 << 24) as f32,
        );
        let (mut sum, mut hits) = (0.0f32, 0u32);
        // A collapsed pattern is one ray: only its first facing surface counts.
        let mut first: Option<(f32, f32)> = None;
        for q in &self.pattern {
            let q = (*q + jitter).fract();
            let along = 1.0 + q.x * (self.length - 1.0).max(0.0);
            let off = (q.y - 0.5) * 2.0 * spread * along;
            let s = Vec2::new(px as f32 + 0.5, py as f32 + 0.5) + axis * along + across * off;
            if s.x < 0.0 || s.y < 0.0 {
                continue;
            }
            let (sx, sy) = (s.x as usize, s.y as usize);
            if sx >= self.g.width || sy >= self.g.height {
                // Off screen: the paper's off-screen geometry problem; nothing is known.
                continue;
            }
            let j = sy * self.g.width + sx;
            if let Some(mut contribution) = self.sample(i, p, j, side) {
                if let Some(reach) = &self.reach {
                    contribution *= self.continuation(reach[j]);
                }
                hits += 1;
                sum += contribution;
                if first.is_none_or(|(a, _)| along < a) {
                    first = Some((along, contribution));
                }
            }
        }
        if spread == 0.0 {
            return match first {
                Some((_, contribution)) => Gathered {
                    mean: contribution,
                    hit_fraction: 1.0,
                },
                None => Gathered::default(),
            };
        }
        let n = self.pattern.len().max(1) as f32;
        Gathered {
            mean: sum / n,
            hit_fraction: hits as f32 / n,
        }
    }

    /// The contribution of the surface at G-buffer pixel `j` to pixel `i` (at point `p`), or
    /// `None` when the two do not face each other.
    fn sample(&self, i: usize, p: Vec3, j: usize, side: Vec3) -> Option<f32> {
        if j == i || !self.g.is_hit(j) {
            return None;
        }
        let to_s = self.g.position[j] - p;
        let dist = to_s.length();
        if dist <= 1e-6 * self.g.depth[i].max(1.0) {
            return None;
        }
        let d = to_s / dist;
        let ns = self.g.normal[j];
        // Line 9: mutually front-facing. The secondary ray leaves into `side`, and the
        // sampled surface faces back at the pixel's point.
        if d.dot(side) <= 0.0 || ns.dot(-d) <= 0.0 {
            return None;
        }
        let ms = self.material(j);
        let base = self.model.base(ms);
        let mut contribution = self.model.visible_weight * base;
        // Line 11: the sampled surface is specular and reflects the ray back towards the
        // pixel's side (incidence under 45 degrees): a likely interreflection.
        if is_specular(ms) {
            let r = d - 2.0 * d.dot(ns) * ns;
            if r.dot(-d) > 0.0 {
                contribution += self.model.interreflection_weight * base;
            }
        }
        Some(contribution)
    }

    /// `1 + p + ... + p^k`: how many more bounces a found surface leads to, on average.
    fn continuation(&self, p: f32) -> f32 {
        let terms = self
            .max_depth
            .saturating_sub(2)
            .min(self.model.max_continuation_terms);
        let (mut sum, mut pk) = (1.0f32, 1.0f32);
        for _ in 0..terms {
            pk *= p.clamp(0.0, 0.95);
            sum += pk;
        }
        sum
    }

    /// The cost of a pixel and the fraction of its search patterns that found a facing
    /// surface.
    fn pixel(&self, px: usize, py: usize) -> (f32, f32) {
        let i = py * self.g.width + px;
        if !self.g.is_hit(i) {
            return (self.model.miss, 0.0);
        }
        let m = self.material(i);
        let mut cost = self.model.base(m);
        let (mut reach, mut searches) = (0.0f32, 0u32);
        if self.max_depth >= 2 && !m.ends_paths() {
            let n = self.g.normal[i];
            let view = (self.g.position[i] - self.g.frame.eye).normalize_or_zero();
            let reflected = view - 2.0 * view.dot(n) * n;
            let mut gather = |dir: Vec3, side: Vec3, spread: f32| {
                let found = match self.image_direction(i, dir) {
                    Some(axis) => self.search(px, py, axis, spread, side),
                    None => Gathered::default(),
                };
                cost += found.mean;
                reach += found.hit_fraction;
                searches += 1;
            };
            match m.kind {
                MaterialKind::Diffuse => gather(n, n, self.model.spread(m)),
                MaterialKind::Glossy | MaterialKind::Mirror => {
                    gather(reflected, n, self.model.spread(m))
                }
                MaterialKind::Glass => {
                    gather(reflected, n, 0.0);
                    let refracted = refract(view, n, m.ior).unwrap_or(reflected);
                    gather(refracted, -n, 0.0);
                    cost += self.model.refraction_exit;
                }
            }
        }
        (cost + self.edge(px, py), reach / searches.max(1) as f32)
    }

    /// The edge term: a depth discontinuity (or a silhouette) against a 4-neighbour.
    fn edge(&self, px: usize, py: usize) -> f32 {
        let (w, h) = (self.g.width, self.g.height);
        let i = py * w + px;
        let z = self.g.depth[i];
        let neighbours = [
            (px > 0).then(|| i - 1),
            (px + 1 < w).then(|| i + 1),
            (py > 0).then(|| i - w),
            (py + 1 < h).then(|| i + w),
        ];
        let discontinuous = neighbours.into_iter().flatten().any(|j| {
            let zn = self.g.depth[j];
            match (z.is_finite(), zn.is_finite()) {
                (true, true) => (z - zn).abs() > self.model.edge_depth_ratio * z.min(zn),
                (a, b) => a != b,
            }
        });
        if discontinuous {
            self.model.edge
        } else {
            0.0
        }
    }
}

/// The refracted direction of unit `v` at a surface of normal `n` (facing against `v`),
/// entering a medium of index `ior`; `None` on total internal reflection.
fn refract(v: Vec3, n: Vec3, ior: f32) -> Option<Vec3> {
    let eta = 1.0 / ior.max(1e-3);
    let cos_i = -v.dot(n);
    let k = 1.0 - eta * eta * (1.0 - cos_i * cos_i);
    (k >= 0.0).then(|| (eta * v + (eta * cos_i - k.sqrt()) * n).normalize_or_zero())
}

/// Estimates the cost map of a G-buffer for a path tracer of the given maximum depth.
pub fn estimate(
    g: &GBuffer,
    scene: &Scene,
    model: &CostModel,
    max_depth: u32,
) -> (CostMap, EstimateStats) {
    let start = Instant::now();
    let diagonal = ((g.width * g.width + g.height * g.height) as f32).sqrt();
    let mut est = Estimator {
        g,
        scene,
        model,
        pattern: base_pattern(model.samples),
        length: (model.search_length * diagonal).max(1.0),
        max_depth,
        reach: None,
    };
    let run = |est: &Estimator| -> Vec<(f32, f32)> {
        let mut out = vec![(0.0f32, 0.0f32); g.width * g.height];
        out.par_chunks_mut(g.width)
            .enumerate()
            .for_each(|(py, row)| {
                for (px, v) in row.iter_mut().enumerate() {
                    *v = est.pixel(px, py);
                }
            });
        out
    };
    // First pass: how far each pixel's bounces reach. Second pass: the costs, each found
    // surface weighted by how long paths go on after it. (Still one search per pixel and
    // pass: no recursion.)
    if max_depth >= 3 {
        est.reach = Some(run(&est).into_iter().map(|(_, r)| r).collect());
    }
    let values = run(&est).into_iter().map(|(c, _)| c).collect();
    let map = CostMap {
        width: g.width,
        height: g.height,
        values,
    };
    (
        map,
        EstimateStats {
            seconds: start.elapsed().as_secs_f64(),
        },
    )
}

impl CostMap {
    /// A map of one value everywhere: what a scheduler knows without an estimate.
    pub fn uniform(width: usize, height: usize, value: f32) -> CostMap {
        CostMap {
            width,
            height,
            values: vec![value; width * height],
        }
    }

    pub fn sat(&self) -> Sat {
        Sat::new(self.width, self.height, &self.values)
    }

    /// The map after measuring `tiles` (a partition of the `image` into tiles, in pixels):
    /// inside each tile the estimate keeps its shape but is scaled so that the tile sums to
    /// its measured cost. Cells that straddle tiles take the coverage-weighted mix of the
    /// tiles' scales. When every cell lies within one tile, the corrected map's sum over a
    /// measured tile is exactly that tile's measurement, so a later pass with the same tiles
    /// schedules by measured times, and one with other tiles (a new adaptive split) by
    /// measured times redistributed along the estimate.
    pub fn corrected(&self, image: (u32, u32), tiles: &[Tile], measured: &[f64]) -> CostMap {
        assert_eq!(tiles.len(), measured.len(), "one measurement per tile");
        let scale = MapScale::between(image, (self.width, self.height));
        let sat = self.sat();
        // Per-cell sum over tiles of (tile's ratio x covered fraction of the cell), and, for
        // tiles whose estimate is zero, their measured cost spread evenly per covered area.
        let mut factor = vec![0.0f64; self.values.len()];
        let mut flat = vec![0.0f64; self.values.len()];
        for (t, &m) in tiles.iter().zip(measured) {
            let est = scale.tile_cost(&sat, *t);
            let (cx0, cy0) = (t.x as f64 * scale.sx, t.y as f64 * scale.sy);
            let (cx1, cy1) = ((t.x + t.w) as f64 * scale.sx, (t.y + t.h) as f64 * scale.sy);
            let area = (cx1 - cx0) * (cy1 - cy0);
            let y_end = (cy1.ceil() as usize).min(self.height);
            let x_end = (cx1.ceil() as usize).min(self.width);
            for cy in (cy0.floor() as usize)..y_end {
                let fy = (cy1.min(cy as f64 + 1.0) - cy0.max(cy as f64)).max(0.0);
                for cx in (cx0.floor() as usize)..x_end {
                    let fx = (cx1.min(cx as f64 + 1.0) - cx0.max(cx as f64)).max(0.0);
                    let cover = fx * fy;
                    let c = cy * self.width + cx;
                    if est > 0.0 {
                        factor[c] += cover * m / est;
                    } else if area > 0.0 {
                        flat[c] += cover * m / area;
                    }
                }
            }
        }
        let values = self
            .values
            .iter()
            .zip(factor.iter().zip(&flat))
            .map(|(&v, (&f, &u))| (v as f64 * f + u) as f32)
            .collect();
        CostMap {
            width: self.width,
            height: self.height,
            values,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refraction_bends_towards_the_normal() {
        let v = Vec3::new(1.0, -1.0, 0.0).normalize();
        let n = Vec3::Y;
        let r = refract(v, n, 1.5).unwrap();
        // Snell: sin(t) = sin(45 deg) / 1.5.
        assert!((r.x - (0.5f32.sqrt() / 1.5)).abs() < 1e-5);
        assert!(r.y < 0.0);
    }

    #[test]
    fn continuation_is_one_for_single_bounce_paths() {
        let scene = Scene::new("t", vec![], vec![]);
        let frame = crate::scene::Camera {
            eye: Vec3::Z,
            look_at: Vec3::ZERO,
            up: Vec3::Y,
            fov_y_deg: 40.0,
        }
        .frame(4, 4)
        .unwrap();
        let (g, _) = super::super::raster::rasterize(&scene, &frame, 4, 4);
        let model = CostModel::default();
        let est = Estimator {
            g: &g,
            scene: &scene,
            model: &model,
            pattern: base_pattern(4),
            length: 4.0,
            max_depth: 2,
            reach: None,
        };
        assert_eq!(est.continuation(0.9), 1.0);
        let deep = Estimator {
            max_depth: 4,
            ..est
        };
        assert!((deep.continuation(0.5) - 1.75).abs() < 1e-6);
    }

    #[test]
    fn correction_makes_tiles_sum_to_their_measurements() {
        let map = CostMap {
            width: 4,
            height: 2,
            values: vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 1.0, 1.0],
        };
        // An 8 x 4 image: each cell is 2 x 2 pixels; two tiles of 4 x 4 pixels.
        let tiles = [
            Tile {
                x: 0,
                y: 0,
                w: 4,
                h: 4,
            },
            Tile {
                x: 4,
                y: 0,
                w: 4,
                h: 4,
            },
        ];
        let fixed = map.corrected((8, 4), &tiles, &[6.0, 0.5]);
        let sat = fixed.sat();
        let scale = MapScale::between((8, 4), (4, 2));
        assert!((scale.tile_cost(&sat, tiles[0]) - 6.0).abs() < 1e-6);
        assert!((scale.tile_cost(&sat, tiles[1]) - 0.5).abs() < 1e-6);
        // The shape inside a tile is kept: cell (1, 0) stays twice cell (0, 0).
        assert!((fixed.values[1] - 2.0 * fixed.values[0]).abs() < 1e-6);
    }
}
