//! A hash of everything that decides the image, compared across ranks before a frame: ranks
//! that loaded different scene files (a stale copy on one node) or got different settings
//! would otherwise make one wrong image without a word.
//!
//! FNV-1a over the bytes, so the value depends on nothing but the data (not on the Rust
//! release or the process, as `std`'s hasher may).

use crate::render::RenderSettings;
use crate::scene::Scene;
use crate::sched::SchedConfig;

struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// A length-prefixed field, so that ("ab", "c") and ("a", "bc") differ.
    fn field(&mut self, b: &[u8]) {
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b);
    }
}

/// The fingerprint of a frame: the scene's geometry, materials, textures and environment,
/// the render settings, and the schedule's options that shape the tiles and passes (not
/// `--devices`, which may differ from rank to rank), plus the protocol version.
pub fn fingerprint(scene: &Scene, settings: &RenderSettings, config: &SchedConfig) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
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
    for g in &scene.groups {
        h.field(g.name.as_bytes());
        h.field(bytemuck::cast_slice(&g.positions));
        h.field(bytemuck::cast_slice(&g.normals));
        h.field(bytemuck::cast_slice(&g.uvs));
        h.field(bytemuck::cast_slice(&g.indices));
        h.field(bytemuck::cast_slice(&g.face_materials));
    }
    for m in &scene.materials {
        h.field(format!("{m:?}").as_bytes());
    }
    for t in &scene.textures {
        h.field(&[t.width.to_le_bytes(), t.height.to_le_bytes()].concat());
        h.field(bytemuck::cast_slice(&t.texels));
    }
    h.field(format!("{:?}", scene.environment).as_bytes());
    h.0
}
