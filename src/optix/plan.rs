//! The build plan of a batch of GAS builds: a pure function of the builds' memory needs.
//!
//! Two questions are answered here, without touching a GPU:
//!
//! 1. *Which GASes are built* ([`group_gases`]): by default one GAS per group; with
//!    `--merge-below N`, groups under N triangles become separate build inputs of shared GASes,
//!    each keeping its identity through its own SBT record ([`GasTable`]).
//! 2. *Where each build runs and writes* ([`make_plan`]): the CUDA stream of every build, and its
//!    byte range in ONE scratch allocation and ONE output allocation.
//!
//! OptiX lets a build use every byte of the scratch it is given, so two builds that may run at
//! the same time must never share a scratch byte (the forum thread's `--reuse-scratch` crash),
//! and no two builds may share an output byte. [`validate`] proves both for a plan, plus
//! alignment and bounds; [`make_plan`] returns only validated plans, and the builder validates
//! again before it enqueues anything, so a plan edited by hand cannot slip through.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use thiserror::Error;

/// `OPTIX_ACCEL_BUFFER_BYTE_ALIGNMENT`: the alignment OptiX requires of acceleration-structure
/// build temp (scratch) and output buffers.
pub const ACCEL_BUFFER_ALIGNMENT: u64 = 128;

/// The most primitives one GAS may hold (OptiX's documented limit, 2^29).
pub const MAX_PRIMITIVES_PER_GAS: u64 = 1 << 29;

/// How builds are spread over streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Assign {
    /// Build i on stream i mod N, enqueued in build order.
    RoundRobin,
    /// Longest processing time first: builds sorted by load, largest first, each onto the stream
    /// with the least load so far. The load of a build is its triangle count plus
    /// [`PlanOptions::lpt_build_weight`].
    Lpt,
}

/// The order the host enqueues the builds in; the streams are [`Assign`]'s either way. A
/// diagnostic: LPT batches with small build weights crashed or hung while round-robin never
/// did (docs/gas-builds.md, known issue), and LPT differs from round-robin in both the streams
/// and the issue order; crossing the two tells which matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IssueOrder {
    /// The assignment's own order: build order for round-robin, largest first for LPT.
    Assignment,
    /// Build order (group order), whatever the assignment.
    BuildOrder,
    /// Most triangles first (ties in build order), whatever the assignment.
    LargestFirst,
}

impl IssueOrder {
    /// The command-line name: `assignment`, `build`, `largest-first`.
    pub fn name(self) -> &'static str {
        match self {
            IssueOrder::Assignment => "assignment",
            IssueOrder::BuildOrder => "build",
            IssueOrder::LargestFirst => "largest-first",
        }
    }
}

/// How builds share the one scratch allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScratchMode {
    /// Every build its own disjoint slice: any two builds may run at once.
    Shared,
    /// One slice per stream, reused by every build on that stream: builds on one stream run in
    /// stream order, so reuse is safe there and only there. Total = sum over streams of their
    /// largest need.
    PerStream,
}

/// What one build needs, as `optixAccelComputeMemoryUsage` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildNeed {
    /// `tempSizeInBytes`: the scratch the build may use.
    pub temp_bytes: u64,
    /// `outputSizeInBytes`: the size of the (uncompacted) GAS.
    pub output_bytes: u64,
    /// Triangles over all the build's inputs (the LPT load).
    pub triangles: u64,
    /// The scene groups the build inputs hold, input i holding `groups[i]` (for names and
    /// messages; the plan does not depend on it).
    pub groups: Vec<u32>,
}

/// Parameters of [`make_plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Number of CUDA streams, at least 1.
    pub streams: u32,
    pub assign: Assign,
    pub scratch: ScratchMode,
    /// Alignment of every scratch and output offset: a power of two, normally
    /// [`ACCEL_BUFFER_ALIGNMENT`].
    pub alignment: u64,
    /// Triangles that every build adds to its LPT load, standing for the fixed cost of a build
    /// (kernel launches) that tiny groups pay in full. 0 balances triangles only; the command
    /// line uses the measured [`DEFAULT_LPT_BUILD_WEIGHT`].
    pub lpt_build_weight: u64,
    /// Bytes left unused after every scratch slice and every output range (rounded up to the
    /// alignment), 0 normally. A diagnostic: filled with a known byte before the builds and
    /// read back after them ([`guard_regions`]), they show whether a build wrote past the
    /// bytes OptiX asked for.
    pub guard_bytes: u64,
    /// The enqueue order ([`IssueOrder::Assignment`] normally; the others are diagnostics).
    pub issue: IssueOrder,
}

impl PlanOptions {
    pub fn new(streams: u32, assign: Assign, scratch: ScratchMode) -> PlanOptions {
        PlanOptions {
            streams,
            assign,
            scratch,
            alignment: ACCEL_BUFFER_ALIGNMENT,
            lpt_build_weight: 0,
            guard_bytes: 0,
            issue: IssueOrder::Assignment,
        }
    }
}

/// A byte range `[offset, offset + len)` of one allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    pub offset: u64,
    pub len: u64,
}

impl ByteRange {
    /// The end of the range, `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// Where one build runs and what memory it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBuild {
    pub need: BuildNeed,
    /// Index of the stream the build is enqueued on.
    pub stream: u32,
    /// The build's scratch, within the scratch allocation; `len` >= `need.temp_bytes`.
    pub scratch: ByteRange,
    /// The build's GAS, within the output allocation; `len` >= `need.output_bytes`.
    pub output: ByteRange,
}

