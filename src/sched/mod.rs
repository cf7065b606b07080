//! The cost map and the tile scheduler: spreads a frame's tiles over CPU and GPU workers, in
//! one process or over the ranks of a cluster.
//!
//! A frame goes:
//! 1. [`raster`]: the scene is rasterized into a G-buffer at a fraction of the image size;
//! 2. [`costmap`]: the paper's Algorithm 1 turns it into a per-pixel cost estimate, and
//!    [`sat`] into a summed-area table, so that any tile's cost is four lookups;
//! 3. `master`: rank 0 plans each pass: the image is cut ([`tiles`]: equal tiles, or the kd
//!    split of the SAT) and [`policy`] gives each worker of every rank a contiguous run of
//!    tiles as its deque;
//! 4. [`workers`]: one thread per worker renders tiles from its deque and steals from the
//!    cheap end of others' when it runs dry ([`workers::worker_loop`]); a rank whose deques
//!    are empty asks another rank for tiles ([`rank_policy`]);
//! 5. with progressive passes (`--pass-spp`), every pass after the first is planned with the
//!    measured tile times of the pass before (the estimate scaled tile by tile, and worker
//!    groups weighted by their measured speed, alike groups as one: [`speed_classes`]);
//! 6. [`report`], [`accuracy`], [`pictures`]: statistics, the cost map's accuracy, pictures.
//!
//! A frame runs as ranks ([`rank`]) that differ only in their [`transport`]: one process
//! rendering alone is rank 0 of one ([`transport::Alone`], [`render_frame_until`]); under
//! MPI every process is a rank (`crate::cluster`). The ranks exchange the messages of
//! [`protocol`]; rank 0's own go to itself without a transport. The pass planning, the worker
//! loop, stealing, calibration and retirement are the same code either way, and [`sim`]
//! replays measured costs through the same policies for simulated workers and ranks
//! (`gasworks schedule-sim`).
//!
//! Workers of different devices (a GPU beside CPU threads) are not equally fast, and the first
//! pass has no measured speeds: [`calibrate`] times a small piece on one worker of each device
//! before it, so that the first pass's shares and its steals follow the workers' speeds too
//! (a thief takes a tile only if it would finish it before its owner, [`policy::steal_pays`]).
//! Tiles sized for a GPU are too big for a CPU thread a hundred times slower, so once the
//! speeds are known the slow workers' shares are cut into pieces they can finish
//! ([`tiles::cut_for_slow_workers`]).
//!
//! A tile's pass starts from the film's sums for its pixels and adds that pass's samples in
//! order, and passes run one after another, so every pixel receives the same additions in
//! the same order whatever the tiling, the worker count, the ranks or who stole what: the
//! image is bit-identical under every schedule.

pub mod accuracy;
pub mod adaptive_sampling;
pub mod calibrate;
pub mod correction_replay;
pub mod costmap;
pub mod cputime;
pub mod fault;
mod holdings;
pub mod job;
pub mod link;
mod master;
pub mod pictures;
pub mod policy;
pub mod progress;
pub mod protocol;
pub mod rank;
pub mod rank_policy;
pub mod rank_report;
pub mod ranks;
pub mod raster;
pub mod report;
pub mod sat;
pub mod sim;
pub mod speed_classes;
pub mod temporal;
pub mod tiles;
pub mod transport;
pub mod window;
pub mod wire;
pub mod workers;

use std::ops::Range;
use std::sync::atomic::AtomicU8;
use std::time::Instant;

use crate::render::{Film, RenderSettings, Tile};
use crate::scene::Scene;
use costmap::{CostMap, CostModel};
pub use job::{Discard, FrameError, FrameJob, FrameSink, PlanInputs, RankSetup, Timing};
pub use rank::run_rank;
use report::{FrameReport, PassReport};
use sat::MapScale;
pub use tiles::Strategy;
pub use transport::{Alone, ChannelTransport, Transport, TransportError};
pub use workers::{CpuOnlyFactory, DeviceSpec, OnWorkerError, RendererFactory, Retirement, Worker};

/// How a frame is scheduled.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedConfig {
    pub strategy: Strategy,
    /// Requested tile count (a power of two is used for `adaptive`); `None`: about 64 x 64-pixel
    /// tiles, fewer and larger when GPU workers want a launch's worth of work per tile
    /// ([`tiles::tile_count_for_work`]).
    pub tiles: Option<u32>,
    pub steal: bool,
    pub devices: Vec<DeviceSpec>,
    /// Samples per pixel of each pass; `None`: all samples in one pass.
    pub pass_spp: Option<u32>,
    /// Cost-map resolution as a fraction of the image's, per axis.
    pub costmap_scale: f32,
    pub cost_model: CostModel,
    /// The part of the image to render (`--pixelbounds`), in pixels of the whole image;
    /// `None`: all of it. The film, the cost map and the tiles cover the window only (see
    /// [`window`]).
    pub window: Option<Tile>,
    /// Time one worker of each device before the first pass when the workers come from more
    /// than one device ([`calibrate`]), so that the first pass is planned by speed.
    pub calibrate: bool,
    /// Once the workers' speeds are known (calibrated or measured), the tiles that the shares of
    /// much slower workers hold are cut into about this many pieces per such worker, so that a
    /// CPU thread beside a GPU gets tiles it can finish ([`tiles::cut_for_slow_workers`]); 0
    /// leaves the tiles as laid out.
    pub slow_worker_pieces: u32,
    /// What a renderer error does: retire its worker and go on with the others (the default),
    /// or end the frame (`--on-worker-error`).
    pub on_worker_error: OnWorkerError,
    /// Adaptive sampling (`--noise-threshold`): from the third pass on, only the blocks whose
    /// noise is still above the threshold are rendered ([`adaptive_sampling`]); `None`: every pixel
    /// gets every sample.
    pub adaptive_sampling: Option<adaptive_sampling::AdaptiveSampling>,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            strategy: Strategy::Sorted,
            tiles: None,
            steal: true,
            devices: vec![DeviceSpec::Cpu { workers: None }],
            pass_spp: None,
            costmap_scale: 0.25,
            cost_model: CostModel::default(),
            window: None,
            calibrate: true,
            slow_worker_pieces: tiles::DEFAULT_SLOW_WORKER_PIECES,
            on_worker_error: OnWorkerError::default(),
            adaptive_sampling: None,
        }
    }
}

/// Why a schedule cannot be run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("--costmap-scale must be in (0, 1], got {0}")]
    CostmapScale(f32),
    #[error("--pass-spp must be at least 1")]
    PassSpp,
    #[error("--tiles must be at least 1")]
    Tiles,
    #[error("--devices gives no worker")]
    NoWorkers,
}

