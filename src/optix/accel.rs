//! The batched GAS builder and the IAS over it.
//!
//! What it does, in order (see also `plan` for the decisions, which are pure):
//! 1. [`DeviceGeometry::upload`]: every group's vertices (`float3`) and indices (`uint3`) go into
//!    ONE device allocation, each group at its own aligned offsets, in one copy.
//! 2. [`GasBatch::prepare`]: one OptiX build per GAS of the [`GasTable`] (one GAS per group, or
//!    small groups merged as separate build inputs), `optixAccelComputeMemoryUsage` for each,
//!    then the [`BuildPlan`]: stream, scratch slice and output slice of every build in ONE
//!    scratch and ONE output allocation. The plan is validated before anything is enqueued.
//! 3. [`GasBatch::enqueue`]: every stream waits for the start event of the main stream, the
//!    builds are enqueued in plan order on their streams with no barrier between them, each
//!    stream records its done event, and the main stream waits for all of them: the builds are
//!    ordered before later work by events, never by a device-wide sync.
//! 4. [`Accel::build`]: optionally compaction (compacted sizes read back in one copy, every GAS
//!    compacted into ONE allocation), then the IAS (one instance per GAS, instance id = group id
//!    for a GAS of one group, `sbtOffset` = the GAS's first hit record), built on the main stream
//!    after the builds' events.
//!
//! Every device resource is an RAII buffer, stream or event; memory is freed only after the
//! work that uses it is done (a wait on the stream it was ordered into).

use std::sync::Arc;

use glam::Vec3;
use thiserror::Error;

use super::context::DeviceContext;
use super::cuda::{DeviceBuffer, Event, Gpu, Stream};
use super::error::{CudaError, OptixError};
use super::plan::{
    group_gases, guard_regions, make_plan, validate, written_span, Allocation, Assign, BuildNeed,
    BuildPlan, GasTable, GuardRegion, IssueOrder, MergeOptions, PlanError, PlanOptions,
    ScratchMode, ACCEL_BUFFER_ALIGNMENT, DEFAULT_LPT_BUILD_WEIGHT, MAX_PRIMITIVES_PER_GAS,
};
use super::sys::{
    self, CUdeviceptr, OptixAccelBuildOptions, OptixAccelEmitDesc, OptixBuildInput,
    OptixBuildInputInstanceArray, OptixBuildInputTriangleArray, OptixInstance,
    OptixTraversableHandle,
};
use super::watchdog::{self, Describe, Watch};
use crate::nvtx;
use crate::scene::Scene;

/// A guard region some build wrote, and the span written (offsets within the region).
pub type WrittenGuard = (GuardRegion, (usize, usize));

/// The byte [`GasBatch::arm_guards`] fills the allocations with: not 0, which a build might
/// plausibly write.
pub const GUARD_FILL: u8 = 0xA5;

/// How long [`GasBatch::wait`] waits for a batch of builds before it calls them hung. The
/// builds measured take well under a second (docs/gas-builds.md); a batch that has not
/// finished after a minute is not going to, and an error naming it beats a process blocked
/// for ever.
pub const BUILD_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The environment variable that replaces [`BUILD_WAIT_LIMIT`] (seconds, a positive number): a
/// check of the watchdog itself need not wait a minute for a batch known to hang.
pub const BUILD_WAIT_ENV: &str = "GASWORKS_BUILD_WAIT_S";

/// [`BUILD_WAIT_LIMIT`], or the seconds [`BUILD_WAIT_ENV`] gives. A value that is not a
/// positive number of seconds is reported (once per wait) and the default kept: a typo must
/// not turn the watchdog off.
pub fn build_wait_limit() -> std::time::Duration {
    watchdog::limit_from_env(BUILD_WAIT_ENV, BUILD_WAIT_LIMIT)
}

/// How long past [`build_wait_limit`] the watchdog gives [`GasBatch::wait`] (whose own poll
/// reports a batch that never finishes) and a process on its way out after that report: a
/// quarter of the limit, at least 2 s.
pub fn watchdog_grace(limit: std::time::Duration) -> std::time::Duration {
    (limit / 4).max(std::time::Duration::from_secs(2))
}

/// Errors of the acceleration-structure builds; each names what failed.
#[derive(Debug, Error)]
pub enum AccelError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Optix(#[from] OptixError),
    #[error("the GAS build plan is unsafe: {0}")]
    Plan(#[from] PlanError),
    #[error("the scene has no triangles to build")]
    EmptyScene,
    #[error("group {group} has {count} {what}, more than one OptiX build input takes ({limit})")]
    GroupTooLarge {
        group: u32,
        what: &'static str,
        count: u64,
        limit: u64,
    },
    #[error("the scene has {gases} GASes, more than the {limit} instances or instance ids this device allows")]
    TooManyInstances { gases: usize, limit: u64 },
    #[error("{gas} has {count} {what}, more than one GAS may hold on this device ({limit}){hint}")]
    GasTooLarge {
        /// "the GAS of group 3", or "the GAS merging 6 groups (4, 5, 7, 9, ...)".
        gas: String,
        what: &'static str,
        count: u64,
        limit: u64,
        /// How to avoid it, when the merge made it large.
        hint: &'static str,
    },
    #[error("the build plan does not match the builds: {0}")]
    PlanMismatch(String),
    #[error("{what} did not finish within {} s (they take well under a second on the GPUs measured): the GPU or its driver hung; run the batch again under compute-sanitizer, or with other --streams, --assign or --enqueue-threads, to see which part of it does", .limit.as_secs_f64())]
    Hung {
        what: String,
        limit: std::time::Duration,
    },
}

/// How the GASes are built. Plain values of the optix layer, which knows nothing of the command
/// line: `--streams`, `--fast-build`, `--assign`... convert into it in `cli::args`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccelOptions {
    pub streams: u32,
    /// PREFER_FAST_BUILD instead of PREFER_FAST_TRACE.
    pub fast_build: bool,
    pub assign: Assign,
    pub scratch: ScratchMode,
    /// Compact every GAS into one allocation after building.
    pub compact: bool,
    /// Groups under this many triangles are merged into shared GASes (0: off).
    pub merge: MergeOptions,
    /// See [`PlanOptions::lpt_build_weight`].
    pub lpt_build_weight: u64,
    /// See [`PlanOptions::guard_bytes`] (a diagnostic; 0 normally).
    pub guard_bytes: u64,
    /// See [`PlanOptions::issue`] (a diagnostic; [`IssueOrder::Assignment`] normally).
    pub issue: IssueOrder,
    /// Host threads that enqueue the builds (1: the calling thread alone), each owning whole
    /// streams ([`BuildPlan::enqueue_lanes`]). Meant to lift a host-bound enqueue, but
    /// concurrent `optixAccelBuild` calls on one context broke, so the context serialises them
    /// ([`DeviceContext`]'s `accel_lock`): the threads make their calls side by side only when
    /// each stream has its own context ([`BuildContexts::PerStream`]; docs/gas-builds.md).
    pub enqueue_threads: u32,
    /// The OptiX contexts the builds are enqueued through.
    pub contexts: BuildContexts,
}

/// Which OptiX device contexts a batch's `optixAccelBuild` calls go through.
///
/// The batches that crashed or hung through one context (docs/gas-builds.md, known issue)
/// wrote only inside their own ranges; what they share is that context's OptiX-internal state.
/// `PerStream` gives every stream a context of its own, so that no two streams' builds share
/// it, and lets threaded enqueues make their calls side by side (each context has its own
/// lock). Its handles are traced through the main context's IAS and pipeline: a traversable
/// handle is a device address (tests/gpu_build_contexts.rs checks the hits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BuildContexts {
    /// Every build through the context the batch was prepared with.
    #[default]
    Shared,
    /// Stream `i`'s builds through a context of its own, made for the batch.
    PerStream,
}

impl BuildContexts {
    pub fn name(self) -> &'static str {
        match self {
            BuildContexts::Shared => "shared",
            BuildContexts::PerStream => "per-stream",
        }
    }
}

impl Default for AccelOptions {
    fn default() -> Self {
        AccelOptions {
            streams: 8,
            fast_build: false,
            assign: Assign::RoundRobin,
            scratch: ScratchMode::Shared,
            compact: false,
            merge: MergeOptions::new(0),
            // The command line's measured weight, not 0: LPT batches weighted by triangles
            // alone crashed or hung on a GPU (docs/gas-builds.md, known issue).
            lpt_build_weight: DEFAULT_LPT_BUILD_WEIGHT,
            guard_bytes: 0,
            issue: IssueOrder::Assignment,
            enqueue_threads: 1,
            contexts: BuildContexts::Shared,
        }
    }
}

/// `--lpt-build-weight` below which LPT batches crashed or hung on a GPU (see
/// [`AccelOptions::known_risks`]); 5000 and 20000 never did.
pub const LPT_WEIGHT_SEEN_SAFE: u64 = 5000;

