//! The discrete-event model of the scheduler: replays tile costs through the scheduling
//! policy for any number of simulated workers and ranks (`gasworks schedule-sim`, and its
//! `--ranks`), with a latency charged to every steal probe within a rank and to every steal
//! across ranks.
//!
//! It drives the same [`WorkQueues`], victim search, grant size and placement of received
//! tiles as the real ranks ([`super::rank`], [`super::rank_policy`]), so the simulated
//! decisions are the real ones. Each rank has its own deques; its workers steal from each
//! other as in one process (each probe of another local deque costs `local_latency`); a rank
//! whose deques are empty sends one request at a time to a random rank, which reaches the
//! victim after half the round trip `rank_latency`; the victim gives tiles from its cheap
//! end there and then, and they arrive after the other half. Workers of a rank with nothing
//! to do wait for tiles to arrive. One process is one rank. What it leaves out is the plan's
//! delivery at the start and the tiles' news on their way to rank 0 (both overlap with
//! rendering in the real protocol); [`super::link`] counts their bytes on rank 0's link.
//!
//! By default workers are identical in speed: a tile costs its measured time whoever runs it.
//! [`simulate_mixed`] and [`simulate_mixed_cluster`] give each worker a speed (a GPU beside
//! CPU threads, GPU ranks beside CPU ranks) and, optionally, the steal guards the scheduler
//! runs when it knows the speeds: within a rank by [`WorkQueues::with_speeds`], across ranks
//! by the [`GrantGuard`] of the thief's fastest worker.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::costmap::CostMap;
use super::policy::{self, StealRng, WorkQueues};
use super::rank_policy::{accept, give_away, GrantGuard, VictimSearch};
use super::sat::MapScale;
use super::tiles::{self, Strategy};
use crate::render::Tile;

/// The outcome of one simulated pass.
#[derive(Clone, Debug, PartialEq)]
pub struct SimRun {
    /// When the last tile finished.
    pub makespan: f64,
    /// Each (global) worker's time spent rendering (steal latency excluded).
    pub busy: Vec<f64>,
    /// Tiles each worker rendered.
    pub tiles: Vec<usize>,
    /// Tiles taken from another worker's deque of the same rank.
    pub steals: usize,
    /// Steal requests sent across ranks, the answers that carried tiles, and the tiles moved.
    pub requests: usize,
    pub transfers: usize,
    pub tiles_moved: usize,
    /// For each task, the (global) worker that ran it (to check that nothing is lost or
    /// doubled).
    pub ran_by: Vec<Option<usize>>,
}

impl SimRun {
    /// Total busy time over (all workers x makespan).
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

/// What the scheduler knows when it guards steals ([`WorkQueues::with_speeds`], and across
/// ranks [`GrantGuard`]): the tasks' estimated costs (which may differ from the true ones),
/// weighed with the workers' speeds.
#[derive(Clone, Copy, Debug)]
pub struct Guard<'a> {
    pub estimated: &'a [f64],
    /// Each task's floor ([`WorkQueues::with_task_floors`]); empty: the mean task's cost.
    pub floors: &'a [f64],
}

/// Simulates one pass of one process: tasks cost `costs[task]` seconds, workers start with
/// `deques` (front first), stealing as `steal` says, each steal probe taking `steal_latency`
/// seconds; `seed` drives the victim choices. Ties between simultaneous events go to the
/// lower worker index.
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
    let mut all = speeds.to_vec();
    all.resize(deques.len(), 1.0);
    let one = [all];
    let cluster = MixedCluster {
        speeds: &one,
        local_latency: steal_latency,
        rank_latency: 0.0,
        guard,
    };
    simulate_mixed_cluster(costs, deques, cluster, steal, seed)
}

/// The cluster being modelled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClusterModel {
    pub ranks: usize,
    /// Workers per rank.
    pub workers: usize,
    /// Seconds per probe of another deque within a rank.
    pub local_latency: f64,
    /// Seconds of one steal across ranks: request there, answer back.
    pub rank_latency: f64,
}

