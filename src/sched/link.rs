//! Rank 0's link in a cluster (`schedule-sim --ranks`): the bytes its master role sends and
//! receives in a pass, sized by the protocol's own encodings, and the time they take on a
//! link. Beside them, what the design before [`super::holdings`] moved: every tile's pixels
//! to rank 0, and back out with the next pass's plan, and every task's cost and floor in
//! every rank's plan. The pieces ranks send each other before a pass and the tiles they
//! steal do not pass rank 0's master role; the film gathered at the end passes once a frame.

use super::protocol::{Msg, Plan, TaskData, TileDone};
use super::ranks::RankPassCounters;
use crate::render::Tile;

/// What passes through rank 0's link in one pass, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassBytes {
    /// The other ranks' plans and pass ends, out.
    pub plans: u64,
    /// Their tiles' news and pass statistics, in.
    pub news: u64,
    /// The same pass as the funnel of before moved it.
    pub funnel: u64,
    /// The film the other ranks send once, at the frame's end.
    pub gathered: u64,
}

impl PassBytes {
    /// This design's bytes a pass, both ways.
    pub fn per_pass(&self) -> u64 {
        self.plans + self.news
    }
}

/// Seconds `bytes` take on a link of `gbit` gigabits a second.
pub fn seconds_on(bytes: u64, gbit: f64) -> f64 {
    bytes as f64 * 8.0 / (gbit * 1e9)
}

/// Rank 0's bytes in a pass of `tiles` that starts as `deques` (one per worker, `workers` a
/// rank, in rank order) over ranks of `workers` workers each: every rank but 0 gets its plan
/// and the pass's end, and sends a tile's news for each tile of its deques (steals move
/// tiles between ranks, not their number) and its statistics.
pub fn pass_bytes(tiles: &[Tile], deques: &[Vec<usize>], workers: usize) -> PassBytes {
    let workers = workers.max(1);
    let ranks = deques.len().div_ceil(workers);
    let mut bytes = PassBytes {
        plans: 0,
        news: 0,
        funnel: 0,
        gathered: 0,
    };
    for r in 1..ranks {
        let mine = &deques[r * workers..((r + 1) * workers).min(deques.len())];
        let plan = plan_of(tiles, mine);
        let pixels: u64 = mine.iter().flatten().map(|&t| pixels_of(tiles[t])).sum();
        let plan_len = Msg::Plan(plan).encode().len() as u64;
        let end_len = Msg::PassEnd { pass: 1 }.encode().len() as u64;
        let news_len = mine.iter().flatten().count() as u64 * tile_news_len() + stats_len();
        bytes.plans += plan_len + end_len;
        bytes.news += news_len;
        // Each tile's sums in its TileDone and again in the next plan (16 bytes a pixel each
        // way), and every task's cost and floor in the plan.
        bytes.funnel += plan_len + end_len + news_len + 2 * 16 * pixels + 16 * tiles.len() as u64;
        bytes.gathered += 16 * pixels;
    }
    bytes
}

fn pixels_of(t: Tile) -> u64 {
    u64::from(t.w) * u64::from(t.h)
}

/// The plan of a rank whose workers start a pass with `deques` (in the steady state: no
/// pieces to send or wait for).
fn plan_of(tiles: &[Tile], deques: &[Vec<usize>]) -> Plan {
    Plan {
        pass: 1,
        samples: 1..2,
        steal: true,
        deques: deques
            .iter()
            .map(|d| d.iter().map(|&t| t as u32).collect())
            .collect(),
        tasks: deques
            .iter()
            .flatten()
            .map(|&t| TaskData::planned(t as u32, tiles[t], (1.0, 1.0), None))
            .collect(),
        speeds: vec![1.0; deques.len()],
        task_count: tiles.len() as u32,
        mean_cost: 1.0,
        sends: Vec::new(),
        incoming: 0,
    }
}

fn tile_news_len() -> u64 {
    let done = TileDone {
        pass: 1,
        task: 0,
        worker: 0,
        stolen_from: None,
        start_s: 0.0,
        end_s: 0.0,
        cost_s: 0.0,
    };
    Msg::TileDone(done).encode().len() as u64
}

fn stats_len() -> u64 {
    let stats = Msg::PassStats {
        pass: 1,
        counters: RankPassCounters::default(),
        blocks: Vec::new(),
    };
    stats.encode().len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(w: u32, h: u32, n: u32) -> Vec<Tile> {
        let (tw, th) = (w / n, h / n);
        (0..n * n)
            .map(|i| Tile {
                x: (i % n) * tw,
                y: (i / n) * th,
                w: tw,
                h: th,
            })
            .collect()
    }

    /// The bytes a pass grow with the tiles, not the pixels: the same tiles over an image four
    /// times larger cost the same, where the funnel's bytes grow with the pixels.
    #[test]
    fn rank_0s_bytes_grow_with_the_tiles_only() {
        let deques = |n: usize| -> Vec<Vec<usize>> {
            (0..4)
                .map(|w| (w * n / 4..(w + 1) * n / 4).collect())
                .collect()
        };
        let small = pass_bytes(&grid(640, 640, 16), &deques(256), 1);
        let large = pass_bytes(&grid(1280, 1280, 16), &deques(256), 1);
        assert_eq!(small.per_pass(), large.per_pass());
        assert!(large.funnel > 3 * small.funnel);
        // Three ranks of four send their film once: 3/4 of 1280 x 1280 pixels, 16 bytes each.
        assert_eq!(large.gathered, 3 * 1280 * 1280 * 16 / 4);
        let more_tiles = pass_bytes(&grid(640, 640, 32), &deques(1024), 1);
        assert!(more_tiles.per_pass() > 3 * small.per_pass());
    }
}
