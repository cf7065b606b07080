//! Workers: what `--devices` asks for, the renderers behind it, and the worker loop that
//! renders a rank's tiles during a pass.
//!
//! A worker is a thread with a renderer and a deque (in [`WorkQueues`]). Several workers may
//! share one renderer: every CPU worker shares the CPU backend (one worker per thread), and
//! the OptiX backend can hand each stream of a GPU its own renderer or one shared one. The
//! renderers come from a [`RendererFactory`] supplied by the caller: this module knows no
//! backend, so the GPU backend plugs in by implementing [`RendererFactory::gpu`].
//!
//! [`worker_loop`] is the one worker loop, whether the frame runs in one process or over MPI
//! ranks ([`super::rank`]): each thread takes tiles from its own deque, then from the other
//! workers' cheap ends, renders them from the sums the plan gave, and sends them to its
//! rank's progress loop. A worker that finds nothing waits for tiles from another rank or a
//! retired worker, until the pass ends.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use anyhow::Context;

use super::cputime::thread_cpu_seconds;
use super::policy::{StealRng, Take, WorkQueues};
use super::protocol::{Granted, Plan, TaskData, TileDone};
use crate::render::{Tile, TileRenderer};

/// One entry of `--devices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// CPU workers: `cpu` (one per rayon thread, `workers: None`) or `cpu:N`.
    Cpu { workers: Option<usize> },
    /// `gpuD` (one worker) or `gpuDxS` (S workers, one CUDA stream each, on GPU D).
    Gpu { device: u32, streams: u32 },
}

/// Why a `--devices` list cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--devices: {entry:?}: {reason} (expected a comma-separated list of cpu, cpu:N, gpuD or gpuDxS)")]
pub struct DeviceSpecError {
    pub entry: String,
    pub reason: String,
}

impl DeviceSpec {
    /// Parses one entry: `cpu`, `cpu:N`, `gpuD`, `gpuDxS`.
    pub fn parse(entry: &str) -> Result<DeviceSpec, DeviceSpecError> {
        let e = entry.trim().to_ascii_lowercase();
        let fail = |reason: &str| DeviceSpecError {
            entry: entry.trim().to_string(),
            reason: reason.to_string(),
        };
        let positive = |s: &str, what: &str| -> Result<u64, DeviceSpecError> {
            match s.parse::<u64>() {
                Ok(n) if (1..=4096).contains(&n) => Ok(n),
                _ => Err(fail(&format!(
                    "{what} must be a whole number from 1 to 4096"
                ))),
            }
        };
        if e == "cpu" {
            return Ok(DeviceSpec::Cpu { workers: None });
        }
        if let Some(n) = e.strip_prefix("cpu:") {
            let n = positive(n, "the CPU worker count")?;
            return Ok(DeviceSpec::Cpu {
                workers: Some(n as usize),
            });
        }
        if let Some(rest) = e.strip_prefix("gpu") {
            let (dev, streams) = match rest.split_once('x') {
                Some((d, s)) => (d, positive(s, "the stream count")? as u32),
                None => (rest, 1),
            };
            let device = dev
                .parse::<u32>()
                .map_err(|_| fail("the GPU index must be a whole number, as in gpu0"))?;
            return Ok(DeviceSpec::Gpu { device, streams });
        }
        Err(fail("unknown device"))
    }

    /// Parses a comma-separated list; an empty list is an error.
    pub fn parse_list(list: &str) -> Result<Vec<DeviceSpec>, DeviceSpecError> {
        let specs = list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(DeviceSpec::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if specs.is_empty() {
            return Err(DeviceSpecError {
                entry: list.to_string(),
                reason: "no device given".into(),
            });
        }
        // A device named twice would get two groups of workers on the same hardware: two
        // CPU entries oversubscribe the cores (each thread of the second group competes with
        // one of the first), and two entries of one GPU are what `gpuDxS` says in one, with
        // the speeds measured per group split for nothing.
        for (i, spec) in specs.iter().enumerate() {
            if let Some(first) = specs[..i]
                .iter()
                .find(|s| s.device_name() == spec.device_name())
            {
                let entries: Vec<&str> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .collect();
                let once = match first {
                    DeviceSpec::Cpu { .. } => {
                        "name the CPU once: cpu for one worker per thread, or cpu:N for N workers"
                            .to_string()
                    }
                    DeviceSpec::Gpu { device, .. } => format!(
                        "name each GPU once, with its workers as streams: gpu{device}xS for S"
                    ),
                };
                return Err(DeviceSpecError {
                    entry: entries.get(i).copied().unwrap_or(list).to_string(),
                    reason: format!("{} is already in the list; {once}", spec.device_name()),
                });
            }
        }
        Ok(specs)
    }

    /// How many workers this entry stands for.
    pub fn worker_count(&self) -> usize {
        match *self {
            DeviceSpec::Cpu { workers } => workers.unwrap_or_else(rayon::current_num_threads),
            DeviceSpec::Gpu { streams, .. } => streams as usize,
        }
    }

    /// The device's short name ("cpu", "gpu0").
    pub fn device_name(&self) -> String {
        match self {
            DeviceSpec::Cpu { .. } => "cpu".into(),
            DeviceSpec::Gpu { device, .. } => format!("gpu{device}"),
        }
    }
}

/// Whether a `--devices` list has CPU workers.
pub fn has_cpu(specs: &[DeviceSpec]) -> bool {
    specs.iter().any(|s| matches!(s, DeviceSpec::Cpu { .. }))
}

/// Where workers get their renderers. The caller (the CLI, a test) supplies it.
pub trait RendererFactory {
    /// The renderer every CPU worker shares (asked for once per render).
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>>;
    /// The renderer of stream `stream` of GPU `device` (asked for once per stream; return
    /// clones of one `Arc` to share a renderer between streams).
    fn gpu(&self, device: u32, stream: u32) -> anyhow::Result<Arc<dyn TileRenderer>>;
}

/// A factory with a CPU renderer and no GPU support, for tests and for embedding the scheduler
/// without the GPU backend. The CLI uses `backend::WorkerFactory`, which also makes OptiX
/// workers.
pub struct CpuOnlyFactory(pub Arc<dyn TileRenderer>);

impl RendererFactory for CpuOnlyFactory {
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>> {
        Ok(self.0.clone())
    }

