//! What `gasworks render` prints, as a user sees it: a few status lines by default, only
//! warnings with `--quiet`, the schedule's tables with `-v` or `--stats`; and which camera it
//! uses.

mod cli_support;

use cli_support::{cornell, gasworks_in};
use std::path::Path;
use std::process::Output;

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A small render of `scene` into `dir/out.png` plus `extra`, whatever its outcome.
fn try_render(dir: &Path, scene: &Path, extra: &[&str]) -> (Output, Vec<String>) {
    let mut args = vec![
        "render",
        scene.to_str().unwrap(),
        "-o",
        "out.png",
        "--width",
        "24",
        "--height",
        "16",
        "--spp",
        "2",
        "--backend",
        "cpu",
    ];
    args.extend_from_slice(extra);
    let out = gasworks_in(dir, &args);
    let lines = stderr_lines(&out);
    (out, lines)
}

/// [`try_render`] that must succeed.
fn render(dir: &Path, scene: &Path, extra: &[&str]) -> (Output, Vec<String>) {
    let (out, lines) = try_render(dir, scene, extra);
    assert!(out.status.success(), "{extra:?}: {lines:#?}");
    (out, lines)
}

/// A plain render prints four lines, each starting with what it is about: the scene, the
/// backend, the timings and the output. No table, no histogram, nothing on stdout.
#[test]
fn a_plain_render_prints_scene_backend_timings_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let (out, lines) = render(dir.path(), &cornell(), &[]);
    assert!(out.stdout.is_empty());
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let starts = ["scene: ", "backend: ", "time: ", "output: "];
    for (line, start) in lines.iter().zip(starts) {
        assert!(
            line.starts_with(start),
            "{line:?} should start with {start:?}"
        );
    }
    assert!(
        lines[0].ends_with("cornell.obj: 8 groups, 32 triangles"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("backend: cpu"), "{}", lines[1]);
    // The figures scripts/gpu-session.sh (render_one) and scripts/peer_bench.py read:
    // "time: load L s, build B s, render R s, S M samples/s, X M rays/s (N rays)".
    let time = &lines[2];
    let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.');
    let figures: Vec<&str> = time
        .strip_prefix("time: load ")
        .and_then(|r| r.split_once(" s, build "))
        .and_then(|(load, r)| {
            let (build, r) = r.split_once(" s, render ")?;
            let (render, r) = r.split_once(" s, ")?;
            let (rate, r) = r.split_once(" M samples/s, ")?;
            let (ray_rate, r) = r.split_once(" M rays/s (")?;
            let rays = r.strip_suffix(" rays)")?;
            Some(vec![load, build, render, rate, ray_rate, rays])
        })
        .unwrap_or_default();
    assert!(
        figures.len() == 6 && figures.iter().all(|f| number(f)),
        "{time}"
    );
    // 24 x 16 pixels at 2 spp: a camera ray each at least.
    assert!(figures[5].parse::<u64>().unwrap() >= 24 * 16 * 2, "{time}");
    assert_eq!(lines[3], "output: out.png (24x16, 2 spp)");
    assert!(dir.path().join("out.png").exists());
}

/// Where stderr is a pipe (as in a batch job's log) `--progress lines` prints a line at the
/// first tile and each 10% of the tiles of the whole render, over every pass, before the
/// summary; `--quiet` wins over it.
#[test]
fn progress_lines_count_the_tiles_of_every_pass() {
    let dir = tempfile::tempdir().unwrap();
    // 16 tiles a pass, 2 passes.
    let extra = ["--progress", "lines", "--tiles", "16", "--pass-spp", "1"];
    let (_, lines) = render(dir.path(), &cornell(), &extra);
    let progress: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    let counts: Vec<&str> = progress
        .iter()
        .map(|l| l.split(", ").nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        counts,
        [
            "1 of 32 tiles",
            "4 of 32 tiles",
            "7 of 32 tiles",
            "10 of 32 tiles",
            "13 of 32 tiles",
            "16 of 32 tiles",
            "20 of 32 tiles",
            "23 of 32 tiles",
            "26 of 32 tiles",
            "29 of 32 tiles",
            "32 of 32 tiles"
        ],
        "{lines:#?}"
    );
    assert!(progress[0].starts_with("progress: 3% (pass 1/2), "));
    assert!(progress[10].starts_with("progress: 100% (pass 2/2), "));
    // Then the summary, as without progress lines.
    let rest: Vec<&String> = lines[..2].iter().chain(&lines[13..]).collect();
    let starts = ["scene: ", "backend: ", "time: ", "output: "];
    assert_eq!(rest.len(), 4, "{lines:#?}");
    for (line, start) in rest.iter().zip(starts) {
        assert!(line.starts_with(start), "{lines:#?}");
    }
    let mut quiet = extra.to_vec();
    quiet.push("-q");
    let (_, lines) = render(dir.path(), &cornell(), &quiet);
    assert!(lines.is_empty(), "{lines:#?}");
}

