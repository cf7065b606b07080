//! Joining crops (`render --pixelbounds`) into the whole frame: `gasworks merge`.
//!
//! Every crop says where it lies and how big its frame is (see [`super::output`]), and which
//! settings rendered it. The crops must be of one frame (same frame size, same settings), must
//! not overlap, and together must cover it: anything else is an error that names the files
//! and the pixels, never a silently patched image. A pixel's samples depend only on (pixel,
//! sample, seed), so the joined image is bit-identical to a render of the whole frame; the
//! output carries the same metadata as such a render, so it is the same file.
//!
//! EXR crops (linear) join into an EXR, or into a PNG (tone-mapped pixel by pixel, exactly as
//! `render` would have); PNG crops join into a PNG only.

use std::path::{Path, PathBuf};

use super::output::{self, ImageFormat, ImageMeta, Pixels, ReadError, ReadImage};
use super::Tile;

/// Why crops cannot be joined.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no crops to merge")]
    NoInputs,
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] output::OutputError),
    #[error("{path}: a crop of a {w}x{h} frame, but {first} is of a {fw}x{fh} frame")]
    FrameSize {
        path: PathBuf,
        w: u32,
        h: u32,
        first: PathBuf,
        fw: u32,
        fh: u32,
    },
    #[error(
        "{path}: rendered with {this}, but {first} with {that}: they are not crops of one render"
    )]
    Settings {
        path: PathBuf,
        this: String,
        first: PathBuf,
        that: String,
    },
    #[error("{path} was stopped in the middle of a pass ({spp}): its tiles hold different samples, so it is no crop of a render; finish it with render --resume (from the resume file the stop left beside it, if a pass was complete), or render it again")]
    StoppedCrop { path: PathBuf, spp: String },
    #[error("{path} is a crop in {this} and {first} one in {that}: merge EXR crops or PNG crops, not both")]
    MixedFormats {
        path: PathBuf,
        this: ImageFormat,
        first: PathBuf,
        that: ImageFormat,
    },
    #[error("{path}: PNG crops are tone-mapped 8-bit sRGB and cannot make an EXR; merge the EXR crops, or write a .png")]
    PngToExr { path: PathBuf },
    /// An `--exposure` or `--tonemap` the output cannot take (an EXR holds radiance as
    /// rendered).
    #[error("{0}")]
    Look(String),
    #[error("{0}")]
    Memory(String),
    #[error("{path}: PNG crops are tone-mapped already, so --exposure and --tonemap cannot apply to them; merge the EXR crops into a .png with them")]
    ExposedPng { path: PathBuf },
    #[error("{a} ({}) and {b} ({}) overlap in pixels {}", describe(*.wa), describe(*.wb), describe(*.overlap))]
    Overlap {
        a: PathBuf,
        wa: Tile,
        b: PathBuf,
        wb: Tile,
        overlap: Tile,
    },
    #[error("{missing} pixels of the {w}x{h} frame are in no crop, within pixels {}: a crop is missing", describe(*.within))]
    Missing {
        missing: u64,
        w: u32,
        h: u32,
        within: Tile,
    },
}

/// `x0..x1 x y0..y1`: a window for messages.
fn describe(t: Tile) -> String {
    format!(
        "x {}..{}, y {}..{}",
        t.x,
        t.x as u64 + t.w as u64,
        t.y,
        t.y as u64 + t.h as u64
    )
}

fn overlap(a: Tile, b: Tile) -> Option<Tile> {
    let x0 = a.x.max(b.x) as u64;
    let y0 = a.y.max(b.y) as u64;
    let x1 = (a.x as u64 + a.w as u64).min(b.x as u64 + b.w as u64);
    let y1 = (a.y as u64 + a.h as u64).min(b.y as u64 + b.h as u64);
    (x0 < x1 && y0 < y1).then(|| Tile {
        x: x0 as u32,
        y: y0 as u32,
        w: (x1 - x0) as u32,
        h: (y1 - y0) as u32,
    })
}

/// The first `name value` item on which two render keys differ ("spp 16" against "spp 64"),
/// or `None` when they are equal.
fn first_difference(a: &str, b: &str) -> Option<(String, String)> {
    super::output::render_key_differences(a, b)
        .into_iter()
        .next()
}

