//! A GPU whose CUDA context is lost mid-frame or in its calibration, on a real GPU: gasworks
//! faults on purpose (`GASWORKS_FAULT_AT_TILE`, a kernel that stores to address 0), and the
//! driver's sticky error must retire every stream of the GPU at once while the CPU workers
//! finish the frame.
//! The fake GPU runs the same scenario without a GPU (`tests/fake_gpu.rs`); this is the check
//! that the real driver behaves as the fake does. The render runs in a child process: the
//! fault leaves the process's context unusable, which would fail the tests after it in this
//! one.

mod cli_support;
mod support;

use cli_support::gasworks_command;
use std::path::Path;

/// Renders the Cornell box on two GPU streams and two CPU threads with the GPU's tile
/// `fault_at` faulting, calibrated or not; returns stderr once the render has succeeded with
/// an image.
fn render_with_a_fault(fault_at: &str, calibrate: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let cornell = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let png = dir.path().join("lost.png");
    let out = gasworks_command()
        .arg("render")
        .arg(&cornell)
        .args([
            "--width",
            "128",
            "--height",
            "96",
            "--spp",
            "8",
            "--pass-spp",
            "2",
        ])
        .args(["--tiles", "24", "--calibrate", calibrate])
        .args(["--backend", "optix", "--devices", "gpu0x2,cpu:2", "-o"])
        .arg(&png)
        .env("GASWORKS_FAULT_AT_TILE", fault_at)
        // scripts/gpu-session.sh sets it to stop for its own renders.
        .env_remove("GASWORKS_ON_WORKER_ERROR")
        .output()
        .expect("run gasworks render");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert!(png.exists(), "no image");
    stderr
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_gpu_that_faults_mid_frame_is_retired_with_all_its_streams() {
    // The third tile of the GPU: mid-way through the first pass.
    let stderr = render_with_a_fault("3", "off");
    support::check_lost_gpu_stderr("a real GPU", &stderr, 0, 2, 4);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_gpu_that_faults_in_its_calibration_is_retired_before_the_first_pass() {
    // The GPU's first tile is its calibration piece.
    let stderr = render_with_a_fault("1", "on");
    support::check_lost_gpu_stderr("a real GPU, calibrating", &stderr, 0, 2, 4);
    assert!(
        stderr.contains("warning: calibrating worker gpu0/s0")
            && stderr.contains("gpu0/s0, retired before pass 1"),
        "{stderr}"
    );
}
