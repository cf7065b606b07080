//! Adaptive sampling (`--noise-threshold`): passes after the first few render only the
//! blocks of the image whose noise is still above a threshold.
//!
//! The image is cut into blocks of [`BLOCK`] x [`BLOCK`] pixels on the whole frame's grid
//! (a crop on that grid sees the frame's blocks). Before each pass, from the film at that
//! pass boundary, every block still sampling estimates its noise and stops once it is at or
//! below the threshold; a stopped block takes no more samples. The estimate is the one of
//! Dammertz et al., "A Hierarchical Automatic Stopping Condition for Monte Carlo Global
//! Illumination" (WSCG 2009), which Cycles uses too: two independent estimates of each pixel,
//! here the mean of its even passes and the mean of its odd passes (the film's odd plane,
//! [`Film::odd_luma`]), differ by about the noise of their mean. With `n_e` and `n_o` samples
//! in the even and odd passes (`n` in all), and `D(m_e)`, `D(m_o)` the two means of the
//! pixel's luminance as the PNG shows them ([`displayed`]: its exposure, its tone curve, the
//! sRGB encoding; white = 1), the variance of the pixel's shown mean is estimated as
//!
//! ```text
//! var = (D(m_e) - D(m_o))^2 * n_e * n_o / n^2      (a quarter of the squared difference when n_e = n_o)
//! ```
//!
//! Taken as shown, the noise counts where it shows: the display's gamma makes the same
//! noise plainer in the shadows than in the highlights (Cycles divides by the square root of
//! the mean for the same reason), and none shows where both halves are past white (a light
//! source's edge, half its samples on the light, is white in either half). A block's noise is
//! the root mean square of its pixels': one pixel's estimate rests on one difference and is
//! itself noisy, a block of 256 pixels' to within about 9%. So a threshold of 0.01 stops a
//! block once a pixel's noise is about 1% of white on the PNG (2.5 levels of 255), one
//! standard deviation. An EXR output is judged as a PNG at `--exposure 0` would show it.
//!
//! The decisions are made from the film alone, at pass boundaries, and the film's sums do not
//! depend on the schedule ([`super`]): the image is bit-identical under every schedule, tile
//! layout and worker count, a crop on the block grid merges into the frame's image, and a
//! resumed render decides as the uninterrupted one did (a block that had stopped still holds
//! fewer samples than the pass boundary; one the stopped pass had reached in part holds more).

use std::ops::Range;

use crate::render::checkpoint::PngTone;
use crate::render::{Film, Tile};

/// The side of a block, in pixels: big enough that a block's noise estimate is steady (256
/// pixels: about 9%), small enough that a block follows the image's features.
pub const BLOCK: u32 = 16;

/// What a render asks of adaptive sampling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveSampling {
    /// A block stops once its noise, as the PNG shows it (one standard deviation, white = 1),
    /// is at most this.
    pub threshold: f32,
    /// The PNG's tone mapping (`--exposure`, `--tonemap`; the default for an EXR), through
    /// which the noise is judged.
    pub tone: PngTone,
    /// No block stops before it has this many samples per pixel: the first decision comes at
    /// the first pass boundary at or after it, and never before two passes (one even, one
    /// odd) are done.
    pub min_spp: u32,
}

/// Why adaptive settings cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AdaptiveError {
    #[error("--noise-threshold must be a number above 0, got {0}")]
    Threshold(f32),
    #[error(
        "--noise-threshold decides between passes, and --spp {spp} in passes of {pass_spp} \
         gives {passes}: it needs at least 3 (give --pass-spp at most {most}, or leave it out \
         to get passes of --spp/16)"
    )]
    TooFewPasses {
        spp: u32,
        pass_spp: u32,
        passes: usize,
        most: u32,
    },
    #[error(
        "--noise-threshold decides between passes, and --spp {0} is fewer than three: give \
         --spp 3 or more"
    )]
    TooFewSamples(u32),
    #[error("--min-spp {min_spp} is more than --spp {spp}: no block could stop early")]
    MinSpp { min_spp: u32, spp: u32 },
}

impl AdaptiveSampling {
    /// Checks the threshold and the pass plan: at least three passes, so that a decision
    /// (after two) can leave a pass to save.
    pub fn validate(&self, passes: &[Range<u32>], spp: u32) -> Result<(), AdaptiveError> {
        if !(self.threshold > 0.0 && self.threshold.is_finite()) {
            return Err(AdaptiveError::Threshold(self.threshold));
        }
        if spp < 3 {
            return Err(AdaptiveError::TooFewSamples(spp));
        }
        if passes.len() < 3 {
            return Err(AdaptiveError::TooFewPasses {
                spp,
                pass_spp: passes.first().map_or(spp, |p| p.end - p.start),
                passes: passes.len(),
                most: (spp / 3).max(1),
            });
        }
        if self.min_spp > spp {
            return Err(AdaptiveError::MinSpp {
                min_spp: self.min_spp,
                spp,
            });
        }
        Ok(())
    }

