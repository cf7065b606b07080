//! `gasworks render`: the flags, parsed into [`RenderOptions`], and one call of the library's
//! render session ([`crate::session::render`]); under `mpirun` every rank makes it, with the
//! job's transport.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::args::{
    parse_duration, parse_vec3, AccelArgs, CameraArgs, PixelFilterArg, PngToneArgs, ScheduleArgs,
};
use super::signals;
use crate::console::Verbosity;
use crate::render::{output, Tile};
use crate::sched::progress::ProgressMode;
use crate::sched::DeviceSpec;
use crate::session::{EnvShare, EnvironmentOptions, LensOptions, RenderOptions};

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
    pub env_share: EnvShare,
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
    ///
    /// With --camera-path, give --resume alone: the sequence goes on at its first frame whose
    /// image is not complete, from that frame's own resume file where it left one.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        default_missing_value = "",
        value_parser = parse_resume,
        help_heading = "Passes, stops and farms"
    )]
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
    /// Under mpirun: each rank holds part of the scene's groups and rays travel to them
    /// (docs/distributed-geometry.md), in place of every rank holding the whole scene
    ///
    /// On the CPU the image is the one-process image bit for bit; GPU ranks (--backend optix,
    /// or auto where a GPU is found) keep their part on the GPU and agree within noise. Not yet
    /// with the options that cut the frame into passes or crops.
    #[arg(
        long,
        help_heading = "Workers and tiles",
        conflicts_with_all = [
            "checkpoint_every", "time_limit", "noise_threshold", "pixelbounds",
            "aov", "pass_spp", "devices", "stats", "costmap",
        ]
    )]
    pub distribute_geometry: bool,
    /// With --distribute-geometry: after a 1-sample prepass, every rank also holds the groups
    /// rays traveled for most, per byte, up to this share of the scene's group bytes (5%)
    #[arg(
        long,
        value_name = "PERCENT",
        value_parser = parse_percent,
        requires = "distribute_geometry",
        help_heading = "Workers and tiles"
    )]
    pub replicate: Option<f64>,
    /// With --distribute-geometry and --camera-path: between frames, move domains' cells
    /// between ranks so that fewer of the last frame's segments cross between ranks, within
    /// 10% over the first frame's largest part, moving at most this share of the scene's group
    /// bytes a frame (5%)
    #[arg(
        long,
        value_name = "PERCENT",
        value_parser = parse_percent,
        requires_all = ["distribute_geometry", "camera_path"],
        help_heading = "Workers and tiles"
    )]
    pub reassign: Option<f64>,
    /// Render a sequence: one frame per row of this CSV file (eye, look-at, up, vertical fov;
    /// not interpolated), each into the file -o names with its run of # replaced by the
    /// frame's number (frame-####.exr), the scene loaded and its BVH built once (with
    /// --distribute-geometry, each rank's part and its structures)
    #[arg(
        long,
        value_name = "PATH.csv",
        help_heading = "Camera",
        conflicts_with_all = [
            "eye", "look_at", "up", "fov", "pixelbounds", "time_limit", "stats", "costmap",
        ]
    )]
    pub camera_path: Option<PathBuf>,
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
    let options = a.options()?;
    signals::watch_checkpoint_requests(options.verbosity);
    // Under mpirun with several ranks, the ranks render the frame together. With one rank, MPI
    // stays initialized until this function returns and the render is a single process's.
    #[cfg(feature = "mpi")]
    let _mpi = match crate::cluster::mpi::MpiWorld::from_launcher()? {
        Some(world) if crate::sched::Transport::size(&world) > 1 => {
            return run_rank(options, world)
        }
        one => one,
    };
    #[cfg(not(feature = "mpi"))]
    refuse_ranks_without_mpi()?;
    if options.distribute_geometry {
        return crate::cluster::geometry::frame::render(
            &options,
            &mut crate::sched::Alone,
            &signals::Signals,
        );
    }
    crate::session::render(&options, &mut crate::sched::Alone, &signals::Signals)
}

/// This process as one rank of an MPI job. Every rank prints the errors that every rank has
/// (the handshake's verdict, rank 0's output error) and waits for the others to have printed
/// theirs before MPI ends: mpirun kills the remaining ranks as soon as one exits non-zero.
/// Rank 0, stopped by a signal, exits as a process ended by it (130, 143, 129).
#[cfg(feature = "mpi")]
fn run_rank(
    mut options: RenderOptions,
    mut world: crate::cluster::mpi::MpiWorld,
) -> anyhow::Result<()> {
    options.rank_timeout = Some(rank_timeout(std::env::var("GASWORKS_RANK_TIMEOUT_S").ok())?);
    let result = if options.distribute_geometry {
        crate::cluster::geometry::frame::render(&options, &mut world, &signals::Signals)
    } else {
        crate::session::render(&options, &mut world, &signals::Signals)
    };
    let Err(e) = result else {
        return Ok(());
    };
    if let Some(stopped) = e.downcast_ref::<crate::session::Interrupted>() {
        crate::console::write_whole(format_args!("error: {e}"));
        let exit_code = stopped.by.exit_code();
        drop(world);
        return Err(super::Reported { exit_code }.into());
    }
    crate::console::write_whole(format_args!("error: {}", crate::session::error_text(&e)));
    world.barrier();
    drop(world);
    Err(super::Reported { exit_code: 1 }.into())
}

