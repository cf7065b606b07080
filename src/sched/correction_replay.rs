//! Replays a multi-pass render's cost-map corrections from its `--stats` files, device by
//! device: the evidence behind [`super::measured_costs_carry_over`].
//!
//! For each pass, the costs it would have been planned with are rebuilt the way a render
//! rebuilds them: the estimate, corrected after every earlier pass by that pass's measured
//! costs ([`CostMap::corrected`], fed by [`super::measured_costs`], with the speed classes
//! the render recorded, or one per device in older files). Then, for each device, the tiles it ran are ranked by those costs and by the
//! raw estimate against the seconds measured on them (Spearman).
//!
//! As in a render, a pass that renders only part of the image (adaptive sampling's stopped
//! blocks, or a pass resumed inside) does not correct the map, and in an adaptive render a
//! tile is priced by its pixels in blocks still sampling: the replay rebuilds each pass's
//! blocks from `OUT.blocks.csv` ([`BlockStops`]).
//!
//! Where the render itself planned with corrected costs (one kind of device), the rebuilt
//! costs are the CSV's `predicted` column, which checks the replay. Where it did not (mixed
//! devices), the replay says what the correction would have done. `gasworks schedule-sim
//! --replay-corrections` prints it; `tests/sched_correction_replay.rs` replays a measured
//! render's files (figures: docs/guide/workers.md).

use super::adaptive_sampling::BlockStops;
use super::costmap::CostMap;
use super::report::{DeviceAccuracy, PassReport, TileRow, WorkerRow};
use super::sat::MapScale;
use super::workers::TileRecord;
use super::{measured_costs, rendered_cost};

/// One pass of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct PassReplay {
    /// Counting from 0, as in the CSV files.
    pub pass: usize,
    pub tiles: usize,
    /// Whether the pass rendered part of the image (adaptive sampling stopped blocks, or it
    /// was resumed inside): its measurements then correct nothing, as in the render.
    pub partial: bool,
    /// The largest relative difference between the rebuilt costs and the CSV's `predicted`:
    /// near 0 where the render planned with corrected costs (and in every first pass).
    pub largest_difference: f64,
    /// Per device, in order of first appearance: Spearman of the rebuilt costs (`planned`)
    /// and of the raw estimate (`estimated`) against the measured seconds.
    pub devices: Vec<DeviceAccuracy>,
}

/// The device of every worker of a render, keyed by (rank, worker), from its `OUT.csv` rows;
/// a worker the rows do not name is `worker-N` (an `OUT.csv` from before devices were
/// recorded, or none).
pub fn device_names(workers: &[WorkerRow]) -> impl Fn(usize, usize) -> String + '_ {
    move |rank, worker| {
        workers
            .iter()
            .find(|w| w.rank == rank && w.worker == worker)
            .map(|w| w.device.clone())
            .unwrap_or_else(|| format!("worker-{worker}"))
    }
}

/// The speed class of every worker of a render, keyed by (rank, worker), from its `OUT.csv`
/// rows: "class N" as the render recorded it, or, in files from before classes were
/// recorded, the worker's device ([`device_names`]), one class per device name.
pub fn speed_class_keys(workers: &[WorkerRow]) -> impl Fn(usize, usize) -> String + '_ {
    let device = device_names(workers);
    move |rank, worker| {
        workers
            .iter()
            .find(|w| w.rank == rank && w.worker == worker)
            .and_then(|w| w.speed_class)
            .map_or_else(|| device(rank, worker), |c| format!("class {c}"))
    }
}

