//! A render, end to end, as one library call: [`render`] takes [`RenderOptions`] (plain data,
//! no command-line types) and renders the frame: the scene loaded, the backend set up, the
//! passes run with their checkpoints, resume, time limit, stop and adaptive sampling, and the
//! image, its guide layers and statistics written. `gasworks render` parses its flags into
//! the options and makes this one call.
//!
//! The same call renders one frame over several processes: every rank of an MPI job calls it
//! with the job's transport, and the ranks share the frame through the scheduler
//! ([`crate::sched::rank`]); one process alone gives [`crate::sched::Alone`]. Rank 0 holds the
//! film: it reads the resume file, writes the checkpoints and the outputs, and speaks for the
//! job; whatever fails while a rank gets ready becomes its answer in the scheduler's
//! handshake, so that every rank reports the same error.
//!
//! - [`options`]: what a render is asked to do, and the checks made before any work;
//! - [`setup`]: the scene, the camera, the environment map's share, the backend;
//! - [`resume`]: resume files and checkpoints;
//! - [`aovs`]: the guide layers, traced before the frame or beside a GPU's;
//! - [`outputs`]: rank 0's outputs and what the render says of them;
//! - [`controls`]: the stop flag and checkpoint requests that reach a render from outside;
//! - [`fingerprint`]: the hash of scene and settings that ranks compare before a frame;
//! - [`sequence`]: a camera path's frames, the scene loaded once.

pub mod aovs;
pub mod controls;
pub mod fingerprint;
pub mod options;
pub mod outputs;
pub mod resume;
pub mod sequence;
pub mod setup;

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

pub use controls::{Controls, Interrupted, NoControls, StopSignal};
pub use options::{aov_path, EnvShare, EnvironmentOptions, LensOptions, RenderOptions};

use crate::backend::WorkerFactory;
use crate::console::Verbosity;
use crate::cpu::SharedBvh;
use crate::render::checkpoint::{CheckpointHeader, Checkpointer};
use crate::render::{output, RenderSettings, Tile};
use crate::scene::Scene;
use crate::sched::costmap::CostMap;
use crate::sched::report::FrameReport;
use crate::sched::{run_rank, Discard, FrameJob, FrameSink, RankSetup, SchedConfig, Timing};
use crate::sched::{DeviceSpec, Transport};
use aovs::{AovsDuringFrame, PendingAovs};
use outputs::{Outputs, Timings};

/// Renders the frame `options` describe as this process's part of it: alone, with
/// [`crate::sched::Alone`], or as one rank of an MPI job over its transport. `controls` stop
/// the frame early or ask for a checkpoint. Returns when the outputs are written (on rank 0)
/// and every rank knows; an error where the frame could not be rendered or written, and
/// [`Interrupted`] where a stop ended it (its image written).
pub fn render<T: Transport + ?Sized>(
    options: &RenderOptions,
    transport: &mut T,
    controls: &dyn Controls,
) -> anyhow::Result<()> {
    if options.camera_path.is_some() {
        return sequence::render_sequence(options, transport, controls);
    }
    // A time limit counts from here: a batch job's clock includes loading and building.
    let started = Instant::now();
    let mut opts = options.clone();
    let passes_chosen = opts.choose_passes();
    crate::sched::progress::set_mode(opts.progress);
    let place = Place::of(transport);
    // Rank 0 speaks for the job; the others print only warnings of their own and errors.
    let out = match place.rank {
        0 => opts.verbosity,
        _ => Verbosity::Quiet,
    };
    let ready = match get_ready(&opts, &place, out) {
        Ok(ready) => ready,
        // One process says why at once; a rank says it in the handshake, so that every rank
        // learns why the job cannot start.
        Err(e) if place.ranks == 1 => return Err(e),
        Err(e) => return Err(refuse_job(&opts, transport, &place, &e)),
    };
    if place.rank == 0 {
        resume::warn_about_checkpoints(&opts, passes_chosen, out);
    }
    run_frame(&opts, transport, controls, (ready, place, out, started)).map(|_| ())
}

