//! MTL material libraries: checking them line by line (tobj's MTL errors carry no line and it
//! panics on a colour with two components), turning tobj's materials into gasworks
//! [`Material`]s, and decoding `map_Kd` textures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use glam::Vec3;

use super::LoadError;
use crate::scene::{Material, MaterialKind, Texture};

/// Checks an MTL file's text and returns a cleaned-up copy for tobj: colours always as three
/// numbers, texture statements without their options, `d` without `-halo`.
pub fn check_library(path: &Path, text: &str) -> Result<String, LoadError> {
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let syntax = |message: String| LoadError::Syntax {
            path: path.to_path_buf(),
            line: line_no,
            message,
        };
        let number = |token: Option<&str>, what: &str| -> Result<f32, LoadError> {
            let token = token.ok_or_else(|| syntax(format!("{what}: missing number")))?;
            let value: f32 = token
                .parse()
                .map_err(|_| syntax(format!("{what}: {token:?} is not a number")))?;
            if !value.is_finite() {
                return Err(LoadError::NotFinite {
                    path: path.to_path_buf(),
                    line: line_no,
                    what: what.to_string(),
                    value: token.to_string(),
                });
            }
            Ok(value)
        };
        let mut words = line.split_whitespace();
        let Some(keyword) = words.next() else {
            out.push('\n');
            continue;
        };
        let rest = line.trim_start()[keyword.len()..].trim();
        let canonical = match keyword {
            "newmtl" => {
                if rest.is_empty() {
                    return Err(syntax("newmtl without a material name".into()));
                }
                format!("newmtl {rest}")
            }
            "Ka" | "Kd" | "Ks" | "Ke" | "Tf" => {
                let values: Vec<&str> = words.collect();
                if values.first().is_some_and(|w| w.parse::<f32>().is_err()) {
                    return Err(syntax(format!(
                        "{keyword}: only RGB colours (one or three numbers) are supported, got {rest:?}"
                    )));
                }
                let rgb = match values.len() {
                    // One value stands for all three channels.
                    1 => {
                        let v = number(Some(values[0]), keyword)?;
                        [v; 3]
                    }
                    3 => [
                        number(Some(values[0]), keyword)?,
                        number(Some(values[1]), keyword)?,
                        number(Some(values[2]), keyword)?,
                    ],
                    n => {
                        return Err(syntax(format!(
                            "{keyword}: expected 1 or 3 numbers, got {n}"
                        )))
                    }
                };
                format!("{keyword} {} {} {}", rgb[0], rgb[1], rgb[2])
            }
            "Ns" | "Ni" | "Tr" => format!("{keyword} {}", number(words.next(), keyword)?),
            "d" => {
                let mut token = words.next();
                if token == Some("-halo") {
                    token = words.next();
                }
                format!("d {}", number(token, "d")?)
            }
            "illum" => {
                let token = words.next();
                let model = token
                    .and_then(|t| t.parse::<u8>().ok())
                    .filter(|&m| m <= 10);
                match model {
                    Some(m) => format!("illum {m}"),
                    None => {
                        return Err(syntax(format!(
                            "illum: expected an illumination model 0 to 10, got {:?}",
                            token.unwrap_or("")
                        )))
                    }
                }
            }
            "map_Ka" | "map_Kd" | "map_Ks" | "map_Bump" | "map_bump" | "map_Ns" | "map_ns"
            | "map_NS" | "bump" | "map_d" => {
                let file = strip_texture_options(rest);
                if file.is_empty() {
                    return Err(syntax(format!("{keyword} without a file name")));
                }
                format!("{keyword} {file}")
            }
            _ => line.to_string(),
        };
        out.push_str(&canonical);
        out.push('\n');
    }
    Ok(out)
}

