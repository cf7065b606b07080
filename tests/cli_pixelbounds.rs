//! Render-farm crops: `render --pixelbounds x0,x1,y0,y1` renders a window of the frame and
//! `merge` joins the crops. A sample's random numbers depend only on (pixel, sample, seed), so
//! the joined frame is bit-identical to a render of the whole frame, whatever each crop's
//! schedule and workers. Bad crops give errors that name the files and the pixels.

mod cli_support;

use cli_support::{cornell, gasworks_in};
use std::path::Path;

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = gasworks_in(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    stderr
}

fn fails(dir: &Path, args: &[&str]) -> String {
    let out = gasworks_in(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

const SIZE: [&str; 4] = ["--width", "37", "--height", "29"];

/// Renders the Cornell box (37x29, 3 spp, seed 11, on the CPU unless `extra` says otherwise)
/// with `extra` arguments.
fn render(dir: &Path, out: &str, extra: &[&str]) -> String {
    let scene = cornell();
    let mut args = vec!["render", scene.to_str().unwrap(), "-o", out];
    args.extend_from_slice(&SIZE);
    for (flag, value) in [("--spp", "3"), ("--backend", "cpu"), ("--seed", "11")] {
        if !extra.contains(&flag) {
            args.extend_from_slice(&[flag, value]);
        }
    }
    args.extend_from_slice(extra);
    ok(dir, &args)
}

fn exr_pixels(path: &Path) -> (u32, u32, Vec<u32>) {
    let img = image::open(path).unwrap().to_rgb32f();
    let bits = img.as_raw().iter().map(|f| f.to_bits()).collect();
    (img.width(), img.height(), bits)
}

/// Four crops of uneven sizes, each with another schedule and worker count, joined, are the
/// full render bit for bit: the pixels, and the whole file (same metadata too).
#[test]
fn crops_merged_are_the_full_render_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "full.exr", &[]);
    render(d, "full.png", &[]);
    let crops = [
        ("0,20,0,11", "regular", "cpu:1"),
        ("20,37,0,11", "adaptive", "cpu:3"),
        ("0,37,11,12", "sorted", "cpu:2"),
        ("0,37,12,29", "adaptive", "cpu:1"),
    ];
    let mut exrs = Vec::new();
    let mut pngs = Vec::new();
    for (i, (bounds, schedule, devices)) in crops.iter().enumerate() {
        for ext in ["exr", "png"] {
            let name = format!("crop{i}.{ext}");
            let status = render(
                d,
                &name,
                &[
                    "--pixelbounds",
                    bounds,
                    "--schedule",
                    schedule,
                    "--devices",
                    devices,
                    "--tiles",
                    "3",
                ],
            );
            assert!(
                status.contains(&format!("pixels {bounds} of a 37x29 frame")),
                "{status}"
            );
            if ext == "exr" {
                exrs.push(name);
            } else {
                pngs.push(name);
            }
        }
    }
    // A crop's PNG is the window's size.
    let crop = image::open(d.join("crop1.png")).unwrap();
    assert_eq!((crop.width(), crop.height()), (17, 11));

    // In any order.
    let mut args = vec!["merge", "-o", "merged.exr"];
    args.extend(exrs.iter().rev().map(String::as_str));
    let status = ok(d, &args);
    assert!(
        status.contains("merged.exr (37x29, joined from 4 crops)"),
        "{status}"
    );
    let (w, h, full) = exr_pixels(&d.join("full.exr"));
    assert_eq!((w, h), (37, 29));
    let (_, _, merged) = exr_pixels(&d.join("merged.exr"));
    assert_eq!(
        merged, full,
        "merged EXR pixels differ from the full render"
    );
    assert_eq!(
        std::fs::read(d.join("merged.exr")).unwrap(),
        std::fs::read(d.join("full.exr")).unwrap(),
        "the merged EXR file is the full render's file"
    );

    // PNG crops into a PNG, and EXR crops tone-mapped into a PNG, both the full PNG's pixels.
    let mut args = vec!["merge", "-o", "merged.png"];
    args.extend(pngs.iter().map(String::as_str));
    ok(d, &args);
    let mut args = vec!["merge", "-o", "from_exr.png"];
    args.extend(exrs.iter().map(String::as_str));
    ok(d, &args);
    let full_png = image::open(d.join("full.png")).unwrap().to_rgb8();
    for name in ["merged.png", "from_exr.png"] {
        assert_eq!(
            image::open(d.join(name)).unwrap().to_rgb8(),
            full_png,
            "{name}"
        );
    }
}