impl SchedConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.costmap_scale > 0.0 && self.costmap_scale <= 1.0) {
            return Err(ConfigError::CostmapScale(self.costmap_scale));
        }
        if self.pass_spp == Some(0) {
            return Err(ConfigError::PassSpp);
        }
        if self.tiles == Some(0) {
            return Err(ConfigError::Tiles);
        }
        // Every entry stands for at least one worker. (Not counted here: counting `cpu`
        // would start rayon's global pool before the CLI has sized it.)
        if self.devices.is_empty() {
            return Err(ConfigError::NoWorkers);
        }
        Ok(())
    }

    /// The sample ranges of the passes.
    pub fn passes(&self, spp: u32) -> Vec<Range<u32>> {
        pass_ranges(self.pass_spp.unwrap_or(spp), spp)
    }
}

/// A rendered frame and how it was scheduled.
pub struct Frame {
    pub film: Film,
    /// The passes this run completed (an interrupted pass is left out, see `stopped`; a
    /// resumed frame's earlier passes were another run's).
    pub report: FrameReport,
    /// Set when a stop request ended the frame early: the film then holds what was rendered.
    pub stopped: Option<Stopped>,
}

impl Frame {
    /// Where a stopped frame can be continued from: its film (the complete passes, and the
    /// interrupted pass's samples in the pixels its finished tiles cover) and the samples per
    /// pixel of its complete passes. `None` for a frame that ran to the end or rendered nothing.
    pub fn resume_point(&self) -> Option<Resume> {
        self.resume_film().map(|(film, spp_done)| Resume {
            film: film.clone(),
            spp_done,
        })
    }

    /// [`Frame::resume_point`] without copying the film (a 4K film is 130 MB): the film to
    /// write into a resume file, and the samples per pixel of its complete passes.
    pub fn resume_film(&self) -> Option<(&Film, u32)> {
        let stopped = self.stopped.as_ref().filter(|s| s.resumable())?;
        stopped
            .rendered_any()
            .then_some((&self.film, stopped.spp_complete))
    }
}

/// Where a resumed render goes on: the first pass it renders, and the pixels that a stop
/// inside that pass had given its samples already, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeStart {
    pub first_pass: usize,
    pub ahead: Option<Ahead>,
}

/// The pixels of a resumed film that already have the first pass it renders (a stop inside
/// that pass had finished their tiles): that pass is rendered only in the others, and, as it
/// covers part of the image, its measured costs do not correct the cost map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// The pass's end: the samples per pixel those pixels hold.
    pub end: u32,
    /// How many pixels.
    pub pixels: usize,
}

impl Ahead {
    /// Whether the pixel of `film` at (`x`, `y`) has the pass.
    pub fn has_pass(&self, film: &Film, x: u32, y: u32) -> bool {
        film.pixels[(y * film.width + x) as usize][3] == self.end as f32
    }
}

/// Checks a resume point against the pass plan `passes` of a render of `spp` samples per
/// pixel and says where the render goes on. Every pixel of the film must hold the samples of
/// the complete passes (`resume.spp_done`, a pass boundary of the plan) or those and the next
/// pass's: a stop inside a pass keeps the tiles that were finished. A film whose every pixel
/// has the next pass is at the boundary after it. With adaptive sampling (`adaptive`: its
/// settings and the film's window in the frame) a pixel may hold fewer, at an earlier pass
/// boundary: its block had stopped there; and a film in which every block that renders the
/// next pass has it everywhere is at the boundary after it too.
pub fn resume_start(
    passes: &[Range<u32>],
    spp: u32,
    resume: &Resume,
    adaptive_sampling: Option<(&adaptive_sampling::AdaptiveSampling, Tile)>,
) -> anyhow::Result<ResumeStart> {
    let adaptive = adaptive_sampling.is_some();
    let done = resume.spp_done;
    let first = match passes.iter().position(|p| p.start == done) {
        Some(i) => i,
        None if done == spp => passes.len(),
        None => anyhow::bail!(
            "the render to resume stopped after {done} samples per pixel, which is not where a pass of this render starts (passes of {} samples)",
            passes.first().map_or(spp, |p| p.end - p.start)
        ),
    };
    let end = passes.get(first).map_or(done, |p| p.end);
    // Where a block may have stopped: the boundaries of the passes before `first`.
    let stopped_at = |n: f32| adaptive && passes[..first].iter().any(|p| p.start as f32 == n);
    if adaptive && !resume.film.has_odd_plane() {
        anyhow::bail!(
            "the render to resume has no odd-pass plane, which adaptive sampling judges the noise by"
        );
    }
    let width = resume.film.width.max(1) as usize;
    let (mut ahead, mut at_done) = (0usize, 0usize);
    for (i, p) in resume.film.pixels.iter().enumerate() {
        if p[3] == end as f32 && end != done {
            ahead += 1;
        } else if p[3] == done as f32 {
            at_done += 1;
        } else if !stopped_at(p[3]) {
            anyhow::bail!(
                "pixel ({}, {}) of the render to resume holds {} samples, where its complete passes give {done}{}{}",
                i % width,
                i / width,
                p[3],
                if end != done {
                    format!(" and the pass it stopped in {end}")
                } else {
                    String::new()
                },
                if adaptive {
                    " (or a pass boundary before, where its block stopped)"
                } else {
                    ""
                }
            );
        }
    }
    let at_boundary = |first_pass| ResumeStart {
        first_pass,
        ahead: None,
    };
    // Adaptive sampling: the pixels at the boundary may all lie in blocks that stop there.
    let pass_done = || {
        adaptive_sampling.is_some_and(|(a, window)| {
            let mask = adaptive_sampling::BlockMask::judge(&resume.film, window, passes, first, a);
            let width = resume.film.width.max(1) as usize;
            !resume.film.pixels.iter().enumerate().any(|(i, p)| {
                p[3] == done as f32 && mask.is_active((i % width) as u32, (i / width) as u32)
            })
        })
    };
    Ok(if ahead == 0 {
        at_boundary(first)
    } else if at_done == 0 || pass_done() {
        at_boundary(first + 1)
    } else {
        ResumeStart {
            first_pass: first,
            ahead: Some(Ahead { end, pixels: ahead }),
        }
    })
}

/// The sample ranges of passes of `pass_spp` samples per pixel (the last may be shorter) over
/// `spp` samples per pixel.
pub fn pass_ranges(pass_spp: u32, spp: u32) -> Vec<Range<u32>> {
    let step = pass_spp.max(1);
    (0..spp)
        .step_by(step as usize)
        .map(|s| s..(s + step).min(spp))
        .collect()
}

