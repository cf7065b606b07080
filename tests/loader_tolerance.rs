//! Files that other loaders (tinyobjloader, assimp, Blender) open load here too: what can be
//! repaired is, with exactly one warning per kind of repair that names the file, the first
//! line and the count. What cannot stays an error (tests/loader_errors.rs).

mod cli_support;

use cli_support::gasworks_command;
use std::path::{Path, PathBuf};

use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::Scene;
use glam::Vec3;
use proptest::prelude::*;

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load(path: &Path) -> Scene {
    match load_obj(path, &LoadOptions { quiet: true }) {
        Ok(s) => s,
        Err(e) => panic!("{} was refused: {e}", path.display()),
    }
}

/// Loads `text` and returns the scene with the warnings that contain `what`, checking there
/// is exactly one and that it starts with `file:line:`.
fn load_with_one_warning(text: &str, line: usize, what: &str) -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "scene.obj", text);
    let s = load(&path);
    let matching: Vec<&String> = s
        .report
        .warnings
        .iter()
        .filter(|w| w.contains(what))
        .collect();
    assert_eq!(matching.len(), 1, "{what:?} in {:?}", s.report.warnings);
    let prefix = format!("{}:{line}: ", path.display());
    assert!(matching[0].starts_with(&prefix), "{}", matching[0]);
    s
}

/// The warnings other than the default environment's.
fn other_warnings(s: &Scene) -> Vec<&String> {
    s.report
        .warnings
        .iter()
        .filter(|w| !w.contains("no emissive material"))
        .collect()
}

const SQUARE: &str = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n";

#[test]
fn normal_indices_without_any_vn_lines_drop_the_normals() {
    // As Blender writes a mesh whose normals were stripped by another tool.
    let mut text = format!("{SQUARE}g quad\n");
    for _ in 0..37 {
        text += "f 1//1 2//2 3//3\n";
    }
    let s = load_with_one_warning(
        &text,
        6,
        "37 faces have normal indices that point nowhere; their normals are dropped",
    );
    assert_eq!(s.triangle_count(), 37);
    assert!(s.groups[0].normals.is_empty());
    assert_eq!(other_warnings(&s).len(), 1, "{:?}", s.report.warnings);
}

#[test]
fn attribute_indices_that_point_nowhere_drop_that_attribute_only_for_those_faces() {
    let text = format!(
        "{SQUARE}vt 0 0\nvt 1 0\nvt 1 1\nvn 0 0 1\n\
         g good\nf 1/1/1 2/2/1 3/3/1\n\
         g bad_normal\nf 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/3/7\n\
         g bad_uv\nf 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/9/1 4/3/1\nf 1/-4/1 3/3/1 4/3/1\n"
    );
    let s = load_with_one_warning(&text, 13, "1 face has normal indices that point nowhere");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "scene.obj", &text);
    let again = load(&path);
    let uv_warning = again
        .report
        .warnings
        .iter()
        .find(|w| w.contains("texture coordinate indices"))
        .unwrap();
    assert!(
        uv_warning.starts_with(&format!(
            "{}:16: 2 faces have texture coordinate indices that point nowhere; their texture coordinates are dropped",
            path.display()
        )),
        "{uv_warning}"
    );
    let names: Vec<&str> = s.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["good", "bad_normal", "bad_uv"]);
    // The group with all its attributes keeps them.
    let good = &s.groups[0];
    assert_eq!(good.normals.len(), good.positions.len());
    assert_eq!(good.uvs.len(), good.positions.len());
    // A group keeps an attribute only when every face has it: the face that lost its
    // normals takes the group's normals along, and no second warning is given for it.
    let bad_normal = &s.groups[1];
    assert!(bad_normal.normals.is_empty());
    assert_eq!(bad_normal.uvs.len(), bad_normal.positions.len());
    let bad_uv = &s.groups[2];
    assert!(bad_uv.uvs.is_empty());
    assert_eq!(bad_uv.normals.len(), bad_uv.positions.len());
    assert_eq!(s.triangle_count(), 6);
    assert_eq!(other_warnings(&s).len(), 2, "{:?}", s.report.warnings);
}

