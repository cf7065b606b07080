//! Rank 0's master role: it plans each pass over the workers of every rank (one rank when a
//! process renders alone), gathers the finished tiles into the film, takes the ranks'
//! calibrations, statistics and retirements, and ends the frame: complete, at a time limit,
//! or at a stop. It only computes the messages to send ([`Outbox`]); the rank's progress loop
//! ([`super::rank`]) sends them and feeds it what arrives.
//!
//! A pass is planned from the cost map: tiles laid out ([`tiles`]), cut for slow workers once
//! the speeds are known, cut down to what the pass still renders (a resume inside it,
//! adaptive sampling's stopped blocks), and shared among all workers of all ranks in rank
//! order ([`policy::initial_deques`]). After each pass the measured tile times give the
//! workers' speeds ([`super::measured_costs`]) and, with one kind of device, correct the cost
//! map the next pass is planned with.

use std::ops::Range;
use std::time::Instant;

use super::adaptive_sampling::{AdaptiveReport, BlockGrid, BlockMask, BlockTally, Judging};
use super::calibrate::{self, Calibration};
use super::costmap::CostMap;
use super::holdings::{empty_film, HolderMap, NOBODY};
use super::job::{FrameJob, PlanInputs};
use super::policy;
use super::progress::Progress;
use super::protocol::{Msg, PieceTime, PieceTo, Plan, RankReady, TaskData, TileDone, WorkerInfo};
use super::ranks::{ClusterReport, RankInfo, RankPassCounters, StopRequest};
use super::report::{self, FrameReport, PassReport};
use super::sat::MapScale;
use super::speed_classes::{speed_classes, WorkerKind};
use super::workers::{Retirement, TileRecord};
use super::{tiles, Ahead, Frame, LostPixels, PartialPass, PassTimes, SchedConfig, Stopped};
use crate::render::{Film, Tile};

/// A rank's hardware for the summary: its workers' kinds, each once, in `--devices` order
/// ("gpu: NVIDIA H100 80GB HBM3, 132 SMs + cpu: AMD EPYC 7B13"); empty where none is known.
fn hardware_of(workers: &[WorkerInfo]) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for w in workers {
        if !w.hardware.is_empty() && !kinds.contains(&w.hardware.as_str()) {
            kinds.push(&w.hardware);
        }
    }
    kinds.join(" + ")
}

/// Rank 0's view of one pass.
struct MasterPass {
    index: usize,
    tiles: Vec<Tile>,
    predicted: Vec<f64>,
    estimated: Vec<f64>,
    deques: Vec<Vec<usize>>,
    records: Vec<Option<TileRecord>>,
    done: usize,
    /// Adaptive sampling: the blocks' tallies the ranks' statistics brought so far.
    tallies: Vec<BlockTally>,
    stats: Vec<Option<RankPassCounters>>,
    start: Instant,
    makespan_s: f64,
    /// Resumed from a stop inside this pass: the pixels that had it, which it does not
    /// cover (its measured costs then do not correct the cost map).
    ahead: Option<Ahead>,
    /// Whether the pass covers part of the image (resumed inside it, or adaptive sampling
    /// left blocks out): its measured costs then do not correct the cost map.
    partial_cover: bool,
    /// Pixels its tiles skip (adaptive sampling's stopped blocks, in tiles for workers that
    /// want big ones).
    skipped_pixels: u64,
}

/// Rank 0 while the ranks calibrate: the first pass's samples and each rank's timings so far.
type Calibrating = (Range<u32>, Vec<Option<Vec<PieceTime>>>);

/// Rank 0's master role: plans the passes, and keeps which rank holds which pixels' sums.
pub(super) struct Master {
    ranks: usize,
    /// The part of the image rendered (`--pixelbounds`), in pixels of the whole: the film,
    /// the cost map and the tiles cover it alone.
    window: Tile,
    config: SchedConfig,
    /// The film the frame started from (resumed, or empty) until the ranks take it, then the
    /// one gathered from them ([`Master::set_film`]).
    film: Film,
    /// Whether `film` is the frame as it stands (the starting film before the ranks take it,
    /// or the one gathered at a stop), which adaptive sampling can judge from.
    film_current: bool,
    /// Which rank holds each pixel's sums ([`super::holdings`]).
    holders: HolderMap,
    /// Adaptive sampling: the blocks' tallies at the latest pass's end, merged over the ranks
    /// (the pass they judge, and one tally a block).
    tallies: Option<(usize, Vec<BlockTally>)>,
    inputs: PlanInputs,
    plan_map: CostMap,
    /// Whether `plan_map` has been corrected by measured costs
    /// ([`super::measured_costs_carry_over`]).
    planned_with_measured: bool,
    scale: MapScale,
    passes: Vec<Range<u32>>,
    /// The first pass this run renders: 0, or where a resumed render goes on.
    first_pass: usize,
    /// The pixels of the resumed film that have the first pass already (a stop inside it
    /// had finished them): that pass renders only the others.
    ahead: Option<Ahead>,
    weights: Vec<f64>,
    /// Each worker's group, numbered across ranks (rank r's groups from `group_base[r]`).
    groups: Vec<usize>,
    /// Each worker's speed class (`sched::speed_classes`): the groups of alike ranks (one
    /// device kind and hardware, GPUs with as many streams) plan at one speed, measured over all their
    /// tiles, so that noise on one rank does not make it look like slower hardware.
    classes: Vec<usize>,
    group_base: Vec<usize>,
    /// Whether the first pass waits for a calibration: the workers are of more than one speed
    /// class ([`calibrate::needed`]) and not all of one device and hardware (ranks of one
    /// device whose hardware is not known are taken to be alike, as two streams of one GPU
    /// are), and `--calibrate` is on.
    calibrate_first: bool,
    /// The calibration before the first pass (empty when the devices are alike).
    calibration: Vec<Calibration>,
    /// Whether `weights` are speeds (calibrated or measured) rather than worker counts.
    weights_are_speeds: bool,
    /// Tiles of this run's passes planned so far (the progress bar's count).
    tiles_before: u64,
    /// While the ranks calibrate: the pass's samples and each rank's answer so far.
    calibrating: Option<Calibrating>,
    worker_rank: Vec<usize>,
    /// First global worker of each rank, and the total at the end.
    offsets: Vec<usize>,
    labels: Vec<(String, String)>,
    /// Each worker's wanted tile work ([`WorkerInfo::min_tile_work`]; 0: any tile).
    min_tile_work: Vec<u64>,
    rank_info: Vec<RankInfo>,
    current: Option<MasterPass>,
    reports: Vec<PassReport>,
    /// Set when the deadline or a stop request ended the frame before its last pass.
    stopped: Option<Stopped>,
    stop_request: Option<StopRequest>,
    deadline: Option<Instant>,
    /// This run's passes, timed, to predict the next against the deadline.
    pass_times: PassTimes,
    counters: Vec<Vec<RankPassCounters>>,
    progress: Progress,
    render_start: Instant,
    /// Workers retired by a renderer error, as their ranks reported them; they plan at
    /// speed 0 from the next pass on.
    retirements: Vec<Retirement>,
    /// Adaptive sampling: the blocks that rendered each pass.
    adaptive_report: Option<AdaptiveReport>,
    /// Adaptive sampling: the blocks that had stopped at the latest judgement, of all.
    stopped_blocks: Option<(usize, usize)>,
    /// Adaptive sampling: the judgement of the pass about to start (made to see whether
    /// every block had stopped), which that pass's plan takes rather than judge again.
    judged: Option<(usize, BlockMask)>,
}

