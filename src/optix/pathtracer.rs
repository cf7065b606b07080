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
//! module, the pipeline and the shader binding table. All of that is immutable afterwards and
//! shared (`Arc`) by every [`OptixWorker`] made with [`OptixBackend::worker`]: a worker owns
//! only a CUDA stream, its launch-parameter buffer, a tile accumulation buffer and its ray
//! counters, so N workers on one GPU run N launches at once on N streams. The tile scheduler
//! makes one worker per stream (`--devices gpu0x4`: four workers) and hands each its tiles;
//! both [`OptixBackend`] and [`OptixWorker`] implement [`TileRenderer`]. Used directly as a
//! renderer, [`OptixBackend`] keeps a pool of workers and lends one to each concurrent
//! `render_tile` call, so callers that render tiles from many threads get one stream each.
//!
//! # A launch
//!
//! `render_tile(tile, samples, accum)`: the tile's accumulation is uploaded, then launches of
//! `tile.w * tile.h` threads add the samples (in chunks of at most
//! [`launch::SAMPLES_PER_LAUNCH`] pixel-samples per launch, each pixel's samples in order), and
//! the result is downloaded. Every launch is wrapped in an NVTX range naming the worker, the
//! tile and the sample range ("launch optix:0/w1 tile 64x64+128+0 samples 0..16"), and each
//! worker's stream is named after it, so a profile shows the builds (the ranges of
//! `optix::accel`), then the launches per stream.

pub mod launch;
pub mod layout;
pub mod pack;

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use thiserror::Error;

use self::launch::{
    frame_params, launch_width, sample_chunks, tile_params, LaunchError, SAMPLES_PER_LAUNCH,
};
use self::layout::{GwHitGroupData, GwLaunchParams};
use self::pack::{hit_group_data, pack_scene, PackError};
use super::accel::{Accel, AccelError, AccelOptions, AccelStats};
use super::context::{ContextOptions, DeviceContext};
use super::cuda::{DeviceBuffer, Gpu, GpuInfo, Stream};
use super::error::{CudaError, OptixError};
use super::pipeline::{
    self, Module, ModuleCompileOptions, Pipeline, PipelineCompileOptions, ProgramGroup, SbtRecord,
    ShaderBindingTable,
};
use super::sys::Abi;
use crate::nvtx;
use crate::render::{RenderSettings, Tile, TileRenderer};
use crate::scene::Scene;

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
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(
        "an OptiX worker's buffers were left in an unknown state by a panic in another thread"
    )]
    Poisoned,
}

/// How to set the backend up: which GPU, how to create the OptiX context (`--optix-abi`,
/// `--validation`) and how to build the GASes (`--streams`, `--merge-below`...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptixOptions {
    /// CUDA device ordinal.
    pub device: usize,
    pub context: ContextOptions,
    pub accel: AccelOptions,
}

impl OptixOptions {
    /// From the render command's build options, on GPU 0.
    pub fn from_cli(args: &crate::cli::AccelArgs) -> Result<OptixOptions, OptixError> {
        Ok(OptixOptions {
            device: 0,
            context: ContextOptions::from_cli(args.optix_abi, args.validation)?,
            accel: AccelOptions::from(args),
        })
    }
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
/// pipeline go before the buffers and structures they name, the context last.
struct Shared {
    sbt: ShaderBindingTable,
    pipeline: Pipeline,
    _scene_buffer: DeviceBuffer,
    /// The IAS the launches trace (its handle is in `frame`) and the GASes under it.
    _accel: Accel,
    frame: GwLaunchParams,
    settings: RenderSettings,
    report: BuildReport,
    ctx: Arc<DeviceContext>,
    rays: AtomicU64,
    non_finite: AtomicU64,
    next_worker: AtomicU32,
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
        let gpu = Gpu::open(options.device)?;
        let ctx = DeviceContext::new(&gpu, &options.context)?;

        let t_accel = Instant::now();
        // Returns once the IAS is built.
        let accel = Accel::build(&ctx, scene, &options.accel)?;
        let accel_seconds = t_accel.elapsed().as_secs_f64();

        let t_setup = Instant::now();
        let packed = {
            let _range = nvtx::range("pack scene for the GPU");
            pack_scene(scene)?
        };
        let stream = accel.stream();
        let scene_buffer = {
            let _range = nvtx::range_with(|| format!("upload scene: {} bytes", packed.bytes.len()));
            gpu.upload(stream, &packed.bytes)?
        };
        let base = scene_buffer.device_ptr();

