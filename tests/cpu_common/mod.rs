//! Scenes built in memory for the CPU backend's integration tests (no loader, no generators).

#![allow(dead_code)]

use gasworks::cpu::integrator::{LightSampler, PathTracer};
use gasworks::cpu::SceneBvh;
use gasworks::render::sampler::RandomStream;
use gasworks::render::{Film, RenderSettings, Tile, TileRenderer};
use gasworks::scene::camera::CameraFrame;
use gasworks::scene::{Camera, Environment, EnvironmentMap, Group, Material, MaterialKind, Scene};
use glam::{DVec3, Vec3};
use rayon::prelude::*;
use std::ops::Range;

/// Uniform random numbers for building test scenes and rays.
pub struct Rng(RandomStream);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(RandomStream::new(0, 0, seed))
    }
    pub fn f(&mut self) -> f32 {
        self.0.next_f32()
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f()
    }
    /// A uniformly distributed unit vector.
    pub fn unit(&mut self) -> Vec3 {
        let z = self.range(-1.0, 1.0);
        let phi = self.range(0.0, std::f32::consts::TAU);
        let r = (1.0 - z * z).max(0.0).sqrt();
        Vec3::new(r * phi.cos(), r * phi.sin(), z)
    }
    pub fn point_in(&mut self, lo: Vec3, hi: Vec3) -> Vec3 {
        Vec3::new(
            self.range(lo.x, hi.x),
            self.range(lo.y, hi.y),
            self.range(lo.z, hi.z),
        )
    }
}

/// A tessellated UV sphere as one group of material `material`, wound so that the geometric
/// normals point outwards; `smooth` adds exact per-vertex sphere normals. The pole triangles
/// of zero area are dropped by `Scene::new`.
pub fn sphere(
    name: &str,
    center: Vec3,
    radius: f32,
    rings: u32,
    segments: u32,
    material: u32,
    smooth: bool,
) -> Group {
    let mut g = Group {
        name: name.into(),
        ..Default::default()
    };
    for i in 0..=rings {
        let th = std::f32::consts::PI * i as f32 / rings as f32;
        for j in 0..segments {
            let ph = std::f32::consts::TAU * j as f32 / segments as f32;
            let n = Vec3::new(th.sin() * ph.cos(), th.cos(), th.sin() * ph.sin());
            g.positions.push(center + radius * n);
            if smooth {
                g.normals.push(n);
            }
        }
    }
    for i in 0..rings {
        for j in 0..segments {
            let a = i * segments + j;
            let b = i * segments + (j + 1) % segments;
            let c = a + segments;
            let d = b + segments;
            g.indices.push([a, b, c]);
            g.indices.push([b, d, c]);
            g.face_materials.extend([material, material]);
        }
    }
    g
}

/// A quad `p, p + a, p + a + b, p + b` as two triangles (normal along `a x b`).
pub fn quad(name: &str, p: Vec3, a: Vec3, b: Vec3, material: u32) -> Group {
    Group {
        name: name.into(),
        positions: vec![p, p + a, p + a + b, p + b],
        indices: vec![[0, 1, 2], [0, 2, 3]],
        face_materials: vec![material, material],
        ..Default::default()
    }
}

pub fn material(name: &str, kind: MaterialKind) -> Material {
    Material {
        name: name.into(),
        kind,
        ..Material::default_diffuse()
    }
}

/// A small Cornell-like box (unit size) with a ceiling light, a glossy block, a glass sphere
/// and a mirror sphere: every material kind and both light paths.
pub fn cornell_like() -> Scene {
    let white = Material::diffuse("white", Vec3::splat(0.73));
    let red = Material::diffuse("red", Vec3::new(0.65, 0.05, 0.05));
    let green = Material::diffuse("green", Vec3::new(0.12, 0.45, 0.15));
    let mut light = Material::diffuse("light", Vec3::splat(0.78));
    light.emission = Vec3::new(17.0, 12.0, 4.0);
    let mut glossy = material("glossy", MaterialKind::Glossy);
    glossy.diffuse = Vec3::splat(0.3);
    glossy.specular = Vec3::splat(0.5);
    glossy.shininess = 60.0;
    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = 1.5;
    glass.transmittance = Vec3::new(0.9, 0.95, 1.0);
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = Vec3::splat(0.95);
    let (x, y, z) = (Vec3::X, Vec3::Y, Vec3::Z);
    let groups = vec![
        quad("floor", Vec3::ZERO, z, x, 0),
        quad("ceiling", y, x, z, 0),
        quad("back", z, x, y, 0),
        quad("left", Vec3::ZERO, y, z, 1),
        quad("right", x, z, y, 2),
        quad("light", Vec3::new(0.37, 0.999, 0.37), 0.26 * x, 0.26 * z, 3),
        quad(
            "block-top",
            Vec3::new(0.15, 0.4, 0.5),
            0.25 * z,
            0.25 * x,
            4,
        ),
        quad(
            "block-front",
            Vec3::new(0.15, 0.0, 0.5),
            0.25 * x,
            0.4 * y,
            4,
        ),
        sphere("glass", Vec3::new(0.7, 0.2, 0.35), 0.18, 12, 24, 5, true),
        sphere("mirror", Vec3::new(0.3, 0.75, 0.6), 0.1, 8, 16, 6, false),
    ];
    Scene::new(
        "cornell-like",
        groups,
        vec![white, red, green, light, glossy, glass, mirror],
    )
}

