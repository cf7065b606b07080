//! What a frame's ranks are given and what they give back: the job every rank runs, the
//! setup each brings to the handshake, rank 0's plan inputs and outputs ([`FrameSink`]), and
//! why a rank's part failed. One process rendering alone is a job of one rank.

use std::sync::atomic::AtomicU8;
use std::time::{Duration, Instant};

use super::costmap::{CostMap, EstimateStats};
use super::fault::FaultHook;
use super::protocol::{RankReady, WorkerInfo};
use super::raster::RasterStats;
use super::transport::TransportError;
use super::workers::Worker;
use super::{Frame, Resume, SchedConfig};
use crate::render::{Film, RenderSettings};

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

impl Timing {
    /// The clocks of a rank that renders alone: no peer to hear from, so the loop only wakes
    /// for its workers' tiles and, this often, to look at the stop flag.
    pub fn alone() -> Timing {
        Timing {
            poll: Duration::from_millis(20),
            ..Timing::default()
        }
    }
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

/// What every rank is asked to do (the same on every rank).
#[derive(Clone, Debug)]
pub struct FrameJob<'a> {
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
    /// SIGTERM 15, SIGHUP 1; any other non-zero value where no signal did), 0 before any. On
    /// rank 0 no new tile starts, the tiles in flight finish, and the frame ends with what has
    /// arrived (the film and a resume point go to [`FrameSink::finish`]); another rank passes
    /// the request on to rank 0 ([`super::protocol::Msg::Stop`]) and goes on until rank 0 says the frame is
    /// over.
    pub stop: &'a AtomicU8,
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
    /// Whether the cost map was made before the frame (beside the GPU's setup), for the
    /// report.
    pub estimated_before: bool,
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
    /// Among several ranks, before a pass boundary's film or, `within_pass`, a tile's is
    /// offered: whether this sink will want it (a checkpoint is due or asked for), since the
    /// ranks hold it and it is gathered only then.
    fn film_wanted(&mut self, _within_pass: bool) -> bool {
        false
    }
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
pub enum FrameError {
    /// A rank could not get ready (scene, backend, output); every rank reports the same text.
    #[error("{0}")]
    Setup(String),
    /// A worker of a rank failed on a tile (and could not be retired), or a rank's last
    /// worker did. A frame rendered by one rank alone says the message only.
    #[error("{}", rank_failed(*rank, *ranks, message))]
    RankFailed {
        rank: usize,
        ranks: usize,
        message: String,
    },
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

impl FrameError {
    /// Whether the whole job must be ended (MPI_Abort): the other ranks cannot finish the
    /// frame cleanly. Setup and output failures are agreed on by every rank, which then
    /// leave normally.
    pub(super) fn aborts_job(&self) -> bool {
        !matches!(
            self,
            FrameError::Setup(_)
                | FrameError::Output(_)
                | FrameError::Transport(TransportError::Aborted { .. })
        )
    }
}

/// A rank's failure, as it is said: "rank 1 failed: ..." among several ranks, the message
/// alone for one process.
fn rank_failed(rank: usize, ranks: usize, message: &str) -> String {
    if ranks > 1 {
        format!("rank {rank} failed: {message}")
    } else {
        message.to_string()
    }
}
