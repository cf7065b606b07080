//! The OptiX path tracer against the CPU reference.
//!
//! Without a GPU (always run): backend selection falls back to the CPU with a reason under
//! `auto`, and `--backend optix` is an error, not a panic.
//!
//! On a GPU (`#[ignore = "needs an NVIDIA GPU"]`; `scripts/gpu-checks.sh tests` runs them):
//! renders of a Cornell box, a glass-and-mirror scene and a sponza-like scene (under several GAS
//! build options, merged build inputs included) agree with the CPU backend at equal samples per
//! pixel; white furnaces converge to the environment; tiles, passes and concurrent workers give
//! bit-identical films; driver errors are typed.
//!
//! # The agreement test ([`assert_blocks_agree`])
//!
//! Both backends render every sample of every pixel separately (the CPU through
//! `CpuBackend::sample`, the GPU through one-sample launches), so each pixel has a sample mean
//! and a sample variance `s_p^2` over its `n` samples. The image is cut into 8x8 blocks; for a
//! block `B` of `P` pixels and each colour channel, the block mean is `m = (1/P) sum_p mean_p`
//! with estimated variance `v = (1/P^2) sum_p s_p^2 / n`. The test asserts, for every block and
//! channel, `|m_cpu - m_gpu| <= k sqrt(v_cpu + v_gpu)`.
//!
//! `k` is set by Bonferroni over the `m = 3 x blocks` comparisons for a family-wise false-alarm
//! rate `alpha = 1e-3`: `k = Phi^-1(1 - alpha / (2 m))` (4.56 for 192 comparisons, 4.64 for
//! 288). Each block mean averages `P n >= 2048` samples, so the normal approximation of the
//! block means is sound, and no block is allowed to fail. The GPU renders with another seed
//! than the CPU (seed + 1), so the two estimates are independent and the variance of their
//! difference is `v_cpu + v_gpu`: the test asks that both backends converge to the same image,
//! not that they replay the same numbers (the host build of the device code in
//! `optix_pathtracer_host.rs` checks that, bit for bit). The samples are deterministic: a test
//! that passes once passes always. [`block_comparison_passes_equal_estimators_and_catches_a_small_bias`]
//! checks the comparison itself on the CPU: two seeds pass, a 10% brighter light fails. (Run at
//! the GPU tests' sizes, CPU against CPU with two seeds, the worst block of each scene was at
//! z = 2.1 to 2.6, well inside k.)

mod cpu_common;

use std::sync::Arc;

use clap::Parser;
use cpu_common::*;
use gasworks::backend::{select, BackendChoice};
use gasworks::cli::AccelArgs;
use gasworks::cpu::CpuBackend;
use gasworks::optix::accel::AccelOptions;
use gasworks::optix::pathtracer::{OptixBackend, OptixOptions, PathTracerError};
use gasworks::optix::plan::{Assign, MergeOptions, ScratchMode};
use gasworks::optix::{
    ContextOptions, CudaError, DeviceContext, Gpu, Module, ModuleCompileOptions, OptixError,
    PipelineCompileOptions,
};
use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::{Camera, Environment, Group, Material, MaterialKind, Scene, Texture};
use glam::{DVec3, Vec2, Vec3};
use rayon::prelude::*;

// ---------------------------------------------------------------------------------------------
// Without a GPU: backend selection
// ---------------------------------------------------------------------------------------------

fn accel_args(args: &[&str]) -> AccelArgs {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        accel: AccelArgs,
    }
    let mut all = vec!["test"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap().accel
}

fn small_scene() -> (Scene, RenderSettings) {
    (cornell_like(), cornell_settings(8, 8, 1, 3, 0))
}

fn gpu_present() -> bool {
    gasworks::optix::probe().is_ok()
}