#[test]
fn faces_of_fewer_than_three_vertices_are_skipped() {
    let text = format!("{SQUARE}f 1 2 3\nf 1 2\nf 1 3 4\nf 4\nf\n");
    let s = load_with_one_warning(
        &text,
        6,
        "3 faces have fewer than 3 vertices and are skipped",
    );
    assert_eq!(s.triangle_count(), 2);
    assert_eq!(s.groups.len(), 1);
}

/// A file cut short inside its last face (a full disk, an interrupted copy) ends with no
/// newline: the face is skipped as any short face is, and the one warning says the file looks
/// truncated. With its newline the same face is only a short face.
#[test]
fn a_face_cut_short_on_an_unterminated_last_line_says_the_file_looks_truncated() {
    let text = format!("{SQUARE}f 1 2 3\nf 1 2");
    let s = load_with_one_warning(
        &text,
        6,
        "the face on the last line has fewer than 3 vertices and is skipped; the last line \
         has no newline: the file looks truncated",
    );
    assert_eq!(s.triangle_count(), 1);
    assert!(
        !other_warnings(&s).iter().any(|w| w.contains("faces have")),
        "{:?}",
        s.report.warnings
    );
    let s = load_with_one_warning(
        &format!("{SQUARE}f 1 2 3\nf 1 2\n"),
        6,
        "face has fewer than 3 vertices and is skipped",
    );
    assert!(
        !other_warnings(&s).iter().any(|w| w.contains("truncated")),
        "{:?}",
        s.report.warnings
    );
    // Cut after a slash, the face is whole: nothing to tell.
    let s = load(&write(
        tempfile::tempdir().unwrap().path(),
        "slash.obj",
        format!("{SQUARE}f 1 2 3/"),
    ));
    assert!(other_warnings(&s).is_empty(), "{:?}", s.report.warnings);
}

#[test]
fn usemtl_without_a_name_uses_the_default_material() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.mtl", "newmtl red\nKd 1 0 0\n");
    let text =
        format!("mtllib m.mtl\n{SQUARE}usemtl red\nf 1 2 3\nusemtl\nf 1 3 4\nusemtl   \nf 2 3 4\n");
    let path = write(dir.path(), "scene.obj", &text);
    let s = load(&path);
    let names: Vec<&str> = s.groups[0]
        .face_materials
        .iter()
        .map(|&m| s.materials[m as usize].name.as_str())
        .collect();
    assert_eq!(names, ["red", "gasworks_default", "gasworks_default"]);
    let w = other_warnings(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "{}:8: 2 usemtl statements have no material name",
            path.display()
        )),
        "{}",
        w[0]
    );
}

/// What Blender writes for a material slot without a material: `newmtl ` and `usemtl ` with
/// no name (assimp's test model `empty_mat.obj` is one).
#[test]
fn blender_unnamed_material_slots_load_with_the_default_material() {
    let dir = tempfile::tempdir().unwrap();
    let mtl = write(
        dir.path(),
        "m.mtl",
        "# Blender MTL File: ''\n# Material Count: 1\nnewmtl \nNs 0\nKd 0.8 0.8 0.8\nillum 2\n",
    );
    let text = format!("mtllib m.mtl\no Cube\n{SQUARE}usemtl \ns off\nf 1 2 3 4\n");
    let path = write(dir.path(), "scene.obj", text);
    let s = load(&path);
    assert_eq!(s.triangle_count(), 2);
    assert_eq!(s.materials, [gasworks::scene::Material::default_diffuse()]);
    let w = other_warnings(&s);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "{}:3: 1 newmtl without a material name",
            mtl.display()
        )),
        "{}",
        w[0]
    );
    assert!(
        w[1].starts_with(&format!(
            "{}:7: 1 usemtl statement has no material name",
            path.display()
        )),
        "{}",
        w[1]
    );
}

#[test]
fn triangles_touching_a_non_finite_vertex_are_dropped() {
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv nan 0 0\nv 1 1 inf\nv 1 1 1 1e-45\n\
                f 1 2 3\nf 1 2 4\nf 4 5 1\nf 1 3 2\nf 6 2 3\n";
    let s = load_with_one_warning(
        text,
        4,
        "3 vertices (v) have a coordinate that is not a finite number; 3 triangles that use them are dropped",
    );
    assert_eq!(s.triangle_count(), 2);
    let g = &s.groups[0];
    assert!(g.positions.iter().all(|p| p.is_finite()));
    assert_eq!(s.bounds().max_v(), Vec3::new(1.0, 1.0, 0.0));
    assert_eq!(s.report.degenerate_dropped, 0);
    assert_eq!(other_warnings(&s).len(), 1);
}

