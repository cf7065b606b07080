//! The Wavefront OBJ + MTL loader.
//!
//! The file is read once, in line-aligned blocks ([`read`]); each block is cut into chunks
//! that are parsed in parallel ([`parse`]), after a cheap counting pass that tells each chunk
//! its first line number and how many `v`/`vt`/`vn` come before it. So every line is checked
//! as a sequential scan would check it, and every error names the file and the line. A
//! sequential stitch ([`assemble`]) then follows the `o`/`g` sections, `usemtl` and `mtllib` in
//! file order, and the groups are built in parallel. The result depends only on the file, not
//! on the number of threads or the block size.
//!
//! What the loader accepts, repairs with one warning (naming the file, the first line and
//! the count), and refuses is listed in `docs/obj-loader.md`. In short:
//! - exactly one [`Group`] per `o`/`g` section that holds faces; faces keep their own
//!   `usemtl` material; convex polygons are fans, concave ones are split by ear clipping
//!   ([`polygon`]); groups without normals in smoothing groups (`s 1`) get computed ones;
//! - repaired with a warning: normal or texture indices that point nowhere (the attribute is
//!   dropped for those faces), faces of fewer than 3 vertices (skipped; on a last line
//!   without a newline, the warning says the file looks truncated), faces that cross
//!   themselves or concave faces of more than 4096 corners (kept as fans), `usemtl` without a
//!   name (default material), vertices with a non-finite coordinate (the triangles that use
//!   them are dropped), a missing MTL file or texture, an unknown material, `l`/`p`
//!   statements and vertex colours (ignored);
//! - refused: a malformed number or face, a vertex index that points nowhere, a malformed
//!   MTL statement, a file with no triangles, a UTF-16 or UTF-32 file.

mod assemble;
mod mtl;
mod parse;
mod polygon;
mod read;
mod survey;

use std::collections::HashMap;
use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use glam::{Vec2, Vec3};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use super::{Group, Material, Scene};
use crate::wording::counted;
use assemble::{Assembled, Assembler, MaterialUse, Mode, Pools, DEFAULT_MATERIAL};
use parse::{ChunkInput, ChunkOut, Counts, Occurrences, Tally};
pub use survey::{GroupSurvey, Survey};

// The loader's texture decoding, for the generators and the writer: a texture made in
// memory, or written out, reads back from its file bit for bit.
pub(crate) use mtl::{colour_texture_of, grey_texture_of, linear_to_srgb, srgb8_colour_values};

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// No progress bar.
    pub quiet: bool,
}

/// Why a scene could not be loaded. Every message names the file, and the line where there is
/// one (as `file:line: ...`).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: cannot read the file: {source}", path.display())]
    Read {
        path: PathBuf,
        line: usize,
        source: std::io::Error,
    },
    /// A malformed OBJ or MTL statement.
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}:{line}: {message}", path.display())]
    IndexOutOfRange {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}:{line}: {what} is not a finite number: {value}", path.display())]
    NotFinite {
        path: PathBuf,
        line: usize,
        what: String,
        value: String,
    },
    /// The file holds no triangle; `detail` says what it holds instead, where that helps.
    #[error("{}: the scene has no triangles{detail}", path.display())]
    Empty { path: PathBuf, detail: String },
    /// The file is text in an encoding other than ASCII/UTF-8.
    #[error("{}: the file is {encoding} text; OBJ and MTL files are read as UTF-8 (or ASCII): save it as UTF-8", path.display())]
    Encoding {
        path: PathBuf,
        encoding: &'static str,
    },
    /// Not OBJ or MTL text: another format (by its first bytes) or binary data (NUL bytes).
    #[error("{}: the file is {what}", path.display())]
    NotText { path: PathBuf, what: String },
    /// Lines that end in a carriage return alone (classic Mac OS): the file reads as one line.
    #[error("{}: its lines end in a carriage return alone (classic Mac OS), so it reads as one line; OBJ lines end in LF or CRLF: convert it (e.g. tr '\\r' '\\n' < old.obj > new.obj)", path.display())]
    CarriageReturnLines { path: PathBuf },
    /// More elements than 32-bit indices can address.
    #[error("{}: {message}", path.display())]
    TooLarge { path: PathBuf, message: String },
    /// The second reading of a file ([`load_obj_part`]) found other groups than the first.
    #[error("{}: the file changed between its two readings ({what}); render it again once it is written", path.display())]
    Changed { path: PathBuf, what: String },
}

