//! The process-wide watchdog (`gasworks::optix::watchdog::global`) on a process whose thread
//! stays blocked past a watch's deadline, as the H200's did inside `optixAccelBuild`: the
//! process must end with the watch's message and exit status 75, without running exit
//! handlers (the CUDA driver's would block on a hung device). No GPU needed: the child blocks
//! in a sleep instead of the driver.

mod cli_support;

use cli_support::gasworks_path;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gasworks::optix::watchdog::{self, EXIT_GPU_HUNG};

const CHILD_ENV: &str = "GASWORKS_WATCHDOG_TEST_CHILD";
const CHILD_TEST: &str = "a_thread_blocked_past_its_watch_ends_the_process_with_its_message";

extern "C" fn exit_handler() {
    eprintln!("exit handlers ran");
}

#[test]
fn a_thread_blocked_past_its_watch_ends_the_process_with_its_message() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // SAFETY: registers a plain function with no state; it only writes to stderr.
        unsafe { libc::atexit(exit_handler) };
        let _watch = watchdog::global().arm(
            Duration::from_millis(200),
            Box::new(|| "a stand-in for optixAccelBuild did not return".into()),
        );
        std::thread::sleep(Duration::from_secs(300));
        // Reached only if the watchdog never fired: the parent sees status 0 and fails.
        return;
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    // Not a timing assertion: a watchdog that never fires would otherwise hang the suite.
    let patience = Duration::from_secs(120);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            panic!("the watchdog did not end the child within {patience:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("read the child's stderr");
    assert_eq!(status.code(), Some(EXIT_GPU_HUNG), "{status:?}\n{stderr}");
    assert!(
        stderr.contains(
            "error: a stand-in for optixAccelBuild did not return; ending the process now (exit status 75)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("exit handlers ran"), "{stderr}");
}

/// On a GPU: the path tracer's tiles are watched too. With a per-launch limit far below what
/// any launch takes, the first tile's wait outlasts its watch, and the render must end with
/// the tile's message and status 75 (the wiring of the watch; a real hang is not needed).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_tile_past_its_launch_limit_ends_the_render_with_its_message() {
    let gasworks = gasworks_path();
    let scene = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(gasworks)
        .arg("render")
        .arg(&scene)
        .arg("-o")
        .arg(dir.path().join("hung.png"))
        .args([
            "--backend",
            "optix",
            "--width",
            "256",
            "--height",
            "256",
            "--spp",
            "64",
        ])
        .env("GASWORKS_LAUNCH_WAIT_S", "0.000001")
        .output()
        .expect("run gasworks render");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_GPU_HUNG), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: tile optix:"))
        .unwrap_or_else(|| panic!("no line naming the tile in:\n{stderr}"));
    assert!(
        line.contains("waiting for its launches and copies")
            && line.contains("ending the process now (exit status 75)"),
        "{line}"
    );
}
