//! Environment maps (`render --env-map`): the CPU path tracer against answers computed here,
//! and the command line's handling of map files.
//!
//! - White furnace: white diffuse objects under a map of one radiance vanish into it (every
//!   pixel converges to the map's radiance), which checks the map's next-event estimation and
//!   the MIS weights of escapes together: a wrong weight or density shows as a bias.
//! - A diffuse plane under a map with a sun: its radiance is `rho / pi` times the irradiance
//!   from the upper hemisphere, integrated here in f64 by quadrature of the interpolated map
//!   (16 x 16 points a texel's cell: the interpolation is linear between them).
//! - Area lights and a map together: light is linear, so the render with both equals the sum
//!   of the render with the lamp alone and the render with the map alone (the lamp's geometry
//!   there, not emitting). This checks the split of next-event estimation between them.
//!
//! Statistical bounds as in `cpu_analytic.rs`: per channel `|mean - expected| < 4 se + eps
//! expected`.

mod cli_support;
mod cpu_common;

use cli_support::gasworks;
use std::sync::Arc;

use cpu_common::*;
use gasworks::cpu::CpuBackend;
use gasworks::render::RenderSettings;
use gasworks::scene::{EnvironmentMap, Material, Scene};
use glam::{DVec3, Vec3};

fn settings(eye: Vec3, at: Vec3, fov: f32, w: u32, spp: u32, depth: u32) -> RenderSettings {
    RenderSettings {
        width: w,
        height: w,
        spp,
        max_depth: depth,
        seed: 23,
        camera: camera_at(eye, at, fov, w, w),
    }
}

/// Every sample of every pixel.
fn all_samples(backend: &CpuBackend, s: &RenderSettings) -> Vec<Vec3> {
    (0..s.width * s.height)
        .flat_map(|p| (0..s.spp).map(move |i| (p, i)))
        .map(|(p, i)| backend.sample(p % s.width, p / s.width, i))
        .collect()
}

/// The irradiance a surface facing +Y receives from the upper half of `map`: the integral of
/// `L(theta, phi) cos(theta) sin(theta)` over the hemisphere, by the midpoint rule on 16 x 16
/// points a cell. The bilinear interpolation is linear between those points (its kinks, the
/// texel centres, fall on their boundaries) and `cos sin` is smooth, so the rule is accurate
/// to a few parts in a million, far inside the renders' bounds.
fn upper_irradiance(map: &EnvironmentMap) -> DVec3 {
    use std::f64::consts::PI;
    let (w, h) = (map.width as usize, map.height as usize);
    assert_eq!(h % 2, 0, "the horizon must fall on a row boundary");
    let (nu, nv) = (16 * w, 16 * h);
    let mut e = DVec3::ZERO;
    for b in 0..nv / 2 {
        let v = (b as f64 + 0.5) / nv as f64;
        let theta = PI * v;
        let mut row = DVec3::ZERO;
        for a in 0..nu {
            let u = (a as f64 + 0.5) / nu as f64;
            row += map.bilinear(u as f32, v as f32).as_dvec3();
        }
        // d(omega) = sin(theta) dtheta dphi, dtheta = pi dv, dphi = 2 pi du.
        e += row * theta.cos() * theta.sin();
    }
    e * 2.0 * PI * PI / (nu * nv) as f64
}

fn floor(material: u32) -> gasworks::scene::Group {
    // Normal z x x = +y.
    quad(
        "floor",
        Vec3::new(-50.0, 0.0, -50.0),
        Vec3::new(0.0, 0.0, 100.0),
        Vec3::new(100.0, 0.0, 0.0),
        material,
    )
}

#[test]
fn white_furnace_diffuse_objects_vanish_under_a_uniform_map() {
    let mut scene = diffuse_furnace();
    scene.set_environment_map(EnvironmentMap::uniform(FURNACE_ENV).unwrap());
    let s = settings(
        Vec3::new(0.0, 1.5, -3.0),
        Vec3::new(0.0, 0.4, 0.0),
        40.0,
        16,
        64,
        64,
    );
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let (mean, se, _) = mean_and_se(all_samples(&backend, &s));
    assert_mean_within(
        "diffuse furnace, uniform map",
        mean,
        se,
        FURNACE_ENV.as_dvec3(),
        1e-4,
    );
}