enum Event {
    /// A worker finished its tile (or starts): it asks its rank's queues what to do next.
    WorkerFree { rank: usize, local: usize },
    /// A steal request reaches the victim.
    Request { victim: usize, thief: usize },
    /// The victim's answer reaches the thief.
    Grant { thief: usize, tasks: Vec<usize> },
}

struct Rank {
    queues: WorkQueues,
    rngs: Vec<StealRng>,
    search: VictimSearch,
    outstanding: bool,
    /// Local workers waiting for tiles.
    idle: Vec<usize>,
}

/// Ranks of workers of different speeds, for [`simulate_mixed_cluster`].
#[derive(Clone, Copy, Debug)]
pub struct MixedCluster<'a> {
    /// Each rank's workers' speeds (1: the render's own workers); a task of cost `c` takes
    /// `c / speed` seconds. Ranks may have different worker counts.
    pub speeds: &'a [Vec<f64>],
    /// Seconds per probe of another deque within a rank.
    pub local_latency: f64,
    /// Seconds of one steal across ranks: request there, answer back.
    pub rank_latency: f64,
    /// The ranks know the speeds and the tasks' estimated costs and guard their steals by
    /// them, as a calibrated render does; `None`: unguarded.
    pub guard: Option<Guard<'a>>,
}

struct Sim<'a> {
    costs: &'a [f64],
    cluster: MixedCluster<'a>,
    /// The first global worker of each rank, and the total at the end.
    first: Vec<usize>,
    steal: bool,
    ranks: Vec<Rank>,
    /// (time, class, order, id): at equal times, messages (class 0) in the order they were
    /// sent, then workers (class 1) by global index, as in the single-process simulator.
    heap: BinaryHeap<Reverse<(Time, u8, u64, u64)>>,
    events: HashMap<u64, Event>,
    next_id: u64,
    run: SimRun,
}

impl Sim<'_> {
    fn push(&mut self, at: f64, e: Event) {
        let (class, order) = match e {
            Event::WorkerFree { rank, local } => (1, (self.first[rank] + local) as u64),
            _ => (0, self.next_id),
        };
        self.heap
            .push(Reverse((Time(at), class, order, self.next_id)));
        self.events.insert(self.next_id, e);
        self.next_id += 1;
    }

    /// A rank whose deques are empty asks the next victim, if it may.
    fn maybe_request(&mut self, rank: usize, now: f64) {
        let m = self.cluster;
        let alone = self.ranks.len() < 2;
        let r = &mut self.ranks[rank];
        if !self.steal || alone || r.outstanding || r.queues.queued() > 0 {
            return;
        }
        if let Some(victim) = r.search.next_victim() {
            r.outstanding = true;
            self.run.requests += 1;
            self.push(
                now + 0.5 * m.rank_latency,
                Event::Request {
                    victim,
                    thief: rank,
                },
            );
        }
    }

    /// Worker `global`'s speed: 1 where none (or no usable one) is given.
    fn speed(&self, rank: usize, local: usize) -> f64 {
        match self.cluster.speeds[rank].get(local) {
            Some(&s) if s.is_finite() && s > 0.0 => s,
            _ => 1.0,
        }
    }

    fn step(&mut self, now: f64, e: Event) {
        let m = self.cluster;
        match e {
            Event::WorkerFree { rank, local } => {
                let global = self.first[rank] + local;
                let speed = self.speed(rank, local);
                let r = &mut self.ranks[rank];
                match r.queues.next(local, &mut r.rngs[local]) {
                    Some(take) => {
                        let seconds = self.costs[take.task].max(0.0) / speed;
                        let end = now + take.probes as f64 * m.local_latency.max(0.0) + seconds;
                        self.run.busy[global] += seconds;
                        self.run.tiles[global] += 1;
                        if take.stolen_from.is_some() {
                            self.run.steals += 1;
                        }
                        if self.run.ran_by[take.task].replace(global).is_some() {
                            panic!("task {} handed out twice", take.task);
                        }
                        self.run.makespan = self.run.makespan.max(end);
                        self.push(end, Event::WorkerFree { rank, local });
                    }
                    None => r.idle.push(local),
                }
                self.maybe_request(rank, now);
            }
            Event::Request { victim, thief } => {
                // As a real thief asks: for as many tiles as it has workers, with the speed
                // of its fastest worker.
                let want = m.speeds[thief].len();
                let thief_speed = m.speeds[thief]
                    .iter()
                    .copied()
                    .filter(|s| s.is_finite())
                    .fold(0.0, f64::max);
                let guard = match m.guard {
                    Some(g) => GrantGuard {
                        thief_speed,
                        own_speeds: &m.speeds[victim],
                        costs: g.estimated,
                        floors: g.floors,
                        mean: None,
                    },
                    None => GrantGuard::NONE,
                };
                let given: Vec<usize> = give_away(&self.ranks[victim].queues, want, guard)
                    .into_iter()
                    .map(|(task, _)| task)
                    .collect();
                self.push(
                    now + 0.5 * m.rank_latency,
                    Event::Grant {
                        thief,
                        tasks: given,
                    },
                );
            }
            Event::Grant { thief, tasks } => {
                let r = &mut self.ranks[thief];
                r.outstanding = false;
                if !tasks.is_empty() {
                    self.run.transfers += 1;
                    self.run.tiles_moved += tasks.len();
                    accept(&r.queues, &tasks);
                    r.search.restart();
                    let woken: Vec<usize> = r.idle.drain(..).collect();
                    for local in woken {
                        self.push(now, Event::WorkerFree { rank: thief, local });
                    }
                }
                self.maybe_request(thief, now);
            }
        }
    }
}

