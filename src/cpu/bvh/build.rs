//! Building the traversal structure: obvhs builds binary trees (one per group, then one over
//! the groups), which are collapsed into eight-wide nodes and glued into one node array.
//!
//! 1. Per group, in parallel (largest first): the padded triangle boxes, obvhs's PLOC build,
//!    the collapse of its binary tree into [`Node`]s with group-local references, and the
//!    triangles of each of the group's packets.
//! 2. Prefix sums place every group's nodes and packets in the global arrays.
//! 3. In parallel: the global node array (each group's nodes with their references moved)
//!    and packet array (gathered from the scene's vertices) are written straight into their
//!    allocations; each group's part is freed once it is copied, so the peak holds one copy.
//! 4. The top level: obvhs over the groups' root boxes, collapsed the same way, with each
//!    top-level leaf replaced by the reference to its group's root. Its nodes go last.
//!
//! The collapse keeps every binary node's box: an eight-wide node's children are the binary
//! descendants it absorbed, so every box the traversal tests is one obvhs computed.

use std::time::{Duration, Instant};

use glam::{Vec3, Vec3A};
use obvhs::{aabb::Aabb, bvh2::builder::build_bvh2, bvh2::node::Bvh2Node, BvhBuildParams};
use rayon::prelude::*;

use super::simd::{
    ChildRef, Node, Packet, PacketIds, TriPacket, MAX_LEAF_PACKETS, MAX_PACKETS, WIDTH,
};
use super::{BuildStats, SceneBvh, PAD_RELATIVE};
use crate::scene::{Group, Scene};

/// Build parameters of the per-group trees: obvhs's "fast build" preset (PLOC with a short
/// search, a little reinsertion, leaves of up to 8 triangles: two packets).
fn blas_params() -> BvhBuildParams {
    BvhBuildParams::fast_build()
}

/// The top level has few primitives: spend more time for a better tree, one group per leaf.
fn tlas_params() -> BvhBuildParams {
    BvhBuildParams {
        max_prims_per_leaf: 1,
        ..BvhBuildParams::medium_build()
    }
}

/// A binary node as obvhs lays it out: a leaf of `count` slots from `first`, or (count 0)
/// children `first` and `first + 1`.
#[derive(Clone, Copy)]
struct BinNode {
    lo: [f32; 3],
    hi: [f32; 3],
    count: u32,
    first: u32,
}

impl BinNode {
    fn of(n: &Bvh2Node) -> BinNode {
        BinNode {
            lo: n.aabb().min.into(),
            hi: n.aabb().max.into(),
            count: n.prim_count,
            first: n.first_index,
        }
    }

    fn is_leaf(&self) -> bool {
        self.count > 0
    }

    fn half_area(&self) -> f32 {
        let d = [
            self.hi[0] - self.lo[0],
            self.hi[1] - self.lo[1],
            self.hi[2] - self.lo[2],
        ];
        d[0] * d[1] + d[1] * d[2] + d[2] * d[0]
    }
}

/// A binary tree from obvhs (or a single leaf when there are fewer than two primitives,
/// which obvhs does not build), with its leaf order.
fn build_binary(boxes: &[Aabb], params: BvhBuildParams) -> (Vec<BinNode>, Vec<u32>) {
    match boxes.len() {
        0 => (Vec::new(), Vec::new()),
        1 => (
            vec![BinNode {
                lo: boxes[0].min.into(),
                hi: boxes[0].max.into(),
                count: 1,
                first: 0,
            }],
            vec![0],
        ),
        _ => {
            let bvh = build_bvh2(boxes, params, &mut Duration::default());
            (
                bvh.nodes.iter().map(BinNode::of).collect(),
                bvh.primitive_indices,
            )
        }
    }
}

/// The number of primitives under each binary node.
fn subtree_counts(bin: &[BinNode]) -> Vec<u32> {
    let mut counts = vec![0u32; bin.len()];
    if bin.is_empty() {
        return counts;
    }
    // Post-order without recursion: a node is summed once both children are.
    let mut stack = vec![(0usize, false)];
    while let Some((k, children_done)) = stack.pop() {
        let n = &bin[k];
        if n.is_leaf() {
            counts[k] = n.count;
        } else if children_done {
            let f = n.first as usize;
            counts[k] = counts[f] + counts[f + 1];
        } else {
            stack.push((k, true));
            stack.push((n.first as usize, false));
            stack.push((n.first as usize + 1, false));
        }
    }
    counts
}

