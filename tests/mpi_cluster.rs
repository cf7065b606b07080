//! `mpirun -np N gasworks render ...` on this machine (feature `mpi`; needs OpenMPI's
//! `mpirun`, see README "Rendering on a cluster"): run by `.ci/run` as
//! `cargo test --features mpi --test mpi_cluster`.
//!
//! - with 2 and 4 ranks, under every schedule (regular, sorted, adaptive; stealing on and off;
//!   one pass and two), the image is bit-identical to one process's, and the statistics show
//!   every tile of every pass rendered exactly once, on a rank of the job;
//! - one rank under mpirun, and no mpirun at all, render as one process;
//! - a scene missing on one rank (or unreadable there) gives every rank the same error, a
//!   non-zero exit and no image, within a timeout;
//! - a rank that dies (SIGABRT, SIGKILL) or falls silent mid-frame fails the job with a
//!   message naming it, within a timeout; after a death, rank 0 (sent SIGTERM by mpirun)
//!   writes the tiles that arrived and says so, and nothing else is left;
//! - on the fake GPU, a GPU lost in its calibration on every rank leaves the CPU threads the
//!   frame, one process's image bit for bit;
//! - SIGTERM to mpirun stops the job with the image of what has arrived and a resume file;
//!   all ranks killed leave rank 0's checkpoint; either way `--resume` under mpirun finishes
//!   one process's image bit for bit; a time limit ends the job whole at a pass boundary;
//! - `--aov` layers, traced by rank 0 before the frame, are one process's bit for bit;
//! - adaptive sampling (`--noise-threshold`) under 2 and 4 ranks, and resumed under mpirun
//!   after a time limit, is one process's image bit for bit; on GPU ranks (the fake GPU) the
//!   later passes' launches skip the stopped blocks, the image one process's.
//!
//! The timeouts only tell a hang from an answer; nothing here measures speed. Every run goes
//! through `tests/mpirun_support`, which bounds every wait and tells a hang of gasworks from
//! OpenMPI 4.1's own teardown hang.
#![cfg(feature = "mpi")]

mod mpirun_support;
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mpirun_support::{run, signal, start, Exit, Job, Run, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_gasworks");

fn cornell() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj")
}

/// The render arguments every run shares (small image, several tiles per worker).
fn render_args(scene: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    render_args_sized(scene, out, "24", "4", extra)
}

fn render_args_sized(
    scene: &Path,
    out: &Path,
    tiles: &str,
    spp: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut v: Vec<String> = [
        "render",
        scene.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--width",
        "48",
        "--height",
        "40",
        "--spp",
        spp,
        "--tiles",
        tiles,
        "--threads",
        "1",
        "--backend",
        "cpu",
        "-q",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// `mpirun` with what this machine needs: more ranks than cores, and root allowed (CI runs
/// as root).
fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "--allow-run-as-root"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // No InfiniBand or other networks on a CI machine: shared memory and loopback only.
        .env("OMPI_MCA_btl", "self,vader,tcp")
        .env("OMPI_MCA_btl_tcp_if_include", "lo");
    c
}

fn mpi_render(np: usize, args: &[String]) -> Run {
    let mut c = mpirun();
    c.arg("-np").arg(np.to_string()).arg(BIN).args(args);
    run(c)
}

/// Renders `render_args(scene, out, extra)` in one process (no mpirun), which must succeed:
/// the image a cluster's must be.
fn single_process(scene: &Path, out: &Path, extra: &[&str]) {
    let r = run({
        let mut c = Command::new(BIN);
        c.args(render_args(scene, out, extra));
        c
    });
    assert_eq!(r.code, Some(0), "single process: {}", r.stderr);
}

/// `args` (from [`render_args`]) on the OptiX backend with `--devices devices`, not quiet.
fn on_gpu(mut args: Vec<String>, devices: &str) -> Vec<String> {
    let backend = args.iter().position(|a| a == "cpu").unwrap();
    args[backend] = "optix".into();
    args.retain(|a| a != "-q");
    args.extend(["--devices".into(), devices.into()]);
    args
}

/// A temporary folder and the fake GPU built in it, or `None` where no C compiler can build
/// the fake (the test then has nothing to run).
fn fake_gpu_in_a_tempdir() -> Option<(tempfile::TempDir, support::FakeGpu)> {
    let dir = tempfile::tempdir().unwrap();
    let fake = support::FakeGpu::build(&dir.path().join("fake-gpu"))?;
    Some((dir, fake))
}

/// [`mpirun`] exporting the fake GPU's environment to every rank.
fn mpirun_on_fake_gpu(fake: &support::FakeGpu) -> Command {
    let mut c = mpirun();
    for (k, v) in fake.env() {
        c.arg("-x").arg(format!("{k}={}", v.to_string_lossy()));
    }
    c
}

fn image_bits(path: &Path) -> Vec<u32> {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb32f();
    img.into_raw().into_iter().map(f32::to_bits).collect()
}

/// Rows of `OUT.tiles.csv` as (pass, task, rank).
fn tile_rows(path: &Path) -> Vec<(usize, usize, usize)> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (p, t, k) = (col("pass"), col("task"), col("rank"));
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            let n = |i: usize| rec[i].parse::<usize>().unwrap();
            (n(p), n(t), n(k))
        })
        .collect()
}

#[test]
fn n_ranks_render_the_single_process_image_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    for passes in [None, Some("2")] {
        for schedule in ["regular", "sorted", "adaptive"] {
            for steal in ["on", "off"] {
                let mut extra = vec!["--schedule", schedule, "--steal", steal];
                if let Some(p) = passes {
                    extra.extend(["--pass-spp", p]);
                }
                let single = dir.path().join(format!("single-{schedule}-{steal}.exr"));
                single_process(&scene, &single, &extra);
                let expected = image_bits(&single);
                for np in [2usize, 4] {
                    let what = format!("{np} ranks, {schedule}, steal {steal}, passes {passes:?}");
                    let out = dir.path().join(format!("n{np}-{schedule}-{steal}.exr"));
                    let stats = dir.path().join(format!("n{np}-{schedule}-{steal}.csv"));
                    let mut args = render_args(&scene, &out, &extra);
                    // Not quiet: --stats then prints the cluster table.
                    args.retain(|a| a != "-q");
                    args.extend(["--stats".into(), stats.to_str().unwrap().into()]);
                    let r = mpi_render(np, &args);
                    assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
                    assert!(
                        image_bits(&out) == expected,
                        "{what}: the image differs from one process's"
                    );
                    assert!(
                        r.stderr.contains(&format!("cluster: {np} ranks")),
                        "{what}: no cluster summary: {}",
                        r.stderr
                    );
                    // Every tile of every pass exactly once, by a rank of this job.
                    let rows = tile_rows(&gasworks::sched::report::sibling_paths(&stats).0);
                    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
                    for &(pass, task, rank) in &rows {
                        assert!(rank < np, "{what}: tile {task} on rank {rank}");
                        *seen.entry((pass, task)).or_default() += 1;
                    }
                    let pass_count = if passes.is_some() { 2 } else { 1 };
                    for pass in 0..pass_count {
                        let tasks = rows.iter().filter(|r| r.0 == pass).count();
                        assert!(tasks > 0, "{what}: pass {pass} has no tile");
                        for task in 0..tasks {
                            assert_eq!(
                                seen.get(&(pass, task)),
                                Some(&1),
                                "{what}: pass {pass} tile {task}"
                            );
                        }
                    }
                    // Each rank rendered something: every rank started with its share.
                    for rank in 0..np {
                        assert!(
                            rows.iter().any(|r| r.2 == rank),
                            "{what}: rank {rank} rendered nothing"
                        );
                    }
                }
            }
        }
    }
}

