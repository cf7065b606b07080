//! Every tile is rendered exactly once per pass, and every pixel receives every sample
//! exactly once, under every strategy, worker count, stealing setting and pass split.

mod sched_support;

use gasworks::scene::MaterialKind;
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use sched_support::{
    assert_no_cpu_ran_a_gpu_tile, check_calls, room, room_settings, MockFactory, MockRenderer,
};

#[test]
fn every_tile_once_under_every_schedule() {
    let (w, h, spp) = (40, 28, 5);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, spp, 3);
    for strategy in Strategy::ALL {
        for workers in [1usize, 2, 5, 16] {
            for steal in [false, true] {
                for pass_spp in [None, Some(2)] {
                    let factory = MockFactory::new(MockRenderer::new(w, 3));
                    let config = SchedConfig {
                        strategy,
                        tiles: Some(13),
                        steal,
                        devices: vec![DeviceSpec::Cpu {
                            workers: Some(workers),
                        }],
                        pass_spp,
                        ..SchedConfig::default()
                    };
                    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
                    let calls = factory.all_calls();
                    check_calls(&calls, w, h, spp);
                    let passes = config.passes(spp).len();
                    assert_eq!(frame.report.passes.len(), passes);
                    let tiles: usize = frame.report.passes.iter().map(|p| p.tiles.len()).sum();
                    assert_eq!(calls.len(), tiles, "{strategy:?} {workers} {steal}");
                    for p in &frame.report.passes {
                        // The statistics agree with the calls.
                        let counted: usize = p.workers.iter().map(|s| s.tiles).sum();
                        assert_eq!(counted, p.tiles.len());
                        assert_eq!(p.workers.len(), workers);
                        if !steal {
                            assert_eq!(p.steals(), 0);
                        }
                        // Each initial deque holds distinct tasks covering them all.
                        let mut all: Vec<usize> = p.initial_deques.concat();
                        all.sort();
                        assert_eq!(all, (0..p.tiles.len()).collect::<Vec<_>>());
                    }
                    if strategy == Strategy::Adaptive {
                        // 13 tiles asked: the kd split makes the nearest power of two.
                        assert_eq!(frame.report.passes[0].tiles.len(), 16);
                    }
                }
            }
        }
    }
}