/// A joined frame.
#[derive(Debug)]
pub struct Merged {
    pub meta: ImageMeta,
    pub pixels: Pixels,
}

/// Checks that `crops` (each with its path) are the non-overlapping parts of one frame that
/// cover it, and joins them.
pub fn merge(crops: &[(PathBuf, ReadImage)]) -> Result<Merged, MergeError> {
    let (first_path, first) = crops.first().ok_or(MergeError::NoInputs)?;
    let (fw, fh) = (first.meta.full_width, first.meta.full_height);
    check_one_render(crops, first_path, first)?;
    check_no_overlap(crops)?;
    check_covered(crops, fw, fh)?;
    Ok(Merged {
        meta: ImageMeta::whole(fw, fh, first.meta.render.clone()),
        pixels: join_pixels(crops, first.format, fw as usize, fh as usize),
    })
}

/// Every crop a finished crop of `first`'s frame: same frame size, format and settings.
fn check_one_render(
    crops: &[(PathBuf, ReadImage)],
    first_path: &Path,
    first: &ReadImage,
) -> Result<(), MergeError> {
    let (fw, fh) = (first.meta.full_width, first.meta.full_height);
    for (path, c) in crops {
        if output::stopped_mid_pass(&c.meta.render) {
            let spp = c.meta.render.split("; ").find(|i| i.starts_with("spp "));
            return Err(MergeError::StoppedCrop {
                path: path.clone(),
                spp: spp.unwrap_or_default().to_string(),
            });
        }
        if (c.meta.full_width, c.meta.full_height) != (fw, fh) {
            return Err(MergeError::FrameSize {
                path: path.clone(),
                w: c.meta.full_width,
                h: c.meta.full_height,
                first: first_path.to_path_buf(),
                fw,
                fh,
            });
        }
        if c.format != first.format {
            return Err(MergeError::MixedFormats {
                path: path.clone(),
                this: c.format,
                first: first_path.to_path_buf(),
                that: first.format,
            });
        }
        if let Some((this, that)) = first_difference(&c.meta.render, &first.meta.render) {
            return Err(MergeError::Settings {
                path: path.clone(),
                this,
                first: first_path.to_path_buf(),
                that,
            });
        }
    }
    Ok(())
}

/// No two crops' windows share a pixel.
fn check_no_overlap(crops: &[(PathBuf, ReadImage)]) -> Result<(), MergeError> {
    // The windows were checked against their frames when read; here, against each other.
    for (i, (pa, a)) in crops.iter().enumerate() {
        for (pb, b) in &crops[i + 1..] {
            if let Some(o) = overlap(a.meta.window, b.meta.window) {
                return Err(MergeError::Overlap {
                    a: pa.clone(),
                    wa: a.meta.window,
                    b: pb.clone(),
                    wb: b.meta.window,
                    overlap: o,
                });
            }
        }
    }
    Ok(())
}

/// The crops' windows cover every pixel of the `fw` x `fh` frame. They do not overlap
/// ([`check_no_overlap`]) and lie inside it, so the pixels missing are the frame's less the
/// windows' areas, and the box around them spans the rows and the columns the windows leave
/// short. No map of the frame's pixels: a small crop may claim a frame of 2^30 of them.
fn check_covered(crops: &[(PathBuf, ReadImage)], fw: u32, fh: u32) -> Result<(), MergeError> {
    let windows: Vec<Tile> = crops.iter().map(|(_, c)| c.meta.window).collect();
    let covered: u64 = windows
        .iter()
        .map(|t| u64::from(t.w) * u64::from(t.h))
        .sum();
    let missing = (u64::from(fw) * u64::from(fh)).saturating_sub(covered);
    if missing == 0 {
        return Ok(());
    }
    // The first and one past the last of `0..len` whose line the windows cover less than
    // `across` of.
    let short = |len: u32, across: u32, covered_at: &dyn Fn(u32) -> u64| {
        let mut lines = (0..len).filter(|&i| covered_at(i) < u64::from(across));
        let first = lines.next().unwrap_or(0);
        (first, lines.last().unwrap_or(first) + 1)
    };
    let row = |y: u32| {
        let across = windows.iter().filter(|t| t.y <= y && y - t.y < t.h);
        across.map(|t| u64::from(t.w)).sum()
    };
    let column = |x: u32| {
        let across = windows.iter().filter(|t| t.x <= x && x - t.x < t.w);
        across.map(|t| u64::from(t.h)).sum()
    };
    let (y0, y1) = short(fh, fw, &row);
    let (x0, x1) = short(fw, fh, &column);
    Err(MergeError::Missing {
        missing,
        w: fw,
        h: fh,
        within: Tile {
            x: x0,
            y: y0,
            w: x1 - x0,
            h: y1 - y0,
        },
    })
}

