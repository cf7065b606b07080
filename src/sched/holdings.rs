//! Where the film's sums live between passes. Every rank keeps the sums of the tiles it
//! rendered ([`Holdings`]); rank 0 keeps only which rank holds each pixel ([`HolderMap`]).
//! A tile's next samples are added to its pixels' sums, so before a pass each rank is sent
//! the pieces of its tiles that other ranks hold, by those ranks ([`super::protocol::Msg::Piece`]),
//! and the film is gathered once, at the end (or for a checkpoint, a stop, a rank lost:
//! [`super::protocol::Msg::Collect`]). Rank 0's bytes a pass grow with the tiles, not the
//! pixels, and each pixel's sums are added in the same order as in one process.

use super::adaptive_sampling::{BlockGrid, BlockTally, Judging};
use super::protocol::Piece;
use crate::render::{Film, Tile};

/// No rank holds the pixel: nothing has been rendered there (its sums are zeros).
pub(super) const NOBODY: u16 = u16::MAX;

/// The rectangles of `rect` (window coordinates, `width` pixels a row) on which `label` is one
/// value other than `None`, with that value: each row cut into runs, and a run that continues
/// the one above it (same columns, same value) joined to it. Pieces of whole tiles come out
/// whole.
fn rects_of<L: Copy + PartialEq>(
    rect: Tile,
    width: u32,
    label: impl Fn(usize) -> Option<L>,
) -> Vec<(Tile, L)> {
    let mut done: Vec<(Tile, L)> = Vec::new();
    // The rectangles still growing down: they end on the row above.
    let mut open: Vec<(Tile, L)> = Vec::new();
    for y in rect.y..rect.y + rect.h {
        let row = (y * width) as usize;
        let mut runs: Vec<(u32, u32, L)> = Vec::new();
        let mut x = rect.x;
        while x < rect.x + rect.w {
            let here = label(row + x as usize);
            let mut end = x + 1;
            while end < rect.x + rect.w && label(row + end as usize) == here {
                end += 1;
            }
            if let Some(l) = here {
                runs.push((x, end, l));
            }
            x = end;
        }
        let mut next = Vec::with_capacity(runs.len());
        for (x0, x1, l) in runs {
            let above = open
                .iter()
                .position(|(t, m)| t.x == x0 && t.w == x1 - x0 && *m == l);
            match above {
                Some(i) => {
                    let (mut t, m) = open.swap_remove(i);
                    t.h += 1;
                    next.push((t, m));
                }
                None => next.push((
                    Tile {
                        x: x0,
                        y,
                        w: x1 - x0,
                        h: 1,
                    },
                    l,
                )),
            }
        }
        done.append(&mut open);
        open = next;
    }
    done.append(&mut open);
    done
}

/// Rank 0's record of which rank holds each pixel's sums: the rank that rendered the last
/// tile over it (or rank 0, for a resumed film).
#[derive(Clone, Debug)]
pub(super) struct HolderMap {
    width: u32,
    pub(super) who: Vec<u16>,
}

impl HolderMap {
    /// A film of `width` x `height` pixels all held by `rank` ([`NOBODY`]: a new frame).
    pub(super) fn new(width: u32, height: u32, rank: u16) -> HolderMap {
        HolderMap {
            width,
            who: vec![rank; width as usize * height as usize],
        }
    }

    /// `rank` rendered `tile`: it holds its pixels now.
    pub(super) fn set(&mut self, tile: Tile, rank: u16) {
        for y in tile.y..tile.y + tile.h {
            let row = (y * self.width + tile.x) as usize;
            self.who[row..row + tile.w as usize].fill(rank);
        }
    }

    /// How many pixels are held by a rank for which `which` is true.
    pub(super) fn count(&self, which: impl Fn(u16) -> bool) -> usize {
        self.who
            .iter()
            .filter(|&&r| r != NOBODY && which(r))
            .count()
    }

    /// The pieces of `tile` held by some rank, with the rank.
    pub(super) fn pieces(&self, tile: Tile) -> Vec<(Tile, u16)> {
        rects_of(tile, self.width, |i| {
            Some(self.who[i]).filter(|&r| r != NOBODY)
        })
    }
}

/// An empty film of `window`'s size, with the odd-pass plane where adaptive sampling needs
/// it: a new frame's, and what each rank starts from.
pub(super) fn empty_film(window: Tile, adaptive: bool) -> Film {
    match adaptive {
        true => Film::with_odd_plane(window.w, window.h),
        false => Film::new(window.w, window.h),
    }
}

/// One rank's sums: its film, whose pixels it holds (`held`, as of the current pass's start),
/// and what the pass has changed since: the tiles it rendered, and the pieces and tiles it
/// passed on to other ranks. Pixels it does not hold may carry stale or staged sums (pieces
/// received for its tiles); only those it holds or rendered leave it.
pub(super) struct Holdings {
    film: Film,
    held: Vec<bool>,
    /// Tiles rendered in the current pass.
    fresh: Vec<Tile>,
    /// Pieces and tiles given to other ranks in the current pass: at its end, they hold them.
    given: Vec<Tile>,
}

