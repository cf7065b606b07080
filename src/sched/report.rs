//! What a scheduled render reports: per-pass and per-worker statistics, the stderr summary,
//! and the CSV files of `--stats`.
//!
//! `--stats OUT.csv` writes three files (siblings named after `OUT`):
//! - `OUT.csv`, one row per pass and worker:
//!   `pass,spp_from,spp_to,worker,label,device,tiles,steals,busy_s,makespan_s,efficiency,rank`
//!   (`steals`: tiles this worker stole; `makespan_s` and `efficiency` are the pass's;
//!   `rank`: the MPI rank the worker ran on, 0 in a single process);
//! - `OUT.tiles.csv`, one row per pass and tile:
//!   `pass,task,x,y,w,h,spp_from,spp_to,worker,stolen_from,start_s,end_s,measured_s,predicted,estimated,rank`
//!   (`stolen_from` is -1 for a worker's own tile; `start_s`, `end_s` are wall-clock times
//!   since the pass began (on a cluster: since the plan reached the rendering rank);
//!   `measured_s` is the tile's cost, the worker thread's CPU time for CPU workers and the
//!   wall time for GPU workers; `predicted` is the cost the pass was planned with,
//!   `estimated` the raw cost-map estimate, both in cost-map units; `rank`: the rank of the
//!   worker that rendered it);
//! - `OUT.costmap.csv`, the estimated cost map, one row per cell: `x,y,cost`;
//! - `OUT.blocks.csv`, adaptive sampling's blocks (`--noise-threshold` only), one row per
//!   16x16 block in the grid's order: `x,y,w,h,until_pass` (`until_pass`: the frame's pass,
//!   from 0, that the block stopped before in this run; it rendered every pass of this run
//!   numbered below).
//!
//! `gasworks schedule-sim OUT.csv` reads the last three back.
//!
//! A render of a `--pixelbounds` window reports in the window's coordinates: tile `x`, `y`
//! and the cost-map cells count from the window's corner.
//!
//! [`FrameReport::summary`] is the schedule, the per-worker table and the cost map's error
//! histogram: the render command prints it only when asked (`-v`, `--stats`).

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::accuracy::{self, Accuracy};
use super::costmap::{CostMap, EstimateStats};
use super::raster::RasterStats;
use super::tiles::Strategy;
use super::workers::{TileRecord, Worker};
use crate::render::Tile;

/// Why statistics could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("{path}: {source}")]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// One worker's share of a pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerPassStats {
    pub tiles: usize,
    /// Tiles this worker stole from others.
    pub steals: usize,
    /// Seconds spent inside the renderer.
    pub busy_s: f64,
}

/// One pass over the tiles.
#[derive(Clone, Debug)]
pub struct PassReport {
    pub samples: Range<u32>,
    /// The tiles, by task number, in locality order.
    pub tiles: Vec<Tile>,
    /// The cost each tile was planned with (cost-map units; from the estimate in the first
    /// pass, from measurements afterwards).
    pub predicted: Vec<f64>,
    /// The raw estimate of each tile (cost-map units), for the cost map's accuracy.
    pub estimated: Vec<f64>,
    /// The workers' initial deques (task numbers, front first).
    pub initial_deques: Vec<Vec<usize>>,
    /// Where each tile ran, by task number.
    pub records: Vec<TileRecord>,
    pub makespan_s: f64,
    pub workers: Vec<WorkerPassStats>,
    /// The speed each worker was planned at (cost-map units per second: calibrated before the
    /// first pass, measured after each); empty when the pass was shared by worker counts.
    pub speeds: Vec<f64>,
    /// Whether `predicted` comes from a cost map corrected by earlier passes' measured costs
    /// (false in a first pass, and in every pass of workers of different kinds of device:
    /// [`super::measured_costs_carry_over`]).
    pub planned_with_measured: bool,
    /// Pixels of the tiles that the pass skipped (adaptive sampling's stopped blocks inside
    /// the tiles of GPU workers, [`super::protocol::TaskData::skip`]); 0 where every pixel of
    /// every tile rendered.
    pub skipped_pixels: u64,
}

impl PassReport {
    /// Each tile's measured cost (seconds; see [`TileRecord::cost_s`]).
    pub fn measured(&self) -> Vec<f64> {
        self.records.iter().map(|r| r.cost_s).collect()
    }

    /// Each tile's measured time as the fastest worker would have taken it: its seconds times
    /// the speed of the worker that ran it over the fastest worker's speed (the speeds the pass
    /// was planned with), so that tiles run by devices of different speeds compare. Without
    /// known speeds (the workers alike), the seconds as measured. Raw seconds rank every piece
    /// a CPU thread ran above every tile a GPU ran, which would hide how well the cost map
    /// ranks them (figures: docs/guide/workers.md).
    pub fn measured_at_fastest(&self) -> Vec<f64> {
        let known = self.speeds.len() == self.workers.len()
            && self.speeds.iter().all(|s| s.is_finite() && *s > 0.0);
        let fastest = self.speeds.iter().copied().fold(0.0f64, f64::max);
        if !known || fastest <= 0.0 {
            return self.measured();
        }
        self.records
            .iter()
            .map(|r| r.cost_s * self.speeds[r.worker] / fastest)
            .collect()
    }

    pub fn busy_s(&self) -> f64 {
        self.workers.iter().map(|w| w.busy_s).sum()
    }

    /// The pixel-samples the pass rendered: its tiles' pixels times its samples per pixel
    /// (under adaptive sampling and in a resumed pass, only the pieces it still rendered).
    pub fn pixel_samples(&self) -> u64 {
        let pixels: u64 = self
            .tiles
            .iter()
            .map(|t| u64::from(t.w) * u64::from(t.h))
            .sum();
        pixels.saturating_sub(self.skipped_pixels)
            * u64::from(self.samples.end - self.samples.start)
    }

