//! The Cornell box with the dimensions published by the Cornell University Program of
//! Computer Graphics ("Cornell Box Data"): millimetres, y up, the open side at z = 0 facing the
//! published camera at z = -800.
//!
//! Departures from the published data, both customary: RGB reflectances instead of the
//! measured spectra (white, red, green as commonly used), an RGB light of radiance
//! (17, 12, 4), and the light quad lowered 0.5 mm below the ceiling (the data puts both at
//! y = 548.8, which would make the two surfaces coincide).

use glam::Vec3;

use super::mesh::{MeshBuilder, Placement};
use crate::scene::{Camera, Group, Material, Scene};

/// Height of the light: just below the ceiling at y = 548.8.
pub const CORNELL_LIGHT_Y: f32 = 548.3;

/// The published camera: eye (278, 273, -800) looking along +Z, focal length 35 mm on a
/// 25 mm film, which is a vertical field of view of 2 atan(12.5 / 35) = 39.3 degrees.
pub fn cornell_camera() -> Camera {
    Camera {
        eye: Vec3::new(278.0, 273.0, -800.0),
        look_at: Vec3::new(278.0, 273.0, 0.0),
        up: Vec3::Y,
        fov_y_deg: 39.3,
    }
}

const WHITE: u32 = 0;
const RED: u32 = 1;
const GREEN: u32 = 2;
const LIGHT: u32 = 3;

fn materials() -> Vec<Material> {
    let mut light = Material::diffuse("light", Vec3::splat(0.78));
    light.emission = Vec3::new(17.0, 12.0, 4.0);
    vec![
        Material::diffuse("white", Vec3::new(0.725, 0.71, 0.68)),
        Material::diffuse("red", Vec3::new(0.63, 0.065, 0.05)),
        Material::diffuse("green", Vec3::new(0.14, 0.45, 0.091)),
        light,
    ]
}

const fn v(x: f32, y: f32, z: f32) -> Vec3 {
    Vec3::new(x, y, z)
}

/// A group of quads, each wound so that its normal points toward `facing(centroid)`.
fn quads(name: &str, material: u32, quads: &[[Vec3; 4]], facing: impl Fn(Vec3) -> Vec3) -> Group {
    let mut group = Group {
        name: name.to_string(),
        ..Group::default()
    };
    let mut b = MeshBuilder::flat(&mut group, Placement::at(Vec3::ZERO), material);
    for q in quads {
        let centroid = (q[0] + q[1] + q[2] + q[3]) * 0.25;
        let normal = (q[1] - q[0]).cross(q[2] - q[0]);
        let q = if normal.dot(facing(centroid)) >= 0.0 {
            *q
        } else {
            [q[3], q[2], q[1], q[0]]
        };
        let [a, bb, c, d] = q.map(|p| b.vertex(p, Vec3::ZERO));
        b.quad(a, bb, c, d);
    }
    group
}

/// The classic Cornell box: eight groups (floor, ceiling, back, left and right walls, the
/// short and tall blocks, the light), 32 triangles. Room surfaces face the inside of the box,
/// block faces face outward, the light faces down.
pub fn cornell() -> Scene {
    let inside = Vec3::new(278.0, 274.4, 279.6);
    let toward_inside = move |c: Vec3| inside - c;
    let short_centre = Vec3::new(186.0, 82.5, 168.5);
    let tall_centre = Vec3::new(368.5, 165.0, 351.25);
    let groups = vec![
        quads("floor", WHITE, &[FLOOR], toward_inside),
        quads("ceiling", WHITE, &[CEILING], toward_inside),
        quads("back_wall", WHITE, &[BACK_WALL], toward_inside),
        quads("left_wall", RED, &[LEFT_WALL], toward_inside),
        quads("right_wall", GREEN, &[RIGHT_WALL], toward_inside),
        quads("short_block", WHITE, &SHORT_BLOCK, move |c| {
            c - short_centre
        }),
        quads("tall_block", WHITE, &TALL_BLOCK, move |c| c - tall_centre),
        quads("light", LIGHT, &[LIGHT_QUAD], |_| Vec3::NEG_Y),
    ];
    Scene::new("gasworks gen cornell", groups, materials())
}

// The published corners, in millimetres; `quads` winds each quad to face the right way.

const FLOOR: [Vec3; 4] = [
    v(552.8, 0.0, 0.0),
    v(0.0, 0.0, 0.0),
    v(0.0, 0.0, 559.2),
    v(549.6, 0.0, 559.2),
];

const CEILING: [Vec3; 4] = [
    v(556.0, 548.8, 0.0),
    v(556.0, 548.8, 559.2),
    v(0.0, 548.8, 559.2),
    v(0.0, 548.8, 0.0),
];

const BACK_WALL: [Vec3; 4] = [
    v(549.6, 0.0, 559.2),
    v(0.0, 0.0, 559.2),
    v(0.0, 548.8, 559.2),
    v(556.0, 548.8, 559.2),
];

const LEFT_WALL: [Vec3; 4] = [
    v(552.8, 0.0, 0.0),
    v(549.6, 0.0, 559.2),
    v(556.0, 548.8, 559.2),
    v(556.0, 548.8, 0.0),
];

