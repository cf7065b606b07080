//! Rank 0's outputs: checkpoints while the frame runs, then the image, its resume file (for a
//! frame cut short), the statistics and the guide layers, and what the render says of them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::aovs::{write_aovs, AovsDuringFrame};
use super::controls::{Controls, Interrupted, StopSignal};
use super::options::{output_write_reserve, RenderOptions};
use super::resume::{
    checkpoint_between_passes, checkpoint_within_pass, finish_checkpoints, write_resume_or_rescue,
};
use crate::console::Verbosity;
use crate::render::checkpoint::{CheckpointHeader, Checkpointer};
use crate::render::output::{self, ImageMeta};
use crate::render::{Film, RenderSettings, Tile};
use crate::scene::Scene;
use crate::sched::report::FrameReport;
use crate::sched::{Frame, FrameSink, Published, SchedConfig, Stopped};

/// Rank 0's outputs: checkpoints between passes and inside them, and at the frame's end
/// (complete, at the time limit, stopped, or ended by a silent rank) the image, its resume
/// file, the statistics and the guide layers.
pub(super) struct Outputs<'a> {
    pub(super) opts: &'a RenderOptions,
    pub(super) controls: &'a dyn Controls,
    pub(super) out: Verbosity,
    pub(super) render_key: String,
    pub(super) window: Tile,
    /// The header of the checkpoints and of a resume file written at the end.
    pub(super) header: CheckpointHeader,
    pub(super) checkpoints: Checkpointer,
    /// The layers, taken once when written.
    pub(super) aovs: Option<AovsDuringFrame>,
    /// Where the resume file of a frame cut short went (beside the image, or rescued).
    pub(super) resume_written: Option<PathBuf>,
    pub(super) published: Published,
    /// A checkpoint asked for (SIGUSR1) when a film was last wanted, not yet written.
    pub(super) checkpoint_asked: bool,
}

impl FrameSink for Outputs<'_> {
    fn between_passes(&mut self, film: &Film, spp_done: u32) {
        checkpoint_between_passes(
            &mut self.checkpoints,
            (self.controls, std::mem::take(&mut self.checkpoint_asked)),
            film,
            spp_done,
            self.out,
        );
    }

    fn within_pass(&mut self, spp_done: u32, film: &dyn Fn() -> Film) {
        checkpoint_within_pass(
            &mut self.checkpoints,
            (self.controls, std::mem::take(&mut self.checkpoint_asked)),
            spp_done,
            film,
            self.out,
        );
    }

    fn film_wanted(&mut self, _within_pass: bool) -> bool {
        self.checkpoint_asked |= self.controls.take_checkpoint_request();
        self.checkpoint_asked || self.checkpoints.due()
    }

    fn finish(&mut self, frame: &Frame) -> anyhow::Result<()> {
        self.write(frame)
    }

    fn keep(&mut self, frame: &Frame) -> Option<String> {
        let stopped = frame.stopped.as_ref()?;
        if !stopped.rendered_any() {
            return Some("; no tile had arrived, so no image was written".into());
        }
        if let Err(e) = self.write(frame) {
            return Some(format!("; what had arrived was not written: {e:#}"));
        }
        let mut kept = format!(
            "; {} holds what had arrived, {}",
            self.opts.output.display(),
            stopped.describe(self.opts.spp)
        );
        if let Some(file) = self.resume_written.as_deref() {
            kept += &format!(
                "; to finish it, run the same command with --resume {}",
                file.display()
            );
        }
        Some(kept)
    }
}

