//! Temporal domain assignment (after the temporal-coherence seed: the previous frame's ray
//! traffic places the next frame's domains). During a camera path's frame every rank counts
//! the segments it shades by the cells they join: the cell of the vertex the segment left
//! and the cell of its hit. Rank 0 adds the counts up and moves cells between the ranks so
//! that fewer of those segments join cells on different ranks, within two bounds:
//! - **balance**: a move never takes a rank above `max_triangles` (a rank above it already
//!   may only go down);
//! - **budget**: the cells that change rank hold at most `budget` bytes of groups, which
//!   their new ranks read from the file.
//!
//! The moves are greedy, as Fiduccia and Mattheyses move vertices of a graph: the single move
//! or swap of two cells that cuts the most crossing segments, each cell moved once a frame,
//! until none that fits the bounds cuts any. The image does not change: every assignment of
//! cells gives the one-process image bit for bit ([`crate::cpu::domains`]).

use std::collections::{BTreeMap, HashMap};

/// Segments by the cells they joined: (the cell left, the cell hit) to their count.
pub type Traffic = BTreeMap<(u32, u32), u64>;

/// What a frame's ranks counted, added up on rank 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameTraffic {
    /// Samples finished.
    pub samples: u64,
    /// Path messages sent between ranks.
    pub hops: u64,
    pub segments: Traffic,
}

impl FrameTraffic {
    pub fn forwarded_per_sample(&self) -> f64 {
        self.hops as f64 / self.samples.max(1) as f64
    }

    /// Adds one rank's counts.
    pub fn add(&mut self, samples: u64, hops: u64, segments: &[(u32, u32, u64)]) {
        self.samples += samples;
        self.hops += hops;
        for &(a, b, n) in segments {
            *self.segments.entry((a, b)).or_default() += n;
        }
    }

    /// The segments counted, and those of them between cells on different ranks under
    /// `domain_of_cell`.
    pub fn segments_crossing(&self, domain_of_cell: &[u32]) -> (u64, u64) {
        let all = self.segments.values().sum();
        (all, crossing(&self.segments, domain_of_cell))
    }
}

/// What the moves must keep to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The most triangles a rank may come to hold.
    pub max_triangles: u64,
    /// The most bytes of groups the cells that change rank may hold.
    pub budget: u64,
}

/// A cell's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellSize {
    pub triangles: u64,
    pub bytes: u64,
}

/// The new assignment and what it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The rank of each cell.
    pub domain_of_cell: Vec<u32>,
    /// The cells that changed rank, and their bytes.
    pub moved: Vec<usize>,
    pub bytes: u64,
    /// The traffic's segments that joined cells on different ranks, before and after.
    pub crossing_before: u64,
    pub crossing_after: u64,
}

/// Moves cells (held as `domain_of_cell`, over `domains` ranks) to cut the `traffic` that
/// crosses between ranks, within `bounds`: see the module comment.
pub fn reassign(
    domain_of_cell: &[u32],
    domains: usize,
    traffic: &Traffic,
    sizes: &[CellSize],
    bounds: Bounds,
) -> Plan {
    let mut state = State::new(domain_of_cell, domains, traffic, sizes);
    while let Some((change, bytes)) = state.best_change(sizes, bounds) {
        state.apply(change, sizes, bytes);
    }
    let moved: Vec<usize> = (0..domain_of_cell.len())
        .filter(|&c| state.of[c] != domain_of_cell[c])
        .collect();
    Plan {
        bytes: moved.iter().map(|&c| sizes[c].bytes).sum(),
        moved,
        crossing_before: crossing(traffic, domain_of_cell),
        crossing_after: crossing(traffic, &state.of),
        domain_of_cell: state.of,
    }
}

/// The segments of `traffic` that join cells on different ranks under `domain_of_cell`.
pub fn crossing(traffic: &Traffic, domain_of_cell: &[u32]) -> u64 {
    let rank = |c: u32| domain_of_cell.get(c as usize);
    traffic
        .iter()
        .filter(|(&(a, b), _)| rank(a) != rank(b))
        .map(|(_, &n)| n)
        .sum()
}

/// A change of assignment.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// Cell `.0` to rank `.1`.
    Move(usize, u32),
    /// Cells `.0` and `.1` trade ranks.
    Swap(usize, usize),
}

/// The assignment being improved.
struct State {
    of: Vec<u32>,
    load: Vec<u64>,
    /// Per cell, per rank: the segments between the cell and that rank's other cells.
    link: Vec<Vec<u64>>,
    /// Per cell, the cells it shares segments with, both ways added.
    neighbours: Vec<Vec<(usize, u64)>>,
    between: HashMap<(usize, usize), u64>,
    locked: Vec<bool>,
    spent: u64,
}

