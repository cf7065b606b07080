//! Speed calibration before the first pass of a render whose workers are of different kinds.
//!
//! The first pass of a frame is planned before any tile has been timed. With workers of one
//! kind that does no harm: equal workers get equal shares. With a GPU beside CPU threads it
//! does: equal shares hand GPU-sized tiles to CPU threads a hundred times slower, and the
//! frame waits for them (figures: docs/guide/workers.md#mixed-devices).
//!
//! So before that pass, one worker of every `--devices` entry renders a small piece of the
//! image, and the times give each entry's speed in cost-map units per second: the weights of
//! the first pass's shares and of the steal guard ([`super::policy::steal_pays`]), as the
//! measured speeds are for later passes. What is rendered is thrown away: the film and so the
//! image are the same bits with or without calibration.
//!
//! The pieces are sized for the worker. A worker that asks for big tiles (a GPU, by
//! [`crate::render::TileRenderer::min_tile_work`]) renders a whole tile of the pass at the
//! pass's samples, launches like the ones it will run (timing it on a smaller launch would
//! mostly time the launch overhead and make the GPU look slower than it is), but at most
//! [`GPU_LAUNCHES`] launches' worth of samples, so that a long pass is not rendered twice over
//! before it starts. Any other worker renders at most
//! [`CPU_PIECE`] x [`CPU_PIECE`] pixels of that tile at up to [`CPU_SAMPLES`] samples, a few
//! milliseconds on one CPU thread. Each runs twice and keeps the faster time (the first run may
//! pay for cold caches or a first launch). The entries calibrate at once, one thread each.

use std::ops::Range;
use std::time::Instant;

use anyhow::Context;

use super::cputime::thread_cpu_seconds;
use super::protocol::PieceTime;
use super::sat::{MapScale, Sat};
use super::workers::{lost_with, retired_with, retirement_note, Retirement, Worker};
use crate::render::Tile;

/// The side of the piece a worker without a preferred tile size renders, in pixels.
pub const CPU_PIECE: u32 = 32;
/// The most samples per pixel of that piece.
pub const CPU_SAMPLES: u32 = 4;
/// Runs per worker; the fastest counts.
pub const RUNS: usize = 2;
/// The most device-filling launches (of the worker's `min_tile_work`) a piece for a worker
/// that wants big tiles carries. A whole tile of a long pass can hold far more (a 64x64 tile
/// of a 65,536-spp pass is 268 M pixel-samples, seconds on a GPU, twice): calibration would
/// then hold the frame back for that long, and in a cluster it runs on the rank's progress
/// thread, which sends no heartbeat meanwhile. A few full launches time the device as well.
pub const GPU_LAUNCHES: u64 = 4;

/// One `--devices` entry's calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The `--devices` entry (the workers' `group`).
    pub group: usize,
    /// The worker that ran it ("gpu0/s0", "cpu#0").
    pub worker: String,
    /// What it rendered, in pixels of the film.
    pub piece: Tile,
    pub samples: Range<u32>,
    /// The faster run's seconds: the thread's CPU time for CPU workers, else wall time.
    pub seconds: f64,
    /// The piece's estimated cost, in the pass's cost-map units scaled to its samples.
    pub cost: f64,
    /// `cost / seconds`: cost-map units per second of one worker of the entry.
    pub speed: f64,
}

/// Whether a render's workers need calibrating, given each one's speed class
/// ([`super::speed_classes::of_workers`]): they are of more than one class (a CPU beside a
/// GPU, or two GPUs that differ or whose hardware is not known). Workers of one class are
/// alike, and worker counts share the first pass among them exactly: two GPUs of one model
/// with as many streams each are not timed.
pub fn needed(classes: &[usize]) -> bool {
    classes.windows(2).any(|p| p[0] != p[1])
}

/// The tile the pieces come from: the one of median estimated cost among those with any cost
/// (a typical tile, neither empty sky nor the costliest corner). `None` without such a tile.
pub fn reference_tile(tiles: &[Tile], predicted: &[f64]) -> Option<usize> {
    let mut costed: Vec<usize> = (0..tiles.len().min(predicted.len()))
        .filter(|&t| predicted[t].is_finite() && predicted[t] > 0.0)
        .collect();
    costed.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)));
    costed.get(costed.len() / 2).copied()
}