    /// The render key's item (`output::render_key`): the threshold, the least samples and the
    /// pass size, all of which decide which blocks get which samples (without adaptive
    /// sampling, the passes change no pixel, and are not in the key).
    /// The tone is named only when it is not the default (`shown exposure 1.5 aces`).
    pub fn key_item(&self, pass_spp: u32) -> String {
        let tone = if self.tone == PngTone::default() {
            String::new()
        } else {
            format!(
                " shown exposure {:?} {}",
                self.tone.exposure,
                self.tone.tonemap.name()
            )
        };
        format!(
            "noise-threshold {:?} min-spp {} pass-spp {pass_spp}{tone}",
            self.threshold, self.min_spp
        )
    }

    /// Whether blocks may stop before `passes[pass]`: two passes done, and `min_spp`.
    pub fn decides_before(&self, passes: &[Range<u32>], pass: usize) -> bool {
        pass >= 2 && passes.get(pass).is_some_and(|p| p.start >= self.min_spp)
    }
}

/// A luminance as the PNG shows it: times `2^exposure`, through the tone curve, sRGB-encoded
/// (white = 1), as `output` writes a grey pixel.
pub fn displayed(luminance: f64, tone: &PngTone) -> f64 {
    let exposed = luminance as f32 * 2f32.powf(tone.exposure);
    let shown = tone.tonemap.apply([exposed; 3])[0];
    f64::from(crate::render::output::linear_to_srgb(shown))
}

/// The blocks of a window of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockGrid {
    /// The window, in pixels of the whole frame.
    pub window: Tile,
    /// The frame's first block column and row the window touches.
    first: (u32, u32),
    /// Blocks across and down that the window touches.
    pub cols: u32,
    pub rows: u32,
}

impl BlockGrid {
    pub fn new(window: Tile) -> BlockGrid {
        let first = (window.x / BLOCK, window.y / BLOCK);
        let last = |start: u32, len: u32| (start + len.max(1) - 1) / BLOCK;
        BlockGrid {
            window,
            first,
            cols: last(window.x, window.w) - first.0 + 1,
            rows: last(window.y, window.h) - first.1 + 1,
        }
    }

    pub fn len(&self) -> usize {
        self.cols as usize * self.rows as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The block of the window's pixel (`x`, `y`) (window coordinates), as an index.
    pub fn block_of(&self, x: u32, y: u32) -> usize {
        let bx = (self.window.x + x) / BLOCK - self.first.0;
        let by = (self.window.y + y) / BLOCK - self.first.1;
        (by * self.cols + bx) as usize
    }

    /// Block `b`'s pixels inside the window, in window coordinates.
    pub fn block_tile(&self, b: usize) -> Tile {
        let (bx, by) = (b as u32 % self.cols, b as u32 / self.cols);
        let x0 = ((self.first.0 + bx) * BLOCK).max(self.window.x);
        let y0 = ((self.first.1 + by) * BLOCK).max(self.window.y);
        let x1 = ((self.first.0 + bx + 1) * BLOCK).min(self.window.x + self.window.w);
        let y1 = ((self.first.1 + by + 1) * BLOCK).min(self.window.y + self.window.h);
        Tile {
            x: x0 - self.window.x,
            y: y0 - self.window.y,
            w: x1 - x0,
            h: y1 - y0,
        }
    }
}

/// The units of [`BlockTally::noise`]: a block's noise terms are summed in fixed point, so
/// that the sum is the same in whatever order the ranks holding its pixels add their shares.
const FIXED_ONE: f64 = 4_294_967_296.0; // 2^32

/// One block's share of a judgement from the pixels one rank holds. Merged over the ranks
/// that hold the block's pixels, in any order, it is the block's whole tally, bit for bit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockTally {
    /// The pixels' noise terms, in units of 2^-32, saturating.
    pub noise: u64,
    /// A term was not a number.
    pub nan: bool,
    /// A pixel holds more samples than the boundary's.
    pub ahead: bool,
    /// A pixel holds fewer.
    pub behind: bool,
}

impl BlockTally {
    pub fn merge(&mut self, other: &BlockTally) {
        self.noise = self.noise.saturating_add(other.noise);
        self.nan |= other.nan;
        self.ahead |= other.ahead;
        self.behind |= other.behind;
    }
}

/// What judging the blocks before one pass needs: that pass's first sample and the samples
/// of the odd and even passes before it.
#[derive(Clone, Copy, Debug)]
pub struct Judging {
    start: f32,
    n: f64,
    n_odd: f64,
    decide: bool,
    threshold: f32,
    tone: PngTone,
}

