//! `gasworks render`: load a scene, pick a backend, render the tiles, write the image.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::args::{
    parse_duration, parse_vec3, AccelArgs, CameraArgs, PixelFilterArg, PngToneArgs, ScheduleArgs,
};
use super::console::Verbosity;
use super::render_aovs::{check_aov_paths, frame_on_gpus_alone, write_aovs, PendingAovs};
use super::signals::{self, StopSignal};
use crate::render::checkpoint::{self, CheckpointHeader, Checkpointer};
use crate::render::output::{self, ImageMeta};
use crate::render::{RenderSettings, Tile};
use crate::scene::{obj, Camera, Environment, EnvironmentMap, Scene};
use crate::sched::progress::ProgressMode;
use crate::sched::window;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU backend when a GPU and driver are present, else the CPU backend
    Auto,
    /// The CPU reference backend
    Cpu,
    /// The OptiX backend (fails when no GPU can be used)
    Optix,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressArg {
    /// A bar on a terminal; elsewhere, lines once the render has run 30 s
    Auto,
    /// A bar, even where stderr is not a terminal
    Bar,
    /// Lines: "progress: 40% (pass 13/32), 1640 of 4096 tiles, 2m05s elapsed, about 3m07s left"
    Lines,
    /// Nothing
    None,
}

impl From<ProgressArg> for ProgressMode {
    fn from(p: ProgressArg) -> ProgressMode {
        match p {
            ProgressArg::Auto => ProgressMode::Auto,
            ProgressArg::Bar => ProgressMode::Bar,
            ProgressArg::Lines => ProgressMode::Lines,
            ProgressArg::None => ProgressMode::None,
        }
    }
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The scene, a Wavefront OBJ file (its MTL files are found through mtllib)
    pub scene: PathBuf,
    /// Output image: .png (tone-mapped sRGB), .webp (the PNG's pixels, lossless, in about a
    /// third fewer bytes; whole frames only) or .exr (linear radiance)
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Samples per pixel (a power of two stratifies best)
    ///
    /// A power of two stratifies best: the scrambled Sobol' numbers cover each dimension
    /// evenly over every power-of-two run of a pixel's samples.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub spp: u32,
    /// Image width in pixels
    #[arg(long, default_value_t = 512)]
    pub width: u32,
    /// Image height in pixels
    #[arg(long, default_value_t = 512)]
    pub height: u32,
    /// Longest path, in segments from the camera
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_depth: u32,
    /// Which backend renders
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// CPU threads [default: all cores]
    #[arg(long, value_name = "T", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub threads: Option<usize>,
    /// Seed of the random numbers (the image is a pure function of scene, settings and seed)
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Uniform environment radiance, r,g,b (replaces the default sky of emitter-less scenes)
    // Hyphen values let `--env -1,0,0` reach parse_radiance, which says why it is refused
    // (clap alone took "-1,0,0" for an unknown flag).
    #[arg(
        long,
        value_name = "R,G,B",
        value_parser = parse_radiance,
        allow_hyphen_values = true,
        help_heading = "Lights and environment"
    )]
    pub env: Option<glam::Vec3>,
    /// Environment map: a latitude-longitude image of linear radiance (.exr or .hdr)
    ///
    /// The light arriving from every direction, importance-sampled: its top row is up (+Y),
    /// its centre towards -Z, where the default camera looks. `gasworks gen sky` writes one.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "env",
        help_heading = "Lights and environment"
    )]
    pub env_map: Option<PathBuf>,
    /// Turn the environment map about the up axis by this many degrees (from -Z towards +X)
    #[arg(
        long,
        value_name = "DEG",
        requires = "env_map",
        default_value_t = 0.0,
        allow_negative_numbers = true,
        help_heading = "Lights and environment"
    )]
    pub env_rotate: f32,
    /// Multiply the environment map's radiance by this factor
    ///
    /// Its brightness against the scene's lamps; a PNG's overall brightness is --exposure's.
    #[arg(
        long,
        value_name = "K",
        requires = "env_map",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        help_heading = "Lights and environment"
    )]
    pub env_scale: f32,
    /// The share of light samples that go to the environment map, with area lights too
    ///
    /// In a scene with area lights as well: auto (measured before the render by short paths
    /// through the frame, in proportion to the root mean square of what each one's samples
    /// bring) or a number from 0 to 1.
    #[arg(
        long,
        value_name = "auto|P",
        requires = "env_map",
        default_value = "auto",
        value_parser = parse_env_share,
        allow_hyphen_values = true,
        help_heading = "Lights and environment",
        hide_short_help = true
    )]
    pub env_share: EnvShareArg,
    /// Area lights emit from both faces (default: the front face only, the side the
    /// winding's normal points to, as in pbrt and Mitsuba)
    #[arg(long, help_heading = "Lights and environment", hide_short_help = true)]
    pub two_sided_lights: bool,
    #[command(flatten)]
    pub tone: PngToneArgs,
    /// Pixel filter: box (sharpest) or tent (smoother edges)
    ///
    /// box: each pixel averages its own square. tent: radius 1 pixel, neighbours overlap,
    /// smoother edges for slightly softer detail.
    #[arg(long, value_enum, default_value_t = PixelFilterArg::Box, help_heading = "Image")]
    pub filter: PixelFilterArg,
    /// Depth of field: the radius of a thin lens, in scene units [default: 0, a pinhole, where
    /// everything is sharp]
    #[arg(
        long,
        value_name = "R",
        allow_hyphen_values = true,
        help_heading = "Camera",
        display_order = 1000
    )]
    pub lens_radius: Option<f32>,
    /// The distance from the eye, along the view direction, of the plane the lens focuses on
    /// [default: the look-at point's]
    #[arg(
        long,
        value_name = "D",
        requires = "lens_radius",
        allow_hyphen_values = true,
        help_heading = "Camera",
        display_order = 1001
    )]
    pub focus_distance: Option<f32>,
    /// Focus the lens on the plane (across the view direction) through this point, x,y,z, in
    /// place of --focus-distance
    #[arg(
        long,
        value_name = "X,Y,Z",
        value_parser = parse_vec3,
        requires = "lens_radius",
        conflicts_with = "focus_distance",
        allow_hyphen_values = true,
        help_heading = "Camera",
        display_order = 1002
    )]
    pub focus_on: Option<glam::Vec3>,
    /// Guide layers for a denoiser, written beside the image (OUT.albedo.exr, OUT.normal.exr)
    ///
    /// Linear EXRs named after the image: the albedo and the world-space shading normal of
    /// what each pixel sees, through mirrors and glass, for `gasworks denoise`, Open Image
    /// Denoise or the OptiX denoiser. Traced on the CPU whatever the backend, through the
    /// render's own camera rays.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "LAYER,...",
        help_heading = "Image"
    )]
    pub aov: Vec<crate::cpu::aov::Aov>,
    /// Samples per pixel the --aov layers average (the first of the render's own; at most
    /// --spp, rounded down to a power of two)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        requires = "aov",
        value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..),
        help_heading = "Image",
        hide_short_help = true
    )]
    pub aov_spp: u32,
    /// Print only warnings and errors (no progress bar, no summary)
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print details too: the camera, the schedule's per-worker table, the cost map's accuracy
    ///
    /// The camera as the flags that reproduce it, the schedule's per-worker table and the
    /// cost map's error histogram (also printed with --stats).
    #[arg(long, short)]
    pub verbose: bool,
    /// How progress is shown: a bar on a terminal, lines in a log
    ///
    /// `auto` draws a bar on a terminal and, where stderr is a file or a pipe (batch jobs,
    /// farm logs), prints a line each 10% of the tiles and at least every minute, from 30 s
    /// into the render; `lines` prints them from the first tile.
    #[arg(long, value_enum, default_value_t = ProgressArg::Auto, hide_short_help = true)]
    pub progress: ProgressArg,
    /// Render only the pixels [x0,x1) x [y0,y1) of the image, for `gasworks merge` to join
    ///
    /// pbrt's --pixelbounds x0,x1,y0,y1: the crop is written as an image of its own size
    /// that records where it lies in the frame; `gasworks merge` joins such crops.
    #[arg(
        long,
        value_name = "X0,X1,Y0,Y1",
        value_parser = output::parse_pixelbounds,
        allow_hyphen_values = true,
        help_heading = "Passes, stops and farms"
    )]
    pub pixelbounds: Option<Tile>,
    /// Finish a stopped or killed render from its resume file (OUT.gasworks-resume)
    ///
    /// Give the same command line plus the resume file that a stop (Ctrl-C, SIGTERM), a time
    /// limit or a checkpoint left; the image is bit for bit what an uninterrupted render
    /// gives.
    #[arg(long, value_name = "FILE", help_heading = "Passes, stops and farms")]
    pub resume: Option<PathBuf>,
    /// Write a checkpoint (OUT.gasworks-resume) at most this often: 600, 90s, 10m, 2h
    ///
    /// A checkpoint holds the complete passes and the current pass's finished tiles, so that
    /// a render killed, crashed or cut off by a time limit can be finished with --resume.
    /// SIGUSR1 asks for one once the next tile is done.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Passes, stops and farms")]
    pub checkpoint_every: Option<Duration>,
    /// Finish by this long after the command started: 600, 90s, 10m, 2h
    ///
    /// A pass that would end later is not started, and the image is written whole with the
    /// passes done, plus a resume file to go on from later. Without --pass-spp, passes of
    /// --spp/16 rounded down to a power of two (at least 1).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Passes, stops and farms")]
    pub time_limit: Option<Duration>,
    /// Stop sampling the 16x16-pixel blocks whose noise is at or below this (0.01: about 2.5
    /// levels of 255)
    ///
    /// From the third pass on, only the blocks whose noise is still above T are rendered (a
    /// pixel's standard deviation as a PNG at --exposure 0 shows it, white = 1: 0.01 is about
    /// 2.5 levels of 255). Without --pass-spp, passes of --spp/16 rounded down to a power of
    /// two.
    #[arg(long, value_name = "T", value_parser = parse_noise_threshold, help_heading = "Adaptive sampling")]
    pub noise_threshold: Option<f32>,
    /// With --noise-threshold: no block stops before this many samples per pixel (the first
    /// pass boundary at or after it) [default: two passes]
    #[arg(
        long,
        value_name = "N",
        requires = "noise_threshold",
        help_heading = "Adaptive sampling",
        hide_short_help = true
    )]
    pub min_spp: Option<u32>,
    /// Whether the pass size was chosen for --time-limit or --noise-threshold rather than
    /// given (set by `run`).
    #[arg(skip)]
    pub pass_spp_chosen: bool,
    #[command(flatten, next_help_heading = "Camera")]
    pub camera: CameraArgs,
    #[command(flatten, next_help_heading = "GPU: acceleration structure builds")]
    pub accel: AccelArgs,
    #[command(flatten, next_help_heading = "Workers and tiles")]
    pub schedule: ScheduleArgs,
}

