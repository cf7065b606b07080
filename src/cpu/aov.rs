//! Guide layers for denoisers (AOVs): per pixel, the *albedo* and the *shading normal* of the
//! surface the camera sees, the inputs an AI denoiser (Intel Open Image Denoise, the OptiX
//! denoiser) takes beside the noisy image to keep edges and textures sharp.
//!
//! # What each pixel holds
//!
//! The camera rays are the render's own: sample `i` of pixel `(x, y)` draws the pixel jitter
//! (and the lens point) from the same [`Sampler`] slots as the path tracer, so the layers see
//! exactly the surfaces the render's first segments do, antialiased and defocused alike.
//! The first `samples` samples of each pixel are traced (a power-of-two run of the pixel's
//! samples, stratified like the render's), and averaged with equal weights, as the film
//! averages the render's (the tent filter is in where the jitter puts them).
//!
//! Along each camera ray, Dirac surfaces (mirror, glass) are followed, with the same random
//! numbers as the path tracer (so glass picks reflection or refraction as the render's path
//! does), to the first surface that is not one, as Open Image Denoise's documentation
//! recommends for perfect specular surfaces, up to `--max-depth` segments:
//! - albedo: that surface's reflectance (`Kd`, textures applied; `Kd + Ks` for glossy; a
//!   Dirac surface's own tint when the path ends on one), times the tints of the Dirac
//!   surfaces before it, clamped to [0, 1]; where the ray escapes, the environment's
//!   radiance in its direction, clamped to [0, 1] (the background is its own colour);
//! - normal: that surface's shading normal in world space, on the side the ray comes from
//!   (bump maps applied); where the ray escapes, zero (the denoisers' "no surface here"). The
//!   average of a pixel's samples is not renormalized: across an edge it is shorter than 1,
//!   which the denoisers accept (they take normals of any length in [-1, 1]).
//!
//! The layers come from the CPU BVH whatever backend rendered the image: one camera ray (and
//! a few Dirac bounces) per traced sample, a small fraction of the render's work.

use glam::Vec3;
use rayon::prelude::*;

use super::bvh::{RayData, SceneBvh};
use super::integrator::{pixel_ray, SurfacePoint};
use super::material::{Bsdf, ShadingFrame};
use crate::render::sampler::Sampler;
use crate::render::{RenderSettings, Tile};
use crate::scene::{MaterialKind, Scene};

/// A guide layer a render can write beside its image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Aov {
    /// The albedo of the surface seen (through mirrors and glass), linear, in [0, 1].
    Albedo,
    /// Its world-space shading normal, in [-1, 1]; zero where nothing is hit.
    Normal,
}

impl Aov {
    /// The layer's name in file names and render keys.
    pub fn name(self) -> &'static str {
        match self {
            Aov::Albedo => "albedo",
            Aov::Normal => "normal",
        }
    }
}

/// The layers of one window of the frame, row-major, `window.w x window.h` pixels each.
#[derive(Clone, Debug, PartialEq)]
pub struct GuideLayers {
    pub albedo: Vec<[f32; 3]>,
    pub normal: Vec<[f32; 3]>,
}

impl GuideLayers {
    /// The pixels of `aov`.
    pub fn layer(&self, aov: Aov) -> &[[f32; 3]] {
        match aov {
            Aov::Albedo => &self.albedo,
            Aov::Normal => &self.normal,
        }
    }
}

/// How many of each pixel's samples the layers trace: `wanted`, but at most the render's
/// `spp`, rounded down to a power of two (a power-of-two run of a pixel's samples covers the
/// pixel evenly), and at least 1.
pub fn guide_samples(wanted: u32, spp: u32) -> u32 {
    let n = wanted.min(spp).max(1);
    1 << (31 - n.leading_zeros())
}

/// The albedo and normal layers of `window` (see the module comment), from the first
/// `samples` samples of each pixel of the render `settings` describes, in parallel over rows
/// on the current rayon pool.
pub fn guide_layers(
    scene: &Scene,
    bvh: &SceneBvh,
    settings: &RenderSettings,
    window: Tile,
    samples: u32,
) -> GuideLayers {
    let w = window.w as usize;
    let n = w * window.h as usize;
    let mut albedo = vec![[0.0; 3]; n];
    let mut normal = vec![[0.0; 3]; n];
    let samples = samples.max(1);
    albedo
        .par_chunks_mut(w.max(1))
        .zip(normal.par_chunks_mut(w.max(1)))
        .enumerate()
        .for_each(|(row, (albedo_row, normal_row))| {
            let y = window.y + row as u32;
            for (i, (a, nrm)) in albedo_row.iter_mut().zip(normal_row).enumerate() {
                let x = window.x + i as u32;
                let (mut sum_a, mut sum_n) = (Vec3::ZERO, Vec3::ZERO);
                for s in 0..samples {
                    let (sa, sn) = guide_sample(scene, bvh, settings, (x, y), s);
                    sum_a += sa;
                    sum_n += sn;
                }
                let k = 1.0 / samples as f32;
                *a = (sum_a * k).to_array();
                *nrm = (sum_n * k).to_array();
            }
        });
    GuideLayers { albedo, normal }
}