    fn gpu(&self, device: u32, _stream: u32) -> anyhow::Result<Arc<dyn TileRenderer>> {
        anyhow::bail!("--devices gpu{device}: this renderer factory has no GPU renderer (gpu workers need the OptiX backend); use --devices cpu or cpu:N")
    }
}

/// One worker: a renderer and where it came from.
#[derive(Clone)]
pub struct Worker {
    /// "cpu#3", "gpu0/s1": for statistics.
    pub label: String,
    /// The device name: "cpu", "gpu0".
    pub device: String,
    /// Index of the `--devices` entry this worker came from; workers of one entry, and of
    /// alike entries ([`super::speed_classes`]), are assumed to be equally fast when measured
    /// speeds weight later passes.
    pub group: usize,
    /// Whether a tile's cost is this thread's CPU time (CPU workers, whose renderer works on
    /// the calling thread) rather than wall time (GPU workers, which wait for the device).
    pub cpu_timed: bool,
    pub renderer: Arc<dyn TileRenderer>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("label", &self.label)
            .field("device", &self.device)
            .field("group", &self.group)
            .field("renderer", &self.renderer.name())
            .finish()
    }
}

/// The workers of a `--devices` list, renderers from `factory`.
pub fn build_workers(
    specs: &[DeviceSpec],
    factory: &dyn RendererFactory,
) -> anyhow::Result<Vec<Worker>> {
    let mut workers = Vec::new();
    let mut cpu: Option<Arc<dyn TileRenderer>> = None;
    let mut cpu_index = 0;
    for (group, spec) in specs.iter().enumerate() {
        match *spec {
            DeviceSpec::Cpu { .. } => {
                let renderer = match &cpu {
                    Some(r) => r.clone(),
                    None => {
                        let r = factory.cpu().context("cannot create the CPU renderer")?;
                        cpu = Some(r.clone());
                        r
                    }
                };
                for _ in 0..spec.worker_count() {
                    workers.push(Worker {
                        label: format!("cpu#{cpu_index}"),
                        device: "cpu".into(),
                        group,
                        cpu_timed: true,
                        renderer: renderer.clone(),
                    });
                    cpu_index += 1;
                }
            }
            DeviceSpec::Gpu { device, streams } => {
                for stream in 0..streams {
                    let renderer = factory.gpu(device, stream)?;
                    workers.push(Worker {
                        label: format!("gpu{device}/s{stream}"),
                        device: format!("gpu{device}"),
                        group,
                        cpu_timed: false,
                        renderer,
                    });
                }
            }
        }
    }
    Ok(workers)
}

/// What a pass does when a worker's renderer fails on a tile (`--on-worker-error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnWorkerError {
    /// The worker is retired: it takes no more tiles, in this pass or the later ones, and
    /// the others render its tiles, the failed one again from the film's sums, so every pixel
    /// still gets every sample once (and where the workers left are of the failed one's kind,
    /// the image is bit for bit the one it would have made). The frame goes on while a worker
    /// is left. A GPU that runs out of memory or loses its context mid-frame costs its share
    /// of the time, not the frame.
    #[default]
    Retire,
    /// The first error stops every worker and ends the frame (for benchmarks and checks, which
    /// must not pass on the strength of the workers that were left).
    Stop,
}

