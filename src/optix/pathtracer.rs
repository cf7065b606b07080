//! The OptiX path tracer: the GPU backend, rendering tiles with `ptx/pathtrace.cu`, the same
//! estimator and random numbers as the CPU reference (`crate::cpu::integrator`).
//!
//! - [`layout`]: the `#[repr(C)]` structs the device code reads (launch parameters, SBT hit
//!   data, materials, textures, lights), pinned by size/offset tests.
//! - [`pack`]: the scene packed into one byte blob (one device allocation): materials, textures,
//!   lights with their selection CDF, and every group's vertex/index/normal/UV/material arrays.
//! - [`launch`]: tile arithmetic (launch index -> pixel, sample chunks) and launch parameters.
//!
//! # Sharing one GPU between workers
//!
//! [`OptixBackend::new`] does the per-frame work once: the batched GAS builds and the IAS
//! (`optix::accel`, with every `--streams/--merge-below/...` option), the scene upload, the
//! module, the program groups and the shader binding table. All of that is immutable
//! afterwards and shared (`Arc`) by every [`OptixWorker`] made with [`OptixBackend::worker`]:
//! a worker owns a CUDA stream, its own pipeline (linked from the shared program groups: OptiX
//! does not support concurrent launches of one pipeline, see [`Pipeline`]), its
//! launch-parameter buffers, a tile accumulation buffer and its ray counters, so N workers on
//! one GPU run N launches at once on N streams. The tile scheduler
//! makes one worker per stream (`--devices gpu0x4`: four workers) and hands each its tiles;
//! both [`OptixBackend`] and [`OptixWorker`] implement [`TileRenderer`]. Used directly as a
//! renderer, [`OptixBackend`] keeps a pool of workers and lends one to each concurrent
//! `render_tile` call, so callers that render tiles from many threads get one stream each.
//!
//! # A tile
//!
//! `render_tile(tile, samples, accum)`: the tile's samples are planned into launches that each
//! carry enough pixel-samples to fill the GPU ([`launch::plan_launches`], sized from the
//! device's multiprocessor count by [`launch::launch_work`]: one thread per pixel for a big
//! tile, one thread per (pixel, sample) plus an in-order reduction for a small one, the same
//! bits either way). Everything is enqueued on the worker's stream without waiting: the
//! accumulation up, each launch's parameters (one buffer per launch) up, the launches, the
//! accumulation and the ray counters down; then the worker waits for its stream once
//! (`Stream::scope`). The tile scheduler gives GPU workers tiles big enough for that
//! (`TileRenderer::min_tile_work`). Every tile is an NVTX range naming the worker ("tile
//! optix:0/w1 64x64+128+0 samples 0..16, 2 launches") with a range per launch inside it
//! ("launch optix:0/w1 tile 64x64+128+0 samples 0..16 SAMPLES 65536 threads"), and each
//! worker's stream is named after it, so a profile shows the builds (the ranges of
//! `optix::accel`), then the tiles and launches per stream.
//!
//! A launch carries at most [`launch::SAMPLES_PER_LAUNCH`] pixel-samples, milliseconds of
//! work. Should the GPU hang in one, the wait for the tile's stream would never return: the
//! process-wide watchdog ([`super::watchdog`]) covers it, [`LAUNCH_WAIT_LIMIT`] per launch of
//! the tile, and ends the process with a message naming the tile and exit status 75.

pub mod launch;
pub mod layout;
pub mod pack;

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use thiserror::Error;

use self::launch::{
    camera_params, frame_params, launch_width, launch_work, plan_launches, step_params,
    DeviceShape, LaunchError, LaunchMode, WorkerBuffers, MAX_SAMPLE_SLOTS,
};
use self::layout::{GwHitGroupData, GwLaunchParams, GwSample};
use self::pack::{hit_group_data, pack_scene, PackError, PackedScene};
use super::accel::{Accel, AccelError, AccelOptions, AccelStats};
use super::context::{ContextOptions, DeviceContext};
use super::cuda::{DeviceBuffer, Gpu, GpuInfo, Stream};
use super::error::{log_release_failure, CudaError, OptixError};
use super::pipeline::{
    self, Module, ModuleCompileOptions, Pipeline, PipelineCompileOptions, ProgramGroup, SbtRecord,
    ShaderBindingTable,
};
use super::sys::Abi;
use super::watchdog;
use crate::fault_injection::GpuTileFault;
use crate::nvtx;
use crate::render::{validate_inputs, InputError, RenderSettings, Tile, TileRenderer};
use crate::scene::Scene;
use crate::wording::counted;

/// The device programs, compiled by `scripts/build-ptx.sh` from `ptx/pathtrace.cu`.
pub const PATHTRACE_PTX: &str = include_str!("../../ptx/pathtrace.ptx");

/// The name of the launch-parameter variable in `ptx/pathtrace.cu`.
pub const LAUNCH_PARAMS_NAME: &str = "pathtrace_params";

/// Payload registers of a trace: hit data pointer (2), triangle, distance, barycentrics (2).
pub const PAYLOAD_VALUES: i32 = 6;

