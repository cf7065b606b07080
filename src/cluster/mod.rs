//! Rendering one frame with several processes (MPI ranks), on one machine or many.
//!
//! Every rank loads the scene and builds its own renderers; its workers come from its own
//! `--devices`. Rank 0 makes the cost map and plans each pass exactly as a single process
//! would, over the workers of all ranks in rank order, so each rank starts with one contiguous
//! run of tiles of about equal estimated cost; the plan is sent to every rank. Within a rank,
//! workers take and steal tiles as in one process ([`crate::sched::policy`]); a rank whose
//! deques run dry asks a random other rank for tiles from its cheap end ([`policy`]). Finished
//! tiles go to rank 0, which writes the image: a sample depends only on (pixel, sample,
//! spp, seed) and each tile's pass starts from the film's sums, so the image is the
//! single-process image bit for bit.
//!
//! - [`protocol`]: the messages and their wire format;
//! - [`transport`]: the nonblocking point-to-point transport the protocol runs on, and an
//!   in-process channel transport for tests;
//! - [`node`]: one rank: the handshake, its workers, the progress loop;
//! - `master`: rank 0's master role: the passes' plans, the film, the frame's end;
//! - [`policy`]: stealing across ranks (shared with the simulator);
//! - [`sim`]: the discrete-event model of a cluster for `schedule-sim --ranks`;
//! - [`report`]: per-rank statistics (their data, [`crate::sched::ranks`], lie below the
//!   frame's report that carries them);
//! - [`fingerprint`]: the hash of scene and settings that ranks compare before a frame;
//! - [`launcher`]: whether an MPI launcher started this process, and how many ranks (read
//!   from the environment, in every build);
//! - `mpi` (feature `mpi`): the MPI transport, over the `mpi` crate (rsmpi).
//!
//! docs/cluster.md describes the protocol, with a sequence sketch.

pub mod fingerprint;
pub mod launcher;
mod master;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod node;
pub mod policy;
pub mod protocol;
pub mod report;
pub mod sim;
pub mod transport;

pub use node::{
    run_node, ClusterError, ClusterJob, Discard, FaultHook, FaultKind, FrameSink, PlanInputs,
    RankSetup, Timing,
};
pub use transport::{ChannelTransport, Transport, TransportError};
