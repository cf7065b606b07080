//! The OptiX backend (being written).
