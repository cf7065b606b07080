//! The pictures of `--costmap DIR` (the paper's Figures 1 and 12), all at image resolution:
//! - `estimated.png`: the estimated cost map, mapped into [0, 1] by its 99th percentile (a
//!   few extreme pixels, such as a mirror facing a mirror, would otherwise leave the rest
//!   black; everything above saturates);
//! - `measured.png`: the measured cost, each tile's cost (CPU time for CPU workers) spread
//!   evenly over its pixels (per pixel seconds, summed over passes), mapped into [0, 1] the
//!   same way;
//! - `difference.png`: per tile of the first pass, `|measured - k estimate| / measured` after
//!   the least-squares scale `k`, on a blue (exact) to yellow (50% off or worse) gradient;
//! - `tiles.png` (and `tiles_last.png` when the last pass was cut differently): the tile
//!   layout over the rendered image, each tile framed in the colour of the worker that ran it,
//!   stolen tiles crossed;
//! - `samples.png` (adaptive sampling, `--noise-threshold`): each pixel's samples on the
//!   heat gradient, from none (black) to the render's most (bright yellow), so that where
//!   the blocks stopped shows at a glance.

use std::path::{Path, PathBuf};

use image::{Rgb, RgbImage};

use super::report::{FrameReport, PassReport};
use crate::render::output::to_srgb8;
use crate::render::{Film, Tile};

#[derive(Debug, thiserror::Error)]
pub enum PictureError {
    #[error("{path}: cannot create the folder: {source}")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot write the picture: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: image::ImageError,
    },
}

/// A perceptually ordered dark-to-bright gradient (close to "inferno") for cost maps.
fn heat(t: f32) -> Rgb<u8> {
    const STOPS: [[f32; 3]; 5] = [
        [0.0, 0.0, 0.02],
        [0.34, 0.06, 0.43],
        [0.73, 0.21, 0.33],
        [0.98, 0.55, 0.04],
        [0.99, 1.0, 0.64],
    ];
    gradient(&STOPS, t)
}

/// Blue for precise, yellow for imprecise (the paper's difference maps).
fn blue_yellow(t: f32) -> Rgb<u8> {
    gradient(&[[0.1, 0.2, 0.9], [1.0, 0.95, 0.1]], t)
}

fn gradient(stops: &[[f32; 3]], t: f32) -> Rgb<u8> {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (stops.len() - 1) as f32;
    let i = (x.floor() as usize).min(stops.len() - 2);
    let f = x - i as f32;
    let c = [0, 1, 2].map(|k| stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f);
    Rgb(c.map(|v| (v * 255.0 + 0.5) as u8))
}

/// A distinct colour per worker (golden-angle hues).
fn worker_colour(w: usize) -> Rgb<u8> {
    let h = (w as f32 * 0.618_034).fract() * 6.0;
    let x = 1.0 - (h % 2.0 - 1.0).abs();
    let (r, g, b) = match h as u32 {
        0 => (1.0, x, 0.0),
        1 => (x, 1.0, 0.0),
        2 => (0.0, 1.0, x),
        3 => (0.0, x, 1.0),
        4 => (x, 0.0, 1.0),
        _ => (1.0, 0.0, x),
    };
    Rgb([r, g, b].map(|v: f32| (55.0 + 200.0 * v) as u8))
}

/// The value that maps to the top of the gradient: the 99th percentile (at least the
/// smallest positive value, so that a constant map is not black).
fn top_of_scale(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 1.0;
    }
    v.sort_by(f64::total_cmp);
    let p99 = v[((v.len() - 1) as f64 * 0.99).round() as usize];
    if p99 > 0.0 {
        p99
    } else {
        v[v.len() - 1].max(1e-30)
    }
}

/// The estimated cost map at image resolution (nearest cell).
pub fn estimated_image(report: &FrameReport) -> RgbImage {
    let m = &report.costmap;
    let top = top_of_scale(m.values.iter().map(|&v| v as f64)) as f32;
    RgbImage::from_fn(report.width, report.height, |x, y| {
        let cx = ((x as u64 * m.width as u64) / report.width as u64) as usize;
        let cy = ((y as u64 * m.height as u64) / report.height as u64) as usize;
        heat(m.values[cy * m.width + cx] / top)
    })
}

/// Measured seconds per pixel: each tile's time spread over its pixels, summed over passes.
pub fn measured_density(report: &FrameReport) -> Vec<f64> {
    let (w, h) = (report.width as usize, report.height as usize);
    let mut d = vec![0.0f64; w * h];
    for p in &report.passes {
        for (t, r) in p.tiles.iter().zip(&p.records) {
            let per_pixel = r.cost_s / t.pixel_count().max(1) as f64;
            for y in t.y as usize..(t.y + t.h) as usize {
                for v in &mut d[y * w + t.x as usize..y * w + (t.x + t.w) as usize] {
                    *v += per_pixel;
                }
            }
        }
    }
    d
}

pub fn measured_image(report: &FrameReport) -> RgbImage {
    let d = measured_density(report);
    let top = top_of_scale(d.iter().copied());
    RgbImage::from_fn(report.width, report.height, |x, y| {
        heat((d[(y * report.width + x) as usize] / top) as f32)
    })
}

