//! The CPU acceleration structure: built in two levels like the GPU design, traversed as one
//! eight-wide tree with SIMD box and triangle tests.
//!
//! # Build
//!
//! - Bottom level: one binary BVH per [`Group`] (the unit of builds, as a GAS is on the GPU),
//!   built in parallel over the groups by `obvhs` (PLOC, reinsertion, leaves of up to 8
//!   triangles).
//! - Top level: a binary BVH over the groups' bounds (one group per leaf).
//! - Both are collapsed into eight-wide nodes (each node absorbs binary descendants, largest
//!   surface area first, until it has eight children) and glued into one node array: a
//!   top-level leaf is replaced by the reference to its group's root, so the group's root box
//!   (equal to the top-level leaf's box) is tested once, not twice, and one traversal loop with
//!   one stack serves both levels. See [`build`] for the steps.
//!
//! # Layout
//!
//! - [`simd::Node`] (224 bytes, 32-byte aligned): the eight child boxes as structure of
//!   arrays (`lo[axis]`, `hi[axis]`, a lane per child) and eight 32-bit child references
//!   ([`simd::ChildRef`]: an inner node index, or a leaf's packet range, or empty).
//! - [`simd::Packet`] (176 bytes), in leaf order: a [`simd::TriPacket`] (144 bytes, four
//!   triangles' vertices as structure of arrays) followed by its [`simd::PacketIds`] (each
//!   lane's group and triangle index, read only on a hit). A leaf of `n` triangles owns
//!   `ceil(n / 4)` consecutive packets, its last padded with copies of its last triangle.
//!
//! # Traversal
//!
//! Closest hit: depth first from the root; at a node, one slab test of the eight child boxes
//! against `[tmin, best t]`, the hit children sorted by entry distance, the nearest visited
//! next and the others pushed with their entry distance; a popped entry is skipped when the
//! best hit is already in front of it. At a leaf, one packet test per four triangles. Shadow
//! rays (any hit) skip the sorting and stop at the first hit. Batches of rays
//! ([`SceneBvh::intersect_rays`], [`SceneBvh::occluded_rays`]) go one ray after another, or
//! with sixteen traversals taking turns and prefetching for each other ([`BatchTrace`]).
//!
//! The node test is chosen at run time, so that one binary runs on any x86-64: where the CPU
//! has AVX2, both traversals run as functions compiled for it, testing the eight boxes in
//! one eight-lane pass ([`simd::Avx`]); elsewhere, as two four-lane halves ([`simd::Halves`]).
//! Both compute the same operations lane by lane, so the answers are the same bits.
//!
//! Cut-outs (materials with a `map_d` opacity mask) and see-through materials (`d` below 1): a
//! triangle test's hit on a triangle of a group that has any is kept only where
//! [`Scene::passes_through`] says the surface is there; the query takes the scene for that
//! lookup. Groups without cut-outs pay one bounds-checked
//! `Vec<bool>` read per candidate hit, and scenes without any not even that. This is the
//! CPU's any-hit program: the GPU runs the same test in `__anyhit__pathtrace`.
//!
//! obvhs's own traversals are not used because the reference must agree *exactly* with brute
//! force, and they cannot promise it: its `Bvh2` traversal culls children with a strict
//! `t_near < t_max` (so a tie at the current closest distance can be skipped, and ties must
//! be settled by a total order), its ray setup replaces direction components smaller than
//! `f32::EPSILON` by `±1/EPSILON` (so a nearly axis-parallel ray sees slightly wrong slabs),
//! and its `CwBvh` node test clamps the entry distance to a fixed `1e-4`, which culls hits
//! closer than that.
//!
//! # Exactness
//!
//! The property the tests check against [`brute_force_intersect`]:
//! - one triangle test, [`intersect_triangle`] (the watertight test of Woop, Benthin and Wald,
//!   JCGT 2013), is used by brute force, and [`simd::TriPacket::intersect`] performs the very
//!   same float operations in each lane (no FMA, same order, same vertex values; the lanes where
//!   the scalar test would switch to double precision are handed to it), so a triangle's `t`,
//!   `u`, `v` are bit-identical whichever finds it;
//! - ties are broken by a total order: smaller `t`, then smaller group, then smaller prim;
//!   the traversal visits nodes whose entry distance is `<=` the best `t` so far;
//! - culling is conservative: leaf boxes are padded by `2^-16` times the scene's largest
//!   coordinate magnitude (far above the rounding of the triangle test for ray origins within
//!   the scene's scale), and the slab test is the robust one of Ize ("Robust BVH Ray
//!   Traversal", JCGT 2013): the exit distance is scaled by `1 + 2 gamma(3)`, zero direction
//!   components give infinite slabs, and a NaN slab (origin on the plane of a face, direction
//!   parallel to it) constrains nothing. Empty child slots hold the empty box (`+inf`, `-inf`),
//!   which no slab test passes.

mod build;
mod interleave;
mod simd;

use arrayvec::ArrayVec;
use glam::Vec3;

use crate::scene::Scene;
#[cfg(target_arch = "x86_64")]
use simd::Avx;
use simd::{ChildRef, Halves, Node, NodeTest, Packet, Ray4, WIDTH};

pub use interleave::BatchTrace;

#[cfg(doc)]
use crate::scene::Group;

/// A closest hit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Index into [`Scene::groups`].
    pub group: u32,
    /// Triangle index within the group.
    pub prim: u32,
    /// Distance along the ray, in units of the direction's length.
    pub t: f32,
    /// Barycentric weight of vertex 1.
    pub u: f32,
    /// Barycentric weight of vertex 2.
    pub v: f32,
}

