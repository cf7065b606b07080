//! `gasworks denoise`: filters a render's noise, guided by the layers `render --aov
//! albedo,normal` wrote beside it ([`crate::render::denoise`]: an edge-avoiding à-trous
//! filter, no library and no GPU needed).
//!
//! The noisy image stays as it is: the result goes to `-o`, which may not name the image or
//! one of its layers. The layers must be the image's own (their render keys say so) and of
//! its size; a crop (`render --pixelbounds`) is denoised on its own pixels, and its
//! result keeps its place in the frame, under a render key that says it was denoised (so it
//! merges only with crops denoised alike; its border pixels saw fewer neighbours than they
//! would in the whole frame).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::args::PngToneArgs;
use crate::console::Verbosity;
use crate::cpu::aov::Aov;
use crate::render::denoise::{denoise, DenoiseOptions};
use crate::render::output::{self, ImageMeta, Pixels};

#[derive(Args, Debug)]
pub struct DenoiseArgs {
    /// The noisy image: linear radiance, an .exr as `render -o IMAGE.exr --aov albedo,normal`
    /// writes it
    pub image: PathBuf,
    /// The denoised image: .exr (linear), .png (tone-mapped sRGB) or .webp
    #[arg(short, long)]
    pub output: PathBuf,
    /// The albedo layer [default: beside the image, IMAGE.albedo.exr]
    #[arg(long, value_name = "EXR")]
    pub albedo: Option<PathBuf>,
    /// The normal layer [default: beside the image, IMAGE.normal.exr]
    #[arg(long, value_name = "EXR")]
    pub normal: Option<PathBuf>,
    /// À-trous passes, 1 to 10: pass i averages taps 2^i pixels apart, so 5 reach 62 pixels
    /// either side
    #[arg(long, default_value_t = DenoiseOptions::default().iterations)]
    pub iterations: u32,
    /// How many standard deviations of the estimated noise a neighbour's light may differ
    /// by before it counts as another lighting (a shadow's edge): smaller keeps more edges
    /// and more noise
    #[arg(long, value_name = "K", default_value_t = DenoiseOptions::default().sigma_luminance)]
    pub sigma_luminance: f32,
    /// The albedo difference (RGB distance) at which a neighbour counts as another
    /// material: smaller keeps objects of different colours apart
    #[arg(long, value_name = "D", default_value_t = DenoiseOptions::default().sigma_albedo)]
    pub sigma_albedo: f32,
    /// A pixel whose light is more than R times that of the brightest of its neighbours on
    /// the same surface is a firefly (a rare bright path, which no amount of averaging with
    /// its neighbours hides), and is scaled down to R times it; those neighbours take what
    /// fits of the light taken off (each up to the firefly's new value)
    #[arg(
        long,
        value_name = "R",
        default_value_t = 2.0,
        conflicts_with = "keep_fireflies"
    )]
    pub firefly_ratio: f32,
    /// Keep fireflies as rendered (they carry light: scaling them down darkens the image a
    /// little, by the measurements in docs/guide/output-and-layers.md)
    #[arg(long)]
    pub keep_fireflies: bool,
    #[command(flatten)]
    pub tone: PngToneArgs,
    /// Print only warnings and errors
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: DenoiseArgs) -> anyhow::Result<()> {
    let out = Verbosity::from_flags(a.quiet, false);
    let options = DenoiseOptions {
        iterations: a.iterations,
        sigma_luminance: a.sigma_luminance,
        sigma_albedo: a.sigma_albedo,
        firefly_ratio: (!a.keep_fireflies).then_some(a.firefly_ratio),
        ..DenoiseOptions::default()
    };
    // Before any file is read: a typo in a number costs no wait.
    options.check()?;
    let albedo_path = a
        .albedo
        .clone()
        .unwrap_or_else(|| crate::session::aov_path(&a.image, Aov::Albedo));
    let normal_path = a
        .normal
        .clone()
        .unwrap_or_else(|| crate::session::aov_path(&a.image, Aov::Normal));
    // Nothing lost: the result never replaces one of its inputs.
    for (what, input) in [
        ("the noisy image", &a.image),
        ("the albedo layer", &albedo_path),
        ("the normal layer", &normal_path),
    ] {
        if crate::render::paths::same_file(input, &a.output) {
            anyhow::bail!(
                "-o {} is {what} ({}): writing there would overwrite it; name another file",
                a.output.display(),
                input.display()
            );
        }
    }
    a.tone.check(&a.output)?;
    output::check_writable(&a.output)?;

    let (image, color) = read_linear(&a.image, "the noisy image")?;
    let albedo = read_layer(&albedo_path, Aov::Albedo, &a.image, &image)?;
    let normal = read_layer(&normal_path, Aov::Normal, &a.image, &image)?;
    let (w, h) = (image.window.w, image.window.h);
    let t = Instant::now();
    let denoised = denoise(&color, &albedo, &normal, w, h, &options)
        .with_context(|| format!("cannot denoise {}", a.image.display()))?;
    let seconds = t.elapsed().as_secs_f64();
    let render = if image.render.is_empty() {
        options.key_item()
    } else {
        format!("{}; {}", image.render, options.key_item())
    };
    let meta = ImageMeta {
        render,
        exposure: a.tone.exposure,
        tonemap: a.tone.curve(),
        ..image
    };
    output::write_pixels(&denoised, &a.output, &meta)?;
    out.status(format_args!(
        "output: {} ({w}x{h}, denoised in {seconds:.2} s: {} passes)",
        a.output.display(),
        options.iterations
    ));
    Ok(())
}