    pub fn steals(&self) -> usize {
        self.workers.iter().map(|w| w.steals).sum()
    }

    /// Total busy time over (workers x makespan).
    pub fn efficiency(&self) -> f64 {
        efficiency(self.busy_s(), self.workers.len(), self.makespan_s)
    }

    /// The share of the workers' capacity the pass used: each worker's busy time weighted by
    /// its planned speed, over the makespan times all the speeds. Beside a GPU, an idle CPU
    /// thread 190 times slower is 1/190 of a GPU stream's capacity, not a whole worker's
    /// worth: 16 idle CPU threads beside two busy GPU streams make the plain efficiency 11%
    /// and this 96%. `None` when the pass was not planned by speeds, or they are not all
    /// positive and finite.
    pub fn efficiency_by_speed(&self) -> Option<f64> {
        // (A zero speed is a retired worker's: it adds no capacity.)
        let known = self.speeds.len() == self.workers.len()
            && self.speeds.iter().any(|&s| s > 0.0)
            && self.speeds.iter().all(|s| s.is_finite() && *s >= 0.0);
        if !known || self.makespan_s <= 0.0 {
            return None;
        }
        let used: f64 = self
            .workers
            .iter()
            .zip(&self.speeds)
            .map(|(w, s)| w.busy_s * s)
            .sum();
        let capacity: f64 = self.speeds.iter().sum::<f64>() * self.makespan_s;
        Some(used / capacity)
    }

    /// Whether the pass was planned for workers of speeds [`super::tiles::SIMILAR_SPEEDS`]
    /// apart or more (a GPU beside CPU threads), where [`PassReport::efficiency_by_speed`]
    /// says more than [`PassReport::efficiency`].
    pub fn mixed_speeds(&self) -> bool {
        let (lo, hi) = self
            .speeds
            .iter()
            .filter(|&&s| s > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| {
                (lo.min(s), hi.max(s))
            });
        lo > 0.0 && hi.is_finite() && hi >= super::tiles::SIMILAR_SPEEDS * lo
    }

    /// The raw cost map's accuracy on this pass's tiles (against
    /// [`PassReport::measured_at_fastest`]).
    pub fn estimate_accuracy(&self) -> Accuracy {
        accuracy::compare(&self.estimated, &self.measured_at_fastest())
    }

    /// The accuracy of the costs this pass was planned with (against
    /// [`PassReport::measured_at_fastest`]).
    pub fn plan_accuracy(&self) -> Accuracy {
        accuracy::compare(&self.predicted, &self.measured_at_fastest())
    }

    /// Per device (`device_of[w]` names worker `w`'s, "gpu0", "cpu"; in order of first
    /// appearance): how well the planned costs and the raw estimate rank the tiles that
    /// device ran, against their measured seconds. Within one device no speed is needed,
    /// so this shows what a mixed-device figure hides: costs measured on the GPU, carried to
    /// the CPU's pieces, can rank them worse than the raw estimate (figures:
    /// docs/guide/workers.md).
    pub fn accuracy_by_device(&self, device_of: &[String]) -> Vec<DeviceAccuracy> {
        // Per device, in order of first appearance: (planned, estimated, measured) per tile.
        let mut by: Vec<(String, [Vec<f64>; 3])> = Vec::new();
        for r in &self.records {
            let Some(device) = device_of.get(r.worker) else {
                continue;
            };
            let at = match by.iter().position(|(d, _)| d == device) {
                Some(at) => at,
                None => {
                    by.push((device.clone(), Default::default()));
                    by.len() - 1
                }
            };
            let [planned, estimated, measured] = &mut by[at].1;
            planned.push(self.predicted.get(r.task).copied().unwrap_or(f64::NAN));
            estimated.push(self.estimated.get(r.task).copied().unwrap_or(f64::NAN));
            measured.push(r.cost_s);
        }
        by.into_iter()
            .map(|(device, [planned, estimated, measured])| DeviceAccuracy {
                device,
                tiles: measured.len(),
                planned: accuracy::spearman(&planned, &measured),
                estimated: accuracy::spearman(&estimated, &measured),
            })
            .collect()
    }
}

/// How well costs ranked the tiles of one device in one pass ([`PassReport::accuracy_by_device`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceAccuracy {
    pub device: String,
    pub tiles: usize,
    /// Spearman's rank correlation of the planned costs with the measured seconds (NaN below
    /// two tiles).
    pub planned: f64,
    /// The same for the raw estimate.
    pub estimated: f64,
}

pub fn efficiency(busy_s: f64, workers: usize, makespan_s: f64) -> f64 {
    if makespan_s > 0.0 && workers > 0 {
        busy_s / (workers as f64 * makespan_s)
    } else {
        1.0
    }
}

/// Per-worker statistics of a pass from its tile records.
pub fn worker_stats(workers: usize, records: &[TileRecord]) -> Vec<WorkerPassStats> {
    let mut stats = vec![WorkerPassStats::default(); workers];
    for r in records {
        let s = &mut stats[r.worker];
        s.tiles += 1;
        s.busy_s += r.seconds();
        if r.stolen_from.is_some() {
            s.steals += 1;
        }
    }
    stats
}

