//! The OptiX backend's host code through the real FFI, end to end, on a machine without a GPU:
//! a fake `libcuda` whose device memory is host memory (tests/support/fake_gpu_cuda.c) and a
//! fake `libnvoptix` that "builds" there, checks what a driver would reject, and logs every
//! call (tests/support/fake_gpu_optix.c). `gasworks build-bench` runs against them, and the log
//! must show the batch's invariants as the driver saw them:
//! - every triangle of the scene built exactly once, in the GASes the CSV counts;
//! - builds on different streams never share scratch bytes, and no two GASes share output bytes;
//! - each build's buffers aligned and as large as the fake asked for (else its build fails);
//! - with `--build-contexts per-stream`, one context per stream.
//!
//! `Accel::build` (what a render builds: the batch, compaction, the IAS) runs in a child of
//! this test binary, where every GAS must be compacted through the context that built it and
//! the IAS must find a GAS behind each instance's handle.
//!
//! `gasworks render --backend optix` runs its whole host path on the fakes: module, program
//! groups and pipeline (entry names and the launch-parameter variable found in the shipped
//! PTX), the shader binding table's records, and every launch's parameter size against the
//! PTX's declaration. (No device code runs: the image is not checked.) With two alike fake
//! GPUs (`FAKE_CUDA_DEVICES=2`) it runs the multi-GPU path: a scene and pipelines per GPU,
//! one speed class, the one GPU's image.
//!
//! Then what only a broken driver shows: a build that never returns must end build-bench
//! through the watchdog (exit status 75, the batch and the build named), a launch that never
//! returns must end the render through the tile watch, and with `--isolate` a crash inside the
//! driver costs its own configuration only.
//!
//! None of this replaces the GPU: the fake completes every call at once, so nothing runs
//! concurrently, and it runs no device code; docs/gpu-checks.md lists what still needs one.

mod cli_support;
mod support;

use cli_support::{cornell, gasworks_command};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The fake GPU and a 40-group sponza-like scene, made once per test binary.
struct Fixture {
    fake: support::FakeGpu,
    scene: PathBuf,
    triangles: u64,
}

fn fixture() -> Option<&'static Fixture> {
    static FIXTURE: OnceLock<Option<Fixture>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake_gpu");
            let fake = support::FakeGpu::build(&dir)?;
            let out = gasworks_command()
                .args([
                    "gen",
                    "sponza-like",
                    "--groups",
                    "40",
                    "--triangles",
                    "20000",
                ])
                .args(["--quiet", "-o"])
                .arg(dir.join("scene"))
                .output()
                .expect("run gasworks gen");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let scene = dir.join("scene/sponza_like.obj");
            let info = gasworks_command()
                .args(["info", "--json"])
                .arg(&scene)
                .output()
                .expect("run gasworks info");
            let json: serde_json::Value =
                serde_json::from_slice(&info.stdout).expect("info --json");
            let triangles = json["triangles"].as_u64().expect("a triangle count");
            Some(Fixture {
                fake,
                scene,
                triangles,
            })
        })
        .as_ref()
}

