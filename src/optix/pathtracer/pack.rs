//! The scene as the device code reads it, packed on the host into ONE byte blob (uploaded as
//! one allocation): the material table, the textures (a table of offsets and sizes, and all
//! texels), the lights and their selection CDF, the environment map's texels and sampling
//! tables, and per group its vertices, indices, normals,
//! UVs, face materials and per-triangle light indices. Every region starts on a 16-byte
//! boundary; an empty region is a null pointer on the device. Pure: no GPU needed, and the
//! tests check the packing against the scene. The light tables are the ones the CPU samples
//! with ([`crate::scene::light_power::light_cdf`], `Scene::light_index_table`), uploaded as
//! they are.

use thiserror::Error;

use super::layout::{
    bump_kind_code, material_kind_code, GwHitGroupData, GwLight, GwMaterial, GwTexture,
};
use crate::scene::{Material, Scene, SceneError, Texture};

/// Alignment of every region of the blob (enough for `float4`/`u64` reads).
pub const REGION_ALIGNMENT: u64 = 16;

/// Why a scene cannot be handed to the GPU path tracer.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PackError {
    /// What both backends refuse ([`Scene::validate`]).
    #[error(transparent)]
    Scene(#[from] SceneError),
    #[error("the SBT names group {group}, but the packed scene has {groups} groups")]
    UnknownGroup { group: u32, groups: usize },
}

/// A byte range of the blob. `len == 0` means "absent" (a null device pointer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub offset: u64,
    pub len: u64,
}

impl Region {
    /// The device address of the region when the blob is uploaded at `base`; 0 when empty.
    pub fn device_ptr(&self, base: u64) -> u64 {
        if self.len == 0 {
            0
        } else {
            base + self.offset
        }
    }
}

/// Where one group's data sits in the blob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupRegions {
    pub positions: Region,
    pub indices: Region,
    pub normals: Region,
    pub uvs: Region,
    pub face_materials: Region,
    pub light_index: Region,
    pub triangle_count: u32,
}

/// The packed scene: the blob and where everything is in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedScene {
    pub bytes: Vec<u8>,
    pub materials: Region,
    pub textures: Region,
    pub texels: Region,
    pub lights: Region,
    pub light_cdf: Region,
    /// One entry per scene group, in group order.
    pub groups: Vec<GroupRegions>,
    pub material_count: u32,
    pub texture_count: u32,
    pub light_count: u32,
    /// The scene's [`Scene::two_sided_lights`]: the launch parameters carry it to the device.
    pub two_sided_lights: bool,
    /// The environment map ([`Scene::environment_map`]), when there is one.
    pub environment_map: Option<PackedEnvironmentMap>,
}

/// Where an environment map's data sits in the blob, and what the launch parameters carry of
/// it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PackedEnvironmentMap {
    pub texels: Region,
    pub row_cdf: Region,
    pub col_cdf: Region,
    pub uv_pdf: Region,
    pub width: u32,
    pub height: u32,
    pub rotation_turns: f32,
    /// `P(env)`: [`crate::scene::light_power::environment_share`].
    pub share: f32,
    /// [`crate::scene::EnvironmentMap::compensation`]: the luminance the sampling takes off
    /// each texel's.
    pub compensation: f32,
}

/// Appends aligned regions to a byte vector.
#[derive(Default)]
struct Blob {
    bytes: Vec<u8>,
}

impl Blob {
    fn push<T: bytemuck::Pod>(&mut self, data: &[T]) -> Region {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.is_empty() {
            return Region::default();
        }
        let offset = (self.bytes.len() as u64).div_ceil(REGION_ALIGNMENT) * REGION_ALIGNMENT;
        self.bytes.resize(offset as usize, 0);
        self.bytes.extend_from_slice(bytes);
        Region {
            offset,
            len: bytes.len() as u64,
        }
    }
}

