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
    /// Index of the `--devices` entry this worker came from; workers of one entry are assumed
    /// to be equally fast when measured speeds weight later passes.
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
}

/// Runs one pass: one thread per worker, each taking tasks from `queues` until none is left
/// for it. Tiles are rendered into private buffers (copies of the film's tile); the caller
/// writes them into the film after the pass. The first renderer error stops every worker
/// and is returned, naming the tile and the worker.
pub fn run_pass(
    workers: &[Worker],
    queues: &WorkQueues,
    job: &PassJob,
    progress: &super::progress::Progress,
) -> anyhow::Result<PassRun> {
    assert_eq!(workers.len(), queues.workers(), "one deque per worker");
    let start = Instant::now();
    let abort = AtomicBool::new(false);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let (tx, rx) = mpsc::channel::<(TileRecord, Vec<[f32; 4]>)>();
    let mut records: Vec<Option<TileRecord>> = vec![None; job.tiles.len()];
    let mut buffers: Vec<Vec<[f32; 4]>> = vec![Vec::new(); job.tiles.len()];
    let mut duplicate = None;
    std::thread::scope(|scope| {
        for (w, worker) in workers.iter().enumerate() {
            let tx = tx.clone();
            let (abort, first_error) = (&abort, &first_error);
            scope.spawn(move || {
                let mut rng = StealRng::new(job.seed, w, job.pass);
                while !abort.load(Ordering::Relaxed) && !job.stop.load(Ordering::Relaxed) {
                    let Some(take) = queues.next(w, &mut rng) else {
                        break;
                    };
                    let tile = job.tiles[take.task];
                    let mut acc = job.film.read_tile(tile);
                    let cpu0 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
                    let t0 = start.elapsed().as_secs_f64();
                    let result = worker
                        .renderer
                        .render_tile(tile, job.samples.clone(), &mut acc);
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
                        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(e);
                        abort.store(true, Ordering::Relaxed);
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
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if let Some(task) = duplicate {
        anyhow::bail!(
            "scheduler bug: tile {task} was rendered twice in pass {}",
            job.pass
        );
    }
    if job.stop.load(Ordering::Relaxed) && records.iter().any(Option::is_none) {
        // Stopped: what was rendered, without the tiles never taken.
        let records: Vec<TileRecord> = records.into_iter().flatten().collect();
        let makespan_s = records.iter().map(|r| r.end_s).fold(0.0, f64::max);
        return Ok(PassRun {
            records,
            buffers,
            makespan_s,
            complete: false,
        });
    }
    let records: Vec<TileRecord> = records
        .into_iter()
        .enumerate()
        .map(|(task, r)| {
            r.with_context(|| {
                format!(
                    "scheduler bug: tile {task} was never rendered in pass {}",
                    job.pass
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let makespan_s = records.iter().map(|r| r.end_s).fold(0.0, f64::max);
    Ok(PassRun {
        records,
        buffers,
        makespan_s,
        complete: true,
    })
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
            DeviceSpec::parse_list("cpu, gpu0x2,cpu:3,GPU1").unwrap(),
            vec![
                DeviceSpec::Cpu { workers: None },
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
}