/// Collapses a binary tree into eight-wide nodes appended to `nodes`. `leaf(k, nodes)` gives
/// the reference that stands for binary node `k` and everything under it: called for the
/// binary leaves, and for inner nodes with at most `merge_at_most` primitives beneath them
/// (0: never), whose whole subtree becomes one leaf. Returns the root's reference.
///
/// Each eight-wide node starts from a binary node's two children and repeatedly opens the
/// inner child of largest surface area until it has eight children or only leaves remain.
fn collapse(
    bin: &[BinNode],
    merge_at_most: u32,
    nodes: &mut Vec<Node>,
    mut leaf: impl FnMut(usize, &mut Vec<Node>) -> ChildRef,
) -> ChildRef {
    if bin.is_empty() {
        return ChildRef::EMPTY;
    }
    let counts = if merge_at_most > 0 {
        subtree_counts(bin)
    } else {
        Vec::new()
    };
    let is_leaf = |k: usize| bin[k].is_leaf() || (merge_at_most > 0 && counts[k] <= merge_at_most);
    if is_leaf(0) {
        return leaf(0, nodes);
    }
    let root_index = nodes.len() as u32;
    nodes.push(Node::EMPTY);
    // (eight-wide node to fill, binary node it stands for)
    let mut work = vec![(root_index, 0usize)];
    while let Some((slot, b)) = work.pop() {
        let first = bin[b].first as usize;
        let mut kids = [0; WIDTH];
        (kids[0], kids[1]) = (first, first + 1);
        let mut n = 2;
        while n < WIDTH {
            let widest = (0..n).filter(|&i| !is_leaf(kids[i])).max_by(|&i, &j| {
                bin[kids[i]]
                    .half_area()
                    .total_cmp(&bin[kids[j]].half_area())
            });
            let Some(i) = widest else { break };
            let opened = bin[kids[i]].first as usize;
            kids[i] = opened;
            kids[n] = opened + 1;
            n += 1;
        }
        let mut node = Node::EMPTY;
        for (i, &k) in kids[..n].iter().enumerate() {
            let child = if is_leaf(k) {
                leaf(k, nodes)
            } else {
                let index = nodes.len() as u32;
                nodes.push(Node::EMPTY);
                work.push((index, k));
                ChildRef::node(index)
            };
            node.set(i, bin[k].lo, bin[k].hi, child);
        }
        nodes[slot as usize] = node;
    }
    ChildRef::node(root_index)
}

/// Group subtrees of at most this many triangles become one leaf of one packet: testing four
/// triangles at once costs about one box test, so the boxes below would only add work.
const MERGE_AT_MOST: u32 = 4;

/// One group's collapsed tree, before its triangles are copied.
struct GroupTree {
    /// Nodes with group-local references (node indices and packet indices from 0).
    nodes: Vec<Node>,
    root: ChildRef,
    /// The group's bounds (the padded root box), when it has triangles.
    bounds: Option<([f32; 3], [f32; 3])>,
    /// The triangle index of each lane of each of the group's packets. The packets
    /// themselves (144 bytes each) are only made in the global array: a per-group copy
    /// alive beside it would double the peak memory of the build.
    prims: Vec<[u32; 4]>,
}

fn triangle_box(tri: &[Vec3; 3], pad: f32) -> Aabb {
    let lo = tri[0].min(tri[1]).min(tri[2]) - Vec3::splat(pad);
    let hi = tri[0].max(tri[1]).max(tri[2]) + Vec3::splat(pad);
    Aabb::new(Vec3A::from(lo), Vec3A::from(hi))
}

fn group_tree(group: &Group, pad: f32) -> GroupTree {
    let boxes: Vec<Aabb> = (0..group.triangle_count())
        .map(|i| triangle_box(&group.triangle(i), pad))
        .collect();
    let (bin, order) = build_binary(&boxes, blas_params());
    drop(boxes);
    let mut nodes = Vec::new();
    let mut lanes = Vec::with_capacity(order.len() + order.len() / 2);
    let mut packets = 0u32;
    let mut pending = Vec::new();
    let root = collapse(&bin, MERGE_AT_MOST, &mut nodes, |k, _| {
        // The triangles under binary node k, leaf by leaf.
        let start = lanes.len();
        pending.push(k);
        while let Some(j) = pending.pop() {
            let n = &bin[j];
            if n.is_leaf() {
                lanes.extend_from_slice(&order[n.first as usize..(n.first + n.count) as usize]);
            } else {
                pending.push(n.first as usize);
                pending.push(n.first as usize + 1);
            }
        }
        let tris = (lanes.len() - start) as u32;
        let count = tris.div_ceil(4);
        // obvhs caps leaves at `max_prims_per_leaf` (8) triangles: at most two packets.
        assert!(count <= MAX_LEAF_PACKETS, "a BVH leaf of {tris} triangles");
        let last = lanes[lanes.len() - 1];
        lanes.resize(start + 4 * count as usize, last);
        let r = ChildRef::leaf(packets, count);
        packets += count;
        r
    });
    debug_assert_eq!(lanes.len(), 4 * packets as usize);
    let prims: Vec<[u32; 4]> = lanes
        .chunks_exact(4)
        .map(|l| [l[0], l[1], l[2], l[3]])
        .collect();
    GroupTree {
        nodes,
        root,
        bounds: bin.first().map(|b| (b.lo, b.hi)),
        prims,
    }
}

