//! Mesh primitives the generators are built from, each with an exact triangle count (the
//! `*_triangles` functions) so that a generator can hit a requested group size.
//!
//! Every primitive appends to a [`Group`] through a [`MeshBuilder`] that places it (scale,
//! rotation, translation) and gives it per-vertex normals: smooth
//! where the surface is curved, one per face (with vertices of their own) where it is flat.
//! None of them makes a zero-area triangle for the parameter ranges their callers use
//! (positive sizes, at least the minimum segment counts asserted below).

use std::f32::consts::{PI, TAU};

use glam::{Quat, Vec2, Vec3};

use crate::scene::Group;

/// Where a primitive goes: scaled (per axis, in its own frame), rotated, then moved.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    pub translation: Vec3,
    pub rotation: Quat,
    pub scale: Vec3,
}

impl Placement {
    pub fn at(translation: Vec3) -> Placement {
        Placement {
            translation,
            rotation: Quat::IDENTITY,
            scale: Vec3::ONE,
        }
    }

    /// Turned by `radians` about the vertical axis.
    pub fn turned(self, radians: f32) -> Placement {
        self.rotated(Quat::from_rotation_y(radians))
    }

    pub fn rotated(mut self, rotation: Quat) -> Placement {
        self.rotation = rotation;
        self
    }

    pub fn scaled(mut self, scale: Vec3) -> Placement {
        self.scale = scale;
        self
    }
}

/// Appends placed vertices and triangles of one material to a group.
pub struct MeshBuilder<'a> {
    group: &'a mut Group,
    placement: Placement,
    material: u32,
    with_normals: bool,
}

