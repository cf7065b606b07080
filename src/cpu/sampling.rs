//! Sampling helpers shared by the materials and the integrator.
//!
//! Every function is a few lines of plain float arithmetic so that the CUDA port can mirror it
//! line by line. Conventions:
//! - `u1`, `u2` are uniform numbers in [0, 1) from [`crate::render::Sampler`];
//! - directions in a *local* frame have the surface normal along +Z;
//! - pdfs are densities with respect to solid angle unless said otherwise.

use glam::Vec3;
use std::f32::consts::PI;

/// 1 / pi.
pub const INV_PI: f32 = 1.0 / PI;

/// An orthonormal basis `(t, b, n)` around the unit vector `n`, right-handed
/// (`t x b = n`).
///
/// The branchless construction of Duff et al., "Building an Orthonormal Basis, Revisited"
/// (JCGT 2017):
/// ```text
/// s = copysign(1, n.z);  a = -1 / (s + n.z);  k = n.x n.y a
/// t = (1 + s n.x^2 a,  s k,  -s n.x)
/// b = (k,  s + n.y^2 a,  -n.y)
/// ```
#[inline]
pub fn orthonormal_basis(n: Vec3) -> (Vec3, Vec3) {
    let s = 1.0f32.copysign(n.z);
    let a = -1.0 / (s + n.z);
    let k = n.x * n.y * a;
    let t = Vec3::new(1.0 + s * n.x * n.x * a, s * k, -s * n.x);
    let b = Vec3::new(k, s + n.y * n.y * a, -n.y);
    (t, b)
}

/// Maps a local direction (normal along +Z) to world space: `x t + y b + z n`.
#[inline]
pub fn local_to_world(local: Vec3, t: Vec3, b: Vec3, n: Vec3) -> Vec3 {
    local.x * t + local.y * b + local.z * n
}

/// Cosine-weighted direction on the +Z hemisphere (Malley's method: a uniform point on the
/// unit disk lifted to the hemisphere).
/// ```text
/// r = sqrt(u1),  phi = 2 pi u2
/// w = (r cos phi,  r sin phi,  sqrt(max(0, 1 - u1)))
/// pdf(w) = cos(theta) / pi = w.z / pi
/// ```
#[inline]
pub fn cosine_hemisphere(u1: f32, u2: f32) -> Vec3 {
    let r = u1.sqrt();
    let phi = 2.0 * PI * u2;
    Vec3::new(r * phi.cos(), r * phi.sin(), (1.0 - u1).max(0.0).sqrt())
}

/// Density of [`cosine_hemisphere`] for a direction whose cosine with the normal is `cos`:
/// `max(cos, 0) / pi`.
#[inline]
pub fn cosine_hemisphere_pdf(cos: f32) -> f32 {
    cos.max(0.0) * INV_PI
}

/// Direction around +Z distributed as a Phong lobe of exponent `n`, i.e. with density
/// proportional to `cos^n(alpha)` over the hemisphere around the lobe axis:
/// ```text
/// cos(alpha) = u1^(1 / (n + 1)),  sin(alpha) = sqrt(max(0, 1 - cos^2)),  phi = 2 pi u2
/// w = (sin cos phi,  sin sin phi,  cos)
/// pdf(w) = (n + 1) / (2 pi) cos^n(alpha)      (see [`phong_lobe_pdf`])
/// ```
#[inline]
pub fn phong_lobe(n: f32, u1: f32, u2: f32) -> Vec3 {
    let cos_a = u1.powf(1.0 / (n + 1.0));
    let sin_a = (1.0 - cos_a * cos_a).max(0.0).sqrt();
    let phi = 2.0 * PI * u2;
    Vec3::new(sin_a * phi.cos(), sin_a * phi.sin(), cos_a)
}

/// Density of [`phong_lobe`] for a direction at angle `alpha` from the lobe axis:
/// `(n + 1) / (2 pi) max(cos alpha, 0)^n`.
#[inline]
pub fn phong_lobe_pdf(n: f32, cos_alpha: f32) -> f32 {
    if cos_alpha <= 0.0 {
        return 0.0;
    }
    (n + 1.0) * (0.5 * INV_PI) * cos_alpha.powf(n)
}

