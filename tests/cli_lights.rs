//! One-sided lights on the command line: `render --two-sided-lights`, the light facing report
//! of `info` (text and JSON), and `image-stats`.

mod cli_support;

use cli_support::{cornell, gasworks};
use std::path::{Path, PathBuf};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The bundled Cornell box with its light's two faces wound the other way (facing up, at the
/// ceiling 0.5 mm above it), written next to a copy of its MTL.
fn flipped_cornell(dir: &Path) -> PathBuf {
    let src = std::fs::read_to_string(cornell()).unwrap();
    let flipped = src
        .replace("f 61 62 63", "f 61 63 62")
        .replace("f 61 63 64", "f 61 64 63");
    assert_ne!(
        flipped, src,
        "the light's faces are where the test expects them"
    );
    let obj = dir.join("flipped.obj");
    std::fs::write(&obj, flipped).unwrap();
    std::fs::copy(cornell().with_extension("mtl"), dir.join("cornell.mtl")).unwrap();
    obj
}

/// A floor and a lamp above it wound up, towards nothing.
fn lamp_over_nothing(dir: &Path) -> PathBuf {
    std::fs::write(
        dir.join("l.mtl"),
        "newmtl white\nKd 0.5 0.5 0.5\nnewmtl lamp\nKd 0 0 0\nKe 5 5 5\n",
    )
    .unwrap();
    let obj = dir.join("lamp.obj");
    std::fs::write(
        &obj,
        "mtllib l.mtl\ng floor\nv -5 0 -5\nv -5 0 5\nv 5 0 5\nv 5 0 -5\nusemtl white\nf 1 2 3\nf 1 3 4\n\
         g lamp\nv -1 2 -1\nv -1 2 1\nv 1 2 1\nv 1 2 -1\nusemtl lamp\nf 5 6 7\nf 5 7 8\n",
    )
    .unwrap();
    obj
}