/// Render settings looking into the unit Cornell-like box.
pub fn cornell_settings(
    width: u32,
    height: u32,
    spp: u32,
    max_depth: u32,
    seed: u64,
) -> RenderSettings {
    let camera = Camera {
        eye: Vec3::new(0.5, 0.5, -1.4),
        look_at: Vec3::new(0.5, 0.5, 0.0),
        up: Vec3::Y,
        fov_y_deg: 39.3,
    }
    .frame(width, height)
    .unwrap();
    RenderSettings {
        width,
        height,
        spp,
        max_depth,
        seed,
        camera,
    }
}

/// Renders `tiles` (in the given order) in passes, on a local rayon pool of `threads` threads,
/// accumulating into one film. `pass_ends` lists the sample count reached by each pass:
/// `[2, 6]` renders samples `0..2` of every tile, then `2..6`.
pub fn render_film(
    renderer: &dyn TileRenderer,
    settings: &RenderSettings,
    tiles: &[Tile],
    pass_ends: &[u32],
    threads: usize,
) -> Film {
    let mut start = 0;
    let passes: Vec<Range<u32>> = pass_ends
        .iter()
        .map(|&end| {
            let r = start..end;
            start = end;
            r
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut film = Film::new(settings.width, settings.height);
        for pass in &passes {
            let done: Vec<(Tile, Vec<[f32; 4]>)> = tiles
                .par_iter()
                .map(|&t| {
                    let mut acc = film.read_tile(t);
                    renderer.render_tile(t, pass.clone(), &mut acc).unwrap();
                    (t, acc)
                })
                .collect();
            for (t, acc) in done {
                film.write_tile(t, &acc);
            }
        }
        film
    })
}

/// Every sample of every pixel of `s` on the CPU, as per-pixel sums for
/// `gasworks::render::compare` (non-finite samples count as black, as `render_tile` counts
/// them). Pixels in parallel; each pixel's sums are accumulated as its samples come.
pub fn cpu_stats(scene: &Scene, s: &RenderSettings) -> gasworks::render::compare::PixelStats {
    let cpu = gasworks::cpu::CpuBackend::new(scene, s).unwrap();
    let per_pixel: Vec<(glam::DVec3, glam::DVec3)> = (0..s.width * s.height)
        .into_par_iter()
        .map(|p| {
            let (mut sum, mut sum2) = (glam::DVec3::ZERO, glam::DVec3::ZERO);
            for i in 0..s.spp {
                let l = cpu.sample(p % s.width, p / s.width, i);
                let l = if l.is_finite() {
                    l.as_dvec3()
                } else {
                    glam::DVec3::ZERO
                };
                sum += l;
                sum2 += l * l;
            }
            (sum, sum2)
        })
        .collect();
    let mut stats = gasworks::render::compare::PixelStats::new(s.width, s.height);
    for (p, (sum, sum2)) in per_pixel.into_iter().enumerate() {
        stats.count[p] = s.spp;
        stats.sum[p] = sum;
        stats.sum2[p] = sum2;
    }
    stats
}

/// The scene and the camera moved by a small offset that no coordinate represents exactly: the
/// same image, but every hit point and direction rounds differently, so some paths (Russian
/// roulette, Fresnel choices, grazing hits at nearly equal numbers) go another way, as the
/// GPU's do against the CPU's.
pub fn shifted(scene: &Scene, s: &RenderSettings) -> (Scene, RenderSettings) {
    let d = Vec3::new(0.0131, -0.0217, 0.0173);
    let mut moved = scene.clone();
    for g in &mut moved.groups {
        for p in &mut g.positions {
            *p += d;
        }
    }
    moved.finalize();
    let mut settings = *s;
    settings.camera.eye += d;
    (moved, settings)
}

