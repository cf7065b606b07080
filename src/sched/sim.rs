//! The discrete-event executor: replays tile costs through the scheduling policy for any
//! number of simulated workers, with a latency charged to every steal probe.
//!
//! It drives the very same [`WorkQueues`] as the threaded executor: at each event (a worker
//! becoming free) it asks the policy what that worker does next. By default workers are
//! identical in speed: a tile costs its measured time whoever runs it. [`simulate_mixed`] gives
//! each worker a speed (a GPU beside CPU threads) and, optionally, the steal guard the
//! scheduler runs when it knows the speeds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::costmap::CostMap;
use super::policy::{self, StealRng, WorkQueues};
use super::sat::MapScale;
use super::tiles::{self, Strategy};
use crate::render::Tile;

/// The outcome of one simulated pass.
#[derive(Clone, Debug, PartialEq)]
pub struct SimRun {
    /// When the last tile finished.
    pub makespan: f64,
    /// Each worker's time spent rendering (steal latency excluded).
    pub busy: Vec<f64>,
    /// Tiles each worker rendered.
    pub tiles: Vec<usize>,
    /// Tiles that moved by stealing.
    pub steals: usize,
    /// For each task, the worker that ran it (to check that nothing is lost or doubled).
    pub ran_by: Vec<Option<usize>>,
}

impl SimRun {
    /// Total busy time over workers times makespan.
    pub fn efficiency(&self) -> f64 {
        crate::sched::report::efficiency(self.busy.iter().sum(), self.busy.len(), self.makespan)
    }
}

/// A time as a totally ordered heap key (times are finite and non-negative).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Time(pub(crate) f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Simulates one pass: tasks cost `costs[task]` seconds, workers start with `deques` (front
/// first), stealing as `steal` says, each steal probe taking `steal_latency` seconds; `seed`
/// drives the victim choices. Ties between simultaneous events go to the lower worker index.
pub fn simulate(
    costs: &[f64],
    deques: Vec<Vec<usize>>,
    steal: bool,
    steal_latency: f64,
    seed: u64,
) -> SimRun {
    let workers = deques.len();
    simulate_mixed(
        costs,
        deques,
        steal,
        steal_latency,
        seed,
        &vec![1.0; workers],
        None,
    )
}

/// What the scheduler knows when it guards steals ([`WorkQueues::with_speeds`]): the
/// workers' speeds and the tasks' estimated costs (which may differ from the true ones).
#[derive(Clone, Copy, Debug)]
pub struct Guard<'a> {
    pub speeds: &'a [f64],
    pub estimated: &'a [f64],
    /// Each task's floor ([`WorkQueues::with_task_floors`]); empty: the mean task's cost.
    pub floors: &'a [f64],
}

/// [`simulate`] with worker speeds: task `t` takes `costs[t] / speeds[w]` seconds on worker
/// `w` (`busy` counts those seconds). With `guard`, steals are refused where the guard says
/// the owner finishes the task sooner, as in a real render that knows the speeds.
pub fn simulate_mixed(
    costs: &[f64],
    deques: Vec<Vec<usize>>,
    steal: bool,
    steal_latency: f64,
    seed: u64,
    speeds: &[f64],
    guard: Option<Guard>,
) -> SimRun {
    let workers = deques.len();
    let mut queues = WorkQueues::new(deques, steal);
    if let Some(g) = guard {
        queues = queues
            .with_speeds(g.speeds, g.estimated)
            .with_task_floors(g.floors);
    }
    let speed = |w: usize| match speeds.get(w) {
        Some(&s) if s.is_finite() && s > 0.0 => s,
        _ => 1.0,
    };
    let mut rngs: Vec<StealRng> = (0..workers).map(|w| StealRng::new(seed, w, 0)).collect();
    let mut events: BinaryHeap<Reverse<(Time, usize)>> =
        (0..workers).map(|w| Reverse((Time(0.0), w))).collect();
    let mut run = SimRun {
        makespan: 0.0,
        busy: vec![0.0; workers],
        tiles: vec![0; workers],
        steals: 0,
        ran_by: vec![None; costs.len()],
    };
    while let Some(Reverse((Time(now), w))) = events.pop() {
        let Some(take) = queues.next(w, &mut rngs[w]) else {
            continue;
        };
        let start = now + take.probes as f64 * steal_latency.max(0.0);
        let seconds = costs[take.task].max(0.0) / speed(w);
        let end = start + seconds;
        run.busy[w] += seconds;
        run.tiles[w] += 1;
        if take.stolen_from.is_some() {
            run.steals += 1;
        }
        if run.ran_by[take.task].replace(w).is_some() {
            // Cannot happen with a sound policy; make it loud in tests.
            panic!("task {} handed out twice", take.task);
        }
        run.makespan = run.makespan.max(end);
        events.push(Reverse((Time(end), w)));
    }
    run
}

