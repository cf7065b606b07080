//! `gasworks info`: what a scene holds (or a resume file: the render it belongs to and how far
//! its pixels got; or an image: the render that made it), as text for people or one JSON
//! object for scripts.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::render::checkpoint;
use crate::scene::lights::{facing_warnings_of, light_facing, LightFacing, AXES};
use crate::scene::{obj, Bounds, Material, MaterialKind, Scene};

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// The scene, a Wavefront OBJ file (or a resume file, OUT.gasworks-resume: which render
    /// it belongs to and how far its pixels got; or an image gasworks wrote, .exr or .png:
    /// where it lies in its frame and the render that made it)
    pub scene: PathBuf,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Also list every group with its triangle count (always included in --json)
    #[arg(long)]
    pub groups: bool,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
}

/// Groups whose triangle counts fall in `[min, max]`: powers of two, `min = 2^k`,
/// `max = 2^(k+1) - 1` (or 0..0 for groups left empty by dropped degenerates).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub min: u64,
    pub max: u64,
    pub groups: usize,
    pub triangles: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MaterialInfo {
    pub name: String,
    pub kind: MaterialKind,
    /// Triangles using the material.
    pub triangles: u64,
    pub emissive: bool,
    pub textured: bool,
    /// Whether it has a `map_d` opacity mask (a cut-out).
    pub cut_out: bool,
    /// Whether it has a `map_Ke` emission map.
    pub emission_mapped: bool,
    /// Its bump map's kind, "height" or "normal" (`map_Bump` is read as either by what its
    /// image holds), when it has one.
    pub bump: Option<&'static str>,
    /// The share of its surface that is there (MTL `d`), below 1 for a see-through material.
    pub opacity: f32,
    /// Whether it has a `map_Ks` specular map.
    pub specular_mapped: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LightInfo {
    /// Emissive triangles.
    pub triangles: usize,
    /// Their total area, in scene units squared.
    pub area: f64,
    /// Emitted power of one face: pi * area * radiance, summed (the radiance averaged over the
    /// triangle where an emission map or a mask varies it: [`crate::scene::light_power`]).
    /// Lights emit from their front face only, so this is their power (twice it with `render
    /// --two-sided-lights`).
    pub power_per_side: [f64; 3],
    /// Emissive triangles whose front face (the side of the winding's normal, the only one
    /// that emits) faces each way, by dominant axis: `+X, -X, +Y, -Y, +Z, -Z`.
    pub facing: [usize; 6],
    /// Per light (its emissive triangles grouped by group and material): which way they face
    /// and whether they face the rest of the scene.
    pub lights: Vec<LightFacing>,
    /// Lights that face away from every other surface, or only a gap just behind them.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupInfo {
    pub name: String,
    pub triangles: u64,
}

/// Everything `info` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SceneInfo {
    pub source: String,
    /// The scene's content hash (`crate::scene::content_hash`), as 16 hex digits: the
    /// `content` item every image and resume file of a render of it carries.
    pub content: String,
    pub groups: usize,
    pub triangles: u64,
    pub vertices: u64,
    /// Triangles per group in power-of-two buckets, smallest first, empty buckets included
    /// between the smallest and the largest group.
    pub histogram: Vec<Bucket>,
    pub materials: Vec<MaterialInfo>,
    pub lights: LightInfo,
    /// The uniform environment radiance, when the scene has one.
    pub environment: Option<[f32; 3]>,
    /// None for a scene without triangles.
    pub bounds: Option<Bounds>,
    pub degenerate_dropped: usize,
    /// Of those, the triangles too large or too small for single precision.
    pub out_of_scale_dropped: usize,
    pub textures: usize,
    /// Texels of all the textures, and the bytes they take as gasworks keeps them: linear RGB
    /// in 32-bit floats (12 bytes a texel), in memory and again on the GPU.
    pub texels: u64,
    pub texel_bytes: u64,
    pub warnings: Vec<String>,
    pub group_list: Vec<GroupInfo>,
}

/// The power-of-two bucket of a triangle count: 0 for none, k + 1 for [2^k, 2^(k+1)).
fn bucket_index(triangles: u64) -> usize {
    if triangles == 0 {
        0
    } else {
        64 - triangles.leading_zeros() as usize
    }
}

