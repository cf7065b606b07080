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
    scene: &Scene,
    settings: &RenderSettings,
    options: &OptixOptions,
) -> anyhow::Result<Backend> {
    match choice {
        BackendChoice::Cpu => Ok(cpu_backend(
            scene,
            settings,
            "requested with --backend cpu",
        )?),
        BackendChoice::Optix => {
            optix_backend(scene, settings, options, "requested with --backend optix")
                .context("--backend optix")
        }
        BackendChoice::Auto => {
            if let Err(e) = crate::optix::probe() {
                return Ok(cpu_backend(scene, settings, &format!("auto: {e}"))?);
            }
            match optix_backend(
                scene,
                settings,
                options,
                "picked by --backend auto: an NVIDIA GPU and driver are present",
            ) {
                Ok(b) => Ok(b),
                // The scene or the settings are wrong whichever backend runs them.
                Err(PathTracerError::Input(e)) => Err(e.into()),
                Err(e) => Ok(cpu_backend(
                    scene,
                    settings,
                    &format!("auto: the OptiX backend could not be used: {e}"),
                )?),
            }
        }
    }
}

fn cpu_backend(
    scene: &Scene,
    settings: &RenderSettings,
    why: &str,
) -> Result<Backend, crate::render::InputError> {
    let t = Instant::now();
    let cpu = crate::cpu::CpuBackend::new(scene, settings)?;
    Ok(Backend {
        description: {
            let threads = rayon::current_num_threads();
            let plural = if threads == 1 { "" } else { "s" };
            format!("cpu ({threads} thread{plural}; {why})")
        },
        build_seconds: t.elapsed().as_secs_f64(),
        renderer: Box::new(cpu),
        optix: None,
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
    Ok(Backend {
        description: format!(
            "{} ({why}); GAS builds over {} streams ({} hardware queues), setup {:.3} s",
            optix.describe(),
            options.accel.streams.max(1),
            crate::optix::cuda::work_queues(),
            report.setup_seconds
        ),
        build_seconds: report.accel_seconds,
        renderer: Box::new(optix.clone()),
        optix: Some(optix),
    })
}

/// Where the tile scheduler's workers get their renderers ([`crate::sched::RendererFactory`]).
///
/// - `cpu` workers share one CPU renderer: the selected backend's when it is the CPU, else one
///   built on first use (so `--devices gpu0,cpu:1` mixes both).
/// - `gpuD` workers get an [`OptixBackend::worker`] each (own CUDA stream and buffers), sharing
///   GPU D's acceleration structures. GPU 0's backend is the selected one when it is OptiX;
///   other GPUs (and GPU 0 after a CPU selection) are set up on first use with the same build
///   options, and fail with the driver's reason when they cannot be.
pub struct WorkerFactory<'a> {
    scene: &'a Scene,
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

impl<'a> WorkerFactory<'a> {
    pub fn new(
        scene: &'a Scene,
        settings: &RenderSettings,
        options: &OptixOptions,
        backend: Backend,
    ) -> WorkerFactory<'a> {
        let mut gpus = HashMap::new();
        let selected_is_cpu = backend.optix.is_none();
        if let Some(optix) = backend.optix {
            gpus.insert(0, optix);
        }
        WorkerFactory {
            scene,
            settings: *settings,
            options: options.clone(),
            late_backends: Mutex::new(Vec::new()),
            selected: Arc::from(backend.renderer),
            selected_is_cpu,
            cpu: OnceLock::new(),
            gpus: Mutex::new(gpus),
        }
    }

    /// Rays traced by every GPU so far, when a GPU rendered.
    pub fn rays_traced(&self) -> Option<u64> {
        let gpus = self.gpus.lock().ok()?;
        if gpus.is_empty() {
            return None;
        }
        Some(gpus.values().map(|g| g.counters().rays).sum())
    }

    /// The backends set up on first use (`--devices gpu1,...` beyond the selected one, and the
    /// CPU beside a selected GPU), each described as "gpuD: ..." or "cpu: ...", in the order
    /// they were set up.
    pub fn late_backends(&self) -> Vec<String> {
        self.late_backends
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
}

impl crate::sched::RendererFactory for WorkerFactory<'_> {
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>> {
        if self.selected_is_cpu {
            return Ok(self.selected.clone());
        }
        if let Some(cpu) = self.cpu.get() {
            return Ok(cpu.clone());
        }
        // Built here, on first use, inside the frame's time: said with its seconds, since it
        // is paid even when the CPU threads end up taking no tile. (On an H200, a 3M-triangle
        // toystore's frame took 0.82 s with `gpu0x2,cpu`, the CPU threads taking no tile,
        // against 0.66 s with `gpu0x2`; how much of that was this setup was not measured.)
        let t = Instant::now();
        let cpu: Arc<dyn TileRenderer> =
            Arc::new(crate::cpu::CpuBackend::new(self.scene, &self.settings)?);
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
                let backend = OptixBackend::new(self.scene, &self.settings, &options)
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
