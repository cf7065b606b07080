//! The scene model shared by every backend.
//!
//! A [`Scene`] is loaded once (from OBJ+MTL by [`obj::load_obj`], or built in memory by a
//! generator in [`gen`]) and handed to a backend. Each OBJ object/group stays its own
//! [`Group`]: the group is the unit of acceleration-structure builds, one BVH per group on the
//! CPU and one GAS per group on the GPU, so nothing here merges or splits groups.

pub mod bump;
pub mod camera;
pub mod camera_path;
pub mod content_hash;
pub mod domains;
pub mod environment_map;
pub mod gen;
pub mod image_file;
pub mod light_power;
pub mod lights;
pub mod obj;

use std::sync::Arc;

use glam::{Vec2, Vec3};
use rayon::prelude::*;
use serde::Serialize;
use thiserror::Error;

pub use bump::BumpMap;
pub use camera::{Camera, CameraHint, LensHint, PixelFilter, ThinLens};
pub use environment_map::{EnvironmentMap, EnvironmentMapError};

/// An axis-aligned bounding box.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bounds {
    pub min: [f32; 3],
    pub max: [f32; 3],
}

impl Bounds {
    /// The empty box: the identity of [`Bounds::union`].
    pub const EMPTY: Bounds = Bounds {
        min: [f32::INFINITY; 3],
        max: [f32::NEG_INFINITY; 3],
    };

    pub fn is_empty(&self) -> bool {
        (0..3).any(|a| self.min[a] > self.max[a])
    }

    pub fn extend(&mut self, p: Vec3) {
        for a in 0..3 {
            self.min[a] = self.min[a].min(p[a]);
            self.max[a] = self.max[a].max(p[a]);
        }
    }

    pub fn union(&self, o: &Bounds) -> Bounds {
        let mut b = *self;
        for a in 0..3 {
            b.min[a] = b.min[a].min(o.min[a]);
            b.max[a] = b.max[a].max(o.max[a]);
        }
        b
    }

    pub fn min_v(&self) -> Vec3 {
        Vec3::from(self.min)
    }

    pub fn max_v(&self) -> Vec3 {
        Vec3::from(self.max)
    }

    pub fn center(&self) -> Vec3 {
        (self.min_v() + self.max_v()) * 0.5
    }

    pub fn diagonal(&self) -> Vec3 {
        self.max_v() - self.min_v()
    }
}

/// The random number in [0, 1) of a hit at barycentrics `(u, v)` of triangle `prim` of group
/// `group`, which a see-through material compares with its opacity
/// ([`Scene::is_dissolved`]): SplitMix64's finalizer over the barycentrics' bits, keyed by
/// the triangle (the [`crate::render::Sampler`]'s mixing), top 24 bits. The device code
/// computes the same (`dissolve_number` in `ptx/gasworks_common.h`).
#[inline]
pub fn dissolve_number(group: u32, prim: u32, u: f32, v: f32) -> f32 {
    use crate::splitmix::{mix64, GOLDEN_GAMMA};
    let triangle = mix64(((u64::from(group) << 32) | u64::from(prim)) ^ GOLDEN_GAMMA);
    let bits = (u64::from(u.to_bits()) << 32) | u64::from(v.to_bits());
    ((mix64(bits ^ triangle) >> 40) as u32) as f32 * (1.0 / 16_777_216.0)
}

/// How a surface scatters light. Mirrors the MTL `illum` models that gasworks understands;
/// see [`obj`] for the mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MaterialKind {
    /// Lambertian, albedo `diffuse` (Kd, optionally times the `map_Kd` texture).
    Diffuse,
    /// Lambertian `diffuse` plus a normalized Phong lobe of colour `specular` (Ks) and exponent
    /// `shininess` (Ns). Energy conserving while `diffuse + specular <= 1` per channel.
    Glossy,
    /// A perfect mirror of reflectance `specular` (Ks).
    Mirror,
    /// A smooth dielectric of index `ior` (Ni): Fresnel-weighted reflection and refraction,
    /// refraction tinted by `transmittance`.
    Glass,
}

/// One material. Every field is meaningful for every kind so that a backend can upload the
/// struct as it is; fields a kind does not use are ignored by it.
#[derive(Clone, PartialEq, Serialize)]
pub struct Material {
    pub name: String,
    pub kind: MaterialKind,
    /// Kd: diffuse albedo.
    pub diffuse: Vec3,
    /// Ks: specular reflectance (glossy lobe or mirror).
    pub specular: Vec3,
    /// Ns: Phong exponent of the glossy lobe.
    pub shininess: f32,
    /// Ni: index of refraction of a dielectric.
    pub ior: f32,
    /// Tf (or white): colour of light refracted through a dielectric.
    pub transmittance: Vec3,
    /// Ke: emitted radiance. Any non-black value makes the faces area lights.
    pub emission: Vec3,
    /// Index into [`Scene::textures`] of the `map_Ke` emission map, when it was found and
    /// decoded: the radiance emitted at a point is Ke times the map there
    /// ([`Material::emission_at`]). Only read on emissive materials: a black Ke stays black.
    pub emission_texture: Option<u32>,
    /// Index into [`Scene::textures`] of the `map_Kd` texture, when it was found and decoded.
    pub diffuse_texture: Option<u32>,
    /// Index into [`Scene::textures`] of the `map_d` opacity mask (its value in every channel),
    /// when it was found and decoded: a cut-out. Where the mask is below [`ALPHA_CUTOFF`] the
    /// surface is not there at all, for every ray (camera, bounce and shadow rays) on both
    /// backends; see [`Scene::is_cut_out`].
    pub opacity_texture: Option<u32>,
    /// The `bump`/`map_Bump` height map or `norm` normal map that bends the shading normal
    /// ([`bump`]), when it was found and decoded.
    pub bump: Option<BumpMap>,
    /// Index into [`Scene::textures`] of the `map_Ks` specular map, when it was found and
    /// decoded: the specular reflectance of a glossy or mirror material at a point is Ks times
    /// the map there.
    pub specular_texture: Option<u32>,
    /// The MTL dissolve `d` (or `1 - Tr`) of a material that is not glass: the share of the
    /// surface that is there, 1 for an opaque one. Below 1, each hit is kept with this
    /// probability ([`Scene::is_dissolved`]): a veil, a curtain, a tinted window without
    /// refraction. Emitters are opaque whatever it says (their light is sampled as a whole).
    pub opacity: f32,
}

