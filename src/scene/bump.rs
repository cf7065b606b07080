//! Surface detail without geometry: shading normals bent by a material's bump (height) map or
//! tangent-space normal map (MTL `bump`/`map_Bump`, `norm`).
//!
//! Both kinds work in the triangle's texture-space frame: `dp/du` and `dp/dv`, the directions
//! in which the surface point moves as the texture coordinates grow, from the corners'
//! positions and UVs ([`uv_tangents`]). Only the shading normal changes; the geometric normal,
//! and so which side a ray leaves on, stays the triangle's, and the materials' shading frame
//! falls back to it where a bent normal faces away from the viewer
//! ([`crate::cpu::material::ShadingFrame`]).
//!
//! - A **height map** bends the normal by the slope of the heights. Heights are measured in
//!   texel widths, scaled by `-bm`: a height that rises by `1 / bm` from one texel to the next
//!   tilts the normal by 45 degrees, whatever the size of the scene or of its units (the
//!   convention of the height-to-normal filters of texture tools; MTL files carry no units, so
//!   world-space heights would make one map look flat in a scene modelled in metres and
//!   broken in one modelled in millimetres). The slope is the exact derivative of the bilinear
//!   lookup ([`Texture::height_gradient`]), so flat regions of the map give exactly the
//!   unbent normal. The bent normal is `(T + a N) x (B + b N)` on `N`'s side, with `T` and `B`
//!   the unit tangents along +u and +v in the plane of the shading normal `N` and `(a, b)` the
//!   slopes along them: the normal of the height field, for any handedness of the UVs.
//! - A **normal map** stores the bent normal itself, in the tangent frame `(T, B, N)`, as
//!   texels `(r, g, b) = (n + 1) / 2` (decoded back to `[-1, 1]` at load time): the OpenGL
//!   convention of Blender, glTF and most exporters, green along +v. `T` is `dp/du` made
//!   perpendicular to `N`, `B = +-(N x T)` with the sign of the UVs' handedness (as
//!   MikkTSpace does per vertex; here per triangle, so a normal map baked against smoothed
//!   per-vertex tangents shows faint seams across a curved mesh's edges). `-bm` scales the
//!   map's tilt (Blender writes its normal map strength there).
//!
//! Every step is written in the order `ptx/pathtrace.cu` repeats, so both backends bend the
//! same normal bit for bit.

use glam::{Vec2, Vec3};
use serde::Serialize;

use super::Texture;

/// A material's bump or normal map ([`super::Material::bump`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BumpMap {
    /// A height map: one channel of heights (in all three of the texture's channels), in
    /// texel widths times `scale`.
    Height { texture: u32, scale: f32 },
    /// A tangent-space normal map, texels decoded to `[-1, 1]`; `scale` multiplies its
    /// tangential components.
    Normal { texture: u32, scale: f32 },
}

impl BumpMap {
    /// The texture index.
    pub fn texture(&self) -> u32 {
        match *self {
            BumpMap::Height { texture, .. } | BumpMap::Normal { texture, .. } => texture,
        }
    }

    /// The `-bm` multiplier.
    pub fn scale(&self) -> f32 {
        match *self {
            BumpMap::Height { scale, .. } | BumpMap::Normal { scale, .. } => scale,
        }
    }

    /// "height" or "normal", as `gasworks info` names the kind.
    pub fn kind_name(&self) -> &'static str {
        match self {
            BumpMap::Height { .. } => "height",
            BumpMap::Normal { .. } => "normal",
        }
    }
}