impl Holdings {
    /// A rank's holdings at the frame's start: `film` (empty, or rank 0's resumed one), held
    /// wherever `holds_all` says.
    pub(super) fn new(film: Film, holds_all: bool) -> Holdings {
        let n = film.pixels.len();
        Holdings {
            film,
            held: vec![holds_all; n],
            fresh: Vec::new(),
            given: Vec::new(),
        }
    }

    /// The film (in one process, the whole frame as it stands).
    pub(super) fn film(&self) -> &Film {
        &self.film
    }

    /// The film, taken (one process, at the end of the frame).
    pub(super) fn take_film(&mut self) -> Film {
        std::mem::replace(&mut self.film, Film::new(0, 0))
    }

    /// `rect`'s sums (and odd-plane values) as a piece.
    pub(super) fn piece(&self, rect: Tile) -> Piece {
        Piece {
            rect,
            sums: self.film.read_tile(rect),
            odd: self.read_odd(rect),
        }
    }

    fn read_odd(&self, rect: Tile) -> Vec<f32> {
        if !self.film.has_odd_plane() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(rect.pixel_count());
        for y in rect.y..rect.y + rect.h {
            let row = (y * self.film.width + rect.x) as usize;
            out.extend_from_slice(&self.film.odd_luma[row..row + rect.w as usize]);
        }
        out
    }

    /// Whether `piece` fits this film: inside it, with a sum per pixel and an odd-plane value
    /// per pixel exactly when the film has that plane.
    pub(super) fn fits(&self, piece: &Piece) -> bool {
        let n = piece.rect.pixel_count();
        self.contains(piece.rect)
            && piece.sums.len() == n
            && piece.odd.len() == if self.film.has_odd_plane() { n } else { 0 }
    }

    /// Whether `rect` lies inside the film.
    pub(super) fn contains(&self, rect: Tile) -> bool {
        rect.x
            .checked_add(rect.w)
            .is_some_and(|x| x <= self.film.width)
            && rect
                .y
                .checked_add(rect.h)
                .is_some_and(|y| y <= self.film.height)
    }

    /// Writes `piece` into the film (sums another rank held, for a tile of this rank's), not
    /// held: [`Holdings::fits`] checked first.
    pub(super) fn stage(&mut self, piece: &Piece) {
        self.film.write_tile(piece.rect, &piece.sums);
        if self.film.has_odd_plane() {
            let r = piece.rect;
            for (j, y) in (r.y..r.y + r.h).enumerate() {
                let row = (y * self.film.width + r.x) as usize;
                let src = &piece.odd[j * r.w as usize..(j + 1) * r.w as usize];
                self.film.odd_luma[row..row + r.w as usize].copy_from_slice(src);
            }
        }
    }

    /// This rank rendered `tile` in `pass` from the sums its film holds there: its new sums.
    pub(super) fn rendered(&mut self, tile: Tile, sums: &[[f32; 4]], pass: u32) {
        self.film.write_pass_tile(tile, sums, pass as usize);
        self.fresh.push(tile);
    }

    /// `rect` went to another rank (a piece for its tile, or a tile it stole), which holds it
    /// once the pass ends.
    pub(super) fn gave(&mut self, rect: Tile) {
        self.given.push(rect);
    }

    /// The pass is over on every rank: what this rank gave away is held elsewhere, what it
    /// rendered is held here.
    pub(super) fn end_pass(&mut self) {
        for rect in std::mem::take(&mut self.given) {
            self.mark(rect, false);
        }
        for tile in std::mem::take(&mut self.fresh) {
            self.mark(tile, true);
        }
    }

    fn mark(&mut self, rect: Tile, held: bool) {
        for y in rect.y..rect.y + rect.h {
            let row = (y * self.film.width + rect.x) as usize;
            self.held[row..row + rect.w as usize].fill(held);
        }
    }

    /// What this rank holds, for rank 0 to gather: the pieces held since the pass's start,
    /// then the tiles rendered in it (newer: they go in last).
    pub(super) fn collect(&self) -> (Vec<Piece>, Vec<Piece>) {
        let window = Tile {
            x: 0,
            y: 0,
            w: self.film.width,
            h: self.film.height,
        };
        let held = rects_of(window, self.film.width, |i| self.held[i].then_some(()))
            .into_iter()
            .map(|(rect, ())| self.piece(rect))
            .collect();
        let fresh = self.fresh.iter().map(|&t| self.piece(t)).collect();
        (held, fresh)
    }

    /// The adaptive-sampling tallies of the blocks of `grid` over the pixels this rank holds
    /// (at a pass's end, after [`Holdings::end_pass`]).
    pub(super) fn tally(&self, judging: &Judging, grid: BlockGrid) -> Vec<(u32, BlockTally)> {
        judging.tally(&self.film, grid, |i| self.held[i])
    }
}

