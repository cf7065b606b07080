//! The structs the device code of `ptx/pathtrace.cu` (and `ptx/gasworks_common.h`) reads, laid
//! out byte for byte as CUDA lays them out. Device pointers are `u64` (0 = null). The tests
//! here pin the Rust side; `tests/optix_pathtracer_host.rs` compiles the device code with the
//! host C++ compiler and asserts, in C++, every size, field offset and field size of these
//! structs, and the material kind codes, so a change on one side that is not made on the other
//! fails to compile.

use bytemuck::{Pod, Zeroable};

use crate::scene::MaterialKind;

/// `GwMaterial`: one [`crate::scene::Material`] (96 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GwMaterial {
    pub diffuse: [f32; 3],
    /// [`material_kind_code`] of the kind.
    pub kind: u32,
    pub specular: [f32; 3],
    pub shininess: f32,
    pub transmittance: [f32; 3],
    pub ior: f32,
    pub emission: [f32; 3],
    /// Index into the texture table, or -1 (no `map_Kd`).
    pub texture: i32,
    /// Index into the texture table of the opacity mask, or -1 (no `map_d`: not a cut-out).
    pub opacity_texture: i32,
    /// Index into the texture table of the emission map, or -1 (no `map_Ke`).
    pub emission_texture: i32,
    /// Index into the texture table of the bump or normal map, or -1 (none).
    pub bump_texture: i32,
    /// [`bump_kind_code`] of the map's kind (0 without one).
    pub bump_kind: u32,
    /// The map's `-bm` multiplier ([`crate::scene::BumpMap::scale`]).
    pub bump_scale: f32,
    /// [`crate::scene::Material::opacity`] where the material dissolves
    /// ([`crate::scene::Material::dissolves`]), else 1.
    pub opacity: f32,
    /// Index into the texture table of the specular map, or -1 (no `map_Ks`).
    pub specular_texture: i32,
    pub pad: u32,
}

/// The device's code for a [`crate::scene::BumpMap`]'s kind: 1 height, 2 normal (0 is "no
/// map", with `bump_texture` -1).
pub fn bump_kind_code(bump: &crate::scene::BumpMap) -> u32 {
    match bump {
        crate::scene::BumpMap::Height { .. } => 1,
        crate::scene::BumpMap::Normal { .. } => 2,
    }
}

/// `GwTexture`: where one texture's texels start in the texel array, its size, and its
/// [`crate::scene::UvMapping`] (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GwTexture {
    /// Index of its first texel (3 floats each) in the texel array.
    pub first_texel: u64,
    pub width: u32,
    pub height: u32,
    pub uv_scale: [f32; 2],
    pub uv_offset: [f32; 2],
}

/// `GwLight`: one emissive triangle, its vertices in world space, and what next-event
/// estimation needs to skip the holes of a cut-out emitter and to read an emission map: its
/// material's opacity mask and emission map and the UVs of its corners (96 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GwLight {
    pub p0: [f32; 3],
    pub area: f32,
    pub p1: [f32; 3],
    pub group: u32,
    pub p2: [f32; 3],
    pub prim: u32,
    pub emission: [f32; 3],
    /// Index of the opacity mask in the texture table, or -1: none, or the group has no UVs
    /// (then [`crate::scene::Scene::is_cut_out`] is false everywhere on the triangle).
    pub opacity_texture: i32,
    /// The UVs of the three corners (zero without a mask or an emission map).
    pub uv0: [f32; 2],
    pub uv1: [f32; 2],
    pub uv2: [f32; 2],
    /// Index of the emission map in the texture table, or -1: none, or the group has no UVs
    /// (then [`crate::scene::Scene::light_emission_at`] is the constant emission).
    pub emission_texture: i32,
    pub pad: u32,
}

/// `GwHitGroupData`: the data of one hit-group SBT record, i.e. of one scene group (one build
/// input of a GAS). Pointers are device addresses; 0 where the group has no normals, UVs or
/// lights (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GwHitGroupData {
    /// `float3` per vertex.
    pub positions: u64,
    /// `uint3` per triangle.
    pub indices: u64,
    /// `float3` per vertex, or 0.
    pub normals: u64,
    /// `float2` per vertex, or 0.
    pub uvs: u64,
    /// One material index per triangle.
    pub face_materials: u64,
    /// One light index per triangle (`u32::MAX`: not a light), or 0 when none is.
    pub light_index: u64,
    pub group: u32,
    pub triangle_count: u32,
    pub pad: [u32; 2],
}