impl LoadError {
    /// The file the error is about (the OBJ, or one of its MTL files).
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Open { path, .. }
            | LoadError::Read { path, .. }
            | LoadError::Syntax { path, .. }
            | LoadError::IndexOutOfRange { path, .. }
            | LoadError::NotFinite { path, .. }
            | LoadError::Empty { path, .. }
            | LoadError::Encoding { path, .. }
            | LoadError::NotText { path, .. }
            | LoadError::CarriageReturnLines { path }
            | LoadError::TooLarge { path, .. }
            | LoadError::Changed { path, .. } => path,
        }
    }

    /// The 1-based line the error is about, where there is one.
    pub fn line(&self) -> Option<usize> {
        match self {
            LoadError::Read { line, .. }
            | LoadError::Syntax { line, .. }
            | LoadError::IndexOutOfRange { line, .. }
            | LoadError::NotFinite { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Files smaller than this load without a progress bar: they take well under a second.
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

/// Bytes read (and held) at a time; two blocks are in memory, the one parsed and the one
/// read. Big enough to keep the threads busy between the sequential steps, small next to the
/// parsed scene.
const BLOCK_BYTES: usize = 8 << 20;

/// Bytes per parallel parse task: many per block, so that the threads finish together.
const CHUNK_BYTES: usize = 256 << 10;

/// Loads an OBJ file and its MTL libraries into a [`Scene`].
pub fn load_obj(path: &Path, opts: &LoadOptions) -> Result<Scene, LoadError> {
    load_with(path, opts, BLOCK_BYTES, CHUNK_BYTES)
}

/// Reads a file as [`load_obj`] does, and refuses it as [`load_obj`] would, but keeps of each
/// group only its box, triangle count, lights and hash ([`Survey`]): what splitting it over
/// ranks needs, before [`load_obj_part`] reads it again.
pub fn survey_obj(path: &Path, opts: &LoadOptions) -> Result<Survey, LoadError> {
    let (assembled, counts) =
        read_and_assemble(path, opts, Mode::Survey, BLOCK_BYTES, CHUNK_BYTES)?;
    survey::into_survey(path, assembled, counts)
}

/// The scene of a file that `survey` surveyed, with only the groups `keep` marks (one flag a
/// group) holding triangles, the others empty so that every group keeps its index: the
/// other groups' triangles are dropped as they are parsed. Every group, material and
/// texture kept is the one [`load_obj`] gives, bit for bit, and so are the counts of dropped
/// triangles and the warnings (the survey's, for the whole scene), and the lights where `keep`
/// holds every group that [`GroupSurvey::emitting`] marks.
pub fn load_obj_part(
    path: &Path,
    opts: &LoadOptions,
    survey: &Survey,
    keep: &[bool],
) -> Result<Scene, LoadError> {
    let mode = Mode::Keep(keep.into());
    let (assembled, counts) = read_and_assemble(path, opts, mode, BLOCK_BYTES, CHUNK_BYTES)?;
    let scene = into_scene(path, assembled, counts.v, Some(survey))?;
    let changed = |what: String| LoadError::Changed {
        path: path.to_path_buf(),
        what,
    };
    if scene.groups.len() != survey.groups.len() {
        return Err(changed(format!(
            "{} groups, then {}",
            survey.groups.len(),
            scene.groups.len()
        )));
    }
    let hashes: Vec<Option<u64>> = scene
        .groups
        .par_iter()
        .zip(keep)
        .map(|(g, &k)| k.then(|| crate::scene::content_hash::group_hash(g)))
        .collect();
    for ((h, g), name) in hashes.iter().zip(&survey.groups).zip(&scene.groups) {
        if h.is_some_and(|h| h != g.hash) || name.name != g.name {
            return Err(changed(format!("group {} differs", g.name)));
        }
    }
    Ok(scene)
}

/// [`load_obj`] with the block and chunk sizes given: the result must not depend on them.
fn load_with(
    path: &Path,
    opts: &LoadOptions,
    block_bytes: usize,
    chunk_bytes: usize,
) -> Result<Scene, LoadError> {
    let (assembled, counts) = read_and_assemble(path, opts, Mode::All, block_bytes, chunk_bytes)?;
    into_scene(path, assembled, counts.v, None)
}

/// Reads and assembles the file, building the groups `mode` asks for. Also returns the
/// file's counts of `v`, `vt` and `vn`.
fn read_and_assemble(
    path: &Path,
    opts: &LoadOptions,
    mode: Mode,
    block_bytes: usize,
    chunk_bytes: usize,
) -> Result<(Assembled, Counts), LoadError> {
    let file = File::open(path).map_err(|source| LoadError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let metadata = file.metadata().ok();
    // Opening a directory succeeds on Unix; reading it then fails with EISDIR at "line 1".
    if metadata.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(LoadError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory, not an OBJ file",
            ),
        });
    }
    let size = metadata.map(|m| m.len()).unwrap_or(0);
    let progress = progress_bar(path, size, opts.quiet);
    let mut reader = read::BlockReader::new(file, block_bytes);
    let mut pools = Pools::default();
    let mut assembler = Assembler::new(path, mode);
    let mut before = Counts::default();
    let read_error = |source, lines: usize| LoadError::Read {
        path: path.to_path_buf(),
        line: lines + 1,
        source,
    };
    let mut current = reader
        .next_block(Vec::new())
        .map_err(|e| read_error(e, 0))?;
    if let Some(first) = &current {
        if let Some(encoding) = read::wide_encoding(first) {
            return Err(LoadError::Encoding {
                path: path.to_path_buf(),
                encoding,
            });
        }
        // Its start only: binary data further on is an error at its line (a damaged file).
        if let Some(what) = read::not_text(&first[..first.len().min(4096)], "OBJ") {
            return Err(LoadError::NotText {
                path: path.to_path_buf(),
                what,
            });
        }
        // A first block (megabytes, or the whole file) with carriage returns and no line feed.
        if memchr::memchr(b'\n', first).is_none() && memchr::memchr(b'\r', first).is_some() {
            return Err(LoadError::CarriageReturnLines {
                path: path.to_path_buf(),
            });
        }
    }
    let mut first_block = true;
    let mut spare = Vec::new();
    while let Some(block) = current {
        progress.inc(block.len() as u64);
        let mut text = block.as_slice();
        if first_block {
            first_block = false;
            text = text.strip_prefix(read::UTF8_BOM).unwrap_or(text);
        }
        // The next block is read while this one is parsed.
        let (next, parsed) = rayon::join(
            || reader.next_block(std::mem::take(&mut spare)),
            || parse_block(path, text, before, chunk_bytes, &mut pools, &mut assembler),
        );
        before = parsed?;
        assembler.build_closed(&pools);
        spare = block;
        current = next.map_err(|e| read_error(e, before.lines))?;
    }
    progress.finish_and_clear();
    let assembled = assembler.finish(&pools);
    Ok((assembled, before))
}

/// Counts, then parses, the chunks of one block in parallel, and hands their results to the
/// assembler in file order. Returns the counts up to the end of the block.
fn parse_block(
    path: &Path,
    text: &[u8],
    before: Counts,
    chunk_bytes: usize,
    pools: &mut Pools,
    assembler: &mut Assembler<'_>,
) -> Result<Counts, LoadError> {
    let chunks = read::split_chunks(text, chunk_bytes);
    let counts: Vec<Counts> = chunks.par_iter().map(|c| parse::count(c)).collect();
    let mut after = before;
    for c in &counts {
        after.add(c);
    }
    // Indices are 32-bit, the two largest values meaning "none" and "dropped".
    for (what, n) in [
        ("vertex positions (v)", after.v),
        ("texture coordinates (vt)", after.vt),
        ("vertex normals (vn)", after.vn),
    ] {
        if n >= parse::DROPPED as u64 {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                message: format!(
                    "more than {} {what}: more than 32-bit indices can address",
                    parse::DROPPED - 1
                ),
            });
        }
    }
    let (v0, vt0, vn0) = (pools.positions.len(), pools.uvs.len(), pools.normals.len());
    pools.positions.resize(after.v as usize, Vec3::ZERO);
    pools.uvs.resize(after.vt as usize, Vec2::ZERO);
    pools.normals.resize(after.vn as usize, Vec3::ZERO);
    let mut positions = &mut pools.positions[v0..];
    let mut uvs = &mut pools.uvs[vt0..];
    let mut normals = &mut pools.normals[vn0..];
    let mut inputs = Vec::with_capacity(chunks.len());
    let mut at = before;
    for (text, c) in chunks.iter().zip(&counts) {
        let (p, rest) = std::mem::take(&mut positions).split_at_mut(c.v as usize);
        positions = rest;
        let (t, rest) = std::mem::take(&mut uvs).split_at_mut(c.vt as usize);
        uvs = rest;
        let (n, rest) = std::mem::take(&mut normals).split_at_mut(c.vn as usize);
        normals = rest;
        inputs.push(ChunkInput {
            path,
            text,
            first_line: at.lines + 1,
            before: at,
            positions: p,
            uvs: t,
            normals: n,
        });
        at.add(c);
    }
    let mut outs: Vec<ChunkOut> = inputs.into_par_iter().map(parse::parse_chunk).collect();
    // Every vertex a face of this block can use is in place now.
    let positions = &pools.positions;
    outs.par_iter_mut()
        .for_each(|out| polygon::split_concave(out, positions));
    for out in outs {
        assembler.absorb(out)?;
    }
    Ok(after)
}

