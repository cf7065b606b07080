//! On an NVIDIA GPU: the batched builder's NVTX ranges, as a profiler sees them. The NVTX
//! recorder tool (tests/support/nvtx_recorder.c) stands in for Nsight Systems: this test reruns
//! itself in a child process with `NVTX_INJECTION64_PATH` pointing at the tool, the child
//! builds a small scene, and the parent checks the recorded names and nesting.

mod support;

use std::process::Command;

use glam::Vec3;

use gasworks::nvtx;
use gasworks::optix::accel::{Accel, AccelOptions};
use gasworks::optix::plan::MergeOptions;
use gasworks::optix::{ContextOptions, DeviceContext, Gpu};
use gasworks::scene::{Group, Material, Scene};

const CHILD: &str = "GASWORKS_ACCEL_NVTX_CHILD";
const RECORD: &str = "GASWORKS_NVTX_RECORD";
/// A prebuilt recorder (scripts/build-for-device.sh puts one in .device/), for GPU hosts
/// without a C compiler.
const PREBUILT: &str = "GASWORKS_NVTX_RECORDER";

/// Twelve groups: every fourth one large (its own GAS), the rest of 2 triangles (merged).
fn scene() -> Scene {
    let groups = (0..12u32)
        .map(|g| {
            let n = if g % 4 == 0 { 300 } else { 2 };
            let mut group = Group {
                name: format!("g{g}"),
                ..Default::default()
            };
            for k in 0..n {
                let o = Vec3::new(g as f32 * 3.0, k as f32 * 0.01, 0.0);
                let base = group.positions.len() as u32;
                group.positions.extend([o, o + Vec3::X, o + Vec3::Y]);
                group.indices.push([base, base + 1, base + 2]);
                group.face_materials.push(0);
            }
            group
        })
        .collect();
    Scene::new("nvtx", groups, vec![Material::default_diffuse()])
}

fn options() -> AccelOptions {
    AccelOptions {
        streams: 2,
        compact: true,
        merge: MergeOptions::new(64),
        ..AccelOptions::default()
    }
}

/// The child's work (a no-op in a plain run).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn child_builds_with_nvtx() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert!(nvtx::is_attached(), "the recorder should have attached");
    let gpu = Gpu::open(0).expect("an NVIDIA GPU");
    let ctx = DeviceContext::new(&gpu, &ContextOptions::default()).expect("OptiX context");
    let accel = Accel::build(&ctx, &scene(), &options()).expect("build");
    assert_eq!(accel.stats().gases, 4);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn builder_ranges_name_each_gas_build_and_stream() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tool = match std::env::var_os(PREBUILT) {
        Some(p) => p.into(),
        None => {
            match support::build_shared_library("nvtx_recorder.c", dir.path(), "librec.so", &[]) {
                Some(t) => t,
                None => panic!("no C compiler and no ${PREBUILT}: cannot make the NVTX recorder"),
            }
        }
    };
    let record = dir.path().join("record.txt");
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_builds_with_nvtx",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env(nvtx::INJECTION_PATH_ENV, &tool)
        .env(RECORD, &record)
        .output()
        .expect("spawn the child");
    assert!(
        out.status.success(),
        "child failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&record).expect("the recorder wrote a record");
    let lines: Vec<&str> = text.lines().collect();
    let has = |prefix: &str| lines.iter().any(|l| l.starts_with(prefix));
    assert!(has("push 0 upload: 12 groups,"), "{text}");
    assert!(has("push 0 GAS batch: 4 builds on 2 streams"), "{text}");
    // 3 large groups alone, 9 small ones merged into one GAS: 4 builds, nested in the batch.
    let builds: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("push 1 GAS group"))
        .collect();
    assert_eq!(builds.len(), 4, "{text}");
    assert!(lines.contains(&"push 1 GAS group 0 stream 0"), "{text}");
    assert!(lines.contains(&"push 1 GAS group 4 stream 1"), "{text}");
    assert!(lines.contains(&"push 1 GAS groups 1+8 stream 1"), "{text}");
    assert!(has("push 0 compact: 4 GASes"), "{text}");
    assert!(has("push 0 IAS: 4 instances"), "{text}");
    for s in 0..2 {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("stream 0x") && l.ends_with(&format!("GAS stream {s}"))),
            "{text}"
        );
    }
}