/// Everything a scheduled render reports.
#[derive(Clone, Debug)]
pub struct FrameReport {
    /// The size of what was rendered: the window's (the whole image's without one). Tiles,
    /// the cost map and the statistics are in its coordinates.
    pub width: u32,
    pub height: u32,
    /// What was rendered, in pixels of the whole image (`--pixelbounds`).
    pub window: Tile,
    pub strategy: Strategy,
    pub steal: bool,
    /// (label, device) of each worker.
    pub workers: Vec<(String, String)>,
    /// Each worker's speed class ([`super::speed_classes`]): workers of one class plan at one
    /// measured speed. Empty where not known (every `--devices` entry its own class).
    pub speed_classes: Vec<usize>,
    pub raster: RasterStats,
    pub estimate: EstimateStats,
    /// Whether the cost map was estimated before the frame, during the backend's setup
    /// ([`super::PreparedEstimate`]), rather than inside it.
    pub estimated_before: bool,
    /// The estimated cost map.
    pub costmap: CostMap,
    pub passes: Vec<PassReport>,
    /// Wall time of all passes (excluding the cost map).
    pub render_s: f64,
    /// The ranks, when several processes rendered the frame (`mpirun`); `None` in one
    /// process.
    pub cluster: Option<super::ranks::ClusterReport>,
    /// The speeds timed before the first pass ([`super::calibrate`]); empty when the workers
    /// were all of one device (or calibration was off).
    pub calibration: Vec<super::calibrate::Calibration>,
    /// The workers a renderer error retired ([`super::OnWorkerError::Retire`]), in order.
    pub retirements: Vec<super::Retirement>,
    /// The frame's number of `passes[0]` (0-based): past 0 in a resumed render, whose
    /// earlier passes are in the film but not in this report. Retirements count passes from
    /// the frame's first.
    pub first_pass: usize,
    /// Adaptive sampling (`--noise-threshold`): the blocks that rendered each pass; `None`
    /// without.
    pub adaptive: Option<super::adaptive_sampling::AdaptiveReport>,
}

impl FrameReport {
    pub fn worker_list(workers: &[Worker]) -> Vec<(String, String)> {
        workers
            .iter()
            .map(|w| (w.label.clone(), w.device.clone()))
            .collect()
    }

    /// The speed classes that hold more than one device (two GPUs of one model, or alike
    /// ranks), each as its devices' names ("gpu0", "gpu1"; "r0/cpu", "r1/cpu" in a cluster).
    pub fn pooled_devices(&self) -> Vec<Vec<String>> {
        let classes = self.speed_classes.iter().max().map_or(0, |c| c + 1);
        let mut devices: Vec<Vec<String>> = vec![Vec::new(); classes];
        for (w, (_, device)) in self.workers.iter().enumerate() {
            let Some(&class) = self.speed_classes.get(w) else {
                continue;
            };
            let name = match &self.cluster {
                Some(_) => format!("r{}/{device}", self.rank_of(w)),
                None => device.clone(),
            };
            if !devices[class].contains(&name) {
                devices[class].push(name);
            }
        }
        devices.retain(|d| d.len() > 1);
        devices
    }

    /// The MPI rank worker `w` ran on (0 in a single process).
    pub fn rank_of(&self, w: usize) -> usize {
        self.cluster
            .as_ref()
            .and_then(|c| c.worker_rank.get(w).copied())
            .unwrap_or(0)
    }

    /// Sum of the passes' makespans.
    pub fn makespan_s(&self) -> f64 {
        self.passes.iter().map(|p| p.makespan_s).sum()
    }

    pub fn busy_s(&self) -> f64 {
        self.passes.iter().map(PassReport::busy_s).sum()
    }

    pub fn efficiency(&self) -> f64 {
        efficiency(self.busy_s(), self.workers.len(), self.makespan_s())
    }

