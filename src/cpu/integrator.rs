//! The path tracer: unidirectional, with next-event estimation on the area lights and multiple
//! importance sampling (power heuristic) against BSDF sampling.
//!
//! This is the reference the GPU ray-generation program mirrors, including the order in which
//! random numbers are drawn, so that both backends estimate the same integral with the same
//! estimator. A sample is a pure function of (pixel, sample index, seed, scene, settings).
//!
//! # The estimator
//!
//! A path starts at the camera; segment `d = 1, 2, ...` is traced from vertex `d - 1`. At most
//! `max_depth` segments are traced. At the vertex a segment reaches:
//!
//! - *escape*: add `throughput * environment`. A uniform environment (`--env`, the default
//!   sky) is not light-sampled, so a BSDF-sampled escape has full weight. An environment map
//!   (`--env-map`) is: the escape adds `throughput * L_map(dir) * w`, with `w` the power
//!   heuristic of the BSDF's pdf against the map's (see *Environment maps* below), or 1 after
//!   the camera or a Dirac lobe.
//! - *emitter hit* on its front face (either face with [`Scene::two_sided_lights`]): add
//!   `throughput * Le * w`, where `w = 1` for the camera segment and after a Dirac lobe, and
//!   otherwise the power-heuristic weight of BSDF sampling against light sampling,
//!   `w = p_bsdf^2 / (p_bsdf^2 + p_light^2)`, both as solid-angle densities at the previous
//!   vertex: `p_light = P(light) / area * t^2 / |cos_light|`. A hit on a back face adds
//!   nothing (the surface still scatters with its material).
//! - if `d == max_depth` the path ends. Otherwise, at a non-Dirac material, *next-event
//!   estimation*: pick a light with probability proportional to its power (`luminance(Le) *
//!   area`, or what maps leave of it: [`crate::scene::light_power`]), a uniform point `q` on
//!   it, and if the shading point lies on the light's emitting side and the shadow ray
//!   reaches `q`, add `throughput * f cos * Le * w_light / p_light` with
//!   `w_light = p_light^2 / (p_light^2 + p_bsdf^2)`. (A path of `d + 1` segments is then
//!   counted by both strategies, and only paths of at most `max_depth` segments are.)
//! - *BSDF sampling* of the next direction: `throughput *= f cos / pdf` (the sample's weight).
//! - *Russian roulette* before segment 4 and every later one (i.e. once `d >= 3`): the path
//!   survives with probability `q = min(max component of throughput, 0.95)` and its throughput
//!   is divided by `q`.
//!
//! # One-sided lights
//!
//! An area light emits `Le` from its front face only (the side of the winding's normal
//! `(p1 - p0) x (p2 - p0)`), unless the scene sets [`Scene::two_sided_lights`]. The emitted
//! radiance is then `Le(q, w) = Le * [n_light . w > 0]`, and both strategies estimate the
//! integral of that function: a light point sampled from behind contributes zero (it is
//! sampled with the same density as before: light selection by power, uniform on the area,
//! since one-sided power is proportional to two-sided power), and an emitter hit from behind
//! adds zero. The densities `p_light` and `p_bsdf` of every path are unchanged, so the MIS
//! weights of the paths that do carry light still sum to one. With two-sided lights the code
//! path is bit for bit the one gasworks had before one-sided lights.
//!
//! # Cut-out emitters
//!
//! An emissive triangle with a `map_d` mask emits only where the mask keeps the surface
//! ([`Scene::is_cut_out`]): `Le(q) = Le * [q not in a hole]`. BSDF sampling never hits a hole
//! (the BVH skips it), and a light point sampled in a hole contributes zero, with no shadow
//! ray. The light is picked by the power of its opaque part ([`crate::scene::light_power`])
//! but sampled uniformly over the area of its whole triangle, so `p_light` is the same density
//! for both strategies and the MIS weights of the paths that carry light sum to one: unbiased,
//! with some variance spent on the holes.
//!
//! # Emission maps
//!
//! An emitter whose material has a `map_Ke` emits `Le(q) = Ke * map(uv(q))`
//! ([`crate::scene::Material::emission_at`]; Ke alone where the mesh has no UVs), at a hit and
//! at a light point alike. Its light is picked by the power the map leaves and sampled
//! uniformly over its triangle, as a cut-out is.
//!
//! # Environment maps
//!
//! With an environment map that is not black, next-event estimation has one more light to
//! choose: the map, with probability `P(env)` = 1 when the scene has no area lights and
//! otherwise the share chosen for the render (measured before it by
//! [`super::environment_share::probe`], or `--env-share`; 1/2 where neither ran); an area
//! light is then picked by power with the light-choice number rescaled to the rest of the
//! interval, so each has `(1 - P(env))` times the probability it
//! has without a map. The map is sampled by [`crate::scene::EnvironmentMap::sample`] (its
//! luminance times the solid angle of each texel) with the point-on-light numbers, and a
//! shadow ray to infinity decides visibility. Its density as a light is
//! `p_env = P(env) pdf_map(wi)`, in the power heuristic both of the map's sample and of a
//! BSDF sample that escapes. Scenes without a map draw and use every number as before.
//!
//! # See-through materials
//!
//! A material with a dissolve below 1 is there with probability `d` at each hit
//! ([`Scene::is_dissolved`], decided in the BVH as cut-outs are): a ray passes it otherwise.
//! Shadow rays and BSDF rays cross it by the same rule, so both strategies estimate the same
//! visibility, `1 - d` through each layer, and the MIS weights stay as they are. Emitters are
//! opaque.
//!
//! # Bump and normal maps
//!
//! A material's bump or normal map bends the shading normal of its hits
//! ([`crate::scene::bump`], in [`SurfacePoint::new`]); nothing else changes. The BSDF is
//! evaluated and sampled about the bent normal, and, as with interpolated vertex normals,
//! directions on the wrong side of the geometric normal carry nothing
//! ([`super::material::ShadingFrame`]): the estimator stays the one above, of a surface whose
//! shading normal varies.
//!
//! # Random numbers
//!
//! Only [`Sampler::new`]`(x, y, sample, spp, seed)`, drawn in this order:
//! 1. pixel jitter `jx`, `jy` (2 numbers): the primary ray goes through the image-plane point
//!    [`crate::scene::PixelFilter::place`] makes of them (`(x + jx, y + jy)` for the box);
//!    then, with a thin lens only (`--lens-radius`), the lens point (2 numbers, one 2D slot:
//!    a pinhole draws none, so its later slots are those of every render before the lens);
//! 2. at every vertex where the path may continue (hit, and `d < max_depth`), exactly 7
//!    numbers in 5 slots, drawn whether or not they are used: light choice (1D), point on the
//!    light (2D), BSDF lobe or Fresnel choice (1D), BSDF direction (2D), Russian roulette
//!    (1D).
//!
//! A slot is one dimension (or pair) of Owen-scrambled Sobol' points over the frame's
//! samples, pixels in Z order, so each slot's numbers are stratified across a pixel's samples
//! and across the samples of neighbouring pixels together (blue-noise error, [`Sampler`]); the
//! fixed count keeps every vertex depth in the same slots in every sample.
//!
//! # Rays
//!
//! Secondary and shadow rays start at the hit point pushed off the surface by
//! [`offset_ray_origin`] (towards the side they leave on) and use `tmin = 0`. A shadow ray
//! ends at the light point pushed back towards the shading point the same way, exclusive.
//!
//! # Steps
//!
//! A path is a [`PathState`] between two vertices: its random numbers' position, throughput,
//! radiance so far, the BSDF pdf of its last segment, the ray to trace next and the shadow
//! ray of next-event estimation with what it adds when it arrives or is blocked.
//! [`PathTracer::advance`] takes it over one vertex given the closest hit of its ray, and
//! [`PathState::settle_shadow`] adds the light sample once its shadow ray is answered, before
//! the next vertex. [`PathTracer::radiance`] answers both rays at once from its BVH; a render
//! whose geometry is spread over processes answers them where the geometry lies. The sums
//! happen in the same order, so the radiance is the same bit for bit.