/// `gasworks SUBCOMMAND SCENE ARGS...` through the fakes, with `env` added.
fn gasworks_on_fake(
    f: &Fixture,
    subcommand: &str,
    scene: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Command {
    let mut cmd = gasworks_command();
    cmd.arg(subcommand).arg(scene).args(args).envs(f.fake.env());
    for k in [
        "FAKE_GPU_LOG",
        "FAKE_OPTIX_HANG_AT_BUILD",
        "FAKE_OPTIX_ABORT_AT_CONTEXT",
        "FAKE_OPTIX_HANG_AT_LAUNCH",
        "FAKE_OPTIX_FAIL_LAUNCHES_FROM",
        "FAKE_OPTIX_FAULT_AT_LAUNCH",
        "FAKE_OPTIX_RENDER_NOISE",
        "FAKE_CUDA_DEVICES",
        "GASWORKS_FAULT_AT_TILE",
        // scripts/gpu-session.sh sets it for its own renders.
        "GASWORKS_ON_WORKER_ERROR",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `gasworks build-bench` on the fixture's scene through the fakes.
fn build_bench(f: &Fixture, args: &[&str], env: &[(&str, &Path)]) -> Command {
    gasworks_on_fake(f, "build-bench", &f.scene, args, env)
}

/// One `build ...` or `compact ...` line of the fake's log, as `key=value` fields.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// "0x7f00+384" as the byte range it names.
fn range(text: &str) -> std::ops::Range<u64> {
    let (at, len) = text.split_once('+').expect("ADDRESS+BYTES");
    let at = u64::from_str_radix(at.trim_start_matches("0x"), 16).expect("hex address");
    at..at + len.parse::<u64>().expect("byte count")
}

fn overlap(a: &std::ops::Range<u64>, b: &std::ops::Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("the CSV");
    let header = r.headers().expect("a header").clone();
    r.records()
        .map(|rec| {
            let rec = rec.expect("a row");
            header
                .iter()
                .zip(rec.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// Every configuration of streams, scratch, assignment, contexts, merging and enqueue threads,
/// one process each with no warm-up and one repeat, so that the log holds exactly one
/// enqueue of its batch (then the single-GAS reference).
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn batched_builds_keep_their_invariants_through_the_real_ffi() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for streams in ["1", "4"] {
        for scratch in ["shared", "per-stream"] {
            for assign in ["round-robin", "lpt"] {
                for contexts in ["shared", "per-stream", "auto"] {
                    for (merge, threads) in [("0", "1"), ("1024", "2")] {
                        // `auto`, the default: a context per stream for more than one enqueue
                        // thread on more than one stream (LPT here has the safe default weight).
                        let expect_contexts = match contexts {
                            "auto" if threads != "1" && streams != "1" => "per-stream",
                            "auto" => "shared",
                            given => given,
                        };
                        let label = format!(
                            "--streams {streams} --scratch {scratch} --assign {assign} \
                             --build-contexts {contexts} --merge-below {merge} --enqueue-threads {threads}"
                        );
                        let log = dir.path().join(format!("{checked}.log"));
                        let csv = dir.path().join(format!("{checked}.csv"));
                        let out = build_bench(
                            f,
                            &[
                                "--streams",
                                streams,
                                "--scratch",
                                scratch,
                                "--assign",
                                assign,
                                "--build-contexts",
                                contexts,
                                "--merge-below",
                                merge,
                                "--enqueue-threads",
                                threads,
                                "--compact",
                                "--guard-bytes",
                                "4096",
                                "--warmup",
                                "0",
                                "--repeat",
                                "1",
                            ],
                            &[("FAKE_GPU_LOG", &log)],
                        )
                        .arg("--csv")
                        .arg(&csv)
                        .output()
                        .expect("run build-bench");
                        let stderr = String::from_utf8_lossy(&out.stderr);
                        assert!(out.status.success(), "{label}: {stderr}");
                        let rows = csv_rows(&csv);
                        let gases: usize = rows[0]["gases"].parse().expect("gases");
                        let text = std::fs::read_to_string(&log).expect("the fake's log");
                        check_batch(
                            &label,
                            &text,
                            gases,
                            streams.parse().unwrap(),
                            expect_contexts,
                            f.triangles,
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 48);
}

/// The invariants of one batch's enqueue, as the fake driver logged it.
fn check_batch(
    label: &str,
    log: &str,
    gases: usize,
    streams: usize,
    contexts: &str,
    triangles: u64,
) {
    let builds: Vec<_> = log
        .lines()
        .filter(|l| l.starts_with("build "))
        .map(fields)
        .collect();
    assert!(
        builds.iter().all(|b| b["result"] == "0"),
        "{label}: a build the driver refused:\n{log}"
    );
    // The batch's builds come first; the single-GAS reference's after them.
    assert!(
        builds.len() > gases,
        "{label}: {} builds for {gases} GASes",
        builds.len()
    );
    let batch = &builds[..gases];
    let prims: u64 = batch
        .iter()
        .map(|b| b["prims"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        prims, triangles,
        "{label}: every triangle built exactly once"
    );
    let used_streams: BTreeSet<&str> = batch.iter().map(|b| b["stream"]).collect();
    assert_eq!(
        used_streams.len(),
        streams.min(gases),
        "{label}: streams used"
    );
    for (i, a) in batch.iter().enumerate() {
        for b in &batch[i + 1..] {
            let (ta, tb) = (range(a["temp"]), range(b["temp"]));
            assert!(
                a["stream"] == b["stream"] || !overlap(&ta, &tb),
                "{label}: builds on two streams share scratch: {ta:x?} and {tb:x?}"
            );
            let (oa, ob) = (range(a["output"]), range(b["output"]));
            assert!(
                !overlap(&oa, &ob),
                "{label}: two GASes share output: {oa:x?} and {ob:x?}"
            );
        }
    }
    // Contexts: one for the whole batch, or one per stream and a stream per context.
    let mut context_of_stream: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for b in batch {
        context_of_stream
            .entry(b["stream"])
            .or_default()
            .insert(b["ctx"]);
    }
    let all: BTreeSet<&str> = batch.iter().map(|b| b["ctx"]).collect();
    match contexts {
        "shared" => assert_eq!(all.len(), 1, "{label}: contexts {all:?}"),
        _ => {
            assert!(
                context_of_stream.values().all(|c| c.len() == 1),
                "{label}: a stream's builds through several contexts: {context_of_stream:?}"
            );
            assert_eq!(
                all.len(),
                used_streams.len(),
                "{label}: a context per stream: {context_of_stream:?}"
            );
        }
    }
    // Every context made for the batch is destroyed by the end of the run.
    let created = log
        .lines()
        .filter(|l| l.starts_with("context create"))
        .count();
    let destroyed = log
        .lines()
        .filter(|l| l.starts_with("context destroy"))
        .count();
    assert_eq!(created, destroyed, "{label}: contexts left alive");
    support::assert_nothing_left_alive(label, log);
}

/// A build that never returns (the H200's LPT hangs blocked the host inside the enqueue):
/// the watchdog names the batch and how far its enqueue got, and ends the process with 75.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_build_that_never_returns_ends_build_bench_through_the_watchdog() {
    let Some(f) = fixture() else { return };
    let stderr = build_bench_hung_at(f, &["--streams", "4", "--repeat", "1"], 5);
    for says in [
        "error: 40 GAS builds on 4 streams (Shared scratch, 1 enqueue thread): the host was blocked for 1 s inside their enqueue",
        "(4 of 40 optixAccelBuild calls returned; the last optixAccelBuild called: GAS group 4 stream 0)",
        "ending the process now (exit status 75)",
    ] {
        assert!(stderr.contains(says), "no {says:?} in:\n{stderr}");
    }
}

/// A run stopped part-way (here the watchdog ending a hung batch; on the H200 of 2026-11-27 a
/// session's time limit) keeps the rows of the configurations it timed: the CSV is written
/// after every row, and no half-written file is left beside it.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_run_stopped_part_way_keeps_the_rows_it_timed() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("part.csv");
    let csv_arg = csv.to_str().expect("a UTF-8 temp path");
    // The fixture's batch is 40 builds: build 45 is the second configuration's fifth.
    build_bench_hung_at(
        f,
        &[
            "--streams",
            "1,4,8",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--csv",
            csv_arg,
        ],
        45,
    );
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["streams"], "1");
    assert_eq!(rows[0]["build"], "batch");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("the temp dir")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("part.csv")]);
}

/// Runs build-bench on the fake GPU with its `hang_at`-th `optixAccelBuild` never returning
/// and a 1 s watchdog, and requires that the watchdog ended it (status 75); its stderr.
fn build_bench_hung_at(f: &Fixture, args: &[&str], hang_at: u32) -> String {
    let mut child = build_bench(f, args, &[])
        .env("FAKE_OPTIX_HANG_AT_BUILD", hang_at.to_string())
        .env("GASWORKS_BUILD_WAIT_S", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run build-bench");
    let out = wait_capped(&mut child);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(75), "{args:?}: {stderr}");
    stderr
}

/// Waits for a child that should end by itself; kills it past a cap (a watchdog that never
/// fired would otherwise hang the suite). Not a timing assertion: the cap is minutes.
fn wait_capped(child: &mut std::process::Child) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("build-bench was still running after 120 s: the watchdog did not end it");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = Vec::new();
    if let Some(mut s) = child.stderr.take() {
        std::io::Read::read_to_end(&mut s, &mut stderr).expect("read stderr");
    }
    Output {
        status: child.wait().expect("status"),
        stdout: Vec::new(),
        stderr,
    }
}

/// `--isolate` where the driver crashes in some configurations (here: every build through a
/// second context, so the per-stream ones): those fail by their signal, the others and the
/// reference are timed and written, and the run exits 1 naming the failures.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn isolate_keeps_the_rows_of_the_configurations_that_did_not_crash() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("iso.csv");
    let out = build_bench(
        f,
        &[
            "--streams",
            "2,4",
            "--repeat",
            "2",
            "--build-contexts",
            "shared,per-stream",
            "--isolate",
        ],
        &[],
    )
    .env("FAKE_OPTIX_ABORT_AT_CONTEXT", "2")
    .arg("--csv")
    .arg(&csv)
    .output()
    .expect("run build-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "error: 2 of 5 isolated configurations failed (the rows of the others are written):"
        ),
        "{stderr}"
    );
    for streams in [2, 4] {
        let label = format!(
            "{streams} streams | fast-trace, round-robin, shared scratch, a context per stream: killed by signal 6 (SIGABRT)"
        );
        assert!(stderr.contains(&format!("\n  {label}")), "{stderr}");
    }
    // The run is named once, by the first child, not once per child.
    assert_eq!(stdout.matches("40 groups, ").count(), 1, "{stdout}");
    let rows = csv_rows(&csv);
    let kinds: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["build"].as_str(),
                r["streams"].as_str(),
                r["build_contexts"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("batch", "2", "shared"),
            ("batch", "4", "shared"),
            ("single-gas", "1", "shared")
        ]
    );
    assert!(
        rows.iter().all(|r| r["device"] == "Fake GPU (host memory)"),
        "{rows:?}"
    );
}

const ACCEL_CHILD_ENV: &str = "GASWORKS_FAKE_GPU_ACCEL_CHILD";

/// The child of [`accel_build_compacts_each_gas_through_its_builder_and_instances_them_all`]:
/// `Accel::build` of the scene named by its environment, through the fakes.
#[test]
#[ignore = "the child process of a fake-GPU test; it runs it"]
fn accel_build_child() {
    let Some(scene) = std::env::var_os(ACCEL_CHILD_ENV) else {
        eprintln!(
            "accel_build_child: not run by its parent ({ACCEL_CHILD_ENV} unset): nothing to do"
        );
        return;
    };
    use gasworks::optix::accel::{Accel, AccelOptions, BuildContexts};
    use gasworks::optix::plan::{Assign, MergeOptions};
    let scene =
        gasworks::scene::obj::load_obj(Path::new(&scene), &Default::default()).expect("the scene");
    let gpu = gasworks::optix::Gpu::open(0).expect("the fake GPU");
    let ctx =
        gasworks::optix::DeviceContext::new(&gpu, &Default::default()).expect("an OptiX context");
    for (contexts, assign, merge) in [
        (BuildContexts::PerStream, Assign::RoundRobin, 0),
        (BuildContexts::PerStream, Assign::Lpt, 1024),
        (BuildContexts::Shared, Assign::RoundRobin, 64),
    ] {
        let o = AccelOptions {
            streams: 4,
            compact: true,
            contexts,
            assign,
            merge: MergeOptions::new(merge),
            ..AccelOptions::default()
        };
        let accel = Accel::build(&ctx, &scene, &o).expect("Accel::build");
        drop(accel);
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn accel_build_compacts_each_gas_through_its_builder_and_instances_them_all() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("accel.log");
    let mut env = f.fake.env();
    env.push(("FAKE_GPU_LOG", log.clone().into_os_string()));
    env.push((ACCEL_CHILD_ENV, f.scene.clone().into_os_string()));
    support::run_child_test("accel_build_child", env);
    let text = std::fs::read_to_string(&log).expect("the fake's log");
    let lines: Vec<_> = text.lines().map(|l| (l, fields(l))).collect();
    assert!(
        lines
            .iter()
            .all(|(_, f)| f.get("result").is_none_or(|r| *r == "0")),
        "a call the driver refused:\n{text}"
    );
    // Three builds, each: its GAS builds, one compaction per GAS, then the IAS over them.
    let ias: Vec<_> = lines
        .iter()
        .filter(|(l, _)| l.starts_with("ias "))
        .collect();
    assert_eq!(ias.len(), 3, "{text}");
    let mut start = 0;
    for (k, (ias_line, ias_fields)) in ias.iter().enumerate() {
        let end = lines
            .iter()
            .position(|(l, _)| l == ias_line)
            .expect("the IAS line");
        let part = &lines[start..end];
        let builds: Vec<_> = part
            .iter()
            .filter(|(l, _)| l.starts_with("build "))
            .collect();
        let compactions: Vec<_> = part
            .iter()
            .filter(|(l, _)| l.starts_with("compact "))
            .collect();
        assert_eq!(
            compactions.len(),
            builds.len(),
            "build {k}: a compaction per GAS:\n{text}"
        );
        for (l, c) in &compactions {
            assert_eq!(
                c["ctx"], c["built_by"],
                "build {k}: compacted through another context: {l}"
            );
        }
        let prims: u64 = builds
            .iter()
            .map(|(_, b)| b["prims"].parse::<u64>().unwrap())
            .sum();
        assert_eq!(prims, f.triangles, "build {k}: every triangle built once");
        assert_eq!(
            ias_fields["prims"].parse::<usize>().unwrap(),
            builds.len(),
            "build {k}: an instance per GAS"
        );
        let contexts: BTreeSet<&str> = builds.iter().map(|(_, b)| b["ctx"]).collect();
        let expected = if k < 2 { 4 } else { 1 };
        assert_eq!(contexts.len(), expected, "build {k}: contexts {contexts:?}");
        // The IAS goes through the main context, the first one made.
        assert_eq!(ias_fields["ctx"], "1", "build {k}: {ias_line}");
        start = end + 1;
    }
    let created = text
        .lines()
        .filter(|l| l.starts_with("context create"))
        .count();
    let destroyed = text
        .lines()
        .filter(|l| l.starts_with("context destroy"))
        .count();
    assert_eq!((created, destroyed), (1 + 4 + 4, 1 + 4 + 4), "{text}");
    support::assert_nothing_left_alive("Accel::build", &text);
}

/// The Cornell box (no textures) and the sponza-like scene (textures, cut-outs: the any-hit
/// program) rendered with `--backend optix` on two GPU workers, in two passes, and the Cornell
/// box through ABI 87's table too: every call the host makes is one the fake driver accepts.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn an_optix_render_makes_only_calls_the_driver_accepts() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = cornell();
    // (name, scene, ABI, more arguments, the OptiX contexts the GAS builds go through)
    for (name, scene, abi, more, build_contexts) in [
        ("cornell", cornell.as_path(), "105", &[][..], 1),
        ("sponza-like", f.scene.as_path(), "105", &[][..], 1),
        // OptiX 8.0's table: optixSbtRecordPackHeader and optixLaunch two entries earlier.
        ("cornell-abi87", cornell.as_path(), "87", &[][..], 1),
        // Enqueue threads: `--build-contexts auto` gives each of the 4 streams a context of
        // its own for its GAS builds; the IAS is built through the renderer's.
        (
            "sponza-like-threads",
            f.scene.as_path(),
            "105",
            &["--streams", "4", "--enqueue-threads", "2"][..],
            4,
        ),
    ] {
        let log = dir.path().join(format!("{name}.log"));
        let png = dir.path().join(format!("{name}.png"));
        let out = gasworks_on_fake(
            f,
            "render",
            scene,
            &[
                "--optix-abi",
                abi,
                "--backend",
                "optix",
                "--devices",
                "gpu0x2",
                "--width",
                "48",
                "--height",
                "32",
                "--spp",
                "4",
                "--pass-spp",
                "2",
            ],
            &[("FAKE_GPU_LOG", &log)],
        )
        .args(more)
        .arg("-o")
        .arg(&png)
        .output()
        .expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("backend: optix on GPU 0: Fake GPU (host memory)")
                && stderr.contains(&format!("OptiX ABI {abi} ")),
            "{name}: {stderr}"
        );
        assert!(png.exists(), "{name}: no image");
        let text = std::fs::read_to_string(&log).expect("the fake's log");
        let lines: Vec<_> = text.lines().map(fields).collect();
        assert!(
            lines
                .iter()
                .all(|l| l.get("result").is_none_or(|r| *r == "0")),
            "{name}: a call the driver refused:\n{text}"
        );
        // One pipeline per GPU worker, each with raygen, miss and a hit group (closest hit and
        // any hit) found in the PTX, and the launch parameters it declares.
        let pipelines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("pipeline create"))
            .collect();
        assert_eq!(pipelines.len(), 2, "{name}:\n{text}");
        assert!(
            pipelines
                .iter()
                .all(|l| l.ends_with("groups=3 params=pathtrace_params[296]")),
            "{name}: {pipelines:?}"
        );
        assert!(
            text.contains("kind=0x2424 entries=__closesthit__pathtrace,__anyhit__pathtrace,-"),
            "{name}:\n{text}"
        );
        // An IAS over GASes: a traversable graph two deep.
        assert!(
            text.lines()
                .filter(|l| l.starts_with("stack size"))
                .all(|l| l.ends_with("graph_depth=2")),
            "{name}:\n{text}"
        );
        let launches = text.lines().filter(|l| l.starts_with("launch ")).count();
        assert!(launches >= 2, "{name}: {launches} launches:\n{text}");
        let contexts_of = |kind: &str| -> BTreeSet<String> {
            text.lines()
                .filter(|l| l.starts_with(kind))
                .map(|l| fields(l)["ctx"].to_string())
                .collect()
        };
        let (gas, ias) = (contexts_of("build "), contexts_of("ias "));
        assert_eq!(gas.len(), build_contexts, "{name}: GAS contexts {gas:?}");
        assert_eq!(ias.len(), 1, "{name}: IAS contexts {ias:?}");
        if build_contexts > 1 {
            assert!(ias.is_disjoint(&gas), "{name}: {ias:?} among {gas:?}");
        } else {
            assert_eq!(ias, gas, "{name}");
        }
        support::assert_nothing_left_alive(name, &text);
    }
}

/// Two GPUs of one model (`FAKE_CUDA_DEVICES=2`: alike fakes, a primary context each) through
/// the real FFI: each gets its own GAS batch, IAS and pipelines, they are one speed class
/// (`sched::speed_classes`: not calibrated, planned at one measured speed, named as pooled in
/// the summary and the `--stats` CSV), and the image is the one GPU's, bit for bit (the fake
/// renders noise by pixel and sample, `FAKE_OPTIX_RENDER_NOISE`).
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn two_gpus_of_one_model_render_as_one_speed_class() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = cornell();
    let render = |devices: &str| -> (String, PathBuf, PathBuf, String) {
        let log = dir.path().join(format!("{devices}.log"));
        let exr = dir.path().join(format!("{devices}.exr"));
        let stats = dir.path().join(format!("{devices}.csv"));
        let out = gasworks_on_fake(
            f,
            "render",
            &cornell,
            &[
                "--backend",
                "optix",
                "--devices",
                devices,
                "--width",
                "64",
                "--height",
                "48",
                "--spp",
                "8",
                "--pass-spp",
                "2",
                "-v",
            ],
            &[("FAKE_GPU_LOG", &log)],
        )
        .env("FAKE_CUDA_DEVICES", "2")
        .env("FAKE_OPTIX_RENDER_NOISE", "1")
        .arg("--stats")
        .arg(&stats)
        .arg("-o")
        .arg(&exr)
        .output()
        .expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{devices}: {stderr}");
        let text = std::fs::read_to_string(&log).expect("the fake's log");
        assert!(
            text.lines()
                .map(fields)
                .all(|l| l.get("result").is_none_or(|r| *r == "0")),
            "{devices}: a call the driver refused:\n{text}"
        );
        support::assert_nothing_left_alive(devices, &text);
        (stderr, exr, stats, text)
    };
    let (_, one_gpu, _, _) = render("gpu0x2");
    let (stderr, two_gpus, stats, text) = render("gpu0x2,gpu1x2");
    assert!(
        stderr.contains("backend: optix on GPU 0: Fake GPU")
            && stderr.contains("backend: gpu1: optix on GPU 1: Fake GPU"),
        "{stderr}"
    );
    // Each GPU built its own scene and ran its own pipelines, one per stream.
    let count = |kind: &str| text.lines().filter(|l| l.starts_with(kind)).count();
    assert_eq!((count("build "), count("ias ")), (2, 2), "{text}");
    assert_eq!(count("pipeline create"), 4, "{text}");
    assert!(
        stderr.contains("one speed for alike devices (one kind and hardware, GPUs with as many streams): gpu0, gpu1")
            && !stderr.contains("calibration:"),
        "{stderr}"
    );
    let rows = csv_rows(&stats);
    assert_eq!(rows.len(), 4 * 4, "4 workers in 4 passes");
    assert!(rows.iter().all(|r| r["speed_class"] == "0"), "{rows:?}");
    for pass in ["1", "2", "3"] {
        let speeds: BTreeSet<&str> = rows
            .iter()
            .filter(|r| r["pass"] == pass)
            .map(|r| r["speed"].as_str())
            .collect();
        assert_eq!(speeds.len(), 1, "pass {pass}: {speeds:?}");
    }
    let read = |p: &Path| std::fs::read(p).expect("an image");
    assert!(read(&one_gpu) == read(&two_gpus), "the images differ");
}