/// The crops' pixels copied into a `w` x `h` frame of `format`'s pixels.
fn join_pixels(crops: &[(PathBuf, ReadImage)], format: ImageFormat, w: usize, h: usize) -> Pixels {
    let mut linear = vec![[0f32; 3]; if format == ImageFormat::Exr { w * h } else { 0 }];
    let mut srgb = vec![[0u8; 3]; if format == ImageFormat::Png { w * h } else { 0 }];
    for (_, c) in crops {
        let t = c.meta.window;
        for row in 0..t.h as usize {
            let dst = (t.y as usize + row) * w + t.x as usize;
            let src = row * t.w as usize;
            let n = t.w as usize;
            match &c.pixels {
                Pixels::Linear(p) => linear[dst..dst + n].copy_from_slice(&p[src..src + n]),
                Pixels::Srgb8(p) => srgb[dst..dst + n].copy_from_slice(&p[src..src + n]),
            }
        }
    }
    match format {
        ImageFormat::Exr => Pixels::Linear(linear),
        // read_image reads no WebP: PNG's pixels, here only in name.
        ImageFormat::Png | ImageFormat::Webp => Pixels::Srgb8(srgb),
    }
}

/// What [`merge_files`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeSummary {
    pub crops: usize,
    pub width: u32,
    pub height: u32,
}

