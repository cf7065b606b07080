//! Choosing a backend: the one place that knows every backend, so that the CLI, the tile
//! scheduler and the tests ask for "a renderer" and nothing more.
//!
//! - `cpu`: the CPU reference backend.
//! - `optix`: the OptiX path tracer on GPU 0; an error (never a panic) when no GPU, driver or
//!   OptiX can be used, saying which.
//! - `auto`: OptiX when an NVIDIA GPU and driver are present and the backend can be set up,
//!   saying so; otherwise the CPU, saying why not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use anyhow::Context;

use crate::cpu::SharedBvh;
use crate::optix::pathtracer::{OptixBackend, OptixOptions, PathTracerError};
use crate::render::{RenderSettings, TileRenderer};
use crate::scene::Scene;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// OptiX when a GPU and a recent enough driver are present, else the CPU.
    Auto,
    Cpu,
    Optix,
}

/// A ready backend: acceleration structures built, waiting for tiles.
pub struct Backend {
    pub renderer: Box<dyn TileRenderer>,
    /// What was picked and why, for the user.
    pub description: String,
    /// Seconds spent building acceleration structures.
    pub build_seconds: f64,
    /// The OptiX backend, when it was picked: the tile scheduler makes one worker per GPU stream
    /// from it ([`OptixBackend::worker`]), all sharing its acceleration structures.
    pub optix: Option<OptixBackend>,
    /// The CPU backend for `cpu` workers beside the selected GPU, when [`select_beside`] was
    /// asked for one: built on another thread while the GPU was set up.
    pub cpu_beside: Option<CpuBeside>,
}

/// A CPU backend set up beside the OptiX one, at the same time ([`select_beside`]).
pub struct CpuBeside {
    pub renderer: Arc<dyn TileRenderer>,
    /// Seconds its setup (the CPU BVH) took, on its own thread.
    pub seconds: f64,
    /// Seconds the GPU's setup took meanwhile, on the calling thread.
    pub beside_seconds: f64,
}

impl Backend {
    /// Rays traced so far, for backends that count them (OptiX).
    pub fn rays_traced(&self) -> Option<u64> {
        self.optix.as_ref().map(|o| o.counters().rays)
    }
}

/// Sets up the backend `choice` names. `options` say how the OptiX backend is built (GPU 0,
/// context, GAS builds) when it is tried.
pub fn select(
    choice: BackendChoice,
    scene: &Arc<Scene>,
    settings: &RenderSettings,
    options: &OptixOptions,
) -> anyhow::Result<Backend> {
    select_beside(
        choice,
        scene,
        settings,
        options,
        false,
        SharedBvh::default(),
    )
}