impl AccelOptions {
    /// What crashed or hung on a GPU in configurations like this one (docs/gas-builds.md, known
    /// issue), one sentence each; empty for the configurations that never failed (round-robin
    /// in build order through one context, and everything through a context per stream).
    ///
    /// The failures are a race between builds running at once on different streams of ONE
    /// OptiX context, not an overlap in gasworks' plan: the plan's ranges are proven disjoint
    /// ([`validate`]), and the same batches passed with one hardware queue and through a
    /// context per stream ([`BuildContexts::PerStream`]). They are logged before such a batch
    /// is built, so that a crash does not come as a surprise.
    pub fn known_risks(&self) -> Vec<String> {
        if self.streams <= 1 || self.contexts == BuildContexts::PerStream {
            return Vec::new();
        }
        const CURE: &str = "a context per stream (--build-contexts per-stream) ran it cleanly \
                            on an H200 (driver 580, 2026-11-27)";
        let mut risks = Vec::new();
        if self.assign == Assign::Lpt && self.lpt_build_weight < LPT_WEIGHT_SEEN_SAFE {
            risks.push(format!(
                "LPT with a build weight of {} (below {LPT_WEIGHT_SEEN_SAFE}) through one context \
                 crashed (CUDA_ERROR_ILLEGAL_ADDRESS) or hung at 4 to 8 streams on an H100 and \
                 an H200 (driver 580), even on a first batch; weights 5000 and 20000 (the \
                 default) never did, and {CURE}",
                self.lpt_build_weight
            ));
        }
        if self.issue == IssueOrder::LargestFirst {
            risks.push(format!(
                "round-robin streams issued largest first through one context crashed \
                 (CUDA_ERROR_ILLEGAL_ADDRESS) or hung at 8 streams on an H200 (driver 580), \
                 and {CURE}"
            ));
        }
        if self.enqueue_threads > 1 {
            risks.push(format!(
                "{} enqueue threads through one context: 4 threads on 8 streams crashed \
                 (CUDA_ERROR_INVALID_ADDRESS_SPACE) on an H200 (driver 580), and the threads \
                 gain nothing there (one context serialises its optixAccelBuild calls; 16 \
                 streams took 19.5 ms with 4 threads against 15.7 ms with 1); {CURE}, and there \
                 4 threads on 16 streams took 9.07 ms",
                self.enqueue_threads
            ));
        }
        risks
    }

    /// The contexts `--build-contexts auto` (the command line's default) picks: a context per
    /// stream wherever one context is known to fail or to waste the work (more than one
    /// enqueue thread, or an issue order that crashed through one context: [`known_risks`]),
    /// one shared context otherwise.
    ///
    /// Not a context per stream everywhere: with one enqueue thread it was slower at 16 and 32
    /// streams, and every extra context costs its creation and OptiX's memory. With several
    /// enqueue threads it is faster: their calls then run side by side and lift the host-bound
    /// enqueue (the figures: docs/gas-builds.md, step 6b).
    ///
    /// [`known_risks`]: AccelOptions::known_risks
    pub fn suited_contexts(&self) -> BuildContexts {
        let shared = AccelOptions {
            contexts: BuildContexts::Shared,
            ..*self
        };
        if shared.known_risks().is_empty() {
            BuildContexts::Shared
        } else {
            BuildContexts::PerStream
        }
    }

    /// How the builds are enqueued, when not by one thread through one context: "4 enqueue
    /// threads, a context per stream" (what `--build-contexts auto` chose, said where the
    /// backend is described); empty for the plain case.
    pub fn enqueue_description(&self) -> String {
        let mut parts = Vec::new();
        if self.enqueue_threads > 1 {
            parts.push(format!("{} enqueue threads", self.enqueue_threads));
        }
        if self.contexts == BuildContexts::PerStream {
            parts.push("a context per stream".to_string());
        }
        parts.join(", ")
    }

    /// `OptixAccelBuildOptions::buildFlags` of the GAS builds.
    pub fn gas_build_flags(&self) -> u32 {
        let speed = if self.fast_build {
            sys::OPTIX_BUILD_FLAG_PREFER_FAST_BUILD
        } else {
            sys::OPTIX_BUILD_FLAG_PREFER_FAST_TRACE
        };
        if self.compact {
            speed | sys::OPTIX_BUILD_FLAG_ALLOW_COMPACTION
        } else {
            speed
        }
    }

    fn plan_options(&self) -> PlanOptions {
        let mut o = PlanOptions::new(self.streams.max(1), self.assign, self.scratch);
        o.lpt_build_weight = self.lpt_build_weight;
        o.guard_bytes = self.guard_bytes;
        o.issue = self.issue;
        o
    }
}

// ---------------------------------------------------------------------------------------------
// Geometry upload

/// Alignment of every group's vertex and index block in the geometry allocation (OptiX asks for
/// 4-byte alignment of `float3` vertices and `uint3` indices; 16 keeps blocks on vector lines).
pub const GEOMETRY_ALIGNMENT: u64 = 16;

/// Where one group's data sits in the geometry allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupBlock {
    pub vertex_offset: u64,
    pub vertex_count: u32,
    pub index_offset: u64,
    pub triangle_count: u32,
}

/// Byte layout of all groups' vertices and indices in one allocation: per group its vertex
/// block then its index block, each aligned to [`GEOMETRY_ALIGNMENT`]. Pure.
pub fn geometry_layout(counts: &[(u64, u64)]) -> Result<(Vec<GroupBlock>, u64), AccelError> {
    let align = |x: u64| x.div_ceil(GEOMETRY_ALIGNMENT) * GEOMETRY_ALIGNMENT;
    let mut blocks = Vec::with_capacity(counts.len());
    let mut cursor = 0u64;
    for (g, &(vertices, triangles)) in counts.iter().enumerate() {
        let group = g as u32;
        if triangles > MAX_PRIMITIVES_PER_GAS {
            return Err(AccelError::GroupTooLarge {
                group,
                what: "triangles",
                count: triangles,
                limit: MAX_PRIMITIVES_PER_GAS,
            });
        }
        if vertices > u64::from(u32::MAX) {
            return Err(AccelError::GroupTooLarge {
                group,
                what: "vertices",
                count: vertices,
                limit: u64::from(u32::MAX),
            });
        }
        let vertex_offset = cursor;
        cursor = align(vertex_offset + vertices * 12);
        let index_offset = cursor;
        cursor = align(index_offset + triangles * 12);
        blocks.push(GroupBlock {
            vertex_offset,
            vertex_count: vertices as u32,
            index_offset,
            triangle_count: triangles as u32,
        });
    }
    Ok((blocks, cursor))
}

/// What one GAS may hold on a device (`OPTIX_DEVICE_PROPERTY_LIMIT_MAX_*_PER_GAS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GasLimits {
    pub primitives: u64,
    /// Each group of a GAS is one build input with one SBT record.
    pub sbt_records: u64,
}

/// Refuses a GAS table that a device with `limits` cannot build, naming the GAS and its
/// groups. Pure.
pub fn check_gas_limits(table: &GasTable, limits: &GasLimits) -> Result<(), AccelError> {
    for gas in &table.gases {
        let records = gas.groups.len() as u64;
        let (what, count, limit) = if gas.triangles > limits.primitives {
            ("triangles", gas.triangles, limits.primitives)
        } else if records > limits.sbt_records {
            ("groups (SBT records)", records, limits.sbt_records)
        } else {
            continue;
        };
        let (name, hint) = match gas.groups.as_slice() {
            [g] => (format!("the GAS of group {g}"), ""),
            groups => {
                let mut listed: Vec<String> = groups.iter().take(4).map(u32::to_string).collect();
                if groups.len() > 4 {
                    listed.push("...".into());
                }
                (
                    format!(
                        "the GAS merging {} groups ({})",
                        groups.len(),
                        listed.join(", ")
                    ),
                    "; a lower --merge-below merges fewer groups",
                )
            }
        };
        return Err(AccelError::GasTooLarge {
            gas: name,
            what,
            count,
            limit,
            hint,
        });
    }
    Ok(())
}

/// All groups' vertices and indices on the device, in one allocation.
pub struct DeviceGeometry {
    buffer: DeviceBuffer,
    blocks: Vec<GroupBlock>,
    /// Per group, whether its build input lets any-hit programs run (groups with cut-outs,
    /// [`Scene::cutout_groups`]); all false for bare meshes.
    any_hit: Vec<bool>,
}

