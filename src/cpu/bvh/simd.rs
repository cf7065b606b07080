//! The two kernels of the traversal: the slab test of a node's eight child boxes ([`Halves`]:
//! two four-lane halves with `wide::f32x4`, SSE on x86-64, NEON on AArch64, plain arrays
//! elsewhere; [`Avx`]: one eight-lane AVX test where the CPU has it), and the watertight test
//! of a packet of four triangles (`wide::f32x4`).
//!
//! Both compute, lane by lane, *the same IEEE operations in the same order* as their scalar
//! references ([`NodeTest::entry`] mirrors the scalar slab test, `RayData::box_entry`;
//! [`TriPacket::intersect`] mirrors [`super::intersect_triangle`]): additions, subtractions, multiplications and
//! divisions are correctly rounded in every lane, and nothing is fused into an FMA (Rust never
//! contracts, and `wide`'s `+`/`*` are separate instructions). So a lane's `t`, `e1`, `e2`,
//! `det` are bit-identical to the scalar code's, and the one place where the scalar test
//! changes precision (an edge function that rounds to exactly zero is recomputed in `f64`) is
//! handed back to the scalar test for that lane.

use bytemuck::Zeroable;
use wide::{f32x4, CmpEq, CmpGt, CmpLe, CmpLt};

use super::{RayData, GAMMA3};

/// A ray's values splatted over four lanes, made once per traversal.
pub(super) struct Ray4 {
    o: [f32x4; 3],
    inv: [f32x4; 3],
    /// Per axis, the index in [`Node::planes`] of the near plane (`2 axis`, or `2 axis + 1`
    /// when `1 / dir` is negative) and of the far plane (the other one).
    near: [usize; 3],
    far: [usize; 3],
    kx: usize,
    ky: usize,
    kz: usize,
    sx: f32x4,
    sy: f32x4,
    sz: f32x4,
}

impl Ray4 {
    #[inline(always)]
    pub fn new(r: &RayData) -> Ray4 {
        Ray4 {
            o: [
                f32x4::splat(r.origin.x),
                f32x4::splat(r.origin.y),
                f32x4::splat(r.origin.z),
            ],
            inv: [
                f32x4::splat(r.inv_dir.x),
                f32x4::splat(r.inv_dir.y),
                f32x4::splat(r.inv_dir.z),
            ],
            near: [
                (r.inv_dir.x < 0.0) as usize,
                2 + (r.inv_dir.y < 0.0) as usize,
                4 + (r.inv_dir.z < 0.0) as usize,
            ],
            far: [
                (r.inv_dir.x >= 0.0) as usize,
                2 + (r.inv_dir.y >= 0.0) as usize,
                4 + (r.inv_dir.z >= 0.0) as usize,
            ],
            kx: r.kx,
            ky: r.ky,
            kz: r.kz,
            sx: f32x4::splat(r.sx),
            sy: f32x4::splat(r.sy),
            sz: f32x4::splat(r.sz),
        }
    }
}

/// A child slot of a [`Node`], packed in a `u32`:
/// - `EMPTY` (all ones): an unused slot (its box is empty, so the slab test never passes);
/// - bit 31 clear: an inner node, the index into the node array;
/// - bit 31 set: a leaf of `((bits >> 28) & 7) + 1` consecutive [`TriPacket`]s starting at
///   packet `bits & (2^28 - 1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Zeroable)]
#[repr(transparent)]
pub(super) struct ChildRef(pub u32);

/// The most packets one leaf can name (3 bits of count).
pub(super) const MAX_LEAF_PACKETS: u32 = 8;
/// The most packets a BVH can hold (28 bits of index): 2^30 triangles.
pub(super) const MAX_PACKETS: u32 = 1 << 28;
const LEAF_BIT: u32 = 1 << 31;
const INDEX_MASK: u32 = MAX_PACKETS - 1;

impl ChildRef {
    pub const EMPTY: ChildRef = ChildRef(u32::MAX);

    #[inline(always)]
    pub fn node(index: u32) -> ChildRef {
        debug_assert!(index < LEAF_BIT);
        ChildRef(index)
    }

    /// A leaf of `count` (1 to [`MAX_LEAF_PACKETS`]) packets from `first`.
    #[inline(always)]
    pub fn leaf(first: u32, count: u32) -> ChildRef {
        debug_assert!((1..=MAX_LEAF_PACKETS).contains(&count) && first < MAX_PACKETS);
        ChildRef(LEAF_BIT | (count - 1) << 28 | first)
    }

    #[inline(always)]
    pub fn is_leaf(self) -> bool {
        self.0 & LEAF_BIT != 0
    }