// Tests are written `!(x > 0.0)` on purpose: a NaN must fail them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use glam::{Vec2, Vec3};

use super::bvh::{prefetch, Hit, RayData, SceneBvh};
use super::material::{Bsdf, ShadingFrame};
use super::sampling::{power_heuristic, uniform_triangle};
use crate::render::Sampler;
use crate::scene::camera::CameraFrame;
use crate::scene::light_power::{environment_share, fixed_environment_share, light_cdf};
use crate::scene::{bump, EnvironmentMap, Scene};

/// Picks an area light with probability proportional to its weight in [`light_cdf`] (its
/// power up to a constant; plain area when every light has zero luminance), or the
/// environment map (see the module comment).
#[derive(Clone, Debug, Default)]
pub struct LightSampler {
    /// `cdf[i]` = probability of picking a light with index `<= i`; the last entry is 1.
    cdf: Vec<f32>,
    /// [`Scene::light_index_table`]: the table the GPU backend uploads too.
    index: Vec<Option<Vec<u32>>>,
    /// `P(env)`: the probability of sampling the environment map; 0 without a map (or with a
    /// black one), 1 without area lights, else the render's share ([`environment_share`]).
    env_share: f32,
}

/// What next-event estimation samples: the environment map or an area light.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LightChoice {
    Environment,
    Area(usize),
}

impl LightSampler {
    pub fn new(scene: &Scene) -> LightSampler {
        Self::with_environment_share(scene, environment_share(scene))
    }

    /// The sampler of `scene` with `P(env)` = `share` (where the scene has a map and area
    /// lights; [`environment_share`]'s 0 or 1 otherwise): what
    /// [`super::environment_share::probe`] samples with before any share is chosen.
    pub fn with_environment_share(scene: &Scene, share: f32) -> LightSampler {
        LightSampler {
            cdf: light_cdf(scene),
            index: scene.light_index_table(),
            env_share: fixed_environment_share(scene).unwrap_or(share),
        }
    }

