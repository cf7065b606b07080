//! Many samples' paths traced breadth first: every path's shadow ray in one call of
//! [`SceneBvh::occluded_rays`], then every path's next segment in one call of
//! [`SceneBvh::intersect_rays`], which can interleave the rays' traversals so that one ray's
//! cache misses overlap another's work.
//!
//! Each path takes exactly the steps [`PathTracer::radiance`] takes ([`PathTracer::start`],
//! [`PathState::settle_shadow`], [`PathTracer::advance`]), and the BVH answers each ray with
//! the same hit whichever way it is traced, so a sample's radiance is the same bits either
//! way; only the order in which the rays are traced changes.
//!
//! Interleaving pays where the rays miss the cache and costs where they do not, which depends
//! on the scene, the view and the machine: [`BatchTuner`] times both ways as the render goes
//! and traces each kind of batch the way that has been faster (figures in
//! docs/cpu-backend.md). The image is the same bits whichever way wins.
//!
//! [`SceneBvh::intersect_rays`]: super::bvh::SceneBvh::intersect_rays
//! [`SceneBvh::occluded_rays`]: super::bvh::SceneBvh::occluded_rays
//! [`PathState::settle_shadow`]: super::integrator::PathState::settle_shadow

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use glam::Vec3;

use super::bvh::{BatchTrace, Hit, RayData};
use super::integrator::{pixel_ray, prefetch_hit, PathState, PathTracer};
use crate::render::{RenderSettings, Sampler};

/// How many paths a batch holds: enough rays to interleave, few enough that the paths' state
/// stays in the L2 cache.
pub const BATCH: usize = 512;

/// One sample to trace: pixel `(x, y)`, sample index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleId {
    pub x: u32,
    pub y: u32,
    pub sample: u32,
}

/// Buffers for tracing batches of paths, kept between batches.
#[derive(Default)]
pub struct Wavefront {
    paths: Vec<PathState>,
    /// The paths with a ray or a shadow ray still to trace.
    live: Vec<usize>,
    rays: Vec<RayData>,
    owners: Vec<usize>,
    hits: Vec<Option<Hit>>,
    shadow_tmax: Vec<f32>,
    blocked: Vec<bool>,
}

impl Wavefront {
    /// The radiance of each sample of `ids` in a render with `settings` (its camera, spp and
    /// seed), written to `out` in the same order, exactly as [`PathTracer::sample`] computes
    /// it, each batch of rays traced as `tuner` says. Adds the rays traced, closest hit and
    /// shadow, to `rays`.
    pub fn trace(
        &mut self,
        tracer: &PathTracer,
        tuner: &BatchTuner,
        settings: &RenderSettings,
        ids: &[SampleId],
        rays: &mut u64,
        out: &mut Vec<Vec3>,
    ) {
        let (spp, seed) = (settings.spp, settings.seed);
        self.paths.clear();
        self.paths.extend(ids.iter().map(|id| {
            let mut rng = Sampler::new(id.x, id.y, id.sample, spp, seed);
            let (origin, dir) = pixel_ray(&settings.camera, (id.x, id.y), &mut rng);
            tracer.start(origin, dir, rng)
        }));
        self.live.clear();
        self.live.extend(0..ids.len());
        let mut kind = BatchKind::Camera;
        while !self.live.is_empty() {
            *rays += self.settle_shadows(tracer, tuner);
            self.gather_rays();
            *rays += self.rays.len() as u64;
            self.hits.clear();
            self.hits.resize(self.rays.len(), None);
            let (scene, bvh, window) = (tracer.scene, tracer.bvh, (0.0, f32::INFINITY));
            let (batch, hits) = (&self.rays, &mut self.hits);
            tuner.run(kind, batch.len(), |how, r| {
                bvh.intersect_rays(scene, &batch[r.clone()], window, how, &mut hits[r])
            });
            kind = BatchKind::Bounce;
            self.advance_all(tracer);
        }
        out.clear();
        out.extend(self.paths.iter().map(|p| p.radiance));
    }

    /// Advances each path that traced a segment with its hit, asking the cache for later
    /// hits' triangles ahead of their turn ([`prefetch_hit`]: the shading's first reads miss
    /// on large scenes, and a path's turn is long enough to hide a miss for the next ones).
    fn advance_all(&mut self, tracer: &PathTracer) {
        const AHEAD: usize = 4;
        let scene = tracer.scene;
        for hit in self.hits.iter().take(2 * AHEAD).flatten() {
            prefetch_hit(scene, hit, 0);
        }
        for hit in self.hits.iter().take(AHEAD).flatten() {
            prefetch_hit(scene, hit, 1);
        }
        for (j, &i) in self.owners.iter().enumerate() {
            if let Some(hit) = self.hits.get(j + 2 * AHEAD).copied().flatten() {
                prefetch_hit(scene, &hit, 0);
            }
            if let Some(hit) = self.hits.get(j + AHEAD).copied().flatten() {
                prefetch_hit(scene, &hit, 1);
            }
            tracer.advance(&mut self.paths[i], self.hits[j]);
        }
    }

