//! NVTX ranges reach a profiler's tool library. Nsight Systems is not installed where tests
//! run, so a small C tool (tests/support/nvtx_recorder.c) stands in for it: the parent test
//! builds it, reruns this test binary's `emit_ranges` test in a child process with
//! `NVTX_INJECTION64_PATH` pointing at it, and checks the recorded names and nesting.

mod support;

use std::cell::Cell;
use std::process::Command;

use gasworks::nvtx;

const CHILD_MODE: &str = "GASWORKS_NVTX_CHILD";
const RECORD: &str = "GASWORKS_NVTX_RECORD";

/// What the child emits: nested core ranges, a coloured range, a lazily named range, a mark, a
/// named stream, and a domain range.
fn emit() -> usize {
    let formatted = Cell::new(0usize);
    {
        let _upload = nvtx::range("upload");
        {
            let _gas = nvtx::range_with(|| {
                formatted.set(formatted.get() + 1);
                format!("gas {} stream {}", 3, 1)
            });
            let _compact = nvtx::range_colored("compact", 0xFF00_8000);
            nvtx::mark("built");
        }
        let _lazy = gasworks::nvtx_range!("ias of {} instances", 42);
    }
    nvtx::name_cuda_stream_handle(0x1234, "gas stream 1");
    let domain = nvtx::Domain::new("gasworks");
    {
        let _launch = domain.range("launch tile 0");
    }
    formatted.get()
}

/// Runs in the child (and, harmlessly, in a plain test run, where no tool is attached).
#[test]
fn emit_ranges() {
    match std::env::var(CHILD_MODE).as_deref() {
        Ok("attached") => {
            assert!(
                nvtx::is_attached(),
                "the recorder tool should have attached"
            );
            assert_eq!(
                emit(),
                1,
                "a named range is formatted once when a tool is attached"
            );
        }
        Ok("detached") => {
            assert!(
                !nvtx::is_attached(),
                "a tool that cannot load must leave NVTX off"
            );
            assert_eq!(emit(), 0);
        }
        _ => {
            if std::env::var_os(nvtx::INJECTION_PATH_ENV).is_none() {
                assert!(!nvtx::is_attached());
                // No tool: range names are never even formatted.
                assert_eq!(emit(), 0);
            }
        }
    }
}

fn run_child(mode: &str, injection: &std::path::Path, record: &std::path::Path) {
    let exe = std::env::current_exe().expect("test binary path");
    let output = Command::new(exe)
        .args(["--exact", "emit_ranges", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(nvtx::INJECTION_PATH_ENV, injection)
        .env(RECORD, record)
        .output()
        .expect("spawn the test binary");
    assert!(
        output.status.success(),
        "child ({mode}) failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child must have run emit_ranges:\n{stdout}"
    );
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn recorder_tool_sees_names_and_nesting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(tool) =
        support::build_shared_library("nvtx_recorder.c", dir.path(), "libnvtx_recorder.so", &[])
    else {
        return;
    };
    let record = dir.path().join("record.txt");
    run_child("attached", &tool, &record);
    let text = std::fs::read_to_string(&record).expect("the tool wrote its record");
    let lines: Vec<&str> = text.lines().collect();
    let expected = [
        "init core 16",
        "push 0 upload",
        "push 1 gas 3 stream 1",
        "pushex 2 ff008000 compact",
        "mark 3 built",
        "pop 2",
        "pop 1",
        "push 1 ias of 42 instances",
        "pop 1",
        "pop 0",
        "stream 0x1234 gas stream 1",
        "domain gasworks",
        "dpush 0 launch tile 0",
        "pop 0",
    ];
    assert_eq!(lines, expected, "recorded:\n{text}");
}

#[test]
fn missing_tool_library_leaves_nvtx_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let record = dir.path().join("record.txt");
    run_child("detached", &dir.path().join("no-such-tool.so"), &record);
    assert!(!record.exists());
}