/// A build without the feature `mpi` that a launcher started as one of several ranks: each
/// would render the whole frame into the same output, so none does. (One rank, `mpirun -np
/// 1`, is a single process in either build.)
#[cfg(not(feature = "mpi"))]
fn refuse_ranks_without_mpi() -> anyhow::Result<()> {
    match crate::cluster::launcher::world_size() {
        Some((var, ranks)) if ranks > 1 => anyhow::bail!(
            "an MPI launcher started this gasworks as one of {ranks} ranks ({var}={ranks}), but \
             it was built without the cargo feature `mpi`: each rank would render the whole \
             frame into the same output. Build it with `cargo build --release --features mpi` \
             (README, \"Rendering on a cluster\"), or run it without mpirun"
        ),
        _ => Ok(()),
    }
}

pub fn run(a: RenderArgs) -> anyhow::Result<()> {
    // Before the ranks part: every rank, and a later --resume of the same command, must
    // choose the same passes.
    let a = choose_passes(a);
    crate::sched::progress::set_mode(a.progress.into());
    // Under mpirun with several ranks, the ranks render the frame together. With one rank, MPI
    // stays initialized until this function returns and the render is a single process's.
    #[cfg(feature = "mpi")]
    let _mpi = match crate::cluster::mpi::MpiWorld::from_launcher()? {
        Some(world) if crate::sched::Transport::size(&world) > 1 => {
            return super::render_cluster::run(a, world)
        }
        one => one,
    };
    #[cfg(not(feature = "mpi"))]
    refuse_ranks_without_mpi()?;
    // --time-limit counts from here: a batch job's clock includes loading and building.
    let started = Instant::now();
    let out = Verbosity::from_flags(a.quiet, a.verbose);
    signals::watch_checkpoint_requests(out);
    check_args(&a)?;
    // Refuse an unwritable output, a bad window or schedule, or bad GPU options before
    // spending minutes on a render.
    let window = window::resolve(a.pixelbounds, a.width, a.height)?;
    output::check_writable(&a.output)?;
    output::check_window_fits_format(&a.output, window, a.width, a.height)?;
    check_aov_paths(&a)?;
    check_report_paths(&a)?;
    check_frame_memory(window.w, window.h)?;
    // A malformed camera comment fails now, not after minutes of loading (checked again,
    // and used, once the scene is loaded).
    if !a.camera.overrides_all() {
        Camera::hint_from_obj(&a.scene)?;
    }
    let mut schedule = schedule_config(&a)?;
    let optix_options = a.accel.optix_options()?;
    if let Some(t) = a.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t.max(1))
            .build_global()
            .context("cannot set the number of threads")?;
    }

    let (mut scene, load_s) = load_scene(&a)?;
    check_outputs_against_textures(&a, &scene)?;
    print_load_warnings(&a, &scene, out);
    out.status(format_args!(
        "scene: {}: {}",
        a.scene.display(),
        scene.size_text(),
    ));
    let settings = render_settings(&a, &scene, out)?;
    // The CPU BVH, built once whoever needs it: the probe (built before), the CPU backend,
    // the --aov layers.
    let cpu_bvh =
        crate::cpu::SharedBvh::new(choose_environment_share(&a, &mut scene, &settings, out));
    // The --aov layers trace the CPU BVH. Where the frame will run on GPUs alone, the cores
    // would idle through the GPU's setup and frame: the layers are traced then, on a thread of
    // their own, which builds the BVH too (unless the probe built one; a CPU backend that
    // takes over from a GPU that cannot be set up waits for that build). Elsewhere, and under
    // a --time-limit (whose passes are planned without them), they are traced before the
    // frame, on the BVH the CPU backend traces (or on one built for them).
    let aovs_beside_gpu =
        !a.aov.is_empty() && a.time_limit.is_none() && frame_on_gpus_alone(&a, &schedule);
    // From here on the scene is only read: shared with the CPU backend, not copied for it.
    let scene = std::sync::Arc::new(scene);
    let aovs = PendingAovs::start(
        &a,
        &scene,
        cpu_bvh.clone(),
        &settings,
        window,
        aovs_beside_gpu,
    );
    let content = crate::scene::content_hash::content_hash(&scene);
    let render_key = frame_key(&a, &scene, content, &settings, &schedule);
    let pass_spp = schedule.pass_spp.unwrap_or(a.spp);
    warn_about_checkpoints(&a, out);
    let checkpoint_file = checkpoint::path_for(&a.output);
    let resume = match &a.resume {
        Some(path) => Some(read_resume(
            path,
            &render_key,
            window,
            &schedule,
            a.spp,
            out,
        )?),
        None => None,
    };
    let samples_resumed = resume.as_ref().map_or(0.0, crate::sched::Resume::samples);

    let (backend, prepared_estimate) = set_up_backend(
        &a,
        &scene,
        &settings,
        &schedule,
        &optix_options,
        true,
        cpu_bvh,
    )?;
    out.status(format_args!("backend: {}", backend.description));
    let build_seconds = backend.build_seconds;
    // Without --devices, the selected backend decides the workers: two streams on GPU 0 (one
    // launch in flight while the other's tile is copied back), or one worker per CPU thread.
    if a.schedule.devices.is_none() && backend.optix.is_some() {
        schedule.devices = vec![crate::sched::DeviceSpec::Gpu {
            device: 0,
            streams: 2,
        }];
    }
    let factory = crate::backend::WorkerFactory::new(&scene, &settings, &optix_options, backend);
    let header = CheckpointHeader {
        render: render_key.clone(),
        window: [window.x, window.y, window.w, window.h],
        pass_spp,
        spp_done: 0,
        software: output::software(),
        png_tone: a.tone.recorded(),
    };
    // Written at pass boundaries and inside passes, by the two hooks below.
    let checkpoints = std::cell::RefCell::new(Checkpointer::new(
        checkpoint_file.clone(),
        header.clone(),
        a.checkpoint_every,
    ));
    let mut between_passes = |film: &crate::render::Film, spp_done: u32| {
        checkpoint_between_passes(&mut checkpoints.borrow_mut(), film, spp_done, out)
    };
    let mut within_pass = |spp_done: u32, film: &dyn Fn() -> crate::render::Film| {
        checkpoint_within_pass(&mut checkpoints.borrow_mut(), spp_done, film, out)
    };
    // The --aov layers before the frame (unless they are being traced beside the GPU), so
    // that --time-limit counts them.
    let aovs = aovs.trace_before_frame();
    // From here Ctrl-C, SIGTERM and SIGHUP stop the frame and keep what is rendered; before,
    // while loading and building, they end the process as usual.
    signals::watch_stops(signals::Stopping::Process, out);
    let t1 = Instant::now();
    let frame = crate::sched::render_frame_until(
        &scene,
        &settings,
        &schedule,
        &factory,
        out.is_quiet(),
        crate::sched::FrameControl {
            stop: &signals::STOPPED_BY,
            resume,
            between_passes: Some(&mut between_passes),
            within_pass: Some(&mut within_pass),
            deadline: pass_deadline(&a, started, u64::from(window.w) * u64::from(window.h)),
            estimate: prepared_estimate,
        },
    );
    let frame = match frame {
        Ok(frame) => frame,
        Err(e) => return Err(after_checkpoints(e, &checkpoints.borrow())),
    };
    // A signal from here on changes nothing: what the frame rendered is written as it is.
    signals::frame_ended();
    let render_s = t1.elapsed().as_secs_f64();
    let stopped_by = signals::stopped_by().unwrap_or(StopSignal::Interrupt);
    for late in factory.late_backends() {
        out.status(format_args!("backend: {late}"));
    }
    if let Some(stopped) = &frame.stopped {
        if !stopped.rendered_any() {
            // Nothing to keep: an image of black pixels would only overwrite a good one.
            return Err(Interrupted {
                by: stopped_by,
                message: "no tile was rendered, so no image was written".into(),
            }
            .into());
        }
    }
    let meta = ImageMeta {
        full_width: a.width,
        full_height: a.height,
        window,
        render: image_key(&render_key, frame.stopped.as_ref(), &frame.film),
        exposure: a.tone.exposure,
        tonemap: a.tone.curve(),
    };
    // A frame a stop or the time limit ended keeps its complete passes in a resume file,
    // written first (as under mpirun), so that a failure to write the image cannot lose it;
    // and a failure to write it (nowhere, not even rescued) does not keep the image from
    // being written: that error comes after.
    let resume_written = match (&frame.stopped, frame.resume_film()) {
        (Some(_), Some((film, spp_done))) => {
            let header = CheckpointHeader {
                spp_done,
                ..header.clone()
            };
            Some(write_resume_or_rescue(&checkpoint_file, &header, film, out))
        }
        _ => None,
    };
    // A write that fails after the render (folder gone, disk full) keeps the pixels in the
    // temporary folder and says where, rather than losing the render.
    output::write_image_or_rescue(&frame.film, &a.output, &meta, &std::env::temp_dir())?;
    let resume_file = resume_written.transpose().map_err(|e| {
        e.context(format!(
            "{} is written, but not its resume file",
            a.output.display()
        ))
    })?;
    // The statistics of a stopped frame are those of its complete passes; with none, there is
    // nothing measured to write.
    let published = if frame.report.passes.is_empty() {
        crate::sched::Published::default()
    } else {
        crate::sched::publish(
            &frame,
            a.schedule.stats.as_deref(),
            a.schedule.costmap.as_deref(),
        )?
    };
    // After the image, its resume file and the statistics: a failure here costs none of them.
    if let Some(aovs) = aovs.finish(out)? {
        write_aovs(&a, &aovs, &meta.render, out)?;
    }

    // A time limit stops between passes: every pixel has the samples of the complete passes.
    let at_time_limit = frame.stopped.as_ref().filter(|s| s.at_time_limit);
    if frame.stopped.is_some() && at_time_limit.is_none() {
        // Samples per second would need the samples actually rendered: not claimed.
        out.status(format_args!(
            "time: load {load_s:.2} s, build {build_seconds:.3} s, render {render_s:.2} s (stopped)"
        ));
    } else if frame.report.passes.is_empty() {
        // Resumed from a file that held every sample: nothing was rendered, nothing to rate.
        out.status(format_args!(
            "time: load {load_s:.2} s, build {build_seconds:.3} s, render {render_s:.2} s (nothing left to render: the resume file held every sample)"
        ));
    } else {
        // The samples this run rendered: those the resumed film did not hold, if any.
        let samples = (frame.film.samples() - samples_resumed).max(0.0);
        let mut time = format!(
            "time: load {load_s:.2} s, build {build_seconds:.3} s, render {render_s:.2} s, {:.3} M samples/s",
            samples / render_s / 1e6,
        );
        if let Some(rays) = factory.rays_traced() {
            time += &format!(
                ", {:.1} M rays/s ({rays} rays)",
                rays as f64 / render_s / 1e6
            );
        }
        out.status(time);
    }
    if !frame.report.passes.is_empty() {
        out.detail(a.schedule.stats.is_some(), frame.report.summary());
    }
    if let Some(line) = retirements_line(&frame.report) {
        out.warn(line);
    }
    if let Some(files) = &published.stats {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        out.status(format_args!("statistics: {}", names.join(", ")));
    }
    if let Some((files, dir)) = &published.pictures {
        out.status(format_args!(
            "cost map pictures: {files} files in {}",
            dir.display()
        ));
    }
    let what = if a.pixelbounds.is_some() {
        format!(
            "pixels {} of a {}x{} frame",
            window::pbrt_bounds(window),
            a.width,
            a.height
        )
    } else {
        format!("{}x{}", a.width, a.height)
    };
    if let Some(stopped) = at_time_limit {
        return finish_at_time_limit(&a, &frame, stopped, resume_file.as_deref(), &what, out);
    }
    if let Some(stopped) = &frame.stopped {
        return Err(stopped_with_image(
            &a,
            stopped,
            &what,
            resume_file.as_deref(),
            stopped_by,
            out,
        ));
    }
    out.status(format_args!(
        "output: {} ({what}, {})",
        a.output.display(),
        samples_held(&a, &frame.film, window)
    ));
    finish_checkpoints(&a, &checkpoints.borrow(), out);
    Ok(())
}

