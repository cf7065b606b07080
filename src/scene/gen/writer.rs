//! Writes scenes as Wavefront OBJ + MTL that other tools open: one `g` per group, `usemtl`
//! where the material changes, `v`/`vn`/`vt`/`f` with one index per corner, and `newmtl`
//! entries whose `illum` model reads back as the same material kind (see `obj::mtl`).
//!
//! [`ObjWriter`] streams: groups are written one at a time as they are made, so a generator of
//! tens of millions of triangles never holds more than one group, and nothing is formatted
//! into intermediate strings.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use glam::Vec3;

use crate::scene::{BumpMap, Group, Material, MaterialKind, Scene, Texture};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot create the folder {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: group {group} has {count} {what} for {vertices} vertices", path.display())]
    BadGroup {
        path: PathBuf,
        group: String,
        what: &'static str,
        count: usize,
        vertices: usize,
    },
}

/// What was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub obj: PathBuf,
    pub mtl: PathBuf,
    /// Groups written (groups without triangles are skipped: OBJ has no empty groups).
    pub groups: usize,
    pub triangles: u64,
    pub vertices: u64,
}

/// Writes a whole in-memory scene as `dir/stem.obj` and `dir/stem.mtl`.
pub fn write_obj(scene: &Scene, dir: &Path, stem: &str) -> Result<Written, WriteError> {
    let header = [format!("scene: {}", scene.source)];
    let mut writer = ObjWriter::create(dir, stem, &scene.materials, &scene.textures, &header)?;
    for group in &scene.groups {
        writer.write_group(group)?;
    }
    writer.finish()
}

/// An OBJ file being written group by group, with its MTL file written up front.
pub struct ObjWriter {
    out: BufWriter<File>,
    obj: PathBuf,
    mtl: PathBuf,
    material_names: Vec<String>,
    groups: usize,
    triangles: u64,
    vertices: u64,
    /// `vn` and `vt` lines written so far: counted apart from the vertices, since a group
    /// without normals or texture coordinates writes none (the first group with texture
    /// coordinates after one without starts at `vt` 1, not at its first vertex's number).
    normals: u64,
    uvs: u64,
}

impl ObjWriter {
    /// Creates `dir` if needed, writes `stem.mtl` and starts `stem.obj` (with `header` lines as
    /// comments).
    pub fn create(
        dir: &Path,
        stem: &str,
        materials: &[Material],
        textures: &[Texture],
        header: &[String],
    ) -> Result<ObjWriter, WriteError> {
        std::fs::create_dir_all(dir).map_err(|source| WriteError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let obj = dir.join(format!("{stem}.obj"));
        let mtl = dir.join(format!("{stem}.mtl"));
        let material_names = unique_names(materials.iter().map(|m| m.name.as_str()));
        write_mtl(&mtl, materials, &material_names, textures).map_err(|source| WriteError::Io {
            path: mtl.clone(),
            source,
        })?;
        let file = File::create(&obj).map_err(|source| WriteError::Io {
            path: obj.clone(),
            source,
        })?;
        let mut writer = ObjWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            obj,
            mtl,
            material_names,
            groups: 0,
            triangles: 0,
            vertices: 0,
            normals: 0,
            uvs: 0,
        };
        let mtl_name = format!("{stem}.mtl");
        writer.io(|out| {
            writeln!(out, "# written by gasworks {}", env!("CARGO_PKG_VERSION"))?;
            for line in header {
                writeln!(out, "# {line}")?;
            }
            writeln!(out, "mtllib {mtl_name}")
        })?;
        Ok(writer)
    }

    fn io(
        &mut self,
        f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
    ) -> Result<(), WriteError> {
        f(&mut self.out).map_err(|source| WriteError::Io {
            path: self.obj.clone(),
            source,
        })
    }