/// A render to continue: the film after its first `spp_done` samples per pixel, at a pass
/// boundary of the same pass plan, and with the next pass's samples too in the pixels that a
/// stop inside that pass had reached ([`resume_start`]). The passes from there add their
/// samples in the order an uninterrupted render would (the next pass only where it is
/// missing), so the finished film is bit-identical to one.
#[derive(Clone, Debug, PartialEq)]
pub struct Resume {
    pub film: Film,
    pub spp_done: u32,
}

impl Resume {
    /// The samples the film holds, over all its pixels: what a resumed run did not render.
    pub fn samples(&self) -> f64 {
        self.film.pixels.iter().map(|p| f64::from(p[3])).sum()
    }
}

/// How far a stopped frame got. Every pixel has the samples of the complete passes; the tiles
/// of the interrupted pass that were rendered have that pass's samples too; a pixel no sample
/// reached is black.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Samples per pixel of the complete passes (`0..spp_complete`).
    pub spp_complete: u32,
    /// The pass the stop interrupted; `None` when the stop came between passes.
    pub partial: Option<PartialPass>,
    /// Stopped by [`FrameControl::deadline`] (between passes: the image is whole), not by a
    /// stop request.
    pub at_time_limit: bool,
    /// With adaptive sampling: the blocks that had stopped below the noise threshold (and so
    /// hold fewer samples than `spp_complete`), of all blocks; `None` without.
    pub stopped_blocks: Option<(usize, usize)>,
    /// Among several ranks: the pixels held by ranks that did not send them (a rank dead
    /// or hung). They keep what the film last gathered had (zeros before any).
    pub lost: Option<LostPixels>,
}

/// Pixels whose sums were lost with the ranks that held them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostPixels {
    pub ranks: Vec<usize>,
    pub pixels: usize,
    /// Whether they hold the samples of the complete passes all the same (lost in the first
    /// pass, or in the pass after a checkpoint's boundary): the film is still a point to
    /// resume from, and resuming renders them again.
    pub resumable: bool,
}

/// The pass a stop interrupted: its samples reached `tiles_done` of its `tiles` tiles, and
/// `carried_pixels` pixels more that an earlier run, stopped inside the same pass, had
/// finished (0 unless this run was resumed from such a stop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialPass {
    pub samples: Range<u32>,
    pub tiles_done: usize,
    pub tiles: usize,
    pub carried_pixels: usize,
}

impl Stopped {
    /// Whether the film is a point to resume from: no pixels were lost with a rank, or those
    /// lost hold the complete passes' samples all the same.
    pub fn resumable(&self) -> bool {
        self.lost.as_ref().is_none_or(|l| l.resumable)
    }

    /// Whether any sample reached the film.
    pub fn rendered_any(&self) -> bool {
        self.spp_complete > 0
            || self
                .partial
                .as_ref()
                .is_some_and(|p| p.tiles_done > 0 || p.carried_pixels > 0)
    }

    /// "16 of 64 samples per pixel everywhere, and samples 16..32 in 30 of 64 tiles";
    /// "samples 0..64 in 32 of 64 tiles; the other tiles are black"; a resumed run stopped
    /// before its first tile: "samples 0..64 in the 300 pixels an earlier run finished; the
    /// other pixels are black".
    /// A pass stopped before any of its samples reached the film is not named; one stopped
    /// after all its tiles did (a cluster's rank 0 may stop there) is described as complete.
    /// With adaptive sampling, "everywhere" gives way to the blocks that had stopped: "16 of
    /// 64 samples per pixel, at most that in the 3 of 8 blocks that had met the noise
    /// threshold" (a block stopped at this boundary holds its samples, one stopped earlier
    /// fewer).
    pub fn describe(&self, spp: u32) -> String {
        let lost = self.lost.as_ref().map_or_else(String::new, |l| {
            let ranks: Vec<String> = l.ranks.iter().map(usize::to_string).collect();
            format!(
                "; the {} pixels rank{} {} held were lost with {}: they hold what the last film \
                 gathered from the ranks had (a checkpoint's), or nothing",
                l.pixels,
                if l.ranks.len() == 1 { "" } else { "s" },
                ranks.join(", "),
                if l.ranks.len() == 1 { "it" } else { "them" },
            )
        });
        self.describe_kept(spp) + &lost
    }

    /// [`Stopped::describe`] of the pixels that were kept.
    fn describe_kept(&self, spp: u32) -> String {
        let everywhere = |done: u32| match self.stopped_blocks {
            Some((stopped, blocks)) if stopped > 0 => format!(
                "{done} of {spp} samples per pixel, at most that in the {stopped} of {blocks} \
                 blocks that had met the noise threshold"
            ),
            _ => format!("{done} of {spp} samples per pixel everywhere"),
        };
        let partial = self
            .partial
            .as_ref()
            .filter(|p| p.tiles_done > 0 || p.carried_pixels > 0);
        let Some(p) = partial else {
            return everywhere(self.spp_complete);
        };
        if p.tiles > 0 && p.tiles_done >= p.tiles {
            return everywhere(p.samples.end);
        }
        // Where the stopped pass's samples are, and what the rest of the image is.
        let (where_, rest) = match (p.tiles_done, p.carried_pixels) {
            (done, 0) => (format!("{done} of {} tiles", p.tiles), "tiles"),
            (0, n) => (format!("the {n} pixels an earlier run finished"), "pixels"),
            (done, n) => (
                format!(
                    "{done} of {} tiles and {n} pixels an earlier run finished",
                    p.tiles
                ),
                "tiles",
            ),
        };
        let (start, end) = (p.samples.start, p.samples.end);
        match self.spp_complete {
            0 => format!("samples {start}..{end} in {where_}; the other {rest} are black"),
            done => format!(
                "{}, and samples {start}..{end} in {where_}",
                everywhere(done)
            ),
        }
    }
}

/// The cost map's resolution for an image.
pub fn costmap_size(width: u32, height: u32, scale: f32) -> (usize, usize) {
    let s = |v: u32| ((v as f64 * scale as f64).round() as usize).clamp(1, v.max(1) as usize);
    (s(width), s(height))
}

/// Rasterizes the scene and estimates its cost map at `config`'s resolution, over `window`
/// (the whole image, or the `--pixelbounds` crop).
pub fn estimate_costmap(
    scene: &Scene,
    settings: &RenderSettings,
    config: &SchedConfig,
    window: Tile,
) -> (CostMap, raster::RasterStats, costmap::EstimateStats) {
    let (cw, ch) = costmap_size(window.w, window.h, config.costmap_scale);
    let (gbuf, raster_stats) = raster::rasterize_window(scene, &settings.camera, window, cw, ch);
    let (map, est_stats) = costmap::estimate(&gbuf, scene, &config.cost_model, settings.max_depth);
    (map, raster_stats, est_stats)
}