const RIGHT_WALL: [Vec3; 4] = [
    v(0.0, 0.0, 559.2),
    v(0.0, 0.0, 0.0),
    v(0.0, 548.8, 0.0),
    v(0.0, 548.8, 559.2),
];

const SHORT_BLOCK: [[Vec3; 4]; 5] = [
    [
        v(130.0, 165.0, 65.0),
        v(82.0, 165.0, 225.0),
        v(240.0, 165.0, 272.0),
        v(290.0, 165.0, 114.0),
    ],
    [
        v(290.0, 0.0, 114.0),
        v(290.0, 165.0, 114.0),
        v(240.0, 165.0, 272.0),
        v(240.0, 0.0, 272.0),
    ],
    [
        v(130.0, 0.0, 65.0),
        v(130.0, 165.0, 65.0),
        v(290.0, 165.0, 114.0),
        v(290.0, 0.0, 114.0),
    ],
    [
        v(82.0, 0.0, 225.0),
        v(82.0, 165.0, 225.0),
        v(130.0, 165.0, 65.0),
        v(130.0, 0.0, 65.0),
    ],
    [
        v(240.0, 0.0, 272.0),
        v(240.0, 165.0, 272.0),
        v(82.0, 165.0, 225.0),
        v(82.0, 0.0, 225.0),
    ],
];

const TALL_BLOCK: [[Vec3; 4]; 5] = [
    [
        v(423.0, 330.0, 247.0),
        v(265.0, 330.0, 296.0),
        v(314.0, 330.0, 456.0),
        v(472.0, 330.0, 406.0),
    ],
    [
        v(423.0, 0.0, 247.0),
        v(423.0, 330.0, 247.0),
        v(472.0, 330.0, 406.0),
        v(472.0, 0.0, 406.0),
    ],
    [
        v(472.0, 0.0, 406.0),
        v(472.0, 330.0, 406.0),
        v(314.0, 330.0, 456.0),
        v(314.0, 0.0, 456.0),
    ],
    [
        v(314.0, 0.0, 456.0),
        v(314.0, 330.0, 456.0),
        v(265.0, 330.0, 296.0),
        v(265.0, 0.0, 296.0),
    ],
    [
        v(265.0, 0.0, 296.0),
        v(265.0, 330.0, 296.0),
        v(423.0, 330.0, 247.0),
        v(423.0, 0.0, 247.0),
    ],
];

const LIGHT_QUAD: [Vec3; 4] = [
    v(343.0, CORNELL_LIGHT_Y, 227.0),
    v(343.0, CORNELL_LIGHT_Y, 332.0),
    v(213.0, CORNELL_LIGHT_Y, 332.0),
    v(213.0, CORNELL_LIGHT_Y, 227.0),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::MaterialKind;

    fn group<'a>(s: &'a Scene, name: &str) -> &'a Group {
        s.groups.iter().find(|g| g.name == name).unwrap()
    }

    fn normal(g: &Group, prim: usize) -> Vec3 {
        let [a, b, c] = g.triangle(prim);
        (b - a).cross(c - a).normalize()
    }

    #[test]
    fn published_layout() {
        let s = cornell();
        let names: Vec<&str> = s.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "floor",
                "ceiling",
                "back_wall",
                "left_wall",
                "right_wall",
                "short_block",
                "tall_block",
                "light"
            ]
        );
        assert_eq!(s.triangle_count(), 32);
        assert_eq!(s.report.degenerate_dropped, 0);
        let b = s.bounds();
        assert_eq!(b.min, [0.0, 0.0, 0.0]);
        assert_eq!(b.max, [556.0, 548.8, 559.2]);
        // The light: 130 x 105 mm, so 13650 mm^2 over its two triangles.
        let area: f32 = s.lights.iter().map(|l| l.area).sum();
        assert!((area - 13650.0).abs() < 0.5, "{area}");
        assert_eq!(s.lights[0].emission, Vec3::new(17.0, 12.0, 4.0));
        assert!(s.environment.is_none());
        assert!(s.materials.iter().all(|m| m.kind == MaterialKind::Diffuse));
        let red = &s.materials[group(&s, "left_wall").face_materials[0] as usize];
        assert_eq!(red.name, "red");
    }

    #[test]
    fn surfaces_face_the_right_way() {
        let s = cornell();
        assert!(normal(group(&s, "floor"), 0).y > 0.99);
        assert!(normal(group(&s, "ceiling"), 0).y < -0.99);
        assert!(normal(group(&s, "light"), 1).y < -0.99);
        assert!(normal(group(&s, "back_wall"), 0).z < -0.99);
        assert!(normal(group(&s, "left_wall"), 0).x < -0.99);
        assert!(normal(group(&s, "right_wall"), 0).x > 0.99);
        // The tops of the blocks face up.
        assert!(normal(group(&s, "short_block"), 0).y > 0.99);
        assert!(normal(group(&s, "tall_block"), 0).y > 0.99);
    }

    #[test]
    fn published_camera_field_of_view() {
        let c = cornell_camera();
        let fov = 2.0 * (12.5f32 / 35.0).atan().to_degrees();
        assert!((c.fov_y_deg - fov).abs() < 0.05);
    }
}
