//! `gasworks schedule-sim`: replays the measured tile costs of a real render through the
//! scheduler for simulated worker counts, like the paper's Table 2.
//!
//! It reads the files a render wrote with `--stats OUT.csv` (`OUT.tiles.csv`: measured
//! tiles; `OUT.costmap.csv`: the estimate; an adaptive render's `OUT.blocks.csv`: which
//! blocks each pass rendered), rebuilds the measured cost over the image, and
//! for each strategy, with and without stealing, and each worker count, cuts the tiles, makes
//! the initial assignment and runs the same policy code as a real render in a discrete-event
//! simulation (steal probes cost `--steal-latency-ms`). Stealing picks random victims, so
//! those rows give min / median / max over `--seeds` runs.
//!
//! With `--ranks`, it models a cluster instead ([`crate::sched::sim`]): each rank has
//! `--workers` workers, tiles are stolen within a rank as in one process and across ranks by
//! the protocol of `mpirun ... render`, a steal across ranks costing one round trip of
//! `--rank-steal-latency-ms`; it prints the efficiency of every strategy for every rank count
//! and latency as one table, like the paper's Table 2, then the bytes a pass through rank 0's
//! link at `--bandwidth-gbit` ([`crate::sched::link`]). `--speeds` with `--ranks` models ranks
//! of workers of different speeds (GPU ranks beside CPU ranks) under each way of planning the
//! first pass, the steal guards within and across ranks included.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::render::Tile;
use crate::sched::adaptive_sampling::BlockStops;
use crate::sched::correction_replay::{device_names, replay_corrections, speed_class_keys};
use crate::sched::costmap::CostMap;
use crate::sched::report::{
    costmap_path, read_blocks, read_costmap, read_tiles, read_workers, StatsFiles, TileRow,
};
use crate::sched::sim::{MixedPlan, Replay, SimRun};
use crate::sched::Strategy;

#[derive(Args, Debug)]
pub struct ScheduleSimArgs {
    /// The statistics of a render: the OUT.csv given to `render --stats` (its OUT.tiles.csv
    /// and OUT.costmap.csv are read, and an adaptive render's OUT.blocks.csv), or
    /// OUT.tiles.csv itself
    pub stats: PathBuf,
    /// Simulated worker counts, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16")]
    pub workers: Vec<usize>,
    /// Latency charged to every steal probe, in milliseconds
    #[arg(long, default_value_t = 0.1)]
    pub steal_latency_ms: f64,
    /// Random seeds per configuration with stealing
    #[arg(long, default_value_t = 15)]
    pub seeds: u32,
    /// Tiles per simulated frame [default: the render's first pass's count]
    #[arg(long)]
    pub tiles: Option<u32>,
    /// Model a cluster: rank counts, comma-separated; each rank has --workers workers (one
    /// count), and tiles move across ranks as in `mpirun ... gasworks render`
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<usize>,
    /// With --ranks: the time of one steal across ranks (the request and its answer), in
    /// milliseconds; comma-separated values give one row each
    #[arg(long, value_delimiter = ',', default_value = "0.1")]
    pub rank_steal_latency_ms: Vec<f64>,
    /// With --ranks: rank 0's link, in gigabits a second, for the time its bytes a pass take
    #[arg(long, default_value_t = 100.0)]
    pub bandwidth_gbit: f64,
    /// With --ranks: tiles per worker of each simulated cluster (the paper used 8) [default:
    /// --tiles, else the render's count, for every cluster size]
    #[arg(long)]
    pub tiles_per_worker: Option<u32>,
    /// Multiply the measured tile costs, e.g. 16 to model the frame at 16 times the samples
    /// per pixel (tile costs grow linearly with the samples)
    #[arg(long, default_value_t = 1.0)]
    pub cost_scale: f64,
    /// Model workers of different speeds instead of --workers: SPEEDxCOUNT entries,
    /// comma-separated, speeds relative to the render's own workers (1). `1x2,0.0124x16` is two
    /// GPU streams and sixteen CPU threads at measured speeds (docs/guide/workers.md); each row
    /// then plans the pass with equal shares (a first pass that knows no speeds), with shares
    /// by speed, with shares by speed plus the steal guard, and with those on tiles cut for the
    /// slow workers (what a render does). With --ranks, the workers of each rank instead of
    /// --workers; kinds of rank separated by `;` take turns: `1x2;0.0124x16` alternates a GPU
    /// rank (two streams) with a CPU rank
    #[arg(long)]
    pub speeds: Option<String>,
    /// With --speeds: the pieces per slow worker of the plan that cuts tiles for them, as
    /// `render --slow-worker-pieces`
    #[arg(long, default_value_t = crate::sched::tiles::DEFAULT_SLOW_WORKER_PIECES)]
    pub slow_worker_pieces: u32,
    /// Instead of simulating: replay the render's passes as if each had been planned with the
    /// costs the passes before it measured (the cost-map correction), and print per pass and
    /// device how well those costs and the raw estimate ranked the tiles (Spearman against
    /// the measured seconds). Devices come from OUT.csv
    #[arg(long)]
    pub replay_corrections: bool,
}

