//! Tile arithmetic of a launch, pure: which pixel each launch index renders, how a sample range
//! is cut into launches, and the launch parameters of one launch.
//!
//! A launch covers one tile with a 1D grid of `tile.w * tile.h` threads; thread `i` renders
//! pixel `(tile.x + i % tile.w, tile.y + i / tile.w)` and owns entry `i` of the tile's
//! accumulation buffer: the row-major order in which `CpuBackend::render_tile` walks a tile,
//! so the buffers of both backends mean the same thing entry by entry.

use std::ops::Range;

use thiserror::Error;

use super::layout::GwLaunchParams;
use super::pack::PackedScene;
use crate::cpu::TileError;
use crate::render::{RenderSettings, Tile};

/// The most threads one `optixLaunch` may have (width x height x depth <= 2^30).
pub const MAX_LAUNCH_THREADS: u64 = 1 << 30;

/// Samples (pixels x samples per pixel) one launch takes at most. Longer sample ranges are cut
/// into several launches, which keeps every launch short (well under a second, so a display
/// GPU's watchdog never fires and progress stays visible) without changing the result: the
/// accumulation stays on the device between them and each pixel still adds its samples in order.
pub const SAMPLES_PER_LAUNCH: u64 = 1 << 22;

/// Why a tile cannot be launched as it is.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LaunchError {
    #[error(transparent)]
    Tile(#[from] TileError),
    #[error("tile {tile:?} has {pixels} pixels, more than one OptiX launch takes ({limit}); use smaller tiles")]
    TooLarge { tile: Tile, pixels: u64, limit: u64 },
}

/// Checks a tile against the image and its accumulation buffer, exactly as the CPU backend
/// does, and returns the launch width (the tile's pixel count).
pub fn launch_width(
    tile: Tile,
    width: u32,
    height: u32,
    accum_len: usize,
) -> Result<u32, LaunchError> {
    if tile.x.checked_add(tile.w).is_none_or(|r| r > width)
        || tile.y.checked_add(tile.h).is_none_or(|b| b > height)
    {
        return Err(TileError::OutsideImage {
            tile,
            width,
            height,
        }
        .into());
    }
    if accum_len != tile.pixel_count() {
        return Err(TileError::BufferSize {
            tile,
            expected: tile.pixel_count(),
            got: accum_len,
        }
        .into());
    }
    let pixels = u64::from(tile.w) * u64::from(tile.h);
    if pixels > MAX_LAUNCH_THREADS {
        return Err(LaunchError::TooLarge {
            tile,
            pixels,
            limit: MAX_LAUNCH_THREADS,
        });
    }
    Ok(pixels as u32)
}

/// The image pixel `(x, y)` of launch index `i` (the device's mapping).
pub fn tile_pixel(tile: Tile, i: u32) -> (u32, u32) {
    (tile.x + i % tile.w, tile.y + i / tile.w)
}

/// Cuts `samples` into consecutive, non-empty ranges of at most `max(1, budget / pixels)`
/// samples each, in order.
pub fn sample_chunks(pixels: u64, samples: Range<u32>, budget: u64) -> Vec<Range<u32>> {
    let per_launch = (budget / pixels.max(1)).clamp(1, u64::from(u32::MAX)) as u32;
    let mut chunks = Vec::new();
    let mut start = samples.start;
    while start < samples.end {
        let end = start.saturating_add(per_launch).min(samples.end);
        chunks.push(start..end);
        start = end;
    }
    chunks
}

/// What stays the same for every launch of a frame: the scene's device pointers and counts, the
/// camera, the environment. `scene_base` is the device address of the uploaded blob.
pub fn frame_params(
    settings: &RenderSettings,
    packed: &PackedScene,
    scene_base: u64,
    handle: u64,
    environment: [f32; 3],
) -> GwLaunchParams {
    let c = &settings.camera;
    GwLaunchParams {
        handle,
        materials: packed.materials.device_ptr(scene_base),
        textures: packed.textures.device_ptr(scene_base),
        texels: packed.texels.device_ptr(scene_base),
        lights: packed.lights.device_ptr(scene_base),
        light_cdf: packed.light_cdf.device_ptr(scene_base),
        seed: settings.seed,
        eye: c.eye.to_array(),
        cam_u: c.u.to_array(),
        cam_v: c.v.to_array(),
        cam_w: c.w.to_array(),
        environment,
        // The CPU derives the pixel index and the ray from the camera frame's own size.
        image_width: c.width,
        image_height: c.height,
        max_depth: settings.max_depth,
        light_count: packed.light_count,
        material_count: packed.material_count,
        texture_count: packed.texture_count,
        ..GwLaunchParams::default()
    }
}