/// Written as `#[derive(Debug)]` would, except that `bump` and `specular_texture` appear only
/// when there is one and `opacity` only when it is not 1:
/// the scene content hash ([`content_hash`]) hashes this text, and opaque materials without
/// a bump map keep the hash they had before these fields (resume files and crops of those
/// renders still match).
impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Material");
        d.field("name", &self.name)
            .field("kind", &self.kind)
            .field("diffuse", &self.diffuse)
            .field("specular", &self.specular)
            .field("shininess", &self.shininess)
            .field("ior", &self.ior)
            .field("transmittance", &self.transmittance)
            .field("emission", &self.emission)
            .field("emission_texture", &self.emission_texture)
            .field("diffuse_texture", &self.diffuse_texture)
            .field("opacity_texture", &self.opacity_texture);
        if let Some(bump) = &self.bump {
            d.field("bump", bump);
        }
        if self.opacity != 1.0 {
            d.field("opacity", &self.opacity);
        }
        if let Some(map) = &self.specular_texture {
            d.field("specular_texture", map);
        }
        d.finish()
    }
}

/// The opacity below which a cut-out surface is a hole. An alpha *test*, as in rasterizers and
/// OptiX's any-hit samples, rather than pbrt's stochastic alpha: masks of leaves, fences and
/// chains are meant to be binary, and a threshold gives the same hole to every ray, sample and
/// backend (deterministic images, exact CPU/GPU agreement).
pub const ALPHA_CUTOFF: f32 = 0.5;

impl Material {
    /// The material given to faces that name none, or whose MTL file is missing.
    pub fn default_diffuse() -> Material {
        Material {
            name: "gasworks_default".to_string(),
            kind: MaterialKind::Diffuse,
            diffuse: Vec3::splat(0.8),
            specular: Vec3::ZERO,
            shininess: 0.0,
            ior: 1.5,
            transmittance: Vec3::ONE,
            emission: Vec3::ZERO,
            emission_texture: None,
            diffuse_texture: None,
            opacity_texture: None,
            bump: None,
            opacity: 1.0,
            specular_texture: None,
        }
    }

    pub fn diffuse(name: &str, kd: Vec3) -> Material {
        Material {
            name: name.to_string(),
            diffuse: kd,
            ..Material::default_diffuse()
        }
    }

    pub fn is_emissive(&self) -> bool {
        self.emission.max_element() > 0.0
    }

    /// Whether a path that reaches this surface ends there: it reflects nothing (black `Kd`,
    /// and black `Ks` where the kind has a specular lobe; textures only scale these, so they
    /// cannot make it reflect) and it is opaque. Most lamps' faces (`Kd 0 0 0` with a `Ke`),
    /// black cloth. Glass always reflects some light (Fresnel), so it never is one.
    pub fn ends_paths(&self) -> bool {
        let black = |c: Vec3| c.max_element() <= 0.0;
        let reflects_nothing = match self.kind {
            MaterialKind::Diffuse => black(self.diffuse),
            MaterialKind::Glossy => black(self.diffuse) && black(self.specular),
            MaterialKind::Mirror => black(self.specular),
            MaterialKind::Glass => false,
        };
        reflects_nothing && !self.dissolves()
    }

    /// Whether hits on it are kept only with probability [`Material::opacity`]: an opacity
    /// below 1 (NaN counts as 1) on a material that does not emit.
    pub fn dissolves(&self) -> bool {
        self.opacity < 1.0 && !self.is_emissive()
    }

    /// The radiance emitted at texture coordinates `uv`: Ke, times the emission map there when
    /// the material has one and the mesh has UVs. An index outside `textures`, like a missing
    /// map, means "no map" (what the device code does with it too).
    pub fn emission_at(&self, textures: &[Texture], uv: Option<Vec2>) -> Vec3 {
        match (
            self.emission_texture.and_then(|t| textures.get(t as usize)),
            uv,
        ) {
            (Some(map), Some(uv)) => self.emission * map.sample(uv),
            _ => self.emission,
        }
    }
}

/// Where a texture lies in texture-coordinate space: `uv * scale + offset` is looked up (the
/// MTL `map_Kd` options `-s` and `-o`; the identity when absent).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct UvMapping {
    pub scale: Vec2,
    pub offset: Vec2,
}

impl Default for UvMapping {
    fn default() -> UvMapping {
        UvMapping::IDENTITY
    }
}

impl UvMapping {
    pub const IDENTITY: UvMapping = UvMapping {
        scale: Vec2::ONE,
        offset: Vec2::ZERO,
    };

    /// Scale u, scale v, offset u, offset v.
    pub fn to_array(&self) -> [f32; 4] {
        [self.scale.x, self.scale.y, self.offset.x, self.offset.y]
    }

    /// The texture coordinates looked up for `uv`. Exact for the identity: `x * 1 + 0` is `x`.
    #[inline]
    pub fn apply(&self, uv: Vec2) -> Vec2 {
        uv * self.scale + self.offset
    }
}

/// A decoded texture: linear RGB, row-major, first row at the top of the image (v = 1), and
/// where it lies in texture-coordinate space.
#[derive(Clone, Debug)]
pub struct Texture {
    pub path: String,
    pub width: u32,
    pub height: u32,
    pub texels: Vec<[f32; 3]>,
    pub mapping: UvMapping,
}

impl Texture {
    /// Whether the texel array holds exactly `width x height` texels, at least one: what
    /// [`Texture::sample`] needs to look anything up ([`Scene::validate`] refuses the others).
    pub fn is_consistent(&self) -> bool {
        self.width > 0
            && self.height > 0
            && self.texels.len() as u64 == u64::from(self.width) * u64::from(self.height)
    }

    /// Bilinear lookup with wrapping (OBJ UVs routinely leave `[0, 1]`). An inconsistent texture
    /// (see [`Texture::is_consistent`]) reads as white, the value of "no texture", rather than
    /// indexing out of bounds; backends never see one, since [`Scene::validate`] refuses it.
    pub fn sample(&self, uv: Vec2) -> Vec3 {
        if !self.is_consistent() {
            return Vec3::ONE;
        }
        let (xi, yi, fx, fy) = self.bilinear_cell(uv);
        let texel = |xi: i64, yi: i64| Vec3::from(self.texel_wrapped(xi, yi));
        let top = texel(xi, yi).lerp(texel(xi + 1, yi), fx);
        let bottom = texel(xi, yi + 1).lerp(texel(xi + 1, yi + 1), fx);
        top.lerp(bottom, fy)
    }

