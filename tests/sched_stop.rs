//! A frame stopped part way (Ctrl-C in `gasworks render`) keeps exactly what was rendered:
//! every pass that ended, plus the tiles of the interrupted pass, each bit for bit what a
//! complete render of that many samples gives; the report covers the complete passes only.
//! Resumed from there (the complete passes and the interrupted pass's finished tiles), it
//! finishes as the uninterrupted render would, bit for bit.

mod sched_support;

use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use gasworks::render::Film;
use gasworks::scene::MaterialKind;
use gasworks::sched::{
    render_frame_until, DeviceSpec, Frame, FrameControl, PartialPass, Resume, SchedConfig, Strategy,
};
use sched_support::{room, room_settings, MockFactory, MockRenderer};

const W: u32 = 37;
const H: u32 = 23;
const SPP: u32 = 12;
const PASS: u32 = 4;
const TILES: u32 = 24;

fn bits(f: &Film) -> Vec<[u32; 4]> {
    f.pixels.iter().map(|p| p.map(f32::to_bits)).collect()
}

/// A frame of the test room at `spp` samples per pixel, on `workers` workers of `factory`,
/// under `control`.
fn frame_of(
    factory: &MockFactory,
    spp: u32,
    workers: usize,
    control: FrameControl<'_>,
) -> anyhow::Result<Frame> {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    render_frame_until(
        &scene,
        &room_settings(W, H, spp, 11),
        &config(workers),
        factory,
        true,
        control,
    )
}

fn config(workers: usize) -> SchedConfig {
    SchedConfig {
        strategy: Strategy::Sorted,
        tiles: Some(TILES),
        steal: true,
        devices: vec![DeviceSpec::Cpu {
            workers: Some(workers),
        }],
        pass_spp: Some(PASS),
        ..SchedConfig::default()
    }
}

/// A complete render of `spp` samples per pixel, in the same passes.
fn reference(spp: u32) -> Film {
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let frame = frame_of(&factory, spp, 1, FrameControl::default()).unwrap();
    assert!(frame.stopped.is_none());
    frame.film
}

#[test]
fn a_stopped_frame_keeps_whole_passes_and_the_tiles_of_the_last() {
    let mut seen_partial = false;
    let mut seen_between = false;
    let mut resumed = 0;
    // Stops in the first pass, at a pass's last tile, and inside later passes.
    for (workers, stop_after) in [(1, 1), (3, 5), (1, 24), (3, 24), (2, 30), (3, 47), (1, 48)] {
        let stop = Arc::new(AtomicU8::new(0));
        let factory =
            MockFactory::new(MockRenderer::new(W, 11).with_stop_after(stop_after, stop.clone()));
        let frame = frame_of(
            &factory,
            SPP,
            workers,
            FrameControl {
                stop: &stop,
                ..FrameControl::default()
            },
        )
        .unwrap();
        let what = format!("{workers} workers, stop after {stop_after} tiles");
        let stopped = frame
            .stopped
            .clone()
            .unwrap_or_else(|| panic!("{what}: not stopped"));
        assert!(stopped.rendered_any(), "{what}");
        assert_eq!(stopped.spp_complete % PASS, 0, "{what}");
        assert!(stopped.spp_complete < SPP, "{what}");
        assert_eq!(
            frame.report.passes.len() as u32,
            stopped.spp_complete / PASS,
            "{what}: the report holds the complete passes"
        );
        // Tiles taken after the stop: at most one per other worker (those already in flight).
        let calls = factory.all_calls().len();
        assert!(
            calls >= stop_after && calls < stop_after + workers,
            "{what}: {calls} calls"
        );

        let complete = reference(stopped.spp_complete);
        let (partial_end, partial_tiles) = match &stopped.partial {
            Some(p) => {
                seen_partial = true;
                assert_eq!(p.samples.start, stopped.spp_complete, "{what}");
                assert_eq!(p.tiles, TILES as usize, "{what}");
                assert!(
                    p.tiles_done > 0 && p.tiles_done < p.tiles,
                    "{what}: {} of {}",
                    p.tiles_done,
                    p.tiles
                );
                (p.samples.end, p.tiles_done)
            }
            None => {
                seen_between = true;
                (stopped.spp_complete, 0)
            }
        };
        let further = reference(partial_end);
        let mut counted = 0usize;
        for (i, p) in frame.film.pixels.iter().enumerate() {
            let n = p[3] as u32;
            let expected = if n == stopped.spp_complete {
                complete.pixels[i]
            } else {
                assert_eq!(n, partial_end, "{what}: pixel {i} has {n} samples");
                counted += 1;
                further.pixels[i]
            };
            assert_eq!(
                p.map(f32::to_bits),
                expected.map(f32::to_bits),
                "{what}: pixel {i}"
            );
        }
        // The interrupted pass's tiles cover exactly the pixels that got its samples.
        assert_eq!(counted > 0, partial_tiles > 0, "{what}");

        // Resumed from the stop (other workers, no stop): the film of the complete passes
        // and the interrupted pass's finished tiles, even with no complete pass; the finished
        // film is the uninterrupted one, bit for bit.
        let point = frame.resume_point().expect("a resume point");
        assert_eq!(point.spp_done, stopped.spp_complete, "{what}");
        assert_eq!(
            bits(&point.film),
            bits(&frame.film),
            "{what}: the resume film"
        );
        let factory = MockFactory::new(MockRenderer::new(W, 11));
        let finished = frame_of(
            &factory,
            SPP,
            4 - workers,
            FrameControl {
                resume: Some(point),
                ..FrameControl::default()
            },
        )
        .unwrap();
        assert!(finished.stopped.is_none(), "{what}");
        assert_eq!(
            bits(&finished.film),
            bits(&reference(SPP)),
            "{what}: resumed"
        );
        // Only the passes after the resume point were rendered, and the interrupted one only
        // where it was missing: each pixel got each sample once.
        let calls = factory.all_calls();
        let first = calls.iter().map(|c| c.1.start).min().unwrap();
        assert_eq!(first, stopped.spp_complete, "{what}");
        let interrupted: usize = calls
            .iter()
            .filter(|c| c.1.start == stopped.spp_complete)
            .map(|c| c.0.pixel_count())
            .sum();
        let pixels = frame.film.pixels.len();
        assert_eq!(interrupted, pixels - counted, "{what}");
        resumed += 1;
    }
    assert!(resumed >= 4, "{resumed} resumes exercised");
    assert!(
        seen_partial && seen_between,
        "both kinds of stop were exercised"
    );
}

