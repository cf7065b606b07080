//! Tracing a scene whose geometry is split into domains ([`crate::scene::domains`]): each
//! domain's own BVH, and the top level of cell boxes that every rank holds.
//!
//! A ray starts in one domain (where its path is), which tests it against all it holds, its
//! own groups and the replicated ones; then it visits the other domains whose cells' boxes its
//! interval enters, nearest entry first; each domain's BVH answers with its closest hit below
//! the best found so far. The top level holds the boxes of the domains' cells, of their own
//! groups only: the replicated groups were tested where the ray started. Because every BVH
//! query is exact (the closest hit of its triangles under [`Hit::precedes`], bit for bit what
//! brute force finds: [`super::bvh`]), the best of the domains' answers is the hit the whole
//! scene's BVH finds, whatever the split. Two conditions keep it so:
//! - a domain's BVH pads its boxes for the whole scene's coordinates
//!   ([`SceneBvh::build_for_magnitude`]), since its rays come from anywhere in the scene;
//! - the top level culls as the BVH culls inside: the same padding, the same robust slab test,
//!   and a domain is skipped only when its entry lies past the best hit's `t` by more than
//!   the slab test's rounding.

use glam::Vec3;

use super::bvh::{Hit, RayData, SceneBvh, GAMMA3};
use crate::scene::domains::Domains;
use crate::scene::{Bounds, Scene};

/// The top level: every cell's box, padded as the BVH pads its leaves, and its domain.
#[derive(Clone, Debug)]
pub struct TopLevel {
    boxes: Vec<(Vec3, Vec3, u32)>,
    domains: usize,
    magnitude: f32,
}

impl TopLevel {
    /// The top level of `domains`, whose scene's largest coordinate magnitude is `magnitude`.
    pub fn new(domains: &Domains, magnitude: f32) -> TopLevel {
        let pad = Vec3::splat(SceneBvh::padding(magnitude));
        let boxes = domains
            .cells
            .iter()
            .map(|c| (c.bounds.min_v() - pad, c.bounds.max_v() + pad, c.domain))
            .collect();
        TopLevel {
            boxes,
            domains: domains.count(),
            magnitude,
        }
    }

    /// The largest coordinate magnitude of the whole scene, which every domain's BVH pads for.
    pub fn magnitude(&self) -> f32 {
        self.magnitude
    }

    /// The domains whose cells' boxes the ray's interval `[tmin, tmax]` enters, each with its
    /// nearest cell's entry distance, nearest first (ties by domain). A domain tests all it
    /// holds at once, so its farther cells add nothing.
    pub fn visits(&self, ray: &RayData, tmin: f32, tmax: f32) -> Vec<(f32, u32)> {
        let mut nearest = vec![f32::INFINITY; self.domains];
        let mut entered = vec![false; self.domains];
        for &(lo, hi, d) in self.boxes.iter().filter(|(lo, hi, _)| lo.cmple(*hi).all()) {
            if let Some(entry) = ray.box_entry(lo, hi, tmin, tmax) {
                let d = d as usize;
                if !entered[d] || entry < nearest[d] {
                    nearest[d] = entry;
                }
                entered[d] = true;
            }
        }
        let mut visits: Vec<(f32, u32)> = (0..self.domains)
            .filter(|&d| entered[d])
            .map(|d| (nearest[d], d as u32))
            .collect();
        visits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        visits
    }

    /// Whether a domain entered at `entry` can still hold a hit that beats `best`.
    pub fn may_beat(entry: f32, best: Option<&Hit>) -> bool {
        best.is_none_or(|b| entry <= b.t * (1.0 + 2.0 * GAMMA3))
    }
}

/// The largest coordinate magnitude of the vertices the scene's triangles use (1 for an empty
/// scene): what the domains' BVHs pad for.
pub fn magnitude_of(bounds: &Bounds) -> f32 {
    let m = bounds.min_v().abs().max(bounds.max_v().abs()).max_element();
    if m > 0.0 && m.is_finite() {
        m
    } else {
        1.0
    }
}