/// Adaptive sampling on GPU workers: from the first decision on, their tiles skip the stopped
/// blocks, through the real FFI, and the launches carry the skip bytes. The fake renders noise
/// but for a flat grey column, 16 <= x < 32 (`FAKE_OPTIX_RENDER_NOISE`), so that column of
/// blocks stops after two passes, inside the GPU-sized tile around the blocks still sampling;
/// it counts the pixels each launch's skip bytes skip.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn adaptive_passes_hand_gpu_workers_tiles_that_skip_the_stopped_blocks() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = cornell();
    let log = dir.path().join("adaptive.log");
    let exr = dir.path().join("adaptive.exr");
    let one = Path::new("1");
    let out = gasworks_on_fake(
        f,
        "render",
        &cornell,
        &[
            "--backend",
            "optix",
            "--devices",
            "gpu0x2",
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
            "-v",
        ],
        &[("FAKE_GPU_LOG", &log), ("FAKE_OPTIX_RENDER_NOISE", one)],
    )
    .arg("-o")
    .arg(&exr)
    .output()
    .expect("run gasworks render");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // 4 x 3 blocks: the 3 of the flat column stop at 4 samples, the others take all 32.
    assert!(
        stderr.contains("(4 to 32 of 32), 3 of 12 blocks stopped below the noise threshold"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&log).expect("the fake's log");
    assert!(
        text.lines()
            .map(fields)
            .all(|l| l.get("result").is_none_or(|r| *r == "0")),
        "a call the driver refused:
{text}"
    );
    let skipped: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("launch "))
        .map(|l| fields(l)["skipped"].parse().unwrap())
        .collect();
    // The first two passes' launches skip nothing; later ones skip the stopped column
    // (16 x 48 pixels) of the tile.
    assert!(skipped.contains(&(16 * 48)), "{text}");
    assert!(skipped.iter().all(|&n| n == 0 || n == 16 * 48), "{text}");
    assert!(skipped.contains(&0), "{text}");
    assert!(stderr.contains("work per pass:"), "{stderr}");
    support::assert_nothing_left_alive("adaptive", &text);
}

