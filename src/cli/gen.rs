//! `gasworks gen`: writes a procedural scene as OBJ + MTL.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::scene::gen::{self, ObjWriter, Written};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// The classic Cornell box (published dimensions), 8 groups, 32 triangles
    Cornell,
    /// Crytek Sponza's heavy-tailed group sizes in an atrium (the GAS batching benchmark)
    SponzaLike,
    /// Shelves of unique toys; 9,936 triangles per shelf (--shelves 1007 is ten million)
    Toystore,
}

impl Preset {
    fn stem(self) -> &'static str {
        match self {
            Preset::Cornell => "cornell",
            Preset::SponzaLike => "sponza_like",
            Preset::Toystore => "toystore",
        }
    }
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Which scene to write
    #[arg(value_enum)]
    pub preset: Preset,
    /// Output folder (created if missing); the files are PRESET.obj and PRESET.mtl in it
    #[arg(short, long)]
    pub output: PathBuf,
    /// sponza-like: number of groups [default: 390]
    #[arg(long)]
    pub groups: Option<usize>,
    /// sponza-like: total triangles, met within a few percent [default: 260000]
    #[arg(long)]
    pub triangles: Option<u64>,
    /// sponza-like, toystore: seed of the layout, sizes and materials
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// toystore: number of shelf units, 9,936 triangles each [default: 4]
    #[arg(long)]
    pub shelves: Option<u64>,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: GenArgs) -> anyhow::Result<()> {
    let sponza_only = a.groups.is_some() || a.triangles.is_some();
    if sponza_only && a.preset != Preset::SponzaLike {
        anyhow::bail!("--groups and --triangles apply to sponza-like only");
    }
    if a.shelves.is_some() && a.preset != Preset::Toystore {
        anyhow::bail!("--shelves applies to toystore only");
    }
    let start = Instant::now();
    let stem = a.preset.stem();
    let written = match a.preset {
        Preset::Cornell => {
            let scene = gen::cornell();
            let c = gen::cornell_camera();
            let camera = format!(
                "camera (published): --eye {},{},{} --look-at {},{},{} --fov {}",
                c.eye.x, c.eye.y, c.eye.z, c.look_at.x, c.look_at.y, c.look_at.z, c.fov_y_deg
            );
            let header = [
                "The Cornell box, Cornell University Program of Computer Graphics data (mm)".into(),
                format!(
                    "light lowered to y = {} (0.5 below the ceiling)",
                    gen::CORNELL_LIGHT_Y
                ),
                camera.clone(),
                // Read back by `render` as the scene's default camera.
                hint_line(c),
            ];
            let written = write_scene(&scene, &a.output, stem, &header)?;
            println!("{camera}");
            written
        }
        Preset::SponzaLike => {
            let groups = a.groups.unwrap_or(gen::SPONZA_LIKE_GROUPS);
            let triangles = a.triangles.unwrap_or(gen::SPONZA_LIKE_TRIANGLES);
            let scene = gen::sponza_like(groups, triangles, a.seed)?;
            let header = [
                format!(
                    "sponza-like: --groups {groups} --triangles {triangles} --seed {}",
                    a.seed
                ),
                // Read back by `render` as the scene's default camera.
                hint_line(gen::sponza_like_camera()),
            ];
            write_scene(&scene, &a.output, stem, &header)?
        }
        Preset::Toystore => {
            let shelves = a.shelves.unwrap_or(4);
            gen::check_shelves(shelves)?;
            write_toystore(shelves, a.seed, &a.output, a.quiet)?
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&written.obj)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "wrote {} and {}: {} groups, {} triangles, {} vertices, {:.1} MiB in {:.2} s",
        written.obj.display(),
        written.mtl.display(),
        written.groups,
        written.triangles,
        written.vertices,
        bytes as f64 / (1024.0 * 1024.0),
        seconds
    );
    Ok(())
}

/// A camera hint as a header line (the writer adds the comment's `# `).
fn hint_line(camera: crate::scene::Camera) -> String {
    camera.to_hint().trim_start_matches("# ").to_string()
}

fn write_scene(
    scene: &crate::scene::Scene,
    dir: &std::path::Path,
    stem: &str,
    header: &[String],
) -> anyhow::Result<Written> {
    let mut writer = ObjWriter::create(dir, stem, &scene.materials, &scene.textures, header)?;
    for group in &scene.groups {
        writer.write_group(group)?;
    }
    Ok(writer.finish()?)
}

/// The toy store, streamed: one shelf unit in memory at a time.
fn write_toystore(
    shelves: u64,
    seed: u64,
    dir: &std::path::Path,
    quiet: bool,
) -> anyhow::Result<Written> {
    let header = [
        format!(
            "toystore: --shelves {shelves} --seed {seed}: {} triangles",
            gen::toystore_triangles(shelves)
        ),
        // Read back by `render` as the scene's default camera.
        hint_line(gen::toystore_camera()),
    ];
    let materials = gen::toystore_materials();
    let mut writer = ObjWriter::create(dir, "toystore", &materials, &[], &header)?;
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(shelves + 2);
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} writing groups {pos}/{len} [{bar:30}] {eta}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    };
    gen::toystore_groups(shelves, seed, |group| {
        bar.inc(1);
        writer.write_group(&group)
    })?;
    bar.finish_and_clear();
    Ok(writer.finish()?)
}