    /// The node index (inner nodes only).
    #[inline(always)]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The packet range (leaves only).
    #[inline(always)]
    pub fn packets(self) -> std::ops::Range<usize> {
        let first = (self.0 & INDEX_MASK) as usize;
        first..first + ((self.0 >> 28) & 7) as usize + 1
    }

    /// The same reference with its node index moved by `nodes`, or its packet index by
    /// `packets` (for concatenating per-group arrays).
    #[inline]
    pub fn offset(self, nodes: u32, packets: u32) -> ChildRef {
        if self == ChildRef::EMPTY {
            self
        } else if self.is_leaf() {
            ChildRef(self.0 + packets)
        } else {
            ChildRef(self.0 + nodes)
        }
    }
}

/// Children per node.
pub(super) const WIDTH: usize = 8;

/// A node with eight children: their boxes, plane by plane, a lane per child (structure of
/// arrays, so one slab test covers all of them), and their references: 224 bytes, aligned
/// for AVX loads (32 bytes; padding to a 256-byte cache-line multiple measured no faster and
/// took 2 to 3% more memory).
#[derive(Clone, Copy, Debug, Zeroable)]
#[repr(C, align(32))]
pub(super) struct Node {
    /// `planes[2 axis]` = the boxes' low bounds on `axis`, `planes[2 axis + 1]` the high
    /// bounds: lane `i` (half `i / 4`, lane `i % 4`) is child `i`'s box. Unused lanes hold the
    /// empty box (`+inf`, `-inf`).
    pub planes: [[f32x4; 2]; 6],
    pub child: [ChildRef; WIDTH],
}

/// `max` and `min` that keep the accumulator when the new value is a NaN, as `f32::max` and
/// `f32::min` do. On SSE `maxps(v, acc)` returns its second operand whenever the comparison
/// is unordered, so putting the possibly-NaN value first costs nothing; elsewhere `wide`'s
/// NaN-ignoring `max`/`min` do it.
#[inline(always)]
fn max_keep(acc: f32x4, v: f32x4) -> f32x4 {
    #[cfg(target_feature = "sse")]
    {
        v.fast_max(acc)
    }
    #[cfg(not(target_feature = "sse"))]
    {
        acc.max(v)
    }
}

#[inline(always)]
fn min_keep(acc: f32x4, v: f32x4) -> f32x4 {
    #[cfg(target_feature = "sse")]
    {
        v.fast_min(acc)
    }
    #[cfg(not(target_feature = "sse"))]
    {
        acc.min(v)
    }
}

/// How a traversal tests a node's eight boxes: [`Halves`] (two four-lane tests, any CPU) or
/// [`Avx`] (one eight-lane test). Both give bit-identical answers.
pub(super) trait NodeTest {
    /// The robust slab test of Ize ("Robust BVH Ray Traversal", JCGT 2013) on the eight
    /// child boxes at once, for the ray interval `[tmin, tmax]`:
    /// ```text
    /// per axis a, with (near, far) = inv_dir[a] < 0 ? (hi, lo) : (lo, hi):
    ///     t_near = max(t_near, (near - origin[a]) * inv_dir[a])    (a NaN slab is ignored)
    ///     t_far  = min(t_far,  (far  - origin[a]) * inv_dir[a])
    /// hit = t_near <= t_far * (1 + 2 gamma(3))
    /// ```
    /// A NaN slab comes from `0 * inf`: the origin on the plane of a face and the direction
    /// parallel to it, where the slab constrains nothing. Returns the bit mask of the lanes
    /// that hit (bit `i` for child `i`) and the entry distances `t_near`.
    fn entry(node: &Node, ray: &Ray4, tmin: f32, tmax: f32) -> (u32, [f32; WIDTH]);
}

/// The node test as two four-lane halves (SSE on x86-64, NEON on AArch64).
pub(super) struct Halves;

impl NodeTest for Halves {
    #[inline(always)]
    fn entry(node: &Node, ray: &Ray4, tmin: f32, tmax: f32) -> (u32, [f32; WIDTH]) {
        let mut mask = 0;
        let mut t = [0.0; WIDTH];
        for h in 0..2 {
            let mut t_near = f32x4::splat(tmin);
            let mut t_far = f32x4::splat(tmax);
            for a in 0..3 {
                // Chosen by index, not by a branch on the direction's sign.
                let near = node.planes[ray.near[a]][h];
                let far = node.planes[ray.far[a]][h];
                t_near = max_keep(t_near, (near - ray.o[a]) * ray.inv[a]);
                t_far = min_keep(t_far, (far - ray.o[a]) * ray.inv[a]);
            }
            let hit = t_near.cmp_le(t_far * f32x4::splat(1.0 + 2.0 * GAMMA3));
            mask |= (hit.move_mask() as u32) << (4 * h);
            t[4 * h..4 * h + 4].copy_from_slice(t_near.as_array_ref());
        }
        (mask, t)
    }
}