/// [`select`], and when `cpu_too` (`--devices` has a `cpu` entry) and the GPU is tried, the CPU
/// backend for those workers as well ([`Backend::cpu_beside`]), built on another thread while
/// the GPU is set up: otherwise the CPU BVH is built on first use, inside the frame, and every
/// GPU worker waits for it (on a large scene, most of a short frame: figures in
/// docs/guide/workers.md#mixed-devices). When the GPU cannot be used (`auto`), the CPU backend
/// built meanwhile becomes the selected one: it is never built twice.
///
/// `cpu_bvh`: the scene's CPU BVH, shared with whoever else may build or hold it (the
/// environment-share probe, [`crate::cpu::environment_share`], built it before; `render
/// --aov`'s layers, traced beside a GPU, build it meanwhile): a CPU backend, selected or beside
/// the GPU, traces that one rather than building its own. A GPU without CPU workers has no
/// use for it: it is dropped before the GPU's setup, unless `auto` may yet fall back to the
/// CPU.
pub fn select_beside(
    choice: BackendChoice,
    scene: &Arc<Scene>,
    settings: &RenderSettings,
    options: &OptixOptions,
    cpu_too: bool,
    cpu_bvh: SharedBvh,
) -> anyhow::Result<Backend> {
    match choice {
        BackendChoice::Cpu => Ok(cpu_backend(
            scene,
            settings,
            "requested with --backend cpu",
            cpu_bvh,
        )?),
        BackendChoice::Optix => {
            let beside = if cpu_too { Some(cpu_bvh) } else { None };
            let (optix, cpu) = optix_and_cpu(
                scene,
                settings,
                options,
                beside,
                "requested with --backend optix",
            );
            let mut backend = optix.context("--backend optix")?;
            backend.cpu_beside = cpu.transpose()?.map(BuiltCpu::beside);
            Ok(backend)
        }
        BackendChoice::Auto => {
            if let Err(e) = crate::optix::probe() {
                return Ok(cpu_backend(
                    scene,
                    settings,
                    &format!("auto: {e}"),
                    cpu_bvh,
                )?);
            }
            // Without CPU workers, kept for the fallback below (a GPU that cannot be used).
            let (beside, fallback_bvh) = if cpu_too {
                (Some(cpu_bvh), SharedBvh::default())
            } else {
                (None, cpu_bvh)
            };
            let (optix, cpu) = optix_and_cpu(
                scene,
                settings,
                options,
                beside,
                "picked by --backend auto: an NVIDIA GPU and driver are present",
            );
            match optix {
                Ok(mut b) => {
                    b.cpu_beside = cpu.transpose()?.map(BuiltCpu::beside);
                    Ok(b)
                }
                // The scene or the settings are wrong whichever backend runs them.
                Err(PathTracerError::Input(e)) => Err(e.into()),
                Err(e) => {
                    let why = format!("auto: the OptiX backend could not be used: {e}");
                    match cpu {
                        Some(built) => {
                            let built = built?;
                            Ok(Backend {
                                description: cpu_description(&why),
                                build_seconds: built.seconds
                                    + built.backend.bvh_seconds_before_setup(),
                                renderer: Box::new(built.backend),
                                optix: None,
                                cpu_beside: None,
                            })
                        }
                        None => Ok(cpu_backend(scene, settings, &why, fallback_bvh)?),
                    }
                }
            }
        }
    }
}

/// The GPU backends a camera path keeps from one frame to the next, by device.
pub type KeptGpus = [(u32, OptixBackend)];

/// The backend of a camera path's frame after the first, on GPU 0's backend as the first frame
/// set it up, already set for this frame ([`OptixBackend::set_frame`]): its acceleration
/// structures, the scene on the device and the compiled modules kept, nothing built (the
/// frame's workers link their pipelines). With `cpu_too`, the CPU backend beside it on
/// `cpu_bvh`.
pub fn select_again(
    gpu: &OptixBackend,
    scene: &Arc<Scene>,
    settings: &RenderSettings,
    cpu_too: bool,
    cpu_bvh: SharedBvh,
) -> anyhow::Result<Backend> {
    let cpu_beside = match cpu_too {
        true => {
            let t = Instant::now();
            let cpu = crate::cpu::CpuBackend::on_shared(Arc::clone(scene), settings, &cpu_bvh)?;
            Some(CpuBeside {
                renderer: Arc::new(cpu),
                seconds: t.elapsed().as_secs_f64(),
                beside_seconds: 0.0,
            })
        }
        false => None,
    };
    Ok(Backend {
        description: format!(
            "{} (as the first frame set it up: its GASes, IAS and modules kept)",
            gpu.describe()
        ),
        build_seconds: 0.0,
        renderer: Box::new(gpu.clone()),
        optix: Some(gpu.clone()),
        cpu_beside,
    })
}

/// The OptiX backend, and when `beside` is given the CPU backend (on its BVH when it holds
/// one), built on a scoped thread at the same time (the CPU BVH build is host work; the OptiX
/// setup mostly waits for the driver and the GPU).
fn optix_and_cpu(
    scene: &Arc<Scene>,
    settings: &RenderSettings,
    options: &OptixOptions,
    beside: Option<SharedBvh>,
    why: &str,
) -> (
    Result<Backend, PathTracerError>,
    Option<anyhow::Result<BuiltCpu>>,
) {
    let Some(cpu_bvh) = beside else {
        return (optix_backend(scene, settings, options, why), None);
    };
    std::thread::scope(|scope| {
        let cpu = scope.spawn(|| {
            let t = Instant::now();
            let cpu = crate::cpu::CpuBackend::on_shared(Arc::clone(scene), settings, &cpu_bvh)?;
            // The seconds this thread took: beside the GPU, what overlapped its setup.
            Ok::<_, crate::render::InputError>((cpu, t.elapsed().as_secs_f64()))
        });
        let t = Instant::now();
        let optix = optix_backend(scene, settings, options, why);
        let beside_seconds = t.elapsed().as_secs_f64();
        let cpu = match cpu.join() {
            Ok(Ok((backend, seconds))) => Ok(BuiltCpu {
                backend,
                seconds,
                beside_seconds,
            }),
            Ok(Err(e)) => Err(anyhow::Error::from(e).context("the CPU backend beside the GPU")),
            Err(_) => Err(anyhow::anyhow!(
                "the CPU backend's setup beside the GPU panicked"
            )),
        };
        (optix, Some(cpu))
    })
}

