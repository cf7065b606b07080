//! The sequential stitch of the chunk parser's output, and the per-group vertex unification.
//!
//! [`Assembler::absorb`] takes the chunks' [`ChunkOut`]s in file order and does what needs the
//! whole file: `o`/`g` sections (one [`Group`] each), `usemtl` resolved against the libraries
//! loaded so far, `mtllib` (each library read once, however often it is named). It does not
//! even copy corners: a section holds ranges of the chunks' corner lists. The expensive part, giving each group one index per corner (unifying OBJ's
//! separate position/UV/normal indices), is [`build_group`], run in parallel over the sections
//! that are complete ([`Assembler::build_closed`]) so that their corners are freed early.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use glam::{Vec2, Vec3};
use rayon::prelude::*;

use super::mtl::{self, MtlMaterial};
use super::parse::{ChunkOut, Corner, Event, Tally, DROPPED, NONE};
use super::LoadError;
use crate::scene::Group;

/// Face material standing for the default material, whose index is only known at the end.
pub const DEFAULT_MATERIAL: u32 = u32::MAX;

/// Every `v`, `vt` and `vn` of the file, in file order: what face indices point into.
#[derive(Default)]
pub struct Pools {
    pub positions: Vec<Vec3>,
    pub uvs: Vec<Vec2>,
    pub normals: Vec<Vec3>,
}

/// Where a material name was first used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaterialUse {
    pub line: usize,
    /// Whether an `mtllib` came before this first use (`usemtl` resolves against the libraries
    /// loaded so far).
    pub after_mtllib: bool,
}

/// The MTL libraries named so far, and their materials in load order.
#[derive(Default)]
pub struct Libraries {
    pub materials: Vec<MtlMaterial>,
    /// The library each material came from.
    pub sources: Vec<PathBuf>,
    /// The last material defined under each name.
    by_name: HashMap<String, u32>,
    loaded: HashSet<PathBuf>,
    pub warnings: Vec<String>,
}

/// An `o`/`g` section that holds faces.
struct Section {
    name: String,
    /// Line of the `o`/`g` statement (or of the first face when there is none).
    line: usize,
    /// Its triangles' corners, three per triangle: ranges of chunks' corner lists, in order.
    pieces: Vec<(Arc<Vec<Corner>>, Range<usize>)>,
    /// One per triangle: an index into the libraries' materials, or [`DEFAULT_MATERIAL`].
    materials: Vec<u32>,
    /// The smoothing group of its triangles, as runs: (first triangle, group), the group
    /// holding until the next run; triangles before the first run are in none (0). Empty
    /// when no face of the section is in a smoothing group.
    smoothing: Vec<(usize, u32)>,
}

/// Which groups the assembler builds.
#[derive(Clone, Debug, Default)]
pub enum Mode {
    /// Every group: the whole scene.
    #[default]
    All,
    /// The groups whose index is `true` here; the others are left empty (their name only),
    /// so that every group keeps its index.
    Keep(Arc<[bool]>),
    /// Every group built, summarised ([`Summary`]) and freed: the first reading of a file
    /// whose groups are then spread over ranks ([`super::survey`]).
    Survey,
}

/// What the first reading of a file keeps of a group, once built and rid of its
/// degenerate triangles as [`crate::scene::Scene::finalize`] rids it.
pub struct Summary {
    pub bounds: crate::scene::Bounds,
    pub triangles: u64,
    /// Its content hash up to the face materials ([`crate::scene::content_hash::group_head`]).
    pub head: crate::fnv::Fnv,
    /// Its face materials as runs of (material, triangles); [`DEFAULT_MATERIAL`] unresolved.
    pub material_runs: Vec<(u32, u32)>,
    /// The materials its faces use before the degenerate ones are dropped, each once, in
    /// the order of first use (what the loader's checks of the whole scene look at).
    pub materials_used: Vec<u32>,
    pub has_uvs: bool,
    /// The bytes its arrays take.
    pub bytes: u64,
    pub degenerate_dropped: usize,
    pub out_of_scale_dropped: usize,
}