/// A worker whose renderer failed, and that rendered no more of the frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Retirement {
    pub worker: usize,
    /// "gpu0/s1".
    pub label: String,
    /// The pass (0-based; its samples are the pass's) and the tile it failed on.
    pub pass: usize,
    pub tile: Tile,
    /// The renderer's error with its causes, one line.
    pub error: String,
    /// Retired by its calibration, before the pass's first tile (`tile` is then the piece it
    /// failed on): it rendered none of the pass.
    pub before_tiles: bool,
}

impl Retirement {
    /// "worker gpu0/s1 retired in pass 1, its tiles rendered by the others: worker gpu0/s1
    /// (optix:0/w1) failed on tile ..." ("retired before pass 1" when its calibration failed).
    pub fn describe(&self) -> String {
        format!(
            "worker {} retired {} pass {}, its tiles rendered by the others: {}",
            self.label,
            if self.before_tiles { "before" } else { "in" },
            self.pass + 1,
            self.error
        )
    }
}

/// When and where one tile was rendered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileRecord {
    pub task: usize,
    pub worker: usize,
    pub stolen_from: Option<usize>,
    /// Seconds since the pass started (wall clock).
    pub start_s: f64,
    pub end_s: f64,
    /// The tile's measured cost in seconds: the worker thread's CPU time for CPU workers
    /// (when the platform has it), else the wall time. On a shared machine the wall time of
    /// a CPU tile also counts the time other processes held the core, which the next pass
    /// will not see again; CPU time is what the tile itself needs.
    pub cost_s: f64,
}

impl TileRecord {
    /// `task`, run by `worker` from the pass's start for `cost_s` seconds, not stolen: the
    /// record the tests of speeds and accuracy build passes of.
    #[cfg(test)]
    pub(crate) fn from_start(task: usize, worker: usize, cost_s: f64) -> TileRecord {
        TileRecord {
            task,
            worker,
            stolen_from: None,
            start_s: 0.0,
            end_s: cost_s,
            cost_s,
        }
    }

    /// Wall-clock seconds the tile took.
    pub fn seconds(&self) -> f64 {
        self.end_s - self.start_s
    }
}

/// The workers retired with worker `w` when its renderer failed: the other working workers of
/// its device, when the renderer says the device is lost ([`TileRenderer::device_lost`]: a
/// sticky CUDA error takes the context all of a GPU's streams share), else none.
/// `is_retired` tells the workers retired already (a pass's [`WorkQueues::is_retired`]).
pub(crate) fn retired_with(
    workers: &[Worker],
    w: usize,
    is_retired: impl Fn(usize) -> bool,
) -> Vec<usize> {
    if workers[w].renderer.device_lost().is_none() {
        return Vec::new();
    }
    (0..workers.len())
        .filter(|&v| v != w && workers[v].device == workers[w].device && !is_retired(v))
        .collect()
}

/// What a retirement's warning says after worker `w`'s `error`: who is retired, and that
/// `others` ("the other workers") take the tiles. Where the device is lost, why, unless the
/// error says it already (a worker whose own error is a consequence of another's loss, such
/// as OptiX's OPTIX_ERROR_CUDA_ERROR, may be the first to report).
pub(crate) fn retirement_note(
    workers: &[Worker],
    w: usize,
    error: &str,
    with_it: &[usize],
    others: &str,
) -> String {
    let worker = &workers[w];
    let Some(why) = worker.renderer.device_lost() else {
        return format!("the worker is retired, {others} take its tiles");
    };
    let lost = if error.contains(&why) {
        "its device is lost".to_string()
    } else {
        format!("its device is lost: {why}")
    };
    if with_it.is_empty() {
        return format!(
            "{} can render no more ({lost}); the worker is retired, {others} take its tiles",
            worker.device
        );
    }
    let mut labels = vec![worker.label.as_str()];
    labels.extend(with_it.iter().map(|&v| workers[v].label.as_str()));
    format!(
        "{} can render no more ({lost}), so its workers {} are retired; {others} take their \
         tiles",
        worker.device,
        labels.join(", ")
    )
}

/// The error of a worker retired with `failed`'s device ([`retired_with`]), `error` being
/// `failed`'s.
pub(crate) fn lost_with(workers: &[Worker], failed: usize, error: &str) -> String {
    format!(
        "{} was lost when {} failed: {error}",
        workers[failed].device, workers[failed].label
    )
}

/// What a worker thread tells its rank's progress loop.
pub(super) enum Event {
    /// A tile rendered: what rank 0 is told, and the tile with its new sums, which the rank
    /// keeps ([`super::holdings`]).
    Done(TileDone, Tile, Vec<[f32; 4]>),
    /// The rank's frame cannot go on: the error (under `--on-worker-error stop`), or the
    /// failure of its last working worker.
    Failed(String),
    /// A worker failed and was retired; its tile is queued again on the rank.
    Retired {
        local: usize,
        global: u32,
        tile: Tile,
        error: String,
        /// What the warning says after the error: who is retired, who takes the tiles.
        note: String,
        /// The other workers of its device retired with it, its device being lost: (local,
        /// global, error).
        with_it: Vec<(usize, u32, String)>,
    },
}