/// Adaptive sampling under mpirun: rank 0 judges the blocks at every pass boundary and plans
/// only those still sampling; the image is one process's, bit for bit, blocks stopped and
/// all, and a time-limited run resumed under mpirun finishes it too.
#[test]
fn adaptive_sampling_under_several_ranks_is_the_single_process_image() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let extra = ["--noise-threshold", "0.05", "--pass-spp", "2"];
    let args = |out: &Path, more: &[&str]| {
        let mut v = render_args_sized(&scene, out, "12", "32", &extra);
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let single = dir.path().join("single.exr");
    let r = run({
        let mut c = Command::new(BIN);
        let mut verbose = args(&single, &["-v"]);
        verbose.retain(|a| a != "-q");
        c.args(verbose);
        c
    });
    assert_eq!(r.code, Some(0), "single process: {}", r.stderr);
    // Some blocks stop (the test says nothing otherwise).
    assert!(
        r.stderr.contains(
            "adaptive: 9 blocks of 16x16; blocks sampling in each pass from pass 1: 9 9 "
        ),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains(", 0 of 9 blocks stopped below"),
        "{}",
        r.stderr
    );
    let expected = image_bits(&single);
    for np in [2usize, 4] {
        let out = dir.path().join(format!("n{np}.exr"));
        let r = mpi_render(np, &args(&out, &[]));
        assert_eq!(r.code, Some(0), "{np} ranks: {}", r.stderr);
        assert!(
            image_bits(&out) == expected,
            "{np} ranks: the image differs"
        );
    }
    let part = dir.path().join("part.exr");
    let resume = dir.path().join("part.exr.gasworks-resume");
    let r = mpi_render(2, &args(&part, &["--time-limit", "0.001s"]));
    assert_eq!(r.code, Some(0), "time-limited: {}", r.stderr);
    assert!(resume.exists(), "{}", r.stderr);
    let r = mpi_render(3, &args(&part, &["--resume", resume.to_str().unwrap()]));
    assert_eq!(r.code, Some(0), "resumed: {}", r.stderr);
    assert!(image_bits(&part) == expected, "resumed: the image differs");
    assert!(!resume.exists());
}

/// Under an environment map beside the Cornell box's lamp every rank measures the map's share
/// of the light samples itself (`--env-share auto`, on its own threads): the ranks agree (the
/// share is in the fingerprint they compare) and the frame is one process's, bit for bit.
#[test]
fn ranks_measure_one_environment_share_and_render_the_single_process_image() {
    let dir = tempfile::tempdir().unwrap();
    let sky = dir.path().join("sky.exr");
    image::Rgb32FImage::from_fn(16, 8, |x, y| {
        if (x, y) == (9, 2) {
            image::Rgb([4000.0, 3800.0, 3000.0])
        } else {
            image::Rgb([0.4, 0.6, 1.0])
        }
    })
    .save(&sky)
    .unwrap();
    let scene = cornell();
    let map = ["--env-map", sky.to_str().unwrap()];
    let single = dir.path().join("single.exr");
    let mut args = render_args(&scene, &single, &map);
    args.retain(|a| a != "-q" && a != "--threads" && a != "1");
    args.push("-v".into());
    let r = run({
        let mut c = Command::new(BIN);
        c.args(&args);
        c
    });
    assert_eq!(r.code, Some(0), "single process: {}", r.stderr);
    assert!(
        r.stderr.contains("environment share: ") && r.stderr.contains("(auto: over"),
        "{}",
        r.stderr
    );
    let expected = image_bits(&single);
    for np in [2usize, 3] {
        let out = dir.path().join(format!("n{np}.exr"));
        let r = mpi_render(np, &render_args(&scene, &out, &map));
        assert_eq!(r.code, Some(0), "{np} ranks: {}", r.stderr);
        assert!(
            image_bits(&out) == expected,
            "{np} ranks: the image differs from one process's"
        );
    }
}

/// `--aov` under mpirun: rank 0 (on CPU threads) traces the layers before the frame and
/// writes them with the image, the single process's layers bit for bit, on the BVH its CPU
/// backend traces (it built one for each before: three builds for two ranks).
#[test]
fn the_layers_of_a_cluster_render_are_the_single_process_layers() {
    let dir = tempfile::tempdir().unwrap();
    let aov = ["--aov", "albedo,normal"];
    let single = dir.path().join("single.exr");
    single_process(&cornell(), &single, &aov);
    let out = dir.path().join("n2.exr");
    let mut c = mpirun();
    c.env("RUST_LOG", "gasworks::cpu::bvh=debug")
        .args(["-np", "2"])
        .arg(BIN)
        .args(render_args(&cornell(), &out, &aov));
    let r = run(c);
    assert_eq!(r.code, Some(0), "2 ranks: {}", r.stderr);
    assert_eq!(
        r.stderr.matches("CPU BVH built").count(),
        2,
        "one BVH a rank: {}",
        r.stderr
    );
    for layer in ["albedo", "normal"] {
        let bits = |name: &str| image_bits(&dir.path().join(format!("{name}.{layer}.exr")));
        assert!(bits("n2") == bits("single"), "{layer}");
    }
}

#[test]
fn one_rank_under_mpirun_is_a_single_process() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.exr"), dir.path().join("b.exr"));
    let r = run({
        let mut c = Command::new(BIN);
        c.args(render_args(&cornell(), &a, &[]));
        c
    });
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = mpi_render(1, &render_args(&cornell(), &b, &[]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("cluster:"), "{}", r.stderr);
    assert!(image_bits(&a) == image_bits(&b));
}