/// The samples a complete frame's pixels hold, for its `output:` line: "64 spp", or with
/// adaptive sampling "adaptive: 39.2 samples per pixel on average (8 to 256 of 256), 812 of
/// 1024 blocks stopped below the noise threshold".
pub(super) fn samples_held(a: &RenderArgs, film: &crate::render::Film, window: Tile) -> String {
    match a.noise_threshold {
        Some(_) => format!(
            "adaptive: {}",
            crate::sched::adaptive_sampling::describe_film(film, window, a.spp)
        ),
        None => format!("{} spp", a.spp),
    }
}

/// `--noise-threshold T`: a number above 0.
fn parse_noise_threshold(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t > 0.0 && t.is_finite() => Ok(t),
        _ => Err(format!(
            "{s:?}: the noise threshold is a number above 0 (0.01: about 2.5 levels of 255 on a PNG)"
        )),
    }
}

/// The scheduler's configuration of a render: the --schedule options, the --pixelbounds
/// crop, and adaptive sampling (checked against the passes and the crop).
pub(super) fn schedule_config(a: &RenderArgs) -> anyhow::Result<crate::sched::SchedConfig> {
    use crate::sched::adaptive_sampling::{AdaptiveSampling, BLOCK};
    let mut schedule = a.schedule.config()?;
    schedule.window = a.pixelbounds;
    if let Some(threshold) = a.noise_threshold {
        let adaptive = AdaptiveSampling {
            threshold,
            // An EXR's tone is the default (--exposure and --tonemap are refused for it).
            tone: a.tone.recorded(),
            min_spp: a.min_spp.unwrap_or(0),
        };
        adaptive.validate(&schedule.passes(a.spp), a.spp)?;
        if let Some(crop) = a.pixelbounds {
            // A block cut by the crop would be judged on its part alone, unlike the frame's:
            // the crops would not merge into the frame's image.
            let on_grid = |v: u32, edge: u32| v % BLOCK == 0 || v == edge;
            let (x1, y1) = (crop.x + crop.w, crop.y + crop.h);
            if !(on_grid(crop.x, a.width)
                && on_grid(x1, a.width)
                && on_grid(crop.y, a.height)
                && on_grid(y1, a.height))
            {
                let down = |v: u32| v / BLOCK * BLOCK;
                let up = |v: u32, edge: u32| v.div_ceil(BLOCK).saturating_mul(BLOCK).min(edge);
                anyhow::bail!(
                    "--noise-threshold judges the frame's {BLOCK}x{BLOCK}-pixel blocks, so a crop must start and end on multiples of {BLOCK} (or at the frame's edge) to merge into the frame's image: --pixelbounds {} does not (the blocks around it: --pixelbounds {},{},{},{})",
                    window::pbrt_bounds(crop),
                    down(crop.x),
                    up(x1, a.width),
                    down(crop.y),
                    up(y1, a.height)
                );
            }
        }
        schedule.adaptive_sampling = Some(adaptive);
    }
    Ok(schedule)
}