/// One domain's geometry: the scene with only the domain's groups holding triangles (the
/// others empty, so that every group keeps its index), and its BVH.
pub struct DomainGeometry {
    pub scene: Scene,
    pub bvh: SceneBvh,
}

impl DomainGeometry {
    /// Domain `d` of `whole` (its own groups and the replicated ones), its BVH padded for
    /// `top`'s magnitude.
    pub fn of(whole: &Scene, domains: &Domains, d: usize, top: &TopLevel) -> DomainGeometry {
        DomainGeometry::new(whole.keeping_groups(|g| domains.holds(d, g)), top)
    }

    /// The geometry of a scene that holds one domain's groups (the others empty), its BVH
    /// padded for `top`'s magnitude.
    pub fn new(scene: Scene, top: &TopLevel) -> DomainGeometry {
        let mut geometry = DomainGeometry::without_bvh(scene);
        geometry.build_bvh(top);
        geometry
    }

    /// The scene with an empty BVH, which finds nothing: a GPU tests its rays.
    pub fn without_bvh(scene: Scene) -> DomainGeometry {
        DomainGeometry {
            scene,
            bvh: SceneBvh::default(),
        }
    }

    /// Builds the domain's BVH, padded for `top`'s magnitude.
    pub fn build_bvh(&mut self, top: &TopLevel) {
        self.bvh = SceneBvh::build_for_magnitude(&self.scene, top.magnitude());
    }

    /// The domain's closest hit with `tmin < t` that precedes `best` ([`Hit::precedes`]), or
    /// `best` where it holds none.
    pub fn closest(&self, ray: &RayData, tmin: f32, best: Option<Hit>) -> Option<Hit> {
        // The query's bound is exclusive: the float after best's t lets a tie at the same t
        // through, which the total order then settles.
        let tmax = best.map_or(f32::INFINITY, |b| next_up(b.t));
        match self.bvh.intersect_ray(&self.scene, ray, tmin, tmax) {
            Some(h) if best.is_none_or(|b| h.precedes(&b)) => Some(h),
            _ => best,
        }
    }

    /// Whether the domain holds anything on the ray with `tmin < t < tmax`.
    pub fn occluded(&self, ray: &RayData, tmin: f32, tmax: f32) -> bool {
        self.bvh.occluded_ray(&self.scene, ray, tmin, tmax)
    }
}

/// The smallest float above `t` (for `t` finite and not negative: ray distances).
pub fn next_up(t: f32) -> f32 {
    if t.is_finite() && t >= 0.0 {
        f32::from_bits(t.to_bits() + 1)
    } else {
        t
    }
}

/// The closest hit of a ray over every domain, as a forwarded ray finds it: tested first by
/// domain `start`, then in the other domains it enters, nearest entry first, each domain's
/// answer carried to the next, the rest skipped once the best hit lies before their entry.
/// Equal to the whole scene's BVH's hit, bit for bit.
pub fn closest_across(
    top: &TopLevel,
    geometry: &[DomainGeometry],
    ray: &RayData,
    tmin: f32,
    start: usize,
) -> Option<Hit> {
    let mut best = geometry[start].closest(ray, tmin, None);
    for (entry, d) in top.visits(ray, tmin, f32::INFINITY) {
        if d as usize != start && TopLevel::may_beat(entry, best.as_ref()) {
            best = geometry[d as usize].closest(ray, tmin, best);
        }
    }
    best
}

/// Whether anything in any domain lies on the ray with `tmin < t < tmax`: a shadow ray tested
/// by domain `start`, then by the other domains its interval enters, nearest first, until one
/// is occluded.
pub fn occluded_across(
    top: &TopLevel,
    geometry: &[DomainGeometry],
    ray: &RayData,
    (tmin, tmax): (f32, f32),
    start: usize,
) -> bool {
    geometry[start].occluded(ray, tmin, tmax)
        || top
            .visits(ray, tmin, tmax)
            .iter()
            .any(|&(_, d)| d as usize != start && geometry[d as usize].occluded(ray, tmin, tmax))
}
