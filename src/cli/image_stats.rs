//! `gasworks image-stats`: the mean radiance and the firefly count of rendered images, so
//! that two renders (two versions, two settings) can be compared with figures.
//!
//! The images must be linear radiance (`.exr`, as `render -o OUT.exr` writes, or `.hdr`);
//! a tone-mapped PNG says nothing about radiance and is refused. With `--mask-scene`, the
//! pixels whose centre sees a light source or the background, and those within
//! `--mask-margin` pixels of one, are not counted as fireflies (their brightness is not noise):
//! the scene is ray-cast with the camera `render` would use for it (the same `--eye`,
//! `--look-at`, `--up`, `--fov` options and defaults) at each image's resolution.
//! See [`crate::render::stats`] for the firefly criterion.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::args::CameraArgs;
use crate::console::Verbosity;
use crate::cpu::first_hit::light_or_background;
use crate::cpu::SceneBvh;
use crate::render::output::to_srgb8;
use crate::render::stats::{dilate, fireflies, mean_radiance, FireflyCriterion};
use crate::render::stats::{display_block_errors, rms_block_difference, rms_difference};
use crate::render::{output, Tile};
use crate::scene::{obj, Camera, Scene};

#[derive(Args, Debug)]
pub struct ImageStatsArgs {
    /// Linear-radiance images (.exr or .hdr); with several, each is compared with the first
    #[arg(required = true)]
    pub images: Vec<PathBuf>,
    /// Mask the light sources and the background seen by this scene's camera (and their edges)
    /// out of the firefly count
    #[arg(long)]
    pub mask_scene: Option<PathBuf>,
    /// Pixels within this many pixels of a light source or the background are masked too
    #[arg(long, default_value_t = 2)]
    pub mask_margin: u32,
    /// A firefly is brighter than RATIO times the median luminance of its window
    #[arg(long, default_value_t = 4.0)]
    pub ratio: f32,
    /// Side of the square window around each pixel, in pixels (odd)
    #[arg(long, default_value_t = 5)]
    pub window: u32,
    /// Also list up to N fireflies per image (position, luminance, window median)
    #[arg(long, default_value_t = 0)]
    pub list: usize,
    /// Write a PNG per image showing where the fireflies are (magenta; masked pixels dimmed):
    /// DIR/NAME.fireflies.png, NAME being the image's file name without its extension
    #[arg(long)]
    pub overlay: Option<PathBuf>,
    /// Also compare each image with the first by the means of BLOCKxBLOCK pixel squares: the
    /// error left at a coarser scale, as a viewer at a distance or a denoiser's filter sees it
    /// (independent pixels' error falls BLOCK times from the pixels' RMS; blue noise's more)
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub block: u32,
    /// Print one JSON array (one object per image) instead of text
    #[arg(long)]
    pub json: bool,
    /// No progress bar while loading the mask scene
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub camera: CameraArgs,
}

/// One firefly as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FireflyEntry {
    pub x: u32,
    pub y: u32,
    pub luminance: f32,
    pub median: f32,
}