impl<'a> MeshBuilder<'a> {
    /// A builder writing normals too: every primitive of a group must then use one, so that
    /// the group's normals stay one per vertex.
    pub fn new(group: &'a mut Group, placement: Placement, material: u32) -> MeshBuilder<'a> {
        MeshBuilder {
            group,
            placement,
            material,
            with_normals: true,
        }
    }

    /// A builder writing positions only (the group uses geometric normals).
    pub fn flat(group: &'a mut Group, placement: Placement, material: u32) -> MeshBuilder<'a> {
        MeshBuilder {
            with_normals: false,
            ..MeshBuilder::new(group, placement, material)
        }
    }

    pub fn set_material(&mut self, material: u32) {
        self.material = material;
    }

    /// Adds a vertex given in the primitive's own frame; returns its index.
    pub fn vertex(&mut self, p: Vec3, n: Vec3) -> u32 {
        let index = self.group.positions.len() as u32;
        let rotation = self.placement.rotation;
        let world = rotation * (p * self.placement.scale) + self.placement.translation;
        self.group.positions.push(world);
        if self.with_normals {
            // Normals transform by the inverse transpose: divide by the scale, then turn.
            let normal = (rotation * (n / self.placement.scale)).normalize_or_zero();
            self.group.normals.push(normal);
        }
        index
    }

    pub fn triangle(&mut self, a: u32, b: u32, c: u32) {
        self.group.indices.push([a, b, c]);
        self.group.face_materials.push(self.material);
    }

    /// Two triangles a-b-c and a-c-d; counter-clockwise seen from the front.
    pub fn quad(&mut self, a: u32, b: u32, c: u32, d: u32) {
        self.triangle(a, b, c);
        self.triangle(a, c, d);
    }

    /// A flat quad with its own four vertices and the face normal.
    pub fn flat_quad(&mut self, corners: [Vec3; 4]) {
        let n = (corners[1] - corners[0])
            .cross(corners[2] - corners[0])
            .normalize_or_zero();
        let [a, b, c, d] = corners.map(|p| self.vertex(p, n));
        self.quad(a, b, c, d);
    }
}

/// Turns a finished group half a turn about the vertical (Y) axis through the origin:
/// `(x, y, z)` becomes `(-x, y, -z)`, positions and normals alike. Exact (a sign flip), and a
/// rotation, so windings still agree with the normals. The generators lay scenes out opening
/// toward -Z and turn them, so that they open toward +Z, where the default camera (which looks
/// along -Z, as Blender and three.js viewers do) and other tools' cameras see in.
pub fn turn_half(group: &mut crate::scene::Group) {
    let turn = |p: &mut Vec3| {
        p.x = -p.x;
        p.z = -p.z;
    };
    group.positions.iter_mut().for_each(turn);
    group.normals.iter_mut().for_each(turn);
}

/// A grid of `nx` x `ny` cells in the local XY plane spanning `size` (centred on the origin),
/// facing +Z, pushed along Z by `offset(u, v)` (u, v in [0, 1]): walls, floors, drapes.
pub fn panel(b: &mut MeshBuilder, nx: u32, ny: u32, size: Vec2, offset: impl Fn(f32, f32) -> f32) {
    assert!(nx >= 1 && ny >= 1, "a panel needs at least one cell");
    let point = |u: f32, v: f32| Vec3::new((u - 0.5) * size.x, (v - 0.5) * size.y, offset(u, v));
    // The normal by central differences of the displacement.
    let (du, dv) = (0.5 / nx as f32, 0.5 / ny as f32);
    let mut first = None;
    for j in 0..=ny {
        for i in 0..=nx {
            let (u, v) = (i as f32 / nx as f32, j as f32 / ny as f32);
            let tu = point(u + du, v) - point(u - du, v);
            let tv = point(u, v + dv) - point(u, v - dv);
            let index = b.vertex(point(u, v), tu.cross(tv));
            first.get_or_insert(index);
        }
    }
    let base = first.unwrap_or(0);
    let row = nx + 1;
    for j in 0..ny {
        for i in 0..nx {
            let a = base + j * row + i;
            b.quad(a, a + 1, a + 1 + row, a + row);
        }
    }
}

/// Texture coordinates for the vertices [`panel`] makes with the same `nx` x `ny`, in its
/// vertex order: `(u, v)` of the grid times `repeats` (the texture tiles `repeats.x` times
/// across and `repeats.y` times up), v growing up the panel's local Y, as images are read.
pub fn panel_uvs(nx: u32, ny: u32, repeats: Vec2) -> Vec<Vec2> {
    (0..=ny)
        .flat_map(|j| {
            (0..=nx).map(move |i| Vec2::new(i as f32 / nx as f32, j as f32 / ny as f32) * repeats)
        })
        .collect()
}

pub const fn panel_triangles(nx: u32, ny: u32) -> u64 {
    2 * nx as u64 * ny as u64
}

/// An axis-aligned box between `min` and `max`, outward normals.
pub fn cuboid(b: &mut MeshBuilder, min: Vec3, max: Vec3) {
    let c = |x: bool, y: bool, z: bool| {
        Vec3::new(
            if x { max.x } else { min.x },
            if y { max.y } else { min.y },
            if z { max.z } else { min.z },
        )
    };
    let (f, t) = (false, true);
    b.flat_quad([c(f, f, t), c(t, f, t), c(t, t, t), c(f, t, t)]); // +Z
    b.flat_quad([c(t, f, f), c(f, f, f), c(f, t, f), c(t, t, f)]); // -Z
    b.flat_quad([c(t, f, t), c(t, f, f), c(t, t, f), c(t, t, t)]); // +X
    b.flat_quad([c(f, f, f), c(f, f, t), c(f, t, t), c(f, t, f)]); // -X
    b.flat_quad([c(f, t, t), c(t, t, t), c(t, t, f), c(f, t, f)]); // +Y
    b.flat_quad([c(f, f, f), c(t, f, f), c(t, f, t), c(f, f, t)]); // -Y
}

pub const CUBOID_TRIANGLES: u64 = 12;

/// A pyramid on a regular `sides`-gon of `radius` on y = 0, apex at `height`: a closed cone
/// with flat facets.
pub fn cone(b: &mut MeshBuilder, sides: u32, radius: f32, height: f32) {
    assert!(sides >= 3);
    let rim = |k: u32| {
        let a = TAU * k as f32 / sides as f32;
        Vec3::new(radius * a.cos(), 0.0, -radius * a.sin())
    };
    let apex = Vec3::Y * height;
    for k in 0..sides {
        let (p, q) = (rim(k), rim(k + 1));
        let n = (q - p).cross(apex - p);
        let (i, j, l) = (b.vertex(p, n), b.vertex(q, n), b.vertex(apex, n));
        b.triangle(i, j, l);
    }
    // The base, facing down, as a fan over its own vertices.
    let base: Vec<u32> = (0..sides).map(|k| b.vertex(rim(k), Vec3::NEG_Y)).collect();
    for k in 1..sides - 1 {
        b.triangle(base[0], base[k as usize + 1], base[k as usize]);
    }
}

pub const fn cone_triangles(sides: u32) -> u64 {
    2 * sides as u64 - 2
}

/// A surface of revolution about +Y through `profile` (radius, height) points listed bottom to
/// top (radii > 0, heights increasing), closed by flat caps: vases, columns, cans.
pub fn lathe(b: &mut MeshBuilder, segments: u32, profile: &[(f32, f32)]) {
    assert!(segments >= 3 && profile.len() >= 2);
    let p = profile.len();
    let dir = |k: u32| {
        let a = TAU * k as f32 / segments as f32;
        Vec3::new(a.cos(), 0.0, -a.sin())
    };
    // Outward normal of the profile at each point, from the neighbouring points.
    let normal_2d = |i: usize| {
        let (r0, y0) = profile[i.saturating_sub(1)];
        let (r1, y1) = profile[(i + 1).min(p - 1)];
        Vec2::new(y1 - y0, -(r1 - r0)).normalize_or(Vec2::X)
    };
    let first = b.group_len();
    for (i, &(r, y)) in profile.iter().enumerate() {
        let n2 = normal_2d(i);
        for k in 0..segments {
            let d = dir(k);
            b.vertex(d * r + Vec3::Y * y, d * n2.x + Vec3::Y * n2.y);
        }
    }
    let at = |i: usize, k: u32| first + i as u32 * segments + (k % segments);
    for i in 0..p - 1 {
        for k in 0..segments {
            b.quad(at(i, k), at(i, k + 1), at(i + 1, k + 1), at(i + 1, k));
        }
    }
    for (ring, normal) in [(0, Vec3::NEG_Y), (p - 1, Vec3::Y)] {
        let (r, y) = profile[ring];
        let centre = b.vertex(Vec3::Y * y, normal);
        let rim: Vec<u32> = (0..segments)
            .map(|k| b.vertex(dir(k) * r + Vec3::Y * y, normal))
            .collect();
        for k in 0..segments as usize {
            let (i, j) = (rim[k], rim[(k + 1) % segments as usize]);
            if normal.y > 0.0 {
                b.triangle(centre, i, j);
            } else {
                b.triangle(centre, j, i);
            }
        }
    }
}

pub const fn lathe_triangles(segments: u32, profile_points: u32) -> u64 {
    2 * segments as u64 * profile_points as u64
}

/// A UV sphere of `radius` centred on the origin.
pub fn sphere(b: &mut MeshBuilder, slices: u32, stacks: u32, radius: f32) {
    assert!(slices >= 3 && stacks >= 2);
    let top = b.vertex(Vec3::Y * radius, Vec3::Y);
    let first = b.group_len();
    for s in 1..stacks {
        let theta = PI * s as f32 / stacks as f32;
        for k in 0..slices {
            let phi = TAU * k as f32 / slices as f32;
            let n = Vec3::new(
                theta.sin() * phi.cos(),
                theta.cos(),
                -theta.sin() * phi.sin(),
            );
            b.vertex(n * radius, n);
        }
    }
    let bottom = b.vertex(Vec3::NEG_Y * radius, Vec3::NEG_Y);
    let at = |s: u32, k: u32| first + (s - 1) * slices + (k % slices);
    for k in 0..slices {
        b.triangle(top, at(1, k), at(1, k + 1));
        b.triangle(bottom, at(stacks - 1, k + 1), at(stacks - 1, k));
    }
    for s in 1..stacks - 1 {
        for k in 0..slices {
            b.quad(at(s, k), at(s + 1, k), at(s + 1, k + 1), at(s, k + 1));
        }
    }
}

pub const fn sphere_triangles(slices: u32, stacks: u32) -> u64 {
    2 * slices as u64 * (stacks as u64 - 1)
}

/// A torus about +Y: tube of radius `minor` around a circle of radius `major` (> minor).
pub fn torus(b: &mut MeshBuilder, rings: u32, sides: u32, major: f32, minor: f32) {
    assert!(rings >= 3 && sides >= 3 && major > minor);
    let first = b.group_len();
    for i in 0..rings {
        let a = TAU * i as f32 / rings as f32;
        let d = Vec3::new(a.cos(), 0.0, -a.sin());
        for j in 0..sides {
            let t = TAU * j as f32 / sides as f32;
            let n = d * t.cos() + Vec3::Y * t.sin();
            b.vertex(d * major + n * minor, n);
        }
    }
    let at = |i: u32, j: u32| first + (i % rings) * sides + (j % sides);
    for i in 0..rings {
        for j in 0..sides {
            b.quad(at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j + 1));
        }
    }
}

pub const fn torus_triangles(rings: u32, sides: u32) -> u64 {
    2 * rings as u64 * sides as u64
}

/// A standing arch: a half annulus (radii `inner` < `outer`) in the XY plane, its two feet on
/// y = 0, extruded `depth` along Z and closed at the feet. At least 2 segments: one would be
/// flat.
pub fn arch(b: &mut MeshBuilder, segments: u32, inner: f32, outer: f32, depth: f32) {
    assert!(segments >= 2 && inner > 0.0 && outer > inner && depth > 0.0);
    let dir = |k: u32| {
        let a = PI * k as f32 / segments as f32;
        Vec3::new(a.cos(), a.sin(), 0.0)
    };
    let (zf, zb) = (depth * 0.5, -depth * 0.5);
    let ring = |b: &mut MeshBuilder, radius: f32, z: f32, normal: &dyn Fn(Vec3) -> Vec3| {
        let first = b.group_len();
        for k in 0..=segments {
            let d = dir(k);
            b.vertex(d * radius + Vec3::Z * z, normal(d));
        }
        first
    };
    // Curved faces: outer (normals outward), inner (normals toward the centre).
    let outer_front = ring(b, outer, zf, &|d| d);
    let outer_back = ring(b, outer, zb, &|d| d);
    let inner_front = ring(b, inner, zf, &|d| -d);
    let inner_back = ring(b, inner, zb, &|d| -d);
    // Flat faces: front (+Z) and back (-Z).
    let front_outer = ring(b, outer, zf, &|_| Vec3::Z);
    let front_inner = ring(b, inner, zf, &|_| Vec3::Z);
    let back_outer = ring(b, outer, zb, &|_| Vec3::NEG_Z);
    let back_inner = ring(b, inner, zb, &|_| Vec3::NEG_Z);
    for k in 0..segments {
        b.quad(
            outer_back + k,
            outer_back + k + 1,
            outer_front + k + 1,
            outer_front + k,
        );
        b.quad(
            inner_front + k,
            inner_front + k + 1,
            inner_back + k + 1,
            inner_back + k,
        );
        b.quad(
            front_inner + k,
            front_outer + k,
            front_outer + k + 1,
            front_inner + k + 1,
        );
        b.quad(
            back_outer + k,
            back_inner + k,
            back_inner + k + 1,
            back_outer + k + 1,
        );
    }
    // The two feet, facing down.
    for k in [0, segments] {
        let d = dir(k);
        let corners = [
            d * inner + Vec3::Z * zf,
            d * inner + Vec3::Z * zb,
            d * outer + Vec3::Z * zb,
            d * outer + Vec3::Z * zf,
        ];
        let corners = if k == 0 {
            corners
        } else {
            [corners[3], corners[2], corners[1], corners[0]]
        };
        b.flat_quad(corners);
    }
}

pub const fn arch_triangles(segments: u32) -> u64 {
    8 * segments as u64 + 4
}

impl MeshBuilder<'_> {
    fn group_len(&self) -> u32 {
        self.group.positions.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(f: impl FnOnce(&mut MeshBuilder)) -> Group {
        let mut g = Group::default();
        let mut b = MeshBuilder::new(&mut g, Placement::at(Vec3::ZERO), 0);
        f(&mut b);
        g
    }

    /// Every edge of a closed mesh is shared by exactly two triangles, in opposite directions.
    /// Vertices are welded by position first since flat faces have vertices of their own.
    fn assert_closed(g: &Group) {
        use std::collections::HashMap;
        let key = |i: u32| {
            let p = g.positions[i as usize];
            [
                (p.x * 1e4).round() as i64,
                (p.y * 1e4).round() as i64,
                (p.z * 1e4).round() as i64,
            ]
        };
        let mut edges: HashMap<([i64; 3], [i64; 3]), i32> = HashMap::new();
        for t in &g.indices {
            for e in 0..3 {
                let (a, b) = (key(t[e]), key(t[(e + 1) % 3]));
                *edges.entry((a, b)).or_default() += 1;
                *edges.entry((b, a)).or_default() -= 1;
            }
        }
        assert!(
            edges.values().all(|&c| c == 0),
            "mesh is not closed and consistently wound"
        );
    }

    fn assert_no_degenerate(g: &Group) {
        for i in 0..g.triangle_count() {
            let [a, b, c] = g.triangle(i);
            assert!(
                (b - a).cross(c - a).length() > 1e-9,
                "triangle {i} is degenerate"
            );
        }
        assert_eq!(g.normals.len(), g.positions.len());
        assert!(g.normals.iter().all(|n| (n.length() - 1.0).abs() < 1e-4));
    }

    /// The signed volume of a closed mesh: positive when its normals point outward.
    fn volume(g: &Group) -> f32 {
        (0..g.triangle_count())
            .map(|i| {
                let [a, b, c] = g.triangle(i);
                a.dot(b.cross(c)) / 6.0
            })
            .sum()
    }

    #[test]
    fn primitives_have_their_stated_counts_and_are_closed_and_outward() {
        let g = build(|b| cuboid(b, Vec3::ZERO, Vec3::ONE));
        assert_eq!(g.triangle_count() as u64, CUBOID_TRIANGLES);
        assert_closed(&g);
        assert!((volume(&g) - 1.0).abs() < 1e-5);

        let g = build(|b| cone(b, 7, 1.0, 2.0));
        assert_eq!(g.triangle_count() as u64, cone_triangles(7));
        assert_closed(&g);
        assert!(volume(&g) > 0.0);

        let g = build(|b| lathe(b, 9, &[(1.0, 0.0), (0.5, 1.0), (0.8, 2.0)]));
        assert_eq!(g.triangle_count() as u64, lathe_triangles(9, 3));
        assert_closed(&g);
        assert!(volume(&g) > 0.0);

        let g = build(|b| sphere(b, 12, 7, 2.0));
        assert_eq!(g.triangle_count() as u64, sphere_triangles(12, 7));
        assert_closed(&g);
        let exact = 4.0 / 3.0 * PI * 8.0;
        assert!(volume(&g) > 0.8 * exact && volume(&g) < exact);

        let g = build(|b| torus(b, 10, 6, 2.0, 0.5));
        assert_eq!(g.triangle_count() as u64, torus_triangles(10, 6));
        assert_closed(&g);
        assert!(volume(&g) > 0.0);

        let g = build(|b| arch(b, 5, 1.0, 1.5, 0.5));
        assert_eq!(g.triangle_count() as u64, arch_triangles(5));
        assert_closed(&g);
        assert!(volume(&g) > 0.0);

        let g = build(|b| panel(b, 4, 3, Vec2::new(2.0, 1.0), |u, _| 0.1 * (u * 6.0).sin()));
        assert_eq!(g.triangle_count() as u64, panel_triangles(4, 3));
    }

    #[test]
    fn primitives_make_no_degenerate_triangles_and_unit_normals() {
        for g in [
            build(|b| cuboid(b, Vec3::ZERO, Vec3::new(1.0, 2.0, 3.0))),
            build(|b| cone(b, 3, 0.1, 0.2)),
            build(|b| lathe(b, 3, &[(0.1, 0.0), (0.1, 0.1)])),
            build(|b| sphere(b, 3, 2, 0.1)),
            build(|b| torus(b, 3, 3, 0.2, 0.1)),
            build(|b| arch(b, 2, 0.1, 0.2, 0.1)),
            build(|b| panel(b, 1, 1, Vec2::ONE, |_, _| 0.0)),
        ] {
            assert_no_degenerate(&g);
        }
    }

    #[test]
    fn placement_scales_turns_and_moves() {
        let mut g = Group::default();
        let mut b = MeshBuilder::new(
            &mut g,
            Placement::at(Vec3::new(10.0, 0.0, 0.0))
                .turned(std::f32::consts::FRAC_PI_2)
                .scaled(Vec3::new(2.0, 1.0, 1.0)),
            3,
        );
        b.vertex(Vec3::X, Vec3::X);
        // +X scaled by 2 then turned a quarter about +Y lands on -Z.
        assert!((g.positions[0] - Vec3::new(10.0, 0.0, -2.0)).length() < 1e-5);
        assert!((g.normals[0] - Vec3::NEG_Z).length() < 1e-5);
    }
}