/// The per-group triangle histogram.
pub fn histogram(counts: impl IntoIterator<Item = u64>) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = (0..=64)
        .map(|i| {
            let (min, max) = if i == 0 {
                (0, 0)
            } else {
                let lo = 1u64 << (i - 1);
                (lo, lo.saturating_sub(1).saturating_add(lo))
            };
            Bucket {
                min,
                max,
                groups: 0,
                triangles: 0,
            }
        })
        .collect();
    for c in counts {
        let b = &mut buckets[bucket_index(c)];
        b.groups += 1;
        b.triangles += c;
    }
    let first = buckets.iter().position(|b| b.groups > 0);
    let last = buckets.iter().rposition(|b| b.groups > 0);
    match (first, last) {
        (Some(f), Some(l)) => buckets[f..=l].to_vec(),
        _ => Vec::new(),
    }
}

pub fn scene_info(scene: &Scene) -> SceneInfo {
    let material_triangles = material_triangle_counts(scene);
    let (lights, bounds) = light_info(scene);
    SceneInfo {
        source: scene.source.clone(),
        content: format!("{:016x}", crate::scene::content_hash::content_hash(scene)),
        groups: scene.groups.len(),
        triangles: scene.triangle_count() as u64,
        vertices: scene.groups.iter().map(|g| g.positions.len() as u64).sum(),
        histogram: histogram(scene.groups.iter().map(|g| g.triangle_count() as u64)),
        materials: scene
            .materials
            .iter()
            .zip(&material_triangles)
            .map(|(m, &triangles)| material_info(m, triangles))
            .collect(),
        lights,
        environment: scene.environment.map(|e| e.radiance.to_array()),
        bounds: (!bounds.is_empty()).then_some(bounds),
        degenerate_dropped: scene.report.degenerate_dropped,
        out_of_scale_dropped: scene.report.out_of_scale_dropped,
        textures: scene.textures.len(),
        texels: scene.textures.iter().map(|t| t.texels.len() as u64).sum(),
        texel_bytes: scene
            .textures
            .iter()
            .map(|t| std::mem::size_of_val(t.texels.as_slice()) as u64)
            .sum(),
        warnings: scene.report.warnings.clone(),
        group_list: scene
            .groups
            .iter()
            .map(|g| GroupInfo {
                name: g.name.clone(),
                triangles: g.triangle_count() as u64,
            })
            .collect(),
    }
}

/// Triangles per material, by material index (faces naming no material are not counted).
fn material_triangle_counts(scene: &Scene) -> Vec<u64> {
    let mut material_triangles = vec![0u64; scene.materials.len()];
    for g in &scene.groups {
        for &m in &g.face_materials {
            if let Some(count) = material_triangles.get_mut(m as usize) {
                *count += 1;
            }
        }
    }
    material_triangles
}

/// One material's line of the report, `triangles` of the scene using it.
fn material_info(m: &Material, triangles: u64) -> MaterialInfo {
    MaterialInfo {
        name: m.name.clone(),
        kind: m.kind,
        triangles,
        emissive: m.is_emissive(),
        textured: m.diffuse_texture.is_some(),
        cut_out: m.opacity_texture.is_some(),
        emission_mapped: m.emission_texture.is_some(),
        bump: m.bump.map(|b| b.kind_name()),
        opacity: if m.dissolves() { m.opacity } else { 1.0 },
        specular_mapped: m.specular_texture.is_some(),
    }
}

/// The lights' area, power and facing, and the scene's box (found by the same pass).
fn light_info(scene: &Scene) -> (LightInfo, Bounds) {
    let mut power = [0f64; 3];
    let mut area = 0f64;
    for light in &scene.lights {
        area += light.area as f64;
        // What maps leave of Ke (exactly Ke without them).
        let radiance = crate::scene::light_power::mean_emission(scene, light);
        for (c, p) in power.iter_mut().enumerate() {
            *p += std::f64::consts::PI * light.area as f64 * radiance[c];
        }
    }
    // One pass gives the lights' facing and the scene's box.
    let survey = light_facing(scene);
    let bounds = survey.scene_bounds;
    let mut facing = [0usize; 6];
    for l in &survey.lights {
        for (total, n) in facing.iter_mut().zip(l.facing) {
            *total += n;
        }
    }
    let light_warnings = facing_warnings_of(&survey);
    let lights = LightInfo {
        triangles: scene.lights.len(),
        area,
        power_per_side: power,
        facing,
        lights: survey.lights,
        warnings: light_warnings,
    };
    (lights, bounds)
}

fn kind_name(kind: MaterialKind) -> &'static str {
    match kind {
        MaterialKind::Diffuse => "diffuse",
        MaterialKind::Glossy => "glossy",
        MaterialKind::Mirror => "mirror",
        MaterialKind::Glass => "glass",
    }
}

