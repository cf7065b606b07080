//! The `gasworks` command line: one file per subcommand, each with its own clap arguments.

mod args;
mod build_bench;
mod cpu_bench;
mod gen;
mod info;
mod render;
mod schedule_sim;

use clap::{Parser, Subcommand};

pub use args::{AccelArgs, CameraArgs, ScheduleArgs};

/// gasworks: a path tracer on NVIDIA OptiX (one GAS per OBJ group, built across CUDA streams)
/// with a CPU reference backend.
#[derive(Parser, Debug)]
#[command(name = "gasworks", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render an OBJ scene to PNG (tone-mapped sRGB) or EXR (linear).
    Render(render::RenderArgs),
    /// Describe an OBJ scene: groups, triangles per group, materials, lights, bounds.
    Info(info::InfoArgs),
    /// Write a procedural scene (cornell, sponza-like, toystore) as OBJ+MTL.
    Gen(gen::GenArgs),
    /// Time the batched per-group GAS builds on the GPU across stream counts.
    BuildBench(build_bench::BuildBenchArgs),
    /// Print CPU backend figures: BVH build rate (Mtri/s) and path-tracing throughput (Msamples/s).
    CpuBench(cpu_bench::CpuBenchArgs),
    /// Replay measured per-tile costs through the tile scheduler for simulated worker counts.
    ScheduleSim(schedule_sim::ScheduleSimArgs),
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
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .init();
    let result = match cli.command {
        Command::Render(a) => render::run(a),
        Command::Info(a) => info::run(a),
        Command::Gen(a) => gen::run(a),
        Command::BuildBench(a) => build_bench::run(a),
        Command::ScheduleSim(a) => schedule_sim::run(a),
        Command::CpuBench(a) => cpu_bench::run(a),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            1
        }
    }
}
