//! Procedural textures for the generated scenes: stone patterns, a height map of their joints
//! and a cut-out mask, made as 8-bit images and decoded exactly as the loader decodes their
//! PNG files ([`crate::scene::obj::colour_texture_of`], [`crate::scene::obj::grey_texture_of`]),
//! so that a generated scene and the files `gasworks gen` writes for it hold the same texels.
//!
//! They make the sponza-like benchmark scene textured where Crytek Sponza is: colour maps on
//! the floor and walls, a height map on the floor (bump mapping) and cut-out banners (an
//! opacity mask, so the GPU's any-hit program runs, as on Sponza's plants and chains).
//! Tileable: each pattern repeats seamlessly, as the scene's UVs repeat it.

use image::{GrayImage, Luma, Rgb, RgbImage};

use super::rng::Rng;
use crate::scene::Texture;

/// Side of the floor and wall colour maps, in texels.
const COLOUR_SIDE: u32 = 256;
/// Side of the floor's height map, in texels.
const HEIGHT_SIDE: u32 = 128;
/// Flagstones per side of one tile of the floor's maps.
const FLAGSTONES: u32 = 4;
/// The banners' maps, in texels (taller than wide, as the banners are).
const BANNER_SIZE: (u32, u32) = (64, 128);

/// `count` random tones in `[lo, hi)`, one per stone or block.
fn tones(rng: &mut Rng, count: u32, lo: f32, hi: f32) -> Vec<f32> {
    (0..count).map(|_| rng.range(lo, hi)).collect()
}