/// The report as text.
pub fn render_text(info: &SceneInfo, list_groups: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scene       {}", info.source);
    let _ = writeln!(s, "groups      {}", info.groups);
    let _ = writeln!(
        s,
        "triangles   {} ({} vertices)",
        info.triangles, info.vertices
    );
    match &info.bounds {
        Some(b) => {
            let _ = writeln!(
                s,
                "bounds      min ({}, {}, {})  max ({}, {}, {})",
                b.min[0], b.min[1], b.min[2], b.max[0], b.max[1], b.max[2]
            );
        }
        None => {
            let _ = writeln!(s, "bounds      (empty)");
        }
    }
    write_histogram(&mut s, &info.histogram);
    write_materials(&mut s, &info.materials);
    write_lights(&mut s, &info.lights);
    match info.environment {
        Some(e) => {
            let _ = writeln!(s, "environment ({}, {}, {})", e[0], e[1], e[2]);
        }
        None => {
            let _ = writeln!(s, "environment none");
        }
    }
    if info.textures == 0 {
        let _ = writeln!(s, "textures    0");
    } else {
        let _ = writeln!(
            s,
            "textures    {} ({} texel{}, {:.1} MiB as linear RGB floats, in memory and on the GPU)",
            info.textures,
            info.texels,
            if info.texels == 1 { "" } else { "s" },
            info.texel_bytes as f64 / (1024.0 * 1024.0)
        );
    }
    let _ = writeln!(
        s,
        "content     {} (the hash of the geometry, materials and textures that its renders' images and resume files carry)",
        info.content
    );
    let _ = writeln!(
        s,
        "degenerate  {} dropped{}",
        crate::wording::counted(info.degenerate_dropped, "triangle", "triangles"),
        crate::scene::obj::out_of_scale_note(info.out_of_scale_dropped)
    );
    let _ = writeln!(s, "warnings    {}", info.warnings.len());
    for w in &info.warnings {
        let _ = writeln!(s, "  {w}");
    }
    if list_groups {
        let _ = writeln!(s, "group list:");
        for g in &info.group_list {
            let _ = writeln!(s, "  {:>11}  {}", g.triangles, g.name);
        }
    }
    s
}

/// The triangles-per-group histogram, one bar per bucket.
fn write_histogram(s: &mut String, histogram: &[Bucket]) {
    let _ = writeln!(s, "triangles per group:");
    let widest = histogram.iter().map(|b| b.groups).max().unwrap_or(1).max(1);
    for b in histogram {
        let bar = "#".repeat((b.groups * 40).div_ceil(widest));
        let range = if b.min == b.max {
            format!("{}", b.min)
        } else {
            format!("{}..{}", b.min, b.max)
        };
        let _ = writeln!(
            s,
            "  {range:>15}  {:>6} groups {:>11} triangles  {bar}",
            b.groups, b.triangles
        );
    }
}

/// The materials: a count, then one line each with its kind, triangles and notes.
fn write_materials(s: &mut String, materials: &[MaterialInfo]) {
    let _ = writeln!(s, "materials   {}", materials.len());
    for m in materials {
        let notes = material_notes(m);
        let _ = writeln!(
            s,
            "  {:<24} {:<8} {:>11} triangles{notes}",
            m.name,
            kind_name(m.kind),
            m.triangles
        );
    }
}

/// What a material's line adds after its triangles: emissive, textured, the maps it has and
/// its opacity, each after a space.
fn material_notes(m: &MaterialInfo) -> String {
    let mut notes = String::new();
    if m.emissive {
        notes.push_str(" emissive");
    }
    if m.textured {
        notes.push_str(" textured");
    }
    if m.cut_out {
        notes.push_str(" cut-out");
    }
    if m.emission_mapped {
        notes.push_str(" emission-mapped");
    }
    if m.specular_mapped {
        notes.push_str(" specular-mapped");
    }
    match m.bump {
        Some("height") => notes.push_str(" bump-mapped"),
        Some(_) => notes.push_str(" normal-mapped"),
        None => {}
    }
    if m.opacity < 1.0 {
        let _ = write!(notes, " see-through (d {})", m.opacity);
    }
    notes
}