#[test]
fn auto_falls_back_to_the_cpu_with_a_reason_without_a_gpu() {
    let (scene, s) = small_scene();
    let b = select(BackendChoice::Auto, &scene, &s, &accel_args(&[])).unwrap();
    if gpu_present() {
        // On a GPU host auto picks OptiX (or says why it could not).
        assert!(
            b.description.starts_with("optix") || b.description.contains("auto: the OptiX"),
            "{}",
            b.description
        );
        return;
    }
    assert!(b.description.starts_with("cpu ("), "{}", b.description);
    assert!(
        b.description.contains("auto: no NVIDIA GPU found"),
        "the reason is missing: {}",
        b.description
    );
    assert!(b.optix.is_none() && b.rays_traced().is_none());
    assert_eq!(b.renderer.name(), "cpu");
}

#[test]
fn backend_optix_without_a_gpu_is_a_clear_error() {
    if gpu_present() {
        return;
    }
    let (scene, s) = small_scene();
    let e = match select(BackendChoice::Optix, &scene, &s, &accel_args(&[])) {
        Err(e) => e,
        Ok(b) => panic!("--backend optix without a GPU gave {}", b.description),
    };
    let message = format!("{e:#}");
    assert!(
        message.starts_with("--backend optix: no NVIDIA GPU found"),
        "{message}"
    );
    assert!(matches!(
        e.downcast_ref::<PathTracerError>(),
        Some(PathTracerError::Cuda(CudaError::NoDevice { .. }))
    ));
}

#[test]
fn a_bad_optix_abi_is_refused_whichever_backend_would_run() {
    let (scene, s) = small_scene();
    for choice in [BackendChoice::Auto, BackendChoice::Optix] {
        let e = match select(choice, &scene, &s, &accel_args(&["--optix-abi", "90"])) {
            Err(e) => e,
            Ok(b) => panic!("{choice:?} accepted --optix-abi 90: {}", b.description),
        };
        assert!(
            matches!(
                e.downcast_ref::<OptixError>(),
                Some(OptixError::UnsupportedAbiRequest { requested: 90 })
            ),
            "{e:#}"
        );
    }
    let b = select(BackendChoice::Cpu, &scene, &s, &accel_args(&[])).unwrap();
    assert!(b.description.contains("requested with --backend cpu"));
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

/// Per-pixel sums and sums of squares of the samples, row-major.
struct PixelStats {
    width: u32,
    height: u32,
    n: u32,
    sum: Vec<DVec3>,
    sum2: Vec<DVec3>,
}

impl PixelStats {
    fn new(width: u32, height: u32) -> PixelStats {
        let px = (width * height) as usize;
        PixelStats {
            width,
            height,
            n: 0,
            sum: vec![DVec3::ZERO; px],
            sum2: vec![DVec3::ZERO; px],
        }
    }

    fn mean(&self, p: usize) -> DVec3 {
        self.sum[p] / self.n as f64
    }

    /// Unbiased sample variance of pixel p.
    fn variance(&self, p: usize) -> DVec3 {
        let n = self.n as f64;
        ((self.sum2[p] - self.sum[p] * self.sum[p] / n) / (n - 1.0)).max(DVec3::ZERO)
    }

    fn image_mean(&self) -> DVec3 {
        (0..self.sum.len()).map(|p| self.mean(p)).sum::<DVec3>() / self.sum.len() as f64
    }
}

/// Every sample of every pixel on the CPU; non-finite samples count as black, as in
/// `CpuBackend::render_tile`.
fn cpu_stats(scene: &Scene, s: &RenderSettings) -> PixelStats {
    let cpu = CpuBackend::new(scene, s);
    let mut stats = PixelStats::new(s.width, s.height);
    let per_pixel: Vec<(DVec3, DVec3)> = (0..s.width * s.height)
        .into_par_iter()
        .map(|p| {
            let (x, y) = (p % s.width, p / s.width);
            let (mut a, mut b) = (DVec3::ZERO, DVec3::ZERO);
            for i in 0..s.spp {
                let l = cpu.sample(x, y, i);
                let l = if l.is_finite() {
                    l.as_dvec3()
                } else {
                    DVec3::ZERO
                };
                a += l;
                b += l * l;
            }
            (a, b)
        })
        .collect();
    for (p, (a, b)) in per_pixel.into_iter().enumerate() {
        stats.sum[p] = a;
        stats.sum2[p] = b;
    }
    stats.n = s.spp;
    stats
}

/// Every sample of every pixel on the GPU: one launch per sample index over the whole frame,
/// each from a zero accumulation, so each launch returns that sample's radiance.
fn gpu_stats(renderer: &dyn TileRenderer, s: &RenderSettings) -> PixelStats {
    let tile = Tile {
        x: 0,
        y: 0,
        w: s.width,
        h: s.height,
    };
    let mut stats = PixelStats::new(s.width, s.height);
    for i in 0..s.spp {
        let mut acc = vec![[0.0f32; 4]; tile.pixel_count()];
        renderer.render_tile(tile, i..i + 1, &mut acc).unwrap();
        for (p, a) in acc.iter().enumerate() {
            assert_eq!(a[3], 1.0);
            let l = DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64);
            stats.sum[p] += l;
            stats.sum2[p] += l * l;
        }
    }
    stats.n = s.spp;
    stats
}

