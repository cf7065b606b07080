//! Cutting the image into tiles: equal tiles for `regular` and `sorted`, the kd split of the
//! cost map's summed-area table for `adaptive` (the paper's Algorithm 2).
//!
//! Every layout comes back in a *locality order*: consecutive tiles are neighbours in the
//! image (a serpentine scan of the grid, or the kd tree's leaf order), so that the initial
//! assignment can give each worker a contiguous run of tiles that are near each other.

use super::sat::{MapScale, Sat};
use crate::render::Tile;

/// How tiles are cut and ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Equal tiles, processed in order; the cost map is not used.
    Regular,
    /// Equal tiles; each worker takes its most expensive tile first (by the cost map).
    Sorted,
    /// Tiles of about equal estimated cost from a kd split of the cost map.
    Adaptive,
}

impl Strategy {
    pub const ALL: [Strategy; 3] = [Strategy::Regular, Strategy::Sorted, Strategy::Adaptive];

    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Regular => "regular",
            Strategy::Sorted => "sorted",
            Strategy::Adaptive => "adaptive",
        }
    }
}

/// The tile count used when none is given: about 64 x 64-pixel tiles.
pub fn default_tile_count(width: u32, height: u32) -> u32 {
    width.div_ceil(64).max(1) * height.div_ceil(64).max(1)
}

/// The tile count when some workers want tiles of at least `min_work` pixel-samples (GPU
/// workers: enough for one launch to fill the device, `TileRenderer::min_tile_work`), for a pass
/// of `samples_per_pass` samples: the default count (about 64 x 64-pixel tiles), lowered until
/// the tiles carry `min_work` pixel-samples on average, but kept at `at_least` (one tile per
/// such worker, so each has one) when the frame has too little work for that, and at least 1.
/// The more multiprocessors a GPU has, the larger `min_work`, the fewer and larger the tiles.
pub fn tile_count_for_work(
    width: u32,
    height: u32,
    samples_per_pass: u32,
    min_work: u64,
    at_least: u32,
) -> u32 {
    let default = default_tile_count(width, height);
    let total = u64::from(width) * u64::from(height) * u64::from(samples_per_pass);
    let by_work = (total / min_work.max(1)).min(u64::from(u32::MAX)) as u32;
    default.min(by_work.max(at_least)).max(1)
}

/// Columns and rows of an equal-tile grid of about `count` tiles: the exact count when a
/// factorization gives tiles no more elongated than 2:1, otherwise the nearest grid of
/// square-ish tiles; between equally elongated grids, the one with wider tiles (rows of a
/// tile are contiguous in memory). Never more columns than pixels across (nor rows than
/// pixels down).
pub fn grid_dims(width: u32, height: u32, count: u32) -> (u32, u32) {
    let (w, h) = (width.max(1) as f64, height.max(1) as f64);
    let count = count.max(1);
    let elongation = |c: u32, r: u32| ((w / c as f64) / (h / r as f64)).ln().abs();
    let best = (1..=count)
        .filter(|c| count % c == 0)
        .map(|c| (c, count / c))
        .min_by(|a, b| elongation(a.0, a.1).total_cmp(&elongation(b.0, b.1)));
    let (cols, rows) = match best {
        Some((c, r)) if elongation(c, r) <= 2f64.ln() + 1e-9 => (c, r),
        _ => {
            let side = (w * h / count as f64).sqrt();
            (
                ((w / side).round() as u32).max(1),
                ((h / side).round() as u32).max(1),
            )
        }
    };
    (cols.min(width.max(1)), rows.min(height.max(1)))
}