/// A cost map estimated before the frame, for [`FrameControl::estimate`]: a render rasterizes
/// the scene on another thread while the backend is set up, since on a GPU the raster can
/// take longer than the frame itself (docs/guide/workers.md). It remembers what it was made
/// for, so that a frame of other settings estimates its own.
pub struct PreparedEstimate {
    key: EstimateKey,
    map: CostMap,
    raster: raster::RasterStats,
    stats: costmap::EstimateStats,
}

/// Everything [`estimate_costmap`] reads: the scene (by address: the same one, loaded once),
/// the camera and image, the window, the map's scale and the cost model.
#[derive(Clone, Debug, PartialEq)]
struct EstimateKey {
    scene: usize,
    camera: crate::scene::camera::CameraFrame,
    image: (u32, u32),
    max_depth: u32,
    window: Tile,
    costmap_scale: f32,
    cost_model: CostModel,
}

impl EstimateKey {
    fn of(scene: &Scene, settings: &RenderSettings, config: &SchedConfig, window: Tile) -> Self {
        EstimateKey {
            scene: scene as *const Scene as usize,
            camera: settings.camera,
            image: (settings.width, settings.height),
            max_depth: settings.max_depth,
            window,
            costmap_scale: config.costmap_scale,
            cost_model: config.cost_model.clone(),
        }
    }
}

impl PreparedEstimate {
    /// The cost map of the frame `scene`, `settings` and `config` describe (its window, or the
    /// whole image), as [`render_frame_until`] would estimate it.
    pub fn new(
        scene: &Scene,
        settings: &RenderSettings,
        config: &SchedConfig,
    ) -> anyhow::Result<PreparedEstimate> {
        let window = window::resolve(config.window, settings.width, settings.height)?;
        let (map, raster, stats) = estimate_costmap(scene, settings, config, window);
        Ok(PreparedEstimate {
            key: EstimateKey::of(scene, settings, config, window),
            map,
            raster,
            stats,
        })
    }

    /// The map and its statistics, as [`estimate_costmap`] returns them.
    pub fn into_parts(self) -> (CostMap, raster::RasterStats, costmap::EstimateStats) {
        (self.map, self.raster, self.stats)
    }
}

/// Renders a frame (or its `config.window`): the cost map, then each pass over the tiles on
/// the workers of `config.devices`, renderers from `factory`. `quiet` hides the progress bar
/// (it is also hidden when stderr is not a terminal). The film is the window's size.
pub fn render_frame(
    scene: &Scene,
    settings: &RenderSettings,
    config: &SchedConfig,
    factory: &dyn RendererFactory,
    quiet: bool,
) -> anyhow::Result<Frame> {
    render_frame_until(
        scene,
        settings,
        config,
        factory,
        quiet,
        FrameControl::default(),
    )
}

/// What the caller of [`render_frame_until`] controls while a frame renders: when to stop,
/// where to start, and what to do at each pass boundary (`gasworks render` sets the stop on
/// Ctrl-C or SIGTERM, resumes from `--resume`, and writes checkpoints between passes).
pub struct FrameControl<'a> {
    /// Once set (non-zero: the number of the signal that asked, or any other), no new tile
    /// starts, the tiles in flight finish, and the frame comes back with what was rendered
    /// and [`Frame::stopped`] saying how far it got.
    pub stop: &'a AtomicU8,
    /// The film of an earlier render of the same frame: only the passes after its samples
    /// are rendered.
    pub resume: Option<Resume>,
    /// Called after every complete pass but the last, with the film at that boundary and its
    /// samples per pixel: a point [`Resume`] can continue from (a checkpoint). The workers are
    /// idle meanwhile (the next pass starts when it returns).
    pub between_passes: Option<&'a mut PassBoundaryHook<'a>>,
    /// Called after every tile, with the samples per pixel of the complete passes and a way
    /// to make the film as it stands (those passes, and the current pass's finished tiles): a
    /// point [`Resume`] can continue from too, for a checkpoint inside a pass (a render in one
    /// pass has no boundary to write one at). Called on the thread that gathers the tiles,
    /// while the workers render on.
    pub within_pass: Option<&'a mut PassInsideHook<'a>>,
    /// A time limit: a pass after this run's first starts only if it is predicted to end by
    /// then ([`PassTimes`]); otherwise the frame stops at that boundary, whole, with
    /// [`Stopped::at_time_limit`] set.
    pub deadline: Option<Instant>,
    /// The cost map, estimated beforehand (used only if made for this frame's scene,
    /// settings and schedule; otherwise the frame estimates its own).
    pub estimate: Option<PreparedEstimate>,
}

/// The passes of this run, timed, to predict the next one against a deadline.
///
/// A pass's time is taken to grow with its samples (the tiles and the scene are the same), at
/// the slowest rate any pass of this run had, not the last one's: passes vary (the first runs
/// with cold caches and tiles cut from the estimate, and a shared machine's speed drifts), and
/// a prediction too long costs one pass while one too short runs past the job's allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PassTimes {
    slowest_s_per_spp: Option<f64>,
}

impl PassTimes {
    /// A complete pass of `spp` samples per pixel took `seconds`.
    pub fn record(&mut self, seconds: f64, spp: u32) {
        let rate = seconds / f64::from(spp.max(1));
        self.slowest_s_per_spp = Some(self.slowest_s_per_spp.map_or(rate, |s| s.max(rate)));
    }

    /// The predicted seconds of a pass of `spp` samples per pixel; `None` before any pass.
    pub fn predict(&self, spp: u32) -> Option<f64> {
        self.slowest_s_per_spp.map(|rate| rate * f64::from(spp))
    }

    /// Whether a pass of `spp` samples per pixel started `now` is predicted to end by
    /// `deadline`. With no pass timed yet it fits: nothing predicts the first pass of a run.
    pub fn next_fits(&self, now: Instant, deadline: Instant, spp: u32) -> bool {
        match self.predict(spp) {
            Some(predicted) => next_pass_fits(now, deadline, predicted),
            None => true,
        }
    }
}

/// Whether a pass predicted to take `predicted_s` seconds, started `now`, ends by `deadline`.
pub fn next_pass_fits(now: Instant, deadline: Instant, predicted_s: f64) -> bool {
    match deadline.checked_duration_since(now) {
        Some(left) => predicted_s <= left.as_secs_f64(),
        None => false,
    }
}