/// Replays every pass of `rows` (a render's `OUT.tiles.csv`) planned from `estimate` (its
/// `OUT.costmap.csv`) over an image (or window) of `image` pixels. `device(rank, worker)`
/// names the device of each worker ([`device_names`]), `class(rank, worker)` its speed class
/// (workers of one class are measured as one, [`speed_class_keys`]); `blocks` are an adaptive
/// render's (its `OUT.blocks.csv`).
pub fn replay_corrections(
    rows: &[TileRow],
    estimate: &CostMap,
    image: (u32, u32),
    device: impl Fn(usize, usize) -> String,
    class: impl Fn(usize, usize) -> String,
    blocks: Option<&BlockStops>,
) -> Vec<PassReplay> {
    let workers = ReplayWorkers::of(rows, device, class);
    let scale = MapScale::between(image, (estimate.width, estimate.height));
    let passes = rows.iter().map(|r| r.pass + 1).max().unwrap_or(0);
    let mut plan = estimate.clone();
    let mut speeds: Option<Vec<f64>> = None;
    let mut out = Vec::with_capacity(passes);
    for pass in 0..passes {
        let mut these: Vec<&TileRow> = rows.iter().filter(|r| r.pass == pass).collect();
        if these.is_empty() {
            continue;
        }
        these.sort_by_key(|r| r.task);
        let tiles: Vec<_> = these.iter().map(|r| r.tile()).collect();
        let mask = blocks.map(|b| b.mask(pass)).filter(|m| !m.all());
        let area: u64 = tiles.iter().map(|t| t.pixel_count() as u64).sum();
        let partial = mask.is_some() || area < u64::from(image.0) * u64::from(image.1);
        let sat = plan.sat();
        let predicted: Vec<f64> = tiles
            .iter()
            .map(|t| rendered_cost(&sat, scale, *t, mask.as_ref()))
            .collect();
        let largest_difference = these
            .iter()
            .zip(&predicted)
            .map(|(r, p)| (p - r.predicted).abs() / r.predicted.abs().max(1e-12))
            .fold(0.0, f64::max);
        let report = replayed_pass_report(&these, &tiles, predicted, &workers, &speeds);
        out.push(PassReplay {
            pass,
            tiles: tiles.len(),
            partial,
            largest_difference,
            devices: report.accuracy_by_device(&workers.devices),
        });
        // As a render does after each pass: speeds by class, costs at a common speed.
        let (measured_speeds, normalized) =
            measured_costs(&workers.classes, &report, speeds.as_deref());
        if !partial {
            plan = plan.corrected(image, &tiles, &normalized);
        }
        speeds = Some(measured_speeds);
    }
    out
}

/// The workers of a replayed render, as its tile rows name them.
struct ReplayWorkers {
    /// (rank, worker) of each.
    keys: Vec<(usize, usize)>,
    devices: Vec<String>,
    /// Each worker's speed class, numbered densely in order of first appearance.
    classes: Vec<usize>,
}

impl ReplayWorkers {
    fn of(
        rows: &[TileRow],
        device: impl Fn(usize, usize) -> String,
        class: impl Fn(usize, usize) -> String,
    ) -> ReplayWorkers {
        // Workers of every rank, numbered densely in order of first appearance, each with its
        // device and its speed class.
        let mut keys: Vec<(usize, usize)> = Vec::new();
        for r in rows {
            if !keys.contains(&(r.rank, r.worker)) {
                keys.push((r.rank, r.worker));
            }
        }
        let devices: Vec<String> = keys.iter().map(|&(rank, w)| device(rank, w)).collect();
        let class_keys: Vec<String> = keys.iter().map(|&(rank, w)| class(rank, w)).collect();
        let mut names: Vec<&str> = Vec::new();
        let classes: Vec<usize> = class_keys
            .iter()
            .map(|d| match names.iter().position(|n| n == d) {
                Some(g) => g,
                None => {
                    names.push(d);
                    names.len() - 1
                }
            })
            .collect();
        ReplayWorkers {
            keys,
            devices,
            classes,
        }
    }

    /// The dense number of the worker that ran `r`.
    fn index(&self, r: &TileRow) -> usize {
        self.keys
            .iter()
            .position(|k| *k == (r.rank, r.worker))
            .unwrap_or(0)
    }
}

