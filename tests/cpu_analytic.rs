//! The CPU path tracer against answers computed here, independently of its code, for the light
//! paths the backend-vs-backend tests cannot vouch for (they compare the GPU port with the code
//! it was ported from, so a bug in both would pass):
//!
//! - an emitter seen in a mirror: exactly `Ks Le`, and where a small one appears, by tracing the
//!   reflection here in f64;
//! - an emitter seen through a glass slab: the Fresnel equations in closed form, with the series
//!   of internal reflections;
//! - glossy direct lighting from a small light (next-event estimation with MIS on a glossy
//!   surface): the rendering equation integrated here by quadrature of the BRDF;
//! - a textured diffuse surface under uniform light: the texture's mean, and its quadrants.
//!
//! Every light is one-sided-safe: its front face (the side of `(p1 - p0) x (p2 - p0)`) faces
//! what it lights, so the tests hold whether emitters emit from one face or both.
//!
//! Statistical bound, as in `cpu_render.rs`: per channel `|mean - expected| < 4 se + eps
//! expected`, `se` the standard error of the mean of the samples (a false alarm about 6e-5 per
//! channel under the normal approximation; the samples are deterministic, so a test that
//! passes once always passes), `eps` stated per test for what the closed form leaves out.

mod cpu_common;

use cpu_common::*;
use gasworks::cpu::integrator::{LightSampler, PathTracer};
use gasworks::cpu::{CpuBackend, SceneBvh};
use gasworks::render::{RenderSettings, Sampler};
use gasworks::scene::{Camera, Environment, Material, MaterialKind, Scene, Texture};
use glam::{DVec3, Vec2, Vec3};

fn settings(eye: Vec3, at: Vec3, fov: f32, w: u32, h: u32, spp: u32, depth: u32) -> RenderSettings {
    RenderSettings {
        width: w,
        height: h,
        spp,
        max_depth: depth,
        seed: 17,
        camera: Camera {
            eye,
            look_at: at,
            up: Vec3::Y,
            fov_y_deg: fov,
        }
        .frame(w, h)
        .unwrap(),
    }
}

/// Every sample of every pixel, per pixel in row-major order.
fn samples(backend: &CpuBackend, s: &RenderSettings) -> Vec<Vec<Vec3>> {
    (0..s.width * s.height)
        .map(|p| {
            (0..s.spp)
                .map(|i| backend.sample(p % s.width, p / s.width, i))
                .collect()
        })
        .collect()
}

/// A black diffuse material emitting `le`.
fn emitter(name: &str, le: Vec3) -> Material {
    let mut m = Material::diffuse(name, Vec3::ZERO);
    m.emission = le;
    m
}

const KS: Vec3 = Vec3::new(0.9, 0.6, 0.3);
const LE: Vec3 = Vec3::new(2.0, 3.0, 4.0);

/// A mirror floor (Ks, facing up) under a lamp ceiling at height 3 (facing down), the camera
/// between them looking down at the mirror.
fn mirror_scene(lamp_lo: Vec3, lamp_size: f32) -> Scene {
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = KS;
    let (x, z) = (Vec3::X, Vec3::Z);
    Scene::new(
        "mirror",
        vec![
            // Normal z x x = +y: up, towards the camera.
            quad(
                "mirror",
                Vec3::new(-50.0, 0.0, -50.0),
                100.0 * z,
                100.0 * x,
                0,
            ),
            // Normal x x z = -y: down, towards the mirror.
            quad("lamp", lamp_lo, lamp_size * x, lamp_size * z, 1),
        ],
        vec![mirror, emitter("lamp", LE)],
    )
}

fn mirror_view(w: u32, spp: u32) -> RenderSettings {
    settings(
        Vec3::new(0.0, 2.0, -2.0),
        Vec3::new(0.0, 0.0, 1.0),
        20.0,
        w,
        w,
        spp,
        5,
    )
}

