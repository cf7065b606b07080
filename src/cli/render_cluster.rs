//! `mpirun -np N gasworks render ...` (feature `mpi`): one frame rendered by N ranks.
//!
//! Every rank parses the same command line, loads the scene and builds its own renderers
//! (`--devices` and `--threads` are per rank; without `--threads` a rank takes its share of
//! its node's cores). Whatever fails while a rank gets ready (a missing scene, a parse error,
//! no GPU, an unwritable output on rank 0) becomes that rank's answer in the handshake, so
//! every rank prints the same error and exits non-zero. Rank 0 writes the image (atomically:
//! a temporary file renamed on success) and the statistics; only it prints the summary.
//! Rank 0 also reads `--resume` and writes the checkpoints (`--checkpoint-every`, SIGUSR1,
//! which mpirun passes on to every rank): it holds the film.
//!
//! Environment: `GASWORKS_RANK_TIMEOUT_S` (default 30): a rank silent that long during the
//! frame is taken for dead or hung and the job is aborted. With the cargo feature
//! `fault-injection`, `GASWORKS_TEST_FAULT` (`rank=R,after=N,kind=abort|exit|kill|silence`): a
//! test hook that makes rank R fail after it has rendered N tiles (rank 0: after N tiles of any
//! rank reached it); see [`crate::fault_injection::cluster_fault`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::console::Verbosity;
use super::render::{
    after_checkpoints, check_args, check_frame_memory, check_outputs_against_textures,
    check_report_paths, checkpoint_between_passes, checkpoint_within_pass,
    choose_environment_share, finish_at_time_limit, finish_checkpoints, frame_key, image_key,
    load_scene, pass_deadline, print_load_warnings, read_resume, render_settings, samples_held,
    schedule_config, set_up_backend, stopped_with_image, warn_about_checkpoints,
    write_resume_or_rescue, Interrupted, RenderArgs,
};
use super::render_aovs::{check_aov_paths, frame_on_gpus_alone, write_aovs, PendingAovs};
use super::signals;
use crate::backend::WorkerFactory;
use crate::cluster::mpi::MpiWorld;
use crate::cluster::{
    fingerprint::fingerprint, run_node, ClusterJob, Discard, FaultHook, FrameSink, PlanInputs,
    RankSetup, Timing, Transport,
};
use crate::cpu::{SceneBvh, SharedBvh};
use crate::optix::pathtracer::OptixOptions;
use crate::render::checkpoint::{self, CheckpointHeader, Checkpointer};
use crate::render::output::{self, ImageMeta};
use crate::render::{Film, RenderSettings, Tile};
use crate::scene::camera::CameraFrame;
use crate::scene::Scene;
use crate::sched::{Frame, Resume, SchedConfig};

/// Rank 0's outputs: checkpoints between passes and inside them, the image and statistics at
/// the end.
struct RankZeroOutputs<'c, W: FnMut(&Frame) -> anyhow::Result<()>> {
    write: W,
    checkpoints: &'c mut Checkpointer,
    out: Verbosity,
    /// For the message of a job ended by a silent rank: the image, its samples per pixel,
    /// and where `write` put the resume file.
    output: &'c std::path::Path,
    spp: u32,
    resume_written: &'c std::cell::RefCell<Option<std::path::PathBuf>>,
}

impl<W: FnMut(&Frame) -> anyhow::Result<()>> FrameSink for RankZeroOutputs<'_, W> {
    fn between_passes(&mut self, film: &Film, spp_done: u32) {
        checkpoint_between_passes(self.checkpoints, film, spp_done, self.out);
    }
    fn within_pass(&mut self, spp_done: u32, film: &dyn Fn() -> Film) {
        checkpoint_within_pass(self.checkpoints, spp_done, film, self.out);
    }
    fn finish(&mut self, frame: &Frame) -> anyhow::Result<()> {
        (self.write)(frame)
    }
    fn keep(&mut self, frame: &Frame) -> Option<String> {
        let stopped = frame.stopped.as_ref()?;
        if !stopped.rendered_any() {
            return Some("; no tile had arrived, so no image was written".into());
        }
        if let Err(e) = (self.write)(frame) {
            return Some(format!("; what had arrived was not written: {e:#}"));
        }
        let mut kept = format!(
            "; {} holds what had arrived, {}",
            self.output.display(),
            stopped.describe(self.spp)
        );
        if let Some(file) = self.resume_written.borrow().as_deref() {
            kept += &format!(
                "; to finish it, run the same command with --resume {}",
                file.display()
            );
        }
        Some(kept)
    }
}

