//! What adaptive sampling's late passes hand a GPU: the pieces between the stopped blocks (as
//! before 2026-12-02), or tiles that skip them. One scene rendered adaptively twice in one
//! process on the CPU backend, both with the tiles an H200 gets (its launch work, 540,672
//! pixel-samples, sets their count): once by CPU threads as they are, whose later passes cut
//! those tiles into the pieces still sampling; once by the same threads asking for GPU-sized
//! tiles, which are then laid out over the blocks still sampling and skip the stopped ones
//! (`TileRenderer::render_tile_skipping`). The two films must be the same bits; what differs is
//! how many tiles (on a GPU: launches) each pass takes and how much work each carries. The
//! camera is the scene's (`# gasworks camera:`) or the default framing, as `render` has it.
//!
//!     cargo run --release --example adaptive_gpu_tiles SCENE.obj [WIDTH HEIGHT SPP THRESHOLD]
//!
//! Prints, per pass, the tiles and mean rendered pixels per tile of both, and each render's
//! time (the CPU's: no GPU runs here).

use std::ops::Range;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;
use std::time::Instant;

use gasworks::cpu::CpuBackend;
use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::Camera;
use gasworks::sched::adaptive_sampling::AdaptiveSampling;
use gasworks::sched::{
    render_frame_until, tiles, CpuOnlyFactory, DeviceSpec, FrameControl, SchedConfig,
};

/// An H200's `launch_work`: two waves of 132 SMs x 2048 threads.
const H200_LAUNCH_WORK: u64 = 2 * 132 * 2048;

/// The CPU backend, asking for tiles as a GPU worker does.
struct AsGpu(CpuBackend);

impl TileRenderer for AsGpu {
    fn name(&self) -> String {
        "cpu-as-gpu".into()
    }
    fn min_tile_work(&self) -> Option<u64> {
        Some(H200_LAUNCH_WORK)
    }
    fn render_tile(&self, t: Tile, s: Range<u32>, acc: &mut [[f32; 4]]) -> anyhow::Result<()> {
        self.0.render_tile(t, s, acc)
    }
    fn render_tile_skipping(
        &self,
        t: Tile,
        s: Range<u32>,
        acc: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        self.0.render_tile_skipping(t, s, acc, skip)
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        anyhow::bail!("usage: adaptive_gpu_tiles SCENE.obj [WIDTH HEIGHT SPP THRESHOLD]");
    };
    let num = |i: usize, default: f64| -> anyhow::Result<f64> {
        args.get(i)
            .map(|s| s.parse::<f64>())
            .transpose()
            .map(|v| v.unwrap_or(default))
            .map_err(|e| anyhow::anyhow!("argument {}: {e}", i + 1))
    };
    let (width, height) = (num(1, 960.0)? as u32, num(2, 540.0)? as u32);
    let (spp, threshold) = (num(3, 64.0)? as u32, num(4, 0.02)? as f32);
    let scene = load_obj(std::path::Path::new(path), &LoadOptions { quiet: true })?;
    let camera = match Camera::hint_from_obj(std::path::Path::new(path))? {
        Some(c) => c,
        None => Camera::framing(&scene.bounds(), 39.3, width, height),
    }
    .frame(width, height)?;
    let settings = RenderSettings {
        width,
        height,
        spp,
        max_depth: 8,
        seed: 1,
        camera,
    };
    let pass_spp = (spp / 16).max(1);
    let threads = rayon::current_num_threads() as u32;
    let config = SchedConfig {
        devices: vec![DeviceSpec::Cpu { workers: None }],
        pass_spp: Some(pass_spp),
        adaptive_sampling: Some(AdaptiveSampling {
            threshold,
            tone: Default::default(),
            min_spp: 0,
        }),
        ..SchedConfig::default()
    };
    let stop = AtomicU8::new(0);
    let mut frames = Vec::new();
    for as_gpu in [false, true] {
        let cpu = CpuBackend::new(&scene, &settings)?;
        let renderer: Arc<dyn TileRenderer> = if as_gpu {
            Arc::new(AsGpu(cpu))
        } else {
            Arc::new(cpu)
        };
        // The CPU threads as they are get the GPU's tile count by --tiles (a GPU-sized layout,
        // then cut into pieces); asking as a GPU, they are counted from the work.
        let config = SchedConfig {
            tiles: (!as_gpu).then(|| {
                tiles::tile_count_for_work(width, height, pass_spp, H200_LAUNCH_WORK, threads)
            }),
            ..config.clone()
        };
        let t0 = Instant::now();
        let frame = render_frame_until(
            &scene,
            &settings,
            &config,
            &CpuOnlyFactory(renderer),
            true,
            FrameControl {
                stop: &stop,
                ..FrameControl::default()
            },
        )?;
        let name = if as_gpu { "tiles that skip" } else { "pieces" };
        println!("{name}: {:.2} s", t0.elapsed().as_secs_f64());
        frames.push(frame);
    }
    let same = frames[0]
        .film
        .pixels
        .iter()
        .map(|p| p.map(f32::to_bits))
        .eq(frames[1].film.pixels.iter().map(|p| p.map(f32::to_bits)));
    println!("films bit-identical: {same}");
    println!("pass  blocks | pieces, mean pixels | tiles that skip, mean rendered pixels, skipped pixels");
    let active = &frames[1]
        .report
        .adaptive
        .as_ref()
        .map(|a| a.active_per_pass.clone());
    for (i, (a, b)) in frames[0]
        .report
        .passes
        .iter()
        .zip(&frames[1].report.passes)
        .enumerate()
    {
        let spp = u64::from(a.samples.end - a.samples.start).max(1);
        let mean = |p: &gasworks::sched::report::PassReport| {
            p.pixel_samples() / spp / p.tiles.len().max(1) as u64
        };
        println!(
            "{:>4} {:>7} | {:>5} {:>8} | {:>5} {:>8} {:>9}",
            i + 1,
            active
                .as_ref()
                .and_then(|v| v.get(i))
                .map_or("-".into(), |n| n.to_string()),
            a.tiles.len(),
            mean(a),
            b.tiles.len(),
            mean(b),
            b.skipped_pixels
        );
    }
    anyhow::ensure!(same, "the films differ");
    Ok(())
}
