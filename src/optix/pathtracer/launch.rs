//! Tile arithmetic of a launch, pure: which pixel (and sample) each launch index renders, how
//! a tile's sample range is cut into launches that fill the GPU, and the launch parameters of
//! one launch.
//!
//! # Filling the GPU
//!
//! A GPU keeps `multiprocessors x max threads per multiprocessor` threads resident (270k on an
//! H100). A launch of one thread per pixel of a 64 x 64 tile has 4096: two such launches on two
//! streams leave most of the device idle. So a tile's samples are planned
//! ([`plan_launches`]) to give every launch about [`launch_work`] pixel-samples (at least
//! [`MIN_LAUNCH_WORK`], 256k; twice the resident threads, so that a second wave hides the first
//! one's tail):
//!
//! - a tile of at least that many pixels: `ACCUMULATE` launches, one thread per pixel adding
//!   its samples in order to the tile's accumulation (chunked to at most
//!   [`SAMPLES_PER_LAUNCH`] pixel-samples per launch, to keep launches short);
//! - a smaller tile: pairs of launches, `SAMPLES` with one thread per (pixel, sample) of a
//!   chunk of the sample range, writing each sample to a buffer, then `REDUCE` with one thread
//!   per pixel adding them, in sample order, to the accumulation.
//!
//! Every pixel receives the same additions in the same order in both, so the image is
//! bit-identical whatever the tile size and the plan (`tests/optix_pathtracer_host.rs` checks
//! it against the CPU, bit for bit, for several tile sizes and plans). The tile scheduler cuts
//! frames into tiles of at least [`launch_work`] pixel-samples per pass when GPU workers render
//! (`TileRenderer::min_tile_work`), so that a pass's tiles can fill the device at all.
//!
//! The launch index -> pixel mappings are the CPU's loop order: `ACCUMULATE`/`REDUCE` thread
//! `i` renders pixel `(tile.x + i % tile.w, tile.y + i / tile.w)` and owns entry `i` of the
//! tile's accumulation buffer, the row-major order in which `CpuBackend::render_tile` walks a
//! tile; `SAMPLES` thread `i` renders sample `begin + i / pixels` of that pixel `i % pixels`.

use std::ops::Range;

use thiserror::Error;

use super::layout::GwLaunchParams;
use super::pack::PackedScene;
use crate::render::sampler::sample_bits;
use crate::render::{RenderSettings, Tile, TileError};

/// The most threads one `optixLaunch` may have (width x height x depth <= 2^30).
pub const MAX_LAUNCH_THREADS: u64 = 1 << 30;

/// Samples (pixels x samples per pixel) one launch takes at most. Longer sample ranges are cut
/// into several launches, which keeps every launch short (well under a second, so a display
/// GPU's watchdog never fires and progress stays visible) without changing the result: the
/// accumulation stays on the device between them and each pixel still adds its samples in order.
pub const SAMPLES_PER_LAUNCH: u64 = 1 << 22;

/// The fewest pixel-samples a launch is planned to carry (where the tile has them).
pub const MIN_LAUNCH_WORK: u64 = 1 << 18;

/// The most samples a worker's `SAMPLES` buffer holds (16 bytes each: 64 MiB).
pub const MAX_SAMPLE_SLOTS: u64 = 1 << 22;

/// What decides how much work fills a GPU: from the device attributes
/// (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`, `..._MAX_THREADS_PER_MULTIPROCESSOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceShape {
    pub multiprocessors: u32,
    pub max_threads_per_multiprocessor: u32,
}

impl DeviceShape {
    /// Threads the device keeps resident at once.
    pub fn resident_threads(&self) -> u64 {
        u64::from(self.multiprocessors) * u64::from(self.max_threads_per_multiprocessor)
    }
}

/// The pixel-samples one launch should carry to fill `device`: two waves of its resident
/// threads, at least [`MIN_LAUNCH_WORK`], at most [`SAMPLES_PER_LAUNCH`]. (H100, 132 x 2048:
/// 540,672; a 40-SM Turing of 1024 per SM: 262,144.)
pub fn launch_work(device: DeviceShape) -> u64 {
    (2 * device.resident_threads()).clamp(MIN_LAUNCH_WORK, SAMPLES_PER_LAUNCH)
}

