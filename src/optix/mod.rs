//! The OptiX backend.
//!
//! Layers, from the bottom:
//! - [`sys`]: the raw OptiX ABI (types, constants, function tables for ABI 105 and 87),
//!   declarations only. The only OptiX FFI declarations in the crate.
//! - [`error`]: typed errors naming the failing call and the driver's error name.
//! - [`loader`]: loads `libnvoptix.so.1`, asks it for a function table (newest ABI first) and
//!   checks the entries gasworks calls: the one dispatch ([`loader::Api`]).
//! - [`cuda`]: the CUDA driver API through cudarc: GPU discovery, streams, events, device
//!   buffers.
//! - [`context`]: the OptiX device context and the acceleration-structure calls.
//! - [`pipeline`]: modules, program groups, pipelines, shader binding tables, launches.
//! - [`plan`]: which GASes are built, on which stream, at which scratch and output offsets (pure).
//! - [`accel`]: the batched multi-stream GAS builds and the IAS over them.
//! - [`raycast`]: a minimal pipeline casting a batch of rays: the check of the structures.
//! - [`pathtracer`]: the GPU path tracer (tiles rendered with `ptx/pathtrace.cu`).
//! - [`watchdog`]: a thread that ends the process with a message when driver calls watched
//!   (the GAS batches') do not return.

pub mod accel;
pub mod bench;
pub mod context;
pub mod cuda;
pub mod error;
pub mod loader;
pub mod pathtracer;
pub mod pipeline;
pub mod plan;
#[cfg(test)]
mod ptx_calls;
pub mod raycast;
pub mod sys;
pub mod watchdog;

pub use context::{ContextOptions, DeviceContext};
pub use cuda::{probe, DeviceBuffer, DeviceSlice, Event, Gpu, GpuInfo, Stream};
pub use error::{CudaError, OptixError};
pub use loader::AbiRequest;
pub use pipeline::{
    launch_and_wait, Module, ModuleCompileOptions, Pipeline, PipelineCompileOptions, ProgramGroup,
    SbtRecord, ShaderBindingTable,
};
pub use sys::Abi;
