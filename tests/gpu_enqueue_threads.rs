//! On an NVIDIA GPU: GAS batches enqueued from several host threads (`--enqueue-threads`)
//! give the same ray hits as the f64 brute-force oracle, and write only inside their ranges.
//! A test binary of its own: the threaded enqueue has not run on a GPU yet, and a crash here
//! must not take tests/gpu_accel_raycast.rs's results down with it.

mod raycast_support;

use gasworks::optix::accel::AccelOptions;
use gasworks::optix::plan::{Assign, MergeOptions, ScratchMode, DEFAULT_LPT_BUILD_WEIGHT};
use raycast_support::{assert_batches_stay_in_their_ranges, check_scene, context, synthetic_scene};

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

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn threaded_enqueue_agrees_with_cpu_on_a_heavy_tailed_scene() {
    let ctx = context(None);
    let modes: Vec<(String, AccelOptions)> = threaded_modes()
        .into_iter()
        .map(|o| (format!("{o:?}"), o))
        .collect();
    check_scene(&ctx, &synthetic_scene(3, 300), 1500, &modes);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn threaded_enqueue_writes_only_inside_the_ranges() {
    let mut configs = Vec::new();
    for streams in [8, 16] {
        for enqueue_threads in [2, 8] {
            for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
                configs.push(AccelOptions {
                    streams,
                    scratch,
                    enqueue_threads,
                    guard_bytes: 4096,
                    ..AccelOptions::default()
                });
            }
        }
    }
    assert_batches_stay_in_their_ranges(&context(None), &configs, 5);
}
