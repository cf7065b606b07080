//! Signals during `gasworks render`: Ctrl-C (or SIGTERM, SIGHUP) stops the frame, the image
//! is written with what was rendered and says so, and the exit status is 128 + the signal's
//! number (130 for SIGINT, 143 for SIGTERM). SIGUSR1 and `--checkpoint-every` write resume
//! files between passes, from which even a killed render is finished bit for bit.
#![cfg(unix)]

mod cli_support;

use cli_support::{gasworks, gasworks_command};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sends `signal` (`INT`, `TERM`, `USR1`, `KILL`) with the system's `kill`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Sends SIGINT, as a terminal's Ctrl-C would.
fn interrupt(pid: u32) {
    signal(pid, "INT");
}

/// Waits until `path` exists (a checkpoint was written), at most a minute.
fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const CORNELL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/cornell/cornell.obj");

/// `gasworks render` of the Cornell box into `out`: 64x64 pixels on one CPU thread, `spp`
/// samples in passes of `pass_spp`, then `extra`.
fn render_args(out: &std::path::Path, spp: u32, pass_spp: u32, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "render",
        CORNELL,
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--width",
        "64",
        "--height",
        "64",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(["--spp".into(), spp.to_string()]);
    v.extend(["--pass-spp".into(), pass_spp.to_string()]);
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// Starts `gasworks ARGS` with stderr captured.
fn start(args: &[String]) -> std::process::Child {
    gasworks_command()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn ctrl_c_writes_the_passes_rendered_so_far_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let exr = dir.path().join("stopped.exr");
    let stats = dir.path().join("stats.csv");
    // A render no machine finishes: a million samples, in passes of 2.
    let child = start(&render_args(
        &exr,
        1_000_000,
        2,
        &["--stats", stats.to_str().unwrap()],
    ));
    // The handler is set once the render starts (the Cornell box loads in milliseconds).
    std::thread::sleep(Duration::from_secs(2));
    interrupt(child.id());
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("Ctrl-C: finishing the tiles in flight"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: stopped by Ctrl-C: ") && stderr.contains("holds "),
        "{stderr}"
    );
    assert!(
        stderr.contains("of 1000000 samples per pixel everywhere"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    eprintln!("stopped {:.2} s after SIGINT", t0.elapsed().as_secs_f64());

    // The statistics cover the complete passes: rows of passes 0..N, the last ending at the
    // samples every pixel got.
    let csv = std::fs::read_to_string(&stats).unwrap();
    let rows: Vec<(u32, u32)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(rows.first().map(|r| r.0), Some(0), "{csv}");
    assert!(rows.windows(2).all(|w| w[1].0 == w[0].0 + 1), "{csv}");
    let spp_done = rows.last().unwrap().1;
    assert_eq!(spp_done, 2 * rows.len() as u32, "{csv}");
    assert!(
        stderr.contains(&format!("holds {spp_done} of 1000000 samples")),
        "{spp_done} samples in the statistics: {stderr}"
    );

    // The image: every pixel has the samples of the complete passes; the box is lit.
    let stats = gasworks_command()
        .args(["image-stats", exr.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let first = if json.is_array() { &json[0] } else { &json };
    let mean = first["mean_luminance"]
        .as_f64()
        .unwrap_or_else(|| panic!("{json}"));
    assert!(mean > 0.05 && mean < 0.5, "mean luminance {mean}");
}

/// Stopped by Ctrl-C, then finished with `--resume`: the image is bit for bit the one an
/// uninterrupted render writes, and the resume file is used up. A resume file of another
/// render (another seed) is refused, naming the setting that differs.
#[test]
fn a_stopped_render_resumed_is_the_uninterrupted_render() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = dir.path().join("stopped.exr");
    let direct = dir.path().join("direct.exr");
    let with = |out: &std::path::Path, extra: &[&str]| {
        let mut extra = extra.to_vec();
        extra.push("--quiet");
        render_args(out, 1200, 10, &extra)
    };
    let child = start(&with(&stopped, &[]));
    std::thread::sleep(Duration::from_secs(1));
    interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let resume = dir.path().join("stopped.exr.gasworks-resume");
    assert!(
        stderr.contains(&format!(
            "to finish it, run the same command with --resume {}",
            resume.display()
        )),
        "{stderr}"
    );
    assert!(resume.exists());

    // Another seed: refused, the file kept.
    let resume_arg = resume.to_str().unwrap();
    let other = gasworks(&with(&stopped, &["--seed", "3", "--resume", resume_arg]));
    let e = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(1), "{e}");
    assert!(
        e.contains("this resume file is of another render: 'seed 0' (this command: 'seed 3')"),
        "{e}"
    );
    assert!(resume.exists());

    let resumed = gasworks(&with(&stopped, &["--resume", resume_arg]));
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(!resume.exists(), "the resume file is used up");
    let full = gasworks(&with(&direct, &[]));
    assert!(full.status.success());

    assert_same_pixels(&direct, &stopped);
}

/// A render in one pass (the default) stopped by SIGTERM keeps its finished tiles in a resume
/// file, though no pass is complete; resumed under another layout (adaptive tiles of another
/// count), it renders the pixels those tiles did not cover and writes the uninterrupted image,
/// bit for bit.
#[test]
fn a_stop_inside_the_only_pass_leaves_a_resume_file_of_its_finished_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = dir.path().join("one-pass.exr");
    let direct = dir.path().join("direct.exr");
    let one_pass = |out: &Path, extra: &[&str]| render_args(out, 1000, 1000, extra);
    let mut child = start(&one_pass(
        &stopped,
        &["--tiles", "16", "--progress", "lines"],
    ));
    // The signal comes once a tile is finished (its progress line), whatever the machine's
    // speed: 16 tiles of 256 pixels at 1000 samples take seconds on one thread.
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut stderr = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
        assert!(n > 0, "the render ended before a progress line: {stderr}");
        stderr += &line;
        if line.starts_with("progress: ") && line.contains(" of 16 tiles") {
            break;
        }
    }
    signal(child.id(), "TERM");
    std::io::Read::read_to_string(&mut lines, &mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let resume = dir.path().join("one-pass.exr.gasworks-resume");
    assert!(
        stderr.contains("holds samples 0..1000 in ")
            && stderr.contains(&format!(
                "to finish it, run the same command with --resume {}",
                resume.display()
            )),
        "{stderr}"
    );
    let resume_arg = resume.to_str().unwrap();
    // `gasworks preview` of that file is the stopped image, and its key says it stopped
    // inside the pass.
    let preview = dir.path().join("preview.exr");
    let summary = preview_of(&resume, &preview);
    assert!(
        summary.contains("(64x64; 0 of 1000 samples per pixel everywhere, and 1000 in ")
            && summary.contains(" of 4096 pixels; from "),
        "{summary}"
    );
    assert_same_pixels(&stopped, &preview);
    let key = image_key(&preview);
    assert!(
        gasworks::render::output::stopped_mid_pass(&key) && key.contains("0..1000 in "),
        "{key}"
    );
    // The stopped image's own key is the same: both count the pixels that have the pass.
    assert_eq!(image_key(&stopped), key);
    let resumed = gasworks(&one_pass(
        &stopped,
        &[
            "--tiles",
            "5",
            "--schedule",
            "adaptive",
            "--resume",
            resume_arg,
        ],
    ));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "resume: {resume_arg}: 0 of 1000 samples per pixel done, and samples 0..1000 in "
        )) && stderr.contains(" of 4096 pixels (the stopped pass's finished tiles)"),
        "{stderr}"
    );
    assert!(!resume.exists(), "the resume file is used up");
    let full = gasworks(&one_pass(&direct, &[]));
    assert!(full.status.success());
    assert_same_pixels(&direct, &stopped);
}