    /// Appends one group: its vertices, then its faces, with a `usemtl` at the start and at
    /// every change of material.
    pub fn write_group(&mut self, group: &Group) -> Result<(), WriteError> {
        if group.indices.is_empty() {
            return Ok(());
        }
        let n = group.positions.len();
        self.check_attribute_counts(group)?;
        // OBJ indices count from 1, over the whole file.
        let bases = IndexBases {
            vertex: self.vertices + 1,
            normal: self.normals + 1,
            uv: self.uvs + 1,
            has_normals: !group.normals.is_empty(),
            has_uvs: !group.uvs.is_empty(),
        };
        let name = sanitize(&group.name);
        let names = std::mem::take(&mut self.material_names);
        let result = self.io(|out| {
            writeln!(out, "g {name}")?;
            let mut num = Numbers::default();
            write_vertex_lines(out, &mut num, group, &bases)?;
            write_face_lines(out, &mut num, group, &names, &bases)
        });
        self.material_names = names;
        result?;
        self.groups += 1;
        self.triangles += group.indices.len() as u64;
        self.vertices += n as u64;
        self.normals += group.normals.len() as u64;
        self.uvs += group.uvs.len() as u64;
        Ok(())
    }

    /// Refuses a group whose normals or texture coordinates are neither absent nor one per
    /// vertex.
    fn check_attribute_counts(&self, group: &Group) -> Result<(), WriteError> {
        let n = group.positions.len();
        for (what, count) in [
            ("normals", group.normals.len()),
            ("texture coordinates", group.uvs.len()),
        ] {
            if count != 0 && count != n {
                return Err(WriteError::BadGroup {
                    path: self.obj.clone(),
                    group: group.name.clone(),
                    what,
                    count,
                    vertices: n,
                });
            }
        }
        Ok(())
    }

    /// Flushes the OBJ file and says what was written.
    pub fn finish(mut self) -> Result<Written, WriteError> {
        self.io(|out| out.flush())?;
        Ok(Written {
            obj: self.obj,
            mtl: self.mtl,
            groups: self.groups,
            triangles: self.triangles,
            vertices: self.vertices,
        })
    }
}

/// The OBJ numbers of a group's first vertex, normal and texture coordinate, and which of
/// the last two the group has.
struct IndexBases {
    vertex: u64,
    normal: u64,
    uv: u64,
    has_normals: bool,
    has_uvs: bool,
}