impl Hit {
    /// The total order of hits: `(t, group, prim)` lexicographically. `a.precedes(b)` is
    /// true when `a` is the closer hit (or equally close and smaller by group, then prim).
    #[inline]
    pub fn precedes(&self, other: &Hit) -> bool {
        (self.t, self.group, self.prim) < (other.t, other.group, other.prim)
    }
}

/// What a build did, for figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BuildStats {
    pub triangles: usize,
    pub groups: usize,
    /// Wall-clock seconds of the whole build (both levels, node copies included).
    pub seconds: f64,
}

/// `gamma(3) = 3 eps / (1 - 3 eps)` with `eps = 2^-24`: the relative error bound of three
/// rounded float operations (Pharr, Jakob, Humphreys, PBR 3rd ed., 3.9).
pub(crate) const GAMMA3: f32 = 3.0 * f32::EPSILON * 0.5 / (1.0 - 3.0 * f32::EPSILON * 0.5);

/// Leaf boxes grow by this fraction of the scene's largest coordinate magnitude.
const PAD_RELATIVE: f32 = 1.0 / 65536.0;

/// The ray, prepared once for the slab tests and the watertight triangle test.
#[derive(Clone, Copy, Debug)]
pub struct RayData {
    pub origin: Vec3,
    pub dir: Vec3,
    /// `1 / dir` per component (infinite where the component is zero).
    inv_dir: Vec3,
    /// The axis of the direction's largest magnitude, and the two others, in cyclic order.
    kx: usize,
    ky: usize,
    kz: usize,
    /// The shear that maps the ray onto the +z axis: `x' = x + sx z`, `y' = y + sy z`,
    /// `z' = sz z`.
    sx: f32,
    sy: f32,
    sz: f32,
}

impl RayData {
    /// `None` when the direction is zero or not finite, or the origin is not finite.
    pub fn new(origin: Vec3, dir: Vec3) -> Option<RayData> {
        if !RayData::can_trace(origin, dir) {
            return None;
        }
        let a = dir.abs();
        let kz = if a.x > a.y {
            if a.x > a.z {
                0
            } else {
                2
            }
        } else if a.y > a.z {
            1
        } else {
            2
        };
        let kx = (kz + 1) % 3;
        let ky = (kx + 1) % 3;
        Some(RayData {
            origin,
            dir,
            inv_dir: Vec3::ONE / dir,
            kx,
            ky,
            kz,
            sx: -dir[kx] / dir[kz],
            sy: -dir[ky] / dir[kz],
            sz: 1.0 / dir[kz],
        })
    }

    /// Whether [`RayData::new`] makes a ray of these: a finite origin, a finite direction
    /// that is not zero.
    #[inline]
    pub fn can_trace(origin: Vec3, dir: Vec3) -> bool {
        origin.is_finite() && dir.is_finite() && dir != Vec3::ZERO
    }

    /// The robust slab test of one box ([`simd::NodeTest::entry`]'s, for a single box): the
    /// entry distance where the ray's interval `[tmin, tmax]` meets the box `lo..hi`, or
    /// `None` where it misses it.
    pub fn box_entry(&self, lo: Vec3, hi: Vec3, tmin: f32, tmax: f32) -> Option<f32> {
        let (mut t_near, mut t_far) = (tmin, tmax);
        for a in 0..3 {
            let (near, far) = if self.inv_dir[a] < 0.0 {
                (hi[a], lo[a])
            } else {
                (lo[a], hi[a])
            };
            // `max` and `min` return the other argument for a NaN: a NaN slab constrains
            // nothing.
            t_near = t_near.max((near - self.origin[a]) * self.inv_dir[a]);
            t_far = t_far.min((far - self.origin[a]) * self.inv_dir[a]);
        }
        (t_near <= t_far * (1.0 + 2.0 * GAMMA3)).then_some(t_near)
    }
}

/// The watertight ray/triangle test (Woop, Benthin, Wald, "Watertight Ray/Triangle
/// Intersection", JCGT 2013). Two-sided. Returns `(t, u, v)` with `u`, `v` the barycentrics
/// of vertices 1 and 2, for hits with `tmin < t < tmax`.
///
/// The vertices are translated to the ray origin, permuted so that the ray's dominant axis is
/// z, and sheared so that the ray becomes the +z axis; then the 2D edge functions
/// `e0 = p1 x p2`, `e1 = p2 x p0`, `e2 = p0 x p1` decide the hit: it is inside when none is
/// negative or none is positive. Edges shared by two triangles are evaluated identically for
/// both, so rays cannot slip between them. An edge function that rounds to exactly zero is
/// recomputed in double precision.
#[inline]
pub fn intersect_triangle(
    ray: &RayData,
    tri: &[Vec3; 3],
    tmin: f32,
    tmax: f32,
) -> Option<(f32, f32, f32)> {
    let (kx, ky, kz) = (ray.kx, ray.ky, ray.kz);
    let a = tri[0] - ray.origin;
    let b = tri[1] - ray.origin;
    let c = tri[2] - ray.origin;
    let ax = a[kx] + ray.sx * a[kz];
    let ay = a[ky] + ray.sy * a[kz];
    let bx = b[kx] + ray.sx * b[kz];
    let by = b[ky] + ray.sy * b[kz];
    let cx = c[kx] + ray.sx * c[kz];
    let cy = c[ky] + ray.sy * c[kz];
    let mut e0 = bx * cy - by * cx;
    let mut e1 = cx * ay - cy * ax;
    let mut e2 = ax * by - ay * bx;
    if e0 == 0.0 || e1 == 0.0 || e2 == 0.0 {
        let (ax, ay, bx, by, cx, cy) = (
            ax as f64, ay as f64, bx as f64, by as f64, cx as f64, cy as f64,
        );
        e0 = (bx * cy - by * cx) as f32;
        e1 = (cx * ay - cy * ax) as f32;
        e2 = (ax * by - ay * bx) as f32;
    }
    if (e0 < 0.0 || e1 < 0.0 || e2 < 0.0) && (e0 > 0.0 || e1 > 0.0 || e2 > 0.0) {
        return None;
    }
    let det = e0 + e1 + e2;
    if det == 0.0 {
        return None;
    }
    let az = ray.sz * a[kz];
    let bz = ray.sz * b[kz];
    let cz = ray.sz * c[kz];
    let t = (e0 * az + e1 * bz + e2 * cz) / det;
    if !(t > tmin && t < tmax) {
        return None;
    }
    Some((t, e1 / det, e2 / det))
}

