//! The CPU acceleration structure: two levels, like the GPU design.
//!
//! - Bottom level: one binary BVH per [`Group`] (the unit of builds, as a GAS is on the GPU),
//!   built in parallel over the groups with rayon.
//! - Top level: a binary BVH over the groups' bounds.
//!
//! The trees are *built* by `obvhs` (PLOC, reinsertion and leaf collapsing), then copied into
//! a compact node layout and traversed by the code here. obvhs's own traversals are not used
//! because the reference must agree *exactly* with brute force, and they cannot promise it:
//! its `Bvh2` traversal culls children with a strict `t_near < t_max` (so a tie at the current
//! closest distance can be skipped, and ties must be settled by a total order), its ray setup
//! replaces direction components smaller than `f32::EPSILON` by `±1/EPSILON` (so a nearly
//! axis-parallel ray sees slightly wrong slabs), and its `CwBvh` node test clamps the entry
//! distance to a fixed `1e-4`, which culls hits closer than that.
//!
//! Exactness (the property the tests check against [`brute_force_intersect`]):
//! - one triangle test, [`intersect_triangle`] (the watertight test of Woop, Benthin and Wald,
//!   JCGT 2013), is used by both, with the same vertex values in the same order, so a
//!   triangle's `t`, `u`, `v` are bit-identical whichever finds it;
//! - ties are broken by a total order: smaller `t`, then smaller group, then smaller prim;
//!   the traversal visits nodes whose entry distance is `<=` the best `t` so far;
//! - culling is conservative: leaf boxes are padded by `2^-16` times the scene's largest
//!   coordinate magnitude (far above the rounding of the triangle test for ray origins within
//!   the scene's scale), and the slab test is the robust one of Ize ("Robust BVH Ray
//!   Traversal", JCGT 2013): the exit distance is scaled by `1 + 2 gamma(3)`, zero direction
//!   components give infinite slabs, and a NaN slab (origin on the plane of a face, direction
//!   parallel to it) constrains nothing.

use std::cell::Cell;
use std::time::{Duration, Instant};

use glam::{Vec3, Vec3A};
use obvhs::{aabb::Aabb, bvh2::builder::build_bvh2, BvhBuildParams};
use rayon::prelude::*;

use crate::scene::{Group, Scene};

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
const GAMMA3: f32 = 3.0 * f32::EPSILON * 0.5 / (1.0 - 3.0 * f32::EPSILON * 0.5);

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
        if !origin.is_finite() || !dir.is_finite() || dir == Vec3::ZERO {
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

/// A node of either level: a box and either two children (`count == 0`, children at `first`
/// and `first + 1`) or a leaf of `count` primitives starting at `first`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Node {
    min: [f32; 3],
    count: u32,
    max: [f32; 3],
    first: u32,
}

impl Node {
    /// The robust slab test: the entry distance when the ray's interval `[tmin, tmax]` meets
    /// the box, `INFINITY` otherwise.
    #[inline(always)]
    fn entry(&self, ray: &RayData, tmin: f32, tmax: f32) -> f32 {
        let mut t_near = tmin;
        let mut t_far = tmax;
        for a in 0..3 {
            let inv = ray.inv_dir[a];
            // Near and far planes chosen by the direction's sign: a NaN (0 * inf) stays a NaN
            // and is then ignored by f32::max/min, which is the right answer for a ray lying in
            // the plane of a face.
            let (near_p, far_p) = if inv < 0.0 {
                (self.max[a], self.min[a])
            } else {
                (self.min[a], self.max[a])
            };
            t_near = t_near.max((near_p - ray.origin[a]) * inv);
            t_far = t_far.min((far_p - ray.origin[a]) * inv);
        }
        if t_near <= t_far * (1.0 + 2.0 * GAMMA3) {
            t_near
        } else {
            f32::INFINITY
        }
    }
}

/// A fixed traversal stack that spills to the heap for unusually deep trees.
struct Stack {
    fixed: [u32; 64],
    len: usize,
    spill: Vec<u32>,
}

