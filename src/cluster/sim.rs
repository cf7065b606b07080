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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::policy::{accept, give_away, GrantGuard, VictimSearch};
use crate::sched::policy::{self, StealRng, WorkQueues};
use crate::sched::sim::{Replay, Time};
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

struct Sim<'a> {
    costs: &'a [f64],
    model: ClusterModel,
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
            Event::WorkerFree { rank, local } => (1, (rank * self.model.workers + local) as u64),
            _ => (0, self.next_id),
        };
        self.heap
            .push(Reverse((Time(at), class, order, self.next_id)));
        self.events.insert(self.next_id, e);
        self.next_id += 1;
    }

    /// A rank whose deques are empty asks the next victim, if it may.
    fn maybe_request(&mut self, rank: usize, now: f64) {
        let m = self.model;
        let r = &mut self.ranks[rank];
        if !self.steal || m.ranks < 2 || r.outstanding || r.queues.queued() > 0 {
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

    fn step(&mut self, now: f64, e: Event) {
        let m = self.model;
        match e {
            Event::WorkerFree { rank, local } => {
                let global = rank * m.workers + local;
                let r = &mut self.ranks[rank];
                match r.queues.next(local, &mut r.rngs[local]) {
                    Some(take) => {
                        let cost = self.costs[take.task].max(0.0);
                        let end = now + take.probes as f64 * m.local_latency.max(0.0) + cost;
                        self.run.busy[global] += cost;
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
                let given: Vec<usize> =
                    give_away(&self.ranks[victim].queues, m.workers, GrantGuard::NONE)
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
    assert_eq!(
        deques.len(),
        model.ranks * model.workers,
        "one deque per worker"
    );
    let mut it = deques.into_iter();
    let ranks = (0..model.ranks)
        .map(|r| Rank {
            queues: WorkQueues::new(it.by_ref().take(model.workers).collect(), steal),
            rngs: (0..model.workers)
                .map(|w| StealRng::new(seed, r * model.workers + w, 0))
                .collect(),
            search: VictimSearch::new(seed, r, model.ranks, 0),
            outstanding: false,
            idle: Vec::new(),
        })
        .collect();
    let mut sim = Sim {
        costs,
        model,
        steal,
        ranks,
        heap: BinaryHeap::new(),
        events: HashMap::new(),
        next_id: 0,
        run: ClusterSimRun {
            makespan: 0.0,
            busy: vec![0.0; model.ranks * model.workers],
            steals_within: 0,
            requests: 0,
            transfers: 0,
            tiles_moved: 0,
            ran_by: vec![None; costs.len()],
        },
    };
    for rank in 0..model.ranks {
        for local in 0..model.workers {
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
}
