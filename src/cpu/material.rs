//! Scattering at a surface point: evaluation, sampling and pdf of the four material kinds of
//! [`MaterialKind`].
//!
//! This is the reference the CUDA closest-hit programs are ported from, so everything is plain
//! float arithmetic with the formula in each function's comment.
//!
//! Conventions (the same on the GPU):
//! - `wo` points from the surface towards where the path came from (the camera side), `wi`
//!   towards where light comes from; both are unit vectors.
//! - [`Bsdf::eval`] returns `f(wo, wi) * cos(theta_i)` (the cosine with the *shading* normal)
//!   together with the solid-angle pdf with which [`Bsdf::sample`] would pick `wi`.
//! - [`Bsdf::sample`] returns the *weight* `f cos / pdf` that multiplies the path throughput.
//! - Surfaces are two-sided: the frame is flipped to the side of `wo` (see [`ShadingFrame`]).
//!   Glass is the exception where the side matters: it says whether the path enters or leaves.
//! - Shading normals: a direction is only valid on the side the *geometric* normal allows
//!   (reflection: `wi . n_geo > 0`; refraction: `wi . n_geo < 0`); invalid samples return
//!   `None` and evaluate to zero. Cosines are taken with the shading normal and clamped at
//!   zero. Since the integrand is then never larger than with the shading normal alone, the
//!   reflected energy never exceeds the material's albedo: shading normals cannot create light.

// Tests are written `!(x > 0.0)` on purpose: a NaN (from a degenerate normal) must fail them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use glam::{Vec2, Vec3};

use super::sampling::{
    cosine_hemisphere, cosine_hemisphere_pdf, local_to_world, orthonormal_basis, phong_lobe,
    phong_lobe_pdf, reflect, INV_PI,
};
use crate::colour::luminance;
use crate::scene::{Material, MaterialKind, Texture};

/// The local frame of a hit point, oriented towards `wo`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadingFrame {
    /// Unit geometric normal, flipped so that `wo . n_geo >= 0`.
    pub n_geo: Vec3,
    /// Unit shading normal on the same side (`wo . n > 0` unless `wo` is exactly grazing).
    pub n: Vec3,
    /// Tangents completing `n` into a right-handed orthonormal basis.
    pub t: Vec3,
    pub b: Vec3,
    /// Whether `wo` is on the front side of the triangle (the side its winding's normal points
    /// to). For glass: `true` means the path enters the dielectric at this point.
    pub front: bool,
}

impl ShadingFrame {
    /// Builds the frame from the triangle's geometric normal `n_geo_raw` (unit, as the winding
    /// gives it), the interpolated shading normal `n_shade_raw` (unit; pass `n_geo_raw` when
    /// the mesh has no normals) and `wo`:
    /// ```text
    /// front = (wo . n_geo_raw >= 0);  s = front ? 1 : -1
    /// n_geo = s n_geo_raw
    /// n     = s sign(n_shade_raw . n_geo_raw) n_shade_raw     (shading normal on n_geo's side)
    /// if wo . n <= 0 then n = n_geo                           (shading normal bent away from wo)
    /// ```
    /// The last rule keeps `wo` in the upper hemisphere of the shading frame, so that
    /// evaluation, sampling and pdf never disagree about which side `wo` is on.
    pub fn new(n_geo_raw: Vec3, n_shade_raw: Vec3, wo: Vec3) -> ShadingFrame {
        let front = wo.dot(n_geo_raw) >= 0.0;
        let side = if front { 1.0 } else { -1.0 };
        let n_geo = side * n_geo_raw;
        let mut n = if n_shade_raw.dot(n_geo_raw) < 0.0 {
            -side * n_shade_raw
        } else {
            side * n_shade_raw
        };
        if !(wo.dot(n) > 0.0) {
            n = n_geo;
        }
        let (t, b) = orthonormal_basis(n);
        ShadingFrame {
            n_geo,
            n,
            t,
            b,
            front,
        }
    }
}

/// `f(wo, wi) cos(theta_i)` and the pdf of sampling `wi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BsdfEval {
    pub f_cos: Vec3,
    /// Solid-angle density of [`Bsdf::sample`] choosing `wi` (0 for delta materials).
    pub pdf: f32,
}

impl BsdfEval {
    pub const ZERO: BsdfEval = BsdfEval {
        f_cos: Vec3::ZERO,
        pdf: 0.0,
    };
}