/// A traversal stack of `(reference, entry distance)` that spills to the heap for unusually
/// deep trees. The fixed part is an `ArrayVec`: nothing is written until pushed (initialising
/// 64 entries per ray costs time: figures in docs/cpu-backend.md).
struct Stack {
    fixed: ArrayVec<(ChildRef, f32), 64>,
    spill: Vec<(ChildRef, f32)>,
}

impl Stack {
    #[inline(always)]
    fn new() -> Stack {
        Stack {
            fixed: ArrayVec::new(),
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn push(&mut self, r: ChildRef, t: f32) {
        if let Err(e) = self.fixed.try_push((r, t)) {
            self.spill.push(e.element());
        }
    }

    #[inline(always)]
    fn clear(&mut self) {
        self.fixed.clear();
        self.spill.clear();
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<(ChildRef, f32)> {
        if self.fixed.is_full() {
            if let Some(v) = self.spill.pop() {
                return Some(v);
            }
        }
        self.fixed.pop()
    }
}

/// One traversal in progress, but for its stack (kept apart: a stack that is a local of the
/// single-ray loops stays out of the way of the rest, which then lives in registers).
struct Walk {
    ray4: Ray4,
    /// The entry to visit next.
    current: ChildRef,
    /// Closest hit: the best hit so far, and the culling distance (its `t`, or `tmax`
    /// before there is one).
    best: Option<Hit>,
    limit: f32,
}

impl Walk {
    #[inline(always)]
    fn new(ray: &RayData, root: ChildRef, tmax: f32) -> Walk {
        Walk {
            ray4: Ray4::new(ray),
            current: root,
            best: None,
            limit: tmax,
        }
    }
}

/// The BVH of a scene: one tree of eight-wide nodes whose upper part is the top level (over
/// the groups) and whose lower parts are the groups' trees; see the module comment.
#[derive(Clone, Debug, Default)]
pub struct SceneBvh {
    /// Group trees first (group by group), top-level nodes last.
    nodes: Vec<Node>,
    /// Triangles in leaf order, four per packet, each packet with its ids.
    packets: Vec<Packet>,
    /// The root: a node, a leaf (a scene of one small group) or empty.
    root: ChildRef,
    /// Per group, whether its hits must pass the cut-out test ([`Scene::cutout_groups`]);
    /// empty when no group has cut-outs.
    cutout_groups: Vec<bool>,
    stats: BuildStats,
}

impl Default for ChildRef {
    fn default() -> ChildRef {
        ChildRef::EMPTY
    }
}

impl SceneBvh {
    /// Builds both levels (in parallel over the groups, on the current rayon pool). Each build
    /// is logged at debug level (`RUST_LOG=gasworks::cpu::bvh=debug`): how many a render
    /// makes is checked that way.
    pub fn build(scene: &Scene) -> SceneBvh {
        let bvh = build::build(scene);
        log::debug!(
            "CPU BVH built: {} triangles in {} groups, {:.3} s",
            bvh.stats.triangles,
            bvh.stats.groups,
            bvh.stats.seconds
        );
        bvh
    }

    /// [`SceneBvh::build`] with the boxes padded for coordinates up to `magnitude` at least:
    /// a domain's BVH, built from part of a scene whose rays come from all of it, pads as
    /// the whole scene's BVH would, so that it stays exact for those rays.
    pub fn build_for_magnitude(scene: &Scene, magnitude: f32) -> SceneBvh {
        build::build_padded(scene, magnitude)
    }

    /// How far leaf boxes grow for a scene whose largest coordinate magnitude is
    /// `magnitude`.
    pub fn padding(magnitude: f32) -> f32 {
        magnitude * PAD_RELATIVE
    }

    /// Builds both levels and reports how long it took.
    pub fn build_with_stats(scene: &Scene) -> (SceneBvh, BuildStats) {
        let bvh = SceneBvh::build(scene);
        let stats = bvh.stats;
        (bvh, stats)
    }

    pub fn stats(&self) -> BuildStats {
        self.stats
    }

    /// Whether this BVH was built from `scene`'s geometry, as far as its counts tell: the
    /// same number of groups and of triangles (a cheap check against handing one
    /// scene's BVH to another's backend, not a proof).
    pub fn is_built_from(&self, scene: &Scene) -> bool {
        self.stats.groups == scene.groups.len() && self.stats.triangles == scene.triangle_count()
    }

    /// Sizes of the structure, for figures and tests: `(nodes, packets)`.
    pub fn size(&self) -> (usize, usize) {
        (self.nodes.len(), self.packets.len())
    }

    /// Whether hits on group `group` must pass the cut-out test.
    #[inline(always)]
    fn has_cutouts(&self, group: u32) -> bool {
        !self.cutout_groups.is_empty() && self.cutout_groups[group as usize]
    }

    /// Whether the hit is real: not in a hole of a cut-out, nor let through by a see-through
    /// material.
    #[inline(always)]
    fn is_solid(&self, scene: &Scene, group: u32, prim: u32, u: f32, v: f32) -> bool {
        !self.has_cutouts(group) || !scene.passes_through(group, prim, u, v)
    }

    /// The closest hit with `tmin < t < tmax`, ties broken by [`Hit::precedes`]; holes of
    /// cut-outs are no hits. `scene` must be the scene the BVH was built from (its triangles
    /// are copied inside; the argument is checked in debug builds, and read for cut-outs).
    pub fn intersect(
        &self,
        scene: &Scene,
        origin: Vec3,
        dir: Vec3,
        tmin: f32,
        tmax: f32,
    ) -> Option<Hit> {
        debug_assert_eq!(
            scene.triangle_count(),
            self.stats.triangles,
            "BVH of another scene"
        );
        let ray = RayData::new(origin, dir)?;
        self.intersect_ray(scene, &ray, tmin, tmax)
    }

    /// Tests a leaf's packets and keeps the best hit by the total order.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn closest_in_leaf(
        &self,
        scene: &Scene,
        leaf: ChildRef,
        ray: &RayData,
        ray4: &Ray4,
        tmin: f32,
        tmax: f32,
        best: &mut Option<Hit>,
    ) {
        for k in leaf.packets() {
            let packet = &self.packets[k].tri;
            let h = packet.intersect(ray4, tmin, tmax);
            let mut lanes = h.mask;
            while lanes != 0 {
                let lane = lanes.trailing_zeros() as usize;
                lanes &= lanes - 1;
                // Lanes beyond the best hit so far cannot win (a tie can: hence `<=`).
                if best.is_none_or(|b| h.t[lane] <= b.t) {
                    let (t, u, v) = h.lane(lane);
                    self.offer(scene, k, lane, t, u, v, best);
                }
            }
            let mut lanes = h.scalar;
            while lanes != 0 {
                let lane = lanes.trailing_zeros() as usize;
                lanes &= lanes - 1;
                if let Some((t, u, v)) = intersect_triangle(ray, &packet.triangle(lane), tmin, tmax)
                {
                    self.offer(scene, k, lane, t, u, v, best);
                }
            }
        }
    }

    /// Keeps the hit when it precedes the best so far and is solid (the cut-out test last:
    /// it reads a texture).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn offer(
        &self,
        scene: &Scene,
        k: usize,
        lane: usize,
        t: f32,
        u: f32,
        v: f32,
        best: &mut Option<Hit>,
    ) {
        let id = &self.packets[k].ids;
        let hit = Hit {
            group: id.group[lane],
            prim: id.prim[lane],
            t,
            u,
            v,
        };
        if best.is_none_or(|b| hit.precedes(&b)) && self.is_solid(scene, hit.group, hit.prim, u, v)
        {
            *best = Some(hit);
        }
    }

    /// [`SceneBvh::intersect`] for a prepared ray.
    ///
    /// Depth first, nearest child first. A node's children are tested against the best
    /// distance so far, inclusive (a tie can still win by the total order), and a popped
    /// entry is skipped when the best hit has moved in front of it by more than the slab
    /// test's own tolerance (the same `1 + 2 gamma(3)` factor, so a pop never culls what the
    /// node test would have let through).
    pub fn intersect_ray(&self, scene: &Scene, ray: &RayData, tmin: f32, tmax: f32) -> Option<Hit> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, the one feature the function's code may use beyond
            // the baseline.
            return unsafe { self.intersect_ray_avx2(scene, ray, tmin, tmax) };
        }
        self.intersect_ray_with::<Halves>(scene, ray, tmin, tmax)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn intersect_ray_avx2(
        &self,
        scene: &Scene,
        ray: &RayData,
        tmin: f32,
        tmax: f32,
    ) -> Option<Hit> {
        self.intersect_ray_with::<Avx>(scene, ray, tmin, tmax)
    }

