//! MTL materials through the whole loader: kinds from `illum`, parameters, emitters, and
//! `map_Kd` textures found (relative to the MTL's folder), missing or undecodable.

use std::path::{Path, PathBuf};

use gasworks::scene::gen::write_obj;
use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::{MaterialKind, Scene, UvMapping};
use glam::{Vec2, Vec3};

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load(path: &Path) -> Scene {
    load_obj(path, &LoadOptions { quiet: true }).unwrap()
}

/// An OBJ with one triangle per material named in `materials`, using library `mtl`.
fn obj_using(mtl: &str, materials: &[&str]) -> String {
    let mut s = format!("mtllib {mtl}\nv 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 0 1\n");
    for (i, m) in materials.iter().enumerate() {
        s += &format!("g g{i}\nusemtl {m}\nf 1/1 2/2 3/3\n");
    }
    s
}

fn material<'a>(s: &'a Scene, name: &str) -> &'a gasworks::scene::Material {
    s.materials.iter().find(|m| m.name == name).unwrap()
}

#[test]
fn illum_models_and_parameters_map_to_gasworks_materials() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl matte\nKd 0.5 0.4 0.3\nillum 1\n\
         newmtl plastic\nKd 0.5 0.5 0.5\nKs 0.3 0.3 0.3\nNs 64\nillum 2\n\
         newmtl unspecified_glossy\nKs 0.1 0.1 0.1\nNs 10\n\
         newmtl chrome\nKs 0.9 0.9 0.8\nillum 3\n\
         newmtl black_mirror\nillum 5\n\
         newmtl glass\nNi 1.45\nTf 0.9 1 0.9\nillum 7\n\
         newmtl water\nd 0.4\nNi 1.33\nillum 2\n\
         newmtl plain_glass\nillum 4\n\
         newmtl lamp\nKd 0 0 0\nKe 10 9 8\n",
    );
    let names = [
        "matte",
        "plastic",
        "unspecified_glossy",
        "chrome",
        "black_mirror",
        "glass",
        "water",
        "plain_glass",
        "lamp",
    ];
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &names));
    let s = load(&obj);
    let kinds: Vec<MaterialKind> = names.iter().map(|n| material(&s, n).kind).collect();
    use MaterialKind::*;
    assert_eq!(
        kinds,
        [Diffuse, Glossy, Glossy, Mirror, Mirror, Glass, Glass, Glass, Diffuse]
    );
    assert_eq!(material(&s, "matte").diffuse, Vec3::new(0.5, 0.4, 0.3));
    let plastic = material(&s, "plastic");
    assert_eq!(
        (plastic.specular, plastic.shininess),
        (Vec3::splat(0.3), 64.0)
    );
    assert_eq!(material(&s, "chrome").specular, Vec3::new(0.9, 0.9, 0.8));
    assert_eq!(material(&s, "black_mirror").specular, Vec3::ONE);
    let glass = material(&s, "glass");
    assert_eq!(
        (glass.ior, glass.transmittance),
        (1.45, Vec3::new(0.9, 1.0, 0.9))
    );
    assert_eq!(material(&s, "water").ior, 1.33);
    let plain = material(&s, "plain_glass");
    assert_eq!((plain.ior, plain.transmittance), (1.5, Vec3::ONE));
    // The emitter's faces are the scene's lights.
    assert_eq!(material(&s, "lamp").emission, Vec3::new(10.0, 9.0, 8.0));
    assert_eq!(s.lights.len(), 1);
    assert_eq!(s.lights[0].emission, Vec3::new(10.0, 9.0, 8.0));
    assert!(s.environment.is_none());
    // Every group's face names its own material.
    for (g, name) in s.groups.iter().zip(names) {
        assert_eq!(s.materials[g.face_materials[0] as usize].name, name);
    }
}

/// A 2 x 1 PNG: sRGB 0 and 188 (linear about 0.5), red only in the second texel.
fn write_png(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut img = image::RgbImage::new(2, 1);
    img.put_pixel(0, 0, image::Rgb([0, 0, 255]));
    img.put_pixel(1, 0, image::Rgb([188, 0, 0]));
    img.save(path).unwrap();
}

