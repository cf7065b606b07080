//! `gasworks cpu-bench`: figures for the CPU backend, printed, never asserted.
//!
//! - BVH build rate, in million triangles per second (both levels, wall clock), with one
//!   thread and with all threads (the per-group builds run in parallel);
//! - path-tracing throughput, in million samples per second, with one thread and with all
//!   threads (32 x 32 tiles spread over a local rayon pool).
//!
//! Each figure is measured `--repeat` times and printed as min / median / max.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use glam::Vec3;
use rayon::prelude::*;

use super::args::CameraArgs;
use crate::cpu::{CpuBackend, SceneBvh};
use crate::render::{Film, RenderSettings, Tile, TileRenderer};
use crate::scene::{obj, Group, Material, MaterialKind, Scene};

#[derive(Args, Debug)]
pub struct CpuBenchArgs {
    /// The scene, a Wavefront OBJ file (omit it and pass --spheres for a built-in scene)
    pub scene: Option<PathBuf>,
    /// Instead of a file: an in-memory scene of N tessellated spheres (960 triangles each, one
    /// group each, mixed materials) on a floor under an area light
    #[arg(long, conflicts_with = "scene")]
    pub spheres: Option<u32>,
    /// Image width in pixels
    #[arg(long, default_value_t = 512)]
    pub width: u32,
    /// Image height in pixels
    #[arg(long, default_value_t = 512)]
    pub height: u32,
    /// Samples per pixel of each timed render
    #[arg(long, default_value_t = 4)]
    pub spp: u32,
    /// Longest path, in segments from the camera
    #[arg(long, default_value_t = 8)]
    pub max_depth: u32,
    /// How many times each figure is measured
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// The "all threads" count [default: the machine's available parallelism]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Skip the path-tracing figures (BVH build only)
    #[arg(long)]
    pub build_only: bool,
    #[command(flatten)]
    pub camera: CameraArgs,
}

