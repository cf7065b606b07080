//! The CPU BVH against brute force: closest hits must agree exactly (group, prim, and the bits
//! of t, u, v), and so must shadow-ray occlusion, on the Stanford bunny and on a synthetic
//! scene whose group sizes follow a heavy tail like Crytek Sponza's.

mod cpu_common;

use cpu_common::{sphere, Rng};
use gasworks::cpu::bvh::{brute_force_intersect, brute_force_occluded, SceneBvh};
use gasworks::scene::{Group, Material, Scene};
use glam::Vec3;

/// A test-only reader of the `v` and `f` lines of an OBJ (the bunny has nothing else), so
/// that this test does not depend on the loader. Faces with more than three corners are fanned.
fn read_obj_v_f(text: &str) -> Group {
    let mut g = Group {
        name: "bunny".into(),
        ..Default::default()
    };
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("v") => {
                let c: Vec<f32> = it.take(3).map(|x| x.parse().unwrap()).collect();
                g.positions.push(Vec3::new(c[0], c[1], c[2]));
            }
            Some("f") => {
                let idx: Vec<u32> = it
                    .map(|x| x.split('/').next().unwrap().parse::<u32>().unwrap() - 1)
                    .collect();
                for k in 1..idx.len() - 1 {
                    g.indices.push([idx[0], idx[k], idx[k + 1]]);
                    g.face_materials.push(0);
                }
            }
            _ => {}
        }
    }
    g
}

fn bunny() -> Scene {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bunny.obj"))
            .expect("tests/data/bunny.obj");
    let g = read_obj_v_f(&text);
    assert_eq!(g.triangle_count(), 3674, "the bunny's face count");
    Scene::new("bunny", vec![g], vec![Material::default_diffuse()])
}

/// A heavy-tailed scene: many 2-triangle quads (half of them axis-aligned, like walls), many
/// small triangle soups, a few large spheres; groups overlap, and a few are exact copies of
/// others (so hits tie).
fn heavy_tailed_scene(rng: &mut Rng) -> Scene {
    let mut groups = Vec::new();
    let extent = Vec3::splat(10.0);
    for i in 0..150 {
        let c = rng.point_in(-extent, extent);
        let s = rng.range(0.2, 3.0);
        let (a, b) = if i % 2 == 0 {
            // Axis-aligned quad in a random axis plane.
            let axes = [Vec3::X, Vec3::Y, Vec3::Z];
            let k = i / 2 % 3;
            (axes[(k + 1) % 3] * s, axes[(k + 2) % 3] * s)
        } else {
            (rng.unit() * s, rng.unit() * s)
        };
        let mut g = Group {
            name: format!("quad{i}"),
            positions: vec![c, c + a, c + a + b, c + b],
            indices: vec![[0, 1, 2], [0, 2, 3]],
            face_materials: vec![0, 0],
            ..Default::default()
        };
        g.normals.clear();
        groups.push(g);
    }
    for i in 0..60 {
        let n = 3 + (rng.f() * 60.0) as usize;
        let c = rng.point_in(-extent, extent);
        let mut g = Group {
            name: format!("soup{i}"),
            ..Default::default()
        };
        for _ in 0..n {
            let p = c + rng.unit() * rng.range(0.0, 2.0);
            let base = g.positions.len() as u32;
            g.positions
                .extend([p, p + rng.unit() * 0.5, p + rng.unit() * 0.5]);
            g.indices.push([base, base + 1, base + 2]);
            g.face_materials.push(0);
        }
        groups.push(g);
    }
    for (i, (rings, segs)) in [(40, 80), (24, 48), (60, 100), (12, 24)].iter().enumerate() {
        let c = rng.point_in(-extent * 0.5, extent * 0.5);
        let r = rng.range(1.0, 4.0);
        groups.push(sphere(&format!("sphere{i}"), c, r, *rings, *segs, 0, false));
    }
    // Exact duplicates of earlier groups (coincident surfaces): every hit on them is a tie in
    // t, which the total order (group, then prim) must settle the same way as brute force.
    let dup_sphere = Group {
        name: "sphere3-copy".into(),
        ..groups[groups.len() - 1].clone()
    };
    groups.push(dup_sphere);
    for i in [3, 4, 5] {
        let mut g = groups[i].clone();
        g.name.push_str("-copy");
        // The same triangles twice in one group as well.
        g.indices.extend(g.indices.clone());
        g.face_materials.extend(g.face_materials.clone());
        groups.insert(0, g);
    }
    Scene::new("heavy-tailed", groups, vec![Material::default_diffuse()])
}

