//! Choosing a backend: the one place that knows every backend, so that the CLI, the tile
//! scheduler and the tests ask for "a renderer" and nothing more.
//!
//! - `cpu`: the CPU reference backend.
//! - `optix`: the OptiX path tracer on GPU 0; an error (never a panic) when no GPU, driver or
//!   OptiX can be used, saying which.
//! - `auto`: OptiX when an NVIDIA GPU and driver are present and the backend can be set up,
//!   saying so; otherwise the CPU, saying why not.

use std::time::Instant;

use anyhow::Context;

use crate::cli::AccelArgs;
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

pub fn select(
    choice: BackendChoice,
    scene: &Scene,
    settings: &RenderSettings,
    accel: &AccelArgs,
) -> anyhow::Result<Backend> {
    match choice {
        BackendChoice::Cpu => Ok(cpu_backend(scene, settings, "requested with --backend cpu")),
        BackendChoice::Optix => {
            let options = OptixOptions::from_cli(accel)?;
            optix_backend(scene, settings, &options, "requested with --backend optix")
                .context("--backend optix")
        }
        BackendChoice::Auto => {
            // Bad options are the user's to fix, whichever backend would run.
            let options = OptixOptions::from_cli(accel)?;
            if let Err(e) = crate::optix::probe() {
                return Ok(cpu_backend(scene, settings, &format!("auto: {e}")));
            }
            match optix_backend(
                scene,
                settings,
                &options,
                "picked by --backend auto: an NVIDIA GPU and driver are present",
            ) {
                Ok(b) => Ok(b),
                Err(e) => Ok(cpu_backend(
                    scene,
                    settings,
                    &format!("auto: the OptiX backend could not be used: {e}"),
                )),
            }
        }
    }
}

fn cpu_backend(scene: &Scene, settings: &RenderSettings, why: &str) -> Backend {
    let t = Instant::now();
    let cpu = crate::cpu::CpuBackend::new(scene, settings);
    Backend {
        description: format!("cpu ({} threads; {why})", rayon::current_num_threads()),
        build_seconds: t.elapsed().as_secs_f64(),
        renderer: Box::new(cpu),
        optix: None,
    }
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
            "{} ({why}); GAS builds over {} streams, setup {:.3} s",
            optix.describe(),
            options.accel.streams.max(1),
            report.setup_seconds
        ),
        build_seconds: report.accel_seconds,
        renderer: Box::new(optix.clone()),
        optix: Some(optix),
    })
}