/// mpirun with two app contexts: `good` ranks working in a folder that has the scene, and
/// one rank (the last) in a folder whose `cornell.obj` is `bad` (or missing when `None`),
/// all with the same command line: a node whose copy of the scene is missing or broken.
fn run_with_one_bad_copy(good: usize, bad: Option<&str>) -> (Run, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (ok_dir, bad_dir) = (dir.path().join("ok"), dir.path().join("bad"));
    std::fs::create_dir_all(&ok_dir).unwrap();
    std::fs::create_dir_all(&bad_dir).unwrap();
    let assets = cornell().parent().unwrap().to_path_buf();
    for f in ["cornell.obj", "cornell.mtl"] {
        std::fs::copy(assets.join(f), ok_dir.join(f)).unwrap();
    }
    if let Some(text) = bad {
        std::fs::write(bad_dir.join("cornell.obj"), text).unwrap();
    }
    let out = dir.path().join("out.exr");
    let args = render_args(Path::new("cornell.obj"), &out, &[]);
    let mut c = mpirun();
    c.arg("-np")
        .arg(good.to_string())
        .arg("--wdir")
        .arg(&ok_dir)
        .arg(BIN)
        .args(&args)
        .arg(":")
        .arg("-np")
        .arg("1")
        .arg("--wdir")
        .arg(&bad_dir)
        .arg(BIN)
        .args(&args);
    (run(c), out, dir)
}

#[test]
fn a_scene_missing_on_one_rank_stops_every_rank_with_the_same_error() {
    for good in [1usize, 3] {
        let n = good + 1;
        let (r, out, _dir) = run_with_one_bad_copy(good, None);
        assert_ne!(r.code, Some(0), "{}", r.stderr);
        let line = format!("rank {good} of {n}");
        // Every rank prints the verdict (the reason names the failing rank).
        let verdicts = r
            .stderr
            .matches("error: the job cannot start: 1 rank could not get ready")
            .count();
        assert_eq!(verdicts, n, "{}", r.stderr);
        assert_eq!(r.stderr.matches(&line).count(), n, "{}", r.stderr);
        assert!(r.stderr.contains("No such file"), "{}", r.stderr);
        assert!(!out.exists(), "an image was written");
    }
}

#[test]
fn a_scene_that_does_not_parse_on_one_rank_stops_every_rank() {
    let (r, out, _dir) = run_with_one_bad_copy(1, Some("v 0 0 0\nv 1 0 zero\n"));
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stderr.matches("rank 1 of 2").count(), 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("\"zero\" is not a number"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}

fn run_with_fault(kind: &str) -> (Run, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.exr");
    // Enough work that the fault lands mid-frame: 96 tiles, rank 1 fails after its first.
    let args = render_args_sized(&cornell(), &out, "96", "16", &[]);
    let mut c = mpirun();
    c.env("GASWORKS_TEST_FAULT", format!("rank=1,after=1,kind={kind}"))
        .env("GASWORKS_RANK_TIMEOUT_S", "3")
        .args(["-np", "3"])
        .arg(BIN)
        .args(&args);
    let r = run(c);
    (r, out, dir)
}

/// Finishes `out` from `resume` in one process, renders the whole frame into `single.exr`
/// beside it in one process, and checks the two bit for bit. `args(out, extra)` gives the
/// render's arguments; `what` labels the failures.
fn resumed_in_one_process_is_its_image(
    out: &Path,
    resume: &Path,
    args: impl Fn(&Path, &[&str]) -> Vec<String>,
    what: &str,
) {
    let resumed = run({
        let mut c = Command::new(BIN);
        c.args(args(out, &["--resume", resume.to_str().unwrap()]));
        c
    });
    assert_eq!(resumed.code, Some(0), "{what}: resume: {}", resumed.stderr);
    assert!(!resume.exists(), "{what}: the resume file is left");
    let single = out.with_file_name("single.exr");
    let whole = run({
        let mut c = Command::new(BIN);
        c.args(args(&single, &[]));
        c
    });
    assert_eq!(whole.code, Some(0), "{what}: {}", whole.stderr);
    assert!(
        image_bits(out) == image_bits(&single),
        "{what}: the resumed image differs from one process's"
    );
}

#[test]
fn a_rank_that_dies_mid_frame_fails_the_job_naming_it() {
    for (kind, signal) in [("abort", "signal 6"), ("kill", "signal 9")] {
        let (r, out, dir) = run_with_fault(kind);
        assert_ne!(r.code, Some(0), "{kind}: {}", r.stderr);
        assert!(
            r.stderr.contains("process rank 1") && r.stderr.contains(signal),
            "{kind}: {}{}",
            r.stdout,
            r.stderr
        );
        // mpirun ends the other ranks with SIGTERM: rank 0 writes the tiles that have arrived,
        // their resume file first, and says what the image holds, or says none had come.
        let resume = dir.path().join("out.exr.gasworks-resume");
        if out.exists() {
            assert!(resume.exists(), "{kind}: no resume file: {}", r.stderr);
            assert!(
                r.stderr.contains("error: stopped by SIGTERM:")
                    && r.stderr.contains("out.exr holds samples 0..16 in"),
                "{kind}: {}",
                r.stderr
            );
        } else {
            assert!(
                r.stderr
                    .contains("no tile had arrived, so no image was written"),
                "{kind}: no image and no reason: {}",
                r.stderr
            );
        }
        // Nothing else, half-written or under another name.
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.retain(|name| name != "out.exr" && name != "out.exr.gasworks-resume");
        assert!(left.is_empty(), "{kind}: {left:?}");
    }
}

/// A rank that dies with a finished tile on its way to rank 0. A tile this large (1600
/// pixels) goes by rendezvous, rank 0 copying it out of the sender's memory, which the
/// sender's death leaves unfinished for good. Rank 0 must still answer mpirun's SIGTERM and
/// write what has arrived: its blocking receive (`MPI_Mrecv`) once hung it there until
/// mpirun's SIGKILL, and no image, resume file or message was left. The resume file then
/// finishes one process's image bit for bit.
#[test]
fn a_rank_that_dies_with_a_tile_on_its_way_leaves_rank_0_free_to_write() {
    for kind in ["exit", "kill"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.exr");
        let sized = |out: &Path, extra: &[&str]| {
            let mut args = render_args_sized(&cornell(), out, "12", "16", extra);
            for (flag, value) in [("--width", "160"), ("--height", "120")] {
                let at = args.iter().position(|a| a == flag).unwrap();
                args[at + 1] = value.into();
            }
            args
        };
        let mut c = mpirun();
        c.env("GASWORKS_TEST_FAULT", format!("rank=1,after=2,kind={kind}"))
            .args(["-np", "3"])
            .arg(BIN)
            .args(sized(&out, &[]));
        let r = run(c);
        assert_ne!(r.code, Some(0), "{kind}: {}", r.stderr);
        let resume = dir.path().join("out.exr.gasworks-resume");
        if !out.exists() {
            // Rank 0 answered, though no tile had come (it was not hung).
            assert!(
                r.stderr
                    .contains("no tile had arrived, so no image was written"),
                "{kind}: rank 0 wrote nothing and said nothing: {}",
                r.stderr
            );
            continue;
        }
        assert!(resume.exists(), "{kind}: no resume file: {}", r.stderr);
        assert!(
            r.stderr.contains("error: stopped by SIGTERM:"),
            "{kind}: {}",
            r.stderr
        );
        resumed_in_one_process_is_its_image(&out, &resume, sized, kind);
    }
}

/// A rank that hangs: rank 0 names it after the timeout and ends the job, but first writes
/// what has arrived, as at a stop, and says so; the resume file finishes one process's image
/// bit for bit.
#[test]
fn a_rank_that_falls_silent_is_named_after_the_timeout_and_what_arrived_is_kept() {
    let (r, out, dir) = run_with_fault("silence");
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 1 has sent nothing for"),
        "{}",
        r.stderr
    );
    let resume = dir.path().join("out.exr.gasworks-resume");
    assert!(
        r.stderr
            .contains(&format!("{} holds what had arrived", out.display()))
            && r.stderr.contains(&format!(
                "run the same command with --resume {}",
                resume.display()
            )),
        "{}",
        r.stderr
    );
    assert!(out.exists() && resume.exists(), "{}", r.stderr);
    resumed_in_one_process_is_its_image(
        &out,
        &resume,
        |out, extra| render_args_sized(&cornell(), out, "96", "16", extra),
        "silence",
    );
}