pub(super) type Outbox = Vec<(usize, Msg)>;

/// Rank 0 records which rank holds each pixel in 16 bits ([`HolderMap`]): a job of more
/// ranks is refused rather than its pixels mixed up.
fn check_rank_count(ranks: usize) -> Result<(), String> {
    match ranks > usize::from(NOBODY) {
        true => Err(format!(
            "{ranks} ranks: rank 0 records which rank holds each pixel in 16 bits, so a job has \
             at most {NOBODY}"
        )),
        false => Ok(()),
    }
}

/// Adaptive sampling: the report of a frame of `window` before its first pass.
fn empty_report(window: Tile) -> AdaptiveReport {
    AdaptiveReport {
        blocks: BlockGrid::new(window).len(),
        active_per_pass: Vec::new(),
        block_passes: Vec::new(),
    }
}

/// Adaptive sampling: a rank's tallies of the blocks it holds pixels of, merged into those
/// of the pass so far (none without adaptive sampling).
fn merge_tallies(into: &mut [BlockTally], blocks: Vec<(u32, BlockTally)>) -> Result<(), String> {
    let count = into.len();
    for (b, t) in blocks {
        let slot = into
            .get_mut(b as usize)
            .ok_or_else(|| format!("a tally of block {b}, of {count} blocks"))?;
        slot.merge(&t);
    }
    Ok(())
}

/// Where the frame stands after a rank's pass statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PassOutcome {
    /// Other ranks' statistics of the pass are still to come.
    Waiting,
    /// The pass is complete and the next one planned; the film holds `spp_done` samples per
    /// pixel until the next pass completes.
    NextPass { spp_done: u32 },
    /// The last pass is complete.
    FrameComplete,
}

/// The workers of every rank, in rank order (global worker numbers), as their hellos name
/// them.
struct Roster {
    /// Each worker's group, numbered across ranks (rank r's groups from `bases[r]`).
    groups: Vec<usize>,
    bases: Vec<usize>,
    worker_rank: Vec<usize>,
    /// First global worker of each rank, and the total at the end.
    offsets: Vec<usize>,
    /// Each worker's label and device; among several ranks the label names the rank too
    /// ("r1/cpu#0").
    labels: Vec<(String, String)>,
    /// Each worker's device and hardware.
    kinds: Vec<(String, String)>,
    min_tile_work: Vec<u64>,
}

impl Roster {
    fn of(hellos: &[RankReady]) -> Roster {
        let mut r = Roster {
            groups: Vec::new(),
            bases: Vec::with_capacity(hellos.len()),
            worker_rank: Vec::new(),
            offsets: vec![0],
            labels: Vec::new(),
            kinds: Vec::new(),
            min_tile_work: Vec::new(),
        };
        let mut base = 0usize;
        for (rank, h) in hellos.iter().enumerate() {
            r.bases.push(base);
            for w in &h.workers {
                let label = match hellos.len() {
                    1 => w.label.clone(),
                    _ => format!("r{rank}/{}", w.label),
                };
                r.groups.push(base + w.group as usize);
                r.worker_rank.push(rank);
                r.labels.push((label, w.device.clone()));
                r.kinds.push((w.device.clone(), w.hardware.clone()));
                r.min_tile_work.push(w.min_tile_work);
            }
            base += h
                .workers
                .iter()
                .map(|w| w.group as usize + 1)
                .max()
                .unwrap_or(0);
            r.offsets.push(r.worker_rank.len());
        }
        r
    }

