//! `gasworks schedule-sim`: replays the measured tile costs of a real render through the
//! scheduler for simulated worker counts, like the paper's Table 2.
//!
//! It reads the files a render wrote with `--stats OUT.csv` (`OUT.tiles.csv`: measured
//! tiles; `OUT.costmap.csv`: the estimate), rebuilds the measured cost over the image, and
//! for each strategy, with and without stealing, and each worker count, cuts the tiles, makes
//! the initial assignment and runs the same policy code as a real render in a discrete-event
//! simulation (steal probes cost `--steal-latency-ms`). Stealing picks random victims, so
//! those rows give min / median / max over `--seeds` runs.

use std::path::PathBuf;

use clap::Args;

use crate::sched::report::{read_costmap, read_tiles, sibling_paths};
use crate::sched::sim::{Replay, SimRun};
use crate::sched::Strategy;

#[derive(Args, Debug)]
pub struct ScheduleSimArgs {
    /// The statistics of a render: the OUT.csv given to `render --stats` (its OUT.tiles.csv
    /// and OUT.costmap.csv are read), or OUT.tiles.csv itself
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

pub fn run(a: ScheduleSimArgs) -> anyhow::Result<()> {
    if a.workers.is_empty() || a.workers.contains(&0) {
        anyhow::bail!("--workers: every worker count must be at least 1");
    }
    if a.seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    if !(a.steal_latency_ms >= 0.0 && a.steal_latency_ms.is_finite()) {
        anyhow::bail!("--steal-latency-ms must be a non-negative number");
    }
    let name = a.stats.to_string_lossy();
    let (tiles_path, map_path) = if let Some(stem) = name.strip_suffix(".tiles.csv") {
        (
            a.stats.clone(),
            PathBuf::from(format!("{stem}.costmap.csv")),
        )
    } else {
        sibling_paths(&a.stats)
    };
    let rows = read_tiles(&tiles_path)?;
    let estimate = read_costmap(&map_path)?;
    let width = rows.iter().map(|r| r.x + r.w).max().unwrap_or(0);
    let height = rows.iter().map(|r| r.y + r.h).max().unwrap_or(0);
    let passes = rows.iter().map(|r| r.pass).max().unwrap_or(0) + 1;
    let mut by_pass = vec![(Vec::new(), Vec::new()); passes];
    for r in &rows {
        by_pass[r.pass].0.push(r.tile());
        by_pass[r.pass].1.push(r.measured_s);
    }
    // Every pass must cover the image exactly once, or the replayed costs would be wrong.
    for (p, (tiles, _)) in by_pass.iter().enumerate() {
        let area: u64 = tiles.iter().map(|t| t.pixel_count() as u64).sum();
        if area != width as u64 * height as u64 {
            anyhow::bail!(
                "{}: the tiles of pass {p} cover {area} pixels, not the image's {}x{}",
                tiles_path.display(),
                width,
                height
            );
        }
    }
    let tile_count = a.tiles.unwrap_or(by_pass[0].0.len() as u32).max(1);
    let replay = Replay::new(width, height, estimate, &by_pass);
    let serial = replay.serial_s();
    let latency = a.steal_latency_ms * 1e-3;
    let seeds: Vec<u64> = (0..a.seeds as u64).collect();

    println!(
        "schedule-sim: {} ({}x{} image, {} pass{}, {} measured tiles), {} simulated tiles, total work {:.3} ms",
        tiles_path.display(),
        width,
        height,
        passes,
        if passes == 1 { "" } else { "es" },
        rows.len(),
        tile_count,
        serial * 1e3
    );
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
                replay.run(strategy, steal, workers, tile_count, latency, &seeds);
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
