//! Summed-area tables (Crow 1984): the cost of any rectangle of a cost map in four lookups.
//!
//! The table is kept in `f64` so that differences of large prefix sums stay exact enough
//! (a 1024 x 1024 map of costs around 1 sums to about 10^6; `f32` would lose the low digits
//! that small tiles are made of).
//!
//! Tiles live in image pixels while the cost map has its own, coarser, resolution. A tile
//! therefore covers cost-map cells fractionally; [`Sat::sum_frac`] integrates the map as a
//! piecewise-constant function over any real rectangle, which is exactly a bilinear
//! interpolation of the table between its integer corners.

/// A summed-area table of a `width` x `height` map.
#[derive(Clone, Debug, PartialEq)]
pub struct Sat {
    width: usize,
    height: usize,
    /// `(width + 1) * (height + 1)` prefix sums, row-major; row 0 and column 0 are zero, and
    /// entry `(x, y)` is the sum of the cells `[0, x) x [0, y)`.
    table: Vec<f64>,
}

impl Sat {
    /// Builds the table of a row-major map. `values.len()` must be `width * height`.
    pub fn new(width: usize, height: usize, values: &[f32]) -> Sat {
        assert_eq!(values.len(), width * height, "map size");
        let stride = width + 1;
        let mut table = vec![0.0f64; stride * (height + 1)];
        for y in 0..height {
            let mut row_sum = 0.0f64;
            for x in 0..width {
                row_sum += values[y * width + x] as f64;
                table[(y + 1) * stride + x + 1] = table[y * stride + x + 1] + row_sum;
            }
        }
        Sat {
            width,
            height,
            table,
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// The sum of the whole map.
    pub fn total(&self) -> f64 {
        self.table[self.table.len() - 1]
    }

    #[inline]
    fn at(&self, x: usize, y: usize) -> f64 {
        self.table[y * (self.width + 1) + x]
    }

    /// The sum of the cells `[x0, x1) x [y0, y1)` (clamped to the map; empty when reversed).
    pub fn sum(&self, x0: usize, y0: usize, x1: usize, y1: usize) -> f64 {
        let (x1, y1) = (x1.min(self.width), y1.min(self.height));
        if x0 >= x1 || y0 >= y1 {
            return 0.0;
        }
        self.at(x1, y1) - self.at(x0, y1) - self.at(x1, y0) + self.at(x0, y0)
    }

    /// The prefix integral over `[0, x] x [0, y]` for real `x`, `y` in cell units, treating
    /// each cell as constant: bilinear between the four surrounding table entries.
    fn integral(&self, x: f64, y: f64) -> f64 {
        let x = x.clamp(0.0, self.width as f64);
        let y = y.clamp(0.0, self.height as f64);
        let (xi, yi) = (
            (x.floor() as usize).min(self.width),
            (y.floor() as usize).min(self.height),
        );
        let (fx, fy) = (x - xi as f64, y - yi as f64);
        let (xj, yj) = ((xi + 1).min(self.width), (yi + 1).min(self.height));
        let top = self.at(xi, yi) * (1.0 - fx) + self.at(xj, yi) * fx;
        let bottom = self.at(xi, yj) * (1.0 - fx) + self.at(xj, yj) * fx;
        top * (1.0 - fy) + bottom * fy
    }

    /// The integral of the map over the real rectangle `[x0, x1) x [y0, y1)` in cell units:
    /// cells cut by the rectangle count by the fraction of their area inside it.
    pub fn sum_frac(&self, x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
        if x0 >= x1 || y0 >= y1 {
            return 0.0;
        }
        self.integral(x1, y1) - self.integral(x0, y1) - self.integral(x1, y0)
            + self.integral(x0, y0)
    }
}

/// How image pixels map onto the cells of a cost map of another resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MapScale {
    /// Cost-map cells per image pixel, horizontally.
    pub sx: f64,
    /// Cost-map cells per image pixel, vertically.
    pub sy: f64,
}

impl MapScale {
    /// The scale between an image and a map that covers the same field of view.
    pub fn between(image: (u32, u32), map: (usize, usize)) -> MapScale {
        MapScale {
            sx: map.0 as f64 / image.0.max(1) as f64,
            sy: map.1 as f64 / image.1.max(1) as f64,
        }
    }

    /// The cost of an image rectangle (in pixels) from the map's table.
    pub fn rect_cost(&self, sat: &Sat, x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
        sat.sum_frac(x0 * self.sx, y0 * self.sy, x1 * self.sx, y1 * self.sy)
    }

    /// The cost of a tile (in image pixels) from the map's table.
    pub fn tile_cost(&self, sat: &Sat, t: crate::render::Tile) -> f64 {
        self.rect_cost(
            sat,
            t.x as f64,
            t.y as f64,
            (t.x + t.w) as f64,
            (t.y + t.h) as f64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_and_fractional_sums() {
        // 3 x 2 map:  1 2 3
        //             4 5 6
        let s = Sat::new(3, 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(s.total(), 21.0);
        assert_eq!(s.sum(1, 0, 3, 2), 2.0 + 3.0 + 5.0 + 6.0);
        assert_eq!(s.sum(0, 1, 1, 2), 4.0);
        assert_eq!(s.sum(2, 0, 1, 2), 0.0);
        // Half of cell (1, 0) and half of cell (1, 1).
        assert!((s.sum_frac(1.0, 0.0, 1.5, 2.0) - 3.5).abs() < 1e-12);
        // A quarter of each of the four cells around (1, 1)... only two rows exist.
        let q = s.sum_frac(0.5, 0.5, 1.5, 1.5);
        assert!((q - 0.25 * (1.0 + 2.0 + 4.0 + 5.0)).abs() < 1e-12);
        assert!((s.sum_frac(0.0, 0.0, 3.0, 2.0) - 21.0).abs() < 1e-12);
    }

    #[test]
    fn image_tiles_map_to_fractional_cells() {
        // A 2 x 2 map of an 8 x 8 image: each cell covers 4 x 4 pixels.
        let s = Sat::new(2, 2, &[16.0, 0.0, 0.0, 0.0]);
        let m = MapScale::between((8, 8), (2, 2));
        let t = crate::render::Tile {
            x: 2,
            y: 2,
            w: 4,
            h: 4,
        };
        // The tile covers a quarter of the only non-zero cell.
        assert!((m.tile_cost(&s, t) - 4.0).abs() < 1e-12);
    }
}