/// A light seen in a mirror is the light's radiance times Ks, exactly: every camera ray here
/// reflects off the mirror into a lamp that fills the view. (The camera segment and the
/// mirror bounce are Dirac, so the emitter hit has full weight; nothing is random but the
/// pixel jitter, so the bound is float rounding, 1e-6.)
#[test]
fn a_light_seen_in_a_mirror_is_ks_times_its_radiance() {
    let scene = mirror_scene(Vec3::new(-40.0, 3.0, -40.0), 80.0);
    let s = mirror_view(16, 4);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let expected = KS * LE;
    for (p, pixel) in samples(&backend, &s).iter().enumerate() {
        for l in pixel {
            assert!(
                (*l - expected).abs().max_element() <= 1e-6 * expected.max_element(),
                "pixel {p}: {l} instead of Ks Le = {expected}"
            );
        }
    }
}

/// A small lamp seen in the mirror: the image mean is `Ks Le` times the fraction of the image
/// whose camera rays, reflected about the mirror plane, reach the lamp. The fraction is
/// computed here in f64 by tracing 32 x 32 stratified rays per pixel through the camera model
/// and the law of reflection (`d' = d - 2 (d . n) n` on the plane y = 0); its quadrature error
/// (boundary pixels) is far below the renderer's binomial standard error, which the bound uses.
#[test]
fn a_small_light_appears_in_the_mirror_where_the_law_of_reflection_puts_it() {
    let (lo, size) = (Vec3::new(-1.0, 3.0, 3.0), 1.5);
    let scene = mirror_scene(lo, size);
    let s = mirror_view(32, 16);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let cam = &s.camera;
    let eye = cam.eye.as_dvec3();
    let sub = 32;
    let mut seen = 0u64;
    for py in 0..s.height {
        for px in 0..s.width {
            for j in 0..sub {
                for i in 0..sub {
                    let fx = px as f64 + (i as f64 + 0.5) / sub as f64;
                    let fy = py as f64 + (j as f64 + 0.5) / sub as f64;
                    let sx = 2.0 * fx / s.width as f64 - 1.0;
                    let sy = 1.0 - 2.0 * fy / s.height as f64;
                    let d = (cam.w.as_dvec3() + sx * cam.u.as_dvec3() + sy * cam.v.as_dvec3())
                        .normalize();
                    // To the mirror (y = 0), reflect, up to the lamp plane (y = 3).
                    let t = -eye.y / d.y;
                    let hit = eye + t * d;
                    let r = DVec3::new(d.x, -d.y, d.z);
                    let q = hit + (3.0 - hit.y) / r.y * r;
                    let (x0, z0) = (lo.x as f64, lo.z as f64);
                    if q.x > x0 && q.x < x0 + size as f64 && q.z > z0 && q.z < z0 + size as f64 {
                        seen += 1;
                    }
                }
            }
        }
    }
    let fraction = seen as f64 / (s.width * s.height * sub * sub) as f64;
    assert!(
        fraction > 0.1 && fraction < 0.6,
        "the lamp should cover part of the view: {fraction}"
    );
    let all: Vec<Vec3> = samples(&backend, &s).into_iter().flatten().collect();
    for l in &all {
        let lit = (*l - KS * LE).abs().max_element() <= 1e-5;
        assert!(lit || *l == Vec3::ZERO, "a sample is Ks Le or black: {l}");
    }
    let (mean, se, _) = mean_and_se(all);
    assert_mean_within(
        "small lamp in a mirror",
        mean,
        se,
        (KS * LE).as_dvec3() * fraction,
        1e-3,
    );
}

/// Fresnel reflectance of a smooth dielectric for unpolarised light, from the Fresnel
/// equations (written here in f64): the mean of the s and p reflectances.
fn fresnel(cos_i: f64, n1: f64, n2: f64) -> f64 {
    let sin_t = n1 / n2 * (1.0 - cos_i * cos_i).max(0.0).sqrt();
    if sin_t >= 1.0 {
        return 1.0;
    }
    let cos_t = (1.0 - sin_t * sin_t).sqrt();
    let rs = (n1 * cos_i - n2 * cos_t) / (n1 * cos_i + n2 * cos_t);
    let rp = (n2 * cos_i - n1 * cos_t) / (n2 * cos_i + n1 * cos_t);
    0.5 * (rs * rs + rp * rp)
}