/// A launch that never returns: the tile watch names the tile and ends the render with 75
/// rather than leaving a silent process.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_launch_that_never_returns_ends_the_render_through_the_tile_watch() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let png = dir.path().join("hung.png");
    let cornell = cornell();
    let mut child = gasworks_on_fake(
        f,
        "render",
        &cornell,
        &[
            "--backend",
            "optix",
            "--devices",
            "gpu0",
            "--width",
            "32",
            "--height",
            "32",
            "--spp",
            "2",
            "-o",
        ],
        &[],
    )
    .arg(&png)
    .env("FAKE_OPTIX_HANG_AT_LAUNCH", "1")
    .env("GASWORKS_LAUNCH_WAIT_S", "1")
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run gasworks render");
    let out = wait_capped(&mut child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    for says in [
        "error: tile optix:0/w0 32x32+0+0 samples 0..2 (",
        "the host was blocked for ",
        "(GASWORKS_LAUNCH_WAIT_S sets the limit per launch); ending the process now (exit status 75)",
    ] {
        assert!(stderr.contains(says), "no {says:?} in:\n{stderr}");
    }
    assert!(!png.exists(), "an image was written by a hung render");
}

/// The bundled Cornell box.
/// A small render in two passes, with tiles enough for every worker to hold some (the fake GPU
/// would want one big one).
const SMALL_PASSES: [&str; 10] = [
    "--width",
    "40",
    "--height",
    "24",
    "--spp",
    "4",
    "--pass-spp",
    "2",
    "--tiles",
    "16",
];

