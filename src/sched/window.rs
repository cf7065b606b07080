//! Rendering part of the image: the window of `--pixelbounds` (pbrt's flag), for render farms
//! that split one frame into jobs.
//!
//! The scheduler works in the window's own coordinates: the film, the cost map (rasterized
//! over the window only, [`super::raster::rasterize_window`]), the tile layouts and the
//! statistics are the window's, as if it were a small image. Only the renderers see the
//! whole image: [`Shifted`] moves every tile by the window's offset before handing it on, so
//! a pixel gets the same camera ray and the same (pixel, sample, spp, seed) random numbers as in a
//! full render, and crops joined together are bit-identical to the full image.

use std::ops::Range;
use std::sync::Arc;

use crate::render::{Tile, TileRenderer};

/// Why a window cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    #[error("--pixelbounds {0}: the window is empty (x0 < x1 and y0 < y1 are needed)")]
    Empty(String),
    #[error("--pixelbounds {bounds}: the window reaches past the {width}x{height} image (x1 <= {width} and y1 <= {height} are needed)")]
    OutsideImage {
        bounds: String,
        width: u32,
        height: u32,
    },
}

/// pbrt's notation of a window: `x0,x1,y0,y1`, half-open pixel ranges `[x0, x1) x [y0, y1)`.
pub fn pbrt_bounds(t: Tile) -> String {
    format!(
        "{},{},{},{}",
        t.x,
        t.x as u64 + t.w as u64,
        t.y,
        t.y as u64 + t.h as u64
    )
}

/// The window to render in a `width` x `height` image: `window`, checked, or the whole image.
pub fn resolve(window: Option<Tile>, width: u32, height: u32) -> Result<Tile, WindowError> {
    let Some(t) = window else {
        return Ok(Tile {
            x: 0,
            y: 0,
            w: width,
            h: height,
        });
    };
    if t.w == 0 || t.h == 0 {
        return Err(WindowError::Empty(pbrt_bounds(t)));
    }
    if t.x as u64 + t.w as u64 > width as u64 || t.y as u64 + t.h as u64 > height as u64 {
        return Err(WindowError::OutsideImage {
            bounds: pbrt_bounds(t),
            width,
            height,
        });
    }
    Ok(t)
}

/// A renderer of the whole image seen through a window: tiles in window coordinates are moved
/// by the window's offset.
pub struct Shifted {
    pub inner: Arc<dyn TileRenderer>,
    pub dx: u32,
    pub dy: u32,
}

impl Shifted {
    /// `renderer` shifted to `window`'s origin; `renderer` itself when the origin is 0,0.
    pub fn wrap(renderer: Arc<dyn TileRenderer>, window: Tile) -> Arc<dyn TileRenderer> {
        if window.x == 0 && window.y == 0 {
            return renderer;
        }
        Arc::new(Shifted {
            inner: renderer,
            dx: window.x,
            dy: window.y,
        })
    }
}

// Every method is passed on: a method left to its default here would hide the inner
// renderer's answer from every windowed render (a GPU's `min_tile_work` left out gives its
// GPU workers CPU-sized tiles and calibrates them on a CPU's piece).
impl TileRenderer for Shifted {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn hardware(&self) -> String {
        self.inner.hardware()
    }

