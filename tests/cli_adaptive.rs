//! `gasworks render --noise-threshold T`: adaptive sampling from the command line. A block
//! stops once its noise, as a PNG shows it, is at or below T, and the noise the image ends
//! with, measured against a converged reference, is what T asks for; crops on the block grid
//! merge into the frame's image; bad settings are refused before anything renders.

mod cli_support;

use cli_support::{cornell, gasworks_command, gasworks_in, linear, stderr};
use std::path::Path;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    gasworks_in(dir, args)
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

/// [`ok`], the CPU workers asking for tiles of `work` pixel-samples as GPU workers do
/// (`GASWORKS_CPU_TILE_WORK`).
fn ok_with_tile_work(dir: &Path, args: &[&str], work: &str) -> String {
    let out = gasworks_command()
        .args(args)
        .current_dir(dir)
        .env("GASWORKS_CPU_TILE_WORK", work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

fn fails(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    let e = stderr(&out);
    assert!(!out.status.success(), "{args:?} should fail: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

/// `render` of the Cornell box on the CPU, `size` pixels a side, then `extra` (seed 5 unless
/// it gives one).
fn render_args<'a>(scene: &'a str, out: &'a str, size: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "render",
        scene,
        "-o",
        out,
        "--backend",
        "cpu",
        "--width",
        size,
        "--height",
        size,
    ];
    v.extend_from_slice(extra);
    if !extra.contains(&"--seed") {
        v.extend_from_slice(&["--seed", "5"]);
    }
    v
}

/// The noise an adaptive render ends with, against a 1024-spp reference: the threshold is
/// what a block's display noise comes to, and the render takes far fewer samples than its
/// --spp. (Measured by `image-stats`, independently of the render's own estimate.)
#[test]
fn the_noise_left_is_what_the_threshold_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    let threshold = 0.02;
    ok(
        dir.path(),
        &render_args(scene, "ref.exr", "64", &["--spp", "1024", "--seed", "77"]),
    );
    let e = ok(
        dir.path(),
        &render_args(
            scene,
            "a.exr",
            "64",
            &["--spp", "256", "--noise-threshold", "0.02"],
        ),
    );
    assert!(
        e.contains(
            "passes: 16 of 16 samples per pixel, for --noise-threshold to decide between (--pass-spp sets another size)"
        ),
        "{e}"
    );
    // The blocks of the 64x64 image (16) stopped below the threshold, well short of 256, but
    // for the light's: its edge pixels, a few samples in a hundred on the light, flicker
    // between the halves of their samples (and do on a PNG).
    let line = e
        .lines()
        .find(|l| l.starts_with("output: a.exr (64x64, adaptive: "))
        .unwrap_or_else(|| panic!("{e}"));
    let stopped: usize = line
        .rsplit(", ")
        .next()
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        stopped >= 14 && line.ends_with(" of 16 blocks stopped below the noise threshold)"),
        "{line}"
    );
    let mean: f64 = line
        .split("adaptive: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(mean < 128.0, "{line}");
    let stats = run(dir.path(), &["image-stats", "--json", "ref.exr", "a.exr"]);
    assert!(stats.status.success(), "{}", stderr(&stats));
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let noise = &json[1]["display_block_error_from_first"];
    let (median, max) = (
        noise["median"].as_f64().unwrap(),
        noise["max"].as_f64().unwrap(),
    );
    // The reference's own noise (about 0.003 here) adds to what is measured; a block's
    // estimate is within about 10% of its noise.
    assert!(median <= threshold, "{noise}");
    assert!(max <= 1.5 * threshold, "{noise}");
    // And the threshold is not met by accident: the first two passes' 32 samples alone,
    // everywhere, leave more.
    ok(
        dir.path(),
        &render_args(scene, "u32.exr", "64", &["--spp", "32"]),
    );
    let stats = run(dir.path(), &["image-stats", "--json", "ref.exr", "u32.exr"]);
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let uniform_max = json[1]["display_block_error_from_first"]["max"]
        .as_f64()
        .unwrap();
    assert!(uniform_max > threshold, "32 spp leave {uniform_max}");
}

/// Two crops on the 16-pixel grid, rendered apart, merge into the frame's image bit for bit;
/// a crop off the grid is refused, naming the blocks around it.
#[test]
fn crops_on_the_block_grid_merge_into_the_frame() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    let opts = ["--spp", "64", "--noise-threshold", "0.03"];
    let size = ["--width", "48", "--height", "40"];
    let with = |out: &'static str, more: &[&'static str]| {
        let mut v = vec!["render", scene, "-o", out, "--backend", "cpu"];
        v.extend_from_slice(&size);
        v.extend_from_slice(&opts);
        v.extend_from_slice(more);
        v
    };
    ok(dir.path(), &with("whole.exr", &[]));
    ok(
        dir.path(),
        &with(
            "left.exr",
            &["--pixelbounds", "0,16,0,40", "--threads", "1"],
        ),
    );
    ok(
        dir.path(),
        &with("right.exr", &["--pixelbounds", "16,48,0,40"]),
    );
    ok(
        dir.path(),
        &["merge", "left.exr", "right.exr", "-o", "merged.exr"],
    );
    let (whole, key) = linear(&dir.path().join("whole.exr"));
    let (merged, merged_key) = linear(&dir.path().join("merged.exr"));
    assert_eq!(key, merged_key);
    assert!(
        key.contains("; noise-threshold 0.03 min-spp 0 pass-spp 4"),
        "{key}"
    );
    assert!(
        whole
            .iter()
            .zip(&merged)
            .all(|(a, b)| a.map(f32::to_bits) == b.map(f32::to_bits)),
        "the merged crops differ from the frame"
    );
    let e = fails(
        dir.path(),
        &with("off.exr", &["--pixelbounds", "8,40,3,40"]),
    );
    assert!(
        e.contains("--noise-threshold judges the frame's 16x16-pixel blocks, so a crop must start and end on multiples of 16 (or at the frame's edge)"),
        "{e}"
    );
    assert!(e.contains("--pixelbounds 0,48,0,40"), "{e}");
    assert!(!dir.path().join("off.exr").exists());
}