    /// Whether next-event estimation has anything to sample: an area light or a map.
    pub fn can_sample(&self) -> bool {
        !self.cdf.is_empty() || self.env_share > 0.0
    }

    /// `P(env)`: the probability that [`LightSampler::choose`] picks the environment map.
    pub fn environment_share(&self) -> f32 {
        self.env_share
    }

    /// The light the light-choice number `u` picks: the environment map for `u < P(env)`,
    /// else the area light [`LightSampler::pick`] gives for `u` rescaled to the rest of
    /// `[0, 1)` (`u` itself without a map, so the choices of map-less scenes are unchanged).
    pub fn choose(&self, u: f32) -> LightChoice {
        if self.env_share > 0.0 {
            if u < self.env_share || self.cdf.is_empty() {
                return LightChoice::Environment;
            }
            let rest = (u - self.env_share) / (1.0 - self.env_share);
            return LightChoice::Area(self.pick(rest.min(1.0 - f32::EPSILON / 2.0)));
        }
        LightChoice::Area(self.pick(u))
    }

    /// The selection CDF ([`light_cdf`]), as the GPU backend uploads it.
    pub fn cdf(&self) -> &[f32] {
        &self.cdf
    }

    /// The light whose CDF interval contains `u`: the first `i` with `u < cdf[i]`.
    pub fn pick(&self, u: f32) -> usize {
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }

    /// The probability that [`LightSampler::choose`] returns area light `i` for a uniform `u`:
    /// `(cdf[i] - cdf[i - 1]) (1 - P(env))` (exactly `cdf[i] - cdf[i - 1]` without a map).
    pub fn probability(&self, i: usize) -> f32 {
        let lo = if i == 0 { 0.0 } else { self.cdf[i - 1] };
        (self.cdf[i] - lo) * (1.0 - self.env_share)
    }

    /// The light index of a triangle, if it is one.
    pub fn light_of(&self, group: u32, prim: u32) -> Option<usize> {
        let i = *self
            .index
            .get(group as usize)?
            .as_ref()?
            .get(prim as usize)?;
        (i != crate::scene::NO_LIGHT).then_some(i as usize)
    }
}

/// Pushes a point off a surface along `n` (the geometric normal, on the side the new ray
/// leaves) far enough that a ray from it cannot hit the surface it starts on:
/// `p + n * max(scale / 32768, 1 / 65536)`, `scale` being the largest coordinate magnitude of
/// the triangle the point lies on ([`triangle_scale`]).
///
/// Why the triangle's scale and not the point's own coordinates: both the hit point (from the
/// barycentrics) and the next ray's test against that triangle round at the scale of its
/// vertices, about `scale / 2^23` per operation; 2^-15 of it is at least 256 ulps. The
/// per-component offsets of Wächter and Binder (Ray Tracing Gems, 2019) move a coordinate by
/// 256 ulps *of that coordinate*, which near a plane through the origin falls short of that
/// rounding, so shadow rays from such a wall hit it again (figures: docs/cpu-backend.md).
#[inline]
pub fn offset_ray_origin(p: Vec3, n: Vec3, scale: f32) -> Vec3 {
    p + n * offset_distance(scale)
}

/// The distance [`offset_ray_origin`] moves a point of a triangle of scale `scale`.
#[inline]
pub fn offset_distance(scale: f32) -> f32 {
    const RELATIVE: f32 = 1.0 / 32768.0;
    const MINIMUM: f32 = 1.0 / 65536.0;
    (scale * RELATIVE).max(MINIMUM)
}

/// The largest coordinate magnitude of a triangle's corners: the scale at which computations
/// with it round.
#[inline]
pub fn triangle_scale(p0: Vec3, p1: Vec3, p2: Vec3) -> f32 {
    p0.abs().max(p1.abs()).max(p2.abs()).max_element()
}

/// What the integrator needs to know about a hit point.
#[derive(Clone, Copy, Debug)]
pub struct SurfacePoint {
    /// The hit point, interpolated from the vertices with the barycentrics.
    pub p: Vec3,
    /// Unit geometric normal as the winding gives it.
    pub n_geo: Vec3,
    /// Unit interpolated vertex normal, or `n_geo` when the mesh has none (or it degenerates),
    /// bent by the material's bump or normal map where it has one and the mesh has UVs
    /// ([`crate::scene::bump`]).
    pub n_shade: Vec3,
    /// Interpolated texture coordinates, when the mesh has them.
    pub uv: Option<Vec2>,
    pub material: u32,
    /// [`triangle_scale`] of the hit triangle: how far [`offset_ray_origin`] moves rays off it.
    pub scale: f32,
}