    fn min_tile_work(&self) -> Option<u64> {
        self.inner.min_tile_work()
    }

    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        let moved = Tile {
            x: tile.x + self.dx,
            y: tile.y + self.dy,
            ..tile
        };
        self.inner.render_tile(moved, samples, accum)
    }

    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        let moved = Tile {
            x: tile.x + self.dx,
            y: tile.y + self.dy,
            ..tile
        };
        self.inner.render_tile_skipping(moved, samples, accum, skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn windows_are_checked_against_the_image() {
        let t = |x, y, w, h| Tile { x, y, w, h };
        assert_eq!(resolve(None, 8, 4), Ok(t(0, 0, 8, 4)));
        assert_eq!(resolve(Some(t(2, 1, 6, 3)), 8, 4), Ok(t(2, 1, 6, 3)));
        assert!(matches!(
            resolve(Some(t(2, 1, 0, 3)), 8, 4),
            Err(WindowError::Empty(_))
        ));
        let e = resolve(Some(t(2, 1, 7, 3)), 8, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--pixelbounds 2,9,1,4: the window reaches past the 8x4 image (x1 <= 8 and y1 <= 4 are needed)"
        );
        assert!(resolve(Some(t(u32::MAX, 0, 2, 1)), 8, 4).is_err());
    }

    struct Recorder(Mutex<Vec<Tile>>);
    impl TileRenderer for Recorder {
        fn name(&self) -> String {
            "rec".into()
        }
        fn hardware(&self) -> String {
            "gpu: a recorder".into()
        }
        fn min_tile_work(&self) -> Option<u64> {
            Some(123_456)
        }
        fn render_tile(&self, t: Tile, _: Range<u32>, _: &mut [[f32; 4]]) -> anyhow::Result<()> {
            self.0.lock().unwrap().push(t);
            Ok(())
        }
    }

    #[test]
    fn shifted_tiles_land_in_the_whole_image() {
        let rec = Arc::new(Recorder(Mutex::new(Vec::new())));
        let window = Tile {
            x: 5,
            y: 7,
            w: 10,
            h: 10,
        };
        let r = Shifted::wrap(rec.clone(), window);
        let mut buf = vec![[0.0; 4]; 6];
        r.render_tile(
            Tile {
                x: 1,
                y: 2,
                w: 3,
                h: 2,
            },
            0..1,
            &mut buf,
        )
        .unwrap();
        assert_eq!(
            rec.0.lock().unwrap()[0],
            Tile {
                x: 6,
                y: 9,
                w: 3,
                h: 2
            }
        );
    }

    #[test]
    fn a_shifted_renderer_answers_as_the_one_it_wraps() {
        let rec: Arc<dyn TileRenderer> = Arc::new(Recorder(Mutex::new(Vec::new())));
        let window = Tile {
            x: 5,
            y: 0,
            w: 10,
            h: 10,
        };
        let r = Shifted::wrap(rec.clone(), window);
        assert!(!Arc::ptr_eq(&r, &rec), "a window off the origin wraps");
        assert_eq!(r.name(), "rec");
        assert_eq!(r.hardware(), "gpu: a recorder");
        assert_eq!(r.min_tile_work(), Some(123_456));
    }

    /// Writes 1 into every pixel it renders; says whether it was asked to skip.
    struct Ones(Mutex<Vec<(Tile, bool)>>);
    impl TileRenderer for Ones {
        fn name(&self) -> String {
            "ones".into()
        }
        fn render_tile(&self, t: Tile, _: Range<u32>, acc: &mut [[f32; 4]]) -> anyhow::Result<()> {
            self.0.lock().unwrap().push((t, false));
            acc.iter_mut().for_each(|p| *p = [1.0; 4]);
            Ok(())
        }
        fn render_tile_skipping(
            &self,
            t: Tile,
            _: Range<u32>,
            acc: &mut [[f32; 4]],
            skip: &[bool],
        ) -> anyhow::Result<()> {
            self.0.lock().unwrap().push((t, true));
            for (p, &k) in acc.iter_mut().zip(skip) {
                if !k {
                    *p = [1.0; 4];
                }
            }
            Ok(())
        }
    }

    /// A tile with pixels to skip reaches the wrapped renderer's own skipping call, moved into
    /// the whole image: the default would render every pixel of it (the same sums, at the
    /// whole tile's cost).
    #[test]
    fn a_shifted_renderer_passes_skipping_tiles_on() {
        let ones = Arc::new(Ones(Mutex::new(Vec::new())));
        let window = Tile {
            x: 3,
            y: 4,
            w: 8,
            h: 8,
        };
        let r = Shifted::wrap(ones.clone(), window);
        let t = Tile {
            x: 1,
            y: 1,
            w: 2,
            h: 2,
        };
        let mut acc = vec![[0.5; 4]; 4];
        r.render_tile_skipping(t, 0..1, &mut acc, &[true, false, false, true])
            .unwrap();
        assert_eq!(acc, vec![[0.5; 4], [1.0; 4], [1.0; 4], [0.5; 4]]);
        assert_eq!(
            ones.0.lock().unwrap()[0],
            (
                Tile {
                    x: 4,
                    y: 5,
                    w: 2,
                    h: 2
                },
                true
            )
        );
        // The trait's default, on a renderer that only renders whole tiles: the skipped
        // pixels keep their sums all the same; a mask of the wrong size is refused.
        struct Fill;
        impl TileRenderer for Fill {
            fn name(&self) -> String {
                "fill".into()
            }
            fn render_tile(
                &self,
                _: Tile,
                _: Range<u32>,
                acc: &mut [[f32; 4]],
            ) -> anyhow::Result<()> {
                acc.iter_mut().for_each(|p| *p = [1.0; 4]);
                Ok(())
            }
        }
        let whole = Fill;
        let mut acc = vec![[0.5; 4]; 4];
        whole
            .render_tile_skipping(t, 0..1, &mut acc, &[false, true, true, false])
            .unwrap();
        assert_eq!(acc, vec![[1.0; 4], [0.5; 4], [0.5; 4], [1.0; 4]]);
        let e = whole
            .render_tile_skipping(t, 0..1, &mut acc, &[false; 3])
            .unwrap_err();
        assert!(e.to_string().contains("skip mask has 3 entries"), "{e}");
    }
}
