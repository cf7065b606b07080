//! What a render is asked to do: [`RenderOptions`], plain data that the command line fills
//! from its flags (and a program from its own), checked here before anything is loaded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::BackendChoice;
use crate::console::Verbosity;
use crate::cpu::aov::Aov;
use crate::optix::accel::AccelOptions;
use crate::optix::pathtracer::OptixOptions;
use crate::optix::plan::{MergeOptions, DEFAULT_MERGE_BELOW};
use crate::optix::ContextOptions;
use crate::render::checkpoint::{self, PngTone};
use crate::render::{output, Tile};
use crate::scene::camera::CameraChoice;
use crate::scene::PixelFilter;
use crate::sched::adaptive_sampling::{AdaptiveSampling, BLOCK};
use crate::sched::progress::ProgressMode;
use crate::sched::{window, DeviceSpec, SchedConfig};

/// One frame's render, end to end: the scene, the image, the samples and the camera, the
/// backend and the schedule, and what happens around the frame (resume, checkpoints, time
/// limit, adaptive sampling, guide layers, statistics).
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// The scene, a Wavefront OBJ file.
    pub scene: PathBuf,
    /// The image: `.png` (tone-mapped sRGB), `.webp` (the same, lossless) or `.exr` (linear).
    pub output: PathBuf,
    pub width: u32,
    pub height: u32,
    /// Samples per pixel.
    pub spp: u32,
    /// Longest path, in segments from the camera.
    pub max_depth: u32,
    /// Seed of the random numbers: the image is a pure function of scene, settings and seed.
    pub seed: u64,
    pub backend: BackendChoice,
    /// CPU threads; `None`: every core (under MPI, a rank's share of its node's cores).
    pub threads: Option<usize>,
    pub environment: EnvironmentOptions,
    /// Area lights emit from both faces (default: the front face only).
    pub two_sided_lights: bool,
    /// How a PNG or WebP shows the radiance.
    pub tone: PngTone,
    pub filter: PixelFilter,
    /// The camera: values given, each falling back to the scene's own, else to framing.
    pub camera: CameraChoice,
    pub lens: LensOptions,
    /// Guide layers written beside the image, and the samples per pixel they average.
    pub aovs: Vec<Aov>,
    pub aov_spp: u32,
    /// Render only these pixels of the image (a crop that `gasworks merge` joins).
    pub pixelbounds: Option<Tile>,
    /// The resume file of an earlier, stopped render of this frame to finish.
    pub resume: Option<PathBuf>,
    /// Write a checkpoint at most this often.
    pub checkpoint_every: Option<Duration>,
    /// Finish by this long after the render started: passes that would end later are not
    /// started.
    pub time_limit: Option<Duration>,
    /// Adaptive sampling: blocks whose noise is at or below this take no more samples.
    pub noise_threshold: Option<f32>,
    /// With `noise_threshold`: no block stops before this many samples per pixel.
    pub min_spp: Option<u32>,
    /// How the tiles are cut and shared; its `devices` are replaced by [`Self::devices`].
    pub schedule: SchedConfig,
    /// The workers (`--devices`); `None`: the backend's own (two launch streams on GPU 0, or
    /// a thread per core).
    pub devices: Option<Vec<DeviceSpec>>,
    /// The scheduling statistics CSV (and its siblings), and the folder of cost-map pictures.
    pub stats: Option<PathBuf>,
    pub costmap_pictures: Option<PathBuf>,
    /// The OptiX backend's options (GPU 0, the GAS builds).
    pub optix: OptixOptions,
    pub progress: ProgressMode,
    pub verbosity: Verbosity,
    /// Among ranks: how long one may stay silent before it is taken for dead or hung
    /// (`None`: 30 s).
    pub rank_timeout: Option<Duration>,
    /// Under mpirun: each rank holds part of the geometry, and rays travel to it
    /// (`crate::cluster::geometry`).
    pub distribute_geometry: bool,
    /// With `distribute_geometry`: the share of the scene's group bytes that the groups used
    /// most may take on every rank (`crate::cluster::geometry::replicate`).
    pub replicate: Option<f64>,
    /// With `distribute_geometry` and `camera_path`: between frames, move cells of the domains
    /// between ranks to cut the last frame's traffic, at most this share of the scene's group
    /// bytes a frame (`crate::cluster::geometry::reassign`).
    pub reassign: Option<f64>,
    /// A camera path (`crate::scene::camera_path`): a sequence of frames, one per row, each
    /// written where `output`'s run of `#` gives its number ([`sequence`](super::sequence)).
    pub camera_path: Option<PathBuf>,
    /// With `camera_path`: go on from the first frame whose image is not complete, that frame
    /// from its resume file if it left one.
    pub continue_sequence: bool,
}

/// The light arriving from outside the scene.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvironmentOptions {
    /// A uniform radiance (replaces the default sky of emitter-less scenes).
    pub radiance: Option<glam::Vec3>,
    /// A latitude-longitude map of linear radiance (.exr or .hdr), turned about the up axis
    /// by `rotate_deg` and scaled by `scale`.
    pub map: Option<PathBuf>,
    pub rotate_deg: f32,
    pub scale: f32,
    /// The share of light samples that go to the map in a scene with area lights too.
    pub share: EnvShare,
}

