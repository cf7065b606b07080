//! The OptiX backend.
//!
//! - [`plan`]: which GASes are built, on which stream, at which scratch and output offsets (pure);

pub mod plan;