/// Writes the ranks' collected pieces into `film`: every rank's held pieces first, then the
/// tiles rendered in the current pass, which are newer.
pub(super) fn assemble(film: &mut Film, replies: &[(Vec<Piece>, Vec<Piece>)]) {
    let mut into = Holdings {
        film: std::mem::replace(film, Film::new(0, 0)),
        held: Vec::new(),
        fresh: Vec::new(),
        given: Vec::new(),
    };
    for (held, _) in replies {
        held.iter().for_each(|p| into.stage(p));
    }
    for (_, fresh) in replies {
        fresh.iter().for_each(|p| into.stage(p));
    }
    *film = into.film;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(x: u32, y: u32, w: u32, h: u32) -> Tile {
        Tile { x, y, w, h }
    }

    #[test]
    fn pieces_are_the_rectangles_of_the_tiles_that_rendered_them() {
        let mut map = HolderMap::new(8, 6, NOBODY);
        map.set(t(0, 0, 4, 6), 1);
        map.set(t(4, 0, 4, 3), 2);
        map.set(t(4, 3, 4, 3), 0);
        let mut got = map.pieces(t(2, 1, 4, 4));
        got.sort_by_key(|(r, _)| (r.y, r.x));
        assert_eq!(
            got,
            vec![(t(2, 1, 2, 4), 1), (t(4, 1, 2, 2), 2), (t(4, 3, 2, 2), 0)]
        );
        // Nobody's pixels (never rendered) are no piece.
        let fresh = HolderMap::new(8, 6, NOBODY);
        assert!(fresh.pieces(t(0, 0, 8, 6)).is_empty());
    }

    /// Pieces cover exactly the held pixels of a rectangle, each once, whatever the pattern.
    #[test]
    fn pieces_partition_what_is_held() {
        let (w, h) = (23u32, 17u32);
        let mut map = HolderMap::new(w, h, NOBODY);
        let mut state = 0x9e37_79b9u32;
        let mut next = |m: u32| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state % m
        };
        for _ in 0..40 {
            let (x, y) = (next(w), next(h));
            let tile = t(x, y, 1 + next(w - x), 1 + next(h - y));
            let rank = next(4) as u16;
            map.set(tile, if rank == 3 { NOBODY } else { rank });
        }
        let rect = t(3, 2, 15, 12);
        let mut seen = vec![None; (w * h) as usize];
        for (r, rank) in map.pieces(rect) {
            for y in r.y..r.y + r.h {
                for x in r.x..r.x + r.w {
                    let i = (y * w + x) as usize;
                    assert!(seen[i].is_none(), "pixel ({x}, {y}) in two pieces");
                    seen[i] = Some(rank);
                }
            }
        }
        for y in 0..h {
            for x in 0..w {
                let i = (y * w + x) as usize;
                let inside = (3..18).contains(&x) && (2..14).contains(&y);
                let want = (inside && map.who[i] != NOBODY).then_some(map.who[i]);
                assert_eq!(seen[i], want, "pixel ({x}, {y})");
            }
        }
    }

    /// Two ranks that pass a piece between them and each render a tile: gathered, the film is
    /// the one the same tiles rendered in one film give.
    #[test]
    fn a_gathered_film_is_the_one_film_of_the_same_tiles() {
        let (a, b) = (t(0, 0, 4, 2), t(4, 0, 4, 2));
        let sums = |v: f32| vec![[v, v, v, 1.0]; 8];
        let mut one = Film::with_odd_plane(8, 2);
        one.write_pass_tile(a, &sums(1.0), 0);
        one.write_pass_tile(b, &sums(2.0), 0);
        let mut r0 = Holdings::new(Film::with_odd_plane(8, 2), false);
        let mut r1 = Holdings::new(Film::with_odd_plane(8, 2), false);
        r0.rendered(a, &sums(1.0), 0);
        r1.rendered(b, &sums(2.0), 0);
        r0.end_pass();
        r1.end_pass();
        // Pass 1: one tile over both halves, rendered by rank 1 with rank 0's piece.
        let whole = t(0, 0, 8, 2);
        let piece = r0.piece(a);
        assert!(r1.fits(&piece));
        r1.stage(&piece);
        r0.gave(a);
        let mut next = r1.film().read_tile(whole);
        next.iter_mut()
            .for_each(|p| *p = [p[0] + 0.5, p[1], p[2], p[3] + 1.0]);
        one.write_pass_tile(whole, &next, 1);
        r1.rendered(whole, &next, 1);
        // Mid-pass, the newer tile wins over the older piece.
        let mut mid = Film::with_odd_plane(8, 2);
        assemble(&mut mid, &[r0.collect(), r1.collect()]);
        assert_eq!(mid, one);
        r0.end_pass();
        r1.end_pass();
        assert!(r0.collect().0.is_empty());
        let mut end = Film::with_odd_plane(8, 2);
        assemble(&mut end, &[r0.collect(), r1.collect()]);
        assert_eq!(end, one);
    }
}