/// `--aov` on a GPU render: the layers are traced on the CPU BVH (built for them, since the
/// GPU render needs none), so they are the bits of a CPU render's layers.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_renders_layers_are_the_cpus() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = cornell();
    // (name, arguments, whether the layers are traced beside the GPU): a frame on GPUs alone
    // traces them on a thread of its own; beside CPU workers, under a time limit (which counts
    // them), or on the CPU, before the frame.
    let runs: [(&str, &[&str], bool); 4] = [
        ("optix", &["--backend", "optix"], true),
        (
            "mixed",
            &["--backend", "optix", "--devices", "gpu0x2,cpu:1"],
            false,
        ),
        (
            "limited",
            &["--backend", "optix", "--time-limit", "1h"],
            false,
        ),
        ("cpu", &["--backend", "cpu"], false),
    ];
    for (name, args, beside) in runs {
        let out = gasworks_on_fake(f, "render", &cornell, &SMALL_PASSES, &[])
            .args(args)
            .args(["--aov", "albedo,normal", "-o"])
            .arg(dir.path().join(format!("{name}.exr")))
            .output()
            .expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("backend: {}", args[1])),
            "{stderr}"
        );
        assert!(stderr.contains("normal, 4 spp"), "{name}: {stderr}");
        assert_eq!(
            stderr.contains("beside the GPU's setup and frame"),
            beside,
            "{name}: {stderr}"
        );
    }
    for layer in ["albedo", "normal"] {
        let read = |name: &str| {
            std::fs::read(dir.path().join(format!("{name}.{layer}.exr"))).expect("a layer")
        };
        assert!(read("optix") == read("cpu"), "{layer}");
        assert!(read("mixed") == read("cpu"), "{layer}");
        assert!(read("limited") == read("cpu"), "{layer}");
    }
}

