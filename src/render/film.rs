//! The accumulation film: per-pixel radiance sums and sample counts.

use super::Tile;

/// Radiance sums `[r, g, b, n]` per pixel, row-major, top row first.
#[derive(Clone, Debug, PartialEq)]
pub struct Film {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<[f32; 4]>,
    /// Adaptive sampling's second estimate (`--noise-threshold`, [`crate::sched::adaptive_sampling`]):
    /// per pixel, the luminance summed over the samples of the odd passes only (the second,
    /// the fourth...), so that the mean of the even passes and the mean of the odd ones are
    /// two independent estimates of the pixel whose difference measures its noise. Empty in a
    /// film that does not track it (every render without a noise threshold).
    pub odd_luma: Vec<f32>,
}

impl Film {
    pub fn new(width: u32, height: u32) -> Film {
        Film {
            width,
            height,
            pixels: vec![[0.0; 4]; width as usize * height as usize],
            odd_luma: Vec::new(),
        }
    }

    /// A film that tracks the odd passes' luminance ([`Film::odd_luma`]) too.
    pub fn with_odd_plane(width: u32, height: u32) -> Film {
        let mut film = Film::new(width, height);
        film.odd_luma = vec![0.0; film.pixels.len()];
        film
    }

    /// Whether the film tracks the odd passes' luminance.
    pub fn has_odd_plane(&self) -> bool {
        !self.odd_luma.is_empty()
    }

    /// Copies a tile's accumulation out of the film (so a worker can add to it privately).
    pub fn read_tile(&self, tile: Tile) -> Vec<[f32; 4]> {
        let mut out = Vec::with_capacity(tile.pixel_count());
        for y in tile.y..tile.y + tile.h {
            let row = (y * self.width + tile.x) as usize;
            out.extend_from_slice(&self.pixels[row..row + tile.w as usize]);
        }
        out
    }

    /// Writes a tile's accumulation back into the film.
    pub fn write_tile(&mut self, tile: Tile, data: &[[f32; 4]]) {
        assert_eq!(data.len(), tile.pixel_count(), "tile buffer size");
        for (j, y) in (tile.y..tile.y + tile.h).enumerate() {
            let row = (y * self.width + tile.x) as usize;
            let src = &data[j * tile.w as usize..(j + 1) * tile.w as usize];
            self.pixels[row..row + tile.w as usize].copy_from_slice(src);
        }
    }

    /// Writes back a tile's accumulation after pass `pass` (numbered from 0) added its samples
    /// to what [`Film::read_tile`] gave: in a film with an odd plane, an odd pass's share of
    /// each pixel (the luminance of what it added) goes there too. Every pixel's additions
    /// are the same whoever rendered it, so the plane is as schedule-independent as the sums.
    pub fn write_pass_tile(&mut self, tile: Tile, data: &[[f32; 4]], pass: usize) {
        if pass % 2 == 1 && self.has_odd_plane() {
            assert_eq!(data.len(), tile.pixel_count(), "tile buffer size");
            for (j, y) in (tile.y..tile.y + tile.h).enumerate() {
                let row = (y * self.width + tile.x) as usize;
                for i in 0..tile.w as usize {
                    let (old, new) = (self.pixels[row + i], data[j * tile.w as usize + i]);
                    self.odd_luma[row + i] += crate::colour::luminance(glam::Vec3::new(
                        new[0] - old[0],
                        new[1] - old[1],
                        new[2] - old[2],
                    ));
                }
            }
        }
        self.write_tile(tile, data);
    }

    /// The samples every pixel holds, summed (whole numbers, exact in `f64`).
    pub fn samples(&self) -> f64 {
        self.pixels.iter().map(|p| f64::from(p[3])).sum()
    }

    /// The mean radiance of every pixel (black where no sample landed).
    pub fn mean(&self) -> Vec<[f32; 3]> {
        self.pixels
            .iter()
            .map(|p| {
                if p[3] > 0.0 {
                    [p[0] / p[3], p[1] / p[3], p[2] / p[3]]
                } else {
                    [0.0; 3]
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_round_trip() {
        let mut f = Film::new(10, 7);
        let t = Tile {
            x: 3,
            y: 2,
            w: 4,
            h: 5,
        };
        let data: Vec<[f32; 4]> = (0..20).map(|i| [i as f32, 0.0, 0.0, 1.0]).collect();
        f.write_tile(t, &data);
        assert_eq!(f.read_tile(t), data);
        assert_eq!(f.pixels[(2 * 10 + 3) as usize][0], 0.0);
        assert_eq!(f.pixels[(6 * 10 + 6) as usize][0], 19.0);
        assert_eq!(f.pixels.iter().filter(|p| p[3] > 0.0).count(), 20);
    }

    #[test]
    fn odd_passes_add_their_luminance_to_the_odd_plane() {
        let t = Tile {
            x: 1,
            y: 1,
            w: 2,
            h: 1,
        };
        let mut f = Film::with_odd_plane(4, 3);
        // Pass 0 (even): the sums only.
        f.write_pass_tile(t, &[[1.0, 1.0, 1.0, 2.0], [2.0, 0.0, 0.0, 2.0]], 0);
        assert!(f.odd_luma.iter().all(|&v| v == 0.0));
        // Pass 1 (odd): what it added, as luminance.
        f.write_pass_tile(t, &[[3.0, 3.0, 3.0, 4.0], [2.0, 0.0, 1.0, 4.0]], 1);
        assert_eq!(f.odd_luma[5], 2.0 * (0.2126 + 0.7152 + 0.0722));
        assert_eq!(f.odd_luma[6], 0.0722);
        assert_eq!(f.odd_luma.iter().filter(|&&v| v != 0.0).count(), 2);
        assert_eq!(f.pixels[5], [3.0, 3.0, 3.0, 4.0]);
        assert_eq!(f.samples(), 8.0);
        // A film without the plane keeps none.
        let mut plain = Film::new(4, 3);
        plain.write_pass_tile(t, &[[1.0; 4], [1.0; 4]], 1);
        assert!(!plain.has_odd_plane());
    }
}