/// Materials, textures and warnings around the assembled groups (`vertices`: the file's `v`
/// count, for the error of a file without faces).
fn into_scene(
    path: &Path,
    assembled: Assembled,
    vertices: u64,
    whole: Option<&Survey>,
) -> Result<Scene, LoadError> {
    let Assembled {
        mut groups,
        libraries,
        material_uses,
        tally,
        mut group_warnings,
        mut non_finite_dropped,
        triangles_parsed,
        ..
    } = assembled;
    if let Some(survey) = whole {
        group_warnings = survey.group_warnings.clone();
        non_finite_dropped = survey.non_finite_dropped;
    }
    let mut warnings = libraries.warnings;
    let mut textures = mtl::TextureCache::default();
    let mut materials = convert_materials(
        &libraries.materials,
        &libraries.sources,
        &mut textures,
        &mut warnings,
    );
    let known: HashMap<&str, ()> = libraries
        .materials
        .iter()
        .map(|m| (m.name.as_str(), ()))
        .collect();
    warn_about_material_uses(path, &material_uses, &known, &mut warnings);
    warnings.extend(tally_warnings(path, &tally, non_finite_dropped));
    warnings.extend(group_warnings);

    // The default material goes last, and only when a face (of the whole scene) uses it.
    let default_index = materials.len() as u32;
    let used_here = point_at_default_material(&mut groups, default_index);
    if used_here
        || whole.is_some_and(|s| {
            s.groups
                .iter()
                .any(|g| g.materials.contains(&default_index))
        })
    {
        materials.push(Material::default_diffuse());
    }

    let uses: Vec<GroupUse> = match whole {
        None => groups.iter().map(GroupUse::of).collect(),
        Some(survey) => survey.groups.iter().map(GroupUse::surveyed).collect(),
    };
    warnings.extend(maps_without_uvs(path, &uses, &materials));

    let mut scene = Scene::new(&path.display().to_string(), groups, materials);
    scene.textures = textures.textures;
    scene.report.warnings.extend(warnings);
    if let Some(survey) = whole {
        // The survey refused a scene without triangles; a rank's part may hold none.
        scene.report.degenerate_dropped = survey.degenerate_dropped;
        scene.report.out_of_scale_dropped = survey.out_of_scale_dropped;
    } else if scene.triangle_count() == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
            detail: empty_detail(
                &tally,
                vertices,
                triangles_parsed,
                non_finite_dropped,
                scene.report.degenerate_dropped,
            ) + &out_of_scale_note(scene.report.out_of_scale_dropped),
        });
    }
    Ok(scene)
}