/// Distributed geometry with a rank that hangs or is killed mid-frame: the job ends naming
/// it, and rank 0 first writes the pixels that arrived and says how many samples they hold
/// (after the timeout for a hung rank; at mpirun's SIGTERM for a killed one).
#[test]
fn distributed_geometry_with_a_rank_lost_mid_frame_writes_what_arrived() {
    for (kind, cause) in [
        ("silence", "heard nothing for"),
        ("kill", "stopped by SIGTERM"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.exr");
        // Few samples: the sends to a hung rank pile up in MPI, and each call of a rank that
        // keeps sending gets slower with them.
        let args = render_args_sized(&cornell(), &out, "96", "2", &["--distribute-geometry"]);
        let mut c = mpirun();
        c.env(
            "GASWORKS_TEST_FAULT",
            format!("rank=1,after=20,kind={kind}"),
        )
        .env("GASWORKS_RANK_TIMEOUT_S", "3")
        .args(["-np", "3"])
        .arg(BIN)
        .args(&args);
        let r = run(c);
        assert_ne!(r.code, Some(0), "{kind}: {}", r.stderr);
        if kind == "kill" {
            assert!(
                r.stderr.contains("process rank 1") && r.stderr.contains("signal 9"),
                "{kind}: {}",
                r.stderr
            );
        }
        // A killed rank's job may end before rank 0 hears the SIGTERM; then there is no image.
        if kind == "silence" || out.exists() {
            assert!(
                r.stderr.contains(cause)
                    && r.stderr
                        .contains(&format!("{} holds what arrived", out.display())),
                "{kind}: {}",
                r.stderr
            );
            assert!(out.exists(), "{kind}: {}", r.stderr);
        }
    }
}

#[test]
fn pixelbounds_under_several_ranks_is_refused_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("crop.exr");
    let mut args = render_args(&cornell(), &out, &[]);
    args.extend(["--pixelbounds".into(), "0,24,0,20".into()]);
    let r = mpi_render(2, &args);
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    // Every rank prints the verdict, which names each rank and why.
    assert_eq!(
        r.stderr.matches("error: the job cannot start").count(),
        2,
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("--pixelbounds renders one crop per process"),
        "{}",
        r.stderr
    );
    assert!(!out.exists(), "an image was written");
}

/// The arguments of a cluster render long enough (48x40 pixels, 10000 samples in passes of
/// 50 on one thread per rank, a checkpoint every 0.05 s) to be still rendering when it is
/// stopped or killed, and short enough to finish when resumed.
fn long_render_args(scene: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut extra = extra.to_vec();
    extra.extend(["--pass-spp", "50", "--checkpoint-every", "0.05s"]);
    render_args_sized(scene, out, "4", "10000", &extra)
}

/// Starts the long render of `out` under `mpirun -np 2`, and returns once rank 0 has written
/// a checkpoint (every rank is rendering then: the handshake is behind). SIGUSR1, which
/// mpirun passes to every rank, asks for a checkpoint and ends no rank.
fn start_long_cluster_render(scene: &Path, out: &Path) -> Job {
    let resume = PathBuf::from(format!("{}.gasworks-resume", out.display()));
    let mut c = mpirun();
    c.arg("-np")
        .arg("2")
        .arg(BIN)
        .args(long_render_args(scene, out, &[]));
    let mut job = start(c);
    let t0 = Instant::now();
    while !resume.exists() {
        assert!(
            job.is_running(),
            "the job ended early: {}",
            job.wait().stderr
        );
        assert!(t0.elapsed() < DEADLINE, "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(signal(job.id(), "USR1"), "kill -USR1 mpirun");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        job.is_running(),
        "SIGUSR1 ended the job (a rank without a handler): {}",
        job.wait().stderr
    );
    job
}

/// Finishes the long render of `out` from `resume` under mpirun, and checks it is one
/// process's image bit for bit.
fn resume_into_the_single_process_image(dir: &Path, scene: &Path, out: &Path, resume: &Path) {
    let mut resumed_args = long_render_args(scene, out, &["--resume", resume.to_str().unwrap()]);
    resumed_args.retain(|a| a != "-q");
    let r = mpi_render(2, &resumed_args);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("samples per pixel done"), "{}", r.stderr);
    assert!(r.stderr.contains("the render is complete"), "{}", r.stderr);
    assert!(!resume.exists(), "the resume file is used up");

    let single = dir.join("single.exr");
    let mut single_args = long_render_args(scene, &single, &[]);
    let threads = single_args.iter().position(|a| a == "--threads").unwrap();
    single_args[threads + 1] = "2".into();
    let r = run({
        let mut c = Command::new(BIN);
        c.args(&single_args);
        c
    });
    assert_eq!(r.code, Some(0), "single process: {}", r.stderr);
    assert!(
        image_bits(out) == image_bits(&single),
        "the resumed cluster image differs from one process's"
    );
}

/// A cluster render stopped by its batch system (SIGTERM to mpirun, as Slurm sends at a time
/// limit; mpirun passes it to every rank): rank 0 writes the image with what has arrived and
/// a resume file at once, within mpirun's default grace of 1 s, and the job exits non-zero.
/// The same command plus `--resume`, under mpirun again, finishes one process's image bit
/// for bit.
#[test]
fn a_cluster_render_stopped_by_sigterm_keeps_its_image_and_resumes_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let out = dir.path().join("stopped.exr");
    let resume = dir.path().join("stopped.exr.gasworks-resume");
    let job = start_long_cluster_render(&scene, &out);
    assert!(signal(job.id(), "TERM"), "kill -TERM mpirun");
    let ended = job.wait();
    let stderr = &ended.stderr;
    assert_ne!(ended.code, Some(0), "{stderr}");
    if let Some(ranks) = &ended.ranks_when_stuck {
        // mpirun was stuck in its teardown: no rank may have claimed a finished frame.
        assert!(!ranks.contains(&Exit::Code(0)), "{ranks:?}: {stderr}");
    }
    assert!(
        stderr.contains("error: stopped by SIGTERM:")
            && stderr.contains("to finish it, run the same command with --resume"),
        "{stderr}"
    );
    assert!(out.exists(), "no image: {stderr}");
    assert!(resume.exists(), "no resume file: {stderr}");
    resume_into_the_single_process_image(dir.path(), &scene, &out, &resume);
}