impl Outputs<'_> {
    /// Writes what the frame left. A frame cut short keeps its complete passes (and the tiles
    /// that arrived) in a resume file, written first: it is written faster than an encoded
    /// image (under mpirun, the job may be killed a grace period after a stop), and a
    /// failure to write the image cannot lose it; a failure to write it does not keep the
    /// image from being written: that error comes after. A frame stopped before any tile
    /// arrived writes nothing: black pixels would only overwrite a good image.
    fn write(&mut self, frame: &Frame) -> anyhow::Result<()> {
        let opts = self.opts;
        let by_signal = frame.stopped.as_ref().filter(|s| !s.at_time_limit);
        if by_signal.is_some_and(|s| !s.rendered_any()) {
            return Ok(());
        }
        let mut resume_failed = None;
        if let (Some(_), Some((film, spp_done))) = (&frame.stopped, frame.resume_film()) {
            let header = CheckpointHeader {
                spp_done,
                ..self.header.clone()
            };
            match write_resume_or_rescue(&opts.resume_file(), &header, film, self.out) {
                Ok(at) => self.resume_written = Some(at),
                Err(e) => resume_failed = Some(e),
            }
        }
        let meta = ImageMeta {
            full_width: opts.width,
            full_height: opts.height,
            window: self.window,
            render: image_key(&self.render_key, frame.stopped.as_ref(), &frame.film),
            exposure: opts.tone.exposure,
            tonemap: opts.tone.tonemap,
        };
        // A write that fails (folder gone, disk full) keeps the pixels in the temporary
        // folder and says where, rather than losing the render.
        output::write_image_or_rescue(&frame.film, &opts.output, &meta, &std::env::temp_dir())?;
        if let Some(e) = resume_failed {
            let written = opts.output.display();
            return Err(e.context(format!("{written} is written, but not its resume file")));
        }
        // The statistics are those of the complete passes: with none, nothing is measured.
        if !frame.report.passes.is_empty() {
            let (stats, pictures) = (opts.stats.as_deref(), opts.costmap_pictures.as_deref());
            self.published = crate::sched::publish(frame, stats, pictures)?;
        }
        // Layers traced beside the GPU are waited for here: after the image and its resume
        // file, so that a wait cut short (a stopped job's grace) costs them alone.
        let traced = self.aovs.take().map(|p| p.finish(self.out)).transpose()?;
        if let Some(traced) = traced.flatten() {
            write_aovs(opts, &traced, &meta.render, self.out)?;
        }
        Ok(())
    }
}

/// How long the parts of a render took, for its `time:` line.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Timings {
    pub(super) load_s: f64,
    pub(super) build_s: f64,
    pub(super) render_s: f64,
    /// The samples of the film this run started from (a resume).
    pub(super) samples_resumed: f64,
}

/// Rank 0, after the frame: what it holds and took, said on the console, and the end of the
/// command: an error when a stop ended it (the image and the resume file are written), the
/// checkpoints and resume files it used up removed when it is complete.
pub(super) fn conclude(
    frame: &Frame,
    outputs: &Outputs,
    timings: Timings,
    rays: Option<u64>,
    ranks: usize,
) -> anyhow::Result<()> {
    let (a, out) = (outputs.opts, outputs.out);
    let by_signal = frame.stopped.as_ref().filter(|s| !s.at_time_limit);
    let at_time_limit = frame.stopped.as_ref().filter(|s| s.at_time_limit);
    let request = frame.report.cluster.as_ref().and_then(|c| c.stop);
    let stopped_by = request
        .and_then(|r| StopSignal::from_number(r.signal))
        .or_else(|| outputs.controls.stopped_by())
        .unwrap_or(StopSignal::Interrupt);
    if by_signal.is_some_and(|s| !s.rendered_any()) {
        return Err(Interrupted {
            by: stopped_by,
            message: "no tile was rendered, so no image was written".into(),
        }
        .into());
    }
    if ranks > 1 {
        let workers = frame.report.workers.len();
        out.status(format_args!("ranks: {ranks}, {workers} workers in all"));
    }
    out.status(time_line(frame, timings, rays, ranks));
    say_schedule(frame, outputs);
    let what = match a.pixelbounds {
        Some(_) => format!(
            "pixels {} of a {}x{} frame",
            crate::sched::window::pbrt_bounds(outputs.window),
            a.width,
            a.height
        ),
        None => format!("{}x{}", a.width, a.height),
    };
    let resume = outputs.resume_written.as_deref();
    if let Some(stopped) = at_time_limit {
        return finish_at_time_limit(a, frame, stopped, resume, &what, out);
    }
    if let Some(stopped) = by_signal {
        if let Some(r) = request.filter(|r| r.rank != 0) {
            out.status(format_args!(
                "stop: rank {} was sent {stopped_by}, and asked rank 0 to end the frame",
                r.rank
            ));
        }
        return Err(stopped_with_image(
            a, stopped, &what, resume, stopped_by, out,
        ));
    }
    let held = samples_held(a, &frame.film, outputs.window);
    out.status(format_args!(
        "output: {} ({what}, {held})",
        a.output.display()
    ));
    finish_checkpoints(a, &outputs.checkpoints, outputs.controls, out);
    Ok(())
}

