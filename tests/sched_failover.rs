//! A worker whose renderer fails is retired and the others finish the frame: every pixel still
//! gets every sample once, and the image is the bits a render without the failure makes. With
//! `--on-worker-error stop`, or when no worker is left, the frame fails with the error.

mod sched_support;

use std::sync::atomic::{AtomicBool, AtomicU8};
use std::sync::Arc;

use gasworks::render::Film;
use gasworks::scene::MaterialKind;
use gasworks::sched::{render_frame, DeviceSpec, Frame, OnWorkerError, SchedConfig, Strategy};
use sched_support::{check_calls, room, room_settings, MockFactory, MockRenderer};

const W: u32 = 36;
const H: u32 = 24;
const SPP: u32 = 6;

fn bits(f: &Film) -> Vec<[u32; 4]> {
    f.pixels.iter().map(|p| p.map(f32::to_bits)).collect()
}

/// Two GPU streams and two CPU workers (mocks alike in speed), three passes of 2 spp.
fn config(strategy: Strategy, steal: bool, on_worker_error: OnWorkerError) -> SchedConfig {
    SchedConfig {
        strategy,
        tiles: Some(16),
        steal,
        devices: vec![
            DeviceSpec::Gpu {
                device: 0,
                streams: 2,
            },
            DeviceSpec::Cpu { workers: Some(2) },
        ],
        pass_spp: Some(2),
        // Calibration renders pieces too; without it the failing attempt is a tile's.
        calibrate: false,
        on_worker_error,
        ..SchedConfig::default()
    }
}

/// Mocks that sleep up to `sleep_us` a tile, GPU streams too: without it one stream could
/// take every tile before the other's thread starts, and the failing one would never fail.
fn factory(sleep_us: u64) -> MockFactory {
    let mut f = MockFactory::new(MockRenderer::new(W, 5).with_sleep(sleep_us));
    f.gpu_sleep_us = sleep_us;
    f
}

/// The room at W x H and SPP samples, through `f`'s mocks.
fn render(f: &MockFactory, config: &SchedConfig) -> anyhow::Result<Frame> {
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    render_frame(&scene, &room_settings(W, H, SPP, 5), config, f, true)
}

fn reference() -> Film {
    let config = SchedConfig {
        devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
        ..config(Strategy::Regular, false, OnWorkerError::Stop)
    };
    render(&factory(0), &config).unwrap().film
}

/// Checks a frame in which gpu0/s1 failed once and was retired: the image, every sample once,
/// the retirement, and no tile for it after.
fn check_retired_once(frame: &Frame, f: &MockFactory, what: &str) {
    assert!(
        bits(&frame.film) == bits(&reference()),
        "{what}: the image changed"
    );
    check_calls(&f.all_calls(), W, H, SPP);
    let gpus = f.gpus.lock().unwrap();
    assert_eq!(gpus[1].failures(), 1, "{what}: not once");
    let r = &frame.report.retirements;
    assert_eq!(r.len(), 1, "{what}");
    assert_eq!(r[0].label, "gpu0/s1");
    assert_eq!(r[0].worker, 1);
    assert!(r[0].error.contains("out of memory"), "{}", r[0].error);
    assert!(r[0].error.contains("worker gpu0/s1"), "{}", r[0].error);
    // Nothing for it in the passes after the one it failed in; each pass's statistics still
    // count every tile once.
    for (i, p) in frame.report.passes.iter().enumerate() {
        let counted: usize = p.workers.iter().map(|s| s.tiles).sum();
        assert_eq!(counted, p.tiles.len(), "{what}, pass {i}");
        if i > r[0].pass {
            assert_eq!(p.workers[1].tiles, 0, "{what}, pass {i}");
        }
    }
    let summary = frame.report.summary();
    assert!(summary.contains("worker gpu0/s1 retired in pass"));
    // The efficiency over the workers left: no retirement before the first pass, so it is
    // the plain one there; later passes count one worker fewer.
    let report = &frame.report;
    let left = report.efficiency_of_working().unwrap();
    let capacity: f64 = report
        .passes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let n = p.workers.len() - usize::from(i > r[0].pass);
            n as f64 * p.makespan_s
        })
        .sum();
    assert!((left - report.busy_s() / capacity).abs() < 1e-12, "{what}");
    assert!(left >= report.efficiency(), "{what}");
    assert!(
        summary.contains(&format!(
            "({:.1}% over the workers not retired before each pass)",
            100.0 * left
        )),
        "{summary}"
    );
}