#[test]
fn textures_load_relative_to_the_mtl_folder_as_linear_rgb() {
    let dir = tempfile::tempdir().unwrap();
    // The library lives in a subfolder, the texture in a folder under it.
    write(
        dir.path(),
        "lib/m.mtl",
        "newmtl tex\nKd 1 1 1\nmap_Kd -s 1 1 1 maps/t.png\nnewmtl also\nmap_Kd maps/t.png\n",
    );
    write_png(&dir.path().join("lib/maps/t.png"));
    let obj = write(
        dir.path(),
        "s.obj",
        obj_using("lib/m.mtl", &["tex", "also"]),
    );
    let s = load(&obj);
    assert_eq!(s.textures.len(), 1, "one decode for two materials");
    let t = &s.textures[0];
    assert_eq!((t.width, t.height), (2, 1));
    assert_eq!(t.texels[0], [0.0, 0.0, 1.0]);
    assert!((t.texels[1][0] - 0.5029).abs() < 1e-3, "{:?}", t.texels[1]);
    assert_eq!(material(&s, "tex").diffuse_texture, Some(0));
    assert_eq!(material(&s, "also").diffuse_texture, Some(0));
    // UVs came along for the textured groups.
    assert_eq!(s.groups[0].uvs.len(), s.groups[0].positions.len());
    assert!(
        !s.report.warnings.iter().any(|w| w.contains("texture")),
        "{:?}",
        s.report.warnings
    );
}

/// `map_Kd -s` and `-o` place the texture: a file mapped two ways is two textures (one
/// decode, texels copied), a mapping used twice one; the mapping survives `gen`'s writer; and
/// the CPU looks up `uv * scale + offset`.
#[test]
fn texture_scale_and_offset_place_the_texture() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl plain\nmap_Kd t.png\nnewmtl tiled\nmap_Kd -s 4 2 -o 0.5 0 t.png\nnewmtl tiled_too\nmap_Kd -o 0.5 0 0 -s 4 2 1 t.png\n",
    );
    write_png(&dir.path().join("t.png"));
    let obj = write(
        dir.path(),
        "s.obj",
        obj_using("m.mtl", &["plain", "tiled", "tiled_too"]),
    );
    let s = load(&obj);
    assert!(
        s.report.warnings.iter().all(|w| !w.contains("map_Kd")),
        "{:?}",
        s.report.warnings
    );
    assert_eq!(s.textures.len(), 2);
    assert_eq!(material(&s, "plain").diffuse_texture, Some(0));
    assert_eq!(material(&s, "tiled").diffuse_texture, Some(1));
    assert_eq!(material(&s, "tiled_too").diffuse_texture, Some(1));
    let (plain, tiled) = (&s.textures[0], &s.textures[1]);
    assert_eq!(plain.mapping, UvMapping::IDENTITY);
    assert_eq!(tiled.mapping.scale, Vec2::new(4.0, 2.0));
    assert_eq!(tiled.mapping.offset, Vec2::new(0.5, 0.0));
    assert_eq!(plain.texels, tiled.texels);
    for uv in [
        Vec2::new(0.1, 0.3),
        Vec2::new(0.7, 0.9),
        Vec2::new(-0.2, 0.55),
    ] {
        assert_eq!(
            tiled.sample(uv),
            plain.sample(uv * Vec2::new(4.0, 2.0) + Vec2::new(0.5, 0.0))
        );
    }
    // What the generator writes reads back with the same mappings.
    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&s, out.path(), "again").unwrap();
    let again = load(&written.obj);
    let mappings = |s: &Scene| s.textures.iter().map(|t| t.mapping).collect::<Vec<_>>();
    assert_eq!(mappings(&again), mappings(&s));
}

/// Float textures (EXR, HDR) hold values as stored: above 1, negative or NaN. As a diffuse
/// colour those would create energy or poison samples, so they are clamped into [0, 1] (NaN
/// to 0) with a warning naming both files and how many texels.
#[test]
fn float_texels_outside_the_unit_range_are_clamped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mtl = write(
        dir.path(),
        "m.mtl",
        "newmtl hot\nKd 1 1 1\nmap_Kd hot.exr\n",
    );
    let mut img = image::Rgb32FImage::new(4, 1);
    img.put_pixel(0, 0, image::Rgb([5.0, 0.25, 0.5]));
    img.put_pixel(1, 0, image::Rgb([-1.0, 0.5, 0.5]));
    img.put_pixel(2, 0, image::Rgb([f32::NAN, 0.5, 0.5]));
    img.put_pixel(3, 0, image::Rgb([0.5, 1.0, 0.0]));
    img.save(dir.path().join("hot.exr")).unwrap();
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["hot"]));
    let s = load(&obj);
    assert_eq!(
        s.textures[0].texels,
        [
            [1.0, 0.25, 0.5],
            [0.0, 0.5, 0.5],
            [0.0, 0.5, 0.5],
            [0.5, 1.0, 0.0]
        ]
    );
    assert!(
        s.report
            .warnings
            .iter()
            .any(|w| w.contains(&mtl.display().to_string())
                && w.contains("hot.exr")
                && w.contains("3 of 4 texels outside [0, 1]")),
        "{:?}",
        s.report.warnings
    );
}