/// "time: load 0.02 s, build 0.011 s, render 1.52 s, 2.760 M samples/s, 9.3 M rays/s (14...
/// rays)": samples per second only for what this run rendered, and not for a frame a stop
/// cut short (it would need the samples actually rendered).
fn time_line(frame: &Frame, t: Timings, rays: Option<u64>, ranks: usize) -> String {
    let head = format!(
        "time: load {:.2} s, build {:.3} s, render {:.2} s",
        t.load_s, t.build_s, t.render_s
    );
    let by_signal = frame.stopped.as_ref().is_some_and(|s| !s.at_time_limit);
    if by_signal {
        return format!("{head} (stopped)");
    }
    if frame.report.passes.is_empty() {
        return format!("{head} (nothing left to render: the resume file held every sample)");
    }
    let samples = (frame.film.samples() - t.samples_resumed).max(0.0);
    let mut line = format!("{head}, {:.3} M samples/s", samples / t.render_s / 1e6);
    match (rays, ranks) {
        (Some(rays), 1) => {
            line += &format!(
                ", {:.1} M rays/s ({rays} rays)",
                rays as f64 / t.render_s / 1e6
            )
        }
        (Some(rays), _) => line += &format!(" ({rays} rays traced on rank 0)"),
        (None, _) => {}
    }
    line
}

/// The schedule's summary (with -v or `--stats`), the ranks' table, the workers retired, and
/// where the statistics and pictures went.
fn say_schedule(frame: &Frame, outputs: &Outputs) {
    let (a, out) = (outputs.opts, outputs.out);
    let asked = a.stats.is_some();
    if !frame.report.passes.is_empty() {
        out.detail(asked, frame.report.summary());
        if let Some(c) = &frame.report.cluster {
            out.detail(asked, c.summary(&frame.report));
        }
    }
    if let Some(line) = retirements_line(&frame.report) {
        out.warn(line);
    }
    if let Some(files) = &outputs.published.stats {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        out.status(format_args!("statistics: {}", names.join(", ")));
    }
    if let Some((files, dir)) = &outputs.published.pictures {
        out.status(format_args!(
            "cost map pictures: {files} files in {}",
            dir.display()
        ));
    }
}

/// The samples a complete frame's pixels hold, for its `output:` line: "64 spp", or with
/// adaptive sampling "adaptive: 39.2 samples per pixel on average (8 to 256 of 256), 812 of
/// 1024 blocks stopped below the noise threshold".
fn samples_held(a: &RenderOptions, film: &Film, window: Tile) -> String {
    match a.noise_threshold {
        Some(_) => format!(
            "adaptive: {}",
            crate::sched::adaptive_sampling::describe_film(film, window, a.spp)
        ),
        None => format!("{} spp", a.spp),
    }
}

/// The render key of the frame (`output::render_key`), with adaptive sampling's settings
/// when it is on: they decide which pixels get which samples.
pub(super) fn frame_key(
    a: &RenderOptions,
    scene: &Scene,
    identity: (u64, usize),
    settings: &RenderSettings,
    schedule: &SchedConfig,
) -> String {
    let key = output::render_key(&a.scene, scene, identity, settings);
    match &schedule.adaptive_sampling {
        Some(s) => format!("{key}; {}", s.key_item(schedule.pass_spp.unwrap_or(a.spp))),
        None => key,
    }
}

/// "the frame went on without 1 of 3 workers (gpu0/s1, retired in pass 2)...": said once
/// more after the render, as the errors themselves scrolled by while it ran.
fn retirements_line(report: &FrameReport) -> Option<String> {
    if report.retirements.is_empty() {
        return None;
    }
    let who: Vec<String> = report
        .retirements
        .iter()
        .map(|r| {
            let when = if r.before_tiles { "before" } else { "in" };
            format!("{}, retired {when} pass {}", r.label, r.pass + 1)
        })
        .collect();
    Some(format!(
        "the frame went on without {} of {} workers ({}); every pixel got all its samples, \
         from the workers left (--on-worker-error stop ends the frame instead)",
        report.retirements.len(),
        report.workers.len(),
        who.join("; ")
    ))
}

