//! `gasworks build-bench`: times the batched per-group GAS builds across stream counts, as the
//! forum thread does (CUDA events around the whole batch, min/median/max over repeats), with
//! the single GAS of the whole scene as reference in the same run. With `--isolate`, each
//! configuration runs in a process of its own (see [`isolated`]).

mod isolated;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::args::{AssignArg, BuildContextsArg, ScratchArg};
use crate::bench_report::{plot_svg, write_csv, BenchRow, BuildKind};
use crate::optix::accel::AccelOptions;
use crate::optix::bench::{BatchTiming, SceneBench};
use crate::optix::plan::{Assign, IssueOrder, MergeOptions, ScratchMode, DEFAULT_LPT_BUILD_WEIGHT};
use crate::optix::{ContextOptions, CudaError, DeviceContext, Gpu};
use crate::scene::{obj, Scene};
use crate::wording::counted;

/// Which build flags to time.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagsArg {
    /// OPTIX_BUILD_FLAG_PREFER_FAST_TRACE (the default)
    FastTrace,
    /// OPTIX_BUILD_FLAG_PREFER_FAST_BUILD
    FastBuild,
    /// Both, one after the other
    Both,
}

/// `--issue-order`: see [`IssueOrder`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueOrderArg {
    /// The assignment's own order
    Assignment,
    /// Build (group) order
    Build,
    /// Most triangles first
    LargestFirst,
}

impl From<IssueOrderArg> for IssueOrder {
    fn from(a: IssueOrderArg) -> IssueOrder {
        match a {
            IssueOrderArg::Assignment => IssueOrder::Assignment,
            IssueOrderArg::Build => IssueOrder::BuildOrder,
            IssueOrderArg::LargestFirst => IssueOrder::LargestFirst,
        }
    }
}

#[derive(Args, Debug)]
pub struct BuildBenchArgs {
    /// The scene, a Wavefront OBJ file
    pub scene: PathBuf,
    /// Stream counts to time, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub streams: Vec<u32>,
    /// Build with PREFER_FAST_BUILD (same as --flags fast-build)
    #[arg(long, conflicts_with = "flags")]
    pub fast_build: bool,
    /// Build flags to time [default: fast-trace]
    #[arg(long, value_enum)]
    pub flags: Option<FlagsArg>,
    /// Timed repeats of each configuration
    #[arg(long, default_value_t = 100)]
    pub repeat: u32,
    /// Untimed runs before the timed ones (driver and allocator warm-up)
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Stream assignments to time, comma-separated
    #[arg(long, value_enum, value_delimiter = ',', default_value = "round-robin")]
    pub assign: Vec<AssignArg>,
    /// Scratch layouts to time, comma-separated
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shared")]
    pub scratch: Vec<ScratchArg>,
    /// Merge thresholds to time, comma-separated (0, the default here: one GAS per group, the
    /// batch this tool exists to measure; render merges below 1024 by default)
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub merge_below: Vec<u32>,
    /// LPT build weights to time, comma-separated: triangles each build adds to its LPT load,
    /// standing for the fixed cost of a build (only with --assign lpt; the default is
    /// render's)
    #[arg(long, value_delimiter = ',', default_values_t = [DEFAULT_LPT_BUILD_WEIGHT])]
    pub lpt_build_weight: Vec<u64>,
    /// The order the builds are enqueued in: `assignment` (round-robin's build order, LPT's
    /// largest first), or `build` or `largest-first` whatever the assignment (a diagnostic:
    /// crossed with --assign, it tells whether LPT's streams or its order matter)
    #[arg(long, value_enum, default_value_t = IssueOrderArg::Assignment)]
    pub issue_order: IssueOrderArg,
    /// Host thread counts to time, comma-separated: threads that enqueue the builds side by
    /// side, each owning whole streams (1: the calling thread alone). Compare the printed host
    /// enqueue time with the batch time: when they are close, the host bounds the batch
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub enqueue_threads: Vec<u32>,
    /// OptiX contexts to time, comma-separated: `shared` (every build through one context),
    /// `per-stream` (a context of its own for each stream) and `auto` (what render picks: per
    /// stream where one context failed on a GPU or would serialise the threads;
    /// docs/gas-builds.md)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "auto")]
    pub build_contexts: Vec<BuildContextsArg>,
    /// Build with ALLOW_COMPACTION and report the compacted bytes
    #[arg(long)]
    pub compact: bool,
    /// Leave this many bytes unused after every scratch slice and GAS, filled with a known
    /// byte, and check after every run (outside the timing) that no build wrote there (a
    /// diagnostic: fails the run, naming the build, if one did)
    #[arg(long, default_value_t = 0)]
    pub guard_bytes: u64,
    /// Write one CSV row per configuration here
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an SVG plot of build time against streams here
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Which GPU
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Turn on OptiX validation mode (slow; reports API misuse)
    #[arg(long)]
    pub validation: bool,
    /// OptiX ABI version to request: 105 (OptiX 9.0) or 87 (OptiX 8.0) [default: 105, then 87]
    #[arg(long)]
    pub optix_abi: Option<u32>,
    /// Time every configuration, and the single-GAS reference, in a process of its own: one
    /// that crashes (a CUDA error poisons its whole process) or hangs then fails alone, the
    /// others are still timed, and the CSV and plot hold every row timed. Each process loads
    /// the scene and makes its contexts again, outside the timings
    #[arg(long)]
    pub isolate: bool,
    /// With --isolate: kill a configuration's process still running after this many seconds
    /// (0: never; the GAS watchdog already ends a hung batch, after GASWORKS_BUILD_WAIT_S)
    #[arg(long, default_value_t = 0, requires = "isolate")]
    pub config_timeout_s: u64,
    /// Set by --isolate for its children: the one job to time ("K", configuration K in
    /// output order, or "reference")
    #[arg(long, hide = true, requires = "isolated_rows")]
    pub isolated_child: Option<String>,
    /// Set by --isolate for its children: where the child writes its rows
    #[arg(long, hide = true, requires = "isolated_child")]
    pub isolated_rows: Option<PathBuf>,
}

