//! Helpers shared by the integration tests: building the small C libraries under
//! `tests/support/` with the system C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/support/<source>` into a shared library in `out_dir`, with extra `-D` flags.
/// Returns `None` (after saying why on stderr) when no C compiler is available, so that the
/// calling test can skip; on CI (`CI` set) a missing compiler is a failure instead, so a skip
/// there cannot pass by accident.
pub fn build_shared_library(
    source: &str,
    out_dir: &Path,
    name: &str,
    defines: &[&str],
) -> Option<PathBuf> {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(source);
    let out = out_dir.join(name);
    let mut cmd = Command::new(&compiler);
    cmd.args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    match cmd.output() {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "{compiler} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            if std::env::var_os("CI").is_some() {
                panic!("no C compiler ({compiler}: {e}); CI must have one for this test");
            }
            eprintln!("SKIPPED: no C compiler ({compiler}: {e}); cannot build {source}");
            None
        }
    }
}

/// Runs the ignored test `child_test` of the current test binary in a child process with the
/// NVTX recorder tool attached (`NVTX_INJECTION64_PATH`), and returns what the recorder wrote.
/// The child knows it is the child by `child_env` = 1; the recorder writes to the file named by
/// `GASWORKS_NVTX_RECORD`. The recorder is the prebuilt one named by `GASWORKS_NVTX_RECORDER`
/// (GPU hosts have no compiler for the carried test binaries), else built here.
#[allow(dead_code)] // not every test binary that includes this module records NVTX ranges
pub fn record_nvtx_in_child(child_test: &str, child_env: &str) -> String {
    const PREBUILT: &str = "GASWORKS_NVTX_RECORDER";
    const RECORD: &str = "GASWORKS_NVTX_RECORD";
    let dir = tempfile::tempdir().expect("temp dir");
    let tool: PathBuf = match std::env::var_os(PREBUILT) {
        Some(p) => p.into(),
        None => match build_shared_library("nvtx_recorder.c", dir.path(), "librec.so", &[]) {
            Some(t) => t,
            None => panic!("no C compiler and no ${PREBUILT}: cannot make the NVTX recorder"),
        },
    };
    let record = dir.path().join("record.txt");
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            child_test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(child_env, "1")
        .env(gasworks::nvtx::INJECTION_PATH_ENV, &tool)
        .env(RECORD, &record)
        .output()
        .expect("spawn the child");
    assert!(
        out.status.success(),
        "child failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&record).expect("the recorder wrote a record")
}
