//! The CPU backend: the project's reference renderer.
//!
//! - [`bvh`]: the two-level BVH (one tree per group, one over the groups) and the brute-force
//!   oracle it is tested against;
//! - [`sampling`] and [`material`]: the scattering code the CUDA programs are ported from;
//! - [`domains`]: a scene split into domains (distributed geometry): each domain's BVH, and
//!   the top level of domain boxes;
//! - [`integrator`]: the path tracer (next-event estimation, MIS, Russian roulette);
//! - [`first_hit`]: what the camera sees first through each pixel (masks for image statistics);
//! - [`aov`]: guide layers for denoisers (`render --aov`): each pixel's albedo and normal;
//! - [`background`]: a low-priority thread pool, for the `--aov` layers traced beside a GPU;
//! - [`model`]: the name of the machine's CPU (what a cluster's ranks are told apart by).
//!
//! [`CpuBackend`] renders tiles. One tile is rendered on the calling thread; parallelism
//! comes from rendering many tiles at once (the backend is `Sync`).

pub mod aov;
pub mod background;
pub mod bvh;
pub mod domains;
pub mod environment_share;
pub mod first_hit;
pub mod integrator;
pub mod material;
pub mod model;
pub mod sampling;
pub mod wavefront;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use glam::Vec3;

use crate::render::{validate_inputs, InputError, RenderSettings, Tile, TileRenderer};
use crate::scene::Scene;

pub use crate::render::TileError;
pub use bvh::{BuildStats, Hit, SceneBvh};
use integrator::{LightSampler, PathTracer};
use wavefront::{BatchTuner, SampleId, Wavefront};

/// The CPU path tracer, ready to render tiles of one frame.
pub struct CpuBackend {
    scene: Arc<Scene>,
    bvh: Arc<SceneBvh>,
    lights: Arc<LightSampler>,
    settings: RenderSettings,
    /// Whether the BVH was handed in ([`CpuBackend::sharing`]) rather than built here.
    bvh_given: bool,
    /// Samples whose radiance was not finite: counted, and added as black (see
    /// [`CpuBackend::dropped_samples`]).
    dropped: AtomicU64,
    /// Rays traced so far, closest hit and shadow (see [`TileRenderer::rays_traced`]).
    rays: AtomicU64,
    /// How batches of rays are traced, learnt over the frames ([`wavefront`]).
    tuner: BatchTuner,
}

/// The scene's CPU BVH, built at most once, by whichever of its users needs it first: the
/// `--aov` layers traced beside a GPU, or the CPU backend that takes over when that GPU cannot
/// be set up (`--backend auto`); a user that comes while another builds it waits for that
/// build. (Each built its own before: a GPU out of memory on a large scene, the very case
/// where the CPU takes over, cost a second build of seconds and a second BVH's memory.)
/// Clones share the one BVH; it lives while a clone does.
#[derive(Clone, Debug, Default)]
pub struct SharedBvh(Arc<OnceLock<Arc<SceneBvh>>>);

impl SharedBvh {
    /// Holding `bvh` when one was built before (by the environment-share probe).
    pub fn new(bvh: Option<Arc<SceneBvh>>) -> SharedBvh {
        let cell = OnceLock::new();
        if let Some(bvh) = bvh {
            let _ = cell.set(bvh);
        }
        SharedBvh(Arc::new(cell))
    }

    /// The BVH, once built.
    pub fn get(&self) -> Option<Arc<SceneBvh>> {
        self.0.get().cloned()
    }

    /// The BVH held; else the one another thread is building, waited for; else `scene`'s,
    /// built now (on the current rayon pool) and held.
    pub fn get_or_build(&self, scene: &Scene) -> Arc<SceneBvh> {
        self.0
            .get_or_init(|| Arc::new(SceneBvh::build(scene)))
            .clone()
    }
}

impl CpuBackend {
    /// Checks the scene and the settings ([`validate_inputs`], the same checks as the OptiX
    /// backend's), copies the scene (for callers that keep theirs: [`CpuBackend::sharing`]
    /// shares it instead), builds the BVH (in parallel over the groups, on the
    /// current rayon pool) and the light-selection table.
    pub fn new(scene: &Scene, settings: &RenderSettings) -> Result<CpuBackend, InputError> {
        CpuBackend::sharing(Arc::new(scene.clone()), settings, None)
    }

    /// [`CpuBackend::new`] on the caller's scene, shared rather than copied (the copy held a
    /// second set of the vertices and triangles for the whole render: docs/cpu-backend.md),
    /// tracing `bvh` when it is given rather than building another:
    /// the BVH the environment-share probe built for the same scene before the backend was
    /// chosen (at ten million triangles, seconds of build). It must be `scene`'s: a BVH of
    /// other geometry (another group or triangle count) is not used, and one is built.
    pub fn sharing(
        scene: Arc<Scene>,
        settings: &RenderSettings,
        bvh: Option<Arc<SceneBvh>>,
    ) -> Result<CpuBackend, InputError> {
        validate_inputs(&scene, settings)?;
        let given = bvh.filter(|b| b.is_built_from(&scene));
        let bvh_given = given.is_some();
        let bvh = given.unwrap_or_else(|| Arc::new(SceneBvh::build(&scene)));
        Ok(CpuBackend {
            lights: Arc::new(LightSampler::new(&scene)),
            scene,
            bvh,
            bvh_given,
            settings: *settings,
            dropped: AtomicU64::new(0),
            rays: AtomicU64::new(0),
            tuner: BatchTuner::default(),
        })
    }