impl Judging {
    /// The judgement before `passes[pass]`; `None` past the last pass. A film without its
    /// odd plane judges nothing but the stopped blocks.
    pub fn new(
        passes: &[Range<u32>],
        pass: usize,
        adaptive: &AdaptiveSampling,
        odd_plane: bool,
    ) -> Option<Judging> {
        let start = passes.get(pass)?.start;
        // Samples per pixel in the odd passes before this one (every pixel of a block judged
        // holds exactly the passes before it).
        let odd: u32 = passes[..pass]
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, p)| p.end - p.start)
            .sum();
        let (n, n_odd) = (f64::from(start), f64::from(odd));
        Some(Judging {
            start: start as f32,
            n,
            n_odd,
            decide: adaptive.decides_before(passes, pass) && odd_plane,
            threshold: adaptive.threshold,
            tone: adaptive.tone,
        })
    }

    /// Whether noise decides (else only the stopped blocks stop).
    fn decides(&self) -> bool {
        let n_even = self.n - self.n_odd;
        self.decide && self.n_odd > 0.0 && n_even > 0.0
    }

    /// The tallies of the blocks of `grid` that hold a pixel of `film` for which `holds`
    /// (its index) is true, as (block, tally).
    pub fn tally(
        &self,
        film: &Film,
        grid: BlockGrid,
        holds: impl Fn(usize) -> bool,
    ) -> Vec<(u32, BlockTally)> {
        let decides = self.decides();
        let (n, n_odd) = (self.n, self.n_odd);
        let n_even = n - n_odd;
        let mut out = Vec::new();
        for b in 0..grid.len() {
            let t = grid.block_tile(b);
            let (mut tally, mut any) = (BlockTally::default(), false);
            for y in t.y..t.y + t.h {
                let row = (y * film.width) as usize;
                for i in row + t.x as usize..row + (t.x + t.w) as usize {
                    if !holds(i) {
                        continue;
                    }
                    any = true;
                    let p = film.pixels[i];
                    tally.ahead |= p[3] > self.start;
                    tally.behind |= p[3] < self.start;
                    if decides {
                        let y_all =
                            f64::from(crate::colour::luminance(glam::Vec3::new(p[0], p[1], p[2])));
                        let y_odd = f64::from(film.odd_luma[i]);
                        let (m_odd, m_even) = (y_odd / n_odd, (y_all - y_odd) / n_even);
                        let shown = displayed(m_even, &self.tone) - displayed(m_odd, &self.tone);
                        let term = shown * shown * n_even * n_odd / (n * n);
                        tally.nan |= term.is_nan();
                        // Saturating: a term past 2^32 is noise far above any threshold. A
                        // term below 2^-32 counts nothing: a noise that close to a
                        // threshold is not told from it anyway.
                        tally.noise = tally.noise.saturating_add((term * FIXED_ONE) as u64);
                    }
                }
            }
            if any {
                out.push((b as u32, tally));
            }
        }
        out
    }
}

/// Which blocks a pass renders.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockMask {
    pub grid: BlockGrid,
    /// Per block: still sampling.
    pub active: Vec<bool>,
    /// Per block: its noise when it was judged at this boundary (`None` where it was not:
    /// before the first decision, a block that had stopped earlier, or one a stopped pass had
    /// reached in part).
    pub noise: Vec<Option<f64>>,
}

impl BlockMask {
    /// Every block of `window` active: the passes before the first decision.
    pub fn all_active(window: Tile) -> BlockMask {
        let grid = BlockGrid::new(window);
        BlockMask {
            grid,
            active: vec![true; grid.len()],
            noise: vec![None; grid.len()],
        }
    }

    /// The blocks that render `passes[pass]`, judged from `film` (the window's, with its odd
    /// plane) at that pass's start. A block renders it when a pixel of it already holds more
    /// than the boundary's samples (a stopped run had rendered part of this pass there: the
    /// block was sampling), stops when a pixel holds fewer (it stopped at an earlier
    /// boundary), and otherwise renders it unless its noise is at most the threshold; before
    /// [`AdaptiveSampling::decides_before`], every block that has not stopped renders it.
    pub fn judge(
        film: &Film,
        window: Tile,
        passes: &[Range<u32>],
        pass: usize,
        adaptive: &AdaptiveSampling,
    ) -> BlockMask {
        let Some(j) = Judging::new(passes, pass, adaptive, film.has_odd_plane()) else {
            return BlockMask::all_active(window);
        };
        let grid = BlockGrid::new(window);
        let mut tallies = vec![BlockTally::default(); grid.len()];
        for (b, t) in j.tally(film, grid, |_| true) {
            tallies[b as usize] = t;
        }
        BlockMask::of_tallies(window, &j, &tallies)
    }