/// What [`FrameControl::between_passes`] is given: the film at a pass boundary and the
/// samples per pixel every pixel of it has.
pub type PassBoundaryHook<'a> = dyn FnMut(&Film, u32) + 'a;

/// What [`FrameControl::within_pass`] is given: the samples per pixel of the complete passes,
/// and a way to make the film as it stands (a copy: call it only when a checkpoint is due).
pub type PassInsideHook<'a> = dyn FnMut(u32, &dyn Fn() -> Film) + 'a;

/// Never set: a frame that runs to its end.
static NEVER: AtomicU8 = AtomicU8::new(0);

impl Default for FrameControl<'_> {
    fn default() -> Self {
        FrameControl {
            stop: &NEVER,
            resume: None,
            between_passes: None,
            within_pass: None,
            deadline: None,
            estimate: None,
        }
    }
}

/// [`render_frame`] under `control`: stopped early, resumed, or watched between passes.
pub fn render_frame_until(
    scene: &Scene,
    settings: &RenderSettings,
    config: &SchedConfig,
    factory: &dyn RendererFactory,
    quiet: bool,
    control: FrameControl<'_>,
) -> anyhow::Result<Frame> {
    let FrameControl {
        stop,
        resume,
        between_passes,
        within_pass,
        deadline,
        estimate,
    } = control;
    config.validate()?;
    let window = window::resolve(config.window, settings.width, settings.height)?;
    let workers = rank_workers(&config.devices, factory, window)?;
    check_resume(settings, config, window, resume.as_ref())?;
    let plan = plan_inputs(scene, settings, config, window, estimate, resume);
    let setup = RankSetup::new(workers, String::new(), String::new(), 0, Some(plan));
    let job = FrameJob {
        settings: *settings,
        config: config.clone(),
        quiet,
        timing: Timing::alone(),
        fault: None,
        deadline,
        stop,
    };
    let mut hooks = Hooks {
        between_passes,
        within_pass,
    };
    match rank::run_rank(&mut Alone, Ok(setup), &job, &mut hooks)? {
        Some(frame) => Ok(frame),
        None => anyhow::bail!("scheduler bug: the frame ended without its film"),
    }
}

/// Refuses what the frame's master would: adaptive sampling that does not fit the passes,
/// and a film to resume that is not of this frame's passes and window.
fn check_resume(
    settings: &RenderSettings,
    config: &SchedConfig,
    window: Tile,
    resume: Option<&Resume>,
) -> anyhow::Result<()> {
    let passes = config.passes(settings.spp);
    if let Some(a) = &config.adaptive_sampling {
        a.validate(&passes, settings.spp)?;
    }
    let Some(r) = resume else {
        return Ok(());
    };
    if (r.film.width, r.film.height) != (window.w, window.h) {
        anyhow::bail!(
            "the render to resume is {}x{} pixels, this one {}x{}",
            r.film.width,
            r.film.height,
            window.w,
            window.h
        );
    }
    let adaptive = config.adaptive_sampling.as_ref().map(|a| (a, window));
    resume_start(&passes, settings.spp, r, adaptive)?;
    Ok(())
}

/// A rank's workers: those of `devices`, renderers from `factory`, rendering the `window` of
/// the image (from here on the window is the image; only the renderers see where it lies).
pub fn rank_workers(
    devices: &[DeviceSpec],
    factory: &dyn RendererFactory,
    window: Tile,
) -> anyhow::Result<Vec<Worker>> {
    let mut workers = workers::build_workers(devices, factory)?;
    if workers.is_empty() {
        return Err(ConfigError::NoWorkers.into());
    }
    for w in &mut workers {
        w.renderer = window::Shifted::wrap(w.renderer.clone(), window);
    }
    Ok(workers)
}

/// What rank 0 plans a frame with: the cost map `prepared` beforehand when it was made for
/// this frame, else one estimated now; and the film to resume from.
pub fn plan_inputs(
    scene: &Scene,
    settings: &RenderSettings,
    config: &SchedConfig,
    window: Tile,
    prepared: Option<PreparedEstimate>,
    resume: Option<Resume>,
) -> PlanInputs {
    let key = EstimateKey::of(scene, settings, config, window);
    let (estimate, raster, estimate_stats, estimated_before) = match prepared {
        Some(p) if p.key == key => (p.map, p.raster, p.stats, true),
        _ => {
            let (map, raster, stats) = estimate_costmap(scene, settings, config, window);
            (map, raster, stats, false)
        }
    };
    PlanInputs {
        estimate,
        raster,
        estimate_stats,
        resume,
        estimated_before,
    }
}

/// The sink of a frame that one process renders through [`render_frame_until`]: its
/// caller's hooks at pass boundaries and after tiles; the outputs are the caller's.
struct Hooks<'a> {
    between_passes: Option<&'a mut PassBoundaryHook<'a>>,
    within_pass: Option<&'a mut PassInsideHook<'a>>,
}

impl FrameSink for Hooks<'_> {
    fn between_passes(&mut self, film: &Film, spp_done: u32) {
        if let Some(hook) = self.between_passes.as_mut() {
            hook(film, spp_done);
        }
    }

    fn within_pass(&mut self, spp_done: u32, film: &dyn Fn() -> Film) {
        if let Some(hook) = self.within_pass.as_mut() {
            hook(spp_done, film);
        }
    }

    fn finish(&mut self, _: &Frame) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A pass's tile count: `--tiles` when given (`tiles`); else, where some workers want big
/// tiles (`wants`: the largest `min_tile_work` among the workers not retired, and how many
/// want one), the count that gives each tile that much work of the pixels the pass renders
/// (in a pass whose tiles skip the stopped blocks, `skipping`, those of the blocks still
/// sampling); else `None`, the default count. One process and a cluster's rank 0 alike.
pub(crate) fn pass_tile_count(
    tiles: Option<u32>,
    wants: (Option<u64>, u32),
    (width, height): (u32, u32),
    samples_per_pass: u32,
    skipping: Option<&adaptive_sampling::BlockMask>,
) -> Option<u32> {
    let (min_work, wanting) = wants;
    tiles.or_else(|| {
        min_work.map(|work| {
            let rendered =
                skipping.map_or(u64::from(width) * u64::from(height), |m| m.active_pixels());
            tiles::tile_count_for_rendered_work(
                width,
                height,
                rendered,
                samples_per_pass,
                work,
                wanting,
            )
        })
    })
}

