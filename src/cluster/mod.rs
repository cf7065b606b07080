//! Rendering one frame with several processes (MPI ranks), on one machine or many.
//!
//! The scheduler runs a frame as ranks that differ only in their transport
//! ([`crate::sched::rank`]): one process alone is rank 0 of one; under `mpirun` every process
//! is a rank, and this module gives them what they need past one process:
//! - `mpi` (feature `mpi`): the MPI transport, over the `mpi` crate (rsmpi);
//! - [`launcher`]: whether an MPI launcher started this process, and how many ranks (read
//!   from the environment, in every build).
//!
//! Every rank loads the scene and builds its own renderers; its workers come from its own
//! `--devices`. Rank 0 makes the cost map and plans each pass exactly as a single process
//! would, over the workers of all ranks in rank order, so each rank starts with one contiguous
//! run of tiles of about equal estimated cost. Within a rank, workers take and steal tiles as
//! in one process; a rank whose deques run dry asks a random other rank for tiles from its
//! cheap end ([`crate::sched::rank_policy`]). Finished tiles go to rank 0, which writes the
//! image: a sample depends only on (pixel, sample, spp, seed) and each tile's pass starts
//! from the film's sums, so the image is the single-process image bit for bit.
//!
//! docs/cluster.md describes the protocol, with a sequence sketch.

pub mod geometry;
pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