pub fn run(a: CpuBenchArgs) -> anyhow::Result<()> {
    if a.width == 0 || a.height == 0 || a.spp == 0 || a.max_depth == 0 || a.repeat == 0 {
        anyhow::bail!("--width, --height, --spp, --max-depth and --repeat must be at least 1");
    }
    let (scene, name) = match (&a.scene, a.spheres) {
        (Some(path), _) => (
            obj::load_obj(path, &obj::LoadOptions { quiet: true })?,
            path.display().to_string(),
        ),
        (None, Some(n)) if n > 0 => (spheres_scene(n), format!("built-in {n} spheres")),
        _ => anyhow::bail!("give a scene file, or --spheres N (N >= 1) for a built-in scene"),
    };
    let all = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let thread_counts: Vec<usize> = if all == 1 { vec![1] } else { vec![1, all] };
    let pools = thread_counts
        .iter()
        .map(|&t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .with_context(|| format!("cannot start a pool of {t} threads"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    let tris = scene.triangle_count();
    println!(
        "scene: {name}: {} groups, {tris} triangles, {} area lights",
        scene.groups.len(),
        scene.lights.len()
    );
    println!("BVH build (both levels), {} runs:", a.repeat);
    for (pool, &threads) in pools.iter().zip(&thread_counts) {
        let secs: Vec<f64> = (0..a.repeat)
            .map(|_| pool.install(|| SceneBvh::build_with_stats(&scene).1.seconds))
            .collect();
        let rates: Vec<f64> = secs.iter().map(|s| tris as f64 / s / 1e6).collect();
        println!(
            "  {threads:>3} thread(s): {}  Mtri/s   ({} s)",
            min_median_max(&rates),
            min_median_max(&secs)
        );
    }
    if a.build_only {
        return Ok(());
    }

    let camera = a
        .camera
        .camera(&scene.bounds(), None)
        .frame(a.width, a.height)
        .with_context(|| format!("{name}: bad camera"))?;
    let settings = RenderSettings {
        width: a.width,
        height: a.height,
        spp: a.spp,
        max_depth: a.max_depth,
        seed: 0,
        camera,
    };
    let backend = pools[pools.len() - 1].install(|| CpuBackend::new(&scene, &settings));
    let tiles = Tile::grid(a.width, a.height, 32);
    let samples = a.width as f64 * a.height as f64 * a.spp as f64;
    println!(
        "path tracing {}x{}, {} spp, max depth {}, {} runs:",
        a.width, a.height, a.spp, a.max_depth, a.repeat
    );
    for (pool, &threads) in pools.iter().zip(&thread_counts) {
        let mut rates = Vec::new();
        for _ in 0..a.repeat {
            let t = Instant::now();
            let film = pool.install(|| render(&backend, &settings, &tiles))?;
            rates.push(samples / t.elapsed().as_secs_f64() / 1e6);
            std::hint::black_box(film);
        }
        println!(
            "  {threads:>3} thread(s): {}  Msamples/s",
            min_median_max(&rates)
        );
    }
    if backend.dropped_samples() > 0 {
        println!("({} non-finite samples dropped)", backend.dropped_samples());
    }
    Ok(())
}

/// Renders every tile on the current rayon pool into a film.
fn render(backend: &CpuBackend, settings: &RenderSettings, tiles: &[Tile]) -> anyhow::Result<Film> {
    let done = tiles
        .par_iter()
        .map(|&t| {
            let mut acc = vec![[0.0f32; 4]; t.pixel_count()];
            backend.render_tile(t, 0..settings.spp, &mut acc)?;
            Ok((t, acc))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut film = Film::new(settings.width, settings.height);
    for (t, acc) in done {
        film.write_tile(t, &acc);
    }
    Ok(film)
}

fn min_median_max(v: &[f64]) -> String {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    format!(
        "min {:.3} / median {:.3} / max {:.3}",
        s[0],
        s[s.len() / 2],
        s[s.len() - 1]
    )
}

/// `n` UV spheres (16 rings x 32 segments: 960 triangles once the pole slivers are dropped)
/// on a grid over a floor, cycling through diffuse, glossy, mirror and glass, with an area
/// light above: every code path of the integrator, and one group per sphere.
fn spheres_scene(n: u32) -> Scene {
    let side = (n as f32).sqrt().ceil() as u32;
    let mut groups = Vec::with_capacity(n as usize + 2);
    let (rings, segs) = (16u32, 32u32);
    for k in 0..n {
        let c = Vec3::new((k % side) as f32 * 2.2, 1.0, (k / side) as f32 * 2.2);
        let mut g = Group {
            name: format!("sphere{k}"),
            ..Default::default()
        };
        for i in 0..=rings {
            let th = std::f32::consts::PI * i as f32 / rings as f32;
            for j in 0..segs {
                let ph = std::f32::consts::TAU * j as f32 / segs as f32;
                let d = Vec3::new(th.sin() * ph.cos(), th.cos(), th.sin() * ph.sin());
                g.positions.push(c + d);
                g.normals.push(d);
            }
        }
        for i in 0..rings {
            for j in 0..segs {
                let a = i * segs + j;
                let b = i * segs + (j + 1) % segs;
                g.indices.push([a, b, a + segs]);
                g.indices.push([b, b + segs, a + segs]);
                g.face_materials.extend([1 + k % 4; 2]);
            }
        }
        groups.push(g);
    }
    let extent = side as f32 * 2.2;
    let quad = |name: &str, p: Vec3, a: Vec3, b: Vec3, m: u32| Group {
        name: name.into(),
        positions: vec![p, p + a, p + a + b, p + b],
        indices: vec![[0, 1, 2], [0, 2, 3]],
        face_materials: vec![m, m],
        ..Default::default()
    };
    groups.push(quad(
        "floor",
        Vec3::new(-2.0, 0.0, -2.0),
        Vec3::new(0.0, 0.0, extent + 2.0),
        Vec3::new(extent + 2.0, 0.0, 0.0),
        0,
    ));
    groups.push(quad(
        "light",
        Vec3::new(extent * 0.3, extent, extent * 0.3),
        Vec3::new(extent * 0.3, 0.0, 0.0),
        Vec3::new(0.0, 0.0, extent * 0.3),
        5,
    ));
    let base = Material::diffuse("white", Vec3::splat(0.7));
    let glossy = Material {
        name: "glossy".into(),
        kind: MaterialKind::Glossy,
        diffuse: Vec3::new(0.2, 0.3, 0.5),
        specular: Vec3::splat(0.4),
        shininess: 80.0,
        ..base.clone()
    };
    let mirror = Material {
        name: "mirror".into(),
        kind: MaterialKind::Mirror,
        specular: Vec3::splat(0.9),
        ..base.clone()
    };
    let glass = Material {
        name: "glass".into(),
        kind: MaterialKind::Glass,
        ior: 1.5,
        ..base.clone()
    };
    let light = Material {
        name: "light".into(),
        emission: Vec3::splat(10.0),
        ..base.clone()
    };
    let red = Material::diffuse("red", Vec3::new(0.7, 0.2, 0.15));
    Scene::new(
        "built-in spheres",
        groups,
        vec![base, red, glossy, mirror, glass, light],
    )
}
