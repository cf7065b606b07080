//! Adaptive sampling (`--noise-threshold`): blocks whose noise is at or below the threshold
//! stop taking samples, and the decisions, made from the film at pass boundaries, keep every
//! guarantee of uniform sampling: the film is bit-identical under every schedule, a crop on
//! the block grid holds the frame's pixels, and a render stopped anywhere resumes into the
//! uninterrupted film (through a resume file too).
//!
//! The renderer here is a mock whose noise is known block by block: flat (no noise) on the
//! left, faint in the middle, strong on the right (`sched_support::ColumnNoise`), so which
//! blocks stop, and when, is known.

mod sched_support;

use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use gasworks::render::checkpoint::{self, CheckpointHeader};
use gasworks::render::{Film, Tile};
use gasworks::scene::MaterialKind;
use gasworks::sched::adaptive_sampling::{AdaptiveSampling, BlockGrid, BLOCK};
use gasworks::sched::{
    render_frame_until, CpuOnlyFactory, DeviceSpec, Frame, FrameControl, Resume, SchedConfig,
    Strategy,
};
use sched_support::{room, room_settings, ColumnNoise};

/// 6 x 3 blocks, the last column and row cut short.
const W: u32 = 88;
const H: u32 = 40;
const SPP: u32 = 64;
const PASS: u32 = 4;
const THRESHOLD: f32 = 0.01;

/// Flat up to x = 32, faint to 64 (a block's noise is below the threshold after two passes),
/// strong beyond (above it to the last sample).
fn noisy() -> ColumnNoise {
    ColumnNoise::new(32, 64)
}

fn config(strategy: Strategy, workers: usize, steal: bool, tiles: u32) -> SchedConfig {
    SchedConfig {
        strategy,
        tiles: Some(tiles),
        steal,
        devices: vec![DeviceSpec::Cpu {
            workers: Some(workers),
        }],
        pass_spp: Some(PASS),
        adaptive_sampling: Some(AdaptiveSampling {
            threshold: THRESHOLD,
            tone: Default::default(),
            min_spp: 0,
        }),
        ..SchedConfig::default()
    }
}

fn frame(renderer: ColumnNoise, config: &SchedConfig, control: FrameControl<'_>) -> Frame {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    render_frame_until(
        &scene,
        &room_settings(W, H, SPP, 3),
        config,
        &CpuOnlyFactory(Arc::new(renderer)),
        true,
        control,
    )
    .unwrap()
}

fn reference() -> Frame {
    frame(
        noisy(),
        &config(Strategy::Regular, 1, false, 7),
        FrameControl::default(),
    )
}

fn bits(f: &Film) -> (Vec<[u32; 4]>, Vec<u32>) {
    (
        f.pixels.iter().map(|p| p.map(f32::to_bits)).collect(),
        f.odd_luma.iter().map(|v| v.to_bits()).collect(),
    )
}

#[test]
fn blocks_stop_where_their_noise_is_at_or_below_the_threshold() {
    let f = reference();
    assert!(f.stopped.is_none());
    for (i, p) in f.film.pixels.iter().enumerate() {
        let x = i as u32 % W;
        // The first decision is before the third pass: two passes of 4 samples.
        let expected = if x < 64 { 8.0 } else { SPP as f32 };
        assert_eq!(p[3], expected, "pixel ({x}, {})", i as u32 / W);
    }
    let report = f
        .report
        .adaptive
        .expect("an adaptive frame reports its blocks");
    let grid = BlockGrid::new(Tile::whole(W, H));
    assert_eq!(report.blocks, grid.len());
    assert_eq!(report.blocks, 18);
    // Two passes of every block, then the two right columns of blocks (6 of 18) alone.
    assert_eq!(report.active_per_pass[..3], [18, 18, 6]);
    assert!(report.active_per_pass[2..].iter().all(|&n| n == 6));
    // What `--stats` writes as OUT.blocks.csv: each block took the passes before the one it
    // stopped before, as the film's counts say.
    assert_eq!(report.block_passes.len(), 18);
    for (t, until) in &report.block_passes {
        assert_eq!(*t, grid.block_tile(grid.block_of(t.x, t.y)));
        let spp = f.film.pixels[(t.y * W + t.x) as usize][3];
        assert_eq!(
            (PASS * *until as u32) as f32,
            spp,
            "block at ({}, {})",
            t.x,
            t.y
        );
    }
    // The later passes render the noisy blocks only: 3/8 of the frame's pixels, never the
    // flat ones.
    let later = &f.report.passes[2];
    let pixels: usize = later.tiles.iter().map(|t| t.pixel_count()).sum();
    assert_eq!(pixels, (W as usize - 64) * H as usize);
    assert!(later.tiles.iter().all(|t| t.x >= 64));
}