/// The gasworks materials of the libraries' materials (`sources`: the library of each), with
/// their textures loaded into `textures`.
fn convert_materials(
    mtl_materials: &[mtl::MtlMaterial],
    sources: &[PathBuf],
    textures: &mut mtl::TextureCache,
    warnings: &mut Vec<String>,
) -> Vec<Material> {
    let mut materials: Vec<Material> = Vec::with_capacity(mtl_materials.len() + 1);
    for (m, source) in mtl_materials.iter().zip(sources) {
        let mut material = mtl::convert(m, warnings, source);
        load_material_maps(m, source, &mut material, textures, warnings);
        materials.push(material);
    }
    materials
}

/// Loads the maps of one converted material (`source`: its library).
fn load_material_maps(
    m: &mtl::MtlMaterial,
    source: &Path,
    material: &mut Material,
    textures: &mut mtl::TextureCache,
    warnings: &mut Vec<String>,
) {
    // Under a black Ke an emission map would multiply nothing (convert has warned): it is
    // not decoded. The colour map goes first and the mask right after it: exporters name
    // one RGBA file for both, which the cache then decodes once.
    let emission_map = m
        .emission_texture
        .as_ref()
        .filter(|_| material.is_emissive());
    // Likewise a specular map where the material has no specular lobe.
    let specular_map = m.specular_texture.as_ref().filter(|_| {
        matches!(
            material.kind,
            crate::scene::MaterialKind::Glossy | crate::scene::MaterialKind::Mirror
        )
    });
    let maps = [
        (
            m.diffuse_texture.as_ref(),
            mtl::TexelUse::Colour,
            m.diffuse_texture_mapping,
            &mut material.diffuse_texture,
        ),
        (
            m.opacity_texture.as_ref(),
            mtl::TexelUse::Mask(m.opacity_channel),
            m.opacity_texture_mapping,
            &mut material.opacity_texture,
        ),
        (
            emission_map,
            mtl::TexelUse::Emission,
            m.emission_texture_mapping,
            &mut material.emission_texture,
        ),
        (
            specular_map,
            mtl::TexelUse::Colour,
            m.specular_texture_mapping,
            &mut material.specular_texture,
        ),
    ];
    for (name, usage, mapping, slot) in maps {
        if let Some(name) = name {
            *slot = textures.load(source, &m.name, name, usage, mapping, warnings);
        }
    }
    if let Some(bump) = &m.bump_texture {
        material.bump = textures.load_bump(source, &m.name, bump, warnings);
    }
}