#[test]
fn quiet_prints_nothing_but_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let (out, lines) = render(dir.path(), &cornell(), &["--quiet"]);
    assert!(lines.is_empty(), "{lines:#?}");
    assert!(out.stdout.is_empty());

    // A scene whose MTL file is missing: the warning still comes, and nothing else.
    let obj = dir.path().join("warn.obj");
    std::fs::write(
        &obj,
        "mtllib missing.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
    )
    .unwrap();
    let (_, lines) = render(dir.path(), &obj, &["-q"]);
    assert!(!lines.is_empty(), "the missing MTL file is a warning");
    for l in &lines {
        assert!(l.starts_with("warning: "), "{lines:#?}");
    }
    assert!(
        lines.iter().any(|l| l.contains("missing.mtl")),
        "{lines:#?}"
    );
    // The same warning in a plain render, before the status lines' output line.
    let (_, plain) = render(dir.path(), &obj, &[]);
    assert!(
        plain.iter().any(|l| l.contains("missing.mtl")),
        "{plain:#?}"
    );
}

#[test]
fn bad_gpu_options_are_refused_even_for_the_cpu_backend() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let out = gasworks_in(
        dir.path(),
        &[
            "render",
            scene.to_str().unwrap(),
            "-o",
            "x.png",
            "--backend",
            "cpu",
            "--optix-abi",
            "90",
        ],
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("90"), "{e}");
    assert!(!dir.path().join("x.png").exists());
}

#[test]
fn quiet_and_verbose_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = gasworks_in(dir.path(), &["render", "x.obj", "-o", "x.png", "-q", "-v"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}

/// `-v` adds the camera, the schedule, the per-worker table and the 20-row error histogram;
/// `--stats` adds the tables too (and says where the files went), `-q --stats` only writes.
#[test]
fn verbose_and_stats_add_the_schedule_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (_, plain) = render(dir.path(), &cornell(), &["--devices", "cpu:2"]);
    let (_, verbose) = render(dir.path(), &cornell(), &["--devices", "cpu:2", "-v"]);
    let has = |lines: &[String], s: &str| lines.iter().any(|l| l.contains(s));
    for s in [
        "worker cpu#0",
        "worker cpu#1",
        "error histogram",
        "schedule: ",
    ] {
        assert!(!has(&plain, s), "{s} in a plain render: {plain:#?}");
        assert!(has(&verbose, s), "{s} missing with -v: {verbose:#?}");
    }
    let histogram_rows = verbose
        .iter()
        .filter(|l| l.contains('%') && l.contains(".."))
        .count();
    assert!(histogram_rows >= 18, "{verbose:#?}");
    assert!(
        has(&verbose, "camera: --eye 278,273,-800 --look-at 278,273,0 --up 0,1,0 --fov 39.3 (the scene's camera hint)"),
        "{verbose:#?}"
    );

    let (_, stats) = render(dir.path(), &cornell(), &["--stats", "s.csv"]);
    assert!(
        has(&stats, "error histogram") && has(&stats, "worker cpu#0"),
        "{stats:#?}"
    );
    assert!(
        has(&stats, "statistics: s.csv, s.tiles.csv, s.costmap.csv"),
        "{stats:#?}"
    );
    assert!(!has(&stats, "camera: "), "the camera is for -v: {stats:#?}");
    std::fs::remove_file(dir.path().join("s.tiles.csv")).unwrap();
    let (_, quiet) = render(dir.path(), &cornell(), &["--stats", "s.csv", "-q"]);
    assert!(quiet.is_empty(), "{quiet:#?}");
    assert!(dir.path().join("s.tiles.csv").exists());
}