/// Simulates one frame: tasks cost `costs[task]` seconds; `deques` are the initial deques of
/// all `ranks x workers` workers in rank order (rank r's workers are
/// `r * workers .. (r + 1) * workers`); `seed` drives every random choice.
pub fn simulate_cluster(
    costs: &[f64],
    deques: Vec<Vec<usize>>,
    model: ClusterModel,
    steal: bool,
    seed: u64,
) -> SimRun {
    let speeds = vec![vec![1.0; model.workers]; model.ranks];
    let cluster = MixedCluster {
        speeds: &speeds,
        local_latency: model.local_latency,
        rank_latency: model.rank_latency,
        guard: None,
    };
    simulate_mixed_cluster(costs, deques, cluster, steal, seed)
}

/// [`simulate_cluster`] for ranks of workers of different speeds (`cluster`): `deques` are
/// the initial deques of every worker of every rank, in rank order.
pub fn simulate_mixed_cluster(
    costs: &[f64],
    deques: Vec<Vec<usize>>,
    cluster: MixedCluster,
    steal: bool,
    seed: u64,
) -> SimRun {
    let mut first = vec![0usize];
    for rank in cluster.speeds {
        first.push(first[first.len() - 1] + rank.len());
    }
    let workers = first[first.len() - 1];
    assert_eq!(deques.len(), workers, "one deque per worker");
    let rank_count = cluster.speeds.len();
    let mut it = deques.into_iter();
    let ranks = cluster
        .speeds
        .iter()
        .enumerate()
        .map(|(r, speeds)| {
            let mut queues = WorkQueues::new(it.by_ref().take(speeds.len()).collect(), steal);
            if let Some(g) = cluster.guard {
                queues = queues
                    .with_speeds(speeds, g.estimated)
                    .with_task_floors(g.floors);
            }
            Rank {
                queues,
                rngs: (0..speeds.len())
                    .map(|w| StealRng::new(seed, first[r] + w, 0))
                    .collect(),
                search: VictimSearch::new(seed, r, rank_count, 0),
                outstanding: false,
                idle: Vec::new(),
            }
        })
        .collect();
    let mut sim = Sim {
        costs,
        cluster,
        first,
        steal,
        ranks,
        heap: BinaryHeap::new(),
        events: HashMap::new(),
        next_id: 0,
        run: SimRun {
            makespan: 0.0,
            busy: vec![0.0; workers],
            tiles: vec![0; workers],
            steals: 0,
            requests: 0,
            transfers: 0,
            tiles_moved: 0,
            ran_by: vec![None; costs.len()],
        },
    };
    for (rank, speeds) in cluster.speeds.iter().enumerate() {
        for local in 0..speeds.len() {
            sim.push(0.0, Event::WorkerFree { rank, local });
        }
    }
    while let Some(Reverse((Time(now), _, _, id))) = sim.heap.pop() {
        if let Some(e) = sim.events.remove(&id) {
            sim.step(now, e);
        }
    }
    sim.run
}

