//! Bump (height) and normal maps through the whole loader (MTL statements, PNG files, telling
//! a normal map named by `map_Bump` from heights) and the CPU path tracer, against a closed
//! form; and what `gasworks info` and the scene writer make of them.
//!
//! The closed form: a diffuse floor of albedo `kd` under a uniform sky of radiance 1, seen
//! from straight above with `max_depth` 2 (one bounce, then the sky), whose shading normal is
//! tilted by `t` from its geometric normal. BSDF sampling draws cosine-distributed directions
//! about the shading normal with weight `kd` and ends the path when a direction falls below
//! the floor, so every sample is exactly `kd` or 0, and the mean is `kd` times the
//! cosine-weighted share of the tilted hemisphere above the floor: `kd (1 + cos t) / 2`. A map
//! that bends the normal by the wrong angle (or not at all) moves the mean. Statistical bound
//! as in `one_sided_lights.rs`: `|m - expected| < 4 se + 1e-4 expected`.

mod cpu_common;

use std::path::Path;

use cpu_common::{
    info_line_of_material, load_quiet as load, mean_and_se, with_tracer, write_file as write,
};
use gasworks::render::Sampler;
use gasworks::scene::gen::write_obj;
use gasworks::scene::{BumpMap, Scene};
use glam::{Vec2, Vec3};

const KD: f32 = 0.5;

/// A 20x20 floor facing +Y, its texture repeated 10 times each way (u along +x, v along +z:
/// a mirrored UV frame seen from above, which the maps must handle), with material `floor` of
/// library `m.mtl`; a second copy without UVs when `without_uvs`.
fn floor_obj(without_uvs: bool) -> String {
    let mut s = "mtllib m.mtl\n\
                 v -10 0 -10\nv -10 0 10\nv 10 0 10\nv 10 0 -10\n\
                 vt 0 0\nvt 0 10\nvt 10 10\nvt 10 0\n\
                 g floor\nusemtl floor\nf 1/1 2/2 3/3 4/4\n"
        .to_string();
    if without_uvs {
        s += "v -10 -1 -10\nv -10 -1 10\nv 10 -1 10\ng bare\nusemtl floor\nf 5 6 7\n";
    }
    s
}

/// The scene of `floor_obj` with `mtl` as its library, in `dir`.
fn floor_scene(dir: &Path, mtl: &str) -> Scene {
    write(dir, "m.mtl", mtl);
    load(&write(dir, "floor.obj", floor_obj(false)))
}

/// `n` samples of the radiance leaving the floor upwards at each of a few points spread over
/// the texture, with one bounce.
fn floor_samples(scene: &Scene, n: u32) -> Vec<Vec3> {
    with_tracer(scene, 2, |tracer| {
        let mut out = Vec::new();
        for (i, (x, z)) in [(0.013, 0.021), (1.37, -2.71), (-4.44, 3.19), (7.05, 0.52)]
            .into_iter()
            .enumerate()
        {
            for s in 0..n {
                let mut rng = Sampler::new(i as u32, 0, s, n, 29);
                out.push(tracer.radiance(Vec3::new(x, 1.0, z), -Vec3::Y, &mut rng));
            }
        }
        out
    })
}

/// The mean of `floor_samples` is `KD (1 + cos_t) / 2`, within the statistical bound.
fn assert_tilt(scene: &Scene, cos_t: f64, what: &str) {
    let (mean, se, n) = mean_and_se(floor_samples(scene, 10_000));
    let expected = f64::from(KD) * (1.0 + cos_t) / 2.0;
    let bound = 4.0 * se.x + 1e-4 * expected;
    println!(
        "{what}: mean {:.6} expected {expected:.6} (cos t {cos_t:.4}), |diff| {:.2e} < {bound:.2e}, n {n}",
        mean.x,
        (mean.x - expected).abs()
    );
    assert!((mean.x - expected).abs() < bound, "{what}");
}

fn rgb_png(dir: &Path, name: &str, w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) {
    image::RgbImage::from_fn(w, h, |x, y| image::Rgb(f(x, y)))
        .save(dir.join(name))
        .unwrap();
}

fn grey_png(dir: &Path, name: &str, w: u32, h: u32, f: impl Fn(u32, u32) -> u8) {
    image::GrayImage::from_fn(w, h, |x, y| image::Luma([f(x, y)]))
        .save(dir.join(name))
        .unwrap();
}