/// Reads `path`, which must hold linear radiance (an EXR): its metadata and pixels.
fn read_linear(path: &Path, what: &str) -> anyhow::Result<(ImageMeta, Vec<[f32; 3]>)> {
    let image = output::read_image(path).with_context(|| format!("cannot read {what}"))?;
    match image.pixels {
        Pixels::Linear(pixels) => Ok((image.meta, pixels)),
        Pixels::Srgb8(_) => anyhow::bail!(
            "{}: {what} must be linear radiance, an .exr (`render -o IMAGE.exr --aov \
             albedo,normal` writes the image and its layers); a PNG is tone-mapped and clamped",
            path.display()
        ),
    }
}

/// Reads the guide layer `aov` of `image` from `path`: an EXR of the same window of the same
/// frame, written by the same render when both files say which (their render keys).
fn read_layer(
    path: &Path,
    aov: Aov,
    image_path: &Path,
    m: &ImageMeta,
) -> anyhow::Result<Vec<[f32; 3]>> {
    if !path.exists() {
        anyhow::bail!(
            "{}: no {} layer there; render the image with `--aov albedo,normal` (it writes \
             the layers beside it), or name the layer with --{}",
            path.display(),
            aov.name(),
            aov.name()
        );
    }
    let what = format!("the {} layer", aov.name());
    let (l, pixels) = read_linear(path, &what)?;
    if (l.full_width, l.full_height, l.window) != (m.full_width, m.full_height, m.window) {
        anyhow::bail!(
            "{}: the {} layer covers {}x{} pixels at {},{} of a {}x{} frame, and {} covers {}x{} \
             at {},{} of a {}x{} frame: they are not of one render",
            path.display(),
            aov.name(),
            l.window.w,
            l.window.h,
            l.window.x,
            l.window.y,
            l.full_width,
            l.full_height,
            image_path.display(),
            m.window.w,
            m.window.h,
            m.window.x,
            m.window.y,
            m.full_width,
            m.full_height
        );
    }
    // `render --aov` writes a layer's key as the image's plus its own items; a file without
    // a key (another renderer's) is taken on its size alone.
    if !m.render.is_empty() && !l.render.is_empty() {
        let own = l
            .render
            .strip_prefix(m.render.as_str())
            .is_some_and(|rest| rest.starts_with(&format!("; aov {}", aov.name())));
        if !own {
            let image_items = m.render.clone();
            let layer_items = l
                .render
                .split("; aov ")
                .next()
                .unwrap_or_default()
                .to_string();
            let differences = output::render_key_differences(&image_items, &layer_items)
                .into_iter()
                .map(|(a, b)| format!("image: {a}, layer: {b}"))
                .collect::<Vec<_>>();
            anyhow::bail!(
                "{}: not the {} layer of {}'s render{}",
                path.display(),
                aov.name(),
                image_path.display(),
                if differences.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", differences.join("; "))
                }
            );
        }
    }
    Ok(pixels)
}
