//! The accumulation film: per-pixel radiance sums and sample counts.

use super::Tile;

/// Radiance sums `[r, g, b, n]` per pixel, row-major, top row first.
#[derive(Clone, Debug, PartialEq)]
pub struct Film {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<[f32; 4]>,
}

impl Film {
    pub fn new(width: u32, height: u32) -> Film {
        Film {
            width,
            height,
            pixels: vec![[0.0; 4]; width as usize * height as usize],
        }
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
}