/// Spheres of every material on a floor under a sky: a scene of low variance (about 150k
/// samples per render resolve a 1% bias without pairing).
pub fn spheres_under_a_sky() -> Scene {
    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = 1.5;
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = Vec3::new(0.9, 0.8, 0.7);
    let mut glossy = material("glossy", MaterialKind::Glossy);
    glossy.diffuse = Vec3::splat(0.3);
    glossy.specular = Vec3::splat(0.5);
    glossy.shininess = 30.0;
    let mut scene = Scene::new(
        "spheres under a sky",
        vec![
            sphere("glass", Vec3::new(-0.6, 0.0, 0.0), 0.45, 12, 24, 0, true),
            sphere("mirror", Vec3::new(0.5, 0.1, -0.2), 0.4, 12, 24, 1, false),
            sphere("glossy", Vec3::new(0.0, -0.3, 0.6), 0.3, 12, 24, 2, true),
            quad(
                "ground",
                Vec3::new(-3.0, -0.75, -3.0),
                Vec3::new(0.0, 0.0, 6.0),
                Vec3::new(6.0, 0.0, 0.0),
                3,
            ),
        ],
        vec![
            glass,
            mirror,
            glossy,
            Material::diffuse("ground", Vec3::splat(0.6)),
        ],
    );
    scene.environment = Some(Environment {
        radiance: Vec3::new(1.0, 0.9, 0.7),
    });
    scene
}

/// A 32x16 environment map: a sky brightening towards the horizon, a ground half, and a
/// "sun" of two texels over a thousand times brighter than the sky, up and to one side.
pub fn sun_map(rotation: f32) -> std::sync::Arc<EnvironmentMap> {
    let (w, h) = (32u32, 16u32);
    let texels = (0..w * h)
        .map(|k| {
            let (i, j) = (k % w, k / w);
            if (i == 21 || i == 22) && j == 3 {
                Vec3::new(900.0, 800.0, 700.0)
            } else if j < h / 2 {
                Vec3::new(0.2, 0.3, 0.6) * (1.0 + j as f32 / h as f32)
            } else {
                Vec3::new(0.3, 0.2, 0.1)
            }
        })
        .collect();
    std::sync::Arc::new(EnvironmentMap::from_texels("sun", w, h, texels, rotation).unwrap())
}

/// A view of [`spheres_under_a_sky`], `size` pixels square.
pub fn sky_settings(size: u32, spp: u32, seed: u64) -> RenderSettings {
    RenderSettings {
        width: size,
        height: size,
        spp,
        max_depth: 4,
        seed,
        camera: Camera {
            eye: Vec3::new(0.3, 0.6, 3.0),
            look_at: Vec3::ZERO,
            up: Vec3::Y,
            fov_y_deg: 45.0,
        }
        .frame(size, size)
        .unwrap(),
    }
}

/// A camera at `eye` looking at `at` (up +Y, 50 degrees vertically), `w` x `h` pixels.
pub fn look(
    eye: Vec3,
    at: Vec3,
    w: u32,
    h: u32,
    spp: u32,
    max_depth: u32,
    seed: u64,
) -> RenderSettings {
    look_fov(eye, at, 50.0, w, h, spp, max_depth, seed)
}

/// [`look`] with a vertical field of view of `fov_deg` degrees.
#[allow(clippy::too_many_arguments)]
pub fn look_fov(
    eye: Vec3,
    at: Vec3,
    fov_deg: f32,
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
        camera: camera_at(eye, at, fov_deg, w, h),
    }
}

/// A camera at `eye` looking at `at`, up +Y, `fov_y_deg` vertically, framed for `w` x `h`.
pub fn camera_at(eye: Vec3, at: Vec3, fov_y_deg: f32, w: u32, h: u32) -> CameraFrame {
    Camera {
        eye,
        look_at: at,
        up: Vec3::Y,
        fov_y_deg,
    }
    .frame(w, h)
    .unwrap()
}

/// The uniform environment radiance `L` of the white furnaces.
pub const FURNACE_ENV: Vec3 = Vec3::new(0.5, 0.8, 1.2);