/// `--filter tent` and a thin lens (`--lens-radius`): crops of such a frame merge into the
/// whole render bit for bit (a tent's samples land beside their pixel, a lens's rays leave
/// from beside the eye, but they are still that pixel's), its key names the filter or the
/// lens, and a crop of the plain render (box filter, pinhole) refuses to join it.
#[test]
fn tent_filtered_and_thin_lens_crops_merge_into_their_frame_and_never_with_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "plain.exr", &[]);
    render(d, "plain-bottom.exr", &["--pixelbounds", "0,37,13,29"]);
    // The bundled Cornell box's look-at point is 800 units from its eye: the focus distance
    // when none is given. Its eye is at z = -800 looking along +z, so a --focus-on point at
    // z = 300 is 1100 away along the view.
    let looks: [(&str, &[&str], &str); 4] = [
        ("tent", &["--filter", "tent"], "filter tent"),
        (
            "lens",
            &["--lens-radius", "20", "--focus-distance", "1100"],
            "lens radius 20.0 focus 1100.0",
        ),
        (
            "lens-focus-on",
            &["--lens-radius", "20", "--focus-on", "100,-50,300"],
            "lens radius 20.0 focus 1100.0",
        ),
        (
            "lens-default-focus",
            &["--lens-radius", "20"],
            "lens radius 20.0 focus 800.0",
        ),
    ];
    for (name, flags, key) in looks {
        let out = |part: &str| format!("{name}-{part}.exr");
        render(d, &out("full"), flags);
        render(
            d,
            &out("top"),
            &[&["--pixelbounds", "0,37,0,13"][..], flags].concat(),
        );
        render(
            d,
            &out("bottom"),
            &[&["--pixelbounds", "0,37,13,29"][..], flags].concat(),
        );
        ok(
            d,
            &["merge", &out("top"), &out("bottom"), "-o", &out("merged")],
        );
        assert_eq!(
            exr_pixels(&d.join(out("merged"))),
            exr_pixels(&d.join(out("full"))),
            "{name}"
        );
        assert_ne!(
            exr_pixels(&d.join("plain.exr")),
            exr_pixels(&d.join(out("full"))),
            "{name}"
        );
        let e = fails(
            d,
            &[
                "merge",
                &out("top"),
                "plain-bottom.exr",
                "-o",
                &out("mixed"),
            ],
        );
        assert!(e.contains(key), "{name}: {e}");
    }
}

#[test]
fn overlapping_missing_and_foreign_crops_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "top.exr", &["--pixelbounds", "0,37,0,15"]);
    render(d, "bottom.exr", &["--pixelbounds", "0,37,15,29"]);
    render(d, "mid.exr", &["--pixelbounds", "5,9,10,20"]);
    render(
        d,
        "top16.exr",
        &["--pixelbounds", "0,37,0,15", "--spp", "16"],
    );
    render(d, "top.png", &["--pixelbounds", "0,37,0,15"]);

    let e = fails(
        d,
        &["merge", "top.exr", "mid.exr", "bottom.exr", "-o", "m.exr"],
    );
    assert!(
        e.contains("top.exr (x 0..37, y 0..15) and mid.exr (x 5..9, y 10..20) overlap in pixels x 5..9, y 10..15"),
        "{e}"
    );
    let e = fails(d, &["merge", "top.exr", "-o", "m.exr"]);
    assert!(
        e.contains("518 pixels of the 37x29 frame are in no crop, within pixels x 0..37, y 15..29: a crop is missing"),
        "{e}"
    );
    let e = fails(d, &["merge", "top16.exr", "bottom.exr", "-o", "m.exr"]);
    assert!(
        e.contains("bottom.exr: rendered with spp 3, but top16.exr with spp 16"),
        "{e}"
    );
    let e = fails(d, &["merge", "top.png", "bottom.exr", "-o", "m.png"]);
    assert!(e.contains("merge EXR crops or PNG crops, not both"), "{e}");
    let e = fails(d, &["merge", "nothere.exr", "-o", "m.exr"]);
    assert!(e.contains("nothere.exr"), "{e}");
    image::RgbImage::new(4, 4)
        .save(d.join("plain.png"))
        .unwrap();
    let e = fails(d, &["merge", "plain.png", "-o", "m.png"]);
    assert!(e.contains("plain.png: no crop window"), "{e}");
    assert!(!d.join("m.exr").exists() && !d.join("m.png").exists());
    // A crop alone is a whole frame only when it covers it.
    ok(d, &["merge", "top.exr", "bottom.exr", "-o", "m.exr"]);
}