/// How a launch's threads map to the work (`GwLaunchParams::mode`, `GW_LAUNCH_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchMode {
    /// One thread per pixel, adding its samples in order to the accumulation.
    Accumulate = 0,
    /// One thread per (pixel, sample), writing the sample to the samples buffer.
    Samples = 1,
    /// One thread per pixel, adding the written samples in order to the accumulation.
    Reduce = 2,
}

impl LaunchMode {
    /// The device code's name for it (`GW_LAUNCH_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            LaunchMode::Accumulate => "ACCUMULATE",
            LaunchMode::Samples => "SAMPLES",
            LaunchMode::Reduce => "REDUCE",
        }
    }
}

/// One launch of a tile's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchStep {
    pub mode: LaunchMode,
    pub samples: Range<u32>,
    /// The launch width.
    pub threads: u32,
}

impl LaunchStep {
    /// Pixel-samples the launch renders (0 for a `REDUCE`, which renders none).
    pub fn work(&self, pixels: u32) -> u64 {
        match self.mode {
            LaunchMode::Reduce => 0,
            _ => u64::from(pixels) * u64::from(self.samples.end - self.samples.start),
        }
    }
}

/// The launches that add `samples` of every pixel of a `pixels`-pixel tile (see the module
/// comment): `ACCUMULATE` launches when the tile alone has `work` pixels, else `SAMPLES` +
/// `REDUCE` pairs whose `SAMPLES` launch carries `work` pixel-samples (fewer only when the tile
/// has fewer), never more than `max_slots` samples nor [`MAX_LAUNCH_THREADS`] threads. The
/// sample ranges cover `samples` in order, each once.
pub fn plan_launches(
    pixels: u32,
    samples: Range<u32>,
    work: u64,
    max_slots: u64,
) -> Vec<LaunchStep> {
    if pixels == 0 || samples.is_empty() {
        return Vec::new();
    }
    let px = u64::from(pixels);
    if px >= work {
        return sample_chunks(px, samples, SAMPLES_PER_LAUNCH)
            .into_iter()
            .map(|chunk| LaunchStep {
                mode: LaunchMode::Accumulate,
                samples: chunk,
                threads: pixels,
            })
            .collect();
    }
    let per_launch = work
        .div_ceil(px)
        .min(max_slots / px)
        .min(MAX_LAUNCH_THREADS / px)
        .max(1);
    let mut steps = Vec::new();
    for chunk in sample_chunks(px, samples, per_launch * px) {
        let threads = (px * u64::from(chunk.end - chunk.start)) as u32;
        steps.push(LaunchStep {
            mode: LaunchMode::Samples,
            samples: chunk.clone(),
            threads,
        });
        steps.push(LaunchStep {
            mode: LaunchMode::Reduce,
            samples: chunk,
            threads: pixels,
        });
    }
    steps
}

/// The `(pixel, sample)` of `SAMPLES` launch index `i` (the device's mapping).
pub fn sample_thread(tile: Tile, samples: &Range<u32>, i: u32) -> ((u32, u32), u32) {
    let pixels = tile.w * tile.h;
    (tile_pixel(tile, i % pixels), samples.start + i / pixels)
}

/// Why a tile cannot be launched as it is.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LaunchError {
    #[error(transparent)]
    Tile(#[from] TileError),
    #[error("tile {tile:?} has {pixels} pixels, more than one OptiX launch takes ({limit}); use smaller tiles")]
    TooLarge { tile: Tile, pixels: u64, limit: u64 },
}

