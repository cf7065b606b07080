//! The batched builder's NVTX ranges, as a profiler sees them: on an NVIDIA GPU, and on the fake
//! GPU (tests/support/fake_gpu_*.c, docs/gpu-checks.md) anywhere, in `cargo test`. The NVTX
//! recorder tool (tests/support/nvtx_recorder.c) stands in for Nsight Systems: this test reruns
//! itself in a child process with `NVTX_INJECTION64_PATH` pointing at the tool, the child
//! builds a small scene, and the parent checks the recorded names and nesting.

mod support;

use glam::Vec3;

use gasworks::nvtx;
use gasworks::optix::accel::{Accel, AccelOptions};
use gasworks::optix::plan::MergeOptions;
use gasworks::optix::{ContextOptions, DeviceContext, Gpu};
use gasworks::scene::{Group, Material, Scene};

const CHILD: &str = "GASWORKS_ACCEL_NVTX_CHILD";

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
    check_ranges(&support::record_nvtx_in_child(
        "child_builds_with_nvtx",
        CHILD,
    ));
}

/// The same on the fake GPU: the ranges are the host's, whatever device runs the builds.
#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn builder_ranges_name_each_gas_build_and_stream_on_the_fake_gpu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(fake) = support::FakeGpu::build(dir.path()) else {
        return;
    };
    check_ranges(&support::record_nvtx_in_child_with(
        "child_builds_with_nvtx",
        CHILD,
        Some(&fake),
    ));
}

fn check_ranges(text: &str) {
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