#[test]
fn bad_pixelbounds_are_refused_before_rendering() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scene = cornell();
    let s = scene.to_str().unwrap();
    let e = fails(
        d,
        &[
            "render",
            s,
            "-o",
            "x.exr",
            "--width",
            "64",
            "--height",
            "64",
            "--pixelbounds",
            "0,65,0,10",
        ],
    );
    assert!(
        e.contains("--pixelbounds 0,65,0,10: the window reaches past the 64x64 image"),
        "{e}"
    );
    for bad in ["10,10,0,5", "0,5,0", "a,b,c,d", "-1,5,0,5"] {
        let out = gasworks_in(d, &["render", s, "-o", "x.exr", "--pixelbounds", bad]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {e}");
        assert!(e.contains("--pixelbounds"), "{bad}: {e}");
    }
    assert!(!d.join("x.exr").exists());
    // A WebP cannot say where a crop lies: refused before rendering, named.
    let e = fails(
        d,
        &[
            "render",
            s,
            "-o",
            "crop.webp",
            "--width",
            "64",
            "--height",
            "64",
            "--pixelbounds",
            "0,32,0,10",
        ],
    );
    assert!(
        e.contains("crop.webp: a crop (32x10 at 0,0 of a 64x64 frame) cannot be written as WebP"),
        "{e}"
    );
    assert!(!d.join("crop.webp").exists());
}

/// A whole frame written as WebP holds the PNG's pixels exactly, in fewer bytes (what the GPU
/// protocol commits), from `render` and from `merge` of EXR crops alike.
#[test]
fn a_webp_render_holds_the_pngs_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "full.png", &[]);
    render(d, "full.webp", &[]);
    render(d, "full.exr", &[]);
    render(d, "top.exr", &["--pixelbounds", "0,37,0,13"]);
    render(d, "bottom.exr", &["--pixelbounds", "0,37,13,29"]);
    ok(d, &["merge", "top.exr", "bottom.exr", "-o", "joined.webp"]);
    let png = image::open(d.join("full.png")).unwrap().to_rgb8();
    for webp in ["full.webp", "joined.webp"] {
        let got = image::open(d.join(webp)).unwrap().to_rgb8();
        assert_eq!(got.dimensions(), (37, 29), "{webp}");
        assert!(
            got.as_raw() == png.as_raw(),
            "{webp}: pixels differ from the PNG's"
        );
    }
}

/// The cost map and the statistics cover the window: a 16x8 crop at cost-map scale 0.5 has
/// an 8x4 cost map, and its tiles cover exactly the window's 128 pixels.
#[test]
fn the_cost_map_and_tiles_cover_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(
        d,
        "c.exr",
        &[
            "--pixelbounds",
            "9,25,13,21",
            "--costmap-scale",
            "0.5",
            "--stats",
            "s.csv",
        ],
    );
    let map = std::fs::read_to_string(d.join("s.costmap.csv")).unwrap();
    assert_eq!(map.lines().count(), 1 + 8 * 4);
    assert!(map.lines().any(|l| l.starts_with("7,3,")));
    let tiles = std::fs::read_to_string(d.join("s.tiles.csv")).unwrap();
    let mut pixels = 0;
    for l in tiles.lines().skip(1) {
        let f: Vec<u32> = l
            .split(',')
            .skip(2)
            .take(4)
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(f[0] + f[2] <= 16 && f[1] + f[3] <= 8, "{l}");
        pixels += f[2] * f[3];
    }
    assert_eq!(pixels, 16 * 8);
    ok(
        d,
        &["schedule-sim", "s.csv", "--workers", "1,2", "--seeds", "2"],
    );
}