/// The render key of the frame (`output::render_key`), with adaptive sampling's settings
/// when it is on: they decide which pixels get which samples.
pub(super) fn frame_key(
    a: &RenderArgs,
    scene: &Scene,
    content: u64,
    settings: &RenderSettings,
    schedule: &crate::sched::SchedConfig,
) -> String {
    let key = output::render_key(&a.scene, scene, content, settings);
    match &schedule.adaptive_sampling {
        Some(s) => format!("{key}; {}", s.key_item(schedule.pass_spp.unwrap_or(a.spp))),
        None => key,
    }
}

/// "the frame went on without 1 of 3 workers (gpu0/s1, retired in pass 2)...": said once
/// more after the render, as the errors themselves scrolled by while it ran.
pub(super) fn retirements_line(report: &crate::sched::report::FrameReport) -> Option<String> {
    if report.retirements.is_empty() {
        return None;
    }
    let who: Vec<String> = report
        .retirements
        .iter()
        .map(|r| {
            let when = if r.before_tiles { "before" } else { "in" };
            format!("{}, retired {when} pass {}", r.label, r.pass + 1)
        })
        .collect();
    Some(format!(
        "the frame went on without {} of {} workers ({}); every pixel got all its samples, \
         from the workers left (--on-worker-error stop ends the frame instead)",
        report.retirements.len(),
        report.workers.len(),
        who.join("; ")
    ))
}

/// A frame a stop signal ended, its image written (and the resume file, when `resume` names
/// it): says what the image holds, and gives the error that makes the command exit as a
/// process ended by that signal.
pub(super) fn stopped_with_image(
    a: &RenderArgs,
    stopped: &crate::sched::Stopped,
    what: &str,
    resume: Option<&Path>,
    by: StopSignal,
    out: Verbosity,
) -> anyhow::Error {
    let how_far = stopped.describe(a.spp);
    out.status(format_args!(
        "output: {} ({what}, stopped: {how_far})",
        a.output.display()
    ));
    let mut message = format!("{} holds {how_far}", a.output.display());
    if let Some(file) = resume {
        message += &format!(
            "; to finish it, run the same command with --resume {}",
            file.display()
        );
    }
    Interrupted { by, message }.into()
}

/// The render key an image carries: the render's, with the samples its pixels hold when a
/// stop or the time limit ended it early (`spp 16 of 64`, or `spp stopped: ...` where a pass
/// was cut: [`output::SamplesHeld`]), so that `merge` joins it only with crops of the same
/// samples of the same render, and `preview` of its resume file writes the same key.
pub(super) fn image_key(
    render_key: &str,
    stopped: Option<&crate::sched::Stopped>,
    film: &crate::render::Film,
) -> String {
    match stopped {
        None => render_key.to_string(),
        Some(s) => output::SamplesHeld::of(film, render_key, s.spp_complete).image_key(render_key),
    }
}

/// Writes the resume file of a frame a stop or the time limit ended, or, when that fails (a
/// full disk), the same file in the system's temporary folder with a warning: returns where it
/// is.
pub(super) fn write_resume_or_rescue(
    file: &Path,
    header: &CheckpointHeader,
    film: &crate::render::Film,
    out: Verbosity,
) -> anyhow::Result<PathBuf> {
    let (at, failed) = checkpoint::write_or_rescue(file, header, film, &std::env::temp_dir())?;
    if let Some(e) = failed {
        out.warn(format_args!(
            "{e}; the resume file is saved as {} instead",
            at.display()
        ));
    }
    Ok(at)
}

/// A frame that `--time-limit` ended at a pass boundary: its image and its resume file (at
/// `resume_file`, when a pass was complete) are written; this says so. The --resume file this
/// run started from is used up (the new one holds more), unless it is that same file.
pub(super) fn finish_at_time_limit(
    a: &RenderArgs,
    frame: &crate::sched::Frame,
    stopped: &crate::sched::Stopped,
    resume_file: Option<&Path>,
    what: &str,
    out: Verbosity,
) -> anyhow::Result<()> {
    let how_far = stopped.describe(a.spp);
    out.status(format_args!(
        "output: {} ({what}, at the time limit: {how_far})",
        a.output.display()
    ));
    if let Some(file) = resume_file {
        let pixels = u64::from(frame.film.width) * u64::from(frame.film.height);
        out.status(format_args!(
            "time limit {}: the next pass would have ended past it ({:.1} s of it kept for writing the outputs); to go on, run the same command with --resume {}",
            format_duration(a.time_limit.unwrap_or_default()),
            output_write_reserve(pixels).as_secs_f64(),
            file.display()
        ));
    }
    // Only when the new file is where the render keeps it: one rescued to the temporary
    // folder (which a cluster node may wipe when the job ends) leaves the old one in place.
    let kept_in_place = resume_file.is_some_and(|f| f == checkpoint::path_for(&a.output).as_path());
    if let (Some(path), Some(file), true) = (&a.resume, resume_file, kept_in_place) {
        // By file, not by spelling: `--resume ./x.exr.gasworks-resume` is the new file.
        if !super::paths::same_file(path, file) && std::fs::remove_file(path).is_ok() {
            out.status(format_args!(
                "resume: {} removed (the new one holds more)",
                path.display()
            ));
        }
    }
    Ok(())
}

/// The end of `--time-limit` for the passes: the limit less what writing the outputs of an
/// image of `pixels` pixels is expected to take once the last pass has ended
/// ([`output_write_reserve`]; each `--aov` layer, 12 bytes a pixel, counted as one more
/// image), counted from `started`.
pub(super) fn pass_deadline(a: &RenderArgs, started: Instant, pixels: u64) -> Option<Instant> {
    let images = 1 + a.aov.len() as u64;
    a.time_limit
        .map(|limit| started + limit.saturating_sub(output_write_reserve(pixels * images)))
}