/// A complete plan. Plain data, so that tests can break one on purpose: everything that
/// consumes a plan calls [`validate`] first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildPlan {
    pub streams: u32,
    pub scratch_mode: ScratchMode,
    pub alignment: u64,
    /// One entry per build, in the order of the needs given to [`make_plan`].
    pub builds: Vec<PlannedBuild>,
    /// The order in which the host enqueues the builds (indices into `builds`). Builds on one
    /// stream run in this order.
    pub issue_order: Vec<usize>,
    /// Size of the one scratch allocation.
    pub scratch_bytes: u64,
    /// Size of the one output allocation.
    pub output_bytes: u64,
}

impl BuildPlan {
    /// The builds each of `threads` host threads enqueues when the enqueue is spread over
    /// threads (`--enqueue-threads`): thread t takes every stream s with s mod threads = t and
    /// enqueues their builds in issue order, so that each stream still receives its builds in
    /// the plan's order and from one thread. At most one lane per stream; `threads` 0 counts
    /// as 1.
    pub fn enqueue_lanes(&self, threads: u32) -> Vec<Vec<usize>> {
        let lanes = threads.clamp(1, self.streams.max(1)) as usize;
        let mut out = vec![Vec::new(); lanes];
        for &b in &self.issue_order {
            if let Some(pb) = self.builds.get(b) {
                out[pb.stream as usize % lanes].push(b);
            }
        }
        out
    }

    /// The builds enqueued on `stream`, in issue order.
    pub fn stream_builds(&self, stream: u32) -> Vec<usize> {
        self.issue_order
            .iter()
            .copied()
            .filter(|&b| self.builds.get(b).is_some_and(|pb| pb.stream == stream))
            .collect()
    }

    /// Triangles per stream (what LPT balances, without the per-build weight).
    pub fn stream_triangles(&self) -> Vec<u64> {
        let mut t = vec![0u64; self.streams as usize];
        for b in &self.builds {
            if let Some(s) = t.get_mut(b.stream as usize) {
                *s += b.need.triangles;
            }
        }
        t
    }
}

/// Why a plan could not be made, or why a plan is unsafe.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlanError {
    #[error("a build plan needs at least one stream")]
    NoStreams,
    #[error("alignment {0} is not a power of two")]
    BadAlignment(u64),
    #[error("byte counts overflow 64 bits")]
    Overflow,
    #[error("build {build} is on stream {stream}, but the plan has {streams} streams")]
    StreamOutOfRange {
        build: usize,
        stream: u32,
        streams: u32,
    },
    #[error("the issue order is not a permutation of the {builds} builds")]
    BadIssueOrder { builds: usize },
    #[error("build {build}: {what} offset {offset} is not a multiple of {alignment}")]
    Misaligned {
        build: usize,
        what: &'static str,
        offset: u64,
        alignment: u64,
    },
    #[error(
        "build {build}: {what} range of {len} bytes is smaller than the {need} bytes it needs"
    )]
    TooSmall {
        build: usize,
        what: &'static str,
        len: u64,
        need: u64,
    },
    #[error("build {build}: {what} range ends at byte {end}, past the allocation's {total} bytes")]
    OutOfBounds {
        build: usize,
        what: &'static str,
        end: u64,
        total: u64,
    },
    #[error("builds {a} and {b} can run at once but share {what} bytes")]
    Overlap {
        a: usize,
        b: usize,
        what: &'static str,
    },
}

fn align_up(x: u64, alignment: u64) -> Result<u64, PlanError> {
    let mask = alignment - 1;
    x.checked_add(mask)
        .map(|v| v & !mask)
        .ok_or(PlanError::Overflow)
}

fn check_options(streams: u32, alignment: u64) -> Result<(), PlanError> {
    if streams == 0 {
        return Err(PlanError::NoStreams);
    }
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(PlanError::BadAlignment(alignment));
    }
    Ok(())
}

/// Stream of every build and the order the host enqueues them.
fn assign_streams(needs: &[BuildNeed], opts: &PlanOptions) -> (Vec<u32>, Vec<usize>) {
    let (streams, order) = assign_streams_in_their_order(needs, opts);
    let order = match opts.issue {
        IssueOrder::Assignment => order,
        IssueOrder::BuildOrder => (0..needs.len()).collect(),
        IssueOrder::LargestFirst => {
            let mut o: Vec<usize> = (0..needs.len()).collect();
            o.sort_by_key(|&i| (Reverse(needs[i].triangles), i));
            o
        }
    };
    (streams, order)
}

