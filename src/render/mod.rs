//! What every backend shares: render settings, tiles, the accumulation film, the interface a
//! backend implements ([`TileRenderer`]) and image output.
//!
//! A backend renders *tiles* (a rectangle of the image and a range of sample indices), never
//! whole frames: the tile scheduler hands tiles to workers, CPU threads or GPU streams alike.
//! Because a sample's random numbers depend only on (pixel, sample, seed), and a pixel's
//! samples are always added in sample order, the image does not depend on who rendered which
//! tile or when.

pub mod film;
pub mod output;
pub mod sampler;

use std::ops::Range;

use glam::Vec3;

use crate::scene::camera::CameraFrame;

pub use film::Film;
pub use sampler::Sampler;

/// What a render computes, independent of the backend.
#[derive(Clone, Copy, Debug)]
pub struct RenderSettings {
    pub width: u32,
    pub height: u32,
    /// Samples per pixel.
    pub spp: u32,
    /// The longest path, in segments from the camera (1 = direct visibility of emitters only).
    pub max_depth: u32,
    pub seed: u64,
    pub camera: CameraFrame,
}

/// A rectangle of the image, in pixels, origin top-left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tile {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

impl Tile {
    pub fn pixel_count(&self) -> usize {
        self.w as usize * self.h as usize
    }

    /// Equal tiles of at most `size` x `size` pixels covering a `width` x `height` image, in
    /// row-major order.
    pub fn grid(width: u32, height: u32, size: u32) -> Vec<Tile> {
        let size = size.max(1);
        let mut tiles = Vec::new();
        for y in (0..height).step_by(size as usize) {
            for x in (0..width).step_by(size as usize) {
                tiles.push(Tile {
                    x,
                    y,
                    w: size.min(width - x),
                    h: size.min(height - y),
                });
            }
        }
        tiles
    }
}

/// The interface every backend implements: add samples to the pixels of one tile.
///
/// `accum` is the tile's slice of the film, row-major `tile.w * tile.h` entries of
/// `[r, g, b, n]` (radiance sums and the sample count). The renderer adds, for every pixel in
/// row-major order and for every sample index in `samples` in increasing order, that sample's
/// radiance. Callers keep a pixel's sample ranges in increasing order (pass 1 before pass 2),
/// which is all that bit-identical images need.
pub trait TileRenderer: Send + Sync {
    /// A short name for logs and statistics ("cpu", "optix:0", ...).
    fn name(&self) -> String;

    /// Renders `samples` of every pixel of `tile` into `accum`.
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()>;
}

/// Luminance of linear Rec.709 RGB.
#[inline]
pub fn luminance(c: Vec3) -> f32 {
    0.2126 * c.x + 0.7152 * c.y + 0.0722 * c.z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_every_pixel_once() {
        for (w, h, s) in [(64, 64, 16), (100, 37, 16), (1, 1, 8), (33, 65, 32)] {
            let mut seen = vec![0u8; (w * h) as usize];
            for t in Tile::grid(w, h, s) {
                for y in t.y..t.y + t.h {
                    for x in t.x..t.x + t.w {
                        seen[(y * w + x) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{w}x{h}/{s}");
        }
    }
}
