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
//! - tasks are never created during a pass, so a worker that finds every deque empty is done;
//! - when the workers' speeds are known ([`WorkQueues::with_speeds`]: calibrated before the first
//!   pass of a mixed CPU+GPU render, measured after every pass), a thief takes a tile only if
//!   it would finish it no later than its owner would: a CPU thread must not start, at the
//!   end of a pass, a tile sized for a GPU that the GPU would have finished long before; and
//!   a worker slower than the fastest leaves even its own next tile when the others would get
//!   through everything queued before it got through that one ([`keep_own_tile`]). With equal
//!   speeds neither rule refuses anything, so the policy is unchanged.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::tiles::{Strategy, SIMILAR_SPEEDS};
use crate::splitmix::mix64;

/// Splits tasks `0..costs.len()` (in locality order) into one contiguous run per worker, the
/// runs' shares of the total following `weights` (one per worker, any positive scale: the
/// workers' speeds). Runs may be empty when single tasks outweigh a worker's share.
///
/// Each cut falls on one of the two task boundaries around its target. With equal weights it
/// is the nearer one. With unequal weights it is the one that lets the frame end sooner: the
/// later of this run's time (its cost over its worker's speed) and the time the workers after
/// it need for the rest, since one task too many costs a worker 100 times slower than a GPU
/// 100 times more than one task too few does.
pub fn contiguous_runs(costs: &[f64], weights: &[f64]) -> Vec<std::ops::Range<usize>> {
    let n = costs.len();
    let workers = weights.len().max(1);
    let weight_total: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    let uniform = !(weight_total > 0.0 && weight_total.is_finite());
    let weight = |w: usize| match weights.get(w) {
        Some(weight) if !uniform => weight.max(0.0) / weight_total,
        _ => 1.0 / workers as f64,
    };
    let equal = uniform || weights.windows(2).all(|p| p[0] == p[1]);
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0f64);
    for &c in costs {
        prefix.push(prefix[prefix.len() - 1] + c.max(0.0));
    }
    let total = prefix[n];
    let mut runs = Vec::with_capacity(workers);
    let (mut start, mut share) = (0usize, 0.0f64);
    for w in 0..workers {
        share += weight(w);
        let end = if w + 1 == workers {
            n
        } else {
            let target = total * share;
            // The first boundary at or past the target, and the one before it.
            let hi = prefix.partition_point(|&p| p < target).clamp(start, n);
            let lo = if hi > start { hi - 1 } else { hi };
            let nearer_lo = (target - prefix[lo]).abs() <= (prefix[hi] - target).abs();
            if lo == hi || equal {
                if nearer_lo {
                    lo
                } else {
                    hi
                }
            } else {
                // The frame's end if the run ends at b: this worker's time against the time
                // of the workers after it (their speeds add up) for everything after b.
                let rest_speed: f64 = (w + 1..workers).map(weight).sum();
                let finish = |b: usize| {
                    let own = (prefix[b] - prefix[start]) / weight(w);
                    let rest = (total - prefix[b]) / rest_speed;
                    let t = |x: f64| if x.is_nan() { 0.0 } else { x };
                    t(own).max(t(rest))
                };
                let (f_lo, f_hi) = (finish(lo), finish(hi));
                if f_lo < f_hi || (f_lo == f_hi && nearer_lo) {
                    lo
                } else {
                    hi
                }
            }
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
        self.0 = self.0.wrapping_add(crate::splitmix::GOLDEN_GAMMA);
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
    /// With [`WorkQueues::with_speeds`]: what the steal guard weighs.
    speeds: Option<Speeds>,
    /// Per worker: whether it was retired ([`WorkQueues::retire`]): it takes nothing more, and
    /// the others take its deque from the back, whatever `steal` and the guard say.
    retired: Vec<AtomicBool>,
    /// Whether any worker is retired (saves looking at every flag while none is).
    any_retired: AtomicBool,
}

/// The mean of tasks' estimated `costs`, as the steal guards weigh it: a cost that is not a
/// number counts 0, a negative one 0.
pub fn mean_cost(costs: &[f64]) -> f64 {
    let sum: f64 = costs
        .iter()
        .map(|&c| if c.is_finite() { c.max(0.0) } else { 0.0 })
        .sum();
    sum / costs.len().max(1) as f64
}

/// Per-task values, as `f64` bits: a rank learns those of the tasks other ranks give it.
fn atomic_values(v: &[f64]) -> Vec<AtomicU64> {
    v.iter().map(|x| AtomicU64::new(x.to_bits())).collect()
}

fn value_at(v: &[AtomicU64], task: usize) -> Option<f64> {
    v.get(task)
        .map(|a| f64::from_bits(a.load(Ordering::Relaxed)))
}

/// The steal guard's knowledge: each worker's speed and each task's cost, in any units whose
/// ratio is a time (cost-map units and cost-map units per second).
#[derive(Debug)]
struct Speeds {
    per_worker: Vec<f64>,
    /// Per task (not a number: not known to this rank).
    task_cost: Vec<AtomicU64>,
    /// The mean cost of the pass's tasks: the least a slower worker counts a task at when it
    /// decides to take it over a faster one, unless [`WorkQueues::with_task_floors`] gave each
    /// task its own floor. A cheap tile's estimate is the least reliable (a corner the cost
    /// map thinks empty may hold a mirror), and the slower worker pays an under-estimate many
    /// times over.
    mean: f64,
    /// Per task, the least a slower worker counts it at (empty: `mean` for every task).
    floor: Vec<AtomicU64>,
    /// Whether worker w is [`SIMILAR_SPEEDS`] times slower than the fastest or more: only such
    /// a worker can be refused a task (by [`keep_own_tile`], or by [`steal_pays`], whose owner
    /// must be that much faster than the thief). The others take tasks as if unguarded, without
    /// summing the queued cost of every deque first.
    slow: Vec<bool>,
}

impl Speeds {
    fn cost(&self, task: usize) -> f64 {
        value_at(&self.task_cost, task)
            .filter(|c| !c.is_nan())
            .unwrap_or(0.0)
    }

    /// What a slower worker counts `task` at: its cost, but no less than its floor.
    fn guarded_cost(&self, task: usize) -> f64 {
        let floor = value_at(&self.floor, task).filter(|f| f.is_finite());
        self.cost(task).max(floor.unwrap_or(self.mean))
    }

    fn task_costs(&self) -> Vec<f64> {
        (0..self.task_cost.len())
            .filter_map(|t| value_at(&self.task_cost, t))
            .collect()
    }
}

/// How much a worker slower than another counts a task's estimated cost when it decides to
/// take that task over the faster one: the cost map is an estimate, often off by half on real
/// scenes (`--stats` prints its accuracy), and the slower worker pays an under-estimate many
/// times over (a tile with twice its estimated cost costs a CPU thread 200 times what it costs
/// a GPU stream), while leaving a task to a faster worker costs little.
pub const SLOW_WORKER_MARGIN: f64 = 2.0;

/// Whether a thief of speed `thief_speed` should take a task of cost `cost` from the back of a
/// deque holding `queued` cost in all (the task included) whose owner runs at `owner_speed`.
/// Always, unless the owner is [`SIMILAR_SPEEDS`] times faster or more; then only if the thief
/// finishes it (in `cost / thief_speed`, times [`SLOW_WORKER_MARGIN`]) no later than the owner
/// would finish it and everything before it (`queued / owner_speed`). Any speed that is not a
/// positive finite number refuses nothing: nothing is known. Pure.
pub fn steal_pays(cost: f64, queued: f64, thief_speed: f64, owner_speed: f64) -> bool {
    let known = |s: f64| s.is_finite() && s > 0.0;
    if !known(thief_speed) || !known(owner_speed) || !cost.is_finite() || !queued.is_finite() {
        return true;
    }
    if owner_speed < SIMILAR_SPEEDS * thief_speed {
        return true;
    }
    SLOW_WORKER_MARGIN * cost.max(0.0) / thief_speed <= queued.max(0.0) / owner_speed
}

/// Whether worker `w` should start the task of cost `cost` at the front of its own deque when
/// `queued` cost is left in all deques (that task included) and the workers run at `speeds`:
/// yes unless the fastest worker is [`SIMILAR_SPEEDS`] times faster than `w` or more, and `w`
/// would need longer for this one task (its cost counted [`SLOW_WORKER_MARGIN`] times) than
/// all the others together need for everything queued. Then the others, stealing from
/// the back of its deque, end the frame sooner without it. The fastest workers always go on
/// (and never have a steal refused), so every task is still run. Pure.
pub fn keep_own_tile(cost: f64, queued: f64, w: usize, speeds: &[f64]) -> bool {
    let known = |s: f64| s.is_finite() && s > 0.0;
    let Some(&own) = speeds.get(w) else {
        return true;
    };
    let fastest = speeds
        .iter()
        .copied()
        .filter(|&s| known(s))
        .fold(0.0, f64::max);
    if !known(own) || fastest < SIMILAR_SPEEDS * own || !cost.is_finite() || !queued.is_finite() {
        return true;
    }
    let others: f64 = speeds
        .iter()
        .enumerate()
        .filter(|&(v, &s)| v != w && known(s))
        .map(|(_, &s)| s)
        .sum();
    SLOW_WORKER_MARGIN * cost.max(0.0) / own <= queued.max(0.0) / others
}

impl WorkQueues {
    pub fn new(deques: Vec<Vec<usize>>, steal: bool) -> WorkQueues {
        let workers = deques.len();
        WorkQueues {
            deques: deques.into_iter().map(|d| Mutex::new(d.into())).collect(),
            steal,
            speeds: None,
            retired: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            any_retired: AtomicBool::new(false),
        }
    }

    /// Marks the workers whose flag is set as retired from the start (workers a renderer error
    /// retired in an earlier pass): whatever the plan gave them goes to the others.
    pub fn with_retired(self, retired: &[bool]) -> WorkQueues {
        for (w, _) in retired.iter().enumerate().filter(|(_, &r)| r) {
            if w < self.deques.len() {
                self.retired[w].store(true, Ordering::Relaxed);
                self.any_retired.store(true, Ordering::Relaxed);
            }
        }
        self
    }

    /// Retires worker `w`, whose renderer failed on `failed_task`: the task goes back to the
    /// back of `w`'s deque, and from now on the other workers take that deque from the back
    /// (stealing on or off, the guard not asked: `w` will run none of it). `w` must take
    /// nothing more.
    pub fn retire(&self, w: usize, failed_task: usize) {
        self.retire_idle(w);
        self.push_back(w, failed_task);
    }

    /// Retires worker `w` without a failed task of its own: a worker of a device that another
    /// worker's failure showed to be lost. Its deque opens to the others as with
    /// [`WorkQueues::retire`]; its thread must take nothing more (a tile it has in flight and
    /// fails goes back through `retire`).
    pub fn retire_idle(&self, w: usize) {
        self.retired[w].store(true, Ordering::Relaxed);
        self.any_retired.store(true, Ordering::Relaxed);
    }

    /// Whether worker `w` is retired.
    pub fn is_retired(&self, w: usize) -> bool {
        self.retired
            .get(w)
            .is_some_and(|r| r.load(Ordering::Relaxed))
    }

    /// How many workers are not retired.
    pub fn working(&self) -> usize {
        (0..self.workers()).filter(|&w| !self.is_retired(w)).count()
    }

    /// Every task still queued, by worker, front first (a snapshot; what a pass left when its
    /// threads are done).
    pub fn remaining(&self) -> Vec<usize> {
        self.deques
            .iter()
            .flat_map(|d| d.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .collect()
    }

    /// New queues for `tasks`, for the workers that are not retired: the tasks a pass could not
    /// finish on its first go (a worker retired after the others had run out of work). They
    /// are cut into one contiguous run per working worker by their speeds and the tasks' costs
    /// when the guard knows them (equal shares otherwise), stealing is on, and the guard, with
    /// the retired workers' speeds at zero, still keeps a slow worker off a fast one's tiles.
    /// The retired workers keep empty deques.
    pub fn requeue(&self, tasks: &[usize]) -> WorkQueues {
        let live: Vec<usize> = (0..self.deques.len())
            .filter(|&w| !self.is_retired(w))
            .collect();
        let mut deques = vec![Vec::new(); self.deques.len()];
        if !live.is_empty() {
            let (costs, speeds): (Vec<f64>, Vec<f64>) = match &self.speeds {
                Some(sp) => (
                    tasks.iter().map(|&t| sp.cost(t)).collect(),
                    live.iter().map(|&w| sp.per_worker[w]).collect(),
                ),
                None => (vec![1.0; tasks.len()], vec![1.0; live.len()]),
            };
            for (run, &w) in contiguous_runs(&costs, &speeds).into_iter().zip(&live) {
                deques[w] = run.map(|i| tasks[i]).collect();
            }
        }
        let mut q = WorkQueues::new(deques, true);
        if let Some(sp) = &self.speeds {
            q = q.with_speeds(&self.live_speeds(sp), &sp.task_costs());
            if let Some(new) = q.speeds.as_mut() {
                let floors: Vec<f64> = (0..sp.floor.len())
                    .filter_map(|t| value_at(&sp.floor, t))
                    .collect();
                (new.floor, new.mean) = (atomic_values(&floors), sp.mean);
            }
        }
        let retired: Vec<bool> = (0..self.deques.len()).map(|w| self.is_retired(w)).collect();
        q.with_retired(&retired)
    }

    /// The guard's speeds with the retired workers' at zero (which the guard counts as
    /// unknown: a retired worker is no one's "other" that would take the work).
    fn live_speeds<'a>(&self, sp: &'a Speeds) -> Cow<'a, [f64]> {
        if !self.any_retired.load(Ordering::Relaxed) {
            return Cow::Borrowed(&sp.per_worker);
        }
        Cow::Owned(self.zero_retired(&sp.per_worker))
    }

    /// `speeds` (one per worker) with the retired workers' at zero, which the guards count as
    /// unknown: what a rank's workers can still do, for a cross-rank steal weighed in the pass
    /// that retired one of them.
    pub fn zero_retired(&self, speeds: &[f64]) -> Vec<f64> {
        speeds
            .iter()
            .enumerate()
            .map(|(w, &s)| if self.is_retired(w) { 0.0 } else { s })
            .collect()
    }

    /// Guards stealing with the workers' speeds (`speeds[w]`) and the tasks' estimated costs
    /// (`task_cost[task]`): see [`steal_pays`] and [`keep_own_tile`]. Speeds or costs of the
    /// wrong length are ignored (no guard), as are speeds all within [`SIMILAR_SPEEDS`] of each
    /// other, for which the guard refuses nothing.
    pub fn with_speeds(mut self, speeds: &[f64], task_cost: &[f64]) -> WorkQueues {
        let tasks = self
            .deques
            .iter()
            .flat_map(|d| d.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .max()
            .map_or(0, |t| t + 1);
        // Only speeds [`SIMILAR_SPEEDS`] apart or more can make the guard refuse anything.
        // (A zero speed is a retired worker's, [`WorkQueues::requeue`]: it takes nothing, so it
        // does not make the others unequal.)
        let (lo, hi) = speeds
            .iter()
            .filter(|&&s| s > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| {
                (lo.min(s), hi.max(s))
            });
        let unequal = lo > 0.0 && hi.is_finite() && hi >= SIMILAR_SPEEDS * lo;
        if speeds.len() == self.deques.len() && task_cost.len() >= tasks && unequal {
            self.speeds = Some(Speeds {
                slow: speeds.iter().map(|&s| hi >= SIMILAR_SPEEDS * s).collect(),
                per_worker: speeds.to_vec(),
                task_cost: atomic_values(task_cost),
                mean: mean_cost(&task_cost[..tasks]),
                floor: Vec::new(),
            });
        }
        self
    }

    /// Gives each task its own floor for the steal guard (`floors[task]`, see
    /// [`super::tiles::area_floors`]: its pixels at the pass's mean estimated cost per pixel)
    /// instead of the mean task's cost. With tiles of one size the two are the same; with the
    /// pieces cut for slow workers ([`super::tiles::cut_for_slow_workers`]) the mean task,
    /// a GPU-sized tile, would keep a slow worker off pieces sized for it, while a piece's own
    /// pixels still guard it against an estimate that calls its corner cheap. Ignored without
    /// the guard, or when `floors` does not cover every task.
    pub fn with_task_floors(mut self, floors: &[f64]) -> WorkQueues {
        if let Some(sp) = self.speeds.as_mut() {
            if floors.len() >= sp.task_cost.len() {
                let floors: Vec<f64> = floors
                    .iter()
                    .map(|&f| if f.is_finite() { f.max(0.0) } else { sp.mean })
                    .collect();
                sp.floor = atomic_values(&floors);
            }
        }
        self
    }

    /// The mean task cost the guard weighs, where the tasks' costs given are only some of the
    /// pass's (a rank knows its own tasks'): the pass's. Before [`WorkQueues::with_task_floors`].
    pub fn with_mean_cost(mut self, mean: f64) -> WorkQueues {
        if let Some(sp) = self.speeds.as_mut() {
            sp.mean = mean;
        }
        self
    }

    /// Task `task` arrived from another rank: its cost and floor, for the guard.
    pub fn learn(&self, task: usize, cost: f64, floor: f64) {
        let Some(sp) = &self.speeds else {
            return;
        };
        if let Some(c) = sp.task_cost.get(task) {
            c.store(cost.to_bits(), Ordering::Relaxed);
        }
        if let Some(f) = sp.floor.get(task) {
            let f64_floor = if floor.is_finite() {
                floor.max(0.0)
            } else {
                sp.mean
            };
            f.store(f64_floor.to_bits(), Ordering::Relaxed);
        }
    }

    /// Whether the steal guard is on (speeds given, some [`SIMILAR_SPEEDS`] apart).
    pub fn guarded(&self) -> bool {
        self.speeds.is_some()
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

    /// The front of `w`'s own deque, unless the steal guard says `w` should leave it to the
    /// others ([`keep_own_tile`]): then `None`, and `w` goes stealing, then stops, while the
    /// faster workers take its deque from the back.
    fn own_front(&self, w: usize) -> Option<usize> {
        let Some(sp) = self.speeds.as_ref().filter(|_| self.steal && self.slow(w)) else {
            return self.pop_front(w);
        };
        let others = self.queued_cost_except(w, sp);
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        let &task = d.front()?;
        let queued = others + d.iter().map(|&t| sp.cost(t)).sum::<f64>();
        // (The floor only matters to a slower worker: the fastest always keep their tiles.)
        let cost = sp.guarded_cost(task);
        if keep_own_tile(cost, queued, w, &self.live_speeds(sp)) {
            d.pop_front()
        } else {
            None
        }
    }

    /// Whether the guard could refuse worker `w` anything (see `Speeds::slow`).
    fn slow(&self, w: usize) -> bool {
        self.speeds
            .as_ref()
            .is_some_and(|sp| sp.slow.get(w).copied().unwrap_or(false))
    }

    /// The estimated cost queued in every deque but `except`'s, taking one lock at a time
    /// (never two at once: no lock order to get wrong). The deques may shrink meanwhile, which
    /// only makes the estimate cautious.
    fn queued_cost_except(&self, except: usize, sp: &Speeds) -> f64 {
        (0..self.deques.len())
            .filter(|&v| v != except)
            .map(|v| {
                let d = self.deques[v].lock().unwrap_or_else(|e| e.into_inner());
                d.iter().map(|&t| sp.cost(t)).sum::<f64>()
            })
            .sum()
    }

    fn pop_back(&self, w: usize) -> Option<usize> {
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        d.pop_back()
    }

    /// The task at the back of `victim`'s deque, taken for `thief` when the steal pays: the
    /// thief finishes it before its owner would ([`steal_pays`]) and before the others would
    /// get through everything queued ([`keep_own_tile`]), both decided under the victim's lock
    /// so that its queue cannot change in between. `None` when the deque is empty or holds
    /// only work the thief should leave.
    fn steal_back(&self, thief: usize, victim: usize) -> Option<usize> {
        // A retired owner runs nothing: its deque is anyone's.
        let Some(sp) = self
            .speeds
            .as_ref()
            .filter(|_| self.slow(thief) && !self.is_retired(victim))
        else {
            return self.pop_back(victim);
        };
        let others = self.queued_cost_except(victim, sp);
        let mut d = self.deques[victim]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let &task = d.back()?;
        let in_victim: f64 = d.iter().map(|&t| sp.cost(t)).sum();
        let (s_thief, s_owner) = (sp.per_worker[thief], sp.per_worker[victim]);
        let c = if s_thief < s_owner {
            sp.guarded_cost(task)
        } else {
            sp.cost(task)
        };
        if steal_pays(c, in_victim, s_thief, s_owner)
            && keep_own_tile(
                sp.guarded_cost(task),
                others + in_victim,
                thief,
                &self.live_speeds(sp),
            )
        {
            d.pop_back()
        } else {
            None
        }
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

    /// [`WorkQueues::take_back_of_longest`] for a thief rank whose fastest worker runs at
    /// `thief_speed`, this rank's workers at `own_speeds` and the pass's tasks costing
    /// `costs`: the task goes only if the thief, counting its cost [`SLOW_WORKER_MARGIN`]
    /// times (and at least the mean task's), finishes it before this rank's workers get
    /// through everything queued here ([`keep_own_tile`] with the thief as the worker and this
    /// rank's workers as the others). So a rank of CPU threads is not handed the tiles of a
    /// GPU rank that would finish them sooner itself. Unknown speeds (empty, zero, not finite)
    /// refuse nothing.
    pub fn take_back_of_longest_for(
        &self,
        thief_speed: f64,
        own_speeds: &[f64],
        costs: &[f64],
        floors: &[f64],
        mean: Option<f64>,
    ) -> Option<(usize, usize)> {
        if own_speeds.is_empty() {
            return self.take_back_of_longest();
        }
        let cost = |t: usize| {
            costs
                .get(t)
                .copied()
                .filter(|c| c.is_finite())
                .unwrap_or(0.0)
                .max(0.0)
        };
        let mean = mean.unwrap_or_else(|| mean_cost(costs));
        // Each task's own floor when the plan gave them ([`WorkQueues::with_task_floors`]).
        let floor = |t: usize| match floors.get(t) {
            Some(&f) if f.is_finite() && floors.len() >= costs.len() => f.max(0.0),
            _ => mean,
        };
        let speeds: Vec<f64> = std::iter::once(thief_speed)
            .chain(own_speeds.iter().copied())
            .collect();
        loop {
            let mut queued = 0.0;
            let (mut w, mut len) = (0, 0);
            for (v, d) in self.deques.iter().enumerate() {
                let d = d.lock().unwrap_or_else(|e| e.into_inner());
                queued += d.iter().map(|&t| cost(t)).sum::<f64>();
                if d.len() > len {
                    (w, len) = (v, d.len());
                }
            }
            if len == 0 {
                return None;
            }
            let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
            // The deque may have emptied since it was measured; then look again.
            let Some(&task) = d.back() else {
                continue;
            };
            return if keep_own_tile(cost(task).max(floor(task)), queued, 0, &speeds) {
                d.pop_back().map(|t| (t, w))
            } else {
                None
            };
        }
    }

    /// Appends `task` to the back of worker `w`'s deque (tasks that arrived from another
    /// rank).
    pub fn push_back(&self, w: usize, task: usize) {
        let mut d = self.deques[w].lock().unwrap_or_else(|e| e.into_inner());
        d.push_back(task);
    }

    /// The next task of worker `w`: the front of its own deque, else (with stealing) one
    /// tile from the back of a randomly chosen non-empty victim whose back tile the steal
    /// guard lets `w` take. `None` when there is nothing left for `w` to do in this pass: every
    /// deque is empty, or holds only work its owner finishes sooner than `w` would (queues
    /// only shrink, so `w` is done; every owner drains its own deque).
    pub fn next(&self, w: usize, rng: &mut StealRng) -> Option<Take> {
        if let Some(task) = self.own_front(w) {
            return Some(Take {
                task,
                stolen_from: None,
                probes: 0,
            });
        }
        // Without stealing, only a retired worker's deque is open to the others.
        let any_retired = self.any_retired.load(Ordering::Relaxed);
        if !self.steal && !any_retired {
            return None;
        }
        // Victims in a uniformly random order (Fisher-Yates over the other workers).
        let mut victims: Vec<usize> = (0..self.deques.len())
            .filter(|&v| v != w && (self.steal || self.is_retired(v)))
            .collect();
        for probe in 0..victims.len() {
            let pick = probe + rng.below(victims.len() - probe);
            victims.swap(probe, pick);
            let v = victims[probe];
            if let Some(task) = self.steal_back(w, v) {
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
    fn runs_for_unequal_speeds_keep_big_tasks_off_slow_workers() {
        // Two GPU streams and sixteen CPU threads 200 times slower, fifteen equal tiles: the
        // CPU threads' share (3.8%) is more than half a tile, and the nearest cut would hand
        // one of them a tile that ends the frame 25 times later. None gets one.
        let mut weights = vec![1.0, 1.0];
        weights.extend([0.005; 16]);
        let runs = contiguous_runs(&[1.0; 15], &weights);
        assert_eq!(runs[0], 0..7);
        assert_eq!(runs[1], 7..15);
        assert!(runs[2..].iter().all(|r| r.is_empty()), "{runs:?}");
        // Enough tiles, and the CPU threads get a share that pays: each a run of about
        // 1500 * 0.005 / 2.08 = 3.6 tiles, none more than its time allows.
        let runs = contiguous_runs(&[1.0; 1500], &weights);
        let cpu: usize = runs[2..].iter().map(|r| r.len()).sum();
        assert!((50..=64).contains(&cpu), "{cpu} tiles on the CPU");
        let gpu_time = runs[0].len().max(runs[1].len()) as f64;
        for r in &runs[2..] {
            assert!(r.len() as f64 / 0.005 <= gpu_time + 200.0, "{runs:?}");
        }
        // Equal weights keep the nearest cut.
        assert_eq!(contiguous_runs(&[1.0; 3], &[2.0, 2.0]), vec![0..1, 1..3]);
    }

    #[test]
    fn a_steal_pays_when_the_thief_finishes_first() {
        assert!(steal_pays(1.0, 1.0, 1.0, 1.0)); // equal speeds: always
        assert!(!steal_pays(1.0, 8.0, 0.005, 1.0)); // 200 s against 8 s
        assert!(!steal_pays(1.0, 300.0, 0.005, 1.0)); // 400 s (with the margin) against 300
        assert!(steal_pays(1.0, 400.0, 0.005, 1.0));
        assert!(steal_pays(5.0, 1.0, 100.0, 1.0)); // a fast thief
        assert!(steal_pays(1.0, 1.0, f64::NAN, 1.0)); // unknown speeds refuse nothing
        assert!(steal_pays(1.0, 1.0, 0.0, 1.0));
        // Alike workers whose measured speeds differ by noise steal as if equal, even the
        // last tile of a slightly faster owner.
        assert!(steal_pays(1.0, 1.0, 0.98, 1.02));
        assert!(steal_pays(1.0, 1.0, 0.6, 1.1));
        assert!(!steal_pays(1.0, 1.0, 0.5, 1.0));
    }

    #[test]
    fn only_much_slower_workers_leave_their_own_tiles() {
        // Two GPU streams and two CPU threads 80 times slower: with 10 tiles' cost queued, a
        // CPU thread leaves its next tile (2 x 80 s against 10 / 2.0125 s), a GPU never does.
        let speeds = [1.0, 1.0, 0.0125, 0.0125];
        assert!(!keep_own_tile(1.0, 10.0, 2, &speeds));
        assert!(keep_own_tile(1.0, 10.0, 0, &speeds));
        assert!(keep_own_tile(1.0, 1.0, 0, &speeds));
        // With 400 tiles' cost queued it pays: 160 s against 400 / 2.0125 s.
        assert!(keep_own_tile(1.0, 400.0, 2, &speeds));
        // Alike workers keep their tiles whatever their noise says.
        assert!(keep_own_tile(1.0, 1.0, 1, &[1.02, 0.98, 1.0]));
        assert!(keep_own_tile(1.0, 1.0, 7, &[1.0]));
    }

    #[test]
    fn slow_thieves_leave_tiles_their_owner_finishes_sooner() {
        let costs = [1.0; 6];
        let q = WorkQueues::new(vec![vec![0, 1, 2, 3, 4, 5], vec![]], true)
            .with_speeds(&[1.0, 0.1], &costs);
        assert!(q.guarded());
        let mut slow = StealRng::new(0, 1, 0);
        // The owner reaches the back tile after 6 s; the thief would need 10 s.
        assert_eq!(q.next(1, &mut slow), None);
        assert_eq!(q.queued(), 6);
        // A fast thief takes it.
        let q = WorkQueues::new(vec![vec![], vec![0, 1, 2, 3, 4, 5]], true)
            .with_speeds(&[1.0, 0.1], &costs);
        let t = q.next(0, &mut StealRng::new(0, 0, 0)).unwrap();
        assert_eq!((t.task, t.stolen_from), (5, Some(1)));
        // Equal speeds, or speeds that do not fit, leave the policy unguarded.
        let q = WorkQueues::new(vec![vec![0], vec![]], true).with_speeds(&[2.0, 2.0], &costs);
        assert!(!q.guarded());
        let q = WorkQueues::new(vec![vec![0], vec![]], true).with_speeds(&[1.0], &costs);
        assert!(!q.guarded());
        let q = WorkQueues::new(vec![vec![0, 7], vec![]], true).with_speeds(&[1.0, 0.5], &costs);
        assert!(!q.guarded(), "task 7 has no cost");
    }

    /// A retired worker's deque is anyone's: stealing off, or a slow thief the guard would
    /// keep off a faster owner's tiles.
    #[test]
    fn a_retired_workers_deque_goes_to_the_others() {
        let costs = [1.0; 6];
        // Worker 0 (fast) fails on task 0 with 1 and 2 still queued; stealing is off.
        let q = WorkQueues::new(vec![vec![1, 2], vec![3]], false).with_speeds(&[10.0, 1.0], &costs);
        assert!(q.guarded());
        let mut rng = StealRng::new(0, 1, 0);
        assert_eq!(q.next(1, &mut rng).map(|t| t.task), Some(3));
        assert_eq!(q.next(1, &mut rng), None, "no stealing, no retirement");
        q.retire(0, 0);
        assert!(q.is_retired(0) && !q.is_retired(1));
        let mut taken = Vec::new();
        while let Some(t) = q.next(1, &mut rng) {
            assert_eq!(t.stolen_from, Some(0));
            taken.push(t.task);
        }
        // From the back: the failed task first, then the rest.
        assert_eq!(taken, [0, 2, 1]);
        assert!(q.remaining().is_empty());
    }

    /// What a pass left after a late retirement is queued again on the workers left only, by
    /// their speeds, with stealing on and the guard still keeping the slow off the fast's tiles.
    #[test]
    fn requeued_tasks_go_to_the_workers_left() {
        let costs = [1.0; 12];
        let q = WorkQueues::new(vec![vec![]; 3], false)
            .with_speeds(&[10.0, 10.0, 1.0], &costs)
            .with_retired(&[true, false, false]);
        let tasks: Vec<usize> = (0..11).collect();
        let again = q.requeue(&tasks);
        assert!(again.is_retired(0) && !again.is_retired(1) && !again.is_retired(2));
        assert!(again.guarded(), "a zero speed must not disarm the guard");
        let deques: Vec<usize> = (0..3)
            .map(|w| again.deques[w].lock().unwrap().len())
            .collect();
        // 11 tasks at speeds 10 and 1: 10 and 1.
        assert_eq!(deques, [0, 10, 1]);
        let mut all = again.remaining();
        all.sort();
        assert_eq!(all, tasks);
        // Stealing is on in the new queues: the fast worker, run dry, takes the slow one's.
        let mut rng = StealRng::new(0, 1, 1);
        let mut n = 0;
        while again.next(1, &mut rng).is_some() {
            n += 1;
        }
        assert_eq!(n, 11);
        // With nobody left, nothing is queued anywhere.
        let none = q.with_retired(&[true, true, true]).requeue(&tasks);
        assert!(none.remaining().is_empty());
    }

    proptest::proptest! {
        /// The guard skips its checks for workers not flagged slow: that is sound only if the
        /// pure rules could never refuse such a worker anything, whatever is queued.
        #[test]
        fn workers_not_flagged_slow_are_never_refused(
            speeds in proptest::collection::vec(0.001f64..10.0, 2..6),
            cost in 0.0f64..100.0,
            queued in 0.0f64..100.0,
        ) {
            let costs = [1.0; 2];
            let q = WorkQueues::new(vec![vec![0, 1]; speeds.len()], true)
                .with_speeds(&speeds, &costs);
            for w in 0..speeds.len() {
                if !q.slow(w) {
                    proptest::prop_assert!(keep_own_tile(cost, queued, w, &speeds));
                    for (v, &owner) in speeds.iter().enumerate() {
                        proptest::prop_assert!(
                            steal_pays(cost, queued, speeds[w], owner),
                            "thief {w} owner {v}"
                        );
                    }
                }
            }
            // And the flag is only ever set where the guard is armed.
            proptest::prop_assert!(q.guarded() || (0..speeds.len()).all(|w| !q.slow(w)));
        }
    }

    #[test]
    fn task_floors_let_slow_workers_take_small_pieces_and_guard_cheap_looking_ones() {
        // A GPU-sized tile of cost 8 and eight pieces of cost 0.01 in the deque of a worker
        // 100 times slower than the other (its share: 8.08 / 101 = 0.08). The mean task (0.9)
        // as its floor keeps it off its own pieces.
        let mut costs = vec![8.0];
        costs.extend([0.01; 8]);
        let deques = vec![vec![0], (1..9).collect()];
        let speeds = [1.0, 0.01];
        let mut rng = StealRng::new(1, 1, 0);
        let queues = || WorkQueues::new(deques.clone(), true).with_speeds(&speeds, &costs);
        assert!(queues().next(1, &mut rng).is_none());
        // Floors from the pieces' own pixels (as small as their cost): it takes the first.
        let mut floors = vec![8.0];
        floors.extend([0.01; 8]);
        let take = queues()
            .with_task_floors(&floors)
            .next(1, &mut rng)
            .expect("a piece");
        assert_eq!((take.task, take.stolen_from), (1, None));
        // A piece whose pixels say it is dearer than its estimate (a corner the map calls
        // cheap): counted at its floor, it is left to the fast worker.
        floors[1] = 0.5;
        let q = queues().with_task_floors(&floors);
        assert!(q.next(1, &mut rng).is_none());
        // Floors that do not cover every task are ignored; the fast worker is never refused.
        let q = queues().with_task_floors(&[0.01]);
        assert!(q.next(1, &mut rng).is_none());
        assert_eq!(q.next(0, &mut rng).map(|t| t.task), Some(0));
    }

    #[test]
    fn without_stealing_idle_workers_stop() {
        let q = WorkQueues::new(vec![vec![0], vec![]], false);
        assert_eq!(q.next(1, &mut StealRng::new(0, 1, 0)), None);
    }
}