/// A cluster render whose every rank is killed outright (SIGKILL: a lost node, the OOM
/// killer) after `--checkpoint-every` wrote checkpoints on rank 0 leaves no image, and the
/// same command plus `--resume` finishes one process's image bit for bit.
#[test]
fn a_killed_cluster_render_resumes_from_rank_0s_checkpoint_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let out = dir.path().join("killed.exr");
    let resume = dir.path().join("killed.exr.gasworks-resume");
    let job = start_long_cluster_render(&scene, &out);
    // The ranks are mpirun's children on this machine.
    let ranks = job.children();
    assert_eq!(ranks.len(), 2, "ranks: {ranks:?}");
    for pid in ranks {
        assert!(signal(pid, "KILL"), "kill -KILL {pid}");
    }
    let ended = job.wait();
    assert_ne!(ended.code, Some(0), "the job was killed: {}", ended.stderr);
    assert!(!out.exists(), "a killed job writes no image");
    assert!(resume.exists());
    resume_into_the_single_process_image(dir.path(), &scene, &out, &resume);
}

/// A checkpoint written after the frame's last tile, then rank 0 killed before the ranks'
/// statistics of the pass, and so before the image: the resume file holds every sample. The
/// same command plus `--resume` under mpirun renders nothing, writes that film as the image
/// (one process's, bit for bit) and removes the file, as one process does.
#[test]
fn a_cluster_checkpoint_after_the_last_tile_gives_its_image_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("last.exr");
    let resume = dir.path().join("last.exr.gasworks-resume");
    // Two ranks, one pass of 6 tiles; rank 0 writes a checkpoint after each tile that reaches
    // it (every microsecond: each write takes longer), and kills itself after the sixth's.
    let args = render_args_sized(
        &cornell(),
        &out,
        "6",
        "4",
        &["--checkpoint-every", "0.000001s"],
    );
    let mut c = mpirun();
    c.env("GASWORKS_TEST_FAULT", "rank=0,after=6,kind=kill")
        .args(["-np", "2"])
        .arg(BIN)
        .args(&args);
    let killed = run(c);
    assert_ne!(killed.code, Some(0), "rank 0 was killed: {}", killed.stderr);
    assert!(!out.exists(), "killed before its image");
    assert!(resume.exists(), "no checkpoint: {}", killed.stderr);

    let mut resumed = args.clone();
    resumed.retain(|a| a != "-q");
    resumed.extend(["--resume".to_string(), resume.to_str().unwrap().to_string()]);
    let r = mpi_render(2, &resumed);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("4 of 4 samples per pixel done"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("the render is complete"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing left to render"), "{}", r.stderr);
    assert!(!resume.exists(), "the resume file is used up");

    let single = dir.path().join("single.exr");
    let r = run({
        let mut c = Command::new(BIN);
        c.args(render_args_sized(&cornell(), &single, "6", "4", &[]));
        c
    });
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        image_bits(&out) == image_bits(&single),
        "not one process's image"
    );
}

/// `--time-limit` under mpirun: rank 0 plans no pass predicted to end past the limit, the job
/// succeeds with the image whole at that boundary and a resume file, and the same command
/// plus `--resume` finishes one process's image bit for bit.
#[test]
fn a_cluster_render_at_its_time_limit_is_whole_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let limited = dir.path().join("limited.exr");
    let resume = dir.path().join("limited.exr.gasworks-resume");
    let mut args = render_args(&scene, &limited, &["--pass-spp", "2"]);
    args.retain(|a| a != "-q");
    let mut first = args.clone();
    first.extend(["--time-limit".into(), "0.001s".into()]);
    let r = mpi_render(2, &first);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("at the time limit: 2 of 4 samples per pixel everywhere"),
        "{}",
        r.stderr
    );
    assert!(limited.exists() && resume.exists());

    let mut again = args.clone();
    again.extend(["--resume".into(), resume.to_str().unwrap().into()]);
    let r = mpi_render(2, &again);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!resume.exists());

    let single = dir.path().join("single.exr");
    single_process(&scene, &single, &["--pass-spp", "2"]);
    assert!(image_bits(&limited) == image_bits(&single));
}

/// The supervisor's own rules, on stand-ins for mpirun: a command's exit code and output
/// come back; a parent that outlives its exited children without reaping them (mpirun stuck
/// in its teardown) is killed after the grace, with how each child exited.
#[test]
fn the_supervisor_tells_a_stuck_mpirun_from_a_finished_job() {
    let r = run({
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 7"]);
        c
    });
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (Some(7), "out\n", "err\n")
    );
    assert!(r.ranks_when_stuck.is_none());

    // Two children exit (3, and killed by SIGTERM) once the shell has become `sleep`, which
    // never reaps them.
    let t0 = Instant::now();
    let r = run({
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "sh -c 'sleep 0.5; exit 3' & sh -c 'sleep 0.5; kill -TERM $$' & echo said >&2; exec sleep 600",
        ]);
        c
    });
    assert!(t0.elapsed() < DEADLINE, "not killed at the grace");
    assert_eq!(r.code, None);
    assert_eq!(
        r.ranks_when_stuck,
        Some(vec![Exit::Code(3), Exit::Signal(15)])
    );
    assert_eq!(r.stderr, "said\n");
}

/// Under mpirun, on the fake GPU (tests/support/fake_gpu_*.c): each rank's GPU faults on its
/// calibration piece (`GASWORKS_FAULT_AT_TILE=1`), its rank retires both of its streams
/// before the first pass and tells rank 0 before sending its timings, and the ranks' CPU
/// threads render the frame: exit 0, the image of one process on the CPU bit for bit, each
/// rank's warning and rank 0's closing line saying "retired before pass 1".
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_lost_in_its_calibration_on_every_rank_leaves_the_cpus_the_frame() {
    let Some((dir, fake)) = fake_gpu_in_a_tempdir() else {
        return;
    };
    let scene = cornell();
    let single = dir.path().join("single.exr");
    single_process(&scene, &single, &["--pass-spp", "2"]);
    let out = dir.path().join("lost.exr");
    // The GPU beside one CPU thread on each rank (not quiet: the warnings are the point).
    let args = on_gpu(
        render_args(&scene, &out, &["--pass-spp", "2"]),
        "gpu0x2,cpu:1",
    );
    let mut c = mpirun_on_fake_gpu(&fake);
    c.arg("-np").arg("2");
    c.args(["-x", "GASWORKS_FAULT_AT_TILE=1"])
        .arg(BIN)
        .args(&args);
    let r = run(c);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        image_bits(&out) == image_bits(&single),
        "not one process's image"
    );
    for rank in 0..2 {
        let says = format!("rank {rank}: calibrating worker gpu0/s0 (optix:0/w0) on ");
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(&says))
            .unwrap_or_else(|| panic!("no {says:?} in:\n{}", r.stderr));
        assert!(
            line.contains("CUDA_ERROR_ILLEGAL_ADDRESS")
                && line.contains("so its workers gpu0/s0, gpu0/s1 are retired"),
            "{line}"
        );
    }
    assert!(
        r.stderr
            .contains("the frame went on without 4 of 6 workers")
            && r.stderr.contains("r1/gpu0/s1, retired before pass 1"),
        "{}",
        r.stderr
    );
}