    /// The cell of texels the bilinear lookup at `uv` blends (placed by the mapping, wrapping):
    /// the column and row of its top-left texel (not yet wrapped) and the weights `(fx, fy)`
    /// of the texels right of and below it. The texture must be consistent.
    #[inline(always)]
    fn bilinear_cell(&self, uv: Vec2) -> (i64, i64, f32, f32) {
        let uv = self.mapping.apply(uv);
        let x = uv.x.rem_euclid(1.0) * self.width as f32 - 0.5;
        let y = (1.0 - uv.y.rem_euclid(1.0)) * self.height as f32 - 0.5;
        let (x0, y0) = (x.floor(), y.floor());
        (x0 as i64, y0 as i64, x - x0, y - y0)
    }

    /// The texel at column `xi` and row `yi`, both wrapped into the image.
    #[inline(always)]
    fn texel_wrapped(&self, xi: i64, yi: i64) -> [f32; 3] {
        let (w, h) = (i64::from(self.width), i64::from(self.height));
        self.texels[(yi.rem_euclid(h) * w + xi.rem_euclid(w)) as usize]
    }

    /// The derivatives of [`Texture::sample`]'s first channel per texel, `(d/dx, d/dy)`, at
    /// `uv`: x along the image's rows (towards +u), y down its columns (towards -v). Exact
    /// for the bilinear lookup (the slopes of the cell's edges, interpolated), so a constant
    /// stretch of the image gives exactly zero. Zero for an inconsistent texture, as
    /// [`Texture::sample`] reads white.
    pub fn height_gradient(&self, uv: Vec2) -> (f32, f32) {
        if !self.is_consistent() {
            return (0.0, 0.0);
        }
        let (xi, yi, fx, fy) = self.bilinear_cell(uv);
        let texel = |xi: i64, yi: i64| self.texel_wrapped(xi, yi)[0];
        let (t00, t10) = (texel(xi, yi), texel(xi + 1, yi));
        let (t01, t11) = (texel(xi, yi + 1), texel(xi + 1, yi + 1));
        let d_dx = (t10 - t00) * (1.0 - fy) + (t11 - t01) * fy;
        let d_dy = (t01 - t00) * (1.0 - fx) + (t11 - t10) * fx;
        (d_dx, d_dy)
    }
}

/// One OBJ object or group: the unit of acceleration-structure builds.
///
/// Vertex attributes are indexed by one index per corner (OBJ's separate position/normal/UV
/// indices are unified at load time), so `positions`, and `normals` and `uvs` when they are
/// not empty, have the same length. The layout is exactly what an OptiX triangle build input
/// wants: `float3` vertices and `uint3` indices.
#[derive(Clone, Debug, Default)]
pub struct Group {
    pub name: String,
    pub positions: Vec<Vec3>,
    /// Per-vertex shading normals, or empty (use the geometric normal).
    pub normals: Vec<Vec3>,
    /// Per-vertex texture coordinates, or empty.
    pub uvs: Vec<Vec2>,
    pub indices: Vec<[u32; 3]>,
    /// Per-triangle index into [`Scene::materials`].
    pub face_materials: Vec<u32>,
}

impl Group {
    pub fn triangle_count(&self) -> usize {
        self.indices.len()
    }

    /// The bytes its arrays hold.
    pub fn heap_bytes(&self) -> u64 {
        (std::mem::size_of_val(self.positions.as_slice())
            + std::mem::size_of_val(self.normals.as_slice())
            + std::mem::size_of_val(self.uvs.as_slice())
            + std::mem::size_of_val(self.indices.as_slice())
            + std::mem::size_of_val(self.face_materials.as_slice())) as u64
    }

    /// The triangle's vertices, or `None` when the triangle or one of its vertex indices is out
    /// of range (an inconsistent group, which [`Scene::validate`] reports).
    pub fn try_triangle(&self, prim: usize) -> Option<[Vec3; 3]> {
        let [a, b, c] = *self.indices.get(prim)?;
        Some([
            *self.positions.get(a as usize)?,
            *self.positions.get(b as usize)?,
            *self.positions.get(c as usize)?,
        ])
    }

    /// The texture coordinates at barycentrics `(u, v)` of triangle `prim`,
    /// `w uv0 + u uv1 + v uv2` with `w = 1 - u - v` (the device code computes the same, in the
    /// same order), or `None` when the group has no UVs.
    #[inline]
    pub fn uv_at(&self, prim: usize, u: f32, v: f32) -> Option<Vec2> {
        if self.uvs.is_empty() {
            return None;
        }
        let [i0, i1, i2] = self.indices[prim].map(|i| i as usize);
        let w = 1.0 - u - v;
        Some(w * self.uvs[i0] + u * self.uvs[i1] + v * self.uvs[i2])
    }

    pub fn triangle(&self, prim: usize) -> [Vec3; 3] {
        let [a, b, c] = self.indices[prim];
        [
            self.positions[a as usize],
            self.positions[b as usize],
            self.positions[c as usize],
        ]
    }

    /// The box of the vertices the triangles use (indices out of range are skipped: see
    /// [`Scene::validate`]).
    pub fn bounds(&self) -> Bounds {
        let mut b = Bounds::EMPTY;
        for tri in &self.indices {
            for &i in tri {
                if let Some(&p) = self.positions.get(i as usize) {
                    b.extend(p);
                }
            }
        }
        b
    }
}

/// An emissive triangle, listed once so that light sampling does not search for them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AreaLight {
    pub group: u32,
    pub prim: u32,
    pub area: f32,
    /// Radiance emitted from the front face: the side the winding's geometric normal
    /// `(p1 - p0) x (p2 - p0)` points to. The back face emits nothing, unless the scene's
    /// [`Scene::two_sided_lights`] is set.
    pub emission: Vec3,
    /// Its material's emission map ([`Material::emission_texture`]), copied here as the
    /// emission is: next-event estimation reads both for every light sample.
    pub emission_texture: Option<u32>,
}

/// Light arriving from infinitely far away in every direction the scene does not block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Environment {
    pub radiance: Vec3,
}

/// What a load had to repair or ignore: reported, never silent.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Triangles of zero area (or non-finite normal) that were dropped.
    pub degenerate_dropped: usize,
    /// Of those, the triangles whose area is not zero but whose size single precision cannot
    /// carry: the squared cross product of two edges overflows or underflows `f32` (an edge
    /// beyond about 4e9 or below about 1e-11 units), so no normal can be computed.
    pub out_of_scale_dropped: usize,
    /// Human-readable warnings (missing MTL, missing texture, unknown material...).
    pub warnings: Vec<String>,
}

