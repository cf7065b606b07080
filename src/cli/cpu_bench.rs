//! `gasworks cpu-bench`: figures for the CPU backend, printed, never asserted.
//!
//! For each scene, with one thread and with all threads (a local rayon pool each):
//! - with `--load`, loading (OBJ + MTL parse and scene build) in MB/s of file size;
//! - BVH build rate, in million triangles per second (both levels, wall clock);
//! - path-tracing throughput, in million samples per second (32 x 32 tiles spread over the
//!   pool), by wall clock and per second of process CPU time (all threads): on a machine
//!   shared with other work the wall-clock figure drops with the CPU share the process gets,
//!   the CPU-time one much less; and in million rays per second (closest-hit and shadow rays,
//!   wall clock);
//! - at the end, the process's peak resident memory.
//!
//! Each figure is measured `--repeat` times and printed as min / median / max; `--csv` writes
//! one row per scene, thread count and statistic.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use glam::Vec3;
use rayon::prelude::*;

use super::args::CameraArgs;
use super::build_bench::git_commit;
use crate::bench_report::{write_csv, CpuBenchRow, Statistic, Stats};
use crate::console::Verbosity;
use crate::cpu::{CpuBackend, SceneBvh};
use crate::render::{Film, RenderSettings, Tile, TileRenderer};
use crate::scene::{obj, Group, Material, MaterialKind, Scene};
use crate::sched::cputime::{peak_rss_bytes, process_cpu_seconds};
use crate::wording::counted;

#[derive(Args, Debug)]
pub struct CpuBenchArgs {
    /// The scenes, Wavefront OBJ files (omit them and pass --spheres for a built-in scene)
    pub scenes: Vec<PathBuf>,
    /// Instead of files: an in-memory scene of N tessellated spheres (960 triangles each, one
    /// group each, mixed materials) on a floor under an area light
    #[arg(long, conflicts_with = "scenes")]
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
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub threads: Option<usize>,
    /// Skip the path-tracing figures (BVH build only)
    #[arg(long)]
    pub build_only: bool,
    /// Also time loading each scene file (MB/s of OBJ + MTL bytes), --repeat times per
    /// thread count
    #[arg(long)]
    pub load: bool,
    /// Write one CSV row per scene, thread count and statistic (min, median, max) here
    #[arg(long)]
    pub csv: Option<PathBuf>,
    #[command(flatten)]
    pub camera: CameraArgs,
}

/// One scene to measure.
enum Source<'a> {
    File(&'a Path),
    Spheres(u32),
}

pub fn run(a: CpuBenchArgs) -> anyhow::Result<()> {
    if a.width == 0 || a.height == 0 || a.spp == 0 || a.max_depth == 0 || a.repeat == 0 {
        anyhow::bail!("--width, --height, --spp, --max-depth and --repeat must be at least 1");
    }
    let sources: Vec<Source> = match (a.scenes.is_empty(), a.spheres) {
        (false, _) => a.scenes.iter().map(|p| Source::File(p)).collect(),
        (true, Some(n)) if n > 0 => vec![Source::Spheres(n)],
        _ => anyhow::bail!("give scene files, or --spheres N (N >= 1) for a built-in scene"),
    };
    if let Some(p) = &a.csv {
        let scenes: Vec<(&str, &Path)> =
            a.scenes.iter().map(|s| ("a scene", s.as_path())).collect();
        // The header of the CSV written below (CpuBenchRow): an earlier run's is replaced.
        crate::render::paths::check_side_file("--csv", p, &scenes, &["scene,"])?;
    }
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
    let commit = git_commit();
    let mut rows = Vec::new();
    for source in &sources {
        bench_scene(&a, source, &pools, &thread_counts, &commit, &mut rows)?;
    }
    if let Some(bytes) = peak_rss_bytes() {
        // The whole process's: one scene a run gives that scene's.
        println!("peak resident memory: {:.1} MB", bytes as f64 / 1e6);
    }
    if let Some(path) = &a.csv {
        let f = std::fs::File::create(path).with_context(|| format!("--csv {}", path.display()))?;
        write_csv(f, &rows).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {} rows to {}", rows.len(), path.display());
    }
    Ok(())
}

