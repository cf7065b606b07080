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