fn assign_name(a: Assign) -> &'static str {
    match a {
        Assign::RoundRobin => "round-robin",
        Assign::Lpt => "lpt",
    }
}

fn scratch_name(s: ScratchMode) -> &'static str {
    match s {
        ScratchMode::Shared => "shared",
        ScratchMode::PerStream => "per-stream",
    }
}

fn flags_name(fast_build: bool) -> &'static str {
    if fast_build {
        "fast-build"
    } else {
        "fast-trace"
    }
}

/// The git commit gasworks was built from: `$GASWORKS_GIT_COMMIT` (scripts/gpu-session.sh sets
/// it from the commit the binaries were built at), else the commit stamped into this binary
/// at build time (the one images carry; not `git describe` of the current folder, which may
/// be another checkout or none).
pub fn git_commit() -> String {
    match std::env::var("GASWORKS_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => crate::GIT_COMMIT.to_string(),
    }
}

/// The configurations to time, in output order: flags, merge threshold, assignment, LPT build
/// weight, scratch mode, OptiX contexts, enqueue threads, then stream count.
fn configurations(a: &BuildBenchArgs) -> Vec<AccelOptions> {
    let flags: Vec<bool> = match (a.fast_build, a.flags) {
        (true, _) | (false, Some(FlagsArg::FastBuild)) => vec![true],
        (false, Some(FlagsArg::Both)) => vec![false, true],
        (false, None) | (false, Some(FlagsArg::FastTrace)) => vec![false],
    };
    let mut out = Vec::new();
    for &fast_build in &flags {
        for &merge in &a.merge_below {
            for &assign in &a.assign {
                // The weight only matters to LPT: round-robin is timed once.
                let weights = match Assign::from(assign) {
                    Assign::Lpt => a.lpt_build_weight.as_slice(),
                    Assign::RoundRobin => &[0],
                };
                for &lpt_build_weight in weights {
                    for &scratch in &a.scratch {
                        for &contexts in &a.build_contexts {
                            for &enqueue_threads in &a.enqueue_threads {
                                for &streams in &a.streams {
                                    let o = AccelOptions {
                                        streams,
                                        fast_build,
                                        assign: assign.into(),
                                        scratch: scratch.into(),
                                        compact: a.compact,
                                        merge: MergeOptions::new(u64::from(merge)),
                                        lpt_build_weight,
                                        guard_bytes: a.guard_bytes,
                                        issue: a.issue_order.into(),
                                        enqueue_threads,
                                        ..AccelOptions::default()
                                    };
                                    let o = AccelOptions {
                                        contexts: contexts.resolve(&o),
                                        ..o
                                    };
                                    // `auto` beside `shared` or `per-stream` can name a
                                    // configuration twice: it is timed once.
                                    if !out.contains(&o) {
                                        out.push(o);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn check_args(a: &BuildBenchArgs) -> anyhow::Result<()> {
    if a.streams.is_empty() || a.streams.contains(&0) {
        anyhow::bail!("--streams: every stream count must be at least 1");
    }
    if a.enqueue_threads.is_empty() || a.enqueue_threads.iter().any(|&t| t == 0 || t > 64) {
        anyhow::bail!("--enqueue-threads: every thread count must be 1 to 64");
    }
    if a.repeat == 0 {
        anyhow::bail!("--repeat must be at least 1");
    }
    // Refuse an unwritable output before minutes of timing.
    for (name, p) in [("--csv", &a.csv), ("--plot", &a.plot)] {
        if let Some(p) = p {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.is_dir() || p.is_dir() {
                anyhow::bail!("{name} {}: not a file in an existing folder", p.display());
            }
        }
    }
    Ok(())
}

/// The row of batch configuration `o`, its figures zero and its scene, device, driver and
/// commit empty: what the run fills in, and what names a configuration before it runs.
fn options_row(o: &AccelOptions) -> BenchRow {
    BenchRow {
        scene: String::new(),
        build: BuildKind::Batch,
        groups: 0,
        gases: 0,
        triangles: 0,
        streams: o.streams,
        flags: flags_name(o.fast_build).into(),
        assign: assign_name(o.assign).into(),
        scratch_mode: scratch_name(o.scratch).into(),
        merge_below: o.merge.merge_below as u32,
        lpt_build_weight: o.lpt_build_weight,
        issue_order: o.issue.name().into(),
        enqueue_threads: o.enqueue_threads,
        build_contexts: o.contexts.name().into(),
        repeats: 0,
        min_ms: 0.0,
        median_ms: 0.0,
        max_ms: 0.0,
        enqueue_median_ms: 0.0,
        scratch_bytes: 0,
        output_bytes: 0,
        compacted_bytes: o.compact.then_some(0),
        device: String::new(),
        driver: String::new(),
        git_commit: String::new(),
    }
}

/// "8 streams | fast-trace, lpt, shared scratch weight 1000": a configuration as the printed rows
/// name it.
fn config_label(o: &AccelOptions) -> String {
    format!("{} streams | {}", o.streams, options_row(o).series_label())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn print_row(r: &BenchRow) {
    let what = match r.build {
        BuildKind::SingleGas => "single GAS".to_string(),
        BuildKind::Batch => format!("{:>2} streams", r.streams),
    };
    let compacted = r
        .compacted_bytes
        .map(|c| format!(", compacted {:.2} MiB", mib(c)))
        .unwrap_or_default();
    println!(
        "{what} | {} | {} GASes | min {:.3} median {:.3} max {:.3} ms | host enqueue median {:.3} ms ({:.1} us per GAS) | scratch {:.2} MiB, output {:.2} MiB{compacted}",
        r.series_label(),
        r.gases,
        r.min_ms,
        r.median_ms,
        r.max_ms,
        r.enqueue_median_ms,
        1e3 * r.enqueue_median_ms / r.gases.max(1) as f64,
        mib(r.scratch_bytes),
        mib(r.output_bytes),
    );
}

/// Writes the CSV and plot of `rows`, saying so.
fn write_outputs(a: &BuildBenchArgs, rows: &[BenchRow], title: &str) -> anyhow::Result<()> {
    for path in write_rows_so_far(a, rows, title)? {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Writes the CSV and plot of the rows timed so far, silently; the paths written. Called after
/// every row, so that a run stopped part-way (a time limit's kill, a crash, Ctrl-C) leaves
/// every row it timed, not none. Each file is written beside itself and renamed over the last,
/// so a kill never leaves half a file.
fn write_rows_so_far(
    a: &BuildBenchArgs,
    rows: &[BenchRow],
    title: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    if let Some(path) = &a.csv {
        let mut bytes = Vec::new();
        write_csv(&mut bytes, rows).with_context(|| format!("writing {}", path.display()))?;
        replace_file(path, &bytes).with_context(|| format!("--csv {}", path.display()))?;
        written.push(path.clone());
    }
    if let Some(path) = &a.plot {
        replace_file(path, plot_svg(rows, title).as_bytes())
            .with_context(|| format!("--plot {}", path.display()))?;
        written.push(path.clone());
    }
    Ok(written)
}

/// `path` now holds `bytes`, or (on an error) what it held before.
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

fn scene_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A CUDA error met looking for the GPU, as build-bench reports it: "no NVIDIA GPU" for a
/// machine without one, else the error and what was being done.
fn gpu_error(e: CudaError, doing: &'static str) -> anyhow::Error {
    match e {
        CudaError::NoDevice { reason } => {
            anyhow::anyhow!("no NVIDIA GPU: build-bench needs one ({reason})")
        }
        e => anyhow::Error::new(e).context(doing),
    }
}

pub fn run(a: BuildBenchArgs) -> anyhow::Result<()> {
    check_args(&a)?;
    let job = a
        .isolated_child
        .as_deref()
        .map(isolated::Job::parse)
        .transpose()?;
    // The driver is asked without making a context (a GPU in exclusive-process mode would
    // refuse --isolate's children one), so that a --gpu the machine lacks is named as such.
    let gpus =
        crate::optix::probe().map_err(|e| gpu_error(e, "asking the CUDA driver for its GPUs"))?;
    if a.gpu >= gpus.len() {
        anyhow::bail!(
            "--gpu {}: this machine has {}",
            a.gpu,
            crate::optix::cuda::gpus_text(gpus.len(), |i| format!("--gpu {i}"))
        );
    }
    if a.isolate && job.is_none() {
        return run_isolated(&a);
    }
    // The GPU first: no point loading a large scene on a machine that cannot build it.
    let gpu = Gpu::open(a.gpu).map_err(|e| gpu_error(e, "opening the GPU"))?;
    let ctx = DeviceContext::new(&gpu, &ContextOptions::from_cli(a.optix_abi, a.validation)?)
        .context("creating the OptiX context")?;
    let scene = obj::load_obj(&a.scene, &obj::LoadOptions { quiet: true })?;
    run_on(&a, &ctx, &scene, job)
}

/// `--isolate`: every job in a child process (see [`isolated`]), then the CSV and plot of the
/// rows of those that passed; an error listing those that failed, if any did.
fn run_isolated(a: &BuildBenchArgs) -> anyhow::Result<()> {
    std::fs::metadata(&a.scene).with_context(|| format!("{}", a.scene.display()))?;
    let configs = configurations(a);
    let jobs: Vec<(isolated::Job, String)> = configs
        .iter()
        .enumerate()
        .map(|(k, o)| (isolated::Job::Config(k), config_label(o)))
        .chain([(isolated::Job::Reference, "single GAS".to_string())])
        .collect();
    let exe =
        std::env::current_exe().context("finding this executable, to run each configuration in")?;
    let parent_args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let timeout = (a.config_timeout_s > 0).then(|| Duration::from_secs(a.config_timeout_s));
    println!(
        "build-bench --isolate: {} configurations and the single-GAS reference, each in a process of its own",
        configs.len()
    );
    let title_of = |rows: &[BenchRow]| {
        rows.first().map(|r| {
            format!(
                "{}: {}, {}, {}",
                r.scene,
                counted(r.groups, "group", "groups"),
                counted(r.triangles, "triangle", "triangles"),
                r.device
            )
        })
    };
    let so_far = |rows: &[BenchRow]| match title_of(rows) {
        Some(title) => write_rows_so_far(a, rows, &title).map(drop),
        None => Ok(()),
    };
    let (rows, failed) = isolated::run_jobs(&jobs, so_far, |job| {
        let path = isolated::rows_path(job);
        let _ = std::fs::remove_file(&path);
        let args = isolated::child_args(parent_args.iter().cloned(), job, &path);
        let ending = isolated::run_child(&exe, &args, timeout)?;
        let rows = if ending == isolated::Ending::Passed {
            isolated::read_rows(&path)?
        } else {
            Vec::new()
        };
        let _ = std::fs::remove_file(&path);
        Ok((ending, rows))
    })?;
    if let Some(title) = title_of(&rows) {
        write_outputs(a, &rows, &title)?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(isolated::failure_summary(
            &failed,
            jobs.len()
        )))
    }
}

/// Whether a run prints the line naming the scene, device, driver and repeats: a whole run does,
/// and of `--isolate`'s children only the first job's (every configuration's child printed it
/// again, between the rows).
fn announces_run(job: Option<isolated::Job>) -> bool {
    matches!(job, None | Some(isolated::Job::Config(0)))
}

/// Times the configurations and then the single-GAS reference, or only `job` of them (an
/// `--isolate` child, which writes its rows to `--isolated-rows` instead of the CSV and plot),
/// printing each row as it comes.
fn run_on(
    a: &BuildBenchArgs,
    ctx: &Arc<DeviceContext>,
    scene: &Scene,
    job: Option<isolated::Job>,
) -> anyhow::Result<()> {
    let info = ctx.gpu().info().clone();
    let driver = info
        .driver_release
        .clone()
        .unwrap_or_else(|| format!("CUDA {}", info.cuda_version_string()));
    let name = scene_name(&a.scene);
    let scene_size = scene.size_text();
    if announces_run(job) {
        println!(
            "{name}: {scene_size}; {}, driver {driver}, OptiX ABI {:?}; {} repeats after {} warm-up runs",
            info.name,
            ctx.abi(),
            a.repeat,
            a.warmup
        );
    }
    let bench = SceneBench::new(ctx, scene, a.warmup, a.repeat)?;
    let template = BenchRow {
        scene: name.clone(),
        groups: scene.groups.len() as u64,
        triangles: bench.triangles(),
        repeats: a.repeat,
        device: info.name.clone(),
        driver,
        git_commit: git_commit(),
        ..options_row(&AccelOptions::default())
    };
    let title = format!("{name}: {scene_size}, {}", info.name);
    let configs = configurations(a);
    let timed = timed_configurations(&configs, job)?;
    let mut rows = Vec::new();
    let timing = bench.configurations(timed, |o, t| {
        rows.push(row_of(&template, BuildKind::Batch, o, &t));
        // A whole run keeps its rows written as it goes; an --isolate child hands them to its
        // parent at the end.
        match job {
            None => write_rows_so_far(a, &rows, &title).map(drop),
            Some(_) => Ok(()),
        }
    });
    if let Err(error) = timing {
        // A crashed batch poisons the CUDA context, so nothing more can be timed; the
        // configurations timed before it are kept (with --isolate the ones after it are
        // timed too).
        if !rows.is_empty() && job.is_none() {
            write_outputs(a, &rows, &title)?;
            eprintln!(
                "build-bench: {} of {} configurations timed before the failure below; their rows are written, without the single-GAS reference",
                rows.len(),
                configs.len()
            );
        }
        return Err(error);
    }
    if let Some(isolated::Job::Config(_)) = job {
        return write_child_rows(a, &rows);
    }
    time_single_gas_reference(a, &bench, &configs, &template, &mut rows)?;
    match job {
        Some(_) => write_child_rows(a, &rows),
        None => write_outputs(a, &rows, &title),
    }
}

/// The configurations a run times: all of them, or only `job`'s (none for the reference's
/// child).
fn timed_configurations(
    configs: &[AccelOptions],
    job: Option<isolated::Job>,
) -> anyhow::Result<&[AccelOptions]> {
    Ok(match job {
        None => configs,
        Some(isolated::Job::Config(k)) => {
            std::slice::from_ref(configs.get(k).with_context(|| {
                format!(
                    "--isolated-child {k}: there are {} configurations",
                    configs.len()
                )
            })?)
        }
        Some(isolated::Job::Reference) => &[],
    })
}

/// Times the whole scene as one GAS, once per build flag the configurations used, adding its
/// rows to `rows`; a scene too large for one GAS gets a note instead.
fn time_single_gas_reference(
    a: &BuildBenchArgs,
    bench: &SceneBench,
    configs: &[AccelOptions],
    template: &BenchRow,
    rows: &mut Vec<BenchRow>,
) -> anyhow::Result<()> {
    let mut flags: Vec<bool> = configs.iter().map(|o| o.fast_build).collect();
    flags.dedup();
    let reference = bench.single_gas(&flags, a.compact, |o, t| {
        let mut r = row_of(template, BuildKind::SingleGas, o, &t);
        r.assign = "-".into();
        r.scratch_mode = "-".into();
        rows.push(r);
        Ok(())
    })?;
    if let Err(max_primitives) = reference {
        eprintln!(
            "note: {} triangles exceed one GAS's limit on this device ({max_primitives}); no single-GAS reference",
            bench.triangles()
        );
    }
    Ok(())
}

/// The row of configuration `o` as `timing` measured it, printed: the run's scene, device,
/// driver and commit from `template`.
fn row_of(template: &BenchRow, build: BuildKind, o: &AccelOptions, t: &BatchTiming) -> BenchRow {
    if let Some((regions, runs)) = t.guards_checked {
        println!(
            "guards: no build wrote outside its ranges ({regions} guard regions of at least {} bytes, checked after each of {runs} runs)",
            o.guard_bytes,
        );
    }
    let row = BenchRow {
        build,
        gases: t.gases as u64,
        min_ms: t.gpu_ms.min,
        median_ms: t.gpu_ms.median,
        max_ms: t.gpu_ms.max,
        enqueue_median_ms: t.enqueue_ms.median,
        scratch_bytes: t.scratch_bytes,
        output_bytes: t.output_bytes,
        compacted_bytes: t.compacted_bytes,
        ..BenchRow {
            scene: template.scene.clone(),
            groups: template.groups,
            triangles: template.triangles,
            repeats: template.repeats,
            device: template.device.clone(),
            driver: template.driver.clone(),
            git_commit: template.git_commit.clone(),
            ..options_row(o)
        }
    };
    print_row(&row);
    row
}

/// An `--isolate` child's rows, for its parent (a file even for no rows: the reference of a
/// scene past one GAS's limit has none).
fn write_child_rows(a: &BuildBenchArgs, rows: &[BenchRow]) -> anyhow::Result<()> {
    let path = a
        .isolated_rows
        .as_deref()
        .context("--isolated-child needs --isolated-rows")?;
    let f = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    write_csv(f, rows).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::AccelArgs;
    use crate::optix::accel::BuildContexts;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: BuildBenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BuildBenchArgs, clap::Error> {
        let mut v = vec!["build-bench", "scene.obj"];
        v.extend_from_slice(args);
        Wrapper::try_parse_from(v).map(|w| w.args)
    }

    #[test]
    fn defaults_time_fast_trace_round_robin_shared_over_five_stream_counts() {
        let a = parse(&[]).unwrap();
        let c = configurations(&a);
        assert_eq!(
            c.iter().map(|o| o.streams).collect::<Vec<_>>(),
            [1, 2, 4, 8, 16]
        );
        assert!(c.iter().all(|o| !o.fast_build
            && o.assign == Assign::RoundRobin
            && o.scratch == ScratchMode::Shared));
        assert_eq!(a.repeat, 100);
    }

    #[test]
    fn lists_multiply_into_configurations() {
        let a = parse(&[
            "--streams",
            "1,8",
            "--flags",
            "both",
            "--assign",
            "round-robin,lpt",
            "--scratch",
            "shared,per-stream",
            "--merge-below",
            "0,64",
        ])
        .unwrap();
        let c = configurations(&a);
        assert_eq!(c.len(), 2 * 2 * 2 * 2 * 2);
        assert_eq!(c.iter().filter(|o| o.fast_build).count(), 16);
        assert_eq!(c.iter().filter(|o| o.merge.merge_below == 64).count(), 16);
        // Stream count varies fastest: consecutive pairs are one series.
        assert_eq!((c[0].streams, c[1].streams), (1, 8));
    }

    #[test]
    fn lpt_build_weights_multiply_lpt_configurations_only() {
        let a = parse(&[
            "--streams",
            "8",
            "--assign",
            "round-robin,lpt",
            "--lpt-build-weight",
            "0,500,4000",
        ])
        .unwrap();
        let c = configurations(&a);
        // Round-robin once (the weight means nothing to it), LPT once per weight.
        assert_eq!(c.len(), 1 + 3);
        assert_eq!(
            (c[0].assign, c[0].lpt_build_weight),
            (Assign::RoundRobin, 0)
        );
        assert_eq!(
            c[1..]
                .iter()
                .map(|o| (o.assign, o.lpt_build_weight))
                .collect::<Vec<_>>(),
            [(Assign::Lpt, 0), (Assign::Lpt, 500), (Assign::Lpt, 4000)]
        );
        assert_eq!(
            parse(&[]).unwrap().lpt_build_weight,
            [DEFAULT_LPT_BUILD_WEIGHT]
        );
    }

    #[test]
    fn build_contexts_multiply_outside_the_enqueue_threads() {
        let pairs = |a: &BuildBenchArgs| -> Vec<(BuildContexts, u32)> {
            configurations(a)
                .iter()
                .map(|o| (o.contexts, o.enqueue_threads))
                .collect()
        };
        // The default, `auto`: one thread through one context, more through a context each.
        let a = parse(&["--streams", "8", "--enqueue-threads", "1,4"]).unwrap();
        assert_eq!(
            pairs(&a),
            [(BuildContexts::Shared, 1), (BuildContexts::PerStream, 4)]
        );
        // 8 streams, 1 and 4 threads, through `contexts`.
        let through = |contexts: &str| {
            parse(&[
                "--streams",
                "8",
                "--enqueue-threads",
                "1,4",
                "--build-contexts",
                contexts,
            ])
            .unwrap()
        };
        // `auto` beside what it resolves to: each configuration timed once.
        assert_eq!(
            pairs(&through("auto,shared")),
            [
                (BuildContexts::Shared, 1),
                (BuildContexts::PerStream, 4),
                (BuildContexts::Shared, 4)
            ]
        );
        let a = through("shared,per-stream");
        assert_eq!(
            pairs(&a),
            [
                (BuildContexts::Shared, 1),
                (BuildContexts::Shared, 4),
                (BuildContexts::PerStream, 1),
                (BuildContexts::PerStream, 4)
            ]
        );
        let label = config_label(&configurations(&a)[3]);
        assert_eq!(
            label,
            "8 streams | fast-trace, round-robin, shared scratch, a context per stream, 4 enqueue threads"
        );
    }

    #[test]
    fn enqueue_threads_multiply_just_outside_the_stream_counts() {
        let a = parse(&["--streams", "1,8", "--enqueue-threads", "1,4"]).unwrap();
        let got: Vec<(u32, u32)> = configurations(&a)
            .iter()
            .map(|o| (o.enqueue_threads, o.streams))
            .collect();
        assert_eq!(got, [(1, 1), (1, 8), (4, 1), (4, 8)]);
        assert!(configurations(&parse(&[]).unwrap())
            .iter()
            .all(|o| o.enqueue_threads == 1));
    }

    #[test]
    fn fast_build_flag_and_flags_conflict() {
        assert!(parse(&["--fast-build", "--flags", "both"]).is_err());
        let a = parse(&["--fast-build"]).unwrap();
        assert!(configurations(&a).iter().all(|o| o.fast_build));
    }

    #[test]
    fn bad_counts_are_refused_before_any_gpu_work() {
        assert!(check_args(&parse(&["--streams", "0,4"]).unwrap()).is_err());
        assert!(check_args(&parse(&["--repeat", "0"]).unwrap()).is_err());
        assert!(check_args(&parse(&["--enqueue-threads", "1,0"]).unwrap()).is_err());
        assert!(check_args(&parse(&["--enqueue-threads", "65"]).unwrap()).is_err());
        assert!(check_args(&parse(&["--enqueue-threads", "1,4"]).unwrap()).is_ok());
        assert!(check_args(&parse(&[]).unwrap()).is_ok());
        assert!(check_args(&parse(&["--csv", "/no/such/folder/x.csv"]).unwrap()).is_err());
    }

    #[test]
    fn accel_options_convert_from_render_args() {
        let args = AccelArgs {
            streams: 0,
            fast_build: true,
            assign: AssignArg::Lpt,
            scratch: ScratchArg::PerStream,
            compact: true,
            merge_below: 64,
            lpt_build_weight: 777,
            enqueue_threads: 3,
            build_contexts: BuildContextsArg::PerStream,
            validation: false,
            optix_abi: None,
        };
        let o = AccelOptions::from(&args);
        assert_eq!(o.lpt_build_weight, 777);
        assert_eq!(o.streams, 1);
        assert!(o.fast_build && o.compact);
        assert_eq!(o.assign, Assign::Lpt);
        assert_eq!(o.scratch, ScratchMode::PerStream);
        assert_eq!(o.merge.merge_below, 64);
        assert_eq!(o.enqueue_threads, 3);
        assert_eq!(o.contexts, BuildContexts::PerStream);
        // `auto` (the default) resolves from the other options: 3 threads want a context each,
        // one thread on round-robin keeps the one context.
        let auto = |enqueue_threads| {
            AccelOptions::from(&AccelArgs {
                streams: 8,
                enqueue_threads,
                build_contexts: BuildContextsArg::Auto,
                assign: AssignArg::RoundRobin,
                lpt_build_weight: DEFAULT_LPT_BUILD_WEIGHT,
                ..args.clone()
            })
            .contexts
        };
        assert_eq!(auto(3), BuildContexts::PerStream);
        assert_eq!(auto(1), BuildContexts::Shared);
    }

    #[test]
    fn of_isolate_children_only_the_first_names_the_run() {
        assert!(announces_run(None));
        assert!(announces_run(Some(isolated::Job::Config(0))));
        assert!(!announces_run(Some(isolated::Job::Config(1))));
        assert!(!announces_run(Some(isolated::Job::Config(17))));
        assert!(!announces_run(Some(isolated::Job::Reference)));
    }

    /// A small scene of uneven groups, built in memory (test data).
    fn small_scene() -> Scene {
        use crate::scene::{Group, Material};
        use glam::Vec3;
        let groups = (0..40u32)
            .map(|g| {
                let n = if g % 10 == 0 { 500 } else { 2 };
                let mut group = Group {
                    name: format!("g{g}"),
                    ..Default::default()
                };
                for k in 0..n {
                    let o = Vec3::new(g as f32, k as f32 * 0.01, 0.0);
                    let base = group.positions.len() as u32;
                    group.positions.extend([o, o + Vec3::X, o + Vec3::Y]);
                    group.indices.push([base, base + 1, base + 2]);
                    group.face_materials.push(0);
                }
                group
            })
            .collect();
        Scene::new("small", groups, vec![Material::default_diffuse()])
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn bench_times_every_configuration_on_a_gpu() {
        let gpu = Gpu::open(0).expect("an NVIDIA GPU");
        let ctx = DeviceContext::new(&gpu, &ContextOptions::default()).expect("OptiX context");
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("bench.csv");
        let mut a = parse(&[
            "--streams",
            "1,4",
            "--flags",
            "both",
            "--repeat",
            "3",
            "--merge-below",
            "0,64",
            "--compact",
        ])
        .unwrap();
        a.csv = Some(csv.clone());
        a.plot = Some(dir.path().join("bench.svg"));
        run_on(&a, &ctx, &small_scene(), None).expect("bench");
        let text = std::fs::read_to_string(&csv).unwrap();
        // 2 flags x 2 merges x 2 stream counts, plus a single GAS per flag setting.
        assert_eq!(text.lines().count(), 1 + 8 + 2, "{text}");
        // Columns by name: fixed indices break whenever a column (issue_order,
        // enqueue_threads, ...) is added.
        let mut r = csv::Reader::from_path(&csv).unwrap();
        let header = r.headers().unwrap().clone();
        let column = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
        };
        let (min_ms, max_ms) = (column("min_ms"), column("max_ms"));
        let (output_bytes, compacted_bytes) = (column("output_bytes"), column("compacted_bytes"));
        for rec in r.records() {
            let rec = rec.unwrap();
            let min: f64 = rec[min_ms].parse().unwrap();
            let max: f64 = rec[max_ms].parse().unwrap();
            let output: u64 = rec[output_bytes].parse().unwrap();
            let compacted: u64 = rec[compacted_bytes].parse().unwrap();
            assert!(min > 0.0 && min <= max, "{rec:?}");
            assert!(compacted > 0 && compacted <= output, "{rec:?}");
        }
        assert!(std::fs::read_to_string(dir.path().join("bench.svg"))
            .unwrap()
            .contains("<polyline"));
    }

    #[test]
    fn git_commit_prefers_the_environment() {
        // Only this test touches the variable.
        std::env::set_var("GASWORKS_GIT_COMMIT", "feedbeef");
        assert_eq!(git_commit(), "feedbeef");
        std::env::remove_var("GASWORKS_GIT_COMMIT");
        assert!(!git_commit().is_empty());
    }
}