/// One material as the device reads it. A `map_Kd`, `map_d`, `map_Ke` or bump-map index
/// outside the texture table packs as "no texture", which is what the CPU does with it
/// (`Bsdf::new` uses a texel of 1, `Scene::is_cut_out` no mask, `Material::emission_at` the
/// constant Ke, `bump::bent_normal` the unbent normal).
pub fn pack_material(m: &Material, texture_count: usize) -> GwMaterial {
    let index = |t| texture_index(t, texture_count);
    GwMaterial {
        diffuse: m.diffuse.to_array(),
        kind: material_kind_code(m.kind),
        specular: m.specular.to_array(),
        shininess: m.shininess,
        transmittance: m.transmittance.to_array(),
        ior: m.ior,
        emission: m.emission.to_array(),
        texture: index(m.diffuse_texture),
        opacity_texture: index(m.opacity_texture),
        emission_texture: index(m.emission_texture),
        bump_texture: index(m.bump.map(|b| b.texture())),
        bump_kind: m.bump.as_ref().map_or(0, bump_kind_code),
        bump_scale: m.bump.map_or(0.0, |b| b.scale()),
        opacity: if m.dissolves() { m.opacity } else { 1.0 },
        specular_texture: index(m.specular_texture),
        pad: 0,
    }
}

/// The texture table and every texel, textures one after another (the textures are
/// consistent: [`Scene::validate`] has checked them).
pub fn pack_textures(textures: &[Texture]) -> (Vec<GwTexture>, Vec<[f32; 3]>) {
    let mut table = Vec::with_capacity(textures.len());
    let mut texels = Vec::with_capacity(textures.iter().map(|t| t.texels.len()).sum());
    for t in textures {
        table.push(GwTexture {
            first_texel: texels.len() as u64,
            width: t.width,
            height: t.height,
            uv_scale: t.mapping.scale.to_array(),
            uv_offset: t.mapping.offset.to_array(),
        });
        texels.extend_from_slice(&t.texels);
    }
    (table, texels)
}

/// Every area light with its triangle's vertices, in the order of `scene.lights`.
pub fn pack_lights(scene: &Scene) -> Vec<GwLight> {
    scene
        .lights
        .iter()
        .map(|l| {
            let g = &scene.groups[l.group as usize];
            let prim = l.prim as usize;
            let [p0, p1, p2] = g.triangle(prim);
            // The mask of the triangle's own material and the light's emission map, as
            // `Scene::is_cut_out` and `Scene::light_emission_at` find them; none without UVs
            // (neither is read then), so the device skips them.
            let has_uvs = !g.uvs.is_empty();
            let mask = match g.face_materials.get(prim) {
                Some(&m) if has_uvs => scene.materials.get(m as usize).map_or(-1, |m| {
                    texture_index(m.opacity_texture, scene.textures.len())
                }),
                _ => -1,
            };
            let emission_map = match l.emission_texture {
                t @ Some(_) if has_uvs => texture_index(t, scene.textures.len()),
                _ => -1,
            };
            let [uv0, uv1, uv2] = if mask >= 0 || emission_map >= 0 {
                g.indices[prim].map(|i| g.uvs[i as usize].to_array())
            } else {
                [[0.0; 2]; 3]
            };
            GwLight {
                p0: p0.to_array(),
                area: l.area,
                p1: p1.to_array(),
                group: l.group,
                p2: p2.to_array(),
                prim: l.prim,
                emission: l.emission.to_array(),
                opacity_texture: mask,
                uv0,
                uv1,
                uv2,
                emission_texture: emission_map,
                pad: 0,
            }
        })
        .collect()
}

/// A texture index as the device reads it: the index, or -1 for none and for one outside the
/// table of `texture_count` textures (which both backends read as "no texture").
fn texture_index(t: Option<u32>, texture_count: usize) -> i32 {
    match t {
        Some(i) if (i as usize) < texture_count && i <= i32::MAX as u32 => i as i32,
        _ => -1,
    }
}

