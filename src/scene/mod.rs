//! The scene model shared by every backend.
//!
//! A [`Scene`] is loaded once (from OBJ+MTL by [`obj::load_obj`], or built in memory by a
//! generator in [`gen`]) and handed to a backend. Each OBJ object/group stays its own
//! [`Group`]: the group is the unit of acceleration-structure builds, one BVH per group on the
//! CPU and one GAS per group on the GPU, so nothing here merges or splits groups.

pub mod camera;
pub mod gen;
pub mod obj;

use glam::{Vec2, Vec3};
use serde::Serialize;

pub use camera::Camera;

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
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Index into [`Scene::textures`] of the `map_Kd` texture, when it was found and decoded.
    pub diffuse_texture: Option<u32>,
}

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
            diffuse_texture: None,
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
}

/// A decoded texture: linear RGB, row-major, first row at the top of the image (v = 1).
#[derive(Clone, Debug)]
pub struct Texture {
    pub path: String,
    pub width: u32,
    pub height: u32,
    pub texels: Vec<[f32; 3]>,
}

impl Texture {
    /// Bilinear lookup with wrapping (OBJ UVs routinely leave [0,1]).
    pub fn sample(&self, uv: Vec2) -> Vec3 {
        let w = self.width as i64;
        let h = self.height as i64;
        let x = uv.x.rem_euclid(1.0) * self.width as f32 - 0.5;
        let y = (1.0 - uv.y.rem_euclid(1.0)) * self.height as f32 - 0.5;
        let (x0, y0) = (x.floor(), y.floor());
        let (fx, fy) = (x - x0, y - y0);
        let texel = |xi: i64, yi: i64| {
            let t = self.texels[(yi.rem_euclid(h) * w + xi.rem_euclid(w)) as usize];
            Vec3::from(t)
        };
        let (xi, yi) = (x0 as i64, y0 as i64);
        let top = texel(xi, yi).lerp(texel(xi + 1, yi), fx);
        let bottom = texel(xi, yi + 1).lerp(texel(xi + 1, yi + 1), fx);
        top.lerp(bottom, fy)
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

    pub fn triangle(&self, prim: usize) -> [Vec3; 3] {
        let [a, b, c] = self.indices[prim];
        [
            self.positions[a as usize],
            self.positions[b as usize],
            self.positions[c as usize],
        ]
    }

    pub fn bounds(&self) -> Bounds {
        let mut b = Bounds::EMPTY;
        for tri in &self.indices {
            for &i in tri {
                b.extend(self.positions[i as usize]);
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
    /// Radiance emitted from the front face (the side the winding's normal points to) and
    /// the back face alike; OBJ lights are routinely modelled with either winding.
    pub emission: Vec3,
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
    pub report: LoadReport,
}

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
            report: LoadReport::default(),
        };
        scene.finalize();
        scene
    }

    /// Recomputes what is derived from the groups. Call after editing groups or materials.
    pub fn finalize(&mut self) {
        let mut dropped = 0;
        for g in &mut self.groups {
            dropped += drop_degenerate(g);
        }
        self.report.degenerate_dropped += dropped;
        self.lights.clear();
        for (gi, g) in self.groups.iter().enumerate() {
            for (pi, &m) in g.face_materials.iter().enumerate() {
                let mat = &self.materials[m as usize];
                if mat.is_emissive() {
                    let [a, b, c] = g.triangle(pi);
                    self.lights.push(AreaLight {
                        group: gi as u32,
                        prim: pi as u32,
                        area: 0.5 * (b - a).cross(c - a).length(),
                        emission: mat.emission,
                    });
                }
            }
        }
        if self.lights.is_empty() && self.environment.is_none() {
            self.environment = Some(Environment {
                radiance: DEFAULT_ENVIRONMENT,
            });
            self.report.warnings.push(format!(
                "{}: the scene has no emissive material; lighting it with a uniform white environment (set one with --env R,G,B)",
                self.source
            ));
        }
    }

    pub fn triangle_count(&self) -> usize {
        self.groups.iter().map(|g| g.triangle_count()).sum()
    }

    pub fn bounds(&self) -> Bounds {
        self.groups
            .iter()
            .fold(Bounds::EMPTY, |b, g| b.union(&g.bounds()))
    }

    /// The environment radiance, black when the scene has none.
    pub fn environment_radiance(&self) -> Vec3 {
        self.environment.map(|e| e.radiance).unwrap_or(Vec3::ZERO)
    }
}

/// Removes zero-area triangles (and their material entries) from a group; returns how many.
fn drop_degenerate(g: &mut Group) -> usize {
    let before = g.indices.len();
    let mut keep_idx = Vec::with_capacity(before);
    let mut keep_mat = Vec::with_capacity(before);
    for (tri, &m) in g.indices.iter().zip(&g.face_materials) {
        let [a, b, c] = tri.map(|i| g.positions[i as usize]);
        let n = (b - a).cross(c - a);
        let area2 = n.length_squared();
        if area2 > 0.0 && area2.is_finite() {
            keep_idx.push(*tri);
            keep_mat.push(m);
        }
    }
    g.indices = keep_idx;
    g.face_materials = keep_mat;
    before - g.indices.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn texture_lookup_wraps_and_interpolates() {
        let t = Texture {
            path: "t".into(),
            width: 2,
            height: 1,
            texels: vec![[0.0; 3], [1.0; 3]],
        };
        // Texel centres: u = 0.25 -> 0, u = 0.75 -> 1, halfway between -> 0.5.
        assert!((t.sample(Vec2::new(0.25, 0.5)).x - 0.0).abs() < 1e-6);
        assert!((t.sample(Vec2::new(0.75, 0.5)).x - 1.0).abs() < 1e-6);
        assert!((t.sample(Vec2::new(0.5, 0.5)).x - 0.5).abs() < 1e-6);
        assert!((t.sample(Vec2::new(1.25, 0.5)).x - 0.0).abs() < 1e-6);
    }
}