/// A lamp (radiance Le) seen through a clear slab of glass of index n and tint Tf, at near
/// normal incidence (the camera's field of view is 2 degrees, so every ray is within 1.5
/// degrees of the normal). Light crossing the slab refracts in and out (weight Tf each time;
/// the radiance scaling n^2 in and 1/n^2 out cancels) and may reflect an even number of times
/// inside (R each time, the same R at both faces by reciprocity):
///
/// `L = Le Tf^2 (1 - R)^2 (1 + R^2 + R^4 + ...) = Le Tf^2 (1 - R) / (1 + R)`.
///
/// With n = 2, R = 1/9 at normal incidence and the answer is 0.8 Le Tf^2 (the first term
/// alone, 0.790, is 12 standard errors away: the internal reflections are resolved). The
/// expectation is averaged over the pixels' directions with R from the Fresnel equations at
/// each pixel centre (unpolarised light, as the renderer models it; at 1.5 degrees the s and p
/// reflectances differ by under 1e-4 relative, and R by 2e-5 from its normal value). `eps`:
/// 2e-4 (direction variation within a pixel; truncation at 16 segments, R^14 ~ 1e-13).
#[test]
fn a_light_seen_through_a_glass_slab_follows_the_fresnel_series() {
    let ior = 2.0f32;
    let tf = Vec3::new(1.0, 0.8, 0.5);
    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = ior;
    glass.transmittance = tf;
    let (x, y) = (Vec3::X, Vec3::Y);
    let scene = Scene::new(
        "slab",
        vec![
            // Entry face at z = 0, normal y x x = -z (towards the camera, out of the glass).
            quad("front", Vec3::new(-20.0, -20.0, 0.0), 40.0 * y, 40.0 * x, 0),
            // Exit face at z = 1, normal x x y = +z (out of the glass).
            quad("back", Vec3::new(-20.0, -20.0, 1.0), 40.0 * x, 40.0 * y, 0),
            // The lamp at z = 2, normal y x x = -z: towards the slab and the camera.
            quad("lamp", Vec3::new(-20.0, -20.0, 2.0), 40.0 * y, 40.0 * x, 1),
        ],
        vec![glass, emitter("lamp", LE)],
    );
    let s = settings(Vec3::new(0.0, 0.0, -5.0), Vec3::ZERO, 2.0, 32, 32, 256, 16);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let cam = &s.camera;
    let mut factor = 0.0f64;
    for py in 0..s.height {
        for px in 0..s.width {
            let d = cam.direction(px as f32 + 0.5, py as f32 + 0.5).as_dvec3();
            let r = fresnel(d.z, 1.0, ior as f64);
            factor += (1.0 - r) / (1.0 + r);
        }
    }
    factor /= (s.width * s.height) as f64;
    let expected = (LE * tf * tf).as_dvec3() * factor;
    let (mean, se, _) = mean_and_se(samples(&backend, &s).into_iter().flatten());
    assert_mean_within("lamp through a glass slab", mean, se, expected, 2e-4);
    // The single-crossing term alone is refused: the internal reflections are there.
    let r0 = fresnel(1.0, 1.0, ior as f64);
    let first_term = (LE * tf * tf).as_dvec3() * (1.0 - r0) * (1.0 - r0);
    assert!(
        (mean.x - first_term.x).abs() > 6.0 * se.x,
        "{mean} {first_term}"
    );
}