pub fn run(a: RenderArgs, mut world: MpiWorld) -> anyhow::Result<()> {
    // --time-limit counts from here (rank 0's clock decides).
    let started = Instant::now();
    let (rank, size) = (world.rank(), world.size());
    // Rank 0 speaks for the job; the others print only warnings of their own and errors.
    let out = if rank == 0 {
        Verbosity::from_flags(a.quiet, a.verbose)
    } else {
        Verbosity::Quiet
    };
    // SIGUSR1 reaches every rank through mpirun (its default action would end the rank);
    // rank 0 writes the checkpoint.
    signals::watch_checkpoint_requests(out);
    let host = world.host().to_string();
    let timing = Timing {
        dead_after: rank_timeout(std::env::var("GASWORKS_RANK_TIMEOUT_S").ok())?,
        ..Timing::default()
    };
    let fault =
        crate::fault_injection::cluster_fault(FaultHook::parse).map_err(anyhow::Error::msg)?;

    // Everything that can fail while this rank gets ready is caught here and sent to rank 0
    // in the handshake, never returned early: the other ranks would wait for this one.
    let threads = a.threads.unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / world.local_size()).max(1)
    });
    // The scene's content hash is computed once: it reads every byte of the scene, and both
    // the render key and the fingerprint name it.
    type Loaded = (
        Arc<Scene>,
        u64,
        RenderSettings,
        SchedConfig,
        OptixOptions,
        f64,
        Option<Resume>,
        Option<Arc<SceneBvh>>,
    );
    let loaded = (|| -> anyhow::Result<Loaded> {
        check_args(&a)?;
        if a.pixelbounds.is_some() {
            anyhow::bail!(
                "--pixelbounds renders one crop per process: run it without mpirun (or with -np 1), one job per crop, and join them with `gasworks merge`"
            );
        }
        if rank == 0 {
            output::check_writable(&a.output)?;
            check_aov_paths(&a)?;
            check_report_paths(&a)?;
            check_frame_memory(a.width, a.height)?;
        }
        let schedule = schedule_config(&a)?;
        let optix_options = a.accel.optix_options()?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("cannot set the number of threads")?;
        let (mut scene, load_s) = load_scene(&a)?;
        if rank == 0 {
            check_outputs_against_textures(&a, &scene)?;
            print_load_warnings(&a, &scene, out);
        }
        let settings = render_settings(&a, &scene, out)?;
        // Every rank measures the same share (the probe is deterministic); the fingerprint
        // compares it with the others' before the frame.
        let probe_bvh = choose_environment_share(&a, &mut scene, &settings, out);
        let content = crate::scene::content_hash::content_hash(&scene);
        // Rank 0 holds the film: it reads the resume file (the other ranks need not see it).
        let resume = match (&a.resume, rank) {
            (Some(path), 0) => {
                let key = frame_key(&a, &scene, content, &settings, &schedule);
                let r = read_resume(
                    path,
                    &key,
                    Tile::whole(a.width, a.height),
                    &schedule,
                    a.spp,
                    out,
                )?;
                // A file holding every sample (a checkpoint after the last tile, the job
                // ended before its image) gives its image back, as in one process.
                Some(r)
            }
            _ => None,
        };
        Ok((
            // Only read from here on: shared with the CPU backend, not copied for it.
            Arc::new(scene),
            content,
            settings,
            schedule,
            optix_options,
            load_s,
            resume,
            probe_bvh,
        ))
    })();
    // The film to resume from goes to the master as it is (a 4K film is 130 MB: not copied);
    // the probe's BVH to the CPU backend and rank 0's --aov layers, which build it once
    // between them when there is none.
    let (loaded, mut resume, mut cpu_bvh) = match loaded {
        Ok((scene, content, settings, schedule, optix_options, load_s, resume, bvh)) => (
            Ok((scene, content, settings, schedule, optix_options, load_s)),
            resume,
            SharedBvh::new(bvh),
        ),
        Err(e) => (Err(e), None, SharedBvh::default()),
    };
    // Rank 0's --aov layers, on the probe's BVH where there is one: where its frame runs on
    // GPUs alone (and no --time-limit counts them), traced beside its GPU's setup and frame,
    // as in one process; otherwise before the handshake, where every rank waits for them.
    let aovs = match (&loaded, rank) {
        (Ok((scene, _, settings, schedule, _, _)), 0) => {
            let beside =
                !a.aov.is_empty() && a.time_limit.is_none() && frame_on_gpus_alone(&a, schedule);
            let whole = Tile::whole(a.width, a.height);
            PendingAovs::start(&a, scene, cpu_bvh.clone(), settings, whole, beside)
        }
        _ => PendingAovs::None,
    };
    let samples_resumed = resume.as_ref().map_or(0.0, crate::sched::Resume::samples);
    let (setup, factory) = match &loaded {
        Ok((scene, content, settings, schedule, optix_options, _)) => {
            match get_ready(
                &a,
                rank,
                &host,
                scene,
                *content,
                settings,
                schedule,
                optix_options,
                resume.take(),
                // Not held here through the frame: a GPU alone drops it.
                std::mem::take(&mut cpu_bvh),
            ) {
                Ok((setup, factory)) => (Ok(setup), Some(factory)),
                Err(e) => (Err(format!("{host}: {}", error_text(&e))), None),
            }
        }
        Err(e) => (Err(format!("{host}: {}", error_text(e))), None),
    };

    let Ok((scene, content, settings, schedule, _, load_s)) = &loaded else {
        // This rank could not even load the scene: it still takes part in the handshake, so
        // that every rank learns why the job cannot start.
        let job = ClusterJob {
            settings: placeholder_settings(),
            config: SchedConfig::default(),
            quiet: true,
            timing,
            fault,
            deadline: None,
            stop: None,
        };
        let e = match run_node(&mut world, setup, &job, &mut Discard) {
            Err(e) => e.to_string(),
            Ok(_) => format!("the handshake accepted rank {rank}, which was not ready"),
        };
        return Err(report_everywhere(world, &e));
    };
    // Before the handshake, as more of rank 0's setup (a --time-limit counts them), unless
    // they are traced beside its GPU; written after the image (taken once, by the write).
    let mut aovs = Some(aovs.trace_before_frame());
    let job = ClusterJob {
        settings: *settings,
        config: schedule.clone(),
        quiet: out.is_quiet(),
        timing,
        fault,
        deadline: pass_deadline(&a, started, u64::from(a.width) * u64::from(a.height)),
        stop: Some(&signals::STOPPED_BY),
    };
    let render_key = frame_key(&a, scene, *content, settings, schedule);
    if rank == 0 {
        warn_about_checkpoints(&a, out);
    }
    let header = CheckpointHeader {
        render: render_key.clone(),
        window: [0, 0, a.width, a.height],
        pass_spp: schedule.pass_spp.unwrap_or(a.spp),
        spp_done: 0,
        software: output::software(),
        png_tone: a.tone.recorded(),
    };
    let mut checkpoints = Checkpointer::new(
        checkpoint::path_for(&a.output),
        header.clone(),
        a.checkpoint_every,
    );
    let render_start = Instant::now();
    let resume_file = checkpoint::path_for(&a.output);
    // Where the resume file of a frame cut short went (beside the image, or rescued).
    let resume_written: std::cell::RefCell<Option<std::path::PathBuf>> = Default::default();
    let resume_failed: std::cell::RefCell<Option<anyhow::Error>> = Default::default();
    let write = |frame: &Frame| -> anyhow::Result<()> {
        let stopped = frame.stopped.as_ref().filter(|s| !s.at_time_limit);
        if stopped.is_some_and(|s| !s.rendered_any()) {
            // Nothing to keep: black pixels would only overwrite a good image.
            return Ok(());
        }
        if frame.stopped.is_some() {
            // Written here, before rank 0 tells the others the frame is over: mpirun kills
            // what is left of a job it was asked to end a grace period after its SIGTERM. The
            // resume file first: it keeps every complete pass and the tiles that arrived, and
            // it is written faster than an encoded image (at 4K, 0.5 s against over 1 s,
            // mpirun's default grace).
            if let Some((film, spp_done)) = frame.resume_film() {
                let header = CheckpointHeader {
                    spp_done,
                    ..header.clone()
                };
                // Not `?`: the image below is written whatever happens here, and this error
                // reported after it.
                match write_resume_or_rescue(&resume_file, &header, film, out) {
                    Ok(at) => *resume_written.borrow_mut() = Some(at),
                    Err(e) => *resume_failed.borrow_mut() = Some(e),
                }
            }
        }
        let meta = ImageMeta {
            exposure: a.tone.exposure,
            tonemap: a.tone.curve(),
            ..ImageMeta::whole(
                a.width,
                a.height,
                image_key(&render_key, frame.stopped.as_ref(), &frame.film),
            )
        };
        output::write_image_or_rescue(&frame.film, &a.output, &meta, &std::env::temp_dir())?;
        if let Some(e) = resume_failed.borrow_mut().take() {
            return Err(e.context(format!(
                "{} is written, but not its resume file",
                a.output.display()
            )));
        }
        // Layers traced beside the GPU are waited for here: after the image and its resume
        // file, so that a wait cut short by mpirun (a stopped job's grace) costs them alone.
        let traced = aovs.take().map(|p| p.finish(out)).transpose()?.flatten();
        if let Some(traced) = &traced {
            write_aovs(&a, traced, &meta.render, out)?;
        }
        if frame.report.passes.is_empty() {
            // The statistics are those of the complete passes: none, nothing measured.
            return Ok(());
        }
        crate::sched::publish(
            frame,
            a.schedule.stats.as_deref(),
            a.schedule.costmap.as_deref(),
        )?;
        // As one process prints it (-v or --stats), then the ranks' table.
        out.detail(a.schedule.stats.is_some(), frame.report.summary());
        if let Some(c) = &frame.report.cluster {
            out.detail(a.schedule.stats.is_some(), c.summary(&frame.report));
        }
        if let Some(line) = super::render::retirements_line(&frame.report) {
            out.warn(line);
        }
        Ok(())
    };
    let mut outputs = RankZeroOutputs {
        write,
        checkpoints: &mut checkpoints,
        out,
        output: &a.output,
        spp: a.spp,
        resume_written: &resume_written,
    };
    // From here Ctrl-C, SIGTERM and SIGHUP stop the frame on every rank (mpirun sends its
    // ranks SIGTERM when it is told to end the job): rank 0 writes what has arrived.
    signals::watch_stops(signals::Stopping::ClusterRank, out);
    let result = if rank == 0 {
        run_node(&mut world, setup, &job, &mut outputs)
    } else {
        run_node(&mut world, setup, &job, &mut Discard)
    };
    if crate::cluster::node::silenced_by_fault_hook() {
        // The test hook's hung rank: alive, silent, until the job is aborted.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let frame = match result {
        Ok(frame) => frame,
        Err(e) => {
            // On rank 0, the checkpoint that can finish the frame, if one was written.
            let e = after_checkpoints(e.into(), &checkpoints);
            return Err(report_everywhere(world, &error_text(&e)));
        }
    };
    // Rank 0 has written what the frame left: a signal from here on (mpirun passing on a
    // batch system's SIGTERM in the job's last second) changes nothing.
    signals::frame_ended();
    if let Some(frame) = frame {
        // The four lines of a single process's render, the ranks in the second.
        let render_s = render_start.elapsed().as_secs_f64();
        // The samples this run rendered: those the resumed film did not hold, if any, and up
        // to the time limit's boundary, if it stopped the frame.
        let at_time_limit = frame.stopped.as_ref().filter(|s| s.at_time_limit);
        let by_signal = frame.stopped.as_ref().filter(|s| !s.at_time_limit);
        let samples = (frame.film.samples() - samples_resumed).max(0.0);
        let request = frame.report.cluster.as_ref().and_then(|c| c.stop);
        let stopped_by = request
            .and_then(|r| signals::StopSignal::from_number(r.signal))
            .unwrap_or(signals::StopSignal::Terminate);
        if let Some(stopped) = by_signal {
            if !stopped.rendered_any() {
                let e = Interrupted {
                    by: stopped_by,
                    message: "no tile had arrived, so no image was written".into(),
                };
                return Err(report_stop(world, &e.into(), stopped_by));
            }
        }
        out.status(format_args!(
            "scene: {}: {}",
            a.scene.display(),
            scene.size_text(),
        ));
        out.status(format_args!(
            "ranks: {size}, {} workers in all",
            frame.report.workers.len()
        ));
        if by_signal.is_some() {
            // Samples per second would need the samples actually rendered: not claimed.
            out.status(format_args!(
                "time: load {load_s:.2} s, render {render_s:.2} s (stopped)"
            ));
        } else if frame.report.passes.is_empty() {
            // Resumed from a file that held every sample: no rank rendered anything.
            out.status(format_args!(
                "time: load {load_s:.2} s, render {render_s:.2} s (nothing left to render: the resume file held every sample)"
            ));
        } else {
            let mut time = format!(
                "time: load {load_s:.2} s, render {render_s:.2} s, {:.3} M samples/s",
                samples / render_s / 1e6
            );
            if let Some(rays) = factory.as_ref().and_then(|f| f.rays_traced()) {
                time += &format!(" ({rays} rays traced on rank 0)");
            }
            out.status(time);
        }
        if let Some(stopped) = by_signal {
            if let Some(r) = request.filter(|r| r.rank != 0) {
                out.status(format_args!(
                    "stop: rank {} was sent {stopped_by}, and asked rank 0 to end the frame",
                    r.rank
                ));
            }
            let what = format!("{}x{}", a.width, a.height);
            let resume = resume_written.borrow().clone();
            let e = stopped_with_image(&a, stopped, &what, resume.as_deref(), stopped_by, out);
            return Err(report_stop(world, &e, stopped_by));
        }
        if let Some(stopped) = at_time_limit {
            let what = format!("{}x{}", a.width, a.height);
            let resume = resume_written.borrow().clone();
            return finish_at_time_limit(&a, &frame, stopped, resume.as_deref(), &what, out);
        }
        out.status(format_args!(
            "output: {} ({}x{}, {})",
            a.output.display(),
            a.width,
            a.height,
            samples_held(&a, &frame.film, Tile::whole(a.width, a.height))
        ));
        finish_checkpoints(&a, &checkpoints, out);
    }
    Ok(())
}