    /// The efficiency over the workers still working in each pass, when a renderer error
    /// retired some: each pass's capacity counts the workers not retired in an earlier pass
    /// (the one retired in the pass counts there: it held its share until it failed; one
    /// retired by the pass's calibration does not: it held none). This is
    /// the figure to compare with a run that lost no worker; [`FrameReport::efficiency`] counts
    /// the retired ones as idle. `None` when no worker was retired.
    pub fn efficiency_of_working(&self) -> Option<f64> {
        if self.retirements.is_empty() {
            return None;
        }
        let capacity: f64 = self
            .passes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let pass = self.first_pass + i;
                let gone = self
                    .retirements
                    .iter()
                    .filter(|r| r.pass < pass || (r.pass == pass && r.before_tiles))
                    .count();
                self.workers.len().saturating_sub(gone) as f64 * p.makespan_s
            })
            .sum();
        (capacity > 0.0).then(|| self.busy_s() / capacity)
    }

    /// [`PassReport::efficiency_by_speed`] over the frame, each pass weighted by its makespan
    /// (a pass shared by worker counts counts at its plain efficiency). `None` unless some
    /// pass was planned for workers of speeds 2x apart or more: otherwise it says what
    /// [`FrameReport::efficiency`] does.
    pub fn efficiency_by_speed(&self) -> Option<f64> {
        if !self.passes.iter().any(PassReport::mixed_speeds) {
            return None;
        }
        let total = self.makespan_s();
        if total <= 0.0 {
            return None;
        }
        let weighted: f64 = self
            .passes
            .iter()
            .map(|p| p.efficiency_by_speed().unwrap_or_else(|| p.efficiency()) * p.makespan_s)
            .sum();
        Some(weighted / total)
    }

    /// Per worker, over all passes.
    pub fn worker_totals(&self) -> Vec<WorkerPassStats> {
        let mut t = vec![WorkerPassStats::default(); self.workers.len()];
        for p in &self.passes {
            for (acc, w) in t.iter_mut().zip(&p.workers) {
                acc.tiles += w.tiles;
                acc.steals += w.steals;
                acc.busy_s += w.busy_s;
            }
        }
        t
    }

    /// The full report: schedule, per-worker table, the cost map's accuracy and error
    /// histogram, the later passes. Many lines; printed on request.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        self.write_schedule_line(&mut s);
        self.write_setup_notes(&mut s);
        self.write_totals(&mut s);
        self.write_first_pass_accuracy(&mut s);
        if self.passes.len() > 1 {
            self.write_later_passes(&mut s);
            s.push_str(&self.work_per_pass());
        }
        s
    }

    /// The summary's first line: strategy, workers, passes and tiles, the cost map's timings.
    fn write_schedule_line(&self, s: &mut String) {
        let tiles: Vec<usize> = self.passes.iter().map(|p| p.tiles.len()).collect();
        let _ = writeln!(
            s,
            "schedule: {}, steal {}, {} workers, {} pass{} of {} tiles; cost map {}x{}: raster {:.1} ms ({} triangles), estimate {:.1} ms{}",
            self.strategy.name(),
            if self.steal { "on" } else { "off" },
            self.workers.len(),
            self.passes.len(),
            if self.passes.len() == 1 { "" } else { "es" },
            match (tiles.iter().min(), tiles.iter().max()) {
                (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
                (Some(a), _) => a.to_string(),
                _ => "0".into(),
            },
            self.costmap.width,
            self.costmap.height,
            self.raster.seconds * 1e3,
            self.raster.triangles,
            self.estimate.seconds * 1e3,
            if self.estimated_before {
                " (both before the frame, beside the backend's setup)"
            } else {
                ""
            },
        );
    }

    /// Calibration, pooled devices, retirements and adaptive sampling: a line each where
    /// the frame had them.
    fn write_setup_notes(&self, s: &mut String) {
        if !self.calibration.is_empty() {
            let _ = writeln!(s, "  {}", super::calibrate::describe(&self.calibration));
        }
        for devices in self.pooled_devices() {
            let _ = writeln!(
                s,
                "  one speed for alike devices (one kind and hardware, GPUs with as many streams): {}",
                devices.join(", ")
            );
        }
        for r in &self.retirements {
            let _ = writeln!(s, "  {}", r.describe());
        }
        if let Some(a) = &self.adaptive {
            let _ = writeln!(
                s,
                "  adaptive: {} blocks of {b}x{b}; blocks sampling in each pass from pass {}: {}",
                a.blocks,
                self.first_pass + 1,
                a.active_per_pass
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                b = super::adaptive_sampling::BLOCK,
            );
        }
    }

    /// The frame's makespan, busy time, efficiencies and steals, then one line per worker.
    fn write_totals(&self, s: &mut String) {
        let steals: usize = self.passes.iter().map(PassReport::steals).sum();
        let mut by_speed = match self.efficiency_by_speed() {
            Some(e) => format!(" ({:.1}% by the workers' speeds)", 100.0 * e),
            None => String::new(),
        };
        if let Some(e) = self.efficiency_of_working() {
            by_speed += &format!(
                " ({:.1}% over the workers not retired before each pass)",
                100.0 * e
            );
        }
        let _ = writeln!(
            s,
            "  makespan {:.3} s, busy {:.3} s, efficiency {:.1}%{by_speed}, steals {}",
            self.makespan_s(),
            self.busy_s(),
            100.0 * self.efficiency(),
            steals
        );
        for ((label, _), w) in self.workers.iter().zip(self.worker_totals()) {
            let _ = writeln!(
                s,
                "  worker {label:<10} busy {:>8.3} s  tiles {:>5}  steals {:>4}",
                w.busy_s, w.tiles, w.steals
            );
        }
    }

    /// The raw cost map's accuracy on the first pass's tiles, with its error histogram.
    fn write_first_pass_accuracy(&self, s: &mut String) {
        if let Some(first) = self.passes.first() {
            let a = first.estimate_accuracy();
            let _ = writeln!(
                s,
                "  cost map vs measured tile times (pass 1, {} tiles): Spearman {}, within +-5% after scaling {:.1}%, under-estimated {:.1}%",
                a.tiles,
                rank_text(a.spearman),
                100.0 * a.within_5_percent,
                100.0 * a.under_estimated
            );
            let _ = writeln!(
                s,
                "  error histogram ((measured - scaled estimate) / measured; + = under-estimate):"
            );
            s.push_str(&a.histogram_text());
        }
    }

    /// One line per pass after the first: how well its planned costs ranked its tiles, and
    /// (workers of several devices) the same per device.
    fn write_later_passes(&self, s: &mut String) {
        let devices: Vec<String> = self.workers.iter().map(|(_, d)| d.clone()).collect();
        let mixed = devices.windows(2).any(|p| p[0] != p[1]);
        for (i, p) in self.passes.iter().enumerate().skip(1) {
            let a = p.plan_accuracy();
            let planned = if p.planned_with_measured {
                "planned with measured costs"
            } else {
                "planned with the estimate (devices of different kinds)"
            };
            let _ = writeln!(
                s,
                "  pass {}: {planned}: Spearman {}, within +-5% {:.1}%; makespan {:.3} s, efficiency {:.1}%, steals {}",
                i + 1,
                rank_text(a.spearman),
                100.0 * a.within_5_percent,
                p.makespan_s,
                100.0 * p.efficiency(),
                p.steals()
            );
            if mixed {
                let by: Vec<String> = p
                    .accuracy_by_device(&devices)
                    .iter()
                    .map(|d| {
                        format!(
                            "{} {} tiles: planned {}, estimate {}",
                            d.device,
                            d.tiles,
                            rank_text(d.planned),
                            rank_text(d.estimated)
                        )
                    })
                    .collect();
                let _ = writeln!(s, "    Spearman by device: {}", by.join("; "));
            }
        }
    }

    /// What each pass rendered and what it cost: its tiles (the pieces still sampling, under
    /// adaptive sampling), their pixel-samples, the pass's makespan, the frame's throughput in
    /// it, and the workers' busy time per pixel-sample. A pass of small pieces that costs more
    /// per pixel-sample than a full pass pays for its pieces (a GPU launch that does not fill
    /// the device), which is what adaptive sampling's late passes are watched for.
    pub fn work_per_pass(&self) -> String {
        let mut s = String::from(
            "  work per pass: pass, tiles, mean tile (pixels), pixel-samples, makespan, M pixel-samples/s, busy ns per pixel-sample\n",
        );
        for (i, p) in self.passes.iter().enumerate() {
            let work = p.pixel_samples();
            let spp = u64::from(p.samples.end - p.samples.start).max(1);
            let mean_tile = if p.tiles.is_empty() {
                0
            } else {
                work / spp / p.tiles.len() as u64
            };
            let per_s = if p.makespan_s > 0.0 {
                format!("{:.2}", work as f64 / p.makespan_s / 1e6)
            } else {
                "n/a".into()
            };
            let busy_ns = if work > 0 {
                format!("{:.0}", p.busy_s() / work as f64 * 1e9)
            } else {
                "n/a".into()
            };
            let _ = writeln!(
                s,
                "    {:>4} {:>6} {:>8} {:>12} {:>9.3} s {:>9} {:>8}",
                self.first_pass + i + 1,
                p.tiles.len(),
                mean_tile,
                work,
                p.makespan_s,
                per_s,
                busy_ns
            );
        }
        s
    }
}