/// The node test in one eight-lane AVX pass. Only for code compiled with AVX enabled (a
/// function with `#[target_feature(enable = "avx2")]` that the traversal is inlined into),
/// run on a CPU that has it.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx;

#[cfg(target_arch = "x86_64")]
impl NodeTest for Avx {
    #[inline(always)]
    fn entry(node: &Node, ray: &Ray4, tmin: f32, tmax: f32) -> (u32, [f32; WIDTH]) {
        use std::arch::x86_64::*;
        let planes = &node.planes;
        let mut t = [0.0; WIDTH];
        // SAFETY: only reached from the traversal's AVX2 entry points, which run where the
        // CPU has AVX2 (checked before the call); each plane is 8 floats at a multiple of 32
        // bytes in the 32-byte aligned node. `max(v, acc)`/`min(v, acc)` return `acc` for a NaN
        // `v`, as the SSE halves do; `_CMP_LE_OQ` is false for NaN, as SSE's `cmpleps` is.
        unsafe {
            let mut t_near = _mm256_set1_ps(tmin);
            let mut t_far = _mm256_set1_ps(tmax);
            for a in 0..3 {
                let o = _mm256_set1_ps(ray.o[a].as_array_ref()[0]);
                let inv = _mm256_set1_ps(ray.inv[a].as_array_ref()[0]);
                let near = _mm256_load_ps(planes[ray.near[a]].as_ptr() as *const f32);
                let far = _mm256_load_ps(planes[ray.far[a]].as_ptr() as *const f32);
                t_near = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(near, o), inv), t_near);
                t_far = _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(far, o), inv), t_far);
            }
            let scaled = _mm256_mul_ps(t_far, _mm256_set1_ps(1.0 + 2.0 * GAMMA3));
            let hit = _mm256_cmp_ps::<_CMP_LE_OQ>(t_near, scaled);
            _mm256_storeu_ps(t.as_mut_ptr(), t_near);
            (_mm256_movemask_ps(hit) as u32, t)
        }
    }
}

impl Node {
    /// A node whose slots are all empty.
    pub const EMPTY: Node = Node {
        planes: [
            [f32x4::new([f32::INFINITY; 4]); 2],
            [f32x4::new([f32::NEG_INFINITY; 4]); 2],
            [f32x4::new([f32::INFINITY; 4]); 2],
            [f32x4::new([f32::NEG_INFINITY; 4]); 2],
            [f32x4::new([f32::INFINITY; 4]); 2],
            [f32x4::new([f32::NEG_INFINITY; 4]); 2],
        ],
        child: [ChildRef::EMPTY; WIDTH],
    };

    /// Sets slot `i` to a child with box `[lo, hi]`.
    pub fn set(&mut self, i: usize, lo: [f32; 3], hi: [f32; 3], child: ChildRef) {
        for a in 0..3 {
            self.planes[2 * a][i / 4].as_array_mut()[i % 4] = lo[a];
            self.planes[2 * a + 1][i / 4].as_array_mut()[i % 4] = hi[a];
        }
        self.child[i] = child;
    }
}

/// Four triangles, structure of arrays: `v[vertex][axis]` holds that coordinate of the four
/// triangles, one per lane. A leaf's last packet is padded with copies of its last triangle
/// (same ids too), which can only repeat a hit already found, never add one.
#[derive(Clone, Copy, Debug, Zeroable)]
#[repr(C, align(16))]
pub(super) struct TriPacket {
    pub v: [[f32x4; 3]; 3],
}

/// A leaf's unit: four triangles and who they are (176 bytes). The ids sit right after the
/// vertices, so a hit reads them from the lines the test just loaded or the next one, not
/// from another array.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub(super) struct Packet {
    pub tri: TriPacket,
    pub ids: PacketIds,
}

/// Who the lanes of a [`TriPacket`] are: read only when a lane hits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Zeroable)]
#[repr(C)]
pub(super) struct PacketIds {
    pub group: [u32; 4],
    pub prim: [u32; 4],
}

/// The lanes of a packet that a ray hits, with what is needed to finish each hit.
pub(super) struct PacketHits {
    /// Bit `i`: lane `i` hits with `tmin < t < tmax` (computed in single precision).
    pub mask: u32,
    /// Bit `i`: lane `i` has an edge function that rounded to zero and must be decided by the
    /// scalar test (which recomputes it in double precision).
    pub scalar: u32,
    pub t: [f32; 4],
    pub e1: [f32; 4],
    pub e2: [f32; 4],
    pub det: [f32; 4],
}

