//! What the camera sees first through each pixel's centre: the material of the first surface
//! hit, or nothing. `gasworks image-stats --mask-scene` masks the light sources and the
//! background with it, so that their edges are not counted as fireflies.

use rayon::prelude::*;

use super::bvh::{RayData, SceneBvh};
use crate::scene::camera::CameraFrame;
use crate::scene::Scene;

/// Per pixel (row-major, `camera.width` x `camera.height`), the material of the first surface
/// the ray through the pixel's centre hits, `None` where it escapes.
pub fn first_hit_materials(
    scene: &Scene,
    bvh: &SceneBvh,
    camera: &CameraFrame,
) -> Vec<Option<u32>> {
    let (w, h) = (camera.width as usize, camera.height as usize);
    let mut out = vec![None; w * h];
    out.par_chunks_mut(w.max(1))
        .enumerate()
        .for_each(|(y, row)| {
            for (x, m) in row.iter_mut().enumerate() {
                let dir = camera.direction(x as f32 + 0.5, y as f32 + 0.5);
                *m = RayData::new(camera.eye, dir)
                    .and_then(|ray| bvh.intersect_ray(scene, &ray, 0.0, f32::INFINITY))
                    .map(|hit| scene.groups[hit.group as usize].face_materials[hit.prim as usize]);
            }
        });
    out
}

/// Pixels whose centre sees a light source (an emissive material, from either side) or the
/// background (nothing): the pixels whose brightness is not the integrator's noise.
pub fn light_or_background(scene: &Scene, bvh: &SceneBvh, camera: &CameraFrame) -> Vec<bool> {
    first_hit_materials(scene, bvh, camera)
        .into_iter()
        .map(|m| m.is_none_or(|m| scene.materials[m as usize].is_emissive()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cornell_box_camera_sees_the_light_the_walls_and_a_little_background() {
        let scene = crate::scene::gen::cornell();
        let bvh = SceneBvh::build(&scene);
        let camera = crate::scene::gen::cornell_camera().frame(64, 64).unwrap();
        let mask = light_or_background(&scene, &bvh, &camera);
        let hits = first_hit_materials(&scene, &bvh, &camera);
        let light = scene
            .materials
            .iter()
            .position(|m| m.is_emissive())
            .unwrap() as u32;
        let lights = hits.iter().filter(|&&m| m == Some(light)).count();
        let background = hits.iter().filter(|m| m.is_none()).count();
        // The light is 130 x 105 mm seen from about 1.1 m, nearly edge-on, at a 39.3 degree
        // field of view: a few pixels of the 64 x 64; the box fills almost the whole frame.
        assert!(lights > 0 && lights < 40, "{lights}");
        assert!(background < 64 * 64 / 10, "{background}");
        assert_eq!(mask.iter().filter(|&&b| b).count(), lights + background);
        // The centre pixel sees the back wall.
        assert!(!mask[32 * 64 + 32]);
    }
}
