//! The OptiX backend.
//!
//! - [`plan`]: which GASes are built, on which stream, at which scratch and output offsets (pure);
//! - [`accel`]: the batched multi-stream GAS builds and the IAS over them.

pub mod accel;
pub mod plan;