/// Direct light only (two segments: camera to floor, floor to sky), camera looking straight
/// down at a floor that fills the view: the radiance is `rho / pi E`. With the map turned by
/// any angle the irradiance of a horizontal floor is the same.
#[test]
fn a_diffuse_floor_under_a_sun_reflects_the_maps_cosine_weighted_irradiance() {
    let rho = Vec3::new(0.5, 0.6, 0.7);
    for rotation in [0.0, 73.0] {
        let map = sun_map(rotation);
        let mut scene = Scene::new(
            "floor under a sun",
            vec![floor(0)],
            vec![Material::diffuse("floor", rho)],
        );
        scene.set_environment_map(map.clone());
        let s = settings(Vec3::new(0.0, 5.0, 0.5), Vec3::ZERO, 30.0, 16, 256, 2);
        let backend = CpuBackend::new(&scene, &s).unwrap();
        let (mean, se, _) = mean_and_se(all_samples(&backend, &s));
        let expected = rho.as_dvec3() / std::f64::consts::PI * upper_irradiance(&map);
        assert_mean_within(
            &format!("floor under a sun, rotation {rotation}"),
            mean,
            se,
            expected,
            1e-4,
        );
        // Importance sampling: the sun is a thousandth of the sky's solid angle and most of
        // its light, and still the error is a small fraction of the value.
        assert!(se.max_element() < 0.01 * expected.max_element(), "{se}");
    }
}

/// `--env-scale`: the floor under a map scaled by 3 is three times as bright, to the bound of
/// the irradiance test.
#[test]
fn a_scaled_map_lights_in_proportion() {
    let rho = Vec3::splat(0.5);
    let map = Arc::new(sun_map(0.0).as_ref().clone().scaled(3.0).unwrap());
    let mut scene = Scene::new(
        "floor",
        vec![floor(0)],
        vec![Material::diffuse("floor", rho)],
    );
    scene.set_environment_map(map);
    let s = settings(Vec3::new(0.0, 5.0, 0.5), Vec3::ZERO, 30.0, 16, 64, 2);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let (mean, se, _) = mean_and_se(all_samples(&backend, &s));
    let expected = rho.as_dvec3() / std::f64::consts::PI * upper_irradiance(&sun_map(0.0)) * 3.0;
    assert_mean_within("floor under a map scaled by 3", mean, se, expected, 1e-4);
}

/// The render with a lamp and a map is the sum of the lamp's render (no map) and the map's
/// (the lamp there but dark): one-to-one the split of next-event estimation between the map
/// and the area lights, and the MIS weights of both; and so for every share of the light
/// samples the map may get (`--env-share`: 1/2, the probe's smallest and largest, and what
/// the probe measures here).
#[test]
fn a_lamp_and_a_map_add_up_to_their_renders_apart() {
    let rho = Vec3::splat(0.6);
    let lamp_le = Vec3::new(30.0, 25.0, 20.0);
    let build = |lamp_emits: bool, map: bool| {
        let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
        if lamp_emits {
            lamp.emission = lamp_le;
        }
        let mut scene = Scene::new(
            "lamp and map",
            vec![
                floor(0),
                // Normal x x z = -y: down, towards the floor.
                quad("lamp", Vec3::new(-0.5, 2.0, -0.5), Vec3::X, Vec3::Z, 1),
            ],
            vec![Material::diffuse("floor", rho), lamp],
        );
        if map {
            scene.set_environment_map(sun_map(40.0));
        } else {
            scene.environment = None;
        }
        scene
    };
    let s = settings(
        Vec3::new(0.0, 3.0, 3.0),
        Vec3::new(0.0, 0.0, 0.0),
        40.0,
        16,
        128,
        4,
    );
    let stats = |scene: &Scene| {
        let backend = CpuBackend::new(scene, &s).unwrap();
        mean_and_se(all_samples(&backend, &s))
    };
    let (lamp, se_lamp, _) = stats(&build(true, false));
    let (map, se_map, _) = stats(&build(false, true));
    eprintln!("lamp {lamp:.5} (se {se_lamp:.5}), map {map:.5} (se {se_map:.5})");
    assert!(lamp.min_element() > 0.05 && map.min_element() > 0.05);
    let both = build(true, true);
    let probed = gasworks::cpu::environment_share::probe(
        &both,
        &gasworks::cpu::SceneBvh::build(&both),
        &s.camera,
        s.max_depth,
    );
    eprintln!("probe: {probed:?}");
    assert!(probed.paths > 0 && probed.share > 0.0 && probed.share < 1.0);
    let min = gasworks::cpu::environment_share::MIN_SHARE;
    for share in [None, Some(min), Some(1.0 - min), Some(probed.share)] {
        let mut scene = both.clone();
        scene.environment_share = share;
        let (together, se_together, _) = stats(&scene);
        let se = (se_together * se_together + se_lamp * se_lamp + se_map * se_map).sqrt();
        assert_mean_within(
            &format!("lamp and map together, share {share:?}"),
            together,
            se,
            lamp + map,
            1e-4,
        );
    }
}

