//! Running the `gasworks` binary from a test, as a user runs it.
//!
//! Every test binary that starts `gasworks` gets it here, so that one rule decides which
//! binary that is: on a GPU host (`scripts/gpu-session.sh`) the test binaries were built on
//! another machine, and the path cargo compiled into them is that machine's.

// Each test binary compiles this module on its own and uses only some of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gasworks::render::output::{read_image, Pixels};

/// The binary under test: `$GASWORKS_BIN` when set (`scripts/gpu-session.sh` points it at the
/// carried release binary), else the one cargo built with these tests.
pub fn gasworks_path() -> PathBuf {
    match std::env::var_os("GASWORKS_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(env!("CARGO_BIN_EXE_gasworks")),
    }
}

/// A command for the binary under test, to add arguments, environment and a folder to.
pub fn gasworks_command() -> Command {
    Command::new(gasworks_path())
}

/// `gasworks ARGS` in the test's folder, run to its end.
pub fn gasworks<S: AsRef<OsStr>>(args: &[S]) -> Output {
    gasworks_command()
        .args(args)
        .output()
        .expect("the gasworks binary runs")
}

/// `gasworks ARGS` in `dir` (where the relative paths in ARGS lead), run to its end.
pub fn gasworks_in<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Output {
    gasworks_command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the gasworks binary runs")
}

/// The bundled Cornell box, `assets/cornell/cornell.obj`.
pub fn cornell() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj")
}

/// What a run printed on stderr, for assertions' messages.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A linear (EXR) image's pixels and its render key; panics, naming the file, on anything
/// else.
pub fn linear(path: &Path) -> (Vec<[f32; 3]>, String) {
    let image = read_image(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match image.pixels {
        Pixels::Linear(p) => (p, image.meta.render),
        Pixels::Srgb8(_) => panic!("{}: not linear", path.display()),
    }
}