/// The backend, the workers and (on rank 0) the cost map and the film to resume from: this
/// rank's part of the handshake.
#[allow(clippy::too_many_arguments)]
fn get_ready(
    a: &RenderArgs,
    rank: usize,
    host: &str,
    scene: &Arc<Scene>,
    content: u64,
    settings: &RenderSettings,
    schedule: &SchedConfig,
    optix_options: &OptixOptions,
    resume: Option<Resume>,
    cpu_bvh: SharedBvh,
) -> anyhow::Result<(RankSetup, WorkerFactory)> {
    let print = fingerprint(scene, content, settings, schedule);
    // Rank 0's cost map, as in one process: rasterized while a GPU is set up, else after.
    let (backend, early) = set_up_backend(
        a,
        scene,
        settings,
        schedule,
        optix_options,
        rank == 0,
        cpu_bvh,
    )?;
    let description = backend.description.clone();
    let mut devices = schedule.devices.clone();
    // As in one process: without --devices, a GPU rank runs two streams on GPU 0.
    if a.schedule.devices.is_none() && backend.optix.is_some() {
        devices = vec![crate::sched::DeviceSpec::Gpu {
            device: 0,
            streams: 2,
        }];
    }
    let factory = WorkerFactory::new(scene, settings, optix_options, backend);
    let workers = crate::sched::workers::build_workers(&devices, &factory)?;
    if workers.is_empty() {
        anyhow::bail!("--devices gives this rank no worker");
    }
    let plan = (rank == 0).then(|| {
        let (estimate, raster, estimate_stats) = match early {
            Some(e) => e.into_parts(),
            None => crate::sched::estimate_costmap(
                scene,
                settings,
                schedule,
                crate::render::Tile::whole(settings.width, settings.height),
            ),
        };
        PlanInputs {
            estimate,
            raster,
            estimate_stats,
            resume,
        }
    });
    Ok((
        RankSetup::new(workers, host.to_string(), description, print, plan),
        factory,
    ))
}