/// The bytes a load reads: the OBJ file and the MTL files its `mtllib` lines name (those
/// that exist beside it).
fn scene_file_bytes(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut bytes = text.len() as u64;
    for line in text.split(|&b| b == b'\n') {
        let line = line.trim_ascii_start();
        if let Some(rest) = line.strip_prefix(b"mtllib") {
            for name in String::from_utf8_lossy(rest).split_whitespace() {
                if let Ok(m) = std::fs::metadata(dir.join(name)) {
                    bytes += m.len();
                }
            }
        }
    }
    Ok(bytes)
}

fn bench_scene(
    a: &CpuBenchArgs,
    source: &Source,
    pools: &[rayon::ThreadPool],
    thread_counts: &[usize],
    commit: &str,
    rows: &mut Vec<CpuBenchRow>,
) -> anyhow::Result<()> {
    let quiet = obj::LoadOptions { quiet: true };
    let (scene, name, path, file_bytes) = match *source {
        Source::File(path) => (
            pools[pools.len() - 1].install(|| obj::load_obj(path, &quiet))?,
            path.display().to_string(),
            Some(path),
            scene_file_bytes(path)?,
        ),
        Source::Spheres(n) => (spheres_scene(n), format!("built-in {n} spheres"), None, 0),
    };
    let tris = scene.triangle_count();
    println!(
        "scene: {name}: {}, {}{}",
        scene.size_text(),
        counted(scene.lights.len(), "area light", "area lights"),
        if file_bytes > 0 {
            format!(", {:.1} MB of OBJ + MTL", file_bytes as f64 / 1e6)
        } else {
            String::new()
        }
    );

    let mut load: Vec<Option<Stats>> = vec![None; pools.len()];
    if a.load {
        match path {
            Some(path) => load = measure_load(a, path, file_bytes, pools, thread_counts)?,
            None => println!("load: not measured (built-in scene)"),
        }
    }

    let build = measure_build(a, &scene, tris, pools, thread_counts);

    let render = match a.build_only {
        true => None,
        false => {
            let settings = bench_settings(a, &scene, &name, path)?;
            Some(measure_render(a, &scene, &settings, pools, thread_counts)?)
        }
    };
    let figure = |pick: fn(&RenderFigures) -> &Vec<Option<Stats>>, k: usize, stat: Statistic| {
        render
            .as_ref()
            .and_then(|r| pick(r)[k])
            .map(|s| stat.of(&s))
    };

    for (k, &threads) in thread_counts.iter().enumerate() {
        for stat in Statistic::ALL {
            rows.push(CpuBenchRow {
                scene: name.clone(),
                groups: scene.groups.len() as u64,
                triangles: tris as u64,
                file_bytes,
                threads,
                statistic: stat,
                load_mb_per_s: load[k].map(|s| stat.of(&s)),
                build_mtri_per_s: stat.of(&build[k]),
                render_msamples_per_s: figure(|r| &r.wall, k, stat),
                render_msamples_per_cpu_s: figure(|r| &r.cpu, k, stat),
                render_mrays_per_s: figure(|r| &r.rays, k, stat),
                width: a.width,
                height: a.height,
                spp: a.spp,
                max_depth: a.max_depth,
                repeats: a.repeat,
                git_commit: commit.to_string(),
            });
        }
    }
    Ok(())
}

/// Times loading the scene file on each pool, `--repeat` times, in MB/s of `file_bytes`; one
/// figure per pool.
fn measure_load(
    a: &CpuBenchArgs,
    path: &Path,
    file_bytes: u64,
    pools: &[rayon::ThreadPool],
    thread_counts: &[usize],
) -> anyhow::Result<Vec<Option<Stats>>> {
    let quiet = obj::LoadOptions { quiet: true };
    let mut load: Vec<Option<Stats>> = vec![None; pools.len()];
    println!("load (OBJ + MTL parse, scene build), {} runs:", a.repeat);
    for (k, (pool, &threads)) in pools.iter().zip(thread_counts).enumerate() {
        let mut rates = Vec::new();
        for _ in 0..a.repeat {
            let t = Instant::now();
            let s = pool.install(|| obj::load_obj(path, &quiet))?;
            rates.push(file_bytes as f64 / t.elapsed().as_secs_f64() / 1e6);
            drop(std::hint::black_box(s));
        }
        let st = Stats::of(&rates).expect("at least one repeat");
        println!("  {threads:>3} thread(s): {}  MB/s", fmt_stats(&st));
        load[k] = Some(st);
    }
    Ok(load)
}