/// The share of light samples for the environment map: measured by short paths through the
/// frame before the render, or given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum EnvShare {
    #[default]
    Auto,
    Fixed(f32),
}

/// Depth of field: a thin lens of `radius` (none: the scene's, else a pinhole), focused at
/// `focus_distance` along the view direction or on the plane through `focus_on` (default: the
/// look-at point's distance).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LensOptions {
    pub radius: Option<f32>,
    pub focus_distance: Option<f32>,
    pub focus_on: Option<glam::Vec3>,
}

impl RenderOptions {
    /// A render of `scene` into `output` with every other option at `gasworks render`'s
    /// default: 512x512, 64 samples per pixel, paths of at most 8 segments, seed 0, the GPU
    /// backend where one can be used (else the CPU's), the scene's own camera, one pass, the
    /// `sorted` schedule with stealing, and the workers the backend gives.
    pub fn new(scene: impl Into<PathBuf>, output: impl Into<PathBuf>) -> RenderOptions {
        let accel = AccelOptions {
            merge: MergeOptions::new(DEFAULT_MERGE_BELOW),
            ..AccelOptions::default()
        };
        let accel = AccelOptions {
            contexts: accel.suited_contexts(),
            ..accel
        };
        RenderOptions {
            scene: scene.into(),
            output: output.into(),
            width: 512,
            height: 512,
            spp: 64,
            max_depth: 8,
            seed: 0,
            backend: BackendChoice::Auto,
            threads: None,
            environment: EnvironmentOptions {
                scale: 1.0,
                ..EnvironmentOptions::default()
            },
            two_sided_lights: false,
            tone: PngTone::default(),
            filter: PixelFilter::Box,
            camera: CameraChoice::default(),
            lens: LensOptions::default(),
            aovs: Vec::new(),
            aov_spp: 16,
            pixelbounds: None,
            resume: None,
            checkpoint_every: None,
            time_limit: None,
            noise_threshold: None,
            min_spp: None,
            schedule: SchedConfig::default(),
            devices: None,
            stats: None,
            costmap_pictures: None,
            optix: OptixOptions {
                device: 0,
                context: ContextOptions::default(),
                accel,
            },
            progress: ProgressMode::default(),
            verbosity: Verbosity::Normal,
            rank_timeout: None,
            distribute_geometry: false,
            replicate: None,
            reassign: None,
            camera_path: None,
            continue_sequence: false,
        }
    }

    /// `--time-limit` stops between passes and `--noise-threshold` decides between them, and
    /// without a pass size a render is one pass: then the passes are [`chosen_pass_spp`]'s,
    /// a pure function of the samples, so that the same command with `--resume` finds the
    /// same passes in the resume file's key. Returns whether the size was chosen here.
    pub fn choose_passes(&mut self) -> bool {
        let wanted = self.time_limit.is_some() || self.noise_threshold.is_some();
        if wanted && self.schedule.pass_spp.is_none() {
            self.schedule.pass_spp = Some(chosen_pass_spp(self.spp));
            return true;
        }
        false
    }

