//! Many rays at once: [`SceneBvh::intersect_rays`] and [`SceneBvh::occluded_rays`] keep
//! [`LANES`] traversals going and take turns between them, one node or leaf of one ray at a
//! time. Before moving to the next ray, a turn prefetches what its ray visits next, so that
//! by its next turn that node is in the cache: the misses of sixteen rays overlap, where a
//! single traversal waits for each of its own. Each ray still takes the steps
//! [`SceneBvh::intersect_ray`] (or [`SceneBvh::occluded_ray`]) takes, in the same order, so
//! its answer is the same bits.
//!
//! Where what the rays visit stays in the cache there are no misses to overlap and the turns
//! only cost time, so the caller says which way a batch goes ([`BatchTrace`]; the renders
//! choose by timing both: [`crate::cpu::wavefront::BatchTuner`]).

use arrayvec::ArrayVec;

#[cfg(target_arch = "x86_64")]
use super::simd::Avx;
use super::simd::{ChildRef, Halves, NodeTest};
use super::{prefetch, Hit, RayData, SceneBvh, Stack, Walk};
use crate::scene::Scene;

/// How many traversals take turns.
const LANES: usize = 16;

/// How [`SceneBvh::intersect_rays`] and [`SceneBvh::occluded_rays`] trace a batch: the same
/// answers either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchTrace {
    /// Each ray's traversal to its end, then the next ray's.
    OneAfterAnother,
    /// [`LANES`] traversals taking turns, prefetching for each other.
    Interleaved,
}

impl SceneBvh {
    /// [`SceneBvh::intersect_ray`] of each ray of `rays`, into `out` (as long as `rays`),
    /// traced `how`.
    pub fn intersect_rays(
        &self,
        scene: &Scene,
        rays: &[RayData],
        (tmin, tmax): (f32, f32),
        how: BatchTrace,
        out: &mut [Option<Hit>],
    ) {
        assert_eq!(rays.len(), out.len(), "one answer per ray");
        if how == BatchTrace::OneAfterAnother {
            for (ray, hit) in rays.iter().zip(out) {
                *hit = self.intersect_ray(scene, ray, tmin, tmax);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, the one feature the function's code may use beyond
            // the baseline.
            return unsafe { self.intersect_rays_avx2(scene, rays, tmin, tmax, out) };
        }
        self.intersect_rays_with::<Halves>(scene, rays, tmin, tmax, out);
    }

    /// [`SceneBvh::occluded_ray`] of each ray of `rays` with its own `tmax`, into `out`,
    /// traced `how`.
    pub fn occluded_rays(
        &self,
        scene: &Scene,
        rays: &[RayData],
        (tmin, tmax): (f32, &[f32]),
        how: BatchTrace,
        out: &mut [bool],
    ) {
        assert!(
            rays.len() == tmax.len() && rays.len() == out.len(),
            "one tmax and one answer per ray"
        );
        if how == BatchTrace::OneAfterAnother {
            for ((ray, &tmax), blocked) in rays.iter().zip(tmax).zip(out) {
                *blocked = self.occluded_ray(scene, ray, tmin, tmax);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: as in intersect_rays.
            return unsafe { self.occluded_rays_avx2(scene, rays, tmin, tmax, out) };
        }
        self.occluded_rays_with::<Halves>(scene, rays, tmin, tmax, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn intersect_rays_avx2(
        &self,
        scene: &Scene,
        rays: &[RayData],
        tmin: f32,
        tmax: f32,
        out: &mut [Option<Hit>],
    ) {
        self.intersect_rays_with::<Avx>(scene, rays, tmin, tmax, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn occluded_rays_avx2(
        &self,
        scene: &Scene,
        rays: &[RayData],
        tmin: f32,
        tmax: &[f32],
        out: &mut [bool],
    ) {
        self.occluded_rays_with::<Avx>(scene, rays, tmin, tmax, out);
    }

    #[inline(always)]
    fn intersect_rays_with<T: NodeTest>(
        &self,
        scene: &Scene,
        rays: &[RayData],
        tmin: f32,
        tmax: f32,
        out: &mut [Option<Hit>],
    ) {
        if self.root == ChildRef::EMPTY {
            out.fill(None);
            return;
        }
        self.interleave(
            rays,
            |_| tmax,
            |k, walk, stack| {
                let going = self.closest_step::<T, true>(scene, &rays[k], walk, stack, tmin, tmax);
                if !going {
                    out[k] = walk.best;
                }
                going
            },
        );
    }

    #[inline(always)]
    fn occluded_rays_with<T: NodeTest>(
        &self,
        scene: &Scene,
        rays: &[RayData],
        tmin: f32,
        tmax: &[f32],
        out: &mut [bool],
    ) {
        if self.root == ChildRef::EMPTY {
            out.fill(false);
            return;
        }
        self.interleave(
            rays,
            |k| tmax[k],
            |k, walk, stack| match self
                .occluded_step::<T, true>(scene, &rays[k], walk, stack, tmin, tmax[k])
            {
                None => true,
                Some(blocked) => {
                    out[k] = blocked;
                    false
                }
            },
        );
    }

    /// Runs `step(k, walk, stack)` on ray `k`'s traversal in turns, [`LANES`] rays at a time,
    /// until each returns false (its traversal is over and `step` has written its answer);
    /// `tmax(k)` is ray `k`'s. The root must not be empty.
    #[inline(always)]
    fn interleave(
        &self,
        rays: &[RayData],
        tmax: impl Fn(usize) -> f32,
        mut step: impl FnMut(usize, &mut Walk, &mut Stack) -> bool,
    ) {
        let mut walks: ArrayVec<(usize, Walk, Stack), LANES> = ArrayVec::new();
        let mut next = 0;
        while next < rays.len() && !walks.is_full() {
            let walk = Walk::new(&rays[next], self.root, tmax(next));
            walks.push((next, walk, Stack::new()));
            next += 1;
        }
        while !walks.is_empty() {
            let mut i = 0;
            while i < walks.len() {
                let (k, walk, stack) = &mut walks[i];
                if step(*k, walk, stack) {
                    self.prefetch(walk.current);
                } else if next < rays.len() {
                    *k = next;
                    *walk = Walk::new(&rays[next], self.root, tmax(next));
                    stack.clear();
                    next += 1;
                } else {
                    walks.swap_remove(i);
                    continue;
                }
                i += 1;
            }
        }
    }

    /// Asks for the cache lines of what `r` names: the node, or the leaf's first two packets.
    #[inline(always)]
    fn prefetch(&self, r: ChildRef) {
        if r.is_leaf() {
            let k = r.packets();
            let n = k.len().min(2);
            prefetch(self.packets.as_ptr().wrapping_add(k.start), n);
        } else {
            prefetch(self.nodes.as_ptr().wrapping_add(r.index()), 1);
        }
    }
}
