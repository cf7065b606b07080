//! Argument groups shared by several subcommands.

use clap::{Args, ValueEnum};
use glam::Vec3;

use crate::optix::accel::{AccelOptions, BuildContexts};
use crate::optix::pathtracer::OptixOptions;
use crate::optix::plan::{
    Assign, MergeOptions, ScratchMode, DEFAULT_LPT_BUILD_WEIGHT, DEFAULT_MERGE_BELOW,
};
use crate::optix::{ContextOptions, OptixError};
use crate::scene::camera::CameraChoice;

/// A duration: seconds (`600`, `90s`), minutes (`10m`) or hours (`2h`), above zero.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("expected a duration like 600, 90s, 10m or 2h, got {s:?}"))?;
    let seconds = value * unit;
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e9) {
        return Err(format!(
            "{s:?}: a duration must be above zero (and below 30 years)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Parses "x,y,z" into a vector.
pub fn parse_vec3(s: &str) -> Result<Vec3, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return Err(format!(
            "expected three comma-separated numbers like 0,1,5, got {s:?}"
        ));
    }
    let mut v = [0.0f32; 3];
    for (i, p) in parts.iter().enumerate() {
        v[i] = p
            .parse::<f32>()
            .map_err(|_| format!("{p:?} is not a number"))?;
        if !v[i].is_finite() {
            return Err(format!("{p:?} is not a finite number"));
        }
    }
    Ok(Vec3::from(v))
}

/// The camera. Defaults: the scene's own camera when its OBJ carries one (see
/// [`crate::scene::camera::CAMERA_HINT_PREFIX`]), else one that looks along -Z and frames the
/// scene's bounding sphere ([`crate::scene::Camera::framing`]).
#[derive(Args, Debug, Clone)]
pub struct CameraArgs {
    /// Camera position, x,y,z [default: the scene's camera, else framing the scene from +Z]
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true)]
    pub eye: Option<Vec3>,
    /// Point the camera looks at, x,y,z [default: the scene's, else the centre of its bounds]
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true)]
    pub look_at: Option<Vec3>,
    /// Camera up vector, x,y,z [default: the scene's, else 0,1,0]
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true)]
    pub up: Option<Vec3>,
    /// Vertical field of view in degrees [default: the scene's, else 39.3]
    #[arg(long, value_name = "DEG")]
    pub fov: Option<f32>,
}

impl CameraArgs {
    /// The camera the flags choose ([`CameraChoice`]: each value given, else the scene's, else
    /// the default).
    pub fn choice(&self) -> CameraChoice {
        CameraChoice {
            eye: self.eye,
            look_at: self.look_at,
            up: self.up,
            fov: self.fov,
        }
    }
}

/// How a PNG shows the linear radiance it is made from (`--exposure`, `--tonemap`): one
/// group for every command that writes images (`render`, `merge`, `denoise`), so that the
/// flags read and check alike.
#[derive(Args, Clone, Copy, Debug)]
pub struct PngToneArgs {
    /// Exposure of a PNG, in stops (+1 twice as bright, -1 half)
    ///
    /// The radiance is multiplied by 2^EV before the clamp to [0, 1] and the sRGB encoding.
    /// An EXR holds linear radiance as rendered: apply the exposure in its viewer.
    #[arg(
        long,
        value_name = "EV",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub exposure: f32,
    /// Tone curve of a PNG, after --exposure: clamp, or aces (filmic)
    ///
    /// clamp: radiance as it is, clamped to [0, 1]. aces: highlights roll off towards white;
    /// mid grey a stop darker, so often with --exposure 1. An EXR holds linear radiance as
    /// rendered.
    #[arg(long, value_enum, default_value_t = ToneCurveArg::Clamp)]
    pub tonemap: ToneCurveArg,
}

impl PngToneArgs {
    /// The tone curve the flags chose.
    pub fn curve(&self) -> crate::render::output::ToneCurve {
        self.tonemap.into()
    }

    /// The tone mapping as a resume file records it, for `preview` to apply by default.
    pub fn recorded(&self) -> crate::render::checkpoint::PngTone {
        crate::render::checkpoint::PngTone {
            exposure: self.exposure,
            tonemap: self.curve(),
        }
    }

    /// Refuses what `output` cannot take: an exposure out of range, or any tone mapping of
    /// an EXR (it holds radiance as rendered).
    pub fn check(&self, output: &std::path::Path) -> anyhow::Result<()> {
        use crate::render::output::{check_exposure, check_tonemap};
        check_exposure(self.exposure, output).map_err(anyhow::Error::msg)?;
        check_tonemap(self.curve(), output).map_err(anyhow::Error::msg)?;
        Ok(())
    }
}

