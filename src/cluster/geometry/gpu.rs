//! A GPU rank's domain: the GASes of the groups it holds under one IAS ([`Accel`], built as
//! one process builds them, the other groups being empty), and its rays' tests cast against
//! them, one launch per step of a batch's walk ([`RaycastPipeline`]).
//!
//! The ray cast runs no any-hit program, so a hit the scene lets through (a cut-out's hole, a
//! see-through surface: [`Scene::passes_through`]) is tested here on the host, and its ray
//! cast again from just past it. Shading stays on the CPU, as on a CPU rank.

use std::sync::{Arc, Mutex};

use crate::cpu::bvh::Hit;
use crate::cpu::domains::{next_up, DomainGeometry};
use crate::optix::accel::{Accel, AccelError, AccelStats};
use crate::optix::pathtracer::OptixOptions;
use crate::optix::raycast::{Ray, RayHit, RaycastError, RaycastPipeline};
use crate::optix::{CudaError, DeviceContext, Gpu, OptixError};
use crate::scene::Scene;

use super::walk::{Answer, Intersector, Test};
use super::RankScene;

/// Why a rank's GPU could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GpuDomainError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Optix(#[from] OptixError),
    #[error(transparent)]
    Accel(#[from] AccelError),
    #[error(transparent)]
    Raycast(#[from] RaycastError),
}

/// A rank's domain on its GPU.
pub struct GpuDomain {
    /// `None` where the rank holds no triangle: every ray misses.
    accel: Option<Accel>,
    /// Behind a lock: a pipeline may be used from one thread at a time, and the walk's
    /// threads share the domain (one launch per step is cast at a time anyway).
    pipeline: Mutex<RaycastPipeline>,
    _ctx: Arc<DeviceContext>,
}

impl GpuDomain {
    /// Builds the GASes of `part`'s groups that hold triangles and the IAS over them on GPU
    /// `options.device`, and the ray-cast pipeline.
    pub fn build(part: &Scene, options: &OptixOptions) -> Result<GpuDomain, GpuDomainError> {
        let gpu = Gpu::open(options.device)?;
        let ctx = DeviceContext::new(&gpu, &options.context)?;
        let accel = match part.triangle_count() {
            0 => None,
            _ => Some(Accel::build(&ctx, part, &options.accel)?),
        };
        let pipeline = RaycastPipeline::new(&ctx)?;
        Ok(GpuDomain {
            accel,
            pipeline: Mutex::new(pipeline),
            _ctx: ctx,
        })
    }

    /// What the build made (`None`: no triangle, nothing built).
    pub fn stats(&self) -> Option<&AccelStats> {
        self.accel.as_ref().map(Accel::stats)
    }

    /// Answers a rank's tests on this GPU; `scene` is the rank's part, the one built.
    pub fn answer(&self, scene: &Scene, tests: &[Test]) -> Result<Vec<Answer>, String> {
        let Some(accel) = &self.accel else {
            return answer_by_casting(scene, tests, |rays| Ok(vec![RayHit::miss(); rays.len()]));
        };
        let pipeline = self.pipeline.lock().unwrap_or_else(|e| e.into_inner());
        answer_by_casting(scene, tests, |rays| {
            pipeline
                .cast(accel, rays)
                .map_err(|e| format!("a ray cast of {} rays: {e}", rays.len()))
        })
    }
}

/// What tests a rank's rays: its GPU where it has one, else its CPU BVH.
pub struct RankTests<'a> {
    pub scene: &'a RankScene,
    pub gpu: Option<&'a GpuDomain>,
}

impl Intersector for RankTests<'_> {
    fn answer(&self, tests: &[Test]) -> Result<Vec<Answer>, String> {
        match self.gpu {
            Some(gpu) => gpu.answer(&self.scene.geometry.scene, tests),
            None => self.scene.geometry.answer(tests),
        }
    }

    fn cpu(&self) -> Option<&DomainGeometry> {
        match self.gpu {
            Some(_) => None,
            None => Some(&self.scene.geometry),
        }
    }
}

/// Answers `tests` with `cast`, which returns each ray's closest hit with `tmin <= t <=
/// tmax` among all the triangles, as a device's ray cast without any-hit programs does. A hit
/// the scene lets through is cast again from past it; a segment's hit is kept where it
/// precedes the test's best. A hit that names a triangle `scene` lacks, or lies before its
/// ray's `tmin`, is an error (a device that went wrong), so the loop always ends.
pub fn answer_by_casting(
    scene: &Scene,
    tests: &[Test],
    mut cast: impl FnMut(&[Ray]) -> Result<Vec<RayHit>, String>,
) -> Result<Vec<Answer>, String> {
    let mut rays: Vec<Ray> = tests.iter().map(ray_of).collect();
    let mut answers: Vec<Option<Answer>> = vec![None; tests.len()];
    let mut pending: Vec<usize> = (0..tests.len()).collect();
    while !pending.is_empty() {
        let batch: Vec<Ray> = pending.iter().map(|&i| rays[i]).collect();
        let hits = cast(&batch)?;
        if hits.len() != batch.len() {
            return Err(format!("{} hits for {} rays", hits.len(), batch.len()));
        }
        let mut again = Vec::new();
        for (&i, found) in pending.iter().zip(hits) {
            let hit = hit_of(scene, &rays[i], &found)?;
            match hit {
                Some(h) if scene.passes_through(h.group, h.prim, h.u, h.v) => {
                    rays[i].tmin = next_up(h.t);
                    again.push(i);
                }
                _ => answers[i] = Some(answer_of(&tests[i], hit)),
            }
        }
        pending = again;
    }
    Ok(answers.into_iter().flatten().collect())
}

/// The device ray of a test: from `t = 0` to the test's bound (for a segment, up to and
/// including its best hit's distance, the total order settling a tie).
fn ray_of(test: &Test) -> Ray {
    let (ray, tmax) = match test {
        Test::Closest { ray, best } => (ray, best.map_or(f32::INFINITY, |b| next_up(b.t))),
        Test::Occluded { ray, tmax } => (ray, *tmax),
    };
    Ray {
        origin: ray.origin.to_array(),
        tmin: 0.0,
        dir: ray.dir.to_array(),
        tmax,
    }
}

/// A device hit as a CPU hit (`None` for a miss), checked against `scene` and `ray`.
fn hit_of(scene: &Scene, ray: &Ray, found: &RayHit) -> Result<Option<Hit>, String> {
    if found.is_miss() {
        return Ok(None);
    }
    let held = scene
        .groups
        .get(found.group as usize)
        .is_some_and(|g| (found.prim as usize) < g.triangle_count());
    // A NaN distance fails the comparison too.
    let starts_after = found.t.partial_cmp(&ray.tmin).is_some_and(|o| o.is_ge());
    if !held || !starts_after {
        return Err(format!(
            "the device found triangle {} of group {} at t = {}, on a ray from t = {}: a \
             triangle this rank does not hold, or a hit before the ray starts",
            found.prim, found.group, found.t, ray.tmin
        ));
    }
    Ok(Some(Hit {
        group: found.group,
        prim: found.prim,
        t: found.t,
        u: found.u,
        v: found.v,
    }))
}

/// A test's answer given the domain's closest kept hit on its ray.
fn answer_of(test: &Test, hit: Option<Hit>) -> Answer {
    match *test {
        Test::Closest { best, .. } => Answer::Closest(match hit {
            Some(h) if best.is_none_or(|b| h.precedes(&b)) => Some(h),
            _ => best,
        }),
        Test::Occluded { .. } => Answer::Occluded(hit.is_some()),
    }
}