/// `--replay-corrections`: one block per pass, one line per device. The devices come from
/// the render's `OUT.csv` beside `OUT.tiles.csv`; without it, workers are named by number.
fn replay_corrections_table(
    files: &StatsFiles,
    rows: &[TileRow],
    estimate: &CostMap,
    image: (u32, u32),
    blocks: Option<&BlockStops>,
) -> anyhow::Result<()> {
    let workers = if files.workers.exists() {
        read_workers(&files.workers)?
    } else {
        eprintln!(
            "schedule-sim: no {} beside the tiles: workers are named by number, each its own device",
            files.workers.display()
        );
        Vec::new()
    };
    println!(
        "schedule-sim: the cost-map corrections of {} replayed ({}x{} image); Spearman of each \
         device's measured seconds with the corrected costs and with the raw estimate",
        files.tiles.display(),
        image.0,
        image.1
    );
    for pass in replay_corrections(
        rows,
        estimate,
        image,
        device_names(&workers),
        speed_class_keys(&workers),
        blocks,
    ) {
        println!(
            "pass {}: {} tiles{}; replayed costs against the CSV's predicted: largest relative difference {:.1e}",
            pass.pass + 1,
            pass.tiles,
            if pass.partial {
                " over part of the image (corrects nothing after it)"
            } else {
                ""
            },
            pass.largest_difference
        );
        for d in &pass.devices {
            println!(
                "  {} ({} tiles): corrected {}, estimate {}",
                d.device,
                d.tiles,
                crate::sched::report::rank_text(d.planned),
                crate::sched::report::rank_text(d.estimated)
            );
        }
    }
    Ok(())
}

/// Parses `--speeds`: `SPEEDxCOUNT` or `SPEED` entries, comma-separated, into one speed per
/// worker.
pub fn parse_speeds(list: &str) -> anyhow::Result<Vec<f64>> {
    let mut speeds = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (speed, count) = match entry.split_once('x') {
            Some((s, n)) => (s, n),
            None => (entry, "1"),
        };
        let speed: f64 = speed
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                anyhow::anyhow!("--speeds: {entry:?}: the speed must be a positive number")
            })?;
        let count: usize = count
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=MAX_SIMULATED_WORKERS).contains(n))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--speeds: {entry:?}: the count must be a whole number from 1 to {MAX_SIMULATED_WORKERS}"
                )
            })?;
        speeds.extend(std::iter::repeat_n(speed, count));
    }
    if speeds.is_empty() || speeds.len() > MAX_SIMULATED_WORKERS {
        anyhow::bail!(
            "--speeds: give 1 to {MAX_SIMULATED_WORKERS} workers as SPEEDxCOUNT entries, e.g. 1x2,0.0124x16"
        );
    }
    Ok(speeds)
}

/// The strategies of the paper's Table 2 (plus the stealing-off variants of each).
const ROWS: [(Strategy, bool, &str); 6] = [
    (Strategy::Regular, false, "regular w/o steal"),
    (Strategy::Regular, true, "regular + steal"),
    (Strategy::Sorted, false, "sorted w/o steal"),
    (Strategy::Sorted, true, "sorted + steal"),
    (Strategy::Adaptive, false, "adaptive w/o steal"),
    (Strategy::Adaptive, true, "adaptive + steal"),
];