/// The pixels of two linear images agree bit for bit (image-stats compares values, not bytes).
fn assert_same_pixels(a: &Path, b: &Path) {
    let stats = gasworks(&[
        "image-stats",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(stats.status.success());
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(json[1]["pixels_differing_from_first"], 0, "{json}");
}

/// `gasworks preview RESUME -o OUT`, which must succeed; its summary line.
fn preview_of(resume: &Path, out: &Path) -> String {
    let o = gasworks(&[
        "preview",
        resume.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    assert!(out.exists(), "{stderr}");
    stderr
}

/// The render key an image carries.
fn image_key(path: &Path) -> String {
    gasworks::render::output::read_image(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .meta
        .render
}

/// A crop the time limit ended early says in its key the samples it holds of how many
/// (`spp 4 of 40`), so `merge` joins it with crops that stopped there too (the frame is then
/// the whole render stopped there, bit for bit) and refuses it beside crops rendered with
/// 4 or 40 samples, whose samples draw other numbers or are more.
#[test]
fn a_crop_at_its_time_limit_merges_as_the_samples_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let render = |out: &Path, spp: u32, bounds: Option<&str>, extra: &[&str]| {
        let mut args = extra.to_vec();
        if let Some(bounds) = bounds {
            args.extend_from_slice(&["--pixelbounds", bounds]);
        }
        let o = gasworks(&render_args(out, spp, 4, &args));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let limit = ["--time-limit", "0.001s"];
    render(&path("top.exr"), 40, Some("0,64,0,32"), &limit);
    render(&path("bottom.exr"), 40, Some("0,64,32,64"), &limit);
    render(&path("bottom4.exr"), 4, Some("0,64,32,64"), &[]);
    render(&path("bottom40.exr"), 40, Some("0,64,32,64"), &[]);
    render(&path("whole.exr"), 40, None, &limit);

    let merge = |bottom: &str, out: &str| {
        gasworks(&[
            "merge",
            path("top.exr").to_str().unwrap(),
            path(bottom).to_str().unwrap(),
            "-o",
            path(out).to_str().unwrap(),
        ])
    };
    let joined = merge("bottom.exr", "joined.exr");
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    assert_same_pixels(&path("whole.exr"), &path("joined.exr"));
    // The previews of the crops' resume files are those crops (window and key), so they
    // merge into the same frame.
    for crop in ["top", "bottom"] {
        let resume = path(&format!("{crop}.exr.gasworks-resume"));
        let summary = preview_of(&resume, &path(&format!("{crop}-preview.exr")));
        assert!(summary.contains("(64x32, the crop at (0, "), "{summary}");
        let (stopped, previewed) = (
            gasworks::render::output::read_image(&path(&format!("{crop}.exr"))).unwrap(),
            gasworks::render::output::read_image(&path(&format!("{crop}-preview.exr"))).unwrap(),
        );
        assert_eq!(stopped.meta, previewed.meta, "{crop}");
        assert!(stopped.pixels == previewed.pixels, "{crop}");
    }
    let joined = gasworks(&[
        "merge",
        path("top-preview.exr").to_str().unwrap(),
        path("bottom-preview.exr").to_str().unwrap(),
        "-o",
        path("joined-previews.exr").to_str().unwrap(),
    ]);
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    assert_same_pixels(&path("whole.exr"), &path("joined-previews.exr"));
    for (bottom, spp) in [("bottom4.exr", "spp 4;"), ("bottom40.exr", "spp 40;")] {
        let refused = merge(bottom, "refused.exr");
        let e = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{e}");
        assert!(
            e.contains("spp 4 of 40") && e.contains(spp.trim_end_matches(';')),
            "{e}"
        );
        assert!(!path("refused.exr").exists());
    }
}

/// SIGUSR1 writes a checkpoint once the next tile is done and the render goes on; SIGTERM (what
/// `kill`, Slurm and Kubernetes send) then stops it as Ctrl-C does, with status 143.
#[test]
fn sigusr1_writes_a_checkpoint_and_sigterm_stops_with_143() {
    let dir = tempfile::tempdir().unwrap();
    let exr = dir.path().join("frame.exr");
    let resume = dir.path().join("frame.exr.gasworks-resume");
    let child = start(&render_args(&exr, 1_000_000, 2, &[]));
    std::thread::sleep(Duration::from_secs(1));
    assert!(!resume.exists(), "no checkpoint before one is asked for");
    signal(child.id(), "USR1");
    wait_for(&resume);
    signal(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    for said in [
        "SIGUSR1: writing a checkpoint once the next tile is done",
        "SIGTERM: finishing the tiles in flight",
        "error: stopped by SIGTERM: ",
        "of 1000000 samples per pixel everywhere",
        "to finish it, run the same command with --resume",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(exr.exists() && resume.exists());
}

/// A render killed outright (SIGKILL: no chance to write anything) after `--checkpoint-every`
/// wrote checkpoints is finished from the latest by `--resume`, into exactly the image of an
/// uninterrupted render: in passes, and in one pass, whose checkpoints hold its finished
/// tiles. The checkpoint file is whole at every moment (written aside and renamed), so a kill
/// during a write still leaves the one before.
#[test]
fn a_killed_render_resumes_from_its_latest_checkpoint_bit_for_bit() {
    for pass_spp in [10, 1200] {
        killed_render_resumes_from_its_latest_checkpoint(pass_spp, &[]);
    }
    // Adaptive sampling: the checkpoints carry the odd passes' plane and the blocks that
    // stopped, inside passes too.
    killed_render_resumes_from_its_latest_checkpoint(10, &["--noise-threshold", "0.01"]);
}

fn killed_render_resumes_from_its_latest_checkpoint(pass_spp: u32, options: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let killed = dir.path().join("killed.exr");
    let direct = dir.path().join("direct.exr");
    let resume = dir.path().join("killed.exr.gasworks-resume");
    let args = |out: &Path, extra: &[&str]| {
        let mut extra = extra.to_vec();
        extra.extend(["--checkpoint-every", "0.05s", "--tiles", "16"]);
        extra.extend_from_slice(options);
        render_args(out, 1200, pass_spp, &extra)
    };
    let child = start(&args(&killed, &[]));
    wait_for(&resume);
    // A few more checkpoints replace it, then the kill.
    std::thread::sleep(Duration::from_millis(300));
    signal(child.id(), "KILL");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), None, "killed by a signal");
    assert!(!killed.exists(), "a killed render writes no image");

    // The same command plus --resume.
    let resume_arg = resume.to_str().unwrap();
    let resumed = gasworks(&args(&killed, &["--resume", resume_arg]));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(stderr.contains("samples per pixel done"), "{stderr}");
    if pass_spp == 1200 {
        // The checkpoints of a render in one pass hold its finished tiles.
        assert!(
            stderr.contains("0 of 1200 samples per pixel done, and samples 0..1200 in "),
            "{stderr}"
        );
    }
    assert!(stderr.contains("the render is complete"), "{stderr}");
    assert!(!resume.exists(), "the checkpoint is used up");

    let full = gasworks(&args(&direct, &[]));
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(full.status.success(), "{stderr}");
    assert!(stderr.contains("checkpoints: "), "{stderr}");
    assert!(
        !dir.path().join("direct.exr.gasworks-resume").exists(),
        "a finished render removes its checkpoint"
    );
    assert_same_pixels(&direct, &killed);
}

#[test]
fn a_time_limit_without_passes_chooses_them_and_a_leftover_checkpoint_is_pointed_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.png");
    // --spp 1 has no pass boundary: said, and rendered.
    let one_pass = gasworks(&[
        "render",
        CORNELL,
        "-o",
        out.to_str().unwrap(),
        "--width",
        "16",
        "--height",
        "16",
        "--spp",
        "1",
        "--time-limit",
        "10m",
    ]);
    let e = String::from_utf8_lossy(&one_pass.stderr);
    assert!(one_pass.status.success(), "{e}");
    assert!(
        e.contains("warning: --spp 1 is one pass, so --time-limit cannot stop between passes"),
        "{e}"
    );
    std::fs::remove_file(&out).unwrap();
    let bad = gasworks(&["render", CORNELL, "-o", "x.png", "--checkpoint-every", "0"]);
    assert_eq!(bad.status.code(), Some(2));

    // A checkpoint left by an earlier render of this output, and a render without --resume.
    std::fs::write(dir.path().join("a.png.gasworks-resume"), b"old").unwrap();
    let fresh = gasworks(&render_args(&out, 2, 1, &["--quiet"]));
    let e = String::from_utf8_lossy(&fresh.stderr);
    assert!(fresh.status.success(), "{e}");
    assert!(
        e.contains("a.png.gasworks-resume exists: an earlier render to")
            && e.contains("add --resume"),
        "{e}"
    );
    // Not written over (no checkpoint was due): still the earlier render's.
    assert_eq!(
        std::fs::read(dir.path().join("a.png.gasworks-resume")).unwrap(),
        b"old"
    );
}

/// A PNG's tone mapping (`--exposure`, `--tonemap`) goes into its resume file, and `preview`
/// applies it unless told otherwise: the preview of a toned render stopped at its time limit
/// is that render's PNG, byte for byte (it was the clamp at no exposure, another image, before
/// the file recorded it). Flags given to `preview` win, and an EXR preview is radiance as
/// rendered, whatever the render's PNG had.
#[test]
fn a_preview_takes_the_renders_tone_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let tone = ["--exposure", "1.5", "--tonemap", "aces"];
    let mut extra = vec!["--time-limit", "0.001s"];
    extra.extend(tone);
    let r = gasworks(&render_args(&path("toned.png"), 40, 4, &extra));
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let resume = path("toned.png.gasworks-resume");
    let summary = preview_of(&resume, &path("preview.png"));
    assert!(
        summary.contains("; --exposure 1.5 --tonemap aces; from "),
        "{summary}"
    );
    let bytes = |name: &str| std::fs::read(path(name)).unwrap();
    assert!(
        bytes("preview.png") == bytes("toned.png"),
        "the preview is not the render's PNG"
    );
    let info = gasworks(&["info", resume.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&info.stdout);
    assert!(
        said.contains("(a PNG's tone mapping is the render's: --exposure 1.5 --tonemap aces)"),
        "{said}"
    );

    // Given flags win: at the default tone, another image.
    let o = gasworks(&[
        "preview",
        resume.to_str().unwrap(),
        "-o",
        path("clamped.png").to_str().unwrap(),
        "--exposure",
        "0",
        "--tonemap",
        "clamp",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(bytes("clamped.png") != bytes("toned.png"));
    // An EXR preview: radiance as rendered, as the uninterrupted render's EXR at the limit.
    preview_of(&resume, &path("preview.exr"));
    let r = gasworks(&render_args(
        &path("linear.exr"),
        40,
        4,
        &["--time-limit", "0.001s"],
    ));
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let pixels = |name: &str| {
        gasworks::render::output::read_image(&path(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .pixels
    };
    assert!(pixels("preview.exr") == pixels("linear.exr"));
}

/// `--time-limit`: a pass that would end past the limit is not started; the image is written
/// whole with the passes done, with a resume file, and the command succeeds. Rerun with
/// `--resume` (as a batch job is resubmitted), the render ends as an uninterrupted one, bit
/// for bit.
#[test]
fn a_time_limit_writes_a_whole_image_and_a_resume_file() {
    let dir = tempfile::tempdir().unwrap();
    let limited = dir.path().join("limited.exr");
    let direct = dir.path().join("direct.exr");
    let resume = dir.path().join("limited.exr.gasworks-resume");
    // A limit passed before the first pass ends: that pass alone is rendered.
    let first = gasworks(&render_args(&limited, 40, 4, &["--time-limit", "0.001s"]));
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("at the time limit: 4 of 40 samples per pixel everywhere"),
        "{stderr}"
    );
    assert!(
        stderr.contains("to go on, run the same command with --resume"),
        "{stderr}"
    );
    assert!(resume.exists());
    // Its preview is the image written at the limit, key and all; a PNG preview too.
    let preview = dir.path().join("preview.exr");
    let summary = preview_of(&resume, &preview);
    assert!(
        summary.contains("(64x64; 4 of 40 samples per pixel everywhere; from "),
        "{summary}"
    );
    assert_same_pixels(&limited, &preview);
    assert_eq!(image_key(&preview), image_key(&limited));
    assert!(image_key(&preview).contains("; spp 4 of 40;"));
    preview_of(&resume, &dir.path().join("preview.png"));
    let resumed = gasworks(&render_args(
        &limited,
        40,
        4,
        &["--resume", resume.to_str().unwrap()],
    ));
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(!resume.exists());
    let full = gasworks(&render_args(&direct, 40, 4, &[]));
    assert!(full.status.success());
    assert_same_pixels(&direct, &limited);

    // Without --pass-spp, --time-limit renders in passes of spp/16 rounded down to a power
    // of two (here 40 -> 2): the image of a render in passes of 2, bit for bit, and a resume
    // file whose key the same command finds again.
    let chosen = dir.path().join("chosen.exr");
    let chosen_resume = dir.path().join("chosen.exr.gasworks-resume");
    let without_passes = |extra: &[&str]| {
        let mut v = render_args(&chosen, 40, 2, extra);
        let at = v.iter().position(|s| s == "--pass-spp").unwrap();
        v.drain(at..at + 2);
        v
    };
    let first = gasworks(&without_passes(&["--time-limit", "0.001s"]));
    let e = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(0), "{e}");
    assert!(
        e.contains("passes: 20 of 2 samples per pixel, for --time-limit to stop between"),
        "{e}"
    );
    assert!(
        e.contains("at the time limit: 2 of 40 samples per pixel everywhere"),
        "{e}"
    );
    let again = gasworks(&without_passes(&[
        "--time-limit",
        "1h",
        "--resume",
        chosen_resume.to_str().unwrap(),
    ]));
    let e = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{e}");
    assert!(!chosen_resume.exists(), "{e}");
    let in_passes = dir.path().join("in-passes.exr");
    assert!(gasworks(&render_args(&in_passes, 40, 2, &[]))
        .status
        .success());
    assert_same_pixels(&in_passes, &chosen);
}

/// A scene edited between the stop and the resume (a colour changed in its MTL file, the
/// OBJ untouched): the resume file is refused, naming the scene's content, and kept; the
/// samples of two scenes are never mixed into one image.
#[test]
fn a_resume_after_the_scene_was_edited_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let assets = Path::new(CORNELL).parent().unwrap();
    for f in ["cornell.obj", "cornell.mtl"] {
        std::fs::copy(assets.join(f), dir.path().join(f)).unwrap();
    }
    let scene = dir.path().join("cornell.obj");
    let out = dir.path().join("edited.exr");
    let resume = dir.path().join("edited.exr.gasworks-resume");
    let args = |extra: &[&str]| {
        let mut v = render_args(&out, 40, 4, extra);
        v[1] = scene.to_str().unwrap().into();
        v
    };
    let first = gasworks(&args(&["--time-limit", "0.001s"]));
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(resume.exists());

    let mtl = dir.path().join("cornell.mtl");
    let text = std::fs::read_to_string(&mtl).unwrap();
    assert!(text.contains("Kd 0.63 0.065 0.05"));
    std::fs::write(
        &mtl,
        text.replace("Kd 0.63 0.065 0.05", "Kd 0.05 0.065 0.63"),
    )
    .unwrap();
    let resumed = gasworks(&args(&["--resume", resume.to_str().unwrap()]));
    let e = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(1), "{e}");
    assert!(
        e.contains("this resume file is of another render: 'content "),
        "{e}"
    );
    assert!(!e.contains("'triangles"), "only the content differs: {e}");
    assert!(
        e.contains("the scene's geometry, materials or textures changed"),
        "{e}"
    );
    assert!(resume.exists(), "the resume file is kept");
}

/// A resume file rendered by another gasworks build is resumed, with a warning that the image
/// will not be bit for bit one uninterrupted run's (the samples may differ, in their last
/// bits or wholly); one of this build resumes without a warning.
#[test]
fn a_resume_by_another_build_warns_that_it_is_not_bit_for_bit() {
    use gasworks::render::checkpoint;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("built.exr");
    let resume = dir.path().join("built.exr.gasworks-resume");
    let resume_arg = resume.to_str().unwrap();
    let limited = |spp: u32| render_args(&out, spp, 4, &["--time-limit", "0.001s"]);
    assert!(gasworks(&limited(40)).status.success());
    let (header, film) = checkpoint::read(&resume).unwrap();
    assert!(header.software.starts_with("gasworks "), "{header:?}");

    let mut same = limited(40);
    same.extend(["--resume".into(), resume_arg.into()]);
    let r = gasworks(&same);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{e}");
    assert!(!e.contains("warning"), "{e}");

    let older = checkpoint::CheckpointHeader {
        software: "gasworks 0.0.9 (0123456789ab)".into(),
        ..header
    };
    checkpoint::write(&resume, &older, &film).unwrap();
    let r = gasworks(&same);
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{e}");
    assert!(
        e.contains("was rendered by gasworks 0.0.9 (0123456789ab), and this is gasworks ")
            && e.contains("not bit for bit what one uninterrupted run gives"),
        "{e}"
    );
}

/// A resume file that holds every sample (a checkpoint written after the last tile, the
/// process killed before its image) gives its image back: nothing is rendered, the image is
/// the film's, and the file is removed.
#[test]
fn a_resume_file_holding_every_sample_gives_its_image_back() {
    use gasworks::render::checkpoint;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("whole.exr");
    let resume = dir.path().join("whole.exr.gasworks-resume");
    // 4 of 8 samples per pixel, stopped at the time limit: an image and a resume file.
    let r = gasworks(&render_args(&out, 8, 4, &["--time-limit", "0.001s"]));
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let first = dir.path().join("first.exr");
    std::fs::copy(&out, &first).unwrap();
    // Every pixel given the second pass too, as sums and counts doubled: the same means, bit
    // for bit (doubling is exact).
    let (header, mut film) = checkpoint::read(&resume).unwrap();
    assert_eq!(header.spp_done, 4);
    for p in &mut film.pixels {
        *p = p.map(|v| v * 2.0);
    }
    checkpoint::write(&resume, &header, &film).unwrap();

    let resumed = gasworks(&render_args(
        &out,
        8,
        4,
        &["--resume", resume.to_str().unwrap()],
    ));
    let e = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{e}");
    assert!(e.contains("8 of 8 samples per pixel done"), "{e}");
    assert!(e.contains("nothing left to render"), "{e}");
    assert!(e.contains("removed (the render is complete)"), "{e}");
    assert!(!resume.exists());
    assert_same_pixels(&out, &first);
}

/// A stop after the output's folder was removed (as a full disk also fails a write): the
/// resume file and the image are both rescued to the temporary folder, each named in a
/// message, so the complete passes are not lost.
#[test]
fn a_stop_that_cannot_write_beside_the_image_rescues_the_resume_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let rescue = dir.path().join("tmp");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::create_dir_all(&rescue).unwrap();
    let exr = out_dir.join("x.exr");
    let args = render_args(&exr, 1_000_000, 2, &[]);
    let child = gasworks_command()
        .args(&args)
        .env("TMPDIR", &rescue)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    std::fs::remove_dir_all(&out_dir).unwrap();
    interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let rescued: Vec<std::path::PathBuf> = std::fs::read_dir(&rescue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let resume = rescued
        .iter()
        .find(|p| p.to_string_lossy().ends_with("-x.exr.gasworks-resume"))
        .unwrap_or_else(|| panic!("no rescued resume file in {rescued:?}: {stderr}"));
    assert!(
        stderr.contains(&format!("the resume file is saved as {}", resume.display())),
        "{stderr}"
    );
    assert!(
        rescued
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "exr")),
        "{rescued:?}"
    );
    // A whole resume file of this render: another --spp is refused by name, not as damaged.
    let again = dir.path().join("again.exr");
    let mut other = render_args(&again, 64, 2, &[]);
    other.extend(["--resume".into(), resume.to_str().unwrap().into()]);
    let o = gasworks(&other);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("spp 1000000") && !e.contains("damaged"), "{e}");
}

/// A run at its time limit that resumed from the file it then replaces keeps the new file,
/// however the --resume path is spelled (it removed it when the spelling differed from the
/// one derived from -o, and every complete pass was lost).
#[test]
fn a_time_limited_resume_keeps_the_file_it_replaced_whatever_its_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let exr = dir.path().join("x.exr");
    let resume = dir.path().join("x.exr.gasworks-resume");
    let spelled = dir.path().join(".").join("x.exr.gasworks-resume");
    let limited = |extra: &[&str]| {
        let mut args = vec!["--time-limit", "0.001s"];
        args.extend_from_slice(extra);
        let o = gasworks(&render_args(&exr, 40, 4, &args));
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{e}");
        e
    };
    limited(&[]);
    assert!(resume.exists());
    let e = limited(&["--resume", spelled.to_str().unwrap()]);
    assert!(!e.contains("removed"), "{e}");
    assert!(resume.exists(), "{e}");
    assert!(e.contains("at the time limit: 8 of 40 samples"), "{e}");
}

/// `gasworks preview` of what is not a resume file fails naming it, and writes nothing; an
/// output it could not write is refused before the file is read.
#[test]
fn preview_refuses_what_is_not_a_resume_file_or_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image.exr");
    let o = gasworks(&render_args(&image, 1, 1, &[]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("preview.png");
    let missing = dir.path().join("gone.exr.gasworks-resume");
    let nowhere = dir.path().join("no-such-folder/preview.png");
    // (input, output, what the error must say, what it must not: the output is refused
    // before the missing input is looked at).
    for (input, output, says, not) in [
        (
            &image,
            &out,
            &["image.exr", "not a gasworks resume file"][..],
            None,
        ),
        (&missing, &out, &["gone.exr.gasworks-resume"][..], None),
        (
            &missing,
            &nowhere,
            &["no-such-folder"][..],
            Some("gone.exr"),
        ),
    ] {
        let o = gasworks(&[
            "preview",
            input.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        for s in says {
            assert!(e.contains(s), "no {s:?} in: {e}");
        }
        assert!(not.is_none_or(|n| !e.contains(n)), "{e}");
        assert!(!output.exists(), "{e}");
    }
}