/// What `--time-limit` keeps for writing the outputs after the last pass: the image and the
/// resume file, at most 16 bytes a pixel each (an EXR's float channels, the film's sums),
/// written at an assumed 100 MB/s (a busy network file system), plus a second for encoding,
/// syncing and renaming. A 4K frame keeps 3.7 s, a 512x512 one 1.1 s.
pub(super) fn output_write_reserve(pixels: u64) -> Duration {
    const BYTES_PER_PIXEL: f64 = 32.0;
    const BYTES_PER_SECOND: f64 = 100e6;
    Duration::from_secs_f64(1.0 + pixels as f64 * BYTES_PER_PIXEL / BYTES_PER_SECOND)
}

/// The backend `--backend` names (with the CPU backend for `--devices ... cpu` workers beside a
/// GPU, [`crate::backend::select_beside`]), and, when `estimate_too` and a GPU is tried, the
/// frame's cost map, rasterized on another thread meanwhile: it needs only the scene and the
/// camera, and the GPU's setup mostly waits for the driver and the device. Beside the CPU
/// backend's own BVH build the two would only share the cores: there the frame estimates it.
/// A failed or panicked estimate is `None`: the frame makes it again, and reports it.
/// `cpu_bvh`: the scene's CPU BVH, shared with the environment-share probe
/// ([`choose_environment_share`], which built it before) and the `--aov` layers, which a CPU
/// backend traces rather than building another.
pub(crate) fn set_up_backend(
    a: &RenderArgs,
    scene: &std::sync::Arc<Scene>,
    settings: &RenderSettings,
    schedule: &crate::sched::SchedConfig,
    optix_options: &crate::optix::pathtracer::OptixOptions,
    estimate_too: bool,
    cpu_bvh: crate::cpu::SharedBvh,
) -> anyhow::Result<(
    crate::backend::Backend,
    Option<crate::sched::PreparedEstimate>,
)> {
    let choice: crate::backend::BackendChoice = a.backend.into();
    // GPUs that --devices names are checked before any backend is set up: on a machine
    // without one, `--devices gpu0` printed "backend: cpu (... auto: no NVIDIA GPU found)"
    // first and failed only when the frame asked for its GPU worker.
    let named_gpus: Vec<u32> = match &a.schedule.devices {
        Some(_) => schedule
            .devices
            .iter()
            .filter_map(|d| match d {
                crate::sched::DeviceSpec::Gpu { device, .. } => Some(*device),
                crate::sched::DeviceSpec::Cpu { .. } => None,
            })
            .collect(),
        None => Vec::new(),
    };
    if let (crate::backend::BackendChoice::Cpu, Some(gpu)) = (choice, named_gpus.first()) {
        // Else the GPU worker would set the OptiX backend up anyway and render on the GPU.
        anyhow::bail!(
            "--backend cpu with --devices gpu{gpu}: the CPU backend has no GPU workers; give \
             --devices cpu (or cpu:N), or leave --backend out"
        );
    }
    let probed = (choice != crate::backend::BackendChoice::Cpu).then(crate::optix::probe);
    check_named_gpus(
        &named_gpus,
        probed.as_ref().map(|p| p.as_ref().map(Vec::len)),
    )?;
    let gpu_tried = choice != crate::backend::BackendChoice::Cpu && matches!(probed, Some(Ok(_)));
    let cpu_too = a.schedule.devices.is_some() && crate::sched::workers::has_cpu(&schedule.devices);
    let (backend, prepared) = std::thread::scope(|scope| {
        let estimate = (estimate_too && gpu_tried).then(|| {
            scope.spawn(|| crate::sched::PreparedEstimate::new(scene, settings, schedule))
        });
        let backend =
            crate::backend::select_beside(choice, scene, settings, optix_options, cpu_too, cpu_bvh);
        (
            backend,
            estimate.and_then(|h| h.join().ok()).and_then(Result::ok),
        )
    });
    Ok((backend?, prepared))
}

/// The error for a `--devices gpuD` this machine cannot serve, given the probe's GPU count (when
/// it ran): no GPU at all (the probe's reason), or fewer GPUs than `D + 1`.
fn check_named_gpus(
    named: &[u32],
    gpu_count: Option<Result<usize, &crate::optix::CudaError>>,
) -> anyhow::Result<()> {
    let (Some(&first), Some(gpu_count)) = (named.first(), gpu_count) else {
        return Ok(());
    };
    match gpu_count {
        Err(e) => Err(anyhow::anyhow!("{e}").context(format!(
            "--devices gpu{first}: cannot set up the OptiX backend"
        ))),
        Ok(count) => match named.iter().find(|&&d| d as usize >= count) {
            Some(d) => anyhow::bail!(
                "--devices gpu{d}: this machine has {}",
                crate::optix::cuda::gpus_text(count, |i| format!("gpu{i}"))
            ),
            None => Ok(()),
        },
    }
}

/// "2h", "10m", "90s", "1.5s": a duration as it was given.
fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

/// The pass size of a render with --time-limit or --noise-threshold and no --pass-spp: about
/// 16 passes, so that the time a stop leaves unused (at most one pass) is about a sixteenth of
/// the render's, and a block of adaptive sampling can stop at any sixteenth; in passes of a
/// power of two samples, each of which the scrambled Sobol' numbers stratify.
pub(super) fn chosen_pass_spp(spp: u32) -> u32 {
    let target = (spp / 16).max(1);
    1 << (31 - target.leading_zeros())
}

/// --time-limit stops between passes, and --noise-threshold decides between them, and
/// without --pass-spp a render is one pass: then the passes are [`chosen_pass_spp`]'s, a pure
/// function of --spp, so that the same command with --resume finds the same passes in the
/// resume file's key.
pub(super) fn choose_passes(mut a: RenderArgs) -> RenderArgs {
    let wanted = a.time_limit.is_some() || a.noise_threshold.is_some();
    if wanted && a.schedule.pass_spp.is_none() {
        a.schedule.pass_spp = Some(chosen_pass_spp(a.spp));
        a.pass_spp_chosen = true;
    }
    a
}

/// Before the render: says that an earlier render of this output left a resume file (this
/// one, without --resume, starts afresh and replaces it at its first checkpoint), that
/// --time-limit has no pass boundary to stop at, or which passes it chose.
pub(super) fn warn_about_checkpoints(a: &RenderArgs, out: Verbosity) {
    match a.schedule.pass_spp {
        Some(_) if a.pass_spp_chosen && a.spp == 1 => out.warn(format_args!(
            "--spp 1 is one pass, so --time-limit cannot stop between passes"
        )),
        Some(k) if a.pass_spp_chosen => {
            let why = match (a.time_limit.is_some(), a.noise_threshold.is_some()) {
                (true, true) => "for --time-limit to stop between and --noise-threshold to decide between",
                (false, true) => "for --noise-threshold to decide between",
                _ => "for --time-limit to stop between",
            };
            let resume_needs = if a.noise_threshold.is_some() {
                String::new()
            } else {
                format!("; a --resume of this render without --time-limit needs --pass-spp {k}")
            };
            out.status(format_args!(
                "passes: {} of {k} samples per pixel, {why} (--pass-spp sets another size{resume_needs})",
                a.spp.div_ceil(k)
            ))
        }
        Some(k) if a.time_limit.is_some() && k >= a.spp => out.warn(format_args!(
            "--pass-spp {k} is not fewer than --spp {}: the render is one pass, so --time-limit cannot stop between passes",
            a.spp
        )),
        _ => {}
    }
    let file = checkpoint::path_for(&a.output);
    if a.resume.is_none() && file.exists() {
        out.warn(format_args!(
            "{} exists: an earlier render to {} was stopped or killed; this one starts from the first sample and replaces it at its first checkpoint (to finish that one instead, add --resume {})",
            file.display(),
            a.output.display(),
            file.display()
        ));
    }
}

