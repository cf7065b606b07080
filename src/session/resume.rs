//! Resuming and checkpoints: the resume file of an earlier, stopped render read and checked
//! against this one, checkpoints written between passes and inside them, and what the files
//! left at the end say.

use std::path::{Path, PathBuf};

use super::controls::Controls;
use super::options::RenderOptions;
use crate::console::Verbosity;
use crate::render::checkpoint::{self, CheckpointHeader, Checkpointer};
use crate::render::{output, Film, Tile};
use crate::sched::{window, SchedConfig};

/// Before the render: says that an earlier render of this output left a resume file (this
/// one, without --resume, starts afresh and replaces it at its first checkpoint), that
/// --time-limit has no pass boundary to stop at, or which passes it chose.
pub(super) fn warn_about_checkpoints(a: &RenderOptions, passes_chosen: bool, out: Verbosity) {
    match a.schedule.pass_spp {
        Some(_) if passes_chosen && a.spp == 1 => out.warn(format_args!(
            "--spp 1 is one pass, so --time-limit cannot stop between passes"
        )),
        Some(k) if passes_chosen => {
            let why = match (a.time_limit.is_some(), a.noise_threshold.is_some()) {
                (true, true) => "for --time-limit to stop between and --noise-threshold to decide between",
                (false, true) => "for --noise-threshold to decide between",
                _ => "for --time-limit to stop between",
            };
            let resume_needs = if a.noise_threshold.is_some() {
                String::new()
            } else {
                format!("; a --resume of this render without --time-limit needs --pass-spp {k}")
            };
            out.status(format_args!(
                "passes: {} of {k} samples per pixel, {why} (--pass-spp sets another size{resume_needs})",
                a.spp.div_ceil(k)
            ))
        }
        Some(k) if a.time_limit.is_some() && k >= a.spp => out.warn(format_args!(
            "--pass-spp {k} is not fewer than --spp {}: the render is one pass, so --time-limit cannot stop between passes",
            a.spp
        )),
        _ => {}
    }
    let file = checkpoint::path_for(&a.output);
    if a.resume.is_none() && file.exists() {
        out.warn(format_args!(
            "{} exists: an earlier render to {} was stopped or killed; this one starts from the first sample and replaces it at its first checkpoint (to finish that one instead, add --resume {})",
            file.display(),
            a.output.display(),
            file.display()
        ));
    }
}

/// At a pass boundary: a checkpoint when one is due or SIGUSR1 asked. A failed write (a full
/// disk) warns and the render goes on: the next tile or boundary tries again.
pub(super) fn checkpoint_between_passes(
    checkpoints: &mut Checkpointer,
    (controls, asked_before): (&dyn Controls, bool),
    film: &Film,
    spp_done: u32,
    out: Verbosity,
) {
    let asked = controls.take_checkpoint_request() || asked_before;
    if let Some(Err(e)) = checkpoints.at_boundary(film, spp_done, asked) {
        out.warn(format_args!(
            "checkpoint not written, the render goes on: {e}"
        ));
    }
}

/// Inside a pass, after a tile: a checkpoint (the complete passes, `spp_done` samples per
/// pixel, and the pass's finished tiles) when one is due or SIGUSR1 asked, so that a render
/// in one pass, or in long ones, is not lost to a kill. The film is copied only then.
pub(super) fn checkpoint_within_pass(
    checkpoints: &mut Checkpointer,
    (controls, asked_before): (&dyn Controls, bool),
    spp_done: u32,
    film: &dyn Fn() -> Film,
    out: Verbosity,
) {
    let asked = controls.take_checkpoint_request() || asked_before;
    if !(asked || checkpoints.due()) {
        return;
    }
    if let Some(Err(e)) = checkpoints.at_boundary(&film(), spp_done, true) {
        out.warn(format_args!(
            "checkpoint not written, the render goes on: {e}"
        ));
    }
}

/// A render that fails after a checkpoint (a GPU lost, a rank dead) can still be finished:
/// the error says from where.
pub(super) fn after_checkpoints(e: anyhow::Error, checkpoints: &Checkpointer) -> anyhow::Error {
    if checkpoints.written == 0 {
        return e;
    }
    let (Some(latest), file) = (checkpoints.latest(), checkpoints.path().display()) else {
        return e;
    };
    e.context(format!(
        "the render failed; its checkpoint {file} holds {latest}: to finish it, run the same command with --resume {file}",
    ))
}

/// After a complete render: what the checkpoints were, and the resume files it used up (the
/// one given to --resume, and the one this run wrote: the same file when the command was
/// repeated as it was) removed.
pub(super) fn finish_checkpoints(
    a: &RenderOptions,
    checkpoints: &Checkpointer,
    controls: &dyn Controls,
    out: Verbosity,
) {
    let ours = checkpoints.path();
    if checkpoints.written > 0 {
        let removed = if std::fs::remove_file(ours).is_ok() {
            ", removed: the render is complete"
        } else {
            ""
        };
        out.status(format_args!(
            "checkpoints: {} written to {} (the latest holding {}, the slowest in {:.2} s){removed}",
            checkpoints.written,
            ours.display(),
            checkpoints.latest().unwrap_or_default(),
            checkpoints.slowest.as_secs_f64()
        ));
    }
    if controls.checkpoint_request_pending() {
        out.warn(
            "SIGUSR1 asked for a checkpoint, but the render ended before another tile was done",
        );
    }
    if let Some(path) = &a.resume {
        if std::fs::remove_file(path).is_ok() {
            out.status(format_args!(
                "resume: {} removed (the render is complete)",
                path.display()
            ));
        }
    }
}