/// The CPU backend [`optix_and_cpu`] built, before it is either kept beside the GPU or
/// selected in its place.
struct BuiltCpu {
    backend: crate::cpu::CpuBackend,
    seconds: f64,
    beside_seconds: f64,
}

impl BuiltCpu {
    fn beside(self) -> CpuBeside {
        CpuBeside {
            renderer: Arc::new(self.backend),
            seconds: self.seconds,
            beside_seconds: self.beside_seconds,
        }
    }
}

fn cpu_description(why: &str) -> String {
    let threads = rayon::current_num_threads();
    let plural = if threads == 1 { "" } else { "s" };
    format!("cpu ({threads} thread{plural}; {why})")
}

fn cpu_backend(
    scene: &Arc<Scene>,
    settings: &RenderSettings,
    why: &str,
    bvh: SharedBvh,
) -> Result<Backend, crate::render::InputError> {
    let t = Instant::now();
    let cpu = crate::cpu::CpuBackend::on_shared(Arc::clone(scene), settings, &bvh)?;
    Ok(Backend {
        description: cpu_description(why),
        build_seconds: t.elapsed().as_secs_f64() + cpu.bvh_seconds_before_setup(),
        renderer: Box::new(cpu),
        optix: None,
        cpu_beside: None,
    })
}

fn optix_backend(
    scene: &Scene,
    settings: &RenderSettings,
    options: &OptixOptions,
    why: &str,
) -> Result<Backend, PathTracerError> {
    let optix = OptixBackend::new(scene, settings, options)?;
    let report = optix.report();
    let enqueue = match options.accel.enqueue_description() {
        e if e.is_empty() => e,
        e => format!(", {e}"),
    };
    Ok(Backend {
        description: format!(
            "{} ({why}); GAS builds over {} streams ({} hardware queues{enqueue}), setup {:.3} s",
            optix.describe(),
            options.accel.streams.max(1),
            crate::optix::cuda::work_queues(),
            report.setup_seconds
        ),
        build_seconds: report.accel_seconds,
        renderer: Box::new(optix.clone()),
        optix: Some(optix),
        cpu_beside: None,
    })
}

/// Where the tile scheduler's workers get their renderers ([`crate::sched::RendererFactory`]).
///
/// - `cpu` workers share one CPU renderer: the selected backend's when it is the CPU, else the
///   one [`select_beside`] built during the GPU's setup, else one built on first use (so
///   `--devices gpu0,cpu:1` mixes both).
/// - `gpuD` workers get an [`OptixBackend::worker`] each (own CUDA stream and buffers), sharing
///   GPU D's acceleration structures. GPU 0's backend is the selected one when it is OptiX;
///   other GPUs (and GPU 0 after a CPU selection) are set up on first use with the same build
///   options, and fail with the driver's reason when they cannot be.
pub struct WorkerFactory {
    /// The scene, shared with the CPU backend (never copied for it).
    scene: Arc<Scene>,
    settings: RenderSettings,
    /// How GPUs set up on first use are built (`device` is replaced by theirs).
    options: OptixOptions,
    /// What was set up on first use, for the user ("gpu1: ...").
    late_backends: Mutex<Vec<String>>,
    selected: Arc<dyn TileRenderer>,
    selected_is_cpu: bool,
    cpu: OnceLock<Arc<dyn TileRenderer>>,
    gpus: Mutex<HashMap<u32, OptixBackend>>,
}