impl Summary {
    fn of(mut group: Group) -> Summary {
        let mut materials_used: Vec<u32> = Vec::new();
        for &m in &group.face_materials {
            if materials_used.last() != Some(&m) && !materials_used.contains(&m) {
                materials_used.push(m);
            }
        }
        let (degenerate_dropped, out_of_scale_dropped) = crate::scene::drop_degenerate(&mut group);
        let mut material_runs: Vec<(u32, u32)> = Vec::new();
        for &m in &group.face_materials {
            match material_runs.last_mut() {
                Some((last, n)) if *last == m => *n += 1,
                _ => material_runs.push((m, 1)),
            }
        }
        Summary {
            bounds: group.bounds(),
            triangles: group.triangle_count() as u64,
            head: crate::scene::content_hash::group_head(&group),
            material_runs,
            materials_used,
            has_uvs: !group.uvs.is_empty(),
            bytes: group.heap_bytes(),
            degenerate_dropped,
            out_of_scale_dropped,
        }
    }
}

/// One group as built, with what its build had to repair; in [`Mode::Survey`], its summary
/// and an empty group of its name.
struct Built {
    group: Group,
    summary: Option<Summary>,
    non_finite_dropped: usize,
    warning: Option<String>,
}

impl Built {
    /// A group not kept: its name alone.
    fn skipped(name: String) -> Built {
        Built {
            group: Group {
                name,
                ..Group::default()
            },
            summary: None,
            non_finite_dropped: 0,
            warning: None,
        }
    }

    fn summarised(self) -> Built {
        let name = self.group.name.clone();
        let Built {
            group,
            non_finite_dropped,
            warning,
            ..
        } = self;
        Built {
            summary: Some(Summary::of(group)),
            non_finite_dropped,
            warning,
            ..Built::skipped(name)
        }
    }
}

/// What the whole file came to.
pub struct Assembled {
    /// Every group; in [`Mode::Keep`] those not kept are empty, in [`Mode::Survey`] all are.
    pub groups: Vec<Group>,
    /// In [`Mode::Survey`], every group's summary; empty otherwise.
    pub summaries: Vec<Summary>,
    pub libraries: Libraries,
    pub material_uses: HashMap<String, MaterialUse>,
    pub tally: Tally,
    /// Per-group warnings (normals), in group order.
    pub group_warnings: Vec<String>,
    /// Triangles dropped because a corner's position is not finite.
    pub non_finite_dropped: usize,
    /// Triangles the faces made, before any was dropped.
    pub triangles_parsed: usize,
}

pub struct Assembler<'a> {
    path: &'a Path,
    mode: Mode,
    obj_dir: PathBuf,
    libraries: Libraries,
    mtllib_seen: bool,
    material_uses: HashMap<String, MaterialUse>,
    current_material: u32,
    /// The smoothing group of the last `s` (0: none).
    smoothing: u32,
    current_name: String,
    /// Line of the `o`/`g` in effect, 0 before the first.
    current_line: usize,
    /// The section the next faces go to, once it holds a face.
    open: Option<Section>,
    /// Complete sections waiting for [`Assembler::build_closed`] (their chunks' corner lists
    /// are freed once every section using them is built).
    closed: Vec<Section>,
    built: Vec<Built>,
    tally: Tally,
    triangles_parsed: usize,
}

