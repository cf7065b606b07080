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

/// Speeds closer than this factor count as equal: the steal guard of [`super::policy`] is for a GPU
/// beside CPU threads (tens of times apart: docs/guide/workers.md), and the measured speeds of
/// alike workers differ by noise. Where speeds differ by a few percent, the guard's estimates,
/// which ignore the tiles in flight, would refuse the very steals that end a pass sooner. A worker
/// this much slower than the fastest also has its share cut ([`cut_for_slow_workers`]), which is
/// why the factor lives here, below the policy.
pub const SIMILAR_SPEEDS: f64 = 2.0;

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
    let pixels = u64::from(width) * u64::from(height);
    tile_count_for_rendered_work(width, height, pixels, samples_per_pass, min_work, at_least)
}

/// [`tile_count_for_work`] for a pass that renders `rendered` of the `width x height`
/// pixels (adaptive sampling's blocks still sampling, spread over tiles that skip the others):
/// the count that gives the tiles `min_work` rendered pixel-samples on average, so that a late
/// pass of few blocks is still launches that fill the GPU. Never more than the default count.
pub fn tile_count_for_rendered_work(
    width: u32,
    height: u32,
    rendered: u64,
    samples_per_pass: u32,
    min_work: u64,
    at_least: u32,
) -> u32 {
    let default = default_tile_count(width, height);
    let total = rendered.saturating_mul(u64::from(samples_per_pass));
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

/// Splits `t` along `axis` at the pixel boundary that best halves its cost, leaving each half
/// at least `min_side` pixels thick along the axis. `None` when the tile is thinner than
/// twice that.
fn split_half(
    t: Tile,
    axis: Axis,
    sat: &Sat,
    scale: MapScale,
    min_side: u32,
) -> Option<(Tile, Tile)> {
    let (lo, hi) = match axis {
        Axis::X => (t.x, t.x + t.w),
        Axis::Y => (t.y, t.y + t.h),
    };
    let m = min_side.max(1);
    if hi - lo < 2 * m {
        return None;
    }
    // Cost of the part before the cut at `p`: non-decreasing in p.
    let before = |p: u32| match axis {
        Axis::X => scale.rect_cost(sat, t.x as f64, t.y as f64, p as f64, (t.y + t.h) as f64),
        Axis::Y => scale.rect_cost(sat, t.x as f64, t.y as f64, (t.x + t.w) as f64, p as f64),
    };
    let half = before(hi) * 0.5;
    // Binary search for the first cut in [lo + m, hi - m] whose left part reaches half.
    let (mut a, mut b) = (lo + m, hi - m);
    while a < b {
        let mid = a + (b - a) / 2;
        if before(mid) >= half {
            b = mid;
        } else {
            a = mid + 1;
        }
    }
    // `a` reaches half (or is the last cut); the cut before it may be closer.
    let p = if a > lo + m && (half - before(a - 1)).abs() <= (before(a) - half).abs() {
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
            match split_half(t, axis, sat, scale, 1).or_else(|| split_half(t, other, sat, scale, 1))
            {
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

/// Each tile's floor for the steal guard: its pixels at the mean estimated cost per pixel of
/// all `tiles` (whose estimated costs are `costs`). A slower worker counts a tile at no less
/// than that ([`super::policy::WorkQueues::with_task_floors`]), since an estimate that calls a
/// corner cheap is the least reliable, and it pays an under-estimate many times over. For
/// tiles of one size this is the mean tile's cost.
pub fn area_floors(tiles: &[Tile], costs: &[f64]) -> Vec<f64> {
    let density = cost_per_pixel(tiles, costs);
    tiles.iter().map(|&t| pixels(t) * density).collect()
}

fn pixels(t: Tile) -> f64 {
    f64::from(t.w) * f64::from(t.h)
}

/// The mean estimated cost per pixel of `tiles` whose costs are `costs` (0 without pixels;
/// costs that are not finite count as 0).
fn cost_per_pixel(tiles: &[Tile], costs: &[f64]) -> f64 {
    let area: f64 = tiles.iter().map(|&t| pixels(t)).sum();
    let cost: f64 = costs
        .iter()
        .filter(|c| c.is_finite())
        .map(|c| c.max(0.0))
        .sum();
    if area > 0.0 {
        cost / area
    } else {
        0.0
    }
}

/// How many pieces [`cut_for_slow_workers`] cuts a slow worker's share into by default
/// (`--slow-worker-pieces`). A slow worker leaves its next piece to the faster ones once they
/// would get through everything queued before it got through that piece (at twice its
/// estimated cost: [`super::policy::keep_own_tile`]), so it goes idle a piece or two before the
/// end: more pieces waste less of it, and make more tiles. In replays of measured tiles, 8
/// gained nearly all that 16 did (figures: docs/guide/workers.md#mixed-devices).
pub const DEFAULT_SLOW_WORKER_PIECES: u32 = 8;

/// The pieces per slow worker that [`cut_for_slow_workers`] is asked for under `strategy`:
/// `pieces`, except under `regular`, which knows no costs and shares tiles by count, so that
/// pieces cut by cost would not line up with its shares: it cuts nothing.
pub fn slow_worker_pieces(strategy: Strategy, pieces: u32) -> u32 {
    match strategy {
        Strategy::Regular => 0,
        Strategy::Sorted | Strategy::Adaptive => pieces,
    }
}

/// The fewest pixels [`cut_for_slow_workers`] leaves in a piece for each worker of a pass of
/// `samples_per_pass` samples per pixel: a worker that wants `min_tile_work` pixel-samples per
/// tile (a GPU's launch work, [`crate::render::TileRenderer::min_tile_work`]; 0: any tile)
/// keeps pieces that carry that much.
pub fn piece_floors(
    min_tile_work: impl IntoIterator<Item = u64>,
    samples_per_pass: u32,
) -> Vec<u64> {
    let spp = u64::from(samples_per_pass.max(1));
    min_tile_work.into_iter().map(|w| w.div_ceil(spp)).collect()
}

/// The thinnest piece [`cut_for_slow_workers`] makes, in pixels: below that a tile's fixed
/// costs (a launch, a film write) outweigh its work.
pub const MIN_PIECE_SIDE: u32 = 8;

/// Cuts the tiles that the shares of slow workers would hold into pieces a slow worker can
/// finish in time, and leaves the others whole.
///
/// Tiles are sized for the fastest workers (a GPU wants a launch's worth of work per tile), so
/// a CPU thread 100 or 200 times slower than a GPU stream cannot finish even one before the
/// GPU has finished the frame; the steal guard then rightly keeps it idle, and the CPU adds
/// nothing (docs/guide/workers.md#mixed-devices). Here each
/// worker's share of the pass is laid over the tiles as [`super::policy::contiguous_runs`]
/// lays it (in locality order, in proportion to `weights`, the workers' speeds), and every
/// tile that overlaps the share of a worker [`SIMILAR_SPEEDS`] times slower than the fastest or
/// more is halved by cost (across its longer side, as the kd split does) until each piece
/// costs at most that share over `pieces`, or is [`MIN_PIECE_SIDE`] pixels thin. A piece's
/// cost here is the one the steal guard counts it at: its estimate, but no less than its
/// pixels at the mean cost per pixel ([`area_floors`]), so that the slow worker does not leave
/// a piece of a corner the estimate calls cheap to the fast workers after all. Pieces
/// replace their tile in place, so the order stays a locality order, and the pieces of a
/// tile cover exactly its pixels: the image does not change.
///
/// No piece is cut below `floors[w]` pixels for a slow worker `w` that wants big tiles (a GPU:
/// its launch work over the pass's samples per pixel, [`piece_floors`]): a launch of fewer
/// pixel-samples leaves the device partly idle and takes about as long, so a smaller piece
/// would not finish sooner, only add launches. A tile over several slow shares is held to the
/// least of their floors (a CPU thread's is 0: its share is still cut). Missing entries, or
/// an empty `floors`, are 0. (Without it, noise between two ranks of one GPU kind can cut the
/// "slower" rank's share into launches of a thousandth of a launch's work: docs/cluster.md.)
///
/// A weight of 0 is a retired worker's ([`super::OnWorkerError::Retire`]): its share is empty,
/// and the others are cut as if it were not there.
///
/// Unchanged: tiles when `pieces` is 0, when the weights are not all finite and at least 0
/// with one positive (counts rather than speeds, or nothing known), or when no working worker
/// is that much slower.
pub fn cut_for_slow_workers(
    tiles: Vec<Tile>,
    weights: &[f64],
    floors: &[u64],
    pieces: u32,
    sat: &Sat,
    scale: MapScale,
) -> Vec<Tile> {
    let known =
        weights.iter().any(|&w| w > 0.0) && weights.iter().all(|w| w.is_finite() && *w >= 0.0);
    let fastest = weights.iter().copied().fold(0.0, f64::max);
    if pieces == 0 || !known || !weights.iter().any(|&w| is_slow(w, fastest)) {
        return tiles;
    }
    let cost = |t: Tile| clamped_tile_cost(sat, scale, t);
    let costs: Vec<f64> = tiles.iter().map(|&t| cost(t)).collect();
    let total: f64 = costs.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return tiles;
    }
    // What the guard counts a piece at (see `area_floors`).
    let density = cost_per_pixel(&tiles, &costs);
    let guarded = |t: Tile, c: f64| c.max(pixels(t) * density);
    let shares = ShareLimits::new(weights, floors, pieces, total, fastest);
    let mut out = Vec::with_capacity(tiles.len());
    let mut position = 0.0;
    for (tile, c) in tiles.into_iter().zip(costs) {
        // Depth first, the first half before the second: the pieces keep the tile's place.
        let mut stack = vec![(tile, c)];
        while let Some((t, c)) = stack.pop() {
            let (limit, floor) = shares.over(position, position + c);
            if guarded(t, c) > limit {
                if let Some((a, b)) = split_longer_side_first(t, sat, scale)
                    .filter(|(a, b)| pixels(*a).min(pixels(*b)) >= floor)
                {
                    stack.push((b, cost(b)));
                    stack.push((a, cost(a)));
                    continue;
                }
            }
            out.push(t);
            position += c;
        }
    }
    out
}

/// Whether a worker of weight `w` is [`SIMILAR_SPEEDS`] times slower than the `fastest` or more.
#[inline]
fn is_slow(w: f64, fastest: f64) -> bool {
    // (A retired worker, weight 0, is not slow: its empty share limits nothing.)
    w > 0.0 && fastest >= SIMILAR_SPEEDS * w
}

/// A tile's estimated cost, 0 where the estimate is negative or not finite.
fn clamped_tile_cost(sat: &Sat, scale: MapScale, t: Tile) -> f64 {
    let c = scale.tile_cost(sat, t);
    if c.is_finite() {
        c.max(0.0)
    } else {
        0.0
    }
}

/// Halves `t` by cost across its longer side, or else across its shorter one; `None` where
/// neither half would stay [`MIN_PIECE_SIDE`] pixels thick.
fn split_longer_side_first(t: Tile, sat: &Sat, scale: MapScale) -> Option<(Tile, Tile)> {
    let (long, short) = if t.w >= t.h {
        (Axis::X, Axis::Y)
    } else {
        (Axis::Y, Axis::X)
    };
    split_half(t, long, sat, scale, MIN_PIECE_SIDE)
        .or_else(|| split_half(t, short, sat, scale, MIN_PIECE_SIDE))
}

/// The workers' shares laid over the cumulative cost of the tiles, for
/// [`cut_for_slow_workers`].
struct ShareLimits {
    shares: Vec<(f64, f64, f64)>,
}

impl ShareLimits {
    fn new(weights: &[f64], floors: &[u64], pieces: u32, total: f64, fastest: f64) -> Self {
        // Each worker's share as an interval of the cumulative cost, with the most a tile
        // overlapping it may cost and the fewest pixels a piece of it keeps: (end of the
        // interval, limit, floor; a fast share has no limit and so needs no floor).
        let weight_total: f64 = weights.iter().sum();
        let mut shares = Vec::with_capacity(weights.len());
        let mut end = 0.0;
        for (i, &w) in weights.iter().enumerate() {
            let share = total * w / weight_total;
            end += share;
            let (limit, floor) = if is_slow(w, fastest) {
                let floor = floors.get(i).copied().unwrap_or(0) as f64;
                (share / f64::from(pieces), floor)
            } else {
                (f64::INFINITY, f64::INFINITY)
            };
            shares.push((end, limit, floor));
        }
        ShareLimits { shares }
    }

    /// The least limit and the least floor of the shares that overlap the cost interval (a, b).
    fn over(&self, a: f64, b: f64) -> (f64, f64) {
        let (mut start, mut limit, mut floor) = (0.0, f64::INFINITY, f64::INFINITY);
        for &(end, l, f) in &self.shares {
            if start >= b {
                break;
            }
            if end > a {
                limit = limit.min(l);
                floor = floor.min(f);
            }
            start = end;
        }
        (limit, floor)
    }
}

/// The tiles with the pixels for which `done(x, y)` holds taken out: a tile none of whose
/// pixels is done stays whole, one whose pixels are all done goes, and one that is partly done
/// is replaced, in place, by rectangles that cover exactly its pixels still to render (rows'
/// runs of such pixels, with the runs of consecutive rows that span the same columns merged).
///
/// This is how a render resumed from a stop inside a pass renders only what that pass had not
/// reached: the film's sample counts say which pixels have the pass already, and the new
/// layout need not be the stopped one (another schedule, other workers, other speeds). Since a
/// pixel's sums do not depend on the tile that renders it, the image stays bit-identical.
pub fn without_done(tiles: Vec<Tile>, done: impl Fn(u32, u32) -> bool) -> Vec<Tile> {
    let mut out = Vec::with_capacity(tiles.len());
    for t in tiles {
        let (mut any_done, mut all_done) = (false, true);
        for y in t.y..t.y + t.h {
            for x in t.x..t.x + t.w {
                let d = done(x, y);
                any_done |= d;
                all_done &= d;
            }
        }
        if !any_done {
            out.push(t);
            continue;
        }
        if all_done {
            continue;
        }
        // Rectangles still open: (x0, x1, first row), extended while the next row has the
        // same run; closed ones go out in the order they close, which keeps them within the
        // tile's place in the list.
        let mut open: Vec<(u32, u32, u32)> = Vec::new();
        let close = |(x0, x1, y0): (u32, u32, u32), y: u32, out: &mut Vec<Tile>| {
            out.push(Tile {
                x: x0,
                y: y0,
                w: x1 - x0,
                h: y - y0,
            })
        };
        for y in t.y..t.y + t.h {
            let mut runs = Vec::new();
            let mut x = t.x;
            while x < t.x + t.w {
                if done(x, y) {
                    x += 1;
                    continue;
                }
                let x0 = x;
                while x < t.x + t.w && !done(x, y) {
                    x += 1;
                }
                runs.push((x0, x));
            }
            let mut next = Vec::with_capacity(runs.len());
            for r in open.drain(..) {
                if runs.contains(&(r.0, r.1)) {
                    next.push(r);
                } else {
                    close(r, y, &mut out);
                }
            }
            for (x0, x1) in runs {
                if !next.iter().any(|r| (r.0, r.1) == (x0, x1)) {
                    next.push((x0, x1, y));
                }
            }
            open = next;
        }
        for r in open {
            close(r, t.y + t.h, &mut out);
        }
    }
    out
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

    /// Every pixel of a `w` x `h` image covered exactly once by `tiles`.
    fn covers_exactly_once(tiles: &[Tile], w: u32, h: u32) -> bool {
        let mut hits = vec![0u8; (w * h) as usize];
        for t in tiles {
            for y in t.y..t.y + t.h {
                for x in t.x..t.x + t.w {
                    hits[(y * w + x) as usize] += 1;
                }
            }
        }
        hits.iter().all(|&n| n == 1)
    }

    /// A 960 x 540 image over a 240 x 135 map whose cost rises to the right, cut into 135
    /// GPU-sized tiles; two GPU streams beside sixteen CPU threads 190 times slower (a
    /// measured calibration: docs/guide/workers.md#mixed-devices).
    fn h200_like() -> (Vec<Tile>, Sat, MapScale, Vec<f64>) {
        let (mw, mh) = (240, 135);
        let values: Vec<f32> = (0..mw * mh).map(|i| 1.0 + (i % mw) as f32 / 60.0).collect();
        let sat = Sat::new(mw, mh, &values);
        let scale = MapScale::between((960, 540), (mw, mh));
        let tiles = layout(Strategy::Sorted, 960, 540, Some(135), &sat, scale);
        let mut speeds = vec![1.0, 1.0];
        speeds.extend([1.0 / 190.0; 16]);
        (tiles, sat, scale, speeds)
    }

    #[test]
    fn cutting_for_slow_workers_keeps_every_pixel_once_and_the_fast_tiles_whole() {
        let (tiles, sat, scale, speeds) = h200_like();
        let cut = cut_for_slow_workers(tiles.clone(), &speeds, &[], 8, &sat, scale);
        assert!(covers_exactly_once(&cut, 960, 540));
        assert!(cut.len() > tiles.len() + 16, "{} pieces", cut.len());
        // Pieces replace their tile in place: the cut list is the tiles in order, each
        // either itself or a run of pieces inside it.
        let mut i = 0;
        for t in &tiles {
            let inside = |p: &Tile| {
                p.x >= t.x && p.y >= t.y && p.x + p.w <= t.x + t.w && p.y + p.h <= t.y + t.h
            };
            let start = i;
            while i < cut.len() && inside(&cut[i]) {
                i += 1;
            }
            assert!(i > start, "tile {t:?} has no piece in place");
        }
        assert_eq!(i, cut.len());
        // The fast workers' shares (all but the last 16/190 of 2 + 16/190 of the cost) keep
        // their tiles whole: the first tiles are untouched.
        assert_eq!(cut[..100], tiles[..100]);
        // The slow shares hold pieces no dearer than a share over 8 (or too thin to cut), as
        // the steal guard counts them: not below their pixels at the mean cost per pixel.
        let cost = |t: &Tile| scale.tile_cost(&sat, *t);
        let total: f64 = tiles.iter().map(cost).sum();
        let limit = total * speeds[2] / speeds.iter().sum::<f64>() / 8.0;
        let slow_start = total * 2.0 / speeds.iter().sum::<f64>();
        let floors = area_floors(&cut, &cut.iter().map(cost).collect::<Vec<_>>());
        let mut at = 0.0;
        for (p, floor) in cut.iter().zip(&floors) {
            let c = cost(p);
            if at >= slow_start - 1e-9 * total {
                assert!(
                    c.max(*floor) <= limit * (1.0 + 1e-9)
                        || p.w < 2 * MIN_PIECE_SIDE && p.h < 2 * MIN_PIECE_SIDE,
                    "{p:?} costs {c}, limit {limit}"
                );
            }
            at += c;
        }
        // Every CPU thread's run is no longer empty: each has pieces of its own.
        let costs: Vec<f64> = cut.iter().map(cost).collect();
        let runs = super::super::policy::contiguous_runs(&costs, &speeds);
        assert!(runs[2..].iter().all(|r| !r.is_empty()), "{runs:?}");
        // Uncut, most of them had nothing (the few others a whole GPU-sized tile each).
        let before: Vec<f64> = tiles.iter().map(cost).collect();
        let runs_before = super::super::policy::contiguous_runs(&before, &speeds);
        let holding = runs_before[2..].iter().filter(|r| !r.is_empty()).count();
        assert!(holding <= 4, "{runs_before:?}");
    }

    #[test]
    fn tiles_stay_as_laid_out_unless_some_worker_is_much_slower() {
        let (tiles, sat, scale, speeds) = h200_like();
        let same = |weights: &[f64], pieces: u32| {
            cut_for_slow_workers(tiles.clone(), weights, &[], pieces, &sat, scale) == tiles
        };
        assert!(same(&speeds, 0), "0 pieces: off");
        assert!(same(&[1.0; 18], 8), "equal speeds (or worker counts)");
        assert!(same(&[1.0, 1.0, 0.6, 0.6], 8), "speeds within 2x");
        assert!(same(&[1.0, f64::NAN, 0.001], 8), "a speed not known");
        assert!(same(&[], 8), "no workers");
        assert!(same(&[0.0, 0.0], 8), "every worker retired");
        assert!(
            same(&[1.0, 0.0, 1.0], 8),
            "a retired worker beside equal ones"
        );
        // A retired worker (speed 0) is not there: the others are cut as without it.
        let cut =
            |weights: &[f64]| cut_for_slow_workers(tiles.clone(), weights, &[], 8, &sat, scale);
        assert!(cut(&[1.0, 0.001]) != tiles);
        assert!(cut(&[1.0, 0.0, 0.001]) == cut(&[1.0, 0.001]));
        assert!(cut(&[0.0, 1.0, 0.001]) == cut(&[1.0, 0.001]));
        // Slower by 2.5x, with a share of 29% of the frame: 8 pieces of it are still larger
        // than the tiles, which stay whole. Slower by 50x (a 2% share): cut.
        assert!(same(&[1.0, 0.4], 8), "2.5x slower, a large share");
        assert!(!same(&[1.0, 0.02], 8), "50x slower: cut");
        assert_eq!(slow_worker_pieces(Strategy::Regular, 8), 0);
        assert_eq!(slow_worker_pieces(Strategy::Sorted, 8), 8);
        assert_eq!(slow_worker_pieces(Strategy::Adaptive, 3), 3);
    }

    #[test]
    fn a_slow_gpu_keeps_pieces_of_its_launch_work() {
        // Two GPU streams beside a GPU twenty times slower (an older model, or one that is
        // shared): its share is cut, but into pieces of no fewer pixels than its floor.
        let (tiles, sat, scale, _) = h200_like();
        let speeds = [1.0, 1.0, 0.05];
        let area = |t: &Tile| u64::from(t.w) * u64::from(t.h);
        let smallest = tiles.iter().map(area).min().unwrap();
        let uncut = cut_for_slow_workers(tiles.clone(), &speeds, &[], 8, &sat, scale);
        assert!(uncut.len() > tiles.len(), "no floor: cut");
        // A floor of half the tiles' pixels or more: no tile can be halved, none is cut.
        let half = smallest.div_ceil(2) + 1;
        let floors = [half, half, half];
        let held = cut_for_slow_workers(tiles.clone(), &speeds, &floors, 8, &sat, scale);
        assert_eq!(held, tiles);
        // A floor of a third: the slow share's tiles are halved once at most (by cost, so a
        // half can be smaller than half the pixels), and every piece keeps the floor.
        let third = smallest / 3;
        let floors = [0, 0, third];
        let cut = cut_for_slow_workers(tiles.clone(), &speeds, &floors, 8, &sat, scale);
        assert!(covers_exactly_once(&cut, 960, 540));
        assert!(cut.len() > tiles.len(), "a third's floor: cut");
        assert!(cut.len() < uncut.len(), "{} vs {}", cut.len(), uncut.len());
        assert!(cut.iter().all(|p| area(p) >= third), "{cut:?}");
        assert!(uncut.iter().any(|p| area(p) < third), "{uncut:?}");
        // A CPU thread (floor 0) beside the slow GPU: its share is still cut below the GPU's
        // floor (and a tile across both shares, to the least of the two floors).
        let mut speeds = speeds.to_vec();
        speeds.push(0.01);
        let floors = [half, half, half, 0];
        let with_cpu = cut_for_slow_workers(tiles.clone(), &speeds, &floors, 8, &sat, scale);
        assert!(with_cpu.len() > tiles.len());
        assert!(with_cpu.iter().any(|p| area(p) < half));
        assert_eq!(piece_floors([0, 1000, 1001], 2), [0, 500, 501]);
        assert_eq!(piece_floors([7], 0), [7], "0 samples counts as 1");
    }

    #[test]
    fn pieces_stop_at_the_thinnest_side() {
        // A slow worker whose share is a speck of one 20 x 20 tile: the pieces stop at
        // MIN_PIECE_SIDE, however small the limit.
        let sat = Sat::new(20, 20, &[1.0; 400]);
        let scale = MapScale::between((20, 20), (20, 20));
        let tiles = vec![Tile {
            x: 0,
            y: 0,
            w: 20,
            h: 20,
        }];
        let cut = cut_for_slow_workers(tiles, &[1.0, 1e-6], &[], 8, &sat, scale);
        assert!(covers_exactly_once(&cut, 20, 20));
        assert!(cut.len() > 1);
        assert!(
            cut.iter()
                .all(|t| t.w >= MIN_PIECE_SIDE && t.h >= MIN_PIECE_SIDE),
            "{cut:?}"
        );
    }

    #[test]
    fn tiny_images_get_fewer_tiles_not_empty_ones() {
        let sat = Sat::new(1, 1, &[1.0]);
        let scale = MapScale::between((2, 1), (1, 1));
        let t = kd_tiles(2, 1, 5, &sat, scale);
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|t| t.w == 1 && t.h == 1));
    }

    /// Every pixel of the tiles is either done or in exactly one output rectangle, and the
    /// rectangles lie within the tile they came from, in its place in the list.
    fn check_without_done(tiles: &[Tile], done: &dyn Fn(u32, u32) -> bool) -> Vec<Tile> {
        let out = without_done(tiles.to_vec(), done);
        for t in tiles {
            for y in t.y..t.y + t.h {
                for x in t.x..t.x + t.w {
                    let covering = out
                        .iter()
                        .filter(|r| x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h)
                        .count();
                    assert_eq!(covering, usize::from(!done(x, y)), "pixel ({x}, {y})");
                }
            }
        }
        // In place: the pieces of tile i come before those of tile i + 1.
        let owner = |r: &Tile| {
            tiles
                .iter()
                .position(|t| {
                    r.x >= t.x && r.y >= t.y && r.x + r.w <= t.x + t.w && r.y + r.h <= t.y + t.h
                })
                .expect("a piece inside one tile")
        };
        assert!(out.windows(2).all(|p| owner(&p[0]) <= owner(&p[1])));
        assert!(out.iter().all(|r| r.w > 0 && r.h > 0));
        out
    }

    #[test]
    fn without_done_keeps_untouched_tiles_and_drops_finished_ones() {
        let tiles = equal_tiles(64, 48, 4, 3);
        // The first two tiles were finished (the stopped pass had reached them).
        let finished = |x: u32, y: u32| {
            tiles[..2]
                .iter()
                .any(|t| x >= t.x && x < t.x + t.w && y >= t.y && y < t.y + t.h)
        };
        let out = check_without_done(&tiles, &finished);
        assert_eq!(out, tiles[2..].to_vec());
        assert_eq!(check_without_done(&tiles, &|_, _| false), tiles);
        assert!(check_without_done(&tiles, &|_, _| true).is_empty());
    }

    #[test]
    fn without_done_cuts_a_partly_done_tile_into_few_rectangles() {
        let tile = Tile {
            x: 3,
            y: 5,
            w: 20,
            h: 10,
        };
        // The stopped layout's tile covered the top-left corner of this one.
        let corner = |x: u32, y: u32| x < 13 && y < 9;
        let out = check_without_done(&[tile], &corner);
        assert_eq!(
            out,
            vec![
                Tile {
                    x: 13,
                    y: 5,
                    w: 10,
                    h: 4
                },
                Tile {
                    x: 3,
                    y: 9,
                    w: 20,
                    h: 6
                },
            ]
        );
        // Any pattern at all, the layout of another schedule: exact cover all the same.
        let scattered = |x: u32, y: u32| (x * 7 + y * 13) % 5 < 2 || (x > 15 && y > 11);
        check_without_done(&equal_tiles(40, 30, 3, 2), &scattered);
    }
}