impl PacketHits {
    /// Lane `i`'s `(t, u, v)` exactly as [`super::intersect_triangle`] returns them
    /// (`u = e1 / det`, `v = e2 / det`, correctly rounded like the scalar division).
    #[inline(always)]
    pub fn lane(&self, i: usize) -> (f32, f32, f32) {
        (
            self.t[i],
            self.e1[i] / self.det[i],
            self.e2[i] / self.det[i],
        )
    }
}

impl TriPacket {
    /// Builds a packet from up to four triangles (at least one), padding with the last.
    pub fn new(tris: &[[glam::Vec3; 3]]) -> TriPacket {
        debug_assert!((1..=4).contains(&tris.len()));
        let lane = |l: usize| &tris[l.min(tris.len() - 1)];
        let (t0, t1, t2, t3) = (lane(0), lane(1), lane(2), lane(3));
        let coord = |v: usize, a: usize| f32x4::new([t0[v][a], t1[v][a], t2[v][a], t3[v][a]]);
        TriPacket {
            v: [0, 1, 2].map(|v| [coord(v, 0), coord(v, 1), coord(v, 2)]),
        }
    }

    /// Triangle `lane`'s vertices, exactly as stored.
    #[inline]
    pub fn triangle(&self, lane: usize) -> [glam::Vec3; 3] {
        self.v.map(|v| {
            glam::Vec3::new(
                v[0].as_array_ref()[lane],
                v[1].as_array_ref()[lane],
                v[2].as_array_ref()[lane],
            )
        })
    }

    /// The watertight test of [`super::intersect_triangle`] on four triangles, lane by lane
    /// the same operations (see the module comment), with the hit window `tmin < t < tmax`.
    #[inline(always)]
    pub fn intersect(&self, ray: &Ray4, tmin: f32, tmax: f32) -> PacketHits {
        let (kx, ky, kz) = (ray.kx, ray.ky, ray.kz);
        let [v0, v1, v2] = &self.v;
        // Translate to the origin (only the three components the test reads, permuted).
        let a = [v0[kx] - ray.o[kx], v0[ky] - ray.o[ky], v0[kz] - ray.o[kz]];
        let b = [v1[kx] - ray.o[kx], v1[ky] - ray.o[ky], v1[kz] - ray.o[kz]];
        let c = [v2[kx] - ray.o[kx], v2[ky] - ray.o[ky], v2[kz] - ray.o[kz]];
        let ax = a[0] + ray.sx * a[2];
        let ay = a[1] + ray.sy * a[2];
        let bx = b[0] + ray.sx * b[2];
        let by = b[1] + ray.sy * b[2];
        let cx = c[0] + ray.sx * c[2];
        let cy = c[1] + ray.sy * c[2];
        let e0 = bx * cy - by * cx;
        let e1 = cx * ay - cy * ax;
        let e2 = ax * by - ay * bx;
        let zero = f32x4::ZERO;
        let scalar = e0.cmp_eq(zero) | e1.cmp_eq(zero) | e2.cmp_eq(zero);
        let any_neg = e0.cmp_lt(zero) | e1.cmp_lt(zero) | e2.cmp_lt(zero);
        let any_pos = e0.cmp_gt(zero) | e1.cmp_gt(zero) | e2.cmp_gt(zero);
        let det = e0 + e1 + e2;
        let az = ray.sz * a[2];
        let bz = ray.sz * b[2];
        let cz = ray.sz * c[2];
        let t = (e0 * az + e1 * bz + e2 * cz) / det;
        let rejected = (any_neg & any_pos) | det.cmp_eq(zero);
        let in_window = t.cmp_gt(f32x4::splat(tmin)) & t.cmp_lt(f32x4::splat(tmax));
        let scalar_mask = scalar.move_mask() as u32;
        PacketHits {
            mask: in_window.move_mask() as u32 & !(rejected.move_mask() as u32) & !scalar_mask,
            scalar: scalar_mask,
            t: t.to_array(),
            e1: e1.to_array(),
            e2: e2.to_array(),
            det: det.to_array(),
        }
    }