/// A rank correlation as the summary prints it: three decimals, or "n/a" where it is undefined
/// (fewer than two tiles, or every tile's time equal: a small frame on a GPU is one tile).
pub fn rank_text(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}")
    } else {
        "n/a".into()
    }
}

/// The three files of one render's `--stats OUT.csv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsFiles {
    /// `OUT.csv`: one row per worker.
    pub workers: PathBuf,
    /// `OUT.tiles.csv`: one row per pass and tile.
    pub tiles: PathBuf,
    /// `OUT.costmap.csv` (read gzipped too: see [`costmap_path`]).
    pub costmap: PathBuf,
    /// `OUT.blocks.csv`: written by adaptive renders only.
    pub blocks: PathBuf,
}

impl StatsFiles {
    /// The files of the render whose statistics `given` names: its `OUT.csv`, or its
    /// `OUT.tiles.csv` (what `schedule-sim` takes either way).
    pub fn of(given: &Path) -> StatsFiles {
        let tiles_stem = given
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".tiles.csv"))
            .map(|stem| given.with_file_name(stem));
        match tiles_stem {
            Some(stem) => {
                let with = |suffix: &str| {
                    let mut s = stem.clone().into_os_string();
                    s.push(suffix);
                    PathBuf::from(s)
                };
                StatsFiles {
                    workers: with(".csv"),
                    tiles: given.to_path_buf(),
                    costmap: with(".costmap.csv"),
                    blocks: with(".blocks.csv"),
                }
            }
            None => {
                let (tiles, costmap) = sibling_paths(given);
                StatsFiles {
                    workers: given.to_path_buf(),
                    tiles,
                    costmap,
                    blocks: blocks_path(given),
                }
            }
        }
    }
}

/// `OUT.tiles.csv` and `OUT.costmap.csv` beside `OUT.csv`.
pub fn sibling_paths(stats: &Path) -> (PathBuf, PathBuf) {
    (sibling(stats, ".tiles.csv"), sibling(stats, ".costmap.csv"))
}

/// `OUT{suffix}` beside `OUT.csv` (or beside `OUT`, given without `.csv`).
fn sibling(stats: &Path, suffix: &str) -> PathBuf {
    let mut stem = if stats
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        stats.with_extension("")
    } else {
        stats.to_path_buf()
    }
    .into_os_string();
    stem.push(suffix);
    PathBuf::from(stem)
}

