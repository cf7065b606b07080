//! One rank of a cluster render: its workers, its progress loop, and (on rank 0) the
//! [`Master`] that plans the passes and gathers the tiles (`super::master`).
//!
//! Threads of a rank: one per local worker, rendering tiles from the rank's [`WorkQueues`]
//! exactly as in one process (own deque first, then the other local workers' cheap ends);
//! and the calling thread, the *progress loop*, the only one that touches the transport. It
//! forwards finished tiles to rank 0, answers steal requests, asks other ranks for tiles when
//! its own deques run dry ([`super::policy`]), sends heartbeats and watches for silent peers.
//! A worker that finds nothing to do sleeps until tiles arrive from another rank or the pass
//! ends. docs/cluster.md has the protocol and a sequence sketch.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::master::{Master, Outbox, PassOutcome};
use super::policy::{self as cluster_policy, VictimSearch};
use super::protocol::{Granted, Msg, Plan, RankReady, TaskData, TileDone, WorkerInfo};
use super::transport::{Transport, TransportError};
use crate::render::{Film, RenderSettings, Tile};
use crate::sched::calibrate;
use crate::sched::costmap::{CostMap, EstimateStats};
use crate::sched::cputime::thread_cpu_seconds;
use crate::sched::policy::{StealRng, WorkQueues};
use crate::sched::ranks::{RankPassCounters, StopRequest};
use crate::sched::raster::RasterStats;
use crate::sched::workers::{
    lost_with, retire_after_calibration, retired_with, retirement_note, OnWorkerError, Worker,
};
use crate::sched::{Frame, Resume, SchedConfig};

/// The progress loop's clocks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// How long the loop waits for a worker event before it polls the transport again: the
    /// added latency of a message, at most.
    pub poll: Duration,
    /// A rank that has sent a peer nothing for this long sends it a heartbeat.
    pub heartbeat: Duration,
    /// A peer silent for this long during the frame is taken for dead or hung: the job is
    /// aborted with a message naming it.
    pub dead_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_micros(250),
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(30),
        }
    }
}

/// A test hook: make one rank fail in the middle of the frame, after it has rendered
/// `after_tiles` tiles (rank 0: after its master took that many, from any rank), to check
/// that the job ends with a clear message and no hang.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultHook {
    pub rank: usize,
    pub after_tiles: usize,
    pub kind: FaultKind,
}

/// Set once the hook's silence has landed on this rank.
static SILENCED: AtomicBool = AtomicBool::new(false);

/// Whether [`FaultKind::Silence`] landed on this rank: its process is then to stay alive and
/// silent. (A rank the frame ended for before its fault landed leaves as usual.)
pub fn silenced_by_fault_hook() -> bool {
    SILENCED.load(Ordering::SeqCst)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `std::process::abort()`: the process dies on SIGABRT.
    Abort,
    /// `std::process::exit(3)` without finishing MPI.
    Exit,
    /// SIGKILL to itself, as the kernel's out-of-memory killer would.
    Kill,
    /// The rank stops talking (its progress loop returns and says nothing): a hung rank,
    /// which only the heartbeat timeout can catch.
    Silence,
}

