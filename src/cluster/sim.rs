//! The discrete-event model of a cluster render: `ranks` ranks of `workers` equal workers,
//! each rank with its own deques, stealing within a rank as in one process (each probe of
//! another local deque costs `local_latency`) and across ranks by the real protocol's policy
//! ([`super::policy`]): a rank whose deques are empty sends one request at a time to a
//! random rank; the request reaches the victim after half the round trip `rank_latency`, the
//! victim gives tiles from its cheap end there and then, and they arrive after the other
//! half. Workers of a rank with nothing to do wait for tiles to arrive.
//!
//! It drives the same [`WorkQueues`], victim search, grant size and placement of received
//! tiles as [`super::node`] does, so the simulated decisions are the real ones; what it
//! leaves out is the plan's delivery at the start and the tiles' way back to rank 0 (both
//! overlap with rendering in the real protocol).
//!
//! [`simulate_mixed_cluster`] models ranks whose workers differ in speed (GPU ranks beside
//! CPU ranks, or each rank a GPU beside CPU threads): a task takes its cost over the worker's
//! speed, and when the ranks know the speeds (a calibrated render), they guard steals as the
//! real ranks do: within a rank by [`WorkQueues::with_speeds`], across ranks by the
//! [`GrantGuard`] of the thief's fastest worker.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::policy::{accept, give_away, GrantGuard, VictimSearch};
use crate::sched::policy::{self, StealRng, WorkQueues};
use crate::sched::sim::{MixedPlan, Replay, Time};
use crate::sched::Strategy;

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

/// The outcome of one simulated frame.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSimRun {
    pub makespan: f64,
    /// Each (global) worker's time spent rendering.
    pub busy: Vec<f64>,
    /// Tiles taken from another worker's deque of the same rank.
    pub steals_within: usize,
    /// Steal requests sent across ranks, the answers that carried tiles, and the tiles moved.
    pub requests: usize,
    pub transfers: usize,
    pub tiles_moved: usize,
    /// For each task, the global worker that ran it.
    pub ran_by: Vec<Option<usize>>,
}

impl ClusterSimRun {
    /// Total busy time over (all workers x makespan).
    pub fn efficiency(&self) -> f64 {
        crate::sched::report::efficiency(self.busy.iter().sum(), self.busy.len(), self.makespan)
    }
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
    /// `Some(estimated)`: the ranks know the speeds and the tasks' estimated costs and guard
    /// their steals by them, as a calibrated render does; `None`: unguarded.
    pub guard: Option<&'a [f64]>,
    /// With `guard`: each task's floor, as a real rank is given them
    /// (`WorkQueues::with_task_floors`); empty: the mean task's cost.
    pub floors: &'a [f64],
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
    run: ClusterSimRun,
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
                        if take.stolen_from.is_some() {
                            self.run.steals_within += 1;
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
                    Some(estimated) => GrantGuard {
                        thief_speed,
                        own_speeds: &m.speeds[victim],
                        costs: estimated,
                        floors: m.floors,
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
) -> ClusterSimRun {
    let speeds = vec![vec![1.0; model.workers]; model.ranks];
    let cluster = MixedCluster {
        speeds: &speeds,
        local_latency: model.local_latency,
        rank_latency: model.rank_latency,
        guard: None,
        floors: &[],
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
) -> ClusterSimRun {
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
            if let Some(estimated) = cluster.guard {
                queues = queues
                    .with_speeds(speeds, estimated)
                    .with_task_floors(cluster.floors);
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
        run: ClusterSimRun {
            makespan: 0.0,
            busy: vec![0.0; workers],
            steals_within: 0,
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
) -> Vec<ClusterSimRun> {
    let (_, estimated, actual) = replay.tiles(strategy, tile_count);
    let costs: Vec<f64> = actual.iter().map(|c| c * cost_scale).collect();
    let workers = model.ranks * model.workers;
    let deques = policy::initial_deques(strategy, &estimated, &vec![1.0; workers.max(1)]);
    crate::sched::sim::seeds_to_run(steal, workers, seeds)
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
) -> Vec<ClusterSimRun> {
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
        guard: plan.guarded().then_some(&estimated[..]),
        floors: &floors,
    };
    crate::sched::sim::seeds_to_run(true, all.len(), seeds)
        .iter()
        .map(|&seed| simulate_mixed_cluster(&actual, deques.clone(), cluster, true, seed))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(ranks: usize, workers: usize, rank_latency: f64) -> ClusterModel {
        ClusterModel {
            ranks,
            workers,
            local_latency: 0.0,
            rank_latency,
        }
    }

    #[test]
    fn one_rank_is_the_single_process_simulation() {
        let costs: Vec<f64> = (0..40).map(|i| 1.0 + (i % 7) as f64).collect();
        let deques = policy::initial_deques(Strategy::Sorted, &costs, &[1.0; 4]);
        let one = crate::sched::sim::simulate(&costs, deques.clone(), true, 0.0, 3);
        let c = simulate_cluster(&costs, deques, model(1, 4, 0.5), true, 3);
        assert_eq!(c.makespan, one.makespan);
        assert_eq!(c.busy, one.busy);
        assert_eq!(c.requests, 0);
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
    fn one_rank_of_mixed_workers_is_the_single_process_simulation() {
        // Two fast workers beside four 30x slower ones, guarded and not: one rank decides
        // exactly as one process does.
        let costs: Vec<f64> = (0..60).map(|i| 1.0 + (i % 5) as f64).collect();
        let speeds = vec![1.0, 1.0, 0.033, 0.033, 0.033, 0.033];
        let deques = policy::initial_deques(Strategy::Sorted, &costs, &speeds);
        for guarded in [false, true] {
            let guard = guarded.then_some(crate::sched::sim::Guard {
                speeds: &speeds,
                estimated: &costs,
                floors: &[],
            });
            let one = crate::sched::sim::simulate_mixed(
                &costs,
                deques.clone(),
                true,
                0.0,
                9,
                &speeds,
                guard,
            );
            let ranks = vec![speeds.clone()];
            let cluster = MixedCluster {
                speeds: &ranks,
                local_latency: 0.0,
                rank_latency: 0.5,
                guard: guarded.then_some(&costs[..]),
                floors: &[],
            };
            let c = simulate_mixed_cluster(&costs, deques.clone(), cluster, true, 9);
            assert_eq!(c.makespan, one.makespan, "guarded {guarded}");
            assert_eq!(c.busy, one.busy, "guarded {guarded}");
            assert_eq!(c.ran_by, one.ran_by, "guarded {guarded}");
        }
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
        let run = |guard: Option<&[f64]>| {
            let cluster = MixedCluster {
                speeds: &speeds,
                local_latency: 0.0,
                rank_latency: 0.01,
                guard,
                floors: &[],
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
