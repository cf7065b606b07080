//! A `--pixelbounds` window rendered by the scheduler is the matching block of the full
//! frame, bit for bit, under any strategy, worker count, tile count and pass split: the
//! renderers see whole-image pixel coordinates, and a sample depends on (pixel, sample, seed)
//! only. Every window pixel is rendered exactly once per pass, and nothing outside it.

mod sched_support;

use gasworks::render::{Film, Tile};
use gasworks::scene::MaterialKind;
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use sched_support::{room, room_settings, MockFactory, MockRenderer};

const W: u32 = 37;
const H: u32 = 23;

fn render(
    window: Option<Tile>,
    strategy: Strategy,
    workers: usize,
    pass_spp: Option<u32>,
) -> (Film, MockFactory) {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, 5, 3);
    let factory = MockFactory::new(MockRenderer::new(W, 3));
    let config = SchedConfig {
        strategy,
        tiles: Some(7),
        devices: vec![DeviceSpec::Cpu {
            workers: Some(workers),
        }],
        pass_spp,
        window,
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    assert_eq!(
        (frame.report.width, frame.report.height),
        (frame.film.width, frame.film.height)
    );
    (frame.film, factory)
}

#[test]
fn windows_are_blocks_of_the_full_frame_bit_for_bit() {
    let (full, _) = render(None, Strategy::Sorted, 1, None);
    let windows = [
        Tile {
            x: 0,
            y: 0,
            w: W,
            h: H,
        },
        Tile {
            x: 5,
            y: 3,
            w: 11,
            h: 9,
        },
        Tile {
            x: 36,
            y: 22,
            w: 1,
            h: 1,
        },
        Tile {
            x: 0,
            y: 10,
            w: W,
            h: 4,
        },
    ];
    for window in windows {
        for (strategy, workers, pass_spp) in [
            (Strategy::Regular, 1, None),
            (Strategy::Adaptive, 3, Some(2)),
            (Strategy::Sorted, 2, Some(1)),
        ] {
            let (film, factory) = render(Some(window), strategy, workers, pass_spp);
            assert_eq!((film.width, film.height), (window.w, window.h));
            for y in 0..window.h {
                for x in 0..window.w {
                    let a = film.pixels[(y * window.w + x) as usize].map(f32::to_bits);
                    let b =
                        full.pixels[((y + window.y) * W + x + window.x) as usize].map(f32::to_bits);
                    assert_eq!(a, b, "{window:?} {strategy:?} pixel {x},{y}");
                }
            }
            // The renderers saw whole-image tiles inside the window, each pixel once per
            // sample range.
            let mut hits = vec![0u32; (W * H) as usize];
            for (t, samples) in factory.all_calls() {
                assert!(
                    t.x >= window.x
                        && t.y >= window.y
                        && t.x + t.w <= window.x + window.w
                        && t.y + t.h <= window.y + window.h,
                    "{t:?} outside {window:?}"
                );
                for y in t.y..t.y + t.h {
                    for x in t.x..t.x + t.w {
                        hits[(y * W + x) as usize] += samples.len() as u32;
                    }
                }
            }
            for y in 0..H {
                for x in 0..W {
                    let inside = (window.x..window.x + window.w).contains(&x)
                        && (window.y..window.y + window.h).contains(&y);
                    assert_eq!(hits[(y * W + x) as usize], if inside { 5 } else { 0 });
                }
            }
        }
    }
}

#[test]
fn a_window_outside_the_image_is_an_error() {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, 1, 3);
    let factory = MockFactory::new(MockRenderer::new(W, 3));
    let config = SchedConfig {
        window: Some(Tile {
            x: 30,
            y: 0,
            w: 8,
            h: 4,
        }),
        ..SchedConfig::default()
    };
    let e = render_frame(&scene, &settings, &config, &factory, true)
        .err()
        .expect("a window past the image");
    assert!(
        e.to_string().contains("reaches past the 37x23 image"),
        "{e}"
    );
}

#[test]
fn gpu_workers_get_launch_sized_tiles_wherever_the_window_lies() {
    // A GPU worker asks for tiles of a launch's work (`min_tile_work`); seen through a window
    // its renderer is wrapped to shift the tiles, and the wrapper must pass the request on:
    // it once did not, and GPU workers of a window away from the origin got CPU-sized tiles.
    let (width, height) = (512, 384);
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(width, height, 1, 3);
    let tiles_of = |window: Tile, min_work: Option<u64>| {
        let mut factory = MockFactory::new(MockRenderer::new(width, 3));
        factory.gpu_min_work = min_work;
        let config = SchedConfig {
            devices: DeviceSpec::parse_list("gpu0x2").unwrap(),
            window: Some(window),
            ..SchedConfig::default()
        };
        let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
        frame.report.passes[0].tiles.len()
    };
    let (w, h) = (256, 192);
    let at = |x, y| Tile { x, y, w, h };
    // 256x192 pixels at 1 spp: about 12 tiles of 64x64 by default, a few of about a third
    // of the window each with launches of 16384 pixel-samples.
    let launch = Some(16384);
    let (at_origin, without) = (tiles_of(at(0, 0), launch), tiles_of(at(0, 0), None));
    assert!(
        (2..=4).contains(&at_origin) && without >= 12,
        "{at_origin} tiles with launches, {without} without"
    );
    for (x, y) in [(5, 3), (256, 0), (0, 192)] {
        assert_eq!(tiles_of(at(x, y), launch), at_origin, "window at {x},{y}");
    }
}