/// What one rank of a frame whose geometry is spread over ranks (`crate::cluster::geometry`)
/// holds before the frame starts.
pub struct ScenePart {
    /// This rank's part of the scene: the groups its domain holds, the others empty.
    pub scene: Scene,
    /// The whole scene, as the file's first reading measured it.
    pub survey: crate::scene::obj::Survey,
    pub domains: crate::scene::domains::Domains,
    pub settings: RenderSettings,
    /// The key its image records: the whole scene's, as a one-process render's.
    pub render_key: String,
    /// The whole scene's content hash and triangle count, which every frame's key records.
    pub identity: (u64, usize),
}

/// Gets one rank of a frame whose geometry is spread over ranks ready, as [`render`] gets a
/// rank ready: the options checked, the threads set, the file surveyed and split (`split`,
/// which may refuse the split), then read again keeping only this rank's domain (rank 0
/// saying the whole scene's warnings), with the render's settings and the key its image
/// records.
pub fn prepare_scene_part<T: Transport + ?Sized>(
    options: &RenderOptions,
    transport: &T,
    split: impl FnOnce(&crate::scene::obj::Survey) -> anyhow::Result<crate::scene::domains::Domains>,
) -> anyhow::Result<ScenePart> {
    use crate::scene::obj;
    let place = Place::of(transport);
    let out = match place.rank {
        0 => options.verbosity,
        _ => Verbosity::Quiet,
    };
    let (_, schedule) = check_before_loading(options, &place)?;
    set_threads(options, &place)?;
    let quiet = options.verbosity.is_quiet();
    let survey = obj::survey_obj(&options.scene, &obj::LoadOptions { quiet })?;
    let domains = split(&survey)?;
    let keep: Vec<bool> = (0..survey.groups.len())
        .map(|g| domains.holds(place.rank, g))
        .collect();
    let (mut scene, _) = setup::load_scene_with(options, |path, o| {
        obj::load_obj_part(path, o, &survey, &keep)
    })?;
    if place.rank == 0 {
        setup::check_outputs_against_textures(options, &scene)?;
        setup::print_load_warnings(options, &scene, false, out);
        let (file, size) = (options.scene.display(), survey.size_text());
        out.status(format_args!("scene: {file}: {size}"));
    }
    let settings = setup::render_settings(options, &survey.bounds, out)?;
    setup::refuse_measured_share(options, &scene)?;
    setup::choose_environment_share(options, &mut scene, &settings, out);
    let hashes: Vec<u64> = survey.groups.iter().map(|g| g.hash).collect();
    let content = crate::scene::content_hash::content_hash_of_groups(&hashes, &scene);
    let identity = (content, survey.triangle_count() as usize);
    let render_key = outputs::frame_key(options, &scene, identity, &settings, &schedule);
    Ok(ScenePart {
        scene,
        survey,
        domains,
        settings,
        render_key,
        identity,
    })
}

/// The settings and image key of another frame (`options`, its camera) of a scene whose
/// geometry is spread over ranks: `part` this rank's part, `bounds` and `identity` the whole
/// scene's.
pub fn part_frame(
    options: &RenderOptions,
    part: &Scene,
    bounds: &crate::scene::Bounds,
    identity: (u64, usize),
) -> anyhow::Result<(RenderSettings, String)> {
    let schedule = options.schedule_config()?;
    let settings = setup::render_settings(options, bounds, Verbosity::Quiet)?;
    let key = outputs::frame_key(options, part, identity, &settings, &schedule);
    Ok((settings, key))
}

/// Writes the whole frame's image from its film, as [`render`] writes a complete frame's.
pub fn write_image(
    options: &RenderOptions,
    film: &crate::render::Film,
    render_key: &str,
) -> anyhow::Result<()> {
    write_frame_image(options, film, outputs::image_key(render_key, None, film))
}

/// Writes the image of a frame cut short from the samples its film holds, each pixel's
/// first ones: its key says how many ([`output::SamplesHeld`]), so that it merges with
/// nothing and reads as the partial image it is.
pub fn write_partial_image(
    options: &RenderOptions,
    film: &crate::render::Film,
    render_key: &str,
) -> anyhow::Result<()> {
    let key = output::SamplesHeld::of(film, render_key, 0).image_key(render_key);
    write_frame_image(options, film, key)
}