/// One sample's albedo and normal: the camera ray of sample `sample` of pixel `(x, y)`, as
/// [`crate::cpu::integrator::PathTracer::sample`] makes it, followed through Dirac surfaces.
fn guide_sample(
    scene: &Scene,
    bvh: &SceneBvh,
    settings: &RenderSettings,
    (x, y): (u32, u32),
    sample: u32,
) -> (Vec3, Vec3) {
    let mut rng = Sampler::new(x, y, sample, settings.spp, settings.seed);
    let (mut origin, mut dir) = pixel_ray(&settings.camera, (x, y), &mut rng);
    let mut tint = Vec3::ONE;
    for depth in 1..=settings.max_depth {
        let Some(ray) = RayData::new(origin, dir) else {
            break;
        };
        let Some(hit) = bvh.intersect_ray(scene, &ray, 0.0, f32::INFINITY) else {
            return (clamp01(tint * environment(scene, dir)), Vec3::ZERO);
        };
        let sp = SurfacePoint::new(scene, &hit);
        let material = &scene.materials[sp.material as usize];
        let wo = -dir;
        let frame = ShadingFrame::new(sp.n_geo, sp.n_shade, wo);
        let bsdf = Bsdf::new(material, &scene.textures, sp.uv, frame);
        if !bsdf.is_delta() || depth == settings.max_depth {
            return (clamp01(tint * reflectance(&bsdf)), frame.n);
        }
        // The path tracer's numbers of this vertex, in its order (light, light point, lobe,
        // direction, roulette), so that glass turns the way the render's path turns.
        let _u_light = rng.next_1d();
        let _u_light_point = rng.next_2d();
        let u_lobe = rng.next_1d();
        let (u1, u2) = rng.next_2d();
        let _u_roulette = rng.next_1d();
        let Some(bs) = bsdf.sample(wo, u_lobe, u1, u2) else {
            return (clamp01(tint * reflectance(&bsdf)), frame.n);
        };
        tint *= bs.weight;
        origin = sp.origin_towards(bs.wi);
        dir = bs.wi;
    }
    (Vec3::ZERO, Vec3::ZERO)
}

/// The radiance arriving from direction `dir` out of the scene: the uniform environment plus
/// the environment map's (bilinear) radiance.
fn environment(scene: &Scene, dir: Vec3) -> Vec3 {
    let map = scene
        .environment_map
        .as_deref()
        .map_or(Vec3::ZERO, |m| m.lookup(dir).0);
    scene.environment_radiance() + map
}

/// A surface's reflectance for the albedo layer: what it gives back of light arriving evenly.
fn reflectance(bsdf: &Bsdf) -> Vec3 {
    match bsdf.kind {
        MaterialKind::Diffuse => bsdf.kd,
        MaterialKind::Glossy => bsdf.kd + bsdf.ks,
        MaterialKind::Mirror => bsdf.ks,
        MaterialKind::Glass => bsdf.transmittance,
    }
}