/// Nodes over a list of `(lo, hi, reference)` children, eight per node; returns the top one.
fn node_over(entries: &[([f32; 3], [f32; 3], ChildRef)], nodes: &mut Vec<Node>) -> ChildRef {
    if entries.len() == 1 {
        return entries[0].2;
    }
    let per = entries.len().div_ceil(WIDTH);
    let mut n = Node::EMPTY;
    for (i, chunk) in entries.chunks(per).enumerate() {
        let mut lo = chunk[0].0;
        let mut hi = chunk[0].1;
        for e in chunk {
            for a in 0..3 {
                lo[a] = lo[a].min(e.0[a]);
                hi[a] = hi[a].max(e.1[a]);
            }
        }
        n.set(i, lo, hi, node_over(chunk, nodes));
    }
    nodes.push(n);
    ChildRef::node(nodes.len() as u32 - 1)
}

/// The largest coordinate magnitude of the scene's vertices (1 for an empty scene), computed
/// in parallel over the groups.
fn scene_magnitude(scene: &Scene) -> f32 {
    let m = scene
        .groups
        .par_iter()
        .map(|g| {
            g.positions
                .iter()
                .fold(0.0f32, |m, p| m.max(p.abs().max_element()))
        })
        .reduce(|| 0.0, f32::max);
    if m > 0.0 && m.is_finite() {
        m
    } else {
        1.0
    }
}

/// Builds the whole structure; see the module comment.
pub(super) fn build(scene: &Scene) -> SceneBvh {
    build_padded(scene, 0.0)
}

/// [`build`], with the boxes padded for the larger of the scene's magnitude and `magnitude`.
pub(super) fn build_padded(scene: &Scene, magnitude: f32) -> SceneBvh {
    let start = Instant::now();
    let pad = scene_magnitude(scene).max(magnitude) * PAD_RELATIVE;
    let mut trees = build_group_trees(scene, pad);
    let place = Placement::of(&trees, scene);
    let mut nodes = gather_nodes(&mut trees, &place);
    let packets = gather_packets(scene, &mut trees, &place);
    let root = build_top_level(&trees, &place, &mut nodes);
    let stats = BuildStats {
        triangles: scene.triangle_count(),
        groups: scene.groups.len(),
        seconds: start.elapsed().as_secs_f64(),
    };
    let cutout_groups = scene.cutout_groups();
    let cutout_groups = if cutout_groups.contains(&true) {
        cutout_groups
    } else {
        Vec::new()
    };
    SceneBvh {
        nodes,
        packets,
        root,
        cutout_groups,
        stats,
    }
}

/// Step 1: every group's tree, built in parallel, in the scene's order of groups.
fn build_group_trees(scene: &Scene, pad: f32) -> Vec<GroupTree> {
    // Largest groups first, so that no thread is left with a big group at the end (rayon
    // splits the list in halves and steals; with a heavy tail of group sizes the order
    // decides the makespan).
    let mut by_size: Vec<usize> = (0..scene.groups.len()).collect();
    by_size.sort_by_key(|&g| std::cmp::Reverse(scene.groups[g].triangle_count()));
    let mut built: Vec<(usize, GroupTree)> = by_size
        .par_iter()
        .with_max_len(1)
        .map(|&g| (g, group_tree(&scene.groups[g], pad)))
        .collect();
    built.sort_unstable_by_key(|(g, _)| *g);
    built.into_iter().map(|(_, t)| t).collect()
}

/// Step 2: where each group's nodes and packets go in the global arrays.
struct Placement {
    node_offsets: Vec<u32>,
    packet_offsets: Vec<u32>,
    total_nodes: usize,
    total_packets: usize,
}

