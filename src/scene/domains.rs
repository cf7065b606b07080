//! Domains: a scene's groups split among the ranks of a distributed-geometry render, each
//! rank keeping only its domain's geometry (docs/distributed-geometry.md).
//!
//! A group is never split: it stays the unit of acceleration-structure builds. The split is
//! spatially compact and balanced by triangles:
//! 1. each group's centroid (the centre of its box) gets a 63-bit Morton code over the box of
//!    the whole scene, and the groups are ordered by it (then by index, so the order is total);
//! 2. that order is cut into `n` runs of consecutive groups: cut `k` falls at the group
//!    boundary whose prefix of triangles is nearest `k / n` of the total, keeping every
//!    domain non-empty where there are at least `n` groups that hold triangles.
//!
//! So a domain holds at most `total / n` triangles plus the largest group's, and neighbouring
//! groups in space tend to share a domain. The split depends only on the groups' boxes and
//! triangle counts, which every rank computes the same from the same file.
//!
//! Each domain's run is cut the same way into [`CELLS`] cells: the units that the top level
//! boxes and that a camera path's frames move between ranks
//! (`crate::cluster::geometry::reassign`). A domain is then the cells its rank holds.

use super::{Bounds, Scene};

/// What the split needs of a group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupExtent {
    /// The box of the group's triangles ([`Bounds::EMPTY`] for a group without any).
    pub bounds: Bounds,
    pub triangles: u64,
}

/// The cells each domain is cut into by [`Domains::split`].
pub const CELLS: usize = 8;

/// A scene's groups split into domains, less the replicated groups, which every domain
/// holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Domains {
    /// The domain of each group, indexed as [`Scene::groups`] (0 for a replicated group).
    pub of_group: Vec<u32>,
    /// Whether each group is held by every domain: kept out of the split, the boxes and the
    /// counts.
    pub replicated: Vec<bool>,
    /// Each domain's box: the union of its groups' boxes (empty for a domain without
    /// triangles).
    pub bounds: Vec<Bounds>,
    /// Each domain's triangles.
    pub triangles: Vec<u64>,
    /// The cell of each group (for a replicated group, the one it would be in).
    pub cell_of_group: Vec<u32>,
    /// The cells, each held by one domain. Every rank holds all their boxes: the top level of
    /// the distributed scene.
    pub cells: Vec<Cell>,
}

/// A run of groups close in space that moves between domains as one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// The domain that holds it.
    pub domain: u32,
    /// The union of its groups' boxes.
    pub bounds: Bounds,
    pub triangles: u64,
}

impl Domains {
    /// Splits `scene`'s groups into `n` domains (`n >= 1`).
    pub fn of_scene(scene: &Scene, n: usize) -> Domains {
        Domains::split(&Domains::extents_of(scene), n)
    }

    /// Splits groups of these extents into `n` domains (`n >= 1`): see the module comment.
    pub fn split(groups: &[GroupExtent], n: usize) -> Domains {
        Domains::split_replicating(groups, n, vec![false; groups.len()])
    }

    /// [`Domains::split`] of the groups that `replicated` leaves out; those go to every
    /// domain.
    pub fn split_replicating(groups: &[GroupExtent], n: usize, replicated: Vec<bool>) -> Domains {
        let n = n.max(1);
        let split: Vec<GroupExtent> = (0..groups.len())
            .map(|g| if replicated[g] { NOTHING } else { groups[g] })
            .collect();
        let order = morton_order(&split);
        let cuts = balanced_cuts(&order, &split, n);
        let mut cell_of_group = vec![0; groups.len()];
        for (d, run) in cuts.windows(2).enumerate() {
            let run = &order[run[0]..run[1]];
            for (c, cell) in balanced_cuts(run, &split, CELLS).windows(2).enumerate() {
                for &g in &run[cell[0]..cell[1]] {
                    cell_of_group[g] = (d * CELLS + c) as u32;
                }
            }
        }
        let domain_of_cell = (0..n * CELLS).map(|c| (c / CELLS) as u32).collect();
        Domains::in_cells(groups, (cell_of_group, domain_of_cell), replicated, n)
    }

    /// The `n` domains that `of_group` assigns the groups to (each below `n`), the
    /// `replicated` groups to all of them, with their boxes and triangle counts: one cell a
    /// domain.
    pub fn assigned(
        groups: &[GroupExtent],
        of_group: Vec<u32>,
        replicated: Vec<bool>,
        n: usize,
    ) -> Domains {
        let domain_of_cell = (0..n as u32).collect();
        Domains::in_cells(groups, (of_group, domain_of_cell), replicated, n)
    }

