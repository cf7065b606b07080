//! Helpers shared by the integration tests: finding a C or C++ compiler (and what to do
//! without one), building the small C libraries under `tests/support/`, running a test in a
//! child process (with a tool attached, or with the GPU hidden).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that lets tests needing a C or C++ compiler skip where there is
/// none (GPU hosts run test binaries built elsewhere, with no compiler of their own).
pub const SKIP_COMPILER_TESTS_ENV: &str = "GASWORKS_SKIP_COMPILER_TESTS";

/// The compiler named by `$var` (else `default`) when it runs. Where it does not:
/// - on CI (`CI` set), a failure: CI must run these tests;
/// - with `GASWORKS_SKIP_COMPILER_TESTS` set, `None` and a SKIPPED line, so the caller skips;
/// - otherwise a failure that says how to install one or skip explicitly.
///
/// A test never passes silently for want of a compiler: where none was found when the tests
/// were *built*, `build.rs` sets `gasworks_no_cc` / `gasworks_no_cxx` and these tests are
/// `#[ignore]`d (so `cargo test` lists them as ignored, not passed); this check covers a test
/// binary run where it was not built.
#[allow(dead_code)] // not every test binary that includes this module compiles C
pub fn compiler(var: &str, default: &str, needed_for: &str) -> Option<String> {
    let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let runs = Command::new(&compiler)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if runs {
        return Some(compiler);
    }
    let why = format!(
        "no compiler (${var} or {default}: {compiler:?} does not run) to build {needed_for}"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}; CI must have one: these tests may not be skipped there");
    }
    if std::env::var_os(SKIP_COMPILER_TESTS_ENV).is_some() {
        eprintln!("SKIPPED: {why} ({SKIP_COMPILER_TESTS_ENV} is set)");
        return None;
    }
    panic!("{why}. Install one, or set {SKIP_COMPILER_TESTS_ENV}=1 to skip the tests that need it");
}

/// Compiles `tests/support/<source>` into a shared library in `out_dir`, with extra `-D` flags.
/// Returns `None` only where [`compiler`] allows a skip.
#[allow(dead_code)] // not every test binary that includes this module compiles C
pub fn build_shared_library(
    source: &str,
    out_dir: &Path,
    name: &str,
    defines: &[&str],
) -> Option<PathBuf> {
    let compiler = compiler("CC", "cc", source)?;
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
        Err(e) => panic!("{compiler} did not run on {}: {e}", src.display()),
    }
}

/// The name of the environment variable a child process gets from [`run_test_without_gpu`].
pub const GPU_HIDDEN_ENV: &str = "GASWORKS_TEST_GPU_HIDDEN";

/// Runs test `name` of the current test binary in a child process that sees no GPU
/// (`CUDA_VISIBLE_DEVICES` empty: the driver then reports no device), and asserts that the
/// child ran it and it passed. A test of the no-GPU behaviour calls this on a GPU host instead
/// of returning early, so it checks there too; in the child it must find no GPU (see
/// [`assert_gpu_hidden_worked`]).
#[allow(dead_code)] // not every test binary that includes this module tests the no-GPU path
pub fn run_test_without_gpu(name: &str) {
    run_child_test(name, [("CUDA_VISIBLE_DEVICES", ""), (GPU_HIDDEN_ENV, "1")]);
}