/// `GwSample`: one sample a `SAMPLES` launch writes for the `REDUCE` launch after it (16
/// bytes): its radiance (non-finite values kept) and the rays it traced.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GwSample {
    pub radiance: [f32; 3],
    pub rays: u32,
}

/// `GwLaunchParams`: the `__constant__ pathtrace_params` of one launch (296 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GwLaunchParams {
    /// The IAS.
    pub handle: u64,
    /// `tile_w * tile_h` float4 `[r, g, b, n]`, row-major within the tile.
    pub accum: u64,
    pub materials: u64,
    pub textures: u64,
    pub texels: u64,
    pub lights: u64,
    pub light_cdf: u64,
    /// Two u64 the launch adds to: rays traced, non-finite samples. 0: not counted.
    pub counters: u64,
    pub seed: u64,
    pub eye: [f32; 3],
    pub cam_u: [f32; 3],
    pub cam_v: [f32; 3],
    pub cam_w: [f32; 3],
    /// Radiance of escaped rays (black when the scene has no environment).
    pub environment: [f32; 3],
    pub image_width: u32,
    pub image_height: u32,
    pub tile_x: u32,
    pub tile_y: u32,
    pub tile_w: u32,
    pub tile_h: u32,
    pub sample_begin: u32,
    pub sample_end: u32,
    pub max_depth: u32,
    pub light_count: u32,
    pub material_count: u32,
    pub texture_count: u32,
    /// 0: area lights emit from the front face only; 1: from both faces
    /// ([`crate::scene::Scene::two_sided_lights`]).
    pub two_sided_lights: u32,
    /// [`super::launch::LaunchMode`] code: how the launch's threads map to the work.
    pub mode: u32,
    /// The render's samples per pixel rounded up to a power of two, as the power
    /// ([`crate::render::sampler::sample_bits`]): the sampler's index of a pixel's samples.
    pub sample_bits: u32,
    /// `GwSample` per (sample, pixel) of the launch's sample range, sample-major; 0 in
    /// `ACCUMULATE` launches.
    pub samples: u64,
    /// The pixel filter ([`pixel_filter_code`]): where a sample's jitter puts its ray.
    pub pixel_filter: u32,
    /// The thin lens's radius ([`crate::scene::ThinLens`]); 0: a pinhole, whose samples draw
    /// no lens numbers.
    pub lens_radius: f32,
    /// The lens disk's axes (`ThinLens::axis_u`, `axis_v`).
    pub lens_u: [f32; 3],
    pub lens_v: [f32; 3],
    /// The distance of the plane in focus along `cam_w`.
    pub focus_distance: f32,
    /// The environment map's width in texels; 0: no map (the other `env_` fields unused).
    pub env_width: u32,
    /// The map's texels, 3 floats each, rows top (up) to bottom
    /// ([`crate::scene::EnvironmentMap::texels`]).
    pub env_texels: u64,
    /// Its sampling tables ([`crate::scene::EnvironmentMap::sampling_tables`]): the patch
    /// rows' CDF (`env_height + 1` entries), the per-row column CDFs and each patch's density
    /// factor; 0 for a black map.
    pub env_row_cdf: u64,
    pub env_col_cdf: u64,
    pub env_uv_pdf: u64,
    pub env_height: u32,
    /// `--env-rotate` as a fraction of a turn.
    pub env_rotation_turns: f32,
    /// `P(env)` ([`crate::scene::light_power::environment_share`]): the probability that
    /// next-event estimation samples the map.
    pub env_share: f32,
    /// The luminance the map's sampling takes off each texel's
    /// ([`crate::scene::EnvironmentMap::compensation`]).
    pub env_compensation: f32,
    /// One byte per pixel of the tile, row-major: non-zero where the launch renders nothing,
    /// its accumulation left as it came (the blocks adaptive sampling stopped,
    /// [`crate::render::TileRenderer::render_tile_skipping`]); 0 where every pixel renders.
    pub skip: u64,
}

/// The device code's code for a pixel filter (`GW_FILTER_BOX`... in `gasworks_common.h`).
pub fn pixel_filter_code(filter: crate::scene::PixelFilter) -> u32 {
    match filter {
        crate::scene::PixelFilter::Box => 0,
        crate::scene::PixelFilter::Tent => 1,
    }
}

