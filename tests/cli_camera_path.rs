//! `gasworks render --camera-path PATH.csv`: a sequence of frames from one load of the scene,
//! each bit for bit the single frame of its camera; a malformed path refused before the first
//! frame; `--resume` going on at the first frame that is not complete.

mod cli_support;

use std::path::Path;

use cli_support::{cornell, gasworks_in, stderr};

/// Three cameras about the Cornell box, the third with another field of view.
const WALK: &str = "eye_x,eye_y,eye_z,look_x,look_y,look_z,up_x,up_y,up_z,fov_deg
0,1,3.5,0,1,0,0,1,0,39.3
# a comment between rows
0.3,1.1,3.4,0,1,0,0,1,0,39.3
0.6,1.2,3.3,0,0.9,0,0,1,0,42
";

/// The frames' cameras, as `--eye`, `--look-at`, `--up` and `--fov` give them.
const CAMERAS: [[&str; 4]; 3] = [
    ["0,1,3.5", "0,1,0", "0,1,0", "39.3"],
    ["0.3,1.1,3.4", "0,1,0", "0,1,0", "39.3"],
    ["0.6,1.2,3.3", "0,0.9,0", "0,1,0", "42"],
];

const SIZE: [&str; 8] = [
    "--width",
    "40",
    "--height",
    "30",
    "--spp",
    "4",
    "--pass-spp",
    "2",
];