#[test]
fn bad_adaptive_settings_are_refused_before_the_render() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    for (extra, says) in [
        (
            &["--noise-threshold", "0"][..],
            "the noise threshold is a number above 0",
        ),
        (
            &["--noise-threshold", "much"][..],
            "the noise threshold is a number above 0",
        ),
        (
            &["--noise-threshold", "NaN"][..],
            "the noise threshold is a number above 0",
        ),
        (&["--min-spp", "8"][..], "--noise-threshold"),
        (
            &["--noise-threshold", "0.01", "--pass-spp", "32"][..],
            "--noise-threshold decides between passes, and --spp 64 in passes of 32 gives 2: it needs at least 3",
        ),
        (
            &["--noise-threshold", "0.01", "--min-spp", "65"][..],
            "--min-spp 65 is more than --spp 64",
        ),
    ] {
        let mut args = render_args(scene, "x.png", "16", &["--spp", "64"]);
        args.extend_from_slice(extra);
        let e = fails(dir.path(), &args);
        assert!(e.contains(says), "{extra:?}: {e}");
        assert!(!dir.path().join("x.png").exists(), "{extra:?}");
    }
}

/// A chain of runs under a time limit that only each run's first pass fits: each renders one
/// pass and leaves a resume file, the blocks that had stopped are named, and the last run
/// writes the image of one uninterrupted render, bit for bit. A resume file goes on only
/// under the same threshold: the key says which differs.
#[test]
fn a_chain_of_time_limited_runs_ends_in_the_uninterrupted_image() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    let base = ["--spp", "256", "--pass-spp", "8", "--threads", "1"];
    let threshold = ["--noise-threshold", "0.03"];
    let resume = dir.path().join("t.exr.gasworks-resume");
    let resume_arg = resume.to_str().unwrap().to_string();
    let mut named_stopped_blocks = false;
    let mut runs = 0;
    loop {
        let mut args = render_args(scene, "t.exr", "48", &base);
        args.extend_from_slice(&threshold);
        // The first pass of a run always renders; nothing after it fits.
        args.extend_from_slice(&["--time-limit", "0.001s"]);
        if runs > 0 {
            args.extend_from_slice(&["--resume", &resume_arg]);
        }
        let e = ok(dir.path(), &args);
        runs += 1;
        if e.contains("at the time limit: ") {
            named_stopped_blocks |= e.contains("blocks that had met the noise threshold");
            assert!(resume.exists(), "{e}");
        } else {
            assert!(e.contains("output: t.exr (48x48, adaptive: "), "{e}");
            break;
        }
        assert!(runs < 32, "{e}");
        if runs == 3 {
            let mut other = render_args(scene, "t.exr", "48", &base);
            other.extend_from_slice(&["--noise-threshold", "0.04", "--resume", &resume_arg]);
            let e = fails(dir.path(), &other);
            assert!(
                e.contains("'noise-threshold 0.03 min-spp 0 pass-spp 8' (this command: 'noise-threshold 0.04 min-spp 0 pass-spp 8')"),
                "{e}"
            );
        }
    }
    assert!(runs > 3, "{runs} runs");
    assert!(
        named_stopped_blocks,
        "no run stopped with blocks below the threshold"
    );
    let mut direct = render_args(scene, "d.exr", "48", &base);
    direct.extend_from_slice(&threshold);
    ok(dir.path(), &direct);
    let (a, _) = linear(&dir.path().join("t.exr"));
    let (b, _) = linear(&dir.path().join("d.exr"));
    assert!(a
        .iter()
        .zip(&b)
        .all(|(p, q)| p.map(f32::to_bits) == q.map(f32::to_bits)));
}