fn csv_err(path: &Path) -> impl Fn(csv::Error) -> StatsError + '_ {
    move |source| StatsError::Csv {
        path: path.to_path_buf(),
        source,
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> StatsError + '_ {
    move |e| StatsError::Csv {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// Writes the three CSV files of `--stats`.
pub fn write_stats(report: &FrameReport, path: &Path) -> Result<(), StatsError> {
    write_worker_rows(report, path)?;
    let (tiles_path, map_path) = sibling_paths(path);
    write_tile_rows(report, &tiles_path)?;
    write_costmap(&report.costmap, &map_path)?;
    write_blocks(report, &blocks_path(path))
}

/// `OUT.csv`: one row per pass and worker.
fn write_worker_rows(report: &FrameReport, path: &Path) -> Result<(), StatsError> {
    let mut w = csv::Writer::from_path(path).map_err(csv_err(path))?;
    w.write_record([
        "pass",
        "spp_from",
        "spp_to",
        "worker",
        "label",
        "device",
        "tiles",
        "steals",
        "busy_s",
        "makespan_s",
        "efficiency",
        "rank",
        "speed",
        "efficiency_by_speed",
        "retired_in_pass",
        "speed_class",
    ])
    .map_err(csv_err(path))?;
    for (i, p) in report.passes.iter().enumerate() {
        // The frame's pass number, as `retired_in_pass` counts (a resumed render's first
        // pass is past 0).
        let pi = report.first_pass + i;
        for (wi, (ws, (label, device))) in p.workers.iter().zip(&report.workers).enumerate() {
            w.write_record([
                pi.to_string(),
                p.samples.start.to_string(),
                p.samples.end.to_string(),
                wi.to_string(),
                label.clone(),
                device.clone(),
                ws.tiles.to_string(),
                ws.steals.to_string(),
                format!("{:.9}", ws.busy_s),
                format!("{:.9}", p.makespan_s),
                format!("{:.6}", p.efficiency()),
                report.rank_of(wi).to_string(),
                // Empty when the pass was shared by worker counts.
                p.speeds
                    .get(wi)
                    .map_or(String::new(), |v| format!("{v:.6}")),
                p.efficiency_by_speed()
                    .map_or(String::new(), |e| format!("{e:.6}")),
                // The pass (from 0) whose renderer error retired the worker, in this pass or
                // an earlier one; empty for a worker still working.
                report
                    .retirements
                    .iter()
                    .find(|r| r.worker == wi && r.pass <= pi)
                    .map_or(String::new(), |r| r.pass.to_string()),
                // Workers of one class planned at one speed (alike devices pooled).
                report
                    .speed_classes
                    .get(wi)
                    .map_or(String::new(), usize::to_string),
            ])
            .map_err(csv_err(path))?;
        }
    }
    w.flush().map_err(io_err(path))
}

/// `OUT.tiles.csv`: one row per pass and tile.
fn write_tile_rows(report: &FrameReport, tiles_path: &Path) -> Result<(), StatsError> {
    let mut w = csv::Writer::from_path(tiles_path).map_err(csv_err(tiles_path))?;
    w.write_record([
        "pass",
        "task",
        "x",
        "y",
        "w",
        "h",
        "spp_from",
        "spp_to",
        "worker",
        "stolen_from",
        "start_s",
        "end_s",
        "measured_s",
        "predicted",
        "estimated",
        "rank",
    ])
    .map_err(csv_err(tiles_path))?;
    for (i, p) in report.passes.iter().enumerate() {
        for (task, (t, r)) in p.tiles.iter().zip(&p.records).enumerate() {
            w.write_record([
                (report.first_pass + i).to_string(),
                task.to_string(),
                t.x.to_string(),
                t.y.to_string(),
                t.w.to_string(),
                t.h.to_string(),
                p.samples.start.to_string(),
                p.samples.end.to_string(),
                r.worker.to_string(),
                r.stolen_from.map_or("-1".to_string(), |v| v.to_string()),
                format!("{:.9}", r.start_s),
                format!("{:.9}", r.end_s),
                format!("{:.9}", r.cost_s),
                format!("{:.6}", p.predicted[task]),
                format!("{:.6}", p.estimated[task]),
                report.rank_of(r.worker).to_string(),
            ])
            .map_err(csv_err(tiles_path))?;
        }
    }
    w.flush().map_err(io_err(tiles_path))
}

/// `OUT.blocks.csv` of an adaptive render; without adaptive blocks, removes an old one.
fn write_blocks(report: &FrameReport, blocks: &Path) -> Result<(), StatsError> {
    let Some(a) = report
        .adaptive
        .as_ref()
        .filter(|a| !a.block_passes.is_empty())
    else {
        // An earlier adaptive render's blocks beside this render's statistics would be read
        // back as this render's.
        return match std::fs::remove_file(blocks) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(blocks)(e)),
            _ => Ok(()),
        };
    };
    let mut w = csv::Writer::from_path(blocks).map_err(csv_err(blocks))?;
    w.write_record(["x", "y", "w", "h", "until_pass"])
        .map_err(csv_err(blocks))?;
    for (t, until) in &a.block_passes {
        w.write_record([
            t.x.to_string(),
            t.y.to_string(),
            t.w.to_string(),
            t.h.to_string(),
            until.to_string(),
        ])
        .map_err(csv_err(blocks))?;
    }
    w.flush().map_err(io_err(blocks))?;
    Ok(())
}

/// `OUT.blocks.csv` beside `OUT.csv`: adaptive sampling's blocks ([`write_stats`]).
pub fn blocks_path(stats: &Path) -> PathBuf {
    sibling(stats, ".blocks.csv")
}

#[derive(serde::Deserialize)]
struct BlockRow {
    x: u32,
    y: u32,
    w: u32,
    h: u32,
    until_pass: usize,
}

/// Reads `OUT.blocks.csv`: each block's pixels and the pass it stopped before.
pub fn read_blocks(path: &Path) -> Result<Vec<(Tile, usize)>, StatsError> {
    let mut r = csv::Reader::from_path(path).map_err(csv_err(path))?;
    let mut out = Vec::new();
    for row in r.deserialize::<BlockRow>() {
        let b = row.map_err(csv_err(path))?;
        out.push((
            Tile {
                x: b.x,
                y: b.y,
                w: b.w,
                h: b.h,
            },
            b.until_pass,
        ));
    }
    Ok(out)
}

/// Writes a cost map as `x,y,cost` rows.
pub fn write_costmap(map: &CostMap, path: &Path) -> Result<(), StatsError> {
    let mut w = csv::Writer::from_path(path).map_err(csv_err(path))?;
    w.write_record(["x", "y", "cost"]).map_err(csv_err(path))?;
    for y in 0..map.height {
        for x in 0..map.width {
            w.write_record([
                x.to_string(),
                y.to_string(),
                format!("{:.6}", map.values[y * map.width + x]),
            ])
            .map_err(csv_err(path))?;
        }
    }
    w.flush().map_err(io_err(path))
}

/// One row of `OUT.tiles.csv`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct TileRow {
    pub pass: usize,
    pub task: usize,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
    pub spp_from: u32,
    pub spp_to: u32,
    pub worker: usize,
    pub stolen_from: i64,
    pub start_s: f64,
    pub end_s: f64,
    pub measured_s: f64,
    pub predicted: f64,
    pub estimated: f64,
    /// Absent in files written before ranks were recorded.
    #[serde(default)]
    pub rank: usize,
}

impl TileRow {
    pub fn tile(&self) -> Tile {
        Tile {
            x: self.x,
            y: self.y,
            w: self.w,
            h: self.h,
        }
    }
}

#[derive(serde::Deserialize)]
struct CostRow {
    x: usize,
    y: usize,
    cost: f32,
}

