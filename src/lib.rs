//! gasworks: a path tracer built on NVIDIA OptiX, with a CPU reference backend.
//!
//! The crate is laid out along its architecture, each layer importing only those above it
//! in this list:
//! - [`colour`], [`splitmix`], [`fnv`], [`wording`], [`console`], [`bench_report`], [`nvtx`]:
//!   small helpers below every layer (luminance, the SplitMix64 and FNV-1a hashes, how counts
//!   read, what goes to stderr, benchmark tables, NVTX ranges for Nsight Systems);
//! - [`scene`]: the scene model (OBJ groups kept as they are), the OBJ/MTL loader, the camera
//!   and the procedural scene generators;
//! - [`render`]: what backends share: settings, tiles, the film, random numbers, image output;
//! - [`cpu`]: the CPU backend, a two-level BVH and a path tracer, the reference for the GPU;
//! - [`optix`]: the OptiX backend: raw ABI, safe wrappers, batched GAS builds, pipelines;
//! - [`sched`]: the cost map and the tile scheduler that spreads a frame over workers and
//!   ranks (one process is one rank);
//! - [`backend`]: choosing a backend, the one place that knows every backend;
//! - [`session`]: a render end to end, as one library call;
//! - [`cluster`]: the MPI transport that makes processes the ranks of one frame;
//! - [`cli`]: the `gasworks` command line, which parses flags and prints.
//! - [`fault_injection`]: test hooks switched on by environment variables, compiled only with
//!   the cargo feature `fault-injection`.

// The module docs explain the architecture down to private items (the BVH's node layout, the
// loader's stages); they are meant to be read with `cargo doc --document-private-items`, which
// CI builds with warnings as errors. Links to private items are therefore intended.
#![allow(rustdoc::private_intra_doc_links)]

pub mod backend;
pub mod bench_report;
pub mod cli;
pub mod cluster;
pub mod colour;
pub mod console;
pub mod cpu;
pub mod fault_injection;
pub mod fnv;
pub mod nvtx;
pub mod optix;
pub mod render;
pub mod scene;
pub mod sched;
pub mod session;
pub mod splitmix;
pub mod wording;

/// The git commit this binary was built from (`-dirty` when the tree had local changes), or
/// "unknown" outside a git checkout.
pub const GIT_COMMIT: &str = env!("GASWORKS_GIT_COMMIT");