#[test]
fn a_stop_before_the_first_tile_renders_nothing() {
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let frame = frame_of(
        &factory,
        SPP,
        2,
        FrameControl {
            stop: &AtomicU8::new(2),
            ..FrameControl::default()
        },
    )
    .unwrap();
    let stopped = frame.stopped.expect("stopped");
    assert!(!stopped.rendered_any());
    assert!(factory.all_calls().is_empty());
    assert!(frame.film.pixels.iter().all(|p| *p == [0.0; 4]));
    assert!(frame.report.passes.is_empty());
}

/// The frame of `SPP` samples on two workers of `factory`, resumed from `film` at `spp_done`.
fn resumed_on_two(factory: &MockFactory, film: Film, spp_done: u32) -> anyhow::Result<Frame> {
    frame_of(
        factory,
        SPP,
        2,
        FrameControl {
            resume: Some(Resume { film, spp_done }),
            ..FrameControl::default()
        },
    )
}

#[test]
fn a_resume_point_off_the_pass_plan_is_refused() {
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let run = |film: Film, spp_done: u32| resumed_on_two(&factory, film, spp_done);
    let e = run(reference(PASS), 6).err().unwrap().to_string();
    assert!(e.contains("not where a pass of this render starts"), "{e}");
    let e = run(Film::new(W + 1, H), PASS).err().unwrap().to_string();
    assert!(e.contains("38x23 pixels, this one 37x23"), "{e}");
    // Resuming a finished render renders nothing and gives it back.
    let done = run(reference(SPP), SPP).unwrap();
    assert_eq!(bits(&done.film), bits(&reference(SPP)));
    assert!(factory.all_calls().is_empty());
}

#[test]
fn the_film_between_passes_is_a_resume_point_of_the_uninterrupted_render() {
    let mut seen: Vec<(u32, Film)> = Vec::new();
    let mut hook = |film: &Film, spp_done: u32| seen.push((spp_done, film.clone()));
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let frame = frame_of(
        &factory,
        SPP,
        3,
        FrameControl {
            between_passes: Some(&mut hook),
            ..FrameControl::default()
        },
    )
    .unwrap();
    assert!(frame.stopped.is_none());
    // Every boundary but the end: after 4 and 8 of 12 samples.
    let points: Vec<u32> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(points, [PASS, 2 * PASS]);
    for (spp_done, film) in seen {
        assert_eq!(bits(&film), bits(&reference(spp_done)), "at {spp_done}");
        // A process killed after this boundary resumes from it into the same image.
        let mut later = Vec::new();
        let mut hook = |_: &Film, s: u32| later.push(s);
        let finished = frame_of(
            &MockFactory::new(MockRenderer::new(W, 11)),
            SPP,
            2,
            FrameControl {
                resume: Some(Resume { film, spp_done }),
                between_passes: Some(&mut hook),
                ..FrameControl::default()
            },
        )
        .unwrap();
        assert_eq!(bits(&finished.film), bits(&frame.film), "from {spp_done}");
        // The resumed run sees only the boundaries after its start.
        let expected: Vec<u32> = (spp_done / PASS + 1..SPP / PASS)
            .map(|p| p * PASS)
            .collect();
        assert_eq!(later, expected, "from {spp_done}");
    }
}