fn write_frame_image(
    options: &RenderOptions,
    film: &crate::render::Film,
    key: String,
) -> anyhow::Result<()> {
    let meta = output::ImageMeta {
        full_width: options.width,
        full_height: options.height,
        window: Tile::whole(options.width, options.height),
        render: key,
        exposure: options.tone.exposure,
        tonemap: options.tone.tonemap,
    };
    output::write_image_or_rescue(film, &options.output, &meta, &std::env::temp_dir())?;
    Ok(())
}

/// Where this process runs: its rank among how many, its host, and how many ranks share its
/// machine (and so its cores).
#[derive(Clone)]
struct Place {
    rank: usize,
    ranks: usize,
    host: String,
    local_ranks: usize,
}

impl Place {
    fn of<T: Transport + ?Sized>(t: &T) -> Place {
        Place {
            rank: t.rank(),
            ranks: t.size(),
            host: t.host(),
            local_ranks: t.local_ranks().max(1),
        }
    }
}

/// What a rank has once it is ready for the frame.
struct Ready {
    settings: RenderSettings,
    schedule: SchedConfig,
    window: Tile,
    render_key: String,
    factory: WorkerFactory,
    setup: RankSetup,
    timings: Timings,
    /// Rank 0: the guide layers, traced or being traced.
    aovs: Option<AovsDuringFrame>,
    /// Rank 0 of a sequence's frame planned with the previous frame's costs: the estimate
    /// alone, for [`crate::sched::temporal::FrameFigures`].
    estimate_alone: Option<CostMap>,
}

/// The frame: its job run over the transport, rank 0's outputs written, and what the render
/// says of it.
fn run_frame<T: Transport + ?Sized>(
    opts: &RenderOptions,
    transport: &mut T,
    controls: &dyn Controls,
    (ready, place, out, started): (Ready, Place, Verbosity, Instant),
) -> anyhow::Result<Option<FrameReport>> {
    let Ready {
        settings,
        schedule,
        window,
        render_key,
        factory,
        setup,
        mut timings,
        aovs,
        estimate_alone: _,
    } = ready;
    let mut outputs = (place.rank == 0).then(|| {
        let header = checkpoint_header(opts, &render_key, window, &schedule);
        Outputs {
            opts,
            controls,
            out,
            render_key,
            window,
            checkpoints: Checkpointer::new(
                opts.resume_file(),
                header.clone(),
                opts.checkpoint_every,
            ),
            header,
            aovs,
            resume_written: None,
            published: Default::default(),
            checkpoint_asked: false,
        }
    });
    let job = FrameJob {
        settings,
        config: schedule,
        quiet: out.is_quiet(),
        timing: timing(opts, place.ranks),
        fault: crate::sched::fault::from_env()?,
        deadline: opts.pass_deadline(started),
        stop: controls.stop(),
    };
    // From here a stop ends the frame and keeps what is rendered; before, while loading and
    // building, it ends the process as usual.
    controls.frame_starts(place.ranks, out);
    let t1 = Instant::now();
    let sink: &mut dyn FrameSink = match outputs.as_mut() {
        Some(o) => o,
        None => &mut Discard,
    };
    let result = run_rank(transport, Ok(setup), &job, sink);
    crate::sched::fault::hold_if_silenced();
    // What the frame rendered is written as it is: a stop from here on changes nothing.
    controls.frame_ended();
    timings.render_s = t1.elapsed().as_secs_f64();
    let (frame, outputs) = match (result, outputs) {
        (Ok(Some(frame)), Some(outputs)) => (frame, outputs),
        (Ok(_), _) => return Ok(None),
        // On rank 0, the checkpoint that can finish the frame, if one was written.
        (Err(e), Some(o)) => return Err(resume::after_checkpoints(e.into(), &o.checkpoints)),
        (Err(e), None) => return Err(e.into()),
    };
    for late in factory.late_backends() {
        out.status(format_args!("backend: {late}"));
    }
    outputs::conclude(
        &frame,
        &outputs,
        timings,
        factory.rays_traced(),
        place.ranks,
    )?;
    Ok(Some(frame.report))
}