#[test]
fn every_block_below_the_threshold_ends_the_frame_after_the_first_decision() {
    // A threshold the strong noise meets too (after two passes its blocks are at about
    // 0.8 * 0.29 * 0.88 / sqrt(8) = 0.072).
    let mut c = config(Strategy::Sorted, 2, true, 9);
    c.adaptive_sampling = Some(AdaptiveSampling {
        threshold: 0.2,
        tone: Default::default(),
        min_spp: 0,
    });
    let f = frame(noisy(), &c, FrameControl::default());
    assert!(f.stopped.is_none());
    assert_eq!(f.report.passes.len(), 2);
    assert_eq!(f.report.adaptive.unwrap().active_per_pass, vec![18, 18, 0]);
    assert!(f.film.pixels.iter().all(|p| p[3] == 8.0));
    // --min-spp holds every block to 24 samples: the first decision comes before pass 7.
    c.adaptive_sampling = Some(AdaptiveSampling {
        threshold: 0.2,
        tone: Default::default(),
        min_spp: 21,
    });
    let f = frame(noisy(), &c, FrameControl::default());
    assert!(f.film.pixels.iter().all(|p| p[3] == 24.0));
}

#[test]
fn adaptive_films_are_bit_identical_across_schedules() {
    let want = bits(&reference().film);
    for strategy in Strategy::ALL {
        for (workers, steal, tiles) in [(1, true, 24), (3, true, 5), (3, false, 24), (8, true, 64)]
        {
            let f = frame(
                noisy(),
                &config(strategy, workers, steal, tiles),
                FrameControl::default(),
            );
            assert!(
                bits(&f.film) == want,
                "{strategy:?}, {workers} workers, steal {steal}, {tiles} tiles"
            );
        }
    }
}

#[test]
fn a_crop_on_the_block_grid_holds_the_frames_pixels() {
    let whole = reference().film;
    // Two blocks down, three across from (16, 16): the faint column and the strong one meet
    // in it; and one at the frame's right and bottom edges (its blocks cut short there).
    for crop in [
        Tile {
            x: 16,
            y: 16,
            w: 48,
            h: 24,
        },
        Tile {
            x: 64,
            y: 32,
            w: W - 64,
            h: H - 32,
        },
    ] {
        assert_eq!(crop.x % BLOCK, 0);
        let mut c = config(Strategy::Sorted, 3, true, 6);
        c.window = Some(crop);
        let f = frame(noisy(), &c, FrameControl::default());
        for y in 0..crop.h {
            for x in 0..crop.w {
                let (a, b) = (
                    f.film.pixels[(y * crop.w + x) as usize],
                    whole.pixels[((crop.y + y) * W + crop.x + x) as usize],
                );
                assert!(
                    a.map(f32::to_bits) == b.map(f32::to_bits),
                    "{crop:?}: ({x}, {y}): {a:?} against the frame's {b:?}"
                );
            }
        }
    }
}

