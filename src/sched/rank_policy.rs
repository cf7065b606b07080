//! Stealing across ranks: who asks whom, how many tiles move, where they land.
//!
//! Like [`crate::sched::policy`] within a process, this is the one policy both the real
//! ranks ([`super::rank`]) and the simulator ([`super::sim`]) run:
//! - a rank whose deques are all empty (its workers are on their last tiles or idle) asks one
//!   other rank for work, one request at a time. The victim is drawn at random among the
//!   ranks not yet asked in this search;
//! - the victim gives tiles from the back of its longest deques (the cheap end under
//!   `sorted`): as many as the thief has workers, but never more than half of what it has
//!   queued (rounded down): a victim keeps its last queued tile, which its own workers are
//!   about to take, so tiles do not bounce between ranks that both run dry;
//! - an empty answer sends the thief to the next victim; an answer with tiles ends the
//!   search (the next one starts again from every rank); when every other rank has answered
//!   empty, the rank stops asking for the rest of the pass. Tiles are never created during a
//!   pass, so an empty answer stays true unless that rank steals in turn; stopping keeps the
//!   traffic bounded (at most one round of requests per rank after the work runs out).

use crate::sched::policy::{StealRng, WorkQueues};

/// Salt that keeps a rank's victim choices apart from its workers' (same seed and pass).
const RANK_SALT: u64 = 0x6761_7377_6f72_6b73;

/// A rank's search for a victim rank during one pass.
#[derive(Clone, Debug)]
pub struct VictimSearch {
    rank: usize,
    ranks: usize,
    rng: StealRng,
    /// Ranks not yet asked in the current search.
    candidates: Vec<usize>,
    /// Every other rank answered empty: no more requests this pass.
    exhausted: bool,
}

impl VictimSearch {
    pub fn new(seed: u64, rank: usize, ranks: usize, pass: usize) -> VictimSearch {
        let mut s = VictimSearch {
            rank,
            ranks,
            rng: StealRng::new(seed ^ RANK_SALT, rank, pass),
            candidates: Vec::new(),
            exhausted: false,
        };
        s.restart();
        s
    }

    /// Starts a new search over every other rank (after a successful steal).
    pub fn restart(&mut self) {
        self.candidates = (0..self.ranks).filter(|&r| r != self.rank).collect();
    }

    /// The next rank to ask, or `None` when every other rank has answered empty (then the
    /// rank stops asking for this pass).
    pub fn next_victim(&mut self) -> Option<usize> {
        if self.exhausted || self.candidates.is_empty() {
            self.exhausted = true;
            return None;
        }
        let pick = self.rng.below(self.candidates.len());
        Some(self.candidates.swap_remove(pick))
    }

    pub fn exhausted(&self) -> bool {
        self.exhausted
    }
}

/// How many tiles a victim with `queued` tiles gives a thief that wants `want`.
pub fn grant_size(want: usize, queued: usize) -> usize {
    want.max(1).min(queued / 2)
}

/// What a victim knows to decide whether a thief rank should have its tiles: the speed of the
/// thief's fastest worker, its own workers' speeds, the pass's task costs and their floors
/// (see [`WorkQueues::take_back_of_longest_for`]). Empty `own_speeds`: no guard.
#[derive(Clone, Copy, Debug)]
pub struct GrantGuard<'a> {
    pub thief_speed: f64,
    pub own_speeds: &'a [f64],
    pub costs: &'a [f64],
    /// Each task's floor (`sched::tiles::area_floors`); empty: the mean task's cost.
    pub floors: &'a [f64],
    /// The pass's mean task cost, where `costs` holds only the tasks a rank knows (not a
    /// number for the others); `None`: the mean of `costs`.
    pub mean: Option<f64>,
}

impl GrantGuard<'_> {
    /// No guard: every grant goes as the grant size allows.
    pub const NONE: GrantGuard<'static> = GrantGuard {
        thief_speed: 0.0,
        own_speeds: &[],
        costs: &[],
        floors: &[],
        mean: None,
    };
}

/// Takes the tiles to give a thief that wants `want` from `queues`: (task, local worker whose
/// deque it left), in the order taken (cheapest first under `sorted`). Under `guard`, a tile
/// this rank would finish sooner than a much slower thief stays, and so do the ones after it.
pub fn give_away(queues: &WorkQueues, want: usize, guard: GrantGuard) -> Vec<(usize, usize)> {
    let n = grant_size(want, queues.queued());
    (0..n)
        .map_while(|_| {
            queues.take_back_of_longest_for(
                guard.thief_speed,
                guard.own_speeds,
                guard.costs,
                guard.floors,
                guard.mean,
            )
        })
        .collect()
}