#[test]
fn non_finite_normals_and_uvs_load_with_a_warning_each() {
    let text = format!(
        "{SQUARE}vn 0 0 1\nvn 0 nan 1\nvt 0 0\nvt inf 1\n\
         g ok\nf 1//1 2//1 3//1\ng uses_nan\nf 1/1/2 2/2/2 3/1/2\n"
    );
    let s = load_with_one_warning(&text, 6, "1 vertex normal (vn) is not finite");
    assert!(s
        .report
        .warnings
        .iter()
        .any(|w| w.contains(":8: 1 texture coordinate (vt) is not finite")));
    assert_eq!(s.groups[0].normals.len(), 3);
    // The group whose normal was not finite falls back to geometric normals.
    assert!(s.groups[1].normals.is_empty());
    assert!(s.groups[1].uvs.iter().all(|uv| uv.is_finite()));
}

#[test]
fn a_library_named_twice_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl shiny\nKd 0.8 0.8 0.8\nKs 0.5 0.5 0.5\nNs 20\nmap_Kd gone.png\n",
    );
    // Some exporters repeat the mtllib in front of every object.
    let text = format!(
        "mtllib m.mtl\n{SQUARE}g a\nusemtl shiny\nf 1 2 3\nmtllib m.mtl\ng b\nusemtl shiny\nf 1 3 4\n"
    );
    let path = write(dir.path(), "scene.obj", text);
    let s = load(&path);
    assert_eq!(s.materials.len(), 1);
    let w = other_warnings(&s);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("Kd + Ks exceeds 1") && w[1].contains("gone.png"));
}

#[test]
fn one_mtllib_line_may_name_several_libraries() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.mtl", "newmtl red\nKd 1 0 0\n");
    write(dir.path(), "b.mtl", "newmtl blue\nKd 0 0 1\n");
    let text = format!("mtllib a.mtl b.mtl\n{SQUARE}usemtl blue\nf 1 2 3\nusemtl red\nf 1 3 4\n");
    let s = load(&write(dir.path(), "scene.obj", text));
    let names: Vec<&str> = s.materials.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["red", "blue"]);
    assert_eq!(s.groups[0].face_materials, [1, 0]);
    assert!(other_warnings(&s).is_empty(), "{:?}", s.report.warnings);
}

/// tinyobjloader's `mtl filename with whitespace issue46.obj`: names with escaped spaces.
#[test]
fn mtllib_names_may_escape_their_spaces() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "my lib.mtl", "newmtl red\nKd 1 0 0\n");
    let text = format!("mtllib gone.mtl my\\ lib.mtl\n{SQUARE}usemtl red\nf 1 2 3\n");
    let s = load(&write(dir.path(), "scene.obj", text));
    assert_eq!(s.materials.len(), 1);
    assert_eq!(
        s.materials[s.groups[0].face_materials[0] as usize].name,
        "red"
    );
    let w = other_warnings(&s);
    assert!(w.len() == 1 && w[0].contains("gone.mtl"), "{w:?}");
}

/// tinyobjloader's `test-nan.obj`: NaN and infinity as C runtimes print them.
#[test]
fn nan_and_infinity_in_any_spelling_are_non_finite_vertices() {
    let text = "v nan -nan nan\nv inf -inf inf\nv 1.#IND -1.#IND 1.#IND\nv 1.#INF -1.#INF 1.#INF\n\
                v 130.0 0.0 65.0\nv 82.0 0.0 225.0\nv 240.0 0.0 272.0\nv 290.0 0.0 114.0\n\
                f 1 2 3 4\nf 8 7 6 5\n";
    let s = load_with_one_warning(
        text,
        1,
        "4 vertices (v) have a coordinate that is not a finite number; 2 triangles that use them are dropped",
    );
    assert_eq!(s.triangle_count(), 2);
}

#[test]
fn a_utf8_byte_order_mark_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = [b"\xEF\xBB\xBF".as_slice(), SQUARE.as_bytes(), b"f 1 2 3\n"].concat();
    let s = load(&write(dir.path(), "scene.obj", bytes));
    assert_eq!(s.triangle_count(), 1);
    assert_eq!(s.groups[0].positions[0], Vec3::ZERO);
}

