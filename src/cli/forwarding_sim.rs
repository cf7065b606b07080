//! `gasworks forwarding-sim`: where domain forwarding (`render --distribute-geometry`) beats
//! image-plane work on a cluster, and where it loses, for rank counts and networks of your
//! choosing ([`crate::cluster::geometry::model`]).
//!
//! It measures the scene's traffic at each rank count by rendering a small frame with the
//! ranks as threads of this process (every message counted, none timed), measures a sample's
//! cost on one thread unless given, and prints the modelled frame times for every rank count,
//! latency and bandwidth, with what bounds each and which decomposition wins. With
//! `--rank-memory-gib` it also says where image-plane work cannot run at all: every rank
//! would hold the whole scene.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::args::CameraArgs;
use crate::cluster::geometry::memory::BVH_BYTES_PER_TRIANGLE;
use crate::cluster::geometry::model::{frame_times, Bound, Machines, Network, Traffic};
use crate::cluster::geometry::{render_in_process_with, Limits, RankScene};
use crate::console::Verbosity;
use crate::render::RenderSettings;
use crate::scene::{obj, Scene};

#[derive(Args, Debug)]
pub struct ForwardingSimArgs {
    /// The scene, a Wavefront OBJ file
    pub scene: PathBuf,
    /// Rank counts, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    pub ranks: Vec<usize>,
    /// One message's latency, in microseconds, comma-separated (InfiniBand is about 2,
    /// Ethernet in a data centre 20 to 100)
    #[arg(long, value_delimiter = ',', default_value = "2,50")]
    pub latency_us: Vec<f64>,
    /// Each rank's link, in gigabits a second, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    pub bandwidth_gbit: Vec<f64>,
    /// The modelled frame's width
    #[arg(long, default_value_t = 1920)]
    pub width: u32,
    /// The modelled frame's height
    #[arg(long, default_value_t = 1080)]
    pub height: u32,
    /// The modelled frame's samples per pixel
    #[arg(long, default_value_t = 64)]
    pub spp: u32,
    /// Longest path, in segments from the camera
    #[arg(long, default_value_t = 8)]
    pub max_depth: u32,
    /// Workers (threads, or GPU streams) per rank
    #[arg(long, default_value_t = 16)]
    pub workers: usize,
    /// One sample's cost on one worker, in microseconds [default: measured on one thread
    /// of this machine]
    #[arg(long)]
    pub sample_us: Option<f64>,
    /// A worker's time to send or receive one message, in microseconds
    #[arg(long, default_value_t = 1.0)]
    pub message_us: f64,
    /// Each rank's memory, in GiB: image-plane work needs the whole scene on every rank
    #[arg(long)]
    pub rank_memory_gib: Option<f64>,
    /// The size of the frame the traffic is measured on, WIDTHxHEIGHT, at 1 sample a pixel
    /// [default: the frame's shape, with 4 tiles of 16x16 pixels for every rank of the most
    /// ranks, so that every rank owns pixels as in a real frame]
    #[arg(long)]
    pub measure: Option<String>,
    #[command(flatten)]
    pub camera: CameraArgs,
}

pub fn run(a: ForwardingSimArgs) -> anyhow::Result<()> {
    check(&a)?;
    let scene = obj::load_obj(&a.scene, &obj::LoadOptions { quiet: false })?;
    let settings = measure_settings(&a, &scene)?;
    let sample_s = match a.sample_us {
        Some(us) => us * 1e-6,
        None => one_thread_sample_seconds(&scene, &settings)?,
    };
    let machines = Machines {
        sample: sample_s,
        workers: a.workers,
        message: a.message_us * 1e-6,
        in_flight: Limits::default().in_flight,
    };
    println!(
        "scene: {} ({}); frame {}x{} at {} spp; {} workers a rank; a sample {:.3} us{}, a message {} us",
        a.scene.display(),
        scene.size_text(),
        a.width,
        a.height,
        a.spp,
        a.workers,
        sample_s * 1e6,
        if a.sample_us.is_some() { "" } else { " (measured, one thread)" },
        a.message_us
    );
    println!(
        "traffic measured at {}x{}, 1 spp, the ranks as threads:",
        settings.width, settings.height
    );
    println!("ranks,messages per sample,bytes per sample,imbalance");
    let mut traffic = Vec::new();
    for &ranks in &a.ranks {
        let t = Traffic::measure(&scene, &settings, ranks)
            .with_context(|| format!("measuring {ranks} ranks"))?;
        println!(
            "{ranks},{:.2},{:.0},{:.2}",
            t.messages, t.bytes, t.imbalance
        );
        traffic.push(t);
    }
    let fits = print_memory(&a, &scene);
    print_times(&a, &traffic, &machines, fits);
    Ok(())
}

fn check(a: &ForwardingSimArgs) -> anyhow::Result<()> {
    if a.width == 0 || a.height == 0 || a.spp == 0 || a.max_depth == 0 || a.workers == 0 {
        anyhow::bail!("--width, --height, --spp, --max-depth and --workers must be at least 1");
    }
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        anyhow::bail!("--ranks: give rank counts of at least 1");
    }
    let positive = |v: &[f64]| !v.is_empty() && v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !positive(&a.latency_us) || !positive(&a.bandwidth_gbit) {
        anyhow::bail!("--latency-us and --bandwidth-gbit: give positive numbers");
    }
    let finite = |x: Option<f64>| x.is_none_or(|x| x.is_finite() && x > 0.0);
    if !finite(a.sample_us) || !finite(Some(a.message_us)) || !finite(a.rank_memory_gib) {
        anyhow::bail!("--sample-us, --message-us and --rank-memory-gib must be positive");
    }
    Ok(())
}

