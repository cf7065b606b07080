//! Procedural scenes (being written).