/// Reads `OUT.tiles.csv`.
pub fn read_tiles(path: &Path) -> Result<Vec<TileRow>, StatsError> {
    let mut r = csv::Reader::from_path(path).map_err(csv_err(path))?;
    let rows = r
        .deserialize()
        .collect::<Result<Vec<TileRow>, _>>()
        .map_err(csv_err(path))?;
    if rows.is_empty() {
        return Err(StatsError::Invalid {
            path: path.to_path_buf(),
            reason: "no tiles".into(),
        });
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.w == 0 || r.h == 0 || !r.measured_s.is_finite() || r.measured_s < 0.0)
    {
        return Err(StatsError::Invalid {
            path: path.to_path_buf(),
            reason: format!(
                "tile {} of pass {} has an empty size or a bad time",
                r.task, r.pass
            ),
        });
    }
    // The replay allocates by these numbers: a tile must lie in an image gasworks renders,
    // and passes count from 0, each with at least one tile.
    let max = u64::from(crate::render::MAX_IMAGE_SIDE);
    let outside = |o: u32, len: u32| u64::from(o) + u64::from(len) > max;
    if let Some(r) = rows.iter().find(|r| outside(r.x, r.w) || outside(r.y, r.h)) {
        return Err(StatsError::Invalid {
            path: path.to_path_buf(),
            reason: format!(
                "tile {} of pass {} ({}x{} at {},{}) lies past {max} pixels, the largest image",
                r.task, r.pass, r.w, r.h, r.x, r.y
            ),
        });
    }
    if let Some(r) = rows.iter().find(|r| r.pass >= rows.len()) {
        return Err(StatsError::Invalid {
            path: path.to_path_buf(),
            reason: format!(
                "tile {} has pass number {}, but {} tiles cannot make that many passes (passes count from 0)",
                r.task,
                r.pass,
                rows.len()
            ),
        });
    }
    Ok(rows)
}

/// The columns of one `OUT.csv` row that a replay needs: which device a worker was.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct WorkerRow {
    pub worker: usize,
    pub device: String,
    /// Absent in files written before ranks were recorded.
    #[serde(default)]
    pub rank: usize,
    /// The worker's speed class; `None` in files written before classes were recorded.
    #[serde(default)]
    pub speed_class: Option<usize>,
}

/// Reads `OUT.csv` (one row per pass and worker) for its workers' devices.
pub fn read_workers(path: &Path) -> Result<Vec<WorkerRow>, StatsError> {
    let mut r = csv::Reader::from_path(path).map_err(csv_err(path))?;
    r.deserialize()
        .collect::<Result<Vec<WorkerRow>, _>>()
        .map_err(csv_err(path))
}

/// `OUT.costmap.csv`, or `OUT.costmap.csv.gz` where only that exists (the GPU evidence under
/// `bench/results/` is committed gzipped).
pub fn costmap_path(plain: &Path) -> PathBuf {
    let mut gz = plain.as_os_str().to_owned();
    gz.push(".gz");
    let gz = PathBuf::from(gz);
    if !plain.exists() && gz.exists() {
        gz
    } else {
        plain.to_path_buf()
    }
}