    /// Traces the live paths' pending shadow rays and settles them; returns how many there
    /// were.
    fn settle_shadows(&mut self, tracer: &PathTracer, tuner: &BatchTuner) -> u64 {
        let mut pending_count = 0;
        self.rays.clear();
        self.owners.clear();
        self.shadow_tmax.clear();
        for &i in &self.live {
            let Some(pending) = self.paths[i].shadow else {
                continue;
            };
            pending_count += 1;
            match RayData::new(pending.ray.origin, pending.ray.dir) {
                Some(ray) => {
                    self.rays.push(ray);
                    self.owners.push(i);
                    self.shadow_tmax.push(pending.ray.tmax);
                }
                // What PathTracer::blocks says of a ray it cannot trace.
                None => self.paths[i].settle_shadow(false),
            }
        }
        self.blocked.clear();
        self.blocked.resize(self.rays.len(), false);
        let (scene, bvh) = (tracer.scene, tracer.bvh);
        let (batch, tmax, blocked) = (&self.rays, &self.shadow_tmax, &mut self.blocked);
        tuner.run(BatchKind::Shadow, batch.len(), |how, r| {
            let window = (0.0, &tmax[r.clone()]);
            bvh.occluded_rays(scene, &batch[r.clone()], window, how, &mut blocked[r])
        });
        for (&i, &blocked) in self.owners.iter().zip(&self.blocked) {
            self.paths[i].settle_shadow(blocked);
        }
        pending_count
    }

    /// Collects the next segment of every live path that has one it can trace; the others
    /// are over (as [`PathTracer::radiance`] stops at a segment it cannot trace).
    fn gather_rays(&mut self) {
        self.rays.clear();
        self.owners.clear();
        let (paths, rays, owners) = (&self.paths, &mut self.rays, &mut self.owners);
        self.live.retain(
            |&i| match paths[i].ray.and_then(|(o, d)| RayData::new(o, d)) {
                Some(ray) => {
                    rays.push(ray);
                    owners.push(i);
                    true
                }
                None => false,
            },
        );
    }
}

/// The kinds of batch [`BatchTuner`] times apart: camera rays are coherent, bounces are not,
/// and shadow rays stop at their first hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    Camera,
    Bounce,
    Shadow,
}

/// Chooses how to trace each kind of batch ([`BatchTrace`]) by timing both ways on the same
/// batches: the first [`BatchTuner::OPENING`] batches of a kind, and every
/// [`BatchTuner::EXPLORE`]th after them, are traced half one way and half the other, and the
/// ratio of the two halves' times per ray (a paired comparison: the halves come from the same
/// pixels, where batches from different parts of the image differ in cost many times over)
/// goes into a moving average of its logarithm. The other batches go the way that average
/// says is faster. Shared by the threads of a render (relaxed atomics: a lost update only
/// delays the choice).
#[derive(Debug, Default)]
pub struct BatchTuner {
    kinds: [KindTimes; 3],
}

#[derive(Debug, Default)]
struct KindTimes {
    batches: AtomicU32,
    /// `f32` bits of the moving average of `ln(interleaved / one after another)`, per ray.
    log_ratio: AtomicU32,
}

impl BatchTuner {
    /// Batches split in two at the start, before the first choice.
    pub const OPENING: u32 = 8;
    /// After the opening, one batch in this many is split.
    pub const EXPLORE: u32 = 32;
    /// Batches of fewer rays are never split (their halves' times are noise).
    pub const MIN_SPLIT: usize = 128;