/// [`assign_streams`] in the assignment's own issue order.
fn assign_streams_in_their_order(
    needs: &[BuildNeed],
    opts: &PlanOptions,
) -> (Vec<u32>, Vec<usize>) {
    let n = needs.len();
    match opts.assign {
        Assign::RoundRobin => {
            let streams = (0..n).map(|i| (i % opts.streams as usize) as u32).collect();
            (streams, (0..n).collect())
        }
        Assign::Lpt => {
            let load = |i: usize| needs[i].triangles.saturating_add(opts.lpt_build_weight);
            let mut order: Vec<usize> = (0..n).collect();
            // Largest first; ties keep build order so that the plan is deterministic.
            order.sort_by_key(|&i| (Reverse(load(i)), i));
            // Min-heap of (load, stream): the least-loaded stream, lowest index on ties.
            let mut heap: BinaryHeap<Reverse<(u64, u32)>> =
                (0..opts.streams).map(|s| Reverse((0, s))).collect();
            let mut streams = vec![0u32; n];
            for &i in &order {
                if let Some(Reverse((l, s))) = heap.pop() {
                    streams[i] = s;
                    heap.push(Reverse((l.saturating_add(load(i)), s)));
                }
            }
            (streams, order)
        }
    }
}

/// Makes the plan of a batch of builds: streams, scratch and output ranges, totals. The result
/// has passed [`validate`].
pub fn make_plan(needs: &[BuildNeed], opts: &PlanOptions) -> Result<BuildPlan, PlanError> {
    check_options(opts.streams, opts.alignment)?;
    let a = opts.alignment;
    let room = RangeRoom {
        alignment: a,
        guard: align_up(opts.guard_bytes, a)?,
    };
    let (streams, issue_order) = assign_streams(needs, opts);

    // Scratch ranges.
    let (scratch, scratch_bytes) = match opts.scratch {
        ScratchMode::Shared => shared_scratch(needs, &issue_order, room)?,
        ScratchMode::PerStream => per_stream_scratch(needs, &streams, opts.streams, room)?,
    };

    // Output ranges: always disjoint, in build order.
    let (builds, output_bytes) = planned_builds(needs, &streams, &scratch, room)?;

    let plan = BuildPlan {
        streams: opts.streams,
        scratch_mode: opts.scratch,
        alignment: a,
        builds,
        issue_order,
        scratch_bytes,
        output_bytes,
    };
    validate(&plan)?;
    Ok(plan)
}

/// How [`make_plan`] lays ranges out: each aligned, then a guard band (already aligned).
#[derive(Clone, Copy)]
struct RangeRoom {
    alignment: u64,
    guard: u64,
}

impl RangeRoom {
    /// The room one range takes in its allocation: its need, aligned, then the guard band.
    fn of(self, bytes: u64) -> Result<u64, PlanError> {
        align_up(bytes, self.alignment)?
            .checked_add(self.guard)
            .ok_or(PlanError::Overflow)
    }
}

/// [`ScratchMode::Shared`]: every build its own scratch range. The ranges and their total.
fn shared_scratch(
    needs: &[BuildNeed],
    issue_order: &[usize],
    room: RangeRoom,
) -> Result<(Vec<ByteRange>, u64), PlanError> {
    let mut scratch = vec![ByteRange { offset: 0, len: 0 }; needs.len()];
    let mut scratch_bytes = 0u64;
    // Laid out in issue order: builds enqueued together sit together.
    for &i in issue_order {
        scratch[i] = ByteRange {
            offset: scratch_bytes,
            len: needs[i].temp_bytes,
        };
        scratch_bytes = scratch_bytes
            .checked_add(room.of(needs[i].temp_bytes)?)
            .ok_or(PlanError::Overflow)?;
    }
    Ok((scratch, scratch_bytes))
}

/// [`ScratchMode::PerStream`]: one slice per stream, as large as its largest need, shared by
/// the stream's builds. The ranges and their total.
fn per_stream_scratch(
    needs: &[BuildNeed],
    streams: &[u32],
    stream_count: u32,
    room: RangeRoom,
) -> Result<(Vec<ByteRange>, u64), PlanError> {
    let mut scratch = vec![ByteRange { offset: 0, len: 0 }; needs.len()];
    let mut scratch_bytes = 0u64;
    let mut largest = vec![0u64; stream_count as usize];
    for (i, need) in needs.iter().enumerate() {
        let s = streams[i] as usize;
        largest[s] = largest[s].max(align_up(need.temp_bytes, room.alignment)?);
    }
    let mut slice_offset = vec![0u64; stream_count as usize];
    for s in 0..stream_count as usize {
        slice_offset[s] = scratch_bytes;
        scratch_bytes = scratch_bytes
            .checked_add(largest[s])
            .and_then(|b| b.checked_add(room.guard))
            .ok_or(PlanError::Overflow)?;
    }
    for (i, need) in needs.iter().enumerate() {
        scratch[i] = ByteRange {
            offset: slice_offset[streams[i] as usize],
            len: need.temp_bytes,
        };
    }
    Ok((scratch, scratch_bytes))
}

/// The planned builds, with their output ranges laid out in build order, and the output total.
fn planned_builds(
    needs: &[BuildNeed],
    streams: &[u32],
    scratch: &[ByteRange],
    room: RangeRoom,
) -> Result<(Vec<PlannedBuild>, u64), PlanError> {
    let mut output_bytes = 0u64;
    let mut builds = Vec::with_capacity(needs.len());
    for (i, need) in needs.iter().enumerate() {
        let output = ByteRange {
            offset: output_bytes,
            len: need.output_bytes,
        };
        output_bytes = output_bytes
            .checked_add(room.of(need.output_bytes)?)
            .ok_or(PlanError::Overflow)?;
        builds.push(PlannedBuild {
            need: need.clone(),
            stream: streams[i],
            scratch: scratch[i],
            output,
        });
    }
    Ok((builds, output_bytes))
}