impl<'a> Assembler<'a> {
    pub fn new(path: &'a Path, mode: Mode) -> Assembler<'a> {
        Assembler {
            path,
            mode,
            obj_dir: path.parent().unwrap_or(Path::new("")).to_path_buf(),
            libraries: Libraries::default(),
            mtllib_seen: false,
            material_uses: HashMap::new(),
            current_material: DEFAULT_MATERIAL,
            smoothing: 0,
            current_name: super::parse::UNNAMED_GROUP.to_string(),
            current_line: 0,
            open: None,
            closed: Vec::new(),
            built: Vec::new(),
            tally: Tally::default(),
            triangles_parsed: 0,
        }
    }

    /// Takes the next chunk of the file. Its error, if any, comes after its events (parsing
    /// stopped there), so an earlier `mtllib`'s error is reported first, as in a sequential
    /// read.
    pub fn absorb(&mut self, out: ChunkOut) -> Result<(), LoadError> {
        self.tally.merge(&out.tally);
        let corners = Arc::new(out.corners);
        let mut cursor = 0;
        for event in out.events {
            match event {
                Event::Section { name, line } => {
                    self.closed.extend(self.open.take());
                    self.current_name = name;
                    self.current_line = line;
                }
                Event::UseMaterial { name, line } => {
                    if name.is_empty() {
                        // Tallied by the parser; the faces get the default material.
                        self.current_material = DEFAULT_MATERIAL;
                        continue;
                    }
                    let after_mtllib = self.mtllib_seen;
                    self.current_material = self
                        .libraries
                        .by_name
                        .get(&name)
                        .copied()
                        .unwrap_or(DEFAULT_MATERIAL);
                    self.material_uses
                        .entry(name)
                        .or_insert(MaterialUse { line, after_mtllib });
                }
                Event::Library { name, .. } => {
                    self.mtllib_seen = true;
                    self.load_libraries(&name)?;
                }
                Event::Smoothing { group } => self.smoothing = group,
                Event::Triangles { count, line } => {
                    let section = self.open.get_or_insert_with(|| Section {
                        name: self.current_name.clone(),
                        line: if self.current_line == 0 {
                            line
                        } else {
                            self.current_line
                        },
                        pieces: Vec::new(),
                        materials: Vec::new(),
                        smoothing: Vec::new(),
                    });
                    let runs = &mut section.smoothing;
                    let in_effect = runs.last().map_or(0, |&(_, group)| group);
                    if in_effect != self.smoothing {
                        runs.push((section.materials.len(), self.smoothing));
                    }
                    let end = (cursor + 3 * count).min(corners.len());
                    match section.pieces.last_mut() {
                        // The same chunk, after a `usemtl`: one piece.
                        Some((list, range))
                            if Arc::ptr_eq(list, &corners) && range.end == cursor =>
                        {
                            range.end = end;
                        }
                        _ => section.pieces.push((Arc::clone(&corners), cursor..end)),
                    }
                    cursor = end;
                    section
                        .materials
                        .extend(std::iter::repeat_n(self.current_material, count));
                    self.triangles_parsed += count;
                }
            }
        }
        match out.error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Reads the library (or libraries: `mtllib a.mtl b.mtl` names two when no file has the
    /// whole name, and `my\ file.mtl` is one name with a space) once each. A missing one is a
    /// warning; a malformed one is an error.
    fn load_libraries(&mut self, name: &str) -> Result<(), LoadError> {
        let whole = self.obj_dir.join(name);
        let names = library_names(name);
        let paths: Vec<PathBuf> = if whole.exists() || names.is_empty() {
            vec![whole]
        } else {
            names.iter().map(|n| self.obj_dir.join(n)).collect()
        };
        for path in paths {
            if !self.libraries.loaded.insert(path.clone()) {
                continue;
            }
            let bytes = match read_library(&path) {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.libraries.warnings.push(format!(
                        "{}: material library {} cannot be read ({e}); its materials are replaced by the default material",
                        self.path.display(),
                        path.display()
                    ));
                    continue;
                }
            };
            if let Some(encoding) = super::read::wide_encoding(&bytes) {
                return Err(LoadError::Encoding {
                    path: path.clone(),
                    encoding,
                });
            }
            if let Some(what) = super::read::not_text(&bytes, "MTL") {
                return Err(LoadError::NotText {
                    path: path.clone(),
                    what,
                });
            }
            let text = String::from_utf8_lossy(&bytes);
            for material in mtl::parse_library(&path, &text, &mut self.libraries.warnings)? {
                let index = self.libraries.materials.len() as u32;
                if let Some(earlier) = self.libraries.by_name.insert(material.name.clone(), index) {
                    // As before: `usemtl` statements after this library name the new one.
                    self.libraries.warnings.push(format!(
                        "{}: material {} is defined again (first in {}); usemtl statements after this library use this definition",
                        path.display(),
                        material.name,
                        self.libraries.sources[earlier as usize].display()
                    ));
                }
                self.libraries.materials.push(material);
                self.libraries.sources.push(path.clone());
            }
        }
        Ok(())
    }

    /// Builds the sections that are complete (every face read) in parallel, freeing their
    /// corners. `pools` must hold every element read so far.
    pub fn build_closed(&mut self, pools: &Pools) {
        if self.closed.is_empty() {
            return;
        }
        let sections = std::mem::take(&mut self.closed);
        let check_finite = self.tally.non_finite_positions.count > 0;
        let (path, mode, first) = (self.path, &self.mode, self.built.len());
        let built: Vec<Built> = sections
            .into_par_iter()
            .enumerate()
            .map(|(i, s)| match mode {
                Mode::All => build_group(s, pools, check_finite, path),
                Mode::Keep(keep) if keep.get(first + i) == Some(&true) => {
                    build_group(s, pools, check_finite, path)
                }
                Mode::Keep(_) => Built::skipped(s.name),
                Mode::Survey => build_group(s, pools, check_finite, path).summarised(),
            })
            .collect();
        self.built.extend(built);
    }

    /// Builds what is left once the whole file has been absorbed.
    pub fn finish(mut self, pools: &Pools) -> Assembled {
        self.closed.extend(self.open.take());
        self.build_closed(pools);
        let mut groups = Vec::with_capacity(self.built.len());
        let mut summaries = Vec::new();
        let mut group_warnings = Vec::new();
        let mut non_finite_dropped = 0;
        for b in self.built {
            groups.push(b.group);
            summaries.extend(b.summary);
            group_warnings.extend(b.warning);
            non_finite_dropped += b.non_finite_dropped;
        }
        Assembled {
            groups,
            summaries,
            libraries: self.libraries,
            material_uses: self.material_uses,
            tally: self.tally,
            group_warnings,
            non_finite_dropped,
            triangles_parsed: self.triangles_parsed,
        }
    }
}

/// Vertex normals for smoothing groups: at each vertex, the mean of the normals of the
/// triangles around it weighted by their angle there (so that how a face was split into
/// triangles does not tilt it, as area weights would). A vertex whose triangles have no area
/// (dropped later as degenerate) gets +Z: no triangle shows it.
fn smooth_normals(positions: &[Vec3], indices: &[[u32; 3]]) -> Vec<Vec3> {
    let mut sums = vec![Vec3::ZERO; positions.len()];
    for t in indices {
        let p = t.map(|i| positions[i as usize]);
        let Some(n) = (p[1] - p[0]).cross(p[2] - p[0]).try_normalize() else {
            continue;
        };
        for k in 0..3 {
            let (to_next, to_prev) = (p[(k + 1) % 3] - p[k], p[(k + 2) % 3] - p[k]);
            sums[t[k] as usize] += n * to_next.angle_between(to_prev);
        }
    }
    sums.into_iter()
        .map(|n| n.try_normalize().unwrap_or(Vec3::Z))
        .collect()
}

/// The largest material library read (a big one is megabytes).
const MAX_LIBRARY_BYTES: usize = 256 << 20;

/// A material library's bytes, refused past [`MAX_LIBRARY_BYTES`]: an MTL file is
/// kilobytes, and one named by mistake (`mtllib /dev/zero`) must not fill the memory.
fn read_library(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let limit = MAX_LIBRARY_BYTES;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is larger than {} MiB, which no material library is",
                limit >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// The file names of an `mtllib` statement: separated by whitespace, where a backslash
/// keeps the whitespace after it in the name.
fn library_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| n.is_whitespace()) => {
                current.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    names.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        names.push(current);
    }
    names
}

/// Local vertex of the first corner seen with each position: dense over the section's range
/// of position indices when that range is compact (the usual layout, where each object's
/// vertices precede its faces), a hash map when it is scattered over a large file.
enum FirstSeen {
    Dense { lo: u32, slots: Vec<u32> },
    Sparse(HashMap<u32, u32>),
}

impl FirstSeen {
    fn new(lo: u32, hi: u32, corners: usize) -> FirstSeen {
        let range = hi.saturating_sub(lo) as usize + 1;
        if range <= 2 * corners + 1024 {
            FirstSeen::Dense {
                lo,
                slots: vec![NONE; range],
            }
        } else {
            FirstSeen::Sparse(HashMap::new())
        }
    }

