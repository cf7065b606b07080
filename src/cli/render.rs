//! `gasworks render`: load a scene, pick a backend, render the tiles, write the image.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::args::{parse_vec3, AccelArgs, CameraArgs, ScheduleArgs};
use crate::render::{output, RenderSettings};
use crate::scene::{obj, Camera, Environment};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU backend when a GPU and driver are present, else the CPU backend
    Auto,
    /// The CPU reference backend
    Cpu,
    /// The OptiX backend (fails when no GPU can be used)
    Optix,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The scene, a Wavefront OBJ file (its MTL files are found through mtllib)
    pub scene: PathBuf,
    /// Output image: .png (tone-mapped sRGB) or .exr (linear radiance)
    #[arg(short, long)]
    pub output: PathBuf,
    /// Samples per pixel
    #[arg(long, default_value_t = 64)]
    pub spp: u32,
    /// Image width in pixels
    #[arg(long, default_value_t = 512)]
    pub width: u32,
    /// Image height in pixels
    #[arg(long, default_value_t = 512)]
    pub height: u32,
    /// Longest path, in segments from the camera
    #[arg(long, default_value_t = 8)]
    pub max_depth: u32,
    /// Which backend renders
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// CPU threads [default: all cores]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed of the random numbers (the image is a pure function of scene, settings and seed)
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Uniform environment radiance, r,g,b (replaces the default sky of emitter-less scenes)
    #[arg(long, value_parser = parse_vec3)]
    pub env: Option<glam::Vec3>,
    /// No progress bars
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub camera: CameraArgs,
    #[command(flatten)]
    pub accel: AccelArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
}

pub fn run(a: RenderArgs) -> anyhow::Result<()> {
    if a.width == 0 || a.height == 0 {
        anyhow::bail!("--width and --height must be at least 1");
    }
    if a.spp == 0 {
        anyhow::bail!("--spp must be at least 1");
    }
    if a.max_depth == 0 {
        anyhow::bail!("--max-depth must be at least 1");
    }
    // Refuse an unwritable output or a bad schedule before spending minutes on a render.
    output::check_writable(&a.output)?;
    let schedule = a.schedule.config()?;
    if let Some(t) = a.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t.max(1))
            .build_global()
            .context("cannot set the number of threads")?;
    }

    let t0 = Instant::now();
    let mut scene = obj::load_obj(&a.scene, &obj::LoadOptions { quiet: a.quiet })?;
    if let Some(env) = a.env {
        scene.environment = Some(Environment { radiance: env });
    }
    for w in &scene.report.warnings {
        eprintln!("warning: {w}");
    }
    if scene.report.degenerate_dropped > 0 {
        eprintln!(
            "warning: {}: dropped {} degenerate triangles",
            a.scene.display(),
            scene.report.degenerate_dropped
        );
    }
    let load_s = t0.elapsed().as_secs_f64();

    let camera = a
        .camera
        .camera(&scene.bounds(), Camera::hint_from_obj(&a.scene))
        .frame(a.width, a.height)
        .with_context(|| format!("{}: bad camera", a.scene.display()))?;
    let settings = RenderSettings {
        width: a.width,
        height: a.height,
        spp: a.spp,
        max_depth: a.max_depth,
        seed: a.seed,
        camera,
    };

    let backend = crate::backend::select(a.backend.into(), &scene, &settings, &a.accel)?;
    eprintln!("backend: {}", backend.description);
    let build_seconds = backend.build_seconds;
    // Without --devices, the selected backend decides the workers: two streams on GPU 0 (one
    // launch in flight while the other's tile is copied back), or one worker per CPU thread.
    let mut schedule = schedule;
    if a.schedule.devices.is_none() && backend.optix.is_some() {
        schedule.devices = vec![crate::sched::DeviceSpec::Gpu {
            device: 0,
            streams: 2,
        }];
    }
    let factory = crate::backend::WorkerFactory::new(&scene, &settings, &a.accel, backend);
    let t1 = Instant::now();
    let frame = crate::sched::render_frame(&scene, &settings, &schedule, &factory, a.quiet)?;
    let render_s = t1.elapsed().as_secs_f64();
    output::write_image(&frame.film, &a.output)?;
    crate::sched::publish(
        &frame,
        a.schedule.stats.as_deref(),
        a.schedule.costmap.as_deref(),
    )?;
    let samples = a.width as f64 * a.height as f64 * a.spp as f64;
    eprintln!(
        "{}: {} groups, {} triangles; load {:.2} s, build {:.3} s, render {:.2} s, {:.3} M samples/s -> {}",
        a.scene.display(),
        scene.groups.len(),
        scene.triangle_count(),
        load_s,
        build_seconds,
        render_s,
        samples / render_s / 1e6,
        a.output.display()
    );
    if let Some(rays) = factory.rays_traced() {
        eprintln!(
            "rays: {rays} traced, {:.1} M rays/s",
            rays as f64 / render_s / 1e6
        );
    }
    Ok(())
}

impl From<BackendArg> for crate::backend::BackendChoice {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Auto => crate::backend::BackendChoice::Auto,
            BackendArg::Cpu => crate::backend::BackendChoice::Cpu,
            BackendArg::Optix => crate::backend::BackendChoice::Optix,
        }
    }
}
