//! A worker whose renderer fails is retired and the others finish the frame: every pixel still
//! gets every sample once, and the image is the bits a render without the failure makes. With
//! `--on-worker-error stop`, or when no worker is left, the frame fails with the error.

mod sched_support;

use std::sync::atomic::AtomicBool;
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