    #[inline]
    fn get(&self, v: u32) -> u32 {
        match self {
            FirstSeen::Dense { lo, slots } => slots[(v - lo) as usize],
            FirstSeen::Sparse(map) => map.get(&v).copied().unwrap_or(NONE),
        }
    }

    #[inline]
    fn set(&mut self, v: u32, local: u32) {
        match self {
            FirstSeen::Dense { lo, slots } => slots[(v - *lo) as usize] = local,
            FirstSeen::Sparse(map) => {
                map.insert(v, local);
            }
        }
    }
}

/// Turns a section into a group: one vertex per distinct (position, UV, normal) corner, in
/// order of first use, so the result depends only on the file. Normals (UVs) are kept only
/// when every corner has one; triangles with a non-finite corner position are dropped.
///
/// A section whose faces give no normals at all but lie (some of them) in smoothing groups
/// (`s 1`) gets normals computed as an OBJ viewer would: where faces of one smoothing group
/// share a position, the vertex normal is the angle-weighted mean of their normals; faces in
/// no group (`s off`) keep their own normal at each corner (their vertices are not shared).
/// Without this, a model exported with smoothing groups and no `vn` renders faceted.
fn build_group(section: Section, pools: &Pools, check_finite: bool, path: &Path) -> Built {
    let seen = CornerSummary::of(
        section
            .pieces
            .iter()
            .flat_map(|(list, range)| &list[range.clone()]),
    );
    let smooth = !seen.some_normals && section.smoothing.iter().any(|&(_, group)| group != 0);
    let mut runs = section.smoothing.iter().peekable();
    let mut smoothing_group = 0;
    let mut vertices = VertexKeys::new(seen.lo, seen.hi, seen.count);
    let mut group = Group {
        name: section.name,
        ..Group::default()
    };
    group.indices.reserve(section.materials.len());
    group.face_materials.reserve(section.materials.len());
    let mut non_finite_dropped = 0;
    let triangles = section
        .pieces
        .iter()
        .flat_map(|(list, range)| list[range.clone()].chunks_exact(3));
    for (index, (tri, &material)) in triangles.zip(&section.materials).enumerate() {
        while let Some(&(_, group)) = runs.next_if(|&&(first, _)| first <= index) {
            smoothing_group = group;
        }
        // With computed normals, the normal slot of a vertex's key says which normal it
        // takes: its smoothing group's, or (outside any) its own triangle's.
        let normal_key = match (smooth, smoothing_group) {
            (false, _) => NONE,
            (true, 0) => {
                super::parse::SMOOTHING_GROUPS
                    + (index as u32 % (DROPPED - super::parse::SMOOTHING_GROUPS))
            }
            (true, group) => group,
        };
        if check_finite
            && tri
                .iter()
                .any(|c| !pools.positions[c.v as usize].is_finite())
        {
            non_finite_dropped += 1;
            continue;
        }
        let mut triangle = [0u32; 3];
        for (slot, c) in triangle.iter_mut().zip(tri) {
            let key = Corner {
                v: c.v,
                vt: if seen.all_uvs { c.vt } else { NONE },
                vn: if seen.all_normals { c.vn } else { normal_key },
            };
            *slot = vertices.local_index(key);
        }
        group.indices.push(triangle);
        group.face_materials.push(material);
    }
    let keys = vertices.into_keys();
    set_attributes(&mut group, &keys, pools, &seen, smooth);
    drop(keys);
    group.indices.shrink_to_fit();
    group.face_materials.shrink_to_fit();
    let warning = normals_warning(&mut group, &seen, path, section.line);
    Built {
        group,
        summary: None,
        non_finite_dropped,
        warning,
    }
}

/// What a section's corners hold, for [`build_group`]: which attributes, and the range and
/// count of their position indices.
struct CornerSummary {
    all_normals: bool,
    some_normals: bool,
    // Faces whose normals were dropped are warned about already, file-wide.
    some_lack_normals: bool,
    all_uvs: bool,
    lo: u32,
    hi: u32,
    count: usize,
}

impl CornerSummary {
    fn of<'a>(corners: impl Iterator<Item = &'a Corner>) -> CornerSummary {
        let mut all_normals = true;
        let mut some_normals = false;
        let mut some_lack_normals = false;
        let mut all_uvs = true;
        let (mut lo, mut hi, mut count) = (u32::MAX, 0, 0);
        for c in corners {
            all_normals &= c.vn < DROPPED;
            some_normals |= c.vn < DROPPED;
            some_lack_normals |= c.vn == NONE;
            all_uvs &= c.vt < DROPPED;
            lo = lo.min(c.v);
            hi = hi.max(c.v);
            count += 1;
        }
        CornerSummary {
            all_normals,
            some_normals,
            some_lack_normals,
            all_uvs,
            lo,
            hi,
            count,
        }
    }
}