    /// The judgement of [`BlockMask::judge`] from every block's tally, merged over the ranks
    /// that hold its pixels.
    pub fn of_tallies(window: Tile, j: &Judging, tallies: &[BlockTally]) -> BlockMask {
        let mut mask = BlockMask::all_active(window);
        for (b, t) in tallies.iter().enumerate().take(mask.grid.len()) {
            mask.active[b] = if t.ahead {
                true
            } else if t.behind {
                false
            } else if j.decides() {
                let pixels = mask.grid.block_tile(b).pixel_count() as f64;
                let noise = match t.nan {
                    true => f64::NAN,
                    false => (t.noise as f64 / FIXED_ONE / pixels).sqrt(),
                };
                mask.noise[b] = Some(noise);
                // A noise that is not a number keeps sampling rather than stop on it.
                noise.is_nan() || noise > f64::from(j.threshold)
            } else {
                true
            };
        }
        mask
    }

    /// Whether the window's pixel (`x`, `y`) is in a block that renders the pass.
    pub fn is_active(&self, x: u32, y: u32) -> bool {
        self.active[self.grid.block_of(x, y)]
    }

    pub fn active_blocks(&self) -> usize {
        self.active.iter().filter(|&&a| a).count()
    }

    pub fn all(&self) -> bool {
        self.active.iter().all(|&a| a)
    }

    /// The pixels of the blocks that render the pass.
    pub fn active_pixels(&self) -> u64 {
        (0..self.grid.len())
            .filter(|&b| self.active[b])
            .map(|b| self.grid.block_tile(b).pixel_count() as u64)
            .sum()
    }

    /// The smallest tile holding every pixel of `tile` that renders the pass (window
    /// coordinates); `None` where none does.
    pub fn active_bounds(&self, tile: Tile) -> Option<Tile> {
        let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
        for b in 0..self.grid.len() {
            if !self.active[b] {
                continue;
            }
            let Some(t) = intersection(self.grid.block_tile(b), tile) else {
                continue;
            };
            x0 = x0.min(t.x);
            y0 = y0.min(t.y);
            x1 = x1.max(t.x + t.w);
            y1 = y1.max(t.y + t.h);
        }
        (x0 < x1).then(|| Tile {
            x: x0,
            y: y0,
            w: x1 - x0,
            h: y1 - y0,
        })
    }

    /// The skip mask of `tile` ([`crate::render::TileRenderer::render_tile_skipping`]): true
    /// for each pixel (row-major) of a block that does not render the pass; `None` where
    /// every pixel of the tile renders it.
    pub fn skip_in(&self, tile: Tile) -> Option<Vec<bool>> {
        let mut skip = Vec::with_capacity(tile.pixel_count());
        for y in tile.y..tile.y + tile.h {
            for x in tile.x..tile.x + tile.w {
                skip.push(!self.is_active(x, y));
            }
        }
        skip.iter().any(|&k| k).then_some(skip)
    }

    /// The pixels of `tile` that render the pass.
    pub fn active_pixels_in(&self, tile: Tile) -> u64 {
        (0..self.grid.len())
            .filter(|&b| self.active[b])
            .filter_map(|b| intersection(self.grid.block_tile(b), tile))
            .map(|t| t.pixel_count() as u64)
            .sum()
    }
}

/// The pixels two tiles share, as a tile (`None` where they share none).
fn intersection(a: Tile, b: Tile) -> Option<Tile> {
    let (x0, y0) = (a.x.max(b.x), a.y.max(b.y));
    let (x1, y1) = ((a.x + a.w).min(b.x + b.w), (a.y + a.h).min(b.y + b.h));
    (x0 < x1 && y0 < y1).then(|| Tile {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    })
}

/// How the passes of an adaptive frame went, for the summary and the output line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdaptiveReport {
    pub blocks: usize,
    /// Per pass this run rendered (or skipped, every block having stopped): the blocks that
    /// rendered it.
    pub active_per_pass: Vec<usize>,
    /// Per block, in the grid's order: its pixels (window coordinates) and the frame's pass
    /// (from 0) it stopped before in this run. It rendered every pass of this run numbered
    /// below that, and none from it on. A block that had stopped in an earlier run, resumed,
    /// has this run's first pass. `--stats` writes these as `OUT.blocks.csv`, from which
    /// `schedule-sim` rebuilds each pass's skip mask ([`BlockStops`]). Empty until a pass is
    /// judged.
    pub block_passes: Vec<(Tile, usize)>,
}