#[test]
fn a_missing_or_undecodable_texture_is_a_warning_naming_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let mtl = write(
        dir.path(),
        "m.mtl",
        "newmtl gone\nKd 0.2 0.3 0.4\nmap_Kd nowhere.png\nnewmtl junk\nmap_Kd junk.png\n",
    );
    write(dir.path(), "junk.png", b"this is not a png");
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["gone", "junk"]));
    let s = load(&obj);
    assert!(s.textures.is_empty());
    let gone = material(&s, "gone");
    assert_eq!(gone.diffuse_texture, None);
    assert_eq!(gone.diffuse, Vec3::new(0.2, 0.3, 0.4));
    for texture in ["nowhere.png", "junk.png"] {
        assert!(
            s.report
                .warnings
                .iter()
                .any(|w| w.contains(&mtl.display().to_string())
                    && w.contains(texture)
                    && w.contains("cannot be used")),
            "{texture}: {:?}",
            s.report.warnings
        );
    }
}

#[test]
fn windows_separators_in_texture_paths_are_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.mtl", "newmtl tex\nmap_Kd maps\\t.png\n");
    write_png(&dir.path().join("maps/t.png"));
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["tex"]));
    let s = load(&obj);
    assert_eq!(s.textures.len(), 1, "{:?}", s.report.warnings);
}

#[test]
fn materials_of_several_libraries_are_merged() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.mtl", "newmtl a\nKd 1 0 0\n");
    write(dir.path(), "b.mtl", "newmtl b\nKd 0 0 1\n");
    let mut obj_text = String::from("mtllib a.mtl\nmtllib b.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\n");
    obj_text += "g one\nusemtl b\nf 1 2 3\nusemtl a\nf 1 2 3\n";
    let obj = write(dir.path(), "s.obj", obj_text);
    let s = load(&obj);
    let names: Vec<&str> = s.groups[0]
        .face_materials
        .iter()
        .map(|&m| s.materials[m as usize].name.as_str())
        .collect();
    assert_eq!(names, ["b", "a"]);
}

/// A material defined twice (in one library or two) is named in a warning: which definition a
/// face gets depends on where its `usemtl` stands, and that was silent.
#[test]
fn a_material_defined_twice_is_a_warning_naming_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let mtl = write(
        dir.path(),
        "m.mtl",
        "newmtl paint\nKd 1 0 0\nnewmtl paint\nKd 0 1 0\n",
    );
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["paint"]));
    let s = load(&obj);
    let m = mtl.display().to_string();
    let twice: Vec<&String> = s
        .report
        .warnings
        .iter()
        .filter(|w| w.contains("material paint is defined again"))
        .collect();
    assert_eq!(twice.len(), 1, "{:?}", s.report.warnings);
    assert!(twice[0].starts_with(&m) && twice[0].contains(&format!("(first in {m})")));
    // The faces after the library get the last definition, as before.
    let used = s.groups[0].face_materials[0] as usize;
    assert_eq!(s.materials[used].diffuse, Vec3::new(0.0, 1.0, 0.0));
}

