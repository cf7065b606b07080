//! Workers: what `--devices` asks for, the renderers behind it, and the threaded executor
//! that runs one pass of tiles over them.
//!
//! A worker is a thread with a renderer and a deque (in [`WorkQueues`]). Several workers may
//! share one renderer: every CPU worker shares the CPU backend (one worker per thread), and
//! the OptiX backend can hand each stream of a GPU its own renderer or one shared one. The
//! renderers come from a [`RendererFactory`] supplied by the caller: this module knows no
//! backend, so the GPU backend plugs in by implementing [`RendererFactory::gpu`].

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use anyhow::Context;

use super::cputime::thread_cpu_seconds;
use super::policy::{StealRng, WorkQueues};
use crate::render::{Film, Tile, TileRenderer};

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

/// Under [`OnWorkerError::Retire`], the retirements that calibration `failures` make before
/// pass `pass` (0-based): each failing worker, as its first tile would have retired it, and,
/// when its renderer says its device is lost, the device's other workers not yet `retired`
/// (marked in it). One warning per failure goes to `warn` ("{error}; {note}", the note saying
/// that `others` take the tiles), as in a pass.
pub(crate) fn retire_after_calibration(
    workers: &[Worker],
    failures: Vec<super::calibrate::PieceFailure>,
    retired: &mut [bool],
    pass: usize,
    others: &str,
    mut warn: impl FnMut(String),
) -> Vec<Retirement> {
    let mut out = Vec::new();
    for f in failures {
        let w = f.worker;
        if retired[w] {
            // Retired with its device by an earlier failure of this calibration.
            continue;
        }
        let with_it = retired_with(workers, w, |v| retired[v]);
        let error = format!("{:#}", f.error);
        let note = retirement_note(workers, w, &error, &with_it, others);
        warn(format!("{error}; {note}"));
        let lost = lost_with(workers, w, &error);
        let gone =
            std::iter::once((w, error)).chain(with_it.into_iter().map(|v| (v, lost.clone())));
        for (v, error) in gone {
            retired[v] = true;
            out.push(Retirement {
                worker: v,
                label: workers[v].label.clone(),
                pass,
                tile: f.piece,
                error,
                before_tiles: true,
            });
        }
    }
    out
}

/// One pass over the tiles: which samples, on which film.
pub struct PassJob<'a> {
    /// The tiles, indexed by task number.
    pub tiles: &'a [Tile],
    pub samples: Range<u32>,
    /// The film holding the earlier passes: each tile starts from its pixels' sums so far.
    pub film: &'a Film,
    /// Pass number and seed: together they seed the workers' victim choices.
    pub pass: usize,
    pub seed: u64,
    /// Set (by a Ctrl-C handler) to stop: the workers take no new tile, the tiles in flight
    /// finish, and the pass ends incomplete ([`PassRun::complete`] false).
    pub stop: &'a AtomicBool,
    pub on_error: OnWorkerError,
    /// Adaptive sampling's blocks for tiles that skip the stopped ones: each tile's pixels
    /// outside the blocks still sampling are skipped
    /// ([`crate::render::TileRenderer::render_tile_skipping`]). `None`: every pixel of every
    /// tile renders.
    pub skip: Option<&'a super::adaptive_sampling::BlockMask>,
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

/// What a pass produced: each tile's new accumulation and its record, by task number.
pub struct PassRun {
    /// One per rendered tile: every tile, in task order, when the pass is complete.
    pub records: Vec<TileRecord>,
    /// Per task: the tile's new sums, or empty for a tile a stop left unrendered.
    pub buffers: Vec<Vec<[f32; 4]>>,
    /// From the start of the pass to the end of its last tile.
    pub makespan_s: f64,
    /// False when [`PassJob::stop`] ended the pass before every tile was rendered.
    pub complete: bool,
    /// The workers this pass retired ([`OnWorkerError::Retire`]), in the order they failed.
    pub retired: Vec<Retirement>,
}