/// Every strategy, stealing on or off, a failure in each of the three passes: the stream fails
/// on its first tile of the pass, while the others wait for it at a gate before their first
/// tile of that pass, so that the failure is sure to come mid-pass. The workers are four
/// streams of one GPU, one `--devices` entry: their measured speeds are one speed, so no speed
/// guard keeps the failing one off any tile. In the first pass its share is a quarter of the
/// tiles; later passes cut the shares by measured tile costs, and a tile that a loaded machine
/// held up could leave its share empty, so there it must be free to steal its first tile.
#[test]
fn a_failing_stream_is_retired_and_the_image_is_unchanged() {
    for pass in [0usize, 1, 2] {
        for strategy in Strategy::ALL {
            for steal in [true, false].into_iter().filter(|&s| s || pass == 0) {
                let from_sample = 2 * pass as u32;
                let gate = Arc::new(AtomicBool::new(false));
                let mut f = MockFactory::new(MockRenderer::new(W, 5)).with_failing_gpu(0, 1, 1);
                f.gate = Some(gate);
                f.from_sample = from_sample;
                let config = SchedConfig {
                    devices: vec![DeviceSpec::Gpu {
                        device: 0,
                        streams: 4,
                    }],
                    ..config(strategy, steal, OnWorkerError::Retire)
                };
                let what = format!("pass {pass}, {strategy:?}, steal {steal}");
                let frame = render(&f, &config).unwrap_or_else(|e| panic!("{what}: {e:#}"));
                check_retired_once(&frame, &f, &what);
                assert_eq!(frame.report.retirements[0].pass, pass, "{what}");
            }
        }
    }
}

/// Without stealing, regular tiles of the first pass: each worker runs exactly its own 4, so
/// the stream's third attempt comes after two good tiles, gate or none.
#[test]
fn a_stream_failing_mid_share_is_retired() {
    let f = factory(200).with_failing_gpu(0, 1, 3);
    let config = config(Strategy::Regular, false, OnWorkerError::Retire);
    let frame = render(&f, &config).unwrap();
    check_retired_once(&frame, &f, "failing from attempt 3");
    assert_eq!(frame.report.retirements[0].pass, 0);
    assert_eq!(f.gpus.lock().unwrap()[1].calls().len(), 2);
}

/// Both streams of the GPU fail (a lost context takes every stream) on their second tile: the
/// CPU workers finish. (Regular tiles without stealing: each stream has 4 tiles of its own.)
#[test]
fn the_cpu_finishes_when_every_gpu_stream_fails() {
    let f = factory(100)
        .with_failing_gpu(0, 0, 2)
        .with_failing_gpu(0, 1, 2);
    let config = config(Strategy::Regular, false, OnWorkerError::Retire);
    let frame = render(&f, &config).unwrap();
    assert!(bits(&frame.film) == bits(&reference()));
    check_calls(&f.all_calls(), W, H, SPP);
    let mut labels: Vec<&str> = frame
        .report
        .retirements
        .iter()
        .map(|r| r.label.as_str())
        .collect();
    labels.sort();
    assert_eq!(labels, ["gpu0/s0", "gpu0/s1"]);
    let last = frame.report.passes.last().unwrap();
    assert_eq!(last.workers[0].tiles + last.workers[1].tiles, 0);
}

#[test]
fn stop_ends_the_frame_at_the_first_error() {
    // (Without stealing, the stream's own tiles are its alone: it is sure to try one.)
    let f = factory(200).with_failing_gpu(0, 1, 1);
    let config = config(Strategy::Sorted, false, OnWorkerError::Stop);
    let e = render(&f, &config).err().expect("the frame should fail");
    let text = format!("{e:#}");
    assert!(text.contains("worker gpu0/s1"), "{text}");
    assert!(text.contains("out of memory"), "{text}");
}

