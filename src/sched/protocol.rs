//! The messages ranks exchange, and their wire format.
//!
//! Every message is one byte buffer: a tag byte, then the fields in order, little-endian
//! (`u32`/`u64`/`f64` as their bytes, a string or a list as a `u32` length then its items,
//! an optional value as a 0/1 byte then the value, pixels as 16 bytes each). Decoding checks
//! every length against what is left, so a short or corrupt buffer is an error, never a panic
//! or a huge allocation. docs/cluster.md describes what each message does and when it is
//! sent.

use std::ops::Range;

use super::adaptive_sampling::BlockTally;
use super::ranks::RankPassCounters;
pub use super::wire::DecodeError;
use super::wire::{Reader, Writer};
use crate::render::Tile;

/// Bumped whenever a message changes; part of every rank's fingerprint, so that ranks of
/// different builds refuse to work together instead of misreading each other.
pub const PROTOCOL_VERSION: u32 = 8;

/// One worker's timed piece: what [`super::calibrate::time_pieces`] measures on a rank,
/// before rank 0, which holds the cost map, turns it into a speed
/// ([`super::calibrate::calibration_of`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PieceTime {
    /// The `--devices` entry (the workers' `group`) on the worker's own rank.
    pub group: u32,
    /// The worker that ran it ("gpu0/s0", "cpu#0").
    pub worker: String,
    pub piece: Tile,
    pub samples: Range<u32>,
    /// The faster run's seconds: the thread's CPU time for CPU workers, else wall time.
    pub seconds: f64,
}

/// One worker of a rank, as rank 0 reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerInfo {
    /// "cpu#0", "gpu0/s1" (rank 0 prefixes the rank).
    pub label: String,
    pub device: String,
    /// What it runs on ([`crate::render::TileRenderer::hardware`]): "cpu: AMD EPYC 7B13".
    /// Device names are alike on every rank ("cpu", "gpu0"); this tells machines apart.
    pub hardware: String,
    /// The `--devices` entry the worker came from, on its own rank.
    pub group: u32,
    /// The pixel-samples it wants a tile to carry
    /// ([`crate::render::TileRenderer::min_tile_work`]: a GPU's launch work); 0: any tile.
    pub min_tile_work: u64,
}

/// What a rank found when it got ready to render.
#[derive(Clone, Debug, PartialEq)]
pub struct RankReady {
    pub host: String,
    /// The backend it picked ("CPU backend, 2 threads", ...).
    pub backend: String,
    /// Hash of everything that decides the image (settings, scene, build): ranks that
    /// disagree would make a wrong image.
    pub fingerprint: u64,
    pub workers: Vec<WorkerInfo>,
}

/// A tile of a rank's: where it is and the film's sums for its pixels so far (`None`:
/// zeros), since a tile's next samples are added to those sums. Rank 0 sends none: the rank
/// reads them from its holdings ([`super::holdings`]); a tile given to a thief rank carries
/// them.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskData {
    pub task: u32,
    pub tile: Tile,
    pub prior: Option<Vec<[f32; 4]>>,
    /// The odd-pass luminance of its pixels so far (adaptive sampling's odd plane); empty
    /// without one.
    pub odd: Vec<f32>,
    /// Its estimated cost and its floor, which the steal guards weigh
    /// (`sched::tiles::area_floors`).
    pub cost: f64,
    pub floor: f64,
    /// The pixels it skips, one entry per pixel (adaptive sampling's stopped blocks in a
    /// tile for workers that want big ones,
    /// [`crate::render::TileRenderer::render_tile_skipping`]); `None`: every pixel renders.
    pub skip: Option<Vec<bool>>,
}

impl TaskData {
    /// A task as a plan hands it to its rank, which reads its sums from its holdings.
    pub fn planned(
        task: u32,
        tile: Tile,
        (cost, floor): (f64, f64),
        skip: Option<Vec<bool>>,
    ) -> Self {
        TaskData {
            task,
            tile,
            prior: None,
            odd: Vec::new(),
            cost,
            floor,
            skip,
        }
    }
}

/// Part of the film: a rectangle's sums (and odd-plane values, or none), sent from the rank
/// that holds them to the rank that adds samples to them, or gathered by rank 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub rect: Tile,
    pub sums: Vec<[f32; 4]>,
    pub odd: Vec<f32>,
}

