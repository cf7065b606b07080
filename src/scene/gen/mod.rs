//! Procedural scenes and the OBJ/MTL writer that saves them.
//!
//! - [`cornell()`]: the classic Cornell box (published dimensions), with [`cornell_camera`];
//! - [`sponza_like()`]: Crytek Sponza's heavy-tailed group sizes in an atrium, the benchmark
//!   scene of the batched GAS builds;
//! - [`toystore()`] / [`toystore_groups`]: shelves of unique toys, from ten thousand to a
//!   hundred million triangles, streamable group by group;
//! - [`sky::sky`]: not a scene but the light around one, a daylight sky with a sun as an
//!   environment map (`render --env-map`).
//!
//! Every generator is a pure function of its parameters and seed, and makes no degenerate
//! triangle. The scenes open toward +Z, where the default camera (looking along -Z) and other
//! tools' cameras see in; each file also carries a camera hint chosen for it (the Cornell
//! box's is its published camera), which `render` uses unless told otherwise.

mod cornell;
pub mod mesh;
mod rng;
pub mod sky;
mod sponza_like;
mod textures;
mod toystore;
mod writer;

pub use cornell::{cornell, cornell_camera, CORNELL_LIGHT_Y};
pub use sponza_like::{
    group_sizes as sponza_like_group_sizes, sponza_like, sponza_like_camera, SPONZA_LIKE_GROUPS,
    SPONZA_LIKE_MAX_TRIANGLES, SPONZA_LIKE_TRIANGLES,
};
pub use toystore::{
    check_shelves, toystore, toystore_camera, toystore_groups, toystore_materials,
    toystore_triangles, toystore_walk, MAX_SHELVES, TRIANGLES_PER_SHELF,
};
pub use writer::{write_obj, ObjWriter, WriteError, Written};

/// Why a scene could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{0}")]
    BadParameter(String),
    #[error(transparent)]
    Write(#[from] WriteError),
}
