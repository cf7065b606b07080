//! The CPU backend (being written).
pub mod bvh;
pub mod material;
pub mod sampling;

use crate::render::{RenderSettings, Tile, TileRenderer};
use crate::scene::Scene;
use std::ops::Range;

pub struct CpuBackend {}

impl CpuBackend {
    pub fn new(_scene: &Scene, _settings: &RenderSettings) -> CpuBackend {
        CpuBackend {}
    }
}

impl TileRenderer for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }
    fn render_tile(&self, _t: Tile, _s: Range<u32>, _a: &mut [[f32; 4]]) -> anyhow::Result<()> {
        anyhow::bail!("not yet")
    }
}
