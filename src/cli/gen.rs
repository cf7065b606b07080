//! `gasworks gen`: writes a procedural scene as OBJ + MTL.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::scene::gen::{self, ObjWriter, Written};
use crate::wording::counted;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// The classic Cornell box (published dimensions), 8 groups, 32 triangles
    Cornell,
    /// Crytek Sponza's heavy-tailed group sizes in an atrium (the GAS batching benchmark)
    SponzaLike,
    /// Shelves of unique toys; 9,936 triangles per shelf (--shelves 1007 is ten million)
    Toystore,
    /// Not a scene: a daylight sky with a sun, an environment map (sky.exr) for render --env-map
    Sky,
}

impl Preset {
    fn stem(self) -> &'static str {
        match self {
            Preset::Cornell => "cornell",
            Preset::SponzaLike => "sponza_like",
            Preset::Toystore => "toystore",
            Preset::Sky => "sky",
        }
    }
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Which scene to write
    #[arg(value_enum)]
    pub preset: Preset,
    /// Output folder (created if missing): cornell.obj, sponza_like.obj (with its textures) or
    /// toystore.obj (and toystore-walk.csv, a camera path down its aisles), each with its .mtl;
    /// sky.exr for sky
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
    /// sky: the sun's height above the horizon, in degrees [default: 35]
    #[arg(long, value_name = "DEG", allow_negative_numbers = true)]
    pub sun_elevation: Option<f32>,
    /// sky: the sun's direction around the up axis, in degrees from -Z towards +X [default: 30]
    #[arg(long, value_name = "DEG", allow_negative_numbers = true)]
    pub sun_azimuth: Option<f32>,
    /// sky: the map's width in texels; its height is half [default: 1024]
    #[arg(long, value_name = "TEXELS")]
    pub map_width: Option<u32>,
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
    let sky_only = a.sun_elevation.is_some() || a.sun_azimuth.is_some() || a.map_width.is_some();
    if sky_only && a.preset != Preset::Sky {
        anyhow::bail!("--sun-elevation, --sun-azimuth and --map-width apply to sky only");
    }
    if a.preset == Preset::Sky {
        return write_sky(&a);
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
            let written = write_toystore(shelves, a.seed, &a.output, a.quiet)?;
            write_walk(shelves, &a.output)?;
            written
        }
        Preset::Sky => unreachable!("written above"),
    };
    let seconds = start.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&written.obj)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "wrote {} and {}: {}, {}, {}, {:.1} MiB in {:.2} s",
        written.obj.display(),
        written.mtl.display(),
        counted(written.groups, "group", "groups"),
        counted(written.triangles, "triangle", "triangles"),
        counted(written.vertices, "vertex", "vertices"),
        bytes as f64 / (1024.0 * 1024.0),
        seconds
    );
    Ok(())
}

/// `gen sky`: the map as OUTPUT/sky.exr (linear radiance, 32-bit float).
fn write_sky(a: &GenArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let sun = gen::sky::Sun {
        elevation_deg: a.sun_elevation.unwrap_or(35.0),
        azimuth_deg: a.sun_azimuth.unwrap_or(30.0),
    };
    if !(-90.0..=90.0).contains(&sun.elevation_deg) || !sun.azimuth_deg.is_finite() {
        anyhow::bail!(
            "--sun-elevation {} --sun-azimuth {}: expected an elevation from -90 to 90 degrees \
             and a finite azimuth",
            sun.elevation_deg,
            sun.azimuth_deg
        );
    }
    let width = a.map_width.unwrap_or(1024);
    if !(2..=16384).contains(&width) {
        anyhow::bail!("--map-width {width}: expected 2 to 16384 texels");
    }
    let map = gen::sky::sky(width, sun)?;
    std::fs::create_dir_all(&a.output)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", a.output.display()))?;
    let path = a.output.join("sky.exr");
    write_sky_exr(&path, &map).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    println!(
        "wrote {}: a {}x{} latitude-longitude sky, the sun at elevation {} and azimuth {} \
         degrees, in {:.2} s (render with --env-map {})",
        path.display(),
        map.width,
        map.height,
        sun.elevation_deg,
        sun.azimuth_deg,
        start.elapsed().as_secs_f64(),
        path.display()
    );
    Ok(())
}

/// The map as a 32-bit float RGB OpenEXR, losslessly compressed (1.8 MB for the default
/// 1024x512 sky, a third of the raw texels).
fn write_sky_exr(
    path: &std::path::Path,
    map: &crate::scene::EnvironmentMap,
) -> exr::error::UnitResult {
    use exr::prelude::*;
    let width = map.width as usize;
    let texels = map.texels();
    let layer = Layer::new(
        (width, map.height as usize),
        LayerAttributes::default(),
        Encoding {
            line_order: LineOrder::Increasing,
            ..Encoding::SMALL_LOSSLESS
        },
        SpecificChannels::rgb(|p: Vec2<usize>| {
            let t = texels[p.y() * width + p.x()];
            (t.x, t.y, t.z)
        }),
    );
    Image::from_layer(layer).write().to_file(path)
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

/// The toy store's walk down its aisles, `toystore-walk.csv` beside it.
fn write_walk(shelves: u64, dir: &std::path::Path) -> anyhow::Result<()> {
    let walk = dir.join("toystore-walk.csv");
    let path = gen::toystore_walk(shelves);
    std::fs::write(&walk, path.to_csv())
        .with_context(|| format!("cannot write {}", walk.display()))?;
    println!(
        "wrote {}: a walk down the aisles, {} frames (render it with --camera-path)",
        walk.display(),
        path.frames.len()
    );
    Ok(())
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
