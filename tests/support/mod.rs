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