/// `gasworks info` shows every warning once, on one stream, whatever produced it.
#[test]
fn info_prints_each_warning_once() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl shiny\nKd 0.8 0.8 0.8\nKs 0.5 0.5 0.5\nNs 20\n",
    );
    let text = format!(
        "mtllib m.mtl\nmtllib gone.mtl\n{SQUARE}g a\nusemtl shiny\nf 1//1 2//1 3//1\nf 1 2\n\
         mtllib m.mtl\nmtllib gone.mtl\ng b\nusemtl nosuch\nf 1 3 4\nl 1 2\n"
    );
    let path = write(dir.path(), "scene.obj", text);
    let out = gasworks_command()
        .args(["info", path.to_str().unwrap()])
        .output()
        .expect("the gasworks binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let scene = load(&path);
    assert_eq!(
        scene.report.warnings.len(),
        7,
        "{:?}",
        scene.report.warnings
    );
    for w in &scene.report.warnings {
        assert_eq!(all.matches(w.as_str()).count(), 1, "{w:?} in:\n{all}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(48)
    ))]

    /// Garbage lines among good ones never panic the loader: it loads, or fails with an
    /// error that names the file.
    #[test]
    fn random_lines_never_panic(lines in proptest::collection::vec(
        prop_oneof![
            3 => "(v|vt|vn|f|o|g|l|p|usemtl|mtllib|s|#)[ \t]{1,2}[-+0-9./ a-z\t]{0,20}",
            3 => Just("f 1 2 3".to_string()),
            2 => Just("v 1 2 3".to_string()),
            // Polygons (convex, concave, crossing, repeated corners) for the ear clipping,
            // smoothing groups for the computed normals, and line continuations.
            2 => "f( -?[1-6]){4,9}",
            2 => "v -?[0-9]\\.[0-9] -?[0-9] -?[0-9]",
            1 => "s (off|0|1|2|on|[0-9]{1,12})",
            1 => "(v|f|#)( [0-9]){0,3} \\\\",
            1 => proptest::collection::vec(any::<u8>(), 0..16)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        ],
        0..60,
    )) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "fuzz.obj", format!("{SQUARE}{}\n", lines.join("\n")));
        match load_obj(&path, &LoadOptions { quiet: true }) {
            Ok(scene) => {
                prop_assert!(scene.triangle_count() > 0);
                for g in &scene.groups {
                    for tri in &g.indices {
                        prop_assert!(tri.iter().all(|&i| (i as usize) < g.positions.len()));
                    }
                    prop_assert!(g.normals.is_empty() || g.normals.len() == g.positions.len());
                    prop_assert!(g.normals.iter().all(|n| n.is_finite()));
                    prop_assert!(g.uvs.is_empty() || g.uvs.len() == g.positions.len());
                    prop_assert_eq!(g.face_materials.len(), g.indices.len());
                }
            }
            Err(e) => prop_assert!(
                e.to_string().contains(&path.display().to_string()),
                "{}", e
            ),
        }
    }
}

/// A comment after a statement of numbers (`f 1 2 3 # quad`) is ignored, as tinyobjloader
/// does; names keep every character, `#` included (3ds Max names materials "Material #25").
#[test]
fn comments_after_numbers_are_ignored_but_names_keep_their_hashes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.mtl", "newmtl Material #25\nKd 1 0 0\n");
    let path = write(
        dir.path(),
        "scene.obj",
        "mtllib m.mtl\n\
         v 0 0 0 # origin\nv 1 0 0\t# x\nv 0 1 0 #y\nv 0 0 1\nvt 0 0 # uv\nvn 0 0 1 #n\n\
         g left\nusemtl Material #25\nf 1 2 3 # first\n\
         g right #2\nf 1 2 4 #\n",
    );
    let s = load(&path);
    assert!(
        s.report.warnings.iter().all(|w| w.contains("no emissive")),
        "{:?}",
        s.report.warnings
    );
    let names: Vec<&str> = s.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["left", "right #2"]);
    assert_eq!(s.triangle_count(), 2);
    let red = s.groups[0].face_materials[0] as usize;
    assert_eq!(s.materials[red].name, "Material #25");
    assert_eq!(s.materials[red].diffuse, Vec3::new(1.0, 0.0, 0.0));
}

