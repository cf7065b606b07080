//! Image statistics for comparing renders: the mean radiance, a firefly count, and the RMS
//! difference from a reference, of the pixels and of block means.
//!
//! A *firefly* is an isolated pixel far brighter than its surroundings: a few samples that
//! carried huge weights. Counted here as a pixel whose luminance exceeds `ratio` times the
//! median luminance of the `window` x `window` square centred on it (the pixel included; the
//! square is clipped at the image border, and the median of an even count is the upper middle
//! value). Defaults: ratio 4, window 5.
//!
//! Edges of very bright things (a light source seen directly, the background against a
//! dark object) pass that test without being noise, so pixels can be masked out: a masked
//! pixel is never counted (it still counts in its neighbours' medians). [`dilate`] grows a
//! mask of "light source or background" pixels by a margin, so that their edges are masked
//! too; `gasworks image-stats --mask-scene` builds that mask from the scene's first hits.

use crate::colour::luminance;

/// What [`fireflies`] looks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FireflyCriterion {
    /// A pixel is a firefly when its luminance exceeds `ratio` times its window's median.
    pub ratio: f32,
    /// Side of the square window, in pixels (odd; an even value is taken as the next odd).
    pub window: u32,
}

impl Default for FireflyCriterion {
    fn default() -> FireflyCriterion {
        FireflyCriterion {
            ratio: 4.0,
            window: 5,
        }
    }
}

/// One firefly: where, how bright, and its window's median.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Firefly {
    pub x: u32,
    pub y: u32,
    pub luminance: f32,
    pub median: f32,
}

/// Mean radiance of an image: per channel and as luminance, summed in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanRadiance {
    pub rgb: [f64; 3],
    pub luminance: f64,
}

/// The mean of every pixel (none skipped, masked or not). Zero for an empty image.
pub fn mean_radiance(pixels: &[[f32; 3]]) -> MeanRadiance {
    let mut rgb = [0f64; 3];
    for p in pixels {
        for c in 0..3 {
            rgb[c] += f64::from(p[c]);
        }
    }
    let n = pixels.len().max(1) as f64;
    let rgb = rgb.map(|s| s / n);
    MeanRadiance {
        rgb,
        luminance: 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2],
    }
}

/// The RMS of the channel differences `b - a` over every pixel (the two images of one size,
/// differences taken in f64): how far a render is from a reference. Zero for empty images.
pub fn rms_difference(a: &[[f32; 3]], b: &[[f32; 3]]) -> f64 {
    assert_eq!(a.len(), b.len(), "images of different sizes");
    if a.is_empty() {
        return 0.0;
    }
    let squares: f64 = a
        .iter()
        .zip(b)
        .flat_map(|(p, q)| (0..3).map(move |c| f64::from(q[c]) - f64::from(p[c])))
        .map(|d| d * d)
        .sum();
    (squares / (3 * a.len()) as f64).sqrt()
}

/// The noise of `b` against a reference `a` as a PNG shows it: per square of `block` x
/// `block` pixels (of the frame's grid: `origin` is the images' first pixel in their frame,
/// so a crop's squares are its frame's; squares cut by the images' edges count their part),
/// the RMS over its pixels of the difference of their luminances after the PNG's curve at
/// `--exposure 0` (clamped to [0, 1], sRGB-encoded: white = 1). In row-major order of the
/// squares. What adaptive sampling's `--noise-threshold` aims at, block by block
/// (`sched::adaptive_sampling`, whose blocks these are with `block` 16).
pub fn display_block_errors(
    a: &[[f32; 3]],
    b: &[[f32; 3]],
    width: u32,
    height: u32,
    origin: (u32, u32),
    block: u32,
) -> Vec<f64> {
    assert_eq!(a.len(), b.len(), "images of different sizes");
    let block = block.max(1);
    let grid = |start: u32, len: u32| (start / block, (start + len.max(1) - 1) / block);
    let ((bx0, bx1), (by0, by1)) = (grid(origin.0, width), grid(origin.1, height));
    let cols = (bx1 - bx0 + 1) as usize;
    let mut sums = vec![(0.0f64, 0usize); cols * (by1 - by0 + 1) as usize];
    let display = |p: &[f32; 3]| {
        let y = luminance(glam::Vec3::from_array(*p)).clamp(0.0, 1.0);
        f64::from(crate::render::output::linear_to_srgb(y))
    };
    for y in 0..height {
        for x in 0..width {
            let i = (y * width + x) as usize;
            let cell = ((origin.1 + y) / block - by0) as usize * cols
                + ((origin.0 + x) / block - bx0) as usize;
            let d = display(&b[i]) - display(&a[i]);
            sums[cell].0 += d * d;
            sums[cell].1 += 1;
        }
    }
    sums.iter()
        .map(|&(s, n)| (s / n.max(1) as f64).sqrt())
        .collect()
}