/// A task held by a rank: its tile, its prior sums, and (when it came from another rank)
/// the global worker whose deque it left there.
pub(super) struct Held {
    pub(super) tile: Tile,
    pub(super) prior: Option<Vec<[f32; 4]>>,
    /// Its odd-plane values ([`TaskData::odd`]).
    pub(super) odd: Vec<f32>,
    /// Its cost and floor ([`TaskData::cost`]).
    pub(super) cost: f64,
    pub(super) floor: f64,
    /// The pixels it skips ([`TaskData::skip`]).
    pub(super) skip: Option<Vec<bool>>,
    pub(super) origin: Option<u32>,
}

impl Held {
    fn of(data: TaskData, origin: Option<u32>) -> Held {
        Held {
            tile: data.tile,
            prior: data.prior,
            odd: data.odd,
            cost: data.cost,
            floor: data.floor,
            skip: data.skip,
            origin,
        }
    }
}

/// Where a pass's workers stand.
#[derive(Default)]
struct WakeState {
    /// Bumped when tiles arrive, to wake workers that found none.
    generation: u64,
    /// The pass is over for this rank's workers.
    over: bool,
    /// Worker threads still running (a stop waits for the tiles in flight).
    running: usize,
}

/// A pass's failures on a rank, told apart under one lock: a worker's failure and those of
/// its device's other workers, retired with it.
#[derive(Default)]
struct PassFailures {
    /// The workers that failed in the pass.
    labels: Vec<String>,
    /// The pass's first failure.
    first: Option<String>,
}

/// What a rank's workers share during one pass.
pub(super) struct PassShared {
    pub(super) pass: u32,
    samples: Range<u32>,
    seed: u64,
    /// The global index of the rank's first worker.
    offset: usize,
    pub(super) queues: WorkQueues,
    /// The speeds rank 0 planned this rank's workers at, and every task's estimated cost
    /// (the plan's): what the steal guards weigh, within the rank and for thief ranks.
    pub(super) speeds: Vec<f64>,
    /// Every task's cost and floor for the steal guards (`sched::tiles::area_floors`), by
    /// task number: this rank's, and those given it (not a number for the others).
    costs: Mutex<(Vec<f64>, Vec<f64>)>,
    /// The pass's mean task cost.
    mean_cost: f64,
    pub(super) tasks: Mutex<HashMap<u32, Held>>,
    state: Mutex<WakeState>,
    cv: Condvar,
    start: Instant,
    /// What a renderer error does (`--on-worker-error`), and how many of the rank's workers
    /// are not retired: the last one's error ends the frame, as nobody would render its tiles.
    on_error: OnWorkerError,
    live: AtomicUsize,
    failures: Mutex<PassFailures>,
    /// Who takes a retired worker's tiles, for the warning: "the other workers", or "the
    /// rank's other workers" among several ranks.
    others: &'static str,
}