impl FaultHook {
    /// Parses `rank=R,after=N,kind=abort|exit|kill|silence` (the `GASWORKS_TEST_FAULT`
    /// variable).
    pub fn parse(s: &str) -> Result<FaultHook, String> {
        let (mut rank, mut after, mut kind) = (None, None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value"))?;
            let num = || {
                v.parse::<usize>()
                    .map_err(|_| format!("{k}={v}: not a number"))
            };
            match k {
                "rank" => rank = Some(num()?),
                "after" => after = Some(num()?),
                "kind" => {
                    kind = Some(match v {
                        "abort" => FaultKind::Abort,
                        "exit" => FaultKind::Exit,
                        "kill" => FaultKind::Kill,
                        "silence" => FaultKind::Silence,
                        _ => {
                            return Err(format!("kind={v}: expected abort, exit, kill or silence"))
                        }
                    })
                }
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        Ok(FaultHook {
            rank: rank.ok_or("rank=R is missing")?,
            after_tiles: after.unwrap_or(0),
            kind: kind.unwrap_or(FaultKind::Abort),
        })
    }
}

/// What every rank is asked to do (the same on every rank).
#[derive(Clone, Debug)]
pub struct ClusterJob {
    pub settings: RenderSettings,
    pub config: SchedConfig,
    /// No progress bar on rank 0.
    pub quiet: bool,
    pub timing: Timing,
    pub fault: Option<FaultHook>,
    /// Rank 0: a time limit (`--time-limit`), as [`crate::sched::FrameControl::deadline`]: a
    /// pass predicted to end past it is not planned, and the frame ends whole at that
    /// boundary.
    pub deadline: Option<Instant>,
    /// This rank's stop requests: the number of the signal that asked it to stop (SIGINT 2,
    /// SIGTERM 15, SIGHUP 1), 0 before any. On rank 0 the frame ends at once with what has
    /// arrived (the film and a resume point go to [`FrameSink::finish`]); another rank
    /// passes the request on to rank 0 ([`Msg::Stop`]) and goes on until rank 0 says the
    /// frame is over.
    pub stop: Option<&'static AtomicU8>,
}

/// What rank 0 plans with: the cost map, and the film of an earlier render of this frame to
/// go on from (`--resume`).
#[derive(Clone, Debug)]
pub struct PlanInputs {
    pub estimate: CostMap,
    pub raster: RasterStats,
    pub estimate_stats: EstimateStats,
    /// Checked against the pass plan before the handshake (see
    /// [`crate::sched::resume_start`]).
    pub resume: Option<Resume>,
}

/// What rank 0 does with the frame as it forms: checkpoints at pass boundaries, the outputs
/// at the end.
pub trait FrameSink {
    /// After every complete pass but the last, with the film at that boundary and its samples
    /// per pixel (as [`crate::sched::FrameControl::between_passes`]). The other ranks render
    /// the next pass meanwhile.
    fn between_passes(&mut self, _film: &Film, _spp_done: u32) {}
    /// After every tile that arrives, with the samples per pixel of the complete passes and a
    /// way to make the film as it stands (as [`crate::sched::FrameControl::within_pass`]): a
    /// checkpoint inside a pass, when one is due.
    fn within_pass(&mut self, _spp_done: u32, _film: &dyn Fn() -> Film) {}
    /// The frame is complete, or a stop request ended it early ([`Frame::stopped`]: the film
    /// holds what arrived, [`Frame::resume_point`] where to go on from): write the outputs.
    /// An error is every rank's error.
    fn finish(&mut self, frame: &Frame) -> anyhow::Result<()>;
    /// Rank 0, before a silent peer makes it end the job: write what has arrived, as at a
    /// stop ([`Frame::stopped`] is set), and say what was written, to be added to the
    /// abort's message. Hours of a frame are not lost to one hung node.
    fn keep(&mut self, _frame: &Frame) -> Option<String> {
        None
    }
}

/// A sink for ranks other than 0, and for tests: nothing is written.
pub struct Discard;

impl FrameSink for Discard {
    fn finish(&mut self, _: &Frame) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What a rank brings to the frame once it has loaded the scene and built its renderers.
pub struct RankSetup {
    pub workers: Vec<Worker>,
    pub ready: RankReady,
    /// Rank 0 only.
    pub plan: Option<PlanInputs>,
}

impl RankSetup {
    pub fn new(
        workers: Vec<Worker>,
        host: String,
        backend: String,
        fingerprint: u64,
        plan: Option<PlanInputs>,
    ) -> RankSetup {
        let infos = workers
            .iter()
            .map(|w| WorkerInfo {
                label: w.label.clone(),
                device: w.device.clone(),
                hardware: w.renderer.hardware(),
                group: w.group as u32,
                min_tile_work: w.renderer.min_tile_work().unwrap_or(0),
            })
            .collect();
        RankSetup {
            workers,
            ready: RankReady {
                host,
                backend,
                fingerprint,
                workers: infos,
            },
            plan,
        }
    }
}

/// Why a rank's part of the frame failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A rank could not get ready (scene, backend, output); every rank reports the same text.
    #[error("{0}")]
    Setup(String),
    /// A worker of a rank failed on a tile.
    #[error("rank {rank} failed: {message}")]
    RankFailed { rank: usize, message: String },
    /// A peer fell silent.
    #[error("rank {rank} has sent nothing for {seconds:.1} s (heartbeats are sent every {heartbeat_s:.1} s): it has died or hung")]
    Silent {
        rank: usize,
        seconds: f64,
        heartbeat_s: f64,
    },
    /// A message that breaks the protocol (a bug, or ranks of different builds).
    #[error("rank {rank}: protocol error: {message}")]
    Protocol { rank: usize, message: String },
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// Rank 0 could not write the outputs.
    #[error("rank 0 could not write the outputs: {0}")]
    Output(String),
}

impl ClusterError {
    /// Whether the whole job must be ended (MPI_Abort): the other ranks cannot finish the
    /// frame cleanly. Setup and output failures are agreed on by every rank, which then
    /// leave normally.
    fn aborts_job(&self) -> bool {
        !matches!(
            self,
            ClusterError::Setup(_)
                | ClusterError::Output(_)
                | ClusterError::Transport(TransportError::Aborted { .. })
        )
    }
}

/// Runs this rank's part of one frame over `transport`: the setup handshake, the passes, the
/// end. Rank 0 returns the frame after `sink` has written the outputs; the other
/// ranks return `None`. `setup` is what this rank managed to prepare, or why it could not;
/// the first thing the ranks do is agree on whether every rank is ready, so a failure on one
/// rank gives every rank the same error and nobody waits forever.
///
/// On a failure that the other ranks cannot see coming (a worker error, a silent peer), the
/// job is aborted through the transport.
pub fn run_node<T: Transport>(
    transport: &mut T,
    setup: Result<RankSetup, String>,
    job: &ClusterJob,
    sink: &mut dyn FrameSink,
) -> Result<Option<Frame>, ClusterError> {
    let mut node = Node::new(transport, job);
    let result = node.run(setup, sink);
    match &result {
        Err(e) if e.aborts_job() => node.t.abort(&e.to_string()),
        _ => {
            let _ = node.t.flush(Duration::from_secs(10));
        }
    }
    result
}

/// What a worker thread tells the progress loop.
enum Event {
    Done(TileDone),
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

/// A task held by this rank: its tile, its prior sums, and (when it came from another rank)
/// the global worker whose deque it left there.
struct Held {
    tile: Tile,
    prior: Option<Vec<[f32; 4]>>,
    /// The pixels it skips ([`TaskData::skip`]).
    skip: Option<Vec<bool>>,
    origin: Option<u32>,
}

/// What a rank's workers share during one pass.
struct PassShared {
    pass: u32,
    samples: Range<u32>,
    seed: u64,
    queues: WorkQueues,
    /// The speeds rank 0 planned this rank's workers at, and every task's estimated cost
    /// (the plan's): what the steal guards weigh, within the rank and for thief ranks.
    speeds: Vec<f64>,
    costs: Vec<f64>,
    /// Every task's floor for the steal guards (`sched::tiles::area_floors`).
    floors: Vec<f64>,
    tasks: Mutex<HashMap<u32, Held>>,
    wake: Mutex<(u64, bool)>,
    cv: Condvar,
    start: Instant,
    /// What a renderer error does (`--on-worker-error`), and how many of the rank's workers
    /// are not retired: the last one's error ends the job, as nobody would render its tiles.
    on_error: OnWorkerError,
    live: AtomicUsize,
    /// Held while a failure is handled: a worker's failure and those of its device's other
    /// workers, retired with it, are told apart under it.
    retiring: Mutex<()>,
}

impl PassShared {
    /// Wakes sleeping workers: tiles have arrived.
    fn wake(&self) {
        let mut s = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        self.cv.notify_all();
    }

    /// Ends the pass for this rank's workers.
    fn stop(&self) {
        let mut s = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        s.1 = true;
        self.cv.notify_all();
    }
}

/// This rank's state in the current pass.
struct RankPass {
    shared: Arc<PassShared>,
    search: VictimSearch,
    /// The rank asked for tiles and waits for the answer.
    outstanding: Option<usize>,
    counters: RankPassCounters,
    /// `PassEnd` arrived.
    over: bool,
    stats_sent: bool,
    /// Stealing is on for this pass.
    steal: bool,
    /// Global index of this rank's first worker.
    first_worker: usize,
}

fn worker_loop(
    shared: &PassShared,
    local: usize,
    offset: usize,
    workers: &[Worker],
    tx: Sender<Event>,
) {
    let (global, worker) = (offset + local, &workers[local]);
    let mut rng = StealRng::new(shared.seed, global, shared.pass as usize);
    loop {
        // (Retired with its device by another worker's failure.)
        if shared.queues.is_retired(local) {
            return;
        }
        let generation = {
            let s = shared.wake.lock().unwrap_or_else(|p| p.into_inner());
            if s.1 {
                return;
            }
            s.0
        };
        let Some(take) = shared.queues.next(local, &mut rng) else {
            let mut s = shared.wake.lock().unwrap_or_else(|p| p.into_inner());
            while s.0 == generation && !s.1 {
                s = shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            continue;
        };
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
        let tile = held.tile;
        // Kept to queue the tile again should this worker fail on it and be retired.
        let prior = (shared.on_error == OnWorkerError::Retire)
            .then(|| held.prior.clone())
            .flatten();
        let mut acc = held
            .prior
            .unwrap_or_else(|| vec![[0.0; 4]; tile.pixel_count()]);
        let cpu0 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
        let t0 = shared.start.elapsed().as_secs_f64();
        let result = match &held.skip {
            Some(skip) => {
                worker
                    .renderer
                    .render_tile_skipping(tile, shared.samples.clone(), &mut acc, skip)
            }
            None => worker
                .renderer
                .render_tile(tile, shared.samples.clone(), &mut acc),
        };
        let t1 = shared.start.elapsed().as_secs_f64();
        let cpu1 = worker.cpu_timed.then(thread_cpu_seconds).flatten();
        if let Err(e) = result {
            let error = format!(
                "worker {} ({}) failed on tile x={} y={} {}x{}, samples {:?}: {e:#}",
                worker.label,
                worker.renderer.name(),
                tile.x,
                tile.y,
                tile.w,
                tile.h,
                shared.samples
            );
            let _retiring = shared.retiring.lock().unwrap_or_else(|p| p.into_inner());
            let requeue = || {
                shared
                    .tasks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(
                        task,
                        Held {
                            tile,
                            prior,
                            skip: held.skip.clone(),
                            origin: held.origin,
                        },
                    );
                shared.queues.retire(local, take.task);
                shared.wake();
            };
            if shared.on_error == OnWorkerError::Retire && shared.queues.is_retired(local) {
                // Retired with its device by another worker's failure, which rank 0 has been
                // told: the tile in flight failed too, and goes back.
                requeue();
                return;
            }
            let with_it = match shared.on_error {
                OnWorkerError::Retire => {
                    retired_with(workers, local, |v| shared.queues.is_retired(v))
                }
                OnWorkerError::Stop => Vec::new(),
            };
            // The rank's last working workers cannot hand their tiles to anyone: the job ends.
            let leaving = 1 + with_it.len();
            let retire = shared.on_error == OnWorkerError::Retire
                && shared.live.fetch_sub(leaving, Ordering::SeqCst) > leaving;
            if !retire {
                let _ = tx.send(Event::Failed(error));
                return;
            }
            for &v in &with_it {
                shared.queues.retire_idle(v);
            }
            // Said before the tile is queued again: its next rendering's `Done` comes after
            // this in the channel, so rank 0 hears of the retirement before the pass can end.
            let _ = tx.send(Event::Retired {
                local,
                global: global as u32,
                tile,
                note: retirement_note(workers, local, &error, &with_it, "the rank's other workers"),
                with_it: with_it
                    .iter()
                    .map(|&v| (v, (offset + v) as u32, lost_with(workers, local, &error)))
                    .collect(),
                error,
            });
            requeue();
            return;
        }
        let done = TileDone {
            pass: shared.pass,
            task,
            worker: global as u32,
            stolen_from: match take.stolen_from {
                Some(v) => Some((offset + v) as u32),
                None => held.origin,
            },
            start_s: t0,
            end_s: t1,
            cost_s: match (cpu0, cpu1) {
                (Some(a), Some(b)) => b - a,
                _ => t1 - t0,
            },
            pixels: acc,
        };
        if tx.send(Event::Done(done)).is_err() {
            return;
        }
    }
}

struct Node<'t, T: Transport> {
    t: &'t mut T,
    job: &'t ClusterJob,
    rank: usize,
    size: usize,
    /// Messages to itself (rank 0's worker role talking to its master role).
    local: VecDeque<Msg>,
    /// Peer messages that overtook this rank's roster. Order is kept only per pair of
    /// ranks, so a rank that already has its roster and plan may ask this one for tiles
    /// before rank 0's roster gets here; they are handled once the frame starts.
    early: VecDeque<(usize, Msg)>,
    last_heard: Vec<Instant>,
    last_sent: Vec<Instant>,
    /// Liveness checks are on (during the frame, not while ranks load their scenes).
    live: bool,
    tiles_rendered: usize,
    /// Rank 0: the tiles its master took (its own and the other ranks').
    tiles_taken: usize,
    /// Rank 0: the stop request that ends the frame (its own signal or a peer's message).
    stop_request: Option<StopRequest>,
    /// Another rank: its stop request went to rank 0.
    stop_passed_on: bool,
    /// Per local worker: retired by a renderer error (`--on-worker-error retire`); it renders
    /// nothing more, and the rank's other workers take whatever the plans give it.
    retired: Vec<bool>,
}

impl<'t, T: Transport> Node<'t, T> {
    fn new(t: &'t mut T, job: &'t ClusterJob) -> Self {
        let (rank, size) = (t.rank(), t.size());
        let now = Instant::now();
        Node {
            t,
            job,
            rank,
            size,
            local: VecDeque::new(),
            early: VecDeque::new(),
            last_heard: vec![now; size],
            last_sent: vec![now; size],
            live: false,
            tiles_rendered: 0,
            tiles_taken: 0,
            stop_request: None,
            stop_passed_on: false,
            retired: Vec::new(),
        }
    }

    fn protocol(&self, from: usize, message: String) -> ClusterError {
        ClusterError::Protocol {
            rank: self.rank,
            message: format!("from rank {from}: {message}"),
        }
    }

    fn send(&mut self, to: usize, msg: Msg) -> Result<(), ClusterError> {
        if to == self.rank {
            self.local.push_back(msg);
        } else {
            self.t.send(to, msg.encode())?;
            self.last_sent[to] = Instant::now();
        }
        Ok(())
    }

    /// Tells rank 0 of a retirement (`Msg::Retired`), rank 0 itself at once.
    fn tell_retired(&mut self, master: &mut Option<Master>, msg: Msg) -> Result<(), ClusterError> {
        match master.as_mut() {
            Some(m) => m
                .on_retired(self.rank, msg)
                .map_err(|e| self.protocol(self.rank, e)),
            None => self.send(0, msg),
        }
    }

    /// The pieces of this rank's calibration that failed (`failures`, by local worker). Under
    /// `--on-worker-error retire` each failing worker is retired before the first pass, as
    /// its first tile would have retired it, with its device's other workers when the device
    /// is lost, and rank 0 is told before it gets the rank's timings. Under `stop`, or when no
    /// worker of the rank is left, the rank's first failure ends the job, in the rank's words
    /// (rank 0 gets them in place of the timings).
    fn retire_failed_pieces(
        &mut self,
        workers: &[Worker],
        offset: usize,
        master: &mut Option<Master>,
        failures: Vec<calibrate::PieceFailure>,
    ) -> Result<(), ClusterError> {
        let Some(first) = failures.first() else {
            return Ok(());
        };
        let mut message = format!("{:#}", first.error);
        self.retired.resize(workers.len(), false);
        if self.job.config.on_worker_error == OnWorkerError::Retire {
            let rank = self.rank;
            let gone = retire_after_calibration(
                workers,
                failures,
                &mut self.retired,
                0,
                "the rank's other workers",
                |line| warn_on_rank(rank, master, &line),
            );
            if self.retired.iter().any(|&r| !r) {
                for r in gone {
                    let msg = Msg::Retired {
                        pass: 0,
                        worker: (offset + r.worker) as u32,
                        tile: r.tile,
                        error: r.error,
                    };
                    self.tell_retired(master, msg)?;
                }
                return Ok(());
            }
            message = format!(
                "no worker of the rank is left: the calibration retired every one; the first \
                 failure: {message}"
            );
        }
        // Rank 0 ends the job with this rank's words.
        self.send(0, Msg::Calibrated(Err(message.clone())))?;
        Err(ClusterError::RankFailed {
            rank: self.rank,
            message,
        })
    }

    fn send_all(&mut self, out: Outbox) -> Result<(), ClusterError> {
        for (to, msg) in out {
            self.send(to, msg)?;
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<(usize, Msg)>, ClusterError> {
        if let Some(m) = self.local.pop_front() {
            return Ok(Some((self.rank, m)));
        }
        if let Some(m) = self.early.pop_front() {
            return Ok(Some(m));
        }
        match self.t.poll()? {
            Some((from, bytes)) => {
                self.last_heard[from] = Instant::now();
                let msg = Msg::decode(&bytes).map_err(|e| {
                    self.protocol(
                        from,
                        format!("unreadable message ({e}); are all ranks the same gasworks build?"),
                    )
                })?;
                Ok(Some((from, msg)))
            }
            None => Ok(None),
        }
    }

    /// Heartbeats to the peers this rank is watched by, and the watch on the peers it
    /// depends on: rank 0 watches every rank, the others watch rank 0.
    fn tick(&mut self) -> Result<(), ClusterError> {
        if !self.live {
            return Ok(());
        }
        let now = Instant::now();
        let timing = self.job.timing;
        let peers: Vec<usize> = if self.rank == 0 {
            (1..self.size).collect()
        } else {
            vec![0]
        };
        for r in peers {
            if now.duration_since(self.last_sent[r]) >= timing.heartbeat {
                self.send(r, Msg::Heartbeat)?;
            }
            let silent = now.duration_since(self.last_heard[r]);
            if silent >= timing.dead_after {
                return Err(ClusterError::Silent {
                    rank: r,
                    seconds: silent.as_secs_f64(),
                    heartbeat_s: timing.heartbeat.as_secs_f64(),
                });
            }
        }
        Ok(())
    }

    /// Waits for the next message (setup phase: no workers, no liveness checks).
    fn wait_message(&mut self) -> Result<(usize, Msg), ClusterError> {
        loop {
            if let Some(m) = self.recv()? {
                return Ok(m);
            }
            std::thread::sleep(self.job.timing.poll);
        }
    }

    fn run(
        &mut self,
        setup: Result<RankSetup, String>,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, ClusterError> {
        let hello = match &setup {
            Ok(s) => Ok(s.ready.clone()),
            Err(e) => Err(e.clone()),
        };
        self.send(0, Msg::Hello(hello))?;
        let mut master_inputs = None;
        if self.rank == 0 {
            let mut hellos: Vec<Option<Result<RankReady, String>>> = vec![None; self.size];
            while hellos.iter().any(Option::is_none) {
                match self.wait_message()? {
                    (from, Msg::Hello(h)) if hellos[from].is_none() => hellos[from] = Some(h),
                    (from, m) => {
                        return Err(self.protocol(from, format!("{} before the roster", m.name())))
                    }
                }
            }
            let hellos: Vec<Result<RankReady, String>> = hellos.into_iter().flatten().collect();
            let verdict = roster_verdict(&hellos);
            match &verdict {
                Ok(ready) => {
                    let mut first = 0u32;
                    for (r, h) in ready.iter().enumerate() {
                        self.send(r, Msg::Roster(Ok(first)))?;
                        first += h.workers.len() as u32;
                    }
                    master_inputs = Some(ready.clone());
                }
                Err(text) => {
                    for r in 0..self.size {
                        self.send(r, Msg::Roster(Err(text.clone())))?;
                    }
                }
            }
        }
        let mut early = VecDeque::new();
        let offset = loop {
            match self.wait_message()? {
                (0, Msg::Roster(Ok(first))) => break first as usize,
                (0, Msg::Roster(Err(text))) => return Err(ClusterError::Setup(text)),
                // A peer only talks once it has its own roster, so this job is going ahead
                // and ours is on its way: keep the message for the frame loop.
                (from, m) if from != 0 && from != self.rank && self.rank != 0 => {
                    early.push_back((from, m))
                }
                (from, m) => {
                    return Err(self.protocol(from, format!("{} instead of the roster", m.name())))
                }
            }
        };
        self.early = early;
        let Ok(mut setup) = setup else {
            return Err(self.protocol(0, "a roster for a rank that was not ready".into()));
        };
        // Taken, not copied: it may hold the film of a resumed render.
        let mut master = match (master_inputs, setup.plan.take()) {
            (Some(hellos), Some(inputs)) => {
                Some(Master::new(self.job, inputs, &hellos).map_err(|e| self.protocol(0, e))?)
            }
            (Some(_), None) => {
                return Err(ClusterError::Setup(
                    "rank 0 has no cost map to plan with".into(),
                ))
            }
            _ => None,
        };
        let now = Instant::now();
        self.last_heard.fill(now);
        self.last_sent.fill(now);
        self.live = true;
        if let Some(m) = master.take_if(|m| m.complete()) {
            // The other ranks learn that the frame is over as at its end.
            return self.finish_frame(m, sink);
        }
        if let Some(m) = master.as_mut() {
            let out = m.begin();
            self.send_all(out)?;
        }
        let workers = &setup.workers;
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<Event>();
            let mut current: Option<RankPass> = None;
            let result = self.frame_loop(
                scope,
                workers,
                offset,
                &tx,
                &rx,
                &mut current,
                &mut master,
                sink,
            );
            if let Some(c) = &current {
                c.shared.stop();
            }
            if let Err(e) = &result {
                if e.aborts_job() {
                    let mut message = e.to_string();
                    if let (ClusterError::Silent { .. }, Some(m)) = (e, master.take()) {
                        message += &self.keep_what_arrived(m, &rx, sink);
                    }
                    // Before waiting for the workers' last tiles: end the job now.
                    self.t.abort(&message);
                }
            }
            result
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn frame_loop<'s, 'e>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'e>,
        workers: &'e [Worker],
        offset: usize,
        tx: &Sender<Event>,
        rx: &mpsc::Receiver<Event>,
        current: &mut Option<RankPass>,
        master: &mut Option<Master>,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, ClusterError> {
        // Steal requests for a pass whose plan is still on its way: (thief, pass, want,
        // the thief's speed).
        let mut deferred: Vec<(usize, u32, u32, f64)> = Vec::new();
        let mut pending_event: Option<Event> = None;
        loop {
            // A stop signal: rank 0 ends the frame with what has arrived; another rank tells
            // rank 0 and renders on until rank 0 says the frame is over.
            let signal = self.job.stop.map_or(0, |s| s.load(Ordering::SeqCst));
            if signal != 0 {
                if self.rank == 0 {
                    self.stop_request
                        .get_or_insert(StopRequest { rank: 0, signal });
                } else if !self.stop_passed_on {
                    self.stop_passed_on = true;
                    self.send(0, Msg::Stop { signal })?;
                }
            }
            if let Some(request) = self.stop_request {
                if let Some(mut m) = master.take() {
                    self.drain_own_tiles(&mut m, pending_event.take(), rx)?;
                    m.stop(request);
                    return self.finish_frame(m, sink);
                }
            }
            // Worker events.
            let mut events: Vec<Event> = pending_event.take().into_iter().collect();
            events.extend(rx.try_iter());
            for ev in events {
                match ev {
                    Event::Done(d) => {
                        self.tiles_rendered += 1;
                        if let Some(m) = master.as_mut() {
                            let out = m
                                .on_tile(self.rank, d)
                                .map_err(|e| self.protocol(self.rank, e))?;
                            self.send_all(out)?;
                            m.after_tile(sink);
                            self.tiles_taken += 1;
                        } else {
                            self.send(0, Msg::TileDone(d))?;
                        }
                        if self.fault_lands() {
                            return Ok(None);
                        }
                    }
                    Event::Failed(message) => {
                        return Err(ClusterError::RankFailed {
                            rank: self.rank,
                            message,
                        })
                    }
                    Event::Retired {
                        local,
                        global,
                        tile,
                        error,
                        note,
                        with_it,
                    } => {
                        self.retired[local] = true;
                        // Said where it happened, at once (rank 0's summary says it again),
                        // above rank 0's progress bar.
                        warn_on_rank(self.rank, master, &format!("{error}; {note}"));
                        let pass = current.as_ref().map_or(0, |c| c.shared.pass);
                        // One message per worker: rank 0 plans each at speed 0 from now on.
                        let mut retired = vec![(global, error)];
                        for (v, global, error) in with_it {
                            self.retired[v] = true;
                            retired.push((global, error));
                        }
                        for (worker, error) in retired {
                            let msg = Msg::Retired {
                                pass,
                                worker,
                                tile,
                                error,
                            };
                            self.tell_retired(master, msg)?;
                        }
                    }
                }
            }
            // Messages.
            while let Some((from, msg)) = self.recv()? {
                match msg {
                    Msg::Plan(plan) => {
                        if current.as_ref().is_some_and(|c| !c.stats_sent) {
                            return Err(self.protocol(from, "a plan before the pass ended".into()));
                        }
                        let pass = plan.pass;
                        *current = Some(self.start_rank_pass(scope, workers, offset, plan, tx)?);
                        let ready: Vec<_> =
                            deferred.iter().filter(|d| d.1 == pass).copied().collect();
                        deferred.retain(|d| d.1 != pass);
                        for (thief, p, want, speed) in ready {
                            self.serve(current, thief, p, want, speed)?;
                        }
                    }
                    Msg::StealRequest { pass, want, speed } => {
                        let ahead = current.as_ref().is_none_or(|c| c.shared.pass < pass);
                        if ahead {
                            // The thief got its plan before this rank did: answer once ours
                            // is here (it is on its way: rank 0 sends every plan at once).
                            deferred.push((from, pass, want, speed));
                        } else {
                            self.serve(current, from, pass, want, speed)?;
                        }
                    }
                    Msg::Calibrate { tile, samples } if from == 0 => {
                        if current.is_some() {
                            return Err(self.protocol(from, "a calibration mid-frame".into()));
                        }
                        // On this thread: the workers are idle until the first plan, and the
                        // pieces take milliseconds (a CPU piece) to one tile's launch (a GPU).
                        let timed = calibrate::time_pieces(workers, tile, &samples);
                        self.retire_failed_pieces(workers, offset, master, timed.failures)?;
                        self.send(0, Msg::Calibrated(Ok(timed.times)))?;
                    }
                    Msg::Calibrated(result) => {
                        let Some(m) = master.as_mut() else {
                            return Err(self.protocol(
                                from,
                                "a calibration sent to a rank other than 0".into(),
                            ));
                        };
                        let times = result.map_err(|message| ClusterError::RankFailed {
                            rank: from,
                            message,
                        })?;
                        let out = m
                            .on_calibrated(from, times)
                            .map_err(|e| self.protocol(from, e))?;
                        self.send_all(out)?;
                    }
                    Msg::Grant { pass, tasks } => {
                        let c = current
                            .as_mut()
                            .filter(|c| c.shared.pass == pass && c.outstanding == Some(from))
                            .ok_or_else(|| {
                                self.protocol(from, format!("an unasked-for grant for pass {pass}"))
                            })?;
                        c.outstanding = None;
                        if !tasks.is_empty() {
                            if c.over {
                                return Err(self
                                    .protocol(from, "tiles granted after the pass ended".into()));
                            }
                            c.counters.grants += 1;
                            c.counters.tiles_in += tasks.len() as u32;
                            let ids: Vec<usize> =
                                tasks.iter().map(|g| g.data.task as usize).collect();
                            {
                                let mut held =
                                    c.shared.tasks.lock().unwrap_or_else(|p| p.into_inner());
                                for g in tasks {
                                    held.insert(
                                        g.data.task,
                                        Held {
                                            tile: g.data.tile,
                                            prior: g.data.prior,
                                            skip: g.data.skip,
                                            origin: Some(g.from_worker),
                                        },
                                    );
                                }
                            }
                            cluster_policy::accept(&c.shared.queues, &ids);
                            c.shared.wake();
                            c.search.restart();
                        }
                    }
                    Msg::PassEnd { pass } => {
                        let c = current
                            .as_mut()
                            .filter(|c| c.shared.pass == pass && !c.over)
                            .ok_or_else(|| {
                                self.protocol(from, format!("an unexpected end of pass {pass}"))
                            })?;
                        c.over = true;
                        c.shared.stop();
                    }
                    Msg::TileDone(d) => {
                        let Some(m) = master.as_mut() else {
                            return Err(
                                self.protocol(from, "a tile sent to a rank other than 0".into())
                            );
                        };
                        let out = m.on_tile(from, d).map_err(|e| self.protocol(from, e))?;
                        self.send_all(out)?;
                        m.after_tile(sink);
                        self.tiles_taken += 1;
                        if self.fault_lands() {
                            return Ok(None);
                        }
                    }
                    Msg::PassStats { pass, counters } => {
                        let Some(m) = master.as_mut() else {
                            return Err(self
                                .protocol(from, "statistics sent to a rank other than 0".into()));
                        };
                        let (out, outcome) = m
                            .on_stats(from, pass, counters)
                            .map_err(|e| self.protocol(from, e))?;
                        self.send_all(out)?;
                        if let PassOutcome::NextPass { spp_done } = outcome {
                            // The plans of the next pass are sent: the ranks render it while
                            // the film of this boundary is written.
                            sink.between_passes(m.film(), spp_done);
                        }
                        if outcome == PassOutcome::FrameComplete {
                            let Some(m) = master.take() else {
                                unreachable!()
                            };
                            return self.finish_frame(m, sink);
                        }
                    }
                    Msg::Finish(result) if from == 0 && self.rank != 0 => {
                        return result.map(|()| None).map_err(ClusterError::Output);
                    }
                    Msg::Stop { signal } if self.rank == 0 => {
                        // Handled at the top of the loop, after the messages already here.
                        self.stop_request
                            .get_or_insert(StopRequest { rank: from, signal });
                    }
                    msg @ Msg::Retired { .. } => {
                        let Some(m) = master.as_mut() else {
                            return Err(self.protocol(
                                from,
                                "a retirement sent to a rank other than 0".into(),
                            ));
                        };
                        m.on_retired(from, msg)
                            .map_err(|e| self.protocol(from, e))?;
                    }
                    Msg::Heartbeat => {}
                    m => return Err(self.protocol(from, format!("an unexpected {}", m.name()))),
                }
            }
            // Stealing across ranks, and the end of the pass.
            if let Some(c) = current.as_mut() {
                let mut request = None;
                if c.steal
                    && !c.over
                    && c.outstanding.is_none()
                    && self.size > 1
                    && c.shared.queues.queued() == 0
                {
                    if let Some(victim) = c.search.next_victim() {
                        c.outstanding = Some(victim);
                        c.counters.requests += 1;
                        let want = c.shared.queues.working() as u32;
                        // The fastest working worker: a retired one takes nothing.
                        let speed = c
                            .shared
                            .queues
                            .zero_retired(&c.shared.speeds)
                            .into_iter()
                            .filter(|s| s.is_finite())
                            .fold(0.0, f64::max);
                        request = Some((
                            victim,
                            Msg::StealRequest {
                                pass: c.shared.pass,
                                want,
                                speed,
                            },
                        ));
                    }
                }
                let mut stats = None;
                if c.over && c.outstanding.is_none() && !c.stats_sent {
                    c.stats_sent = true;
                    stats = Some(Msg::PassStats {
                        pass: c.shared.pass,
                        counters: c.counters,
                    });
                }
                if let Some((victim, m)) = request {
                    self.send(victim, m)?;
                }
                if let Some(m) = stats {
                    self.send(0, m)?;
                    continue;
                }
            }
            self.tick()?;
            if !self.local.is_empty() {
                continue;
            }
            match rx.recv_timeout(self.job.timing.poll) {
                Ok(ev) => pending_event = Some(ev),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
            }
        }
    }

    /// Rank 0, a peer fallen silent: the frame ends as at a stop (the tiles that arrived,
    /// rank 0's own finished ones among them), and the sink writes it. What the abort's
    /// message adds: where it went, or why nothing did.
    fn keep_what_arrived(
        &mut self,
        mut master: Master,
        rx: &mpsc::Receiver<Event>,
        sink: &mut dyn FrameSink,
    ) -> String {
        if let Err(e) = self.drain_own_tiles(&mut master, None, rx) {
            return format!("; what had arrived was not written: {e}");
        }
        // As a SIGTERM would (the job is ended like one).
        master.stop(StopRequest {
            rank: 0,
            signal: 15,
        });
        sink.keep(&master.into_frame()).unwrap_or_default()
    }

    /// Rank 0, at a stop request: the tiles its own workers finished and put in its channel
    /// have arrived as surely as a peer's received tile, so the image and the resume file
    /// written at the stop hold them too (a resumed job does not render them again). What
    /// they would send (a pass's end) is not sent: the frame ends here. Tiles still in a
    /// worker's hands are not waited for.
    fn drain_own_tiles(
        &mut self,
        master: &mut Master,
        pending: Option<Event>,
        rx: &mpsc::Receiver<Event>,
    ) -> Result<(), ClusterError> {
        for ev in pending.into_iter().chain(rx.try_iter()) {
            if let Event::Done(d) = ev {
                self.tiles_rendered += 1;
                master
                    .on_tile(self.rank, d)
                    .map_err(|e| self.protocol(self.rank, e))?;
            }
        }
        Ok(())
    }

    /// The test hook ([`FaultHook`]), after a tile: true when this rank is to fall silent
    /// now; the other kinds end the process here. Rank 0 counts every tile its master took,
    /// so that a fault can land after the frame's last tile (and its checkpoint); another
    /// rank counts the tiles it rendered.
    fn fault_lands(&self) -> bool {
        let Some(f) = self.job.fault.filter(|f| f.rank == self.rank) else {
            return false;
        };
        let count = if self.rank == 0 {
            self.tiles_taken
        } else {
            self.tiles_rendered
        };
        if count < f.after_tiles {
            return false;
        }
        match f.kind {
            FaultKind::Abort => std::process::abort(),
            FaultKind::Exit => std::process::exit(3),
            FaultKind::Kill => {
                // SAFETY: raise only sends a signal to this process.
                unsafe { libc::raise(libc::SIGKILL) };
                true
            }
            FaultKind::Silence => {
                SILENCED.store(true, Ordering::SeqCst);
                true
            }
        }
    }

    /// Rank 0, at the end of the frame (complete or stopped): the outputs are written and
    /// every rank is told whether they were.
    fn finish_frame(
        &mut self,
        master: Master,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, ClusterError> {
        let frame = master.into_frame();
        let written = sink.finish(&frame).map_err(|e| format!("{e:#}"));
        for r in 1..self.size {
            self.send(r, Msg::Finish(written.clone()))?;
        }
        written.map(|()| Some(frame)).map_err(ClusterError::Output)
    }

    /// Answers a steal request of `thief` (whose fastest worker runs at `thief_speed`) for
    /// `pass`: tiles from this rank's cheap ends that the thief finishes sooner than this
    /// rank would, or none.
    fn serve(
        &mut self,
        current: &mut Option<RankPass>,
        thief: usize,
        pass: u32,
        want: u32,
        thief_speed: f64,
    ) -> Result<(), ClusterError> {
        let mut tasks = Vec::new();
        if let Some(c) = current.as_mut().filter(|c| c.shared.pass == pass) {
            c.counters.served += 1;
            if !c.over {
                // A worker retired in this pass (planned at its speed) does none of the
                // work queued here.
                let own_speeds = c.shared.queues.zero_retired(&c.shared.speeds);
                let guard = cluster_policy::GrantGuard {
                    thief_speed,
                    own_speeds: &own_speeds,
                    costs: &c.shared.costs,
                    floors: &c.shared.floors,
                };
                let given = cluster_policy::give_away(&c.shared.queues, want as usize, guard);
                let mut held = c.shared.tasks.lock().unwrap_or_else(|p| p.into_inner());
                for (task, local) in given {
                    let Some(h) = held.remove(&(task as u32)) else {
                        return Err(self
                            .protocol(self.rank, format!("task {task} queued without its tile")));
                    };
                    tasks.push(Granted {
                        data: TaskData {
                            task: task as u32,
                            tile: h.tile,
                            prior: h.prior,
                            skip: h.skip,
                        },
                        // The deque it left last: a tile can move on from a thief.
                        from_worker: (c.first_worker + local) as u32,
                    });
                }
                c.counters.tiles_out += tasks.len() as u32;
            }
        }
        self.send(thief, Msg::Grant { pass, tasks })
    }

    fn start_rank_pass<'s, 'e>(
        &mut self,
        scope: &'s std::thread::Scope<'s, 'e>,
        workers: &'e [Worker],
        offset: usize,
        plan: Plan,
        tx: &Sender<Event>,
    ) -> Result<RankPass, ClusterError> {
        if plan.deques.len() != workers.len() {
            return Err(self.protocol(
                0,
                format!(
                    "a plan for {} workers; this rank has {}",
                    plan.deques.len(),
                    workers.len()
                ),
            ));
        }
        let mut held = HashMap::with_capacity(plan.tasks.len());
        for t in plan.tasks {
            held.insert(
                t.task,
                Held {
                    tile: t.tile,
                    prior: t.prior,
                    skip: t.skip,
                    origin: None,
                },
            );
        }
        if plan.deques.iter().flatten().any(|t| !held.contains_key(t)) {
            return Err(self.protocol(0, "a plan that queues a task without its tile".into()));
        }
        let deques = plan
            .deques
            .iter()
            .map(|d| d.iter().map(|&t| t as usize).collect())
            .collect();
        self.retired.resize(workers.len(), false);
        let live = self.retired.iter().filter(|&&r| !r).count();
        let shared = Arc::new(PassShared {
            pass: plan.pass,
            samples: plan.samples,
            seed: self.job.settings.seed,
            queues: WorkQueues::new(deques, plan.steal)
                .with_speeds(&plan.speeds, &plan.costs)
                .with_task_floors(&plan.floors)
                .with_retired(&self.retired),
            speeds: plan.speeds,
            costs: plan.costs,
            floors: plan.floors,
            tasks: Mutex::new(held),
            wake: Mutex::new((0, false)),
            cv: Condvar::new(),
            start: Instant::now(),
            on_error: self.job.config.on_worker_error,
            live: AtomicUsize::new(live),
            retiring: Mutex::new(()),
        });
        for local in 0..workers.len() {
            if self.retired[local] {
                continue;
            }
            let shared = shared.clone();
            let tx = tx.clone();
            scope.spawn(move || worker_loop(&shared, local, offset, workers, tx));
        }
        Ok(RankPass {
            search: VictimSearch::new(
                self.job.settings.seed,
                self.rank,
                self.size,
                plan.pass as usize,
            ),
            shared,
            outstanding: None,
            counters: RankPassCounters::default(),
            over: false,
            stats_sent: false,
            steal: plan.steal,
            first_worker: offset,
        })
    }
}

/// A warning from this rank ("rank 1: ..."), at once: above rank 0's progress bar on rank 0,
/// a whole line on stderr elsewhere.
fn warn_on_rank(rank: usize, master: &Option<Master>, line: &str) {
    let line = format!("rank {rank}: {line}");
    match master.as_ref() {
        Some(m) => m.warn(&line),
        None => crate::stderr_line::write_whole(format_args!("warning: {line}")),
    }
}

/// Rank 0's verdict on the hellos: every rank ready and agreeing, or the one text that every
/// rank will print.
fn roster_verdict(hellos: &[Result<RankReady, String>]) -> Result<Vec<RankReady>, String> {
    let n = hellos.len();
    let failed: Vec<String> = hellos
        .iter()
        .enumerate()
        .filter_map(|(r, h)| h.as_ref().err().map(|e| format!("rank {r} of {n}: {e}")))
        .collect();
    if !failed.is_empty() {
        return Err(format!(
            "the job cannot start: {} rank{} could not get ready:\n  {}",
            failed.len(),
            if failed.len() == 1 { "" } else { "s" },
            failed.join("\n  ")
        ));
    }
    let ready: Vec<RankReady> = hellos.iter().flatten().cloned().collect();
    let differ: Vec<String> = ready
        .iter()
        .enumerate()
        .filter(|(_, h)| h.fingerprint != ready[0].fingerprint)
        .map(|(r, h)| format!("rank {r} ({})", h.host))
        .collect();
    if !differ.is_empty() {
        return Err(format!(
            "the job cannot start: {} would not render the same image as rank 0 ({}): the scene file, the command line or the gasworks build differ",
            differ.join(", "),
            ready[0].host
        ));
    }
    if let Some(r) = ready.iter().position(|h| h.workers.is_empty()) {
        return Err(format!("the job cannot start: rank {r} has no worker"));
    }
    Ok(ready)
}