/// One range to check for overlaps: builds of the same `class` are ordered (never run at
/// once); builds of different classes may run at once.
struct Interval {
    start: u64,
    end: u64,
    class: usize,
    build: usize,
}

/// Finds two intervals of different classes that share a byte, in O(n log n).
///
/// Sweep by start, keeping the furthest-reaching interval seen so far. If an earlier interval j
/// of another class reaches past the start s of the current one, then either j is the
/// furthest-reaching one, or the furthest-reaching one f has the current class and also
/// contains s, so f and j (different classes, both containing s) overlap and were reported
/// earlier. Checking the furthest-reaching interval alone is therefore enough.
fn find_overlap(mut v: Vec<Interval>) -> Option<(usize, usize)> {
    v.retain(|iv| iv.end > iv.start); // empty ranges hold no byte
    v.sort_by_key(|iv| (iv.start, iv.build));
    let mut furthest: Option<&Interval> = None;
    for iv in &v {
        if let Some(f) = furthest {
            if f.class != iv.class && f.end > iv.start {
                return Some((f.build.min(iv.build), f.build.max(iv.build)));
            }
        }
        if furthest.is_none_or(|f| iv.end > f.end) {
            furthest = Some(iv);
        }
    }
    None
}

/// Proves a plan safe: streams in range, the issue order a permutation, every range aligned,
/// large enough for its need and inside its allocation, no two builds sharing an output byte,
/// and no two builds that can run at once sharing a scratch byte (in [`ScratchMode::Shared`]
/// every pair counts as concurrent; in [`ScratchMode::PerStream`] builds on different streams).
pub fn validate(plan: &BuildPlan) -> Result<(), PlanError> {
    check_options(plan.streams, plan.alignment)?;
    check_issue_order(plan)?;
    for (i, b) in plan.builds.iter().enumerate() {
        check_build_ranges(plan, i, b)?;
    }
    check_overlaps(plan)
}

/// The issue order of `plan` names every build exactly once.
fn check_issue_order(plan: &BuildPlan) -> Result<(), PlanError> {
    let n = plan.builds.len();
    let mut seen = vec![false; n];
    if plan.issue_order.len() != n {
        return Err(PlanError::BadIssueOrder { builds: n });
    }
    for &i in &plan.issue_order {
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            _ => return Err(PlanError::BadIssueOrder { builds: n }),
        }
    }
    Ok(())
}

/// Build `i`'s stream is in range, and each of its ranges aligned, large enough for its need
/// and inside its allocation.
fn check_build_ranges(plan: &BuildPlan, i: usize, b: &PlannedBuild) -> Result<(), PlanError> {
    if b.stream >= plan.streams {
        return Err(PlanError::StreamOutOfRange {
            build: i,
            stream: b.stream,
            streams: plan.streams,
        });
    }
    for (what, range, need, total) in [
        ("scratch", b.scratch, b.need.temp_bytes, plan.scratch_bytes),
        ("output", b.output, b.need.output_bytes, plan.output_bytes),
    ] {
        if range.offset % plan.alignment != 0 {
            return Err(PlanError::Misaligned {
                build: i,
                what,
                offset: range.offset,
                alignment: plan.alignment,
            });
        }
        if range.len < need {
            return Err(PlanError::TooSmall {
                build: i,
                what,
                len: range.len,
                need,
            });
        }
        let end = range.end().ok_or(PlanError::Overflow)?;
        if end > total {
            return Err(PlanError::OutOfBounds {
                build: i,
                what,
                end,
                total,
            });
        }
    }
    Ok(())
}

/// No two builds share an output byte, and no two that can run at once a scratch byte. The
/// ranges' ends were checked by [`check_build_ranges`].
fn check_overlaps(plan: &BuildPlan) -> Result<(), PlanError> {
    let intervals = |what: fn(&PlannedBuild) -> ByteRange, class: &dyn Fn(usize) -> usize| {
        plan.builds
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let r = what(b);
                Interval {
                    start: r.offset,
                    end: r.offset + r.len, // checked above
                    class: class(i),
                    build: i,
                }
            })
            .collect::<Vec<_>>()
    };
    let each_own = |i: usize| i;
    if let Some((a, b)) = find_overlap(intervals(|b| b.output, &each_own)) {
        return Err(PlanError::Overlap {
            a,
            b,
            what: "output",
        });
    }
    let scratch_class: &dyn Fn(usize) -> usize = match plan.scratch_mode {
        ScratchMode::Shared => &each_own,
        ScratchMode::PerStream => &|i: usize| plan.builds[i].stream as usize,
    };
    if let Some((a, b)) = find_overlap(intervals(|b| b.scratch, scratch_class)) {
        return Err(PlanError::Overlap {
            a,
            b,
            what: "scratch",
        });
    }
    Ok(())
}

/// Which allocation a [`GuardRegion`] lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    Scratch,
    Output,
}

/// The bytes between the end of one range (as long as its need) and the start of the next range
/// of the same allocation, or the allocation's end: no build may write there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardRegion {
    pub allocation: Allocation,
    /// The builds whose range ends here (several with per-stream scratch: a stream's builds
    /// share one slice; the region starts after the longest of them).
    pub builds: Vec<usize>,
    pub start: u64,
    pub end: u64,
}