/// Equal tiles on a `cols` x `rows` grid (edges at rounded fractions of the image), in
/// serpentine order: left to right on even rows, right to left on odd ones.
pub fn equal_tiles(width: u32, height: u32, cols: u32, rows: u32) -> Vec<Tile> {
    let cut = |i: u32, n: u32, len: u32| ((i as u64 * len as u64 + n as u64 / 2) / n as u64) as u32;
    let mut tiles = Vec::with_capacity((cols * rows) as usize);
    for r in 0..rows {
        let (y0, y1) = (cut(r, rows, height), cut(r + 1, rows, height));
        let row: Vec<Tile> = (0..cols)
            .map(|c| {
                let (x0, x1) = (cut(c, cols, width), cut(c + 1, cols, width));
                Tile {
                    x: x0,
                    y: y0,
                    w: x1 - x0,
                    h: y1 - y0,
                }
            })
            .filter(|t| t.w > 0 && t.h > 0)
            .collect();
        if r % 2 == 0 {
            tiles.extend(row);
        } else {
            tiles.extend(row.into_iter().rev());
        }
    }
    tiles
}

/// The split axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Axis {
    /// Cut with a vertical line (left and right halves).
    X,
    /// Cut with a horizontal line (top and bottom halves).
    Y,
}

/// Splits `t` along `axis` at the pixel boundary that best halves its cost. `None` when the
/// tile is one pixel thick along that axis.
fn split_half(t: Tile, axis: Axis, sat: &Sat, scale: MapScale) -> Option<(Tile, Tile)> {
    let (lo, hi) = match axis {
        Axis::X => (t.x, t.x + t.w),
        Axis::Y => (t.y, t.y + t.h),
    };
    if hi - lo < 2 {
        return None;
    }
    // Cost of the part before the cut at `p`: non-decreasing in p.
    let before = |p: u32| match axis {
        Axis::X => scale.rect_cost(sat, t.x as f64, t.y as f64, p as f64, (t.y + t.h) as f64),
        Axis::Y => scale.rect_cost(sat, t.x as f64, t.y as f64, (t.x + t.w) as f64, p as f64),
    };
    let half = before(hi) * 0.5;
    // Binary search for the first cut in [lo + 1, hi - 1] whose left part reaches half.
    let (mut a, mut b) = (lo + 1, hi - 1);
    while a < b {
        let mid = a + (b - a) / 2;
        if before(mid) >= half {
            b = mid;
        } else {
            a = mid + 1;
        }
    }
    // `a` reaches half (or is the last cut); the cut before it may be closer.
    let p = if a > lo + 1 && (half - before(a - 1)).abs() <= (before(a) - half).abs() {
        a - 1
    } else {
        a
    };
    Some(match axis {
        Axis::X => (
            Tile { w: p - t.x, ..t },
            Tile {
                x: p,
                w: t.x + t.w - p,
                ..t
            },
        ),
        Axis::Y => (
            Tile { h: p - t.y, ..t },
            Tile {
                y: p,
                h: t.y + t.h - p,
                ..t
            },
        ),
    })
}

/// The kd split of an image of `width` x `height` pixels into `2^levels` tiles of about equal
/// cost, the costs read from `sat` (a map of the same view at `scale` cells per pixel).
///
/// Every level halves every tile, alternating the axis level by level, starting across the
/// image's longer side. (The paper's Algorithm 2 flips the axis after every tile instead, so
/// that siblings are cut along different axes; alternating by level keeps the tiles of a
/// level alike in shape, which is what the text describes.) A tile too thin to cut along its
/// level's axis is cut along the other; a single pixel stays whole, so an image with fewer
/// than `2^levels` pixels gets fewer tiles. The result is in kd leaf order, which keeps
/// neighbours together.
pub fn kd_tiles(width: u32, height: u32, levels: u32, sat: &Sat, scale: MapScale) -> Vec<Tile> {
    let mut tiles = vec![Tile {
        x: 0,
        y: 0,
        w: width,
        h: height,
    }];
    let mut axis = if width >= height { Axis::X } else { Axis::Y };
    for _ in 0..levels {
        let other = match axis {
            Axis::X => Axis::Y,
            Axis::Y => Axis::X,
        };
        let mut next = Vec::with_capacity(tiles.len() * 2);
        for t in tiles {
            match split_half(t, axis, sat, scale).or_else(|| split_half(t, other, sat, scale)) {
                Some((a, b)) => {
                    next.push(a);
                    next.push(b);
                }
                None => next.push(t),
            }
        }
        tiles = next;
        axis = other;
    }
    tiles
}