/// CPU workers asking for GPU-sized tiles (`GASWORKS_CPU_TILE_WORK`, the hook that puts the
/// scheduler's GPU layouts on a machine without a GPU): the later passes' tiles, counted from
/// the work, skip the stopped blocks (`-v`'s work per pass: 2 tiles a pass where the pieces
/// were more), and the image is the same file, byte for byte. A value that is not a count is
/// said and ignored.
#[test]
fn gpu_sized_tiles_on_cpu_workers_give_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    let extra = [
        "--spp",
        "32",
        "--noise-threshold",
        "0.02",
        "-v",
        "--threads",
        "2",
    ];
    let pieces = ok(dir.path(), &render_args(scene, "pieces.exr", "96", &extra));
    let with = |work: &str| {
        ok_with_tile_work(
            dir.path(),
            &render_args(scene, "tiles.exr", "96", &extra),
            work,
        )
    };
    let tiles = with("20000");
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert!(read("pieces.exr") == read("tiles.exr"), "{tiles}");
    // The last pass's tile count, from `work per pass`.
    let last_tiles = |log: &str| -> usize {
        let rows: Vec<&str> = log
            .lines()
            .skip_while(|l| !l.starts_with("  work per pass:"))
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .collect();
        rows.last()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no work per pass table:\n{log}"))
    };
    assert!(
        last_tiles(&tiles) < last_tiles(&pieces),
        "GPU-sized: {}, pieces: {}\n{tiles}\n{pieces}",
        last_tiles(&tiles),
        last_tiles(&pieces)
    );
    let bad = with("lots");
    assert!(
        bad.contains("GASWORKS_CPU_TILE_WORK=\"lots\" is not a positive whole number"),
        "{bad}"
    );
    assert!(read("pieces.exr") == read("tiles.exr"));
}

/// `schedule-sim` on an adaptive render's `--stats` (an `OUT.blocks.csv` beside them): the
/// correction replay rebuilds every pass's costs as the render planned them (a pass over
/// part of the image corrects nothing, and a tile that skips stopped blocks is priced by
/// its pixels still sampling), with CPU-sized pieces and with GPU-sized tiles that skip; the
/// simulation takes the passes over part of the image. A later uniform render's statistics
/// under the same name leave no blocks behind to be misread.
#[test]
fn schedule_sim_replays_an_adaptive_renders_passes_as_it_planned_them() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let scene = scene.to_str().unwrap();
    let sim = |stats: &str, options: &[&str]| -> String {
        let out = gasworks_command()
            .arg("schedule-sim")
            .arg(stats)
            .args(options)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{options:?}: {stdout}{}",
            stderr(&out)
        );
        stdout
    };
    for work in ["", "20000"] {
        let extra = [
            "--spp",
            "32",
            "--noise-threshold",
            "0.02",
            "--threads",
            "2",
            "--stats",
            "s.csv",
        ];
        let log = ok_with_tile_work(dir.path(), &render_args(scene, "a.exr", "96", &extra), work);
        assert!(log.contains("s.costmap.csv, s.blocks.csv"), "{log}");
        let replay = sim("s.csv", &["--replay-corrections"]);
        let passes: Vec<&str> = replay.lines().filter(|l| l.starts_with("pass ")).collect();
        assert_eq!(passes.len(), 16, "{replay}");
        let partial = passes
            .iter()
            .filter(|l| l.contains("over part of the image"))
            .count();
        assert!(partial >= 3, "work {work:?}: {replay}");
        for line in &passes {
            let diff: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{line}"));
            assert!(diff < 1e-5, "work {work:?}: {line}\n{replay}");
        }
        let simulated = sim("s.csv", &["--workers", "1,2", "--seeds", "2"]);
        assert!(
            simulated.contains(&format!("16 passes, {partial} over part of the image")),
            "{simulated}"
        );
    }
    // Blocks that are not the render's: refused, naming the file and what is wrong.
    let blocks = dir.path().join("s.blocks.csv");
    let good = std::fs::read_to_string(&blocks).unwrap();
    let refused = |options: &[&str]| {
        let out = gasworks_command()
            .arg("schedule-sim")
            .arg("s.csv")
            .args(options)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        stderr(&out)
    };
    let mut lines: Vec<&str> = good.lines().collect();
    lines.swap(1, 2);
    std::fs::write(&blocks, lines.join("\n")).unwrap();
    let e = refused(&["--replay-corrections"]);
    assert!(
        e.contains("s.blocks.csv: its 36 blocks are not the 16x16 block grid of a 96x96 image"),
        "{e}"
    );
    let small: Vec<&str> = good
        .lines()
        .filter(|l| {
            let v: Vec<u32> = l
                .split(',')
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect();
            v.len() < 2 || (v[0] < 48 && v[1] < 48)
        })
        .collect();
    std::fs::write(&blocks, small.join("\n")).unwrap();
    let e = refused(&["--workers", "1"]);
    assert!(e.contains("lies outside the 48x48 image of"), "{e}");
    ok(
        dir.path(),
        &render_args(scene, "u.exr", "32", &["--spp", "2", "--stats", "s.csv"]),
    );
    assert!(!dir.path().join("s.blocks.csv").exists());
    sim("s.csv", &["--workers", "1"]);
}
