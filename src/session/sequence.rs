//! A camera path rendered as a sequence (`--camera-path`): the path read and every row checked
//! before the first frame, the scene loaded and its CPU BVH built once (on a GPU, its GASes,
//! IAS and pipelines, each frame setting only its camera), then each frame
//! rendered as a single frame of its camera renders, into its own file (the output's run of
//! `#` replaced by the frame's number, from 1), bit for bit that frame. Under mpirun every
//! rank renders the frames in turn, each frame one job of the scheduler. Each frame after the
//! first plans with the previous frame's measured cost ([`crate::sched::temporal`]).
//!
//! With `continue_sequence` (`--resume` alone) a frame whose image is complete (its key the
//! frame's) is kept; the first other frame goes on from its resume file where it left one,
//! and the rest render. Under mpirun every rank looks at the files itself, so they must see
//! the same output folder; ranks that do not see it disagree on the frame, and the
//! scheduler's handshake refuses the job.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::console::Verbosity;
use crate::render::checkpoint;
use crate::render::output::read_image;
use crate::scene::camera_path::{CameraPath, PathFrame};
use crate::sched::costmap::CostMap;
use crate::sched::report::FrameReport;
use crate::sched::temporal::{measured_map, FrameFigures};
use crate::sched::Transport;

use super::{
    check_before_loading, refuse_job, run_frame, set_threads, setup, Controls, Loaded, Place,
    RenderOptions,
};

/// Renders every frame of `options.camera_path` (see the module comment).
pub fn render_sequence<T: Transport + ?Sized>(
    options: &RenderOptions,
    transport: &mut T,
    controls: &dyn Controls,
) -> anyhow::Result<()> {
    let place = Place::of(transport);
    let out = match place.rank {
        0 => options.verbosity,
        _ => Verbosity::Quiet,
    };
    let frames = frames_of(options)?;
    let (loaded, mut settings) = match load_once(&frames[0], &place, out) {
        Ok(l) => l,
        Err(e) if place.ranks == 1 => return Err(e),
        Err(e) => return Err(refuse_job(&frames[0], transport, &place, &e)),
    };
    let mut continuing = options.continue_sequence;
    // Rank 0: the last frame's measured cost, which plans the next.
    let mut previous: Option<CostMap> = None;
    let count = frames.len();
    for (k, mut opts) in frames.into_iter().enumerate() {
        let started = Instant::now();
        let (window, schedule) = check_before_loading(&opts, &place)?;
        if k > 0 {
            settings = setup::render_settings(&opts, &loaded.scene.bounds(), Verbosity::Quiet)?;
        }
        let render_key = loaded.frame_key(&opts, &settings, &schedule);
        let n = k + 1;
        if continuing {
            if is_complete(&opts.output, &render_key) {
                out.status(format_args!(
                    "frame {n}: {} is complete",
                    opts.output.display()
                ));
                previous = None;
                continue;
            }
            continuing = false;
            let resume = opts.resume_file();
            opts.resume = resume.exists().then_some(resume);
        }
        out.status(format_args!(
            "frame {n} of {count}: {}",
            opts.output.display()
        ));
        let frame = (settings, schedule, window, render_key);
        let ready = super::ready_for(&opts, &place, out, (&loaded, previous.as_ref()), frame);
        let mut ready = match ready {
            Ok(ready) => ready,
            Err(e) if place.ranks == 1 => return Err(e),
            Err(e) => return Err(refuse_job(&opts, transport, &place, &e)),
        };
        let alone = ready.estimate_alone.take();
        let report = run_frame(
            &opts,
            transport,
            controls,
            (ready, place.clone(), out, started),
        )?;
        if let Some(report) = report {
            say_figures(n, &report, alone.as_ref(), out);
            previous = measured_map(&report);
        }
    }
    Ok(())
}

