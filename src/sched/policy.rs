//! The scheduling policy: the initial assignment of tiles to workers and work stealing.
//!
//! This is the one policy that both executors run: the threaded executor of real renders
//! ([`super::workers`]) and the discrete-event simulator ([`super::sim`]). Both only ask
//! [`WorkQueues::next`] "what does worker `w` do now?", so the simulator replays exactly the
//! decisions a real render makes.
//!
//! The policy (after the paper, section 5):
//! - the tiles come in locality order; each worker gets one contiguous run of them, so its
//!   tiles are near each other. `regular` cuts runs of equal tile counts (it knows no costs);
//!   `sorted` and `adaptive` cut runs of equal estimated cost, and for later passes the
//!   workers' measured speeds weight the runs;
//! - each worker's run becomes its deque, front first. `sorted` orders it most expensive
//!   first; the others keep locality order;
//! - a worker takes from the front of its own deque; when that is empty and stealing is on, it
//!   probes the other workers in a random order and takes one tile from the back of the first
//!   non-empty deque: the cheap end under `sorted`, so that late steals move small tiles;
//! - tasks are never created during a pass, so a worker that finds every deque empty is done.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::tiles::Strategy;
use crate::render::sampler::mix64;

/// Splits tasks `0..costs.len()` (in locality order) into one contiguous run per worker, the
/// runs' shares of the total following `weights` (one per worker, any positive scale). Each
/// cut is placed at the task boundary nearest its target. Runs may be empty when single tasks
/// outweigh a worker's share.
pub fn contiguous_runs(costs: &[f64], weights: &[f64]) -> Vec<std::ops::Range<usize>> {
    let n = costs.len();
    let workers = weights.len().max(1);
    let weight_total: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    let uniform = !(weight_total > 0.0 && weight_total.is_finite());
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0f64);
    for &c in costs {
        prefix.push(prefix[prefix.len() - 1] + c.max(0.0));
    }
    let total = prefix[n];
    let mut runs = Vec::with_capacity(workers);
    let (mut start, mut share) = (0usize, 0.0f64);
    for w in 0..workers {
        share += match weights.get(w) {
            Some(weight) if !uniform => weight.max(0.0) / weight_total,
            _ => 1.0 / workers as f64,
        };
        let end = if w + 1 == workers {
            n
        } else {
            let target = total * share;
            // The first boundary at or past the target, or the one before it if nearer.
            let mut b = prefix.partition_point(|&p| p < target).clamp(start, n);
            if b > start && (target - prefix[b - 1]).abs() <= (prefix[b] - target).abs() {
                b -= 1;
            }
            b
        };
        runs.push(start..end);
        start = end;
    }
    runs
}

/// The initial deques (front first) of `weights.len()` workers for tasks in locality order
/// with estimated `costs`, under `strategy`.
pub fn initial_deques(strategy: Strategy, costs: &[f64], weights: &[f64]) -> Vec<Vec<usize>> {
    let balance_by: Vec<f64> = match strategy {
        // Regular scheduling knows no costs: equal tile counts.
        Strategy::Regular => vec![1.0; costs.len()],
        Strategy::Sorted | Strategy::Adaptive => costs.to_vec(),
    };
    contiguous_runs(&balance_by, weights)
        .into_iter()
        .map(|run| {
            let mut tasks: Vec<usize> = run.collect();
            if strategy == Strategy::Sorted {
                // Most expensive first; ties keep locality order (stable sort).
                tasks.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]));
            }
            tasks
        })
        .collect()
}

/// A small deterministic generator for victim choice (SplitMix64).
#[derive(Clone, Debug)]
pub struct StealRng(u64);