/// -1, 0 or 1: the direction in which the texture lookup moves as a coordinate grows
/// (`f32::signum` would call 0 positive).
#[inline]
fn direction(s: f32) -> f32 {
    if s > 0.0 {
        1.0
    } else if s < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// The triangle's texture-space tangents `(dp/du, dp/dv)` up to one positive factor (the
/// inverse of the UV triangle's determinant, which only its sign matters for here), from its
/// corners `p` and texture coordinates `uv`; `None` where the UVs are degenerate (every
/// corner on one line in texture space) or not finite.
#[inline]
pub fn uv_tangents(p: [Vec3; 3], uv: [Vec2; 3]) -> Option<(Vec3, Vec3)> {
    let dp1 = p[1] - p[0];
    let dp2 = p[2] - p[0];
    let du1 = uv[1].x - uv[0].x;
    let dv1 = uv[1].y - uv[0].y;
    let du2 = uv[2].x - uv[0].x;
    let dv2 = uv[2].y - uv[0].y;
    let det = du1 * dv2 - dv1 * du2;
    if !(det != 0.0 && det.is_finite()) {
        return None;
    }
    let s = direction(det);
    let dpdu = (dp1 * dv2 - dp2 * dv1) * s;
    let dpdv = (dp2 * du1 - dp1 * du2) * s;
    Some((dpdu, dpdv))
}

/// `v` made perpendicular to the unit vector `n` and normalized (NaN where `v` is parallel
/// to `n`).
#[inline]
fn tangent_in_plane(v: Vec3, n: Vec3) -> Vec3 {
    (v - n * n.dot(v)).normalize()
}

/// The shading normal `n` (unit) bent by `bump` at texture coordinates `uv`, on a triangle
/// whose texture-space tangents are `dpdu`, `dpdv` ([`uv_tangents`]). Returns `n` itself where
/// the map leaves it (a flat stretch of a height map) and where the result would not be a
/// finite unit vector (tangents parallel to `n`); a texture index outside `textures` means
/// "no map", as everywhere.
pub fn bent_normal(
    bump: &BumpMap,
    textures: &[Texture],
    n: Vec3,
    dpdu: Vec3,
    dpdv: Vec3,
    uv: Vec2,
) -> Vec3 {
    let Some(map) = textures.get(bump.texture() as usize) else {
        return n;
    };
    let bent = match *bump {
        BumpMap::Height { scale, .. } => {
            let (dh_dx, dh_dy) = map.height_gradient(uv);
            // Texel x grows with u (times the mapping's sign), texel rows grow downwards,
            // against v.
            let a = scale * (dh_dx * direction(map.mapping.scale.x));
            let b = scale * (-dh_dy * direction(map.mapping.scale.y));
            if a == 0.0 && b == 0.0 {
                return n;
            }
            let t = tangent_in_plane(dpdu, n);
            let bt = tangent_in_plane(dpdv, n);
            let m = (t + n * a).cross(bt + n * b);
            let m = if m.dot(n) < 0.0 { -m } else { m };
            m.normalize()
        }
        BumpMap::Normal { scale, .. } => {
            let c = map.sample(uv);
            let t = tangent_in_plane(dpdu, n) * direction(map.mapping.scale.x);
            let handed = if n.cross(t).dot(dpdv) < 0.0 {
                -1.0
            } else {
                1.0
            };
            let bt = n.cross(t) * (handed * direction(map.mapping.scale.y));
            (t * (scale * c.x) + bt * (scale * c.y) + n * c.z).normalize()
        }
    };
    if bent.is_finite() {
        bent
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::UvMapping;

    /// A texture of one channel repeated in all three, rows top (v = 1) first.
    fn heights(width: u32, height: u32, f: impl Fn(u32, u32) -> f32) -> Texture {
        let mut texels = Vec::new();
        for y in 0..height {
            for x in 0..width {
                texels.push([f(x, y); 3]);
            }
        }
        Texture {
            path: "h".into(),
            width,
            height,
            texels,
            mapping: UvMapping::IDENTITY,
        }
    }

    fn constant(c: [f32; 3]) -> Texture {
        Texture {
            path: "n".into(),
            width: 1,
            height: 1,
            texels: vec![c],
            mapping: UvMapping::IDENTITY,
        }
    }

    const P: [Vec3; 3] = [Vec3::ZERO, Vec3::X, Vec3::Y];

    fn close(a: Vec3, b: Vec3) -> bool {
        (a - b).length() < 1e-5
    }

    #[test]
    fn tangents_follow_the_texture_coordinates() {
        // u along x, v along y.
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::Y]).unwrap();
        assert!(close(dpdu.normalize(), Vec3::X) && close(dpdv.normalize(), Vec3::Y));
        // Turned a quarter: u along y, v along -x.
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, -Vec2::Y, Vec2::X]).unwrap();
        assert!(close(dpdu.normalize(), Vec3::Y), "{dpdu}");
        assert!(close(dpdv.normalize(), -Vec3::X), "{dpdv}");
        // Mirrored: v along -y.
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, Vec2::X, -Vec2::Y]).unwrap();
        assert!(close(dpdu.normalize(), Vec3::X) && close(dpdv.normalize(), -Vec3::Y));
        // Degenerate: all on one line, or one point.
        assert!(uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::X * 2.0]).is_none());
        assert!(uv_tangents(P, [Vec2::ONE; 3]).is_none());
        assert!(uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::new(f32::NAN, 1.0)]).is_none());
    }

    /// A height ramp rising by `k` per texel along +u tilts the normal towards -u by
    /// `atan(bm k)`, for any placement of the UVs on the triangle.
    #[test]
    fn a_height_ramp_tilts_the_normal_by_its_slope() {
        let k = 0.25;
        let map = heights(8, 8, |x, _| k * x as f32);
        let n = Vec3::Z;
        for (uv, u_dir, v_dir) in [
            ([Vec2::ZERO, Vec2::X, Vec2::Y], Vec3::X, Vec3::Y),
            ([Vec2::ZERO, -Vec2::Y, Vec2::X], Vec3::Y, -Vec3::X),
            ([Vec2::ZERO, Vec2::X, -Vec2::Y], Vec3::X, -Vec3::Y),
        ] {
            let (dpdu, dpdv) = uv_tangents(P, uv).unwrap();
            for bm in [1.0f32, 2.0, -0.5] {
                let bump = BumpMap::Height {
                    texture: 0,
                    scale: bm,
                };
                // Inside one cell away from the wrap, the bilinear slope is exactly k.
                let at = Vec2::new(0.4, 0.55);
                let got = bent_normal(&bump, std::slice::from_ref(&map), n, dpdu, dpdv, at);
                let s = bm * k;
                let want = (n - u_dir * s).normalize();
                assert!(close(got, want), "uv {uv:?} bm {bm}: {got} vs {want}");
                // Rows run down the image: the same ramp along the rows tilts along v.
                let rows = heights(8, 8, |_, y| k * y as f32);
                let got = bent_normal(&bump, std::slice::from_ref(&rows), n, dpdu, dpdv, at);
                let want = (n + v_dir * s).normalize();
                assert!(close(got, want), "rows, uv {uv:?} bm {bm}: {got} vs {want}");
                // A mirrored lookup (-s -1 1) turns the slope along u round.
                let mut flipped = map.clone();
                flipped.mapping.scale.x = -1.0;
                let got = bent_normal(&bump, std::slice::from_ref(&flipped), n, dpdu, dpdv, at);
                assert!(close(got, (n + u_dir * s).normalize()), "-s -1: {got}");
            }
        }
    }

    #[test]
    fn a_flat_height_map_leaves_the_normal_bit_for_bit() {
        let map = heights(4, 4, |_, _| 0.7);
        let n = Vec3::new(0.3, -0.2, 0.9).normalize();
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::Y]).unwrap();
        let bump = BumpMap::Height {
            texture: 0,
            scale: 3.0,
        };
        for at in [Vec2::ZERO, Vec2::new(0.37, 0.91), Vec2::new(-5.2, 7.7)] {
            let got = bent_normal(&bump, std::slice::from_ref(&map), n, dpdu, dpdv, at);
            assert_eq!(
                got.to_array().map(f32::to_bits),
                n.to_array().map(f32::to_bits)
            );
        }
        // No such texture: no map.
        let missing = BumpMap::Height {
            texture: 5,
            scale: 1.0,
        };
        assert_eq!(bent_normal(&missing, &[], n, dpdu, dpdv, Vec2::ZERO), n);
    }

    /// A constant normal map texel `(sin t, 0, cos t)` is the normal turned by `t` towards +u,
    /// and `(0, sin t, cos t)` towards +v, in every UV placement and handedness.
    #[test]
    fn a_normal_map_turns_the_normal_in_the_uv_frame() {
        let n = Vec3::Z;
        let t: f32 = 0.6;
        for (uv, u_dir, v_dir) in [
            ([Vec2::ZERO, Vec2::X, Vec2::Y], Vec3::X, Vec3::Y),
            ([Vec2::ZERO, -Vec2::Y, Vec2::X], Vec3::Y, -Vec3::X),
            ([Vec2::ZERO, Vec2::X, -Vec2::Y], Vec3::X, -Vec3::Y),
        ] {
            let (dpdu, dpdv) = uv_tangents(P, uv).unwrap();
            let bump = BumpMap::Normal {
                texture: 0,
                scale: 1.0,
            };
            let along_u = constant([t.sin(), 0.0, t.cos()]);
            let got = bent_normal(&bump, &[along_u], n, dpdu, dpdv, Vec2::splat(0.3));
            assert!(close(got, n * t.cos() + u_dir * t.sin()), "{uv:?}: {got}");
            let along_v = constant([0.0, t.sin(), t.cos()]);
            let got = bent_normal(&bump, &[along_v], n, dpdu, dpdv, Vec2::splat(0.3));
            assert!(close(got, n * t.cos() + v_dir * t.sin()), "{uv:?}: {got}");
            // -bm 0 flattens the map to the unbent normal.
            let flat = BumpMap::Normal {
                texture: 0,
                scale: 0.0,
            };
            let along_v = constant([0.0, t.sin(), t.cos()]);
            let got = bent_normal(&flat, &[along_v], n, dpdu, dpdv, Vec2::splat(0.3));
            assert!(close(got, n));
        }
        // A tilted shading normal keeps the map's tilt relative to it.
        let n = Vec3::new(0.0, -0.6, 0.8);
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::Y]).unwrap();
        let bump = BumpMap::Normal {
            texture: 0,
            scale: 1.0,
        };
        let got = bent_normal(
            &bump,
            &[constant([0.0, 0.0, 1.0])],
            n,
            dpdu,
            dpdv,
            Vec2::ZERO,
        );
        assert!(close(got, n));
        let got = bent_normal(
            &bump,
            &[constant([1.0, 0.0, 0.0])],
            n,
            dpdu,
            dpdv,
            Vec2::ZERO,
        );
        assert!(close(got, Vec3::X));
    }

    #[test]
    fn a_normal_that_cannot_be_bent_is_kept() {
        // dp/du parallel to the shading normal: no tangent plane to bend in.
        let n = Vec3::X;
        let (dpdu, dpdv) = uv_tangents(P, [Vec2::ZERO, Vec2::X, Vec2::Y]).unwrap();
        let bump = BumpMap::Normal {
            texture: 0,
            scale: 1.0,
        };
        let got = bent_normal(
            &bump,
            &[constant([0.5, 0.5, 0.5])],
            n,
            dpdu,
            dpdv,
            Vec2::ZERO,
        );
        assert_eq!(got, n);
        let ramp = heights(4, 1, |x, _| x as f32);
        let height = BumpMap::Height {
            texture: 0,
            scale: 1.0,
        };
        let got = bent_normal(&height, &[ramp], n, dpdu, dpdv, Vec2::new(0.4, 0.5));
        assert_eq!(got, n);
    }
}