    /// The traversal of [`SceneBvh::intersect_ray`], with node test `T`.
    #[inline(always)]
    fn intersect_ray_with<T: NodeTest>(
        &self,
        scene: &Scene,
        ray: &RayData,
        tmin: f32,
        tmax: f32,
    ) -> Option<Hit> {
        if self.root == ChildRef::EMPTY {
            return None;
        }
        let mut walk = Walk::new(ray, self.root, tmax);
        self.closest_step::<T, false>(scene, ray, &mut walk, &mut Stack::new(), tmin, tmax);
        walk.best
    }

    /// Visits `w.current` and moves to the next entry (with `ONE_STEP`), or walks on until
    /// the traversal is over; false when it is over (the answer is then `w.best`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn closest_step<T: NodeTest, const ONE_STEP: bool>(
        &self,
        scene: &Scene,
        ray: &RayData,
        w: &mut Walk,
        stack: &mut Stack,
        tmin: f32,
        tmax: f32,
    ) -> bool {
        loop {
            let current = w.current;
            if current.is_leaf() {
                self.closest_in_leaf(scene, current, ray, &w.ray4, tmin, tmax, &mut w.best);
                if let Some(b) = w.best {
                    w.limit = b.t;
                }
            } else {
                let node = &self.nodes[current.index()];
                let (mask, t_near) = T::entry(node, &w.ray4, tmin, w.limit);
                if mask != 0 {
                    w.current = if mask & (mask - 1) == 0 {
                        node.child[mask.trailing_zeros() as usize]
                    } else {
                        push_sorted(node, mask, &t_near, stack)
                    };
                    if ONE_STEP {
                        return true;
                    }
                    continue;
                }
            }
            let cull = w.limit * (1.0 + 2.0 * GAMMA3);
            loop {
                match stack.pop() {
                    None => return false,
                    Some((r, t)) => {
                        if t <= cull {
                            w.current = r;
                            break;
                        }
                    }
                }
            }
            if ONE_STEP {
                return true;
            }
        }
    }

    /// Whether anything lies on the ray with `tmin < t < tmax` (shadow rays).
    pub fn occluded(&self, scene: &Scene, origin: Vec3, dir: Vec3, tmin: f32, tmax: f32) -> bool {
        debug_assert_eq!(
            scene.triangle_count(),
            self.stats.triangles,
            "BVH of another scene"
        );
        match RayData::new(origin, dir) {
            Some(ray) => self.occluded_ray(scene, &ray, tmin, tmax),
            None => false,
        }
    }

    /// Whether a leaf holds a solid hit: any lane at all, or with cut-outs in the leaf's group
    /// (a leaf lies in one group), any lane that passes the cut-out test.
    #[inline(always)]
    fn any_solid_in_leaf(
        &self,
        scene: &Scene,
        leaf: ChildRef,
        ray: &RayData,
        ray4: &Ray4,
        tmin: f32,
        tmax: f32,
    ) -> bool {
        let mut packets = leaf.packets();
        let Some(first) = packets.clone().next() else {
            return false;
        };
        if !self.has_cutouts(self.packets[first].ids.group[0]) {
            return packets.any(|k| self.packets[k].tri.any_hit(ray, ray4, tmin, tmax));
        }
        packets.any(|k| {
            let packet = &self.packets[k].tri;
            let ids = &self.packets[k].ids;
            let h = packet.intersect(ray4, tmin, tmax);
            (0..4).any(|lane| {
                let hit = if h.mask & (1 << lane) != 0 {
                    Some(h.lane(lane))
                } else if h.scalar & (1 << lane) != 0 {
                    intersect_triangle(ray, &packet.triangle(lane), tmin, tmax)
                } else {
                    None
                };
                hit.is_some_and(|(_, u, v)| {
                    !scene.passes_through(ids.group[lane], ids.prim[lane], u, v)
                })
            })
        })
    }

    /// [`SceneBvh::occluded`] for a prepared ray: depth first in child order, stopping at the
    /// first solid hit found.
    pub fn occluded_ray(&self, scene: &Scene, ray: &RayData, tmin: f32, tmax: f32) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: as in intersect_ray.
            return unsafe { self.occluded_ray_avx2(scene, ray, tmin, tmax) };
        }
        self.occluded_ray_with::<Halves>(scene, ray, tmin, tmax)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn occluded_ray_avx2(&self, scene: &Scene, ray: &RayData, tmin: f32, tmax: f32) -> bool {
        self.occluded_ray_with::<Avx>(scene, ray, tmin, tmax)
    }

    /// The traversal of [`SceneBvh::occluded_ray`], with node test `T`.
    #[inline(always)]
    fn occluded_ray_with<T: NodeTest>(
        &self,
        scene: &Scene,
        ray: &RayData,
        tmin: f32,
        tmax: f32,
    ) -> bool {
        if self.root == ChildRef::EMPTY {
            return false;
        }
        let mut walk = Walk::new(ray, self.root, tmax);
        self.occluded_step::<T, false>(scene, ray, &mut walk, &mut Stack::new(), tmin, tmax)
            == Some(true)
    }

    /// Visits `w.current` and moves to the next entry (with `ONE_STEP`), or walks on until
    /// the traversal is over: `None` while it goes on, else whether the ray is blocked.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn occluded_step<T: NodeTest, const ONE_STEP: bool>(
        &self,
        scene: &Scene,
        ray: &RayData,
        w: &mut Walk,
        stack: &mut Stack,
        tmin: f32,
        tmax: f32,
    ) -> Option<bool> {
        loop {
            let current = w.current;
            if current.is_leaf() {
                if self.any_solid_in_leaf(scene, current, ray, &w.ray4, tmin, tmax) {
                    return Some(true);
                }
            } else {
                let node = &self.nodes[current.index()];
                let (mut mask, _) = T::entry(node, &w.ray4, tmin, tmax);
                if mask != 0 {
                    let first = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    while mask != 0 {
                        let i = mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        stack.push(node.child[i], 0.0);
                    }
                    w.current = node.child[first];
                    if ONE_STEP {
                        return None;
                    }
                    continue;
                }
            }
            match stack.pop() {
                Some((r, _)) => w.current = r,
                None => return Some(false),
            }
            if ONE_STEP {
                return None;
            }
        }
    }
}