impl State {
    fn new(domain_of_cell: &[u32], domains: usize, traffic: &Traffic, sizes: &[CellSize]) -> State {
        let cells = domain_of_cell.len();
        let mut between: HashMap<(usize, usize), u64> = HashMap::new();
        for (&(a, b), &n) in traffic {
            let (a, b) = (a as usize, b as usize);
            if a != b && a < cells && b < cells {
                *between.entry((a.min(b), a.max(b))).or_default() += n;
            }
        }
        let mut neighbours = vec![Vec::new(); cells];
        let mut link = vec![vec![0u64; domains]; cells];
        let mut pairs: Vec<_> = between.iter().map(|(&k, &n)| (k, n)).collect();
        pairs.sort_unstable();
        for ((a, b), n) in pairs {
            neighbours[a].push((b, n));
            neighbours[b].push((a, n));
            link[a][domain_of_cell[b] as usize] += n;
            link[b][domain_of_cell[a] as usize] += n;
        }
        let mut load = vec![0u64; domains];
        for (c, &d) in domain_of_cell.iter().enumerate() {
            load[d as usize] += sizes[c].triangles;
        }
        State {
            of: domain_of_cell.to_vec(),
            load,
            link,
            neighbours,
            between,
            locked: vec![false; cells],
            spent: 0,
        }
    }

    /// The segments that `change` keeps on one rank more than before (negative: fewer).
    fn gain(&self, change: Change) -> i128 {
        let link = |c: usize, d: u32| i128::from(self.link[c][d as usize]);
        match change {
            Change::Move(c, d) => link(c, d) - link(c, self.of[c]),
            Change::Swap(a, b) => {
                let (da, db) = (self.of[a], self.of[b]);
                let shared = self.between.get(&(a.min(b), a.max(b))).copied();
                link(a, db) - link(a, da) + link(b, da)
                    - link(b, db)
                    - 2 * i128::from(shared.unwrap_or(0))
            }
        }
    }

    /// Whether rank `d` may come to hold `after` triangles: within the bound, or no more
    /// than it holds.
    fn fits(&self, d: u32, after: u64, bounds: Bounds) -> bool {
        after <= bounds.max_triangles || after <= self.load[d as usize]
    }

    /// The change that gains most within `bounds` (ties: the fewest bytes, then the first
    /// found), with its bytes; none where nothing gains.
    fn best_change(&self, sizes: &[CellSize], bounds: Bounds) -> Option<(Change, u64)> {
        let mut best: Option<(i128, u64, Change)> = None;
        let mut consider = |change: Change, bytes: u64| {
            let gain = self.gain(change);
            let better = best.is_none_or(|(g, b, _)| gain > g || (gain == g && bytes < b));
            if gain > 0 && better && self.spent + bytes <= bounds.budget {
                best = Some((gain, bytes, change));
            }
        };
        let free: Vec<usize> = (0..self.of.len()).filter(|&c| !self.locked[c]).collect();
        for &a in &free {
            let (da, sa) = (self.of[a], sizes[a]);
            // A change of `a` to rank `d` gains only where `a` talks to `d` more than to its
            // own rank, alone or in a swap (a swap gains no more than its two moves).
            for d in (0..self.load.len() as u32).filter(|&d| self.gain(Change::Move(a, d)) > 0) {
                if self.fits(d, self.load[d as usize] + sa.triangles, bounds) {
                    consider(Change::Move(a, d), sa.bytes);
                }
                for &b in free.iter().filter(|&&b| self.of[b] == d) {
                    let sb = sizes[b];
                    let swap_a = self.load[da as usize] - sa.triangles + sb.triangles;
                    let swap_b = self.load[d as usize] - sb.triangles + sa.triangles;
                    if self.fits(da, swap_a, bounds) && self.fits(d, swap_b, bounds) {
                        consider(Change::Swap(a, b), sa.bytes + sb.bytes);
                    }
                }
            }
        }
        best.map(|(_, bytes, change)| (change, bytes))
    }

    fn apply(&mut self, change: Change, sizes: &[CellSize], bytes: u64) {
        match change {
            Change::Move(c, d) => self.move_cell(c, d, sizes),
            Change::Swap(a, b) => {
                let (da, db) = (self.of[a], self.of[b]);
                self.move_cell(a, db, sizes);
                self.move_cell(b, da, sizes);
            }
        }
        self.spent += bytes;
    }