fn min_med_max(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// The most workers one simulation models (all ranks together): 64 ranks of 1024 workers.
const MAX_SIMULATED_WORKERS: usize = 1 << 16;

pub fn run(a: ScheduleSimArgs) -> anyhow::Result<()> {
    check_args(&a)?;
    let (rank_kinds, speeds) = parse_worker_speeds(&a)?;
    let files = StatsFiles::of(&a.stats);
    check_stats_given(&a.stats, &files)?;
    let tiles_path = &files.tiles;
    let stats = read_stats(&files)?;
    let (width, height) = (stats.width, stats.height);
    if a.replay_corrections {
        return replay_corrections_table(
            &files,
            &stats.rows,
            &stats.estimate,
            (width, height),
            stats.blocks.as_ref(),
        );
    }
    let passes = split_passes(tiles_path, &stats)?;
    let tile_count = a.tiles.unwrap_or(passes.by_pass[0].0.len() as u32).max(1);
    let measured_tiles = stats.rows.len();
    let mut replay = Replay::new(width, height, stats.estimate, &passes.by_pass);
    if a.cost_scale != 1.0 {
        for v in replay.measured.values.iter_mut() {
            *v = (*v as f64 * a.cost_scale) as f32;
        }
    }
    let serial = replay.serial_s();
    let latency = a.steal_latency_ms * 1e-3;
    let seeds: Vec<u64> = (0..a.seeds as u64).collect();

    print_summary(
        &a,
        tiles_path,
        (width, height),
        &passes,
        measured_tiles,
        tile_count,
        serial,
    );
    if let Some(kinds) = rank_kinds {
        return mixed_cluster_table(&a, &replay, &kinds, tile_count, latency, &seeds);
    }
    if !a.ranks.is_empty() {
        return cluster_table(&a, &replay, tile_count, latency, &seeds);
    }
    if let Some(speeds) = speeds {
        return mixed_table(&a, &replay, &speeds, tile_count, latency, &seeds);
    }
    worker_count_table(&a, &replay, serial, tile_count, latency, &seeds)
}

/// Checks the numeric arguments: counts at least 1, latencies and the cost scale finite and
/// in range.
fn check_args(a: &ScheduleSimArgs) -> anyhow::Result<()> {
    if a.workers.is_empty() || a.workers.contains(&0) {
        anyhow::bail!("--workers: every worker count must be at least 1");
    }
    if a.seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    if !(a.steal_latency_ms >= 0.0 && a.steal_latency_ms.is_finite()) {
        anyhow::bail!("--steal-latency-ms must be a non-negative number");
    }
    if !(a.cost_scale > 0.0 && a.cost_scale.is_finite()) {
        anyhow::bail!("--cost-scale must be a positive number");
    }
    if a.ranks.contains(&0) {
        anyhow::bail!("--ranks: every rank count must be at least 1");
    }
    if !(a.bandwidth_gbit > 0.0 && a.bandwidth_gbit.is_finite()) {
        anyhow::bail!("--bandwidth-gbit must be a positive number");
    }
    if !a.ranks.is_empty() && a.speeds.is_none() && a.workers.len() != 1 {
        anyhow::bail!("--ranks: give one --workers count, the workers of each rank");
    }
    if a.rank_steal_latency_ms
        .iter()
        .any(|l| !(*l >= 0.0 && l.is_finite()))
        || a.rank_steal_latency_ms.is_empty()
    {
        anyhow::bail!("--rank-steal-latency-ms must be non-negative numbers");
    }
    if a.tiles_per_worker == Some(0) {
        anyhow::bail!("--tiles-per-worker must be at least 1");
    }
    if a.tiles == Some(0) {
        anyhow::bail!("--tiles must be at least 1");
    }
    Ok(())
}

/// Parses `--speeds`: with `--ranks`, the workers of each kind of rank; without, the workers
/// of the one process. Checks the simulated workers in all against [`MAX_SIMULATED_WORKERS`].
#[allow(clippy::type_complexity)]
fn parse_worker_speeds(
    a: &ScheduleSimArgs,
) -> anyhow::Result<(Option<Vec<Vec<f64>>>, Option<Vec<f64>>)> {
    // With --ranks, `;` separates the kinds of rank; without, there is one process.
    let rank_kinds: Option<Vec<Vec<f64>>> = match a.speeds.as_deref() {
        Some(list) if !a.ranks.is_empty() => Some(
            list.split(';')
                .map(parse_speeds)
                .collect::<anyhow::Result<_>>()?,
        ),
        Some(list) if list.contains(';') => {
            anyhow::bail!("--speeds: `;` separates kinds of rank, which only --ranks models")
        }
        _ => None,
    };
    let speeds = match (&a.speeds, &rank_kinds) {
        (Some(list), None) => Some(parse_speeds(list)?),
        _ => None,
    };
    // The simulation keeps a deque and an event per simulated worker: bounded like a machine.
    let per_rank = match &rank_kinds {
        Some(kinds) => kinds.iter().map(Vec::len).max().unwrap_or(1),
        None => a.workers.iter().max().copied().unwrap_or(1),
    };
    let most = per_rank.saturating_mul(a.ranks.iter().max().copied().unwrap_or(1));
    if most > MAX_SIMULATED_WORKERS {
        anyhow::bail!(
            "--workers x --ranks: at most {MAX_SIMULATED_WORKERS} simulated workers in all, got {most}"
        );
    }
    Ok((rank_kinds, speeds))
}

/// What a render's statistics files hold: the measured tiles, the estimate, an adaptive
/// render's blocks, and the image size.
struct LoadedStats {
    rows: Vec<TileRow>,
    estimate: CostMap,
    blocks: Option<BlockStops>,
    width: u32,
    height: u32,
}

/// Reads the tiles, the cost map and (when there) the blocks, and checks that every tile lies
/// inside the image.
fn read_stats(files: &StatsFiles) -> anyhow::Result<LoadedStats> {
    let tiles_path = &files.tiles;
    let map_path = costmap_path(&files.costmap);
    let rows = read_tiles(tiles_path)?;
    let estimate = read_costmap(&map_path)?;
    // An adaptive render's blocks: which of them each pass rendered.
    let blocks = if files.blocks.exists() {
        let b = BlockStops::new(&read_blocks(&files.blocks)?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", files.blocks.display()))?;
        Some(b)
    } else {
        None
    };
    let (width, height) = match &blocks {
        Some(b) => b.size(),
        None => (
            rows.iter().map(|r| r.x + r.w).max().unwrap_or(0),
            rows.iter().map(|r| r.y + r.h).max().unwrap_or(0),
        ),
    };
    if let Some(r) = rows
        .iter()
        .find(|r| r.x + r.w > width || r.y + r.h > height)
    {
        anyhow::bail!(
            "{}: the tile at ({}, {}) of pass {} lies outside the {width}x{height} image of {}",
            tiles_path.display(),
            r.x,
            r.y,
            r.pass,
            files.blocks.display()
        );
    }
    Ok(LoadedStats {
        rows,
        estimate,
        blocks,
        width,
        height,
    })
}

/// The measured tiles grouped by pass, each pass's tiles and seconds.
struct MeasuredPasses {
    by_pass: Vec<(Vec<Tile>, Vec<f64>)>,
    /// How many passes the CSV holds.
    count: usize,
    /// How many of them rendered only part of the image.
    part: usize,
}

/// Groups the measured tiles by pass and checks that each pass covers the image, cutting an
/// adaptive render's tiles down to the blocks still sampling.
fn split_passes(tiles_path: &Path, stats: &LoadedStats) -> anyhow::Result<MeasuredPasses> {
    let (rows, width, height) = (&stats.rows, stats.width, stats.height);
    // A resumed render's passes start past 0 (the CSV numbers them from the frame's first).
    let first = rows.iter().map(|r| r.pass).min().unwrap_or(0);
    let passes = rows.iter().map(|r| r.pass).max().unwrap_or(0) + 1 - first;
    let mut by_pass = vec![(Vec::new(), Vec::new()); passes];
    for r in rows {
        by_pass[r.pass - first].0.push(r.tile());
        by_pass[r.pass - first].1.push(r.measured_s);
    }
    // Every pass must cover the image exactly once, or the replayed costs would be wrong;
    // but for the blocks adaptive sampling had stopped, and in a resumed render's first pass
    // (resumed inside, it renders what the stopped run had not).
    let mut part_passes = 0;
    for (p, (tiles, seconds)) in by_pass.iter_mut().enumerate() {
        let area: u64 = tiles.iter().map(|t| t.pixel_count() as u64).sum();
        let image = width as u64 * height as u64;
        let mask = stats
            .blocks
            .as_ref()
            .map(|b| b.mask(p + first))
            .filter(|m| !m.all());
        let may_cover_part = mask.is_some() || p == 0;
        if area > image || (area < image && !may_cover_part) {
            anyhow::bail!(
                "{}: the tiles of pass {} cover {area} pixels, not the image's {}x{}",
                tiles_path.display(),
                p + first,
                width,
                height
            );
        }
        if area < image || mask.is_some() {
            part_passes += 1;
        }
        // A tile that skipped stopped blocks measured its pixels still sampling.
        if let Some(m) = &mask {
            (*tiles, *seconds) =
                crate::sched::rendered_pieces(&stats.estimate, (width, height), tiles, seconds, m);
        }
    }
    Ok(MeasuredPasses {
        by_pass,
        count: passes,
        part: part_passes,
    })
}

/// The first line: what was read and what is simulated.
fn print_summary(
    a: &ScheduleSimArgs,
    tiles_path: &Path,
    (width, height): (u32, u32),
    passes: &MeasuredPasses,
    measured_tiles: usize,
    tile_count: u32,
    serial: f64,
) {
    let (passes, part_passes) = (passes.count, passes.part);
    println!(
        "schedule-sim: {} ({}x{} image, {} pass{}{}, {} measured tiles{}), {}, total work {:.3} ms",
        tiles_path.display(),
        width,
        height,
        passes,
        if passes == 1 { "" } else { "es" },
        match part_passes {
            0 => String::new(),
            n => format!(", {n} over part of the image"),
        },
        measured_tiles,
        if a.cost_scale == 1.0 {
            String::new()
        } else {
            format!(", costs x {}", a.cost_scale)
        },
        match a.tiles_per_worker {
            Some(k) if !a.ranks.is_empty() => format!("{k} simulated tiles per worker"),
            _ => format!("{tile_count} simulated tiles"),
        },
        serial * 1e3
    );
}

/// The table of one process: for each `--workers` count, each strategy of [`ROWS`] with its
/// makespans over the seeds, speed-up and efficiency; then sorted + steal against regular.
fn worker_count_table(
    a: &ScheduleSimArgs,
    replay: &Replay,
    serial: f64,
    tile_count: u32,
    latency: f64,
    seeds: &[u64],
) -> anyhow::Result<()> {
    println!(
        "steal latency {} ms per probe; stealing rows: min / median / max over {} seeds",
        a.steal_latency_ms, a.seeds
    );
    let mut medians = std::collections::HashMap::new();
    for &workers in &a.workers {
        println!();
        println!("{workers} worker{}:", if workers == 1 { "" } else { "s" });
        println!(
            "  {:<20} {:>28} {:>9} {:>22} {:>7}",
            "strategy", "time ms (min / med / max)", "speed-up", "efficiency (min-max)", "steals"
        );
        for (strategy, steal, label) in ROWS {
            let runs: Vec<SimRun> =
                replay.run(strategy, steal, workers, tile_count, latency, seeds);
            let (lo, med, hi) = min_med_max(runs.iter().map(|r| r.makespan).collect());
            let ms = |s: f64| s * 1e3;
            let (elo, _, ehi) = min_med_max(
                runs.iter()
                    .map(|r| serial / (workers as f64 * r.makespan))
                    .collect(),
            );
            let (_, steals, _) = min_med_max(runs.iter().map(|r| r.steals as f64).collect());
            let lost = runs.iter().any(|r| r.ran_by.iter().any(Option::is_none));
            if lost {
                anyhow::bail!(
                    "scheduler bug: a simulated tile was never run ({label}, {workers} workers)"
                );
            }
            println!(
                "  {:<20} {:>8.3} / {:>8.3} / {:>8.3} {:>8.2}x {:>9.1}% - {:>6.1}% {:>7.0}",
                label,
                ms(lo),
                ms(med),
                ms(hi),
                serial / med,
                100.0 * elo,
                100.0 * ehi,
                steals
            );
            medians.insert((workers, label), (lo, med, hi));
        }
        let base = medians.get(&(workers, "regular w/o steal")).map(|m| m.1);
        let sorted = medians.get(&(workers, "sorted + steal"));
        if let (Some(base), Some(&(lo, med, hi))) = (base, sorted) {
            println!(
                "  sorted + steal vs regular w/o steal: {:+.1}% (median; {:+.1}% to {:+.1}% over seeds)",
                100.0 * (base / med - 1.0),
                100.0 * (base / hi - 1.0),
                100.0 * (base / lo - 1.0)
            );
        }
    }
    Ok(())
}

/// The file given exists, and so does the per-tile file it leads to: otherwise an error that
/// says which was given and what is read from it (a mistyped name was reported as the
/// `.tiles.csv` derived from it, a file the user never named).
fn check_stats_given(given: &Path, files: &StatsFiles) -> anyhow::Result<()> {
    if !given.exists() {
        anyhow::bail!(
            "{}: no such file (schedule-sim reads what `render --stats OUT.csv` wrote: give \
             OUT.csv or OUT.tiles.csv)",
            given.display()
        );
    }
    if !files.tiles.exists() {
        anyhow::bail!(
            "{}: no such file: the per-tile times that `render --stats {}` writes beside it, \
             which schedule-sim replays",
            files.tiles.display(),
            files.workers.display()
        );
    }
    Ok(())
}

/// The `--speeds` table: for each strategy with stealing, the fastest workers alone, then all
/// the workers under each [`MixedPlan`]; makespans over the seeds and the ratio of the median
/// to the fastest workers' alone.
fn mixed_table(
    a: &ScheduleSimArgs,
    replay: &Replay,
    speeds: &[f64],
    tile_count: u32,
    latency: f64,
    seeds: &[u64],
) -> anyhow::Result<()> {
    let fastest = speeds.iter().copied().fold(0.0, f64::max);
    let fast: Vec<f64> = speeds.iter().copied().filter(|&s| s == fastest).collect();
    println!(
        "workers of different speeds: {} ({} at the top speed {}); steal latency {} ms per probe; min / median / max over {} seeds",
        a.speeds.as_deref().unwrap_or_default(),
        fast.len(),
        fastest,
        a.steal_latency_ms,
        a.seeds
    );
    println!(
        "  {:<10} {:<32} {:>30} {:>14} {:>14}",
        "strategy", "workers and plan", "time ms (min / med / max)", "vs fastest", "slow tiles"
    );
    for strategy in Strategy::ALL {
        let mut base = None;
        let rows = std::iter::once((format!("{} fastest alone", fast.len()), None)).chain(
            MixedPlan::all(a.slow_worker_pieces)
                .map(|p| (format!("all {}, {}", speeds.len(), p.label()), Some(p))),
        );
        for (label, plan) in rows {
            let (workers, plan) = match plan {
                None => (&fast[..], MixedPlan::Uniform),
                Some(p) => (speeds, p),
            };
            let runs = replay.run_mixed(strategy, true, workers, plan, tile_count, latency, seeds);
            if runs.iter().any(|r| r.ran_by.iter().any(Option::is_none)) {
                anyhow::bail!("scheduler bug: a simulated tile was never run ({label})");
            }
            let (lo, med, hi) = min_med_max(runs.iter().map(|r| r.makespan).collect());
            let base_med = *base.get_or_insert(med);
            // Tiles the workers below the top speed ran (median over the seeds).
            let (_, slow, _) = min_med_max(
                runs.iter()
                    .map(|r| {
                        r.tiles
                            .iter()
                            .zip(workers)
                            .filter(|(_, &s)| s < fastest)
                            .map(|(t, _)| *t as f64)
                            .sum::<f64>()
                            + 0.0 // an empty sum is -0.0
                    })
                    .collect(),
            );
            println!(
                "  {:<10} {:<32} {:>8.3} / {:>8.3} / {:>8.3} {:>13.2}x {:>14.0}",
                strategy.name(),
                label,
                lo * 1e3,
                med * 1e3,
                hi * 1e3,
                med / base_med,
                slow
            );
        }
    }
    Ok(())
}

/// The `--ranks` table of ranks of different speeds (`kinds`, taking turns over the ranks):
/// one row per rank count, cross-rank latency and strategy (with stealing), one column per
/// [`MixedPlan`], each the median makespan over the seeds with its ratio to equal shares';
/// then the tiles moved across ranks.
fn mixed_cluster_table(
    a: &ScheduleSimArgs,
    replay: &Replay,
    kinds: &[Vec<f64>],
    tile_count: u32,
    local_latency: f64,
    seeds: &[u64],
) -> anyhow::Result<()> {
    use crate::sched::sim::replay_mixed_cluster;
    print_mixed_cluster_head(a, kinds, tile_count);
    for &ranks in &a.ranks {
        let speeds: Vec<Vec<f64>> = (0..ranks).map(|r| kinds[r % kinds.len()].clone()).collect();
        let total_workers: usize = speeds.iter().map(Vec::len).sum();
        let tiles = cluster_tiles(a, total_workers, tile_count);
        for &latency_ms in &a.rank_steal_latency_ms {
            for strategy in Strategy::ALL {
                let mut cells = Vec::new();
                let mut equal = None;
                for plan in MixedPlan::all(a.slow_worker_pieces) {
                    let runs = replay_mixed_cluster(
                        replay,
                        strategy,
                        &speeds,
                        plan,
                        local_latency,
                        latency_ms * 1e-3,
                        tiles,
                        seeds,
                    );
                    if runs.iter().any(|r| r.ran_by.iter().any(Option::is_none)) {
                        anyhow::bail!(
                            "scheduler bug: a simulated tile was never run ({}, {}, {ranks} ranks)",
                            strategy.name(),
                            plan.label()
                        );
                    }
                    let (lo, med, hi) = min_med_max(runs.iter().map(|r| r.makespan).collect());
                    let base = *equal.get_or_insert(med);
                    let (_, moved, _) =
                        min_med_max(runs.iter().map(|r| r.tiles_moved as f64).collect());
                    cells.push(format!(
                        "{:>9.3} ({:.3}-{:.3}) {:>5.2}x {:>5.0}",
                        med * 1e3,
                        lo * 1e3,
                        hi * 1e3,
                        med / base,
                        moved
                    ));
                }
                println!(
                    "{:>5} {:>7} {:>6} {:>6} ms {:<9} | {}",
                    ranks,
                    total_workers,
                    tiles,
                    latency_ms,
                    strategy.name(),
                    cells.join(" ")
                );
            }
        }
    }
    Ok(())
}

/// The head of the mixed cluster table: the model, what the cells hold, the column names.
fn print_mixed_cluster_head(a: &ScheduleSimArgs, kinds: &[Vec<f64>], tile_count: u32) {
    println!(
        "mixed cluster: rank r is kind r mod {} of {}; a steal probe within a rank costs {} ms, a steal across ranks one round trip of the latency in each row",
        kinds.len(),
        a.speeds.as_deref().unwrap_or_default(),
        a.steal_latency_ms
    );
    println!(
        "makespan ms, median over {} seeds (min - max), and its ratio to equal shares'; tiles moved across ranks, median; {}",
        a.seeds,
        tiles_text(a, tile_count)
    );
    println!();
    println!(
        "{:>5} {:>7} {:>6} {:>9} {:<9} | {}",
        "ranks",
        "workers",
        "tiles",
        "latency",
        "strategy",
        MixedPlan::all(a.slow_worker_pieces)
            .map(|p| format!("{:>36}", p.label()))
            .join(" ")
    );
}

/// How many tiles a simulated cluster cuts: `--tiles-per-worker` for each of its
/// `total_workers`, else `tile_count`.
fn cluster_tiles(a: &ScheduleSimArgs, total_workers: usize, tile_count: u32) -> u32 {
    match a.tiles_per_worker {
        Some(k) => (k as usize * total_workers).min(u32::MAX as usize) as u32,
        None => tile_count,
    }
}

/// The tiles of the cluster tables' heads: per worker, or in all.
fn tiles_text(a: &ScheduleSimArgs, tile_count: u32) -> String {
    match a.tiles_per_worker {
        Some(k) => format!("{k} tiles per worker"),
        None => format!("{tile_count} tiles"),
    }
}

/// The cluster model's table: one row per rank count and cross-rank latency, one column per
/// strategy, each cell the median efficiency over the seeds; then the tiles moved across
/// ranks by the stealing strategies.
fn cluster_table(
    a: &ScheduleSimArgs,
    replay: &Replay,
    tile_count: u32,
    local_latency: f64,
    seeds: &[u64],
) -> anyhow::Result<()> {
    use crate::sched::sim::{replay_cluster, ClusterModel, SimRun};
    let workers = a.workers[0];
    print_cluster_head(a, workers, tile_count);
    let mut moved_rows = Vec::new();
    let mut link_rows = Vec::new();
    for &ranks in &a.ranks {
        let total_workers = ranks * workers;
        let tiles = cluster_tiles(a, total_workers, tile_count);
        let mut pass_s = f64::NAN;
        for &latency_ms in &a.rank_steal_latency_ms {
            let model = ClusterModel {
                ranks,
                workers,
                local_latency,
                rank_latency: latency_ms * 1e-3,
            };
            let mut cells = Vec::new();
            let mut moved = Vec::new();
            for (strategy, steal, label) in ROWS {
                let runs: Vec<SimRun> =
                    replay_cluster(replay, strategy, steal, model, tiles, 1.0, seeds);
                if runs.iter().any(|r| r.ran_by.iter().any(Option::is_none)) {
                    anyhow::bail!(
                        "scheduler bug: a simulated tile was never run ({label}, {ranks} ranks)"
                    );
                }
                let (_, eff, _) = min_med_max(runs.iter().map(SimRun::efficiency).collect());
                if (strategy, steal) == (Strategy::Sorted, true) && pass_s.is_nan() {
                    pass_s = min_med_max(runs.iter().map(|r| r.makespan).collect()).1;
                }
                cells.push(format!("{:>17.1}%", 100.0 * eff));
                if steal {
                    let (_, tiles_moved, _) =
                        min_med_max(runs.iter().map(|r| r.tiles_moved as f64).collect());
                    let (_, transfers, _) =
                        min_med_max(runs.iter().map(|r| r.transfers as f64).collect());
                    moved.push(format!("{:>10.0} ({:>5.0})", tiles_moved, transfers));
                }
            }
            println!(
                "{:>5} {:>7} {:>6} {:>6} ms | {}",
                ranks,
                total_workers,
                tiles,
                latency_ms,
                cells.join(" ")
            );
            moved_rows.push((ranks, latency_ms, moved));
        }
        link_rows.push(link_row(replay, (ranks, workers), tiles, pass_s));
    }
    print_moved_table(moved_rows);
    print_link_table(a.bandwidth_gbit, &link_rows);
    Ok(())
}

/// One rank count's row of the link table: (ranks, tiles, rank 0's bytes a pass, the median
/// makespan of a pass under `sorted + steal`).
fn link_row(
    replay: &Replay,
    (ranks, workers): (usize, usize),
    tiles: u32,
    pass_s: f64,
) -> (usize, usize, crate::sched::link::PassBytes, f64) {
    let (layout, estimated, _) = replay.tiles(Strategy::Sorted, tiles);
    let weights = vec![1.0; (ranks * workers).max(1)];
    let deques = crate::sched::policy::initial_deques(Strategy::Sorted, &estimated, &weights);
    let bytes = crate::sched::link::pass_bytes(&layout, &deques, workers);
    (ranks, layout.len(), bytes, pass_s)
}

/// The cluster model's third table: per rank count, what passes through rank 0's link in a
/// pass, and its time on a link of `gbit`, now and as the funnel of before, against the
/// pass's makespan.
fn print_link_table(gbit: f64, rows: &[(usize, usize, crate::sched::link::PassBytes, f64)]) {
    use crate::sched::link::seconds_on;
    println!();
    println!(
        "rank 0's link a pass at {gbit} Gbit/s (plans out; tiles' news and statistics in), \
         against the makespan of a pass (sorted + steal, median); before: each tile's pixels in \
         and out again, every task's cost in every plan"
    );
    println!(
        "{:>5} {:>6} | {:>12} {:>9} | {:>12} {:>9} | {:>9} | {:>12}",
        "ranks", "tiles", "bytes", "ms", "before", "ms", "pass ms", "film once"
    );
    for &(ranks, tiles, b, pass_s) in rows {
        println!(
            "{ranks:>5} {tiles:>6} | {:>12} {:>9.3} | {:>12} {:>9.3} | {:>9.3} | {:>12}",
            b.per_pass(),
            1e3 * seconds_on(b.per_pass(), gbit),
            b.funnel,
            1e3 * seconds_on(b.funnel, gbit),
            1e3 * pass_s,
            b.gathered,
        );
    }
}

/// The head of the cluster model's table: the model, what the cells hold, the column names.
fn print_cluster_head(a: &ScheduleSimArgs, workers: usize, tile_count: u32) {
    println!(
        "cluster model: {workers} workers per rank; a steal probe within a rank costs {} ms, a steal across ranks one round trip of the latency in each row",
        a.steal_latency_ms
    );
    println!(
        "efficiency = busy / (workers x makespan), median over {} seeds (1 run without stealing); {}",
        a.seeds,
        tiles_text(a, tile_count)
    );
    println!();
    let head: Vec<&str> = ROWS.iter().map(|r| r.2).collect();
    println!(
        "{:>5} {:>7} {:>6} {:>9} | {}",
        "ranks",
        "workers",
        "tiles",
        "latency",
        head.iter()
            .map(|h| format!("{h:>18}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// The cluster model's second table: per rank count and latency, the tiles each stealing
/// strategy moved across ranks (`moved_rows`, cells already formatted).
fn print_moved_table(moved_rows: Vec<(usize, f64, Vec<String>)>) {
    println!();
    println!("tiles moved across ranks, median (transfers that carried them):");
    let steal_heads: Vec<&str> = ROWS.iter().filter(|r| r.1).map(|r| r.2).collect();
    println!(
        "{:>5} {:>9} | {}",
        "ranks",
        "latency",
        steal_heads
            .iter()
            .map(|h| format!("{h:>18}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (ranks, latency_ms, moved) in moved_rows {
        println!("{ranks:>5} {latency_ms:>6} ms | {}", moved.join(" "));
    }
}