/// A deadline stops the frame between passes: the pass that starts the run always renders,
/// no later pass starts unless it is predicted to end in time, and the frame stopped there is
/// whole (every pixel at the same samples) and a resume point of the uninterrupted render.
#[test]
fn a_deadline_stops_between_passes_with_a_whole_image() {
    let run = |deadline: std::time::Instant, resume: Option<Resume>| {
        frame_of(
            &MockFactory::new(MockRenderer::new(W, 11)),
            SPP,
            2,
            FrameControl {
                deadline: Some(deadline),
                resume,
                ..FrameControl::default()
            },
        )
        .unwrap()
    };
    let past = std::time::Instant::now();
    let frame = run(past, None);
    let stopped = frame.stopped.clone().expect("stopped by the deadline");
    assert!(stopped.at_time_limit);
    assert_eq!((stopped.spp_complete, stopped.partial), (PASS, None));
    assert_eq!(frame.report.passes.len(), 1);
    assert_eq!(bits(&frame.film), bits(&reference(PASS)), "whole at 4 spp");
    // Each later run under the same past deadline renders one more pass, the last one ends it.
    let mut point = frame.resume_point().expect("a resume point");
    for spp in [2 * PASS, SPP] {
        let next = run(past, Some(point.clone()));
        assert_eq!(bits(&next.film), bits(&reference(spp)), "at {spp}");
        if spp == SPP {
            assert!(next.stopped.is_none());
        } else {
            point = next.resume_point().unwrap();
            assert_eq!(point.spp_done, spp);
        }
    }
    let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    assert!(run(far, None).stopped.is_none());
}

#[test]
fn a_pass_fits_when_its_predicted_time_ends_by_the_deadline() {
    use gasworks::sched::{next_pass_fits, PassTimes};
    use std::time::{Duration, Instant};
    let now = Instant::now();
    let deadline = now + Duration::from_secs(10);
    // Nothing predicts the first pass: it always starts.
    let mut times = PassTimes::default();
    assert_eq!(times.predict(8), None);
    assert!(times.next_fits(deadline + Duration::from_secs(1), deadline, 8));
    // 4 s for 8 samples: 16 samples take 8 s (fits), 24 take 12 s (does not).
    times.record(4.0, 8);
    assert_eq!(times.predict(16), Some(8.0));
    assert!(times.next_fits(now, deadline, 16));
    assert!(!times.next_fits(now, deadline, 24));
    // A faster pass later does not shorten the prediction: the slowest rate counts.
    times.record(1.0, 8);
    assert_eq!(times.predict(16), Some(8.0));
    // A slower one lengthens it: 5 s for 8 samples, 16 take exactly the 10 s left (fits).
    times.record(5.0, 8);
    assert_eq!(times.predict(16), Some(10.0));
    assert!(times.next_fits(now, deadline, 16));
    assert!(!times.next_fits(now + Duration::from_millis(1), deadline, 16));
    // Past the deadline nothing fits.
    assert!(!next_pass_fits(
        deadline + Duration::from_millis(1),
        deadline,
        0.0
    ));
}

/// A film whose pixels hold neither the complete passes' samples nor those and the next
/// pass's is not this render's: refused, naming the pixel. One whose every pixel has the next
/// pass too (a stop after that pass's last tile arrived) goes on after that pass.
#[test]
fn a_resume_film_is_checked_pixel_by_pixel() {
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let run = |film: Film, spp_done: u32| resumed_on_two(&factory, film, spp_done);
    let mut film = reference(PASS);
    film.pixels[W as usize + 5][3] = 7.0;
    let e = run(film, PASS).err().unwrap().to_string();
    assert!(
        e.contains("pixel (5, 1) of the render to resume holds 7 samples, where its complete passes give 4 and the pass it stopped in 8"),
        "{e}"
    );
    let finished = run(reference(2 * PASS), PASS).unwrap();
    assert_eq!(bits(&finished.film), bits(&reference(SPP)));
    let calls = factory.all_calls();
    assert!(!calls.is_empty() && calls.iter().all(|c| c.1 == (2 * PASS..SPP)));
}