impl SurfacePoint {
    /// With `w = 1 - u - v`: `p = w p0 + u p1 + v p2`, `n_geo = normalize((p1 - p0) x (p2 - p0))`,
    /// `n_shade = normalize(w n0 + u n1 + v n2)` (then bent by a bump map:
    /// [`bump::bent_normal`]), `uv = w uv0 + u uv1 + v uv2`.
    pub fn new(scene: &Scene, hit: &Hit) -> SurfacePoint {
        let g = &scene.groups[hit.group as usize];
        let prim = hit.prim as usize;
        let [i0, i1, i2] = g.indices[prim].map(|i| i as usize);
        let (u, v) = (hit.u, hit.v);
        let w = 1.0 - u - v;
        let [p0, p1, p2] = [g.positions[i0], g.positions[i1], g.positions[i2]];
        let p = w * p0 + u * p1 + v * p2;
        let n_geo = (p1 - p0).cross(p2 - p0).normalize();
        let n_shade = if g.normals.is_empty() {
            n_geo
        } else {
            let n = (w * g.normals[i0] + u * g.normals[i1] + v * g.normals[i2]).normalize();
            if n.is_finite() {
                n
            } else {
                n_geo
            }
        };
        let uv = g.uv_at(prim, u, v);
        let material = g.face_materials[prim];
        let mut n_shade = n_shade;
        if let (Some(map), Some(at)) = (scene.materials[material as usize].bump, uv) {
            let corners = [g.uvs[i0], g.uvs[i1], g.uvs[i2]];
            if let Some((dpdu, dpdv)) = bump::uv_tangents([p0, p1, p2], corners) {
                n_shade = bump::bent_normal(&map, &scene.textures, n_shade, dpdu, dpdv, at);
            }
        }
        SurfacePoint {
            p,
            n_geo,
            n_shade,
            uv,
            material,
            scale: triangle_scale(p0, p1, p2),
        }
    }
}

/// Asks the cache for what [`SurfacePoint::new`] reads of `hit` from memory (a hint, for
/// shading many hits in turn): at `stage` 0 the triangle's vertex indices and material, at 1
/// (the indices read, so best some time after stage 0) its vertices' positions, normals and
/// texture coordinates.
#[inline(always)]
pub fn prefetch_hit(scene: &Scene, hit: &Hit, stage: u32) {
    let g = &scene.groups[hit.group as usize];
    let prim = hit.prim as usize;
    if stage == 0 {
        prefetch(g.indices.as_ptr().wrapping_add(prim), 1);
        prefetch(g.face_materials.as_ptr().wrapping_add(prim), 1);
        return;
    }
    let Some(corners) = g.indices.get(prim) else {
        return;
    };
    for &i in corners {
        let i = i as usize;
        prefetch(g.positions.as_ptr().wrapping_add(i), 1);
        if !g.normals.is_empty() {
            prefetch(g.normals.as_ptr().wrapping_add(i), 1);
        }
        if !g.uvs.is_empty() {
            prefetch(g.uvs.as_ptr().wrapping_add(i), 1);
        }
    }
}

impl SurfacePoint {
    /// The origin of a ray leaving the surface along `wi`: the point pushed off by
    /// [`offset_ray_origin`] to the side of the geometric normal `wi` leaves on (the front
    /// for `wi . n_geo >= 0`).
    #[inline]
    pub fn origin_towards(&self, wi: Vec3) -> Vec3 {
        let side = if wi.dot(self.n_geo) >= 0.0 { 1.0 } else { -1.0 };
        offset_ray_origin(self.p, side * self.n_geo, self.scale)
    }
}

/// The camera ray of a sample of pixel `(x, y)`, from its first numbers: the pixel filter's
/// jitter, then ([`camera_ray`]) the lens point. The `--aov` layers trace the same rays.
pub fn pixel_ray(camera: &CameraFrame, (x, y): (u32, u32), rng: &mut Sampler) -> (Vec3, Vec3) {
    let (jx, jy) = rng.next_2d();
    let (px, py) = camera.filter.place(x, y, jx, jy);
    camera_ray(camera, px, py, rng)
}

/// The camera ray (origin, unit direction) through the film point `(px, py)`: from the eye
/// for a pinhole, from a point of the thin lens drawn from `rng` otherwise. A pinhole draws
/// no lens numbers, so its renders keep every later slot's numbers.
pub fn camera_ray(camera: &CameraFrame, px: f32, py: f32, rng: &mut Sampler) -> (Vec3, Vec3) {
    if camera.lens.is_pinhole() {
        (camera.eye, camera.direction(px, py))
    } else {
        let (l1, l2) = rng.next_2d();
        camera.thin_lens_ray(px, py, l1, l2)
    }
}

/// The path tracer over one scene and its BVH.
pub struct PathTracer<'a> {
    pub scene: &'a Scene,
    pub bvh: &'a SceneBvh,
    pub lights: &'a LightSampler,
    pub max_depth: u32,
}