/// A group's `v` lines, then its `vn` and `vt` lines where it has them.
fn write_vertex_lines(
    out: &mut BufWriter<File>,
    num: &mut Numbers,
    group: &Group,
    bases: &IndexBases,
) -> std::io::Result<()> {
    for p in &group.positions {
        num.vec3(out, b"v", *p)?;
    }
    if bases.has_normals {
        for v in &group.normals {
            num.vec3(out, b"vn", *v)?;
        }
    }
    if bases.has_uvs {
        for t in &group.uvs {
            out.write_all(b"vt")?;
            num.f32(out, t.x)?;
            num.f32(out, t.y)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// A group's `f` lines, with a `usemtl` before the first and at every change of material.
fn write_face_lines(
    out: &mut BufWriter<File>,
    num: &mut Numbers,
    group: &Group,
    names: &[String],
    bases: &IndexBases,
) -> std::io::Result<()> {
    let mut current = None;
    for (tri, &m) in group.indices.iter().zip(&group.face_materials) {
        if current != Some(m) {
            match names.get(m as usize) {
                Some(material) => writeln!(out, "usemtl {material}")?,
                None => writeln!(out, "# material {m} does not exist")?,
            }
            current = Some(m);
        }
        out.write_all(b"f")?;
        for &i in tri {
            write_corner(out, num, bases, u64::from(i))?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// One corner of an `f` line: ` v`, ` v//vn`, ` v/vt` or ` v/vt/vn` for the group's vertex `i`.
#[inline]
fn write_corner(
    out: &mut BufWriter<File>,
    num: &mut Numbers,
    bases: &IndexBases,
    i: u64,
) -> std::io::Result<()> {
    num.index(out, bases.vertex + i)?;
    match (bases.has_uvs, bases.has_normals) {
        (false, false) => {}
        (false, true) => {
            out.write_all(b"//")?;
            out.write_all(num.ints.format(bases.normal + i).as_bytes())?;
        }
        (true, false) => {
            out.write_all(b"/")?;
            out.write_all(num.ints.format(bases.uv + i).as_bytes())?;
        }
        (true, true) => {
            out.write_all(b"/")?;
            out.write_all(num.ints.format(bases.uv + i).as_bytes())?;
            out.write_all(b"/")?;
            out.write_all(num.ints.format(bases.normal + i).as_bytes())?;
        }
    }
    Ok(())
}

/// Number formatting for the bulk of an OBJ file, several times faster than `write!`: floats
/// by ryu, which like `{}` prints the shortest text that reads back as the same f32 (so round
/// trips are exact), and integers by itoa.
#[derive(Default)]
struct Numbers {
    floats: ryu::Buffer,
    ints: itoa::Buffer,
}

impl Numbers {
    /// A space and the number (`1` rather than ryu's `1.0`).
    fn f32(&mut self, out: &mut impl Write, x: f32) -> std::io::Result<()> {
        let text = self.floats.format(x);
        let text = text.strip_suffix(".0").unwrap_or(text);
        out.write_all(b" ")?;
        out.write_all(text.as_bytes())
    }

    fn vec3(&mut self, out: &mut impl Write, keyword: &[u8], v: Vec3) -> std::io::Result<()> {
        out.write_all(keyword)?;
        self.f32(out, v.x)?;
        self.f32(out, v.y)?;
        self.f32(out, v.z)?;
        out.write_all(b"\n")
    }

    /// A space and the index.
    fn index(&mut self, out: &mut impl Write, i: u64) -> std::io::Result<()> {
        out.write_all(b" ")?;
        out.write_all(self.ints.format(i).as_bytes())
    }
}

/// A name usable after `g`/`newmtl`/`usemtl` by every reader: no whitespace, not empty.
fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if cleaned.is_empty() {
        "unnamed".to_string()
    } else {
        cleaned
    }
}

/// Sanitized material names, made unique with a numeric suffix where two collide.
fn unique_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .map(|name| {
            let base = sanitize(name);
            let mut candidate = base.clone();
            let mut k = 2;
            while !taken.insert(candidate.clone()) {
                candidate = format!("{base}_{k}");
                k += 1;
            }
            candidate
        })
        .collect()
}

/// The MTL `illum` model that reads back as `kind` (see `obj::mtl::convert`).
fn illum(kind: MaterialKind) -> u8 {
    match kind {
        // illum 1 (no specular) keeps a diffuse material diffuse whatever its Ks.
        MaterialKind::Diffuse => 1,
        MaterialKind::Glossy => 2,
        MaterialKind::Mirror => 3,
        MaterialKind::Glass => 7,
    }
}

fn write_mtl(
    path: &Path,
    materials: &[Material],
    names: &[String],
    textures: &[Texture],
) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut images = ImagesWritten::default();
    writeln!(out, "# written by gasworks {}", env!("CARGO_PKG_VERSION"))?;
    for (m, name) in materials.iter().zip(names) {
        write_material_values(&mut out, m, name)?;
        write_colour_maps(&mut out, m, path, textures, &mut images)?;
        write_mask_and_bump(&mut out, m, path, textures, &mut images)?;
    }
    out.flush()
}

/// The images written beside the library, by use and texture: one a texture shares between
/// materials (the sponza-like banners' pattern and mask) is written once.
#[derive(Default)]
struct ImagesWritten {
    files: HashMap<(&'static str, u32), String>,
}

impl ImagesWritten {
    /// The file of image `label` of texture `index`, written by `write` the first time.
    fn once(
        &mut self,
        label: &'static str,
        index: u32,
        write: &dyn Fn() -> std::io::Result<String>,
    ) -> std::io::Result<String> {
        if let Some(file) = self.files.get(&(label, index)) {
            return Ok(file.clone());
        }
        let file = write()?;
        self.files.insert((label, index), file.clone());
        Ok(file)
    }
}

/// A material's `newmtl` line and its colours, numbers and `illum` model.
fn write_material_values(out: &mut impl Write, m: &Material, name: &str) -> std::io::Result<()> {
    let rgb = |v: Vec3| format!("{} {} {}", v.x, v.y, v.z);
    writeln!(out, "\nnewmtl {name}")?;
    writeln!(out, "Kd {}", rgb(m.diffuse))?;
    writeln!(out, "Ks {}", rgb(m.specular))?;
    writeln!(out, "Ns {}", m.shininess)?;
    // A see-through material is `d` < 1, and `d` < 1 with `Ni` > 1 reads as glass: its
    // Ni (which nothing but glass reads) is left to the reader's default then.
    let see_through = m.opacity < 1.0 && m.kind != MaterialKind::Glass;
    if see_through {
        writeln!(out, "d {:?}", m.opacity)?;
    }
    if !see_through || m.ior <= 1.0 {
        writeln!(out, "Ni {}", m.ior)?;
    }
    if m.is_emissive() {
        writeln!(out, "Ke {}", rgb(m.emission))?;
    }
    if m.kind == MaterialKind::Glass {
        writeln!(out, "Tf {}", rgb(m.transmittance))?;
    }
    writeln!(out, "illum {}", illum(m.kind))
}

/// A material's `map_Kd`, `map_Ke` and `map_Ks` lines, for the maps it has.
fn write_colour_maps(
    out: &mut impl Write,
    m: &Material,
    path: &Path,
    textures: &[Texture],
    images: &mut ImagesWritten,
) -> std::io::Result<()> {
    // Colour, emission and specular maps name their source image: read again, it decodes to the
    // same texels. Absolute, since it was found relative to another library's folder. A
    // texture with no file (made in memory by a generator) is written beside the library.
    for (keyword, label, map) in [
        ("map_Kd", "colour", m.diffuse_texture),
        ("map_Ke", "emission", m.emission_texture),
        ("map_Ks", "specular", m.specular_texture),
    ] {
        let Some((index, texture)) = map.and_then(|t| Some((t, textures.get(t as usize)?))) else {
            continue;
        };
        let options = mapping_options(texture.mapping);
        if Path::new(&texture.path).is_file() {
            let absolute = std::fs::canonicalize(&texture.path)
                .unwrap_or_else(|_| PathBuf::from(&texture.path));
            writeln!(out, "{keyword} {options}{}", absolute.display())?;
        } else {
            let file = images.once(label, index, &|| {
                write_colour_png(path, label, index, texture)
            })?;
            writeln!(out, "{keyword} {options}{file}")?;
        }
    }
    Ok(())
}

/// A material's `map_d` line and its `bump` or `norm` line, for the ones it has.
fn write_mask_and_bump(
    out: &mut impl Write,
    m: &Material,
    path: &Path,
    textures: &[Texture],
    images: &mut ImagesWritten,
) -> std::io::Result<()> {
    if let Some((index, mask)) = m
        .opacity_texture
        .and_then(|t| Some((t, textures.get(t as usize)?)))
    {
        // The mask as decoded (the channel the source's -imfchan named, or its alpha),
        // beside the library: the source file alone does not say which channel it was.
        let file = images.once("mask", index, &|| write_grey_png(path, "mask", index, mask))?;
        let options = mapping_options(mask.mapping);
        writeln!(out, "map_d -imfchan r {options}{file}")?;
    }
    match m
        .bump
        .and_then(|b| Some((b, textures.get(b.texture() as usize)?)))
    {
        // Heights as decoded, as masks are (the channel is not in the source's name).
        Some((BumpMap::Height { texture, scale }, heights)) => {
            let file = images.once("bump", texture, &|| {
                write_grey_png(path, "bump", texture, heights)
            })?;
            let options = mapping_options(heights.mapping);
            writeln!(out, "bump -imfchan r -bm {scale:?} {options}{file}")?;
        }
        // A normal map names its source image, as `norm`: it decodes the same way.
        Some((BumpMap::Normal { scale, .. }, normals)) => {
            let absolute = std::fs::canonicalize(&normals.path)
                .unwrap_or_else(|_| PathBuf::from(&normals.path));
            let options = mapping_options(normals.mapping);
            writeln!(out, "norm -bm {scale:?} {options}{}", absolute.display())?;
        }
        None => {}
    }
    Ok(())
}

/// The `-s` and `-o` options of a texture statement placed by `mapping` (none for the
/// identity), each followed by a space.
fn mapping_options(mapping: crate::scene::UvMapping) -> String {
    let mut options = String::new();
    if mapping.scale != glam::Vec2::ONE {
        options += &format!("-s {:?} {:?} 1 ", mapping.scale.x, mapping.scale.y);
    }
    if mapping.offset != glam::Vec2::ZERO {
        options += &format!("-o {:?} {:?} 0 ", mapping.offset.x, mapping.offset.y);
    }
    options
}

/// Writes texture `index`, one channel in [0, 1] (an opacity mask or a height map: `label`),
/// as a grey PNG beside the library `mtl` (`STEM.LABELINDEX.png`) and returns its file name. A
/// texture decoded from an 8-bit image is written in 8 bits, so that it reads back with the
/// same bits (checked against the decoder's own conversion of every byte); any other in 16
/// bits (rounded there).
fn write_grey_png(mtl: &Path, label: &str, index: u32, mask: &Texture) -> std::io::Result<String> {
    let stem = mtl.file_stem().unwrap_or_default().to_string_lossy();
    let name = format!("{stem}.{label}{index}.png");
    let target = mtl.with_file_name(&name);
    let unfilled = || std::io::Error::other(format!("a {label} whose texels do not fill its size"));
    // What the decoder makes of each byte value.
    let bytes = image::GrayImage::from_fn(256, 1, |x, _| image::Luma([x as u8]));
    let decoded = image::DynamicImage::ImageLuma8(bytes).to_rgba32f();
    let byte_of = |v: f32| {
        let k = (v.clamp(0.0, 1.0) * 255.0).round() as u32;
        (decoded.get_pixel(k, 0).0[0].to_bits() == v.to_bits()).then_some(k as u8)
    };
    let as_bytes: Option<Vec<u8>> = mask.texels.iter().map(|t| byte_of(t[0])).collect();
    let saved = match as_bytes {
        Some(values) => image::GrayImage::from_raw(mask.width, mask.height, values)
            .ok_or_else(unfilled)?
            .save(&target),
        None => {
            let values: Vec<u16> = mask
                .texels
                .iter()
                .map(|t| (t[0].clamp(0.0, 1.0) * 65535.0).round() as u16)
                .collect();
            image::ImageBuffer::<image::Luma<u16>, Vec<u16>>::from_raw(
                mask.width,
                mask.height,
                values,
            )
            .ok_or_else(unfilled)?
            .save(&target)
        }
    };
    saved.map_err(std::io::Error::other)?;
    Ok(name)
}

/// Writes colour texture `index` (linear RGB, as decoded) as an sRGB PNG beside the library
/// `mtl` (`STEM.LABELINDEX.png`) and returns its file name. In 8 bits when every value is what
/// some sRGB byte decodes to (as a generator's textures are), so that it reads back with the
/// same bits; otherwise in 16 bits, sRGB encoded and rounded there. Values above 1 (an
/// emission map's radiance) do not fit either and are refused: a PNG would clamp them.
fn write_colour_png(
    mtl: &Path,
    label: &str,
    index: u32,
    texture: &Texture,
) -> std::io::Result<String> {
    let stem = mtl.file_stem().unwrap_or_default().to_string_lossy();
    let name = format!("{stem}.{label}{index}.png");
    let target = mtl.with_file_name(&name);
    let values = crate::scene::obj::srgb8_colour_values();
    let byte_of = |v: f32| {
        let k = values.partition_point(|&x| x < v).min(255);
        (values[k].to_bits() == v.to_bits()).then_some(k as u8)
    };
    let channels = || texture.texels.iter().flat_map(|t| t.iter().copied());
    if let Some(v) = channels().find(|v| !(0.0..=1.0).contains(v)) {
        return Err(std::io::Error::other(format!(
            "texture {} holds {v}, outside [0, 1]: a PNG cannot keep it",
            texture.path
        )));
    }
    let unfilled =
        || std::io::Error::other(format!("a {label} map whose texels do not fill its size"));
    let as_bytes: Option<Vec<u8>> = channels().map(byte_of).collect();
    let saved = match as_bytes {
        Some(bytes) => image::RgbImage::from_raw(texture.width, texture.height, bytes)
            .ok_or_else(unfilled)?
            .save(&target),
        None => {
            let words: Vec<u16> = channels()
                .map(|v| {
                    (crate::scene::obj::linear_to_srgb(v).clamp(0.0, 1.0) * 65535.0).round() as u16
                })
                .collect();
            image::ImageBuffer::<image::Rgb<u16>, Vec<u16>>::from_raw(
                texture.width,
                texture.height,
                words,
            )
            .ok_or_else(unfilled)?
            .save(&target)
        }
    };
    saved.map_err(std::io::Error::other)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_exactly() {
        let mut out = Vec::new();
        let mut num = Numbers::default();
        let values = [0.0, 1.0, -2.5, 548.8, 1e-7, 3.4e38, 0.1, -0.0];
        for &x in &values {
            num.f32(&mut out, x).unwrap();
        }
        num.index(&mut out, 12345678901).unwrap();
        let text = String::from_utf8(out).unwrap();
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(&words[..3], ["0", "1", "-2.5"]);
        for (w, &x) in words.iter().zip(&values) {
            assert_eq!(w.parse::<f32>().unwrap().to_bits(), x.to_bits(), "{w}");
        }
        assert_eq!(words[8], "12345678901");
    }

    /// A colour texture with values no sRGB byte decodes to goes out in 16 bits and reads back
    /// within the 16-bit encoding's rounding; one above 1 is refused, naming the texture.
    #[test]
    fn colour_maps_without_an_8_bit_form_are_written_in_16_bits_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mtl = dir.path().join("scene.mtl");
        let values = [0.3, 0.0, 1.0, 0.5, 0.001, 0.75];
        let mut texture = Texture {
            path: "made in memory".into(),
            width: 2,
            height: 1,
            texels: vec![
                [values[0], values[1], values[2]],
                [values[3], values[4], values[5]],
            ],
            mapping: crate::scene::UvMapping::IDENTITY,
        };
        let name = write_colour_png(&mtl, "colour", 7, &texture).unwrap();
        assert_eq!(name, "scene.colour7.png");
        let back = image::open(dir.path().join(&name)).unwrap();
        let image::DynamicImage::ImageRgb16(back) = back else {
            panic!("not a 16-bit RGB image: {:?}", back.color());
        };
        for (word, value) in back.as_raw().iter().zip(values) {
            let srgb = f32::from(*word) / 65535.0;
            let linear = if srgb <= 0.04045 {
                srgb / 12.92
            } else {
                ((srgb + 0.055) / 1.055).powf(2.4)
            };
            assert!(
                (linear - value).abs() < 1e-4,
                "{value} came back as {linear}"
            );
        }
        texture.texels[1][2] = 1.5;
        let refused = write_colour_png(&mtl, "emission", 8, &texture).unwrap_err();
        assert!(
            refused.to_string().contains("made in memory") && refused.to_string().contains("1.5"),
            "{refused}"
        );
    }

    #[test]
    fn names_are_sanitized_and_unique() {
        assert_eq!(sanitize(" a b\tc "), "a_b_c");
        assert_eq!(sanitize(""), "unnamed");
        assert_eq!(
            unique_names(["x", "x", "x y", "x_y"].into_iter()),
            vec!["x", "x_2", "x_y", "x_y_2"]
        );
    }
}
