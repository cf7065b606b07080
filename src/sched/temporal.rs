//! Temporal cost maps for a camera path's frames (`--camera-path`): consecutive frames of a
//! fly-through see much the same, so frame k+1 is planned with frame k's measured cost
//! ([`measured_map`]), blended with its own rasterized estimate ([`blend`]), where the
//! estimate alone knows only the scene's materials and depth. After each frame,
//! [`FrameFigures`] says how well the map it was planned with, and the estimate alone, ranked
//! its tiles against their measured cost, and which makespan each plan gives on those costs
//! (simulated, [`super::sim::Replay`]).

use crate::render::{RenderSettings, Tile};
use crate::scene::Scene;

use super::accuracy::spearman;
use super::costmap::CostMap;
use super::report::{efficiency, FrameReport, PassReport};
use super::sat::MapScale;
use super::sim::Replay;
use super::{estimate_costmap, EstimateKey, PreparedEstimate, SchedConfig};

/// The previous frame's share of the blend.
pub const WEIGHT: f64 = 0.5;

/// The seeds of the simulated passes' steals.
const SEEDS: [u64; 3] = [1, 2, 3];

/// A frame's measured cost, every pass's tiles' seconds spread over its cost map's cells
/// along the estimate's shape ([`Replay::new`]); `None` where no pass was timed.
pub fn measured_map(report: &FrameReport) -> Option<CostMap> {
    let passes: Vec<(Vec<Tile>, Vec<f64>)> = report
        .passes
        .iter()
        .map(|p| (p.tiles.clone(), by_task(p)))
        .collect();
    if passes.is_empty() {
        return None;
    }
    let (w, h) = (report.width, report.height);
    Some(Replay::new(w, h, report.costmap.clone(), &passes).measured)
}

/// Each tile's measured cost (at the fastest worker's speed), by task number.
fn by_task(pass: &PassReport) -> Vec<f64> {
    let mut cost = vec![0.0; pass.tiles.len()];
    for (r, c) in pass.records.iter().zip(pass.measured_at_fastest()) {
        if let Some(slot) = cost.get_mut(r.task) {
            *slot = c;
        }
    }
    cost
}

/// `estimate` blended with `previous` (a measured map of the same grid): each normalized to
/// the estimate's total, `WEIGHT` of the previous and the rest of the estimate. The estimate
/// alone where the grids differ or either map is empty.
pub fn blend(estimate: &CostMap, previous: &CostMap) -> CostMap {
    let total = |m: &CostMap| m.values.iter().map(|&v| f64::from(v)).sum::<f64>();
    let (e, p) = (total(estimate), total(previous));
    let same_grid = (estimate.width, estimate.height) == (previous.width, previous.height);
    if !same_grid || e <= 0.0 || p <= 0.0 || !p.is_finite() {
        return estimate.clone();
    }
    let values = estimate
        .values
        .iter()
        .zip(&previous.values)
        .map(|(&ev, &pv)| (WEIGHT * f64::from(pv) * e / p + (1.0 - WEIGHT) * f64::from(ev)) as f32)
        .collect();
    CostMap {
        width: estimate.width,
        height: estimate.height,
        values,
    }
}

/// The estimate a frame plans with, blended with the previous frame's measured map, and the
/// estimate alone (for [`FrameFigures`]).
pub fn prepare(
    scene: &Scene,
    settings: &RenderSettings,
    config: &SchedConfig,
    window: Tile,
    previous: &CostMap,
) -> (PreparedEstimate, CostMap) {
    let (raw, raster, stats) = estimate_costmap(scene, settings, config, window);
    let prepared = PreparedEstimate {
        key: EstimateKey::of(scene, settings, config, window),
        map: blend(&raw, previous),
        raster,
        stats,
    };
    (prepared, raw)
}

/// How well a frame's plan did, against the estimate alone, on its first pass's tiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameFigures {
    /// Spearman's rank correlation with the tiles' measured cost: of the map the frame was
    /// planned with, and of the estimate alone.
    pub spearman_plan: f64,
    pub spearman_estimate: f64,
    /// The first pass's makespan efficiency, simulated on its measured costs with the
    /// frame's workers, planned with each map (mean over [`SEEDS`]).
    pub efficiency_plan: f64,
    pub efficiency_estimate: f64,
    /// The first pass's efficiency as it rendered.
    pub efficiency_rendered: f64,
}

impl FrameFigures {
    /// The figures of `report`'s first pass; `estimate` is the estimate alone (the map the
    /// frame planned with, where it had no previous frame). `None` without a timed pass.
    pub fn of(report: &FrameReport, estimate: &CostMap) -> Option<FrameFigures> {
        let pass = report.passes.first()?;
        let measured = by_task(pass);
        let scale = MapScale::between(
            (report.width, report.height),
            (estimate.width, estimate.height),
        );
        let sat = estimate.sat();
        let alone: Vec<f64> = pass
            .tiles
            .iter()
            .map(|t| scale.tile_cost(&sat, *t))
            .collect();
        let first = [(pass.tiles.clone(), measured.clone())];
        let cost = Replay::new(report.width, report.height, estimate.clone(), &first).measured;
        let simulate = |plan: &CostMap| {
            let replay = Replay {
                width: report.width,
                height: report.height,
                estimate: plan.clone(),
                measured: cost.clone(),
            };
            let runs = replay.run(
                report.strategy,
                report.steal,
                pass.workers.len(),
                pass.tiles.len() as u32,
                0.0,
                &SEEDS,
            );
            runs.iter().map(|r| r.efficiency()).sum::<f64>() / runs.len().max(1) as f64
        };
        Some(FrameFigures {
            spearman_plan: spearman(&pass.estimated, &measured),
            spearman_estimate: spearman(&alone, &measured),
            efficiency_plan: simulate(&report.costmap),
            efficiency_estimate: simulate(estimate),
            efficiency_rendered: efficiency(pass.busy_s(), pass.workers.len(), pass.makespan_s),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blend_keeps_the_estimates_total_and_weighs_the_measured_shape() {
        let estimate = CostMap {
            width: 2,
            height: 1,
            values: vec![1.0, 3.0],
        };
        let measured = CostMap {
            width: 2,
            height: 1,
            values: vec![30.0, 10.0],
        };
        let b = blend(&estimate, &measured);
        // Previous normalized to 4: [3, 1]; half of it and half of [1, 3].
        assert_eq!(b.values, vec![2.0, 2.0]);
        let other = CostMap::uniform(3, 1, 1.0);
        assert_eq!(blend(&estimate, &other), estimate);
        assert_eq!(blend(&estimate, &CostMap::uniform(2, 1, 0.0)), estimate);
    }
}