/// The glossy BRDF (Lambert plus normalized Phong, `f = kd / pi + ks (N + 2) / (2 pi)
/// cos^N(alpha)`, alpha from the mirror direction of `wo` about `n`), written here in f64.
fn glossy_brdf(kd: f64, ks: f64, n_exp: f64, n: DVec3, wo: DVec3, wi: DVec3) -> f64 {
    if wo.dot(n) <= 0.0 || wi.dot(n) <= 0.0 {
        return 0.0;
    }
    let r = 2.0 * wo.dot(n) * n - wo;
    kd / std::f64::consts::PI
        + ks * (n_exp + 2.0) / (2.0 * std::f64::consts::PI) * wi.dot(r).max(0.0).powf(n_exp)
}

/// Glossy direct lighting: the radiance leaving a glossy floor point towards `wo`, lit by a
/// small square lamp (radiance Le, facing the floor) placed around the mirror direction, with
/// `max_depth = 2` (direct light only), against the rendering equation integrated here over
/// the lamp's area: `L = int_A f(wo, wi) Le cos_i cos_l / r^2 dA`, midpoint rule on 400 x 400
/// (relative quadrature error well under 1e-4 for this smooth integrand, `eps` 2e-4). This is
/// next-event estimation on a glossy surface with MIS against BSDF sampling (which finds the
/// lamp often, as it lies in the lobe), at three viewing angles.
#[test]
fn glossy_direct_lighting_matches_the_brdf_integrated_over_the_light() {
    let (kd, ks, n_exp) = (0.2f32, 0.6f32, 20.0f32);
    let le = 3.0f32;
    let mut floor = material("glossy", MaterialKind::Glossy);
    floor.diffuse = Vec3::splat(kd);
    floor.specular = Vec3::splat(ks);
    floor.shininess = n_exp;
    let size = 0.5f32;
    let lo = Vec3::new(0.75, 1.0, -0.25);
    let (x, z) = (Vec3::X, Vec3::Z);
    let scene = Scene::new(
        "glossy",
        vec![
            // Normal z x x = +y.
            quad("floor", Vec3::new(-10.0, 0.0, -10.0), 20.0 * z, 20.0 * x, 0),
            // Normal x x z = -y: towards the floor.
            quad("lamp", lo, size * x, size * z, 1),
        ],
        vec![floor, emitter("lamp", Vec3::splat(le))],
    );
    let bvh = SceneBvh::build(&scene);
    let lights = LightSampler::new(&scene);
    let tracer = PathTracer {
        scene: &scene,
        bvh: &bvh,
        lights: &lights,
        max_depth: 2,
    };
    let n = DVec3::Y;
    for (k, elevation) in [45.0f64, 30.0, 60.0].into_iter().enumerate() {
        // Looking at the origin from -x, so the mirror direction rises towards +x, the lamp.
        let e = elevation.to_radians();
        let wo = DVec3::new(-e.cos(), e.sin(), 0.0);
        let steps = 400;
        let mut sum = 0.0;
        for i in 0..steps {
            for j in 0..steps {
                let q = lo.as_dvec3()
                    + DVec3::new(
                        (i as f64 + 0.5) / steps as f64 * size as f64,
                        0.0,
                        (j as f64 + 0.5) / steps as f64 * size as f64,
                    );
                let r2 = q.length_squared();
                let wi = q / r2.sqrt();
                let cos_i = wi.y;
                let cos_l = wi.y; // the lamp faces straight down
                sum +=
                    glossy_brdf(kd as f64, ks as f64, n_exp as f64, n, wo, wi) * cos_i * cos_l / r2;
            }
        }
        let da = (size as f64 / steps as f64).powi(2);
        let expected = le as f64 * sum * da;
        let origin = (wo * 0.05).as_vec3();
        let dir = (-wo).as_vec3();
        let (mean, se, _) = mean_and_se((0..60_000u32).map(|i| {
            let mut rng = Sampler::new(k as u32, 0, i, 60_000, 23);
            tracer.radiance(origin, dir, &mut rng)
        }));
        assert_mean_within(
            &format!("glossy direct light at {elevation} degrees"),
            mean,
            se,
            DVec3::splat(expected),
            2e-4,
        );
    }
}

