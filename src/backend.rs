//! Choosing a backend: the one place that knows every backend, so that the CLI, the tile
//! scheduler and the tests ask for "a renderer" and nothing more.

use std::time::Instant;

use crate::cli::AccelArgs;
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
}

pub fn select(
    choice: BackendChoice,
    scene: &Scene,
    settings: &RenderSettings,
    _accel: &AccelArgs,
) -> anyhow::Result<Backend> {
    let why_cpu = match choice {
        BackendChoice::Cpu => "requested with --backend cpu".to_string(),
        BackendChoice::Auto | BackendChoice::Optix => {
            let reason = "the OptiX path tracer is not built yet".to_string();
            if choice == BackendChoice::Optix {
                anyhow::bail!("--backend optix: {reason}");
            }
            reason
        }
    };
    let t = Instant::now();
    let cpu = crate::cpu::CpuBackend::new(scene, settings);
    Ok(Backend {
        description: format!("cpu ({} threads; {why_cpu})", rayon::current_num_threads()),
        build_seconds: t.elapsed().as_secs_f64(),
        renderer: Box::new(cpu),
    })
}