/// The figures of one image.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImageReport {
    pub path: String,
    /// The pixels measured: the whole image, or a crop's window alone.
    pub width: u32,
    pub height: u32,
    /// For a crop: `[x, y, frame width, frame height]`, where its window lies in its frame.
    pub crop: Option<[u32; 4]>,
    /// Mean radiance over every pixel, per channel.
    pub mean_rgb: [f64; 3],
    /// Mean luminance (Rec. 709) over every pixel.
    pub mean_luminance: f64,
    pub fireflies: usize,
    /// Pixels tested for fireflies (not masked).
    pub tested: usize,
    /// Pixels masked out (light sources, background and their margin); 0 without a mask.
    pub masked: usize,
    pub ratio: f32,
    pub window: u32,
    /// The mask's margin, when a mask was used.
    pub mask_margin: Option<u32>,
    /// Relative change of the mean luminance against the first image, in percent.
    pub mean_luminance_change_percent: Option<f64>,
    /// Pixels whose RGB bits differ from the first image's (None for the first image, or
    /// when the sizes differ): 0 means the two images are bit-identical.
    pub pixels_differing_from_first: Option<usize>,
    /// The largest absolute difference of a channel from the first image.
    pub max_abs_difference_from_first: Option<f32>,
    /// The root mean square of the channel differences from the first image, over every
    /// channel of every pixel: with the first image a converged reference, the error of this
    /// one (its noise, for an unbiased renderer), to compare renderers or settings by.
    pub rms_difference_from_first: Option<f64>,
    /// The same over the means of `block` x `block` squares of pixels (whole squares only;
    /// None when the image has none): for pixels with independent errors about
    /// `rms_difference_from_first / block`, less when neighbours' errors offset one another
    /// (blue noise, as gasworks' sampler makes them), more when they agree (clumps).
    pub rms_block_difference_from_first: Option<f64>,
    /// The side of those squares, in pixels (`--block`).
    pub block: u32,
    /// The error as a PNG at `--exposure 0` shows it, by the 16x16 blocks of the frame that
    /// adaptive sampling judges (`render --noise-threshold`): each block's RMS difference of
    /// the pixels' displayed luminance (clamped to [0, 1], sRGB: white = 1) from the first
    /// image's, the median, 95th percentile and largest over the blocks. With the first image
    /// a converged reference, the noise a block shows, which adaptive sampling brings down
    /// to its threshold where it is largest.
    pub display_block_error_from_first: Option<DisplayBlockError>,
    /// The mean over pixels of this image's luminance minus the first image's, pixel by pixel.
    pub mean_luminance_difference: Option<f64>,
    /// The standard error of [`ImageReport::mean_luminance_difference`]: the standard
    /// deviation of the pixels' luminance differences over the square root of their number
    /// (pixels taken as independent; gasworks' sampler makes neighbours' errors offset one
    /// another, so for its renders this overstates the error a little and the count of
    /// standard errors below errs low, never high). Two unbiased renders of one scene
    /// by different renderers (the GPU and the CPU backends) differ by a few of these at most;
    /// a bias in one shows as many. None when the luminances are the same pixel for pixel.
    pub mean_luminance_difference_standard_error: Option<f64>,
    /// The first `--list` fireflies, row-major.
    pub firefly_list: Vec<FireflyEntry>,
    /// The items on which this image's render key and the first image's differ, as (the
    /// first's item, this one's): empty for the same render (another backend or build
    /// renders the same key); None for the first image, or where either file has no key.
    pub render_differences_from_first: Option<Vec<(String, String)>>,
}

/// [`ImageReport::display_block_error_from_first`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DisplayBlockError {
    /// The RMS over every pixel.
    pub rms: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
    pub blocks: usize,
}

impl DisplayBlockError {
    fn of(
        a: &[[f32; 3]],
        b: &[[f32; 3]],
        width: u32,
        height: u32,
        origin: (u32, u32),
    ) -> DisplayBlockError {
        let block = crate::sched::adaptive_sampling::BLOCK;
        let mut errors = display_block_errors(a, b, width, height, origin, block);
        let whole = display_block_errors(a, b, width, height, (0, 0), width.max(height));
        errors.sort_by(f64::total_cmp);
        let at = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize];
        DisplayBlockError {
            rms: whole.first().copied().unwrap_or(0.0),
            median: at(0.5),
            p95: at(0.95),
            max: at(1.0),
            blocks: errors.len(),
        }
    }
}

/// A linear-radiance image as read: its pixels, and where it lies when it is a crop.
pub struct Radiance {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<[f32; 3]>,
    /// For a crop (`render --pixelbounds`): the whole frame's size and the crop's window in it.
    pub crop: Option<(u32, u32, Tile)>,
    /// The render key the file carries (`None` for an image gasworks did not write).
    pub render: Option<String>,
}