/// Simulates a cluster frame replayed from a render's measurements: `tile_count` tiles cut
/// under `strategy`, planned over all workers of all ranks in rank order (each rank a
/// contiguous run of about equal estimated cost), every cost times `cost_scale`; once per
/// seed (once without stealing).
pub fn replay_cluster(
    replay: &Replay,
    strategy: Strategy,
    steal: bool,
    model: ClusterModel,
    tile_count: u32,
    cost_scale: f64,
    seeds: &[u64],
) -> Vec<SimRun> {
    let (_, estimated, actual) = replay.tiles(strategy, tile_count);
    let costs: Vec<f64> = actual.iter().map(|c| c * cost_scale).collect();
    let workers = model.ranks * model.workers;
    let deques = policy::initial_deques(strategy, &estimated, &vec![1.0; workers.max(1)]);
    seeds_to_run(steal, workers, seeds)
        .iter()
        .map(|&seed| simulate_cluster(&costs, deques.clone(), model, steal, seed))
        .collect()
}

/// [`replay_cluster`] for ranks of workers of different speeds (`speeds[r]`: rank r's), the
/// first pass planned as `plan` says: equal shares (a first pass that knows no speeds), shares
/// by speed, or shares by speed with the steal guards (a calibrated render).
#[allow(clippy::too_many_arguments)]
pub fn replay_mixed_cluster(
    replay: &Replay,
    strategy: Strategy,
    speeds: &[Vec<f64>],
    plan: MixedPlan,
    local_latency: f64,
    rank_latency: f64,
    tile_count: u32,
    seeds: &[u64],
) -> Vec<SimRun> {
    let all: Vec<f64> = speeds.iter().flatten().copied().collect();
    let (layout, estimated, actual) =
        replay.tiles_cut(strategy, tile_count, &all, plan.pieces(strategy));
    let floors = crate::sched::tiles::area_floors(&layout, &estimated);
    let weights = if plan.by_speed() {
        all.clone()
    } else {
        vec![1.0; all.len().max(1)]
    };
    let deques = policy::initial_deques(strategy, &estimated, &weights);
    let cluster = MixedCluster {
        speeds,
        local_latency,
        rank_latency,
        guard: plan.guarded().then_some(Guard {
            estimated: &estimated,
            floors: &floors,
        }),
    };
    seeds_to_run(true, all.len(), seeds)
        .iter()
        .map(|&seed| simulate_mixed_cluster(&actual, deques.clone(), cluster, true, seed))
        .collect()
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

    /// A measured case (docs/guide/workers.md#mixed-devices): two GPU streams and sixteen CPU
    /// threads about 200 times slower, fifteen GPU-sized tiles.
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

    /// The same case, replayed on a 640 x 360 frame of uniform cost (1 s of work for
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

    fn model(ranks: usize, workers: usize, rank_latency: f64) -> ClusterModel {
        ClusterModel {
            ranks,
            workers,
            local_latency: 0.0,
            rank_latency,
        }
    }

    #[test]
    fn an_idle_rank_steals_across_ranks_and_nothing_is_lost() {
        // Rank 1 starts with nothing: it can only get work from rank 0.
        let costs = vec![1.0; 16];
        let mut deques = vec![
            (0..8).collect::<Vec<_>>(),
            (8..16).collect(),
            vec![],
            vec![],
        ];
        let without = simulate_cluster(&costs, deques.clone(), model(2, 2, 0.1), false, 1);
        assert_eq!(without.makespan, 8.0);
        let with = simulate_cluster(&costs, deques.clone(), model(2, 2, 0.1), true, 1);
        assert!(with.makespan < 8.0, "{}", with.makespan);
        assert!(with.tiles_moved > 0 && with.transfers > 0);
        assert!(with.ran_by.iter().all(Option::is_some));
        // Every tile ran once; rank 1's workers (2 and 3) ran some.
        assert!(with.ran_by.iter().any(|w| *w >= Some(2)));
        // A huge latency makes stealing across ranks useless, never harmful to correctness.
        deques.swap(0, 1);
        let slow = simulate_cluster(&costs, deques, model(2, 2, 100.0), true, 1);
        assert!(slow.ran_by.iter().all(Option::is_some));
    }

    #[test]
    fn latency_only_costs_efficiency() {
        // Rank 0's share (regular: equal tile counts) is ten times as expensive as the
        // others': only stealing across ranks can balance it, and latency delays it.
        let costs: Vec<f64> = (0..256).map(|i| if i < 64 { 10.0 } else { 1.0 }).collect();
        let deques = policy::initial_deques(Strategy::Regular, &costs, &[1.0; 16]);
        let fast = simulate_cluster(&costs, deques.clone(), model(4, 4, 0.001), true, 5);
        let slow = simulate_cluster(&costs, deques, model(4, 4, 50.0), true, 5);
        assert!(
            fast.efficiency() > slow.efficiency(),
            "{} vs {}",
            fast.efficiency(),
            slow.efficiency()
        );
        assert!(fast.tiles_moved > 0);
        let (a, b): (f64, f64) = (fast.busy.iter().sum(), slow.busy.iter().sum());
        assert!((a - b).abs() <= 1e-9 * a, "the same work: {a} vs {b}");
    }

    #[test]
    fn a_guarded_gpu_rank_keeps_its_tiles_from_a_much_slower_cpu_rank() {
        // Rank 0: two GPU streams holding all 100 tiles; rank 1: four CPU threads 80x slower
        // holding none, which asks the GPU rank at once. Unguarded, it is given tiles it
        // needs 80 s each for; guarded, only what it would finish before the GPU streams get
        // through their queue (50 s), which is nothing.
        let costs = vec![1.0; 100];
        let speeds = vec![vec![1.0, 1.0], vec![0.0125; 4]];
        let mut deques = vec![(0..50).collect::<Vec<usize>>(), (50..100).collect()];
        deques.extend(std::iter::repeat_n(Vec::new(), 4));
        let run = |estimated: Option<&[f64]>| {
            let cluster = MixedCluster {
                speeds: &speeds,
                local_latency: 0.0,
                rank_latency: 0.01,
                guard: estimated.map(|estimated| Guard {
                    estimated,
                    floors: &[],
                }),
            };
            simulate_mixed_cluster(&costs, deques.clone(), cluster, true, 4)
        };
        let (open, guarded) = (run(None), run(Some(&costs)));
        for r in [&open, &guarded] {
            assert!(r.ran_by.iter().all(Option::is_some), "a tile never ran");
        }
        assert!(open.tiles_moved > 0, "the test needs unguarded steals");
        assert!(open.makespan >= 80.0, "{}", open.makespan);
        assert_eq!((guarded.tiles_moved, guarded.makespan), (0, 50.0));
        assert!(guarded.requests > 0, "the CPU rank did ask");
    }
}