/// A piece a rank holds that another rank's tile needs before a pass: send `rect` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceTo {
    pub rect: Tile,
    pub to: u32,
}

/// A task given away to a thief rank, with the (global) worker whose deque it left.
#[derive(Clone, Debug, PartialEq)]
pub struct Granted {
    pub data: TaskData,
    pub from_worker: u32,
}

/// One pass's work for one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub pass: u32,
    pub samples: Range<u32>,
    /// Stealing within and across ranks.
    pub steal: bool,
    /// The rank's workers' deques (task numbers, front first), in local worker order.
    pub deques: Vec<Vec<u32>>,
    /// Every task in `deques`.
    pub tasks: Vec<TaskData>,
    /// The speed rank 0 plans each of the rank's workers at (local worker order; cost-map
    /// units per second, from the calibration or the last pass), which the steal guard
    /// weighs tasks with (`sched::policy::steal_pays`). Empty when none is known.
    pub speeds: Vec<f64>,
    /// The pass's tasks, numbered `0..task_count`.
    pub task_count: u32,
    /// The mean estimated cost of the pass's tasks, which the steal guards weigh.
    pub mean_cost: f64,
    /// The pieces this rank holds that other ranks' tiles of the pass need.
    pub sends: Vec<PieceTo>,
    /// How many pieces other ranks send this rank for its tiles: the pass starts here once
    /// they have arrived.
    pub incoming: u32,
}