/// The default render is one pass: a stop inside it keeps the finished tiles, and the render
/// resumed with another layout (adaptive tiles of another count, which cut across the
/// stopped run's) renders exactly the pixels those tiles did not cover, into the image an
/// uninterrupted render gives, bit for bit.
#[test]
fn a_stop_inside_the_only_pass_resumes_under_another_layout() {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, SPP, 11);
    let one_pass = |strategy: Strategy, tiles: u32, workers: usize| SchedConfig {
        strategy,
        tiles: Some(tiles),
        pass_spp: None,
        ..config(workers)
    };
    let uninterrupted = {
        let factory = MockFactory::new(MockRenderer::new(W, 11));
        let config = one_pass(Strategy::Sorted, TILES, 1);
        render_frame_until(
            &scene,
            &settings,
            &config,
            &factory,
            true,
            FrameControl::default(),
        )
        .unwrap()
        .film
    };
    let stop = Arc::new(AtomicU8::new(0));
    let factory = MockFactory::new(MockRenderer::new(W, 11).with_stop_after(9, stop.clone()));
    let control = FrameControl {
        stop: &stop,
        ..FrameControl::default()
    };
    let config = one_pass(Strategy::Sorted, TILES, 1);
    let frame = render_frame_until(&scene, &settings, &config, &factory, true, control).unwrap();
    let stopped = frame.stopped.clone().expect("stopped");
    assert_eq!(stopped.spp_complete, 0);
    let done = stopped.partial.as_ref().map_or(0, |p| p.tiles_done);
    assert!(done > 0 && done < TILES as usize, "{done} tiles");
    let point = frame
        .resume_point()
        .expect("a resume point with no complete pass");
    assert_eq!(point.spp_done, 0);
    let have: usize = point
        .film
        .pixels
        .iter()
        .filter(|p| p[3] == SPP as f32)
        .count();
    assert!(have > 0 && have < point.film.pixels.len());

    // Stopped again before this run's first tile: the stop still says (and the image key,
    // through it) that the pass is in some pixels, and the film is the same resume point.
    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let control = FrameControl {
        stop: &AtomicU8::new(2),
        resume: Some(point.clone()),
        ..FrameControl::default()
    };
    let config = one_pass(Strategy::Adaptive, 7, 3);
    let again = render_frame_until(&scene, &settings, &config, &factory, true, control).unwrap();
    let partial = again.stopped.as_ref().and_then(|s| s.partial.clone());
    assert_eq!(
        partial,
        Some(PartialPass {
            samples: 0..SPP,
            tiles_done: 0,
            tiles: 0,
            carried_pixels: have,
        })
    );
    let stopped = again.stopped.as_ref().unwrap();
    assert!(stopped.rendered_any());
    assert_eq!(
        stopped.describe(SPP),
        format!("samples 0..{SPP} in the {have} pixels an earlier run finished; the other pixels are black")
    );
    assert!(factory.all_calls().is_empty());
    assert_eq!(again.resume_point(), Some(point.clone()));

    let factory = MockFactory::new(MockRenderer::new(W, 11));
    let control = FrameControl {
        resume: Some(point),
        ..FrameControl::default()
    };
    let config = one_pass(Strategy::Adaptive, 7, 3);
    let resumed = render_frame_until(&scene, &settings, &config, &factory, true, control).unwrap();
    assert!(resumed.stopped.is_none());
    assert_eq!(bits(&resumed.film), bits(&uninterrupted));
    let calls = factory.all_calls();
    let pixels: usize = calls.iter().map(|c| c.0.pixel_count()).sum();
    assert_eq!(pixels, resumed.film.pixels.len() - have);
}

/// The film a checkpoint inside a pass sees, after any tile: a resume point (the complete
/// passes and the pass's finished tiles) from which the frame finishes as the uninterrupted
/// one, bit for bit, in passes and in one pass.
#[test]
fn the_film_within_a_pass_is_a_resume_point_of_the_uninterrupted_render() {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, SPP, 11);
    for pass_spp in [Some(PASS), None] {
        let config = SchedConfig {
            pass_spp,
            ..config(3)
        };
        let mut seen: Vec<(u32, Film)> = Vec::new();
        let mut hook = |spp_done: u32, film: &dyn Fn() -> Film| seen.push((spp_done, film()));
        let factory = MockFactory::new(MockRenderer::new(W, 11));
        let control = FrameControl {
            within_pass: Some(&mut hook),
            ..FrameControl::default()
        };
        let frame =
            render_frame_until(&scene, &settings, &config, &factory, true, control).unwrap();
        let tiles: usize = frame.report.passes.iter().map(|p| p.tiles.len()).sum();
        assert_eq!(seen.len(), tiles, "{pass_spp:?}: once after every tile");
        // Some points inside passes: the first tile, one in the middle, the last.
        for &i in &[0, seen.len() / 2 + 1, seen.len() - 1] {
            let (spp_done, film) = seen[i].clone();
            let factory = MockFactory::new(MockRenderer::new(W, 11));
            let control = FrameControl {
                resume: Some(Resume { film, spp_done }),
                ..FrameControl::default()
            };
            let resumed =
                render_frame_until(&scene, &settings, &config, &factory, true, control).unwrap();
            assert_eq!(
                bits(&resumed.film),
                bits(&frame.film),
                "{pass_spp:?}: resumed from the film after tile {i}"
            );
        }
    }
}