/// A failure that every worker meets (a scene the renderer cannot take) fails the frame, with
/// every worker named and the first error.
#[test]
fn the_frame_fails_when_no_worker_is_left() {
    let f = MockFactory::new(MockRenderer::new(W, 5).failing_from(4))
        .with_failing_gpu(0, 0, 1)
        .with_failing_gpu(0, 1, 1);
    let config = config(Strategy::Sorted, true, OnWorkerError::Retire);
    let e = render(&f, &config).err().expect("the frame should fail");
    let text = format!("{e:#}");
    assert!(text.contains("no worker is left ("), "{text}");
    for label in ["gpu0/s0", "gpu0/s1", "cpu#0", "cpu#1"] {
        assert!(text.contains(label), "{label}: {text}");
    }
    assert!(text.contains("out of memory"), "{text}");
}

/// Tiles are laid out for the workers still working: once the GPU stream (which wants a
/// launch's worth of work per tile, so few big tiles) is retired, the next passes cut the
/// default tiles for the CPU thread left. (One stream and one thread, stealing off: the
/// stream's share of the first pass is half its tiles, and it is sure to try the first.)
#[test]
fn tiles_are_laid_out_again_for_the_workers_left() {
    let (w, h) = (256, 128);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, SPP, 5);
    let mut f = MockFactory::new(MockRenderer::new(w, 5)).with_failing_gpu(0, 0, 1);
    // A quarter of a pass's pixel-samples per launch: 4 tiles.
    f.gpu_min_work = Some(u64::from(w * h) * 2 / 4);
    let config = SchedConfig {
        tiles: None,
        devices: vec![
            DeviceSpec::Gpu {
                device: 0,
                streams: 1,
            },
            DeviceSpec::Cpu { workers: Some(1) },
        ],
        ..config(Strategy::Regular, false, OnWorkerError::Retire)
    };
    let frame = render_frame(&scene, &settings, &config, &f, true).unwrap();
    check_calls(&f.all_calls(), w, h, SPP);
    let counts: Vec<usize> = frame.report.passes.iter().map(|p| p.tiles.len()).collect();
    let default = gasworks::sched::tiles::default_tile_count(w, h) as usize;
    assert_eq!(default, 8);
    assert_eq!(counts, [4, default, default]);
    assert_eq!(frame.report.retirements.len(), 1);
}

/// Two GPUs: three streams of gpu0 and two of gpu1, retiring failed workers.
fn two_gpus(strategy: Strategy, steal: bool) -> SchedConfig {
    SchedConfig {
        devices: DeviceSpec::parse_list("gpu0x3,gpu1x2").unwrap(),
        ..config(strategy, steal, OnWorkerError::Retire)
    }
}

