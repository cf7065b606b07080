//! The guide layers of a render (`--aov`; [`crate::cpu::aov`] traces them): traced before
//! the frame or, where the frame runs on GPUs alone, beside it on low-priority threads
//! ([`PendingAovs`]), and written after the image, on rank 0.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use super::options::{aov_path, RenderOptions};
use crate::console::Verbosity;
use crate::cpu::SharedBvh;
use crate::render::output::{self, ImageMeta};
use crate::render::{RenderSettings, Tile};
use crate::scene::Scene;

/// The --aov layers of a window, traced before the frame (so that a --time-limit counts
/// them) or beside a frame on GPUs alone, and written after its image ([`write_aovs`]).
pub(super) struct TracedAovs {
    layers: crate::cpu::aov::GuideLayers,
    window: Tile,
    samples: u32,
    seconds: f64,
    /// Traced on a thread of their own while the frame ran on GPUs alone.
    beside_gpu: bool,
}

/// The layers of `window` at `samples` per pixel on `bvh` (built here, or waited for, when
/// not yet built), timed.
fn trace_layers(
    scene: &Scene,
    bvh: &SharedBvh,
    settings: &RenderSettings,
    window: Tile,
    samples: u32,
    beside_gpu: bool,
) -> TracedAovs {
    let t = Instant::now();
    let bvh = bvh.get_or_build(scene);
    TracedAovs {
        layers: crate::cpu::aov::guide_layers(scene, &bvh, settings, window, samples),
        window,
        samples,
        seconds: t.elapsed().as_secs_f64(),
        beside_gpu,
    }
}

/// Whether the frame `a` asks for will run on GPUs alone: a backend that may pick the GPU, a
/// GPU the driver lists, and no CPU worker named by `--devices` (without `--devices` a GPU
/// backend makes GPU workers only). A GPU that then fails its setup falls back to the CPU
/// backend (`--backend auto`), which traces the BVH the layers' thread builds
/// ([`SharedBvh`]), waiting for it if need be.
pub(super) fn frame_on_gpus_alone(a: &RenderOptions) -> bool {
    let cpu_workers = a
        .devices
        .as_ref()
        .is_some_and(|d| crate::sched::workers::has_cpu(d));
    a.backend != crate::backend::BackendChoice::Cpu && !cpu_workers && crate::optix::probe().is_ok()
}

/// When a render traces its --aov layers: one value from the decision to the layers written,
/// so that a render cannot trace them twice or both ways. [`PendingAovs::start`] makes it,
/// [`PendingAovs::trace_before_frame`] traces the layers that wait for it and gives an
/// [`AovsDuringFrame`], whose [`AovsDuringFrame::finish`] hands the traced layers over after
/// the frame: layers left for before the frame cannot reach the frame's end untraced.
pub(super) enum PendingAovs {
    /// No layer asked for.
    None,
    /// To be traced before the frame, on the shared BVH (built then when no one has).
    Before(Box<LayersToTrace>),
    /// Being traced beside the frame (see [`AovsDuringFrame::Beside`]).
    Beside(LayersThread),
}

/// The --aov layers once the frame may start.
pub(super) enum AovsDuringFrame {
    /// No layer asked for.
    None,
    /// Traced before the frame.
    Traced(TracedAovs),
    /// Being traced on a thread of their own while the frame runs on GPUs alone.
    Beside(LayersThread),
}

/// The thread tracing the layers beside a frame on GPUs alone (`Err`: it could not start).
type LayersThread = std::io::Result<std::thread::JoinHandle<TracedAovs>>;

/// What tracing the layers needs, held from the decision to the tracing.
pub(super) struct LayersToTrace {
    scene: Arc<Scene>,
    bvh: SharedBvh,
    settings: RenderSettings,
    window: Tile,
    samples: u32,
}

impl LayersToTrace {
    fn trace(&self, beside_gpu: bool) -> TracedAovs {
        trace_layers(
            &self.scene,
            &self.bvh,
            &self.settings,
            self.window,
            self.samples,
            beside_gpu,
        )
    }
}

