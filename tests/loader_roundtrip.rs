//! Generated scenes written as OBJ + MTL read back as the same scenes: groups, triangles,
//! per-face materials, normals. Also the sponza-like size distribution and the committed
//! Cornell box asset.

use std::path::Path;

use gasworks::scene::gen::{
    cornell, sponza_like, sponza_like_group_sizes, toystore, write_obj, SPONZA_LIKE_GROUPS,
    SPONZA_LIKE_TRIANGLES,
};
use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::Scene;

fn reload(scene: &Scene, dir: &Path, stem: &str) -> Scene {
    let written = write_obj(scene, dir, stem).unwrap();
    assert_eq!(written.groups, scene.groups.len());
    assert_eq!(written.triangles, scene.triangle_count() as u64);
    load_obj(&written.obj, &LoadOptions { quiet: true }).unwrap()
}

/// Same groups in the same order, same triangles corner for corner, same material per face,
/// normals where the original had them.
fn assert_same_scene(a: &Scene, b: &Scene) {
    assert_eq!(a.groups.len(), b.groups.len());
    assert_eq!(a.triangle_count(), b.triangle_count());
    assert_eq!(b.report.degenerate_dropped, 0);
    for (ga, gb) in a.groups.iter().zip(&b.groups) {
        assert_eq!(ga.name, gb.name);
        assert_eq!(
            ga.triangle_count(),
            gb.triangle_count(),
            "group {}",
            ga.name
        );
        assert_eq!(
            ga.normals.is_empty(),
            gb.normals.is_empty(),
            "group {}",
            ga.name
        );
        for prim in 0..ga.triangle_count() {
            assert_eq!(
                ga.triangle(prim),
                gb.triangle(prim),
                "group {} prim {prim}",
                ga.name
            );
            let (ma, mb) = (
                &a.materials[ga.face_materials[prim] as usize],
                &b.materials[gb.face_materials[prim] as usize],
            );
            assert_eq!(ma.name, mb.name);
            assert_eq!(ma.kind, mb.kind, "material {}", ma.name);
            assert_eq!(ma.emission, mb.emission, "material {}", ma.name);
            assert_eq!(ma.diffuse, mb.diffuse, "material {}", ma.name);
        }
        if !ga.normals.is_empty() {
            for prim in 0..ga.triangle_count() {
                for corner in 0..3 {
                    let na = ga.normals[ga.indices[prim][corner] as usize];
                    let nb = gb.normals[gb.indices[prim][corner] as usize];
                    assert!((na - nb).length() < 1e-5, "group {} prim {prim}", ga.name);
                }
            }
        }
    }
    assert_eq!(a.lights.len(), b.lights.len());
}

#[test]
fn cornell_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a = cornell();
    let b = reload(&a, dir.path(), "cornell");
    assert_same_scene(&a, &b);
    assert_eq!(b.materials.len(), 4);
}

#[test]
fn sponza_like_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a = sponza_like(60, 20_000, 5).unwrap();
    let b = reload(&a, dir.path(), "sponza_like");
    assert_same_scene(&a, &b);
    let kinds = |s: &Scene| {
        s.materials
            .iter()
            .map(|m| (m.name.clone(), m.kind, m.specular, m.shininess))
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(&a), kinds(&b));
    // Its textures (made in memory, written as PNGs beside the MTL) read back bit for bit, in
    // the same order, used by the same materials, with the texture coordinates.
    assert!(b.report.warnings.is_empty(), "{:?}", b.report.warnings);
    assert_eq!(a.textures.len(), 5);
    // Corner by corner (the loader numbers vertices in the order faces use them).
    for (ga, gb) in a.groups.iter().zip(&b.groups) {
        assert_eq!(ga.uvs.is_empty(), gb.uvs.is_empty(), "group {}", ga.name);
        for (ta, tb) in ga.indices.iter().zip(&gb.indices) {
            for (&ia, &ib) in ta.iter().zip(tb) {
                assert_eq!(
                    ga.uvs.get(ia as usize),
                    gb.uvs.get(ib as usize),
                    "group {}",
                    ga.name
                );
            }
        }
    }
    for (ta, tb) in a.textures.iter().zip(&b.textures) {
        assert_eq!((ta.width, ta.height), (tb.width, tb.height), "{}", tb.path);
        let bits = |t: &gasworks::scene::Texture| {
            t.texels
                .iter()
                .flat_map(|c| c.map(f32::to_bits))
                .collect::<Vec<_>>()
        };
        assert!(bits(ta) == bits(tb), "texels of {} differ", tb.path);
    }
    let maps = |s: &Scene| {
        s.materials
            .iter()
            .map(|m| (m.diffuse_texture, m.opacity_texture, m.bump))
            .collect::<Vec<_>>()
    };
    assert_eq!(maps(&a), maps(&b));
}

#[test]
fn toystore_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a = toystore(2, 3).unwrap();
    let b = reload(&a, dir.path(), "toystore");
    assert_same_scene(&a, &b);
}