/// Reads the crops, joins them and writes the frame to `output` (EXR, PNG or WebP by
/// extension).
/// Nothing is written unless every check passes.
/// Joins the crop files `inputs` into `output`; `exposure` (stops) and `tonemap` apply to a
/// PNG made from EXR crops, as `render --exposure --tonemap` would have.
pub fn merge_files(
    inputs: &[PathBuf],
    output: &Path,
    exposure: f32,
    tonemap: output::ToneCurve,
) -> Result<MergeSummary, MergeError> {
    output::check_exposure(exposure, output).map_err(MergeError::Look)?;
    output::check_tonemap(tonemap, output).map_err(MergeError::Look)?;
    let out_format = output::check_writable(output)?;
    let crops = inputs
        .iter()
        .map(|p| Ok((p.clone(), output::read_image(p)?)))
        .collect::<Result<Vec<_>, MergeError>>()?;
    if exposure != 0.0 || tonemap != output::ToneCurve::Clamp {
        if let Some((path, _)) = crops.iter().find(|(_, c)| c.format == ImageFormat::Png) {
            return Err(MergeError::ExposedPng { path: path.clone() });
        }
    }
    if let Some((_, first)) = crops.first() {
        let (fw, fh) = (first.meta.full_width, first.meta.full_height);
        super::memory::check_fits(
            &format!("joining a {fw}x{fh} frame"),
            super::memory::merge_bytes(fw, fh),
            super::memory::room(),
        )
        .map_err(MergeError::Memory)?;
    }
    let mut merged = merge(&crops)?;
    merged.meta.exposure = exposure;
    merged.meta.tonemap = tonemap;
    match (&merged.pixels, out_format) {
        (Pixels::Linear(p), _) => output::write_pixels(p, output, &merged.meta)?,
        (Pixels::Srgb8(p), format @ (ImageFormat::Png | ImageFormat::Webp)) => {
            output::write_srgb8(format, p, output, &merged.meta)?
        }
        (Pixels::Srgb8(_), ImageFormat::Exr) => {
            return Err(MergeError::PngToExr {
                path: crops[0].0.clone(),
            })
        }
    }
    Ok(MergeSummary {
        crops: crops.len(),
        width: merged.meta.full_width,
        height: merged.meta.full_height,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crop(x: u32, y: u32, w: u32, h: u32, render: &str) -> (PathBuf, ReadImage) {
        let pixels = (0..w * h)
            .map(|i| {
                let (px, py) = (x + i % w, y + i / w);
                [px as f32, py as f32, 0.5]
            })
            .collect();
        (
            PathBuf::from(format!("crop_{x}_{y}.exr")),
            ReadImage {
                format: ImageFormat::Exr,
                meta: ImageMeta {
                    full_width: 6,
                    full_height: 4,
                    window: Tile { x, y, w, h },
                    render: render.into(),
                    exposure: 0.0,
                    tonemap: output::ToneCurve::Clamp,
                },
                pixels: Pixels::Linear(pixels),
            },
        )
    }

    /// Every subset of six crops that tile the 6x4 frame: the pixels missing and the box
    /// around them, from the windows' areas and the short rows and columns, are what a map of
    /// the frame's pixels gives.
    #[test]
    fn the_pixels_missing_and_their_box_agree_with_a_pixel_map() {
        let tiles = [
            (0, 0, 6, 1),
            (0, 1, 2, 3),
            (2, 1, 2, 1),
            (4, 1, 2, 1),
            (2, 2, 4, 1),
            (2, 3, 4, 1),
        ];
        for subset in 1..(1u32 << tiles.len()) - 1 {
            let chosen: Vec<_> = (0..tiles.len()).filter(|k| subset >> k & 1 == 1).collect();
            let crops: Vec<_> = chosen
                .iter()
                .map(|&k| {
                    let (x, y, w, h) = tiles[k];
                    crop(x, y, w, h, "spp 4")
                })
                .collect();
            let mut map = [[false; 6]; 4];
            for &k in &chosen {
                let (x, y, w, h) = tiles[k];
                (y..y + h)
                    .for_each(|py| (x..x + w).for_each(|px| map[py as usize][px as usize] = true));
            }
            let holes: Vec<(u32, u32)> = (0..4u32)
                .flat_map(|y| (0..6u32).map(move |x| (x, y)))
                .filter(|&(x, y)| !map[y as usize][x as usize])
                .collect();
            let (x0, x1) = (
                holes.iter().map(|h| h.0).min(),
                holes.iter().map(|h| h.0).max(),
            );
            let (y0, y1) = (
                holes.iter().map(|h| h.1).min(),
                holes.iter().map(|h| h.1).max(),
            );
            let (x0, x1, y0, y1) = (x0.unwrap(), x1.unwrap(), y0.unwrap(), y1.unwrap());
            match merge(&crops) {
                Err(MergeError::Missing {
                    missing, within, ..
                }) => {
                    assert_eq!(missing, holes.len() as u64, "subset {subset:06b}");
                    let expected = Tile {
                        x: x0,
                        y: y0,
                        w: x1 + 1 - x0,
                        h: y1 + 1 - y0,
                    };
                    assert_eq!(within, expected, "subset {subset:06b}");
                }
                other => panic!("subset {subset:06b}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn crops_that_tile_the_frame_join_in_place() {
        let crops = [
            crop(0, 0, 6, 1, "spp 4"),
            crop(0, 1, 2, 3, "spp 4"),
            crop(2, 1, 4, 3, "spp 4"),
        ];
        let m = merge(&crops).unwrap();
        let Pixels::Linear(p) = m.pixels else {
            panic!("linear in, linear out")
        };
        for (i, px) in p.iter().enumerate() {
            assert_eq!(*px, [(i % 6) as f32, (i / 6) as f32, 0.5]);
        }
        assert_eq!(m.meta, ImageMeta::whole(6, 4, "spp 4".into()));
    }

    #[test]
    fn a_crop_cut_short_merges_by_the_samples_it_holds_and_a_pass_cut_by_a_stop_never() {
        let key = "scene a.obj; size 6x4; spp 64; seed 0";
        // At the time limit (whole at 16 of 64 spp): joins crops that stopped there too, not
        // crops rendered with --spp 16 (their samples draw other numbers) or 64.
        let limited = output::key_with_spp_held(key, 16);
        assert_eq!(limited, "scene a.obj; size 6x4; spp 16 of 64; seed 0");
        let sixteen = "scene a.obj; size 6x4; spp 16; seed 0";
        assert!(merge(&[crop(0, 0, 6, 2, &limited), crop(0, 2, 6, 2, &limited)]).is_ok());
        for other in [sixteen, key] {
            let e = merge(&[crop(0, 0, 6, 2, &limited), crop(0, 2, 6, 2, other)])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("spp 16 of 64") && e.contains(other.split("; ").nth(2).unwrap()),
                "{e}"
            );
        }
        // Stopped in a pass: refused even beside a crop stopped the same way.
        let cut = output::key_with_spp(
            key,
            &format!(
                "{} 16 everywhere, 16..32 in 3 of 8 pixels",
                output::SPP_STOPPED
            ),
        );
        assert!(output::stopped_mid_pass(&cut) && !output::stopped_mid_pass(&limited));
        let e = merge(&[crop(0, 0, 6, 2, sixteen), crop(0, 2, 6, 2, &cut)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("crop_0_2.exr was stopped in the middle of a pass (spp stopped: 16 everywhere, 16..32 in 3 of 8 pixels)"),
            "{e}"
        );
    }

    /// PNG crops join into a WebP holding exactly the pixels they join into as a PNG: how the
    /// GPU protocol's images, and the committed PNGs before them, became lossless WebPs.
    #[test]
    fn png_crops_join_into_a_webp_of_the_same_pixels() {
        let dir = tempfile::tempdir().unwrap();
        let (fw, fh) = (6u32, 4u32);
        let mut inputs = Vec::new();
        for (y, h) in [(0u32, 1u32), (1, 3)] {
            let window = Tile { x: 0, y, w: fw, h };
            let srgb: Vec<[u8; 3]> = (0..fw * h)
                .map(|i| [(i * 37 % 256) as u8, (y * 50) as u8, (i * 11) as u8])
                .collect();
            let meta = ImageMeta {
                full_width: fw,
                full_height: fh,
                window,
                render: "spp 4".into(),
                exposure: 0.0,
                tonemap: output::ToneCurve::Clamp,
            };
            let path = dir.path().join(format!("crop_{y}.png"));
            output::write_png(&srgb, &path, &meta).unwrap();
            inputs.push(path);
        }
        let (png, webp) = (dir.path().join("all.png"), dir.path().join("all.webp"));
        merge_files(&inputs, &png, 0.0, output::ToneCurve::Clamp).unwrap();
        let summary = merge_files(&inputs, &webp, 0.0, output::ToneCurve::Clamp).unwrap();
        assert_eq!((summary.crops, summary.width, summary.height), (2, fw, fh));
        let a = image::open(&png).unwrap().to_rgb8();
        let b = image::open(&webp).unwrap().to_rgb8();
        assert_eq!(a.dimensions(), (fw, fh));
        assert!(a.as_raw() == b.as_raw());
        // Not the other way: a WebP is not read back as a crop.
        let e = merge_files(
            &[webp],
            &dir.path().join("again.png"),
            0.0,
            output::ToneCurve::Clamp,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("reads back only PNG and EXR"), "{e}");
    }

    #[test]
    fn overlaps_gaps_and_strangers_are_errors_naming_the_files_and_pixels() {
        let e = merge(&[crop(0, 0, 6, 2, ""), crop(3, 1, 3, 3, "")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("crop_0_0.exr")
                && e.contains("crop_3_1.exr")
                && e.contains("overlap in pixels x 3..6, y 1..2"),
            "{e}"
        );
        let e = merge(&[crop(0, 0, 6, 2, ""), crop(0, 2, 5, 2, "")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "2 pixels of the 6x4 frame are in no crop, within pixels x 5..6, y 2..4: a crop is missing"
        );
        let e = merge(&[
            crop(0, 0, 6, 2, "scene a.obj; spp 4"),
            crop(0, 2, 6, 2, "scene a.obj; spp 16"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("rendered with spp 16") && e.contains("with spp 4"),
            "{e}"
        );
        let mut other = crop(0, 2, 6, 2, "");
        other.1.meta.full_width = 7;
        let e = merge(&[crop(0, 0, 6, 2, ""), other])
            .unwrap_err()
            .to_string();
        assert!(e.contains("7x4 frame") && e.contains("6x4"), "{e}");
        assert!(matches!(merge(&[]), Err(MergeError::NoInputs)));
    }
}