    /// The `n` domains that hold the cells `cell_of_group` puts the groups in, as
    /// `domain_of_cell` (each below `n`) assigns them, the `replicated` groups in all of them.
    pub fn in_cells(
        groups: &[GroupExtent],
        (cell_of_group, domain_of_cell): (Vec<u32>, Vec<u32>),
        replicated: Vec<bool>,
        n: usize,
    ) -> Domains {
        assert_eq!(groups.len(), cell_of_group.len(), "a cell for every group");
        assert_eq!(
            groups.len(),
            replicated.len(),
            "a replication flag for every group"
        );
        let mut cells: Vec<Cell> = domain_of_cell
            .iter()
            .map(|&domain| Cell {
                domain,
                bounds: Bounds::EMPTY,
                triangles: 0,
            })
            .collect();
        let (mut bounds, mut triangles) = (vec![Bounds::EMPTY; n], vec![0; n]);
        let mut of_group = vec![0; groups.len()];
        for (g, &c) in cell_of_group.iter().enumerate() {
            let cell = &mut cells[c as usize];
            if !replicated[g] {
                of_group[g] = cell.domain;
                cell.bounds = cell.bounds.union(&groups[g].bounds);
                cell.triangles += groups[g].triangles;
                let d = cell.domain as usize;
                bounds[d] = bounds[d].union(&groups[g].bounds);
                triangles[d] += groups[g].triangles;
            }
        }
        Domains {
            of_group,
            replicated,
            bounds,
            triangles,
            cell_of_group,
            cells,
        }
    }

    /// The same cells and replicated groups, the cells held as `domain_of_cell` says.
    pub fn with_cells_in(&self, groups: &[GroupExtent], domain_of_cell: Vec<u32>) -> Domains {
        let cells = (self.cell_of_group.clone(), domain_of_cell);
        Domains::in_cells(groups, cells, self.replicated.clone(), self.count())
    }

    /// The domain that holds each cell.
    pub fn domain_of_cell(&self) -> Vec<u32> {
        self.cells.iter().map(|c| c.domain).collect()
    }

    /// Whether domain `d` holds group `g`: its own, or replicated.
    pub fn holds(&self, d: usize, g: usize) -> bool {
        self.replicated[g] || self.of_group[g] as usize == d
    }

    /// The domain that shades hits on group `g`: `None` for a replicated group, which any
    /// domain shades.
    pub fn owner(&self, g: usize) -> Option<usize> {
        (!self.replicated[g]).then_some(self.of_group[g] as usize)
    }

    /// What the split needs of each of `scene`'s groups.
    pub fn extents_of(scene: &Scene) -> Vec<GroupExtent> {
        scene
            .groups
            .iter()
            .map(|g| GroupExtent {
                bounds: g.bounds(),
                triangles: g.triangle_count() as u64,
            })
            .collect()
    }

    pub fn count(&self) -> usize {
        self.bounds.len()
    }

    /// The groups domain `d` owns (replicated ones aside), in the scene's order.
    pub fn groups_of(&self, d: usize) -> Vec<usize> {
        (0..self.of_group.len())
            .filter(|&g| self.owner(g) == Some(d))
            .collect()
    }
}

/// A group left out of the split.
const NOTHING: GroupExtent = GroupExtent {
    bounds: Bounds::EMPTY,
    triangles: 0,
};

/// The groups' indices ordered by the Morton code of their centroids over the box of all of
/// them; groups without triangles go first (their code is 0).
fn morton_order(groups: &[GroupExtent]) -> Vec<usize> {
    let scene = groups
        .iter()
        .filter(|g| g.triangles > 0 && !g.bounds.is_empty())
        .fold(Bounds::EMPTY, |b, g| b.union(&g.bounds));
    let code = |g: &GroupExtent| -> u64 {
        if g.triangles == 0 || g.bounds.is_empty() {
            return 0;
        }
        let centre = g.bounds.center();
        let cell = |a: usize| -> u64 {
            let extent = scene.max[a] - scene.min[a];
            let x = if extent > 0.0 {
                ((centre[a] - scene.min[a]) / extent).clamp(0.0, 1.0)
            } else {
                0.5
            };
            // 21 bits per axis; a NaN (a box of non-finite corners) falls in cell 0.
            ((x * ((1u32 << 21) - 1) as f32) as u64).min((1 << 21) - 1)
        };
        interleave3(cell(0)) | interleave3(cell(1)) << 1 | interleave3(cell(2)) << 2
    };
    let codes: Vec<u64> = groups.iter().map(code).collect();
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| (codes[g], g));
    order
}