/// A failure that loses its device (a sticky CUDA error takes the context every stream of the
/// GPU shares) retires all the device's workers at once: one retirement for the stream whose
/// failure came first, one for each other stream of its GPU, naming it; the other GPU's
/// streams finish the frame, the image unchanged, and no stream of the lost GPU renders a tile
/// of a later pass. (The stream that failed first is usually gpu0/s1, whose failure loses the
/// device; but a stream that found the device lost can report before it.)
#[test]
fn a_lost_device_retires_every_stream_of_it_at_once() {
    // The first pass, for every strategy, stealing on and off: planned by worker counts, it
    // gives every stream a share, so the failing one is sure to fail in it. (In a later pass,
    // the measured speeds of two GPU entries could leave its share empty and keep it off the
    // others' tiles; `a_failing_stream_is_retired_and_the_image_is_unchanged` covers later
    // passes with one entry.)
    let pass = 0;
    let cases = Strategy::ALL
        .into_iter()
        .flat_map(|s| [(s, true), (s, false)]);
    for (strategy, steal) in cases {
        let gate = Arc::new(AtomicBool::new(false));
        let mut f = MockFactory::new(MockRenderer::new(W, 5))
            .with_failing_gpu(0, 1, 1)
            .with_sticky_gpu(0);
        f.gate = Some(gate);
        let config = two_gpus(strategy, steal);
        let what = format!("{strategy:?}, steal {steal}");
        let frame = render(&f, &config).unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert!(
            bits(&frame.film) == bits(&reference()),
            "{what}: the image changed"
        );
        check_calls(&f.all_calls(), W, H, SPP);
        let r = &frame.report.retirements;
        let mut labels: Vec<&str> = r.iter().map(|r| r.label.as_str()).collect();
        labels.sort();
        assert_eq!(labels, ["gpu0/s0", "gpu0/s1", "gpu0/s2"], "{what}");
        assert!(r.iter().all(|r| r.pass == pass), "{what}");
        let first = &r[0].label;
        assert!(
            r[0].error.contains("out of memory") || r[0].error.contains("lost earlier"),
            "{what}: {}",
            r[0].error
        );
        for other in &r[1..] {
            let says = format!("gpu0 was lost when {first} failed: worker {first}");
            assert!(other.error.starts_with(&says), "{what}: {}", other.error);
        }
        for (i, p) in frame.report.passes.iter().enumerate().skip(pass + 1) {
            let gpu0: usize = p.workers[..3].iter().map(|s| s.tiles).sum();
            assert_eq!(gpu0, 0, "{what}, pass {i}");
        }
        let gpus = f.gpus.lock().unwrap();
        assert_eq!(gpus[1].failures(), 1, "{what}");
    }
}

/// Without a lost device, the other streams of the failing one's GPU are not retired.
#[test]
fn a_failure_that_keeps_the_device_retires_only_its_stream() {
    let gate = Arc::new(AtomicBool::new(false));
    let mut f = MockFactory::new(MockRenderer::new(W, 5)).with_failing_gpu(0, 1, 1);
    f.gate = Some(gate);
    let config = two_gpus(Strategy::Regular, false);
    let frame = render(&f, &config).unwrap();
    let labels: Vec<&str> = frame
        .report
        .retirements
        .iter()
        .map(|r| r.label.as_str())
        .collect();
    assert_eq!(labels, ["gpu0/s1"]);
    assert!(bits(&frame.film) == bits(&reference()));
    check_calls(&f.all_calls(), W, H, SPP);
}

/// One GPU stream that fails on its calibration piece, beside two CPU threads, at 256 x 128
/// with the GPU wanting launch-sized tiles (4 a pass), calibrated, stealing on.
fn failing_in_calibration(
    sticky: bool,
    on_worker_error: OnWorkerError,
) -> (anyhow::Result<Frame>, MockFactory) {
    let (w, h) = (256, 128);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, SPP, 5);
    let mut f = MockFactory::new(MockRenderer::new(w, 5)).with_failing_gpu(0, 0, 1);
    if sticky {
        f = f.with_sticky_gpu(0);
    }
    f.gpu_min_work = Some(u64::from(w * h) * 2 / 4);
    let config = SchedConfig {
        tiles: None,
        calibrate: true,
        devices: DeviceSpec::parse_list("gpu0x2,cpu:2").unwrap(),
        ..config(Strategy::Regular, true, on_worker_error)
    };
    (render_frame(&scene, &settings, &config, &f, true), f)
}

/// The calls of a render less the calibration's pieces (each run twice beside the frame's own
/// tiles), to check every sample once.
fn frame_calls(
    frame: &Frame,
    f: &MockFactory,
) -> Vec<(gasworks::render::Tile, std::ops::Range<u32>)> {
    sched_support::without_pieces(f.all_calls(), &frame.report.calibration)
}

