//! See-through materials (MTL `d` below 1, or `Tr` above 0, on a material that is not glass)
//! through the whole loader and the CPU path tracer.
//!
//! A see-through surface keeps each hit with probability `d` ([`Scene::is_dissolved`]), for
//! camera, bounce and shadow rays alike. So a black veil in front of a white sky shows the sky
//! with weight `1 - d` exactly in expectation, and a black veil between a lamp and a floor
//! passes `1 - d` of the floor's direct light, through next-event estimation and BSDF
//! sampling both. Statistical bound as in `one_sided_lights.rs`: `|m - expected| < 4 se`.

mod cpu_common;

use std::path::Path;

use cpu_common::{
    info_line_of_material, load_quiet as load, mean_and_se, with_tracer, write_file as write,
};
use gasworks::render::Sampler;
use gasworks::scene::gen::write_obj;
use gasworks::scene::{dissolve_number, Scene};
use glam::Vec3;

/// `n` radiance samples around each of a few points, looking straight down from `y`. Each
/// sample starts at its own spot within 0.1 of the point: a see-through surface decides by
/// the hit point, so rays through one point all get one answer (a stipple finer than any
/// pixel), and only rays spread over an area see the surface's share.
fn samples_down(scene: &Scene, y: f32, n: u32) -> Vec<Vec3> {
    with_tracer(scene, 3, |tracer| {
        let mut out = Vec::new();
        let mut spot = cpu_common::Rng::new(9);
        for (i, (x, z)) in [(0.011, 0.017), (0.31, -0.22), (-0.27, 0.4)]
            .into_iter()
            .enumerate()
        {
            for s in 0..n {
                let mut rng = Sampler::new(i as u32, 0, s, n, 5);
                let origin = Vec3::new(x + spot.range(-0.1, 0.1), y, z + spot.range(-0.1, 0.1));
                out.push(tracer.radiance(origin, -Vec3::Y, &mut rng));
            }
        }
        out
    })
}

/// A black veil at height 1 (a 4x4 quad facing up) with `veil` statements, over nothing but a
/// white sky (the scene has no lamp) or, with `lamp`, over a grey floor at height 0 and under
/// a lamp at height 2 facing down.
fn veil_scene(dir: &Path, veil: &str, lamp: bool) -> Scene {
    write(
        dir,
        "m.mtl",
        format!(
            "newmtl veil\nKd 0 0 0\n{veil}\nnewmtl floor\nKd 0.5 0.5 0.5\n\
             newmtl lamp\nKd 0 0 0\nKe 4 4 4\n"
        ),
    );
    let mut obj = "mtllib m.mtl\n\
                   v -2 1 -2\nv -2 1 2\nv 2 1 2\nv 2 1 -2\n\
                   g veil\nusemtl veil\nf 1 2 3 4\n"
        .to_string();
    if lamp {
        obj += "v -10 0 -10\nv -10 0 10\nv 10 0 10\nv 10 0 -10\n\
                g floor\nusemtl floor\nf 5 6 7 8\n\
                v -0.5 2 -0.5\nv 0.5 2 -0.5\nv 0.5 2 0.5\nv -0.5 2 0.5\n\
                g lamp\nusemtl lamp\nf 9 10 11 12\n";
    }
    load(&write(dir, "veil.obj", &obj))
}

#[test]
fn a_see_through_veil_shows_the_sky_behind_it_by_its_transparency() {
    let dir = tempfile::tempdir().unwrap();
    for (statement, d) in [("d 0.3", 0.3), ("Tr 0.75", 0.25), ("d 0.9", 0.9)] {
        let scene = veil_scene(dir.path(), statement, false);
        assert_eq!(scene.materials[0].opacity, d, "{statement}");
        let (mean, se, n) = mean_and_se(samples_down(&scene, 3.0, 20_000));
        let expected = 1.0 - f64::from(d);
        println!(
            "{statement}: mean {:.5} expected {expected:.5}, |diff| {:.2e} < {:.2e}, n {n}",
            mean.x,
            (mean.x - expected).abs(),
            4.0 * se.x
        );
        assert!((mean.x - expected).abs() < 4.0 * se.x + 1e-6, "{statement}");
    }
    // Opaque (d 1, or no d): the veil hides the sky, every sample exactly 0.
    let scene = veil_scene(dir.path(), "d 1", false);
    assert!(samples_down(&scene, 3.0, 500)
        .iter()
        .all(|v| *v == Vec3::ZERO));
}