impl DeviceGeometry {
    /// Lays out and uploads every group of `scene` in one copy on `stream` (waits for it).
    pub fn upload(gpu: &Gpu, stream: &Stream, scene: &Scene) -> Result<DeviceGeometry, AccelError> {
        let meshes: Vec<(&[Vec3], &[[u32; 3]])> = scene
            .groups
            .iter()
            .map(|g| (g.positions.as_slice(), g.indices.as_slice()))
            .collect();
        let mut geometry = Self::upload_meshes(gpu, stream, &meshes)?;
        geometry.any_hit = scene.cutout_groups();
        Ok(geometry)
    }

    /// Uploads meshes (vertices, indices), mesh i becoming "group" i of the geometry.
    pub fn upload_meshes(
        gpu: &Gpu,
        stream: &Stream,
        meshes: &[(&[Vec3], &[[u32; 3]])],
    ) -> Result<DeviceGeometry, AccelError> {
        let counts: Vec<(u64, u64)> = meshes
            .iter()
            .map(|(p, i)| (p.len() as u64, i.len() as u64))
            .collect();
        let (blocks, total) = geometry_layout(&counts)?;
        let _range = nvtx::range_with(|| format!("upload: {} groups, {total} bytes", blocks.len()));
        let mut staging = vec![0u8; total as usize];
        for ((positions, indices), b) in meshes.iter().zip(&blocks) {
            let v: &[u8] = bytemuck::cast_slice(positions);
            staging[b.vertex_offset as usize..b.vertex_offset as usize + v.len()]
                .copy_from_slice(v);
            let i: &[u8] = bytemuck::cast_slice(indices);
            staging[b.index_offset as usize..b.index_offset as usize + i.len()].copy_from_slice(i);
        }
        let mut buffer = gpu.alloc(staging.len())?;
        buffer.upload(stream, 0, &staging)?;
        let any_hit = vec![false; blocks.len()];
        Ok(DeviceGeometry {
            buffer,
            blocks,
            any_hit,
        })
    }

    pub fn blocks(&self) -> &[GroupBlock] {
        &self.blocks
    }

    pub fn bytes(&self) -> u64 {
        self.buffer.len_bytes() as u64
    }

    fn vertex_ptr(&self, group: u32) -> CUdeviceptr {
        self.buffer.device_ptr() + self.blocks[group as usize].vertex_offset
    }

    fn index_ptr(&self, group: u32) -> CUdeviceptr {
        self.buffer.device_ptr() + self.blocks[group as usize].index_offset
    }
}

/// The geometry flags of a build input (one per SBT record; each input has one) of a group
/// without cut-outs: no any-hit programs, so its hits are final at once.
static OPAQUE_FLAGS: [u32; 1] = [sys::OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT];
/// The same for a group with cut-outs: the hit group's any-hit program (the path tracer's
/// alpha test) runs on its candidate hits. The test gives the same answer however often it
/// runs, so OptiX may call it more than once per hit (no REQUIRE_SINGLE_ANYHIT_CALL).
static ANY_HIT_FLAGS: [u32; 1] = [sys::OPTIX_GEOMETRY_FLAG_NONE];

/// The geometry flags of group `group`'s build input.
fn geometry_flags(geometry: &DeviceGeometry, group: u32) -> *const u32 {
    if geometry
        .any_hit
        .get(group as usize)
        .copied()
        .unwrap_or(false)
    {
        ANY_HIT_FLAGS.as_ptr()
    } else {
        OPAQUE_FLAGS.as_ptr()
    }
}

/// The build inputs of one GAS, with the host arrays their pointers refer to.
struct GasInputs {
    /// One vertex-buffer pointer per input: `vertexBuffers` points into this (boxed so that
    /// the addresses stay put when the struct moves).
    _vertex_ptrs: Box<[CUdeviceptr]>,
    inputs: Vec<OptixBuildInput>,
}

// SAFETY: the raw pointers inside `inputs` point into `_vertex_ptrs` (owned, never mutated) and
// the statics OPAQUE_FLAGS and ANY_HIT_FLAGS; nothing is shared mutably.
unsafe impl Send for GasInputs {}
unsafe impl Sync for GasInputs {}

