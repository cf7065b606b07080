//! gasworks: a path tracer built on NVIDIA OptiX, with a CPU reference backend.
//!
//! The crate is laid out along its architecture:
//! - [`scene`]: the scene model (OBJ groups kept as they are), the OBJ/MTL loader, the camera
//!   and the procedural scene generators;
//! - [`render`]: what backends share: settings, tiles, the film, random numbers, image output;
//! - [`cpu`]: the CPU backend, a two-level BVH and a path tracer, the reference for the GPU;
//! - [`optix`]: the OptiX backend: raw ABI, safe wrappers, batched GAS builds, pipelines;
//! - [`nvtx`]: NVTX ranges for Nsight Systems (no CUDA toolkit needed);
//! - [`sched`]: the cost map and the tile scheduler that spreads work over devices;
//! - [`cluster`]: one frame over several processes (MPI ranks), tiles stolen across ranks;
//! - [`cli`]: the `gasworks` command line;
//! - [`fault_injection`]: test hooks switched on by environment variables, compiled only with
//!   the cargo feature `fault-injection`;
//! - [`wording`]: how counts read in messages ("1 group", "2 groups").

// The module docs explain the architecture down to private items (the BVH's node layout, the
// loader's stages); they are meant to be read with `cargo doc --document-private-items`, which
// CI builds with warnings as errors. Links to private items are therefore intended.
#![allow(rustdoc::private_intra_doc_links)]

pub mod backend;
pub mod bench_report;
pub mod cli;
pub mod cluster;
pub mod cpu;
pub mod fault_injection;
pub mod fnv;
pub mod nvtx;
pub mod optix;
pub mod render;
pub mod scene;
pub mod sched;
pub mod stderr_line;
pub mod wording;

/// The git commit this binary was built from (`-dirty` when the tree had local changes), or
/// "unknown" outside a git checkout.
pub const GIT_COMMIT: &str = env!("GASWORKS_GIT_COMMIT");