/// The bytes of the normal `(sin t, 0, cos t)`, and the cosine of the tilt they decode to.
fn tilted_normal_texel(t: f32) -> ([u8; 3], f64) {
    let n = Vec3::new(t.sin(), 0.0, t.cos());
    let bytes = (n * 0.5 + Vec3::splat(0.5))
        .to_array()
        .map(|c| (c * 255.0).round() as u8);
    let decoded = glam::DVec3::from(bytes.map(|b| f64::from(b) / 255.0 * 2.0 - 1.0));
    (bytes, decoded.z / decoded.length())
}

#[test]
fn a_normal_map_tilts_the_floor_by_its_angle() {
    for t in [0.4f32, 1.1] {
        let dir = tempfile::tempdir().unwrap();
        let (texel, cos_t) = tilted_normal_texel(t);
        rgb_png(dir.path(), "n.png", 4, 4, |_, _| texel);
        // `norm`, and `map_Bump` naming the same image (told by its texels).
        for statement in ["norm n.png", "map_Bump n.png"] {
            let scene = floor_scene(
                dir.path(),
                &format!("newmtl floor\nKd {KD} {KD} {KD}\n{statement}\n"),
            );
            assert!(
                matches!(scene.materials[0].bump, Some(BumpMap::Normal { scale, .. }) if scale == 1.0),
                "{statement}: {:?}",
                scene.materials[0].bump
            );
            assert_tilt(&scene, cos_t, &format!("{statement}, t {t}"));
        }
    }
}

/// `-bm` scales a normal map's tangential part: `-bm 0` flattens it, `-bm 2` doubles the
/// tangent of its tilt.
#[test]
fn a_normal_maps_multiplier_scales_its_tilt() {
    let dir = tempfile::tempdir().unwrap();
    let (texel, cos_t) = tilted_normal_texel(0.5);
    rgb_png(dir.path(), "n.png", 2, 2, |_, _| texel);
    let scene = floor_scene(
        dir.path(),
        &format!("newmtl floor\nKd {KD} {KD} {KD}\nnorm -bm 0 n.png\n"),
    );
    assert_tilt(&scene, 1.0, "-bm 0");
    let scene = floor_scene(
        dir.path(),
        &format!("newmtl floor\nKd {KD} {KD} {KD}\nnorm -bm 2 n.png\n"),
    );
    let tan_t = (1.0 - cos_t * cos_t).sqrt() / cos_t;
    assert_tilt(&scene, 1.0 / (1.0 + 4.0 * tan_t * tan_t).sqrt(), "-bm 2");
}

/// A grey height map that zigzags by `k` per texel along u tilts the normal by `atan(bm k)`
/// everywhere (the slope is `+-k` in every cell of the bilinear lookup, the wrap included).
#[test]
fn a_height_map_tilts_the_floor_by_its_slope() {
    let dir = tempfile::tempdir().unwrap();
    let step = 10u8;
    grey_png(dir.path(), "h.png", 16, 4, |x, _| {
        step * (x as i32 - 8).unsigned_abs() as u8
    });
    for (statement, bm) in [("bump -bm 8 h.png", 8.0), ("map_Bump -bm 3 h.png", 3.0)] {
        let scene = floor_scene(
            dir.path(),
            &format!("newmtl floor\nKd {KD} {KD} {KD}\n{statement}\n"),
        );
        assert!(
            matches!(scene.materials[0].bump, Some(BumpMap::Height { scale, .. }) if scale == bm),
            "{statement}"
        );
        let a = bm as f64 * f64::from(step) / 255.0;
        assert_tilt(&scene, 1.0 / (1.0 + a * a).sqrt(), statement);
    }
    // The same heights along the rows tilt along v, by the same angle.
    grey_png(dir.path(), "rows.png", 4, 16, |_, y| {
        step * (y as i32 - 8).unsigned_abs() as u8
    });
    let scene = floor_scene(
        dir.path(),
        &format!("newmtl floor\nKd {KD} {KD} {KD}\nbump -bm 8 rows.png\n"),
    );
    let a = 8.0 * f64::from(step) / 255.0;
    assert_tilt(&scene, 1.0 / (1.0 + a * a).sqrt(), "rows");
}

