//! The `gasworks` command line: one file per subcommand, each with its own clap arguments.

mod args;
mod build_bench;
mod cpu_bench;
mod denoise;
mod forwarding_sim;
mod gen;
mod image_stats;
mod info;
mod merge;
mod preview;
mod render;
mod schedule_sim;
mod signals;

use clap::{Parser, Subcommand};

pub use crate::console::Verbosity;
pub use args::{AccelArgs, CameraArgs, ScheduleArgs};

/// gasworks: a path tracer on NVIDIA OptiX (one GAS per OBJ group, built across CUDA streams)
/// with a CPU reference backend.
#[derive(Parser, Debug)]
#[command(name = "gasworks", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// The arguments are parsed once per run: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render an OBJ scene (or a --pixelbounds crop of it) to PNG or WebP (tone-mapped sRGB), or EXR (linear).
    Render(Box<render::RenderArgs>),
    /// Join the crops of a frame (render --pixelbounds) into the whole image, bit for bit.
    Merge(merge::MergeArgs),
    /// Describe an OBJ scene: groups, triangles per group, materials, lights, bounds (or what a resume file holds, or which render made an image).
    Info(info::InfoArgs),
    /// Write a procedural scene (cornell, sponza-like, toystore) as OBJ+MTL.
    Gen(gen::GenArgs),
    /// Time the batched per-group GAS builds on the GPU across stream counts.
    BuildBench(build_bench::BuildBenchArgs),
    /// Print CPU backend figures: BVH build rate (Mtri/s) and path-tracing throughput (Msamples/s).
    CpuBench(cpu_bench::CpuBenchArgs),
    /// Replay measured per-tile costs through the tile scheduler for simulated worker counts.
    ScheduleSim(schedule_sim::ScheduleSimArgs),
    /// Model a frame on 16, 64 or more ranks: domain forwarding (--distribute-geometry) against image-plane work, from the scene's measured traffic.
    ForwardingSim(forwarding_sim::ForwardingSimArgs),
    /// Mean radiance and firefly count of rendered EXR images (each compared with the first).
    ImageStats(image_stats::ImageStatsArgs),
    /// Filter a render's noise, guided by its --aov albedo and normal layers (an edge-avoiding à-trous filter).
    Denoise(denoise::DenoiseArgs),
    /// Write the image a resume file holds (a render in progress with --checkpoint-every, or one stopped or killed).
    Preview(preview::PreviewArgs),
}

/// An error whose message has already been printed: the command exits with this status
/// without printing it again.
#[derive(Debug, thiserror::Error)]
#[error("(reported above)")]
pub struct Reported {
    pub exit_code: i32,
}

/// Runs the command line and returns the process exit code. Errors are printed with their
/// whole cause chain; nothing here panics on bad input.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // Before any thread or CUDA call: streams past 8 need CUDA told to give them queues.
    let streams = match &cli.command {
        Command::Render(a) => Some(a.accel.streams),
        Command::BuildBench(a) => a.streams.iter().copied().max(),
        _ => None,
    };
    let queues = streams.and_then(crate::optix::cuda::request_work_queues);
    if !matches!(cli.command, Command::Render(_) | Command::Merge(_)) {
        signals::end_quietly_when_stdout_closes();
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .init();
    if let Some(n) = queues {
        log::info!(
            "{}={n}: {} streams asked for more than CUDA's 8 default hardware queues",
            crate::optix::cuda::MAX_CONNECTIONS_VAR,
            streams.unwrap_or(0)
        );
    }
    let result = match cli.command {
        Command::Render(a) => render::run(*a),
        Command::Merge(a) => merge::run(a),
        Command::Info(a) => info::run(a),
        Command::Gen(a) => gen::run(a),
        Command::BuildBench(a) => build_bench::run(a),
        Command::ScheduleSim(a) => schedule_sim::run(a),
        Command::ForwardingSim(a) => forwarding_sim::run(a),
        Command::CpuBench(a) => cpu_bench::run(a),
        Command::ImageStats(a) => image_stats::run(a),
        Command::Denoise(a) => denoise::run(a),
        Command::Preview(a) => preview::run(a),
    };
    match result {
        Ok(()) => 0,
        // Already printed where it happened (each MPI rank prints before MPI ends, since
        // mpirun kills the other ranks once one exits non-zero).
        Err(e) if e.is::<Reported>() => e.downcast_ref::<Reported>().map_or(1, |r| r.exit_code),
        // The image is written; the status is how a process ended by that signal
        // conventionally exits (130 for SIGINT, 143 for SIGTERM).
        Err(e) if e.is::<crate::session::Interrupted>() => {
            crate::console::write_whole(format!("error: {e}"));
            e.downcast_ref::<crate::session::Interrupted>()
                .map_or(130, |i| i.by.exit_code())
        }
        Err(e) => {
            let mut text = format!("error: {e}");
            for cause in e.chain().skip(1) {
                // Most messages already quote their source ("cannot write the image: No such
                // file or directory"): a cause already said is not said again.
                let cause = cause.to_string();
                if !text.contains(&cause) {
                    text.push_str(&format!("\n  caused by: {cause}"));
                }
            }
            crate::console::write_whole(text);
            1
        }
    }
}