/// erfc(x) (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// k with P(|Z| > k) = p for a standard normal Z (bisection on erfc).
fn two_sided_normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if erfc(mid / std::f64::consts::SQRT_2) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Family-wise false-alarm rate of one image comparison.
const ALPHA: f64 = 1e-3;

/// The 8x8 block comparison of the module comment: returns the comparisons beyond `k` standard
/// errors (`k` from Bonferroni at [`ALPHA`]) and prints the worst one.
fn block_failures(what: &str, a: &PixelStats, b: &PixelStats) -> Vec<String> {
    assert_eq!((a.width, a.height), (b.width, b.height));
    let (w, h) = (a.width as usize, a.height as usize);
    let blocks: Vec<(usize, usize)> = (0..h)
        .step_by(8)
        .flat_map(|y| (0..w).step_by(8).map(move |x| (x, y)))
        .collect();
    let comparisons = 3 * blocks.len();
    let k = two_sided_normal_quantile(ALPHA / comparisons as f64);
    let mut worst = (0.0f64, String::new());
    let mut failures = Vec::new();
    for &(bx, by) in &blocks {
        let pixels: Vec<usize> = (by..(by + 8).min(h))
            .flat_map(|y| (bx..(bx + 8).min(w)).map(move |x| y * w + x))
            .collect();
        let p = pixels.len() as f64;
        let block = |s: &PixelStats| -> (DVec3, DVec3) {
            let m = pixels.iter().map(|&i| s.mean(i)).sum::<DVec3>() / p;
            let v = pixels.iter().map(|&i| s.variance(i)).sum::<DVec3>() / (p * p * s.n as f64);
            (m, v)
        };
        let ((ma, va), (mb, vb)) = (block(a), block(b));
        for c in 0..3 {
            let d = (ma[c] - mb[c]).abs();
            let se = (va[c] + vb[c]).sqrt();
            let z = if se > 0.0 {
                d / se
            } else if d <= 1e-6 * ma[c].abs().max(1e-6) {
                0.0
            } else {
                f64::INFINITY
            };
            let line = format!(
                "block ({bx},{by}) channel {c}: {:.5} vs {:.5} (se {:.5}, z {z:.2}, k {k:.2})",
                ma[c], mb[c], se
            );
            if z > worst.0 {
                worst = (z, line.clone());
            }
            if z > k {
                failures.push(line);
            }
        }
    }
    eprintln!(
        "{what}: {comparisons} comparisons; worst: {}; image means {:?} vs {:?}",
        worst.1,
        a.image_mean(),
        b.image_mean()
    );
    failures
}