/// Rows of `OUT.tiles.csv` as (x, y, w, h, rank).
fn tile_rects(path: &Path) -> Vec<[u32; 5]> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    let cols: Vec<usize> = ["x", "y", "w", "h", "rank"]
        .iter()
        .map(|name| headers.iter().position(|h| h == *name).unwrap())
        .collect();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            let mut row = [0u32; 5];
            for (v, &c) in row.iter_mut().zip(&cols) {
                *v = rec[c].parse().unwrap();
            }
            row
        })
        .collect()
}

/// A GPU rank beside a CPU rank, both rendering (not retired), under mpirun on the fake GPU
/// (tests/support/fake_gpu_*.c: the OptiX backend's host code through the real FFI; no device
/// code runs, so a GPU tile comes back black). Rank 0 renders with `--backend optix --devices
/// gpu0x2`, rank 1 with one CPU thread; calibrated and stealing (the defaults), and with
/// neither, where each rank keeps its share by worker counts. Every tile comes once; the
/// tiles rank 0's GPU streams rendered are black, and rank 1's are one process's CPU render
/// bit for bit: the tiles that the GPU rank's workers rendered reached rank 0's film, and
/// nothing else touched the CPU rank's.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_rank_and_a_cpu_rank_each_render_their_tiles_of_the_frame() {
    let Some((dir, fake)) = fake_gpu_in_a_tempdir() else {
        return;
    };
    let scene = cornell();
    let single = dir.path().join("single.exr");
    single_process(&scene, &single, &[]);
    let reference = image::open(&single).unwrap().to_rgb32f();
    for (calibrate, steal) in [("on", "on"), ("off", "off")] {
        let what = format!("--calibrate {calibrate} --steal {steal}");
        let out = dir.path().join(format!("cal-{calibrate}.exr"));
        let stats = dir.path().join(format!("cal-{calibrate}.csv"));
        let extra = [
            "--calibrate",
            calibrate,
            "--steal",
            steal,
            "--stats",
            stats.to_str().unwrap(),
        ];
        let cpu_args = render_args(&scene, &out, &extra);
        let gpu_args = on_gpu(cpu_args.clone(), "gpu0x2");
        let mut c = mpirun_on_fake_gpu(&fake);
        c.args(["-np", "1"]).arg(BIN).args(&gpu_args);
        c.args([":", "-np", "1"]).arg(BIN).args(&cpu_args);
        let r = run(c);
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        // The cluster table (printed with --stats) names each rank's backend.
        let rank_line = |rank: usize| {
            r.stderr
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("rank {rank} ")))
                .unwrap_or_else(|| panic!("{what}: no line for rank {rank}:\n{}", r.stderr))
        };
        assert!(
            rank_line(0).contains("[optix on GPU 0: Fake GPU (host memory)"),
            "{what}: rank 0 did not render on the (fake) GPU:\n{}",
            r.stderr
        );
        assert!(
            rank_line(1).contains("[cpu (1 thread"),
            "{what}: {}",
            r.stderr
        );
        assert!(
            !r.stderr.contains("warning"),
            "{what}: a warning (a worker retired?):\n{}",
            r.stderr
        );
        let image = image::open(&out).unwrap().to_rgb32f();
        let rects = tile_rects(&gasworks::sched::report::sibling_paths(&stats).0);
        let mut covered = vec![0u32; 48 * 40];
        for &[x, y, w, h, rank] in &rects {
            for py in y..y + h {
                for px in x..x + w {
                    covered[(py * 48 + px) as usize] += 1;
                    let got = image.get_pixel(px, py).0;
                    if rank == 0 {
                        assert_eq!(
                            got, [0.0; 3],
                            "{what}: GPU tile at ({x}, {y}), pixel ({px}, {py})"
                        );
                    } else {
                        let want = reference.get_pixel(px, py).0;
                        assert!(
                            got.map(f32::to_bits) == want.map(f32::to_bits),
                            "{what}: CPU tile at ({x}, {y}), pixel ({px}, {py}): {got:?}, one process {want:?}"
                        );
                    }
                }
            }
        }
        assert!(
            covered.iter().all(|&n| n == 1),
            "{what}: not every pixel in exactly one tile"
        );
        assert!(
            rects.iter().any(|r| r[4] == 0),
            "{what}: the GPU rank rendered no tile"
        );
        if steal == "off" {
            // Shares by worker counts (2 GPU streams, 1 CPU thread), each kept.
            assert!(
                rects.iter().any(|r| r[4] == 1),
                "{what}: the CPU rank rendered no tile"
            );
        }
    }
}

/// `--aov` under mpirun where rank 0 renders on GPUs alone (the fake GPU, beside a CPU rank):
/// rank 0 traces the layers beside its GPU's setup and frame, as one process does, rather than
/// before the handshake, where every rank would wait; they are still the single process's
/// layers bit for bit.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_rank_0_traces_the_layers_beside_its_gpu() {
    let Some((dir, fake)) = fake_gpu_in_a_tempdir() else {
        return;
    };
    let scene = cornell();
    let aov = ["--aov", "albedo,normal"];
    let single = dir.path().join("single.exr");
    single_process(&scene, &single, &aov);
    let out = dir.path().join("n2.exr");
    let cpu_args = render_args(&scene, &out, &aov);
    let mut c = mpirun_on_fake_gpu(&fake);
    c.args(["-np", "1"])
        .arg(BIN)
        .args(on_gpu(cpu_args.clone(), "gpu0x2"));
    c.args([":", "-np", "1"]).arg(BIN).args(&cpu_args);
    let r = run(c);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for layer in ["albedo", "normal"] {
        assert!(
            r.stderr.contains(&format!(
                "aov: {} ({layer}, ",
                dir.path().join(format!("n2.{layer}.exr")).display()
            )) && r.stderr.contains("beside the GPU's setup and frame)"),
            "{layer}: not traced beside the GPU:\n{}",
            r.stderr
        );
        let bits = |name: &str| image_bits(&dir.path().join(format!("{name}.{layer}.exr")));
        assert!(bits("n2") == bits("single"), "{layer}");
    }
}