impl PathTracer<'_> {
    /// The radiance estimate of sample `sample` of pixel `(x, y)` in a render of `spp`
    /// samples per pixel: see the module comment. Adds the rays it traced to `rays`.
    pub fn sample(
        &self,
        camera: &CameraFrame,
        (x, y): (u32, u32),
        sample: u32,
        spp: u32,
        seed: u64,
        rays: &mut u64,
    ) -> Vec3 {
        let mut rng = Sampler::new(x, y, sample, spp, seed);
        let (origin, dir) = pixel_ray(camera, (x, y), &mut rng);
        self.radiance_counting(origin, dir, &mut rng, rays)
    }

    /// The radiance arriving at `origin` from direction `-dir` (`dir` unit length), estimated
    /// with the random numbers of `rng` (5 slots, 7 numbers, per path vertex): the path's
    /// steps ([`PathTracer::advance`]) with every ray answered by this BVH at once.
    pub fn radiance(&self, origin: Vec3, dir: Vec3, rng: &mut Sampler) -> Vec3 {
        self.radiance_counting(origin, dir, rng, &mut 0)
    }

    /// [`PathTracer::radiance`], adding the rays it traced (closest hit and shadow) to `rays`.
    pub fn radiance_counting(
        &self,
        origin: Vec3,
        dir: Vec3,
        rng: &mut Sampler,
        rays: &mut u64,
    ) -> Vec3 {
        let mut path = self.start(origin, dir, *rng);
        loop {
            if let Some(shadow) = path.shadow {
                *rays += 1;
                path.settle_shadow(self.blocks(&shadow.ray));
            }
            let Some(ray) = path.ray.and_then(|(o, d)| RayData::new(o, d)) else {
                break;
            };
            *rays += 1;
            let hit = self.bvh.intersect_ray(self.scene, &ray, 0.0, f32::INFINITY);
            self.advance(&mut path, hit);
        }
        *rng = path.rng;
        path.radiance
    }

    /// A path about to trace its camera segment from `origin` along `dir`.
    pub fn start(&self, origin: Vec3, dir: Vec3, rng: Sampler) -> PathState {
        PathState {
            rng,
            ray: (self.max_depth >= 1).then_some((origin, dir)),
            depth: 1,
            throughput: Vec3::ONE,
            radiance: Vec3::ZERO,
            prev_pdf: 0.0,
            prev_delta: true,
            shadow: None,
        }
    }

    /// Whether something in this BVH blocks the shadow ray.
    pub fn blocks(&self, shadow: &ShadowRay) -> bool {
        RayData::new(shadow.origin, shadow.dir)
            .is_some_and(|ray| self.bvh.occluded_ray(self.scene, &ray, 0.0, shadow.tmax))
    }

    /// One vertex of the path: the segment `path.ray` reaches `hit` (`None`: it escaped), and
    /// the path takes what it finds there (see the module comment), then, unless it ends,
    /// samples its next segment and sets up next-event estimation's shadow ray. The shadow ray
    /// of the vertex before must be settled first ([`PathState::settle_shadow`]). `hit` must
    /// be the closest hit of the ray `path.ray` over the whole scene; this tracer's scene
    /// must hold the hit's group and the lights.
    pub fn advance(&self, path: &mut PathState, hit: Option<Hit>) {
        debug_assert!(path.shadow.is_none(), "a shadow ray left unsettled");
        let Some((_, ray_d)) = path.ray.take() else {
            return;
        };
        let scene = self.scene;
        let Some(hit) = hit else {
            path.radiance += path.throughput * scene.environment_radiance();
            if let Some(map) = scene.environment_map.as_deref() {
                path.radiance += self.environment_map_seen(map, ray_d, path);
            }
            return;
        };
        let sp = SurfacePoint::new(scene, &hit);
        let material = &scene.materials[sp.material as usize];
        let wo = -ray_d;
        if material.is_emissive() && self.emits_towards(sp.n_geo, wo) {
            let w = self.emission_weight(&hit, &sp, ray_d, path.prev_pdf, path.prev_delta);
            path.radiance += path.throughput * material.emission_at(&scene.textures, sp.uv) * w;
        }
        if path.depth >= self.max_depth {
            return;
        }
        let rng = &mut path.rng;
        let u_light = rng.next_1d();
        let u_l = rng.next_2d();
        let u_lobe = rng.next_1d();
        let (u_b1, u_b2) = rng.next_2d();
        let u_rr = rng.next_1d();

        let frame = ShadingFrame::new(sp.n_geo, sp.n_shade, wo);
        let bsdf = Bsdf::new(material, &scene.textures, sp.uv, frame);
        if !bsdf.is_delta() && self.lights.can_sample() {
            match self.light_candidate(&sp, &bsdf, wo, u_light, u_l) {
                Some((sample, ray)) => path.shadow = Some(path.shadow_of(sample, ray)),
                None => path.radiance += path.throughput * Vec3::ZERO,
            }
        }
        let Some(bs) = bsdf.sample(wo, u_lobe, u_b1, u_b2) else {
            return;
        };
        path.throughput *= bs.weight;
        if path.throughput == Vec3::ZERO {
            return;
        }
        if path.depth >= 3 {
            let q = path.throughput.max_element().min(0.95);
            if u_rr >= q {
                return;
            }
            path.throughput /= q;
        }
        path.prev_pdf = bs.pdf;
        path.prev_delta = bs.delta;
        path.ray = Some((sp.origin_towards(bs.wi), bs.wi));
        path.depth += 1;
    }

    /// What a path that escaped along `ray_d` with `throughput` gets from the environment map,
    /// weighted by multiple importance against the map's own sampling in next-event
    /// estimation (none after a Dirac lobe or the camera, or where the map is never sampled).
    #[inline]
    fn environment_map_seen(&self, map: &EnvironmentMap, ray_d: Vec3, path: &PathState) -> Vec3 {
        let (le, pdf) = map.lookup(ray_d);
        let share = self.lights.environment_share();
        let w = if path.prev_delta || share == 0.0 {
            1.0
        } else {
            power_heuristic(path.prev_pdf, share * pdf)
        };
        path.throughput * le * w
    }

    /// The multiple-importance weight of an emitter hit by a BSDF sample of pdf `prev_pdf`
    /// (1 after a Dirac lobe or the camera, or where next-event estimation cannot find it).
    #[inline]
    fn emission_weight(
        &self,
        hit: &Hit,
        sp: &SurfacePoint,
        ray_d: Vec3,
        prev_pdf: f32,
        prev_delta: bool,
    ) -> f32 {
        if prev_delta {
            1.0
        } else {
            self.light_pdf(hit, sp, ray_d)
                .map_or(1.0, |p_light| power_heuristic(prev_pdf, p_light))
        }
    }

    /// Next-event estimation towards the light `u_light` chooses, an area light or the
    /// environment map: its sample and the shadow ray that decides whether it arrives, or
    /// `None` where it carries nothing whatever the shadow ray finds (nothing chosen, a point
    /// seen from behind or in a hole, a BSDF that is zero there).
    #[inline]
    fn light_candidate(
        &self,
        sp: &SurfacePoint,
        bsdf: &Bsdf,
        wo: Vec3,
        u_light: f32,
        (u_l1, u_l2): (f32, f32),
    ) -> Option<(LightSample, ShadowRay)> {
        match (
            self.lights.choose(u_light),
            self.scene.environment_map.as_deref(),
        ) {
            (LightChoice::Area(li), _) => self.area_light_candidate(sp, bsdf, wo, li, u_l1, u_l2),
            (LightChoice::Environment, Some(map)) => {
                self.environment_light_candidate(map, sp, bsdf, wo, u_l1, u_l2)
            }
            (LightChoice::Environment, None) => None,
        }
    }

    /// Whether a light whose unit geometric normal is `n_light` emits towards `w` (pointing
    /// away from the light): always with two-sided lights, else when `w` leaves the front
    /// face, `n_light . w > 0` (a grazing or NaN direction emits nothing).
    #[inline]
    pub fn emits_towards(&self, n_light: Vec3, w: Vec3) -> bool {
        self.scene.two_sided_lights || n_light.dot(w) > 0.0
    }

    /// The solid-angle density with which next-event estimation at the previous vertex would
    /// have chosen the hit point: `P(light) / area * t^2 / |cos_light|` (`t` is the distance
    /// since `dir` is unit length). `None` if the triangle is not in the light list.
    fn light_pdf(&self, hit: &Hit, sp: &SurfacePoint, dir: Vec3) -> Option<f32> {
        let li = self.lights.light_of(hit.group, hit.prim)?;
        let light = &self.scene.lights[li];
        let cos_l = sp.n_geo.dot(dir).abs();
        if !(cos_l > 0.0) {
            return None;
        }
        Some(self.lights.probability(li) / light.area * hit.t * hit.t / cos_l)
    }

    /// The environment map's light sample at `sp`, before its MIS weight: `None` where it
    /// carries nothing (occluded, below the surface, or where the map's density is 0).
    pub fn environment_light_sample(
        &self,
        map: &EnvironmentMap,
        sp: &SurfacePoint,
        bsdf: &Bsdf,
        wo: Vec3,
        u1: f32,
        u2: f32,
    ) -> Option<LightSample> {
        let (sample, ray) = self.environment_light_candidate(map, sp, bsdf, wo, u1, u2)?;
        (!self.blocks(&ray)).then_some(sample)
    }

    /// [`PathTracer::environment_light_sample`] before its shadow ray: the sample, and the
    /// shadow ray to infinity that decides whether it arrives.
    fn environment_light_candidate(
        &self,
        map: &EnvironmentMap,
        sp: &SurfacePoint,
        bsdf: &Bsdf,
        wo: Vec3,
        u1: f32,
        u2: f32,
    ) -> Option<(LightSample, ShadowRay)> {
        let wi = map.sample(u1, u2)?;
        let (le, pdf) = map.lookup(wi);
        let p_env = self.lights.environment_share() * pdf;
        if !(p_env > 0.0) {
            return None;
        }
        let e = bsdf.eval(wo, wi);
        if e.f_cos == Vec3::ZERO {
            return None;
        }
        let ray = ShadowRay::new(sp.origin_towards(wi), wi, f32::INFINITY)?;
        let sample = LightSample {
            f_cos_le: e.f_cos * le,
            p_light: p_env,
            p_bsdf: e.pdf,
        };
        Some((sample, ray))
    }

    /// Area light `li`'s light sample at `sp`, before its MIS weight: `None` where it carries
    /// nothing (occluded, in a hole, seen from behind).
    pub fn area_light_sample(
        &self,
        sp: &SurfacePoint,
        bsdf: &Bsdf,
        wo: Vec3,
        li: usize,
        u1: f32,
        u2: f32,
    ) -> Option<LightSample> {
        let (sample, ray) = self.area_light_candidate(sp, bsdf, wo, li, u1, u2)?;
        (!self.blocks(&ray)).then_some(sample)
    }

    /// [`PathTracer::area_light_sample`] before its shadow ray: the sample, and the shadow ray
    /// to the light point that decides whether it arrives.
    fn area_light_candidate(
        &self,
        sp: &SurfacePoint,
        bsdf: &Bsdf,
        wo: Vec3,
        li: usize,
        u1: f32,
        u2: f32,
    ) -> Option<(LightSample, ShadowRay)> {
        let p_pick = self.lights.probability(li);
        if !(p_pick > 0.0) {
            return None;
        }
        let light = &self.scene.lights[li];
        let g = &self.scene.groups[light.group as usize];
        let [q0, q1, q2] = g.triangle(light.prim as usize);
        let (b1, b2) = uniform_triangle(u1, u2);
        // A point in a hole of a cut-out emitter is not on the light: it emits nothing (it is
        // still sampled uniformly over its whole triangle, so both strategies estimate the
        // emission of the opaque part; see the module comment).
        if self.scene.is_cut_out(light.group, light.prim, b1, b2) {
            return None;
        }
        let le = self.scene.light_emission_at(light, b1, b2);
        let q = (1.0 - b1 - b2) * q0 + b1 * q1 + b2 * q2;
        let n_light = (q1 - q0).cross(q2 - q0).normalize();
        let to_light = q - sp.p;
        let dist2 = to_light.length_squared();
        if !(dist2 > 0.0) {
            return None;
        }
        let wi = to_light / dist2.sqrt();
        let cos_l = n_light.dot(wi).abs();
        if !(cos_l > 0.0) {
            return None;
        }
        // The light point emits towards the shading point only if that lies on its front
        // side: n_light . (-wi) > 0. No shadow ray for a light seen from behind.
        if !(self.scene.two_sided_lights || n_light.dot(wi) < 0.0) {
            return None;
        }
        let e = bsdf.eval(wo, wi);
        if e.f_cos == Vec3::ZERO {
            return None;
        }
        let p_light = p_pick / light.area * dist2 / cos_l;
        let origin = sp.origin_towards(wi);
        let light_side = if n_light.dot(wi) < 0.0 { 1.0 } else { -1.0 };
        let target = offset_ray_origin(q, light_side * n_light, triangle_scale(q0, q1, q2));
        let ray = ShadowRay::new(origin, target - origin, 1.0)?;
        let sample = LightSample {
            f_cos_le: e.f_cos * le,
            p_light,
            p_bsdf: e.pdf,
        };
        Some((sample, ray))
    }
}