/// A sampled incident direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BsdfSample {
    pub wi: Vec3,
    /// `f cos / pdf`: what the path throughput is multiplied by.
    pub weight: Vec3,
    /// Solid-angle pdf of `wi`; 0 when `delta` (a Dirac lobe has no density).
    pub pdf: f32,
    /// The direction came from a Dirac lobe (mirror, glass): no light sampling, and an emitter
    /// hit next counts with full weight.
    pub delta: bool,
}

/// A material resolved at one hit point: texture applied, frame fixed.
#[derive(Clone, Copy, Debug)]
pub struct Bsdf {
    pub kind: MaterialKind,
    /// Kd times the `map_Kd` texel.
    pub kd: Vec3,
    pub ks: Vec3,
    /// Phong exponent, clamped to >= 0.
    pub shininess: f32,
    pub ior: f32,
    pub transmittance: Vec3,
    pub frame: ShadingFrame,
}

impl Bsdf {
    /// Resolves `material` at a point with texture coordinates `uv` (when the mesh has them):
    /// `kd = Kd * texture(uv)` when the material has a `map_Kd` texture, `Kd` otherwise, and
    /// `ks = Ks * map(uv)` when it has a `map_Ks` specular map, `Ks` otherwise.
    pub fn new(
        material: &Material,
        textures: &[Texture],
        uv: Option<Vec2>,
        frame: ShadingFrame,
    ) -> Bsdf {
        let texel = |map: Option<u32>| match (map, uv) {
            (Some(i), Some(uv)) => textures
                .get(i as usize)
                .map(|t| t.sample(uv))
                .unwrap_or(Vec3::ONE),
            _ => Vec3::ONE,
        };
        let ks = match material.specular_texture {
            Some(_) => material.specular * texel(material.specular_texture),
            None => material.specular,
        };
        Bsdf {
            kind: material.kind,
            kd: material.diffuse * texel(material.diffuse_texture),
            ks,
            shininess: material.shininess.max(0.0),
            ior: material.ior,
            transmittance: material.transmittance,
            frame,
        }
    }

    /// True for materials made only of Dirac lobes (mirror, glass): light sampling is skipped.
    pub fn is_delta(&self) -> bool {
        matches!(self.kind, MaterialKind::Mirror | MaterialKind::Glass)
    }

    /// Probability of picking the diffuse lobe of a glossy material, by luminance:
    /// `p_d = lum(kd) / (lum(kd) + lum(ks))` (1 when both are black; the specular lobe is
    /// picked with `1 - p_d`). Diffuse materials have `p_d = 1`.
    pub fn diffuse_lobe_probability(&self) -> f32 {
        match self.kind {
            MaterialKind::Diffuse => 1.0,
            MaterialKind::Glossy => {
                let d = luminance(self.kd).max(0.0);
                let s = luminance(self.ks).max(0.0);
                if d + s > 0.0 {
                    d / (d + s)
                } else {
                    1.0
                }
            }
            MaterialKind::Mirror | MaterialKind::Glass => 0.0,
        }
    }

    /// `f(wo, wi) cos(theta_i)` and the sampling pdf of `wi`.
    ///
    /// Only the diffuse and glossy kinds have a non-zero value (Dirac lobes evaluate to zero
    /// for every direction). With `n` the shading normal, `cos_i = wi . n`, and `r` the mirror
    /// direction of `wo` about `n`:
    /// ```text
    /// valid   = wo . n_geo > 0  and  wi . n_geo > 0  and  cos_i > 0
    /// f       = kd / pi + ks (N + 2) / (2 pi) max(wi . r, 0)^N        (normalized Phong)
    /// f_cos   = f cos_i
    /// pdf     = p_d cos_i / pi + (1 - p_d) (N + 1) / (2 pi) max(wi . r, 0)^N
    /// ```
    /// (Diffuse: `ks` term absent, `p_d = 1`.)
    pub fn eval(&self, wo: Vec3, wi: Vec3) -> BsdfEval {
        let fr = &self.frame;
        let cos_i = wi.dot(fr.n);
        if !(wo.dot(fr.n_geo) > 0.0 && wi.dot(fr.n_geo) > 0.0 && cos_i > 0.0) {
            return BsdfEval::ZERO;
        }
        match self.kind {
            MaterialKind::Diffuse => BsdfEval {
                f_cos: self.kd * (INV_PI * cos_i),
                pdf: cosine_hemisphere_pdf(cos_i),
            },
            MaterialKind::Glossy => {
                let n_exp = self.shininess;
                let cos_a = wi.dot(reflect(wo, fr.n)).max(0.0);
                let lobe = cos_a.powf(n_exp);
                let f = self.kd * INV_PI + self.ks * ((n_exp + 2.0) * 0.5 * INV_PI * lobe);
                let p_d = self.diffuse_lobe_probability();
                BsdfEval {
                    f_cos: f * cos_i,
                    pdf: p_d * cosine_hemisphere_pdf(cos_i)
                        + (1.0 - p_d) * phong_lobe_pdf(n_exp, cos_a),
                }
            }
            MaterialKind::Mirror | MaterialKind::Glass => BsdfEval::ZERO,
        }
    }