/// A whole scene: groups of triangles, their materials and textures, and the lights.
#[derive(Clone, Debug)]
pub struct Scene {
    /// Where the scene came from (a path, or a generator name), for messages.
    pub source: String,
    pub groups: Vec<Group>,
    pub materials: Vec<Material>,
    pub textures: Vec<Texture>,
    /// Every emissive triangle. Derived from the groups by [`Scene::finalize`].
    pub lights: Vec<AreaLight>,
    /// `Some` when the scene has no emitter (a default sky is used) or when the user set one.
    pub environment: Option<Environment>,
    /// A map of the light arriving from each direction (`--env-map`), in place of a uniform
    /// [`Scene::environment`]: see [`Scene::set_environment_map`].
    pub environment_map: Option<Arc<EnvironmentMap>>,
    /// `P(env)`, the share of next-event samples that go to the environment map when the scene
    /// has area lights too, as chosen for this render (`--env-share`, or measured by
    /// [`crate::cpu::environment_share::probe`]); `None`: 1/2. Read through
    /// [`light_power::environment_share`], which both backends use.
    pub environment_share: Option<f32>,
    /// Whether area lights emit from both faces. `false` (the default, as in pbrt and
    /// Mitsuba): only the front face emits, the side of the winding's normal; a light seen, hit
    /// or sampled from behind contributes nothing. `true` (`--two-sided-lights`): both faces
    /// emit the same radiance, gasworks' behaviour before one-sided lights.
    pub two_sided_lights: bool,
    pub report: LoadReport,
}

/// The largest emitted radiance per channel (`Ke`, `--env`): sums of samples of more overflow
/// the film's single precision to infinity (a pixel of `inf`).
pub const MAX_RADIANCE: f32 = 1e20;

/// The radiance of the sky given to scenes that have no emitter.
pub const DEFAULT_ENVIRONMENT: Vec3 = Vec3::splat(1.0);

impl Scene {
    /// Builds a scene from groups and materials: drops degenerate triangles (counting them),
    /// collects the area lights, and gives an emitter-less scene the default environment.
    pub fn new(source: &str, groups: Vec<Group>, materials: Vec<Material>) -> Scene {
        let mut scene = Scene {
            source: source.to_string(),
            groups,
            materials,
            textures: Vec::new(),
            lights: Vec::new(),
            environment: None,
            environment_map: None,
            environment_share: None,
            two_sided_lights: false,
            report: LoadReport::default(),
        };
        scene.finalize();
        scene
    }

