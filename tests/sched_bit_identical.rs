//! The image does not depend on the schedule: films are bit-identical to a single-worker
//! reference under every strategy, worker count and stealing setting.

mod sched_support;

use gasworks::render::Film;
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
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(w, h, spp, 11);
    let small_tiles = SchedConfig {
        strategy: Strategy::Regular,
        tiles: Some(40),
        devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
        ..SchedConfig::default()
    };
    let factory = MockFactory::new(MockRenderer::new(w, 11));
    let reference = bits(
        &render_frame(&scene, &settings, &small_tiles, &factory, true)
            .unwrap()
            .film,
    );
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
                assert_eq!(
                    pass.tiles.len() as u32,
                    cols * rows,
                    "{work} pixel-samples per tile, pass of {n}: {:?}",
                    pass.tiles
                );
            }
            assert!(
                bits(&frame.film) == reference,
                "{work} per tile, passes {pass_spp:?}, {devices:?}"
            );
        }
    }
}