/// Errors of the OptiX path tracer. Driver, memory and compile errors keep the typed errors of
/// the layers below (`OptixError::DriverTooOld`, `CudaError::OutOfMemory` with the bytes asked
/// for, `OptixError::ModuleCompile` with OptiX's log).
#[derive(Debug, Error)]
pub enum PathTracerError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Optix(#[from] OptixError),
    #[error("building the acceleration structures: {0}")]
    Accel(#[from] AccelError),
    #[error("preparing the scene for the GPU: {0}")]
    Pack(#[from] PackError),
    /// The scene blob's upload (its size said: on a GPU short of memory, the allocation that
    /// failed is otherwise a bare byte count).
    #[error("uploading the scene's materials, textures, lights and shading geometry ({bytes} bytes): {source}")]
    SceneUpload { bytes: usize, source: CudaError },
    /// The scene or the settings, refused by the checks both backends run.
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(
        "an OptiX worker's buffers were left in an unknown state by a panic in another thread"
    )]
    Poisoned,
    /// An earlier call on this GPU failed with a sticky CUDA error ([`CudaError::is_sticky`]):
    /// the context every worker of the GPU shares can run nothing more, so the workers fail at
    /// once instead of enqueueing work the driver would refuse.
    #[error(
        "GPU {gpu}'s CUDA context is unusable since {first}, a sticky error (every later call \
         in the context fails with it; a new process is needed to use this GPU again)"
    )]
    ContextLost {
        gpu: usize,
        /// The error that made it unusable, with the worker that met it.
        first: String,
    },
    /// A test hook's environment variable ([`crate::fault_injection`]) with a value it
    /// cannot use.
    #[error("{0}")]
    Environment(String),
}

impl PathTracerError {
    /// Whether the error leaves the GPU's CUDA context unusable ([`CudaError::is_sticky`]),
    /// wherever in the layers below it came from.
    pub fn is_sticky(&self) -> bool {
        match self {
            PathTracerError::Cuda(e) | PathTracerError::SceneUpload { source: e, .. } => {
                e.is_sticky()
            }
            PathTracerError::Optix(e) => e.is_sticky(),
            PathTracerError::Accel(AccelError::Cuda(e)) => e.is_sticky(),
            PathTracerError::Accel(AccelError::Optix(e)) => e.is_sticky(),
            PathTracerError::ContextLost { .. } => true,
            _ => false,
        }
    }
}

/// How to set the backend up: which GPU, how to create the OptiX context and how to build the
/// GASes. Plain values of the optix layer: the command line (`--optix-abi`, `--validation`,
/// `--streams`, `--merge-below`...) converts into them in `cli::args`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptixOptions {
    /// CUDA device ordinal.
    pub device: usize,
    pub context: ContextOptions,
    pub accel: AccelOptions,
}

/// What setting the backend up took.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildReport {
    /// Seconds of the acceleration structures: geometry upload, every GAS build, compaction when
    /// asked, the IAS, waited for.
    pub accel_seconds: f64,
    /// Seconds of the rest: scene packing and upload, module compile, pipeline, SBT.
    pub setup_seconds: f64,
    pub accel: AccelStats,
    /// Bytes of the scene blob (materials, textures, lights, shading geometry).
    pub scene_bytes: u64,
    /// Hit-group SBT records (one per group with triangles).
    pub hit_records: usize,
}

/// Counts over every launch so far, all workers together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderCounters {
    /// Rays traced: camera, bounce and shadow rays.
    pub rays: u64,
    /// Samples whose radiance was not finite: added as black but counted, as on the CPU.
    pub non_finite_samples: u64,
}

/// Everything the workers of one GPU share, built once. Field order is drop order: the SBT and
/// pipelines go before the buffers and structures they name, the context last.
struct Shared {
    sbt: ShaderBindingTable,
    /// Pipelines linked but not yet given to a worker: the one [`OptixBackend::new`] links (so
    /// that a link error shows at setup), then none; [`OptixWorker::new`] links its own.
    spare_pipelines: Mutex<Vec<Pipeline>>,
    /// Raygen, miss, closest hit: what every worker's pipeline links.
    program_groups: Vec<ProgramGroup>,
    pipeline_options: PipelineCompileOptions,
    _scene_buffer: DeviceBuffer,
    /// The IAS the launches trace (its handle is in `frame`) and the GASes under it.
    _accel: Accel,
    /// The launch parameters and the settings of the frame being rendered: set again for each
    /// frame of a camera path ([`OptixBackend::set_frame`]).
    frame: RwLock<(GwLaunchParams, RenderSettings)>,
    /// Pixel-samples a launch should carry to fill this GPU ([`launch::launch_work`]).
    launch_work: u64,
    report: BuildReport,
    ctx: Arc<DeviceContext>,
    rays: AtomicU64,
    non_finite: AtomicU64,
    next_worker: AtomicU32,
    /// Set by the first sticky error a worker meets ([`PathTracerError::is_sticky`]): which
    /// worker met it, and the error. From then on every worker fails at once.
    lost: OnceLock<(String, String)>,
    /// The test hook that makes one of this GPU's tiles first run
    /// [`Stream::fault_on_purpose`] (feature `fault-injection`; without it, never).
    fault: GpuTileFault,
}