/// Times the BVH build (both levels) on each pool, `--repeat` times, in million triangles
/// per second; one figure per pool.
fn measure_build(
    a: &CpuBenchArgs,
    scene: &Scene,
    tris: usize,
    pools: &[rayon::ThreadPool],
    thread_counts: &[usize],
) -> Vec<Stats> {
    println!("BVH build (both levels), {} runs:", a.repeat);
    let mut build = Vec::new();
    for (pool, &threads) in pools.iter().zip(thread_counts) {
        let secs: Vec<f64> = (0..a.repeat)
            .map(|_| pool.install(|| SceneBvh::build_with_stats(scene).1.seconds))
            .collect();
        let rates: Vec<f64> = secs.iter().map(|s| tris as f64 / s / 1e6).collect();
        let st = Stats::of(&rates).expect("at least one repeat");
        println!(
            "  {threads:>3} thread(s): {}  Mtri/s   ({} s)",
            fmt_stats(&st),
            fmt_stats(&Stats::of(&secs).expect("at least one repeat"))
        );
        build.push(st);
    }
    build
}

/// The settings of the timed renders: the image, samples and depth of the arguments, and the
/// camera they choose for the scene (a file's hint included).
fn bench_settings(
    a: &CpuBenchArgs,
    scene: &Scene,
    name: &str,
    path: Option<&Path>,
) -> anyhow::Result<RenderSettings> {
    let camera = a
        .camera
        .choice()
        .camera(
            &scene.bounds(),
            match path {
                Some(p) => a
                    .camera
                    .choice()
                    .scene_hint(p, |w| Verbosity::Normal.warn(w))?,
                None => None,
            },
            a.width,
            a.height,
        )
        .frame(a.width, a.height)
        .with_context(|| format!("{name}: bad camera"))?;
    Ok(RenderSettings {
        width: a.width,
        height: a.height,
        spp: a.spp,
        max_depth: a.max_depth,
        seed: 0,
        camera,
    })
}

/// What [`measure_render`] finds, one figure per pool: million samples per second by wall
/// clock and per second of process CPU time, million rays (closest hit and shadow) per second
/// by wall clock.
struct RenderFigures {
    wall: Vec<Option<Stats>>,
    cpu: Vec<Option<Stats>>,
    rays: Vec<Option<Stats>>,
}