impl PassShared {
    /// The pass of `plan` on a rank whose first worker is global worker `offset` and whose
    /// workers `retired` are out of the frame, their failures handled as `on_error` says and
    /// their tiles taken by `others` (for the warning); an error when the plan does not fit
    /// the rank's workers.
    pub(super) fn new(
        plan: Plan,
        offset: usize,
        seed: u64,
        retired: &[bool],
        (on_error, others): (OnWorkerError, &'static str),
    ) -> Result<PassShared, String> {
        if plan.deques.len() != retired.len() {
            return Err(format!(
                "a plan for {} workers; this rank has {}",
                plan.deques.len(),
                retired.len()
            ));
        }
        let n = plan.task_count as usize;
        let (mut costs, mut floors) = (vec![f64::NAN; n], vec![f64::NAN; n]);
        for t in &plan.tasks {
            let i = t.task as usize;
            if i >= n {
                return Err(format!("a plan with task {i} of {n}"));
            }
            (costs[i], floors[i]) = (t.cost, t.floor);
        }
        let held: HashMap<u32, Held> = plan
            .tasks
            .into_iter()
            .map(|t| (t.task, Held::of(t, None)))
            .collect();
        if plan.deques.iter().flatten().any(|t| !held.contains_key(t)) {
            return Err("a plan that queues a task without its tile".into());
        }
        let deques = plan
            .deques
            .iter()
            .map(|d| d.iter().map(|&t| t as usize).collect())
            .collect();
        Ok(PassShared {
            pass: plan.pass,
            samples: plan.samples,
            seed,
            offset,
            queues: WorkQueues::new(deques, plan.steal)
                .with_speeds(&plan.speeds, &costs)
                .with_mean_cost(plan.mean_cost)
                .with_task_floors(&floors)
                .with_retired(retired),
            speeds: plan.speeds,
            costs: Mutex::new((costs, floors)),
            mean_cost: plan.mean_cost,
            tasks: Mutex::new(held),
            state: Mutex::new(WakeState::default()),
            cv: Condvar::new(),
            start: Instant::now(),
            on_error,
            live: AtomicUsize::new(retired.iter().filter(|&&r| !r).count()),
            failures: Mutex::new(PassFailures::default()),
            others,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WakeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes sleeping workers: tiles have arrived.
    pub(super) fn wake(&self) {
        self.state().generation += 1;
        self.cv.notify_all();
    }

    /// Ends the pass for this rank's workers: they take no more tiles.
    pub(super) fn end(&self) {
        self.state().over = true;
        self.cv.notify_all();
    }

    /// Takes the tiles received from another rank (`tasks`, in the order it gave them).
    pub(super) fn receive(&self, tasks: Vec<Granted>) {
        let ids: Vec<usize> = tasks.iter().map(|g| g.data.task as usize).collect();
        {
            let mut costs = self.costs.lock().unwrap_or_else(|p| p.into_inner());
            for g in &tasks {
                let (t, d) = (g.data.task as usize, &g.data);
                self.queues.learn(t, d.cost, d.floor);
                if t < costs.0.len() {
                    (costs.0[t], costs.1[t]) = (d.cost, d.floor);
                }
            }
        }
        {
            let mut held = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            for g in tasks {
                held.insert(g.data.task, Held::of(g.data, Some(g.from_worker)));
            }
        }
        super::rank_policy::accept(&self.queues, &ids);
        self.wake();
    }

    /// Waits until every worker thread of the pass has returned (after [`PassShared::end`]):
    /// their tiles in flight are then in the rank's channel.
    pub(super) fn wait_for_workers(&self) {
        let mut s = self.state();
        while s.running > 0 {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Counts a worker thread about to start; [`Running`] counts it out.
    pub(super) fn running(shared: &Arc<PassShared>) -> Running {
        shared.state().running += 1;
        Running(shared.clone())
    }

    /// Tiles for a thief rank that wants `want`, whose fastest worker runs at `thief_speed`:
    /// from this rank's cheap ends, those the thief finishes sooner than this rank would.
    pub(super) fn give_away(&self, want: usize, thief_speed: f64) -> Result<Vec<Granted>, String> {
        // A worker retired in this pass (planned at its speed) does none of the work queued
        // here.
        let own_speeds = self.queues.zero_retired(&self.speeds);
        let given = {
            let costs = self.costs.lock().unwrap_or_else(|p| p.into_inner());
            let guard = super::rank_policy::GrantGuard {
                thief_speed,
                own_speeds: &own_speeds,
                costs: &costs.0,
                floors: &costs.1,
                mean: Some(self.mean_cost),
            };
            super::rank_policy::give_away(&self.queues, want, guard)
        };
        let mut held = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        given
            .into_iter()
            .map(|(task, local)| {
                let h = held
                    .remove(&(task as u32))
                    .ok_or_else(|| format!("task {task} queued without its tile"))?;
                Ok(Granted {
                    data: TaskData {
                        task: task as u32,
                        tile: h.tile,
                        prior: h.prior,
                        odd: h.odd,
                        cost: h.cost,
                        floor: h.floor,
                        skip: h.skip,
                    },
                    // The deque it left last: a tile can move on from a thief.
                    from_worker: (self.offset + local) as u32,
                })
            })
            .collect()
    }

    /// The next task for worker `local`, waiting while tiles may still arrive from other
    /// ranks or from a retired worker's deque; `None` once the pass is over for it (ended, the
    /// worker retired, or `halt` set: rank 0's frame is stopping).
    fn next_take(&self, local: usize, rng: &mut StealRng, halt: Option<&AtomicU8>) -> Option<Take> {
        loop {
            if self.queues.is_retired(local) || halt.is_some_and(|h| h.load(Ordering::SeqCst) != 0)
            {
                return None;
            }
            let generation = {
                let s = self.state();
                if s.over {
                    return None;
                }
                s.generation
            };
            if let Some(take) = self.queues.next(local, rng) {
                return Some(take);
            }
            let mut s = self.state();
            while s.generation == generation && !s.over {
                s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        }
    }
}

/// A running worker thread of a pass, counted out when it returns.
pub(super) struct Running(Arc<PassShared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.state().running -= 1;
        self.0.cv.notify_all();
    }
}

/// One worker's thread during a pass (`running`, which counts it): takes tasks from the
/// rank's queues (its own deque first, then the other workers' cheap ends), renders each from
/// its prior sums, and sends the result to the progress loop (`tx`), until the pass is over
/// for it or `halt` is set.
pub(super) fn worker_loop(
    running: Running,
    local: usize,
    workers: &[Worker],
    halt: Option<&AtomicU8>,
    tx: Sender<Event>,
) {
    let shared = &*running.0;
    let offset = shared.offset;
    let (global, worker) = (offset + local, &workers[local]);
    let mut rng = StealRng::new(shared.seed, global, shared.pass as usize);
    while let Some(take) = shared.next_take(local, &mut rng, halt) {
        let task = take.task as u32;
        let held = shared
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&task);
        let Some(held) = held else {
            let _ = tx.send(Event::Failed(format!(
                "scheduler bug: task {task} was queued without its tile"
            )));
            return;
        };
        // Kept to queue the tile again should this worker fail on it and be retired.
        let back = Held {
            prior: (shared.on_error == OnWorkerError::Retire)
                .then(|| held.prior.clone())
                .flatten(),
            odd: held.odd.clone(),
            skip: held.skip.clone(),
            ..held
        };
        let stolen_from = match take.stolen_from {
            Some(v) => Some((offset + v) as u32),
            None => held.origin,
        };
        match render_task(shared, worker, held) {
            Ok((mut done, tile, sums)) => {
                done.task = task;
                done.worker = global as u32;
                done.stolen_from = stolen_from;
                if tx.send(Event::Done(done, tile, sums)).is_err() {
                    return;
                }
            }
            Err(error) => {
                let failed = Failed {
                    local,
                    offset,
                    task: take.task,
                    error,
                };
                return fail(shared, workers, failed, back, &tx);
            }
        }
    }
}

/// Renders `held` on `worker` at the pass's samples, timed (the thread's CPU time for CPU
/// workers, else wall time): the tile's sums, its task and worker left for the caller.
fn render_task(
    shared: &PassShared,
    worker: &Worker,
    held: Held,
) -> Result<(TileDone, Tile, Vec<[f32; 4]>), String> {
    let tile = held.tile;
    let mut acc = held
        .prior
        .unwrap_or_else(|| vec![[0.0; 4]; tile.pixel_count()]);
    let cpu0 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
    let t0 = shared.start.elapsed().as_secs_f64();
    let samples = shared.samples.clone();
    let result = match &held.skip {
        Some(skip) => worker
            .renderer
            .render_tile_skipping(tile, samples.clone(), &mut acc, skip),
        None => worker.renderer.render_tile(tile, samples.clone(), &mut acc),
    };
    let t1 = shared.start.elapsed().as_secs_f64();
    let cpu1 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
    if let Err(e) = result {
        return Err(format!(
            "worker {} ({}) failed on tile x={} y={} {}x{}, samples {samples:?}: {e:#}",
            worker.label,
            worker.renderer.name(),
            tile.x,
            tile.y,
            tile.w,
            tile.h,
        ));
    }
    let done = TileDone {
        pass: shared.pass,
        task: 0,
        worker: 0,
        stolen_from: None,
        start_s: t0,
        end_s: t1,
        cost_s: match (cpu0, cpu1) {
            (Some(a), Some(b)) => b - a,
            _ => t1 - t0,
        },
    };
    Ok((done, tile, acc))
}

/// A worker's failure on a task.
struct Failed {
    local: usize,
    offset: usize,
    task: usize,
    error: String,
}

/// What a worker's failure does: under `--on-worker-error retire`, the worker (and, its
/// device lost, the device's other workers) is retired and the task queued again for the
/// others, unless no worker of the rank would be left; otherwise the rank's frame fails.
fn fail(shared: &PassShared, workers: &[Worker], f: Failed, back: Held, tx: &Sender<Event>) {
    let mut failures = shared.failures.lock().unwrap_or_else(|p| p.into_inner());
    let tile = back.tile;
    let requeue = || {
        shared
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(f.task as u32, back);
        shared.queues.retire(f.local, f.task);
        shared.wake();
    };
    let retire = shared.on_error == OnWorkerError::Retire;
    if retire && shared.queues.is_retired(f.local) {
        // Retired with its device by another worker's failure, which the progress loop has
        // been told: the tile in flight failed too, and goes back.
        return requeue();
    }
    failures.labels.push(workers[f.local].label.clone());
    failures.first.get_or_insert_with(|| f.error.clone());
    if !retire {
        let _ = tx.send(Event::Failed(f.error));
        return;
    }
    let with_it = retired_with(workers, f.local, |v| shared.queues.is_retired(v));
    // The rank's last working workers cannot hand their tiles to anyone: the frame fails.
    let leaving = 1 + with_it.len();
    if shared.live.fetch_sub(leaving, Ordering::SeqCst) <= leaving {
        let _ = tx.send(Event::Failed(format!(
            "no worker is left ({} failed in pass {}, any others earlier); the first failure: {}",
            failures.labels.join(", "),
            shared.pass + 1,
            failures.first.as_deref().unwrap_or(&f.error)
        )));
        return;
    }
    for &v in &with_it {
        shared.queues.retire_idle(v);
    }
    // Said before the tile is queued again: its next rendering's `Done` comes after this in
    // the channel, so rank 0 hears of the retirement before the pass can end.
    let note = retirement_note(workers, f.local, &f.error, &with_it, shared.others);
    let lost = lost_with(workers, f.local, &f.error);
    let _ = tx.send(Event::Retired {
        local: f.local,
        global: (f.offset + f.local) as u32,
        tile,
        note,
        with_it: with_it
            .iter()
            .map(|&v| (v, (f.offset + v) as u32, lost.clone()))
            .collect(),
        error: f.error,
    });
    requeue();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_entries_are_found_anywhere_in_a_device_list() {
        let has = |list: &str| has_cpu(&DeviceSpec::parse_list(list).unwrap());
        assert!(has("gpu0x2,cpu"));
        assert!(has("cpu:1,gpu0"));
        assert!(!has("gpu0x2,gpu1"));
        assert!(!has_cpu(&[]));
    }

    #[test]
    fn device_lists_parse() {
        assert_eq!(
            DeviceSpec::parse_list("gpu0x2,cpu:3,GPU1").unwrap(),
            vec![
                DeviceSpec::Gpu {
                    device: 0,
                    streams: 2
                },
                DeviceSpec::Cpu { workers: Some(3) },
                DeviceSpec::Gpu {
                    device: 1,
                    streams: 1
                },
            ]
        );
        for bad in [
            "",
            "cpu:0",
            "cpu:x",
            "gpu",
            "gpux2",
            "gpu0x0",
            "tpu0",
            "cpu:99999",
        ] {
            assert!(DeviceSpec::parse_list(bad).is_err(), "{bad:?}");
        }
        let e = DeviceSpec::parse_list("cpu,fpga").unwrap_err();
        assert_eq!(e.entry, "fpga");
        assert!(e.to_string().contains("unknown device"));
    }

    /// A renderer that fails on its first tile after `delay`, or renders ones.
    struct Flaky {
        fail_after: Option<std::time::Duration>,
    }

    impl TileRenderer for Flaky {
        fn name(&self) -> String {
            "flaky".into()
        }

        fn render_tile(
            &self,
            _tile: Tile,
            samples: Range<u32>,
            accum: &mut [[f32; 4]],
        ) -> anyhow::Result<()> {
            if let Some(delay) = self.fail_after {
                std::thread::sleep(delay);
                anyhow::bail!("device lost");
            }
            for a in accum.iter_mut() {
                a[3] += (samples.end - samples.start) as f32;
            }
            Ok(())
        }
    }

    fn worker(label: &str, fail_after: Option<std::time::Duration>) -> Worker {
        Worker {
            label: label.into(),
            device: "test".into(),
            group: 0,
            cpu_timed: false,
            renderer: Arc::new(Flaky { fail_after }),
        }
    }

    /// One pass of `tiles` on `workers` whose deques are `deques`, stealing as `steal` says,
    /// through the worker loop: every event the loop sends, once the pass's tiles are all
    /// rendered (or, after a `Failed`, at once).
    fn run_loop(workers: &[Worker], deques: Vec<Vec<u32>>, on_error: OnWorkerError) -> Vec<Event> {
        let tasks = (0..6)
            .map(|i| TaskData {
                task: i,
                tile: Tile {
                    x: 4 * i,
                    y: 0,
                    w: 4,
                    h: 4,
                },
                prior: None,
                odd: Vec::new(),
                cost: 1.0,
                floor: 1.0,
                skip: None,
            })
            .collect();
        let plan = Plan {
            pass: 0,
            samples: 0..3,
            steal: false,
            deques,
            tasks,
            speeds: Vec::new(),
            task_count: 6,
            mean_cost: 1.0,
            sends: Vec::new(),
            incoming: 0,
        };
        let retired = vec![false; workers.len()];
        let others = (on_error, "the other workers");
        let shared = Arc::new(PassShared::new(plan, 0, 1, &retired, others).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let mut events = Vec::new();
        std::thread::scope(|scope| {
            for local in 0..workers.len() {
                let (tx, running) = (tx.clone(), PassShared::running(&shared));
                scope.spawn(move || worker_loop(running, local, workers, None, tx));
            }
            let mut done = 0;
            while done < 6 {
                let ev = rx.recv().unwrap();
                match &ev {
                    Event::Done(..) => done += 1,
                    Event::Failed(_) => done = 6,
                    Event::Retired { .. } => {}
                }
                events.push(ev);
            }
            shared.end();
        });
        events
    }

    /// Worker 0 holds every tile and fails on its first after the others have found nothing
    /// to do without stealing: they wait, take its deque once it is retired, and the pass
    /// completes. Under `stop` the error names the worker and the tile instead.
    #[test]
    fn tiles_of_a_worker_retired_after_the_others_ran_dry_are_rendered_by_them() {
        let workers = [
            worker("w0", Some(std::time::Duration::from_millis(50))),
            worker("w1", None),
            worker("w2", None),
        ];
        let deques = vec![(0..6).collect(), vec![], vec![]];
        let events = run_loop(&workers, deques.clone(), OnWorkerError::Retire);
        let mut rendered = Vec::new();
        let mut retired = Vec::new();
        for ev in events {
            match ev {
                Event::Done(d, _, sums) => {
                    assert_ne!(d.worker, 0);
                    assert!(sums.iter().all(|p| p[3] == 3.0));
                    rendered.push(d.task);
                }
                Event::Retired {
                    local, tile, error, ..
                } => retired.push((local, tile, error)),
                Event::Failed(e) => panic!("{e}"),
            }
        }
        rendered.sort();
        assert_eq!(rendered, (0..6).collect::<Vec<u32>>());
        assert_eq!(retired.len(), 1);
        let (local, tile, error) = &retired[0];
        assert_eq!((*local, tile.x), (0, 0));
        assert!(
            error.contains("worker w0 (flaky) failed on tile"),
            "{error}"
        );
        assert!(error.contains("device lost"), "{error}");

        // Stop instead: the error, naming the worker and the tile.
        let events = run_loop(&workers, deques, OnWorkerError::Stop);
        let Some(Event::Failed(e)) = events.last() else {
            panic!("the pass should fail");
        };
        assert!(
            e.contains("worker w0 (flaky) failed on tile x=0 y=0 4x4"),
            "{e}"
        );
    }

    /// A renderer of a lost device, saying why.
    struct Lost;

    impl TileRenderer for Lost {
        fn name(&self) -> String {
            "lost".into()
        }

        fn render_tile(&self, _: Tile, _: Range<u32>, _: &mut [[f32; 4]]) -> anyhow::Result<()> {
            anyhow::bail!("OPTIX_ERROR_CUDA_ERROR")
        }

        fn device_lost(&self) -> Option<String> {
            Some("s1 met CUDA_ERROR_ILLEGAL_ADDRESS".into())
        }
    }

    /// The warning of a lost device names every worker retired with it, and why it was lost
    /// unless the error said so already; a failure that keeps the device retires one worker.
    #[test]
    fn retirement_warnings_say_who_and_why() {
        let lost = |label: &str| Worker {
            label: label.into(),
            device: "g".into(),
            group: 0,
            cpu_timed: false,
            renderer: Arc::new(Lost),
        };
        let workers = [
            lost("g/s0"),
            lost("g/s1"),
            lost("g/s2"),
            worker("cpu#0", None),
        ];
        let queues = WorkQueues::new(vec![vec![]; 4], true);
        queues.retire_idle(2);
        let with_it = retired_with(&workers, 0, |v| queues.is_retired(v));
        assert_eq!(with_it, [1]);
        assert_eq!(
            retirement_note(
                &workers,
                0,
                "OPTIX_ERROR_CUDA_ERROR",
                &with_it,
                "the others"
            ),
            "g can render no more (its device is lost: s1 met CUDA_ERROR_ILLEGAL_ADDRESS), so \
             its workers g/s0, g/s1 are retired; the others take their tiles"
        );
        let error = "since s1 met CUDA_ERROR_ILLEGAL_ADDRESS";
        assert_eq!(
            retirement_note(&workers, 1, error, &[], "the others"),
            "g can render no more (its device is lost); the worker is retired, the others take \
             its tiles"
        );
        // (The CPU worker's device is "test", and its renderer keeps it.)
        assert!(retired_with(&workers, 3, |v| queues.is_retired(v)).is_empty());
        assert_eq!(
            retirement_note(&workers, 3, "out of memory", &[], "the others"),
            "the worker is retired, the others take its tiles"
        );
        assert_eq!(
            lost_with(&workers, 0, "E"),
            "g was lost when g/s0 failed: E"
        );
    }

    /// A device named twice is refused, naming the second entry and the one-entry spelling.
    #[test]
    fn a_device_named_twice_is_refused() {
        for (list, entry, cure) in [
            ("cpu,cpu", "cpu", "cpu:N"),
            ("cpu, gpu0x2,cpu:3", "cpu:3", "cpu:N"),
            ("gpu0,gpu1,GPU0x2", "GPU0x2", "gpu0xS"),
            ("gpu1x2,cpu,gpu1", "gpu1", "gpu1xS"),
        ] {
            let e = DeviceSpec::parse_list(list).unwrap_err();
            assert_eq!(e.entry, entry, "{list}");
            assert!(e.to_string().contains("already in the list"), "{e}");
            assert!(e.to_string().contains(cure), "{e}");
        }
        assert!(DeviceSpec::parse_list("gpu0,gpu1,cpu").is_ok());
    }
}