    /// The solid-angle density with which [`Bsdf::sample`] returns `wi` (the `pdf` of
    /// [`Bsdf::eval`]; 0 for Dirac lobes).
    pub fn pdf(&self, wo: Vec3, wi: Vec3) -> f32 {
        self.eval(wo, wi).pdf
    }

    /// Samples `wi` from three uniform numbers: `u_lobe` picks the lobe (glossy) or between
    /// reflection and refraction (glass), `(u1, u2)` the direction. Always consumes the same
    /// three numbers whatever the material, so that the random stream stays aligned.
    ///
    /// - Diffuse: `wi` cosine-distributed around `n`; weight `kd`.
    /// - Glossy: if `u_lobe < p_d` cosine around `n`, else a Phong lobe of exponent `N` around
    ///   `r = reflect(wo, n)`; weight `f_cos / pdf` with the *combined* pdf of [`Bsdf::eval`]
    ///   (one-sample MIS over the lobes).
    /// - Mirror: `wi = reflect(wo, n)`; weight `ks`.
    /// - Glass: see [`Bsdf::sample_glass`].
    ///
    /// Returns `None` (the path ends) when the direction falls on the wrong side of the
    /// geometric normal, or the weight is zero.
    pub fn sample(&self, wo: Vec3, u_lobe: f32, u1: f32, u2: f32) -> Option<BsdfSample> {
        let fr = &self.frame;
        if !(wo.dot(fr.n_geo) > 0.0) {
            return None;
        }
        match self.kind {
            MaterialKind::Diffuse => {
                let wi = local_to_world(cosine_hemisphere(u1, u2), fr.t, fr.b, fr.n);
                let cos_i = wi.dot(fr.n);
                if !(wi.dot(fr.n_geo) > 0.0 && cos_i > 0.0) {
                    return None;
                }
                Some(BsdfSample {
                    wi,
                    weight: self.kd,
                    pdf: cosine_hemisphere_pdf(cos_i),
                    delta: false,
                })
            }
            MaterialKind::Glossy => {
                let wi = if u_lobe < self.diffuse_lobe_probability() {
                    local_to_world(cosine_hemisphere(u1, u2), fr.t, fr.b, fr.n)
                } else {
                    let r = reflect(wo, fr.n);
                    let (rt, rb) = orthonormal_basis(r);
                    local_to_world(phong_lobe(self.shininess, u1, u2), rt, rb, r)
                };
                let e = self.eval(wo, wi);
                if !(e.pdf > 0.0) {
                    return None;
                }
                Some(BsdfSample {
                    wi,
                    weight: e.f_cos / e.pdf,
                    pdf: e.pdf,
                    delta: false,
                })
            }
            MaterialKind::Mirror => {
                let wi = reflect(wo, fr.n);
                if !(wi.dot(fr.n_geo) > 0.0) {
                    return None;
                }
                Some(BsdfSample {
                    wi,
                    weight: self.ks,
                    pdf: 0.0,
                    delta: true,
                })
            }
            MaterialKind::Glass => self.sample_glass(wo, u_lobe),
        }
    }