/// Settings for a rank that could not load the scene: it only takes part in the handshake,
/// which ends the job before anything is rendered.
fn placeholder_settings() -> RenderSettings {
    RenderSettings {
        width: 1,
        height: 1,
        spp: 1,
        max_depth: 1,
        seed: 0,
        camera: CameraFrame {
            eye: glam::Vec3::ZERO,
            u: glam::Vec3::X,
            v: glam::Vec3::Y,
            w: glam::Vec3::Z,
            width: 1,
            height: 1,
            filter: crate::scene::PixelFilter::Box,
            lens: crate::scene::ThinLens::default(),
        },
    }
}

/// Prints `message` on this rank and waits for every rank to have printed theirs before MPI
/// ends: mpirun kills the remaining ranks as soon as one exits non-zero. Only errors that
/// every rank has (the handshake's verdict, rank 0's output error) come here; the others end
/// the job with `MPI_Abort`.
fn report_everywhere(world: MpiWorld, message: &str) -> anyhow::Error {
    super::console::write_whole(format_args!("error: {message}"));
    world.barrier();
    drop(world);
    super::Reported { exit_code: 1 }.into()
}

/// Rank 0's end after a stop signal: the message is printed before MPI ends (which waits for
/// the other ranks, and mpirun may kill a job it was told to end before that), and the rank
/// exits as a process ended by that signal (130, 143, 129).
fn report_stop(world: MpiWorld, e: &anyhow::Error, by: signals::StopSignal) -> anyhow::Error {
    super::console::write_whole(format_args!("error: {e}"));
    drop(world);
    super::Reported {
        exit_code: by.exit_code(),
    }
    .into()
}

/// An error and its causes on one line, each cause once (a loader error often repeats its
/// source's text in its own).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    text
}

/// `GASWORKS_RANK_TIMEOUT_S`: how long a rank may stay silent before it is taken for dead;
/// the default when unset.
fn rank_timeout(value: Option<String>) -> anyhow::Result<Duration> {
    let Some(v) = value else {
        return Ok(Timing::default().dead_after);
    };
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .with_context(|| {
            format!("GASWORKS_RANK_TIMEOUT_S={v:?}: expected a positive number of seconds")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rank_timeout_is_a_positive_representable_number_of_seconds() {
        assert_eq!(rank_timeout(None).unwrap(), Timing::default().dead_after);
        assert_eq!(
            rank_timeout(Some("2.5".into())).unwrap(),
            Duration::from_millis(2500)
        );
        for bad in ["0", "-1", "nan", "inf", "1e20", "soon", ""] {
            let e = rank_timeout(Some(bad.into())).unwrap_err().to_string();
            assert!(e.contains("GASWORKS_RANK_TIMEOUT_S"), "{bad}: {e}");
        }
    }
}