/// Points the faces that use the default material at `default_index`; whether any does.
fn point_at_default_material(groups: &mut [Group], default_index: u32) -> bool {
    groups
        .par_iter_mut()
        .map(|g| {
            let mut used = false;
            for m in &mut g.face_materials {
                if *m == DEFAULT_MATERIAL {
                    *m = default_index;
                    used = true;
                }
            }
            used
        })
        .reduce(|| false, |a, b| a || b)
}

/// What [`maps_without_uvs`] looks at in a group: whether it has texture coordinates, and
/// the materials its faces use (each face's, or each material once).
struct GroupUse<'a> {
    name: &'a str,
    has_uvs: bool,
    materials: &'a [u32],
}

impl GroupUse<'_> {
    fn of(g: &Group) -> GroupUse<'_> {
        GroupUse {
            name: &g.name,
            has_uvs: !g.uvs.is_empty(),
            materials: &g.face_materials,
        }
    }

    fn surveyed(g: &GroupSurvey) -> GroupUse<'_> {
        GroupUse {
            name: &g.name,
            has_uvs: g.has_uvs,
            materials: &g.materials,
        }
    }
}

/// One warning per kind of map that groups without texture coordinates use: a map cannot be
/// looked up there, so a cut-out material's faces (`map_d`) render solid, an emission map's
/// (`map_Ke`) emit the constant Ke and a bump map's render smooth.
fn maps_without_uvs(path: &Path, groups: &[GroupUse], materials: &[Material]) -> Vec<String> {
    type Uses = fn(&Material) -> bool;
    let kinds: [(Uses, &str, &str); 3] = [
        (
            |m| m.opacity_texture.is_some(),
            "cut-out materials (map_d)",
            "render solid",
        ),
        (
            |m| m.emission_texture.is_some(),
            "emission maps (map_Ke)",
            "emit their material's constant Ke",
        ),
        (
            |m| m.bump.is_some(),
            "bump or normal maps (bump, map_Bump, norm)",
            "render smooth",
        ),
    ];
    let mut warnings = Vec::new();
    for (uses, what, outcome) in kinds {
        let mut first: Option<(&str, &str)> = None;
        let mut count = 0;
        for g in groups.iter().filter(|g| !g.has_uvs) {
            let mapped = g
                .materials
                .iter()
                .find_map(|&m| materials.get(m as usize).filter(|m| uses(m)));
            if let Some(m) = mapped {
                count += 1;
                first.get_or_insert((g.name, m.name.as_str()));
            }
        }
        if let Some((group, material)) = first {
            warnings.push(format!(
                "{}: {} {what} without texture coordinates (vt), so their faces {outcome} (group {group}, material {material}{})",
                path.display(),
                counted(count, "group uses", "groups use"),
                if count == 1 { "" } else { ", the first" },
            ));
        }
    }
    warnings
}

/// Said after a count of degenerate triangles when some of them had an area, but one single
/// precision cannot carry ([`crate::scene::LoadReport::out_of_scale_dropped`]); empty when
/// none.
pub fn out_of_scale_note(out_of_scale: usize) -> String {
    match out_of_scale {
        0 => String::new(),
        n => format!(
            " ({n} of them not flat but too large or too small for single precision: an edge beyond about 4e9 or below about 1e-11 units; rescale the scene)"
        ),
    }
}