/// Runs test `name` of the current test binary (ignored or not: a child is often an ignored
/// test that only its parent runs) in a child process with `envs` added, and asserts that the
/// child ran that one test and it passed.
#[allow(dead_code)] // not every test binary that includes this module runs a child
pub fn run_child_test<K, V>(name: &str, envs: impl IntoIterator<Item = (K, V)>)
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            name,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(envs)
        .output()
        .expect("spawn the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child test {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// In a test that found a GPU: fails if this process is the child of
/// [`run_test_without_gpu`], whose GPU should have been hidden.
#[allow(dead_code)]
pub fn assert_gpu_hidden_worked() {
    assert!(
        std::env::var_os(GPU_HIDDEN_ENV).is_none(),
        "CUDA_VISIBLE_DEVICES= did not hide the GPU from the child process"
    );
}

/// Runs the ignored test `child_test` of the current test binary in a child process with the
/// NVTX recorder tool attached (`NVTX_INJECTION64_PATH`), and returns what the recorder wrote.
/// The child knows it is the child by `child_env` = 1; the recorder writes to the file named by
/// `GASWORKS_NVTX_RECORD`. The recorder is the prebuilt one named by `GASWORKS_NVTX_RECORDER`
/// (GPU hosts have no compiler for the carried test binaries), else built here.
#[allow(dead_code)] // not every test binary that includes this module records NVTX ranges
pub fn record_nvtx_in_child(child_test: &str, child_env: &str) -> String {
    record_nvtx_in_child_with(child_test, child_env, None)
}

/// [`record_nvtx_in_child`], the child running on `fake` GPU when one is given.
#[allow(dead_code)]
pub fn record_nvtx_in_child_with(
    child_test: &str,
    child_env: &str,
    fake: Option<&FakeGpu>,
) -> String {
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
        .envs(fake.map(FakeGpu::env).unwrap_or_default())
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

/// The fake GPU of tests/support/fake_gpu_cuda.c and fake_gpu_optix.c (docs/gpu-checks.md):
/// one device whose memory is host memory, and an OptiX that builds there, checks its inputs
/// and logs every call (`FAKE_GPU_LOG`).
#[allow(dead_code)] // not every test binary that includes this module uses the fake GPU
pub struct FakeGpu {
    /// Holds `libcuda.so.1` and `libcuda.so` (cudarc tries that name first).
    pub lib_dir: PathBuf,
    /// `libnvoptix.so.1`, for `GASWORKS_OPTIX_LIBRARY`.
    pub optix: PathBuf,
}

#[allow(dead_code)]
impl FakeGpu {
    /// Builds the two libraries into `dir`; `None` only where [`compiler`] allows a skip.
    pub fn build(dir: &Path) -> Option<FakeGpu> {
        std::fs::create_dir_all(dir).expect("scratch dir");
        let cuda = build_shared_library("fake_gpu_cuda.c", dir, "libcuda.so.1", &[])?;
        std::fs::copy(&cuda, dir.join("libcuda.so")).expect("copy libcuda.so.1");
        let optix = build_shared_library("fake_gpu_optix.c", dir, "libnvoptix.so.1", &[])?;
        Some(FakeGpu {
            lib_dir: dir.to_path_buf(),
            optix,
        })
    }

    /// The environment that puts a child process on this GPU (and takes the fake's requests
    /// to hang or crash off it; callers add those back).
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("LD_LIBRARY_PATH", self.lib_dir.clone().into_os_string()),
            (
                gasworks::optix::loader::OPTIX_LIBRARY_ENV,
                self.optix.clone().into_os_string(),
            ),
        ]
    }
}

/// Checks what a render said whose GPU `gpu` (`streams` streams, among `workers` workers) lost
/// its CUDA context to a sticky error, mid-frame or in its calibration: one warning, at the
/// first stream to fail, naming the error and retiring every stream of the GPU; the closing
/// line counting them; and none of the releases that fail after the loss warned about one by
/// one.
#[allow(dead_code)] // for the test binaries that render on a fake or a real GPU
pub fn check_lost_gpu_stderr(what: &str, stderr: &str, gpu: u32, streams: usize, workers: usize) {
    let name = format!("gpu{gpu}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with(&format!("warning: worker {name}/s"))
                || l.starts_with(&format!("warning: calibrating worker {name}/s"))
        })
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "{what}: one warning for the GPU:\n{stderr}"
    );
    let w = warnings[0];
    assert!(
        w.contains("CUDA_ERROR_ILLEGAL_ADDRESS") || w.contains("CUDA_ERROR_LAUNCH_FAILED"),
        "{what}: no sticky error named in:\n{stderr}"
    );
    for says in [
        format!("{name} can render no more (its device is lost"),
        format!("so its workers {name}/s"),
        "are retired; the other workers take their tiles".to_string(),
    ] {
        assert!(w.contains(&says), "{what}: no {says:?} in:\n{stderr}");
    }
    for s in 0..streams {
        assert!(
            w.contains(&format!("{name}/s{s}")),
            "{what}: {name}/s{s} not retired:\n{stderr}"
        );
    }
    let closing =
        format!("warning: the frame went on without {streams} of {workers} workers ({name}/s");
    assert!(
        stderr.contains(&closing),
        "{what}: no {closing:?} in:\n{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{what}: {stderr}");
}

/// At the process's exit, nothing the host made on the (fake) GPU was left alive: the fakes
/// append what is (allocations, bytes, streams, events; contexts, modules, program groups,
/// pipelines) to their log, and every count must be 0 (RAII for every GPU resource).
#[allow(dead_code)] // for the test binaries that run on the fake GPU
pub fn assert_nothing_left_alive(label: &str, log: &str) {
    let exits: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("exit: live "))
        .collect();
    assert!(
        exits.iter().any(|l| l.contains("allocations="))
            && exits.iter().any(|l| l.contains("contexts=")),
        "{label}: the fakes did not report at exit:\n{log}"
    );
    for line in exits {
        assert!(
            line.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .all(|(_, v)| v == "0"),
            "{label}: left alive at exit: {line}"
        );
    }
}