impl Placement {
    fn of(trees: &[GroupTree], scene: &Scene) -> Placement {
        // Where each group's nodes and packets go.
        let node_counts: Vec<usize> = trees.iter().map(|t| t.nodes.len()).collect();
        let packet_counts: Vec<usize> = trees.iter().map(|t| t.prims.len()).collect();
        let prefix = |counts: &[usize]| -> Vec<u32> {
            let mut acc = 0usize;
            counts
                .iter()
                .map(|&c| {
                    let o = acc;
                    acc += c;
                    o as u32
                })
                .collect()
        };
        let node_offsets = prefix(&node_counts);
        let packet_offsets = prefix(&packet_counts);
        let total_nodes: usize = node_counts.iter().sum();
        let total_packets: usize = packet_counts.iter().sum();
        assert!(
            total_packets < MAX_PACKETS as usize && total_nodes < (1usize << 31),
            "a scene of {} triangles is beyond the CPU BVH's 2^30",
            scene.triangle_count()
        );
        Placement {
            node_offsets,
            packet_offsets,
            total_nodes,
            total_packets,
        }
    }

    /// A group's reference `r`, moved to where its group's nodes and packets are placed.
    fn moved(&self, gi: usize, r: ChildRef) -> ChildRef {
        r.offset(self.node_offsets[gi], self.packet_offsets[gi])
    }
}

// Every global array is written once, in parallel, straight into its allocation (an
// indexed parallel iterator collected into a vector): element k finds its group by a
// binary search over the offsets.
#[inline]
fn owner(offsets: &[u32], k: usize) -> usize {
    offsets.partition_point(|&o| o as usize <= k) - 1
}

/// Step 3, nodes: every group's nodes in the global array, their references moved; frees the
/// groups' own nodes.
fn gather_nodes(trees: &mut [GroupTree], place: &Placement) -> Vec<Node> {
    // Room for the top-level nodes too (fewer than the groups), so that appending them below
    // does not reallocate and copy the whole array.
    let groups_with_triangles = trees.iter().filter(|t| t.bounds.is_some()).count();
    let mut nodes: Vec<Node> = Vec::with_capacity(place.total_nodes + groups_with_triangles + 1);
    (0..place.total_nodes)
        .into_par_iter()
        .with_min_len(1024)
        .map(|k| {
            let gi = owner(&place.node_offsets, k);
            let src = &trees[gi].nodes[k - place.node_offsets[gi] as usize];
            Node {
                child: src.child.map(|c| place.moved(gi, c)),
                ..*src
            }
        })
        .collect_into_vec(&mut nodes);
    // The groups' own nodes are copied: give their memory back before the packets are made.
    for t in trees.iter_mut() {
        t.nodes = Vec::new();
    }
    nodes
}

/// Step 3, packets: every group's packets, gathered from the scene's vertices, each with its
/// triangles' ids; frees the groups' packet lists.
fn gather_packets(scene: &Scene, trees: &mut [GroupTree], place: &Placement) -> Vec<Packet> {
    let mut packets: Vec<Packet> = Vec::new();
    (0..place.total_packets)
        .into_par_iter()
        .with_min_len(1024)
        .map(|k| {
            let gi = owner(&place.packet_offsets, k);
            let local = k - place.packet_offsets[gi] as usize;
            let prim = trees[gi].prims[local];
            let group = &scene.groups[gi];
            Packet {
                tri: TriPacket::new(&prim.map(|p| group.triangle(p as usize))),
                ids: PacketIds {
                    group: [gi as u32; 4],
                    prim,
                },
            }
        })
        .collect_into_vec(&mut packets);
    for t in trees.iter_mut() {
        t.prims = Vec::new();
    }
    packets
}

/// Step 4: the top level over the non-empty groups, its nodes appended to `nodes`; returns
/// the root.
fn build_top_level(trees: &[GroupTree], place: &Placement, nodes: &mut Vec<Node>) -> ChildRef {
    // The top level over the non-empty groups.
    let mut top_groups = Vec::new();
    let mut boxes = Vec::new();
    for (gi, t) in trees.iter().enumerate() {
        if let Some((lo, hi)) = t.bounds {
            top_groups.push(gi);
            boxes.push(Aabb::new(Vec3A::from(lo), Vec3A::from(hi)));
        }
    }
    let (bin, order) = build_binary(&boxes, tlas_params());
    let group_entry = |slot: u32| {
        let gi = top_groups[order[slot as usize] as usize];
        let (lo, hi) = trees[gi]
            .bounds
            .expect("only non-empty groups are in the top level");
        (lo, hi, place.moved(gi, trees[gi].root))
    };
    // The top-level nodes are appended after the groups' (their indices are global already).
    collapse(&bin, 0, nodes, |k, nodes| {
        let leaf = &bin[k];
        if leaf.count == 1 {
            group_entry(leaf.first).2
        } else {
            // obvhs keeps one group per top-level leaf (max_prims_per_leaf = 1); should it
            // ever merge some, the leaf becomes nodes over their roots.
            let entries: Vec<_> = (leaf.first..leaf.first + leaf.count)
                .map(group_entry)
                .collect();
            node_over(&entries, nodes)
        }
    })
}
