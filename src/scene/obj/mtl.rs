//! MTL material libraries: checking them line by line (every error names the MTL file and
//! line), reading the checked text into [`MtlMaterial`]s, turning those into gasworks
//! [`Material`]s, and decoding their textures (`map_Kd`, `map_d`, `map_Ke`, and the bump
//! and normal maps `bump`/`map_Bump` and `norm`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use glam::{Vec2, Vec3};

use super::LoadError;
use crate::colour::luminance;
use crate::scene::{BumpMap, Material, MaterialKind, Texture, UvMapping};

/// The statements of one `newmtl` block that gasworks uses (later statements override
/// earlier ones, as in every MTL reader).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MtlMaterial {
    pub name: String,
    /// Kd.
    pub diffuse: Option<[f32; 3]>,
    /// Ks.
    pub specular: Option<[f32; 3]>,
    /// Ke.
    pub emissive: Option<[f32; 3]>,
    /// Ns.
    pub shininess: Option<f32>,
    /// Ni.
    pub optical_density: Option<f32>,
    /// d.
    pub dissolve: Option<f32>,
    /// Tr (1 - d).
    pub transparency: Option<f32>,
    /// Tf.
    pub transmission_filter: Option<[f32; 3]>,
    pub illumination_model: Option<u8>,
    /// map_Kd, without its options.
    pub diffuse_texture: Option<String>,
    /// map_Kd's `-s` and `-o` options.
    pub diffuse_texture_mapping: UvMapping,
    /// map_d (the opacity mask of a cut-out), without its options.
    pub opacity_texture: Option<String>,
    /// map_d's `-s` and `-o` options.
    pub opacity_texture_mapping: UvMapping,
    /// map_d's `-imfchan`: which channel of the image is the opacity.
    pub opacity_channel: MaskChannel,
    /// map_Ke (the emission map), without its options.
    pub emission_texture: Option<String>,
    /// map_Ke's `-s` and `-o` options.
    pub emission_texture_mapping: UvMapping,
    /// map_Ks (the specular map), without its options.
    pub specular_texture: Option<String>,
    /// map_Ks's `-s` and `-o` options.
    pub specular_texture_mapping: UvMapping,
    /// `bump`/`map_Bump` (a height map, or a normal map where its image holds one: see
    /// [`TextureCache::load_bump`]) or `norm` (a tangent-space normal map), without options.
    pub bump_texture: Option<BumpStatement>,
}

/// A material's `bump`, `map_Bump` or `norm` statement: its file and options.
#[derive(Clone, Debug, PartialEq)]
pub struct BumpStatement {
    pub file: String,
    /// `norm` (always a normal map) rather than `bump`/`map_Bump`.
    pub is_normal_map: bool,
    /// `-s` and `-o`.
    pub mapping: UvMapping,
    /// `-bm`: the height (or a normal map's tilt) multiplier, 1 without it.
    pub multiplier: f32,
    /// `-imfchan`: the channel that holds the heights ([`MaskChannel::Auto`]: luminance).
    pub channel: MaskChannel,
}

/// The keywords of bump (height) maps; `map_Bump` may also name a normal map, recognized by
/// its texels.
const BUMP_KEYWORDS: &[&str] = &["bump", "map_Bump", "map_bump"];
/// The keywords of tangent-space normal maps.
const NORMAL_MAP_KEYWORDS: &[&str] = &["norm", "map_norm", "map_Norm"];

/// The channel of an image that holds an opacity mask (`map_d -imfchan`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MaskChannel {
    /// No `-imfchan`: the alpha channel of an image that has one (how exporters write leaves
    /// and fences: one RGBA image for `map_Kd` and `map_d`), else the luminance (a grey mask).
    #[default]
    Auto,
    Red,
    Green,
    Blue,
    /// `m` (matte): the alpha channel (opaque where the image has none).
    Alpha,
    /// `l`, and `z` (depth, which no image format here carries): Rec. 709 luminance of the
    /// stored values.
    Luminance,
}

impl MaskChannel {
    fn from_option(word: &str) -> Option<MaskChannel> {
        Some(match word {
            "r" => MaskChannel::Red,
            "g" => MaskChannel::Green,
            "b" => MaskChannel::Blue,
            "m" => MaskChannel::Alpha,
            "l" | "z" => MaskChannel::Luminance,
            _ => return None,
        })
    }

    /// The letter of the canonical text.
    fn letter(self) -> &'static str {
        match self {
            MaskChannel::Auto => "auto",
            MaskChannel::Red => "r",
            MaskChannel::Green => "g",
            MaskChannel::Blue => "b",
            MaskChannel::Alpha => "m",
            MaskChannel::Luminance => "l",
        }
    }
}

/// Checks an MTL library and reads its materials; the first malformed line is an error
/// naming the file and the line. A `newmtl` without a name (Blender writes one for a material
/// slot with no material) starts a block that no `usemtl` can name: it is skipped, with one
/// warning.
pub fn parse_library(
    path: &Path,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<MtlMaterial>, LoadError> {
    // Skipped as in OBJ files: otherwise it glues onto the first keyword ("\u{feff}newmtl")
    // and that material is lost.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let canonical = check_library(path, text)?;
    warn_about_what_is_not_applied(path, text, warnings);
    let unnamed: Vec<usize> = canonical
        .lines()
        .enumerate()
        .filter(|(_, line)| *line == "newmtl")
        .map(|(i, _)| i + 1)
        .collect();
    if let Some(first) = unnamed.first() {
        let n = unnamed.len();
        warnings.push(format!(
            "{}:{first}: {} without a material name; {} skipped (a usemtl without a name gets the default material)",
            path.display(),
            if n == 1 { "1 newmtl".to_string() } else { format!("{n} newmtl statements") },
            if n == 1 { "its statements are" } else { "their statements are" }
        ));
    }
    Ok(read_canonical(&canonical))
}

/// Reads the materials of a library that [`check_library`] produced: every statement is well
/// formed there, so nothing can fail. Statements before the first `newmtl`, or after a
/// `newmtl` without a name, belong to no material and are ignored.
fn read_canonical(canonical: &str) -> Vec<MtlMaterial> {
    let mut materials: Vec<MtlMaterial> = Vec::new();
    let mut current: Option<MtlMaterial> = None;
    for line in canonical.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&keyword, args)) = words.split_first() else {
            continue;
        };
        if keyword == "newmtl" {
            materials.extend(current.take());
            let name = line["newmtl".len()..].trim();
            current = (!name.is_empty()).then(|| MtlMaterial {
                name: name.to_string(),
                ..MtlMaterial::default()
            });
            continue;
        }
        if let Some(m) = current.as_mut() {
            apply_canonical_statement(m, keyword, args);
        }
    }
    materials.extend(current);
    materials
}

/// The numbers of a canonical statement (0 for a word that is none).
fn canonical_numbers<const N: usize>(words: &[&str]) -> [f32; N] {
    let mut v = [0f32; N];
    for (value, word) in v.iter_mut().zip(words) {
        *value = word.parse().unwrap_or(0.0);
    }
    v
}

/// The [`UvMapping`] of a canonical texture statement's first four numbers.
fn canonical_mapping(args: &[&str]) -> UvMapping {
    let [su, sv, ou, ov] = canonical_numbers::<4>(args);
    UvMapping {
        scale: Vec2::new(su, sv),
        offset: Vec2::new(ou, ov),
    }
}

/// Sets what one canonical statement (other than `newmtl`) states on its material.
fn apply_canonical_statement(m: &mut MtlMaterial, keyword: &str, args: &[&str]) {
    match keyword {
        "Kd" => m.diffuse = Some(canonical_numbers(args)),
        "Ks" => m.specular = Some(canonical_numbers(args)),
        "Ke" => m.emissive = Some(canonical_numbers(args)),
        "Tf" => m.transmission_filter = Some(canonical_numbers(args)),
        "Ns" => m.shininess = Some(canonical_numbers::<1>(args)[0]),
        "Ni" => m.optical_density = Some(canonical_numbers::<1>(args)[0]),
        "d" => m.dissolve = Some(canonical_numbers::<1>(args)[0]),
        "Tr" => m.transparency = Some(canonical_numbers::<1>(args)[0]),
        "illum" => m.illumination_model = args.first().and_then(|w| w.parse().ok()),
        // Canonical: scale u v, offset u v, (map_d: the channel,) then the file.
        "map_Kd" => {
            m.diffuse_texture_mapping = canonical_mapping(args);
            m.diffuse_texture = Some(args[4.min(args.len())..].join(" "));
        }
        "map_Ke" => {
            m.emission_texture_mapping = canonical_mapping(args);
            m.emission_texture = Some(args[4.min(args.len())..].join(" "));
        }
        "map_Ks" => {
            m.specular_texture_mapping = canonical_mapping(args);
            m.specular_texture = Some(args[4.min(args.len())..].join(" "));
        }
        "bump" | "norm" => set_bump(m, keyword, args),
        "map_d" => {
            m.opacity_texture_mapping = canonical_mapping(args);
            m.opacity_channel = args
                .get(4)
                .and_then(|w| MaskChannel::from_option(w))
                .unwrap_or_default();
            m.opacity_texture = Some(args[5.min(args.len())..].join(" "));
        }
        _ => {}
    }
}

/// A canonical `bump` or `norm` statement.
fn set_bump(m: &mut MtlMaterial, keyword: &str, args: &[&str]) {
    // Canonical: scale u v, offset u v, multiplier, channel, then the file.
    let statement = BumpStatement {
        file: args[6.min(args.len())..].join(" "),
        is_normal_map: keyword == "norm",
        mapping: canonical_mapping(args),
        multiplier: args.get(4).and_then(|w| w.parse().ok()).unwrap_or(1.0),
        channel: args
            .get(5)
            .and_then(|w| MaskChannel::from_option(w))
            .unwrap_or_default(),
    };
    // A normal map wins over a height map, whichever comes first: it is the more
    // specific of the two (exporters that write both mean the normal map).
    let keep_normal = m
        .bump_texture
        .as_ref()
        .is_some_and(|b| b.is_normal_map && !statement.is_normal_map);
    if !keep_normal {
        m.bump_texture = Some(statement);
    }
}

/// Checks an MTL file's text and returns a canonical copy: colours always as three numbers,
/// texture statements without their options, `d` without `-halo`.
pub fn check_library(path: &Path, text: &str) -> Result<String, LoadError> {
    let mut out = String::with_capacity(text.len());
    for (index, line) in logical_lines(text).iter().enumerate() {
        let at = MtlLine {
            path,
            line_no: index + 1,
        };
        out.push_str(&canonical_statement(&at, line)?);
        out.push('\n');
    }
    Ok(out)
}

/// Where in an MTL file a statement is, for [`check_library`]'s errors.
struct MtlLine<'a> {
    path: &'a Path,
    line_no: usize,
}

impl MtlLine<'_> {
    fn syntax(&self, message: String) -> LoadError {
        LoadError::Syntax {
            path: self.path.to_path_buf(),
            line: self.line_no,
            message,
        }
    }

    /// A statement's number; a missing, malformed or non-finite one is an error.
    fn number(&self, token: Option<&str>, what: &str) -> Result<f32, LoadError> {
        let token = token.ok_or_else(|| self.syntax(format!("{what}: missing number")))?;
        let value: f32 = token
            .parse()
            .map_err(|_| self.syntax(format!("{what}: {token:?} is not a number")))?;
        if !value.is_finite() {
            return Err(LoadError::NotFinite {
                path: self.path.to_path_buf(),
                line: self.line_no,
                what: what.to_string(),
                value: token.to_string(),
            });
        }
        Ok(value)
    }
}

