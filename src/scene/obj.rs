//! The Wavefront OBJ + MTL loader.
//!
//! Parsing is tobj's; what gasworks adds around it:
//! - a validating scan ([`scan`]) that every line goes through before tobj sees it, so that a
//!   malformed number, a NaN or infinite coordinate, a face index out of range (either sign)
//!   or a face with fewer than 3 vertices is an error naming the file and the line, never a
//!   panic or a silently wrong mesh;
//! - exactly one [`Group`] per `o`/`g` section that holds faces: tobj cuts a section into
//!   several models whenever `usemtl` changes, and the scan's per-section triangle counts are
//!   what lets them be put back together, with each face keeping its material;
//! - the MTL mapping to gasworks materials and the `map_Kd` textures ([`mtl`]);
//! - warnings, not errors, for what can be repaired: a missing MTL file or texture, a
//!   material name no library defines, dropped `l` polylines and vertex colours.

mod mtl;
mod scan;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, IsTerminal};
use std::path::{Path, PathBuf};

use glam::{Vec2, Vec3};
use indicatif::{ProgressBar, ProgressStyle};

use super::{Group, Material, Scene};
use scan::{ScanReader, Section};

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
    #[error("{}: the scene has no triangles{}", path.display(), empty_detail(*degenerate))]
    Empty { path: PathBuf, degenerate: usize },
    /// tobj refused something the scan let through (no line: tobj does not say).
    #[error("{}: the OBJ parser failed: {source}", path.display())]
    Parser {
        path: PathBuf,
        source: tobj::LoadError,
    },
    /// tobj's models did not add up to the scan's sections: a bug, reported rather than hidden.
    #[error("{}: internal error while regrouping the OBJ sections: {message}", path.display())]
    Regroup { path: PathBuf, message: String },
}

fn empty_detail(degenerate: usize) -> String {
    if degenerate > 0 {
        format!(" (all {degenerate} were degenerate and dropped)")
    } else {
        String::new()
    }
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
            | LoadError::Parser { path, .. }
            | LoadError::Regroup { path, .. } => path,
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

/// What the MTL loader (called back from inside tobj) found.
#[derive(Default)]
struct Libraries {
    /// The library each of tobj's materials came from, in tobj's order.
    sources: Vec<PathBuf>,
    warnings: Vec<String>,
    error: Option<LoadError>,
}

/// Files smaller than this load without a progress bar: they take well under a second.
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

/// Loads an OBJ file and its MTL libraries into a [`Scene`].
pub fn load_obj(path: &Path, opts: &LoadOptions) -> Result<Scene, LoadError> {
    let file = File::open(path).map_err(|source| LoadError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let progress = progress_bar(path, size, opts.quiet);
    let mut reader = ScanReader::new(
        BufReader::with_capacity(1 << 16, file),
        path,
        progress.clone(),
    );
    let obj_dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let libraries = RefCell::new(Libraries::default());
    let tobj_options = tobj::LoadOptions {
        single_index: true,
        triangulate: true,
        ..Default::default()
    };
    let parsed = tobj::load_obj_buf(&mut reader, &tobj_options, |name| {
        load_library(path, &obj_dir.join(name), &libraries)
    });
    progress.finish_and_clear();
    if let Some(error) = reader.error.take() {
        return Err(error);
    }
    let libraries = libraries.into_inner();
    if let Some(error) = libraries.error {
        return Err(error);
    }
    let (models, tobj_materials) = parsed.map_err(|source| LoadError::Parser {
        path: path.to_path_buf(),
        source,
    })?;
    let scan = reader.scan;
    let mut warnings = libraries.warnings;
    // An Err here means every library failed to load: already a warning each.
    let tobj_materials = tobj_materials.unwrap_or_default();

    let mut textures = mtl::TextureCache::default();
    let mut materials: Vec<Material> = Vec::with_capacity(tobj_materials.len() + 1);
    for (m, source) in tobj_materials.iter().zip(&libraries.sources) {
        let mut material = mtl::convert(m, &mut warnings, source);
        if let Some(name) = &m.diffuse_texture {
            material.diffuse_texture = textures.load(source, &m.name, name, &mut warnings);
        }
        materials.push(material);
    }
    warn_about_material_uses(path, &scan, &tobj_materials, &mut warnings);
    if scan.polylines_dropped > 0 {
        warnings.push(format!(
            "{}: {} polyline (l) statements ignored: lines are not surfaces",
            path.display(),
            scan.polylines_dropped
        ));
    }
    if scan.vertex_colours_dropped > 0 {
        warnings.push(format!(
            "{}: vertex colours of {} vertices ignored",
            path.display(),
            scan.vertex_colours_dropped
        ));
    }

    let default_material = materials.len() as u32;
    let mut default_used = false;
    let groups = regroup(
        path,
        &scan.sections,
        models,
        |id| match id {
            Some(i) if i < default_material as usize => i as u32,
            _ => {
                default_used = true;
                default_material
            }
        },
        &mut warnings,
    )?;
    if default_used {
        materials.push(Material::default_diffuse());
    }

    let mut scene = Scene::new(&path.display().to_string(), groups, materials);
    scene.textures = textures.textures;
    scene.report.warnings.extend(warnings);
    if scene.triangle_count() == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
            degenerate: scene.report.degenerate_dropped,
        });
    }
    Ok(scene)
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