/// The piece of `tile` a worker renders, and the samples: for a worker that wants big tiles,
/// the whole tile at the pass's first samples, as many as make [`GPU_LAUNCHES`] of its
/// launches (at least one sample; the whole pass when that is less); for any other worker, a
/// centred piece of at most [`CPU_PIECE`] pixels square and the pass's first [`CPU_SAMPLES`]
/// samples.
pub fn piece_for(worker: &Worker, tile: Tile, samples: &Range<u32>) -> (Tile, Range<u32>) {
    if let Some(launch) = worker.renderer.min_tile_work() {
        let pixels = (tile.pixel_count() as u64).max(1);
        let most = GPU_LAUNCHES
            .saturating_mul(launch.max(1))
            .div_ceil(pixels)
            .clamp(1, u64::from(u32::MAX)) as u32;
        let n = (samples.end - samples.start).min(most);
        return (tile, samples.start..samples.start + n);
    }
    let (w, h) = (tile.w.min(CPU_PIECE), tile.h.min(CPU_PIECE));
    let piece = Tile {
        x: tile.x + (tile.w - w) / 2,
        y: tile.y + (tile.h - h) / 2,
        w,
        h,
    };
    let n = (samples.end - samples.start).min(CPU_SAMPLES);
    (piece, samples.start..samples.start + n)
}

/// A piece a worker could not render ([`time_pieces`]).
#[derive(Debug)]
pub struct PieceFailure {
    /// The worker, by its index in the workers given.
    pub worker: usize,
    pub piece: Tile,
    /// The renderer's error, in the context of "calibrating worker ... on ...".
    pub error: anyhow::Error,
}

/// What [`time_pieces`] measured: one time per `--devices` entry one of whose workers
/// rendered its piece, in group order, and every worker's failure, in group and worker order
/// (an entry may have several: the workers tried before one rendered its piece, or all).
#[derive(Debug, Default)]
pub struct TimedPieces {
    pub times: Vec<PieceTime>,
    pub failures: Vec<PieceFailure>,
}

/// Times the first worker of every `--devices` entry of `workers` on its piece of `tile`
/// ([`piece_for`]) at the pass's `samples`, [`RUNS`] times each, the entries at once, one
/// thread each. The pieces start from zero sums and are thrown away. A renderer's error is
/// the entry's failure, naming the worker; the other entries' times stand (under
/// `--on-worker-error retire` the failing worker is retired before the pass, as it would be
/// on its first tile: [`retire_after_calibration`]). A failure that keeps
/// the device (not a sticky CUDA error: [`TileRenderer::device_lost`] says nothing) times the
/// entry's next worker instead, so that the entry's workers left plan at their own measured
/// speed rather than at a guess; one that loses the device does not, as every worker of it
/// would fail.
///
/// [`TileRenderer::device_lost`]: crate::render::TileRenderer::device_lost
pub fn time_pieces(workers: &[Worker], tile: Tile, samples: &Range<u32>) -> TimedPieces {
    // The workers of every group, in order.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, w) in workers.iter().enumerate() {
        match groups.iter_mut().find(|g| workers[g[0]].group == w.group) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    let results: Vec<(Option<PieceTime>, Vec<PieceFailure>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|members| {
                let handle = scope.spawn(move || time_group(workers, members, tile, samples));
                (members[0], handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(first, h)| {
                h.join().unwrap_or_else(|_| {
                    let failure = PieceFailure {
                        worker: first,
                        piece: piece_for(&workers[first], tile, samples).0,
                        error: anyhow::anyhow!("a calibration thread panicked"),
                    };
                    (None, vec![failure])
                })
            })
            .collect()
    });
    let mut out = TimedPieces::default();
    for (time, failures) in results {
        out.times.extend(time);
        out.failures.extend(failures);
    }
    out.times.sort_by_key(|t| t.group);
    out.failures
        .sort_by_key(|f| (workers[f.worker].group, f.worker));
    out
}

/// [`time_pieces`] for one group (`members`, its workers in order): the first worker that
/// renders its piece, after the failures of those before it; none after a failure that
/// loses the device.
fn time_group(
    workers: &[Worker],
    members: &[usize],
    tile: Tile,
    samples: &Range<u32>,
) -> (Option<PieceTime>, Vec<PieceFailure>) {
    let mut failures = Vec::new();
    for &index in members {
        let worker = &workers[index];
        let (piece, piece_samples) = piece_for(worker, tile, samples);
        match time_piece(worker, piece, &piece_samples) {
            Ok(t) => return (Some(t), failures),
            Err(error) => {
                failures.push(PieceFailure {
                    worker: index,
                    piece,
                    error,
                });
                if worker.renderer.device_lost().is_some() {
                    break;
                }
            }
        }
    }
    (None, failures)
}