/// The canonical text of one line of an MTL file (empty for a line without a statement).
fn canonical_statement(at: &MtlLine, line: &str) -> Result<String, LoadError> {
    let mut words = line.split_whitespace();
    let Some(keyword) = words.next() else {
        return Ok(String::new());
    };
    let rest = line.trim_start()[keyword.len()..].trim();
    Ok(match keyword {
        // Without a name: kept bare, for parse_library to skip and warn about.
        "newmtl" if rest.is_empty() => "newmtl".to_string(),
        "newmtl" => format!("newmtl {rest}"),
        "Ka" | "Kd" | "Ks" | "Ke" | "Tf" => canonical_colour(at, keyword, rest, words.collect())?,
        "Ns" | "Ni" | "Tr" => format!("{keyword} {}", at.number(words.next(), keyword)?),
        "d" => {
            let mut token = words.next();
            if token == Some("-halo") {
                token = words.next();
            }
            format!("d {}", at.number(token, "d")?)
        }
        "illum" => canonical_illum(at, words.next())?,
        "map_Kd" | "map_Ke" | "map_Ks" | "map_d" | "map_D" => canonical_texture(at, keyword, rest)?,
        k if BUMP_KEYWORDS.contains(&k) || NORMAL_MAP_KEYWORDS.contains(&k) => {
            canonical_bump(at, keyword, rest)?
        }
        "map_Ka" | "map_Ns" | "map_ns" | "map_NS" => {
            let file = strip_texture_options(rest);
            if file.is_empty() {
                return Err(at.syntax(format!("{keyword} without a file name")));
            }
            format!("{keyword} {file}")
        }
        _ => line.to_string(),
    })
}

/// A colour statement (`Kd`...) as three numbers.
fn canonical_colour(
    at: &MtlLine,
    keyword: &str,
    rest: &str,
    values: Vec<&str>,
) -> Result<String, LoadError> {
    if values.first().is_some_and(|w| w.parse::<f32>().is_err()) {
        return Err(at.syntax(format!(
            "{keyword}: only RGB colours (one or three numbers) are supported, got {rest:?}"
        )));
    }
    let rgb = match values.len() {
        // One value stands for all three channels.
        1 => {
            let v = at.number(Some(values[0]), keyword)?;
            [v; 3]
        }
        3 => [
            at.number(Some(values[0]), keyword)?,
            at.number(Some(values[1]), keyword)?,
            at.number(Some(values[2]), keyword)?,
        ],
        n => return Err(at.syntax(format!("{keyword}: expected 1 or 3 numbers, got {n}"))),
    };
    Ok(format!("{keyword} {} {} {}", rgb[0], rgb[1], rgb[2]))
}

/// An `illum` statement, whose model must be 0 to 10.
fn canonical_illum(at: &MtlLine, token: Option<&str>) -> Result<String, LoadError> {
    let model = token
        .and_then(|t| t.parse::<u8>().ok())
        .filter(|&m| m <= 10);
    match model {
        Some(m) => Ok(format!("illum {m}")),
        None => Err(at.syntax(format!(
            "illum: expected an illumination model 0 to 10, got {:?}",
            token.unwrap_or("")
        ))),
    }
}

/// A `map_Kd`, `map_Ke`, `map_Ks` or `map_d` statement: scale u v, offset u v, (`map_d`: the
/// channel,) then the file.
fn canonical_texture(at: &MtlLine, keyword: &str, rest: &str) -> Result<String, LoadError> {
    let (options, file) = split_texture_options(rest);
    if file.is_empty() {
        return Err(at.syntax(format!("{keyword} without a file name")));
    }
    let m = texture_mapping(keyword, &options).map_err(|e| at.syntax(e))?;
    let mapped = format!("{} {} {} {}", m.scale.x, m.scale.y, m.offset.x, m.offset.y);
    if keyword != "map_d" && keyword != "map_D" {
        Ok(format!("{keyword} {mapped} {file}"))
    } else {
        let channel = mask_channel(keyword, &options).map_err(|e| at.syntax(e))?;
        Ok(format!("map_d {mapped} {} {file}", channel.letter()))
    }
}

/// A bump or normal map statement as `bump` or `norm`: scale u v, offset u v, multiplier,
/// channel, then the file.
fn canonical_bump(at: &MtlLine, keyword: &str, rest: &str) -> Result<String, LoadError> {
    let (options, file) = split_texture_options(rest);
    if file.is_empty() {
        return Err(at.syntax(format!("{keyword} without a file name")));
    }
    let m = texture_mapping(keyword, &options).map_err(|e| at.syntax(e))?;
    let multiplier = bump_multiplier(keyword, &options).map_err(|e| at.syntax(e))?;
    let channel = mask_channel(keyword, &options).map_err(|e| at.syntax(e))?;
    let canonical = if NORMAL_MAP_KEYWORDS.contains(&keyword) {
        "norm"
    } else {
        "bump"
    };
    Ok(format!(
        "{canonical} {} {} {} {} {multiplier} {} {file}",
        m.scale.x,
        m.scale.y,
        m.offset.x,
        m.offset.y,
        channel.letter()
    ))
}

/// The library's lines, one for each line of the file: a statement line that ends in a
/// backslash goes on in the next line, as in OBJ files ([`super::parse::for_each_line`]: the
/// backslash and line end read as a space, comments do not continue), and is read as one line
/// at its first line, the lines it took in standing empty; so every line number stays the
/// file's, and an error in a continued statement names its first line.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    super::parse::for_each_line(text.as_bytes(), |line, spans, _| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        lines.push(String::from_utf8_lossy(line).into_owned());
        lines.extend(std::iter::repeat_n(String::new(), spans - 1));
        true
    });
    lines
}

/// The file name of a texture statement, without the MTL options (`-s 1 1 1`, `-clamp on`...)
/// that may precede it.
fn strip_texture_options(rest: &str) -> String {
    split_texture_options(rest).1
}

/// The texture options gasworks knows by name: the MTL spec's and `-colorspace` (which several
/// exporters write), each with the words it takes: its required arguments, taken whatever
/// they are (so that `-colorspace sRGB` does not leave `sRGB` to the file name, and a malformed
/// `-s`, `-o` or `-bm` is an error rather than part of the name), then up to `optional` more
/// taken only when they are numbers (the v and w of `-o u [v [w]]`).
const TEXTURE_OPTIONS: &[(&str, usize, usize)] = &[
    ("-blendu", 1, 0),
    ("-blendv", 1, 0),
    ("-bm", 1, 0),
    ("-boost", 1, 0),
    ("-cc", 1, 0),
    ("-clamp", 1, 0),
    ("-colorspace", 1, 0),
    ("-imfchan", 1, 0),
    // `-mm base gain`: a missing gain leaves the next word to the file name.
    ("-mm", 1, 1),
    ("-o", 1, 2),
    ("-s", 1, 2),
    ("-t", 1, 2),
    ("-texres", 1, 0),
    ("-type", 1, 0),
];

/// Whether [`TEXTURE_OPTIONS`] names an option.
fn is_known_option(option: &str) -> bool {
    TEXTURE_OPTIONS.iter().any(|(o, ..)| *o == option)
}

/// A texture statement's options, each with its arguments, and its file name: the words after
/// the options, joined by single spaces (a name may hold spaces). The last word is always
/// left to the file name.
fn split_texture_options(rest: &str) -> (Vec<(&str, Vec<&str>)>, String) {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let mut options = Vec::new();
    let mut i = 0;
    while i < words.len() && words[i].starts_with('-') && words[i].len() > 1 {
        let option = words[i];
        i += 1;
        let candidates = words.get(i..words.len() - 1).unwrap_or(&[]);
        let taken = option_argument_count(option, candidates).max(quoted_words(candidates));
        options.push((option, words[i..i + taken].to_vec()));
        i += taken;
    }
    (options, words[i..].join(" "))
}

/// How many words an argument in double quotes takes at the start of `words` (`"Linear
/// Rec.709"`, an OCIO colour space name, takes 2), up to the one that ends the quote; 0 when
/// `words` does not start with a quote, or never ends it.
fn quoted_words(words: &[&str]) -> usize {
    let Some(rest) = words.first().and_then(|w| w.strip_prefix('"')) else {
        return 0;
    };
    if rest.ends_with('"') {
        return 1;
    }
    words[1..]
        .iter()
        .position(|w| w.ends_with('"'))
        .map_or(0, |last| last + 2)
}

/// How many of `words` (those after an option, less the file name's last) are the option's
/// arguments: by [`TEXTURE_OPTIONS`] for a known option; for an unknown one, the next word
/// when it looks like an argument (a number, on or off, a channel letter), else none.
fn option_argument_count(option: &str, words: &[&str]) -> usize {
    let is_number = |w: &str| w.parse::<f32>().is_ok();
    let Some(&(_, required, optional)) = TEXTURE_OPTIONS.iter().find(|(o, ..)| *o == option) else {
        let looks_like_an_argument = words.first().is_some_and(|w| {
            is_number(w) || matches!(*w, "on" | "off" | "r" | "g" | "b" | "m" | "l" | "z")
        });
        return usize::from(looks_like_an_argument);
    };
    let required = required.min(words.len());
    required
        + words[required..]
            .iter()
            .take(optional)
            .take_while(|w| is_number(w))
            .count()
}

/// The channel a `map_d` statement's `-imfchan` names ([`MaskChannel::Auto`] without one).
fn mask_channel(keyword: &str, options: &[(&str, Vec<&str>)]) -> Result<MaskChannel, String> {
    let mut channel = MaskChannel::Auto;
    for (option, args) in options {
        if *option == "-imfchan" {
            let word = args.first().copied().unwrap_or("");
            channel = MaskChannel::from_option(word).ok_or_else(|| {
                format!("{keyword} -imfchan: expected r, g, b, m, l or z, got {word:?}")
            })?;
        }
    }
    Ok(channel)
}

/// A bump statement's `-bm` multiplier (1 without one); a value that is not finite is an
/// error.
fn bump_multiplier(keyword: &str, options: &[(&str, Vec<&str>)]) -> Result<f32, String> {
    let mut multiplier = 1.0;
    for (option, args) in options {
        if *option == "-bm" {
            let word = args.first().copied().unwrap_or("");
            multiplier = word
                .parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{keyword} -bm: {word:?} is not a finite number"))?;
        }
    }
    Ok(multiplier)
}

/// The [`UvMapping`] of a `map_Kd`, `map_Ke`, `map_d` or bump statement's options: `-s u [v [w]]`
/// scales and `-o u [v [w]]` offsets the texture coordinates (a missing v as 1 and 0; w
/// addresses 3D textures and is ignored). Values that are not finite are an error.
fn texture_mapping(keyword: &str, options: &[(&str, Vec<&str>)]) -> Result<UvMapping, String> {
    let mut mapping = UvMapping::IDENTITY;
    for (option, args) in options {
        let (target, missing) = match *option {
            "-s" => (&mut mapping.scale, 1.0),
            "-o" => (&mut mapping.offset, 0.0),
            _ => continue,
        };
        let mut uv = [missing; 2];
        for (value, arg) in uv.iter_mut().zip(args) {
            *value = arg
                .parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{keyword} {option}: {arg:?} is not a finite number"))?;
        }
        *target = Vec2::from(uv);
    }
    Ok(mapping)
}

/// Whether a texture statement's option changes how the texture looks in a way gasworks does
/// not apply (it applies `-s` and `-o`, and maps textures wrapping, values as they are):
/// turbulence, a value range other than 0 1, clamping, colour correction, a colour space other
/// than the one gasworks decodes the map in (`srgb`: sRGB, else linear). A malformed argument
/// counts as a change. Blending, boost, resolution and `-type` options change nothing here.
fn changes_the_look(option: &str, args: &[&str], srgb: bool) -> bool {
    let is_not = |arg: Option<&&str>, value: f32| arg.is_some_and(|a| a.parse() != Ok(value));
    match option {
        "-t" => is_not(args.first(), 0.0) || is_not(args.get(1), 0.0),
        "-mm" => is_not(args.first(), 0.0) || is_not(args.get(1), 1.0),
        "-clamp" | "-cc" => args.first().is_some_and(|a| !a.eq_ignore_ascii_case("off")),
        "-colorspace" => {
            !args.is_empty() && {
                let name = args.join(" ").trim_matches('"').to_ascii_lowercase();
                let is_srgb = name.starts_with("srgb");
                let is_linear = name.contains("linear")
                    || matches!(name.as_str(), "raw" | "non-color" | "data");
                if srgb {
                    !is_srgb
                } else {
                    !is_linear
                }
            }
        }
        _ => false,
    }
}

/// Whether gasworks decodes a colour map (`map_Kd`, `map_Ke`, `map_Ks`) of this file as sRGB:
/// 8- and 16-bit images are, float images (EXR, HDR: by the name here) are linear.
fn decoded_as_srgb(file: &str) -> bool {
    let extension = Path::new(file).extension().and_then(|e| e.to_str());
    !extension.is_some_and(|e| e.eq_ignore_ascii_case("exr") || e.eq_ignore_ascii_case("hdr"))
}

