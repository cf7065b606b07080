//! On an NVIDIA GPU: GAS batches enqueued through a context per stream
//! (`--build-contexts per-stream`) give the same ray hits as the f64 brute-force oracle, traced
//! through the main context's IAS and pipeline, and write only inside their ranges.
//!
//! This is the check that a handle built through one OptiX context is good in another's IAS
//! and launches on the same GPU. Without it the `race` step's runs of the known LPT crash with
//! per-stream contexts (docs/gas-builds.md) would say nothing: a batch that "passes" with
//! wrong GASes is no answer. A binary of its own: per-stream contexts have not run on a GPU
//! yet, and a crash here must not take the other GPU tests' results with it.

mod raycast_support;

use gasworks::optix::accel::{AccelOptions, BuildContexts};
use gasworks::optix::plan::{Assign, MergeOptions, ScratchMode, DEFAULT_LPT_BUILD_WEIGHT};
use raycast_support::{assert_batches_stay_in_their_ranges, check_scene, context, synthetic_scene};

/// The build modes that never failed with one context (round-robin, LPT at the default
/// weight), with compaction (compacted through the context that built each GAS), merging and
/// threaded enqueues (whose calls now run side by side, one context each).
fn per_stream_modes() -> Vec<AccelOptions> {
    let mut v = Vec::new();
    for streams in [1, 4, 16] {
        for assign in [Assign::RoundRobin, Assign::Lpt] {
            for (compact, merge_below, enqueue_threads) in
                [(false, 0, 1), (true, 64, 1), (false, 0, 4)]
            {
                v.push(AccelOptions {
                    streams,
                    assign,
                    scratch: ScratchMode::Shared,
                    compact,
                    merge: MergeOptions::new(merge_below),
                    lpt_build_weight: DEFAULT_LPT_BUILD_WEIGHT,
                    enqueue_threads,
                    contexts: BuildContexts::PerStream,
                    ..AccelOptions::default()
                });
            }
        }
    }
    v
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn per_stream_contexts_agree_with_cpu_on_a_heavy_tailed_scene() {
    let ctx = context(None);
    let modes: Vec<(String, AccelOptions)> = per_stream_modes()
        .into_iter()
        .map(|o| (format!("{o:?}"), o))
        .collect();
    check_scene(&ctx, &synthetic_scene(4, 300), 1500, &modes);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn per_stream_contexts_write_only_inside_the_ranges() {
    let mut configs = Vec::new();
    for streams in [4, 8] {
        for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
            configs.push(AccelOptions {
                streams,
                scratch,
                guard_bytes: 4096,
                contexts: BuildContexts::PerStream,
                ..AccelOptions::default()
            });
        }
    }
    assert_batches_stay_in_their_ranges(&context(None), &configs, 5);
}

/// Without a GPU: the option's default, and its names as build-bench's CSV writes them.
#[test]
fn one_shared_context_is_the_default() {
    assert_eq!(AccelOptions::default().contexts, BuildContexts::Shared);
    assert_eq!(BuildContexts::Shared.name(), "shared");
    assert_eq!(BuildContexts::PerStream.name(), "per-stream");
    assert!(per_stream_modes()
        .iter()
        .all(|o| o.contexts == BuildContexts::PerStream && o.lpt_build_weight >= 5000));
}