impl GasInputs {
    fn new(geometry: &DeviceGeometry, groups: &[u32]) -> GasInputs {
        let vertex_ptrs: Box<[CUdeviceptr]> =
            groups.iter().map(|&g| geometry.vertex_ptr(g)).collect();
        let inputs = groups
            .iter()
            .enumerate()
            .map(|(i, &g)| {
                let b = geometry.blocks[g as usize];
                OptixBuildInput::triangles(OptixBuildInputTriangleArray {
                    vertex_buffers: &vertex_ptrs[i],
                    num_vertices: b.vertex_count,
                    vertex_format: sys::OPTIX_VERTEX_FORMAT_FLOAT3,
                    vertex_stride_in_bytes: 12,
                    index_buffer: geometry.index_ptr(g),
                    num_index_triplets: b.triangle_count,
                    index_format: sys::OPTIX_INDICES_FORMAT_UNSIGNED_INT3,
                    index_stride_in_bytes: 12,
                    flags: geometry_flags(geometry, g),
                    num_sbt_records: 1,
                    ..Default::default()
                })
            })
            .collect();
        GasInputs {
            _vertex_ptrs: vertex_ptrs,
            inputs,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streams and events

/// The streams the builds run on, and the events that order them. Stream 0 is the main
/// stream: it starts a batch and everything after the batch (compaction, the IAS) runs on it.
pub struct StreamSet {
    streams: Vec<Stream>,
    start: Event,
    done: Vec<Event>,
}

impl StreamSet {
    pub fn new(gpu: &Gpu, count: u32) -> Result<StreamSet, AccelError> {
        let count = count.max(1) as usize;
        let streams = gpu.new_streams(count)?;
        for (i, s) in streams.iter().enumerate() {
            nvtx::name_cuda_stream_handle(s.raw() as usize, &format!("GAS stream {i}"));
        }
        Ok(StreamSet {
            streams,
            start: gpu.new_event(false)?,
            done: (0..count)
                .map(|_| gpu.new_event(false))
                .collect::<Result<_, _>>()?,
        })
    }

    pub fn main(&self) -> &Stream {
        &self.streams[0]
    }

    pub fn len(&self) -> usize {
        self.streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Makes every stream wait for what the main stream has enqueued so far.
    fn fork(&self) -> Result<(), AccelError> {
        self.start.record(self.main())?;
        for s in &self.streams[1..] {
            s.wait(&self.start)?;
        }
        Ok(())
    }

    /// Makes the main stream wait for what every stream has enqueued so far.
    fn join(&self) -> Result<(), AccelError> {
        for (s, e) in self.streams.iter().zip(&self.done).skip(1) {
            e.record(s)?;
            self.main().wait(e)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The batch of GAS builds

/// Everything a batch of GAS builds needs, prepared once and enqueueable many times (the
/// benchmark repeats it): build inputs, memory needs, the validated plan and its two
/// allocations.
pub struct GasBatch {
    ctx: Arc<DeviceContext>,
    /// The contexts the builds are enqueued through: `[ctx]`, or one per stream (see
    /// [`BuildContexts`]); a build on stream `s` uses entry `s % len`.
    build_contexts: Vec<Arc<DeviceContext>>,
    table: GasTable,
    inputs: Vec<GasInputs>,
    build_options: OptixAccelBuildOptions,
    plan: BuildPlan,
    scratch: DeviceBuffer,
    output: DeviceBuffer,
    /// One u64 per build: the compacted sizes OptiX emits (when compacting).
    compacted_sizes: Option<DeviceBuffer>,
    /// Every stream of the last enqueue: dropping the batch waits for each, so that no build
    /// still running loses its memory. Each, not only the main stream: an enqueue that fails
    /// half-way has not joined the others into it.
    in_flight: Vec<Stream>,
    /// See [`AccelOptions::enqueue_threads`].
    enqueue_threads: u32,
    /// Set by [`GasBatch::wait`] when the builds did not finish in time.
    hung: std::sync::atomic::AtomicBool,
    /// How far the last enqueue got, for the watchdog's message.
    progress: Arc<EnqueueProgress>,
    /// The NVTX name of every build ("GAS group 12 stream 3"), for the watchdog's message.
    build_names: Arc<[String]>,
}

/// How far an enqueue got: read by the watchdog's thread while the enqueueing thread may be
/// blocked in the driver, hence atomics only.
#[derive(Debug, Default)]
struct EnqueueProgress {
    /// Builds whose `optixAccelBuild` returned.
    returned: std::sync::atomic::AtomicUsize,
    /// The plan index of the build whose `optixAccelBuild` was called last, plus one (0:
    /// none yet).
    last_called: std::sync::atomic::AtomicUsize,
}

/// Which host calls of a batch a [`Watch`] covers, for its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// [`GasBatch::enqueue`]: the streams' fork and join and every `optixAccelBuild`.
    Enqueue,
    /// [`GasBatch::wait`]: its event's record and queries (its poll reports a batch that does
    /// not finish; this covers calls that do not return).
    Wait,
    /// The way out after [`GasBatch::wait`] found the batch hung.
    WayOut,
    /// Dropping the batch: the wait on its streams before its memory is freed.
    Drop,
}

impl Drop for GasBatch {
    fn drop(&mut self) {
        if self.hung.load(std::sync::atomic::Ordering::Relaxed) {
            // Builds that never finished may still write their scratch and output: leak both
            // rather than free them under a running kernel (or block for ever in the free).
            log::warn!("a hung GAS batch: its scratch and output allocations are left allocated");
            let gpu = self.ctx.gpu().clone();
            for buffer in [&mut self.scratch, &mut self.output] {
                if let Ok(empty) = gpu.alloc(0) {
                    std::mem::forget(std::mem::replace(buffer, empty));
                }
            }
            if let Some(sizes) = self.compacted_sizes.take() {
                std::mem::forget(sizes);
            }
            // Nor destroy a context whose builds may still run.
            std::mem::forget(std::mem::take(&mut self.build_contexts));
            return;
        }
        let limit = build_wait_limit();
        let _watch = (!self.in_flight.is_empty())
            .then(|| self.watch(Watched::Drop, limit + watchdog_grace(limit)));
        for stream in &self.in_flight {
            if let Err(e) = stream.synchronize() {
                super::error::log_release_failure(
                    format_args!("waiting for the GAS builds before freeing their memory"),
                    &e,
                );
            }
        }
    }
}

impl GasBatch {
    /// Builds the inputs, asks OptiX for each build's memory, plans and allocates.
    /// `geometry` must stay alive while the batch is enqueued.
    pub fn prepare(
        ctx: &Arc<DeviceContext>,
        geometry: &DeviceGeometry,
        table: GasTable,
        options: &AccelOptions,
    ) -> Result<GasBatch, AccelError> {
        if table.gases.is_empty() {
            return Err(AccelError::EmptyScene);
        }
        for risk in options.known_risks() {
            log::warn!("{risk}: see docs/gas-builds.md, known issue");
        }
        let build_options = OptixAccelBuildOptions {
            build_flags: options.gas_build_flags(),
            operation: sys::OPTIX_BUILD_OPERATION_BUILD,
            ..Default::default()
        };
        let inputs: Vec<GasInputs> = table
            .gases
            .iter()
            .map(|g| GasInputs::new(geometry, &g.groups))
            .collect();
        let mut needs = Vec::with_capacity(inputs.len());
        for (gas, gi) in table.gases.iter().zip(&inputs) {
            // SAFETY: the host pointers inside the inputs point into `gi` and a static, both
            // alive for the call.
            let sizes = unsafe { ctx.accel_compute_memory_usage(&build_options, &gi.inputs) }?;
            needs.push(BuildNeed {
                temp_bytes: sizes.temp_size_in_bytes as u64,
                output_bytes: sizes.output_size_in_bytes as u64,
                triangles: gas.triangles,
                groups: gas.groups.clone(),
            });
        }
        let plan = make_plan(&needs, &options.plan_options())?;
        let build_contexts = match options.contexts {
            BuildContexts::Shared => vec![ctx.clone()],
            BuildContexts::PerStream => (0..plan.streams.max(1))
                .map(|_| ctx.sibling())
                .collect::<Result<Vec<_>, _>>()?,
        };
        let gpu = ctx.gpu();
        let scratch = gpu.alloc(plan.scratch_bytes as usize)?;
        let output = gpu.alloc(plan.output_bytes as usize)?;
        let compacted_sizes = if options.compact {
            Some(gpu.alloc(8 * plan.builds.len())?)
        } else {
            None
        };
        Ok(GasBatch {
            ctx: ctx.clone(),
            build_contexts,
            table,
            inputs,
            build_options,
            scratch,
            output,
            compacted_sizes,
            in_flight: Vec::new(),
            enqueue_threads: options.enqueue_threads,
            hung: std::sync::atomic::AtomicBool::new(false),
            progress: Arc::default(),
            build_names: plan
                .builds
                .iter()
                .map(|b| gas_range_name(&b.need.groups, b.stream))
                .collect(),
            plan,
        })
    }

    pub fn plan(&self) -> &BuildPlan {
        &self.plan
    }

    /// The context build `i` of the plan (GAS `i` of the table) is enqueued through: the one
    /// that compacts it too.
    pub fn build_context(&self, i: usize) -> &Arc<DeviceContext> {
        let stream = self.plan.builds.get(i).map_or(0, |b| b.stream as usize);
        &self.build_contexts[stream % self.build_contexts.len()]
    }

    /// Every context the builds go through (see [`BuildContexts`]): what must outlive the
    /// GASes they built.
    pub fn build_contexts(&self) -> &[Arc<DeviceContext>] {
        &self.build_contexts
    }

    pub fn table(&self) -> &GasTable {
        &self.table
    }

    /// Total bytes of the GASes as built (before any compaction).
    pub fn output_bytes(&self) -> u64 {
        self.plan.output_bytes
    }

    pub fn scratch_bytes(&self) -> u64 {
        self.plan.scratch_bytes
    }

    /// Enqueues every build on its stream (see the module docs for the ordering) and returns
    /// the GAS handles, one per GAS of the table. Returns before the builds are done; the main
    /// stream is ordered after all of them. The plan is validated again first: a plan that
    /// fails validation is never enqueued.
    pub fn enqueue(
        &mut self,
        streams: &StreamSet,
    ) -> Result<Vec<OptixTraversableHandle>, AccelError> {
        validate(&self.plan)?;
        self.check_matches_plan(streams)?;
        let _batch = nvtx::range_with(|| {
            format!(
                "GAS batch: {} builds on {} streams",
                self.inputs.len(),
                self.plan.streams
            )
        });
        // From here on, builds may be in flight: the batch must outlive them.
        self.in_flight = streams.streams.clone();
        // The host itself may block in here (in optixAccelBuild): the watchdog then ends the
        // process with a message, since no error could ever be returned.
        self.reset_progress();
        let _watch = self.watch(Watched::Enqueue, build_wait_limit());
        streams.fork()?;
        let mut handles = vec![0; self.inputs.len()];
        let lanes = self.plan.enqueue_lanes(self.enqueue_threads);
        if lanes.len() <= 1 {
            for &i in &self.plan.issue_order {
                handles[i] = self.enqueue_one(i, streams)?;
            }
        } else {
            self.enqueue_lanes_threaded(&lanes, streams, &mut handles)?;
        }
        streams.join()?;
        Ok(handles)
    }

    /// The checks of [`GasBatch::enqueue`] beyond [`validate`]: the plan has one build per
    /// GAS, no more streams than exist, and the totals the allocations were made for.
    fn check_matches_plan(&self, streams: &StreamSet) -> Result<(), AccelError> {
        if self.plan.builds.len() != self.inputs.len() {
            return Err(AccelError::PlanMismatch(format!(
                "{} planned builds for {} GASes",
                self.plan.builds.len(),
                self.inputs.len()
            )));
        }
        if self.plan.streams as usize > streams.len() {
            return Err(AccelError::PlanMismatch(format!(
                "the plan uses {} streams, {} exist",
                self.plan.streams,
                streams.len()
            )));
        }
        if self.scratch.len_bytes() as u64 != self.plan.scratch_bytes
            || self.output.len_bytes() as u64 != self.plan.output_bytes
        {
            return Err(AccelError::PlanMismatch(
                "allocations differ from the planned totals".into(),
            ));
        }
        Ok(())
    }

    /// Zeroes the enqueue progress the watchdog's message reports.
    fn reset_progress(&self) {
        self.progress
            .returned
            .store(0, std::sync::atomic::Ordering::Relaxed);
        self.progress
            .last_called
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// Enqueues the builds of `lanes` (from [`BuildPlan::enqueue_lanes`]) on one thread per
    /// lane and writes each build's handle into `handles`.
    fn enqueue_lanes_threaded(
        &self,
        lanes: &[Vec<usize>],
        streams: &StreamSet,
        handles: &mut [OptixTraversableHandle],
    ) -> Result<(), AccelError> {
        // One scoped thread per lane, each enqueueing whole streams; every thread is
        // joined before the streams are, so the join orders after every build. On an
        // error the other lanes still finish enqueueing (their builds are valid), and the
        // first error is returned.
        let this = self;
        let results: Vec<Result<Vec<(usize, OptixTraversableHandle)>, AccelError>> =
            std::thread::scope(|scope| {
                let threads: Vec<_> = lanes
                    .iter()
                    .map(|lane| {
                        scope.spawn(move || {
                            lane.iter()
                                .map(|&i| Ok((i, this.enqueue_one(i, streams)?)))
                                .collect()
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    // A panic in a lane is a bug in this code: passed on as it is.
                    .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            });
        for lane in results {
            for (i, h) in lane? {
                handles[i] = h;
            }
        }
        Ok(())
    }

    /// Enqueues build `i` of the plan on its stream, at its ranges. Takes `&self`: the lanes
    /// of a threaded enqueue call it at once, each for builds of its own streams.
    fn enqueue_one(
        &self,
        i: usize,
        streams: &StreamSet,
    ) -> Result<OptixTraversableHandle, AccelError> {
        let b = &self.plan.builds[i];
        let stream = &streams.streams[b.stream as usize];
        // Named lazily: the benchmark enqueues thousands of builds per second.
        let _range = nvtx::range_with(|| gas_range_name(&b.need.groups, b.stream));
        self.progress
            .last_called
            .store(i + 1, std::sync::atomic::Ordering::Relaxed);
        let scratch = self
            .scratch
            .slice(b.scratch.offset as usize, b.scratch.len as usize)?;
        let output = self
            .output
            .slice(b.output.offset as usize, b.output.len as usize)?;
        let emit: Vec<OptixAccelEmitDesc> = match &self.compacted_sizes {
            Some(sizes) => vec![OptixAccelEmitDesc {
                result: sizes.device_ptr() + 8 * i as u64,
                type_: sys::OPTIX_PROPERTY_TYPE_COMPACTED_SIZE,
            }],
            None => Vec::new(),
        };
        // SAFETY: the inputs' host arrays live in `self.inputs`; the geometry they name is
        // alive and unchanged (the caller's contract); scratch and output are slices of live
        // allocations, aligned and sized by the validated plan, and no build that can run at
        // once shares a byte with them (validate proved it); the emitted size goes to a live,
        // 8-byte aligned slot of its own. Each lane's builds are on streams no other lane
        // touches, and each context serialises the calls made through it (concurrent ones
        // broke, whatever the OptiX guide says of its host API's thread safety);
        // with a context per stream, lanes call through contexts no other lane uses.
        let handle = unsafe {
            self.build_context(i).accel_build(
                stream,
                &self.build_options,
                &self.inputs[i].inputs,
                scratch,
                output,
                &emit,
            )
        }?;
        self.progress
            .returned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(handle)
    }

    /// "390 GAS builds on 8 streams (Shared scratch, 1 enqueue thread)": the batch, for
    /// messages.
    fn describe_batch(&self) -> String {
        let contexts = if Arc::ptr_eq(&self.build_contexts[0], &self.ctx) {
            String::new()
        } else {
            format!(", {} OptiX contexts", self.build_contexts.len())
        };
        format!(
            "{} GAS builds on {} streams ({:?} scratch, {} enqueue thread{}{contexts})",
            self.plan.builds.len(),
            self.plan.streams,
            self.plan.scratch_mode,
            self.enqueue_threads.max(1),
            if self.enqueue_threads > 1 { "s" } else { "" }
        )
    }

    /// Arms the [`watchdog::global`] watchdog over the host calls `what` for `limit`; its
    /// message names the batch, the calls and, for an enqueue, how far it got.
    fn watch(&self, what: Watched, limit: std::time::Duration) -> Watch {
        let batch = self.describe_batch();
        let progress = self.progress.clone();
        let names = self.build_names.clone();
        let describe: Describe =
            Box::new(move || watchdog_message(&batch, what, limit, &progress, &names));
        watchdog::global().arm(limit, describe)
    }

    /// Waits for every build enqueued so far (the main stream, which they joined), at most
    /// [`build_wait_limit`] ([`BUILD_WAIT_LIMIT`] unless [`BUILD_WAIT_ENV`] says otherwise):
    /// past it, [`AccelError::Hung`] names the batch instead of blocking for ever.
    ///
    /// The event calls themselves are watched too (the watchdog, past the limit and a grace):
    /// should one of them never return, the process ends with a message instead. After a
    /// `Hung` error the watch stays armed for another grace: a process whose way out blocks
    /// in the driver is ended with a message, not left hanging.
    pub fn wait(&self, streams: &StreamSet) -> Result<(), AccelError> {
        let limit = build_wait_limit();
        let grace = watchdog_grace(limit);
        let watch = self.watch(Watched::Wait, limit + grace);
        let done = self.ctx.gpu().new_event(false)?;
        done.record(streams.main())?;
        if done.wait_within(limit)? {
            return Ok(());
        }
        drop(watch);
        // What is left of a hung batch must not be waited for or freed (freeing device memory
        // waits for the device): `Drop` leaks it. The error is also written out at once:
        // whatever the caller frees on the way out may block for good, and would keep it
        // from ever being printed.
        self.hung.store(true, std::sync::atomic::Ordering::Relaxed);
        let error = AccelError::Hung {
            what: self.describe_batch(),
            limit,
        };
        crate::console::write_whole(format_args!(
            "error: {error} (said now: while the GPU is hung this process may never get to exit)"
        ));
        self.watch(Watched::WayOut, grace).keep_armed();
        Err(error)
    }

    /// Keeps the GASes' allocation and frees the rest (the scratch) once every build enqueued
    /// so far is done: waits for `main`, which the builds joined into.
    pub fn into_output(mut self, streams: &StreamSet) -> Result<DeviceBuffer, AccelError> {
        self.wait(streams)?;
        let empty = self.ctx.gpu().alloc(0)?;
        Ok(std::mem::replace(&mut self.output, empty))
    }

    /// Fills both allocations with [`GUARD_FILL`] (and waits), so that [`GasBatch::written_guards`]
    /// can tell afterwards whether any build wrote outside its ranges. Call before enqueueing.
    pub fn arm_guards(&mut self, stream: &Stream) -> Result<(), AccelError> {
        self.scratch.fill(stream, GUARD_FILL)?;
        self.output.fill(stream, GUARD_FILL)?;
        stream.synchronize()?;
        Ok(())
    }

    /// The guard regions ([`guard_regions`]) some build wrote since [`GasBatch::arm_guards`],
    /// each with the span written, as offsets within the region. Waits for every build
    /// enqueued so far (the main stream, which they joined).
    pub fn written_guards(&self, streams: &StreamSet) -> Result<Vec<WrittenGuard>, AccelError> {
        self.wait(streams)?;
        let scratch: Vec<u8> =
            self.scratch
                .download(streams.main(), 0, self.scratch.len_bytes())?;
        let output: Vec<u8> = self
            .output
            .download(streams.main(), 0, self.output.len_bytes())?;
        let mut written = Vec::new();
        for g in guard_regions(&self.plan) {
            let bytes = match g.allocation {
                Allocation::Scratch => &scratch,
                Allocation::Output => &output,
            };
            let region = bytes.get(g.start as usize..g.end as usize).unwrap_or(&[]);
            if let Some(span) = written_span(region, GUARD_FILL) {
                written.push((g, span));
            }
        }
        Ok(written)
    }

    /// The names of a guard region's builds, for messages: "group 12", "groups 4+17".
    pub fn describe_guard(&self, g: &GuardRegion, span: (usize, usize)) -> String {
        let who: Vec<String> = g
            .builds
            .iter()
            .filter_map(|&b| self.plan.builds.get(b))
            .map(|b| gas_range_name(&b.need.groups, b.stream))
            .collect();
        let what = match g.allocation {
            Allocation::Scratch => "scratch",
            Allocation::Output => "output",
        };
        format!(
            "{what} bytes {}..={} after the range of {} (its guard region is {} bytes at offset {})",
            span.0,
            span.1,
            who.join(", "),
            g.end - g.start,
            g.start
        )
    }

    /// The compacted size of every GAS, read back in one copy on the main stream (which waits
    /// for the builds). `None` unless built with compaction.
    pub fn read_compacted_sizes(
        &self,
        streams: &StreamSet,
    ) -> Result<Option<Vec<u64>>, AccelError> {
        match &self.compacted_sizes {
            Some(buffer) => Ok(Some(buffer.download::<u64>(
                streams.main(),
                0,
                self.plan.builds.len(),
            )?)),
            None => Ok(None),
        }
    }
}

/// What the watchdog says of a batch whose watched host calls did not return within `limit`.
/// Pure (but for the atomics it reads), so that its wording is tested without a GPU.
fn watchdog_message(
    batch: &str,
    what: Watched,
    limit: std::time::Duration,
    progress: &EnqueueProgress,
    names: &[String],
) -> String {
    let secs = limit.as_secs_f64();
    let advice = "the GPU or its driver hung; run the batch again under compute-sanitizer, \
                  or with other --streams, --assign or --enqueue-threads, to see which part of it does";
    match what {
        Watched::Enqueue => {
            let returned = progress.returned.load(std::sync::atomic::Ordering::Relaxed);
            let last = progress
                .last_called
                .load(std::sync::atomic::Ordering::Relaxed);
            let call = match last.checked_sub(1).and_then(|i| names.get(i)) {
                Some(name) if returned < names.len() => {
                    format!("; the last optixAccelBuild called: {name}")
                }
                _ => String::new(),
            };
            format!(
                "{batch}: the host was blocked for {secs} s inside their enqueue, which takes \
                 milliseconds ({returned} of {} optixAccelBuild calls returned{call}); {advice}",
                names.len()
            )
        }
        Watched::Wait => format!(
            "{batch}: the host was blocked for {secs} s inside the wait for them (a CUDA event \
             call that did not return); {advice}"
        ),
        Watched::WayOut => format!(
            "{batch}: the batch hung (said above), and {secs} s later the process was still \
             blocked on its way out"
        ),
        Watched::Drop => format!(
            "{batch}: the host was blocked for {secs} s waiting for them before freeing their \
             memory; {advice}"
        ),
    }
}

/// The NVTX name of one GAS build: "GAS group 12 stream 3", or for a merged GAS
/// "GAS groups 4+17 stream 0" (first group, and how many more). Pure.
pub fn gas_range_name(groups: &[u32], stream: u32) -> String {
    match groups {
        [] => format!("GAS (no groups) stream {stream}"),
        [g] => format!("GAS group {g} stream {stream}"),
        [g, rest @ ..] => format!("GAS groups {g}+{} stream {stream}", rest.len()),
    }
}

/// Offsets of the compacted GASes in one allocation, each aligned, and the total. Pure.
pub fn compacted_layout(sizes: &[u64]) -> (Vec<u64>, u64) {
    let mut offsets = Vec::with_capacity(sizes.len());
    let mut cursor = 0u64;
    for &s in sizes {
        offsets.push(cursor);
        cursor += s.div_ceil(ACCEL_BUFFER_ALIGNMENT) * ACCEL_BUFFER_ALIGNMENT;
    }
    (offsets, cursor)
}

/// The IAS instances: one per GAS, identity transform, instance id from the table, `sbtOffset`
/// = the GAS's first hit record. Pure.
///
/// The identity transform is a contract with the device code: `ptx/pathtrace.cu` shades with
/// the hit data's object-space positions and normals and never applies an object-to-world
/// transform. An instance with another transform needs that added there first.
pub fn make_instances(table: &GasTable, handles: &[OptixTraversableHandle]) -> Vec<OptixInstance> {
    table
        .gases
        .iter()
        .zip(handles)
        .enumerate()
        .map(|(g, (gas, &handle))| OptixInstance {
            transform: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            instance_id: gas.instance_id(),
            sbt_offset: table.sbt_offsets[g],
            visibility_mask: 0xff,
            flags: sys::OPTIX_INSTANCE_FLAG_NONE,
            traversable_handle: handle,
            pad: [0; 2],
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The whole acceleration structure

/// Sizes reported after a build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccelStats {
    pub groups: usize,
    pub gases: usize,
    pub triangles: u64,
    pub scratch_bytes: u64,
    /// GAS bytes as built.
    pub output_bytes: u64,
    /// GAS bytes after compaction (when compacted).
    pub compacted_bytes: Option<u64>,
    pub ias_bytes: u64,
}

/// The scene's GASes and the IAS over them, ready to trace.
pub struct Accel {
    handle: OptixTraversableHandle,
    table: GasTable,
    stats: AccelStats,
    streams: StreamSet,
    // The memory the structures live in, kept until drop (Drop waits for the main stream).
    // Scratch memory and the uploaded triangles are freed once the build is done: a GAS does
    // not refer to its build inputs.
    _gas: DeviceBuffer,
    _ias: DeviceBuffer,
    _instances: DeviceBuffer,
    /// The contexts the GASes were built (and compacted) through, kept as long as the GASes:
    /// [`BuildContexts::PerStream`] makes contexts of the batch's own.
    _build_contexts: Vec<Arc<DeviceContext>>,
}

impl Accel {
    /// Uploads the scene, builds every GAS across `options.streams` streams, compacts when
    /// asked, and builds the IAS. Returns when the IAS is built (it waits for the main stream,
    /// then frees the scratch memory and the uploaded triangles).
    pub fn build(
        ctx: &Arc<DeviceContext>,
        scene: &Scene,
        options: &AccelOptions,
    ) -> Result<Accel, AccelError> {
        let gpu = ctx.gpu().clone();
        let streams = StreamSet::new(&gpu, options.streams)?;
        let geometry = DeviceGeometry::upload(&gpu, streams.main(), scene)?;
        let tris: Vec<u64> = scene
            .groups
            .iter()
            .map(|g| g.indices.len() as u64)
            .collect();
        let table = group_gases(&tris, &options.merge);
        check_device_limits(ctx, scene, &table)?;
        let mut batch = GasBatch::prepare(ctx, &geometry, table.clone(), options)?;
        let mut handles = batch.enqueue(&streams)?;
        let mut stats = AccelStats {
            groups: scene.groups.len(),
            gases: table.gases.len(),
            triangles: scene.triangle_count() as u64,
            scratch_bytes: batch.scratch_bytes(),
            output_bytes: batch.output_bytes(),
            ..Default::default()
        };

        // A hung build is an error that names the batch, not a wait for ever.
        batch.wait(&streams)?;
        // What follows (compaction, the IAS, their waits) takes milliseconds too: should a
        // call of it never return, the watchdog says so, as for the batch.
        let _watch = watch_compaction_and_ias(table.gases.len());
        let build_contexts = batch.build_contexts().to_vec();
        let gas = match batch.read_compacted_sizes(&streams)? {
            Some(sizes) => {
                let _range = nvtx::range_with(|| format!("compact: {} GASes", sizes.len()));
                let (compacted, total) =
                    compact_gases(&gpu, &batch, &streams, &mut handles, &sizes)?;
                stats.compacted_bytes = Some(total);
                drop(batch);
                compacted
            }
            // The batch's output allocation holds the GASes: keep it; the scratch goes once
            // the builds are done (below).
            None => batch.into_output(&streams)?,
        };

        let _range = nvtx::range_with(|| format!("IAS: {} instances", handles.len()));
        let instances = make_instances(&table, &handles);
        // The instance array depends only on host values, so it goes up on its own stream,
        // while the builds may still be running.
        // Owned here: it is destroyed only when `build` returns, after the waits below.
        let upload_stream = gpu.new_stream()?;
        let ias = build_ias(ctx, &gpu, &upload_stream, streams.main(), &instances)?;
        stats.ias_bytes = ias.output_bytes;
        // Scratch and triangles may be freed only once the builds that read them are done.
        streams.main().synchronize()?;
        drop(ias.scratch);
        drop(geometry);
        Ok(Accel {
            handle: ias.handle,
            table,
            stats,
            streams,
            _gas: gas,
            _ias: ias.output,
            _instances: ias.instances,
            _build_contexts: build_contexts,
        })
    }

    /// The IAS: what a launch traces against.
    pub fn handle(&self) -> OptixTraversableHandle {
        self.handle
    }

    /// The GASes and the group of every hit SBT record.
    pub fn table(&self) -> &GasTable {
        &self.table
    }

    pub fn stats(&self) -> &AccelStats {
        &self.stats
    }

    /// The main stream: launches here are ordered before the structures are freed.
    pub fn stream(&self) -> &Stream {
        self.streams.main()
    }
}

/// Fails when the table has more GASes (or the scene more groups) than the device's IAS
/// takes, or a GAS more triangles or SBT records than the device's limits per GAS.
fn check_device_limits(
    ctx: &DeviceContext,
    scene: &Scene,
    table: &GasTable,
) -> Result<(), AccelError> {
    // A failed query is the driver's error to report, not "no limit".
    let max_id = ctx.property_u32(sys::OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCE_ID)?;
    let max_instances = ctx.property_u32(sys::OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCES_PER_IAS)?;
    let limit = u64::from(max_id.min(max_instances));
    if table.gases.len() as u64 > limit || scene.groups.len() as u64 > u64::from(max_id) + 1 {
        return Err(AccelError::TooManyInstances {
            gases: table.gases.len(),
            limit,
        });
    }
    // The device's own limits: a merged GAS (`--merge-below`) can grow past them even
    // when every group fits.
    let limits = GasLimits {
        primitives: ctx
            .property_u32(sys::OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS)?
            .into(),
        sbt_records: ctx
            .property_u32(sys::OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_RECORDS_PER_GAS)?
            .into(),
    };
    check_gas_limits(table, &limits)
}

/// Arms the [`watchdog::global`] watchdog over the compaction and IAS build that follow a
/// batch of `gases` GAS builds.
fn watch_compaction_and_ias(gases: usize) -> Watch {
    let limit = build_wait_limit();
    watchdog::global().arm(
        limit + watchdog_grace(limit),
        Box::new(move || {
            format!(
                "the compaction and IAS build after {gases} GAS builds: the host was blocked \
                 for {} s in them, which take milliseconds; the GPU or its driver hung",
                (limit + watchdog_grace(limit)).as_secs_f64()
            )
        }),
    )
}

/// Compacts every GAS of `batch` (compacted sizes `sizes`) into one new allocation on the
/// main stream, replaces `handles` with the compacted ones, and waits for it. Returns the
/// allocation and its size.
fn compact_gases(
    gpu: &Gpu,
    batch: &GasBatch,
    streams: &StreamSet,
    handles: &mut [OptixTraversableHandle],
    sizes: &[u64],
) -> Result<(DeviceBuffer, u64), AccelError> {
    let (offsets, total) = compacted_layout(sizes);
    let compacted = gpu.alloc(total as usize)?;
    let compacting = compact_each(batch, streams, handles, &compacted, &offsets, sizes);
    // The uncompacted GASes may only be freed once compaction has read them, and
    // `compacted` (on an error) once no compaction still writes into it.
    let synced = streams.main().synchronize();
    compacting?;
    synced?;
    Ok((compacted, total))
}

/// Enqueues the compaction of GAS `i` into `compacted` at `offsets[i]`, for every GAS in
/// order, stopping at the first error.
fn compact_each(
    batch: &GasBatch,
    streams: &StreamSet,
    handles: &mut [OptixTraversableHandle],
    compacted: &DeviceBuffer,
    offsets: &[u64],
    sizes: &[u64],
) -> Result<(), AccelError> {
    for (i, h) in handles.iter_mut().enumerate() {
        let slot = compacted.slice(offsets[i] as usize, sizes[i] as usize)?;
        // SAFETY: the GAS was built before this on the main stream (it waited
        // for every build's event, and read_compacted_sizes synchronised it);
        // `slot` is an aligned slice of a live allocation that nothing else
        // uses.
        *h = unsafe {
            batch
                .build_context(i)
                .accel_compact(streams.main(), *h, slot)
        }?;
    }
    Ok(())
}

/// The IAS as [`build_ias`] leaves it: enqueued on the main stream, not yet built.
struct IasBuild {
    handle: OptixTraversableHandle,
    output: DeviceBuffer,
    output_bytes: u64,
    /// Free only once the main stream has built the IAS.
    scratch: DeviceBuffer,
    instances: DeviceBuffer,
}

/// Uploads `instances` on `upload_stream` and enqueues the IAS over them on `main`.
fn build_ias(
    ctx: &DeviceContext,
    gpu: &Gpu,
    upload_stream: &Stream,
    main: &Stream,
    instances: &[OptixInstance],
) -> Result<IasBuild, AccelError> {
    let instances_buffer = gpu.upload(upload_stream, instances)?;
    let ias_input = [OptixBuildInput::instances(OptixBuildInputInstanceArray {
        instances: instances_buffer.device_ptr(),
        num_instances: instances.len() as u32,
        instance_stride: 0,
    })];
    let ias_options = OptixAccelBuildOptions {
        build_flags: sys::OPTIX_BUILD_FLAG_PREFER_FAST_TRACE,
        operation: sys::OPTIX_BUILD_OPERATION_BUILD,
        ..Default::default()
    };
    // SAFETY: the input holds no host pointers.
    let sizes = unsafe { ctx.accel_compute_memory_usage(&ias_options, &ias_input) }?;
    let ias_scratch = gpu.alloc(sizes.temp_size_in_bytes)?;
    let ias = gpu.alloc(sizes.output_size_in_bytes)?;
    // SAFETY: the main stream is ordered after every GAS build (join) and compaction; the
    // instance buffer is uploaded (synchronously) and lives in the returned Accel, as do
    // the IAS scratch and output, used by nothing else.
    let handle = unsafe {
        ctx.accel_build(
            main,
            &ias_options,
            &ias_input,
            ias_scratch.as_slice(),
            ias.as_slice(),
            &[],
        )
    }?;
    Ok(IasBuild {
        handle,
        output: ias,
        output_bytes: sizes.output_size_in_bytes as u64,
        scratch: ias_scratch,
        instances: instances_buffer,
    })
}

impl Drop for Accel {
    fn drop(&mut self) {
        // The buffers must outlive the work that uses them: wait for everything on the main
        // stream (launches that trace the IAS run there) before they are freed.
        if let Err(e) = self.streams.main().synchronize() {
            super::error::log_release_failure(
                format_args!("waiting for the acceleration structures before freeing them"),
                &e,
            );
        }
    }
}

/// The whole scene as one mesh (all groups' vertices, indices rebased): the single-GAS
/// reference of build-bench. Pure.
pub fn concat_mesh(scene: &Scene) -> (Vec<Vec3>, Vec<[u32; 3]>) {
    let mut positions = Vec::with_capacity(scene.groups.iter().map(|g| g.positions.len()).sum());
    let mut indices = Vec::with_capacity(scene.triangle_count());
    for g in &scene.groups {
        let base = positions.len() as u32;
        positions.extend_from_slice(&g.positions);
        indices.extend(g.indices.iter().map(|t| t.map(|i| i + base)));
    }
    (positions, indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Group, Material};

    #[test]
    fn geometry_blocks_are_aligned_disjoint_and_in_order() {
        let (blocks, total) = geometry_layout(&[(3, 1), (5, 2), (0, 0), (4, 2)]).unwrap();
        let mut end = 0;
        for b in &blocks {
            assert_eq!(b.vertex_offset % GEOMETRY_ALIGNMENT, 0);
            assert_eq!(b.index_offset % GEOMETRY_ALIGNMENT, 0);
            assert!(b.vertex_offset >= end);
            assert!(b.index_offset >= b.vertex_offset + 12 * b.vertex_count as u64);
            end = b.index_offset + 12 * b.triangle_count as u64;
        }
        assert!(end <= total);
        assert_eq!(blocks[0].index_offset, 48); // 36 bytes of vertices, aligned up
        assert_eq!(blocks[1].vertex_offset, 64);
    }

    #[test]
    fn gases_past_the_device_limits_are_refused_by_name() {
        let limits = GasLimits {
            primitives: 100,
            sbt_records: 3,
        };
        // Group 0 alone fits exactly; groups 1..=5 (10 triangles each) merge into GASes of at
        // most 4 inputs and 100 triangles.
        let merge = |max_triangles, max_inputs| MergeOptions {
            merge_below: 50,
            max_triangles,
            max_inputs,
        };
        let tris = [100, 10, 10, 10, 10, 10];
        let fits = group_gases(&tris, &merge(30, 3));
        assert!(check_gas_limits(&fits, &limits).is_ok());

        let too_many_inputs = group_gases(&tris, &merge(1000, 4));
        let err = check_gas_limits(&too_many_inputs, &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the GAS merging 4 groups (1, 2, 3, 4) has 4 groups (SBT records), more than one GAS \
             may hold on this device (3); a lower --merge-below merges fewer groups"
        );

        let tris = [101, 10];
        let err = check_gas_limits(&group_gases(&tris, &merge(30, 3)), &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the GAS of group 0 has 101 triangles, more than one GAS may hold on this device (100)"
        );

        let tris = [60, 60, 60, 60, 60, 60];
        let big_merge = MergeOptions {
            merge_below: 1000,
            max_triangles: 1000,
            max_inputs: 3,
        };
        let err = check_gas_limits(&group_gases(&tris, &big_merge), &limits).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the GAS merging 3 groups (0, 1, 2) has 180 triangles"),
            "{err}"
        );
    }

    #[test]
    fn oversized_groups_are_refused() {
        assert!(matches!(
            geometry_layout(&[(3, 1), (3, MAX_PRIMITIVES_PER_GAS + 1)]),
            Err(AccelError::GroupTooLarge {
                group: 1,
                what: "triangles",
                ..
            })
        ));
        assert!(matches!(
            geometry_layout(&[(1 << 33, 1)]),
            Err(AccelError::GroupTooLarge {
                group: 0,
                what: "vertices",
                ..
            })
        ));
    }

    #[test]
    fn the_watchdog_names_the_batch_and_how_far_its_enqueue_got() {
        use std::sync::atomic::Ordering::Relaxed;
        let batch = "390 GAS builds on 4 streams (Shared scratch, 1 enqueue thread)";
        let names: Vec<String> = (0..390).map(|g| gas_range_name(&[g], g % 4)).collect();
        let limit = std::time::Duration::from_secs(10);
        let progress = EnqueueProgress::default();
        progress.returned.store(37, Relaxed);
        progress.last_called.store(38, Relaxed);
        let text = watchdog_message(batch, Watched::Enqueue, limit, &progress, &names);
        assert!(
            text.starts_with(
                "390 GAS builds on 4 streams (Shared scratch, 1 enqueue thread): the host was \
                 blocked for 10 s inside their enqueue, which takes milliseconds (37 of 390 \
                 optixAccelBuild calls returned; the last optixAccelBuild called: GAS group 37 \
                 stream 1); the GPU or its driver hung"
            ),
            "{text}"
        );
        // Every build call returned (the host is blocked in the streams' join), or none was
        // made yet (in their fork): no build is named.
        for calls in [390, 0] {
            progress.returned.store(calls, Relaxed);
            progress.last_called.store(calls, Relaxed);
            let text = watchdog_message(batch, Watched::Enqueue, limit, &progress, &names);
            let says = format!("({calls} of 390 optixAccelBuild calls returned)");
            assert!(text.contains(&says), "{text}");
        }
        for (what, says) in [
            (Watched::Wait, "inside the wait for them"),
            (Watched::WayOut, "still blocked on its way out"),
            (Watched::Drop, "before freeing their memory"),
        ] {
            let text = watchdog_message(batch, what, limit, &progress, &names);
            assert!(text.starts_with(batch) && text.contains(says), "{text}");
        }
    }

    #[test]
    fn the_watchdog_waits_past_the_waits_own_limit() {
        for secs in [0.5, 10.0, 60.0, 600.0] {
            let limit = std::time::Duration::from_secs_f64(secs);
            let grace = watchdog_grace(limit);
            assert!(grace >= std::time::Duration::from_secs(2) && grace >= limit / 4);
        }
    }

    #[test]
    fn a_hung_batch_is_named_with_the_wait() {
        let e = AccelError::Hung {
            what: "390 GAS builds on 8 streams (Shared scratch, 1 enqueue thread)".into(),
            limit: BUILD_WAIT_LIMIT,
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "390 GAS builds on 8 streams (Shared scratch, 1 enqueue thread) did not finish within 60 s"
            ),
            "{text}"
        );
        assert!(text.contains("compute-sanitizer"), "{text}");
    }

    #[test]
    fn configurations_that_failed_on_a_gpu_are_named() {
        let quiet = AccelOptions::default();
        assert!(quiet.known_risks().is_empty(), "{:?}", quiet.known_risks());
        let lpt = |w| AccelOptions {
            assign: Assign::Lpt,
            lpt_build_weight: w,
            ..AccelOptions::default()
        };
        assert!(lpt(DEFAULT_LPT_BUILD_WEIGHT).known_risks().is_empty());
        assert!(lpt(LPT_WEIGHT_SEEN_SAFE).known_risks().is_empty());
        let risks = lpt(1000).known_risks();
        assert_eq!(risks.len(), 1);
        assert!(risks[0].contains("build weight of 1000"), "{risks:?}");
        // One stream: nothing runs at once, nothing to warn of.
        assert!(AccelOptions {
            streams: 1,
            ..lpt(0)
        }
        .known_risks()
        .is_empty());
        let all = AccelOptions {
            issue: IssueOrder::LargestFirst,
            enqueue_threads: 4,
            ..lpt(0)
        };
        assert_eq!(all.known_risks().len(), 3, "{:?}", all.known_risks());
        // Threads through one context are said to gain nothing, and the cure is named.
        let threads = |contexts| AccelOptions {
            enqueue_threads: 2,
            contexts,
            ..AccelOptions::default()
        };
        let shared = threads(BuildContexts::Shared).known_risks();
        assert!(shared[0].contains("gain nothing there"), "{shared:?}");
        assert!(
            shared[0].contains("--build-contexts per-stream"),
            "{shared:?}"
        );
        // Through a context per stream every one of them ran cleanly: nothing to warn of.
        assert!(threads(BuildContexts::PerStream).known_risks().is_empty());
        let all_per_stream = AccelOptions {
            contexts: BuildContexts::PerStream,
            ..all
        };
        assert!(all_per_stream.known_risks().is_empty());
    }

    #[test]
    fn the_enqueue_is_described_only_when_it_is_not_the_plain_one() {
        assert_eq!(AccelOptions::default().enqueue_description(), "");
        let threads = AccelOptions {
            enqueue_threads: 4,
            ..AccelOptions::default()
        };
        assert_eq!(threads.enqueue_description(), "4 enqueue threads");
        let auto = AccelOptions {
            contexts: threads.suited_contexts(),
            ..threads
        };
        assert_eq!(
            auto.enqueue_description(),
            "4 enqueue threads, a context per stream"
        );
        let contexts = AccelOptions {
            contexts: BuildContexts::PerStream,
            ..AccelOptions::default()
        };
        assert_eq!(contexts.enqueue_description(), "a context per stream");
    }

    #[test]
    fn auto_contexts_are_per_stream_exactly_where_one_context_failed() {
        let lpt = |w| AccelOptions {
            assign: Assign::Lpt,
            lpt_build_weight: w,
            ..AccelOptions::default()
        };
        // The default and the configurations that never failed keep the one context (faster
        // with one enqueue thread at 16 and 32 streams).
        assert_eq!(
            AccelOptions::default().suited_contexts(),
            BuildContexts::Shared
        );
        assert_eq!(
            lpt(DEFAULT_LPT_BUILD_WEIGHT).suited_contexts(),
            BuildContexts::Shared
        );
        for o in [
            lpt(0),
            lpt(LPT_WEIGHT_SEEN_SAFE - 1),
            AccelOptions {
                issue: IssueOrder::LargestFirst,
                ..AccelOptions::default()
            },
            AccelOptions {
                enqueue_threads: 4,
                ..AccelOptions::default()
            },
        ] {
            assert_eq!(o.suited_contexts(), BuildContexts::PerStream, "{o:?}");
            // Whatever the options asked for before: the pick looks at the rest only.
            let asked_per_stream = AccelOptions {
                contexts: BuildContexts::PerStream,
                ..o
            };
            assert_eq!(asked_per_stream.suited_contexts(), BuildContexts::PerStream);
        }
        // One stream: nothing runs at once, one context.
        let one = AccelOptions {
            streams: 1,
            enqueue_threads: 4,
            ..lpt(0)
        };
        assert_eq!(one.suited_contexts(), BuildContexts::Shared);
    }

    #[test]
    fn gas_range_names_say_group_and_stream() {
        assert_eq!(gas_range_name(&[12], 3), "GAS group 12 stream 3");
        assert_eq!(gas_range_name(&[4, 5, 9], 0), "GAS groups 4+2 stream 0");
    }

    #[test]
    fn compacted_layout_aligns_each_gas() {
        assert_eq!(compacted_layout(&[100, 128, 1]), (vec![0, 128, 256], 384));
        assert_eq!(compacted_layout(&[]), (vec![], 0));
    }

    #[test]
    fn instances_carry_group_ids_and_sbt_offsets() {
        let table = group_gases(&[50, 1, 60, 2], &MergeOptions::new(10));
        // GASes: [0], [2], merged [1, 3].
        let inst = make_instances(&table, &[11, 22, 33]);
        let ids: Vec<u32> = inst.iter().map(|i| i.instance_id).collect();
        let offs: Vec<u32> = inst.iter().map(|i| i.sbt_offset).collect();
        let handles: Vec<u64> = inst.iter().map(|i| i.traversable_handle).collect();
        assert_eq!(ids, [0, 2, 1]);
        assert_eq!(offs, [0, 1, 2]);
        assert_eq!(handles, [11, 22, 33]);
        assert!(inst
            .iter()
            .all(|i| i.visibility_mask == 0xff && i.transform[0] == 1.0));
    }

    #[test]
    fn build_flags_follow_options() {
        let mut o = AccelOptions::default();
        assert_eq!(o.gas_build_flags(), sys::OPTIX_BUILD_FLAG_PREFER_FAST_TRACE);
        o.fast_build = true;
        o.compact = true;
        assert_eq!(
            o.gas_build_flags(),
            sys::OPTIX_BUILD_FLAG_PREFER_FAST_BUILD | sys::OPTIX_BUILD_FLAG_ALLOW_COMPACTION
        );
    }

    #[test]
    fn concatenated_mesh_rebases_indices() {
        let tri = |o: f32| Group {
            name: "g".into(),
            positions: vec![
                Vec3::new(o, 0.0, 0.0),
                Vec3::new(o + 1.0, 0.0, 0.0),
                Vec3::new(o, 1.0, 0.0),
            ],
            indices: vec![[0, 1, 2]],
            face_materials: vec![0],
            ..Default::default()
        };
        let scene = Scene::new(
            "t",
            vec![tri(0.0), tri(5.0)],
            vec![Material::default_diffuse()],
        );
        let (p, i) = concat_mesh(&scene);
        assert_eq!(p.len(), 6);
        assert_eq!(i, vec![[0, 1, 2], [3, 4, 5]]);
        assert_eq!(p[i[1][0] as usize], Vec3::new(5.0, 0.0, 0.0));
    }
}