/// At a pass boundary: a checkpoint when one is due or SIGUSR1 asked. A failed write (a full
/// disk) warns and the render goes on: the next tile or boundary tries again.
pub(super) fn checkpoint_between_passes(
    checkpoints: &mut Checkpointer,
    film: &crate::render::Film,
    spp_done: u32,
    out: Verbosity,
) {
    let asked = signals::take_checkpoint_request();
    if let Some(Err(e)) = checkpoints.at_boundary(film, spp_done, asked) {
        out.warn(format_args!(
            "checkpoint not written, the render goes on: {e}"
        ));
    }
}

/// Inside a pass, after a tile: a checkpoint (the complete passes, `spp_done` samples per
/// pixel, and the pass's finished tiles) when one is due or SIGUSR1 asked, so that a render
/// in one pass, or in long ones, is not lost to a kill. The film is copied only then.
pub(super) fn checkpoint_within_pass(
    checkpoints: &mut Checkpointer,
    spp_done: u32,
    film: &dyn Fn() -> crate::render::Film,
    out: Verbosity,
) {
    let asked = signals::take_checkpoint_request();
    if !(asked || checkpoints.due()) {
        return;
    }
    if let Some(Err(e)) = checkpoints.at_boundary(&film(), spp_done, true) {
        out.warn(format_args!(
            "checkpoint not written, the render goes on: {e}"
        ));
    }
}

/// A render that fails after a checkpoint (a GPU lost, a rank dead) can still be finished:
/// the error says from where.
pub(super) fn after_checkpoints(e: anyhow::Error, checkpoints: &Checkpointer) -> anyhow::Error {
    if checkpoints.written == 0 {
        return e;
    }
    let (Some(latest), file) = (checkpoints.latest(), checkpoints.path().display()) else {
        return e;
    };
    e.context(format!(
        "the render failed; its checkpoint {file} holds {latest}: to finish it, run the same command with --resume {file}",
    ))
}

/// After a complete render: what the checkpoints were, and the resume files it used up (the
/// one given to --resume, and the one this run wrote: the same file when the command was
/// repeated as it was) removed.
pub(super) fn finish_checkpoints(a: &RenderArgs, checkpoints: &Checkpointer, out: Verbosity) {
    let ours = checkpoints.path();
    if checkpoints.written > 0 {
        let removed = if std::fs::remove_file(ours).is_ok() {
            ", removed: the render is complete"
        } else {
            ""
        };
        out.status(format_args!(
            "checkpoints: {} written to {} (the latest holding {}, the slowest in {:.2} s){removed}",
            checkpoints.written,
            ours.display(),
            checkpoints.latest().unwrap_or_default(),
            checkpoints.slowest.as_secs_f64()
        ));
    }
    if signals::checkpoint_request_pending() {
        out.warn(
            "SIGUSR1 asked for a checkpoint, but the render ended before another tile was done",
        );
    }
    if let Some(path) = &a.resume {
        if std::fs::remove_file(path).is_ok() {
            out.status(format_args!(
                "resume: {} removed (the render is complete)",
                path.display()
            ));
        }
    }
}

/// Reads `--resume FILE`, checks it belongs to this render: the same settings (the render
/// key: scene, size, spp, depth, seed, camera, environment, lights, adaptive sampling),
/// window and pass size (`schedule`'s), and says how far it got (of `spp`).
pub(super) fn read_resume(
    path: &std::path::Path,
    render_key: &str,
    window: Tile,
    schedule: &crate::sched::SchedConfig,
    spp: u32,
    out: Verbosity,
) -> anyhow::Result<crate::sched::Resume> {
    let pass_spp = schedule.pass_spp.unwrap_or(spp);
    let adaptive = schedule.adaptive_sampling.is_some();
    let (header, film) = checkpoint::read(path)?;
    let here = path.display();
    let differ = output::render_key_differences(&header.render, render_key);
    if !differ.is_empty() {
        // Name the settings that differ, not two long lines to compare by eye.
        let edited = differ.iter().any(|(t, _)| t.starts_with("content "));
        let differ: Vec<String> = differ
            .iter()
            .map(|(t, o)| format!("'{t}' (this command: '{o}')"))
            .collect();
        anyhow::bail!(
            "{here}: this resume file is of another render: {}; {}",
            differ.join(", "),
            if edited {
                "the scene's geometry, materials or textures changed since that render was stopped, and resuming would mix the samples of two scenes into one image: render it afresh, or restore the scene"
            } else {
                "resume with the command line that was stopped"
            }
        );
    }
    if header.window_tile() != window {
        anyhow::bail!(
            "{here}: this resume file covers pixels {} and this command {}: give the same --pixelbounds",
            window::pbrt_bounds(header.window_tile()),
            window::pbrt_bounds(window)
        );
    }
    if header.pass_spp != pass_spp {
        anyhow::bail!(
            "{here}: the stopped render ran passes of {} samples and this command {}: give the same --pass-spp (the sums must be added in the same order)",
            header.pass_spp,
            pass_spp
        );
    }
    let resume = crate::sched::Resume {
        film,
        spp_done: header.spp_done,
    };
    // Every pixel must have the complete passes' samples, or those and the next pass's (a
    // stop inside a pass keeps its finished tiles): anything else is not this render's film.
    let passes = crate::sched::pass_ranges(pass_spp, spp);
    let start = crate::sched::resume_start(
        &passes,
        spp,
        &resume,
        schedule.adaptive_sampling.as_ref().map(|a| (a, window)),
    )
    .map_err(|e| anyhow::anyhow!("{here}: damaged resume file: {e:#}"))?;
    let done = passes.get(start.first_pass).map_or(spp, |p| p.start);
    let stopped_blocks = if adaptive {
        let behind = resume
            .film
            .pixels
            .iter()
            .filter(|p| p[3] < done as f32)
            .count();
        match behind {
            0 => String::new(),
            n => format!(
                ", fewer in the {n} pixels whose blocks had stopped below the noise threshold"
            ),
        }
    } else {
        String::new()
    };
    let ahead = match start.ahead {
        Some(a) => format!(
            ", and samples {done}..{} in {} of {} pixels (the stopped pass's finished tiles)",
            a.end,
            a.pixels,
            resume.film.pixels.len()
        ),
        None => String::new(),
    };
    out.status(format_args!(
        "resume: {here}: {done} of {spp} samples per pixel done{stopped_blocks}{ahead}"
    ));
    let ours = output::software();
    if header.software != ours {
        let theirs = if header.software.is_empty() {
            "an earlier gasworks build"
        } else {
            header.software.as_str()
        };
        out.warn(format_args!(
            "{here} was rendered by {theirs}, and this is {ours}: its samples may differ from this build's (in their last bits, or wholly where the random numbers changed, as they did on 2026-11-27), so the finished image converges to the same picture but is not bit for bit what one uninterrupted run gives"
        ));
    }
    Ok(resume)
}

/// The render was stopped by a signal (Ctrl-C, SIGTERM, SIGHUP); its image was written with
/// what was rendered. The command exits as a process ended by that signal conventionally
/// does (130, 143, 129).
#[derive(Debug, thiserror::Error)]
#[error("stopped by {by}: {message}")]
pub struct Interrupted {
    pub by: StopSignal,
    pub message: String,
}

/// The checks of the numeric arguments: --width, --height (at most 32768 each), --spp and
/// --max-depth, before anything is loaded.
pub(super) fn check_args(a: &RenderArgs) -> anyhow::Result<()> {
    crate::render::check_image_size(a.width, a.height, a.spp)
        .map_err(|e| anyhow::anyhow!("--width/--height/--spp: {e}"))?;
    if a.max_depth == 0 {
        anyhow::bail!("--max-depth must be at least 1");
    }
    a.tone.check(&a.output)?;
    // (--checkpoint-every needs no passes: checkpoints are written inside a pass too;
    // --time-limit and --noise-threshold choose their passes when none are given:
    // choose_passes.)
    Ok(())
}