/// The kd depth for a requested tile count: the nearest power of two.
pub fn kd_levels(count: u32) -> u32 {
    (count.max(1) as f64).log2().round() as u32
}

/// The tiles of one pass under `strategy`, in locality order. `count` is the requested number
/// of tiles ([`default_tile_count`] when `None`); `sat` and `scale` describe the cost map the
/// adaptive split follows.
pub fn layout(
    strategy: Strategy,
    width: u32,
    height: u32,
    count: Option<u32>,
    sat: &Sat,
    scale: MapScale,
) -> Vec<Tile> {
    let count = count.unwrap_or_else(|| default_tile_count(width, height));
    match strategy {
        Strategy::Regular | Strategy::Sorted => {
            let (cols, rows) = grid_dims(width, height, count);
            equal_tiles(width, height, cols, rows)
        }
        Strategy::Adaptive => kd_tiles(width, height, kd_levels(count), sat, scale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_tiles_carry_a_launch_worth_of_work() {
        let h100 = 540_672; // launch_work of 132 SMs x 2048 threads
                            // 1920 x 1080 at 64 spp per pass: 2,073,600 x 64 / 540,672 = 245 tiles of 8,464 px
                            // (about 92 x 92) instead of the default 510 of 64 x 64.
        assert_eq!(default_tile_count(1920, 1080), 510);
        let n = tile_count_for_work(1920, 1080, 64, h100, 2);
        assert_eq!(n, 245);
        assert!(1920 * 1080 / n as u64 * 64 >= h100);
        // One sample per pass: 3 tiles of 691k pixel-samples each.
        assert_eq!(tile_count_for_work(1920, 1080, 1, h100, 2), 3);
        // A frame with less than one launch of work: one tile per GPU worker.
        assert_eq!(tile_count_for_work(256, 256, 1, h100, 2), 2);
        assert_eq!(tile_count_for_work(1, 1, 1, h100, 4), 1);
        // Plenty of samples: the default tiles already carry enough.
        assert_eq!(tile_count_for_work(512, 512, 4096, h100, 2), 64);
        // A bigger GPU gets bigger tiles.
        assert!(
            tile_count_for_work(4096, 4096, 16, 2 * h100, 2)
                < tile_count_for_work(4096, 4096, 16, h100, 2)
        );
    }

    #[test]
    fn grid_dims_prefer_exact_counts() {
        // 128 tiles: 2:1 either way; ties go to wide tiles (fewer columns).
        assert_eq!(grid_dims(1024, 1024, 128), (8, 16));
        assert_eq!(grid_dims(512, 512, 64), (8, 8));
        assert_eq!(grid_dims(640, 480, 12), (4, 3));
        // 7 tiles cannot be cut without 7:1 strips: the nearest square-ish grid instead.
        let (c, r) = grid_dims(512, 512, 7);
        assert!(c * r >= 4 && c * r <= 9, "{c}x{r}");
        assert_eq!(grid_dims(3, 2, 100), (3, 2));
    }

    #[test]
    fn equal_tiles_are_serpentine() {
        let t = equal_tiles(30, 20, 3, 2);
        assert_eq!(t.len(), 6);
        assert_eq!((t[0].x, t[0].y), (0, 0));
        assert_eq!((t[2].x, t[2].y), (20, 0));
        assert_eq!((t[3].x, t[3].y), (20, 10));
        assert_eq!((t[5].x, t[5].y), (0, 10));
    }

    #[test]
    fn kd_split_on_uniform_map_halves_evenly() {
        let sat = Sat::new(16, 16, &[1.0; 256]);
        let scale = MapScale::between((64, 64), (16, 16));
        let t = kd_tiles(64, 64, 4, &sat, scale);
        assert_eq!(t.len(), 16);
        assert!(t.iter().all(|t| t.w == 16 && t.h == 16), "{t:?}");
    }

    #[test]
    fn tiny_images_get_fewer_tiles_not_empty_ones() {
        let sat = Sat::new(1, 1, &[1.0]);
        let scale = MapScale::between((2, 1), (1, 1));
        let t = kd_tiles(2, 1, 5, &sat, scale);
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|t| t.w == 1 && t.h == 1));
    }
}
