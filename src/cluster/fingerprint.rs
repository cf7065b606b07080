//! A hash of everything that decides the image, compared across ranks before a frame: ranks
//! that loaded different scene files (a stale copy on one node) or got different settings
//! would otherwise make one wrong image without a word.
//!
//! [`crate::fnv`] over the bytes, so the value depends on nothing but the data; the scene's
//! part is its [`content_hash`].

use crate::fnv::Fnv;
use crate::render::RenderSettings;
#[cfg(doc)]
use crate::scene::content_hash::content_hash;
use crate::scene::Scene;
use crate::sched::SchedConfig;

/// The fingerprint of a frame: the scene's geometry, materials and textures (`content`, its
/// [`content_hash`], which the caller computes once), its environment, the render settings,
/// and the schedule's options that shape the tiles and passes (not `--devices`, which may
/// differ from rank to rank), plus the protocol version.
pub fn fingerprint(
    scene: &Scene,
    content: u64,
    settings: &RenderSettings,
    config: &SchedConfig,
) -> u64 {
    let mut h = Fnv::default();
    h.field(&super::protocol::PROTOCOL_VERSION.to_le_bytes());
    h.field(format!("{settings:?}").as_bytes());
    h.field(
        format!(
            "{:?} {:?} {} {:?} {} {:?}",
            config.strategy,
            config.tiles,
            config.steal,
            config.pass_spp,
            config.costmap_scale.to_bits(),
            config.cost_model
        )
        .as_bytes(),
    );
    h.field(&content.to_le_bytes());
    h.field(format!("{:?} {}", scene.environment, scene.two_sided_lights).as_bytes());
    h.finish()
}