impl WorkerFactory {
    pub fn new(
        scene: &Arc<Scene>,
        settings: &RenderSettings,
        options: &OptixOptions,
        backend: Backend,
    ) -> WorkerFactory {
        let mut gpus = HashMap::new();
        let selected_is_cpu = backend.optix.is_none();
        if let Some(optix) = backend.optix {
            gpus.insert(0, optix);
        }
        let (cpu, mut said) = (OnceLock::new(), Vec::new());
        if let Some(beside) = backend.cpu_beside {
            said.push(format!(
                "cpu: the CPU backend beside the GPU workers, set up in {:.3} s on its own \
                 thread while the GPU was set up ({:.3} s)",
                beside.seconds, beside.beside_seconds
            ));
            let _ = cpu.set(beside.renderer);
        }
        WorkerFactory {
            scene: Arc::clone(scene),
            settings: *settings,
            options: options.clone(),
            late_backends: Mutex::new(said),
            selected: Arc::from(backend.renderer),
            selected_is_cpu,
            cpu,
            gpus: Mutex::new(gpus),
        }
    }

    /// Every GPU's backend set up so far, by device: what a camera path's next frame sets
    /// again ([`OptixBackend::set_frame`]) rather than builds.
    pub fn gpu_backends(&self) -> Vec<(u32, OptixBackend)> {
        self.gpus
            .lock()
            .map(|g| g.iter().map(|(&d, b)| (d, b.clone())).collect())
            .unwrap_or_default()
    }

    /// The factory with the GPUs of `known` (those not set up already) taken as they are,
    /// already set for this frame: a camera path's backends from its last frame.
    pub fn with_gpus(self, known: &KeptGpus) -> WorkerFactory {
        if let Ok(mut gpus) = self.gpus.lock() {
            for (device, backend) in known {
                gpus.entry(*device).or_insert_with(|| backend.clone());
            }
        }
        self
    }

    /// Rays traced so far by every GPU and the CPU backend, when any of them rendered.
    pub fn rays_traced(&self) -> Option<u64> {
        let gpus = self.gpus.lock().ok()?;
        let gpu = (!gpus.is_empty()).then(|| gpus.values().map(|g| g.counters().rays).sum());
        let cpu = match self.selected_is_cpu {
            true => self.selected.rays_traced(),
            false => self.cpu.get().and_then(|c| c.rays_traced()),
        };
        match (gpu, cpu) {
            (None, None) => None,
            (gpu, cpu) => Some(gpu.unwrap_or(0) + cpu.unwrap_or(0)),
        }
    }

    /// The backends set up beside the selected one (`--devices gpu1,...` beyond it, on first
    /// use, and the CPU beside a selected GPU, during its setup or on first use), each described as "gpuD: ..." or "cpu: ...", in the order
    /// they were set up.
    pub fn late_backends(&self) -> Vec<String> {
        self.late_backends
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
}

impl crate::sched::RendererFactory for WorkerFactory {
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>> {
        if self.selected_is_cpu {
            return Ok(self.selected.clone());
        }
        if let Some(cpu) = self.cpu.get() {
            return Ok(cpu.clone());
        }
        // Built here, on first use, inside the frame's time, when the caller did not ask
        // `select_beside` for it: said with its seconds, since it is paid even when the CPU
        // threads end up taking no tile (figures: docs/guide/workers.md#mixed-devices).
        let t = Instant::now();
        let cpu: Arc<dyn TileRenderer> = Arc::new(crate::cpu::CpuBackend::sharing(
            Arc::clone(&self.scene),
            &self.settings,
            None,
        )?);
        if let Ok(mut late) = self.late_backends.lock() {
            late.push(format!(
                "cpu: the CPU backend beside the GPU workers, set up in {:.3} s",
                t.elapsed().as_secs_f64()
            ));
        }
        Ok(self.cpu.get_or_init(|| cpu).clone())
    }

    fn gpu(&self, device: u32, _stream: u32) -> anyhow::Result<Arc<dyn TileRenderer>> {
        let mut gpus = self
            .gpus
            .lock()
            .map_err(|_| anyhow::anyhow!("a GPU worker's setup panicked"))?;
        let backend = match gpus.entry(device) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut options = self.options.clone();
                options.device = device as usize;
                let backend = OptixBackend::new(&self.scene, &self.settings, &options)
                    .with_context(|| {
                        format!("--devices gpu{device}: cannot set up the OptiX backend")
                    })?;
                if let Ok(mut late) = self.late_backends.lock() {
                    late.push(format!("gpu{device}: {}", backend.describe()));
                }
                e.insert(backend)
            }
        };
        let worker = backend
            .worker()
            .with_context(|| format!("--devices gpu{device}: cannot create a worker"))?;
        Ok(Arc::new(worker))
    }
}
