//! `gasworks merge`: joins the crops of a frame (`render --pixelbounds`) into the whole image.

use std::path::PathBuf;

use clap::Args;

use super::args::PngToneArgs;
use crate::console::Verbosity;
use crate::render::merge;

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The crops, in any order: EXR or PNG files written by `gasworks render --pixelbounds`
    /// (they record where they lie in the frame)
    #[arg(required = true, num_args = 1..)]
    pub crops: Vec<PathBuf>,
    /// The whole image: .exr (from EXR crops), .png or .webp (from EXR or PNG crops)
    #[arg(short, long)]
    pub output: PathBuf,
    #[command(flatten)]
    pub tone: PngToneArgs,
    /// Print only warnings and errors
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: MergeArgs) -> anyhow::Result<()> {
    let out = Verbosity::from_flags(a.quiet, false);
    if let Some(crop) = a
        .crops
        .iter()
        .find(|c| crate::render::paths::same_file(c, &a.output))
    {
        anyhow::bail!(
            "-o {} is one of the crops ({}): writing there would overwrite it; name another file",
            a.output.display(),
            crop.display()
        );
    }
    let s = merge::merge_files(&a.crops, &a.output, a.tone.exposure, a.tone.curve())?;
    out.status(format_args!(
        "output: {} ({}x{}, joined from {} crop{})",
        a.output.display(),
        s.width,
        s.height,
        s.crops,
        if s.crops == 1 { "" } else { "s" }
    ));
    Ok(())
}