/// A shadow ray: from `origin` along `dir`, blocked by anything with `0 < t < tmax`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadowRay {
    pub origin: Vec3,
    pub dir: Vec3,
    pub tmax: f32,
}

impl ShadowRay {
    /// `None` where no ray can be traced that way (a zero or non-finite direction).
    fn new(origin: Vec3, dir: Vec3, tmax: f32) -> Option<ShadowRay> {
        RayData::can_trace(origin, dir).then_some(ShadowRay { origin, dir, tmax })
    }
}

/// Next-event estimation waiting for its shadow ray: the ray, and what the path's radiance
/// gains when it arrives and when it is blocked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PendingLight {
    pub ray: ShadowRay,
    /// The throughput times the MIS-weighted sample ([`LightSample::weighted`]).
    pub arrives: Vec3,
    /// The throughput times zero: what the path adds for a sample that carries nothing (not
    /// always zero: a throughput that overflowed makes it NaN, and the sample is then dropped
    /// as the film drops any sample that is not finite).
    pub blocked: Vec3,
}

/// A path between two of its vertices: everything needed to continue it, wherever its next
/// ray is answered. [`PathTracer::radiance`] answers each ray at once; a renderer whose
/// geometry is spread over processes carries this from one to the next.
#[derive(Clone, Copy, Debug)]
pub struct PathState {
    /// The sample's random numbers, at the next vertex's first.
    pub rng: Sampler,
    /// The segment to trace next (origin, unit direction); `None` once the path has ended.
    pub ray: Option<(Vec3, Vec3)>,
    /// That segment's number: 1 for the camera's.
    pub depth: u32,
    pub throughput: Vec3,
    /// What the path has gathered so far.
    pub radiance: Vec3,
    /// The solid-angle pdf of the BSDF sample that made the segment, and whether it came from
    /// a Dirac lobe (the camera segment counts as one).
    pub prev_pdf: f32,
    pub prev_delta: bool,
    /// Next-event estimation at the vertex the segment leaves, to settle before the segment's
    /// hit is shaded (or the path's radiance is read).
    pub shadow: Option<PendingLight>,
}

