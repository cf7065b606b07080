//! The loader keeps the file's `o`/`g` sections as groups, exactly: material switches do not
//! split them, equal names do not merge them, and faces keep their own materials.

use std::path::{Path, PathBuf};

use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::Scene;
use glam::Vec3;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn load(path: &Path) -> Scene {
    load_obj(path, &LoadOptions { quiet: true }).unwrap()
}

const MTL: &str = "newmtl red\nKd 1 0 0\nnewmtl green\nKd 0 1 0\nnewmtl lamp\nKe 5 5 5\n";
const SQUARE: &str = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n";

fn material_names(scene: &Scene, group: usize) -> Vec<&str> {
    scene.groups[group]
        .face_materials
        .iter()
        .map(|&m| scene.materials[m as usize].name.as_str())
        .collect()
}

#[test]
fn a_section_switching_material_twice_stays_one_group_with_per_face_materials() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.mtl", MTL);
    let obj = write(
        dir.path(),
        "s.obj",
        &format!(
            "mtllib s.mtl\n{SQUARE}g box\nusemtl red\nf 1 2 3\nusemtl green\nf 1 3 4\nf 1 2 4\nusemtl red\nf 2 3 4\ng lamp\nusemtl lamp\nf 1 2 3\n"
        ),
    );
    let s = load(&obj);
    assert_eq!(s.groups.len(), 2);
    assert_eq!(s.groups[0].name, "box");
    assert_eq!(s.groups[0].triangle_count(), 4);
    assert_eq!(material_names(&s, 0), ["red", "green", "green", "red"]);
    assert_eq!(material_names(&s, 1), ["lamp"]);
    assert_eq!(s.lights.len(), 1);
    assert!(s.report.warnings.is_empty(), "{:?}", s.report.warnings);
}

#[test]
fn two_sections_with_the_same_name_are_two_groups() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        &format!("{SQUARE}g wall\nf 1 2 3\ng wall\nf 1 3 4\nf 2 3 4\n"),
    );
    let s = load(&obj);
    let groups: Vec<(&str, usize)> = s
        .groups
        .iter()
        .map(|g| (g.name.as_str(), g.triangle_count()))
        .collect();
    assert_eq!(groups, [("wall", 1), ("wall", 2)]);
}

#[test]
fn sections_without_faces_are_not_groups_and_leading_faces_are_unnamed() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        &format!("{SQUARE}f 1 2 3\no car\ng body\nf 1 3 4\ng empty\ng\nf 2 3 4\no trailing\n"),
    );
    let s = load(&obj);
    let names: Vec<&str> = s.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["unnamed", "body", "unnamed"]);
}

#[test]
fn polygons_are_fans_and_relative_indices_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        "g quad\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf -4 -3 -2 -1\n\
         g pentagon\nv 0 0 1\nv 1 0 1\nv 2 1 1\nv 1 2 1\nv 0 1 1\nf 5 6 7 8 9\n",
    );
    let s = load(&obj);
    assert_eq!(s.groups[0].triangle_count(), 2);
    assert_eq!(s.groups[1].triangle_count(), 3);
    // The relative indices name the quad's own four vertices.
    assert_eq!(
        s.groups[0].triangle(0),
        [
            Vec3::ZERO,
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(1.0, 1.0, 0.0)
        ]
    );
    // Fan order: (1 2 3) (1 3 4) (1 4 5).
    let [a, b, c] = s.groups[1].triangle(2);
    assert_eq!(
        [a, b, c],
        [
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(1.0, 2.0, 1.0),
            Vec3::new(0.0, 1.0, 1.0)
        ]
    );
}

#[test]
fn normals_and_uvs_are_kept_only_when_the_whole_group_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        &format!(
            "{SQUARE}vt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\nvn 0 0 2\n\
             g full\nf 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/4/1\n\
             g normals_only\nf 1//1 2//1 3//1\n\
             g mixed\nf 1/1/1 2/2/1 3/3/1\nf 1 3 4\n"
        ),
    );
    let s = load(&obj);
    let full = &s.groups[0];
    assert_eq!(full.normals.len(), full.positions.len());
    assert_eq!(full.uvs.len(), full.positions.len());
    // Normals are normalised on load.
    assert!(full.normals.iter().all(|n| *n == Vec3::Z));
    // Each corner's UV goes with its position.
    for (p, uv) in full.positions.iter().zip(&full.uvs) {
        assert_eq!((p.x, p.y), (uv.x, uv.y));
    }
    let normals_only = &s.groups[1];
    assert_eq!(normals_only.normals.len(), normals_only.positions.len());
    assert!(normals_only.uvs.is_empty());
    let mixed = &s.groups[2];
    assert!(mixed.normals.is_empty() && mixed.uvs.is_empty());
    assert!(s
        .report
        .warnings
        .iter()
        .any(|w| w.contains("group mixed") && w.contains("only some faces")));
}