/// The report of one replayed pass: its tiles (`these`, in task order), the costs rebuilt for
/// them, and where and how long each ran; planned at `speeds` (`None` before any pass).
fn replayed_pass_report(
    these: &[&TileRow],
    tiles: &[crate::render::Tile],
    predicted: Vec<f64>,
    workers: &ReplayWorkers,
    speeds: &Option<Vec<f64>>,
) -> PassReport {
    // Task numbers index the report's per-tile columns: renumber densely in task order.
    PassReport {
        samples: 0..1,
        tiles: tiles.to_vec(),
        predicted,
        estimated: these.iter().map(|r| r.estimated).collect(),
        initial_deques: Vec::new(),
        records: these
            .iter()
            .enumerate()
            .map(|(task, r)| TileRecord {
                task,
                worker: workers.index(r),
                stolen_from: None,
                start_s: r.start_s,
                end_s: r.end_s,
                cost_s: r.measured_s,
            })
            .collect(),
        makespan_s: 0.0,
        workers: Vec::new(),
        speeds: speeds.clone().unwrap_or_default(),
        // (A resumed render's first pass, past 0, was planned with the estimate.)
        planned_with_measured: speeds.is_some(),
        skipped_pixels: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pass: usize, task: usize, x: u32, worker: usize, measured_s: f64) -> TileRow {
        TileRow {
            pass,
            task,
            x,
            y: 0,
            w: 4,
            h: 4,
            spp_from: 0,
            spp_to: 1,
            worker,
            stolen_from: -1,
            start_s: 0.0,
            end_s: measured_s,
            measured_s,
            predicted: 16.0,
            estimated: 16.0,
            rank: 0,
        }
    }

    /// A flat estimate over four 4x4 tiles whose real costs rise left to right: the first
    /// pass cannot rank them (every estimate equal), the second, planned with the first's
    /// measurements, ranks them perfectly, and the replay checks itself against `predicted`.
    #[test]
    fn a_second_pass_ranks_by_what_the_first_measured() {
        let estimate = CostMap::uniform(16, 4, 1.0);
        let seconds = [1.0, 2.0, 3.0, 4.0];
        let mut rows = Vec::new();
        for pass in 0..2 {
            for (t, s) in seconds.iter().enumerate() {
                rows.push(row(pass, t, 4 * t as u32, t % 2, *s));
            }
        }
        let replay = replay_corrections(
            &rows,
            &estimate,
            (16, 4),
            |_, _| "cpu".into(),
            |_, _| "cpu".into(),
            None,
        );
        assert_eq!(replay.len(), 2);
        let first = &replay[0];
        assert_eq!((first.pass, first.tiles), (0, 4));
        assert!(first.largest_difference < 1e-9, "{first:?}");
        assert_eq!(first.devices.len(), 1);
        assert!(first.devices[0].estimated.is_nan() || first.devices[0].estimated == 0.0);
        let second = &replay[1];
        assert!(
            (second.devices[0].planned - 1.0).abs() < 1e-12,
            "{second:?}"
        );
        // The CSV said 16 (the estimate) for the second pass too: the replay's costs differ.
        assert!(second.largest_difference > 0.1, "{second:?}");
    }

    #[test]
    fn devices_are_named_by_rank_and_worker_and_unknown_ones_by_number() {
        let workers = vec![
            WorkerRow {
                worker: 0,
                device: "gpu0".into(),
                rank: 0,
                speed_class: None,
            },
            WorkerRow {
                worker: 0,
                device: "cpu".into(),
                rank: 1,
                speed_class: None,
            },
        ];
        let name = device_names(&workers);
        assert_eq!(name(0, 0), "gpu0");
        assert_eq!(name(1, 0), "cpu");
        assert_eq!(name(0, 5), "worker-5");
    }

    #[test]
    fn recorded_speed_classes_name_workers_else_their_devices_do() {
        let row = |worker, device: &str, rank, speed_class| WorkerRow {
            worker,
            device: device.into(),
            rank,
            speed_class,
        };
        // gpu0 and gpu1 of one model, recorded as one class; a file from before classes.
        let recorded = vec![row(0, "gpu0", 0, Some(0)), row(1, "gpu1", 0, Some(0))];
        let class = speed_class_keys(&recorded);
        assert_eq!(class(0, 0), class(0, 1));
        let older = vec![row(0, "gpu0", 0, None), row(1, "gpu1", 0, None)];
        let class = speed_class_keys(&older);
        assert_eq!(
            (class(0, 0).as_str(), class(0, 1).as_str()),
            ("gpu0", "gpu1")
        );
    }
}