/// Adaptive sampling under mpirun on GPU ranks (the fake GPU, which renders noise on request
/// but for a flat column, 16 <= x < 32, `FAKE_OPTIX_RENDER_NOISE`): rank 0 counts the tiles
/// from the GPU workers' launch work and, once the flat column's blocks stop, sends tiles
/// that skip them with their skip masks; the ranks' launches carry the skip bytes (the fake
/// logs how many pixels each skipped), and the image is one process's on the same fake GPU,
/// bit for bit.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn adaptive_gpu_ranks_render_tiles_that_skip_the_stopped_blocks() {
    let Some((dir, fake)) = fake_gpu_in_a_tempdir() else {
        return;
    };
    let scene = cornell();
    let args = |out: &Path| -> Vec<String> {
        [
            "render",
            scene.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--width",
            "64",
            "--height",
            "48",
            "--spp",
            "32",
            "--pass-spp",
            "2",
            "--noise-threshold",
            "0.01",
            "--backend",
            "optix",
            "--devices",
            "gpu0x2",
            "--threads",
            "1",
        ]
        .map(String::from)
        .to_vec()
    };
    let single = dir.path().join("single.exr");
    let r = run({
        let mut c = Command::new(BIN);
        c.args(args(&single))
            .envs(fake.env())
            .env("FAKE_OPTIX_RENDER_NOISE", "1");
        c
    });
    assert_eq!(r.code, Some(0), "single process: {}", r.stderr);
    assert!(
        r.stderr
            .contains("3 of 12 blocks stopped below the noise threshold"),
        "{}",
        r.stderr
    );
    let out = dir.path().join("cluster.exr");
    let log = dir.path().join("fake.log");
    let mut c = mpirun_on_fake_gpu(&fake);
    c.args(["-x", "FAKE_OPTIX_RENDER_NOISE=1"])
        .arg("-x")
        .arg(format!("FAKE_GPU_LOG={}", log.display()))
        .args(["-np", "2"])
        .arg(BIN)
        .args(args(&out));
    let r = run(c);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        image_bits(&out) == image_bits(&single),
        "the cluster's image is not one process's:\n{}",
        r.stderr
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let skipped: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("launch "))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("skipped="))
        })
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(
        skipped.contains(&(16 * 48)),
        "no launch skipped the flat column:\n{text}"
    );
}

/// `--distribute-geometry` under mpirun: each rank holds part of the Cornell box and rays
/// travel between them; the image is one process's plain render, bit for bit.
#[test]
fn distributed_geometry_under_mpirun_is_the_single_process_image() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let single = dir.path().join("single.exr");
    single_process(&scene, &single, &[]);
    let expected = image_bits(&single);
    let cases: [(usize, &[&str]); 3] = [
        (2, &["--distribute-geometry"]),
        (4, &["--distribute-geometry"]),
        (3, &["--distribute-geometry", "--replicate", "50%"]),
    ];
    for (np, extra) in cases {
        let out = dir.path().join(format!("geometry-{np}.exr"));
        let mut args = render_args(&scene, &out, extra);
        args.retain(|a| a != "-q");
        let r = mpi_render(np, &args);
        assert_eq!(r.code, Some(0), "{np} ranks: {}", r.stderr);
        assert!(
            image_bits(&out) == expected,
            "{np} ranks: the image differs"
        );
        // Its metadata too: the render key holds the whole scene's content hash, which no
        // rank's part alone gives.
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(&single).unwrap(),
            "{np} ranks: the files differ"
        );
        assert!(
            r.stderr
                .contains(&format!("on {np} rank(s), the geometry spread over them")),
            "{}",
            r.stderr
        );
        if extra.contains(&"--replicate") {
            assert!(r.stderr.contains("hot groups"), "{}", r.stderr);
        }
    }
}

/// The memory bound of `--distribute-geometry`, from the ranks' own reports (`-v`): each rank
/// holds its domain's groups and the replicated ones (the lights), every group is held by one
/// rank or by all, and a rank's own share of the scene's bytes of groups is at most 1/N of the
/// unreplicated ones plus 10%.
#[test]
fn distributed_geometry_ranks_hold_their_share_of_the_scene() {
    let dir = tempfile::tempdir().unwrap();
    let made = run({
        let mut c = Command::new(BIN);
        c.args(["gen", "toystore", "--shelves", "12", "-o"])
            .arg(dir.path());
        c
    });
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let scene = dir.path().join("toystore.obj");
    for np in [2, 4] {
        let out = dir.path().join(format!("share-{np}.exr"));
        let mut args = render_args_sized(&scene, &out, "4", "1", &["--distribute-geometry"]);
        args.retain(|a| a != "-q");
        args.push("-v".into());
        let r = mpi_render(np, &args);
        assert_eq!(r.code, Some(0), "{np} ranks: {}", r.stderr);
        // "rank R: T of T' triangles; B of the scene's A bytes of groups (G GiB), P of them
        // on every rank; ..."
        let shares: Vec<[u64; 3]> = (0..np)
            .map(|rank| {
                let head = format!("rank {rank}: ");
                let line = r
                    .stderr
                    .lines()
                    .find(|l| l.starts_with(&head) && l.contains("bytes of groups"))
                    .unwrap_or_else(|| panic!("no share of rank {rank}: {}", r.stderr));
                let numbers: Vec<u64> = line
                    .split([' ', ';', '(', ','])
                    .filter_map(|w| w.parse().ok())
                    .collect();
                // Triangles, of all, bytes, of all, then the replicated bytes ("R:" and the
                // GiB are not whole numbers).
                [numbers[2], numbers[3], numbers[4]]
            })
            .collect();
        let [_, all, replicated] = shares[0];
        assert!(
            shares.iter().all(|s| s[1] == all && s[2] == replicated),
            "{shares:?}"
        );
        let own: Vec<u64> = shares.iter().map(|s| s[0] - replicated).collect();
        assert_eq!(own.iter().sum::<u64>(), all - replicated, "{shares:?}");
        let bound = (all - replicated) as f64 / np as f64 * 1.1;
        assert!(
            own.iter().all(|&b| b as f64 <= bound),
            "{np} ranks: {own:?} bytes each, more than {bound:.0}"
        );
    }
}