    /// Whether any lane hits with `tmin < t < tmax`: the any-hit form of
    /// [`TriPacket::intersect`].
    #[inline(always)]
    pub fn any_hit(&self, ray: &RayData, ray4: &Ray4, tmin: f32, tmax: f32) -> bool {
        let h = self.intersect(ray4, tmin, tmax);
        if h.mask != 0 {
            return true;
        }
        (0..4).any(|lane| {
            h.scalar & (1 << lane) != 0
                && super::intersect_triangle(ray, &self.triangle(lane), tmin, tmax).is_some()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec3;

    #[test]
    fn layout_sizes_are_the_documented_ones() {
        assert_eq!((size_of::<Node>(), align_of::<Node>()), (224, 32));
        assert_eq!((size_of::<TriPacket>(), align_of::<TriPacket>()), (144, 16));
        assert_eq!((size_of::<PacketIds>(), size_of::<Packet>()), (32, 176));
        assert_eq!(std::mem::offset_of!(Packet, ids), 144);
    }

    #[test]
    fn child_refs_round_trip() {
        let l = ChildRef::leaf(12345, 3);
        assert!(l.is_leaf());
        assert_eq!(l.packets(), 12345..12348);
        assert_eq!(l.offset(100, 7).packets(), 12352..12355);
        let n = ChildRef::node(42);
        assert!(!n.is_leaf());
        assert_eq!(n.offset(100, 7).index(), 142);
        assert_eq!(ChildRef::EMPTY.offset(1, 1), ChildRef::EMPTY);
        let big = ChildRef::leaf(MAX_PACKETS - 1, MAX_LEAF_PACKETS);
        assert_eq!(big.packets().len(), 8);
    }

    #[test]
    fn empty_slots_never_hit() {
        let mut n = Node::EMPTY;
        n.set(1, [0.0; 3], [1.0; 3], ChildRef::node(0));
        n.set(6, [0.0; 3], [1.0; 3], ChildRef::node(0));
        for dir in [
            Vec3::X,
            -Vec3::X,
            Vec3::new(0.0, -0.0, 1.0),
            Vec3::new(-0.0, 0.0, -1.0),
            Vec3::new(1.0, 2.0, 3.0),
        ] {
            let ray = RayData::new(Vec3::new(0.5, 0.5, 0.5), dir).unwrap();
            let (mask, _) = Halves::entry(&n, &Ray4::new(&ray), 0.0, f32::INFINITY);
            assert_eq!(mask, 0b0100_0010, "{dir}");
        }
    }

    #[test]
    fn rays_through_vertices_and_edges_go_to_the_scalar_test() {
        let p = TriPacket::new(&[[Vec3::ZERO, Vec3::X, Vec3::Y]]);
        // Through vertex 0, and through the midpoint of edge 1-2.
        for o in [Vec3::new(0.0, 0.0, 1.0), Vec3::new(0.5, 0.5, 1.0)] {
            let ray = RayData::new(o, -Vec3::Z).unwrap();
            let h = p.intersect(&Ray4::new(&ray), 0.0, f32::INFINITY);
            assert_eq!(h.scalar, 0b1111, "{o}");
            assert_eq!(h.mask, 0, "scalar lanes are not reported as SIMD hits");
            assert!(p.any_hit(&ray, &Ray4::new(&ray), 0.0, f32::INFINITY));
        }
    }

    #[test]
    fn packet_lanes_agree_with_the_scalar_test() {
        let tris = [
            [Vec3::ZERO, Vec3::X, Vec3::Y],
            [
                Vec3::new(0.0, 0.0, -1.0),
                Vec3::new(2.0, 0.0, -1.0),
                Vec3::new(0.0, 2.0, -1.0),
            ],
            [
                Vec3::new(0.0, 0.0, 1.0),
                Vec3::new(0.0, 1.0, 1.0),
                Vec3::new(1.0, 0.0, 1.0),
            ],
        ];
        let p = TriPacket::new(&tris);
        assert_eq!(p.triangle(3), tris[2]);
        for o in [
            Vec3::new(0.25, 0.3, 3.0),
            Vec3::new(0.0, 0.5, 3.0),
            Vec3::new(0.9, 0.9, 3.0),
        ] {
            let ray = RayData::new(o, Vec3::new(0.01, -0.02, -1.0)).unwrap();
            let h = p.intersect(&Ray4::new(&ray), 0.0, f32::INFINITY);
            for lane in 0..4 {
                let scalar =
                    super::super::intersect_triangle(&ray, &tris[lane.min(2)], 0.0, f32::INFINITY);
                if h.scalar & (1 << lane) != 0 {
                    continue;
                }
                let simd = (h.mask & (1 << lane) != 0).then(|| h.lane(lane));
                assert_eq!(
                    simd.map(|(t, u, v)| (t.to_bits(), u.to_bits(), v.to_bits())),
                    scalar.map(|(t, u, v)| (t.to_bits(), u.to_bits(), v.to_bits())),
                    "{o} lane {lane}"
                );
            }
        }
    }
}