/// Checks a tile against the image and its accumulation buffer with the check the CPU backend
/// uses ([`Tile::check`]), and returns the launch width (the tile's pixel count).
pub fn launch_width(
    tile: Tile,
    width: u32,
    height: u32,
    accum_len: usize,
) -> Result<u32, LaunchError> {
    tile.check(width, height, accum_len)?;
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
    let env = packed.environment_map.unwrap_or_default();
    let scene = GwLaunchParams {
        handle,
        env_width: env.width,
        env_height: env.height,
        env_texels: env.texels.device_ptr(scene_base),
        env_row_cdf: env.row_cdf.device_ptr(scene_base),
        env_col_cdf: env.col_cdf.device_ptr(scene_base),
        env_uv_pdf: env.uv_pdf.device_ptr(scene_base),
        env_rotation_turns: env.rotation_turns,
        env_share: env.share,
        env_compensation: env.compensation,
        materials: packed.materials.device_ptr(scene_base),
        textures: packed.textures.device_ptr(scene_base),
        texels: packed.texels.device_ptr(scene_base),
        lights: packed.lights.device_ptr(scene_base),
        light_cdf: packed.light_cdf.device_ptr(scene_base),
        environment,
        light_count: packed.light_count,
        material_count: packed.material_count,
        texture_count: packed.texture_count,
        two_sided_lights: u32::from(packed.two_sided_lights),
        ..GwLaunchParams::default()
    };
    camera_params(&scene, settings)
}

/// `frame` with the camera, the image and the sampling of `settings`: what one frame of a
/// camera path changes from the last (the scene's pointers and counts stay).
pub fn camera_params(frame: &GwLaunchParams, settings: &RenderSettings) -> GwLaunchParams {
    let c = &settings.camera;
    GwLaunchParams {
        seed: settings.seed,
        sample_bits: sample_bits(settings.spp),
        pixel_filter: super::layout::pixel_filter_code(c.filter),
        lens_radius: c.lens.radius,
        lens_u: c.lens.axis_u.to_array(),
        lens_v: c.lens.axis_v.to_array(),
        focus_distance: c.lens.focus_distance,
        eye: c.eye.to_array(),
        cam_u: c.u.to_array(),
        cam_v: c.v.to_array(),
        cam_w: c.w.to_array(),
        // The CPU derives the pixel index and the ray from the camera frame's own size.
        image_width: c.width,
        image_height: c.height,
        max_depth: settings.max_depth,
        ..*frame
    }
}

/// The worker's device buffers a launch writes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerBuffers {
    /// The tile's float4 accumulation.
    pub accum: u64,
    /// Two u64: rays, non-finite samples (0: not counted).
    pub counters: u64,
    /// The `GwSample` buffer of `SAMPLES`/`REDUCE` launches (0 when none is needed).
    pub samples: u64,
    /// The tile's skip bytes, one per pixel (`GwLaunchParams::skip`); 0: every pixel renders.
    pub skip: u64,
}