/// A height map with no slope, and a map on faces without UVs, leave the floor as it is
/// without the map: bit for bit.
#[test]
fn a_flat_height_map_renders_bit_for_bit_the_unmapped_floor() {
    let dir = tempfile::tempdir().unwrap();
    grey_png(dir.path(), "flat.png", 8, 8, |_, _| 90);
    let plain = floor_scene(dir.path(), &format!("newmtl floor\nKd {KD} {KD} {KD}\n"));
    let flat = floor_scene(
        dir.path(),
        &format!("newmtl floor\nKd {KD} {KD} {KD}\nbump -bm 5 flat.png\n"),
    );
    assert!(flat.materials[0].bump.is_some());
    let bits = |s: &Scene| {
        floor_samples(s, 200)
            .iter()
            .map(|v| v.to_array().map(f32::to_bits))
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&plain), bits(&flat));
}

#[test]
fn maps_on_faces_without_uvs_are_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    grey_png(dir.path(), "h.png", 8, 8, |x, _| x as u8 * 20);
    write(dir.path(), "m.mtl", "newmtl floor\nbump h.png\n");
    let obj = write(dir.path(), "floor.obj", floor_obj(true));
    let scene = load(&obj);
    let warnings: Vec<&String> = scene
        .report
        .warnings
        .iter()
        .filter(|w| w.contains("bump"))
        .collect();
    assert_eq!(
        warnings,
        [&format!(
            "{}: 1 group uses bump or normal maps (bump, map_Bump, norm) without texture coordinates (vt), so their faces render smooth (group bare, material floor)",
            obj.display()
        )]
    );
}

/// A bump map that cannot be read is a warning naming both files, and the material renders
/// without it.
#[test]
fn a_missing_bump_map_is_a_warning_and_no_map() {
    let dir = tempfile::tempdir().unwrap();
    let scene = floor_scene(
        dir.path(),
        "newmtl floor\nmap_Bump gone.png\nnewmtl other\nnorm gone.png\n",
    );
    assert_eq!(scene.materials[0].bump, None);
    let mtl = dir.path().join("m.mtl");
    let gone = dir.path().join("gone.png");
    assert!(
        scene.report.warnings.iter().any(|w| w.starts_with(&format!(
            "{}: material floor: texture {} cannot be used (",
            mtl.display(),
            gone.display()
        )) && w
            .ends_with("the material renders without its bump map")),
        "{:?}",
        scene.report.warnings
    );
}

/// `gasworks info` names each material's kind of map; the scene writer writes heights as a
/// grey PNG and a normal map as `norm` of its source, and both read back with the same texels
/// and multipliers.
#[test]
fn info_names_the_maps_and_written_scenes_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (texel, _) = tilted_normal_texel(0.7);
    rgb_png(dir.path(), "n.png", 4, 4, |x, y| {
        if (x + y) % 2 == 0 {
            texel
        } else {
            [128, 128, 255]
        }
    });
    grey_png(dir.path(), "h.png", 5, 3, |x, y| (x * 40 + y * 7) as u8);
    write(
        dir.path(),
        "m.mtl",
        "newmtl floor\nKd 0.5 0.5 0.5\nmap_Bump -bm 2 -s 2 2 n.png\n\
         newmtl wall\nKd 0.5 0.5 0.5\nbump -bm -0.5 -o 0.25 0 h.png\n",
    );
    let obj = write(
        dir.path(),
        "two.obj",
        floor_obj(false) + "usemtl wall\nf 3/3 4/4 1/1\n",
    );
    let scene = load(&obj);
    let line = |name: &str| info_line_of_material(&obj, name);
    assert!(
        line("floor").ends_with("normal-mapped"),
        "{}",
        line("floor")
    );
    assert!(line("wall").ends_with("bump-mapped"), "{}", line("wall"));

    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&scene, out.path(), "again").unwrap();
    let again = load(&written.obj);
    for name in ["floor", "wall"] {
        let find = |s: &Scene| {
            let m = s.materials.iter().find(|m| m.name == name).unwrap();
            let bump = m.bump.unwrap();
            let t = &s.textures[bump.texture() as usize];
            (
                bump.kind_name(),
                bump.scale(),
                t.mapping,
                t.width,
                t.height,
                t.texels
                    .iter()
                    .map(|c| c.map(f32::to_bits))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(find(&again), find(&scene), "{name}");
    }
    // The heights were decoded as stored values, not sRGB colours: 40 / 255 at (1, 0).
    let wall = scene.materials.iter().find(|m| m.name == "wall").unwrap();
    let heights = &scene.textures[wall.bump.unwrap().texture() as usize];
    assert!((heights.texels[1][0] - 40.0 / 255.0).abs() < 1e-6);
    assert_eq!(heights.mapping.offset, Vec2::new(0.25, 0.0));
}
