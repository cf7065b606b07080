//! The scene as the device code reads it, packed on the host into ONE byte blob (uploaded as
//! one allocation): the material table, the textures (a table of offsets and sizes, and all
//! texels), the lights and their selection CDF, and per group its vertices, indices, normals,
//! UVs, face materials and per-triangle light indices. Every region starts on a 16-byte
//! boundary; an empty region is a null pointer on the device. Pure: no GPU needed, and the
//! tests check the packing against the scene and against the CPU's light sampler.

use thiserror::Error;

use super::layout::{material_kind_code, GwHitGroupData, GwLight, GwMaterial, GwTexture, NO_LIGHT};
use crate::scene::{Material, Scene, Texture};

/// Alignment of every region of the blob (enough for `float4`/`u64` reads).
pub const REGION_ALIGNMENT: u64 = 16;

/// Why a scene cannot be handed to the GPU path tracer. Each names the group or texture.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PackError {
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
    #[error("texture {index} ({path}) has {got} texels, but is {width}x{height}")]
    TextureSize {
        index: usize,
        path: String,
        got: usize,
        width: u32,
        height: u32,
    },
    #[error("the scene has {count} {what}, more than the GPU path tracer takes ({limit})")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: u64,
    },
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

fn count_u32(what: &'static str, count: usize) -> Result<u32, PackError> {
    u32::try_from(count).map_err(|_| PackError::TooMany {
        what,
        count,
        limit: u64::from(u32::MAX),
    })
}

/// One material as the device reads it. A `map_Kd` index outside the texture table packs as
/// "no texture", which is what the CPU does with it (`Bsdf::new` uses a texel of 1).
pub fn pack_material(m: &Material, texture_count: usize) -> GwMaterial {
    let texture = match m.diffuse_texture {
        Some(i) if (i as usize) < texture_count && i <= i32::MAX as u32 => i as i32,
        _ => -1,
    };
    GwMaterial {
        diffuse: m.diffuse.to_array(),
        kind: material_kind_code(m.kind),
        specular: m.specular.to_array(),
        shininess: m.shininess,
        transmittance: m.transmittance.to_array(),
        ior: m.ior,
        emission: m.emission.to_array(),
        texture,
    }
}

/// The texture table and every texel, textures one after another.
pub fn pack_textures(textures: &[Texture]) -> Result<(Vec<GwTexture>, Vec<[f32; 3]>), PackError> {
    let mut table = Vec::with_capacity(textures.len());
    let mut texels = Vec::with_capacity(textures.iter().map(|t| t.texels.len()).sum());
    for (index, t) in textures.iter().enumerate() {
        if t.texels.len() as u64 != u64::from(t.width) * u64::from(t.height) || t.texels.is_empty()
        {
            return Err(PackError::TextureSize {
                index,
                path: t.path.clone(),
                got: t.texels.len(),
                width: t.width,
                height: t.height,
            });
        }
        table.push(GwTexture {
            first_texel: texels.len() as u64,
            width: t.width,
            height: t.height,
        });
        texels.extend_from_slice(&t.texels);
    }
    Ok((table, texels))
}

/// The light-selection CDF: the CPU's own ([`crate::cpu::integrator::light_cdf`]), so both
/// backends pick the same light for the same random number.
pub fn light_cdf(scene: &Scene) -> Vec<f32> {
    crate::cpu::integrator::light_cdf(scene)
}

/// Every area light with its triangle's vertices, in the order of `scene.lights`.
pub fn pack_lights(scene: &Scene) -> Vec<GwLight> {
    scene
        .lights
        .iter()
        .map(|l| {
            let [p0, p1, p2] = scene.groups[l.group as usize].triangle(l.prim as usize);
            GwLight {
                p0: p0.to_array(),
                area: l.area,
                p1: p1.to_array(),
                group: l.group,
                p2: p2.to_array(),
                prim: l.prim,
                emission: l.emission.to_array(),
                pad: 0.0,
            }
        })
        .collect()
}

/// Per group, the light index of each triangle ([`NO_LIGHT`] when it is not one), or `None`
/// for groups without lights (as the CPU's `LightSampler` keeps it).
pub fn light_indices(scene: &Scene) -> Vec<Option<Vec<u32>>> {
    let mut index: Vec<Option<Vec<u32>>> = vec![None; scene.groups.len()];
    for (i, l) in scene.lights.iter().enumerate() {
        let g = index[l.group as usize]
            .get_or_insert_with(|| vec![NO_LIGHT; scene.groups[l.group as usize].triangle_count()]);
        g[l.prim as usize] = i as u32;
    }
    index
}

/// Checks what the device code relies on: attribute arrays as long as the positions, indices
/// and material ids in range, counts that fit in 32 bits.
pub fn validate(scene: &Scene) -> Result<(), PackError> {
    count_u32("materials", scene.materials.len())?;
    count_u32("textures", scene.textures.len())?;
    count_u32("lights", scene.lights.len())?;
    count_u32("groups", scene.groups.len())?;
    for (gi, g) in scene.groups.iter().enumerate() {
        let group = gi as u32;
        let vertices = g.positions.len();
        count_u32("vertices in one group", vertices)?;
        count_u32("triangles in one group", g.indices.len())?;
        for (what, got) in [("normals", g.normals.len()), ("UVs", g.uvs.len())] {
            if got != 0 && got != vertices {
                return Err(PackError::AttributeCount {
                    group,
                    name: g.name.clone(),
                    what,
                    got,
                    vertices,
                });
            }
        }
        if g.face_materials.len() != g.indices.len() {
            return Err(PackError::FaceMaterialCount {
                group,
                name: g.name.clone(),
                got: g.face_materials.len(),
                triangles: g.indices.len(),
            });
        }
        for (t, (tri, &m)) in g.indices.iter().zip(&g.face_materials).enumerate() {
            if let Some(&vertex) = tri.iter().find(|&&v| v as usize >= vertices) {
                return Err(PackError::VertexOutOfRange {
                    group,
                    name: g.name.clone(),
                    triangle: t as u32,
                    vertex,
                    vertices,
                });
            }
            if m as usize >= scene.materials.len() {
                return Err(PackError::MaterialOutOfRange {
                    group,
                    name: g.name.clone(),
                    triangle: t as u32,
                    material: m,
                    materials: scene.materials.len(),
                });
            }
        }
    }
    Ok(())
}