        let pipeline_options = PipelineCompileOptions {
            num_payload_values: PAYLOAD_VALUES,
            launch_params_variable_name: LAUNCH_PARAMS_NAME.into(),
            ..PipelineCompileOptions::default()
        };
        let _range = nvtx::range("path tracer pipeline and SBT");
        let module = Module::from_ptx(
            &ctx,
            "pathtrace.ptx",
            PATHTRACE_PTX,
            &ModuleCompileOptions::default(),
            &pipeline_options,
        )?;
        let raygen = ProgramGroup::raygen(&ctx, &module, "__raygen__pathtrace")?;
        let miss = ProgramGroup::miss(&ctx, &module, "__miss__pathtrace")?;
        let hit = ProgramGroup::closest_hit(&ctx, &module, "__closesthit__pathtrace")?;
        // The raygen program traces (radiance and shadow rays); closest hit and miss do not.
        let pipeline = Pipeline::new(
            &ctx,
            &pipeline_options,
            1,
            &[raygen.clone(), miss.clone(), hit.clone()],
        )?;

        // One hit record per (GAS, build input): the accel's record order, so that the IAS
        // instances' sbtOffsets find them.
        let hit_data = hit_group_data(&packed, base, &accel.table().record_groups)?;
        let hit_records = hit_data
            .iter()
            .map(|d| SbtRecord::new(&hit, *d))
            .collect::<Result<Vec<SbtRecord<GwHitGroupData>>, _>>()?;
        let sbt = ShaderBindingTable::builder()
            .raygen(SbtRecord::new(&raygen, ())?)?
            .miss(&[SbtRecord::new(&miss, ())?])?
            .hitgroup(&hit_records)?
            .build(&gpu, stream)?;
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
            hit_records: hit_records.len(),
        };
        Ok(OptixBackend {
            shared: Arc::new(Shared {
                sbt,
                pipeline,
                _scene_buffer: scene_buffer,
                _accel: accel,
                frame,
                settings: *settings,
                report,
                ctx,
                rays: AtomicU64::new(0),
                non_finite: AtomicU64::new(0),
                next_worker: AtomicU32::new(0),
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

    pub fn settings(&self) -> &RenderSettings {
        &self.shared.settings
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
            "optix on {}, OptiX {}; {} groups in {} GASes{}, IAS {} bytes",
            self.gpu_info(),
            self.abi(),
            r.accel.groups,
            r.accel.gases,
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

    /// Renders on a pooled worker (a new one when every pooled worker is busy), so that calls
    /// from several threads run on several streams.
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        let pooled = self
            .pool
            .lock()
            .map_err(|_| PathTracerError::Poisoned)?
            .pop();
        let worker = match pooled {
            Some(w) => w,
            None => self.worker()?,
        };
        let result = worker.render(tile, samples, accum);
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

/// What one worker owns: a stream and the buffers its launches write.
struct WorkerState {
    stream: Stream,
    /// Exactly `size_of::<GwLaunchParams>()` bytes, as optixLaunch requires.
    params: DeviceBuffer,
    /// The tile's float4 accumulation; grown to the largest tile seen.
    accum: DeviceBuffer,
    /// Two u64 the device adds to: rays, non-finite samples.
    counters: DeviceBuffer,
    /// The counters' values after the previous tile (they only grow).
    seen: [u64; 2],
}

/// One stream's renderer on a shared [`OptixBackend`] (see the module comment).
pub struct OptixWorker {
    shared: Arc<Shared>,
    index: u32,
    state: Mutex<WorkerState>,
}

impl OptixWorker {
    fn new(shared: Arc<Shared>) -> Result<OptixWorker, PathTracerError> {
        let gpu = shared.ctx.gpu().clone();
        let stream = gpu.new_stream()?;
        let params = gpu.alloc(std::mem::size_of::<GwLaunchParams>())?;
        let counters = DeviceBuffer::zeroed(&gpu, &stream, 2 * std::mem::size_of::<u64>())?;
        let accum = gpu.alloc(0)?;
        let index = shared.next_worker.fetch_add(1, Ordering::Relaxed);
        nvtx::name_cuda_stream(&stream, &worker_label(gpu.ordinal(), index));
        Ok(OptixWorker {
            shared,
            index,
            state: Mutex::new(WorkerState {
                stream,
                params,
                accum,
                counters,
                seen: [0; 2],
            }),
        })
    }

    /// "optix:0/w3": the GPU and the worker, as profiles and statistics name it.
    pub fn label(&self) -> String {
        worker_label(self.shared.ctx.gpu().ordinal(), self.index)
    }

    /// Adds samples `samples` of every pixel of `tile` to `accum` (see [`TileRenderer`]).
    pub fn render(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> Result<(), PathTracerError> {
        let settings = &self.shared.settings;
        let threads = launch_width(tile, settings.width, settings.height, accum.len())?;
        if threads == 0 || samples.is_empty() {
            return Ok(());
        }
        let mut guard = self.state.lock().map_err(|_| PathTracerError::Poisoned)?;
        let st = &mut *guard;
        let gpu = self.shared.ctx.gpu();
        let bytes = std::mem::size_of_val(accum);
        if st.accum.len_bytes() < bytes {
            st.accum = gpu.alloc(bytes)?;
        }
        st.accum.upload(&st.stream, 0, accum)?;
        for chunk in sample_chunks(u64::from(threads), samples, SAMPLES_PER_LAUNCH) {
            let params = tile_params(
                &self.shared.frame,
                tile,
                chunk.clone(),
                st.accum.device_ptr(),
                st.counters.device_ptr(),
            );
            st.params
                .upload(&st.stream, 0, bytemuck::bytes_of(&params))?;
            let _range = nvtx::range_with(|| {
                format!(
                    "launch {} tile {}x{}+{}+{} samples {}..{}",
                    self.label(),
                    tile.w,
                    tile.h,
                    tile.x,
                    tile.y,
                    chunk.start,
                    chunk.end
                )
            });
            pipeline::launch(
                &self.shared.pipeline,
                &st.stream,
                &st.params,
                &self.shared.sbt,
                threads,
                1,
                1,
            )?
            .wait()?;
        }
        st.accum.download_into(&st.stream, 0, accum)?;
        let counters = st.counters.download::<u64>(&st.stream, 0, 2)?;
        self.shared
            .rays
            .fetch_add(counters[0].wrapping_sub(st.seen[0]), Ordering::Relaxed);
        self.shared
            .non_finite
            .fetch_add(counters[1].wrapping_sub(st.seen[1]), Ordering::Relaxed);
        st.seen = [counters[0], counters[1]];
        Ok(())
    }
}

fn worker_label(gpu: usize, index: u32) -> String {
    format!("optix:{gpu}/w{index}")
}

impl TileRenderer for OptixWorker {
    fn name(&self) -> String {
        self.label()
    }

    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        Ok(self.render(tile, samples, accum)?)
    }
}

impl Drop for WorkerState {
    fn drop(&mut self) {
        // Launches are waited for before render() returns; this covers an error path that
        // left copies in flight, so the buffers are not freed under them.
        if let Err(e) = self.stream.synchronize() {
            log::warn!("waiting for an OptiX worker's stream before freeing its buffers: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_ptx_has_the_programs_and_parameters_the_host_names() {
        for entry in [
            ".entry __raygen__pathtrace",
            ".entry __closesthit__pathtrace",
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
        // Six payload registers in every trace.
        assert!(PATHTRACE_PTX.contains("_optix_trace_typed_32"));
    }

    #[test]
    fn options_come_from_the_cli() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            accel: crate::cli::AccelArgs,
        }
        let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap().accel;
        let args = parse(&[
            "t",
            "--streams",
            "4",
            "--fast-build",
            "--assign",
            "lpt",
            "--scratch",
            "per-stream",
            "--compact",
            "--merge-below",
            "100",
            "--validation",
            "--optix-abi",
            "87",
        ]);
        let o = OptixOptions::from_cli(&args).unwrap();
        assert_eq!(o.device, 0);
        assert!(o.context.validation);
        assert_eq!(o.context.abi, super::super::AbiRequest::Exactly(Abi::V87));
        assert_eq!(o.accel.streams, 4);
        assert!(o.accel.fast_build && o.accel.compact);
        assert_eq!(o.accel.merge.merge_below, 100);
        let bad = crate::cli::AccelArgs {
            optix_abi: Some(42),
            ..args
        };
        assert!(matches!(
            OptixOptions::from_cli(&bad),
            Err(OptixError::UnsupportedAbiRequest { requested: 42 })
        ));
    }

    /// Without a GPU, setting the backend up fails with the CUDA layer's "no device" error, not
    /// a panic. (With one, it is covered by the ignored GPU tests.)
    #[test]
    fn new_without_a_gpu_is_an_error() {
        if crate::optix::probe().is_ok() {
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
