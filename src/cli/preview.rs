//! `gasworks preview`: the image a resume file holds (`render --checkpoint-every`, a stop, a
//! time limit, or rank 0 of a cluster render), so that a long render can be looked at while
//! it runs, or a killed one before it is resumed. Each pixel is the mean of the samples the
//! file has for it, black where it has none: the image `render` writes when it stops there.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::PngToneArgs;
use super::console::Verbosity;
use crate::render::checkpoint::{self, CheckpointHeader};
use crate::render::output::{self, ImageMeta};
use crate::render::Film;

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
    let held = SamplesHeld::of(&header, &film);
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

/// How many samples the pixels of a resume file's film hold, against the render's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SamplesHeld {
    /// What every pixel holds (the complete passes).
    everywhere: u32,
    /// The most any pixel holds (the end of the pass that was cut, in its finished tiles).
    most: u32,
    /// How many pixels hold more than `everywhere`, of how many.
    ahead: usize,
    pixels: usize,
    /// The render's samples per pixel (`None` where its key has none).
    planned: Option<u32>,
}

impl SamplesHeld {
    fn of(header: &CheckpointHeader, film: &Film) -> SamplesHeld {
        // Counts are whole numbers of samples, exact in the film's f32 (at most 2^24). The
        // least is the header's `spp_done`, or the next pass's end where every pixel has it.
        let counts = film.pixels.iter().map(|p| p[3] as u32);
        let everywhere = counts.clone().min().unwrap_or(header.spp_done);
        SamplesHeld {
            everywhere,
            most: counts.clone().max().unwrap_or(everywhere),
            ahead: counts.filter(|&n| n > everywhere).count(),
            pixels: film.pixels.len(),
            planned: header
                .render
                .split("; ")
                .find_map(|item| item.strip_prefix("spp ")?.parse().ok()),
        }
    }

    /// The image's render key, as `render` writes it for an image stopped there: the render's
    /// own key when every pixel has every sample; `spp 16 of 64` when every pixel has the
    /// same; `spp stopped: 16 everywhere, 16..32 in 1920 of 4096 pixels` otherwise. So the
    /// preview merges (`gasworks merge`) only with crops that hold the same samples.
    fn image_key(&self, render_key: &str) -> String {
        if self.ahead > 0 {
            output::key_with_spp(
                render_key,
                &format!(
                    "{} {} everywhere, {}..{} in {} of {} pixels",
                    output::SPP_STOPPED,
                    self.everywhere,
                    self.everywhere,
                    self.most,
                    self.ahead,
                    self.pixels
                ),
            )
        } else if Some(self.everywhere) == self.planned {
            render_key.to_string()
        } else {
            output::key_with_spp_held(render_key, self.everywhere)
        }
    }

    /// For the summary line: "16 of 64 samples per pixel, and 32 in 1920 of 4096 pixels".
    fn describe(&self) -> String {
        let planned = self
            .planned
            .map_or_else(|| "?".to_string(), |n| n.to_string());
        let mut s = format!(
            "{} of {planned} samples per pixel everywhere",
            self.everywhere
        );
        if self.ahead > 0 {
            s.push_str(&format!(
                ", and {} in {} of {} pixels",
                self.most, self.ahead, self.pixels
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(spp_done: u32) -> CheckpointHeader {
        CheckpointHeader {
            render: "scene x; size 4x2; spp 64; seed 0".into(),
            window: [0, 0, 4, 2],
            pass_spp: 16,
            spp_done,
            software: String::new(),
        }
    }

    fn film(counts: [f32; 8]) -> Film {
        let mut f = Film::new(4, 2);
        for (p, n) in f.pixels.iter_mut().zip(counts) {
            p[3] = n;
        }
        f
    }

    #[test]
    fn the_size_comes_from_the_render_key() {
        assert_eq!(frame_size("scene x; size 640x480; spp 4"), Some((640, 480)));
        assert_eq!(frame_size("scene x; spp 4"), None);
        assert_eq!(frame_size("scene x; size 640; spp 4"), None);
    }

    #[test]
    fn keys_say_what_the_pixels_hold() {
        let key = "scene x; size 4x2; spp 64; seed 0";
        let all = SamplesHeld::of(&header(64), &film([64.0; 8]));
        assert_eq!(all.image_key(key), key);
        let passes = SamplesHeld::of(&header(16), &film([16.0; 8]));
        assert_eq!(
            passes.image_key(key),
            "scene x; size 4x2; spp 16 of 64; seed 0"
        );
        assert_eq!(passes.describe(), "16 of 64 samples per pixel everywhere");
        let cut = SamplesHeld::of(
            &header(16),
            &film([16.0, 32.0, 32.0, 16.0, 16.0, 16.0, 32.0, 16.0]),
        );
        assert_eq!(
            cut.image_key(key),
            "scene x; size 4x2; spp stopped: 16 everywhere, 16..32 in 3 of 8 pixels; seed 0"
        );
        assert!(output::stopped_mid_pass(&cut.image_key(key)));
        assert_eq!(
            cut.describe(),
            "16 of 64 samples per pixel everywhere, and 32 in 3 of 8 pixels"
        );
        // Every pixel has the pass after `spp_done`: the boundary after it.
        let next = SamplesHeld::of(&header(16), &film([32.0; 8]));
        assert_eq!(
            next.image_key(key),
            "scene x; size 4x2; spp 32 of 64; seed 0"
        );
        // A first pass cut short: the pixels it did not reach hold nothing.
        let first = SamplesHeld::of(&header(0), &film([0.0, 16.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]));
        assert_eq!(
            first.describe(),
            "0 of 64 samples per pixel everywhere, and 16 in 1 of 8 pixels"
        );
    }
}