/// A 2 x 2 texture (rows top to bottom) of distinct colours.
fn quadrant_texture() -> Texture {
    Texture {
        path: "quadrants".into(),
        width: 2,
        height: 2,
        texels: vec![
            [0.9, 0.2, 0.1],
            [0.1, 0.8, 0.3],
            [0.4, 0.4, 0.9],
            [0.7, 0.1, 0.6],
        ],
        mapping: gasworks::scene::UvMapping::IDENTITY,
    }
}

/// A textured diffuse wall filling the view under a uniform environment L, `max_depth = 2`:
/// a reflected ray always escapes (one plane), so each sample is `Kd tex(uv) L` exactly, at
/// the uv the pixel jitter lands on. The wall's UVs map the visible rectangle onto exactly one
/// texture period, u left to right, v bottom to top (the camera model maps pixels affinely
/// onto a plane facing it, so jittered samples cover the period uniformly). The bilinear,
/// wrapping lookup then averages to the texel mean over the image, and over each image
/// quadrant to `(3/4, 1/4)` x `(3/4, 1/4)` weights of the nearest texel and its neighbours
/// (the mean of a linear ramp between texel centres over a half period). `eps` 1e-4.
#[test]
fn a_texture_under_uniform_light_shows_its_mean_and_its_quadrants() {
    let env = Vec3::new(1.5, 1.0, 0.5);
    let kd = Vec3::new(0.8, 0.9, 1.0);
    let mut m = Material::diffuse("textured", kd);
    m.diffuse_texture = Some(0);
    let s = settings(Vec3::new(0.0, 0.0, -3.0), Vec3::ZERO, 40.0, 32, 32, 16, 2);
    let cam = &s.camera;
    // The visible rectangle on z = 0: eye + 3 (w + sx u + sy v), sx, sy in [-1, 1].
    let (right, up) = (cam.u * 3.0, cam.v * 3.0);
    let bottom_left = -right - up;
    let uv = |p: Vec3| {
        let d = p - bottom_left;
        Vec2::new(
            d.dot(right) / (2.0 * right.length_squared()),
            d.dot(up) / (2.0 * up.length_squared()),
        )
    };
    // A wall twice the visible size, facing the camera (normal right x up = -z).
    let corner = bottom_left - right - up;
    let mut wall = quad("wall", corner, 4.0 * right, 4.0 * up, 0);
    assert!(right.cross(up).z < 0.0);
    wall.uvs = wall.positions.iter().map(|&p| uv(p)).collect();
    let mut scene = Scene::new("textured", vec![wall], vec![m]);
    scene.textures = vec![quadrant_texture()];
    scene.environment = Some(Environment { radiance: env });
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let per_pixel = samples(&backend, &s);

    let t = |r: usize, c: usize| Vec3::from(quadrant_texture().texels[2 * r + c]).as_dvec3();
    let scale = (kd * env).as_dvec3();
    let all_mean = (t(0, 0) + t(0, 1) + t(1, 0) + t(1, 1)) / 4.0;
    let (mean, se, _) = mean_and_se(per_pixel.iter().flatten().copied());
    assert_mean_within("textured wall", mean, se, all_mean * scale, 1e-4);

    let (w, h) = (s.width as usize, s.height as usize);
    for (name, top, left) in [
        ("top left", true, true),
        ("top right", true, false),
        ("bottom left", false, true),
        ("bottom right", false, false),
    ] {
        // The texel nearest the quadrant gets 3/4 of each axis' weight.
        let (r, c) = (if top { 0 } else { 1 }, if left { 0 } else { 1 });
        let expected = (t(r, c) * 9.0 + t(r, 1 - c) * 3.0 + t(1 - r, c) * 3.0 + t(1 - r, 1 - c))
            / 16.0
            * scale;
        let quadrant = (0..w * h)
            .filter(|p| ((p / w) < h / 2) == top && ((p % w) < w / 2) == left)
            .flat_map(|p| per_pixel[p].iter().copied());
        let (mean, se, _) = mean_and_se(quadrant);
        assert_mean_within(&format!("textured wall, {name}"), mean, se, expected, 1e-4);
    }
}