/// With -v, how the frame's cost map and the estimate alone ranked and balanced its tiles.
fn say_figures(n: usize, report: &FrameReport, alone: Option<&CostMap>, out: Verbosity) {
    let Some(f) = FrameFigures::of(report, alone.unwrap_or(&report.costmap)) else {
        return;
    };
    let map = match alone {
        Some(_) => "the previous frame's measured cost blended with the estimate",
        None => "the estimate",
    };
    out.detail(
        false,
        format_args!(
            "frame {n}: planned with {map}: Spearman {:.3} (the estimate alone {:.3}); first pass efficiency {:.1}% simulated (the estimate alone {:.1}%), {:.1}% rendered",
            f.spearman_plan,
            f.spearman_estimate,
            100.0 * f.efficiency_plan,
            100.0 * f.efficiency_estimate,
            100.0 * f.efficiency_rendered
        ),
    );
}

/// The scene loaded once for every frame, as the first frame's render loads it.
fn load_once(
    first: &RenderOptions,
    place: &Place,
    out: Verbosity,
) -> anyhow::Result<(Loaded, crate::render::RenderSettings)> {
    check_before_loading(first, place)?;
    if first.environment.map.is_some() && first.environment.share == super::EnvShare::Auto {
        anyhow::bail!(
            "--camera-path with an environment map: give its share of the light samples \
             (--env-share P); `auto` chooses it from each camera's view"
        );
    }
    set_threads(first, place)?;
    Loaded::load(first, place, out)
}

/// The frames `options` asks for: itself, or with a camera path each frame's options (its
/// camera, its output), the path and the outputs checked before any frame.
pub fn frames_of(options: &RenderOptions) -> anyhow::Result<Vec<RenderOptions>> {
    let Some(path) = options.camera_path.as_deref() else {
        return Ok(vec![options.clone()]);
    };
    let frames = CameraPath::read(path)?.frames;
    let outputs = frame_outputs(&options.output, frames.len())?;
    Ok(frames
        .iter()
        .zip(&outputs)
        .map(|(frame, output)| frame_options(options, frame, output))
        .collect())
}

/// The options of one frame: its camera, its output, no sequence.
fn frame_options(base: &RenderOptions, frame: &PathFrame, output: &Path) -> RenderOptions {
    RenderOptions {
        camera: frame.choice(),
        output: output.to_path_buf(),
        camera_path: None,
        continue_sequence: false,
        ..base.clone()
    }
}

/// Each frame's output: `pattern` with the last run of `#` in its file name replaced by the
/// frame's number from 1, zero-padded to the run's length.
pub fn frame_outputs(pattern: &Path, frames: usize) -> anyhow::Result<Vec<PathBuf>> {
    let name = pattern
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.contains('#'))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: with --camera-path the output names each frame's file with a run of # \
                 for its number, e.g. -o frames/frame-####.exr",
                pattern.display()
            )
        })?;
    let end = name.rfind('#').map_or(0, |i| i + 1);
    let start = name[..end].trim_end_matches('#').len();
    let width = end - start;
    Ok((1..=frames)
        .map(|n| {
            let file = format!("{}{n:0width$}{}", &name[..start], &name[end..]);
            pattern.with_file_name(file)
        })
        .collect())
}

/// Whether the image at `output` holds a complete frame of `render_key`.
pub fn is_complete(output: &Path, render_key: &str) -> bool {
    !checkpoint::path_for(output).exists()
        && read_image(output).is_ok_and(|image| image.meta.render == render_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_numbered_in_the_last_run_of_hashes() {
        let names = |p: &str, n| -> Vec<String> {
            frame_outputs(Path::new(p), n)
                .unwrap()
                .iter()
                .map(|p| p.display().to_string())
                .collect()
        };
        assert_eq!(
            names("out/f-####.exr", 2),
            ["out/f-0001.exr", "out/f-0002.exr"]
        );
        assert_eq!(names("a#b##.png", 1), ["a#b01.png"]);
        assert_eq!(names("#.exr", 12)[11], "12.exr");
        assert_eq!(names("f-##.exr", 100)[99], "f-100.exr");
        let e = frame_outputs(Path::new("out#/frame.exr"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a run of #"), "{e}");
    }
}