    /// Traces a batch of `rays` rays of `kind`: `trace(how, range)` must trace the rays of
    /// `range` (indices into the batch) the way `how`. Calls it once for the whole batch, or
    /// twice, once per way, on two halves it times.
    pub fn run(
        &self,
        kind: BatchKind,
        rays: usize,
        mut trace: impl FnMut(BatchTrace, Range<usize>),
    ) {
        let k = &self.kinds[kind as usize];
        if rays < Self::MIN_SPLIT {
            return trace(self.faster(kind), 0..rays);
        }
        let n = k.batches.fetch_add(1, Ordering::Relaxed);
        if n >= Self::OPENING && n % Self::EXPLORE != 0 {
            return trace(self.faster(kind), 0..rays);
        }
        // Which way takes the first half alternates, so that neither always gets the same one.
        let order = if n % 2 == 0 {
            [BatchTrace::OneAfterAnother, BatchTrace::Interleaved]
        } else {
            [BatchTrace::Interleaved, BatchTrace::OneAfterAnother]
        };
        let half = rays / 2;
        let mut ns = [0.0f64; 2];
        for (how, range) in order.into_iter().zip([0..half, half..rays]) {
            let start = Instant::now();
            trace(how, range.clone());
            ns[how as usize] = start.elapsed().as_nanos() as f64 / range.len() as f64;
        }
        self.record(kind, n, (ns[1] / ns[0]).ln() as f32);
    }

    /// The way the moving average says is faster for `kind` (one after another until a
    /// split batch has been timed).
    pub fn faster(&self, kind: BatchKind) -> BatchTrace {
        if self.log_ratio(kind) < 0.0 {
            BatchTrace::Interleaved
        } else {
            BatchTrace::OneAfterAnother
        }
    }

    /// The moving average of `ln(interleaved / one after another)` time per ray for `kind`
    /// (0 before a split batch).
    pub fn log_ratio(&self, kind: BatchKind) -> f32 {
        f32::from_bits(self.kinds[kind as usize].log_ratio.load(Ordering::Relaxed))
    }

    /// Adds the `n`th batch's log ratio: the mean of the opening's, a moving average after it.
    fn record(&self, kind: BatchKind, n: u32, log_ratio: f32) {
        const WEIGHT: f32 = 0.25;
        if !log_ratio.is_finite() {
            return;
        }
        let old = self.log_ratio(kind);
        let weight = if n < Self::OPENING {
            1.0 / (n + 1) as f32
        } else {
            WEIGHT
        };
        let new = old + (log_ratio - old) * weight;
        self.kinds[kind as usize]
            .log_ratio
            .store(new.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls `run` makes for one batch of `rays` rays.
    fn calls(tuner: &BatchTuner, rays: usize) -> Vec<(BatchTrace, Range<usize>)> {
        let mut calls = Vec::new();
        tuner.run(BatchKind::Bounce, rays, |how, r| calls.push((how, r)));
        calls
    }

    #[test]
    fn split_batches_trace_each_ray_once_half_each_way() {
        let tuner = BatchTuner::default();
        for n in 0..BatchTuner::OPENING {
            let c = calls(&tuner, 301);
            assert_eq!(c.len(), 2, "opening batch {n}");
            assert_ne!(c[0].0, c[1].0, "both ways");
            assert_eq!((c[0].1.start, c[0].1.end, c[1].1.end), (0, 150, 301));
            assert_eq!(c[1].1.start, 150);
        }
        // Then one batch in EXPLORE is split, and small batches never are.
        let split = (0..2 * BatchTuner::EXPLORE)
            .filter(|_| calls(&tuner, 301).len() == 2)
            .count();
        assert_eq!(split, 2);
        let small = calls(&tuner, BatchTuner::MIN_SPLIT - 1);
        assert_eq!(
            small,
            vec![(
                tuner.faster(BatchKind::Bounce),
                0..BatchTuner::MIN_SPLIT - 1
            )]
        );
    }

    #[test]
    fn the_way_with_the_smaller_average_time_is_chosen() {
        let tuner = BatchTuner::default();
        assert_eq!(tuner.faster(BatchKind::Shadow), BatchTrace::OneAfterAnother);
        // The opening averages: ln 0.5 and ln 3 make ln 1.5 / 2 > 0.
        tuner.record(BatchKind::Shadow, 0, 0.5f32.ln());
        assert_eq!(tuner.faster(BatchKind::Shadow), BatchTrace::Interleaved);
        tuner.record(BatchKind::Shadow, 1, 3.0f32.ln());
        assert!((tuner.log_ratio(BatchKind::Shadow) - 1.5f32.ln() / 2.0).abs() < 1e-6);
        assert_eq!(tuner.faster(BatchKind::Shadow), BatchTrace::OneAfterAnother);
        // After it, a moving average that follows a lasting change; kinds are apart.
        for n in 100..120 {
            tuner.record(BatchKind::Shadow, n, 0.8f32.ln());
        }
        assert_eq!(tuner.faster(BatchKind::Shadow), BatchTrace::Interleaved);
        assert_eq!(tuner.faster(BatchKind::Camera), BatchTrace::OneAfterAnother);
        tuner.record(BatchKind::Shadow, 120, f32::NAN);
        assert!(tuner.log_ratio(BatchKind::Shadow).is_finite());
    }
}