fn in_furnace(mut scene: Scene) -> Scene {
    scene.environment = Some(Environment {
        radiance: FURNACE_ENV,
    });
    scene
}

/// White furnace: two white (Kd = 1) diffuse spheres and a white floor square, no emitter, in
/// the uniform environment [`FURNACE_ENV`]. Every pixel converges to `L`.
pub fn diffuse_furnace() -> Scene {
    in_furnace(Scene::new(
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
        vec![Material::diffuse("white", Vec3::ONE)],
    ))
}

/// A perfect mirror sphere (Ks = 1) in [`FURNACE_ENV`].
pub fn mirror_furnace() -> Scene {
    let mut mirror = material("mirror", MaterialKind::Mirror);
    mirror.specular = Vec3::ONE;
    in_furnace(Scene::new(
        "mirror furnace",
        vec![sphere("m", Vec3::ZERO, 1.0, 24, 48, 0, false)],
        vec![mirror],
    ))
}

/// A clear glass sphere (ior 1.5, white transmittance) in [`FURNACE_ENV`].
pub fn glass_furnace() -> Scene {
    let mut glass = material("glass", MaterialKind::Glass);
    glass.ior = 1.5;
    glass.transmittance = Vec3::ONE;
    in_furnace(Scene::new(
        "glass furnace",
        vec![sphere("g", Vec3::ZERO, 1.0, 24, 48, 0, false)],
        vec![glass],
    ))
}

/// Asserts `|mean - expected| < 4 se + eps |expected|` per channel.
pub fn assert_mean_within(what: &str, mean: DVec3, se: DVec3, expected: DVec3, eps: f64) {
    eprintln!("{what}: mean {mean:.6} se {se:.6} expected {expected:.6}");
    for c in 0..3 {
        let bound = 4.0 * se[c] + eps * expected[c].abs();
        assert!(
            (mean[c] - expected[c]).abs() < bound,
            "{what}: channel {c}: mean {} +- {}, expected {} (bound {bound})",
            mean[c],
            se[c],
            expected[c]
        );
    }
}

/// [`spheres_under_a_sky`] (or any scene) with a 1x1 lamp added at height 1.5 above the
/// origin, facing down.
pub fn with_lamp(mut scene: Scene) -> Scene {
    let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
    lamp.emission = Vec3::new(8.0, 7.0, 6.0);
    scene.materials.push(lamp);
    // Normal x x z = -y: down, towards the floor.
    scene.groups.push(quad(
        "lamp",
        Vec3::new(-0.5, 1.5, -0.5),
        Vec3::X,
        Vec3::Z,
        scene.materials.len() as u32 - 1,
    ));
    scene.finalize();
    scene
}

/// Mean and standard error (of the mean) per channel, and the count.
pub fn mean_and_se(values: impl IntoIterator<Item = Vec3>) -> (DVec3, DVec3, usize) {
    let (mut sum, mut sum2, mut n) = (DVec3::ZERO, DVec3::ZERO, 0usize);
    for v in values {
        let v = v.as_dvec3();
        sum += v;
        sum2 += v * v;
        n += 1;
    }
    let mean = sum / n as f64;
    let var = (sum2 / n as f64 - mean * mean).max(DVec3::ZERO) * (n as f64 / (n as f64 - 1.0));
    (mean, (var / n as f64).sqrt(), n)
}

/// What `f` makes of a path tracer of `max_depth` segments over `scene`.
pub fn with_tracer<R>(scene: &Scene, max_depth: u32, f: impl FnOnce(&PathTracer) -> R) -> R {
    let bvh = SceneBvh::build(scene);
    let lights = LightSampler::new(scene);
    f(&PathTracer {
        scene,
        bvh: &bvh,
        lights: &lights,
        max_depth,
    })
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write_file(
    dir: &std::path::Path,
    name: &str,
    bytes: impl AsRef<[u8]>,
) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Loads an OBJ scene without printing its warnings (they stay in its report).
pub fn load_quiet(path: &std::path::Path) -> Scene {
    gasworks::scene::obj::load_obj(path, &gasworks::scene::obj::LoadOptions { quiet: true })
        .unwrap()
}

/// The line that `gasworks info OBJ` (the real binary) prints for material `name`.
pub fn info_line_of_material(obj: &std::path::Path, name: &str) -> String {
    let info = std::process::Command::new(env!("CARGO_BIN_EXE_gasworks"))
        .arg("info")
        .arg(obj)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{text}");
    text.lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_string()
}