#[test]
fn sponza_like_defaults_have_sponzas_heavy_tail() {
    let s = sponza_like(SPONZA_LIKE_GROUPS, SPONZA_LIKE_TRIANGLES, 1).unwrap();
    let sizes: Vec<usize> = s.groups.iter().map(|g| g.triangle_count()).collect();
    assert_eq!(sizes.len(), 390);
    assert_eq!(s.report.degenerate_dropped, 0);
    let total: usize = sizes.iter().sum();
    let error = (total as f64 - 260_000.0).abs() / 260_000.0;
    assert!(error < 0.03, "{total} triangles");
    let quads = sizes.iter().filter(|&&n| n == 2).count();
    let under_100 = sizes.iter().filter(|&&n| n < 100).count();
    let over_10k = sizes.iter().filter(|&&n| n > 10_000).count();
    assert!((24..=60).contains(&quads), "{quads} groups of 2 triangles");
    assert!(under_100 >= 150, "{under_100} groups under 100 triangles");
    assert!(
        (2..=8).contains(&over_10k),
        "{over_10k} groups over 10k triangles"
    );
    // The few large groups hold a large share of the triangles.
    let big: usize = sizes.iter().filter(|&&n| n > 10_000).sum();
    assert!(big as f64 > 0.3 * total as f64);
    // It is lit by its skylight, and every group has vertex normals.
    assert!(!s.lights.is_empty());
    assert!(s
        .groups
        .iter()
        .all(|g| g.normals.len() == g.positions.len()));
}

#[test]
fn sponza_like_is_a_function_of_its_seed() {
    let a = sponza_like_group_sizes(390, 260_000, 1);
    assert_eq!(a, sponza_like_group_sizes(390, 260_000, 1));
    assert_ne!(a, sponza_like_group_sizes(390, 260_000, 2));
    let x = sponza_like(40, 5_000, 9).unwrap();
    let y = sponza_like(40, 5_000, 9).unwrap();
    for (gx, gy) in x.groups.iter().zip(&y.groups) {
        assert_eq!(gx.name, gy.name);
        assert_eq!(gx.positions, gy.positions);
    }
}

#[test]
fn sponza_like_scales_with_its_parameters() {
    for (groups, triangles) in [(100, 50_000), (1000, 400_000), (8, 100_000)] {
        let s = sponza_like(groups, triangles, 4).unwrap();
        assert_eq!(s.groups.len(), groups);
        let total = s.triangle_count() as f64;
        assert!(
            (total - triangles as f64).abs() / (triangles as f64) < 0.03,
            "{groups} {triangles}: {total}"
        );
        assert_eq!(s.report.degenerate_dropped, 0);
    }
}

#[test]
fn committed_cornell_asset_is_what_gen_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let asset = root.join("assets/cornell/cornell.obj");
    let loaded = load_obj(&asset, &LoadOptions { quiet: true }).unwrap();
    assert_same_scene(&cornell(), &loaded);
    assert!(
        loaded.report.warnings.is_empty(),
        "{:?}",
        loaded.report.warnings
    );
}

/// Groups with and without normals and texture coordinates, mixed in one file: each face's
/// `vt` and `vn` indices point at its own group's (the writer once numbered them as the
/// vertices, which points elsewhere, or nowhere, once a group goes without them).
#[test]
fn groups_with_and_without_normals_and_uvs_mix_in_one_file() {
    use gasworks::scene::{Group, Material};
    use glam::{Vec2, Vec3};
    let triangle = |name: &str, x: f32, normals: bool, uvs: bool| Group {
        name: name.into(),
        positions: vec![
            Vec3::new(x, 0.0, 0.0),
            Vec3::new(x + 1.0, 0.0, 0.0),
            Vec3::new(x, 1.0, 0.0),
        ],
        normals: if normals {
            vec![Vec3::Z, Vec3::new(0.0, 0.6, 0.8), Vec3::new(0.6, 0.0, 0.8)]
        } else {
            Vec::new()
        },
        uvs: if uvs {
            vec![
                Vec2::new(x, 0.25),
                Vec2::new(x + 0.5, 0.25),
                Vec2::new(x, 0.75),
            ]
        } else {
            Vec::new()
        },
        indices: vec![[0, 1, 2]],
        face_materials: vec![0],
    };
    let a = Scene::new(
        "mixed",
        vec![
            triangle("plain", 0.0, false, false),
            triangle("normals", 2.0, true, false),
            triangle("uvs", 4.0, false, true),
            triangle("both", 6.0, true, true),
            triangle("normals_again", 8.0, true, false),
            triangle("uvs_again", 10.0, false, true),
        ],
        vec![Material::diffuse("grey", Vec3::splat(0.5))],
    );
    let dir = tempfile::tempdir().unwrap();
    let b = reload(&a, dir.path(), "mixed");
    // The one warning expected: nothing emits, so the loader lights it with a white sky.
    assert!(
        b.report
            .warnings
            .iter()
            .all(|w| w.contains("no emissive material")),
        "{:?}",
        b.report.warnings
    );
    for (ga, gb) in a.groups.iter().zip(&b.groups) {
        let corners = |g: &Group| {
            g.indices[0].map(|i| {
                (
                    g.positions[i as usize],
                    g.normals.get(i as usize).copied(),
                    g.uvs.get(i as usize).copied(),
                )
            })
        };
        assert_eq!(corners(ga), corners(gb), "group {}", ga.name);
    }
}