/// Whether pass tiles skip the stopped blocks rather than being cut into the pieces between
/// them: adaptive sampling stopped some blocks (`mask`), no pixel has the pass already
/// (`ahead`, a resume inside it, whose pixels are not on the block grid), and some worker
/// wants big tiles (`wanted`: a GPU, for which each piece would be a launch).
pub(crate) fn skipping_mask(
    mask: Option<&adaptive_sampling::BlockMask>,
    ahead: Option<Ahead>,
    wanted: bool,
) -> Option<&adaptive_sampling::BlockMask> {
    mask.filter(|m| !m.all() && ahead.is_none() && wanted)
}

/// The cost of what `tile` renders by the cost map `sat`: all of it, or, in a pass whose tiles
/// skip the stopped blocks (`skipping`), the pieces of it still sampling.
pub(crate) fn rendered_cost(
    sat: &sat::Sat,
    scale: MapScale,
    tile: Tile,
    skipping: Option<&adaptive_sampling::BlockMask>,
) -> f64 {
    match skipping {
        Some(m) => tiles::without_done(vec![tile], |x, y| !m.is_active(x, y))
            .into_iter()
            .map(|piece| scale.tile_cost(sat, piece))
            .sum(),
        None => scale.tile_cost(sat, tile),
    }
}

/// The pieces of `tiles` (a pass's, measured `seconds` each) in blocks still sampling by
/// `mask`, each tile's seconds shared among its pieces along the `estimate` of the `image`
/// (by area where it is zero): where a tile that skipped stopped blocks spent its time.
/// `schedule-sim` rebuilds an adaptive render's measured costs from them.
pub fn rendered_pieces(
    estimate: &CostMap,
    image: (u32, u32),
    tiles: &[Tile],
    seconds: &[f64],
    mask: &adaptive_sampling::BlockMask,
) -> (Vec<Tile>, Vec<f64>) {
    let scale = MapScale::between(image, (estimate.width, estimate.height));
    let sat = estimate.sat();
    let (mut pieces, mut shares) = (Vec::new(), Vec::new());
    for (t, &s) in tiles.iter().zip(seconds) {
        let these = tiles::without_done(vec![*t], |x, y| !mask.is_active(x, y));
        let costs: Vec<f64> = these.iter().map(|p| scale.tile_cost(&sat, *p)).collect();
        let total: f64 = costs.iter().sum();
        let area: f64 = these.iter().map(|p| p.pixel_count() as f64).sum();
        for (p, c) in these.iter().zip(&costs) {
            let share = if total > 0.0 {
                c / total
            } else {
                p.pixel_count() as f64 / area
            };
            pieces.push(*p);
            shares.push(s * share);
        }
    }
    (pieces, shares)
}

/// A skipping pass's tiles ([`protocol::TaskData::skip`]): each shrunk to the bounds of its
/// pixels in blocks still sampling, those without any left out.
pub(crate) fn tiles_around_active_blocks(
    tiles: Vec<Tile>,
    mask: &adaptive_sampling::BlockMask,
) -> Vec<Tile> {
    tiles
        .into_iter()
        .filter_map(|t| mask.active_bounds(t))
        .collect()
}

/// Whether a pass renders only part of the image: resumed inside it (`ahead`: the pixels that
/// have it already), or adaptive sampling left blocks out (`mask`).
pub fn covers_part(ahead: Option<Ahead>, mask: Option<&adaptive_sampling::BlockMask>) -> bool {
    ahead.is_some() || mask.is_some_and(|m| !m.all())
}

/// A pass's `tiles` cut down to the pixels it still renders (one process and a cluster's
/// rank 0 alike): not those of `film` that have the pass already (`ahead`), nor those of the
/// blocks that adaptive sampling stopped (`mask`).
pub fn what_is_left(
    tiles: Vec<Tile>,
    film: &Film,
    ahead: Option<Ahead>,
    mask: Option<&adaptive_sampling::BlockMask>,
) -> Vec<Tile> {
    if !covers_part(ahead, mask) {
        return tiles;
    }
    tiles::without_done(tiles, |x, y| {
        ahead.is_some_and(|a| a.has_pass(film, x, y)) || mask.is_some_and(|m| !m.is_active(x, y))
    })
}

/// Whether a pass's measured tile costs may correct the cost map that plans the next pass
/// ([`CostMap::corrected`]): only when every worker is of one kind of device (all CPU threads,
/// on any number of machines, or all GPU streams). A tile's measured cost says how dear it is
/// on the device that ran it, and a GPU and a CPU find different tiles dear: carried from one
/// to the other, the costs rank the next pass's tiles worse than the raw estimate does, while
/// with one kind of device they rank them better (the measurements are in
/// docs/guide/workers.md; [`correction_replay`], `gasworks schedule-sim --replay-corrections`,
/// replays a render's `--stats` files this way). Workers of different kinds still get their
/// speeds measured after every pass.
pub fn measured_costs_carry_over<'a>(devices: impl IntoIterator<Item = &'a str>) -> bool {
    let kind = |d: &'a str| d.trim_end_matches(|c: char| c.is_ascii_digit());
    let mut kinds = devices.into_iter().map(kind);
    match kinds.next() {
        Some(first) => kinds.all(|k| k == first),
        None => true,
    }
}

/// After a pass: each worker's speed (cost-map units per second, shared by the workers of one
/// speed class, `class_of[w]`: one `--devices` entry, or several alike ones
/// ([`speed_classes`]), since alike workers are equally fast and one worker's few tiles say
/// little) and each tile's measured cost in cost-map units of a common speed (its time times
/// the speed of the class that ran it), so that a tile is not judged cheap because a fast
/// device ran it. The cluster's rank 0 calls it too, with the classes of every rank's workers.
///
/// A class that ran no tile in the pass keeps its speed from `previous` (the speeds the pass
/// was planned with, when they were speeds: calibrated or measured), since the steal guard may
/// have kept a slow device idle on purpose; without them, it gets the mean of the others.
pub fn measured_costs(
    class_of: &[usize],
    pass: &PassReport,
    previous: Option<&[f64]>,
) -> (Vec<f64>, Vec<f64>) {
    let classes = class_of.iter().max().map_or(0, |c| c + 1);
    let (mut planned, mut seconds) = (vec![0.0f64; classes], vec![0.0f64; classes]);
    for r in &pass.records {
        let c = class_of[r.worker];
        planned[c] += pass.predicted[r.task];
        seconds[c] += r.cost_s;
    }
    let known: Vec<f64> = (0..classes)
        .filter(|&c| seconds[c] > 0.0 && planned[c] > 0.0)
        .map(|c| planned[c] / seconds[c])
        .collect();
    let fallback = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    // A class's speed as planned: the previous speed of its first worker that had one (a
    // retired worker planned at 0).
    let planned_speed = |c: usize| {
        previous?
            .iter()
            .zip(class_of)
            .filter(|&(_, &k)| k == c)
            .map(|(s, _)| *s)
            .find(|s| s.is_finite() && *s > 0.0)
    };
    let class_speed: Vec<f64> = (0..classes)
        .map(|c| {
            if seconds[c] > 0.0 && planned[c] > 0.0 {
                planned[c] / seconds[c]
            } else {
                planned_speed(c).unwrap_or(fallback)
            }
        })
        .collect();
    let speeds = class_of.iter().map(|&c| class_speed[c]).collect();
    let normalized = pass
        .records
        .iter()
        .map(|r| r.cost_s * class_speed[class_of[r.worker]])
        .collect();
    (speeds, normalized)
}