#[test]
fn a_see_through_veil_passes_its_share_of_a_lamps_light() {
    let dir = tempfile::tempdir().unwrap();
    let under = |statement: &str| {
        let scene = veil_scene(dir.path(), statement, true);
        // Looking down from just above the floor, under the veil.
        mean_and_se(samples_down(&scene, 0.5, 40_000))
    };
    let (open, open_se, _) = under("d 0");
    let (veiled, veiled_se, _) = under("d 0.4");
    let (shut, _, _) = under("d 1");
    // The open veil lets everything through: the floor sees the lamp and the sky (the scene
    // has a lamp, so no sky: only the lamp).
    assert!(open.x > 0.05, "{open}");
    assert_eq!(shut.x, 0.0, "an opaque black veil leaves the floor dark");
    let expected = 0.6 * open.x;
    let bound = 4.0 * (veiled_se.x.powi(2) + (0.6 * open_se.x).powi(2)).sqrt();
    println!(
        "floor under d 0.4: {:.5} vs 0.6 x {:.5} = {expected:.5}, |diff| {:.2e} < {bound:.2e}",
        veiled.x,
        open.x,
        (veiled.x - expected).abs()
    );
    assert!((veiled.x - expected).abs() < bound);
}

/// The hit's number is uniform: over many hits, the share below any opacity is that opacity.
#[test]
fn dissolve_numbers_are_uniform_over_hits() {
    let n = 200_000;
    let mut below = [0usize; 4];
    let cuts = [0.1f32, 0.25, 0.5, 0.9];
    let mut rng = cpu_common::Rng::new(3);
    for i in 0..n {
        let x = dissolve_number(i % 7, i / 7, rng.f(), rng.f());
        assert!((0.0..1.0).contains(&x));
        for (count, cut) in below.iter_mut().zip(cuts) {
            *count += usize::from(x < cut);
        }
    }
    for (count, cut) in below.iter().zip(cuts) {
        let share = *count as f64 / n as f64;
        let se = (f64::from(cut) * (1.0 - f64::from(cut)) / n as f64).sqrt();
        assert!((share - f64::from(cut)).abs() < 4.0 * se, "{cut}: {share}");
    }
}

/// Glass keeps its dissolve as the glass marker, an emitter stays opaque with a warning, a
/// fully transparent material is a warning, a value outside [0, 1] is clamped with one;
/// `info` says "see-through"; the writer writes `d` and reads it back.
#[test]
fn dissolve_in_mtl_files_is_read_warned_about_described_and_written() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl curtain\nKd 0.8 0.2 0.2\nd 0.35\nNi 1.0\n\
         newmtl water\nd 0.4\nNi 1.33\n\
         newmtl glowing\nKe 2 2 2\nd 0.5\n\
         newmtl gone\nTr 1\n\
         newmtl odd\nd 1.5\n\
         newmtl window\nKs 0.5 0.5 0.5\nillum 3\nTr 0.8\n",
    );
    let mut obj = "mtllib m.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\n".to_string();
    for (i, m) in ["curtain", "water", "glowing", "gone", "odd", "window"]
        .iter()
        .enumerate()
    {
        obj += &format!("g g{i}\nusemtl {m}\nf 1 2 3\n");
    }
    let path = write(dir.path(), "s.obj", &obj);
    let scene = load(&path);
    let m = |name: &str| scene.materials.iter().find(|m| m.name == name).unwrap();
    assert_eq!(m("curtain").opacity, 0.35);
    assert!(m("curtain").dissolves());
    assert_eq!(m("water").kind, gasworks::scene::MaterialKind::Glass);
    assert_eq!(m("water").opacity, 1.0);
    assert_eq!(m("glowing").opacity, 1.0);
    assert_eq!(m("gone").opacity, 0.0);
    assert_eq!(m("odd").opacity, 1.0);
    assert_eq!(m("window").kind, gasworks::scene::MaterialKind::Mirror);
    assert!((m("window").opacity - 0.2).abs() < 1e-6);
    let mtl = dir.path().join("m.mtl").display().to_string();
    for expected in [
        format!("{mtl}: material glowing: an emitter is opaque: its dissolve 0.5 (d or Tr) is not applied"),
        format!("{mtl}: material gone: d 0 (or Tr 1) makes it fully transparent: its faces are invisible (some exporters write Tr 1 for opaque; if so, remove it)"),
        format!("{mtl}: material odd: d 1.5 is no share of the surface: 1 used"),
    ] {
        assert!(
            scene.report.warnings.contains(&expected),
            "{expected} not in {:#?}",
            scene.report.warnings
        );
    }
    // Every group with a see-through material needs the pass-through test; the others not.
    assert_eq!(
        scene.cutout_groups(),
        [true, false, false, true, false, true]
    );

    let line = |name: &str| info_line_of_material(&path, name);
    assert!(
        line("curtain").ends_with("see-through (d 0.35)"),
        "{}",
        line("curtain")
    );
    assert!(!line("water").contains("see-through"), "{}", line("water"));
    assert!(
        !line("glowing").contains("see-through"),
        "{}",
        line("glowing")
    );

    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&scene, out.path(), "again").unwrap();
    let again = load(&written.obj);
    for (a, b) in scene.materials.iter().zip(&again.materials) {
        assert_eq!(
            (a.name.as_str(), a.kind, a.opacity.to_bits()),
            (b.name.as_str(), b.kind, b.opacity.to_bits())
        );
    }
}
