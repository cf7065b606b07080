//! A procedural daylight sky as an environment map (`gasworks gen sky`): a blue gradient from
//! the zenith to a pale horizon, a glow around the sun, a small bright sun disk, and a plain
//! ground below the horizon. Not a physical sky model (no Rayleigh or Mie scattering): a map
//! with the features that test an environment-map renderer, a sun that must be importance
//! sampled to render without noise and a smooth sky around it, in any scene and at any size.
//!
//! Directions follow [`EnvironmentMap`]: the sun's azimuth is measured from -Z towards +X,
//! its elevation from the horizon. Each texel is the mean of 4 x 4 directions spread over its
//! patch, so the sun's edge is antialiased and the sun's power is the same at every size.

use glam::Vec3;
use rayon::prelude::*;

use crate::scene::environment_map::lat_long_direction;
use crate::scene::{EnvironmentMap, EnvironmentMapError};

/// The sun's angular radius: 0.75 degrees, three times the real sun's, so that a 1024-wide map
/// (0.35 degrees a texel) resolves it.
pub const SUN_RADIUS_DEG: f32 = 0.75;

/// The sun's radiance: with [`SUN_RADIUS_DEG`] its irradiance, facing it, is about 21.5,
/// some ten times what the sky gives a horizontal surface.
pub const SUN_RADIANCE: Vec3 = Vec3::new(40000.0, 38000.0, 34000.0);

/// Where the sun is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sun {
    pub elevation_deg: f32,
    pub azimuth_deg: f32,
}

impl Sun {
    /// The unit direction towards the sun.
    pub fn direction(&self) -> Vec3 {
        let (e, a) = (
            self.elevation_deg.to_radians(),
            self.azimuth_deg.to_radians(),
        );
        Vec3::new(e.cos() * a.sin(), e.sin(), -e.cos() * a.cos())
    }
}

/// The sky's radiance towards the unit direction `d`.
pub fn sky_radiance(d: Vec3, sun: Vec3) -> Vec3 {
    if d.y < 0.0 {
        return Vec3::new(0.25, 0.22, 0.19);
    }
    let t = 1.0 - d.y;
    let zenith = Vec3::new(0.18, 0.32, 0.75);
    let horizon = Vec3::new(0.75, 0.82, 0.92);
    let cos_sun = d.dot(sun);
    let glow = Vec3::new(1.0, 0.9, 0.7) * 0.4 * cos_sun.max(0.0).powi(8);
    let disk = if cos_sun >= SUN_RADIUS_DEG.to_radians().cos() {
        SUN_RADIANCE
    } else {
        Vec3::ZERO
    };
    zenith.lerp(horizon, t * t) + glow + disk
}

/// The sky as a `width` x `width / 2` map.
pub fn sky(width: u32, sun: Sun) -> Result<EnvironmentMap, EnvironmentMapError> {
    let height = (width / 2).max(1);
    let s = sun.direction();
    const SUB: u32 = 4;
    let texels: Vec<Vec3> = (0..width * height)
        .into_par_iter()
        .map(|k| {
            let (i, j) = (k % width, k / width);
            let mut sum = Vec3::ZERO;
            for sy in 0..SUB {
                for sx in 0..SUB {
                    let u = (i as f32 + (sx as f32 + 0.5) / SUB as f32) / width as f32;
                    let v = (j as f32 + (sy as f32 + 0.5) / SUB as f32) / height as f32;
                    sum += sky_radiance(lat_long_direction(u, v, 0.0), s);
                }
            }
            sum / (SUB * SUB) as f32
        })
        .collect();
    EnvironmentMap::from_texels(
        &format!(
            "sky (sun at elevation {}, azimuth {})",
            sun.elevation_deg, sun.azimuth_deg
        ),
        width,
        height,
        texels,
        0.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sun_is_where_its_angles_say_and_holds_its_power_at_any_size() {
        let sun = Sun {
            elevation_deg: 30.0,
            azimuth_deg: 90.0,
        };
        let d = sun.direction();
        assert!((d - Vec3::new(30f32.to_radians().cos(), 0.5, 0.0)).length() < 1e-6);
        // The sun's irradiance at normal incidence: the sum over texels of radiance above the
        // sky's times solid angle, the same at two sizes, and near the disk's L x solid angle.
        let omega = 2.0 * std::f64::consts::PI * (1.0 - (SUN_RADIUS_DEG as f64).to_radians().cos());
        let expected = SUN_RADIANCE.y as f64 * omega;
        for width in [512u32, 1024] {
            let map = sky(width, sun).unwrap();
            let h = width / 2;
            let mut e = 0.0f64;
            for (k, t) in map.texels().iter().enumerate() {
                let (i, j) = (k as u32 % width, k as u32 / width);
                let u = (i as f32 + 0.5) / width as f32;
                let v = (j as f32 + 0.5) / h as f32;
                let dir = map.direction_of(u, v);
                if dir.dot(d) < 0.999 {
                    continue;
                }
                let t0 = std::f64::consts::PI * j as f64 / h as f64;
                let t1 = std::f64::consts::PI * (j + 1) as f64 / h as f64;
                let solid = 2.0 * std::f64::consts::PI / width as f64 * (t0.cos() - t1.cos());
                e += (t.y - sky_radiance(dir, Vec3::Y * -1.0).y) as f64 * solid;
            }
            // 4 x 4 subsamples per texel: the disk's area is met to a few percent.
            assert!(
                (e / expected - 1.0).abs() < 0.05,
                "width {width}: {e} vs {expected}"
            );
        }
        // Straight down is ground; the map samples the sun most.
        let map = sky(256, sun).unwrap();
        let ground = map.radiance(-Vec3::Y) - Vec3::new(0.25, 0.22, 0.19);
        assert!(ground.abs().max_element() < 1e-6, "{ground}");
        let near_sun = (0..1000)
            .filter_map(|k| map.sample((k as f32 + 0.5) / 1000.0, 0.37))
            .filter(|w| w.dot(d) > 0.99)
            .count();
        assert!(near_sun > 500, "{near_sun} of 1000 samples near the sun");
    }
}