/// A frame a stop signal ended, its image written (and the resume file, when `resume` names
/// it): says what the image holds, and gives the error that makes the command exit as a
/// process ended by that signal.
fn stopped_with_image(
    a: &RenderOptions,
    stopped: &Stopped,
    what: &str,
    resume: Option<&Path>,
    by: StopSignal,
    out: Verbosity,
) -> anyhow::Error {
    let how_far = stopped.describe(a.spp);
    out.status(format_args!(
        "output: {} ({what}, stopped: {how_far})",
        a.output.display()
    ));
    let mut message = format!("{} holds {how_far}", a.output.display());
    if let Some(file) = resume {
        message += &format!(
            "; to finish it, run the same command with --resume {}",
            file.display()
        );
    }
    Interrupted { by, message }.into()
}

/// The render key an image carries: the render's, with the samples its pixels hold when a
/// stop or the time limit ended it early (`spp 16 of 64`, or `spp stopped: ...` where a pass
/// was cut: [`output::SamplesHeld`]), so that `merge` joins it only with crops of the same
/// samples of the same render, and `preview` of its resume file writes the same key.
pub(super) fn image_key(render_key: &str, stopped: Option<&Stopped>, film: &Film) -> String {
    match stopped {
        None => render_key.to_string(),
        Some(s) => output::SamplesHeld::of(film, render_key, s.spp_complete).image_key(render_key),
    }
}

/// A frame that `--time-limit` ended at a pass boundary: its image and its resume file (at
/// `resume_file`, when a pass was complete) are written; this says so. The --resume file this
/// run started from is used up (the new one holds more), unless it is that same file.
fn finish_at_time_limit(
    a: &RenderOptions,
    frame: &Frame,
    stopped: &Stopped,
    resume_file: Option<&Path>,
    what: &str,
    out: Verbosity,
) -> anyhow::Result<()> {
    let how_far = stopped.describe(a.spp);
    out.status(format_args!(
        "output: {} ({what}, at the time limit: {how_far})",
        a.output.display()
    ));
    if let Some(file) = resume_file {
        let pixels = u64::from(frame.film.width) * u64::from(frame.film.height);
        out.status(format_args!(
            "time limit {}: the next pass would have ended past it ({:.1} s of it kept for writing the outputs); to go on, run the same command with --resume {}",
            format_duration(a.time_limit.unwrap_or_default()),
            output_write_reserve(pixels).as_secs_f64(),
            file.display()
        ));
    }
    // Only when the new file is where the render keeps it: one rescued to the temporary
    // folder (which a cluster node may wipe when the job ends) leaves the old one in place.
    let kept_in_place = resume_file.is_some_and(|f| f == a.resume_file().as_path());
    if let (Some(path), Some(file), true) = (&a.resume, resume_file, kept_in_place) {
        // By file, not by spelling: `--resume ./x.exr.gasworks-resume` is the new file.
        if !crate::render::paths::same_file(path, file) && std::fs::remove_file(path).is_ok() {
            out.status(format_args!(
                "resume: {} removed (the new one holds more)",
                path.display()
            ));
        }
    }
    Ok(())
}

/// "2h", "10m", "90s", "1.5s": a duration as it was given.
fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_cut_short_carries_the_samples_its_pixels_hold() {
        use crate::sched::{PartialPass, Stopped};
        let key = "scene a.obj; spp 64; max-depth 8";
        let mut film = crate::render::Film::new(4, 2);
        for p in &mut film.pixels {
            p[3] = 16.0;
        }
        // A complete frame keeps the render's key (its film is not looked at).
        assert_eq!(image_key(key, None, &film), key);
        let whole = Stopped {
            spp_complete: 16,
            partial: None,
            at_time_limit: true,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            image_key(key, Some(&whole), &film),
            "scene a.obj; spp 16 of 64; max-depth 8"
        );
        // Three pixels have the cut pass: whatever tiles they were in, the key counts pixels,
        // as `preview` does from the resume file.
        for p in [1, 2, 6] {
            film.pixels[p][3] = 32.0;
        }
        let cut = Stopped {
            spp_complete: 16,
            partial: Some(PartialPass {
                samples: 16..32,
                tiles_done: 1,
                tiles: 8,
                carried_pixels: 0,
            }),
            at_time_limit: false,
            stopped_blocks: None,
            lost: None,
        };
        assert_eq!(
            image_key(key, Some(&cut), &film),
            "scene a.obj; spp stopped: 16 everywhere, 16..32 in 3 of 8 pixels; max-depth 8"
        );
    }
}