/// Packs the whole scene (see the module comment). Fails, naming the group or texture, on
/// data the device code could read out of bounds (the checks of [`Scene::validate`], which the
/// CPU backend runs too).
pub fn pack_scene(scene: &Scene) -> Result<PackedScene, PackError> {
    scene.validate()?;
    let (textures, texels) = pack_textures(&scene.textures);
    let materials: Vec<GwMaterial> = scene
        .materials
        .iter()
        .map(|m| pack_material(m, scene.textures.len()))
        .collect();
    let lights = pack_lights(scene);
    let cdf = crate::scene::light_power::light_cdf(scene);
    let light_index = scene.light_index_table();

    let mut blob = Blob::default();
    let mut packed = PackedScene {
        materials: blob.push(&materials),
        textures: blob.push(&textures),
        texels: blob.push(&texels),
        lights: blob.push(&lights),
        light_cdf: blob.push(&cdf),
        material_count: materials.len() as u32,
        texture_count: textures.len() as u32,
        light_count: lights.len() as u32,
        two_sided_lights: scene.two_sided_lights,
        ..PackedScene::default()
    };
    packed.environment_map = scene.environment_map.as_ref().map(|map| {
        let (row_cdf, col_cdf, uv_pdf) = map.sampling_tables();
        PackedEnvironmentMap {
            texels: blob.push(map.texels()),
            row_cdf: blob.push(row_cdf),
            col_cdf: blob.push(col_cdf),
            uv_pdf: blob.push(uv_pdf),
            width: map.width,
            height: map.height,
            rotation_turns: map.rotation_turns(),
            share: crate::scene::light_power::environment_share(scene),
            compensation: map.compensation(),
        }
    });
    packed.groups = scene
        .groups
        .iter()
        .zip(&light_index)
        .map(|(g, lights)| GroupRegions {
            positions: blob.push(&g.positions),
            indices: blob.push(&g.indices),
            normals: blob.push(&g.normals),
            uvs: blob.push(&g.uvs),
            face_materials: blob.push(&g.face_materials),
            light_index: lights
                .as_deref()
                .map_or(Region::default(), |l| blob.push(l)),
            triangle_count: g.indices.len() as u32,
        })
        .collect();
    packed.bytes = blob.bytes;
    Ok(packed)
}