/// Spreads the low 21 bits of `x` to every third bit.
fn interleave3(x: u64) -> u64 {
    let mut x = x & 0x1f_ffff;
    x = (x | x << 32) & 0x001f_0000_0000_ffff;
    x = (x | x << 16) & 0x001f_0000_ff00_00ff;
    x = (x | x << 8) & 0x100f_00f0_0f00_f00f;
    x = (x | x << 4) & 0x10c3_0c30_c30c_30c3;
    x = (x | x << 2) & 0x1249_2492_4924_9249;
    x
}

/// The `n + 1` boundaries (positions in `order`, from 0 to its length) of the `n` runs: each
/// inner cut at the boundary whose triangle prefix is nearest its share of the total, kept
/// after the cut before it and before the one after it wherever the groups that hold
/// triangles allow.
fn balanced_cuts(order: &[usize], groups: &[GroupExtent], n: usize) -> Vec<usize> {
    let mut prefix = Vec::with_capacity(order.len() + 1);
    prefix.push(0u64);
    for &g in order {
        prefix.push(prefix.last().unwrap_or(&0) + groups[g].triangles);
    }
    let total = *prefix.last().unwrap_or(&0);
    // The first position from which every later group holds triangles: cuts before it would
    // only split off empty groups.
    let first_full = order
        .iter()
        .position(|&g| groups[g].triangles > 0)
        .unwrap_or(order.len());
    let mut cuts = vec![0; n + 1];
    cuts[n] = order.len();
    for k in 1..n {
        let target = (u128::from(total) * k as u128 / n as u128) as u64;
        let above = prefix.partition_point(|&p| p < target);
        let below = above.saturating_sub(1);
        let nearest = match prefix.get(above) {
            Some(&p) if p - target <= target - prefix[below] => above,
            Some(_) => below,
            None => order.len(),
        };
        // One group (with triangles) at least per domain, where there are enough of them.
        let lowest = (cuts[k - 1] + 1).max(first_full + k).min(order.len());
        let highest = order.len().saturating_sub(n - k).max(lowest);
        cuts[k] = nearest.clamp(lowest, highest);
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn extent(centre: [f32; 3], triangles: u64) -> GroupExtent {
        let c = glam::Vec3::from(centre);
        GroupExtent {
            bounds: Bounds {
                min: (c - 0.5).into(),
                max: (c + 0.5).into(),
            },
            triangles,
        }
    }

    fn extents() -> impl Strategy<Value = Vec<GroupExtent>> {
        let group =
            (prop::array::uniform3(-100.0f32..100.0), 0u64..5000).prop_map(|(c, t)| extent(c, t));
        prop::collection::vec(group, 0..60)
    }

    proptest! {
        /// Every group lands in one domain; the domains' counts and boxes are their groups';
        /// each holds at most its share plus the largest group; none is empty while there
        /// are at least as many groups with triangles as domains.
        #[test]
        fn split_is_a_balanced_partition(groups in extents(), n in 1usize..9) {
            let d = Domains::split(&groups, n);
            prop_assert_eq!(d.count(), n);
            prop_assert_eq!(d.of_group.len(), groups.len());
            let total: u64 = groups.iter().map(|g| g.triangles).sum();
            let largest = groups.iter().map(|g| g.triangles).max().unwrap_or(0);
            let full = groups.iter().filter(|g| g.triangles > 0).count();
            for k in 0..n {
                let members = d.groups_of(k);
                let triangles: u64 = members.iter().map(|&g| groups[g].triangles).sum();
                let bounds = members
                    .iter()
                    .fold(Bounds::EMPTY, |b, &g| b.union(&groups[g].bounds));
                prop_assert_eq!(d.triangles[k], triangles);
                prop_assert_eq!(d.bounds[k], bounds);
                prop_assert!(triangles <= total / n as u64 + 1 + largest,
                    "domain {} holds {} of {} (largest group {})", k, triangles, total, largest);
                if full >= n {
                    prop_assert!(triangles > 0, "domain {} is empty", k);
                }
            }
        }

        /// Each domain is cut into [`CELLS`] cells of its groups, whose counts and boxes are
        /// their groups'; moving cells to other domains keeps the cells and recounts the
        /// domains.
        #[test]
        fn cells_cut_the_domains(groups in extents(), n in 1usize..6, seed in 0u32..1000) {
            let d = Domains::split(&groups, n);
            prop_assert_eq!(d.cells.len(), n * CELLS);
            for (c, cell) in d.cells.iter().enumerate() {
                let members: Vec<usize> =
                    (0..groups.len()).filter(|&g| d.cell_of_group[g] as usize == c).collect();
                prop_assert!(members.iter().all(|&g| d.of_group[g] == cell.domain));
                let triangles: u64 = members.iter().map(|&g| groups[g].triangles).sum();
                let bounds = members.iter().fold(Bounds::EMPTY, |b, &g| b.union(&groups[g].bounds));
                prop_assert_eq!((cell.domain as usize, cell.triangles, cell.bounds), (c / CELLS, triangles, bounds));
            }
            let moved: Vec<u32> = (0..d.cells.len() as u32).map(|c| (c * 7 + seed) % n as u32).collect();
            let m = d.with_cells_in(&groups, moved.clone());
            prop_assert_eq!(&m.cell_of_group, &d.cell_of_group);
            prop_assert_eq!(m.domain_of_cell(), moved);
            for k in 0..n {
                let triangles: u64 = m.groups_of(k).iter().map(|&g| groups[g].triangles).sum();
                prop_assert_eq!(m.triangles[k], triangles);
            }
        }

        /// Interleaving keeps every bit of each axis, in bits no other axis uses.
        #[test]
        fn morton_codes_are_distinct_cells(x in 0u64..(1 << 21), y in 0u64..(1 << 21)) {
            prop_assert_eq!(interleave3(x) & interleave3(y) << 1, 0);
            prop_assert_eq!(interleave3(x).count_ones(), x.count_ones());
        }
    }

    /// Groups along a line are cut into runs of neighbours: two clusters far apart never
    /// share a domain when split in two.
    #[test]
    fn split_keeps_neighbours_together() {
        let mut groups: Vec<GroupExtent> = (0..8)
            .map(|i| extent([i as f32 * 0.1, 0.0, 0.0], 100))
            .collect();
        groups.extend((0..8).map(|i| extent([1000.0 + i as f32 * 0.1, 0.0, 0.0], 100)));
        // Interleave the lists, so that the index order is no help.
        let order: Vec<usize> = (0..8).flat_map(|i| [i, i + 8]).collect();
        let shuffled: Vec<GroupExtent> = order.iter().map(|&i| groups[i]).collect();
        let d = Domains::split(&shuffled, 2);
        for (position, &original) in order.iter().enumerate() {
            assert_eq!(d.of_group[position], u32::from(original >= 8), "{position}");
        }
        assert_eq!(d.triangles, [800, 800]);
    }

    /// Replicated groups are held by every domain and owned by none: left out of the boxes,
    /// the counts and the balance.
    #[test]
    fn replicated_groups_stay_out_of_the_split() {
        let groups = [
            extent([0.0; 3], 10),
            extent([50.0; 3], 1000),
            extent([9.0; 3], 10),
        ];
        let d = Domains::split_replicating(&groups, 2, vec![false, true, false]);
        assert_eq!(d.triangles, [10, 10]);
        assert_eq!(
            (d.owner(1), d.holds(0, 1), d.holds(1, 1)),
            (None, true, true)
        );
        assert_ne!(d.of_group[0], d.of_group[2]);
        assert!(d.bounds.iter().all(|b| b.max[0] < 20.0));
        assert_eq!(d.groups_of(0).len() + d.groups_of(1).len(), 2);
    }

    /// One domain holds everything; more domains than groups leave the extra ones empty.
    #[test]
    fn one_domain_and_too_many_domains() {
        let groups = [extent([0.0; 3], 10), extent([5.0; 3], 20)];
        let one = Domains::split(&groups, 1);
        assert_eq!((one.of_group, one.triangles), (vec![0, 0], vec![30]));
        let four = Domains::split(&groups, 4);
        assert_eq!(four.triangles.iter().sum::<u64>(), 30);
        assert_eq!(four.triangles.iter().filter(|&&t| t > 0).count(), 2);
        assert!(Domains::split(&[], 3).triangles == [0, 0, 0]);
    }
}