/// The parameters of one launch: `frame` plus the tile, its sample range and the worker's
/// accumulation buffer and counters.
pub fn tile_params(
    frame: &GwLaunchParams,
    tile: Tile,
    samples: Range<u32>,
    accum: u64,
    counters: u64,
) -> GwLaunchParams {
    GwLaunchParams {
        accum,
        counters,
        tile_x: tile.x,
        tile_y: tile.y,
        tile_w: tile.w,
        tile_h: tile.h,
        sample_begin: samples.start,
        sample_end: samples.end,
        ..*frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Camera;
    use glam::Vec3;

    fn tile(x: u32, y: u32, w: u32, h: u32) -> Tile {
        Tile { x, y, w, h }
    }

    /// The launch index -> pixel mapping visits a tile's pixels in the CPU's loop order (rows,
    /// then columns), so entry i of the accumulation buffer is the same pixel on both.
    #[test]
    fn launch_indices_map_to_pixels_in_the_cpu_order() {
        let width = 37;
        for t in [
            tile(0, 0, 37, 5),
            tile(5, 3, 7, 4),
            tile(36, 9, 1, 1),
            tile(0, 2, 1, 6),
        ] {
            let mut cpu_order = Vec::new();
            for y in t.y..t.y + t.h {
                for x in t.x..t.x + t.w {
                    cpu_order.push((x, y));
                }
            }
            let n = launch_width(t, width, 20, t.pixel_count()).unwrap();
            assert_eq!(n as usize, cpu_order.len());
            let gpu_order: Vec<(u32, u32)> = (0..n).map(|i| tile_pixel(t, i)).collect();
            assert_eq!(gpu_order, cpu_order, "{t:?}");
            // The sampler's pixel index is the image's, not the tile's.
            let (x, y) = tile_pixel(t, n - 1);
            assert_eq!(y * width + x, (t.y + t.h - 1) * width + t.x + t.w - 1);
        }
    }

    #[test]
    fn bad_tiles_are_refused_like_the_cpu_refuses_them() {
        assert!(matches!(
            launch_width(tile(30, 0, 8, 1), 37, 20, 8),
            Err(LaunchError::Tile(TileError::OutsideImage { .. }))
        ));
        assert!(matches!(
            launch_width(tile(0, 19, 1, 2), 37, 20, 2),
            Err(LaunchError::Tile(TileError::OutsideImage { .. }))
        ));
        assert!(matches!(
            launch_width(tile(u32::MAX, 0, 2, 1), 37, 20, 2),
            Err(LaunchError::Tile(TileError::OutsideImage { .. }))
        ));
        assert!(matches!(
            launch_width(tile(0, 0, 4, 4), 37, 20, 15),
            Err(LaunchError::Tile(TileError::BufferSize {
                expected: 16,
                got: 15,
                ..
            }))
        ));
        let huge = tile(0, 0, 1 << 16, 1 << 15);
        assert!(matches!(
            launch_width(huge, 1 << 16, 1 << 15, huge.pixel_count()),
            Err(LaunchError::TooLarge { .. })
        ));
        assert_eq!(launch_width(tile(0, 0, 0, 5), 37, 20, 0), Ok(0));
    }

    #[test]
    fn sample_chunks_cover_the_range_in_order() {
        for (pixels, samples, budget) in [
            (1024u64, 0u32..256u32, 1u64 << 22),
            (1920 * 1080, 0..64, 1 << 22),
            (1920 * 1080, 5..6, 1 << 22),
            (1, 3..1000, 7),
            (100, 0..0, 1000),
            (1 << 30, 0..3, 1 << 22),
        ] {
            let chunks = sample_chunks(pixels, samples.clone(), budget);
            let per = (budget / pixels).max(1);
            let mut next = samples.start;
            for c in &chunks {
                assert_eq!(c.start, next);
                assert!(c.end > c.start);
                assert!(u64::from(c.end - c.start) <= per);
                next = c.end;
            }
            assert_eq!(next.max(samples.start), samples.end.max(samples.start));
            if samples.is_empty() {
                assert!(chunks.is_empty());
            }
        }
        // 1024x1024 pixels at 256 spp: 4 samples per launch, 64 launches.
        assert_eq!(sample_chunks(1 << 20, 0..256, SAMPLES_PER_LAUNCH).len(), 64);
    }

    #[test]
    fn params_carry_the_frame_and_the_tile() {
        let camera = Camera {
            eye: Vec3::new(1.0, 2.0, 3.0),
            look_at: Vec3::ZERO,
            up: Vec3::Y,
            fov_y_deg: 40.0,
        }
        .frame(64, 32)
        .unwrap();
        let settings = RenderSettings {
            width: 64,
            height: 32,
            spp: 16,
            max_depth: 6,
            seed: 0xDEAD_BEEF_0000_0001,
            camera,
        };
        let packed = PackedScene {
            material_count: 3,
            light_count: 2,
            texture_count: 1,
            ..PackedScene::default()
        };
        let frame = frame_params(&settings, &packed, 0x1000, 0xABC, [0.5, 0.25, 1.0]);
        assert_eq!(frame.handle, 0xABC);
        assert_eq!(frame.seed, settings.seed);
        assert_eq!(frame.eye, [1.0, 2.0, 3.0]);
        assert_eq!(frame.cam_u, camera.u.to_array());
        assert_eq!(frame.cam_v, camera.v.to_array());
        assert_eq!(frame.cam_w, camera.w.to_array());
        assert_eq!((frame.image_width, frame.image_height), (64, 32));
        assert_eq!(frame.max_depth, 6);
        assert_eq!(
            (frame.material_count, frame.light_count, frame.texture_count),
            (3, 2, 1)
        );
        assert_eq!(frame.environment, [0.5, 0.25, 1.0]);
        // Empty regions are null pointers.
        assert_eq!((frame.lights, frame.light_cdf, frame.texels), (0, 0, 0));

        let p = tile_params(&frame, tile(8, 4, 16, 2), 3..7, 0x2000, 0x3000);
        assert_eq!((p.tile_x, p.tile_y, p.tile_w, p.tile_h), (8, 4, 16, 2));
        assert_eq!((p.sample_begin, p.sample_end), (3, 7));
        assert_eq!((p.accum, p.counters), (0x2000, 0x3000));
        assert_eq!(p.seed, frame.seed);
        assert_eq!(p.handle, frame.handle);
    }
}