/// A uniformly distributed point on a triangle, as barycentrics `(b1, b2)` of vertices 1 and
/// 2 (the point is `(1 - b1 - b2) p0 + b1 p1 + b2 p2`). The square-root parametrisation:
/// ```text
/// s = sqrt(u1);  b1 = s (1 - u2);  b2 = s u2
/// ```
/// Density with respect to area: `1 / area`.
#[inline]
pub fn uniform_triangle(u1: f32, u2: f32) -> (f32, f32) {
    let s = u1.sqrt();
    (s * (1.0 - u2), s * u2)
}

/// The power heuristic of Veach with exponent 2: the weight of a strategy of density `a`
/// against another of density `b`, `a^2 / (a^2 + b^2)` (0 when both are 0). Infinite `a`
/// (a delta strategy) gets weight 1.
#[inline]
pub fn power_heuristic(a: f32, b: f32) -> f32 {
    if a.is_infinite() {
        return 1.0;
    }
    let a2 = a * a;
    let b2 = b * b;
    if a2 + b2 > 0.0 {
        a2 / (a2 + b2)
    } else {
        0.0
    }
}

/// The mirror image of `w` about the unit normal `n`: `2 (w . n) n - w`. Both `w` and the
/// result point away from the surface.
#[inline]
pub fn reflect(w: Vec3, n: Vec3) -> Vec3 {
    2.0 * w.dot(n) * n - w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::sampler::RandomStream;

    #[test]
    fn basis_is_orthonormal_for_awkward_normals() {
        for n in [
            Vec3::Z,
            -Vec3::Z,
            Vec3::X,
            Vec3::new(0.0, 0.0, -0.999_999),
            Vec3::new(1.0, 2.0, -3.0).normalize(),
        ] {
            let n = n.normalize();
            let (t, b) = orthonormal_basis(n);
            assert!((t.length() - 1.0).abs() < 1e-5, "{n}");
            assert!((b.length() - 1.0).abs() < 1e-5, "{n}");
            assert!(t.dot(b).abs() < 1e-5 && t.dot(n).abs() < 1e-5 && b.dot(n).abs() < 1e-5);
            assert!((t.cross(b) - n).length() < 1e-5, "{n}");
        }
    }

    #[test]
    fn triangle_samples_stay_inside() {
        let mut s = RandomStream::new(1, 2, 3);
        for _ in 0..10_000 {
            let (b1, b2) = uniform_triangle(s.next_f32(), s.next_f32());
            assert!(b1 >= 0.0 && b2 >= 0.0 && b1 + b2 <= 1.0 + 1e-6);
        }
    }

    #[test]
    fn lobe_densities_integrate_to_one() {
        // Midpoint rule over (cos, phi): d(omega) = d(cos) d(phi); phi-independent densities.
        let n_cos = 20_000;
        let cos_integral = |pdf: &dyn Fn(f32) -> f32| -> f32 {
            (0..n_cos)
                .map(|i| {
                    let c = (i as f32 + 0.5) / n_cos as f32;
                    pdf(c) * 2.0 * PI / n_cos as f32
                })
                .sum()
        };
        assert!((cos_integral(&cosine_hemisphere_pdf) - 1.0).abs() < 1e-3);
        for n in [0.0, 1.0, 10.0, 200.0] {
            let i = cos_integral(&|c| phong_lobe_pdf(n, c));
            assert!((i - 1.0).abs() < 2e-3, "n = {n}: {i}");
        }
    }

    #[test]
    fn power_heuristic_limits() {
        assert_eq!(power_heuristic(1.0, 0.0), 1.0);
        assert_eq!(power_heuristic(0.0, 1.0), 0.0);
        assert_eq!(power_heuristic(0.0, 0.0), 0.0);
        assert_eq!(power_heuristic(f32::INFINITY, 3.0), 1.0);
        assert!((power_heuristic(1.0, 1.0) - 0.5).abs() < 1e-7);
    }
}