/// Asserts that no block comparison fails (see the module comment).
fn assert_blocks_agree(what: &str, cpu: &PixelStats, gpu: &PixelStats) {
    let failures = block_failures(what, cpu, gpu);
    assert!(
        failures.is_empty(),
        "{what}: {} block comparisons beyond k standard errors:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Scenes
// ---------------------------------------------------------------------------------------------

/// An axis-aligned box of 6 quads (12 triangles), outward normals, as one group.
fn box_group(name: &str, lo: Vec3, hi: Vec3, material: u32) -> Group {
    let d = hi - lo;
    let (x, y, z) = (Vec3::X * d.x, Vec3::Y * d.y, Vec3::Z * d.z);
    let faces = [
        quad("", lo, z, x, material),     // bottom (-y)
        quad("", lo + y, x, z, material), // top (+y)
        quad("", lo, x, y, material),     // front (-z)
        quad("", lo + z, y, x, material), // back (+z)
        quad("", lo, y, z, material),     // left (-x)
        quad("", lo + x, z, y, material), // right (+x)
    ];
    let mut g = Group {
        name: name.into(),
        ..Default::default()
    };
    for f in faces {
        let base = g.positions.len() as u32;
        g.positions.extend(f.positions);
        g.indices
            .extend(f.indices.iter().map(|t| t.map(|i| i + base)));
        g.face_materials.extend(f.face_materials);
    }
    g
}

/// The classic Cornell box, scaled to a unit cube: white floor, ceiling and back wall, red left
/// and green right walls, a square ceiling light, a tall and a short white block. Diffuse only.
fn cornell_box() -> Scene {
    let white = Material::diffuse("white", Vec3::splat(0.73));
    let red = Material::diffuse("red", Vec3::new(0.65, 0.05, 0.05));
    let green = Material::diffuse("green", Vec3::new(0.12, 0.45, 0.15));
    let mut light = Material::diffuse("light", Vec3::splat(0.78));
    light.emission = Vec3::new(17.0, 12.0, 4.0);
    let (x, y, z) = (Vec3::X, Vec3::Y, Vec3::Z);
    Scene::new(
        "cornell-box",
        vec![
            quad("floor", Vec3::ZERO, z, x, 0),
            quad("ceiling", y, x, z, 0),
            quad("back", z, x, y, 0),
            quad("left", Vec3::ZERO, y, z, 1),
            quad("right", x, z, y, 2),
            quad("light", Vec3::new(0.37, 0.999, 0.37), 0.26 * x, 0.26 * z, 3),
            box_group(
                "tall",
                Vec3::new(0.2, 0.0, 0.45),
                Vec3::new(0.45, 0.6, 0.75),
                0,
            ),
            box_group(
                "short",
                Vec3::new(0.55, 0.0, 0.15),
                Vec3::new(0.8, 0.3, 0.4),
                0,
            ),
        ],
        vec![white, red, green, light],
    )
}

/// A sponza-like courtyard: a textured floor (UVs beyond [0, 1]), two long walls, 2 x 10
/// columns and 8 glossy banners, each its own group (so `--merge-below` merges the small ones
/// into shared GASes), a small lamp and a sky.
fn sponza_like() -> Scene {
    let stone = Material::diffuse("stone", Vec3::new(0.62, 0.58, 0.5));
    let mut floor_m = Material::diffuse("floor", Vec3::splat(0.9));
    floor_m.diffuse_texture = Some(0);
    let mut banner = material("banner", MaterialKind::Glossy);
    banner.diffuse = Vec3::new(0.5, 0.08, 0.06);
    banner.specular = Vec3::splat(0.3);
    banner.shininess = 20.0;
    let cloth = Material::diffuse("cloth", Vec3::new(0.1, 0.4, 0.15));
    let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
    lamp.emission = Vec3::new(30.0, 26.0, 20.0);
    let mut groups = Vec::new();
    let mut floor = quad(
        "floor",
        Vec3::new(-4.0, 0.0, -10.0),
        Vec3::new(0.0, 0.0, 20.0),
        Vec3::new(8.0, 0.0, 0.0),
        1,
    );
    floor.uvs = vec![
        Vec2::new(-1.0, -2.5),
        Vec2::new(-1.0, 2.5),
        Vec2::new(1.0, 2.5),
        Vec2::new(1.0, -2.5),
    ];
    groups.push(floor);
    groups.push(quad(
        "wall-left",
        Vec3::new(-4.0, 0.0, -10.0),
        Vec3::new(0.0, 5.0, 0.0),
        Vec3::new(0.0, 0.0, 20.0),
        0,
    ));
    groups.push(quad(
        "wall-right",
        Vec3::new(4.0, 0.0, -10.0),
        Vec3::new(0.0, 0.0, 20.0),
        Vec3::new(0.0, 5.0, 0.0),
        0,
    ));
    for side in [-2.5f32, 2.5] {
        for i in 0..10 {
            let z = -9.0 + 2.0 * i as f32;
            groups.push(box_group(
                &format!("column-{side}-{i}"),
                Vec3::new(side - 0.25, 0.0, z - 0.25),
                Vec3::new(side + 0.25, 3.0, z + 0.25),
                0,
            ));
        }
    }
    for i in 0..8 {
        let z = -8.0 + 2.0 * i as f32;
        let (x0, m) = if i % 2 == 0 { (-3.99, 2) } else { (3.99, 3) };
        let mut b = quad(
            &format!("banner-{i}"),
            Vec3::new(x0, 1.5, z),
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(0.0, 2.0, 0.0),
            m,
        );
        b.normals = vec![Vec3::new(-x0.signum(), 0.0, 0.0).normalize(); 4];
        groups.push(b);
    }
    groups.push(sphere(
        "lamp",
        Vec3::new(0.0, 3.5, 2.0),
        0.3,
        8,
        16,
        4,
        false,
    ));
    let mut scene = Scene::new(
        "sponza-like",
        groups,
        vec![stone, floor_m, banner, cloth, lamp],
    );
    let mut texels = Vec::new();
    for y in 0..8 {
        for x in 0..8 {
            texels.push(if (x / 2 + y / 2) % 2 == 0 {
                [0.8, 0.75, 0.6]
            } else {
                [0.35, 0.3, 0.25]
            });
        }
    }
    scene.textures = vec![Texture {
        path: "tiles".into(),
        width: 8,
        height: 8,
        texels,
    }];
    scene.environment = Some(Environment {
        radiance: Vec3::new(0.6, 0.75, 1.0),
    });
    scene
}

fn look(
    eye: Vec3,
    at: Vec3,
    w: u32,
    h: u32,
    spp: u32,
    max_depth: u32,
    seed: u64,
) -> RenderSettings {
    RenderSettings {
        width: w,
        height: h,
        spp,
        max_depth,
        seed,
        camera: Camera {
            eye,
            look_at: at,
            up: Vec3::Y,
            fov_y_deg: 50.0,
        }
        .frame(w, h)
        .unwrap(),
    }
}

fn optix(scene: &Scene, s: &RenderSettings, accel: AccelOptions) -> OptixBackend {
    let options = OptixOptions {
        device: 0,
        context: ContextOptions::default(),
        accel,
    };
    match OptixBackend::new(scene, s, &options) {
        Ok(b) => b,
        Err(e) => panic!("OptiX backend for {}: {e}", scene.source),
    }
}

/// Renders `scene` on the CPU with `s` and on the GPU (under `accel`) with seed + 1, and asserts
/// the block comparison; returns the GPU backend for further checks.
fn assert_gpu_agrees(
    what: &str,
    scene: &Scene,
    s: &RenderSettings,
    accel: AccelOptions,
) -> OptixBackend {
    let gpu_s = RenderSettings {
        seed: s.seed + 1,
        ..*s
    };
    let gpu = optix(scene, &gpu_s, accel);
    let gpu_samples = gpu_stats(&gpu, &gpu_s);
    assert_blocks_agree(what, &cpu_stats(scene, s), &gpu_samples);
    gpu
}

/// The block comparison itself, on the CPU alone (no GPU needed): two renders of the Cornell
/// box with different seeds pass it, and a render whose light is 10% brighter fails it. So the
/// GPU tests' bound neither cries wolf at this sample count nor misses a small bias.
#[test]
fn block_comparison_passes_equal_estimators_and_catches_a_small_bias() {
    let scene = cornell_box();
    let s = cornell_settings(32, 32, 64, 6, 1);
    let reference = cpu_stats(&scene, &s);
    let other_seed = cpu_stats(&scene, &RenderSettings { seed: 2, ..s });
    assert_eq!(
        block_failures("cpu seed 1 vs 2", &reference, &other_seed),
        Vec::<String>::new()
    );
    let mut brighter = scene.clone();
    for m in &mut brighter.materials {
        m.emission *= 1.1;
    }
    brighter.finalize();
    let biased = cpu_stats(&brighter, &RenderSettings { seed: 2, ..s });
    assert!(
        !block_failures("cpu vs 10% brighter light", &reference, &biased).is_empty(),
        "a 10% brighter light went unnoticed"
    );
}

// ---------------------------------------------------------------------------------------------
// On a GPU: agreement with the CPU
// ---------------------------------------------------------------------------------------------

/// The Cornell box, 64x64 at 64 spp, depth 8.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_cornell_box_agrees_with_the_cpu() {
    let s = cornell_settings(64, 64, 64, 8, 1);
    let gpu = assert_gpu_agrees("cornell box", &cornell_box(), &s, AccelOptions::default());
    assert!(gpu.counters().rays >= 64 * 64 * 64);
    assert_eq!(gpu.counters().non_finite_samples, 0);
}

/// Glass, mirror and glossy under an area light (the CPU tests' Cornell-like box), and glass and
/// mirror spheres in an environment.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_glass_and_mirror_scenes_agree_with_the_cpu() {
    let s = cornell_settings(64, 64, 64, 8, 3);
    assert_gpu_agrees(
        "glass and mirror box",
        &cornell_like(),
        &s,
        AccelOptions::default(),
    );

    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = 1.5;
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = Vec3::new(0.9, 0.8, 0.7);
    let mut scene = Scene::new(
        "glass and mirror spheres",
        vec![
            sphere("glass", Vec3::new(-0.6, 0.0, 0.0), 0.45, 16, 32, 0, true),
            sphere("mirror", Vec3::new(0.5, 0.1, -0.2), 0.4, 12, 24, 1, false),
            quad(
                "ground",
                Vec3::new(-3.0, -0.75, -3.0),
                Vec3::new(0.0, 0.0, 6.0),
                Vec3::new(6.0, 0.0, 0.0),
                2,
            ),
        ],
        vec![glass, mirror, Material::diffuse("ground", Vec3::splat(0.5))],
    );
    scene.environment = Some(Environment {
        radiance: Vec3::new(1.0, 0.9, 0.7),
    });
    let s = look(Vec3::new(0.3, 0.6, 3.0), Vec3::ZERO, 64, 48, 64, 12, 4);
    assert_gpu_agrees(
        "glass and mirror spheres",
        &scene,
        &s,
        AccelOptions::default(),
    );
}