/// Without a hint the default camera looks along -Z and frames the scene; the command line
/// overrides a hint value by value.
#[test]
fn the_camera_comes_from_the_hint_the_command_line_or_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v -1 0 0\nv 1 0 0\nv 0 2 0\nf 1 2 3\n").unwrap();
    let (_, lines) = render(dir.path(), &obj, &["-v"]);
    let camera = lines.iter().find(|l| l.starts_with("camera: ")).unwrap();
    // Centre (0, 1, 0); the bounding sphere's radius is sqrt(2); 16 rows are the narrow side.
    assert!(
        camera.contains("--look-at 0,1,0 --up 0,1,0 --fov 39.3"),
        "{camera}"
    );
    assert!(camera.contains("--eye 0,1,"), "{camera}");
    assert!(
        camera.ends_with("(default: framing the scene's bounding sphere, looking along -Z)"),
        "{camera}"
    );
    let eye_z: f32 = camera
        .split("--eye 0,1,")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|z| z.parse().ok())
        .unwrap();
    assert!(
        eye_z > 2.0,
        "in front of the triangle on +Z, looking along -Z: {camera}"
    );

    let (_, lines) = render(dir.path(), &cornell(), &["-v", "--fov", "50"]);
    let camera = lines.iter().find(|l| l.starts_with("camera: ")).unwrap();
    assert!(
        camera.contains("--eye 278,273,-800") && camera.contains("--fov 50"),
        "{camera}"
    );
    assert!(camera.ends_with("(the command line over the scene's camera hint)"));
}

/// `--stats` files are checked before the render, as the image is: one naming the scene, the
/// image or a texture is refused (it replaced the scene with a CSV before), and so is one in a
/// missing folder (it failed after the render). Nothing is written either way.
#[test]
fn stats_files_that_would_overwrite_inputs_or_cannot_be_written_are_refused_first() {
    let refused = |dir: &Path, scene: &Path, stats: &str| {
        let (out, lines) = try_render(dir, scene, &["--stats", stats]);
        assert_eq!(out.status.code(), Some(1), "{lines:?}");
        lines
    };
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("s.obj");
    std::fs::copy(cornell(), &scene).unwrap();
    std::fs::copy(
        cornell().with_extension("mtl"),
        dir.path().join("cornell.mtl"),
    )
    .unwrap();
    let before = std::fs::read(&scene).unwrap();
    for (stats, expected) in [
        ("s.obj", "--stats s.obj is the scene"),
        ("out.png", "--stats out.png is the output image"),
        (
            "gone/s.csv",
            "--stats gone/s.csv: the folder gone does not exist",
        ),
    ] {
        let lines = refused(dir.path(), &scene, stats);
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "{stats}: {lines:?}"
        );
        assert!(!dir.path().join("out.png").exists(), "{stats}");
    }
    assert_eq!(std::fs::read(&scene).unwrap(), before);

    // A texture of the scene, known once it is loaded.
    let textured = dir.path().join("t.obj");
    std::fs::write(
        &textured,
        "mtllib t.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 0 1\nusemtl t\nf 1/1 2/2 3/3\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("t.mtl"),
        "newmtl t\nKd 1 1 1\nmap_Kd wood.png\n",
    )
    .unwrap();
    image::RgbImage::new(2, 2)
        .save(dir.path().join("wood.png"))
        .unwrap();
    let wood = std::fs::read(dir.path().join("wood.png")).unwrap();
    // Any existing file that is not one --stats writes: the texture, the MTL library.
    for other in ["wood.png", "t.mtl"] {
        let lines = refused(dir.path(), &textured, other);
        assert!(
            lines.iter().any(|l| l.contains(&format!(
                "--stats {other} exists and is not a file --stats writes"
            ))),
            "{lines:?}"
        );
    }
    // The image over a texture: known once the scene is loaded.
    let out = gasworks_in(
        dir.path(),
        &[
            "render",
            textured.to_str().unwrap(),
            "-o",
            "wood.png",
            "--width",
            "8",
            "--height",
            "8",
            "--spp",
            "1",
            "--backend",
            "cpu",
        ],
    );
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(1), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("-o wood.png is a texture of the scene")),
        "{lines:?}"
    );
    assert_eq!(std::fs::read(dir.path().join("wood.png")).unwrap(), wood);
}