/// How a PNG shows radiance above 1 (`--tonemap`): [`crate::render::output::ToneCurve`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToneCurveArg {
    /// Radiance as it is, clamped to [0, 1]: exact up to 1, brighter is white
    Clamp,
    /// The ACES filmic look (Hill's fit): highlights roll off towards white, mid grey a stop
    /// darker than the clamp
    Aces,
}

impl From<ToneCurveArg> for crate::render::output::ToneCurve {
    fn from(a: ToneCurveArg) -> Self {
        match a {
            ToneCurveArg::Clamp => Self::Clamp,
            ToneCurveArg::Aces => Self::Aces,
        }
    }
}

/// The pixel filter (`--filter`): [`crate::scene::PixelFilter`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelFilterArg {
    /// Each pixel averages its own square
    Box,
    /// A tent of radius 1 pixel: neighbours overlap, smoother edges
    Tent,
}

impl From<PixelFilterArg> for crate::scene::PixelFilter {
    fn from(a: PixelFilterArg) -> Self {
        match a {
            PixelFilterArg::Box => Self::Box,
            PixelFilterArg::Tent => Self::Tent,
        }
    }
}

/// Which stream each GAS build goes to.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignArg {
    /// Build i on build stream i mod N.
    RoundRobin,
    /// Largest build first, onto the least-loaded build stream.
    Lpt,
}

/// How the builds share scratch memory.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScratchArg {
    /// Every build its own disjoint slice of one allocation.
    Shared,
    /// Builds on one build stream reuse that stream's slice (stream order makes it safe).
    PerStream,
}

/// Which OptiX contexts the GAS builds go through.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildContextsArg {
    /// A context per build stream where one context crashed on a GPU or would waste the threads
    /// (more than one enqueue thread, LPT below build weight 5000, largest-first order), one
    /// shared context otherwise (docs/gas-builds.md)
    Auto,
    /// One context, the renderer's, for every build.
    Shared,
    /// A context of its own for each build stream.
    PerStream,
}

impl BuildContextsArg {
    /// The optix layer's contexts for the build options `o` (whose own `contexts` is not
    /// looked at): `auto` is [`AccelOptions::suited_contexts`].
    pub fn resolve(self, o: &AccelOptions) -> BuildContexts {
        match self {
            BuildContextsArg::Auto => o.suited_contexts(),
            BuildContextsArg::Shared => BuildContexts::Shared,
            BuildContextsArg::PerStream => BuildContexts::PerStream,
        }
    }
}

/// Options of the batched GAS builds (OptiX backend and build-bench).
#[derive(Args, Debug, Clone)]
pub struct AccelArgs {
    /// Build streams: the CUDA streams the per-group GAS builds are spread over, before the
    /// frame (the launch streams that render tiles are the x2 of --devices gpu0x2)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub streams: u32,
    /// Build with PREFER_FAST_BUILD instead of PREFER_FAST_TRACE
    #[arg(long, hide_short_help = true)]
    pub fast_build: bool,
    /// Which build stream each GAS build goes to
    #[arg(long, value_enum, default_value_t = AssignArg::RoundRobin, hide_short_help = true)]
    pub assign: AssignArg,
    /// Scratch memory layout of the builds
    #[arg(long, value_enum, default_value_t = ScratchArg::Shared, hide_short_help = true)]
    pub scratch: ScratchArg,
    /// Compact the GASes into one allocation after building
    #[arg(long, hide_short_help = true)]
    pub compact: bool,
    /// Groups under N triangles become build inputs of shared GASes, each keeping its own SBT
    /// record (0: one GAS per group). The default is what built fastest (docs/gas-builds.md)
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MERGE_BELOW as u32,
        hide_short_help = true
    )]
    pub merge_below: u32,
    /// With --assign lpt: triangles each build adds to its load, for the fixed cost of a build
    /// (0: balance triangles only). The default was measured (docs/gas-builds.md)
    #[arg(long, default_value_t = DEFAULT_LPT_BUILD_WEIGHT, hide_short_help = true)]
    pub lpt_build_weight: u64,
    /// Host threads that enqueue the GAS builds, each owning whole build streams (1: one
    /// thread). They lift a host-bound enqueue only through a context per build stream (one
    /// context serialises its OptiX calls): with --build-contexts auto, more than one thread
    /// gets a context per build stream (docs/gas-builds.md)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=64),
        hide_short_help = true
    )]
    pub enqueue_threads: u32,
    /// OptiX contexts the GAS builds are enqueued through: one shared, one per build stream,
    /// or `auto` (per build stream where one context failed on a GPU or would serialise the
    /// threads)
    #[arg(long, value_enum, default_value_t = BuildContextsArg::Auto, hide_short_help = true)]
    pub build_contexts: BuildContextsArg,
    /// Turn on OptiX validation mode (slow; reports API misuse)
    #[arg(long, hide_short_help = true)]
    pub validation: bool,
    /// OptiX ABI version to request from the driver: 105 (OptiX 9.0) or 87 (OptiX 8.0)
    /// [default: 105, falling back to 87]
    #[arg(long, hide_short_help = true)]
    pub optix_abi: Option<u32>,
}