/// MTL statements that gasworks reads past without applying, grouped by what is lost, with
/// what the image shows instead.
const NOT_APPLIED: &[(&[&str], &str)] = &[
    (
        &["map_opacity"],
        "opacity maps other than map_d: cut-outs (leaves, fences, chains) render as solid faces",
    ),
    (
        &["disp", "map_disp"],
        "displacement maps: surfaces render flat",
    ),
    (
        &[
            "map_Ns", "map_ns", "map_NS", "map_Pr", "map_Pm", "map_RMA", "map_ORM",
        ],
        "shininess, roughness and metallic maps: the material's constant values are used",
    ),
    (&["refl"], "reflection maps"),
];

/// One warning per kind of statement in a library that gasworks does not apply, naming the
/// first and its material and the count: `map_Kd`, `map_d`, `map_Ke` and bump-map options
/// that change the texture's look ([`changes_the_look`]), options gasworks does not know on
/// them, and the maps in [`NOT_APPLIED`].
fn warn_about_what_is_not_applied(path: &Path, text: &str, warnings: &mut Vec<String>) {
    let seen = find_what_is_not_applied(text);
    let mut found = ignored_option_notes(seen.options);
    found.extend(unknown_option_note(seen.unknown));
    found.extend(unread_map_notes(seen.maps));
    found.sort_by_key(|(line, _)| *line);
    warnings.extend(
        found
            .into_iter()
            .map(|(line, what)| format!("{}:{line}: {what}", path.display())),
    );
}

/// The first occurrence (line, material, detail) and the count of one kind.
#[derive(Default)]
struct Seen {
    first: Option<(usize, String, String)>,
    count: usize,
}

impl Seen {
    fn note(&mut self, line: usize, material: &str, detail: String) {
        self.count += 1;
        self.first
            .get_or_insert_with(|| (line, material.to_string(), detail));
    }
}

/// What [`warn_about_what_is_not_applied`] warns about in a library.
#[derive(Default)]
struct NotApplied {
    /// Texture statements with options that change their look, by keyword: map_Kd's, then
    /// map_d's, map_Ke's, the bump maps' and map_Ks's.
    options: [Seen; 5],
    /// Those texture statements with options that [`TEXTURE_OPTIONS`] does not name.
    unknown: Seen,
    /// The statements of [`NOT_APPLIED`], by kind.
    maps: Vec<Seen>,
}

/// The keywords of [`NotApplied::options`]' slots.
const OPTION_SLOTS: [&str; 5] = ["map_Kd", "map_d", "map_Ke", "bump", "map_Ks"];

/// Finds what [`warn_about_what_is_not_applied`] warns about in a library.
fn find_what_is_not_applied(text: &str) -> NotApplied {
    let mut material = "";
    let mut seen = NotApplied {
        maps: NOT_APPLIED.iter().map(|_| Seen::default()).collect(),
        ..NotApplied::default()
    };
    for (index, line) in logical_lines(text).iter().enumerate() {
        let line = line.trim();
        let Some(keyword) = line.split_whitespace().next() else {
            continue;
        };
        let rest = &line[keyword.len()..];
        if keyword == "newmtl" {
            material = rest.trim();
        } else if let Some(slot) = OPTION_SLOTS.iter().position(|k| {
            *k == keyword
                || (keyword == "map_D" && *k == "map_d")
                || (*k == "bump"
                    && (BUMP_KEYWORDS.contains(&keyword) || NORMAL_MAP_KEYWORDS.contains(&keyword)))
        }) {
            let (options, file) = split_texture_options(rest);
            let srgb = [0, 2, 4].contains(&slot) && decoded_as_srgb(&file);
            let ignored: Vec<String> = options
                .iter()
                .filter(|(o, args)| changes_the_look(o, args, srgb))
                .map(|(o, args)| written_option(o, args))
                .collect();
            if !ignored.is_empty() {
                seen.options[slot].note(index + 1, material, ignored.join(" "));
            }
            let unknown: Vec<String> = options
                .iter()
                .filter(|(o, _)| !is_known_option(o))
                .map(|(o, args)| written_option(o, args))
                .collect();
            if !unknown.is_empty() {
                let detail = format!("{} in {keyword}, file {file:?}", unknown.join(" "));
                seen.unknown.note(index + 1, material, detail);
            }
        } else if let Some(kind) = NOT_APPLIED.iter().position(|(k, _)| k.contains(&keyword)) {
            seen.maps[kind].note(index + 1, material, keyword.to_string());
        }
    }
    seen
}

/// An option and its arguments as the file has them.
fn written_option(option: &str, args: &[&str]) -> String {
    [&[option][..], args].concat().join(" ")
}

/// The notes (line, text) on texture statements whose options change their look, one for each
/// keyword of [`NotApplied::options`].
fn ignored_option_notes(options: [Seen; 5]) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for (seen, (keyword, what)) in options.into_iter().zip([
        ("map_Kd", ("its texture is", "their textures are")),
        ("map_d", ("its mask is", "their masks are")),
        ("map_Ke", ("its emission map is", "their emission maps are")),
        ("bump map", ("its bump map is", "their bump maps are")),
        ("map_Ks", ("its specular map is", "their specular maps are")),
    ]) {
        if let (Some((line, material, detail)), count) = (seen.first, seen.count) {
            found.push((
                line,
                format!(
                    "{} options that gasworks does not apply ({detail}, in material {material}{}): {} mapped wrapping, without turbulence, clamping or value changes",
                    super::counted(
                        count,
                        &format!("{keyword} statement has"),
                        &format!("{keyword} statements have")
                    ),
                    if count == 1 { "" } else { ", the first" },
                    if count == 1 { what.0 } else { what.1 },
                ),
            ));
        }
    }
    found
}

/// The note (line, text) on texture statements with options that gasworks does not know:
/// they are skipped, each with the next word where that looks like an argument, so an
/// unknown option's other argument becomes part of the file name; the note shows the name read.
fn unknown_option_note(unknown: Seen) -> Option<(usize, String)> {
    let (line, material, detail) = unknown.first?;
    Some((
        line,
        format!(
            "{} options that gasworks does not know ({detail}, in material {material}{}): skipped, each with the word after it where that is a number, on, off or a channel letter; any other word starts the file name",
            super::counted(
                unknown.count,
                "texture statement has",
                "texture statements have"
            ),
            if unknown.count == 1 { "" } else { ", the first" },
        ),
    ))
}

/// The notes (line, text) on statements that gasworks does not read, one for each kind of
/// [`NOT_APPLIED`].
fn unread_map_notes(maps: Vec<Seen>) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for (seen, (_, what)) in maps.into_iter().zip(NOT_APPLIED) {
        if let Some((line, material, keyword)) = seen.first {
            found.push((
                line,
                format!(
                    "{} not applied ({keyword} in material {material}{}): gasworks does not read {what}",
                    super::counted(seen.count, "statement is", "statements are"),
                    if seen.count == 1 { "" } else { ", the first" },
                ),
            ));
        }
    }
    found
}

fn vec3(v: Option<[f32; 3]>, default: Vec3) -> Vec3 {
    v.map(Vec3::from).unwrap_or(default)
}

/// Turns one MTL material into a gasworks material (the texture is resolved separately).
///
/// The mapping from MTL's `illum` models:
/// - 4, 6, 7, 9 (transparency and refraction), or a dissolve `d` < 1 with `Ni` > 1: glass of
///   index `Ni` (1.5 when absent), tinted by `Tf` (white when absent);
/// - 3, 5 (ray-traced reflection): mirror of reflectance `Ks` (white when `Ks` is black);
/// - any other dissolve `d` < 1 (or `Tr` > 0): the kind below, see-through with opacity `d`
///   ([`Material::opacity`]; not on emitters, with a warning);
/// - `Ks` not black with `Ns` > 0, under illum 2 or none: glossy;
/// - anything else: diffuse `Kd`.
///
/// `Ke` is the emission of any kind; a `map_Ke` multiplies it, and stands for `Ke 1 1 1` in a
/// material that states no `Ke` (the map is then the emission), while under a black `Ke` it
/// is not applied (a warning says so). Colours are clamped to [0, 1] (emission and `Ns` to at
/// least 0, an `Ni` of 0 or less replaced by 1.5), each change named in a warning, and a
/// glossy material whose `Kd + Ks` exceeds 1 in a channel is scaled down to conserve energy.
pub fn convert(m: &MtlMaterial, warnings: &mut Vec<String>, mtl_path: &Path) -> Material {
    // Every value changed here is named in one warning per material: a repair is never silent.
    let mut repairs: Vec<String> = Vec::new();
    let values = RepairedValues::of(m, &mut repairs);
    if !repairs.is_empty() {
        warnings.push(format!(
            "{}: material {}: {}",
            mtl_path.display(),
            m.name,
            repairs.join("; ")
        ));
    }
    let emits = values.emission.max_element() > 0.0;
    warn_about_emission_and_opacity(m, &values, emits, mtl_path, warnings);
    let mut material = Material {
        name: m.name.clone(),
        kind: MaterialKind::Diffuse,
        diffuse: values.diffuse,
        specular: values.specular,
        shininess: values.shininess,
        ior: values.ior.filter(|&n| n > 0.0).unwrap_or(1.5),
        transmittance: values.transmittance,
        emission: values.emission,
        emission_texture: None,
        diffuse_texture: None,
        opacity_texture: None,
        bump: None,
        opacity: if emits { 1.0 } else { values.opacity },
        specular_texture: None,
    };
    set_kind(&mut material, m, values.is_glass, mtl_path, warnings);
    warn_if_specular_map_not_applied(m, &material, mtl_path, warnings);
    material
}