/// `map_d` makes a cut-out: the mask is the image's alpha where it has one, its luminance
/// otherwise, or the channel `-imfchan` names, values as stored (no sRGB decoding); hits in
/// its holes are no hits; a group without UVs that uses it is warned about; and `gen`'s writer
/// keeps the masks bit for bit.
#[test]
fn opacity_maps_make_cut_outs() {
    let dir = tempfile::tempdir().unwrap();
    let mut leaf = image::RgbaImage::new(2, 1);
    leaf.put_pixel(0, 0, image::Rgba([10, 200, 10, 255]));
    leaf.put_pixel(1, 0, image::Rgba([10, 200, 10, 0]));
    leaf.save(dir.path().join("leaf.png")).unwrap();
    let mut grey = image::GrayImage::new(2, 1);
    grey.put_pixel(0, 0, image::Luma([255]));
    grey.put_pixel(1, 0, image::Luma([64]));
    grey.save(dir.path().join("grey.png")).unwrap();
    let mut rgb = image::RgbImage::new(2, 1);
    rgb.put_pixel(0, 0, image::Rgb([0, 255, 0]));
    rgb.put_pixel(1, 0, image::Rgb([255, 0, 0]));
    rgb.save(dir.path().join("rgb.png")).unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl leaf\nmap_Kd leaf.png\nmap_d leaf.png\n\
         newmtl grey\nmap_d grey.png\n\
         newmtl red\nmap_d -imfchan r rgb.png\n",
    );
    let mut obj = obj_using("m.mtl", &["leaf", "grey", "red"]);
    obj += "g bare\nusemtl leaf\nv 0 0 1\nv 1 0 1\nv 0 1 1\nf 4 5 6\n";
    let obj = write(dir.path(), "s.obj", obj);
    let s = load(&obj);
    let mask = |name: &str| {
        let t = material(&s, name).opacity_texture.unwrap();
        s.textures[t as usize].texels.clone()
    };
    assert_eq!(mask("leaf"), [[1.0; 3], [0.0; 3]]);
    assert_eq!(mask("grey"), [[1.0; 3], [64.0 / 255.0; 3]]);
    assert_eq!(mask("red"), [[0.0; 3], [1.0; 3]]);
    // The colour texture of the same file is another texture (sRGB-decoded RGB).
    let colour = material(&s, "leaf").diffuse_texture.unwrap();
    assert_ne!(Some(colour), material(&s, "leaf").opacity_texture);

    // Group g0 (leaf): u = 0.9 looks up mostly the transparent texel, u = 0.05 the opaque one.
    let leaf_group = s.groups.iter().position(|g| g.name == "g0").unwrap() as u32;
    assert!(s.is_cut_out(leaf_group, 0, 0.9, 0.05));
    assert!(!s.is_cut_out(leaf_group, 0, 0.05, 0.05));
    let red_group = s.groups.iter().position(|g| g.name == "g2").unwrap() as u32;
    assert!(s.is_cut_out(red_group, 0, 0.05, 0.05));
    assert!(!s.is_cut_out(red_group, 0, 0.9, 0.05));
    // A ray through the hole passes, one through the solid part stops.
    let bvh = gasworks::cpu::SceneBvh::build(&s);
    let down = -Vec3::Z;
    let through = |x: f32| {
        bvh.intersect(&s, Vec3::new(x, 0.05, 5.0), down, 0.0, f32::INFINITY)
            .map(|h| s.groups[h.group as usize].name.clone())
    };
    // At z = 1 the bare group (solid: no UVs), at z = 0 the three masked triangles.
    assert_eq!(through(0.9).as_deref(), Some("bare"));
    let bare = s.groups.iter().position(|g| g.name == "bare").unwrap();
    assert!(s.groups[bare].uvs.is_empty());
    assert!(
        s.report.warnings.iter().any(|w| w.contains(
            "1 group uses cut-out materials (map_d) without texture coordinates (vt), so their faces render solid (group bare, material leaf)"
        )),
        "{:?}",
        s.report.warnings
    );
    assert!(
        !s.report.warnings.iter().any(|w| w.contains("opacity")),
        "{:?}",
        s.report.warnings
    );

    // Written by gen's writer and read back: the same masks, bit for bit.
    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&s, out.path(), "copy").unwrap();
    let back = load(&written.obj);
    for name in ["leaf", "grey", "red"] {
        let t = material(&back, name).opacity_texture.unwrap();
        let texels = &back.textures[t as usize].texels;
        let bits = |v: &[[f32; 3]]| v.iter().map(|t| t.map(f32::to_bits)).collect::<Vec<_>>();
        assert_eq!(bits(texels), bits(&mask(name)), "{name}");
    }
}