    /// [`CpuBackend::sharing`] on the BVH `shared` holds, or builds into it, or waits for
    /// while another thread builds it: never a second one. The inputs are checked first, so
    /// that bad ones cost no build.
    pub fn on_shared(
        scene: Arc<Scene>,
        settings: &RenderSettings,
        shared: &SharedBvh,
    ) -> Result<CpuBackend, InputError> {
        validate_inputs(&scene, settings)?;
        let (bvh, held_before) = match shared.get() {
            Some(bvh) => (bvh, true),
            None => (shared.get_or_build(&scene), false),
        };
        let mut backend = CpuBackend::sharing(scene, settings, Some(bvh))?;
        // `sharing` counts a BVH handed in as built before the setup; one built here, or
        // waited for, was built (or waited for) inside it.
        backend.bvh_given &= held_before;
        Ok(backend)
    }

    pub fn bvh_stats(&self) -> BuildStats {
        self.bvh.stats()
    }

    /// The seconds of the BVH's build that were spent before this backend's setup: its whole
    /// build when [`CpuBackend::sharing`] was given it, else 0 (it was built inside the
    /// setup). Added to the setup's own time, the build time a render reports stays the
    /// BVH's, wherever it was built.
    pub fn bvh_seconds_before_setup(&self) -> f64 {
        if self.bvh_given {
            self.bvh.stats().seconds
        } else {
            0.0
        }
    }

    pub fn bvh(&self) -> &SceneBvh {
        &self.bvh
    }

    pub fn settings(&self) -> &RenderSettings {
        &self.settings
    }

    /// How many samples so far had a non-finite radiance (NaN or infinity, e.g. from a
    /// degenerate normal). Such a sample adds zero radiance but still counts as a sample, so a
    /// pixel's mean is never poisoned and its sample count stays the requested one.
    pub fn dropped_samples(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn tracer(&self) -> PathTracer<'_> {
        PathTracer {
            scene: &self.scene,
            bvh: &self.bvh,
            lights: &self.lights,
            max_depth: self.settings.max_depth,
        }
    }

    /// The radiance of one sample of one pixel, exactly as [`TileRenderer::render_tile`]
    /// computes it (non-finite values included).
    pub fn sample(&self, x: u32, y: u32, sample: u32) -> Vec3 {
        self.tracer().sample(
            &self.settings.camera,
            (x, y),
            sample,
            self.settings.spp,
            self.settings.seed,
            &mut 0,
        )
    }
}

impl TileRenderer for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    /// `None`, unless the test hook [`crate::fault_injection::cpu_tile_work`] asks for
    /// GPU-sized tiles.
    fn min_tile_work(&self) -> Option<u64> {
        crate::fault_injection::cpu_tile_work()
    }

    fn hardware(&self) -> String {
        model::cpu_hardware()
    }

    /// Closest-hit rays (camera and bounces) and shadow rays of the tiles rendered so far, each
    /// once whatever it met.
    fn rays_traced(&self) -> Option<u64> {
        Some(self.rays.load(Ordering::Relaxed))
    }

    /// For each pixel in row-major order, for each sample index in increasing order: adds the
    /// sample's radiance to `[r, g, b]` and 1 to the count.
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        self.render_pixels(tile, samples, accum, None)
    }

    /// The same loop, the skipped pixels passed over (their sums untouched).
    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        crate::render::check_skip(tile, accum, skip)?;
        self.render_pixels(tile, samples, accum, Some(skip))
    }
}

impl CpuBackend {
    /// [`TileRenderer::render_tile`]'s loop over the pixels of `tile`, less those `skip` marks.
    fn render_pixels(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: Option<&[bool]>,
    ) -> anyhow::Result<()> {
        tile.check(self.settings.width, self.settings.height, accum.len())?;
        let tracer = self.tracer();
        let (mut dropped, mut rays) = (0u64, 0u64);
        let mut wavefront = Wavefront::default();
        let (mut ids, mut owners, mut radiance) = (Vec::new(), Vec::new(), Vec::new());
        let mut pixels = tile_pixels(tile, skip).peekable();
        while pixels.peek().is_some() {
            // Whole pixels, about a batch of samples: each pixel adds its samples in order.
            ids.clear();
            owners.clear();
            while ids.len() < wavefront::BATCH {
                let Some((k, x, y)) = pixels.next() else {
                    break;
                };
                for sample in samples.clone() {
                    ids.push(SampleId { x, y, sample });
                    owners.push(k);
                }
            }
            let settings = &self.settings;
            wavefront.trace(
                &tracer,
                &self.tuner,
                settings,
                &ids,
                &mut rays,
                &mut radiance,
            );
            for (&k, l) in owners.iter().zip(&radiance) {
                let px = &mut accum[k];
                if l.is_finite() {
                    px[0] += l.x;
                    px[1] += l.y;
                    px[2] += l.z;
                } else {
                    dropped += 1;
                }
                px[3] += 1.0;
            }
        }
        if dropped > 0 {
            self.dropped.fetch_add(dropped, Ordering::Relaxed);
        }
        self.rays.fetch_add(rays, Ordering::Relaxed);
        Ok(())
    }
}

/// The pixels of `tile` in row order that `skip` (one flag per pixel of the tile) does not
/// skip: `(index in the tile, x, y)`.
fn tile_pixels(tile: Tile, skip: Option<&[bool]>) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
    (tile.y..tile.y + tile.h)
        .flat_map(move |y| (tile.x..tile.x + tile.w).map(move |x| (x, y)))
        .enumerate()
        .filter(move |&(k, _)| !skip.is_some_and(|s| s[k]))
        .map(|(k, (x, y))| (k, x, y))
}
