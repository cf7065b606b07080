//! What a frame rendered by several processes (MPI ranks) adds to its report: the ranks, which
//! rank each worker ran on, each pass's steals across ranks and the stop request that ended
//! the frame early.
//!
//! Plain data, below the frame's [`FrameReport`](super::report::FrameReport) that carries it
//! (which rank a worker is on names its device in the statistics): rank 0's master fills it,
//! `super::rank_report` prints it, and the ranks send [`RankPassCounters`] to rank 0.

/// One rank of the job.
#[derive(Clone, Debug, PartialEq)]
pub struct RankInfo {
    pub host: String,
    pub backend: String,
    /// What its workers run on, each kind once ("cpu: AMD EPYC 7B13"); empty if not known.
    pub hardware: String,
    pub workers: usize,
}

/// The ranks of a cluster render.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterReport {
    pub ranks: Vec<RankInfo>,
    /// The rank of each (global) worker.
    pub worker_rank: Vec<usize>,
    /// Each pass's counters, one per rank.
    pub counters: Vec<Vec<RankPassCounters>>,
    /// The stop request that ended the frame early, if one did.
    pub stop: Option<StopRequest>,
}

/// A signal that asked a rank to stop the job, as rank 0 first heard of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopRequest {
    pub rank: usize,
    /// The signal's number: SIGINT 2, SIGTERM 15, SIGHUP 1.
    pub signal: u8,
}

/// A rank's cross-rank stealing during one pass, sent to rank 0 when the pass ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankPassCounters {
    /// Steal requests this rank sent.
    pub requests: u32,
    /// Of those, how many came back with tiles.
    pub grants: u32,
    /// Tiles this rank received from other ranks.
    pub tiles_in: u32,
    /// Tiles this rank gave to other ranks.
    pub tiles_out: u32,
    /// Steal requests this rank answered.
    pub served: u32,
}