fn clamp01(v: Vec3) -> Vec3 {
    // NaN (a degenerate texel) becomes 0: `max` returns the other operand.
    v.max(Vec3::ZERO).min(Vec3::ONE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::camera::Camera;

    fn cornell_settings(size: u32, spp: u32) -> (Scene, SceneBvh, RenderSettings) {
        let scene = crate::scene::gen::cornell();
        let bvh = SceneBvh::build(&scene);
        let camera: Camera = crate::scene::gen::cornell_camera();
        let settings = RenderSettings {
            width: size,
            height: size,
            spp,
            max_depth: 8,
            seed: 3,
            camera: camera.frame(size, size).unwrap(),
        };
        (scene, bvh, settings)
    }

    #[test]
    fn guide_samples_are_a_power_of_two_within_the_renders() {
        assert_eq!(guide_samples(16, 64), 16);
        assert_eq!(guide_samples(16, 8), 8);
        assert_eq!(guide_samples(16, 12), 8);
        assert_eq!(guide_samples(0, 64), 1);
        assert_eq!(guide_samples(u32::MAX, 1 << 24), 1 << 24);
        assert_eq!(guide_samples(5, 3), 2);
    }

    /// Every pixel's albedo is the mean of the albedos its samples see: brute force over the
    /// Cornell box's camera rays (the hit material's Kd, from a plain intersection), and the
    /// normals of a pixel whose samples all see the back wall are its normal exactly.
    #[test]
    fn the_cornell_box_layers_agree_with_a_brute_force_over_the_camera_rays() {
        let (scene, bvh, s) = cornell_settings(24, 8);
        let window = Tile::whole(24, 24);
        let layers = guide_layers(&scene, &bvh, &s, window, 4);
        let mut back_wall_pixels = 0;
        for y in 0..24u32 {
            for x in 0..24u32 {
                let mut expected = Vec3::ZERO;
                let mut materials = Vec::new();
                for i in 0..4 {
                    let mut rng = Sampler::new(x, y, i, 8, 3);
                    let (jx, jy) = rng.next_2d();
                    let (px, py) = s.camera.filter.place(x, y, jx, jy);
                    let ray = RayData::new(s.camera.eye, s.camera.direction(px, py)).unwrap();
                    match bvh.intersect_ray(&scene, &ray, 0.0, f32::INFINITY) {
                        Some(hit) => {
                            let m =
                                scene.groups[hit.group as usize].face_materials[hit.prim as usize];
                            materials.push(Some(m));
                            expected += clamp01(scene.materials[m as usize].diffuse);
                        }
                        None => {
                            materials.push(None);
                            expected += clamp01(scene.environment_radiance());
                        }
                    }
                }
                let got = Vec3::from(layers.albedo[(y * 24 + x) as usize]);
                assert!(
                    (got - expected / 4.0).abs().max_element() <= 1e-6,
                    "({x}, {y}): {got} against {}",
                    expected / 4.0
                );
                let n = Vec3::from(layers.normal[(y * 24 + x) as usize]);
                assert!(n.length() <= 1.0 + 1e-5, "({x}, {y}): {n}");
                if materials.iter().all(|m| m.is_none()) {
                    assert_eq!(n, Vec3::ZERO);
                }
            }
        }
        // The middle of the frame, above the blocks, sees the back wall (z = 559.2, facing the
        // camera at -z): its normal points back at the camera.
        for (x, y) in [(12u32, 6u32), (8, 6), (16, 6)] {
            let n = Vec3::from(layers.normal[(y * 24 + x) as usize]);
            if n.z < -0.999 {
                back_wall_pixels += 1;
            }
        }
        assert_eq!(
            back_wall_pixels, 3,
            "the middle of the frame is not the back wall"
        );
    }

    /// The layers of a window are the whole frame's pixels there: crops of the layers join
    /// into the whole, bit for bit, as crops of the image do.
    #[test]
    fn a_windows_layers_are_the_whole_frames_pixels_there() {
        let (scene, bvh, s) = cornell_settings(20, 4);
        let whole = guide_layers(&scene, &bvh, &s, Tile::whole(20, 20), 4);
        let window = Tile {
            x: 5,
            y: 7,
            w: 9,
            h: 6,
        };
        let crop = guide_layers(&scene, &bvh, &s, window, 4);
        for y in 0..window.h {
            for x in 0..window.w {
                let i = (y * window.w + x) as usize;
                let j = ((window.y + y) * 20 + window.x + x) as usize;
                assert_eq!(crop.albedo[i], whole.albedo[j]);
                assert_eq!(crop.normal[i], whole.normal[j]);
            }
        }
    }

    /// A mirror's albedo is its tint times what it reflects: a camera looking straight at a
    /// mirror square (Ks 0.5) that reflects a red diffuse square behind the camera sees
    /// 0.5 x red, and the normal of the red square on the side the reflected rays reach it
    /// from (-z).
    #[test]
    fn mirrors_pass_the_albedo_and_normal_of_what_they_reflect() {
        use crate::scene::{Environment, Group, Material};
        // Two squares facing each other across the camera at the origin: the mirror at
        // z = -5 (facing +z), the red one at z = +5 (facing -z), large enough to fill every
        // reflected ray.
        let quad = |name: &str, z: f32, half: f32, material: u32, facing_minus_z: bool| Group {
            name: name.into(),
            positions: vec![
                Vec3::new(-half, -half, z),
                Vec3::new(half, -half, z),
                Vec3::new(half, half, z),
                Vec3::new(-half, half, z),
            ],
            indices: if facing_minus_z {
                vec![[0, 2, 1], [0, 3, 2]]
            } else {
                vec![[0, 1, 2], [0, 2, 3]]
            },
            face_materials: vec![material, material],
            ..Default::default()
        };
        let mut mirror = Material::diffuse("mirror", Vec3::ZERO);
        mirror.kind = MaterialKind::Mirror;
        mirror.specular = Vec3::splat(0.5);
        let red = Material::diffuse("red", Vec3::new(0.8, 0.1, 0.1));
        let mut scene = Scene::new(
            "mirror and red square",
            vec![
                quad("mirror", -5.0, 10.0, 0, false),
                quad("red", 5.0, 100.0, 1, true),
            ],
            vec![mirror, red],
        );
        scene.set_environment(Environment {
            radiance: Vec3::ONE,
        });
        let bvh = SceneBvh::build(&scene);
        let camera = Camera {
            eye: Vec3::ZERO,
            look_at: Vec3::new(0.0, 0.0, -1.0),
            up: Vec3::Y,
            fov_y_deg: 20.0,
        };
        let settings = RenderSettings {
            width: 8,
            height: 8,
            spp: 4,
            max_depth: 8,
            seed: 1,
            camera: camera.frame(8, 8).unwrap(),
        };
        let layers = guide_layers(&scene, &bvh, &settings, Tile::whole(8, 8), 4);
        for (a, n) in layers.albedo.iter().zip(&layers.normal) {
            let a = Vec3::from(*a);
            assert!(
                (a - Vec3::new(0.4, 0.05, 0.05)).abs().max_element() < 1e-6,
                "{a}"
            );
            assert!((Vec3::from(*n) + Vec3::Z).length() < 1e-5, "{n:?}");
        }
    }
}