/// The BVH the probe built is the one a CPU backend then traces (`CpuBackend::sharing`, as
/// `render` hands it on, with the scene itself): every sample as a backend that builds its own draws, bit for bit,
/// and the build counted as before its setup. A BVH of other geometry is not used: the
/// backend builds the scene's own, and its samples are still the scene's.
#[test]
fn the_probes_bvh_is_the_cpu_backends_and_another_scenes_is_not() {
    let mut scene = Scene::new(
        "lamp and map",
        vec![
            floor(0),
            quad("lamp", Vec3::new(-0.5, 2.0, -0.5), Vec3::X, Vec3::Z, 1),
        ],
        vec![Material::diffuse("floor", Vec3::splat(0.6)), {
            let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
            lamp.emission = Vec3::splat(20.0);
            lamp
        }],
    );
    scene.set_environment_map(sun_map(40.0));
    let s = settings(Vec3::new(0.0, 3.0, 3.0), Vec3::ZERO, 40.0, 8, 8, 4);
    let bvh = Arc::new(gasworks::cpu::SceneBvh::build(&scene));
    scene.environment_share =
        Some(gasworks::cpu::environment_share::probe(&scene, &bvh, &s.camera, s.max_depth).share);
    let scene = Arc::new(scene);
    let own = CpuBackend::new(&scene, &s).unwrap();
    assert_eq!(own.bvh_seconds_before_setup(), 0.0);
    assert_eq!(Arc::strong_count(&scene), 1, "new copies the scene");
    let given = CpuBackend::sharing(scene.clone(), &s, Some(bvh.clone())).unwrap();
    assert_eq!(Arc::strong_count(&scene), 2, "sharing holds it, not a copy");
    assert_eq!(
        Arc::strong_count(&bvh),
        2,
        "the backend holds the probe's BVH"
    );
    assert_eq!(
        given.bvh_seconds_before_setup(),
        bvh.stats().seconds,
        "its build is counted"
    );
    let samples = all_samples(&own, &s);
    assert!(samples.iter().any(|l| l.max_element() > 0.0));
    assert_eq!(all_samples(&given, &s), samples);

    // The floor alone: one group fewer.
    let other = Arc::new(gasworks::cpu::SceneBvh::build(&Scene::new(
        "floor",
        vec![floor(0)],
        vec![Material::diffuse("floor", Vec3::splat(0.6))],
    )));
    let refused = CpuBackend::sharing(scene.clone(), &s, Some(other.clone())).unwrap();
    assert_eq!(
        Arc::strong_count(&other),
        1,
        "another scene's BVH is dropped"
    );
    assert_eq!(refused.bvh_seconds_before_setup(), 0.0);
    assert_eq!(all_samples(&refused, &s), samples);
}

