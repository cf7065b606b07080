//! `probe()` on machines where libcuda loads but no GPU can be used: a fake libcuda
//! (tests/support/fake_cuda.c) is put first on LD_LIBRARY_PATH of a child process, which must
//! get `CudaError::NoDevice` with the driver's reason, and no panic.

mod support;

use std::path::Path;
use std::process::Command;

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
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_probe",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_LIBRARY_PATH", &dir)
        .env(CHILD, expected)
        .output()
        .expect("spawn");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
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
