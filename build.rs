//! Build script: stamps the binary with the git commit it was built from, so that benchmark
//! CSVs and logs name the exact code that produced them; and tells the tests whether a C and a
//! C++ compiler are at hand.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let stamp = if dirty && commit != "unknown" {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=GASWORKS_GIT_COMMIT={stamp}");
    // Re-stamp when HEAD moves or the index changes (commits, checkouts).
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    println!("cargo:rerun-if-changed=build.rs");
    compiler_cfgs();
}

/// Some integration tests compile C (`tests/support/*.c`) or C++ (the host harness of the
/// device code). Where the compiler is missing when the tests are built, they are marked
/// `#[ignore]` through `cfg(gasworks_no_cc)` / `cfg(gasworks_no_cxx)`, so that `cargo test`
/// lists them as ignored instead of passing them without running. On CI (`CI` set) the cfgs
/// are never set: the tests run, and fail loudly without their compiler.
fn compiler_cfgs() {
    println!("cargo::rustc-check-cfg=cfg(gasworks_no_cc)");
    println!("cargo::rustc-check-cfg=cfg(gasworks_no_cxx)");
    for var in ["CC", "CXX", "CI", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if std::env::var_os("CI").is_some() {
        return;
    }
    let runs = |var: &str, default: &str| {
        let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
        Command::new(compiler)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !runs("CC", "cc") {
        println!("cargo:rustc-cfg=gasworks_no_cc");
        println!(
            "cargo:warning=no C compiler ($CC or cc): the tests that build C code are ignored"
        );
    }
    if !runs("CXX", "c++") {
        println!("cargo:rustc-cfg=gasworks_no_cxx");
        println!("cargo:warning=no C++ compiler ($CXX or c++): the tests that build the device code on the host are ignored");
    }
}