/// As written in a file: "5", "0.5", and "1e38" rather than its 39 digits.
fn written_number(x: f32) -> String {
    if x != 0.0 && !(1e-4..1e7).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A colour as written in a file, three [`written_number`]s.
fn written_colour(v: Vec3) -> String {
    format!(
        "{} {} {}",
        written_number(v.x),
        written_number(v.y),
        written_number(v.z)
    )
}

/// A material's values as [`convert`] uses them, after the repairs (each named in the
/// `repairs` it is built with).
struct RepairedValues {
    diffuse: Vec3,
    specular: Vec3,
    transmittance: Vec3,
    /// Ke as stated (1 1 1 for a `map_Ke` without one), for the warnings.
    ke: Vec3,
    emission: Vec3,
    shininess: f32,
    /// Ni as stated.
    ior: Option<f32>,
    is_glass: bool,
    /// The dissolve in [0, 1]; 1 for glass.
    opacity: f32,
}

impl RepairedValues {
    fn of(m: &MtlMaterial, repairs: &mut Vec<String>) -> RepairedValues {
        let mut clamp01 = |key: &str, v: Vec3| {
            let c = v.clamp(Vec3::ZERO, Vec3::ONE);
            if c != v {
                repairs.push(format!("{key} {} clamped to [0, 1]", written_colour(v)));
            }
            c
        };
        let diffuse = clamp01("Kd", vec3(m.diffuse, Vec3::splat(0.8)));
        let specular = clamp01("Ks", vec3(m.specular, Vec3::ZERO));
        let transmittance = clamp01("Tf", vec3(m.transmission_filter, Vec3::ONE));
        let (ke, emission) = repaired_emission(m, repairs);
        let shininess = m.shininess.unwrap_or(0.0).max(0.0);
        if m.shininess.is_some_and(|n| n < 0.0) {
            repairs.push(format!(
                "Ns {}: a negative exponent is 0",
                m.shininess.unwrap_or_default()
            ));
        }
        let ior = m.optical_density;
        let dissolve = m
            .dissolve
            .or_else(|| m.transparency.map(|tr| 1.0 - tr))
            .unwrap_or(1.0);
        let refractive_illum = matches!(m.illumination_model, Some(4 | 6 | 7 | 9));
        let is_glass = refractive_illum || (dissolve < 1.0 && ior.is_some_and(|n| n > 1.0));
        // Any other dissolve below 1 is a see-through surface (Material::opacity).
        let opacity = if is_glass {
            1.0
        } else {
            let d = dissolve.clamp(0.0, 1.0);
            if d != dissolve {
                repairs.push(format!(
                    "{} {} is no share of the surface: {d} used",
                    if m.dissolve.is_some() { "d" } else { "1 - Tr" },
                    written_number(dissolve)
                ));
            }
            d
        };
        // Only glass uses the index: exporters write `Ni 0.000000` on every material.
        if let Some(n) = ior.filter(|&n| n <= 0.0 && is_glass) {
            repairs.push(format!("Ni {n} is no index of refraction: 1.5 used"));
        }
        RepairedValues {
            diffuse,
            specular,
            transmittance,
            ke,
            emission,
            shininess,
            ior,
            is_glass,
            opacity,
        }
    }
}

/// A material's Ke as stated (1 1 1 for a `map_Ke` without one) and its emission, clamped to
/// [0, [`crate::scene::MAX_RADIANCE`]], each change named in `repairs`.
fn repaired_emission(m: &MtlMaterial, repairs: &mut Vec<String>) -> (Vec3, Vec3) {
    let has_emission_map = m.emission_texture.is_some();
    let ke = vec3(
        m.emissive,
        if has_emission_map {
            Vec3::ONE
        } else {
            Vec3::ZERO
        },
    );
    let emission = ke.clamp(Vec3::ZERO, Vec3::splat(crate::scene::MAX_RADIANCE));
    if ke.min_element() < 0.0 {
        repairs.push(format!(
            "Ke {}: negative emission is none",
            written_colour(ke)
        ));
    }
    if ke.max_element() > crate::scene::MAX_RADIANCE {
        repairs.push(format!(
            "Ke {}: clamped to {:e} (more overflows the film's sums)",
            written_colour(ke),
            crate::scene::MAX_RADIANCE
        ));
    }
    (ke, emission)
}

/// The warnings of a see-through emitter (made opaque), of a fully transparent material, and
/// of a `map_Ke` under a black Ke.
fn warn_about_emission_and_opacity(
    m: &MtlMaterial,
    values: &RepairedValues,
    emits: bool,
    mtl_path: &Path,
    warnings: &mut Vec<String>,
) {
    let opacity = values.opacity;
    if opacity < 1.0 && emits {
        warnings.push(format!(
            "{}: material {}: an emitter is opaque: its dissolve {} (d or Tr) is not applied",
            mtl_path.display(),
            m.name,
            written_number(opacity)
        ));
    } else if opacity <= 0.0 {
        warnings.push(format!(
            "{}: material {}: d 0 (or Tr 1) makes it fully transparent: its faces are invisible (some exporters write Tr 1 for opaque; if so, remove it)",
            mtl_path.display(),
            m.name
        ));
    }
    let has_emission_map = m.emission_texture.is_some();
    if has_emission_map && values.emission.max_element() <= 0.0 {
        warnings.push(format!(
            "{}: material {}: map_Ke is not applied: Ke is {}, and the map multiplies Ke (the material emits nothing)",
            mtl_path.display(),
            m.name,
            written_colour(values.ke)
        ));
    }
}

/// Sets a diffuse material's kind by its `illum` model ([`convert`]): glass, mirror (of white
/// reflectance where Ks is black) or glossy (scaled down where Kd + Ks exceeds 1, with a
/// warning).
fn set_kind(
    material: &mut Material,
    m: &MtlMaterial,
    is_glass: bool,
    mtl_path: &Path,
    warnings: &mut Vec<String>,
) {
    let (diffuse, specular, shininess) = (material.diffuse, material.specular, material.shininess);
    let illum = m.illumination_model;
    if is_glass {
        material.kind = MaterialKind::Glass;
    } else if matches!(illum, Some(3 | 5)) {
        material.kind = MaterialKind::Mirror;
        if specular.max_element() <= 0.0 {
            material.specular = Vec3::ONE;
        }
    } else if matches!(illum, None | Some(2)) && specular.max_element() > 0.0 && shininess > 0.0 {
        material.kind = MaterialKind::Glossy;
        let total = (diffuse + specular).max_element();
        if total > 1.0 {
            material.diffuse /= total;
            material.specular /= total;
            warnings.push(format!(
                "{}: material {}: Kd + Ks exceeds 1 ({total:.3}); both scaled down to conserve energy",
                mtl_path.display(),
                m.name
            ));
        }
    }
}

/// The warning of a `map_Ks` on a material whose kind has no specular reflectance for it to
/// multiply.
fn warn_if_specular_map_not_applied(
    m: &MtlMaterial,
    material: &Material,
    mtl_path: &Path,
    warnings: &mut Vec<String>,
) {
    // map_Ks multiplies the specular reflectance of the kinds that have one.
    if m.specular_texture.is_some()
        && !matches!(material.kind, MaterialKind::Glossy | MaterialKind::Mirror)
    {
        warnings.push(format!(
            "{}: material {}: map_Ks is not applied: {}",
            mtl_path.display(),
            m.name,
            if material.kind == MaterialKind::Glass {
                "glass reflects by its Fresnel term, not Ks"
            } else {
                "the material has no specular lobe (Ks black, Ns 0, or illum 0 or 1)"
            }
        ));
    }
}

/// What a texture's texels are read as: colours (`map_Kd`), emitted radiance (`map_Ke`), an
/// opacity mask (`map_d`), heights or normals (`bump`, `norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TexelUse {
    /// Linear RGB in [0, 1] (8- and 16-bit images sRGB-decoded; a float image's values
    /// clamped, since a reflectance above 1 would create energy).
    Colour,
    /// Linear RGB as [`TexelUse::Colour`], except that a float image (HDR, EXR) keeps its
    /// values above 1, up to [`crate::scene::MAX_RADIANCE`]: an emitter may be brighter than
    /// white.
    Emission,
    /// One channel of opacity in [0, 1], as stored (no sRGB decoding: a mask is data, not a
    /// colour), in all three channels of the texture.
    Mask(MaskChannel),
    /// One channel of heights as stored (data, like a mask; [`MaskChannel::Auto`] is the
    /// luminance, the MTL default for bump maps), in all three channels.
    Height(MaskChannel),
    /// A tangent-space normal map: each stored value `c` in [0, 1] decoded to `2c - 1`.
    Normal,
}

/// Decodes textures once per file and use, and hands out their indices: one texture per
/// file, [`TexelUse`] and [`UvMapping`] (a file mapped two ways is decoded once and its
/// texels copied).
#[derive(Default)]
pub struct TextureCache {
    pub textures: Vec<Texture>,
    by_path: HashMap<(PathBuf, TexelUse), Option<u32>>,
    by_mapping: HashMap<(PathBuf, TexelUse, [u32; 4]), u32>,
    /// The last image file opened and what came of it. Exporters write one RGBA image for a
    /// material's `map_Kd` and `map_d`, named on neighbouring lines, so this one entry lets
    /// the mask reuse the colour's decode (or its error) without holding every image.
    last_image: Option<(PathBuf, Result<image::DynamicImage, String>)>,
    /// How many image files were opened and decoded (successfully or not).
    pub files_decoded: usize,
    /// The [`TexelUse::Colour`] textures that had texels clamped (their float image has
    /// values outside [0, 1]): the others have the texels the same file gives as an emission
    /// map.
    clamped_colours: std::collections::HashSet<u32>,
}

impl TextureCache {
    /// The texture `name` of material `material` in library `mtl_path`, decoded as `usage`
    /// says; `None` (with a warning naming both files) when it cannot be read or decoded.
    pub fn load(
        &mut self,
        mtl_path: &Path,
        material: &str,
        name: &str,
        usage: TexelUse,
        mapping: UvMapping,
        warnings: &mut Vec<String>,
    ) -> Option<u32> {
        let decoded = self.decode(mtl_path, material, name, usage, mapping, warnings)?;
        if self.textures[decoded as usize].mapping == mapping {
            return Some(decoded);
        }
        let path = PathBuf::from(&self.textures[decoded as usize].path);
        let bits = mapping.to_array().map(f32::to_bits);
        if let Some(&known) = self.by_mapping.get(&(path.clone(), usage, bits)) {
            return Some(known);
        }
        let texture = Texture {
            mapping,
            ..self.textures[decoded as usize].clone()
        };
        self.textures.push(texture);
        let index = self.textures.len() as u32 - 1;
        self.by_mapping.insert((path, usage, bits), index);
        Some(index)
    }

    /// The texture decoded from the file `name` on its first use as `usage`, mapped as that
    /// use asked.
    fn decode(
        &mut self,
        mtl_path: &Path,
        material: &str,
        name: &str,
        usage: TexelUse,
        mapping: UvMapping,
        warnings: &mut Vec<String>,
    ) -> Option<u32> {
        let path = texture_path(mtl_path, name);
        if let Some(&known) = self.by_path.get(&(path.clone(), usage)) {
            return known;
        }
        // A file that is a material's map_Kd and its map_Ke (a screen, a sign) has the same
        // texels both ways unless the colour's were clamped: one copy serves both.
        if usage == TexelUse::Emission {
            if let Some(&Some(colour)) = self.by_path.get(&(path.clone(), TexelUse::Colour)) {
                if !self.clamped_colours.contains(&colour) {
                    self.by_path.insert((path, usage), Some(colour));
                    return Some(colour);
                }
            }
        }
        let decoded = self.image(&path).map(|image| match usage {
            TexelUse::Colour => decode_linear(&path, image, 1.0),
            TexelUse::Emission => decode_linear(&path, image, crate::scene::MAX_RADIANCE),
            TexelUse::Mask(channel) => (decode_mask(&path, image, channel), 0),
            TexelUse::Height(channel) => {
                let channel = match channel {
                    MaskChannel::Auto => MaskChannel::Luminance,
                    c => c,
                };
                (decode_mask(&path, image, channel), 0)
            }
            TexelUse::Normal => (decode_normals(&path, image), 0),
        });
        let result = match decoded {
            Ok((mut texture, clamped)) => {
                texture.mapping = mapping;
                if clamped > 0 {
                    warnings.push(format!(
                        "{}: material {material}: texture {}: {clamped} of {} texels {}",
                        mtl_path.display(),
                        path.display(),
                        texture.texels.len(),
                        if usage == TexelUse::Emission {
                            format!("negative, above {:e} or not a number clamped (an emission map is radiance, at least 0)", crate::scene::MAX_RADIANCE)
                        } else {
                            "outside [0, 1] (or not a number) clamped: a diffuse colour above 1 would create energy".to_string()
                        }
                    ));
                }
                self.textures.push(texture);
                let index = self.textures.len() as u32 - 1;
                if clamped > 0 && usage == TexelUse::Colour {
                    self.clamped_colours.insert(index);
                }
                Some(index)
            }
            Err(why) => {
                warnings.push(format!(
                    "{}: material {material}: texture {} cannot be used ({why}); {}",
                    mtl_path.display(),
                    path.display(),
                    match usage {
                        TexelUse::Colour => "using its Kd colour",
                        TexelUse::Emission => "using its Ke emission",
                        TexelUse::Mask(_) => "the material renders without cut-outs",
                        TexelUse::Height(_) | TexelUse::Normal =>
                            "the material renders without its bump map",
                    }
                ));
                None
            }
        };
        self.by_path.insert((path, usage), result);
        result
    }

    /// The bump map of a material's `bump`/`map_Bump` or `norm` statement `bump`, decoded as
    /// its kind; `None` (with a warning) when its file cannot be read or decoded.
    ///
    /// `norm` is a normal map. `bump` and `map_Bump` are height maps in the MTL format, but
    /// Blender and other exporters write tangent-space normal maps there too: such a map is
    /// read as one when its image looks like one ([`looks_like_a_normal_map`]) and no
    /// `-imfchan` names a channel of heights.
    pub fn load_bump(
        &mut self,
        mtl_path: &Path,
        material: &str,
        bump: &BumpStatement,
        warnings: &mut Vec<String>,
    ) -> Option<BumpMap> {
        let normal = bump.is_normal_map
            || (bump.channel == MaskChannel::Auto && {
                let path = texture_path(mtl_path, &bump.file);
                // An unreadable file gets its warning from `load` below.
                self.image(&path).is_ok_and(looks_like_a_normal_map)
            });
        let usage = if normal {
            TexelUse::Normal
        } else {
            TexelUse::Height(bump.channel)
        };
        let texture = self.load(
            mtl_path,
            material,
            &bump.file,
            usage,
            bump.mapping,
            warnings,
        )?;
        let scale = bump.multiplier;
        Some(if normal {
            BumpMap::Normal { texture, scale }
        } else {
            BumpMap::Height { texture, scale }
        })
    }