/// The same on the GPU: crops rendered by the OptiX backend join into its full render.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_crops_merged_are_the_full_gpu_render_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "full.exr", &["--backend", "optix"]);
    render(
        d,
        "a.exr",
        &["--backend", "optix", "--pixelbounds", "0,37,0,10"],
    );
    render(
        d,
        "b.exr",
        &["--backend", "optix", "--pixelbounds", "0,12,10,29"],
    );
    render(
        d,
        "c.exr",
        &["--backend", "optix", "--pixelbounds", "12,37,10,29"],
    );
    ok(d, &["merge", "a.exr", "b.exr", "c.exr", "-o", "m.exr"]);
    assert_eq!(
        exr_pixels(&d.join("m.exr")),
        exr_pixels(&d.join("full.exr"))
    );
}

/// `--exposure 1` and `--tonemap aces` on a PNG: the render of the whole frame and the merge
/// of its EXR crops with the same options are the same file, byte for byte, and not the
/// plain one (the exposure's brighter); PNG crops of another look do not merge with it; an
/// EXR output refuses either option (it holds radiance as rendered), and so do PNG crops
/// (tone-mapped already).
#[test]
fn exposure_and_tone_curve_apply_to_pngs_in_render_and_merge_alike() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    render(d, "plain.png", &[]);
    render(d, "top.exr", &["--pixelbounds", "0,37,0,10"]);
    render(d, "bottom.exr", &["--pixelbounds", "0,37,10,29"]);
    render(d, "bottom.png", &["--pixelbounds", "0,37,10,29"]);
    let bytes = |name: &str| std::fs::read(d.join(name)).unwrap();
    let sum = |name: &str| -> u64 {
        image::open(d.join(name))
            .unwrap()
            .to_rgb8()
            .as_raw()
            .iter()
            .map(|&v| u64::from(v))
            .sum()
    };
    let scene = cornell();
    for (look, item) in [
        (&["--exposure", "1"][..], "exposure 1"),
        (&["--tonemap", "aces"][..], "tonemap aces"),
        (
            &["--exposure", "-1", "--tonemap", "aces"][..],
            "exposure -1; tonemap aces",
        ),
    ] {
        fn with<'a>(args: &[&'a str], look: &[&'a str]) -> Vec<&'a str> {
            [args, look].concat()
        }
        render(d, "look.png", look);
        ok(
            d,
            &with(
                &["merge", "top.exr", "bottom.exr", "-o", "merged.png"],
                look,
            ),
        );
        assert!(
            bytes("merged.png") == bytes("look.png"),
            "{item}: merged != rendered"
        );
        assert!(bytes("plain.png") != bytes("look.png"), "{item}");
        if item == "exposure 1" {
            assert!(sum("look.png") > sum("plain.png"));
        }

        render(d, "top.png", &with(&["--pixelbounds", "0,37,0,10"], look));
        // (The error names the first item that differs.)
        let e = fails(d, &["merge", "top.png", "bottom.png", "-o", "mixed.png"]);
        assert!(e.contains(item.split("; ").next().unwrap()), "{e}");
        let e = fails(
            d,
            &with(&["merge", "top.png", "top.png", "-o", "m.png"], look),
        );
        assert!(e.contains("tone-mapped already"), "{e}");

        let e = fails(
            d,
            &with(&["render", scene.to_str().unwrap(), "-o", "x.exr"], look),
        );
        assert!(
            e.contains("x.exr holds linear radiance as rendered"),
            "{item}: {e}"
        );
        assert!(!d.join("x.exr").exists());
        let e = fails(
            d,
            &with(&["merge", "top.exr", "bottom.exr", "-o", "m.exr"], look),
        );
        assert!(
            e.contains("m.exr holds linear radiance as rendered"),
            "{item}: {e}"
        );
    }
}