/// What a replay knows about a rendered frame: its size, the estimate it was planned with,
/// and the measured cost spread over the image.
#[derive(Clone, Debug)]
pub struct Replay {
    pub width: u32,
    pub height: u32,
    /// The estimated cost map (what the scheduler plans with).
    pub estimate: CostMap,
    /// The measured cost (seconds) on the estimate's grid: what simulated tiles cost.
    pub measured: CostMap,
}

impl Replay {
    /// Builds the measured map from the tiles of one or more passes and their times: each
    /// tile's time is spread over its cells along the estimate's shape, and passes add up
    /// ([`CostMap::corrected`]). Any tiling can then be costed; the render's own tiles (when
    /// their edges fall on cell edges) cost exactly what was measured. The finer the render's
    /// tiles, the more faithful the costs of other tilings.
    pub fn new(
        width: u32,
        height: u32,
        estimate: CostMap,
        passes: &[(Vec<Tile>, Vec<f64>)],
    ) -> Replay {
        let mut measured = CostMap::uniform(estimate.width, estimate.height, 0.0);
        for (tiles, seconds) in passes {
            let m = estimate.corrected((width, height), tiles, seconds);
            for (acc, v) in measured.values.iter_mut().zip(&m.values) {
                *acc += v;
            }
        }
        Replay {
            width,
            height,
            estimate,
            measured,
        }
    }

    /// The total measured work: the time of one worker.
    pub fn serial_s(&self) -> f64 {
        self.measured.sat().total()
    }

    /// The tiles of a simulated frame: `tile_count` tiles cut under `strategy` from the
    /// estimate, each with its estimated cost (what the plan sees) and its actual cost in
    /// seconds (from the measurements).
    pub fn tiles(&self, strategy: Strategy, tile_count: u32) -> (Vec<Tile>, Vec<f64>, Vec<f64>) {
        self.tiles_cut(strategy, tile_count, &[], 0)
    }

    /// [`Replay::tiles`], then cut for the slow ones of workers of `speeds` into `pieces` each
    /// ([`tiles::cut_for_slow_workers`], as a render that knows the speeds does). Speeds say
    /// nothing of launch work, so no piece floors: a simulated slow worker is cut as a CPU
    /// thread is, where a render would keep a slow GPU's pieces at its launch work.
    pub fn tiles_cut(
        &self,
        strategy: Strategy,
        tile_count: u32,
        speeds: &[f64],
        pieces: u32,
    ) -> (Vec<Tile>, Vec<f64>, Vec<f64>) {
        let scale = MapScale::between(
            (self.width, self.height),
            (self.estimate.width, self.estimate.height),
        );
        let (est_sat, real_sat) = (self.estimate.sat(), self.measured.sat());
        let layout = tiles::layout(
            strategy,
            self.width,
            self.height,
            Some(tile_count),
            &est_sat,
            scale,
        );
        let layout = tiles::cut_for_slow_workers(layout, speeds, &[], pieces, &est_sat, scale);
        let estimated: Vec<f64> = layout
            .iter()
            .map(|t| scale.tile_cost(&est_sat, *t))
            .collect();
        let actual: Vec<f64> = layout
            .iter()
            .map(|t| scale.tile_cost(&real_sat, *t))
            .collect();
        (layout, estimated, actual)
    }

    /// Simulates one configuration: `tile_count` tiles cut under `strategy` from the
    /// estimate, assigned to `workers` equal workers by the render's policy, once per seed
    /// (once only without stealing: nothing is random then).
    pub fn run(
        &self,
        strategy: Strategy,
        steal: bool,
        workers: usize,
        tile_count: u32,
        steal_latency_s: f64,
        seeds: &[u64],
    ) -> Vec<SimRun> {
        let (_, estimated, actual) = self.tiles(strategy, tile_count);
        let deques = policy::initial_deques(strategy, &estimated, &vec![1.0; workers.max(1)]);
        seeds_to_run(steal, workers, seeds)
            .iter()
            .map(|&seed| simulate(&actual, deques.clone(), steal, steal_latency_s, seed))
            .collect()
    }
}

/// How [`Replay::run_mixed`] plans a pass for workers of different speeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixedPlan {
    /// Equal shares and unguarded steals: a first pass that knows no speeds.
    Uniform,
    /// Shares by speed, steals unguarded.
    BySpeed,
    /// Shares by speed and the steal guard, on the tiles as laid out (`--slow-worker-pieces 0`).
    BySpeedGuarded,
    /// Shares by speed and the steal guard, the slow workers' shares cut into this many pieces
    /// each ([`tiles::cut_for_slow_workers`]): what a render does once the speeds are known
    /// (calibrated before the first pass of a mixed render, measured after every pass).
    BySpeedGuardedCut(u32),
}

