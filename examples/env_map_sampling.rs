//! What importance sampling the environment map buys: the same scene and samples rendered
//! with next-event estimation on the map and MIS against BSDF sampling, as `render` does
//! (the map's tables MIS-compensated: see `src/scene/environment_map.rs`), the same without
//! the compensation, and with BSDF sampling alone (an empty light sampler: escapes then count
//! in full). All three estimate the same image; the figures are each one's mean, its variance
//! per sample, the time per sample, and the efficiency (1 / (variance x time)) against BSDF
//! sampling alone, side by side in one run.
//!
//!     cargo run --release --example env_map_sampling [SCENE.obj]
//!
//! The scene: a grey floor with a box standing on it, under `gen sky`'s daylight sky (a
//! 0.75-degree sun that gives some ten times the sky's light), seen from above; or an OBJ
//! scene with a camera comment (`gen sponza-like` writes one) under the sky with the sun 50
//! degrees up. 64x64 pixels at 64 samples, max depth 4, one thread. The timings are of this
//! machine, loaded or not: the variance ratios are the figures that do not depend on it.

use std::sync::Arc;
use std::time::Instant;

use gasworks::cpu::integrator::{LightSampler, PathTracer};
use gasworks::cpu::SceneBvh;
use gasworks::render::Sampler;
use gasworks::scene::camera::CameraFrame;
use gasworks::scene::gen::sky::{sky, Sun};
use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::{Camera, EnvironmentMap, Group, Material, Scene};
use glam::{DVec3, Vec3};

fn quad(name: &str, p: Vec3, a: Vec3, b: Vec3) -> Group {
    Group {
        name: name.into(),
        positions: vec![p, p + a, p + a + b, p + b],
        indices: vec![[0, 1, 2], [0, 2, 3]],
        face_materials: vec![0, 0],
        ..Default::default()
    }
}

fn floor_and_box() -> Scene {
    let (x, y, z) = (Vec3::X, Vec3::Y, Vec3::Z);
    let lo = Vec3::new(-0.5, 0.0, -0.5);
    let groups = vec![
        quad("floor", Vec3::new(-20.0, 0.0, -20.0), 40.0 * z, 40.0 * x),
        // A unit box: top, and four sides facing out.
        quad("top", lo + y, z, x),
        quad("front", lo + z, x, y),
        quad("back", lo, y, x),
        quad("left", lo, z, y),
        quad("right", lo + x, y, z),
    ];
    let mut scene = Scene::new(
        "floor and box under a sky",
        groups,
        vec![Material::diffuse("grey", Vec3::splat(0.5))],
    );
    scene.set_environment_map(Arc::new(sky_map(35.0)));
    scene
}

/// `gen sky`'s map, 512 texels round, the sun `elevation_deg` up.
fn sky_map(elevation_deg: f32) -> EnvironmentMap {
    sky(
        512,
        Sun {
            elevation_deg,
            azimuth_deg: 30.0,
        },
    )
    .expect("the sky is a valid map")
}

/// The scene and its camera: the floor and box, or the OBJ file named on the command line.
fn scene_and_camera() -> Result<(Scene, Camera), String> {
    let Some(path) = std::env::args().nth(1) else {
        let camera = Camera {
            eye: Vec3::new(0.0, 6.0, 4.0),
            look_at: Vec3::new(0.0, 0.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 40.0,
        };
        return Ok((floor_and_box(), camera));
    };
    let path = std::path::Path::new(&path);
    let mut scene = load_obj(path, &LoadOptions { quiet: true }).map_err(|e| format!("{e:#}"))?;
    let camera = Camera::hint_from_obj(path)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{}: no camera comment", path.display()))?;
    scene.set_environment_map(Arc::new(sky_map(50.0)));
    Ok((scene, camera))
}

struct Figures {
    mean: DVec3,
    variance: f64,
    ns_per_sample: f64,
}

fn run(tracer: &PathTracer, camera: &CameraFrame, size: u32, spp: u32) -> Figures {
    let t = Instant::now();
    let (mut sum, mut variance) = (DVec3::ZERO, 0.0f64);
    for y in 0..size {
        for x in 0..size {
            // Per pixel: the sample variance of the luminance (pixels differ in their means,
            // so the variance is taken within each).
            let (mut s, mut s2) = (0.0f64, 0.0f64);
            for i in 0..spp {
                let mut rng = Sampler::new(x, y, i, spp, 3);
                let (jx, jy) = rng.next_2d();
                let (px, py) = camera.filter.place(x, y, jx, jy);
                let l = tracer.radiance(camera.eye, camera.direction(px, py), &mut rng);
                sum += l.as_dvec3();
                let lum = f64::from(gasworks::colour::luminance(l));
                s += lum;
                s2 += lum * lum;
            }
            let m = s / f64::from(spp);
            variance += (s2 / f64::from(spp) - m * m) * f64::from(spp) / f64::from(spp - 1);
        }
    }
    let n = f64::from(size * size);
    Figures {
        mean: sum / (n * f64::from(spp)),
        variance: variance / n,
        ns_per_sample: t.elapsed().as_nanos() as f64 / (n * f64::from(spp)),
    }
}

fn main() {
    let (scene, camera) = match scene_and_camera() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("env_map_sampling: {e}");
            std::process::exit(2);
        }
    };
    let bvh = SceneBvh::build(&scene);
    let size = 64;
    let spp = 64;
    let camera = camera.frame(size, size).expect("a valid camera");
    // The same geometry (so the same BVH) with the map's tables built without compensation.
    let mut plain = scene.clone();
    let map = scene.environment_map.clone().expect("the scene has a map");
    plain.set_environment_map(Arc::new(map.as_ref().clone().without_compensation()));
    let (compensated_lights, plain_lights) = (LightSampler::new(&scene), LightSampler::new(&plain));
    let bsdf_only = LightSampler::default();
    println!(
        "{}: {size}x{size} pixels, {spp} spp, max depth 4, one thread",
        scene.source
    );
    println!("strategy                              mean luminance   variance/sample   ns/sample");
    let mut figures = Vec::new();
    for (name, scene, lights) in [
        (
            "map sampling + MIS, compensated",
            &scene,
            &compensated_lights,
        ),
        ("map sampling + MIS, not compensated", &plain, &plain_lights),
        ("BSDF sampling alone", &scene, &bsdf_only),
    ] {
        let tracer = PathTracer {
            scene,
            bvh: &bvh,
            lights,
            max_depth: 4,
        };
        let f = run(&tracer, &camera, size, spp);
        println!(
            "{name:<36} {:>15.5} {:>17.5} {:>11.0}",
            gasworks::colour::luminance(f.mean.as_vec3()),
            f.variance,
            f.ns_per_sample
        );
        figures.push(f);
    }
    let bsdf = &figures[2];
    for (name, f) in [
        ("compensated", &figures[0]),
        ("not compensated", &figures[1]),
    ] {
        println!(
            "{name}: variance {:.1}x less than BSDF alone, time per sample {:.2}x, efficiency \
             {:.1}x",
            bsdf.variance / f.variance,
            f.ns_per_sample / bsdf.ns_per_sample,
            (bsdf.variance * bsdf.ns_per_sample) / (f.variance * f.ns_per_sample)
        );
    }
    let (c, p) = (&figures[0], &figures[1]);
    println!(
        "compensation: variance {:.2}x less, time per sample {:.2}x, efficiency {:.2}x",
        p.variance / c.variance,
        c.ns_per_sample / p.ns_per_sample,
        (p.variance * p.ns_per_sample) / (c.variance * c.ns_per_sample)
    );
}