/// The parameters of one launch: `frame` plus the tile, the step's mode and sample range, and
/// the worker's buffers.
pub fn step_params(
    frame: &GwLaunchParams,
    tile: Tile,
    step: &LaunchStep,
    buffers: WorkerBuffers,
) -> GwLaunchParams {
    GwLaunchParams {
        accum: buffers.accum,
        counters: buffers.counters,
        samples: match step.mode {
            LaunchMode::Accumulate => 0,
            _ => buffers.samples,
        },
        mode: step.mode as u32,
        tile_x: tile.x,
        tile_y: tile.y,
        tile_w: tile.w,
        tile_h: tile.h,
        sample_begin: step.samples.start,
        sample_end: step.samples.end,
        skip: buffers.skip,
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
        // One-sided lights unless the scene says otherwise.
        assert_eq!(frame.two_sided_lights, 0);
        let two_sided = PackedScene {
            two_sided_lights: true,
            ..packed.clone()
        };
        let frame2 = frame_params(&settings, &two_sided, 0x1000, 0xABC, [0.5, 0.25, 1.0]);
        assert_eq!(frame2.two_sided_lights, 1);
        assert_eq!(
            GwLaunchParams {
                two_sided_lights: 0,
                ..frame2
            },
            frame
        );
        // A camera path's next frame: another camera, size and sampling over the same scene
        // gives, bit for bit, what a backend set up for that frame would launch with.
        let next_camera = Camera {
            eye: Vec3::new(-4.0, 0.5, 2.0),
            look_at: Vec3::X,
            up: Vec3::Y,
            fov_y_deg: 55.0,
        }
        .frame(40, 20)
        .unwrap();
        let next = RenderSettings {
            width: 40,
            height: 20,
            spp: 3,
            max_depth: 2,
            seed: 7,
            camera: next_camera,
        };
        let fresh = frame_params(&next, &packed, 0x1000, 0xABC, [0.5, 0.25, 1.0]);
        assert_eq!(
            bytemuck::bytes_of(&camera_params(&frame, &next)),
            bytemuck::bytes_of(&fresh)
        );
        assert_ne!(fresh, frame);

        let buffers = WorkerBuffers {
            accum: 0x2000,
            counters: 0x3000,
            samples: 0x4000,
            skip: 0,
        };
        let step = LaunchStep {
            mode: LaunchMode::Accumulate,
            samples: 3..7,
            threads: 32,
        };
        let p = step_params(&frame, tile(8, 4, 16, 2), &step, buffers);
        assert_eq!((p.tile_x, p.tile_y, p.tile_w, p.tile_h), (8, 4, 16, 2));
        assert_eq!((p.sample_begin, p.sample_end), (3, 7));
        assert_eq!((p.accum, p.counters), (0x2000, 0x3000));
        assert_eq!((p.mode, p.samples), (0, 0), "ACCUMULATE reads no samples");
        assert_eq!(p.seed, frame.seed);
        assert_eq!(p.handle, frame.handle);
        for (mode, code) in [(LaunchMode::Samples, 1), (LaunchMode::Reduce, 2)] {
            let p = step_params(
                &frame,
                tile(8, 4, 16, 2),
                &LaunchStep {
                    mode,
                    ..step.clone()
                },
                buffers,
            );
            assert_eq!((p.mode, p.samples), (code, 0x4000));
        }
        assert_eq!(p.skip, 0, "no skip bytes: every pixel renders");
        let skipping = WorkerBuffers {
            skip: 0x5000,
            ..buffers
        };
        assert_eq!(
            step_params(&frame, tile(8, 4, 16, 2), &step, skipping).skip,
            0x5000
        );
    }

    #[test]
    fn launch_work_scales_with_the_device() {
        let h100 = DeviceShape {
            multiprocessors: 132,
            max_threads_per_multiprocessor: 2048,
        };
        assert_eq!(h100.resident_threads(), 270_336);
        assert_eq!(launch_work(h100), 540_672);
        // A small GPU still gets the floor; a huge one the ceiling.
        let small = DeviceShape {
            multiprocessors: 20,
            max_threads_per_multiprocessor: 1024,
        };
        assert_eq!(launch_work(small), MIN_LAUNCH_WORK);
        let huge = DeviceShape {
            multiprocessors: 4096,
            max_threads_per_multiprocessor: 2048,
        };
        assert_eq!(launch_work(huge), SAMPLES_PER_LAUNCH);
        // More multiprocessors, more work per launch.
        let h200 = DeviceShape {
            multiprocessors: 132,
            ..h100
        };
        let b200 = DeviceShape {
            multiprocessors: 148,
            ..h100
        };
        assert!(launch_work(b200) > launch_work(h200));
    }

    /// The properties every plan must have: the sample ranges cover the tile's samples in
    /// order, each once; SAMPLES launches come in pairs with the REDUCE of the same range; each
    /// SAMPLES launch carries `work` pixel-samples where the samples left allow it, never more
    /// than the buffer nor the launch limit; ACCUMULATE exactly when the tile alone has `work`
    /// pixels.
    fn check_plan(pixels: u32, samples: Range<u32>, work: u64, slots: u64) {
        let plan = plan_launches(pixels, samples.clone(), work, slots);
        if pixels == 0 || samples.is_empty() {
            assert!(plan.is_empty());
            return;
        }
        let px = u64::from(pixels);
        let mut next = samples.start;
        let mut i = 0;
        while i < plan.len() {
            let step = &plan[i];
            assert_eq!(step.samples.start, next, "{plan:?}");
            assert!(step.samples.end > step.samples.start);
            let n = u64::from(step.samples.end - step.samples.start);
            match step.mode {
                LaunchMode::Accumulate => {
                    assert!(px >= work);
                    assert_eq!(step.threads, pixels);
                    assert!(px * n <= SAMPLES_PER_LAUNCH || n == 1);
                    i += 1;
                }
                LaunchMode::Samples => {
                    assert!(px < work);
                    assert_eq!(u64::from(step.threads), px * n);
                    assert!(u64::from(step.threads) <= MAX_LAUNCH_THREADS);
                    assert!(px * n <= slots.max(px), "{} > {slots}", px * n);
                    let last = step.samples.end == samples.end;
                    let capped = px * (n + 1) > slots || px * (n + 1) > MAX_LAUNCH_THREADS;
                    assert!(
                        step.work(pixels) >= work || last || capped,
                        "a launch of {} pixel-samples, {work} wanted: {plan:?}",
                        step.work(pixels)
                    );
                    let reduce = &plan[i + 1];
                    assert_eq!(reduce.mode, LaunchMode::Reduce);
                    assert_eq!((&reduce.samples, reduce.threads), (&step.samples, pixels));
                    i += 2;
                }
                LaunchMode::Reduce => panic!("a REDUCE without its SAMPLES: {plan:?}"),
            }
            next = step.samples.end;
        }
        assert_eq!(next, samples.end);
    }

    #[test]
    fn plans_cover_the_samples_and_fill_the_launches() {
        let work = 540_672;
        for (pixels, samples) in [
            (4096, 0..64),     // a 64 x 64 tile, one pass of 64 spp
            (4096, 0..4),      // a small pass: one launch of all it has
            (4096, 5..6),      // one sample
            (1, 0..1000),      // one pixel
            (1 << 20, 0..256), // a 1024 x 1024 tile fills the GPU alone: ACCUMULATE
            (540_672, 0..3),
            (540_671, 0..3),
            (100, 7..7),
            (0, 0..5),
        ] {
            check_plan(pixels, samples, work, MAX_SAMPLE_SLOTS);
        }
        // 64 x 64 x 64 spp on an H100: 132 samples per launch are wanted (540,672 / 4096) but
        // the tile has 64, so one SAMPLES launch of 262,144 threads and its REDUCE.
        let plan = plan_launches(4096, 0..64, work, MAX_SAMPLE_SLOTS);
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0].threads, 262_144);
        // 256 spp: 132 + 124 samples.
        let plan = plan_launches(4096, 0..256, work, MAX_SAMPLE_SLOTS);
        let sizes: Vec<u32> = plan
            .iter()
            .map(|s| s.samples.end - s.samples.start)
            .collect();
        assert_eq!(sizes, vec![132, 132, 124, 124]);
        // A 1080p frame as one tile at 64 spp: ACCUMULATE, 2 samples per launch (4M budget).
        let plan = plan_launches(1920 * 1080, 0..64, work, MAX_SAMPLE_SLOTS);
        assert!(plan.iter().all(|s| s.mode == LaunchMode::Accumulate));
        assert_eq!(plan.len(), 32);
        // A small buffer caps the SAMPLES launches.
        check_plan(4096, 0..256, work, 10_000);
        assert!(plan_launches(4096, 0..256, work, 10_000)
            .iter()
            .all(|s| s.threads <= 8192));
    }

    proptest::proptest! {
        #[test]
        fn any_plan_has_the_properties(
            pixels in 0u32..3_000_000,
            start in 0u32..1000,
            len in 0u32..600,
            work in 1u64..5_000_000,
            slots in 1u64..(1 << 23),
        ) {
            check_plan(pixels, start..start + len, work, slots);
        }
    }

    /// SAMPLES launch indices visit every (pixel, sample) of the tile and range once,
    /// sample-major, pixels in the CPU's order within each sample.
    #[test]
    fn sample_threads_cover_every_pixel_and_sample_once() {
        let t = tile(5, 3, 7, 4);
        let samples = 10..13;
        let n = t.w * t.h * 3;
        let mut seen = std::collections::HashSet::new();
        for i in 0..n {
            let ((x, y), s) = sample_thread(t, &samples, i);
            assert!(x >= t.x && x < t.x + t.w && y >= t.y && y < t.y + t.h);
            assert!(samples.contains(&s));
            assert!(seen.insert((x, y, s)));
            if i > 0 {
                let (_, prev) = sample_thread(t, &samples, i - 1);
                assert!(prev <= s, "sample-major");
            }
        }
        assert_eq!(seen.len() as u32, n);
        assert_eq!(sample_thread(t, &samples, t.w * t.h), ((5, 3), 11));
    }
}