/// A GPU whose launches start failing mid-frame (a lost device): its workers are retired and
/// the CPU workers beside them finish the frame. When it fails from its first launch (the
/// calibration's), the calibrating stream is retired before the first pass, and so is the
/// other, timed in its place (the failure is not a sticky one: the device may still work for
/// it) and failing too; every tile is the CPU's, so the image is the bits of a CPU-only
/// render.
/// With `--on-worker-error stop` the first failure ends the render, naming the call, and no
/// image is written.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_that_fails_mid_frame_is_retired_and_the_cpu_finishes() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (cornell, size) = (cornell(), SMALL_PASSES);
    let render = |name: &str, devices: &str, more: &[&str], fail_from: &str| {
        let png = dir.path().join(format!("{name}.png"));
        let mut cmd = gasworks_on_fake(f, "render", &cornell, &size, &[]);
        cmd.args(["--devices", devices])
            .args(more)
            .arg("-o")
            .arg(&png);
        if !fail_from.is_empty() {
            cmd.env("FAKE_OPTIX_FAIL_LAUNCHES_FROM", fail_from);
        }
        let out = cmd.output().expect("run gasworks render");
        (out, png)
    };
    let pixels = |png: &Path| image::open(png).expect("the image").to_rgba16().into_raw();

    let (cpu, cpu_png) = render("cpu", "cpu:2", &[], "");
    assert!(
        cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    // Without stealing, each worker renders its own share of every pass (16 tiles for 4
    // workers, planned by worker counts in the first pass, by speeds in the second). So both
    // GPU streams are sure to launch past the failing launch: the one that does not meet
    // launch 4 has made at most 3 launches, and has tiles of its own left in this pass or the
    // next. With stealing, a loaded machine's CPU threads may take every tile left before the
    // second stream's next launch (seen once in 40 runs of this binary beside 2 busy loops),
    // and only one stream would be retired.
    let optix = ["--backend", "optix", "--steal", "off"];
    // From launch 4 without a calibration (whose pieces would take the first launches): a
    // failure mid-frame.
    for (fail_from, calibrate) in [("1", "on"), ("4", "off")] {
        let name = format!("from-{fail_from}");
        let more = [&optix[..], &["--calibrate", calibrate]].concat();
        let (out, png) = render(&name, "gpu0x2,cpu:2", &more, fail_from);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let (first, second) = if fail_from == "1" {
            // Their calibration pieces, before the first pass.
            (
                "warning: calibrating worker gpu0/s0 (optix:0/w0) on",
                "warning: calibrating worker gpu0/s1 (optix:0/w1) on",
            )
        } else {
            (
                "warning: worker gpu0/s0 (optix:0/w0) failed on tile",
                "warning: worker gpu0/s1 (optix:0/w1) failed on tile",
            )
        };
        for says in [
            first,
            second,
            "optixLaunch failed: OPTIX_ERROR_LAUNCH_FAILURE; the worker is retired, the other \
             workers take its tiles",
            "warning: the frame went on without 2 of 4 workers (gpu0/s",
        ] {
            assert!(stderr.contains(says), "{name}: no {says:?} in:\n{stderr}");
        }
        // Not a lost device: a failure retires its own worker only.
        assert!(!stderr.contains("can render no more"), "{name}: {stderr}");
        if fail_from == "1" {
            assert!(
                stderr.contains("gpu0/s0, retired before pass 1")
                    && stderr.contains("gpu0/s1, retired before pass 1"),
                "{stderr}"
            );
            assert!(
                pixels(&png) == pixels(&cpu_png),
                "{name}: not the CPU's image"
            );
        }
    }
    let (out, png) = render(
        "stop",
        "gpu0x2,cpu:2",
        &[&optix[..], &["--on-worker-error", "stop"]].concat(),
        "4",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("OPTIX_ERROR_LAUNCH_FAILURE"), "{stderr}");
    assert!(stderr.contains("worker gpu0/s"), "{stderr}");
    assert!(!png.exists(), "an image was written by a failed render");
}

/// A fault in device code (an illegal address) leaves the sticky CUDA_ERROR_ILLEGAL_ADDRESS in
/// the context all of the GPU's streams share: the first stream to meet it is retired with
/// every other stream of the GPU, in one warning, and the CPU workers finish the frame. The
/// fault comes from an OptiX launch (the fake's 4th, mid-frame) or from gasworks' own fault on
/// purpose (`GASWORKS_FAULT_AT_TILE`, which `scripts/gpu-session.sh` runs on a real GPU): in
/// the calibration (tile 1: the GPU's streams are retired before the first pass, which is laid
/// out for the CPU threads left) or mid-frame (tile 3). The releases that fail after the loss
/// are not warned about.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_whose_context_is_lost_is_retired_with_all_its_streams() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (cornell, size) = (cornell(), SMALL_PASSES);
    for (hook, at, calibrate) in [
        ("FAKE_OPTIX_FAULT_AT_LAUNCH", "4", "off"),
        ("GASWORKS_FAULT_AT_TILE", "1", "on"),
        ("GASWORKS_FAULT_AT_TILE", "3", "off"),
    ] {
        let what = format!("{hook}={at}, calibration {calibrate}");
        let log = dir.path().join(format!("fake-{hook}-{at}.log"));
        let png = dir.path().join(format!("lost-{hook}-{at}.png"));
        let out = gasworks_on_fake(f, "render", &cornell, &size, &[("FAKE_GPU_LOG", &log)])
            .args(["--backend", "optix", "--devices", "gpu0x3,cpu:2"])
            // Each worker its own share of the first pass (planned by worker counts without a
            // calibration): the GPU is sure to reach the launch or tile that faults.
            .args(["--steal", "off", "--calibrate", calibrate, "-o"])
            .arg(&png)
            .env(hook, at)
            .output()
            .expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {stderr}");
        assert!(png.exists(), "{what}: no image");
        support::check_lost_gpu_stderr(&what, &stderr, 0, 3, 5);
        assert_eq!(
            stderr.contains("warning: calibrating worker gpu0/s0"),
            calibrate == "on",
            "{what}: {stderr}"
        );
        assert_eq!(
            stderr.contains("gpu0/s0, retired before pass 1"),
            calibrate == "on",
            "{what}: {stderr}"
        );
        if hook == "FAKE_OPTIX_FAULT_AT_LAUNCH" {
            let log_text = std::fs::read_to_string(&log).expect("the fake's log");
            let faulted = format!("launch {at} faults (FAKE_OPTIX_FAULT_AT_LAUNCH)");
            assert!(log_text.contains(&faulted), "{what}: {log_text}");
        } else {
            let armed =
                format!("warning: GASWORKS_FAULT_AT_TILE={at}: this GPU's tile {at} will fault");
            assert!(stderr.contains(&armed), "{what}: {stderr}");
        }
    }
    // A value that is no tile number is refused at the backend's setup, naming it.
    let out = gasworks_on_fake(f, "render", &cornell, &size, &[])
        .args(["--backend", "optix", "-o"])
        .arg(dir.path().join("refused.png"))
        .env("GASWORKS_FAULT_AT_TILE", "0")
        .output()
        .expect("run gasworks render");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("GASWORKS_FAULT_AT_TILE=\"0\": expected a tile number from 1"),
        "{stderr}"
    );
}