/// `GASWORKS_RANK_TIMEOUT_S`: how long a rank may stay silent before it is taken for dead;
/// the default when unset.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn rank_timeout(value: Option<String>) -> anyhow::Result<Duration> {
    let Some(v) = value else {
        return Ok(crate::sched::Timing::default().dead_after);
    };
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            anyhow::anyhow!("GASWORKS_RANK_TIMEOUT_S={v:?}: expected a positive number of seconds")
        })
}

impl RenderArgs {
    /// `--resume FILE` for one frame; `--resume` alone for a sequence (`None` then: each
    /// frame finds its own).
    fn resume_file(&self) -> anyhow::Result<Option<PathBuf>> {
        match (&self.resume, &self.camera_path) {
            (Some(file), None) if file.as_os_str().is_empty() => anyhow::bail!(
                "--resume needs the resume file a stopped render left (OUT.gasworks-resume); \
                 --resume alone goes on with a --camera-path sequence"
            ),
            (Some(file), Some(_)) if !file.as_os_str().is_empty() => anyhow::bail!(
                "with --camera-path, give --resume alone: each frame's resume file is found \
                 beside its image ({} given)",
                file.display()
            ),
            (_, Some(_)) => Ok(None),
            (Some(_), None) if self.distribute_geometry => anyhow::bail!(
                "--distribute-geometry keeps no resume file: leave out --resume (with \
                 --camera-path, --resume alone keeps the complete frames)"
            ),
            (file, None) => Ok(file.clone()),
        }
    }

    /// The render the flags ask for, as the library's plain options.
    pub fn options(&self) -> anyhow::Result<RenderOptions> {
        let devices = match &self.schedule.devices {
            Some(list) => Some(DeviceSpec::parse_list(list)?),
            None => None,
        };
        Ok(RenderOptions {
            scene: self.scene.clone(),
            output: self.output.clone(),
            width: self.width,
            height: self.height,
            spp: self.spp,
            max_depth: self.max_depth,
            seed: self.seed,
            backend: self.backend.into(),
            threads: self.threads,
            environment: EnvironmentOptions {
                radiance: self.env,
                map: self.env_map.clone(),
                rotate_deg: self.env_rotate,
                scale: self.env_scale,
                share: self.env_share,
            },
            two_sided_lights: self.two_sided_lights,
            tone: self.tone.recorded(),
            filter: self.filter.into(),
            camera: self.camera.choice(),
            lens: LensOptions {
                radius: self.lens_radius,
                focus_distance: self.focus_distance,
                focus_on: self.focus_on,
            },
            aovs: self.aov.clone(),
            aov_spp: self.aov_spp,
            pixelbounds: self.pixelbounds,
            resume: self.resume_file()?,
            checkpoint_every: self.checkpoint_every,
            time_limit: self.time_limit,
            noise_threshold: self.noise_threshold,
            min_spp: self.min_spp,
            schedule: self.schedule.config()?,
            devices,
            stats: self.schedule.stats.clone(),
            costmap_pictures: self.schedule.costmap.clone(),
            optix: self.accel.optix_options()?,
            progress: self.progress.into(),
            verbosity: Verbosity::from_flags(self.quiet, self.verbose),
            rank_timeout: None,
            distribute_geometry: self.distribute_geometry,
            replicate: self.replicate,
            reassign: self.reassign,
            camera_path: self.camera_path.clone(),
            continue_sequence: self.camera_path.is_some() && self.resume.is_some(),
        })
    }
}

/// `--resume FILE`, or `--resume` alone (empty: a sequence's frames find their own).
fn parse_resume(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
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

/// `--replicate 5%` (or `5`): a share of 0 to 100%, as a fraction.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "{s:?}: expected a percentage from 0 to 100, e.g. 5%"
        )),
    }
}

/// `--env-share auto|P`: `auto` or a probability, 0 to 1.
fn parse_env_share(s: &str) -> Result<EnvShare, String> {
    if s == "auto" {
        return Ok(EnvShare::Auto);
    }
    match s.parse::<f32>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(EnvShare::Fixed(p)),
        _ => Err(format!(
            "{s:?}: expected auto or a probability from 0 to 1 (the share of light samples \
             for the environment map)"
        )),
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

    /// The library's defaults are the command line's: a program that renders through
    /// `RenderOptions::new` gets what `gasworks render SCENE -o OUT` renders.
    #[test]
    fn the_librarys_defaults_are_the_command_lines() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            render: RenderArgs,
        }
        let parsed = Cli::try_parse_from(["t", "scene.obj", "-o", "out.png"]).unwrap();
        let from_flags = parsed.render.options().unwrap();
        let from_library = RenderOptions::new("scene.obj", "out.png");
        assert_eq!(format!("{from_flags:?}"), format!("{from_library:?}"));
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
    fn the_rank_timeout_is_a_positive_representable_number_of_seconds() {
        let default = crate::sched::Timing::default().dead_after;
        assert_eq!(rank_timeout(None).unwrap(), default);
        assert_eq!(
            rank_timeout(Some("2.5".into())).unwrap(),
            Duration::from_millis(2500)
        );
        for bad in ["0", "-1", "nan", "inf", "1e20", "soon", ""] {
            let e = rank_timeout(Some(bad.into())).unwrap_err().to_string();
            assert!(e.contains("GASWORKS_RANK_TIMEOUT_S"), "{bad}: {e}");
        }
    }
}