/// Asks the cache for the lines of `count` values from `p` on, to be read soon. Only a hint:
/// it reads nothing, never faults whatever the address, and does nothing off x86-64.
#[inline(always)]
pub fn prefetch<T>(p: *const T, count: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (p, len) = (p as *const i8, count * size_of::<T>());
        // SAFETY: a prefetch reads nothing and never faults, whatever the address.
        unsafe {
            let mut off = 0;
            while off < len {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off));
                off += 64;
            }
            if len > 0 {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(len - 1));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, count);
}

/// Pushes the children of `node` in `mask` farthest first (at most eight: insertion sort by
/// entry distance) and returns the nearest, which is not pushed.
#[inline(always)]
fn push_sorted(node: &Node, mask: u32, t_near: &[f32; WIDTH], stack: &mut Stack) -> ChildRef {
    let mut refs = [ChildRef::EMPTY; WIDTH];
    let mut ts = [0.0f32; WIDTH];
    let mut n = 0;
    let mut m = mask;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        let (r, t) = (node.child[i], t_near[i]);
        let mut j = n;
        while j > 0 && ts[j - 1] > t {
            refs[j] = refs[j - 1];
            ts[j] = ts[j - 1];
            j -= 1;
        }
        refs[j] = r;
        ts[j] = t;
        n += 1;
    }
    for j in (1..n).rev() {
        stack.push(refs[j], ts[j]);
    }
    refs[0]
}