/// `map_Ke` makes an emission map: read as linear RGB like `map_Kd`, except that a float image
/// keeps its values above 1 (an emitter may be brighter than white; negative and NaN texels
/// still become 0, with a warning). A file that is a material's `map_Kd` and `map_Ke` is one
/// texture; a float file clamped as a colour is another. A `map_Ke` with no `Ke` emits the map
/// as it is; a group without UVs is told that it emits the constant Ke. Written by gen's
/// writer and read back, the maps are the same, bit for bit.
#[test]
fn emission_maps_are_read_as_radiance() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("screen.png"));
    let mut hot = image::Rgb32FImage::new(3, 1);
    hot.put_pixel(0, 0, image::Rgb([5.0, 0.25, 40.0]));
    hot.put_pixel(1, 0, image::Rgb([-1.0, 0.5, 0.5]));
    hot.put_pixel(2, 0, image::Rgb([f32::NAN, 0.5, 2.0]));
    hot.save(dir.path().join("hot.exr")).unwrap();
    let mtl = write(
        dir.path(),
        "m.mtl",
        "newmtl screen\nKd 1 1 1\nKe 2 2 2\nmap_Kd screen.png\nmap_Ke screen.png\n\
         newmtl hot\nmap_Ke -s 2 1 hot.exr\n\
         newmtl hot_colour\nmap_Kd hot.exr\n",
    );
    let mut obj = obj_using("m.mtl", &["screen", "hot", "hot_colour"]);
    obj += "g bare\nusemtl hot\nv 0 0 1\nv 1 0 1\nv 0 1 1\nf 4 5 6\n";
    let obj = write(dir.path(), "s.obj", obj);
    let s = load(&obj);

    let screen = material(&s, "screen");
    assert_eq!(screen.emission, Vec3::splat(2.0));
    assert_eq!(
        screen.emission_texture, screen.diffuse_texture,
        "one texture for the file as colour and as emission"
    );
    assert!(screen.emission_texture.is_some());

    let hot = material(&s, "hot");
    assert_eq!(hot.emission, Vec3::ONE, "no Ke: the map is the emission");
    let t = &s.textures[hot.emission_texture.unwrap() as usize];
    assert_eq!(
        t.texels,
        [[5.0, 0.25, 40.0], [0.0, 0.5, 0.5], [0.0, 0.5, 2.0]]
    );
    assert_eq!(t.mapping.scale, Vec2::new(2.0, 1.0));
    let colour = material(&s, "hot_colour").diffuse_texture.unwrap();
    assert_eq!(
        s.textures[colour as usize].texels,
        [[1.0, 0.25, 1.0], [0.0, 0.5, 0.5], [0.0, 0.5, 1.0]]
    );
    let warned = |needle: &str| s.report.warnings.iter().any(|w| w.contains(needle));
    assert!(
        warned(&format!(
            "{}: material hot: texture {}: 2 of 3 texels negative, above 1e20 or not a number clamped",
            mtl.display(),
            dir.path().join("hot.exr").display()
        )),
        "{:?}",
        s.report.warnings
    );
    assert!(
        warned("1 group uses emission maps (map_Ke) without texture coordinates (vt), so their faces emit their material's constant Ke (group bare, material hot)"),
        "{:?}",
        s.report.warnings
    );
    // The emitters are lights: the screen, the hot triangle and the bare one.
    assert_eq!(s.lights.len(), 3);

    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&s, out.path(), "copy").unwrap();
    let back = load(&written.obj);
    for name in ["screen", "hot"] {
        let texels = |s: &Scene| {
            let m = material(s, name);
            let t = &s.textures[m.emission_texture.unwrap() as usize];
            (
                m.emission,
                t.mapping,
                t.texels
                    .iter()
                    .map(|t| t.map(f32::to_bits))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(texels(&back), texels(&s), "{name}");
    }
}

/// A loaded emitter's lights carry its emission map: a light sample reads the map.
#[test]
fn a_loaded_emission_map_reaches_the_lights() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("screen.png"));
    write(
        dir.path(),
        "m.mtl",
        "newmtl screen\nKe 2 2 2\nmap_Ke screen.png\n",
    );
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["screen"]));
    let s = load(&obj);
    let light = &s.lights[0];
    assert_eq!(
        light.emission_texture,
        material(&s, "screen").emission_texture
    );
    // Barycentrics (0.9, 0.05): u about 0.9, the red texel (linear about 0.5, 0, 0).
    let le = s.light_emission_at(light, 0.9, 0.05);
    let texel = s.textures[0].sample(Vec2::new(0.9, 0.05));
    assert_eq!(le, 2.0 * texel);
    assert!(le.x > 0.5 && le.y == 0.0, "{le}");
}

