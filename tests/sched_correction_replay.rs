//! The evidence behind `sched::measured_costs_carry_over`, replayed from the `--stats` files
//! an H200 wrote (bench/results/2026-11-26-NVIDIA-H200-run2/, the 10M-triangle toystore at
//! 960x540, `--devices gpu0x2,cpu`, four passes of 64 spp, planned then with corrected costs
//! in every pass after the first).
//!
//! The replay rebuilds each pass's planned costs with this code's `CostMap::corrected` and
//! `measured_costs_by_group`, and must find the costs the GPU run planned with; then, device
//! by device, it ranks the tiles by the corrected costs and by the raw estimate against the
//! seconds measured on them. Costs measured on the GPU, carried to the CPU threads' pieces,
//! ranked them far worse than the estimate, and did no better on the GPU's own tiles: why
//! the scheduler no longer carries measured costs across kinds of device.

use std::io::Read;
use std::path::{Path, PathBuf};

use gasworks::render::Tile;
use gasworks::sched::measured_costs_by_group;
use gasworks::sched::report::{read_costmap, read_tiles, PassReport, TileRow};
use gasworks::sched::sat::MapScale;
use gasworks::sched::workers::TileRecord;

const RUN: &str = "bench/results/2026-11-26-NVIDIA-H200-run2/sched-gpu0x2-cpu-256spp-passes";
const IMAGE: (u32, u32) = (960, 540);
/// Workers 0 and 1 are `gpu0x2`'s streams (`--devices` entry 0), the rest CPU threads (the
/// run's `.csv` says so).
fn group_of(worker: usize) -> usize {
    usize::from(worker >= 2)
}

fn evidence(suffix: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("{RUN}{suffix}"))
}

fn gunzipped(path: &Path) -> tempfile::NamedTempFile {
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let out = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(out.path(), text).unwrap();
    out
}

#[test]
fn costs_measured_on_a_gpu_rank_a_cpus_pieces_worse_than_the_estimate() {
    let rows = read_tiles(&evidence(".tiles.csv")).unwrap();
    let map_file = gunzipped(&evidence(".costmap.csv.gz"));
    let estimate = read_costmap(map_file.path()).unwrap();
    let scale = MapScale::between(IMAGE, (estimate.width, estimate.height));
    let workers = rows.iter().map(|r| r.worker).max().unwrap() + 1;
    let groups: Vec<usize> = (0..workers).map(group_of).collect();
    let devices: Vec<String> = groups
        .iter()
        .map(|&g| if g == 0 { "gpu0" } else { "cpu" }.to_string())
        .collect();
    let passes = rows.iter().map(|r| r.pass).max().unwrap() + 1;
    assert_eq!(passes, 4);

    let mut plan = estimate.clone();
    let mut speeds: Option<Vec<f64>> = None;
    for pass in 0..passes {
        let mut these: Vec<&TileRow> = rows.iter().filter(|r| r.pass == pass).collect();
        these.sort_by_key(|r| r.task);
        let tiles: Vec<Tile> = these.iter().map(|r| r.tile()).collect();
        let sat = plan.sat();
        let predicted: Vec<f64> = tiles.iter().map(|t| scale.tile_cost(&sat, *t)).collect();
        // The replay is the run: this code plans what the GPU run planned.
        for (r, p) in these.iter().zip(&predicted) {
            assert!(
                (p - r.predicted).abs() <= 1e-5 * r.predicted.abs().max(1e-9),
                "pass {pass}, tile {}: replayed {p}, the run planned {}",
                r.task,
                r.predicted
            );
        }
        let report = PassReport {
            samples: 0..1,
            tiles: tiles.clone(),
            predicted,
            estimated: these.iter().map(|r| r.estimated).collect(),
            initial_deques: Vec::new(),
            records: these
                .iter()
                .map(|r| TileRecord {
                    task: r.task,
                    worker: r.worker,
                    stolen_from: None,
                    start_s: r.start_s,
                    end_s: r.end_s,
                    cost_s: r.measured_s,
                })
                .collect(),
            makespan_s: 0.0,
            workers: Vec::new(),
            speeds: speeds.clone().unwrap_or_default(),
            planned_with_measured: pass > 0,
        };
        if pass > 0 {
            // Measured: CPU -0.174/0.031/0.068 corrected against 0.759/0.766/0.585 estimated;
            // GPU 0.405/0.699/0.792 against 0.424/0.671/0.813.
            let by = report.accuracy_by_device(&devices);
            let of = |d: &str| by.iter().find(|a| a.device == d).unwrap();
            let (cpu, gpu) = (of("cpu"), of("gpu0"));
            assert!(
                cpu.planned < 0.1 && cpu.estimated > 0.5,
                "pass {pass}: the CPU's pieces ranked {:.3} corrected, {:.3} by the estimate",
                cpu.planned,
                cpu.estimated
            );
            assert!(
                gpu.planned < gpu.estimated + 0.05,
                "pass {pass}: the GPU's tiles ranked {:.3} corrected, {:.3} by the estimate",
                gpu.planned,
                gpu.estimated
            );
            assert_eq!(cpu.tiles + gpu.tiles, tiles.len());
        }
        // As the run did after each pass: speeds by group, costs at a common speed.
        let (measured_speeds, normalized) =
            measured_costs_by_group(&groups, &report, speeds.as_deref());
        plan = plan.corrected(IMAGE, &tiles, &normalized);
        speeds = Some(measured_speeds);
    }
}