    /// Recomputes what is derived from the groups. Call after editing groups or materials.
    ///
    /// Never panics: data that is inconsistent (an index out of range, attribute arrays of the
    /// wrong length) is left as it is for [`Scene::validate`] to report, and its triangles are
    /// neither dropped nor made lights.
    pub fn finalize(&mut self) {
        for g in &mut self.groups {
            let (dropped, out_of_scale) = drop_degenerate(g);
            self.report.degenerate_dropped += dropped;
            self.report.out_of_scale_dropped += out_of_scale;
        }
        self.lights.clear();
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, &m) in g.face_materials.iter().enumerate() {
                let Some(mat) = self.materials.get(m as usize) else {
                    continue;
                };
                if mat.is_emissive() {
                    let Some([a, b, c]) = g.try_triangle(pi) else {
                        continue;
                    };
                    self.lights.push(AreaLight {
                        group: gi as u32,
                        prim: pi as u32,
                        area: 0.5 * (b - a).cross(c - a).length(),
                        emission: mat.emission,
                        emission_texture: mat.emission_texture,
                    });
                }
            }
        }
        if self.lights.is_empty() && self.environment.is_none() && self.environment_map.is_none() {
            self.environment = Some(Environment {
                radiance: DEFAULT_ENVIRONMENT,
            });
            self.report
                .warnings
                .push(self.default_environment_warning());
        }
    }

    /// The warning [`Scene::finalize`] gives an emitter-less scene along with the default sky.
    fn default_environment_warning(&self) -> String {
        format!(
            "{}: the scene has no emissive material; lighting it with a uniform white environment (set one with --env R,G,B or --env-map FILE)",
            self.source
        )
    }

    /// Lights the scene with a uniform environment (`--env`), in place of the default sky or
    /// a map; the warning about the default sky goes with it.
    pub fn set_environment(&mut self, environment: Environment) {
        self.environment = Some(environment);
        self.environment_map = None;
        let default = self.default_environment_warning();
        self.report.warnings.retain(|w| *w != default);
    }

    /// Lights the scene with an environment map (`--env-map`), in place of the default sky or
    /// a uniform environment; the warning about the default sky goes with it.
    pub fn set_environment_map(&mut self, map: Arc<EnvironmentMap>) {
        self.environment = None;
        self.environment_map = Some(map);
        let default = self.default_environment_warning();
        self.report.warnings.retain(|w| *w != default);
    }

    pub fn triangle_count(&self) -> usize {
        self.groups.iter().map(|g| g.triangle_count()).sum()
    }

    /// This scene with the geometry of the groups `keep` accepts (by index) and no other: the
    /// others stay in place, empty, so that every group keeps its index, and the materials,
    /// textures and lights stay as they are. A domain of a distributed-geometry render, for
    /// tracing rays: its lights' triangles may lie in emptied groups.
    pub fn keeping_groups(&self, keep: impl Fn(usize) -> bool) -> Scene {
        let groups = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                if keep(i) {
                    g.clone()
                } else {
                    Group {
                        name: g.name.clone(),
                        ..Group::default()
                    }
                }
            })
            .collect();
        Scene {
            source: self.source.clone(),
            groups,
            materials: self.materials.clone(),
            textures: self.textures.clone(),
            lights: self.lights.clone(),
            environment: self.environment,
            environment_map: self.environment_map.clone(),
            environment_share: self.environment_share,
            two_sided_lights: self.two_sided_lights,
            report: self.report.clone(),
        }
    }

    /// "8 groups, 32 triangles" ("1 group, 1 triangle"): the scene's size as messages give it.
    pub fn size_text(&self) -> String {
        format!(
            "{}, {}",
            crate::wording::counted(self.groups.len(), "group", "groups"),
            crate::wording::counted(self.triangle_count(), "triangle", "triangles")
        )
    }

    /// The box around every vertex a triangle uses. The groups are measured in parallel (on
    /// the current rayon pool): on a scene of millions of triangles this pass is a visible
    /// part of `info`. Min and max are exact, so the result does not depend on the order.
    pub fn bounds(&self) -> Bounds {
        self.groups
            .par_iter()
            .map(Group::bounds)
            .reduce(|| Bounds::EMPTY, |a, b| a.union(&b))
    }

    /// Whether a hit at barycentrics `(u, v)` of triangle `prim` of group `group` falls in a
    /// hole of a cut-out: its material has an opacity mask ([`Material::opacity_texture`]),
    /// the group has UVs, and the mask there is below [`ALPHA_CUTOFF`]. Such a hit is no hit
    /// for any ray. A mask index outside the texture table, like a missing `map_Kd`, means
    /// "no mask" (what the device code does with it too).
    pub fn is_cut_out(&self, group: u32, prim: u32, u: f32, v: f32) -> bool {
        let g = &self.groups[group as usize];
        let material = &self.materials[g.face_materials[prim as usize] as usize];
        let Some(mask) = material
            .opacity_texture
            .and_then(|t| self.textures.get(t as usize))
        else {
            return false;
        };
        g.uv_at(prim as usize, u, v)
            .is_some_and(|uv| mask.sample(uv).x < ALPHA_CUTOFF)
    }

    /// Whether a hit at barycentrics `(u, v)` of triangle `prim` of group `group` is one the
    /// surface lets through: its material dissolves ([`Material::dissolves`]) and the hit's
    /// own random number ([`dissolve_number`]) is at or above the opacity. A pure function of
    /// the hit, so every backend, schedule and run agrees, and a ray keeps or passes a hit
    /// with probability `opacity` (the hit point's barycentrics differ from ray to ray).
    #[inline]
    pub fn is_dissolved(&self, group: u32, prim: u32, u: f32, v: f32) -> bool {
        let g = &self.groups[group as usize];
        let material = &self.materials[g.face_materials[prim as usize] as usize];
        material.dissolves() && dissolve_number(group, prim, u, v) >= material.opacity
    }

    /// Whether a hit is no hit for any ray: in a hole of a cut-out ([`Scene::is_cut_out`]) or
    /// let through by a see-through material ([`Scene::is_dissolved`]).
    #[inline]
    pub fn passes_through(&self, group: u32, prim: u32, u: f32, v: f32) -> bool {
        self.is_cut_out(group, prim, u, v) || self.is_dissolved(group, prim, u, v)
    }

    /// The radiance the area light `light` emits at barycentrics `(b1, b2)` of its triangle:
    /// its emission, times its material's emission map there ([`Material::emission_at`]) when
    /// the group has UVs. Holes are the caller's test ([`Scene::is_cut_out`]).
    pub fn light_emission_at(&self, light: &AreaLight, b1: f32, b2: f32) -> Vec3 {
        // This runs for every light sample: a light without a map costs no further lookup.
        let Some(map) = light
            .emission_texture
            .and_then(|t| self.textures.get(t as usize))
        else {
            return light.emission;
        };
        let g = &self.groups[light.group as usize];
        match g.uv_at(light.prim as usize, b1, b2) {
            Some(uv) => light.emission * map.sample(uv),
            None => light.emission,
        }
    }

    /// Per group, whether any of its triangles uses a material with an opacity mask (and the
    /// group has UVs) or a see-through one ([`Material::dissolves`]): the groups whose hits
    /// must pass [`Scene::passes_through`] (the others need no test; on the GPU, only these
    /// GASes let any-hit programs run).
    pub fn cutout_groups(&self) -> Vec<bool> {
        let masked: Vec<bool> = self
            .materials
            .iter()
            .map(|m| {
                m.opacity_texture
                    .is_some_and(|t| (t as usize) < self.textures.len())
            })
            .collect();
        let dissolving: Vec<bool> = self.materials.iter().map(Material::dissolves).collect();
        let uses = |g: &Group, of: &[bool]| {
            g.face_materials
                .iter()
                .any(|&m| of.get(m as usize).copied().unwrap_or(false))
        };
        self.groups
            .iter()
            .map(|g| (!g.uvs.is_empty() && uses(g, &masked)) || uses(g, &dissolving))
            .collect()
    }

    /// The environment radiance, black when the scene has none.
    pub fn environment_radiance(&self) -> Vec3 {
        self.environment.map(|e| e.radiance).unwrap_or(Vec3::ZERO)
    }

    /// Checks everything a backend indexes with: attribute arrays as long as the positions,
    /// one material per triangle, vertex and material indices in range, textures whose texel
    /// arrays match their size, lights that name existing triangles with a positive area,
    /// counts that fit the 32-bit ids both backends use. The CPU and the OptiX backend call
    /// this before they build anything, so an inconsistent in-memory scene is an error that
    /// names the group (or texture, or light), never a panic or an out-of-bounds read.
    pub fn validate(&self) -> Result<(), SceneError> {
        self.find_problem().map_or(Ok(()), |problem| {
            Err(SceneError {
                scene: self.source.clone(),
                problem,
            })
        })
    }

    fn find_problem(&self) -> Option<SceneProblem> {
        too_many("materials", self.materials.len())
            .or_else(|| too_many("textures", self.textures.len()))
            .or_else(|| too_many("lights", self.lights.len()))
            .or_else(|| too_many("groups", self.groups.len()))
            .or_else(|| {
                self.groups
                    .iter()
                    .enumerate()
                    .find_map(|(gi, g)| self.group_problem(gi as u32, g))
            })
            .or_else(|| self.texture_problem())
            .or_else(|| self.light_problem())
    }

    /// The first problem of one group ([`Scene::find_problem`]): too many vertices or
    /// triangles, attribute arrays or face materials that do not match, a triangle whose
    /// vertex or material points nowhere.
    fn group_problem(&self, group: u32, g: &Group) -> Option<SceneProblem> {
        let vertices = g.positions.len();
        if let Some(p) = too_many("vertices in one group", vertices)
            .or_else(|| too_many("triangles in one group", g.indices.len()))
        {
            return Some(p);
        }
        for (what, got) in [("normals", g.normals.len()), ("UVs", g.uvs.len())] {
            if got != 0 && got != vertices {
                return Some(SceneProblem::AttributeCount {
                    group,
                    name: g.name.clone(),
                    what,
                    got,
                    vertices,
                });
            }
        }
        if g.face_materials.len() != g.indices.len() {
            return Some(SceneProblem::FaceMaterialCount {
                group,
                name: g.name.clone(),
                got: g.face_materials.len(),
                triangles: g.indices.len(),
            });
        }
        for (t, (tri, &m)) in g.indices.iter().zip(&g.face_materials).enumerate() {
            if let Some(&vertex) = tri.iter().find(|&&v| v as usize >= vertices) {
                return Some(SceneProblem::VertexOutOfRange {
                    group,
                    name: g.name.clone(),
                    triangle: t as u32,
                    vertex,
                    vertices,
                });
            }
            if m as usize >= self.materials.len() {
                return Some(SceneProblem::MaterialOutOfRange {
                    group,
                    name: g.name.clone(),
                    triangle: t as u32,
                    material: m,
                    materials: self.materials.len(),
                });
            }
        }
        None
    }

    /// The first texture whose texels do not match its size ([`Scene::find_problem`]).
    fn texture_problem(&self) -> Option<SceneProblem> {
        for (index, t) in self.textures.iter().enumerate() {
            if !t.is_consistent() {
                return Some(SceneProblem::TextureSize {
                    index,
                    path: t.path.clone(),
                    got: t.texels.len(),
                    width: t.width,
                    height: t.height,
                });
            }
        }
        None
    }

    /// The first light that names no triangle or has no positive finite area
    /// ([`Scene::find_problem`]).
    fn light_problem(&self) -> Option<SceneProblem> {
        for (index, l) in self.lights.iter().enumerate() {
            let triangles = self
                .groups
                .get(l.group as usize)
                .map(|g| g.triangle_count());
            if triangles.is_none_or(|n| l.prim as usize >= n) {
                return Some(SceneProblem::LightOutOfRange {
                    light: index,
                    group: l.group,
                    prim: l.prim,
                });
            }
            if !(l.area > 0.0 && l.area.is_finite()) {
                return Some(SceneProblem::LightArea {
                    light: index,
                    area: l.area.to_string(),
                });
            }
        }
        None
    }

    /// Per group, the light index of each triangle ([`NO_LIGHT`] when it is not a light), or
    /// `None` for a group without lights. The one table both backends use to find the light a
    /// path hit (the CPU's `LightSampler`, the GPU's per-record `light_index` array), so that
    /// the MIS weight of an emitter hit uses the same light on both. Lights outside the groups
    /// (an invalid scene, see [`Scene::validate`]) are left out.
    pub fn light_index_table(&self) -> Vec<Option<Vec<u32>>> {
        let mut index: Vec<Option<Vec<u32>>> = vec![None; self.groups.len()];
        for (i, l) in self.lights.iter().enumerate() {
            let Some(g) = self.groups.get(l.group as usize) else {
                continue;
            };
            let table =
                index[l.group as usize].get_or_insert_with(|| vec![NO_LIGHT; g.triangle_count()]);
            if let Some(slot) = table.get_mut(l.prim as usize) {
                *slot = i as u32;
            }
        }
        index
    }
}