/// The file name of a texture statement, without the MTL options (`-s 1 1 1`, `-clamp on`...)
/// that may precede it.
fn strip_texture_options(rest: &str) -> String {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() && words[i].starts_with('-') && words[i].len() > 1 {
        let option = words[i];
        i += 1;
        // Options take one word (on/off, a channel, a number) or up to three numbers.
        let max_args = match option {
            "-o" | "-s" | "-t" => 3,
            "-mm" => 2,
            _ => 1,
        };
        let mut taken = 0;
        while taken < max_args && i < words.len() - 1 {
            let w = words[i];
            let is_arg = w.parse::<f32>().is_ok()
                || (taken == 0 && matches!(w, "on" | "off" | "r" | "g" | "b" | "m" | "l" | "z"));
            if !is_arg {
                break;
            }
            i += 1;
            taken += 1;
        }
    }
    words[i.min(words.len())..].join(" ")
}

fn vec3(v: Option<[f32; 3]>, default: Vec3) -> Vec3 {
    v.map(Vec3::from).unwrap_or(default)
}

/// A colour parameter of `m` that tobj keeps as text (Tf, Tr).
fn unknown_number(m: &tobj::Material, key: &str) -> Option<Vec<f32>> {
    let text = m.unknown_param.get(key)?;
    text.split_whitespace().map(|w| w.parse().ok()).collect()
}

/// Turns one tobj material into a gasworks material (the texture is resolved separately).
///
/// The mapping from MTL's `illum` models:
/// - 4, 6, 7, 9 (transparency and refraction), or a dissolve `d` < 1 with `Ni` > 1: glass of
///   index `Ni` (1.5 when absent), tinted by `Tf` (white when absent);
/// - 3, 5 (ray-traced reflection): mirror of reflectance `Ks` (white when `Ks` is black);
/// - `Ks` not black with `Ns` > 0, under illum 2 or none: glossy;
/// - anything else: diffuse `Kd`.
///
/// `Ke` is the emission of any kind. Colours are clamped to [0, 1] (emission to >= 0), and a
/// glossy material whose `Kd + Ks` exceeds 1 in a channel is scaled down to conserve energy.
pub fn convert(m: &tobj::Material, warnings: &mut Vec<String>, mtl_path: &Path) -> Material {
    let clamp01 = |v: Vec3| v.clamp(Vec3::ZERO, Vec3::ONE);
    let diffuse = clamp01(vec3(m.diffuse, Vec3::splat(0.8)));
    let specular = clamp01(vec3(m.specular, Vec3::ZERO));
    let emission = vec3(m.emissive, Vec3::ZERO).max(Vec3::ZERO);
    let shininess = m.shininess.unwrap_or(0.0).max(0.0);
    let ior = m.optical_density;
    let dissolve = m
        .dissolve
        .or_else(|| unknown_number(m, "Tr").and_then(|v| v.first().map(|tr| 1.0 - tr)))
        .unwrap_or(1.0);
    let transmittance = match unknown_number(m, "Tf").as_deref() {
        Some([r, g, b]) => clamp01(Vec3::new(*r, *g, *b)),
        _ => Vec3::ONE,
    };
    let illum = m.illumination_model;

    let refractive_illum = matches!(illum, Some(4 | 6 | 7 | 9));
    let is_glass = refractive_illum || (dissolve < 1.0 && ior.is_some_and(|n| n > 1.0));
    let mut material = Material {
        name: m.name.clone(),
        kind: MaterialKind::Diffuse,
        diffuse,
        specular,
        shininess,
        ior: ior.filter(|&n| n > 0.0).unwrap_or(1.5),
        transmittance,
        emission,
        diffuse_texture: None,
    };
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
    material
}

/// Decodes `map_Kd` textures once per file and hands out their indices.
#[derive(Default)]
pub struct TextureCache {
    pub textures: Vec<Texture>,
    by_path: HashMap<PathBuf, Option<u32>>,
}