fn fill_tile(img: &mut RgbImage, t: Tile, c: Rgb<u8>) {
    for y in t.y..t.y + t.h {
        for x in t.x..t.x + t.w {
            img.put_pixel(x, y, c);
        }
    }
}

/// Per tile of the first pass: relative error after the least-squares scale.
pub fn difference_image(report: &FrameReport) -> RgbImage {
    let mut img = RgbImage::new(report.width, report.height);
    if let Some(p) = report.passes.first() {
        let k = p.estimate_accuracy().scale;
        let measured = p.measured_at_fastest();
        for ((t, &m), e) in p.tiles.iter().zip(&measured).zip(&p.estimated) {
            let err = if m > 0.0 {
                ((m - k * e) / m).abs()
            } else {
                0.0
            };
            fill_tile(&mut img, *t, blue_yellow((err / 0.5) as f32));
        }
    }
    img
}

/// The rendered image (tone-mapped) with one pass's tiles framed by worker.
pub fn tiles_image(film: &Film, pass: &PassReport) -> RgbImage {
    let mean = film.mean();
    let mut img = RgbImage::from_fn(film.width, film.height, |x, y| {
        let c = to_srgb8(mean[(y * film.width + x) as usize]);
        // Dim the picture so that the frames stand out.
        Rgb(c.map(|v| (v as u32 * 3 / 4) as u8))
    });
    for (t, r) in pass.tiles.iter().zip(&pass.records) {
        let c = worker_colour(r.worker);
        let (x1, y1) = (t.x + t.w - 1, t.y + t.h - 1);
        for x in t.x..=x1 {
            img.put_pixel(x, t.y, c);
            img.put_pixel(x, y1, c);
        }
        for y in t.y..=y1 {
            img.put_pixel(t.x, y, c);
            img.put_pixel(x1, y, c);
        }
        if r.stolen_from.is_some() {
            let n = t.w.max(t.h);
            for i in 0..n {
                let x = t.x + (i as u64 * t.w as u64 / n as u64) as u32;
                let y = t.y + (i as u64 * t.h as u64 / n as u64) as u32;
                img.put_pixel(x, y, c);
                img.put_pixel(t.x + t.w - 1 - (x - t.x), y, c);
            }
        }
    }
    img
}

fn save(img: &RgbImage, path: PathBuf) -> Result<PathBuf, PictureError> {
    img.save_with_format(&path, image::ImageFormat::Png)
        .map_err(|source| PictureError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

/// Writes every picture into `dir` (created if missing); returns the files written.
pub fn write_all(
    report: &FrameReport,
    film: &Film,
    dir: &Path,
) -> Result<Vec<PathBuf>, PictureError> {
    std::fs::create_dir_all(dir).map_err(|source| PictureError::Folder {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = vec![
        save(&estimated_image(report), dir.join("estimated.png"))?,
        save(&measured_image(report), dir.join("measured.png"))?,
        save(&difference_image(report), dir.join("difference.png"))?,
    ];
    if let Some(first) = report.passes.first() {
        written.push(save(&tiles_image(film, first), dir.join("tiles.png"))?);
    }
    if let (Some(first), Some(last)) = (report.passes.first(), report.passes.last()) {
        if report.passes.len() > 1 && first.tiles != last.tiles {
            written.push(save(&tiles_image(film, last), dir.join("tiles_last.png"))?);
        }
    }
    if report.adaptive.is_some() {
        written.push(save(&samples_image(film), dir.join("samples.png"))?);
    }
    Ok(written)
}

/// Each pixel's sample count, scaled to the most any pixel has.
fn samples_image(film: &Film) -> RgbImage {
    let most = film
        .pixels
        .iter()
        .map(|p| p[3])
        .fold(0.0f32, f32::max)
        .max(1.0);
    RgbImage::from_fn(film.width, film.height, |x, y| {
        heat(film.pixels[(y * film.width + x) as usize][3] / most)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_tops_out_at_the_99th_percentile() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(top_of_scale(v.into_iter()), 99.0);
        assert_eq!(top_of_scale([0.0, 0.0].into_iter()), 1e-30);
        assert_eq!(top_of_scale(std::iter::empty()), 1.0);
    }

    #[test]
    fn the_samples_picture_runs_from_none_to_the_most() {
        let mut film = Film::new(3, 1);
        film.pixels[1][3] = 8.0;
        film.pixels[2][3] = 64.0;
        let img = samples_image(&film);
        assert_eq!(*img.get_pixel(0, 0), heat(0.0));
        assert_eq!(*img.get_pixel(1, 0), heat(0.125));
        assert_eq!(*img.get_pixel(2, 0), heat(1.0));
    }

    #[test]
    fn gradients_hit_their_ends() {
        assert_eq!(blue_yellow(0.0), Rgb([26, 51, 230]));
        assert_eq!(blue_yellow(2.0), Rgb([255, 242, 26]));
        assert_eq!(heat(f32::NAN), heat(0.0));
        assert_ne!(worker_colour(0), worker_colour(1));
    }
}
