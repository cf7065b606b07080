//! `gasworks preview`: the image a resume file holds (`render --checkpoint-every`, a stop, a
//! time limit, or rank 0 of a cluster render), so that a long render can be looked at while
//! it runs, or a killed one before it is resumed. Each pixel is the mean of the samples the
//! file has for it, black where it has none: the image `render` writes when it stops there.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::{PngToneArgs, ToneCurveArg};
use crate::console::Verbosity;
use crate::render::checkpoint;
use crate::render::output::{self, ImageMeta, SamplesHeld};

#[derive(Args, Debug)]
pub struct PreviewArgs {
    /// The resume file (OUT.gasworks-resume, beside a render's output; it may be written to
    /// meanwhile: each checkpoint replaces it whole)
    pub resume_file: PathBuf,
    /// The image: .png (tone-mapped sRGB), .webp or .exr (linear radiance)
    #[arg(short, long)]
    pub output: PathBuf,
    /// Exposure of a PNG, in stops: its radiance is multiplied by 2^EV before the tone curve.
    /// Default: the render's, which the resume file records (so the preview is the PNG the
    /// render writes). An EXR holds linear radiance as rendered
    #[arg(long, value_name = "EV", allow_negative_numbers = true)]
    pub exposure: Option<f32>,
    /// Tone curve of a PNG: clamp or aces. Default: the render's, which the resume file
    /// records. An EXR holds linear radiance as rendered
    #[arg(long, value_enum)]
    pub tonemap: Option<ToneCurveArg>,
    /// Print only warnings and errors
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: PreviewArgs) -> anyhow::Result<()> {
    let out = Verbosity::from_flags(a.quiet, false);
    // Checked before the file is read: a 4K film is 130 MB.
    output::check_writable(&a.output)?;
    let given = PngToneArgs {
        exposure: a.exposure.unwrap_or(0.0),
        tonemap: a.tonemap.unwrap_or(ToneCurveArg::Clamp),
    };
    given.check(&a.output)?;
    let (header, film) = checkpoint::read(&a.resume_file)?;
    // What was not given is the render's, where the output takes a tone mapping (a PNG or
    // WebP; not an EXR, which holds radiance as rendered).
    let recorded = header.png_tone;
    let tone = (
        a.exposure.unwrap_or(recorded.exposure),
        a.tonemap.map_or(recorded.tonemap, Into::into),
    );
    let (exposure, tonemap) = if output::check_exposure(tone.0, &a.output).is_ok()
        && output::check_tonemap(tone.1, &a.output).is_ok()
    {
        tone
    } else {
        (given.exposure, given.curve())
    };
    let (full_width, full_height) = frame_size(&header.render).with_context(|| {
        format!(
            "{}: its render key names no image size (`size WxH`)",
            a.resume_file.display()
        )
    })?;
    let window = header.window_tile();
    output::check_window_fits_format(&a.output, window, full_width, full_height)?;
    let held = SamplesHeld::of(&film, &header.render, header.spp_done);
    let meta = ImageMeta {
        full_width,
        full_height,
        window,
        render: held.image_key(&header.render),
        exposure,
        tonemap,
    };
    output::write_image(&film, &a.output, &meta)?;
    let of_frame = if (window.w, window.h) == (full_width, full_height) {
        String::new()
    } else {
        format!(
            ", the crop at ({}, {}) of {full_width}x{full_height}",
            window.x, window.y
        )
    };
    let toned = if (exposure, tonemap) == (0.0, output::ToneCurve::Clamp) {
        String::new()
    } else {
        format!("; --exposure {exposure} --tonemap {}", tonemap.name())
    };
    out.status(format_args!(
        "preview: {} ({}x{}{of_frame}; {}{toned}; from {})",
        a.output.display(),
        window.w,
        window.h,
        held.describe(),
        a.resume_file.display()
    ));
    Ok(())
}

/// The frame's size, from a render key's `size WxH` item.
fn frame_size(render_key: &str) -> Option<(u32, u32)> {
    let size = render_key
        .split("; ")
        .find_map(|item| item.strip_prefix("size "))?;
    let (w, h) = size.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_comes_from_the_render_key() {
        assert_eq!(frame_size("scene x; size 640x480; spp 4"), Some((640, 480)));
        assert_eq!(frame_size("scene x; spp 4"), None);
        assert_eq!(frame_size("scene x; size 640; spp 4"), None);
    }
}