/// The sponza-like courtyard under every kind of GAS build: one GAS per group, and the small
/// groups merged into shared GASes (their SBT records per build input), with compaction, LPT,
/// per-stream scratch and fast-build flags.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_sponza_like_scene_agrees_with_the_cpu_under_every_build_option() {
    let scene = sponza_like();
    let s = look(
        Vec3::new(0.0, 1.7, -9.5),
        Vec3::new(0.0, 1.5, 0.0),
        96,
        64,
        32,
        8,
        5,
    );
    let configs = [
        AccelOptions::default(),
        AccelOptions {
            streams: 3,
            fast_build: true,
            assign: Assign::Lpt,
            scratch: ScratchMode::PerStream,
            compact: true,
            merge: MergeOptions::new(100),
            lpt_build_weight: 0,
        },
        AccelOptions {
            streams: 1,
            merge: MergeOptions::new(1 << 20),
            ..AccelOptions::default()
        },
    ];
    for accel in configs {
        let gpu = assert_gpu_agrees(&format!("sponza-like {accel:?}"), &scene, &s, accel);
        if accel.merge.merge_below > 0 {
            assert!(
                gpu.report().accel.gases < scene.groups.len(),
                "merging made {} GASes for {} groups",
                gpu.report().accel.gases,
                scene.groups.len()
            );
        }
        assert_eq!(gpu.report().hit_records, scene.groups.len());
    }
}