/// Reads a linear-radiance image as RGB; refuses tone-mapped formats. An EXR crop is read as
/// its data window alone (the frame around it was not rendered).
pub fn read_radiance(path: &Path) -> anyhow::Result<Radiance> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    // An EXR gasworks can place (a frame, or a crop inside its frame) is read by its windows;
    // any other (overscan, a frame past gasworks' size limit) as the whole image the file holds.
    let placed = match ext.as_deref() {
        Some("exr") => output::read_image(path).ok(),
        _ => None,
    };
    match (ext.as_deref(), placed) {
        (Some("exr"), Some(image)) => {
            let meta = image.meta;
            let output::Pixels::Linear(pixels) = image.pixels else {
                anyhow::bail!("{}: not linear radiance", path.display());
            };
            let whole = (meta.full_width, meta.full_height) == (meta.window.w, meta.window.h);
            Ok(Radiance {
                width: meta.window.w,
                height: meta.window.h,
                pixels,
                crop: (!whole).then_some((meta.full_width, meta.full_height, meta.window)),
                render: Some(meta.render).filter(|key| !key.is_empty()),
            })
        }
        (Some("exr" | "hdr"), _) => {
            let img = image::open(path)
                .with_context(|| format!("{}: cannot read the image", path.display()))?
                .into_rgb32f();
            let (width, height) = img.dimensions();
            Ok(Radiance {
                width,
                height,
                pixels: img.pixels().map(|p| p.0).collect(),
                crop: None,
                render: None,
            })
        }
        _ => anyhow::bail!(
            "{}: image-stats measures linear radiance; give it an .exr (or .hdr) image, e.g. `gasworks render SCENE.obj -o OUT.exr` (a PNG is tone-mapped 8-bit sRGB)",
            path.display()
        ),
    }
}

/// The mask scene, loaded once, and its masks by resolution.
struct Masker {
    scene: Scene,
    bvh: SceneBvh,
    /// The camera depends on the image's aspect ratio (the default one frames the scene to
    /// fill the narrower side), so it is made per resolution, as `render` would make it.
    camera_args: CameraArgs,
    scene_camera: Option<Camera>,
    margin: u32,
    masks: HashMap<(u32, u32), Vec<bool>>,
}

impl Masker {
    fn new(path: &Path, camera: &CameraArgs, margin: u32, quiet: bool) -> anyhow::Result<Masker> {
        let scene = obj::load_obj(path, &obj::LoadOptions { quiet })?;
        Ok(Masker {
            bvh: SceneBvh::build(&scene),
            scene,
            camera_args: camera.clone(),
            scene_camera: camera
                .choice()
                .scene_hint(path, |w| Verbosity::Normal.warn(w))?,
            margin,
            masks: HashMap::new(),
        })
    }

    fn mask(&mut self, width: u32, height: u32) -> anyhow::Result<&[bool]> {
        if !self.masks.contains_key(&(width, height)) {
            let frame = self
                .camera_args
                .choice()
                .camera(&self.scene.bounds(), self.scene_camera, width, height)
                .frame(width, height)
                .with_context(|| format!("{}: bad camera", self.scene.source))?;
            let seen = light_or_background(&self.scene, &self.bvh, &frame);
            self.masks
                .insert((width, height), dilate(&seen, width, height, self.margin));
        }
        Ok(&self.masks[&(width, height)])
    }
}

