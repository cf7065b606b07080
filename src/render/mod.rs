//! What every backend shares: render settings, tiles, the accumulation film, the interface a
//! backend implements ([`TileRenderer`]) and image output.
//!
//! A backend renders *tiles* (a rectangle of the image and a range of sample indices), never
//! whole frames: the tile scheduler hands tiles to workers, CPU threads or GPU streams alike.
//! Because a sample's random numbers depend only on (pixel, sample, spp, seed), and a pixel's
//! samples are always added in sample order, the image does not depend on who rendered which
//! tile or when.

pub mod checkpoint;
pub mod compare;
pub mod denoise;
pub mod film;
pub mod memory;
pub mod merge;
pub mod output;
pub mod paths;
pub mod sampler;
pub mod stats;

use std::ops::Range;

use thiserror::Error;

use crate::scene::camera::CameraFrame;
use crate::scene::{Scene, SceneError};

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

/// The largest image side, in pixels, either way. The film's row offsets are `u32`
/// arithmetic: with both sides at most 2^15 the largest pixel index is below 2^30, so nothing
/// wraps (and an OptiX launch, at most 2^30 threads, can cover any tile); the sampler's
/// Morton index of a pixel takes 30 bits.
pub const MAX_IMAGE_SIDE: u32 = 1 << 15;

/// The most samples per pixel. A pixel's sample count is kept in an `f32` of the film, exact
/// up to 2^24: beyond it the count stops growing and the image would be silently wrong. With
/// at most 2^30 pixels, `pixels x spp` is at most 2^54 and fits every `u64` index (the
/// sampler's among them).
pub const MAX_SPP: u32 = 1 << 24;

/// Why render settings cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SettingsError {
    #[error("the image must be at least 1x1 pixels, got {width}x{height}")]
    EmptyImage { width: u32, height: u32 },
    #[error("the image is {width}x{height} pixels; each side may be at most {max} (pixel indices are 32-bit)")]
    ImageTooLarge { width: u32, height: u32, max: u32 },
    #[error("{spp} samples per pixel: it must be from 1 to {max} (the film counts samples in 32-bit floats)")]
    Spp { spp: u32, max: u32 },
    #[error("the longest path must be at least 1 segment")]
    MaxDepth,
    #[error("the camera frame is for a {frame_width}x{frame_height} image, the settings for {width}x{height}")]
    CameraSize {
        width: u32,
        height: u32,
        frame_width: u32,
        frame_height: u32,
    },
}

/// Checks an image size and sample count against [`MAX_IMAGE_SIDE`] and [`MAX_SPP`]. The CLI
/// calls it on `--width --height --spp` before loading anything.
pub fn check_image_size(width: u32, height: u32, spp: u32) -> Result<(), SettingsError> {
    if width == 0 || height == 0 {
        return Err(SettingsError::EmptyImage { width, height });
    }
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(SettingsError::ImageTooLarge {
            width,
            height,
            max: MAX_IMAGE_SIDE,
        });
    }
    if spp == 0 || spp > MAX_SPP {
        return Err(SettingsError::Spp { spp, max: MAX_SPP });
    }
    Ok(())
}

impl RenderSettings {
    /// The image size and sample count ([`check_image_size`]), a depth of at least 1, and a
    /// camera frame made for this image size.
    pub fn validate(&self) -> Result<(), SettingsError> {
        check_image_size(self.width, self.height, self.spp)?;
        if self.max_depth == 0 {
            return Err(SettingsError::MaxDepth);
        }
        if (self.camera.width, self.camera.height) != (self.width, self.height) {
            return Err(SettingsError::CameraSize {
                width: self.width,
                height: self.height,
                frame_width: self.camera.width,
                frame_height: self.camera.height,
            });
        }
        Ok(())
    }
}

/// Why a backend refuses to set up: the scene or the settings.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum InputError {
    #[error(transparent)]
    Scene(#[from] SceneError),
    #[error("render settings: {0}")]
    Settings(#[from] SettingsError),
}

/// The checks every backend runs before it builds anything: [`Scene::validate`] and
/// [`RenderSettings::validate`].
pub fn validate_inputs(scene: &Scene, settings: &RenderSettings) -> Result<(), InputError> {
    scene.validate()?;
    settings.validate()?;
    Ok(())
}

/// Why a tile cannot be rendered.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TileError {
    #[error("tile {tile:?} does not fit in the {width}x{height} image")]
    OutsideImage { tile: Tile, width: u32, height: u32 },
    #[error("tile {tile:?} has {expected} pixels but its accumulation buffer has {got}")]
    BufferSize {
        tile: Tile,
        expected: usize,
        got: usize,
    },
    #[error("tile {tile:?} has {expected} pixels but its skip mask has {got} entries")]
    SkipSize {
        tile: Tile,
        expected: usize,
        got: usize,
    },
}