/// What [`publish`] wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Published {
    /// `--stats`: the statistics CSV and its `.tiles.csv` and `.costmap.csv` siblings, and an
    /// adaptive render's `.blocks.csv`.
    pub stats: Option<Vec<std::path::PathBuf>>,
    /// `--costmap`: the pictures written, and their folder.
    pub pictures: Option<(usize, std::path::PathBuf)>,
}

/// Writes the `--stats` and `--costmap` outputs the render command asks for. Prints nothing:
/// what reaches the terminal is the caller's choice ([`report::FrameReport::summary`]).
pub fn publish(
    frame: &Frame,
    stats: Option<&std::path::Path>,
    costmap_dir: Option<&std::path::Path>,
) -> anyhow::Result<Published> {
    let mut published = Published::default();
    if let Some(path) = stats {
        report::write_stats(&frame.report, path)?;
        let (tiles, map) = report::sibling_paths(path);
        let mut files = vec![path.to_path_buf(), tiles, map];
        let blocks = report::blocks_path(path);
        if frame
            .report
            .adaptive
            .as_ref()
            .is_some_and(|a| !a.block_passes.is_empty())
        {
            files.push(blocks);
        }
        published.stats = Some(files);
    }
    if let Some(dir) = costmap_dir {
        let files = pictures::write_all(&frame.report, &frame.film, dir)?;
        published.pictures = Some((files.len(), dir.to_path_buf()));
    }
    Ok(published)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A skipping tile's seconds go to its pieces in blocks still sampling, along the
    /// estimate: nothing lost, nothing in a stopped block, no pixel twice.
    #[test]
    fn rendered_pieces_share_each_tiles_seconds_over_its_sampling_pixels() {
        let window = Tile::whole(64, 48);
        let mut mask = adaptive_sampling::BlockMask::all_active(window);
        for (b, a) in mask.active.iter_mut().enumerate() {
            *a = b % 3 != 0;
        }
        // A cost map of 8x6 cells rising to the right, so that shares are not by area.
        let mut estimate = CostMap::uniform(8, 6, 1.0);
        for (i, v) in estimate.values.iter_mut().enumerate() {
            *v = 1.0 + (i % 8) as f32;
        }
        let tiles = tiles::equal_tiles(64, 48, 2, 2);
        let seconds = [1.0, 2.0, 3.0, 4.0];
        let (pieces, shares) = rendered_pieces(&estimate, (64, 48), &tiles, &seconds, &mask);
        assert_eq!(pieces.len(), shares.len());
        let total: f64 = shares.iter().sum();
        assert!((total - 10.0).abs() < 1e-12, "{total}");
        let mut seen = vec![0u8; 64 * 48];
        for p in &pieces {
            for y in p.y..p.y + p.h {
                for x in p.x..p.x + p.w {
                    assert!(mask.is_active(x, y), "({x}, {y}) in {p:?}");
                    seen[(y * 64 + x) as usize] += 1;
                }
            }
        }
        let active = (0..48u32)
            .flat_map(|y| (0..64u32).map(move |x| (x, y)))
            .filter(|&(x, y)| mask.is_active(x, y))
            .count();
        assert_eq!(seen.iter().filter(|&&n| n == 1).count(), active);
        assert!(seen.iter().all(|&n| n <= 1));
        // Within the first tile (1 s), pieces further right cost more per pixel.
        let per_pixel: Vec<(u32, f64)> = pieces
            .iter()
            .zip(&shares)
            .filter(|(p, _)| p.x < 32 && p.y < 24)
            .map(|(p, s)| (p.x, s / p.pixel_count() as f64))
            .collect();
        let left = per_pixel.iter().min_by_key(|(x, _)| *x).unwrap();
        let right = per_pixel.iter().max_by_key(|(x, _)| *x).unwrap();
        assert!(right.1 > left.1, "{per_pixel:?}");
    }

    #[test]
    fn a_group_that_ran_nothing_keeps_its_planned_speed() {
        // Workers 0 and 1: a GPU's streams (group 0); worker 2: a CPU thread (group 1) that
        // the steal guard kept idle. The GPU ran two tiles of cost 4 in 1 ms each.
        let record = |task, worker| workers::TileRecord::from_start(task, worker, 0.001);
        let pass = PassReport {
            samples: 0..1,
            tiles: vec![Tile::whole(1, 1); 2],
            predicted: vec![4.0, 4.0],
            estimated: vec![4.0, 4.0],
            initial_deques: vec![vec![0], vec![1], vec![]],
            records: vec![record(0, 0), record(1, 1)],
            makespan_s: 0.001,
            workers: Vec::new(),
            speeds: Vec::new(),
            planned_with_measured: false,
            skipped_pixels: 0,
        };
        let groups = [0, 0, 1];
        // Planned by calibrated speeds: the CPU keeps its 50 units/s.
        let (speeds, normalized) = measured_costs(&groups, &pass, Some(&[4000.0, 4000.0, 50.0]));
        assert_eq!(speeds, vec![4000.0, 4000.0, 50.0]);
        assert_eq!(normalized, vec![4.0, 4.0]);
        // Planned by worker counts: nothing is known of the CPU, which gets the others' mean.
        let (speeds, _) = measured_costs(&groups, &pass, None);
        assert_eq!(speeds, vec![4000.0; 3]);
    }

    #[test]
    fn alike_groups_plan_at_their_pooled_speed() {
        // Two GPUs of one model, a stream each (groups 0 and 1, one speed class), and a CPU
        // thread (group 2). GPU 0 ran 3 tiles of cost 4 in 1 ms each; GPU 1 ran one in
        // 3 ms, as a hiccup can make it. Apart, GPU 1 would plan 3x slower than GPU 0, and the
        // steal guard would treat it as a slow device; pooled, both plan at 16 / 6 ms. The
        // CPU thread, a class of its own, keeps its own speed: 4 in 80 ms.
        let record = workers::TileRecord::from_start;
        let pass = PassReport {
            samples: 0..1,
            tiles: vec![Tile::whole(1, 1); 5],
            predicted: vec![4.0; 5],
            estimated: vec![4.0; 5],
            initial_deques: vec![vec![0, 1, 2], vec![3], vec![4]],
            records: vec![
                record(0, 0, 0.001),
                record(1, 0, 0.001),
                record(2, 0, 0.001),
                record(3, 1, 0.003),
                record(4, 2, 0.08),
            ],
            makespan_s: 0.08,
            workers: Vec::new(),
            speeds: Vec::new(),
            planned_with_measured: false,
            skipped_pixels: 0,
        };
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        let (apart, _) = measured_costs(&[0, 1, 2], &pass, None);
        assert!(close(&apart, &[4000.0, 4000.0 / 3.0, 50.0]), "{apart:?}");
        let (pooled, normalized) = measured_costs(&[0, 0, 1], &pass, None);
        let gpu = 16.0 / 0.006;
        assert!(close(&pooled, &[gpu, gpu, 50.0]), "{pooled:?}");
        // Each tile's cost at the common speed: its time times its class's speed.
        let want: Vec<f64> = [0.001, 0.001, 0.001, 0.003]
            .iter()
            .map(|t| t * gpu)
            .chain([4.0])
            .collect();
        assert!(close(&normalized, &want), "{normalized:?}");
    }

    #[test]
    fn a_retired_worker_does_not_hide_its_classs_planned_speed() {
        // Workers 0 and 1, one class, ran nothing; worker 0 was retired (planned at 0).
        let pass = PassReport {
            samples: 0..1,
            tiles: vec![Tile::whole(1, 1)],
            predicted: vec![4.0],
            estimated: vec![4.0],
            initial_deques: vec![vec![], vec![], vec![0]],
            records: vec![workers::TileRecord::from_start(0, 2, 0.08)],
            makespan_s: 0.08,
            workers: Vec::new(),
            speeds: Vec::new(),
            planned_with_measured: false,
            skipped_pixels: 0,
        };
        let (speeds, _) = measured_costs(&[0, 0, 1], &pass, Some(&[0.0, 4000.0, 50.0]));
        assert_eq!(speeds, vec![4000.0, 4000.0, 50.0]);
    }

    #[test]
    fn measured_costs_carry_over_between_devices_of_one_kind_only() {
        assert!(measured_costs_carry_over(["cpu", "cpu", "cpu"]));
        assert!(measured_costs_carry_over(["gpu0", "gpu0", "gpu1", "gpu12"]));
        assert!(measured_costs_carry_over([]));
        assert!(!measured_costs_carry_over(["gpu0", "gpu0", "cpu"]));
        assert!(!measured_costs_carry_over(["cpu", "gpu1"]));
    }

    #[test]
    fn a_stop_is_described_by_what_every_pixel_got() {
        let between = Stopped {
            spp_complete: 16,
            partial: None,
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            between.describe(64),
            "16 of 64 samples per pixel everywhere"
        );
        assert!(between.rendered_any());
        let mid = Stopped {
            spp_complete: 16,
            partial: Some(PartialPass {
                samples: 16..32,
                tiles_done: 30,
                tiles: 64,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            mid.describe(64),
            "16 of 64 samples per pixel everywhere, and samples 16..32 in 30 of 64 tiles"
        );
        // Pixels lost with a rank are named; unless they still hold the complete passes,
        // the film is no point to resume from.
        let mut lost = mid.clone();
        lost.lost = Some(LostPixels {
            ranks: vec![2, 5],
            pixels: 300,
            resumable: false,
        });
        assert_eq!(
            lost.describe(64),
            "16 of 64 samples per pixel everywhere, and samples 16..32 in 30 of 64 tiles; the \
             300 pixels ranks 2, 5 held were lost with them: they hold what the last film \
             gathered from the ranks had (a checkpoint's), or nothing"
        );
        assert!(!lost.resumable() && mid.resumable());
        let first = Stopped {
            spp_complete: 0,
            partial: Some(PartialPass {
                samples: 0..64,
                tiles_done: 32,
                tiles: 64,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            first.describe(64),
            "samples 0..64 in 32 of 64 tiles; the other tiles are black"
        );
        assert!(first.rendered_any());
        // Resumed from a stop inside the pass: this run's tiles cover the pixels still missing.
        let resumed = Stopped {
            spp_complete: 16,
            partial: Some(PartialPass {
                samples: 16..32,
                tiles_done: 3,
                tiles: 10,
                carried_pixels: 400,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            resumed.describe(64),
            "16 of 64 samples per pixel everywhere, and samples 16..32 in 3 of 10 tiles and 400 pixels an earlier run finished"
        );
        let none = Stopped {
            spp_complete: 0,
            partial: Some(PartialPass {
                samples: 0..64,
                tiles_done: 0,
                tiles: 64,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert!(!none.rendered_any());
        // Stopped inside a pass before any of its tiles was done: the pass is not named.
        let after_boundary = Stopped {
            spp_complete: 100,
            partial: Some(PartialPass {
                samples: 100..104,
                tiles_done: 0,
                tiles: 6,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            after_boundary.describe(128),
            "100 of 128 samples per pixel everywhere"
        );
        let carried_only = Stopped {
            spp_complete: 16,
            partial: Some(PartialPass {
                samples: 16..32,
                tiles_done: 0,
                tiles: 10,
                carried_pixels: 400,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            carried_only.describe(64),
            "16 of 64 samples per pixel everywhere, and samples 16..32 in the 400 pixels an earlier run finished"
        );
        // Every tile of the pass arrived before the stop: its samples are everywhere.
        let all_arrived = Stopped {
            spp_complete: 0,
            partial: Some(PartialPass {
                samples: 0..64,
                tiles_done: 6,
                tiles: 6,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            all_arrived.describe(128),
            "64 of 128 samples per pixel everywhere"
        );
    }

    #[test]
    fn passes_cover_the_samples_in_order() {
        let mut c = SchedConfig::default();
        assert_eq!(c.passes(10), vec![0..10]);
        c.pass_spp = Some(4);
        assert_eq!(c.passes(10), vec![0..4, 4..8, 8..10]);
        c.pass_spp = Some(0);
        assert_eq!(c.validate(), Err(ConfigError::PassSpp));
    }

    #[test]
    fn costmap_size_is_at_least_one_cell() {
        assert_eq!(costmap_size(512, 256, 0.25), (128, 64));
        assert_eq!(costmap_size(3, 1, 0.25), (1, 1));
        assert_eq!(costmap_size(100, 100, 1.0), (100, 100));
    }
}
