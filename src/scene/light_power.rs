//! How much light each area light gives off, and the tables next-event estimation picks its
//! light with: the selection CDF over the area lights ([`light_cdf`]) and the probability of
//! sampling the environment map instead ([`environment_share`]). Both backends take them from
//! here, the CPU's light sampler and the GPU's scene blob alike, so they pick the same light
//! for the same number.
//!
//! A plain emissive triangle emits `Ke` over its whole area, so its weight is its power up to
//! a constant, `luminance(Ke) * area`. One whose material has an emission map (`map_Ke`) or an
//! opacity mask (`map_d`) emits `Ke * map(uv)` where it is not a hole, which can be far less: a
//! sign whose texture is mostly dark, a lamp that is mostly hole. Weighted by its whole area it
//! would be picked more often than it deserves and most of its light points would find little
//! or no light, so its weight is `area * luminance(mean over the triangle of Ke * map * [not
//! a hole])`. `gasworks info` reports the same means as the lights' power.
//!
//! The mean is taken at the centroids of the `n^2` equal sub-triangles of a regular
//! subdivision, with about one per texel the triangle covers (`n` from 4 to 64). It is an
//! estimate and need not be exact: a light's probability enters both the density of its light
//! samples and the MIS weight of the BSDF samples that hit it, so any weights give an unbiased
//! estimator and better ones only lower the variance. A weight of zero (every centroid in a
//! hole or on black) leaves the light to BSDF sampling, which MIS then weighs fully.

use rayon::prelude::*;

use glam::DVec3;

use super::{AreaLight, Scene, Texture};
use crate::colour::luminance;

/// The fewest sub-triangles per side: even a triangle inside one texel is looked at in a few
/// places (bilinear lookups vary across a texel).
const MIN_SUBDIVISION: u32 = 4;
/// The most sub-triangles per side: 4096 lookups for a triangle that spans a large texture.
const MAX_SUBDIVISION: u32 = 64;

/// The selection weight of every light of `scene`, in its order (see the module comment).
/// Lights without maps weigh exactly `luminance(Ke) * area`, as before emission maps.
pub fn light_weights(scene: &Scene) -> Vec<f64> {
    scene
        .lights
        .par_iter()
        .map(|light| light_weight(scene, light))
        .collect()
}

/// One light's weight: `luminance(Ke) * area` without maps, else `area` times the luminance
/// of its [`mean_emission`].
pub fn light_weight(scene: &Scene, light: &AreaLight) -> f64 {
    match mapped_mean_emission(scene, light) {
        None => f64::from(luminance(light.emission).max(0.0)) * f64::from(light.area),
        Some(mean) => {
            let y = 0.2126 * mean.x + 0.7152 * mean.y + 0.0722 * mean.z;
            f64::from(light.area) * y.max(0.0)
        }
    }
}

/// The radiance a light emits on average over its triangle, holes counted as black: its
/// emission without maps, else the mean at the centroids of its subdivision. Times `pi *
/// area`, the power of its front face.
pub fn mean_emission(scene: &Scene, light: &AreaLight) -> DVec3 {
    mapped_mean_emission(scene, light).unwrap_or_else(|| light.emission.as_dvec3())
}

/// [`mean_emission`] of a light with a mask or an emission map that applies; `None` for the
/// others.
fn mapped_mean_emission(scene: &Scene, light: &AreaLight) -> Option<DVec3> {
    let maps = maps_of(scene, light);
    if maps.is_empty() {
        return None;
    }
    let n = subdivision(scene, light, &maps);
    let sum: DVec3 = centroids(n)
        .filter(|&(b1, b2)| !scene.is_cut_out(light.group, light.prim, b1, b2))
        .map(|(b1, b2)| scene.light_emission_at(light, b1, b2).as_dvec3())
        .sum();
    Some(sum / f64::from(n * n))
}

/// The light's emission map and opacity mask, those that exist and apply (the group has UVs:
/// without them neither is read).
fn maps_of<'a>(scene: &'a Scene, light: &AreaLight) -> Vec<&'a Texture> {
    let g = &scene.groups[light.group as usize];
    if g.uvs.is_empty() {
        return Vec::new();
    }
    let mask = g
        .face_materials
        .get(light.prim as usize)
        .and_then(|&m| scene.materials.get(m as usize))
        .and_then(|m| m.opacity_texture);
    [light.emission_texture, mask]
        .into_iter()
        .flatten()
        .filter_map(|t| scene.textures.get(t as usize))
        .collect()
}