impl MixedPlan {
    /// Every plan, the cut one into `pieces` per slow worker.
    pub fn all(pieces: u32) -> [MixedPlan; 4] {
        [
            MixedPlan::Uniform,
            MixedPlan::BySpeed,
            MixedPlan::BySpeedGuarded,
            MixedPlan::BySpeedGuardedCut(pieces),
        ]
    }

    pub fn label(self) -> &'static str {
        match self {
            MixedPlan::Uniform => "equal shares",
            MixedPlan::BySpeed => "shares by speed",
            MixedPlan::BySpeedGuarded => "by speed + guard",
            MixedPlan::BySpeedGuardedCut(_) => "by speed + guard + cut",
        }
    }

    /// Whether the shares follow the speeds (else equal shares).
    pub fn by_speed(self) -> bool {
        self != MixedPlan::Uniform
    }

    /// Whether steals are guarded by the speeds.
    pub fn guarded(self) -> bool {
        matches!(
            self,
            MixedPlan::BySpeedGuarded | MixedPlan::BySpeedGuardedCut(_)
        )
    }

    /// The pieces per slow worker the tiles are cut into under `strategy` (0: not cut).
    pub fn pieces(self, strategy: Strategy) -> u32 {
        match self {
            MixedPlan::BySpeedGuardedCut(pieces) => tiles::slow_worker_pieces(strategy, pieces),
            _ => 0,
        }
    }
}

impl Replay {
    /// Simulates workers of different speeds: a tile costs its measured time over the
    /// worker's speed (`speeds`, 1 for the render's own workers), planned as `plan` says, once
    /// per seed (once without stealing).
    #[allow(clippy::too_many_arguments)]
    pub fn run_mixed(
        &self,
        strategy: Strategy,
        steal: bool,
        speeds: &[f64],
        plan: MixedPlan,
        tile_count: u32,
        steal_latency_s: f64,
        seeds: &[u64],
    ) -> Vec<SimRun> {
        let (layout, estimated, actual) =
            self.tiles_cut(strategy, tile_count, speeds, plan.pieces(strategy));
        let floors = tiles::area_floors(&layout, &estimated);
        let equal = vec![1.0; speeds.len().max(1)];
        let weights = if plan.by_speed() { speeds } else { &equal[..] };
        let deques = policy::initial_deques(strategy, &estimated, weights);
        let guard = plan.guarded().then_some(Guard {
            speeds,
            estimated: &estimated,
            floors: &floors,
        });
        seeds_to_run(steal, speeds.len(), seeds)
            .iter()
            .map(|&seed| {
                simulate_mixed(
                    &actual,
                    deques.clone(),
                    steal,
                    steal_latency_s,
                    seed,
                    speeds,
                    guard,
                )
            })
            .collect()
    }
}

