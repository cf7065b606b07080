//! The evidence behind `sched::measured_costs_carry_over`, replayed from the `--stats` files
//! an H200 wrote (the 10M-triangle toystore at 960x540, four passes of 64 spp):
//! - `bench/results/2026-11-26-NVIDIA-H200-run2/`: `--devices gpu0x2,cpu`, planned then with
//!   corrected costs in every pass after the first. Costs measured on the GPU, carried to the
//!   CPU threads' pieces, ranked them far worse than the estimate, and did no better on the
//!   GPU's own tiles: why the scheduler no longer carries measured costs across kinds of
//!   device.
//! - `bench/results/2026-11-26-NVIDIA-H200-run3/`: `--devices gpu0x2` alone, where the
//!   corrected costs ranked the GPU's later tiles better than the estimate: why it still
//!   carries them within one kind of device.
//!
//! `sched::correction_replay` rebuilds each pass's planned costs with this code's
//! `CostMap::corrected` and `measured_costs`; where the run planned with corrected
//! costs, it must find the costs the run planned with.

mod cli_support;

use cli_support::gasworks_command;
use std::path::{Path, PathBuf};

use gasworks::sched::correction_replay::{
    device_names, replay_corrections, speed_class_keys, PassReplay,
};
use gasworks::sched::report::{costmap_path, read_costmap, read_tiles, read_workers};

const IMAGE: (u32, u32) = (960, 540);
const MIXED: &str = "bench/results/2026-11-26-NVIDIA-H200-run2/sched-gpu0x2-cpu-256spp-passes";
const GPU_ONLY: &str = "bench/results/2026-11-26-NVIDIA-H200-run3/sched-gpu0x2-256spp-passes";

fn evidence(run: &str, suffix: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("{run}{suffix}"))
}

fn replay(run: &str) -> Vec<PassReplay> {
    let rows = read_tiles(&evidence(run, ".tiles.csv")).unwrap();
    let estimate = read_costmap(&costmap_path(&evidence(run, ".costmap.csv"))).unwrap();
    let workers = read_workers(&evidence(run, ".csv")).unwrap();
    replay_corrections(
        &rows,
        &estimate,
        IMAGE,
        device_names(&workers),
        speed_class_keys(&workers),
        None,
    )
}

/// (planned, estimated) Spearman of `device` in each pass after the first, to 3 decimals.
fn ranked(passes: &[PassReplay], device: &str) -> Vec<(String, String)> {
    passes[1..]
        .iter()
        .map(|p| {
            let d = p.devices.iter().find(|d| d.device == device).unwrap();
            (format!("{:.3}", d.planned), format!("{:.3}", d.estimated))
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn costs_measured_on_a_gpu_rank_a_cpus_pieces_worse_than_the_estimate() {
    let passes = replay(MIXED);
    assert_eq!(passes.len(), 4);
    // The replay is the run: this code plans what the GPU run planned.
    for p in &passes {
        assert!(p.largest_difference <= 1e-5, "{p:?}");
        let tiles: usize = p.devices.iter().map(|d| d.tiles).sum();
        assert_eq!(tiles, p.tiles);
    }
    assert_eq!(
        ranked(&passes, "cpu"),
        pairs(&[("-0.174", "0.759"), ("0.031", "0.766"), ("0.068", "0.585")])
    );
    assert_eq!(
        ranked(&passes, "gpu0"),
        pairs(&[("0.405", "0.424"), ("0.699", "0.671"), ("0.792", "0.813")])
    );
}

#[test]
fn costs_measured_on_a_gpu_rank_its_own_later_tiles_better_than_the_estimate() {
    let passes = replay(GPU_ONLY);
    assert_eq!(passes.len(), 4);
    for p in &passes {
        assert!(p.largest_difference <= 1e-5, "{p:?}");
    }
    assert_eq!(
        ranked(&passes, "gpu0"),
        pairs(&[("0.804", "0.720"), ("0.537", "0.345"), ("0.631", "0.224")])
    );
}

#[test]
fn schedule_sim_prints_the_replay() {
    let out = gasworks_command()
        .arg("schedule-sim")
        .arg(evidence(GPU_ONLY, ".csv"))
        .arg("--replay-corrections")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("(960x540 image)"), "{stdout}");
    for line in [
        "pass 2: 60 tiles; replayed costs against the CSV's predicted: largest relative difference ",
        "  gpu0 (60 tiles): corrected 0.804, estimate 0.720",
        "  gpu0 (60 tiles): corrected 0.537, estimate 0.345",
        "  gpu0 (60 tiles): corrected 0.631, estimate 0.224",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
}