impl Stack {
    #[inline(always)]
    fn new() -> Stack {
        Stack {
            fixed: [0; 64],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn push(&mut self, v: u32) {
        if self.len < self.fixed.len() {
            self.fixed[self.len] = v;
            self.len += 1;
        } else {
            self.spill.push(v);
        }
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<u32> {
        if let Some(v) = self.spill.pop() {
            return Some(v);
        }
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.fixed[self.len])
    }
}

/// A binary tree in the compact layout, with its primitives in leaf order.
#[derive(Clone, Debug, Default)]
struct Tree {
    nodes: Vec<Node>,
    /// `prims[slot]` is the original index of the primitive at leaf slot `slot`.
    prims: Vec<u32>,
}

impl Tree {
    /// Builds with obvhs from one (padded) box per primitive.
    fn build(boxes: &[Aabb], params: BvhBuildParams) -> Tree {
        if boxes.is_empty() {
            return Tree::default();
        }
        if boxes.len() == 1 {
            // A single leaf; obvhs needs at least two primitives to make a tree.
            let b = boxes[0];
            return Tree {
                nodes: vec![Node {
                    min: b.min.into(),
                    count: 1,
                    max: b.max.into(),
                    first: 0,
                }],
                prims: vec![0],
            };
        }
        let bvh = build_bvh2(boxes, params, &mut Duration::default());
        let nodes = bvh
            .nodes
            .iter()
            .map(|n| Node {
                min: n.aabb().min.into(),
                count: n.prim_count,
                max: n.aabb().max.into(),
                first: n.first_index,
            })
            .collect();
        Tree {
            nodes,
            prims: bvh.primitive_indices,
        }
    }

    /// Visits, nearest child first, every leaf whose box meets `[tmin, limit()]`;
    /// `visit(slot_range)` returns false to stop. `limit` is re-read after every leaf, so a
    /// closest-hit search shrinks it as it goes.
    #[inline(always)]
    fn traverse(
        &self,
        ray: &RayData,
        tmin: f32,
        mut limit: impl FnMut() -> f32,
        mut visit: impl FnMut(std::ops::Range<usize>) -> bool,
    ) {
        if self.nodes.is_empty() || self.nodes[0].entry(ray, tmin, limit()) == f32::INFINITY {
            return;
        }
        let mut stack = Stack::new();
        let mut current = 0u32;
        loop {
            let node = &self.nodes[current as usize];
            if node.count > 0 {
                let first = node.first as usize;
                if !visit(first..first + node.count as usize) {
                    return;
                }
            } else {
                let tmax = limit();
                let l = node.first;
                let r = node.first + 1;
                let tl = self.nodes[l as usize].entry(ray, tmin, tmax);
                let tr = self.nodes[r as usize].entry(ray, tmin, tmax);
                let (near, far, t_near, t_far) = if tl <= tr {
                    (l, r, tl, tr)
                } else {
                    (r, l, tr, tl)
                };
                if t_near != f32::INFINITY {
                    if t_far != f32::INFINITY {
                        stack.push(far);
                    }
                    current = near;
                    continue;
                }
            }
            match stack.pop() {
                Some(n) => current = n,
                None => return,
            }
        }
    }
}

/// One group's tree and its triangles, copied in leaf order for locality.
#[derive(Clone, Debug, Default)]
struct Blas {
    tree: Tree,
    tris: Vec<[Vec3; 3]>,
}

/// The two-level BVH of a scene.
#[derive(Clone, Debug, Default)]
pub struct SceneBvh {
    /// Top level over the non-empty groups; `tlas.prims[slot]` indexes `tlas_groups`.
    tlas: Tree,
    /// The group index of each top-level primitive.
    tlas_groups: Vec<u32>,
    /// One per scene group (empty for groups without triangles).
    blas: Vec<Blas>,
    stats: BuildStats,
}

/// Build parameters of the per-group trees: obvhs's "fast build" preset (PLOC with a short
/// search, a little reinsertion, leaves of up to 8 triangles).
fn blas_params() -> BvhBuildParams {
    BvhBuildParams::fast_build()
}

/// The top level has few primitives: spend more time for a better tree, one group per leaf.
fn tlas_params() -> BvhBuildParams {
    BvhBuildParams {
        max_prims_per_leaf: 1,
        ..BvhBuildParams::medium_build()
    }
}

/// The largest coordinate magnitude of the scene's vertices (1 for an empty scene), computed
/// in parallel over the groups.
fn scene_magnitude(scene: &Scene) -> f32 {
    let m = scene
        .groups
        .par_iter()
        .map(|g| {
            g.positions
                .iter()
                .fold(0.0f32, |m, p| m.max(p.abs().max_element()))
        })
        .reduce(|| 0.0, f32::max);
    if m > 0.0 && m.is_finite() {
        m
    } else {
        1.0
    }
}

fn triangle_box(tri: &[Vec3; 3], pad: f32) -> Aabb {
    let lo = tri[0].min(tri[1]).min(tri[2]) - Vec3::splat(pad);
    let hi = tri[0].max(tri[1]).max(tri[2]) + Vec3::splat(pad);
    Aabb::new(Vec3A::from(lo), Vec3A::from(hi))
}

fn build_blas(group: &Group, pad: f32) -> Blas {
    let tris: Vec<[Vec3; 3]> = (0..group.triangle_count())
        .map(|i| group.triangle(i))
        .collect();
    let boxes: Vec<Aabb> = tris.iter().map(|t| triangle_box(t, pad)).collect();
    let tree = Tree::build(&boxes, blas_params());
    let tris = tree.prims.iter().map(|&p| tris[p as usize]).collect();
    Blas { tree, tris }
}

impl SceneBvh {
    pub fn build(scene: &Scene) -> SceneBvh {
        SceneBvh::build_with_stats(scene).0
    }

    /// Builds both levels and reports how long it took.
    pub fn build_with_stats(scene: &Scene) -> (SceneBvh, BuildStats) {
        let start = Instant::now();
        let pad = scene_magnitude(scene) * PAD_RELATIVE;
        let blas: Vec<Blas> = scene
            .groups
            .par_iter()
            .map(|g| build_blas(g, pad))
            .collect();
        let mut tlas_groups = Vec::new();
        let mut boxes = Vec::new();
        for (gi, b) in blas.iter().enumerate() {
            if let Some(root) = b.tree.nodes.first() {
                tlas_groups.push(gi as u32);
                boxes.push(Aabb::new(Vec3A::from(root.min), Vec3A::from(root.max)));
            }
        }
        let tlas = Tree::build(&boxes, tlas_params());
        let stats = BuildStats {
            triangles: scene.triangle_count(),
            groups: scene.groups.len(),
            seconds: start.elapsed().as_secs_f64(),
        };
        let bvh = SceneBvh {
            tlas,
            tlas_groups,
            blas,
            stats,
        };
        (bvh, stats)
    }

    pub fn stats(&self) -> BuildStats {
        self.stats
    }

    /// The closest hit with `tmin < t < tmax`, ties broken by [`Hit::precedes`]. `scene` must
    /// be the scene the BVH was built from (its triangles are copied inside; the argument is
    /// checked in debug builds).
    pub fn intersect(
        &self,
        scene: &Scene,
        origin: Vec3,
        dir: Vec3,
        tmin: f32,
        tmax: f32,
    ) -> Option<Hit> {
        debug_assert_eq!(scene.groups.len(), self.blas.len(), "BVH of another scene");
        let ray = RayData::new(origin, dir)?;
        self.intersect_ray(&ray, tmin, tmax)
    }

    /// [`SceneBvh::intersect`] for a prepared ray.
    pub fn intersect_ray(&self, ray: &RayData, tmin: f32, tmax: f32) -> Option<Hit> {
        // Both levels read the best hit so far as their culling distance (inclusive, so that
        // a tie can still win by the total order) and the leaf visitor updates it.
        let best = Cell::new(None::<Hit>);
        let limit = || best.get().map_or(tmax, |h| h.t);
        self.tlas.traverse(ray, tmin, limit, |slots| {
            for slot in slots {
                let group = self.tlas_groups[self.tlas.prims[slot] as usize];
                let blas = &self.blas[group as usize];
                blas.tree.traverse(ray, tmin, limit, |tri_slots| {
                    for ts in tri_slots {
                        if let Some((t, u, v)) = intersect_triangle(ray, &blas.tris[ts], tmin, tmax)
                        {
                            let hit = Hit {
                                group,
                                prim: blas.tree.prims[ts],
                                t,
                                u,
                                v,
                            };
                            if best.get().is_none_or(|b| hit.precedes(&b)) {
                                best.set(Some(hit));
                            }
                        }
                    }
                    true
                });
            }
            true
        });
        best.get()
    }

    /// Whether anything lies on the ray with `tmin < t < tmax` (shadow rays).
    pub fn occluded(&self, scene: &Scene, origin: Vec3, dir: Vec3, tmin: f32, tmax: f32) -> bool {
        debug_assert_eq!(scene.groups.len(), self.blas.len(), "BVH of another scene");
        match RayData::new(origin, dir) {
            Some(ray) => self.occluded_ray(&ray, tmin, tmax),
            None => false,
        }
    }

    /// [`SceneBvh::occluded`] for a prepared ray.
    pub fn occluded_ray(&self, ray: &RayData, tmin: f32, tmax: f32) -> bool {
        let mut found = false;
        self.tlas.traverse(
            ray,
            tmin,
            || tmax,
            |slots| {
                for slot in slots {
                    let group = self.tlas_groups[self.tlas.prims[slot] as usize];
                    let blas = &self.blas[group as usize];
                    blas.tree.traverse(
                        ray,
                        tmin,
                        || tmax,
                        |tri_slots| {
                            found = tri_slots.into_iter().any(|ts| {
                                intersect_triangle(ray, &blas.tris[ts], tmin, tmax).is_some()
                            });
                            !found
                        },
                    );
                    if found {
                        return false;
                    }
                }
                true
            },
        );
        found
    }
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
            if let Some((t, u, v)) = intersect_triangle(&ray, &g.triangle(pi), tmin, tmax) {
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
    scene.groups.iter().any(|g| {
        (0..g.triangle_count())
            .any(|pi| intersect_triangle(&ray, &g.triangle(pi), tmin, tmax).is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Material;

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