/// Refuses a frame whose film and outputs cannot fit in memory, before anything is loaded
/// (a failed allocation would abort the process and lose the render).
pub(super) fn check_frame_memory(width: u32, height: u32) -> anyhow::Result<()> {
    use crate::render::memory;
    memory::check_fits(
        &format!("a {width}x{height} image"),
        memory::frame_bytes(width, height),
        memory::available_bytes(),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}: render it in crops (--pixelbounds, one process each) and join them with gasworks merge"
        )
    })
}

/// A camera as the flags that give it, for messages.
fn camera_flags(camera: &Camera) -> String {
    let v = |v: glam::Vec3| format!("{},{},{}", v.x, v.y, v.z);
    format!(
        "--eye {} --look-at {} --up {} --fov {}",
        v(camera.eye),
        v(camera.look_at),
        v(camera.up),
        camera.fov_y_deg
    )
}

/// Checks the `--stats` files and the `--costmap` folder before the render, as the image is
/// checked: writable, and none of them the scene, the image or a resume file.
pub(super) fn check_report_paths(a: &RenderArgs) -> anyhow::Result<()> {
    let resume_file = checkpoint::path_for(&a.output);
    let mut taken: Vec<(&str, &Path)> = vec![
        ("the scene", &a.scene),
        ("the output image", &a.output),
        ("the output's resume file", &resume_file),
    ];
    if let Some(r) = &a.resume {
        taken.push(("the --resume file", r));
    }
    if let Some(stats) = &a.schedule.stats {
        let (tiles, map) = crate::sched::report::sibling_paths(stats);
        // The headers of the three files --stats writes (sched::report): an earlier run's
        // files are replaced, nothing else.
        let ours = ["pass,spp_from,", "pass,task,", "x,y,cost"];
        for p in [stats.as_path(), &tiles, &map] {
            super::paths::check_side_file("--stats", p, &taken, &ours)?;
        }
    }
    if let Some(dir) = &a.schedule.costmap {
        super::paths::check_side_folder("--costmap", dir)?;
    }
    Ok(())
}