/// Times path tracing on each pool, `--repeat` times.
fn measure_render(
    a: &CpuBenchArgs,
    scene: &Scene,
    settings: &RenderSettings,
    pools: &[rayon::ThreadPool],
    thread_counts: &[usize],
) -> anyhow::Result<RenderFigures> {
    let mut figures = RenderFigures {
        wall: vec![None; pools.len()],
        cpu: vec![None; pools.len()],
        rays: vec![None; pools.len()],
    };
    let backend = pools[pools.len() - 1].install(|| CpuBackend::new(scene, settings))?;
    let tiles = Tile::grid(a.width, a.height, 32);
    let samples = a.width as f64 * a.height as f64 * a.spp as f64;
    println!(
        "path tracing {}x{}, {} spp, max depth {}, {} runs:",
        a.width, a.height, a.spp, a.max_depth, a.repeat
    );
    let mut rays_a_run = 0;
    for (k, (pool, &threads)) in pools.iter().zip(thread_counts).enumerate() {
        let (mut wall, mut cpu, mut rays) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..a.repeat {
            let (c0, r0) = (process_cpu_seconds(), backend.rays_traced().unwrap_or(0));
            let t = Instant::now();
            let film = pool.install(|| render(&backend, settings, &tiles))?;
            let secs = t.elapsed().as_secs_f64();
            let c1 = process_cpu_seconds();
            rays_a_run = backend.rays_traced().unwrap_or(0) - r0;
            wall.push(samples / secs / 1e6);
            rays.push(rays_a_run as f64 / secs / 1e6);
            if let (Some(c0), Some(c1)) = (c0, c1) {
                cpu.push(samples / (c1 - c0) / 1e6);
            }
            std::hint::black_box(film);
        }
        let w = Stats::of(&wall).expect("at least one repeat");
        let c = Stats::of(&cpu);
        println!(
            "  {threads:>3} thread(s): {}  Msamples/s{}",
            fmt_stats(&w),
            c.map(|c| format!("   ({} per CPU second)", fmt_stats(&c)))
                .unwrap_or_default()
        );
        figures.wall[k] = Some(w);
        figures.cpu[k] = c;
        figures.rays[k] = Stats::of(&rays);
    }
    println!(
        "rays traced (closest hit and shadow), {rays_a_run} a run, {:.3} a sample:",
        rays_a_run as f64 / samples
    );
    for (r, &threads) in figures.rays.iter().zip(thread_counts) {
        if let Some(r) = r {
            println!("  {threads:>3} thread(s): {}  Mrays/s", fmt_stats(r));
        }
    }
    if backend.dropped_samples() > 0 {
        println!("({} non-finite samples dropped)", backend.dropped_samples());
    }
    Ok(figures)
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

fn fmt_stats(s: &Stats) -> String {
    format!(
        "min {:.3} / median {:.3} / max {:.3}",
        s.min, s.median, s.max
    )
}

/// `n` UV spheres (16 rings x 32 segments: 960 triangles once the pole slivers are dropped)
/// on a grid over a floor, cycling through diffuse, glossy, mirror and glass, with an area
/// light above: every code path of the integrator, and one group per sphere.
fn spheres_scene(n: u32) -> Scene {
    let side = (n as f32).sqrt().ceil() as u32;
    let mut groups = Vec::with_capacity(n as usize + 2);
    for k in 0..n {
        groups.push(sphere_group(k, side));
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
    Scene::new("built-in spheres", groups, spheres_materials())
}

/// The `k`th sphere of [`spheres_scene`], on a grid `side` spheres wide: a UV sphere of
/// radius 1, 16 rings x 32 segments, its material cycling through four.
fn sphere_group(k: u32, side: u32) -> Group {
    let (rings, segs) = (16u32, 32u32);
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
    g
}

/// The materials of [`spheres_scene`], by index: 0 the floor's white, 1 to 4 the spheres'
/// (red, glossy, mirror, glass), 5 the light.
fn spheres_materials() -> Vec<Material> {
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
    vec![base, red, glossy, mirror, glass, light]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: CpuBenchArgs,
    }

    fn parse(args: &[&str]) -> CpuBenchArgs {
        let mut v = vec!["cpu-bench"];
        v.extend_from_slice(args);
        Wrapper::try_parse_from(v).unwrap().args
    }

    #[test]
    fn csv_has_one_row_per_scene_thread_count_and_statistic() {
        let dir = tempfile::tempdir().unwrap();
        let obj = dir.path().join("tri.obj");
        std::fs::write(
            &obj,
            "mtllib tri.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl m\nf 1 2 3\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("tri.mtl"), "newmtl m\nKd 0.5 0.5 0.5\n").unwrap();
        let csv = dir.path().join("bench.csv");
        let (o, c) = (obj.to_str().unwrap(), csv.to_str().unwrap());
        run(parse(&[
            o,
            o,
            "--width",
            "8",
            "--height",
            "8",
            "--spp",
            "1",
            "--repeat",
            "2",
            "--threads",
            "2",
            "--load",
            "--csv",
            c,
        ]))
        .unwrap();
        let mut r = csv::Reader::from_path(&csv).unwrap();
        let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        // Two scenes x two thread counts x three statistics.
        assert_eq!(rows.len(), 12);
        let bytes = (std::fs::metadata(&obj).unwrap().len() + 24).to_string();
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(&row[col("threads")], ["1", "2"][i / 3 % 2]);
            assert_eq!(&row[col("statistic")], ["min", "median", "max"][i % 3]);
            assert_eq!(&row[col("triangles")], "1");
            assert_eq!(row[col("file_bytes")], bytes);
            for figure in [
                "load_mb_per_s",
                "build_mtri_per_s",
                "render_msamples_per_s",
                "render_mrays_per_s",
            ] {
                let v: f64 = row[col(figure)].parse().unwrap();
                assert!(v > 0.0 && v.is_finite(), "{figure} = {v}");
            }
        }
        // Statistics are ordered within each (scene, threads).
        for k in 0..4 {
            let v: Vec<f64> = (0..3)
                .map(|s| {
                    rows[k * 3 + s][col("render_msamples_per_s")]
                        .parse()
                        .unwrap()
                })
                .collect();
            assert!(v[0] <= v[1] && v[1] <= v[2], "{v:?}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_before_any_work() {
        assert!(run(parse(&[])).is_err());
        assert!(run(parse(&["--spheres", "1", "--repeat", "0"])).is_err());
        assert!(run(parse(&["--spheres", "1", "--csv", "/no/such/folder/x.csv"])).is_err());
        assert!(run(parse(&["/no/such/scene.obj"])).is_err());
    }
}