impl StealRng {
    /// The generator of `worker` for one pass of one render; different seeds give different
    /// (but reproducible) steal patterns.
    pub fn new(seed: u64, worker: usize, pass: usize) -> StealRng {
        StealRng(mix64(seed ^ mix64(worker as u64 ^ ((pass as u64) << 32))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(crate::render::sampler::GOLDEN_GAMMA);
        mix64(self.0)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

/// What a worker does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Take {
    pub task: usize,
    /// The victim the task was stolen from, or `None` for the worker's own deque.
    pub stolen_from: Option<usize>,
    /// Deques looked into for this take: 0 for the worker's own deque, else the number of
    /// victims probed (the last one successful). The simulator charges each probe a latency.
    pub probes: u32,
}

/// The workers' deques during one pass, shared by all workers.
#[derive(Debug)]
pub struct WorkQueues {
    deques: Vec<Mutex<VecDeque<usize>>>,
    steal: bool,
}

impl WorkQueues {
    pub fn new(deques: Vec<Vec<usize>>, steal: bool) -> WorkQueues {
        WorkQueues {
            deques: deques.into_iter().map(|d| Mutex::new(d.into())).collect(),
            steal,
        }
    }

    pub fn workers(&self) -> usize {
        self.deques.len()
    }

    fn pop_front(&self, w: usize) -> Option<usize> {
        // A poisoned lock only means another worker panicked while holding it; the deque
        // itself is always consistent (single push/pop operations), so keep using it.
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        d.pop_front()
    }

    fn pop_back(&self, w: usize) -> Option<usize> {
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        d.pop_back()
    }

    /// Tasks still queued over all deques (a snapshot: workers may be taking some now).
    pub fn queued(&self) -> usize {
        self.deques
            .iter()
            .map(|d| d.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// Takes one task from the back (the cheap end under `sorted`) of the longest deque, ties
    /// to the lowest worker: what a rank gives away to a thief rank. Returns the task and the
    /// worker whose deque it left.
    pub fn take_back_of_longest(&self) -> Option<(usize, usize)> {
        loop {
            let (w, len) = self
                .deques
                .iter()
                .enumerate()
                .map(|(w, d)| (w, d.lock().unwrap_or_else(|e| e.into_inner()).len()))
                .fold((0, 0), |best, cur| if cur.1 > best.1 { cur } else { best });
            if len == 0 {
                return None;
            }
            // The deque may have shrunk since it was measured; then look again.
            if let Some(task) = self.pop_back(w) {
                return Some((task, w));
            }
        }
    }

    /// Appends `task` to the back of worker `w`'s deque (tasks that arrived from another
    /// rank).
    pub fn push_back(&self, w: usize, task: usize) {
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        d.push_back(task);
    }

    /// The next task of worker `w`: the front of its own deque, else (with stealing) one
    /// tile from the back of a randomly chosen non-empty victim. `None` when there is nothing
    /// left for `w` to do in this pass.
    pub fn next(&self, w: usize, rng: &mut StealRng) -> Option<Take> {
        if let Some(task) = self.pop_front(w) {
            return Some(Take {
                task,
                stolen_from: None,
                probes: 0,
            });
        }
        if !self.steal {
            return None;
        }
        // Victims in a uniformly random order (Fisher-Yates over the other workers).
        let mut victims: Vec<usize> = (0..self.deques.len()).filter(|&v| v != w).collect();
        for probe in 0..victims.len() {
            let pick = probe + rng.below(victims.len() - probe);
            victims.swap(probe, pick);
            let v = victims[probe];
            if let Some(task) = self.pop_back(v) {
                return Some(Take {
                    task,
                    stolen_from: Some(v),
                    probes: probe as u32 + 1,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_balance_cost_and_cover_everything() {
        let costs = [5.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let runs = contiguous_runs(&costs, &[1.0, 1.0]);
        assert_eq!(runs, vec![0..1, 1..6]);
        let runs = contiguous_runs(&[1.0; 10], &[1.0, 1.0, 2.0]);
        assert_eq!(runs, vec![0..2, 2..5, 5..10]);
        let runs = contiguous_runs(&[], &[1.0, 1.0]);
        assert_eq!(runs, vec![0..0, 0..0]);
    }

    #[test]
    fn sorted_deques_put_expensive_tiles_first() {
        let costs = [1.0, 3.0, 2.0, 9.0, 1.0, 1.0];
        let d = initial_deques(Strategy::Sorted, &costs, &[1.0, 1.0]);
        assert_eq!(d[0], vec![1, 2, 0]);
        assert_eq!(d[1], vec![3, 4, 5]);
        let d = initial_deques(Strategy::Regular, &costs, &[1.0, 1.0]);
        assert_eq!(d, vec![vec![0, 1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn thieves_take_from_the_back_and_no_task_is_lost() {
        let q = WorkQueues::new(vec![vec![0, 1, 2, 3], vec![]], true);
        let mut rng = StealRng::new(1, 1, 0);
        let t = q.next(1, &mut rng).unwrap();
        assert_eq!((t.task, t.stolen_from, t.probes), (3, Some(0), 1));
        let mut seen = vec![3];
        let mut r0 = StealRng::new(1, 0, 0);
        while let Some(t) = q.next(0, &mut r0) {
            seen.push(t.task);
        }
        seen.sort();
        assert_eq!(seen, vec![0, 1, 2, 3]);
        assert_eq!(q.next(1, &mut rng), None);
    }

    #[test]
    fn giving_away_takes_the_back_of_the_longest_deque() {
        let q = WorkQueues::new(vec![vec![0, 1], vec![2, 3, 4], vec![]], true);
        assert_eq!(q.queued(), 5);
        assert_eq!(q.take_back_of_longest(), Some((4, 1)));
        // Now 2 and 2: the tie goes to the lower worker.
        assert_eq!(q.take_back_of_longest(), Some((1, 0)));
        q.push_back(2, 9);
        assert_eq!(q.queued(), 4);
        let mut rng = StealRng::new(0, 2, 0);
        assert_eq!(q.next(2, &mut rng).map(|t| t.task), Some(9));
        let mut left = Vec::new();
        while let Some((t, _)) = q.take_back_of_longest() {
            left.push(t);
        }
        left.sort();
        assert_eq!(left, vec![0, 2, 3]);
    }

    #[test]
    fn without_stealing_idle_workers_stop() {
        let q = WorkQueues::new(vec![vec![0], vec![]], false);
        assert_eq!(q.next(1, &mut StealRng::new(0, 1, 0)), None);
    }
}