/// Reads `--resume FILE`, checks it belongs to this render: the same settings (the render
/// key: scene, size, spp, depth, seed, camera, environment, lights, adaptive sampling),
/// window and pass size (`schedule`'s), and says how far it got (of `spp`).
pub(super) fn read_resume(
    path: &Path,
    render_key: &str,
    window: Tile,
    schedule: &SchedConfig,
    spp: u32,
    out: Verbosity,
) -> anyhow::Result<crate::sched::Resume> {
    let pass_spp = schedule.pass_spp.unwrap_or(spp);
    let (header, film) = checkpoint::read(path)?;
    let here = path.display();
    check_header(path, &header, render_key, window, pass_spp)?;
    let resume = crate::sched::Resume {
        film,
        spp_done: header.spp_done,
    };
    // Every pixel must have the complete passes' samples, or those and the next pass's (a
    // stop inside a pass keeps its finished tiles): anything else is not this render's film.
    let passes = crate::sched::pass_ranges(pass_spp, spp);
    let adaptive = schedule.adaptive_sampling.as_ref().map(|a| (a, window));
    let start = crate::sched::resume_start(&passes, spp, &resume, adaptive)
        .map_err(|e| anyhow::anyhow!("{here}: damaged resume file: {e:#}"))?;
    let done = passes.get(start.first_pass).map_or(spp, |p| p.start);
    let behind = match adaptive {
        Some(_) => resume
            .film
            .pixels
            .iter()
            .filter(|p| p[3] < done as f32)
            .count(),
        None => 0,
    };
    let stopped_blocks = match behind {
        0 => String::new(),
        n => {
            format!(", fewer in the {n} pixels whose blocks had stopped below the noise threshold")
        }
    };
    let ahead = match start.ahead {
        Some(a) => format!(
            ", and samples {done}..{} in {} of {} pixels (the stopped pass's finished tiles)",
            a.end,
            a.pixels,
            resume.film.pixels.len()
        ),
        None => String::new(),
    };
    out.status(format_args!(
        "resume: {here}: {done} of {spp} samples per pixel done{stopped_blocks}{ahead}"
    ));
    warn_of_another_build(path, &header.software, out);
    Ok(resume)
}

/// Refuses a resume file of another render: other settings (naming those that differ, not
/// two long lines to compare by eye), another window or another pass size.
fn check_header(
    path: &Path,
    header: &CheckpointHeader,
    render_key: &str,
    window: Tile,
    pass_spp: u32,
) -> anyhow::Result<()> {
    let here = path.display();
    let differ = output::render_key_differences(&header.render, render_key);
    if !differ.is_empty() {
        let edited = differ.iter().any(|(t, _)| t.starts_with("content "));
        let differ: Vec<String> = differ
            .iter()
            .map(|(t, o)| format!("'{t}' (this command: '{o}')"))
            .collect();
        anyhow::bail!(
            "{here}: this resume file is of another render: {}; {}",
            differ.join(", "),
            if edited {
                "the scene's geometry, materials or textures changed since that render was stopped, and resuming would mix the samples of two scenes into one image: render it afresh, or restore the scene"
            } else {
                "resume with the command line that was stopped"
            }
        );
    }
    if header.window_tile() != window {
        anyhow::bail!(
            "{here}: this resume file covers pixels {} and this command {}: give the same --pixelbounds",
            window::pbrt_bounds(header.window_tile()),
            window::pbrt_bounds(window)
        );
    }
    if header.pass_spp != pass_spp {
        anyhow::bail!(
            "{here}: the stopped render ran passes of {} samples and this command {}: give the same --pass-spp (the sums must be added in the same order)",
            header.pass_spp,
            pass_spp
        );
    }
    Ok(())
}

/// A resume file that another build wrote (`software`) may hold samples that differ from
/// this build's: the finished image converges to the same picture, not bit for bit.
fn warn_of_another_build(path: &Path, software: &str, out: Verbosity) {
    let ours = output::software();
    if software == ours {
        return;
    }
    let theirs = if software.is_empty() {
        "an earlier gasworks build"
    } else {
        software
    };
    out.warn(format_args!(
        "{} was rendered by {theirs}, and this is {ours}: its samples may differ from this build's (in their last bits, or wholly where the random numbers changed), so the finished image converges to the same picture but is not bit for bit what one uninterrupted run gives",
        path.display()
    ));
}

/// Writes the resume file of a frame a stop or the time limit ended, or, when that fails (a
/// full disk), the same file in the system's temporary folder with a warning: returns where it
/// is.
pub(super) fn write_resume_or_rescue(
    file: &Path,
    header: &CheckpointHeader,
    film: &Film,
    out: Verbosity,
) -> anyhow::Result<PathBuf> {
    let (at, failed) = checkpoint::write_or_rescue(file, header, film, &std::env::temp_dir())?;
    if let Some(e) = failed {
        out.warn(format_args!(
            "{e}; the resume file is saved as {} instead",
            at.display()
        ));
    }
    Ok(at)
}