impl AdaptiveReport {
    /// Records the blocks judged to render the frame's pass `pass`.
    pub fn record(&mut self, pass: usize, mask: &BlockMask) {
        self.active_per_pass.push(mask.active_blocks());
        if self.block_passes.len() != mask.active.len() {
            self.block_passes = (0..mask.grid.len())
                .map(|b| (mask.grid.block_tile(b), pass))
                .collect();
        }
        for (entry, &active) in self.block_passes.iter_mut().zip(&mask.active) {
            if active {
                entry.1 = pass + 1;
            }
        }
    }
}

/// The blocks of an adaptive render read back from `OUT.blocks.csv`: each pass's skip mask,
/// as the render judged it.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockStops {
    grid: BlockGrid,
    /// Per block: the pass it stopped before ([`AdaptiveReport::block_passes`]).
    until: Vec<usize>,
}

impl BlockStops {
    /// Rebuilds the block grid of a window from its blocks' pixels, in the grid's order, and
    /// checks that they are one. The grid lies on the whole frame's 16-pixel lines, so a
    /// window off them has its first column and row cut short: that tells its offset.
    pub fn new(blocks: &[(Tile, usize)]) -> Result<BlockStops, String> {
        let Some(&(first, _)) = blocks.first() else {
            return Err("it lists no blocks".into());
        };
        let width = blocks.iter().map(|(t, _)| t.x + t.w).max().unwrap_or(0);
        let height = blocks.iter().map(|(t, _)| t.y + t.h).max().unwrap_or(0);
        let offset = |first_len: u32, len: u32| {
            if first_len < BLOCK && first_len < len {
                BLOCK - first_len
            } else {
                0
            }
        };
        let grid = BlockGrid::new(Tile {
            x: offset(first.w, width),
            y: offset(first.h, height),
            w: width,
            h: height,
        });
        let fits = grid.len() == blocks.len()
            && blocks
                .iter()
                .enumerate()
                .all(|(b, (t, _))| grid.block_tile(b) == *t);
        if !fits {
            return Err(format!(
                "its {} blocks are not the {BLOCK}x{BLOCK} block grid of a {width}x{height} image, in order",
                blocks.len()
            ));
        }
        Ok(BlockStops {
            grid,
            until: blocks.iter().map(|&(_, u)| u).collect(),
        })
    }

    /// The size of the window the blocks cover.
    pub fn size(&self) -> (u32, u32) {
        (self.grid.window.w, self.grid.window.h)
    }

    /// The blocks that rendered the frame's pass `pass` (of those this run rendered).
    pub fn mask(&self, pass: usize) -> BlockMask {
        BlockMask {
            grid: self.grid,
            active: self.until.iter().map(|&u| pass < u).collect(),
            noise: vec![None; self.until.len()],
        }
    }
}

