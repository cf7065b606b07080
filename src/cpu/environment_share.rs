//! `P(env)` for one render: how next-event estimation splits its light samples between an
//! environment map and the area lights, measured before the render.
//!
//! A scene lit both by a map (`--env-map`) and by area lights gives each next-event sample to
//! one of them. A fixed 1/2 spends half of them on the map even where the map cannot be seen:
//! a room lit by lamps, its windows closed, loses half its lamp samples to shadow rays that
//! are all blocked, and a sunlit street with one faint lamp loses half its sun samples. The
//! variance of a strategy's part of the estimate goes as the inverse of its share, so the
//! strategies whose samples bring more light into the image should get more of them.
//!
//! [`probe`] measures that. It traces [`PROBE_PATHS`] short paths from the camera, spread over
//! the whole frame on a grid (a crop's render measures the same frame, so crops of one frame
//! agree), and at every vertex where next-event estimation would run draws one sample of each
//! strategy with the integrator's own routines ([`PathTracer::environment_light_sample`],
//! [`PathTracer::area_light_sample`]): the map's compensated importance sampling, the lights'
//! choice by power, the shadow rays, the material's BSDF. Each sample's luminance times the
//! path's throughput, without MIS weight, is what that strategy would add to the image there
//! (the vertices after the first count too: a room seen from inside may be lit by the sun
//! only where it falls through a window). The share follows the root mean squares of the two
//! ([`share_of`]: the split with the least variance), clamped to [[`MIN_SHARE`], 1 -
//! [`MIN_SHARE`]] so that light the probe missed is still sampled, and rounded to a multiple
//! of 1/256.
//!
//! The probe is a pure function of the scene, the camera and the depth: its random numbers
//! come from the sampler with a fixed seed, the paths are traced in parallel but summed in
//! order, so every run, thread count, cluster rank and resumed render gets the same share,
//! and the GPU backend uploads it as it is (it is part of the render's key). Its cost is that
//! of a tiny render: 16384 paths of at most [`PROBE_DEPTH`] segments, three rays per vertex.
//!
//! Any share in (0, 1) gives an unbiased image: `P(env)` enters both the density of the map's
//! samples and the MIS weights of BSDF samples that escape (see [`super::integrator`]); the
//! probe only lowers the variance.

use glam::Vec3;
use rayon::prelude::*;
#[cfg(test)]
use std::f64::consts::PI;

use super::bvh::{RayData, SceneBvh};
use super::integrator::{camera_ray, LightSample, LightSampler, PathTracer, SurfacePoint};
use super::material::{Bsdf, ShadingFrame};
use crate::colour::luminance;
use crate::render::sampler::Sampler;
use crate::scene::camera::CameraFrame;
use crate::scene::light_power::fixed_environment_share;
use crate::scene::Scene;

/// The number of probe paths: a grid of about this many cells over the frame, one path each.
pub const PROBE_PATHS: u32 = 16384;
/// The most segments a probe path traces (fewer when the render's `--max-depth` is lower):
/// enough for light that reaches the image after one or two bounces.
pub const PROBE_DEPTH: u32 = 4;
/// The smallest share either strategy gets, however little light the probe saw it bring.
pub const MIN_SHARE: f32 = 1.0 / 16.0;
/// The probe's own seed: the share does not depend on the render's `--seed`.
const PROBE_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// What [`probe`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareProbe {
    /// `P(env)`: the share of next-event samples for the map.
    pub share: f32,
    /// The luminance the map's samples brought, summed over the probe (unnormalized).
    pub environment: f64,
    /// The luminance the area lights' samples brought, on the same scale.
    pub area_lights: f64,
    /// The sum of the squares of the map's samples' luminances: their second moment, up to
    /// the number of samples.
    pub environment_squares: f64,
    /// The same for the area lights' samples.
    pub area_light_squares: f64,
    /// The paths traced.
    pub paths: u32,
    /// The vertices where both strategies were sampled.
    pub vertices: u64,
}