    /// Each worker's speed class ([`speed_classes`]).
    fn speed_classes(&self) -> Vec<usize> {
        let kinds: Vec<WorkerKind> = self
            .groups
            .iter()
            .zip(&self.kinds)
            .map(|(&group, (device, hardware))| WorkerKind {
                group,
                device,
                hardware,
            })
            .collect();
        speed_classes(&kinds)
    }
}

impl RankInfo {
    /// A rank as its hello describes it.
    fn of(h: &RankReady) -> RankInfo {
        RankInfo {
            host: h.host.clone(),
            backend: h.backend.clone(),
            hardware: hardware_of(&h.workers),
            workers: h.workers.len(),
        }
    }
}

/// The film the frame starts from, its first pass and the pixels that have that pass already:
/// an empty film (with the odd-pass plane for adaptive sampling), or the one to resume,
/// checked against the pass plan. A film with every pass (a checkpoint after the last tile,
/// before the ranks' statistics) is a frame with nothing left to render.
fn starting_film(
    resume: Option<super::Resume>,
    passes: &[Range<u32>],
    spp: u32,
    adaptive: Option<super::adaptive_sampling::AdaptiveSampling>,
    window: Tile,
) -> Result<(Film, usize, Option<Ahead>), String> {
    if let Some(a) = &adaptive {
        a.validate(passes, spp).map_err(|e| e.to_string())?;
    }
    let Some(r) = resume else {
        return Ok((empty_film(window, adaptive.is_some()), 0, None));
    };
    if (r.film.width, r.film.height) != (window.w, window.h) {
        return Err(format!(
            "the render to resume is {}x{} pixels, this one {}x{}",
            r.film.width, r.film.height, window.w, window.h
        ));
    }
    let start = super::resume_start(passes, spp, &r, adaptive.as_ref().map(|a| (a, window)))
        .map_err(|e| e.to_string())?;
    Ok((r.film, start.first_pass, start.ahead))
}

impl Master {
    /// The master of `job`, with the ranks of `hellos`; an error when `inputs.resume` is not
    /// a point of this job's pass plan (checked before the handshake too).
    pub(super) fn new(
        job: &FrameJob,
        mut inputs: PlanInputs,
        hellos: &[RankReady],
    ) -> Result<Master, String> {
        let settings = job.settings;
        let window = super::window::resolve(job.config.window, settings.width, settings.height)
            .map_err(|e| e.to_string())?;
        check_rank_count(hellos.len())?;
        let roster = Roster::of(hellos);
        let classes = roster.speed_classes();
        let scale = MapScale::between(
            (window.w, window.h),
            (inputs.estimate.width, inputs.estimate.height),
        );
        let passes = job.config.passes(settings.spp);
        let adaptive = job.config.adaptive_sampling;
        let (film, first_pass, ahead) = starting_film(
            inputs.resume.take(),
            &passes,
            settings.spp,
            adaptive,
            window,
        )?;
        let calibrate_first = job.config.calibrate
            && calibrate::needed(&classes)
            && roster.kinds.windows(2).any(|p| p[0] != p[1]);
        // A resumed film is rank 0's to hold; a new frame's pixels are nobody's yet.
        let holder = if first_pass > 0 || ahead.is_some() {
            0
        } else {
            NOBODY
        };
        let mut m = Master {
            ranks: hellos.len(),
            film,
            film_current: true,
            holders: HolderMap::new(window.w, window.h, holder),
            tallies: None,
            plan_map: inputs.estimate.clone(),
            planned_with_measured: false,
            scale,
            passes,
            first_pass,
            ahead,
            weights: vec![1.0; roster.worker_rank.len()],
            groups: roster.groups,
            classes,
            group_base: roster.bases,
            calibrate_first,
            calibration: Vec::new(),
            weights_are_speeds: false,
            tiles_before: 0,
            calibrating: None,
            worker_rank: roster.worker_rank,
            offsets: roster.offsets,
            labels: roster.labels,
            min_tile_work: roster.min_tile_work,
            rank_info: hellos.iter().map(RankInfo::of).collect(),
            current: None,
            reports: Vec::new(),
            stopped: None,
            stop_request: None,
            deadline: job.deadline,
            pass_times: PassTimes::default(),
            counters: Vec::new(),
            progress: Progress::new(job.quiet),
            render_start: Instant::now(),
            retirements: Vec::new(),
            adaptive_report: adaptive.map(|_| empty_report(window)),
            stopped_blocks: None,
            judged: None,
            window,
            config: job.config.clone(),
            inputs,
        };
        // Judged now, while the starting film is here to judge from.
        m.judge(m.first_pass);
        Ok(m)
    }

    /// The film the frame starts from, for rank 0's holdings (it holds all of a resumed
    /// film's pixels, [`Master::resumed`]). A film resumed inside a pass stays here too: its
    /// pixels that have that pass are left out of its tiles.
    pub(super) fn take_starting_film(&mut self) -> Film {
        self.film_current = false;
        match self.ahead {
            Some(_) => self.film.clone(),
            None => std::mem::replace(&mut self.film, Film::new(0, 0)),
        }
    }

    /// Whether the frame goes on from a resumed film (which rank 0 holds).
    pub(super) fn resumed(&self) -> bool {
        self.first_pass > 0 || self.ahead.is_some()
    }

    /// The film of the latest gathering, to gather into (one of zeros before the first: the
    /// pixels nobody holds have no samples).
    pub(super) fn take_film(&mut self) -> Film {
        let film = std::mem::replace(&mut self.film, Film::new(0, 0));
        if film.pixels.len() == self.window.pixel_count() {
            return film;
        }
        empty_film(self.window, self.config.adaptive_sampling.is_some())
    }

    /// The film gathered from the ranks: the frame as it stands.
    pub(super) fn set_film(&mut self, film: Film) {
        self.film = film;
        self.film_current = false;
    }