/// The map seen directly (camera rays that escape) is the map itself: with a map constant
/// over wide bands, a camera looking straight up sees the top band only (above the first
/// row's centre the rows clamp: no interpolation with the next band).
#[test]
fn the_map_seen_directly_is_its_texels() {
    let (w, h) = (8u32, 4u32);
    let texels = (0..w * h)
        .map(|k| Vec3::splat(1.0 + (k / w) as f32))
        .collect();
    let map = EnvironmentMap::from_texels("bands", w, h, texels, 0.0).unwrap();
    // A triangle far away below, so the scene is not empty.
    let mut scene = Scene::new(
        "bands",
        vec![quad(
            "far",
            Vec3::new(0.0, -100.0, 0.0),
            Vec3::X,
            Vec3::Z,
            0,
        )],
        vec![Material::diffuse("far", Vec3::ONE)],
    );
    scene.set_environment_map(Arc::new(map));
    // Within 17 degrees of straight up: all above the top row's centre (22.5 degrees).
    let s = settings(Vec3::ZERO, Vec3::new(0.0, 1.0, 0.05), 20.0, 8, 4, 3);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    for l in all_samples(&backend, &s) {
        assert_eq!(l, Vec3::ONE);
    }
}

/// Writes `texels` (rows top to bottom) as an EXR.
fn write_exr(path: &std::path::Path, w: u32, h: u32, texel: impl Fn(u32, u32) -> [f32; 3]) {
    image::Rgb32FImage::from_fn(w, h, |x, y| image::Rgb(texel(x, y)))
        .save(path)
        .unwrap();
}

/// A floor and a wall, as an OBJ file.
fn write_scene(dir: &std::path::Path) -> std::path::PathBuf {
    let obj = dir.join("scene.obj");
    std::fs::write(
        &obj,
        "v -5 0 -5\nv 5 0 -5\nv 5 0 5\nv -5 0 5\nv -1 0 -1\nv 1 0 -1\nv 1 2 -1\nv -1 2 -1\n\
         g ground\nf 1 4 3 2\ng wall\nf 5 6 7 8\n",
    )
    .unwrap();
    obj
}

#[test]
fn the_command_line_renders_a_map_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write_scene(dir.path());
    let sky = dir.path().join("sky.exr");
    write_exr(&sky, 16, 8, |x, y| {
        if y < 4 {
            [0.3, 0.5, 1.0 + x as f32 / 16.0]
        } else {
            [0.2, 0.1, 0.05]
        }
    });
    let obj = obj.to_str().unwrap();
    let sky_s = sky.to_str().unwrap();
    let out = dir.path().join("out.exr");
    let out_s = out.to_str().unwrap();
    let base = [
        "render", obj, "-o", out_s, "--width", "16", "--height", "16", "--spp", "4",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        gasworks(&args)
    };

    let ok = run(&["--env-map", sky_s, "--env-rotate", "-30"]);
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success(), "{stderr}");
    // No emitter, but the map lights the scene: no word of the default sky.
    assert!(!stderr.contains("uniform white environment"), "{stderr}");
    let key = std::fs::read(&out).unwrap();
    let key = String::from_utf8_lossy(&key);
    assert!(
        key.contains("environment map 16x8 content") && key.contains("rotate -30.0"),
        "the render key names the map"
    );

    let refused = |extra: &[&str], expected: &str| {
        let _ = std::fs::remove_file(&out);
        let o = run(extra);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} was accepted");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        assert!(!out.exists(), "{extra:?}: an image was written");
    };
    let missing = dir.path().join("missing.hdr");
    refused(&["--env-map", missing.to_str().unwrap()], "environment map");
    refused(&["--env-map", missing.to_str().unwrap()], "missing.hdr");
    let png = dir.path().join("sky.png");
    image::RgbImage::new(4, 2).save(&png).unwrap();
    refused(&["--env-map", png.to_str().unwrap()], "OpenEXR (.exr)");
    let garbage = dir.path().join("garbage.exr");
    std::fs::write(&garbage, b"not an image").unwrap();
    refused(&["--env-map", garbage.to_str().unwrap()], "garbage.exr");
    let negative = dir.path().join("negative.exr");
    write_exr(&negative, 4, 2, |x, y| {
        if (x, y) == (3, 1) {
            [0.5, -1.0, 0.5]
        } else {
            [1.0; 3]
        }
    });
    refused(
        &["--env-map", negative.to_str().unwrap()],
        "texel (3, 1) is (0.5, -1, 0.5)",
    );
    refused(
        &["--env-map", sky_s, "--env", "1,1,1"],
        "cannot be used with",
    );
    refused(&["--env-rotate", "10"], "--env-map");
    refused(&["--env-scale", "2"], "--env-map");
    refused(
        &["--env-map", sky_s, "--env-scale", "0"],
        "positive, finite",
    );
    let scaled = run(&["--env-map", sky_s, "--env-scale", "2.5"]);
    assert!(
        scaled.status.success(),
        "{}",
        String::from_utf8_lossy(&scaled.stderr)
    );
    // The output may not be the map it reads.
    let o = gasworks(&[
        "render",
        obj,
        "-o",
        sky_s,
        "--env-map",
        sky_s,
        "--width",
        "8",
        "--height",
        "8",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("is the environment map"),
        "{stderr}"
    );
    assert!(
        EnvironmentMap::open(&sky, 0.0).is_ok(),
        "the map was overwritten"
    );
}