impl AccelArgs {
    /// The OptiX backend's options on GPU 0: the command line converted into the optix
    /// layer's own plain types (which know nothing of clap).
    pub fn optix_options(&self) -> Result<OptixOptions, OptixError> {
        Ok(OptixOptions {
            device: 0,
            context: ContextOptions::from_cli(self.optix_abi, self.validation)?,
            accel: self.accel_options(),
        })
    }

    /// The GAS build options.
    pub fn accel_options(&self) -> AccelOptions {
        AccelOptions::from(self)
    }
}

impl From<&AccelArgs> for AccelOptions {
    fn from(a: &AccelArgs) -> AccelOptions {
        let o = AccelOptions {
            // The parser refuses 0; a struct built in code still gets at least one stream.
            streams: a.streams.max(1),
            fast_build: a.fast_build,
            assign: a.assign.into(),
            scratch: a.scratch.into(),
            compact: a.compact,
            merge: MergeOptions::new(u64::from(a.merge_below)),
            lpt_build_weight: a.lpt_build_weight,
            enqueue_threads: a.enqueue_threads,
            ..AccelOptions::default()
        };
        AccelOptions {
            contexts: a.build_contexts.resolve(&o),
            ..o
        }
    }
}

impl From<AssignArg> for Assign {
    fn from(a: AssignArg) -> Assign {
        match a {
            AssignArg::RoundRobin => Assign::RoundRobin,
            AssignArg::Lpt => Assign::Lpt,
        }
    }
}

impl From<ScratchArg> for ScratchMode {
    fn from(s: ScratchArg) -> ScratchMode {
        match s {
            ScratchArg::Shared => ScratchMode::Shared,
            ScratchArg::PerStream => ScratchMode::PerStream,
        }
    }
}

/// How tiles are cut and spread over workers.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleArg {
    /// Equal tiles, in order.
    Regular,
    /// Equal tiles, most expensive (by the cost map) first.
    Sorted,
    /// kd split of the cost map into tiles of about equal cost.
    Adaptive,
}

/// `--on-worker-error`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerErrorArg {
    /// Retire the worker; the others take its tiles.
    Retire,
    /// End the frame with the error.
    Stop,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

/// Tile scheduling options of a render.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// Tiling strategy
    #[arg(long, value_enum, default_value_t = ScheduleArg::Sorted)]
    pub schedule: ScheduleArg,
    /// Number of tiles (rounded to a power of two for `adaptive`) [default: about 64x64-pixel tiles]
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub tiles: Option<u32>,
    /// Work stealing between workers
    #[arg(long, value_enum, default_value_t = OnOff::On, hide_short_help = true)]
    pub steal: OnOff,
    /// Workers, comma-separated: cpu (one per thread), cpu:N, gpuD (one launch stream on GPU
    /// D), gpuDxS (S launch streams, as gpu0x2) [default: gpu0x2 on a GPU, else cpu]
    ///
    /// Each CPU thread is a worker, and so is each launch stream of a GPU: a CUDA stream that
    /// launches tiles and copies them back while the other launches. Launch streams are not
    /// the build streams of --streams, which build the acceleration structures before the
    /// frame.
    #[arg(long, value_name = "LIST", display_order = 0)]
    pub devices: Option<String>,
    /// Before the first pass, time one worker of each device on a piece of the image, so that
    /// the pass's shares and steals follow the workers' speeds (only when --devices mixes
    /// devices, e.g. gpu0x2,cpu, and not for GPUs of one model with as many streams each; the
    /// image is the same either way)
    #[arg(long, value_enum, default_value_t = OnOff::On, hide_short_help = true)]
    pub calibrate: OnOff,
    /// Once the workers' speeds are known (calibrated or measured), cut the tiles that workers
    /// twice as slow as the fastest or more would hold into about this many pieces per such
    /// worker, so that CPU threads beside a GPU get tiles they can finish (a slow GPU's are
    /// not cut below its launch's work); 0: never cut (the image is the same either way)
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::sched::tiles::DEFAULT_SLOW_WORKER_PIECES,
        hide_short_help = true
    )]
    pub slow_worker_pieces: u32,
    /// Samples per pixel of each pass over the tiles (progressive rendering; a power of two keeps each pass stratified) [default: all in one pass]
    #[arg(long, value_name = "K", help_heading = "Passes, stops and farms")]
    pub pass_spp: Option<u32>,
    /// When a worker's renderer fails on a tile (a GPU out of memory, a lost context): retire
    /// the worker and let the others render its tiles, every pixel still getting all its
    /// samples (the frame fails only when no worker is left; under mpirun, when no worker of
    /// a rank is left), or stop the frame at the first error
    #[arg(
        long,
        value_enum,
        env = "GASWORKS_ON_WORKER_ERROR",
        default_value_t = WorkerErrorArg::Retire,
        hide_short_help = true
    )]
    pub on_worker_error: WorkerErrorArg,
    /// Write scheduling statistics to this CSV file, for `gasworks schedule-sim` to replay
    ///
    /// One row per pass and worker, with OUT.tiles.csv (per tile: where, who, measured and
    /// planned cost), OUT.costmap.csv (the estimate) and, with --noise-threshold,
    /// OUT.blocks.csv (the pass each block stopped before) beside it: what `gasworks
    /// schedule-sim OUT.csv` replays.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<std::path::PathBuf>,
    /// Write the estimated and measured cost maps and the tile layout as PNGs into this folder
    #[arg(long, value_name = "DIR")]
    pub costmap: Option<std::path::PathBuf>,
    /// Cost-map resolution as a fraction of the image's, per axis
    #[arg(long, default_value_t = 0.25, hide_short_help = true)]
    pub costmap_scale: f32,
}