/// Fires `n` rays from origins inside the scene bounds, outside them (up to three bound sizes
/// away, aimed at random points inside or exactly at vertices, where triangles meet), and on
/// triangles (like the path tracer's secondary rays), a tenth of them along exact axis
/// directions, and checks both queries.
fn check_agreement(scene: &Scene, n: usize, seed: u64) {
    let bvh = SceneBvh::build(scene);
    let b = scene.bounds();
    let (lo, hi) = (b.min_v(), b.max_v());
    let size = hi - lo;
    let mut rng = Rng::new(seed);
    let mut hits = 0;
    let mut occluded = 0;
    let axes = [Vec3::X, Vec3::Y, Vec3::Z, -Vec3::X, -Vec3::Y, -Vec3::Z];
    for i in 0..n {
        let (origin, mut dir) = match i % 3 {
            0 => (rng.point_in(lo, hi), rng.unit()),
            1 => {
                let o = rng.point_in(lo - size * 3.0, hi + size * 3.0);
                let target = if i % 2 == 0 {
                    rng.point_in(lo, hi)
                } else {
                    let g = &scene.groups[(rng.f() * scene.groups.len() as f32) as usize];
                    g.positions[(rng.f() * g.positions.len() as f32) as usize]
                };
                (o, (target - o).normalize())
            }
            _ => {
                let g = &scene.groups[(rng.f() * scene.groups.len() as f32) as usize];
                let tri = g.triangle((rng.f() * g.triangle_count() as f32) as usize);
                let (u, v) = (rng.f(), rng.f());
                let (u, v) = if u + v > 1.0 {
                    (1.0 - u, 1.0 - v)
                } else {
                    (u, v)
                };
                let p = tri[0] * (1.0 - u - v) + tri[1] * u + tri[2] * v;
                (p, rng.unit())
            }
        };
        if i % 10 == 0 {
            dir = axes[i / 10 % 6];
        }
        let tmin = if i % 3 == 2 {
            1e-4 * size.max_element()
        } else {
            0.0
        };
        let expect = brute_force_intersect(scene, origin, dir, tmin, f32::INFINITY);
        let got = bvh.intersect(scene, origin, dir, tmin, f32::INFINITY);
        match (got, expect) {
            (Some(g), Some(e)) => {
                assert_eq!(
                    (g.group, g.prim, g.t.to_bits(), g.u.to_bits(), g.v.to_bits()),
                    (e.group, e.prim, e.t.to_bits(), e.u.to_bits(), e.v.to_bits()),
                    "ray {i}: origin {origin} dir {dir}"
                );
                hits += 1;
            }
            (None, None) => {}
            _ => panic!("ray {i}: origin {origin} dir {dir}: bvh {got:?} brute force {expect:?}"),
        }
        // Shadow rays towards a random length, half of them ending right at the closest hit.
        let tmax = match (expect, i % 2) {
            (Some(e), 0) => e.t,
            _ => rng.range(0.0, 2.0) * size.max_element(),
        };
        let o_bvh = bvh.occluded(scene, origin, dir, tmin, tmax);
        let o_bf = brute_force_occluded(scene, origin, dir, tmin, tmax);
        assert_eq!(
            o_bvh, o_bf,
            "shadow ray {i}: origin {origin} dir {dir} tmax {tmax}"
        );
        occluded += o_bf as usize;
    }
    // The test means something only if plenty of rays hit and plenty miss.
    assert!(hits > n / 5 && hits < n * 19 / 20, "{hits} hits of {n}");
    assert!(
        occluded > n / 20 && occluded < n * 9 / 10,
        "{occluded} occluded of {n}"
    );
}

#[test]
fn bunny_closest_hits_and_occlusion_match_brute_force() {
    check_agreement(&bunny(), 4000, 1);
}

#[test]
fn heavy_tailed_groups_match_brute_force() {
    let mut rng = Rng::new(2);
    let scene = heavy_tailed_scene(&mut rng);
    let sizes: Vec<usize> = scene.groups.iter().map(|g| g.triangle_count()).collect();
    assert!(sizes.iter().filter(|&&s| s == 2).count() >= 100);
    assert!(sizes.iter().any(|&s| s >= 10_000));
    check_agreement(&scene, 2500, 3);
}

#[test]
fn build_stats_count_the_scene() {
    let scene = bunny();
    let (_, stats) = SceneBvh::build_with_stats(&scene);
    assert_eq!((stats.triangles, stats.groups), (3674, 1));
    assert!(stats.seconds >= 0.0);
}
