//! One rank of a frame: the handshake, its workers, and its progress loop; on rank 0 also
//! the [`Master`] that plans the passes and gathers the tiles (`super::master`). One process
//! rendering alone is rank 0 of one ([`super::transport::Alone`]); under MPI every process is
//! a rank. The two differ only in their transport.
//!
//! Threads of a rank: one per local worker, rendering tiles from the rank's [`super::policy::WorkQueues`]
//! ([`super::workers::worker_loop`]); and the calling thread, the *progress loop*, the only
//! one that touches the transport. It hands finished tiles to the master (rank 0's own, or
//! through the transport), answers steal requests, asks other ranks for tiles when its own
//! deques run dry ([`super::rank_policy`]), sends heartbeats and watches for silent peers.
//! docs/cluster.md has the protocol and a sequence sketch.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::adaptive_sampling::{BlockGrid, BlockTally, Judging};
use super::calibrate;
use super::holdings::{self, Holdings};
use super::job::{FrameError, FrameJob, FrameSink, RankSetup};
use super::master::{Master, Outbox, PassOutcome};
use super::protocol::{Granted, Msg, Piece, Plan, RankReady};
use super::rank_policy::VictimSearch;
use super::ranks::{RankPassCounters, StopRequest};
use super::transport::Transport;
use super::workers::{worker_loop, Event, OnWorkerError, PassShared, Worker};
use super::Frame;
use crate::render::Film;

/// Runs this rank's part of one frame over `transport`: the setup handshake, the passes, the
/// end. Rank 0 returns the frame after `sink` has written the outputs; the other
/// ranks return `None`. `setup` is what this rank managed to prepare, or why it could not;
/// the first thing the ranks do is agree on whether every rank is ready, so a failure on one
/// rank gives every rank the same error and nobody waits forever.
///
/// On a failure that the other ranks cannot see coming (a worker error, a silent peer), the
/// job is aborted through the transport.
pub fn run_rank<T: Transport + ?Sized>(
    transport: &mut T,
    setup: Result<RankSetup, String>,
    job: &FrameJob,
    sink: &mut dyn FrameSink,
) -> Result<Option<Frame>, FrameError> {
    let mut node = Rank::new(transport, job);
    let result = node.run(setup, sink);
    match &result {
        Err(e) if e.aborts_job() => node.t.abort(&e.to_string()),
        _ => {
            let _ = node.t.flush(Duration::from_secs(10));
        }
    }
    result
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
}

/// What the progress loop holds while the frame runs.
struct FrameLoop<'s, 'e, 'x> {
    scope: &'s std::thread::Scope<'s, 'e>,
    workers: &'e [Worker],
    /// Rank 0's stop flag, which its workers watch: they stop taking tiles at its stop
    /// signal. Another rank's render on until rank 0 ends the frame.
    halt: Option<&'e AtomicU8>,
    /// The global index of this rank's first worker.
    offset: usize,
    tx: Sender<Event>,
    rx: &'x Receiver<Event>,
    current: Option<RankPass>,
    /// Rank 0's master role.
    master: Option<Master>,
    /// Steal requests for a pass whose plan is still on its way: (thief, pass, want, the
    /// thief's speed).
    deferred: Vec<(usize, u32, u32, f64)>,
    /// A worker event that woke the loop, handled at the top of the next round.
    pending: Option<Event>,
    /// The film's sums this rank holds ([`super::holdings`]).
    holdings: Holdings,
    /// A plan whose pass waits for the pieces other ranks send for its tiles.
    waiting: Option<Plan>,
    /// Pieces received, by pass.
    arrived: HashMap<u32, u32>,
    /// Rank 0 is ending the frame: no more tiles start or change hands here.
    halted: bool,
    /// The frame's passes and, with adaptive sampling, how its blocks are judged.
    passes: Vec<Range<u32>>,
    judge: Option<(super::adaptive_sampling::AdaptiveSampling, BlockGrid)>,
}

/// How long rank 0 ending a frame early waits for the other ranks' pixels (which they send
/// at once), and how long at a signal.
const HALT_PATIENCE: Duration = Duration::from_secs(10);
const HALT_PATIENCE_AT_A_SIGNAL: Duration = Duration::from_millis(100);

/// Why rank 0 gathers the film from the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gather {
    /// The frame is complete, or a checkpoint is due: the ranks render on.
    AsItStands,
    /// The frame ends early: the ranks stop taking tiles and finish those in flight first.
    /// A rank `lost` (fallen silent) is not asked.
    Halt { lost: Option<usize> },
}

/// What the frame loop does after handling something.
enum Flow {
    Go,
    /// This rank's part of the frame is over (rank 0: the frame, once written).
    Done(Option<Box<Frame>>),
}