#[test]
fn mixed_cpu_and_gpu_workers_share_the_frame() {
    let (w, h, spp) = (32, 32, 2);
    let scene = room(MaterialKind::Glossy, MaterialKind::Diffuse);
    let settings = room_settings(w, h, spp, 9);
    let factory = MockFactory::new(MockRenderer::new(w, 9));
    let config = SchedConfig {
        strategy: Strategy::Sorted,
        tiles: Some(64),
        devices: DeviceSpec::parse_list("cpu:2,gpu0x2").unwrap(),
        // Uncalibrated, the first pass gives every worker an equal share (below, the
        // calibrated plan).
        calibrate: false,
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    assert!(frame.report.calibration.is_empty());
    check_calls(&factory.all_calls(), w, h, spp);
    let labels: Vec<&str> = frame
        .report
        .workers
        .iter()
        .map(|(l, _)| l.as_str())
        .collect();
    assert_eq!(labels, ["cpu#0", "cpu#1", "gpu0/s0", "gpu0/s1"]);
    // Each GPU stream got its own renderer from the factory, and the plan gives every
    // worker a run of tiles. (Who actually rendered what depends on thread timing.)
    assert_eq!(factory.gpus.lock().unwrap().len(), 2);
    let p = &frame.report.passes[0];
    assert!(
        p.initial_deques.iter().all(|d| !d.is_empty()),
        "{:?}",
        p.initial_deques
    );
}

#[test]
fn gpu_devices_without_a_gpu_backend_are_a_clear_error() {
    let scene = room(MaterialKind::Diffuse, MaterialKind::Diffuse);
    let settings = room_settings(8, 8, 1, 0);
    let factory = gasworks::sched::CpuOnlyFactory(std::sync::Arc::new(MockRenderer::new(8, 0)));
    let config = SchedConfig {
        devices: DeviceSpec::parse_list("cpu:1,gpu0").unwrap(),
        ..SchedConfig::default()
    };
    let err = render_frame(&scene, &settings, &config, &factory, true)
        .err()
        .expect("gpu0 must be refused");
    assert!(
        format!("{err:#}").contains("gpu workers need the OptiX backend"),
        "{err:#}"
    );
}

/// With workers of two devices, one worker of each renders a piece twice before the first
/// pass (thrown away: the film is the uncalibrated one's, bit for bit), and the first pass's
/// shares follow the speeds timed: here the CPU mock does 3000 hash rounds per sample and the
/// GPU mock none, so the CPU threads' runs hold far less estimated cost than the GPU streams'.
#[test]
fn calibration_plans_the_first_pass_by_speed_and_changes_no_bit() {
    let (w, h, spp) = (96, 64, 2);
    let scene = room(MaterialKind::Glossy, MaterialKind::Diffuse);
    let settings = room_settings(w, h, spp, 5);
    let render = |calibrate: bool| {
        let factory = MockFactory::new(MockRenderer::new(w, 5).with_spin(|_, _| 3000));
        let config = SchedConfig {
            strategy: Strategy::Sorted,
            tiles: Some(24),
            devices: DeviceSpec::parse_list("cpu:2,gpu0x2").unwrap(),
            calibrate,
            // The tiles as laid out, so that the calls of both renders compare one to one
            // (the pieces cut for slow workers have their own test in sched_bit_identical).
            slow_worker_pieces: 0,
            ..SchedConfig::default()
        };
        let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
        (frame, factory)
    };
    let (plain, plain_factory) = render(false);
    let (calibrated, factory) = render(true);
    assert!(
        plain.film.pixels == calibrated.film.pixels,
        "calibration changed the image"
    );
    let cal = &calibrated.report.calibration;
    assert_eq!(cal.iter().map(|c| c.group).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(
        (cal[0].worker.as_str(), cal[1].worker.as_str()),
        ("cpu#0", "gpu0/s0")
    );
    // The CPU renders at most 32 x 32 pixels and 4 samples; the GPU a whole tile, all samples.
    assert!(cal[0].piece.w <= 32 && cal[0].piece.h <= 32);
    assert_eq!(cal[1].samples, 0..spp);
    let tiles = &calibrated.report.passes[0].tiles;
    assert!(tiles.contains(&cal[1].piece), "{:?}", cal[1].piece);
    // Exactly two runs of each piece beyond the frame's own calls.
    let extra = factory.all_calls().len() - plain_factory.all_calls().len();
    assert_eq!(extra, 4);
    for c in cal {
        let runs = factory
            .all_calls()
            .iter()
            .filter(|(t, s)| *t == c.piece && *s == c.samples)
            .count();
        assert!(runs >= 2, "{c:?}: {runs} runs");
        assert!(c.speed.is_finite() && c.speed > 0.0, "{c:?}");
    }
    assert!(cal[1].speed > 20.0 * cal[0].speed, "{cal:?}");
    // The first pass's shares: the two CPU threads' runs hold less estimated cost than a
    // tenth of the GPU streams'.
    let p = &calibrated.report.passes[0];
    let cost = |d: &Vec<usize>| d.iter().map(|&t| p.predicted[t]).sum::<f64>();
    let cpu: f64 = p.initial_deques[..2].iter().map(cost).sum();
    let gpu: f64 = p.initial_deques[2..].iter().map(cost).sum();
    assert!(cpu < 0.1 * gpu, "CPU runs {cpu}, GPU runs {gpu}");
    let summary = calibrated.report.summary();
    assert!(summary.contains("calibration: cpu#0 "), "{summary}");
    assert!(summary.contains("the fastest worker"), "{summary}");
    // Workers 20x apart or more: the efficiency weighted by their speeds is printed too.
    assert!(summary.contains("% by the workers' speeds)"), "{summary}");
    assert!(calibrated.report.efficiency_by_speed().is_some());
    assert_eq!(
        plain.report.efficiency_by_speed(),
        None,
        "not planned by speed"
    );
}

#[test]
fn cpu_threads_beside_a_gpu_leave_it_its_tiles_in_every_pass() {
    // Two CPU threads spinning per sample beside two fast GPU streams, in four passes: the
    // calibration plans the first pass, and a CPU group the steal guard kept idle keeps its
    // calibrated speed for the next (it is not given the GPU's mean), so no later pass hands
    // the CPU threads the GPU's tiles either.
    let (w, h, spp) = (96, 64, 8);
    let scene = room(MaterialKind::Glossy, MaterialKind::Diffuse);
    let settings = room_settings(w, h, spp, 5);
    let factory = MockFactory::new(MockRenderer::new(w, 5).with_spin(|_, _| 3000));
    let config = SchedConfig {
        strategy: Strategy::Sorted,
        tiles: Some(24),
        devices: DeviceSpec::parse_list("cpu:2,gpu0x2").unwrap(),
        pass_spp: Some(2),
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    assert_eq!(frame.report.passes.len(), 4);
    let cpu = |w: usize| w < 2;
    for (i, p) in frame.report.passes.iter().enumerate() {
        let cost = |d: &Vec<usize>| d.iter().map(|&t| p.predicted[t]).sum::<f64>();
        let on_cpu: f64 = p.initial_deques[..2].iter().map(cost).sum();
        let on_gpu: f64 = p.initial_deques[2..].iter().map(cost).sum();
        assert!(
            on_cpu < 0.1 * on_gpu,
            "pass {i}: CPU runs {on_cpu}, GPU runs {on_gpu}"
        );
    }
    assert_no_cpu_ran_a_gpu_tile(&frame.report.passes, cpu);
}