#[test]
fn zero_length_normals_fall_back_to_geometric_normals_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        &format!("{SQUARE}vn 0 0 0\ng g\nf 1//1 2//1 3//1\n"),
    );
    let s = load(&obj);
    assert!(s.groups[0].normals.is_empty());
    assert!(s.report.warnings.iter().any(|w| w.contains("zero length")));
}

#[test]
fn unknown_material_gets_the_default_with_a_warning_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.mtl", MTL);
    let obj = write(
        dir.path(),
        "s.obj",
        &format!("mtllib s.mtl\n{SQUARE}g g\nusemtl nosuch\nf 1 2 3\nusemtl red\nf 1 3 4\n"),
    );
    let s = load(&obj);
    assert_eq!(material_names(&s, 0), ["gasworks_default", "red"]);
    let expected = format!("{}:7: usemtl nosuch", obj.display());
    assert!(
        s.report.warnings.iter().any(|w| w.contains(&expected)),
        "{:?}",
        s.report.warnings
    );
}

#[test]
fn a_missing_mtl_file_is_a_warning_and_the_default_material() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        &format!("mtllib gone.mtl\n{SQUARE}g g\nusemtl red\nf 1 2 3\n"),
    );
    let s = load(&obj);
    assert_eq!(s.materials.len(), 1);
    assert_eq!(material_names(&s, 0), ["gasworks_default"]);
    let w = &s.report.warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("s.obj") && w.contains("gone.mtl") && w.contains("cannot be read")),
        "{w:?}"
    );
}

#[test]
fn faces_without_usemtl_get_the_default_material() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(dir.path(), "s.obj", &format!("{SQUARE}f 1 2 3\n"));
    let s = load(&obj);
    assert_eq!(s.materials, [gasworks::scene::Material::default_diffuse()]);
    // No emitter: the default environment, said in a warning.
    assert!(s.environment.is_some());
}

#[test]
fn degenerate_triangles_are_dropped_and_counted_but_groups_stay() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        "v 0 0 0\nv 1 0 0\nv 2 0 0\nv 0 1 0\ng flat\nf 1 2 3\nf 1 1 2\ng ok\nf 1 2 4\n",
    );
    let s = load(&obj);
    assert_eq!(s.report.degenerate_dropped, 2);
    assert_eq!(s.groups.len(), 2);
    assert_eq!(s.groups[0].triangle_count(), 0);
    assert_eq!(s.groups[1].triangle_count(), 1);
}

#[test]
fn polylines_and_vertex_colours_are_dropped_with_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "s.obj",
        "v 0 0 0 1 0 0\nv 1 0 0 1 0 0\nv 0 1 0 1 0 0\ng lines\nl 1 2 3\ng tri\nf 1 2 3\n",
    );
    let s = load(&obj);
    // A section of polylines only holds no faces: not a group.
    assert_eq!(s.groups.len(), 1);
    assert_eq!(s.groups[0].name, "tri");
    let w = s.report.warnings.join("\n");
    assert!(w.contains("1 polyline"), "{w}");
    assert!(w.contains("vertex colours of 3 vertices"), "{w}");
}

#[test]
fn crlf_tabs_comments_and_latin1_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes =
        b"# caf\xe9\r\nv 0 0 0\r\nv 1 0 0\r\nv 0 1 0\r\n\tg\ttabbed name \r\nf 1 2 3\r\n".to_vec();
    bytes.extend_from_slice(b"f 1 2 3");
    let path = dir.path().join("s.obj");
    std::fs::write(&path, bytes).unwrap();
    let s = load(&path);
    assert_eq!(s.groups.len(), 1);
    assert_eq!(s.groups[0].name, "tabbed name");
    assert_eq!(s.groups[0].triangle_count(), 2);
}