    /// Whether the film resumed from already holds every pass, or every block of it has
    /// stopped below the noise threshold: the frame is its film, with nothing to plan or
    /// render (as one process gives it back).
    pub(super) fn complete(&mut self) -> bool {
        self.first_pass >= self.passes.len() || self.all_stopped_before(self.first_pass)
    }

    /// Adaptive sampling: the blocks that render pass `index`, judged at that pass's start
    /// from the ranks' tallies (before the frame's first pass, from the starting film), once
    /// per pass; `None` without adaptive sampling.
    fn judge(&mut self, index: usize) -> Option<&BlockMask> {
        let a = self.config.adaptive_sampling?;
        if self.judged.as_ref().is_none_or(|(i, _)| *i != index) {
            let judging = Judging::new(&self.passes, index, &a, true);
            // The starting film (kept for a pass resumed inside), or the film at a stop.
            let whole_film = self.film_current
                || index == self.first_pass && self.film.pixels.len() == self.window.pixel_count();
            let mask = match (self.tallies.take_if(|(i, _)| *i == index), judging) {
                (Some((_, tallies)), Some(j)) => BlockMask::of_tallies(self.window, &j, &tallies),
                _ if whole_film => {
                    BlockMask::judge(&self.film, self.window, &self.passes, index, &a)
                }
                _ => return None,
            };
            let active = mask.active_blocks();
            self.stopped_blocks = Some((mask.active.len() - active, mask.active.len()));
            if let Some(r) = self.adaptive_report.as_mut() {
                r.record(index, &mask);
            }
            self.judged = Some((index, mask));
        }
        self.judged.as_ref().map(|(_, m)| m)
    }

    /// Whether every block has stopped before pass `index` (adaptive sampling): the frame
    /// is then complete.
    fn all_stopped_before(&mut self, index: usize) -> bool {
        self.judge(index).is_some_and(|m| m.active_blocks() == 0)
    }

    /// A warning printed above the progress bar.
    pub(super) fn warn(&self, line: &str) {
        self.progress.warn(line);
    }

    /// The largest tile work the workers not retired want, and how many want one (as one
    /// process counts them: GPU workers make the tiles carry a launch's work).
    fn tile_wants(&self) -> (Option<u64>, u32) {
        let wants = self
            .min_tile_work
            .iter()
            .enumerate()
            .filter(|&(w, &work)| work > 0 && !self.retirements.iter().any(|r| r.worker == w))
            .map(|(_, &work)| work);
        (wants.clone().max(), wants.count() as u32)
    }

    /// The tiles of a pass of `samples_per_pass` samples, cut by the plan's cost map and
    /// counted as one process counts them ([`super::pass_tile_count`]); in a pass whose
    /// tiles skip the stopped blocks (`skipping`), around the blocks still sampling.
    fn layout(
        &self,
        plan_sat: &super::sat::Sat,
        samples_per_pass: u32,
        skipping: Option<&BlockMask>,
    ) -> Vec<Tile> {
        let (width, height) = (self.window.w, self.window.h);
        let count = super::pass_tile_count(
            self.config.tiles,
            self.tile_wants(),
            (width, height),
            samples_per_pass,
            skipping,
        );
        let laid_out = tiles::layout(
            self.config.strategy,
            width,
            height,
            count,
            plan_sat,
            self.scale,
        );
        match skipping {
            Some(m) => super::tiles_around_active_blocks(laid_out, m),
            None => laid_out,
        }
    }

    /// The frame's first messages: the first pass's plans, or, when the workers are of more
    /// than one speed class (a GPU beside CPU threads, CPU ranks on machines of different
    /// CPUs; [`calibrate::needed`]) and `--calibrate on` (the default), a `Calibrate` for
    /// every rank first. Each rank times one worker of each of its `--devices` entries on its
    /// piece of the first pass's reference tile ([`calibrate`]), and the first pass is shared
    /// by those speeds ([`Master::on_calibrated`]) instead of by worker counts. It changes no
    /// bit of the image.
    pub(super) fn begin(&mut self) -> Outbox {
        if self.calibrate_first {
            let plan_sat = self.plan_map.sat();
            let first = &self.passes[self.first_pass];
            let tiles = self.layout(&plan_sat, first.end - first.start, None);
            let predicted: Vec<f64> = tiles
                .iter()
                .map(|t| self.scale.tile_cost(&plan_sat, *t))
                .collect();
            if let Some(reference) = calibrate::reference_tile(&tiles, &predicted) {
                let samples = self.passes[self.first_pass].clone();
                self.calibrating = Some((samples.clone(), vec![None; self.ranks]));
                return (0..self.ranks)
                    .map(|r| {
                        (
                            r,
                            Msg::Calibrate {
                                pass: self.first_pass as u32,
                                tile: tiles[reference],
                                samples: samples.clone(),
                            },
                        )
                    })
                    .collect();
            }
        }
        self.start_pass(self.first_pass)
    }