/// The RMS of the channel differences `b - a` averaged over each whole `block` x `block`
/// square of pixels (row-major images of `width` x `height`); None without a whole square.
pub fn rms_block_difference(
    a: &[[f32; 3]],
    b: &[[f32; 3]],
    width: u32,
    height: u32,
    block: u32,
) -> Option<f64> {
    let (bw, bh, k) = (width / block, height / block, block as usize);
    if bw == 0 || bh == 0 {
        return None;
    }
    let mut squares = 0.0f64;
    for by in 0..bh as usize {
        for bx in 0..bw as usize {
            let mut sum = [0.0f64; 3];
            for y in by * k..(by + 1) * k {
                for x in bx * k..(bx + 1) * k {
                    let i = y * width as usize + x;
                    for (c, s) in sum.iter_mut().enumerate() {
                        *s += f64::from(b[i][c]) - f64::from(a[i][c]);
                    }
                }
            }
            squares += sum
                .iter()
                .map(|s| (s / (k * k) as f64).powi(2))
                .sum::<f64>();
        }
    }
    Some((squares / (3 * bw as usize * bh as usize) as f64).sqrt())
}

/// Grows `mask` (row-major `width` x `height`) by `margin` pixels in every direction (a square
/// neighbourhood): the result is set wherever a set pixel lies within `margin` in x and y.
pub fn dilate(mask: &[bool], width: u32, height: u32, margin: u32) -> Vec<bool> {
    let (w, h, m) = (width as usize, height as usize, margin as usize);
    assert_eq!(mask.len(), w * h, "mask size");
    // Separable: rows, then columns.
    let mut rows = vec![false; w * h];
    for y in 0..h {
        for x in 0..w {
            let (lo, hi) = (x.saturating_sub(m), (x + m).min(w - 1));
            rows[y * w + x] = mask[y * w + lo..=y * w + hi].iter().any(|&b| b);
        }
    }
    let mut out = vec![false; w * h];
    for y in 0..h {
        let (lo, hi) = (y.saturating_sub(m), (y + m).min(h - 1));
        for x in 0..w {
            out[y * w + x] = (lo..=hi).any(|yy| rows[yy * w + x]);
        }
    }
    out
}