pub fn run(a: ImageStatsArgs) -> anyhow::Result<()> {
    let criterion = firefly_criterion(&a)?;
    let mut masker = match &a.mask_scene {
        Some(path) => Some(Masker::new(path, &a.camera, a.mask_margin, a.quiet)?),
        None => None,
    };
    let mut reports: Vec<ImageReport> = Vec::new();
    let mut first_pixels: Option<(u32, u32, Vec<[f32; 3]>)> = None;
    let mut first_render: Option<Option<String>> = None;
    for path in &a.images {
        let Radiance {
            width,
            height,
            pixels,
            crop,
            render,
        } = read_radiance(path)?;
        // Bit-level comparison with the first image (EXR files of equal pixels need not be
        // equal bytes: the encoder may order compressed blocks differently).
        let origin = crop.map_or((0, 0), |(_, _, t)| (t.x, t.y));
        let compared = match &first_pixels {
            Some((w, h, first)) if (*w, *h) == (width, height) => {
                compare_with_first(first, &pixels, (width, height), a.block, origin)
            }
            _ => FirstComparison::default(),
        };
        let mask = image_mask(masker.as_mut(), width, height, crop)?;
        let mask = mask.as_deref();
        let masked = mask.map_or(0, |m| m.iter().filter(|&&b| b).count());
        let found = fireflies(&pixels, width, height, mask, criterion);
        if let Some(dir) = &a.overlay {
            write_overlay(dir, path, width, height, &pixels, mask, &found)?;
        }
        let mean = mean_radiance(&pixels);
        // What the render keys say differs (another seed, spp, scene content...): why two
        // images may differ, or a sign that the wrong two are compared.
        let render_differences = match (&first_render, &render) {
            (Some(Some(first)), Some(this)) => Some(output::render_key_differences(first, this)),
            _ => None,
        };
        if first_render.is_none() {
            first_render = Some(render);
        }
        let change = reports.first().map(|first: &ImageReport| {
            100.0 * (mean.luminance - first.mean_luminance) / first.mean_luminance
        });
        reports.push(ImageReport {
            path: path.display().to_string(),
            width,
            height,
            crop: crop.map(|(fw, fh, t)| [t.x, t.y, fw, fh]),
            mean_rgb: mean.rgb,
            mean_luminance: mean.luminance,
            fireflies: found.len(),
            tested: pixels.len() - masked,
            masked,
            ratio: a.ratio,
            window: a.window,
            mask_margin: masker.as_ref().map(|m| m.margin),
            mean_luminance_change_percent: change,
            pixels_differing_from_first: compared.differing,
            max_abs_difference_from_first: compared.max_diff,
            rms_difference_from_first: compared.rms,
            rms_block_difference_from_first: compared.block_rms,
            block: a.block,
            display_block_error_from_first: compared.display,
            mean_luminance_difference: compared.luminance_difference.map(|(mean, _)| mean),
            mean_luminance_difference_standard_error: compared
                .luminance_difference
                .and_then(|(_, se)| se),
            firefly_list: firefly_entries(&found, a.list),
            render_differences_from_first: render_differences,
        });
        if first_pixels.is_none() {
            first_pixels = Some((width, height, pixels));
        }
    }
    print_reports(&reports, a.json)
}

/// The firefly criterion of `--ratio` and `--window`, checked.
fn firefly_criterion(a: &ImageStatsArgs) -> anyhow::Result<FireflyCriterion> {
    if !(a.ratio > 0.0 && a.ratio.is_finite()) {
        anyhow::bail!("--ratio must be a positive number, got {}", a.ratio);
    }
    if a.window == 0 || a.window % 2 == 0 {
        anyhow::bail!("--window must be an odd number of pixels, got {}", a.window);
    }
    Ok(FireflyCriterion {
        ratio: a.ratio,
        window: a.window,
    })
}

/// An image compared with the first, pixel by pixel: all None where it is the first or
/// another size.
#[derive(Default)]
struct FirstComparison {
    differing: Option<usize>,
    max_diff: Option<f32>,
    rms: Option<f64>,
    block_rms: Option<f64>,
    /// The mean luminance difference, with its standard error where there is one.
    luminance_difference: Option<(f64, Option<f64>)>,
    display: Option<DisplayBlockError>,
}