    /// A rank's calibration. Once every rank's is in, the workers' speeds are its group's
    /// (a group that measured nothing gets the mean of the others) and the first pass is
    /// planned with them.
    pub(super) fn on_calibrated(
        &mut self,
        from: usize,
        times: Vec<PieceTime>,
    ) -> Result<Outbox, String> {
        let Some((_, answers)) = self.calibrating.as_mut() else {
            return Err("a calibration that was not asked for".into());
        };
        let groups_of_rank = self.groups[self.offsets[from]..self.offsets[from + 1]]
            .iter()
            .map(|&g| g - self.group_base[from])
            .max()
            .map_or(0, |g| g + 1);
        if let Some(t) = times.iter().find(|t| t.group as usize >= groups_of_rank) {
            return Err(format!(
                "a calibration of group {} of a rank with {groups_of_rank} groups",
                t.group
            ));
        }
        if answers[from].replace(times).is_some() {
            return Err("a calibration sent twice".into());
        }
        if answers.iter().any(Option::is_none) {
            return Ok(Vec::new());
        }
        let Some((samples, answers)) = self.calibrating.take() else {
            return Ok(Vec::new());
        };
        let plan_sat = self.plan_map.sat();
        let mut calibration = Vec::new();
        for (r, times) in answers.into_iter().enumerate() {
            for t in times.into_iter().flatten() {
                let mut c = calibrate::calibration_of(
                    &t,
                    self.group_base[r] + t.group as usize,
                    &plan_sat,
                    self.scale,
                    &samples,
                );
                if self.ranks > 1 {
                    c.worker = format!("r{r}/{}", c.worker);
                }
                calibration.push(c);
            }
        }
        self.weights = calibrate::speeds_by_group(&self.groups, &self.classes, &calibration);
        // Workers their ranks retired when their pieces failed take nothing.
        for r in &self.retirements {
            self.weights[r.worker] = 0.0;
        }
        self.weights_are_speeds = !calibration.is_empty();
        self.calibration = calibration;
        Ok(self.start_pass(self.first_pass))
    }

    /// Plans pass `index` and gives every rank its share: the tiles are cut and assigned to
    /// all workers of all ranks at once, in rank order, so each rank gets one contiguous run
    /// of about equal estimated cost (weighted by its workers' measured speed after the first
    /// pass).
    fn start_pass(&mut self, index: usize) -> Outbox {
        // As in one process: resumed from a stop inside this pass, only the pixels that do
        // not have it yet are rendered; with adaptive sampling, only the blocks still
        // sampling: in tiles that skip the stopped ones where workers want big tiles (GPUs),
        // else in the pieces between them.
        let ahead = self.ahead.filter(|_| index == self.first_pass);
        let mask = self.judge(index).cloned();
        let skipping = super::skipping_mask(mask.as_ref(), ahead, self.tile_wants().0.is_some());
        let plan_sat = self.plan_map.sat();
        let tiles = self.pass_tiles(index, &plan_sat, (ahead, mask.as_ref(), skipping));
        self.count_tiles(index, tiles.len());
        let estimate_sat = self.inputs.estimate.sat();
        let cost =
            |sat: &super::sat::Sat, t: &Tile| super::rendered_cost(sat, self.scale, *t, skipping);
        let predicted: Vec<f64> = tiles.iter().map(|t| cost(&plan_sat, t)).collect();
        let estimated: Vec<f64> = tiles.iter().map(|t| cost(&estimate_sat, t)).collect();
        let skips: Vec<Option<Vec<bool>>> = tiles
            .iter()
            .map(|t| skipping.and_then(|m| m.skip_in(*t)))
            .collect();
        let skipped_pixels = skips
            .iter()
            .flatten()
            .map(|k| k.iter().filter(|&&s| s).count() as u64)
            .sum();
        let deques = policy::initial_deques(self.config.strategy, &predicted, &self.weights);
        let mut out = self.plans(index, &tiles, skips, &predicted, &deques);
        let n = tiles.len();
        if n == 0 {
            // Nothing to render (no pass is planned so, but should one be): the pass ends as
            // soon as it starts, rather than wait for a tile that never comes.
            out.extend((0..self.ranks).map(|r| (r, Msg::PassEnd { pass: index as u32 })));
        }
        self.current = Some(MasterPass {
            index,
            tiles,
            predicted,
            estimated,
            deques,
            records: vec![None; n],
            done: 0,
            tallies: match self.config.adaptive_sampling {
                Some(_) => vec![BlockTally::default(); BlockGrid::new(self.window).len()],
                None => Vec::new(),
            },
            stats: vec![None; self.ranks],
            start: Instant::now(),
            makespan_s: 0.0,
            ahead,
            partial_cover: super::covers_part(ahead, mask.as_ref()),
            skipped_pixels,
        });
        out
    }

    /// The tiles of pass `index`, laid out by the plan's cost map (`plan_sat`), cut for the
    /// slow workers once their speeds are known (a CPU rank beside GPU ranks gets pieces it
    /// can finish, a GPU rank that measures slow, pieces of a launch's work), and cut down
    /// to what the pass still renders: not the pixels `ahead` that have it, nor the blocks
    /// `mask` stopped (unless the tiles skip them, `skipping`).
    fn pass_tiles(
        &self,
        index: usize,
        plan_sat: &super::sat::Sat,
        (ahead, mask, skipping): (Option<Ahead>, Option<&BlockMask>, Option<&BlockMask>),
    ) -> Vec<Tile> {
        let samples = self.passes[index].len() as u32;
        let mut tiles = self.layout(plan_sat, samples, skipping);
        if self.weights_are_speeds {
            let floors = tiles::piece_floors(self.min_tile_work.iter().copied(), samples);
            let pieces =
                tiles::slow_worker_pieces(self.config.strategy, self.config.slow_worker_pieces);
            tiles = tiles::cut_for_slow_workers(
                tiles,
                &self.weights,
                &floors,
                pieces,
                plan_sat,
                self.scale,
            );
            if let Some(m) = skipping {
                tiles = super::tiles_around_active_blocks(tiles, m);
            }
        }
        match skipping {
            Some(_) => tiles,
            None => super::what_is_left(tiles, &self.film, ahead, mask),
        }
    }