/// The lights: their triangles, area and power, the way their front faces point, one line
/// per light, and the warnings about them.
fn write_lights(s: &mut String, lights: &LightInfo) {
    let p = lights.power_per_side;
    let _ = writeln!(
        s,
        "lights      {} emissive triangles, area {:.6}, power ({:.6}, {:.6}, {:.6}) from their front faces",
        lights.triangles, lights.area, p[0], p[1], p[2]
    );
    if lights.triangles > 0 {
        let facing: Vec<String> = AXES
            .iter()
            .zip(lights.facing)
            .map(|(axis, n)| format!("{axis} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "  front faces (the emitting side, by dominant axis): {}",
            facing.join(", ")
        );
    }
    for l in &lights.lights {
        let _ = writeln!(
            s,
            "  {:<24} {:<16} {:>6} triangles, area {:.6}: {}; {} face the scene, {} only a gap behind, {} nothing",
            l.group,
            l.material,
            l.triangles,
            l.area,
            l.facing_text(),
            l.toward_scene,
            l.toward_gap_only,
            l.away_from_everything
        );
    }
    for w in &lights.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
}

pub fn run(a: InfoArgs) -> anyhow::Result<()> {
    if crate::render::output::ImageFormat::from_path(&a.scene).is_ok() {
        let info = image_info(&a.scene)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&info)?);
        } else {
            print!("{}", image_text(&info));
        }
        return Ok(());
    }
    if checkpoint::looks_like_resume_file(&a.scene) {
        let info = resume_info(&a.scene)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&info)?);
        } else {
            print!("{}", resume_text(&info));
        }
        return Ok(());
    }
    let scene = obj::load_obj(&a.scene, &obj::LoadOptions { quiet: a.quiet })?;
    let mut info = scene_info(&scene);
    // A malformed camera comment, which render refuses: said here too.
    if let Err(e) = crate::scene::Camera::hint_from_obj(&a.scene) {
        info.warnings.push(e.to_string());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print!("{}", render_text(&info, a.groups));
    }
    Ok(())
}

/// What an image gasworks wrote says of itself (`render`, `merge`, `denoise`, `preview`): where
/// it lies in its frame and the render that made it, as its render key records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    pub image: String,
    /// "EXR" (linear radiance) or "PNG" (tone-mapped sRGB).
    pub format: String,
    /// The whole frame's width and height.
    pub frame: [u32; 2],
    /// The pixels the file holds: x, y, width, height within the frame.
    pub window: [u32; 4],
    /// The render key's items ("scene cornell.obj", "spp 16 of 64", "exposure 1"...): what
    /// decides the pixels, compared by `merge` and `denoise`. Empty where the file has none.
    pub render: Vec<String>,
}