    /// The smooth dielectric. With `n` the shading normal on `wo`'s side,
    /// `cos_i = wo . n`, and the indices on either side of the interface
    /// `(eta_i, eta_t) = front ? (1, ior) : (ior, 1)`:
    /// ```text
    /// F = fresnel_dielectric(cos_i, eta_i, eta_t)       (1 under total internal reflection)
    /// if u_lobe < F:  wi = reflect(wo, n)                       weight = 1
    /// else:           eta = eta_i / eta_t
    ///                 cos_t = sqrt(1 - eta^2 (1 - cos_i^2))
    ///                 wi = -eta wo + (eta cos_i - cos_t) n      weight = transmittance eta^2
    /// ```
    /// Picking the event with probability `F` (resp. `1 - F`) cancels the Fresnel factor of
    /// the weight. The `eta^2` factor is the change of radiance across the interface (radiance
    /// is transported from the light towards the camera, so a path leaving the glass towards
    /// the camera is dimmed by `1 / ior^2` and one entering it is brightened by `ior^2`; over a
    /// path that enters and leaves they cancel). The reflected direction must leave on the
    /// `n_geo` side and the refracted one on the other, else `None`.
    pub fn sample_glass(&self, wo: Vec3, u_lobe: f32) -> Option<BsdfSample> {
        let fr = &self.frame;
        let (eta_i, eta_t) = if fr.front {
            (1.0, self.ior)
        } else {
            (self.ior, 1.0)
        };
        let cos_i = wo.dot(fr.n).clamp(0.0, 1.0);
        let f = fresnel_dielectric(cos_i, eta_i, eta_t);
        if u_lobe < f {
            let wi = reflect(wo, fr.n);
            if !(wi.dot(fr.n_geo) > 0.0) {
                return None;
            }
            return Some(BsdfSample {
                wi,
                weight: Vec3::ONE,
                pdf: 0.0,
                delta: true,
            });
        }
        let eta = eta_i / eta_t;
        let sin2_t = eta * eta * (1.0 - cos_i * cos_i);
        // F < 1 here, so sin2_t < 1; the max guards rounding.
        let cos_t = (1.0 - sin2_t).max(0.0).sqrt();
        let wi = (-eta * wo + (eta * cos_i - cos_t) * fr.n).normalize();
        if !(wi.dot(fr.n_geo) < 0.0) {
            return None;
        }
        Some(BsdfSample {
            wi,
            weight: self.transmittance * (eta * eta),
            pdf: 0.0,
            delta: true,
        })
    }
}