/// The clocks of the frame's progress loop: alone, it only watches its workers and the stop
/// flag; among ranks, a rank silent for `rank_timeout` is taken for dead or hung.
fn timing(opts: &RenderOptions, ranks: usize) -> Timing {
    match (ranks, opts.rank_timeout) {
        (1, _) => Timing::alone(),
        (_, Some(dead_after)) => Timing {
            dead_after,
            ..Timing::default()
        },
        (_, None) => Timing::default(),
    }
}

/// The header of the frame's checkpoints and resume files.
fn checkpoint_header(
    opts: &RenderOptions,
    render_key: &str,
    window: Tile,
    schedule: &SchedConfig,
) -> CheckpointHeader {
    CheckpointHeader {
        render: render_key.to_string(),
        window: [window.x, window.y, window.w, window.h],
        pass_spp: schedule.pass_spp.unwrap_or(opts.spp),
        spp_done: 0,
        software: output::software(),
        png_tone: opts.tone,
    }
}

/// Everything this rank does before the frame: the checks, the scene, the backend and its
/// workers, and on rank 0 the resume file, the cost map and the guide layers.
fn get_ready(opts: &RenderOptions, place: &Place, out: Verbosity) -> anyhow::Result<Ready> {
    let (window, schedule) = check_before_loading(opts, place)?;
    set_threads(opts, place)?;
    let (loaded, settings) = Loaded::load(opts, place, out)?;
    let render_key = loaded.frame_key(opts, &settings, &schedule);
    let frame = (settings, schedule, window, render_key);
    ready_for(opts, place, out, (&loaded, None), frame)
}

/// The scene as a rank loaded it, shared by the frames it renders.
struct Loaded {
    scene: Arc<Scene>,
    /// Its content hash and triangle count, which the frame's key records.
    identity: (u64, usize),
    load_s: f64,
    cpu_bvh: SharedBvh,
    /// The GPU backends the last frame set up, by device: a camera path's next frame sets them
    /// for its camera rather than building them again.
    gpus: std::sync::Mutex<Vec<(u32, crate::optix::pathtracer::OptixBackend)>>,
}

impl Loaded {
    /// The scene loaded and checked, and the first frame's settings.
    fn load(
        opts: &RenderOptions,
        place: &Place,
        out: Verbosity,
    ) -> anyhow::Result<(Loaded, RenderSettings)> {
        let (scene, settings, load_s, probe_bvh) = load(opts, place, out)?;
        let content = crate::scene::content_hash::content_hash(&scene);
        let identity = (content, scene.triangle_count());
        let loaded = Loaded {
            // From here on the scene is only read: shared with the CPU backend, not copied.
            scene: Arc::new(scene),
            identity,
            load_s,
            cpu_bvh: SharedBvh::new(probe_bvh),
            gpus: Default::default(),
        };
        Ok((loaded, settings))
    }

    /// The key a frame of `settings` records in its image.
    fn frame_key(
        &self,
        opts: &RenderOptions,
        settings: &RenderSettings,
        schedule: &SchedConfig,
    ) -> String {
        outputs::frame_key(opts, &self.scene, self.identity, settings, schedule)
    }
}