/// One worker's piece, [`RUNS`] times; the faster run's seconds.
fn time_piece(
    worker: &Worker,
    piece: Tile,
    piece_samples: &Range<u32>,
) -> anyhow::Result<PieceTime> {
    let mut best = f64::INFINITY;
    for _ in 0..RUNS {
        let mut acc = vec![[0.0f32; 4]; piece.pixel_count()];
        let cpu0 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
        let t0 = Instant::now();
        worker
            .renderer
            .render_tile(piece, piece_samples.clone(), &mut acc)
            .with_context(|| {
                format!(
                    "calibrating worker {} ({}) on x={} y={} {}x{}, samples {:?}",
                    worker.label,
                    worker.renderer.name(),
                    piece.x,
                    piece.y,
                    piece.w,
                    piece.h,
                    piece_samples
                )
            })?;
        let wall = t0.elapsed().as_secs_f64();
        let cpu1 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
        let seconds = match (cpu0, cpu1) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => wall,
        };
        best = best.min(seconds);
    }
    Ok(PieceTime {
        group: worker.group as u32,
        worker: worker.label.clone(),
        piece,
        samples: piece_samples.clone(),
        seconds: best,
    })
}

/// The speed of a timed piece: its estimated cost (the piece's cost in `plan_sat` at `scale`,
/// scaled from the pass's `pass_samples` to the piece's) over its seconds. `group` is the
/// group to report it under (a cluster numbers every rank's groups apart).
pub fn calibration_of(
    t: &PieceTime,
    group: usize,
    plan_sat: &Sat,
    scale: MapScale,
    pass_samples: &Range<u32>,
) -> Calibration {
    let per_pass = f64::from((pass_samples.end - pass_samples.start).max(1));
    let cost = scale.tile_cost(plan_sat, t.piece)
        * f64::from(t.samples.end.saturating_sub(t.samples.start))
        / per_pass;
    Calibration {
        group,
        worker: t.worker.clone(),
        piece: t.piece,
        samples: t.samples.clone(),
        seconds: t.seconds,
        cost,
        speed: if t.seconds > 0.0 && t.seconds.is_finite() {
            cost / t.seconds
        } else {
            f64::NAN
        },
    }
}

/// Under [`super::OnWorkerError::Retire`], the retirements that calibration `failures` make before
/// pass `pass` (0-based): each failing worker, as its first tile would have retired it, and,
/// when its renderer says its device is lost, the device's other workers not yet `retired`
/// (marked in it). One warning per failure goes to `warn` ("{error}; {note}", the note saying
/// that `others` take the tiles), as in a pass.
pub(crate) fn retire_after_calibration(
    workers: &[Worker],
    failures: Vec<PieceFailure>,
    retired: &mut [bool],
    pass: usize,
    others: &str,
    mut warn: impl FnMut(String),
) -> Vec<Retirement> {
    let mut out = Vec::new();
    for f in failures {
        let w = f.worker;
        if retired[w] {
            // Retired with its device by an earlier failure of this calibration.
            continue;
        }
        let with_it = retired_with(workers, w, |v| retired[v]);
        let error = format!("{:#}", f.error);
        let note = retirement_note(workers, w, &error, &with_it, others);
        warn(format!("{error}; {note}"));
        let lost = lost_with(workers, w, &error);
        let gone =
            std::iter::once((w, error)).chain(with_it.into_iter().map(|v| (v, lost.clone())));
        for (v, error) in gone {
            retired[v] = true;
            out.push(Retirement {
                worker: v,
                label: workers[v].label.clone(),
                pass,
                tile: f.piece,
                error,
                before_tiles: true,
            });
        }
    }
    out
}

/// Each worker's weight from the calibrations of the groups: its speed class's speed
/// ([`super::speed_classes`]: alike `--devices` entries, such as two GPUs of one model, are
/// timed each but plan at one speed, their total cost over their total seconds), or, for a
/// class whose speed could not be measured (a zero time, no cost), the mean of the others; all
/// 1.0 when none was measured.
/// `classes` are the workers' ([`super::speed_classes::of_workers`]), which the render has
/// worked out once.
pub fn worker_speeds(
    workers: &[Worker],
    classes: &[usize],
    calibrations: &[Calibration],
) -> Vec<f64> {
    let groups: Vec<usize> = workers.iter().map(|w| w.group).collect();
    speeds_by_group(&groups, classes, calibrations)
}