/// Fresnel reflectance of a smooth dielectric interface for unpolarised light (the exact
/// formula, not Schlick's approximation). `cos_i` is the cosine of the incident angle on the
/// side of index `eta_i`, `eta_t` the index of the other side:
/// ```text
/// sin2_t = (eta_i / eta_t)^2 (1 - cos_i^2);   if sin2_t >= 1: return 1   (total internal reflection)
/// cos_t  = sqrt(1 - sin2_t)
/// r_s = (eta_i cos_i - eta_t cos_t) / (eta_i cos_i + eta_t cos_t)
/// r_p = (eta_t cos_i - eta_i cos_t) / (eta_t cos_i + eta_i cos_t)
/// F   = (r_s^2 + r_p^2) / 2
/// ```
pub fn fresnel_dielectric(cos_i: f32, eta_i: f32, eta_t: f32) -> f32 {
    let cos_i = cos_i.clamp(0.0, 1.0);
    let ratio = eta_i / eta_t;
    let sin2_t = ratio * ratio * (1.0 - cos_i * cos_i);
    if sin2_t >= 1.0 {
        return 1.0;
    }
    let cos_t = (1.0 - sin2_t).sqrt();
    let r_s = (eta_i * cos_i - eta_t * cos_t) / (eta_i * cos_i + eta_t * cos_t);
    let r_p = (eta_t * cos_i - eta_i * cos_t) / (eta_t * cos_i + eta_i * cos_t);
    let f = 0.5 * (r_s * r_s + r_p * r_p);
    if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::sampler::RandomStream;
    use std::f32::consts::PI;

    fn material(kind: MaterialKind) -> Material {
        Material {
            kind,
            ..Material::default_diffuse()
        }
    }

    fn up_frame(wo: Vec3) -> ShadingFrame {
        ShadingFrame::new(Vec3::Z, Vec3::Z, wo)
    }

    fn glossy(kd: f32, ks: f32, ns: f32, wo: Vec3) -> Bsdf {
        let mut m = material(MaterialKind::Glossy);
        m.diffuse = Vec3::splat(kd);
        m.specular = Vec3::splat(ks);
        m.shininess = ns;
        Bsdf::new(&m, &[], None, up_frame(wo))
    }

    fn dir(theta_deg: f32, phi_deg: f32) -> Vec3 {
        let (t, p) = (theta_deg.to_radians(), phi_deg.to_radians());
        Vec3::new(t.sin() * p.cos(), t.sin() * p.sin(), t.cos())
    }

    #[test]
    fn frame_follows_wo_and_keeps_shading_normal_on_its_side() {
        let wo = dir(30.0, 0.0);
        let f = ShadingFrame::new(-Vec3::Z, Vec3::Z, wo);
        assert!(!f.front);
        assert_eq!(f.n_geo, Vec3::Z);
        assert_eq!(f.n, Vec3::Z);
        // A shading normal bent away from wo falls back to the geometric one.
        let bent = dir(80.0, 180.0);
        let f = ShadingFrame::new(Vec3::Z, bent, dir(85.0, 0.0));
        assert!(f.front);
        assert_eq!(f.n, Vec3::Z);
    }

    #[test]
    fn fresnel_matches_known_values() {
        // Normal incidence: ((n - 1) / (n + 1))^2 = 0.04 for n = 1.5, from either side.
        assert!((fresnel_dielectric(1.0, 1.0, 1.5) - 0.04).abs() < 1e-6);
        assert!((fresnel_dielectric(1.0, 1.5, 1.0) - 0.04).abs() < 1e-6);
        // Grazing incidence reflects everything.
        assert!((fresnel_dielectric(0.0, 1.0, 1.5) - 1.0).abs() < 1e-6);
        // Beyond the critical angle asin(1 / 1.5) = 41.8 degrees: total internal reflection.
        assert_eq!(fresnel_dielectric(45f32.to_radians().cos(), 1.5, 1.0), 1.0);
        assert!(fresnel_dielectric(40f32.to_radians().cos(), 1.5, 1.0) < 1.0);
        // Brewster's angle atan(1.5): r_p = 0 so F = r_s^2 / 2.
        let cb = 1.5f32.atan().cos();
        let f = fresnel_dielectric(cb, 1.0, 1.5);
        assert!((f - 0.0739).abs() < 1e-3, "{f}");
    }

    #[test]
    fn glass_refracts_by_snell_and_reflects_under_tir() {
        let mut m = material(MaterialKind::Glass);
        m.ior = 1.5;
        m.transmittance = Vec3::new(1.0, 0.5, 0.25);
        // Entering from above at 60 degrees: sin t = sin 60 / 1.5.
        let wo = dir(60.0, 0.0);
        let b = Bsdf::new(&m, &[], None, up_frame(wo));
        let s = b.sample(wo, 0.999, 0.5, 0.5).unwrap();
        assert!(s.delta && s.wi.z < 0.0);
        let sin_t = (s.wi.x * s.wi.x + s.wi.y * s.wi.y).sqrt();
        assert!((sin_t - 60f32.to_radians().sin() / 1.5).abs() < 1e-5);
        assert!(s.wi.x < 0.0, "refraction continues on the far side");
        assert!((s.weight - m.transmittance / 2.25).abs().max_element() < 1e-6);
        let r = b.sample(wo, 0.0, 0.5, 0.5).unwrap();
        assert!((r.wi - dir(60.0, 180.0)).length() < 1e-5 && r.weight == Vec3::ONE);
        // Leaving: wo below the winding's front (inside the glass) at 50 degrees > critical.
        let wo_in = -dir(50.0, 0.0);
        let b = Bsdf::new(&m, &[], None, up_frame(wo_in));
        assert!(!b.frame.front);
        for u in [0.0, 0.5, 0.999] {
            let s = b.sample(wo_in, u, 0.5, 0.5).unwrap();
            assert!(s.wi.z < 0.0, "TIR stays inside");
        }
        // Leaving at 20 degrees (below critical) with u near 1: refracts out, weight ior^2.
        let wo_in = -dir(20.0, 0.0);
        let b = Bsdf::new(&m, &[], None, up_frame(wo_in));
        let s = b.sample(wo_in, 0.999, 0.5, 0.5).unwrap();
        assert!(s.wi.z > 0.0);
        assert!((s.weight - m.transmittance * 2.25).abs().max_element() < 1e-5);
    }

    #[test]
    fn mirror_reflects_and_has_no_density() {
        let mut m = material(MaterialKind::Mirror);
        m.specular = Vec3::splat(0.9);
        let wo = dir(35.0, 10.0);
        let b = Bsdf::new(&m, &[], None, up_frame(wo));
        let s = b.sample(wo, 0.3, 0.2, 0.7).unwrap();
        assert!((s.wi - dir(35.0, 190.0)).length() < 1e-5);
        assert!(s.delta && s.weight == Vec3::splat(0.9));
        assert_eq!(b.eval(wo, s.wi), BsdfEval::ZERO);
    }

    #[test]
    fn texture_multiplies_kd() {
        let mut m = Material::diffuse("t", Vec3::new(0.5, 1.0, 1.0));
        m.diffuse_texture = Some(0);
        let tex = Texture {
            path: "t".into(),
            width: 1,
            height: 1,
            texels: vec![[0.5, 0.25, 1.0]],
            mapping: crate::scene::UvMapping::IDENTITY,
        };
        let b = Bsdf::new(&m, &[tex], Some(Vec2::new(0.3, 0.3)), up_frame(Vec3::Z));
        assert!((b.kd - Vec3::new(0.25, 0.25, 1.0)).length() < 1e-6);
        let b = Bsdf::new(&m, &[], None, up_frame(Vec3::Z));
        assert_eq!(b.kd, m.diffuse);
    }

    /// The glossy BRDF (Lambert plus normalized Phong) and its sampling pdf, coded here from
    /// their definitions in f64, independently of [`Bsdf::eval`], for the frame with normal +Z:
    /// `f = kd / pi + ks (N + 2) / (2 pi) cos^N(alpha)`, `alpha` the angle between `wi` and the
    /// mirror direction of `wo`; `pdf = p_d cos_i / pi + (1 - p_d) (N + 1) / (2 pi) cos^N(alpha)`
    /// with `p_d = lum(kd) / (lum(kd) + lum(ks))`. Returns `(f cos_i, pdf)` per channel.
    fn glossy_reference(kd: Vec3, ks: Vec3, n: f64, wo: Vec3, wi: Vec3) -> ([f64; 3], f64) {
        let (wo, wi) = (wo.as_dvec3(), wi.as_dvec3());
        if wo.z <= 0.0 || wi.z <= 0.0 {
            return ([0.0; 3], 0.0);
        }
        let r = glam::DVec3::new(-wo.x, -wo.y, wo.z);
        let lobe = wi.dot(r).max(0.0).powf(n);
        let inv_pi = 1.0 / std::f64::consts::PI;
        let lum = |c: Vec3| 0.2126 * c.x as f64 + 0.7152 * c.y as f64 + 0.0722 * c.z as f64;
        let p_d = lum(kd) / (lum(kd) + lum(ks));
        let f_cos = [0, 1, 2].map(|c| {
            (kd[c] as f64 * inv_pi + ks[c] as f64 * (n + 2.0) * 0.5 * inv_pi * lobe) * wi.z
        });
        let pdf = p_d * wi.z * inv_pi + (1.0 - p_d) * (n + 1.0) * 0.5 * inv_pi * lobe;
        (f_cos, pdf)
    }

    /// Every sampled glossy direction's weight and pdf equal the closed form of
    /// [`glossy_reference`] (not `eval`, which `sample` itself uses): a wrong normalization,
    /// lobe axis, lobe choice probability or colour channel fails here.
    #[test]
    fn sampled_weights_match_the_closed_form_brdf_over_its_pdf() {
        let wo = dir(50.0, 30.0);
        let (kd, ks, ns) = (Vec3::new(0.3, 0.2, 0.1), Vec3::new(0.2, 0.5, 0.35), 30.0);
        let mut m = material(MaterialKind::Glossy);
        m.diffuse = kd;
        m.specular = ks;
        m.shininess = ns;
        let b = Bsdf::new(&m, &[], None, up_frame(wo));
        let mirror = dir(50.0, 210.0);
        let mut s = RandomStream::new(0, 0, 9);
        let (mut checked, mut in_lobe) = (0, 0);
        for _ in 0..2000 {
            let (ul, u1, u2) = (s.next_f32(), s.next_f32(), s.next_f32());
            let Some(smp) = b.sample(wo, ul, u1, u2) else {
                continue;
            };
            let (f_cos, pdf) = glossy_reference(kd, ks, ns as f64, wo, smp.wi);
            assert!(smp.wi.z > 0.0 && !smp.delta);
            assert!(
                (smp.pdf as f64 - pdf).abs() <= 1e-4 * pdf,
                "pdf {} expected {pdf} at {}",
                smp.pdf,
                smp.wi
            );
            for (c, f) in f_cos.iter().enumerate() {
                let w = f / pdf;
                assert!(
                    (smp.weight[c] as f64 - w).abs() <= 1e-4 * w.max(1e-3),
                    "channel {c}: weight {} expected {w} at {}",
                    smp.weight[c],
                    smp.wi
                );
            }
            // Directions near the mirror direction, where the Phong lobe dominates, are tested.
            if smp.wi.dot(mirror) > 0.95 {
                in_lobe += 1;
            }
            checked += 1;
        }
        assert!(checked > 1500 && in_lobe > 200, "{checked} {in_lobe}");
    }

    /// The directional albedo `int f cos dw` of the glossy BRDF of [`glossy_reference`] by
    /// quadrature: `kd` for the Lambert part, plus `ks (N + 2) / (2 pi (N + 1)) int_0^1 int_0^2pi
    /// max(wi . z, 0) dphi dv` for the lobe (the substitution `v = cos^(N+1)(alpha)` around the
    /// mirror direction makes the integrand smooth for any N), midpoint rule on 800 x 800.
    fn glossy_albedo_by_quadrature(kd: f64, ks: f64, n: f64, wo: Vec3) -> f64 {
        let wo = wo.as_dvec3();
        let r = glam::DVec3::new(-wo.x, -wo.y, wo.z);
        let a = if r.x.abs() < 0.9 {
            glam::DVec3::X
        } else {
            glam::DVec3::Y
        };
        let t = a.cross(r).normalize();
        let b = r.cross(t);
        let steps = 800;
        let mut sum = 0.0;
        for i in 0..steps {
            let v = (i as f64 + 0.5) / steps as f64;
            let cos_a = v.powf(1.0 / (n + 1.0));
            let sin_a = (1.0 - cos_a * cos_a).max(0.0).sqrt();
            for j in 0..steps {
                let phi = (j as f64 + 0.5) / steps as f64 * std::f64::consts::TAU;
                let wi = sin_a * phi.cos() * t + sin_a * phi.sin() * b + cos_a * r;
                sum += wi.z.max(0.0);
            }
        }
        let integral = sum / (steps * steps) as f64 * std::f64::consts::TAU;
        kd + ks * (n + 2.0) / (std::f64::consts::TAU * (n + 1.0)) * integral
    }

    /// Directional albedo `E[weight]` of a few materials, estimated by sampling with a
    /// standard error `se`, equals the albedo computed by quadrature of the closed-form BRDF
    /// ([`glossy_albedo_by_quadrature`]) within `4 se + 1e-3` (so a black or a too-bright
    /// material fails), is exactly 1 for a Lambertian of Kd = 1, and never exceeds 1 beyond
    /// the statistical bound for Kd + Ks = 1 at any incidence angle.
    #[test]
    fn albedo_matches_the_quadrature_and_never_exceeds_one() {
        let n = 40_000;
        for (kd, ks, ns) in [
            (1.0, 0.0, 0.0),
            (0.5, 0.5, 10.0),
            (0.2, 0.8, 200.0),
            (0.0, 1.0, 1.0),
        ] {
            for theta in [0.0, 30.0, 60.0, 85.0] {
                let wo = dir(theta, 0.0);
                let b = glossy(kd, ks, ns, wo);
                let mut s = RandomStream::new(theta as u32, 0, 5);
                let (mut sum, mut sum2) = (0.0f64, 0.0f64);
                for _ in 0..n {
                    let (ul, u1, u2) = (s.next_f32(), s.next_f32(), s.next_f32());
                    let w = b.sample(wo, ul, u1, u2).map_or(0.0, |x| x.weight.x as f64);
                    sum += w;
                    sum2 += w * w;
                }
                let mean = sum / n as f64;
                let se = ((sum2 / n as f64 - mean * mean).max(0.0) / n as f64).sqrt();
                let expected = glossy_albedo_by_quadrature(kd as f64, ks as f64, ns as f64, wo);
                eprintln!("kd {kd} ks {ks} N {ns} theta {theta}: albedo {mean:.5} +- {se:.5}, quadrature {expected:.5}");
                assert!(
                    (mean - expected).abs() <= 4.0 * se + 1e-3,
                    "kd {kd} ks {ks} N {ns} theta {theta}: albedo {mean} +- {se}, quadrature {expected}"
                );
                assert!(
                    mean <= 1.0 + 4.0 * se + 1e-3,
                    "kd {kd} ks {ks} N {ns} theta {theta}: albedo {mean} +- {se}"
                );
                if ks == 0.0 {
                    assert!((mean - 1.0).abs() < 1e-5, "Lambert albedo {mean}");
                }
            }
        }
    }

    /// The directions [`Bsdf::sample`] returns are distributed with the density
    /// [`Bsdf::pdf`]: a chi-square test over a (cos theta, phi) grid of the whole sphere
    /// (plus one cell for "no sample"), expected counts by integrating `pdf` over each cell
    /// (8 x 8 midpoint rule), cells with fewer than 5 expected samples pooled. Fails when
    /// chi^2 exceeds the 1e-4 upper quantile of its distribution (Wilson-Hilferty).
    #[test]
    fn glossy_sampling_matches_its_pdf() {
        for (kd, ks, ns, theta) in [(0.3, 0.6, 20.0, 40.0), (0.05, 0.9, 300.0, 70.0)] {
            let wo = dir(theta, 0.0);
            let b = glossy(kd, ks, ns, wo);
            let (n_cos, n_phi) = (40usize, 80usize);
            let cell = |w: Vec3| -> usize {
                let c = ((w.z.clamp(-1.0, 1.0) + 1.0) * 0.5 * n_cos as f32) as usize;
                let phi = w.y.atan2(w.x).rem_euclid(2.0 * PI);
                let p = (phi / (2.0 * PI) * n_phi as f32) as usize;
                c.min(n_cos - 1) * n_phi + p.min(n_phi - 1)
            };
            let samples = 400_000;
            let mut observed = vec![0f64; n_cos * n_phi + 1];
            let mut s = RandomStream::new(7, 7, 7);
            for _ in 0..samples {
                let (ul, u1, u2) = (s.next_f32(), s.next_f32(), s.next_f32());
                match b.sample(wo, ul, u1, u2) {
                    Some(x) => observed[cell(x.wi)] += 1.0,
                    None => observed[n_cos * n_phi] += 1.0,
                }
            }
            let mut expected = vec![0f64; n_cos * n_phi + 1];
            let sub = 8;
            let (dc, dp) = (
                2.0 / n_cos as f64,
                2.0 * std::f64::consts::PI / n_phi as f64,
            );
            for ci in 0..n_cos {
                for pi in 0..n_phi {
                    let mut acc = 0.0;
                    for a in 0..sub {
                        for bb in 0..sub {
                            let c = -1.0 + (ci as f64 + (a as f64 + 0.5) / sub as f64) * dc;
                            let p = (pi as f64 + (bb as f64 + 0.5) / sub as f64) * dp;
                            let st = (1.0 - c * c).max(0.0).sqrt();
                            let w =
                                Vec3::new((st * p.cos()) as f32, (st * p.sin()) as f32, c as f32);
                            acc += b.pdf(wo, w) as f64;
                        }
                    }
                    expected[ci * n_phi + pi] = acc / (sub * sub) as f64 * dc * dp * samples as f64;
                }
            }
            let inside: f64 = expected.iter().sum();
            expected[n_cos * n_phi] = (samples as f64 - inside).max(0.0);
            // Pool sparse cells.
            let (mut chi2, mut dof) = (0.0, 0usize);
            let (mut pool_o, mut pool_e) = (0.0, 0.0);
            for (o, e) in observed.iter().zip(&expected) {
                if *e < 5.0 {
                    pool_o += o;
                    pool_e += e;
                } else {
                    chi2 += (o - e) * (o - e) / e;
                    dof += 1;
                }
            }
            if pool_e >= 5.0 {
                chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
                dof += 1;
            } else {
                assert!(
                    pool_o < 20.0,
                    "samples where the pdf says none can land: {pool_o}"
                );
            }
            let k = (dof - 1) as f64;
            let z = 3.719; // 1e-4 upper quantile of the standard normal
            let crit = k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3);
            assert!(
                chi2 < crit,
                "N = {ns}: chi2 {chi2:.1} over {k} dof, critical {crit:.1}"
            );
        }
    }
}