/// What a rank does before a frame of `loaded`'s scene: the backend and its workers (on the
/// CPU BVH built once for every frame), and on rank 0 the resume file, the cost map and the
/// guide layers.
fn ready_for(
    opts: &RenderOptions,
    place: &Place,
    out: Verbosity,
    (loaded, previous): (&Loaded, Option<&CostMap>),
    (settings, schedule, window, render_key): (RenderSettings, SchedConfig, Tile, String),
) -> anyhow::Result<Ready> {
    let (scene, cpu_bvh, content) = (&loaded.scene, loaded.cpu_bvh.clone(), loaded.identity.0);
    // Rank 0's layers trace the CPU BVH. Where the frame runs on GPUs alone, the cores would
    // idle through the GPU's setup and frame: the layers are traced then, beside it (unless a
    // time limit, whose passes are planned without them, counts them). Elsewhere they are
    // traced before the frame, on the BVH the CPU backend traces.
    let aovs = match place.rank {
        0 => {
            let beside = !opts.aovs.is_empty()
                && opts.time_limit.is_none()
                && aovs::frame_on_gpus_alone(opts);
            PendingAovs::start(opts, scene, cpu_bvh.clone(), &settings, window, beside)
        }
        _ => PendingAovs::None,
    };
    let resume = match (&opts.resume, place.rank) {
        (Some(path), 0) => Some(resume::read_resume(
            path,
            &render_key,
            window,
            &schedule,
            opts.spp,
            out,
        )?),
        _ => None,
    };
    let samples_resumed = resume.as_ref().map_or(0.0, crate::sched::Resume::samples);
    let fingerprint = fingerprint::fingerprint(scene, content, &settings, &schedule);
    let gpus = loaded.gpus.lock().map(|g| g.clone()).unwrap_or_default();
    let (factory, setup, build_s, estimate_alone) = rank_setup(
        opts,
        place,
        (scene, &settings, &schedule, window),
        (resume, (cpu_bvh, &gpus), fingerprint, previous),
        out,
    )?;
    if let Ok(mut kept) = loaded.gpus.lock() {
        *kept = factory.gpu_backends();
    }
    let timings = Timings {
        load_s: loaded.load_s,
        build_s,
        render_s: 0.0,
        samples_resumed,
    };
    Ok(Ready {
        settings,
        schedule,
        window,
        render_key,
        factory,
        setup,
        timings,
        // Before the frame (a time limit counts them), unless traced beside the GPU.
        aovs: (place.rank == 0).then(|| aovs.trace_before_frame()),
        estimate_alone,
    })
}

/// The checks that refuse a frame before any work: the options, the crop (one process per
/// crop), the camera comment, and on rank 0 the outputs and the frame's memory. Returns the
/// window and the schedule.
fn check_before_loading(
    opts: &RenderOptions,
    place: &Place,
) -> anyhow::Result<(Tile, SchedConfig)> {
    opts.check()?;
    if opts.pixelbounds.is_some() && place.ranks > 1 {
        anyhow::bail!(
            "--pixelbounds renders one crop per process: run it without mpirun (or with -np 1), one job per crop, and join them with `gasworks merge`"
        );
    }
    let window = opts.window()?;
    if place.rank == 0 {
        output::check_writable(&opts.output)?;
        output::check_window_fits_format(&opts.output, window, opts.width, opts.height)?;
        opts.check_aov_paths()?;
        opts.check_report_paths()?;
        setup::check_frame_memory(window.w, window.h)?;
    }
    // A malformed camera comment fails now, not after minutes of loading (checked again, and
    // used, once the scene is loaded).
    if !opts.camera.overrides_all() {
        crate::scene::Camera::hint_from_obj(&opts.scene)?;
    }
    let schedule = opts.schedule_config()?;
    Ok((window, schedule))
}

/// The CPU threads: as many as asked, or, among ranks, this rank's share of its machine's
/// cores; otherwise every core.
fn set_threads(opts: &RenderOptions, place: &Place) -> anyhow::Result<()> {
    let share = (place.ranks > 1).then(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / place.local_ranks).max(1)
    });
    if let Some(t) = opts.threads.or(share) {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t.max(1))
            .build_global()
            .context("cannot set the number of threads")?;
    }
    Ok(())
}

/// The scene, loaded and checked (on rank 0, against the outputs, and its warnings said),
/// the render's settings, how long loading took, and the CPU BVH that the environment
/// map's probe built, if it ran.
fn load(
    opts: &RenderOptions,
    place: &Place,
    out: Verbosity,
) -> anyhow::Result<(
    Scene,
    RenderSettings,
    f64,
    Option<Arc<crate::cpu::SceneBvh>>,
)> {
    let (mut scene, load_s) = setup::load_scene(opts)?;
    if place.rank == 0 {
        setup::check_outputs_against_textures(opts, &scene)?;
        setup::print_load_warnings(opts, &scene, true, out);
        out.status(format_args!(
            "scene: {}: {}",
            opts.scene.display(),
            scene.size_text()
        ));
    }
    let settings = setup::render_settings(opts, &scene.bounds(), out)?;
    // Every rank measures the same share (the probe is deterministic); the fingerprint
    // compares it with the others'.
    let probe_bvh = setup::choose_environment_share(opts, &mut scene, &settings, out);
    Ok((scene, settings, load_s, probe_bvh))
}

