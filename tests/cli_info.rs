//! `gasworks info` and `gasworks gen` as a user runs them: exit codes, messages, JSON.

mod cli_support;

use cli_support::{gasworks, gasworks_command};
use std::path::Path;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Renders the bundled Cornell box on the CPU into `out` (`size` is "WxH"), which must
/// succeed.
fn render_cornell(out: &Path, size: &str, spp: &str, extra: &[&str]) {
    let asset = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let (w, h) = size.split_once('x').unwrap();
    let mut args = vec![
        "render",
        asset.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--width",
        w,
        "--height",
        h,
        "--spp",
        spp,
        "-q",
    ];
    args.extend_from_slice(extra);
    let r = gasworks(&args);
    assert!(r.status.success(), "{}", text(&r.stderr));
}

#[test]
fn info_on_a_bad_file_fails_naming_the_file_and_line_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.obj");
    std::fs::write(&bad, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n").unwrap();
    let out = gasworks(&["info", bad.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:4:", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("out of range"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn info_on_a_missing_file_or_bad_mtl_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.obj");
    let out = gasworks(&["info", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nope.obj"));

    // A colour of two numbers would make tobj panic; the scan reports it instead.
    std::fs::write(dir.path().join("m.mtl"), "newmtl a\nKd 1 1\n").unwrap();
    let obj = dir.path().join("s.obj");
    std::fs::write(&obj, "mtllib m.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = gasworks(&["info", obj.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("m.mtl:2:"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn info_json_parses_and_matches_the_cornell_box() {
    let asset = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let out = gasworks(&["info", asset.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["groups"], 8);
    assert_eq!(v["triangles"], 32);
    assert_eq!(v["lights"]["triangles"], 2);
    assert_eq!(v["materials"].as_array().unwrap().len(), 4);
    assert_eq!(v["group_list"][5]["name"], "short_block");
    let buckets = v["histogram"].as_array().unwrap();
    let groups: u64 = buckets.iter().map(|b| b["groups"].as_u64().unwrap()).sum();
    assert_eq!(groups, 8);
    assert_eq!(v["bounds"]["max"][1].as_f64().unwrap() as f32, 548.8);
}

/// The content hash `info` prints for a scene file is the `content` item of the render key in
/// every image rendered from it, whatever the render's flags (--env, --two-sided-lights).
#[test]
fn info_gives_the_content_hash_that_renders_carry() {
    let dir = tempfile::tempdir().unwrap();
    let asset = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let out = gasworks(&["info", asset.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let content = v["content"].as_str().expect("a content hash").to_string();
    assert_eq!(content.len(), 16, "{content}");
    let text_out = gasworks(&["info", asset.to_str().unwrap()]);
    assert!(text(&text_out.stdout).contains(&format!("content     {content} ")));
    for flags in [&[][..], &["--env", "0.5,0.5,0.5", "--two-sided-lights"][..]] {
        let image = dir.path().join("c.exr");
        let mut args = vec![
            "render",
            asset.to_str().unwrap(),
            "-o",
            image.to_str().unwrap(),
            "--width",
            "8",
            "--height",
            "8",
            "--spp",
            "1",
            "--backend",
            "cpu",
            "-q",
        ];
        args.extend_from_slice(flags);
        let r = gasworks(&args);
        assert!(r.status.success(), "{}", text(&r.stderr));
        let read = gasworks::render::output::read_image(&image).unwrap();
        assert!(
            read.meta.render.contains(&format!("; content {content}; ")),
            "{flags:?}: {}",
            read.meta.render
        );
    }
}

#[test]
fn gen_writes_what_it_says_and_info_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("sponza");
    let out = gasworks(&[
        "gen",
        "sponza-like",
        "-o",
        out_dir.to_str().unwrap(),
        "--groups",
        "50",
        "--triangles",
        "8000",
        "--seed",
        "3",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("50 groups"), "{stdout}");
    let obj = out_dir.join("sponza_like.obj");
    assert!(obj.exists() && out_dir.join("sponza_like.mtl").exists());
    let info = gasworks(&["info", obj.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["groups"], 50);
    let triangles = v["triangles"].as_u64().unwrap();
    assert!(
        stdout.contains(&format!("{triangles} triangles")),
        "{stdout}"
    );
}

#[test]
fn gen_refuses_options_of_other_presets_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["gen", "cornell", "-o", d, "--shelves", "3"],
        vec!["gen", "toystore", "-o", d, "--groups", "3"],
        vec!["gen", "toystore", "-o", d, "--shelves", "0"],
        vec!["gen", "sponza-like", "-o", d, "--groups", "2"],
        // Sized by the group count before anything checked it: an overflow, then a panic.
        vec![
            "gen",
            "sponza-like",
            "-o",
            d,
            "--groups",
            "2305843009213693952",
        ],
        vec![
            "gen",
            "sponza-like",
            "-o",
            d,
            "--groups",
            "18446744073709551615",
        ],
    ] {
        let out = gasworks(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!text(&out.stderr).contains("panicked"));
    }
}

/// `gasworks info ... | head`: a reader that closes the pipe ends the command quietly (killed
/// by SIGPIPE, as `ls` is), never with a panic about a broken pipe.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_info_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let cornell = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/cornell/cornell.obj");
    for json in [false, true] {
        let mut args = vec!["info", cornell];
        if json {
            args.push("--json");
        }
        let mut child = gasworks_command()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before the scene is loaded and anything is printed.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
            "{:?}: {stderr}",
            out.status
        );
    }
}

/// `info` on a resume file says which render it belongs to and how far its pixels got,
/// rather than failing to read it as OBJ; on a damaged one it fails naming the file.
#[test]
fn info_on_a_resume_file_says_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.exr");
    let resume = dir.path().join("r.exr.gasworks-resume");
    // 4 of 8 samples per pixel: stopped by the time limit after the first pass.
    render_cornell(
        &out,
        "16x8",
        "8",
        &["--pass-spp", "4", "--time-limit", "0.001s"],
    );
    let info = gasworks(&["info", resume.to_str().unwrap()]);
    let stdout = text(&info.stdout);
    assert!(info.status.success(), "{}", text(&info.stderr));
    for says in [
        "resume file: ",
        "(written by gasworks ",
        "  scene cornell.obj\n",
        "  size 16x8\n",
        "pixels: 16x8 at (0, 0) of the frame, in passes of 4 samples per pixel",
        "samples per pixel (of 8): 4 in all 128 pixels",
        "to finish it: the command that wrote it, plus --resume ",
        "to see its image: gasworks preview ",
    ] {
        assert!(stdout.contains(says), "no {says:?} in:\n{stdout}");
    }
    let json = gasworks(&["info", resume.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(
        (v["spp"].as_u64(), v["spp_done"].as_u64()),
        (Some(8), Some(4))
    );
    assert_eq!(v["samples_per_pixel"][0]["pixels"], 128);

    // Cut short: refused, naming the file.
    let bytes = std::fs::read(&resume).unwrap();
    std::fs::write(&resume, &bytes[..bytes.len() - 9]).unwrap();
    let bad = gasworks(&["info", resume.to_str().unwrap()]);
    let stderr = text(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("r.exr.gasworks-resume"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `info` on an image gasworks wrote says where it lies in its frame and the render that made
/// it (its render key, item by item: what `merge` and `denoise` compare); on a PNG that no
/// gasworks wrote, or a WebP (written for viewing, carrying nothing), it fails naming the file.
#[test]
fn info_on_an_image_says_which_render_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let render = |out: &Path, extra: &[&str]| render_cornell(out, "32x16", "2", extra);
    let (whole, crop, png) = (
        dir.path().join("whole.exr"),
        dir.path().join("crop.exr"),
        dir.path().join("toned.png"),
    );
    render(&whole, &[]);
    render(&crop, &["--pixelbounds", "8,24,4,16"]);
    render(&png, &["--exposure", "1", "--seed", "7"]);
    let info = |path: &Path, json: bool| {
        let mut args = vec!["info", path.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        gasworks(&args)
    };
    for (path, says) in [
        (
            &whole,
            &[
                "(EXR, linear radiance)",
                "pixels: 32x16, the whole frame",
                "  scene cornell.obj\n",
                "  size 32x16\n",
                "  spp 2\n",
            ][..],
        ),
        (&crop, &["pixels: 16x12 at (8, 4) of a 32x16 frame"][..]),
        (
            &png,
            &["(PNG, tone-mapped sRGB)", "  seed 7\n", "  exposure 1\n"][..],
        ),
    ] {
        let r = info(path, false);
        let stdout = text(&r.stdout);
        assert!(r.status.success(), "{}", text(&r.stderr));
        for s in says {
            assert!(stdout.contains(s), "no {s:?} in:\n{stdout}");
        }
    }
    let r = info(&crop, true);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("one JSON object");
    assert_eq!(v["frame"], serde_json::json!([32, 16]));
    assert_eq!(v["window"], serde_json::json!([8, 4, 16, 12]));
    assert!(v["render"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("max-depth 8")));

    // A PNG no gasworks wrote (no render key), and a WebP: refused, naming the file.
    let plain = dir.path().join("plain.png");
    image::RgbImage::new(4, 4).save(&plain).unwrap();
    let webp = dir.path().join("view.webp");
    render(&webp, &[]);
    for bad in [&plain, &webp] {
        let r = info(bad, false);
        let stderr = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(bad.file_name().unwrap().to_str().unwrap()),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