/// A rendered tile, sent to rank 0.
#[derive(Clone, Debug, PartialEq)]
pub struct TileDone {
    pub pass: u32,
    pub task: u32,
    /// Global worker index.
    pub worker: u32,
    pub stolen_from: Option<u32>,
    /// Seconds since the pass's plan reached the rendering rank.
    pub start_s: f64,
    pub end_s: f64,
    pub cost_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Msg {
    /// Every rank to rank 0 once its scene is loaded: ready, or why not.
    Hello(Result<RankReady, String>),
    /// Rank 0 to every rank: the first global index of its workers, or the reason the job
    /// cannot go on (the same text for every rank).
    Roster(Result<u32, String>),
    Plan(Plan),
    /// An idle rank asks for up to `want` tiles. `speed` is the speed of its fastest worker
    /// in its plan (0 when unknown): a victim whose workers are much faster keeps the tiles
    /// it would finish sooner itself.
    StealRequest {
        pass: u32,
        want: u32,
        speed: f64,
    },
    /// The answer to a steal request; empty when the victim had nothing to give.
    Grant {
        pass: u32,
        tasks: Vec<Granted>,
    },
    TileDone(TileDone),
    /// Rank 0 to every rank: every tile of the pass has arrived.
    PassEnd {
        pass: u32,
    },
    /// Every rank to rank 0 after `PassEnd`, once its own steal request (if any) is answered;
    /// with adaptive sampling and a pass to come, the tallies of the blocks it holds pixels of
    /// (block, tally), from which rank 0 judges them.
    PassStats {
        pass: u32,
        counters: RankPassCounters,
        blocks: Vec<(u32, BlockTally)>,
    },
    /// A rank to another, before pass `pass`: sums it holds for a tile of the other's.
    Piece {
        pass: u32,
        piece: Piece,
    },
    /// Rank 0 to every rank: send what you hold (`Collected`); with `halt`, first stop taking
    /// tiles and finish those in flight (the frame is ending).
    Collect {
        halt: bool,
    },
    /// The answer to `Collect`: the pieces the rank holds since the pass's start, then the
    /// tiles it rendered in the pass.
    Collected {
        held: Vec<Piece>,
        fresh: Vec<Piece>,
    },
    /// Rank 0 to every rank: the frame is over (and whether the image was written).
    Finish(Result<(), String>),
    /// A rank to rank 0: a signal (its number: SIGINT 2, SIGTERM 15, SIGHUP 1) asked this
    /// rank to stop. Rank 0 ends the frame with what it has, as if it had been sent the
    /// signal itself.
    Stop {
        signal: u8,
    },
    /// Sent when a rank has sent nothing else to a peer for a while: it is alive.
    Heartbeat,
    /// Rank 0 to every rank, before the frame's first pass (`pass`, 0-based) when the
    /// workers are not all alike: time one worker of each of your `--devices` entries on its
    /// piece of `tile` at `samples`.
    Calibrate {
        pass: u32,
        tile: Tile,
        samples: Range<u32>,
    },
    /// The answer to `Calibrate`: one timing per `--devices` entry of the rank, or why the
    /// calibration failed.
    Calibrated(Result<Vec<PieceTime>, String>),
    /// A rank to rank 0: its worker `worker` (global index) failed on `tile` in `pass` and was
    /// retired (`--on-worker-error retire`); the rank's other workers render its tiles. Sent
    /// before the rank's `PassStats` of that pass, so rank 0 plans the next pass without it.
    Retired {
        pass: u32,
        worker: u32,
        tile: Tile,
        error: String,
    },
}

const TAG_HELLO: u8 = 1;
const TAG_ROSTER: u8 = 2;
const TAG_PLAN: u8 = 3;
const TAG_STEAL_REQUEST: u8 = 4;
const TAG_GRANT: u8 = 5;
const TAG_TILE_DONE: u8 = 6;
const TAG_PASS_END: u8 = 7;
const TAG_PASS_STATS: u8 = 8;
const TAG_FINISH: u8 = 9;
const TAG_HEARTBEAT: u8 = 10;
const TAG_STOP: u8 = 11;
const TAG_CALIBRATE: u8 = 12;
const TAG_CALIBRATED: u8 = 13;
const TAG_RETIRED: u8 = 14;
const TAG_PIECE: u8 = 15;
const TAG_COLLECT: u8 = 16;
const TAG_COLLECTED: u8 = 17;

// The payloads of the protocol's messages, on the shared byte writer and reader.

impl Writer {
    fn tile(&mut self, t: Tile) {
        for v in [t.x, t.y, t.w, t.h] {
            self.u32(v);
        }
    }
    fn f64s(&mut self, v: &[f64]) {
        self.len(v.len());
        for &x in v {
            self.f64(x);
        }
    }
    fn range(&mut self, r: &Range<u32>) {
        self.u32(r.start);
        self.u32(r.end);
    }
    fn pixels(&mut self, p: &[[f32; 4]]) {
        self.len(p.len());
        self.0.extend_from_slice(bytemuck::cast_slice(p));
    }
    fn f32s(&mut self, v: &[f32]) {
        self.len(v.len());
        self.0.extend_from_slice(bytemuck::cast_slice(v));
    }
    fn piece(&mut self, p: &Piece) {
        self.tile(p.rect);
        self.pixels(&p.sums);
        self.f32s(&p.odd);
    }
    fn pieces(&mut self, v: &[Piece]) {
        self.len(v.len());
        v.iter().for_each(|p| self.piece(p));
    }
    fn pass_stats(&mut self, pass: u32, c: &RankPassCounters, blocks: &[(u32, BlockTally)]) {
        self.u32(pass);
        for v in [c.requests, c.grants, c.tiles_in, c.tiles_out, c.served] {
            self.u32(v);
        }
        self.tallies(blocks);
    }
    fn tallies(&mut self, v: &[(u32, BlockTally)]) {
        self.len(v.len());
        for (b, t) in v {
            self.u32(*b);
            self.u64(t.noise);
            self.u8(u8::from(t.nan) | u8::from(t.ahead) << 1 | u8::from(t.behind) << 2);
        }
    }
    fn result<T>(&mut self, r: &Result<T, String>, ok: impl FnOnce(&mut Self, &T)) {
        match r {
            Ok(v) => {
                self.u8(1);
                ok(self, v);
            }
            Err(e) => {
                self.u8(0);
                self.str(e);
            }
        }
    }
    fn task(&mut self, t: &TaskData) {
        self.u32(t.task);
        self.tile(t.tile);
        match &t.prior {
            Some(p) => {
                self.u8(1);
                self.pixels(p);
            }
            None => self.u8(0),
        }
        self.f32s(&t.odd);
        self.f64(t.cost);
        self.f64(t.floor);
        match &t.skip {
            Some(k) => {
                self.u8(1);
                self.len(k.len());
                self.0.extend(k.iter().map(|&b| u8::from(b)));
            }
            None => self.u8(0),
        }
    }