/// What [`rank_setup`] gives: the workers' factory, the rank's part of the handshake, the
/// backend's build time, and with a previous frame the estimate alone.
type RankReady = (WorkerFactory, RankSetup, f64, Option<CostMap>);

/// The backend, the rank's workers (those of `--devices`, else the backend's own: two
/// launch streams on GPU 0, or a thread per core) and, on rank 0, the cost map (rasterized
/// beside a GPU's setup, or blended with the `previous` frame's measured costs) and the film
/// to resume from: this rank's part of the handshake.
fn rank_setup(
    opts: &RenderOptions,
    place: &Place,
    (scene, settings, schedule, window): (&Arc<Scene>, &RenderSettings, &SchedConfig, Tile),
    (resume, (cpu_bvh, gpus), fingerprint, previous): (
        Option<crate::sched::Resume>,
        (SharedBvh, &crate::backend::KeptGpus),
        u64,
        Option<&CostMap>,
    ),
    out: Verbosity,
) -> anyhow::Result<RankReady> {
    let rank0 = place.rank == 0;
    for (device, gpu) in gpus {
        gpu.set_frame(scene, settings)
            .with_context(|| format!("GPU {device}: setting the next frame"))?;
    }
    let bvh_and_gpus = (cpu_bvh, gpus);
    let (backend, early) =
        setup::set_up_backend(opts, scene, settings, schedule, rank0, bvh_and_gpus)?;
    let (early, estimate_alone) = match previous.filter(|_| rank0) {
        Some(p) => {
            let (blended, alone) =
                crate::sched::temporal::prepare(scene, settings, schedule, window, p);
            (Some(blended), Some(alone))
        }
        None => (early, None),
    };
    out.status(format_args!("backend: {}", backend.description));
    let (description, build_s) = (backend.description.clone(), backend.build_seconds);
    let devices = match (&opts.devices, backend.optix.is_some()) {
        (Some(d), _) => d.clone(),
        (None, true) => vec![DeviceSpec::Gpu {
            device: 0,
            streams: 2,
        }],
        (None, false) => schedule.devices.clone(),
    };
    let factory = WorkerFactory::new(scene, settings, &opts.optix, backend).with_gpus(gpus);
    let workers = crate::sched::rank_workers(&devices, &factory, window)?;
    let plan =
        rank0.then(|| crate::sched::plan_inputs(scene, settings, schedule, window, early, resume));
    let setup = RankSetup::new(workers, place.host.clone(), description, fingerprint, plan);
    Ok((factory, setup, build_s, estimate_alone))
}

/// A rank that could not get ready still takes part in the handshake, so that every rank
/// learns why the job cannot start; the error is the job's, the same on every rank.
fn refuse_job<T: Transport + ?Sized>(
    opts: &RenderOptions,
    transport: &mut T,
    place: &Place,
    e: &anyhow::Error,
) -> anyhow::Error {
    let why = format!("{}: {}", place.host, error_text(e));
    let job = FrameJob {
        settings: placeholder_settings(),
        config: SchedConfig::default(),
        quiet: true,
        timing: timing(opts, place.ranks),
        fault: None,
        deadline: None,
        stop: &NEVER,
    };
    match run_rank(transport, Err(why), &job, &mut Discard) {
        Err(e) => e.into(),
        Ok(_) => anyhow::anyhow!(
            "the handshake accepted rank {}, which was not ready",
            place.rank
        ),
    }
}

/// The stop flag of a rank that could not get ready: it renders nothing to stop.
static NEVER: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Settings for a rank that could not load the scene: it only takes part in the handshake,
/// which ends the job before anything is rendered.
fn placeholder_settings() -> RenderSettings {
    use crate::scene::camera::CameraFrame;
    RenderSettings {
        width: 1,
        height: 1,
        spp: 1,
        max_depth: 1,
        seed: 0,
        camera: CameraFrame {
            eye: glam::Vec3::ZERO,
            u: glam::Vec3::X,
            v: glam::Vec3::Y,
            w: glam::Vec3::Z,
            width: 1,
            height: 1,
            filter: crate::scene::PixelFilter::Box,
            lens: crate::scene::ThinLens::default(),
        },
    }
}

/// An error and its causes on one line, each cause once (a loader error often repeats its
/// source's text in its own).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    text
}