/// Sub-triangles per side: about one sub-triangle per texel of the map that is finest over
/// the triangle (its UV area, through the map's scale, times the map's texel count).
fn subdivision(scene: &Scene, light: &AreaLight, maps: &[&Texture]) -> u32 {
    let g = &scene.groups[light.group as usize];
    let [a, b, c] = g.indices[light.prim as usize].map(|i| g.uvs[i as usize]);
    let uv_area = 0.5 * f64::from((b - a).perp_dot(c - a).abs());
    let texels = maps
        .iter()
        .map(|t| {
            let scale = f64::from((t.mapping.scale.x * t.mapping.scale.y).abs());
            uv_area * scale * f64::from(t.width) * f64::from(t.height)
        })
        .fold(0.0f64, f64::max);
    if !texels.is_finite() {
        return MAX_SUBDIVISION;
    }
    (texels.sqrt().ceil() as u32).clamp(MIN_SUBDIVISION, MAX_SUBDIVISION)
}

/// The barycentrics `(b1, b2)` of the centroids of the `n^2` equal sub-triangles of a
/// triangle cut by `n - 1` lines parallel to each side: `((i + 1/3) / n, (j + 1/3) / n)` for
/// `i + j < n` (those pointing like the triangle) and `((i + 2/3) / n, (j + 2/3) / n)` for
/// `i + j < n - 1` (the others).
pub fn centroids(n: u32) -> impl Iterator<Item = (f32, f32)> {
    let inv = 1.0 / n as f32;
    (0..n).flat_map(move |i| {
        let up =
            (0..n - i).map(move |j| ((i as f32 + 1.0 / 3.0) * inv, (j as f32 + 1.0 / 3.0) * inv));
        let down = (0..(n - i).saturating_sub(1))
            .map(move |j| ((i as f32 + 2.0 / 3.0) * inv, (j as f32 + 2.0 / 3.0) * inv));
        up.chain(down)
    })
}

/// The light-selection CDF: the weights of [`light_weights`] (`luminance(emission) * area`,
/// scaled by what an emission map or opacity mask leaves; plain area when they all vanish),
/// summed in f64, each entry rounded to f32, the last set to 1. The GPU backend uploads
/// exactly this array, so both backends pick the same light for the same number.
pub fn light_cdf(scene: &Scene) -> Vec<f32> {
    let weights = light_weights(scene);
    let weights = if weights.iter().sum::<f64>() > 0.0 {
        weights
    } else {
        scene.lights.iter().map(|l| l.area as f64).collect()
    };
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0f64;
    let mut cdf: Vec<f32> = weights
        .iter()
        .map(|w| {
            acc += w;
            if total > 0.0 {
                (acc / total) as f32
            } else {
                0.0
            }
        })
        .collect();
    if let Some(last) = cdf.last_mut() {
        *last = 1.0;
    }
    cdf
}

/// `P(env)`, the probability that next-event estimation samples the environment map: 0
/// without a map or with a black one, 1 when the scene has no area lights, else the share
/// chosen for the render ([`Scene::environment_share`]: `--env-share`, or measured by
/// [`crate::cpu::environment_share::probe`]), 1/2 when none was. The GPU backend uploads this
/// value.
pub fn environment_share(scene: &Scene) -> f32 {
    fixed_environment_share(scene).unwrap_or_else(|| scene.environment_share.unwrap_or(0.5))
}