/// A backslash at the end of a statement line continues it on the next (the OBJ format's line
/// continuation, which Blender reads); a comment ending in one does not swallow the next line;
/// errors after it still name the file's own line numbers.
#[test]
fn backslash_continues_a_statement_on_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = "# exported from C:\\models\\\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 \\\n  0\nf 1 2 \\\r\n 3 4\n";
    let s = load(&write(dir.path(), "continued.obj", text));
    assert_eq!(s.triangle_count(), 2);
    assert!(other_warnings(&s).is_empty(), "{:?}", s.report.warnings);
    let bad = write(
        dir.path(),
        "bad.obj",
        format!("{text}f 1 2 \\\n  3 \\\n  9\nf 1 2 3\n"),
    );
    let e = load_obj(&bad, &LoadOptions { quiet: true }).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:9: face (f): vertex index 9 is out of range (only 4 defined before this line)",
            bad.display()
        )
    );
}

/// Smoothing groups (`s 1`) in a file without vertex normals: normals are computed, the
/// angle-weighted mean over the faces of one group at each shared position; faces in different
/// groups, or in none (`s off`), keep hard edges. Files with normals keep theirs.
#[test]
fn smoothing_groups_without_normals_get_computed_normals() {
    // A tent: two faces meeting along the ridge from (0, 1, 0) to (1, 1, 0) at a right angle.
    let tent = "v 0 0 1\nv 1 0 1\nv 1 1 0\nv 0 1 0\nv 0 0 -1\nv 1 0 -1\n";
    let faces = |first: &str, second: &str| {
        format!("{tent}g tent\n{first}\nf 1 2 3 4\n{second}\nf 4 3 6 5\n")
    };
    let load_text = |text: &str| {
        let dir = tempfile::tempdir().unwrap();
        let s = load(&write(dir.path(), "tent.obj", text));
        assert!(other_warnings(&s).is_empty(), "{:?}", s.report.warnings);
        s.groups.into_iter().next().unwrap()
    };
    let front = Vec3::new(0.0, 1.0, 1.0).normalize();
    let back = Vec3::new(0.0, 1.0, -1.0).normalize();
    let normal_at = |g: &gasworks::scene::Group, p: Vec3, face_normal: Vec3| -> Vec3 {
        // The normal of the vertex at p used by the face whose own normal is face_normal.
        g.indices
            .iter()
            .filter(|t| {
                let [a, b, c] = t.map(|i| g.positions[i as usize]);
                (b - a).cross(c - a).normalize().dot(face_normal) > 0.999
            })
            .flat_map(|t| t.iter())
            .find(|&&i| g.positions[i as usize] == p)
            .map(|&i| g.normals[i as usize])
            .unwrap()
    };
    let ridge = Vec3::new(0.0, 1.0, 0.0);
    // One smoothing group: the ridge is shared and its normal points straight up.
    let g = load_text(&faces("s 1", ""));
    assert_eq!(g.positions.len(), 6);
    assert!((normal_at(&g, ridge, front) - Vec3::Y).length() < 1e-6);
    assert!((normal_at(&g, ridge, back) - Vec3::Y).length() < 1e-6);
    assert!((normal_at(&g, Vec3::new(0.0, 0.0, 1.0), front) - front).length() < 1e-6);
    // Two groups, or one face in none: a hard edge, each face its own normal along it.
    for (first, second) in [("s 1", "s 2"), ("s 1", "s off"), ("s off", "s 3")] {
        let g = load_text(&faces(first, second));
        // Faces in no group keep a vertex per triangle corner.
        let split = if first == "s 1" && second == "s 2" {
            8
        } else {
            10
        };
        assert_eq!(g.positions.len(), split, "{first} / {second}");
        assert!((normal_at(&g, ridge, front) - front).length() < 1e-6);
        assert!((normal_at(&g, ridge, back) - back).length() < 1e-6);
    }
    // No smoothing group, or normals in the file: nothing computed.
    assert!(load_text(&faces("s off", "")).normals.is_empty());
    let given = load_text(&format!(
        "{tent}vn 1 0 0\ng tent\ns 1\nf 1//1 2//1 3//1 4//1\nf 4//1 3//1 6//1 5//1\n"
    ));
    assert!(given.normals.iter().all(|&n| n == Vec3::X));
}