fn render(dir: &Path, args: &[&str]) -> std::process::Output {
    let scene = cornell();
    let mut all = vec!["render", scene.to_str().unwrap()];
    all.extend(SIZE);
    all.extend(args);
    gasworks_in(dir, &all)
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Each frame of the sequence is the file a single render of its camera writes, byte for byte.
#[test]
fn a_sequence_renders_each_frame_as_its_single_render() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("walk.csv"), WALK).unwrap();
    let out = render(
        dir.path(),
        &["--camera-path", "walk.csv", "-o", "f-##.exr", "-v"],
    );
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    // Frame 1 planned with its estimate, the later ones with the previous frame's costs too,
    // each with its figures beside the estimate alone's.
    assert!(
        e.contains("frame 1: planned with the estimate: Spearman "),
        "{e}"
    );
    for n in [2, 3] {
        let said = format!(
            "frame {n}: planned with the previous frame's measured cost blended with the estimate: Spearman "
        );
        assert!(
            e.contains(&said) && e.contains("(the estimate alone "),
            "{e}"
        );
    }
    for (k, [eye, at, up, fov]) in CAMERAS.iter().enumerate() {
        let single = format!("single-{k}.exr");
        let args = ["--eye", eye, "--look-at", at, "--up", up, "--fov", fov];
        let out = render(dir.path(), &[&args[..], &["-o", &single, "-q"]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let frame = format!("f-{:02}.exr", k + 1);
        assert!(
            read(dir.path(), &frame) == read(dir.path(), &single),
            "{frame}"
        );
    }
}

/// With `--aov`, each frame's guide layers go beside its image, as its single render's do.
#[test]
fn a_sequence_writes_each_frames_layers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("walk.csv"), WALK).unwrap();
    let layers = ["--aov", "albedo,normal", "-q"];
    let path = ["--camera-path", "walk.csv", "-o", "f-#.exr"];
    let out = render(dir.path(), &[&path[..], &layers].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let [eye, at, up, fov] = CAMERAS[2];
    let args = [
        "--eye",
        eye,
        "--look-at",
        at,
        "--up",
        up,
        "--fov",
        fov,
        "-o",
        "one.exr",
    ];
    let out = render(dir.path(), &[&args[..], &layers].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    for layer in ["albedo", "normal"] {
        for k in 1..=3 {
            assert!(dir.path().join(format!("f-{k}.{layer}.exr")).exists());
        }
        let (a, b) = (format!("f-3.{layer}.exr"), format!("one.{layer}.exr"));
        assert!(read(dir.path(), &a) == read(dir.path(), &b), "{a}");
    }
    assert!(read(dir.path(), "f-3.exr") == read(dir.path(), "one.exr"));
}

/// A path with a bad row, an output without a run of `#` and the flags a sequence does not
/// take yet are refused before any frame, naming what is wrong.
#[test]
fn a_malformed_path_is_refused_before_the_first_frame() {
    let dir = tempfile::tempdir().unwrap();
    let bad = WALK.replace("0.3,1.1,3.4,", "0.3,1.1,");
    std::fs::write(dir.path().join("bad.csv"), bad).unwrap();
    std::fs::write(dir.path().join("walk.csv"), WALK).unwrap();
    for (args, says) in [
        (
            &["--camera-path", "bad.csv", "-o", "f-#.exr"][..],
            "camera path bad.csv: line 4: 9 values where a row has 10",
        ),
        (
            &["--camera-path", "walk.csv", "-o", "f.exr"],
            "f.exr: with --camera-path the output names each frame's file with a run of #",
        ),
        (
            &[
                "--camera-path",
                "walk.csv",
                "-o",
                "f-#.exr",
                "--resume",
                "f-1.exr.gasworks-resume",
            ],
            "with --camera-path, give --resume alone",
        ),
        (
            &[
                "--camera-path",
                "walk.csv",
                "-o",
                "f-#.exr",
                "--eye",
                "0,0,1",
            ],
            "--eye",
        ),
        (
            &["-o", "f-1.exr", "--resume"],
            "--resume needs the resume file",
        ),
    ] {
        let out = render(dir.path(), args);
        let e = stderr(&out);
        assert!(!out.status.success() && e.contains(says), "{args:?}: {e}");
        assert!(
            !dir.path().join("f-1.exr").exists(),
            "{args:?}: a frame was written"
        );
    }
}

/// `--resume` keeps the complete frames, goes on with a frame a time limit stopped from its
/// resume file, and renders the rest: the files of the uninterrupted sequence.
#[test]
fn a_resumed_sequence_is_the_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("walk.csv"), WALK).unwrap();
    let out = render(d, &["--camera-path", "walk.csv", "-o", "ref-#.exr", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Frame 1 done; frame 2 stopped after its first pass, with its resume file; frame 3 never
    // started.
    std::fs::copy(d.join("ref-1.exr"), d.join("s-1.exr")).unwrap();
    let [eye, at, up, fov] = CAMERAS[1];
    let camera = ["--eye", eye, "--look-at", at, "--up", up, "--fov", fov];
    let stopped = render(
        d,
        &[&camera[..], &["-o", "s-2.exr", "--time-limit", "0.001"]].concat(),
    );
    assert!(
        d.join("s-2.exr.gasworks-resume").exists(),
        "{}",
        stderr(&stopped)
    );
    let out = render(
        d,
        &["--camera-path", "walk.csv", "-o", "s-#.exr", "--resume"],
    );
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert!(e.contains("frame 1: s-1.exr is complete"), "{e}");
    assert!(
        e.contains("resume: s-2.exr.gasworks-resume: 2 of 4 samples per pixel done"),
        "{e}"
    );
    for k in 1..=3 {
        let (a, b) = (format!("ref-{k}.exr"), format!("s-{k}.exr"));
        assert!(read(d, &a) == read(d, &b), "{b}");
    }
    assert!(!d.join("s-2.exr.gasworks-resume").exists());
}

/// With the geometry spread over ranks (one here: its part loaded once, the rank loop and the
/// ranks' meeting between frames), the frames are the plain sequence's, byte for byte.
#[test]
fn a_sequence_with_the_geometry_spread_renders_the_same_frames() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("walk.csv"), WALK).unwrap();
    let scene = cornell();
    let run = |out: &str, more: &[&str]| {
        let mut args = vec![
            "render",
            scene.to_str().unwrap(),
            "--camera-path",
            "walk.csv",
        ];
        args.extend([
            "--width", "40", "--height", "30", "--spp", "4", "-q", "-o", out,
        ]);
        args.extend(more);
        let out = gasworks_in(dir.path(), &args);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    run("plain-#.exr", &[]);
    run("spread-#.exr", &["--distribute-geometry"]);
    for k in 1..=3 {
        let (a, b) = (format!("plain-{k}.exr"), format!("spread-{k}.exr"));
        assert!(read(dir.path(), &a) == read(dir.path(), &b), "{b}");
    }
}
