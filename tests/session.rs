//! The render session as a library call, without the command line: a program fills
//! `RenderOptions` and renders through `session::render`, alone (`sched::Alone`), with its own
//! stop flag (`session::NoControls`).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use gasworks::backend::BackendChoice;
use gasworks::console::Verbosity;
use gasworks::sched::{Alone, DeviceSpec};
use gasworks::session::{self, Interrupted, NoControls, RenderOptions, StopSignal};

fn cornell() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj")
}

/// A small CPU render of the bundled Cornell box into `out`.
fn options(out: &Path) -> RenderOptions {
    RenderOptions {
        width: 24,
        height: 16,
        spp: 4,
        backend: BackendChoice::Cpu,
        verbosity: Verbosity::Quiet,
        ..RenderOptions::new(cornell(), out)
    }
}

fn pixels(path: &Path) -> Vec<u32> {
    let image = image::open(path).unwrap().into_rgba32f();
    assert_eq!(image.dimensions(), (24, 16));
    image.into_raw().into_iter().map(f32::to_bits).collect()
}

/// The library renders the frame and writes its image; the schedule it is given (passes, one
/// worker) changes no bit of it.
#[test]
fn a_program_renders_a_frame_and_the_schedule_changes_no_bit() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.exr"), dir.path().join("two.exr"));
    session::render(&options(&one), &mut Alone, &NoControls::default()).unwrap();
    let mut passes = options(&two);
    passes.schedule.pass_spp = Some(2);
    passes.devices = Some(vec![DeviceSpec::Cpu { workers: Some(1) }]);
    session::render(&passes, &mut Alone, &NoControls::default()).unwrap();
    let first = pixels(&one);
    assert!(
        first.iter().any(|&p| f32::from_bits(p) > 0.0),
        "a black image"
    );
    assert!(first == pixels(&two), "the passes changed the image");
    // A complete render leaves no resume file.
    assert!(!dir.path().join("one.exr.gasworks-resume").exists());
}

/// A stop before the first tile ends the render with the program's signal and writes
/// nothing: black pixels would only overwrite a good image.
#[test]
fn a_stop_before_any_tile_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stopped.exr");
    let controls = NoControls::default();
    controls
        .0
        .store(StopSignal::Terminate.number(), Ordering::SeqCst);
    let e = session::render(&options(&out), &mut Alone, &controls).unwrap_err();
    let stopped = e
        .downcast_ref::<Interrupted>()
        .expect("an Interrupted error");
    assert_eq!(stopped.by, StopSignal::Terminate);
    assert!(!out.exists());
}

/// Bad options are refused before any work, naming what is wrong.
#[test]
fn bad_options_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.exr");
    let zero = RenderOptions {
        max_depth: 0,
        ..options(&out)
    };
    let e = session::render(&zero, &mut Alone, &NoControls::default()).unwrap_err();
    assert!(e.to_string().contains("--max-depth"), "{e}");
    let missing = RenderOptions::new(dir.path().join("nowhere.obj"), &out);
    let e = session::render(&missing, &mut Alone, &NoControls::default()).unwrap_err();
    assert!(format!("{e:#}").contains("nowhere.obj"), "{e:#}");
    assert!(!out.exists());
}