/// [`worker_speeds`] for workers given by their groups and speed classes alone (a cluster's,
/// all ranks').
pub fn speeds_by_group(
    groups: &[usize],
    classes: &[usize],
    calibrations: &[Calibration],
) -> Vec<f64> {
    let measured = |c: &&Calibration| c.speed.is_finite() && c.speed > 0.0;
    let known: Vec<f64> = calibrations
        .iter()
        .filter(measured)
        .map(|c| c.speed)
        .collect();
    if known.is_empty() {
        return vec![1.0; groups.len()];
    }
    let fallback = known.iter().sum::<f64>() / known.len() as f64;
    let class_of_group = |g: usize| {
        groups
            .iter()
            .position(|&x| x == g)
            .and_then(|w| classes.get(w).copied())
    };
    classes
        .iter()
        .map(|&class| {
            let (cost, seconds) = calibrations
                .iter()
                .filter(measured)
                .filter(|c| class_of_group(c.group) == Some(class))
                .fold((0.0, 0.0), |(c, s), x| (c + x.cost, s + x.seconds));
            if seconds > 0.0 {
                cost / seconds
            } else {
                fallback
            }
        })
        .collect()
}

/// One line for the render's summary: "calibration: gpu0/s0 ... units/s, cpu#0 ...; the
/// fastest worker 180x the slowest".
pub fn describe(calibrations: &[Calibration]) -> String {
    let parts: Vec<String> = calibrations
        .iter()
        .map(|c| {
            format!(
                "{} {:.4} units/s ({}x{} px, {} spp, {:.2} ms)",
                c.worker,
                c.speed,
                c.piece.w,
                c.piece.h,
                c.samples.end - c.samples.start,
                c.seconds * 1e3
            )
        })
        .collect();
    let speeds: Vec<f64> = calibrations
        .iter()
        .map(|c| c.speed)
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    let ratio = match (
        speeds.iter().copied().reduce(f64::max),
        speeds.iter().copied().reduce(f64::min),
    ) {
        (Some(hi), Some(lo)) if lo > 0.0 => {
            format!("; the fastest worker {:.1}x the slowest", hi / lo)
        }
        _ => String::new(),
    };
    format!("calibration: {}{ratio}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker whose renderer asks for launches of `launch` pixel-samples (None: a CPU's).
    fn worker(launch: Option<u64>) -> Worker {
        struct Wants(Option<u64>);
        impl crate::render::TileRenderer for Wants {
            fn name(&self) -> String {
                "wants".into()
            }
            fn min_tile_work(&self) -> Option<u64> {
                self.0
            }
            fn render_tile(
                &self,
                _: Tile,
                _: Range<u32>,
                _: &mut [[f32; 4]],
            ) -> anyhow::Result<()> {
                Ok(())
            }
        }
        Worker {
            label: "w".into(),
            device: "gpu0".into(),
            group: 0,
            cpu_timed: launch.is_none(),
            renderer: std::sync::Arc::new(Wants(launch)),
        }
    }

    #[test]
    fn a_gpu_piece_is_its_tile_at_a_few_launches_of_samples() {
        let tile = Tile {
            x: 64,
            y: 128,
            w: 64,
            h: 64,
        };
        // An H100's launch (540,672 pixel-samples) over 4096 pixels: 4 launches are 528 spp.
        let gpu = worker(Some(540_672));
        assert_eq!(piece_for(&gpu, tile, &(0..65_536)), (tile, 0..528));
        assert_eq!(piece_for(&gpu, tile, &(100..65_636)), (tile, 100..628));
        // A pass shorter than that is timed whole, as before.
        assert_eq!(piece_for(&gpu, tile, &(8..16)), (tile, 8..16));
        // A launch smaller than the tile still gets one sample per pixel.
        assert_eq!(piece_for(&worker(Some(10)), tile, &(0..64)), (tile, 0..1));
        // A CPU thread gets the centred 32x32 piece at up to 4 samples.
        let centre = Tile {
            x: 80,
            y: 144,
            w: 32,
            h: 32,
        };
        assert_eq!(piece_for(&worker(None), tile, &(3..64)), (centre, 3..7));
    }

    #[test]
    fn the_reference_tile_is_the_median_costed_one() {
        let t = |x| Tile {
            x,
            y: 0,
            w: 1,
            h: 1,
        };
        let tiles = [t(0), t(1), t(2), t(3), t(4)];
        // Costed: 1 (tile 2), 3 (tile 4), 5 (tile 0), 9 (tile 3); the upper median.
        assert_eq!(reference_tile(&tiles, &[5.0, 0.0, 1.0, 9.0, 3.0]), Some(0));
        assert_eq!(reference_tile(&tiles, &[0.0; 5]), None);
        assert_eq!(
            reference_tile(&tiles, &[f64::NAN, 2.0, 0.0, 0.0, 0.0]),
            Some(1)
        );
    }
}