/// Compares `pixels` with the `first` image's, of the same `size`; `origin` is where a crop
/// lies in its frame.
fn compare_with_first(
    first: &[[f32; 3]],
    pixels: &[[f32; 3]],
    (width, height): (u32, u32),
    block: u32,
    origin: (u32, u32),
) -> FirstComparison {
    let differing = first
        .iter()
        .zip(pixels)
        .filter(|(a, b)| a.map(f32::to_bits) != b.map(f32::to_bits))
        .count();
    let max_diff = first
        .iter()
        .zip(pixels)
        .flat_map(|(a, b)| (0..3).map(move |c| (a[c] - b[c]).abs()))
        .fold(0.0f32, f32::max);
    let rms = rms_difference(first, pixels);
    let luminance = |p: &[f32; 3]| {
        0.2126 * f64::from(p[0]) + 0.7152 * f64::from(p[1]) + 0.0722 * f64::from(p[2])
    };
    let differences = first
        .iter()
        .zip(pixels)
        .map(|(a, b)| luminance(b) - luminance(a));
    let n = pixels.len() as f64;
    let (sum, sum2) = differences.fold((0.0, 0.0), |(s, s2), d| (s + d, s2 + d * d));
    let mean = sum / n;
    // Sample variance over n: the square of the mean's standard error.
    let se =
        (n > 1.0 && sum2 > 0.0).then(|| ((sum2 / n - mean * mean).max(0.0) / (n - 1.0)).sqrt());
    let block_rms = rms_block_difference(first, pixels, width, height, block);
    FirstComparison {
        differing: Some(differing),
        max_diff: Some(max_diff),
        rms: Some(rms),
        block_rms,
        luminance_difference: Some((mean, se)),
        display: Some(DisplayBlockError::of(first, pixels, width, height, origin)),
    }
}

/// The `--mask-scene` mask of an image (None without one). A crop's mask is the whole
/// frame's (the camera frames the whole), cut to its window.
fn image_mask(
    masker: Option<&mut Masker>,
    width: u32,
    height: u32,
    crop: Option<(u32, u32, Tile)>,
) -> anyhow::Result<Option<std::borrow::Cow<'_, [bool]>>> {
    Ok(match (masker, crop) {
        (Some(m), None) => Some(m.mask(width, height)?.into()),
        (Some(m), Some((fw, fh, t))) => {
            let full = m.mask(fw, fh)?;
            let rows = (t.y..t.y + t.h).flat_map(|y| {
                let at = (y * fw + t.x) as usize;
                full[at..at + t.w as usize].iter().copied()
            });
            Some(rows.collect::<Vec<bool>>().into())
        }
        (None, _) => None,
    })
}

/// The first `list` fireflies, as reported.
fn firefly_entries(found: &[crate::render::stats::Firefly], list: usize) -> Vec<FireflyEntry> {
    found
        .iter()
        .take(list)
        .map(|f| FireflyEntry {
            x: f.x,
            y: f.y,
            luminance: f.luminance,
            median: f.median,
        })
        .collect()
}

/// Prints the reports, as text or as one JSON array.
fn print_reports(reports: &[ImageReport], json: bool) -> anyhow::Result<()> {
    let text = if json {
        serde_json::to_string_pretty(reports)? + "\n"
    } else {
        render_text(reports)
    };
    // A reader that stops early (`| head`) is not an error.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// Writes `dir/STEM.fireflies.png` (`STEM`: the image file's name without its extension): the
/// image tone-mapped as `render` writes PNGs, masked pixels at a third of their brightness,
/// fireflies magenta.
fn write_overlay(
    dir: &Path,
    image: &Path,
    width: u32,
    height: u32,
    pixels: &[[f32; 3]],
    mask: Option<&[bool]>,
    found: &[crate::render::stats::Firefly],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    let stem = image
        .file_stem()
        .map_or_else(|| "image".into(), |s| s.to_string_lossy().into_owned());
    let out = dir.join(format!("{stem}.fireflies.png"));
    let mut bytes: Vec<u8> = pixels
        .iter()
        .enumerate()
        .flat_map(|(i, &p)| {
            let c = to_srgb8(p);
            if mask.is_some_and(|m| m[i]) {
                c.map(|v| v / 3)
            } else {
                c
            }
        })
        .collect();
    for f in found {
        let i = 3 * (f.y as usize * width as usize + f.x as usize);
        bytes[i..i + 3].copy_from_slice(&[255, 0, 255]);
    }
    let img = image::RgbImage::from_raw(width, height, bytes)
        .context("overlay size does not match the image")?;
    img.save_with_format(&out, image::ImageFormat::Png)
        .with_context(|| format!("{}: cannot write the overlay", out.display()))?;
    Ok(())
}

/// The reports as text, one block per image.
pub fn render_text(reports: &[ImageReport]) -> String {
    let mut s = String::new();
    let first = reports.first();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let crop = match r.crop {
            Some([x, y, fw, fh]) => format!(", a crop at {x},{y} of a {fw}x{fh} frame"),
            None => String::new(),
        };
        let _ = writeln!(s, "image       {} ({}x{}{crop})", r.path, r.width, r.height);
        let _ = writeln!(
            s,
            "mean        luminance {:.6}, rgb ({:.6}, {:.6}, {:.6})",
            r.mean_luminance, r.mean_rgb[0], r.mean_rgb[1], r.mean_rgb[2]
        );
        let masked = match r.mask_margin {
            Some(m) => format!(
                "; {} masked: light sources, background and {m} px around them",
                r.masked
            ),
            None => "; no mask".to_string(),
        };
        let _ = writeln!(
            s,
            "fireflies   {} (pixels brighter than {}x the median luminance of their {}x{} window; {} tested{masked})",
            r.fireflies, r.ratio, r.window, r.window, r.tested
        );
        for f in &r.firefly_list {
            let _ = writeln!(
                s,
                "  ({}, {}) luminance {:.6}, median {:.6}",
                f.x, f.y, f.luminance, f.median
            );
        }
        if let (Some(change), Some(first)) = (r.mean_luminance_change_percent, first) {
            write_comparison(&mut s, r, first, change);
        }
    }
    s
}

