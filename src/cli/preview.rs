//! `gasworks preview`: the image a resume file holds (`render --checkpoint-every`, a stop, a
//! time limit, or rank 0 of a cluster render), so that a long render can be looked at while
//! it runs, or a killed one before it is resumed. Each pixel is the mean of the samples the
//! file has for it, black where it has none: the image `render` writes when it stops there.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::PngToneArgs;
use super::console::Verbosity;
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
    #[command(flatten)]
    pub tone: PngToneArgs,
    /// Print only warnings and errors
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: PreviewArgs) -> anyhow::Result<()> {
    let out = Verbosity::from_flags(a.quiet, false);
    // Checked before the file is read: a 4K film is 130 MB.
    output::check_writable(&a.output)?;
    a.tone.check(&a.output)?;
    let (header, film) = checkpoint::read(&a.resume_file)?;
    let (full_width, full_height) = frame_size(&header.render).with_context(|| {
        format!(
            "{}: its render key names no image size (`size WxH`)",
            a.resume_file.display()
        )
    })?;
    let window = header.window_tile();
    output::check_window_fits_format(&a.output, window, full_width, full_height)?;
    let held = SamplesHeld::of(&film, &header.render);
    let meta = ImageMeta {
        full_width,
        full_height,
        window,
        render: held.image_key(&header.render),
        exposure: a.tone.exposure,
        tonemap: a.tone.curve(),
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
    out.status(format_args!(
        "preview: {} ({}x{}{of_frame}; {}; from {})",
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
