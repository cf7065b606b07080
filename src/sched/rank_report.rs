//! What a cluster render prints of its ranks: per-rank totals and the lines after the frame's
//! summary. The data ([`ClusterReport`]) live in `sched::ranks`, below the frame's report
//! that carries them.

use std::fmt::Write as _;

use super::ranks::{ClusterReport, RankPassCounters};
use super::report::FrameReport;

/// A rank's share of a frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankTotals {
    pub workers: usize,
    pub tiles: usize,
    pub busy_s: f64,
    /// Tiles its workers took from another local worker's deque.
    pub steals_within: usize,
    pub counters: RankPassCounters,
}

impl ClusterReport {
    /// Per rank, over all passes.
    pub fn rank_totals(&self, frame: &FrameReport) -> Vec<RankTotals> {
        let mut t = vec![RankTotals::default(); self.ranks.len()];
        for (r, info) in self.ranks.iter().enumerate() {
            t[r].workers = info.workers;
        }
        for p in &frame.passes {
            for rec in &p.records {
                let r = self.worker_rank[rec.worker];
                t[r].tiles += 1;
                t[r].busy_s += rec.seconds();
                if rec.stolen_from.is_some_and(|v| self.worker_rank[v] == r) {
                    t[r].steals_within += 1;
                }
            }
        }
        for pass in &self.counters {
            for (r, c) in pass.iter().enumerate() {
                let acc = &mut t[r].counters;
                acc.requests += c.requests;
                acc.grants += c.grants;
                acc.tiles_in += c.tiles_in;
                acc.tiles_out += c.tiles_out;
                acc.served += c.served;
            }
        }
        t
    }

    /// The lines printed after the frame's summary.
    pub fn summary(&self, frame: &FrameReport) -> String {
        let mut s = String::new();
        let totals = self.rank_totals(frame);
        let makespan = frame.makespan_s();
        let _ = writeln!(
            s,
            "cluster: {} ranks, {} workers; makespan {:.3} s, busy {:.3} s, efficiency {:.1}%",
            self.ranks.len(),
            frame.workers.len(),
            makespan,
            frame.busy_s(),
            100.0 * frame.efficiency()
        );
        for (r, (info, t)) in self.ranks.iter().zip(&totals).enumerate() {
            let _ = writeln!(
                s,
                "  rank {r:<3} {:<16} {:>3} worker{} busy {:>8.3} s  efficiency {:>5.1}%  tiles {:>5}  steals: {:>4} within, {:>4} tiles in, {:>4} out ({} request{}, {} granted)  [{}{}]",
                info.host,
                t.workers,
                if t.workers == 1 { " " } else { "s" },
                t.busy_s,
                100.0 * crate::sched::report::efficiency(t.busy_s, t.workers, makespan),
                t.tiles,
                t.steals_within,
                t.counters.tiles_in,
                t.counters.tiles_out,
                t.counters.requests,
                if t.counters.requests == 1 { "" } else { "s" },
                t.counters.grants,
                info.backend,
                if info.hardware.is_empty() {
                    String::new()
                } else {
                    format!("; {}", info.hardware)
                }
            );
        }
        let within: usize = totals.iter().map(|t| t.steals_within).sum();
        let moved: u32 = totals.iter().map(|t| t.counters.tiles_in).sum();
        let requests: u32 = totals.iter().map(|t| t.counters.requests).sum();
        let grants: u32 = totals.iter().map(|t| t.counters.grants).sum();
        let _ = writeln!(
            s,
            "  steals: {within} tiles within ranks; across ranks {moved} tiles in {grants} transfers ({requests} requests, {} answered empty)",
            requests - grants
        );
        s
    }
}
