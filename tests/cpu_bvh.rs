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
    let size = scene.bounds().diagonal();
    let mut rng = Rng::new(seed);
    let mut hits = 0;
    let mut occluded = 0;
    for i in 0..n {
        let (origin, dir, tmin) = test_ray(scene, &mut rng, i);
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

/// Ray `i` of [`check_agreement`]'s mix: (origin, unit direction, tmin).
fn test_ray(scene: &Scene, rng: &mut Rng, i: usize) -> (Vec3, Vec3, f32) {
    let b = scene.bounds();
    let (lo, hi) = (b.min_v(), b.max_v());
    let size = hi - lo;
    let axes = [Vec3::X, Vec3::Y, Vec3::Z, -Vec3::X, -Vec3::Y, -Vec3::Z];
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
    (origin, dir, tmin)
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
    // Measured, not left at its default: a build does work, so its wall time is positive.
    // (A presence check, not a speed claim.)
    assert!(
        stats.seconds > 0.0 && stats.seconds.is_finite(),
        "{}",
        stats.seconds
    );
    let mut rng = Rng::new(2);
    let many = heavy_tailed_scene(&mut rng);
    let (_, stats) = SceneBvh::build_with_stats(&many);
    assert_eq!(
        (stats.triangles, stats.groups),
        (many.triangle_count(), many.groups.len())
    );
}

/// Closest hit and occlusion of one ray, BVH against brute force, bit for bit.
fn check_ray(bvh: &SceneBvh, scene: &Scene, origin: Vec3, dir: Vec3, tmin: f32) -> bool {
    let expect = brute_force_intersect(scene, origin, dir, tmin, f32::INFINITY);
    let got = bvh.intersect(scene, origin, dir, tmin, f32::INFINITY);
    let bits = |h: Option<gasworks::cpu::Hit>| {
        h.map(|h| (h.group, h.prim, h.t.to_bits(), h.u.to_bits(), h.v.to_bits()))
    };
    assert_eq!(
        bits(got),
        bits(expect),
        "origin {origin} dir {dir} tmin {tmin}"
    );
    for tmax in [1.0, 7.5, f32::INFINITY] {
        assert_eq!(
            bvh.occluded(scene, origin, dir, tmin, tmax),
            brute_force_occluded(scene, origin, dir, tmin, tmax),
            "shadow: origin {origin} dir {dir} tmin {tmin} tmax {tmax}"
        );
    }
    expect.is_some()
}

/// Many small groups of 1 to 11 triangles (every packet fill, leaves of one and two packets,
/// groups of more than one leaf) on an integer lattice, so that rays aimed along the axes and
/// diagonals from lattice points pass exactly through vertices and along shared edges (edge
/// functions that round to exactly zero, which the packet test hands to the scalar test),
/// start exactly on box faces and inside boxes; slivers of almost zero area; and copies of
/// groups (ties in t, settled by group then prim).
#[test]
fn lattice_groups_edges_vertices_and_ties_match_brute_force() {
    let mut rng = Rng::new(5);
    let mut groups = Vec::new();
    for i in 0..700u32 {
        let n = 1 + i % 11;
        let base = Vec3::new((i % 10) as f32, (i / 10 % 7) as f32, (i / 70) as f32) * 2.0;
        let mut g = Group {
            name: format!("g{i}"),
            ..Default::default()
        };
        for k in 0..n {
            let o = base + Vec3::new((k % 2) as f32, (k / 2 % 2) as f32, (k / 4) as f32);
            let (a, b) = match k % 3 {
                0 => (Vec3::X, Vec3::Y),
                1 => (Vec3::Y, Vec3::Z),
                _ => (Vec3::Z, Vec3::X),
            };
            let p = g.positions.len() as u32;
            if i % 13 == 0 && k == 0 {
                // A sliver: far from zero area in float terms is not needed, only non-zero.
                g.positions.extend([o, o + a, o + a * 0.5 + b * 1e-5]);
            } else {
                g.positions.extend([o, o + a, o + b]);
            }
            g.indices.push([p, p + 1, p + 2]);
            g.face_materials.push(0);
        }
        groups.push(g);
    }
    for i in [3usize, 40, 41, 699] {
        let mut g = groups[i].clone();
        g.name.push_str("-copy");
        groups.push(g);
    }
    let scene = Scene::new("lattice", groups, vec![Material::default_diffuse()]);
    assert_eq!(scene.report.degenerate_dropped, 0);
    let bvh = SceneBvh::build(&scene);
    let dirs = [
        Vec3::X,
        Vec3::Y,
        Vec3::Z,
        -Vec3::X,
        -Vec3::Y,
        -Vec3::Z,
        Vec3::new(1.0, 1.0, 0.0).normalize(),
        Vec3::new(0.0, -1.0, 1.0).normalize(),
        Vec3::new(1.0, 1.0, 1.0).normalize(),
        Vec3::new(-1.0, 0.5, 0.25).normalize(),
    ];
    let mut hits = 0;
    let mut n = 0;
    for x in -1..21 {
        for y in -1..15 {
            for z in [-1, 0, 1, 2, 3, 5, 8, 9, 10, 11] {
                let origin = Vec3::new(x as f32, y as f32, z as f32) * 0.5;
                for (k, &dir) in dirs.iter().enumerate() {
                    if (x + y + z + k as i32) % 3 != 0 {
                        continue;
                    }
                    let tmin = if k % 2 == 0 { 0.0 } else { 1e-4 };
                    hits += check_ray(&bvh, &scene, origin, dir, tmin) as usize;
                    n += 1;
                }
            }
        }
    }
    // Random rays too, from inside and outside the lattice.
    for _ in 0..1500 {
        let origin = rng.point_in(Vec3::splat(-2.0), Vec3::new(22.0, 16.0, 12.0));
        hits += check_ray(&bvh, &scene, origin, rng.unit(), 0.0) as usize;
        n += 1;
    }
    assert!(hits > n / 5 && hits < n * 19 / 20, "{hits} hits of {n}");
}

/// A ray starting inside every box of a nest of boxes (concentric shells of groups), and
/// scenes of one triangle and of one small group (the root is then a leaf).
#[test]
fn nested_shells_and_single_leaf_roots_match_brute_force() {
    let mut groups = Vec::new();
    for (i, r) in [1.0f32, 2.0, 3.0, 5.0, 8.0, 13.0].iter().enumerate() {
        groups.push(sphere(
            &format!("shell{i}"),
            Vec3::ZERO,
            *r,
            8 + i as u32,
            16,
            0,
            false,
        ));
    }
    let shells = Scene::new("shells", groups, vec![Material::default_diffuse()]);
    let bvh = SceneBvh::build(&shells);
    let mut rng = Rng::new(9);
    for _ in 0..2000 {
        let origin = rng.point_in(Vec3::splat(-0.5), Vec3::splat(0.5));
        assert!(check_ray(&bvh, &shells, origin, rng.unit(), 0.0));
    }
    for tris in [1usize, 3, 5, 8] {
        let g = Group {
            name: "small".into(),
            positions: (0..tris * 3)
                .map(|k| {
                    Vec3::new(
                        (k / 3) as f32,
                        (k % 3 == 1) as u32 as f32,
                        (k % 3 == 2) as u32 as f32,
                    )
                })
                .collect(),
            indices: (0..tris as u32)
                .map(|t| [3 * t, 3 * t + 1, 3 * t + 2])
                .collect(),
            face_materials: vec![0; tris],
            ..Default::default()
        };
        let s = Scene::new("small", vec![g], vec![Material::default_diffuse()]);
        let bvh = SceneBvh::build(&s);
        // obvhs decides the leaves; a leaf of n triangles takes ceil(n / 4) packets.
        let packets = bvh.size().1;
        assert!(
            packets >= tris.div_ceil(4) && packets <= tris,
            "{packets} packets of {tris} triangles"
        );
        for t in 0..tris {
            let o = Vec3::new(t as f32 - 1.0, 0.2, 0.3);
            assert!(check_ray(&bvh, &s, o, Vec3::X, 0.0));
            assert!(
                check_ray(&bvh, &s, Vec3::new(t as f32, 0.25, 0.25), Vec3::X, 0.0)
                    == (t + 1 < tris)
            );
        }
    }
}

/// A cut-out mask: an 8x8 checker of 0 and 1, with a ramp through 0.5 along its first row (so
/// that lookups land on both sides of the cutoff and exactly on it).
fn checker_mask() -> gasworks::scene::Texture {
    let mut texels = Vec::new();
    for y in 0..8 {
        for x in 0..8 {
            let value = if y == 0 {
                x as f32 / 7.0 * 0.25 + 0.375
            } else if (x + y) % 2 == 0 {
                1.0
            } else {
                0.0
            };
            texels.push([value; 3]);
        }
    }
    gasworks::scene::Texture {
        path: "checker-mask".into(),
        width: 8,
        height: 8,
        texels,
        mapping: gasworks::scene::UvMapping {
            scale: glam::Vec2::new(3.0, 2.0),
            offset: glam::Vec2::new(0.1, -0.2),
        },
    }
}

/// The heavy-tailed scene with random UVs on every group and, on every other group, the odd
/// triangles in a cut-out material (the checker mask): the scene to check the cut-out test on.
fn heavy_tailed_with_cutouts(seed: u64) -> (Scene, Scene) {
    let mut rng = Rng::new(seed);
    let solid = heavy_tailed_scene(&mut rng);
    let mut groups = solid.groups.clone();
    for (gi, g) in groups.iter_mut().enumerate() {
        g.uvs = (0..g.positions.len())
            .map(|_| glam::Vec2::new(rng.range(-1.0, 2.0), rng.range(-1.0, 2.0)))
            .collect();
        if gi % 2 == 0 {
            for (t, m) in g.face_materials.iter_mut().enumerate() {
                *m = (t % 2) as u32;
            }
        }
    }
    let leaf = Material {
        opacity_texture: Some(0),
        ..Material::diffuse("leaf", Vec3::new(0.2, 0.6, 0.2))
    };
    let uncut = Scene::new(
        "heavy-tailed with UVs",
        groups.clone(),
        vec![
            Material::default_diffuse(),
            Material::diffuse("leaf", Vec3::new(0.2, 0.6, 0.2)),
        ],
    );
    let mut cut = Scene::new(
        "heavy-tailed with cut-outs",
        groups,
        vec![Material::default_diffuse(), leaf],
    );
    cut.textures.push(checker_mask());
    cut.validate().unwrap();
    (cut, uncut)
}

/// With cut-outs, the BVH still agrees with brute force bit for bit (both skip the hits in
/// the mask's holes), and the holes change what many rays hit: the test is not vacuous.
#[test]
fn cut_outs_match_brute_force_and_let_rays_through() {
    let (cut, uncut) = heavy_tailed_with_cutouts(5);
    assert_eq!(
        cut.cutout_groups().iter().filter(|&&c| c).count(),
        cut.groups.len().div_ceil(2)
    );
    check_agreement(&cut, 2500, 6);
    // The same rays with and without the masks: a good share must see different surfaces.
    let b = cut.bounds();
    let mut rng = Rng::new(7);
    let (mut differ, mut holes_seen, n) = (0, 0, 2000);
    for _ in 0..n {
        let origin = rng.point_in(b.min_v(), b.max_v());
        let dir = rng.unit();
        let with = brute_force_intersect(&cut, origin, dir, 0.0, f32::INFINITY);
        let without = brute_force_intersect(&uncut, origin, dir, 0.0, f32::INFINITY);
        if let Some(h) = without {
            holes_seen += cut.is_cut_out(h.group, h.prim, h.u, h.v) as usize;
        }
        differ += (with.map(|h| (h.group, h.prim)) != without.map(|h| (h.group, h.prim))) as usize;
    }
    assert!(
        holes_seen > n / 50,
        "{holes_seen} of {n} rays hit a hole first"
    );
    assert_eq!(
        differ, holes_seen,
        "a ray sees another surface exactly when it met a hole"
    );
}

/// A scene split into domains, each with its own BVH, finds the whole scene's closest hit bit
/// for bit when a ray visits the domains as a forwarded ray does (its starting domain, then
/// the others nearest entry first, the best hit carried along), and the same occlusion: for
/// every number of domains and starting domain, with replicated groups, coincident groups
/// (ties settled across domains) and cut-outs.
#[test]
fn domains_together_match_brute_force() {
    use gasworks::cpu::bvh::RayData;
    use gasworks::cpu::domains::{closest_across, magnitude_of, occluded_across};
    use gasworks::cpu::domains::{DomainGeometry, TopLevel};
    use gasworks::scene::domains::Domains;
    let (cut, _) = heavy_tailed_with_cutouts(11);
    let plain = heavy_tailed_scene(&mut Rng::new(12));
    for (scene, seed) in [(&cut, 13), (&plain, 14)] {
        let size = scene.bounds().diagonal().max_element();
        // The balanced split, with a tenth of the groups replicated, and groups dealt
        // round-robin: coincident copies of a group then lie in other domains, so ties in t
        // are settled across domains.
        let extents = Domains::extents_of(scene);
        let dealt = |n: usize| (0..extents.len()).map(|g| (g % n) as u32).collect();
        let tenth: Vec<bool> = (0..extents.len()).map(|g| g % 10 == 3).collect();
        for (n, round_robin) in (1..=5).flat_map(|n| [(n, false), (n, true)]) {
            let domains = if round_robin {
                Domains::assigned(&extents, dealt(n), vec![false; extents.len()], n)
            } else {
                Domains::split_replicating(&extents, n, tenth.clone())
            };
            // Each domain's complement: where a hit of the domain finds its ties.
            let others: Vec<Scene> = (0..n)
                .map(|d| scene.keeping_groups(|g| !domains.holds(d, g)))
                .collect();
            let top = TopLevel::new(&domains, magnitude_of(&scene.bounds()));
            let geometry: Vec<DomainGeometry> = (0..n)
                .map(|d| DomainGeometry::of(scene, &domains, d, &top))
                .collect();
            let mut rng = Rng::new(seed + n as u64);
            let mut ties_across = 0;
            let mut hits_beyond_the_first_domain = 0;
            for i in 0..1000 {
                let (origin, dir, tmin) = test_ray(scene, &mut rng, i);
                let ray = RayData::new(origin, dir).unwrap();
                let expect = brute_force_intersect(scene, origin, dir, tmin, f32::INFINITY);
                let start = i % n;
                let got = closest_across(&top, &geometry, &ray, tmin, start);
                let bits = |h: Option<gasworks::cpu::Hit>| {
                    h.map(|h| (h.group, h.prim, h.t.to_bits(), h.u.to_bits(), h.v.to_bits()))
                };
                assert_eq!(bits(got), bits(expect), "{n} domains, ray {i}");
                ties_across += expect.is_some_and(|h| {
                    let Some(owner) = domains.owner(h.group as usize) else {
                        return false;
                    };
                    let others = &others[owner];
                    brute_force_intersect(others, origin, dir, tmin, f32::INFINITY)
                        .is_some_and(|o| o.t == h.t)
                }) as usize;
                hits_beyond_the_first_domain +=
                    expect.is_some_and(|h| !domains.holds(start, h.group as usize)) as usize;
                let tmax = rng.range(0.0, 2.0) * size;
                assert_eq!(
                    occluded_across(&top, &geometry, &ray, (tmin, tmax), start),
                    brute_force_occluded(scene, origin, dir, tmin, tmax),
                    "{n} domains, shadow ray {i}"
                );
            }
            if n > 1 {
                assert!(
                    hits_beyond_the_first_domain > 50,
                    "{n} domains: {hits_beyond_the_first_domain} hits beyond the starting domain"
                );
            }
            if n > 1 && round_robin {
                assert!(
                    ties_across > 5,
                    "{n} domains: {ties_across} ties across domains"
                );
            }
        }
    }
}