/// The problem of `count` things (`what`) where 32-bit ids cannot number them all
/// ([`Scene::find_problem`]); none where they can.
fn too_many(what: &'static str, count: usize) -> Option<SceneProblem> {
    (u32::try_from(count).is_err()).then_some(SceneProblem::TooMany {
        what,
        count,
        limit: u64::from(u32::MAX),
    })
}

/// The light index of a triangle that is not a light, in [`Scene::light_index_table`] (and
/// `GW_NO_LIGHT` in the device code).
pub const NO_LIGHT: u32 = u32::MAX;

/// An in-memory scene a backend cannot use, and why (see [`Scene::validate`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{scene}: {problem}")]
pub struct SceneError {
    /// The scene's `source` (its path, or the generator's name).
    pub scene: String,
    pub problem: SceneProblem,
}

/// What is wrong with a scene. Each names the group, texture or light.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SceneProblem {
    #[error("group {group} ({name}): triangle {triangle} uses material {material}, but the scene has {materials} materials")]
    MaterialOutOfRange {
        group: u32,
        name: String,
        triangle: u32,
        material: u32,
        materials: usize,
    },
    #[error("group {group} ({name}): triangle {triangle} uses vertex {vertex}, but the group has {vertices} vertices")]
    VertexOutOfRange {
        group: u32,
        name: String,
        triangle: u32,
        vertex: u32,
        vertices: usize,
    },
    #[error("group {group} ({name}) has {got} {what} for {vertices} vertices")]
    AttributeCount {
        group: u32,
        name: String,
        what: &'static str,
        got: usize,
        vertices: usize,
    },
    #[error("group {group} ({name}) has {got} face materials for {triangles} triangles")]
    FaceMaterialCount {
        group: u32,
        name: String,
        got: usize,
        triangles: usize,
    },
    #[error("texture {index} ({path}) has {got} texels, but is {width}x{height} (it needs width x height >= 1 texels)")]
    TextureSize {
        index: usize,
        path: String,
        got: usize,
        width: u32,
        height: u32,
    },
    #[error("light {light} names triangle {prim} of group {group}, which does not exist (call Scene::finalize after editing groups)")]
    LightOutOfRange { light: usize, group: u32, prim: u32 },
    #[error("light {light} has area {area}; a light needs a positive finite area")]
    LightArea { light: usize, area: String },
    #[error("the scene has {count} {what}, more than a 32-bit index takes ({limit})")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: u64,
    },
}