/// The oracle: every triangle of every group, the same triangle test, the same total order.
pub fn brute_force_intersect(
    scene: &Scene,
    origin: Vec3,
    dir: Vec3,
    tmin: f32,
    tmax: f32,
) -> Option<Hit> {
    let ray = RayData::new(origin, dir)?;
    let mut best: Option<Hit> = None;
    for (gi, g) in scene.groups.iter().enumerate() {
        for pi in 0..g.triangle_count() {
            if let Some((t, u, v)) = intersect_triangle(&ray, &g.triangle(pi), tmin, tmax)
                .filter(|&(_, u, v)| !scene.passes_through(gi as u32, pi as u32, u, v))
            {
                let hit = Hit {
                    group: gi as u32,
                    prim: pi as u32,
                    t,
                    u,
                    v,
                };
                if best.is_none_or(|b| hit.precedes(&b)) {
                    best = Some(hit);
                }
            }
        }
    }
    best
}

/// The oracle for shadow rays: any triangle with `tmin < t < tmax`.
pub fn brute_force_occluded(scene: &Scene, origin: Vec3, dir: Vec3, tmin: f32, tmax: f32) -> bool {
    let Some(ray) = RayData::new(origin, dir) else {
        return false;
    };
    scene.groups.iter().enumerate().any(|(gi, g)| {
        (0..g.triangle_count()).any(|pi| {
            intersect_triangle(&ray, &g.triangle(pi), tmin, tmax)
                .is_some_and(|(_, u, v)| !scene.passes_through(gi as u32, pi as u32, u, v))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Group, Material};

    fn group(tris: &[[Vec3; 3]]) -> Group {
        let mut g = Group {
            name: "g".into(),
            ..Default::default()
        };
        for t in tris {
            let base = g.positions.len() as u32;
            g.positions.extend_from_slice(t);
            g.indices.push([base, base + 1, base + 2]);
            g.face_materials.push(0);
        }
        g
    }

    fn scene(groups: Vec<Group>) -> Scene {
        Scene::new("test", groups, vec![Material::default_diffuse()])
    }

    /// A float in `[lo, hi)` from `k`'s hash.
    fn uniform(k: u64, lo: f32, hi: f32) -> f32 {
        let u = (crate::splitmix::mix64(k) >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// A ray for test `k`: from inside or outside the unit-ish scene, some along an axis, some
    /// from a vertex-aligned plane (origins on box faces, zero direction components).
    fn test_ray(k: u64) -> RayData {
        let at = |j: u64| uniform(k * 16 + j, -1.5, 2.5);
        let mut o = Vec3::new(at(0), at(1), at(2));
        let mut d = Vec3::new(at(3), at(4), at(5)) - Vec3::splat(0.5);
        match k % 5 {
            0 => d = [Vec3::X, -Vec3::Y, Vec3::Z][(k / 5 % 3) as usize],
            1 => (o.x, d.x) = (0.0, 0.0),
            _ => {}
        }
        RayData::new(o, d).unwrap_or_else(|| RayData::new(o, Vec3::Z).unwrap())
    }

    /// Groups of 1 to 40 random triangles, some of them tiny, in the unit cube, with two
    /// groups sharing triangles (ties).
    fn random_scene() -> Scene {
        let mut groups = Vec::new();
        for g in 0..24u64 {
            let n = 1 + (crate::splitmix::mix64(g) % 40) as usize;
            let centre = Vec3::new(
                uniform(g * 7, 0.0, 1.0),
                uniform(g * 7 + 1, 0.0, 1.0),
                uniform(g * 7 + 2, 0.0, 1.0),
            );
            let size = [0.02, 0.2, 0.6][(g % 3) as usize];
            let tris: Vec<[Vec3; 3]> = (0..n as u64)
                .map(|t| {
                    let v = |j: u64| {
                        let k = (g * 1000 + t) * 9 + j * 3;
                        centre
                            + size
                                * Vec3::new(
                                    uniform(k, -1.0, 1.0),
                                    uniform(k + 1, -1.0, 1.0),
                                    uniform(k + 2, -1.0, 1.0),
                                )
                    };
                    [v(0), v(1), v(2)]
                })
                .collect();
            groups.push(group(&tris));
        }
        groups.push(groups[3].clone());
        scene(groups)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx_entry(node: &Node, ray: &Ray4, tmin: f32, tmax: f32) -> (u32, [f32; WIDTH]) {
        Avx::entry(node, ray, tmin, tmax)
    }

    /// The eight-lane AVX node test gives the two four-lane halves' mask and entry distances
    /// bit for bit, NaN slabs and empty slots included.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn node_tests_agree_bit_for_bit() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut nan_slabs = 0;
        for k in 0..4000u64 {
            let mut node = Node::EMPTY;
            for i in 0..(k % 9) as usize {
                let c = |j: u64| uniform(k * 64 + i as u64 * 8 + j, -1.0, 2.0);
                let mut lo = [c(0), c(1), c(2)];
                if k % 5 == 1 && i == 0 {
                    // On the plane x = 0 that test_ray's origin lies in, parallel to it:
                    // (0 - 0) * inf is a NaN slab.
                    lo[0] = 0.0;
                }
                let hi = [0, 1, 2]
                    .map(|a| lo[a] + uniform(k * 64 + i as u64 * 8 + 3 + a as u64, 0.0, 1.0));
                node.set(i, lo, hi, ChildRef::node(i as u32));
            }
            let ray = test_ray(k);
            let ray4 = Ray4::new(&ray);
            let tmax = [f32::INFINITY, 1.0, 0.25][(k % 3) as usize];
            let (m0, t0) = Halves::entry(&node, &ray4, 0.0, tmax);
            // SAFETY: the CPU has AVX2 (checked above).
            let (m1, t1) = unsafe { avx_entry(&node, &ray4, 0.0, tmax) };
            assert_eq!(m0, m1, "ray {k}");
            assert_eq!(t0.map(f32::to_bits), t1.map(f32::to_bits), "ray {k}");
            // A NaN slab is ignored: lane 0 keeps a number where it would be NaN.
            nan_slabs += (k % 5 == 1 && k % 9 > 0 && m0 & 1 != 0) as u32;
        }
        assert!(nan_slabs > 20, "{nan_slabs} boxes hit through a NaN slab");
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx_traversals(
        bvh: &SceneBvh,
        scene: &Scene,
        ray: &RayData,
        tmax: f32,
    ) -> (Option<Hit>, bool) {
        (
            bvh.intersect_ray_with::<Avx>(scene, ray, 0.0, f32::INFINITY),
            bvh.occluded_ray_with::<Avx>(scene, ray, 0.0, tmax),
        )
    }

    /// Both node tests' traversals find what brute force finds: the same closest hit, bit for
    /// bit, and the same occlusion.
    #[test]
    fn traversals_with_either_node_test_agree_with_brute_force() {
        let scene = random_scene();
        let bvh = SceneBvh::build(&scene);
        assert!(bvh.size().0 > 4, "a tree of several levels");
        let bits = |h: Option<Hit>| {
            h.map(|h| (h.group, h.prim, h.t.to_bits(), h.u.to_bits(), h.v.to_bits()))
        };
        let (mut hits, mut blocks) = (0, 0);
        for k in 0..3000u64 {
            let ray = test_ray(k);
            let tmax = [f32::INFINITY, 0.5][(k % 2) as usize];
            let expected = brute_force_intersect(&scene, ray.origin, ray.dir, 0.0, f32::INFINITY);
            let blocked = brute_force_occluded(&scene, ray.origin, ray.dir, 0.0, tmax);
            hits += expected.is_some() as u32;
            blocks += blocked as u32;
            let halves = bvh.intersect_ray_with::<Halves>(&scene, &ray, 0.0, f32::INFINITY);
            assert_eq!(bits(halves), bits(expected), "ray {k}");
            assert_eq!(
                bvh.occluded_ray_with::<Halves>(&scene, &ray, 0.0, tmax),
                blocked,
                "ray {k}"
            );
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                let (hit, occluded) = unsafe { avx_traversals(&bvh, &scene, &ray, tmax) };
                assert_eq!(bits(hit), bits(expected), "ray {k}");
                assert_eq!(occluded, blocked, "ray {k}");
            }
        }
        assert!(
            (300..2700).contains(&hits) && blocks > 200,
            "{hits} hits, {blocks} blocked"
        );
    }

    #[test]
    fn batches_agree_with_brute_force_either_way() {
        let scene = random_scene();
        let bvh = SceneBvh::build(&scene);
        let bits = |h: &Option<Hit>| {
            h.map(|h| (h.group, h.prim, h.t.to_bits(), h.u.to_bits(), h.v.to_bits()))
        };
        let rays: Vec<RayData> = (0..3000).map(test_ray).collect();
        let tmax: Vec<f32> = (0..3000).map(|k| [f32::INFINITY, 0.5][k % 2]).collect();
        let expected: Vec<_> = rays
            .iter()
            .map(|r| brute_force_intersect(&scene, r.origin, r.dir, 0.0, f32::INFINITY))
            .collect();
        let blocked: Vec<bool> = rays
            .iter()
            .zip(&tmax)
            .map(|(r, &t)| brute_force_occluded(&scene, r.origin, r.dir, 0.0, t))
            .collect();
        for how in [BatchTrace::OneAfterAnother, BatchTrace::Interleaved] {
            // Fewer rays than lanes, a few lanes' worth, and many refills.
            for n in [1, 5, 37, 3000] {
                let mut hits = vec![None; n];
                bvh.intersect_rays(&scene, &rays[..n], (0.0, f32::INFINITY), how, &mut hits);
                for (k, (hit, want)) in hits.iter().zip(&expected).enumerate() {
                    assert_eq!(bits(hit), bits(want), "{how:?}, {n} rays, ray {k}");
                }
                let mut out = vec![false; n];
                bvh.occluded_rays(&scene, &rays[..n], (0.0, &tmax[..n]), how, &mut out);
                assert_eq!(out, blocked[..n], "{how:?}, {n} rays");
            }
        }
        let empty = self::scene(vec![group(&[])]);
        let none = SceneBvh::build(&empty);
        for how in [BatchTrace::OneAfterAnother, BatchTrace::Interleaved] {
            let mut hits = vec![Some(expected.iter().flatten().copied().next().unwrap()); 3];
            none.intersect_rays(&empty, &rays[..3], (0.0, f32::INFINITY), how, &mut hits);
            assert_eq!(hits, vec![None; 3]);
            let mut out = vec![true; 3];
            none.occluded_rays(&empty, &rays[..3], (0.0, &tmax[..3]), how, &mut out);
            assert_eq!(out, vec![false; 3]);
        }
    }

    #[test]
    fn prefetches_of_any_address_do_not_fault() {
        prefetch(std::ptr::null::<Node>(), 3);
        prefetch(usize::MAX as *const u8, 1);
        prefetch(std::ptr::NonNull::<Packet>::dangling().as_ptr(), 0);
    }

    #[test]
    fn triangle_test_returns_barycentrics_of_vertices_1_and_2() {
        let tri = [Vec3::ZERO, Vec3::X, Vec3::Y];
        let ray = RayData::new(Vec3::new(0.25, 0.5, 2.0), -Vec3::Z).unwrap();
        let (t, u, v) = intersect_triangle(&ray, &tri, 0.0, f32::INFINITY).unwrap();
        assert_eq!((t, u, v), (2.0, 0.25, 0.5));
        // Back face too, and the interval is open.
        let ray = RayData::new(Vec3::new(0.25, 0.5, -2.0), Vec3::Z).unwrap();
        assert!(intersect_triangle(&ray, &tri, 0.0, 2.0).is_none());
        assert!(intersect_triangle(&ray, &tri, 0.0, 2.5).is_some());
        assert!(intersect_triangle(&ray, &tri, 2.0, 2.5).is_none());
    }

    #[test]
    fn axis_parallel_rays_on_box_faces_are_not_culled() {
        // A unit square in the z = 0 plane, and a wall at x = 1: rays lying exactly in the
        // plane y = 0 (a face of the square's box) travelling along +x must hit the wall.
        let floor = [
            [
                Vec3::ZERO,
                Vec3::new(1.0, 0.0, 0.0),
                Vec3::new(1.0, 0.0, 1.0),
            ],
            [
                Vec3::ZERO,
                Vec3::new(1.0, 0.0, 1.0),
                Vec3::new(0.0, 0.0, 1.0),
            ],
        ];
        let wall = [
            [
                Vec3::new(2.0, -1.0, -1.0),
                Vec3::new(2.0, 1.0, -1.0),
                Vec3::new(2.0, 1.0, 2.0),
            ],
            [
                Vec3::new(2.0, -1.0, -1.0),
                Vec3::new(2.0, 1.0, 2.0),
                Vec3::new(2.0, -1.0, 2.0),
            ],
        ];
        let s = scene(vec![group(&floor), group(&wall)]);
        let bvh = SceneBvh::build(&s);
        for o in [
            Vec3::new(0.5, 0.0, 0.5),
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(1.0, 0.0, 1.0),
        ] {
            let h = bvh.intersect(&s, o, Vec3::X, 0.0, f32::INFINITY);
            assert_eq!(h, brute_force_intersect(&s, o, Vec3::X, 0.0, f32::INFINITY));
            assert_eq!(h.map(|h| h.group), Some(1), "{o}");
        }
    }

    #[test]
    fn ties_go_to_the_smaller_group_then_prim() {
        // The same triangle three times, in groups 2, 1 and 1 (prims 0 and 1).
        let t = [
            Vec3::new(-1.0, -1.0, 0.0),
            Vec3::new(1.0, -1.0, 0.0),
            Vec3::new(0.0, 1.0, 0.0),
        ];
        let s = scene(vec![group(&[]), group(&[t, t]), group(&[t])]);
        let bvh = SceneBvh::build(&s);
        let h = bvh
            .intersect(&s, Vec3::new(0.0, 0.0, 1.0), -Vec3::Z, 0.0, f32::INFINITY)
            .unwrap();
        assert_eq!((h.group, h.prim, h.t), (1, 0, 1.0));
        assert!(bvh.occluded(&s, Vec3::new(0.0, 0.0, 1.0), -Vec3::Z, 0.0, 1.5));
        assert!(!bvh.occluded(&s, Vec3::new(0.0, 0.0, 1.0), -Vec3::Z, 0.0, 1.0));
    }

    #[test]
    fn empty_scenes_and_bad_rays_miss() {
        let s = scene(vec![group(&[])]);
        let bvh = SceneBvh::build(&s);
        assert!(bvh
            .intersect(&s, Vec3::ZERO, Vec3::X, 0.0, f32::INFINITY)
            .is_none());
        let t = [Vec3::ZERO, Vec3::X, Vec3::Y];
        let s = scene(vec![group(&[t])]);
        let bvh = SceneBvh::build(&s);
        assert!(bvh
            .intersect(&s, Vec3::ZERO, Vec3::ZERO, 0.0, 1.0)
            .is_none());
        assert!(bvh.intersect(&s, Vec3::NAN, Vec3::Z, 0.0, 1.0).is_none());
        assert!(!bvh.occluded(&s, Vec3::ZERO, Vec3::new(f32::NAN, 0.0, 1.0), 0.0, 1.0));
    }
}