/// The fireflies of an image (row-major `width` x `height` linear RGB), in row-major order,
/// skipping pixels where `mask` is set. A NaN or infinite pixel is always reported (with its
/// window's median), since it is the worst of fireflies.
pub fn fireflies(
    pixels: &[[f32; 3]],
    width: u32,
    height: u32,
    mask: Option<&[bool]>,
    criterion: FireflyCriterion,
) -> Vec<Firefly> {
    let (w, h) = (width as usize, height as usize);
    assert_eq!(pixels.len(), w * h, "image size");
    if let Some(m) = mask {
        assert_eq!(m.len(), w * h, "mask size");
    }
    let lum: Vec<f32> = pixels
        .iter()
        .map(|p| luminance(glam::Vec3::from(*p)))
        .collect();
    // A window wider than the image covers the same pixels as one as wide: capped, so that
    // `--window 4294967295` sizes no impossible buffer.
    let r = ((criterion.window / 2) as usize).min(w.max(h));
    let mut window = Vec::with_capacity((2 * r + 1) * (2 * r + 1));
    let mut out = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            if mask.is_some_and(|m| m[i]) {
                continue;
            }
            window.clear();
            for yy in y.saturating_sub(r)..=(y + r).min(h - 1) {
                for xx in x.saturating_sub(r)..=(x + r).min(w - 1) {
                    window.push(lum[yy * w + xx]);
                }
            }
            window.sort_by(f32::total_cmp);
            let median = window[window.len() / 2];
            let l = lum[i];
            if !l.is_finite() || l > criterion.ratio * median {
                out.push(Firefly {
                    x: x as u32,
                    y: y as u32,
                    luminance: l,
                    median,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(w: u32, h: u32, v: f32) -> Vec<[f32; 3]> {
        vec![[v; 3]; (w * h) as usize]
    }

    #[test]
    fn an_isolated_bright_pixel_is_a_firefly_and_a_smooth_ramp_is_not() {
        let (w, h) = (16, 12);
        let mut img: Vec<[f32; 3]> = (0..w * h)
            .map(|i| [0.1 + 0.01 * (i % w) as f32; 3])
            .collect();
        assert!(fireflies(&img, w, h, None, FireflyCriterion::default()).is_empty());
        img[(5 * w + 7) as usize] = [3.0, 3.0, 3.0];
        let f = fireflies(&img, w, h, None, FireflyCriterion::default());
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].x, f[0].y), (7, 5));
        assert!((f[0].luminance - 3.0).abs() < 1e-5);
        // Exactly 4x the median is not more than 4x.
        let mut img = flat(w, h, 0.5);
        img[0] = [2.0; 3];
        assert!(fireflies(&img, w, h, None, FireflyCriterion::default()).is_empty());
        img[0] = [2.001; 3];
        assert_eq!(
            fireflies(&img, w, h, None, FireflyCriterion::default()).len(),
            1
        );
    }

    #[test]
    fn a_window_wider_than_the_image_is_the_whole_image() {
        let (w, h) = (5, 3);
        let mut img = flat(w, h, 0.1);
        img[7] = [1.0; 3];
        let wide = |window| FireflyCriterion { ratio: 4.0, window };
        let whole = fireflies(&img, w, h, None, wide(11));
        assert_eq!(whole.len(), 1);
        assert_eq!(fireflies(&img, w, h, None, wide(u32::MAX)), whole);
    }

    #[test]
    fn masked_pixels_are_not_counted_and_nan_always_is() {
        let (w, h) = (8, 8);
        let mut img = flat(w, h, 0.2);
        img[9] = [5.0; 3];
        img[50] = [f32::NAN, 0.0, 0.0];
        let mut mask = vec![false; 64];
        mask[9] = true;
        let f = fireflies(&img, w, h, Some(&mask), FireflyCriterion::default());
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].x, f[0].y), (2, 6));
    }

    #[test]
    fn two_bright_pixels_side_by_side_are_still_fireflies_in_a_5x5_window() {
        let (w, h) = (9, 9);
        let mut img = flat(w, h, 0.1);
        img[40] = [1.0; 3];
        img[41] = [1.0; 3];
        assert_eq!(
            fireflies(&img, w, h, None, FireflyCriterion::default()).len(),
            2
        );
        // A straight edge between bright and dark is not noise: the medians of the bright
        // pixels along it are bright too (three of the window's five columns).
        let mut img = flat(w, h, 0.1);
        for y in 0..9 {
            for x in 0..4 {
                img[y * 9 + x] = [1.0; 3];
            }
        }
        assert!(fireflies(&img, w, h, None, FireflyCriterion::default()).is_empty());
    }

    #[test]
    fn dilation_grows_by_the_margin() {
        let (w, h) = (7, 5);
        let mut mask = vec![false; 35];
        mask[2 * 7 + 3] = true;
        let d = dilate(&mask, w, h, 2);
        let set: Vec<(usize, usize)> = (0..35).filter(|&i| d[i]).map(|i| (i % 7, i / 7)).collect();
        assert_eq!(set.len(), 25);
        assert!(set.iter().all(|&(x, y)| (1..=5).contains(&x) && y <= 4));
        assert_eq!(dilate(&mask, w, h, 0), mask);
    }

    #[test]
    fn mean_radiance_is_the_plain_average() {
        let img = vec![
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
            [1.0, 1.0, 1.0],
        ];
        let m = mean_radiance(&img);
        assert_eq!(m.rgb, [0.5, 0.5, 0.5]);
        assert!((m.luminance - 0.5).abs() < 1e-12);
    }

    #[test]
    fn block_means_keep_offsets_and_cancel_alternating_errors() {
        let (w, h) = (8u32, 6u32);
        let a = vec![[1.0f32, 2.0, 3.0]; (w * h) as usize];
        // A constant offset survives averaging: the block RMS is the pixels' RMS.
        let offset: Vec<[f32; 3]> = a.iter().map(|p| p.map(|v| v + 0.5)).collect();
        assert_eq!(rms_block_difference(&a, &offset, w, h, 2), Some(0.5));
        // A checkerboard of +-0.5 cancels in every 2x2 block (blue noise at its bluest).
        let checker: Vec<[f32; 3]> = (0..w * h)
            .map(|i| {
                let sign = if (i % w + i / w) % 2 == 0 { 0.5 } else { -0.5 };
                a[i as usize].map(|v| v + sign)
            })
            .collect();
        assert_eq!(rms_block_difference(&a, &checker, w, h, 2), Some(0.0));
        // Only whole blocks count: 8x6 has two whole 4x4 blocks, and the rows below them
        // (here +9) are left out.
        let mut ragged = offset.clone();
        for p in &mut ragged[(4 * w) as usize..] {
            *p = p.map(|v| v + 9.0);
        }
        assert_eq!(rms_block_difference(&a, &ragged, w, h, 4), Some(0.5));
        assert_eq!(rms_block_difference(&a, &offset, w, h, 7), None);
    }

    #[test]
    fn rms_difference_is_the_root_mean_square_of_every_channel() {
        let a = vec![[1.0f32, 2.0, 3.0]; 4];
        let mut b = a.clone();
        // One channel of one pixel off by 2.4: sqrt(2.4^2 / 12).
        b[3][1] += 2.4;
        let want = (2.4f64 * 2.4 / 12.0).sqrt();
        assert!((rms_difference(&a, &b) - want).abs() < 1e-6);
        assert_eq!(rms_difference(&a, &a), 0.0);
        assert_eq!(rms_difference(&[], &[]), 0.0);
    }

    #[test]
    fn display_errors_are_per_block_of_the_frames_grid_after_the_pngs_curve() {
        // A 20x4 crop at x = 12 of its frame: blocks of 16 split it at its column 4.
        let a = vec![[0.5f32; 3]; 80];
        let mut b = a.clone();
        // One pixel of the first block: white (clamped) against grey.
        b[0] = [4.0; 3];
        let errors = display_block_errors(&a, &b, 20, 4, (12, 0), 16);
        assert_eq!(errors.len(), 2);
        let step = 1.0 - f64::from(crate::render::output::linear_to_srgb(0.5));
        // That block holds 4 columns x 4 rows of the crop.
        assert!(
            (errors[0] - (step * step / 16.0).sqrt()).abs() < 1e-6,
            "{errors:?}"
        );
        assert_eq!(errors[1], 0.0);
    }
}