    /// The decoded image of `path`, opened now unless it is the last one opened.
    fn image(&mut self, path: &Path) -> Result<&image::DynamicImage, String> {
        if self
            .last_image
            .as_ref()
            .is_some_and(|(last, _)| last != path)
        {
            self.last_image = None;
        }
        let files_decoded = &mut self.files_decoded;
        let (_, image) = self.last_image.get_or_insert_with(|| {
            *files_decoded += 1;
            (path.to_path_buf(), crate::scene::image_file::decode(path))
        });
        image.as_ref().map_err(Clone::clone)
    }
}

/// The texels of `image` (decoded from `path`) as an opacity mask: the channel `channel`
/// names, values as stored in [0, 1] (NaN as 0), copied into all three channels.
fn decode_mask(path: &Path, image: &image::DynamicImage, channel: MaskChannel) -> Texture {
    let has_alpha = image.color().has_alpha();
    // A grey image's luminance is its value: read it as such, not through the weighted sum
    // (which rounds).
    let is_grey = !image.color().has_color();
    let rgba = image.to_rgba32f();
    let (width, height) = rgba.dimensions();
    let channel = match channel {
        MaskChannel::Auto if has_alpha => MaskChannel::Alpha,
        MaskChannel::Auto | MaskChannel::Luminance if is_grey => MaskChannel::Red,
        MaskChannel::Auto => MaskChannel::Luminance,
        c => c,
    };
    let texels = rgba
        .pixels()
        .map(|p| {
            let [r, g, b, a] = p.0;
            let value = match channel {
                MaskChannel::Red => r,
                MaskChannel::Green => g,
                MaskChannel::Blue => b,
                MaskChannel::Alpha => a,
                MaskChannel::Luminance | MaskChannel::Auto => luminance(Vec3::new(r, g, b)),
            };
            let value = if value.is_nan() {
                0.0
            } else {
                value.clamp(0.0, 1.0)
            };
            [value; 3]
        })
        .collect();
    decoded_texture(path, width, height, texels)
}

/// Where a library's texture statement points: `name` relative to the library's folder.
fn texture_path(mtl_path: &Path, name: &str) -> PathBuf {
    let dir = mtl_path.parent().unwrap_or(Path::new(""));
    let path = dir.join(name);
    // Libraries written on Windows (Crytek Sponza's among them) use backslashes.
    if !path.exists() && name.contains('\\') {
        return dir.join(name.replace('\\', "/"));
    }
    path
}

/// Whether an image named as a bump map holds a tangent-space normal map rather than heights:
/// a colour image (heights are grey) whose texels, decoded to `2c - 1`, are mostly unit
/// vectors pointing out of the surface (blue, `z` > 0). A grey image, and a colour image that
/// is neither (a photo used as a bump map), is read as heights. Up to 65536 texels spread over
/// the image are looked at.
fn looks_like_a_normal_map(image: &image::DynamicImage) -> bool {
    use image::GenericImageView;
    if !image.color().has_color() {
        return false;
    }
    // A grid of at most 256 x 256 texels, read one by one (8 bits are plenty to tell): no
    // converted copy of a large image.
    let (width, height) = image.dimensions();
    let (nx, ny) = (width.min(256), height.min(256));
    let (mut looked, mut grey, mut unit_outwards) = (0usize, 0usize, 0usize);
    for j in 0..ny {
        for i in 0..nx {
            let x = (u64::from(i) * u64::from(width) / u64::from(nx)) as u32;
            let y = (u64::from(j) * u64::from(height) / u64::from(ny)) as u32;
            let [r, g, b, _] = image.get_pixel(x, y).0;
            looked += 1;
            if r.abs_diff(g) <= 1 && g.abs_diff(b) <= 1 {
                grey += 1;
            }
            let n = glam::Vec3::new(f32::from(r), f32::from(g), f32::from(b)) * (2.0 / 255.0)
                - glam::Vec3::ONE;
            // Within 20% of unit length (8-bit quantization and filtering shorten them).
            if n.z > 0.0 && (n.length() - 1.0).abs() < 0.2 {
                unit_outwards += 1;
            }
        }
    }
    // Most grey texels: heights that were saved as RGB.
    grey * 2 < looked && unit_outwards * 10 >= looked * 9
}

/// The texels of `image` (decoded from `path`) as a tangent-space normal map: each stored
/// value `c` (in [0, 1], no sRGB decoding: normals are data) as `2c - 1`; a float image's
/// values are clamped to [0, 1] first (NaN as 0.5, no tilt).
fn decode_normals(path: &Path, image: &image::DynamicImage) -> Texture {
    let rgb = image.to_rgb32f();
    let (width, height) = rgb.dimensions();
    let texels = rgb
        .pixels()
        .map(|p| {
            p.0.map(|c| {
                let c = if c.is_nan() { 0.5 } else { c.clamp(0.0, 1.0) };
                c * 2.0 - 1.0
            })
        })
        .collect();
    decoded_texture(path, width, height, texels)
}

/// The sRGB transfer function undone: texel values of 8- and 16-bit images are sRGB encoded.
fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// [`srgb_to_linear`] of every 8-bit value, each converted to `f32` by the image crate's own
/// conversion (the one `to_rgb32f` applies: grey images take another route there, which
/// rounds some values differently), so the table gives the bits the per-texel conversion
/// gave.
fn srgb8_to_linear_table(grey: bool) -> &'static [f32; 256] {
    static TABLES: [std::sync::OnceLock<[f32; 256]>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    TABLES[usize::from(grey)].get_or_init(|| {
        let ramp = if grey {
            image::DynamicImage::ImageLuma8(image::GrayImage::from_fn(256, 1, |x, _| {
                image::Luma([x as u8])
            }))
        } else {
            image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(256, 1, |x, _| {
                image::Rgb([x as u8; 3])
            }))
        };
        let ramp = ramp.to_rgb32f();
        std::array::from_fn(|i| srgb_to_linear(ramp.get_pixel(i as u32, 0).0[0]))
    })
}

/// [`srgb_to_linear`] of every 16-bit value, as [`srgb8_to_linear_table`] is of every 8-bit
/// one (each value converted to `f32` by the image crate's own conversion, grey images by
/// theirs): 65536 entries, 256 KiB, built on first use.
fn srgb16_to_linear_table(grey: bool) -> &'static [f32] {
    static TABLES: [std::sync::OnceLock<Vec<f32>>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    TABLES[usize::from(grey)].get_or_init(|| {
        let ramp = if grey {
            image::DynamicImage::ImageLuma16(image::ImageBuffer::from_fn(256, 256, |x, y| {
                image::Luma([(y * 256 + x) as u16])
            }))
        } else {
            image::DynamicImage::ImageRgb16(image::ImageBuffer::from_fn(256, 256, |x, y| {
                image::Rgb([(y * 256 + x) as u16; 3])
            }))
        };
        ramp.to_rgb32f()
            .pixels()
            .map(|p| srgb_to_linear(p.0[0]))
            .collect()
    })
}

/// The texels of `image` (decoded from `path`) as linear RGB in [0, `max`], and how many
/// texels of a float image (HDR, EXR: values as stored, possibly above `max`, negative or NaN)
/// had to be clamped. 8- and 16-bit images give values in [0, 1] whatever `max`.
fn decode_linear(path: &Path, image: &image::DynamicImage, max: f32) -> (Texture, usize) {
    // Float images (HDR, EXR) hold linear values already.
    let is_float = matches!(
        image,
        image::DynamicImage::ImageRgb32F(_) | image::DynamicImage::ImageRgba32F(_)
    );
    let (width, height) = (image.width(), image.height());
    let mut clamped = 0;
    let table = match image {
        image::DynamicImage::ImageRgb8(_) | image::DynamicImage::ImageRgba8(_) => {
            Some(srgb8_to_linear_table(false))
        }
        image::DynamicImage::ImageLuma8(_) | image::DynamicImage::ImageLumaA8(_) => {
            Some(srgb8_to_linear_table(true))
        }
        _ => None,
    };
    // 16-bit images the same way, 65536 values a channel (the `powf` was a third of loading a
    // 4096x4096 16-bit texture).
    let table16 = match image {
        image::DynamicImage::ImageRgb16(_) | image::DynamicImage::ImageRgba16(_) => {
            Some(srgb16_to_linear_table(false))
        }
        image::DynamicImage::ImageLuma16(_) | image::DynamicImage::ImageLumaA16(_) => {
            Some(srgb16_to_linear_table(true))
        }
        _ => None,
    };
    let texels = match (table, table16) {
        // 256 values a channel: one table lookup instead of a `powf` per channel (which
        // was a fifth of loading a textured scene), the same bits.
        (Some(table), _) => image
            .to_rgb8()
            .pixels()
            .map(|p| p.0.map(|c| table[usize::from(c)]))
            .collect(),
        (None, Some(table)) => image
            .to_rgb16()
            .pixels()
            .map(|p| p.0.map(|c| table[usize::from(c)]))
            .collect(),
        (None, None) => image
            .to_rgb32f()
            .pixels()
            .map(|p| {
                if is_float {
                    let inside = p.0.iter().all(|c| (0.0..=max).contains(c));
                    if inside {
                        p.0
                    } else {
                        clamped += 1;
                        // NaN becomes 0 (f32::clamp would keep it).
                        p.0.map(|c| if c.is_nan() { 0.0 } else { c.clamp(0.0, max) })
                    }
                } else {
                    p.0.map(srgb_to_linear)
                }
            })
            .collect(),
    };
    (decoded_texture(path, width, height, texels), clamped)
}

/// The texture the loader reads from a PNG of `image` used as a colour map (`map_Kd`,
/// `map_Ks`, `map_Ke`): sRGB bytes decoded to linear, bit for bit as [`decode_linear`] does.
/// For textures made in memory (`gasworks gen`), so that they equal their files read back.
pub(crate) fn colour_texture_of(name: &str, image: image::RgbImage) -> Texture {
    decode_linear(Path::new(name), &image::DynamicImage::ImageRgb8(image), 1.0).0
}

/// The texture the loader reads from a grey PNG of `image` used as an opacity mask or a
/// height map: each byte's value in [0, 1], bit for bit as [`decode_mask`] does.
pub(crate) fn grey_texture_of(name: &str, image: image::GrayImage) -> Texture {
    decode_mask(
        Path::new(name),
        &image::DynamicImage::ImageLuma8(image),
        MaskChannel::Red,
    )
}

/// The linear value a colour map's 8-bit sRGB byte decodes to, for each byte (increasing):
/// what a writer inverts to save a colour texture in 8 bits without changing a bit.
pub(crate) fn srgb8_colour_values() -> &'static [f32; 256] {
    srgb8_to_linear_table(false)
}

