//! `gasworks render` refuses input it cannot render with a clear message and exit code 1,
//! before loading or rendering anything: image sizes past the 32-bit pixel index, sample counts
//! past what the film can count.

mod cli_support;

use cli_support::gasworks_command;
use std::process::Output;

/// Renders a one-triangle scene on the CPU with `args` added: the output, and whether an image
/// was written.
fn render_triangle(args: &[&str]) -> (Output, bool) {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = dir.path().join("out.png");
    let mut all = vec![
        "render",
        obj.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--quiet",
    ];
    all.extend_from_slice(args);
    let output = gasworks_command().args(&all).output().unwrap();
    (output, out.exists())
}

fn render(args: &[&str]) -> Output {
    let (output, written) = render_triangle(args);
    assert!(!written, "nothing is written for refused input");
    output
}

/// A render that must succeed and write its image.
fn renders(args: &[&str]) {
    let (out, written) = render_triangle(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(written, "{args:?}: no image");
}

fn refused(args: &[&str], expected: &str) {
    let out = render(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

#[test]
fn image_size_and_spp_are_capped_with_a_clear_error() {
    refused(
        &["--width", "32769", "--height", "16"],
        "each side may be at most 32768",
    );
    refused(
        &["--width", "16", "--height", "4294967295"],
        "each side may be at most 32768",
    );
    refused(&["--width", "0", "--height", "16"], "at least 1x1 pixels");
    refused(&["--spp", "0"], "samples per pixel");
    refused(&["--spp", "16777217"], "from 1 to 16777216");
}

#[test]
fn a_small_render_within_the_limits_works() {
    renders(&["--width", "8", "--height", "4", "--spp", "1"]);
}

/// A folder given as the scene, or an output in a folder that does not exist: one clear line
/// each (the cause is not repeated under "caused by"), exit code 1, nothing written.
#[test]
fn a_folder_as_scene_and_a_missing_output_folder_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = gasworks_command().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        stderr
    };
    let folder = dir.path().to_str().unwrap();
    let png = dir.path().join("out.png");
    let e = run(&[
        "render",
        folder,
        "-o",
        png.to_str().unwrap(),
        "--backend",
        "cpu",
        "-q",
    ]);
    assert!(e.contains("it is a directory, not an OBJ file"), "{e}");
    assert!(e.contains(folder), "{e}");

    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let missing = dir.path().join("no-such-folder").join("out.png");
    let e = run(&[
        "render",
        obj.to_str().unwrap(),
        "-o",
        missing.to_str().unwrap(),
        "--backend",
        "cpu",
        "-q",
    ]);
    assert!(e.contains("cannot write the image"), "{e}");
    assert!(
        e.contains("the folder") && e.contains("no-such-folder does not exist"),
        "{e}"
    );
    assert!(!png.exists() && !missing.exists());

    // An existing folder, or a name ending in a separator, is no image file.
    let trailing = format!("{}/", png.display());
    for (output, says) in [
        (folder, "is a folder; give a file name"),
        (trailing.as_str(), "names a folder"),
    ] {
        let e = run(&[
            "render",
            obj.to_str().unwrap(),
            "-o",
            output,
            "--backend",
            "cpu",
            "-q",
        ]);
        assert!(e.contains(says), "{output}: {e}");
    }
}

/// Zero threads or zero build streams is a usage error (clap's exit code 2) naming the flag,
/// not a value silently raised to 1.
#[test]
fn zero_threads_or_streams_are_refused_by_name() {
    for flag in ["--threads", "--streams"] {
        let out = render(&[flag, "0"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '0' for '{flag}")),
            "{stderr}"
        );
    }
}

/// `--backend cpu` with a GPU among `--devices` is a contradiction, refused on any machine (a
/// GPU worker would otherwise set the OptiX backend up anyway and render on the GPU).
#[test]
fn the_cpu_backend_refuses_gpu_workers() {
    refused(
        &["--devices", "cpu,gpu0x2"],
        "--backend cpu with --devices gpu0: the CPU backend has no GPU workers",
    );
}

/// Values that start with a minus sign reach their own checks, which say what is wrong with
/// them, rather than clap's "unexpected argument '-1'"; a negative camera coordinate renders.
#[test]
fn negative_values_are_read_as_values() {
    let out = render(&["--env", "-1,0,0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("a radiance cannot be negative"), "{stderr}");
    assert!(!stderr.contains("unexpected argument"), "{stderr}");

    renders(&[
        "--width",
        "8",
        "--height",
        "8",
        "--spp",
        "1",
        "--eye",
        "-0.5,-0.5,-3",
        "--look-at",
        "0.2,0.2,0",
        "--exposure",
        "-1",
    ]);
}

/// A lens that cannot be is refused naming the scene, the flags and the fault (a negative
/// radius is read as a value, not as a flag); a focus distance without a lens would change
/// nothing, so it is refused too; a good lens renders.
#[test]
fn bad_lenses_are_refused_and_a_focus_distance_needs_a_lens() {
    refused(
        &["--lens-radius", "-0.1"],
        "tri.obj: bad lens (--lens-radius -0.1 --focus-distance",
    );
    refused(
        &["--lens-radius", "-0.1"],
        "the lens radius must be a finite number, 0 or more, got -0.1",
    );
    refused(
        &["--lens-radius", "0.1", "--focus-distance", "0"],
        "the focus distance must be a finite number above 0, got 0",
    );
    refused(
        &["--lens-radius", "0.1", "--focus-distance", "inf"],
        "the focus distance must be a finite number above 0, got inf",
    );
    refused(
        &["--lens-radius", "1e30"],
        "is too large for single-precision rays",
    );
    // The triangle's default camera looks along -z from z > 0: a point at z = 100 is behind.
    refused(
        &["--lens-radius", "0.1", "--focus-on", "0,0,100"],
        ", from --focus-on 0,0,100)",
    );
    let out = render(&[
        "--lens-radius",
        "0.1",
        "--focus-on",
        "0,0,0",
        "--focus-distance",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let out = render(&["--focus-distance", "3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--lens-radius <R>"), "{stderr}");
    for lens in [
        &["--lens-radius", "0.05"][..],
        &["--lens-radius", "0.05", "--focus-distance", "2.5"],
        &["--lens-radius", "0.05", "--focus-on", "0.3,0.3,0"],
        &["--lens-radius", "0"],
    ] {
        renders(&[&["--width", "8", "--height", "8", "--spp", "2"][..], lens].concat());
    }
}

/// A camera comment with a thin lens renders as the same camera with `--lens-radius` and
/// `--focus-distance` does, bit for bit; `--lens-radius 0` makes it a pinhole again, and so
/// do flags that give the whole camera; a lens too large for single precision is refused
/// naming the comment.
#[test]
fn a_camera_comment_may_carry_a_thin_lens() {
    let dir = tempfile::tempdir().unwrap();
    let cornell = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj"),
    )
    .unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.mtl"),
        dir.path().join("cornell.mtl"),
    )
    .unwrap();
    let camera = "# gasworks camera: eye 278 273 -800 look_at 278 273 0 up 0 1 0 fov 39.3";
    assert!(cornell.contains(camera), "the Cornell box's camera changed");
    let with_lens = |lens: &str| {
        let path = dir.path().join(format!("lens{}.obj", lens.len()));
        std::fs::write(&path, cornell.replace(camera, &format!("{camera}{lens}"))).unwrap();
        path
    };
    let render = |obj: &std::path::Path, out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let o = gasworks_command()
            .args(["render", obj.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .args([
                "--backend",
                "cpu",
                "--width",
                "24",
                "--height",
                "24",
                "--spp",
                "4",
                "-v",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            out,
        )
    };
    let bits = |p: &std::path::Path| -> Vec<u32> {
        image::open(p)
            .unwrap()
            .to_rgb32f()
            .into_raw()
            .into_iter()
            .map(f32::to_bits)
            .collect()
    };
    let plain = with_lens("");
    let lens = with_lens(" lens_radius 20 focus_distance 1100");
    let (code, stderr, hinted) = render(&lens, "hinted.exr", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "lens: radius 20, focused at 1100 along the view direction (the scene's camera hint)"
        ),
        "{stderr}"
    );
    let (code, stderr, flags) = render(
        &plain,
        "flags.exr",
        &["--lens-radius", "20", "--focus-distance", "1100"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        bits(&hinted),
        bits(&flags),
        "the comment's lens is the flags' lens"
    );

    let (code, stderr, pinhole) = render(&plain, "pinhole.exr", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr, off) = render(&lens, "off.exr", &["--lens-radius", "0"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("lens:"), "{stderr}");
    assert_eq!(bits(&off), bits(&pinhole), "--lens-radius 0 is a pinhole");
    assert_ne!(bits(&hinted), bits(&pinhole));
    let whole = [
        "--eye",
        "278,273,-800",
        "--look-at",
        "278,273,0",
        "--up",
        "0,1,0",
        "--fov",
        "39.3",
    ];
    let (code, stderr, overridden) = render(&lens, "whole.exr", &whole);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        bits(&overridden),
        bits(&pinhole),
        "the whole camera from flags"
    );

    // Focused at the look-at point's distance when the comment names no distance.
    let (code, stderr, _) = render(&with_lens(" lens_radius 20"), "at.exr", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("focused at 800 along the view direction (the scene's camera hint, at the look-at point's distance)"),
        "{stderr}"
    );
    let (code, stderr, out) = render(&with_lens(" lens_radius 1e30"), "huge.exr", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("bad lens (lens_radius 1000000000000000000000000000000 focus_distance 800, from the scene's camera hint")
            && stderr.contains("too large for single-precision rays"),
        "{stderr}"
    );
    assert!(!out.exists());
}

/// A malformed `# gasworks camera:` comment is an error naming the file, the line and the
/// fault: a typo there must not quietly render from the automatic camera instead.
#[test]
fn a_malformed_camera_comment_is_refused_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("typo.obj");
    std::fs::write(
        &obj,
        "# a scene\n# gasworks camera: eye 0 0 3 look_at 0 0 0 up 0 1 0 fov 39.3deg\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
    )
    .unwrap();
    let png = dir.path().join("out.png");
    let render_typo = |output: &std::path::Path, camera: &[&str]| {
        gasworks_command()
            .args([
                "render",
                obj.to_str().unwrap(),
                "-o",
                output.to_str().unwrap(),
            ])
            .args([
                "--backend",
                "cpu",
                "--width",
                "8",
                "--height",
                "8",
                "--spp",
                "1",
            ])
            .args(camera)
            .output()
            .unwrap()
    };
    let out = render_typo(&png, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("typo.obj:2: bad camera comment")
            && stderr.contains("`fov`: \"39.3deg\" is not a finite number"),
        "{stderr}"
    );
    assert!(!png.exists());

    // Flags that give the whole camera do not need the comment: a warning, and the render.
    let whole_camera = [
        "--eye",
        "0,0,3",
        "--look-at",
        "0,0,0",
        "--up",
        "0,1,0",
        "--fov",
        "40",
    ];
    let out = render_typo(&png, &whole_camera);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains("typo.obj:2: bad camera comment"),
        "{stderr}"
    );
    assert!(png.exists());
    // So do the other commands that take a camera: image-stats (its scene mask) and cpu-bench.
    let exr = dir.path().join("out.exr");
    let out = render_typo(&exr, &whole_camera);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for command in [
        vec![
            "image-stats",
            exr.to_str().unwrap(),
            "--mask-scene",
            obj.to_str().unwrap(),
        ],
        vec![
            "cpu-bench",
            obj.to_str().unwrap(),
            "--width",
            "8",
            "--height",
            "8",
            "--spp",
            "1",
            "--repeat",
            "1",
            "--threads",
            "1",
        ],
    ] {
        for (camera, ok) in [(&[][..], false), (&whole_camera[..], true)] {
            let out = gasworks_command()
                .args(&command)
                .args(camera)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.success(), ok, "{command:?} {camera:?}: {stderr}");
            assert!(
                stderr.contains("typo.obj:2: bad camera comment"),
                "{command:?}: {stderr}"
            );
            assert_eq!(stderr.contains("warning: "), ok, "{command:?}: {stderr}");
        }
    }
    // info says it too.
    let out = gasworks_command()
        .args(["info", obj.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("typo.obj:2: bad camera comment"),
        "{stdout}"
    );
}

/// A frame whose film and outputs do not fit in memory is refused before anything is loaded,
/// saying what it needs and what is available (the allocation aborted the process before).
/// Checked where the machine has less than the 64 GiB that the largest frame needs.
#[test]
fn a_frame_larger_than_memory_is_refused_up_front() {
    let available = gasworks::render::memory::available_bytes();
    let needed = gasworks::render::memory::frame_bytes(32768, 32768);
    if available.is_none_or(|a| a >= needed) {
        eprintln!("skipped: {available:?} bytes available, the largest frame needs {needed}");
        return;
    }
    refused(
        &["--width", "32768", "--height", "32768", "--spp", "1"],
        "a 32768x32768 image needs about 64.0 GiB of memory, and ",
    );
}

/// Under an address-space limit (`ulimit -v`, here 1,000,000 KiB: room for the process to
/// start, not for the frame), a 12000x12000 frame (8.6 GiB) is refused before anything is
/// loaded, naming the limit, however much memory the machine has free. It passed the check
/// before, and its film's allocation aborted the process halfway through the render.
#[cfg(target_os = "linux")]
#[test]
fn a_frame_past_the_address_space_limit_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = dir.path().join("out.png");
    let output = std::process::Command::new("sh")
        .args(["-c", r#"ulimit -v 1000000 && exec "$0" "$@""#])
        .arg(cli_support::gasworks_path())
        .args(["render", obj.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--backend", "cpu", "--quiet", "--spp", "1"])
        .args(["--width", "12000", "--height", "12000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("a 12000x12000 image needs about 8.6 GiB of memory, and "),
        "{stderr}"
    );
    assert!(
        stderr.contains("under the address-space limit (ulimit -v) of 1.0 GiB"),
        "{stderr}"
    );
    for crash in ["panicked", "memory allocation of", "backtrace"] {
        assert!(!stderr.contains(crash), "{stderr}");
    }
    assert!(!out.exists(), "a refused render wrote {}", out.display());
}

/// A build without the feature `mpi` under `mpirun -np 4` (as the launcher's variables say):
/// refused on every rank, naming the feature, rather than four whole-frame renders racing for
/// one output. One rank (`-np 1`) renders as a single process.
#[cfg(not(feature = "mpi"))]
#[test]
fn ranks_of_a_build_without_mpi_are_refused_and_one_rank_renders() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = dir.path().join("out.png");
    let run = |var: &str, ranks: &str| {
        gasworks_command()
            .args(["render", obj.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .args([
                "--backend",
                "cpu",
                "--quiet",
                "--width",
                "8",
                "--height",
                "8",
            ])
            .env(var, ranks)
            .output()
            .unwrap()
    };
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
        let refused = run(var, "4");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("one of 4 ranks ({var}=4)")),
            "{stderr}"
        );
        assert!(stderr.contains("--features mpi"), "{stderr}");
        assert!(!out.exists(), "a refused rank wrote {}", out.display());
    }
    let one = run("OMPI_COMM_WORLD_SIZE", "1");
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert!(out.exists());
}