#[test]
fn a_stop_anywhere_resumes_into_the_uninterrupted_film() {
    let want = bits(&reference().film);
    let c = config(Strategy::Sorted, 2, true, 7);
    // Inside the first passes (before any block stops), at the first decision, and among
    // the later passes' pieces.
    let mut through_a_file = false;
    for stop_after in [3, 9, 15, 16, 22, 40] {
        let stop = Arc::new(AtomicU8::new(0));
        let stopped = frame(
            noisy().stopping_after(stop_after, stop.clone()),
            &c,
            FrameControl {
                stop: &stop,
                ..FrameControl::default()
            },
        );
        let how = stopped
            .stopped
            .clone()
            .unwrap_or_else(|| panic!("stop after {stop_after}: not stopped"));
        let mut resume = stopped
            .resume_point()
            .unwrap_or_else(|| panic!("stop after {stop_after}: nothing to resume"));
        if how.spp_complete >= 8 {
            // The blocks that had stopped are named in the description.
            assert!(
                how.describe(SPP)
                    .contains("at most that in the 12 of 18 blocks"),
                "{}",
                how.describe(SPP)
            );
        }
        if !through_a_file && how.spp_complete >= 8 {
            // Once through a resume file: the odd-pass plane and the stopped blocks' fewer
            // samples come back as they were.
            through_a_file = true;
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.exr.gasworks-resume");
            let header = CheckpointHeader {
                render: "test".into(),
                window: [0, 0, W, H],
                pass_spp: PASS,
                spp_done: resume.spp_done,
                software: String::new(),
                png_tone: Default::default(),
            };
            checkpoint::write(&path, &header, &resume.film).unwrap();
            let (h, film) = checkpoint::read(&path).unwrap();
            assert!(bits(&film) == bits(&resume.film));
            resume = Resume {
                film,
                spp_done: h.spp_done,
            };
        }
        let finished = frame(
            noisy(),
            &c,
            FrameControl {
                resume: Some(resume),
                ..FrameControl::default()
            },
        );
        assert!(finished.stopped.is_none());
        assert!(
            bits(&finished.film) == want,
            "stop after {stop_after} tiles ({})",
            how.describe(SPP)
        );
    }
    assert!(through_a_file);
}

#[test]
fn a_resume_film_without_the_odd_plane_is_refused() {
    let mut film = Film::new(W, H);
    for p in &mut film.pixels {
        p[3] = 8.0;
    }
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let e = render_frame_until(
        &scene,
        &room_settings(W, H, SPP, 3),
        &config(Strategy::Sorted, 1, true, 4),
        &CpuOnlyFactory(Arc::new(noisy())),
        true,
        FrameControl {
            resume: Some(Resume { film, spp_done: 8 }),
            ..FrameControl::default()
        },
    )
    .err()
    .expect("refused");
    assert!(format!("{e:#}").contains("no odd-pass plane"), "{e:#}");
}

fn checkered_frame(renderer: Arc<ColumnNoise>, config: &SchedConfig) -> Frame {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    render_frame_until(
        &scene,
        &room_settings(W, H, SPP, 3),
        config,
        &CpuOnlyFactory(renderer),
        true,
        FrameControl::default(),
    )
    .unwrap()
}

