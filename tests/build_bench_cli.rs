//! `gasworks build-bench` from the outside: on a machine without an NVIDIA GPU it must fail
//! with a clear message and a non-zero exit code, never a panic.

mod cli_support;
mod support;

use cli_support::gasworks_command;

/// `build-bench OBJ --streams 1,4 --assign round-robin,lpt ARGS --isolate --csv CSV` (4
/// configurations and the reference), with `env` set: its exit code, stdout and stderr. Checks
/// that the parent announced the 5 processes.
fn isolated_run(
    obj: &std::path::Path,
    csv: &std::path::Path,
    args: &[&str],
    env: &[(&str, &std::path::Path)],
) -> (Option<i32>, String, String) {
    let mut cmd = gasworks_command();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["build-bench", obj.to_str().unwrap(), "--streams", "1,4"])
        .args(["--assign", "round-robin,lpt"])
        .args(args)
        .args(["--isolate", "--config-timeout-s", "120", "--csv"])
        .arg(csv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stdout.contains(
            "4 configurations and the single-GAS reference, each in a process of its own"
        ),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    (out.status.code(), stdout, stderr)
}

/// `build-bench` on a machine without a usable GPU. On a GPU host the child is started with
/// `CUDA_VISIBLE_DEVICES` empty, so the driver reports no device there too and the message is
/// checked everywhere: the test cannot pass without checking it.
#[test]
fn build_bench_without_gpu_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = gasworks_command()
        .env("CUDA_VISIBLE_DEVICES", "")
        .args([
            "build-bench",
            obj.to_str().unwrap(),
            "--streams",
            "1,2",
            "--repeat",
            "1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("no NVIDIA GPU: build-bench needs one"),
        "stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

#[test]
fn build_bench_refuses_bad_arguments_before_looking_for_a_gpu() {
    let out = gasworks_command()
        .args(["build-bench", "missing.obj", "--streams", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("--streams: every stream count must be at least 1"),
        "stderr: {stderr}"
    );

    // clap's own refusals exit with 2.
    let out = gasworks_command()
        .args(["build-bench", "x.obj", "--fast-build", "--flags", "both"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--isolate` looks for the GPU once, in the parent, and says so once: not once per
/// configuration from a child each.
#[test]
fn isolated_build_bench_without_gpu_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let out = gasworks_command()
        .env("CUDA_VISIBLE_DEVICES", "")
        .args(["build-bench", obj.to_str().unwrap(), "--streams", "1,2,4"])
        .args(["--repeat", "1", "--isolate", "--config-timeout-s", "60"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        stderr
            .matches("no NVIDIA GPU: build-bench needs one")
            .count(),
        1,
        "stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");

    // A child's limit means nothing without children.
    let out = gasworks_command()
        .args(["build-bench", "x.obj", "--config-timeout-s", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--isolate` on a GPU: every configuration and the reference in a child of its own, and
/// their rows gathered into one CSV in order.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn isolated_build_bench_gathers_every_childs_rows_on_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("quads.obj");
    let mut text = String::new();
    for g in 0..12 {
        let x = g as f32 * 2.0;
        text.push_str(&format!(
            "g group{g}\nv {x} 0 0\nv {} 0 0\nv {} 1 0\nv {x} 1 0\nf -4 -3 -2\nf -4 -2 -1\n",
            x + 1.0,
            x + 1.0
        ));
    }
    std::fs::write(&obj, text).unwrap();
    let csv = dir.path().join("bench.csv");
    let (code, stdout, stderr) = isolated_run(&obj, &csv, &["--repeat", "2", "--warmup", "1"], &[]);
    assert_eq!(code, Some(0), "stdout: {stdout}\nstderr: {stderr}");
    let mut reader = csv::Reader::from_path(&csv).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (build, assign, streams) = (column("build"), column("assign"), column("streams"));
    let got: Vec<(String, String, String)> = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            (
                r[build].to_string(),
                r[assign].to_string(),
                r[streams].to_string(),
            )
        })
        .collect();
    let want = [
        ("batch", "round-robin", "1"),
        ("batch", "round-robin", "4"),
        ("batch", "lpt", "1"),
        ("batch", "lpt", "4"),
        ("single-gas", "-", "1"),
    ];
    assert_eq!(
        got,
        want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())),
        "{stdout}"
    );
}

/// `--isolate` end to end without a GPU: a fake libcuda (tests/support/fake_cuda.c, one
/// device that can be listed but not opened) lets the parent through its check, so it runs
/// every configuration and the reference as children of its own arguments; each child fails
/// opening the GPU, and the parent must name each failure, write no CSV (no rows) and exit 1.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn isolated_build_bench_runs_every_configuration_in_a_child_and_names_each_failure() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) =
        support::build_shared_library("fake_cuda.c", dir.path(), "libcuda.so.1", &["ONE_DEVICE"])
    else {
        return;
    };
    // cudarc tries libcuda.so before libcuda.so.1: shadow both names.
    std::fs::copy(&lib, dir.path().join("libcuda.so")).unwrap();
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let csv = dir.path().join("bench.csv");
    let (code, stdout, stderr) = isolated_run(
        &obj,
        &csv,
        &["--lpt-build-weight", "0", "--repeat", "1"],
        &[("LD_LIBRARY_PATH", dir.path())],
    );
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    // Every child ran with the parent's arguments and its own job, and said why it failed.
    assert_eq!(
        stderr.matches("cuDevicePrimaryCtxRetain").count(),
        5,
        "{stderr}"
    );
    for label in [
        "1 streams | fast-trace, round-robin, shared scratch: exit status 1",
        "4 streams | fast-trace, round-robin, shared scratch: exit status 1",
        "1 streams | fast-trace, lpt, shared scratch: exit status 1",
        // LPT weight 0 on more than one stream: `auto` gives it a context per stream.
        "4 streams | fast-trace, lpt, shared scratch, a context per stream: exit status 1",
        "single GAS: exit status 1",
    ] {
        assert!(
            stderr.contains(&format!("build-bench --isolate: {label}")),
            "no line for {label:?} in:\n{stderr}"
        );
        assert!(stderr.contains(&format!("\n  {label}")), "{stderr}");
    }
    assert!(
        stderr.contains("all 5 isolated configurations failed (no rows, so no CSV or plot)"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!csv.exists(), "a CSV of no rows was written");
}