/// The data of hit-group SBT record r, for every r: `record_groups[r]` is the scene group of
/// record r (the accel's `GasTable::record_groups`), and the blob is on the device at `base`.
pub fn hit_group_data(
    packed: &PackedScene,
    base: u64,
    record_groups: &[u32],
) -> Result<Vec<GwHitGroupData>, PackError> {
    record_groups
        .iter()
        .map(|&group| {
            let g = packed
                .groups
                .get(group as usize)
                .ok_or(PackError::UnknownGroup {
                    group,
                    groups: packed.groups.len(),
                })?;
            Ok(GwHitGroupData {
                positions: g.positions.device_ptr(base),
                indices: g.indices.device_ptr(base),
                normals: g.normals.device_ptr(base),
                uvs: g.uvs.device_ptr(base),
                face_materials: g.face_materials.device_ptr(base),
                light_index: g.light_index.device_ptr(base),
                group,
                triangle_count: g.triangle_count,
                pad: [0; 2],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::integrator::LightSampler;
    use crate::scene::{Group, MaterialKind, SceneProblem, NO_LIGHT};
    use bytemuck::Pod;
    use glam::{Vec2, Vec3};

    fn tri_group(name: &str, offset: Vec3, material: u32, with_attributes: bool) -> Group {
        let positions = vec![
            offset,
            offset + Vec3::X,
            offset + Vec3::Y,
            offset + Vec3::ONE,
        ];
        Group {
            name: name.into(),
            normals: if with_attributes {
                vec![Vec3::Z; 4]
            } else {
                vec![]
            },
            uvs: if with_attributes {
                vec![Vec2::ZERO, Vec2::X, Vec2::Y, Vec2::ONE]
            } else {
                vec![]
            },
            positions,
            indices: vec![[0, 1, 2], [1, 3, 2]],
            face_materials: vec![material, material],
        }
    }

    /// A scene with every kind of data: two textures, a textured glossy material, a glass, two
    /// lights of different power in different groups, groups with and without attributes.
    fn test_scene() -> Scene {
        let mut glossy = Material::diffuse("glossy", Vec3::new(0.2, 0.3, 0.4));
        glossy.kind = MaterialKind::Glossy;
        glossy.specular = Vec3::splat(0.5);
        glossy.shininess = 42.0;
        glossy.diffuse_texture = Some(1);
        let mut glass = Material::diffuse("glass", Vec3::ONE);
        glass.kind = MaterialKind::Glass;
        glass.ior = 1.33;
        glass.transmittance = Vec3::new(0.9, 0.8, 0.7);
        let mut bright = Material::diffuse("bright", Vec3::ZERO);
        bright.emission = Vec3::new(10.0, 8.0, 6.0);
        bright.emission_texture = Some(0);
        let mut dim = Material::diffuse("dim", Vec3::ZERO);
        dim.emission = Vec3::splat(1.0);
        let mut broken_texture = Material::diffuse("missing", Vec3::ONE);
        broken_texture.diffuse_texture = Some(7);
        let mut g_lights = tri_group("lights", Vec3::new(0.0, 5.0, 0.0), 2, false);
        g_lights.face_materials = vec![2, 3];
        let mut scene = Scene::new(
            "pack-test",
            vec![
                tri_group("floor", Vec3::ZERO, 0, true),
                tri_group("glass", Vec3::new(2.0, 0.0, 0.0), 1, false),
                g_lights,
                tri_group("odd", Vec3::new(0.0, 0.0, 3.0), 4, true),
                tri_group("lamp", Vec3::new(0.0, 7.0, 1.0), 3, false),
            ],
            vec![glossy, glass, bright, dim, broken_texture],
        );
        scene.textures = vec![
            Texture {
                path: "a.png".into(),
                width: 2,
                height: 1,
                texels: vec![[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]],
                mapping: crate::scene::UvMapping::IDENTITY,
            },
            Texture {
                path: "b.png".into(),
                width: 1,
                height: 2,
                texels: vec![[0.7, 0.8, 0.9], [1.0, 0.0, 0.5]],
                mapping: crate::scene::UvMapping::IDENTITY,
            },
        ];
        scene
    }

    fn read<T: Pod>(packed: &PackedScene, r: Region) -> Vec<T> {
        assert_eq!(r.offset % REGION_ALIGNMENT, 0);
        let bytes = &packed.bytes[r.offset as usize..(r.offset + r.len) as usize];
        bytemuck::pod_collect_to_vec(bytes)
    }

    /// An environment map's texels and sampling tables are in the blob as the CPU holds them,
    /// with its size, rotation and share of next events; a scene without one packs none.
    #[test]
    fn an_environment_map_packs_its_texels_and_tables() {
        let mut scene = test_scene();
        assert_eq!(pack_scene(&scene).unwrap().environment_map, None);
        let texels: Vec<glam::Vec3> = (0..8 * 4)
            .map(|k| glam::Vec3::new(k as f32, 1.0, 0.5))
            .collect();
        let map = crate::scene::EnvironmentMap::from_texels("m", 8, 4, texels, 30.0).unwrap();
        scene.set_environment_map(std::sync::Arc::new(map.clone()));
        let packed = pack_scene(&scene).unwrap();
        let env = packed.environment_map.unwrap();
        assert_eq!((env.width, env.height), (8, 4));
        assert_eq!(env.rotation_turns, 30.0 / 360.0);
        assert_eq!(
            env.share, 0.5,
            "the test scene has lights: half the next events"
        );
        // The share chosen for a render (`--env-share`, or the probe's) is the one uploaded,
        // as the CPU's light sampler uses it.
        scene.environment_share = Some(0.1875);
        let chosen = pack_scene(&scene).unwrap().environment_map.unwrap();
        assert_eq!(chosen.share, 0.1875);
        assert_eq!(LightSampler::new(&scene).environment_share(), 0.1875);
        let got: Vec<glam::Vec3> = read(&packed, env.texels);
        assert_eq!(got, map.texels());
        let (rows, cols, pdf) = map.sampling_tables();
        assert_eq!(read::<f32>(&packed, env.row_cdf), rows);
        assert_eq!(read::<f32>(&packed, env.col_cdf), cols);
        assert_eq!(read::<f32>(&packed, env.uv_pdf), pdf);
        // The patches between texel centres: H + 1 rows of W.
        assert_eq!((rows.len(), cols.len(), pdf.len()), (5, 40, 40));
        assert_eq!(env.compensation, map.compensation());
        assert!(env.compensation > 0.0);
    }

    #[test]
    fn packed_scene_round_trips() {
        let scene = test_scene();
        let packed = pack_scene(&scene).unwrap();
        assert_eq!(packed.material_count as usize, scene.materials.len());
        assert_eq!(packed.texture_count, 2);
        assert_eq!(packed.light_count, 4);
        assert!(!packed.two_sided_lights);
        let mut two_sided = scene.clone();
        two_sided.two_sided_lights = true;
        let packed2 = pack_scene(&two_sided).unwrap();
        assert!(packed2.two_sided_lights);
        assert_eq!(packed2.bytes, packed.bytes, "the flag is not in the blob");

        let materials: Vec<GwMaterial> = read(&packed, packed.materials);
        for (m, g) in scene.materials.iter().zip(&materials) {
            assert_eq!(g.diffuse, m.diffuse.to_array());
            assert_eq!(g.specular, m.specular.to_array());
            assert_eq!(g.transmittance, m.transmittance.to_array());
            assert_eq!(g.emission, m.emission.to_array());
            assert_eq!((g.shininess, g.ior), (m.shininess, m.ior));
            assert_eq!(
                super::super::layout::material_kind_from_code(g.kind),
                Some(m.kind)
            );
        }
        assert_eq!(materials[0].texture, 1);
        assert_eq!(materials[1].texture, -1);
        assert_eq!(
            materials[4].texture, -1,
            "out-of-range map_Kd packs as none"
        );
        let emission_maps: Vec<i32> = materials.iter().map(|m| m.emission_texture).collect();
        assert_eq!(emission_maps, [-1, -1, 0, -1, -1]);

        // Textures: every texel is found again through the table.
        let table: Vec<GwTexture> = read(&packed, packed.textures);
        let texels: Vec<[f32; 3]> = read(&packed, packed.texels);
        for (t, g) in scene.textures.iter().zip(&table) {
            assert_eq!((g.width, g.height), (t.width, t.height));
            let start = g.first_texel as usize;
            assert_eq!(&texels[start..start + t.texels.len()], &t.texels[..]);
        }

        // Lights: the triangle's vertices, area and emission, in scene order.
        let lights: Vec<GwLight> = read(&packed, packed.lights);
        assert_eq!(lights.len(), scene.lights.len());
        for (l, g) in scene.lights.iter().zip(&lights) {
            let [a, b, c] = scene.groups[l.group as usize].triangle(l.prim as usize);
            assert_eq!(
                (g.p0, g.p1, g.p2),
                (a.to_array(), b.to_array(), c.to_array())
            );
            assert_eq!((g.group, g.prim, g.area), (l.group, l.prim, l.area));
            assert_eq!(g.emission, l.emission.to_array());
        }

        // Groups: every array as the scene has it; absent ones are empty regions.
        for (gi, (g, r)) in scene.groups.iter().zip(&packed.groups).enumerate() {
            let pos: Vec<Vec3> = read(&packed, r.positions);
            assert_eq!(pos, g.positions);
            let idx: Vec<[u32; 3]> = read(&packed, r.indices);
            assert_eq!(idx, g.indices);
            let fm: Vec<u32> = read(&packed, r.face_materials);
            assert_eq!(fm, g.face_materials);
            if g.normals.is_empty() {
                assert_eq!(r.normals, Region::default());
                assert_eq!(r.uvs, Region::default());
            } else {
                let n: Vec<Vec3> = read(&packed, r.normals);
                assert_eq!(n, g.normals);
                let uv: Vec<Vec2> = read(&packed, r.uvs);
                assert_eq!(uv, g.uvs);
            }
            let lights_here: Vec<usize> = (0..scene.lights.len())
                .filter(|&i| scene.lights[i].group as usize == gi)
                .collect();
            if lights_here.is_empty() {
                assert_eq!(r.light_index, Region::default(), "group {gi}");
            } else {
                let li: Vec<u32> = read(&packed, r.light_index);
                for (prim, &l) in li.iter().enumerate() {
                    let expected = scene
                        .lights
                        .iter()
                        .position(|x| x.group as usize == gi && x.prim as usize == prim)
                        .map_or(NO_LIGHT, |i| i as u32);
                    assert_eq!(l, expected);
                }
            }
        }
    }

    #[test]
    fn regions_are_aligned_and_disjoint() {
        let packed = pack_scene(&test_scene()).unwrap();
        let mut regions = vec![
            packed.materials,
            packed.textures,
            packed.texels,
            packed.lights,
            packed.light_cdf,
        ];
        for g in &packed.groups {
            regions.extend([
                g.positions,
                g.indices,
                g.normals,
                g.uvs,
                g.face_materials,
                g.light_index,
            ]);
        }
        let mut present: Vec<Region> = regions.into_iter().filter(|r| r.len > 0).collect();
        present.sort_by_key(|r| r.offset);
        for w in present.windows(2) {
            assert!(w[0].offset + w[0].len <= w[1].offset, "{:?}", w);
        }
        for r in &present {
            assert_eq!(r.offset % REGION_ALIGNMENT, 0);
            assert!(r.offset + r.len <= packed.bytes.len() as u64);
        }
        assert_eq!(Region::default().device_ptr(0x1000), 0);
        assert_eq!(Region { offset: 32, len: 4 }.device_ptr(0x1000), 0x1020);
    }

    /// The blob carries the CPU's own light tables (not a copy of their code): the CDF of
    /// `LightSampler`, bit for bit, and the triangle -> light table of `Scene`. That the device
    /// code picks from them as the CPU does is the host harness's job
    /// (`tests/optix_pathtracer_host.rs`, bit-identical renders).
    #[test]
    fn the_blob_carries_the_cpu_light_tables() {
        let scene = test_scene();
        let packed = pack_scene(&scene).unwrap();
        let cpu = LightSampler::new(&scene);
        let cdf: Vec<f32> = read(&packed, packed.light_cdf);
        assert_eq!(cdf.len(), scene.lights.len());
        let bits = |v: &[f32]| v.iter().map(|c| c.to_bits()).collect::<Vec<u32>>();
        assert_eq!(bits(&cdf), bits(cpu.cdf()));
        for (g, table) in packed.groups.iter().zip(scene.light_index_table()) {
            match table {
                Some(t) => assert_eq!(read::<u32>(&packed, g.light_index), t),
                None => assert_eq!(g.light_index, Region::default()),
            }
        }
    }

    /// Light selection against its definition, computed here in f64 from the scene's vertices
    /// and emissions: light i is picked with probability `lum(Le_i) area_i / sum_j lum(Le_j)
    /// area_j` (Rec. 709 luminance), i.e. `pick(u) = i` for every `u` inside the i-th interval
    /// of that partition of [0, 1).
    #[test]
    fn lights_are_picked_in_proportion_to_luminance_times_area() {
        let scene = test_scene();
        let cpu = LightSampler::new(&scene);
        let weights: Vec<f64> = scene
            .lights
            .iter()
            .map(|l| {
                let [a, b, c] = scene.groups[l.group as usize]
                    .triangle(l.prim as usize)
                    .map(|v| v.as_dvec3());
                let area = 0.5 * (b - a).cross(c - a).length();
                let e = l.emission.as_dvec3();
                (0.2126 * e.x + 0.7152 * e.y + 0.0722 * e.z) * area
            })
            .collect();
        let total: f64 = weights.iter().sum();
        assert_eq!(weights.len(), 4);
        let mut lo = 0.0f64;
        for (i, w) in weights.iter().enumerate() {
            let p = w / total;
            assert!(
                (f64::from(cpu.probability(i)) - p).abs() < 1e-6,
                "light {i}: probability {} expected {p}",
                cpu.probability(i)
            );
            let hi = lo + p;
            for t in [0.001, 0.5, 0.999] {
                let u = (lo + t * (hi - lo)) as f32;
                assert_eq!(cpu.pick(u), i, "u = {u} in [{lo}, {hi})");
            }
            lo = hi;
        }
        // The ends of [0, 1): the first and the last light.
        assert_eq!(cpu.pick(0.0), 0);
        assert_eq!(cpu.pick(1.0 - f32::EPSILON / 2.0), 3);
        // The bright light (luminance ~8.3 on half a unit) outweighs all the dim ones.
        assert!(cpu.probability(0) > 0.5);
    }

    #[test]
    fn hit_records_point_into_the_blob() {
        let packed = pack_scene(&test_scene()).unwrap();
        let base = 0x7000_0000_0000;
        // A merged GAS's records name their groups in any order.
        let data = hit_group_data(&packed, base, &[2, 0, 4, 1, 3]).unwrap();
        assert_eq!(data.len(), 5);
        for d in &data {
            let g = &packed.groups[d.group as usize];
            assert_eq!(d.positions, base + g.positions.offset);
            assert_eq!(d.indices, base + g.indices.offset);
            assert_eq!(d.face_materials, base + g.face_materials.offset);
            assert_eq!(d.normals, g.normals.device_ptr(base));
            assert_eq!(d.triangle_count, 2);
        }
        assert_eq!(data[1].group, 0);
        assert_ne!(data[1].normals, 0);
        assert_eq!(data[0].normals, 0);
        assert_ne!(data[0].light_index, 0);
        assert_eq!(data[3].light_index, 0);
        assert!(hit_group_data(&packed, base, &[9]).is_err());
    }

    #[test]
    fn bad_scenes_are_refused_with_the_group_named() {
        // The pack refuses what Scene::validate refuses (tested case by case in scene), with
        // the same error: one check for both backends.
        let problem = |s: &Scene| match pack_scene(s) {
            Err(PackError::Scene(e)) => {
                assert_eq!(Err(e.clone()), s.validate());
                e.problem
            }
            other => panic!("expected a scene error, got {other:?}"),
        };
        let mut s = test_scene();
        s.groups[1].face_materials[1] = 99;
        let p = problem(&s);
        assert!(matches!(
            p,
            SceneProblem::MaterialOutOfRange {
                group: 1,
                triangle: 1,
                material: 99,
                ..
            }
        ));
        assert!(p.to_string().contains("(glass)"), "{p}");

        let mut s = test_scene();
        s.groups[0].indices[0][2] = 4;
        assert!(matches!(
            problem(&s),
            SceneProblem::VertexOutOfRange {
                group: 0,
                vertex: 4,
                ..
            }
        ));

        let mut s = test_scene();
        s.groups[3].uvs.pop();
        assert!(matches!(
            problem(&s),
            SceneProblem::AttributeCount { what: "UVs", .. }
        ));

        let mut s = test_scene();
        s.textures[0].texels.pop();
        assert!(matches!(
            problem(&s),
            SceneProblem::TextureSize { index: 0, .. }
        ));
    }

    /// A light carries its material's mask and emission map only where `Scene::is_cut_out`
    /// and `Scene::light_emission_at` would read them: the group has UVs and the index is in
    /// the table. Then its corners' UVs come along, in the triangle's corner order.
    #[test]
    fn lights_carry_their_maps_and_corner_uvs_only_where_the_cpu_reads_them() {
        type SetMap = fn(&mut Material, Option<u32>);
        type GetMap = fn(&GwLight) -> i32;
        let cases: [(&str, SetMap, GetMap); 2] = [
            ("mask", |m, t| m.opacity_texture = t, |l| l.opacity_texture),
            (
                "emission map",
                |m, t| m.emission_texture = t,
                |l| l.emission_texture,
            ),
        ];
        for (what, set, get) in cases {
            let mut mapped = Material::diffuse("mapped", Vec3::ZERO);
            mapped.emission = Vec3::ONE;
            set(&mut mapped, Some(1));
            let mut dangling = mapped.clone();
            set(&mut dangling, Some(9));
            let mut uvs = tri_group("with-uvs", Vec3::ZERO, 0, true);
            uvs.face_materials = vec![0, 1];
            let mut scene = Scene::new(
                "mapped-lights",
                vec![uvs, tri_group("no-uvs", Vec3::Z, 0, false)],
                vec![mapped, dangling],
            );
            scene.textures = test_scene().textures;
            scene.finalize();
            let lights = pack_lights(&scene);
            let maps: Vec<(u32, u32, i32)> =
                lights.iter().map(|l| (l.group, l.prim, get(l))).collect();
            assert_eq!(
                maps,
                [(0, 0, 1), (0, 1, -1), (1, 0, -1), (1, 1, -1)],
                "{what}"
            );
            // Only the one map is set.
            assert!(
                lights
                    .iter()
                    .all(|l| l.opacity_texture.min(l.emission_texture) == -1),
                "{what}"
            );
            // Triangle [0, 1, 2] of UVs [0, X, Y, ONE].
            assert_eq!(
                (lights[0].uv0, lights[0].uv1, lights[0].uv2),
                ([0.0, 0.0], [1.0, 0.0], [0.0, 1.0]),
                "{what}"
            );
            assert!(
                lights[1..]
                    .iter()
                    .all(|l| (l.uv0, l.uv1, l.uv2) == ([0.0; 2], [0.0; 2], [0.0; 2])),
                "{what}"
            );
        }
    }

    #[test]
    fn a_scene_without_lights_packs_empty_light_regions() {
        let s = Scene::new(
            "dark",
            vec![tri_group("g", Vec3::ZERO, 0, false)],
            vec![Material::default_diffuse()],
        );
        let p = pack_scene(&s).unwrap();
        assert_eq!(p.light_count, 0);
        assert_eq!(p.lights, Region::default());
        assert_eq!(p.light_cdf, Region::default());
        assert_eq!(p.textures, Region::default());
        assert_eq!(p.groups[0].light_index, Region::default());
    }
}
