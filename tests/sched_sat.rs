//! The summed-area table against brute-force sums, and the adaptive kd split against its
//! stated tolerance.

use gasworks::render::Tile;
use gasworks::sched::sat::{MapScale, Sat};
use gasworks::sched::tiles::{kd_tiles, layout, Strategy as TileStrategy};
use gasworks::splitmix::mix64;
use proptest::prelude::*;

fn map_strategy() -> impl Strategy<Value = (usize, usize, Vec<f32>)> {
    (1usize..24, 1usize..24).prop_flat_map(|(w, h)| {
        (
            Just(w),
            Just(h),
            proptest::collection::vec(0.0f32..100.0, w * h),
        )
    })
}

/// The integral of the piecewise-constant map over a real rectangle, cell by cell.
fn brute_frac(w: usize, h: usize, v: &[f32], x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
    let mut s = 0.0;
    for cy in 0..h {
        let fy = (y1.min(cy as f64 + 1.0) - y0.max(cy as f64)).max(0.0);
        for cx in 0..w {
            let fx = (x1.min(cx as f64 + 1.0) - x0.max(cx as f64)).max(0.0);
            s += fx * fy * v[cy * w + cx] as f64;
        }
    }
    s
}

proptest! {
    #[test]
    fn sat_rectangles_equal_brute_force_sums(
        (w, h, v) in map_strategy(),
        a in 0usize..25, b in 0usize..25, c in 0usize..25, d in 0usize..25,
    ) {
        let sat = Sat::new(w, h, &v);
        let (x0, x1) = (a.min(c).min(w), a.max(c).min(w));
        let (y0, y1) = (b.min(d).min(h), b.max(d).min(h));
        let mut brute = 0.0f64;
        for y in y0..y1 {
            for x in x0..x1 {
                brute += v[y * w + x] as f64;
            }
        }
        let got = sat.sum(x0, y0, x1, y1);
        prop_assert!((got - brute).abs() <= 1e-9 * brute.max(1.0), "{got} vs {brute}");
        prop_assert!((sat.total() - v.iter().map(|&x| x as f64).sum::<f64>()).abs() < 1e-6);
    }

    #[test]
    fn fractional_rectangles_equal_area_weighted_sums(
        (w, h, v) in map_strategy(),
        fx in proptest::array::uniform4(0.0f64..1.0),
    ) {
        let sat = Sat::new(w, h, &v);
        let (x0, x1) = ((fx[0].min(fx[1])) * w as f64, (fx[0].max(fx[1])) * w as f64);
        let (y0, y1) = ((fx[2].min(fx[3])) * h as f64, (fx[2].max(fx[3])) * h as f64);
        let brute = brute_frac(w, h, &v, x0, y0, x1, y1);
        let got = sat.sum_frac(x0, y0, x1, y1);
        prop_assert!((got - brute).abs() <= 1e-9 * brute.max(1.0), "{got} vs {brute}");
    }

    #[test]
    fn every_layout_partitions_the_image(
        (mw, mh, v) in map_strategy(),
        width in 1u32..200, height in 1u32..200, count in 1u32..300,
    ) {
        let sat = Sat::new(mw, mh, &v);
        let scale = MapScale::between((width, height), (mw, mh));
        for strategy in TileStrategy::ALL {
            let tiles = layout(strategy, width, height, Some(count), &sat, scale);
            let mut seen = vec![0u8; (width * height) as usize];
            for t in &tiles {
                prop_assert!(t.w > 0 && t.h > 0);
                for y in t.y..t.y + t.h {
                    for x in t.x..t.x + t.w {
                        seen[(y * width + x) as usize] += 1;
                    }
                }
            }
            prop_assert!(seen.iter().all(|&s| s == 1), "{strategy:?}");
        }
    }
}

/// A smooth but strongly varying synthetic cost map: a floor plus a few Gaussian bumps up to
/// 40 times the floor, like a scene with a few expensive (specular) regions.
fn synthetic_map(w: usize, h: usize, seed: u64) -> Vec<f32> {
    let bumps: Vec<(f32, f32, f32, f32)> = (0..5)
        .map(|i| {
            let r = |k: u64| (mix64(seed * 100 + i * 10 + k) >> 40) as f32 / (1u64 << 24) as f32;
            (
                r(0) * w as f32,
                r(1) * h as f32,
                0.05 + 0.15 * r(2),
                40.0 * r(3),
            )
        })
        .collect();
    let mut v = Vec::with_capacity(w * h);
    for y in 0..h {
        for x in 0..w {
            let mut c = 1.0;
            for &(bx, by, s, a) in &bumps {
                let (dx, dy) = ((x as f32 - bx) / w as f32, (y as f32 - by) / h as f32);
                c += a * (-(dx * dx + dy * dy) / (2.0 * s * s)).exp();
            }
            v.push(c);
        }
    }
    v
}

/// The stated tolerance of the adaptive split: on a 256 x 256 cost map of a 1024 x 1024
/// image split into 64 tiles (the paper's setting has 128 tiles of a 1024^2 image), every
/// tile's estimated cost is within 5% of the mean tile cost. Each cut lands on the pixel
/// boundary nearest the half, so a cut is off by at most half a pixel line of its tile.
#[test]
fn adaptive_tiles_have_equal_cost_within_five_percent() {
    for seed in 0..8 {
        let map = synthetic_map(256, 256, seed);
        let sat = Sat::new(256, 256, &map);
        let scale = MapScale::between((1024, 1024), (256, 256));
        let tiles = kd_tiles(1024, 1024, 6, &sat, scale);
        assert_eq!(tiles.len(), 64);
        let costs: Vec<f64> = tiles.iter().map(|t| scale.tile_cost(&sat, *t)).collect();
        let mean = sat.total() / 64.0;
        let worst = costs
            .iter()
            .map(|c| (c / mean - 1.0).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 0.05,
            "seed {seed}: a tile is {:.1}% off the mean",
            100.0 * worst
        );
        // Regular tiles of the same map are far from equal: the split did real work.
        let grid = layout(TileStrategy::Regular, 1024, 1024, Some(64), &sat, scale);
        let spread = grid
            .iter()
            .map(|t| scale.tile_cost(&sat, *t) / mean)
            .fold(0.0f64, |m, r| m.max((r - 1.0).abs()));
        assert!(spread > 0.5, "seed {seed}: regular spread {spread}");
    }
}

#[test]
fn kd_split_alternates_axes() {
    let sat = Sat::new(8, 8, &[1.0; 64]);
    let scale = MapScale::between((64, 32), (8, 8));
    let t = kd_tiles(64, 32, 2, &sat, scale);
    // Wider than tall: first cut vertical, then horizontal.
    assert_eq!(
        t,
        vec![
            Tile {
                x: 0,
                y: 0,
                w: 32,
                h: 16
            },
            Tile {
                x: 0,
                y: 16,
                w: 32,
                h: 16
            },
            Tile {
                x: 32,
                y: 0,
                w: 32,
                h: 16
            },
            Tile {
                x: 32,
                y: 16,
                w: 32,
                h: 16
            },
        ]
    );
}