struct Rank<'t, 'j, T: Transport + ?Sized> {
    t: &'t mut T,
    job: &'t FrameJob<'j>,
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

impl<'t, 'j, T: Transport + ?Sized> Rank<'t, 'j, T> {
    fn new(t: &'t mut T, job: &'t FrameJob<'j>) -> Self {
        let (rank, size) = (t.rank(), t.size());
        let now = Instant::now();
        Rank {
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

    fn protocol(&self, from: usize, message: String) -> FrameError {
        FrameError::Protocol {
            rank: self.rank,
            message: format!("from rank {from}: {message}"),
        }
    }

    fn send(&mut self, to: usize, msg: Msg) -> Result<(), FrameError> {
        if to == self.rank {
            self.local.push_back(msg);
        } else {
            self.t.send(to, msg.encode())?;
            self.last_sent[to] = Instant::now();
        }
        Ok(())
    }

    /// Tells rank 0 of a retirement (`Msg::Retired`), rank 0 itself at once.
    fn tell_retired(&mut self, master: &mut Option<Master>, msg: Msg) -> Result<(), FrameError> {
        match master.as_mut() {
            Some(m) => m
                .on_retired(self.rank, msg)
                .map_err(|e| self.protocol(self.rank, e)),
            None => self.send(0, msg),
        }
    }

    /// The pieces of this rank's calibration before pass `pass` that failed (`failures`, by
    /// local worker). Under `--on-worker-error retire` each failing worker is retired before
    /// the pass, as its first tile would have retired it, with its device's other workers
    /// when the device is lost, and rank 0 is told before it gets the rank's timings. Under
    /// `stop`, or when no worker of the rank is left, the rank's first failure ends the frame,
    /// in the rank's words (rank 0 gets them in place of the timings).
    fn retire_failed_pieces(
        &mut self,
        (workers, offset): (&[Worker], usize),
        pass: u32,
        master: &mut Option<Master>,
        failures: Vec<calibrate::PieceFailure>,
    ) -> Result<(), FrameError> {
        let Some(first) = failures.first() else {
            return Ok(());
        };
        let mut message = format!("{:#}", first.error);
        self.retired.resize(workers.len(), false);
        if self.job.config.on_worker_error == OnWorkerError::Retire {
            let (rank, ranks, others) = (self.rank, self.size, self.others());
            let gone = calibrate::retire_after_calibration(
                workers,
                failures,
                &mut self.retired,
                pass as usize,
                others,
                |line| warn_on_rank((rank, ranks), master, &line),
            );
            if self.retired.iter().any(|&r| !r) {
                for r in gone {
                    let msg = Msg::Retired {
                        pass,
                        worker: (offset + r.worker) as u32,
                        tile: r.tile,
                        error: r.error,
                    };
                    self.tell_retired(master, msg)?;
                }
                return Ok(());
            }
            let labels: Vec<&str> = workers.iter().map(|w| w.label.as_str()).collect();
            message = format!(
                "no worker is left: the calibration before pass {} retired every one ({}); the \
                 first failure: {message}",
                pass + 1,
                labels.join(", ")
            );
        }
        // Rank 0 ends the frame with this rank's words.
        self.send(0, Msg::Calibrated(Err(message.clone())))?;
        Err(self.failed(message))
    }

    /// This rank's frame failed: `message` says why.
    fn failed(&self, message: String) -> FrameError {
        FrameError::RankFailed {
            rank: self.rank,
            ranks: self.size,
            message,
        }
    }

    /// Who takes a retired worker's tiles, as a warning says it.
    fn others(&self) -> &'static str {
        if self.size > 1 {
            "the rank's other workers"
        } else {
            "the other workers"
        }
    }

    /// The part of the image rendered, in pixels of the whole (checked on rank 0 before the
    /// handshake, so every rank gets one).
    fn window(&self) -> crate::render::Tile {
        let s = &self.job.settings;
        super::window::resolve(self.job.config.window, s.width, s.height).unwrap_or(
            crate::render::Tile {
                x: 0,
                y: 0,
                w: s.width,
                h: s.height,
            },
        )
    }

    /// This rank's holdings at the frame's start: rank 0 takes the master's starting film
    /// (holding every pixel of a resumed one); the others start with an empty film.
    fn starting_holdings(&self, master: &mut Option<Master>) -> Holdings {
        if let Some(m) = master.as_mut() {
            let resumed = m.resumed();
            return Holdings::new(m.take_starting_film(), resumed);
        }
        let adaptive = self.job.config.adaptive_sampling.is_some();
        Holdings::new(holdings::empty_film(self.window(), adaptive), false)
    }

    fn send_all(&mut self, out: Outbox) -> Result<(), FrameError> {
        for (to, msg) in out {
            self.send(to, msg)?;
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<(usize, Msg)>, FrameError> {
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

    /// The peers this rank is watched by and watches: rank 0 every rank, the others rank 0.
    fn peers(&self) -> Vec<usize> {
        if self.rank == 0 {
            (1..self.size).collect()
        } else {
            vec![0]
        }
    }

    /// Heartbeats to the peers this rank is watched by.
    fn heartbeats(&mut self) -> Result<(), FrameError> {
        let now = Instant::now();
        for r in self.peers() {
            if now.duration_since(self.last_sent[r]) >= self.job.timing.heartbeat {
                self.send(r, Msg::Heartbeat)?;
            }
        }
        Ok(())
    }

    /// Heartbeats to the peers this rank is watched by, and the watch on the peers it
    /// depends on.
    fn tick(&mut self) -> Result<(), FrameError> {
        if !self.live {
            return Ok(());
        }
        self.heartbeats()?;
        let now = Instant::now();
        let timing = self.job.timing;
        for r in self.peers() {
            let silent = now.duration_since(self.last_heard[r]);
            if silent >= timing.dead_after {
                return Err(FrameError::Silent {
                    rank: r,
                    seconds: silent.as_secs_f64(),
                    heartbeat_s: timing.heartbeat.as_secs_f64(),
                });
            }
        }
        Ok(())
    }

    /// Waits for the next message (setup phase: no workers, no liveness checks).
    fn wait_message(&mut self) -> Result<(usize, Msg), FrameError> {
        loop {
            if let Some(m) = self.recv()? {
                return Ok(m);
            }
            std::thread::sleep(self.job.timing.poll);
        }
    }

    /// The handshake, then the frame: every rank says whether it is ready, rank 0 answers
    /// each with its roster (or the one error every rank reports), and the frame runs.
    fn run(
        &mut self,
        setup: Result<RankSetup, String>,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, FrameError> {
        let hello = match &setup {
            Ok(s) => Ok(s.ready.clone()),
            Err(e) => Err(e.clone()),
        };
        self.send(0, Msg::Hello(hello))?;
        let hellos = match self.rank {
            0 => Some(self.gather_hellos()?),
            _ => None,
        };
        let offset = self.wait_for_roster()?;
        let Ok(mut setup) = setup else {
            return Err(self.protocol(0, "a roster for a rank that was not ready".into()));
        };
        // Taken, not copied: it may hold the film of a resumed render.
        let master = match (hellos, setup.plan.take()) {
            (Some(hellos), Some(inputs)) => {
                Some(Master::new(self.job, inputs, &hellos).map_err(|e| self.protocol(0, e))?)
            }
            (Some(_), None) => {
                return Err(FrameError::Setup(
                    "rank 0 has no cost map to plan with".into(),
                ))
            }
            _ => None,
        };
        let now = Instant::now();
        self.last_heard.fill(now);
        self.last_sent.fill(now);
        self.live = true;
        self.run_frame(master, &setup.workers, offset, sink)
    }

    /// Rank 0: every rank's hello, then the roster sent to each (the first global index of
    /// its workers) or the verdict that the job cannot start. Returns the ranks, ready.
    fn gather_hellos(&mut self) -> Result<Vec<RankReady>, FrameError> {
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
        match roster_verdict(&hellos) {
            Ok(ready) => {
                let mut first = 0u32;
                for (r, h) in ready.iter().enumerate() {
                    self.send(r, Msg::Roster(Ok(first)))?;
                    first += h.workers.len() as u32;
                }
                Ok(ready)
            }
            Err(text) => {
                for r in 0..self.size {
                    self.send(r, Msg::Roster(Err(text.clone())))?;
                }
                // Rank 0 reads its own verdict from its roster, as every rank does.
                Ok(Vec::new())
            }
        }
    }

    /// This rank's roster: the global index of its first worker, or the job's error.
    fn wait_for_roster(&mut self) -> Result<usize, FrameError> {
        let mut early = VecDeque::new();
        let offset = loop {
            match self.wait_message()? {
                (0, Msg::Roster(Ok(first))) => break first as usize,
                (0, Msg::Roster(Err(text))) => return Err(FrameError::Setup(text)),
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
        Ok(offset)
    }

    /// The frame, from its first messages to its end, with this rank's worker threads in a
    /// scope of their own; a failure the other ranks cannot see coming aborts the job before
    /// the workers' last tiles are waited for.
    fn run_frame(
        &mut self,
        mut master: Option<Master>,
        workers: &[Worker],
        offset: usize,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, FrameError> {
        if let Some(m) = master.take_if(|m| m.complete()) {
            // The other ranks learn that the frame is over as at its end.
            return self.finish_frame(m, sink);
        }
        let holdings = self.starting_holdings(&mut master);
        if let Some(m) = master.as_mut() {
            let out = m.begin();
            self.send_all(out)?;
        }
        let (tx, rx) = mpsc::channel::<Event>();
        std::thread::scope(|scope| {
            let mut fl = FrameLoop {
                scope,
                workers,
                halt: (self.rank == 0).then_some(self.job.stop),
                offset,
                tx,
                rx: &rx,
                current: None,
                master,
                deferred: Vec::new(),
                pending: None,
                holdings,
                waiting: None,
                arrived: HashMap::new(),
                halted: false,
                passes: self.job.config.passes(self.job.settings.spp),
                judge: self
                    .job
                    .config
                    .adaptive_sampling
                    .map(|a| (a, BlockGrid::new(self.window()))),
            };
            let result = self.frame_loop(&mut fl, sink);
            if let Some(c) = &fl.current {
                c.shared.end();
            }
            if let Err(e) = &result {
                if e.aborts_job() {
                    let mut message = e.to_string();
                    if let (FrameError::Silent { rank, .. }, Some(m)) = (e, fl.master.take()) {
                        message += &self.keep_what_arrived(m, *rank, &mut fl, sink);
                    }
                    // Before waiting for the workers' last tiles: end the job now.
                    self.t.abort(&message);
                }
            }
            result
        })
    }

    fn frame_loop(
        &mut self,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, FrameError> {
        loop {
            if let Flow::Done(frame) = self.on_stop_signal(fl, sink)? {
                return Ok(frame.map(|f| *f));
            }
            let events: Vec<Event> = fl
                .pending
                .take()
                .into_iter()
                .chain(fl.rx.try_iter())
                .collect();
            for ev in events {
                if let Flow::Done(frame) = self.on_event(ev, fl, sink)? {
                    return Ok(frame.map(|f| *f));
                }
            }
            while let Some((from, msg)) = self.recv()? {
                if let Flow::Done(frame) = self.on_message(from, msg, fl, sink)? {
                    return Ok(frame.map(|f| *f));
                }
            }
            if self.steal_or_end_pass(fl)? {
                continue;
            }
            self.tick()?;
            if !self.local.is_empty() {
                continue;
            }
            match fl.rx.recv_timeout(self.job.timing.poll) {
                Ok(ev) => fl.pending = Some(ev),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
            }
        }
    }

    /// A stop signal: rank 0 ends the frame with what has arrived (its own tiles in flight
    /// among it); another rank tells rank 0 and renders on until rank 0 says the frame is over.
    fn on_stop_signal(
        &mut self,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> Result<Flow, FrameError> {
        let signal = self.job.stop.load(Ordering::SeqCst);
        if signal != 0 {
            if self.rank == 0 {
                self.stop_request
                    .get_or_insert(StopRequest { rank: 0, signal });
            } else if !self.stop_passed_on {
                self.stop_passed_on = true;
                self.send(0, Msg::Stop { signal })?;
            }
        }
        let Some(request) = self.stop_request else {
            return Ok(Flow::Go);
        };
        let Some(mut m) = fl.master.take() else {
            return Ok(Flow::Go);
        };
        let (film, lost) = self.gather(fl, &mut m, Gather::Halt { lost: None })?;
        m.stop(request, film, &lost);
        self.finish_frame(m, sink)
            .map(|f| Flow::Done(f.map(Box::new)))
    }

    /// A worker's event: a tile to hand on, a retirement to report, or the rank's failure.
    fn on_event(
        &mut self,
        ev: Event,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> Result<Flow, FrameError> {
        match ev {
            Event::Done(d, tile, sums) => {
                self.tiles_rendered += 1;
                fl.holdings.rendered(tile, &sums, d.pass);
                if let Some(m) = fl.master.as_mut() {
                    let out = m
                        .on_tile(self.rank, d)
                        .map_err(|e| self.protocol(self.rank, e))?;
                    self.send_all(out)?;
                    self.tiles_taken += 1;
                    self.offer_film(fl, sink, None)?;
                } else {
                    self.send(0, Msg::TileDone(d))?;
                }
                Ok(self.fault_flow())
            }
            Event::Failed(message) => Err(self.failed(message)),
            Event::Retired {
                local,
                global,
                tile,
                error,
                note,
                with_it,
            } => {
                self.retired[local] = true;
                // Said where it happened, at once (rank 0's summary says it again), above
                // rank 0's progress bar.
                warn_on_rank(
                    (self.rank, self.size),
                    &fl.master,
                    &format!("{error}; {note}"),
                );
                let pass = fl.current.as_ref().map_or(0, |c| c.shared.pass);
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
                    self.tell_retired(&mut fl.master, msg)?;
                }
                Ok(Flow::Go)
            }
        }
    }

    /// A message from rank `from` (this rank itself for rank 0's own).
    fn on_message(
        &mut self,
        from: usize,
        msg: Msg,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> Result<Flow, FrameError> {
        match msg {
            Msg::Plan(plan) => self.on_plan(plan, fl)?,
            Msg::Piece { pass, piece } => {
                if !fl.holdings.fits(&piece) {
                    return Err(self.protocol(from, "a piece that does not fit the film".into()));
                }
                fl.holdings.stage(&piece);
                *fl.arrived.entry(pass).or_insert(0) += 1;
                self.try_start(fl)?;
            }
            Msg::Collect { halt } if from == 0 && self.rank != 0 => {
                if halt {
                    self.halt_workers(fl)?;
                }
                let (held, fresh) = fl.holdings.collect();
                self.send(0, Msg::Collected { held, fresh })?;
            }
            Msg::StealRequest { pass, want, speed } => {
                if fl.current.as_ref().is_none_or(|c| c.shared.pass < pass) {
                    // The thief got its plan before this rank did: answer once ours is here
                    // (it is on its way: rank 0 sends every plan at once).
                    fl.deferred.push((from, pass, want, speed));
                } else {
                    self.serve(fl, from, pass, want, speed)?;
                }
            }
            Msg::Calibrate {
                pass,
                tile,
                samples,
            } if from == 0 => {
                if fl.current.is_some() {
                    return Err(self.protocol(from, "a calibration mid-frame".into()));
                }
                // On this thread: the workers are idle until the first plan, and the pieces
                // take milliseconds (a CPU piece) to one tile's launch (a GPU).
                let timed = calibrate::time_pieces(fl.workers, tile, &samples);
                let workers = (fl.workers, fl.offset);
                self.retire_failed_pieces(workers, pass, &mut fl.master, timed.failures)?;
                self.send(0, Msg::Calibrated(Ok(timed.times)))?;
            }
            Msg::Grant { pass, tasks } => self.on_grant(from, pass, tasks, fl)?,
            Msg::PassEnd { pass } => {
                let c = fl
                    .current
                    .as_mut()
                    .filter(|c| c.shared.pass == pass && !c.over)
                    .ok_or_else(|| {
                        self.protocol(from, format!("an unexpected end of pass {pass}"))
                    })?;
                c.over = true;
                c.shared.end();
                fl.holdings.end_pass();
            }
            Msg::Finish(result) if from == 0 && self.rank != 0 => {
                return result
                    .map(|()| Flow::Done(None))
                    .map_err(FrameError::Output);
            }
            Msg::Stop { signal } if self.rank == 0 => {
                // Handled at the top of the loop, after the messages already here.
                self.stop_request
                    .get_or_insert(StopRequest { rank: from, signal });
            }
            Msg::Heartbeat => {}
            msg => return self.on_master_message(from, msg, fl, sink),
        }
        Ok(Flow::Go)
    }

    /// A message for rank 0's master role.
    fn on_master_message(
        &mut self,
        from: usize,
        msg: Msg,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> Result<Flow, FrameError> {
        let what = msg.name();
        let Some(m) = fl.master.as_mut() else {
            return Err(self.protocol(from, format!("a {what} sent to a rank other than 0")));
        };
        match msg {
            Msg::Calibrated(result) => {
                let times = result.map_err(|message| FrameError::RankFailed {
                    rank: from,
                    ranks: self.size,
                    message,
                })?;
                let out = m
                    .on_calibrated(from, times)
                    .map_err(|e| self.protocol(from, e))?;
                self.send_all(out)?;
            }
            Msg::TileDone(d) => {
                let out = m.on_tile(from, d).map_err(|e| self.protocol(from, e))?;
                self.send_all(out)?;
                self.tiles_taken += 1;
                self.offer_film(fl, sink, None)?;
                return Ok(self.fault_flow());
            }
            Msg::PassStats {
                pass,
                counters,
                blocks,
            } => {
                let (out, outcome) = m
                    .on_stats(from, pass, counters, blocks)
                    .map_err(|e| self.protocol(from, e))?;
                self.send_all(out)?;
                match outcome {
                    // The plans of the next pass are sent: the ranks render it while the film
                    // of this boundary is written.
                    PassOutcome::NextPass { spp_done } => {
                        self.offer_film(fl, sink, Some(spp_done))?
                    }
                    PassOutcome::FrameComplete => {
                        let Some(mut m) = fl.master.take() else {
                            unreachable!()
                        };
                        let (film, _) = self.gather(fl, &mut m, Gather::AsItStands)?;
                        m.set_film(film);
                        return self
                            .finish_frame(m, sink)
                            .map(|f| Flow::Done(f.map(Box::new)));
                    }
                    PassOutcome::Waiting => {}
                }
            }
            msg @ Msg::Retired { .. } => {
                m.on_retired(from, msg)
                    .map_err(|e| self.protocol(from, e))?;
            }
            _ => return Err(self.protocol(from, format!("an unexpected {what}"))),
        }
        Ok(Flow::Go)
    }

    /// The answer to this rank's steal request: the tiles `from` gave (perhaps none).
    fn on_grant(
        &mut self,
        from: usize,
        pass: u32,
        tasks: Vec<Granted>,
        fl: &mut FrameLoop<'_, '_, '_>,
    ) -> Result<(), FrameError> {
        let Some(c) = fl
            .current
            .as_mut()
            .filter(|c| c.shared.pass == pass && c.outstanding == Some(from))
        else {
            return Err(self.protocol(from, format!("an unasked-for grant for pass {pass}")));
        };
        c.outstanding = None;
        if tasks.is_empty() {
            return Ok(());
        }
        if c.over {
            return Err(self.protocol(from, "tiles granted after the pass ended".into()));
        }
        c.counters.grants += 1;
        c.counters.tiles_in += tasks.len() as u32;
        // Their sums go into the film, to which the rendered tiles' are written back.
        for g in &tasks {
            let piece = Piece {
                rect: g.data.tile,
                sums: g.data.prior.clone().unwrap_or_default(),
                odd: g.data.odd.clone(),
            };
            if !fl.holdings.fits(&piece) {
                return Err(self.protocol(from, "a granted tile without its sums".into()));
            }
            fl.holdings.stage(&piece);
        }
        c.shared.receive(tasks);
        c.search.restart();
        Ok(())
    }

    /// Stealing across ranks, and the end of the pass: a rank whose deques ran dry asks the
    /// next victim for tiles; once the pass is over and no request is out, its counters go to
    /// rank 0. True when the statistics were sent (the loop goes round again at once).
    fn steal_or_end_pass(&mut self, fl: &mut FrameLoop<'_, '_, '_>) -> Result<bool, FrameError> {
        let Some(c) = fl.current.as_mut().filter(|_| !fl.halted) else {
            return Ok(false);
        };
        let idle = c.steal && !c.over && c.outstanding.is_none() && c.shared.queues.queued() == 0;
        if idle && self.size > 1 {
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
                let pass = c.shared.pass;
                self.send(victim, Msg::StealRequest { pass, want, speed })?;
            }
        }
        let Some(c) = fl.current.as_mut() else {
            return Ok(false);
        };
        if !(c.over && c.outstanding.is_none() && !c.stats_sent) {
            return Ok(false);
        }
        c.stats_sent = true;
        let (pass, counters) = (c.shared.pass, c.counters);
        let blocks = block_tallies(fl, pass as usize + 1);
        self.send(
            0,
            Msg::PassStats {
                pass,
                counters,
                blocks,
            },
        )?;
        Ok(true)
    }

    /// Rank 0, a peer fallen silent: the frame ends as at a stop (the tiles that arrived,
    /// rank 0's own finished ones among them), and the sink writes it. What the abort's
    /// message adds: where it went, or why nothing did.
    fn keep_what_arrived(
        &mut self,
        mut master: Master,
        silent: usize,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
    ) -> String {
        let lost = Some(silent);
        let (film, lost) = match self.gather(fl, &mut master, Gather::Halt { lost }) {
            Ok(gathered) => gathered,
            Err(e) => return format!("; what had arrived was not written: {e}"),
        };
        // As a SIGTERM would (the job is ended like one).
        let request = StopRequest {
            rank: 0,
            signal: 15,
        };
        master.stop(request, film, &lost);
        sink.keep(&master.into_frame()).unwrap_or_default()
    }

    /// Rank 0, at a stop: its own workers take no new tile and finish those in flight, which
    /// then count as arrived, as surely as a peer's received tile, so the image and the
    /// resume file written at the stop hold them too (a resumed job does not render them
    /// again). What they would send (a pass's end) is not sent: the frame ends here. A peer's
    /// tiles in flight are not waited for (its rank may be going down too).
    fn drain_own_tiles(
        &mut self,
        master: &mut Master,
        fl: &mut FrameLoop<'_, '_, '_>,
    ) -> Result<(), FrameError> {
        if let Some(c) = &fl.current {
            c.shared.end();
            c.shared.wait_for_workers();
        }
        for d in self.finished_tiles(fl) {
            master
                .on_tile(self.rank, d)
                .map_err(|e| self.protocol(self.rank, e))?;
        }
        Ok(())
    }

    /// A frame ending: the tiles this rank's workers have finished and not yet reported, kept
    /// in its holdings (other events no longer matter).
    fn finished_tiles(&mut self, fl: &mut FrameLoop<'_, '_, '_>) -> Vec<super::protocol::TileDone> {
        let mut done = Vec::new();
        for ev in fl.pending.take().into_iter().chain(fl.rx.try_iter()) {
            if let Event::Done(d, tile, sums) = ev {
                self.tiles_rendered += 1;
                fl.holdings.rendered(tile, &sums, d.pass);
                done.push(d);
            }
        }
        done
    }

    /// The test hook ([`super::fault::FaultHook`]), after a tile: `Done` when this rank is to
    /// fall silent now; the other kinds end the process here. Rank 0 counts every tile its
    /// master took, so that a fault can land after the frame's last tile (and its
    /// checkpoint); another rank counts the tiles it rendered.
    fn fault_flow(&self) -> Flow {
        let Some(f) = self.job.fault.filter(|f| f.rank == self.rank) else {
            return Flow::Go;
        };
        let count = if self.rank == 0 {
            self.tiles_taken
        } else {
            self.tiles_rendered
        };
        match count >= f.after_tiles && f.land() {
            true => Flow::Done(None),
            false => Flow::Go,
        }
    }

    /// Rank 0, at the end of the frame (complete or stopped): the outputs are written and
    /// every rank is told whether they were.
    fn finish_frame(
        &mut self,
        master: Master,
        sink: &mut dyn FrameSink,
    ) -> Result<Option<Frame>, FrameError> {
        let frame = master.into_frame();
        let written = sink.finish(&frame).map_err(|e| format!("{e:#}"));
        for r in 1..self.size {
            self.send(r, Msg::Finish(written.clone()))?;
        }
        written.map(|()| Some(frame)).map_err(FrameError::Output)
    }

    /// Answers a steal request of `thief` (whose fastest worker runs at `thief_speed`) for
    /// `pass`: tiles from this rank's cheap ends that the thief finishes sooner than this
    /// rank would, or none.
    fn serve(
        &mut self,
        fl: &mut FrameLoop<'_, '_, '_>,
        thief: usize,
        pass: u32,
        want: u32,
        thief_speed: f64,
    ) -> Result<(), FrameError> {
        let mut tasks = Vec::new();
        if let Some(c) = fl.current.as_mut().filter(|c| c.shared.pass == pass) {
            c.counters.served += 1;
            if !c.over && !fl.halted {
                tasks = c
                    .shared
                    .give_away(want as usize, thief_speed)
                    .map_err(|e| self.protocol(self.rank, e))?;
                c.counters.tiles_out += tasks.len() as u32;
                tasks.iter().for_each(|g| fl.holdings.gave(g.data.tile));
            }
        }
        self.send(thief, Msg::Grant { pass, tasks })
    }

    /// A plan arrived: this rank sends the pieces it holds of other ranks' tiles, and the
    /// pass starts once the pieces of its own tiles have come.
    fn on_plan(&mut self, plan: Plan, fl: &mut FrameLoop<'_, '_, '_>) -> Result<(), FrameError> {
        if fl.waiting.is_some() || fl.current.as_ref().is_some_and(|c| !c.stats_sent) {
            return Err(self.protocol(0, "a plan before the pass ended".into()));
        }
        for send in &plan.sends {
            let to = send.to as usize;
            let piece = fl.holdings.piece(send.rect);
            if to >= self.size || to == self.rank || !fl.holdings.fits(&piece) {
                return Err(self.protocol(0, format!("a plan sending {send:?}")));
            }
            fl.holdings.gave(send.rect);
            let pass = plan.pass;
            self.send(to, Msg::Piece { pass, piece })?;
        }
        fl.waiting = Some(plan);
        self.try_start(fl)
    }

    /// The waiting plan's pass starts once every piece of its tiles has arrived: each tile
    /// takes its sums from the film.
    fn try_start(&mut self, fl: &mut FrameLoop<'_, '_, '_>) -> Result<(), FrameError> {
        let Some(plan) = fl.waiting.as_ref() else {
            return Ok(());
        };
        let arrived = fl.arrived.get(&plan.pass).copied().unwrap_or(0);
        if arrived < plan.incoming {
            return Ok(());
        }
        if arrived > plan.incoming {
            return Err(self.protocol(
                0,
                format!("{arrived} pieces for a plan of {}", plan.incoming),
            ));
        }
        let Some(mut plan) = fl.waiting.take() else {
            return Ok(());
        };
        fl.arrived.remove(&plan.pass);
        for t in &mut plan.tasks {
            if !fl.holdings.contains(t.tile) {
                return Err(self.protocol(0, format!("a plan with tile {:?}", t.tile)));
            }
            let piece = fl.holdings.piece(t.tile);
            (t.prior, t.odd) = (Some(piece.sums), piece.odd);
        }
        self.start_pass(plan, fl)
    }

    /// A rank told to end the frame: its workers take no new tile, and the tiles they have
    /// finished are kept and reported to rank 0 as any other. Those in flight are not waited
    /// for: rank 0 writes at once, at a signal before mpirun's kill.
    fn halt_workers(&mut self, fl: &mut FrameLoop<'_, '_, '_>) -> Result<(), FrameError> {
        fl.halted = true;
        if let Some(c) = &fl.current {
            c.shared.end();
        }
        for d in self.finished_tiles(fl) {
            self.send(0, Msg::TileDone(d))?;
        }
        Ok(())
    }

    /// Rank 0: the film as the ranks hold it, and the ranks that did not answer (a frame
    /// ending early waits for none longer than a silent peer is given, and never for the one
    /// `lost`; their pixels keep what an earlier gathering had). Messages that arrive
    /// meanwhile wait for the frame loop, but for the tiles of ranks that halt, which the
    /// master counts.
    fn gather(
        &mut self,
        fl: &mut FrameLoop<'_, '_, '_>,
        master: &mut Master,
        why: Gather,
    ) -> Result<(Film, Vec<usize>), FrameError> {
        let halt = matches!(why, Gather::Halt { .. });
        let lost = match why {
            Gather::Halt { lost } => lost,
            Gather::AsItStands => None,
        };
        let asked: Vec<usize> = (1..self.size).filter(|&r| Some(r) != lost).collect();
        for &r in &asked {
            self.send(r, Msg::Collect { halt })?;
        }
        if halt {
            self.drain_own_tiles(master, fl)?;
        }
        if self.size == 1 {
            return Ok((fl.holdings.take_film(), Vec::new()));
        }
        let mut replies: Vec<Option<(Vec<Piece>, Vec<Piece>)>> = vec![None; self.size];
        replies[0] = Some(fl.holdings.collect());
        let mut later = Vec::new();
        let (since, patience) = (Instant::now(), self.halt_patience());
        while asked.iter().any(|&r| replies[r].is_none()) {
            match self.recv()? {
                Some((from, Msg::Collected { held, fresh })) if replies[from].is_none() => {
                    if !held.iter().chain(&fresh).all(|p| fl.holdings.fits(p)) {
                        return Err(
                            self.protocol(from, "a piece that does not fit the film".into())
                        );
                    }
                    replies[from] = Some((held, fresh));
                }
                Some((from, Msg::TileDone(d))) if halt => {
                    // A halting rank's last tiles: counted, the pass is not ended.
                    master
                        .on_tile(from, d)
                        .map_err(|e| self.protocol(from, e))?;
                    self.tiles_taken += 1;
                }
                Some((_, Msg::Heartbeat)) => {}
                Some(m) => later.push(m),
                None if halt => {
                    self.heartbeats()?;
                    if since.elapsed() >= patience {
                        break;
                    }
                    std::thread::sleep(self.job.timing.poll);
                }
                None => {
                    self.tick()?;
                    std::thread::sleep(self.job.timing.poll);
                }
            }
        }
        self.early.extend(later);
        let missing = (1..self.size).filter(|&r| replies[r].is_none()).collect();
        let replies: Vec<_> = replies.into_iter().flatten().collect();
        let mut film = master.take_film();
        holdings::assemble(&mut film, &replies);
        Ok((film, missing))
    }

    /// How long rank 0 ending the frame early waits for the ranks' pixels: briefly at a
    /// signal (mpirun kills what it signalled soon after), longer for a silent peer, never
    /// longer than a peer is given to answer.
    fn halt_patience(&self) -> Duration {
        let patience = match self.job.stop.load(Ordering::SeqCst) {
            0 => HALT_PATIENCE,
            _ => HALT_PATIENCE_AT_A_SIGNAL,
        };
        patience.min(self.job.timing.dead_after)
    }

    /// Rank 0, after a tile arrived (`boundary`: `None`) or at a pass boundary (the samples
    /// per pixel there): the sink may checkpoint the film as it stands. One process hands it
    /// its own; among several ranks the film is gathered, only when the sink wants it.
    fn offer_film(
        &mut self,
        fl: &mut FrameLoop<'_, '_, '_>,
        sink: &mut dyn FrameSink,
        boundary: Option<u32>,
    ) -> Result<(), FrameError> {
        let Some(mut m) = fl.master.take() else {
            return Ok(());
        };
        let spp_done = boundary.unwrap_or_else(|| m.spp_done());
        let result = if self.size == 1 {
            let film = fl.holdings.film();
            match boundary {
                Some(_) => sink.between_passes(film, spp_done),
                None => sink.within_pass(spp_done, &|| film.clone()),
            }
            Ok(())
        } else if sink.film_wanted(boundary.is_none()) {
            self.gather(fl, &mut m, Gather::AsItStands)
                .map(|(film, _)| {
                    match boundary {
                        Some(_) => sink.between_passes(&film, spp_done),
                        None => sink.within_pass(spp_done, &|| film.clone()),
                    }
                    m.set_film(film);
                })
        } else {
            Ok(())
        };
        fl.master = Some(m);
        result
    }

    /// A plan arrived: the pass starts on this rank's workers, one thread each (but the
    /// retired), and the steal requests that came before it are answered.
    fn start_pass(&mut self, plan: Plan, fl: &mut FrameLoop<'_, '_, '_>) -> Result<(), FrameError> {
        if fl.current.as_ref().is_some_and(|c| !c.stats_sent) {
            return Err(self.protocol(0, "a plan before the pass ended".into()));
        }
        let (pass, steal) = (plan.pass, plan.steal);
        self.retired.resize(fl.workers.len(), false);
        let job = self.job;
        let shared = PassShared::new(
            plan,
            fl.offset,
            job.settings.seed,
            &self.retired,
            (job.config.on_worker_error, self.others()),
        )
        .map_err(|e| self.protocol(0, e))?;
        let shared = Arc::new(shared);
        for local in (0..fl.workers.len()).filter(|&l| !self.retired[l]) {
            let (tx, workers, halt) = (fl.tx.clone(), fl.workers, fl.halt);
            let running = PassShared::running(&shared);
            fl.scope
                .spawn(move || worker_loop(running, local, workers, halt, tx));
        }
        fl.current = Some(RankPass {
            search: VictimSearch::new(job.settings.seed, self.rank, self.size, pass as usize),
            shared,
            outstanding: None,
            counters: RankPassCounters::default(),
            over: false,
            stats_sent: false,
            steal,
        });
        let ready: Vec<_> = fl
            .deferred
            .iter()
            .filter(|d| d.1 == pass)
            .copied()
            .collect();
        fl.deferred.retain(|d| d.1 != pass);
        for (thief, p, want, speed) in ready {
            self.serve(fl, thief, p, want, speed)?;
        }
        Ok(())
    }
}

/// Adaptive sampling, at the end of a pass with `next` to come: the tallies of the blocks this
/// rank holds pixels of, for rank 0 to judge them; none otherwise.
fn block_tallies(fl: &FrameLoop<'_, '_, '_>, next: usize) -> Vec<(u32, BlockTally)> {
    let Some((adaptive, grid)) = fl.judge else {
        return Vec::new();
    };
    match Judging::new(&fl.passes, next, &adaptive, true) {
        Some(j) => fl.holdings.tally(&j, grid),
        None => Vec::new(),
    }
}

/// A warning from this rank, at once: above rank 0's progress bar on rank 0, a whole line on
/// stderr elsewhere. Among several ranks it names the rank ("rank 1: ...").
fn warn_on_rank((rank, ranks): (usize, usize), master: &Option<Master>, line: &str) {
    let line = match ranks {
        1 => line.to_string(),
        _ => format!("rank {rank}: {line}"),
    };
    match master.as_ref() {
        Some(m) => m.warn(&line),
        None => crate::console::write_whole(format_args!("warning: {line}")),
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
