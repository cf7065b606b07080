//! The image does not depend on the schedule: films are bit-identical to a single-worker
//! reference under every strategy, worker count and stealing setting.

mod sched_support;

use gasworks::render::{Film, Tile};
use gasworks::scene::MaterialKind;
use gasworks::sched::{render_frame, tiles, DeviceSpec, SchedConfig, Strategy};
use sched_support::{mock_radiance, room, room_settings, MockFactory, MockRenderer};

fn bits(f: &Film) -> Vec<[u32; 4]> {
    f.pixels.iter().map(|p| p.map(f32::to_bits)).collect()
}

fn render(
    strategy: Strategy,
    workers: usize,
    steal: bool,
    pass_spp: Option<u32>,
    sleep_us: u64,
) -> Film {
    let (w, h, spp) = (37, 23, 6);
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(w, h, spp, 11);
    let factory = MockFactory::new(MockRenderer::new(w, 11).with_sleep(sleep_us));
    let config = SchedConfig {
        strategy,
        tiles: Some(24),
        steal,
        devices: vec![DeviceSpec::Cpu {
            workers: Some(workers),
        }],
        pass_spp,
        ..SchedConfig::default()
    };
    render_frame(&scene, &settings, &config, &factory, true)
        .unwrap()
        .film
}

#[test]
fn films_are_bit_identical_across_schedules() {
    for pass_spp in [None, Some(4)] {
        let reference = bits(&render(Strategy::Regular, 1, false, pass_spp, 0));
        for strategy in Strategy::ALL {
            for workers in [1, 3, 8] {
                for steal in [false, true] {
                    // Random sleeps shuffle who renders and steals what.
                    let film = render(strategy, workers, steal, pass_spp, 300);
                    assert!(
                        bits(&film) == reference,
                        "{strategy:?}, {workers} workers, steal {steal}, passes {pass_spp:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_check_is_sensitive_to_summation_order() {
    // The same samples added in another order give other bits: the test above could fail.
    let (mut forward, mut backward) = ([0.0f32; 3], [0.0f32; 3]);
    let mut differs = false;
    for pixel in 0..64 {
        forward = [0.0; 3];
        backward = [0.0; 3];
        for s in 0..16 {
            let c = mock_radiance(pixel, s, 11);
            let d = mock_radiance(pixel, 15 - s, 11);
            for k in 0..3 {
                forward[k] += c[k];
                backward[k] += d[k];
            }
        }
        differs |= forward.map(f32::to_bits) != backward.map(f32::to_bits);
    }
    assert!(differs, "{forward:?} {backward:?}");
}

/// GPU workers ask for tiles of a launch's worth of work (`min_tile_work`): the scheduler cuts
/// fewer, larger tiles for them (the count of `tiles::tile_count_for_work`, per pass), and the
/// film is bit-identical to the small-tile reference, alone or with CPU workers beside.
#[test]
fn gpu_sized_tiles_give_the_same_bits() {
    let (w, h, spp) = (200, 130, 6);
    let (scene, settings, reference) = one_worker_room(w, h, spp);
    // The default here is 12 tiles (4 x 3 of about 64 x 64); these ask for 7, 2, 2 and 2.
    assert_eq!(tiles::default_tile_count(w, h), 12);
    for (work, pass_spp) in [
        (20_000u64, None),
        (60_000, None),
        (20_000, Some(2)),
        (1 << 20, Some(4)),
    ] {
        for devices in [
            vec![DeviceSpec::Gpu {
                device: 0,
                streams: 2,
            }],
            vec![
                DeviceSpec::Gpu {
                    device: 0,
                    streams: 2,
                },
                DeviceSpec::Cpu { workers: Some(2) },
            ],
        ] {
            let mut factory = MockFactory::new(MockRenderer::new(w, 11).with_sleep(200));
            factory.gpu_min_work = Some(work);
            let frame = {
                let config = SchedConfig {
                    strategy: Strategy::Sorted,
                    tiles: None,
                    devices: devices.clone(),
                    pass_spp,
                    ..SchedConfig::default()
                };
                render_frame(&scene, &settings, &config, &factory, true).unwrap()
            };
            for pass in &frame.report.passes {
                let n = pass.samples.end - pass.samples.start;
                let expected = tiles::tile_count_for_work(w, h, n, work, 2);
                assert!(expected < 12, "{work}, {n}: {expected}");
                let (cols, rows) = tiles::grid_dims(w, h, expected);
                let grid = tiles::equal_tiles(w, h, cols, rows);
                if devices.len() == 1 {
                    assert_eq!(
                        pass.tiles, grid,
                        "{work} pixel-samples per tile, pass of {n}"
                    );
                } else {
                    // Beside the GPU's streams, the CPU threads' shares may be cut into
                    // pieces they can finish: the grid's tiles or pieces of them, in place.
                    assert_pieces_of(&grid, &pass.tiles, w, h);
                }
            }
            assert!(
                bits(&frame.film) == reference,
                "{work} per tile, passes {pass_spp:?}, {devices:?}"
            );
        }
    }
}

/// `tiles` are `grid`'s tiles in order, each whole or as a run of pieces that cover it
/// exactly once, and nothing else.
fn assert_pieces_of(grid: &[Tile], tiles: &[Tile], w: u32, h: u32) {
    let mut hits = vec![0u8; (w * h) as usize];
    let mut i = 0;
    for g in grid {
        let inside =
            |p: &Tile| p.x >= g.x && p.y >= g.y && p.x + p.w <= g.x + g.w && p.y + p.h <= g.y + g.h;
        let start = i;
        while i < tiles.len() && inside(&tiles[i]) {
            i += 1;
        }
        assert!(
            i > start,
            "grid tile {g:?} has no piece in place: {tiles:?}"
        );
    }
    assert_eq!(i, tiles.len(), "tiles outside the grid: {tiles:?}");
    for t in tiles {
        for y in t.y..t.y + t.h {
            for x in t.x..t.x + t.w {
                hits[(y * w + x) as usize] += 1;
            }
        }
    }
    assert!(hits.iter().all(|&n| n == 1), "pieces overlap or leave gaps");
}

/// The room scene at `w` x `h` and `spp`, and its film by one CPU worker over 40 small tiles:
/// the reference every schedule of the tile-size tests must match bit for bit.
fn one_worker_room(
    w: u32,
    h: u32,
    spp: u32,
) -> (
    gasworks::scene::Scene,
    gasworks::render::RenderSettings,
    Vec<[u32; 4]>,
) {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(w, h, spp, 11);
    let config = SchedConfig {
        strategy: Strategy::Regular,
        tiles: Some(40),
        devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
        ..SchedConfig::default()
    };
    let factory = MockFactory::new(MockRenderer::new(w, 11));
    let reference = bits(
        &render_frame(&scene, &settings, &config, &factory, true)
            .unwrap()
            .film,
    );
    (scene, settings, reference)
}

/// CPU workers far slower than GPU workers beside them get their shares cut into pieces
/// (`tiles::cut_for_slow_workers`, once calibrated): the film stays bit-identical to the
/// reference, the pieces partition the GPU-sized tiles, and `slow_worker_pieces: 0` (or the
/// `regular` schedule) leaves the tiles as laid out. (Whether the CPU threads then take
/// pieces is the simulator's test, `sched::sim`: here it depends on thread start times.)
#[test]
fn tiles_cut_for_slow_cpu_workers_give_the_same_bits() {
    let (w, h, spp) = (200, 130, 6);
    let (scene, settings, reference) = one_worker_room(w, h, spp);
    let devices = vec![
        DeviceSpec::Gpu {
            device: 0,
            streams: 2,
        },
        DeviceSpec::Cpu { workers: Some(2) },
    ];
    let work = 20_000;
    for (strategy, pass_spp, pieces) in [
        (Strategy::Sorted, None, tiles::DEFAULT_SLOW_WORKER_PIECES),
        (Strategy::Sorted, Some(2), tiles::DEFAULT_SLOW_WORKER_PIECES),
        (Strategy::Adaptive, None, 4),
        (Strategy::Sorted, None, 0),
        (Strategy::Regular, None, tiles::DEFAULT_SLOW_WORKER_PIECES),
    ] {
        // The CPU mock spins 2000 hash rounds per sample, the GPU mocks none: hundreds of
        // times slower, whatever the load on this machine.
        let mut factory = MockFactory::new(MockRenderer::new(w, 11).with_spin(|_, _| 2000));
        factory.gpu_min_work = Some(work);
        let config = SchedConfig {
            strategy,
            devices: devices.clone(),
            pass_spp,
            slow_worker_pieces: pieces,
            ..SchedConfig::default()
        };
        let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
        let what = format!("{strategy:?}, passes {pass_spp:?}, {pieces} pieces");
        assert!(bits(&frame.film) == reference, "{what}");
        assert!(
            !frame.report.calibration.is_empty(),
            "{what}: not calibrated"
        );
        for pass in &frame.report.passes {
            let n = pass.samples.end - pass.samples.start;
            let count = tiles::tile_count_for_work(w, h, n, work, 2);
            let laid_out = match strategy {
                Strategy::Adaptive => {
                    // The kd split follows the plan's map, which later passes correct: only
                    // the partition is checked.
                    pass.tiles.clone()
                }
                _ => {
                    let (cols, rows) = tiles::grid_dims(w, h, count);
                    tiles::equal_tiles(w, h, cols, rows)
                }
            };
            assert_pieces_of(&laid_out, &pass.tiles, w, h);
            let cut = pass.tiles.len() > laid_out.len();
            if pieces == 0 || strategy == Strategy::Regular {
                assert!(!cut, "{what}: cut anyway");
            } else if strategy == Strategy::Sorted {
                assert!(cut, "{what}: not cut ({} tiles)", pass.tiles.len());
            }
        }
    }
}

/// Mocks of two GPUs of one stream each, 200 pixels wide: GPU 1's spins `slow_spin` hash
/// rounds per sample; both say they run on `hardware` (empty: not known). Its CPU threads
/// spin 200 rounds a sample.
struct TwoGpus {
    work: u64,
    slow_spin: u32,
    hardware: &'static str,
}

impl gasworks::sched::RendererFactory for TwoGpus {
    fn cpu(&self) -> anyhow::Result<std::sync::Arc<dyn gasworks::render::TileRenderer>> {
        Ok(std::sync::Arc::new(
            MockRenderer::new(200, 11)
                .on_hardware("cpu: Mock 100")
                .with_spin(|_, _| 200),
        ))
    }
    fn gpu(
        &self,
        device: u32,
        stream: u32,
    ) -> anyhow::Result<std::sync::Arc<dyn gasworks::render::TileRenderer>> {
        let spin = if device == 1 { self.slow_spin } else { 0 };
        Ok(std::sync::Arc::new(
            MockRenderer::new(200, 11)
                .named(&format!("gpu{device}/s{stream}"))
                .with_min_tile_work(Some(self.work))
                .on_hardware(self.hardware)
                .with_spin(move |_, _| spin),
        ))
    }
}

/// `devices` under `sorted`, in passes of 2 samples per pixel.
fn sorted_passes_of_2_spp(devices: Vec<DeviceSpec>) -> SchedConfig {
    SchedConfig {
        strategy: Strategy::Sorted,
        devices,
        pass_spp: Some(2),
        ..SchedConfig::default()
    }
}

fn gpu0_and_gpu1() -> Vec<DeviceSpec> {
    vec![
        DeviceSpec::Gpu {
            device: 0,
            streams: 1,
        },
        DeviceSpec::Gpu {
            device: 1,
            streams: 1,
        },
    ]
}

/// `--devices` (with `--pass-spp 2`) on [`TwoGpus`] of one model, GPU 1 slowed as far as in
/// the test below (a hiccup, or another process on it): the frame, checked against the
/// reference, and its report, checked to name gpu0 and gpu1 as one class in its summary and
/// its `--stats` CSV (which `schedule-sim --replay-corrections` reads back), and to plan both
/// at one speed in every pass planned by speeds.
fn alike_gpus_frame(devices: Vec<DeviceSpec>) -> gasworks::sched::report::FrameReport {
    let (w, h, spp) = (200, 130, 6);
    let (scene, settings, reference) = one_worker_room(w, h, spp);
    let config = sorted_passes_of_2_spp(devices);
    let gpus = TwoGpus {
        work: 8_000,
        slow_spin: 2000,
        hardware: "gpu: Mock 9000, 8 SMs",
    };
    let frame = render_frame(&scene, &settings, &config, &gpus, true).unwrap();
    assert!(bits(&frame.film) == reference, "the film differs");
    let report = frame.report;
    assert_eq!(report.speed_classes[..2], [0, 0]);
    assert_eq!(report.passes.len(), 3);
    let summary = report.summary();
    assert!(
        summary
            .contains("one speed for alike devices (one kind and hardware, GPUs with as many streams): gpu0, gpu1"),
        "{summary}"
    );
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("run.csv");
    gasworks::sched::report::write_stats(&report, &stats).unwrap();
    let rows = gasworks::sched::report::read_workers(&stats).unwrap();
    assert_eq!(rows.len(), report.workers.len() * report.passes.len());
    assert!(
        rows.iter()
            .all(|r| r.speed_class == Some(r.worker.min(2) / 2)),
        "{rows:?}"
    );
    // Every pass planned by speeds planned both GPUs at one.
    for (i, pass) in report.passes.iter().enumerate() {
        if let [gpu0, gpu1, ..] = pass.speeds[..] {
            assert_eq!(gpu0, gpu1, "pass {i}: {:?}", pass.speeds);
        }
    }
    report
}

/// Two GPUs that say they are one model are one speed class (`sched::speed_classes`): they
/// are not calibrated (worker counts share the first pass among alike GPUs exactly), and both
/// plan at one speed, their pooled one, in every later pass.
#[test]
fn two_gpus_of_one_model_plan_at_one_speed() {
    let report = alike_gpus_frame(gpu0_and_gpu1());
    assert!(report.calibration.is_empty(), "{:?}", report.calibration);
    assert!(report.passes[0].speeds.is_empty());
    for (i, pass) in report.passes.iter().enumerate().skip(1) {
        assert_eq!(pass.speeds.len(), 2, "pass {i}");
    }
}

/// Beside a CPU thread, two GPUs of one model are calibrated each, but plan the first pass at
/// their pooled speed (their pieces' total cost over their total seconds), and the later ones
/// at one measured speed; the CPU thread keeps its own.
#[test]
fn two_gpus_of_one_model_beside_a_cpu_calibrate_as_one() {
    let mut devices = gpu0_and_gpu1();
    devices.push(DeviceSpec::Cpu { workers: Some(1) });
    let report = alike_gpus_frame(devices);
    assert_eq!(report.speed_classes, [0, 0, 1]);
    let cal = &report.calibration;
    assert_eq!(cal.len(), 3, "{cal:?}");
    // Timed apart, GPU 1 is the slower.
    assert!(cal[0].speed > 2.0 * cal[1].speed, "{cal:?}");
    let pooled = (cal[0].cost + cal[1].cost) / (cal[0].seconds + cal[1].seconds);
    let first = &report.passes[0].speeds;
    for s in &first[..2] {
        assert!(
            (s - pooled).abs() <= 1e-9 * pooled,
            "{first:?} against {pooled}"
        );
    }
    assert_eq!(first[2], cal[2].speed, "{first:?}");
    for (i, pass) in report.passes.iter().enumerate() {
        assert_eq!(pass.speeds.len(), 3, "pass {i}");
    }
}

/// Two GPUs, one far slower than the other (its mock spins 2000 hash rounds per sample): once
/// timed (calibrated before the first pass, as two devices are, and measured after each), the
/// slow one's share would be cut into pieces
/// (`tiles::cut_for_slow_workers`), but no piece for a GPU is cut below its launch work
/// (`tiles::piece_floors`), and these tiles hold less than two launches' work: every pass
/// keeps the tiles as laid out, and the film is the reference's.
#[test]
fn a_slow_gpu_beside_a_fast_one_keeps_tiles_of_a_launchs_work() {
    let (w, h, spp) = (200, 130, 6);
    let (scene, settings, reference) = one_worker_room(w, h, spp);
    let devices = gpu0_and_gpu1();
    // 200 x 130 pixels at 2 samples a pass over tiles of at least 8,000 pixel-samples: 6
    // tiles of 4,333 pixels, each less than twice the floor of 4,000.
    let work = 8_000;
    let config = sorted_passes_of_2_spp(devices);
    let gpus = TwoGpus {
        work,
        slow_spin: 2000,
        hardware: "",
    };
    let frame = render_frame(&scene, &settings, &config, &gpus, true).unwrap();
    assert!(bits(&frame.film) == reference, "the film differs");
    let count = tiles::tile_count_for_work(w, h, 2, work, 2);
    assert_eq!(count, 6);
    let (cols, rows) = tiles::grid_dims(w, h, count);
    let laid_out = tiles::equal_tiles(w, h, cols, rows);
    let passes = &frame.report.passes;
    assert_eq!(passes.len(), 3);
    // Every pass was planned with the GPUs' speeds, the slow one far slower.
    assert!(!frame.report.calibration.is_empty(), "not calibrated");
    let speeds = &passes[1].speeds;
    assert!(speeds[0] > 2.0 * speeds[1], "{speeds:?}");
    for (i, pass) in passes.iter().enumerate() {
        assert_eq!(pass.tiles, laid_out, "pass {i}");
    }
    // Without the floors, the same speeds would cut the slow GPU's share (here by a uniform
    // map: the render's corrected one is not kept).
    let (mw, mh) = (w as usize, h as usize);
    let uniform = gasworks::sched::sat::Sat::new(mw, mh, &vec![1.0; mw * mh]);
    let cut = tiles::cut_for_slow_workers(
        laid_out.clone(),
        speeds,
        &[],
        tiles::DEFAULT_SLOW_WORKER_PIECES,
        &uniform,
        gasworks::sched::sat::MapScale::between((w, h), (mw, mh)),
    );
    assert!(cut.len() > laid_out.len(), "{cut:?}");
}