/// Refuses an output or `--stats` file that is one of the scene's textures (known once it is
/// loaded): the render would overwrite what it read.
pub(super) fn check_outputs_against_textures(a: &RenderArgs, scene: &Scene) -> anyhow::Result<()> {
    let mut written = vec![("-o", a.output.clone())];
    if let Some(stats) = &a.schedule.stats {
        let (tiles, map) = crate::sched::report::sibling_paths(stats);
        written.extend([
            ("--stats", stats.clone()),
            ("--stats", tiles),
            ("--stats", map),
        ]);
    }
    for (flag, path) in &written {
        if let Some(t) = scene
            .textures
            .iter()
            .find(|t| super::paths::same_file(path, Path::new(&t.path)))
        {
            anyhow::bail!(
                "{flag} {} is a texture of the scene ({}): writing there would overwrite it",
                path.display(),
                t.path
            );
        }
        if let Some(map) = &a.env_map {
            if super::paths::same_file(path, map) {
                anyhow::bail!(
                    "{flag} {} is the environment map (--env-map): writing there would \
                     overwrite it",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// `--env-share`: measured, or given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EnvShareArg {
    Auto,
    Fixed(f32),
}

/// `--env-share auto|P`: `auto` or a probability, 0 to 1.
fn parse_env_share(s: &str) -> Result<EnvShareArg, String> {
    if s == "auto" {
        return Ok(EnvShareArg::Auto);
    }
    match s.parse::<f32>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(EnvShareArg::Fixed(p)),
        _ => Err(format!(
            "{s:?}: expected auto or a probability from 0 to 1 (the share of light samples \
             for the environment map)"
        )),
    }
}

/// Sets [`Scene::environment_share`] for the render (`--env-share`): measured by
/// [`crate::cpu::environment_share::probe`] through the render's camera for `auto`, where the
/// scene has both a map and area lights (it builds a CPU BVH for that, on every backend), or
/// the number given. Says which with -v. Returns the BVH the probe built, for the CPU
/// backend to trace rather than build another ([`set_up_backend`]).
pub(super) fn choose_environment_share(
    a: &RenderArgs,
    scene: &mut Scene,
    settings: &RenderSettings,
    out: Verbosity,
) -> Option<std::sync::Arc<crate::cpu::SceneBvh>> {
    use crate::scene::light_power::fixed_environment_share;
    scene.environment_map.as_ref()?;
    if let Some(share) = fixed_environment_share(scene) {
        if let EnvShareArg::Fixed(p) = a.env_share {
            if p != share {
                out.warn(format_args!(
                    "--env-share {p} has no effect: {}",
                    if share == 1.0 {
                        "the scene has no area lights, so every light sample goes to the map"
                    } else {
                        "the environment map is black"
                    }
                ));
            }
        }
        return None;
    }
    match a.env_share {
        EnvShareArg::Fixed(p) => {
            scene.environment_share = Some(p);
            out.detail(
                false,
                format_args!("environment share: {p} of the light samples (--env-share)"),
            );
            None
        }
        EnvShareArg::Auto => {
            let bvh = crate::cpu::SceneBvh::build(scene);
            let t0 = Instant::now();
            let probe = crate::cpu::environment_share::probe(
                scene,
                &bvh,
                &settings.camera,
                settings.max_depth,
            );
            scene.environment_share = Some(probe.share);
            let total = probe.environment + probe.area_lights;
            let part = |x: f64| if total > 0.0 { 100.0 * x / total } else { 0.0 };
            out.detail(
                false,
                format_args!(
                    "environment share: {} of the light samples (auto: over {} probe paths, \
                     {} vertices, the map brought {:.1}% of the sampled light, the area \
                     lights {:.1}%; {:.2} s, after {:.2} s building the CPU BVH it traces, \
                     the CPU backend's too when there is one)",
                    probe.share,
                    probe.paths,
                    probe.vertices,
                    part(probe.environment),
                    part(probe.area_lights),
                    t0.elapsed().as_secs_f64(),
                    bvh.stats().seconds,
                ),
            );
            Some(std::sync::Arc::new(bvh))
        }
    }
}

/// `--env R,G,B`: three numbers, none negative (a negative radiance is no light; it made
/// negative pixels) nor past [`crate::scene::MAX_RADIANCE`].
fn parse_radiance(s: &str) -> Result<glam::Vec3, String> {
    let v = parse_vec3(s)?;
    if v.min_element() < 0.0 {
        return Err(format!("{s:?}: a radiance cannot be negative"));
    }
    if v.max_element() > crate::scene::MAX_RADIANCE {
        return Err(format!(
            "{s:?}: at most {:e} per channel (beyond, the film's single-precision sums overflow)",
            crate::scene::MAX_RADIANCE
        ));
    }
    Ok(v)
}

/// Loads the scene (with `--env` or `--env-map`, and `--two-sided-lights` applied) and says
/// how long it took.
pub(super) fn load_scene(a: &RenderArgs) -> anyhow::Result<(Scene, f64)> {
    let t0 = Instant::now();
    let mut scene = obj::load_obj(&a.scene, &obj::LoadOptions { quiet: a.quiet })?;
    if let Some(env) = a.env {
        scene.set_environment(Environment { radiance: env });
    }
    if let Some(path) = &a.env_map {
        let map = EnvironmentMap::open(path, a.env_rotate)?.scaled(a.env_scale)?;
        scene.set_environment_map(std::sync::Arc::new(map));
    }
    scene.two_sided_lights = a.two_sided_lights;
    Ok((scene, t0.elapsed().as_secs_f64()))
}

/// The loader's warnings, lights that face away from everything, dropped triangles.
pub(super) fn print_load_warnings(a: &RenderArgs, scene: &Scene, out: Verbosity) {
    for w in &scene.report.warnings {
        out.warn(w);
    }
    if !scene.two_sided_lights {
        for w in crate::scene::lights::facing_warnings(scene) {
            out.warn(format_args!("{}: {w}", a.scene.display()));
        }
    }
    if scene.report.degenerate_dropped > 0 {
        out.warn(format_args!(
            "{}: dropped {} degenerate triangles{}",
            a.scene.display(),
            scene.report.degenerate_dropped,
            crate::scene::obj::out_of_scale_note(scene.report.out_of_scale_dropped)
        ));
    }
}

/// The settings of the render: the image, the samples and the camera (printed with -v, as the
/// flags that reproduce it). The camera and its lens fall back to the scene's own (its `# gasworks
/// camera:` comment: [`super::args::CameraArgs::scene_hint_with_lens`]).
pub(super) fn render_settings(
    a: &RenderArgs,
    scene: &Scene,
    out: Verbosity,
) -> anyhow::Result<RenderSettings> {
    let hint = a.camera.scene_hint_with_lens(&a.scene, |w| out.warn(w))?;
    let camera = a
        .camera
        .camera(&scene.bounds(), hint.map(|h| h.camera), a.width, a.height);
    // The look-at point's distance, in f64: the f32 square of a far one overflows.
    let look_at_distance = (camera.look_at.as_dvec3() - camera.eye.as_dvec3()).length() as f32;
    out.detail(
        false,
        format_args!(
            "camera: {} ({})",
            camera_flags(&camera),
            a.camera.origin(hint.is_some())
        ),
    );
    let mut camera = camera.frame(a.width, a.height).with_context(|| {
        format!(
            "{}: bad camera (from {}; {})",
            a.scene.display(),
            a.camera.origin(hint.is_some()),
            camera_flags(&camera)
        )
    })?;
    camera.filter = a.filter.into();
    // The lens: the command line's (`--lens-radius 0` is a pinhole), else the scene's camera
    // comment's, unless the flags give the whole camera (the comment is then not used).
    let hint_lens = hint
        .and_then(|h| h.lens)
        .filter(|_| !a.camera.overrides_all());
    let lens = match (a.lens_radius, hint_lens) {
        (Some(radius), _) => Some((radius, a.focus_distance, a.focus_on, false)),
        (None, Some(l)) => Some((l.radius, l.focus_distance, None, true)),
        (None, None) => None,
    };
    if let Some((radius, focus_distance, focus_on, from_hint)) = lens {
        const HINT: &str = "the scene's camera hint";
        let (focus, from) = match (focus_distance, focus_on) {
            (Some(d), _) => (d, from_hint.then(|| HINT.to_string())),
            // The point's distance along the view direction, in f64 as above.
            (None, Some(p)) => (
                (p.as_dvec3() - camera.eye.as_dvec3()).dot(camera.w.as_dvec3()) as f32,
                Some(format!("from --focus-on {},{},{}", p.x, p.y, p.z)),
            ),
            (None, None) => (
                look_at_distance,
                Some(if from_hint {
                    format!("{HINT}, at the look-at point's distance")
                } else {
                    "the look-at point's distance".to_string()
                }),
            ),
        };
        camera.set_thin_lens(radius, focus).with_context(|| {
            if from_hint {
                format!(
                    "{}: bad lens (lens_radius {radius} focus_distance {focus}, from {})",
                    a.scene.display(),
                    from.as_deref().unwrap_or(HINT)
                )
            } else {
                format!(
                    "{}: bad lens (--lens-radius {radius} --focus-distance {focus}{})",
                    a.scene.display(),
                    from.as_ref().map_or(String::new(), |f| format!(", {f}"))
                )
            }
        })?;
        if radius > 0.0 {
            out.detail(
                false,
                format_args!(
                    "lens: radius {radius}, focused at {focus} along the view direction{}",
                    from.as_ref().map_or(String::new(), |f| format!(" ({f})"))
                ),
            );
        }
    }
    Ok(RenderSettings {
        width: a.width,
        height: a.height,
        spp: a.spp,
        max_depth: a.max_depth,
        seed: a.seed,
        camera,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_named_by_devices_must_exist_before_anything_is_set_up() {
        // Nothing named, or no probe (the CPU backend and no GPU named): nothing to check.
        assert!(check_named_gpus(&[], Some(Ok(0))).is_ok());
        assert!(check_named_gpus(&[0], None).is_ok());
        assert!(check_named_gpus(&[0, 1], Some(Ok(2))).is_ok());
        let no_gpu = crate::optix::CudaError::NoDevice {
            reason: "libcuda.so.1 not loadable".into(),
        };
        let e = check_named_gpus(&[0], Some(Err(&no_gpu))).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "--devices gpu0: cannot set up the OptiX backend: no NVIDIA GPU found (libcuda.so.1 not loadable)"
        );
        let e = check_named_gpus(&[0, 9, 12], Some(Ok(1))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--devices gpu9: this machine has 1 NVIDIA GPU (gpu0)"
        );
        let e = check_named_gpus(&[3], Some(Ok(2))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--devices gpu3: this machine has 2 NVIDIA GPUs (gpu0 to gpu1)"
        );
    }

    #[test]
    fn an_image_cut_short_carries_the_samples_its_pixels_hold() {
        use crate::sched::{PartialPass, Stopped};
        let key = "scene a.obj; spp 64; max-depth 8";
        let mut film = crate::render::Film::new(4, 2);
        for p in &mut film.pixels {
            p[3] = 16.0;
        }
        // A complete frame keeps the render's key (its film is not looked at).
        assert_eq!(image_key(key, None, &film), key);
        let whole = Stopped {
            spp_complete: 16,
            partial: None,
            at_time_limit: true,
            stopped_blocks: None,
        };
        assert_eq!(
            image_key(key, Some(&whole), &film),
            "scene a.obj; spp 16 of 64; max-depth 8"
        );
        // Three pixels have the cut pass: whatever tiles they were in, the key counts pixels,
        // as `preview` does from the resume file.
        for p in [1, 2, 6] {
            film.pixels[p][3] = 32.0;
        }
        let cut = Stopped {
            spp_complete: 16,
            partial: Some(PartialPass {
                samples: 16..32,
                tiles_done: 1,
                tiles: 8,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
        };
        assert_eq!(
            image_key(key, Some(&cut), &film),
            "scene a.obj; spp stopped: 16 everywhere, 16..32 in 3 of 8 pixels; max-depth 8"
        );
    }

    #[test]
    fn an_environment_radiance_is_three_numbers_none_negative() {
        assert_eq!(
            parse_radiance("0.5,1,0"),
            Ok(glam::Vec3::new(0.5, 1.0, 0.0))
        );
        assert!(parse_radiance("-1,0,0")
            .unwrap_err()
            .contains("cannot be negative"));
        assert!(parse_radiance("nan,0,0").is_err());
        assert!(parse_radiance("1e38,1,1")
            .unwrap_err()
            .contains("at most 1e20"));
    }

    #[test]
    fn a_time_limit_without_passes_renders_about_sixteen_of_a_power_of_two() {
        for (spp, k) in [
            (1, 1),
            (4, 1),
            (31, 1),
            (32, 2),
            (64, 4),
            (100, 4),
            (1000, 32),
            (4096, 256),
            (u32::MAX, 1 << 27),
        ] {
            assert_eq!(chosen_pass_spp(spp), k, "--spp {spp}");
            assert!(k.is_power_of_two() && (spp < 32 || spp.div_ceil(k) >= 16));
        }
    }

    #[test]
    fn the_time_limit_keeps_time_to_write_the_outputs() {
        let secs = |w: u64, h: u64| output_write_reserve(w * h).as_secs_f64();
        assert!(
            (secs(3840, 2160) - 3.654).abs() < 1e-3,
            "{}",
            secs(3840, 2160)
        );
        assert!((secs(512, 512) - 1.084).abs() < 1e-3, "{}", secs(512, 512));
        assert_eq!(output_write_reserve(0), Duration::from_secs(1));
    }
}