/// A renderer's failure on a tile, in a round of [`run_pass`].
struct Failure {
    worker: usize,
    task: usize,
    error: anyhow::Error,
    /// False for a worker that had been retired with its device by another worker's failure
    /// (its tile in flight failed too, as expected): its tile goes back, and it is not retired
    /// a second time.
    retires: bool,
    /// The other workers of the device, retired with this one because its renderer said the
    /// device is lost ([`TileRenderer::device_lost`]).
    with_it: Vec<usize>,
}

/// What [`run_pass`] calls after every tile that arrives: given a way to make the film as it
/// stands, it makes it only when it wants it (a checkpoint due), since at 4K that is a copy
/// of 130 MB.
pub type AfterTileHook<'a> = dyn FnMut(&dyn Fn() -> Film) + 'a;

/// `film` with the finished tiles of pass `pass` written in (`buffers[i]` of `tiles[i]`; an
/// empty buffer is a tile not finished).
pub fn film_with(film: &Film, tiles: &[Tile], buffers: &[Vec<[f32; 4]>], pass: usize) -> Film {
    let mut out = film.clone();
    for (t, buf) in tiles.iter().zip(buffers) {
        if !buf.is_empty() {
            out.write_pass_tile(*t, buf, pass);
        }
    }
    out
}

/// What one round of a pass's threads left behind.
struct Round {
    /// Each renderer failure, in the order they came.
    failures: Vec<Failure>,
    duplicate: Option<usize>,
}