/// The small frame the traffic is measured on, through the camera the flags choose.
fn measure_settings(a: &ForwardingSimArgs, scene: &Scene) -> anyhow::Result<RenderSettings> {
    let (w, h) = match &a.measure {
        Some(m) => m
            .split_once('x')
            .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
            .filter(|&(w, h)| w > 0 && h > 0)
            .with_context(|| format!("--measure {m}: expected WIDTHxHEIGHT, e.g. 320x180"))?,
        None => measure_size(
            a.width,
            a.height,
            a.ranks.iter().copied().max().unwrap_or(1),
        ),
    };
    let choice = a.camera.choice();
    let hint = choice.scene_hint(&a.scene, |w| Verbosity::Normal.warn(w))?;
    let camera = choice
        .camera(&scene.bounds(), hint, w, h)
        .frame(w, h)
        .with_context(|| format!("{}: bad camera", a.scene.display()))?;
    Ok(RenderSettings {
        width: w,
        height: h,
        spp: 1,
        max_depth: a.max_depth,
        seed: 0,
        camera,
    })
}

/// A frame of `width`:`height`'s shape with at least 4 tiles of 16x16 for each of `ranks`.
fn measure_size(width: u32, height: u32, ranks: usize) -> (u32, u32) {
    let tiles = 4.0 * ranks as f64;
    let aspect = f64::from(width) / f64::from(height);
    let rows = (tiles / aspect).sqrt().ceil().max(1.0);
    let columns = (tiles / rows).ceil().max(1.0);
    ((columns * 16.0) as u32, (rows * 16.0) as u32)
}

/// A sample's cost: the measurement frame rendered by one rank on one thread, its BVH built
/// before the clock starts.
fn one_thread_sample_seconds(scene: &Scene, settings: &RenderSettings) -> anyhow::Result<f64> {
    let one = [RankScene::of(scene, 1, 0)];
    let t0 = Instant::now();
    render_in_process_with(&one, settings, &Limits::default())?;
    let samples = f64::from(settings.width) * f64::from(settings.height);
    Ok(t0.elapsed().as_secs_f64() / samples)
}

/// What a rank holds for image-plane work; whether it fits `--rank-memory-gib`.
fn print_memory(a: &ForwardingSimArgs, scene: &Scene) -> bool {
    let groups: u64 = scene.groups.iter().map(|g| g.heap_bytes()).sum();
    let whole = groups + scene.triangle_count() as u64 * BVH_BYTES_PER_TRIANGLE;
    let gib = |b: f64| b / f64::from(1u32 << 30);
    print!(
        "memory: the scene and its BVH, about {:.2} GiB on every rank for image-plane work",
        gib(whole as f64)
    );
    match a.rank_memory_gib {
        Some(m) if gib(whole as f64) > m => {
            println!(", more than the {m} GiB a rank has: only forwarding can render it");
            false
        }
        Some(m) => {
            println!(", within the {m} GiB a rank has");
            true
        }
        None => {
            println!();
            true
        }
    }
}

/// One row per rank count, latency and bandwidth: the modelled times and which is faster
/// (forwarding alone where the scene does not fit a rank: `fits` false).
fn print_times(a: &ForwardingSimArgs, traffic: &[Traffic], machines: &Machines, fits: bool) {
    println!(
        "ranks,latency us,bandwidth Gbit/s,image-plane s,forwarding s,forwarding bound,faster"
    );
    for t in traffic {
        for &latency in &a.latency_us {
            for &gbit in &a.bandwidth_gbit {
                let network = Network {
                    latency: latency * 1e-6,
                    bandwidth: gbit * 1e9 / 8.0,
                };
                let f = frame_times(
                    t,
                    (u64::from(a.width) * u64::from(a.height), a.spp),
                    &network,
                    machines,
                );
                let bound = match f.bound {
                    Bound::Compute => "compute",
                    Bound::Bandwidth => "bandwidth",
                    Bound::Latency => "latency",
                };
                let faster = if !fits {
                    "forwarding (image-plane does not fit)".to_string()
                } else if f.forwarding < f.image_plane {
                    format!("forwarding {:.2}x", f.image_plane / f.forwarding)
                } else {
                    format!("image-plane {:.2}x", f.forwarding / f.image_plane)
                };
                println!(
                    "{},{latency},{gbit},{:.4},{:.4},{bound},{faster}",
                    t.ranks, f.image_plane, f.forwarding
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::measure_size;

    #[test]
    fn the_measured_frame_gives_every_rank_its_tiles() {
        for (w, h, ranks) in [
            (1920, 1080, 64),
            (1920, 1080, 16),
            (100, 1000, 7),
            (64, 64, 1),
        ] {
            let (mw, mh) = measure_size(w, h, ranks);
            let tiles = (mw / 16) * (mh / 16);
            assert!(tiles as usize >= 4 * ranks, "{w}x{h}, {ranks}: {mw}x{mh}");
            assert!(
                tiles as usize <= 8 * ranks + 8,
                "{w}x{h}, {ranks}: {mw}x{mh} is more than needed"
            );
        }
    }
}