/// The sRGB transfer function, the inverse of [`srgb_to_linear`]: for writing colour maps
/// that no 8-bit image holds exactly.
pub(crate) fn linear_to_srgb(c: f32) -> f32 {
    if c <= 0.0031308 {
        c * 12.92
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

/// A texture decoded from the file `path`, mapped as the identity (its statement's mapping is
/// set by the cache).
fn decoded_texture(path: &Path, width: u32, height: u32, texels: Vec<[f32; 3]>) -> Texture {
    Texture {
        path: path.display().to_string(),
        width,
        height,
        texels,
        mapping: crate::scene::UvMapping::IDENTITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mtl_material(text: &str) -> MtlMaterial {
        let mut mats = parse_library(Path::new("t.mtl"), text, &mut Vec::new()).unwrap();
        mats.remove(0)
    }

    fn kind_of(text: &str) -> MaterialKind {
        convert(&mtl_material(text), &mut Vec::new(), Path::new("t.mtl")).kind
    }

    #[test]
    fn illum_models_map_to_kinds() {
        assert_eq!(kind_of("newmtl a\nKd 0.5 0.5 0.5\n"), MaterialKind::Diffuse);
        assert_eq!(
            kind_of("newmtl a\nKd .3 .3 .3\nKs .2 .2 .2\nNs 50\nillum 2\n"),
            MaterialKind::Glossy
        );
        assert_eq!(
            kind_of("newmtl a\nKs .2 .2 .2\nNs 0\nillum 2\n"),
            MaterialKind::Diffuse
        );
        assert_eq!(
            kind_of("newmtl a\nKs .2 .2 .2\nNs 10\nillum 1\n"),
            MaterialKind::Diffuse
        );
        for illum in [3, 5] {
            assert_eq!(
                kind_of(&format!("newmtl a\nillum {illum}\n")),
                MaterialKind::Mirror
            );
        }
        for illum in [4, 6, 7, 9] {
            assert_eq!(
                kind_of(&format!("newmtl a\nillum {illum}\n")),
                MaterialKind::Glass
            );
        }
        assert_eq!(kind_of("newmtl a\nd 0.5\nNi 1.33\n"), MaterialKind::Glass);
        assert_eq!(kind_of("newmtl a\nd 0.5\n"), MaterialKind::Diffuse);
        assert_eq!(kind_of("newmtl a\nTr 0.5\nNi 1.4\n"), MaterialKind::Glass);
    }

    #[test]
    fn parameters_carry_over() {
        let m = convert(
            &mtl_material("newmtl g\nillum 7\nNi 1.33\nTf 0.9 0.8 0.7\nKe 1 2 3\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(m.ior, 1.33);
        assert_eq!(m.transmittance, Vec3::new(0.9, 0.8, 0.7));
        assert_eq!(m.emission, Vec3::new(1.0, 2.0, 3.0));
        let glass = convert(
            &mtl_material("newmtl g\nillum 4\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(glass.ior, 1.5);
        assert_eq!(glass.transmittance, Vec3::ONE);
        let mirror = convert(
            &mtl_material("newmtl m\nillum 3\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(mirror.specular, Vec3::ONE);
        let tinted = convert(
            &mtl_material("newmtl m\nillum 3\nKs 0.9 0.5 0.1\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(tinted.specular, Vec3::new(0.9, 0.5, 0.1));
    }

    #[test]
    fn glossy_energy_is_conserved_with_a_warning() {
        let mut warnings = Vec::new();
        let m = convert(
            &mtl_material("newmtl a\nKd 0.8 0.8 0.8\nKs 0.5 0.5 0.5\nNs 20\n"),
            &mut warnings,
            Path::new("t.mtl"),
        );
        assert!(((m.diffuse + m.specular).max_element() - 1.0).abs() < 1e-6);
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn single_value_colours_and_texture_options_are_canonicalised() {
        let c = check_library(
            Path::new("t.mtl"),
            "newmtl a\nKd 0.5\nmap_Kd -s 2 2 1 -clamp on tex ture.png\nd -halo 0.5\n",
        )
        .unwrap();
        // map_Kd canonically: scale u v, offset u v, the file.
        assert_eq!(
            c,
            "newmtl a\nKd 0.5 0.5 0.5\nmap_Kd 2 2 0 0 tex ture.png\nd 0.5\n"
        );
    }

    /// `-s` and `-o` place the texture (a missing v as 1 and 0, w ignored); options that
    /// change its look and are not applied are one warning for the library, naming the first
    /// and its material; identity values and harmless options none.
    #[test]
    fn texture_mapping_is_read_and_other_options_are_one_warning() {
        let mut warnings = Vec::new();
        let text = "newmtl plain\nmap_Kd -s 1 1 1 -o 0 0 -blendu off -bm 0.5 -clamp off a.png\nnewmtl wood\nKd 1 1 1\nmap_Kd -s 4 2 1 -o 0.5 wood.png\nnewmtl tiles\nmap_Kd -clamp on -mm 0.1 0.9 -s 3 tiles.png\nnewmtl rough\nmap_Kd -t 0.1 0.1 0 r.png\n";
        let materials = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        let mapping = |i: usize| materials[i].diffuse_texture_mapping;
        assert_eq!(materials[0].diffuse_texture.as_deref(), Some("a.png"));
        assert_eq!(mapping(0), UvMapping::IDENTITY);
        assert_eq!(materials[1].diffuse_texture.as_deref(), Some("wood.png"));
        assert_eq!(mapping(1).scale, Vec2::new(4.0, 2.0));
        assert_eq!(mapping(1).offset, Vec2::new(0.5, 0.0));
        assert_eq!(mapping(2).scale, Vec2::new(3.0, 1.0));
        assert_eq!(
            warnings,
            ["t.mtl:7: 2 map_Kd statements have options that gasworks does not apply (-clamp on -mm 0.1 0.9, in material tiles, the first): their textures are mapped wrapping, without turbulence, clamping or value changes"]
        );
        let mut warnings = Vec::new();
        parse_library(
            Path::new("t.mtl"),
            &text[..text.find("newmtl tiles").unwrap()],
            &mut warnings,
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        // A scale or offset that is not a finite number is an error at its line.
        let e = parse_library(
            Path::new("t.mtl"),
            "newmtl a\nmap_Kd -s 1 inf t.png\n",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.mtl:2: map_Kd -s: \"inf\" is not a finite number"
        );
    }

    /// Every option of the MTL spec, and `-colorspace`, is skipped by name with its
    /// arguments, on every texture keyword: the file name (here with a space) is what follows.
    #[test]
    fn every_texture_option_is_skipped_with_its_arguments() {
        let options: &[(&str, &[&str])] = &[
            ("-blendu", &["on"]),
            ("-blendv", &["off"]),
            ("-bm", &["0.5"]),
            ("-boost", &["1.5"]),
            ("-cc", &["off"]),
            ("-clamp", &["off"]),
            ("-colorspace", &["sRGB"]),
            ("-imfchan", &["r"]),
            ("-mm", &["0", "1"]),
            ("-o", &["0.1"]),
            ("-o", &["0.1", "0.2"]),
            ("-o", &["0.1", "0.2", "0.3"]),
            ("-s", &["2", "-3", "1"]),
            ("-t", &["0", "0", "0"]),
            ("-texres", &["512"]),
            ("-type", &["sphere"]),
        ];
        for (option, args) in options {
            let written = written_option(option, args);
            let statement = format!(" {written} my map.png");
            let (parsed, file) = split_texture_options(&statement);
            assert_eq!(parsed, [(*option, args.to_vec())], "{written}");
            assert_eq!(file, "my map.png", "{written}");
            for keyword in [
                "map_Kd", "map_d", "map_Ke", "map_Ks", "bump", "norm", "map_Ka",
            ] {
                let text = format!("newmtl a\nKs 0.5\nNs 10\n{keyword} {written} my map.png\n");
                let c = check_library(Path::new("t.mtl"), &text).unwrap();
                let last = c.lines().last().unwrap();
                assert!(last.ends_with(" my map.png"), "{keyword} {written}: {last}");
            }
        }
        // After an option's last argument the file name starts, even with a number in it.
        let (parsed, file) = split_texture_options("-o 0.1 0.2 0.3 4 x.png");
        assert_eq!(parsed, [("-o", vec!["0.1", "0.2", "0.3"])]);
        assert_eq!(file, "4 x.png");
        // A colour space name in quotes may hold spaces; an unended quote is one word.
        let (parsed, file) = split_texture_options("-colorspace \"Linear Rec.709\" a b.exr");
        assert_eq!(parsed, [("-colorspace", vec!["\"Linear", "Rec.709\""])]);
        assert_eq!(file, "a b.exr");
        let (parsed, file) = split_texture_options("-colorspace \"ACES\" -o 1 x.png");
        assert_eq!(
            parsed,
            [("-colorspace", vec!["\"ACES\""]), ("-o", vec!["1"])]
        );
        assert_eq!(file, "x.png");
        let (parsed, file) = split_texture_options("-colorspace \"Linear Rec.709.exr");
        assert_eq!(parsed, [("-colorspace", vec!["\"Linear"])]);
        assert_eq!(file, "Rec.709.exr");
        let (parsed, file) = split_texture_options("-s 2 2.png");
        assert_eq!((parsed, file.as_str()), (vec![("-s", vec!["2"])], "2.png"));
    }

    /// The statement of issue 70 (`-colorspace` before `-o`) loads its texture, offset by 0.1,
    /// and `-o` takes 1, 2 or 3 numbers (a missing v as 0, w ignored).
    #[test]
    fn colour_space_and_offsets_leave_the_file_name() {
        let mut warnings = Vec::new();
        let text = "newmtl a\nmap_Kd -colorspace sRGB -o 0.1 diffuse.jpg\nnewmtl b\nmap_Kd -o 0.1 0.2 b.jpg\nnewmtl c\nmap_Kd -o 0.1 0.2 0.3 -colorspace srgb c.jpg\n";
        let materials = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let files: Vec<_> = materials
            .iter()
            .map(|m| m.diffuse_texture.as_deref())
            .collect();
        assert_eq!(files, [Some("diffuse.jpg"), Some("b.jpg"), Some("c.jpg")]);
        let offsets: Vec<_> = materials
            .iter()
            .map(|m| m.diffuse_texture_mapping.offset)
            .collect();
        let (a, b) = (Vec2::new(0.1, 0.0), Vec2::new(0.1, 0.2));
        assert_eq!(offsets, [a, b, b]);
    }

    /// Options gasworks does not apply and that change the look are one warning per keyword,
    /// naming them: a colour space other than the map's decoding (sRGB for colour maps, linear
    /// for float images, masks and bump maps), malformed `-t`/`-clamp` arguments. Unknown
    /// options are one warning naming the first and the file name read after it.
    #[test]
    fn unapplied_and_unknown_options_are_named_in_warnings() {
        let quiet = "newmtl q\nmap_Kd -colorspace sRGB -boost 2 -texres 256 -blendu off q.png\nmap_Ke -colorspace linear hot.exr\nmap_Ks -colorspace \"Linear Rec.709\" s.exr\nmap_d -colorspace Raw m.png\nbump -colorspace Non-Color h.png\nrefl -type sphere r.png\n";
        let mut warnings = Vec::new();
        parse_library(Path::new("t.mtl"), quiet, &mut warnings).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("t.mtl:7: 1 statement is not applied (refl"));
        let loud = "newmtl l\nmap_Kd -colorspace linear l.png\nmap_d -colorspace sRGB m.png\nmap_Ks -t x l.png\nbump -clamp yes h.png\nmap_Kd -foo bar tex.png\nmap_Ke -xyz 2 e.png\n";
        let mut warnings = Vec::new();
        let m = parse_library(Path::new("t.mtl"), loud, &mut warnings).unwrap();
        assert_eq!(m[0].diffuse_texture.as_deref(), Some("bar tex.png"));
        assert_eq!(m[0].emission_texture.as_deref(), Some("e.png"));
        let expected = [
            "t.mtl:2: 1 map_Kd statement has options that gasworks does not apply (-colorspace linear, in material l)",
            "t.mtl:3: 1 map_d statement has options that gasworks does not apply (-colorspace sRGB, in material l)",
            "t.mtl:4: 1 map_Ks statement has options that gasworks does not apply (-t x, in material l)",
            "t.mtl:5: 1 bump map statement has options that gasworks does not apply (-clamp yes, in material l)",
            "t.mtl:6: 2 texture statements have options that gasworks does not know (-foo in map_Kd, file \"bar tex.png\", in material l, the first): skipped, each with the word after it where that is a number, on, off or a channel letter; any other word starts the file name",
        ];
        assert_eq!(warnings.len(), expected.len(), "{warnings:?}");
        for (w, e) in warnings.iter().zip(expected) {
            assert!(w.starts_with(e), "{w}\n{e}");
        }
    }

    /// A statement line ending in a backslash goes on in the next line (colours, texture
    /// options, names); a comment does not; errors and warnings name a continued statement's
    /// first line, and the lines after it keep their numbers.
    #[test]
    fn backslashes_continue_statements_but_not_comments() {
        let mut warnings = Vec::new();
        let text = "newmtl a\nKd 0.1 \\\n 0.2 0.3\r\nmap_Kd -s 2 2 \\\r\n tex.png\n\
                    # C:\\textures\\\nKs 0.5 0.5 0.5\nNs 10\nmap_Ke -clamp \\\non glow.png\n";
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(mats[0].diffuse, Some([0.1, 0.2, 0.3]));
        assert_eq!(mats[0].diffuse_texture.as_deref(), Some("tex.png"));
        assert_eq!(mats[0].diffuse_texture_mapping.scale, Vec2::new(2.0, 2.0));
        assert_eq!(mats[0].specular, Some([0.5, 0.5, 0.5]));
        assert_eq!(mats[0].shininess, Some(10.0));
        assert_eq!(
            warnings,
            ["t.mtl:9: 1 map_Ke statement has options that gasworks does not apply (-clamp on, in material a): its emission map is mapped wrapping, without turbulence, clamping or value changes"]
        );
        let e = parse_library(
            Path::new("t.mtl"),
            "newmtl a\nKd 0.1 \\\n x 0.3\nKs 1 1 1\n",
            &mut warnings,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "t.mtl:2: Kd: \"x\" is not a number");
    }

    /// Maps gasworks does not read are one warning per kind, in file order, naming the first
    /// and its material; two statements of one kind in one material count twice.
    #[test]
    fn maps_that_are_not_applied_are_one_warning_per_kind() {
        let mut warnings = Vec::new();
        let text = "newmtl leaf\nKd 0.2 0.8 0.2\nmap_Kd leaf.png\nmap_d leaf_alpha.png\nmap_bump -bm 0.3 leaf_n.png\nnewmtl chain\nmap_d chain_a.png\nbump chain_h.png\nmap_Ka amb.png\nnewmtl lamp\nKe 1 1 1\nmap_Ke glow.png\nmap_Ns lamp_ns.png\n";
        parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(
            warnings,
            [
                "t.mtl:13: 1 statement is not applied (map_Ns in material lamp): gasworks does not read shininess, roughness and metallic maps: the material's constant values are used",
            ]
        );
    }

    /// `map_Ks` keeps its file and mapping and multiplies Ks on glossy and mirror materials; on
    /// other kinds it is one warning saying why it does nothing, and its look-changing options
    /// are warned about as map_Kd's are.
    #[test]
    fn specular_maps_are_read_and_refused_where_there_is_no_specular_lobe() {
        let mut warnings = Vec::new();
        let text = "newmtl shiny\nKd 0.2 0.2 0.2\nKs 0.5 0.5 0.5\nNs 40\nmap_Ks -s 2 2 -o 0.5 0 spec.png\n\
                    newmtl chrome\nillum 3\nmap_Ks -clamp on spec.png\n\
                    newmtl matte\nKd 0.5 0.5 0.5\nmap_Ks spec.png\n\
                    newmtl glass\nillum 7\nmap_Ks spec.png\n";
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(mats[0].specular_texture.as_deref(), Some("spec.png"));
        assert_eq!(
            mats[0].specular_texture_mapping,
            UvMapping {
                scale: Vec2::new(2.0, 2.0),
                offset: Vec2::new(0.5, 0.0),
            }
        );
        let kinds: Vec<MaterialKind> = mats
            .iter()
            .map(|m| convert(m, &mut warnings, Path::new("t.mtl")).kind)
            .collect();
        assert_eq!(
            kinds,
            [
                MaterialKind::Glossy,
                MaterialKind::Mirror,
                MaterialKind::Diffuse,
                MaterialKind::Glass
            ]
        );
        assert_eq!(
            warnings,
            [
                "t.mtl:8: 1 map_Ks statement has options that gasworks does not apply (-clamp on, in material chrome): its specular map is mapped wrapping, without turbulence, clamping or value changes",
                "t.mtl: material matte: map_Ks is not applied: the material has no specular lobe (Ks black, Ns 0, or illum 0 or 1)",
                "t.mtl: material glass: map_Ks is not applied: glass reflects by its Fresnel term, not Ks",
            ]
        );
    }

    /// `bump`, `map_Bump` and `norm` keep their file, mapping, `-bm` and `-imfchan`; a normal
    /// map wins over a height map in either order; options that change the look are one
    /// warning; a `-bm` that is not a number is an error naming the line.
    #[test]
    fn bump_and_normal_map_statements_are_read_with_their_options() {
        let mut warnings = Vec::new();
        let text = "newmtl wall\nbump -bm 0.5 -imfchan r -s 2 3 -o 0.25 0 bricks h.png\n\
                    newmtl stone\nmap_Bump stone_n.png\n\
                    newmtl both\nnorm -bm 2 n.png\nmap_bump h.png\n\
                    newmtl both2\nmap_bump h.png\nmap_norm n.png\n\
                    newmtl graded\nmap_bump -mm 0.2 0.5 g.png\n";
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        let bump = |i: usize| mats[i].bump_texture.clone().unwrap();
        assert_eq!(
            bump(0),
            BumpStatement {
                file: "bricks h.png".into(),
                is_normal_map: false,
                mapping: UvMapping {
                    scale: Vec2::new(2.0, 3.0),
                    offset: Vec2::new(0.25, 0.0),
                },
                multiplier: 0.5,
                channel: MaskChannel::Red,
            }
        );
        assert_eq!(bump(1).file, "stone_n.png");
        assert_eq!(
            (bump(1).multiplier, bump(1).channel, bump(1).is_normal_map),
            (1.0, MaskChannel::Auto, false)
        );
        for i in [2, 3] {
            assert!(bump(i).is_normal_map && bump(i).file == "n.png", "{i}");
        }
        assert_eq!(bump(2).multiplier, 2.0);
        assert_eq!(
            warnings,
            ["t.mtl:12: 1 bump map statement has options that gasworks does not apply (-mm 0.2 0.5, in material graded): its bump map is mapped wrapping, without turbulence, clamping or value changes"]
        );
        let e = parse_library(
            Path::new("t.mtl"),
            "newmtl a\nbump -bm x h.png\n",
            &mut warnings,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.mtl:2: bump -bm: \"x\" is not a finite number"
        );
        let e = parse_library(Path::new("t.mtl"), "newmtl a\nnorm\n", &mut warnings).unwrap_err();
        assert_eq!(e.to_string(), "t.mtl:2: norm without a file name");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
        ))]
        /// Any MTL text made of real keywords and option soup either fails at a line it names,
        /// or gives materials whose values every backend can use: finite, in range, glass
        /// opaque, emitters opaque, bump multipliers finite.
        #[test]
        fn mtl_statements_in_any_order_never_panic_and_give_usable_materials(
            lines in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "newmtl", "newmtl", "Kd", "Ks", "Ke", "Ns", "Ni", "d", "Tr", "Tf",
                        "illum", "map_Kd", "map_d", "map_Ke", "bump", "map_Bump", "norm",
                        "map_norm", "map_Ks", "disp", "refl", "#", "d -halo", "Ka",
                    ]),
                    // Numbers, mostly well formed, some out of range or not finite.
                    proptest::collection::vec(
                        proptest::sample::select(vec![
                            "0", "0.25", "0.5", "1", "2", "-1", "7", "1.5", "1e39", "nan",
                            "inf", "1e-3",
                        ]),
                        1..4,
                    ),
                    // Texture options, each with arguments or without (and a backslash, which
                    // continues a line when it ends one).
                    proptest::collection::vec(
                        proptest::sample::select(vec![
                            "-bm 0.5", "-bm -2", "-bm", "-bm x", "-s 2 2", "-o 0.5 0.5",
                            "-s nan", "-imfchan r", "-imfchan q", "-mm 0.2 0.5", "-clamp on",
                            "-t 1 0", "-cc off", "-colorspace sRGB", "-o 0.1", "-boost 2",
                            "-texres 64", "-type sphere", "-blendv on", "-foo bar", "-s", "\\",
                        ]),
                        0..3,
                    ),
                    proptest::sample::select(vec!["file.png", "a b.png", "dir\\f.png", ""]),
                    // Now and then a line of soup.
                    proptest::bool::weighted(0.05),
                ),
                0..24,
            )
        ) {
            let text: String = lines
                .iter()
                .enumerate()
                .map(|(i, (k, numbers, options, file, soup))| {
                    if *soup {
                        format!("{k} {} {}\n", options.join(" "), numbers.join(" "))
                    } else if k.starts_with("newmtl") {
                        format!("newmtl m{i}\n")
                    } else if k.starts_with("map") || ["bump", "norm", "disp", "refl"].contains(k) {
                        format!("{k} {} {file}\n", options.join(" "))
                    } else if ["Kd", "Ks", "Ke", "Tf", "Ka"].contains(k) && numbers.len() == 2 {
                        format!("{k} {} {} {}\n", numbers[0], numbers[1], numbers[0])
                    } else if *k == "illum" {
                        format!("illum {}\n", numbers.len() * 2 + 1)
                    } else {
                        format!("{k} {}\n", numbers.join(" "))
                    }
                })
                .collect();
            let mut warnings = Vec::new();
            match parse_library(Path::new("t.mtl"), &text, &mut warnings) {
                Err(e) => {
                    let e = e.to_string();
                    let line: Option<usize> = e
                        .strip_prefix("t.mtl:")
                        .and_then(|r| r.split(':').next())
                        .and_then(|n| n.parse().ok());
                    proptest::prop_assert!(
                        line.is_some_and(|n| (1..=lines.len()).contains(&n)),
                        "{e}"
                    );
                }
                Ok(materials) => {
                    for m in &materials {
                        let c = convert(m, &mut warnings, Path::new("t.mtl"));
                        let finite = [c.diffuse, c.specular, c.transmittance, c.emission]
                            .iter()
                            .all(|v| v.is_finite() && v.min_element() >= 0.0);
                        proptest::prop_assert!(finite, "{c:?}");
                        proptest::prop_assert!(c.shininess.is_finite() && c.shininess >= 0.0);
                        proptest::prop_assert!(c.ior.is_finite() && c.ior > 0.0, "{c:?}");
                        proptest::prop_assert!((0.0..=1.0).contains(&c.opacity), "{c:?}");
                        if c.kind == MaterialKind::Glass || c.is_emissive() {
                            proptest::prop_assert_eq!(c.opacity, 1.0);
                        }
                        if let Some(b) = &m.bump_texture {
                            proptest::prop_assert!(b.multiplier.is_finite());
                            proptest::prop_assert!(!b.file.is_empty());
                        }
                    }
                }
            }
        }
    }

    fn rgb_image(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> image::DynamicImage {
        image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, y| image::Rgb(f(x, y))))
    }

    /// A bump map's image is read as normals only when it is coloured and its texels are
    /// unit vectors out of the surface.
    #[test]
    fn normal_maps_named_as_bump_maps_are_told_by_their_texels() {
        // A normal map: bumps of several slopes, every texel a unit vector.
        let normals = rgb_image(64, 64, |x, y| {
            let (a, b) = ((x as f32 * 0.3).sin() * 0.5, (y as f32 * 0.2).cos() * 0.3);
            let n = glam::Vec3::new(a, b, 1.0).normalize();
            (n * 0.5 + glam::Vec3::splat(0.5))
                .to_array()
                .map(|c| (c * 255.0).round() as u8)
        });
        assert!(looks_like_a_normal_map(&normals));
        // The flat normal map.
        assert!(looks_like_a_normal_map(&rgb_image(8, 8, |_, _| [
            128, 128, 255
        ])));
        // Heights saved as RGB, a grey image, a photo-like colour image, a blue image whose
        // texels are no unit vectors.
        assert!(!looks_like_a_normal_map(&rgb_image(
            8,
            8,
            |x, _| [x as u8 * 30; 3]
        )));
        assert!(!looks_like_a_normal_map(&image::DynamicImage::ImageLuma8(
            image::GrayImage::from_fn(8, 8, |x, _| image::Luma([x as u8 * 30]))
        )));
        assert!(!looks_like_a_normal_map(&rgb_image(8, 8, |x, y| [
            x as u8 * 30,
            y as u8 * 20,
            90
        ])));
        assert!(!looks_like_a_normal_map(&rgb_image(8, 8, |_, _| [
            100, 100, 160
        ])));
    }

    /// `map_Ke` keeps its file and mapping; it multiplies Ke, stands for `Ke 1 1 1` where the
    /// material states no Ke, and is not applied (with a warning) under a black Ke. Its
    /// options that change the look are warned about as map_Kd's are.
    #[test]
    fn emission_maps_are_read_with_their_mapping() {
        let text = "newmtl sign\nKe 2 2 2\nmap_Ke -s 2 1 -o 0.5 0 sign glow.png\nnewmtl screen\nmap_Ke -clamp on screen.png\nnewmtl dark\nKe 0 0 0\nmap_Ke dark.png\n";
        let mut warnings = Vec::new();
        let m = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(
            warnings,
            ["t.mtl:5: 1 map_Ke statement has options that gasworks does not apply (-clamp on, in material screen): its emission map is mapped wrapping, without turbulence, clamping or value changes"]
        );
        assert_eq!(m[0].emission_texture.as_deref(), Some("sign glow.png"));
        assert_eq!(
            m[0].emission_texture_mapping,
            UvMapping {
                scale: Vec2::new(2.0, 1.0),
                offset: Vec2::new(0.5, 0.0),
            }
        );
        assert_eq!(m[1].emission_texture.as_deref(), Some("screen.png"));
        assert_eq!(m[1].emission_texture_mapping, UvMapping::IDENTITY);

        let mut warnings = Vec::new();
        let path = Path::new("t.mtl");
        let [sign, screen, dark] = [0, 1, 2].map(|i| convert(&m[i], &mut warnings, path));
        assert_eq!(
            sign.emission,
            Vec3::splat(2.0),
            "the map multiplies the stated Ke"
        );
        assert_eq!(screen.emission, Vec3::ONE, "no Ke: the map is the emission");
        assert_eq!(dark.emission, Vec3::ZERO);
        assert_eq!(
            warnings,
            ["t.mtl: material dark: map_Ke is not applied: Ke is 0 0 0, and the map multiplies Ke (the material emits nothing)"]
        );
    }

    /// `map_d` (and `map_D`) keep their file, mapping and `-imfchan` channel; a channel that is
    /// none of r g b m l z is an error at its line.
    #[test]
    fn opacity_maps_are_read_with_their_mapping_and_channel() {
        let text = "newmtl leaf\nmap_d -s 2 2 -imfchan m leaf mask.png\nnewmtl fence\nmap_D -o 0.5 fence.png\nnewmtl grey\nmap_d -imfchan l -clamp on grey.png\n";
        let mut warnings = Vec::new();
        let m = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(
            warnings,
            ["t.mtl:6: 1 map_d statement has options that gasworks does not apply (-clamp on, in material grey): its mask is mapped wrapping, without turbulence, clamping or value changes"]
        );
        assert_eq!(m[0].opacity_texture.as_deref(), Some("leaf mask.png"));
        assert_eq!(m[0].opacity_texture_mapping.scale, Vec2::new(2.0, 2.0));
        assert_eq!(m[0].opacity_channel, MaskChannel::Alpha);
        assert_eq!(m[1].opacity_texture.as_deref(), Some("fence.png"));
        assert_eq!(m[1].opacity_texture_mapping.offset, Vec2::new(0.5, 0.0));
        assert_eq!(m[1].opacity_channel, MaskChannel::Auto);
        assert_eq!(m[2].opacity_channel, MaskChannel::Luminance);
        assert_eq!(m[2].opacity_texture.as_deref(), Some("grey.png"));
        let e = parse_library(
            Path::new("t.mtl"),
            "newmtl a\nKd 1 1 1\nmap_d -imfchan q a.png\n",
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.mtl:3: map_d -imfchan: expected r, g, b, m, l or z, got \"q\""
        );
    }

    #[test]
    fn blocks_without_a_name_or_before_any_newmtl_are_skipped_with_one_warning() {
        let mut warnings = Vec::new();
        let text = "Kd 1 1 1\nnewmtl \nKd 0 1 0\nnewmtl a\nKd 1 0 0\nKd 0 0 1\nnewmtl\nNs 3\n";
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        assert_eq!(mats.len(), 1);
        assert_eq!(mats[0].name, "a");
        // A later statement overrides an earlier one.
        assert_eq!(mats[0].diffuse, Some([0.0, 0.0, 1.0]));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("t.mtl:2: 2 newmtl statements without a material name"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (text, line) in [
            ("newmtl a\nKd 0.5 0.5\n", 2),
            ("newmtl a\n\nKd 1 x 1\n", 3),
            ("newmtl a\nNs\n", 2),
            ("newmtl a\nillum 2.5\n", 2),
            ("newmtl a\nmap_Kd\n", 2),
            ("newmtl a\nKd spectral x.rfl\n", 2),
        ] {
            let e = check_library(Path::new("t.mtl"), text).unwrap_err();
            assert_eq!(e.line(), Some(line), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("t.mtl:{line}:")), "{e}");
        }
        let e = check_library(Path::new("t.mtl"), "newmtl a\nKe nan 0 0\n").unwrap_err();
        assert!(matches!(e, LoadError::NotFinite { line: 2, .. }), "{e}");
    }

    #[test]
    fn srgb_decoding_endpoints() {
        assert_eq!(srgb_to_linear(0.0), 0.0);
        assert!((srgb_to_linear(1.0) - 1.0).abs() < 1e-6);
        assert!((srgb_to_linear(0.5) - 0.21404).abs() < 1e-4);
    }

    #[test]
    fn a_utf8_byte_order_mark_is_skipped() {
        let mats = parse_library(
            Path::new("t.mtl"),
            "\u{feff}newmtl m\nKd 1 0 0\n",
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(mats.len(), 1);
        assert_eq!(mats[0].name, "m");
    }

    #[test]
    fn values_out_of_range_are_repaired_with_one_warning_naming_each() {
        let text = "newmtl hot\nKd 5 0.5 -1\nKe -5 1 0\nNs -3\nillum 7\nNi 0\nnewmtl fine\nKd 0.5 0.5 0.5\n";
        let mut warnings = Vec::new();
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        let hot = convert(&mats[0], &mut warnings, Path::new("t.mtl"));
        assert_eq!(hot.diffuse, Vec3::new(1.0, 0.5, 0.0));
        assert_eq!(hot.emission, Vec3::new(0.0, 1.0, 0.0));
        assert_eq!((hot.shininess, hot.ior), (0.0, 1.5));
        assert_eq!(
            warnings,
            ["t.mtl: material hot: Kd 5 0.5 -1 clamped to [0, 1]; Ke -5 1 0: negative emission is none; Ns -3: a negative exponent is 0; Ni 0 is no index of refraction: 1.5 used"]
        );
        convert(&mats[1], &mut warnings, Path::new("t.mtl"));
        assert_eq!(warnings.len(), 1, "a material in range warns nothing");
        // Ni 0 on a material that is not glass: the index is not used, so no warning.
        let mats = parse_library(
            Path::new("t.mtl"),
            "newmtl wall\nKd 0.5 0.5 0.5\nillum 2\nNi 0.000000\n",
            &mut warnings,
        )
        .unwrap();
        convert(&mats[0], &mut warnings, Path::new("t.mtl"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let text = "newmtl blazing\nKe 1e38 1 1\n";
        let mats = parse_library(Path::new("t.mtl"), text, &mut warnings).unwrap();
        let blazing = convert(&mats[0], &mut warnings, Path::new("t.mtl"));
        assert_eq!(blazing.emission, Vec3::new(1e20, 1.0, 1.0));
        assert!(
            warnings[1].contains("Ke 1e38 1 1: clamped to 1e20"),
            "{warnings:?}"
        );
    }

    /// One RGBA file as a material's `map_Kd` and `map_d` is opened and decoded once: the
    /// colour texture gets sRGB-decoded RGB, the mask the alpha as stored. An unreadable file
    /// named twice in a row is tried once and warned about for each use. The cache holds one
    /// image, so a file named again after another is decoded again.
    #[test]
    fn a_file_used_as_colour_and_mask_is_decoded_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut leaf = image::RgbaImage::new(2, 1);
        leaf.put_pixel(0, 0, image::Rgba([255, 128, 0, 255]));
        leaf.put_pixel(1, 0, image::Rgba([0, 0, 0, 0]));
        leaf.save(dir.path().join("leaf.png")).unwrap();
        image::GrayImage::new(1, 1)
            .save(dir.path().join("grey.png"))
            .unwrap();
        let mtl = dir.path().join("m.mtl");
        let (id, mut warnings) = (UvMapping::IDENTITY, Vec::new());
        let mut cache = TextureCache::default();
        let mask = TexelUse::Mask(MaskChannel::Auto);
        let mut load = |c: &mut TextureCache, name: &str, usage| {
            c.load(&mtl, "m", name, usage, id, &mut warnings)
        };
        let colour = load(&mut cache, "leaf.png", TexelUse::Colour).unwrap();
        let alpha = load(&mut cache, "leaf.png", mask).unwrap();
        assert_eq!(cache.files_decoded, 1);
        assert_ne!(colour, alpha);
        let c = &cache.textures[colour as usize].texels;
        assert_eq!(c[0], [1.0, srgb_to_linear(128.0 / 255.0), 0.0]);
        assert_eq!(cache.textures[alpha as usize].texels, [[1.0; 3], [0.0; 3]]);

        assert_eq!(load(&mut cache, "gone.png", TexelUse::Colour), None);
        assert_eq!(load(&mut cache, "gone.png", mask), None);
        assert_eq!(cache.files_decoded, 2);

        load(&mut cache, "grey.png", mask).unwrap();
        load(&mut cache, "leaf.png", TexelUse::Mask(MaskChannel::Red)).unwrap();
        assert_eq!(cache.files_decoded, 4);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.contains("gone.png")));
        assert!(warnings[0].contains("using its Kd colour"));
        assert!(warnings[1].contains("without cut-outs"));
    }

    /// [`decode_linear`] of `image` gives, bit for bit, what `to_rgb32f` then [`srgb_to_linear`]
    /// per channel gives (the conversion the tables replaced), and nothing clamped.
    fn assert_decodes_as_per_channel(image: &image::DynamicImage) {
        let reference: Vec<[u32; 3]> = image
            .to_rgb32f()
            .pixels()
            .map(|p| p.0.map(|c| srgb_to_linear(c).to_bits()))
            .collect();
        let (texture, clamped) = decode_linear(Path::new("t.png"), image, 1.0);
        assert_eq!(
            (texture.width, texture.height, clamped),
            (image.width(), image.height(), 0)
        );
        let bits: Vec<[u32; 3]> = texture.texels.iter().map(|p| p.map(f32::to_bits)).collect();
        assert!(bits == reference, "{:?}", image.color());
    }

    /// The table path for 16-bit images gives the bits of the conversion it replaced
    /// (`to_rgb32f`, then [`srgb_to_linear`] per channel) for every value in every 16-bit
    /// layout.
    #[test]
    fn sixteen_bit_textures_decode_as_the_per_channel_conversion_did() {
        let pixel = |x: u32, y: u32| {
            let v = (y * 256 + x) as u16;
            [v, 65535 - v, v.wrapping_mul(7919), v / 3]
        };
        let rgba: image::ImageBuffer<image::Rgba<u16>, Vec<u16>> =
            image::ImageBuffer::from_fn(256, 256, |x, y| image::Rgba(pixel(x, y)));
        let rgba = image::DynamicImage::ImageRgba16(rgba);
        let layouts = [
            image::DynamicImage::ImageRgb16(rgba.to_rgb16()),
            rgba.clone(),
            image::DynamicImage::ImageLumaA16(image::ImageBuffer::from_fn(256, 256, |x, y| {
                image::LumaA([pixel(x, y)[0], 9])
            })),
            image::DynamicImage::ImageLuma16(image::ImageBuffer::from_fn(256, 256, |x, y| {
                image::Luma([pixel(x, y)[2]])
            })),
        ];
        layouts.iter().for_each(assert_decodes_as_per_channel);
    }

    /// The table path for 8-bit images gives the bits of the conversion it replaced
    /// (`to_rgb32f`, then [`srgb_to_linear`] per channel) for every value in every 8-bit layout.
    #[test]
    fn eight_bit_textures_decode_as_the_per_channel_conversion_did() {
        let pixel = |x: u32| {
            let v = (x % 256) as u8;
            [v, 255 - v, v.wrapping_mul(7), v / 2]
        };
        let rgba = image::RgbaImage::from_fn(256, 2, |x, y| image::Rgba(pixel(x + y)));
        let layouts = [
            image::DynamicImage::ImageRgba8(rgba.clone()),
            image::DynamicImage::ImageRgb8(image::DynamicImage::ImageRgba8(rgba.clone()).to_rgb8()),
            image::DynamicImage::ImageLumaA8(image::ImageBuffer::from_fn(256, 2, |x, y| {
                image::LumaA([pixel(x + y)[0], 9])
            })),
            image::DynamicImage::ImageLuma8(image::ImageBuffer::from_fn(256, 2, |x, y| {
                image::Luma([pixel(x + y)[1]])
            })),
        ];
        layouts.iter().for_each(assert_decodes_as_per_channel);
    }
}