/// `--env-share`: measured (`auto`, the default) or given, said with -v, named in the render's
/// key where the scene has area lights too, refused out of [0, 1] or without a map, and
/// without effect (said so) where the scene has no area lights.
#[test]
fn the_maps_share_of_the_light_samples_is_measured_or_given() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write_scene(dir.path());
    // The same floor and wall, and a lamp above them.
    let lit = dir.path().join("lit.obj");
    std::fs::write(
        dir.path().join("lit.mtl"),
        "newmtl lamp\nKd 0 0 0\nKe 20 20 20\n",
    )
    .unwrap();
    std::fs::write(
        &lit,
        format!(
            "{}mtllib lit.mtl\nv -0.5 3 -0.5\nv 0.5 3 -0.5\nv 0.5 3 0.5\nv -0.5 3 0.5\n\
             g lamp\nusemtl lamp\nf 9 10 11 12\n",
            std::fs::read_to_string(&plain).unwrap()
        ),
    )
    .unwrap();
    let sky = dir.path().join("sky.exr");
    write_exr(&sky, 16, 8, |x, y| {
        if (x, y) == (5, 2) {
            [500.0; 3]
        } else {
            [0.3, 0.5, 1.0]
        }
    });
    let out = dir.path().join("out.exr");
    let render = |scene: &std::path::Path, extra: &[&str]| {
        let _ = std::fs::remove_file(&out);
        let mut args = vec![
            "render",
            scene.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--width",
            "16",
            "--height",
            "16",
            "--spp",
            "2",
        ];
        args.extend_from_slice(extra);
        let o = gasworks(&args);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        let key = std::fs::read(&out)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        (o.status.success(), stderr, key)
    };
    let sky_s = sky.to_str().unwrap();

    let (ok, stderr, key) = render(&lit, &["--env-map", sky_s, "-v"]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("environment share: "), "{stderr}");
    assert!(stderr.contains("(auto: over 16384 probe paths"), "{stderr}");
    assert!(
        key.contains("; environment-share "),
        "the key names the share"
    );

    let (ok, stderr, key) = render(&lit, &["--env-map", sky_s, "--env-share", "0.25", "-v"]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("environment share: 0.25 of the light samples (--env-share)"),
        "{stderr}"
    );
    assert!(
        key.contains("; environment-share 0.25"),
        "the key names the share"
    );

    for bad in ["1.5", "-0.1", "half", "NaN"] {
        let (ok, stderr, _) = render(&lit, &["--env-map", sky_s, "--env-share", bad]);
        assert!(!ok, "--env-share {bad} was accepted");
        assert!(
            stderr.contains("expected auto or a probability from 0 to 1"),
            "{bad}: {stderr}"
        );
        assert!(!out.exists());
    }
    let (ok, stderr, _) = render(&lit, &["--env-share", "0.3"]);
    assert!(!ok && stderr.contains("--env-map"), "{stderr}");

    // Crops measure the whole frame, so their shares agree and they merge into the whole
    // render bit for bit; a crop rendered at another share is refused.
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let lit_s = lit.to_str().unwrap();
    let crop =
        |name: &str, extra: &[&str]| render_16x12_under_map(lit_s, &path(name), sky_s, extra);
    crop("whole.exr", &[]);
    crop("top.exr", &["--pixelbounds", "0,16,0,5"]);
    crop("bottom.exr", &["--pixelbounds", "0,16,5,12"]);
    crop(
        "bottom-other.exr",
        &["--pixelbounds", "0,16,5,12", "--env-share", "0.25"],
    );
    assert_crops_merge_into_the_whole(&path);
    let stderr = merge_refused(&path, "bottom-other.exr");
    assert!(stderr.contains("environment-share"), "{stderr}");

    // No area lights: every light sample goes to the map whatever is asked, and the key is
    // the one it was before the share existed.
    let (ok, stderr, key) = render(&plain, &["--env-map", sky_s, "--env-share", "0.3"]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("--env-share 0.3 has no effect: the scene has no area lights"),
        "{stderr}"
    );
    assert!(!key.contains("environment-share"), "{key}");
}