/// A GPU lost in its calibration (the piece of its first stream meets a sticky error) is
/// retired before the first pass, every stream at once: no tile of any pass is planned for it
/// or rendered by it, the first pass is laid out for the CPU threads left (the default tiles,
/// not the GPU's launch-sized ones), the CPU's calibration stands, the retirements say
/// "before pass 1", the efficiency over the workers left counts the two CPU threads in every
/// pass, and the image is a CPU-only render's.
#[test]
fn a_device_lost_in_its_calibration_is_retired_before_the_first_pass() {
    let (frame, f) = failing_in_calibration(true, OnWorkerError::Retire);
    let frame = frame.unwrap();
    let (w, h) = (256, 128);
    let r = &frame.report.retirements;
    let labels: Vec<&str> = r.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["gpu0/s0", "gpu0/s1"]);
    assert!(r.iter().all(|r| r.pass == 0 && r.before_tiles), "{r:?}");
    sched_support::check_lost_in_calibration([&r[0].error, &r[1].error]);
    // The GPU's second stream never rendered anything, and its first only failed.
    let gpus = f.gpus.lock().unwrap();
    assert!(gpus[0].calls().is_empty() && gpus[1].calls().is_empty());
    assert_eq!(gpus[0].failures(), 1);
    drop(gpus);
    let default = gasworks::sched::tiles::default_tile_count(w, h) as usize;
    for (i, p) in frame.report.passes.iter().enumerate() {
        assert_eq!(p.tiles.len(), default, "pass {i}");
        assert_eq!(p.workers[0].tiles + p.workers[1].tiles, 0, "pass {i}");
        assert!(p.initial_deques[..2].iter().all(Vec::is_empty), "pass {i}");
    }
    let cal = &frame.report.calibration;
    assert_eq!(cal.len(), 1, "{cal:?}");
    assert_eq!(cal[0].worker, "cpu#0");
    check_calls(&frame_calls(&frame, &f), w, h, SPP);
    let report = &frame.report;
    let capacity: f64 = report.passes.iter().map(|p| 2.0 * p.makespan_s).sum();
    let left = report.efficiency_of_working().unwrap();
    assert!((left - report.busy_s() / capacity).abs() < 1e-12);
    let summary = report.summary();
    assert!(
        summary.contains("worker gpu0/s0 retired before pass 1"),
        "{summary}"
    );
    // The image: a CPU-only render's at the same size.
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let cpu = render_frame(
        &scene,
        &room_settings(w, h, SPP, 5),
        &SchedConfig {
            devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
            ..config(Strategy::Regular, false, OnWorkerError::Stop)
        },
        &MockFactory::new(MockRenderer::new(w, 5)),
        true,
    )
    .unwrap();
    assert!(bits(&frame.film) == bits(&cpu.film), "the image changed");
}

/// A calibration failure that keeps the device retires the failing stream alone, before the
/// first pass; the GPU's other stream is timed in its place and renders its share at its own
/// speed, and every sample is rendered once.
#[test]
fn a_calibration_failure_that_keeps_the_device_retires_only_its_stream() {
    let (frame, f) = failing_in_calibration(false, OnWorkerError::Retire);
    let frame = frame.unwrap();
    let timed: Vec<&str> = frame
        .report
        .calibration
        .iter()
        .map(|c| c.worker.as_str())
        .collect();
    assert_eq!(timed, ["gpu0/s1", "cpu#0"]);
    let gpu_speed = frame.report.calibration[0].speed;
    assert!(gpu_speed > 0.0);
    assert_eq!(frame.report.passes[0].speeds[1], gpu_speed);
    let r = &frame.report.retirements;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].label.as_str(), r[0].pass, r[0].before_tiles),
        ("gpu0/s0", 0, true)
    );
    let p = &frame.report.passes[0];
    assert_eq!(p.workers[0].tiles, 0);
    assert!(p.initial_deques[0].is_empty());
    // The speeds are measured in wall time, so the GPU stream's share is whatever the machine
    // made of it: on a loaded machine it can be timed so slow that one tile of its own would
    // end the frame later than leaving every tile to the CPU threads (seen in CI at a third of
    // a CPU thread's speed, with the pass cut into the GPU's few launch-sized tiles); then
    // the layout rightly gives it none. Where one tile at its speed ends sooner than the
    // CPU threads' whole pass (with a margin for rounding), it must have tiles.
    let n = p.tiles.len() as f64;
    let cpu_speed: f64 = p.speeds[2..].iter().sum();
    if 1.0 / p.speeds[1] < 0.99 * n / cpu_speed {
        assert!(
            !p.initial_deques[1].is_empty(),
            "{n} tiles at speeds {:?}",
            p.speeds
        );
    }
    check_calls(&frame_calls(&frame, &f), 256, 128, SPP);
}