/// White furnaces on the GPU as on the CPU (tests/cpu_render.rs): white diffuse objects, a
/// perfect mirror and a clear glass sphere in a uniform environment `L` converge to `L`: per
/// channel, the mean of all samples within 4 standard errors + 1e-4 L (about 6e-5 false-alarm
/// rate per channel). Truncation at 64 segments is negligible (see the CPU tests).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_white_furnaces_converge_to_the_environment() {
    let env = Vec3::new(0.5, 0.8, 1.2);
    let white = Material::diffuse("white", Vec3::ONE);
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = Vec3::ONE;
    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = 1.5;
    glass.transmittance = Vec3::ONE;
    let scenes = [
        Scene::new(
            "diffuse furnace",
            vec![
                sphere("a", Vec3::new(-0.55, 0.5, 0.0), 0.5, 16, 32, 0, false),
                sphere("b", Vec3::new(0.5, 0.45, 0.1), 0.45, 16, 32, 0, false),
                quad(
                    "floor",
                    Vec3::new(-2.0, 0.0, -2.0),
                    Vec3::new(0.0, 0.0, 4.0),
                    Vec3::new(4.0, 0.0, 0.0),
                    0,
                ),
            ],
            vec![white],
        ),
        Scene::new(
            "mirror furnace",
            vec![sphere("m", Vec3::ZERO, 1.0, 24, 48, 0, false)],
            vec![mirror],
        ),
        Scene::new(
            "glass furnace",
            vec![sphere("g", Vec3::ZERO, 1.0, 24, 48, 0, false)],
            vec![glass],
        ),
    ];
    for mut scene in scenes {
        scene.environment = Some(Environment { radiance: env });
        let s = look(
            Vec3::new(0.0, 1.0, -3.0),
            Vec3::new(0.0, 0.3, 0.0),
            32,
            32,
            64,
            64,
            11,
        );
        let gpu = optix(&scene, &s, AccelOptions::default());
        let stats = gpu_stats(&gpu, &s);
        let n = (stats.sum.len() as u32 * stats.n) as f64;
        let total: DVec3 = stats.sum.iter().sum();
        let total2: DVec3 = stats.sum2.iter().sum();
        let mean = total / n;
        let se = ((total2 / n - mean * mean).max(DVec3::ZERO) / (n - 1.0)).sqrt();
        for c in 0..3 {
            let e = env[c] as f64;
            assert!(
                (mean[c] - e).abs() < 4.0 * se[c] + 1e-4 * e,
                "{}: channel {c}: {} +- {} (expected {e})",
                scene.source,
                mean[c],
                se[c]
            );
        }
        eprintln!("{}: mean {mean:?} se {se:?}", scene.source);
        assert_eq!(gpu.counters().non_finite_samples, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// On a GPU: determinism, sharing, errors
// ---------------------------------------------------------------------------------------------

/// The film does not depend on the tiling, the pass split or how many workers share the GPU:
/// one whole-frame launch, 16x16 tiles in passes of 1 + 3 + 4 samples, and 16x8 tiles spread
/// over 4 concurrent workers give the same bits.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_films_are_bit_identical_across_tiles_passes_and_workers() {
    let scene = cornell_like();
    let s = cornell_settings(48, 40, 8, 8, 21);
    let gpu = optix(&scene, &s, AccelOptions::default());
    let whole = Tile {
        x: 0,
        y: 0,
        w: 48,
        h: 40,
    };
    let mut reference = vec![[0.0f32; 4]; whole.pixel_count()];
    gpu.worker()
        .unwrap()
        .render_tile(whole, 0..8, &mut reference)
        .unwrap();
    let reference_film = {
        let mut f = gasworks::render::Film::new(48, 40);
        f.write_tile(whole, &reference);
        f
    };

    let passes = render_film(&gpu, &s, &Tile::grid(48, 40, 16), &[1, 4, 8], 4);
    assert_eq!(passes.pixels, reference_film.pixels, "tiles and passes");

    let workers: Vec<Arc<dyn TileRenderer>> = (0..4)
        .map(|_| Arc::new(gpu.worker().unwrap()) as Arc<dyn TileRenderer>)
        .collect();
    let tiles: Vec<Tile> = (0..40)
        .step_by(8)
        .flat_map(|y| (0..48).step_by(16).map(move |x| Tile { x, y, w: 16, h: 8 }))
        .collect();
    let rendered: Vec<(Tile, Vec<[f32; 4]>)> = tiles
        .par_iter()
        .enumerate()
        .map(|(i, &t)| {
            let mut acc = vec![[0.0f32; 4]; t.pixel_count()];
            workers[i % 4].render_tile(t, 0..8, &mut acc).unwrap();
            (t, acc)
        })
        .collect();
    let mut film = gasworks::render::Film::new(48, 40);
    for (t, acc) in rendered {
        film.write_tile(t, &acc);
    }
    assert_eq!(film.pixels, reference_film.pixels, "concurrent workers");
    assert!(gpu.counters().rays > 3 * 48 * 40 * 8);
}

/// The GPU and the CPU accept and refuse the same tiles.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_bad_tiles_are_errors_not_panics() {
    let scene = cornell_like();
    let s = cornell_settings(16, 16, 1, 2, 0);
    let gpu = optix(&scene, &s, AccelOptions::default());
    let mut acc = vec![[0.0f32; 4]; 64];
    let outside = Tile {
        x: 12,
        y: 0,
        w: 8,
        h: 8,
    };
    assert!(gpu.render_tile(outside, 0..1, &mut acc).is_err());
    let wrong_size = Tile {
        x: 0,
        y: 0,
        w: 4,
        h: 4,
    };
    assert!(gpu.render_tile(wrong_size, 0..1, &mut acc).is_err());
    // An empty sample range leaves the buffer alone.
    let t = Tile {
        x: 0,
        y: 0,
        w: 8,
        h: 8,
    };
    gpu.render_tile(t, 3..3, &mut acc).unwrap();
    assert!(acc.iter().all(|p| *p == [0.0; 4]));
}

/// Typed errors from the driver: a module that does not compile carries OptiX's log, and an
/// allocation larger than the GPU says how much was asked for.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_errors_are_typed_and_say_why() {
    let gpu = Gpu::open(0).unwrap();
    let ctx = DeviceContext::new(&gpu, &ContextOptions::default()).unwrap();
    let broken = ".version 8.2\n.target sm_75\n.address_size 64\nthis is not ptx\n";
    match Module::from_ptx(
        &ctx,
        "broken.ptx",
        broken,
        &ModuleCompileOptions::default(),
        &PipelineCompileOptions::default(),
    ) {
        Err(OptixError::ModuleCompile { module, log, .. }) => {
            assert_eq!(module, "broken.ptx");
            assert!(!log.trim().is_empty(), "the compile log is empty");
        }
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(_) => panic!("broken PTX compiled"),
    }
    let too_much = gpu.info().total_memory * 4;
    match gpu.alloc(too_much) {
        Err(CudaError::OutOfMemory { requested, .. }) => assert_eq!(requested, too_much),
        Err(e) => panic!("expected out of memory, got {e}"),
        Ok(_) => panic!("allocated 4x the GPU's memory"),
    }
}