/// Removes the triangles no normal can be computed for (and their material entries) from a
/// group: zero area, or a squared area single precision cannot hold. Returns how many, and
/// how many of them had a non-zero area (in double precision): out of scale, not degenerate.
/// Compacts in place: a scene of millions of triangles is not copied to drop a few. A group
/// whose arrays disagree (see [`Scene::validate`]) is left untouched, and a triangle with a
/// vertex index out of range is kept, so that validation reports them.
pub(crate) fn drop_degenerate(g: &mut Group) -> (usize, usize) {
    let before = g.indices.len();
    if g.face_materials.len() != before {
        return (0, 0);
    }
    let mut kept = 0;
    let mut out_of_scale = 0;
    for prim in 0..before {
        let keep = match g.try_triangle(prim) {
            None => true,
            Some([a, b, c]) => {
                let area2 = (b - a).cross(c - a).length_squared();
                let ok = area2 > 0.0 && area2.is_finite();
                if !ok {
                    let (a, b, c) = (a.as_dvec3(), b.as_dvec3(), c.as_dvec3());
                    let exact = (b - a).cross(c - a).length_squared();
                    if exact > 0.0 && exact.is_finite() {
                        out_of_scale += 1;
                    }
                }
                ok
            }
        };
        if keep {
            g.indices[kept] = g.indices[prim];
            g.face_materials[kept] = g.face_materials[prim];
            kept += 1;
        }
    }
    g.indices.truncate(kept);
    g.face_materials.truncate(kept);
    (before - kept, out_of_scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths end on what reflects nothing and is opaque, of every kind but glass; a texture
    /// scales a colour, so a black `Kd` with a `map_Kd` still ends them.
    #[test]
    fn paths_end_on_opaque_surfaces_that_reflect_nothing() {
        let with = |kind: MaterialKind, kd: f32, ks: f32| Material {
            kind,
            specular: Vec3::splat(ks),
            ..Material::diffuse("m", Vec3::splat(kd))
        };
        assert!(with(MaterialKind::Diffuse, 0.0, 0.5).ends_paths());
        assert!(!with(MaterialKind::Diffuse, 0.1, 0.0).ends_paths());
        assert!(with(MaterialKind::Glossy, 0.0, 0.0).ends_paths());
        assert!(!with(MaterialKind::Glossy, 0.0, 0.5).ends_paths());
        assert!(!with(MaterialKind::Glossy, 0.5, 0.0).ends_paths());
        assert!(with(MaterialKind::Mirror, 0.5, 0.0).ends_paths());
        assert!(!with(MaterialKind::Mirror, 0.0, 0.5).ends_paths());
        assert!(!with(MaterialKind::Glass, 0.0, 0.0).ends_paths());
        let mut lamp = with(MaterialKind::Diffuse, 0.0, 0.0);
        lamp.emission = Vec3::splat(10.0);
        lamp.diffuse_texture = Some(0);
        assert!(lamp.ends_paths(), "a lamp's black face, textured or not");
        let mut veil = with(MaterialKind::Diffuse, 0.0, 0.0);
        veil.opacity = 0.5;
        assert!(!veil.ends_paths(), "rays pass through a dissolving surface");
        veil.emission = Vec3::splat(1.0);
        assert!(
            veil.ends_paths(),
            "emitters are opaque whatever their opacity"
        );
    }

    /// Opaque materials without a bump map print (and so hash: `content_hash`) exactly as the
    /// derived `Debug` of the struct before bump maps and opacity did, plainly and
    /// pretty-printed.
    #[test]
    fn opaque_materials_without_a_bump_map_print_as_before() {
        mod before {
            use glam::Vec3;
            #[allow(dead_code)]
            #[derive(Debug)]
            pub struct Material {
                pub name: String,
                pub kind: super::MaterialKind,
                pub diffuse: Vec3,
                pub specular: Vec3,
                pub shininess: f32,
                pub ior: f32,
                pub transmittance: Vec3,
                pub emission: Vec3,
                pub emission_texture: Option<u32>,
                pub diffuse_texture: Option<u32>,
                pub opacity_texture: Option<u32>,
            }
        }
        let mut m = Material::diffuse("brick \"red\"", Vec3::new(0.5, 0.25, 0.125));
        m.kind = MaterialKind::Glossy;
        m.emission_texture = Some(3);
        m.opacity_texture = Some(1);
        let old = before::Material {
            name: m.name.clone(),
            kind: m.kind,
            diffuse: m.diffuse,
            specular: m.specular,
            shininess: m.shininess,
            ior: m.ior,
            transmittance: m.transmittance,
            emission: m.emission,
            emission_texture: m.emission_texture,
            diffuse_texture: m.diffuse_texture,
            opacity_texture: m.opacity_texture,
        };
        assert_eq!(format!("{m:?}"), format!("{old:?}"));
        assert_eq!(format!("{m:#?}"), format!("{old:#?}"));
        m.bump = Some(BumpMap::Normal {
            texture: 2,
            scale: 1.0,
        });
        assert!(format!("{m:?}")
            .ends_with("opacity_texture: Some(1), bump: Normal { texture: 2, scale: 1.0 } }"));
        m.opacity = 0.25;
        assert!(format!("{m:?}").ends_with("scale: 1.0 }, opacity: 0.25 }"));
    }

    fn quad_group() -> Group {
        Group {
            name: "q".into(),
            positions: vec![
                Vec3::new(0.0, 0.0, 0.0),
                Vec3::new(1.0, 0.0, 0.0),
                Vec3::new(1.0, 1.0, 0.0),
                Vec3::new(2.0, 0.0, 0.0),
            ],
            normals: vec![],
            uvs: vec![],
            // The second triangle is collinear: zero area.
            indices: vec![[0, 1, 2], [0, 1, 3]],
            face_materials: vec![0, 0],
        }
    }

    #[test]
    fn degenerate_triangles_are_dropped_and_counted() {
        let s = Scene::new("t", vec![quad_group()], vec![Material::default_diffuse()]);
        assert_eq!(s.groups[0].triangle_count(), 1);
        assert_eq!(s.report.degenerate_dropped, 1);
        assert_eq!(s.report.out_of_scale_dropped, 0);
    }

    #[test]
    fn triangles_too_large_or_small_for_single_precision_are_told_apart() {
        let tri = |scale: f32| {
            vec![
                Vec3::ZERO,
                Vec3::new(scale, 0.0, 0.0),
                Vec3::new(0.0, scale, 0.0),
            ]
        };
        let mut positions = tri(1e10);
        positions.extend(tri(1e-12));
        positions.extend(tri(1e9));
        let g = Group {
            name: "scales".into(),
            positions,
            normals: vec![],
            uvs: vec![],
            indices: vec![[0, 1, 2], [3, 4, 5], [6, 7, 8]],
            face_materials: vec![0, 0, 0],
        };
        let s = Scene::new(
            "t",
            vec![g, quad_group()],
            vec![Material::default_diffuse()],
        );
        assert_eq!(s.groups[0].triangle_count(), 1, "1e9 fits");
        assert_eq!(s.report.degenerate_dropped, 3);
        assert_eq!(s.report.out_of_scale_dropped, 2);
    }

    #[test]
    fn emitter_less_scene_gets_default_environment_with_warning() {
        let s = Scene::new("t", vec![quad_group()], vec![Material::default_diffuse()]);
        assert_eq!(s.environment_radiance(), DEFAULT_ENVIRONMENT);
        assert!(s.report.warnings.iter().any(|w| w.contains("no emissive")));
    }

    #[test]
    fn emissive_faces_become_lights() {
        let mut m = Material::default_diffuse();
        m.emission = Vec3::splat(4.0);
        let s = Scene::new("t", vec![quad_group()], vec![m]);
        assert_eq!(s.lights.len(), 1);
        assert!((s.lights[0].area - 0.5).abs() < 1e-6);
        assert!(s.environment.is_none());
    }

    fn problem(s: &Scene) -> SceneProblem {
        let e = s.validate().unwrap_err();
        assert_eq!(e.scene, s.source);
        assert!(e.to_string().starts_with(&format!("{}: ", s.source)), "{e}");
        e.problem
    }

    /// Every inconsistency the backends would index out of bounds with is an error naming the
    /// group (or texture, or light), and building or finalizing such a scene does not panic.
    #[test]
    fn inconsistent_scenes_are_refused_not_panicked_on() {
        let lamp = {
            let mut m = Material::default_diffuse();
            m.emission = Vec3::ONE;
            m
        };
        let ok = Scene::new("ok", vec![quad_group()], vec![lamp.clone()]);
        assert_eq!(ok.validate(), Ok(()));

        let mut g = quad_group();
        g.indices.push([0, 1, 9]);
        g.face_materials.push(0);
        let s = Scene::new("vertex", vec![g], vec![lamp.clone()]);
        assert!(matches!(
            problem(&s),
            SceneProblem::VertexOutOfRange {
                group: 0,
                vertex: 9,
                vertices: 4,
                ..
            }
        ));
        assert_eq!(s.lights.len(), 1, "the bad triangle is not a light");
        assert!(s.bounds().max[0] == 1.0, "bounds skip the bad index");

        let mut g = quad_group();
        g.indices[1] = [1, 3, 2];
        g.face_materials = vec![0, 7];
        let s = Scene::new("material", vec![g], vec![lamp.clone()]);
        let p = problem(&s);
        assert!(
            matches!(
                p,
                SceneProblem::MaterialOutOfRange {
                    triangle: 1,
                    material: 7,
                    materials: 1,
                    ..
                }
            ),
            "{p:?}"
        );
        assert!(p.to_string().contains("group 0 (q)"), "{p}");

        let mut g = quad_group();
        g.face_materials = vec![0];
        let s = Scene::new("face materials", vec![g], vec![lamp.clone()]);
        assert_eq!(s.groups[0].triangle_count(), 2, "left for validate");
        assert!(matches!(
            problem(&s),
            SceneProblem::FaceMaterialCount {
                got: 1,
                triangles: 2,
                ..
            }
        ));

        for (normals, uvs, what) in [(3, 0, "normals"), (0, 5, "UVs")] {
            let mut g = quad_group();
            g.normals = vec![Vec3::Z; normals];
            g.uvs = vec![Vec2::ZERO; uvs];
            let s = Scene::new("attributes", vec![g], vec![lamp.clone()]);
            assert!(
                matches!(problem(&s), SceneProblem::AttributeCount { what: w, .. } if w == what)
            );
        }

        let mut s = ok.clone();
        s.textures.push(Texture {
            path: "empty.png".into(),
            width: 0,
            height: 4,
            texels: vec![],
            mapping: crate::scene::UvMapping::IDENTITY,
        });
        assert!(matches!(
            problem(&s),
            SceneProblem::TextureSize { index: 0, .. }
        ));
        let mut s = ok.clone();
        s.textures.push(Texture {
            path: "short.png".into(),
            width: 2,
            height: 2,
            texels: vec![[1.0; 3]; 3],
            mapping: crate::scene::UvMapping::IDENTITY,
        });
        assert!(problem(&s).to_string().contains("short.png"));

        // Groups edited after finalize: the light list names a triangle that is gone.
        let mut s = ok.clone();
        s.groups[0].indices.clear();
        s.groups[0].face_materials.clear();
        assert!(matches!(
            problem(&s),
            SceneProblem::LightOutOfRange {
                light: 0,
                group: 0,
                prim: 0
            }
        ));
        let mut s = ok.clone();
        s.lights[0].area = f32::NAN;
        assert!(matches!(
            problem(&s),
            SceneProblem::LightArea { light: 0, .. }
        ));
    }

    /// A texture without texels reads as white instead of dividing by zero.
    #[test]
    fn an_empty_texture_samples_as_white() {
        for (width, height, n) in [(0, 0, 0), (0, 3, 0), (3, 0, 0), (2, 2, 1)] {
            let t = Texture {
                path: "t".into(),
                width,
                height,
                texels: vec![[0.5; 3]; n],
                mapping: crate::scene::UvMapping::IDENTITY,
            };
            assert!(!t.is_consistent());
            assert_eq!(t.sample(Vec2::new(0.3, 0.7)), Vec3::ONE);
        }
    }

    #[test]
    fn the_light_index_table_maps_triangles_to_lights() {
        let mut lamp = Material::default_diffuse();
        lamp.emission = Vec3::ONE;
        let mut g = quad_group();
        g.indices.push([1, 3, 2]);
        g.face_materials = vec![1, 0, 1];
        let s = Scene::new(
            "table",
            vec![quad_group(), g],
            vec![Material::default_diffuse(), lamp],
        );
        // Group 0 has no lights; group 1's collinear triangle was dropped, leaving [0, 2].
        let table = s.light_index_table();
        assert_eq!(table.len(), 2);
        assert_eq!(table[0], None);
        assert_eq!(table[1], Some(vec![0, 1]));
        assert_eq!((s.lights[1].group, s.lights[1].prim), (1, 1));
    }

    #[test]
    fn texture_lookup_wraps_and_interpolates() {
        let t = Texture {
            path: "t".into(),
            width: 2,
            height: 1,
            texels: vec![[0.0; 3], [1.0; 3]],
            mapping: crate::scene::UvMapping::IDENTITY,
        };
        // Texel centres: u = 0.25 -> 0, u = 0.75 -> 1, halfway between -> 0.5.
        assert!((t.sample(Vec2::new(0.25, 0.5)).x - 0.0).abs() < 1e-6);
        assert!((t.sample(Vec2::new(0.75, 0.5)).x - 1.0).abs() < 1e-6);
        assert!((t.sample(Vec2::new(0.5, 0.5)).x - 0.5).abs() < 1e-6);
        assert!((t.sample(Vec2::new(1.25, 0.5)).x - 0.0).abs() < 1e-6);
    }
}