/// "39.2 samples per pixel on average (8 to 256), 812 of 1024 blocks stopped below the noise
/// threshold": what an adaptive film holds.
pub fn describe_film(film: &Film, window: Tile, spp: u32) -> String {
    let pixels = film.pixels.len().max(1);
    let counts = film.pixels.iter().map(|p| p[3] as u32);
    let (least, most) = (
        counts.clone().min().unwrap_or(0),
        counts.clone().max().unwrap_or(0),
    );
    let grid = BlockGrid::new(window);
    let stopped = (0..grid.len())
        .filter(|&b| {
            let t = grid.block_tile(b);
            film.pixels[(t.y * film.width + t.x) as usize][3] < spp as f32
        })
        .count();
    format!(
        "{:.1} samples per pixel on average ({least} to {most} of {spp}), {stopped} of {} blocks stopped below the noise threshold",
        film.samples() / pixels as f64,
        grid.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passes(k: u32, spp: u32) -> Vec<Range<u32>> {
        super::super::pass_ranges(k, spp)
    }

    /// A threshold of 0.01, shown as a plain PNG, judged from the first decision.
    fn one_percent() -> AdaptiveSampling {
        AdaptiveSampling {
            threshold: 0.01,
            tone: PngTone::default(),
            min_spp: 0,
        }
    }

    /// The skip masks, bounds and pixel counts of a mask checked against a per-pixel brute
    /// force, on a window off the frame's block grid (its edge blocks cut short).
    /// What a run's report records of its masks (`OUT.blocks.csv`) gives each pass's mask back,
    /// on windows on and off the frame's block grid, resumed past pass 0 or not; blocks that
    /// are not a grid, in order, are refused.
    #[test]
    fn recorded_blocks_give_back_every_passs_mask() {
        for (window, first_pass) in [
            (Tile::whole(64, 48), 0),
            (
                Tile {
                    x: 5,
                    y: 9,
                    w: 70,
                    h: 37,
                },
                2,
            ),
            (
                Tile {
                    x: 20,
                    y: 3,
                    w: 9,
                    h: 40,
                },
                0,
            ),
        ] {
            let mut report = AdaptiveReport::default();
            let mut masks = Vec::new();
            let mut mask = BlockMask::all_active(window);
            for pass in first_pass..first_pass + 6 {
                // Stopping is for good: a block stops at a pass of its own.
                for (b, a) in mask.active.iter_mut().enumerate() {
                    *a &= (b * 7 + 3) % 9 + first_pass > pass;
                }
                report.record(pass, &mask);
                masks.push(mask.clone());
            }
            let stops = BlockStops::new(&report.block_passes).unwrap();
            assert_eq!(stops.size(), (window.w, window.h));
            for (i, m) in masks.iter().enumerate() {
                let back = stops.mask(first_pass + i);
                // The window's place in the frame matters only modulo the blocks.
                let tiles =
                    |g: &BlockGrid| (0..g.len()).map(|b| g.block_tile(b)).collect::<Vec<_>>();
                assert_eq!(tiles(&back.grid), tiles(&m.grid), "{window:?}");
                assert_eq!(back.active, m.active, "{window:?} pass {}", first_pass + i);
            }
            assert_eq!(report.active_per_pass.len(), 6);
        }
        let mut blocks = AdaptiveReport::default();
        blocks.record(0, &BlockMask::all_active(Tile::whole(40, 40)));
        let mut swapped = blocks.block_passes.clone();
        swapped.swap(0, 1);
        let e = BlockStops::new(&swapped).unwrap_err();
        assert!(
            e.contains("not the 16x16 block grid of a 40x40 image"),
            "{e}"
        );
        assert!(BlockStops::new(&[]).is_err());
    }

    #[test]
    fn skip_masks_and_bounds_agree_with_the_blocks_pixel_by_pixel() {
        let window = Tile {
            x: 5,
            y: 9,
            w: 70,
            h: 37,
        };
        let mut mask = BlockMask::all_active(window);
        for (b, a) in mask.active.iter_mut().enumerate() {
            *a = b % 3 == 1 || b == 4;
        }
        let brute = |x: u32, y: u32| mask.active[mask.grid.block_of(x, y)];
        let total: u64 = (0..window.h)
            .flat_map(|y| (0..window.w).map(move |x| (x, y)))
            .filter(|&(x, y)| brute(x, y))
            .count() as u64;
        assert_eq!(mask.active_pixels(), total);
        for t in [
            Tile::whole(70, 37),
            Tile {
                x: 0,
                y: 0,
                w: 11,
                h: 7,
            },
            Tile {
                x: 9,
                y: 3,
                w: 40,
                h: 20,
            },
            Tile {
                x: 60,
                y: 30,
                w: 10,
                h: 7,
            },
            Tile {
                x: 13,
                y: 7,
                w: 1,
                h: 1,
            },
        ] {
            let pixels: Vec<(u32, u32)> = (t.y..t.y + t.h)
                .flat_map(|y| (t.x..t.x + t.w).map(move |x| (x, y)))
                .collect();
            let active: Vec<&(u32, u32)> = pixels.iter().filter(|&&(x, y)| brute(x, y)).collect();
            assert_eq!(mask.active_pixels_in(t), active.len() as u64, "{t:?}");
            let skip: Vec<bool> = pixels.iter().map(|&(x, y)| !brute(x, y)).collect();
            match mask.skip_in(t) {
                Some(s) => assert_eq!(s, skip, "{t:?}"),
                None => assert!(skip.iter().all(|&k| !k), "{t:?}"),
            }
            let bounds = active
                .iter()
                .fold(None, |b: Option<(u32, u32, u32, u32)>, &&(x, y)| {
                    Some(match b {
                        None => (x, y, x + 1, y + 1),
                        Some((x0, y0, x1, y1)) => {
                            (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1))
                        }
                    })
                });
            assert_eq!(
                mask.active_bounds(t),
                bounds.map(|(x0, y0, x1, y1)| Tile {
                    x: x0,
                    y: y0,
                    w: x1 - x0,
                    h: y1 - y0
                }),
                "{t:?}"
            );
        }
    }

    #[test]
    fn luminance_is_shown_as_the_pngs_grey_pixel() {
        let plain = PngTone::default();
        for y in [0.0, 0.001, 0.18, 0.5, 1.0] {
            let png = crate::render::output::to_srgb8([y as f32; 3])[0];
            assert!(
                (displayed(y, &plain) * 255.0 - f64::from(png)).abs() <= 0.5,
                "{y}"
            );
        }
        // Past white nothing shows, under the clamp: a light's edge is white either way.
        assert_eq!(displayed(2.0, &plain), displayed(17.0, &plain));
        // Exposure and the curve as the PNG applies them.
        let toned = PngTone {
            exposure: 1.0,
            tonemap: crate::render::output::ToneCurve::Aces,
        };
        let png = crate::render::output::to_srgb8_toned(
            [0.3; 3],
            2.0,
            crate::render::output::ToneCurve::Aces,
        )[0];
        assert!((displayed(0.3, &toned) * 255.0 - f64::from(png)).abs() <= 0.5);
        assert!(displayed(17.0, &toned) > displayed(2.0, &toned));
    }

    #[test]
    fn blocks_lie_on_the_frames_grid() {
        let g = BlockGrid::new(Tile::whole(40, 20));
        assert_eq!((g.cols, g.rows), (3, 2));
        assert_eq!(g.block_of(0, 0), 0);
        assert_eq!(g.block_of(39, 19), 5);
        assert_eq!(
            g.block_tile(5),
            Tile {
                x: 32,
                y: 16,
                w: 8,
                h: 4
            }
        );
        // A crop from (16, 32): its pixel (0, 0) is the frame's block (1, 2).
        let crop = BlockGrid::new(Tile {
            x: 16,
            y: 32,
            w: 20,
            h: 16,
        });
        assert_eq!((crop.cols, crop.rows), (2, 1));
        assert_eq!(
            crop.block_tile(1),
            Tile {
                x: 16,
                y: 0,
                w: 4,
                h: 16
            }
        );
        // Every pixel of a window lies in exactly the block whose tile holds it.
        for w in [
            Tile::whole(37, 23),
            Tile {
                x: 5,
                y: 7,
                w: 30,
                h: 19,
            },
        ] {
            let g = BlockGrid::new(w);
            let mut seen = vec![0; (w.w * w.h) as usize];
            for b in 0..g.len() {
                let t = g.block_tile(b);
                for y in t.y..t.y + t.h {
                    for x in t.x..t.x + t.w {
                        assert_eq!(g.block_of(x, y), b);
                        seen[(y * w.w + x) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{w:?}");
        }
    }

    /// A 32x16 film (two blocks) after `done` passes of 4 samples: the left block's pixels
    /// have even and odd passes that agree to `left` in luminance, the right's to `right`.
    fn film_after(done: usize, left: f32, right: f32) -> Film {
        let mut film = Film::with_odd_plane(32, 16);
        for pass in 0..done {
            let buf: Vec<[f32; 4]> = film
                .pixels
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let spread = if i % 32 < 16 { left } else { right };
                    // Per sample, grey 0.5 +/- spread, alternating by pass.
                    let v = 0.5 + if pass % 2 == 0 { spread } else { -spread };
                    [p[0] + 4.0 * v, p[1] + 4.0 * v, p[2] + 4.0 * v, p[3] + 4.0]
                })
                .collect();
            film.write_pass_tile(Tile::whole(32, 16), &buf, pass);
        }
        film
    }

    #[test]
    fn a_block_whose_passes_agree_stops_and_a_noisy_one_goes_on() {
        let plan = passes(4, 64);
        let adaptive = one_percent();
        let window = Tile::whole(32, 16);
        // Before two passes nothing is judged.
        let early = BlockMask::judge(&film_after(1, 0.0, 0.2), window, &plan, 1, &adaptive);
        assert!(early.all());
        assert_eq!(early.noise, vec![None, None]);
        let film = film_after(2, 0.001, 0.2);
        let mask = BlockMask::judge(&film, window, &plan, 2, &adaptive);
        assert_eq!(mask.active, vec![false, true]);
        // The estimate by hand: means 0.501 and 0.499 over 4 samples each, shown apart by
        // D(0.501) - D(0.499); var = that squared / 4.
        let plain = PngTone::default();
        let expected = (displayed(0.501, &plain) - displayed(0.499, &plain)) / 2.0;
        let left = mask.noise[0].expect("judged");
        assert!(
            (left - expected).abs() < 1e-3 * expected,
            "{left} {expected}"
        );
        assert!(mask.noise[1].expect("judged") > 0.1);
        // min_spp holds every block back until it is reached.
        let held = AdaptiveSampling {
            min_spp: 9,
            ..adaptive
        };
        assert!(BlockMask::judge(&film, window, &plan, 2, &held).all());
        assert!(!held.decides_before(&plan, 2));
        assert!(held.decides_before(&plan, 3));
    }

    #[test]
    fn a_block_that_stopped_stays_stopped_and_one_a_stop_reached_goes_on() {
        let plan = passes(4, 64);
        let adaptive = one_percent();
        let window = Tile::whole(32, 16);
        let mut film = film_after(3, 0.001, 0.2);
        // The left block stopped after pass 2 (8 samples): it holds fewer than the boundary.
        for (i, p) in film.pixels.iter_mut().enumerate() {
            if i % 32 < 16 {
                *p = [4.0, 4.0, 4.0, 8.0];
            }
        }
        let mask = BlockMask::judge(&film, window, &plan, 3, &adaptive);
        assert_eq!(mask.active, vec![false, true]);
        assert_eq!(mask.noise[0], None);
        // One pixel of the right block has pass 3 already (a stop inside it): it goes on,
        // whatever its noise says, as it did when the stopped run judged it.
        let mut quiet = film_after(3, 0.0, 0.0);
        quiet.pixels[16] = [9.0, 9.0, 9.0, 16.0];
        let mask = BlockMask::judge(&quiet, window, &plan, 3, &adaptive);
        assert_eq!(mask.active, vec![false, true]);
        assert!(mask.is_active(31, 15));
        assert!(!mask.is_active(15, 0));
    }

    #[test]
    fn settings_need_a_threshold_and_three_passes() {
        let a = one_percent();
        assert_eq!(a.validate(&passes(16, 64), 64), Ok(()));
        for t in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let bad = AdaptiveSampling { threshold: t, ..a };
            assert!(matches!(
                bad.validate(&passes(16, 64), 64),
                Err(AdaptiveError::Threshold(_))
            ));
        }
        let e = a.validate(&passes(32, 64), 64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--noise-threshold decides between passes, and --spp 64 in passes of 32 gives 2: it needs at least 3 (give --pass-spp at most 21, or leave it out to get passes of --spp/16)"
        );
        assert_eq!(
            a.validate(&passes(1, 2), 2).unwrap_err().to_string(),
            "--noise-threshold decides between passes, and --spp 2 is fewer than three: give --spp 3 or more"
        );
        let e = AdaptiveSampling { min_spp: 65, ..a }
            .validate(&passes(16, 64), 64)
            .unwrap_err();
        assert!(e.to_string().contains("--min-spp 65"), "{e}");
        assert_eq!(a.key_item(16), "noise-threshold 0.01 min-spp 0 pass-spp 16");
        let toned = AdaptiveSampling {
            tone: PngTone {
                exposure: -1.5,
                tonemap: crate::render::output::ToneCurve::Aces,
            },
            ..a
        };
        assert_eq!(
            toned.key_item(16),
            "noise-threshold 0.01 min-spp 0 pass-spp 16 shown exposure -1.5 aces"
        );
    }

    #[test]
    fn a_film_is_described_by_its_samples_and_stopped_blocks() {
        let mut film = Film::new(32, 16);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            p[3] = if i % 32 < 16 { 8.0 } else { 64.0 };
        }
        assert_eq!(
            describe_film(&film, Tile::whole(32, 16), 64),
            "36.0 samples per pixel on average (8 to 64 of 64), 1 of 2 blocks stopped below the noise threshold"
        );
    }
    /// The judgement from the tallies of a film's pixels split among ranks in any pattern,
    /// merged in any order, is the one of the whole film, bit for bit: noise, and decision.
    #[test]
    fn tallies_of_any_split_merge_into_the_whole_films_judgement() {
        let plan = passes(4, 64);
        let adaptive = one_percent();
        let (w, h) = (37u32, 21u32);
        let window = Tile::whole(w, h);
        let mut film = Film::with_odd_plane(w, h);
        let mut state = 0x2545_f491u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for pass in 0..3 {
            let buf: Vec<[f32; 4]> = film
                .pixels
                .iter()
                .map(|p| {
                    let v = (next() % 1000) as f32 / 250.0;
                    [p[0] + v, p[1] + 0.5 * v, p[2], p[3] + 4.0]
                })
                .collect();
            film.write_pass_tile(window, &buf, pass);
        }
        let whole = BlockMask::judge(&film, window, &plan, 3, &adaptive);
        assert!(whole.noise.iter().all(Option::is_some), "judged");
        let j = Judging::new(&plan, 3, &adaptive, true).unwrap();
        let grid = BlockGrid::new(window);
        for ranks in [2u32, 3, 7] {
            let owner: Vec<u32> = (0..film.pixels.len()).map(|_| next() % ranks).collect();
            let mut tallies = vec![BlockTally::default(); grid.len()];
            for r in (0..ranks).rev() {
                for (b, t) in j.tally(&film, grid, |i| owner[i] == r) {
                    tallies[b as usize].merge(&t);
                }
            }
            let split = BlockMask::of_tallies(window, &j, &tallies);
            let bits = |m: &BlockMask| -> Vec<Option<u64>> {
                m.noise.iter().map(|n| n.map(f64::to_bits)).collect()
            };
            assert_eq!(bits(&split), bits(&whole), "{ranks} ranks");
            assert_eq!(split.active, whole.active, "{ranks} ranks");
        }
    }
}