/// The grid of probe cells for a frame of `width` x `height` pixels: about [`PROBE_PATHS`]
/// cells of about square shape, at least one per side.
fn grid(width: u32, height: u32) -> (u32, u32) {
    let aspect = f64::from(width.max(1)) / f64::from(height.max(1));
    let gw = (f64::from(PROBE_PATHS) * aspect)
        .sqrt()
        .round()
        .clamp(1.0, f64::from(PROBE_PATHS));
    let gw = gw as u32;
    let gh = (PROBE_PATHS / gw).max(1);
    (gw, gh)
}

/// Measures `P(env)` for a render of `scene` through `camera` at `max_depth` segments (see the
/// module comment). Meant for scenes with both a sampleable map and area lights; for others it
/// returns the share [`crate::scene::light_power::environment_share`] gives them anyway (0 or 1)
/// without tracing anything.
pub fn probe(scene: &Scene, bvh: &SceneBvh, camera: &CameraFrame, max_depth: u32) -> ShareProbe {
    let fixed = |share: f32| ShareProbe {
        share,
        environment: 0.0,
        area_lights: 0.0,
        environment_squares: 0.0,
        area_light_squares: 0.0,
        paths: 0,
        vertices: 0,
    };
    if let Some(share) = fixed_environment_share(scene) {
        return fixed(share);
    }
    let Some(map) = scene.environment_map.as_deref() else {
        return fixed(0.0);
    };
    // Both strategies are drawn at every vertex with P(env) = 1/2, so each sample's density
    // carries the same factor 1/2 and their ratio is that of the light they bring.
    let lights = LightSampler::with_environment_share(scene, 0.5);
    let tracer = PathTracer {
        scene,
        bvh,
        lights: &lights,
        max_depth: max_depth.min(PROBE_DEPTH),
    };
    let (gw, gh) = grid(camera.width, camera.height);
    let cells: Vec<PathSums> = (0..gw * gh)
        .into_par_iter()
        .map(|i| probe_path(&tracer, map, camera, (i % gw, i / gw), (gw, gh)))
        .collect();
    // Summed in order: the same bits whatever the threads did.
    let mut sums = PathSums::default();
    for c in cells {
        sums.environment += c.environment;
        sums.area_lights += c.area_lights;
        sums.environment_squares += c.environment_squares;
        sums.area_light_squares += c.area_light_squares;
        sums.vertices += c.vertices;
    }
    ShareProbe {
        share: share_of(sums.environment_squares, sums.area_light_squares),
        environment: sums.environment,
        area_lights: sums.area_lights,
        environment_squares: sums.environment_squares,
        area_light_squares: sums.area_light_squares,
        paths: gw * gh,
        vertices: sums.vertices,
    }
}

/// The share that minimizes the variance of next-event estimation, from the two strategies'
/// second moments: one sample of strategy `i` taken with probability `p_i` and divided by it
/// has the second moment `sum_i E[X_i^2] / p_i`, least for `p_i` proportional to
/// `sqrt(E[X_i^2])`. (In proportion to the means instead, light that arrives rarely but
/// brightly, the sun through a gap, gets too few samples: docs/guide/environment-maps.md.)
/// Clamped to [[`MIN_SHARE`], 1 - [`MIN_SHARE`]] and rounded to a multiple of 1/256; 1/2
/// where neither strategy found any light.
pub fn share_of(environment_squares: f64, area_light_squares: f64) -> f32 {
    let (e, a) = (environment_squares.sqrt(), area_light_squares.sqrt());
    let total = e + a;
    if !(total > 0.0 && total.is_finite()) {
        return 0.5;
    }
    let raw = (e / total) as f32;
    ((raw * 256.0).round() / 256.0).clamp(MIN_SHARE, 1.0 - MIN_SHARE)
}

/// One probe path's sums (see [`ShareProbe`]).
#[derive(Clone, Copy, Debug, Default)]
struct PathSums {
    environment: f64,
    area_lights: f64,
    environment_squares: f64,
    area_light_squares: f64,
    vertices: u64,
}