/// The device code's code for a material kind (`GW_DIFFUSE`... in `gasworks_common.h`).
pub fn material_kind_code(kind: MaterialKind) -> u32 {
    match kind {
        MaterialKind::Diffuse => 0,
        MaterialKind::Glossy => 1,
        MaterialKind::Mirror => 2,
        MaterialKind::Glass => 3,
    }
}

/// The inverse of [`material_kind_code`].
pub fn material_kind_from_code(code: u32) -> Option<MaterialKind> {
    Some(match code {
        0 => MaterialKind::Diffuse,
        1 => MaterialKind::Glossy,
        2 => MaterialKind::Mirror,
        3 => MaterialKind::Glass,
        _ => return None,
    })
}

/// The light index of a triangle that is not a light (`GW_NO_LIGHT`): the scene's own.
pub const NO_LIGHT: u32 = crate::scene::NO_LIGHT;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    use crate::optix::pipeline::SbtRecord;

    #[test]
    fn material_layout_matches_the_device() {
        assert_eq!(size_of::<GwMaterial>(), 96);
        assert_eq!(align_of::<GwMaterial>(), 4);
        assert_eq!(offset_of!(GwMaterial, diffuse), 0);
        assert_eq!(offset_of!(GwMaterial, kind), 12);
        assert_eq!(offset_of!(GwMaterial, specular), 16);
        assert_eq!(offset_of!(GwMaterial, shininess), 28);
        assert_eq!(offset_of!(GwMaterial, transmittance), 32);
        assert_eq!(offset_of!(GwMaterial, ior), 44);
        assert_eq!(offset_of!(GwMaterial, emission), 48);
        assert_eq!(offset_of!(GwMaterial, texture), 60);
        assert_eq!(offset_of!(GwMaterial, opacity_texture), 64);
        assert_eq!(offset_of!(GwMaterial, emission_texture), 68);
        assert_eq!(offset_of!(GwMaterial, bump_texture), 72);
        assert_eq!(offset_of!(GwMaterial, bump_kind), 76);
        assert_eq!(offset_of!(GwMaterial, bump_scale), 80);
        assert_eq!(offset_of!(GwMaterial, opacity), 84);
        assert_eq!(offset_of!(GwMaterial, specular_texture), 88);
        assert_eq!(offset_of!(GwMaterial, pad), 92);
    }

    #[test]
    fn texture_and_light_layouts_match_the_device() {
        assert_eq!(size_of::<GwTexture>(), 32);
        assert_eq!(align_of::<GwTexture>(), 8);
        assert_eq!(offset_of!(GwTexture, first_texel), 0);
        assert_eq!(offset_of!(GwTexture, width), 8);
        assert_eq!(offset_of!(GwTexture, height), 12);
        assert_eq!(offset_of!(GwTexture, uv_scale), 16);
        assert_eq!(offset_of!(GwTexture, uv_offset), 24);

        assert_eq!(size_of::<GwLight>(), 96);
        assert_eq!(offset_of!(GwLight, p0), 0);
        assert_eq!(offset_of!(GwLight, area), 12);
        assert_eq!(offset_of!(GwLight, p1), 16);
        assert_eq!(offset_of!(GwLight, group), 28);
        assert_eq!(offset_of!(GwLight, p2), 32);
        assert_eq!(offset_of!(GwLight, prim), 44);
        assert_eq!(offset_of!(GwLight, emission), 48);
        assert_eq!(offset_of!(GwLight, opacity_texture), 60);
        assert_eq!(offset_of!(GwLight, uv0), 64);
        assert_eq!(offset_of!(GwLight, uv1), 72);
        assert_eq!(offset_of!(GwLight, uv2), 80);
        assert_eq!(offset_of!(GwLight, emission_texture), 88);
        assert_eq!(offset_of!(GwLight, pad), 92);
    }

    #[test]
    fn hit_group_record_layout_matches_the_device() {
        assert_eq!(size_of::<GwHitGroupData>(), 64);
        assert_eq!(align_of::<GwHitGroupData>(), 8);
        assert_eq!(offset_of!(GwHitGroupData, positions), 0);
        assert_eq!(offset_of!(GwHitGroupData, indices), 8);
        assert_eq!(offset_of!(GwHitGroupData, normals), 16);
        assert_eq!(offset_of!(GwHitGroupData, uvs), 24);
        assert_eq!(offset_of!(GwHitGroupData, face_materials), 32);
        assert_eq!(offset_of!(GwHitGroupData, light_index), 40);
        assert_eq!(offset_of!(GwHitGroupData, group), 48);
        assert_eq!(offset_of!(GwHitGroupData, triangle_count), 52);
        // The record: 32-byte header, then the data (8-byte aligned at offset 32), padded to 16.
        assert_eq!(SbtRecord::<GwHitGroupData>::STRIDE, 96);
        assert_eq!(SbtRecord::<()>::STRIDE, 32);
    }

    #[test]
    fn launch_params_layout_matches_the_device() {
        assert_eq!(size_of::<GwSample>(), 16);
        assert_eq!(size_of::<GwLaunchParams>(), 296);
        assert_eq!(align_of::<GwLaunchParams>(), 8);
        let expect = [
            (offset_of!(GwLaunchParams, handle), 0),
            (offset_of!(GwLaunchParams, accum), 8),
            (offset_of!(GwLaunchParams, materials), 16),
            (offset_of!(GwLaunchParams, textures), 24),
            (offset_of!(GwLaunchParams, texels), 32),
            (offset_of!(GwLaunchParams, lights), 40),
            (offset_of!(GwLaunchParams, light_cdf), 48),
            (offset_of!(GwLaunchParams, counters), 56),
            (offset_of!(GwLaunchParams, seed), 64),
            (offset_of!(GwLaunchParams, eye), 72),
            (offset_of!(GwLaunchParams, cam_u), 84),
            (offset_of!(GwLaunchParams, cam_v), 96),
            (offset_of!(GwLaunchParams, cam_w), 108),
            (offset_of!(GwLaunchParams, environment), 120),
            (offset_of!(GwLaunchParams, image_width), 132),
            (offset_of!(GwLaunchParams, image_height), 136),
            (offset_of!(GwLaunchParams, tile_x), 140),
            (offset_of!(GwLaunchParams, tile_y), 144),
            (offset_of!(GwLaunchParams, tile_w), 148),
            (offset_of!(GwLaunchParams, tile_h), 152),
            (offset_of!(GwLaunchParams, sample_begin), 156),
            (offset_of!(GwLaunchParams, sample_end), 160),
            (offset_of!(GwLaunchParams, max_depth), 164),
            (offset_of!(GwLaunchParams, light_count), 168),
            (offset_of!(GwLaunchParams, material_count), 172),
            (offset_of!(GwLaunchParams, texture_count), 176),
            (offset_of!(GwLaunchParams, two_sided_lights), 180),
            (offset_of!(GwLaunchParams, mode), 184),
            (offset_of!(GwLaunchParams, samples), 192),
            (offset_of!(GwLaunchParams, pixel_filter), 200),
            (offset_of!(GwLaunchParams, lens_radius), 204),
            (offset_of!(GwLaunchParams, lens_u), 208),
            (offset_of!(GwLaunchParams, lens_v), 220),
            (offset_of!(GwLaunchParams, focus_distance), 232),
            (offset_of!(GwLaunchParams, env_width), 236),
            (offset_of!(GwLaunchParams, env_texels), 240),
            (offset_of!(GwLaunchParams, env_row_cdf), 248),
            (offset_of!(GwLaunchParams, env_col_cdf), 256),
            (offset_of!(GwLaunchParams, env_uv_pdf), 264),
            (offset_of!(GwLaunchParams, env_height), 272),
            (offset_of!(GwLaunchParams, env_rotation_turns), 276),
            (offset_of!(GwLaunchParams, env_share), 280),
            (offset_of!(GwLaunchParams, env_compensation), 284),
            (offset_of!(GwLaunchParams, skip), 288),
        ];
        for (i, (got, want)) in expect.iter().enumerate() {
            assert_eq!(got, want, "field {i}");
        }
    }

    #[test]
    fn material_kind_codes_round_trip() {
        for kind in [
            MaterialKind::Diffuse,
            MaterialKind::Glossy,
            MaterialKind::Mirror,
            MaterialKind::Glass,
        ] {
            assert_eq!(
                material_kind_from_code(material_kind_code(kind)),
                Some(kind)
            );
        }
        assert_eq!(material_kind_from_code(4), None);
    }
}
