//! On an NVIDIA GPU: GAS batches enqueued from several host threads (`--enqueue-threads`)
//! give the same ray hits as the f64 brute-force oracle, and write only inside their ranges.
//! A test binary of its own: the threaded enqueue has not run on a GPU yet, and a crash here
//! must not take tests/gpu_accel_raycast.rs's results down with it.

mod raycast_support;

use std::sync::Arc;

use gasworks::optix::accel::{Accel, AccelOptions, DeviceGeometry, GasBatch, StreamSet};
use gasworks::optix::plan::{
    group_gases, Assign, MergeOptions, ScratchMode, DEFAULT_LPT_BUILD_WEIGHT,
};
use gasworks::optix::raycast::RaycastPipeline;
use gasworks::optix::DeviceContext;
use gasworks::scene::gen::{sponza_like, SPONZA_LIKE_GROUPS, SPONZA_LIKE_TRIANGLES};
use gasworks::scene::Scene;
use raycast_support::{brute_force, compare, context, make_rays, synthetic_scene, CpuHit};

/// Thread counts below, at and above the stream counts (threads past the streams idle).
fn threaded_modes() -> Vec<AccelOptions> {
    let mut v = Vec::new();
    for streams in [2, 8, 16] {
        for enqueue_threads in [2, 3, 8, 32] {
            for assign in [Assign::RoundRobin, Assign::Lpt] {
                for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
                    v.push(AccelOptions {
                        streams,
                        assign,
                        scratch,
                        enqueue_threads,
                        compact: enqueue_threads == 3,
                        merge: MergeOptions::new(if enqueue_threads == 8 { 64 } else { 0 }),
                        lpt_build_weight: DEFAULT_LPT_BUILD_WEIGHT,
                        ..AccelOptions::default()
                    });
                }
            }
        }
    }
    v
}

fn check(ctx: &Arc<DeviceContext>, scene: &Scene, rays: usize) {
    let rays = make_rays(scene, rays, 7);
    let cpu: Vec<Option<CpuHit>> = rays.iter().map(|r| brute_force(scene, r)).collect();
    let pipeline = RaycastPipeline::new(ctx).expect("raycast pipeline");
    for o in threaded_modes() {
        let name = format!("{o:?}");
        let accel = Accel::build(ctx, scene, &o).unwrap_or_else(|e| panic!("{name}: build: {e}"));
        let gpu = pipeline
            .cast(&accel, &rays)
            .unwrap_or_else(|e| panic!("{name}: cast: {e}"));
        compare(scene, &rays, &cpu, &gpu, &name, o.merge.merge_below > 0);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn threaded_enqueue_agrees_with_cpu_on_a_heavy_tailed_scene() {
    let ctx = context(None);
    check(&ctx, &synthetic_scene(3, 300), 1500);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn threaded_enqueue_writes_only_inside_the_ranges() {
    let ctx = context(None);
    let scene = sponza_like(SPONZA_LIKE_GROUPS, SPONZA_LIKE_TRIANGLES, 1).expect("sponza-like");
    let gpu = ctx.gpu();
    let upload = gpu.new_stream().expect("stream");
    let geometry = DeviceGeometry::upload(gpu, &upload, &scene).expect("geometry");
    let triangles: Vec<u64> = scene
        .groups
        .iter()
        .map(|g| g.triangle_count() as u64)
        .collect();
    for streams in [8, 16] {
        for enqueue_threads in [2, 8] {
            for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
                let o = AccelOptions {
                    streams,
                    scratch,
                    enqueue_threads,
                    guard_bytes: 4096,
                    ..AccelOptions::default()
                };
                let table = group_gases(&triangles, &o.merge);
                let mut batch = GasBatch::prepare(&ctx, &geometry, table, &o).expect("prepare");
                let set = StreamSet::new(gpu, streams).expect("streams");
                batch.arm_guards(set.main()).expect("arm guards");
                for run in 0..5 {
                    let handles = batch.enqueue(&set).expect("enqueue");
                    assert!(
                        handles.iter().all(|&h| h != 0),
                        "{o:?}: a build got no handle"
                    );
                    let written = batch.written_guards(&set).expect("read guards");
                    assert!(
                        written.is_empty(),
                        "{o:?}, run {run}: {}",
                        written
                            .iter()
                            .map(|(g, span)| batch.describe_guard(g, *span))
                            .collect::<Vec<_>>()
                            .join("; ")
                    );
                }
            }
        }
    }
}