impl TextureCache {
    /// The texture `name` of material `material` in library `mtl_path`, decoded to linear RGB;
    /// `None` (with a warning naming both files) when it cannot be read or decoded.
    pub fn load(
        &mut self,
        mtl_path: &Path,
        material: &str,
        name: &str,
        warnings: &mut Vec<String>,
    ) -> Option<u32> {
        let dir = mtl_path.parent().unwrap_or(Path::new(""));
        let mut path = dir.join(name);
        // Libraries written on Windows (Crytek Sponza's among them) use backslashes.
        if !path.exists() && name.contains('\\') {
            path = dir.join(name.replace('\\', "/"));
        }
        if let Some(&known) = self.by_path.get(&path) {
            return known;
        }
        let result = match decode_linear(&path) {
            Ok(texture) => {
                self.textures.push(texture);
                Some(self.textures.len() as u32 - 1)
            }
            Err(why) => {
                warnings.push(format!(
                    "{}: material {material}: texture {} cannot be used ({why}); using its Kd colour",
                    mtl_path.display(),
                    path.display()
                ));
                None
            }
        };
        self.by_path.insert(path, result);
        result
    }
}

/// The sRGB transfer function undone: texel values of 8- and 16-bit images are sRGB encoded.
fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

fn decode_linear(path: &Path) -> Result<Texture, String> {
    let image = image::ImageReader::open(path)
        .map_err(|e| e.to_string())?
        .with_guessed_format()
        .map_err(|e| e.to_string())?
        .decode()
        .map_err(|e| e.to_string())?;
    // Float images (HDR, EXR) hold linear values already.
    let is_float = matches!(
        image,
        image::DynamicImage::ImageRgb32F(_) | image::DynamicImage::ImageRgba32F(_)
    );
    let rgb = image.to_rgb32f();
    let (width, height) = rgb.dimensions();
    if width == 0 || height == 0 {
        return Err("the image is empty".into());
    }
    let texels = rgb
        .pixels()
        .map(|p| {
            if is_float {
                p.0
            } else {
                p.0.map(srgb_to_linear)
            }
        })
        .collect();
    Ok(Texture {
        path: path.display().to_string(),
        width,
        height,
        texels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tobj_material(text: &str) -> tobj::Material {
        let canonical = check_library(Path::new("t.mtl"), text).unwrap();
        let (mut mats, _) = tobj::load_mtl_buf(&mut canonical.as_bytes()).unwrap();
        mats.remove(0)
    }

    fn kind_of(text: &str) -> MaterialKind {
        convert(&tobj_material(text), &mut Vec::new(), Path::new("t.mtl")).kind
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
            &tobj_material("newmtl g\nillum 7\nNi 1.33\nTf 0.9 0.8 0.7\nKe 1 2 3\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(m.ior, 1.33);
        assert_eq!(m.transmittance, Vec3::new(0.9, 0.8, 0.7));
        assert_eq!(m.emission, Vec3::new(1.0, 2.0, 3.0));
        let glass = convert(
            &tobj_material("newmtl g\nillum 4\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(glass.ior, 1.5);
        assert_eq!(glass.transmittance, Vec3::ONE);
        let mirror = convert(
            &tobj_material("newmtl m\nillum 3\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(mirror.specular, Vec3::ONE);
        let tinted = convert(
            &tobj_material("newmtl m\nillum 3\nKs 0.9 0.5 0.1\n"),
            &mut Vec::new(),
            Path::new("t.mtl"),
        );
        assert_eq!(tinted.specular, Vec3::new(0.9, 0.5, 0.1));
    }

    #[test]
    fn glossy_energy_is_conserved_with_a_warning() {
        let mut warnings = Vec::new();
        let m = convert(
            &tobj_material("newmtl a\nKd 0.8 0.8 0.8\nKs 0.5 0.5 0.5\nNs 20\n"),
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
        assert_eq!(c, "newmtl a\nKd 0.5 0.5 0.5\nmap_Kd tex ture.png\nd 0.5\n");
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (text, line) in [
            ("newmtl a\nKd 0.5 0.5\n", 2),
            ("newmtl a\n\nKd 1 x 1\n", 3),
            ("newmtl a\nNs\n", 2),
            ("newmtl a\nillum 2.5\n", 2),
            ("newmtl\n", 1),
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
}