    // The payloads of the larger messages, one helper each, mirrored by `Reader`'s.

    fn ready(&mut self, ready: &RankReady) {
        self.str(&ready.host);
        self.str(&ready.backend);
        self.u64(ready.fingerprint);
        self.len(ready.workers.len());
        for wi in &ready.workers {
            self.str(&wi.label);
            self.str(&wi.device);
            self.str(&wi.hardware);
            self.u32(wi.group);
            self.u64(wi.min_tile_work);
        }
    }
    fn plan(&mut self, p: &Plan) {
        self.u32(p.pass);
        self.u32(p.samples.start);
        self.u32(p.samples.end);
        self.u8(p.steal as u8);
        self.len(p.deques.len());
        for d in &p.deques {
            self.len(d.len());
            for &t in d {
                self.u32(t);
            }
        }
        self.len(p.tasks.len());
        for t in &p.tasks {
            self.task(t);
        }
        self.f64s(&p.speeds);
        self.u32(p.task_count);
        self.f64(p.mean_cost);
        self.len(p.sends.len());
        for s in &p.sends {
            self.tile(s.rect);
            self.u32(s.to);
        }
        self.u32(p.incoming);
    }
    fn grants(&mut self, tasks: &[Granted]) {
        self.len(tasks.len());
        for g in tasks {
            self.task(&g.data);
            self.u32(g.from_worker);
        }
    }
    fn tile_done(&mut self, d: &TileDone) {
        self.u32(d.pass);
        self.u32(d.task);
        self.u32(d.worker);
        match d.stolen_from {
            Some(v) => {
                self.u8(1);
                self.u32(v);
            }
            None => self.u8(0),
        }
        self.f64(d.start_s);
        self.f64(d.end_s);
        self.f64(d.cost_s);
    }
    fn piece_times(&mut self, times: &[PieceTime]) {
        self.len(times.len());
        for t in times {
            self.u32(t.group);
            self.str(&t.worker);
            self.tile(t.piece);
            self.range(&t.samples);
            self.f64(t.seconds);
        }
    }
}

impl Reader<'_> {
    fn tile(&mut self) -> Result<Tile, DecodeError> {
        Ok(Tile {
            x: self.u32()?,
            y: self.u32()?,
            w: self.u32()?,
            h: self.u32()?,
        })
    }
    fn f64s(&mut self) -> Result<Vec<f64>, DecodeError> {
        let n = self.len(8)?;
        (0..n).map(|_| self.f64()).collect()
    }
    fn range(&mut self) -> Result<Range<u32>, DecodeError> {
        Ok(self.u32()?..self.u32()?)
    }
    fn pixels(&mut self) -> Result<Vec<[f32; 4]>, DecodeError> {
        let n = self.len(16)?;
        let bytes = self.take(n * 16)?;
        // The buffer need not be aligned for f32: read by value.
        Ok(bytes
            .chunks_exact(16)
            .map(|c| {
                let f = |i: usize| f32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                [f(0), f(4), f(8), f(12)]
            })
            .collect())
    }
    fn f32s(&mut self) -> Result<Vec<f32>, DecodeError> {
        let n = self.len(4)?;
        let bytes = self.take(n * 4)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    fn piece(&mut self) -> Result<Piece, DecodeError> {
        Ok(Piece {
            rect: self.tile()?,
            sums: self.pixels()?,
            odd: self.f32s()?,
        })
    }
    fn pieces(&mut self) -> Result<Vec<Piece>, DecodeError> {
        // A tile and two empty lists: 24 bytes at least.
        let n = self.len(24)?;
        (0..n).map(|_| self.piece()).collect()
    }
    fn tallies(&mut self) -> Result<Vec<(u32, BlockTally)>, DecodeError> {
        let n = self.len(13)?;
        (0..n)
            .map(|_| {
                let b = self.u32()?;
                let noise = self.u64()?;
                let flags = self.u8()?;
                if flags > 7 {
                    return Err(DecodeError::Flag(flags));
                }
                let tally = BlockTally {
                    noise,
                    nan: flags & 1 != 0,
                    ahead: flags & 2 != 0,
                    behind: flags & 4 != 0,
                };
                Ok((b, tally))
            })
            .collect()
    }
    fn result<T>(
        &mut self,
        ok: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Result<T, String>, DecodeError> {
        if self.flag()? {
            Ok(Ok(ok(self)?))
        } else {
            Ok(Err(self.str()?))
        }
    }
    fn task(&mut self) -> Result<TaskData, DecodeError> {
        let task = self.u32()?;
        let tile = self.tile()?;
        let prior = if self.flag()? {
            Some(self.pixels()?)
        } else {
            None
        };
        let odd = self.f32s()?;
        let (cost, floor) = (self.f64()?, self.f64()?);
        let skip = if self.flag()? {
            let n = self.len(1)?;
            let bytes = self.take(n)?;
            Some(
                bytes
                    .iter()
                    .map(|&b| match b {
                        0 => Ok(false),
                        1 => Ok(true),
                        b => Err(DecodeError::Flag(b)),
                    })
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        };
        Ok(TaskData {
            task,
            tile,
            prior,
            odd,
            cost,
            floor,
            skip,
        })
    }

    // The payloads of the larger messages, as `Writer` writes them.

    fn ready(&mut self) -> Result<RankReady, DecodeError> {
        let host = self.str()?;
        let backend = self.str()?;
        let fingerprint = self.u64()?;
        // Three strings' lengths, the group and the tile work: 24 bytes at least.
        let n = self.len(24)?;
        let workers = (0..n)
            .map(|_| {
                Ok(WorkerInfo {
                    label: self.str()?,
                    device: self.str()?,
                    hardware: self.str()?,
                    group: self.u32()?,
                    min_tile_work: self.u64()?,
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        Ok(RankReady {
            host,
            backend,
            fingerprint,
            workers,
        })
    }
    fn plan(&mut self) -> Result<Plan, DecodeError> {
        let pass = self.u32()?;
        let samples = self.u32()?..self.u32()?;
        let steal = self.flag()?;
        let n = self.len(4)?;
        let deques = (0..n)
            .map(|_| {
                let m = self.len(4)?;
                (0..m).map(|_| self.u32()).collect()
            })
            .collect::<Result<_, DecodeError>>()?;
        let n = self.len(41)?;
        let tasks = (0..n)
            .map(|_| self.task())
            .collect::<Result<_, DecodeError>>()?;
        Ok(Plan {
            pass,
            samples,
            steal,
            deques,
            tasks,
            speeds: self.f64s()?,
            task_count: self.u32()?,
            mean_cost: self.f64()?,
            sends: {
                let n = self.len(20)?;
                (0..n)
                    .map(|_| {
                        Ok(PieceTo {
                            rect: self.tile()?,
                            to: self.u32()?,
                        })
                    })
                    .collect::<Result<_, DecodeError>>()?
            },
            incoming: self.u32()?,
        })
    }
    fn grants(&mut self) -> Result<Vec<Granted>, DecodeError> {
        let n = self.len(45)?;
        (0..n)
            .map(|_| {
                Ok(Granted {
                    data: self.task()?,
                    from_worker: self.u32()?,
                })
            })
            .collect::<Result<_, DecodeError>>()
    }
    fn tile_done(&mut self) -> Result<TileDone, DecodeError> {
        let pass = self.u32()?;
        let task = self.u32()?;
        let worker = self.u32()?;
        let stolen_from = if self.flag()? {
            Some(self.u32()?)
        } else {
            None
        };
        Ok(TileDone {
            pass,
            task,
            worker,
            stolen_from,
            start_s: self.f64()?,
            end_s: self.f64()?,
            cost_s: self.f64()?,
        })
    }
    fn piece_times(&mut self) -> Result<Vec<PieceTime>, DecodeError> {
        // group, empty name, tile, samples, seconds: at least 4+4+16+8+8 bytes.
        let n = self.len(40)?;
        (0..n)
            .map(|_| {
                Ok(PieceTime {
                    group: self.u32()?,
                    worker: self.str()?,
                    piece: self.tile()?,
                    samples: self.range()?,
                    seconds: self.f64()?,
                })
            })
            .collect()
    }
}

impl Msg {
    /// The message's bytes.
    /// The message's tag byte.
    fn tag(&self) -> u8 {
        match self {
            Msg::Hello(_) => TAG_HELLO,
            Msg::Roster(_) => TAG_ROSTER,
            Msg::Plan(_) => TAG_PLAN,
            Msg::StealRequest { .. } => TAG_STEAL_REQUEST,
            Msg::Grant { .. } => TAG_GRANT,
            Msg::TileDone(_) => TAG_TILE_DONE,
            Msg::PassEnd { .. } => TAG_PASS_END,
            Msg::PassStats { .. } => TAG_PASS_STATS,
            Msg::Piece { .. } => TAG_PIECE,
            Msg::Collect { .. } => TAG_COLLECT,
            Msg::Collected { .. } => TAG_COLLECTED,
            Msg::Finish(_) => TAG_FINISH,
            Msg::Heartbeat => TAG_HEARTBEAT,
            Msg::Stop { .. } => TAG_STOP,
            Msg::Calibrate { .. } => TAG_CALIBRATE,
            Msg::Calibrated(_) => TAG_CALIBRATED,
            Msg::Retired { .. } => TAG_RETIRED,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.u8(self.tag());
        match self {
            Msg::Hello(r) => {
                w.result(r, Writer::ready);
            }
            Msg::Roster(r) => {
                w.result(r, |w, first| w.u32(*first));
            }
            Msg::Plan(p) => {
                w.plan(p);
            }
            Msg::StealRequest { pass, want, speed } => {
                w.u32(*pass);
                w.u32(*want);
                w.f64(*speed);
            }
            Msg::Grant { pass, tasks } => {
                w.u32(*pass);
                w.grants(tasks);
            }
            Msg::TileDone(d) => {
                w.tile_done(d);
            }
            Msg::PassEnd { pass } => {
                w.u32(*pass);
            }
            Msg::PassStats {
                pass,
                counters,
                blocks,
            } => w.pass_stats(*pass, counters, blocks),
            Msg::Piece { pass, piece } => {
                w.u32(*pass);
                w.piece(piece);
            }
            Msg::Collect { halt } => {
                w.u8(u8::from(*halt));
            }
            Msg::Collected { held, fresh } => {
                w.pieces(held);
                w.pieces(fresh);
            }
            Msg::Finish(r) => {
                w.result(r, |_, ()| {});
            }
            Msg::Heartbeat => {}
            Msg::Stop { signal } => {
                w.u8(*signal);
            }
            Msg::Calibrate {
                pass,
                tile,
                samples,
            } => {
                w.u32(*pass);
                w.tile(*tile);
                w.range(samples);
            }
            Msg::Calibrated(r) => {
                w.result(r, |w, times| w.piece_times(times));
            }
            Msg::Retired {
                pass,
                worker,
                tile,
                error,
            } => {
                w.u32(*pass);
                w.u32(*worker);
                w.tile(*tile);
                w.str(error);
            }
        }
        w.0
    }

    /// Reads a message; the whole buffer must be one message.
    pub fn decode(bytes: &[u8]) -> Result<Msg, DecodeError> {
        let mut r = Reader::new(bytes);
        let msg = match r.u8()? {
            TAG_HELLO => Msg::Hello(r.result(Reader::ready)?),
            TAG_ROSTER => Msg::Roster(r.result(|r| r.u32())?),
            TAG_PLAN => Msg::Plan(r.plan()?),
            TAG_STEAL_REQUEST => Msg::StealRequest {
                pass: r.u32()?,
                want: r.u32()?,
                speed: r.f64()?,
            },
            TAG_GRANT => Msg::Grant {
                pass: r.u32()?,
                tasks: r.grants()?,
            },
            TAG_TILE_DONE => Msg::TileDone(r.tile_done()?),
            TAG_PASS_END => Msg::PassEnd { pass: r.u32()? },
            TAG_PASS_STATS => Msg::PassStats {
                pass: r.u32()?,
                counters: RankPassCounters {
                    requests: r.u32()?,
                    grants: r.u32()?,
                    tiles_in: r.u32()?,
                    tiles_out: r.u32()?,
                    served: r.u32()?,
                },
                blocks: r.tallies()?,
            },
            TAG_PIECE => Msg::Piece {
                pass: r.u32()?,
                piece: r.piece()?,
            },
            TAG_COLLECT => Msg::Collect { halt: r.flag()? },
            TAG_COLLECTED => Msg::Collected {
                held: r.pieces()?,
                fresh: r.pieces()?,
            },
            TAG_FINISH => Msg::Finish(r.result(|_| Ok(()))?),
            TAG_HEARTBEAT => Msg::Heartbeat,
            TAG_STOP => Msg::Stop { signal: r.u8()? },
            TAG_CALIBRATE => Msg::Calibrate {
                pass: r.u32()?,
                tile: r.tile()?,
                samples: r.range()?,
            },
            TAG_RETIRED => Msg::Retired {
                pass: r.u32()?,
                worker: r.u32()?,
                tile: r.tile()?,
                error: r.str()?,
            },
            TAG_CALIBRATED => Msg::Calibrated(r.result(Reader::piece_times)?),
            t => return Err(DecodeError::UnknownTag(t)),
        };
        r.finish()?;
        Ok(msg)
    }

    /// The message's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Hello(_) => "Hello",
            Msg::Roster(_) => "Roster",
            Msg::Plan(_) => "Plan",
            Msg::StealRequest { .. } => "StealRequest",
            Msg::Grant { .. } => "Grant",
            Msg::TileDone(_) => "TileDone",
            Msg::PassEnd { .. } => "PassEnd",
            Msg::PassStats { .. } => "PassStats",
            Msg::Finish(_) => "Finish",
            Msg::Heartbeat => "Heartbeat",
            Msg::Stop { .. } => "Stop",
            Msg::Calibrate { .. } => "Calibrate",
            Msg::Calibrated(_) => "Calibrated",
            Msg::Retired { .. } => "Retired",
            Msg::Piece { .. } => "Piece",
            Msg::Collect { .. } => "Collect",
            Msg::Collected { .. } => "Collected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(i: u32) -> Tile {
        Tile {
            x: i,
            y: 2 * i,
            w: 3,
            h: 1,
        }
    }

    fn samples() -> Vec<Msg> {
        let px = vec![[1.0, -0.0, f32::MIN_POSITIVE, 3.5e30], [0.25; 4], [7.0; 4]];
        vec![
            Msg::Hello(Ok(RankReady {
                host: "node-ä".into(),
                backend: "CPU backend".into(),
                fingerprint: 0xdead_beef_0123_4567,
                workers: vec![
                    WorkerInfo {
                        label: "cpu#0".into(),
                        device: "cpu".into(),
                        hardware: "cpu: AMD EPYC 7B13 64-Core Processor".into(),
                        group: 0,
                        min_tile_work: 0,
                    },
                    WorkerInfo {
                        label: "gpu0/s1".into(),
                        device: "gpu0".into(),
                        hardware: "gpu: NVIDIA H100 80GB HBM3, 132 SMs".into(),
                        group: 1,
                        min_tile_work: 540_672,
                    },
                ],
            })),
            Msg::Hello(Err("scene.obj: no such file".into())),
            Msg::Roster(Ok(12)),
            Msg::Roster(Err("rank 3 could not load".into())),
            Msg::Plan(Plan {
                pass: 2,
                samples: 4..8,
                steal: true,
                deques: vec![vec![3, 1], vec![], vec![7]],
                tasks: vec![
                    TaskData {
                        task: 3,
                        tile: tile(3),
                        prior: Some(px.clone()),
                        odd: vec![0.5, -1.0, 3.0e-39],
                        cost: 2.0,
                        floor: 1e300,
                        skip: None,
                    },
                    TaskData {
                        task: 1,
                        tile: tile(1),
                        prior: None,
                        odd: Vec::new(),
                        cost: -0.0,
                        floor: 1.5,
                        skip: Some((0..tile(1).pixel_count()).map(|i| i % 3 == 1).collect()),
                    },
                ],
                speeds: vec![1.5, 0.0125, f64::INFINITY],
                task_count: 8,
                mean_cost: 1e-300,
                sends: vec![
                    PieceTo {
                        rect: tile(2),
                        to: 3,
                    },
                    PieceTo {
                        rect: tile(6),
                        to: 0,
                    },
                ],
                incoming: 9,
            }),
            Msg::StealRequest {
                pass: 1,
                want: 16,
                speed: 0.25,
            },
            Msg::Grant {
                pass: 1,
                tasks: vec![Granted {
                    data: TaskData {
                        task: 9,
                        tile: tile(9),
                        prior: Some(px.clone()),
                        odd: Vec::new(),
                        cost: 0.25,
                        floor: f64::INFINITY,
                        skip: Some(vec![true, false, true]),
                    },
                    from_worker: 33,
                }],
            },
            Msg::Grant {
                pass: 0,
                tasks: vec![],
            },
            Msg::TileDone(TileDone {
                pass: 0,
                task: 5,
                worker: 2,
                stolen_from: Some(7),
                start_s: 0.125,
                end_s: 1.0 / 3.0,
                cost_s: 0.2,
            }),
            Msg::PassEnd { pass: 4 },
            Msg::PassStats {
                pass: 4,
                counters: RankPassCounters {
                    requests: 1,
                    grants: 2,
                    tiles_in: 3,
                    tiles_out: 4,
                    served: 5,
                },
                blocks: Vec::new(),
            },
            Msg::PassStats {
                pass: 5,
                counters: RankPassCounters::default(),
                blocks: vec![
                    (
                        3,
                        BlockTally {
                            noise: u64::MAX - 7,
                            nan: true,
                            ahead: false,
                            behind: true,
                        },
                    ),
                    (0, BlockTally::default()),
                ],
            },
            Msg::Piece {
                pass: 3,
                piece: Piece {
                    rect: tile(1),
                    sums: px.clone(),
                    odd: vec![1.0, 2.0, -0.0],
                },
            },
            Msg::Collect { halt: true },
            Msg::Collect { halt: false },
            Msg::Collected {
                held: vec![Piece {
                    rect: tile(1),
                    sums: px,
                    odd: Vec::new(),
                }],
                fresh: Vec::new(),
            },
            Msg::Finish(Ok(())),
            Msg::Finish(Err("out.exr: disk full".into())),
            Msg::Heartbeat,
            Msg::Stop { signal: 15 },
            Msg::Calibrate {
                pass: 2,
                tile: tile(4),
                samples: 0..16,
            },
            Msg::Calibrated(Ok(vec![
                PieceTime {
                    group: 0,
                    worker: "cpu#0".into(),
                    piece: tile(5),
                    samples: 0..4,
                    seconds: 0.003,
                },
                PieceTime {
                    group: 1,
                    worker: String::new(),
                    piece: tile(4),
                    samples: 0..16,
                    seconds: 1.0 / 7.0,
                },
            ])),
            Msg::Calibrated(Err("calibrating worker gpu0/s0: device lost".into())),
            Msg::Retired {
                pass: 2,
                worker: 5,
                tile: tile(3),
                error: "worker gpu0/s1 (optix:0/w1) failed on tile x=0 y=0: device lost".into(),
            },
        ]
    }

    #[test]
    fn every_message_round_trips_bit_for_bit() {
        for m in samples() {
            let bytes = m.encode();
            let back = Msg::decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
            // Compare encodings too: PartialEq on floats would accept -0.0 for 0.0.
            assert_eq!(back.encode(), bytes, "{}", m.name());
            assert_eq!(back, m);
        }
    }

    #[test]
    fn short_corrupt_or_padded_buffers_are_errors() {
        for m in samples() {
            let bytes = m.encode();
            for cut in 0..bytes.len() {
                assert!(
                    Msg::decode(&bytes[..cut]).is_err(),
                    "{} cut at {cut}",
                    m.name()
                );
            }
            let mut long = bytes.clone();
            long.push(0);
            assert_eq!(Msg::decode(&long), Err(DecodeError::Trailing(1)));
        }
        assert_eq!(Msg::decode(&[200]), Err(DecodeError::UnknownTag(200)));
        // A huge list length is refused before anything is allocated.
        let mut b = vec![TAG_GRANT, 0, 0, 0, 0];
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Msg::decode(&b),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