/// Every MTL texture option of the spec, with its arguments, and `-colorspace` (issue 70: a
/// `map_Kd -colorspace sRGB -o 0.1 diffuse.jpg` lost its texture to a file named
/// `sRGB -o 0.1 diffuse.jpg`) leaves the file name to the texture, which loads, on colour,
/// mask, emission, specular and bump maps alike; options that change nothing here are silent.
#[test]
fn texture_options_are_skipped_by_name_and_the_texture_loads() {
    let dir = tempfile::tempdir().unwrap();
    image::RgbImage::from_pixel(2, 2, image::Rgb([200, 100, 50]))
        .save(dir.path().join("diffuse.jpg"))
        .unwrap();
    let options = [
        "-blendu on",
        "-blendv off",
        "-bm 1",
        "-boost 2",
        "-cc off",
        "-clamp off",
        "-colorspace sRGB",
        "-imfchan l",
        "-mm 0 1",
        "-o 0.1",
        "-o 0.1 0.2",
        "-o 0.1 0.2 0.3",
        "-s 2",
        "-s 2 3",
        "-s 2 3 1",
        "-t 0 0 0",
        "-texres 512",
        "-type sphere",
    ];
    let mut mtl = String::from("newmtl issue70\nmap_Kd -colorspace sRGB -o 0.1 diffuse.jpg\n");
    let mut names = vec!["issue70".to_string()];
    for (i, option) in options.iter().enumerate() {
        mtl += &format!("newmtl m{i}\nmap_Kd {option} diffuse.jpg\n");
        names.push(format!("m{i}"));
    }
    mtl += "newmtl others\nKd 0.5 0.5 0.5\nKs 0.5 0.5 0.5\nNs 20\nKe 1 1 1\n\
        map_d -colorspace Raw -imfchan r -o 0.1 0.2 0.3 diffuse.jpg\n\
        map_Ke -colorspace sRGB -mm 0 1 diffuse.jpg\n\
        map_Ks -boost 2 -colorspace sRGB diffuse.jpg\n\
        bump -colorspace Non-Color -bm 0.5 -s 2 2 1 diffuse.jpg\n";
    names.push("others".to_string());
    write(dir.path(), "m.mtl", mtl);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &names));
    let s = load(&obj);
    assert!(s.report.warnings.is_empty(), "{:?}", s.report.warnings);
    for name in &names[..names.len() - 1] {
        assert!(material(&s, name).diffuse_texture.is_some(), "{name}");
    }
    let issue70 = material(&s, "issue70").diffuse_texture.unwrap() as usize;
    assert_eq!(s.textures[issue70].mapping.offset, Vec2::new(0.1, 0.0));
    assert_eq!(s.textures[issue70].mapping.scale, Vec2::ONE);
    let offset = |i: usize| {
        let t = material(&s, &format!("m{i}")).diffuse_texture.unwrap();
        s.textures[t as usize].mapping.offset
    };
    assert_eq!(offset(9), Vec2::new(0.1, 0.0));
    assert_eq!(offset(10), Vec2::new(0.1, 0.2));
    assert_eq!(offset(11), Vec2::new(0.1, 0.2));
    let others = material(&s, "others");
    assert!(others.opacity_texture.is_some());
    assert!(others.emission_texture.is_some());
    assert!(others.specular_texture.is_some());
    assert!(others.bump.is_some());
}

/// Options gasworks does not apply and that change the look, and options it does not know,
/// are warnings naming the MTL file, the line and the option; the texture still loads where
/// its file name is whole.
#[test]
fn unapplied_texture_options_are_warnings_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("t.png"));
    let mtl = write(
        dir.path(),
        "m.mtl",
        "newmtl a\nmap_Kd -colorspace linear -o 0.1 t.png\nnewmtl b\nmap_Kd -bogus 1 t.png\n",
    );
    let obj = write(dir.path(), "s.obj", obj_using("m.mtl", &["a", "b"]));
    let s = load(&obj);
    assert!(material(&s, "a").diffuse_texture.is_some());
    assert!(material(&s, "b").diffuse_texture.is_some());
    let m = mtl.display().to_string();
    for (line, option) in [(2, "(-colorspace linear,"), (4, "(-bogus 1 in map_Kd")] {
        assert!(
            s.report
                .warnings
                .iter()
                .any(|w| w.starts_with(&format!("{m}:{line}: ")) && w.contains(option)),
            "{option}: {:?}",
            s.report.warnings
        );
    }
}
