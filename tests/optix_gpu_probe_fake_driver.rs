//! `probe()` on machines where libcuda loads but no GPU can be used: a fake libcuda
//! (tests/support/fake_cuda.c) is put first on LD_LIBRARY_PATH of a child process, which must
//! get `CudaError::NoDevice` with the driver's reason, and no panic.

mod cli_support;
mod support;

use cli_support::gasworks_command;
use std::path::Path;

use gasworks::optix::error::CudaError;

const CHILD: &str = "GASWORKS_FAKE_CUDA_CHILD";

/// Runs in the child (the parents below run it with `--ignored`): checks what probe() says.
#[test]
#[ignore = "the child process of the fake-driver tests; they run it"]
fn child_probe() {
    // Run directly (`--include-ignored`, as scripts/gpu-session.sh runs every test binary),
    // there is no fake driver to check: the real one may well have a GPU.
    let Ok(expected) = std::env::var(CHILD) else {
        eprintln!("child_probe: not run by a fake-driver test ({CHILD} unset): nothing to check");
        return;
    };
    match gasworks::optix::probe() {
        Err(CudaError::NoDevice { reason }) => assert_eq!(reason, expected),
        other => panic!("expected NoDevice({expected}), got {other:?}"),
    }
    assert!(matches!(
        gasworks::optix::Gpu::open(0),
        Err(CudaError::NoDevice { .. })
    ));
}

fn run(defines: &[&str], expected: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fake_cuda{}", defines.len()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let Some(lib) = support::build_shared_library("fake_cuda.c", &dir, "libcuda.so.1", defines)
    else {
        return;
    };
    // cudarc tries libcuda.so before libcuda.so.1: shadow both names.
    std::fs::copy(&lib, dir.join("libcuda.so")).expect("copy");
    support::run_child_test(
        "child_probe",
        [
            ("LD_LIBRARY_PATH", dir.into_os_string()),
            (CHILD, expected.into()),
        ],
    );
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn driver_without_devices_is_no_device() {
    run(&[], "cuInit: CUDA_ERROR_NO_DEVICE");
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn zero_devices_is_no_device() {
    run(&["ZERO_DEVICES"], "cuDeviceGetCount reports 0 devices");
}

/// `render --devices gpuD` where the driver cannot serve GPU D fails before any backend is set
/// up, naming the flag: no "backend: cpu" line first (the auto backend's fallback), no image.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn render_refuses_devices_the_driver_lacks_before_setting_up_a_backend() {
    let dir = tempfile::tempdir().expect("scratch dir");
    let obj = dir.path().join("tri.obj");
    std::fs::write(&obj, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").expect("scene");
    let png = dir.path().join("out.png");
    for (defines, devices, expected) in [
        (
            &[][..],
            "cpu,gpu0",
            "error: --devices gpu0: cannot set up the OptiX backend\n  caused by: no NVIDIA GPU found (cuInit: CUDA_ERROR_NO_DEVICE)",
        ),
        (
            &["ONE_DEVICE"][..],
            "gpu0,gpu1",
            "error: --devices gpu1: this machine has 1 NVIDIA GPU (gpu0)",
        ),
    ] {
        let lib_dir = dir.path().join(format!("lib{}", defines.len()));
        std::fs::create_dir_all(&lib_dir).expect("lib dir");
        let Some(lib) = support::build_shared_library("fake_cuda.c", &lib_dir, "libcuda.so.1", defines)
        else {
            return;
        };
        // cudarc tries libcuda.so before libcuda.so.1: shadow both names.
        std::fs::copy(&lib, lib_dir.join("libcuda.so")).expect("copy");
        let out = gasworks_command()
            .args(["render", obj.to_str().expect("utf-8 path"), "-o"])
            .arg(&png)
            .args(["--devices", devices, "--spp", "1", "--width", "8", "--height", "8"])
            .env("LD_LIBRARY_PATH", &lib_dir)
            .output()
            .expect("spawn gasworks");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{devices}: {stderr}");
        assert!(stderr.contains(expected), "{devices}: {stderr}");
        assert!(!stderr.contains("backend:"), "{devices}: {stderr}");
        assert!(!png.exists(), "{devices}: an image was written");
    }
}