/// `P(env)` where the scene leaves no choice: 0 without a sampleable map, 1 with one and no
/// area lights; `None` when it has both, and a share must be chosen.
pub fn fixed_environment_share(scene: &Scene) -> Option<f32> {
    let sampleable_map = scene
        .environment_map
        .as_ref()
        .is_some_and(|m| m.is_sampleable());
    match (sampleable_map, scene.lights.is_empty()) {
        (false, _) => Some(0.0),
        (true, true) => Some(1.0),
        (true, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Group, Material, UvMapping};
    use glam::{Vec2, Vec3};

    #[test]
    fn the_centroids_are_n_squared_points_one_per_equal_sub_triangle() {
        for n in [1, 2, 3, 4, 7, 64] {
            let points: Vec<(f32, f32)> = centroids(n).collect();
            assert_eq!(points.len(), (n * n) as usize, "n {n}");
            for &(b1, b2) in &points {
                assert!(b1 > 0.0 && b2 > 0.0 && b1 + b2 < 1.0, "n {n}: ({b1}, {b2})");
            }
            // The mean of the centroids of equal parts is the triangle's centroid.
            let mean = points
                .iter()
                .fold(Vec2::ZERO, |s, &(a, b)| s + Vec2::new(a, b))
                / points.len() as f32;
            assert!(
                (mean - Vec2::splat(1.0 / 3.0)).abs().max_element() < 1e-5,
                "n {n}: {mean}"
            );
            // Every sub-triangle gets exactly one: the integer cell and orientation of each
            // point are distinct.
            let mut cells: Vec<(u32, u32, bool)> = points
                .iter()
                .map(|&(b1, b2)| {
                    let (x, y) = (b1 * n as f32, b2 * n as f32);
                    (x as u32, y as u32, x.fract() + y.fract() > 1.0)
                })
                .collect();
            cells.sort_unstable();
            cells.dedup();
            assert_eq!(cells.len(), (n * n) as usize, "n {n}");
        }
    }

    /// A unit right triangle lamp with UVs equal to its (x, z) corners, emitting `ke`,
    /// with `textures` and the material's maps as given.
    fn lamp(ke: Vec3, textures: Vec<Texture>, emission: Option<u32>, mask: Option<u32>) -> Scene {
        let mut m = Material::diffuse("lamp", Vec3::splat(0.5));
        m.emission = ke;
        m.emission_texture = emission;
        m.opacity_texture = mask;
        let g = Group {
            name: "lamp".into(),
            positions: vec![Vec3::ZERO, Vec3::X, Vec3::Z],
            normals: vec![],
            uvs: vec![Vec2::ZERO, Vec2::X, Vec2::Y],
            indices: vec![[0, 1, 2]],
            face_materials: vec![0],
        };
        let mut scene = Scene::new("lamp", vec![g], vec![m]);
        scene.textures = textures;
        scene
    }

    fn texture(width: u32, texels: Vec<[f32; 3]>) -> Texture {
        Texture {
            path: "t".into(),
            width,
            height: texels.len() as u32 / width,
            texels,
            mapping: UvMapping::IDENTITY,
        }
    }

    #[test]
    fn a_plain_light_weighs_its_luminance_times_its_area_exactly() {
        let scene = lamp(Vec3::new(1.0, 2.0, 3.0), vec![], None, None);
        let l = &scene.lights[0];
        assert_eq!(
            light_weight(&scene, l),
            f64::from(luminance(l.emission)) * f64::from(l.area)
        );
    }

    #[test]
    fn maps_scale_the_weight_by_what_the_triangle_really_emits() {
        let ke = Vec3::new(2.0, 4.0, 1.0);
        let plain = f64::from(luminance(ke)) * 0.5;
        // A constant map of 0.25: a quarter of the power, within the rounding of the sums.
        let quarter = lamp(ke, vec![texture(1, vec![[0.25; 3]])], Some(0), None);
        let w = light_weight(&quarter, &quarter.lights[0]);
        assert!((w / plain - 0.25).abs() < 1e-6, "{w} vs {plain}");
        let mean = mean_emission(&quarter, &quarter.lights[0]);
        assert!(
            (mean - 0.25 * ke.as_dvec3()).abs().max_element() < 1e-6,
            "{mean}"
        );
        // A fine map that is white for u < 1/2 and black beyond: the triangle's part with
        // u < 1/2 is 3/4 of its area, so about 3/4 of the power.
        let half: Vec<[f32; 3]> = (0..64 * 64)
            .map(|i| if i % 64 < 32 { [1.0; 3] } else { [0.0; 3] })
            .collect();
        let split = lamp(ke, vec![texture(64, half)], Some(0), None);
        let w = light_weight(&split, &split.lights[0]);
        assert!((w / plain - 0.75).abs() < 0.02, "{}", w / plain);
        // An opacity mask that is all hole: nothing, exactly.
        let hole = lamp(ke, vec![texture(1, vec![[0.2; 3]])], None, Some(0));
        assert_eq!(light_weight(&hole, &hole.lights[0]), 0.0);
        // Without UVs neither map is read: the plain weight.
        let mut no_uvs = split.clone();
        no_uvs.groups[0].uvs.clear();
        assert_eq!(light_weight(&no_uvs, &no_uvs.lights[0]), plain);
        assert_eq!(mean_emission(&no_uvs, &no_uvs.lights[0]), ke.as_dvec3());
        // A map index outside the table is no map.
        let dangling = lamp(ke, vec![], Some(3), None);
        assert_eq!(light_weight(&dangling, &dangling.lights[0]), plain);
    }

    #[test]
    fn the_subdivision_follows_the_texels_covered() {
        let ke = Vec3::ONE;
        // The triangle covers half of the map: 8 of a 4 x 4 map (the least, 4), 8192 of a
        // 128 x 128 one (91 per side: capped at 64), 512 of a 32 x 32 one (23).
        for (side, n) in [(4, MIN_SUBDIVISION), (32, 23), (128, MAX_SUBDIVISION)] {
            let t = texture(side, vec![[1.0; 3]; (side * side) as usize]);
            let scene = lamp(ke, vec![t], Some(0), None);
            let maps = maps_of(&scene, &scene.lights[0]);
            assert_eq!(
                subdivision(&scene, &scene.lights[0], &maps),
                n,
                "side {side}"
            );
        }
    }
}