/// GPU ranks of `--distribute-geometry` under mpirun, on the fake GPU (its ray casts miss
/// everything, and no device code runs): each rank builds the GASes of its own part only, as
/// many triangles as its `-v` line counts, casts its rays through the ray-cast pipeline, and
/// frees all it made. The image needs a lent GPU (docs/gpu-checks.md).
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn distributed_geometry_gpu_ranks_build_only_their_domain() {
    let Some((dir, fake)) = fake_gpu_in_a_tempdir() else {
        return;
    };
    let out = dir.path().join("gpu.exr");
    let mut args = render_args_sized(&cornell(), &out, "4", "1", &["--distribute-geometry"]);
    args.retain(|a| a != "-q");
    args.push("-v".into());
    let backend = args.iter().position(|a| a == "--backend").unwrap() + 1;
    args[backend] = "optix".into();
    let logs = dir.path().join("fake");
    let np = 3;
    let mut c = mpirun_on_fake_gpu(&fake);
    let per_rank = format!(
        "FAKE_GPU_LOG={}.$OMPI_COMM_WORLD_RANK exec \"$0\" \"$@\"",
        logs.display()
    );
    c.args(["-np", &np.to_string(), "sh", "-c", &per_rank, BIN])
        .args(&args);
    let r = run(c);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(out.exists(), "no image");
    let mut built_in_all = 0;
    for rank in 0..np {
        // "rank R: T of T' triangles; ..."
        let head = format!("rank {rank}: ");
        let line = r
            .stderr
            .lines()
            .find(|l| l.starts_with(&head) && l.contains("triangles;"))
            .unwrap_or_else(|| panic!("no part of rank {rank}: {}", r.stderr));
        let held: u64 = line[head.len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let log = std::fs::read_to_string(format!("{}.{rank}", logs.display())).unwrap();
        let field = |l: &str, key: &str| -> Option<u64> {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
        };
        let built: u64 = log
            .lines()
            .filter(|l| l.starts_with("build "))
            .filter_map(|l| field(l, "prims"))
            .sum();
        assert_eq!(
            built, held,
            "rank {rank}: built {built} of its {held} triangles\n{log}"
        );
        built_in_all += built;
        let casts = log
            .lines()
            .filter(|l| l.starts_with("launch ") && l.contains(" params=32 "))
            .count();
        assert!(casts > 0, "rank {rank}: no ray cast\n{log}");
        assert!(
            log.lines()
                .all(|l| field(l, "result").is_none_or(|r| r == 0)),
            "rank {rank}: a call the driver refused\n{log}"
        );
        support::assert_nothing_left_alive(&format!("rank {rank}"), &log);
    }
    // The light is on every rank; the rest of the box is spread.
    let whole = 32;
    assert!(
        built_in_all > whole && built_in_all < np * whole,
        "{built_in_all}"
    );
}

/// A camera path under mpirun (`--camera-path`): every rank renders the frames in turn, each
/// frame one job; the files are one process's, byte for byte, and `--resume` under mpirun
/// renders again only the frames whose images are missing.
#[test]
fn a_camera_path_under_mpirun_renders_one_process_frames() {
    let dir = tempfile::tempdir().unwrap();
    let walk = dir.path().join("walk.csv");
    std::fs::write(
        &walk,
        "0,1,3.5,0,1,0,0,1,0,39.3\n0.3,1.1,3.4,0,1,0,0,1,0,39.3\n0.6,1.2,3.3,0,0.9,0,0,1,0,42\n",
    )
    .unwrap();
    let path = ["--camera-path", walk.to_str().unwrap()];
    let one = dir.path().join("one-#.exr");
    single_process(&cornell(), &one, &path);
    let ranks = dir.path().join("ranks-#.exr");
    let args = render_args(&cornell(), &ranks, &path);
    let r = mpi_render(2, &args);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let same = |what: &str| {
        for k in 1..=3 {
            let a = std::fs::read(dir.path().join(format!("one-{k}.exr"))).unwrap();
            let b = std::fs::read(dir.path().join(format!("ranks-{k}.exr"))).unwrap();
            assert!(a == b, "{what}: frame {k} differs");
        }
    };
    same("2 ranks");
    for k in [2, 3] {
        std::fs::remove_file(dir.path().join(format!("ranks-{k}.exr"))).unwrap();
    }
    let mut resumed = args.clone();
    resumed.retain(|a| a != "-q");
    resumed.push("--resume".into());
    let r = mpi_render(2, &resumed);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("frame 1: ") && r.stderr.contains("is complete"),
        "{}",
        r.stderr
    );
    same("2 ranks, resumed");
}

/// Temporal domain assignment under mpirun (`--reassign`): between the frames of a walk
/// through a small toy store, rank 0 moves cells between the ranks by the last frame's
/// traffic. Every frame is still one process's file, byte for byte; cells do move, never more
/// bytes a frame than the budget; and the segments crossing between ranks fall below the
/// fixed assignment's.
#[test]
fn reassigned_domains_under_mpirun_keep_the_one_process_frames() {
    let dir = tempfile::tempdir().unwrap();
    let gen = Command::new(BIN)
        .args(["gen", "toystore", "--shelves", "6", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let rows = std::fs::read_to_string(dir.path().join("toystore-walk.csv")).unwrap();
    let walk = dir.path().join("walk.csv");
    std::fs::write(&walk, rows.lines().take(5).collect::<Vec<_>>().join("\n")).unwrap();
    let scene = dir.path().join("toystore.obj");
    let path = ["--camera-path", walk.to_str().unwrap()];
    single_process(&scene, &dir.path().join("one-#.exr"), &path);
    let spread = |name: &str, more: &[&str]| {
        let mut extra = vec!["--distribute-geometry", "-v"];
        extra.extend(path);
        extra.extend(more);
        let mut args = render_args(&scene, &dir.path().join(name), &extra);
        args.retain(|a| a != "-q");
        let r = mpi_render(3, &args);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        for k in 1..=4 {
            let a = std::fs::read(dir.path().join(format!("one-{k}.exr"))).unwrap();
            let b = std::fs::read(dir.path().join(name.replace('#', &k.to_string()))).unwrap();
            assert!(a == b, "{name}: frame {k} differs");
        }
        r.stderr
    };
    let fixed = spread("fixed-#.exr", &[]);
    let moved = spread("moved-#.exr", &["--reassign", "30%"]);
    // "... of the scene's N bytes of groups ...": the budget is 30% of N.
    let all: u64 = number_before(&moved, " bytes of groups (");
    let moves: Vec<(u64, u64)> = moved
        .lines()
        .filter(|l| l.contains(" cells (") && l.contains("moving "))
        .map(|l| {
            let cells = number_before(l.split(" cells (").next().unwrap(), "");
            (cells, number_before(l, " bytes of groups)"))
        })
        .collect();
    assert_eq!(moves.len(), 3, "{moved}");
    assert!(moves.iter().any(|&(cells, _)| cells > 0), "{moved}");
    assert!(
        moves.iter().all(|&(_, b)| b * 10 <= all * 3),
        "{moves:?} of {all}"
    );
    let crossing = |text: &str| -> Vec<f64> {
        text.lines()
            .filter_map(|l| l.split("; ").nth(1))
            .filter_map(|l| l.strip_suffix(" segments between cells of different ranks"))
            .map(|l| l.split('%').next().unwrap().parse().unwrap())
            .collect()
    };
    let (before, after) = (crossing(&fixed), crossing(&moved));
    assert_eq!((before.len(), after.len()), (4, 4), "{fixed}\n{moved}");
    assert_eq!(before[0], after[0]);
    assert!(
        after[1..].iter().sum::<f64>() < before[1..].iter().sum::<f64>(),
        "{before:?} {after:?}"
    );
}

/// The unsigned number that ends `text` before `marker` (the first place `marker` occurs;
/// "" for the end of `text`).
fn number_before(text: &str, marker: &str) -> u64 {
    let head = match marker {
        "" => text,
        m => &text[..text.find(m).unwrap_or_else(|| panic!("{m:?} in {text}"))],
    };
    let digits: String = head
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number before {marker:?} in {head}"))
}