/// Runs one pass: one thread per worker that is not retired (`queues`), each taking tasks
/// from `queues` until none is left for it. Tiles are rendered into private buffers (copies
/// of the film's tile); the caller writes them into the film after the pass.
///
/// A renderer error, under [`OnWorkerError::Stop`], stops every worker and is returned,
/// naming the tile and the worker. Under [`OnWorkerError::Retire`] only the failing worker
/// stops ([`WorkQueues::retire`]): the others take its deque, and when a worker failed after
/// the others had already run dry, the tiles left are queued again for the workers left
/// ([`WorkQueues::requeue`]) and they run another round. The pass fails only when no worker
/// is left, with the first error.
///
/// `after_tile`, when given, is called on this thread after every tile that arrives, with a
/// way to make the film as it stands (the pass's film plus the tiles finished so far): a
/// checkpoint inside the pass, when the caller finds one due.
pub fn run_pass(
    workers: &[Worker],
    queues: &WorkQueues,
    job: &PassJob,
    progress: &super::progress::Progress,
    mut after_tile: Option<&mut AfterTileHook<'_>>,
) -> anyhow::Result<PassRun> {
    assert_eq!(workers.len(), queues.workers(), "one deque per worker");
    let start = Instant::now();
    let mut records: Vec<Option<TileRecord>> = vec![None; job.tiles.len()];
    let mut buffers: Vec<Vec<[f32; 4]>> = vec![Vec::new(); job.tiles.len()];
    let mut retired = Vec::new();
    let mut first_error = None;
    let mut requeued: Option<WorkQueues> = None;
    loop {
        let q = requeued.as_ref().unwrap_or(queues);
        let round = run_round(
            workers,
            q,
            job,
            progress,
            start,
            (&mut records, &mut buffers),
            after_tile.as_deref_mut(),
        );
        if let Some(task) = round.duplicate {
            anyhow::bail!(
                "scheduler bug: tile {task} was rendered twice in pass {}",
                job.pass
            );
        }
        let new_failures = !round.failures.is_empty();
        for f in round.failures {
            if job.on_error == OnWorkerError::Stop {
                return Err(f.error);
            }
            if !f.retires {
                continue;
            }
            let (tile, error) = (job.tiles[f.task], format!("{:#}", f.error));
            let siblings: Vec<Retirement> = f
                .with_it
                .iter()
                .map(|&v| Retirement {
                    worker: v,
                    label: workers[v].label.clone(),
                    pass: job.pass,
                    tile,
                    error: lost_with(workers, f.worker, &error),
                    before_tiles: false,
                })
                .collect();
            retired.push(Retirement {
                worker: f.worker,
                label: workers[f.worker].label.clone(),
                pass: job.pass,
                tile,
                error,
                before_tiles: false,
            });
            retired.extend(siblings);
            first_error.get_or_insert(f.error);
        }
        let missing: Vec<usize> = (0..records.len())
            .filter(|&t| records[t].is_none())
            .collect();
        if missing.is_empty() || job.stop.load(Ordering::Relaxed) {
            break;
        }
        if q.working() == 0 {
            let labels: Vec<&str> = retired.iter().map(|r| r.label.as_str()).collect();
            let e = first_error
                .take()
                .unwrap_or_else(|| anyhow::anyhow!("every worker was retired before the pass"));
            return Err(e.context(format!(
                "no worker is left ({} failed in pass {}, any others earlier), {} of {} tiles \
                 of the pass unrendered; the first failure",
                labels.join(", "),
                job.pass + 1,
                missing.len(),
                records.len(),
            )));
        }
        if !new_failures {
            anyhow::bail!(
                "scheduler bug: tile {} was never rendered in pass {}",
                missing[0],
                job.pass
            );
        }
        // Workers that had run dry before the failure have ended: the tiles left start
        // another round on the workers left.
        requeued = Some(q.requeue(&missing));
    }
    let complete = records.iter().all(Option::is_some);
    let records: Vec<TileRecord> = records.into_iter().flatten().collect();
    let makespan_s = records.iter().map(|r| r.end_s).fold(0.0, f64::max);
    Ok(PassRun {
        records,
        buffers,
        makespan_s,
        complete,
        retired,
    })
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

/// One round of [`run_pass`]: a thread for each worker not retired, until no task is left
/// for any of them; each rendered tile's record and sums go into `records` and `buffers`.
fn run_round(
    workers: &[Worker],
    queues: &WorkQueues,
    job: &PassJob,
    progress: &super::progress::Progress,
    start: Instant,
    (records, buffers): (&mut [Option<TileRecord>], &mut [Vec<[f32; 4]>]),
    mut after_tile: Option<&mut AfterTileHook<'_>>,
) -> Round {
    let abort = AtomicBool::new(false);
    // Also what serialises retirements: a worker's failure and its device's other workers'
    // are told apart under this lock.
    let failures: Mutex<Vec<Failure>> = Mutex::new(Vec::new());
    let (tx, rx) = mpsc::channel::<(TileRecord, Vec<[f32; 4]>)>();
    let mut duplicate = None;
    std::thread::scope(|scope| {
        for (w, worker) in workers.iter().enumerate() {
            if queues.is_retired(w) {
                continue;
            }
            let tx = tx.clone();
            let (abort, failures) = (&abort, &failures);
            scope.spawn(move || {
                let mut rng = StealRng::new(job.seed, w, job.pass);
                while !abort.load(Ordering::Relaxed) && !job.stop.load(Ordering::Relaxed) {
                    // (Retired with its device by another worker's failure.)
                    if queues.is_retired(w) {
                        break;
                    }
                    let Some(take) = queues.next(w, &mut rng) else {
                        break;
                    };
                    let tile = job.tiles[take.task];
                    let mut acc = job.film.read_tile(tile);
                    let cpu0 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
                    let t0 = start.elapsed().as_secs_f64();
                    let result = match job.skip.and_then(|m| m.skip_in(tile)) {
                        Some(skip) => worker.renderer.render_tile_skipping(
                            tile,
                            job.samples.clone(),
                            &mut acc,
                            &skip,
                        ),
                        None => worker
                            .renderer
                            .render_tile(tile, job.samples.clone(), &mut acc),
                    };
                    let t1 = start.elapsed().as_secs_f64();
                    let cpu1 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
                    if let Err(e) = result {
                        let e = e.context(format!(
                            "worker {} ({}) failed on tile x={} y={} {}x{}, samples {:?}",
                            worker.label,
                            worker.renderer.name(),
                            tile.x,
                            tile.y,
                            tile.w,
                            tile.h,
                            job.samples
                        ));
                        let mut failures = failures.lock().unwrap_or_else(|p| p.into_inner());
                        let mut failure = Failure {
                            worker: w,
                            task: take.task,
                            error: e,
                            retires: true,
                            with_it: Vec::new(),
                        };
                        match job.on_error {
                            OnWorkerError::Stop => abort.store(true, Ordering::Relaxed),
                            OnWorkerError::Retire if queues.is_retired(w) => {
                                failure.retires = false;
                                queues.retire(w, take.task);
                            }
                            OnWorkerError::Retire => {
                                failure.with_it =
                                    retired_with(workers, w, |v| queues.is_retired(v));
                                // Said now, not at the end: the render may go on for hours
                                // on the workers left.
                                let error = format!("{:#}", failure.error);
                                let note = retirement_note(
                                    workers,
                                    w,
                                    &error,
                                    &failure.with_it,
                                    "the other workers",
                                );
                                progress.warn(format_args!("{error}; {note}"));
                                queues.retire(w, take.task);
                                for &v in &failure.with_it {
                                    queues.retire_idle(v);
                                }
                            }
                        }
                        failures.push(failure);
                        break;
                    }
                    let record = TileRecord {
                        task: take.task,
                        worker: w,
                        stolen_from: take.stolen_from,
                        start_s: t0,
                        end_s: t1,
                        cost_s: match (cpu0, cpu1) {
                            (Some(a), Some(b)) => b - a,
                            _ => t1 - t0,
                        },
                    };
                    if tx.send((record, acc)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (record, acc) in rx {
            if records[record.task].is_some() {
                duplicate = Some(record.task);
            }
            buffers[record.task] = acc;
            records[record.task] = Some(record);
            progress.inc();
            if let Some(hook) = after_tile.as_deref_mut() {
                let done: &[Vec<[f32; 4]>] = buffers;
                hook(&|| film_with(job.film, job.tiles, done, job.pass));
            }
        }
    });
    Round {
        failures: failures.into_inner().unwrap_or_else(|p| p.into_inner()),
        duplicate,
    }
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

    /// Worker 0 holds every tile and fails on its first after the others have found nothing
    /// to do without stealing and ended: the tiles left are queued again for them, and the
    /// pass completes. (Were a thread slow to end, it would take them from the retired deque
    /// in the first round instead; the outcome is the same.)
    #[test]
    fn tiles_of_a_worker_retired_after_the_others_ended_are_run_again() {
        let workers = [
            worker("w0", Some(std::time::Duration::from_millis(50))),
            worker("w1", None),
            worker("w2", None),
        ];
        let tiles: Vec<Tile> = (0..6)
            .map(|i| Tile {
                x: 4 * i,
                y: 0,
                w: 4,
                h: 4,
            })
            .collect();
        let film = Film::new(24, 4);
        let stop = AtomicBool::new(false);
        let job = PassJob {
            tiles: &tiles,
            samples: 0..3,
            film: &film,
            pass: 0,
            seed: 1,
            stop: &stop,
            on_error: OnWorkerError::Retire,
            skip: None,
        };
        let queues = WorkQueues::new(vec![(0..6).collect(), vec![], vec![]], false);
        let progress = super::super::progress::Progress::new(true);
        let run = run_pass(&workers, &queues, &job, &progress, None).unwrap();
        assert!(run.complete);
        assert_eq!(run.records.len(), 6);
        assert!(run.records.iter().all(|r| r.worker != 0));
        assert!(run.buffers.iter().all(|b| b.iter().all(|p| p[3] == 3.0)));
        assert_eq!(run.retired.len(), 1);
        assert_eq!(run.retired[0].label, "w0");
        assert_eq!(run.retired[0].tile, tiles[0]);
        assert!(run.retired[0].error.contains("device lost"));
        assert!(run.retired[0]
            .error
            .contains("worker w0 (flaky) failed on tile"));

        // Stop instead: the error, naming the worker and the tile.
        let job = PassJob {
            on_error: OnWorkerError::Stop,
            ..job
        };
        let queues = WorkQueues::new(vec![(0..6).collect(), vec![], vec![]], false);
        let e = run_pass(&workers, &queues, &job, &progress, None)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("worker w0 (flaky) failed on tile x=0 y=0 4x4"));
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
