//! A hash of everything that decides the image, compared across ranks before a frame: ranks
//! that loaded different scene files (a stale copy on one node) or got different settings
//! would otherwise make one wrong image without a word.
//!
//! [`crate::fnv`] over the bytes, so the value depends on nothing but the data; the scene's
//! part is its [`content_hash`].

use crate::fnv::Fnv;
use crate::render::RenderSettings;
#[cfg(doc)]
use crate::scene::content_hash::content_hash;
use crate::scene::Scene;
use crate::sched::SchedConfig;

/// The fingerprint of a frame: the scene's geometry, materials and textures (`content`, its
/// [`content_hash`], which the caller computes once), its environment, the render settings,
/// and the schedule's options that shape the tiles and passes (not `--devices`, which may
/// differ from rank to rank), plus the protocol version and the random-number scheme (ranks
/// that draw other numbers would each render unbiased samples, but not one image bit for bit
/// what one process renders).
pub fn fingerprint(
    scene: &Scene,
    content: u64,
    settings: &RenderSettings,
    config: &SchedConfig,
) -> u64 {
    fingerprint_of_scheme(
        crate::render::sampler::SCHEME,
        scene,
        content,
        settings,
        config,
    )
}

/// [`fingerprint`] with the random-number scheme given (tests vary it).
fn fingerprint_of_scheme(
    scheme: &str,
    scene: &Scene,
    content: u64,
    settings: &RenderSettings,
    config: &SchedConfig,
) -> u64 {
    let mut h = Fnv::default();
    h.field(&crate::sched::protocol::PROTOCOL_VERSION.to_le_bytes());
    h.field(scheme.as_bytes());
    h.field(format!("{settings:?}").as_bytes());
    h.field(
        format!(
            "{:?} {:?} {} {:?} {} {:?} {:?}",
            config.strategy,
            config.tiles,
            config.steal,
            config.pass_spp,
            config.costmap_scale.to_bits(),
            config.cost_model,
            config.adaptive_sampling
        )
        .as_bytes(),
    );
    h.field(&content.to_le_bytes());
    h.field(format!("{:?} {}", scene.environment, scene.two_sided_lights).as_bytes());
    // P(env), which each rank measured itself (`--env-share auto`): ranks that disagree would
    // weigh the map's samples differently in one image.
    h.field(
        &crate::scene::light_power::environment_share(scene)
            .to_bits()
            .to_le_bytes(),
    );
    // The map by its content hash, rotation and size (not its file name, nor its texels).
    if let Some(map) = &scene.environment_map {
        h.field(
            format!(
                "{:?}",
                (map.content, map.rotation_deg, map.width, map.height)
            )
            .as_bytes(),
        );
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::sampler::SCHEME;
    use crate::scene::content_hash::content_hash;
    use crate::scene::gen::cornell;
    use crate::scene::Camera;
    use glam::Vec3;

    fn settings(seed: u64) -> RenderSettings {
        let camera = Camera {
            eye: Vec3::new(278.0, 273.0, -800.0),
            look_at: Vec3::new(278.0, 273.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 39.3,
        };
        RenderSettings {
            width: 32,
            height: 16,
            spp: 4,
            max_depth: 5,
            seed,
            camera: camera.frame(32, 16).unwrap(),
        }
    }

    #[test]
    fn ranks_agree_only_on_the_same_frame_and_the_same_random_numbers() {
        let scene = cornell();
        let content = content_hash(&scene);
        let config = SchedConfig::default();
        let print = |scheme: &str, seed: u64, content: u64| {
            fingerprint_of_scheme(scheme, &scene, content, &settings(seed), &config)
        };
        let ours = print(SCHEME, 1, content);
        assert_eq!(ours, fingerprint(&scene, content, &settings(1), &config));
        assert_eq!(
            ours,
            print(SCHEME, 1, content),
            "not a function of its inputs"
        );
        assert_ne!(ours, print(SCHEME, 2, content), "the seed is not in it");
        assert_ne!(
            ours,
            print(SCHEME, 1, content ^ 1),
            "the scene's content is not in it"
        );
        assert_ne!(
            ours,
            print("independent hashes per number", 1, content),
            "ranks drawing other random numbers would share a frame"
        );
    }
}