/// Packs the whole scene (see the module comment). Fails, naming the group or texture, on
/// data the device code could read out of bounds.
pub fn pack_scene(scene: &Scene) -> Result<PackedScene, PackError> {
    validate(scene)?;
    let (textures, texels) = pack_textures(&scene.textures)?;
    let materials: Vec<GwMaterial> = scene
        .materials
        .iter()
        .map(|m| pack_material(m, scene.textures.len()))
        .collect();
    let lights = pack_lights(scene);
    let cdf = light_cdf(scene);
    let light_index = light_indices(scene);

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
        ..PackedScene::default()
    };
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
                .ok_or(PackError::TooMany {
                    what: "groups named by the SBT",
                    count: group as usize + 1,
                    limit: packed.groups.len() as u64,
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
    use crate::render::Sampler;
    use crate::scene::{Group, MaterialKind};
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
            },
            Texture {
                path: "b.png".into(),
                width: 1,
                height: 2,
                texels: vec![[0.7, 0.8, 0.9], [1.0, 0.0, 0.5]],
            },
        ];
        scene
    }

    fn read<T: Pod>(packed: &PackedScene, r: Region) -> Vec<T> {
        assert_eq!(r.offset % REGION_ALIGNMENT, 0);
        let bytes = &packed.bytes[r.offset as usize..(r.offset + r.len) as usize];
        bytemuck::pod_collect_to_vec(bytes)
    }

    #[test]
    fn packed_scene_round_trips() {
        let scene = test_scene();
        let packed = pack_scene(&scene).unwrap();
        assert_eq!(packed.material_count as usize, scene.materials.len());
        assert_eq!(packed.texture_count, 2);
        assert_eq!(packed.light_count, 4);

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

    /// The GPU picks lights from this CDF as the CPU does from its own: the same probability
    /// for every light, bit for bit, and the same pick for many uniform numbers.
    #[test]
    fn light_cdf_agrees_with_the_cpu_light_sampler() {
        let scene = test_scene();
        let cdf = light_cdf(&scene);
        let cpu = LightSampler::new(&scene);
        assert_eq!(*cdf.last().unwrap(), 1.0);
        for i in 0..cdf.len() {
            let lo = if i == 0 { 0.0 } else { cdf[i - 1] };
            assert_eq!((cdf[i] - lo).to_bits(), cpu.probability(i).to_bits());
        }
        // The device's pick: the first i with u < cdf[i], clamped to the last light.
        let pick = |u: f32| cdf.partition_point(|&c| c <= u).min(cdf.len() - 1);
        let mut s = Sampler::new(0, 0, 3);
        for _ in 0..10_000 {
            let u = s.next_f32();
            assert_eq!(pick(u), cpu.pick(u));
        }
        for u in [0.0, 0.999_999_94] {
            assert_eq!(pick(u), cpu.pick(u));
        }
        // The bright light (luminance ~8.3) is picked more often than the dim one.
        assert!(cdf[0] > 0.5, "{cdf:?}");
    }

    #[test]
    fn light_indices_agree_with_the_cpu_light_sampler() {
        let scene = test_scene();
        let cpu = LightSampler::new(&scene);
        let index = light_indices(&scene);
        for (gi, g) in scene.groups.iter().enumerate() {
            for prim in 0..g.triangle_count() {
                let gpu = index[gi]
                    .as_ref()
                    .map(|v| v[prim])
                    .filter(|&l| l != NO_LIGHT)
                    .map(|l| l as usize);
                assert_eq!(
                    gpu,
                    cpu.light_of(gi as u32, prim as u32),
                    "group {gi} prim {prim}"
                );
            }
        }
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
        let mut s = test_scene();
        s.groups[1].face_materials[1] = 99;
        let e = pack_scene(&s).unwrap_err();
        assert!(matches!(
            e,
            PackError::MaterialOutOfRange {
                group: 1,
                triangle: 1,
                material: 99,
                ..
            }
        ));
        assert!(e.to_string().contains("(glass)"), "{e}");

        let mut s = test_scene();
        s.groups[0].indices[0][2] = 4;
        assert!(matches!(
            pack_scene(&s),
            Err(PackError::VertexOutOfRange {
                group: 0,
                vertex: 4,
                ..
            })
        ));

        let mut s = test_scene();
        s.groups[3].uvs.pop();
        assert!(matches!(
            pack_scene(&s),
            Err(PackError::AttributeCount { what: "UVs", .. })
        ));

        let mut s = test_scene();
        s.textures[0].texels.pop();
        assert!(matches!(
            pack_scene(&s),
            Err(PackError::TextureSize { index: 0, .. })
        ));
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