impl PendingAovs {
    /// The --aov layers of render `a` over `window`, on `bvh` (built for them if no one has):
    /// none when none is asked for; with `beside_gpu` (a frame on GPUs alone, see
    /// [`frame_on_gpus_alone`]) traced from now on, on a thread of their own, while the GPU is
    /// set up and renders; otherwise left for [`PendingAovs::trace_before_frame`].
    ///
    /// The thread builds the BVH when no one has, then traces the layers, both on a pool of
    /// low-priority threads ([`crate::cpu::background`]: as many as the render's), which takes
    /// the cores the GPU's setup and the cost map leave idle.
    pub(super) fn start(
        a: &RenderOptions,
        scene: &Arc<Scene>,
        bvh: SharedBvh,
        settings: &RenderSettings,
        window: Tile,
        beside_gpu: bool,
    ) -> PendingAovs {
        if a.aovs.is_empty() {
            return PendingAovs::None;
        }
        let job = LayersToTrace {
            scene: scene.clone(),
            bvh,
            settings: *settings,
            window,
            samples: crate::cpu::aov::guide_samples(a.aov_spp, a.spp),
        };
        if !beside_gpu {
            return PendingAovs::Before(Box::new(job));
        }
        let thread = std::thread::Builder::new()
            .name("gasworks-aov".into())
            .spawn(move || {
                // Without a pool of its own (threads refused), the global one: the same
                // layers, sharing its queues with the cost map.
                match crate::cpu::background::background_pool(rayon::current_num_threads()) {
                    Ok(pool) => pool.install(|| job.trace(true)),
                    Err(_) => job.trace(true),
                }
            });
        PendingAovs::Beside(thread)
    }

    /// Traces the layers left for before the frame (so that a --time-limit counts them); the
    /// others as they are. The BVH they held is the CPU backend's alone from here.
    pub(super) fn trace_before_frame(self) -> AovsDuringFrame {
        match self {
            PendingAovs::None => AovsDuringFrame::None,
            PendingAovs::Before(job) => AovsDuringFrame::Traced(job.trace(false)),
            PendingAovs::Beside(thread) => AovsDuringFrame::Beside(thread),
        }
    }
}

impl AovsDuringFrame {
    /// The traced layers (`None` where none was asked for), waiting for the thread that
    /// traces them beside the GPU, and saying so where the frame ended first (the wait is
    /// otherwise a silent pause); an error (naming the layers) where that thread could not
    /// start or panicked.
    pub(super) fn finish(self, out: Verbosity) -> anyhow::Result<Option<TracedAovs>> {
        match self {
            AovsDuringFrame::None => Ok(None),
            AovsDuringFrame::Traced(traced) => Ok(Some(traced)),
            AovsDuringFrame::Beside(thread) => {
                let thread =
                    thread.context("cannot start the thread that traces the --aov layers")?;
                if !thread.is_finished() {
                    out.status("aov: the frame is done; waiting for its layers, traced beside it");
                }
                let traced = thread.join().map_err(|panic| {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    anyhow::anyhow!("tracing the --aov layers failed (it panicked: {why})")
                })?;
                Ok(Some(traced))
            }
        }
    }
}

/// Writes the traced --aov layers, each an EXR whose render key is the image's (`image_key`)
/// plus the layer and its samples: crops of one layer merge with `gasworks merge`, and never
/// with the image or another layer.
pub(super) fn write_aovs(
    a: &RenderOptions,
    traced: &TracedAovs,
    image_key: &str,
    out: Verbosity,
) -> anyhow::Result<()> {
    let TracedAovs {
        layers,
        window,
        samples,
        seconds,
        beside_gpu,
    } = traced;
    let beside = if *beside_gpu {
        " beside the GPU's setup and frame"
    } else {
        ""
    };
    for &aov in &a.aovs {
        let path = aov_path(&a.output, aov);
        let meta = ImageMeta {
            full_width: a.width,
            full_height: a.height,
            window: *window,
            render: format!("{image_key}; aov {}; aov-spp {samples}", aov.name()),
            exposure: 0.0,
            tonemap: output::ToneCurve::Clamp,
        };
        output::write_pixels(layers.layer(aov), &path, &meta)?;
        out.status(format_args!(
            "aov: {} ({}, {samples} spp, traced in {seconds:.2} s{beside})",
            path.display(),
            aov.name()
        ));
    }
    Ok(())
}