    /// The checks of the numbers (at most 32768 pixels a side) and the tone mapping, before
    /// anything is loaded.
    pub fn check(&self) -> anyhow::Result<()> {
        crate::render::check_image_size(self.width, self.height, self.spp)
            .map_err(|e| anyhow::anyhow!("--width/--height/--spp: {e}"))?;
        if self.max_depth == 0 {
            anyhow::bail!("--max-depth must be at least 1");
        }
        output::check_exposure(self.tone.exposure, &self.output).map_err(anyhow::Error::msg)?;
        output::check_tonemap(self.tone.tonemap, &self.output).map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// The part of the image rendered, in pixels of the whole.
    pub fn window(&self) -> anyhow::Result<Tile> {
        Ok(window::resolve(self.pixelbounds, self.width, self.height)?)
    }

    /// The resume file this render writes, beside its image.
    pub fn resume_file(&self) -> PathBuf {
        checkpoint::path_for(&self.output)
    }

    /// The scheduler's configuration: the schedule, the crop, the devices given (else `cpu`,
    /// which the backend may replace) and adaptive sampling, checked against the passes and
    /// the crop.
    pub fn schedule_config(&self) -> anyhow::Result<SchedConfig> {
        let mut schedule = self.schedule.clone();
        schedule.window = self.pixelbounds;
        schedule.devices = match &self.devices {
            Some(d) => d.clone(),
            None => vec![DeviceSpec::Cpu { workers: None }],
        };
        schedule.validate()?;
        if let Some(threshold) = self.noise_threshold {
            let adaptive = AdaptiveSampling {
                threshold,
                // An EXR's tone is the default (its exposure and curve are refused).
                tone: self.tone,
                min_spp: self.min_spp.unwrap_or(0),
            };
            adaptive.validate(&schedule.passes(self.spp), self.spp)?;
            if let Some(crop) = self.pixelbounds {
                check_crop_on_block_grid(crop, self.width, self.height)?;
            }
            schedule.adaptive_sampling = Some(adaptive);
        }
        Ok(schedule)
    }

    /// The end of `--time-limit` for the passes, counted from `started`: the limit less what
    /// writing the outputs of the window is expected to take once the last pass has ended
    /// ([`output_write_reserve`]; each guide layer, 12 bytes a pixel, counted as one more
    /// image).
    pub fn pass_deadline(&self, started: std::time::Instant) -> Option<std::time::Instant> {
        let window = self.window().ok()?;
        let pixels = u64::from(window.w) * u64::from(window.h);
        let images = 1 + self.aovs.len() as u64;
        self.time_limit
            .map(|limit| started + limit.saturating_sub(output_write_reserve(pixels * images)))
    }

    /// The files written beside the image: the guide layers, checked to be writable.
    pub fn check_aov_paths(&self) -> anyhow::Result<()> {
        for &aov in &self.aovs {
            output::check_writable(&aov_path(&self.output, aov))?;
        }
        Ok(())
    }

    /// Checks the `--stats` files and the `--costmap` folder before the render, as the image
    /// is checked: writable, and none of them the scene, the image or a resume file.
    pub fn check_report_paths(&self) -> anyhow::Result<()> {
        let resume_file = self.resume_file();
        let mut taken: Vec<(&str, &Path)> = vec![
            ("the scene", &self.scene),
            ("the output image", &self.output),
            ("the output's resume file", &resume_file),
        ];
        if let Some(r) = &self.resume {
            taken.push(("the --resume file", r));
        }
        if let Some(stats) = &self.stats {
            let (tiles, map) = crate::sched::report::sibling_paths(stats);
            // The headers of the three files --stats writes (sched::report): an earlier run's
            // files are replaced, nothing else.
            let ours = ["pass,spp_from,", "pass,task,", "x,y,cost"];
            for p in [stats.as_path(), &tiles, &map] {
                crate::render::paths::check_side_file("--stats", p, &taken, &ours)?;
            }
        }
        if let Some(dir) = &self.costmap_pictures {
            crate::render::paths::check_side_folder("--costmap", dir)?;
        }
        Ok(())
    }
}

/// Where the guide layer `aov` of the image `output` goes: beside it, its name with the
/// layer's before `.exr` (`cornell.png` -> `cornell.albedo.exr`).
pub fn aov_path(output: &Path, aov: Aov) -> PathBuf {
    let stem = output.file_stem().unwrap_or_default().to_string_lossy();
    output.with_file_name(format!("{stem}.{}.exr", aov.name()))
}

/// A crop of an adaptive render must start and end on the frame's block grid (or at its
/// edge): a block cut by the crop would be judged on its part alone, unlike the frame's, and
/// the crops would not merge into the frame's image.
fn check_crop_on_block_grid(crop: Tile, width: u32, height: u32) -> anyhow::Result<()> {
    let on_grid = |v: u32, edge: u32| v % BLOCK == 0 || v == edge;
    let (x1, y1) = (crop.x + crop.w, crop.y + crop.h);
    if on_grid(crop.x, width)
        && on_grid(x1, width)
        && on_grid(crop.y, height)
        && on_grid(y1, height)
    {
        return Ok(());
    }
    let down = |v: u32| v / BLOCK * BLOCK;
    let up = |v: u32, edge: u32| v.div_ceil(BLOCK).saturating_mul(BLOCK).min(edge);
    anyhow::bail!(
        "--noise-threshold judges the frame's {BLOCK}x{BLOCK}-pixel blocks, so a crop must start and end on multiples of {BLOCK} (or at the frame's edge) to merge into the frame's image: --pixelbounds {} does not (the blocks around it: --pixelbounds {},{},{},{})",
        window::pbrt_bounds(crop),
        down(crop.x),
        up(x1, width),
        down(crop.y),
        up(y1, height)
    )
}

/// The pass size of a render with a time limit or a noise threshold and no pass size: about
/// 16 passes, so that the time a stop leaves unused (at most one pass) is about a sixteenth of
/// the render's, and a block of adaptive sampling can stop at any sixteenth; in passes of a
/// power of two samples, each of which the scrambled Sobol' numbers stratify.
pub fn chosen_pass_spp(spp: u32) -> u32 {
    let target = (spp / 16).max(1);
    1 << (31 - target.leading_zeros())
}

/// What a time limit keeps for writing the outputs after the last pass: the image and the
/// resume file, at most 16 bytes a pixel each (an EXR's float channels, the film's sums),
/// written at an assumed 100 MB/s (a busy network file system), plus a second for encoding,
/// syncing and renaming. A 4K frame keeps 3.7 s, a 512x512 one 1.1 s.
pub fn output_write_reserve(pixels: u64) -> Duration {
    const BYTES_PER_PIXEL: f64 = 32.0;
    const BYTES_PER_SECOND: f64 = 100e6;
    Duration::from_secs_f64(1.0 + pixels as f64 * BYTES_PER_PIXEL / BYTES_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

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