#[test]
fn info_reports_which_way_the_lights_face() {
    let out = gasworks(&["info", cornell().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "front faces (the emitting side, by dominant axis): +X 0, -X 0, +Y 0, -Y 2, +Z 0, -Z 0"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("2 face the scene"), "{stdout}");
    assert!(!stdout.contains("warning:"), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let flipped = flipped_cornell(dir.path());
    let out = gasworks(&["info", flipped.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("+Y 2, -Y 0"), "{stdout}");
    assert!(
        stdout.contains("warning: light 'light' (material 'light'): all 2 of its emissive triangles (front faces +Y) face only surfaces within"),
        "{stdout}"
    );
    let out = gasworks(&["info", flipped.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["lights"]["facing"], serde_json::json!([0, 0, 2, 0, 0, 0]));
    assert_eq!(v["lights"]["lights"][0]["toward_gap_only"], 2);
    assert_eq!(v["lights"]["warnings"].as_array().unwrap().len(), 1);

    let lamp = lamp_over_nothing(dir.path());
    let out = gasworks(&["info", lamp.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["lights"]["lights"][0]["away_from_everything"], 2);
    let warning = v["lights"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("light faces away from every other surface"),
        "{warning}"
    );
    assert!(warning.contains("--two-sided-lights"), "{warning}");
}

#[test]
fn render_warns_about_a_light_facing_away_and_two_sided_lights_light_it() {
    let dir = tempfile::tempdir().unwrap();
    let lamp = lamp_over_nothing(dir.path());
    let camera = ["--eye", "0,1,-6", "--look-at", "0,0,0"];
    let render = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "render",
            lamp.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--width",
            "16",
            "--height",
            "12",
            "--spp",
            "4",
            "--backend",
            "cpu",
            "--quiet",
        ];
        args.extend_from_slice(&camera);
        args.extend_from_slice(extra);
        gasworks(&args)
    };
    let one = dir.path().join("one.exr");
    let two = dir.path().join("two.exr");
    let out = render(&one, &[]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("light faces away from every other surface"),
        "{stderr}"
    );
    let out = render(&two, &["--two-sided-lights"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("faces away"), "{stderr}");

    // One-sided, the floor is black (only the lamp's front, facing up, emits); two-sided it
    // is lit.
    let out = gasworks(&[
        "image-stats",
        one.to_str().unwrap(),
        two.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    assert_eq!(v[0]["mean_luminance"], 0.0);
    assert!(v[1]["mean_luminance"].as_f64().unwrap() > 0.01, "{v}");
    assert_eq!(v[0]["width"], 16);
    assert_eq!(v[0]["mask_margin"], serde_json::Value::Null);
}

#[test]
fn image_stats_compares_one_and_two_sided_renders_of_the_cornell_box() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let mut paths = Vec::new();
    for (name, extra) in [("two.exr", Some("--two-sided-lights")), ("one.exr", None)] {
        let path = dir.path().join(name);
        let mut args = vec![
            "render",
            scene.to_str().unwrap(),
            "-o",
            path.to_str().unwrap(),
            "--width",
            "48",
            "--height",
            "48",
            "--spp",
            "16",
            "--backend",
            "cpu",
            "--quiet",
        ];
        args.extend(extra);
        let out = gasworks(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        paths.push(path);
    }
    let overlay = dir.path().join("overlay");
    let out = gasworks(&[
        "image-stats",
        paths[0].to_str().unwrap(),
        paths[1].to_str().unwrap(),
        "--mask-scene",
        scene.to_str().unwrap(),
        "--overlay",
        overlay.to_str().unwrap(),
        "--list",
        "3",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("image       "), "{stdout}");
    assert!(
        stdout.contains("masked: light sources, background and 2 px around them"),
        "{stdout}"
    );
    assert!(stdout.contains("vs first    mean luminance -"), "{stdout}");
    assert!(
        stdout.contains("pixels differ from the first image"),
        "{stdout}"
    );
    assert!(overlay.join("one.fireflies.png").exists());
    assert!(overlay.join("two.fireflies.png").exists());

    let out = gasworks(&[
        "image-stats",
        paths[0].to_str().unwrap(),
        paths[1].to_str().unwrap(),
        "--mask-scene",
        scene.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    let change = v[1]["mean_luminance_change_percent"].as_f64().unwrap();
    // The gap between light and ceiling no longer glows: about -2% (noisy at 16 spp).
    assert!((-5.0..-0.5).contains(&change), "{change}");
    assert_eq!(v[0]["pixels_differing_from_first"], serde_json::Value::Null);
    assert!(v[1]["pixels_differing_from_first"].as_u64().unwrap() > 0);
    let max = v[1]["max_abs_difference_from_first"].as_f64().unwrap();
    let rms = v[1]["rms_difference_from_first"].as_f64().unwrap();
    // The RMS of the differences is positive and at most the largest of them.
    assert!(max > 0.0 && rms > 0.0 && rms <= max, "{rms} {max}");
    assert_eq!(v[0]["rms_difference_from_first"], serde_json::Value::Null);
    let masked = v[0]["masked"].as_u64().unwrap();
    assert!(masked > 0 && masked < 48 * 48 / 2, "{masked}");
    assert_eq!(
        v[0]["tested"].as_u64().unwrap() + masked,
        48 * 48,
        "every pixel is tested or masked"
    );
}

#[test]
fn image_stats_says_when_two_renders_are_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let mut paths = Vec::new();
    for name in ["a.exr", "b.exr"] {
        let path = dir.path().join(name);
        let out = gasworks(&[
            "render",
            scene.to_str().unwrap(),
            "-o",
            path.to_str().unwrap(),
            "--width",
            "24",
            "--height",
            "16",
            "--spp",
            "4",
            "--backend",
            "cpu",
            "--quiet",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        paths.push(path);
    }
    let out = gasworks(&[
        "image-stats",
        paths[0].to_str().unwrap(),
        paths[1].to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("pixels bit-identical to the first image"),
        "{stdout}"
    );
    assert!(
        stdout.contains("vs first    mean luminance +0.000%"),
        "{stdout}"
    );
}

/// A crop (`render --pixelbounds`) is measured over its own pixels: the rows it did not
/// render are not counted as black, and its mask is the frame's, cut to its window (so a crop
/// and the whole frame mask the same pixels).
#[test]
fn image_stats_measures_a_crop_over_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let render = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec![
            "render",
            scene.to_str().unwrap(),
            "-o",
            path.to_str().unwrap(),
            "--width",
            "32",
            "--height",
            "24",
            "--spp",
            "4",
            "--backend",
            "cpu",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let out = gasworks(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        path
    };
    let whole = render("whole.exr", &[]);
    let top = render("top.exr", &["--pixelbounds", "0,32,0,12"]);
    let bottom = render("bottom.exr", &["--pixelbounds", "0,32,12,24"]);
    let stats = |path: &Path| -> serde_json::Value {
        let out = gasworks(&[
            "image-stats",
            path.to_str().unwrap(),
            "--json",
            "--mask-scene",
            scene.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (w, t, b) = (stats(&whole), stats(&top), stats(&bottom));
    assert_eq!((&t[0]["width"], &t[0]["height"]), (&32.into(), &12.into()));
    assert_eq!(b[0]["crop"], serde_json::json!([0, 12, 32, 24]));
    assert_eq!(w[0]["crop"], serde_json::Value::Null);
    let count = |v: &serde_json::Value, key: &str| v[0][key].as_u64().unwrap();
    for key in ["tested", "masked"] {
        assert_eq!(count(&t, key) + count(&b, key), count(&w, key), "{key}");
    }
    // The halves' means average to the whole's (equal halves, the same pixels bit for bit).
    let mean = |v: &serde_json::Value| v[0]["mean_luminance"].as_f64().unwrap();
    assert!(
        ((mean(&t) + mean(&b)) / 2.0 - mean(&w)).abs() < 1e-6 * mean(&w),
        "{} {} {}",
        mean(&t),
        mean(&b),
        mean(&w)
    );
}

#[test]
fn image_stats_refuses_what_it_cannot_measure() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("a.png");
    std::fs::write(&png, b"not even a png").unwrap();
    for (args, needle) in [
        (
            vec!["image-stats", png.to_str().unwrap()],
            "linear radiance",
        ),
        (vec!["image-stats", "/nonexistent/x.exr"], "x.exr"),
        (
            vec!["image-stats", "/nonexistent/x.exr", "--window", "4"],
            "--window must be an odd number",
        ),
        (
            vec!["image-stats", "/nonexistent/x.exr", "--ratio", "0"],
            "--ratio must be a positive number",
        ),
    ] {
        let out = gasworks(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// The RMS difference from the first image is the root mean square of the channel
/// differences, exactly: two 2 x 1 images whose channels differ by 0, 1, 0, 0, 2, 0.
#[test]
fn image_stats_gives_the_rms_difference_from_the_first_image() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pixels: [[f32; 3]; 2]| {
        let mut img = image::Rgb32FImage::new(2, 1);
        for (x, p) in pixels.into_iter().enumerate() {
            img.put_pixel(x as u32, 0, image::Rgb(p));
        }
        let path = dir.path().join(name);
        img.save(&path).unwrap();
        path
    };
    let a = write("a.exr", [[0.5, 1.0, 2.0], [1.0, 1.0, 1.0]]);
    let b = write("b.exr", [[0.5, 2.0, 2.0], [1.0, 3.0, 1.0]]);
    let out = gasworks(&[
        "image-stats",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    let rms = v[1]["rms_difference_from_first"].as_f64().unwrap();
    let expected = (5.0f64 / 6.0).sqrt();
    assert!((rms - expected).abs() < 1e-12, "{rms} vs {expected}");
    let out = gasworks(&["image-stats", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains(&format!("RMS difference {expected:.6}")),
        "{}",
        text(&out.stdout)
    );
}