/// Reads, checks and parses one MTL library for tobj. A missing or unreadable library is a
/// warning (its materials become the default one); a malformed one is an error, kept in
/// `libraries` because tobj's callback can only say that it failed.
fn load_library(
    obj_path: &Path,
    mtl_path: &Path,
    libraries: &RefCell<Libraries>,
) -> tobj::MTLLoadResult {
    let mut libs = libraries.borrow_mut();
    let bytes = match std::fs::read(mtl_path) {
        Ok(bytes) => bytes,
        Err(e) => {
            libs.warnings.push(format!(
                "{}: material library {} cannot be read ({e}); its materials are replaced by the default material",
                obj_path.display(),
                mtl_path.display()
            ));
            return Err(tobj::LoadError::OpenFileFailed);
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let canonical = match mtl::check_library(mtl_path, &text) {
        Ok(canonical) => canonical,
        Err(error) => {
            libs.error.get_or_insert(error);
            return Err(tobj::LoadError::MaterialParseError);
        }
    };
    match tobj::load_mtl_buf(&mut canonical.as_bytes()) {
        Ok((materials, names)) => {
            let n = materials.len();
            libs.sources
                .extend(std::iter::repeat_n(mtl_path.to_path_buf(), n));
            Ok((materials, names))
        }
        Err(source) => {
            libs.error.get_or_insert(LoadError::Parser {
                path: mtl_path.to_path_buf(),
                source,
            });
            Err(source)
        }
    }
}

/// Warns about `usemtl` names that resolve to no material: their faces get the default one.
fn warn_about_material_uses(
    path: &Path,
    scan: &scan::ObjScan,
    materials: &[tobj::Material],
    warnings: &mut Vec<String>,
) {
    let known: HashMap<&str, ()> = materials.iter().map(|m| (m.name.as_str(), ())).collect();
    let mut problems: Vec<(usize, String)> = scan
        .material_uses
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

/// Puts tobj's models back together into one group per section. tobj emits the models in file
/// order and a section's models are consecutive (a new model starts at each `o`/`g` with
/// pending faces and at each material change), so consuming each section's triangle count
/// from the model stream recovers the sections exactly.
fn regroup(
    path: &Path,
    sections: &[Section],
    models: Vec<tobj::Model>,
    mut material_index: impl FnMut(Option<usize>) -> u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Group>, LoadError> {
    let regroup_error = |message: String| LoadError::Regroup {
        path: path.to_path_buf(),
        message,
    };
    // tobj also emits an empty model at the end of the file and after empty sections.
    let mut models = models.into_iter().filter(|m| !m.mesh.indices.is_empty());
    let mut groups = Vec::with_capacity(sections.len());
    for section in sections {
        let mut group = Group {
            name: section.name.clone(),
            ..Group::default()
        };
        let mut all_have_normals = true;
        let mut all_have_uvs = true;
        let mut some_have_normals = false;
        let mut collected = 0u64;
        while collected < section.triangles {
            let model = models.next().ok_or_else(|| {
                regroup_error(format!(
                    "section {} (line {}) expects {} triangles, the parser gave {collected}",
                    section.name, section.line, section.triangles
                ))
            })?;
            let mesh = model.mesh;
            let triangles = mesh.indices.len() / 3;
            collected += triangles as u64;
            let vertex_count = mesh.positions.len() / 3;
            let has_normals = vertex_count > 0 && mesh.normals.len() == vertex_count * 3;
            let has_uvs = vertex_count > 0 && mesh.texcoords.len() == vertex_count * 2;
            some_have_normals |= !mesh.normals.is_empty();
            all_have_normals &= has_normals;
            all_have_uvs &= has_uvs;
            let base = group.positions.len() as u32;
            group.positions.extend(
                mesh.positions
                    .chunks_exact(3)
                    .map(|p| Vec3::new(p[0], p[1], p[2])),
            );
            if all_have_normals {
                group.normals.extend(
                    mesh.normals
                        .chunks_exact(3)
                        .map(|n| Vec3::new(n[0], n[1], n[2])),
                );
            }
            if all_have_uvs {
                group.uvs.extend(
                    mesh.texcoords
                        .chunks_exact(2)
                        .map(|t| Vec2::new(t[0], t[1])),
                );
            }
            group.indices.extend(
                mesh.indices
                    .chunks_exact(3)
                    .map(|t| [t[0] + base, t[1] + base, t[2] + base]),
            );
            let material = material_index(mesh.material_id);
            group
                .face_materials
                .extend(std::iter::repeat_n(material, triangles));
        }
        if collected != section.triangles {
            return Err(regroup_error(format!(
                "section {} (line {}) expects {} triangles, the parser gave {collected}",
                section.name, section.line, section.triangles
            )));
        }
        if !all_have_uvs {
            group.uvs.clear();
        }
        if all_have_normals {
            if !normalize_normals(&mut group.normals) {
                group.normals.clear();
                warnings.push(format!(
                    "{}:{}: group {}: some vertex normals have zero length; using geometric normals",
                    path.display(),
                    section.line,
                    section.name
                ));
            }
        } else {
            group.normals.clear();
            if some_have_normals {
                warnings.push(format!(
                    "{}:{}: group {}: only some faces have vertex normals; using geometric normals",
                    path.display(),
                    section.line,
                    section.name
                ));
            }
        }
        groups.push(group);
    }
    if let Some(extra) = models.next() {
        return Err(regroup_error(format!(
            "the parser gave a model ({}) after the last section",
            extra.name
        )));
    }
    Ok(groups)
}

/// Scales normals to unit length; false when one cannot be (zero length).
fn normalize_normals(normals: &mut [Vec3]) -> bool {
    for n in normals.iter_mut() {
        let unit = n.normalize_or_zero();
        if unit == Vec3::ZERO {
            return false;
        }
        *n = unit;
    }
    true
}