/// The lines that compare an image with the `first`: the mean luminance `change` (in percent)
/// and the fireflies, what its render key says differs, and the differences pixel by pixel.
fn write_comparison(s: &mut String, r: &ImageReport, first: &ImageReport, change: f64) {
    let _ = writeln!(
        s,
        "vs first    mean luminance {change:+.3}%, fireflies {} -> {} ({})",
        first.fireflies, r.fireflies, first.path
    );
    if let Some(differ) = r.render_differences_from_first.as_deref() {
        if !differ.is_empty() {
            let items: Vec<String> = differ.iter().map(|(a, b)| format!("{a} -> {b}")).collect();
            let _ = writeln!(s, "            another render: {}", items.join("; "));
        }
    }
    match (
        r.pixels_differing_from_first,
        r.max_abs_difference_from_first,
        r.rms_difference_from_first,
    ) {
        (Some(0), _, _) => {
            let _ = writeln!(s, "            pixels bit-identical to the first image");
        }
        (Some(n), Some(d), Some(rms)) => {
            let _ = writeln!(
                s,
                "            {n} pixels differ from the first image (largest channel difference {d:.6}, RMS difference {rms:.6}, {:.3}% of its mean luminance)",
                100.0 * rms / first.mean_luminance
            );
            if let Some(block_rms) = r.rms_block_difference_from_first {
                let _ = writeln!(
                    s,
                    "            RMS difference of {b}x{b} block means {block_rms:.6} (the pixels' / {:.2}; / {b} for independent pixels)",
                    rms / block_rms,
                    b = r.block
                );
            }
            if let Some(e) = r.display_block_error_from_first {
                let _ = writeln!(
                    s,
                    "            as a PNG shows it (luminance, white = 1): RMS {:.5}; by 16x16 block median {:.5}, 95th percentile {:.5}, largest {:.5} ({} blocks)",
                    e.rms, e.median, e.p95, e.max, e.blocks
                );
            }
            if let (Some(mean), Some(se)) = (
                r.mean_luminance_difference,
                r.mean_luminance_difference_standard_error,
            ) {
                // Scripts read this line (scripts/gpu-session.sh): keep its shape.
                let _ = writeln!(
                    s,
                    "            mean luminance difference {mean:+.6e} +- {se:.6e} (one standard error over the pixels): {:.2} standard errors",
                    mean.abs() / se
                );
            }
        }
        _ => {
            let _ = writeln!(s, "            (not compared pixel by pixel: another size)");
        }
    }
}