/// Workers that want big tiles (GPUs, whose every tile is a launch) get, in the passes after
/// the first decision, tiles laid out over the blocks still sampling that skip the stopped
/// ones (`render_tile_skipping`), where other workers get the pieces between the stopped
/// blocks: fewer tiles for the same pixel-samples, and the same film, bit for bit.
#[test]
fn workers_that_want_big_tiles_skip_the_stopped_blocks_and_keep_the_film() {
    // Strong noise in a checkerboard of blocks, flat in the others: after two passes the
    // flat half stops, and what is left is 9 blocks of 18, no two side by side.
    let cut = checkered_frame(
        Arc::new(ColumnNoise::checkered(0)),
        &config(Strategy::Regular, 1, false, 7),
    );
    let want = bits(&cut.film);
    let active = &cut.report.adaptive.as_ref().unwrap().active_per_pass;
    assert_eq!(active[..3], [18, 18, 9]);
    let cut_later = &cut.report.passes[2];
    assert!(cut_later.tiles.len() >= 9, "{:?}", cut_later.tiles);
    assert_eq!(cut_later.skipped_pixels, 0);
    for strategy in Strategy::ALL {
        for (workers, tiles) in [(1, None), (2, None), (3, Some(5)), (2, Some(24))] {
            let r = Arc::new(ColumnNoise::checkered(0).wanting_tiles_of(1000));
            let mut c = config(strategy, workers, true, 1);
            c.tiles = tiles;
            // No pieces for a worker measured slower (`tiles::cut_for_slow_workers`): the
            // tile counts are then the same in every run.
            c.slow_worker_pieces = 0;
            let f = checkered_frame(r.clone(), &c);
            let what = format!("{strategy:?}, {workers} workers, tiles {tiles:?}");
            assert!(bits(&f.film) == want, "{what}: the film differs");
            let later = &f.report.passes[2];
            // Counted from the work still to do, the tiles are fewer than the pieces; a count
            // given (--tiles) is kept, less the tiles left without a block still sampling.
            let fewer = match tiles {
                None => later.tiles.len() < cut_later.tiles.len(),
                Some(_) => later.tiles.len() <= f.report.passes[0].tiles.len(),
            };
            assert!(
                fewer,
                "{what}: {} tiles against {} pieces",
                later.tiles.len(),
                cut_later.tiles.len()
            );
            assert!(later.skipped_pixels > 0, "{what}");
            assert_eq!(later.pixel_samples(), cut_later.pixel_samples(), "{what}");
            assert!(r.skipping_calls.load(std::sync::atomic::Ordering::SeqCst) > 0);
            // The passes before the first decision render every pixel: no tile skips there.
            assert!(f.report.passes[..2].iter().all(|p| p.skipped_pixels == 0));
        }
    }
}

/// A stop among the skipping tiles of workers that want big ones (inside a pass after the
/// first decision) resumes into the uninterrupted film, resumed by such workers or by others.
#[test]
fn a_stop_among_skipping_tiles_resumes_into_the_uninterrupted_film() {
    let want = bits(
        &checkered_frame(
            Arc::new(ColumnNoise::checkered(0)),
            &config(Strategy::Regular, 1, false, 7),
        )
        .film,
    );
    let mut c = config(Strategy::Sorted, 1, true, 1);
    c.tiles = Some(6);
    let mut inside_a_late_pass = 0;
    for stop_after in [13, 14, 16, 20, 27] {
        let stop = Arc::new(AtomicU8::new(0));
        let r = ColumnNoise::checkered(0)
            .wanting_tiles_of(1000)
            .stopping_after(stop_after, stop.clone());
        let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
        let stopped = render_frame_until(
            &scene,
            &room_settings(W, H, SPP, 3),
            &c,
            &CpuOnlyFactory(Arc::new(r)),
            true,
            FrameControl {
                stop: &stop,
                ..FrameControl::default()
            },
        )
        .unwrap();
        let how = stopped
            .stopped
            .clone()
            .unwrap_or_else(|| panic!("stop after {stop_after}: not stopped"));
        if how.spp_complete >= 8 && how.partial.as_ref().is_some_and(|p| p.tiles_done > 0) {
            inside_a_late_pass += 1;
        }
        let resume = stopped.resume_point().unwrap();
        for wanting in [true, false] {
            let r = if wanting {
                ColumnNoise::checkered(0).wanting_tiles_of(1000)
            } else {
                ColumnNoise::checkered(0)
            };
            let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
            let finished = render_frame_until(
                &scene,
                &room_settings(W, H, SPP, 3),
                &config(Strategy::Adaptive, 2, true, 5),
                &CpuOnlyFactory(Arc::new(r)),
                true,
                FrameControl {
                    resume: Some(resume.clone()),
                    ..FrameControl::default()
                },
            )
            .unwrap();
            assert!(
                bits(&finished.film) == want,
                "stop after {stop_after} tiles ({}), resumed by workers wanting big tiles: {wanting}",
                how.describe(SPP)
            );
        }
    }
    assert!(
        inside_a_late_pass > 0,
        "no stop fell inside a skipping pass"
    );
}