/// The seeds a configuration runs with: all of them when stealing makes runs differ, else one
/// (a run without stealing is deterministic).
pub fn seeds_to_run(steal: bool, workers: usize, seeds: &[u64]) -> &[u64] {
    if steal && workers > 1 {
        seeds
    } else {
        &seeds[..seeds.len().min(1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::policy;

    #[test]
    fn one_worker_is_fully_efficient() {
        let costs = [1.0, 2.0, 3.0];
        let r = simulate(&costs, vec![vec![0, 1, 2]], true, 0.5, 7);
        assert_eq!(r.makespan, 6.0);
        assert_eq!(r.efficiency(), 1.0);
        assert_eq!(r.steals, 0);
    }

    /// The H100 case of 2026-11-24: two GPU streams and sixteen CPU threads about 200 times
    /// slower, fifteen GPU-sized tiles.
    fn h100_like() -> (Vec<f64>, Vec<f64>) {
        let costs: Vec<f64> = (0..15).map(|i| 0.6 + 0.05 * i as f64).collect();
        let mut speeds = vec![1.0, 1.0];
        speeds.extend([0.005; 16]);
        (costs, speeds)
    }

    #[test]
    fn equal_shares_let_slow_workers_hold_up_the_frame() {
        let (costs, speeds) = h100_like();
        let deques = policy::initial_deques(Strategy::Sorted, &costs, &[1.0; 18]);
        let r = simulate_mixed(&costs, deques, true, 0.0, 1, &speeds, None);
        // A CPU thread took a tile: at least 0.6 / 0.005 = 120 time units.
        assert!(r.makespan >= 120.0, "{}", r.makespan);
    }

    #[test]
    fn shares_by_speed_and_the_guard_match_the_fast_workers_alone() {
        let (costs, speeds) = h100_like();
        let fast_alone = {
            let deques = policy::initial_deques(Strategy::Sorted, &costs, &[1.0, 1.0]);
            simulate_mixed(&costs, deques, true, 0.0, 1, &[1.0, 1.0], None).makespan
        };
        for seed in 0..20 {
            let deques = policy::initial_deques(Strategy::Sorted, &costs, &speeds);
            let guard = Guard {
                speeds: &speeds,
                estimated: &costs,
                floors: &[],
            };
            let r = simulate_mixed(&costs, deques, true, 0.0, seed, &speeds, Some(guard));
            assert!(
                r.makespan <= fast_alone + 1e-12,
                "seed {seed}: {} > {fast_alone}",
                r.makespan
            );
            assert!(r.tiles[2..].iter().all(|&t| t == 0), "{:?}", r.tiles);
            assert!(r.ran_by.iter().all(Option::is_some));
        }
    }

    #[test]
    fn with_enough_tiles_slow_workers_still_help() {
        let costs = vec![0.01; 3000];
        let mut speeds = vec![1.0, 1.0];
        speeds.extend([0.005; 16]);
        let fast_alone = {
            let deques = policy::initial_deques(Strategy::Sorted, &costs, &[1.0, 1.0]);
            simulate_mixed(&costs, deques, true, 0.0, 1, &[1.0, 1.0], None).makespan
        };
        let deques = policy::initial_deques(Strategy::Sorted, &costs, &speeds);
        let guard = Guard {
            speeds: &speeds,
            estimated: &costs,
            floors: &[],
        };
        let r = simulate_mixed(&costs, deques, true, 0.0, 3, &speeds, Some(guard));
        assert!(r.tiles[2..].iter().sum::<usize>() > 0, "{:?}", r.tiles);
        // 2 + 16 x 0.005 = 2.08 units of speed against 2: 3.8% sooner, less a tile's rounding.
        assert!(
            r.makespan < fast_alone * 0.98,
            "{} against {fast_alone}",
            r.makespan
        );
    }

    /// The H100 case again, replayed on a 640 x 360 frame of uniform cost (1 s of work for
    /// one worker): fifteen GPU-sized tiles leave the CPU threads idle, and the same tiles cut
    /// for them ([`MixedPlan::BySpeedGuardedCut`]) let them help.
    #[test]
    fn tiles_cut_for_slow_workers_let_them_help() {
        let estimate = CostMap::uniform(64, 36, 1.0);
        let whole = Tile {
            x: 0,
            y: 0,
            w: 640,
            h: 360,
        };
        let replay = Replay::new(640, 360, estimate, &[(vec![whole], vec![1.0])]);
        let (_, speeds) = h100_like();
        let seeds: Vec<u64> = (0..10).collect();
        let fast_alone = replay.run_mixed(
            Strategy::Sorted,
            true,
            &[1.0, 1.0],
            MixedPlan::BySpeed,
            15,
            0.0,
            &seeds,
        )[0]
        .makespan;
        let run = |plan| replay.run_mixed(Strategy::Sorted, true, &speeds, plan, 15, 0.0, &seeds);
        let slow_tiles = |r: &SimRun| r.tiles[2..].iter().sum::<usize>();
        for r in run(MixedPlan::BySpeedGuarded) {
            assert_eq!(slow_tiles(&r), 0, "{:?}", r.tiles);
            assert!(r.makespan >= fast_alone - 1e-9);
        }
        // 2 + 16 x 0.005 = 2.08 of speed against 2: at best 3.8% sooner.
        for r in run(MixedPlan::BySpeedGuardedCut(8)) {
            assert!(r.ran_by.iter().all(Option::is_some), "a tile never ran");
            assert!(slow_tiles(&r) >= 16, "{:?}", r.tiles);
            assert!(
                r.makespan < fast_alone * 0.985,
                "{} against {fast_alone}",
                r.makespan
            );
        }
        // Regular knows no costs and cuts nothing: as the uncut plan.
        let regular =
            |plan| replay.run_mixed(Strategy::Regular, true, &speeds, plan, 15, 0.0, &seeds);
        assert_eq!(
            regular(MixedPlan::BySpeedGuardedCut(8)),
            regular(MixedPlan::BySpeedGuarded)
        );
    }

    #[test]
    fn stealing_rebalances_a_lopsided_start() {
        let costs = [1.0; 8];
        let deques = vec![(0..8).collect(), vec![]];
        let without = simulate(&costs, deques.clone(), false, 0.0, 1);
        assert_eq!(without.makespan, 8.0);
        let with = simulate(&costs, deques, true, 0.0, 1);
        assert_eq!(with.makespan, 4.0);
        assert_eq!(with.steals, 4);
        // Latency delays every stolen tile.
        let slow = simulate(&costs, vec![(0..8).collect(), vec![]], true, 0.5, 1);
        assert!(slow.makespan > 4.0);
    }
}