impl Shared {
    /// The frame's launch parameters and settings.
    fn frame(&self) -> (GwLaunchParams, RenderSettings) {
        *self
            .frame
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(ContextLost)` once a worker met a sticky error.
    fn check_context(&self) -> Result<(), PathTracerError> {
        match self.lost.get() {
            Some((who, error)) => Err(PathTracerError::ContextLost {
                gpu: self.ctx.gpu().ordinal(),
                first: format!("{who} met \"{error}\""),
            }),
            None => Ok(()),
        }
    }

    /// The sticky error the context was lost to, once one was met
    /// ([`TileRenderer::device_lost`]).
    fn lost_to(&self) -> Option<String> {
        self.lost.get().map(|(_, error)| error.clone())
    }

    /// Remembers `error` when it is sticky (the first one only), saying who met it.
    fn note_failure(&self, error: &PathTracerError, who: &str) {
        if error.is_sticky() && !matches!(error, PathTracerError::ContextLost { .. }) {
            let _ = self.lost.set((who.to_string(), error.to_string()));
        }
    }

    /// After a failure that is not itself sticky (OptiX's OPTIX_ERROR_CUDA_ERROR, say, which a
    /// fault on another stream can cause), asks the context through `stream` whether it still
    /// works, and remembers the sticky error it answers with, if any.
    fn probe_after(&self, error: &PathTracerError, stream: &Stream, who: &str) {
        if error.is_sticky() || self.lost.get().is_some() {
            return;
        }
        if let Err(e) = stream.query() {
            if e.is_sticky() {
                let _ = self
                    .lost
                    .set((format!("{who} (after \"{error}\")"), e.to_string()));
            }
        }
    }
}

/// The OptiX backend on one GPU: acceleration structures, scene, pipeline and SBT, shared by
/// its workers. Cloning is cheap and shares everything, the worker pool included.
#[derive(Clone)]
pub struct OptixBackend {
    shared: Arc<Shared>,
    pool: Arc<Mutex<Vec<OptixWorker>>>,
}

impl OptixBackend {
    /// Opens the GPU, builds the acceleration structures, uploads the scene and links the
    /// pipeline. Everything that can be wrong with the driver (too old for the ABI), the memory
    /// (out of memory, with the sizes) or the device code (compile log) is reported here.
    pub fn new(
        scene: &Scene,
        settings: &RenderSettings,
        options: &OptixOptions,
    ) -> Result<OptixBackend, PathTracerError> {
        // The CPU backend's checks, before the GPU is even opened.
        validate_inputs(scene, settings)?;
        let gpu = Gpu::open(options.device)?;
        let ctx = DeviceContext::new(&gpu, &options.context)?;

        let t_accel = Instant::now();
        // Returns once the IAS is built.
        let accel = Accel::build(&ctx, scene, &options.accel)?;
        let accel_seconds = t_accel.elapsed().as_secs_f64();

        let t_setup = Instant::now();
        let stream = accel.stream();
        let (packed, scene_buffer) = upload_scene(&gpu, stream, scene)?;
        let base = scene_buffer.device_ptr();

        let pipeline_options = path_tracer_pipeline_options();
        let _range = nvtx::range("path tracer pipeline and SBT");
        let programs = PathTracerPrograms::compile(&ctx, &pipeline_options)?;
        let program_groups = programs.groups();
        // Linked here once so that a link error is a setup error; the first worker takes it.
        let pipeline = link_pipeline(&ctx, &pipeline_options, &program_groups)?;

        let (sbt, hit_records) = shader_binding_table(
            &gpu,
            stream,
            &programs,
            &packed,
            base,
            &accel.table().record_groups,
        )?;
        stream.synchronize()?;

        let frame = frame_params(
            settings,
            &packed,
            base,
            accel.handle(),
            scene.environment_radiance().to_array(),
        );
        let report = BuildReport {
            accel_seconds,
            setup_seconds: t_setup.elapsed().as_secs_f64(),
            accel: *accel.stats(),
            scene_bytes: packed.bytes.len() as u64,
            hit_records,
        };
        Ok(OptixBackend {
            shared: Arc::new(Shared {
                sbt,
                spare_pipelines: Mutex::new(vec![pipeline]),
                program_groups,
                pipeline_options,
                _scene_buffer: scene_buffer,
                _accel: accel,
                frame: RwLock::new((frame, *settings)),
                launch_work: launch_work(DeviceShape {
                    multiprocessors: gpu.info().multiprocessors,
                    max_threads_per_multiprocessor: gpu.info().max_threads_per_multiprocessor,
                }),
                report,
                ctx,
                rays: AtomicU64::new(0),
                non_finite: AtomicU64::new(0),
                next_worker: AtomicU32::new(0),
                lost: OnceLock::new(),
                fault: GpuTileFault::from_env(options.device)
                    .map_err(PathTracerError::Environment)?,
            }),
            pool: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// A new worker: its own stream and buffers, sharing this backend's structures.
    pub fn worker(&self) -> Result<OptixWorker, PathTracerError> {
        OptixWorker::new(self.shared.clone())
    }

    pub fn report(&self) -> &BuildReport {
        &self.shared.report
    }

    pub fn gpu_info(&self) -> &GpuInfo {
        self.shared.ctx.gpu().info()
    }

    pub fn abi(&self) -> Abi {
        self.shared.ctx.abi()
    }

    pub fn settings(&self) -> RenderSettings {
        self.shared.frame().1
    }

    /// Sets the next frame of a camera path (another camera, size or sampling of the same
    /// scene): the acceleration structures, the scene on the device and the modules stay.
    /// Call it between frames, with no tile rendering; the counters start again from 0.
    pub fn set_frame(
        &self,
        scene: &Scene,
        settings: &RenderSettings,
    ) -> Result<(), PathTracerError> {
        validate_inputs(scene, settings)?;
        let mut frame = self
            .shared
            .frame
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *frame = (camera_params(&frame.0, settings), *settings);
        self.shared.rays.store(0, Ordering::Relaxed);
        self.shared.non_finite.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Rays and non-finite samples over every launch so far, all workers together.
    pub fn counters(&self) -> RenderCounters {
        RenderCounters {
            rays: self.shared.rays.load(Ordering::Relaxed),
            non_finite_samples: self.shared.non_finite.load(Ordering::Relaxed),
        }
    }

    /// "optix: NVIDIA H100 (sm_90, ...), OptiX ABI 105 (OptiX 9.0), 42 GASes / 8 streams".
    pub fn describe(&self) -> String {
        let r = &self.shared.report;
        format!(
            "optix on {}, OptiX {}; {} in {}{}, IAS {} bytes",
            self.gpu_info(),
            self.abi(),
            counted(r.accel.groups, "group", "groups"),
            counted(r.accel.gases, "GAS", "GASes"),
            match r.accel.compacted_bytes {
                Some(c) => format!(" ({} bytes, compacted from {})", c, r.accel.output_bytes),
                None => format!(" ({} bytes)", r.accel.output_bytes),
            },
            r.accel.ias_bytes
        )
    }
}

impl TileRenderer for OptixBackend {
    fn name(&self) -> String {
        format!("optix:{}", self.shared.ctx.gpu().ordinal())
    }

    fn hardware(&self) -> String {
        gpu_hardware(self.shared.ctx.gpu().info())
    }

    fn min_tile_work(&self) -> Option<u64> {
        Some(self.shared.launch_work)
    }

    fn device_lost(&self) -> Option<String> {
        self.shared.lost_to()
    }

    /// Renders on a pooled worker (a new one when every pooled worker is busy), so that calls
    /// from several threads run on several streams.
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        self.render_pooled(tile, samples, accum, None)
    }

    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        self.render_pooled(tile, samples, accum, Some(skip))
    }
}

/// Packs the scene for the GPU and uploads it on `stream`: the packed scene and its buffer.
fn upload_scene(
    gpu: &Gpu,
    stream: &Stream,
    scene: &Scene,
) -> Result<(PackedScene, DeviceBuffer), PathTracerError> {
    let packed = {
        let _range = nvtx::range("pack scene for the GPU");
        pack_scene(scene)?
    };
    let scene_buffer = {
        let _range = nvtx::range_with(|| format!("upload scene: {} bytes", packed.bytes.len()));
        gpu.upload(stream, &packed.bytes)
            .map_err(|source| PathTracerError::SceneUpload {
                bytes: packed.bytes.len(),
                source,
            })?
    };
    Ok((packed, scene_buffer))
}

/// The path tracer's program groups, compiled from [`PATHTRACE_PTX`]. Each holds the module.
/// Declared hit, miss, raygen: dropped in that order, the reverse of their creation.
struct PathTracerPrograms {
    hit: ProgramGroup,
    miss: ProgramGroup,
    raygen: ProgramGroup,
}

impl PathTracerPrograms {
    fn compile(
        ctx: &Arc<DeviceContext>,
        pipeline_options: &PipelineCompileOptions,
    ) -> Result<PathTracerPrograms, PathTracerError> {
        let module = Module::from_ptx(
            ctx,
            "pathtrace.ptx",
            PATHTRACE_PTX,
            &ModuleCompileOptions::default(),
            pipeline_options,
        )?;
        let raygen = ProgramGroup::raygen(ctx, &module, "__raygen__pathtrace")?;
        let miss = ProgramGroup::miss(ctx, &module, "__miss__pathtrace")?;
        let hit = ProgramGroup::hit_group(
            ctx,
            &module,
            "__closesthit__pathtrace",
            "__anyhit__pathtrace",
        )?;
        Ok(PathTracerPrograms { hit, miss, raygen })
    }

    /// The groups in pipeline order: raygen, miss, hit.
    fn groups(&self) -> Vec<ProgramGroup> {
        vec![self.raygen.clone(), self.miss.clone(), self.hit.clone()]
    }
}

/// The pipeline compile options of the path tracer's module and pipeline.
fn path_tracer_pipeline_options() -> PipelineCompileOptions {
    PipelineCompileOptions {
        num_payload_values: PAYLOAD_VALUES,
        launch_params_variable_name: LAUNCH_PARAMS_NAME.into(),
        ..PipelineCompileOptions::default()
    }
}

/// The SBT, uploaded on `stream` (not waited for), and its number of hit records.
fn shader_binding_table(
    gpu: &Gpu,
    stream: &Stream,
    programs: &PathTracerPrograms,
    packed: &PackedScene,
    base: u64,
    record_groups: &[u32],
) -> Result<(ShaderBindingTable, usize), PathTracerError> {
    // One hit record per (GAS, build input): the accel's record order, so that the IAS
    // instances' sbtOffsets find them.
    let hit_data = hit_group_data(packed, base, record_groups)?;
    let hit_records = hit_data
        .iter()
        .map(|d| SbtRecord::new(&programs.hit, *d))
        .collect::<Result<Vec<SbtRecord<GwHitGroupData>>, _>>()?;
    let sbt = ShaderBindingTable::builder()
        .raygen(SbtRecord::new(&programs.raygen, ())?)?
        .miss(&[SbtRecord::new(&programs.miss, ())?])?
        .hitgroup(&hit_records)?
        .build(gpu, stream)?;
    Ok((sbt, hit_records.len()))
}

impl OptixBackend {
    /// [`TileRenderer::render_tile`] on a pooled worker, `skip`'s pixels left out.
    fn render_pooled(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: Option<&[bool]>,
    ) -> anyhow::Result<()> {
        self.shared.check_context()?;
        let pooled = self
            .pool
            .lock()
            .map_err(|_| PathTracerError::Poisoned)?
            .pop();
        let worker = match pooled {
            Some(w) => w,
            None => self.worker().inspect_err(|e| {
                self.shared
                    .note_failure(e, &format!("a new worker of {}", self.name()))
            })?,
        };
        let result = worker.render_skipping(tile, samples, accum, skip);
        // A worker whose launch failed may hold a broken stream: do not lend it again.
        if result.is_ok() {
            self.pool
                .lock()
                .map_err(|_| PathTracerError::Poisoned)?
                .push(worker);
        }
        Ok(result?)
    }
}

/// What one worker owns: a stream, its pipeline and the buffers its launches write. Field
/// order is drop order: the stream is waited for (`Drop`) before anything is freed.
struct WorkerState {
    stream: Stream,
    /// This worker's own pipeline: launches of one pipeline must not run concurrently.
    pipeline: Pipeline,
    /// One launch-parameter buffer per launch of a tile's plan, each exactly
    /// `size_of::<GwLaunchParams>()` bytes as optixLaunch requires; grown to the longest plan,
    /// so a tile's launches are enqueued back to back without waiting in between.
    params: Vec<DeviceBuffer>,
    /// The tile's float4 accumulation; grown to the largest tile seen.
    accum: DeviceBuffer,
    /// The `GwSample`s of SAMPLES launches; grown to the largest plan's need.
    samples: DeviceBuffer,
    /// The skip bytes of a tile rendered with pixels skipped (`GwLaunchParams::skip`); grown
    /// to the largest such tile.
    skip: DeviceBuffer,
    /// Two u64 the device adds to: rays, non-finite samples.
    counters: DeviceBuffer,
    /// The counters' values after the previous tile (they only grow).
    seen: [u64; 2],
}

/// One stream's renderer on a shared [`OptixBackend`] (see the module comment).
pub struct OptixWorker {
    shared: Arc<Shared>,
    index: u32,
    /// Pixel-samples per launch this worker plans for (the GPU's [`launch::launch_work`]).
    launch_work: u64,
    state: Mutex<WorkerState>,
}

impl OptixWorker {
    fn new(shared: Arc<Shared>) -> Result<OptixWorker, PathTracerError> {
        let gpu = shared.ctx.gpu().clone();
        let spare = shared
            .spare_pipelines
            .lock()
            .map_err(|_| PathTracerError::Poisoned)?
            .pop();
        let pipeline = match spare {
            Some(p) => p,
            None => link_pipeline(
                &shared.ctx,
                &shared.pipeline_options,
                &shared.program_groups,
            )?,
        };
        let stream = gpu.new_stream()?;
        let counters = DeviceBuffer::zeroed(&gpu, &stream, 2 * std::mem::size_of::<u64>())?;
        let accum = gpu.alloc(0)?;
        let samples = gpu.alloc(0)?;
        let skip = gpu.alloc(0)?;
        let index = shared.next_worker.fetch_add(1, Ordering::Relaxed);
        nvtx::name_cuda_stream_handle(stream.raw() as usize, &worker_label(gpu.ordinal(), index));
        Ok(OptixWorker {
            launch_work: shared.launch_work,
            shared,
            index,
            state: Mutex::new(WorkerState {
                stream,
                pipeline,
                params: Vec::new(),
                accum,
                samples,
                skip,
                counters,
                seen: [0; 2],
            }),
        })
    }

    /// "optix:0/w3": the GPU and the worker, as profiles and statistics name it.
    pub fn label(&self) -> String {
        worker_label(self.shared.ctx.gpu().ordinal(), self.index)
    }

    /// Pixel-samples per launch this worker plans for: by default what fills its GPU.
    pub fn launch_work(&self) -> u64 {
        self.launch_work
    }

    /// Plans launches of `work` pixel-samples instead, for measurements: 1 gives one thread per
    /// pixel in every launch (the launches before plans existed). The image is the same.
    pub fn with_launch_work(mut self, work: u64) -> OptixWorker {
        self.launch_work = work.max(1);
        self
    }

    /// Adds samples `samples` of every pixel of `tile` to `accum` (see [`TileRenderer`]).
    ///
    /// The tile's launches ([`launch::plan_launches`]: enough pixel-samples each to fill the
    /// GPU) are enqueued on the worker's stream with their copies, all asynchronous: the
    /// accumulation up, every launch's parameters up, the launches, the accumulation and the
    /// counters down; then the worker waits for its stream once.
    ///
    /// Once any worker of this GPU met a sticky CUDA error, this fails at once with
    /// [`PathTracerError::ContextLost`], naming that error.
    pub fn render(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> Result<(), PathTracerError> {
        self.render_skipping(tile, samples, accum, None)
    }

    /// [`OptixWorker::render`] with the pixels `skip` marks (one entry per pixel of the tile)
    /// left out: their threads return at once and their sums come back as they went up. The
    /// tile's launches are planned for all its pixels.
    pub fn render_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: Option<&[bool]>,
    ) -> Result<(), PathTracerError> {
        self.shared.check_context()?;
        if let Some(skip) = skip {
            crate::render::check_skip(tile, accum, skip)
                .map_err(|e| PathTracerError::Launch(e.into()))?;
        }
        let result = self.render_on_stream(tile, samples, accum, skip);
        if let Err(e) = &result {
            let who = self.label();
            self.shared.note_failure(e, &who);
            if let Ok(st) = self.state.lock() {
                self.shared.probe_after(e, &st.stream, &who);
            }
        }
        result
    }

    fn render_on_stream(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: Option<&[bool]>,
    ) -> Result<(), PathTracerError> {
        let (frame, settings) = self.shared.frame();
        let pixels = launch_width(tile, settings.width, settings.height, accum.len())?;
        let plan = plan_launches(pixels, samples.clone(), self.launch_work, MAX_SAMPLE_SLOTS);
        if plan.is_empty() {
            return Ok(());
        }
        let mut guard = self.state.lock().map_err(|_| PathTracerError::Poisoned)?;
        let st = &mut *guard;
        if self.shared.fault.tile_started() {
            st.stream.fault_on_purpose()?;
        }
        let gpu = self.shared.ctx.gpu();
        let bytes = std::mem::size_of_val(accum);
        if st.accum.len_bytes() < bytes {
            st.accum = gpu.alloc(bytes)?;
        }
        let slots = plan
            .iter()
            .filter(|s| s.mode == LaunchMode::Samples)
            .map(|s| s.threads as usize)
            .max()
            .unwrap_or(0);
        let sample_bytes = slots * std::mem::size_of::<GwSample>();
        if st.samples.len_bytes() < sample_bytes {
            st.samples = gpu.alloc(sample_bytes)?;
        }
        let skip_bytes: Vec<u8> = skip
            .map(|s| s.iter().map(|&k| u8::from(k)).collect())
            .unwrap_or_default();
        if st.skip.len_bytes() < skip_bytes.len() {
            st.skip = gpu.alloc(skip_bytes.len())?;
        }
        while st.params.len() < plan.len() {
            st.params
                .push(gpu.alloc(std::mem::size_of::<GwLaunchParams>())?);
        }
        let buffers = WorkerBuffers {
            accum: st.accum.device_ptr(),
            counters: st.counters.device_ptr(),
            samples: st.samples.device_ptr(),
            skip: if skip.is_some() {
                st.skip.device_ptr()
            } else {
                0
            },
        };
        let params: Vec<GwLaunchParams> = plan
            .iter()
            .map(|step| step_params(&frame, tile, step, buffers))
            .collect();
        // The tile's sums go up from a copy while `accum` is the destination of the way back.
        let start = accum.to_vec();
        let mut counters = [0u64; 2];
        let label = self.label();
        let _tile_range = nvtx::range_with(|| {
            format!(
                "{}, {} launches",
                tile_name(&label, tile, &samples),
                plan.len()
            )
        });
        let st = &*st;
        let (pipeline, sbt) = (&st.pipeline, &self.shared.sbt);
        // The scope waits for the stream: a launch that never ends would block it for ever.
        let limit = tile_wait_limit(plan.len());
        let _watch = {
            let (label, samples, launches) = (label.clone(), samples.clone(), plan.len());
            watchdog::global().arm(
                limit,
                Box::new(move || tile_hang_message(&label, tile, &samples, launches, limit)),
            )
        };
        st.stream.scope(|scope| -> Result<(), PathTracerError> {
            scope.upload(&st.accum, 0, &start)?;
            if !skip_bytes.is_empty() {
                scope.upload(&st.skip, 0, &skip_bytes)?;
            }
            for (buffer, p) in st.params.iter().zip(&params) {
                scope.upload(buffer, 0, bytemuck::bytes_of(p))?;
            }
            for (step, buffer) in plan.iter().zip(&st.params) {
                let _range = nvtx::range_with(|| {
                    format!(
                        "launch {label} tile {}x{}+{}+{} samples {}..{} {} {} threads",
                        tile.w,
                        tile.h,
                        tile.x,
                        tile.y,
                        step.samples.start,
                        step.samples.end,
                        step.mode.name(),
                        step.threads
                    )
                });
                // SAFETY: the SBT (shared, alive as long as `self`), the worker's pipeline
                // and its parameter and accumulation buffers (in the locked worker state)
                // outlive this scope, which waits for the stream before returning.
                unsafe {
                    pipeline::launch_unchecked(
                        pipeline,
                        scope.stream(),
                        buffer,
                        sbt,
                        step.threads,
                        1,
                        1,
                    )?
                };
            }
            scope.download(&st.accum, 0, accum)?;
            scope.download(&st.counters, 0, &mut counters)?;
            Ok(())
        })?;
        self.shared
            .rays
            .fetch_add(counters[0].wrapping_sub(guard.seen[0]), Ordering::Relaxed);
        self.shared
            .non_finite
            .fetch_add(counters[1].wrapping_sub(guard.seen[1]), Ordering::Relaxed);
        guard.seen = counters;
        Ok(())
    }
}

/// How long each launch of a tile may keep the host waiting for the tile's stream before the
/// watchdog calls the GPU hung. A launch is at most [`launch::SAMPLES_PER_LAUNCH`]
/// pixel-samples, milliseconds on the GPUs measured (docs/gpu-checks.md); a minute is
/// thousands of times that, and still far from a render that is merely slow. Under compute-sanitizer launches slow down a hundredfold and stay well inside it.
pub const LAUNCH_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The environment variable that replaces [`LAUNCH_WAIT_LIMIT`] (seconds per launch, a
/// positive number).
pub const LAUNCH_WAIT_ENV: &str = "GASWORKS_LAUNCH_WAIT_S";

/// How long a tile of `launches` launches may take: the per-launch limit
/// ([`LAUNCH_WAIT_ENV`], else [`LAUNCH_WAIT_LIMIT`]) for each. The variable is read once per
/// process: this runs for every tile, and a bad value is reported once, not per tile.
pub fn tile_wait_limit(launches: usize) -> Duration {
    static PER_LAUNCH: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    PER_LAUNCH
        .get_or_init(|| watchdog::limit_from_env(LAUNCH_WAIT_ENV, LAUNCH_WAIT_LIMIT))
        .saturating_mul(launches.max(1).min(u32::MAX as usize) as u32)
}

/// "tile optix:0/w1 64x64+128+0 samples 0..16": a worker's tile, as its NVTX range and the
/// watchdog name it.
fn tile_name(worker: &str, tile: Tile, samples: &Range<u32>) -> String {
    format!(
        "tile {worker} {}x{}+{}+{} samples {}..{}",
        tile.w, tile.h, tile.x, tile.y, samples.start, samples.end
    )
}

/// What the watchdog says of a tile whose launches never finished.
fn tile_hang_message(
    worker: &str,
    tile: Tile,
    samples: &Range<u32>,
    launches: usize,
    limit: Duration,
) -> String {
    format!(
        "{} ({launches} launch{}): the host was blocked for {} s waiting for its launches and \
         copies, which take milliseconds a launch; the GPU or its driver hung ({LAUNCH_WAIT_ENV} \
         sets the limit per launch)",
        tile_name(worker, tile, samples),
        if launches == 1 { "" } else { "es" },
        limit.as_secs_f64()
    )
}

/// The path tracer's pipeline: the raygen program traces (radiance and shadow rays); closest
/// hit and miss do not, so the trace depth is 1.
fn link_pipeline(
    ctx: &Arc<DeviceContext>,
    options: &PipelineCompileOptions,
    groups: &[ProgramGroup],
) -> Result<Pipeline, PathTracerError> {
    Ok(Pipeline::new(ctx, options, 1, groups)?)
}

/// "gpu: NVIDIA H100 80GB HBM3, 132 SMs": a GPU's name and size, what its speed follows
/// ([`TileRenderer::hardware`]).
fn gpu_hardware(info: &GpuInfo) -> String {
    format!("gpu: {}, {} SMs", info.name, info.multiprocessors)
}

fn worker_label(gpu: usize, index: u32) -> String {
    format!("optix:{gpu}/w{index}")
}

impl TileRenderer for OptixWorker {
    fn name(&self) -> String {
        self.label()
    }

    fn hardware(&self) -> String {
        gpu_hardware(self.shared.ctx.gpu().info())
    }

    fn min_tile_work(&self) -> Option<u64> {
        Some(self.launch_work)
    }

    fn device_lost(&self) -> Option<String> {
        self.shared.lost_to()
    }

    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        Ok(self.render(tile, samples, accum)?)
    }

    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        Ok(self.render_skipping(tile, samples, accum, Some(skip))?)
    }
}

impl Drop for WorkerState {
    fn drop(&mut self) {
        // Launches are waited for before render() returns; this covers an error path that
        // left copies in flight, so the buffers are not freed under them.
        if let Err(e) = self.stream.synchronize() {
            log_release_failure(
                format_args!("waiting for an OptiX worker's stream before freeing its buffers"),
                &e,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sticky CUDA errors are found through every layer a render can return them from; an
    /// out-of-memory is not one, and the lost context's own error is.
    #[test]
    fn sticky_errors_are_found_in_every_layer() {
        use cudarc::driver::{sys::CUresult, DriverError};
        let sticky = || {
            CudaError::call(
                "cuStreamSynchronize",
                DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
            )
        };
        let oom = || {
            CudaError::call(
                "cuMemAlloc",
                DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            )
        };
        assert!(PathTracerError::Cuda(sticky()).is_sticky());
        assert!(PathTracerError::Optix(OptixError::Cuda(sticky())).is_sticky());
        assert!(PathTracerError::Accel(AccelError::Cuda(sticky())).is_sticky());
        assert!(PathTracerError::Accel(AccelError::Optix(OptixError::Cuda(sticky()))).is_sticky());
        assert!(PathTracerError::SceneUpload {
            bytes: 1,
            source: sticky()
        }
        .is_sticky());
        assert!(!PathTracerError::Cuda(oom()).is_sticky());
        assert!(!PathTracerError::Optix(OptixError::Call {
            call: "optixLaunch",
            name: "OPTIX_ERROR_LAUNCH_FAILURE".into(),
            log: String::new(),
        })
        .is_sticky());
        let lost = PathTracerError::ContextLost {
            gpu: 1,
            first: "optix:1/w2 met \"cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS\""
                .into(),
        };
        assert!(lost.is_sticky());
        let text = lost.to_string();
        assert!(
            text.starts_with("GPU 1's CUDA context is unusable since optix:1/w2 met"),
            "{text}"
        );
        assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{text}");
    }

    #[test]
    fn the_embedded_ptx_has_the_programs_and_parameters_the_host_names() {
        for entry in [
            ".entry __raygen__pathtrace",
            ".entry __closesthit__pathtrace",
            ".entry __anyhit__pathtrace",
            ".entry __miss__pathtrace",
        ] {
            assert!(PATHTRACE_PTX.contains(entry), "pathtrace.ptx lacks {entry}");
        }
        let params = format!(
            ".visible .const .align 8 .b8 {LAUNCH_PARAMS_NAME}[{}]",
            std::mem::size_of::<GwLaunchParams>()
        );
        assert!(
            PATHTRACE_PTX.contains(&params),
            "pathtrace.ptx lacks {params}"
        );
        // Two traces, the path's next hit and the shadow ray, both with the default payload
        // type and the six values the pipeline is compiled for, every instance visible, any-hit
        // left to the geometry flags (no OPTIX_RAY_FLAG_DISABLE_ANYHIT = 1: the cut-out test
        // runs on groups with cut-outs; the shadow ray adds TERMINATE_ON_FIRST_HIT = 4 and
        // DISABLE_CLOSESTHIT = 8), and
        // the record of a hit at the instance's SBT offset plus the build input (offset 0,
        // stride 1), the one miss record at index 0.
        let trace = |ray_flags| super::super::ptx_calls::TraceCall {
            payload_type: 0,
            visibility_mask: 0xff,
            ray_flags,
            sbt_offset: 0,
            sbt_stride: 1,
            miss_index: 0,
            payload_count: PAYLOAD_VALUES as u32,
        };
        assert_eq!(
            super::super::ptx_calls::trace_calls(PATHTRACE_PTX),
            [trace(0), trace(4 | 8)]
        );
    }

    #[test]
    fn a_hung_tile_is_named_with_its_limit() {
        let tile = Tile {
            x: 128,
            y: 0,
            w: 64,
            h: 64,
        };
        let limit = Duration::from_secs(240);
        let text = tile_hang_message("optix:0/w1", tile, &(0..256), 4, limit);
        assert_eq!(
            text,
            "tile optix:0/w1 64x64+128+0 samples 0..256 (4 launches): the host was blocked for \
             240 s waiting for its launches and copies, which take milliseconds a launch; the GPU \
             or its driver hung (GASWORKS_LAUNCH_WAIT_S sets the limit per launch)"
        );
        assert!(tile_hang_message("optix:0/w0", tile, &(3..4), 1, limit).contains("(1 launch)"));
    }

    #[test]
    fn a_tile_may_take_the_launch_limit_once_per_launch() {
        // Only this test reads the variable.
        assert_eq!(tile_wait_limit(1), LAUNCH_WAIT_LIMIT);
        assert_eq!(tile_wait_limit(0), LAUNCH_WAIT_LIMIT);
        assert_eq!(tile_wait_limit(6), 6 * LAUNCH_WAIT_LIMIT);
        assert_eq!(
            tile_wait_limit(usize::MAX),
            LAUNCH_WAIT_LIMIT.saturating_mul(u32::MAX)
        );
    }

    /// Without a GPU, setting the backend up fails with the CUDA layer's "no device" error, not
    /// a panic. On a GPU host the same is checked in a child process that sees no GPU
    /// (`CUDA_VISIBLE_DEVICES` empty), so the test cannot pass there without checking.
    #[test]
    fn new_without_a_gpu_is_an_error() {
        const HIDDEN: &str = "GASWORKS_TEST_GPU_HIDDEN";
        if crate::optix::probe().is_ok() {
            assert!(
                std::env::var_os(HIDDEN).is_none(),
                "CUDA_VISIBLE_DEVICES= did not hide the GPU from the child process"
            );
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "optix::pathtracer::tests::new_without_a_gpu_is_an_error",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("CUDA_VISIBLE_DEVICES", "")
                .env(HIDDEN, "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "with the GPU hidden:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let scene = Scene::new(
            "t",
            vec![crate::scene::Group {
                name: "g".into(),
                positions: vec![glam::Vec3::ZERO, glam::Vec3::X, glam::Vec3::Y],
                indices: vec![[0, 1, 2]],
                face_materials: vec![0],
                ..Default::default()
            }],
            vec![crate::scene::Material::default_diffuse()],
        );
        let camera = crate::scene::Camera {
            eye: glam::Vec3::new(0.0, 0.0, 3.0),
            look_at: glam::Vec3::ZERO,
            up: glam::Vec3::Y,
            fov_y_deg: 40.0,
        }
        .frame(8, 8)
        .unwrap();
        let settings = RenderSettings {
            width: 8,
            height: 8,
            spp: 1,
            max_depth: 2,
            seed: 0,
            camera,
        };
        let options = OptixOptions {
            device: 0,
            context: ContextOptions::default(),
            accel: AccelOptions::default(),
        };
        match OptixBackend::new(&scene, &settings, &options) {
            Err(PathTracerError::Cuda(CudaError::NoDevice { .. })) => {}
            Err(e) => panic!("expected NoDevice, got {e}"),
            Ok(_) => panic!("a backend without a GPU"),
        }
    }
}