/// One probe path from grid cell `cell`: the luminance each strategy brought at each of its
/// vertices, summed and squared.
fn probe_path(
    tracer: &PathTracer,
    map: &crate::scene::EnvironmentMap,
    camera: &CameraFrame,
    (gx, gy): (u32, u32),
    (gw, gh): (u32, u32),
) -> PathSums {
    let scene = tracer.scene;
    let mut rng = Sampler::new(gx, gy, 0, 1, PROBE_SEED);
    let (jx, jy) = rng.next_2d();
    let px = (gx as f32 + jx) / gw as f32 * camera.width as f32;
    let py = (gy as f32 + jy) / gh as f32 * camera.height as f32;
    let (mut ray_o, mut ray_d) = camera_ray(camera, px, py, &mut rng);
    let mut throughput = Vec3::ONE;
    let mut sums = PathSums::default();
    for depth in 1..=tracer.max_depth {
        let Some(ray) = RayData::new(ray_o, ray_d) else {
            break;
        };
        let Some(hit) = tracer.bvh.intersect_ray(scene, &ray, 0.0, f32::INFINITY) else {
            break;
        };
        if depth == tracer.max_depth {
            break;
        }
        let sp = SurfacePoint::new(scene, &hit);
        let material = &scene.materials[sp.material as usize];
        let wo = -ray_d;
        let (u_e1, u_e2) = rng.next_2d();
        let u_pick = rng.next_1d();
        let (u_a1, u_a2) = rng.next_2d();
        let u_lobe = rng.next_1d();
        let (u_b1, u_b2) = rng.next_2d();
        let bsdf = Bsdf::new(
            material,
            &scene.textures,
            sp.uv,
            ShadingFrame::new(sp.n_geo, sp.n_shade, wo),
        );
        if !bsdf.is_delta() {
            sums.vertices += 1;
            let brought = |s: Option<LightSample>| {
                s.map_or(0.0, |s| {
                    f64::from(luminance(throughput * s.f_cos_le / s.p_light)).max(0.0)
                })
            };
            let e = brought(tracer.environment_light_sample(map, &sp, &bsdf, wo, u_e1, u_e2));
            let li = tracer.lights.pick(u_pick);
            let a = brought(tracer.area_light_sample(&sp, &bsdf, wo, li, u_a1, u_a2));
            sums.environment += e;
            sums.environment_squares += e * e;
            sums.area_lights += a;
            sums.area_light_squares += a * a;
        }
        let Some(bs) = bsdf.sample(wo, u_lobe, u_b1, u_b2) else {
            break;
        };
        throughput *= bs.weight;
        if throughput.max_element() <= 0.0 || !throughput.is_finite() {
            break;
        }
        ray_o = sp.origin_towards(bs.wi);
        ray_d = bs.wi;
    }
    // A non-finite sum (a degenerate sample) says nothing: the cell is left out.
    if sums.environment_squares.is_finite() && sums.area_light_squares.is_finite() {
        sums
    } else {
        PathSums::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::scene::{Camera, EnvironmentMap, Group, Material};

    /// A group of quads, each given by four corners in winding order.
    fn quads(name: &str, corners: &[[Vec3; 4]], material: u32) -> Group {
        let mut g = Group {
            name: name.into(),
            ..Default::default()
        };
        for q in corners {
            let base = g.positions.len() as u32;
            g.positions.extend_from_slice(q);
            g.indices.push([base, base + 1, base + 2]);
            g.indices.push([base, base + 2, base + 3]);
            g.face_materials.extend([material, material]);
        }
        g
    }

    fn lamp(emission: f32) -> Material {
        let mut m = Material::default_diffuse();
        m.emission = Vec3::splat(emission);
        m
    }

    fn frame(eye: Vec3, look_at: Vec3, up: Vec3, fov: f32) -> CameraFrame {
        Camera {
            eye,
            look_at,
            up,
            fov_y_deg: fov,
        }
        .frame(64, 48)
        .unwrap()
    }

    fn probe_scene(scene: &Scene, camera: &CameraFrame) -> ShareProbe {
        probe(scene, &SceneBvh::build(scene), camera, 8)
    }

    /// A floor 2 wide at y = 0, seen from straight above through a narrow view, lit by a
    /// uniform map of radiance 1 and by a 1 x 1 lamp facing down at height 10 with `Le`
    /// `emission`.
    fn floor_under_sky_and_lamp(emission: f32) -> (Scene, CameraFrame) {
        let v = Vec3::new;
        let floor = quads(
            "floor",
            &[[
                v(-1.0, 0.0, -1.0),
                v(-1.0, 0.0, 1.0),
                v(1.0, 0.0, 1.0),
                v(1.0, 0.0, -1.0),
            ]],
            0,
        );
        let light = quads(
            "lamp",
            &[[
                v(-0.5, 10.0, -0.5),
                v(0.5, 10.0, -0.5),
                v(0.5, 10.0, 0.5),
                v(-0.5, 10.0, 0.5),
            ]],
            1,
        );
        let mut scene = Scene::new(
            "floor",
            vec![floor, light],
            vec![Material::default_diffuse(), lamp(emission)],
        );
        scene.set_environment_map(EnvironmentMap::uniform(Vec3::ONE).unwrap());
        let camera = frame(v(0.0, 5.0, 0.0), Vec3::ZERO, Vec3::Z, 8.0);
        (scene, camera)
    }

    #[test]
    fn the_share_is_the_maps_part_of_the_direct_light() {
        // Irradiance on the viewed patch: pi from the sky (less the 0.01 sr the lamp hides,
        // about 0.3%), Le A / h^2 = Le / 100 from the lamp (cosines within 0.5% of 1). The
        // floor's albedo multiplies both.
        for (emission, expected) in [(100.0, PI / (PI + 1.0)), (300.0, PI / (PI + 3.0))] {
            let (scene, camera) = floor_under_sky_and_lamp(emission);
            let p = probe_scene(&scene, &camera);
            // 64 x 48 pixels: 148 x 110 cells. Every path hits the floor; a few bounce off it
            // to the lamp's face and sample there too.
            assert_eq!(p.paths, 148 * 110, "{p:?}");
            assert!(p.vertices >= u64::from(p.paths), "{p:?}");
            let part = p.environment / (p.environment + p.area_lights);
            assert!(
                (part - expected).abs() < 0.012,
                "Le {emission}: {part} vs {expected}"
            );
            // The share weighs the root mean squares, rounded to 1/256.
            let (e, a) = (p.environment_squares.sqrt(), p.area_light_squares.sqrt());
            assert!(
                (f64::from(p.share) - e / (e + a)).abs() <= 1.0 / 512.0 + 1e-9,
                "{p:?}"
            );
            assert_eq!(p.share * 256.0, (p.share * 256.0).round());
            assert_eq!(
                p.share,
                share_of(p.environment_squares, p.area_light_squares)
            );
        }
    }

    #[test]
    fn a_map_the_camera_cannot_see_gets_the_smallest_share_and_a_dim_lamp_too() {
        let v = Vec3::new;
        // A closed cube, 2 units wide, with a lamp under its ceiling; the camera inside.
        let (lo, hi) = (-1.0, 1.0);
        let c = |x: f32, y: f32, z: f32| v(x, y, z);
        let walls = quads(
            "box",
            &[
                [c(lo, lo, lo), c(hi, lo, lo), c(hi, lo, hi), c(lo, lo, hi)],
                [c(lo, hi, lo), c(lo, hi, hi), c(hi, hi, hi), c(hi, hi, lo)],
                [c(lo, lo, lo), c(lo, lo, hi), c(lo, hi, hi), c(lo, hi, lo)],
                [c(hi, lo, lo), c(hi, hi, lo), c(hi, hi, hi), c(hi, lo, hi)],
                [c(lo, lo, lo), c(lo, hi, lo), c(hi, hi, lo), c(hi, lo, lo)],
                [c(lo, lo, hi), c(hi, lo, hi), c(hi, hi, hi), c(lo, hi, hi)],
            ],
            0,
        );
        let light = quads(
            "lamp",
            &[[
                v(-0.2, 0.9, -0.2),
                v(0.2, 0.9, -0.2),
                v(0.2, 0.9, 0.2),
                v(-0.2, 0.9, 0.2),
            ]],
            1,
        );
        let mut scene = Scene::new(
            "closed",
            vec![walls, light],
            vec![Material::default_diffuse(), lamp(10.0)],
        );
        scene.set_environment_map(EnvironmentMap::uniform(Vec3::splat(5.0)).unwrap());
        let inside = frame(v(0.0, 0.0, 0.9), v(0.0, 0.0, -1.0), Vec3::Y, 60.0);
        let p = probe_scene(&scene, &inside);
        assert_eq!(p.environment, 0.0, "{p:?}");
        assert!(p.area_lights > 0.0, "{p:?}");
        assert_eq!(p.share, MIN_SHARE);

        // The other way round: a lamp far too dim to matter beside the sky.
        let (scene, camera) = floor_under_sky_and_lamp(1e-3);
        assert_eq!(probe_scene(&scene, &camera).share, 1.0 - MIN_SHARE);
    }

    #[test]
    fn the_probe_is_the_same_on_any_number_of_threads() {
        let (scene, camera) = floor_under_sky_and_lamp(100.0);
        let bvh = SceneBvh::build(&scene);
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| probe(&scene, &bvh, &camera, 8))
        };
        let one = on(1);
        for threads in [2, 5] {
            let p = on(threads);
            assert_eq!(p.environment.to_bits(), one.environment.to_bits());
            assert_eq!(p.area_lights.to_bits(), one.area_lights.to_bits());
            assert_eq!(p, one);
        }
    }

    #[test]
    fn scenes_that_leave_no_choice_are_not_probed() {
        let (mut scene, camera) = floor_under_sky_and_lamp(100.0);
        // Without area lights every light sample goes to the map.
        let mut no_lamp = scene.clone();
        no_lamp.materials[1].emission = Vec3::ZERO;
        no_lamp.finalize();
        assert!(no_lamp.lights.is_empty());
        let p = probe_scene(&no_lamp, &camera);
        assert_eq!((p.share, p.paths), (1.0, 0));
        // Without a map none does.
        scene.environment_map = None;
        let p = probe_scene(&scene, &camera);
        assert_eq!((p.share, p.paths), (0.0, 0));
        // A black map cannot be sampled.
        scene.set_environment_map(Arc::new(
            EnvironmentMap::from_texels("black", 2, 1, vec![Vec3::ZERO; 2], 0.0).unwrap(),
        ));
        assert_eq!(probe_scene(&scene, &camera).share, 0.0);
    }

    #[test]
    fn shares_follow_the_root_mean_squares() {
        assert_eq!(share_of(1.0, 1.0), 0.5);
        // sqrt(9) : sqrt(1) = 3 : 1.
        assert_eq!(share_of(9.0, 1.0), 0.75);
        assert_eq!(share_of(1.0, 9.0), 0.25);
        assert_eq!(share_of(0.0, 5.0), MIN_SHARE);
        assert_eq!(share_of(5.0, 0.0), 1.0 - MIN_SHARE);
        assert_eq!(share_of(0.0, 0.0), 0.5);
        assert_eq!(share_of(f64::INFINITY, 1.0), 0.5);
        // Rounded to 1/256: 1 / (1 + sqrt(2)) = 0.41421... is 106.04 / 256.
        assert_eq!(share_of(1.0, 2.0), 106.0 / 256.0);
    }

    #[test]
    fn the_grid_covers_the_frame_with_about_square_cells() {
        assert_eq!(grid(64, 64), (128, 128));
        let (w, h) = grid(1920, 1080);
        assert!((16_000..=PROBE_PATHS).contains(&(w * h)), "{w}x{h}");
        assert!(
            (f64::from(w) / f64::from(h) - 16.0 / 9.0).abs() < 0.03,
            "{w}x{h}"
        );
        assert_eq!(grid(1, 100_000), (1, PROBE_PATHS));
        assert_eq!(grid(100_000, 1), (PROBE_PATHS, 1));
    }
}