/// Under `--on-worker-error stop` a failed calibration ends the frame with its error; when
/// every worker fails its piece, the frame fails under `retire` too, naming them.
#[test]
fn a_failed_calibration_ends_the_frame_under_stop_or_with_no_worker_left() {
    let (frame, _) = failing_in_calibration(true, OnWorkerError::Stop);
    let text = format!("{:#}", frame.err().expect("the frame should fail"));
    assert!(text.contains("calibrating worker gpu0/s0"), "{text}");

    let f = MockFactory::new(MockRenderer::new(W, 5).failing_from(1))
        .with_failing_gpu(0, 0, 1)
        .with_sticky_gpu(0);
    let config = SchedConfig {
        calibrate: true,
        devices: DeviceSpec::parse_list("gpu0x2,cpu:1").unwrap(),
        ..config(Strategy::Sorted, true, OnWorkerError::Retire)
    };
    let text = format!(
        "{:#}",
        render(&f, &config).err().expect("the frame should fail")
    );
    assert!(
        text.contains("no worker is left: the calibration before pass 1 retired every one"),
        "{text}"
    );
    for label in ["gpu0/s0", "gpu0/s1", "cpu#0"] {
        assert!(text.contains(label), "{label}: {text}");
    }
    assert!(text.contains("out of memory"), "{text}");
}

/// A resumed render numbers its passes from the frame's first, as its retirements do: gpu0/s1
/// fails in the run's first pass, which is the frame's second (`first_pass` 1). The
/// efficiency over the workers left counts it in that pass and not after, and the `--stats`
/// CSV's `pass` and `retired_in_pass` columns agree.
#[test]
fn a_resumed_render_counts_passes_from_the_frames_first() {
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let config = config(Strategy::Regular, false, OnWorkerError::Retire);
    let first = render_frame(
        &scene,
        &room_settings(W, H, 2, 5),
        &config,
        &factory(0),
        true,
    )
    .unwrap()
    .film;
    let f = factory(200).with_failing_gpu(0, 1, 1);
    let frame = gasworks::sched::render_frame_until(
        &scene,
        &room_settings(W, H, SPP, 5),
        &config,
        &f,
        true,
        gasworks::sched::FrameControl {
            stop: &AtomicU8::new(0),
            resume: Some(gasworks::sched::Resume {
                film: first,
                spp_done: 2,
            }),
            ..gasworks::sched::FrameControl::default()
        },
    )
    .unwrap();
    assert!(bits(&frame.film) == bits(&reference()), "the image changed");
    let report = &frame.report;
    assert_eq!(report.first_pass, 1);
    assert_eq!(report.passes.len(), 2);
    let r = &report.retirements;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].label.as_str(), r[0].pass, r[0].before_tiles),
        ("gpu0/s1", 1, false)
    );
    let capacity = 4.0 * report.passes[0].makespan_s + 3.0 * report.passes[1].makespan_s;
    let left = report.efficiency_of_working().unwrap();
    assert!((left - report.busy_s() / capacity).abs() < 1e-12);
    assert!(report
        .summary()
        .contains("worker gpu0/s1 retired in pass 2"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.csv");
    gasworks::sched::report::write_stats(report, &path).unwrap();
    let mut rows = csv::Reader::from_path(&path).unwrap();
    let headers = rows.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (pass, worker, retired) = (col("pass"), col("worker"), col("retired_in_pass"));
    let mut seen = Vec::new();
    for row in rows.records() {
        let row = row.unwrap();
        if &row[worker] == "1" {
            seen.push((row[pass].to_string(), row[retired].to_string()));
        }
    }
    assert_eq!(
        seen,
        [("1".into(), "1".into()), ("2".into(), "1".into())] as [(String, String); 2]
    );
}