    /// The progress bar's count: this run's tiles so far, and this pass's `n` for each pass
    /// still to come (cut for slow workers, a pass may have more tiles than the one before).
    fn count_tiles(&mut self, index: usize, n: usize) {
        let total = self.tiles_before + (n * (self.passes.len() - index)) as u64;
        if index == self.first_pass {
            self.progress.set_length(total);
            self.render_start = Instant::now();
        } else {
            self.progress.set_total(total);
        }
        self.tiles_before += n as u64;
        self.progress
            .set_message(format!("pass {}/{}", index + 1, self.passes.len()));
    }

    /// Every rank's plan of pass `index`: its workers' deques and speeds, the tiles of those
    /// deques with the pixels they skip and their costs and floors (for the steal guards),
    /// the pass's mean cost, the pieces of other ranks' tiles it holds and how many pieces
    /// of its own it is sent ([`super::holdings`]). Nothing in it grows with the pixels, or
    /// with the other ranks' tiles.
    fn plans(
        &self,
        index: usize,
        tiles: &[Tile],
        skips: Vec<Option<Vec<bool>>>,
        predicted: &[f64],
        deques: &[Vec<usize>],
    ) -> Outbox {
        let floors = tiles::area_floors(tiles, predicted);
        let (sends, incoming) = self.piece_moves(tiles, deques);
        (0..self.ranks)
            .zip(sends)
            .zip(incoming)
            .map(|((r, sends), incoming)| {
                let workers = self.offsets[r]..self.offsets[r + 1];
                let mine = &deques[workers.clone()];
                let tasks = mine
                    .iter()
                    .flatten()
                    .map(|&t| {
                        let cost = (predicted[t], floors[t]);
                        TaskData::planned(t as u32, tiles[t], cost, skips[t].clone())
                    })
                    .collect();
                let plan = Plan {
                    pass: index as u32,
                    samples: self.passes[index].clone(),
                    steal: self.config.steal,
                    deques: mine
                        .iter()
                        .map(|d| d.iter().map(|&t| t as u32).collect())
                        .collect(),
                    tasks,
                    speeds: self.weights[workers].to_vec(),
                    task_count: tiles.len() as u32,
                    mean_cost: policy::mean_cost(predicted),
                    sends,
                    incoming,
                };
                (r, Msg::Plan(plan))
            })
            .collect()
    }

    /// The pieces each rank sends before a pass whose `tiles` start in `deques` (global
    /// workers): the parts of each tile that a rank other than the tile's holds. Returns each
    /// rank's sends and how many pieces each rank receives.
    fn piece_moves(&self, tiles: &[Tile], deques: &[Vec<usize>]) -> (Vec<Vec<PieceTo>>, Vec<u32>) {
        let mut sends = vec![Vec::new(); self.ranks];
        let mut incoming = vec![0u32; self.ranks];
        for (w, deque) in deques.iter().enumerate() {
            let to = self.worker_rank[w];
            for &t in deque {
                for (rect, from) in self.holders.pieces(tiles[t]) {
                    if from as usize != to {
                        sends[from as usize].push(PieceTo {
                            rect,
                            to: to as u32,
                        });
                        incoming[to] += 1;
                    }
                }
            }
        }
        (sends, incoming)
    }

    /// Rank `from` retired one of its workers ([`Msg::Retired`]).
    pub(super) fn on_retired(&mut self, from: usize, msg: Msg) -> Result<(), String> {
        let Msg::Retired {
            pass,
            worker,
            tile,
            error,
        } = msg
        else {
            return Err(format!("{} taken for a retirement", msg.name()));
        };
        let w = worker as usize;
        let mine = self.offsets[from]..self.offsets[from + 1];
        if !mine.contains(&w) || self.retirements.iter().any(|r| r.worker == w) {
            return Err(format!(
                "a retirement of worker {w}, not a working one of its own"
            ));
        }
        if pass as usize >= self.passes.len() {
            return Err(format!("a retirement in pass {pass}, past the last"));
        }
        // While the ranks calibrate, a retirement is of a worker whose piece failed
        // ([`retire_after_calibration`]): before the first pass's first tile. (Its rank,
        // which does not know the frame's first pass, sends 0.)
        let before_tiles = self.calibrating.is_some();
        self.retirements.push(Retirement {
            worker: w,
            label: self.labels[w].0.clone(),
            pass: if before_tiles {
                self.first_pass
            } else {
                pass as usize
            },
            tile,
            error,
            before_tiles,
        });
        Ok(())
    }

    pub(super) fn on_tile(&mut self, from: usize, d: TileDone) -> Result<Outbox, String> {
        let pass = self
            .current
            .as_mut()
            .filter(|p| p.index == d.pass as usize)
            .ok_or_else(|| format!("a tile of pass {} arrived outside that pass", d.pass))?;
        let task = d.task as usize;
        let tile = *pass
            .tiles
            .get(task)
            .ok_or_else(|| format!("tile {task} does not exist"))?;
        if self.worker_rank.get(d.worker as usize) != Some(&from) {
            return Err(format!(
                "tile {task} claims worker {} that is not one of rank {from}'s",
                d.worker
            ));
        }
        if pass.records[task].is_some() {
            return Err(format!(
                "scheduler bug: tile {task} was rendered twice in pass {}",
                pass.index
            ));
        }
        pass.records[task] = Some(TileRecord {
            task,
            worker: d.worker as usize,
            stolen_from: d.stolen_from.map(|v| v as usize),
            start_s: d.start_s,
            end_s: d.end_s,
            cost_s: d.cost_s,
        });
        // The rank that rendered it holds its sums now.
        self.holders.set(tile, from as u16);
        pass.done += 1;
        self.progress.inc();
        if pass.done < pass.tiles.len() {
            return Ok(Vec::new());
        }
        pass.makespan_s = pass.start.elapsed().as_secs_f64();
        let end = pass.index as u32;
        Ok((0..self.ranks)
            .map(|r| (r, Msg::PassEnd { pass: end }))
            .collect())
    }