/// Puts tiles received from a victim (in the order it took them) into the thief's deques:
/// dealt round-robin over its working workers (a retired one would only hand them on), the
/// last taken (the victim's more expensive ones) first, so that each worker starts with its
/// most expensive received tile.
pub fn accept(queues: &WorkQueues, tasks: &[usize]) {
    let mut working: Vec<usize> = (0..queues.workers())
        .filter(|&w| !queues.is_retired(w))
        .collect();
    if working.is_empty() {
        // (A rank with no working worker has ended its job; the tiles go somewhere all the
        // same.)
        working = (0..queues.workers().max(1)).collect();
    }
    for (i, &task) in tasks.iter().rev().enumerate() {
        queues.push_back(working[i % working.len()], task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_asks_each_other_rank_once() {
        let mut s = VictimSearch::new(3, 2, 5, 0);
        let mut asked: Vec<usize> = std::iter::from_fn(|| s.next_victim()).collect();
        asked.sort();
        assert_eq!(asked, vec![0, 1, 3, 4]);
        assert!(s.exhausted());
        // Exhausted for the pass, even after a restart.
        s.restart();
        assert_eq!(s.next_victim(), None);
        let mut lone = VictimSearch::new(0, 0, 1, 0);
        assert_eq!(lone.next_victim(), None);
    }

    #[test]
    fn grants_never_take_more_than_half() {
        assert_eq!(grant_size(16, 100), 16);
        assert_eq!(grant_size(16, 9), 4);
        assert_eq!(grant_size(16, 2), 1);
        assert_eq!(grant_size(16, 1), 0);
        assert_eq!(grant_size(16, 0), 0);
        assert_eq!(grant_size(0, 10), 1);
    }

    #[test]
    fn given_tiles_leave_the_victim_and_land_on_the_thief() {
        let victim = WorkQueues::new(vec![vec![0, 1, 2, 3], vec![4, 5]], true);
        let given = give_away(&victim, 2, GrantGuard::NONE);
        assert_eq!(given, vec![(3, 0), (2, 0)]);
        assert_eq!(victim.queued(), 4);
        assert_eq!(
            give_away(&WorkQueues::new(vec![vec![7]], true), 4, GrantGuard::NONE),
            vec![]
        );
        let thief = WorkQueues::new(vec![vec![], vec![]], true);
        let tasks: Vec<usize> = given.iter().map(|g| g.0).collect();
        accept(&thief, &tasks);
        let mut rng = StealRng::new(0, 0, 0);
        assert_eq!(thief.next(0, &mut rng).unwrap().task, 2);
        assert_eq!(thief.next(1, &mut rng).unwrap().task, 3);
    }

    #[test]
    fn a_much_slower_thief_rank_gets_only_tiles_it_finishes_sooner() {
        // A GPU rank (two streams at speed 1) with 10 tiles of cost 1 queued; the thief's
        // best worker is a CPU thread 80 times slower: it would need 160 s for a tile the GPU
        // rank gets through with everything else in 5 s.
        let costs = [1.0; 10];
        let gpu = [1.0, 1.0];
        let victim = || WorkQueues::new(vec![(0..5).collect(), (5..10).collect()], true);
        let guard = |thief_speed| GrantGuard {
            thief_speed,
            own_speeds: &gpu,
            costs: &costs,
            floors: &[],
            mean: None,
        };
        let v = victim();
        assert_eq!(give_away(&v, 16, guard(0.0125)), vec![]);
        assert_eq!(v.queued(), 10);
        // A thief as fast as the victim's workers, or of unknown speed, gets its share.
        assert_eq!(give_away(&victim(), 2, guard(0.9)).len(), 2);
        assert_eq!(give_away(&victim(), 2, guard(f64::NAN)).len(), 2);
        assert_eq!(give_away(&victim(), 2, GrantGuard::NONE).len(), 2);
        // With 400 tiles queued the slow thief helps: 160 s against 200 s.
        let costs = [1.0; 400];
        let v = WorkQueues::new(vec![(0..200).collect(), (200..400).collect()], true);
        let g = GrantGuard {
            thief_speed: 0.0125,
            own_speeds: &gpu,
            costs: &costs,
            floors: &[],
            mean: None,
        };
        assert_eq!(give_away(&v, 3, g).len(), 3);
    }

    /// A victim whose fast worker was retired in this pass weighs a thief against the workers
    /// it has left (`zero_retired`): the slow thread left would take 10 s per tile of the 10
    /// queued, so a thief 4 times faster gets tiles; counted at the retired GPU's planned
    /// speed, the victim would have kept them.
    #[test]
    fn a_victim_that_lost_its_fast_worker_weighs_the_thief_against_the_ones_left() {
        let costs = [1.0; 10];
        let planned = [10.0, 0.1];
        let victim = || WorkQueues::new(vec![(0..5).collect(), (5..10).collect()], true);
        let guard = |own_speeds| GrantGuard {
            thief_speed: 0.4,
            own_speeds,
            costs: &costs,
            floors: &[],
            mean: None,
        };
        assert_eq!(give_away(&victim(), 2, guard(&planned)), vec![]);
        let v = victim();
        v.retire_idle(0);
        let left = v.zero_retired(&planned);
        assert_eq!(left, [0.0, 0.1]);
        assert_eq!(give_away(&v, 2, guard(&left)).len(), 2);
    }

    /// Tiles a rank receives go to its working workers only.
    #[test]
    fn received_tiles_skip_retired_workers() {
        // (Stealing off: each worker takes its own deque only.)
        let thief = WorkQueues::new(vec![vec![], vec![], vec![]], false);
        thief.retire_idle(1);
        accept(&thief, &[10, 11, 12, 13]);
        let mut rng = StealRng::new(0, 0, 0);
        let mut own = |w| {
            std::iter::from_fn(|| thief.next(w, &mut rng))
                .map(|t| t.task)
                .collect::<Vec<_>>()
        };
        assert_eq!(own(0), [13, 11]);
        assert_eq!(own(2), [12, 10]);
    }
}