/// The check of [`TileRenderer::render_tile_skipping`]'s mask: one entry per pixel of `tile`.
pub fn check_skip(tile: Tile, accum: &[[f32; 4]], skip: &[bool]) -> Result<(), TileError> {
    if skip.len() != tile.pixel_count() || skip.len() != accum.len() {
        return Err(TileError::SkipSize {
            tile,
            expected: tile.pixel_count(),
            got: skip.len(),
        });
    }
    Ok(())
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
    /// The tile covering a whole `width` x `height` image.
    pub fn whole(width: u32, height: u32) -> Tile {
        Tile {
            x: 0,
            y: 0,
            w: width,
            h: height,
        }
    }

    pub fn pixel_count(&self) -> usize {
        self.w as usize * self.h as usize
    }

    /// The one tile check of every backend: the tile lies inside the `width x height` image
    /// (without overflowing `u32`) and `accum_len` is its pixel count.
    pub fn check(&self, width: u32, height: u32, accum_len: usize) -> Result<(), TileError> {
        if self.x.checked_add(self.w).is_none_or(|r| r > width)
            || self.y.checked_add(self.h).is_none_or(|b| b > height)
        {
            return Err(TileError::OutsideImage {
                tile: *self,
                width,
                height,
            });
        }
        if accum_len != self.pixel_count() {
            return Err(TileError::BufferSize {
                tile: *self,
                expected: self.pixel_count(),
                got: accum_len,
            });
        }
        Ok(())
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

    /// What the renderer runs on, as far as its speed goes ("cpu: AMD EPYC 7B13",
    /// "gpu: NVIDIA H100 80GB HBM3, 132 SMs"); the same for every worker of one device.
    /// Device names say only "cpu" or "gpu0", which are alike on every rank of a cluster;
    /// this tells the ranks' machines apart, so that a cluster of unlike machines calibrates
    /// before its first pass (`sched::master`) instead of sharing it by worker counts.
    /// Empty (the default) where it is not known: then the device name alone tells.
    fn hardware(&self) -> String {
        String::new()
    }

    /// Renders `samples` of every pixel of `tile` into `accum`.
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()>;

    /// [`TileRenderer::render_tile`] for the pixels of `tile` whose entry of `skip` (one per
    /// pixel, row-major like `accum`) is false; a skipped pixel's entry of `accum` is left
    /// exactly as it came. Adaptive sampling hands a GPU whole tiles with the stopped blocks
    /// skipped, rather than the pieces between them: each piece would be a launch too small to
    /// fill the device. The CPU backend and the OptiX workers skip the pixels; this default
    /// renders them all into a copy and keeps the others' sums, the same result at the whole
    /// tile's cost, so that any renderer can be handed such a tile.
    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        check_skip(tile, accum, skip)?;
        let mut all = accum.to_vec();
        self.render_tile(tile, samples, &mut all)?;
        for ((a, b), &skipped) in accum.iter_mut().zip(all).zip(skip) {
            if !skipped {
                *a = b;
            }
        }
        Ok(())
    }

    /// The pixel-samples (pixels x samples of the pass) a tile should carry for this renderer
    /// to run efficiently, or `None` when any tile will do. A GPU worker asks for enough to fill
    /// its device in one launch (`optix::pathtracer::launch::launch_work`, from the device's
    /// multiprocessor count); the tile scheduler cuts bigger tiles for it.
    fn min_tile_work(&self) -> Option<u64> {
        None
    }

    /// Rays this renderer has traced so far (closest-hit and shadow rays), or `None` where it
    /// does not count them.
    fn rays_traced(&self) -> Option<u64> {
        None
    }

    /// Why this renderer's device can render no more, for any worker on it: after a sticky
    /// CUDA error (an illegal address in a kernel, say) every call in the CUDA context returns
    /// that error, and all the streams of one GPU share its context. Asked by the tile
    /// scheduler when a tile failed, to retire every worker of the device at once instead of
    /// one by one as each meets the error, and to say why: the answer is the error the device
    /// was lost to (`cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS`), which the
    /// warning quotes unless the failing worker's own error already does (that error may be a
    /// consequence, such as OptiX's `OPTIX_ERROR_CUDA_ERROR`). `None` (the default) where
    /// a failure concerns only the call that failed (out of memory) or the renderer cannot
    /// tell.
    fn device_lost(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec3;

    fn tile(x: u32, y: u32, w: u32, h: u32) -> Tile {
        Tile { x, y, w, h }
    }

    #[test]
    fn tiles_are_checked_against_the_image_and_the_buffer() {
        assert_eq!(tile(0, 0, 37, 20).check(37, 20, 740), Ok(()));
        assert_eq!(tile(36, 19, 1, 1).check(37, 20, 1), Ok(()));
        assert_eq!(tile(5, 5, 0, 3).check(37, 20, 0), Ok(()));
        for t in [
            tile(30, 0, 8, 1),
            tile(0, 19, 1, 2),
            tile(37, 0, 1, 1),
            tile(u32::MAX, 0, 2, 1),
            tile(0, u32::MAX, 1, 2),
        ] {
            assert!(
                matches!(
                    t.check(37, 20, t.pixel_count()),
                    Err(TileError::OutsideImage { .. })
                ),
                "{t:?}"
            );
        }
        assert_eq!(
            tile(0, 0, 4, 4).check(37, 20, 15),
            Err(TileError::BufferSize {
                tile: tile(0, 0, 4, 4),
                expected: 16,
                got: 15
            })
        );
    }

    #[test]
    fn image_sizes_are_capped_with_a_clear_error() {
        assert_eq!(check_image_size(1, 1, 1), Ok(()));
        assert_eq!(
            check_image_size(MAX_IMAGE_SIDE, MAX_IMAGE_SIDE, MAX_SPP),
            Ok(())
        );
        // The largest image's last pixel index and its pixel-sample count do not wrap.
        let last = (MAX_IMAGE_SIDE - 1)
            .checked_mul(MAX_IMAGE_SIDE)
            .and_then(|r| r.checked_add(MAX_IMAGE_SIDE - 1));
        assert!(last.is_some());
        let pixel_samples = u64::from(MAX_IMAGE_SIDE)
            .pow(2)
            .checked_mul(u64::from(MAX_SPP));
        assert!(pixel_samples.is_some_and(|n| n <= 1 << 54));
        // f32 counts every sample up to MAX_SPP exactly, and not one more.
        assert_eq!(MAX_SPP as f32 - 1.0 + 1.0, MAX_SPP as f32);
        assert_eq!(MAX_SPP as f32 + 1.0, MAX_SPP as f32);

        assert_eq!(
            check_image_size(0, 5, 1),
            Err(SettingsError::EmptyImage {
                width: 0,
                height: 5
            })
        );
        for (w, h) in [
            (MAX_IMAGE_SIDE + 1, 1),
            (1, MAX_IMAGE_SIDE + 1),
            (u32::MAX, u32::MAX),
        ] {
            let e = check_image_size(w, h, 1).unwrap_err();
            assert!(matches!(e, SettingsError::ImageTooLarge { .. }));
            assert!(e.to_string().contains("at most 32768"), "{e}");
        }
        assert!(matches!(
            check_image_size(8, 8, 0),
            Err(SettingsError::Spp { .. })
        ));
        let e = check_image_size(8, 8, MAX_SPP + 1).unwrap_err();
        assert!(e.to_string().contains("16777216"), "{e}");
    }

    #[test]
    fn settings_check_depth_and_camera_size() {
        let camera = crate::scene::Camera {
            eye: Vec3::new(0.0, 0.0, -3.0),
            look_at: Vec3::ZERO,
            up: Vec3::Y,
            fov_y_deg: 40.0,
        };
        let s = RenderSettings {
            width: 16,
            height: 8,
            spp: 4,
            max_depth: 3,
            seed: 0,
            camera: camera.frame(16, 8).unwrap(),
        };
        assert_eq!(s.validate(), Ok(()));
        let s0 = RenderSettings { max_depth: 0, ..s };
        assert_eq!(s0.validate(), Err(SettingsError::MaxDepth));
        let wrong = RenderSettings {
            camera: camera.frame(8, 8).unwrap(),
            ..s
        };
        assert!(matches!(
            wrong.validate(),
            Err(SettingsError::CameraSize { .. })
        ));
        let big = RenderSettings { width: 40_000, ..s };
        assert!(matches!(
            big.validate(),
            Err(SettingsError::ImageTooLarge { .. })
        ));
    }

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