/// One of two GPUs lost mid-frame (`GASWORKS_FAULT_AT_TILE=gpu1:2`: GPU 1's second tile
/// faults, and the fake gives GPU 1's context alone the sticky error): both of GPU 1's streams
/// are retired at once, GPU 0's finish the frame, and the image is the one GPU's, pixel for
/// pixel. Without stealing and with shares by worker counts (two alike GPUs, no calibration),
/// each of GPU 1's streams has a tile of its own in the first pass: GPU 1 is sure to start
/// its second.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn losing_one_of_two_gpus_retires_its_streams_and_the_other_finishes() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = cornell();
    let render = |name: &str, devices: &str, fault: Option<&str>| {
        let exr = dir.path().join(format!("{name}.exr"));
        let mut cmd = gasworks_on_fake(f, "render", &cornell, &SMALL_PASSES, &[]);
        cmd.args(["--backend", "optix", "--steal", "off", "--devices", devices])
            .env("FAKE_CUDA_DEVICES", "2")
            .env("FAKE_OPTIX_RENDER_NOISE", "1")
            .arg("-o")
            .arg(&exr);
        if let Some(at) = fault {
            cmd.env("GASWORKS_FAULT_AT_TILE", at);
        }
        let out = cmd.output().expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name}: {stderr}");
        (stderr, exr)
    };
    let pixels = |exr: &Path| image::open(exr).expect("the image").to_rgba32f().into_raw();
    let (_, one_gpu) = render("one-gpu", "gpu0x2", None);
    let (stderr, lost_one) = render("lost-gpu1", "gpu0x2,gpu1x2", Some("gpu1:2"));
    // The hook armed on GPU 1 only.
    assert!(
        stderr.contains("warning: GASWORKS_FAULT_AT_TILE=gpu1:2: this GPU's tile 2 will fault"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("will fault on purpose").count(),
        1,
        "{stderr}"
    );
    support::check_lost_gpu_stderr("GPU 1 of 2", &stderr, 1, 2, 4);
    assert!(!stderr.contains("gpu0 can render no more"), "{stderr}");
    assert!(
        pixels(&lost_one) == pixels(&one_gpu),
        "not the one GPU's image"
    );
}

/// A `--gpu` past the driver's count is named as such, not as "no NVIDIA GPU".
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn build_bench_names_a_gpu_the_machine_lacks() {
    let Some(f) = fixture() else { return };
    for isolate in [&[][..], &["--isolate"][..]] {
        let out = build_bench(f, &["--gpu", "1"], &[])
            .args(isolate)
            .output()
            .expect("run build-bench");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            "error: --gpu 1: this machine has 1 NVIDIA GPU (--gpu 0)",
            "{isolate:?}"
        );
    }
}

/// A GPU short of memory (the fake made small with FAKE_CUDA_MEMORY): `--backend auto` says why
/// and renders on the CPU, `--backend optix` fails naming what it was allocating; either way
/// nothing on the GPU is left alive. Failing in the acceleration structures' buffers (100 kB)
/// and, past them, in the scene's upload (3 MB).
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_gpu_short_of_memory_falls_back_or_fails_by_name() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    for (bytes, failing) in [
        (
            "100000",
            "building the acceleration structures: GPU out of memory: cuMemAlloc asked for ",
        ),
        (
            "3000000",
            "uploading the scene's materials, textures, lights and shading geometry (",
        ),
    ] {
        for backend in ["auto", "optix"] {
            let log = dir.path().join(format!("{bytes}-{backend}.log"));
            let png = dir.path().join(format!("{bytes}-{backend}.png"));
            let label = format!("{bytes} bytes, --backend {backend}");
            let out = gasworks_on_fake(
                f,
                "render",
                &f.scene,
                &[
                    "--backend",
                    backend,
                    "--width",
                    "32",
                    "--height",
                    "32",
                    "--spp",
                    "1",
                    "-o",
                ],
                &[("FAKE_GPU_LOG", &log)],
            )
            .arg(&png)
            .env("FAKE_CUDA_MEMORY", bytes)
            .output()
            .expect("run gasworks render");
            let stderr = String::from_utf8_lossy(&out.stderr);
            if backend == "auto" {
                assert!(out.status.success(), "{label}: {stderr}");
                // "backend: cpu (N threads; auto: ...": the reason the GPU was not used.
                assert!(
                    stderr.contains(&format!(
                        "; auto: the OptiX backend could not be used: {failing}"
                    )),
                    "{label}: {stderr}"
                );
                assert!(png.exists(), "{label}: no image");
            } else {
                assert_eq!(out.status.code(), Some(1), "{label}: {stderr}");
                assert!(
                    stderr.contains(&format!("error: --backend optix\n  caused by: {failing}")),
                    "{label}: {stderr}"
                );
                assert!(stderr.contains("free of "), "{label}: {stderr}");
                assert!(!png.exists(), "{label}: an image was written");
            }
            let text = std::fs::read_to_string(&log).expect("the fake's log");
            support::assert_nothing_left_alive(&label, &text);
        }
    }
}

/// `--aov` layers traced beside a GPU that then fails its setup (`--backend auto`, the fake
/// short of memory in its acceleration structures): the CPU backend that takes over traces the
/// BVH the layers' thread builds, so the render builds one CPU BVH, not one each; and the
/// image and its layers are the CPU backend's own, as without a GPU.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn layers_beside_a_gpu_that_fails_its_setup_share_one_bvh_with_the_cpu() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let args = |png: &Path| -> Vec<String> {
        [
            "--width",
            "40",
            "--height",
            "30",
            "--spp",
            "2",
            "--aov",
            "albedo,normal",
            "-o",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([png.display().to_string()])
        .collect()
    };
    let png = dir.path().join("fell-back.png");
    let out = gasworks_on_fake(f, "render", &f.scene, &[], &[])
        .args(args(&png))
        .env("FAKE_CUDA_MEMORY", "100000")
        .env("RUST_LOG", "gasworks::cpu::bvh=debug")
        .output()
        .expect("run gasworks render");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("auto: the OptiX backend could not be used")
            && stderr.contains("beside the GPU's setup and frame"),
        "not the case under test (layers beside a GPU that failed): {stderr}"
    );
    assert_eq!(stderr.matches("CPU BVH built").count(), 1, "{stderr}");

    let cpu = dir.path().join("cpu.png");
    let out = gasworks_command()
        .arg("render")
        .arg(&f.scene)
        .args(args(&cpu))
        .args(["--backend", "cpu"])
        .output()
        .expect("run gasworks render");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (a, b) in [
        ("fell-back.png", "cpu.png"),
        ("fell-back.albedo.exr", "cpu.albedo.exr"),
        ("fell-back.normal.exr", "cpu.normal.exr"),
    ] {
        let read = |name| std::fs::read(dir.path().join(name)).expect(name);
        assert!(read(a) == read(b), "{a} differs from {b}");
    }
}

