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