impl PathState {
    /// Adds the pending light sample's share, as its shadow ray found (`blocked`).
    pub fn settle_shadow(&mut self, blocked: bool) {
        if let Some(pending) = self.shadow.take() {
            self.radiance += if blocked {
                pending.blocked
            } else {
                pending.arrives
            };
        }
    }

    /// The pending light of `sample`, reached through `ray`.
    fn shadow_of(&self, sample: LightSample, ray: ShadowRay) -> PendingLight {
        PendingLight {
            ray,
            arrives: self.throughput * sample.weighted(),
            blocked: self.throughput * Vec3::ZERO,
        }
    }
}

/// One next-event sample that reached its light, before its MIS weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LightSample {
    /// `f cos * Le`: the BSDF (cosine included) times the radiance arriving.
    pub f_cos_le: Vec3,
    /// The solid-angle density of the light strategy for this direction, the choice of the
    /// light included (`P(env) pdf_map`, or `P(light) / area * t^2 / cos_light`).
    pub p_light: f32,
    /// The density with which BSDF sampling would have picked the same direction.
    pub p_bsdf: f32,
}

impl LightSample {
    /// The contribution next-event estimation adds: `f cos * Le * w_light / p_light`, with the
    /// power heuristic `w_light` against BSDF sampling.
    #[inline]
    pub fn weighted(self) -> Vec3 {
        self.f_cos_le * (power_heuristic(self.p_light, self.p_bsdf) / self.p_light)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Group, Material};