/// The stream-race reproducer for NVIDIA (`repro/stream-race/stream_race.c`, no gasworks code)
/// on the fake GPU, over the fixture's triangle counts: it builds every GAS once a batch, on
/// the streams it says, through one context or one per stream, no two streams' builds sharing
/// scratch bytes and no two GASes output bytes, largest first when asked, and frees all. A
/// failing call is named, with exit status 1; a bad counts file is named, with 2.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn the_stream_race_reproducer_builds_its_batches_as_gasworks_does() {
    let Some(f) = fixture() else { return };
    let Some(cc) = support::compiler("CC", "cc", "repro/stream-race/stream_race.c") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let repro = dir.path().join("stream_race");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("repro/stream-race/stream_race.c");
    let built = Command::new(&cc)
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&repro)
        .arg(&src)
        .arg("-ldl")
        .output()
        .expect("run cc");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    // The fixture scene's triangle counts, as the race step writes them.
    let info = gasworks_command()
        .args(["info", "--groups", "--quiet"])
        .arg(&f.scene)
        .output()
        .expect("run gasworks info");
    let text = String::from_utf8_lossy(&info.stdout);
    let counts: Vec<u64> = text
        .split("group list:\n")
        .nth(1)
        .expect("a group list")
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), f.triangles);
    let counts_file = dir.path().join("counts.txt");
    std::fs::write(
        &counts_file,
        counts.iter().map(|c| format!("{c}\n")).collect::<String>(),
    )
    .unwrap();
    let run = |args: &[&str], env: &[(&str, &str)], log: &Path| {
        Command::new(&repro)
            .arg(&counts_file)
            .args(args)
            .envs(f.fake.env())
            .env("FAKE_GPU_LOG", log)
            .envs(env.iter().copied())
            .output()
            .expect("run stream_race")
    };
    for (args, contexts) in [
        (&["--streams", "4", "--order", "largest"][..], "shared"),
        (
            &["--streams", "3", "--order", "build", "--assign", "lpt"][..],
            "shared",
        ),
        (
            &["--streams", "4", "--contexts", "per-stream"][..],
            "per-stream",
        ),
    ] {
        let label = format!("stream_race {args:?}");
        let log = dir.path().join("fake.log");
        let _ = std::fs::remove_file(&log);
        let out = run(&[args, &["--repeat", "2"]].concat(), &[], &log);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("stream_race: every batch completed"),
            "{label}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("batch 2 of 2: "), "{label}: {stdout}");
        let log = std::fs::read_to_string(&log).expect("the fake's log");
        let streams: usize = args[1].parse().unwrap();
        check_batch(&label, &log, counts.len(), streams, contexts, f.triangles);
        let first = log
            .lines()
            .find(|l| l.starts_with("build "))
            .map(fields)
            .expect("a build");
        let first_prims: u64 = first["prims"].parse().unwrap();
        if args.contains(&"largest") || !args.contains(&"build") {
            assert_eq!(first_prims, *counts.iter().max().unwrap(), "{label}");
        } else {
            assert_eq!(first_prims, counts[0], "{label}");
        }
    }
    // Device memory runs out: the failing call is named, exit 1.
    let out = run(
        &[],
        &[("FAKE_CUDA_MEMORY", "1000")],
        &dir.path().join("oom.log"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stream_race: cuMemAlloc (vertices) failed: CUDA_ERROR_OUT_OF_MEMORY"),
        "{stderr}"
    );
    // Not a counts file: named, exit 2.
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "12\nseven\n").unwrap();
    let out = Command::new(&repro)
        .arg(&bad)
        .output()
        .expect("run stream_race");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.txt: expected one positive triangle count per line"),
        "{stderr}"
    );
}

/// A camera path on GPUs (`--camera-path`, two fake GPUs): each GPU builds its GASes and IAS,
/// uploads the scene and compiles its modules once for the whole sequence, every later frame
/// sets only its camera (its workers link their pipelines again), and each
/// frame is the file a single render of its camera writes on the same GPUs, byte for byte
/// (the fake renders noise by pixel and sample; the file's key records the camera).
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn a_camera_path_on_gpus_builds_once_and_renders_each_frame() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let walk = dir.path().join("walk.csv");
    std::fs::write(
        &walk,
        "0,1,3.5,0,1,0,0,1,0,39.3\n0.3,1.1,3.4,0,1,0,0,1,0,39.3\n0.6,1.2,3.3,0,0.9,0,0,1,0,42\n",
    )
    .unwrap();
    let cameras = [
        ["0,1,3.5", "0,1,0", "0,1,0", "39.3"],
        ["0.3,1.1,3.4", "0,1,0", "0,1,0", "39.3"],
        ["0.6,1.2,3.3", "0,0.9,0", "0,1,0", "42"],
    ];
    let cornell = cornell();
    let render = |name: &str, more: &[&str]| -> (String, String) {
        let log = dir.path().join(format!("{name}.log"));
        let args = [
            "--backend",
            "optix",
            "--devices",
            "gpu0x2,gpu1",
            "--width",
            "32",
            "--height",
            "24",
            "--spp",
            "4",
            "--pass-spp",
            "2",
            "-v",
        ];
        let out = gasworks_on_fake(f, "render", &cornell, &args, &[("FAKE_GPU_LOG", &log)])
            .env("FAKE_CUDA_DEVICES", "2")
            .env("FAKE_OPTIX_RENDER_NOISE", "1")
            .args(more)
            .arg("-o")
            .arg(dir.path().join(name))
            .output()
            .expect("run gasworks render");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name}: {stderr}");
        let text = std::fs::read_to_string(&log).expect("the fake's log");
        assert!(
            text.lines()
                .map(fields)
                .all(|l| l.get("result").is_none_or(|r| *r == "0")),
            "{name}: a call the driver refused:\n{text}"
        );
        support::assert_nothing_left_alive(name, &text);
        (stderr, text)
    };
    let (stderr, text) = render("f-#.exr", &["--camera-path", walk.to_str().unwrap()]);
    let count = |kind: &str| text.lines().filter(|l| l.starts_with(kind)).count();
    assert_eq!((count("build "), count("ias ")), (2, 2), "{text}");
    assert!(
        stderr.contains("(as the first frame set it up: its GASes, IAS and modules kept)"),
        "{stderr}"
    );
    for (k, [eye, at, up, fov]) in cameras.iter().enumerate() {
        let single = format!("single-{k}.exr");
        let args = ["--eye", eye, "--look-at", at, "--up", up, "--fov", fov];
        let (_, single_log) = render(&single, &args);
        let single_pipelines = single_log
            .lines()
            .filter(|l| l.starts_with("pipeline create"));
        assert!(single_pipelines.count() >= 1);
        let frame = format!("f-{}.exr", k + 1);
        let read = |name: &str| std::fs::read(dir.path().join(name)).expect("an image");
        assert!(read(&frame) == read(&single), "{frame}");
    }
    // Each frame's workers link their pipelines from the modules compiled once.
    let (_, one) = render("one.exr", &[]);
    let count_in = |log: &str, kind: &str| log.lines().filter(|l| l.starts_with(kind)).count();
    assert_eq!(
        count_in(&text, "module "),
        count_in(&one, "module "),
        "{text}"
    );
    let pipelines = |log: &str| count_in(log, "pipeline create");
    assert_eq!(pipelines(&text), 3 * pipelines(&one), "{text}");
}