impl ScheduleArgs {
    /// The scheduler's configuration from the command line, checked.
    pub fn config(&self) -> anyhow::Result<crate::sched::SchedConfig> {
        use crate::sched::{DeviceSpec, SchedConfig, Strategy};
        let config = SchedConfig {
            strategy: match self.schedule {
                ScheduleArg::Regular => Strategy::Regular,
                ScheduleArg::Sorted => Strategy::Sorted,
                ScheduleArg::Adaptive => Strategy::Adaptive,
            },
            tiles: self.tiles,
            steal: self.steal == OnOff::On,
            devices: match &self.devices {
                Some(list) => DeviceSpec::parse_list(list)?,
                None => vec![DeviceSpec::Cpu { workers: None }],
            },
            pass_spp: self.pass_spp,
            costmap_scale: self.costmap_scale,
            calibrate: self.calibrate == OnOff::On,
            slow_worker_pieces: self.slow_worker_pieces,
            on_worker_error: match self.on_worker_error {
                WorkerErrorArg::Retire => crate::sched::OnWorkerError::Retire,
                WorkerErrorArg::Stop => crate::sched::OnWorkerError::Stop,
            },
            ..SchedConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec3_parsing() {
        assert_eq!(parse_vec3("1, -2,3.5").unwrap(), Vec3::new(1.0, -2.0, 3.5));
        assert!(parse_vec3("1,2").is_err());
        assert!(parse_vec3("1,x,2").is_err());
        assert!(parse_vec3("1,inf,2").is_err());
    }

    #[test]
    fn duration_parsing() {
        let secs = |s: &str| parse_duration(s).map(|d| d.as_secs_f64());
        assert_eq!(secs("600"), Ok(600.0));
        assert_eq!(secs("90s"), Ok(90.0));
        assert_eq!(secs("1.5m"), Ok(90.0));
        assert_eq!(secs(" 2h "), Ok(7200.0));
        for bad in ["", "m", "0", "-5m", "10d", "nan", "inf", "1e12h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn options_come_from_the_cli() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            accel: AccelArgs,
        }
        let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap().accel;
        let args = parse(&[
            "t",
            "--streams",
            "4",
            "--fast-build",
            "--assign",
            "lpt",
            "--scratch",
            "per-stream",
            "--compact",
            "--merge-below",
            "100",
            "--validation",
            "--optix-abi",
            "87",
        ]);
        let o = args.optix_options().unwrap();
        assert_eq!(o.device, 0);
        assert!(o.context.validation);
        assert_eq!(
            o.context.abi,
            crate::optix::AbiRequest::Exactly(crate::optix::sys::Abi::V87)
        );
        assert_eq!(o.accel.streams, 4);
        assert!(o.accel.fast_build && o.accel.compact);
        assert_eq!(o.accel.merge.merge_below, 100);
        assert_eq!(o.accel.lpt_build_weight, DEFAULT_LPT_BUILD_WEIGHT);
        // The defaults are the measured ones (docs/gas-builds.md).
        let d = parse(&["t"]).accel_options();
        assert_eq!(d.merge.merge_below, DEFAULT_MERGE_BELOW);
        assert_eq!(d.assign, Assign::RoundRobin);
        assert_eq!(d.streams, 8);
        assert_eq!(
            parse(&["t", "--lpt-build-weight", "5"])
                .accel_options()
                .lpt_build_weight,
            5
        );
        let bad = AccelArgs {
            optix_abi: Some(42),
            ..args
        };
        assert!(matches!(
            bad.optix_options(),
            Err(OptixError::UnsupportedAbiRequest { requested: 42 })
        ));
    }
}