    /// The samples per pixel of the complete passes: what a film gathered now holds, and
    /// more in the current pass's tiles that have arrived.
    pub(super) fn spp_done(&self) -> u32 {
        match &self.current {
            Some(pass) => self.passes[pass.index].start,
            None => self.reports.last().map_or_else(
                || self.passes.get(self.first_pass).map_or(0, |p| p.start),
                |r| r.samples.end,
            ),
        }
    }

    /// A rank's counters after `PassEnd`, with its blocks' tallies (adaptive sampling). When
    /// every rank's are in, the pass is complete and the next one is planned. Returns the
    /// messages to send and where the frame stands.
    pub(super) fn on_stats(
        &mut self,
        from: usize,
        pass_index: u32,
        counters: RankPassCounters,
        blocks: Vec<(u32, BlockTally)>,
    ) -> Result<(Outbox, PassOutcome), String> {
        let pass = self
            .current
            .as_mut()
            .filter(|p| p.index == pass_index as usize && p.done == p.tiles.len())
            .ok_or_else(|| format!("statistics of pass {pass_index} before its end"))?;
        if pass.stats[from].replace(counters).is_some() {
            return Err(format!("statistics of pass {pass_index} sent twice"));
        }
        merge_tallies(&mut pass.tallies, blocks)?;
        if pass.stats.iter().any(Option::is_none) {
            return Ok((Vec::new(), PassOutcome::Waiting));
        }
        let Some(pass) = self.current.take() else {
            return Ok((Vec::new(), PassOutcome::Waiting));
        };
        let next = pass.index + 1;
        let trimmed = pass.partial_cover;
        if self.config.adaptive_sampling.is_some() {
            self.tallies = Some((next, pass.tallies.clone()));
        }
        let report = self.close_pass(pass);
        if next >= self.passes.len() {
            self.reports.push(report);
            return Ok((Vec::new(), PassOutcome::FrameComplete));
        }
        self.learn_speeds(&report, trimmed);
        let spp_done = report.samples.end;
        self.pass_times
            .record(report.makespan_s, report.samples.len() as u32);
        self.reports.push(report);
        if self.all_stopped_before(next) {
            // Adaptive sampling: every block is below the threshold, the frame is done.
            return Ok((Vec::new(), PassOutcome::FrameComplete));
        }
        let next_spp = self.passes[next].len() as u32;
        if let Some(deadline) = self.deadline {
            if !self
                .pass_times
                .next_fits(Instant::now(), deadline, next_spp)
            {
                // Whole at this boundary: the frame ends here.
                self.stopped = Some(Stopped {
                    spp_complete: spp_done,
                    partial: None,
                    at_time_limit: true,
                    stopped_blocks: self.stopped_blocks,
                    lost: None,
                });
                return Ok((Vec::new(), PassOutcome::FrameComplete));
            }
        }
        Ok((self.start_pass(next), PassOutcome::NextPass { spp_done }))
    }

    /// A pass whose tiles have all arrived: its report is made (with the ranks' counters that
    /// came; a stop does not wait for the others).
    fn close_pass(&mut self, pass: MasterPass) -> PassReport {
        let records: Vec<TileRecord> = pass.records.into_iter().flatten().collect();
        let workers = self.worker_rank.len();
        self.counters.push(
            pass.stats
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect(),
        );
        PassReport {
            samples: self.passes[pass.index].clone(),
            workers: report::worker_stats(workers, &records),
            tiles: pass.tiles,
            predicted: pass.predicted,
            estimated: pass.estimated,
            initial_deques: pass.deques,
            records,
            makespan_s: pass.makespan_s,
            // Not yet replaced by this pass's measurements.
            speeds: if self.weights_are_speeds {
                self.weights.clone()
            } else {
                Vec::new()
            },
            planned_with_measured: self.planned_with_measured,
            skipped_pixels: pass.skipped_pixels,
        }
    }

    /// After a complete pass with another to come: the workers' speeds measured in it, and,
    /// where every worker is of one kind and the pass covered the whole image (not
    /// `trimmed`), the cost map corrected by its measured tile costs.
    fn learn_speeds(&mut self, report: &PassReport, trimmed: bool) {
        let previous = self.weights_are_speeds.then_some(&self.weights[..]);
        let (speeds, normalized) = super::measured_costs(&self.classes, report, previous);
        self.weights_are_speeds = true;
        let one_kind =
            super::measured_costs_carry_over(self.labels.iter().map(|(_, d)| d.as_str()));
        if !trimmed && one_kind {
            self.plan_map =
                self.plan_map
                    .corrected((self.window.w, self.window.h), &report.tiles, &normalized);
            self.planned_with_measured = true;
        }
        self.weights = speeds;
        for r in &self.retirements {
            self.weights[r.worker] = 0.0;
        }
    }

