//! Whether a rank's part of a distributed scene fits its memory, asked between the file's
//! survey and its second reading, so that a scene too large for its ranks is refused before
//! any rank builds or renders (docs/distributed-geometry.md).

use crate::render::memory::{check_fits, Limit, Room};
use crate::scene::domains::Domains;
use crate::scene::obj::Survey;

/// What a BVH takes per triangle at its peak, while it is built, bounded from above: the
/// 4-wide nodes, the triangle packets and their ids, and the builder's own arrays. How it was
/// calibrated against peak RSS: docs/distributed-geometry.md.
pub const BVH_BYTES_PER_TRIANGLE: u64 = 128;

/// What rank `rank`'s part of the scene will take, by the file's survey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartBytes {
    pub triangles: u64,
    /// The file's vertex pools, which each reading holds until its groups are built.
    pub pools: u64,
    /// The arrays of the groups the rank holds (its domain's and the replicated ones).
    pub groups: u64,
    /// Of those, the replicated ones' (held by every rank).
    pub replicated: u64,
    /// The arrays of all the scene's groups.
    pub all_groups: u64,
    /// Their BVH, at its peak ([`BVH_BYTES_PER_TRIANGLE`]); 0 on a GPU rank.
    pub bvh: u64,
}

impl PartBytes {
    /// Rank `rank`'s part; with `cpu_bvh` false (a GPU rank) no BVH on the host.
    pub fn of(survey: &Survey, domains: &Domains, rank: usize, cpu_bvh: bool) -> PartBytes {
        let replicated = survey
            .groups
            .iter()
            .enumerate()
            .filter(|&(g, _)| domains.owner(g).is_none())
            .map(|(_, g)| g.bytes)
            .sum();
        let all_groups = survey.groups.iter().map(|g| g.bytes).sum();
        let (groups, triangles) = survey
            .groups
            .iter()
            .enumerate()
            .filter(|&(g, _)| domains.holds(rank, g))
            .fold((0, 0), |(b, t), (_, g)| {
                (b + g.bytes, t + g.extent.triangles)
            });
        PartBytes {
            triangles,
            pools: survey.pool_bytes,
            groups,
            replicated,
            all_groups,
            bvh: if cpu_bvh {
                triangles * BVH_BYTES_PER_TRIANGLE
            } else {
                0
            },
        }
    }

    /// What is still to come before the part is read: its groups, beside the pools while it
    /// is read, beside the BVH after (the textures are not known until it is read).
    pub fn before_reading(&self) -> u64 {
        self.groups + self.pools.max(self.bvh)
    }
}

/// Refuses rank `rank`'s `what` when it needs more than `needed` bytes of its share of
/// `room`, naming the rank, what it needs and what it has. The `local_ranks` ranks on its
/// machine share the machine's memory and their control group's; an address-space limit
/// (`ulimit -v`) is each process's own.
pub fn check_rank_memory(
    rank: usize,
    what: &str,
    needed: u64,
    room: Option<Room>,
    local_ranks: usize,
) -> anyhow::Result<()> {
    let local_ranks = match room.map(|r| r.limit) {
        Some(Limit::AddressSpace(_)) => 1,
        _ => local_ranks.max(1),
    };
    let share = room.map(|r| Room {
        bytes: r.bytes / local_ranks as u64,
        ..r
    });
    check_fits(&format!("rank {rank}: {what}"), needed, share).map_err(|e| {
        let shared = match local_ranks {
            1 => String::new(),
            n => format!(" (its share: {n} ranks run on its machine)"),
        };
        anyhow::anyhow!(
            "{e}{shared}: spread the scene over more ranks or machines, or give each rank more memory"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_larger_than_its_share_is_refused_naming_the_rank_and_the_bytes() {
        let room = Some(Room::available(8 << 30));
        let what = "its part of the scene (10 triangles)";
        assert!(check_rank_memory(3, what, 3 << 30, room, 2).is_ok());
        let e = check_rank_memory(3, what, 5 << 30, room, 2)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("rank 3: its part of the scene (10 triangles) needs about 5.0 GiB"),
            "{e}"
        );
        assert!(e.contains("5.0 GiB") && e.contains("4.0 GiB"), "{e}");
        assert!(e.contains("2 ranks run on its machine"), "{e}");
        let capped = Some(Room {
            bytes: 1 << 30,
            limit: Limit::ControlGroup(2 << 30),
        });
        let e = check_rank_memory(0, what, 2 << 30, capped, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.max") && !e.contains("share"), "{e}");
        let own = Some(Room {
            bytes: 3 << 30,
            limit: Limit::AddressSpace(4 << 30),
        });
        assert!(
            check_rank_memory(0, what, 2 << 30, own, 4).is_ok(),
            "ulimit -v is per process"
        );
        assert!(
            check_rank_memory(0, what, u64::MAX, None, 1).is_ok(),
            "no room known"
        );
    }

    #[test]
    fn a_part_counts_the_groups_it_holds_and_the_pools() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
        let opts = crate::scene::obj::LoadOptions { quiet: true };
        let survey = crate::scene::obj::survey_obj(&path, &opts).unwrap();
        let whole = crate::scene::obj::load_obj(&path, &opts).unwrap();
        let domains = Domains::split_replicating(&survey.extents(), 3, survey.emitting());
        let parts: Vec<PartBytes> = (0..3)
            .map(|r| PartBytes::of(&survey, &domains, r, true))
            .collect();
        let replicated: u64 = (0..whole.groups.len())
            .filter(|&g| domains.replicated[g])
            .map(|g| whole.groups[g].heap_bytes())
            .sum();
        let all: u64 = whole.groups.iter().map(|g| g.heap_bytes()).sum();
        let held: u64 = parts.iter().map(|p| p.groups).sum();
        assert_eq!(
            held,
            all + 2 * replicated,
            "each group once, the replicated on every rank"
        );
        for (r, p) in parts.iter().enumerate() {
            let scene = whole.keeping_groups(|g| domains.holds(r, g));
            assert_eq!(p.triangles, scene.triangle_count() as u64);
            assert_eq!(p.bvh, p.triangles * BVH_BYTES_PER_TRIANGLE);
            assert!(p.pools > 0 && p.before_reading() >= p.groups + p.bvh.min(p.pools));
        }
    }
}