    #[test]
    fn offset_moves_off_the_plane_on_the_requested_side() {
        for p in [
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(123.4, -56.7, 0.01),
            Vec3::splat(-1e4),
        ] {
            for n in [Vec3::Z, -Vec3::Z, Vec3::new(1.0, 1.0, 1.0).normalize()] {
                let scale = p.abs().max_element();
                let o = offset_ray_origin(p, n, scale);
                assert!((o - p).dot(n) > 0.0, "{p} {n}");
                assert!((o - p).length() < 1e-2 * (1.0 + p.abs().max_element() * 1e-2));
            }
        }
    }

    /// The case that broke the per-component offsets: a point on the plane x = 0 of a large
    /// triangle. Moved off along +x, a shadow ray towards a far point must not hit the
    /// triangle it starts on, for any of many points and directions.
    #[test]
    fn rays_leaving_a_large_triangle_in_a_coordinate_plane_never_hit_it_again() {
        let (p0, p1, p2) = (
            Vec3::new(0.0, 0.0, 559.2),
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(0.0, 548.8, 0.0),
        );
        let g = Group {
            name: "wall".into(),
            positions: vec![p0, p1, p2],
            indices: vec![[0, 1, 2]],
            face_materials: vec![0],
            ..Default::default()
        };
        let scene = Scene::new("wall", vec![g], vec![Material::default_diffuse()]);
        let bvh = SceneBvh::build(&scene);
        let scale = triangle_scale(p0, p1, p2);
        let mut hits = 0;
        let mut rng = 0x1234_5678u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 40) as f32 / (1u64 << 24) as f32
        };
        for _ in 0..20_000 {
            let (b1, b2) = (next(), next());
            if b1 + b2 >= 1.0 {
                continue;
            }
            let p = (1.0 - b1 - b2) * p0 + b1 * p1 + b2 * p2;
            let origin = offset_ray_origin(p, Vec3::X, scale);
            let target = Vec3::new(100.0 + 400.0 * next(), 548.3, 100.0 + 300.0 * next());
            let ray = RayData::new(origin, target - origin).unwrap();
            if bvh.occluded_ray(&scene, &ray, 0.0, 1.0) {
                hits += 1;
            }
        }
        assert_eq!(hits, 0, "shadow rays hit the wall they leave");
    }

    #[test]
    fn lights_are_picked_in_proportion_to_power() {
        let mut g = Group {
            name: "l".into(),
            positions: vec![Vec3::ZERO, Vec3::X, Vec3::Y, Vec3::new(0.0, 0.0, 2.0)],
            ..Default::default()
        };
        // Areas 0.5 and 1.0; emissions 4 and 1: weights 2 and 1.
        g.indices = vec![[0, 1, 2], [0, 1, 3]];
        g.face_materials = vec![0, 1];
        let mut m0 = Material::default_diffuse();
        m0.emission = Vec3::splat(4.0);
        let mut m1 = Material::default_diffuse();
        m1.emission = Vec3::splat(1.0);
        let scene = Scene::new("l", vec![g], vec![m0, m1]);
        assert_eq!(scene.lights.len(), 2);
        let ls = LightSampler::new(&scene);
        assert!((ls.probability(0) - 2.0 / 3.0).abs() < 1e-6);
        assert!((ls.probability(1) - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(ls.pick(0.0), 0);
        assert_eq!(ls.pick(0.66), 0);
        assert_eq!(ls.pick(0.67), 1);
        assert_eq!(ls.pick(0.999_999_9), 1);
        assert_eq!(ls.light_of(0, 1), Some(1));
        assert_eq!(ls.light_of(0, 2), None);
    }
}