    /// Ends the frame at a stop request with `film` gathered from the ranks: the tiles of the
    /// current pass that arrived are in it, the others keep the samples of the complete
    /// passes, and it is kept to resume from. A pass whose tiles have all arrived is complete
    /// (a stop that came with its last tile ends the frame at the boundary after it, or not at
    /// all after the last pass); one of which none arrived was not started.
    /// Ranks `lost` (dead or hung) did not send their pixels: their tiles of the current
    /// pass are not counted, and the frame is stopped, naming how many pixels were lost.
    pub(super) fn stop(&mut self, request: StopRequest, film: Film, lost: &[usize]) {
        (self.film, self.film_current) = (film, true);
        self.stop_request = Some(request);
        let lost = self.lose(lost);
        self.stop_where();
        if let Some(mut lost) = lost {
            let (spp_complete, stopped_blocks) = (self.spp_done(), self.stopped_blocks);
            let stopped = self.stopped.get_or_insert(Stopped {
                spp_complete,
                partial: None,
                at_time_limit: false,
                stopped_blocks,
                lost: None,
            });
            // A lost pixel holds the complete passes' samples only if a checkpoint gathered
            // them at the boundary (or there were none). (One in a block that adaptive
            // sampling had stopped may rightly hold fewer; it is not told apart.)
            let done = stopped.spp_complete as f32;
            lost.resumable = self
                .film
                .pixels
                .iter()
                .zip(&self.holders.who)
                .all(|(p, &r)| !lost.ranks.contains(&(r as usize)) || p[3] == done);
            stopped.lost = Some(lost);
        }
    }

    /// The pixels ranks `lost` held, and their tiles of the current pass taken back.
    fn lose(&mut self, lost: &[usize]) -> Option<LostPixels> {
        if lost.is_empty() {
            return None;
        }
        let worker_rank = &self.worker_rank;
        if let Some(pass) = self.current.as_mut() {
            for record in &mut pass.records {
                if record
                    .as_ref()
                    .is_some_and(|t| lost.contains(&worker_rank[t.worker]))
                {
                    *record = None;
                    pass.done -= 1;
                }
            }
        }
        let pixels = self.holders.count(|r| lost.contains(&(r as usize)));
        Some(LostPixels {
            ranks: lost.to_vec(),
            pixels,
            resumable: false,
        })
    }

    /// Where the stop leaves the frame: at the boundary after a pass whose tiles all
    /// arrived, inside one, or between passes.
    fn stop_where(&mut self) {
        let pass = match self.current.take() {
            Some(p) if !p.tiles.is_empty() && p.done == p.tiles.len() => {
                let (next, end) = (p.index + 1, self.passes[p.index].end);
                let report = self.close_pass(p);
                self.reports.push(report);
                if next < self.passes.len() && !self.all_stopped_before(next) {
                    self.stopped = Some(Stopped {
                        spp_complete: end,
                        partial: None,
                        at_time_limit: false,
                        stopped_blocks: self.stopped_blocks,
                        lost: None,
                    });
                }
                return;
            }
            Some(p) if p.done > 0 => p,
            not_started => {
                let carried = not_started.and_then(|p| p.ahead).map_or(0, |a| a.pixels);
                return self.stop_between_passes(carried);
            }
        };
        let samples = self.passes[pass.index].clone();
        self.stopped = Some(Stopped {
            spp_complete: samples.start,
            partial: Some(PartialPass {
                samples,
                tiles_done: pass.done,
                tiles: pass.tiles.len(),
                carried_pixels: pass.ahead.map_or(0, |a| a.pixels),
            }),
            at_time_limit: false,
            stopped_blocks: self.stopped_blocks,
            lost: None,
        });
    }

    /// A stop before a pass's first tile arrived (or while calibrating before the first): the
    /// film is at a boundary, or, holding `carried` pixels of a resumed pass, as the resumed
    /// run left it inside that pass.
    fn stop_between_passes(&mut self, carried: usize) {
        let spp_complete = self.reports.last().map_or_else(
            || self.passes.get(self.first_pass).map_or(0, |p| p.start),
            |r| r.samples.end,
        );
        let carried = match self.ahead {
            Some(a) if self.reports.is_empty() => a.pixels.max(carried),
            _ => carried,
        };
        self.stopped = Some(Stopped {
            spp_complete,
            partial: (carried > 0).then(|| PartialPass {
                samples: self.passes[self.first_pass].clone(),
                tiles_done: 0,
                tiles: 0,
                carried_pixels: carried,
            }),
            at_time_limit: false,
            stopped_blocks: self.stopped_blocks,
            lost: None,
        });
    }

    pub(super) fn into_frame(self) -> Frame {
        self.progress.finish();
        let report = FrameReport {
            width: self.window.w,
            height: self.window.h,
            window: self.window,
            strategy: self.config.strategy,
            steal: self.config.steal,
            workers: self.labels,
            speed_classes: self.classes,
            raster: self.inputs.raster,
            estimate: self.inputs.estimate_stats,
            estimated_before: self.inputs.estimated_before,
            costmap: self.inputs.estimate,
            passes: self.reports,
            render_s: self.render_start.elapsed().as_secs_f64(),
            // One process rendering alone has no ranks to report.
            cluster: (self.ranks > 1).then_some(ClusterReport {
                ranks: self.rank_info,
                worker_rank: self.worker_rank,
                counters: self.counters,
                stop: self.stop_request,
            }),
            // Empty unless the workers are of more than one speed class.
            calibration: self.calibration,
            retirements: self.retirements,
            first_pass: self.first_pass,
            adaptive: self.adaptive_report,
        };
        Frame {
            film: self.film,
            report,
            // A cluster frame runs to the end, to the boundary where the time limit stopped
            // it, or to a stop request.
            stopped: self.stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_of_more_ranks_than_a_holder_can_name_is_refused() {
        assert!(check_rank_count(65_535).is_ok());
        let e = check_rank_count(65_536).unwrap_err();
        assert!(
            e.contains("65536 ranks") && e.contains("at most 65535"),
            "{e}"
        );
    }
}