/// Every byte of the plan's two allocations that no build may write: after each range, up to
/// the next one. Empty ranges of 0 bytes are skipped where nothing follows them.
pub fn guard_regions(plan: &BuildPlan) -> Vec<GuardRegion> {
    let mut out = Vec::new();
    for (allocation, total) in [
        (Allocation::Scratch, plan.scratch_bytes),
        (Allocation::Output, plan.output_bytes),
    ] {
        // Ranges by start: builds sharing a start (per-stream scratch) form one slice that
        // ends where the longest of them ends.
        let mut slices: Vec<(u64, u64, Vec<usize>)> = Vec::new();
        let mut by_start: Vec<(u64, u64, usize)> = plan
            .builds
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let r = match allocation {
                    Allocation::Scratch => b.scratch,
                    Allocation::Output => b.output,
                };
                (r.offset, r.offset.saturating_add(r.len), i)
            })
            .collect();
        by_start.sort_unstable();
        for (start, end, i) in by_start {
            match slices.last_mut() {
                Some((s, e, builds)) if *s == start => {
                    *e = (*e).max(end);
                    builds.push(i);
                }
                _ => slices.push((start, end, vec![i])),
            }
        }
        for (k, (_, end, builds)) in slices.iter().enumerate() {
            let next = slices.get(k + 1).map_or(total, |n| n.0);
            if next > *end {
                let mut builds = builds.clone();
                builds.sort_unstable();
                out.push(GuardRegion {
                    allocation,
                    builds,
                    start: *end,
                    end: next,
                });
            }
        }
    }
    out
}

/// Where `bytes` (the region's contents read back) differ from `fill`: the offsets, within
/// the region, of the first and the last byte that differs. `None`: untouched.
pub fn written_span(bytes: &[u8], fill: u8) -> Option<(usize, usize)> {
    let first = bytes.iter().position(|&b| b != fill)?;
    let last = bytes.iter().rposition(|&b| b != fill)?;
    Some((first, last))
}

// ---------------------------------------------------------------------------------------------
// Which GASes: one per group, or small groups merged (`--merge-below`).

/// The command line's `--merge-below` default, from build-bench (docs/gas-builds.md, "Defaults
/// set from these figures"): merging the sponza-like scene's groups below 1024 triangles made
/// its batch several times faster, closer to one GAS of the whole scene. Groups keep their
/// identity (their own SBT records); a scene whose groups are all larger is unchanged by it.
pub const DEFAULT_MERGE_BELOW: u64 = 1024;

/// The command line's `--lpt-build-weight` default, from build-bench (docs/gas-builds.md, "LPT
/// build weight"): a build has a fixed cost beside its per-triangle one, so triangles
/// alone (weight 0) pile the small builds onto a few streams; of the weights timed, 20000 was
/// the fastest.
pub const DEFAULT_LPT_BUILD_WEIGHT: u64 = 20_000;

/// Default cap on the triangles of one merged GAS. Not measured: it keeps a merged GAS far
/// below OptiX's primitive limit and leaves several merged GASes to spread over streams.
pub const DEFAULT_MERGED_GAS_TRIANGLES: u64 = 1 << 17;
/// Default cap on the build inputs (= SBT records) of one merged GAS. Not measured.
pub const DEFAULT_MERGED_GAS_INPUTS: usize = 1024;

/// Parameters of [`group_gases`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeOptions {
    /// Groups with fewer triangles than this are merged; 0 turns merging off.
    pub merge_below: u64,
    /// A merged GAS takes no more groups once it holds this many triangles (a group is never
    /// split, so a merged GAS stays below `max_triangles + merge_below`).
    pub max_triangles: u64,
    /// At most this many build inputs per merged GAS (at least 1).
    pub max_inputs: usize,
}

impl MergeOptions {
    pub fn new(merge_below: u64) -> MergeOptions {
        MergeOptions {
            merge_below,
            max_triangles: DEFAULT_MERGED_GAS_TRIANGLES,
            max_inputs: DEFAULT_MERGED_GAS_INPUTS,
        }
    }
}

/// One GAS to build: build input i holds group `groups[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GasSpec {
    pub groups: Vec<u32>,
    /// Triangles over all its groups.
    pub triangles: u64,
}

impl GasSpec {
    /// Whether it holds more than one group (then its instance id cannot be the group id).
    pub fn is_merged(&self) -> bool {
        self.groups.len() > 1
    }

    /// The instance id of this GAS in the IAS: the group id for a GAS of one group; for a
    /// merged GAS the id of its first group (the hit's group comes from the SBT record then).
    pub fn instance_id(&self) -> u32 {
        self.groups.first().copied().unwrap_or(0)
    }
}

/// The GASes of a scene and the identity of every build input.
///
/// Every build input has its own hit-group SBT record; the records of a GAS are consecutive and
/// start at its `sbt_offsets` entry (the instance's `sbtOffset`). `record_groups[r]` is the
/// group of SBT record r, so a hit in GAS g, build input i belongs to group
/// `record_groups[sbt_offsets[g] + i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GasTable {
    pub gases: Vec<GasSpec>,
    pub sbt_offsets: Vec<u32>,
    pub record_groups: Vec<u32>,
}