/// The distinct corner keys of a group being built, in order of first use: a key's place is
/// its vertex index in the group.
struct VertexKeys {
    /// The first key's index for each position index.
    first_seen: FirstSeen,
    /// The other keys' indices.
    extra: HashMap<Corner, u32>,
    keys: Vec<Corner>,
}

impl VertexKeys {
    fn new(lo: u32, hi: u32, corners: usize) -> VertexKeys {
        VertexKeys {
            first_seen: FirstSeen::new(lo, hi, corners),
            extra: HashMap::new(),
            keys: Vec::new(),
        }
    }

    /// The vertex index of a key, a new one at its first use.
    #[inline]
    fn local_index(&mut self, key: Corner) -> u32 {
        let first = self.first_seen.get(key.v);
        let found = if first == NONE {
            None
        } else if self.keys[first as usize] == key {
            Some(first)
        } else {
            self.extra.get(&key).copied()
        };
        match found {
            Some(local) => local,
            None => {
                let local = self.keys.len() as u32;
                self.keys.push(key);
                if first == NONE {
                    self.first_seen.set(key.v, local);
                } else {
                    self.extra.insert(key, local);
                }
                local
            }
        }
    }

    /// The keys, the lookups freed.
    fn into_keys(self) -> Vec<Corner> {
        self.keys
    }
}