    fn move_cell(&mut self, c: usize, to: u32, sizes: &[CellSize]) {
        let from = self.of[c];
        for &(n, w) in &self.neighbours[c] {
            self.link[n][from as usize] -= w;
            self.link[n][to as usize] += w;
        }
        self.load[from as usize] -= sizes[c].triangles;
        self.load[to as usize] += sizes[c].triangles;
        self.of[c] = to;
        self.locked[c] = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sizes(triangles: &[u64]) -> Vec<CellSize> {
        triangles
            .iter()
            .map(|&t| CellSize {
                triangles: t,
                bytes: t * 10,
            })
            .collect()
    }

    /// Two ranks of two equal cells, full to the bound: only a swap brings the two cells that
    /// talk most together, and a budget short of a swap moves nothing.
    #[test]
    fn a_swap_joins_the_cells_that_talk_most() {
        let traffic: Traffic = [((0, 2), 90), ((2, 0), 10), ((1, 3), 5), ((0, 1), 1)].into();
        let sizes = sizes(&[100; 4]);
        let bounds = Bounds {
            max_triangles: 200,
            budget: 2000,
        };
        let plan = reassign(&[0, 0, 1, 1], 2, &traffic, &sizes, bounds);
        assert_eq!(plan.crossing_before, 105);
        assert_eq!(plan.domain_of_cell[0], plan.domain_of_cell[2]);
        assert_eq!(plan.moved.len(), 2);
        assert_eq!(plan.bytes, 2000);
        assert_eq!(
            plan.crossing_after,
            crossing(&traffic, &plan.domain_of_cell)
        );
        assert!(plan.crossing_after < plan.crossing_before);
        let poor = Bounds {
            budget: 1999,
            ..bounds
        };
        let plan = reassign(&[0, 0, 1, 1], 2, &traffic, &sizes, poor);
        assert_eq!((plan.moved.len(), plan.bytes), (0, 0));
        assert_eq!(plan.crossing_after, plan.crossing_before);
    }

    /// With room to spare, a cell simply moves to the rank it talks to.
    #[test]
    fn a_move_where_the_bound_allows() {
        let traffic: Traffic = [((0, 2), 50)].into();
        let bounds = Bounds {
            max_triangles: 1000,
            budget: u64::MAX,
        };
        let plan = reassign(&[0, 1, 1], 2, &traffic, &sizes(&[10, 10, 10]), bounds);
        assert_eq!(plan.domain_of_cell, [1, 1, 1]);
        assert_eq!((plan.moved, plan.crossing_after), (vec![0], 0));
    }

    fn case() -> impl Strategy<Value = (Vec<u32>, usize, Traffic, Vec<CellSize>, Bounds)> {
        (1usize..6, 1usize..20).prop_flat_map(|(domains, cells)| {
            let of = prop::collection::vec(0..domains as u32, cells);
            let size = (0u64..500, 0u64..5000)
                .prop_map(|(triangles, bytes)| CellSize { triangles, bytes });
            let sizes = prop::collection::vec(size, cells);
            let pair = (0..cells as u32 + 1, 0..cells as u32 + 1);
            let traffic = prop::collection::btree_map(pair, 0u64..1000, 0..40);
            let bounds = (0u64..3000, 0u64..20000).prop_map(|(max_triangles, budget)| Bounds {
                max_triangles,
                budget,
            });
            (of, Just(domains), traffic, sizes, bounds)
        })
    }

    proptest! {
        /// On any recorded traffic: no rank comes to hold more than the bound (or more than
        /// it held), the cells moved hold at most the budget, the crossing segments never
        /// grow, and the plan's figures are its assignment's.
        #[test]
        fn reassignment_keeps_its_bounds((of, domains, traffic, sizes, bounds) in case()) {
            let plan = reassign(&of, domains, &traffic, &sizes, bounds);
            let load = |assignment: &[u32], d: usize| -> u64 {
                (0..of.len()).filter(|&c| assignment[c] as usize == d).map(|c| sizes[c].triangles).sum()
            };
            for d in 0..domains {
                let (before, after) = (load(&of, d), load(&plan.domain_of_cell, d));
                prop_assert!(after <= bounds.max_triangles.max(before),
                    "rank {} went from {} to {} triangles, bound {}", d, before, after, bounds.max_triangles);
            }
            let moved: Vec<usize> = (0..of.len()).filter(|&c| of[c] != plan.domain_of_cell[c]).collect();
            let bytes: u64 = moved.iter().map(|&c| sizes[c].bytes).sum();
            prop_assert_eq!(&plan.moved, &moved);
            prop_assert_eq!(plan.bytes, bytes);
            prop_assert!(bytes <= bounds.budget);
            prop_assert_eq!(plan.crossing_before, crossing(&traffic, &of));
            prop_assert_eq!(plan.crossing_after, crossing(&traffic, &plan.domain_of_cell));
            prop_assert!(plan.crossing_after <= plan.crossing_before);
            prop_assert!(plan.domain_of_cell.iter().all(|&d| (d as usize) < domains));
        }
    }
}