impl GasTable {
    fn from_gases(gases: Vec<GasSpec>) -> GasTable {
        let mut sbt_offsets = Vec::with_capacity(gases.len());
        let mut record_groups = Vec::new();
        for g in &gases {
            sbt_offsets.push(record_groups.len() as u32);
            record_groups.extend_from_slice(&g.groups);
        }
        GasTable {
            gases,
            sbt_offsets,
            record_groups,
        }
    }

    /// The (GAS, build input) that holds `group`, if any.
    pub fn locate(&self, group: u32) -> Option<(usize, usize)> {
        self.gases.iter().enumerate().find_map(|(gi, g)| {
            g.groups
                .iter()
                .position(|&x| x == group)
                .map(|input| (gi, input))
        })
    }
}

/// Groups the scene's groups into GASes. `group_triangles[g]` is group g's triangle count.
///
/// Groups with no triangles get no GAS (nothing can hit them). Groups with at least
/// `merge_below` triangles get a GAS each, in group order; the others are packed, in group
/// order (OBJ files tend to list neighbouring parts together), into merged GASes, a new one
/// begun when the current one reaches `max_triangles` triangles or `max_inputs` inputs. Every
/// non-empty group is in exactly one GAS.
pub fn group_gases(group_triangles: &[u64], opts: &MergeOptions) -> GasTable {
    let max_inputs = opts.max_inputs.max(1);
    let mut single = Vec::new();
    let mut merged: Vec<GasSpec> = Vec::new();
    let mut current = GasSpec {
        groups: Vec::new(),
        triangles: 0,
    };
    for (g, &t) in group_triangles.iter().enumerate() {
        if t == 0 {
            continue;
        }
        if t >= opts.merge_below {
            single.push(GasSpec {
                groups: vec![g as u32],
                triangles: t,
            });
            continue;
        }
        if !current.groups.is_empty()
            && (current.triangles >= opts.max_triangles || current.groups.len() >= max_inputs)
        {
            merged.push(std::mem::replace(
                &mut current,
                GasSpec {
                    groups: Vec::new(),
                    triangles: 0,
                },
            ));
        }
        current.groups.push(g as u32);
        current.triangles += t;
    }
    if !current.groups.is_empty() {
        merged.push(current);
    }
    single.extend(merged);
    GasTable::from_gases(single)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enqueue_lanes_give_each_stream_to_one_thread_in_issue_order() {
        let needs: Vec<BuildNeed> = (0..23u64)
            .map(|i| BuildNeed {
                temp_bytes: 100 + 7 * i,
                output_bytes: 300 + i,
                triangles: 1 + (i * 37) % 11,
                groups: vec![i as u32],
            })
            .collect();
        for assign in [Assign::RoundRobin, Assign::Lpt] {
            for streams in [1u32, 3, 8] {
                let plan = make_plan(
                    &needs,
                    &PlanOptions::new(streams, assign, ScratchMode::Shared),
                )
                .unwrap();
                for threads in [0u32, 1, 2, 3, 5, 64] {
                    let lanes = plan.enqueue_lanes(threads);
                    assert_eq!(lanes.len(), threads.clamp(1, streams) as usize);
                    let mut all: Vec<usize> = lanes.iter().flatten().copied().collect();
                    all.sort();
                    assert_eq!(
                        all,
                        (0..needs.len()).collect::<Vec<_>>(),
                        "every build once"
                    );
                    for s in 0..streams {
                        let owners: Vec<usize> = (0..lanes.len())
                            .filter(|&l| lanes[l].iter().any(|&b| plan.builds[b].stream == s))
                            .collect();
                        assert!(owners.len() <= 1, "stream {s} in lanes {owners:?}");
                        if let Some(&l) = owners.first() {
                            let mine: Vec<usize> = lanes[l]
                                .iter()
                                .copied()
                                .filter(|&b| plan.builds[b].stream == s)
                                .collect();
                            assert_eq!(mine, plan.stream_builds(s), "stream {s}: issue order");
                        }
                    }
                }
            }
        }
    }

    fn need(temp: u64, out: u64, tris: u64) -> BuildNeed {
        BuildNeed {
            temp_bytes: temp,
            output_bytes: out,
            triangles: tris,
            groups: vec![0],
        }
    }

    #[test]
    fn shared_scratch_slices_are_disjoint_and_aligned() {
        let needs = [need(100, 300, 1), need(129, 1, 2), need(0, 128, 3)];
        let p = make_plan(
            &needs,
            &PlanOptions::new(2, Assign::RoundRobin, ScratchMode::Shared),
        )
        .unwrap();
        let offs: Vec<u64> = p.builds.iter().map(|b| b.scratch.offset).collect();
        assert_eq!(offs, [0, 128, 384]);
        assert_eq!(p.scratch_bytes, 384);
        let outs: Vec<u64> = p.builds.iter().map(|b| b.output.offset).collect();
        assert_eq!(outs, [0, 384, 512]);
        assert_eq!(p.output_bytes, 640);
        let streams: Vec<u32> = p.builds.iter().map(|b| b.stream).collect();
        assert_eq!(streams, [0, 1, 0]);
    }

    #[test]
    fn guard_bands_follow_every_range_and_regions_cover_exactly_the_unused_bytes() {
        let needs = [need(100, 300, 1), need(129, 1, 2), need(0, 128, 3)];
        let mut o = PlanOptions::new(2, Assign::RoundRobin, ScratchMode::Shared);
        o.guard_bytes = 200; // rounded up to 256
        let p = make_plan(&needs, &o).unwrap();
        let offs: Vec<u64> = p.builds.iter().map(|b| b.scratch.offset).collect();
        assert_eq!(offs, [0, 128 + 256, 384 + 256 + 256]);
        assert_eq!(p.scratch_bytes, 384 + 256 * 3);
        let regions = guard_regions(&p);
        // Every byte of both allocations is in exactly one range or one region.
        for (alloc, total) in [
            (Allocation::Scratch, p.scratch_bytes),
            (Allocation::Output, p.output_bytes),
        ] {
            let mut owner = vec![0u32; total as usize];
            for b in &p.builds {
                let r = if alloc == Allocation::Scratch {
                    b.scratch
                } else {
                    b.output
                };
                for x in r.offset..r.offset + r.len {
                    owner[x as usize] += 1;
                }
            }
            for g in regions.iter().filter(|g| g.allocation == alloc) {
                for x in g.start..g.end {
                    owner[x as usize] += 1;
                }
            }
            assert!(owner.iter().all(|&n| n == 1), "{alloc:?}: {owner:?}");
        }
        // The region after build 0's scratch: 100..384 (alignment slack, then the guard).
        let g = &regions[0];
        assert_eq!(
            (g.allocation, g.builds.as_slice(), g.start, g.end),
            (Allocation::Scratch, &[0][..], 100, 384)
        );
        // No guard, no region beyond alignment slack.
        let plain = make_plan(
            &needs,
            &PlanOptions::new(2, Assign::RoundRobin, ScratchMode::Shared),
        )
        .unwrap();
        assert!(guard_regions(&plain).iter().all(|g| g.end - g.start < 128));
    }

    #[test]
    fn per_stream_guard_regions_start_after_the_longest_build_of_the_slice() {
        let needs = [need(1000, 1, 1), need(200, 1, 1), need(10, 1, 1)];
        let mut o = PlanOptions::new(2, Assign::RoundRobin, ScratchMode::PerStream);
        o.guard_bytes = 128;
        let p = make_plan(&needs, &o).unwrap();
        let scratch: Vec<_> = guard_regions(&p)
            .into_iter()
            .filter(|g| g.allocation == Allocation::Scratch)
            .collect();
        assert_eq!(scratch[0].builds, [0, 2]);
        assert_eq!((scratch[0].start, scratch[0].end), (1000, 1024 + 128));
        assert_eq!(scratch[1].builds, [1]);
        assert_eq!(
            (scratch[1].start, scratch[1].end),
            (1152 + 200, p.scratch_bytes)
        );
    }

    #[test]
    fn written_span_finds_the_first_and_last_changed_byte() {
        assert_eq!(written_span(&[7, 7, 7], 7), None);
        assert_eq!(written_span(&[7, 1, 7, 0, 7], 7), Some((1, 3)));
        assert_eq!(written_span(&[], 7), None);
    }

    #[test]
    fn per_stream_scratch_is_sum_of_largest_per_stream() {
        // Stream 0 gets builds 0 and 2 (largest 1000 -> 1024), stream 1 build 1 (200 -> 256).
        let needs = [need(1000, 1, 1), need(200, 1, 1), need(10, 1, 1)];
        let p = make_plan(
            &needs,
            &PlanOptions::new(2, Assign::RoundRobin, ScratchMode::PerStream),
        )
        .unwrap();
        assert_eq!(p.scratch_bytes, 1024 + 256);
        assert_eq!(p.builds[0].scratch.offset, 0);
        assert_eq!(p.builds[2].scratch.offset, 0);
        assert_eq!(p.builds[1].scratch.offset, 1024);
    }

    #[test]
    fn lpt_puts_largest_first_on_least_loaded() {
        let needs = [need(1, 1, 5), need(1, 1, 9), need(1, 1, 4), need(1, 1, 3)];
        let p = make_plan(
            &needs,
            &PlanOptions::new(2, Assign::Lpt, ScratchMode::Shared),
        )
        .unwrap();
        assert_eq!(p.issue_order, [1, 0, 2, 3]);
        // 9 -> s0; 5 -> s1; 4 -> s1 (5 < 9); 3 -> s0 (9 = 9, lower index).
        let streams: Vec<u32> = p.builds.iter().map(|b| b.stream).collect();
        assert_eq!(streams, [1, 0, 1, 0]);
        assert_eq!(p.stream_triangles(), [12, 9]);
    }

    #[test]
    fn issue_orders_change_the_order_not_the_streams() {
        let needs = [need(1, 1, 5), need(1, 1, 9), need(1, 1, 4), need(1, 1, 3)];
        for assign in [Assign::RoundRobin, Assign::Lpt] {
            let mut o = PlanOptions::new(2, assign, ScratchMode::Shared);
            let own = make_plan(&needs, &o).unwrap();
            for (issue, order) in [
                (IssueOrder::BuildOrder, [0, 1, 2, 3]),
                (IssueOrder::LargestFirst, [1, 0, 2, 3]),
            ] {
                o.issue = issue;
                let p = make_plan(&needs, &o).unwrap();
                assert_eq!(p.issue_order, order, "{assign:?} {issue:?}");
                let streams = |p: &BuildPlan| p.builds.iter().map(|b| b.stream).collect::<Vec<_>>();
                assert_eq!(streams(&p), streams(&own), "{assign:?} {issue:?}");
            }
        }
        assert_eq!(IssueOrder::LargestFirst.name(), "largest-first");
    }

    #[test]
    fn lpt_build_weight_spreads_tiny_builds() {
        // One big build and three 1-triangle builds on 2 streams: without a weight, LPT piles
        // every tiny build onto the other stream; a per-build weight far above the big build's
        // triangles makes the count of builds what is balanced.
        let needs = [need(1, 1, 100), need(1, 1, 1), need(1, 1, 1), need(1, 1, 1)];
        let mut o = PlanOptions::new(2, Assign::Lpt, ScratchMode::Shared);
        let p = make_plan(&needs, &o).unwrap();
        assert_eq!(p.stream_builds(1), [1, 2, 3]);
        o.lpt_build_weight = 1000;
        let p = make_plan(&needs, &o).unwrap();
        // Loads 1100, 1001, 1001, 1001: 0 -> s0, 1 -> s1, 2 -> s1 (1001 < 1100), 3 -> s0.
        assert_eq!(p.stream_builds(0), [0, 3]);
        assert_eq!(p.stream_builds(1), [1, 2]);
    }

    #[test]
    fn empty_batch_and_bad_options() {
        let p = make_plan(
            &[],
            &PlanOptions::new(4, Assign::Lpt, ScratchMode::PerStream),
        )
        .unwrap();
        assert_eq!((p.scratch_bytes, p.output_bytes), (0, 0));
        assert_eq!(
            make_plan(&[], &PlanOptions::new(0, Assign::Lpt, ScratchMode::Shared)),
            Err(PlanError::NoStreams)
        );
        let mut o = PlanOptions::new(1, Assign::Lpt, ScratchMode::Shared);
        o.alignment = 96;
        assert_eq!(make_plan(&[], &o), Err(PlanError::BadAlignment(96)));
        assert_eq!(
            make_plan(
                &[need(u64::MAX, 1, 1)],
                &PlanOptions::new(1, Assign::RoundRobin, ScratchMode::Shared)
            ),
            Err(PlanError::Overflow)
        );
    }

    #[test]
    fn overlap_sweep_sees_nested_and_far_reaching_ranges() {
        let iv = |start, end, class, build| Interval {
            start,
            end,
            class,
            build,
        };
        // A long range of class 0 covers a later range of class 1 past a short class-0 one.
        assert_eq!(
            find_overlap(vec![iv(0, 100, 0, 0), iv(10, 20, 0, 1), iv(50, 60, 1, 2)]),
            Some((0, 2))
        );
        // Same class may overlap.
        assert_eq!(find_overlap(vec![iv(0, 100, 0, 0), iv(10, 20, 0, 1)]), None);
        // Touching ranges share no byte; empty ranges hold none.
        assert_eq!(
            find_overlap(vec![iv(0, 10, 0, 0), iv(10, 20, 1, 1), iv(5, 5, 2, 2)]),
            None
        );
        // The furthest-reaching range is of my class, but another class reaches past my start.
        assert_eq!(
            find_overlap(vec![iv(0, 100, 1, 0), iv(1, 50, 0, 1), iv(2, 200, 1, 2)]),
            Some((0, 1))
        );
        assert_eq!(
            find_overlap(vec![iv(0, 40, 0, 0), iv(40, 100, 1, 1), iv(50, 60, 1, 2)]),
            None
        );
        // Three classes, the overlap far behind the furthest-reaching start.
        assert_eq!(
            find_overlap(vec![iv(0, 10, 0, 0), iv(10, 30, 1, 1), iv(20, 25, 2, 2)]),
            Some((1, 2))
        );
    }

    #[test]
    fn grouping_merges_small_groups_only() {
        let t = group_gases(&[500, 2, 0, 3, 1000, 4], &MergeOptions::new(10));
        let groups: Vec<Vec<u32>> = t.gases.iter().map(|g| g.groups.clone()).collect();
        assert_eq!(groups, [vec![0], vec![4], vec![1, 3, 5]]);
        assert_eq!(t.sbt_offsets, [0, 1, 2]);
        assert_eq!(t.record_groups, [0, 4, 1, 3, 5]);
        assert_eq!(t.locate(3), Some((2, 1)));
        assert_eq!(t.locate(2), None);
        assert!(t.gases[2].is_merged());
        assert_eq!(t.gases[1].instance_id(), 4);
    }

    #[test]
    fn grouping_off_is_one_gas_per_nonempty_group() {
        let t = group_gases(&[1, 0, 7], &MergeOptions::new(0));
        let groups: Vec<Vec<u32>> = t.gases.iter().map(|g| g.groups.clone()).collect();
        assert_eq!(groups, [vec![0], vec![2]]);
    }

    #[test]
    fn merged_gases_respect_caps() {
        let o = MergeOptions {
            merge_below: 10,
            max_triangles: 10,
            max_inputs: 3,
        };
        let t = group_gases(&[6, 6, 6, 1, 1, 1, 1], &o);
        let groups: Vec<Vec<u32>> = t.gases.iter().map(|g| g.groups.clone()).collect();
        // 6+6 = 12 >= 10 closes the first; then 6,1,1 hits 3 inputs; then 1,1.
        assert_eq!(groups, [vec![0, 1], vec![2, 3, 4], vec![5, 6]]);
    }
}