/// Gives a built group the positions, UVs and normals of its vertex keys: UVs (normals) where
/// every corner has one, normals computed where the section is `smooth`.
fn set_attributes(
    group: &mut Group,
    keys: &[Corner],
    pools: &Pools,
    seen: &CornerSummary,
    smooth: bool,
) {
    // The attributes in one exact allocation each: no growth slack stays resident.
    group.positions = keys.iter().map(|k| pools.positions[k.v as usize]).collect();
    if seen.all_uvs {
        group.uvs = keys.iter().map(|k| pools.uvs[k.vt as usize]).collect();
    }
    if seen.all_normals {
        group.normals = keys.iter().map(|k| pools.normals[k.vn as usize]).collect();
    } else if smooth {
        group.normals = smooth_normals(&group.positions, &group.indices);
    }
}

/// Normalizes a built group's vertex normals; the warning where one has zero length (the
/// group then uses geometric normals), or where only some faces have them (`line`: the
/// section's).
fn normals_warning(
    group: &mut Group,
    seen: &CornerSummary,
    path: &Path,
    line: usize,
) -> Option<String> {
    let mut warning = None;
    if seen.all_normals {
        if !normalize_normals(&mut group.normals) {
            group.normals = Vec::new();
            warning = Some(format!(
                "{}:{}: group {}: some vertex normals have zero length; using geometric normals",
                path.display(),
                line,
                group.name
            ));
        }
    } else if seen.some_normals && seen.some_lack_normals {
        warning = Some(format!(
            "{}:{}: group {}: only some faces have vertex normals; using geometric normals",
            path.display(),
            line,
            group.name
        ));
    }
    warning
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

#[cfg(test)]
mod tests {
    use super::*;

    fn corner(v: u32, vt: u32, vn: u32) -> Corner {
        Corner { v, vt, vn }
    }

    fn pools(n: usize) -> Pools {
        Pools {
            positions: (0..n).map(|i| Vec3::new(i as f32, 0.0, 0.0)).collect(),
            uvs: (0..n).map(|i| Vec2::new(i as f32, 0.0)).collect(),
            normals: (0..n)
                .map(|i| Vec3::new(0.0, 0.0, 1.0 + i as f32))
                .collect(),
        }
    }

    fn section(corners: Vec<Corner>) -> Section {
        let triangles = corners.len() / 3;
        // Split in two pieces, as a section that spans two chunks is.
        let half = corners.len() / 6 * 3;
        let list = Arc::new(corners);
        let n = list.len();
        Section {
            name: "s".into(),
            line: 1,
            pieces: vec![(Arc::clone(&list), 0..half), (list, half..n)],
            materials: (0..triangles as u32).collect(),
            smoothing: Vec::new(),
        }
    }

    #[test]
    fn library_names_split_on_unescaped_whitespace() {
        assert_eq!(library_names("a.mtl"), ["a.mtl"]);
        assert_eq!(library_names(" a.mtl \tb.mtl "), ["a.mtl", "b.mtl"]);
        assert_eq!(
            library_names("x.mtl my\\ file\\ name.mtl  c:\\dir\\d.mtl"),
            ["x.mtl", "my file name.mtl", "c:\\dir\\d.mtl"]
        );
    }

    #[test]
    fn corners_are_unified_in_order_of_first_use() {
        let c = |v, vn| corner(v, NONE, vn);
        // Position 5 comes with two different normals: two vertices.
        let s = section(vec![c(7, 0), c(5, 1), c(6, 1), c(5, 1), c(6, 1), c(5, 2)]);
        let b = build_group(s, &pools(8), false, Path::new("t.obj"));
        let g = &b.group;
        assert_eq!(g.indices, [[0, 1, 2], [1, 2, 3]]);
        let xs: Vec<f32> = g.positions.iter().map(|p| p.x).collect();
        assert_eq!(xs, [7.0, 5.0, 6.0, 5.0]);
        assert_eq!(g.normals.len(), 4);
        assert!(g.uvs.is_empty());
        assert_eq!(g.face_materials, [0, 1]);
        assert!(b.warning.is_none());
    }

    #[test]
    fn scattered_positions_unify_the_same_way() {
        let n = 100_000;
        let c = |v| corner(v, 3, NONE);
        let s = section(vec![c(0), c(n - 1), c(n / 2), c(n / 2), c(n - 1), c(0)]);
        let b = build_group(s, &pools(n as usize), false, Path::new("t.obj"));
        assert_eq!(b.group.indices, [[0, 1, 2], [2, 1, 0]]);
        assert_eq!(b.group.uvs, vec![Vec2::new(3.0, 0.0); 3]);
    }

    #[test]
    fn mixed_normals_are_dropped_with_a_warning_and_do_not_split_vertices() {
        let s = section(vec![
            corner(0, NONE, 0),
            corner(1, NONE, 0),
            corner(2, NONE, 0),
            corner(0, NONE, NONE),
            corner(1, NONE, NONE),
            corner(3, NONE, NONE),
        ]);
        let b = build_group(s, &pools(4), false, Path::new("t.obj"));
        assert!(b.group.normals.is_empty());
        assert_eq!(b.group.positions.len(), 4);
        assert!(b.warning.unwrap().contains("only some faces"));
    }

    #[test]
    fn dropped_normals_lose_the_group_its_normals_without_a_second_warning() {
        let s = section(vec![
            corner(0, NONE, 0),
            corner(1, NONE, 0),
            corner(2, NONE, 0),
            corner(0, NONE, DROPPED),
            corner(1, NONE, DROPPED),
            corner(3, NONE, DROPPED),
        ]);
        let b = build_group(s, &pools(4), false, Path::new("t.obj"));
        assert!(b.group.normals.is_empty());
        assert!(b.warning.is_none());
    }

    #[test]
    fn triangles_touching_non_finite_positions_are_dropped() {
        let mut p = pools(4);
        p.positions[3] = Vec3::new(f32::NAN, 0.0, 0.0);
        let c = |v| corner(v, NONE, NONE);
        let s = section(vec![c(0), c(1), c(3), c(0), c(1), c(2)]);
        let b = build_group(s, &p, true, Path::new("t.obj"));
        assert_eq!(b.non_finite_dropped, 1);
        assert_eq!(b.group.indices, [[0, 1, 2]]);
        assert_eq!(b.group.face_materials, [1]);
        assert!(b.group.positions.iter().all(|p| p.is_finite()));
    }
}