/// An sRGB byte of `value` in [0, 1].
fn byte(value: f32) -> u8 {
    (value.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// Distance in texels from `t` (a texel's centre, in [0, `period`)) to the nearer edge of
/// its cell of `period` texels.
fn edge_distance(t: u32, period: u32) -> f32 {
    let centre = t as f32 + 0.5;
    centre.min(period as f32 - centre)
}

/// The floor's flagstones: [`FLAGSTONES`] x [`FLAGSTONES`] stones per tile, each its own
/// tone, speckled, between dark joints 4 texels wide.
pub fn flagstone_colours(rng: &mut Rng) -> Texture {
    let stone = COLOUR_SIDE / FLAGSTONES;
    let tone = tones(rng, FLAGSTONES * FLAGSTONES, 0.72, 1.0);
    let image = RgbImage::from_fn(COLOUR_SIDE, COLOUR_SIDE, |x, y| {
        let speckle = rng.range(-0.05, 0.05);
        let joint = edge_distance(x % stone, stone).min(edge_distance(y % stone, stone)) < 2.0;
        let value = if joint {
            0.3 + speckle
        } else {
            tone[((y / stone) * FLAGSTONES + x / stone) as usize] + speckle
        };
        Rgb([byte(value), byte(value * 0.97), byte(value * 0.92)])
    });
    super::super::obj::colour_texture_of("generated: flagstone colours", image)
}

/// The flagstones' heights on the same layout as [`flagstone_colours`]: joints at 0, each
/// stone rising to 1 over a bevel 3 texels wide, so that `-bm` tilts the stones' edges.
pub fn flagstone_heights() -> Texture {
    let stone = HEIGHT_SIDE / FLAGSTONES;
    let image = GrayImage::from_fn(HEIGHT_SIDE, HEIGHT_SIDE, |x, y| {
        let d = edge_distance(x % stone, stone).min(edge_distance(y % stone, stone));
        Luma([byte((d - 1.0) / 3.0)])
    });
    super::super::obj::grey_texture_of("generated: flagstone heights", image)
}

/// Ashlar for the walls: courses of blocks twice as long as high, every other course shifted
/// by half a block, each block its own tone, with light mortar joints.
pub fn ashlar_colours(rng: &mut Rng) -> Texture {
    let (courses, per_course) = (8u32, 4u32);
    let (high, long) = (COLOUR_SIDE / courses, COLOUR_SIDE / per_course);
    let tone = tones(rng, courses * per_course, 0.7, 1.0);
    let image = RgbImage::from_fn(COLOUR_SIDE, COLOUR_SIDE, |x, y| {
        let course = y / high;
        let shifted = (x + (course % 2) * long / 2) % COLOUR_SIDE;
        let block = course * per_course + shifted / long;
        let speckle = rng.range(-0.04, 0.04);
        let joint = edge_distance(shifted % long, long).min(edge_distance(y % high, high)) < 1.5;
        let value = if joint {
            0.9 + speckle
        } else {
            tone[block as usize] + speckle
        };
        Rgb([byte(value), byte(value * 0.93), byte(value * 0.8)])
    });
    super::super::obj::colour_texture_of("generated: ashlar colours", image)
}

/// Where a banner is cut away, at `(u, v)` in [0, 1]^2 (v up): a swallowtail notch at the
/// bottom and three round holes in a row across it.
pub fn banner_is_cut(u: f32, v: f32) -> bool {
    let notch = v < 0.25 * (1.0 - (2.0 * u - 1.0).abs());
    let hole = [0.25, 0.5, 0.75].iter().any(|&cu| {
        let (du, dv) = ((u - cu) * 0.5, v - 0.62);
        du * du + dv * dv < 0.045 * 0.045
    });
    notch || hole
}

/// A banner's cut-out mask ([`banner_is_cut`]): 0 where it is cut away, 1 elsewhere.
pub fn banner_mask() -> Texture {
    let (w, h) = BANNER_SIZE;
    let image = GrayImage::from_fn(w, h, |x, y| {
        let (u, v) = (
            (x as f32 + 0.5) / w as f32,
            1.0 - (y as f32 + 0.5) / h as f32,
        );
        Luma([if banner_is_cut(u, v) { 0 } else { 255 }])
    });
    super::super::obj::grey_texture_of("generated: banner mask", image)
}

/// A banner's pattern (its colour is the material's Kd): a dark border and a dark lozenge.
pub fn banner_pattern() -> Texture {
    let (w, h) = BANNER_SIZE;
    let image = RgbImage::from_fn(w, h, |x, y| {
        let border = x < 4 || x >= w - 4 || y < 4;
        let (u, v) = (
            (x as f32 + 0.5) / w as f32,
            1.0 - (y as f32 + 0.5) / h as f32,
        );
        let lozenge = ((u - 0.5).abs() * 2.0 + (v - 0.82).abs() * 4.0) < 0.35;
        let value = if border || lozenge { 0.35 } else { 1.0 };
        Rgb([byte(value); 3])
    });
    super::super::obj::colour_texture_of("generated: banner pattern", image)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A texel of `t`'s first channel at column `x`, row `y`.
    fn at(t: &Texture, x: u32, y: u32) -> f32 {
        t.texels[(y * t.width + x) as usize][0]
    }

    #[test]
    fn patterns_are_a_function_of_the_seed() {
        let a = flagstone_colours(&mut Rng::new(1, 3));
        assert_eq!(a.texels, flagstone_colours(&mut Rng::new(1, 3)).texels);
        assert_ne!(a.texels, flagstone_colours(&mut Rng::new(2, 3)).texels);
        let w = ashlar_colours(&mut Rng::new(1, 3));
        assert_eq!(w.texels, ashlar_colours(&mut Rng::new(1, 3)).texels);
    }

    #[test]
    fn flagstone_heights_are_zero_in_the_joints_and_one_on_the_stones() {
        let h = flagstone_heights();
        let stone = HEIGHT_SIDE / FLAGSTONES;
        assert_eq!(h.texels.len() as u32, HEIGHT_SIDE * HEIGHT_SIDE);
        for k in 0..FLAGSTONES {
            // Joints run along every stone's edge, and the tile's edges are joints too, so the
            // map tiles without a seam.
            assert_eq!(at(&h, k * stone, stone / 2), 0.0);
            assert_eq!(at(&h, stone / 2, k * stone + stone - 1), 0.0);
            assert_eq!(at(&h, k * stone + stone / 2, stone / 2), 1.0);
        }
        assert!(h.texels.iter().all(|t| (0.0..=1.0).contains(&t[0])));
    }

    #[test]
    fn the_banner_mask_cuts_its_notch_and_holes_and_keeps_the_rest() {
        let m = banner_mask();
        let (w, h) = BANNER_SIZE;
        let mut cut = 0;
        for y in 0..h {
            for x in 0..w {
                let (u, v) = (
                    (x as f32 + 0.5) / w as f32,
                    1.0 - (y as f32 + 0.5) / h as f32,
                );
                assert_eq!(at(&m, x, y) == 0.0, banner_is_cut(u, v), "({x}, {y})");
                cut += usize::from(at(&m, x, y) == 0.0);
            }
        }
        // The notch is an eighth of the banner, the holes a little more.
        let share = cut as f64 / f64::from(w * h);
        assert!((0.12..0.2).contains(&share), "{share}");
        // Bottom centre cut, top centre and bottom corners kept.
        assert!(banner_is_cut(0.5, 0.05));
        assert!(!banner_is_cut(0.5, 0.95));
        assert!(!banner_is_cut(0.02, 0.02) && !banner_is_cut(0.98, 0.02));
    }
}