/// Crops of a render under a map merge into the whole render bit for bit, and crops of
/// renders under different maps (or rotations) are refused.
#[test]
fn crops_under_a_map_merge_and_crops_under_another_map_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write_scene(dir.path());
    let obj = obj.to_str().unwrap();
    let sky = dir.path().join("sky.exr");
    write_exr(&sky, 16, 8, |x, y| [1.0 + x as f32, 1.0 + y as f32, 2.0]);
    let other = dir.path().join("other.exr");
    write_exr(&other, 16, 8, |x, y| [1.0 + x as f32, 1.0 + y as f32, 2.5]);
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let render = |out: &str, map: &std::path::Path, rotate: &str, bounds: Option<&str>| {
        let mut extra = vec!["--env-rotate", rotate];
        extra.extend(bounds.map(|b| ["--pixelbounds", b]).into_iter().flatten());
        render_16x12_under_map(obj, &path(out), map.to_str().unwrap(), &extra);
    };
    render("whole.exr", &sky, "15", None);
    render("top.exr", &sky, "15", Some("0,16,0,5"));
    render("bottom.exr", &sky, "15", Some("0,16,5,12"));
    render("bottom-other.exr", &other, "15", Some("0,16,5,12"));
    render("bottom-turned.exr", &sky, "16", Some("0,16,5,12"));
    assert_crops_merge_into_the_whole(&path);
    for odd in ["bottom-other.exr", "bottom-turned.exr"] {
        merge_refused(&path, odd);
    }
}

/// Renders `obj` to `out` at 16x12 pixels and 4 spp under the environment map `map`, with
/// the `extra` arguments after those; the render must succeed.
fn render_16x12_under_map(obj: &str, out: &str, map: &str, extra: &[&str]) {
    let mut args = vec![
        "render",
        obj,
        "-o",
        out,
        "--width",
        "16",
        "--height",
        "12",
        "--spp",
        "4",
        "--env-map",
        map,
    ];
    args.extend_from_slice(extra);
    let o = gasworks(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `top.exr` and `bottom.exr` (paths by name from `path`) merge into `whole.exr` bit for bit.
fn assert_crops_merge_into_the_whole(path: &dyn Fn(&str) -> String) {
    let merged = path("merged.exr");
    let o = gasworks(&[
        "merge",
        &path("top.exr"),
        &path("bottom.exr"),
        "-o",
        &merged,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats = gasworks(&["image-stats", &path("whole.exr"), &merged]);
    let printed = String::from_utf8_lossy(&stats.stdout);
    assert!(
        printed.contains("bit-identical"),
        "{printed}{}",
        String::from_utf8_lossy(&stats.stderr)
    );
}

/// `top.exr` and the crop `odd` do not merge: the error message.
fn merge_refused(path: &dyn Fn(&str) -> String, odd: &str) -> String {
    let o = gasworks(&[
        "merge",
        &path("top.exr"),
        &path(odd),
        "-o",
        &path("mixed.exr"),
    ]);
    assert!(
        !o.status.success(),
        "{odd}: crops of two renders were merged"
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}