/// Reads an image's metadata ([`crate::render::output::read_image`]).
pub fn image_info(path: &std::path::Path) -> anyhow::Result<ImageInfo> {
    let image = crate::render::output::read_image(path)?;
    let m = &image.meta;
    Ok(ImageInfo {
        image: path.display().to_string(),
        format: image.format.to_string(),
        frame: [m.full_width, m.full_height],
        window: [m.window.x, m.window.y, m.window.w, m.window.h],
        render: m
            .render
            .split("; ")
            .filter(|item| !item.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// [`ImageInfo`] for people.
pub fn image_text(info: &ImageInfo) -> String {
    let mut s = String::new();
    let what = match info.format.as_str() {
        "EXR" => "linear radiance",
        _ => "tone-mapped sRGB",
    };
    let _ = writeln!(s, "image: {} ({}, {what})", info.image, info.format);
    let ([fw, fh], [x, y, w, h]) = (info.frame, info.window);
    if [x, y, w, h] == [0, 0, fw, fh] {
        let _ = writeln!(s, "pixels: {w}x{h}, the whole frame");
    } else {
        let _ = writeln!(s, "pixels: {w}x{h} at ({x}, {y}) of a {fw}x{fh} frame");
    }
    if info.render.is_empty() {
        let _ = writeln!(
            s,
            "render: none recorded (not the image of a gasworks render)"
        );
    } else {
        let _ = writeln!(s, "render:");
        for item in &info.render {
            let _ = writeln!(s, "  {item}");
        }
    }
    s
}

/// What a resume file (`OUT.gasworks-resume`) holds: the render it belongs to and how far
/// each of its pixels got, so that a stopped render can be told apart from another before
/// `render --resume` is given it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResumeInfo {
    pub resume_file: String,
    /// The render's settings as the file keys them (`output::render_key`'s items: "scene
    /// cornell.obj", "spp 64", "size 512x512", ...): `render --resume` must match them.
    pub render: Vec<String>,
    /// The render's samples per pixel (the key's `spp`), where it says.
    pub spp: Option<u32>,
    /// The pixels the film covers: x, y, width, height within the frame.
    pub window: [u32; 4],
    pub pass_spp: u32,
    /// Samples per pixel that every pixel has.
    pub spp_done: u32,
    /// What wrote it ("gasworks 0.1.0 (abcdef123456)"); empty in older files.
    pub software: String,
    /// The tone mapping of the render's PNG as its flags ("--exposure 1.5 --tonemap aces"),
    /// which `preview` applies: `None` for the default (and in older files).
    pub png_tone: Option<String>,
    /// How many pixels hold each sample count, fewest samples first: one entry at a pass
    /// boundary; two when a stop inside a pass kept its finished tiles.
    pub samples_per_pixel: Vec<SampleCount>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SampleCount {
    pub samples: u32,
    pub pixels: usize,
}

/// Reads and checks a resume file ([`checkpoint::read`]) and says what it holds.
pub fn resume_info(path: &std::path::Path) -> anyhow::Result<ResumeInfo> {
    let (header, film) = checkpoint::read(path)?;
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for p in &film.pixels {
        *counts.entry(p[3] as u32).or_default() += 1;
    }
    let render: Vec<String> = header
        .render
        .split("; ")
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect();
    let spp = render
        .iter()
        .find_map(|item| item.strip_prefix("spp ")?.parse().ok());
    Ok(ResumeInfo {
        resume_file: path.display().to_string(),
        render,
        spp,
        window: header.window,
        pass_spp: header.pass_spp,
        spp_done: header.spp_done,
        software: header.software,
        png_tone: (header.png_tone != checkpoint::PngTone::default()).then(|| {
            format!(
                "--exposure {} --tonemap {}",
                header.png_tone.exposure,
                header.png_tone.tonemap.name()
            )
        }),
        samples_per_pixel: counts
            .into_iter()
            .map(|(samples, pixels)| SampleCount { samples, pixels })
            .collect(),
    })
}

/// [`ResumeInfo`] for people.
pub fn resume_text(info: &ResumeInfo) -> String {
    let mut s = String::new();
    let by = if info.software.is_empty() {
        "an earlier gasworks build"
    } else {
        info.software.as_str()
    };
    let _ = writeln!(s, "resume file: {} (written by {by})", info.resume_file);
    let _ = writeln!(s, "render:");
    for item in &info.render {
        let _ = writeln!(s, "  {item}");
    }
    let [x, y, w, h] = info.window;
    let _ = writeln!(
        s,
        "pixels: {w}x{h} at ({x}, {y}) of the frame, in passes of {} samples per pixel",
        info.pass_spp
    );
    let of = info.spp.map(|n| format!(" (of {n})")).unwrap_or_default();
    let total: usize = info.samples_per_pixel.iter().map(|c| c.pixels).sum();
    let counts: Vec<String> = match &info.samples_per_pixel[..] {
        [one] => vec![format!("{} in all {total} pixels", one.samples)],
        many => many
            .iter()
            .map(|c| format!("{} in {} of {total} pixels", c.samples, c.pixels))
            .collect(),
    };
    let _ = writeln!(s, "samples per pixel{of}: {}", counts.join(", "));
    let complete = info
        .spp
        .is_some_and(|n| info.samples_per_pixel.iter().all(|c| c.samples == n));
    let resume = format!("--resume {}", info.resume_file);
    if complete {
        let _ = writeln!(
            s,
            "the render is complete: the command that wrote it, plus {resume}, writes its image and renders nothing"
        );
    } else {
        let _ = writeln!(s, "to finish it: the command that wrote it, plus {resume}");
    }
    let toned = info
        .png_tone
        .as_ref()
        .map(|t| format!(" (a PNG's tone mapping is the render's: {t})"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "to see its image: gasworks preview {} -o PREVIEW.png{toned}",
        info.resume_file
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_file_inside_a_pass_and_a_complete_one_read_as_such() {
        let mut info = ResumeInfo {
            resume_file: "o.exr.gasworks-resume".into(),
            render: vec!["scene a.obj".into(), "spp 8".into()],
            spp: Some(8),
            window: [0, 0, 64, 64],
            pass_spp: 4,
            spp_done: 4,
            software: String::new(),
            png_tone: None,
            samples_per_pixel: vec![
                SampleCount {
                    samples: 4,
                    pixels: 3000,
                },
                SampleCount {
                    samples: 8,
                    pixels: 1096,
                },
            ],
        };
        let text = resume_text(&info);
        assert!(
            text.contains("(written by an earlier gasworks build)"),
            "{text}"
        );
        assert!(
            text.contains(
                "samples per pixel (of 8): 4 in 3000 of 4096 pixels, 8 in 1096 of 4096 pixels\n"
            ),
            "{text}"
        );
        assert!(text.contains("to finish it: "), "{text}");
        info.samples_per_pixel = vec![SampleCount {
            samples: 8,
            pixels: 4096,
        }];
        let text = resume_text(&info);
        assert!(text.contains("8 in all 4096 pixels"), "{text}");
        assert!(
            text.contains("the render is complete: the command that wrote it, plus --resume o.exr.gasworks-resume, writes its image"),
            "{text}"
        );
    }

    #[test]
    fn histogram_buckets_are_powers_of_two() {
        let h = histogram([2, 2, 3, 4, 100, 0]);
        let got: Vec<(u64, u64, usize, u64)> = h
            .iter()
            .map(|b| (b.min, b.max, b.groups, b.triangles))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 0, 1, 0),
                (1, 1, 0, 0),
                (2, 3, 3, 7),
                (4, 7, 1, 4),
                (8, 15, 0, 0),
                (16, 31, 0, 0),
                (32, 63, 0, 0),
                (64, 127, 1, 100),
            ]
        );
        assert!(histogram([]).is_empty());
        let top = histogram([u64::MAX]);
        assert_eq!(top[0].max, u64::MAX);
    }

    #[test]
    fn info_of_the_cornell_box() {
        let info = scene_info(&crate::scene::gen::cornell());
        assert_eq!(info.groups, 8);
        assert_eq!(info.triangles, 32);
        assert_eq!(info.histogram.len(), 3);
        assert_eq!(info.histogram[0].groups, 6); // 2 triangles each
        assert_eq!(info.histogram[2].groups, 2); // the blocks, 10 each
        assert_eq!(info.lights.triangles, 2);
        let expected = std::f64::consts::PI * 13650.0 * 17.0;
        assert!((info.lights.power_per_side[0] - expected).abs() / expected < 1e-4);
        let text = render_text(&info, true);
        assert!(text.contains("groups      8"));
        assert!(text.contains("short_block"));
        let json: serde_json::Value = serde_json::to_value(&info).unwrap();
        assert_eq!(json["materials"][1]["kind"], "diffuse");
        // The light faces down, into the box.
        assert_eq!(info.lights.facing, [0, 0, 0, 2, 0, 0]);
        assert_eq!(info.lights.lights.len(), 1);
        assert_eq!(info.lights.lights[0].toward_scene, 2);
        assert!(info.lights.warnings.is_empty());
        assert!(text.contains("front faces (the emitting side, by dominant axis): +X 0, -X 0, +Y 0, -Y 2, +Z 0, -Z 0"), "{text}");
        assert_eq!(json["lights"]["facing"][3], 2);
    }

    /// An emission map scales the lights' power by its mean over them, and the material says
    /// it has one.
    #[test]
    fn an_emission_mapped_light_reports_the_power_the_map_leaves() {
        let mut scene = crate::scene::gen::cornell();
        let plain = scene_info(&scene).lights.power_per_side;
        let light = scene.lights[0];
        let lamp = scene.groups[light.group as usize].face_materials[light.prim as usize];
        for g in &mut scene.groups {
            g.uvs = vec![glam::Vec2::new(0.5, 0.5); g.positions.len()];
        }
        scene.textures.push(crate::scene::Texture {
            path: "quarter".into(),
            width: 1,
            height: 1,
            texels: vec![[0.25, 0.5, 1.0]],
            mapping: crate::scene::UvMapping::IDENTITY,
        });
        scene.materials[lamp as usize].emission_texture = Some(0);
        scene.finalize();
        let info = scene_info(&scene);
        for (c, scale) in [0.25, 0.5, 1.0].into_iter().enumerate() {
            let expected = plain[c] * scale;
            let got = info.lights.power_per_side[c];
            assert!(
                (got - expected).abs() <= 1e-9 * expected,
                "{c}: {got} vs {expected}"
            );
        }
        let text = render_text(&info, true);
        assert_eq!((info.texels, info.texel_bytes), (1, 12));
        assert!(
            text.contains("textures    1 (1 texel, 0.0 MiB as linear RGB floats"),
            "{text}"
        );
        let line = text.lines().find(|l| l.contains("emission-mapped"));
        assert!(
            line.is_some_and(|l| l.contains(&scene.materials[lamp as usize].name)),
            "{text}"
        );
    }
}