/// Reads a cost map written by [`write_costmap`], gzipped or not (by a `.gz` name); its size
/// is the largest cell index + 1.
pub fn read_costmap(path: &Path) -> Result<CostMap, StatsError> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let text: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut r = csv::Reader::from_reader(text);
    let rows = r
        .deserialize()
        .collect::<Result<Vec<CostRow>, _>>()
        .map_err(csv_err(path))?;
    let invalid = |reason: &str| StatsError::Invalid {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    // Saturating: a cell index near usize::MAX is an error below, not an overflow.
    let width = rows
        .iter()
        .map(|r| r.x.saturating_add(1))
        .max()
        .ok_or_else(|| invalid("empty cost map"))?;
    let height = rows
        .iter()
        .map(|r| r.y.saturating_add(1))
        .max()
        .unwrap_or(0);
    if width.checked_mul(height) != Some(rows.len()) || rows.len() > 1 << 26 {
        return Err(invalid("the cells do not form a full rectangle"));
    }
    let mut map = CostMap::uniform(width, height, f32::NAN);
    for r in rows {
        if !r.cost.is_finite() || r.cost < 0.0 {
            return Err(invalid(&format!("bad cost at cell {},{}", r.x, r.y)));
        }
        map.values[r.y * width + r.x] = r.cost;
    }
    if map.values.iter().any(|v| v.is_nan()) {
        return Err(invalid("a cell is listed twice, so another is missing"));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_rank_correlations_print_as_not_available() {
        assert_eq!(rank_text(0.80449), "0.804");
        assert_eq!(rank_text(-1.0), "-1.000");
        assert_eq!(rank_text(f64::NAN), "n/a");
        assert_eq!(rank_text(accuracy::spearman(&[3.0], &[1.0])), "n/a");
    }

    /// A measured 256-spp `gpu0x2,cpu` pass (docs/guide/workers.md#mixed-devices): two GPU
    /// streams busy 0.637 s of a 0.638 s makespan, sixteen CPU threads at 1/190.9 of their
    /// speed idle.
    #[test]
    fn efficiency_by_speed_counts_an_idle_slow_worker_at_its_speed() {
        let busy = |busy_s| WorkerPassStats {
            tiles: 1,
            steals: 0,
            busy_s,
        };
        let mut workers = vec![busy(0.637), busy(0.637)];
        workers.extend(std::iter::repeat_n(WorkerPassStats::default(), 16));
        let mut speeds = vec![97907.616, 97907.616];
        speeds.extend([512.7989; 16]);
        let mut pass = PassReport {
            samples: 0..256,
            tiles: Vec::new(),
            predicted: Vec::new(),
            estimated: Vec::new(),
            initial_deques: Vec::new(),
            records: Vec::new(),
            makespan_s: 0.638,
            workers,
            speeds,
            planned_with_measured: false,
            skipped_pixels: 0,
        };
        assert!(
            (pass.efficiency() - 0.111).abs() < 5e-4,
            "{}",
            pass.efficiency()
        );
        let by_speed = pass.efficiency_by_speed().unwrap();
        assert!((by_speed - 0.958).abs() < 5e-4, "{by_speed}");
        assert!(pass.mixed_speeds());
        // Equal speeds: the same figure as the plain efficiency, and not "mixed".
        pass.speeds = vec![2.0; 18];
        assert!((pass.efficiency_by_speed().unwrap() - pass.efficiency()).abs() < 1e-12);
        assert!(!pass.mixed_speeds());
        // No speeds, or speeds of the wrong length or not known: none.
        for speeds in [vec![], vec![1.0; 3], vec![f64::NAN; 18]] {
            pass.speeds = speeds;
            assert_eq!(pass.efficiency_by_speed(), None);
        }
    }

    #[test]
    fn accuracy_compares_tiles_at_the_fastest_workers_speed() {
        // A GPU stream (worker 0) beside a CPU thread 100 times slower (worker 1): the
        // estimates rank tiles 4 > 3 > 2 > 1; the GPU ran the two dearest, the CPU the two
        // cheapest, which took it 100 times the seconds.
        let record = TileRecord::from_start;
        let estimated = vec![4.0, 3.0, 2.0, 1.0];
        let mut pass = PassReport {
            samples: 0..1,
            tiles: vec![Tile::whole(1, 1); 4],
            predicted: estimated.clone(),
            estimated,
            initial_deques: Vec::new(),
            records: vec![
                record(0, 0, 0.004),
                record(1, 0, 0.003),
                record(2, 1, 0.2),
                record(3, 1, 0.1),
            ],
            makespan_s: 0.3,
            workers: vec![WorkerPassStats::default(); 2],
            speeds: vec![1000.0, 10.0],
            planned_with_measured: false,
            skipped_pixels: 0,
        };
        let m = pass.measured_at_fastest();
        for (got, want) in m.iter().zip([0.004, 0.003, 0.002, 0.001]) {
            assert!((got - want).abs() < 1e-12, "{m:?}");
        }
        let a = pass.estimate_accuracy();
        assert!((a.spearman - 1.0).abs() < 1e-12, "{}", a.spearman);
        assert!((a.within_5_percent - 1.0).abs() < 1e-12);
        assert!((pass.plan_accuracy().spearman - 1.0).abs() < 1e-12);
        // Raw seconds would have ranked them backwards.
        assert!(accuracy::compare(&pass.estimated, &pass.measured()).spearman < 0.0);
        // Speeds not known: the seconds as measured.
        pass.speeds = Vec::new();
        assert_eq!(pass.measured_at_fastest(), pass.measured());
    }

    #[test]
    fn tile_rows_that_would_overflow_or_exhaust_the_replay_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.tiles.csv");
        let header = "pass,task,x,y,w,h,spp_from,spp_to,worker,stolen_from,start_s,end_s,measured_s,predicted,estimated";
        let read = |rows: &[&str]| {
            std::fs::write(&path, format!("{header}\n{}\n", rows.join("\n"))).unwrap();
            read_tiles(&path).map_err(|e| e.to_string())
        };
        let good = "0,0,0,0,8,8,0,1,0,-1,0,1,1,1,1";
        assert_eq!(
            read(&[good, "1,0,0,0,8,8,1,2,0,-1,1,2,1,1,1"])
                .unwrap()
                .len(),
            2
        );
        let e = read(&[good, "0,1,4294967295,0,8,8,0,1,0,-1,0,1,1,1,1"]).unwrap_err();
        assert!(
            e.contains("run.tiles.csv") && e.contains("lies past 32768 pixels"),
            "{e}"
        );
        let e = read(&[good, "18446744073709551615,1,0,0,8,8,0,1,0,-1,0,1,1,1,1"]).unwrap_err();
        assert!(e.contains("pass number 18446744073709551615"), "{e}");
        let e = read(&["2,0,0,0,8,8,0,1,0,-1,0,1,1,1,1", good]).unwrap_err();
        assert!(
            e.contains("but 2 tiles cannot make that many passes"),
            "{e}"
        );
    }

    #[test]
    fn stats_files_come_from_out_csv_or_its_tiles() {
        let want = StatsFiles {
            workers: PathBuf::from("/a/run.csv"),
            tiles: PathBuf::from("/a/run.tiles.csv"),
            costmap: PathBuf::from("/a/run.costmap.csv"),
            blocks: PathBuf::from("/a/run.blocks.csv"),
        };
        assert_eq!(StatsFiles::of(Path::new("/a/run.csv")), want);
        assert_eq!(StatsFiles::of(Path::new("/a/run.tiles.csv")), want);
        // A dot in a folder's name is not the file's.
        let f = StatsFiles::of(Path::new("x.tiles.csv/run"));
        assert_eq!(f.tiles, Path::new("x.tiles.csv/run.tiles.csv"));
        assert_eq!(f.workers, Path::new("x.tiles.csv/run"));
        let f = StatsFiles::of(Path::new("sched.tiles.csv"));
        assert_eq!(f.workers, Path::new("sched.csv"));
        assert_eq!(f.costmap, Path::new("sched.costmap.csv"));
        assert_eq!(f.blocks, Path::new("sched.blocks.csv"));
        assert_eq!(blocks_path(Path::new("run")), Path::new("run.blocks.csv"));
    }

    #[test]
    fn sibling_names() {
        let (t, c) = sibling_paths(Path::new("/a/run.csv"));
        assert_eq!(t, Path::new("/a/run.tiles.csv"));
        assert_eq!(c, Path::new("/a/run.costmap.csv"));
        let (t, _) = sibling_paths(Path::new("run"));
        assert_eq!(t, Path::new("run.tiles.csv"));
    }

    #[test]
    fn costmap_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.csv");
        let m = CostMap {
            width: 3,
            height: 2,
            values: vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
        };
        write_costmap(&m, &p).unwrap();
        assert_eq!(read_costmap(&p).unwrap(), m);
    }
}
