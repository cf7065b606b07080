//! The cost map's rasterizer agrees with brute-force ray casting at pixel centres.

mod sched_support;

use gasworks::scene::{Camera, Group, Material, Scene};
use gasworks::sched::raster::rasterize;
use gasworks::splitmix::mix64;
use glam::Vec3;

/// Möller-Trumbore: the ray parameter of the hit and the smallest barycentric coordinate.
fn intersect(o: Vec3, d: Vec3, tri: [Vec3; 3]) -> Option<(f32, f32)> {
    let (e1, e2) = (tri[1] - tri[0], tri[2] - tri[0]);
    let p = d.cross(e2);
    let det = e1.dot(p);
    if det.abs() < 1e-12 {
        return None;
    }
    let inv = 1.0 / det;
    let s = o - tri[0];
    let u = s.dot(p) * inv;
    let q = s.cross(e1);
    let v = d.dot(q) * inv;
    let t = e2.dot(q) * inv;
    let w = 1.0 - u - v;
    (u >= 0.0 && v >= 0.0 && w >= 0.0 && t > 0.0).then_some((t, u.min(v).min(w)))
}

fn unit(h: u64) -> f32 {
    (h >> 40) as f32 / (1u64 << 24) as f32
}

/// Random triangles in front of and around the camera, plus a floor that reaches behind it
/// (so near-plane clipping is exercised), each triangle its own material index 0.
fn scene() -> Scene {
    let mut groups = Vec::new();
    let mut positions = Vec::new();
    let mut indices = Vec::new();
    for i in 0..40u64 {
        let c = Vec3::new(
            unit(mix64(i * 7 + 1)) * 6.0 - 3.0,
            unit(mix64(i * 7 + 2)) * 4.0 - 2.0,
            -1.0 - unit(mix64(i * 7 + 3)) * 8.0,
        );
        let base = positions.len() as u32;
        for k in 0..3u64 {
            let off = Vec3::new(
                unit(mix64(i * 31 + k * 3 + 100)) - 0.5,
                unit(mix64(i * 31 + k * 3 + 101)) - 0.5,
                unit(mix64(i * 31 + k * 3 + 102)) - 0.5,
            ) * 2.0;
            positions.push(c + off);
        }
        indices.push([base, base + 1, base + 2]);
    }
    let n = indices.len();
    groups.push(Group {
        name: "debris".into(),
        positions,
        normals: vec![],
        uvs: vec![],
        indices,
        face_materials: vec![0; n],
    });
    groups.push(sched_support::quad(
        "floor",
        [
            Vec3::new(-20.0, -2.0, 20.0),
            Vec3::new(20.0, -2.0, 20.0),
            Vec3::new(20.0, -2.0, -20.0),
            Vec3::new(-20.0, -2.0, -20.0),
        ],
        0,
    ));
    Scene::new("raster", groups, vec![Material::default_diffuse()])
}

#[test]
fn raster_depth_matches_ray_casting_at_pixel_centres() {
    let scene = scene();
    let frame = Camera {
        eye: Vec3::new(0.3, 0.2, 1.0),
        look_at: Vec3::new(0.0, -0.5, -5.0),
        up: Vec3::Y,
        fov_y_deg: 70.0,
    }
    .frame(200, 150)
    .unwrap();
    // Raster at half resolution: the G-buffer's own frame gives its pixel centres' rays.
    let (g, stats) = rasterize(&scene, &frame, 100, 75);
    assert_eq!(stats.triangles, 42);
    let (mut compared, mut near_edge_mismatch) = (0, 0);
    for y in 0..g.height {
        for x in 0..g.width {
            let d = g.frame.direction(x as f32 + 0.5, y as f32 + 0.5);
            let mut best: Option<(f32, f32, usize)> = None;
            for (gi, grp) in scene.groups.iter().enumerate() {
                for prim in 0..grp.triangle_count() {
                    if let Some((t, edge)) = intersect(g.frame.eye, d, grp.triangle(prim)) {
                        if best.is_none_or(|b| t < b.0) {
                            best = Some((t, edge, gi));
                        }
                    }
                }
            }
            let i = y * g.width + x;
            match best {
                Some((t, edge, gi)) => {
                    let depth = t * d.dot(g.frame.w);
                    if !g.is_hit(i) || (g.depth[i] - depth).abs() > 1e-3 * depth {
                        // Only a pixel centre on (or within rounding of) an edge may differ.
                        assert!(
                            edge < 1e-3,
                            "pixel ({x},{y}): ray depth {depth} group {gi}, raster {} group {}",
                            g.depth[i],
                            g.group[i]
                        );
                        near_edge_mismatch += 1;
                    } else {
                        compared += 1;
                    }
                }
                None => {
                    if g.is_hit(i) {
                        near_edge_mismatch += 1;
                    }
                }
            }
        }
    }
    eprintln!("{compared} pixels compared, {near_edge_mismatch} edge pixels differ");
    assert!(compared > 4000, "{compared}");
    assert!(
        near_edge_mismatch <= 5,
        "{near_edge_mismatch} pixels disagree"
    );
}