/// What a file without triangles holds instead, for the error.
fn empty_detail(
    tally: &Tally,
    vertices: u64,
    triangles_parsed: usize,
    non_finite_dropped: usize,
    degenerate: usize,
) -> String {
    let mut parts = Vec::new();
    if triangles_parsed == 0 {
        let points = counted(tally.points.count, "p statement", "p statements");
        let lines = counted(tally.polylines.count, "l statement", "l statements");
        match (tally.points.count, tally.polylines.count) {
            (0, 0) => {}
            (_, 0) => parts.push(format!(
                "it holds only points ({points}), which are not surfaces"
            )),
            (0, _) => parts.push(format!(
                "it holds only lines ({lines}), which are not surfaces"
            )),
            _ => parts.push(format!(
                "it holds only points and lines ({points} and {lines}), which are not surfaces"
            )),
        }
        let short = tally.short_faces.count + tally.truncated_faces.count;
        if short > 0 {
            parts.push(format!(
                "{} fewer than 3 vertices {} skipped",
                counted(short, "face with", "faces with"),
                if short == 1 { "was" } else { "were" }
            ));
        }
        if parts.is_empty() && vertices > 0 {
            parts.push(format!(
                "it holds {} but no faces (f)",
                counted(vertices as usize, "vertex (v)", "vertices (v)")
            ));
        }
    }
    match (non_finite_dropped, degenerate) {
        (0, 0) => {}
        (0, d) => parts.push(format!("all {d} were degenerate and dropped")),
        (n, 0) => parts.push(format!(
            "all {n} touched a vertex with non-finite coordinates and were dropped"
        )),
        (n, d) => parts.push(format!(
            "{n} touched a vertex with non-finite coordinates and the other {d} were degenerate: all were dropped"
        )),
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// One warning per kind of repair, naming the first line and the count.
fn tally_warnings(path: &Path, tally: &Tally, non_finite_dropped: usize) -> Vec<String> {
    let file = path.display();
    skipped_statement_notes(tally)
        .into_iter()
        .chain(pointing_nowhere_notes(tally))
        .chain(non_finite_notes(tally, non_finite_dropped))
        .chain(fan_split_notes(tally))
        .filter(|(o, _)| o.count > 0)
        .map(|(o, what)| format!("{file}:{}: {what}", o.first_line))
        .collect()
}

/// The notes (occurrences, text) on statements that the loader skips or reads in part.
fn skipped_statement_notes(tally: &Tally) -> [(&Occurrences, String); 6] {
    let t = tally;
    [
        (
            &t.polylines,
            format!(
                "{} ignored: lines are not surfaces",
                counted(
                    t.polylines.count,
                    "polyline (l) statement",
                    "polyline (l) statements"
                )
            ),
        ),
        (
            &t.points,
            format!(
                "{} ignored: points are not surfaces",
                counted(
                    t.points.count,
                    "point (p) statement",
                    "point (p) statements"
                )
            ),
        ),
        (
            &t.vertex_colours,
            format!(
                "vertex colours of {} ignored",
                counted(t.vertex_colours.count, "vertex", "vertices")
            ),
        ),
        (
            &t.short_faces,
            format!(
                "{} fewer than 3 vertices and {} skipped",
                counted(t.short_faces.count, "face has", "faces have"),
                if t.short_faces.count == 1 {
                    "is"
                } else {
                    "are"
                }
            ),
        ),
        (
            &t.truncated_faces,
            format!(
                "the face on the last line has fewer than 3 vertices and is skipped; {}",
                parse::TRUNCATED_NOTE
            ),
        ),
        (
            &t.unnamed_materials,
            format!(
                "{} no material name; the faces that follow get the default material",
                counted(
                    t.unnamed_materials.count,
                    "usemtl statement has",
                    "usemtl statements have"
                )
            ),
        ),
    ]
}

/// The notes (occurrences, text) on face indices that point nowhere.
fn pointing_nowhere_notes(tally: &Tally) -> [(&Occurrences, String); 2] {
    let t = tally;
    [
        (
            &t.normals_nowhere,
            format!(
                "{} normal indices that point nowhere; {} normals are dropped",
                counted(t.normals_nowhere.count, "face has", "faces have"),
                if t.normals_nowhere.count == 1 {
                    "its"
                } else {
                    "their"
                }
            ),
        ),
        (
            &t.uvs_nowhere,
            format!(
                "{} texture coordinate indices that point nowhere; {} texture coordinates are dropped",
                counted(t.uvs_nowhere.count, "face has", "faces have"),
                if t.uvs_nowhere.count == 1 {
                    "its"
                } else {
                    "their"
                }
            ),
        ),
    ]
}

/// The notes (occurrences, text) on vertex data that is not finite.
fn non_finite_notes(tally: &Tally, non_finite_dropped: usize) -> [(&Occurrences, String); 3] {
    let t = tally;
    [
        (
            &t.non_finite_positions,
            format!(
                "{} a coordinate that is not a finite number; {} that use them {} dropped",
                counted(
                    t.non_finite_positions.count,
                    "vertex (v) has",
                    "vertices (v) have"
                ),
                counted(non_finite_dropped, "triangle", "triangles"),
                if non_finite_dropped == 1 { "is" } else { "are" }
            ),
        ),
        (
            &t.non_finite_normals,
            format!(
                "{} not finite; groups that use them get geometric normals",
                counted(
                    t.non_finite_normals.count,
                    "vertex normal (vn) is",
                    "vertex normals (vn) are"
                )
            ),
        ),
        (
            &t.non_finite_uvs,
            format!(
                "{} not finite; their non-finite parts are read as 0",
                counted(
                    t.non_finite_uvs.count,
                    "texture coordinate (vt) is",
                    "texture coordinates (vt) are"
                )
            ),
        ),
    ]
}

/// The notes (occurrences, text) on faces split as fans, which may cover the wrong area.
fn fan_split_notes(tally: &Tally) -> [(&Occurrences, String); 2] {
    let t = tally;
    [
        (
            &t.self_intersecting_polygons,
            format!(
                "{} or {} over {}: no split into triangles is right, so {} split as fans from the first corner and may cover the wrong area",
                counted(t.self_intersecting_polygons.count, "face crosses", "faces cross"),
                if t.self_intersecting_polygons.count == 1 { "folds" } else { "fold" },
                if t.self_intersecting_polygons.count == 1 { "itself" } else { "themselves" },
                if t.self_intersecting_polygons.count == 1 { "it is" } else { "they are" },
            ),
        ),
        (
            &t.huge_concave_polygons,
            format!(
                "{} more than {} corners, too many to split by ear clipping: {} split as fans from the first corner and may cover the wrong area",
                counted(t.huge_concave_polygons.count, "concave face has", "concave faces have"),
                polygon::MAX_EAR_CLIPPED_CORNERS,
                if t.huge_concave_polygons.count == 1 { "it is" } else { "they are" },
            ),
        ),
    ]
}

/// The byte-count bar of a big file's load, hidden for small files, with `quiet`, and when
/// stderr is not a terminal.
fn progress_bar(path: &Path, size: u64, quiet: bool) -> ProgressBar {
    if quiet || size < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} loading {msg} {bytes}/{total_bytes} [{bar:30}] {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    bar
}

/// Warns about `usemtl` names that resolve to no material: their faces get the default one.
fn warn_about_material_uses(
    path: &Path,
    uses: &HashMap<String, MaterialUse>,
    known: &HashMap<&str, ()>,
    warnings: &mut Vec<String>,
) {
    let mut problems: Vec<(usize, String)> = uses
        .iter()
        .filter_map(|(name, used)| {
            if !known.contains_key(name.as_str()) {
                Some((
                    used.line,
                    format!("usemtl {name}: no loaded material library defines it"),
                ))
            } else if !used.after_mtllib {
                Some((
                    used.line,
                    format!("usemtl {name} comes before the mtllib that defines it"),
                ))
            } else {
                None
            }
        })
        .collect();
    problems.sort();
    const SHOWN: usize = 10;
    for (line, what) in problems.iter().take(SHOWN) {
        warnings.push(format!(
            "{}:{line}: {what}; its faces get the default material",
            path.display()
        ));
    }
    if problems.len() > SHOWN {
        warnings.push(format!(
            "{}: {} more material names resolve to no material",
            path.display(),
            problems.len() - SHOWN
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same file loads to the same scene whatever the block and chunk sizes: the parallel
    /// split is invisible.
    #[test]
    fn block_and_chunk_sizes_do_not_change_the_scene() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.mtl"),
            "newmtl red\nKd 1 0 0\nnewmtl lamp\nKe 1 1 1\n",
        )
        .unwrap();
        // An L-shaped face's corners first, used by the last group: a concave face split in
        // a later chunk than its vertices.
        let mut text =
            String::from("mtllib m.mtl\nv 0 0 5\nv 2 0 5\nv 2 1 5\nv 1 1 5\nv 1 2 5\nv 0 2 5\n");
        for g in 0..12 {
            text += &format!("g part{g}\n");
            for i in 0..20 {
                let (x, y) = (i as f32 * 0.5, g as f32);
                text += &format!("v {x} {y} 0\nv {x} {y} 1\nvn 0 1 0\nvt {x} 0\n");
            }
            text += if g % 3 == 0 {
                "usemtl red\n"
            } else {
                "usemtl lamp\n"
            };
            for i in 0..19 {
                let a = -40 + 2 * i;
                text += &format!(
                    "f {a}/{t}/{n} {b}/{t}/{n} {c}/{u}/{m}\nf {b}/{t}/{n} {d}/{u}/{m} {c}/{u}/{m}\n",
                    b = a + 1,
                    c = a + 2,
                    d = a + 3,
                    t = -20 + i,
                    n = -20 + i,
                    u = -19 + i,
                    m = -19 + i,
                );
                if i == 9 {
                    text += "usemtl red\n";
                }
            }
        }
        // Continued over three lines, so the tiny blocks and chunks must not cut it.
        text += "g wall\ns 1\nf 2 3 4 \\\n5 6 \\\r\n1\n";
        let path = dir.path().join("s.obj");
        std::fs::write(&path, &text).unwrap();
        let opts = LoadOptions { quiet: true };
        let reference = load_with(&path, &opts, 1 << 20, 1 << 20).unwrap();
        for (block, chunk) in [(64, 16), (100, 1), (4096, 333), (1 << 14, 1 << 10)] {
            let s = load_with(&path, &opts, block, chunk).unwrap();
            assert_eq!(s.groups.len(), reference.groups.len());
            for (a, b) in s.groups.iter().zip(&reference.groups) {
                assert_eq!(a.name, b.name);
                assert_eq!(a.positions, b.positions, "{block}/{chunk}");
                assert_eq!(a.normals, b.normals);
                assert_eq!(a.uvs, b.uvs);
                assert_eq!(a.indices, b.indices);
                assert_eq!(a.face_materials, b.face_materials);
            }
            assert_eq!(s.report.warnings, reference.report.warnings);
        }
        assert_eq!(reference.groups.len(), 13);
        assert_eq!(reference.triangle_count(), 12 * 38 + 4);
        // The L split inside its outline: the fan from (2, 0) would hold (1.2, 1.2).
        let wall = &reference.groups[12];
        let area: f32 = wall
            .indices
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| wall.positions[i as usize]);
                (b - a).cross(c - a).z / 2.0
            })
            .sum();
        assert_eq!(area, 3.0);
        // In smoothing group 1 without normals: computed, all facing the L's side.
        assert!(
            wall.normals.iter().all(|&n| (n - Vec3::Z).length() < 1e-6),
            "{:?}",
            wall.normals
        );
        assert!(wall.indices.iter().all(|t| {
            let [a, b, c] = t.map(|i| wall.positions[i as usize]);
            (b - a).cross(c - a).z >= 0.0
        }));
        assert!(reference.groups[..12]
            .iter()
            .all(|g| g.normals.len() == g.positions.len()));
    }

    /// The two readings of a distributed render give each rank exactly the whole load's
    /// groups it keeps, and every rank the whole scene's materials, lights, warnings, box and
    /// content hash.
    #[test]
    fn a_survey_and_a_partial_load_agree_with_the_whole_load() {
        use crate::scene::content_hash::{content_hash, content_hash_of_groups, group_hash};
        use crate::scene::domains::Domains;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.mtl"),
            "newmtl red\nKd 1 0 0\nnewmtl lamp\nKe 4 4 4\n",
        )
        .unwrap();
        let mut text = String::from("mtllib m.mtl\n");
        for g in 0..9 {
            text += &format!("g part{g}\n");
            let z = g as f32;
            text += &format!("v 0 0 {z}\nv 1 0 {z}\nv 0 1 {z}\nv 2 0 {z}\nvn 0 0 1\nvn 0 0 0\n");
            // Group 3 starts with the default material; 5 holds a light; 7 a degenerate
            // triangle and a zero normal; 8 a vertex that is not finite.
            if g != 3 {
                text += if g == 5 {
                    "usemtl lamp\n"
                } else {
                    "usemtl red\n"
                };
            }
            text += "f -4//-2 -3//-2 -2//-2\n";
            text += if g == 7 {
                "f -4//-1 -3//-1 -1//-1\n"
            } else {
                "f -3//-2 -1//-2 -2//-2\n"
            };
            if g == 8 {
                text += "v nan 0 0\nf -5 -4 -1\n";
            }
        }
        let path = dir.path().join("s.obj");
        std::fs::write(&path, &text).unwrap();
        let opts = LoadOptions { quiet: true };
        let whole = load_obj(&path, &opts).unwrap();
        let survey = survey_obj(&path, &opts).unwrap();
        assert_eq!(survey.extents(), Domains::extents_of(&whole));
        assert_eq!(survey.bounds, whole.bounds());
        let lit: Vec<bool> = (0..9)
            .map(|g| whole.lights.iter().any(|l| l.group == g))
            .collect();
        assert_eq!(survey.emitting(), lit);
        assert_eq!(survey.size_text(), whole.size_text());
        for (s, g) in survey.groups.iter().zip(&whole.groups) {
            assert_eq!(s.hash, group_hash(g), "{}", g.name);
        }
        assert!(whole.report.degenerate_dropped > 0 && !whole.report.warnings.is_empty());
        let hashes: Vec<u64> = survey.groups.iter().map(|g| g.hash).collect();
        // Each keeps the light's group, as every rank of a distributed render does.
        for keep in [
            vec![true; 9],
            (0..9).map(|g| g == 5).collect(),
            (0..9).map(|g| g % 2 == 1).collect(),
        ] {
            let part = load_obj_part(&path, &opts, &survey, &keep).unwrap();
            for ((a, b), &k) in part.groups.iter().zip(&whole.groups).zip(&keep) {
                assert_eq!(a.name, b.name);
                let expected = if k {
                    b.clone()
                } else {
                    Group {
                        name: b.name.clone(),
                        ..Group::default()
                    }
                };
                assert_eq!(a.positions, expected.positions);
                assert_eq!(a.normals, expected.normals);
                assert_eq!(a.uvs, expected.uvs);
                assert_eq!(a.indices, expected.indices);
                assert_eq!(a.face_materials, expected.face_materials);
            }
            assert_eq!(
                format!("{:?}", part.materials),
                format!("{:?}", whole.materials)
            );
            assert_eq!(part.report.warnings, whole.report.warnings, "{keep:?}");
            assert_eq!(
                part.report.degenerate_dropped,
                whole.report.degenerate_dropped
            );
            assert_eq!(content_hash_of_groups(&hashes, &part), content_hash(&whole));
            assert_eq!(part.lights, whole.lights);
        }
        // A file rewritten between the readings is refused, naming it.
        std::fs::write(&path, text.replace("g part4", "g other")).unwrap();
        let err = load_obj_part(&path, &opts, &survey, &[true; 9]).unwrap_err();
        assert!(matches!(err, LoadError::Changed { .. }), "{err}");
    }
}
